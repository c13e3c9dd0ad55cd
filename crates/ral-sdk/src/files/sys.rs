//! The system calls the files toolkit makes, as safe functions: each
//! names its path relative to an open directory (the `*at` calls), so that
//! the walk below the root never follows a path from `/` again. The mount
//! an entry lies on is told by its mount id, so that a removal never
//! crosses into another mount ([`remove_tree`]) and a mount point is never
//! taken for a file of the root. The only `unsafe` of the toolkit lives
//! here, and so do the test-only hooks of `probe` (compiled only for
//! tests).

use std::ffi::{CStr, CString, OsStr, OsString};
use std::fmt;
use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, IntoRawFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::PathBuf;

use super::stat::Stat;
use crate::text::quoted;

/// Opens a directory of the walk: never through a link.
pub const DIR_FLAGS: libc::c_int =
    libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
/// Opens a file to read: never through a link, never blocking on a FIFO.
pub const READ_FLAGS: libc::c_int =
    libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC;

fn c_name(name: &OsStr) -> io::Result<CString> {
    CString::new(name.as_bytes()).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "the name holds a NUL character",
        )
    })
}

fn check(result: libc::c_int) -> io::Result<libc::c_int> {
    if result < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(result)
    }
}

/// `openat(2)`.
pub fn open_at(
    dir: BorrowedFd<'_>,
    name: &OsStr,
    flags: libc::c_int,
    mode: libc::mode_t,
) -> io::Result<OwnedFd> {
    #[cfg(test)]
    if flags & libc::O_CREAT != 0 {
        super::probe::alive()?;
    }
    let name = c_name(name)?;
    // SAFETY: `name` is NUL-terminated and outlives the call; `dir` is an
    // open descriptor borrowed for the call.
    let fd = check(unsafe {
        libc::openat(
            dir.as_raw_fd(),
            name.as_ptr(),
            flags,
            libc::c_uint::from(mode),
        )
    })?;
    // SAFETY: openat returned a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `open(2)` of a path (the root directory, given by the caller).
pub fn open_path(path: &OsStr, flags: libc::c_int) -> io::Result<OwnedFd> {
    let path = c_name(path)?;
    // SAFETY: `path` is NUL-terminated and outlives the call.
    let fd = check(unsafe { libc::open(path.as_ptr(), flags) })?;
    // SAFETY: open returned a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `readlinkat(2)`: the target of the link `name`.
pub fn read_link_at(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<Vec<u8>> {
    let name = c_name(name)?;
    let mut size = 256;
    loop {
        let mut buf = vec![0u8; size];
        // SAFETY: `buf` has room for `buf.len()` bytes; `name` is
        // NUL-terminated; `dir` is open for the call.
        let got = unsafe {
            libc::readlinkat(
                dir.as_raw_fd(),
                name.as_ptr(),
                buf.as_mut_ptr().cast(),
                buf.len(),
            )
        };
        if got < 0 {
            return Err(io::Error::last_os_error());
        }
        let got = got.unsigned_abs();
        if got < size {
            buf.truncate(got);
            return Ok(buf);
        }
        // Possibly cut short: try again with more room.
        if size >= 1 << 20 {
            return Err(io::Error::from_raw_os_error(libc::ENAMETOOLONG));
        }
        size *= 4;
    }
}

/// `fstatat(2)` of `name`, not following a link.
pub fn lstat_at(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<Stat> {
    let name = c_name(name)?;
    let mut raw = MaybeUninit::<libc::stat>::uninit();
    // SAFETY: `raw` has room for a stat; `name` is NUL-terminated; `dir`
    // is open for the call.
    check(unsafe {
        libc::fstatat(
            dir.as_raw_fd(),
            name.as_ptr(),
            raw.as_mut_ptr(),
            libc::AT_SYMLINK_NOFOLLOW,
        )
    })?;
    // SAFETY: fstatat succeeded, so it filled the whole structure.
    Ok(Stat::from_raw(unsafe { raw.assume_init() }))
}

/// `fstat(2)`.
pub fn fstat(fd: BorrowedFd<'_>) -> io::Result<Stat> {
    let mut raw = MaybeUninit::<libc::stat>::uninit();
    // SAFETY: `raw` has room for a stat; `fd` is open for the call.
    check(unsafe { libc::fstat(fd.as_raw_fd(), raw.as_mut_ptr()) })?;
    // SAFETY: fstat succeeded, so it filled the whole structure.
    Ok(Stat::from_raw(unsafe { raw.assume_init() }))
}

/// `mkdirat(2)`.
pub fn mkdir_at(dir: BorrowedFd<'_>, name: &OsStr, mode: libc::mode_t) -> io::Result<()> {
    #[cfg(test)]
    super::probe::alive()?;
    let name = c_name(name)?;
    // SAFETY: `name` is NUL-terminated; `dir` is open for the call.
    check(unsafe { libc::mkdirat(dir.as_raw_fd(), name.as_ptr(), mode) })?;
    #[cfg(test)]
    super::probe::made_dir();
    Ok(())
}

/// `renameat(2)` within one directory or between two.
pub fn rename_at(
    from_dir: BorrowedFd<'_>,
    from: &OsStr,
    to_dir: BorrowedFd<'_>,
    to: &OsStr,
) -> io::Result<()> {
    #[cfg(test)]
    super::probe::alive()?;
    let from_c = c_name(from)?;
    let to_c = c_name(to)?;
    // SAFETY: both names are NUL-terminated; both descriptors are open
    // for the call.
    check(unsafe {
        libc::renameat(
            from_dir.as_raw_fd(),
            from_c.as_ptr(),
            to_dir.as_raw_fd(),
            to_c.as_ptr(),
        )
    })?;
    #[cfg(test)]
    super::probe::renamed(from_dir, from.as_ref(), to_dir, to.as_ref());
    Ok(())
}

/// `unlinkat(2)` of a file (never a directory).
pub fn unlink_at(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<()> {
    #[cfg(test)]
    super::probe::alive()?;
    let name = c_name(name)?;
    // SAFETY: `name` is NUL-terminated; `dir` is open for the call.
    check(unsafe { libc::unlinkat(dir.as_raw_fd(), name.as_ptr(), 0) }).map(drop)
}

/// `unlinkat(2)` of an empty directory.
pub fn rmdir_at(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<()> {
    #[cfg(test)]
    super::probe::alive()?;
    let name = c_name(name)?;
    // SAFETY: `name` is NUL-terminated; `dir` is open for the call.
    check(unsafe { libc::unlinkat(dir.as_raw_fd(), name.as_ptr(), libc::AT_REMOVEDIR) }).map(drop)
}

/// `fsync(2)`.
pub fn fsync(fd: BorrowedFd<'_>) -> io::Result<()> {
    #[cfg(test)]
    super::probe::alive()?;
    // SAFETY: `fd` is open for the call.
    check(unsafe { libc::fsync(fd.as_raw_fd()) })?;
    #[cfg(test)]
    super::probe::synced(fd, false);
    Ok(())
}

/// `syncfs(2)`: writes back everything of the file system holding `fd`
/// and waits for it (reporting a write-back error since Linux 5.8).
pub fn syncfs(fd: BorrowedFd<'_>) -> io::Result<()> {
    #[cfg(test)]
    super::probe::alive()?;
    // SAFETY: `fd` is open for the call.
    check(unsafe { libc::syncfs(fd.as_raw_fd()) })?;
    #[cfg(test)]
    super::probe::synced(fd, true);
    Ok(())
}

/// `fchmod(2)`.
pub fn fchmod(fd: BorrowedFd<'_>, mode: u32) -> io::Result<()> {
    #[cfg(test)]
    super::probe::alive()?;
    // SAFETY: `fd` is open for the call.
    check(unsafe { libc::fchmod(fd.as_raw_fd(), mode) }).map(drop)
}

/// `fchown(2)`; `None` leaves that id as it is.
pub fn fchown(fd: BorrowedFd<'_>, uid: Option<u32>, gid: Option<u32>) -> io::Result<()> {
    #[cfg(test)]
    super::probe::alive()?;
    let uid = uid.unwrap_or(libc::uid_t::MAX);
    let gid = gid.unwrap_or(libc::gid_t::MAX);
    // SAFETY: `fd` is open for the call.
    check(unsafe { libc::fchown(fd.as_raw_fd(), uid, gid) }).map(drop)
}

/// The effective user id: owners are given only when it is root's.
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// `flock(2)` with `LOCK_EX`, not waiting unless `wait`; a signal while
/// waiting does not end the wait.
pub fn flock(fd: BorrowedFd<'_>, wait: bool) -> io::Result<()> {
    let op = if wait {
        libc::LOCK_EX
    } else {
        libc::LOCK_EX | libc::LOCK_NB
    };
    loop {
        // SAFETY: `fd` is open for the call.
        match check(unsafe { libc::flock(fd.as_raw_fd(), op) }) {
            Err(err) if err.raw_os_error() == Some(libc::EINTR) => continue,
            other => return other.map(drop),
        }
    }
}

/// A write lock on the whole file as an open file description lock
/// (`F_OFD_SETLK`, `F_OFD_SETLKW`), not waiting unless `wait`.
pub fn ofd_lock(fd: BorrowedFd<'_>, wait: bool) -> io::Result<()> {
    // SAFETY: a zeroed flock is a valid value of this plain C struct.
    let mut lock: libc::flock = unsafe { std::mem::zeroed() };
    lock.l_type = libc::F_WRLCK as libc::c_short;
    lock.l_whence = libc::SEEK_SET as libc::c_short;
    lock.l_start = 0;
    lock.l_len = 0; // to the end, however long the file grows
    lock.l_pid = 0; // OFD locks require 0
    let cmd = if wait {
        libc::F_OFD_SETLKW
    } else {
        libc::F_OFD_SETLK
    };
    loop {
        // SAFETY: `lock` is a valid flock that outlives the call; `fd` is
        // open for the call.
        match check(unsafe { libc::fcntl(fd.as_raw_fd(), cmd, &lock as *const libc::flock) }) {
            Err(err) if err.raw_os_error() == Some(libc::EINTR) => continue,
            other => return other.map(drop),
        }
    }
}

/// The names in the directory `dir` (without `.` and `..`), listed
/// through a descriptor of its own so that `dir`'s position is not moved.
pub fn list(dir: BorrowedFd<'_>) -> io::Result<Vec<OsString>> {
    let fd = open_at(
        dir,
        OsStr::new("."),
        libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
        0,
    )?;
    let raw = fd.into_raw_fd();
    // SAFETY: `raw` is an open directory descriptor we own; fdopendir
    // takes it over on success.
    let stream = unsafe { libc::fdopendir(raw) };
    if stream.is_null() {
        let err = io::Error::last_os_error();
        // SAFETY: fdopendir failed, so `raw` is still ours to close.
        drop(unsafe { OwnedFd::from_raw_fd(raw) });
        return Err(err);
    }
    let mut names = Vec::new();
    let result = loop {
        // SAFETY: errno is thread-local; readdir reports an error only
        // through it, so it is cleared first.
        unsafe { *libc::__errno_location() = 0 };
        // SAFETY: `stream` is a valid directory stream until closedir.
        let entry = unsafe { libc::readdir(stream) };
        if entry.is_null() {
            let err = io::Error::last_os_error();
            break match err.raw_os_error() {
                Some(0) | None => Ok(()),
                Some(_) => Err(err),
            };
        }
        // SAFETY: readdir returned a valid entry whose d_name is
        // NUL-terminated, valid until the next readdir on `stream`.
        let name = unsafe { CStr::from_ptr((*entry).d_name.as_ptr()) }.to_bytes();
        if name != b"." && name != b".." {
            names.push(OsString::from_vec(name.to_vec()));
        }
    };
    // SAFETY: `stream` is valid and closed once; it closes `raw`.
    unsafe { libc::closedir(stream) };
    result.map(|()| names)
}

const CAPABILITY: &CStr = c"security.capability";

/// The file capabilities of the file open as `fd` (`security.capability`,
/// which chown(2) clears), if it has any.
pub fn file_capabilities(fd: BorrowedFd<'_>) -> Option<Vec<u8>> {
    xattr(fd, CAPABILITY)
}

/// Gives the file open as `fd` the file capabilities `value` (as
/// [`file_capabilities`] read them).
pub fn set_file_capabilities(fd: BorrowedFd<'_>, value: &[u8]) -> io::Result<()> {
    set_xattr(fd, CAPABILITY, value)
}

/// The extended attribute `name` of the file open as `fd`, if it has one
/// (and it is at most 64 KiB, as every attribute ral keeps is).
pub fn xattr(fd: BorrowedFd<'_>, name: &CStr) -> Option<Vec<u8>> {
    let mut buf = vec![0u8; 256];
    loop {
        // SAFETY: `buf` has room for `buf.len()` bytes; the attribute name
        // is NUL-terminated; `fd` is open for the call.
        let got = unsafe {
            libc::fgetxattr(
                fd.as_raw_fd(),
                name.as_ptr(),
                buf.as_mut_ptr().cast(),
                buf.len(),
            )
        };
        if got >= 0 {
            buf.truncate(got.unsigned_abs());
            return Some(buf);
        }
        let err = io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::ERANGE) || buf.len() >= 1 << 16 {
            return None;
        }
        buf.resize(buf.len() * 4, 0);
    }
}

/// Gives the file open as `fd` the extended attribute `name`.
pub fn set_xattr(fd: BorrowedFd<'_>, name: &CStr, value: &[u8]) -> io::Result<()> {
    #[cfg(test)]
    super::probe::alive()?;
    // SAFETY: `value` is valid for `value.len()` bytes; the attribute name
    // is NUL-terminated; `fd` is open for the call.
    check(unsafe {
        libc::fsetxattr(
            fd.as_raw_fd(),
            name.as_ptr(),
            value.as_ptr().cast(),
            value.len(),
            0,
        )
    })
    .map(drop)
}

/// The type bits (`st_mode & S_IFMT`) of `name`, a link not followed.
pub fn file_type_at(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<u32> {
    lstat_at(dir, name).map(|info| info.mode() & libc::S_IFMT)
}

/// `symlinkat(2)`: makes `name` in `dir` a link to `target`.
pub fn symlink_at(target: &[u8], dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<()> {
    #[cfg(test)]
    super::probe::alive()?;
    let target = c_name(OsStr::from_bytes(target))?;
    let name = c_name(name)?;
    // SAFETY: both strings are NUL-terminated; `dir` is open for the call.
    check(unsafe { libc::symlinkat(target.as_ptr(), dir.as_raw_fd(), name.as_ptr()) }).map(drop)
}

/// `fchownat(2)` of `name` itself (a link is not followed); `None` leaves
/// that id as it is.
pub fn lchown_at(
    dir: BorrowedFd<'_>,
    name: &OsStr,
    uid: Option<u32>,
    gid: Option<u32>,
) -> io::Result<()> {
    #[cfg(test)]
    super::probe::alive()?;
    let name = c_name(name)?;
    let uid = uid.unwrap_or(libc::uid_t::MAX);
    let gid = gid.unwrap_or(libc::gid_t::MAX);
    // SAFETY: `name` is NUL-terminated; `dir` is open for the call.
    check(unsafe {
        libc::fchownat(
            dir.as_raw_fd(),
            name.as_ptr(),
            uid,
            gid,
            libc::AT_SYMLINK_NOFOLLOW,
        )
    })
    .map(drop)
}

/// The effective user and group ids.
pub fn effective_ids() -> (u32, u32) {
    // SAFETY: geteuid and getegid have no preconditions and cannot fail.
    unsafe { (libc::geteuid(), libc::getegid()) }
}

/// Why no mount id could be read: the callers refuse what they cannot
/// tell is not a mount point.
const NO_MOUNT_ID: &str = "the kernel tells no mount ids here (statx's STATX_MNT_ID needs \
     Linux 5.8, and /proc/self/fdinfo a mounted /proc), so mount points cannot be told";

/// `statx(2)` of `name` in `dir` (`""` with `AT_EMPTY_PATH`: `dir`
/// itself), never triggering an automount.
fn statx_at(
    dir: BorrowedFd<'_>,
    name: &CStr,
    flags: libc::c_int,
    mask: libc::c_uint,
) -> io::Result<libc::statx> {
    let mut raw = MaybeUninit::<libc::statx>::uninit();
    // SAFETY: `raw` has room for a statx; `name` is NUL-terminated; `dir`
    // is open for the call.
    check(unsafe {
        libc::statx(
            dir.as_raw_fd(),
            name.as_ptr(),
            flags | libc::AT_NO_AUTOMOUNT,
            mask,
            raw.as_mut_ptr(),
        )
    })?;
    // SAFETY: statx succeeded, so it filled the whole structure (the
    // fields `stx_mask` does not name hold zeros or defaults).
    Ok(unsafe { raw.assume_init() })
}

/// A statx refused for what it is, not for its file: no such system call
/// (before Linux 4.11), or a seccomp filter that does not know it.
fn no_statx(err: &io::Error) -> bool {
    matches!(err.raw_os_error(), Some(libc::ENOSYS | libc::EPERM))
}

/// Whether what is open as `fd` lies on another mount than `parent`.
pub fn on_other_mount(fd: BorrowedFd<'_>, parent: BorrowedFd<'_>) -> io::Result<bool> {
    Ok(mount_id(fd)? != mount_id(parent)?)
}

/// The id of the mount that the file or directory open as `fd` lies on:
/// statx's `STATX_MNT_ID` (Linux 5.8), else the `mnt_id` of
/// `/proc/self/fdinfo` (Linux 3.15); an error when neither tells it.
pub fn mount_id(fd: BorrowedFd<'_>) -> io::Result<u64> {
    match statx_at(fd, c"", libc::AT_EMPTY_PATH, libc::STATX_MNT_ID) {
        Ok(raw) if raw.stx_mask & libc::STATX_MNT_ID != 0 => Ok(raw.stx_mnt_id),
        Ok(_) => fdinfo_mount_id(fd),
        Err(err) if no_statx(&err) => fdinfo_mount_id(fd),
        Err(err) => Err(err),
    }
}

/// The type bits (`st_mode & S_IFMT`) of `name` in `dir`, a link not
/// followed, and the id of the mount it lies on: for a mount point, the
/// mount on it (whose root it is), not the mount of `dir`.
pub fn kind_and_mount_at(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<(u32, u64)> {
    let c = c_name(name)?;
    let mask = libc::STATX_TYPE | libc::STATX_MNT_ID;
    match statx_at(dir, &c, libc::AT_SYMLINK_NOFOLLOW, mask) {
        Ok(raw) => {
            let kind = u32::from(raw.stx_mode) & libc::S_IFMT;
            match raw.stx_mask & libc::STATX_MNT_ID {
                0 => Ok((kind, opened_mount_id(dir, name)?)),
                _ => Ok((kind, raw.stx_mnt_id)),
            }
        }
        Err(err) if no_statx(&err) => Ok((file_type_at(dir, name)?, opened_mount_id(dir, name)?)),
        Err(err) => Err(err),
    }
}

/// Whether `name` in `dir` is a mount point: something is mounted on it,
/// so that it lies on another mount than `dir`.
pub fn is_mount_point_at(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<bool> {
    Ok(kind_and_mount_at(dir, name)?.1 != mount_id(dir)?)
}

/// The mount id of `name` in `dir`, opened as a path only (a link not
/// followed), from `/proc/self/fdinfo`.
pub(super) fn opened_mount_id(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<u64> {
    let fd = open_at(
        dir,
        name,
        libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        0,
    )?;
    fdinfo_mount_id(fd.as_fd())
}

/// The `mnt_id` that `/proc/self/fdinfo` shows for `fd`.
pub(super) fn fdinfo_mount_id(fd: BorrowedFd<'_>) -> io::Result<u64> {
    let unknown = || io::Error::new(io::ErrorKind::Unsupported, NO_MOUNT_ID);
    let text = std::fs::read_to_string(format!("/proc/self/fdinfo/{}", fd.as_raw_fd()))
        .map_err(|_| unknown())?;
    text.lines()
        .find_map(|line| line.strip_prefix("mnt_id:"))
        .and_then(|id| id.trim().parse().ok())
        .ok_or_else(unknown)
}

/// What [`remove_tree`] refused: the tree is, or holds, a mount point,
/// which a removal never crosses into.
#[derive(Debug)]
pub struct MountInTree {
    /// The mount point below the tree's top (empty: the top itself).
    pub below: PathBuf,
    /// Found while removing (mounted after the check that found none):
    /// what the removal reached before it is gone.
    pub removing: bool,
}

impl fmt::Display for MountInTree {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.below.as_os_str().is_empty() {
            f.write_str("it is a mount point")?;
        } else {
            let below = self.below.to_string_lossy();
            write!(f, "it holds the mount point {}", quoted(&below))?;
        }
        f.write_str(", and a removal never crosses into another mount: ")?;
        f.write_str(match self.removing {
            false => "nothing was removed",
            true => {
                "it was mounted while the tree was being removed, and the removal stopped there"
            }
        })
    }
}

impl std::error::Error for MountInTree {}

/// Removes the directory `name` in `dir` with everything in it, each
/// directory opened below the one before it without following a link,
/// so that no link in the tree is followed (as Python's `shutil.rmtree`
/// with a `dir_fd`); an entry gone meanwhile is no error. It never
/// crosses into another mount: a tree that is or holds a mount point is
/// refused whole ([`MountInTree`]) before anything goes.
pub fn remove_tree(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<()> {
    for removing in [false, true] {
        if let Some(below) = walk_tree(dir, name, removing)? {
            return Err(io::Error::other(MountInTree { below, removing }));
        }
    }
    Ok(())
}

/// The first mount point in the tree of the directory `name` in `dir`
/// (the top included), as its path below the top; `None` when the whole
/// tree lies on the mount of `dir`.
pub fn find_mount(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<Option<PathBuf>> {
    walk_tree(dir, name, false)
}

/// Walks the tree of the directory `name` in `dir` depth first, each
/// directory opened below the one before it without following a link;
/// stops at the first entry on another mount than `dir` and returns its
/// path below the top. When `remove`, each entry goes once looked at (a
/// directory once emptied).
fn walk_tree(dir: BorrowedFd<'_>, name: &OsStr, remove: bool) -> io::Result<Option<PathBuf>> {
    /// A directory being walked: its descriptor, its name in the one
    /// above, and the entries still to look at.
    struct Level {
        fd: OwnedFd,
        name: OsString,
        left: Vec<OsString>,
    }
    let mount = mount_id(dir)?;
    // The directory `name` in `parent`, or `None` when what was opened
    // lies on another mount: checked on the descriptor itself, so that
    // nothing mounted between a look and the open is walked into.
    let open = |parent: BorrowedFd<'_>, name: &OsStr| -> io::Result<Option<Level>> {
        let fd = open_at(parent, name, DIR_FLAGS, 0)?;
        if mount_id(fd.as_fd())? != mount {
            return Ok(None);
        }
        let left = list(fd.as_fd())?;
        Ok(Some(Level {
            fd,
            name: name.to_owned(),
            left,
        }))
    };
    let below = |levels: &[Level], entry: &OsStr| -> PathBuf {
        let mut path: PathBuf = levels.iter().skip(1).map(|level| &level.name).collect();
        path.push(entry);
        path
    };
    // A loop over a stack of levels, not a recursion: a tree of any depth
    // is walked without running out of stack (a thread's is small).
    let Some(top) = open(dir, name)? else {
        return Ok(Some(PathBuf::new()));
    };
    let mut levels = vec![top];
    while let Some(level) = levels.last_mut() {
        let Some(entry) = level.left.pop() else {
            let done = levels.pop().expect("a level is there");
            if remove {
                let parent = levels.last().map_or(dir, |up| up.fd.as_fd());
                rmdir_at(parent, &done.name)?;
            }
            continue;
        };
        let (kind, on) = match kind_and_mount_at(level.fd.as_fd(), &entry) {
            Ok(found) => found,
            Err(err) if err.raw_os_error() == Some(libc::ENOENT) => continue,
            Err(err) => return Err(err),
        };
        if on != mount {
            return Ok(Some(below(&levels, &entry)));
        }
        if kind == libc::S_IFDIR {
            match open(level.fd.as_fd(), &entry) {
                Ok(Some(next)) => levels.push(next),
                Ok(None) => return Ok(Some(below(&levels, &entry))),
                Err(err) if !remove && err.raw_os_error() == Some(libc::ENOENT) => {}
                Err(err) => return Err(err),
            }
        } else if remove {
            match unlink_at(level.fd.as_fd(), &entry) {
                Err(err) if err.raw_os_error() != Some(libc::ENOENT) => return Err(err),
                _ => {}
            }
        }
    }
    Ok(None)
}
