//! Password aging and expiry of the user type (`password_min_age`,
//! `password_max_age`, `password_warn_days`, `expiry`): read from
//! shadow's day fields as Puppet reads them, written as chage(1) writes
//! them (checked against chage itself on a twin fake root when it can
//! run here), one field at a time, and refused when no field can hold
//! them.

use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::{json, Value as Json};

use crate::provider_user::files;
use crate::support::{run, Sandbox, GROUP, GSHADOW};

const PASSWD: &str = "root:x:0:0:root:/root:/bin/bash\n\
                      alice:x:1000:1000::/home/alice:/bin/sh\n\
                      pg:x:101:104::/var/lib/pg:/bin/sh\n\
                      carol:x:1002:1000::/home/carol:/bin/sh\n";
/// root's and pg's aging as this machine's root and postgres have it;
/// alice has a hash, an old last change, inactivity days and an expiry;
/// a comment line and a CRLF line stay; carol has no shadow line.
const SHADOW: &str = "root:*:20228:0:99999:7:::\n\
                      # kept\n\
                      alice:$6$salt$hash:19000:1:60:7:14:20089:\n\
                      pg:!:20593::::::\r\n";

fn sandbox() -> Sandbox {
    let sandbox = Sandbox::new();
    sandbox.write("etc/passwd", PASSWD);
    sandbox.write("etc/shadow", SHADOW);
    sandbox.write("etc/group", GROUP);
    sandbox.write("etc/gshadow", GSHADOW);
    sandbox
}

fn aging(resource: &Json) -> Json {
    json!([
        resource["password_min_age"],
        resource["password_max_age"],
        resource["password_warn_days"],
        resource["expiry"],
    ])
}

/// `puppet resource user root --to_yaml` on this machine says
/// password_max_age 99999, password_min_age 0, password_warn_days 7 and
/// no expiry (absent, which it leaves out); for postgres, whose fields
/// are empty, -1 three times and no expiry. ral reads the same from the
/// same lines.
#[test]
fn aging_is_read_as_puppet_reads_it() {
    let sandbox = sandbox();
    let doc = sandbox.ralsh(&["-j", "user"]).expect(0).json();
    let by_name = |name: &str| {
        doc["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == name)
            .unwrap()
            .clone()
    };
    assert_eq!(aging(&by_name("root")), json!([0, 99999, 7, "absent"]));
    assert_eq!(aging(&by_name("pg")), json!([-1, -1, -1, "absent"]));
    assert_eq!(aging(&by_name("alice")), json!([1, 60, 7, "2025-01-01"]));
    // No shadow line: nothing to read, as for the password.
    let carol = by_name("carol");
    for attr in [
        "password",
        "password_min_age",
        "password_max_age",
        "password_warn_days",
        "expiry",
    ] {
        assert!(carol.get(attr).is_none(), "{attr}: {carol}");
    }
    sandbox
        .ralsh(&["user", "root"])
        .expect(0)
        .stdout_has("password_max_age   => 99999,")
        .stdout_has("expiry             => 'absent',");
}

/// chage -R ROOT ARGS NAME on `root`, when it can run here (it chroots,
/// which needs root); whether it ran.
fn chage(root: &Path, args: &[&str], name: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    let chage = Path::new("/usr/bin/chage");
    if unsafe { libc::geteuid() } != 0 || !chage.exists() {
        return false;
    }
    let status = Command::new(chage)
        .arg("-R")
        .arg(root)
        .args(args)
        .arg(name)
        .env("TZ", "UTC")
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "chage {args:?} {name}");
    true
}

