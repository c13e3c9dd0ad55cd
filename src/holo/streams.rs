//! Plugins, generators and `git` run through the process module's
//! streams, and the process ended at once by a forwarded signal that
//! interrupted one.

use crate::process::streams::{Ended, Stream, StreamCall};

/// Runs a plugin, generator or `git` ([`crate::process::streams`]). When a
/// forwarded signal interrupted it, the process ends by that signal here,
/// before anything reports the run as failed; the cache directory and the
/// lock are registered with [`crate::process::remove_on_interrupt`].
pub(super) fn run_streams(
    call: &StreamCall,
    on_line: &mut dyn FnMut(Stream, &[u8]),
) -> crate::error::Result<Ended> {
    let result = crate::process::streams::run_streams(call, on_line);
    if let Err(crate::error::Error::Interrupted { .. }) = result {
        crate::process::exit_if_interrupted();
    }
    result
}
