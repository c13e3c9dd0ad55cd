//! Running a program whose output is passed on as it comes: stdout and
//! stderr line by line, plus an optional message pipe on file descriptor 3
//! (Holo plugins report "not changed" and diff paths there).
//!
//! The rules are the provider rules of the parent module, except for the
//! environment and working directory, which the caller chooses: the program
//! gets its own process group and stdin from `/dev/null`; all three pipes
//! are polled together, so none can fill up and block the program; the
//! time limit ends the whole group (SIGTERM, grace, SIGKILL); processes left
//! holding the pipes after the program exited get a short linger and are
//! then killed; forwarded interrupts end the group before this process.
//! Like a provider call, a run is one event loop on the calling thread.

use std::ffi::OsString;
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use super::describe_status;
use super::group::{Due, Group, Limits};
use super::pipes::{LineReader, PollSet};
use crate::error::{Error, Result};

/// The most bytes kept from file descriptor 3; the rest is read and dropped.
pub const MAX_FD3: usize = 16 * 1024 * 1024;
/// The longest line passed on whole; longer ones arrive in pieces of this
/// size, so memory stays bounded.
pub const MAX_STREAM_LINE: usize = 16 * 1024 * 1024;
/// The most output (stdout and stderr together) passed on from one run:
/// callers keep some of it (scan output, diffs, `--json` results), and a
/// program flooding its output must not fill the memory before its time
/// limit. Each line counts its bytes plus 64 (`LINE_COST`), so a flood of
/// empty lines is bounded too. Past it the program is ended, as at the
/// time limit.
pub const MAX_STREAM_OUTPUT: usize = 16 * 1024 * 1024;
/// What a line costs its keeper besides its bytes (a `String` or JSON
/// value, and its place in a list), roughly.
const LINE_COST: usize = 64;

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
    /// Processes it started still held its output [`OUTPUT_LINGER`](super::OUTPUT_LINGER) after
    /// it exited, and were killed.
    pub killed_leftovers: bool,
}

impl Ended {
    pub fn success(&self) -> bool {
        self.code == Some(0)
    }
}

