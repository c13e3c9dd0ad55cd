//! The bundled `user::etc_passwd` provider end to end through ralsh on a fake
//! root: accounts in etc/passwd and etc/shadow, with supplementary groups in
//! etc/group and etc/gshadow, edited in place and never through useradd(8).

use std::os::unix::fs::PermissionsExt;

use serde_json::json;

use crate::support::Sandbox;

const PASSWD: &str = "root:x:0:0:root:/root:/bin/bash\ndaemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n# a comment stays\nalice:x:1000:1000:Alice,,,:/home/alice:/bin/bash\n";
const HASH: &str = "$6$c2FsdHNhbHQ$NotARealHashJustATestValue0123456789abcdefABCDEF/.";
const GROUP: &str = "root:x:0:\ndaemon:x:1:\nstaff:x:50:alice\nalice:x:1000:\n";
const GSHADOW: &str = "root:*::\ndaemon:*::\nstaff:!::alice\nalice:!::\n";

fn shadow() -> String {
    format!(
        "root:*:19700:0:99999:7:::\ndaemon:*:19700:0:99999:7:::\nalice:{HASH}:19700:0:99999:7:::\n"
    )
}

fn user_sandbox() -> Sandbox {
    let sandbox = Sandbox::new();
    sandbox.write("etc/passwd", PASSWD);
    sandbox.write("etc/shadow", &shadow());
    sandbox.write("etc/group", GROUP);
    sandbox.write("etc/gshadow", GSHADOW);
    sandbox
}

/// Every file the provider may touch, to compare before and after.
fn files(sandbox: &Sandbox) -> Vec<String> {
    ["etc/passwd", "etc/shadow", "etc/group", "etc/gshadow"]
        .iter()
        .map(|f| sandbox.read(f))
        .collect()
}

#[test]
fn user_lists_and_finds_accounts_with_the_password_redacted() {
    let sandbox = user_sandbox();
    let run = sandbox.ralsh(&["-j", "user"]);
    let doc = run.expect(0).json();
    assert!(!run.stdout.contains(HASH) && !run.stderr.contains(HASH));
    let ral = json!({"type": "user", "provider": "user::etc_passwd"});
    assert_eq!(
        doc["resources"][0],
        json!({"name": "root", "ensure": "present", "uid": 0, "gid": 0, "comment": "root",
            "home": "/root", "shell": "/bin/bash", "groups": [], "password": "[redacted]",
            "ral": ral})
    );
    assert_eq!(doc["resources"].as_array().unwrap().len(), 3);
    let run = sandbox.ralsh(&["-j", "user", "alice"]);
    let doc = run.expect(0).json();
    assert!(!run.stdout.contains(HASH) && !run.stderr.contains(HASH));
    assert_eq!(
        doc["resource"],
        json!({"name": "alice", "ensure": "present", "uid": 1000, "gid": 1000,
            "comment": "Alice,,,", "home": "/home/alice", "shell": "/bin/bash",
            "groups": ["staff"], "password": "[redacted]", "ral": ral})
    );
    let run = sandbox.ralsh(&["user", "alice"]);
    run.expect(0).stdout_has("password => [redacted]");
    assert!(!run.stdout.contains(HASH) && !run.stderr.contains(HASH));
}

