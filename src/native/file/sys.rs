//! The system calls `file::file` makes on entries the SDK's toolkit does
//! not make for it (links made, modes and owners of directories and
//! links, trees removed), as safe functions: each names its entry
//! relative to an open directory, never following a link in it. The only
//! `unsafe` of the provider lives here.

use std::ffi::{CStr, CString, OsStr, OsString};
use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, IntoRawFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};

fn c_name(name: &[u8]) -> io::Result<CString> {
    CString::new(name).map_err(|_| {
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

/// `openat(2)` of `name`, never through a link (`O_NOFOLLOW` and
/// `O_CLOEXEC` are added to `flags`).
pub fn open_at(dir: BorrowedFd<'_>, name: &OsStr, flags: libc::c_int) -> io::Result<OwnedFd> {
    let name = c_name(name.as_bytes())?;
    let flags = flags | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    // SAFETY: `name` is NUL-terminated and outlives the call; `dir` is an
    // open descriptor borrowed for the call.
    let fd = check(unsafe { libc::openat(dir.as_raw_fd(), name.as_ptr(), flags) })?;
    // SAFETY: openat returned a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// The type bits (`st_mode & S_IFMT`) of `name`, a link not followed.
pub fn file_type_at(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<u32> {
    let name = c_name(name.as_bytes())?;
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
    Ok(unsafe { raw.assume_init() }.st_mode & libc::S_IFMT)
}

/// `symlinkat(2)`: makes `name` in `dir` a link to `target`.
pub fn symlink_at(target: &[u8], dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<()> {
    let target = c_name(target)?;
    let name = c_name(name.as_bytes())?;
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
    let name = c_name(name.as_bytes())?;
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

/// `fchown(2)`; `None` leaves that id as it is.
pub fn fchown(fd: BorrowedFd<'_>, uid: Option<u32>, gid: Option<u32>) -> io::Result<()> {
    let uid = uid.unwrap_or(libc::uid_t::MAX);
    let gid = gid.unwrap_or(libc::gid_t::MAX);
    // SAFETY: `fd` is open for the call.
    check(unsafe { libc::fchown(fd.as_raw_fd(), uid, gid) }).map(drop)
}

/// `fchmod(2)`.
pub fn fchmod(fd: BorrowedFd<'_>, mode: u32) -> io::Result<()> {
    // SAFETY: `fd` is open for the call.
    check(unsafe { libc::fchmod(fd.as_raw_fd(), mode) }).map(drop)
}

/// `mkdirat(2)`.
pub fn mkdir_at(dir: BorrowedFd<'_>, name: &OsStr, mode: u32) -> io::Result<()> {
    let name = c_name(name.as_bytes())?;
    // SAFETY: `name` is NUL-terminated; `dir` is open for the call.
    check(unsafe { libc::mkdirat(dir.as_raw_fd(), name.as_ptr(), mode) }).map(drop)
}

/// `unlinkat(2)`: of a directory (which must be empty) when `directory`.
pub fn unlink_at(dir: BorrowedFd<'_>, name: &OsStr, directory: bool) -> io::Result<()> {
    let name = c_name(name.as_bytes())?;
    let flags = if directory { libc::AT_REMOVEDIR } else { 0 };
    // SAFETY: `name` is NUL-terminated; `dir` is open for the call.
    check(unsafe { libc::unlinkat(dir.as_raw_fd(), name.as_ptr(), flags) }).map(drop)
}

/// `renameat(2)` within one directory.
pub fn rename_at(dir: BorrowedFd<'_>, from: &OsStr, to: &OsStr) -> io::Result<()> {
    let from = c_name(from.as_bytes())?;
    let to = c_name(to.as_bytes())?;
    // SAFETY: both names are NUL-terminated; `dir` is open for the call.
    check(unsafe { libc::renameat(dir.as_raw_fd(), from.as_ptr(), dir.as_raw_fd(), to.as_ptr()) })
        .map(drop)
}

/// `readlinkat(2)`: the bytes of the link `name`.
pub fn read_link_at(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<Vec<u8>> {
    let name = c_name(name.as_bytes())?;
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

/// The names in the directory open as `dir` (without `.` and `..`), as
/// bytes: a tree removed may hold names that are not UTF-8.
pub fn list(dir: BorrowedFd<'_>) -> io::Result<Vec<OsString>> {
    let fd = open_at(dir, OsStr::new("."), libc::O_RDONLY | libc::O_DIRECTORY)?;
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

/// The effective user and group ids.
pub fn effective_ids() -> (u32, u32) {
    // SAFETY: geteuid and getegid have no preconditions and cannot fail.
    unsafe { (libc::geteuid(), libc::getegid()) }
}

/// Removes the directory `name` in `dir` with everything in it, each
/// directory opened below the one before it without following a link,
/// so that no link in the tree is followed (as Python's `shutil.rmtree`
/// with a `dir_fd`).
pub fn remove_tree(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<()> {
    {
        let sub = open_at(dir, name, libc::O_RDONLY | libc::O_DIRECTORY)?;
        for entry in list(sub.as_fd())? {
            let kind = match file_type_at(sub.as_fd(), &entry) {
                Ok(kind) => kind,
                Err(err) if err.raw_os_error() == Some(libc::ENOENT) => continue,
                Err(err) => return Err(err),
            };
            if kind == libc::S_IFDIR {
                remove_tree(sub.as_fd(), &entry)?;
            } else {
                match unlink_at(sub.as_fd(), &entry, false) {
                    Err(err) if err.raw_os_error() != Some(libc::ENOENT) => return Err(err),
                    _ => {}
                }
            }
        }
    }
    unlink_at(dir, name, true)
}
