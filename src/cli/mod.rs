//! What the `ral` and `ralsh` binaries share: loading the host and the
//! providers their options ask for, logging to stderr, man pages, the
//! options and fleet of remote targets, and a standard output that
//! outlives its reader. This is the binaries' edge, so its errors are
//! `anyhow`'s, as theirs are; a program using the library calls the
//! modules below it (`converge::run`, `host`, `discovery`) instead.

pub mod load;
pub mod logging;
pub mod man;
pub mod remote;
pub mod unread;
