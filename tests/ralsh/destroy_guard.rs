//! Inputs that must never mean "remove everything": an empty, emptied or
//! wrong manifest is refused (exit 2, nothing runs, nothing is removed)
//! unless `--destroy` asks for it.

use serde_json::Value as Json;

use crate::plans::{updates, Bench};
use crate::support::run;

/// `ral state -j list` as the items' `TYPE[NAME]`, sorted.
fn stored(bench: &Bench) -> Vec<String> {
    let mut command = bench.sandbox.ral_command("state", &[]);
    command.args(["-j", "list"]);
    let listed = run(&mut command);
    listed.expect(0);
    let doc: Json = serde_json::from_str(&listed.stdout).unwrap();
    let mut names: Vec<String> = doc["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| {
            format!(
                "{}[{}]",
                item["type"].as_str().unwrap(),
                item["name"].as_str().unwrap()
            )
        })
        .collect();
    names.sort();
    names
}

/// The names in a fixture store, sorted.
fn names(bench: &Bench, stem: &str) -> Vec<String> {
    let mut names: Vec<String> = bench
        .store(stem)
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    names.sort();
    names
}

/// A bench where ral created alpha[a1] and beta[b1], and adopted beta[b9],
/// which existed before.
fn applied() -> Bench {
    let bench = Bench::new();
    bench.sandbox.write(
        "beta.json",
        "{\"b9\": {\"ensure\": \"present\", \"value\": \"old\"}}",
    );
    let m = bench.manifest(
        "real.yaml",
        "alpha:\n  a1: {value: one, needs: b1}\nbeta:\n  b1: {value: x}\n  b9: {value: new}\n",
    );
    bench.ral("apply", &[&m]).expect(0);
    bench.take_calls();
    bench
}

const MANAGED: [&str; 3] = ["alpha[a1]", "beta[b1]", "beta[b9]"];

/// Each bad input is refused by plan and apply, with the file named and
/// `--destroy` suggested; nothing is called, removed or forgotten.
fn assert_refused(bench: &Bench, file: &str, why: &str) {
    for mode in ["plan", "apply"] {
        bench
            .ral(mode, &[file])
            .expect(2)
            .stderr_has(file)
            .stderr_has(why)
            .stderr_has("give --destroy");
    }
    assert_eq!(bench.take_calls(), Vec::<String>::new(), "nothing ran");
    assert_eq!(names(bench, "alpha"), ["a1"]);
    assert_eq!(names(bench, "beta"), ["b1", "b9"]);
    assert_eq!(stored(bench), MANAGED);
}

/// `--destroy` with the same input removes what ral created, and only
/// that: b9 existed before ral and is forgotten, left as it is.
fn assert_destroyed(bench: &Bench, file: &str) {
    bench.ral("apply", &["--destroy", file]).expect(0);
    assert_eq!(
        updates(&bench.take_calls()),
        ["alpha a1", "beta b1"],
        "a1 (which needs b1) first, then b1; b9 untouched"
    );
    assert_eq!(names(bench, "alpha"), Vec::<String>::new());
    assert_eq!(names(bench, "beta"), ["b9"]);
    assert_eq!(bench.store("beta")["b9"]["value"], "new");
}

#[test]
fn an_empty_yaml_file_removes_nothing_without_destroy() {
    let bench = applied();
    let empty = bench.manifest("p.yaml", "");
    assert_refused(&bench, &empty, "no resource is declared");
    assert_destroyed(&bench, &empty);
    assert_eq!(stored(&bench), Vec::<String>::new());
}

#[test]
fn an_empty_mapping_removes_nothing_without_destroy() {
    let bench = applied();
    let empty = bench.manifest("p.yaml", "{}\n");
    assert_refused(&bench, &empty, "no resource is declared");
    assert_destroyed(&bench, &empty);
}

