//! The parts of `ral agent` that are not a run: when to run (the
//! schedule: interval, splay, debounce, rate limit, backoff), what to
//! watch (the files the managed resources are kept in, and the manifests)
//! and how (inotify), what the agent tells systemd (`sd_notify`) and what
//! it leaves for `ral agent status`. The runs themselves are ordinary
//! `ral apply` runs (`converge::run`), recorded with an origin.

pub mod duration;
pub mod files;
pub mod notify;
pub mod schedule;
pub mod stamps;
pub mod status;
pub mod watch;
