//! Processes that outlive their call, found and ended: this process as a
//! child subreaper.
//!
//! Ending a call's process group misses whatever left the group (`setsid`,
//! `setpgid`) — a careless daemon holding the provider's stdout, or a fully
//! detached one. Once [`adopt_orphans`] has made this process a child
//! subreaper (`PR_SET_CHILD_SUBREAPER`), every descendant whose parent dies
//! is reparented to it instead of to init, so they all stay findable: they
//! are the children of this process that are not the leader of a running
//! call. When a call ends, those that may be its own are ended with their
//! descendants (SIGTERM, [`KILL_GRACE`], SIGKILL) and reaped.
//!
//! Which call an orphan came from is decided by start times, read from
//! `/proc` in the kernel's clock ticks: a process that started before a
//! running call's leader cannot descend from it. An orphan that may belong
//! to a call still running is left to that call's end. A call whose
//! provider declares `starts_daemons` (an update that starts services)
//! releases instead: the orphans that started during it are never ended.
//!
//! Processes are signalled through pidfds, checked to still be the
//! descendant that was found, so a reused process ID is never hit.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::KILL_GRACE;

/// Set once this process is a child subreaper.
static ADOPTING: AtomicBool = AtomicBool::new(false);

/// The running calls and the spans of the released ones.
static CALLS: Mutex<Calls> = Mutex::new(Calls {
    live: Vec::new(),
    released: Vec::new(),
});

/// More processes than this in one sweep are left alone (a fork bomb is
/// not ours to count to the end).
const MOST_PROCESSES: usize = 4096;
/// How many times a sweep looks again for processes forked while it ran.
const ROUNDS: usize = 3;
/// How long a sweep waits for processes that got SIGKILL to go.
const KILL_WAIT: Duration = Duration::from_secs(2);

struct Calls {
    /// Leaders of running calls (unreaped), with their start times.
    live: Vec<(i32, u64)>,
    /// Start and end (clock ticks) of calls whose orphans are released.
    released: Vec<(u64, u64)>,
}

/// Makes this process a child subreaper, so that whatever a provider or
/// plugin starts can be found and ended when its call ends, also after it
/// left the call's process group. Returns whether the kernel agreed.
///
/// Meant for binaries: the attribute is process-wide, and from then on
/// every child of this process that is not a running call's leader counts
/// as something a call left behind. A program that starts children of its
/// own by other means must not call it.
pub fn adopt_orphans() -> bool {
    // SAFETY: prctl with integer arguments; it changes an attribute of this
    // process only.
    let set = unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) } == 0;
    if set {
        ADOPTING.store(true, Ordering::SeqCst);
    }
    set
}

/// Records a call's leader as running; must be called, like the spawn,
/// under the spawn gate, so that no sweep sees the new child unregistered.
pub(super) fn register(leader: i32) {
    if !ADOPTING.load(Ordering::SeqCst) {
        return;
    }
    let start = stat_of(leader).map_or(0, |stat| stat.start);
    lock().live.push((leader, start));
}

/// Ends the orphans that may be this call's at once with SIGKILL, while
/// its leader (exited, not reaped) is still registered: they held its
/// output past the linger.
pub(super) fn kill_now(leader: i32) {
    if ADOPTING.load(Ordering::SeqCst) {
        let found = find(Some(leader));
        for process in &found.tree {
            process.signal(libc::SIGKILL);
        }
        // They are reaped when the call ends.
        reap(&found.zombies);
    }
}

/// Takes a reaped leader off the running calls and ends what it left
/// behind: SIGTERM, up to [`KILL_GRACE`] to go, then SIGKILL, and reaps
/// them. With `release`, the orphans that started during the call are
/// left running instead, now and later.
pub(super) fn call_ended(leader: i32, release: bool) {
    if !ADOPTING.load(Ordering::SeqCst) {
        return;
    }
    {
        let mut calls = lock();
        if let Some(at) = calls.live.iter().position(|&(pid, _)| pid == leader) {
            let (_, start) = calls.live.remove(at);
            if release {
                calls.released.push((start, now_ticks()));
            }
        }
    }
    for _ in 0..ROUNDS {
        let found = find(None);
        reap(&found.zombies);
        if found.tree.is_empty() {
            return;
        }
        end(&found.tree);
    }
}

