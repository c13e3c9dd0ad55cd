//! Running a plan: tasks start when the tasks they wait for succeeded,
//! tasks of different providers run side by side (up to `jobs`), a
//! provider never runs two at once, and the ready tasks of a json provider
//! go to it in one `set`. A task that fails skips only its dependents. A
//! stop request (the first SIGINT or SIGTERM) starts nothing new and lets
//! the running tasks finish. At the end one read per provider verifies
//! that what succeeded matches the manifest.

use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::host::Host;
use crate::metadata::{Invoke, Kind};
use crate::provider::Provider;
use crate::resource::{Change, Resource};
use crate::store::StoredItem;
use crate::update;

use super::action::ActionError;
use super::catalog::{Catalog, Item, Role};
use super::from_plugin::Phase;
use super::locks;
use super::plan::{by_provider, Action, ErrorKind, Plan, PlanState, TaskError, TaskState};
use super::planned::Planned;
use super::read::{read, read_all, read_told, Observed};
use super::schedule::{Node, Schedule};

/// What a run reports as it goes; `ral apply` prints it.
/// Each gets the catalog the plan's tasks refer to.
pub trait Events {
    /// The plan changed state (`plan.state`: Running, Stopping, and its
    /// end: Successful, Failed or Stopped).
    fn plan_state(&mut self, catalog: &Catalog, plan: &Plan);
    /// Task `task` (an index into `plan.tasks`) started.
    fn task_started(&mut self, catalog: &Catalog, plan: &Plan, task: usize);
    /// Task `task` ended: its state, changes and error are final.
    fn task_ended(&mut self, catalog: &Catalog, plan: &Plan, task: usize);
    /// Tasks that start together (a batch); by default each in turn.
    fn tasks_started(&mut self, catalog: &Catalog, plan: &Plan, tasks: &[usize]) {
        for &task in tasks {
            self.task_started(catalog, plan, task);
        }
    }
    /// Tasks that end together (a batch, or tasks skipped, stopped or
    /// failed by the verification at once); by default each in turn. The
    /// state store records them in one transaction.
    fn tasks_ended(&mut self, catalog: &Catalog, plan: &Plan, tasks: &[usize]) {
        for &task in tasks {
            self.task_ended(catalog, plan, task);
        }
    }
    /// The tasks `calls` are about to call their provider, from the state
    /// read last. False stops them before the call: what they would do
    /// could not be recorded first.
    fn tasks_calling(&mut self, _catalog: &Catalog, _plan: &Plan, _calls: &[Calling]) -> bool {
        true
    }
    /// Before the tasks run: stored items no manifest lists any more that
    /// were forgotten, left as they are (see `run::Prepared::forget`).
    fn forgotten(&mut self, _items: &[StoredItem]) {}
    /// The resources of `tasks` (which succeeded, see [`is_verified`])
    /// were read back: their states are final now. Those that did not
    /// match were ended Failed just before, through `task_ended`.
    fn tasks_verified(&mut self, _catalog: &Catalog, _plan: &Plan, _tasks: &[usize]) {}
    /// Tasks that failed to create their resource, ended already, each
    /// with whether the resource exists when read right after the failure
    /// (`None`: it could not be read): the state store settles their
    /// intents from that (see `ownership`).
    fn read_after_failure(
        &mut self,
        _catalog: &Catalog,
        _plan: &Plan,
        _read: &[(usize, Option<bool>)],
    ) {
    }
}

/// Whether `task`'s resource is read back after it succeeded: a change of
/// a resource, not a plugin's callback or command (done when it
/// succeeded), nor a refresh (which changes nothing ral compares). Until
/// then its success is not final.
pub fn is_verified(catalog: &Catalog, task: &super::plan::Task) -> bool {
    let item = &catalog.items[task.item];
    // A command that ran is done: reading it back would only run its
    // checks again (and one without checks always says it would run).
    task.action != Action::Refresh
        && item.role == Role::Resource
        && !item.provider.meta.runs_commands
}

/// A task about to call its provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Calling {
    /// The task's index in the plan.
    pub task: usize,
    /// What the call does, from the state read last.
    pub action: Action,
    /// Whether the resource existed when read last.
    pub existed: bool,
}

/// What a batch's thread tells the scheduler.
enum Message {
    /// Its tasks are about to call their provider; the answer says
    /// whether they may.
    Calling(Vec<Calling>, mpsc::Sender<bool>),
    Done(Done),
}

/// What decides that a run should stop: checked between tasks.
pub type StopRequested<'a> = &'a (dyn Fn() -> bool + Sync);

/// One task's result: what it changed and the transition it made (worked
/// out again when the state was read again), or the error.
type Outcome = Result<(Vec<Change>, update::Transition), TaskError>;

/// One task of a batch: its index in the plan, its transition and request,
/// and for a saved plan the state it was planned from.
struct Work {
    task: usize,
    transition: update::Transition,
    request: update::Request,
    planned_from: Option<Box<Planned>>,
}

fn failed(message: String) -> TaskError {
    TaskError {
        kind: ErrorKind::Provider,
        message,
    }
}

/// One batch's results, per task index.
struct Done {
    tasks: Vec<usize>,
    results: Vec<Outcome>,
    seconds: f64,
    /// The tasks that failed to create their resource, each with whether
    /// it exists when read right after (`None`: could not be read).
    read_after_failure: Vec<(usize, Option<bool>)>,
}

/// Runs the plan's tasks and verifies the result; the plan ends Successful,
/// Failed or Stopped.
pub fn apply(
    host: &Host,
    catalog: &Catalog,
    plan: &mut Plan,
    jobs: usize,
    stop: StopRequested,
    events: &mut dyn Events,
) {
    plan.state = PlanState::Running;
    events.plan_state(catalog, plan);
    // Tasks failed at planning (unreadable state) are over already.
    let failed: Vec<usize> = (0..plan.tasks.len())
        .filter(|&at| plan.tasks[at].state == TaskState::Failed)
        .collect();
    if !failed.is_empty() {
        events.tasks_ended(catalog, plan, &failed);
    }
    // The target is locked before its tasks: when a lock fails, none of
    // them runs.
    let locked = run_phase(host, catalog, plan, Phase::Lock, events);
    // Which tasks' resources were read back already.
    let mut verified = vec![false; plan.tasks.len()];
    if locked
        .iter()
        .all(|&at| plan.tasks[at].state == TaskState::Success)
    {
        let jobs = jobs.max(1);
        run_tasks(host, catalog, plan, jobs, stop, events, &mut verified);
    } else {
        let off: Vec<usize> = (0..plan.tasks.len())
            .filter(|&at| {
                plan.tasks[at].state == TaskState::Initial
                    && locks::phase(catalog, plan, at) == Phase::Main
            })
            .collect();
        skip(catalog, plan, off, Some(&locked), events);
    }
    if plan.state == PlanState::Stopping {
        // Unlock tasks still run.
        let stopped: Vec<usize> = (0..plan.tasks.len())
            .filter(|&at| plan.tasks[at].state == TaskState::Initial)
            .filter(|&at| locks::phase(catalog, plan, at) != Phase::Unlock)
            .collect();
        for &at in &stopped {
            let task = &mut plan.tasks[at];
            task.state = TaskState::Stopped;
            task.error = Some(TaskError {
                kind: ErrorKind::Stopped,
                message: "the plan was stopped before this task ran".to_owned(),
            });
        }
        if !stopped.is_empty() {
            events.tasks_ended(catalog, plan, &stopped);
        }
    }
    // After a second interrupt no call may start: nothing can be read
    // back, which says nothing about the tasks.
    if !crate::process::is_interrupted() {
        let left: Vec<usize> = (0..plan.tasks.len()).filter(|&at| !verified[at]).collect();
        verify(host, catalog, plan, jobs, events, left);
    }
    // Unlocked after the rest, also when a task failed or the plan was
    // stopped; a plugin whose lock did not succeed locked nothing.
    unlock(host, catalog, plan, &locked, events);
    plan.state = if plan.state == PlanState::Stopping {
        PlanState::Stopped
    } else if plan.tasks.iter().any(|t| t.state.is_unsuccessful()) {
        PlanState::Failed
    } else {
        PlanState::Successful
    };
    events.plan_state(catalog, plan);
}

