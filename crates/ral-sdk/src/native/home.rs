//! The home directories `managehome` makes and removes for the user
//! provider, below the root, once the account files are saved.
//!
//! Removing is the most dangerous thing ral does, and a home is only a
//! path someone wrote: `home=/srv` or `home=/etc` must not take the
//! server's data or its configuration with the account. So a home is
//! removed only when all of this holds, as `userdel -r` checks it
//! (otherwise it is kept, with a warning saying why; the account is
//! removed all the same):
//!
//! - it is not `/`, not a top-level directory (`/srv`, `/home`, `/etc`,
//!   ...), not one of [`SYSTEM_DIRS`] and not below one of
//!   [`SYSTEM_TREES`], and its path has no `.` or `..` in it;
//! - the path to it goes through no symbolic link, and it is a directory
//!   itself (not a link, file, FIFO or device);
//! - the user owns it, and the user's uid is not 0 (root's files are
//!   everywhere);
//! - it is not the home of another account, nor holds one;
//! - it is no mount point, and everything in it belongs to the user and
//!   lies on its mount: a mount point in it (a bind mount of a directory
//!   outside the home, of the same file system or another, told by its
//!   mount id, not by its device number) keeps the home whole, as a
//!   removal never crosses into another mount.
//!
//! Every check and removal goes through directory descriptors, never
//! following a link: each directory is opened below the one before with
//! `O_NOFOLLOW`, its owner read from the descriptor opened. The removal
//! checks each entry's owner again before unlinking it, so that a file
//! another user put there after the first check stays (and so does the
//! directory holding it), and its mount: a mount point that appeared
//! after the check stops the removal there.

use std::ffi::{OsStr, OsString};
use std::os::fd::{AsFd, OwnedFd};

use serde_json::Map;

use super::accounts::{shown, Table};
use crate::files::sys::{self, Mode};
use crate::files::{Create, Dir, Root, Stat};
use crate::{Call, CallError, CallResult, Level};

/// Directories a home is never removed from at any depth: configuration,
/// the kernel's file systems and the boot files.
pub const SYSTEM_TREES: &[&str] = &["/etc", "/boot", "/dev", "/proc", "/sys"];

/// System directories below the top level that are never removed as a
/// home (a top-level directory never is).
pub const SYSTEM_DIRS: &[&str] = &[
    "/usr/bin",
    "/usr/games",
    "/usr/include",
    "/usr/lib",
    "/usr/lib32",
    "/usr/lib64",
    "/usr/libexec",
    "/usr/libx32",
    "/usr/local",
    "/usr/local/bin",
    "/usr/local/etc",
    "/usr/local/games",
    "/usr/local/include",
    "/usr/local/lib",
    "/usr/local/man",
    "/usr/local/sbin",
    "/usr/local/share",
    "/usr/local/src",
    "/usr/sbin",
    "/usr/share",
    "/usr/src",
    "/var/backups",
    "/var/cache",
    "/var/empty",
    "/var/lib",
    "/var/local",
    "/var/lock",
    "/var/log",
    "/var/mail",
    "/var/opt",
    "/var/run",
    "/var/spool",
    "/var/tmp",
    "/var/www",
];

/// A home directory to make or remove once the files are saved.
pub enum Work {
    Make {
        name: String,
        home: String,
        uid: u32,
        gid: u32,
    },
    Remove {
        name: String,
        home: String,
        uid: u32,
    },
}

/// The accounts left in passwd once the call's updates are made: whose
/// homes must stay, and whose names show the owners of files.
pub struct Accounts {
    /// Name, uid and home of each.
    pub entries: Vec<(String, u32, String)>,
}

impl Accounts {
    pub fn of(passwd: Option<&Table>) -> Accounts {
        let entries = passwd
            .map(|table| {
                table
                    .records()
                    .iter()
                    .filter_map(|line| {
                        let f = line.f();
                        let uid = u32::try_from(line.id(2)).ok()?;
                        Some((f[0].clone(), uid, f[5].clone()))
                    })
                    .collect()
            })
            .unwrap_or_default();
        Accounts { entries }
    }

