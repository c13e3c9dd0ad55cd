//! `ral check`'s round trip catches providers that corrupt their file or
//! drop a change: fixture key = value providers with one bug each (a name
//! read as a pattern, a value's line break splitting the line, a dropped
//! attribute, a change reported but not made) fail, the correct one
//! passes; and the report says which root it used. When nothing is
//! listed, the round trip works on a resource made from the metadata, and
//! what could still not run is named, never passed over in silence.

use std::path::Path;
use std::process::Command;

use crate::support::{fixtures_dir, run, Run};

fn kv() -> std::path::PathBuf {
    fixtures_dir().join("check/kv")
}

fn check(provider: &str, seed: bool) -> Run {
    check_on(provider, seed.then(|| kv().join("seed")).as_deref())
}

fn check_on(provider: &str, seed: Option<&Path>) -> Run {
    let mut command = Command::new(env!("CARGO_BIN_EXE_ral"));
    command.args(["check", "--slow", "60"]);
    if let Some(seed) = seed {
        command.arg("--seed").arg(seed);
    }
    command.arg(kv().join("providers").join(format!("{provider}.prov")));
    run(&mut command)
}

/// A seed with the store's directory but no entries in it: the listing
/// succeeds and is empty.
fn empty_seed() -> tempfile::TempDir {
    let seed = tempfile::tempdir().unwrap();
    std::fs::create_dir(seed.path().join("etc")).unwrap();
    seed
}

#[test]
fn a_correct_provider_passes_the_round_trip_and_the_report_says_what_ran() {
    let run = check("kv", true);
    run.expect(0)
        .stdout_has("round trip: created 'ralcheck1' (ensure, value); changed value; two lines 'ralcheck1' refused: kv::kv: update reported an error: a value must be one line; deleted 'ralcheck1'; created and deleted 'ral check.*[x]$(y)'")
        .stdout_has(&format!(
            "(a fresh copy of --seed {}, removed afterwards)",
            kv().join("seed").display()
        ));
}

#[test]
fn each_bug_is_caught() {
    for (provider, finding) in [
        (
            "kv_regex",
            "find 'a.ice' reports the resource 'alice': the name was matched as a pattern",
        ),
        ("kv_regex", "deleting 'a.ice' changed or deleted 'alice'"),
        (
            "kv_newline",
            "two lines 'ralcheck1': kv_newline::kv_newline: update: line 4: expected 'key: value', found 'check'",
        ),
        (
            "kv_drops",
            "resource 'ralcheck1': the answer leaves out 'value', which the request set to '1'",
        ),
        (
            "kv_drops",
            "'ralcheck1' was created with value '1', but find reports ''",
        ),
        (
            "kv_fakes",
            "'ralcheck1' was changed with value 'ral-check-changed', but find reports '1'",
        ),
    ] {
        check(provider, true)
            .expect(1)
            .stdout_has(&format!("FAIL  {}", kv().join("providers").join(format!("{provider}.prov")).display()))
            .stdout_has(finding);
    }
}

#[test]
fn an_empty_root_is_named_as_the_likely_cause_of_a_failed_listing() {
    check("kv", false)
        .expect(1)
        .stdout_has("here the root is empty: pass --seed DIR")
        .stdout_has("(empty (no --seed), removed afterwards)");
}

#[test]
fn a_metadata_file_or_a_missing_file_is_a_usage_error() {
    let yaml = kv().join("providers/kv.yaml");
    run(Command::new(env!("CARGO_BIN_EXE_ral"))
        .arg("check")
        .arg(&yaml))
    .expect(2)
    .stderr_has("kv.yaml is a provider's metadata; check the provider itself")
    .stderr_has("kv.prov");
    run(Command::new(env!("CARGO_BIN_EXE_ral")).args(["check", "/nonexistent/x.prov"]))
        .expect(2)
        .stderr_has("/nonexistent/x.prov: no such file");
}

#[test]
fn the_round_trip_never_runs_on_a_root_given_with_root() {
    // --root may be the live system: nothing is created or deleted there.
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir(root.path().join("etc")).unwrap();
    std::fs::copy(
        kv().join("seed/etc/kv.conf"),
        root.path().join("etc/kv.conf"),
    )
    .unwrap();
    let before = std::fs::read_to_string(root.path().join("etc/kv.conf")).unwrap();
    run(Command::new(env!("CARGO_BIN_EXE_ral"))
        .args(["check", "--slow", "60", "--root"])
        .arg(root.path())
        .arg(kv().join("providers/kv_regex.prov")))
    .expect(0)
    .stdout_has(&format!(
        "PARTIAL  {}",
        kv().join("providers/kv_regex.prov").display()
    ))
    .stdout_has("not run: round trip: it runs only on a temporary copy, not on --root")
    .stdout_has("0 of 1 provider(s) clean, 1 not fully checked (see 'not run')");
    assert_eq!(
        std::fs::read_to_string(root.path().join("etc/kv.conf")).unwrap(),
        before
    );
}

