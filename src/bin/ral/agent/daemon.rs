//! The agent's loop: one thread that sleeps in `poll` on the wake-up pipe
//! the signal handlers write to and on the inotify descriptor, until the
//! schedule's next time; then runs what is due, one run at a time.
//!
//! Each run reads the manifests again when they changed (or on SIGHUP);
//! manifests that cannot be read, rendered or planned are reported and
//! the last ones that could be stay in force, so an edit that breaks them
//! never removes anything. The store's lock is taken per run, at once: a
//! person's `ral apply` holding it puts the run off (tried again every
//! quarter second, the one wait that looks again), and one that finds the
//! agent's run holding it is told so.

use std::io::Write;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{bail, Context};
use ral::agent::notify::Notifier;
use ral::agent::schedule::{Schedule, Timing, Why};
use ral::agent::stamps::Stamps;
use ral::agent::status::{LastRun, Presence, Status};
use ral::agent::watch::{Kind, Watched, Watcher};
use ral::converge::manifest;
use ral::converge::run::{Input, RunError, RunOrigin, StoreAt};
use ral::text::escape_lines;
use rustix::event::{poll, PollFd, PollFlags, Timespec};

use super::observe::RunObserver;
use super::RunArgs;
use crate::converge_args::{setup, ConvergeArgs, Ending, Mode};
use crate::load;
use crate::one_run::{Given, Run};
use crate::render::Vars;

/// How soon a run the store's lock put off is tried again.
const LOCKED_RETRY: Duration = Duration::from_millis(250);

pub fn run(args: &RunArgs) -> ExitCode {
    match serve(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ral agent: error: {}", escape_lines(&format!("{e:#}")));
            ExitCode::from(2)
        }
    }
}

fn serve(args: &RunArgs) -> anyhow::Result<()> {
    let manifests = checked_manifests(&args.manifests)?;
    let (wake, wake_write) = rustix::pipe::pipe_with(
        rustix::pipe::PipeFlags::CLOEXEC | rustix::pipe::PipeFlags::NONBLOCK,
    )
    .context("making the wake-up pipe")?;
    ral::process::agent_signals(wake_write.as_raw_fd());
    // The handlers write to it for as long as the process lives.
    std::mem::forget(wake_write);
    let converge = converge_args(args, manifests);
    let (host, registry) = load::load(&setup(&converge, &converge.root))?;
    let store_at = StoreAt::local(host.root(), converge.state.as_deref());
    store_at.make()?;
    let store = store_at.location.path();
    let presence = Presence::take(&store)?;
    // Checked at once (a -e that cannot be read is a usage error); each
    // load of the manifests reads them again with them.
    Vars::new(&args.extra_vars, None, false)?;
    let timing = Timing::new(args.interval, args.splay, args.backoff);
    let notifier = Arc::new(Notifier::from_env());
    let mut agent = Agent {
        args,
        converge,
        host,
        registry,
        store_at,
        presence,
        notifier: notifier.clone(),
        pinger: Pinger::start(notifier),
        watcher: Watcher::new().context("starting inotify")?,
        schedule: Schedule::new(timing, Instant::now()),
        good: None,
        candidate: None,
        stamps: Stamps::default(),
        managed: Vec::new(),
        status: Status {
            pid: std::process::id(),
            started: epoch(SystemTime::now()),
            manifests: args.manifests.clone(),
            interval_seconds: args.interval.as_secs_f64(),
            splay_seconds: args.splay.as_secs_f64(),
            noop: args.noop,
            ..Status::default()
        },
        wake,
        locked_said: false,
        held_said: false,
        reloading: false,
        next_ping: None,
    };
    agent.serve()
}

