//! Running a program whose output is passed on as it comes (Holo plugins,
//! generators, `git diff`): stdout and stderr line by line, plus an
//! optional message pipe on file descriptor 3 (Holo plugins report "not
//! changed" and diff paths there).
//!
//! These are the plugin rules for the one runner of the parent module:
//! the environment is the caller's choice, given whole, and the working
//! directory the caller's own; stdin is `/dev/null` or a document; lines are passed on
//! raw, whole up to [`MAX_STREAM_LINE`] and in pieces beyond; fd 3 is kept
//! up to [`MAX_FD3`]; and the output passed on is capped
//! ([`MAX_STREAM_OUTPUT`]). The limits are the runner's, as for a provider
//! call: own process group, time limit, linger, interrupts, nothing left
//! running.

use std::ffi::OsString;
use std::path::Path;
use std::time::Duration;

use super::pipes::Piece;
use super::runner::{self, Handler};
use crate::error::Exited;
use crate::error::{Error, Result};

pub use super::runner::Stream;

/// The most bytes kept from file descriptor 3; the rest is read and dropped.
pub const MAX_FD3: usize = 16 * 1024 * 1024;
/// The longest line passed on whole; longer ones arrive in pieces of this
/// size, so memory stays bounded.
pub const MAX_STREAM_LINE: usize = 16 * 1024 * 1024;
/// The most output (stdout and stderr together) passed on from one run:
/// callers keep some of it (scan output, diffs, `--json` results), and a
/// program flooding its output must not fill the memory before its time
/// limit. Each line counts its bytes plus 64 (`LINE_COST`), so a flood of
/// empty lines is bounded too. Past it the program is ended, as at the
/// time limit.
pub const MAX_STREAM_OUTPUT: usize = 16 * 1024 * 1024;
/// What a line costs its keeper besides its bytes (a `String` or JSON
/// value, and its place in a list), roughly.
const LINE_COST: usize = 64;

/// One program run.
pub struct StreamCall<'a> {
    /// Names the program in errors ("plugin files").
    pub label: &'a str,
    pub program: &'a Path,
    /// `argv[0]` as the program should see it.
    pub arg0: &'a OsString,
    pub args: &'a [OsString],
    /// The complete environment.
    pub env: &'a [(OsString, OsString)],
    /// Open a pipe on file descriptor 3 and collect what arrives there.
    pub fd3: bool,
    /// Fed to stdin; stdin is `/dev/null` when `None`.
    pub stdin: Option<&'a [u8]>,
    pub timeout: Duration,
    /// What the run leaves running and not holding its output is not
    /// ended with it (it starts a daemon on purpose: an ssh master).
    pub release: bool,
    /// The working directory; the caller's when `None`.
    pub dir: Option<&'a Path>,
    /// Who it runs as; the caller when `None`.
    pub user: Option<&'a crate::sdk::command::Credentials>,
}

/// How the program ended.
#[derive(Debug)]
pub struct Ended {
    /// Its exit code, or `None` when a signal ended it.
    pub code: Option<i32>,
    /// The signal that ended it, if one did.
    pub signal: Option<i32>,
    /// "exit status N" or "killed by signal N" when shown.
    pub status: Exited,
    /// Everything written to file descriptor 3 (at most [`MAX_FD3`] bytes).
    pub fd3: Vec<u8>,
    /// Processes it started still held its output [`OUTPUT_LINGER`](super::OUTPUT_LINGER) after
    /// it exited, and were killed.
    pub killed_leftovers: bool,
}

impl Ended {
    pub fn success(&self) -> bool {
        self.code == Some(0)
    }
}

/// Runs the program, handing each output line to `on_line` as it arrives
/// (in arrival order across the two streams). A non-zero exit is not an
/// error here; the caller decides what it means.
pub fn run_streams(call: &StreamCall, on_line: &mut dyn FnMut(Stream, &[u8])) -> Result<Ended> {
    let action = call.args.first().map_or_else(
        || "its run".to_owned(),
        |a| a.to_string_lossy().into_owned(),
    );
    let options = runner::Options {
        label: call.label,
        action: &action,
        program: call.program,
        arg0: Some(call.arg0),
        args: call.args,
        env: call.env,
        dir: call.dir,
        stdin: call.stdin,
        fd3: call.fd3.then_some(MAX_FD3),
        timeout: call.timeout,
        release: call.release,
        last_words: false,
        user: call.user,
    };
    let mut passed = PassedOn {
        label: call.label,
        action: &action,
        on_line,
        bytes: 0,
    };
    let exit = runner::run(&options, &mut passed)?;
    Ok(Ended {
        code: exit.status.code(),
        signal: std::os::unix::process::ExitStatusExt::signal(&exit.status),
        status: Exited::from(exit.status),
        fd3: exit.fd3,
        killed_leftovers: exit.killed_leftovers,
    })
}

/// The plugin rules for a run's output: every line, or piece of one, goes
/// to the caller as it is, counted against [`MAX_STREAM_OUTPUT`].
struct PassedOn<'a> {
    label: &'a str,
    action: &'a str,
    on_line: &'a mut dyn FnMut(Stream, &[u8]),
    /// Bytes of output passed on so far, as counted against the cap.
    bytes: usize,
}

impl Handler for PassedOn<'_> {
    fn max_line(&self, _: Stream) -> usize {
        MAX_STREAM_LINE
    }

    fn line(&mut self, stream: Stream, piece: Piece) -> Result<()> {
        (self.on_line)(stream, piece.bytes);
        self.bytes += piece.bytes.len() + LINE_COST;
        if self.bytes > MAX_STREAM_OUTPUT {
            return Err(Error::Protocol {
                provider: self.label.to_owned(),
                action: self.action.to_owned(),
                message: format!(
                    "wrote more than {} MiB of output; it was killed",
                    MAX_STREAM_OUTPUT >> 20
                ),
            });
        }
        Ok(())
    }
}
