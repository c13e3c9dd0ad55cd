//! Inputs a new user gets wrong on the way from `ral plan -o` to `ral
//! apply`: a saved plan where a manifest is read, or a manifest whose only
//! entries are malformed. Each is told exactly what is wrong, never the
//! refusal of an empty manifest, and nothing runs.

use std::io::Write;
use std::process::Stdio;

use crate::plans::Bench;

/// A bench where ral created alpha[a1], and a saved plan to give it beta[b1].
fn with_saved_plan() -> (Bench, String, String) {
    let bench = Bench::new();
    let first = bench.manifest("first.yaml", "alpha:\n  a1: {value: one}\n");
    bench.ral("apply", &[&first]).expect(0);
    let next = bench.manifest(
        "next.yaml",
        "alpha:\n  a1: {value: one}\nbeta:\n  b1: {value: x}\n",
    );
    let plan = bench
        .manifests
        .path()
        .join("next.plan")
        .to_str()
        .unwrap()
        .to_owned();
    bench.ral("plan", &["-o", &plan, &next]).expect(0);
    bench.take_calls();
    (bench, plan, next)
}

/// Read as a manifest (on standard input, which is never a saved plan).
const SAVED: &str = "a saved plan (written by ral plan -o), not a manifest: apply it alone";
/// Named as a file: refused before anything is read as a manifest.
const ALONE: &str = "ral apply takes it alone";

#[test]
fn a_saved_plan_given_to_ral_plan_is_named_a_saved_plan() {
    let (bench, plan, _) = with_saved_plan();
    bench
        .ral("plan", &[&plan])
        .expect(2)
        .stderr_has(&format!("{plan} is a saved plan: {ALONE}"));
    assert_eq!(bench.take_calls(), Vec::<String>::new(), "nothing ran");
}

#[test]
fn a_saved_plan_beside_a_manifest_is_one_problem_and_nothing_runs() {
    let (bench, plan, next) = with_saved_plan();
    let refused = bench.ral("apply", &[&plan, &next]);
    refused.expect(2).stderr_has(ALONE);
    assert!(
        !refused.stderr.contains("must map resource names"),
        "one problem, not one per field of the plan: {}",
        refused.stderr
    );
    assert_eq!(bench.take_calls(), Vec::<String>::new(), "nothing ran");
    assert!(bench.store("beta").as_object().is_none_or(|b| b.is_empty()));
}

#[test]
fn a_saved_plan_on_standard_input_is_named_a_saved_plan() {
    let (bench, plan, _) = with_saved_plan();
    let text = std::fs::read(&plan).unwrap();
    let mut child = bench
        .command("apply", &["-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(&text).unwrap();
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains(&format!("-:1: {SAVED}")), "{stderr}");
    assert_eq!(bench.take_calls(), Vec::<String>::new(), "nothing ran");
}

#[test]
fn a_manifest_of_malformed_entries_reports_them_not_an_empty_manifest() {
    let (bench, _, _) = with_saved_plan();
    let wrong = bench.manifest("wrong.yaml", "alpha: 2\n");
    for mode in ["plan", "apply"] {
        let refused = bench.ral(mode, &[&wrong]);
        refused
            .expect(2)
            .stderr_has(&format!("{wrong}:1: 'alpha' must map resource names"));
        assert!(
            !refused.stderr.contains("no resource is declared"),
            "{}",
            refused.stderr
        );
    }
    assert_eq!(bench.take_calls(), Vec::<String>::new(), "nothing ran");
}

#[test]
fn a_saved_plan_applied_to_another_root_names_the_root_it_was_made_for() {
    let (bench, plan, _) = with_saved_plan();
    let other = Bench::new();
    let refused = other.ral("apply", &[&plan]);
    refused.expect(2).stderr_has(&format!(
        "it was made for another state store (store {}, of the root {}), not for ",
        saved_store_id(&plan),
        bench.sandbox.root().display()
    ));
    assert_eq!(other.take_calls(), Vec::<String>::new(), "nothing ran");
}

/// The store identity a saved plan names.
fn saved_store_id(plan: &str) -> String {
    let text = std::fs::read_to_string(plan).unwrap();
    let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
    doc["plan"]["store"].as_str().unwrap().to_owned()
}

#[test]
fn a_plan_is_never_written_over_its_own_manifest() {
    let (bench, _, next) = with_saved_plan();
    let before = std::fs::read_to_string(&next).unwrap();
    let dir = bench.manifests.path().to_str().unwrap().to_owned();
    let aliased = format!("{dir}/./next.yaml");
    for out in [next.as_str(), aliased.as_str()] {
        bench
            .ral("plan", &["-o", out, &next])
            .expect(2)
            .stderr_has(&format!("{out}: it is the manifest {next}"));
    }
    assert_eq!(std::fs::read_to_string(&next).unwrap(), before);
    assert_eq!(bench.take_calls(), Vec::<String>::new(), "nothing ran");
}

#[test]
fn a_file_system_error_is_told_once() {
    let (bench, _, next) = with_saved_plan();
    let missing = bench.manifests.path().join("missing/p.plan");
    let refused = bench.ral("plan", &["-o", missing.to_str().unwrap(), &next]);
    refused.expect(2);
    assert_eq!(
        refused.stderr.matches("No such file or directory").count(),
        1,
        "{}",
        refused.stderr
    );
}