/// Refuses manifests one of which declares nothing (no resource, no
/// variable): `ral apply` refuses manifests that declare nothing in all,
/// but the agent reads them again at each write, with nobody to look at
/// the plan, and a file emptied beside others (`: > b.yaml`, a write that
/// found the disk full) would have what it declared removed.
fn emptied(input: &Input) -> anyhow::Result<()> {
    let reading = &input.reading;
    for path in &input.manifests {
        let declares = reading
            .declared
            .iter()
            .map(|d| &d.origin.file)
            .chain(reading.vars.iter().map(|v| &v.origin.file))
            .any(|file| **file == **path);
        if !declares {
            bail!(
                "{}: declares nothing: what it declared would be removed, so it is refused \
                 (to mean that, leave it out of the agent's manifests)",
                ral::text::escape(&path.to_string_lossy())
            );
        }
    }
    Ok(())
}

/// `path`, and each path its links lead to in turn (a relative link from
/// its own directory), to the first that is not a link; at most 40, as
/// the kernel follows.
fn links_to(path: &std::path::Path) -> Vec<PathBuf> {
    let mut hops = vec![path.to_owned()];
    while hops.len() <= 40 {
        let last = &hops[hops.len() - 1];
        let Ok(target) = std::fs::read_link(last) else {
            break;
        };
        let next = match last.parent() {
            Some(dir) => dir.join(target),
            None => target,
        };
        hops.push(next);
    }
    hops
}

/// The manifests, absolute: each must be a file (a run reads them again,
/// so not standard input).
fn checked_manifests(manifests: &[PathBuf]) -> anyhow::Result<Vec<PathBuf>> {
    manifests
        .iter()
        .map(|path| {
            if path.as_os_str() == "-" {
                bail!("ral agent reads its manifests again at each change: give files, not - (standard input)");
            }
            let meta = std::fs::metadata(path).with_context(|| {
                // `ral agent --root DIR status`: the options of a
                // subcommand go after it.
                match path.to_str() {
                    Some(sub @ ("status" | "unit")) if !path.exists() => format!(
                        "manifest {sub} (for ral agent {sub}, give its options after it: \
                         ral agent {sub} --root DIR ...)"
                    ),
                    _ => format!("manifest {}", path.display()),
                }
            })?;
            if !meta.is_file() {
                bail!("manifest {}: not a file", path.display());
            }
            std::path::absolute(path).with_context(|| format!("manifest {}", path.display()))
        })
        .collect()
}

/// The options of each run, as `ral apply` would take them.
fn converge_args(args: &RunArgs, manifests: Vec<PathBuf>) -> ConvergeArgs {
    ConvergeArgs {
        include: args.include.clone(),
        root: args.root.clone(),
        timeout: args.timeout,
        // At once: the agent puts its run off itself, and goes on hearing
        // signals meanwhile.
        lock_timeout: Some(Duration::ZERO),
        state: args.state.clone(),
        keep_removed: args.keep_removed,
        serial: None,
        max_fail_percentage: None,
        destroy: false,
        log_level: args.log_level.clone(),
        // Nobody is there to answer: removals are the manifests' word.
        auto_approve: true,
        quiet: args.quiet,
        strict: args.strict,
        no_cache: args.no_cache,
        json: false,
        jobs: args.jobs,
        detailed_exitcodes: false,
        out: None,
        report: None,
        extra_vars: args.extra_vars.clone(),
        verbose: false,
        manifests,
        remote: ral::cli::remote::RemoteArgs {
            targets: Vec::new(),
            inventory: None,
            limit: None,
            ssh_config: None,
            sudo: false,
            forks: 1,
            connect_timeout: 10,
            persist: Duration::ZERO,
            no_persist: true,
        },
    }
}

fn epoch(time: SystemTime) -> f64 {
    time.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// Manifests read whole, with the variables they are rendered with (made
/// with them: whether manifests use templating is learnt once per
/// `Vars`), and when.
struct Loaded {
    input: Input,
    vars: Vars,
    at: SystemTime,
}

struct Agent<'a> {
    args: &'a RunArgs,
    /// Each run's options; its manifests are the agent's, absolute.
    converge: ConvergeArgs,
    host: ral::Host,
    registry: ral::discovery::Registry,
    store_at: StoreAt,
    presence: Presence,
    notifier: Arc<Notifier>,
    pinger: Option<Pinger>,
    watcher: Watcher,
    schedule: Schedule,
    /// The last manifests a run went through with.
    good: Option<Loaded>,
    /// Manifests read since, not through a run yet.
    candidate: Option<Loaded>,
    stamps: Stamps,
    /// The files the last catalog keeps resources in: (below the root, as
    /// the root names it).
    managed: Vec<(PathBuf, PathBuf)>,
    status: Status,
    wake: OwnedFd,
    /// Whether the store's lock held by another was said (once per wait).
    locked_said: bool,
    /// Whether drift held back by the backoff was said (once per run).
    held_said: bool,
    /// SIGHUP came: the next run reads the providers again, and then
    /// tells systemd the reload is done.
    reloading: bool,
    next_ping: Option<Instant>,
}

