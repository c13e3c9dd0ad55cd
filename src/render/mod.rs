//! Renderers: one data model ([`Provider`](crate::Provider),
//! [`Resource`](crate::Resource), [`Change`](crate::Change)), two outputs.
//! [`human`] writes Puppet-style text, [`json`] writes libral's JSON shapes.
//! Core code never prints; it hands data to one of these.

pub mod human;
pub mod json;