/// Runs the main tasks; each provider's resources are read back as soon
/// as its last task ended (marked in `verified`), so that each task's
/// final state is known early, not only at the end of the run.
fn run_tasks(
    host: &Host,
    catalog: &Catalog,
    plan: &mut Plan,
    jobs: usize,
    stop: StopRequested,
    events: &mut dyn Events,
    verified: &mut [bool],
) {
    let (sender, receiver) = mpsc::channel::<Message>();
    let schedule = schedule_of(catalog, plan);
    let unfinished = Unfinished::of(plan, &schedule);
    let mut running = Running {
        host,
        catalog,
        jobs,
        schedule,
        unfinished,
        verified,
    };
    running.skip_after_planning_failures(plan, events);
    std::thread::scope(|scope| loop {
        if plan.state == PlanState::Running && stop() {
            plan.state = PlanState::Stopping;
            events.plan_state(catalog, plan);
        }
        if plan.state == PlanState::Running {
            running.start_ready(plan, &sender, scope, events);
        }
        if running.schedule.running() == 0 {
            break;
        }
        // Wakes for a finished batch, or now and then to notice a stop
        // request while a long task runs.
        let done = match receiver.recv_timeout(Duration::from_millis(100)) {
            Ok(Message::Done(done)) => done,
            Ok(Message::Calling(calls, reply)) => {
                let _ = reply.send(events.tasks_calling(catalog, plan, &calls));
                continue;
            }
            Err(mpsc::RecvTimeoutError::Timeout) => continue,
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        };
        running.ended(plan, done, events);
    });
}

/// The main tasks as they run: which may start, which are settled, and
/// which tasks' resources were read back already.
struct Running<'a, 'c> {
    host: &'a Host,
    catalog: &'a Catalog<'c>,
    jobs: usize,
    schedule: Schedule,
    unfinished: Unfinished,
    verified: &'a mut [bool],
}

impl<'a> Running<'a, '_> {
    /// Skips what waits for a task failed at planning: it never runs.
    fn skip_after_planning_failures(&mut self, plan: &mut Plan, events: &mut dyn Events) {
        for at in 0..plan.tasks.len() {
            if plan.tasks[at].state.is_unsuccessful() {
                let off = self.schedule.did_not_succeed(at);
                self.unfinished.ended(&off, &self.schedule);
                skip(self.catalog, plan, off, None, events);
            }
        }
    }

    /// Starts the batches that are ready while fewer than `jobs` run.
    fn start_ready<'scope>(
        &mut self,
        plan: &mut Plan,
        sender: &mpsc::Sender<Message>,
        scope: &'scope std::thread::Scope<'scope, 'a>,
        events: &mut dyn Events,
    ) {
        while self.schedule.running() < self.jobs {
            let Some(batch) = self.schedule.next_batch() else {
                break;
            };
            let at = batch[0];
            if plan.tasks[at].action == Action::Refresh && !self.refresh_may_run(plan, at, events) {
                continue;
            }
            start_batch(self.host, self.catalog, plan, batch, sender, scope, events);
        }
    }

    /// Reads back what refresh task `at` waits for; when some of it did
    /// not succeed (what calls for it, or its own change, did not hold),
    /// skips it, as what waits for it, and says so.
    fn refresh_may_run(&mut self, plan: &mut Plan, at: usize, events: &mut dyn Events) -> bool {
        let (host, catalog) = (self.host, self.catalog);
        read_back_before_refresh(
            host,
            catalog,
            plan,
            &self.schedule,
            events,
            self.verified,
            at,
        );
        if (plan.tasks[at].requires.iter()).all(|&r| plan.tasks[r].state == TaskState::Success) {
            return true;
        }
        self.schedule.batch_ended(self.schedule.provider_of(at));
        let mut off = vec![at];
        off.extend(self.schedule.did_not_succeed(at));
        self.unfinished.ended(&off, &self.schedule);
        skip(catalog, plan, off, None, events);
        false
    }

    /// Ends the tasks of a batch with their results: what waits for one
    /// that failed is skipped, and the providers settled now are read
    /// back.
    fn ended(&mut self, plan: &mut Plan, done: Done, events: &mut dyn Events) {
        let catalog = self.catalog;
        self.schedule
            .batch_ended(self.schedule.provider_of(done.tasks[0]));
        let mut off = Vec::new();
        for (&at, result) in done.tasks.iter().zip(done.results) {
            let task = &mut plan.tasks[at];
            task.seconds = done.seconds;
            match result {
                Ok((changes, transition)) => {
                    succeeded(catalog, task, changes, transition);
                    self.schedule.succeeded(at);
                }
                Err(error) => {
                    task.state = TaskState::Failed;
                    task.error = Some(error);
                    off.extend(self.schedule.did_not_succeed(at));
                }
            }
        }
        events.tasks_ended(catalog, plan, &done.tasks);
        if !done.read_after_failure.is_empty() {
            events.read_after_failure(catalog, plan, &done.read_after_failure);
        }
        off.sort_unstable();
        self.unfinished.ended(&done.tasks, &self.schedule);
        self.unfinished.ended(&off, &self.schedule);
        skip(catalog, plan, off, None, events);
        self.verify_settled(plan, events);
    }

    /// Reads back each provider none of whose tasks can run any more,
    /// once what waits for its tasks has ended too (a later task, the
    /// removal of a service's script say, may change how they read), as
    /// the whole plan used to be at its end; no new task starts
    /// meanwhile, running ones go on.
    fn verify_settled(&mut self, plan: &mut Plan, events: &mut dyn Events) {
        for provider in self.unfinished.settled() {
            if crate::process::is_interrupted() {
                break;
            }
            let tasks: Vec<usize> = (0..plan.tasks.len())
                .filter(|&at| self.schedule.provider_of(at) == provider && !self.verified[at])
                .collect();
            for &at in &tasks {
                self.verified[at] = true;
            }
            verify(self.host, self.catalog, plan, self.jobs, events, tasks);
        }
    }
}

/// Ends `task` (of `catalog`) a success, with the `changes` its
/// `transition` made.
fn succeeded(
    catalog: &Catalog,
    task: &mut super::plan::Task,
    changes: Vec<Change>,
    transition: update::Transition,
) {
    // Read again, it had nothing left to do: no change is counted or
    // claimed.
    let idle = matches!(
        task.action,
        Action::Create | Action::Change | Action::Remove | Action::Unknown
    ) && changes.is_empty()
        && transition.should.is_empty();
    if idle {
        task.note = Some(NOTHING_LEFT.to_owned());
    }
    if task.action == Action::Unknown {
        let provider = catalog.items[task.item].provider;
        task.action = super::plan::action_of(provider, &transition);
    }
    task.changes = changes;
    task.transition = Some(Box::new(transition));
    task.state = TaskState::Success;
}

/// Reads back, before refresh task `at` runs, the resources of the tasks
/// it waits for (what calls for it, and its own change) that are not read
/// back yet: a refresh for a change that did not hold must not run. A
/// task whose provider runs another batch now is left for later (a
/// provider never runs two calls at once).
fn read_back_before_refresh(
    host: &Host,
    catalog: &Catalog,
    plan: &mut Plan,
    schedule: &Schedule,
    events: &mut dyn Events,
    verified: &mut [bool],
    at: usize,
) {
    let unread: Vec<usize> = plan.tasks[at]
        .requires
        .iter()
        .copied()
        .filter(|&before| {
            // The refresh's own provider is busy with it alone.
            let provider = schedule.provider_of(before);
            !verified[before]
                && (provider == schedule.provider_of(at) || !schedule.is_busy(provider))
        })
        .filter(|&before| plan.tasks[before].state == TaskState::Success)
        .filter(|&before| is_verified(catalog, &plan.tasks[before]))
        .collect();
    if unread.is_empty() || crate::process::is_interrupted() {
        return;
    }
    for &before in &unread {
        verified[before] = true;
    }
    verify(host, catalog, plan, 1, events, unread);
}

/// Which providers' tasks are settled, worked out as tasks end: a task
/// is settled once it ended and so did everything that waits for it,
/// directly or not; a provider whose every task is settled is read back.
/// Each task's end touches only its own edges (linear in the whole run).
struct Unfinished {
    /// Per task: its not settled dependents, plus one until it ends.
    pending: Vec<usize>,
    /// Per provider (by the schedule's index): its tasks not settled.
    unsettled: Vec<usize>,
    /// Per task: the tasks it waits for.
    requires: Vec<Vec<usize>>,
    /// Providers all of whose tasks just got settled.
    ready: Vec<usize>,
}

