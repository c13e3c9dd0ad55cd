//! One apply at a time: an exclusive flock on `STATE.lock`, which the
//! kernel lets go of when the holder dies (so no stale lock can exist), and
//! the holder's particulars written into it for whoever finds it taken.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};

/// Who holds the lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    pub pid: u32,
    pub host: String,
    /// Seconds since the epoch.
    pub since: u64,
    pub plan: String,
}

impl Holder {
    /// This process, running `plan`.
    pub fn me(plan: &str) -> Holder {
        Holder {
            pid: std::process::id(),
            host: hostname(),
            since: super::now() as u64,
            plan: plan.to_owned(),
        }
    }

    fn to_line(&self) -> String {
        format!(
            "pid={} host={} since={} plan={}\n",
            self.pid, self.host, self.since, self.plan
        )
    }

    fn describe(text: &str) -> String {
        let field = |key: &str| {
            text.split_whitespace()
                .find_map(|word| word.strip_prefix(&format!("{key}=")))
                .unwrap_or("?")
                .to_owned()
        };
        format!(
            "process {} on {} since {} (unix time), plan {}",
            field("pid"),
            field("host"),
            field("since"),
            field("plan")
        )
    }
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|name| name.trim().to_owned())
        .unwrap_or_else(|_| "?".to_owned())
}

/// The held lock; dropping it (or the process ending) lets it go.
#[derive(Debug)]
pub struct RunLock {
    file: File,
    path: PathBuf,
}

impl RunLock {
    /// The lock of the store at `store`: `STORE.lock` beside it.
    pub fn path_for(store: &Path) -> PathBuf {
        let mut name = store.as_os_str().to_owned();
        name.push(".lock");
        PathBuf::from(name)
    }

    /// Takes the lock of the store at `store` for `holder`, waiting up to
    /// `wait` for another holder to let go (not at all for zero).
    pub fn acquire(store: &Path, holder: &Holder, wait: Duration) -> Result<RunLock> {
        let path = RunLock::path_for(store);
        let fail = |message: String| Error::Store {
            path: path.clone(),
            message,
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|e| fail(format!("cannot create its directory: {e}")))?;
        }
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| fail(format!("cannot open the lock: {e}")))?;
        let deadline = Instant::now() + wait;
        let mut said = false;
        loop {
            // SAFETY: flock on a descriptor this function owns.
            let taken =
                unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0;
            if taken {
                break;
            }
            let error = std::io::Error::last_os_error();
            if error.raw_os_error() != Some(libc::EWOULDBLOCK) {
                return Err(fail(format!("cannot lock: {error}")));
            }
            let mut text = String::new();
            let _ = file.rewind().and_then(|()| file.read_to_string(&mut text));
            if Instant::now() >= deadline {
                return Err(Error::Locked {
                    path: path.clone(),
                    holder: Holder::describe(&text),
                });
            }
            if !std::mem::replace(&mut said, true) {
                log::warn!(
                    "waiting up to {:.0} s for another ral apply ({}) to finish",
                    wait.as_secs_f64(),
                    Holder::describe(&text)
                );
            }
            // The kernel has no "wait with a time limit" for flock; a short
            // nap between tries is what --lock-timeout costs.
            std::thread::sleep(Duration::from_millis(20));
        }
        let written = file
            .set_len(0)
            .and_then(|()| file.rewind())
            .and_then(|()| file.write_all(holder.to_line().as_bytes()))
            .and_then(|()| file.sync_data());
        written.map_err(|e| fail(format!("cannot write the holder: {e}")))?;
        Ok(RunLock { file, path })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for RunLock {
    fn drop(&mut self) {
        // What is written stays: it names the last holder, and is only read
        // while someone holds the lock again.
        // SAFETY: unlocks the descriptor this value owns.
        unsafe { libc::flock(self.file.as_raw_fd(), libc::LOCK_UN) };
    }
}
