//! One apply at a time: an exclusive flock on the database file itself,
//! opened without following a link, so that every path reaching the store
//! (a linked directory, a link to the file, a hard link) finds it taken.
//! The kernel lets go of it when the holder dies (so no stale lock can
//! exist). The holder's particulars are written into `STORE.lock` for
//! whoever finds the lock taken; one reaching the store by another name
//! learns the holder's process from the kernel's list of locks.
//!
//! flock and SQLite's own (fcntl) locks are independent on Linux. The
//! descriptor must outlive SQLite's connection: closing any descriptor of
//! the database drops the process's fcntl locks on it, so the store keeps
//! the lock until after its connection is closed.

use std::fs::File;
use std::io::{Seek, Write};
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::paths::{FileId, StoreDir};
use crate::error::{Error, Result};
use crate::sdk::files::sys::{self, FlockOperation};

/// Who holds the lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    pub pid: u32,
    pub host: String,
    /// Seconds since the epoch.
    pub since: u64,
    pub plan: String,
    /// What runs the plan when it is not a person's command (`ral agent`),
    /// one word.
    pub by: Option<String>,
}

impl Holder {
    /// This process, running `plan`.
    pub fn me(plan: &str) -> Holder {
        Holder {
            pid: std::process::id(),
            host: hostname(),
            since: super::sql::now() as u64,
            plan: plan.to_owned(),
            by: None,
        }
    }

    /// The holder run by `who` (its blanks made dashes: the lock file is
    /// words).
    pub fn by(self, who: &str) -> Holder {
        let word = who
            .chars()
            .map(|c| if c.is_whitespace() { '-' } else { c })
            .collect();
        Holder {
            by: Some(word),
            ..self
        }
    }

    fn to_line(&self) -> String {
        let by = self
            .by
            .as_ref()
            .map(|who| format!(" by={who}"))
            .unwrap_or_default();
        format!(
            "pid={} host={} since={} plan={}{by}\n",
            self.pid, self.host, self.since, self.plan
        )
    }

    /// The holder as `text` (the lock file) names it, if it names
    /// `pid` (or no process is known).
    fn describe(text: &str, pid: Option<u32>) -> String {
        let field = |key: &str| {
            text.split_whitespace()
                .find_map(|word| word.strip_prefix(&format!("{key}=")))
                .map(str::to_owned)
        };
        let written = field("pid");
        match (pid, written) {
            // Reached through another name, or not written yet: the
            // kernel's word is all there is.
            (Some(pid), Some(written)) if written != pid.to_string() => format!("process {pid}"),
            (Some(pid), None) => format!("process {pid}"),
            (_, written) => format!(
                "process {} on {} since {}, plan {}{}",
                written.unwrap_or_else(|| "?".to_owned()),
                field("host").unwrap_or_else(|| "?".to_owned()),
                field("since")
                    .and_then(|since| since.parse().ok())
                    .map_or_else(|| "?".to_owned(), crate::local_time::local_date),
                field("plan").unwrap_or_else(|| "?".to_owned()),
                field("by")
                    .map(|who| format!(", run by {}", crate::text::escape(&who)))
                    .unwrap_or_default()
            ),
        }
    }
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|name| name.trim().to_owned())
        .unwrap_or_else(|_| "?".to_owned())
}

/// The process holding a flock on the file `id`, as the kernel lists it
/// in /proc/locks (`N: FLOCK ADVISORY WRITE PID MAJ:MIN:INODE 0 EOF`, the
/// device numbers in hex).
fn flock_holder(id: FileId) -> Option<u32> {
    let locks = std::fs::read_to_string("/proc/locks").ok()?;
    holder_in(&locks, id)
}