impl Unfinished {
    /// The tasks of `plan`; those the schedule will not run (failed at
    /// planning, lock and unlock tasks) count as ended.
    fn of(plan: &Plan, schedule: &Schedule) -> Unfinished {
        let count = plan.tasks.len();
        let providers = (0..count)
            .map(|at| schedule.provider_of(at) + 1)
            .max()
            .unwrap_or(0);
        let mut unfinished = Unfinished {
            pending: vec![0; count],
            unsettled: vec![0; providers],
            requires: plan.tasks.iter().map(|t| t.requires.clone()).collect(),
            ready: Vec::new(),
        };
        for at in 0..count {
            unfinished.unsettled[schedule.provider_of(at)] += 1;
            unfinished.pending[at] += usize::from(schedule.is_pending(at));
            for &before in &plan.tasks[at].requires {
                unfinished.pending[before] += 1;
            }
        }
        // Those settled from the start (what they wait for may follow).
        let settled: Vec<usize> = (0..count)
            .filter(|&at| unfinished.pending[at] == 0)
            .collect();
        for at in settled {
            unfinished.settle(at, schedule);
        }
        unfinished.ready.clear();
        unfinished
    }

    /// `tasks` (each counted once: a task ends once) ended.
    fn ended(&mut self, tasks: &[usize], schedule: &Schedule) {
        for &at in tasks {
            if self.pending[at] > 0 {
                self.pending[at] -= 1;
                if self.pending[at] == 0 {
                    self.settle(at, schedule);
                }
            }
        }
    }

    fn settle(&mut self, at: usize, schedule: &Schedule) {
        let mut next = vec![at];
        while let Some(task) = next.pop() {
            let provider = schedule.provider_of(task);
            self.unsettled[provider] -= 1;
            if self.unsettled[provider] == 0 {
                self.ready.push(provider);
            }
            for at in 0..self.requires[task].len() {
                let before = self.requires[task][at];
                self.pending[before] -= 1;
                if self.pending[before] == 0 {
                    next.push(before);
                }
            }
        }
    }

    /// The providers all of whose tasks got settled since last asked.
    fn settled(&mut self) -> Vec<usize> {
        std::mem::take(&mut self.ready)
    }
}

/// The schedule of the plan's tasks: providers by index (their qualified
/// names tell them apart), json ones taking their ready tasks as one
/// batch.
fn schedule_of(catalog: &Catalog, plan: &Plan) -> Schedule {
    let providers: Vec<&Provider> = plan
        .tasks
        .iter()
        .map(|task| catalog.items[task.item].provider)
        .collect();
    let (index, count) = Schedule::index_providers(providers.iter().map(|p| p.qualified_name()));
    let mut batched = vec![false; count];
    // A plugin's callbacks and commands (its item type stands as their
    // provider, with no actions) run one by one.
    for (provider, &at) in providers.iter().zip(&index) {
        batched[at] = provider.meta.invoke == Invoke::Json && !provider.meta.actions.is_empty();
    }
    // Lock and unlock tasks run around the schedule, never in it.
    let nodes = plan.tasks.iter().zip(&index).map(|(task, &provider)| Node {
        provider,
        requires: &task.requires,
        alone: task.action == Action::Refresh,
        pending: task.state == TaskState::Initial
            && catalog.items[task.item]
                .from_plugin
                .as_deref()
                .is_none_or(|f| f.phase() == Phase::Main),
    });
    Schedule::new(batched, nodes)
}

/// Starts `batch` (tasks of one provider) on a thread of `scope`; its
/// results come back on `sender`.
fn start_batch<'scope, 'env>(
    host: &'env Host,
    catalog: &'env Catalog,
    plan: &mut Plan,
    batch: Vec<usize>,
    sender: &mpsc::Sender<Message>,
    scope: &'scope std::thread::Scope<'scope, 'env>,
    events: &mut dyn Events,
) {
    let item = &catalog.items[plan.tasks[batch[0]].item];
    for &at in &batch {
        plan.tasks[at].state = TaskState::Running;
    }
    events.tasks_started(catalog, plan, &batch);
    if plan.tasks[batch[0]].action == Action::Refresh {
        start_refresh(host, catalog, plan, batch[0], sender, scope);
        return;
    }
    if item.role == Role::Action {
        start_action(host, catalog, item, batch, sender, scope);
        return;
    }
    let provider = item.provider;
    let work: Vec<Work> = batch
        .iter()
        .map(|&at| {
            let task = &plan.tasks[at];
            Work {
                task: at,
                transition: (task.transition.as_deref().cloned()).expect("only planned tasks run"),
                request: catalog.items[task.item].request.clone(),
                planned_from: task.planned_from.clone(),
            }
        })
        .collect();
    // What waited for other tasks is read again: those changes may have
    // changed it, or made it readable. So is every task of a saved plan,
    // which must find the state it was planned from.
    let reread = batch
        .iter()
        .any(|&at| !plan.tasks[at].requires.is_empty() || plan.tasks[at].planned_from.is_some());
    let sender = sender.clone();
    scope.spawn(move || {
        let started = Instant::now();
        let (results, read_after_failure) =
            run_batch_guarded(host, provider, work, reread, &sender);
        let _ = sender.send(Message::Done(Done {
            tasks: batch,
            results,
            seconds: started.elapsed().as_secs_f64(),
            read_after_failure,
        }));
    });
}

/// [`run_batch`] on this thread, the scheduler on `sender` recording the
/// intents before the call. A panic in the batch fails its tasks instead
/// of leaving the scheduler waiting for them forever.
fn run_batch_guarded(
    host: &Host,
    provider: &Provider,
    work: Vec<Work>,
    reread: bool,
    sender: &mpsc::Sender<Message>,
) -> (Vec<Outcome>, Vec<(usize, Option<bool>)>) {
    let count = work.len();
    let may_call = |calls: Vec<Calling>| {
        let (reply, answer) = mpsc::channel();
        sender.send(Message::Calling(calls, reply)).is_ok() && answer.recv().unwrap_or(false)
    };
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        run_batch(host, provider, work, reread, &may_call)
    }))
    .unwrap_or_else(|_| {
        let results = (0..count)
            .map(|_| {
                Err(failed(
                    "internal error: the task's thread panicked".to_owned(),
                ))
            })
            .collect();
        (results, Vec::new())
    })
}

/// Starts the plugin's callback or remote command `item`, the one task of
/// `batch`, on a thread of `scope`; its result comes back on `sender`.
fn start_action<'scope, 'env>(
    host: &'env Host,
    catalog: &'env Catalog,
    item: &'env Item,
    batch: Vec<usize>,
    sender: &mpsc::Sender<Message>,
    scope: &'scope std::thread::Scope<'scope, 'env>,
) {
    let sender = sender.clone();
    scope.spawn(move || {
        let started = Instant::now();
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            super::action::run(host, catalog, item)
        }))
        .unwrap_or(Err(ActionError::Panicked));
        let placeholder = update::Transition {
            name: item.name().to_owned(),
            found: false,
            state: Resource::bare(item.name()),
            should: Vec::new(),
        };
        let _ = sender.send(Message::Done(Done {
            tasks: batch,
            results: vec![result
                .map(|()| (Vec::new(), placeholder))
                .map_err(|e| failed(e.to_string()))],
            seconds: started.elapsed().as_secs_f64(),
            read_after_failure: Vec::new(),
        }));
    });
}

/// Starts the refresh task `at` on a thread of `scope` (it runs alone),
/// or ends it at once when it is not needed: nothing it subscribes to
/// changed after all, or its own task just created, removed, started or
/// stopped it (its `ensure` changed), which a refresh would only repeat.
fn start_refresh<'scope, 'env>(
    host: &'env Host,
    catalog: &'env Catalog,
    plan: &mut Plan,
    at: usize,
    sender: &mpsc::Sender<Message>,
    scope: &'scope std::thread::Scope<'scope, 'env>,
) {
    let item = &catalog.items[plan.tasks[at].item];
    let not_needed = refresh_not_needed(catalog, plan, at);
    plan.tasks[at].note = not_needed.clone();
    let placeholder = update::Transition {
        name: item.name().to_owned(),
        found: true,
        state: Resource::bare(item.name()),
        should: Vec::new(),
    };
    let sender = sender.clone();
    scope.spawn(move || {
        let started = Instant::now();
        let result = match not_needed {
            Some(_) => Ok(()),
            None => std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                host.refresh(item.provider, item.name(), &item.request.attrs)
                    .map_err(|e| e.to_string())
            }))
            .unwrap_or_else(|_| Err("internal error: the task's thread panicked".to_owned())),
        };
        let _ = sender.send(Message::Done(Done {
            tasks: vec![at],
            results: vec![result
                .map(|()| (Vec::new(), placeholder))
                .map_err(|e| failed(format!("{e}{STAYS_OWED}")))],
            seconds: started.elapsed().as_secs_f64(),
            read_after_failure: Vec::new(),
        }));
    });
}