    /// `uid 1000 ('alice')`, or `uid 1000` when no account has it.
    fn owner(&self, uid: u32) -> String {
        match self.entries.iter().find(|(_, id, _)| *id == uid) {
            Some((name, _, _)) => format!("uid {uid} ({})", shown(name)),
            None => format!("uid {uid}"),
        }
    }
}

/// Does the work: makes the homes asked for (an error fails the call,
/// whose accounts are saved), removes those that may be removed and says
/// why any other is kept (never an error: the account is gone already).
/// Under noop nothing is made or removed, and what would be kept is said.
pub fn run(call: &Call, root: &Root, accounts: &Accounts, work: &[Work]) -> CallResult<()> {
    for item in work {
        match item {
            Work::Make {
                name,
                home,
                uid,
                gid,
            } => make(call, root, accounts, name, home, *uid, *gid)?,
            Work::Remove { name, home, uid } => {
                if let Err(why) = remove(call, root, accounts, name, home, *uid) {
                    let verb = match call.noop {
                        true => "would be kept",
                        false => "was kept",
                    };
                    let message = format!("the home directory {} {verb}: {why}", show(root, home));
                    call.log.resource(
                        Level::Warn,
                        name,
                        Some("deleting"),
                        Some(&message),
                        Map::new(),
                    );
                }
            }
        }
    }
    Ok(())
}

/// The path of `home` below the root, for messages.
fn show(root: &Root, home: &str) -> String {
    shown(&root.show(home.trim_start_matches('/')))
}

/// `home` as its parent (relative to the root) and its last name, or
/// `None` for a path without a last name (`/`, `..`).
fn split(home: &str) -> Option<(&str, &str)> {
    let trimmed = home.trim_end_matches('/');
    let (parent, base) = trimmed.rsplit_once('/').unwrap_or(("", trimmed));
    match base {
        "" | "." | ".." => None,
        _ => Some((parent.trim_start_matches('/'), base)),
    }
}

/// Makes `home` for a new account: mode 0755, owned by the user when run
/// as root. One that exists is left as it is, whoever owns it; a warning
/// says so when the user does not own it or it is no directory.
fn make(
    call: &Call,
    root: &Root,
    accounts: &Accounts,
    name: &str,
    home: &str,
    uid: u32,
    gid: u32,
) -> CallResult<()> {
    let Some((parent, base)) = split(home) else {
        return Err(CallError::new(format!(
            "the home directory {} cannot be managed",
            shown(home)
        )));
    };
    if call.noop {
        return Ok(());
    }
    // Directories missing on the way are made (so never "missing").
    let dir = root.directory(parent, true, Some(Create::mode(0o755)))?;
    let left = match dir.lstat(base)? {
        None => {
            let made = Create {
                mode: 0o755,
                uid: Some(uid),
                gid: Some(gid),
            };
            return dir.subdir(base, Some(made)).map(drop);
        }
        Some(info) if !info.is_dir() => format!("it is {}", kind(&info)),
        Some(info) if info.uid() != uid && sys::is_root() => {
            format!("it is owned by {}", accounts.owner(info.uid()))
        }
        Some(_) => return Ok(()),
    };
    let message = format!(
        "the home directory {} exists already and was left as it is: {left}",
        show(root, home)
    );
    call.log.resource(
        Level::Warn,
        name,
        Some("creating"),
        Some(&message),
        Map::new(),
    );
    Ok(())
}

/// What a file that is not a directory is, for messages.
fn kind(info: &Stat) -> &'static str {
    match info.mode() & libc::S_IFMT {
        libc::S_IFLNK => "a symbolic link",
        libc::S_IFREG => "a file",
        libc::S_IFIFO => "a FIFO",
        libc::S_IFCHR | libc::S_IFBLK => "a device",
        libc::S_IFSOCK => "a socket",
        _ => "not a directory",
    }
}

