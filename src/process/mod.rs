//! The one module that starts, feeds, reads and ends child processes.
//!
//! Every child goes through one runner (`runner.rs`): argv only, never a
//! shell; its own process group; one event loop on the calling thread that
//! polls its pipes and its exit; one set of limits (the time limit, then
//! SIGTERM and SIGKILL to the group; a linger for processes left holding
//! the output; interrupts; nothing left running, see `orphans.rs` and
//! [`adopt_orphans`], also when this process is killed, see `keeper.rs`). What differs between children is an option of the
//! runner, and what their output means is a handler, of which there are
//! two:
//!
//! - provider calls ([`Call`], [`run`], here): a scrubbed environment
//!   ([`ProviderEnv`]), `/` as the working directory, stdin from
//!   `/dev/null` or a document (the json convention). Each stdout line goes
//!   to the caller's [`LineSink`] straight from the read buffer, so a
//!   listing is processed while the provider writes it and memory stays
//!   bounded, within [`MAX_LINE`] and a byte budget per answer; each stderr
//!   line is logged under the provider's name as it comes, by its level
//!   prefix, redacted, and up to a cap per call.
//! - programs whose output is passed on ([`streams`]: Holo plugins,
//!   generators, `git diff`): the caller's environment and working
//!   directory, stdout and stderr passed on raw line by line, file
//!   descriptor 3 kept, and a cap on the output.
//!
//! Interrupts are forwarded ([`forward_interrupts`]): a call they catch
//! ends its group and fails with [`Error::Interrupted`], and none starts
//! after them; the library never ends the process itself. A binary does,
//! with [`exit_if_interrupted`].

use crate::error::Exited;
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::metadata::Action;
use crate::secrets::{redact, redact_cut};
use crate::text::escape;
use pipes::{text, Piece};
use runner::Stream;

mod daemon;
mod group;
pub mod in_process;
pub mod interpreter;
mod keeper;
mod orphans;
mod pipes;
mod runner;
mod signals;
pub mod streams;

pub use daemon::Daemon;
pub use orphans::{adopt_orphans, adopted_child};

pub use signals::{
    agent_signals, end_on_interrupt, exit_if_interrupted, forward_interrupts,
    forward_interrupts_deferred, forward_interrupts_graceful, is_interrupted, keep_on_interrupt,
    keep_running_on_interrupt, remove_on_interrupt, stop_requested, take_reload, take_run_now,
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

    /// The caller's whole environment, for a program that acts for the
    /// user rather than for a provider: ssh, which needs the user's agent
    /// socket, home and config. (The providers it starts on a target get
    /// a scrubbed environment there.)
    pub fn inherited() -> ProviderEnv {
        ProviderEnv {
            vars: std::env::vars_os().collect(),
        }
    }

    /// Every variable, as a child gets them.
    pub fn vars(&self) -> &[(OsString, OsString)] {
        &self.vars
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
    pub action: Action,
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
    /// The first [`QUOTED_PROBLEMS`] warnings and errors, as `LEVEL: line`.
    pub problem_quotes: Vec<String>,
    /// The last lines of stderr.
    pub stderr_tail: Vec<String>,
}

/// How many of a call's warning and error lines are kept to be quoted.
pub const QUOTED_PROBLEMS: usize = 5;

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
    let options = runner::Options {
        label: call.label,
        action: call.action.as_str(),
        program: call.program,
        arg0: None,
        args: &call.args,
        env: &call.env.vars,
        // A relative program (from `-I dir`) still means the caller's
        // working directory: the runner makes it absolute.
        dir: Some(Path::new("/")),
        stdin: call.stdin.as_deref(),
        fd3: None,
        timeout: call.timeout,
        release: call.starts_daemons,
        last_words: true,
        user: None,
    };
    let mut answers = Answers::new(call, sink, idle);
    let result = runner::run(&options, &mut answers);
    // After an interrupt nothing more is said: the binary ends by it.
    if !matches!(result, Err(Error::Interrupted { .. })) {
        answers.stderr.report_dropped(call);
    }
    let status = result?.status;
    answers
        .stderr
        .summary
        .ended(call, status.success(), Exited::from(status))
}

/// The provider rules for a call's output: stdout lines are answers, each
/// within [`Call::max_line`] and its answer within [`Call::max_answer`];
/// stderr lines are logged.
struct Answers<'r, 's, 'i> {
    call: &'r Call<'r>,
    sink: &'r mut LineSink<'s>,
    idle: &'r mut Idle<'i>,
    /// Bytes of the current answer so far.
    answer_bytes: usize,
    /// Stdout lines so far.
    lines: usize,
    /// Leftovers were killed at the linger, and may have cut the last line.
    killed_leftovers: bool,
    stderr: StderrLog,
}

impl<'r, 's, 'i> Answers<'r, 's, 'i> {
    fn new(call: &'r Call<'r>, sink: &'r mut LineSink<'s>, idle: &'r mut Idle<'i>) -> Self {
        Answers {
            call,
            sink,
            idle,
            answer_bytes: 0,
            lines: 0,
            killed_leftovers: false,
            stderr: StderrLog::default(),
        }
    }

