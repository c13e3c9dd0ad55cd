//! ral: a small, fast, trustworthy host for resource providers.
//!
//! A *provider* is an executable that can describe, list, find and change one
//! kind of system resource. This crate discovers providers in data
//! directories, reads and checks their metadata, runs them through the
//! calling convention they declare, checks what they answer, and hands back
//! typed [`Resource`]s and [`Change`]s. Rendering for people and programs lives
//! in [`render`]; the `ralsh` binary is a thin layer on top.
//!
//! The usual flow:
//! 1. [`discovery::discover`] loads every provider of a list of data
//!    directories into a [`discovery::Registry`];
//! 2. [`discovery::Registry::resolve`] picks a provider for `type` or
//!    `type::name`;
//! 3. [`Host::list`], [`Host::find`], [`Host::get_many`] and
//!    [`update::apply_many`] (which plans and then calls
//!    [`Host::set_many`]) talk to it, through the calling convention of
//!    [`invoke`] the provider declares.
//!
//! [`converge`] does the same for a whole manifest: a checked catalog in
//! dependency order, a plan from one read per provider, and tasks run in
//! that order (`ral plan`, `ral apply`).

// The layers' folders (docs/architecture.md): their modules keep the
// paths they had at the root.
mod base;
pub use base::{
    bounded_read, cache_dir, error, fnv, quoting, secrets, store, suggest, types, yaml_doc,
    yaml_stream,
};
mod model;
pub use model::{log_line, metadata, plugin_meta, relations, resource};
mod providers;
pub use providers::{bundled, discovery, metadata_cache, output_check, provider, withheld};

pub mod agent;
pub mod cli;
pub mod conformance;
pub mod converge;
pub mod facts;
pub mod holo;
mod host;
pub mod invoke;
pub mod plugin;
pub mod process;
pub mod remote;
pub mod render;
pub mod templating;
pub mod update;

// The provider SDK and the native providers are a crate of their own
// (`ral-sdk`, below every module here), under the paths they had.
pub use ral_sdk as sdk;
pub use ral_sdk::{local_time, native, random, text};

pub use error::Error;
pub use host::{Host, HostConfig, DEFAULT_LOCK_TIMEOUT};
pub use provider::Provider;
pub use resource::{Change, Resource};
pub use types::{AttrType, Value};
