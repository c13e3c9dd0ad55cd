//! The system calls the files toolkit makes, as safe functions on
//! rustix: each names its path relative to an open directory (the `*at`
//! calls), so that the walk below the root never follows a path from `/`
//! again. The mount an entry lies on is told by its mount id, so that a
//! removal never crosses into another mount ([`remove_tree`]) and a mount
//! point is never taken for a file of the root. The store of the host
//! makes its calls here too. The one `unsafe` left is the open file
//! description lock, which rustix does not offer ([`ofd_lock`]); the
//! test-only hooks of `probe` live here too (compiled only for tests).

use std::ffi::{CStr, CString, OsStr, OsString};
use std::fmt;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::PathBuf;

use rustix::fs::{AtFlags, Dir, Gid, Statx, StatxFlags, Uid, XattrFlags};
pub use rustix::fs::{FlockOperation, Mode, OFlags};
use rustix::io::Errno;

use super::stat::Stat;
use crate::text::quoted;

/// Opens a directory of the walk: never through a link.
pub const DIR_FLAGS: OFlags = OFlags::RDONLY
    .union(OFlags::DIRECTORY)
    .union(OFlags::NOFOLLOW)
    .union(OFlags::CLOEXEC);
/// Opens a file to read: never through a link, never blocking on a FIFO.
pub const READ_FLAGS: OFlags = OFlags::RDONLY
    .union(OFlags::NOFOLLOW)
    .union(OFlags::NONBLOCK)
    .union(OFlags::CLOEXEC);

/// `name` as the C string the calls take; a NUL in it is refused with a
/// message of ours (rustix would only say EINVAL).
fn c_name(name: &OsStr) -> io::Result<CString> {
    CString::new(name.as_bytes()).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "the name holds a NUL character",
        )
    })
}

/// An owner or group to give: `None`, and the id -1 that means the same
/// to chown(2), leave it as it is.
fn owner(uid: Option<u32>, gid: Option<u32>) -> (Option<Uid>, Option<Gid>) {
    (
        uid.filter(|&id| id != u32::MAX).map(Uid::from_raw),
        gid.filter(|&id| id != u32::MAX).map(Gid::from_raw),
    )
}

/// `openat(2)`.
pub fn open_at(
    dir: BorrowedFd<'_>,
    name: &OsStr,
    flags: OFlags,
    mode: Mode,
) -> io::Result<OwnedFd> {
    #[cfg(test)]
    if flags.contains(OFlags::CREATE) {
        super::probe::alive()?;
    }
    let name = c_name(name)?;
    Ok(rustix::fs::openat(dir, name.as_c_str(), flags, mode)?)
}

/// `open(2)` of a path (the root directory, given by the caller).
pub fn open_path(path: &OsStr, flags: OFlags) -> io::Result<OwnedFd> {
    let path = c_name(path)?;
    Ok(rustix::fs::open(path.as_c_str(), flags, Mode::empty())?)
}

