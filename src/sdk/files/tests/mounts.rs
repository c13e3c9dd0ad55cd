//! Mount ids as the toolkit reads them, on this machine's own mounts
//! (read only: nothing is mounted here; the removals a mount point stops
//! are tested in a namespace of their own, in tests/needs/mounts.rs).

use std::ffi::OsStr;
use std::os::fd::AsFd;

use crate::sdk::files::sys;

fn open(path: &str) -> std::os::fd::OwnedFd {
    sys::open_path(OsStr::new(path), sys::DIR_FLAGS).unwrap()
}

/// statx's mount id and the fallback's (`/proc/self/fdinfo`, for kernels
/// before 5.8) are the same number, for a directory open and for an
/// entry looked up in one; an entry's is its own mount's, so `/proc` is
/// a mount point of `/` and a temporary directory's entry is none.
#[test]
fn statx_and_fdinfo_tell_the_same_mount_ids() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir(tmp.path().join("d")).unwrap();
    let dir = open(tmp.path().to_str().unwrap());
    let id = sys::mount_id(dir.as_fd()).unwrap();
    assert_eq!(sys::fdinfo_mount_id(dir.as_fd()).unwrap(), id);
    let (kind, entry) = sys::kind_and_mount_at(dir.as_fd(), OsStr::new("d")).unwrap();
    assert_eq!((kind, entry), (libc::S_IFDIR, id));
    assert_eq!(
        sys::opened_mount_id(dir.as_fd(), OsStr::new("d")).unwrap(),
        id
    );
    assert!(!sys::is_mount_point_at(dir.as_fd(), OsStr::new("d")).unwrap());

    let slash = open("/");
    let proc_id = sys::kind_and_mount_at(slash.as_fd(), OsStr::new("proc"))
        .unwrap()
        .1;
    assert_ne!(proc_id, sys::mount_id(slash.as_fd()).unwrap());
    assert_eq!(
        sys::opened_mount_id(slash.as_fd(), OsStr::new("proc")).unwrap(),
        proc_id
    );
    assert!(sys::is_mount_point_at(slash.as_fd(), OsStr::new("proc")).unwrap());
}

/// The check a removal starts with finds a mount point at the top of the
/// tree (`/proc`, only looked at) and none in a tree of one file system.
#[test]
fn the_check_before_a_removal_finds_a_mount_point_or_none() {
    let slash = open("/");
    assert_eq!(
        sys::find_mount(slash.as_fd(), OsStr::new("proc")).unwrap(),
        Some(std::path::PathBuf::new())
    );
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(tmp.path().join("top/a/b")).unwrap();
    std::fs::write(tmp.path().join("top/a/b/f"), "x").unwrap();
    std::os::unix::fs::symlink("/proc", tmp.path().join("top/a/link")).unwrap();
    let dir = open(tmp.path().to_str().unwrap());
    assert_eq!(
        sys::find_mount(dir.as_fd(), OsStr::new("top")).unwrap(),
        None
    );
    assert!(tmp.path().join("top/a/b/f").is_file(), "only looked at");
}