#[test]
fn a_comment_only_yaml_file_removes_nothing_without_destroy() {
    let bench = applied();
    let empty = bench.manifest("p.yaml", "# alpha:\n#   a1: {value: one}\n\n");
    assert_refused(&bench, &empty, "no resource is declared");
    assert_destroyed(&bench, &empty);
}

#[test]
fn an_empty_json_file_removes_nothing() {
    let bench = applied();
    let empty = bench.manifest("p.json", "");
    // Not JSON at all: refused as a manifest error, with or without
    // --destroy.
    for mode in ["plan", "apply"] {
        for args in [vec![empty.as_str()], vec!["--destroy", &empty]] {
            bench
                .ral(mode, &args)
                .expect(2)
                .stderr_has(&empty)
                .stderr_has("invalid JSON");
        }
    }
    assert_eq!(bench.take_calls(), Vec::<String>::new(), "nothing ran");
    assert_eq!(names(&bench, "beta"), ["b1", "b9"]);
    assert_eq!(stored(&bench), MANAGED);
    // An empty JSON object is a manifest that declares nothing.
    let empty = bench.manifest("p.json", "{}");
    assert_refused(&bench, &empty, "no resource is declared");
    assert_destroyed(&bench, &empty);
}

#[test]
fn a_manifest_naming_only_unrelated_resources_removes_nothing_without_destroy() {
    let bench = applied();
    let unrelated = bench.manifest("other.yaml", "gamma:\n  /g: {value: z}\n");
    assert_refused(
        &bench,
        &unrelated,
        "lists none of the resources ral manages (3), so this run would remove the 2 ral \
         created (alpha[a1], beta[b1])",
    );
    bench.ral("apply", &["--destroy", &unrelated]).expect(0);
    let done = updates(&bench.take_calls());
    assert!(done.contains(&"gamma /g".to_owned()), "{done:?}");
    assert!(done.contains(&"alpha a1".to_owned()), "{done:?}");
    assert!(done.contains(&"beta b1".to_owned()), "{done:?}");
    assert_eq!(done.len(), 3, "{done:?}");
    assert_eq!(names(&bench, "alpha"), Vec::<String>::new());
    assert_eq!(names(&bench, "beta"), ["b9"]);
    assert_eq!(stored(&bench), ["gamma[/g]"]);
}

#[test]
fn a_manifest_naming_some_managed_resources_still_removes_the_others() {
    let bench = applied();
    let fewer = bench.manifest("fewer.yaml", "beta:\n  b1: {value: x}\n");
    bench.ral("apply", &[&fewer]).expect(0);
    assert_eq!(updates(&bench.take_calls()), ["alpha a1"]);
    assert_eq!(stored(&bench), ["beta[b1]"]);
}

#[test]
fn destroy_without_a_manifest_removes_what_ral_created() {
    let bench = applied();
    bench
        .ral("plan", &["--destroy"])
        .expect(0)
        .stdout_has("- alpha[a1]")
        .stdout_has("- beta[b1]")
        .stdout_has("0 to create, 0 to change, 2 to remove");
    assert_eq!(stored(&bench), MANAGED);
    bench.take_calls();
    bench.ral("apply", &["--destroy"]).expect(0);
    assert_eq!(updates(&bench.take_calls()), ["alpha a1", "beta b1"]);
    assert_eq!(names(&bench, "alpha"), Vec::<String>::new());
    assert_eq!(names(&bench, "beta"), ["b9"]);
    assert_eq!(stored(&bench), Vec::<String>::new());
}

#[test]
fn a_manifest_is_required_without_destroy_and_destroy_excludes_keep_removed() {
    let bench = applied();
    for mode in ["plan", "apply"] {
        bench.ral(mode, &[]).expect(2).stderr_has("<MANIFEST>");
        bench
            .ral(mode, &["--destroy", "--keep-removed"])
            .expect(2)
            .stderr_has("cannot be used with");
    }
    assert_eq!(bench.take_calls(), Vec::<String>::new());
    assert_eq!(stored(&bench), MANAGED);
}
