//! The one place where provider processes are started, fed, read and ended.
//!
//! Every call runs the provider directly (argv only, never through a shell),
//! in its own process group, with stdin from `/dev/null` (or a document for
//! the json convention) and a scrubbed environment. A call is one event
//! loop on the calling thread: it polls the provider's stdout and stderr
//! and its exit, hands each stdout line to the caller straight from the
//! read buffer, so a listing is processed while the provider writes it and
//! memory stays bounded, and logs each stderr line under the provider's
//! name as it comes. No thread is started and nothing is forked: the child
//! is spawned the fast way (`posix_spawn`), which matters when the provider
//! itself takes a millisecond. When the time limit passes, the whole process
//! group gets SIGTERM, then SIGKILL after a short grace period.
//!
//! Processes that leave the group are found and ended too, once the
//! binary made this process a child subreaper ([`adopt_orphans`]; see
//! `orphans.rs`).
//!
//! The provider's exit is watched without reaping it (a pidfd; see
//! `group.rs`), so its process-group ID cannot be reused by an unrelated
//! group while we may still signal it. When the provider has exited but
//! processes it started keep its output open, they get [`OUTPUT_LINGER`]
//! to finish and are then killed, instead of stalling the call until its
//! time limit.

use std::ffi::{OsStr, OsString};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::metadata::REDACTED;
use crate::text::escape;
use group::{Due, Group, Limits};
use pipes::{text, Feeder, LineReader, PollSet};

mod group;
mod orphans;
mod pipes;
mod signals;
pub mod streams;

pub use orphans::adopt_orphans;

pub use signals::{
    exit_if_interrupted, forward_interrupts, forward_interrupts_deferred, keep_on_interrupt,
    remove_on_interrupt,
};

/// The longest line accepted from a provider, in bytes.
pub const MAX_LINE: usize = 64 * 1024;
/// The largest answer accepted for a single resource (find, update, or one
/// resource of a listing), in bytes.
pub const MAX_ANSWER: usize = 1024 * 1024;
/// How long a provider has to exit after SIGTERM before it gets SIGKILL.
pub const KILL_GRACE: Duration = Duration::from_secs(2);
/// How long processes left behind by an exited provider may keep its
/// output open before they are killed.
pub const OUTPUT_LINGER: Duration = Duration::from_secs(2);
/// The longest time limit honoured; longer ones are cut to this.
const MAX_TIMEOUT: Duration = Duration::from_secs(365 * 24 * 3600);
/// How often a waiting call checks for a forwarded interrupt.
const INTERRUPT_POLL: Duration = Duration::from_millis(100);
/// How many lines of stderr are kept for error messages.
const STDERR_TAIL: usize = 10;
/// The most stderr lines logged for one call, and their most bytes: a
/// provider flooding stderr must not flood the terminal or a log file.
/// The rest is counted and summed up in one line.
pub const MAX_LOGGED_LINES: usize = 5_000;
pub const MAX_LOGGED_BYTES: usize = 1024 * 1024;

/// Variables passed through from the caller's environment unchanged.
pub const PASSED_THROUGH: [&str; 2] = ["PATH", "HOME"];
/// The PATH given to providers when the caller has none.
pub const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// The complete environment a provider runs with.
#[derive(Debug, Clone)]
pub struct ProviderEnv {
    vars: Vec<(OsString, OsString)>,
}

impl ProviderEnv {
    /// Builds the documented allow-list from the caller's environment: PATH
    /// and HOME as they are, LANG and LC_ALL set to C, and `RALSH_ROOT_DIR`.
    /// Nothing else reaches a provider.
    pub fn scrubbed(root: &Path) -> ProviderEnv {
        let mut vars: Vec<(OsString, OsString)> = Vec::new();
        for key in PASSED_THROUGH {
            if let Some(value) = std::env::var_os(key) {
                vars.push((key.into(), value));
            }
        }
        // Relative PATH entries would make `#!/usr/bin/env python3` depend on
        // the caller's working directory; only absolute ones are kept.
        if let Some((_, path)) = vars.iter_mut().find(|(k, _)| k == "PATH") {
            let absolute: Vec<PathBuf> = std::env::split_paths(path)
                .filter(|dir| dir.is_absolute())
                .collect();
            *path = std::env::join_paths(absolute).unwrap_or_default();
        }
        vars.retain(|(_, value)| !value.is_empty());
        if !vars.iter().any(|(k, _)| k == "PATH") {
            vars.push(("PATH".into(), DEFAULT_PATH.into()));
        }
        if !vars.iter().any(|(k, _)| k == "HOME") {
            vars.push(("HOME".into(), "/".into()));
        }
        vars.push(("LANG".into(), "C".into()));
        vars.push(("LC_ALL".into(), "C".into()));
        vars.push(("RALSH_ROOT_DIR".into(), root.into()));
        ProviderEnv { vars }
    }

