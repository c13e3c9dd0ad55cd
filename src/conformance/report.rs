//! What a check reports: its options, its findings with their levels
//! and subjects, the checks that could not run and why, and how long each
//! step took.

use std::path::PathBuf;
use std::time::Duration;

/// How a check is run.
#[derive(Debug, Clone)]
pub struct CheckOptions {
    /// The root the provider works on (a temporary copy, usually).
    pub root: PathBuf,
    /// Time limit of one call.
    pub timeout: Duration,
    /// An action slower than this is a finding.
    pub slow: Duration,
    /// The Python toolkit's directory, for providers that use it.
    pub provider_lib: Option<PathBuf>,
    /// The root is a temporary copy made for this check: the round trip,
    /// which creates, changes and deletes resources, runs only there.
    pub scratch: bool,
}

/// How bad a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    /// A violation of the calling convention.
    Error,
    /// Suspicious: most likely a bug, though the protocol allows it.
    Warning,
    /// Worth a look, not a fault: it does not fail the check.
    Note,
}

impl Level {
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Error => "error",
            Level::Warning => "warning",
            Level::Note => "note",
        }
    }
}

/// One violation.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Finding {
    /// Where it showed: metadata, describe, list, find, update, noop (a
    /// plugin's: the call's name).
    pub step: &'static str,
    pub level: Level,
    pub problem: String,
    pub hint: &'static str,
}

/// What was checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Subject {
    Provider,
    /// A model plugin (`NAME.plugin`).
    Plugin,
}

/// What a check found about one provider or plugin (serialized for
/// `ral check --json`).
#[derive(Debug, Clone, serde::Serialize)]
pub struct Report {
    pub subject: Subject,
    pub source: PathBuf,
    /// `type::name` (a plugin's name), once the metadata could be read.
    #[serde(rename = "name")]
    pub provider: Option<String>,
    pub findings: Vec<Finding>,
    /// The steps that ran, with how long each took.
    #[serde(serialize_with = "steps_ms")]
    pub steps: Vec<(&'static str, Duration)>,
    /// What the round trip did (created, changed, refused, deleted).
    pub round_trip: Vec<String>,
    /// The checks that could not run, with why: the provider is then not
    /// fully checked, findings or not.
    pub not_run: Vec<NotRun>,
}

/// Checks that did not run, for one reason.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct NotRun {
    /// Steps: find of a listed name, noop, update, round trip.
    pub checks: Vec<&'static str>,
    pub why: String,
    /// How to have them run.
    pub hint: Option<&'static str>,
}

/// Steps as `[{"step": ..., "ms": ...}]`.
fn steps_ms<S: serde::Serializer>(
    steps: &[(&'static str, Duration)],
    serializer: S,
) -> Result<S::Ok, S::Error> {
    #[derive(serde::Serialize)]
    struct Step {
        step: &'static str,
        ms: f64,
    }
    serializer.collect_seq(steps.iter().map(|(step, took)| Step {
        step,
        // Microseconds, in milliseconds: no float noise in the digits.
        ms: took.as_micros() as f64 / 1000.0,
    }))
}

impl Report {
    /// No findings but notes: nothing it checked was wrong.
    pub fn is_clean(&self) -> bool {
        self.findings.iter().all(|f| f.level == Level::Note)
    }

    /// Every check ran.
    pub fn is_fully_checked(&self) -> bool {
        self.not_run.is_empty()
    }
}