/// Removes the home of the account `name` (uid `uid`) if it may be
/// removed (see the module); else why it is kept. A home that does not
/// exist is nothing to do.
fn remove(
    call: &Call,
    root: &Root,
    accounts: &Accounts,
    name: &str,
    home: &str,
    uid: u32,
) -> Result<(), String> {
    if let Some(why) = protected(home) {
        return Err(why);
    }
    if let Some((other, _, _)) = accounts
        .entries
        .iter()
        .find(|(other, _, theirs)| other != name && holds(home, theirs))
    {
        return Err(format!(
            "it holds the home directory of the user {}",
            shown(other)
        ));
    }
    if uid == 0 {
        return Err("the user has uid 0, and root's files are everywhere".to_owned());
    }
    let (parent, base) = split(home).ok_or("it names no directory")?;
    let dir = match root.directory(parent, false, None) {
        Ok(dir) => dir,
        Err(err) if err.missing => return Ok(()),
        Err(err) => return Err(err.message),
    };
    let Some(home_dir) = open_home(&dir, base, uid, accounts)? else {
        return Ok(());
    };
    let mount = home_mount(&dir, base, &home_dir)?;
    let start = || Open::new(home_dir.try_clone(), dir.show(base));
    let level = start().map_err(|err| err.to_string())?;
    if let Some(found) = first_foreign(level, uid, mount)? {
        return Err(found.say(accounts));
    }
    if call.noop {
        return Ok(());
    }
    let level = start().map_err(|err| err.to_string())?;
    let kept = remove_owned(level, uid, mount)?;
    match kept {
        Some(found @ Found::Mount { .. }) => Err(format!(
            "{} (found while removing: the removal stopped there, and some of what the user \
             owned is removed)",
            found.say(accounts)
        )),
        Some(found) => Err(format!(
            "{} (found while removing; the rest of what the user owned is removed)",
            found.say(accounts)
        )),
        None => match sys::rmdir_at(dir.as_fd(), OsStr::new(base)) {
            Ok(()) => Ok(()),
            Err(err) if err.raw_os_error() == Some(libc::ENOENT) => Ok(()),
            Err(err) => Err(format!("it could not be removed: {err}")),
        },
    }
}

/// Why `home` is never removed, or `None`.
fn protected(home: &str) -> Option<String> {
    let parts: Vec<&str> = home.split('/').filter(|p| !p.is_empty()).collect();
    if !home.starts_with('/') || parts.iter().any(|p| *p == "." || *p == "..") {
        return Some("its path is not a plain absolute path".to_owned());
    }
    if parts.len() < 2 {
        return Some("it is the root or a top-level directory".to_owned());
    }
    let path = format!("/{}", parts.join("/"));
    if SYSTEM_DIRS.contains(&path.as_str()) {
        return Some("it is a system directory".to_owned());
    }
    if let Some(tree) = SYSTEM_TREES
        .iter()
        .find(|tree| holds(tree, &path) && path.len() > tree.len())
    {
        return Some(format!("it is below the system directory {}", shown(tree)));
    }
    None
}

/// Whether the path `inner` is `outer` or below it (as paths, `/`s
/// repeated or at the end aside).
fn holds(outer: &str, inner: &str) -> bool {
    let parts = |path: &str| -> Vec<String> {
        path.split('/')
            .filter(|p| !p.is_empty())
            .map(str::to_owned)
            .collect()
    };
    let (outer, inner) = (parts(outer), parts(inner));
    inner.len() >= outer.len() && inner[..outer.len()] == outer[..]
}

/// The home `base` in `dir`, opened without following a link, if it is
/// a directory the user owns; `None` when it does not exist.
fn open_home(
    dir: &Dir,
    base: &str,
    uid: u32,
    accounts: &Accounts,
) -> Result<Option<OwnedFd>, String> {
    let shown_path = dir.show(base);
    let fd = match sys::open_at(dir.as_fd(), OsStr::new(base), sys::DIR_FLAGS, Mode::empty()) {
        Ok(fd) => fd,
        Err(err) if err.raw_os_error() == Some(libc::ENOENT) => return Ok(None),
        Err(err) if matches!(err.raw_os_error(), Some(libc::ENOTDIR | libc::ELOOP)) => {
            let what = match dir.lstat(base) {
                Ok(Some(info)) => kind(&info),
                _ => "not a directory",
            };
            return Err(format!("it is {what}"));
        }
        Err(err) => return Err(format!("{}: {err}", shown(&shown_path))),
    };
    let owner = fstat(&fd, &shown_path)?.uid();
    if owner != uid {
        return Err(format!(
            "it is owned by {}, not by the user",
            accounts.owner(owner)
        ));
    }
    Ok(Some(fd))
}

