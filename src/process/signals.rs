//! Interrupts: SIGINT, SIGTERM and SIGHUP end every running call's
//! process group, and then, when a binary says so, this process.
//!
//! Each running call registers its group in a fixed table that the signal
//! handler reads; the handler sends each group SIGTERM and notes the
//! signal. The library only acts on the note: a running call ends its
//! group and returns [`Error::Interrupted`](crate::Error::Interrupted),
//! and no new call starts. Ending the process by the signal is the
//! binary's decision ([`exit_if_interrupted`]).
//!
//! Registration and the spawn itself happen under one gate, which the
//! refusal of new calls and the final sweep of [`exit_if_interrupted`]
//! take too: a provider that is being started while a signal arrives is
//! therefore either refused or registered in time to be ended, never left
//! behind.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicUsize, Ordering};
use std::sync::Mutex;

use rustix::process::{kill_process, Pid, Signal};

use super::gate::{interrupted, INTERRUPTED, SPAWN_GATE};

/// The process groups of the running calls, for the interrupt handler; 0
/// marks a free slot. Describes run several at a time.
static ACTIVE_GROUPS: [AtomicI32; GROUP_SLOTS] = [const { AtomicI32::new(0) }; GROUP_SLOTS];
const GROUP_SLOTS: usize = 32;
/// Set once [`forward_interrupts`] installed its handler.
static FORWARDING: AtomicBool = AtomicBool::new(false);
/// Set by [`forward_interrupts_deferred`].
static DEFERRED: AtomicBool = AtomicBool::new(false);
/// Set by [`forward_interrupts_graceful`].
static GRACEFUL: AtomicBool = AtomicBool::new(false);
/// The first signal a graceful binary was sent, or 0.
static STOP: AtomicI32 = AtomicI32::new(0);
/// How many threads are between "about to spawn" and "group registered".
static SPAWNING: AtomicUsize = AtomicUsize::new(0);

const FORWARDED: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

/// Set by [`agent_signals`]: SIGHUP is then a request to reload, never an
/// interrupt, whoever installs the handlers afterwards.
static AGENT: AtomicBool = AtomicBool::new(false);
/// The write end of the agent's wake-up pipe, or -1: every handled signal
/// writes a byte to it, so that a `poll` on the read end wakes even when
/// the signal lands just before the call.
static WAKE_FD: AtomicI32 = AtomicI32::new(-1);
/// SIGHUP to the agent: reload the manifests.
static RELOAD: AtomicBool = AtomicBool::new(false);
/// SIGUSR1 to the agent: run now.
static RUN_NOW: AtomicBool = AtomicBool::new(false);

/// The interrupted code's errno, given back when a handler returns: the
/// handlers' own calls (a write to a full wake-up pipe, a kill of a group
/// that is gone) set it, and the code the signal landed in may be about
/// to read what its own last call left there.
struct SavedErrno(errno::Errno);

impl SavedErrno {
    fn save() -> SavedErrno {
        SavedErrno(errno::errno())
    }
}

impl Drop for SavedErrno {
    fn drop(&mut self) {
        errno::set_errno(self.0);
    }
}

/// Writes one byte to the agent's wake-up pipe, if there is one.
fn wake() {
    let fd = WAKE_FD.load(Ordering::SeqCst);
    if fd >= 0 {
        // SAFETY: write is async-signal-safe; a full pipe (EAGAIN, the
        // descriptor is non-blocking) already holds a wake-up.
        unsafe { libc::write(fd, [1u8].as_ptr().cast(), 1) };
    }
}

