//! The private directory of a run's control sockets:
//! `ral-ssh-PID-XXXXXX` in the runtime directory or TMPDIR, made 0700,
//! with a `lock` file that this process holds locked (`flock`) for as long
//! as it runs, and removed at the end.
//!
//! A run that was killed cannot remove its directory: the next run does.
//! A directory is stale when the process its name gives is gone, or when
//! nobody holds its lock (the kernel drops a lock with its last holder,
//! however that ends; the process ID may be another's by then). Only plain
//! directories of this user are ever looked into or removed; another
//! user's, a link, or one whose name does not say its process is left
//! alone.

use std::fs::{self, File};
use std::os::fd::AsFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use rustix::io::Errno;
use rustix::process::{test_kill_process, Pid};

use crate::error::{Error, Result};
use crate::process;
use crate::sdk::files::sys;

/// What every control directory's name starts with.
const PREFIX: &str = "ral-ssh-";
/// The file whose lock says the directory's run is alive.
const LOCK: &str = "lock";

/// This run's control directory.
pub struct ControlDir {
    dir: tempfile::TempDir,
    /// Held locked until the directory is removed.
    _lock: File,
}

impl ControlDir {
    /// Sweeps the stale directories of `base`, then makes this run's.
    pub fn create(base: &Path) -> Result<ControlDir> {
        sweep(base);
        let making = |e| Error::io(format!("making a directory in {}", base.display()), e);
        let dir = tempfile::Builder::new()
            .prefix(&format!("{PREFIX}{}-", std::process::id()))
            .permissions(fs::Permissions::from_mode(0o700))
            .tempdir_in(base)
            .map_err(making)?;
        process::remove_on_interrupt(dir.path());
        let lock = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(dir.path().join(LOCK))
            .and_then(|file| lock(&file, true).map(|_| file))
            .map_err(making)?;
        Ok(ControlDir { dir, _lock: lock })
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for ControlDir {
    fn drop(&mut self) {
        process::keep_on_interrupt(self.dir.path());
    }
}

/// Takes the lock of `file` (waiting for it when `wait`); false when
/// another holds it and `wait` is not set.
pub(super) fn lock(file: &File, wait: bool) -> std::io::Result<bool> {
    match sys::flock(file.as_fd(), wait) {
        Ok(()) => Ok(true),
        Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => Ok(false),
        Err(error) => Err(error),
    }
}

/// Removes the stale control directories of `base` (see the module's
/// doc); nothing else, and no error: a directory that cannot be removed
/// stays.
pub fn sweep(base: &Path) {
    let Ok(entries) = fs::read_dir(base) else {
        return;
    };
    let me = rustix::process::geteuid().as_raw();
    for entry in entries.flatten() {
        let path = entry.path();
        if stale(&path, me) {
            log::debug!("removing {}, left by a run that ended", path.display());
            if let Err(e) = fs::remove_dir_all(&path) {
                log::debug!("removing {}: {e}", path.display());
            }
        }
    }
}

/// Whether `path` is a control directory of user `me` whose run is gone.
fn stale(path: &Path, me: u32) -> bool {
    let Some(pid) = path
        .file_name()
        .and_then(|name| name.to_str())
        .and_then(|name| name.strip_prefix(PREFIX))
        .and_then(|rest| rest.split_once('-'))
        .and_then(|(pid, _)| pid.parse::<i32>().ok())
        .filter(|&pid| pid > 0)
    else {
        return false;
    };
    // Not followed: a link, or another user's directory, is not ours.
    let Ok(meta) = fs::symlink_metadata(path) else {
        return false;
    };
    if !meta.is_dir() || meta.uid() != me {
        return false;
    }
    if !running(pid) {
        return true;
    }
    // Its process ID runs; the directory is stale all the same when
    // nobody holds its lock (the ID went to another process). Without a
    // lock file it is being made.
    let lock_file = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(PathBuf::from(path).join(LOCK));
    match lock_file {
        Ok(file) => {
            file.metadata().is_ok_and(|m| m.is_file()) && lock(&file, false).unwrap_or(false)
        }
        Err(_) => false,
    }
}

/// Whether a process `pid` (above 0) exists (another user's counts).
fn running(pid: i32) -> bool {
    let Some(pid) = Pid::from_raw(pid) else {
        return false;
    };
    matches!(test_kill_process(pid), Ok(()) | Err(Errno::PERM))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_control_directory_is_private_and_locked_and_only_stale_ones_go() {
        let base = tempfile::tempdir().unwrap();
        let ours = ControlDir::create(base.path()).unwrap();
        let mode = fs::metadata(ours.path()).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        let name = ours.path().file_name().unwrap().to_str().unwrap();
        assert!(
            name.starts_with(&format!("ral-ssh-{}-", std::process::id())),
            "{name}"
        );

        // A dead process's, with a socket left; a live process's whose
        // lock nobody holds (its ID was reused); one being made (no lock
        // yet); another name; a link to a stale-looking directory.
        let dead = base.path().join("ral-ssh-999999999-abcdef");
        fs::create_dir(&dead).unwrap();
        let _socket = std::os::unix::net::UnixListener::bind(dead.join("0")).unwrap();
        let reused = base
            .path()
            .join(format!("ral-ssh-{}-reused", std::process::id()));
        fs::create_dir(&reused).unwrap();
        File::create(reused.join(LOCK)).unwrap();
        let making = base
            .path()
            .join(format!("ral-ssh-{}-making", std::process::id()));
        fs::create_dir(&making).unwrap();
        // Another user's: what is stale for its owner is not for anyone
        // else (asked as another uid, since only root could chown it).
        let foreign = base.path().join("ral-ssh-999999997-foreign");
        fs::create_dir(&foreign).unwrap();
        let me = rustix::process::geteuid().as_raw();
        assert!(stale(&foreign, me));
        assert!(!stale(&foreign, me.wrapping_add(1)));
        fs::remove_dir(&foreign).unwrap();
        let other = base.path().join("ral-ssh-old");
        fs::create_dir(&other).unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        let link = base.path().join("ral-ssh-999999998-link");
        std::os::unix::fs::symlink(elsewhere.path(), &link).unwrap();

        sweep(base.path());
        assert!(!dead.exists(), "a dead run's directory goes");
        assert!(!reused.exists(), "an unlocked one goes");
        assert!(ours.path().join(LOCK).exists(), "a live run's stays");
        assert!(making.exists(), "one being made stays");
        assert!(other.exists(), "another name stays");
        assert!(fs::symlink_metadata(&link).is_ok(), "a link stays");
        assert!(elsewhere.path().exists());

        let path = ours.path().to_owned();
        drop(ours);
        assert!(!path.exists(), "removed at the end");
    }
}
