//! Plans: the tasks that bring the system to the manifest, worked out from
//! one read per provider, before anything changes. A task exists only for
//! a resource whose current state differs; tasks follow the catalog's
//! order and know the tasks they wait for.

use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Problem};
use crate::host::Host;
use crate::provider::Provider;
use crate::resource::Change;
use crate::update;

use super::catalog::{Catalog, Item, Role};
use super::from_plugin::FromPlugin;
use super::lifecycle::Remembered;
use super::read::{read_all_told, Group, Observed};
use super::schedule::Schedule;

/// What a task does to its resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    Create,
    Change,
    Remove,
    /// A model plugin's callback or remote task: it runs (it is never
    /// read, so it has nothing to compare).
    Run,
    /// A resource is refreshed (a service restarted) because something it
    /// subscribes to changed in this run; planned when such a change is.
    Refresh,
    /// The current state could not be read, so what is to be done is not
    /// known; the task fails without running.
    Unknown,
}

impl Action {
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Create => "create",
            Action::Change => "change",
            Action::Remove => "remove",
            Action::Run => "run",
            Action::Refresh => "refresh",
            Action::Unknown => "unknown",
        }
    }
}

/// A task's state (LITP's task states).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum TaskState {
    Initial,
    Running,
    Success,
    Failed,
    /// A task it waits for did not succeed; it was never run.
    Skipped,
    /// The plan was stopped before it ran.
    Stopped,
}

impl TaskState {
    pub fn as_str(self) -> &'static str {
        match self {
            TaskState::Initial => "Initial",
            TaskState::Running => "Running",
            TaskState::Success => "Success",
            TaskState::Failed => "Failed",
            TaskState::Skipped => "Skipped",
            TaskState::Stopped => "Stopped",
        }
    }

    /// Whether the task is over without having succeeded.
    pub fn is_unsuccessful(self) -> bool {
        matches!(
            self,
            TaskState::Failed | TaskState::Skipped | TaskState::Stopped
        )
    }
}

/// A plan's state (LITP's plan states).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum PlanState {
    Initial,
    Running,
    Stopping,
    Stopped,
    Successful,
    Failed,
}

impl PlanState {
    pub fn as_str(self) -> &'static str {
        match self {
            PlanState::Initial => "Initial",
            PlanState::Running => "Running",
            PlanState::Stopping => "Stopping",
            PlanState::Stopped => "Stopped",
            PlanState::Successful => "Successful",
            PlanState::Failed => "Failed",
        }
    }
}

/// Why a task did not succeed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ErrorKind {
    /// Its resource's current state could not be read.
    Read,
    /// The provider failed or refused the change.
    Provider,
    /// After the change the resource does not match the manifest.
    Verify,
    /// A task it waits for did not succeed.
    Prerequisite,
    /// The plan was stopped.
    Stopped,
    /// A saved plan's resource changed since the plan was made.
    Drifted,
    /// The process running it ended before it did (the store's recovery
    /// of a dead plan says so).
    Interrupted,
}

impl ErrorKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::Read => "read",
            ErrorKind::Provider => "provider",
            ErrorKind::Verify => "verify",
            ErrorKind::Prerequisite => "prerequisite",
            ErrorKind::Stopped => "stopped",
            ErrorKind::Drifted => "drifted",
            ErrorKind::Interrupted => "interrupted",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskError {
    pub kind: ErrorKind,
    pub message: String,
}

/// One change to one resource.
#[derive(Debug, Clone)]
pub struct Task {
    /// The catalog item it changes.
    pub item: usize,
    pub action: Action,
    /// Planned: from the current state to the manifest. After a run: what
    /// the provider reported.
    pub changes: Vec<Change>,
    /// The tasks it waits for, by their index in the plan (always before
    /// its own).
    pub requires: Vec<usize>,
    pub state: TaskState,
    pub error: Option<TaskError>,
    /// How long it ran.
    pub seconds: f64,
    /// What the update is to do; `None` when the read failed, and in a
    /// plan made to be shown only ([`Keep::Changes`]). Boxed: a task
    /// without one is the smaller.
    pub transition: Option<Box<update::Transition>>,
    /// Why the current state is not known yet: its read failed while it
    /// waited for pending changes. It is read again before it runs.
    pub deferred: Option<String>,
    /// The store says ral applied the resource as the manifest says: the
    /// system changed since.
    pub drifted: bool,
    /// For a saved plan: the state it was planned from, which the state
    /// read just before the task runs must still match.
    /// Boxed: only a saved plan's tasks have one.
    pub planned_from: Option<Box<super::planned::Planned>>,
    /// For a refresh: the tasks whose change calls for it (each also in
    /// `requires`).
    pub refresh_on: Vec<usize>,
    /// How a task ended that needs a word though it is no error: a
    /// refresh found not needed.
    pub note: Option<String>,
    /// For a refresh: an earlier run owes it (one was called for and did
    /// not succeed), so it runs whatever changes in this one.
    pub owed: bool,
}

