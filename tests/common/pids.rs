//! Processes a test caused: whether one is gone, and killing what a
//! failing test would leave running. Shared by the test binaries
//! (`#[path]`-included), so a leftover is checked the same way everywhere.

// Each test binary uses its own part of this.
#![allow(dead_code)]

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// How long a process that was sent SIGKILL may take to finish dying.
const DYING_MS: i32 = 10_000;

/// A pidfd for `pid`, or None when there is no such process. It names that
/// one process for as long as it is open, whatever later gets its PID.
fn pidfd_open(pid: i32) -> Option<OwnedFd> {
    // SAFETY: pidfd_open takes two integers and returns a new descriptor
    // or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        let error = std::io::Error::last_os_error();
        assert_eq!(
            error.raw_os_error(),
            Some(libc::ESRCH),
            "pidfd_open {pid}: {error}"
        );
        return None;
    }
    // SAFETY: the descriptor was just created and is owned by nothing else.
    Some(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// Sends SIGKILL to the process of a pidfd (nothing if it has exited).
fn kill(pidfd: &OwnedFd) {
    // SAFETY: signals the process the pidfd names, and only it.
    unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            pidfd.as_raw_fd(),
            libc::SIGKILL,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        )
    };
}

/// Fails unless process `pid`, known by `marker` in its command line
/// (`/proc/PID/cmdline`), is gone: exited (a zombie counts), or the PID
/// now names another process. A killed process finishes dying right after
/// its killer returns, so this waits for its exit, at most 10 s; one still
/// running then is killed, so a failing test leaves nothing behind.
#[track_caller]
pub fn assert_gone(pid: i32, marker: &str) {
    let Some(pidfd) = pidfd_open(pid) else {
        return;
    };
    // Read after the pidfd is open: if it shows the marker, the pidfd is
    // that process's (its PID cannot be reused before it is reaped).
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
    if !cmdline.contains(marker) {
        return;
    }
    let mut poll = libc::pollfd {
        fd: pidfd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd, for the length given.
    if unsafe { libc::poll(&mut poll, 1, DYING_MS) } == 1 {
        return;
    }
    kill(&pidfd);
    panic!("process {pid} ({cmdline}) is still running");
}

/// Fails unless process `pid` runs (not a zombie) with `marker` in its
/// command line.
#[track_caller]
pub fn assert_running(pid: i32, marker: &str) {
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
    assert!(
        cmdline.contains(marker),
        "process {pid} ({marker}) is gone (its command line is {cmdline:?})"
    );
}

/// Processes that must be gone by the end of a test: dropping this kills
/// any still running, so a test that fails (or a product that leaves them)
/// does not leave them running for good. Killing goes through pidfds taken
/// while they were known to run, so it never hits a process that got the
/// PID later.
pub struct KillOnDrop(Vec<OwnedFd>);

impl KillOnDrop {
    /// Takes hold of the running processes among `pids`.
    pub fn new(pids: &[i32]) -> KillOnDrop {
        KillOnDrop(pids.iter().filter_map(|&pid| pidfd_open(pid)).collect())
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        self.0.iter().for_each(kill);
    }
}

/// The process IDs a fixture wrote to `file` (decimal, separated by
/// whitespace).
#[track_caller]
pub fn pids_in(file: &std::path::Path) -> Vec<i32> {
    let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    text.split_whitespace()
        .map(|pid| {
            pid.parse()
                .unwrap_or_else(|e| panic!("{}: {text:?}: {e}", file.display()))
        })
        .collect()
}

/// The one process ID a fixture wrote to `file`.
#[track_caller]
pub fn pid_in(file: &std::path::Path) -> i32 {
    let pids = pids_in(file);
    assert_eq!(pids.len(), 1, "{}: {pids:?}", file.display());
    pids[0]
}
