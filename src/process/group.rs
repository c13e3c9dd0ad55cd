//! A started process group: its leader, a file descriptor that becomes
//! readable when the leader exits, and the ways to end the group.
//!
//! The leader's exit is learnt without reaping it (a pidfd, or on kernels
//! without one a thread blocked in `waitid` with `WNOWAIT`), so its process
//! ID, which is also the group's, cannot be handed to an unrelated group
//! while we may still signal it. A group dropped before it was reaped is
//! terminated, so no error path leaves a provider behind.

use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::process::{Child, ChildStdin, Command, ExitStatus};
use std::time::Instant;

use rustix::io::Errno;
use rustix::process::{
    kill_process_group, pidfd_open, waitid, Pid, PidfdFlags, Signal, WaitId, WaitIdOptions,
};

use super::limits::KILL_GRACE;
use super::orphans;
use super::pipes::{LineReader, PollSet};
use super::signals::{self, Registration};

/// A running process group whose leader we started.
pub(super) struct Group {
    child: Child,
    registration: Registration,
    exit: ExitFd,
    exited: bool,
    reaped: bool,
    /// What the call leaves running is left alone (`starts_daemons`).
    release: bool,
}

/// Becomes readable when the leader exits.
pub(super) enum ExitFd {
    Pidfd(OwnedFd),
    /// The read end of a pipe whose write end a watcher thread drops.
    Watcher(std::io::PipeReader),
}

impl ExitFd {
    pub(super) fn raw(&self) -> RawFd {
        match self {
            ExitFd::Pidfd(fd) => fd.as_raw_fd(),
            ExitFd::Watcher(pipe) => pipe.as_raw_fd(),
        }
    }
}

impl Group {
    /// Spawns `command`, which must make the child a process-group leader
    /// (`process_group(0)`), and registers the group for interrupts and as
    /// a running call (see `orphans`). With `release`, processes the call
    /// leaves running when it ends are not ended. After a forwarded signal
    /// nothing is started (see [`signals::spawn_registered`]).
    pub(super) fn spawn(command: &mut Command, release: bool) -> std::io::Result<Group> {
        let (mut child, mut registration) = signals::spawn_registered(|| {
            let child = command.spawn()?;
            let pid = child.id() as i32;
            orphans::register(pid);
            Ok((child, pid))
        })?;
        let pid = child.id() as i32;
        let exit = match exit_fd(pid) {
            Ok(exit) => exit,
            Err(e) => {
                // The unreaped child still holds its group ID.
                signal_group(pid, Signal::KILL);
                registration.release();
                let _ = child.wait();
                orphans::call_ended(pid, false);
                return Err(e);
            }
        };
        Ok(Group {
            child,
            registration,
            exit,
            exited: false,
            reaped: false,
            release,
        })
    }

    /// The leader's stdin, when the command piped it.
    pub(super) fn take_stdin(&mut self) -> Option<ChildStdin> {
        self.child.stdin.take()
    }

    /// The leader's stdout and stderr, which the command must pipe, as
    /// non-blocking line readers.
    pub(super) fn take_output(&mut self) -> std::io::Result<(LineReader, LineReader)> {
        let missing = || std::io::Error::other("the child has no pipe");
        let stdout = self.child.stdout.take().ok_or_else(missing)?;
        let stderr = self.child.stderr.take().ok_or_else(missing)?;
        Ok((LineReader::new(stdout)?, LineReader::new(stderr)?))
    }

    /// The descriptor to poll for the leader's exit, until it is known.
    pub(super) fn exit_fd(&self) -> Option<RawFd> {
        (!self.exited).then(|| self.exit.raw())
    }

    /// Records that the exit descriptor became readable.
    pub(super) fn note_exit(&mut self) {
        self.exited = true;
    }

    pub(super) fn has_exited(&self) -> bool {
        self.exited
    }

