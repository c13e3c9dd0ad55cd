//! The runner of the property tests that check what ral writes against
//! the system's own readers (account_cases.rs, mount_readers.rs,
//! host_readers.rs). Each runs few cases by default, to keep the suite
//! fast; `RAL_PROPERTY_CASES=N` runs N cases of each instead, to hunt
//! for the rare value a small run misses. Every run says its seed, and
//! `PROPTEST_RNG_SEED=SEED` runs the same cases again.

use std::hash::{BuildHasher, Hasher};

use proptest::test_runner::{Config, RngSeed, TestRunner};

/// Characters no text attribute of the native types takes (control,
/// format and line separator characters), which the generators of the
/// hosts and fstab tests draw now and then: each must be refused.
pub const REFUSED: &[char] = &[
    '\t', '\n', '\r', '\x0b', '\x01', '\x7f', '\u{85}', '\u{9f}', '\u{200b}', '\u{202e}',
    '\u{feff}', '\u{2028}', '\0',
];

/// The variable that overrides every property test's number of cases.
pub const CASES_VAR: &str = "RAL_PROPERTY_CASES";

/// A runner of `default_cases` cases (or `RAL_PROPERTY_CASES`), with no
/// file of failures kept, and the seed its cases come from: the one
/// `PROPTEST_RNG_SEED` gives, else a new one each run.
pub fn runner(default_cases: u32) -> (TestRunner, u64) {
    let cases = match std::env::var(CASES_VAR) {
        Ok(text) => text
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("{CASES_VAR}={text:?} is not a number of cases")),
        Err(_) => default_cases,
    };
    // Config::default() reads the PROPTEST_ variables.
    let config = Config::default();
    let seed = match config.rng_seed {
        RngSeed::Fixed(seed) => seed,
        // A random seed of the standard library's (no other source is
        // needed), kept so that a failure can be repeated.
        RngSeed::Random => std::collections::hash_map::RandomState::new()
            .build_hasher()
            .finish(),
    };
    let config = Config {
        cases,
        rng_seed: RngSeed::Fixed(seed),
        failure_persistence: None,
        ..config
    };
    (TestRunner::new(config), seed)
}

/// How a run is shown beside its counts: its cases and seed, and how to
/// repeat it.
pub fn describe(runner: &TestRunner, seed: u64) -> String {
    format!(
        "{} cases from seed {seed} ({CASES_VAR}={} PROPTEST_RNG_SEED={seed} repeats them)",
        runner.config().cases,
        runner.config().cases
    )
}
