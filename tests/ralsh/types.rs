//! Typed attributes end to end: conversion of command-line values, arrays
//! and hashes reaching bash and Python providers, typed comparison of
//! provider output, and the behaviours (init-only, required, defaults,
//! sensitive, ensure transitions, --strict, --explain).

use serde_json::json;

use crate::support::Sandbox;

const OWNER: &str = "owner=me";

#[test]
fn bad_values_are_rejected_naming_attribute_type_and_value() {
    let sandbox = Sandbox::new();
    for (arg, type_text, reason) in [
        (
            "port=0x10",
            "integer[1, 65535]",
            "expected a decimal integer",
        ),
        (
            "port=70000",
            "integer[1, 65535]",
            "70000 is outside the range 1 to 65535",
        ),
        (
            "port=1.0",
            "integer[1, 65535]",
            "expected a decimal integer",
        ),
        ("ratio=abc", "float", "expected a decimal number"),
        (
            "mode=999",
            "pattern[/^[0-7]{4}$/]",
            "does not match /^[0-7]{4}$/",
        ),
        (
            "ports=1,x",
            "array[integer]",
            "element 1 ('x'): expected a decimal integer",
        ),
        ("enabled=yes", "boolean", "expected true or false"),
        (
            "size=big",
            "variant[integer, enum[auto]]",
            "matches none of its types",
        ),
        ("nice=x", "optional[integer]", "expected a decimal integer"),
        ("labels=novalue", "hash", "'novalue' is not key=value"),
        ("uid=1e3", "integer", "expected a decimal integer"),
    ] {
        let (attr, value) = arg.split_once('=').unwrap();
        let run = sandbox.ralsh(&["typed", "a", arg]);
        run.expect(2).stderr_has(&format!(
            "typed::typed: invalid value '{value}' for attribute '{attr}' of type {type_text}: {reason}"
        ));
    }
    assert_eq!(sandbox.calls(), Vec::<String>::new(), "nothing was invoked");
}

#[test]
fn integers_are_decimal_and_leading_zeros_do_not_make_octal() {
    let sandbox = Sandbox::new();
    let doc = sandbox
        .ralsh(&[
            "-j",
            "typed",
            "a",
            OWNER,
            "port=010",
            "ratio=-2.5",
            "size=auto",
            "nice=",
        ])
        .expect(0)
        .json();
    let resource = &doc["result"][0]["resource"];
    assert_eq!(resource["port"], json!(10));
    assert_eq!(resource["ratio"], json!(-2.5));
    assert_eq!(resource["size"], json!("auto"));
    assert_eq!(resource["nice"], json!(null));
    assert!(
        sandbox.calls()[1].contains(" port=10 "),
        "{:?}",
        sandbox.calls()
    );
}

#[test]
fn arrays_reach_bash_as_real_arrays() {
    let sandbox = Sandbox::new();
    let tags = r#"tags=["a b", "c,d", "it's", "", "$(touch x)"]"#;
    sandbox.ralsh(&["typed", "n", OWNER, tags]).expect(0);
    let recorded = sandbox.read("tags.n");
    let items: Vec<&str> = recorded.trim_end_matches('\0').split('\0').collect();
    assert_eq!(items, ["5", "a b", "c,d", "it's", "", "$(touch x)"]);
    assert!(!sandbox.root().join("x").exists());
}

#[test]
fn arrays_and_hashes_reach_python_through_shlex() {
    let sandbox = Sandbox::new();
    let args = [
        "arrays::python",
        "n",
        r#"tags=["a b", "c,d", "it's \"q\"", ""]"#,
        r#"labels={"k": "v w", "x=y": "1"}"#,
        "count=7",
    ];
    sandbox.ralsh(&args).expect(0);
    let got: serde_json::Value = serde_json::from_str(&sandbox.read("args.json")).unwrap();
    assert_eq!(got["tags"], json!(["a b", "c,d", "it's \"q\"", ""]));
    assert_eq!(got["labels"], json!(["k=v w", "x=y=1"]));
    assert_eq!(got["count"], json!("7"));
}

#[test]
fn typed_output_that_matches_the_request_is_not_a_change() {
    let sandbox = Sandbox::new();
    sandbox.write(
        "find.a",
        "# simple\nname: a\nensure: present\nport: 0080\nenabled: true\nports: 1 2\ntags: 'x y' z\nlabels: k=v\nratio: 1.50\nowner: me\n",
    );
    let run = sandbox.ralsh(&[
        "typed",
        "a",
        "port=80",
        "enabled=true",
        "ports=1,2",
        r#"tags=["x y", "z"]"#,
        "labels=k=v",
        "ratio=1.5",
    ]);
    run.expect(0).stdout_has("no changes needed");
    assert_eq!(
        sandbox.calls().len(),
        1,
        "only find ran: {:?}",
        sandbox.calls()
    );
}

