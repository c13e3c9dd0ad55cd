//! Sensitive values are `[redacted]` in every output: the changes of a
//! JSON update (both conventions, noop or not), what a simple provider
//! says on stderr while it updates, and the message refusing
//! a value that does not fit a sensitive attribute's type, which names
//! the attribute and the type but never the value.

use std::os::unix::fs::PermissionsExt;

use serde_json::json;

use crate::support::{Run, Sandbox};

/// Fails if `secret` shows anywhere in what the run printed.
#[track_caller]
fn assert_not_shown(run: &Run, secret: &str) {
    assert!(
        !run.stdout.contains(secret) && !run.stderr.contains(secret),
        "{secret:?} was shown:\n{run:?}"
    );
}

#[test]
fn json_update_changes_of_a_simple_provider_are_redacted() {
    let sandbox = Sandbox::new();
    sandbox.write(
        "find.a",
        "# simple\nname: a\nensure: present\npassword: 0ld-s3cret\n",
    );
    sandbox.write(
        "update.a",
        "# simple\nname: a\npassword: n3w-s3cret\nral_was: 0ld-s3cret\n",
    );
    for noop in [false, true] {
        let mut args = vec!["-j", "typed", "a", "password=n3w-s3cret"];
        if noop {
            args.insert(0, "-n");
        }
        let run = sandbox.ralsh(&args);
        let doc = run.expect(0).json();
        let result = &doc["result"][0];
        assert_eq!(
            result["changes"],
            json!([{"attr": "password", "is": "[redacted]", "was": "[redacted]"}]),
            "noop {noop}: {doc}"
        );
        assert_eq!(result["resource"]["password"], "[redacted]", "{doc}");
        assert_eq!(doc.get("noop").is_some(), noop, "{doc}");
        assert_not_shown(&run, "s3cret");
    }
    assert!(
        sandbox
            .calls()
            .contains(&"ral_action=update name=a password=n3w-s3cret".to_owned()),
        "the provider got the value: {:?}",
        sandbox.calls()
    );
}

#[test]
fn json_update_changes_of_a_json_provider_are_redacted() {
    let sandbox = Sandbox::new();
    sandbox.write(
        "get.out",
        r#"{"resources": [{"name": "a", "password": "0ld-s3cret"}]}"#,
    );
    sandbox.write(
        "set.out",
        r#"{"changes": [{"name": "a", "password": {"is": "n3w-s3cret", "was": "0ld-s3cret"}}], "derive": false}"#,
    );
    let run = sandbox.ralsh(&["-j", "jsonish", "a", "password=n3w-s3cret"]);
    let doc = run.expect(0).json();
    assert_eq!(
        doc["result"][0]["changes"],
        json!([{"attr": "password", "is": "[redacted]", "was": "[redacted]"}]),
        "{doc}"
    );
    assert_not_shown(&run, "s3cret");
    // A noop of a provider with supports_noop: the answer is the
    // provider's again, and redacted again.
    let run = sandbox.ralsh(&["-j", "-n", "jsonish", "a", "password=n3w-s3cret"]);
    let doc = run.expect(0).json();
    assert_eq!(doc["noop"], true);
    assert_eq!(
        doc["result"][0]["changes"],
        json!([{"attr": "password", "is": "[redacted]", "was": "[redacted]"}]),
        "{doc}"
    );
    assert_not_shown(&run, "s3cret");
}

