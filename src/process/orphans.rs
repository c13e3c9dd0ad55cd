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

use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rustix::event::{poll, PollFd, PollFlags, Timespec};
use rustix::process::{
    getpid, pidfd_open, pidfd_send_signal, set_child_subreaper, waitid, Pid, PidfdFlags, Signal,
    WaitId, WaitIdOptions,
};

use super::limits::KILL_GRACE;

/// Set once this process is a child subreaper.
static ADOPTING: AtomicBool = AtomicBool::new(false);

/// What the sweeps know.
static STATE: Mutex<State> = Mutex::new(State {
    live: Vec::new(),
    released: Vec::new(),
    inherited: Vec::new(),
    kept: Vec::new(),
    given_up: Vec::new(),
    spared: Vec::new(),
    spared_checked: None,
});

/// More processes than this in one sweep are left alone (a fork bomb is
/// not ours to count to the end).
const MOST_PROCESSES: usize = 4096;
/// How many times a sweep looks again for processes forked while it ran.
const ROUNDS: usize = 3;
/// How long a sweep waits for processes that got SIGKILL to go.
const KILL_WAIT: Duration = Duration::from_secs(2);
/// How often the children a released call left running are looked at
/// again (to reap those that have exited); in between a sweep passes them
/// by without reading their status.
const SPARED_RECHECK: Duration = Duration::from_secs(1);

struct State {
    /// Leaders of running calls (unreaped), with their start times.
    live: Vec<(i32, u64)>,
    /// Start and end (clock ticks) of calls whose orphans are released.
    released: Vec<(u64, u64)>,
    /// The children this process had when it became a subreaper: it
    /// inherited them through exec, no call started them.
    inherited: Vec<i32>,
    /// Children started to outlive the calls (see `daemon.rs`): their
    /// owner ends them.
    kept: Vec<i32>,
    /// Processes that outlived SIGKILL (stuck in the kernel, or not ours
    /// to signal), with their start times: not waited for again.
    given_up: Vec<(i32, u64)>,
    /// Children found running that a released call left (the kept ssh
    /// masters of a fleet, a thousand of them in a first run): a child's
    /// ID stays its own until this process reaps it, so the sweeps need
    /// not read its status again until [`SPARED_RECHECK`] has passed.
    /// Sorted.
    spared: Vec<i32>,
    /// When `spared` was last looked at again.
    spared_checked: Option<Instant>,
}

impl State {
    /// Whether the child `pid` may be ended now, when the call of the
    /// leader `own` (if any) is ending.
    fn may_end(&self, pid: i32, stat: &Stat, own: Option<i32>) -> bool {
        if self.live.iter().any(|&(leader, _)| leader == pid)
            || self.inherited.contains(&pid)
            || self.kept.contains(&pid)
            || self.given_up.contains(&(pid, stat.start))
        {
            return false;
        }
        if stat.zombie {
            return true;
        }
        // The earliest start of another running call: an orphan that
        // started later may be that call's, and is left to its end.
        let others = self
            .live
            .iter()
            .filter(|&&(leader, _)| Some(leader) != own)
            .map(|&(_, start)| start)
            .min();
        others.is_none_or(|first| stat.start < first) && !self.released_started(stat.start)
    }

    /// Whether a process that started at `start` started during a call
    /// whose orphans are released.
    fn released_started(&self, start: u64) -> bool {
        self.released
            .iter()
            .any(|&(from, to)| from <= start && start <= to)
    }
}

/// Makes this process a child subreaper, so that whatever a provider or
/// plugin starts can be found and ended when its call ends, also after it
/// left the call's process group. Returns whether it took effect: not
/// where the kernel has no pidfds (they keep the sweeps from signalling a
/// reused process ID), nor where it refuses the attribute.
///
/// From then on the calls' process groups are also ended when this
/// process dies without ending them itself, however it dies (see
/// `keeper.rs`): a process forked at the first call watches for that.
///
/// Meant for binaries: the attribute is process-wide, and from then on
/// every child of this process that is not a running call's leader, and
/// that it did not have already, counts as something a call left behind.
/// A program that starts children of its own by other means must not call
/// it.
pub fn adopt_orphans() -> bool {
    let me = getpid().as_raw_pid();
    if Pinned::open(me).is_none() {
        return false;
    }
    let inherited = children_of(me);
    let set = set_child_subreaper(Some(getpid())).is_ok();
    if set {
        lock().inherited = inherited;
        ADOPTING.store(true, Ordering::SeqCst);
    }
    set
}

