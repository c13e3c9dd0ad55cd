//! What a provider is and what it is given and answers: the [`Provider`]
//! trait (get and set), a [`Call`] with its root, noop flag, log and
//! [`Deadline`], the [`Resource`]s, [`Update`]s and [`Change`]s that pass
//! between it and the host, and [`Native`], a provider compiled into the
//! program that serves it.

use serde_json::{Map, Value as Json};

use crate::error::{CallError, CallResult};
use crate::log::Log;
use crate::{command, text};

/// The calling convention a provider speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Convention {
    Simple,
    Json,
}

/// How long an edit waits for a lock when `RALSH_LOCK_TIMEOUT` says
/// nothing, as lckpwdf(3) does.
pub const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(15);

/// A resource as a provider reports it: its `name` and its attributes,
/// with JSON's types (strings, booleans, integers, arrays, `null`).
pub type Resource = Map<String, Json>;

/// One update of a set: the resource's name, what the host last read of
/// it (`is`, empty when it did not exist or the convention does not say),
/// and the attributes to change (`should`).
#[derive(Debug, Clone, PartialEq)]
pub struct Update {
    pub name: String,
    pub is: Resource,
    pub should: Resource,
}

/// What one update did: the attributes changed, each with its new and old
/// value, or the error that failed this resource alone.
pub type Outcome = CallResult<Vec<Change>>;

/// One attribute's change.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    pub attribute: String,
    pub is: Json,
    pub was: Json,
}

impl Change {
    pub fn new(attribute: &str, was: impl Into<Json>, is: impl Into<Json>) -> Change {
        Change {
            attribute: attribute.to_owned(),
            is: is.into(),
            was: was.into(),
        }
    }
}

/// What a call is given besides its arguments.
pub struct Call {
    /// The root directory the provider works below (`RALSH_ROOT_DIR`,
    /// `/` when unset or empty).
    pub root: std::path::PathBuf,
    /// Change nothing, say what would change.
    pub noop: bool,
    /// How long to wait for a lock (`RALSH_LOCK_TIMEOUT`).
    pub lock_timeout: std::time::Duration,
    /// Where messages go.
    pub log: Log,
    /// The environment the provider was given (what commands it runs
    /// start from).
    pub env: Vec<(String, String)>,
    /// What runs the commands it runs.
    pub commands: std::sync::Arc<dyn command::Commands>,
    /// When the call must be over: set for a call the host serves in its
    /// own process, which it cannot kill as it kills a program. Past it,
    /// the SDK starts nothing more: an edit or a batch's file not begun or
    /// not yet renamed into place fails with [`Deadline::error`], a wait
    /// for a lock or a command is cut to what is left of it.
    pub deadline: Option<Deadline>,
    /// For a get of a provider that `runs_commands`: the manifest's values
    /// of each name asked for (its checks need them); empty otherwise.
    pub should: Map<String, Json>,
}

impl Call {
    /// A call below `root` with the defaults of a provider program: the
    /// lock wait of lckpwdf, no environment, commands run directly.
    pub fn new(root: impl Into<std::path::PathBuf>, noop: bool, log: Log) -> Call {
        Call {
            root: root.into(),
            noop,
            lock_timeout: LOCK_WAIT,
            log,
            env: Vec::new(),
            commands: std::sync::Arc::new(command::Direct),
            deadline: None,
            should: Map::new(),
        }
    }

    /// The manifest's values for `name` a get was given (see
    /// [`Call::should`]).
    pub fn should_of(&self, name: &str) -> Option<&Resource> {
        self.should.get(name).and_then(Json::as_object)
    }

    /// An error once the call is past its deadline (see
    /// [`Call::deadline`]).
    pub fn within_time(&self) -> CallResult<()> {
        match &self.deadline {
            Some(deadline) => deadline.check(),
            None => Ok(()),
        }
    }

