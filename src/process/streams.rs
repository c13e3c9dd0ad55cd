//! Running a program whose output is passed on as it comes: stdout and
//! stderr line by line, plus an optional message pipe on file descriptor 3
//! (Holo plugins report "not changed" and diff paths there).
//!
//! The rules are the provider rules of the parent module, except for the
//! environment and working directory, which the caller chooses: the program
//! gets its own process group and stdin from `/dev/null`; all three pipes
//! are read concurrently, so none can fill up and block the program; the
//! time limit ends the whole group (SIGTERM, grace, SIGKILL); processes left
//! holding the pipes after the program exited get a short linger and are
//! then killed; forwarded interrupts end the group before this process.

use std::ffi::OsString;
use std::io::{BufReader, Read};
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender};
use std::time::{Duration, Instant};

use super::{
    describe_status, forwarded_set, read_bounded, remaining, reraise, track_group, untrack_group,
    watch_exit, Bounded, SignalsHeld, INTERRUPTED, INTERRUPT_POLL, KILL_GRACE, MAX_LINE,
    MAX_TIMEOUT, OUTPUT_LINGER,
};
use crate::error::{Error, Result};

/// The most bytes kept from file descriptor 3; the rest is read and dropped.
pub const MAX_FD3: usize = 16 * 1024 * 1024;
/// The longest line passed on whole; longer ones arrive in pieces of this
/// size, so memory stays bounded.
pub const MAX_STREAM_LINE: usize = 16 * 1024 * 1024;

/// Which output stream a line came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

/// One program run.
pub struct StreamCall<'a> {
    /// Names the program in errors ("plugin files").
    pub label: &'a str,
    pub program: &'a Path,
    /// argv[0] as the program should see it.
    pub arg0: &'a OsString,
    pub args: &'a [OsString],
    /// The complete environment.
    pub env: &'a [(OsString, OsString)],
    /// Open a pipe on file descriptor 3 and collect what arrives there.
    pub fd3: bool,
    pub timeout: Duration,
}

/// How the program ended.
#[derive(Debug)]
pub struct Ended {
    /// Its exit code, or `None` when a signal ended it.
    pub code: Option<i32>,
    /// The signal that ended it, if one did.
    pub signal: Option<i32>,
    /// "exit status N" or "killed by signal N".
    pub status: String,
    /// Everything written to file descriptor 3 (at most [`MAX_FD3`] bytes).
    pub fd3: Vec<u8>,
    /// Processes it started still held its output [`OUTPUT_LINGER`] after
    /// it exited, and were killed.
    pub killed_leftovers: bool,
}

impl Ended {
    pub fn success(&self) -> bool {
        self.code == Some(0)
    }
}

enum Event {
    /// A line (without its newline; a final unterminated line too).
    Line(Stream, Vec<u8>),
    Closed,
    Fd3(Vec<u8>),
    LeaderExited,
}

