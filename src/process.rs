//! The one place where provider processes are started, fed, read and ended.
//!
//! Every call runs the provider directly (argv only, never through a shell),
//! in its own process group, with stdin from `/dev/null` and a scrubbed
//! environment. Stdout is read line by line in a reader thread and handed to
//! the caller through a bounded channel, so a listing is processed while the
//! provider writes it and memory stays bounded. Stderr is drained at the same
//! time and logged line by line under the provider's name. When the time
//! limit passes, the whole process group gets SIGTERM, then SIGKILL after a
//! short grace period.

use std::ffi::{OsStr, OsString};
use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::ExitStatus;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::invoke::simple::escape;

/// The longest line accepted from a provider, in bytes.
pub const MAX_LINE: usize = 64 * 1024;
/// The largest answer accepted for a single resource (find, update, or one
/// resource of a listing), in bytes.
pub const MAX_ANSWER: usize = 1024 * 1024;
/// How long a provider has to exit after SIGTERM before it gets SIGKILL.
pub const KILL_GRACE: Duration = Duration::from_secs(2);
/// How many lines of stderr are kept for error messages.
const STDERR_TAIL: usize = 10;

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
    /// Limit on the bytes of stdout between two calls of `reset_budget`, or
    /// `None` for no limit. See [`LineSink`].
    pub max_answer: usize,
}

/// What a finished call left behind besides its stdout.
#[derive(Debug, Clone)]
pub struct Finished {
    /// How many lines the provider wrote on stderr.
    pub stderr_lines: usize,
    /// How many of them were at error level.
    pub error_lines: usize,
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

static ACTIVE_GROUP: AtomicI32 = AtomicI32::new(0);

/// Makes SIGINT, SIGTERM and SIGHUP end the running provider's process group
/// too, since it does not share the terminal's group and would not see a
/// Ctrl-C. For binaries; a library user may have its own signal handling.
pub fn forward_interrupts() {
    extern "C" fn on_signal(signal: libc::c_int) {
        let group = ACTIVE_GROUP.load(Ordering::SeqCst);
        // SAFETY: kill, signal and raise are async-signal-safe; we only pass
        // plain integers.
        unsafe {
            if group > 0 {
                libc::kill(-group, libc::SIGTERM);
            }
            libc::signal(signal, libc::SIG_DFL);
            libc::raise(signal);
        }
    }
    for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: installs a handler that only calls async-signal-safe
        // functions; the function pointer lives for the whole program.
        unsafe {
            libc::signal(signal, on_signal as *const () as libc::sighandler_t);
        }
    }
}

enum StdoutEvent {
    /// Lines that were ready together; sent as one batch so a fast provider
    /// does not cost a thread hand-over per line.
    Lines(Vec<String>),
    TooLong,
    Failed(std::io::Error),
    Eof,
}

/// Runs one call, feeding each stdout line to `sink`.
pub fn run(call: &Call, sink: &mut LineSink) -> Result<Finished> {
    let deadline = Instant::now() + call.timeout;
    let (stdout_reader, stdout_writer) =
        std::io::pipe().map_err(|e| Error::io("creating a pipe", e))?;
    let (stderr_reader, stderr_writer) =
        std::io::pipe().map_err(|e| Error::io("creating a pipe", e))?;
    let handle = {
        // The expression owns the write ends; dropping it at the end of this
        // block leaves the child as their only holder, so EOF means the
        // provider (and everything it started) closed them.
        let expression = duct::cmd(call.program, &call.args)
            .stdin_null()
            .stdout_file(stdout_writer)
            .stderr_file(stderr_writer)
            .full_env(call.env.vars.iter().cloned())
            .unchecked()
            .before_spawn(|command| {
                command.process_group(0);
                Ok(())
            });
        expression.start().map_err(|source| Error::Spawn {
            provider: call.label.to_owned(),
            file: call.program.to_owned(),
            action: call.action.to_owned(),
            source,
        })?
    };
    let group = handle.pids().first().copied().unwrap_or(0) as i32;
    ACTIVE_GROUP.store(group, Ordering::SeqCst);
    let child = Child {
        handle,
        group,
        call,
    };

    let lines = spawn_stdout_reader(stdout_reader);
    let stderr = spawn_stderr_logger(stderr_reader, call.label.to_owned());
    let result = child.consume(lines, stderr, deadline, sink);
    ACTIVE_GROUP.store(0, Ordering::SeqCst);
    result
}

struct StderrSummary {
    lines: usize,
    errors: usize,
    tail: Vec<String>,
}

