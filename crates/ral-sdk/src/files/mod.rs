//! Files below the root: paths opened one directory at a time without
//! ever following a symbolic link out of it ([`Root`], [`Dir`],
//! [`Target`]), the locks the system's own tools take ([`Lock`]), and
//! locked, crash-safe edits of shared files ([`Edit`]: a re-read under the
//! lock, a temporary file in the same directory that is synced and renamed
//! over the original, and a journal that finishes an edit of several files
//! that a crash interrupted), made many at a time by a [`Batch`]. Under
//! noop an edit reads as it would and writes nothing.
//!
//! The Rust twin of the Python toolkit's `files.py`, with the same files
//! on disk (lock, temporary and journal names, the journal's document), so
//! that Python and Rust writers can share files safely.

mod batch;
mod edit;
mod guard;
mod journal;
mod lock;
mod names;
#[cfg(test)]
pub(crate) mod probe;
mod reused;
mod root;
mod stat;
pub mod sys;

#[cfg(test)]
mod tests;

pub use batch::Batch;
pub use edit::{Attrs, Edit, Owner};
pub use journal::{fsync_dir, read_journal, temp_name, Journal, JOURNAL_MAX};
pub use lock::Lock;
pub use names::{JOURNAL_TAG, LOCK_TAG, TEMP_TAG};
pub use reused::Reused;
pub use root::{Create, Dir, Root, Target, MAX_CHANGES, MAX_LINKS};
pub use stat::{identity, Stat};
