//! Instruments for the toolkit's tests, compiled only for them: what a
//! test needs to see that an edit is crash-safe, which the files alone
//! never show.
//!
//! - A [`Trace`] records the syncs and renames made below a directory, in
//!   order, from any thread: which files were synced, and whether before
//!   they were renamed; which directories were synced after a rename
//!   into them; how many times each.
//! - [`killed_after`] stops what it runs right after its Nth rename, as a
//!   SIGKILL would: from then on the thread changes nothing more (no
//!   temporary file removed, no journal dropped, no directory synced)
//!   while it unwinds, and its locks go as a dead process's do.
//! - [`after_mkdir`] runs what another process might do right after a
//!   directory is made, before it is opened (a mount on it, say): the race
//!   made to happen every time.
//!
//! `sys` calls in here from the few calls that make a change durable or
//! visible (fsync, syncfs, rename) and refuses every change of a killed
//! thread.

use std::cell::Cell;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// One call the trace saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// fsync(2) of the file or directory at this path.
    Sync(PathBuf),
    /// syncfs(2) through the file at this path: all of its file system.
    SyncFs(PathBuf),
    /// rename(2) of the first path to the second.
    Rename(PathBuf, PathBuf),
    /// The thread that made the rename before was killed after it.
    Killed,
}

struct Shared {
    below: PathBuf,
    events: Mutex<Vec<Event>>,
}

/// The traces being recorded.
static TRACES: Mutex<Vec<Arc<Shared>>> = Mutex::new(Vec::new());

/// The syncs and renames below a directory, recorded from its start until
/// it is dropped.
pub struct Trace {
    shared: Arc<Shared>,
}

impl Trace {
    /// Records what happens below `dir` (links in its path resolved).
    pub fn below(dir: &Path) -> Trace {
        let below = dir.canonicalize().unwrap_or_else(|_| dir.to_owned());
        let shared = Arc::new(Shared {
            below,
            events: Mutex::new(Vec::new()),
        });
        traces().push(shared.clone());
        Trace { shared }
    }

    /// What was recorded so far.
    pub fn events(&self) -> Vec<Event> {
        lock(&self.shared.events).clone()
    }

    /// How many times the file or directory `path` was fsynced.
    pub fn syncs_of(&self, path: &Path) -> usize {
        self.events()
            .iter()
            .filter(|event| matches!(event, Event::Sync(synced) if synced == path))
            .count()
    }

    /// The renames, in order.
    pub fn renames(&self) -> Vec<(PathBuf, PathBuf)> {
        self.events()
            .into_iter()
            .filter_map(|event| match event {
                Event::Rename(from, to) => Some((from, to)),
                _ => None,
            })
            .collect()
    }

    /// What breaks the rules of a durable replace: a file renamed before
    /// its data was synced (by fsync of it or syncfs), a rename whose
    /// directory was not synced after it, a journal whose directory was
    /// not synced before the next rename. Empty when all is well.
    pub fn problems(&self) -> Vec<String> {
        let events = self.events();
        let mut problems = Vec::new();
        for (at, event) in events.iter().enumerate() {
            let Event::Rename(from, to) = event else {
                continue;
            };
            let before = &events[..at];
            let synced = before.iter().any(|event| match event {
                Event::Sync(path) => path == from,
                Event::SyncFs(_) => true,
                Event::Rename(..) | Event::Killed => false,
            });
            if !synced {
                problems.push(format!(
                    "{} was renamed before it was synced",
                    from.display()
                ));
            }
            let dir = to.parent().unwrap_or(Path::new("/"));
            let after = &events[at + 1..];
            let dir_synced = |events: &[Event]| {
                events
                    .iter()
                    .any(|event| matches!(event, Event::Sync(path) if path == dir))
            };
            if !dir_synced(after) {
                problems.push(format!(
                    "{} was not synced after {} was renamed into it",
                    dir.display(),
                    to.display()
                ));
            }
            let is_journal = to
                .file_name()
                .is_some_and(|name| name.to_string_lossy().ends_with(super::JOURNAL_TAG));
            if is_journal {
                // Before the next rename of the same run: a run killed
                // right after writing its journal promised nothing yet.
                let next = after
                    .iter()
                    .position(|event| matches!(event, Event::Rename(..) | Event::Killed))
                    .unwrap_or(after.len());
                if after.get(next) == Some(&Event::Killed) {
                    continue;
                }
                if !dir_synced(&after[..next]) {
                    problems.push(format!(
                        "the journal {} was not made durable before the next rename",
                        to.display()
                    ));
                }
            }
        }
        problems
    }
}

