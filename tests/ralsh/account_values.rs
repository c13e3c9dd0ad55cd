//! Values the user and group providers write into the account files:
//! those glibc or shadow-utils would read otherwise than ral means are
//! refused, naming the attribute and showing the value escaped; an empty
//! password must be asked for explicitly and is shown as empty; and each
//! field lands where readers look for it (an id already used is refused,
//! gshadow's members and administrators stay apart).

use std::io::Write as _;
use std::process::Stdio;

use serde_json::{json, Value as Json};

use crate::provider_user::files;
use crate::support::{accounts_sandbox, run, Run, Sandbox, GROUP, PASSWD, SHADOW};

/// alice administers staff (gshadow's third field) and is its member
/// (the fourth).
const GSHADOW: &str = "root:*::\nstaff:!:alice:alice\nalice:!::\n";

fn values_sandbox() -> Sandbox {
    let sandbox = accounts_sandbox();
    sandbox.write("etc/gshadow", GSHADOW);
    sandbox
}

/// `ralsh TYPE NAME --attrs-stdin` with `attrs` as JSON on stdin: the way
/// a value no command-line argument can hold (NUL) reaches a provider.
fn set_json(sandbox: &Sandbox, type_name: &str, name: &str, attrs: &Json) -> Run {
    let mut command = sandbox.fixture_command(&[type_name, name, "--attrs-stdin"]);
    command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command.spawn().unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(attrs.to_string().as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    Run {
        status: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8(output.stdout).unwrap(),
        stderr: String::from_utf8(output.stderr).unwrap(),
    }
}

/// The issue's case: a NUL in the comment was written raw, glibc read
/// the nologin account's shell as empty (/bin/sh), and ral read `svc?`
/// back, so it never converged.
#[test]
fn a_nul_in_a_comment_is_refused_not_written() {
    let sandbox = values_sandbox();
    let before = files(&sandbox);
    let attrs = json!({"comment": "svc\u{0}", "shell": "/usr/sbin/nologin"});
    for name in ["svc", "alice"] {
        set_json(&sandbox, "user", name, &attrs)
            .expect(2)
            .stderr_has(r"comment: 'svc\u{0}' contains the control character U+0000");
    }
    assert_eq!(files(&sandbox), before);
}

#[test]
fn control_characters_and_colons_are_refused_in_every_text_attribute() {
    let sandbox = values_sandbox();
    let before = files(&sandbox);
    for (bad, shown, problem) in [
        ("a\u{1}b", r"a\u{1}b", "the control character U+0001"),
        ("a\tb", r"a\tb", "the control character U+0009"),
        ("a\nb", r"a\nb", "the control character U+000A"),
        ("a\u{7f}", r"a\u{7f}", "the control character U+007F"),
        ("a\u{85}", r"a\u{85}", "the control character U+0085"),
        ("a\u{9b}", r"a\u{9b}", "the control character U+009B"),
        ("a\u{2028}", r"a\u{2028}", "the control character U+2028"),
        ("a:b", "a:b", "':', the field separator"),
    ] {
        for attr in ["comment", "home", "shell", "password"] {
            let value = match attr {
                "home" | "shell" => format!("/{bad}"),
                _ => bad.to_owned(),
            };
            let run = set_json(&sandbox, "user", "alice", &json!({ attr: value }));
            run.expect(2);
            if attr == "password" {
                run.stderr_has(&format!("password: the value contains {problem}"));
                assert!(!run.stderr.contains(bad), "{}", run.stderr);
            } else {
                let slash = if attr == "comment" { "" } else { "/" };
                run.stderr_has(&format!("{attr}: '{slash}{shown}' contains {problem}"));
            }
        }
    }
    assert_eq!(files(&sandbox), before);
}

#[test]
fn member_names_glibc_would_split_or_skip_are_refused() {
    let sandbox = values_sandbox();
    let before = files(&sandbox);
    for (members, message) in [
        (
            json!(["alice,root"]),
            "members: member name 'alice,root' contains ','",
        ),
        (
            json!(["", "alice"]),
            "members: member name must not be empty",
        ),
        (
            json!([" alice"]),
            "members: member name ' alice' contains whitespace",
        ),
        (
            json!(["+alice"]),
            "members: member name '+alice' starts with '+'",
        ),
        (json!(["#x"]), "members: member name '#x' starts with '#'"),
        (
            json!(["al\u{0}ice"]),
            r"members: member name 'al\u{0}ice' contains a control character",
        ),
        (json!(["a:b"]), "members: member name 'a:b' contains ':'"),
    ] {
        for group in ["staff", "devs"] {
            // A JSON literal on the command line carries any list.
            sandbox
                .ralsh(&["group", group, &format!("members={members}")])
                .expect(2)
                .stderr_has(message);
        }
    }
    assert_eq!(files(&sandbox), before);
    // A user name that cannot stand in a member list (an account made by
    // hand) is not written into one.
    sandbox.write(
        "etc/passwd",
        &format!("{PASSWD}a,b:x:1001:1000::/home/ab:/bin/sh\n"),
    );
    sandbox.write("etc/shadow", &format!("{SHADOW}a,b:!:19700:0:99999:7:::\n"));
    let before = files(&sandbox);
    sandbox
        .ralsh(&["user", "a,b", "groups=staff"])
        .expect(2)
        .stderr_has("groups: the user name 'a,b' contains ','");
    assert_eq!(files(&sandbox), before);
}

#[test]
fn an_empty_password_needs_allow_empty_password_and_is_shown_empty() {
    let sandbox = values_sandbox();
    let before = files(&sandbox);
    for name in ["alice", "bob"] {
        sandbox
            .ralsh(&["user", name, "password="])
            .expect(2)
            .stderr_has(&format!(
                "password: an empty password lets anyone log in as '{name}' without one; give \
                 allow_empty_password=true with it"
            ))
            // alice's own password is '!': too short a secret to take out
            // of the message, which would lose its hint.
            .stderr_has("(a locked account has the password '!')");
        sandbox
            .ralsh(&["user", name, "password=", "allow_empty_password=false"])
            .expect(2)
            .stderr_has("give allow_empty_password=true");
    }
    assert_eq!(files(&sandbox), before);

    let run = sandbox.ralsh(&["user", "alice", "password=", "allow_empty_password=true"]);
    run.expect(0)
        .stdout_has("password: [redacted] -> '' (empty)")
        .stdout_has("password           => '' (empty),");
    assert!(sandbox.read("etc/shadow").contains("\nalice::"));
    let doc = sandbox.ralsh(&["-j", "user", "alice"]).expect(0).json();
    assert_eq!(doc["resource"]["password"], "");
    let doc = sandbox.ralsh(&["-j", "user"]).expect(0).json();
    assert_eq!(doc["resources"][1]["password"], "");
    assert_eq!(doc["resources"][0]["password"], "[redacted]");
    sandbox
        .ralsh(&["user", "alice", "password=!"])
        .expect(0)
        .stdout_has("password: '' (empty) -> [redacted]");
    sandbox
        .ralsh(&["user", "bob", "password=", "allow_empty_password=true"])
        .expect(0)
        .stdout_has("password: (none) -> '' (empty)");
    assert!(sandbox.read("etc/shadow").contains("\nbob::"));
    // A hash is still never shown.
    let doc = sandbox.ralsh(&["-j", "user", "alice"]).expect(0).json();
    assert_eq!(doc["resource"]["password"], "[redacted]");
}

#[test]
fn the_plan_says_an_account_will_have_no_password() {
    let sandbox = values_sandbox();
    let manifests = tempfile::tempdir().unwrap();
    let manifest = manifests.path().join("site.yaml");
    std::fs::write(
        &manifest,
        "user:\n  bob:\n    password: ''\n    allow_empty_password: true\n",
    )
    .unwrap();
    run(&mut sandbox.ral_command("plan", &[manifest.to_str().unwrap()]))
        .expect(0)
        .stdout_has("+ user[bob]")
        .stdout_has("    password: '' (empty)\n");
    // Applied, the store keeps the empty password as it is: it hides
    // nothing, and ral state shows it.
    run(&mut sandbox.ral_command("apply", &[manifest.to_str().unwrap()])).expect(0);
    run(&mut sandbox.ral_command("state", &["list"]))
        .expect(0)
        .stdout_has("password: \"\"");
    std::fs::write(&manifest, "user:\n  bob:\n    password: '$6$salt$hash'\n").unwrap();
    let plan = run(&mut sandbox.ral_command("plan", &[manifest.to_str().unwrap()]));
    plan.expect(0)
        .stdout_has("    password: '' (empty) -> [redacted]\n");
    assert!(!plan.stdout.contains("hash"), "{}", plan.stdout);
}

#[test]
fn a_uid_in_use_is_refused_at_creation() {
    let sandbox = values_sandbox();
    let before = files(&sandbox);
    sandbox
        .ralsh(&["user", "bob", "uid=1000"])
        .expect(2)
        .stderr_has("uid: 1000 is already used by user 'alice'");
    sandbox
        .ralsh(&["user", "bob", "uid=0"])
        .expect(2)
        .stderr_has("uid: 0 is already used by user 'root'");
    assert_eq!(files(&sandbox), before);
    sandbox
        .ralsh(&["user", "bob", "uid=1001"])
        .expect(0)
        .stdout_has("uid: (none) -> 1001");
}

#[test]
fn gshadow_keeps_members_and_administrators_apart() {
    let sandbox = values_sandbox();
    sandbox.write(
        "etc/passwd",
        &format!("{PASSWD}bob:x:1001:1001::/home/bob:/bin/sh\n"),
    );
    sandbox.write("etc/shadow", &format!("{SHADOW}bob:!:19700:0:99999:7:::\n"));
    sandbox.write("etc/group", &format!("{GROUP}bob:x:1001:\n"));
    sandbox.write("etc/gshadow", &format!("{GSHADOW}bob:!::\n"));
    let gshadow_line = |group: &str| -> String {
        sandbox
            .read("etc/gshadow")
            .lines()
            .find(|line| line.starts_with(&format!("{group}:")))
            .unwrap_or_default()
            .to_owned()
    };

    // The group provider: members in the fourth field, administrators
    // left as they are.
    sandbox
        .ralsh(&["group", "staff", "members=alice,bob"])
        .expect(0);
    assert_eq!(gshadow_line("staff"), "staff:!:alice:alice,bob");
    assert!(sandbox
        .read("etc/group")
        .contains("\nstaff:x:50:alice,bob\n"));
    sandbox.ralsh(&["group", "devs", "members=bob"]).expect(0);
    assert_eq!(gshadow_line("devs"), "devs:!::bob");
    sandbox
        .ralsh(&["group", "devs", "members=alice,bob"])
        .expect(0);
    assert_eq!(gshadow_line("devs"), "devs:!::alice,bob");
    // A group completed (its gshadow line missing).
    sandbox.write(
        "etc/group",
        &format!("{}ops:x:1300:bob\n", sandbox.read("etc/group")),
    );
    sandbox
        .ralsh(&["group", "ops", "ensure=present", "members=bob,alice"])
        .expect(0);
    assert_eq!(gshadow_line("ops"), "ops:!::bob,alice");

    // The user provider: the same, from the user's side.
    sandbox.ralsh(&["user", "bob", "groups=ops"]).expect(0);
    assert_eq!(gshadow_line("staff"), "staff:!:alice:alice");
    assert_eq!(gshadow_line("devs"), "devs:!::alice");
    assert_eq!(gshadow_line("ops"), "ops:!::bob,alice");
    // Leaving every group takes alice out of the member lists, but she
    // stays staff's administrator...
    sandbox.ralsh(&["user", "alice", "groups="]).expect(0);
    assert_eq!(gshadow_line("staff"), "staff:!:alice:");
    assert_eq!(gshadow_line("ops"), "ops:!::bob");
    // ...until the account goes.
    sandbox.ralsh(&["user", "alice", "ensure=absent"]).expect(0);
    assert_eq!(gshadow_line("staff"), "staff:!::");
}
