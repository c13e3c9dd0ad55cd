//! One `holo` command, parsed: its operation and its options.

use std::time::Duration;

/// The three Holo operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Scan,
    Diff,
    Apply,
}

/// How `scan` prints entities.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ScanFormat {
    #[default]
    Report,
    Short,
    Porcelain,
}

/// One `holo` command, parsed.
#[derive(Debug, Clone)]
pub struct Options {
    pub op: Op,
    pub scan_format: ScanFormat,
    pub force: bool,
    pub json: bool,
    pub noop: bool,
    pub strict: bool,
    pub timeout: Duration,
    pub selectors: Vec<String>,
}
