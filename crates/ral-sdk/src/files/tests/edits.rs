//! Edits: files replaced whole, keeping mode and owner, temporary files
//! cleaned up, nothing written under noop or past a writer that does not
//! lock.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::Sandbox;
use crate::files::{Attrs, Edit, Lock, Owner};

fn meta(sandbox: &Sandbox, rel: &str) -> std::fs::Metadata {
    std::fs::metadata(sandbox.path(rel)).unwrap()
}

#[test]
fn a_file_is_replaced_keeping_its_mode_and_nothing_is_left() {
    let sandbox = Sandbox::new();
    sandbox.write_mode("etc/hosts", b"old\n", 0o640);
    let before = meta(&sandbox, "etc/hosts");
    let target = sandbox.open().file("etc/hosts", true, None).unwrap();
    let mut edit = Edit::begin(Lock::beside(&target), &sandbox.call).unwrap();
    assert!(!edit.noop());
    assert_eq!(edit.read(&target).unwrap().unwrap(), b"old\n");
    edit.write(&target, b"new\n".to_vec(), Attrs::default())
        .unwrap();
    edit.commit().unwrap();
    drop(edit);
    let after = meta(&sandbox, "etc/hosts");
    assert_eq!(sandbox.read("etc/hosts"), b"new\n");
    assert_ne!(before.ino(), after.ino());
    assert_eq!(after.permissions().mode() & 0o7777, 0o640);
    assert_eq!(sandbox.names("etc"), [".hosts.ral-lock", "hosts"]);
}

#[test]
fn a_file_is_replaced_keeping_its_owner_and_a_new_one_gets_the_owner_asked() {
    if !crate::files::sys::is_root() {
        eprintln!("skipped: giving a file to another owner needs root");
        return;
    }
    let sandbox = Sandbox::new();
    sandbox.write_mode("etc/shadow", b"old\n", 0o640);
    std::os::unix::fs::chown(sandbox.path("etc/shadow"), Some(65534), Some(65534)).unwrap();
    let root = sandbox.open();
    let shadow = root.file("etc/shadow", true, None).unwrap();
    let fresh = root.file("etc/fresh", true, None).unwrap();
    let mut edit = Edit::begin(Lock::beside(&shadow), &sandbox.call).unwrap();
    edit.write(&shadow, b"new\n".to_vec(), Attrs::default())
        .unwrap();
    edit.commit().unwrap();
    let mut attrs = Attrs::new_mode(0o600);
    attrs.new_owner = Some(Owner::new(65533, 65532));
    edit.write(&fresh, b"x\n".to_vec(), attrs).unwrap();
    edit.commit().unwrap();
    drop(edit);
    let after = meta(&sandbox, "etc/shadow");
    assert_eq!(sandbox.read("etc/shadow"), b"new\n");
    // The new file is made by root; the old one's owner is given to it.
    assert_eq!((after.uid(), after.gid()), (65534, 65534));
    assert_eq!(after.permissions().mode() & 0o7777, 0o640);
    let fresh = meta(&sandbox, "etc/fresh");
    assert_eq!((fresh.uid(), fresh.gid()), (65533, 65532));
    assert_eq!(fresh.permissions().mode() & 0o7777, 0o600);
}

#[test]
fn a_new_file_gets_the_mode_asked_for_and_a_mode_given_applies_either_way() {
    let sandbox = Sandbox::new();
    sandbox.mkdir("etc");
    sandbox.write_mode("etc/old", b"o\n", 0o644);
    let root = sandbox.open();
    let fstab = root.file("etc/fstab", true, None).unwrap();
    let old = root.file("etc/old", true, None).unwrap();
    let mut edit = Edit::begin(Lock::beside(&fstab), &sandbox.call).unwrap();
    assert_eq!(edit.read(&fstab).unwrap(), None);
    assert!(edit.read_stat(&fstab).is_none());
    edit.write(&fstab, b"x\n".to_vec(), Attrs::new_mode(0o600))
        .unwrap();
    edit.write(&old, b"y\n".to_vec(), Attrs::mode(0o400))
        .unwrap();
    edit.commit().unwrap();
    drop(edit);
    assert_eq!(
        meta(&sandbox, "etc/fstab").permissions().mode() & 0o7777,
        0o600
    );
    assert_eq!(
        meta(&sandbox, "etc/old").permissions().mode() & 0o7777,
        0o400
    );
}

