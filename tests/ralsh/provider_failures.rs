//! How a provider that fails to start or crashes is reported: a missing
//! interpreter is named, a traceback is shown once, and with -j stdout is
//! one JSON document whatever happens.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use crate::support::Sandbox;

fn provider(data: &Path, script: &str) {
    let providers = data.join("providers");
    std::fs::create_dir_all(&providers).unwrap();
    let file = providers.join("failing.prov");
    std::fs::write(&file, script).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(
        providers.join("failing.yaml"),
        "provider:\n  type: failing\n  invoke: simple\n  actions: [list, find]\n  suitable: true\n  attributes:\n    name: {}\n",
    )
    .unwrap();
}

#[test]
fn a_missing_interpreter_is_named() {
    let sandbox = Sandbox::new();
    let data = tempfile::tempdir().unwrap();
    provider(
        data.path(),
        "#! /usr/bin/ral-no-such-python\nprint('# simple')\n",
    );
    sandbox
        .ralsh_in(data.path(), &["failing"])
        .expect(2)
        .stderr_has("could not run")
        .stderr_has("for list: interpreter /usr/bin/ral-no-such-python not found");
}

#[test]
fn a_traceback_is_shown_once_and_json_stays_one_document() {
    let sandbox = Sandbox::new();
    let data = tempfile::tempdir().unwrap();
    provider(
        data.path(),
        "#!/usr/bin/env python3\nimport sys\nprint('# simple')\nsys.stdout.flush()\nraise RuntimeError('the database is gone')\n",
    );
    let run = sandbox.ralsh_in(data.path(), &["failing"]);
    run.expect(2)
        .stderr_has("[failing::failing] Traceback (most recent call last):")
        .stderr_has("failing::failing: list failed: exit status 1 (its stderr is above)");
    assert_eq!(
        run.stderr
            .matches("RuntimeError: the database is gone")
            .count(),
        1,
        "{}",
        run.stderr
    );
    let json = sandbox.ralsh_in(data.path(), &["-j", "failing"]);
    json.expect(2);
    let doc: serde_json::Value = serde_json::from_str(&json.stdout).expect("one JSON document");
    assert!(doc["error"]["message"]
        .as_str()
        .unwrap()
        .contains("list failed: exit status 1"));
    let found = sandbox.ralsh_in(data.path(), &["-j", "failing", "x"]);
    found.expect(2);
    let doc: serde_json::Value = serde_json::from_str(&found.stdout).expect("one JSON document");
    assert!(doc.get("error").is_some(), "{doc}");
}
