//! The system calls' wrappers where their behaviour is subtle: a link is
//! never followed, an existing name is told apart, locks exclude another
//! open file description of this process, and an id of -1 leaves the
//! owner as it is.

use std::ffi::OsStr;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::MetadataExt;

use crate::files::sys::{self, Mode, OFlags};

fn open_dir(path: &std::path::Path) -> OwnedFd {
    sys::open_path(path.as_os_str(), sys::DIR_FLAGS).unwrap()
}

#[test]
fn open_at_never_follows_a_link_and_keeps_the_flags_asked_for() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("file"), "x").unwrap();
    std::fs::create_dir(tmp.path().join("sub")).unwrap();
    std::os::unix::fs::symlink("file", tmp.path().join("to-file")).unwrap();
    std::os::unix::fs::symlink("sub", tmp.path().join("to-sub")).unwrap();
    let dir = open_dir(tmp.path());
    let open =
        |name: &str, flags| sys::open_at(dir.as_fd(), OsStr::new(name), flags, Mode::empty());
    let refused = open("to-file", sys::READ_FLAGS).unwrap_err();
    assert_eq!(refused.raw_os_error(), Some(libc::ELOOP), "{refused}");
    // With O_DIRECTORY the kernel says the link is no directory.
    let refused = open("to-sub", sys::DIR_FLAGS).unwrap_err();
    assert_eq!(refused.raw_os_error(), Some(libc::ENOTDIR), "{refused}");
    // A file is no directory, and what is opened is not inherited.
    let refused = open("file", sys::DIR_FLAGS).unwrap_err();
    assert_eq!(refused.raw_os_error(), Some(libc::ENOTDIR), "{refused}");
    let fd = open("sub", sys::DIR_FLAGS).unwrap();
    let flags = rustix::io::fcntl_getfd(&fd).unwrap();
    assert!(flags.contains(rustix::io::FdFlags::CLOEXEC));
    // lstat_at tells the link itself.
    assert!(sys::lstat_at(dir.as_fd(), OsStr::new("to-sub"))
        .unwrap()
        .is_symlink());
}

#[test]
fn a_name_with_a_nul_is_refused_in_our_words() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = open_dir(tmp.path());
    let err = sys::mkdir_at(dir.as_fd(), OsStr::new("a\0b"), Mode::RWXU).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
    assert_eq!(err.to_string(), "the name holds a NUL character");
}

#[test]
fn mkdir_at_says_eexist_for_a_name_taken_and_makes_the_mode_asked_for() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = open_dir(tmp.path());
    sys::mkdir_at(dir.as_fd(), OsStr::new("d"), Mode::RWXU).unwrap();
    let mode = std::fs::metadata(tmp.path().join("d")).unwrap().mode();
    assert_eq!(mode & 0o777, 0o700);
    let err = sys::mkdir_at(dir.as_fd(), OsStr::new("d"), Mode::RWXU).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EEXIST), "{err}");
    assert_eq!(err.kind(), std::io::ErrorKind::AlreadyExists);
    // A dangling link is taken too, and nothing is made where it points.
    std::os::unix::fs::symlink("elsewhere", tmp.path().join("link")).unwrap();
    let err = sys::mkdir_at(dir.as_fd(), OsStr::new("link"), Mode::RWXU).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EEXIST), "{err}");
    assert!(!tmp.path().join("elsewhere").exists());
}

#[test]
fn link_at_gives_a_second_name_unless_it_is_taken() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("new"), "n").unwrap();
    std::fs::write(tmp.path().join("taken"), "t").unwrap();
    let dir = open_dir(tmp.path());
    let err = sys::link_at(dir.as_fd(), OsStr::new("new"), OsStr::new("taken")).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::AlreadyExists, "{err}");
    assert_eq!(std::fs::read(tmp.path().join("taken")).unwrap(), b"t");
    sys::link_at(dir.as_fd(), OsStr::new("new"), OsStr::new("second")).unwrap();
    assert_eq!(std::fs::read(tmp.path().join("second")).unwrap(), b"n");
    assert_eq!(
        std::fs::metadata(tmp.path().join("new")).unwrap().nlink(),
        2
    );
}

