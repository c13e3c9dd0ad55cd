//! The locks every writer of some files takes: lckpwdf's lock on
//! `etc/.pwd.lock` for the account files, an flock on `.NAME.ral-lock`
//! beside any other file, or an flock on a directory (for files that are
//! resources themselves). A lock waits as long as the call allows, saying
//! who holds it, and is let go when dropped.
//!
//! ral runs the bundled providers in its own process, where parallel
//! tasks are threads, so a lock must exclude two threads of one process
//! as well as two processes. Every lock therefore opens its file anew (a
//! new open file description: two threads never share one) and takes a
//! lock that belongs to that description: flock, and for lckpwdf's lock an
//! OFD lock (`F_OFD_SETLK`), which conflicts with the classic POSIX record
//! locks that lckpwdf(3), useradd and the Python toolkit take, but, unlike
//! them, is not shared by the threads of one process.

use std::collections::HashMap;
use std::fs;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::names::{JOURNAL_TAG, LOCK_TAG};
use super::root::{Dir, Root, Target};
use super::stat::Stat;
use super::sys::{self, Mode, OFlags};
use crate::error::{CallError, CallResult};
use crate::text::quoted;
use crate::Call;

/// The edit a journal says is still to be finished, which a lock keeps
/// once read: for each file (its directory's path relative to the root,
/// and its name), the directory and the temporary file that replaces it.
pub(super) type Pending = HashMap<(String, String), (Dir, String)>;

/// Which kind of lock a [`Lock`] takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// flock(2) on a lock file.
    Flock,
    /// An OFD record lock on the whole file, as lckpwdf's.
    Record,
    /// flock(2) on the directory itself.
    Directory,
}

/// A lock guarding some files (see the module). Made unheld; [`acquire`]
/// takes it, dropping it lets go.
///
/// [`acquire`]: Lock::acquire
#[derive(Debug)]
pub struct Lock {
    dir: Dir,
    name: Option<String>,
    kind: Kind,
    held: Option<OwnedFd>,
    pub(super) pending: Option<Pending>,
}

impl Lock {
    /// An flock on the file `name` in `dir` (made when missing).
    pub fn named(dir: &Dir, name: &str) -> Lock {
        Lock::make(dir.clone(), Some(name.to_owned()), Kind::Flock)
    }

    /// The flock on `.NAME.ral-lock` beside `target`.
    pub fn beside(target: &Target) -> Lock {
        Lock::named(target.dir(), &format!(".{}{LOCK_TAG}", target.name()))
    }

    /// lckpwdf's lock, which guards passwd, shadow, group and gshadow:
    /// a write lock on the whole of `etc/.pwd.lock`.
    pub fn accounts(root: &Root) -> CallResult<Lock> {
        let etc = root.directory("etc", true, None)?;
        Ok(Lock::make(etc, Some(".pwd.lock".to_owned()), Kind::Record))
    }

    /// An flock on the directory `dir` itself; its edits are of one file
    /// each and keep no journal.
    pub fn of_directory(dir: &Dir) -> Lock {
        Lock::make(dir.clone(), None, Kind::Directory)
    }

    fn make(dir: Dir, name: Option<String>, kind: Kind) -> Lock {
        Lock {
            dir,
            name,
            kind,
            held: None,
            pending: None,
        }
    }

    /// The directory the lock is in (or on).
    pub fn dir(&self) -> &Dir {
        &self.dir
    }

    /// The lock file's path, or the directory's, for messages.
    pub fn show(&self) -> String {
        match &self.name {
            Some(name) => self.dir.show(name),
            None => self.dir.path().to_owned(),
        }
    }

    /// The journal's name, beside the lock file; `None` for a lock on a
    /// directory.
    pub fn journal(&self) -> Option<String> {
        self.name
            .as_ref()
            .map(|name| format!("{name}{JOURNAL_TAG}"))
    }

    /// True while the lock is held.
    pub fn is_held(&self) -> bool {
        self.held.is_some()
    }

    /// Takes the lock, waiting for it up to `call.lock_timeout`.
    pub fn acquire(&mut self, call: &Call) -> CallResult<()> {
        self.acquire_then(call, &mut || {})
    }

    /// [`acquire`](Lock::acquire), calling `before_wait` first when the
    /// lock must be waited for.
    pub(super) fn acquire_then(
        &mut self,
        call: &Call,
        before_wait: &mut dyn FnMut(),
    ) -> CallResult<()> {
        if self.held.is_some() {
            return Ok(());
        }
        let fd = self.open()?;
        let info = sys::fstat(fd.as_fd())
            .map_err(|err| CallError::io(&err, &format!("lock {}", quoted(&self.show()))))?;
        if self.name.is_some() && !info.is_file() {
            return Err(CallError::new(format!(
                "the lock file {} is not a regular file",
                quoted(&self.show())
            )));
        }
        match self.take(&fd, false) {
            Ok(()) => {
                self.held = Some(fd);
                Ok(())
            }
            Err(err) if is_busy(&err) => {
                before_wait();
                self.held = Some(self.wait(call, fd, &info)?);
                Ok(())
            }
            Err(err) => Err(CallError::io(
                &err,
                &format!("lock {}", quoted(&self.show())),
            )),
        }
    }