impl Agent<'_> {
    fn serve(&mut self) -> anyhow::Result<()> {
        self.watch();
        self.say(&format!(
            "started: every {}{}, {} manifest(s){}",
            ral::agent::duration::show(self.args.interval),
            if self.args.splay.is_zero() {
                String::new()
            } else {
                format!(" (splay {})", ral::agent::duration::show(self.args.splay))
            },
            self.converge.manifests.len(),
            if self.args.noop { ", noop" } else { "" }
        ));
        self.notifier.ready("converging");
        self.next_ping = self
            .notifier
            .watchdog_every()
            .map(|every| Instant::now() + every);
        loop {
            if ral::process::stop_requested().is_some() {
                break;
            }
            let now = Instant::now();
            if ral::process::take_reload() {
                // Read by the run it asks for (after the settle and the
                // gap, as changed manifests are): a storm of SIGHUP costs
                // no more than two reads a second.
                if !std::mem::replace(&mut self.reloading, true) {
                    self.notifier.reloading();
                }
                self.schedule.want(now, Why::hup());
            }
            if ral::process::take_run_now() {
                self.schedule.want(now, Why::asked());
            }
            if let Some(why) = self.schedule.due(now) {
                self.run_once(why);
                continue;
            }
            self.wait()?;
        }
        self.stop()
    }

    /// Sleeps until the schedule's next time, a signal or a watched
    /// file's change, and takes in the changes.
    fn wait(&mut self) -> anyhow::Result<()> {
        let now = Instant::now();
        let mut until = self.schedule.wake_at();
        if let Some(ping) = self.next_ping {
            until = until.min(ping);
        }
        // Rounded up to the millisecond: woken a hair early, the loop
        // would only come back here.
        let left = until.saturating_duration_since(now);
        let left = Duration::from_millis(left.as_millis() as u64 + u64::from(!left.is_zero()));
        let timeout = Timespec {
            tv_sec: left.as_secs() as _,
            tv_nsec: left.subsec_nanos() as _,
        };
        let (woken, changed) = {
            let inotify = self.watcher.fd();
            let mut fds = [
                PollFd::new(&self.wake, PollFlags::IN),
                PollFd::new(&inotify, PollFlags::IN),
            ];
            match poll(&mut fds, Some(&timeout)) {
                Ok(_) | Err(rustix::io::Errno::INTR) => {}
                Err(e) => return Err(e).context("waiting"),
            }
            (!fds[0].revents().is_empty(), !fds[1].revents().is_empty())
        };
        if woken {
            let mut bytes = [0u8; 64];
            while matches!(rustix::io::read(self.wake.as_fd(), &mut bytes), Ok(n) if n > 0) {}
        }
        if changed {
            self.take_changes()?;
        }
        if let Some(ping) = self.next_ping.filter(|ping| *ping <= Instant::now()) {
            self.notifier.watchdog();
            let every = self.notifier.watchdog_every().unwrap_or_default();
            self.next_ping = Some(ping.max(Instant::now() - every) + every);
        }
        Ok(())
    }

    /// What the watched files' events say: changed manifests are read
    /// again at once; a managed file that differs from its stamp is drift.
    fn take_changes(&mut self) -> anyhow::Result<()> {
        let changed = self.watcher.changes().context("reading inotify")?;
        let now = Instant::now();
        let mut drift = Vec::new();
        let mut manifests = false;
        for at in changed {
            let watched = &self.watcher.watched()[at];
            match watched.kind {
                Kind::Manifest => manifests = true,
                Kind::Managed if self.stamps.changed(&watched.path) => {
                    drift.push(watched.shown.clone())
                }
                Kind::Managed => {}
            }
        }
        if manifests {
            self.schedule.want(now, Why::reload());
        }
        if !drift.is_empty() {
            log::info!(
                "changed: {}",
                drift
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            self.schedule.want(now, Why::drift(drift));
            if let Some(until) = self.schedule.held_until() {
                if !std::mem::replace(&mut self.held_said, true) {
                    let left = until.saturating_duration_since(now);
                    let failures = self.schedule.failures();
                    self.say(&format!(
                        "drift held back by the backoff ({failures} failed run{} in a row): it runs in {}, or at once on SIGUSR1",
                        if failures == 1 { "" } else { "s" },
                        ral::agent::duration::show(Duration::from_secs(left.as_secs()))
                    ));
                }
            }
        }
        Ok(())
    }

    /// Watches the manifests and the files the last catalog keeps
    /// resources in.
    fn watch(&mut self) {
        // A manifest that is a link (to a checkout, say) is read through
        // it: each link on the way is watched, and the file it ends at,
        // so that an edit there is seen as one of the link itself is.
        let mut watched: Vec<Watched> = self
            .converge
            .manifests
            .iter()
            .flat_map(|path| {
                links_to(path).into_iter().map(|hop| Watched {
                    path: hop,
                    shown: path.clone(),
                    kind: Kind::Manifest,
                })
            })
            .collect();
        watched.extend(self.managed.iter().map(|(path, shown)| Watched {
            path: path.clone(),
            shown: shown.clone(),
            kind: Kind::Managed,
        }));
        for (path, e) in self.watcher.set(watched) {
            log::warn!("cannot watch {}: {e}", path.display());
        }
        // A file changed since its stamp and before its watch made no
        // event: it is drift all the same.
        let unseen: Vec<PathBuf> = self
            .managed
            .iter()
            .filter(|(path, _)| self.stamps.changed(path))
            .map(|(_, shown)| shown.clone())
            .collect();
        if !unseen.is_empty() {
            self.schedule.want(Instant::now(), Why::drift(unseen));
        }
    }

    /// Discovers the providers again (SIGHUP: a package may have added or
    /// changed some); when that fails, the ones known stay.
    fn reload_providers(&mut self) {
        match load::load(&setup(&self.converge, &self.converge.root)) {
            Ok((host, registry)) => {
                self.host = host;
                self.registry = registry;
            }
            Err(e) => log::error!(
                "reading the providers again: {}; keeping those read before",
                escape_lines(&format!("{e:#}"))
            ),
        }
    }

    /// Reads the manifests again: they are tried by the next run, the
    /// last ones that went through staying in force until then.
    fn load(&mut self) {
        let read = Input::read(&self.converge.manifests, false)
            .map_err(anyhow::Error::from)
            .and_then(|input| {
                emptied(&input)?;
                Ok(input)
            })
            .and_then(|mut input| {
                input.reading.digest =
                    manifest::with_extra_vars(&input.reading.digest, &self.args.extra_vars);
                let vars = Vars::new(&self.args.extra_vars, None, false)?;
                Ok(Loaded {
                    input,
                    vars,
                    at: SystemTime::now(),
                })
            });
        match read {
            Ok(loaded) => self.candidate = Some(loaded),
            Err(e) => {
                self.candidate = None;
                self.manifest_problem(&e);
            }
        }
    }

    fn manifest_problem(&mut self, e: &anyhow::Error) {
        // The agent takes no --destroy, which the refusal names.
        let sweep = e
            .chain()
            .any(|cause| matches!(cause.downcast_ref::<RunError>(), Some(RunError::Sweep(_))));
        let instead = match sweep {
            true => {
                "; ral agent takes no --destroy: run ral apply --destroy with these manifests \
                 once, then SIGHUP the agent (systemctl reload ral-agent)"
            }
            false => "",
        };
        let kept = match &self.good {
            Some(good) => format!(
                "; keeping the manifests as read at {}",
                ral::local_time::local_date(epoch(good.at) as i64)
            ),
            None => "; nothing runs until they can be".to_owned(),
        };
        let message = format!("the manifests cannot be used: {e:#}{instead}");
        log::error!("{}{kept}", escape_lines(&message));
        self.status.manifest_problem = Some(message);
    }

    /// One run for `why`, with the manifests read again first if they
    /// changed; put off when another run holds the store.
    fn run_once(&mut self, why: Why) {
        let started = SystemTime::now();
        let clock = Instant::now();
        self.read_again(&why);
        let text = why.text(self.args.interval);
        let mut last = LastRun {
            why: text.clone(),
            started: epoch(started),
            ..LastRun::default()
        };
        let outcome = self.run_manifests(&text);
        if let Err(e) = &outcome {
            if is_locked(e) {
                if !std::mem::replace(&mut self.locked_said, true) {
                    self.say(&format!("{}; running after it", e.root_cause()));
                }
                self.schedule.put_back(Instant::now(), why, LOCKED_RETRY);
                return;
            }
        }
        let (failed, error) = self.count(outcome, &text, &mut last);
        self.locked_said = false;
        self.held_said = false;
        self.schedule.ran(Instant::now(), failed, self.splay());
        // Watched, and the status written, before anything is said of
        // the run: whoever acts on the line finds the catalog's files
        // watched and `ral agent status` telling this run.
        self.watch();
        last.ended = epoch(SystemTime::now());
        self.status.runs += 1;
        self.status.failed_runs += u64::from(failed);
        let line = self.run_line(&text, &last, error.as_deref(), clock.elapsed());
        self.status.last_run = Some(last);
        self.write_status();
        self.say(&line);
        self.notifier.status(&format!(
            "last run: {}; next at {}",
            self.status
                .last_run
                .as_ref()
                .map_or("", |l| l.outcome.as_str()),
            self.status
                .next_run
                .map_or_else(String::new, |at| ral::local_time::local_date(at as i64))
        ));
    }

    /// Before a run: the providers again after a SIGHUP, and the
    /// manifests when the run's reason reads them.
    fn read_again(&mut self, why: &Why) {
        let reloading = std::mem::take(&mut self.reloading);
        if reloading {
            self.say("SIGHUP: reading the providers and the manifests again");
            self.reload_providers();
        }
        if why.reads_manifests() || why.start || (self.good.is_none() && self.candidate.is_none()) {
            self.load();
        }
        if reloading {
            // The reload is done (sd_notify(3): RELOADING=1 is answered by
            // READY=1, which `systemctl reload` waits for).
            self.notifier.ready("reloaded");
        }
    }

    /// The run of the new manifests, or of the last good ones when the
    /// new cannot be used.
    fn run_manifests(&mut self, text: &str) -> anyhow::Result<Done> {
        if self.candidate.is_none() {
            return match self.good {
                Some(_) => self.attempt(false, text),
                None => Err(anyhow::anyhow!("no manifests could be used yet")),
            };
        }
        match self.attempt(true, text) {
            Err(e) if !is_locked(&e) && self.good.is_some() => {
                // The last good manifests run instead, and nothing
                // they do not name is touched. The new ones are to
                // blame only when the good ones get through: what
                // fails both (a full disk, a store that cannot be
                // used for a while) is not theirs, and they are tried
                // again first by the next run instead of being let go
                // for the old ones to be in force until the next edit.
                match self.attempt(false, text) {
                    Ok(done) => {
                        self.candidate = None;
                        self.manifest_problem(&e);
                        Ok(done)
                    }
                    Err(again) if is_locked(&again) => Err(again),
                    Err(_) => Err(e),
                }
            }
            Err(e) if !is_locked(&e) => {
                self.candidate = None;
                self.manifest_problem(&e);
                Err(e)
            }
            Ok(done) => {
                self.good = self.candidate.take();
                self.status.manifest_problem = None;
                Ok(done)
            }
            locked => locked,
        }
    }

    /// A run's outcome into `last` and the counts since the start:
    /// whether it failed, and why when it could not be made.
    fn count(
        &mut self,
        outcome: anyhow::Result<Done>,
        text: &str,
        last: &mut LastRun,
    ) -> (bool, Option<String>) {
        match outcome {
            Err(e) => {
                log::error!("run ({text}): {}", escape_lines(&format!("{e:#}")));
                last.outcome = format!("failed: {e:#}");
                (true, Some(format!("{e:#}")))
            }
            Ok(done) => {
                last.outcome = match ral::process::stop_requested() {
                    // Asked to stop: what did not run was not a failure.
                    Some(_) if done.failures => "stopped".to_owned(),
                    _ => done.outcome(self.args.noop).to_owned(),
                };
                last.plan = done.plan;
                last.drift = done.drift;
                last.repaired = done.repaired;
                self.status.drift_found += done.drift;
                self.status.repaired += done.repaired;
                (done.failures && last.outcome != "stopped", None)
            }
        }
    }

    /// The line that tells a run: its outcome (or why it could not be
    /// made) after its time, and the backoff failures in a row bring.
    fn run_line(&self, text: &str, last: &LastRun, error: Option<&str>, took: Duration) -> String {
        let seconds = took.as_secs_f64();
        format!(
            "run ({text}): {}{}",
            match error {
                Some(e) => format!("failed in {seconds:.2} s: {e}"),
                None => format!("{} in {seconds:.2} s", last.outcome),
            },
            match self.schedule.failures() {
                0 => String::new(),
                n => format!(
                    "; {n} failed in a row, next interval or drift run in {} at the soonest",
                    ral::agent::duration::show(self.schedule.timing().backoff_after(n))
                ),
            }
        )
    }

    /// One run with the candidate manifests, or the good ones.
    fn attempt(&mut self, candidate: bool, why: &str) -> anyhow::Result<Done> {
        // Stamped before the run reads them: a change from here on is
        // either the run's (stamped again as its task ends) or drift. A
        // run that ends before it read them (no plan) puts the stamps
        // back: what changed before it is still drift.
        let unread = self.stamps.clone();
        for (path, _) in &self.managed {
            self.stamps.refresh(path);
        }
        let observer = RunObserver::new(self.host.root(), std::mem::take(&mut self.stamps));
        let ending = self.converge(candidate, why, &observer);
        let RunObserver {
            stamps,
            managed,
            plan,
            drift,
            repaired,
            ..
        } = observer;
        let plan = plan.into_inner().unwrap_or_else(|e| e.into_inner());
        self.stamps = match plan {
            Some(_) => stamps.into_inner().unwrap_or_else(|e| e.into_inner()),
            None => unread,
        };
        let ending = ending?;
        let managed = managed.into_inner().unwrap_or_else(|e| e.into_inner());
        if plan.is_some() {
            let paths: Vec<PathBuf> = managed.iter().map(|(path, _)| path.clone()).collect();
            self.stamps.keep_only(&paths);
            self.managed = managed;
        }
        Ok(Done {
            plan,
            drift: drift.into_inner(),
            repaired: repaired.into_inner(),
            changes: ending.changes,
            failures: ending.failures,
        })
    }

    /// The run itself, as `ral apply` (`ral plan` under `--noop`) makes
    /// it, marked as the agent's, told to `observer`.
    fn converge(
        &self,
        candidate: bool,
        why: &str,
        observer: &RunObserver,
    ) -> anyhow::Result<Ending> {
        let loaded = match candidate {
            true => self.candidate.as_ref(),
            false => self.good.as_ref(),
        }
        .expect("asked for manifests that are there");
        let origin = RunOrigin {
            by: "ral-agent".to_owned(),
            text: format!(
                "ral agent{} ({why})",
                if self.args.noop { " --noop" } else { "" }
            ),
        };
        let run = Run {
            args: &self.converge,
            mode: if self.args.noop {
                Mode::Plan
            } else {
                Mode::Apply
            },
            started: Instant::now(),
            vars: &loaded.vars,
            kept: None,
            origin: Some(origin),
            observer: Some(observer),
        };
        if let Some(pinger) = &self.pinger {
            pinger.running(true);
        }
        let mut out = crate::converge::output(&self.converge);
        let ending = run.converge(
            Given::Shared(&loaded.input),
            None,
            &self.host,
            &self.registry,
            &self.store_at,
            &mut out,
        );
        if let Some(pinger) = &self.pinger {
            pinger.running(false);
        }
        ending
    }

    fn splay(&self) -> Duration {
        if self.args.splay.is_zero() {
            return Duration::ZERO;
        }
        // The kernel's randomness; without it, no splay rather than a
        // guessable one.
        let Ok(bytes) = ral::random::bytes::<8>() else {
            return Duration::ZERO;
        };
        let millis = self.args.splay.as_millis() as u64;
        Duration::from_millis(u64::from_le_bytes(bytes) % (millis + 1))
    }

    fn write_status(&mut self) {
        let wait = self
            .schedule
            .next_interval()
            .saturating_duration_since(Instant::now());
        self.status.next_run = Some(epoch(SystemTime::now() + wait));
        self.save_status();
    }

    /// Writes the status as it is; a failure is only logged.
    fn save_status(&self) {
        if let Err(e) = self.presence.write(&self.status) {
            log::warn!("cannot write the agent's status: {e}");
        }
    }

    fn stop(&mut self) -> anyhow::Result<()> {
        self.notifier.stopping();
        self.status.stopped = true;
        self.status.next_run = None;
        self.save_status();
        self.say("stopped");
        Ok(())
    }

    /// The agent's own line, on standard output with the runs' task
    /// lines.
    fn say(&self, line: &str) {
        let mut out = crate::unread::stdout();
        let _ = writeln!(out, "ral agent: {}", escape_lines(line));
        let _ = out.flush();
    }
}