extern "C" fn on_signal(signal: libc::c_int) {
    let _errno = SavedErrno::save();
    wake();
    // The first signal to a graceful binary is only a request to stop;
    // a second one acts as usual.
    if GRACEFUL.load(Ordering::SeqCst)
        && STOP
            .compare_exchange(0, signal, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
    {
        return;
    }
    let mut running = SPAWNING.load(Ordering::SeqCst) > 0;
    for slot in &ACTIVE_GROUPS {
        // kill(2) is async-signal-safe, and rustix's is the bare call.
        let group = slot.load(Ordering::SeqCst);
        if group > 0 {
            running = true;
            super::group::signal_group(group, Signal::TERM);
        }
    }
    if running || DEFERRED.load(Ordering::SeqCst) {
        // A waiting call notices, finishes its group off and returns
        // the interruption to the binary, which ends by the signal
        // after cleaning up (`exit_if_interrupted`).
        INTERRUPTED.store(signal, Ordering::SeqCst);
    } else {
        // SAFETY: signal and raise are async-signal-safe.
        unsafe {
            libc::signal(signal, libc::SIG_DFL);
            libc::raise(signal);
        }
    }
}

extern "C" fn on_request(signal: libc::c_int) {
    let _errno = SavedErrno::save();
    match signal {
        libc::SIGHUP => RELOAD.store(true, Ordering::SeqCst),
        _ => RUN_NOW.store(true, Ordering::SeqCst),
    }
    wake();
}

/// The signals of a long-running binary (`ral agent`): SIGINT and SIGTERM
/// as [`forward_interrupts_graceful`] (the first asks to stop, the
/// running tasks finish; a second ends them), SIGHUP noted for
/// [`take_reload`] and SIGUSR1 for [`take_run_now`]. Each also writes a
/// byte to `wake`, the write end of a non-blocking pipe the binary polls.
/// Handlers installed later by the library's runs keep SIGHUP a request.
pub fn agent_signals(wake: std::os::fd::RawFd) {
    WAKE_FD.store(wake, Ordering::SeqCst);
    AGENT.store(true, Ordering::SeqCst);
    GRACEFUL.store(true, Ordering::SeqCst);
    for signal in [libc::SIGHUP, libc::SIGUSR1] {
        // SAFETY: the handler only touches atomics and calls write, which
        // is async-signal-safe; it lives for the whole program.
        unsafe {
            libc::signal(signal, on_request as *const () as libc::sighandler_t);
        }
    }
    forward_interrupts();
}

/// Whether SIGHUP arrived since the last call (see [`agent_signals`]).
pub fn take_reload() -> bool {
    RELOAD.swap(false, Ordering::SeqCst)
}

/// Whether SIGUSR1 arrived since the last call (see [`agent_signals`]).
pub fn take_run_now() -> bool {
    RUN_NOW.swap(false, Ordering::SeqCst)
}

/// Makes SIGINT, SIGTERM and SIGHUP end the running providers' whole
/// process groups (SIGTERM, then SIGKILL for what survives the grace
/// period): the calls return [`Error::Interrupted`](crate::Error::Interrupted)
/// and no new call starts, and the binary then ends by the same signal
/// with [`exit_if_interrupted`]. A signal that arrives while no call runs
/// ends this process at once, as if there were no handler. A provider does
/// not share the terminal's process group, so it would not see a Ctrl-C
/// otherwise.
///
/// Meant for binaries: it installs process-wide handlers. It follows every
/// provider call that runs at the time, concurrent describes included.
pub fn forward_interrupts() {
    for signal in FORWARDED {
        if signal == libc::SIGHUP && AGENT.load(Ordering::SeqCst) {
            continue;
        }
        // SAFETY: the handler only touches atomics and calls
        // async-signal-safe functions; it lives for the whole program.
        unsafe {
            libc::signal(signal, on_signal as *const () as libc::sighandler_t);
        }
    }
    FORWARDING.store(true, Ordering::SeqCst);
}

/// Like [`forward_interrupts`], but a signal that arrives while no provider
/// runs is also only noted: the next call is refused with
/// [`Error::Interrupted`](crate::Error::Interrupted), and the binary ends at
/// its next [`exit_if_interrupted`], after the directories given to
/// [`remove_on_interrupt`] are removed. The caller must check regularly.
pub fn forward_interrupts_deferred() {
    DEFERRED.store(true, Ordering::SeqCst);
    forward_interrupts();
}

/// Like [`forward_interrupts`], except for the first signal: it is only
/// noted, for [`stop_requested`], and the running calls go on. A binary
/// that runs many calls in turn (a plan) uses it to start no new one and
/// let the running ones finish. A second signal acts as
/// [`forward_interrupts`] does.
pub fn forward_interrupts_graceful() {
    GRACEFUL.store(true, Ordering::SeqCst);
    forward_interrupts();
}

/// The first signal a graceful binary was sent (see
/// [`forward_interrupts_graceful`]), if one was.
pub fn stop_requested() -> Option<i32> {
    match STOP.load(Ordering::SeqCst) {
        0 => None,
        signal => Some(signal),
    }
}

/// Ends this process by the forwarded signal that was noted, if any: what
/// is left of the running calls' groups gets SIGKILL, and so does what
/// left them, the paths given to [`remove_on_interrupt`] are removed, and
/// the signal is raised again with its default action.
///
/// Meant for binaries, which call it where they act on an interruption:
/// after each top-level operation, and before reporting an error that
/// may be an [`Error::Interrupted`](crate::Error::Interrupted). The library
/// never calls it.
pub fn exit_if_interrupted() {
    if let Some(signal) = interrupted() {
        reraise(signal);
    }
}

/// Whether a forwarded signal ended the running calls (and keeps new
/// ones from starting).
pub fn is_interrupted() -> bool {
    interrupted().is_some()
}

/// Directories and files removed before this process ends by a forwarded
/// signal.
static REMOVE_ON_INTERRUPT: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Removes `dir` (recursively; or a file) if this process is ended by a
/// forwarded signal; [`keep_on_interrupt`] undoes it.
pub fn remove_on_interrupt(dir: &Path) {
    let mut dirs = REMOVE_ON_INTERRUPT
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    dirs.push(dir.to_owned());
}

pub fn keep_on_interrupt(dir: &Path) {
    let mut dirs = REMOVE_ON_INTERRUPT
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    dirs.retain(|d| d != dir);
}

/// Processes this process started on purpose to outlive their call (an
/// ssh master), ended when this process is ended by a forwarded signal.
static END_ON_INTERRUPT: Mutex<Vec<i32>> = Mutex::new(Vec::new());

/// Sends `pid` SIGKILL if this process is ended by a forwarded signal (a
/// daemon such as ssh's master can miss a SIGTERM that lands while it
/// goes back to waiting, and what it holds needs no clean end);
/// [`keep_running_on_interrupt`] undoes it. `pid` must be a child of this
/// process (an orphan it adopted counts) that it does not reap before then,
/// so the ID cannot name another process.
pub fn end_on_interrupt(pid: i32) {
    END_ON_INTERRUPT
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(pid);
}

pub fn keep_running_on_interrupt(pid: i32) {
    END_ON_INTERRUPT
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .retain(|&p| p != pid);
}

/// Ends this process by the signal that interrupted calls. Their groups
/// got SIGTERM from the handler, and the calls that noticed ended them;
/// what is left of groups still registered (calls in other threads that
/// have yet to notice) gets SIGKILL, so nothing outlives this process.
fn reraise(signal: libc::c_int) -> ! {
    // Waits for a spawn in progress to register its group, and keeps any
    // later one from starting: the gate is never given back.
    let gate = SPAWN_GATE.lock().unwrap_or_else(|e| e.into_inner());
    std::mem::forget(gate);
    for slot in &ACTIVE_GROUPS {
        // The group's leader is unreaped until its slot is cleared, so
        // the ID is still that group's (an empty slot's 0 is passed over).
        super::group::signal_group(slot.load(Ordering::SeqCst), Signal::KILL);
    }
    // And whatever left those groups.
    super::orphans::kill_all_now();
    for pid in std::mem::take(&mut *END_ON_INTERRUPT.lock().unwrap_or_else(|e| e.into_inner())) {
        // The caller vouched for the ID.
        if let Some(pid) = Pid::from_raw(pid.max(0)) {
            let _ = kill_process(pid, Signal::KILL);
        }
    }
    let dirs = std::mem::take(
        &mut *REMOVE_ON_INTERRUPT
            .lock()
            .unwrap_or_else(|e| e.into_inner()),
    );
    for path in dirs {
        if std::fs::remove_dir_all(&path).is_err() {
            let _ = std::fs::remove_file(&path);
        }
    }
    // SAFETY: restores the default action and raises the signal again.
    unsafe {
        libc::signal(signal, libc::SIG_DFL);
        libc::raise(signal);
    }
    std::process::exit(128 + signal)
}

/// Where a running group is registered: for the interrupt handler, and
/// with the keeper, which ends it should this process die first.
#[derive(Debug)]
pub(super) struct Registration {
    slot: Option<usize>,
    group: i32,
    /// Listed with the keeper.
    kept: bool,
}

impl Registration {
    /// Gives the slot back, if it still holds the group, and takes the
    /// group off the keeper's list (so a second call changes nothing).
    /// Must happen before the group's leader is reaped.
    pub(super) fn release(&mut self) {
        if let Some(slot) = self.slot.take() {
            let _ = ACTIVE_GROUPS[slot].compare_exchange(
                self.group,
                0,
                Ordering::SeqCst,
                Ordering::SeqCst,
            );
        }
        if std::mem::take(&mut self.kept) {
            super::keeper::unwatch(self.group);
        }
    }
}

/// Runs `spawn`, which starts a process-group leader and returns its PID
/// with the spawned value, and registers the group for the interrupt
/// handler before any signal can be acted on. Once a forwarded signal has
/// arrived nothing is started: the error is then of the kind
/// [`Interrupted`](std::io::ErrorKind::Interrupted), and [`interrupted`]
/// says which signal it was.
pub(super) fn spawn_registered<T>(
    spawn: impl FnOnce() -> std::io::Result<(T, i32)>,
) -> std::io::Result<(T, Registration)> {
    let _gate = SPAWN_GATE.lock().unwrap_or_else(|e| e.into_inner());
    SPAWNING.fetch_add(1, Ordering::SeqCst);
    if interrupted().is_some() {
        SPAWNING.fetch_sub(1, Ordering::SeqCst);
        return Err(std::io::Error::new(
            std::io::ErrorKind::Interrupted,
            "a forwarded signal arrived; nothing new is started",
        ));
    }
    let spawned = spawn();
    let result = spawned.map(|(value, group)| {
        let slot = if FORWARDING.load(Ordering::SeqCst) {
            register(group)
        } else {
            None
        };
        super::keeper::watch(group);
        let registration = Registration {
            slot,
            group,
            kept: true,
        };
        (value, registration)
    });
    SPAWNING.fetch_sub(1, Ordering::SeqCst);
    result
}

fn register(group: i32) -> Option<usize> {
    let slot = ACTIVE_GROUPS.iter().position(|slot| {
        slot.compare_exchange(0, group, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
    });
    if slot.is_none() {
        log::warn!("more than {GROUP_SLOTS} providers run at once; an interrupt may miss some");
    }
    slot
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_handled_gives_the_interrupted_code_its_errno_back() {
        // The wake-up pipe full: the handler's write fails with EAGAIN.
        let (read, write) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::NONBLOCK).unwrap();
        while rustix::io::write(&write, &[0u8; 4096]).is_ok() {}
        use std::os::fd::AsRawFd;
        WAKE_FD.store(write.as_raw_fd(), Ordering::SeqCst);
        errno::set_errno(errno::Errno(libc::ENOENT));
        on_request(libc::SIGUSR1);
        let after = errno::errno().0;
        WAKE_FD.store(-1, Ordering::SeqCst);
        assert!(take_run_now());
        assert_eq!(after, libc::ENOENT);
        drop((read, write));
    }

    #[test]
    fn a_path_taken_back_is_no_longer_removed_on_interrupt_and_the_others_are() {
        let kept = Path::new("/nonexistent/ral-signals-test/kept");
        let still = Path::new("/nonexistent/ral-signals-test/still");
        remove_on_interrupt(kept);
        remove_on_interrupt(still);
        keep_on_interrupt(kept);
        let listed = REMOVE_ON_INTERRUPT.lock().unwrap().clone();
        assert!(!listed.contains(&kept.to_path_buf()), "{listed:?}");
        assert!(listed.contains(&still.to_path_buf()), "{listed:?}");
        keep_on_interrupt(still);
    }

    #[test]
    fn a_process_taken_back_is_no_longer_ended_on_interrupt_and_the_others_are() {
        // IDs no process has here; an interrupt never comes in unit tests.
        let (kept, still) = (i32::MAX - 11, i32::MAX - 12);
        end_on_interrupt(kept);
        end_on_interrupt(still);
        keep_running_on_interrupt(kept);
        let listed = END_ON_INTERRUPT.lock().unwrap().clone();
        assert!(!listed.contains(&kept), "{listed:?}");
        assert!(listed.contains(&still), "{listed:?}");
        keep_running_on_interrupt(still);
    }
}