    /// Lets go of the lock (closing its own open file description).
    pub fn release(&mut self) {
        self.held = None;
    }

    /// The descriptor the lock is held on.
    pub(super) fn held_fd(&self) -> Option<&OwnedFd> {
        self.held.as_ref()
    }

    /// A new open file description of the lock's file: never a duplicate
    /// of another, so that the lock is this one's alone.
    fn open(&self) -> CallResult<OwnedFd> {
        match &self.name {
            // "." opened again: the Dir's own descriptor may be shared.
            None => sys::open_at(
                self.dir.as_fd(),
                ".".as_ref(),
                OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
                Mode::empty(),
            )
            .map_err(|err| CallError::io(&err, &format!("open {}", quoted(&self.show())))),
            Some(name) => self.dir.plain(name).and_then(|()| {
                sys::open_at(
                    self.dir.as_fd(),
                    name.as_ref(),
                    OFlags::RDWR
                        | OFlags::CREATE
                        | OFlags::NOFOLLOW
                        | OFlags::NONBLOCK
                        | OFlags::CLOEXEC,
                    Mode::from_raw_mode(0o600),
                )
                .map_err(|err| {
                    CallError::io(
                        &err,
                        &format!("open the lock file {}", quoted(&self.show())),
                    )
                })
            }),
        }
    }

    fn take(&self, fd: &OwnedFd, wait: bool) -> std::io::Result<()> {
        take(self.kind, fd, wait)
    }

    /// Waits for the lock another holds: a blocking lock on a thread of
    /// its own (so that the holder sees a waiter, as with lckpwdf), for at
    /// most the call's lock timeout, and never past its deadline. A wait given up leaves that thread
    /// blocked until the holder lets go; it then lets go at once.
    fn wait(&self, call: &Call, fd: OwnedFd, info: &Stat) -> CallResult<OwnedFd> {
        // Never past the call's deadline, which then fails the wait.
        let cut = call
            .deadline
            .as_ref()
            .map(|deadline| (deadline, deadline.left()))
            .filter(|(_, left)| *left < call.lock_timeout);
        let limit = cut.map_or(call.lock_timeout, |(_, left)| left);
        let holder = holder(info);
        call.log.info(&format!(
            "waiting up to {}s for the lock {}, held by {}",
            seconds(limit),
            quoted(&self.show()),
            holder.as_deref().unwrap_or("another process")
        ));
        let started = Instant::now();
        let got = if limit.is_zero() {
            None
        } else {
            self.wait_for(fd, limit)
        };
        match got {
            Some(Ok(fd)) => {
                call.log.debug(&format!(
                    "got the lock {} after {:.3}s",
                    quoted(&self.show()),
                    started.elapsed().as_secs_f64()
                ));
                Ok(fd)
            }
            Some(Err(err)) => Err(CallError::io(
                &err,
                &format!("lock {}", quoted(&self.show())),
            )),
            None => match cut {
                Some((deadline, _)) => Err(deadline.error()),
                None => {
                    let now = self::holder(info).or(holder);
                    Err(CallError::new(format!(
                        "timed out after {}s waiting for the lock {}, held by {}; nothing was \
                         changed",
                        seconds(limit),
                        quoted(&self.show()),
                        now.as_deref().unwrap_or("another process")
                    )))
                }
            },
        }
    }

    /// The lock within `limit`, an error, or `None` when it timed out.
    fn wait_for(&self, fd: OwnedFd, limit: Duration) -> Option<std::io::Result<OwnedFd>> {
        let kind = self.kind;
        let (send, receive) = mpsc::sync_channel(1);
        let waiter = std::thread::Builder::new()
            .name("ral-lock-wait".to_owned())
            .spawn(move || {
                let got = take(kind, &fd, true).map(|()| fd);
                // A receiver gone (the wait given up) drops the lock.
                let _ = send.send(got);
            });
        match waiter {
            Ok(_) => receive.recv_timeout(limit).ok(),
            // No thread to spare: poll, on a description of its own.
            Err(_) => match self.open() {
                Ok(fd) => poll(kind, fd, limit),
                Err(err) => Some(Err(std::io::Error::other(err.message))),
            },
        }
    }
}