#[test]
fn temporary_files_a_crash_left_go_with_the_next_edit() {
    let sandbox = Sandbox::new();
    sandbox.write("etc/hosts", b"old\n");
    for stale in [
        ".hosts.ral-tmp-0123456789ab",
        ".hosts.abc123.tmp",
        ".ralsh-abc.hosts",
        ".hosts.ralsh-x",
    ] {
        sandbox.write(&format!("etc/{stale}"), b"half");
    }
    sandbox.write("etc/.other.ral-tmp-1", b"not ours to judge");
    let target = sandbox.open().file("etc/hosts", true, None).unwrap();
    let mut edit = Edit::begin(Lock::beside(&target), &sandbox.call).unwrap();
    edit.read(&target).unwrap();
    drop(edit);
    assert_eq!(
        sandbox.names("etc"),
        [".hosts.ral-lock", ".other.ral-tmp-1", "hosts"]
    );
    assert!(sandbox
        .log()
        .contains("left by an edit that was interrupted"));
}

#[test]
fn an_edit_removes_only_its_own_files_temporary_files() {
    // Names like another file's temporary files, or a user's file that
    // only ends like the edited one: none is this edit's to remove.
    let sandbox = Sandbox::new();
    sandbox.write("etc/passwd", b"old\n");
    let others = [
        ".hosts.abc123.tmp",
        ".ralsh-abc.group",
        "backup.passwd",
        ".group.ral-tmp-0123456789ab",
    ];
    for other in others {
        sandbox.write(&format!("etc/{other}"), b"not ours");
    }
    sandbox.write("etc/.passwd.ral-tmp-0123456789ab", b"half");
    let target = sandbox.open().file("etc/passwd", true, None).unwrap();
    let mut edit = Edit::begin(Lock::beside(&target), &sandbox.call).unwrap();
    edit.read(&target).unwrap();
    drop(edit);
    let names = sandbox.names("etc");
    for other in others {
        assert!(
            names.contains(&other.to_owned()),
            "{other} removed: {names:?}"
        );
    }
    assert!(!names.contains(&".passwd.ral-tmp-0123456789ab".to_owned()));
}

#[test]
fn a_noop_edit_reads_like_one_and_creates_nothing() {
    let sandbox = Sandbox::with(true, Duration::from_secs(15));
    sandbox.write("etc/hosts", b"old\n");
    sandbox.write("etc/.hosts.ral-tmp-0123456789ab", b"half");
    let root = sandbox.open();
    let hosts = root.file("etc/hosts", true, None).unwrap();
    let other = root.file("etc/other", true, None).unwrap();
    let mut edit = Edit::begin(Lock::beside(&hosts), &sandbox.call).unwrap();
    assert!(edit.noop());
    assert_eq!(edit.read(&hosts).unwrap().unwrap(), b"old\n");
    edit.write(&hosts, b"new\n".to_vec(), Attrs::default())
        .unwrap();
    edit.write(&other, b"new\n".to_vec(), Attrs::default())
        .unwrap();
    edit.commit().unwrap();
    drop(edit);
    assert_eq!(sandbox.read("etc/hosts"), b"old\n");
    // Not even a lock file, and another's temporary file is not judged.
    assert_eq!(
        sandbox.names("etc"),
        [".hosts.ral-tmp-0123456789ab", "hosts"]
    );
}

#[test]
fn a_noop_edit_notes_a_file_without_removing_its_temporary_files() {
    // `note` (for files that are resources themselves) cleans up after an
    // interrupted edit, as `read` does; a preview must not.
    let sandbox = Sandbox::with(true, Duration::from_secs(15));
    sandbox.write("srv/app.conf", b"old\n");
    sandbox.write("srv/.app.conf.ral-tmp-0123456789ab", b"half");
    let target = sandbox.open().file("srv/app.conf", true, None).unwrap();
    let mut edit = Edit::begin(Lock::beside(&target), &sandbox.call).unwrap();
    edit.note(&target, None).unwrap();
    drop(edit);
    assert_eq!(
        sandbox.names("srv"),
        [".app.conf.ral-tmp-0123456789ab", "app.conf"]
    );

    let sandbox = Sandbox::new();
    sandbox.write("srv/app.conf", b"old\n");
    sandbox.write("srv/.app.conf.ral-tmp-0123456789ab", b"half");
    let target = sandbox.open().file("srv/app.conf", true, None).unwrap();
    let mut edit = Edit::begin(Lock::beside(&target), &sandbox.call).unwrap();
    edit.note(&target, None).unwrap();
    drop(edit);
    assert_eq!(sandbox.names("srv"), [".app.conf.ral-lock", "app.conf"]);
}

#[test]
fn an_edit_of_a_directory_moved_meanwhile_writes_nothing() {
    let sandbox = Sandbox::new();
    sandbox.write("etc/hosts", b"old\n");
    let target = sandbox.open().file("etc/hosts", true, None).unwrap();
    let mut edit = Edit::begin(Lock::beside(&target), &sandbox.call).unwrap();
    edit.read(&target).unwrap();
    sandbox.rename("etc", "etc.moved");
    sandbox.write("etc/hosts", b"the new etc\n");
    edit.write(&target, b"changed\n".to_vec(), Attrs::default())
        .unwrap();
    let err = edit.commit().unwrap_err();
    drop(edit);
    assert_eq!(
        err.message,
        format!(
            "'{0}' was moved or replaced while it was being edited, so the lock '{0}/.hosts.ral-lock' \
             no longer guards that path; nothing was written",
            sandbox.path("etc").display()
        )
    );
    assert_eq!(sandbox.read("etc.moved/hosts"), b"old\n");
    assert_eq!(sandbox.read("etc/hosts"), b"the new etc\n");
    assert_eq!(sandbox.names("etc.moved"), [".hosts.ral-lock", "hosts"]);
}