/// Runs the program, handing each output line to `on_line` as it arrives
/// (in arrival order across the two streams). A non-zero exit is not an
/// error here; the caller decides what it means.
pub fn run_streams(call: &StreamCall, on_line: &mut dyn FnMut(Stream, &[u8])) -> Result<Ended> {
    let limits = Limits::new(call.timeout);
    let fd3 = match call.fd3 {
        true => Some(std::io::pipe().map_err(|e| Error::io("creating a pipe", e))?),
        false => None,
    };
    let mut command = Command::new(call.program);
    command
        .arg0(call.arg0)
        .args(call.args)
        .env_clear()
        .envs(call.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    if let Some((_, writer)) = &fd3 {
        let fd = writer.as_raw_fd();
        // SAFETY: runs in the forked child before exec and only calls dup2
        // and fcntl, which are async-signal-safe.
        unsafe {
            command.pre_exec(move || {
                let moved = if fd == 3 {
                    // Already in place: only the close-on-exec flag goes.
                    libc::fcntl(3, libc::F_SETFD, 0)
                } else {
                    libc::dup2(fd, 3)
                };
                if moved == -1 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    let action = call.args.first().map_or_else(
        || "its run".to_owned(),
        |a| a.to_string_lossy().into_owned(),
    );
    let mut group = Group::spawn(&mut command, false).map_err(|source| Error::Spawn {
        provider: call.label.to_owned(),
        file: call.program.to_owned(),
        action: action.clone(),
        source: super::explain_spawn_error(call.program, source),
    })?;
    // Our copy of the fd 3 write end must be closed, so that EOF means the
    // program (and what it started) closed theirs.
    drop(command);
    let fd3 = fd3.map(|(reader, writer)| {
        drop(writer);
        reader
    });
    let pipes = (|| {
        let (stdout, stderr) = group.take_output()?;
        Ok::<_, std::io::Error>((stdout, stderr, fd3.map(LineReader::new).transpose()?))
    })();
    let (stdout, stderr, fd3) = pipes.map_err(|e| Error::io("setting up a program's pipes", e))?;
    let running = Running {
        group,
        label: call.label,
        action,
        timeout: call.timeout,
        stdout,
        stderr,
        fd3,
        fd3_kept: Vec::new(),
        passed_on: 0,
    };
    running.consume(limits, on_line)
}

struct Running<'a> {
    group: Group,
    label: &'a str,
    /// The first argument (the operation), for messages.
    action: String,
    timeout: Duration,
    stdout: LineReader,
    stderr: LineReader,
    fd3: Option<LineReader>,
    fd3_kept: Vec<u8>,
    /// Bytes of output passed on so far.
    passed_on: usize,
}

impl Running<'_> {
    fn consume(
        mut self,
        mut limits: Limits,
        on_line: &mut dyn FnMut(Stream, &[u8]),
    ) -> Result<Ended> {
        let mut killed_leftovers = false;
        loop {
            let open = |reader: &LineReader| (!reader.is_done()).then(|| reader.fd());
            let stdout = open(&self.stdout);
            let stderr = open(&self.stderr);
            let fd3 = self.fd3.as_ref().and_then(open);
            if stdout.is_none() && stderr.is_none() && fd3.is_none() {
                break;
            }
            self.group.check_interrupt();
            let until = match limits.due(self.group.has_exited()) {
                Due::WaitUntil(until) => until,
                Due::KillLeftovers => {
                    killed_leftovers = true;
                    let pipes = [
                        Some(self.stdout.fd()),
                        Some(self.stderr.fd()),
                        self.fd3.as_ref().map(LineReader::fd),
                    ];
                    self.group
                        .kill_all(&pipes.into_iter().flatten().collect::<Vec<_>>());
                    continue;
                }
                Due::TimedOut => return Err(self.time_out()),
            };
            let mut set = PollSet::default();
            for fd in [stdout, stderr, fd3, self.group.exit_fd()] {
                set.add(fd, libc::POLLIN);
            }
            let ready = set
                .wait(until)
                .map_err(|e| Error::io(format!("{}: waiting for it", self.label), e))?;
            for fd in ready {
                if Some(fd) == self.group.exit_fd() {
                    self.group.note_exit();
                } else if Some(fd) == stdout {
                    self.passed_on += pass_lines(&mut self.stdout, Stream::Stdout, on_line);
                } else if Some(fd) == stderr {
                    self.passed_on += pass_lines(&mut self.stderr, Stream::Stderr, on_line);
                } else if let Some(fd3) = &mut self.fd3 {
                    keep_fd3(fd3, &mut self.fd3_kept);
                }
            }
            if self.passed_on > MAX_STREAM_OUTPUT {
                self.group.terminate();
                return Err(Error::Protocol {
                    provider: self.label.to_owned(),
                    action: self.action.clone(),
                    message: format!(
                        "wrote more than {} MiB of output; it was killed",
                        MAX_STREAM_OUTPUT >> 20
                    ),
                });
            }
        }
        // All pipes are closed; the leader may still run (it closed them).
        if !self.group.wait_exit(limits.deadline(), true) {
            return Err(self.time_out());
        }
        let status = self
            .group
            .reap()
            .map_err(|e| Error::io(format!("{}: waiting for it", self.label), e))?;
        Ok(Ended {
            code: status.code(),
            signal: std::os::unix::process::ExitStatusExt::signal(&status),
            status: describe_status(status),
            fd3: self.fd3_kept,
            killed_leftovers,
        })
    }

    fn time_out(&mut self) -> Error {
        self.group.terminate();
        Error::Timeout {
            provider: self.label.to_owned(),
            action: self.action.clone(),
            limit: self.timeout,
        }
    }
}

/// Passes on the lines that arrived, reading the pipe at most once, so that
/// a program flooding its output is still held to its time limit and to
/// interrupts, which the loop checks between reads. A line is passed on
/// whole up to [`MAX_STREAM_LINE`], in pieces beyond that. Returns what was
/// passed on, as counted against [`MAX_STREAM_OUTPUT`].
fn pass_lines(
    reader: &mut LineReader,
    stream: Stream,
    on_line: &mut dyn FnMut(Stream, &[u8]),
) -> usize {
    // Unreadable output is treated as closed.
    if reader.fill().is_err() {
        reader.give_up();
    }
    let mut passed = 0;
    while let Some(piece) = reader.next_piece(MAX_STREAM_LINE) {
        on_line(stream, piece.bytes);
        passed += piece.bytes.len() + LINE_COST;
    }
    passed
}

/// Keeps the first [`MAX_FD3`] bytes of fd 3; the rest is read and dropped.
/// Reads at most once, like [`pass_lines`].
fn keep_fd3(reader: &mut LineReader, kept: &mut Vec<u8>) {
    if reader.fill().is_err() {
        reader.give_up();
    }
    let bytes = reader.take_all();
    let room = MAX_FD3.saturating_sub(kept.len());
    kept.extend_from_slice(&bytes[..bytes.len().min(room)]);
}