/// What a task says that, read again just before it ran, had nothing
/// left to do (what it waited for did it, or an exec's guard now says
/// so).
pub const NOTHING_LEFT: &str = "nothing left to do when read again";

/// What a refresh that did not succeed says: the store owes it.
const STAYS_OWED: &str = "; the refresh stays owed, and the next apply runs it";

/// Why refresh task `at` need not call its provider, if it need not.
fn refresh_not_needed(catalog: &Catalog, plan: &Plan, at: usize) -> Option<String> {
    let task = &plan.tasks[at];
    let own = task
        .requires
        .iter()
        .map(|&before| &plan.tasks[before])
        .find(|before| before.item == task.item && before.action != Action::Refresh);
    if let Some(own) = own.filter(|own| own.state == TaskState::Success) {
        if let Some(ensure) = own.changes.iter().find(|c| c.attr == "ensure") {
            let provider = catalog.items[task.item].provider;
            let shown = provider
                .attribute("ensure")
                .map_or_else(|| ensure.is.to_text(), |a| a.show(&ensure.is));
            return Some(format!(
                "not needed: its own task just set ensure to {shown}"
            ));
        }
    }
    if task.owed {
        return None;
    }
    let changed = task.refresh_on.iter().any(|&source| {
        let source = &plan.tasks[source];
        source.state == TaskState::Success
            && (source.action == Action::Run || !source.changes.is_empty())
    });
    (!changed).then(|| "not needed: nothing it subscribes to changed".to_owned())
}

/// Runs the tasks of `phase` (locks, or unlocks) one after another, each
/// as it comes; returns them.
fn run_phase(
    host: &Host,
    catalog: &Catalog,
    plan: &mut Plan,
    phase: Phase,
    events: &mut dyn Events,
) -> Vec<usize> {
    let tasks: Vec<usize> = (0..plan.tasks.len())
        .filter(|&at| locks::phase(catalog, plan, at) == phase)
        .collect();
    for &at in &tasks {
        run_alone(host, catalog, plan, at, events);
    }
    tasks
}

/// Runs one plugin task here and now, reporting it as it goes.
fn run_alone(host: &Host, catalog: &Catalog, plan: &mut Plan, at: usize, events: &mut dyn Events) {
    plan.tasks[at].state = TaskState::Running;
    events.tasks_started(catalog, plan, &[at]);
    let started = Instant::now();
    let item = &catalog.items[plan.tasks[at].item];
    let result = super::action::run(host, catalog, item);
    let task = &mut plan.tasks[at];
    task.seconds = started.elapsed().as_secs_f64();
    match result {
        Ok(()) => task.state = TaskState::Success,
        Err(error) => {
            task.state = TaskState::Failed;
            task.error = Some(failed(error.to_string()));
        }
    }
    events.tasks_ended(catalog, plan, &[at]);
}

/// The unlock task of each plugin whose lock task succeeded.
fn unlock(
    host: &Host,
    catalog: &Catalog,
    plan: &mut Plan,
    locked: &[usize],
    events: &mut dyn Events,
) {
    let plugin_of = |plan: &Plan, at: usize| {
        catalog.items[plan.tasks[at].item]
            .from_plugin
            .as_deref()
            .and_then(|f| f.plugin().map(str::to_owned))
    };
    let held: Vec<Option<String>> = locked
        .iter()
        .filter(|&&at| plan.tasks[at].state == TaskState::Success)
        .map(|&at| plugin_of(plan, at))
        .collect();
    let unlocks: Vec<usize> = (0..plan.tasks.len())
        .filter(|&at| locks::phase(catalog, plan, at) == Phase::Unlock)
        .collect();
    for at in unlocks {
        if held.contains(&plugin_of(plan, at)) && !crate::process::is_interrupted() {
            run_alone(host, catalog, plan, at, events);
        } else {
            let task = &mut plan.tasks[at];
            task.state = TaskState::Skipped;
            task.error = Some(TaskError {
                kind: ErrorKind::Prerequisite,
                message: "not run: its lock task did not succeed".to_owned(),
            });
            events.tasks_ended(catalog, plan, &[at]);
        }
    }
}

/// Marks Skipped the tasks `off` (in plan order: what they wait for is
/// marked first), each naming the tasks it waits for that did not
/// succeed: those it requires, or all of `because` (the locks) when given.
fn skip(
    catalog: &Catalog,
    plan: &mut Plan,
    off: Vec<usize>,
    because: Option<&[usize]>,
    events: &mut dyn Events,
) {
    if off.is_empty() {
        return;
    }
    for &at in &off {
        let names: Vec<String> = because
            .unwrap_or(&plan.tasks[at].requires)
            .iter()
            .filter(|&&before| plan.tasks[before].state.is_unsuccessful())
            .map(|&before| catalog.items[plan.tasks[before].item].reference())
            .collect();
        // A refresh a source of which ran (and failed) is owed.
        let owed = plan.tasks[at].owed
            || plan.tasks[at]
                .refresh_on
                .iter()
                .any(|&source| plan.tasks[source].state == TaskState::Failed);
        let task = &mut plan.tasks[at];
        task.state = TaskState::Skipped;
        task.error = Some(TaskError {
            kind: ErrorKind::Prerequisite,
            message: format!(
                "not run: {} did not succeed{}",
                names.join(", "),
                if owed { STAYS_OWED } else { "" }
            ),
        });
    }
    events.tasks_ended(catalog, plan, &off);
}

/// A task of a batch about to call its provider: its index in the batch,
/// the transition it makes, its request and what the scheduler is told.
type Pending = (usize, update::Transition, update::Request, Calling);

/// Runs one batch of one provider: the states read again first when
/// `reread` (a transition that has become empty needs no call), then, once
/// `may_call` agreed (the intents are recorded), one set of many, each
/// answer settled as `ralsh` settles a single update.
fn run_batch(
    host: &Host,
    provider: &Provider,
    work: Vec<Work>,
    reread: bool,
    may_call: &dyn Fn(Vec<Calling>) -> bool,
) -> (Vec<Outcome>, Vec<(usize, Option<bool>)>) {
    let mut results: Vec<Option<Outcome>> = vec![None; work.len()];
    let mut pending: Vec<Pending> = Vec::new();
    let mut calls: Vec<Calling> = Vec::new();
    let fresh: Vec<Observed> = if reread {
        let names: Vec<&str> = work.iter().map(|w| w.request.name.as_str()).collect();
        let should = update::told(provider, work.iter().map(|w| &w.request));
        read_told(host, provider, &names, &should)
    } else {
        Vec::new()
    };
    let mut fresh = fresh.into_iter();
    for (at, work) in work.into_iter().enumerate() {
        let Work {
            task,
            transition,
            request,
            planned_from,
        } = work;
        let planned_from = planned_from.as_deref();
        let transition =
            match transition_now(provider, transition, &request, planned_from, fresh.next()) {
                Ok(transition) => transition,
                Err(error) => {
                    results[at] = Some(Err(error));
                    continue;
                }
            };
        if transition.should.is_empty() {
            results[at] = Some(Ok((Vec::new(), transition)));
            continue;
        }
        let calling = Calling {
            task,
            action: super::plan::action_of(provider, &transition),
            existed: super::ownership::exists(
                provider,
                transition.found.then_some(&transition.state),
            ),
        };
        calls.push(calling);
        pending.push((at, transition, request, calling));
    }
    if !pending.is_empty() && !may_call(calls) {
        for (at, _, _, _) in &pending {
            results[*at] = Some(Err(failed(
                "not run: what it was about to do could not be recorded in the state store"
                    .to_owned(),
            )));
        }
        pending.clear();
    }
    set_pending(host, provider, &pending, &mut results);
    let read_after_failure = read_failed_creations(host, provider, &pending, &results);
    let results = results
        .into_iter()
        .map(|result| result.expect("every task has a result"))
        .collect();
    (results, read_after_failure)
}