/// The process that `locks`, the text of /proc/locks, names as holding a
/// flock on the file `id` (apart so that a test can give it any list).
fn holder_in(locks: &str, id: FileId) -> Option<u32> {
    let (dev, ino) = id;
    let wanted = format!(
        "{:02x}:{:02x}:{ino}",
        libc::major(dev as libc::dev_t),
        libc::minor(dev as libc::dev_t)
    );
    // (pid, MAJ:MIN:INODE) of every flock held for writing; a waiter's
    // line starts "N: ->" and holds nothing.
    let held: Vec<(&str, &str)> = locks
        .lines()
        .filter_map(|line| {
            let words: Vec<&str> = line.split_whitespace().collect();
            match words.as_slice() {
                [_, "FLOCK", _, "WRITE", pid, file, ..] => Some((*pid, *file)),
                _ => None,
            }
        })
        .collect();
    if let Some((pid, _)) = held.iter().find(|(_, file)| *file == wanted) {
        return pid.parse().ok();
    }
    // Some file systems (btrfs, overlayfs) show stat another device than
    // the kernel's list: the inode alone then, if only one holder has it.
    let suffix = format!(":{ino}");
    let mut same_inode = held.iter().filter(|(_, file)| file.ends_with(&suffix));
    match (same_inode.next(), same_inode.next()) {
        (Some((pid, _)), None) => pid.parse().ok(),
        _ => None,
    }
}

/// The held lock: the database file's descriptor, flocked. Dropping it (or the process ending) lets go.
#[derive(Debug)]
pub struct RunLock {
    db: File,
    path: PathBuf,
    id: FileId,
}

impl RunLock {
    /// Takes the lock of the store in `dir` (making its empty database
    /// file, 0600, when missing) for `holder`, waiting up to `wait` for
    /// another holder to let go (not at all for zero).
    pub(crate) fn acquire(dir: &StoreDir, holder: &Holder, wait: Duration) -> Result<RunLock> {
        let db = dir.open_db(true)?.expect("made when missing");
        let id = dir.id_of(&db)?;
        let path = dir.path_of(".lock");
        let fail = |message: String| Error::Store {
            path: path.clone(),
            message,
        };
        let deadline = Instant::now() + wait;
        let mut said = false;
        while let Err(error) = sys::flock(db.as_fd(), false) {
            if error.raw_os_error() != Some(libc::EWOULDBLOCK) {
                return Err(fail(format!(
                    "cannot lock {}: {error}",
                    dir.path_of("").display()
                )));
            }
            let who = holder_of(dir, Some(id));
            if Instant::now() >= deadline {
                return Err(Error::Locked {
                    path: path.clone(),
                    holder: who,
                });
            }
            if !std::mem::replace(&mut said, true) {
                log::warn!(
                    "waiting up to {:.0} s for another ral apply ({who}) to finish",
                    wait.as_secs_f64(),
                );
            }
            // The kernel has no "wait with a time limit" for flock; a short
            // nap between tries is what --lock-timeout costs.
            std::thread::sleep(Duration::from_millis(20));
        }
        // Checked once held: a second name of a store in use is reported
        // with its holder above.
        dir.check_db(&db)?;
        let mut file = dir.open_private(".lock")?;
        let written = file
            .set_len(0)
            .and_then(|()| file.rewind())
            .and_then(|()| file.write_all(holder.to_line().as_bytes()))
            .and_then(|()| file.sync_data());
        written.map_err(|e| fail(format!("cannot write the holder: {e}")))?;
        Ok(RunLock { db, path, id })
    }

    /// The lock file, naming the holder.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The database file the lock is on.
    pub(crate) fn db_id(&self) -> FileId {
        self.id
    }
}

/// Whether an apply holds the run lock of the store in `dir` now: tried
/// with a shared lock that is let go at once. Returns the descriptor
/// opened for it, which the caller keeps open as long as its SQLite
/// connection (closing a descriptor of the database would drop the
/// connection's own locks), and the holder when there is one.
pub(crate) fn probe(dir: &StoreDir) -> Result<(Option<File>, Option<String>)> {
    let Some(db) = dir.open_db(false)? else {
        return Ok((None, None));
    };
    let free = sys::flock_as(db.as_fd(), FlockOperation::NonBlockingLockShared).is_ok();
    if free {
        let _ = sys::flock_as(db.as_fd(), FlockOperation::Unlock);
        return Ok((Some(db), None));
    }
    let holder = holder_of(dir, dir.id_of(&db).ok());
    Ok((Some(db), Some(holder)))
}

/// Who holds the lock of the store in `dir`, whose database file is `id`:
/// as the lock file names it where the kernel's list of locks agrees.
fn holder_of(dir: &StoreDir, id: Option<FileId>) -> String {
    // Read only: the holder may be writing it.
    let text = dir
        .read_small(".lock", 4096)
        .ok()
        .flatten()
        .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
        .unwrap_or_default();
    Holder::describe(&text, id.and_then(flock_holder))
}