impl Task {
    /// A task of `item` not yet run: no changes, error, transition,
    /// deferral or drift; callers set what they know.
    pub fn pending(item: usize, action: Action, requires: Vec<usize>) -> Task {
        Task {
            item,
            action,
            changes: Vec::new(),
            requires,
            state: TaskState::Initial,
            error: None,
            seconds: 0.0,
            transition: None,
            deferred: None,
            drifted: false,
            planned_from: None,
            refresh_on: Vec::new(),
            note: None,
            owed: false,
        }
    }
}

/// The tasks for a catalog.
#[derive(Debug, Clone)]
pub struct Plan {
    pub id: String,
    pub state: PlanState,
    pub tasks: Vec<Task>,
    /// Resources already as the manifest says.
    pub unchanged: usize,
}

impl Plan {
    /// The id a task at `index` is shown and recorded by: 1-based, in the
    /// order the tasks may run.
    pub fn task_id(index: usize) -> usize {
        index + 1
    }

    /// How many tasks have `action`.
    pub fn count(&self, action: Action) -> usize {
        self.tasks.iter().filter(|t| t.action == action).count()
    }

    /// How many tasks are in `state`.
    pub fn count_state(&self, state: TaskState) -> usize {
        self.tasks.iter().filter(|t| t.state == state).count()
    }

    /// Whether any task has something to change (failed reads aside).
    pub fn has_changes(&self) -> bool {
        self.tasks
            .iter()
            .any(|t| t.action != Action::Unknown || t.deferred.is_some())
    }
}

/// Plans the catalog from the current state: one read per provider (at
/// most `jobs` at once), then a transition per resource. Transitions that
/// cannot be (a required attribute missing on creation, an init-only
/// attribute changed, a provider that cannot change resources) are
/// problems of the manifest, all reported together.
pub fn plan(host: &Host, catalog: &Catalog, jobs: usize) -> Result<Plan, Error> {
    plan_with_id(host, catalog, jobs, new_id())
}

/// [`plan`] with the id given (one [`new_id`] made).
pub fn plan_with_id(
    host: &Host,
    catalog: &Catalog,
    jobs: usize,
    id: String,
) -> Result<Plan, Error> {
    let found = read_states(host, catalog, jobs);
    plan_from(catalog, found, id)
}

/// What a plan's tasks keep of what they were planned from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keep {
    /// Their transitions, which applying or saving the plan needs.
    Transitions,
    /// Their changes only, for a plan that is only shown: each task's
    /// state read and values to set (which its changes hold again) go
    /// once its changes are worked out, so that a plan of many resources
    /// does not hold them twice. Its tasks have no transition.
    Changes,
}

/// Marks the tasks of items the store says were applied as the manifest
/// says: the system drifted from what ral applied.
pub fn mark_drifted(catalog: &Catalog, plan: &mut Plan, applied: &Remembered) {
    // A refresh is planned for a change elsewhere, never for drift.
    for task in plan
        .tasks
        .iter_mut()
        .filter(|t| t.action != Action::Refresh)
    {
        if let Some(drifted) = applied.drifted(&catalog.items[task.item]) {
            task.drifted = drifted;
        }
    }
}

/// The plan for the states `found` (one per catalog item), which move
/// into its tasks: what [`plan_with_id`] makes of what it reads.
pub fn plan_from(catalog: &Catalog, found: Vec<Observed>, id: String) -> Result<Plan, Error> {
    plan_keeping(catalog, found, id, Keep::Transitions, None)
}

/// [`plan_from`], its tasks keeping what `keep` says; with `applied`
/// (what the state store says ral last applied), a resource whose only
/// difference is write-only parameters ral already applied so is
/// unchanged.
pub fn plan_keeping(
    catalog: &Catalog,
    mut found: Vec<Observed>,
    id: String,
    keep: Keep,
    applied: Option<&Remembered>,
) -> Result<Plan, Error> {
    let mut planning = Planning::new(catalog, keep, applied);
    for &at in &catalog.order {
        let observed = std::mem::replace(&mut found[at], Observed::NotFound);
        // Too many waits refuse the plan at once, before another list is
        // made.
        if let Err(problem) = planning.add(at, observed) {
            let mut problems = planning.problems;
            problems.push(problem);
            return Err(Error::Manifest { problems });
        }
    }
    planning.finish(id)
}