struct Child<'a> {
    handle: duct::Handle,
    group: i32,
    call: &'a Call<'a>,
}

impl Child<'_> {
    fn consume(
        &self,
        lines: Receiver<StdoutEvent>,
        stderr: Receiver<StderrSummary>,
        deadline: Instant,
        sink: &mut LineSink,
    ) -> Result<Finished> {
        let mut answer_bytes = 0usize;
        loop {
            let event = match lines.recv_timeout(remaining(deadline)) {
                Ok(event) => event,
                Err(RecvTimeoutError::Timeout) => return Err(self.time_out()),
                Err(RecvTimeoutError::Disconnected) => break,
            };
            let batch = match event {
                StdoutEvent::Lines(batch) => batch,
                StdoutEvent::Eof => break,
                StdoutEvent::TooLong => {
                    return Err(
                        self.abandon(format!("a line of output is longer than {MAX_LINE} bytes"))
                    )
                }
                StdoutEvent::Failed(e) => {
                    return Err(self.abandon(format!("reading its output failed: {e}")))
                }
            };
            for line in batch {
                match sink(&line) {
                    Ok(Budget::Continue) => answer_bytes += line.len() + 1,
                    Ok(Budget::Reset) => answer_bytes = line.len() + 1,
                    Err(e) => {
                        self.terminate();
                        return Err(e);
                    }
                }
                if answer_bytes > self.call.max_answer {
                    return Err(self.abandon(format!(
                        "its answer is larger than {} bytes",
                        self.call.max_answer
                    )));
                }
            }
        }
        let status = match self.handle.wait_deadline(deadline) {
            Ok(Some(output)) => output.status,
            Ok(None) => return Err(self.time_out()),
            Err(e) => {
                return Err(Error::io(
                    format!("{}: waiting for {}", self.call.label, self.call.action),
                    e,
                ))
            }
        };
        let summary = match stderr.recv_timeout(remaining(deadline)) {
            Ok(summary) => summary,
            Err(RecvTimeoutError::Timeout) => return Err(self.time_out()),
            Err(RecvTimeoutError::Disconnected) => StderrSummary {
                lines: 0,
                errors: 0,
                tail: Vec::new(),
            },
        };
        if !status.success() {
            return Err(Error::Exit {
                provider: self.call.label.to_owned(),
                action: self.call.action.to_owned(),
                status: describe_status(status),
                stderr: summary.tail,
            });
        }
        Ok(Finished {
            stderr_lines: summary.lines,
            error_lines: summary.errors,
        })
    }

    /// Ends the whole process group: SIGTERM, a grace period, then SIGKILL.
    fn terminate(&self) {
        if self.group <= 0 {
            return;
        }
        // SAFETY: kill with a negative pid signals the process group we
        // created for this child; it has no memory effects.
        unsafe { libc::kill(-self.group, libc::SIGTERM) };
        let _ = self.handle.wait_timeout(KILL_GRACE);
        // Members that ignored SIGTERM, or outlived the leader, go now.
        // SAFETY: as above.
        unsafe { libc::kill(-self.group, libc::SIGKILL) };
        let _ = self.handle.wait();
    }

    fn time_out(&self) -> Error {
        self.terminate();
        Error::Timeout {
            provider: self.call.label.to_owned(),
            action: self.call.action.to_owned(),
            limit: self.call.timeout,
        }
    }

    fn abandon(&self, message: String) -> Error {
        self.terminate();
        Error::Protocol {
            provider: self.call.label.to_owned(),
            action: self.call.action.to_owned(),
            message,
        }
    }
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

/// Outcome of reading one bounded line.
enum Bounded {
    Line,
    TooLong,
    Eof,
}

/// Reads one line of at most `max` bytes (without its newline) into `buf`.
fn read_bounded(
    reader: &mut impl BufRead,
    max: usize,
    buf: &mut Vec<u8>,
) -> std::io::Result<Bounded> {
    buf.clear();
    let read = reader.take(max as u64 + 1).read_until(b'\n', buf)?;
    if read == 0 {
        return Ok(Bounded::Eof);
    }
    if buf.last() == Some(&b'\n') {
        buf.pop();
        return Ok(Bounded::Line);
    }
    Ok(if buf.len() > max {
        Bounded::TooLong
    } else {
        Bounded::Line
    })
}