/// A second open file description of the same file, in this process.
fn two_descriptions(tmp: &tempfile::TempDir) -> (OwnedFd, OwnedFd) {
    let dir = open_dir(tmp.path());
    let flags = OFlags::RDWR | OFlags::CREATE | OFlags::CLOEXEC;
    let open = || sys::open_at(dir.as_fd(), OsStr::new("lock"), flags, Mode::RUSR).unwrap();
    (open(), open())
}

#[test]
fn an_ofd_lock_is_held_against_another_description_of_this_process() {
    let tmp = tempfile::tempdir().unwrap();
    let (first, second) = two_descriptions(&tmp);
    sys::ofd_lock(first.as_fd(), false).unwrap();
    // A per-process (F_SETLK) lock would let this process take it again.
    let err = sys::ofd_lock(second.as_fd(), false).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::WouldBlock, "{err}");
    // The same description takes it again; closing it lets go.
    sys::ofd_lock(first.as_fd(), false).unwrap();
    drop(first);
    sys::ofd_lock(second.as_fd(), false).unwrap();
}

#[test]
fn a_flock_is_held_against_another_description_and_let_go_on_unlock() {
    let tmp = tempfile::tempdir().unwrap();
    let (first, second) = two_descriptions(&tmp);
    sys::flock(first.as_fd(), false).unwrap();
    let err = sys::flock(second.as_fd(), false).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::WouldBlock, "{err}");
    let shared = sys::FlockOperation::NonBlockingLockShared;
    assert!(sys::flock_as(second.as_fd(), shared).is_err());
    sys::flock_as(first.as_fd(), sys::FlockOperation::Unlock).unwrap();
    sys::flock_as(second.as_fd(), shared).unwrap();
}

#[test]
fn list_names_the_entries_without_dot_and_dotdot() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("a"), "").unwrap();
    std::fs::create_dir(tmp.path().join("b")).unwrap();
    std::os::unix::fs::symlink("a", tmp.path().join("c")).unwrap();
    let dir = open_dir(tmp.path());
    let mut names = sys::list(dir.as_fd()).unwrap();
    names.sort();
    assert_eq!(names, ["a", "b", "c"]);
    // Listed through a descriptor of its own: a second listing is whole.
    assert_eq!(sys::list(dir.as_fd()).unwrap().len(), 3);
}

#[test]
fn an_owner_of_none_or_minus_one_is_left_as_it_is() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("f"), "").unwrap();
    let dir = open_dir(tmp.path());
    let fd = sys::open_at(dir.as_fd(), OsStr::new("f"), sys::READ_FLAGS, Mode::empty()).unwrap();
    let before = sys::fstat(fd.as_fd()).unwrap();
    sys::fchown(fd.as_fd(), None, None).unwrap();
    sys::fchown(fd.as_fd(), Some(u32::MAX), Some(u32::MAX)).unwrap();
    sys::lchown_at(dir.as_fd(), OsStr::new("f"), Some(u32::MAX), None).unwrap();
    let after = sys::fstat(fd.as_fd()).unwrap();
    assert_eq!((after.uid(), after.gid()), (before.uid(), before.gid()));
    if !sys::is_root() {
        return;
    }
    // As root: one id given, the other kept; a link changed, not its
    // target.
    sys::fchown(fd.as_fd(), Some(4321), None).unwrap();
    let after = sys::fstat(fd.as_fd()).unwrap();
    assert_eq!((after.uid(), after.gid()), (4321, before.gid()));
    std::os::unix::fs::symlink("f", tmp.path().join("link")).unwrap();
    sys::lchown_at(dir.as_fd(), OsStr::new("link"), None, Some(4322)).unwrap();
    let link = sys::lstat_at(dir.as_fd(), OsStr::new("link")).unwrap();
    assert_eq!(link.gid(), 4322);
    assert_eq!(sys::fstat(fd.as_fd()).unwrap().gid(), before.gid());
}