/// A plan being made, item by item in the catalog's order.
struct Planning<'a, 'r> {
    catalog: &'a Catalog<'r>,
    keep: Keep,
    applied: Option<&'a Remembered<'a>>,
    problems: Vec<Problem>,
    /// At most one task per item, but for refreshes: sized once, a plan
    /// of many resources is not copied as it grows.
    tasks: Vec<Task>,
    /// The task of each item, if it has one.
    task_of: Vec<Option<usize>>,
    /// The tasks each item waits for, through items without a task.
    waits: Vec<Vec<usize>>,
    /// The tasks that change each item: its own, or a plugin item's; kept
    /// only when an item subscribes to another (a plan of many resources
    /// has no room to spare for each).
    changed_by: Vec<Vec<usize>>,
    unchanged: usize,
    /// The item whose task list last took each task: an item waiting
    /// through many items without a task meets the same tasks many times,
    /// and a list sorted and deduplicated after the fact would be as long
    /// as all of theirs together.
    taken_by: Vec<usize>,
    gained: Gained,
}

impl<'a, 'r> Planning<'a, 'r> {
    fn new(catalog: &'a Catalog<'r>, keep: Keep, applied: Option<&'a Remembered<'a>>) -> Self {
        let refreshes = catalog.items.iter().any(|item| !item.subscribes.is_empty());
        Planning {
            catalog,
            keep,
            applied,
            problems: Vec::new(),
            tasks: Vec::with_capacity(catalog.order.len()),
            task_of: vec![None; catalog.items.len()],
            waits: vec![Vec::new(); catalog.items.len()],
            changed_by: match refreshes {
                true => vec![Vec::new(); catalog.items.len()],
                false => Vec::new(),
            },
            unchanged: 0,
            taken_by: Vec::new(),
            gained: Gained::default(),
        }
    }

    /// Plans the item at `at`, whose state is `observed`: its task, if it
    /// has one, and its refresh. The error is the problem of too many
    /// waits, which refuses the plan.
    fn add(&mut self, at: usize, observed: Observed) -> Result<(), Problem> {
        let item = &self.catalog.items[at];
        let requires = self.requires_of(at)?;
        match item.role {
            // A plugin item stands for its tasks: what requires it waits
            // for them.
            Role::Model => {
                self.waits[at] = requires;
                return Ok(());
            }
            Role::Action => {
                self.push(at, Task::pending(at, Action::Run, requires));
                return Ok(());
            }
            Role::Resource => {}
        }
        let task = self.resource_task(at, observed, &requires);
        match task.or_else(|| guards_later(item, at, &requires)) {
            Some(task) => self.push(at, task),
            None => {
                self.unchanged += 1;
                self.waits[at] = requires.clone();
            }
        }
        self.add_refresh(at, requires)
    }

    /// The tasks the item at `at` waits for, sorted, each once: the tasks
    /// of the items it requires, or what an item without a task waits
    /// for.
    fn requires_of(&mut self, at: usize) -> Result<Vec<usize>, Problem> {
        let item = &self.catalog.items[at];
        let mut requires: Vec<usize> = Vec::new();
        self.taken_by.resize(self.tasks.len(), usize::MAX);
        for &before in &item.requires {
            let through: &[usize] = match &self.task_of[before] {
                Some(id) => std::slice::from_ref(id),
                None => &self.waits[before],
            };
            for &id in through {
                if self.taken_by[id] != at {
                    self.taken_by[id] = at;
                    requires.push(id);
                }
            }
        }
        requires.sort_unstable();
        let (catalog, task_of, waits) = (self.catalog, &self.task_of, &self.waits);
        self.gained.add(requires.len(), item.requires.len(), || {
            too_many_waits(catalog, at, requires.len(), &item.requires, task_of, waits)
        })?;
        Ok(requires)
    }