/// The transition a task of a batch makes now: the one `planned` when
/// its state was not read again (`found`), else one from the state found
/// now.
fn transition_now(
    provider: &Provider,
    planned: update::Transition,
    request: &update::Request,
    planned_from: Option<&Planned>,
    found: Option<Observed>,
) -> Result<update::Transition, TaskError> {
    let found = match found {
        None => return Ok(planned),
        Some(Observed::Unreadable(message)) => {
            return Err(failed(format!("could not be read: {message}")))
        }
        Some(found) => found,
    };
    // A saved plan's task runs as planned, once its resource is found as
    // it was then; it is told the state found now. A command's state is
    // its guards', which what it waits for may just have changed: it is
    // planned again, as in a live run.
    match planned_from.filter(|_| !provider.meta.runs_commands) {
        Some(then) => {
            if let Some(message) = drift(provider, &planned, then, found.resource()) {
                return Err(TaskError {
                    kind: ErrorKind::Drifted,
                    message,
                });
            }
            let mut transition = planned;
            transition.found = found.resource().is_some();
            if let Some(now) = found.into_resource() {
                transition.state = now;
            }
            Ok(transition)
        }
        None => update::Transition::new(provider, request, found.into_resource())
            .map_err(|e| failed(e.to_string())),
    }
}

/// Sets the resources of the `pending` tasks in one call of `provider`,
/// each answer settled as `ralsh` settles a single update, into their
/// `results`.
fn set_pending(
    host: &Host,
    provider: &Provider,
    pending: &[Pending],
    results: &mut [Option<Outcome>],
) {
    if pending.is_empty() {
        return;
    }
    let updates: Vec<_> = pending
        .iter()
        .map(|(_, plan, _, _)| plan.as_update())
        .collect();
    match host.set_many(provider, &updates, false) {
        Err(e) => {
            let message = e.to_string();
            for (at, _, _, _) in pending {
                results[*at] = Some(Err(failed(message.clone())));
            }
        }
        Ok(answers) => {
            for (answer, (at, transition, request, _)) in answers.into_iter().zip(pending) {
                let settled = answer
                    .and_then(|answer| {
                        update::settle(host, provider, transition, Some(request), answer)
                    })
                    .map(|changes| (changes, transition.clone()))
                    .map_err(|e| failed(e.to_string()));
                results[*at] = Some(settled);
            }
        }
    }
}

/// Reads again, right after their failure, the resources that tasks of
/// `pending` failed to create (under the provider they ran with, before
/// any other task of it starts): whether each exists decides whether it
/// is ral's, before anyone else can make it (see `ownership`).
fn read_failed_creations(
    host: &Host,
    provider: &Provider,
    pending: &[Pending],
    results: &[Option<Outcome>],
) -> Vec<(usize, Option<bool>)> {
    let failed: Vec<&Pending> = pending
        .iter()
        .filter(|(at, _, _, calling)| !calling.existed && matches!(results[*at], Some(Err(_))))
        .collect();
    if failed.is_empty() {
        return Vec::new();
    }
    let names: Vec<&str> = failed.iter().map(|(_, t, _, _)| t.name.as_str()).collect();
    read(host, provider, &names)
        .into_iter()
        .zip(failed)
        .map(|(found, (_, _, _, calling))| {
            let exists = match found {
                Observed::Unreadable(_) => None,
                found => Some(super::ownership::exists(provider, found.resource())),
            };
            (calling.task, exists)
        })
        .collect()
}

/// How the state `found` just before a saved plan's task differs from
/// the state `planned` it was made from, in what the task changes (and
/// whether the resource exists), if it does. A resource that does not
/// exist has no attributes to differ in: a simple provider reports one as
/// `ensure: absent`, a listing leaves it out, and both mean the same.
fn drift(
    provider: &Provider,
    transition: &update::Transition,
    planned: &Planned,
    found: Option<&Resource>,
) -> Option<String> {
    let exists = |r: Option<&Resource>| r.is_some_and(|r| !r.is_absent());
    let (then, now) = (exists(planned.state.as_ref()), exists(found));
    if then != now {
        let word = |e: bool| if e { "existed" } else { "did not exist" };
        return Some(format!(
            "the resource {} when the plan was made, and {} now",
            word(then),
            if now { "exists" } else { "does not exist" }
        ));
    }
    if !then {
        return None;
    }
    for (key, _) in &transition.should {
        let now = found.and_then(|r| r.attrs.get(key));
        let attribute = provider.attribute(key);
        if let Some(attribute) = attribute.filter(|a| a.kept_keyed()) {
            if !planned.secret_unchanged(&transition.name, key, now) {
                let what = match attribute.sensitive {
                    true => "sensitive attribute",
                    false => "attribute",
                };
                return Some(format!("{what} '{key}' changed since the plan was made"));
            }
            // A value not reported (too large, or private) is known by
            // its digest.
            if let Some(digest) = &attribute.digest {
                let then = planned.state.as_ref().and_then(|r| r.attrs.get(digest));
                if then != found.and_then(|r| r.attrs.get(digest)) {
                    return Some(format!("attribute '{key}' changed since the plan was made"));
                }
            }
            continue;
        }
        let then = planned.state.as_ref().and_then(|r| r.attrs.get(key));
        if then != now {
            let show = |value: Option<&crate::types::Value>| match (value, attribute) {
                (None, _) => "no value".to_owned(),
                (Some(v), Some(attribute)) => attribute.show(v),
                (Some(v), None) => format!("'{}'", crate::text::escape(&v.to_text())),
            };
            return Some(format!(
                "attribute '{key}' was {} when the plan was made, and is {} now",
                show(then),
                show(now)
            ));
        }
    }
    None
}

/// Reads back the resource of every task of `tasks` that succeeded (one
/// read per provider) and fails the tasks whose resource does not match
/// what was asked; then tells `events` they are final.
fn verify(
    host: &Host,
    catalog: &Catalog,
    plan: &mut Plan,
    jobs: usize,
    events: &mut dyn Events,
    tasks: Vec<usize>,
) {
    let done: Vec<usize> = tasks
        .into_iter()
        .filter(|&at| plan.tasks[at].state == TaskState::Success)
        .filter(|&at| is_verified(catalog, &plan.tasks[at]))
        .collect();
    if done.is_empty() {
        return;
    }
    let items: Vec<usize> = done.iter().map(|&at| plan.tasks[at].item).collect();
    let task_of: std::collections::HashMap<usize, usize> =
        done.iter().map(|&at| (plan.tasks[at].item, at)).collect();
    let (groups, members) = by_provider(catalog, items);
    let answers = read_all(host, &groups, jobs);
    for (answer, items) in answers.into_iter().zip(members) {
        for (found, item) in answer.into_iter().zip(items) {
            let at = task_of[&item];
            let provider = catalog.items[item].provider;
            let mismatch = match found {
                Observed::Unreadable(message) => Some(format!("could not be read back: {message}")),
                found => mismatch(
                    provider,
                    &catalog.items[item].request,
                    found.into_resource(),
                ),
            };
            if let Some(message) = mismatch {
                let task = &mut plan.tasks[at];
                task.state = TaskState::Failed;
                task.error = Some(TaskError {
                    kind: ErrorKind::Verify,
                    message: format!(
                        "{} reported success, but {message}",
                        provider.qualified_name()
                    ),
                });
                events.task_ended(catalog, plan, at);
            }
        }
    }
    events.tasks_verified(catalog, plan, &done);
}

/// How `found` differs from the request, if it does: the request planned
/// again from what was read back must have nothing left to do (write-only
/// attributes aside, which are never read back).
fn mismatch(
    provider: &Provider,
    request: &update::Request,
    found: Option<Resource>,
) -> Option<String> {
    let again = match update::Transition::new(provider, request, found) {
        Ok(again) => again,
        Err(e) => return Some(format!("afterwards: {e}")),
    };
    let (key, wanted) = again.should.iter().find(|(key, _)| {
        provider
            .attribute(key)
            .is_none_or(|attribute| attribute.kind != Kind::Write)
    })?;
    if again.creates(provider) {
        return Some("the resource does not exist afterwards".to_owned());
    }
    if key == "ensure" && wanted.as_str() == Some("absent") {
        return Some("the resource still exists afterwards".to_owned());
    }
    let attribute = provider.attribute(key)?;
    let now = again
        .state
        .attrs
        .get(key)
        .map_or("no value".to_owned(), |v| attribute.show(v));
    Some(format!(
        "attribute '{key}' is {now} afterwards, not {}",
        attribute.show(wanted)
    ))
}

