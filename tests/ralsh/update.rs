//! The update flow: request checks, only differing attributes passed, no
//! call when nothing differs, noop safety, reported and derived changes.

use crate::support::Sandbox;

const FOUND: &str =
    "# simple\nname: a\nensure: present\ncolor: red\ntags: x y\nenabled: false\nserial: 7\n";

fn sandbox_with_found() -> Sandbox {
    let sandbox = Sandbox::new();
    sandbox.write("find.out", FOUND);
    sandbox
}

#[test]
fn update_receives_only_the_attributes_that_differ() {
    let sandbox = sandbox_with_found();
    sandbox.write("update.out", "# simple\nname: a\nral_derive: true\n");
    let run = sandbox.ralsh(&["scripted", "a", "color=red", "tags=x,z", "enabled=true"]);
    run.expect(0);
    assert_eq!(
        sandbox.calls(),
        [
            "ral_action=find name=a",
            "ral_action=update name=a tags=(x z) enabled=true"
        ]
    );
    assert_eq!(
        run.stdout,
        "scripted::scripted { 'a':\n  ensure  => 'present',\n  color   => 'red',\n  enabled => true,\n  serial  => '7',\n  tags    => ['x', 'z'],\n}\n\
         tags: ['x', 'y'] -> ['x', 'z']\nenabled: false -> true\n"
    );
}

#[test]
fn nothing_differs_means_no_update_call() {
    let sandbox = sandbox_with_found();
    let run = sandbox.ralsh(&["scripted", "a", "color=red", "tags=x, y", "enabled=false"]);
    run.expect(0);
    assert_eq!(sandbox.calls(), ["ral_action=find name=a"]);
    assert!(
        run.stdout.ends_with("}\nno changes needed\n"),
        "{}",
        run.stdout
    );
    let run = sandbox.ralsh(&["-j", "scripted", "a", "color=red"]);
    assert_eq!(
        run.expect(0).json()["result"][0]["changes"],
        serde_json::json!([])
    );
}

#[test]
fn ensure_absent_for_a_missing_resource_is_no_change_and_no_call() {
    let sandbox = Sandbox::new();
    sandbox.write("find.out", "# simple\nname: gone\nral_unknown: true\n");
    let run = sandbox.ralsh(&["scripted", "gone", "ensure=absent"]);
    run.expect(0);
    assert_eq!(sandbox.calls(), ["ral_action=find name=gone"]);
    run.stdout_has("no changes needed");
    sandbox.write("find.out", "# simple\nname: gone\nensure: absent\n");
    sandbox
        .ralsh(&["scripted", "gone", "ensure=absent", "color=red"])
        .expect(0);
    assert_eq!(sandbox.calls().len(), 2, "{:?}", sandbox.calls());
}

#[test]
fn reported_changes_carry_their_old_values() {
    let sandbox = sandbox_with_found();
    sandbox.write(
        "update.out",
        "# simple\nname: a\ncolor: blue\nral_was: red\nserial: 8\nral_was: 7\n",
    );
    let run = sandbox.ralsh(&["-j", "scripted", "a", "color=blue"]);
    let doc = run.expect(0).json();
    assert_eq!(
        doc["result"][0]["changes"],
        serde_json::json!([
            {"attr": "color", "is": "blue", "was": "red"},
            {"attr": "serial", "is": "8", "was": "7"},
        ])
    );
    assert_eq!(doc["result"][0]["resource"]["serial"], "8");
    assert_eq!(
        doc["result"][0]["resource"]["tags"],
        serde_json::json!(["x", "y"])
    );
    assert!(doc.get("noop").is_none());
}

#[test]
fn creating_reports_changes_from_nothing() {
    let sandbox = Sandbox::new();
    sandbox.write("find.out", "# simple\nname: new\nral_unknown: true\n");
    sandbox.write("update.out", "# simple\nname: new\nral_derive: true\n");
    let run = sandbox.ralsh(&["-j", "scripted", "new", "ensure=present", "color=red"]);
    let doc = run.expect(0).json();
    assert_eq!(
        doc["result"][0]["changes"],
        serde_json::json!([
            {"attr": "ensure", "is": "present", "was": "absent"},
            {"attr": "color", "is": "red", "was": null},
        ])
    );
}

#[test]
fn update_answering_ral_unknown_cannot_create() {
    let sandbox = Sandbox::new();
    sandbox.write("find.out", "# simple\nname: new\nral_unknown: true\n");
    sandbox.write("update.out", "# simple\nname: new\nral_unknown: true\n");
    let run = sandbox.ralsh(&["scripted", "new", "color=red"]);
    run.expect(2);
    run.stderr_has("resource 'new' does not exist and cannot be created");
}

#[test]
fn update_answering_for_another_name_or_with_stray_was_is_an_error() {
    let sandbox = sandbox_with_found();
    sandbox.write("update.out", "# simple\nname: b\ncolor: blue\n");
    let run = sandbox.ralsh(&["scripted", "a", "color=blue"]);
    run.expect(2);
    run.stderr_has("update of 'a' answered for 'b'");
    sandbox.write("update.out", "# simple\nname: a\nral_was: red\n");
    let run = sandbox.ralsh(&["scripted", "a", "color=blue"]);
    run.expect(2);
    run.stderr_has("line 3: ral_was comes before any changed attribute");
}