    /// The task of the resource at `at` for its state `observed`; `None`
    /// when it is as the manifest says.
    fn resource_task(&mut self, at: usize, observed: Observed, requires: &[usize]) -> Option<Task> {
        let item = &self.catalog.items[at];
        match observed {
            // A resource waiting for pending changes may not be readable
            // until they are made (a user's keys before the user exists):
            // what is to be done is not known until it is read again,
            // before it runs.
            Observed::Unreadable(message) if !requires.is_empty() => {
                let mut task = deferred_task(at, item, requires.to_vec());
                task.deferred = Some(message);
                Some(task)
            }
            Observed::Unreadable(message) => Some(Task {
                state: TaskState::Failed,
                error: Some(TaskError {
                    kind: ErrorKind::Read,
                    message,
                }),
                ..Task::pending(at, Action::Unknown, requires.to_vec())
            }),
            current => self.change_task(at, current, requires),
        }
    }

    /// The task that takes the readable resource at `at` from `current`
    /// to what the manifest says; `None` when nothing differs (or only
    /// what ral already applied), or when the manifest asks for what the
    /// provider refuses, a problem then.
    fn change_task(&mut self, at: usize, current: Observed, requires: &[usize]) -> Option<Task> {
        let item = &self.catalog.items[at];
        let provider = item.provider;
        let transition =
            match update::Transition::new(provider, &item.request, current.into_resource()) {
                Ok(transition) => transition,
                Err(e) => {
                    self.problems.push(item.origin.problem(format!(
                        "{}: {}",
                        item.reference(),
                        unprefixed(&e, provider)
                    )));
                    return None;
                }
            };
        if transition.should.is_empty()
            || self
                .applied
                .is_some_and(|a| a.settles(provider, &transition))
        {
            return None;
        }
        if !provider.meta.supports(provider.meta.update_action()) {
            self.problems.push(item.origin.problem(format!(
                "{}: {} cannot change resources (it has no {} action)",
                item.reference(),
                provider.qualified_name(),
                provider.meta.update_action().as_str()
            )));
        }
        let mut task = planned_task(provider, at, requires.to_vec(), transition, self.keep);
        if let (Some(applied), Action::Change) = (self.applied, task.action) {
            applied.hide_applied_parameters(provider, item.name(), &mut task.changes);
        }
        Some(task)
    }

    /// Makes `task` the task of the item at `at`.
    fn push(&mut self, at: usize, task: Task) {
        let tie = self.catalog.items[at].tie;
        self.task_of[at] = Some(self.tasks.len());
        note_change(&mut self.changed_by, at, tie, self.tasks.len());
        self.tasks.push(task);
    }

    /// Adds the refresh of the item at `at` (which waits for the tasks
    /// `requires`), after its own task, before what waits for it, when
    /// something it subscribes to may change in this run or an earlier
    /// run owes it one.
    fn add_refresh(&mut self, at: usize, requires: Vec<usize>) -> Result<(), Problem> {
        let item = &self.catalog.items[at];
        let provider = item.provider;
        // Not when its own task creates, removes, starts or stops it (sets
        // its ensure), which a refresh would only repeat; nor when it is a
        // command its own task runs: it runs once.
        let sets_ensure = self.task_of[at].is_some_and(|own| {
            let own = &self.tasks[own];
            matches!(own.action, Action::Create | Action::Remove)
                || own.changes.iter().any(|c| c.attr == "ensure")
                || provider.meta.runs_commands
        });
        let mut sources: Vec<usize> = item
            .subscribes
            .iter()
            .flat_map(|&source| self.changed_by[source].iter().copied())
            .collect();
        // A refresh an earlier run owes runs whatever changes now.
        let owed = self
            .applied
            .is_some_and(|a| a.owes_refresh(provider, item.name()))
            && provider.meta.supports(crate::metadata::Action::Refresh);
        if (sources.is_empty() && !owed) || sets_ensure {
            return Ok(());
        }
        sources.sort_unstable();
        sources.dedup();
        let (catalog, task_of, changed_by) = (self.catalog, &self.task_of, &self.changed_by);
        self.gained.add(sources.len(), item.subscribes.len(), || {
            too_many_waits(
                catalog,
                at,
                sources.len(),
                &item.subscribes,
                task_of,
                changed_by,
            )
        })?;
        let mut after = requires;
        after.extend(self.task_of[at]);
        after.extend(sources.iter().copied());
        after.sort_unstable();
        after.dedup();
        self.task_of[at] = Some(self.tasks.len());
        self.tasks.push(Task {
            refresh_on: sources,
            owed,
            ..Task::pending(at, Action::Refresh, after)
        });
        Ok(())
    }

