//! Temporary files and journals of an edit: a temporary file is new,
//! private and not inherited; an edit of several files leaves neither
//! journal nor temporary file, done or failed before its first rename.

use std::os::fd::AsRawFd;
use std::os::unix::fs::PermissionsExt;

use super::Sandbox;
use crate::files::edit::{create_temp, FAIL_RENAME_ONTO};
use crate::files::journal::NEXT_TEMP_NAMES;
use crate::files::{Attrs, Edit, Lock};

#[test]
fn a_temporary_file_is_new_private_and_closed_on_exec() {
    let sandbox = Sandbox::new();
    sandbox.write("etc/hosts", b"old\n");
    let outside = sandbox.tmp.path().join("outside");
    std::fs::write(&outside, b"not to be written\n").unwrap();
    // The first name given out is taken, by a link out of the root.
    std::os::unix::fs::symlink(&outside, sandbox.path("etc/.hosts.taken")).unwrap();
    NEXT_TEMP_NAMES.with(|names| {
        names
            .borrow_mut()
            .extend([".hosts.taken".to_owned(), ".hosts.free".to_owned()])
    });
    let hosts = sandbox.open().file("etc/hosts", true, None).unwrap();
    let made = create_temp(hosts.dir(), "hosts");
    NEXT_TEMP_NAMES.with(|names| names.borrow_mut().clear());
    let (name, fd) = made.unwrap();
    assert_eq!(name, ".hosts.free");
    // SAFETY: F_GETFD on a descriptor this test owns.
    let flags = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFD) };
    assert_ne!(flags & libc::FD_CLOEXEC, 0, "a child would inherit it");
    let mode = std::fs::symlink_metadata(sandbox.path("etc/.hosts.free"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    assert_eq!(std::fs::read(&outside).unwrap(), b"not to be written\n");
    assert!(std::fs::symlink_metadata(sandbox.path("etc/.hosts.taken"))
        .unwrap()
        .file_type()
        .is_symlink());
}

#[test]
fn a_temporary_file_that_cannot_be_made_says_why() {
    let sandbox = Sandbox::new();
    sandbox.write("etc/hosts", b"old\n");
    let hosts = sandbox.open().file("etc/hosts", true, None).unwrap();
    let long = "x".repeat(250);
    let err = create_temp(hosts.dir(), &long).unwrap_err();
    assert!(err.message.contains("too long"), "{}", err.message);
}

/// An edit of shadow and passwd, the rename onto `fail` made to fail.
fn edit_accounts(sandbox: &Sandbox, fail: Option<&str>) -> Result<(), String> {
    sandbox.write("etc/passwd", b"root\n");
    sandbox.write_mode("etc/shadow", b"root-shadow\n", 0o640);
    let root = sandbox.open();
    let passwd = root.file("etc/passwd", true, None).unwrap();
    let shadow = root.file("etc/shadow", true, None).unwrap();
    FAIL_RENAME_ONTO.with(|f| *f.borrow_mut() = fail.map(str::to_owned));
    let mut edit = Edit::begin(Lock::accounts(&root).unwrap(), &sandbox.call).unwrap();
    edit.write(&shadow, b"bob-shadow\n".to_vec(), Attrs::default())
        .unwrap();
    edit.write(&passwd, b"bob\n".to_vec(), Attrs::default())
        .unwrap();
    let done = edit.commit().map_err(|err| err.message);
    drop(edit);
    FAIL_RENAME_ONTO.with(|f| *f.borrow_mut() = None);
    done
}

#[test]
fn an_edit_of_several_files_done_leaves_no_journal() {
    let sandbox = Sandbox::new();
    edit_accounts(&sandbox, None).unwrap();
    assert_eq!(sandbox.read("etc/passwd"), b"bob\n");
    assert_eq!(sandbox.names("etc"), [".pwd.lock", "passwd", "shadow"]);
}

#[test]
fn an_edit_of_several_files_failed_at_its_first_rename_leaves_no_trace() {
    let sandbox = Sandbox::new();
    let err = edit_accounts(&sandbox, Some("shadow")).unwrap_err();
    assert!(err.starts_with("cannot replace '"), "{err}");
    assert_eq!(sandbox.read("etc/shadow"), b"root-shadow\n");
    assert_eq!(sandbox.read("etc/passwd"), b"root\n");
    assert_eq!(sandbox.names("etc"), [".pwd.lock", "passwd", "shadow"]);
}

/// An extended attribute longer than the first buffer is read whole.
#[test]
fn an_extended_attribute_is_read_whole_at_any_length() {
    use crate::files::sys::{set_xattr, xattr};
    use std::os::fd::AsFd;
    // Beside the build, on the file system of the checkout (a tmpfs of
    // an older kernel has no user attributes).
    let target = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target");
    let dir = tempfile::tempdir_in(target).unwrap();
    let file = std::fs::File::create(dir.path().join("f")).unwrap();
    let name = c"user.ral-test";
    assert_eq!(xattr(file.as_fd(), name), None);
    if let Err(err) = set_xattr(file.as_fd(), name, b"v") {
        assert_eq!(err.raw_os_error(), Some(libc::EOPNOTSUPP), "{err}");
        eprintln!("skipped: this file system keeps no user attributes");
        return;
    }
    for len in [10, 256, 257, 2000] {
        let value = vec![b'v'; len];
        set_xattr(file.as_fd(), name, &value).unwrap();
        assert_eq!(xattr(file.as_fd(), name), Some(value), "{len}");
    }
}
