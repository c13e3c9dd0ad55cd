//! The json calling convention end to end, with a fixture that answers
//! whatever documents the test writes and records what it was sent.

use serde_json::{json, Value as Json};

use crate::support::{names_in, Sandbox};

const STATE: &str = r#"{"resources": [{"name": "a", "ensure": "present", "port": 80, "enabled": true, "tags": ["x y", "z"], "ratio": 1.5}]}"#;

fn sent(sandbox: &Sandbox, action: &str) -> Json {
    serde_json::from_str(&sandbox.read(&format!("{action}.in"))).expect("the host sent JSON")
}

#[test]
fn get_lists_with_json_types_intact() {
    let sandbox = Sandbox::new();
    sandbox.write("get.out", STATE);
    let doc = sandbox.ralsh(&["-j", "jsonish"]).expect(0).json();
    assert_eq!(
        doc["resources"][0],
        json!({"name": "a", "ensure": "present", "enabled": true, "port": 80, "ratio": 1.5, "tags": ["x y", "z"],
               "ral": {"type": "jsonish", "provider": "jsonish::jsonscripted"}})
    );
    assert_eq!(sent(&sandbox, "get"), json!({"names": []}));
    assert_eq!(sandbox.calls(), ["ral_action=get"], "exactly one argument");
    let human = sandbox.ralsh(&["jsonish"]);
    human
        .expect(0)
        .stdout_has("  port    => 80,\n")
        .stdout_has("  enabled => true,\n");
}

#[test]
fn find_asks_for_one_name_and_filters_the_answer() {
    let sandbox = Sandbox::new();
    sandbox.write(
        "get.out",
        r#"{"resources": [{"name": "other", "port": 1}, {"name": "a", "port": 2}]}"#,
    );
    let doc = sandbox.ralsh(&["-j", "jsonish", "a"]).expect(0).json();
    assert_eq!(doc["resource"]["port"], json!(2));
    assert_eq!(sent(&sandbox, "get"), json!({"names": ["a"]}));
    sandbox.ralsh(&["jsonish", "missing"]).expect(1);
    sandbox.write(
        "get.out",
        r#"{"resources": [{"name": "a", "error": {"kind": "unknown", "message": "never"}}]}"#,
    );
    sandbox.ralsh(&["jsonish", "a"]).expect(1);
    sandbox.write(
        "get.out",
        r#"{"resources": [{"name": "a", "error": {"kind": "forbidden", "message": "no access"}}]}"#,
    );
    sandbox
        .ralsh(&["jsonish", "a"])
        .expect(2)
        .stderr_has("jsonish::jsonscripted: get reported an error: no access (forbidden)");
}

#[test]
fn set_gets_is_and_only_the_attributes_that_should_change() {
    let sandbox = Sandbox::new();
    sandbox.write("get.out", STATE);
    sandbox.write(
        "set.out",
        r#"{"changes": [{"name": "a", "port": {"is": 81, "was": 80}}], "derive": false}"#,
    );
    let doc = sandbox
        .ralsh(&[
            "-j",
            "jsonish",
            "a",
            "port=81",
            "enabled=true",
            "tags=x y,z",
        ])
        .expect(0)
        .json();
    assert_eq!(
        sent(&sandbox, "set"),
        json!({"ral": {"noop": false}, "updates": [{"name": "a",
            "is": {"name": "a", "ensure": "present", "port": 80, "enabled": true, "tags": ["x y", "z"], "ratio": 1.5},
            "should": {"port": 81}}]})
    );
    assert_eq!(
        doc["result"][0]["changes"],
        json!([{"attr": "port", "is": 81, "was": 80}])
    );
    assert_eq!(doc["result"][0]["resource"]["port"], json!(81));
}

#[test]
fn set_is_never_called_with_nothing_to_change() {
    let sandbox = Sandbox::new();
    sandbox.write("get.out", STATE);
    sandbox
        .ralsh(&["jsonish", "a", "port=80", "enabled=true", "ratio=1.5"])
        .expect(0)
        .stdout_has("no changes needed");
    assert_eq!(sandbox.calls(), ["ral_action=get"]);
}

