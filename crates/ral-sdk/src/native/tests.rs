//! The native providers' files as they may be found and left: a change
//! killed after each of its renames, as a SIGKILL would stop it (the
//! toolkit's test instruments), with what the system's readers find in
//! the files at that moment and what the next run sees; and /etc/hosts
//! and /etc/fstab as symbolic links, hard links, FIFOs, devices and
//! directories, with modes, owners and access control lists to keep.

use std::path::Path;

use serde_json::{json, Value as Json};

use super::fstab::Fstab;
use super::hosts::EtcHosts;
use super::passwd::EtcPasswd;
use crate::files::probe::{killed_after, Trace};
use crate::{Call, Outcome, Provider, Resource, Update};

pub(super) fn call(root: &Path) -> Call {
    Call {
        lock_timeout: std::time::Duration::from_secs(5),
        ..Call::new(
            root,
            false,
            crate::Log::new(Box::new(std::io::sink()), false),
        )
    }
}

pub(super) fn update(name: &str, should: Json) -> Update {
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

pub(super) fn write_accounts(root: &Path) {
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

/// The host and mount providers, each with its file and an update that
/// changes it, and a line of that file.
fn tables() -> [(&'static dyn Provider, &'static str, Update, &'static str); 2] {
    [
        (
            &EtcHosts,
            "hosts",
            update("db", json!({"ip": "10.0.0.9"})),
            "10.0.0.1 db\n",
        ),
        (
            &Fstab,
            "fstab",
            update("/srv", json!({"device": "/dev/b", "fstype": "ext4"})),
            "/dev/a /srv ext4 defaults 0 0\n",
        ),
    ]
}

/// A call on `root` whose log is kept, and what it says.
pub(super) fn logged_call(root: &Path) -> (Call, crate::Buffer) {
    let said = crate::Buffer::default();
    let mut call = call(root);
    call.log = crate::Log::new(Box::new(said.clone()), false);
    (call, said)
}

/// The outcome of a set of one update (a failed call as its error).
pub(super) fn outcome(provider: &dyn Provider, call: &Call, update: &Update) -> Outcome {
    provider.set(call, std::slice::from_ref(update))?.remove(0)
}

/// A set of one update, its failure as a message, whichever the
/// convention (simple: the call fails; json: the update does).
fn set(provider: &dyn Provider, call: &Call, update: &Update) -> Result<(), String> {
    outcome(provider, call, update)
        .map(drop)
        .map_err(|err| err.message)
}

#[test]
fn a_table_that_is_a_symbolic_link_is_changed_where_it_leads_and_stays_a_link() {
    for (provider, file, update, line) in tables() {
        let dir = tempfile::tempdir().unwrap();
        let etc = dir.path().join("etc");
        std::fs::create_dir_all(etc.join("real")).unwrap();
        std::fs::write(etc.join("real").join(file), line).unwrap();
        // Absolute: resolved inside the root.
        std::os::unix::fs::symlink(format!("/etc/real/{file}"), etc.join(file)).unwrap();
        let call = call(dir.path());
        set(provider, &call, &update).unwrap();
        assert!(etc.join(file).is_symlink(), "{file} is still a link");
        let changed = std::fs::read_to_string(etc.join("real").join(file)).unwrap();
        assert_ne!(changed, line, "{file}: its target was changed");
        let mut names: Vec<String> = std::fs::read_dir(etc.join("real"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(
            names,
            [format!(".{file}.ral-lock"), file.to_owned()],
            "locked there"
        );
        // A link out of the root leads below it, where nothing is.
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join(file), line).unwrap();
        std::fs::remove_file(etc.join(file)).unwrap();
        let out = outside.path().join(file);
        std::os::unix::fs::symlink(&out, etc.join(file)).unwrap();
        let err = set(provider, &call, &update).unwrap_err();
        assert!(err.contains("does not exist"), "{file}: {err}");
        assert_eq!(
            std::fs::read_to_string(&out).unwrap(),
            line,
            "outside, untouched"
        );
    }
}

#[test]
fn a_hard_linked_table_is_replaced_and_a_warning_says_the_other_name_keeps_the_old() {
    for (provider, file, update, line) in tables() {
        let dir = tempfile::tempdir().unwrap();
        let etc = dir.path().join("etc");
        std::fs::create_dir(&etc).unwrap();
        std::fs::write(etc.join(file), line).unwrap();
        std::fs::hard_link(etc.join(file), dir.path().join("other")).unwrap();
        let (call, said) = logged_call(dir.path());
        set(provider, &call, &update).unwrap();
        assert_ne!(std::fs::read_to_string(etc.join(file)).unwrap(), line);
        assert_eq!(
            std::fs::read_to_string(dir.path().join("other")).unwrap(),
            line
        );
        let warning = format!(
            "warn: '{}' has 2 names (hard links): the new file replaces this one only, and \
             the others keep the old content\n",
            etc.join(file).display()
        );
        assert!(said.text().contains(&warning), "{}", said.text());
    }
}

/// Makes a special file in `etc`.
type Make<'a> = dyn Fn(&Path) + 'a;

/// A FIFO, a directory, a link to a FIFO, and (as root) a character
/// device where the file or its lock file should be: a get and a set
/// fail at once, naming it, and change nothing. None is opened in a way
/// that waits (a FIFO without a writer would wait forever).
#[test]
fn a_special_file_in_place_of_a_table_or_its_lock_fails_at_once() {
    let mkfifo = |path: &Path| {
        let path = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a NUL-terminated path, for the call.
        assert_eq!(unsafe { libc::mkfifo(path.as_ptr(), 0o644) }, 0);
    };
    let mknod = |path: &Path| {
        let path = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a NUL-terminated path, for the call; /dev/null's numbers.
        unsafe { libc::mknod(path.as_ptr(), libc::S_IFCHR | 0o644, libc::makedev(1, 3)) == 0 }
    };
    for (provider, file, update, _) in tables() {
        let cases: [(&str, &Make<'_>); 5] = [
            ("a FIFO", &|etc| mkfifo(&etc.join(file))),
            ("a directory", &|etc| {
                std::fs::create_dir(etc.join(file)).unwrap()
            }),
            ("a link to a FIFO", &|etc| {
                mkfifo(&etc.join("fifo"));
                std::os::unix::fs::symlink("fifo", etc.join(file)).unwrap();
            }),
            ("a FIFO as the lock", &|etc| {
                mkfifo(&etc.join(format!(".{file}.ral-lock")))
            }),
            ("a device", &|etc| {
                if !mknod(&etc.join(file)) {
                    // Not root here: a FIFO once more.
                    mkfifo(&etc.join(file));
                }
            }),
        ];
        for (what, make) in cases {
            let dir = tempfile::tempdir().unwrap();
            let etc = dir.path().join("etc");
            std::fs::create_dir(&etc).unwrap();
            make(&etc);
            let call = call(dir.path());
            let err = set(provider, &call, &update).unwrap_err();
            assert!(err.contains("/etc/"), "{file} as {what}: {err}");
            if what != "a FIFO as the lock" {
                assert!(provider.get(&call, &[]).is_err(), "{file} as {what}");
            }
        }
    }
}

/// What a replace keeps of the file it replaces: the mode with its
/// setuid, setgid and sticky bits (which chown clears, so it comes
/// first), the owner (as root), the access control list.
#[test]
fn a_replaced_table_keeps_its_mode_owner_and_access_control_list() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    // An ACL granting user 65534 read (version 2; user::rw-, user:65534:r--,
    // group::r--, mask::r--, other::r--).
    let entry = |tag: u16, perm: u16, id: u32| {
        [
            tag.to_le_bytes().as_slice(),
            &perm.to_le_bytes(),
            &id.to_le_bytes(),
        ]
        .concat()
    };
    let acl = [
        2u32.to_le_bytes().to_vec(),
        entry(0x01, 6, u32::MAX),
        entry(0x02, 4, 65534),
        entry(0x04, 4, u32::MAX),
        entry(0x10, 4, u32::MAX),
        entry(0x20, 4, u32::MAX),
    ]
    .concat();
    let root = crate::files::sys::is_root();
    for (provider, file, update, line) in tables() {
        let dir = tempfile::tempdir().unwrap();
        let etc = dir.path().join("etc");
        std::fs::create_dir(&etc).unwrap();
        let path = etc.join(file);
        std::fs::write(&path, line).unwrap();
        let opened = std::fs::File::open(&path).unwrap();
        let acl_set = crate::files::sys::set_xattr(
            std::os::fd::AsFd::as_fd(&opened),
            c"system.posix_acl_access",
            &acl,
        );
        if root {
            std::os::unix::fs::chown(&path, Some(65534), Some(65534)).unwrap();
        }
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o6644)).unwrap();
        let before = std::fs::metadata(&path).unwrap();
        set(provider, &call(dir.path()), &update).unwrap();
        let after = std::fs::metadata(&path).unwrap();
        assert_ne!(before.ino(), after.ino(), "{file} was replaced");
        assert_eq!(after.permissions().mode() & 0o7777, 0o6644, "{file}");
        assert_eq!(
            (after.uid(), after.gid()),
            (before.uid(), before.gid()),
            "{file}"
        );
        if acl_set.is_ok() {
            let opened = std::fs::File::open(&path).unwrap();
            let kept = crate::files::sys::xattr(
                std::os::fd::AsFd::as_fd(&opened),
                c"system.posix_acl_access",
            );
            assert_eq!(kept, Some(acl.clone()), "{file}: its access control list");
        }
    }
}

/// An immutable or append-only table (chattr +i, +a; root's to set) is
/// refused whole: nothing replaced, no temporary file left.
#[test]
fn an_immutable_or_append_only_table_is_left_as_it_is() {
    for (provider, file, update, line) in tables() {
        for flag in ["+i", "+a"] {
            let dir = tempfile::tempdir().unwrap();
            let etc = dir.path().join("etc");
            std::fs::create_dir(&etc).unwrap();
            std::fs::write(etc.join(file), line).unwrap();
            let chattr = |flag: &str| {
                std::process::Command::new("chattr")
                    .arg(flag)
                    .arg(etc.join(file))
                    .stderr(std::process::Stdio::null())
                    .status()
                    .is_ok_and(|status| status.success())
            };
            if !chattr(flag) {
                eprintln!("skipped: chattr {flag} needs root and a file system that has it");
                return;
            }
            let err = set(provider, &call(dir.path()), &update);
            chattr(&flag.replace('+', "-"));
            let err = err.unwrap_err();
            assert!(
                err.contains("Operation not permitted"),
                "{file} {flag}: {err}"
            );
            assert_eq!(std::fs::read_to_string(etc.join(file)).unwrap(), line);
            let names: Vec<String> = std::fs::read_dir(&etc)
                .unwrap()
                .map(|e| e.unwrap().file_name().into_string().unwrap())
                .filter(|name| name.contains(".ral-tmp-"))
                .collect();
            assert!(names.is_empty(), "{names:?}");
        }
    }
}

/// A shadow file made new holds password hashes: it is readable by no one
/// else (0640, as shadow-utils makes it), while passwd keeps its mode.
#[test]
fn a_new_shadow_file_is_not_readable_by_others() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    write_accounts(dir.path());
    let etc = dir.path().join("etc");
    std::fs::remove_file(etc.join("shadow")).unwrap();
    std::fs::set_permissions(etc.join("passwd"), std::fs::Permissions::from_mode(0o664)).unwrap();
    let outcomes = EtcPasswd
        .set(
            &call(dir.path()),
            &[update("bob", json!({"ensure": "present"}))],
        )
        .unwrap();
    assert!(outcomes[0].is_ok(), "{outcomes:?}");
    let mode = |name: &str| {
        std::fs::metadata(etc.join(name))
            .unwrap()
            .permissions()
            .mode()
            & 0o7777
    };
    assert_eq!(records(dir.path(), "shadow").unwrap()[0][0], "bob");
    assert_eq!(mode("shadow"), 0o640);
    assert_eq!(mode("passwd"), 0o664);
}

/// An update that fails among others undoes its own edits only: the
/// changes of the updates before and after it are saved.
#[test]
fn a_failed_update_undoes_only_its_own_edits() {
    let dir = tempfile::tempdir().unwrap();
    write_accounts(dir.path());
    let create =
        |name: &str, groups: Json| update(name, json!({"ensure": "present", "groups": groups}));
    let outcomes = EtcPasswd
        .set(
            &call(dir.path()),
            &[
                create("bob", json!(["staff"])),
                create("carol", json!(["nosuchgroup"])),
                create("dave", json!(["staff"])),
            ],
        )
        .unwrap();
    assert!(outcomes[0].is_ok() && outcomes[2].is_ok(), "{outcomes:?}");
    assert!(outcomes[1].is_err(), "{outcomes:?}");
    for table in ["passwd", "shadow", "group", "gshadow"] {
        let names: Vec<String> = records(dir.path(), table)
            .unwrap()
            .into_iter()
            .map(|record| record[0].clone())
            .collect();
        assert!(!names.contains(&"carol".to_owned()), "{table}: {names:?}");
        assert!(names.contains(&"bob".to_owned()), "{table}: {names:?}");
        assert!(names.contains(&"dave".to_owned()), "{table}: {names:?}");
    }
}

/// shadow is not readable for everyone: a get does without it (here a
/// directory in its place stands for a file the reader may not open),
/// while a change needs it and fails naming it.
#[test]
fn a_get_does_without_a_shadow_file_it_cannot_read_and_a_change_fails() {
    let dir = tempfile::tempdir().unwrap();
    write_accounts(dir.path());
    let shadow = dir.path().join("etc/shadow");
    std::fs::remove_file(&shadow).unwrap();
    std::fs::create_dir(&shadow).unwrap();
    let call = call(dir.path());
    let found = EtcPasswd.get(&call, &["root".to_owned()]).unwrap();
    assert_eq!(found[0]["ensure"], "present", "{found:?}");
    let err = set(
        &EtcPasswd,
        &call,
        &update("root", json!({"shell": "/bin/sh"})),
    )
    .unwrap_err();
    assert_eq!(
        err,
        format!("cannot read '{}': Is a directory", shadow.display())
    );
}

/// A new user's own group takes the uid as its gid when no group has it,
/// else the first free gid; as useradd does, a system without gshadow is
/// not given one.
#[test]
fn a_new_users_group_gets_the_uid_as_gid_when_free_and_no_gshadow_is_made() {
    let dir = tempfile::tempdir().unwrap();
    write_accounts(dir.path());
    let etc = dir.path().join("etc");
    std::fs::remove_file(etc.join("gshadow")).unwrap();
    std::fs::write(etc.join("group"), "root:x:0:\nstaff:x:50:\nweb:x:1006:\n").unwrap();
    let call = call(dir.path());
    let create = |name: &str, uid: u64| {
        set(
            &EtcPasswd,
            &call,
            &update(name, json!({"ensure": "present", "uid": uid})),
        )
    };
    create("bob", 1005).unwrap();
    create("carol", 1006).unwrap();
    let group = std::fs::read_to_string(etc.join("group")).unwrap();
    assert!(group.ends_with("\nbob:x:1005:\ncarol:x:1000:\n"), "{group}");
    assert!(!etc.join("gshadow").exists());
}

/// A new user's shadow line says the password was last changed today
/// (days since 1970, as useradd writes it).
#[test]
fn a_new_users_password_was_last_changed_today() {
    let dir = tempfile::tempdir().unwrap();
    write_accounts(dir.path());
    let today = || {
        let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
        since.unwrap().as_secs() / 86400
    };
    let before = today();
    let call = call(dir.path());
    set(
        &EtcPasswd,
        &call,
        &update("bob", json!({"ensure": "present"})),
    )
    .unwrap();
    let after = today();
    let shadow = records(dir.path(), "shadow").unwrap();
    let bob = shadow.iter().find(|fields| fields[0] == "bob").unwrap();
    let changed: u64 = bob[2].parse().unwrap();
    assert!((before..=after).contains(&changed), "{bob:?}");
}

/// A removed user leaves every group's members and administrators,
/// the others staying as they were.
#[test]
fn a_removed_user_leaves_the_members_and_administrators_of_groups() {
    let dir = tempfile::tempdir().unwrap();
    write_accounts(dir.path());
    let etc = dir.path().join("etc");
    let passwd = "root:x:0:0:root:/root:/bin/bash\nbob:x:1000:1000::/home/bob:/bin/sh\n";
    std::fs::write(etc.join("passwd"), passwd).unwrap();
    std::fs::write(
        etc.join("shadow"),
        "root:*:19700:0:99999:7:::\nbob:!:19700:0:99999:7:::\n",
    )
    .unwrap();
    let groups = "root:x:0:\nstaff:x:50:bob,carol\nbob:x:1000:\nweb:x:60:carol\nops:x:70:\n";
    std::fs::write(etc.join("group"), groups).unwrap();
    // ops's odd administrators field names no bob: left byte for byte.
    let gshadow =
        "root:*::\nstaff:!:carol,bob:bob,carol\nbob:!::\nweb:!:carol:carol\nops:!:carol,,dave:\n";
    std::fs::write(etc.join("gshadow"), gshadow).unwrap();
    let call = call(dir.path());
    set(
        &EtcPasswd,
        &call,
        &update("bob", json!({"ensure": "absent"})),
    )
    .unwrap();
    assert_eq!(
        std::fs::read_to_string(etc.join("group")).unwrap(),
        "root:x:0:\nstaff:x:50:carol\nbob:x:1000:\nweb:x:60:carol\nops:x:70:\n"
    );
    assert_eq!(
        std::fs::read_to_string(etc.join("gshadow")).unwrap(),
        "root:*::\nstaff:!:carol:carol\nbob:!::\nweb:!:carol:carol\nops:!:carol,,dave:\n"
    );
}

/// A uid is given when the user is made; asking another of an existing
/// user is refused, asking the one it has is no change.
#[test]
fn an_existing_users_uid_is_never_changed() {
    let dir = tempfile::tempdir().unwrap();
    write_accounts(dir.path());
    let call = call(dir.path());
    let bob = |uid: u64| update("bob", json!({"ensure": "present", "uid": uid}));
    set(&EtcPasswd, &call, &bob(1000)).unwrap();
    assert_eq!(
        set(&EtcPasswd, &call, &bob(1001)).unwrap_err(),
        "uid: 1001 can only be set when the user is created; it is 1000 now"
    );
    assert_eq!(outcome(&EtcPasswd, &call, &bob(1000)).unwrap(), Vec::new());
}

/// A change that would make an account too long for the host to read
/// back is refused, and nothing is written.
#[test]
fn a_change_too_long_to_read_back_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    write_accounts(dir.path());
    let passwd = std::fs::read(dir.path().join("etc/passwd")).unwrap();
    let call = call(dir.path());
    let comment = "a".repeat(crate::serve::RESOURCE_MAX);
    let err = set(
        &EtcPasswd,
        &call,
        &update("root", json!({"comment": comment})),
    )
    .unwrap_err();
    assert!(err.ends_with("; nothing was changed"), "{err:.200}");
    assert_eq!(
        std::fs::read(dir.path().join("etc/passwd")).unwrap(),
        passwd
    );
}