/// What a run found and did.
struct Done {
    plan: Option<String>,
    drift: u64,
    repaired: u64,
    changes: bool,
    failures: bool,
}

impl Done {
    fn outcome(&self, noop: bool) -> &'static str {
        match (self.failures, noop, self.drift > 0, self.changes) {
            (true, _, _, _) => "failed",
            (false, true, true, _) => "drift found",
            (false, false, _, true) => "repaired",
            _ => "unchanged",
        }
    }
}

/// Whether a run did not start because another held the store's lock.
fn is_locked(e: &anyhow::Error) -> bool {
    e.chain().any(|cause| {
        matches!(
            cause.downcast_ref::<RunError>(),
            Some(RunError::Ral(ral::Error::Locked { .. }))
        ) || matches!(
            cause.downcast_ref::<ral::Error>(),
            Some(ral::Error::Locked { .. })
        )
    })
}

/// Pings systemd's watchdog from a thread while a run goes on (the loop
/// pings between runs): each provider call has its own time limit, so a
/// run never hangs; the watchdog watches the loop.
struct Pinger {
    state: Arc<(Mutex<bool>, Condvar)>,
}

impl Pinger {
    fn start(notifier: Arc<Notifier>) -> Option<Pinger> {
        let every = notifier.watchdog_every()?;
        let state = Arc::new((Mutex::new(false), Condvar::new()));
        let shared = state.clone();
        std::thread::Builder::new()
            .name("watchdog".to_owned())
            .spawn(move || {
                let (lock, turn) = &*shared;
                let mut running = lock.lock().unwrap_or_else(|e| e.into_inner());
                loop {
                    if *running {
                        running = turn
                            .wait_timeout(running, every)
                            .unwrap_or_else(|e| e.into_inner())
                            .0;
                        if *running {
                            notifier.watchdog();
                        }
                    } else {
                        running = turn.wait(running).unwrap_or_else(|e| e.into_inner());
                    }
                }
            })
            .ok()?;
        Some(Pinger { state })
    }

    fn running(&self, now: bool) {
        let (lock, turn) = &*self.state;
        *lock.lock().unwrap_or_else(|e| e.into_inner()) = now;
        turn.notify_all();
    }
}