/// Each setting through ralsh leaves shadow as the same chage command
/// leaves a twin of it, byte for byte: the day number since 1970-01-01
/// for an expiry, an empty field for -1 and absent; no other field and
/// no other line changes.
#[test]
fn each_setting_writes_what_chage_writes() {
    let sandbox = sandbox();
    let twin = Sandbox::new();
    twin.write("etc/passwd", PASSWD);
    twin.write("etc/shadow", SHADOW);
    twin.write("etc/group", GROUP);
    let mut chage_ran = false;
    for (setting, chage_args, alice_line) in [
        (
            "password_min_age=2",
            ["-m", "2"],
            "alice:$6$salt$hash:19000:2:60:7:14:20089:",
        ),
        (
            "password_max_age=30",
            ["-M", "30"],
            "alice:$6$salt$hash:19000:2:30:7:14:20089:",
        ),
        (
            "password_warn_days=5",
            ["-W", "5"],
            "alice:$6$salt$hash:19000:2:30:5:14:20089:",
        ),
        (
            "expiry=2024-02-29",
            ["-E", "2024-02-29"],
            "alice:$6$salt$hash:19000:2:30:5:14:19782:",
        ),
        (
            "password_max_age=-1",
            ["-M", "-1"],
            "alice:$6$salt$hash:19000:2::5:14:19782:",
        ),
        (
            "expiry=absent",
            ["-E", "-1"],
            "alice:$6$salt$hash:19000:2::5:14::",
        ),
        (
            "password_min_age=-1",
            ["-m", "-1"],
            "alice:$6$salt$hash:19000:::5:14::",
        ),
        (
            "expiry=1970-01-01",
            ["-E", "1970-01-01"],
            "alice:$6$salt$hash:19000:::5:14:0:",
        ),
        (
            "expiry=9999-12-31",
            ["-E", "9999-12-31"],
            "alice:$6$salt$hash:19000:::5:14:2932896:",
        ),
        (
            "password_warn_days=2147483647",
            ["-W", "2147483647"],
            "alice:$6$salt$hash:19000:::2147483647:14:2932896:",
        ),
    ] {
        sandbox
            .ralsh(&["user", "alice", setting])
            .expect(0)
            .stdout_has(" -> ");
        let expected = SHADOW.replace("alice:$6$salt$hash:19000:1:60:7:14:20089:", alice_line);
        assert_eq!(sandbox.read("etc/shadow"), expected, "{setting}");
        if chage(twin.root(), &chage_args, "alice") {
            chage_ran = true;
            assert_eq!(
                sandbox.read("etc/shadow"),
                twin.read("etc/shadow"),
                "{setting}: ral and chage {chage_args:?} differ"
            );
        }
        sandbox
            .ralsh(&["user", "alice", setting])
            .expect(0)
            .stdout_has("no changes needed");
    }
    eprintln!("compared with chage itself: {chage_ran}");
}

/// A new user gets useradd's aging (0, 99999, 7, no expiry) with the
/// values given in their places.
#[test]
fn a_new_user_gets_the_aging_given() {
    let sandbox = sandbox();
    let run = sandbox.ralsh(&[
        "user",
        "bob",
        "ensure=present",
        "password_max_age=90",
        "expiry=2030-06-01",
    ]);
    run.expect(0)
        .stdout_has("password_min_age: (none) -> 0")
        .stdout_has("password_max_age: (none) -> 90")
        .stdout_has("expiry: (none) -> '2030-06-01'");
    let shadow = sandbox.read("etc/shadow");
    let added = shadow.strip_prefix(SHADOW).unwrap();
    assert!(
        added.starts_with("bob:!:") && added.ends_with(":0:90:7::22066:\n"),
        "{added}"
    );
    let doc = sandbox.ralsh(&["-j", "user", "bob"]).expect(0).json();
    assert_eq!(aging(&doc["resource"]), json!([0, 90, 7, "2030-06-01"]));
    sandbox.ralsh(&["user", "dave", "ensure=present"]).expect(0);
    assert!(sandbox.read("etc/shadow").ends_with(":0:99999:7:::\n"));
}

/// With the password in the same change, the password and its last
/// change move, and the aging fields change as they alone would.
#[test]
fn aging_and_password_change_together_each_their_fields() {
    let sandbox = sandbox();
    sandbox
        .ralsh(&["user", "alice", "password=!x", "password_warn_days=3"])
        .expect(0);
    let shadow = sandbox.read("etc/shadow");
    let line = shadow.lines().find(|l| l.starts_with("alice:")).unwrap();
    let fields: Vec<&str> = line.split(':').collect();
    assert_eq!(fields[1], "!x");
    assert_ne!(fields[2], "19000", "a new password is a new last change");
    assert_eq!(fields[3..], ["1", "60", "3", "14", "20089", ""]);
}

/// The native provider on its own (`ral-provider etc_passwd`), with a
/// JSON set request: the values the host's type check would stop never
/// reach the files either.
fn provider_set(root: &Path, should: &Json) -> Json {
    let program = env!("CARGO_BIN_EXE_ral-provider");
    let request = json!({"updates": [{"name": "alice", "is": {}, "should": should}]});
    let output = crate::support::run_with_stdin(
        Command::new(program)
            .args(["etc_passwd", "ral_action=set"])
            .env_clear()
            .env("RALSH_ROOT_DIR", root),
        &request.to_string(),
    );
    serde_json::from_str(&output.stdout).unwrap()
}