#[test]
fn output_of_the_wrong_type_warns_and_strict_makes_it_an_error() {
    let sandbox = Sandbox::new();
    sandbox.write("list", "# simple\nname: a\nport: eighty\ncolour: red\n");
    let run = sandbox.ralsh(&["typed"]);
    run.expect(0)
        .stdout_has("=> 'eighty',")
        .stderr_has("typed::typed: resource 'a': attribute 'port' has value 'eighty', which is not a integer[1, 65535]")
        .stderr_has("resource 'a': attribute 'colour' (value 'red') is not declared in the metadata");
    let run = sandbox.ralsh(&["--strict", "typed"]);
    run.expect(2)
        .stderr_has("attribute 'port' has value 'eighty'")
        .stderr_has("(--strict)");
}

#[test]
fn a_resource_without_a_name_is_an_error() {
    let sandbox = Sandbox::new();
    sandbox.write("list", "# simple\nname:\nport: 1\n");
    sandbox
        .ralsh(&["typed"])
        .expect(2)
        .stderr_has("a resource has an empty name");
}

#[test]
fn init_only_attributes_cannot_change_on_existing_resources() {
    let sandbox = Sandbox::new();
    sandbox.write("find.a", "# simple\nname: a\nensure: present\nuid: 5\n");
    let run = sandbox.ralsh(&["typed", "a", "uid=6"]);
    run.expect(2)
        .stderr_has("attribute 'uid' can only be set when 'a' is created; it is '5' now");
    assert_eq!(sandbox.calls().len(), 1, "update not called");
    sandbox
        .ralsh(&["typed", "a", "uid=5"])
        .expect(0)
        .stdout_has("no changes needed");
    let doc = sandbox
        .ralsh(&["-j", "typed", "new", OWNER, "uid=6"])
        .expect(0)
        .json();
    assert_eq!(doc["result"][0]["resource"]["uid"], json!(6));
}

#[test]
fn creating_needs_required_attributes_and_fills_in_defaults() {
    let sandbox = Sandbox::new();
    let run = sandbox.ralsh(&["typed", "new", "port=80"]);
    run.expect(2)
        .stderr_has("creating 'new' needs the required attribute(s) owner");
    assert_eq!(sandbox.calls().len(), 1, "only find ran");
    sandbox.ralsh(&["typed", "new", "port=80", OWNER]).expect(0);
    assert_eq!(
        sandbox.calls()[2],
        "ral_action=update name=new port=80 owner=me shell=/bin/sh"
    );
    // An existing resource keeps what it has: no defaults, nothing required.
    sandbox.write(
        "find.old",
        "# simple\nname: old\nensure: present\nshell: /bin/zsh\n",
    );
    sandbox.ralsh(&["typed", "old", "port=81"]).expect(0);
    // (The creation's view was read back: a find after the update.)
    assert_eq!(sandbox.calls()[3], "ral_action=find name=new");
    assert_eq!(sandbox.calls()[5], "ral_action=update name=old port=81");
}

#[test]
fn ensure_transitions() {
    let sandbox = Sandbox::new();
    sandbox.write(
        "find.a",
        "# simple\nname: a\nensure: present\nport: 1\nowner: x\n",
    );
    // Delete passes only ensure.
    sandbox
        .ralsh(&["typed", "a", "ensure=absent", "port=2"])
        .expect(0);
    assert_eq!(sandbox.calls()[1], "ral_action=update name=a ensure=absent");
    // Absent to absent: nothing.
    sandbox
        .ralsh(&["typed", "gone", "ensure=absent"])
        .expect(0)
        .stdout_has("no changes needed");
    assert_eq!(sandbox.calls().len(), 3);
    // Create: absent to present.
    let doc = sandbox
        .ralsh(&["-j", "typed", "b", "ensure=present", OWNER])
        .expect(0)
        .json();
    assert_eq!(
        doc["result"][0]["changes"][0],
        json!({"attr": "ensure", "is": "present", "was": "absent"})
    );
}

