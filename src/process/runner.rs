//! The one runner: every child process the library starts (a provider
//! call, a Holo plugin, a generator, `git diff`) is spawned and driven to
//! its end here, in one event loop on the calling thread.
//!
//! A run starts the program directly (argv only, never through a shell) as
//! the leader of its own process group, with exactly the environment it is
//! given, in the working directory it is given (or the caller's), with
//! stdin from `/dev/null` or fed a document as the pipe takes it, stdout
//! and stderr on pipes, and optionally a pipe on file descriptor 3. The
//! loop polls all of them with the leader's exit, so none can fill up and
//! block the program, and hands each line (or each piece of an over-long
//! one) to a [`Handler`] as it arrives: what the lines mean, and what else
//! ends a run early, is the handler's (the provider rules in the parent
//! module, the plugin rules in `streams.rs`). No thread is started, and
//! without fd 3 nothing is forked either: the child is spawned the fast way
//! (`posix_spawn`), which matters when it takes a millisecond itself.
//!
//! The limits are the same for every run:
//! - at the time limit the whole process group gets SIGTERM, then SIGKILL
//!   after [`KILL_GRACE`](super::limits::KILL_GRACE), and the run fails with a timeout;
//! - processes that still hold the output [`OUTPUT_LINGER`] after the
//!   leader exited are killed, and the run goes on to its end;
//! - a forwarded interrupt (see `signals.rs`) ends the group the same way
//!   and fails the run with [`Error::Interrupted`]; so does any run that
//!   ends after one arrived, and none starts after it;
//! - what the run leaves running is ended with it (see `orphans.rs`).

use std::borrow::Cow;
use std::ffi::{OsStr, OsString};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use super::gate;
use super::group::Group;
use super::interpreter::{self, Question};
use super::limits::{MAX_TIMEOUT, OUTPUT_LINGER};
use super::pipes::{Feeder, LineReader, Piece, PollSet};
use crate::error::{Error, Result};
use crate::text::escape;

/// Which output stream a line came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

/// How to start one run, and what differs between runs besides the
/// handling of their lines.
pub(super) struct Options<'a, A> {
    /// Names the program in errors and log lines.
    pub label: &'a str,
    /// What the program is asked to do, for errors.
    pub action: &'a str,
    pub program: &'a Path,
    /// argv[0], when it is not `program`.
    pub arg0: Option<&'a OsStr>,
    pub args: &'a [A],
    /// The complete environment.
    pub env: &'a [(OsString, OsString)],
    /// The working directory; the caller's when `None`. A relative path
    /// `program` still means the caller's: it is made absolute first.
    pub dir: Option<&'a Path>,
    /// Fed to stdin; stdin is `/dev/null` when `None`.
    pub stdin: Option<&'a [u8]>,
    /// Open a pipe on file descriptor 3, and keep at most this many bytes
    /// of what arrives there (the rest is read and dropped).
    pub fd3: Option<usize>,
    pub timeout: Duration,
    /// What the run leaves running and not holding its output is not
    /// ended with it (an update that starts daemons).
    pub release: bool,
    /// When the run is ended early, read what it wrote on stderr first,
    /// and what it says while being ended: its last words often say why.
    pub last_words: bool,
    /// Who it runs as; the caller when `None`.
    pub user: Option<&'a crate::sdk::command::Credentials>,
}

/// What a run's output lines mean: the provider rules or the plugin rules.
pub(super) trait Handler {
    /// The longest piece of a line of `stream` handed over at once; longer
    /// lines come in pieces of this size.
    fn max_line(&self, stream: Stream) -> usize;

    /// A line, or a piece of one, as it arrives. An error ends the run
    /// early and is its outcome.
    fn line(&mut self, stream: Stream, piece: Piece) -> Result<()>;

    /// Stdout was consumed up to what the program wrote so far, and the
    /// next lines would wait for it (told once more when it is complete):
    /// the moment to flush what was buffered. An error ends the run early.
    fn idle(&mut self) -> Result<()> {
        Ok(())
    }

    /// The linger is over: what still holds the output is killed now, so
    /// an unfinished last line after this may have been cut by the kill.
    fn killing_leftovers(&mut self) {}
}

/// How a run ended, when it ran to its end.
pub(super) struct Exit {
    pub status: ExitStatus,
    /// What arrived on file descriptor 3 (as much as was kept).
    pub fd3: Vec<u8>,
    /// Processes it started still held its output [`OUTPUT_LINGER`] after
    /// it exited, and were killed.
    pub killed_leftovers: bool,
}