fn fstat(fd: &OwnedFd, path: &str) -> Result<Stat, String> {
    sys::fstat(fd.as_fd()).map_err(|err| format!("{}: {err}", shown(path)))
}

/// Why a mount point is kept, after what it is: a removal never crosses
/// into another mount.
const MOUNT_POINT: &str = "a mount point (something is mounted on it, maybe from outside the \
     root), and a removal never crosses into another mount";

/// The id of the mount that the home `base` in `dir`, open as `home`,
/// lies on; why it is kept when that is not the mount of `dir` (the home
/// is a mount point) or cannot be told.
fn home_mount(dir: &Dir, base: &str, home: &OwnedFd) -> Result<u64, String> {
    let error = |err: std::io::Error| format!("{}: {err}", shown(&dir.show(base)));
    let mount = sys::mount_id(home.as_fd()).map_err(error)?;
    if mount != sys::mount_id(dir.as_fd()).map_err(error)? {
        return Err(format!("it is {MOUNT_POINT}"));
    }
    Ok(mount)
}

/// Whether `name` in `level` lies on another mount than `mount` (it is
/// a mount point); `None` when it vanished meanwhile.
fn on_other_mount(level: &Open, name: &OsStr, mount: u64) -> Result<Option<bool>, String> {
    match sys::kind_and_mount_at(level.fd.as_fd(), name) {
        Ok((_, on)) => Ok(Some(on != mount)),
        Err(err) if err.raw_os_error() == Some(libc::ENOENT) => Ok(None),
        Err(err) => Err(format!("{}: {err}", shown(&level.show(name)))),
    }
}

/// What keeps a home: an entry of another owner, or a mount point.
enum Found {
    Foreign { path: String, uid: u32 },
    Mount { path: String },
}

impl Found {
    fn say(&self, accounts: &Accounts) -> String {
        match self {
            Found::Foreign { path, uid } => format!(
                "it holds {}, owned by {}",
                shown(path),
                accounts.owner(*uid)
            ),
            Found::Mount { path } => format!("it holds {}, {MOUNT_POINT}", shown(path)),
        }
    }
}

/// A directory being walked: its descriptor, its path for messages, and
/// the names in it still to look at.
struct Open {
    fd: OwnedFd,
    path: String,
    left: Vec<OsString>,
}

impl Open {
    fn new(fd: std::io::Result<OwnedFd>, path: String) -> std::io::Result<Open> {
        let fd = fd?;
        let left = sys::list(fd.as_fd())?;
        Ok(Open { fd, path, left })
    }

    fn show(&self, name: &OsStr) -> String {
        format!("{}/{}", self.path, name.to_string_lossy())
    }
}

/// The entry `name` in `level`, unless it vanished meanwhile.
fn entry(level: &Open, name: &OsStr) -> Result<Option<Stat>, String> {
    match sys::lstat_at(level.fd.as_fd(), name) {
        Ok(info) => Ok(Some(info)),
        Err(err) if err.raw_os_error() == Some(libc::ENOENT) => Ok(None),
        Err(err) => Err(format!("{}: {err}", shown(&level.show(name)))),
    }
}

/// The directory `name` in `level`, opened without following a link, if
/// the descriptor opened shows it on the mount `mount` and owned by
/// `uid`; else what keeps it. (Checked on the descriptor, so that nothing
/// mounted there since it was looked at is walked into.)
fn descend(
    level: &Open,
    name: &OsStr,
    uid: u32,
    mount: u64,
) -> Result<Result<Open, Found>, String> {
    let path = level.show(name);
    let error = |err: std::io::Error| format!("{}: {err}", shown(&path));
    let fd = sys::open_at(level.fd.as_fd(), name, sys::DIR_FLAGS, Mode::empty()).map_err(error)?;
    if sys::mount_id(fd.as_fd()).map_err(error)? != mount {
        return Ok(Err(Found::Mount { path }));
    }
    let below = Open::new(Ok(fd), path.clone()).map_err(error)?;
    let info = fstat(&below.fd, &path)?;
    if info.uid() != uid {
        return Ok(Err(Found::Foreign {
            path,
            uid: info.uid(),
        }));
    }
    Ok(Ok(below))
}

