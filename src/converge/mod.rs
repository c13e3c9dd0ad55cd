//! Converging a whole manifest: read it, check it against the providers'
//! metadata, order its resources, plan the changes from one read per
//! provider, and run them as tasks in that order (LITP's plan model, and
//! the Puppet Resource API's get and set of many).

pub mod action;
pub mod apply;
pub mod catalog;
pub mod expand;
pub mod from_plugin;
pub mod graph;
pub mod input;
pub mod lifecycle;
pub mod locks;
pub mod manifest;
pub mod ownership;
pub mod plan;
pub mod planned;
mod puppet_compat;
pub mod read;
pub mod record;
pub mod report;
pub mod run;
pub mod saved;
pub mod schedule;
pub mod snapshot;
pub mod state;
pub mod target_store;
