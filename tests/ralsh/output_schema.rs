//! schemas/ralsh-output.schema.json rejects what ralsh never prints: each
//! kind of document, taken from a real run (and so valid), broken one way
//! at a time. Every other test checks only that real output is accepted,
//! which a schema of `{}` would pass.

use serde_json::json;

use crate::mutations::{assert_each_edit_rejected, Edit};
use crate::support::{output_schema, Sandbox};

/// A sandbox where the `typed` fixture lists and finds resource `a`.
fn typed_sandbox() -> Sandbox {
    let sandbox = Sandbox::new();
    let a = "# simple\nname: a\nensure: present\nport: 80\ntags: x y\n";
    sandbox.write("list", a);
    sandbox.write("find.a", a);
    sandbox
}

#[test]
fn the_provider_list_schema_rejects_wrong_documents() {
    let sandbox = typed_sandbox();
    let doc = sandbox.ralsh(&["-j"]).expect(0).json();
    assert_each_edit_rejected(
        output_schema(),
        &doc,
        [
            ("providers null", Edit::set("/providers", json!(null))),
            ("providers not a list", Edit::set("/providers", json!({}))),
            (
                "a provider that is text",
                Edit::set("/providers/0", json!("typed::typed")),
            ),
            (
                "a name not a string",
                Edit::set("/providers/0/name", json!(5)),
            ),
            (
                "a type not a string",
                Edit::set("/providers/0/type", json!(5)),
            ),
            (
                "a source not a string",
                Edit::set("/providers/0/source", json!(5)),
            ),
            (
                "a desc not a string",
                Edit::set("/providers/0/desc", json!(null)),
            ),
            (
                "attributes not a list",
                Edit::set("/providers/0/attributes", json!({})),
            ),
            (
                "an attribute that is text",
                Edit::set("/providers/0/attributes/0", json!("name")),
            ),
            (
                "an attribute name of two words",
                Edit::set("/providers/0/attributes/0/name", json!("a b")),
            ),
            (
                "an attribute desc not a string",
                Edit::set("/providers/0/attributes/0/desc", json!(1)),
            ),
            (
                "an attribute type not a string",
                Edit::set("/providers/0/attributes/0/type", json!(1)),
            ),
            (
                "sensitive false",
                Edit::set("/providers/0/attributes/0/sensitive", json!(false)),
            ),
            (
                "a provider without suitable",
                Edit::remove("/providers/0/suitable"),
            ),
            (
                "suitable not a boolean",
                Edit::set("/providers/0/suitable", json!("yes")),
            ),
            (
                "an unqualified name",
                Edit::set("/providers/0/name", json!("typed")),
            ),
            (
                "a type of two words",
                Edit::set("/providers/0/type", json!("two words")),
            ),
            (
                "a provider without attributes",
                Edit::remove("/providers/0/attributes"),
            ),
            (
                "an unknown kind",
                Edit::set("/providers/0/attributes/0/kind", json!("rwx")),
            ),
            (
                "an attribute without desc",
                Edit::remove("/providers/0/attributes/0/desc"),
            ),
            (
                "required false",
                Edit::set("/providers/0/attributes/0/required", json!(false)),
            ),
            (
                "an unknown attribute key",
                Edit::set("/providers/0/attributes/0/colour", json!(1)),
            ),
            (
                "an unknown provider key",
                Edit::set("/providers/0/colour", json!("blue")),
            ),
            ("an unknown top-level key", Edit::set("/extra", json!(1))),
        ],
    );
}

#[test]
fn the_resource_list_schema_rejects_wrong_documents() {
    let sandbox = typed_sandbox();
    let doc = sandbox.ralsh(&["-j", "typed"]).expect(0).json();
    assert_eq!(doc["resources"][0]["name"], "a", "{doc}");
    assert_each_edit_rejected(
        output_schema(),
        &doc,
        [
            (
                "resources not a list",
                Edit::set("/resources", json!({"a": {}})),
            ),
            (
                "a resource without a name",
                Edit::remove("/resources/0/name"),
            ),
            (
                "a name not a string",
                Edit::set("/resources/0/name", json!(5)),
            ),
            ("a resource without ral", Edit::remove("/resources/0/ral")),
            (
                "a resource that is text",
                Edit::set("/resources/0", json!("a")),
            ),
            (
                "ral that is text",
                Edit::set("/resources/0/ral", json!("typed")),
            ),
            (
                "a ral type not a string",
                Edit::set("/resources/0/ral/type", json!(5)),
            ),
            ("ral without type", Edit::remove("/resources/0/ral/type")),
            (
                "an unqualified provider",
                Edit::set("/resources/0/ral/provider", json!("typed")),
            ),
            (
                "an unknown ral key",
                Edit::set("/resources/0/ral/colour", json!("x")),
            ),
            (
                "an error that is text",
                Edit::set("/error", json!("it broke")),
            ),
            (
                "an error without message",
                Edit::set("/error", json!({"kind": "failed"})),
            ),
            ("an unknown top-level key", Edit::set("/extra", json!(1))),
            (
                "a resource beside the list",
                Edit::set("/resource", json!({"name": "a"})),
            ),
        ],
    );
}