    /// The value of the environment variable `key` the call was given.
    pub fn var(&self, key: &str) -> Option<&str> {
        self.env
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// When a call must be over, and the time limit that set it (which its
/// error names). Time is read from a clock that a test can replace, so
/// that a deadline passes exactly when the test says.
#[derive(Clone)]
pub struct Deadline {
    /// `None`: the limit is beyond what the clock can count.
    at: Option<std::time::Instant>,
    limit: std::time::Duration,
    clock: std::sync::Arc<dyn Fn() -> std::time::Instant + Send + Sync>,
}

impl Deadline {
    /// `limit` from now.
    pub fn after(limit: std::time::Duration) -> Deadline {
        Deadline::on_clock(limit, std::sync::Arc::new(std::time::Instant::now))
    }

    /// `limit` from now as `clock` tells the time.
    pub fn on_clock(
        limit: std::time::Duration,
        clock: std::sync::Arc<dyn Fn() -> std::time::Instant + Send + Sync>,
    ) -> Deadline {
        Deadline {
            at: clock().checked_add(limit),
            limit,
            clock,
        }
    }

    /// The time limit the deadline comes from.
    pub fn limit(&self) -> std::time::Duration {
        self.limit
    }

    /// Whether the deadline has come.
    pub fn passed(&self) -> bool {
        self.at.is_some_and(|at| (self.clock)() >= at)
    }

    /// The time left until the deadline (`Duration::MAX` for one beyond
    /// the clock).
    pub fn left(&self) -> std::time::Duration {
        self.at.map_or(std::time::Duration::MAX, |at| {
            at.saturating_duration_since((self.clock)())
        })
    }

    /// [`Deadline::error`] once the deadline has come.
    pub fn check(&self) -> CallResult<()> {
        match self.passed() {
            true => Err(self.error()),
            false => Ok(()),
        }
    }

    /// What fails the work not done by the deadline: the host shows it
    /// under the provider's name, as it does a program's timeout.
    pub fn error(&self) -> CallError {
        CallError::new(format!(
            "the call ran past its time limit of {}s (--timeout); this was not done",
            command::seconds(self.limit)
        ))
    }
}

impl std::fmt::Debug for Deadline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Deadline")
            .field("limit", &self.limit)
            .field("left", &self.left())
            .finish()
    }
}

impl std::fmt::Debug for Call {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Call")
            .field("root", &self.root)
            .field("noop", &self.noop)
            .field("lock_timeout", &self.lock_timeout)
            .finish_non_exhaustive()
    }
}

/// A provider: its metadata and its two operations.
pub trait Provider: Sync {
    /// The metadata, as YAML (what `describe` prints).
    fn metadata(&self) -> &'static str;

    /// The calling convention the metadata declares (`invoke`).
    fn convention(&self) -> Convention;

    /// The resources named, or all of them when `names` is empty. A name
    /// left out of the answer does not exist (`ensure: absent`); one that
    /// could never exist is answered with an [`error_entry`] of kind
    /// `unknown`.
    fn get(&self, call: &Call, names: &[String]) -> CallResult<Vec<Resource>>;

    /// Makes the updates (or, under `call.noop`, says what they would
    /// change); one outcome per update, in order. The outer error fails
    /// the whole call: nothing was done.
    fn set(&self, call: &Call, updates: &[Update]) -> CallResult<Vec<Outcome>>;

    /// Refreshes `name` (something it subscribes to changed), told the
    /// manifest's values `attrs`; only providers whose metadata lists the
    /// refresh action are asked.
    fn refresh(&self, _call: &Call, name: &str, _attrs: &Resource) -> CallResult<()> {
        Err(CallError::new(format!(
            "'{name}' cannot be refreshed: the provider has no refresh action"
        )))
    }
}

/// The answer entry saying that resource `name` failed with `err`: a
/// get's entry for a name that could never exist, a set's for an update
/// that failed.
pub fn error_entry(name: &str, err: &CallError) -> Resource {
    let mut entry = Resource::new();
    entry.insert("name".into(), Json::from(name));
    let mut error = Map::new();
    error.insert("kind".into(), Json::from(err.kind.as_str()));
    error.insert(
        "message".into(),
        Json::from(text::clean_lines(&err.message)),
    );
    entry.insert("error".into(), Json::Object(error));
    entry
}

/// A provider compiled into the program, as the host holds it: the host
/// serves its calls in its own process.
#[derive(Clone, Copy)]
pub struct Native(pub &'static dyn Provider);

impl std::fmt::Debug for Native {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Native")
    }
}

/// The attribute a provider that runs commands (`runs_commands` among its
/// features, as `exec`) declares: [`RUN_DONE`] when there is nothing to
/// run, else why it would run.
pub const RUN: &str = "run";
/// The value of [`RUN`] that every request asks for: nothing left to run.
pub const RUN_DONE: &str = "done";

/// For tests of providers: deadlines on clocks a test moves.
pub mod testing {

    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use super::Deadline;

    /// A deadline `limit` away on a clock that stands still until `late`
    /// is set, then jumps a day on.
    pub fn deadline(limit: Duration, late: &Arc<AtomicBool>) -> Deadline {
        let start = Instant::now();
        let late = Arc::clone(late);
        let clock = move || match late.load(Ordering::SeqCst) {
            true => start + Duration::from_secs(24 * 3600),
            false => start,
        };
        Deadline::on_clock(limit, Arc::new(clock))
    }
}