    /// The plan made, unless some item has a problem.
    fn finish(mut self, id: String) -> Result<Plan, Error> {
        self.problems
            .extend(tangles_to_create(self.catalog, &self.tasks));
        if !self.problems.is_empty() {
            return Err(Error::Manifest {
                problems: self.problems,
            });
        }
        Ok(Plan {
            id,
            state: PlanState::Initial,
            tasks: self.tasks,
            unchanged: self.unchanged,
        })
    }
}

/// The task of a command with nothing to do that waits for other tasks
/// (`requires`): it may have something once they are done (an onlyif
/// testing a file made before it), so its guards are read again then, as
/// Puppet checks them at its turn.
fn guards_later(item: &Item, at: usize, requires: &[usize]) -> Option<Task> {
    if !item.provider.meta.runs_commands
        || requires.is_empty()
        || runs_on_refresh_only(&item.request)
    {
        return None;
    }
    let mut task = deferred_task(at, item, requires.to_vec());
    task.deferred = Some(GUARDS_LATER.to_owned());
    Some(task)
}

/// The cycles of the pairs of items the metadata orders both ways
/// ([`Catalog::tangled`]) that the plan would create both of: neither
/// can be made before the other, so the plan is refused before anything
/// runs. Where either exists, the other's need of it is met.
fn tangles_to_create(catalog: &Catalog, tasks: &[Task]) -> Vec<Problem> {
    if catalog.tangled.is_empty() {
        return Vec::new();
    }
    let mut creates = vec![false; catalog.items.len()];
    for task in tasks.iter().filter(|task| task.action == Action::Create) {
        creates[task.item] = true;
    }
    (catalog.tangled.iter())
        .filter(|&&(one, other)| creates[one] && creates[other])
        .map(|&(one, other)| super::catalog::cycle_problem(&catalog.items, &[one, other]))
        .collect()
}

/// Why an exec waiting for other tasks is read again before its turn.
pub const GUARDS_LATER: &str = "its guards are checked again once the tasks it waits for are \
     done; now they say there is nothing to run";

/// Whether a command runs only on a refresh (an exec's `refreshonly`),
/// which no guard read again could change.
fn runs_on_refresh_only(request: &update::Request) -> bool {
    (request.attrs.iter())
        .any(|(key, value)| key == "refreshonly" && *value == crate::types::Value::Bool(true))
}

/// The most waits a plan may gain beyond the requirements written: a
/// requirement on a plugin item waits for every task of that item, and
/// one on an item with nothing to do for every task that item waits for,
/// so that a few requirements could make a plan of billions of waits
/// (each task of one plugin item requiring another item of as many
/// tasks). As many as an answer may hold requirements: a plan of that
/// many waits is made, shown and run in about a second.
pub const MAX_GAINED_WAITS: usize = crate::plugin::task::MAX_REQUIREMENTS;

/// The waits a plan gained so far beyond the requirements written.
#[derive(Default)]
struct Gained {
    count: usize,
}

impl Gained {
    /// Counts an item's `waits` for its `written` requirements (or
    /// subscriptions); past [`MAX_GAINED_WAITS`], the `problem` (worked
    /// out only then) that refuses the plan before another list is made.
    fn add(
        &mut self,
        waits: usize,
        written: usize,
        problem: impl FnOnce() -> Problem,
    ) -> Result<(), Problem> {
        self.count += waits.saturating_sub(written);
        match self.count > MAX_GAINED_WAITS {
            true => Err(problem()),
            false => Ok(()),
        }
    }
}

/// The problem of the item at `at`, whose `waits` for the items it
/// `named` (requires, or subscribes to) took the plan past
/// [`MAX_GAINED_WAITS`]: the named item without a task that stands for
/// the most (`through`: the tasks each item stands for) is named with
/// their count.
fn too_many_waits(
    catalog: &Catalog,
    at: usize,
    waits: usize,
    named: &[usize],
    task_of: &[Option<usize>],
    through: &[Vec<usize>],
) -> Problem {
    let item = &catalog.items[at];
    let widest = named
        .iter()
        .filter(|&&other| task_of[other].is_none())
        .map(|&other| (other, through[other].len()))
        .max_by_key(|&(_, count)| count);
    let how = match widest {
        Some((other, count)) => format!(
            ", {} standing for {count} of them",
            catalog.items[other].reference()
        ),
        None => String::new(),
    };
    let task = (item.from_plugin.as_deref())
        .and_then(FromPlugin::described)
        .unwrap_or_default();
    item.origin.problem(format!(
        "{}{task}: waits for {waits} tasks{how}; the plan would wait for more than \
         {MAX_GAINED_WAITS} tasks beyond the requirements written: a requirement on a plugin \
         item waits for every task of that item, and one on an item with nothing to do for \
         every task that item waits for; require one task that comes after the others (the \
         last of an ordered list) instead",
        item.reference()
    ))
}