/// `readlinkat(2)`: the target of the link `name`, however long.
pub fn read_link_at(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<Vec<u8>> {
    let name = c_name(name)?;
    Ok(rustix::fs::readlinkat(dir, name.as_c_str(), Vec::new())?.into_bytes())
}

/// `fstatat(2)` of `name`, not following a link.
pub fn lstat_at(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<Stat> {
    let name = c_name(name)?;
    let raw = rustix::fs::statat(dir, name.as_c_str(), AtFlags::SYMLINK_NOFOLLOW)?;
    Ok(Stat::from_raw(raw))
}

/// `fstat(2)`.
pub fn fstat(fd: BorrowedFd<'_>) -> io::Result<Stat> {
    Ok(Stat::from_raw(rustix::fs::fstat(fd)?))
}

/// `mkdirat(2)`.
pub fn mkdir_at(dir: BorrowedFd<'_>, name: &OsStr, mode: Mode) -> io::Result<()> {
    #[cfg(test)]
    super::probe::alive()?;
    let name = c_name(name)?;
    rustix::fs::mkdirat(dir, name.as_c_str(), mode)?;
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
    rustix::fs::renameat(from_dir, from_c.as_c_str(), to_dir, to_c.as_c_str())?;
    #[cfg(test)]
    super::probe::renamed(from_dir, from.as_ref(), to_dir, to.as_ref());
    Ok(())
}

/// `linkat(2)`: a second name `to` in `dir` for the file `from` in it (a
/// link `from` is not followed); EEXIST when `to` is taken.
pub fn link_at(dir: BorrowedFd<'_>, from: &OsStr, to: &OsStr) -> io::Result<()> {
    let from = c_name(from)?;
    let to = c_name(to)?;
    Ok(rustix::fs::linkat(
        dir,
        from.as_c_str(),
        dir,
        to.as_c_str(),
        AtFlags::empty(),
    )?)
}

/// `unlinkat(2)` of a file (never a directory).
pub fn unlink_at(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<()> {
    #[cfg(test)]
    super::probe::alive()?;
    let name = c_name(name)?;
    Ok(rustix::fs::unlinkat(
        dir,
        name.as_c_str(),
        AtFlags::empty(),
    )?)
}

/// `unlinkat(2)` of an empty directory.
pub fn rmdir_at(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<()> {
    #[cfg(test)]
    super::probe::alive()?;
    let name = c_name(name)?;
    Ok(rustix::fs::unlinkat(
        dir,
        name.as_c_str(),
        AtFlags::REMOVEDIR,
    )?)
}

/// `fsync(2)`.
pub fn fsync(fd: BorrowedFd<'_>) -> io::Result<()> {
    #[cfg(test)]
    super::probe::alive()?;
    rustix::fs::fsync(fd)?;
    #[cfg(test)]
    super::probe::synced(fd, false);
    Ok(())
}

/// `syncfs(2)`: writes back everything of the file system holding `fd`
/// and waits for it (reporting a write-back error since Linux 5.8).
pub fn syncfs(fd: BorrowedFd<'_>) -> io::Result<()> {
    #[cfg(test)]
    super::probe::alive()?;
    rustix::fs::syncfs(fd)?;
    #[cfg(test)]
    super::probe::synced(fd, true);
    Ok(())
}

/// `fchmod(2)`.
pub fn fchmod(fd: BorrowedFd<'_>, mode: Mode) -> io::Result<()> {
    #[cfg(test)]
    super::probe::alive()?;
    Ok(rustix::fs::fchmod(fd, mode)?)
}

/// `fchown(2)`; `None` leaves that id as it is.
pub fn fchown(fd: BorrowedFd<'_>, uid: Option<u32>, gid: Option<u32>) -> io::Result<()> {
    #[cfg(test)]
    super::probe::alive()?;
    let (uid, gid) = owner(uid, gid);
    Ok(rustix::fs::fchown(fd, uid, gid)?)
}

/// The effective user id: owners are given only when it is root's.
pub fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// `flock(2)` with `LOCK_EX`, not waiting unless `wait`; a signal while
/// waiting does not end the wait.
pub fn flock(fd: BorrowedFd<'_>, wait: bool) -> io::Result<()> {
    let operation = match wait {
        true => FlockOperation::LockExclusive,
        false => FlockOperation::NonBlockingLockExclusive,
    };
    flock_as(fd, operation)
}

/// `flock(2)` with any operation (a shared lock, an unlock), retried when
/// a signal interrupts it.
pub fn flock_as(fd: BorrowedFd<'_>, operation: FlockOperation) -> io::Result<()> {
    loop {
        match rustix::fs::flock(fd, operation) {
            Err(Errno::INTR) => continue,
            other => return Ok(other?),
        }
    }
}

/// A write lock on the whole file as an open file description lock
/// (`F_OFD_SETLK`, `F_OFD_SETLKW`), not waiting unless `wait`.
pub fn ofd_lock(fd: BorrowedFd<'_>, wait: bool) -> io::Result<()> {
    let lock = libc::flock {
        l_type: libc::F_WRLCK as libc::c_short,
        l_whence: libc::SEEK_SET as libc::c_short,
        l_start: 0,
        l_len: 0, // to the end, however long the file grows
        l_pid: 0, // OFD locks require 0
    };
    let cmd = if wait {
        libc::F_OFD_SETLKW
    } else {
        libc::F_OFD_SETLK
    };
    loop {
        // rustix's fcntl_lock takes only the per-process F_SETLK, whose
        // lock any close of the file by this process drops; the lock the
        // system's tools share is the open file description's.
        // SAFETY: `lock` is a valid flock that outlives the call; `fd` is
        // open for the call.
        let done = unsafe { libc::fcntl(fd.as_raw_fd(), cmd, &lock as *const libc::flock) };
        if done == 0 {
            return Ok(());
        }
        let err = io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::EINTR) {
            return Err(err);
        }
    }
}

/// The names in the directory `dir` (without `.` and `..`), listed
/// through a descriptor of its own so that `dir`'s position is not moved.
pub fn list(dir: BorrowedFd<'_>) -> io::Result<Vec<OsString>> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let fd = open_at(dir, OsStr::new("."), flags, Mode::empty())?;
    let mut stream = Dir::new(fd)?;
    let mut names = Vec::new();
    while let Some(entry) = stream.read() {
        let name = entry?.file_name().to_bytes().to_vec();
        if name != b"." && name != b".." {
            names.push(OsString::from_vec(name));
        }
    }
    Ok(names)
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
        match rustix::fs::fgetxattr(fd, name, &mut buf[..]) {
            Ok(got) => {
                buf.truncate(got);
                return Some(buf);
            }
            Err(Errno::RANGE) if buf.len() < 1 << 16 => buf.resize(buf.len() * 4, 0),
            Err(_) => return None,
        }
    }
}

/// Gives the file open as `fd` the extended attribute `name`.
pub fn set_xattr(fd: BorrowedFd<'_>, name: &CStr, value: &[u8]) -> io::Result<()> {
    #[cfg(test)]
    super::probe::alive()?;
    Ok(rustix::fs::fsetxattr(fd, name, value, XattrFlags::empty())?)
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
    Ok(rustix::fs::symlinkat(
        target.as_c_str(),
        dir,
        name.as_c_str(),
    )?)
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
    let (uid, gid) = owner(uid, gid);
    let flags = AtFlags::SYMLINK_NOFOLLOW;
    Ok(rustix::fs::chownat(dir, name.as_c_str(), uid, gid, flags)?)
}

/// The effective user and group ids.
pub fn effective_ids() -> (u32, u32) {
    let (uid, gid) = (rustix::process::geteuid(), rustix::process::getegid());
    (uid.as_raw(), gid.as_raw())
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
    flags: AtFlags,
    mask: StatxFlags,
) -> io::Result<Statx> {
    let flags = flags | AtFlags::NO_AUTOMOUNT;
    Ok(rustix::fs::statx(dir, name, flags, mask)?)
}

/// Whether statx filled in the mount id (Linux 5.8 and later).
fn has_mount_id(raw: &Statx) -> bool {
    StatxFlags::from_bits_retain(raw.stx_mask).contains(StatxFlags::MNT_ID)
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
    match statx_at(fd, c"", AtFlags::EMPTY_PATH, StatxFlags::MNT_ID) {
        Ok(raw) if has_mount_id(&raw) => Ok(raw.stx_mnt_id),
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
    let mask = StatxFlags::TYPE | StatxFlags::MNT_ID;
    match statx_at(dir, &c, AtFlags::SYMLINK_NOFOLLOW, mask) {
        Ok(raw) => {
            let kind = u32::from(raw.stx_mode) & libc::S_IFMT;
            match has_mount_id(&raw) {
                false => Ok((kind, opened_mount_id(dir, name)?)),
                true => Ok((kind, raw.stx_mnt_id)),
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
    let flags = OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd = open_at(dir, name, flags, Mode::empty())?;
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
        let fd = open_at(parent, name, DIR_FLAGS, Mode::empty())?;
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