impl Drop for Trace {
    fn drop(&mut self) {
        traces().retain(|shared| !Arc::ptr_eq(shared, &self.shared));
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

fn traces() -> std::sync::MutexGuard<'static, Vec<Arc<Shared>>> {
    lock(&TRACES)
}

/// The path a descriptor is open on, as the kernel tells it.
fn path_of(fd: BorrowedFd<'_>) -> Option<PathBuf> {
    std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())).ok()
}

/// Records `event` in every trace of a directory above `path`.
fn record(path: &Path, event: impl FnOnce() -> Event) {
    let traces = traces();
    let mut wanted = traces.iter().filter(|t| path.starts_with(&t.below));
    let Some(first) = wanted.next() else {
        return;
    };
    let event = event();
    for trace in std::iter::once(first).chain(wanted) {
        lock(&trace.events).push(event.clone());
    }
}

/// Whether any trace is being recorded (else nothing is looked up).
fn tracing() -> bool {
    !traces().is_empty()
}

/// `fd` was fsynced (`all`: its whole file system, by syncfs).
pub(super) fn synced(fd: BorrowedFd<'_>, all: bool) {
    if !tracing() {
        return;
    }
    if let Some(path) = path_of(fd) {
        let event = || match all {
            true => Event::SyncFs(path.clone()),
            false => Event::Sync(path.clone()),
        };
        record(&path, event);
    }
}

/// What a killed run unwinds with.
struct Kill;

// The renames a run has left before it is killed, and whether it was.
thread_local! {
    static RENAMES_LEFT: Cell<Option<usize>> = const { Cell::new(None) };
    static DEAD: Cell<bool> = const { Cell::new(false) };
    static AFTER_MKDIR: Cell<Option<Box<dyn FnOnce()>>> = const { Cell::new(None) };
}

/// Runs `body` with `hook` run (once, on this thread) right after its
/// first successful mkdir.
pub fn after_mkdir<R>(hook: impl FnOnce() + 'static, body: impl FnOnce() -> R) -> R {
    AFTER_MKDIR.with(|after| after.set(Some(Box::new(hook))));
    let result = body();
    AFTER_MKDIR.with(Cell::take);
    result
}

/// A directory was made: runs the hook waiting for it, if any.
pub(super) fn made_dir() {
    if let Some(hook) = AFTER_MKDIR.with(Cell::take) {
        hook();
    }
}

/// `from` in `from_dir` was renamed to `to` in `to_dir`; kills the thread
/// when that was the rename it is to die after.
pub(super) fn renamed(from_dir: BorrowedFd<'_>, from: &Path, to_dir: BorrowedFd<'_>, to: &Path) {
    let dirs = match tracing() {
        true => (path_of(from_dir), path_of(to_dir)),
        false => (None, None),
    };
    let to = match dirs {
        (Some(from_dir), Some(to_dir)) => {
            let (from, to) = (from_dir.join(from), to_dir.join(to));
            record(&to, || Event::Rename(from.clone(), to.clone()));
            Some(to)
        }
        _ => None,
    };
    let left = RENAMES_LEFT.with(Cell::get);
    match left {
        Some(1) => {
            if let Some(to) = to {
                record(&to, || Event::Killed);
            }
            RENAMES_LEFT.with(|left| left.set(None));
            DEAD.with(|dead| dead.set(true));
            // Not a panic: no hook prints it, and only `killed_after`
            // expects it.
            std::panic::resume_unwind(Box::new(Kill));
        }
        Some(n) => RENAMES_LEFT.with(|left| left.set(Some(n - 1))),
        None => {}
    }
}

/// An error for any change a killed thread tries while it unwinds: a
/// dead process changes nothing.
pub(super) fn alive() -> io::Result<()> {
    match DEAD.with(Cell::get) {
        true => Err(io::Error::from_raw_os_error(libc::EIO)),
        false => Ok(()),
    }
}

/// Runs `body`, killed right after its `renames`th rename: `None` when it
/// was, its result when it ended first. The thread lives on as the next
/// run would: free of the kill.
pub fn killed_after<R>(renames: usize, body: impl FnOnce() -> R) -> Option<R> {
    assert!(renames > 0, "a kill after no rename is no run at all");
    RENAMES_LEFT.with(|left| left.set(Some(renames)));
    let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(body));
    RENAMES_LEFT.with(|left| left.set(None));
    DEAD.with(|dead| dead.set(false));
    match ran {
        Ok(result) => Some(result),
        Err(payload) if payload.is::<Kill>() => None,
        Err(payload) => std::panic::resume_unwind(payload),
    }
}
