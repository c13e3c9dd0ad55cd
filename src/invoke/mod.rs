//! Calling conventions: how a provider is called and how its answers are
//! read. Each convention is one [`Convention`] — `simple` (`key=value`
//! arguments, `# simple` output) and `json` (a document on stdin, one on
//! stdout) — offering the same three operations: list every resource, get
//! several by name, set several. A convention builds each call as an
//! [`Invocation`], has a [`Runner`] (the host) run it, parses the answer as
//! it arrives and types it through the runner's output check; it never
//! touches a process itself. A new convention is one new module here.

#[cfg(test)]
mod canned;
pub mod json;
pub mod simple;

use std::path::Path;

use crate::error::{Error, Result};
use crate::metadata::{Action, Invoke};
use crate::output_check::OutputCheck;
use crate::process::{Finished, Idle, LineSink, MAX_ANSWER, MAX_LINE};
use crate::provider::Provider;
use crate::resource::{Change, Resource, ResourceSink};
use crate::sdk::Native;
use crate::secrets;
use crate::text::{escape, escape_lines};
use crate::types::Value;

/// One provider call, as a convention asks for it.
#[derive(Debug, Clone)]
pub struct Invocation {
    pub action: Action,
    pub args: Vec<String>,
    /// Variables added to the provider's environment for this call: the
    /// sensitive values of a `sensitive_in: env` provider, which never go
    /// on its command line.
    pub env: Vec<(String, String)>,
    /// The JSON document for stdin (json convention); `/dev/null` without.
    pub stdin: Option<Vec<u8>>,
    pub max_line: usize,
    pub max_answer: usize,
    /// The arguments as the debug log shows them (sensitive values
    /// redacted).
    pub shown: Vec<String>,
    /// Sensitive values, redacted from everything the provider says.
    pub secrets: Vec<String>,
    /// The provider's sensitive attributes.
    pub sensitive: Vec<String>,
    /// Processes the call leaves running are left alone: an update of a
    /// provider that starts daemons.
    pub starts_daemons: bool,
    /// The provider's code, when the host serves it in its own process.
    pub native: Option<Native>,
    /// The program is a command of the machine it runs on (a model
    /// plugin's remote task), not a provider file: on a target it is run
    /// as named there, not from the copy of the providers.
    pub system_command: bool,
}

impl Invocation {
    /// A call with plain arguments and no knowledge of a provider's
    /// metadata (describe).
    pub fn plain(action: Action, args: Vec<String>) -> Invocation {
        Invocation {
            action,
            shown: args.clone(),
            args,
            env: Vec::new(),
            stdin: None,
            max_line: MAX_LINE,
            max_answer: MAX_ANSWER,
            secrets: Vec::new(),
            sensitive: Vec::new(),
            starts_daemons: false,
            system_command: false,
            native: None,
        }
    }

    /// A call of `provider`, whose sensitive attributes are redacted from
    /// its structured log lines.
    pub fn to(provider: &Provider, action: Action, args: Vec<String>) -> Invocation {
        Invocation {
            sensitive: provider
                .meta
                .attributes
                .values()
                .filter(|a| a.sensitive)
                .map(|a| a.name.clone())
                .collect(),
            // A refresh restarts services: what it starts outlives it.
            starts_daemons: provider.meta.starts_daemons
                && (action == provider.meta.update_action() || action == Action::Refresh),
            native: provider.native,
            ..Invocation::plain(action, args)
        }
    }
}

/// Runs the calls a convention builds: the host, with its environment,
/// time limit, counters and output check.
pub trait Runner {
    /// Runs one call of the provider `label` (its qualified name) in the
    /// file `program`, handing each stdout line to `sink` and calling
    /// `idle` whenever the lines written so far are consumed.
    fn run(
        &self,
        label: &str,
        program: &Path,
        invocation: Invocation,
        sink: &mut LineSink,
        idle: &mut Idle,
    ) -> Result<Finished>;

    /// Types what providers report, against their metadata.
    fn check(&self) -> &OutputCheck;
}

/// One resource to change: its name, what find reported (`None` when it
/// did not know it), and the attributes to set.
#[derive(Debug, Clone, Copy)]
pub struct Update<'a> {
    pub name: &'a str,
    pub state: Option<&'a Resource>,
    pub should: &'a [(String, Value)],
}

impl Update<'_> {
    /// The texts of the sensitive values it carries, new and current, and
    /// of private ones (a file's content others may not read): what the
    /// provider says is redacted of them.
    pub fn secrets(&self, provider: &Provider) -> Vec<String> {
        let private = crate::withheld::private(provider, self.should, self.state);
        let is_sensitive = |key: &str| {
            provider.attribute(key).is_some_and(|a| a.sensitive) || private.iter().any(|w| w == key)
        };
        let current = self
            .state
            .into_iter()
            .flat_map(|state| state.attrs.iter().map(|(key, value)| (key.as_str(), value)));
        let mut texts = secrets::secret_texts(
            is_sensitive,
            self.should
                .iter()
                .map(|(key, value)| (key.as_str(), value))
                .chain(current),
        );
        texts.extend(provider.also_secret.iter().cloned());
        texts
    }
}

/// What an update answered, typed.
#[derive(Debug, Clone, PartialEq)]
pub struct UpdateAnswer {
    pub changes: Vec<Change>,
    /// The provider asked the host to derive changes it did not list.
    pub derive: bool,
}

/// A calling convention: the three operations every provider offers.
pub trait Convention: Sync {
    /// Streams every resource to `sink` as the provider lists it.
    fn list(
        &self,
        runner: &dyn Runner,
        provider: &Provider,
        sink: &mut dyn ResourceSink,
    ) -> Result<()>;