/// Runs one program to its end, handing its output lines to `handler`.
/// Every failure to run it, or to run it within the limits, is an error; a
/// non-zero exit is not: the caller decides what it means.
pub(super) fn run<A: AsRef<OsStr>>(
    options: &Options<'_, A>,
    handler: &mut dyn Handler,
) -> Result<Exit> {
    let result = spawn(options).and_then(|mut running| running.drive(handler));
    // By now the group is reaped or ended, and the sweep for what it left
    // behind is over. A forwarded signal that came meanwhile is the run's
    // outcome, whatever else it was: the caller must act on it first.
    match gate::interrupted() {
        Some(signal) => Err(Error::Interrupted { signal }),
        None => result,
    }
}

/// Starts the program: the one spawn path.
fn spawn<'a, A: AsRef<OsStr>>(options: &Options<'a, A>) -> Result<Running<'a>> {
    // The time limit counts from the start of the spawn.
    let limits = Limits::new(options.timeout);
    let spawn_error = |source| spawn_error(options, source);
    let program = absolute_program(options).map_err(spawn_error)?;
    let fd3 = match options.fd3 {
        Some(_) => Some(std::io::pipe().map_err(|e| Error::io("creating a pipe", e))?),
        None => None,
    };
    let mut command = command(options, &program);
    if let Some((_, writer)) = &fd3 {
        on_fd3(&mut command, writer.as_raw_fd());
    }
    // A refusal after a forwarded signal becomes `Interrupted` in `run`.
    let mut group = Group::spawn(&mut command, options.release).map_err(spawn_error)?;
    // The Command holds no pipe ends of ours after the spawn, and our copy
    // of the fd 3 write end goes too: EOF then means the program and
    // everything it started closed theirs.
    drop(command);
    let fd3 = fd3.map(|(reader, writer)| {
        drop(writer);
        reader
    });
    let pipes = (|| {
        let stdin = Feeder::new(group.take_stdin(), options.stdin.unwrap_or_default())?;
        let (stdout, stderr) = group.take_output()?;
        let fd3 = fd3.map(LineReader::new).transpose()?;
        Ok::<_, std::io::Error>((stdin, stdout, stderr, fd3))
    })();
    let (stdin, stdout, stderr, fd3) =
        pipes.map_err(|e| Error::io(format!("{}: setting up its pipes", options.label), e))?;
    Ok(Running {
        label: options.label,
        action: options.action,
        timeout: options.timeout,
        last_words: options.last_words,
        limits,
        group,
        stdin,
        stdout,
        stderr,
        fd3,
        fd3_kept: Vec::new(),
        fd3_max: options.fd3.unwrap_or(0),
        killed_leftovers: false,
    })
}

fn spawn_error<A>(options: &Options<'_, A>, source: std::io::Error) -> Error {
    Error::Spawn {
        provider: options.label.to_owned(),
        file: options.program.to_owned(),
        action: options.action.to_owned(),
        source: explain_spawn_error(options.program, source),
    }
}

/// The program to start: a relative path with a directory in it is made
/// absolute when the run has a working directory of its own, so that it
/// still means the caller's. A bare name is looked up on PATH wherever
/// the program runs.
fn absolute_program<'a, A>(options: &Options<'a, A>) -> std::io::Result<Cow<'a, Path>> {
    let relative_path = options.program.is_relative() && options.program.components().count() > 1;
    Ok(match options.dir {
        Some(_) if relative_path => Cow::Owned(std::path::absolute(options.program)?),
        _ => Cow::Borrowed(options.program),
    })
}