/// Tries the lock now and then until `limit` has passed.
fn poll(kind: Kind, fd: OwnedFd, limit: Duration) -> Option<std::io::Result<OwnedFd>> {
    let started = Instant::now();
    let mut pause = Duration::from_millis(1);
    loop {
        match take(kind, &fd, false) {
            Ok(()) => return Some(Ok(fd)),
            Err(err) if !is_busy(&err) => return Some(Err(err)),
            Err(_) => {}
        }
        let left = limit.saturating_sub(started.elapsed());
        if left.is_zero() {
            return None;
        }
        std::thread::sleep(pause.min(left));
        pause = (pause * 2).min(Duration::from_millis(50));
    }
}

fn take(kind: Kind, fd: &OwnedFd, wait: bool) -> std::io::Result<()> {
    match kind {
        Kind::Record => sys::ofd_lock(fd.as_fd(), wait),
        Kind::Flock | Kind::Directory => sys::flock(fd.as_fd(), wait),
    }
}

fn is_busy(err: &std::io::Error) -> bool {
    matches!(err.raw_os_error(), Some(code) if code == libc::EAGAIN || code == libc::EACCES || code == libc::EWOULDBLOCK)
}

/// Seconds as Python's `%g` writes them (`15`, `0.5`, `1e-05`), as the
/// Python toolkit's messages do: six significant digits, without
/// trailing zeros, in exponent form when the exponent (after rounding to
/// six digits) is below -4 or above 5.
pub(super) fn seconds(duration: Duration) -> String {
    let value = duration.as_secs_f64();
    if value == 0.0 {
        return "0".to_owned();
    }
    // Rounded to six significant digits first: `1.23457e6`. Read from
    // Rust's exact decimal formatting, with no call into libm.
    let scientific = format!("{value:.5e}");
    let (mantissa, exponent) = scientific.split_once('e').unwrap_or((&scientific, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    if !(-4..6).contains(&exponent) {
        let sign = if exponent < 0 { '-' } else { '+' };
        return format!(
            "{}e{sign}{:02}",
            without_trailing_zeros(mantissa),
            exponent.abs()
        );
    }
    let decimals = usize::try_from(5 - exponent).unwrap_or(0);
    without_trailing_zeros(&format!("{value:.decimals$}")).to_owned()
}

/// `text`, a decimal number, without the zeros that end its fraction (and
/// without its point when nothing is left after it).
fn without_trailing_zeros(text: &str) -> &str {
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.')
    } else {
        text
    }
}

/// Who holds the lock on the file with status `info`, from /proc/locks:
/// `process PID (COMMAND)`, or `None` when that cannot be told. An OFD
/// lock names no process (its pid reads -1), so it is passed over.
fn holder(info: &Stat) -> Option<String> {
    let wanted = format!(
        "{:02x}:{:02x}:{}",
        libc::major(info.dev()),
        libc::minor(info.dev()),
        info.ino()
    );
    let locks = fs::read_to_string("/proc/locks").ok()?;
    for line in locks.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.len() < 6 || fields[1] == "->" || fields[5] != wanted {
            continue;
        }
        let pid = fields[4];
        if pid.starts_with('-') {
            continue;
        }
        return Some(match fs::read_to_string(format!("/proc/{pid}/comm")) {
            Ok(comm) => format!("process {pid} ({})", comm.trim()),
            Err(_) => format!("process {pid}"),
        });
    }
    None
}

#[cfg(test)]
mod poll_tests {
    //! `poll`, the wait used when no thread can be spared for a blocking
    //! lock: private, so tested here.

    use super::*;

    /// A new description of a file in `dir`, for reading and writing or
    /// for reading only.
    fn open(dir: &tempfile::TempDir, write: bool) -> OwnedFd {
        let path = dir.path().join("lock");
        fs::OpenOptions::new()
            .read(true)
            .write(write)
            .create(write)
            .truncate(false)
            .open(path)
            .unwrap()
            .into()
    }

    #[test]
    fn a_free_lock_is_taken() {
        let dir = tempfile::tempdir().unwrap();
        let got = poll(Kind::Flock, open(&dir, true), Duration::ZERO);
        assert!(matches!(got, Some(Ok(_))), "{got:?}");
    }

    #[test]
    fn a_lock_held_throughout_is_given_up_at_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        let holder = open(&dir, true);
        take(Kind::Flock, &holder, false).unwrap();
        let got = poll(Kind::Flock, open(&dir, true), Duration::from_millis(20));
        assert!(got.is_none(), "{got:?}");
    }

    #[test]
    fn an_error_other_than_busy_ends_the_wait_at_once() {
        let dir = tempfile::tempdir().unwrap();
        drop(open(&dir, true));
        // A write lock on a description open for reading only: EBADF,
        // which waiting longer never mends.
        let got = poll(Kind::Record, open(&dir, false), Duration::from_millis(20));
        let code = got.map(|got| got.err().and_then(|err| err.raw_os_error()));
        assert_eq!(code, Some(Some(libc::EBADF)));
    }
}
