//! Mount ids as the toolkit reads them, on this machine's own mounts
//! (read only: nothing is mounted in the machine's namespace; the
//! removals a mount point stops are tested in a namespace of their own,
//! in tests/needs/mounts.rs), and a race with a mount made to happen
//! every time, in a mount namespace of one thread's own.

use std::ffi::OsStr;
use std::os::fd::AsFd;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::Command;

use crate::files::root::{self, Create};
use crate::files::{probe, sys};

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
    // A link to another mount lies on its directory's: never followed.
    std::os::unix::fs::symlink("/proc", tmp.path().join("l")).unwrap();
    let link = OsStr::new("l");
    assert_eq!(sys::opened_mount_id(dir.as_fd(), link).unwrap(), id);
    assert_eq!(
        sys::kind_and_mount_at(dir.as_fd(), link).unwrap(),
        (libc::S_IFLNK, id)
    );

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

/// `mount ARGS`, which must succeed.
fn mount(args: &[&OsStr]) {
    let status = Command::new("mount").args(args).status().unwrap();
    assert!(status.success(), "mount {args:?}: {status}");
}

/// A directory mounted on between its mkdir and its open (a `mount
/// --bind` loop racing `user managehome=true`) is refused: what is
/// mounted there keeps its owner and mode. Run on a thread of its own,
/// in a mount namespace of that thread's own, whose mounts are private.
#[test]
fn a_directory_mounted_on_before_it_is_opened_is_refused_unchanged() {
    if !sys::is_root() {
        eprintln!("skipped: a mount namespace of the test's own needs root");
        return;
    }
    std::thread::spawn(|| {
        // SAFETY: unshare(2) takes no pointer; CLONE_NEWNS gives this
        // thread (and the processes it starts) a mount namespace of its
        // own, and its own cwd and umask.
        assert_eq!(unsafe { libc::unshare(libc::CLONE_NEWNS) }, 0);
        mount(&["--make-rprivate".as_ref(), "/".as_ref()]);
        let tmp = tempfile::tempdir().unwrap();
        let outside = tmp.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        std::fs::set_permissions(&outside, PermissionsExt::from_mode(0o700)).unwrap();
        std::fs::create_dir(tmp.path().join("home")).unwrap();
        let parent = sys::open_path(tmp.path().join("home").as_os_str(), sys::DIR_FLAGS).unwrap();
        let home = tmp.path().join("home/u");
        let bind = {
            let (outside, home) = (outside.clone(), home.clone());
            move || mount(&["--bind".as_ref(), outside.as_os_str(), home.as_os_str()])
        };
        let create = Create {
            mode: 0o755,
            uid: Some(7000),
            gid: Some(7000),
        };
        let made = probe::after_mkdir(bind, || {
            root::make_dir(parent.as_fd(), "u", create, "home/u")
        });
        let meta = std::fs::metadata(&outside).unwrap();
        let _ = Command::new("umount").arg(&home).status();
        let err = made.unwrap_err();
        assert_eq!(
            err.message,
            "cannot set up the directory 'home/u': something was mounted on it since it was \
             made; refusing to change what is mounted there"
        );
        assert_eq!(
            (meta.uid(), meta.gid(), meta.mode() & 0o7777),
            (0, 0, 0o700)
        );
        assert!(Path::new(&home).is_dir());
    })
    .join()
    .unwrap();
}
