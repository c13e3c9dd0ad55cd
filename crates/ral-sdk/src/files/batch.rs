//! Edits of many files, each guarded by the lock of its directory, made
//! together: for a provider whose resources are files themselves, so that
//! a set of a thousand is not two thousand waits for the disk.
//!
//! ```text
//! let mut batch = Batch::new(call.noop);
//! for (key, update) in updates.iter().enumerate() {
//!     let mut edit = batch.edit(call, &dir, key)?;
//!     // decide under the lock
//!     edit.write(&target, data, Attrs::default())?;
//!     edit.commit()?;                     // queued
//! }
//! let failed = batch.finish();            // {key: CallError}
//! ```
//!
//! Each edit still takes its lock, decides under it and writes a temporary
//! file that replaces its target only once synced. But the batch queues up
//! to [`Batch::LIMIT`] of them, and keeps every lock it took until it
//! flushes them: it syncs the temporary files all at once (from several
//! threads, which the file system serves with a few commits of its journal
//! instead of one per file), renames them in order, syncs each directory
//! once and lets go of the locks. It flushes before it waits for a lock
//! another holds, so two batches never wait for each other, and before it
//! answers (`finish`). Syncs of directories changed directly
//! ([`Edit::sync_dir`]) wait for the same moment. A queued edit that fails
//! there changes nothing and is reported by `finish`. While a lock is
//! held, its directory is listed once for temporary files a crash left,
//! not once per edit.
//!
//! Looking a path up while an edit of it, or of a path above or below it,
//! is queued would see it as it was: the caller flushes first
//! ([`Batch::touches`] tells when).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::ffi::OsString;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use serde_json::Value as Json;

use super::edit::{in_place, rename, Edit};
use super::guard::{Guard, Ident, Queue};
use super::journal::{remove_temps, temp_like};
use super::lock::Lock;
use super::root::{Dir, Target};
use super::stat::identity;
use super::sys;
use crate::error::{CallError, CallResult};
use crate::text::quoted;
use crate::{Call, Deadline};

/// Edits of many files made together (see the module).
pub struct Batch {
    noop: bool,
    locks: HashMap<Ident, Held>,
    queued: Vec<Queued>,
    /// The paths of the queued edits (relative to the root), and the
    /// directories above them.
    paths: HashSet<String>,
    above: HashSet<String>,
    /// Directories to sync: a descriptor of their own, or `None`: the
    /// lock's.
    dirs: HashMap<Ident, Option<OwnedFd>>,
    failed: BTreeMap<usize, CallError>,
    /// The deadline of the call the edits are for: a queued file not yet
    /// renamed into place by then is not.
    deadline: Option<Deadline>,
}

impl std::fmt::Debug for Batch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Batch")
            .field("noop", &self.noop)
            .field("queued", &self.queued.len())
            .field("locks", &self.locks.len())
            .finish()
    }
}

/// A lock the batch holds: how many open edits and queued commits use
/// it, and the names in its directory that may be temporary files a crash
/// left (`None` until listed).
struct Held {
    lock: Lock,
    users: usize,
    temps: Option<Vec<OsString>>,
}

/// A queued commit: the temporary file `temp` (open as `fd`) that
/// replaces `name` in `dir`, if `name` is still `was`.
struct Queued {
    fd: OwnedFd,
    key: usize,
    lock: String,
    was: Json,
    temp: String,
    name: String,
    path: String,
    dir: Dir,
    ident: Ident,
}

impl Batch {
    /// At most this many queued edits, locks held and directories to
    /// sync, each one open descriptor.
    pub const LIMIT: usize = 128;
    /// Threads that sync at once.
    pub const THREADS: usize = 32;

    pub fn new(noop: bool) -> Batch {
        Batch {
            noop,
            locks: HashMap::new(),
            queued: Vec::new(),
            paths: HashSet::new(),
            above: HashSet::new(),
            dirs: HashMap::new(),
            failed: BTreeMap::new(),
            deadline: None,
        }
    }

    pub fn noop(&self) -> bool {
        self.noop
    }

