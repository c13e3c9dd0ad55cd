//! The way out of a run that cannot go on: the exit code it stops with,
//! its message already printed.

/// A run that must stop with this exit code; its message was printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stop(pub i32);
