//! The one place where provider processes are started, fed, read and ended.
//!
//! Every call runs the provider directly (argv only, never through a shell),
//! in its own process group, with stdin from `/dev/null` and a scrubbed
//! environment. Stdout is read line by line in a reader thread and handed to
//! the caller through a bounded channel, so a listing is processed while the
//! provider writes it and memory stays bounded. Stderr is drained at the same
//! time and logged line by line under the provider's name. When the time
//! limit passes, the whole process group gets SIGTERM, then SIGKILL after a
//! short grace period.
//!
//! The provider's exit is watched without reaping it (`waitid` with
//! `WNOWAIT`), so its process-group ID cannot be reused by an unrelated
//! group while we may still signal it. When the provider has exited but
//! processes it started keep its output open, they get [`OUTPUT_LINGER`] to
//! finish and are then killed, instead of stalling the call until its time
//! limit.

use std::ffi::{OsStr, OsString};
use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender, TryRecvError};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::metadata::REDACTED;
use crate::text::escape;

pub mod streams;

/// The longest line accepted from a provider, in bytes.
pub const MAX_LINE: usize = 64 * 1024;
/// The largest answer accepted for a single resource (find, update, or one
/// resource of a listing), in bytes.
pub const MAX_ANSWER: usize = 1024 * 1024;
/// How long a provider has to exit after SIGTERM before it gets SIGKILL.
pub const KILL_GRACE: Duration = Duration::from_secs(2);
/// How long processes left behind by an exited provider may keep its
/// output open before they are killed.
pub const OUTPUT_LINGER: Duration = Duration::from_secs(2);
/// The longest time limit honoured; longer ones are cut to this.
const MAX_TIMEOUT: Duration = Duration::from_secs(365 * 24 * 3600);
/// How often a waiting call checks for a forwarded interrupt.
const INTERRUPT_POLL: Duration = Duration::from_millis(100);
/// How many lines of stderr are kept for error messages.
const STDERR_TAIL: usize = 10;

/// Variables passed through from the caller's environment unchanged.
pub const PASSED_THROUGH: [&str; 2] = ["PATH", "HOME"];
/// The PATH given to providers when the caller has none.
pub const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// The complete environment a provider runs with.
#[derive(Debug, Clone)]
pub struct ProviderEnv {
    vars: Vec<(OsString, OsString)>,
}

impl ProviderEnv {
    /// Builds the documented allow-list from the caller's environment: PATH
    /// and HOME as they are, LANG and LC_ALL set to C, and `RALSH_ROOT_DIR`.
    /// Nothing else reaches a provider.
    pub fn scrubbed(root: &Path) -> ProviderEnv {
        let mut vars: Vec<(OsString, OsString)> = Vec::new();
        for key in PASSED_THROUGH {
            if let Some(value) = std::env::var_os(key) {
                vars.push((key.into(), value));
            }
        }
        // Relative PATH entries would make `#!/usr/bin/env python3` depend on
        // the caller's working directory; only absolute ones are kept.
        if let Some((_, path)) = vars.iter_mut().find(|(k, _)| k == "PATH") {
            let absolute: Vec<PathBuf> = std::env::split_paths(path)
                .filter(|dir| dir.is_absolute())
                .collect();
            *path = std::env::join_paths(absolute).unwrap_or_default();
        }
        vars.retain(|(_, value)| !value.is_empty());
        if !vars.iter().any(|(k, _)| k == "PATH") {
            vars.push(("PATH".into(), DEFAULT_PATH.into()));
        }
        if !vars.iter().any(|(k, _)| k == "HOME") {
            vars.push(("HOME".into(), "/".into()));
        }
        vars.push(("LANG".into(), "C".into()));
        vars.push(("LC_ALL".into(), "C".into()));
        vars.push(("RALSH_ROOT_DIR".into(), root.into()));
        ProviderEnv { vars }
    }

    pub fn get(&self, key: &str) -> Option<&OsStr> {
        self.vars
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_os_str())
    }
}