    /// How many edits are queued.
    pub fn queued(&self) -> usize {
        self.queued.len()
    }

    /// An edit guarded by the lock of `dir` (taken now), whose commit is
    /// queued; under noop, a plain preview. `key` names it in
    /// [`finish`](Batch::finish)'s answer.
    pub fn edit<'a>(&'a mut self, call: &'a Call, dir: &Dir, key: usize) -> CallResult<Edit<'a>> {
        call.within_time()?;
        self.deadline = call.deadline.clone();
        if self.noop {
            return Edit::begin_as(Lock::of_directory(dir), call, true);
        }
        let ident = self.hold(call, dir)?;
        let guard = Guard::Batch {
            batch: self,
            dir: dir.clone(),
            ident: Some(ident),
        };
        Ok(Edit::new(guard, call, false, key))
    }

    /// True when a queued edit replaces the path `rel` (relative to the
    /// root, links resolved), a path above it or one below it.
    pub fn touches(&self, rel: &str) -> bool {
        if self.queued.is_empty() {
            return false;
        }
        if self.paths.contains(rel) || self.above.contains(rel) {
            return true;
        }
        let mut rel = rel;
        while !rel.is_empty() {
            rel = rel.rsplit_once('/').map_or("", |(head, _)| head);
            if self.paths.contains(rel) {
                return true;
            }
        }
        false
    }

    /// Takes the lock of `dir`, unless the batch holds it already.
    fn hold(&mut self, call: &Call, dir: &Dir) -> CallResult<Ident> {
        let ident = dir.identity()?;
        if !self.locks.contains_key(&ident) {
            if self.locks.len() >= Batch::LIMIT {
                self.flush();
            }
            let mut lock = Lock::of_directory(dir);
            lock.acquire_then(call, &mut || self.flush())?;
            self.locks.insert(
                ident,
                Held {
                    lock,
                    users: 0,
                    temps: None,
                },
            );
        }
        if let Some(held) = self.locks.get_mut(&ident) {
            held.users += 1;
        }
        Ok(ident)
    }

    /// Finishes every queued edit, and lets go of the locks no open edit
    /// uses.
    pub fn flush(&mut self) {
        let queued = std::mem::take(&mut self.queued);
        let mut dirs = std::mem::take(&mut self.dirs);
        self.paths.clear();
        self.above.clear();
        let errors = sync_files(&queued.iter().map(|q| q.fd.as_fd()).collect::<Vec<_>>());
        let mut moved: HashMap<Ident, bool> = HashMap::new();
        for (q, err) in queued.iter().zip(errors) {
            let moved = *moved
                .entry(q.ident)
                .or_insert_with(|| !in_place(&q.dir).unwrap_or(false));
            let problem = if let Some(err) = err {
                Some(CallError::io(
                    &err,
                    &format!("write {}", quoted(&q.dir.show(&q.temp))),
                ))
            } else if let Some(Err(late)) = self.deadline.as_ref().map(Deadline::check) {
                Some(late)
            } else if q.dir.lstat(&q.name).map(|now| identity(now.as_ref())).ok()
                != Some(q.was.clone())
            {
                Some(CallError::new(format!(
                    "{} was changed meanwhile by a program that does not take the lock {}; \
                     nothing was written",
                    quoted(&q.path),
                    quoted(&q.lock)
                )))
            } else if moved {
                Some(CallError::new(format!(
                    "the directory of {} was moved or replaced while it was being edited, so \
                     the lock {} no longer guards that path; nothing was written",
                    quoted(&q.path),
                    quoted(&q.lock)
                )))
            } else {
                rename(&q.dir, &q.temp, &q.name)
                    .err()
                    .map(|err| CallError::io(&err, &format!("replace {}", quoted(&q.path))))
            };
            match problem {
                Some(problem) => {
                    self.failed.insert(q.key, problem);
                    let _ = sys::unlink_at(q.dir.as_fd(), q.temp.as_ref());
                }
                None => {
                    dirs.entry(q.ident).or_insert(None);
                }
            }
        }
        // As fsync_dir: a file system may refuse to sync a directory.
        let mut to_sync: Vec<BorrowedFd<'_>> = Vec::new();
        for (ident, own) in &dirs {
            match own {
                Some(fd) => to_sync.push(fd.as_fd()),
                None => {
                    if let Some(fd) = self.locks.get(ident).and_then(|held| held.lock.held_fd()) {
                        to_sync.push(fd.as_fd());
                    } else if let Some(q) = queued.iter().find(|q| q.ident == *ident) {
                        to_sync.push(q.dir.as_fd());
                    }
                }
            }
        }
        sync_all(&to_sync);
        drop(to_sync);
        for q in &queued {
            if let Some(held) = self.locks.get_mut(&q.ident) {
                held.users = held.users.saturating_sub(1);
            }
        }
        self.locks.retain(|_, held| held.users > 0);
    }

