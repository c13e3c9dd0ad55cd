//! The note of a forwarded interrupt and the spawn gate: what the signal
//! handlers of `signals.rs` write and hold, and what the runs and the
//! sweeps for leftovers (`orphans.rs`) read and take. Below both, so that
//! neither needs the other for it.

use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Mutex;

/// The forwarded signal that arrived while calls ran (or, deferred, at any
/// time), or 0.
pub(super) static INTERRUPTED: AtomicI32 = AtomicI32::new(0);
/// Held while a provider is spawned and registered, and by the thread that
/// ends this process, so that its sweep sees every group.
pub(super) static SPAWN_GATE: Mutex<()> = Mutex::new(());

/// The forwarded signal that arrived, if one did.
pub(super) fn interrupted() -> Option<libc::c_int> {
    match INTERRUPTED.load(Ordering::SeqCst) {
        0 => None,
        signal => Some(signal),
    }
}

/// Runs `f` while no provider is being spawned (see
/// `signals::spawn_registered`): every child is then registered or not started.
pub(super) fn with_spawn_gate<T>(f: impl FnOnce() -> T) -> T {
    let _gate = SPAWN_GATE.lock().unwrap_or_else(|e| e.into_inner());
    f()
}