#[cfg(test)]
mod tests {
    //! The apply phase against providers served in this process, as ral's
    //! native ones are: their answers are scripted over a shared world of
    //! resources, and every call they get is logged in order, so that a
    //! test sees which calls a run made and in which order, with no child
    //! process and no file but a temporary root.

    use std::collections::BTreeMap;
    use std::path::{Path, PathBuf};
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use serde_json::{Map, Value as Json};

    use super::*;
    use crate::converge::manifest;
    use crate::converge::plan::{self, Task};
    use crate::converge::run::{self, Input, Mode, Options, StoreAt};
    use crate::discovery::Registry;
    use crate::host::HostConfig;
    use crate::metadata::Metadata;
    use crate::sdk::{self, CallError, CallResult};

    /// What the scripted providers share: their resources by (type, name),
    /// and every call they got, in order (`alpha set a,b`).
    #[derive(Default)]
    struct World {
        resources: Mutex<BTreeMap<(String, String), sdk::Resource>>,
        calls: Mutex<Vec<String>>,
    }

    impl World {
        /// Puts resource `name` of `type_name` with `value`.
        fn put(&self, type_name: &str, name: &str, value: &str) {
            let mut resource = Map::new();
            resource.insert("name".to_owned(), Json::from(name));
            resource.insert("ensure".to_owned(), Json::from("present"));
            resource.insert("value".to_owned(), Json::from(value));
            let key = (type_name.to_owned(), name.to_owned());
            self.resources.lock().unwrap().insert(key, resource);
        }

        /// The value of resource `name` of `type_name`, if it exists.
        fn value(&self, type_name: &str, name: &str) -> Option<String> {
            let resources = self.resources.lock().unwrap();
            let resource = resources.get(&(type_name.to_owned(), name.to_owned()))?;
            Some(resource.get("value")?.as_str()?.to_owned())
        }

        fn log(&self, call: String) {
            self.calls.lock().unwrap().push(call);
        }

        /// The calls logged so far that contain `word` (` refresh `, say).
        fn calls_with(&self, word: &str) -> Vec<String> {
            let calls = self.calls.lock().unwrap();
            calls.iter().filter(|c| c.contains(word)).cloned().collect()
        }

        /// The names the sets of `type_name` were given, in order.
        fn updated(&self, type_name: &str) -> Vec<String> {
            let calls = self.calls.lock().unwrap();
            let set = format!("{type_name} set ");
            (calls.iter())
                .filter_map(|call| call.strip_prefix(&set))
                .flat_map(|names| names.split(','))
                .map(str::to_owned)
                .collect()
        }

        /// Where `call` was logged first; fails the test when it was not.
        fn position(&self, call: &str) -> usize {
            let calls = self.calls.lock().unwrap();
            calls
                .iter()
                .position(|c| c == call)
                .unwrap_or_else(|| panic!("no call '{call}' in {calls:?}"))
        }
    }

    /// A json provider of one type over the world: get answers what the
    /// world holds, set writes it there (changing nothing under noop) and
    /// reports each attribute it changed, refresh only logs.
    struct Scripted {
        type_name: &'static str,
        world: Arc<World>,
        /// Names whose update fails, changing nothing.
        failing: Vec<&'static str>,
        /// Run after each update that succeeded, with its name: what else
        /// it does to the world (or undoes of its own change).
        after_set: Option<fn(&World, &str)>,
    }

    impl sdk::Provider for Scripted {
        fn metadata(&self) -> &'static str {
            ""
        }

        fn convention(&self) -> sdk::Convention {
            sdk::Convention::Json
        }

        fn get(&self, _call: &sdk::Call, names: &[String]) -> CallResult<Vec<sdk::Resource>> {
            self.world
                .log(format!("{} get {}", self.type_name, names.join(",")));
            let resources = self.world.resources.lock().unwrap();
            Ok(resources
                .iter()
                .filter(|((t, name), _)| {
                    t == self.type_name && (names.is_empty() || names.contains(name))
                })
                .map(|(_, resource)| resource.clone())
                .collect())
        }

        fn set(&self, call: &sdk::Call, updates: &[sdk::Update]) -> CallResult<Vec<sdk::Outcome>> {
            let names: Vec<&str> = updates.iter().map(|u| u.name.as_str()).collect();
            let noop = if call.noop { "(noop)" } else { "" };
            self.world
                .log(format!("{} set{noop} {}", self.type_name, names.join(",")));
            let mut outcomes = Vec::new();
            for update in updates {
                if self.failing.contains(&update.name.as_str()) {
                    outcomes.push(Err(CallError::new(format!(
                        "{} cannot be written",
                        update.name
                    ))));
                    continue;
                }
                let changes: Vec<sdk::Change> = (update.should.iter())
                    .filter(|(key, value)| update.is.get(*key) != Some(value))
                    .map(|(key, value)| {
                        let was = update.is.get(key).cloned().unwrap_or(Json::Null);
                        sdk::Change::new(key, was, value.clone())
                    })
                    .collect();
                if !call.noop {
                    self.write(update);
                    if let Some(after_set) = self.after_set {
                        after_set(&self.world, &update.name);
                    }
                }
                outcomes.push(Ok(changes));
            }
            Ok(outcomes)
        }

