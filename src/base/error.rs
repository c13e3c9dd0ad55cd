//! The library's one error type. Every variant carries what a user needs to
//! act on it: the provider, the file, the action, the attribute and the value.

use std::path::PathBuf;
use std::time::Duration;

/// Everything that can go wrong while discovering or running providers.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Metadata that could not be read, parsed or accepted.
    #[error("{}: invalid provider metadata: {message}", file.display())]
    Metadata { file: PathBuf, message: String },

    /// A model plugin's metadata that could not be read, parsed or
    /// accepted, or that clashes with another's.
    #[error("{}: invalid plugin metadata: {message}", file.display())]
    PluginMetadata { file: PathBuf, message: String },

    /// A model plugin's call failed or answered against the protocol.
    #[error("plugin {plugin}: {call}: {message}")]
    Plugin {
        plugin: String,
        call: String,
        message: String,
    },

    /// The provider executable could not be started.
    #[error("{provider}: could not run {} for {action}: {source}", file.display())]
    Spawn {
        provider: String,
        file: PathBuf,
        action: String,
        source: std::io::Error,
    },

    /// The provider did not finish within the time limit and was killed.
    #[error(
        "{provider}: {action} did not finish within {}s; the provider and its children were killed",
        limit.as_secs_f64()
    )]
    Timeout {
        provider: String,
        action: String,
        limit: Duration,
    },

    /// The provider exited unsuccessfully. `stderr` holds the last lines
    /// of its stderr that were not logged already; `logged` says whether
    /// some were.
    #[error("{provider}: {action} failed: {status}{}", stderr_tail(.stderr, *.logged))]
    Exit {
        provider: String,
        action: String,
        status: Exited,
        stderr: Vec<String>,
        logged: bool,
    },

    /// The provider's output broke the calling convention.
    #[error("{provider}: {action}: {message}")]
    Protocol {
        provider: String,
        action: String,
        message: String,
    },

    /// The provider reported an error itself (`ral_error`, or a json
    /// `error` with its kind: unknown, forbidden or failed).
    #[error("{provider}: {action} reported an error: {message}{}", kind.as_ref().map(|k| format!(" ({k})")).unwrap_or_default())]
    Reported {
        provider: String,
        action: String,
        message: String,
        kind: Option<String>,
    },

    /// A request that was rejected before anything ran.
    #[error("{provider}: {message}")]
    Request { provider: String, message: String },

    /// The provider does not implement an action a command needs.
    #[error("{provider} does not support the {action} action")]
    Unsupported { provider: String, action: String },

    /// No provider matches a name given by the user.
    #[error(
        "unknown provider or type '{query}'{suggestion}; run `ralsh` without arguments to list \
         providers{}",
        broken_note(*.broken)
    )]
    UnknownProvider {
        query: String,
        /// ` (did you mean 'NAME'?)`, or empty.
        suggestion: String,
        broken: usize,
    },

    /// A type has several suitable providers, so a bare type is ambiguous.
    #[error("type '{query}' has several providers: {}; name one of them", candidates.join(", "))]
    AmbiguousType {
        query: String,
        candidates: Vec<String>,
    },

    /// A manifest that could not be read or accepted: every problem found,
    /// each with its file and line.
    #[error("{}", problems_text(.problems))]
    Manifest { problems: Vec<Problem> },

    /// An inventory of remote targets that could not be read or accepted,
    /// or a host pattern that selects nothing from it.
    #[error("{problem}")]
    Inventory { problem: Problem },

    /// A remote target could not be named, reached or prepared (its ssh
    /// error, or what its shell said).
    #[error("{target}: {message}")]
    Remote { target: String, message: String },

    /// The state store could not be opened, read or written.
    #[error("state store {}: {message}", path.display())]
    Store { path: PathBuf, message: String },

    /// A saved plan (`ral plan -o`) cannot be applied: it is damaged,
    /// changed, or made for another store, root or target.
    #[error("saved plan {}: {message}", path.display())]
    SavedPlan { path: PathBuf, message: String },

    /// Another run holds the state store's lock.
    #[error("another ral apply is running ({holder}); its lock is {}", path.display())]
    Locked { path: PathBuf, holder: String },

    /// A provider exists but cannot run on this system.
    #[error("{provider} is not suitable on this system: {reason}")]
    Unsuitable { provider: String, reason: String },

    /// A forwarded signal (SIGINT, SIGTERM or SIGHUP; see
    /// `process::forward_interrupts`) arrived: the running calls
    /// were ended, and no new one starts. The library does not end the
    /// process; a binary does, with `process::exit_if_interrupted`.
    #[error("interrupted by {}", signal_name(*.signal))]
    Interrupted { signal: i32 },

    /// A file-system operation of the host itself failed.
    #[error("{context}: {error}")]
    Io {
        context: String,
        /// Not `source`: the message already says it, and a source would
        /// print it twice in an error chain (`{:#}`).
        error: std::io::Error,
    },
}