#[test]
fn bad_values_are_refused_naming_attribute_and_value() {
    let sandbox = sandbox();
    let before = files(&sandbox);
    // Through ralsh: the type stops what is no number or out of range,
    // the provider an impossible day.
    for (setting, said) in [
        (
            "password_max_age=-2",
            "'password_max_age' of type integer[-1, 2147483647]: -2 is outside the range",
        ),
        (
            "password_min_age=ten",
            "invalid value 'ten' for attribute 'password_min_age'",
        ),
        (
            "password_warn_days=2147483648",
            "invalid value '2147483648' for attribute 'password_warn_days'",
        ),
        (
            "expiry=2025-02-30",
            "expiry: '2025-02-30' is no day of the calendar",
        ),
        (
            "expiry=1969-12-31",
            "expiry: '1969-12-31' is before 1970-01-01",
        ),
        (
            "expiry=never",
            "invalid value 'never' for attribute 'expiry'",
        ),
        (
            "expiry=2025-1-5",
            "invalid value '2025-1-5' for attribute 'expiry'",
        ),
    ] {
        for name in ["alice", "bob"] {
            sandbox
                .ralsh(&["user", name, "ensure=present", setting])
                .expect(2)
                .stderr_has(said);
        }
    }
    // The provider itself, given what the host would not pass.
    for (should, said) in [
        (
            json!({"password_max_age": -2}),
            "password_max_age: -2 is not a number of days from 0 to 2147483647, or -1 for none",
        ),
        (
            json!({"password_min_age": "5"}),
            "password_min_age: \"5\" is not a number of days",
        ),
        (
            json!({"password_warn_days": 2_147_483_648u64}),
            "password_warn_days: 2147483648 is not a number of days",
        ),
        (
            json!({"expiry": "2023-02-29"}),
            "expiry: '2023-02-29' is no day of the calendar",
        ),
        (
            json!({"expiry": 20089}),
            "expiry: 20089 is not a date YYYY-MM-DD or 'absent'",
        ),
    ] {
        let answer = provider_set(sandbox.root(), &should);
        let message = answer["changes"][0]["error"]["message"]
            .as_str()
            .unwrap_or_else(|| panic!("{should}: {answer}"));
        assert!(message.starts_with(said), "{should}: {message}");
    }
    assert_eq!(files(&sandbox), before);
}

#[test]
fn noop_changes_nothing_and_says_what_it_would_do() {
    let sandbox = sandbox();
    let before = files(&sandbox);
    sandbox
        .ralsh(&[
            "-n",
            "user",
            "alice",
            "password_max_age=30",
            "expiry=absent",
        ])
        .expect(0)
        .stdout_has("password_max_age: 60 -> 30 (noop: would change)")
        .stdout_has("expiry: '2025-01-01' -> 'absent' (noop: would change)");
    sandbox
        .ralsh(&["-n", "user", "bob", "password_warn_days=1"])
        .expect(0)
        .stdout_has("password_warn_days: (none) -> 1");
    assert_eq!(files(&sandbox), before);
}

/// carol has no shadow line: aging alone has nowhere to go and is
/// refused; with ensure=present her account is completed first.
#[test]
fn an_account_without_a_shadow_line_gets_aging_once_completed() {
    let sandbox = sandbox();
    let before = files(&sandbox);
    sandbox
        .ralsh(&["user", "carol", "expiry=2030-06-01"])
        .expect(2)
        .stderr_has("expiry: 'carol' has no shadow line to hold it; ensure=present adds one");
    assert_eq!(files(&sandbox), before);
    sandbox
        .ralsh(&["user", "carol", "ensure=present", "expiry=2030-06-01"])
        .expect(0)
        .stdout_has("ensure: 'incomplete' -> 'present'")
        .stdout_has("expiry: 'absent' -> '2030-06-01'");
    let shadow = sandbox.read("etc/shadow");
    let added = shadow.strip_prefix(SHADOW).unwrap();
    assert!(
        added.starts_with("carol:!:") && added.ends_with(":0:99999:7::22066:\n"),
        "{added}"
    );
}

/// A manifest's aging is planned, applied, and then planned as done:
/// what ral writes reads back as the manifest says (-1 and absent as
/// the empty fields they write).
#[test]
fn a_plan_converges_on_aging() {
    let sandbox = sandbox();
    let manifests = tempfile::tempdir().unwrap();
    let manifest = manifests.path().join("site.yaml");
    std::fs::write(
        &manifest,
        "user:\n  bob:\n    expiry: 2030-06-01\n    password_max_age: 90\n  \
         alice:\n    expiry: absent\n    password_warn_days: -1\n",
    )
    .unwrap();
    let manifest = manifest.to_str().unwrap();
    run(&mut sandbox.ral_command("plan", &[manifest]))
        .expect(0)
        .stdout_has("+ user[bob]")
        .stdout_has("    expiry: '2030-06-01'\n")
        .stdout_has("    expiry: '2025-01-01' -> 'absent'\n")
        .stdout_has("    password_warn_days: 7 -> -1\n");
    run(&mut sandbox.ral_command("apply", &[manifest])).expect(0);
    assert!(sandbox
        .read("etc/shadow")
        .contains("\nalice:$6$salt$hash:19000:1:60::14::\n"));
    run(&mut sandbox.ral_command("plan", &[manifest]))
        .expect(0)
        .stdout_has("0 to create, 0 to change, 0 to remove; 2 unchanged");
}