/// Kills every descendant of this process at once (it is about to end by a
/// signal); nothing is waited for.
pub(super) fn kill_all_now() {
    if !ADOPTING.load(Ordering::SeqCst) {
        return;
    }
    // SAFETY: getpid has no preconditions.
    let me = unsafe { libc::getpid() };
    let mut pending = children_of(me);
    let mut seen = 0;
    while let Some(pid) = pending.pop() {
        seen += 1;
        if seen > MOST_PROCESSES {
            break;
        }
        pending.extend(children_of(pid));
        if let Some(process) = Pinned::open(pid) {
            process.signal(libc::SIGKILL);
        }
    }
}

fn lock() -> std::sync::MutexGuard<'static, Calls> {
    CALLS.lock().unwrap_or_else(|e| e.into_inner())
}

/// What a sweep found: the orphans to end with their descendants, and the
/// orphans that have exited already and only need reaping.
struct Found {
    tree: Vec<Pinned>,
    zombies: Vec<Pinned>,
}

/// The orphans that may be ended now (those of the call of `own`, a leader
/// still registered, or of calls that have ended), with their descendants.
fn find(own: Option<i32>) -> Found {
    // SAFETY: getpid has no preconditions.
    let me = unsafe { libc::getpid() };
    // Under the spawn gate, a child is either a registered leader or an
    // orphan: no spawn is between the two.
    let orphans: Vec<(i32, Stat)> = super::signals::with_spawn_gate(|| {
        let calls = lock();
        // The earliest start of another running call: an orphan that
        // started later may be that call's, and is left to its end.
        let others = calls
            .live
            .iter()
            .filter(|&&(pid, _)| Some(pid) != own)
            .map(|&(_, start)| start)
            .min();
        children_of(me)
            .into_iter()
            .filter(|pid| !calls.live.iter().any(|&(leader, _)| leader == *pid))
            .filter_map(|pid| stat_of(pid).map(|stat| (pid, stat)))
            .filter(|(_, stat)| {
                stat.zombie
                    || (others.is_none_or(|first| stat.start < first)
                        && !calls
                            .released
                            .iter()
                            .any(|&(from, to)| from <= stat.start && stat.start <= to))
            })
            .collect()
    });
    let mut found = Found {
        tree: Vec::new(),
        zombies: Vec::new(),
    };
    let mut parents = vec![me];
    let mut pending: Vec<i32> = Vec::new();
    for (pid, stat) in orphans {
        // Our own children: their IDs stay theirs until we reap them.
        let Some(process) = Pinned::open(pid) else {
            continue;
        };
        if stat.zombie {
            found.zombies.push(process);
        } else {
            pending.push(pid);
            parents.push(pid);
            found.tree.push(process);
        }
    }
    // Their descendants, each checked after pinning to still have a parent
    // in the tree (its ID was not reused in between).
    while let Some(parent) = pending.pop() {
        for pid in children_of(parent) {
            if found.tree.len() >= MOST_PROCESSES {
                log::warn!(
                    "more than {MOST_PROCESSES} processes left behind by providers; not ending the rest"
                );
                return found;
            }
            let Some(process) = Pinned::open(pid) else {
                continue;
            };
            if stat_of(pid).is_some_and(|stat| parents.contains(&stat.parent)) {
                parents.push(pid);
                pending.push(pid);
                found.tree.push(process);
            }
        }
    }
    found
}

/// SIGTERM, a grace period, SIGKILL for what is left, then reaping.
fn end(tree: &[Pinned]) {
    for process in tree {
        process.signal(libc::SIGTERM);
    }
    let all: Vec<&Pinned> = tree.iter().collect();
    let left = still_running(&all, Instant::now() + KILL_GRACE);
    for process in &left {
        process.signal(libc::SIGKILL);
    }
    still_running(&left, Instant::now() + KILL_WAIT);
    reap(tree);
}