/// The first entry below `top` that keeps it, or `None` when the user
/// owns everything in it, on its mount `mount`.
fn first_foreign(top: Open, uid: u32, mount: u64) -> Result<Option<Found>, String> {
    // A loop over a stack of levels, not a recursion: a tree of any depth
    // is walked without running out of stack.
    let mut levels = vec![top];
    while let Some(level) = levels.last_mut() {
        let Some(name) = level.left.pop() else {
            levels.pop();
            continue;
        };
        let level = &*level;
        let Some(found) = keeps(level, &name, uid, mount)? else {
            continue;
        };
        let info = match found {
            Ok(info) => info,
            Err(found) => return Ok(Some(found)),
        };
        if info.is_dir() {
            match descend(level, &name, uid, mount)? {
                Ok(below) => levels.push(below),
                Err(found) => return Ok(Some(found)),
            }
        }
    }
    Ok(None)
}

/// The entry `name` in `level` (`None`: it vanished meanwhile), or what
/// keeps the home: a mount point (looked at first: what is mounted there
/// is no file of the home, whoever owns it), or an entry not owned by
/// `uid`.
fn keeps(
    level: &Open,
    name: &OsStr,
    uid: u32,
    mount: u64,
) -> Result<Option<Result<Stat, Found>>, String> {
    let path = || level.show(name);
    match on_other_mount(level, name, mount)? {
        None => return Ok(None),
        Some(true) => return Ok(Some(Err(Found::Mount { path: path() }))),
        Some(false) => {}
    }
    let Some(info) = entry(level, name)? else {
        return Ok(None);
    };
    if info.uid() != uid {
        return Ok(Some(Err(Found::Foreign {
            path: path(),
            uid: info.uid(),
        })));
    }
    Ok(Some(Ok(info)))
}

/// Removes everything below `top` that `uid` owns on the mount `mount`,
/// each entry's owner and mount read again just before it goes; returns
/// the first entry kept, if any (the directories holding it stay too).
/// A mount point found stops the removal there: it appeared after the
/// check, and nothing more of the home goes.
fn remove_owned(top: Open, uid: u32, mount: u64) -> Result<Option<Found>, String> {
    let mut kept = None;
    // Each level with its name in the one above (none for the top).
    let mut levels: Vec<(Open, Option<OsString>)> = vec![(top, None)];
    while let Some((level, _)) = levels.last_mut() {
        let Some(name) = level.left.pop() else {
            let (done, name) = levels.pop().expect("a level is there");
            if let (Some(name), Some((above, _))) = (name, levels.last()) {
                match sys::rmdir_at(above.fd.as_fd(), &name) {
                    Ok(()) => {}
                    Err(err) if matches!(err.raw_os_error(), Some(libc::ENOENT)) => {}
                    // Not empty: it holds what was kept.
                    Err(err) if kept.is_some() && err.raw_os_error() == Some(libc::ENOTEMPTY) => {}
                    Err(err) => return Err(format!("{}: {err}", shown(&done.path))),
                }
            }
            continue;
        };
        let level = &*level;
        let Some(found) = keeps(level, &name, uid, mount)? else {
            continue;
        };
        let info = match found {
            Ok(info) => info,
            Err(found @ Found::Mount { .. }) => return Ok(Some(found)),
            Err(found) => {
                kept.get_or_insert(found);
                continue;
            }
        };
        if info.is_dir() {
            match descend(level, &name, uid, mount)? {
                Ok(below) => levels.push((below, Some(name))),
                Err(found @ Found::Mount { .. }) => return Ok(Some(found)),
                Err(found) => {
                    kept.get_or_insert(found);
                }
            }
            continue;
        }
        match sys::unlink_at(level.fd.as_fd(), &name) {
            Ok(()) => {}
            Err(err) if err.raw_os_error() == Some(libc::ENOENT) => {}
            Err(err) => return Err(format!("{}: {err}", shown(&level.show(&name)))),
        }
    }
    Ok(kept)
}

