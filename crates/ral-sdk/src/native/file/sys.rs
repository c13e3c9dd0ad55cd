//! The system calls `file::file` makes on entries, as the files toolkit's
//! one module of them (`sdk::files::sys`) offers them, in the forms this
//! provider calls: each names its entry relative to an open directory,
//! never following a link in it.

use std::ffi::OsStr;
use std::io;
use std::os::fd::{BorrowedFd, OwnedFd};

use crate::files::sys;
use crate::files::sys::Mode;
pub use crate::files::sys::{
    effective_ids, fchown, file_capabilities, file_type_at, find_mount, fstat, is_mount_point_at,
    lchown_at, list, on_other_mount, read_link_at, remove_tree, set_file_capabilities, symlink_at,
    OFlags,
};

/// `openat(2)` of `name`, never through a link (`O_NOFOLLOW` and
/// `O_CLOEXEC` are added to `flags`).
pub fn open_at(dir: BorrowedFd<'_>, name: &OsStr, flags: OFlags) -> io::Result<OwnedFd> {
    let flags = flags | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    sys::open_at(dir, name, flags, Mode::empty())
}

/// `mkdirat(2)`, with the permission bits `mode`.
pub fn mkdir_at(dir: BorrowedFd<'_>, name: &OsStr, mode: u32) -> io::Result<()> {
    sys::mkdir_at(dir, name, Mode::from_raw_mode(mode))
}

/// `fchmod(2)`, with the permission bits (and setuid, setgid, sticky)
/// `mode`.
pub fn fchmod(fd: BorrowedFd<'_>, mode: u32) -> io::Result<()> {
    sys::fchmod(fd, Mode::from_raw_mode(mode))
}

/// `unlinkat(2)`: of a directory (which must be empty) when `directory`.
pub fn unlink_at(dir: BorrowedFd<'_>, name: &OsStr, directory: bool) -> io::Result<()> {
    match directory {
        true => sys::rmdir_at(dir, name),
        false => sys::unlink_at(dir, name),
    }
}

/// `renameat(2)` within one directory.
pub fn rename_at(dir: BorrowedFd<'_>, from: &OsStr, to: &OsStr) -> io::Result<()> {
    sys::rename_at(dir, from, dir, to)
}