#[test]
fn a_writer_that_does_not_lock_makes_commit_refuse_and_leaves_no_temporary_file() {
    let sandbox = Sandbox::new();
    sandbox.write("etc/hosts", b"old\n");
    let target = sandbox.open().file("etc/hosts", true, None).unwrap();
    let mut edit = Edit::begin(Lock::beside(&target), &sandbox.call).unwrap();
    edit.read(&target).unwrap();
    sandbox.write("etc/hosts.new", b"theirs\n");
    sandbox.rename("etc/hosts.new", "etc/hosts");
    edit.write(&target, b"ours\n".to_vec(), Attrs::default())
        .unwrap();
    let err = edit.commit().unwrap_err();
    assert!(
        err.message.contains("does not take the lock"),
        "{}",
        err.message
    );
    drop(edit);
    assert_eq!(sandbox.read("etc/hosts"), b"theirs\n");
    assert_eq!(sandbox.names("etc"), [".hosts.ral-lock", "hosts"]);
}

#[test]
fn an_edit_dropped_uncommitted_lets_go_of_its_lock_and_changes_nothing() {
    let mut sandbox = Sandbox::new();
    sandbox.write("etc/hosts", b"old\n");
    sandbox.call.lock_timeout = Duration::ZERO;
    let target = sandbox.open().file("etc/hosts", true, None).unwrap();
    let mut edit = Edit::begin(Lock::beside(&target), &sandbox.call).unwrap();
    edit.write(&target, b"new\n".to_vec(), Attrs::default())
        .unwrap();
    assert!(Edit::begin(Lock::beside(&target), &sandbox.call).is_err());
    drop(edit);
    assert!(Edit::begin(Lock::beside(&target), &sandbox.call).is_ok());
    assert_eq!(sandbox.read("etc/hosts"), b"old\n");
    assert_eq!(sandbox.names("etc"), [".hosts.ral-lock", "hosts"]);
}

#[test]
fn a_reader_never_sees_a_partial_file() {
    let sandbox = Sandbox::new();
    let versions: Vec<Vec<u8>> = (1..=40u8)
        .map(|n| vec![b'a' + n % 26; usize::from(n) * 4096])
        .collect();
    sandbox.write("etc/hosts", &versions[0]);
    let root = sandbox.open();
    let target = root.file("etc/hosts", true, None).unwrap();
    let done = AtomicBool::new(false);
    let seen = std::thread::scope(|scope| {
        let reader = scope.spawn(|| {
            let mut seen = 0;
            while !done.load(Ordering::Acquire) {
                let data = std::fs::read(sandbox.path("etc/hosts")).unwrap();
                assert!(
                    versions.contains(&data),
                    "a partial file of {} bytes",
                    data.len()
                );
                seen += 1;
            }
            seen
        });
        for version in &versions[1..] {
            let mut edit = Edit::begin(Lock::beside(&target), &sandbox.call).unwrap();
            edit.write(&target, version.clone(), Attrs::default())
                .unwrap();
            edit.commit().unwrap();
        }
        done.store(true, Ordering::Release);
        reader.join().unwrap()
    });
    assert!(seen > 0);
    assert_eq!(sandbox.read("etc/hosts"), versions[versions.len() - 1]);
}

/// Adds one to the number in `etc/counter`, through an edit under the
/// accounts lock.
fn increment(sandbox: &Sandbox, root: &crate::files::Root) {
    let target = root.file("etc/counter", true, None).unwrap();
    let mut edit = Edit::begin(Lock::accounts(root).unwrap(), &sandbox.call).unwrap();
    let data = edit.read(&target).unwrap().unwrap();
    let n: u64 = String::from_utf8(data).unwrap().trim().parse().unwrap();
    edit.write(&target, format!("{}\n", n + 1), Attrs::default())
        .unwrap();
    edit.commit().unwrap();
}