    /// Waits for the leader to exit; false when `until` passed first.
    fn wait_exit(&mut self, until: Instant) -> bool {
        while !self.exited {
            let mut set = PollSet::default();
            set.add(Some(self.exit.raw()), libc::POLLIN);
            match set.wait(until).map(|mut ready| ready.next().is_some()) {
                Ok(true) => self.exited = true,
                Ok(false) if Instant::now() < until => {}
                _ => return false,
            }
        }
        true
    }

    /// Ends the whole group: SIGTERM, a grace period, then SIGKILL, and
    /// reaps the leader. The leader is reaped only after the SIGKILL, so the
    /// group ID cannot have been handed to another group in between.
    pub(super) fn terminate(&mut self) {
        if self.reaped {
            return;
        }
        self.signal(Signal::TERM);
        self.wait_exit(Instant::now() + KILL_GRACE);
        // Members that ignored SIGTERM, or outlived the leader, go now.
        self.signal(Signal::KILL);
        self.registration.release();
        self.reaped = true;
        let _ = self.child.wait();
        // An ended call releases nothing.
        orphans::call_ended(self.child.id() as i32, false);
    }

    /// Kills every member of the group at once, and what left it holding
    /// one of `pipes` (our ends of its output): leftovers of an exited
    /// leader that still hold its output.
    pub(super) fn kill_all(&self, pipes: &[RawFd]) {
        self.signal(Signal::KILL);
        if !self.reaped {
            let inodes: Vec<u64> = pipes.iter().filter_map(|&fd| inode_of(fd)).collect();
            orphans::kill_now(self.child.id() as i32, self.release, &inodes);
        }
    }

    fn signal(&self, signal: Signal) {
        if !self.reaped {
            // The process group created for this child: its unreaped
            // leader keeps the group ID ours.
            signal_group(self.child.id() as i32, signal);
        }
    }

    /// Reaps the exited leader, then ends what the call left running
    /// (unless it releases it).
    pub(super) fn reap(&mut self) -> std::io::Result<ExitStatus> {
        self.registration.release();
        self.reaped = true;
        let status = self.child.wait();
        orphans::call_ended(self.child.id() as i32, self.release);
        status
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        self.terminate();
    }
}

/// Sends `signal` to the process group `group`. An ID of 0 or below names
/// no group a call leads (kill(2) would take 0 for this process's own
/// group and a negative one for a single process) and is passed over. A
/// bare system call: also for the signal handlers and the keeper's
/// forked child.
pub(super) fn signal_group(group: i32, signal: Signal) {
    if let Some(group) = Pid::from_raw(group.max(0)) {
        let _ = kill_process_group(group, signal);
    }
}

/// The inode of the file `fd` is open on (a pipe's, to find its holders).
fn inode_of(fd: RawFd) -> Option<u64> {
    // SAFETY: `fd` is one of our pipes' ends, which the caller holds open
    // for the call (the event loop keeps raw descriptors).
    let fd = unsafe { BorrowedFd::borrow_raw(fd) };
    rustix::fs::fstat(fd).ok().map(|stat| stat.st_ino)
}

/// A pidfd for `pid`, or a watcher thread's pipe where the kernel has none.
pub(super) fn exit_fd(pid: i32) -> std::io::Result<ExitFd> {
    let Some(leader) = Pid::from_raw(pid) else {
        return Err(std::io::Error::from(std::io::ErrorKind::InvalidInput));
    };
    if let Ok(fd) = pidfd_open(leader, PidfdFlags::empty()) {
        return Ok(ExitFd::Pidfd(fd));
    }
    let (reader, writer) = std::io::pipe()?;
    std::thread::spawn(move || {
        // WNOWAIT leaves our own child to be reaped later by its handle.
        let exited = WaitIdOptions::EXITED | WaitIdOptions::NOWAIT;
        while let Err(Errno::INTR) = waitid(WaitId::Pid(leader), exited) {}
        drop(writer);
    });
    Ok(ExitFd::Watcher(reader))
}