/// One provider call.
pub struct Call<'a> {
    /// The provider's qualified name, used as log target and in errors.
    pub label: &'a str,
    pub program: &'a Path,
    pub action: &'a str,
    pub args: Vec<String>,
    pub env: &'a ProviderEnv,
    pub timeout: Duration,
    /// Limit on the bytes of one answer: all of stdout, or one resource when
    /// the [`LineSink`] resets the budget at each new resource.
    pub max_answer: usize,
    /// The longest stdout line accepted ([`MAX_LINE`] for line-based
    /// conventions; a JSON document may be one long line).
    pub max_line: usize,
    /// What the provider reads on stdin; `/dev/null` when `None`.
    pub stdin: Option<Vec<u8>>,
    /// Log stderr lines as they come. When false (describe), they are only
    /// collected, so a provider that is then skipped makes one warning.
    pub log_stderr: bool,
    /// Values (sensitive ones) replaced by `[redacted]` in every stderr line
    /// before it is logged or quoted.
    pub secrets: Vec<String>,
}

/// What a finished call left behind besides its stdout.
#[derive(Debug, Clone)]
pub struct Finished {
    /// How many lines the provider wrote on stderr.
    pub stderr_lines: usize,
    /// How many of them were at error level.
    pub error_lines: usize,
    /// The last lines of stderr.
    pub stderr_tail: Vec<String>,
}

/// What the line consumer tells the runner after each line.
pub enum Budget {
    /// The line belongs to the current answer; keep counting.
    Continue,
    /// The line started a new unit (a new resource); restart the count.
    Reset,
}

/// Consumes stdout lines; returning an error ends the call and kills the
/// provider.
pub type LineSink<'s> = dyn FnMut(&str) -> Result<Budget> + 's;

/// Told when the provider's output has been consumed up to what it wrote
/// so far; an error ends the call.
pub type Idle<'s> = dyn FnMut() -> Result<()> + 's;

/// The process groups of the running calls, for the interrupt handler; 0
/// marks a free slot. Describes run several at a time.
static ACTIVE_GROUPS: [AtomicI32; GROUP_SLOTS] = [const { AtomicI32::new(0) }; GROUP_SLOTS];
const GROUP_SLOTS: usize = 32;