impl Drop for RunLock {
    fn drop(&mut self) {
        // What is written stays: it names the last holder, and is only read
        // while someone holds the lock again.
        let _ = sys::flock_as(self.db.as_fd(), FlockOperation::Unlock);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Location;

    #[test]
    fn the_lock_file_names_the_holder_only_where_the_kernel_agrees() {
        let text = "pid=5 host=h1 since=100 plan=p1\n";
        let full = format!(
            "process 5 on h1 since {}, plan p1",
            crate::local_time::local_date(100)
        );
        assert_eq!(Holder::describe(text, Some(5)), full);
        assert_eq!(Holder::describe(text, None), full);
        // A file an earlier holder left, the store reached by another name:
        // only the kernel's word.
        assert_eq!(Holder::describe(text, Some(7)), "process 7");
        assert_eq!(Holder::describe("", Some(7)), "process 7");
        assert_eq!(Holder::describe("", None), "process ? on ? since ?, plan ?");
        // Run by the agent: said, so that a person's apply knows why.
        let agent = Holder::me("p3").by("ral agent");
        assert!(agent.to_line().ends_with(" plan=p3 by=ral-agent\n"));
        assert!(
            Holder::describe(&agent.to_line(), Some(agent.pid))
                .ends_with(", plan p3, run by ral-agent"),
            "{}",
            Holder::describe(&agent.to_line(), Some(agent.pid))
        );
    }

    #[test]
    fn a_holder_is_this_process_on_this_machine() {
        let host = rustix::system::uname()
            .nodename()
            .to_string_lossy()
            .into_owned();
        let me = Holder::me("p1");
        assert_eq!(me.pid, std::process::id());
        assert_eq!(me.host, host);
        assert_eq!(
            Holder::describe(&me.to_line(), Some(me.pid)),
            format!(
                "process {} on {host} since {}, plan p1",
                me.pid,
                crate::local_time::local_date(me.since as i64)
            )
        );
    }

    #[test]
    fn the_kernels_list_names_the_process_holding_the_file() {
        let dev = libc::makedev(8, 3);
        let locks = "1: FLOCK  ADVISORY  WRITE 200 08:03:77 0 EOF\n\
                     2: POSIX  ADVISORY  WRITE 250 08:03:42 0 EOF\n\
                     3: FLOCK  ADVISORY  WRITE 300 08:03:42 0 EOF\n\
                     3: -> FLOCK  ADVISORY  WRITE 400 08:03:42 0 EOF\n";
        assert_eq!(holder_in(locks, (dev, 42)), Some(300));
        assert_eq!(holder_in(locks, (dev, 77)), Some(200));
        assert_eq!(holder_in(locks, (dev, 99)), None);
        // A file system whose stat shows another device than the list
        // (btrfs, overlayfs): the inode alone, when one holder has it.
        let elsewhere = libc::makedev(0, 0x2a);
        assert_eq!(holder_in(locks, (elsewhere, 42)), Some(300));
        let two = "1: FLOCK  ADVISORY  WRITE 200 00:2b:42 0 EOF\n\
                   2: FLOCK  ADVISORY  WRITE 300 00:2c:42 0 EOF\n";
        assert_eq!(holder_in(two, (elsewhere, 42)), None);
    }

    #[test]
    fn the_lock_is_taken_at_once_or_refused_at_once_and_its_file_names_the_holder() {
        let dir = tempfile::tempdir().unwrap();
        let at = Location::File(dir.path().join("state.db"));
        let store = StoreDir::open(&at, true).unwrap().unwrap();
        let lock = RunLock::acquire(&store, &Holder::me("p1"), Duration::ZERO).unwrap();
        assert_eq!(lock.path(), dir.path().join("state.db.lock"));
        let written = std::fs::read_to_string(lock.path()).unwrap();
        let me = Holder::me("p1");
        assert!(
            written.starts_with(&format!("pid={} host={} since=", me.pid, me.host))
                && written.ends_with(" plan=p1\n"),
            "{written}"
        );
        // Not waiting: refused on the first try, naming the holder.
        match RunLock::acquire(&store, &Holder::me("p2"), Duration::ZERO) {
            Err(Error::Locked { holder, .. }) => {
                assert!(holder.contains("plan p1"), "{holder}")
            }
            other => panic!("{other:?}"),
        }
    }
}
