//! The one module that starts, feeds, reads and ends child processes.
//!
//! Every child goes through one runner (`runner.rs`): argv only, never a
//! shell; its own process group; one event loop on the calling thread that
//! polls its pipes and its exit; one set of limits (the time limit, then
//! SIGTERM and SIGKILL to the group; a linger for processes left holding
//! the output; interrupts; nothing left running, see `orphans.rs` and
//! [`adopt_orphans`], also when this process is killed, see
//! `keeper.rs`). What differs between children is an option of the
//! runner, and what their output means is a handler, of which there are
//! two:
//!
//! - provider calls ([`Call`], [`run`], `call.rs`): a scrubbed environment
//!   ([`ProviderEnv`]), `/` as the working directory, stdin from
//!   `/dev/null` or a document (the json convention). Each stdout line goes
//!   to the caller's [`LineSink`] straight from the read buffer, so a
//!   listing is processed while the provider writes it and memory stays
//!   bounded, within [`MAX_LINE`] and a byte budget per answer; each stderr
//!   line is logged under the provider's name as it comes, by its level
//!   prefix, redacted, and up to a cap per call.
//! - programs whose output is passed on ([`streams`]: Holo plugins,
//!   generators, `git diff`): the caller's environment and working
//!   directory, stdout and stderr passed on raw line by line, file
//!   descriptor 3 kept, and a cap on the output.
//!
//! Interrupts are forwarded ([`forward_interrupts`]): a call they catch
//! ends its group and fails with [`Error::Interrupted`], and none starts
//! after them; the library never ends the process itself. A binary does,
//! with [`exit_if_interrupted`].

mod call;
mod daemon;
mod gate;
mod group;
pub mod in_process;
pub mod interpreter;
mod keeper;
mod limits;
mod orphans;
mod pipes;
mod runner;
mod signals;
pub mod streams;

pub use call::{
    run, stderr_level, Budget, Call, Finished, Idle, LineSink, ProviderEnv, DEFAULT_PATH,
    MAX_ANSWER, MAX_LINE, MAX_LOGGED_BYTES, MAX_LOGGED_LINES, PASSED_THROUGH, QUOTED_PROBLEMS,
};
pub use daemon::Daemon;
pub use limits::{KILL_GRACE, OUTPUT_LINGER};
pub use orphans::{adopt_orphans, adopted_child};

pub use signals::{
    agent_signals, end_on_interrupt, exit_if_interrupted, forward_interrupts,
    forward_interrupts_deferred, forward_interrupts_graceful, is_interrupted, keep_on_interrupt,
    keep_running_on_interrupt, remove_on_interrupt, stop_requested, take_reload, take_run_now,
};

/// The interpreters `scripts` start with through `#!/usr/bin/env NAME`
/// under the environment `env`, each once (see [`interpreter::used`]),
/// a shim's real Python asked of it through the one runner.
pub fn interpreters<'a>(
    scripts: impl IntoIterator<Item = &'a std::path::Path>,
    env: &[(std::ffi::OsString, std::ffi::OsString)],
) -> Vec<interpreter::Used> {
    interpreter::used(scripts, env, runner::ask)
}