#[test]
fn with_nothing_listed_the_round_trip_works_on_a_resource_made_from_the_metadata() {
    let seed = empty_seed();
    check_on("kv", Some(seed.path()))
        .expect(0)
        .stdout_has(&format!("ok  {}", kv().join("providers/kv.prov").display()))
        .stdout_has("round trip: nothing listed: created 'ralcheck0' from the metadata (ensure); created 'ralcheck1' (ensure, value); changed value; two lines 'ralcheck1' refused: kv::kv: update reported an error: a value must be one line; deleted 'ralcheck1'; created and deleted 'ral check.*[x]$(y)'; deleted 'ralcheck0'")
        .stdout_has("1 of 1 provider(s) clean");
}

#[test]
fn buggy_providers_with_nothing_listed_are_not_called_clean() {
    // kv_regex finds no entry whose value is empty, as the one made from
    // the metadata (ensure alone) is: its round trip cannot go on, and
    // both the finding and what did not run are said.
    let seed = empty_seed();
    let run = check_on("kv_regex", Some(seed.path()));
    run.expect(1)
        .stdout_has(&format!("FAIL  {}", kv().join("providers/kv_regex.prov").display()))
        .stdout_has("'ralcheck0' was created, but find does not report it")
        .stdout_has("not run: find of a listed name, update, round trip: nothing is listed to work on, and find does not report 'ralcheck0', created from the metadata")
        .stdout_has("hint: pass --seed DIR, a directory holding resources of this type")
        .stdout_has("0 of 1 provider(s) clean");
    for (provider, finding) in [
        (
            "kv_drops",
            "resource 'ralcheck1': the answer leaves out 'value', which the request set to ''",
        ),
        (
            "kv_fakes",
            "'ralcheck1' was changed with value 'ral-check-changed', but find reports ''",
        ),
        (
            "kv_newline",
            "two lines 'ralcheck1': kv_newline::kv_newline: update: line 4: expected 'key: value', found 'check'",
        ),
    ] {
        check_on(provider, Some(seed.path()))
            .expect(1)
            .stdout_has(&format!("FAIL  {}", kv().join("providers").join(format!("{provider}.prov")).display()))
            .stdout_has("nothing listed: created 'ralcheck0' from the metadata")
            .stdout_has(finding);
    }
}

#[test]
fn checks_that_find_nothing_to_work_on_are_named_as_not_run() {
    // On --root nothing is made up: with an empty store, noop, update and
    // the round trip have nothing to work on, and the report says so.
    let root = empty_seed();
    run(Command::new(env!("CARGO_BIN_EXE_ral"))
        .args(["check", "--slow", "60", "--root"])
        .arg(root.path())
        .arg(kv().join("providers/kv_regex.prov")))
    .expect(0)
        .stdout_has(&format!(
            "PARTIAL  {}",
            kv().join("providers/kv_regex.prov").display()
        ))
        .stdout_has("not run: find of a listed name, update: nothing is listed to work on")
        .stdout_has("hint: check on a root that holds resources of this type, or on a copy of one with --seed DIR")
        .stdout_has("not run: round trip: it runs only on a temporary copy, not on --root")
        .stdout_has("0 of 1 provider(s) clean, 1 not fully checked (see 'not run')");
    assert_eq!(
        std::fs::read_to_string(root.path().join("etc/kv.conf")).unwrap(),
        "",
        "nothing was created on --root"
    );
    // A provider whose resources cannot be created (an ensure without
    // absent, as libral's services) gets none made up.
    let initd = fixtures_dir().join("libral/providers/initd.prov");
    let seed = empty_seed();
    run(Command::new(env!("CARGO_BIN_EXE_ral"))
        .args(["check", "--slow", "60", "--seed"])
        .arg(seed.path())
        .arg(&initd))
    .expect(0)
    .stdout_has(&format!("PARTIAL  {}", initd.display()))
    .stdout_has("not run: find of a listed name, update: nothing is listed to work on, and none can be created (its ensure has no 'absent')")
    .stdout_has("hint: pass --seed DIR")
    .stdout_has("0 of 1 provider(s) clean, 1 not fully checked");
}

#[test]
fn every_settable_attribute_is_changed_and_read_back_arrays_and_hashes_too() {
    // A json provider with an array, a hash and a string: the correct one
    // passes with each changed; one that keeps the old array on a change
    // (and says nothing) fails, naming the attribute and both values.
    let aliases = fixtures_dir().join("check/aliases");
    let check = |provider: &str| {
        run(Command::new(env!("CARGO_BIN_EXE_ral"))
            .args(["check", "--slow", "60", "--seed"])
            .arg(aliases.join("seed"))
            .arg(aliases.join("providers").join(format!("{provider}.prov"))))
    };
    check("aliases")
        .expect(0)
        .stdout_has("changed recipients; changed options; changed note;");
    check("aliases_keeps_arrays")
        .expect(1)
        .stdout_has(
            "round trip: 'ralcheck1' was changed with recipients 'ral-check-changed', but find \
             reports 'root'",
        )
        .stdout_has("0 of 1 provider(s) clean");
}