/// Makes `group` known to the interrupt handler; the slot to give back to
/// [`untrack_group`] before the group's leader is reaped.
fn track_group(group: i32) -> Option<usize> {
    let slot = ACTIVE_GROUPS.iter().position(|slot| {
        slot.compare_exchange(0, group, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
    });
    if slot.is_none() {
        log::warn!("more than {GROUP_SLOTS} providers run at once; an interrupt may miss some");
    }
    slot
}

/// Gives the slot back, if it still holds `group` (so a second call, after
/// the slot went to another call, changes nothing).
fn untrack_group(slot: Option<usize>, group: i32) {
    if let Some(slot) = slot {
        let _ = ACTIVE_GROUPS[slot].compare_exchange(group, 0, Ordering::SeqCst, Ordering::SeqCst);
    }
}
/// Set once [`forward_interrupts`] installed its handler.
static FORWARDING: AtomicBool = AtomicBool::new(false);
/// The signal that interrupted the running call, or 0.
static INTERRUPTED: AtomicI32 = AtomicI32::new(0);
/// Set by [`forward_interrupts_deferred`].
static DEFERRED: AtomicBool = AtomicBool::new(false);

const FORWARDED: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

/// Makes SIGINT, SIGTERM and SIGHUP end the running provider's whole process
/// group (SIGTERM, then SIGKILL for what survives the grace period) before
/// this process ends by the same signal. A provider does not share the
/// terminal's process group, so it would not see a Ctrl-C otherwise.
///
/// Meant for binaries: it installs process-wide handlers. It follows every
/// provider call that runs at the time, concurrent describes included.
pub fn forward_interrupts() {
    extern "C" fn on_signal(signal: libc::c_int) {
        let mut running = false;
        for slot in &ACTIVE_GROUPS {
            let group = slot.load(Ordering::SeqCst);
            if group > 0 {
                running = true;
                // SAFETY: kill is async-signal-safe and takes plain integers.
                unsafe { libc::kill(-group, libc::SIGTERM) };
            }
        }
        if running || DEFERRED.load(Ordering::SeqCst) {
            // A waiting call notices, finishes its group off and re-raises
            // (see `reraise`); without one, the main thread does at its next
            // check, after cleaning up.
            INTERRUPTED.store(signal, Ordering::SeqCst);
        } else {
            // SAFETY: signal and raise are async-signal-safe.
            unsafe {
                libc::signal(signal, libc::SIG_DFL);
                libc::raise(signal);
            }
        }
    }
    for signal in FORWARDED {
        // SAFETY: the handler only touches atomics and calls
        // async-signal-safe functions; it lives for the whole program.
        unsafe {
            libc::signal(signal, on_signal as *const () as libc::sighandler_t);
        }
    }
    FORWARDING.store(true, Ordering::SeqCst);
}

/// Like [`forward_interrupts`], but a signal that arrives while no provider
/// runs is also only noted, and acted on at the next [`exit_if_interrupted`]
/// or provider call, so the directories given to [`remove_on_interrupt`] are
/// removed first. The caller must check regularly.
pub fn forward_interrupts_deferred() {
    DEFERRED.store(true, Ordering::SeqCst);
    forward_interrupts();
}

/// Ends this process by the signal that was noted, if any (see
/// [`forward_interrupts_deferred`]).
pub fn exit_if_interrupted() {
    let signal = INTERRUPTED.load(Ordering::SeqCst);
    if signal != 0 {
        reraise(signal);
    }
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

/// Ends this process by the signal that interrupted a call. Calls running
/// in other threads got SIGTERM from the handler at least a grace period
/// ago (the caller waited that long for its own group); what is left of
/// their groups gets SIGKILL, so nothing outlives this process.
fn reraise(signal: libc::c_int) -> ! {
    for slot in &ACTIVE_GROUPS {
        let group = slot.load(Ordering::SeqCst);
        if group > 0 {
            // SAFETY: the group's leader is unreaped until its slot is
            // cleared, so the ID is still that group's.
            unsafe { libc::kill(-group, libc::SIGKILL) };
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

fn forwarded_set() -> libc::sigset_t {
    // SAFETY: sigemptyset initialises the set before sigaddset uses it.
    unsafe {
        let mut set = std::mem::MaybeUninit::<libc::sigset_t>::zeroed().assume_init();
        libc::sigemptyset(&mut set);
        for signal in FORWARDED {
            libc::sigaddset(&mut set, signal);
        }
        set
    }
}

/// Holds the forwarded signals back on this thread while a provider starts,
/// so that none arrives between the spawn and the moment the handler knows
/// the provider's group; they are delivered when this is dropped.
struct SignalsHeld {
    old: Option<libc::sigset_t>,
}

impl SignalsHeld {
    fn new() -> SignalsHeld {
        if !FORWARDING.load(Ordering::SeqCst) {
            return SignalsHeld { old: None };
        }
        let set = forwarded_set();
        let mut old = set;
        // SAFETY: both pointers are valid sigset_t values.
        unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, &mut old) };
        SignalsHeld { old: Some(old) }
    }
}

impl Drop for SignalsHeld {
    fn drop(&mut self) {
        if let Some(old) = &self.old {
            // SAFETY: restores the mask saved in `new`.
            unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, old, std::ptr::null_mut()) };
        }
    }
}

enum StdoutEvent {
    /// Lines that were ready together; sent as one batch so a fast provider
    /// does not cost a thread hand-over per line.
    Lines(Vec<String>),
    /// The provider itself exited (its children may still write).
    LeaderExited,
    TooLong,
    Failed(std::io::Error),
    Eof,
}

/// Runs one call, feeding each stdout line to `sink`.
pub fn run(call: &Call, sink: &mut LineSink) -> Result<Finished> {
    run_paced(call, sink, &mut || Ok(()))
}

/// Like [`run`], and calls `idle` whenever the lines that were ready are
/// consumed and the next ones would wait for the provider: the moment to
/// flush buffered output, so a slow provider's resources show as they come.
pub fn run_paced(call: &Call, sink: &mut LineSink, idle: &mut Idle) -> Result<Finished> {
    let deadline = Instant::now() + call.timeout.min(MAX_TIMEOUT);
    let (stdout_reader, stdout_writer) =
        std::io::pipe().map_err(|e| Error::io("creating a pipe", e))?;
    let (stderr_reader, stderr_writer) =
        std::io::pipe().map_err(|e| Error::io("creating a pipe", e))?;
    let held = SignalsHeld::new();
    let forwarding = held.old.is_some();
    let handle = {
        // The expression owns the write ends; dropping it at the end of this
        // block leaves the child as their only holder, so EOF means the
        // provider (and everything it started) closed them.
        let command = duct::cmd(call.program, &call.args).dir("/");
        let command = match &call.stdin {
            Some(bytes) => command.stdin_bytes(bytes.clone()),
            None => command.stdin_null(),
        };
        let expression = command
            .stdout_file(stdout_writer)
            .stderr_file(stderr_writer)
            .full_env(call.env.vars.iter().cloned())
            .unchecked()
            .before_spawn(move |command| {
                command.process_group(0);
                if forwarding {
                    let set = forwarded_set();
                    // SAFETY: runs in the forked child before exec and only
                    // calls sigprocmask, which is async-signal-safe.
                    unsafe {
                        command.pre_exec(move || {
                            libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
                            Ok(())
                        });
                    }
                }
                Ok(())
            });
        expression.start().map_err(|source| Error::Spawn {
            provider: call.label.to_owned(),
            file: call.program.to_owned(),
            action: call.action.to_owned(),
            source,
        })?
    };
    let group = handle.pids().first().copied().unwrap_or(0) as i32;
    let slot = if forwarding { track_group(group) } else { None };

    // A small bound: the reader waits for the consumer instead of buffering
    // an endless provider's output.
    let (sender, lines) = mpsc::sync_channel(STDOUT_BATCHES);
    // Started while the signals are held, these threads keep them blocked
    // for good, so an interrupt always reaches a thread that acts on it.
    let exit_events = sender.clone();
    let exit = watch_exit(group, move || {
        let _ = exit_events.send(StdoutEvent::LeaderExited);
    });
    spawn_stdout_reader(stdout_reader, sender, call.max_line);
    let stderr = spawn_stderr_logger(
        stderr_reader,
        call.label.to_owned(),
        call.log_stderr,
        call.secrets.clone(),
    );
    drop(held);
    let child = Child {
        handle,
        group,
        slot,
        exit,
        call,
    };
    let result = child.consume(lines, stderr, deadline, sink, idle);
    untrack_group(slot, group);
    result
}

struct StderrSummary {
    lines: usize,
    errors: usize,
    tail: Vec<String>,
}

/// Whether the provider has exited, learnt without reaping it.
struct ExitWatch {
    exited: Mutex<bool>,
    changed: Condvar,
}

impl ExitWatch {
    /// Waits until the provider exited or `until` passed; true if it exited.
    fn wait_until(&self, until: Instant) -> bool {
        let guard = self.exited.lock().unwrap_or_else(|e| e.into_inner());
        let (guard, _) = self
            .changed
            .wait_timeout_while(guard, remaining(until), |exited| !*exited)
            .unwrap_or_else(|e| e.into_inner());
        *guard
    }
}

/// Watches for the provider's exit in a thread, leaving it unreaped so its
/// process-group ID stays reserved until we reap it ourselves.
fn watch_exit(pid: i32, on_exit: impl FnOnce() + Send + 'static) -> Arc<ExitWatch> {
    let watch = Arc::new(ExitWatch {
        exited: Mutex::new(false),
        changed: Condvar::new(),
    });
    let shared = Arc::clone(&watch);
    std::thread::spawn(move || {
        loop {
            // SAFETY: siginfo_t is plain data; waitid writes into it.
            let mut info = unsafe { std::mem::zeroed::<libc::siginfo_t>() };
            // SAFETY: waits for our own child with WNOWAIT, which leaves it
            // to be reaped later by its handle.
            let status = unsafe {
                libc::waitid(
                    libc::P_PID,
                    pid as libc::id_t,
                    &mut info,
                    libc::WEXITED | libc::WNOWAIT,
                )
            };
            if status == 0
                || std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted
            {
                break;
            }
        }
        *shared.exited.lock().unwrap_or_else(|e| e.into_inner()) = true;
        shared.changed.notify_all();
        on_exit();
    });
    watch
}

struct Child<'a> {
    handle: duct::Handle,
    group: i32,
    /// Where the interrupt handler finds `group`.
    slot: Option<usize>,
    exit: Arc<ExitWatch>,
    call: &'a Call<'a>,
}

