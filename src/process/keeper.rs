//! The keeper: what ends the running calls' process groups when this
//! process dies without ending them itself (SIGKILL, a crash, the OOM
//! killer).
//!
//! A call leads a process group of its own, so that its time limit ends
//! all of it; but then nothing else ends it: it is in no terminal's
//! foreground group, and `PR_SET_PDEATHSIG` would end only its leader
//! (when the thread that started it ends, not the process). So, once this
//! process adopts orphans (see `orphans.rs`), the first call forks a small
//! process, the keeper, into a process group of its own. It holds nothing
//! but the read end of a pipe whose write end only this process holds
//! (close-on-exec: no child inherits it). Each call's group is listed with
//! the keeper when it starts (under the spawn gate) and taken off before
//! its leader is reaped, while the ID is still that group's. When this
//! process dies, however it dies, the keeper reads end of file: it sends
//! the groups still listed SIGTERM, gives them [`KILL_GRACE`] to go, sends
//! SIGKILL to those still there, and exits. A process of the group that
//! left it (`setsid`) is not the keeper's to find; its orphan is reparented
//! to whoever adopts it next. When this process ends normally, nothing is
//! listed any more: the keeper just exits. (On a target, the watchdog of
//! `remote::script` does the same when the run's session ends.)
//!
//! The keeper is forked, not started from a program, since this process
//! may be any program using the library. A child of a process with
//! threads may run only async-signal-safe functions until it execs, so
//! the keeper runs only system calls, on its own stack, until it exits.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::sync::Mutex;
use std::time::Duration;

use rustix::io::Errno;
use rustix::process::{test_kill_process_group, waitpid, Pid, Signal, WaitOptions};

use super::limits::KILL_GRACE;

/// The most groups listed at once; a call started beyond them is not
/// ended by the keeper (said once).
const MOST_GROUPS: usize = 1024;
/// How often the keeper looks whether the groups it ended are gone.
const LOOK_EVERY: Duration = Duration::from_millis(20);

/// This process's side of the keeper.
struct State {
    /// The write end of the keeper's pipe, while a keeper runs.
    pipe: Option<OwnedFd>,
    /// The keeper's process ID, until it is reaped.
    pid: Option<i32>,
    /// The groups listed: a keeper started anew is told them all.
    live: Vec<i32>,
    /// Said that there are too many groups.
    warned: bool,
}

static STATE: Mutex<State> = Mutex::new(State {
    pipe: None,
    pid: None,
    live: Vec::new(),
    warned: false,
});

fn lock() -> std::sync::MutexGuard<'static, State> {
    STATE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Lists the group of a call just started, starting the keeper first when
/// none runs. Does nothing unless this process adopts orphans. Must be
/// called under the spawn gate, as the spawn itself.
pub(super) fn watch(group: i32) {
    if !super::orphans::adopting() {
        return;
    }
    let mut state = lock();
    if state.live.len() >= MOST_GROUPS {
        if !std::mem::replace(&mut state.warned, true) {
            log::warn!(
                "more than {MOST_GROUPS} calls run at once; those beyond are not ended if ral \
                 is killed"
            );
        }
        return;
    }
    state.live.push(group);
    let told = match &state.pipe {
        Some(pipe) => send(pipe.as_fd(), group),
        None => false,
    };
    if !told {
        start(&mut state);
    }
}

/// Takes the group of a call off the list, before its leader is reaped.
pub(super) fn unwatch(group: i32) {
    let mut state = lock();
    let Some(at) = state.live.iter().position(|&listed| listed == group) else {
        return;
    };
    state.live.swap_remove(at);
    if let Some(pipe) = &state.pipe {
        // A keeper that is gone lists nothing.
        send(pipe.as_fd(), -group);
    }
}

/// Writes one word: a group to list, or (negative) one to take off.
fn send(pipe: BorrowedFd<'_>, word: i32) -> bool {
    let bytes = word.to_ne_bytes();
    loop {
        // 4 bytes are fewer than PIPE_BUF, so they are written whole or not.
        match rustix::io::write(pipe, &bytes) {
            Ok(written) => return written == bytes.len(),
            Err(Errno::INTR) => continue,
            Err(_) => return false,
        }
    }
}

/// Starts a keeper (the last one is gone, or there was none) and tells it
/// every group listed.
fn start(state: &mut State) {
    state.pipe = None;
    if let Some(pid) = state.pid.take() {
        // Without blocking, for our own child.
        let waited = Pid::from_raw(pid).map(|child| waitpid(Some(child), WaitOptions::NOHANG));
        let reaped = matches!(waited, Some(Ok(Some(_))));
        match reaped {
            // Under the spawn gate: no new child can have its ID yet.
            true => super::orphans::forget(pid),
            false => state.pid = Some(pid),
        }
    }
    let (read, write) = match rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC) {
        Ok(ends) => ends,
        Err(e) => {
            log::debug!("no pipe for the keeper: {}", std::io::Error::from(e));
            return;
        }
    };
    // SAFETY: the child runs only `keep`, which makes system calls on its
    // own stack and never returns (see the module).
    match unsafe { libc::fork() } {
        -1 => log::debug!(
            "the keeper could not be started: {}",
            std::io::Error::last_os_error()
        ),
        // SAFETY: in the new child, with the pipe's read end open.
        0 => unsafe { keep(read.as_fd()) },
        pid => {
            drop(read);
            // Not something a call left behind: the sweeps leave it be.
            super::orphans::keep(pid);
            let pipe = write.as_fd();
            let told = state.live.iter().all(|&group| send(pipe, group));
            state.pipe = told.then_some(write);
            if let Some(old) = state.pid.replace(pid) {
                // The last keeper, not reaped yet: when it goes, it is
                // reaped as an orphan nobody keeps.
                super::orphans::forget(old);
            }
        }
    }
}

