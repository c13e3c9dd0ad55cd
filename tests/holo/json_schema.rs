//! schemas/holo-output.schema.json against real `ral holo --json` output:
//! a scan, an apply with every kind of result, and an apply --noop are
//! accepted; each broken one way at a time is rejected.

use std::path::Path;

use serde_json::{json, Value as Json};

use crate::mutations::{assert_each_edit_rejected, Edit};
use crate::processes::{ral, root_with_script};

fn schema() -> jsonschema::Validator {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("schemas/holo-output.schema.json");
    let schema: Json = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    jsonschema::validator_for(&schema).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A root with one plugin `t` whose entities end in each apply result:
/// applied, not changed, requires --force (modified, and deleted), failed.
/// Its diff compares target/old and target/new, which differ.
fn root_with_every_result(work: &Path) {
    root_with_script(
        work,
        r#"#!/bin/bash
case "$1" in
info) echo MIN_API_VERSION=3; echo MAX_API_VERSION=3 ;;
scan)
  echo 'ENTITY: t:applied'
  echo "SOURCE: $HOLO_RESOURCE_DIR/a.conf"
  echo 'ACTION: Frobbing (first run)'
  echo "found in: $HOLO_RESOURCE_DIR/a.conf"
  echo 'ENTITY: t:unchanged'
  echo 'ENTITY: t:modified'
  echo 'ENTITY: t:deleted'
  echo 'ENTITY: t:failed' ;;
apply|force-apply)
  case "$2" in
  t:applied) echo "applied $2" ;;
  t:unchanged) echo 'not changed' >&3 ;;
  t:modified) echo 'requires --force to overwrite' >&3 ;;
  t:deleted) echo 'requires --force to restore' >&3 ;;
  t:failed) echo '!! cannot' >&2; exit 3 ;;
  esac ;;
diff) printf '%s\0%s\0' ./target/old ./target/new >&3 ;;
esac
"#,
    );
    let target = work.join("target");
    std::fs::write(target.join("usr/share/holo/t/a.conf"), "a\n").unwrap();
    std::fs::write(target.join("old"), "one\n").unwrap();
    std::fs::write(target.join("new"), "two\n").unwrap();
}

/// For each of `count` results, the keys every kind of result has, each
/// broken, and a key none has.
fn edits_of_every_result(count: usize) -> impl Iterator<Item = (String, Edit)> {
    (0..count).flat_map(|at| {
        [
            ("an ID not a string", "id", json!(1)),
            ("an empty plugin", "plugin", json!("")),
            ("stdout that is text", "stdout", json!("x")),
            ("stderr lines not strings", "stderr", json!([1])),
            ("an unknown key", "colour", json!("blue")),
        ]
        .map(|(what, key, value)| {
            (
                format!("result {at}: {what}"),
                Edit::set(format!("/results/{at}/{key}"), value),
            )
        })
    })
}

/// Runs `ral holo ARGS` and parses its stdout, which must be one document.
fn holo_json(work: &Path, args: &[&str]) -> Json {
    let output = ral(work, args).output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("not one JSON document ({e}): {output:?}"))
}

#[test]
fn scan_json_matches_the_schema_and_wrong_documents_do_not() {
    let work = tempfile::tempdir().unwrap();
    root_with_every_result(work.path());
    let doc = holo_json(work.path(), &["scan", "--json"]);
    let entities = doc["entities"].as_array().unwrap();
    assert_eq!(entities.len(), 5, "{doc}");
    assert_eq!(
        entities[0]["action"],
        json!({"verb": "Frobbing", "reason": "first run"})
    );
    assert_eq!(entities[0]["info"][0]["key"], "found in", "{doc}");
    assert_each_edit_rejected(
        &schema(),
        &doc,
        [
            ("entities not a list", Edit::set("/entities", json!({}))),
            (
                "an entity that is text",
                Edit::set("/entities/0", json!("t:applied")),
            ),
            ("an entity without an ID", Edit::remove("/entities/0/id")),
            ("an empty ID", Edit::set("/entities/0/id", json!(""))),
            ("an ID not a string", Edit::set("/entities/0/id", json!(1))),
            (
                "an entity without its plugin",
                Edit::remove("/entities/0/plugin"),
            ),
            (
                "an entity without an action",
                Edit::remove("/entities/0/action"),
            ),
            (
                "an action that is text",
                Edit::set("/entities/0/action", json!("Frobbing")),
            ),
            (
                "an action without a verb",
                Edit::remove("/entities/0/action/verb"),
            ),
            (
                "an empty verb",
                Edit::set("/entities/0/action/verb", json!("")),
            ),
            (
                "a reason not a string",
                Edit::set("/entities/0/action/reason", json!(null)),
            ),
            (
                "an unknown action key",
                Edit::set("/entities/0/action/why", json!("x")),
            ),
            (
                "sources not a list",
                Edit::set("/entities/0/sources", json!("a.conf")),
            ),
            (
                "a source not a string",
                Edit::set("/entities/0/sources/0", json!(1)),
            ),
            ("an entity without info", Edit::remove("/entities/0/info")),
            (
                "an info line that is text",
                Edit::set("/entities/0/info/0", json!("found in: x")),
            ),
            (
                "an info line without a value",
                Edit::remove("/entities/0/info/0/value"),
            ),
            (
                "an unknown info key",
                Edit::set("/entities/0/info/0/at", json!(1)),
            ),
            (
                "an unknown entity key",
                Edit::set("/entities/0/result", json!("applied")),
            ),
            ("results beside entities", Edit::set("/results", json!([]))),
            (
                "a plugin not a string",
                Edit::set("/entities/0/plugin", json!(1)),
            ),
            (
                "an empty plugin",
                Edit::set("/entities/0/plugin", json!("")),
            ),
            (
                "a verb not a string",
                Edit::set("/entities/0/action/verb", json!(1)),
            ),
            (
                "info not a list",
                Edit::set("/entities/0/info", json!({"found in": "x"})),
            ),
            (
                "an info key not a string",
                Edit::set("/entities/0/info/0/key", json!(1)),
            ),
            (
                "an empty info key",
                Edit::set("/entities/0/info/0/key", json!("")),
            ),
            (
                "an info value not a string",
                Edit::set("/entities/0/info/0/value", json!(1)),
            ),
            ("a list", Edit::Whole(json!([]))),
            ("the empty object", Edit::Whole(json!({}))),
        ],
    );
}

