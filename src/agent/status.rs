//! What a running agent leaves beside its state store for `ral agent
//! status`: `STORE.agent`, its state as JSON (replaced whole by a rename,
//! so a reader never sees half of it), and `STORE.agent.lock`, which the
//! agent holds locked for as long as it runs (so a second agent on the
//! same store is refused, and a status never takes a dead agent's file for
//! a live one: the kernel lets go of the lock when the process ends).

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The agent's state, as it last wrote it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Status {
    pub pid: u32,
    /// Seconds since the epoch.
    pub started: f64,
    pub manifests: Vec<PathBuf>,
    pub interval_seconds: f64,
    pub splay_seconds: f64,
    pub noop: bool,
    /// The next run on the interval (seconds since the epoch); `None`
    /// once the agent stopped.
    pub next_run: Option<f64>,
    pub last_run: Option<LastRun>,
    /// Runs since the agent started.
    pub runs: u64,
    /// Resources found drifted (to change) over those runs.
    pub drift_found: u64,
    /// Resources changed back over those runs.
    pub repaired: u64,
    pub failed_runs: u64,
    /// Why the manifests as they are now could not be loaded, while the
    /// agent keeps to the last catalog that could be.
    pub manifest_problem: Option<String>,
    /// Whether it has stopped (SIGTERM).
    pub stopped: bool,
}

/// One run, as the status tells it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LastRun {
    /// The plan recorded in the store, when one was.
    pub plan: Option<String>,
    pub why: String,
    pub started: f64,
    pub ended: f64,
    /// `unchanged`, `repaired`, `drift found` (noop), `failed`, or
    /// `not run: WHY`.
    pub outcome: String,
    pub drift: u64,
    pub repaired: u64,
}

/// Why the status cannot be kept or read.
#[derive(Debug, thiserror::Error)]
pub enum StatusError {
    #[error("another ral agent (process {pid}) runs on the state store {}", .store.display())]
    Running { pid: String, store: PathBuf },
    // The reasons are in the messages, not sources too: an error shown
    // with its causes (`{:#}`) would say each twice.
    #[error("{}: {error}", .path.display())]
    Io {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("{}: not an agent's status: {error}", .path.display())]
    Damaged {
        path: PathBuf,
        error: serde_json::Error,
    },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> StatusError + '_ {
    move |error| StatusError::Io {
        path: path.to_owned(),
        error,
    }
}

/// `STORE` with `suffix` added to its name.
fn beside(store: &Path, suffix: &str) -> PathBuf {
    let mut name = store.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// The status file of the agent of the store at `store`.
pub fn path_for(store: &Path) -> PathBuf {
    beside(store, ".agent")
}

/// Held while an agent runs on a store.
#[derive(Debug)]
pub struct Presence {
    _lock: File,
    status: PathBuf,
}

impl Presence {
    /// Takes the agent's lock of the store at `store` (its directory must
    /// exist), or says which agent holds it.
    pub fn take(store: &Path) -> Result<Presence, StatusError> {
        let lock_path = beside(store, ".agent.lock");
        let lock = open_lock(&lock_path)?;
        if let Err(e) =
            rustix::fs::flock(&lock, rustix::fs::FlockOperation::NonBlockingLockExclusive)
        {
            if e != rustix::io::Errno::WOULDBLOCK {
                return Err(io(&lock_path)(e.into()));
            }
            let pid = read(&path_for(store))
                .ok()
                .flatten()
                .map_or_else(|| "?".to_owned(), |s| s.pid.to_string());
            return Err(StatusError::Running {
                pid,
                store: store.to_owned(),
            });
        }
        Ok(Presence {
            _lock: lock,
            status: path_for(store),
        })
    }

    /// Replaces the status file with `status` (0600, through a new file
    /// renamed over it: tempfile makes it with O_EXCL, never through a
    /// link, and removes it when the write fails).
    pub fn write(&self, status: &Status) -> Result<(), StatusError> {
        let mut text = serde_json::to_vec_pretty(status).expect("a status is plain data");
        text.push(b'\n');
        let dir = match self.status.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir,
            _ => Path::new("."),
        };
        let written = tempfile::Builder::new()
            .prefix(".ral-agent-")
            .tempfile_in(dir)
            .and_then(|mut fresh| {
                fresh.write_all(&text)?;
                fresh.persist(&self.status).map_err(|e| e.error)?;
                Ok(())
            });
        written.map_err(io(&self.status))
    }
}

fn open_lock(path: &Path) -> Result<File, StatusError> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .map_err(io(path))
}