fn spawn_stdout_reader(pipe: std::io::PipeReader) -> Receiver<StdoutEvent> {
    // A small bound: the reader waits for the consumer instead of buffering
    // an endless provider's output. At most BATCH_BYTES plus one line per
    // batch, so a few MiB in all.
    const BATCHES: usize = 16;
    const BATCH_BYTES: usize = 64 * 1024;
    let (sender, receiver) = mpsc::sync_channel(BATCHES);
    std::thread::spawn(move || {
        let mut reader = BufReader::new(pipe);
        let mut buf = Vec::new();
        let mut batch = Vec::new();
        let mut batch_bytes = 0;
        loop {
            let end = match read_bounded(&mut reader, MAX_LINE, &mut buf) {
                Ok(Bounded::Line) => {
                    batch_bytes += buf.len();
                    batch.push(String::from_utf8_lossy(&buf).into_owned());
                    // Hand the batch over when the next read would wait for
                    // the provider, so a listing still streams.
                    if reader.buffer().is_empty() || batch_bytes >= BATCH_BYTES {
                        batch_bytes = 0;
                        if sender
                            .send(StdoutEvent::Lines(std::mem::take(&mut batch)))
                            .is_err()
                        {
                            return;
                        }
                    }
                    continue;
                }
                Ok(Bounded::TooLong) => StdoutEvent::TooLong,
                Ok(Bounded::Eof) => StdoutEvent::Eof,
                Err(e) => StdoutEvent::Failed(e),
            };
            if !batch.is_empty() && sender.send(StdoutEvent::Lines(batch)).is_err() {
                return;
            }
            let _ = sender.send(end);
            return;
        }
    });
    receiver
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

fn spawn_stderr_logger(pipe: std::io::PipeReader, label: String) -> Receiver<StderrSummary> {
    let (sender, receiver) = mpsc::channel();
    std::thread::spawn(move || {
        let mut reader = BufReader::new(pipe);
        let mut buf = Vec::new();
        let mut summary = StderrSummary {
            lines: 0,
            errors: 0,
            tail: Vec::new(),
        };
        loop {
            let truncated = match read_bounded(&mut reader, MAX_LINE, &mut buf) {
                Ok(Bounded::Line) => false,
                Ok(Bounded::TooLong) => true,
                Ok(Bounded::Eof) | Err(_) => break,
            };
            let text = escape(&String::from_utf8_lossy(&buf));
            let (level, message) = stderr_level(&text);
            let message = if truncated {
                format!("{message}... (line cut at {MAX_LINE} bytes)")
            } else {
                message.to_owned()
            };
            log::log!(target: &label, level, "{message}");
            summary.lines += 1;
            if level == log::Level::Error {
                summary.errors += 1;
            }
            if summary.tail.len() == STDERR_TAIL {
                summary.tail.remove(0);
            }
            summary.tail.push(message);
            if truncated && skip_rest_of_line(&mut reader, &mut buf).is_err() {
                break;
            }
        }
        let _ = sender.send(summary);
    });
    receiver
}

fn skip_rest_of_line(reader: &mut impl BufRead, buf: &mut Vec<u8>) -> std::io::Result<()> {
    loop {
        match read_bounded(reader, MAX_LINE, buf)? {
            Bounded::TooLong => continue,
            Bounded::Line | Bounded::Eof => return Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stderr_levels_need_a_known_word_and_a_colon() {
        assert_eq!(stderr_level("DEBUG: x"), (log::Level::Debug, "x"));
        assert_eq!(stderr_level("Error:boom"), (log::Level::Error, "boom"));
        assert_eq!(stderr_level("info x"), (log::Level::Warn, "info x"));
        assert_eq!(stderr_level("note: x"), (log::Level::Warn, "note: x"));
    }

    #[test]
    fn bounded_reads_stop_at_the_limit() {
        let mut input = std::io::Cursor::new(b"abc\ndefgh\nij".to_vec());
        let mut buf = Vec::new();
        assert!(matches!(
            read_bounded(&mut input, 4, &mut buf).unwrap(),
            Bounded::Line
        ));
        assert_eq!(buf, b"abc");
        assert!(matches!(
            read_bounded(&mut input, 4, &mut buf).unwrap(),
            Bounded::TooLong
        ));
        let mut input = std::io::Cursor::new(b"ij".to_vec());
        assert!(matches!(
            read_bounded(&mut input, 4, &mut buf).unwrap(),
            Bounded::Line
        ));
        assert_eq!(buf, b"ij");
        assert!(matches!(
            read_bounded(&mut input, 4, &mut buf).unwrap(),
            Bounded::Eof
        ));
    }
}