/// The command line of the run, with its environment, directory, user,
/// stdin and pipes: argv only, its own process group.
fn command<A: AsRef<OsStr>>(options: &Options<'_, A>, program: &Path) -> Command {
    // A script of `#!/usr/bin/env NAME` starts as the kernel would start
    // it, with NAME's program found once per run (no shim at each call).
    let mut command = match interpreter::launch(program, options.env, ask) {
        Some(launch) => {
            let mut command = Command::new(&launch.program);
            command.args(&launch.words).arg(program);
            command
        }
        None => {
            let mut command = Command::new(program);
            if let Some(arg0) = options.arg0 {
                command.arg0(arg0);
            }
            command
        }
    };
    if let Some(dir) = options.dir {
        command.current_dir(dir);
    }
    if let Some(user) = options.user {
        user.apply(&mut command);
    }
    command
        .args(options.args)
        .env_clear()
        .envs(options.env.iter().map(|(k, v)| (k, v)))
        .stdin(match options.stdin {
            Some(_) => Stdio::piped(),
            None => Stdio::null(),
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    command
}

/// Makes `fd`, the write end of the fd 3 pipe, the child's file
/// descriptor 3.
fn on_fd3(command: &mut Command, fd: RawFd) {
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

/// The most of a program's stdout an [`ask`] keeps: the answers wanted
/// are paths, and one this long is none (`PATH_MAX`).
const MOST_SAID: usize = 4096;

/// Puts `question` to a program through this runner, as its plugin rules
/// would run it (the caller's working directory, stdin from `/dev/null`,
/// stderr dropped): the [`interpreter::Ask`] of every run, by which a
/// shim's real Python is found.
pub(super) fn ask(question: &Question) -> Option<Vec<u8>> {
    let action = question.args.first().map_or_else(
        || "its run".to_owned(),
        |a| a.to_string_lossy().into_owned(),
    );
    let options = Options {
        label: question.label,
        action: &action,
        program: question.program,
        arg0: Some(question.program.as_os_str()),
        args: question.args,
        env: question.env,
        dir: None,
        stdin: None,
        fd3: None,
        timeout: question.limit,
        release: false,
        last_words: false,
        user: None,
    };
    let mut said = Said(Vec::new());
    let exit = run(&options, &mut said).ok()?;
    exit.status.success().then_some(said.0)
}

/// An [`ask`]'s stdout, the first [`MOST_SAID`] bytes or so.
struct Said(Vec<u8>);

impl Handler for Said {
    fn max_line(&self, _: Stream) -> usize {
        // A longer line arrives in pieces, its first one already past
        // any path, as a whole one would be.
        MOST_SAID + 1
    }

    fn line(&mut self, stream: Stream, piece: Piece) -> Result<()> {
        if stream == Stream::Stdout && self.0.len() < MOST_SAID {
            self.0.extend_from_slice(piece.bytes);
        }
        Ok(())
    }
}

/// One run in progress. Dropped before its leader was reaped (an error
/// path), its group is ended (see [`Group`]).
struct Running<'a> {
    label: &'a str,
    action: &'a str,
    timeout: Duration,
    last_words: bool,
    limits: Limits,
    group: Group,
    stdin: Feeder<'a>,
    stdout: LineReader,
    stderr: LineReader,
    fd3: Option<LineReader>,
    fd3_kept: Vec<u8>,
    fd3_max: usize,
    killed_leftovers: bool,
}

/// What one look at the pipes found.
struct Turn {
    /// Something was ready: look again at once, without waiting.
    busy: bool,
    /// Stdout lines were handed over.
    fresh: bool,
}

impl Running<'_> {
    /// The event loop.
    fn drive(&mut self, handler: &mut dyn Handler) -> Result<Exit> {
        // Stdout lines were handed over since `idle` was last told.
        let mut fresh = false;
        let mut told_complete = false;
        // The first look does not wait.
        let mut busy = true;
        loop {
            // The limits hold on every turn, also for a program whose
            // output never lets the loop wait.
            if let Some(signal) = gate::interrupted() {
                self.group.terminate();
                return Err(Error::Interrupted { signal });
            }
            let until = match self.limits.due(self.group.has_exited()) {
                Due::WaitUntil(until) => until,
                Due::KillLeftovers => {
                    handler.killing_leftovers();
                    self.kill_leftovers();
                    continue;
                }
                Due::TimedOut => return Err(self.time_out(handler)),
            };
            if !busy {
                // Nothing was ready: everything written so far is
                // consumed, and the wait for more starts now (or stdout is
                // complete: told once).
                if fresh || (self.stdout.is_done() && !told_complete) {
                    fresh = false;
                    told_complete = self.stdout.is_done();
                    if let Err(e) = handler.idle() {
                        self.end_early(handler);
                        return Err(e);
                    }
                }
                if self.output_done() && self.group.has_exited() {
                    break;
                }
            }
            // Passing `until` is noticed at the top of the next turn.
            let turn = self.turn(if busy { Instant::now() } else { until }, handler)?;
            busy = turn.busy;
            fresh |= turn.fresh;
        }
        let status = self
            .group
            .reap()
            .map_err(|e| Error::io(format!("{}: waiting for {}", self.label, self.action), e))?;
        Ok(Exit {
            status,
            fd3: std::mem::take(&mut self.fd3_kept),
            killed_leftovers: self.killed_leftovers,
        })
    }

    /// Every output pipe is closed and read to its end.
    fn output_done(&self) -> bool {
        self.stdout.is_done()
            && self.stderr.is_done()
            && self.fd3.as_ref().is_none_or(LineReader::is_done)
    }

    /// Waits until a pipe or the leader's exit is ready, at most until
    /// `until` (not at all when it has passed), and takes what is ready,
    /// in this order: stdout lines, stderr lines, fd 3, the exit, room on
    /// stdin. Each pipe is read at most once, so that a flood on one does
    /// not keep the loop from the others, nor from its limits.
    fn turn(&mut self, until: Instant, handler: &mut dyn Handler) -> Result<Turn> {
        let open = |reader: &LineReader| (!reader.is_done()).then(|| reader.fd());
        let stdout = open(&self.stdout);
        let stderr = open(&self.stderr);
        let fd3 = self.fd3.as_ref().and_then(open);
        let exit = self.group.exit_fd();
        let stdin = self.stdin.fd();
        let mut set = PollSet::default();
        for fd in [stdout, stderr, fd3, exit] {
            set.add(fd, libc::POLLIN);
        }
        set.add(stdin, libc::POLLOUT);
        let ready = match set.wait(until) {
            Ok(ready) => ready,
            Err(e) => {
                return Err(self.abandon(handler, format!("waiting for its output failed: {e}")))
            }
        };
        let mut turn = Turn {
            busy: false,
            fresh: false,
        };
        for fd in ready {
            turn.busy = true;
            let handed = if Some(fd) == stdout {
                self.read_lines(Stream::Stdout, handler)
            } else if Some(fd) == stderr {
                self.read_lines(Stream::Stderr, handler)
            } else {
                if Some(fd) == fd3 {
                    self.read_fd3();
                } else if Some(fd) == exit {
                    self.group.note_exit();
                } else if Some(fd) == stdin {
                    self.stdin.write_some();
                }
                continue;
            };
            match handed {
                Ok(lines) => turn.fresh |= lines && Some(fd) == stdout,
                Err(e) => {
                    self.end_early(handler);
                    return Err(e);
                }
            }
        }
        Ok(turn)
    }

    /// Reads what the pipe of `stream` holds now and hands every complete
    /// line (or piece) to the handler; true when some were. An error (the
    /// handler's, or an unreadable stdout; an unreadable stderr counts as
    /// closed) is what the run is to end with; it is not ended yet.
    fn read_lines(&mut self, stream: Stream, handler: &mut dyn Handler) -> Result<bool> {
        let reader = match stream {
            Stream::Stdout => &mut self.stdout,
            Stream::Stderr => &mut self.stderr,
        };
        match reader.fill() {
            Ok(_) => {}
            Err(e) if stream == Stream::Stdout => {
                return Err(self.protocol(format!("reading its output failed: {e}")))
            }
            Err(_) => reader.give_up(),
        }
        let max = handler.max_line(stream);
        let mut handed = false;
        while let Some(piece) = reader.next_piece(max) {
            handed = true;
            handler.line(stream, piece)?;
        }
        Ok(handed)
    }

    /// Keeps what arrived on fd 3, up to its limit.
    fn read_fd3(&mut self) {
        let Some(reader) = &mut self.fd3 else { return };
        // Unreadable, it counts as closed.
        if reader.fill().is_err() {
            reader.give_up();
        }
        let bytes = reader.take_all();
        let room = self.fd3_max.saturating_sub(self.fd3_kept.len());
        self.fd3_kept
            .extend_from_slice(&bytes[..bytes.len().min(room)]);
    }

    /// The leader exited but processes it started still hold its output:
    /// they had their chance to finish.
    fn kill_leftovers(&mut self) {
        self.killed_leftovers = true;
        let pipes = [
            Some(self.stdout.fd()),
            Some(self.stderr.fd()),
            self.fd3.as_ref().map(LineReader::fd),
        ];
        self.group
            .kill_all(&pipes.into_iter().flatten().collect::<Vec<_>>());
    }

    /// Ends the group before its output is complete; with `last_words`,
    /// what it wrote on stderr is handed over first, and what it says
    /// while being ended (a trap's last words, in the pipe by the time the
    /// group is gone) after: a few reads, however much more is coming from
    /// a process that left the group.
    fn end_early(&mut self, handler: &mut dyn Handler) {
        let mut last_words = |running: &mut Self| {
            if running.last_words && !running.stderr.is_done() {
                // Nothing a handler says now changes how the run ends.
                let _ = running.read_lines(Stream::Stderr, handler);
            }
        };
        last_words(self);
        self.group.terminate();
        for _ in 0..4 {
            last_words(self);
        }
    }

    fn time_out(&mut self, handler: &mut dyn Handler) -> Error {
        self.end_early(handler);
        Error::Timeout {
            provider: self.label.to_owned(),
            action: self.action.to_owned(),
            limit: self.timeout,
        }
    }

    fn abandon(&mut self, handler: &mut dyn Handler, message: String) -> Error {
        self.end_early(handler);
        self.protocol(message)
    }

    fn protocol(&self, message: String) -> Error {
        Error::Protocol {
            provider: self.label.to_owned(),
            action: self.action.to_owned(),
            message,
        }
    }
}

/// A run's time limit, and the linger granted to processes an exited
/// leader left holding its output.
struct Limits {
    deadline: Instant,
    linger_until: Option<Instant>,
    lingered: bool,
}

/// What [`Limits::due`] found.
enum Due {
    /// Nothing yet: wait at most until then.
    WaitUntil(Instant),
    /// The linger is over: what is left of the group is to be killed (once).
    KillLeftovers,
    TimedOut,
}

impl Limits {
    fn new(timeout: Duration) -> Limits {
        Limits {
            deadline: Instant::now() + timeout.min(MAX_TIMEOUT),
            linger_until: None,
            lingered: false,
        }
    }

    /// What is due now; the linger starts once the leader has exited.
    fn due(&mut self, leader_exited: bool) -> Due {
        let now = Instant::now();
        if leader_exited && self.linger_until.is_none() && !self.lingered {
            self.linger_until = Some(now + OUTPUT_LINGER);
        }
        if now >= self.deadline {
            return Due::TimedOut;
        }
        match self.linger_until {
            Some(linger) if now >= linger => {
                self.linger_until = None;
                self.lingered = true;
                Due::KillLeftovers
            }
            linger => Due::WaitUntil(linger.map_or(self.deadline, |l| l.min(self.deadline))),
        }
    }
}

/// A spawn error as a user can act on it: "No such file or directory" for
/// a file that exists means its `#!` interpreter is missing, so say that.
fn explain_spawn_error(program: &Path, error: std::io::Error) -> std::io::Error {
    if error.kind() != std::io::ErrorKind::NotFound || !program.is_file() {
        return error;
    }
    match interpreter_of(program) {
        Some(interpreter) if !interpreter.exists() => std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!(
                "interpreter {} not found (named on its first line)",
                escape(&interpreter.to_string_lossy())
            ),
        ),
        _ => error,
    }
}