#[cfg(test)]
mod tests {
    use super::super::tests::logged_call;
    use super::*;

    #[test]
    fn system_and_top_level_paths_are_protected() {
        for home in [
            "/",
            "/srv",
            "/etc",
            "/home",
            "/root",
            "/usr",
            "/var",
            "/bin",
            "/tmp",
            "//srv//",
            "/usr/lib",
            "/var/lib/",
            "/usr/local",
            "/etc/app",
            "/etc/x/y",
            "/proc/1",
            "/home/../etc/app",
            "/home/./bob",
            "relative/bob",
        ] {
            assert!(protected(home).is_some(), "{home}");
        }
        for home in [
            "/home/bob",
            "/srv/app",
            "/var/lib/postgresql",
            "/etcetera/x",
        ] {
            assert_eq!(protected(home), None, "{home}");
        }
    }

    fn tree() -> (tempfile::TempDir, Open, u32, u64) {
        let dir = tempfile::tempdir().unwrap();
        let top = dir.path().join("home");
        std::fs::create_dir_all(top.join("a/b")).unwrap();
        std::fs::write(top.join("a/b/f"), "x").unwrap();
        std::fs::write(top.join("g"), "y").unwrap();
        let path = std::ffi::OsString::from(&top);
        let fd = sys::open_path(&path, sys::DIR_FLAGS);
        let open = Open::new(fd, top.display().to_string()).unwrap();
        let info = fstat(&open.fd, "home").unwrap();
        let mount = sys::mount_id(open.fd.as_fd()).unwrap();
        (dir, open, info.uid(), mount)
    }

    /// The removal reads each entry's owner again before it unlinks it:
    /// what the user does not own stays, even when the check before
    /// found nothing (another user's file put there meanwhile).
    #[test]
    fn the_removal_keeps_what_the_user_does_not_own() {
        let (dir, top, owner, mount) = tree();
        let found = remove_owned(top, owner + 1, mount).unwrap();
        assert!(matches!(found, Some(Found::Foreign { uid, .. }) if uid == owner));
        assert!(dir.path().join("home/a/b/f").is_file());
        assert!(dir.path().join("home/g").is_file());

        // A file of another owner deep down: the rest goes, it and the
        // directories holding it stay, and it is what was kept.
        if sys::is_root() {
            let (dir, top, owner, mount) = tree();
            let deep = dir.path().join("home/a/b/f");
            std::os::unix::fs::lchown(&deep, Some(owner + 1), None).unwrap();
            let found = remove_owned(top, owner, mount).unwrap();
            assert!(
                matches!(&found, Some(Found::Foreign { path, uid }) if path.ends_with("home/a/b/f") && *uid == owner + 1)
            );
            assert!(deep.is_file());
            assert!(!dir.path().join("home/g").exists());
        } else {
            eprintln!("skipped: a file of another owner needs root");
        }

        let (dir, top, owner, mount) = tree();
        assert!(remove_owned(top, owner, mount).unwrap().is_none());
        let left: Vec<_> = std::fs::read_dir(dir.path().join("home"))
            .unwrap()
            .collect();
        assert!(left.is_empty(), "{left:?}");
    }

    #[test]
    fn the_check_finds_what_the_user_does_not_own_or_another_mount() {
        let (_dir, top, owner, mount) = tree();
        assert!(matches!(
            first_foreign(top, owner + 1, mount).unwrap(),
            Some(Found::Foreign { .. })
        ));
        let (_dir, top, owner, mount) = tree();
        assert!(matches!(
            first_foreign(top, owner, mount + 1).unwrap(),
            Some(Found::Mount { .. })
        ));
        let (_dir, top, owner, mount) = tree();
        assert!(first_foreign(top, owner, mount).unwrap().is_none());
    }

    fn accounts() -> Accounts {
        Accounts {
            entries: vec![("alice".to_owned(), 4242, "/home/alice".to_owned())],
        }
    }