/// Notes that `task` changes the item at `at`, and the plugin item `tie`
/// it settles, where changes are noted (`changed_by` is empty when no
/// item subscribes to any).
fn note_change(changed_by: &mut [Vec<usize>], at: usize, tie: Option<usize>, task: usize) {
    if changed_by.is_empty() {
        return;
    }
    changed_by[at].push(task);
    if let Some(model) = tie {
        changed_by[model].push(task);
    }
}

/// A request error's message without the provider name the catalog's
/// reference already gives.
fn unprefixed(error: &Error, provider: &Provider) -> String {
    let text = error.to_string();
    let prefix = format!("{}: ", provider.qualified_name());
    text.strip_prefix(&prefix)
        .map(str::to_owned)
        .unwrap_or(text)
}

/// What a transition does to its resource.
pub fn action_of(provider: &Provider, transition: &update::Transition) -> Action {
    match transition.effect(provider) {
        update::Effect::Create => Action::Create,
        update::Effect::Change => Action::Change,
        update::Effect::Remove => Action::Remove,
    }
}

/// The task of a resource that could not be read yet: it does whatever
/// its state, read again before it runs, calls for.
fn deferred_task(at: usize, item: &Item, requires: Vec<usize>) -> Task {
    let placeholder = update::Transition {
        name: item.name().to_owned(),
        found: false,
        state: crate::resource::Resource::bare(item.name()),
        should: Vec::new(),
    };
    Task {
        transition: Some(Box::new(placeholder)),
        ..Task::pending(at, Action::Unknown, requires)
    }
}

fn planned_task(
    provider: &Provider,
    item: usize,
    requires: Vec<usize>,
    transition: update::Transition,
    keep: Keep,
) -> Task {
    let action = action_of(provider, &transition);
    Task {
        changes: transition.changes(provider),
        transition: (keep == Keep::Transitions).then(|| Box::new(transition)),
        ..Task::pending(item, action, requires)
    }
}

/// The current state of every item, read per provider.
pub fn read_states(host: &Host, catalog: &Catalog, jobs: usize) -> Vec<Observed> {
    // Only resources are read: plugin items and their callbacks have no
    // state of their own.
    let resources = (0..catalog.items.len())
        .filter(|&at| catalog.items[at].role == Role::Resource)
        .collect();
    let (groups, members) = by_provider(catalog, resources);
    // Commands' checks need what the manifest says of them.
    let should: Vec<Vec<&[(String, crate::types::Value)]>> = (groups.iter().zip(&members))
        .map(|((provider, _), items)| {
            update::told(provider, items.iter().map(|&at| &catalog.items[at].request))
        })
        .collect();
    let answers = read_all_told(host, &groups, &should, jobs);
    let mut found: Vec<Observed> = vec![Observed::NotFound; catalog.items.len()];
    for (answer, items) in answers.into_iter().zip(members) {
        for (one, at) in answer.into_iter().zip(items) {
            found[at] = one;
        }
    }
    found
}

/// The items given, grouped by provider in order of first appearance:
/// each provider with its items' names, and the item indices.
pub(super) fn by_provider<'c>(
    catalog: &'c Catalog,
    items: Vec<usize>,
) -> (Vec<Group<'c>>, Vec<Vec<usize>>) {
    let providers = items.iter().map(|&at| catalog.items[at].provider);
    let (slot_of, count) = Schedule::index_providers(providers.map(Provider::qualified_name));
    let mut groups: Vec<Group> = Vec::with_capacity(count);
    let mut members: Vec<Vec<usize>> = vec![Vec::new(); count];
    for (at, slot) in items.into_iter().zip(slot_of) {
        let item = &catalog.items[at];
        if slot == groups.len() {
            groups.push((item.provider, Vec::new()));
        }
        groups[slot].1.push(item.name());
        members[slot].push(at);
    }
    (groups, members)
}

/// A plan id: the time and this process, unique on the machine.
pub fn new_id() -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    format!(
        "{}-{:06}-{}",
        now.as_secs(),
        now.subsec_micros(),
        std::process::id()
    )
}