/// Waits until every process has exited or `until` passes; returns those
/// still running.
fn still_running<'a>(processes: &[&'a Pinned], until: Instant) -> Vec<&'a Pinned> {
    let mut left = processes.to_vec();
    while !left.is_empty() {
        let mut fds: Vec<libc::pollfd> = left
            .iter()
            .map(|process| libc::pollfd {
                fd: process.fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        let wait = until.saturating_duration_since(Instant::now());
        // At most 100 ms at a time, so an interrupt is noticed.
        let millis = wait.as_micros().div_ceil(1000).min(100) as libc::c_int;
        // SAFETY: `fds` is a valid, exclusively borrowed array of pollfd.
        unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, millis) };
        left = left
            .into_iter()
            .zip(&fds)
            .filter(|(_, fd)| fd.revents == 0)
            .map(|(process, _)| process)
            .collect();
        if Instant::now() >= until {
            break;
        }
        super::signals::exit_if_interrupted();
    }
    left
}

/// Reaps those of `processes` that are children of this process and have
/// exited (the others are reaped by their own parents).
fn reap(processes: &[Pinned]) {
    for process in processes {
        let mut status = 0;
        // SAFETY: waits without blocking for one specific process ID; a
        // process that is not our child gives ECHILD.
        unsafe { libc::waitpid(process.pid, &mut status, libc::WNOHANG) };
    }
}

/// A process held by a pidfd: signals reach that process or none.
struct Pinned {
    pid: i32,
    fd: OwnedFd,
}

impl Pinned {
    fn open(pid: i32) -> Option<Pinned> {
        // SAFETY: pidfd_open takes a process ID and flags.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
        (fd >= 0).then(|| Pinned {
            pid,
            // SAFETY: the kernel just gave us this descriptor.
            fd: unsafe { OwnedFd::from_raw_fd(fd as RawFd) },
        })
    }

    fn signal(&self, signal: libc::c_int) {
        // SAFETY: pidfd_send_signal with our pidfd, a signal number and no
        // siginfo.
        unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                self.fd.as_raw_fd(),
                signal,
                std::ptr::null::<libc::siginfo_t>(),
                0,
            )
        };
    }
}

/// What `/proc/PID/stat` says of a process that matters here.
struct Stat {
    parent: i32,
    /// Start time, in clock ticks since boot.
    start: u64,
    zombie: bool,
}

fn stat_of(pid: i32) -> Option<Stat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name, in parentheses, may hold anything: fields are
    // counted after its last ')'.
    let fields: Vec<&str> = text[text.rfind(')')? + 1..].split_whitespace().collect();
    // fields[0] is field 3 (state), [1] field 4 (ppid), [19] field 22
    // (starttime).
    Some(Stat {
        parent: fields.get(1)?.parse().ok()?,
        start: fields.get(19)?.parse().ok()?,
        zombie: *fields.first()? == "Z",
    })
}

/// The children of `pid` (of all its threads).
fn children_of(pid: i32) -> Vec<i32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    let mut children = Vec::new();
    for task in tasks.flatten() {
        match std::fs::read_to_string(task.path().join("children")) {
            Ok(list) => children.extend(
                list.split_whitespace()
                    .filter_map(|c| c.parse::<i32>().ok()),
            ),
            // A kernel without /proc/PID/task/TID/children.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return children_by_scan(pid),
            Err(_) => {}
        }
    }
    children
}

/// The children of `pid`, found by reading every process's parent.
fn children_by_scan(pid: i32) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&candidate| stat_of(candidate).is_some_and(|stat| stat.parent == pid))
        .collect()
}

/// Now, in the clock ticks `/proc/PID/stat` gives start times in.
fn now_ticks() -> u64 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the time into `now`.
    unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut now) };
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    now.tv_sec as u64 * hz + now.tv_nsec as u64 * hz / 1_000_000_000
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_read_after_the_command_name() {
        // SAFETY: getpid and getppid have no preconditions.
        let (me, parent) = unsafe { (libc::getpid(), libc::getppid()) };
        let stat = stat_of(me).expect("our own stat");
        assert_eq!(stat.parent, parent);
        assert!(!stat.zombie);
        assert!(stat.start <= now_ticks());
    }

    #[test]
    fn children_are_listed() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        // SAFETY: getpid has no preconditions.
        let me = unsafe { libc::getpid() };
        let pid = child.id() as i32;
        assert!(children_of(me).contains(&pid));
        assert!(children_by_scan(me).contains(&pid));
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(!children_of(me).contains(&pid));
    }
}
