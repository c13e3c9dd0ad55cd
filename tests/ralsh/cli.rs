//! The command line: exit statuses, JSON shapes (validated against
//! schemas/), explain, colour, completions, man page.

use crate::support::{run, Sandbox};

#[test]
fn json_provider_list_has_libral_shape() {
    let sandbox = Sandbox::new();
    let doc = sandbox.ralsh(&["-j"]).expect(0).json();
    let scripted = doc["providers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "scripted::scripted")
        .unwrap();
    assert_eq!(scripted["type"], "scripted");
    assert_eq!(scripted["suitable"], true);
    assert_eq!(
        scripted["attributes"][3],
        serde_json::json!({"name": "tags", "desc": "a list", "type": "array[string]", "kind": "rw"})
    );
}

#[test]
fn json_listing_streams_valid_documents_even_on_error() {
    let sandbox = Sandbox::new();
    sandbox.write(
        "list.out",
        "# simple\nname: a\nenabled: true\ntags: p 'q r'\nname: b\n",
    );
    let doc = sandbox.ralsh(&["-j", "scripted"]).expect(0).json();
    assert_eq!(
        doc,
        serde_json::json!({"resources": [
            {"name": "a", "enabled": true, "tags": ["p", "q r"], "ral": {"type": "scripted", "provider": "scripted::scripted"}},
            {"name": "b", "ral": {"type": "scripted", "provider": "scripted::scripted"}},
        ]})
    );
    // Failing midway: the resources so far, and the error beside them.
    sandbox.write("list.out", "# simple\nname: a\nname: b\nbroken line\n");
    let run = sandbox.ralsh(&["-j", "scripted"]);
    let doc = run.expect(2).json();
    assert_eq!(doc["resources"][0]["name"], "a");
    assert_eq!(doc["resources"].as_array().unwrap().len(), 1);
    assert!(
        doc["error"]["message"].as_str().unwrap().contains("line 4"),
        "{doc}"
    );
    // Failing before any resource: the plain error document.
    sandbox.write("list.out", "no header\n");
    let doc = sandbox.ralsh(&["-j", "scripted"]).expect(2).json();
    assert_eq!(doc.as_object().unwrap().len(), 1);
    assert!(
        doc["error"]["message"]
            .as_str()
            .unwrap()
            .contains("'# simple'"),
        "{doc}"
    );
    // An empty listing is an empty array.
    sandbox.write("list.out", "# simple\n");
    let doc = sandbox.ralsh(&["-j", "scripted"]).expect(0).json();
    assert_eq!(doc, serde_json::json!({"resources": []}));
}

#[test]
fn every_exit_status() {
    let sandbox = Sandbox::new();
    sandbox.write("list.out", "# simple\nname: a\n");
    sandbox.write("find.out", "# simple\nname: a\nensure: absent\n");
    sandbox.ralsh(&["scripted"]).expect(0);
    sandbox.ralsh(&["scripted", "a"]).expect(0);
    // -a: a resource with ensure=absent counts as not found.
    let run = sandbox.ralsh(&["-a", "scripted", "a"]);
    run.expect(1);
    let run = sandbox.ralsh(&["-a", "-j", "scripted", "a"]);
    assert_eq!(run.expect(1).json(), serde_json::json!({}));
    sandbox.write("find.out", "# simple\nname: a\nral_unknown: true\n");
    sandbox.ralsh(&["scripted", "a"]).expect(1);
    sandbox.ralsh(&["nosuch"]).expect(2);
    sandbox.ralsh(&["--bogus-flag"]).expect(2);
    let doc = sandbox.ralsh(&["-j", "--bogus-flag"]).expect(2).json();
    assert!(
        doc["error"]["message"]
            .as_str()
            .unwrap()
            .contains("--bogus-flag"),
        "{doc}"
    );
    sandbox.ralsh(&["--timeout", "-3", "scripted"]).expect(2);
    let run = sandbox.ralsh(&["-j", "scripted", "a", "nosuch=1"]);
    assert!(run.expect(2).json()["error"]["message"]
        .as_str()
        .unwrap()
        .contains("unknown attribute 'nosuch'"));
}

#[test]
fn absent_resources_are_left_out_of_listings_with_a() {
    let sandbox = Sandbox::new();
    sandbox.write(
        "list.out",
        "# simple\nname: a\nensure: absent\nname: b\nensure: present\n",
    );
    let run = sandbox.ralsh(&["-a", "scripted"]);
    assert_eq!(
        run.expect(0).stdout,
        "scripted::scripted { 'b':\n  ensure => 'present',\n}\n"
    );
}

#[test]
fn json_show_wraps_the_resource() {
    let sandbox = Sandbox::new();
    sandbox.write("find.out", "# simple\nname: a\ncolor: red\n");
    let doc = sandbox.ralsh(&["-j", "scripted", "a"]).expect(0).json();
    assert_eq!(
        doc,
        serde_json::json!({"resource": {"name": "a", "color": "red", "ral": {"type": "scripted", "provider": "scripted::scripted"}}})
    );
}

#[test]
fn explain_shows_attributes_with_desc_type_and_kind() {
    let sandbox = Sandbox::new();
    let run = sandbox.ralsh(&["-e", "scripted"]);
    let out = &run.expect(0).stdout;
    assert!(
        out.contains("  enabled  boolean                rw    a flag\n"),
        "{out}"
    );
    assert!(
        out.contains("  ensure   enum[present, absent]  rw    whether it exists\n"),
        "{out}"
    );
    assert!(
        out.contains("  serial   string                 r     a read-only attribute\n"),
        "{out}"
    );
    assert!(
        out.contains("  noop:     derived by ralsh (update is never called)\n"),
        "{out}"
    );
    let doc = sandbox
        .ralsh(&["-e", "-j", "scripted_noop"])
        .expect(0)
        .json();
    assert_eq!(doc["providers"][0]["name"], "scripted_noop::scripted_noop");
    sandbox.ralsh(&["-e"]).expect(2);
}

#[test]
fn colour_only_on_request_and_never_with_no_color() {
    let sandbox = Sandbox::new();
    sandbox.write("find.out", "# simple\nname: a\ncolor: red\n");
    let plain = sandbox.ralsh(&["scripted", "a"]);
    assert!(!plain.expect(0).stdout.contains('\x1b'));
    let mut command = sandbox.command();
    command
        .env("CLICOLOR_FORCE", "1")
        .arg("-I")
        .arg(crate::support::fixtures_dir())
        .args(["scripted", "a"]);
    let forced = run(&mut command);
    assert!(
        forced
            .expect(0)
            .stdout
            .contains("\x1b[1mscripted::scripted\x1b[0m"),
        "{:?}",
        forced.stdout
    );
    command.env("NO_COLOR", "1");
    assert!(!run(&mut command).expect(0).stdout.contains('\x1b'));
}

#[test]
fn completions_man_page_version_and_help() {
    let sandbox = Sandbox::new();
    // The scripts ask ralsh itself (see completion.rs).
    let bash = sandbox.ralsh(&["--completions", "bash"]);
    assert!(
        bash.expect(0).stdout.contains("RALSH_COMPLETE=\"bash\""),
        "{}",
        bash.stdout
    );
    let zsh = sandbox.ralsh(&["--completions", "zsh"]);
    assert!(zsh.expect(0).stdout.contains("#compdef ralsh"));
    let man = sandbox.ralsh(&["--man"]);
    assert!(
        man.expect(0).stdout.starts_with(".ie \\n(.g .ds Aq"),
        "{}",
        &man.stdout[..80.min(man.stdout.len())]
    );
    assert!(man.stdout.contains(".TH ralsh"), "man page has a title");
    let version = sandbox.ralsh(&["--version"]);
    assert_eq!(
        version.expect(0).stdout,
        format!("ralsh {}\n", env!("CARGO_PKG_VERSION"))
    );
    let help = sandbox.ralsh(&["--help"]);
    for flag in [
        "--include",
        "--json",
        "--yaml",
        "--explain",
        "--noop",
        "--absent",
        "--log-level",
        "--timeout",
        "--root",
        "--quiet",
    ] {
        assert!(help.stdout.contains(flag), "{flag} in --help");
    }
}

#[test]
fn a_missing_root_is_an_error() {
    let sandbox = Sandbox::new();
    let mut command = crate::support::run_command_without_root(&sandbox);
    command.args(["--root", "/nonexistent/ral-root", "host"]);
    let run = run(&mut command);
    run.expect(2);
    run.stderr_has("--root /nonexistent/ral-root");
}
