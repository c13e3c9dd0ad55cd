//! What providers answer to an update is checked against the request: an
//! attribute the request set but the answer leaves out, or a "change" whose
//! old and new values are equal, is a warning naming provider, resource and
//! attribute (an error with --strict); a created resource has no old
//! values.

use serde_json::json;

use crate::support::Sandbox;

const FOUND: &str = "# simple\nname: a\nensure: present\ncolor: blue\n";

#[test]
fn an_answer_that_leaves_out_a_requested_attribute_is_flagged() {
    let sandbox = Sandbox::new();
    sandbox.write("find.out", FOUND);
    // The provider changes nothing and says so only by omission.
    sandbox.write("update.out", "# simple\nname: a\n");
    let warned = sandbox.ralsh(&["scripted", "a", "color=red"]);
    warned.expect(0).stderr_has(
        "ralsh: warn: scripted::scripted: resource 'a': the answer leaves out 'color', which the request set to 'red'; it may not have been changed",
    );
    let strict = sandbox.ralsh(&["--strict", "scripted", "a", "color=red"]);
    strict
        .expect(2)
        .stderr_has("the answer leaves out 'color'")
        .stderr_has("(--strict)");
    // A write-only parameter is never reported, so it is not missed.
    sandbox.write(
        "update.out",
        "# simple\nname: a\ncolor: red\nral_was: blue\n",
    );
    let run = sandbox.ralsh(&["--strict", "scripted", "a", "color=red", "token=t"]);
    run.expect(0);
    assert!(!run.stderr.contains("leaves out"), "{}", run.stderr);
}

#[test]
fn a_change_from_a_value_to_the_same_value_is_flagged() {
    let sandbox = Sandbox::new();
    sandbox.write("find.out", FOUND);
    sandbox.write(
        "update.out",
        "# simple\nname: a\nensure: absent\nral_was: absent\ncolor: red\nral_was: blue\n",
    );
    let run = sandbox.ralsh(&["scripted", "a", "color=red"]);
    run.expect(0).stderr_has(
        "scripted::scripted: resource 'a': the answer reports a change of 'ensure' from 'absent' to 'absent', which is no change",
    );
    sandbox
        .ralsh(&["--strict", "scripted", "a", "color=red"])
        .expect(2)
        .stderr_has("which is no change (--strict)");
}

#[test]
fn a_created_resource_has_no_old_values() {
    let sandbox = Sandbox::new();
    sandbox.write("find.out", "# simple\nname: new\nral_unknown: true\n");
    // An empty ral_was, as some providers write for a new resource.
    sandbox.write(
        "update.out",
        "# simple\nname: new\nensure: present\nral_was: absent\ncolor: red\nral_was: \n",
    );
    let doc = sandbox
        .ralsh(&["-j", "scripted", "new", "ensure=present", "color=red"])
        .expect(0)
        .json();
    let changes = &doc["result"][0]["changes"];
    assert_eq!(
        changes,
        &json!([
            {"attr": "ensure", "is": "present", "was": "absent"},
            {"attr": "color", "is": "red", "was": null}
        ])
    );
    sandbox
        .ralsh(&["scripted", "new", "ensure=present", "color=red"])
        .expect(0)
        .stdout_has("color: (none) -> 'red'");
}

#[test]
fn a_created_resource_has_no_old_values_whatever_its_attributes_hold() {
    // Only `ensure=absent` asks for no resource: an attribute whose value
    // is the word "absent" is still created.
    let sandbox = Sandbox::new();
    sandbox.write("find.out", "# simple\nname: new\nral_unknown: true\n");
    sandbox.write(
        "update.out",
        "# simple\nname: new\nensure: present\nral_was: absent\ncolor: absent\nral_was: \n",
    );
    let doc = sandbox
        .ralsh(&["-j", "scripted", "new", "color=absent"])
        .expect(0)
        .json();
    assert_eq!(
        doc["result"][0]["changes"],
        json!([
            {"attr": "ensure", "is": "present", "was": "absent"},
            {"attr": "color", "is": "absent", "was": null}
        ])
    );
}

#[test]
fn defaults_ral_adds_to_a_creation_are_not_missed_in_the_answer() {
    // The request never set 'color'; ral added its default. An answer that
    // does not mention it leaves out nothing that was asked for.
    use std::os::unix::fs::PermissionsExt;
    let sandbox = Sandbox::new();
    let data = tempfile::tempdir().unwrap();
    let providers = data.path().join("providers");
    std::fs::create_dir(&providers).unwrap();
    let script = providers.join("defaulted.prov");
    std::fs::write(
        &script,
        "#!/bin/sh\ncase \"$1\" in\nral_action=find) printf '# simple\\nname: x\\nral_unknown: true\\n' ;;\n\
         ral_action=update) printf '# simple\\nname: x\\nensure: present\\nral_was: absent\\n' ;;\n\
         *) echo '# simple' ;;\nesac\n",
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(
        providers.join("defaulted.yaml"),
        "provider:\n  type: defaulted\n  invoke: simple\n  actions: [list, find, update]\n  suitable: true\n  attributes:\n    name: {}\n    ensure: {type: 'enum[present, absent]'}\n    color: {default: red}\n",
    )
    .unwrap();
    let run = sandbox.ralsh(&[
        "--strict",
        "-I",
        data.path().to_str().unwrap(),
        "defaulted",
        "x",
        "ensure=present",
    ]);
    run.expect(0);
    assert!(!run.stderr.contains("leaves out"), "{}", run.stderr);
}
