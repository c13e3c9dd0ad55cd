//! A child that runs beside the calls for as long as its owner needs it
//! (an ssh master): started like a call (argv only, its own process
//! group, refused after a forwarded interrupt and killed by one), but
//! kept out of the sweeps for what calls leave behind, and ended only by
//! its owner.
//!
//! Its stdin is a pipe whose write end only this process holds, until the
//! daemon is ended: when this process dies, however it dies (SIGKILL
//! included), the daemon reads end of file there. An ssh master passes
//! that on to the command it runs on the target, which is how the target
//! learns that the controller is gone.
//!
//! A daemon may also be a session that another process runs for this one
//! (a kept ssh master, asked over its control socket: [`Daemon::attach`]):
//! the same pipes, and a socket that says when it is over and ends it
//! when closed; there is no child to start, signal or reap.

use std::ffi::OsString;
use std::fs::File;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rustix::io::Errno;
use rustix::net::RecvFlags;
use rustix::process::Signal;

use super::pipes::{text, LineReader, PollSet};
use super::{gate, group, orphans, signals};
use crate::error::{Error, Result};

/// The longest stdout line read from a daemon.
const MAX_LINE: usize = 64 * 1024;
/// How long [`Daemon::end`] waits for a daemon that got SIGKILL to go.
const KILL_WAIT: Duration = Duration::from_secs(5);
/// How often [`Daemon::end`] looks whether the daemon has gone where it
/// cannot be told (no pidfd, no watcher thread).
const EXIT_POLL: Duration = Duration::from_millis(10);

/// A running daemon; ended (SIGKILL to its group, or its socket closed)
/// when dropped.
pub struct Daemon {
    label: String,
    runner: Runner,
    stdin: Option<OwnedFd>,
    /// `None` only while it is being started.
    stdout: Option<LineReader>,
    /// A line begun on stdout and not yet ended.
    partial: Vec<u8>,
    reaped: bool,
}

/// What runs the daemon.
enum Runner {
    /// A child of this process, leading its own group.
    Child(Child),
    /// Another process, over this socket: it reads end of file once the
    /// session is over, and closing it ends the session.
    Socket(Option<OwnedFd>),
}

impl Daemon {
    /// Starts `program` with `args`, exactly the environment `env`, stdout
    /// on a pipe read by [`Daemon::read_line`] and stderr into `stderr`.
    pub fn start(
        label: &str,
        program: &Path,
        args: &[OsString],
        env: &[(OsString, OsString)],
        stderr: File,
    ) -> Result<Daemon> {
        let spawn_error = |source| Error::Spawn {
            provider: label.to_owned(),
            file: program.to_owned(),
            action: "its start".to_owned(),
            source,
        };
        let mut command = Command::new(program);
        command
            .args(args)
            .env_clear()
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .process_group(0);
        // Under the spawn gate, as a call: a sweep never sees it unlisted,
        // and an interrupt either refuses it or finds it listed.
        let mut child = gate::with_spawn_gate(|| {
            if let Some(signal) = gate::interrupted() {
                return Err(Error::Interrupted { signal });
            }
            let child = command.spawn().map_err(spawn_error)?;
            let pid = child.id() as i32;
            orphans::keep(pid);
            signals::end_on_interrupt(pid);
            Ok(child)
        })?;
        drop(command);
        let stdin = child.stdin.take().map(OwnedFd::from);
        let stdout = child.stdout.take();
        let mut daemon = Daemon {
            label: label.to_owned(),
            runner: Runner::Child(child),
            stdin,
            stdout: None,
            partial: Vec::new(),
            reaped: false,
        };
        // Dropped on an error, the daemon is ended.
        let reader = stdout
            .ok_or_else(|| std::io::Error::other("no stdout pipe"))
            .and_then(LineReader::new)
            .map_err(|e| Error::io(format!("{label}: setting up its pipes"), e))?;
        daemon.stdout = Some(reader);
        Ok(daemon)
    }

    /// A daemon that another process runs for this one: `stdin` and
    /// `stdout` are this side of its pipes, `socket` says when it is over
    /// (end of file) and ends it when closed.
    pub fn attach(
        label: &str,
        stdin: impl Into<OwnedFd>,
        stdout: impl Into<OwnedFd>,
        socket: impl Into<OwnedFd>,
    ) -> Result<Daemon> {
        let stdout = LineReader::new(stdout)
            .map_err(|e| Error::io(format!("{label}: setting up its pipes"), e))?;
        Ok(Daemon {
            label: label.to_owned(),
            runner: Runner::Socket(Some(socket.into())),
            stdin: Some(stdin.into()),
            stdout: Some(stdout),
            partial: Vec::new(),
            reaped: false,
        })
    }

    /// The daemon's process ID (also its group's); `None` when another
    /// process runs it.
    pub fn pid(&self) -> Option<i32> {
        match &self.runner {
            Runner::Child(child) => Some(child.id() as i32),
            Runner::Socket(_) => None,
        }
    }