/// Runs the program, handing each output line to `on_line` as it arrives
/// (in arrival order across the two streams). A non-zero exit is not an
/// error here; the caller decides what it means.
pub fn run_streams(call: &StreamCall, on_line: &mut dyn FnMut(Stream, &[u8])) -> Result<Ended> {
    let deadline = Instant::now() + call.timeout.min(MAX_TIMEOUT);
    let pipe = || std::io::pipe().map_err(|e| Error::io("creating a pipe", e));
    let (stdout_reader, stdout_writer) = pipe()?;
    let (stderr_reader, stderr_writer) = pipe()?;
    let fd3 = if call.fd3 { Some(pipe()?) } else { None };
    let held = SignalsHeld::new();
    let forwarding = held.old.is_some();
    let child = {
        let mut command = std::process::Command::new(call.program);
        command
            .arg0(call.arg0)
            .args(call.args)
            .env_clear()
            .envs(call.env.iter().map(|(k, v)| (k, v)))
            .stdin(std::process::Stdio::null())
            .stdout(stdout_writer)
            .stderr(stderr_writer)
            .process_group(0);
        let fd3_writer = fd3.as_ref().map(|(_, writer)| writer.as_raw_fd());
        let set = forwarded_set();
        // SAFETY: runs in the forked child before exec and only calls
        // dup2, fcntl and sigprocmask, which are async-signal-safe.
        unsafe {
            command.pre_exec(move || {
                if let Some(fd) = fd3_writer {
                    if fd == 3 {
                        // Already in place: only the close-on-exec flag goes.
                        if libc::fcntl(3, libc::F_SETFD, 0) == -1 {
                            return Err(std::io::Error::last_os_error());
                        }
                    } else if libc::dup2(fd, 3) == -1 {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                if forwarding {
                    libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
                }
                Ok(())
            });
        }
        let spawned = command.spawn().map_err(|source| Error::Spawn {
            provider: call.label.to_owned(),
            file: call.program.to_owned(),
            action: call
                .args
                .first()
                .map_or_else(String::new, |a| a.to_string_lossy().into_owned()),
            source,
        });
        // The Command holds the write ends; they must be closed here so that
        // EOF means the program (and what it started) closed them.
        drop(command);
        spawned?
    };
    let group = child.id() as i32;
    let slot = if forwarding { track_group(group) } else { None };
    let (sender, events) = mpsc::sync_channel(64);
    let exit_events = sender.clone();
    let exit = watch_exit(group, move || {
        let _ = exit_events.send(Event::LeaderExited);
    });
    let mut open = 2;
    spawn_line_reader(stdout_reader, Stream::Stdout, sender.clone());
    spawn_line_reader(stderr_reader, Stream::Stderr, sender.clone());
    if let Some((reader, writer)) = fd3 {
        drop(writer);
        open += 1;
        spawn_fd3_reader(reader, sender);
    } else {
        drop(sender);
    }
    drop(held);
    let running = Running {
        child,
        group,
        slot,
        exit,
        label: call.label,
        action: call.args.first().map_or_else(
            || "its run".to_owned(),
            |a| a.to_string_lossy().into_owned(),
        ),
        timeout: call.timeout,
    };
    let result = running.consume(&events, open, deadline, on_line);
    untrack_group(slot, group);
    result
}

struct Running<'a> {
    child: std::process::Child,
    group: i32,
    /// Where the interrupt handler finds `group`.
    slot: Option<usize>,
    exit: std::sync::Arc<super::ExitWatch>,
    label: &'a str,
    /// The first argument (the operation), for messages.
    action: String,
    timeout: Duration,
}

impl Running<'_> {
    fn consume(
        mut self,
        events: &Receiver<Event>,
        mut open: usize,
        deadline: Instant,
        on_line: &mut dyn FnMut(Stream, &[u8]),
    ) -> Result<Ended> {
        let mut fd3 = Vec::new();
        let mut killed_leftovers = false;
        let mut linger_until: Option<Instant> = None;
        while open > 0 {
            let until = linger_until.map_or(deadline, |linger| linger.min(deadline));
            match self.receive(events, until) {
                Some(Event::Line(stream, line)) => on_line(stream, &line),
                Some(Event::Fd3(bytes)) => fd3 = bytes,
                Some(Event::Closed) => open -= 1,
                Some(Event::LeaderExited) => {
                    linger_until = Some(Instant::now() + OUTPUT_LINGER);
                }
                None if linger_until.is_some() && Instant::now() < deadline => {
                    killed_leftovers = true;
                    // SAFETY: the leader is exited but unreaped, so the
                    // group ID is still ours.
                    unsafe { libc::kill(-self.group, libc::SIGKILL) };
                    linger_until = None;
                }
                None => return Err(self.time_out()),
            }
        }
        // All pipes are closed; the leader may still run (it closed them).
        loop {
            self.check_interrupt();
            if self
                .exit
                .wait_until((Instant::now() + INTERRUPT_POLL).min(deadline))
            {
                break;
            }
            if Instant::now() >= deadline {
                return Err(self.time_out());
            }
        }
        untrack_group(self.slot, self.group);
        let status = self
            .child
            .wait()
            .map_err(|e| Error::io(format!("{}: waiting for it", self.label), e))?;
        Ok(Ended {
            code: status.code(),
            signal: std::os::unix::process::ExitStatusExt::signal(&status),
            status: describe_status(status),
            fd3,
            killed_leftovers,
        })
    }

    /// The next event, or `None` when `until` passed first.
    fn receive(&mut self, events: &Receiver<Event>, until: Instant) -> Option<Event> {
        loop {
            self.check_interrupt();
            let left = remaining(until);
            if left.is_zero() {
                return None;
            }
            match events.recv_timeout(left.min(INTERRUPT_POLL)) {
                Ok(event) => return Some(event),
                Err(RecvTimeoutError::Timeout) => continue,
                // Cannot happen while a reader is open; treat as closed.
                Err(RecvTimeoutError::Disconnected) => return Some(Event::Closed),
            }
        }
    }

    fn check_interrupt(&mut self) {
        let signal = INTERRUPTED.load(Ordering::SeqCst);
        if signal != 0 {
            self.terminate();
            reraise(signal);
        }
    }

    fn terminate(&mut self) {
        // SAFETY: signals the process group created for this child, whose
        // unreaped leader keeps the group ID ours.
        unsafe { libc::kill(-self.group, libc::SIGTERM) };
        self.exit.wait_until(Instant::now() + KILL_GRACE);
        // SAFETY: as above.
        unsafe { libc::kill(-self.group, libc::SIGKILL) };
        untrack_group(self.slot, self.group);
        let _ = self.child.wait();
    }

    fn time_out(&mut self) -> Error {
        self.terminate();
        Error::Timeout {
            provider: self.label.to_owned(),
            action: self.action.clone(),
            limit: self.timeout,
        }
    }
}

fn spawn_line_reader(pipe: std::io::PipeReader, stream: Stream, sender: SyncSender<Event>) {
    std::thread::spawn(move || {
        let mut reader = BufReader::new(pipe);
        let mut buf = Vec::new();
        let mut line = Vec::new();
        loop {
            let complete = match read_bounded(&mut reader, MAX_LINE, &mut buf) {
                Ok(Bounded::Line) => true,
                Ok(Bounded::TooLong) => false,
                Ok(Bounded::Eof) | Err(_) => break,
            };
            line.append(&mut buf);
            // A line is passed on whole up to MAX_STREAM_LINE, in pieces
            // beyond that.
            if (complete || line.len() >= MAX_STREAM_LINE)
                && sender
                    .send(Event::Line(stream, std::mem::take(&mut line)))
                    .is_err()
            {
                return;
            }
        }
        if !line.is_empty() {
            let _ = sender.send(Event::Line(stream, line));
        }
        let _ = sender.send(Event::Closed);
    });
}

fn spawn_fd3_reader(pipe: std::io::PipeReader, sender: SyncSender<Event>) {
    std::thread::spawn(move || {
        let mut kept = Vec::new();
        let mut reader = pipe;
        let mut chunk = [0u8; 8192];
        loop {
            match reader.read(&mut chunk) {
                Ok(0) => break,
                Ok(n) => {
                    let room = MAX_FD3.saturating_sub(kept.len());
                    kept.extend_from_slice(&chunk[..n.min(room)]);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => break,
            }
        }
        let _ = sender.send(Event::Fd3(kept));
        let _ = sender.send(Event::Closed);
    });
}
