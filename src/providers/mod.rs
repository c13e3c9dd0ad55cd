//! The providers ral finds and how far it trusts what they say: one
//! provider and its suitability, values shown only as digests, typing
//! what providers report, the bundled providers and plugins, the
//! metadata cache, and discovery.
//!
//! A folder of the layers docs/architecture.md names (a band of
//! `LAYERS` in tests/ralsh/layers.rs); the crate root re-exports each
//! module under its own name (`crate::provider`).

pub mod bundled;
pub mod discovery;
pub mod metadata_cache;
pub mod output_check;
pub mod provider;
pub mod withheld;