#[test]
fn apply_json_matches_the_schema_and_wrong_documents_do_not() {
    let work = tempfile::tempdir().unwrap();
    root_with_every_result(work.path());
    let doc = holo_json(work.path(), &["apply", "--json"]);
    let results: Vec<(&str, &str)> = doc["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["id"].as_str().unwrap(), r["result"].as_str().unwrap()))
        .collect();
    assert_eq!(
        results,
        [
            ("t:applied", "applied"),
            ("t:deleted", "requires --force"),
            ("t:failed", "failed"),
            ("t:modified", "requires --force"),
            ("t:unchanged", "not changed"),
        ],
        "{doc}"
    );
    assert_eq!(doc["results"][1]["reason"], "deleted by user");
    assert_eq!(doc["results"][3]["reason"], "modified by user");
    assert!(
        doc["results"][3]["diff"].as_str().unwrap().contains("+two"),
        "{doc}"
    );
    assert_eq!(doc["results"][2]["status"], "exit status 3");
    assert_each_edit_rejected(
        &schema(),
        &doc,
        [
            ("results not a list", Edit::set("/results", json!({}))),
            (
                "a result that is text",
                Edit::set("/results/0", json!("applied")),
            ),
            ("a result without an ID", Edit::remove("/results/0/id")),
            (
                "a result without its plugin",
                Edit::remove("/results/0/plugin"),
            ),
            (
                "a result without a result",
                Edit::remove("/results/0/result"),
            ),
            (
                "an unknown result",
                Edit::set("/results/0/result", json!("exploded")),
            ),
            (
                "applied with a status",
                Edit::set("/results/0/status", json!("exit status 0")),
            ),
            (
                "not changed with a diff",
                Edit::set("/results/4/diff", json!("")),
            ),
            (
                "stdout not a list",
                Edit::set("/results/0/stdout", json!("applied t:applied")),
            ),
            (
                "a stdout line not a string",
                Edit::set("/results/0/stdout/0", json!(1)),
            ),
            ("a result without stderr", Edit::remove("/results/0/stderr")),
            (
                "requires --force without a reason",
                Edit::remove("/results/3/reason"),
            ),
            (
                "an unknown reason",
                Edit::set("/results/3/reason", json!("eaten by the cat")),
            ),
            (
                "requires --force without a diff",
                Edit::remove("/results/1/diff"),
            ),
            (
                "a diff not a string",
                Edit::set("/results/3/diff", json!(["+two"])),
            ),
            ("failed without a status", Edit::remove("/results/2/status")),
            ("an empty status", Edit::set("/results/2/status", json!(""))),
            (
                "failed with a reason",
                Edit::set("/results/2/reason", json!("modified by user")),
            ),
            (
                "a status not a string",
                Edit::set("/results/2/status", json!(3)),
            ),
            ("entities beside results", Edit::set("/entities", json!([]))),
        ]
        .into_iter()
        .map(|(what, edit)| (what.to_owned(), edit))
        .chain(edits_of_every_result(5)),
    );
}

#[test]
fn apply_noop_json_matches_the_schema_and_wrong_documents_do_not() {
    let work = tempfile::tempdir().unwrap();
    root_with_every_result(work.path());
    let doc = holo_json(work.path(), &["apply", "--noop", "--json", "t:applied"]);
    assert_eq!(doc["results"][0]["result"], "would apply", "{doc}");
    assert!(
        doc["results"][0]["diff"].as_str().unwrap().contains("-one"),
        "{doc}"
    );
    assert_each_edit_rejected(
        &schema(),
        &doc,
        [
            (
                "would apply without a diff",
                Edit::remove("/results/0/diff"),
            ),
            (
                "would apply with a status",
                Edit::set("/results/0/status", json!("x")),
            ),
            (
                "would apply with a reason",
                Edit::set("/results/0/reason", json!("modified by user")),
            ),
            (
                "a diff that is null",
                Edit::set("/results/0/diff", json!(null)),
            ),
        ]
        .into_iter()
        .map(|(what, edit)| (what.to_owned(), edit))
        .chain(edits_of_every_result(1)),
    );
}