    fn make_home(root: &std::path::Path, home: &str, uid: u32) -> (CallResult<()>, String) {
        let (call, said) = logged_call(root);
        let work = Work::Make {
            name: "bob".to_owned(),
            home: home.to_owned(),
            uid,
            gid: uid,
        };
        let done = run(&call, &Root::open(root).unwrap(), &accounts(), &[work]);
        (done, said.text())
    }

    fn remove_home(root: &std::path::Path, home: &str, uid: u32) -> String {
        let (call, said) = logged_call(root);
        let work = Work::Remove {
            name: "bob".to_owned(),
            home: home.to_owned(),
            uid,
        };
        run(&call, &Root::open(root).unwrap(), &accounts(), &[work]).unwrap();
        said.text()
    }

    #[test]
    fn a_path_without_a_last_name_names_no_home() {
        for home in ["/", "", "/home/..", "/home/.", "/home/../", "//"] {
            assert_eq!(split(home), None, "{home:?}");
        }
        assert_eq!(split("/home/bob/"), Some(("home", "bob")));
        assert_eq!(split("/bob"), Some(("", "bob")));
        let dir = tempfile::tempdir().unwrap();
        let (done, _) = make_home(dir.path(), "/home/..", 1000);
        assert_eq!(
            done.unwrap_err().message,
            "the home directory '/home/..' cannot be managed"
        );
    }

    /// A home that exists is left as it is; a warning says what it is
    /// when it is no directory, or (as root) not the user's.
    #[test]
    fn a_home_in_the_way_is_left_as_it_is_and_said() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        std::fs::create_dir(&home).unwrap();
        let me = fstat(
            &sys::open_path(home.as_os_str(), sys::DIR_FLAGS).unwrap(),
            "home",
        )
        .unwrap()
        .uid();
        std::fs::write(home.join("file"), "x").unwrap();
        let _socket = std::os::unix::net::UnixListener::bind(home.join("socket")).unwrap();
        for (name, what) in [("file", "a file"), ("socket", "a socket")] {
            let (done, said) = make_home(dir.path(), &format!("/home/{name}"), me);
            assert!(done.is_ok());
            assert!(
                said.contains(&format!(
                    "exists already and was left as it is: it is {what}"
                )),
                "{name}: {said}"
            );
        }
        // Its own directory: nothing to say.
        std::fs::create_dir(home.join("mine")).unwrap();
        assert_eq!(
            make_home(dir.path(), "/home/mine", me),
            (Ok(()), String::new())
        );
        if sys::is_root() {
            let (done, said) = make_home(dir.path(), "/home/mine", 4243);
            assert!(done.is_ok());
            assert!(said.contains(&format!("it is owned by uid {me}")), "{said}");
            let null =
                std::ffi::CString::new(home.join("dev").into_os_string().into_encoded_bytes())
                    .unwrap();
            // SAFETY: a NUL-terminated path; /dev/null's numbers.
            assert_eq!(
                unsafe { libc::mknod(null.as_ptr(), libc::S_IFCHR | 0o600, libc::makedev(1, 3)) },
                0
            );
            let (_, said) = make_home(dir.path(), "/home/dev", me);
            assert!(said.contains("it is a device"), "{said}");
        } else {
            eprintln!("skipped: a home of another owner and a device need root");
        }
        // A parent that is no directory fails the call.
        let (done, said) = make_home(dir.path(), "/home/file/bob", me);
        assert!(done.is_err(), "{said}");
    }

    /// Nothing there is nothing to remove, and no warning.
    #[test]
    fn a_home_or_its_parent_that_is_missing_is_nothing_to_remove() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(remove_home(dir.path(), "/home/bob", 1000), "");
        std::fs::create_dir(dir.path().join("home")).unwrap();
        assert_eq!(remove_home(dir.path(), "/home/bob", 1000), "");
    }

    #[test]
    fn paths_hold_themselves_and_what_is_below() {
        assert!(holds("/home/bob", "/home/bob/"));
        assert!(holds("/home", "/home/bob"));
        assert!(!holds("/home/bob", "/home/bobby"));
        assert!(!holds("/home/bob", "/home"));
    }
}