    fn answer(&mut self, piece: Piece) -> Result<()> {
        let call = self.call;
        if piece.unterminated && self.killed_leftovers {
            // Most likely cut mid-line by the kill; it cannot be told from
            // a last line the provider left unfinished, so the dropping is
            // said aloud.
            log::warn!(
                "{}: {}: dropping its unfinished last line '{}...': the processes still writing \
                 its output were killed",
                call.label,
                call.action,
                escape(&start_of(&piece, call))
            );
            return Ok(());
        }
        self.lines += 1;
        if !piece.ends {
            return Err(protocol(
                call,
                format!(
                    "line {} of its output is longer than {} bytes, the most ral reads in one \
                     line (it starts '{}...'): the provider wrote a value too long to be read \
                     back",
                    self.lines,
                    call.max_line,
                    start_of(&piece, call)
                ),
            ));
        }
        let line = text(piece.bytes);
        let length = line.len() + 1;
        match (self.sink)(&line)? {
            Budget::Continue => self.answer_bytes += length,
            Budget::Reset => self.answer_bytes = length,
        }
        if self.answer_bytes > call.max_answer {
            return Err(protocol(
                call,
                format!("its answer is larger than {} bytes", call.max_answer),
            ));
        }
        Ok(())
    }
}

impl runner::Handler for Answers<'_, '_, '_> {
    fn max_line(&self, stream: Stream) -> usize {
        match stream {
            Stream::Stdout => self.call.max_line,
            Stream::Stderr => MAX_LINE,
        }
    }

    fn line(&mut self, stream: Stream, piece: Piece) -> Result<()> {
        match stream {
            Stream::Stdout => self.answer(piece),
            Stream::Stderr => {
                self.stderr.log(self.call, piece);
                Ok(())
            }
        }
    }

    fn idle(&mut self) -> Result<()> {
        (self.idle)()
    }

    fn killing_leftovers(&mut self) {
        log::warn!(
            "{}: {} exited, but processes it started kept its output open for {}s; killing them",
            self.call.label,
            self.call.action,
            OUTPUT_LINGER.as_secs()
        );
        self.killed_leftovers = true;
    }
}

/// The first 40 characters of a line of output that is quoted unfinished:
/// redacted before it is cut, so that no secret is cut in two with its
/// start shown.
fn start_of(piece: &Piece, call: &Call) -> String {
    redact_cut(&text(piece.bytes), &call.secrets)
        .chars()
        .take(40)
        .collect()
}

fn protocol(call: &Call, message: String) -> Error {
    Error::Protocol {
        provider: call.label.to_owned(),
        action: call.action.as_str().to_owned(),
        message,
    }
}

#[derive(Default)]
struct StderrSummary {
    lines: usize,
    problems: usize,
    errors: usize,
    /// The first warnings and errors, as `LEVEL: line`.
    quotes: Vec<String>,
    tail: Vec<String>,
    /// For each line of the tail: whether it was logged.
    tail_shown: Vec<bool>,
}

impl StderrSummary {
    /// What a call that ended with `status` (a success or not) comes to:
    /// what it left behind, or the error of its exit, quoting the lines
    /// of the tail that were not logged already (a traceback is shown
    /// once, not twice).
    fn ended(self, call: &Call, success: bool, status: Exited) -> Result<Finished> {
        if !success {
            let logged = self.tail_shown.contains(&true);
            let unshown = self
                .tail
                .into_iter()
                .zip(self.tail_shown)
                .filter(|(_, shown)| !shown)
                .map(|(line, _)| line)
                .collect();
            return Err(Error::Exit {
                provider: call.label.to_owned(),
                action: call.action.as_str().to_owned(),
                status,
                stderr: unshown,
                logged,
            });
        }
        Ok(Finished {
            stderr_lines: self.lines,
            problem_lines: self.problems,
            error_lines: self.errors,
            problem_quotes: self.quotes,
            stderr_tail: self.tail,
        })
    }
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
#[derive(Default)]
struct StderrLog {
    summary: StderrSummary,
    logged: Logged,
}

impl StderrLog {
    /// Logs one line (or the first piece of a line cut at [`MAX_LINE`];
    /// the rest of it is dropped).
    fn log(&mut self, call: &Call, piece: Piece) {
        if piece.continues {
            return;
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
        // A line cut at MAX_LINE may end with the start of a secret.
        let message = match piece.ends {
            true => escape(&redact(&message, &call.secrets)),
            false => format!(
                "{}... (line cut at {MAX_LINE} bytes)",
                escape(&redact_cut(&message, &call.secrets))
            ),
        };
        let mut shown = false;
        if call.log_stderr && log::log_enabled!(target: call.label, level) {
            let logged = &mut self.logged;
            if logged.lines < MAX_LOGGED_LINES && logged.bytes + message.len() <= MAX_LOGGED_BYTES {
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
            if self.summary.quotes.len() < QUOTED_PROBLEMS {
                let level = level.as_str().to_ascii_lowercase();
                self.summary.quotes.push(format!("{level}: {message}"));
            }
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

    /// What a provider on the SDK writes, the host reads whole: the SDK's
    /// limits are the host's.
    #[test]
    fn the_sdk_writes_within_the_limits_the_host_reads_by() {
        use crate::sdk::serve::{LINE_MAX, RESOURCE_MAX};
        assert_eq!(LINE_MAX, MAX_LINE);
        assert_eq!(RESOURCE_MAX, MAX_ANSWER);
    }

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
