//! `ral check`: a conformance checker for provider authors.
//!
//! It runs a provider the way the host does, on a fake root, and reports
//! every violation of the calling convention it can provoke, each with a
//! hint: metadata errors, describe output that differs from the `.yaml`,
//! listings that break the format or repeat a name, find results that
//! disagree with list, values that do not fit their type, an update with
//! nothing to change that reports changes, a noop update that changed
//! something, non-zero exits, stderr noise, and slow actions; and, for a
//! provider that creates and deletes, a round trip that checks each change
//! was made and reported honestly, and that awkward names and values are
//! stored exactly or refused (`round_trip.rs`). When nothing is listed to
//! work on, a resource is made from the metadata (its ensure and required
//! attributes) on the temporary root; a check that still finds nothing to
//! work on is named in the report as not run, with why.

mod checker;
mod plugin;
mod report;
mod round_trip;

pub use checker::check;
pub use plugin::check_plugin;
pub use report::{CheckOptions, Finding, Level, NotRun, Report, Subject};