fn broken_note(broken: usize) -> String {
    match broken {
        0 => String::new(),
        1 => " (1 provider was skipped as broken; -l info says why)".to_owned(),
        n => format!(" ({n} providers were skipped as broken; -l info says why)"),
    }
}

fn signal_name(signal: i32) -> String {
    match signal {
        libc::SIGINT => "SIGINT".to_owned(),
        libc::SIGTERM => "SIGTERM".to_owned(),
        libc::SIGHUP => "SIGHUP".to_owned(),
        other => format!("signal {other}"),
    }
}

fn stderr_tail(lines: &[String], logged: bool) -> String {
    match (lines.is_empty(), logged) {
        (true, true) => String::from(" (its stderr is above)"),
        (true, false) => String::from(" (no output on stderr)"),
        (false, _) => format!("; last lines of stderr:\n  {}", lines.join("\n  ")),
    }
}

impl Error {
    /// Wraps an I/O error with a sentence saying what was being done.
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Error {
        Error::Io {
            context: context.into(),
            error: source,
        }
    }

    /// The kind a json provider gave its error, if any.
    pub fn kind(&self) -> Option<&str> {
        match self {
            Error::Reported { kind, .. } => kind.as_deref(),
            _ => None,
        }
    }

    /// True when the error is a closed standard output (`ralsh x | head`).
    pub fn is_broken_pipe(&self) -> bool {
        matches!(self, Error::Io { error, .. } if error.kind() == std::io::ErrorKind::BrokenPipe)
    }
}

/// True when any error of `chain` (an error and its sources, as
/// `anyhow::Error::chain` gives them) is a closed output: the reader has
/// seen what it wanted (`ralsh x | head`), which ends a command quietly
/// and successfully.
pub fn is_broken_pipe<'a>(
    chain: impl IntoIterator<Item = &'a (dyn std::error::Error + 'static)>,
) -> bool {
    chain.into_iter().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
            || cause
                .downcast_ref::<Error>()
                .is_some_and(Error::is_broken_pipe)
    })
}

/// How a program that did not succeed ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exited {
    /// With this exit code.
    Code(i32),
    /// Killed by this signal.
    Signal(i32),
    /// Neither (which Unix does not do).
    Unknown,
}

impl From<std::process::ExitStatus> for Exited {
    fn from(status: std::process::ExitStatus) -> Exited {
        use std::os::unix::process::ExitStatusExt;
        match (status.code(), status.signal()) {
            (Some(code), _) => Exited::Code(code),
            (None, Some(signal)) => Exited::Signal(signal),
            (None, None) => Exited::Unknown,
        }
    }
}

impl std::fmt::Display for Exited {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        match self {
            Exited::Code(code) => write!(f, "exit status {code}"),
            Exited::Signal(signal) => write!(f, "killed by signal {signal}"),
            Exited::Unknown => write!(f, "an unknown end"),
        }
    }
}

/// Shorthand used throughout the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// One problem in a manifest or an inventory, where it stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub file: PathBuf,
    /// 1-based; 0 when the problem concerns the whole file.
    pub line: usize,
    pub message: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        match self.line {
            0 => write!(f, "{}: {}", self.file.display(), self.message),
            line => write!(f, "{}:{line}: {}", self.file.display(), self.message),
        }
    }
}

fn problems_text(problems: &[Problem]) -> String {
    let lines: Vec<String> = problems.iter().map(Problem::to_string).collect();
    match lines.len() {
        1 => lines[0].clone(),
        count => format!("{count} problems in the manifest:\n{}", lines.join("\n")),
    }
}
