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

use super::catalog::{Catalog, Role};
use super::expand::Phase;
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
    let mut schedule = schedule_of(catalog, plan);
    let mut unfinished = Unfinished::of(plan, &schedule);
    // What waits for a task failed at planning never runs.
    for at in 0..plan.tasks.len() {
        if plan.tasks[at].state.is_unsuccessful() {
            let off = schedule.did_not_succeed(at);
            unfinished.ended(&off, &schedule);
            skip(catalog, plan, off, None, events);
        }
    }
    std::thread::scope(|scope| loop {
        if plan.state == PlanState::Running && stop() {
            plan.state = PlanState::Stopping;
            events.plan_state(catalog, plan);
        }
        if plan.state == PlanState::Running {
            while schedule.running() < jobs {
                let Some(batch) = schedule.next_batch() else {
                    break;
                };
                if plan.tasks[batch[0]].action == Action::Refresh {
                    let at = batch[0];
                    read_back_before_refresh(host, catalog, plan, &schedule, events, verified, at);
                    if plan.tasks[at]
                        .requires
                        .iter()
                        .any(|&r| plan.tasks[r].state != TaskState::Success)
                    {
                        // What calls for it, or its own change, did not
                        // hold: it is skipped, as what waits for it.
                        schedule.batch_ended(schedule.provider_of(at));
                        let mut off = vec![at];
                        off.extend(schedule.did_not_succeed(at));
                        unfinished.ended(&off, &schedule);
                        skip(catalog, plan, off, None, events);
                        continue;
                    }
                }
                start_batch(host, catalog, plan, batch, &sender, scope, events);
            }
        }
        if schedule.running() == 0 {
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
        schedule.batch_ended(schedule.provider_of(done.tasks[0]));
        let mut off = Vec::new();
        for (&at, result) in done.tasks.iter().zip(done.results) {
            let task = &mut plan.tasks[at];
            task.seconds = done.seconds;
            match result {
                Ok((changes, transition)) => {
                    // Read again, it had nothing left to do: no change is
                    // counted or claimed.
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
                    schedule.succeeded(at);
                }
                Err(error) => {
                    task.state = TaskState::Failed;
                    task.error = Some(error);
                    off.extend(schedule.did_not_succeed(at));
                }
            }
        }
        events.tasks_ended(catalog, plan, &done.tasks);
        if !done.read_after_failure.is_empty() {
            events.read_after_failure(catalog, plan, &done.read_after_failure);
        }
        off.sort_unstable();
        unfinished.ended(&done.tasks, &schedule);
        unfinished.ended(&off, &schedule);
        skip(catalog, plan, off, None, events);
        // A provider none of whose tasks can run any more is read back
        // once what waits for its tasks has ended too (a later task, the
        // removal of a service's script say, may change how they read),
        // as the whole plan used to be at its end; no new task starts
        // meanwhile, running ones go on.
        for provider in unfinished.settled() {
            if crate::process::is_interrupted() {
                break;
            }
            let tasks: Vec<usize> = (0..plan.tasks.len())
                .filter(|&at| schedule.provider_of(at) == provider && !verified[at])
                .collect();
            for &at in &tasks {
                verified[at] = true;
            }
            verify(host, catalog, plan, jobs, events, tasks);
        }
    });
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
    let provider = catalog.items[plan.tasks[batch[0]].item].provider;
    for &at in &batch {
        plan.tasks[at].state = TaskState::Running;
    }
    events.tasks_started(catalog, plan, &batch);
    if plan.tasks[batch[0]].action == Action::Refresh {
        start_refresh(host, catalog, plan, batch[0], sender, scope);
        return;
    }
    if catalog.items[plan.tasks[batch[0]].item].role == Role::Action {
        let item = &catalog.items[plan.tasks[batch[0]].item];
        let sender = sender.clone();
        scope.spawn(move || {
            let started = Instant::now();
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                super::action::run(host, catalog, item)
            }))
            .unwrap_or_else(|_| Err("internal error: the task's thread panicked".to_owned()));
            let placeholder = update::Transition {
                name: item.name().to_owned(),
                found: false,
                state: Resource::bare(item.name()),
                should: Vec::new(),
            };
            let _ = sender.send(Message::Done(Done {
                tasks: batch,
                results: vec![result.map(|()| (Vec::new(), placeholder)).map_err(failed)],
                seconds: started.elapsed().as_secs_f64(),
                read_after_failure: Vec::new(),
            }));
        });
        return;
    }
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
        // A panic in the batch fails its tasks instead of leaving the
        // scheduler waiting for them forever.
        let count = work.len();
        // The scheduler records the intents before the call.
        let may_call = |calls: Vec<Calling>| {
            let (reply, answer) = mpsc::channel();
            sender.send(Message::Calling(calls, reply)).is_ok() && answer.recv().unwrap_or(false)
        };
        let (results, read_after_failure) =
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
            });
        let _ = sender.send(Message::Done(Done {
            tasks: batch,
            results,
            seconds: started.elapsed().as_secs_f64(),
            read_after_failure,
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
        Err(message) => {
            task.state = TaskState::Failed;
            task.error = Some(failed(message));
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
    let mut pending: Vec<(usize, update::Transition, update::Request, Calling)> = Vec::new();
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
        let transition = match fresh.next() {
            None => transition,
            Some(Observed::Unreadable(message)) => {
                results[at] = Some(Err(failed(format!("could not be read: {message}"))));
                continue;
            }
            // A saved plan's task runs as planned, once its resource is
            // found as it was then; it is told the state found now. A
            // command's state is its guards', which what it waits for may
            // just have changed: it is planned again, as in a live run.
            Some(found) if planned_from.is_some() && !provider.meta.runs_commands => {
                let planned = planned_from.as_ref().expect("a saved plan's task");
                if let Some(message) = drift(provider, &transition, planned, found.resource()) {
                    results[at] = Some(Err(TaskError {
                        kind: ErrorKind::Drifted,
                        message,
                    }));
                    continue;
                }
                let mut transition = transition;
                transition.found = found.resource().is_some();
                if let Some(now) = found.into_resource() {
                    transition.state = now;
                }
                transition
            }
            Some(found) => match update::Transition::new(provider, &request, found.into_resource())
            {
                Ok(transition) => transition,
                Err(e) => {
                    results[at] = Some(Err(failed(e.to_string())));
                    continue;
                }
            },
        };
        if transition.should.is_empty() {
            results[at] = Some(Ok((Vec::new(), transition)));
        } else {
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
    if !pending.is_empty() {
        let updates: Vec<_> = pending
            .iter()
            .map(|(_, plan, _, _)| plan.as_update())
            .collect();
        match host.set_many(provider, &updates, false) {
            Err(e) => {
                let message = e.to_string();
                for (at, _, _, _) in &pending {
                    results[*at] = Some(Err(failed(message.clone())));
                }
            }
            Ok(answers) => {
                for (answer, (at, transition, request, _)) in answers.into_iter().zip(&pending) {
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
    let read_after_failure = read_failed_creations(host, provider, &pending, &results);
    let results = results
        .into_iter()
        .map(|result| result.expect("every task has a result"))
        .collect();
    (results, read_after_failure)
}

/// Reads again, right after their failure, the resources that tasks of
/// `pending` failed to create (under the provider they ran with, before
/// any other task of it starts): whether each exists decides whether it
/// is ral's, before anyone else can make it (see `ownership`).
fn read_failed_creations(
    host: &Host,
    provider: &Provider,
    pending: &[(usize, update::Transition, update::Request, Calling)],
    results: &[Option<Outcome>],
) -> Vec<(usize, Option<bool>)> {
    let failed: Vec<&(usize, update::Transition, update::Request, Calling)> = pending
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