        fn refresh(&self, _call: &sdk::Call, name: &str, _attrs: &sdk::Resource) -> CallResult<()> {
            self.world.log(format!("{} refresh {name}", self.type_name));
            Ok(())
        }
    }

    impl Scripted {
        fn write(&self, update: &sdk::Update) {
            let key = (self.type_name.to_owned(), update.name.clone());
            let mut resources = self.world.resources.lock().unwrap();
            if update.should.get("ensure") == Some(&Json::from("absent")) {
                resources.remove(&key);
                return;
            }
            let resource = resources.entry(key).or_insert_with(|| {
                let mut fresh = Map::new();
                fresh.insert("name".to_owned(), Json::from(update.name.as_str()));
                fresh
            });
            for (key, value) in &update.should {
                resource.insert(key.clone(), value.clone());
            }
        }
    }

    /// How a test scripts one provider: its type, the names whose update
    /// fails, and what its updates also do.
    struct Script {
        type_name: &'static str,
        failing: Vec<&'static str>,
        after_set: Option<fn(&World, &str)>,
    }

    fn script(type_name: &'static str) -> Script {
        Script {
            type_name,
            failing: Vec::new(),
            after_set: None,
        }
    }

    /// The host-side provider a script plays: json, with `name`, `ensure`
    /// and `value`; `svc` can be refreshed.
    fn provider(script: Script, world: &Arc<World>) -> crate::provider::Provider {
        let actions = match script.type_name {
            "svc" => "[get, set, refresh]",
            _ => "[get, set]",
        };
        let yaml = format!(
            "provider:\n  type: {}\n  invoke: json\n  actions: {actions}\n  suitable: true\n  \
             attributes:\n    name: {{}}\n    ensure: {{type: 'enum[present, absent]'}}\n    \
             value: {{}}\n",
            script.type_name
        );
        // Named after its file, as a provider is: `alpha::alpha`.
        let file = format!("{}.yaml", script.type_name);
        let meta = Metadata::parse(&yaml, Path::new(&file)).unwrap();
        let source = Path::new(&file).with_extension("prov");
        let mut provider = crate::provider::Provider::new(meta, source, None);
        // The host serves a native provider's code for the whole process:
        // a test's few are leaked.
        let code: &'static Scripted = Box::leak(Box::new(Scripted {
            type_name: script.type_name,
            world: Arc::clone(world),
            failing: script.failing,
            after_set: script.after_set,
        }));
        provider.native = Some(sdk::Native(code));
        provider
    }

    /// A temporary root, a host for it, the world and a registry of the
    /// scripted providers `alpha`, `beta`, `gamma` and `svc` (those of
    /// `scripts` as they say, the others plain).
    struct Fixture {
        root: tempfile::TempDir,
        host: Host,
        world: Arc<World>,
        registry: Registry,
    }

    fn fixture(scripts: Vec<Script>) -> Fixture {
        let root = tempfile::tempdir().unwrap();
        let host = Host::new(HostConfig {
            root: root.path().canonicalize().unwrap(),
            timeout: Duration::from_secs(60),
            ..HostConfig::default()
        });
        let world = Arc::new(World::default());
        let mut scripts = scripts;
        for type_name in ["alpha", "beta", "gamma", "svc"] {
            if !scripts.iter().any(|s| s.type_name == type_name) {
                scripts.push(script(type_name));
            }
        }
        let providers = scripts.into_iter().map(|s| provider(s, &world)).collect();
        Fixture {
            root,
            host,
            world,
            registry: Registry::of(providers),
        }
    }

    /// What the run told as it went.
    #[derive(Default)]
    struct Heard {
        /// Tasks that started while a task they wait for had not
        /// succeeded.
        early: Vec<String>,
        ended: Vec<(String, TaskState)>,
        read_after_failure: Vec<(String, Option<bool>)>,
        plan_states: Vec<PlanState>,
    }

    impl Events for Heard {
        fn plan_state(&mut self, _catalog: &Catalog, plan: &Plan) {
            self.plan_states.push(plan.state);
        }

        fn task_started(&mut self, catalog: &Catalog, plan: &Plan, task: usize) {
            let reference = catalog.items[plan.tasks[task].item].reference();
            let waits = &plan.tasks[task].requires;
            if waits
                .iter()
                .any(|&r| plan.tasks[r].state != TaskState::Success)
            {
                self.early.push(reference);
            }
        }

        fn task_ended(&mut self, catalog: &Catalog, plan: &Plan, task: usize) {
            let reference = catalog.items[plan.tasks[task].item].reference();
            self.ended.push((reference, plan.tasks[task].state));
        }

        fn read_after_failure(
            &mut self,
            catalog: &Catalog,
            plan: &Plan,
            read: &[(usize, Option<bool>)],
        ) {
            for &(task, exists) in read {
                let reference = catalog.items[plan.tasks[task].item].reference();
                self.read_after_failure.push((reference, exists));
            }
        }
    }

    impl Fixture {
        fn catalog(&self, manifest: &str) -> Catalog<'_> {
            let (declared, problems) = manifest::parse(manifest, Path::new("m.yaml"));
            assert!(problems.is_empty(), "{problems:?}");
            Catalog::build(&self.registry, &declared).unwrap()
        }

        /// Plans `catalog` and applies it, several tasks at once; the
        /// world's log then holds the apply's calls alone.
        fn apply(&self, catalog: &Catalog, stop: StopRequested) -> (Plan, Heard) {
            let jobs = 4;
            let mut plan = plan::plan(&self.host, catalog, jobs).unwrap();
            self.world.calls.lock().unwrap().clear();
            let mut heard = Heard::default();
            apply(&self.host, catalog, &mut plan, jobs, stop, &mut heard);
            (plan, heard)
        }

        /// A manifest file in the root, for a whole run.
        fn manifest(&self, text: &str) -> PathBuf {
            let path = self.root.path().join("m.yaml");
            std::fs::write(&path, text).unwrap();
            path
        }
    }

    /// The task of the item `reference`, the first when it has two (its
    /// change before its refresh).
    fn task<'p>(catalog: &Catalog, plan: &'p Plan, reference: &str) -> &'p Task {
        plan.tasks
            .iter()
            .find(|t| catalog.items[t.item].reference() == reference)
            .unwrap_or_else(|| panic!("no task for {reference}"))
    }

    /// The refresh task of the item `reference`.
    fn refresh<'p>(catalog: &Catalog, plan: &'p Plan, reference: &str) -> &'p Task {
        plan.tasks
            .iter()
            .find(|t| t.action == Action::Refresh && catalog.items[t.item].reference() == reference)
            .unwrap_or_else(|| panic!("no refresh for {reference}"))
    }

    fn never() -> bool {
        false
    }

    #[test]
    fn a_task_starts_only_once_the_tasks_it_waits_for_succeeded() {
        let fixture = fixture(Vec::new());
        // Written last-first: the order is the requirements', not the
        // file's.
        let catalog = fixture.catalog(
            "alpha:\n  a: {value: '1', require: 'Beta[b]'}\n  x: {value: '1'}\nbeta:\n  \
             b: {value: '1', require: 'Gamma[c]'}\ngamma:\n  c: {value: '1'}\n",
        );
        let (plan, heard) = fixture.apply(&catalog, &never);
        assert_eq!(plan.state, PlanState::Successful);
        assert!(
            plan.tasks.iter().all(|t| t.state == TaskState::Success),
            "{:?}",
            heard.ended
        );
        assert!(heard.early.is_empty(), "started early: {:?}", heard.early);
        let world = &fixture.world;
        // Each dependent is read again after what it waits for changed,
        // then changed.
        assert!(world.position("gamma set c") < world.position("beta get b"));
        assert!(world.position("beta get b") < world.position("beta set b"));
        assert!(world.position("beta set b") < world.position("alpha get a"));
        assert!(world.position("alpha get a") < world.position("alpha set a"));
        assert_eq!(world.value("alpha", "a").as_deref(), Some("1"));
        assert_eq!(
            heard.plan_states,
            [PlanState::Running, PlanState::Successful]
        );
    }

    #[test]
    fn a_failed_task_skips_what_waits_for_it_and_the_rest_still_run() {
        let fixture = fixture(vec![Script {
            failing: vec!["b"],
            ..script("beta")
        }]);
        let catalog = fixture.catalog(
            "beta:\n  b: {value: '1'}\nalpha:\n  a: {value: '1', require: 'Beta[b]'}\n  \
             x: {value: '1'}\ngamma:\n  c: {value: '1', require: 'Alpha[a]'}\n  y: {value: '1'}\n",
        );
        let (plan, heard) = fixture.apply(&catalog, &never);
        let b = task(&catalog, &plan, "beta[b]");
        assert_eq!(b.state, TaskState::Failed);
        let error = b.error.as_ref().unwrap();
        assert_eq!(error.kind, ErrorKind::Provider);
        assert!(error.message.contains("b cannot be written"), "{error:?}");
        // What waits for it, directly or not, is skipped, naming what it
        // waited for.
        for (reference, waited_for) in [("alpha[a]", "beta[b]"), ("gamma[c]", "alpha[a]")] {
            let skipped = task(&catalog, &plan, reference);
            assert_eq!(skipped.state, TaskState::Skipped, "{reference}");
            let error = skipped.error.as_ref().unwrap();
            assert_eq!(error.kind, ErrorKind::Prerequisite);
            assert_eq!(
                error.message,
                format!("not run: {waited_for} did not succeed")
            );
        }
        // The rest ran.
        for reference in ["alpha[x]", "gamma[y]"] {
            assert_eq!(
                task(&catalog, &plan, reference).state,
                TaskState::Success,
                "{reference}"
            );
        }
        assert_eq!(fixture.world.value("alpha", "x").as_deref(), Some("1"));
        assert_eq!(fixture.world.value("alpha", "a"), None);
        assert_eq!(fixture.world.updated("alpha"), ["x"]);
        assert_eq!(fixture.world.updated("gamma"), ["y"]);
        // The creation that failed was read again at once: nothing was
        // made.
        assert_eq!(
            heard.read_after_failure,
            [("beta[b]".to_owned(), Some(false))]
        );
        assert_eq!(plan.state, PlanState::Failed);
        assert!(heard.early.is_empty(), "started early: {:?}", heard.early);
    }

    #[test]
    fn a_change_refreshes_what_subscribes_to_it_once_read_back() {
        let fixture = fixture(vec![Script {
            failing: vec!["f"],
            ..script("alpha")
        }]);
        for (type_name, name) in [("alpha", "a"), ("alpha", "f"), ("svc", "s"), ("svc", "t")] {
            fixture.world.put(type_name, name, "1");
        }
        // The services are as declared: only their refreshes are to do.
        let catalog = fixture.catalog(
            "alpha:\n  a: {value: '2'}\n  f: {value: '2'}\nsvc:\n  \
             s: {value: '1', subscribe: 'Alpha[a]'}\n  t: {value: '1', subscribe: 'Alpha[f]'}\n",
        );
        let (plan, heard) = fixture.apply(&catalog, &never);
        let world = &fixture.world;
        // The change is read back before the refresh it calls for runs.
        assert!(world.position("alpha set a,f") < world.position("alpha get a"));
        assert!(world.position("alpha get a") < world.position("svc refresh s"));
        let s = refresh(&catalog, &plan, "svc[s]");
        assert_eq!((s.state, &s.note), (TaskState::Success, &None));
        // A refresh whose source failed is skipped, and stays owed.
        let t = refresh(&catalog, &plan, "svc[t]");
        assert_eq!(t.state, TaskState::Skipped);
        assert_eq!(
            t.error.as_ref().unwrap().message,
            format!("not run: alpha[f] did not succeed{STAYS_OWED}")
        );
        assert_eq!(world.calls_with(" refresh "), ["svc refresh s"]);
        assert_eq!(world.updated("svc"), Vec::<String>::new());
        assert!(heard.early.is_empty(), "started early: {:?}", heard.early);
    }

    #[test]
    fn a_change_that_does_not_hold_fails_its_verification_and_refreshes_nothing() {
        // The provider says it changed a, and puts it back.
        let fixture = fixture(vec![Script {
            after_set: Some(|world, name| world.put("alpha", name, "1")),
            ..script("alpha")
        }]);
        fixture.world.put("alpha", "a", "1");
        fixture.world.put("svc", "s", "1");
        let catalog = fixture
            .catalog("alpha:\n  a: {value: '2'}\nsvc:\n  s: {value: '1', subscribe: 'Alpha[a]'}\n");
        let (plan, _) = fixture.apply(&catalog, &never);
        let a = task(&catalog, &plan, "alpha[a]");
        assert_eq!(a.state, TaskState::Failed);
        let error = a.error.as_ref().unwrap();
        assert_eq!(error.kind, ErrorKind::Verify);
        assert_eq!(
            error.message,
            "alpha::alpha reported success, but attribute 'value' is '1' afterwards, not '2'"
        );
        let s = refresh(&catalog, &plan, "svc[s]");
        assert_eq!(s.state, TaskState::Skipped);
        assert!(s.error.as_ref().unwrap().message.ends_with(STAYS_OWED));
        assert!(fixture.world.calls_with(" refresh ").is_empty());
        assert_eq!(plan.state, PlanState::Failed);
    }

    #[test]
    fn a_task_with_nothing_left_to_do_when_read_again_makes_no_set_call_nor_refresh() {
        // Changing b makes a as declared too.
        let fixture = fixture(vec![Script {
            after_set: Some(|world, _| world.put("alpha", "a", "2")),
            ..script("beta")
        }]);
        fixture.world.put("alpha", "a", "1");
        fixture.world.put("alpha", "k", "1");
        fixture.world.put("beta", "b", "1");
        fixture.world.put("svc", "s", "1");
        let catalog = fixture.catalog(
            "beta:\n  b: {value: '2'}\nalpha:\n  a: {value: '2', require: 'Beta[b]'}\n  \
             k: {value: '1'}\nsvc:\n  s: {value: '1', subscribe: 'Alpha[a]'}\n",
        );
        let (plan, _) = fixture.apply(&catalog, &never);
        // k and s were as declared: no task but s's refresh.
        assert_eq!((plan.tasks.len(), plan.unchanged), (3, 2));
        let a = task(&catalog, &plan, "alpha[a]");
        assert_eq!(a.state, TaskState::Success);
        assert_eq!(a.note.as_deref(), Some(NOTHING_LEFT));
        assert!(a.changes.is_empty(), "{:?}", a.changes);
        let world = &fixture.world;
        assert_eq!(world.updated("alpha"), Vec::<String>::new());
        assert_eq!(world.updated("beta"), ["b"]);
        // Nothing s subscribes to changed after all.
        let s = refresh(&catalog, &plan, "svc[s]");
        assert_eq!(s.state, TaskState::Success);
        let note = s.note.as_deref();
        assert_eq!(note, Some("not needed: nothing it subscribes to changed"));
        assert!(world.calls_with(" refresh ").is_empty());
        // What is set is set for real, never previewed.
        assert!(world.calls_with("(noop)").is_empty());
        assert_eq!(plan.state, PlanState::Successful);
    }

    #[test]
    fn a_stop_requested_before_the_first_task_runs_none() {
        let fixture = fixture(Vec::new());
        let catalog = fixture.catalog("alpha:\n  a: {value: '1'}\nbeta:\n  b: {value: '1'}\n");
        let (plan, heard) = fixture.apply(&catalog, &|| true);
        for t in &plan.tasks {
            assert_eq!(t.state, TaskState::Stopped);
            assert_eq!(t.error.as_ref().unwrap().kind, ErrorKind::Stopped);
        }
        assert!(fixture.world.calls_with(" set").is_empty());
        assert_eq!(
            heard.plan_states,
            [PlanState::Running, PlanState::Stopping, PlanState::Stopped]
        );
    }

    fn options(mode: Mode) -> Options {
        Options {
            mode,
            jobs: 4,
            keep_removed: false,
            destroy: false,
            lock_timeout: Duration::ZERO,
            saving: false,
            origin: None,
        }
    }

    #[test]
    fn the_store_records_how_each_task_ended() {
        let fixture = fixture(vec![Script {
            failing: vec!["b"],
            ..script("beta")
        }]);
        let manifest = fixture.manifest(
            "beta:\n  b: {value: '1'}\nalpha:\n  a: {value: '1', require: 'Beta[b]'}\n  \
             x: {value: '1'}\n",
        );
        let input = Input::read(&[manifest], false).unwrap();
        let store_at = StoreAt::local(fixture.host.root(), None);
        let mut prepared = run::prepare(
            &fixture.host,
            &fixture.registry,
            &store_at,
            &input,
            options(Mode::Apply),
        )
        .unwrap();
        let outcome = prepared
            .apply(&fixture.host, &never, &mut Heard::default())
            .unwrap();
        assert!(outcome.changes && outcome.failures, "{outcome:?}");
        let id = prepared.plan.id.clone();
        drop(prepared);
        let store = crate::store::Store::open(&store_at.location.path()).unwrap();
        let mut tasks: Vec<(String, String, String, Option<String>)> = (store.tasks(&id))
            .unwrap()
            .into_iter()
            .map(|t| {
                let kind = t.error.map(|e| {
                    let e: Json = serde_json::from_str(&e).unwrap();
                    e["kind"].as_str().unwrap().to_owned()
                });
                (t.resource, t.action, t.state, kind)
            })
            .collect();
        tasks.sort();
        let row = |resource: &str, state: &str, kind: Option<&str>| {
            let kind = kind.map(str::to_owned);
            (
                resource.to_owned(),
                "create".to_owned(),
                state.to_owned(),
                kind,
            )
        };
        assert_eq!(
            tasks,
            [
                row("alpha[a]", "Skipped", Some("prerequisite")),
                row("alpha[x]", "Success", None),
                row("beta[b]", "Failed", Some("provider")),
            ]
        );
        // Only what succeeded is recorded as applied (and made by ral).
        let applied: Vec<(String, bool)> = (store.items().unwrap().into_iter())
            .filter(|i| i.state == crate::store::ItemState::Applied)
            .map(|i| (format!("{}[{}]", i.type_name, i.name), i.created))
            .collect();
        assert_eq!(applied, [("alpha[x]".to_owned(), true)]);
        let history = store.history().unwrap();
        assert_eq!(
            (
                history.len(),
                history[0].id.as_str(),
                history[0].state.as_str()
            ),
            (1, id.as_str(), "Failed")
        );
    }

    #[test]
    fn a_plan_prepared_only_to_be_shown_makes_no_set_call_and_is_not_applied() {
        let fixture = fixture(Vec::new());
        let manifest = fixture.manifest("alpha:\n  a: {value: '1'}\n");
        let input = Input::read(&[manifest], false).unwrap();
        let store_at = StoreAt::local(fixture.host.root(), None);
        let mut prepared = run::prepare(
            &fixture.host,
            &fixture.registry,
            &store_at,
            &input,
            options(Mode::Plan),
        )
        .unwrap();
        assert!(prepared.planned().changes);
        let refused = prepared.apply(&fixture.host, &never, &mut Heard::default());
        let message = refused.expect_err("a plan is not applied").to_string();
        assert!(message.contains("a plan is applied only when prepared for applying"));
        let world = &fixture.world;
        assert_eq!(*world.calls.lock().unwrap(), ["alpha get a"]);
        assert_eq!(world.value("alpha", "a"), None);
    }
}