    /// Sets (or replaces) one variable.
    pub fn set(&mut self, key: &str, value: impl Into<OsString>) {
        let value = value.into();
        match self.vars.iter_mut().find(|(k, _)| k == key) {
            Some((_, old)) => *old = value,
            None => self.vars.push((key.into(), value)),
        }
    }

    pub fn get(&self, key: &str) -> Option<&OsStr> {
        self.vars
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_os_str())
    }
}

/// One provider call.
pub struct Call<'a> {
    /// The provider's qualified name, used as log target and in errors.
    pub label: &'a str,
    pub program: &'a Path,
    pub action: &'a str,
    pub args: Vec<String>,
    pub env: &'a ProviderEnv,
    pub timeout: Duration,
    /// Limit on the bytes of one answer: all of stdout, or one resource when
    /// the [`LineSink`] resets the budget at each new resource.
    pub max_answer: usize,
    /// The longest stdout line accepted ([`MAX_LINE`] for line-based
    /// conventions; a JSON document may be one long line).
    pub max_line: usize,
    /// What the provider reads on stdin; `/dev/null` when `None`.
    pub stdin: Option<Vec<u8>>,
    /// Log stderr lines as they come. When false (describe), they are only
    /// collected, so a provider that is then skipped makes one warning.
    pub log_stderr: bool,
    /// Values (sensitive ones) replaced by `[redacted]` in every stderr line
    /// before it is logged or quoted.
    pub secrets: Vec<String>,
    /// The provider's sensitive attributes: their values are redacted from
    /// structured log lines ([`crate::log_line`]).
    pub sensitive: Vec<String>,
    /// The call may start daemons that outlive it (an update of a provider
    /// with the `starts_daemons` feature): processes it leaves running and
    /// not holding its output are not ended when it ends.
    pub starts_daemons: bool,
}

/// What a finished call left behind besides its stdout.
#[derive(Debug, Clone)]
pub struct Finished {
    /// How many lines the provider wrote on stderr.
    pub stderr_lines: usize,
    /// How many of them were warnings or errors.
    pub problem_lines: usize,
    /// How many of them were at error level.
    pub error_lines: usize,
    /// The last lines of stderr.
    pub stderr_tail: Vec<String>,
}

/// What the line consumer tells the runner after each line.
pub enum Budget {
    /// The line belongs to the current answer; keep counting.
    Continue,
    /// The line started a new unit (a new resource); restart the count.
    Reset,
}

/// Consumes stdout lines; returning an error ends the call and kills the
/// provider.
pub type LineSink<'s> = dyn FnMut(&str) -> Result<Budget> + 's;

/// Told when the provider's output has been consumed up to what it wrote
/// so far; an error ends the call.
pub type Idle<'s> = dyn FnMut() -> Result<()> + 's;

