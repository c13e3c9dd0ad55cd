//! schemas/ral-plan.schema.json rejects what `ral plan -j` and `ral apply
//! -j` never print: real documents from the plan fixtures (and so valid),
//! broken one way at a time. Every other test checks only that real
//! output is accepted, which a schema of `{}` would pass.

use serde_json::{json, Value as Json};

use crate::mutations::{assert_each_edit_rejected, Edit};
use crate::plans::{plan_json, Bench};
use crate::support::plan_schema;

const MANIFEST: &str = "\
gamma:
  /srv: {value: top}
alpha:
  a1: {value: one, needs: b1}
beta:
  b1: {value: three}
";

/// The index of `resource`'s task in a plan document.
fn task_index(doc: &Json, resource: &str) -> usize {
    doc["plan"]["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .position(|t| t["resource"] == resource)
        .unwrap_or_else(|| panic!("no task for {resource} in {doc:#}"))
}

/// Edits that break any plan document whose task `t` has a change and a
/// requirement.
fn plan_edits(t: usize) -> Vec<(String, Edit)> {
    let task = |rest: &str| format!("/plan/tasks/{t}{rest}");
    let mut edits = vec![
        ("no plan".to_owned(), Edit::Whole(json!({}))),
        (
            "a plan that is text".to_owned(),
            Edit::set("/plan", json!("plan")),
        ),
        (
            "a plan and an error".to_owned(),
            Edit::set("/error", json!({"message": "x", "problems": []})),
        ),
        (
            "an unknown top-level key".to_owned(),
            Edit::set("/extra", json!(1)),
        ),
        (
            "an unknown plan key".to_owned(),
            Edit::set("/plan/extra", json!(1)),
        ),
        (
            "an id not a string".to_owned(),
            Edit::set("/plan/id", json!(5)),
        ),
        ("an empty id".to_owned(), Edit::set("/plan/id", json!(""))),
        (
            "a task's state as the plan's".to_owned(),
            Edit::set("/plan/state", json!("Success")),
        ),
        (
            "tasks not a list".to_owned(),
            Edit::set("/plan/tasks", json!({})),
        ),
        (
            "a negative count".to_owned(),
            Edit::set("/plan/counts/create", json!(-1)),
        ),
        (
            "a count as text".to_owned(),
            Edit::set("/plan/counts/failed", json!("1")),
        ),
        (
            "a fractional count".to_owned(),
            Edit::set("/plan/counts/skipped", json!(1.5)),
        ),
        (
            "an unknown count".to_owned(),
            Edit::set("/plan/counts/moved", json!(0)),
        ),
        (
            "an unknown outcome count".to_owned(),
            Edit::set("/plan/counts/done/moved", json!(0)),
        ),
        (
            "a negative outcome count".to_owned(),
            Edit::set("/plan/counts/done/failed", json!(-1)),
        ),
        (
            "outcome counts that are a number".to_owned(),
            Edit::set("/plan/counts/done", json!(3)),
        ),
        (
            "a task that is text".to_owned(),
            Edit::set(task(""), json!("alpha[a1]")),
        ),
        (
            "a task id of 0".to_owned(),
            Edit::set(task("/id"), json!(0)),
        ),
        (
            "a task id as text".to_owned(),
            Edit::set(task("/id"), json!("1")),
        ),
        (
            "a resource not a string".to_owned(),
            Edit::set(task("/resource"), json!(5)),
        ),
        (
            "an unknown action".to_owned(),
            Edit::set(task("/action"), json!("update")),
        ),
        (
            "the plan's state as a task's".to_owned(),
            Edit::set(task("/state"), json!("Successful")),
        ),
        (
            "changes not a list".to_owned(),
            Edit::set(task("/changes"), json!({})),
        ),
        (
            "a change that is text".to_owned(),
            Edit::set(task("/changes/0"), json!("ensure")),
        ),
        (
            "an attr not a string".to_owned(),
            Edit::set(task("/changes/0/attr"), json!(5)),
        ),
        (
            "an unknown change key".to_owned(),
            Edit::set(task("/changes/0/colour"), json!(1)),
        ),
        (
            "a requirement of 0".to_owned(),
            Edit::set(task("/requires/0"), json!(0)),
        ),
        (
            "a requirement by name".to_owned(),
            Edit::set(task("/requires/0"), json!("beta[b1]")),
        ),
        (
            "negative seconds".to_owned(),
            Edit::set(task("/seconds"), json!(-1)),
        ),
        (
            "seconds as text".to_owned(),
            Edit::set(task("/seconds"), json!("0.1")),
        ),
        (
            "drifted not a boolean".to_owned(),
            Edit::set(task("/drifted"), json!("yes")),
        ),
        (
            "an unknown task key".to_owned(),
            Edit::set(task("/extra"), json!(1)),
        ),
        (
            "an error that is text".to_owned(),
            Edit::set(task("/error"), json!("boom")),
        ),
    ];
    for key in ["id", "state", "tasks", "counts"] {
        edits.push((
            format!("a plan without {key}"),
            Edit::remove(format!("/plan/{key}")),
        ));
    }
    for key in [
        "create",
        "change",
        "remove",
        "unknown",
        "unchanged",
        "success",
        "failed",
        "skipped",
        "stopped",
    ] {
        edits.push((
            format!("counts without {key}"),
            Edit::remove(format!("/plan/counts/{key}")),
        ));
    }
    for key in [
        "created",
        "changed",
        "removed",
        "run",
        "refreshed",
        "failed",
        "skipped",
        "stopped",
    ] {
        edits.push((
            format!("outcome counts without {key}"),
            Edit::remove(format!("/plan/counts/done/{key}")),
        ));
    }
    for key in [
        "id", "resource", "type", "name", "provider", "action", "changes", "requires", "state",
        "error", "seconds",
    ] {
        edits.push((
            format!("a task without {key}"),
            Edit::remove(task(&format!("/{key}"))),
        ));
    }
    for key in ["attr", "is", "was"] {
        edits.push((
            format!("a change without {key}"),
            Edit::remove(task(&format!("/changes/0/{key}"))),
        ));
    }
    edits
}

#[test]
fn the_plan_schema_rejects_wrong_plans() {
    let bench = Bench::new();
    let m = bench.manifest("m.yaml", MANIFEST);
    let run = bench.ral("plan", &["-j", &m]);
    run.expect(0);
    let doc = plan_json(&run);
    let t = task_index(&doc, "alpha[a1]");
    assert_eq!(
        doc["plan"]["tasks"][t]["requires"]
            .as_array()
            .unwrap()
            .len(),
        1,
        "{doc}"
    );
    assert_each_edit_rejected(plan_schema(), &doc, plan_edits(t));
}

#[test]
fn the_plan_schema_rejects_wrong_applies_and_task_errors() {
    // b1 fails (an error of kind provider), a1 is skipped (prerequisite).
    let bench = Bench::new();
    bench.sandbox.write("fail", "b1\n");
    let m = bench.manifest("m.yaml", MANIFEST);
    let run = bench.ral("apply", &["-j", &m]);
    run.expect(1);
    let doc = plan_json(&run);
    let t = task_index(&doc, "alpha[a1]");
    let failed = task_index(&doc, "beta[b1]");
    assert_eq!(
        doc["plan"]["tasks"][failed]["error"]["kind"], "provider",
        "{doc}"
    );
    let error = |rest: &str| format!("/plan/tasks/{failed}/error{rest}");
    let mut edits = plan_edits(t);
    edits.extend([
        (
            "an unknown error kind".to_owned(),
            Edit::set(error("/kind"), json!("fatal")),
        ),
        (
            "an error message not a string".to_owned(),
            Edit::set(error("/message"), json!(5)),
        ),
        (
            "an error without kind".to_owned(),
            Edit::remove(error("/kind")),
        ),
        (
            "an error without message".to_owned(),
            Edit::remove(error("/message")),
        ),
        (
            "an unknown error key".to_owned(),
            Edit::set(error("/extra"), json!(1)),
        ),
        ("an empty error".to_owned(), Edit::set(error(""), json!({}))),
    ]);
    assert_each_edit_rejected(plan_schema(), &doc, edits);
}

#[test]
fn the_plan_error_schema_rejects_wrong_documents() {
    let bench = Bench::new();
    let m = bench.manifest(
        "m.yaml",
        "nosuchtype:\n  x: {}\nalpha:\n  a1: {colour: red}\n",
    );
    let run = bench.ral("plan", &["-j", &m]);
    run.expect(2);
    let doc = plan_json(&run);
    assert_eq!(
        doc["error"]["problems"].as_array().unwrap().len(),
        2,
        "{doc}"
    );
    let mut edits = vec![
        (
            "an error that is text".to_owned(),
            Edit::set("/error", json!("boom")),
        ),
        (
            "an error and a plan".to_owned(),
            Edit::set("/plan", json!({})),
        ),
        (
            "an unknown top-level key".to_owned(),
            Edit::set("/extra", json!(1)),
        ),
        (
            "an unknown error key".to_owned(),
            Edit::set("/error/extra", json!(1)),
        ),
        (
            "a message not a string".to_owned(),
            Edit::set("/error/message", json!(5)),
        ),
        (
            "problems not a list".to_owned(),
            Edit::set("/error/problems", json!({})),
        ),
        (
            "a problem that is text".to_owned(),
            Edit::set("/error/problems/0", json!("x")),
        ),
        (
            "a file not a string".to_owned(),
            Edit::set("/error/problems/0/file", json!(5)),
        ),
        (
            "a negative line".to_owned(),
            Edit::set("/error/problems/0/line", json!(-1)),
        ),
        (
            "a line as text".to_owned(),
            Edit::set("/error/problems/0/line", json!("2")),
        ),
        (
            "a fractional line".to_owned(),
            Edit::set("/error/problems/0/line", json!(2.5)),
        ),
        (
            "a problem message not a string".to_owned(),
            Edit::set("/error/problems/0/message", json!(null)),
        ),
        (
            "an unknown problem key".to_owned(),
            Edit::set("/error/problems/0/extra", json!(1)),
        ),
    ];
    for key in ["message", "problems"] {
        edits.push((
            format!("an error without {key}"),
            Edit::remove(format!("/error/{key}")),
        ));
    }
    for key in ["file", "line", "message"] {
        edits.push((
            format!("a problem without {key}"),
            Edit::remove(format!("/error/problems/0/{key}")),
        ));
    }
    assert_each_edit_rejected(plan_schema(), &doc, edits);
}

#[test]
fn a_report_stored_before_outcome_counts_still_matches() {
    let bench = Bench::new();
    let m = bench.manifest("m.yaml", MANIFEST);
    let mut doc = plan_json(&bench.ral("plan", &["-j", &m]));
    let counts = doc["plan"]["counts"].as_object_mut().unwrap();
    assert!(counts.remove("done").is_some(), "{counts:?}");
    assert!(plan_schema().validate(&doc).is_ok(), "{doc:#}");
}