/// What waiting on a channel brought.
enum Received<T> {
    Value(T),
    TimedOut,
    Closed,
}

impl Child<'_> {
    fn consume(
        &self,
        lines: Receiver<StdoutEvent>,
        stderr: Receiver<StderrSummary>,
        deadline: Instant,
        sink: &mut LineSink,
        idle: &mut Idle,
    ) -> Result<Finished> {
        let mut answer_bytes = 0usize;
        // Set once the provider exited: its children may keep the output
        // open only until then.
        let mut linger_until: Option<Instant> = None;
        loop {
            let until = linger_until.map_or(deadline, |linger| linger.min(deadline));
            let event = match lines.try_recv() {
                Ok(event) => Received::Value(event),
                Err(TryRecvError::Disconnected) => Received::Closed,
                Err(TryRecvError::Empty) => {
                    // Everything written so far is consumed; the wait for
                    // more starts now.
                    if let Err(e) = idle() {
                        self.terminate();
                        return Err(e);
                    }
                    self.receive(&lines, until)
                }
            };
            let batch = match event {
                Received::Value(StdoutEvent::Lines(batch)) => batch,
                Received::Value(StdoutEvent::LeaderExited) => {
                    linger_until = Some(Instant::now() + OUTPUT_LINGER);
                    continue;
                }
                Received::Value(StdoutEvent::Eof) | Received::Closed => break,
                Received::Value(StdoutEvent::TooLong) => {
                    return Err(self.abandon(format!(
                        "a line of output is longer than {} bytes",
                        self.call.max_line
                    )))
                }
                Received::Value(StdoutEvent::Failed(e)) => {
                    return Err(self.abandon(format!("reading its output failed: {e}")))
                }
                Received::TimedOut if linger_until.is_some() && Instant::now() < deadline => {
                    self.kill_leftovers();
                    linger_until = None;
                    continue;
                }
                Received::TimedOut => return Err(self.time_out()),
            };
            for line in batch {
                match sink(&line) {
                    Ok(Budget::Continue) => answer_bytes += line.len() + 1,
                    Ok(Budget::Reset) => answer_bytes = line.len() + 1,
                    Err(e) => {
                        self.terminate();
                        return Err(e);
                    }
                }
                if answer_bytes > self.call.max_answer {
                    return Err(self.abandon(format!(
                        "its answer is larger than {} bytes",
                        self.call.max_answer
                    )));
                }
            }
        }
        // The output is complete even if the provider has yet to exit.
        if let Err(e) = idle() {
            self.terminate();
            return Err(e);
        }
        if !self.wait_exit(deadline) {
            return Err(self.time_out());
        }
        let linger = (Instant::now() + OUTPUT_LINGER).min(deadline);
        let summary = match self.receive(&stderr, linger) {
            Received::Value(summary) => Some(summary),
            Received::Closed => None,
            Received::TimedOut => {
                self.kill_leftovers();
                match self.receive(&stderr, deadline) {
                    Received::Value(summary) => Some(summary),
                    Received::Closed => None,
                    Received::TimedOut => return Err(self.time_out()),
                }
            }
        };
        let summary = summary.unwrap_or(StderrSummary {
            lines: 0,
            errors: 0,
            tail: Vec::new(),
        });
        untrack_group(self.slot, self.group);
        let status = self.handle.wait().map_err(|e| {
            Error::io(
                format!("{}: waiting for {}", self.call.label, self.call.action),
                e,
            )
        })?;
        if !status.status.success() {
            return Err(Error::Exit {
                provider: self.call.label.to_owned(),
                action: self.call.action.to_owned(),
                status: describe_status(status.status),
                stderr: summary.tail,
            });
        }
        Ok(Finished {
            stderr_lines: summary.lines,
            error_lines: summary.errors,
            stderr_tail: summary.tail,
        })
    }

    /// Waits on a channel until `until`, ending the provider and this
    /// process when a forwarded interrupt arrives meanwhile.
    fn receive<T>(&self, channel: &Receiver<T>, until: Instant) -> Received<T> {
        loop {
            self.check_interrupt();
            let left = remaining(until);
            if left.is_zero() {
                return Received::TimedOut;
            }
            match channel.recv_timeout(left.min(INTERRUPT_POLL)) {
                Ok(value) => return Received::Value(value),
                Err(RecvTimeoutError::Timeout) => continue,
                Err(RecvTimeoutError::Disconnected) => return Received::Closed,
            }
        }
    }

    /// Waits for the provider to exit (unreaped); false when `until` passed.
    fn wait_exit(&self, until: Instant) -> bool {
        loop {
            self.check_interrupt();
            let step = (Instant::now() + INTERRUPT_POLL).min(until);
            if self.exit.wait_until(step) {
                return true;
            }
            if Instant::now() >= until {
                return false;
            }
        }
    }

    fn check_interrupt(&self) {
        let signal = INTERRUPTED.load(Ordering::SeqCst);
        if signal != 0 {
            self.terminate();
            reraise(signal);
        }
    }

    /// Ends the whole process group: SIGTERM, a grace period, then SIGKILL.
    /// The provider is reaped only after the SIGKILL, so the group ID cannot
    /// have been handed to another group in between.
    fn terminate(&self) {
        if self.group <= 0 {
            return;
        }
        // SAFETY: kill with a negative pid signals the process group we
        // created for this child; it has no memory effects.
        unsafe { libc::kill(-self.group, libc::SIGTERM) };
        self.exit.wait_until(Instant::now() + KILL_GRACE);
        // Members that ignored SIGTERM, or outlived the provider, go now.
        // SAFETY: as above; the unreaped provider still holds the group ID.
        unsafe { libc::kill(-self.group, libc::SIGKILL) };
        untrack_group(self.slot, self.group);
        let _ = self.handle.wait();
    }

    /// The provider exited but processes it started still hold its output:
    /// they had their chance to finish.
    fn kill_leftovers(&self) {
        log::warn!(
            "{}: {} exited, but processes it started kept its output open for {}s; killing them",
            self.call.label,
            self.call.action,
            OUTPUT_LINGER.as_secs()
        );
        // SAFETY: the provider is exited but unreaped, so the group ID is
        // still ours.
        unsafe { libc::kill(-self.group, libc::SIGKILL) };
    }

    fn time_out(&self) -> Error {
        self.terminate();
        Error::Timeout {
            provider: self.call.label.to_owned(),
            action: self.call.action.to_owned(),
            limit: self.call.timeout,
        }
    }

    fn abandon(&self, message: String) -> Error {
        self.terminate();
        Error::Protocol {
            provider: self.call.label.to_owned(),
            action: self.call.action.to_owned(),
            message,
        }
    }
}

