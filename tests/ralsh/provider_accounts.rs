//! What the user and group providers do beyond one clean edit: a half-made
//! account (left by a crash of another tool, or by hand) is reported as
//! incomplete and completed by ensure=present, and every edit takes
//! lckpwdf's lock, `etc/.pwd.lock`, waiting for another holder (useradd, a
//! second ralsh) within a bound.

use std::io::{BufRead, BufReader};
use std::process::{Child, ChildStdout, Command, Stdio};

use serde_json::json;

use crate::provider_user::files;
use crate::support::{
    accounts_sandbox, fixtures_dir, shadow_tools_accept, Sandbox, GROUP, PASSWD, SHADOW,
};

#[test]
fn a_half_made_account_is_incomplete_and_ensure_present_completes_it() {
    let sandbox = accounts_sandbox();
    // bob has neither a shadow line nor a group with his gid; carol only
    // lacks her shadow line.
    sandbox.write(
        "etc/passwd",
        &format!(
            "{PASSWD}bob:x:1001:1001::/home/bob:/bin/sh\ncarol:x:1002:50::/home/carol:/bin/sh\n"
        ),
    );
    // pwck and grpck (where they can run) refuse these files...
    assert_ne!(shadow_tools_accept(sandbox.root()), Some(true));
    // The awk listing and Python's find agree.
    let doc = sandbox.ralsh(&["-j", "user"]).expect(0).json();
    let ensures: Vec<_> = doc["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["name"].clone(), r["ensure"].clone()))
        .collect();
    assert_eq!(
        ensures,
        [
            (json!("root"), json!("present")),
            (json!("alice"), json!("present")),
            (json!("bob"), json!("incomplete")),
            (json!("carol"), json!("incomplete")),
        ]
    );
    let doc = sandbox.ralsh(&["-j", "user", "bob"]).expect(0).json();
    assert_eq!(doc["resource"]["ensure"], "incomplete");
    assert!(doc["resource"].get("password").is_none());

    sandbox
        .ralsh(&["user", "bob", "ensure=present"])
        .expect(0)
        .stdout_has("ensure: 'incomplete' -> 'present'");
    assert!(sandbox.read("etc/shadow").contains("\nbob:!:"));
    assert!(sandbox.read("etc/group").ends_with("bob:x:1001:\n"));
    assert!(sandbox.read("etc/gshadow").ends_with("bob:!::\n"));
    // The passwd line itself was kept as it was.
    assert!(sandbox
        .read("etc/passwd")
        .contains("bob:x:1001:1001::/home/bob:/bin/sh\n"));
    sandbox
        .ralsh(&["user", "bob", "ensure=present"])
        .expect(0)
        .stdout_has("no changes needed");

    // An incomplete account can be removed too.
    sandbox
        .ralsh(&["user", "carol", "ensure=absent"])
        .expect(0)
        .stdout_has("ensure: 'incomplete' -> 'absent'");
    assert!(!sandbox.read("etc/passwd").contains("carol"));
    // ...and accept them once completed.
    assert_ne!(shadow_tools_accept(sandbox.root()), Some(false));
}

#[test]
fn completing_refuses_to_guess_a_primary_group() {
    let sandbox = accounts_sandbox();
    // dave's gid 1003 has no group, and a group named dave has another gid.
    sandbox.write(
        "etc/passwd",
        &format!("{PASSWD}dave:x:1003:1003::/home/dave:/bin/sh\n"),
    );
    sandbox.write(
        "etc/shadow",
        &format!("{SHADOW}dave:!:19700:0:99999:7:::\n"),
    );
    sandbox.write("etc/group", &format!("{GROUP}dave:x:2000:\n"));
    let before = files(&sandbox);
    sandbox
        .ralsh(&["user", "dave", "ensure=present"])
        .expect(2)
        .stderr_has("the primary group 1003 of 'dave' does not exist, and the group 'dave'");
    assert_eq!(files(&sandbox), before);
}

#[test]
fn a_group_without_its_gshadow_line_is_incomplete_and_completed() {
    let sandbox = accounts_sandbox();
    sandbox.write("etc/group", &format!("{GROUP}devs:x:1200:alice\n"));
    let doc = sandbox.ralsh(&["-j", "group", "devs"]).expect(0).json();
    assert_eq!(doc["resource"]["ensure"], "incomplete");
    sandbox
        .ralsh(&["group", "devs", "ensure=present"])
        .expect(0)
        .stdout_has("ensure: 'incomplete' -> 'present'");
    assert!(sandbox.read("etc/gshadow").ends_with("devs:!::alice\n"));
    let doc = sandbox.ralsh(&["-j", "group", "devs"]).expect(0).json();
    assert_eq!(doc["resource"]["ensure"], "present");
}

/// A process holding lckpwdf's lock below the sandbox's root.
struct Holder {
    child: Child,
    out: BufReader<ChildStdout>,
}

impl Holder {
    fn start(sandbox: &Sandbox, mode: &str) -> Holder {
        let mut child = Command::new("python3")
            .args(["-I", "-S"])
            .arg(fixtures_dir().join("hold_lock.py"))
            .arg(sandbox.root().join("etc/.pwd.lock"))
            .args(["posix", mode])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let holder_line = line(&mut out);
        assert_eq!(holder_line, "locked\n");
        Holder { child, out }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}

fn line(out: &mut impl BufRead) -> String {
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    line
}

#[test]
fn the_user_provider_waits_for_a_held_pwd_lock() {
    let sandbox = accounts_sandbox();
    // The holder lets go as soon as the provider blocks on the lock.
    let mut holder = Holder::start(&sandbox, "until-waited-for");
    let run = sandbox.ralsh(&["-l", "info", "user", "bob", "ensure=present"]);
    run.expect(0)
        .stdout_has("ensure: 'absent' -> 'present'")
        .stderr_has("waiting up to 15s for the lock '")
        .stderr_has(&format!(
            "/etc/.pwd.lock', held by process {} (python3)",
            holder.pid()
        ))
        .stderr_has("bob: creating: created");
    assert_eq!(line(&mut holder.out), "released\n");
    assert!(sandbox.read("etc/passwd").contains("\nbob:x:1001:1001:"));
}

#[test]
fn a_lock_held_too_long_fails_the_change_and_changes_nothing() {
    let sandbox = accounts_sandbox();
    let holder = Holder::start(&sandbox, "forever");
    let before = files(&sandbox);
    let run = sandbox.ralsh(&["--lock-timeout", "0.5", "user", "bob", "ensure=present"]);
    run.expect(2).stderr_has(&format!(
        "timed out after 0.5s waiting for the lock '{}', held by process {} (python3); \
         nothing was changed",
        sandbox
            .root()
            .canonicalize()
            .unwrap()
            .join("etc/.pwd.lock")
            .display(),
        holder.pid()
    ));
    assert_eq!(files(&sandbox), before);
    // The group provider takes the same lock.
    sandbox
        .ralsh(&["--lock-timeout", "0.2", "group", "devs", "ensure=present"])
        .expect(2)
        .stderr_has("timed out after 0.2s waiting for the lock");
    assert_eq!(files(&sandbox), before);
    drop(holder);
    sandbox
        .ralsh(&["user", "bob", "ensure=present"])
        .expect(0)
        .stdout_has("ensure: 'absent' -> 'present'");
}

#[test]
fn group_names_follow_the_same_rule_as_user_names() {
    let sandbox = accounts_sandbox();
    for bad in ["x/y", "A=B", "\u{e9}quipe", "Staff", "9lives", "a b"] {
        sandbox
            .ralsh(&["group", bad, "ensure=present"])
            .expect(2)
            .stderr_has(&format!(
                "name: '{bad}' is not a valid group name (lowercase letters, digits, '_' and '-'"
            ));
        sandbox
            .ralsh(&["user", bad, "ensure=present"])
            .expect(2)
            .stderr_has(&format!(
                "name: '{bad}' is not a valid user name (lowercase"
            ));
    }
    assert_eq!(sandbox.read("etc/group"), GROUP, "nothing was created");
    sandbox
        .ralsh(&["group", "_build-bots$", "ensure=present"])
        .expect(0)
        .stdout_has("ensure: 'absent' -> 'present'");
    assert!(sandbox.read("etc/group").contains("\n_build-bots$:x:"));
}