/// A data directory with the provider `secretive` (simple convention),
/// whose sensitive attributes have types a value can fail. It records
/// each call in ROOT/calls.log and finds whatever ROOT/find.NAME says.
fn secretive_provider() -> tempfile::TempDir {
    let data = tempfile::tempdir().unwrap();
    let providers = data.path().join("providers");
    std::fs::create_dir(&providers).unwrap();
    let script = providers.join("secretive.prov");
    std::fs::write(
        &script,
        "#!/bin/bash\neval \"$@\"\nr=${RALSH_ROOT_DIR:?}\nprintf '%s\\n' \"$*\" >> \"$r/calls.log\"\n\
         case \"$ral_action\" in\n\
           find) cat \"$r/find.$name\" 2>/dev/null || printf '# simple\\nname: %s\\nral_unknown: true\\n' \"$name\" ;;\n\
           list) echo '# simple' ;;\n\
           *) printf '# simple\\nname: %s\\nral_derive: true\\n' \"$name\" ;;\n\
         esac\n",
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(
        providers.join("secretive.yaml"),
        "---\nprovider:\n  type: secretive\n  invoke: simple\n  actions: [list, find, update]\n  \
         suitable: true\n  desc: sensitive attributes of many types\n  attributes:\n    \
         name: {}\n    ensure: {type: 'enum[present, absent]'}\n    \
         pin: {type: 'integer[0, 9999]', sensitive: true}\n    \
         code: {type: 'pattern[/^[a-z]+$/]', sensitive: true}\n    \
         keys: {type: 'array[integer]', sensitive: true}\n    \
         level: {type: 'enum[low, high]', sensitive: true}\n    \
         flag: {type: boolean, sensitive: true}\n    \
         maybe: {type: 'optional[integer]', sensitive: true}\n    \
         either: {type: 'variant[integer, boolean]', sensitive: true}\n    \
         ratio: {type: float, sensitive: true}\n",
    )
    .unwrap();
    data
}

#[test]
fn an_invalid_value_of_a_sensitive_attribute_is_refused_without_showing_it() {
    let sandbox = Sandbox::new();
    let data = secretive_provider();
    let dir = data.path().to_str().unwrap();
    for (attr, type_text) in [
        ("pin", "integer[0, 9999]"),
        ("code", "pattern[/^[a-z]+$/]"),
        ("keys", "array[integer]"),
        ("level", "enum[low, high]"),
        ("flag", "boolean"),
        ("maybe", "optional[integer]"),
        ("either", "variant[integer, boolean]"),
        ("ratio", "float"),
    ] {
        // Every type refuses this value, and its reason would quote it.
        let value = "7,S3CRET-9";
        let arg = format!("{attr}={value}");
        let expected = format!(
            "invalid value [redacted] for sensitive attribute '{attr}': expected {type_text}"
        );
        let run = sandbox.ralsh(&["-I", dir, "secretive", "a", &arg]);
        run.expect(2).stderr_has(&expected);
        assert_not_shown(&run, "S3CRET");
        let run = sandbox.ralsh(&["-j", "-I", dir, "secretive", "a", &arg]);
        let doc = run.expect(2).json();
        let message = doc["error"]["message"].as_str().unwrap();
        assert!(message.contains(&expected), "{message}");
        assert_not_shown(&run, "S3CRET");
    }
    assert!(
        sandbox.calls().is_empty(),
        "nothing ran: {:?}",
        sandbox.calls()
    );
}

#[test]
fn a_reported_sensitive_value_of_the_wrong_type_is_not_shown_in_the_warning() {
    let sandbox = Sandbox::new();
    let data = secretive_provider();
    sandbox.write(
        "find.a",
        "# simple\nname: a\nensure: present\npin: S3CRET\nlevel: medium-S3CRET\n",
    );
    let dir = data.path().to_str().unwrap();
    let run = sandbox.ralsh(&["-I", dir, "secretive", "a"]);
    run.expect(0)
        .stderr_has("attribute 'pin' has value [redacted], which is not a integer[0, 9999]")
        .stderr_has("attribute 'level' has value [redacted], which is not a enum[low, high]");
    assert_not_shown(&run, "S3CRET");
    let run = sandbox.ralsh(&["--strict", "-j", "-I", dir, "secretive", "a"]);
    run.expect(2).json();
    run.stderr_has("has value [redacted]");
    assert_not_shown(&run, "S3CRET");
}

#[test]
fn a_sensitive_value_a_simple_provider_echoes_on_stderr_during_update_is_redacted() {
    let sandbox = Sandbox::new();
    let data = tempfile::tempdir().unwrap();
    let providers = data.path().join("providers");
    std::fs::create_dir(&providers).unwrap();
    let script = providers.join("echoing.prov");
    std::fs::write(
        &script,
        "#!/bin/bash\neval \"$@\"\n\
         case \"$ral_action\" in\n\
           find) printf '# simple\\nname: %s\\nensure: present\\n' \"$name\" ;;\n\
           list) echo '# simple' ;;\n\
           update) echo \"warning: setting the password of $name to $password\" >&2\n\
                   # A line ral cuts (at 64 KiB) in the middle of the value.\n\
                   { head -c 65530 /dev/zero | tr '\\0' x; echo \"$password\"; } >&2\n\
                   printf '# simple\\nname: %s\\nral_derive: true\\n' \"$name\" ;;\n\
         esac\n",
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(
        providers.join("echoing.yaml"),
        "---\nprovider:\n  type: echoing\n  invoke: simple\n  actions: [list, find, update]\n  \
         suitable: true\n  desc: echoes its sensitive value on stderr\n  attributes:\n    \
         name: {}\n    ensure: {type: 'enum[present, absent]'}\n    \
         password: {sensitive: true, kind: w}\n",
    )
    .unwrap();
    let dir = data.path().to_str().unwrap();
    for level in ["warn", "debug"] {
        let run = sandbox.ralsh(&["-l", level, "-I", dir, "echoing", "a", "password=S3CRET-77"]);
        run.expect(0)
            .stderr_has("warning: setting the password of a to [redacted]");
        assert_not_shown(&run, "S3CRET");
        // Nor does the start of the value, where the line is cut.
        run.stderr_has("xxx[redacted]... (line cut at 65536 bytes)");
        // A value of several lines reaches stderr line by line: each line
        // of it is taken out.
        let password = "password=S3CRET-one\n  S3CRET-two\r\nS3CRET-three";
        let run = sandbox.ralsh(&["-l", level, "-I", dir, "echoing", "a", password]);
        run.expect(0)
            .stderr_has("warning: setting the password of a to [redacted]\n")
            .stderr_has("]   [redacted]\\r\n");
        assert_not_shown(&run, "S3CRET");
    }
}