/// Whether an agent runs on the store at `store` now. The lock is opened
/// as the agent makes it: never through a link, and only when a regular
/// file (a FIFO put in its place, in a directory others may write, would
/// have the open wait for a writer forever).
pub fn running(store: &Path) -> Result<bool, StatusError> {
    let lock_path = beside(store, ".agent.lock");
    let lock = match OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC)
        .open(&lock_path)
    {
        Ok(lock) => lock,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Err(io(&lock_path)(std::io::Error::other(
                "a symbolic link, where the agent's lock is a file",
            )))
        }
        Err(e) => return Err(io(&lock_path)(e)),
    };
    if !lock.metadata().map_err(io(&lock_path))?.is_file() {
        return Err(io(&lock_path)(std::io::Error::other(
            "not a regular file, where the agent's lock is one",
        )));
    }
    match rustix::fs::flock(&lock, rustix::fs::FlockOperation::NonBlockingLockShared) {
        Ok(()) => Ok(false),
        Err(rustix::io::Errno::WOULDBLOCK) => Ok(true),
        Err(e) => Err(io(&lock_path)(e.into())),
    }
}

/// The status last written for the store's agent, if one was.
pub fn read(path: &Path) -> Result<Option<Status>, StatusError> {
    use crate::bounded_read::{read_file, Links, Refused};
    let text = match read_file(path, 1 << 20, Links::Refuse) {
        Ok(text) => text,
        Err(e) if e.is_missing() => return Ok(None),
        Err(Refused::Io(e)) => return Err(io(path)(e)),
        Err(e) => return Err(io(path)(std::io::Error::other(e.to_string()))),
    };
    serde_json::from_slice(&text)
        .map(Some)
        .map_err(|error| StatusError::Damaged {
            path: path.to_owned(),
            error,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_agent_per_store_and_its_status_reads_back() {
        let dir = tempfile::tempdir().unwrap();
        let store = dir.path().join("state.db");
        assert!(!running(&store).unwrap());
        let presence = Presence::take(&store).unwrap();
        assert!(running(&store).unwrap());
        let status = Status {
            pid: std::process::id(),
            runs: 3,
            drift_found: 2,
            repaired: 1,
            last_run: Some(LastRun {
                why: "drift: /etc/hosts".to_owned(),
                outcome: "repaired".to_owned(),
                ..LastRun::default()
            }),
            ..Status::default()
        };
        presence.write(&status).unwrap();
        assert_eq!(read(&path_for(&store)).unwrap(), Some(status));
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(path_for(&store))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        match Presence::take(&store) {
            Err(StatusError::Running { pid, .. }) => {
                assert_eq!(pid, std::process::id().to_string())
            }
            other => panic!("{other:?}"),
        }
        drop(presence);
        assert!(!running(&store).unwrap());
        // The status stays, for `ral agent status` to tell the last run.
        assert!(read(&path_for(&store)).unwrap().is_some());
    }

    #[test]
    fn a_status_file_that_is_not_one_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db.agent");
        assert!(read(&path).unwrap().is_none());
        std::fs::write(&path, "{\"pid\": \"x\"").unwrap();
        assert!(matches!(read(&path), Err(StatusError::Damaged { .. })));
    }

    #[test]
    fn whether_one_runs_is_told_without_waiting_on_a_fifo_or_following_a_link() {
        let dir = tempfile::tempdir().unwrap();
        let store = dir.path().join("state.db");
        let lock = beside(&store, ".agent.lock");
        let fifo = dir.path().join("fifo");
        let made = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a path of ours, NUL-terminated.
        assert_eq!(unsafe { libc::mkfifo(made.as_ptr(), 0o600) }, 0);
        std::os::unix::fs::symlink(&fifo, &lock).unwrap();
        let (said, answer) = std::sync::mpsc::channel();
        let asked = store.clone();
        std::thread::spawn(move || said.send(running(&asked).map_err(|e| e.to_string())));
        let answer = answer
            .recv_timeout(std::time::Duration::from_secs(30))
            .expect("an answer, not a wait");
        assert!(answer.unwrap_err().contains("symbolic link"));
        std::fs::remove_file(&lock).unwrap();
        std::fs::rename(&fifo, &lock).unwrap();
        let (said, answer) = std::sync::mpsc::channel();
        std::thread::spawn(move || said.send(running(&store).map_err(|e| e.to_string())));
        let answer = answer
            .recv_timeout(std::time::Duration::from_secs(30))
            .expect("an answer, not a wait");
        assert!(answer.unwrap_err().contains("not a regular file"));
    }

    #[test]
    fn a_link_in_place_of_the_lock_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let store = dir.path().join("state.db");
        let elsewhere = dir.path().join("elsewhere");
        std::os::unix::fs::symlink(&elsewhere, beside(&store, ".agent.lock")).unwrap();
        assert!(matches!(
            Presence::take(&store),
            Err(StatusError::Io { .. })
        ));
        assert!(!elsewhere.exists());
    }
}