#[test]
fn user_is_created_with_defaults_changed_and_refuses_a_new_uid() {
    let sandbox = user_sandbox();
    sandbox
        .ralsh(&["user", "bob", "managehome=true"])
        .expect(0)
        .stdout_has("ensure: 'absent' -> 'present'");
    assert_eq!(
        sandbox.read("etc/passwd"),
        format!("{PASSWD}bob:x:1001:1001::/home/bob:/bin/sh\n")
    );
    assert_eq!(sandbox.read("etc/group"), format!("{GROUP}bob:x:1001:\n"));
    assert_eq!(sandbox.read("etc/gshadow"), format!("{GSHADOW}bob:!::\n"));
    let shadow_now = sandbox.read("etc/shadow");
    let added = shadow_now.strip_prefix(shadow().as_str()).unwrap();
    assert!(
        added.starts_with("bob:!:") && added.ends_with(":0:99999:7:::\n"),
        "{added}"
    );
    let home = std::fs::metadata(sandbox.root().join("home/bob")).unwrap();
    assert!(home.is_dir());
    assert_eq!(home.permissions().mode() & 0o7777, 0o755);

    let run = sandbox.ralsh(&["user", "bob", "shell=/bin/bash", "groups=staff"]);
    run.expect(0)
        .stdout_has("shell: '/bin/sh' -> '/bin/bash'")
        .stdout_has("groups: [] -> ['staff']");
    assert!(sandbox
        .read("etc/passwd")
        .ends_with("bob:x:1001:1001::/home/bob:/bin/bash\n"));
    assert!(sandbox.read("etc/group").contains("staff:x:50:alice,bob\n"));
    assert!(sandbox.read("etc/gshadow").contains("staff:!::alice,bob\n"));

    let before = files(&sandbox);
    sandbox
        .ralsh(&["user", "bob", "shell=/bin/bash", "groups=staff"])
        .expect(0)
        .stdout_has("no changes needed");
    let run = sandbox.ralsh(&["user", "bob", "uid=5"]);
    run.expect(2)
        .stderr_has("attribute 'uid' can only be set when 'bob' is created");
    assert_eq!(files(&sandbox), before);
}

#[test]
fn user_delete_removes_the_account_and_its_memberships() {
    let sandbox = user_sandbox();
    sandbox
        .ralsh(&["user", "alice", "ensure=absent"])
        .expect(0)
        .stdout_has("ensure: 'present' -> 'absent'");
    assert_eq!(
        sandbox.read("etc/passwd"),
        PASSWD.replace("alice:x:1000:1000:Alice,,,:/home/alice:/bin/bash\n", "")
    );
    assert_eq!(
        sandbox.read("etc/shadow"),
        "root:*:19700:0:99999:7:::\ndaemon:*:19700:0:99999:7:::\n"
    );
    assert_eq!(sandbox.read("etc/group"), GROUP.replace("50:alice", "50:"));
    assert_eq!(
        sandbox.read("etc/gshadow"),
        GSHADOW.replace("!::alice", "!::")
    );
    sandbox
        .ralsh(&["user", "alice", "ensure=absent"])
        .expect(0)
        .stdout_has("no changes needed");
}

#[test]
fn user_noop_and_bad_values_leave_every_file_alone() {
    let sandbox = user_sandbox();
    let before = files(&sandbox);
    sandbox
        .ralsh(&["-n", "user", "bob", "managehome=true", "groups=staff"])
        .expect(0)
        .stdout_has("ensure: 'absent' -> 'present'");
    sandbox
        .ralsh(&["-n", "user", "alice", "ensure=absent"])
        .expect(0)
        .stdout_has("ensure: 'present' -> 'absent'");
    assert_eq!(files(&sandbox), before);
    assert!(!sandbox.root().join("home").exists());

    let run = sandbox.ralsh(&["user", "alice", "groups=staff,nope"]);
    run.expect(2).stderr_has("groups: unknown group 'nope'");
    let run = sandbox.ralsh(&["user", "alice", "shell=bash"]);
    run.expect(2)
        .stderr_has("shell: 'bash' is not an absolute path");
    let run = sandbox.ralsh(&["user", "Bad:Name", "ensure=present"]);
    run.stderr_has("name: 'Bad:Name' is not a valid user name");
    run.expect(2);
    assert_eq!(files(&sandbox), before);
}

#[test]
fn user_that_could_never_exist_is_unknown_not_absent() {
    let sandbox = user_sandbox();
    // A valid name that is missing could be created: absent.
    let doc = sandbox.ralsh(&["-j", "user", "bob"]).expect(0).json();
    assert_eq!(doc["resource"]["ensure"], "absent");
    // An invalid name could not: not found, with the reason at info level.
    let run = sandbox.ralsh(&["--log-level", "info", "user", "Bad:Name"]);
    run.expect(1)
        .stderr_has("'Bad:Name' is not a valid user name; no such user can be created")
        .stderr_has("no resource named 'Bad:Name'");
}