#[test]
fn edits_from_threads_here_and_from_the_python_toolkit_lose_no_update() {
    let sandbox = Sandbox::new();
    sandbox.write("etc/counter", b"0\n");
    let root = sandbox.open();
    let rounds = 60;
    let log = tempfile::tempfile().unwrap();
    let python = super::python_command(&format!(
        "root = ral.Root()\n\
         target = root.file('etc/counter')\n\
         for _ in range({rounds}):\n\
         \x20   with ral.Edit(ral.Lock.accounts(root), noop=False) as edit:\n\
         \x20       n = int(edit.read(target))\n\
         \x20       edit.write(target, b'%d\\n' % (n + 1))\n\
         \x20       edit.commit()\n"
    ))
    .env("RALSH_ROOT_DIR", &sandbox.root)
    // Its log of each lock waited for goes to a file, shown on failure,
    // not among the test runner's lines.
    .stderr(log.try_clone().unwrap())
    .spawn()
    .unwrap();
    std::thread::scope(|scope| {
        for _ in 0..2 {
            scope.spawn(|| {
                for _ in 0..rounds {
                    increment(&sandbox, &root);
                }
            });
        }
    });
    let status = { python }.wait().unwrap();
    let (mut log, mut logged) = (log, String::new());
    std::io::Seek::seek(&mut log, std::io::SeekFrom::Start(0)).unwrap();
    std::io::Read::read_to_string(&mut log, &mut logged).unwrap();
    assert!(status.success(), "{logged}");
    assert_eq!(
        sandbox.read("etc/counter"),
        format!("{}\n", 3 * rounds).into_bytes()
    );
}

/// Both toolkits keep a replaced file's access control list, and say that
/// its other names (hard links) keep the old content.
#[test]
fn both_toolkits_keep_the_access_control_list_and_warn_of_hard_links() {
    use std::os::fd::AsFd;
    // user::rw-, user:65534:r--, group::r--, mask::r--, other::r--.
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
    const ACL: &std::ffi::CStr = c"system.posix_acl_access";
    let acl_of = |path: &std::path::Path| {
        let file = std::fs::File::open(path).unwrap();
        crate::files::sys::xattr(file.as_fd(), ACL)
    };
    for python in [false, true] {
        let sandbox = Sandbox::new();
        sandbox.write("etc/hosts", b"old\n");
        std::fs::hard_link(sandbox.path("etc/hosts"), sandbox.path("other")).unwrap();
        let file = std::fs::File::open(sandbox.path("etc/hosts")).unwrap();
        let with_acl = crate::files::sys::set_xattr(file.as_fd(), ACL, &acl).is_ok();
        let said = if python {
            let out = sandbox.python(
                "root = ral.Root()\n\
                 target = root.file('etc/hosts')\n\
                 with ral.Edit(ral.Lock.beside(target), noop=False) as edit:\n\
                 \x20   edit.write(target, b'new\\n')\n\
                 \x20   edit.commit()\n",
            );
            String::from_utf8(out.stderr).unwrap()
        } else {
            let target = sandbox.open().file("etc/hosts", true, None).unwrap();
            let mut edit = Edit::begin(Lock::beside(&target), &sandbox.call).unwrap();
            edit.write(&target, b"new\n".to_vec(), Attrs::default())
                .unwrap();
            edit.commit().unwrap();
            sandbox.log()
        };
        assert_eq!(sandbox.read("etc/hosts"), b"new\n");
        assert_eq!(sandbox.read("other"), b"old\n");
        assert!(
            said.contains("etc/hosts' has 2 names (hard links): the new file replaces this one only, and the others keep the old content"),
            "python: {python}: {said}"
        );
        if with_acl {
            assert_eq!(
                acl_of(&sandbox.path("etc/hosts")),
                Some(acl.clone()),
                "python: {python}"
            );
        }
    }
}

#[test]
fn only_a_change_of_a_file_with_other_names_warns_of_hard_links() {
    let edit_hosts = |sandbox: &Sandbox| {
        let target = sandbox.open().file("etc/hosts", true, None).unwrap();
        let mut edit = Edit::begin(Lock::beside(&target), &sandbox.call).unwrap();
        edit.write(&target, b"new\n".to_vec(), Attrs::default())
            .unwrap();
        edit.commit().unwrap();
    };
    let warned = |sandbox: &Sandbox| sandbox.log().contains("(hard links)");

    let single = Sandbox::new();
    single.write("etc/hosts", b"old\n");
    edit_hosts(&single);
    assert!(!warned(&single), "{}", single.log());

    let linked = Sandbox::new();
    linked.write("etc/hosts", b"old\n");
    std::fs::hard_link(linked.path("etc/hosts"), linked.path("etc/hosts.bak")).unwrap();
    edit_hosts(&linked);
    assert!(warned(&linked), "{}", linked.log());

    // A preview changes no name, so it has nothing to warn of.
    let preview = Sandbox::with(true, Duration::from_secs(15));
    preview.write("etc/hosts", b"old\n");
    std::fs::hard_link(preview.path("etc/hosts"), preview.path("etc/hosts.bak")).unwrap();
    edit_hosts(&preview);
    assert!(!warned(&preview), "{}", preview.log());
}