/// The interpreter a `#!` line names, if the file starts with one.
fn interpreter_of(program: &Path) -> Option<PathBuf> {
    use std::io::Read;
    let mut head = [0u8; 256];
    let file = std::fs::File::open(program).ok()?;
    let read = file.take(head.len() as u64).read(&mut head).ok()?;
    let line = head[..read].split(|&b| b == b'\n').next()?;
    let rest = line.strip_prefix(b"#!")?;
    let text = std::str::from_utf8(rest).ok()?;
    text.split_whitespace().next().map(PathBuf::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_interpreter_is_named() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("p.prov");
        std::fs::write(&script, "#! /nonexistent/python -I\necho hi\n").unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        let err = std::process::Command::new(&script).spawn().unwrap_err();
        let explained = explain_spawn_error(&script, err);
        assert_eq!(
            explained.to_string(),
            "interpreter /nonexistent/python not found (named on its first line)"
        );
        // A file that is missing itself keeps the system's words.
        let gone = dir.path().join("gone.prov");
        let err = std::process::Command::new(&gone).spawn().unwrap_err();
        assert_eq!(
            explain_spawn_error(&gone, err).kind(),
            std::io::ErrorKind::NotFound
        );
        assert!(
            !explain_spawn_error(&gone, std::io::Error::from(std::io::ErrorKind::NotFound))
                .to_string()
                .contains("interpreter")
        );
    }
}
