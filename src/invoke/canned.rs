//! A stand-in provider for the conventions' unit tests: a runner that
//! answers every call with the same output, line by line, as a provider
//! would write it, and the metadata of a provider it plays.

use std::path::Path;

use crate::error::Result;
use crate::output_check::OutputCheck;
use crate::process::{Finished, Idle, LineSink};
use crate::provider::Provider;

use super::{Invocation, Runner};

/// A runner whose provider answers every call with `answer`.
pub struct Canned {
    pub answer: String,
    pub check: OutputCheck,
}

impl Runner for Canned {
    fn run(
        &self,
        _label: &str,
        _program: &Path,
        _invocation: Invocation,
        sink: &mut LineSink,
        _idle: &mut Idle,
    ) -> Result<Finished> {
        for line in self.answer.lines() {
            sink(line)?;
        }
        Ok(Finished {
            stderr_lines: 0,
            problem_lines: 0,
            error_lines: 0,
            problem_quotes: Vec::new(),
            stderr_tail: Vec::new(),
        })
    }

    fn check(&self) -> &OutputCheck {
        &self.check
    }
}

/// A provider `t` of the convention `invoke` with `actions` (`[get, set]`)
/// and the attributes `name` and `value`, for a [`Canned`] runner to play.
pub fn provider(invoke: &str, actions: &str) -> Provider {
    let yaml = format!(
        "provider:\n  type: t\n  invoke: {invoke}\n  actions: {actions}\n  suitable: true\n  \
         attributes:\n    name: {{}}\n    value: {{}}\n"
    );
    let meta = crate::metadata::Metadata::parse(&yaml, Path::new("t.yaml")).unwrap();
    Provider::new(meta, "t.prov".into(), None)
}
