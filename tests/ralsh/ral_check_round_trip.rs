//! `ral check`'s round trip catches providers that corrupt their file or
//! drop a change: fixture key = value providers with one bug each (a name
//! read as a pattern, a value's line break splitting the line, a dropped
//! attribute, a change reported but not made) fail, the correct one
//! passes; and the report says which root it used.

use std::process::Command;

use crate::support::{fixtures_dir, run, Run};

fn kv() -> std::path::PathBuf {
    fixtures_dir().join("check/kv")
}

fn check(provider: &str, seed: bool) -> Run {
    let mut command = Command::new(env!("CARGO_BIN_EXE_ral"));
    command.args(["check", "--slow", "60"]);
    if seed {
        command.arg("--seed").arg(kv().join("seed"));
    }
    command.arg(kv().join("providers").join(format!("{provider}.prov")));
    run(&mut command)
}

#[test]
fn a_correct_provider_passes_the_round_trip_and_the_report_says_what_ran() {
    let run = check("kv", true);
    run.expect(0)
        .stdout_has("round trip: created 'ralcheck1' (ensure, value); changed value; two lines 'ralcheck1' refused; deleted 'ralcheck1'; created and deleted 'ral check.*[x]$(y)'")
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
    .stdout_has("round trip: not run: it runs only on a temporary copy, not on --root");
    assert_eq!(
        std::fs::read_to_string(root.path().join("etc/kv.conf")).unwrap(),
        before
    );
}