fn remaining(deadline: Instant) -> Duration {
    deadline.saturating_duration_since(Instant::now())
}

fn describe_status(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit status {code}"),
        (None, Some(signal)) => format!("killed by signal {signal}"),
        (None, None) => status.to_string(),
    }
}

/// Outcome of reading one bounded line.
enum Bounded {
    Line,
    TooLong,
    Eof,
}

/// Reads one line of at most `max` bytes (without its newline) into `buf`.
fn read_bounded(
    reader: &mut impl BufRead,
    max: usize,
    buf: &mut Vec<u8>,
) -> std::io::Result<Bounded> {
    buf.clear();
    let read = reader.take(max as u64 + 1).read_until(b'\n', buf)?;
    if read == 0 {
        return Ok(Bounded::Eof);
    }
    if buf.last() == Some(&b'\n') {
        buf.pop();
        return Ok(Bounded::Line);
    }
    Ok(if buf.len() > max {
        Bounded::TooLong
    } else {
        Bounded::Line
    })
}

/// How many batches of stdout may wait for the consumer.
const STDOUT_BATCHES: usize = 16;
/// A batch is handed over once it holds this many bytes (plus one line).
const BATCH_BYTES: usize = 64 * 1024;

fn spawn_stdout_reader(
    pipe: std::io::PipeReader,
    sender: SyncSender<StdoutEvent>,
    max_line: usize,
) {
    std::thread::spawn(move || {
        let mut reader = BufReader::new(pipe);
        let mut buf = Vec::new();
        let mut batch = Vec::new();
        let mut batch_bytes = 0;
        loop {
            let end = match read_bounded(&mut reader, max_line, &mut buf) {
                Ok(Bounded::Line) => {
                    batch_bytes += buf.len();
                    batch.push(String::from_utf8_lossy(&buf).into_owned());
                    // Hand the batch over when the next read would wait for
                    // the provider, so a listing still streams.
                    if reader.buffer().is_empty() || batch_bytes >= BATCH_BYTES {
                        batch_bytes = 0;
                        if sender
                            .send(StdoutEvent::Lines(std::mem::take(&mut batch)))
                            .is_err()
                        {
                            return;
                        }
                    }
                    continue;
                }
                Ok(Bounded::TooLong) => StdoutEvent::TooLong,
                Ok(Bounded::Eof) => StdoutEvent::Eof,
                Err(e) => StdoutEvent::Failed(e),
            };
            if !batch.is_empty() && sender.send(StdoutEvent::Lines(batch)).is_err() {
                return;
            }
            let _ = sender.send(end);
            return;
        }
    });
}