#[test]
fn creating_sends_an_empty_is_and_derive_fills_in_changes() {
    let sandbox = Sandbox::new();
    sandbox.write("get.out", r#"{"resources": []}"#);
    sandbox.write("set.out", r#"{"changes": [], "derive": true}"#);
    let doc = sandbox
        .ralsh(&["-j", "jsonish", "new", "ensure=present", "port=8080"])
        .expect(0)
        .json();
    assert_eq!(sent(&sandbox, "set")["updates"][0]["is"], json!({}));
    assert_eq!(
        sent(&sandbox, "set")["updates"][0]["should"],
        json!({"ensure": "present", "port": 8080})
    );
    assert_eq!(
        doc["result"][0]["changes"],
        json!([{"attr": "ensure", "is": "present", "was": "absent"}, {"attr": "port", "is": 8080, "was": null}])
    );
}

#[test]
fn noop_is_passed_in_the_document() {
    let sandbox = Sandbox::new();
    sandbox.write("get.out", STATE);
    sandbox.write(
        "set.out",
        r#"{"changes": [{"name": "a", "enabled": {"is": false, "was": true}}]}"#,
    );
    let run = sandbox.ralsh(&["-n", "jsonish", "a", "enabled=false"]);
    run.expect(0)
        .stdout_has("enabled: true -> false (noop: would change)");
    assert_eq!(sent(&sandbox, "set")["ral"], json!({"noop": true}));
}

#[test]
fn a_batch_goes_in_one_set_call_with_per_resource_errors() {
    let sandbox = Sandbox::new();
    sandbox.write("get.out", r#"{"resources": [{"name": "a", "port": 1}, {"name": "b", "port": 1}, {"name": "c", "port": 1}]}"#);
    sandbox.write(
        "set.out",
        r#"{"changes": [{"name": "a", "port": {"is": 2, "was": 1}}, {"name": "b", "error": {"kind": "failed", "message": "disk full"}}, {"name": "side", "port": {"is": 9}}], "derive": true}"#,
    );
    let run = sandbox.ralsh(&["-j", "jsonish", "a", "b", "c", "port=2"]);
    let doc = run.expect(2).json();
    let calls: Vec<String> = sandbox
        .calls()
        .into_iter()
        .filter(|c| c == "ral_action=set")
        .collect();
    assert_eq!(calls.len(), 1, "one set call for the batch");
    let request = sent(&sandbox, "set");
    let names = names_in(&request["updates"]);
    assert_eq!(names, ["a", "b", "c"]);
    assert_eq!(
        doc["result"][0]["changes"],
        json!([{"attr": "port", "is": 2, "was": 1}])
    );
    assert!(doc["result"][1]["error"]["message"]
        .as_str()
        .unwrap()
        .contains("'b': disk full (failed)"));
    // c was not mentioned and derive is true.
    assert_eq!(
        doc["result"][2]["changes"],
        json!([{"attr": "port", "is": 2, "was": 1}])
    );
}

#[test]
fn whole_call_errors_carry_their_kind() {
    let sandbox = Sandbox::new();
    sandbox.write("get.out", STATE);
    for kind in ["unknown", "forbidden", "failed"] {
        sandbox.write(
            "set.out",
            &format!(
                r#"{{"error": {{"kind": "{kind}", "message": "it went wrong"}}, "changes": []}}"#
            ),
        );
        let doc = sandbox
            .ralsh(&["-j", "jsonish", "a", "port=5"])
            .expect(2)
            .json();
        let message = doc["error"]["message"].as_str().unwrap();
        assert!(
            message.contains(&format!("set reported an error: it went wrong ({kind})")),
            "{message}"
        );
        assert_eq!(doc["error"]["kind"], kind, "the kind is kept for programs");
    }
    // On a find, a whole-call "unknown" means not found.
    sandbox.write(
        "get.out",
        r#"{"error": {"kind": "unknown", "message": "no such thing"}}"#,
    );
    sandbox.ralsh(&["jsonish", "a"]).expect(1);
}

#[test]
fn null_means_no_value() {
    let sandbox = Sandbox::new();
    sandbox.write(
        "get.out",
        r#"{"resources": [{"name": "a", "port": null, "enabled": true}]}"#,
    );
    let doc = sandbox
        .ralsh(&["-j", "--strict", "jsonish", "a"])
        .expect(0)
        .json();
    assert_eq!(
        doc["resource"],
        json!({"name": "a", "enabled": true, "ral": {"type": "jsonish", "provider": "jsonish::jsonscripted"}})
    );
}

#[test]
fn a_name_given_twice_is_refused() {
    let sandbox = Sandbox::new();
    sandbox.write("get.out", STATE);
    sandbox
        .ralsh(&["jsonish", "a", "a", "port=2"])
        .expect(2)
        .stderr_has("'a' is named twice");
    assert_eq!(sandbox.calls(), Vec::<String>::new());
}

#[test]
fn the_current_value_of_a_sensitive_attribute_is_redacted_too() {
    let sandbox = Sandbox::new();
    sandbox.write(
        "get.out",
        r#"{"resources": [{"name": "a", "password": "0ld-hash"}]}"#,
    );
    sandbox.write("set.out", r#"{"changes": [{"name": "a", "error": {"kind": "failed", "message": "cannot replace 0ld-hash with n3w-hash"}}]}"#);
    sandbox.write(
        "set.err",
        "warn: old was 0ld-hash
",
    );
    let run = sandbox.ralsh(&["jsonish", "a", "password=n3w-hash"]);
    run.expect(2)
        .stderr_has("cannot replace [redacted] with [redacted]")
        .stderr_has("old was [redacted]");
    assert!(
        !run.stderr.contains("0ld-hash") && !run.stderr.contains("n3w-hash"),
        "{}",
        run.stderr
    );
}

#[test]
fn a_non_zero_exit_is_fatal_whatever_the_output_holds() {
    let sandbox = Sandbox::new();
    sandbox.write("get.out", STATE);
    sandbox.write("get.err", "warn: trouble\n");
    sandbox.write("get.exit", "4");
    let run = sandbox.ralsh(&["jsonish"]);
    run.expect(2)
        .stderr_has("ralsh: warn: [jsonish::jsonscripted] trouble\n")
        .stderr_has("jsonish::jsonscripted: get failed: exit status 4 (its stderr is above)");
    assert_eq!(run.stderr.matches("trouble").count(), 1, "{}", run.stderr);
    assert_eq!(run.stdout, "");
}

#[test]
fn malformed_documents_name_provider_action_and_path() {
    let sandbox = Sandbox::new();
    for (action, text, needle) in [
        (
            "get",
            "not json at all",
            "get: the output is not one JSON document",
        ),
        ("get", "{}", "get: the document has no 'resources'"),
        (
            "get",
            r#"{"resources": [{"port": 1}]}"#,
            "get: resources[0] has no 'name'",
        ),
        (
            "get",
            r#"{"resources": [{"name": ["a"]}]}"#,
            "get: resources[0].name is an array, not a string",
        ),
        (
            "set",
            r#"{"changes": [{"name": "a", "port": {"was": 80}}]}"#,
            "set: changes[0].port has no 'is'",
        ),
        (
            "set",
            r#"{"error": {"kind": "failed"}}"#,
            "set: error has no 'message'",
        ),
        (
            "set",
            r#"{"changes": [{"name": "a", "error": {"kind": "failed"}}]}"#,
            "set: changes[0].error has no 'message'",
        ),
        (
            "set",
            r#"{"changes": "none"}"#,
            "set: 'changes' is a string, not an array",
        ),
        (
            "set",
            r#"{"derive": true}"#,
            "set: the document has no 'changes'",
        ),
        (
            "set",
            r#"{"changes": [], "derive": 1}"#,
            "set: 'derive' is a number, not a boolean",
        ),
    ] {
        sandbox.write("get.out", STATE);
        sandbox.write(&format!("{action}.out"), text);
        let run = if action == "get" {
            sandbox.ralsh(&["jsonish"])
        } else {
            sandbox.ralsh(&["jsonish", "a", "port=5"])
        };
        run.expect(2)
            .stderr_has(&format!("jsonish::jsonscripted: {needle}"));
    }
}

#[test]
fn values_of_the_wrong_json_type_warn_or_fail_under_strict() {
    let sandbox = Sandbox::new();
    sandbox.write(
        "get.out",
        r#"{"resources": [{"name": "a", "port": true, "enabled": "yes", "tags": "x"}]}"#,
    );
    let run = sandbox.ralsh(&["-j", "jsonish"]);
    let doc = run.expect(0).json();
    assert_eq!(doc["resources"][0]["port"], json!(true), "kept as reported");
    run.stderr_has("resource 'a': attribute 'port' has value true, which is not a integer[1, 65535]: expected integer[1, 65535], found a boolean")
        .stderr_has("attribute 'enabled' has value \"yes\", which is not a boolean")
        .stderr_has("attribute 'tags' has value \"x\", which is not a array[string]");
    sandbox
        .ralsh(&["--strict", "jsonish"])
        .expect(2)
        .stderr_has("(--strict)");
}

#[test]
fn sensitive_values_go_in_the_document_but_never_out() {
    let sandbox = Sandbox::new();
    sandbox.write(
        "get.out",
        r#"{"resources": [{"name": "a", "password": "old-s3cret"}]}"#,
    );
    sandbox.write(
        "set.out",
        r#"{"error": {"kind": "failed", "message": "rejected new-s3cret"}}"#,
    );
    let run = sandbox.ralsh(&["-l", "debug", "jsonish", "a", "password=new-s3cret"]);
    run.expect(2).stderr_has("rejected [redacted] (failed)");
    assert_eq!(
        sent(&sandbox, "set")["updates"][0]["should"],
        json!({"password": "new-s3cret"})
    );
    assert!(
        !run.stderr.contains("s3cret") && !run.stdout.contains("s3cret"),
        "{run:?}"
    );
}