#[test]
fn the_single_resource_and_not_found_schemas_reject_wrong_documents() {
    let sandbox = typed_sandbox();
    let doc = sandbox.ralsh(&["-j", "typed", "a"]).expect(0).json();
    assert_each_edit_rejected(
        output_schema(),
        &doc,
        [
            ("a resource without ral", Edit::remove("/resource/ral")),
            ("a resource without a name", Edit::remove("/resource/name")),
            (
                "a resource that is a list",
                Edit::set("/resource", json!([])),
            ),
            ("an unknown top-level key", Edit::set("/noop", json!(true))),
        ],
    );
    let not_found = sandbox.ralsh(&["-j", "typed", "b"]).expect(1).json();
    assert_eq!(not_found, json!({}));
    assert_each_edit_rejected(
        output_schema(),
        &not_found,
        [
            ("an unknown key", Edit::set("/found", json!(false))),
            ("a list", Edit::Whole(json!([]))),
            ("text", Edit::Whole(json!("not found"))),
            ("null", Edit::Whole(json!(null))),
        ],
    );
}

#[test]
fn the_update_result_schema_rejects_wrong_documents() {
    let sandbox = typed_sandbox();
    let doc = sandbox
        .ralsh(&["-j", "typed", "a", "port=81"])
        .expect(0)
        .json();
    assert_eq!(
        doc["result"][0]["changes"],
        json!([{"attr": "port", "is": 81, "was": 80}]),
        "{doc}"
    );
    assert_each_edit_rejected(
        output_schema(),
        &doc,
        [
            ("result not a list", Edit::set("/result", json!({}))),
            (
                "an entry without changes",
                Edit::remove("/result/0/changes"),
            ),
            ("an entry that is text", Edit::set("/result/0", json!("a"))),
            (
                "changes not a list",
                Edit::set("/result/0/changes", json!({})),
            ),
            (
                "a change that is text",
                Edit::set("/result/0/changes/0", json!("port")),
            ),
            (
                "a resource without ral",
                Edit::remove("/result/0/resource/ral"),
            ),
            (
                "providers beside the result",
                Edit::set("/providers", json!([])),
            ),
            (
                "an entry without the resource",
                Edit::remove("/result/0/resource"),
            ),
            (
                "a change without was",
                Edit::remove("/result/0/changes/0/was"),
            ),
            (
                "a change without is",
                Edit::remove("/result/0/changes/0/is"),
            ),
            (
                "a change without attr",
                Edit::remove("/result/0/changes/0/attr"),
            ),
            (
                "an attr not a string",
                Edit::set("/result/0/changes/0/attr", json!(1)),
            ),
            (
                "an unknown change key",
                Edit::set("/result/0/changes/0/old", json!(80)),
            ),
            ("noop false", Edit::set("/noop", json!(false))),
            (
                "an entry with both resource and error",
                Edit::set("/result/0/error", json!({"message": "x"})),
            ),
            (
                "a failed entry without a name",
                Edit::set("/result/0", json!({"error": {"message": "x"}})),
            ),
            ("an unknown top-level key", Edit::set("/extra", json!(1))),
        ],
    );
}

#[test]
fn the_failed_batch_entry_schema_rejects_wrong_documents() {
    // One update of a batch fails: its entry is its name and the error.
    let sandbox = Sandbox::new();
    sandbox.write(
        "get.out",
        r#"{"resources": [{"name": "a", "port": 80}, {"name": "b", "port": 80}]}"#,
    );
    sandbox.write(
        "set.out",
        r#"{"changes": [{"name": "a", "port": {"is": 81, "was": 80}}, {"name": "b", "error": {"kind": "failed", "message": "nope"}}], "derive": false}"#,
    );
    let doc = sandbox
        .ralsh(&["-j", "jsonish", "a", "b", "port=81"])
        .expect(2)
        .json();
    assert_eq!(doc["result"][1]["name"], "b", "{doc}");
    assert_each_edit_rejected(
        output_schema(),
        &doc,
        [
            (
                "an entry without the error",
                Edit::remove("/result/1/error"),
            ),
            (
                "an error that is text",
                Edit::set("/result/1/error", json!("nope")),
            ),
            (
                "an error without message",
                Edit::remove("/result/1/error/message"),
            ),
            ("a name not a string", Edit::set("/result/1/name", json!(1))),
            (
                "an unknown entry key",
                Edit::set("/result/1/changes", json!([])),
            ),
        ],
    );
}

#[test]
fn the_error_schema_rejects_wrong_documents() {
    let sandbox = typed_sandbox();
    let doc = sandbox.ralsh(&["-j", "nosuchtype"]).expect(2).json();
    assert!(doc["error"]["message"].is_string(), "{doc}");
    assert_each_edit_rejected(
        output_schema(),
        &doc,
        [
            ("an error without message", Edit::remove("/error/message")),
            (
                "a message not a string",
                Edit::set("/error/message", json!(["a"])),
            ),
            ("a kind not a string", Edit::set("/error/kind", json!(2))),
            (
                "an unknown error key",
                Edit::set("/error/detail", json!("x")),
            ),
            (
                "an error that is text",
                Edit::set("/error", json!("it broke")),
            ),
            ("an unknown top-level key", Edit::set("/extra", json!(1))),
        ],
    );
}