    /// The resources named, in order: each found, not found (`None`), or
    /// its own error. The outer error means nothing could be read.
    fn get_many(
        &self,
        runner: &dyn Runner,
        provider: &Provider,
        names: &[&str],
    ) -> Result<Vec<Result<Option<Resource>>>> {
        self.get_with_should(runner, provider, names, &[])
    }

    /// [`Convention::get_many`], telling a provider that `runs_commands`
    /// the manifest's values of each name (`should`: its attributes, one
    /// list per name, or none), which its checks need.
    fn get_with_should(
        &self,
        runner: &dyn Runner,
        provider: &Provider,
        names: &[&str],
        should: &[&[(String, crate::types::Value)]],
    ) -> Result<Vec<Result<Option<Resource>>>>;

    /// Changes several resources (previews them under `noop`); one result
    /// per update, in order. The outer error means nothing was done.
    fn set_many(
        &self,
        runner: &dyn Runner,
        provider: &Provider,
        updates: &[Update],
        noop: bool,
    ) -> Result<Vec<Result<UpdateAnswer>>>;

    /// Refreshes one resource (restarts a service, say) because something
    /// it subscribes to changed, telling it `attrs` (the manifest's, none
    /// sensitive but for a provider that runs commands: see
    /// [`refresh_attrs`]). A refresh changes no attribute.
    fn refresh(
        &self,
        runner: &dyn Runner,
        provider: &Provider,
        name: &str,
        attrs: &[(String, Value)],
    ) -> Result<()>;
}

/// The attributes of `attrs` a refresh is told: every one but the
/// sensitive ones, which it has no need of and which would otherwise
/// reach a command line.
pub fn refresh_attrs<'a>(
    provider: &'a Provider,
    attrs: &'a [(String, Value)],
) -> impl Iterator<Item = &'a (String, Value)> {
    // A command's refresh runs it, with all it needs: a provider that
    // runs commands is json, told on stdin, never on a command line.
    attrs.iter().filter(move |(key, _)| {
        provider.meta.runs_commands || provider.attribute(key).is_none_or(|a| !a.sensitive)
    })
}

/// The texts to take out of what `provider` says when it is told `attrs`
/// (the manifest's, for a refresh or a command's get): those of its
/// sensitive values, as an update's answer is redacted of them, and the
/// sensitive variables' texts the run gave it.
pub fn told_secrets(provider: &Provider, attrs: &[(String, Value)]) -> Vec<String> {
    let is_sensitive = |key: &str| provider.attribute(key).is_some_and(|a| a.sensitive);
    let mut texts = secrets::secret_texts(is_sensitive, attrs.iter().map(|(k, v)| (k.as_str(), v)));
    texts.extend(provider.also_secret.iter().cloned());
    texts
}

/// The convention a provider declares.
pub fn convention(invoke: Invoke) -> &'static dyn Convention {
    match invoke {
        Invoke::Simple => &simple::SimpleConvention,
        Invoke::Json => &json::JsonConvention,
    }
}

/// The kinds of error the json convention defines for a resource or a
/// whole call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The resource does not exist and cannot be created.
    Unknown,
    /// The provider may not do it (not root, say).
    Forbidden,
    /// Anything else.
    Failed,
}

impl ErrorKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::Unknown => "unknown",
            ErrorKind::Forbidden => "forbidden",
            ErrorKind::Failed => "failed",
        }
    }

    pub fn parse(text: &str) -> Option<ErrorKind> {
        match text {
            "unknown" => Some(ErrorKind::Unknown),
            "forbidden" => Some(ErrorKind::Forbidden),
            "failed" => Some(ErrorKind::Failed),
            _ => None,
        }
    }
}

/// An error a provider reported, for the whole call or one resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReportedError {
    pub kind: ErrorKind,
    pub message: String,
}

impl std::fmt::Display for ReportedError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.message, self.kind.as_str())
    }
}

/// What went wrong in a provider's output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OutputError {
    /// The output breaks the convention.
    Protocol(String),
    /// The provider reported an error with `ral_error`.
    Reported(String),
    /// A json provider reported a whole-call error, with its kind.
    Call(ReportedError),
}

impl OutputError {
    /// The error with the secrets of the call taken out.
    fn redacted(self, secrets: &[String]) -> OutputError {
        match self {
            OutputError::Protocol(message) => {
                OutputError::Protocol(secrets::redact(&message, secrets))
            }
            OutputError::Reported(message) => {
                OutputError::Reported(secrets::redact(&message, secrets))
            }
            OutputError::Call(mut error) => {
                error.message = secrets::redact(&error.message, secrets);
                OutputError::Call(error)
            }
        }
    }

    /// The library error, naming the provider and the action.
    fn into_error(self, provider: &Provider, action: Action) -> Error {
        let provider = provider.qualified_name();
        let action = action.as_str().to_owned();
        match self {
            OutputError::Protocol(message) => Error::Protocol {
                provider,
                action,
                message,
            },
            OutputError::Reported(message) => Error::Reported {
                provider,
                action,
                message: escape_lines(&message),
                kind: None,
            },
            OutputError::Call(error) => Error::Reported {
                provider,
                action,
                message: escape_lines(&error.message),
                kind: Some(escape(error.kind.as_str())),
            },
        }
    }
}

/// Refuses an action the provider's metadata does not list.
fn require(provider: &Provider, action: Action) -> Result<()> {
    match provider.meta.supports(action) {
        true => Ok(()),
        false => Err(Error::Unsupported {
            provider: provider.qualified_name(),
            action: action.as_str().to_owned(),
        }),
    }
}