/// Replaces every occurrence of a secret by `[redacted]`.
pub fn redact(text: &str, secrets: &[String]) -> String {
    secrets
        .iter()
        .filter(|secret| !secret.is_empty())
        .fold(text.to_owned(), |text, secret| {
            text.replace(secret.as_str(), REDACTED)
        })
}

/// Splits a `LEVEL:` prefix off a stderr line; the default level is warn.
pub fn stderr_level(line: &str) -> (log::Level, &str) {
    if let Some((prefix, rest)) = line.split_once(':') {
        let level = match prefix.trim().to_ascii_lowercase().as_str() {
            "debug" => Some(log::Level::Debug),
            "info" => Some(log::Level::Info),
            "warn" => Some(log::Level::Warn),
            "error" => Some(log::Level::Error),
            _ => None,
        };
        if let Some(level) = level {
            return (level, rest.trim_start());
        }
    }
    (log::Level::Warn, line)
}

fn spawn_stderr_logger(
    pipe: std::io::PipeReader,
    label: String,
    log_lines: bool,
    secrets: Vec<String>,
) -> Receiver<StderrSummary> {
    let (sender, receiver) = mpsc::channel();
    std::thread::spawn(move || {
        let mut reader = BufReader::new(pipe);
        let mut buf = Vec::new();
        let mut summary = StderrSummary {
            lines: 0,
            errors: 0,
            tail: Vec::new(),
        };
        loop {
            let truncated = match read_bounded(&mut reader, MAX_LINE, &mut buf) {
                Ok(Bounded::Line) => false,
                Ok(Bounded::TooLong) => true,
                Ok(Bounded::Eof) | Err(_) => break,
            };
            let text = escape(&redact(&String::from_utf8_lossy(&buf), &secrets));
            let (level, message) = stderr_level(&text);
            let message = if truncated {
                format!("{message}... (line cut at {MAX_LINE} bytes)")
            } else {
                message.to_owned()
            };
            if log_lines {
                log::log!(target: &label, level, "{message}");
            }
            summary.lines += 1;
            if level == log::Level::Error {
                summary.errors += 1;
            }
            if summary.tail.len() == STDERR_TAIL {
                summary.tail.remove(0);
            }
            summary.tail.push(message);
            if truncated && skip_rest_of_line(&mut reader, &mut buf).is_err() {
                break;
            }
        }
        let _ = sender.send(summary);
    });
    receiver
}

