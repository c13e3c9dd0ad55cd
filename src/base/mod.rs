//! The base of the library: the error type, names, YAML reading, shell
//! quoting, hashing, attribute types and values, secrets, bounded reads,
//! the private cache directory and the SQLite state store. These use the
//! SDK's crate and each other only, never a module outside this folder.
//!
//! A folder of the layers docs/architecture.md names (a band of
//! `LAYERS` in tests/ralsh/layers.rs); the crate root re-exports each
//! module under its own name (`crate::error`).

pub mod bounded_read;
pub mod cache_dir;
pub mod error;
pub mod fnv;
pub mod quoting;
pub mod secrets;
pub mod store;
pub mod suggest;
pub mod types;
pub mod yaml_doc;
pub mod yaml_stream;