/// The keeper's whole life, in the child: reads the groups to list and
/// take off until end of file, then ends those listed and exits.
///
/// # Safety
///
/// Only in a child just forked, with `pipe` the read end of the keeper's
/// pipe; it never returns.
unsafe fn keep(pipe: BorrowedFd<'_>) -> ! {
    // rustix's calls are plain system calls, as a forked child of a
    // threaded process may make.
    // Out of this process's group, so that what ends that group (a
    // Ctrl-C, a kill of the group) leaves the keeper to do its work.
    let _ = rustix::process::setpgid(None, None);
    let _ = rustix::process::chdir(c"/");
    let _ = rustix::thread::set_name(c"ral-keeper");
    // SAFETY (all calls below): plain system calls with integer arguments
    // or pointers to this stack frame; rustix has no safe form of signal
    // dispositions and masks, nor of closing descriptors it does not own.
    unsafe {
        for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGPIPE] {
            libc::signal(signal, libc::SIG_DFL);
        }
        let mut none = std::mem::zeroed::<libc::sigset_t>();
        libc::sigemptyset(&mut none);
        libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
        close_all_but(pipe.as_raw_fd());
    }
    let mut groups = [0i32; MOST_GROUPS];
    let mut count = 0;
    let mut word = [0u8; 4];
    let mut filled = 0;
    let mut buffer = [0u8; 256];
    loop {
        let read = match rustix::io::read(pipe, &mut buffer) {
            Err(Errno::INTR) => continue,
            Ok(0) | Err(_) => break,
            Ok(read) => read,
        };
        for &byte in &buffer[..read] {
            word[filled] = byte;
            filled += 1;
            if filled < word.len() {
                continue;
            }
            filled = 0;
            match i32::from_ne_bytes(word) {
                group if group > 0 && count < groups.len() => {
                    groups[count] = group;
                    count += 1;
                }
                taken if taken < 0 => {
                    if let Some(at) = groups[..count].iter().position(|&g| g == -taken) {
                        count -= 1;
                        groups[at] = groups[count];
                    }
                }
                _ => {}
            }
        }
    }
    end(&mut groups[..count]);
    // SAFETY: ends this process at once, as a forked child must.
    unsafe { libc::_exit(0) }
}

/// SIGTERM to each group, up to [`KILL_GRACE`] for them to go, then
/// SIGKILL to those still there; a group seen gone is not signalled
/// again (its ID may be another's by then).
fn end(groups: &mut [i32]) {
    for &group in groups.iter() {
        super::group::signal_group(group, Signal::TERM);
    }
    let mut waited = Duration::ZERO;
    loop {
        for group in groups.iter_mut().filter(|group| **group > 0) {
            // No signal: only asks whether the group is there.
            if Pid::from_raw(*group).map(test_kill_process_group) == Some(Err(Errno::SRCH)) {
                *group = 0;
            }
        }
        if groups.iter().all(|&group| group == 0) || waited >= KILL_GRACE {
            break;
        }
        let pause = rustix::time::Timespec {
            tv_sec: 0,
            tv_nsec: LOOK_EVERY.as_nanos() as i64,
        };
        let _ = rustix::thread::nanosleep(&pause);
        waited += LOOK_EVERY;
    }
    // Those seen gone are 0 by now, and passed over.
    for &group in groups.iter() {
        super::group::signal_group(group, Signal::KILL);
    }
}

/// Closes every descriptor but `keep`: the keeper must hold nothing of
/// this process's (a call's output, a terminal, a pipe a reader waits on
/// to end).
///
/// # Safety
///
/// Only in the keeper, which uses no other descriptor.
unsafe fn close_all_but(keep: RawFd) {
    let keep = keep as libc::c_uint;
    // SAFETY: close_range takes integers; where the kernel has none
    // (before 5.9), each descriptor up to the limit is closed in turn.
    unsafe {
        let below = keep == 0 || libc::syscall(libc::SYS_close_range, 0, keep - 1, 0) == 0;
        let above = libc::syscall(libc::SYS_close_range, keep + 1, libc::c_uint::MAX, 0) == 0;
        if below && above {
            return;
        }
        let mut limit = std::mem::zeroed::<libc::rlimit>();
        let most = match libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) {
            0 => limit.rlim_cur.min(1 << 20) as libc::c_uint,
            _ => 1 << 16,
        };
        for fd in (0..most).filter(|&fd| fd != keep) {
            libc::close(fd as libc::c_int);
        }
    }
}
