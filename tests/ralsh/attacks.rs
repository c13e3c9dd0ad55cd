//! Findings of an attack on the state store, saved plans and sensitive
//! values: each test shows one way in that is now closed (or, marked
//! ignored, one that is still open).

use crate::plans::Bench;
use crate::sensitive_env::run_with_stdin;
use crate::support::Sandbox;

/// `ralsh --attrs-stdin` with a JSON object naming one attribute twice:
/// refused as the command line refuses `comment=a comment=b`, not read as
/// its last value (a reader that keeps the first would set another).
#[test]
fn attrs_stdin_refuses_an_attribute_given_twice() {
    for input in [
        r#"{"comment": "a", "comment": "b"}"#,
        r#"{"password": "a", "password": "b"}"#,
    ] {
        let sandbox = Sandbox::new();
        let run = run_with_stdin(
            &mut sandbox.fixture_command(&["--attrs-stdin", "envsecret", "d"]),
            input,
        );
        run.expect(2).stderr_has("is given twice");
        assert!(!sandbox.root().join("made.d").exists(), "{input}: it ran");
    }
}

/// `ral plan -o FILE` names one of its own manifests: refused, and the
/// manifest is left as it was (it was replaced by the plan, which then
/// could never apply: its manifests had changed).
#[test]
fn plan_o_never_writes_over_a_manifest() {
    let bench = Bench::new();
    let text = "beta:\n  b1: {value: x}\n";
    let m = bench.manifest("m.yaml", text);
    bench
        .ral("plan", &["-o", &m, &m])
        .expect(2)
        .stderr_has("it is the manifest");
    assert_eq!(std::fs::read_to_string(&m).unwrap(), text);
    // Through another path to the same file too.
    let dir = bench.manifests.path().to_str().unwrap().to_owned();
    let other = format!("{dir}/./m.yaml");
    bench
        .ral("plan", &["-o", &other, &m])
        .expect(2)
        .stderr_has("it is the manifest");
    assert_eq!(std::fs::read_to_string(&m).unwrap(), text);
}

/// `ral plan -o FILE` names the state store's database, key or lock (in a
/// root, or given with --state): refused, and the store still works (the
/// database was replaced by the plan, and every record of what ral
/// created with it).
#[test]
fn plan_o_never_writes_over_the_state_stores_files() {
    let bench = Bench::new();
    let m = bench.manifest("m.yaml", "beta:\n  b1: {value: x}\n");
    bench.ral("apply", &[&m]).expect(0);
    let dir = bench.sandbox.root().join("var/lib/ral");
    for name in ["state.db", "state.db.key", "state.db.lock", "state.db-wal"] {
        let out = dir.join(name);
        bench
            .ral("plan", &["-o", out.to_str().unwrap(), &m])
            .expect(2)
            .stderr_has("the state store's");
        let run = bench.ral("plan", &[&m]);
        run.expect(0).stdout_has("1 unchanged");
    }
    let state = bench.manifests.path().join("s.db");
    let state = state.to_str().unwrap();
    bench.ral("apply", &["--state", state, &m]).expect(0);
    for out in [state.to_owned(), format!("{state}.key")] {
        bench
            .ral("plan", &["--state", state, "-o", &out, &m])
            .expect(2)
            .stderr_has("the state store's");
    }
    bench.ral("plan", &["--state", state, &m]).expect(0);
    // Beside a --state file, other files are the user's.
    let beside = bench.manifests.path().join("p.plan");
    bench
        .ral(
            "plan",
            &["--state", state, "-o", beside.to_str().unwrap(), &m],
        )
        .expect(0);
}
