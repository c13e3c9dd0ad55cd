//! The native providers' changes killed after each of their renames, as
//! a SIGKILL would stop them (the toolkit's test instruments): what the
//! system's readers find in the files at that moment, what the next run
//! sees, and that it finishes the change.

use std::path::Path;

use serde_json::{json, Value as Json};

use super::passwd::EtcPasswd;
use crate::sdk::files::probe::{killed_after, Trace};
use crate::sdk::{Call, Provider, Resource, Update};

fn call(root: &Path) -> Call {
    Call {
        lock_timeout: std::time::Duration::from_secs(5),
        ..Call::new(
            root,
            false,
            crate::sdk::Log::new(Box::new(std::io::sink()), false),
        )
    }
}

fn update(name: &str, should: Json) -> Update {
    Update {
        name: name.to_owned(),
        is: Resource::new(),
        should: should.as_object().cloned().unwrap_or_default(),
    }
}

/// The records of an account file as the C library splits them.
fn records(root: &Path, name: &str) -> Option<Vec<Vec<String>>> {
    let data = std::fs::read_to_string(root.join("etc").join(name)).ok()?;
    Some(
        data.lines()
            .map(|line| line.split(':').map(str::to_owned).collect())
            .collect(),
    )
}

/// What a reader of the files as they are (glibc's getpwnam, getspnam,
/// getgrgid, getsgnam) would find broken: an account without its shadow
/// line or its primary group, a group without its gshadow line.
fn half_made(root: &Path) -> Vec<String> {
    let passwd = records(root, "passwd").unwrap_or_default();
    let shadow = records(root, "shadow");
    let group = records(root, "group").unwrap_or_default();
    let gshadow = records(root, "gshadow");
    let has = |table: &Option<Vec<Vec<String>>>, name: &str| {
        table
            .as_ref()
            .is_none_or(|records| records.iter().any(|r| r[0] == name))
    };
    let mut problems = Vec::new();
    for user in &passwd {
        if !has(&shadow, &user[0]) {
            problems.push(format!("{} has no shadow line", user[0]));
        }
        if !group.iter().any(|g| g[2] == user[3]) {
            problems.push(format!("{} has no group {}", user[0], user[3]));
        }
    }
    for g in &group {
        if !has(&gshadow, &g[0]) {
            problems.push(format!("group {} has no gshadow line", g[0]));
        }
    }
    problems
}

fn write_accounts(root: &Path) {
    let etc = root.join("etc");
    std::fs::create_dir(&etc).unwrap();
    for (name, data) in [
        ("passwd", "root:x:0:0:root:/root:/bin/bash\n"),
        ("shadow", "root:*:19700:0:99999:7:::\n"),
        ("group", "root:x:0:\nstaff:x:50:\n"),
        ("gshadow", "root:*::\nstaff:!::\n"),
    ] {
        std::fs::write(etc.join(name), data).unwrap();
    }
}

/// A new account, with a group of its own and a supplementary one, changes
/// all four files; killed after any rename, the files never hold an
/// account a reader finds half made (the order of the renames sees to
/// it: passwd last), and the next run sees the account whole, finishes
/// the change and has nothing left to do.
#[test]
fn an_account_killed_after_any_rename_is_never_half_made_and_is_finished() {
    let create = || update("bob", json!({"ensure": "present", "groups": ["staff"]}));
    for renames in 1.. {
        let dir = tempfile::tempdir().unwrap();
        write_accounts(dir.path());
        let trace = Trace::below(dir.path());
        let call = call(dir.path());
        let ran = killed_after(renames, || EtcPasswd.set(&call, &[create()]));
        if let Some(outcomes) = ran {
            assert!(outcomes.unwrap()[0].is_ok());
            assert!(renames > 5, "killed after the journal and each of 4 files");
            break;
        }
        assert_eq!(
            half_made(dir.path()),
            Vec::<String>::new(),
            "after {renames}"
        );
        let seen = EtcPasswd.get(&call, &["bob".to_owned()]).unwrap();
        assert_eq!(seen[0]["ensure"], "present", "{seen:?}");
        assert_eq!(seen[0]["groups"], json!(["staff"]));
        let outcomes = EtcPasswd.set(&call, &[create()]).unwrap();
        assert_eq!(outcomes[0], Ok(Vec::new()), "nothing left to do");
        let passwd = std::fs::read_to_string(dir.path().join("etc/passwd")).unwrap();
        assert!(passwd.contains("\nbob:x:"), "{passwd}");
        assert_eq!(half_made(dir.path()), Vec::<String>::new());
        assert_eq!(trace.problems(), Vec::<String>::new());
    }
}