#[test]
fn metadata_whose_ensure_lacks_present_or_absent_is_accepted() {
    // libral's service providers have ensure: enum[running, stopped].
    let sandbox = Sandbox::new();
    let dir = tempfile::tempdir().unwrap();
    let providers = dir.path().join("providers");
    std::fs::create_dir_all(&providers).unwrap();
    std::fs::copy(
        crate::support::fixtures_dir().join("providers/typed.prov"),
        providers.join("onoff.prov"),
    )
    .unwrap();
    std::fs::write(
        providers.join("onoff.yaml"),
        "provider:\n  type: onoff\n  invoke: simple\n  actions: [list]\n  suitable: true\n  attributes:\n    name: {}\n    ensure: {type: 'enum[on, off]'}\n",
    )
    .unwrap();
    let mut command = sandbox.command();
    command.arg("-I").arg(dir.path());
    let run = crate::support::run(&mut command);
    run.expect(0).stdout_has("onoff::onoff");
    assert!(!run.stderr.contains("onoff"), "{}", run.stderr);
}

#[test]
fn sensitive_values_are_passed_but_never_shown() {
    let sandbox = Sandbox::new();
    let secret = "hunter2-$ecret";
    sandbox.write("list", &format!("# simple\nname: a\npassword: {secret}\n"));
    sandbox.write(
        "find.a",
        &format!("# simple\nname: a\nensure: present\npassword: old-{secret}\n"),
    );
    sandbox.write(
        "update.a",
        &format!("# simple\nname: a\npassword: {secret}\nral_was: old-{secret}\nral_error: could not set {secret}\nral_eom\n"),
    );
    let list = sandbox.ralsh(&["typed"]);
    list.expect(0).stdout_has("password => [redacted]");
    let json_list = sandbox.ralsh(&["-j", "typed"]);
    assert_eq!(
        json_list.expect(0).json()["resources"][0]["password"],
        json!("[redacted]")
    );
    let update = sandbox.ralsh(&["-l", "debug", "typed", "a", &format!("password={secret}")]);
    update
        .expect(2)
        .stderr_has("could not set [redacted]")
        .stderr_has("password='[redacted]'");
    assert!(
        sandbox.read("calls.log").contains(secret),
        "the provider got the value"
    );
    sandbox.write(
        "update.a",
        &format!("# simple\nname: a\npassword: {secret}\nral_was: old-{secret}\n"),
    );
    let noop = sandbox.ralsh(&["-n", "typed", "a", &format!("password={secret}")]);
    noop.expect(0)
        .stdout_has("password: [redacted] -> [redacted] (noop: would change)");
    let explain = sandbox.ralsh(&["-e", "typed"]);
    explain.expect(0).stdout_has("a secret (sensitive)");
    for run in [&list, &json_list, &update, &noop, &explain] {
        assert!(
            !run.stdout.contains(secret) && !run.stderr.contains(secret),
            "{run:?}"
        );
    }
}

#[test]
fn explain_shows_behaviours() {
    let sandbox = Sandbox::new();
    let run = sandbox.ralsh(&["-e", "typed"]);
    run.expect(0)
        .stdout_has("  uid       integer                       init  fixed at creation\n")
        .stdout_has("must be given at creation (required)\n")
        .stdout_has("has a default (default: '/bin/sh')\n")
        .stdout_has("variant[integer, enum[auto]]");
    let doc = sandbox.ralsh(&["-e", "-j", "typed"]).expect(0).json();
    let attrs = doc["providers"][0]["attributes"].as_array().unwrap();
    let shell = attrs.iter().find(|a| a["name"] == "shell").unwrap();
    assert_eq!(shell["default"], json!("/bin/sh"));
    let owner = attrs.iter().find(|a| a["name"] == "owner").unwrap();
    assert_eq!(owner["required"], json!(true));
}

#[test]
fn several_names_give_a_simple_provider_one_update_each() {
    let sandbox = Sandbox::new();
    for name in ["a", "b", "c"] {
        sandbox.write(
            &format!("find.{name}"),
            &format!("# simple\nname: {name}\nensure: present\nport: 1\n"),
        );
    }
    sandbox.write("update.b", "# simple\nral_error: b is locked\nral_eom\n");
    let run = sandbox.ralsh(&["-j", "typed", "a", "b", "c", "port=2"]);
    let doc = run.expect(2).json();
    let result = doc["result"].as_array().unwrap();
    assert_eq!(result.len(), 3);
    assert_eq!(
        result[0]["changes"][0],
        json!({"attr": "port", "is": 2, "was": 1})
    );
    assert_eq!(result[1]["name"], "b");
    assert!(result[1]["error"]["message"]
        .as_str()
        .unwrap()
        .contains("b is locked"));
    assert_eq!(result[2]["resource"]["port"], json!(2));
    let updates: Vec<String> = sandbox
        .calls()
        .into_iter()
        .filter(|c| c.contains("update"))
        .collect();
    assert_eq!(updates.len(), 3);
}