fn skip_rest_of_line(reader: &mut impl BufRead, buf: &mut Vec<u8>) -> std::io::Result<()> {
    loop {
        match read_bounded(reader, MAX_LINE, buf)? {
            Bounded::TooLong => continue,
            Bounded::Line | Bounded::Eof => return Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stderr_levels_need_a_known_word_and_a_colon() {
        assert_eq!(stderr_level("DEBUG: x"), (log::Level::Debug, "x"));
        assert_eq!(stderr_level("Error:boom"), (log::Level::Error, "boom"));
        assert_eq!(stderr_level("info x"), (log::Level::Warn, "info x"));
        assert_eq!(stderr_level("note: x"), (log::Level::Warn, "note: x"));
    }

    #[test]
    fn bounded_reads_stop_at_the_limit() {
        let mut input = std::io::Cursor::new(b"abc\ndefgh\nij".to_vec());
        let mut buf = Vec::new();
        assert!(matches!(
            read_bounded(&mut input, 4, &mut buf).unwrap(),
            Bounded::Line
        ));
        assert_eq!(buf, b"abc");
        assert!(matches!(
            read_bounded(&mut input, 4, &mut buf).unwrap(),
            Bounded::TooLong
        ));
        let mut input = std::io::Cursor::new(b"ij".to_vec());
        assert!(matches!(
            read_bounded(&mut input, 4, &mut buf).unwrap(),
            Bounded::Line
        ));
        assert_eq!(buf, b"ij");
        assert!(matches!(
            read_bounded(&mut input, 4, &mut buf).unwrap(),
            Bounded::Eof
        ));
    }
}