/// Runs one call, feeding each stdout line to `sink`, and calling `idle`
/// whenever the lines that were ready are consumed and the next ones would
/// wait for the provider: the moment to flush buffered output, so a slow
/// provider's resources show as they come.
pub fn run(call: &Call, sink: &mut LineSink, idle: &mut Idle) -> Result<Finished> {
    let limits = Limits::new(call.timeout);
    // The provider runs in `/`; a relative path (from `-I dir`) means the
    // caller's working directory, so it is made absolute first.
    let spawn_error = |source| Error::Spawn {
        provider: call.label.to_owned(),
        file: call.program.to_owned(),
        action: call.action.to_owned(),
        source: explain_spawn_error(call.program, source),
    };
    let program = std::path::absolute(call.program).map_err(spawn_error)?;
    let mut command = Command::new(&program);
    command
        .args(&call.args)
        .current_dir("/")
        .env_clear()
        .envs(call.env.vars.iter().map(|(k, v)| (k, v)))
        .stdin(match call.stdin {
            Some(_) => Stdio::piped(),
            None => Stdio::null(),
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let mut group = Group::spawn(&mut command, call.starts_daemons).map_err(spawn_error)?;
    // The Command holds no pipe ends of ours after the spawn; ours are in
    // the child handle, so EOF means the provider and everything it
    // started closed theirs.
    drop(command);
    let pipes = (|| {
        let stdin = Feeder::new(group.take_stdin(), call.stdin.clone().unwrap_or_default())?;
        let (stdout, stderr) = group.take_output()?;
        Ok::<_, std::io::Error>((stdin, stdout, stderr))
    })();
    let (stdin, stdout, stderr) =
        pipes.map_err(|e| Error::io("setting up a provider's pipes", e))?;
    let mut running = Running {
        group,
        call,
        stdin,
        stdout,
        stderr: StderrLog {
            reader: stderr,
            summary: StderrSummary::default(),
            logged: Logged::default(),
        },
    };
    let result = running.consume(limits, sink, idle);
    running.stderr.report_dropped(call);
    result
}

#[derive(Default)]
struct StderrSummary {
    lines: usize,
    problems: usize,
    errors: usize,
    tail: Vec<String>,
    /// For each line of the tail: whether it was logged.
    tail_shown: Vec<bool>,
}

/// How much of a call's stderr was logged, and how much was not.
#[derive(Default)]
struct Logged {
    lines: usize,
    bytes: usize,
    dropped_lines: usize,
    dropped_bytes: usize,
}

/// A provider's stderr: logged line by line under its name as it comes.
struct StderrLog {
    reader: LineReader,
    summary: StderrSummary,
    logged: Logged,
}

impl StderrLog {
    /// Logs the lines that arrived, reading the pipe at most once: a
    /// provider that floods stderr must not keep the call from its time
    /// limit or from an interrupt, which the caller checks between reads.
    fn read_some(&mut self, call: &Call) {
        self.log_lines(call);
        match self.reader.fill() {
            Ok(_) => self.log_lines(call),
            // Unreadable stderr is treated as closed.
            Err(_) => self.reader.give_up(),
        }
    }

    /// Logs every complete line in the buffer.
    fn log_lines(&mut self, call: &Call) {
        while let Some(piece) = self.reader.next_piece(MAX_LINE) {
            // The rest of a line cut at the limit is dropped.
            if piece.continues {
                continue;
            }
            let raw = String::from_utf8_lossy(piece.bytes);
            let (level, message) = stderr_level(&raw);
            // A structured line is rendered first, so that the values of
            // sensitive attributes are redacted by name; then every known
            // secret goes, then control characters.
            let message = match crate::log_line::Record::parse(message) {
                Some(record) => record.render(|attr| call.sensitive.iter().any(|s| s == attr)),
                None => message.to_owned(),
            };
            let message = escape(&redact(&message, &call.secrets));
            let message = if piece.ends {
                message
            } else {
                format!("{message}... (line cut at {MAX_LINE} bytes)")
            };
            let mut shown = false;
            if call.log_stderr && log::log_enabled!(target: call.label, level) {
                let logged = &mut self.logged;
                if logged.lines < MAX_LOGGED_LINES
                    && logged.bytes + message.len() <= MAX_LOGGED_BYTES
                {
                    logged.lines += 1;
                    logged.bytes += message.len();
                    log::log!(target: call.label, level, "{message}");
                    shown = true;
                } else {
                    logged.dropped_lines += 1;
                    logged.dropped_bytes += message.len();
                }
            }
            self.summary.lines += 1;
            // debug and info lines are a provider's running commentary;
            // warnings and errors are problems.
            if level <= log::Level::Warn {
                self.summary.problems += 1;
            }
            if level == log::Level::Error {
                self.summary.errors += 1;
            }
            if self.summary.tail.len() == STDERR_TAIL {
                self.summary.tail.remove(0);
                self.summary.tail_shown.remove(0);
            }
            self.summary.tail.push(message);
            self.summary.tail_shown.push(shown);
        }
    }
}

impl StderrLog {
    /// Says, once the call is over, how much of its stderr was not logged.
    fn report_dropped(&self, call: &Call) {
        let logged = &self.logged;
        if logged.dropped_lines > 0 {
            log::warn!(
                target: call.label,
                "{} more lines ({} bytes) of its stderr during {} were not logged: at most \
                 {MAX_LOGGED_LINES} lines or {} KiB are, per call",
                logged.dropped_lines,
                logged.dropped_bytes,
                call.action,
                MAX_LOGGED_BYTES / 1024
            );
        }
    }
}

/// One provider call in progress.
struct Running<'a> {
    group: Group,
    call: &'a Call<'a>,
    stdin: Feeder,
    stdout: LineReader,
    stderr: StderrLog,
}

impl Running<'_> {
    fn consume(
        &mut self,
        mut limits: Limits,
        sink: &mut LineSink,
        idle: &mut Idle,
    ) -> Result<Finished> {
        let mut answer_bytes = 0usize;
        let mut lines = 0usize;
        // Lines were handed to the sink since `idle` was last called.
        let mut fresh = false;
        let mut told_complete = false;
        // Leftovers killed at the linger may have been cut mid-line.
        let mut killed_leftovers = false;
        loop {
            while let Some(piece) = self.stdout.next_piece(self.call.max_line) {
                if piece.unterminated && killed_leftovers {
                    // Most likely cut mid-line by the kill; it cannot be
                    // told from a last line the provider left unfinished,
                    // so the dropping is said aloud.
                    let start: String = text(piece.bytes).chars().take(40).collect();
                    log::warn!(
                        "{}: {}: dropping its unfinished last line '{}...': the processes \
                         still writing its output were killed",
                        self.call.label,
                        self.call.action,
                        escape(&redact(&start, &self.call.secrets))
                    );
                    continue;
                }
                lines += 1;
                if !piece.ends {
                    let start: String = text(piece.bytes).chars().take(40).collect();
                    return Err(self.abandon(format!(
                        "line {lines} of its output is longer than {} bytes, the most ral \
                         reads in one line (it starts '{}...'): the provider wrote a value \
                         too long to be read back",
                        self.call.max_line,
                        redact(&start, &self.call.secrets)
                    )));
                }
                let line = text(piece.bytes);
                let length = line.len() + 1;
                match sink(&line) {
                    Ok(Budget::Continue) => answer_bytes += length,
                    Ok(Budget::Reset) => answer_bytes = length,
                    Err(e) => {
                        self.end_early();
                        return Err(e);
                    }
                }
                fresh = true;
                if answer_bytes > self.call.max_answer {
                    return Err(self.abandon(format!(
                        "its answer is larger than {} bytes",
                        self.call.max_answer
                    )));
                }
            }
            // The limits hold on every turn, also for a provider whose output
            // never lets the loop wait.
            self.group.check_interrupt();
            let until = match limits.due(self.group.has_exited()) {
                Due::WaitUntil(until) => until,
                Due::KillLeftovers => {
                    self.kill_leftovers();
                    killed_leftovers = true;
                    continue;
                }
                Due::TimedOut => return Err(self.time_out()),
            };
            if !self.stdout.is_done() {
                // Stderr, stdin and the provider's exit are looked at on
                // every read of stdout (without waiting), not only when
                // stdout pauses.
                if let Err(e) = self.wait(Instant::now()) {
                    return Err(self.abandon(format!("waiting for its output failed: {e}")));
                }
                match self.stdout.fill() {
                    Ok(true) => continue,
                    Ok(false) => {}
                    Err(e) => return Err(self.abandon(format!("reading its output failed: {e}"))),
                }
            }
            // Everything written so far is consumed; the wait for more
            // starts now (or the output is complete: told once).
            if fresh || (self.stdout.is_done() && !told_complete) {
                fresh = false;
                told_complete = self.stdout.is_done();
                if let Err(e) = idle() {
                    self.end_early();
                    return Err(e);
                }
            }
            if self.stdout.is_done() && self.stderr.reader.is_done() && self.group.has_exited() {
                break;
            }
            // Passing `until` is noticed at the top of the next turn.
            if let Err(e) = self.wait(until) {
                return Err(self.abandon(format!("waiting for its output failed: {e}")));
            }
        }
        let status = self.group.reap().map_err(|e| {
            Error::io(
                format!("{}: waiting for {}", self.call.label, self.call.action),
                e,
            )
        })?;
        let summary = std::mem::take(&mut self.stderr.summary);
        if !status.success() {
            // The error quotes the lines of the tail that were not logged
            // already (a traceback is shown once, not twice).
            let logged = summary.tail_shown.contains(&true);
            let unshown = summary
                .tail
                .into_iter()
                .zip(summary.tail_shown)
                .filter(|(_, shown)| !shown)
                .map(|(line, _)| line)
                .collect();
            return Err(Error::Exit {
                provider: self.call.label.to_owned(),
                action: self.call.action.to_owned(),
                status: describe_status(status),
                stderr: unshown,
                logged,
            });
        }
        Ok(Finished {
            stderr_lines: summary.lines,
            problem_lines: summary.problems,
            error_lines: summary.errors,
            stderr_tail: summary.tail,
        })
    }

    /// Waits for output, room on stdin or the provider's exit, at most
    /// until `until` (not at all when it has passed); logs stderr, feeds
    /// stdin and notes the exit as they allow.
    fn wait(&mut self, until: Instant) -> std::io::Result<()> {
        self.group.check_interrupt();
        let mut set = PollSet::default();
        set.add(
            (!self.stdout.is_done()).then(|| self.stdout.fd()),
            libc::POLLIN,
        );
        let stderr = (!self.stderr.reader.is_done()).then(|| self.stderr.reader.fd());
        set.add(stderr, libc::POLLIN);
        set.add(self.group.exit_fd(), libc::POLLIN);
        set.add(self.stdin.fd(), libc::POLLOUT);
        for fd in set.wait(until)? {
            if Some(fd) == self.group.exit_fd() {
                self.group.note_exit();
            } else if Some(fd) == stderr {
                self.stderr.read_some(self.call);
            } else if Some(fd) == self.stdin.fd() {
                self.stdin.write_some();
            }
        }
        Ok(())
    }

    /// The provider exited but processes it started still hold its output:
    /// they had their chance to finish.
    fn kill_leftovers(&self) {
        log::warn!(
            "{}: {} exited, but processes it started kept its output open for {}s; killing them",
            self.call.label,
            self.call.action,
            OUTPUT_LINGER.as_secs()
        );
        self.group
            .kill_all(&[self.stdout.fd(), self.stderr.reader.fd()]);
    }

    /// Ends the provider before its output is complete. What it already
    /// wrote on stderr is logged first: it often says why.
    fn end_early(&mut self) {
        if !self.stderr.reader.is_done() {
            self.stderr.read_some(self.call);
        }
        self.group.terminate();
        // What it said while being ended (a trap's last words) is in the
        // pipe by now; a few reads take it, however much more is coming
        // from a process that left the group.
        for _ in 0..4 {
            if self.stderr.reader.is_done() {
                break;
            }
            self.stderr.read_some(self.call);
        }
    }

    fn time_out(&mut self) -> Error {
        self.end_early();
        Error::Timeout {
            provider: self.call.label.to_owned(),
            action: self.call.action.to_owned(),
            limit: self.call.timeout,
        }
    }

    fn abandon(&mut self, message: String) -> Error {
        self.end_early();
        Error::Protocol {
            provider: self.call.label.to_owned(),
            action: self.call.action.to_owned(),
            message,
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

fn remaining(deadline: Instant) -> Duration {
    deadline.saturating_duration_since(Instant::now())
}

fn describe_status(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit status {code}"),
        (None, Some(signal)) => format!("killed by signal {signal}"),
        (None, None) => status.to_string(),
    }
}

/// Replaces every occurrence of a secret by `[redacted]`.
pub fn redact(text: &str, secrets: &[String]) -> String {
    secrets
        .iter()
        .filter(|secret| !secret.is_empty())
        .fold(text.to_owned(), |text, secret| {
            text.replace(secret.as_str(), REDACTED)
        })
}

/// Splits a `LEVEL:` prefix off a stderr line; the default level is warn.
pub fn stderr_level(line: &str) -> (log::Level, &str) {
    if let Some((prefix, rest)) = line.split_once(':') {
        let level = match prefix.trim().to_ascii_lowercase().as_str() {
            "debug" => Some(log::Level::Debug),
            "info" => Some(log::Level::Info),
            "warn" => Some(log::Level::Warn),
            "error" => Some(log::Level::Error),
            _ => None,
        };
        if let Some(level) = level {
            return (level, rest.trim_start());
        }
    }
    (log::Level::Warn, line)
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

    #[test]
    fn stderr_levels_need_a_known_word_and_a_colon() {
        assert_eq!(stderr_level("DEBUG: x"), (log::Level::Debug, "x"));
        assert_eq!(stderr_level("Error:boom"), (log::Level::Error, "boom"));
        assert_eq!(stderr_level("info x"), (log::Level::Warn, "info x"));
        assert_eq!(stderr_level("note: x"), (log::Level::Warn, "note: x"));
    }
}
