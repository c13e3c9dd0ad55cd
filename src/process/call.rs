//! Provider calls ([`Call`], [`run`]): the provider rules for the one
//! runner. A scrubbed environment ([`ProviderEnv`]), `/` as the working
//! directory, stdin from `/dev/null` or a document (the json convention).
//! Each stdout line goes to the caller's [`LineSink`] straight from the
//! read buffer, within [`MAX_LINE`] and a byte budget per answer; each
//! stderr line is logged under the provider's name as it comes, by its
//! level prefix, redacted, and up to a cap per call.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::limits::OUTPUT_LINGER;
use super::pipes::{text, Piece};
use super::runner::{self, Stream};
use crate::error::{Error, Exited, Result};
use crate::metadata::Action;
use crate::secrets::{redact, redact_cut};
use crate::text::escape;

/// The longest line accepted from a provider, in bytes.
pub const MAX_LINE: usize = 64 * 1024;
/// The largest answer accepted for a single resource (find, update, or one
/// resource of a listing), in bytes.
pub const MAX_ANSWER: usize = 1024 * 1024;
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
pub(super) struct Answers<'r, 's, 'i> {
    call: &'r Call<'r>,
    sink: &'r mut LineSink<'s>,
    pub(super) idle: &'r mut Idle<'i>,
    /// Bytes of the current answer so far.
    answer_bytes: usize,
    /// Stdout lines so far.
    lines: usize,
    /// Leftovers were killed at the linger, and may have cut the last line.
    killed_leftovers: bool,
    pub(super) stderr: StderrLog,
}

impl<'r, 's, 'i> Answers<'r, 's, 'i> {
    pub(super) fn new(
        call: &'r Call<'r>,
        sink: &'r mut LineSink<'s>,
        idle: &'r mut Idle<'i>,
    ) -> Self {
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

    pub(super) fn answer(&mut self, piece: Piece) -> Result<()> {
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
pub(super) struct StderrSummary {
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
    pub(super) fn ended(self, call: &Call, success: bool, status: Exited) -> Result<Finished> {
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
pub(super) struct StderrLog {
    pub(super) summary: StderrSummary,
    logged: Logged,
}

impl StderrLog {
    /// Logs one line (or the first piece of a line cut at [`MAX_LINE`];
    /// the rest of it is dropped).
    pub(super) fn log(&mut self, call: &Call, piece: Piece) {
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
    pub(super) fn report_dropped(&self, call: &Call) {
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
    fn stderr_levels_need_a_known_word_and_a_colon() {
        assert_eq!(stderr_level("DEBUG: x"), (log::Level::Debug, "x"));
        assert_eq!(stderr_level("Error:boom"), (log::Level::Error, "boom"));
        assert_eq!(stderr_level("info x"), (log::Level::Warn, "info x"));
        assert_eq!(stderr_level("note: x"), (log::Level::Warn, "note: x"));
    }
}