    /// Flushes; returns the queued edits that failed since the batch began
    /// (they changed nothing; the others are done), by key.
    pub fn finish(&mut self) -> BTreeMap<usize, CallError> {
        self.flush();
        std::mem::take(&mut self.failed)
    }
}

impl Queue for Batch {
    /// An edit is done with the lock `ident`.
    fn let_go(&mut self, ident: Ident) {
        if let Some(held) = self.locks.get_mut(&ident) {
            held.users = held.users.saturating_sub(1);
        }
    }

    /// Removes the temporary files a crash left for `name` in `dir`, the
    /// directory listed once while its lock is held.
    fn remove_temps(&mut self, call: &Call, dir: &Dir, name: &str) -> CallResult<()> {
        let ident = dir.identity()?;
        let Some(held) = self.locks.get_mut(&ident) else {
            return remove_temps(&call.log, dir, name, None);
        };
        if held.temps.is_none() {
            let names = dir.names()?;
            held.temps = Some(names.into_iter().filter(|n| temp_like(n)).collect());
        }
        remove_temps(&call.log, dir, name, held.temps.as_mut())
    }

    /// Takes over the temporary file `temp` (open as `fd`) of an edit
    /// holding the lock `ident` of `dir`, to replace `target` at the
    /// flush. `target` must be in that directory, which keeps others from
    /// its temporary files.
    fn queue(
        &mut self,
        ident: Option<Ident>,
        dir: &Dir,
        key: usize,
        target: &Target,
        temp: String,
        fd: OwnedFd,
        was: Json,
    ) -> CallResult<()> {
        let here = target.dir().identity()?;
        if Some(here) != ident {
            return Err(CallError::new(format!(
                "{} is not in the directory of the lock {}",
                quoted(target.path()),
                quoted(dir.path())
            )));
        }
        let rel = [target.dir().rel(), target.name()]
            .iter()
            .filter(|p| !p.is_empty())
            .copied()
            .collect::<Vec<_>>()
            .join("/");
        self.queued.push(Queued {
            fd,
            key,
            lock: dir.path().to_owned(),
            was,
            temp,
            name: target.name().to_owned(),
            path: target.path().to_owned(),
            dir: target.dir().clone(),
            ident: here,
        });
        if let Some(held) = self.locks.get_mut(&here) {
            held.users += 1;
        }
        let mut above = rel.as_str();
        while !above.is_empty() {
            above = above.rsplit_once('/').map_or("", |(head, _)| head);
            self.above.insert(above.to_owned());
        }
        self.paths.insert(rel);
        if self.queued.len() >= Batch::LIMIT {
            self.flush();
        }
        Ok(())
    }

    /// Syncs `dir` at the flush.
    fn sync_later(&mut self, dir: &Dir) -> CallResult<()> {
        let ident = dir.identity()?;
        if !self.dirs.contains_key(&ident) {
            let own = if self.locks.contains_key(&ident) {
                None
            } else {
                let fd = dir
                    .as_fd()
                    .try_clone_to_owned()
                    .map_err(|err| CallError::io(&err, &format!("open {}", quoted(dir.path()))))?;
                Some(fd)
            };
            self.dirs.insert(ident, own);
        }
        if self.dirs.len() >= Batch::LIMIT {
            self.flush();
        }
        Ok(())
    }
}