    /// The next line the daemon writes on stdout, without its newline;
    /// `None` once stdout is closed (the daemon ended). Fails when `until`
    /// passes first, or a forwarded interrupt arrives.
    pub fn read_line(&mut self, until: Instant) -> Result<Option<String>> {
        let Some(stdout) = self.stdout.as_mut() else {
            return Ok(None);
        };
        loop {
            while let Some(piece) = stdout.next_piece(MAX_LINE) {
                // A longer line is kept cut at MAX_LINE: what a daemon (a
                // target's shell) says never grows without bound here.
                let room = MAX_LINE.saturating_sub(self.partial.len());
                self.partial
                    .extend_from_slice(&piece.bytes[..piece.bytes.len().min(room)]);
                if piece.ends {
                    let line = text(&self.partial).into_owned();
                    self.partial.clear();
                    return Ok(Some(line));
                }
            }
            if stdout.is_done() {
                return Ok(None);
            }
            if let Some(signal) = gate::interrupted() {
                return Err(Error::Interrupted { signal });
            }
            if Instant::now() >= until {
                return Err(Error::Timeout {
                    provider: self.label.clone(),
                    action: "its start".to_owned(),
                    limit: Duration::ZERO,
                });
            }
            let mut set = PollSet::default();
            set.add(Some(stdout.fd()), libc::POLLIN);
            set.wait(until)
                .map(|_| ())
                .map_err(|e| Error::io(format!("{}: waiting for its output", self.label), e))?;
            stdout
                .fill()
                .map_err(|e| Error::io(format!("{}: reading its output", self.label), e))?;
        }
    }

    /// Closes its stdin, gives it up to `grace` to exit, then kills its
    /// group, and reaps it; or, for a daemon another process runs, gives
    /// it up to `grace` to say it is over, then closes its socket.
    pub fn end(&mut self, grace: Duration) {
        if self.reaped {
            return;
        }
        self.stdin = None;
        let until = Instant::now() + grace;
        let pid = match &mut self.runner {
            Runner::Child(child) => child.id() as i32,
            Runner::Socket(socket) => {
                if let Some(fd) = socket.as_ref().map(AsFd::as_fd) {
                    wait_for_end(fd, until);
                }
                *socket = None;
                self.reaped = true;
                return;
            }
        };
        // Woken by its exit, not by a clock: a closed connection is seen
        // gone at once (every run ends one per target).
        let exit = (grace > Duration::ZERO)
            .then(|| group::exit_fd(pid).ok())
            .flatten();
        while Instant::now() < until && !self.try_reap() {
            match &exit {
                Some(exit) => {
                    let mut set = PollSet::default();
                    set.add(Some(exit.raw()), libc::POLLIN);
                    if set.wait(until).is_err() {
                        std::thread::sleep(EXIT_POLL);
                    }
                }
                None => std::thread::sleep(EXIT_POLL),
            }
        }
        if !self.reaped {
            // The group made for this child: its unreaped leader keeps the
            // group ID ours.
            group::signal_group(pid, Signal::KILL);
            let until = Instant::now() + KILL_WAIT;
            while !self.try_reap() {
                if Instant::now() >= until {
                    log::warn!("{}: process {pid} outlived SIGKILL; leaving it", self.label,);
                    self.reaped = true;
                    return;
                }
                std::thread::sleep(EXIT_POLL);
            }
        }
    }

    /// Reaps the daemon if it has exited; whether it is reaped. Under the
    /// spawn gate, so that its ID leaves the kept list before any new
    /// child can take it.
    fn try_reap(&mut self) -> bool {
        let Runner::Child(child) = &mut self.runner else {
            return self.reaped;
        };
        let pid = child.id() as i32;
        let reaped = gate::with_spawn_gate(|| match child.try_wait() {
            Ok(None) => false,
            // Reaped now, or by someone else (an error): gone either way.
            Ok(Some(_)) | Err(_) => {
                orphans::forget(pid);
                signals::keep_running_on_interrupt(pid);
                true
            }
        });
        self.reaped = reaped;
        reaped
    }
}

/// Reads `socket` until its end, or `until`: what another process says
/// while a session ends does not matter, only that it is over.
fn wait_for_end(socket: BorrowedFd<'_>, until: Instant) {
    let mut scrap = [0u8; 256];
    while Instant::now() < until {
        let mut set = PollSet::default();
        set.add(Some(socket.as_raw_fd()), libc::POLLIN);
        if set.wait(until).is_err() {
            return;
        }
        match rustix::net::recv(socket, &mut scrap, RecvFlags::DONTWAIT) {
            Ok((0, _)) => return,
            Ok(_) | Err(Errno::AGAIN | Errno::INTR) => {}
            Err(_) => return,
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.end(Duration::ZERO);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_longer_than_the_limit_is_kept_cut_and_the_next_one_read() {
        let script = "head -c 1000000 /dev/zero | tr '\\0' a; echo; echo next";
        let args = [OsString::from("-c"), OsString::from(script)];
        let stderr = tempfile::tempfile().unwrap();
        let mut daemon = Daemon::start("test", Path::new("/bin/sh"), &args, &[], stderr).unwrap();
        let until = Instant::now() + Duration::from_secs(30);
        let long = daemon.read_line(until).unwrap().unwrap();
        assert_eq!(long.len(), MAX_LINE);
        assert!(long.bytes().all(|b| b == b'a'));
        assert_eq!(daemon.read_line(until).unwrap().as_deref(), Some("next"));
        assert_eq!(daemon.read_line(until).unwrap(), None);
    }
}