/// Whether this process is a child subreaper (see [`adopt_orphans`]).
pub(super) fn adopting() -> bool {
    ADOPTING.load(Ordering::SeqCst)
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

/// Keeps the child `pid` out of the sweeps until [`forget`]; must be
/// called, like the spawn, under the spawn gate.
pub(super) fn keep(pid: i32) {
    lock().kept.push(pid);
}

/// Takes a kept child, now reaped, off the list; under the spawn gate, so
/// that no new child can have its ID yet.
pub(super) fn forget(pid: i32) {
    lock().kept.retain(|&p| p != pid);
}

/// Ends at once with SIGKILL the orphans of the call of `leader` (exited,
/// not reaped, still registered) that hold one of the pipes whose inodes
/// are `pipes`: they held its output past the linger. Without `release`,
/// the call's other orphans go too (they would at its end anyway).
pub(super) fn kill_now(leader: i32, release: bool, pipes: &[u64]) {
    if ADOPTING.load(Ordering::SeqCst) {
        let found = find(Some(leader));
        for process in &found.tree {
            if !release || holds_a_pipe(process.pid, pipes) {
                process.signal(Signal::KILL);
            }
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
        let mut state = lock();
        if let Some(at) = state.live.iter().position(|&(pid, _)| pid == leader) {
            let (_, start) = state.live.remove(at);
            if release {
                state.released.push((start, now_ticks()));
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

/// Kills at once every descendant a call left (this process is about to
/// end by a signal, and already holds the spawn gate; see
/// `signals::exit_if_interrupted`); released daemons and inherited
/// children are spared, and nothing is waited for.
pub(super) fn kill_all_now() {
    if !ADOPTING.load(Ordering::SeqCst) {
        return;
    }
    for process in tree(&orphans(None)) {
        process.signal(Signal::KILL);
    }
}

fn lock() -> std::sync::MutexGuard<'static, State> {
    STATE.lock().unwrap_or_else(|e| e.into_inner())
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
    // Under the spawn gate, a child is either a registered leader or an
    // orphan: no spawn is between the two. They are pinned there too, so
    // that another thread reaping one cannot let its ID be reused first.
    let orphans = super::gate::with_spawn_gate(|| orphans(own));
    let tree = tree(&orphans);
    let zombies = orphans
        .into_iter()
        .filter(|(_, zombie)| *zombie)
        .map(|(process, _)| process)
        .collect();
    Found { tree, zombies }
}

/// The children of this process that may be ended now, pinned, each with
/// whether it has exited already.
fn orphans(own: Option<i32>) -> Vec<(Pinned, bool)> {
    let me = getpid().as_raw_pid();
    let mut state = lock();
    let now = Instant::now();
    let recheck = state
        .spared_checked
        .is_none_or(|at| now.duration_since(at) >= SPARED_RECHECK);
    if recheck {
        state.spared.clear();
        state.spared_checked = Some(now);
    }
    let mut spared = Vec::new();
    let found = children_of(me)
        .into_iter()
        .filter_map(|pid| {
            if state.spared.binary_search(&pid).is_ok() {
                return None;
            }
            let stat = stat_of(pid)?;
            if !state.may_end(pid, &stat, own) {
                if !stat.zombie && state.released_started(stat.start) {
                    spared.push(pid);
                }
                return None;
            }
            // Our own children: their IDs stay theirs until reaped.
            Pinned::open(pid).map(|process| (process, stat.zombie))
        })
        .collect();
    state.spared.extend(spared);
    state.spared.sort_unstable();
    found
}

/// The living orphans with all their descendants, pinned. A descendant is
/// taken only when its parent is seen alive after the descendant's parent
/// ID was read: that ID is then still the parent's.
fn tree(orphans: &[(Pinned, bool)]) -> Vec<Pinned> {
    let mut tree: Vec<Pinned> = Vec::new();
    for (process, zombie) in orphans {
        if !zombie {
            tree.extend(Pinned::open(process.pid));
        }
    }
    let mut pending: Vec<usize> = (0..tree.len()).collect();
    while let Some(at) = pending.pop() {
        let parent = tree[at].pid;
        for pid in children_of(parent) {
            if tree.len() >= MOST_PROCESSES {
                log::warn!(
                    "more than {MOST_PROCESSES} processes left behind by providers; not ending the rest"
                );
                return tree;
            }
            let Some(process) = Pinned::open(pid) else {
                continue;
            };
            let child_of_parent = stat_of(pid).is_some_and(|stat| stat.parent == parent);
            if child_of_parent && tree[at].is_alive() {
                pending.push(tree.len());
                tree.push(process);
            }
        }
    }
    tree
}

/// SIGTERM, a grace period, SIGKILL for what is left, then reaping; what
/// outlives even SIGKILL is given up on, with a warning. A forwarded
/// signal cuts the grace period short: this process is about to end.
fn end(tree: &[Pinned]) {
    for process in tree {
        process.signal(Signal::TERM);
    }
    let all: Vec<&Pinned> = tree.iter().collect();
    let left = still_running(&all, Instant::now() + KILL_GRACE, true);
    for process in &left {
        process.signal(Signal::KILL);
    }
    let stuck = still_running(&left, Instant::now() + KILL_WAIT, false);
    if !stuck.is_empty() {
        let mut state = lock();
        for process in stuck {
            let start = stat_of(process.pid).map_or(0, |stat| stat.start);
            log::warn!(
                "process {} that a provider left behind outlived SIGKILL; leaving it",
                process.pid
            );
            state.given_up.push((process.pid, start));
        }
    }
    reap(tree);
}

/// Waits until every process has exited or `until` passes, or with
/// `interruptible` a forwarded signal arrived; returns those still
/// running.
fn still_running<'a>(
    processes: &[&'a Pinned],
    until: Instant,
    interruptible: bool,
) -> Vec<&'a Pinned> {
    let mut left = processes.to_vec();
    while !left.is_empty() {
        let mut fds: Vec<PollFd<'_>> = left
            .iter()
            .map(|process| PollFd::new(&process.fd, PollFlags::IN))
            .collect();
        let wait = until.saturating_duration_since(Instant::now());
        // At most 100 ms at a time, so an interrupt is noticed; rounded up
        // to a millisecond, as poll(2) counts.
        let millis = wait.as_micros().div_ceil(1000).min(100) as u64;
        let timeout = Timespec::try_from(Duration::from_millis(millis)).unwrap_or_default();
        let _ = poll(&mut fds, Some(&timeout));
        left = left
            .into_iter()
            .zip(&fds)
            .filter(|(_, fd)| fd.revents().is_empty())
            .map(|(process, _)| process)
            .collect();
        if Instant::now() >= until || (interruptible && super::gate::interrupted().is_some()) {
            break;
        }
    }
    left
}

/// Reaps those of `processes` that are children of this process and have
/// exited, through their pidfds (the others are reaped by their parents).
fn reap(processes: &[Pinned]) {
    for process in processes {
        // Without blocking; one that is not our child gives ECHILD.
        let options = WaitIdOptions::EXITED | WaitIdOptions::NOHANG;
        let _ = waitid(WaitId::PidFd(process.fd.as_fd()), options);
    }
}

/// A process held by a pidfd: signals reach that process or none.
struct Pinned {
    pid: i32,
    fd: OwnedFd,
}

impl Pinned {
    fn open(pid: i32) -> Option<Pinned> {
        let fd = pidfd_open(Pid::from_raw(pid)?, PidfdFlags::empty()).ok()?;
        Some(Pinned { pid, fd })
    }

    /// Whether it has not exited yet.
    fn is_alive(&self) -> bool {
        let mut fd = [PollFd::new(&self.fd, PollFlags::IN)];
        poll(&mut fd, Some(&Timespec::default())) == Ok(0)
    }

    fn signal(&self, signal: Signal) {
        let _ = pidfd_send_signal(&self.fd, signal);
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

/// Whether `pid` has a descriptor open on one of the pipes whose inodes
/// are `pipes`.
fn holds_a_pipe(pid: i32, pipes: &[u64]) -> bool {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    fds.flatten().any(|fd| {
        std::fs::read_link(fd.path()).is_ok_and(|target| {
            target
                .to_str()
                .and_then(|text| text.strip_prefix("pipe:["))
                .and_then(|rest| rest.strip_suffix(']'))
                .and_then(|inode| inode.parse::<u64>().ok())
                .is_some_and(|inode| pipes.contains(&inode))
        })
    })
}

/// The children of `pid` (of all its threads).
/// The child of this process (an orphan it adopted counts) whose command
/// line's first word is `title` (as a daemon sets it, ssh's master
/// `ssh: PATH [mux]`): how a daemon a released call started is found
/// again, without asking it. `None` unless this process adopts orphans,
/// since only then is a daemon its child.
pub fn adopted_child(title: &str) -> Option<i32> {
    if !ADOPTING.load(Ordering::SeqCst) {
        return None;
    }
    let me = getpid().as_raw_pid();
    children_of(me).into_iter().find(|pid| {
        std::fs::read(format!("/proc/{pid}/cmdline"))
            .is_ok_and(|line| line.split(|&b| b == 0).next() == Some(title.as_bytes()))
    })
}

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
            // A thread that ended since the listing (the workers' do all
            // the time), or a kernel without /proc/PID/task/TID/children,
            // where only a scan of every process finds them.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                if !kernel_lists_children() {
                    return children_by_scan(pid);
                }
            }
            Err(_) => {}
        }
    }
    children
}

/// Whether the kernel lists each thread's children in `/proc` (asked once,
/// of this thread, which is there to ask).
fn kernel_lists_children() -> bool {
    static LISTS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *LISTS.get_or_init(|| std::path::Path::new("/proc/thread-self/children").exists())
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
    let now = rustix::time::clock_gettime(rustix::time::ClockId::Boottime);
    let hz = rustix::param::clock_ticks_per_second().max(1);
    now.tv_sec as u64 * hz + now.tv_nsec as u64 * hz / 1_000_000_000
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_read_after_the_command_name() {
        let me = getpid().as_raw_pid();
        let parent = Pid::as_raw(rustix::process::getppid());
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
        let me = getpid().as_raw_pid();
        let pid = child.id() as i32;
        assert!(children_of(me).contains(&pid));
        assert!(children_by_scan(me).contains(&pid));
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(!children_of(me).contains(&pid));
    }
}