#[test]
fn noop_never_calls_update_without_supports_noop() {
    let sandbox = sandbox_with_found();
    // Were update called, this answer would show up as a change.
    sandbox.write(
        "update.out",
        "# simple\nname: a\ncolor: CHANGED\nral_was: red\n",
    );
    let run = sandbox.ralsh(&["--noop", "scripted", "a", "color=blue", "enabled=true"]);
    run.expect(0);
    assert_eq!(sandbox.calls(), ["ral_action=find name=a"]);
    assert!(
        run.stdout.ends_with("color: 'red' -> 'blue' (noop: would change)\nenabled: false -> true (noop: would change)\n"),
        "{}",
        run.stdout
    );
    let doc = sandbox
        .ralsh(&["-n", "-j", "scripted", "a", "color=blue"])
        .expect(0)
        .json();
    assert_eq!(doc["noop"], true);
    assert_eq!(
        doc["result"][0]["changes"][0],
        serde_json::json!({"attr": "color", "is": "blue", "was": "red"})
    );
    assert!(!sandbox.read("calls.log").contains("update"));
}

#[test]
fn noop_passes_ral_noop_to_providers_that_support_it() {
    let sandbox = sandbox_with_found();
    sandbox.write(
        "update.out",
        "# simple\nname: a\ncolor: blue\nral_was: red\n",
    );
    let run = sandbox.ralsh(&["-n", "scripted_noop", "a", "color=blue"]);
    run.expect(0);
    assert_eq!(
        sandbox.calls(),
        [
            "ral_action=find name=a",
            "ral_action=update name=a color=blue ral_noop=true"
        ]
    );
    assert!(
        run.stdout
            .ends_with("color: 'red' -> 'blue' (noop: would change)\n"),
        "{}",
        run.stdout
    );
}

#[test]
fn bad_requests_are_rejected_before_anything_runs() {
    let sandbox = sandbox_with_found();
    for (args, needle) in [
        (&["scripted", "a", "size=3"][..], "unknown attribute 'size'; settable attributes: ensure, color, tags, enabled, token"),
        (&["scripted", "a", "name=b"][..], "'name=' is not allowed"),
        (&["scripted", "a", "color"][..], "argument 'color' is not of the form attribute=value"),
        (&["scripted", "a", "serial=9"][..], "attribute 'serial' is read-only"),
        (&["scripted", "a", "enabled=yes"][..], "invalid value 'yes' for attribute 'enabled' of type boolean: expected true or false"),
        (&["scripted", "a", "ensure=gone"][..], "invalid value 'gone' for attribute 'ensure' of type enum[present, absent]: expected one of present, absent"),
        (&["scripted", "a", "color=a", "color=b"][..], "attribute 'color' is given twice"),
        (&["scripted", "", "color=a"][..], "the resource name must not be empty"),
    ] {
        let run = sandbox.ralsh(args);
        run.expect(2);
        assert!(run.stderr.contains(needle), "{args:?}: {}", run.stderr);
        run.stderr_has("scripted::scripted");
    }
    assert_eq!(sandbox.calls(), Vec::<String>::new(), "nothing may run");
}

#[test]
fn write_only_parameters_are_always_passed() {
    let sandbox = sandbox_with_found();
    sandbox.write("update.out", "# simple\nname: a\n");
    sandbox.ralsh(&["scripted", "a", "token=abc def"]).expect(0);
    assert_eq!(
        sandbox.calls()[1],
        "ral_action=update name=a token='abc def'"
    );
}

#[test]
fn a_provider_without_update_refuses_changes_before_anything_runs() {
    let sandbox = Sandbox::new();
    sandbox.write("flood", "many");
    let run = sandbox.ralsh(&["flood", "x", "name2=1"]);
    run.expect(2)
        .stderr_has("flood::flood does not support the update action");
}

#[test]
fn reported_changes_are_kept_and_the_others_derived_once_each() {
    let sandbox = sandbox_with_found();
    // The provider reports the change of `enabled` itself (with its old
    // value) and asks ral to derive the rest.
    sandbox.write(
        "update.out",
        "# simple\nname: a\nenabled: true\nral_was: false\nral_derive: true\n",
    );
    let run = sandbox.ralsh(&["scripted", "a", "tags=x,z", "enabled=true"]);
    run.expect(0);
    let changes: Vec<&str> = run.stdout.lines().filter(|l| l.contains(" -> ")).collect();
    assert_eq!(
        changes,
        ["enabled: false -> true", "tags: ['x', 'y'] -> ['x', 'z']"],
        "{}",
        run.stdout
    );
}

#[test]
fn several_names_are_read_in_one_get_and_changed_in_one_set() {
    let sandbox = Sandbox::new();
    let plans = crate::support::fixtures_dir().join("plans");
    let run = sandbox.ralsh(&[
        "-I",
        plans.to_str().unwrap(),
        "alpha",
        "a1",
        "a2",
        "a3",
        "value=x",
    ]);
    run.expect(0);
    let calls: Vec<String> = sandbox
        .calls()
        .into_iter()
        .filter(|call| call.contains(" begin "))
        .collect();
    // The three created are read back together, for the view of each.
    assert_eq!(
        calls,
        [
            "alpha begin get a1,a2,a3",
            "alpha begin set a1,a2,a3",
            "alpha begin get a1,a2,a3"
        ]
    );
}
