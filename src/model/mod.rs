//! What providers and resources are: the automatic relationships their
//! metadata declares, provider metadata, model plugins' metadata,
//! structured log lines, and resources with their changes. Above the
//! base; nothing here runs a process.
//!
//! A folder of the layers docs/architecture.md names (a band of
//! `LAYERS` in tests/ralsh/layers.rs); the crate root re-exports each
//! module under its own name (`crate::relations`).

pub mod log_line;
pub mod metadata;
pub mod plugin_meta;
pub mod relations;
pub mod resource;