impl Drop for Batch {
    /// A batch dropped unfinished (its call failed) makes none of its
    /// queued edits, as a call that fails reports none: their temporary
    /// files go, and the locks are let go.
    fn drop(&mut self) {
        for q in self.queued.drain(..) {
            let _ = sys::unlink_at(q.dir.as_fd(), q.temp.as_ref());
        }
    }
}

/// From how many files a flush syncs whole file systems, once each, rather
/// than each file: a thousand new files cost a few journal commits instead
/// of a thousand waits for the disk (three times faster here).
const SYNCFS_FROM: usize = 32;

/// Makes the data of every file durable; returns the error of each, in
/// order. Many files are synced with one syncfs(2) per file system they
/// are on (which writes back all of it, these files included); few, with
/// an fsync(2) each.
fn sync_files(fds: &[BorrowedFd<'_>]) -> Vec<Option<io::Error>> {
    if fds.len() < SYNCFS_FROM {
        return sync_all(fds);
    }
    // The file system of each file, by device.
    let devices: Vec<Option<u64>> = fds
        .iter()
        .map(|fd| sys::fstat(*fd).ok().map(|info| info.dev()))
        .collect();
    let mut synced: HashMap<u64, Option<io::Error>> = HashMap::new();
    let mut errors = Vec::with_capacity(fds.len());
    for (fd, device) in fds.iter().zip(&devices) {
        let error = match device {
            // Not known: that one alone.
            None => sys::fsync(*fd).err(),
            Some(device) => {
                let result = synced
                    .entry(*device)
                    .or_insert_with(|| sys::syncfs(*fd).err());
                result
                    .as_ref()
                    .map(|err| io::Error::new(err.kind(), err.to_string()))
            }
        };
        errors.push(error);
    }
    errors
}

/// fsync(2)s every descriptor, several at a time: the file system then
/// commits its journal once for many of them instead of once for each.
/// Returns the error of each, in order.
fn sync_all(fds: &[BorrowedFd<'_>]) -> Vec<Option<io::Error>> {
    let errors: Vec<Mutex<Option<io::Error>>> = fds.iter().map(|_| Mutex::new(None)).collect();
    let next = AtomicUsize::new(0);
    let work = || loop {
        let index = next.fetch_add(1, Ordering::Relaxed);
        let Some(fd) = fds.get(index) else {
            return;
        };
        if let Err(err) = sys::fsync(*fd) {
            if let Some(slot) = errors.get(index) {
                *slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(err);
            }
        }
    };
    std::thread::scope(|scope| {
        let helpers = Batch::THREADS.min(fds.len()).saturating_sub(1);
        for _ in 0..helpers {
            // No more threads: fewer will do.
            if std::thread::Builder::new()
                .spawn_scoped(scope, work)
                .is_err()
            {
                break;
            }
        }
        work();
    });
    errors
        .into_iter()
        .map(|slot| slot.into_inner().unwrap_or_else(|e| e.into_inner()))
        .collect()
}

#[cfg(test)]
mod sync_tests {
    use super::*;

    /// Many files are synced by file system, each told the outcome; few,
    /// one by one.
    #[test]
    fn many_files_are_synced_once_per_file_system() {
        let dir = tempfile::tempdir().unwrap();
        let files: Vec<std::fs::File> = (0..SYNCFS_FROM + 8)
            .map(|i| {
                let path = dir.path().join(format!("f{i}"));
                std::fs::write(&path, "x").unwrap();
                std::fs::File::open(path).unwrap()
            })
            .collect();
        let fds: Vec<BorrowedFd<'_>> = files.iter().map(|f| f.as_fd()).collect();
        let errors = sync_files(&fds);
        assert_eq!(errors.len(), fds.len());
        assert!(errors.iter().all(Option::is_none), "{errors:?}");
        let few = sync_files(&fds[..3]);
        assert_eq!(few.len(), 3);
        assert!(few.iter().all(Option::is_none));
    }
}
