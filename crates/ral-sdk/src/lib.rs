//! The provider SDK: writing a provider in Rust.
//!
//! A provider implements [`Provider`] in the Resource API's shape — `get`
//! the resources named (all of them when none is named) and `set` the
//! updates asked for, each answering what changed — and hands it to
//! [`serve`], which speaks the calling convention its metadata declares
//! (`simple` or `json`): it reads the call, types the values, writes the
//! answer within the sizes the host reads back, and reports errors in the
//! convention's form. The same code runs as a program of its own (a
//! `main` calling [`serve::main`]) or, for the providers bundled with ral,
//! inside the host's process, with the same bytes in and out.
//!
//! Around that: [`CallError`] and its kinds, the [`Log`] the host reads,
//! text helpers shaped like the Python toolkit's, `files`: paths below
//! the root opened without following links out of it, the locks the
//! system's tools take, and crash-safe edits with a journal; and `facts`:
//! the machine's facts, gathered natively, which the bundled `facts`
//! provider reports and a provider may read.
//!
//! The crate also holds what the providers bundled with ral are made of
//! ([`native`]: the core types and the facts, which `ral-provider` serves
//! on targets), random bytes from the kernel and dates in the local time
//! zone. It builds on its own, without the host (no SQLite, no argument
//! parser, no template engine): a provider author's program, and
//! `ral-provider`, depend on this crate alone. The `ral` library
//! re-exports it as `ral::sdk`.

pub mod command;
pub mod error;
pub mod facts;
pub mod files;
pub mod local_time;
pub mod log;
pub mod native;
pub mod nss;
pub mod provider;
pub mod random;
pub mod serve;
pub mod text;

pub use error::{CallError, CallResult, Kind};
pub use log::{Buffer, Level, Log};
pub use provider::{
    error_entry, testing, Call, Change, Deadline, Native, Outcome, Provider, Resource, Update, RUN,
    RUN_DONE,
};
pub use serve::Convention;
