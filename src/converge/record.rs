//! Recording a run in the state store: the items' states before the tasks
//! run, each task's intent committed before its provider is called (see
//! `ownership`), each task's end (with what it did to its item, clearing
//! the intent) committed before any task that waits for it starts, and the
//! plan's end with its report.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::{Map, Value as Json};

use crate::error::{Error, Result};
use crate::store::{
    Intent, IntentAction, ItemChange, ItemState, OwedRefresh, PlanRecord, Store, StoreKey,
    StoredItem, TaskEnd,
};

use super::apply::{Calling, Events};
use super::catalog::{Catalog, Role};
use super::expand::{is_removed_model, Yields};
use super::lifecycle;
use super::ownership;
use super::plan::{Action, Plan, TaskState};
use super::report::Report;

/// What a task's end does to its item, held until it is recorded.
enum Outcome {
    Keep,
    /// The task failed: its intent is marked so.
    Failed,
    Applied(StoredItem),
    Removed,
}

/// A report as the store keeps it: JSON, which serialising a report of
/// strings, numbers and JSON values cannot fail to make.
pub(super) fn report_text(report: &Report) -> String {
    serde_json::to_string(report).unwrap_or_default()
}

/// The store's view of one run.
pub struct Recorder<'s, 'c, 'r> {
    store: &'s mut Store,
    catalog: &'c Catalog<'r>,
    key: StoreKey,
    /// What the store held before the run, by (provider, name).
    stored: HashMap<(String, String), StoredItem>,
    /// How many catalog items came from the manifest (the rest are
    /// removals of stored items).
    declared: usize,
    /// The first store error; the run stops at it.
    pub failure: Option<Error>,
    /// Catalog items whose config tasks replace stored resources, and
    /// those resources (provider, name).
    pub replacements: Vec<(usize, Vec<(String, String)>)>,
    /// Who started the run, when not a person (see [`super::run::Options`]).
    pub origin: Option<String>,
}

impl<'s, 'c, 'r> Recorder<'s, 'c, 'r> {
    /// `declared`: how many of the catalog's items the manifests declared.
    pub fn new(
        store: &'s mut Store,
        catalog: &'c Catalog<'r>,
        stored: &[StoredItem],
        declared: usize,
    ) -> Result<Recorder<'s, 'c, 'r>> {
        let key = store.key()?;
        Ok(Recorder {
            store,
            catalog,
            key,
            stored: stored
                .iter()
                .map(|item| ((item.provider.clone(), item.name.clone()), item.clone()))
                .collect(),
            declared,
            failure: None,
            replacements: Vec::new(),
            origin: None,
        })
    }

    fn key(&self, item: usize) -> (String, String) {
        let item = &self.catalog.items[item];
        (item.provider.qualified_name(), item.name().to_owned())
    }

    /// The properties kept for a declared item.
    fn properties(&self, item: usize) -> Map<String, Json> {
        let item = &self.catalog.items[item];
        lifecycle::properties(item.provider, &item.request, &self.key)
    }

    /// The vpath of the plugin item whose task catalog item `at` is.
    fn owner_of(&self, at: usize) -> Option<String> {
        let model = &self.catalog.items[self.catalog.items[at].tie?];
        Some(crate::plugin::model::vpath(
            model.provider.type_name(),
            model.name(),
        ))
    }

    /// The stored item for catalog item `at` in `state`.
    fn stored_item(&self, at: usize, state: ItemState, created: bool) -> StoredItem {
        let item = &self.catalog.items[at];
        let before = self.stored.get(&self.key(at));
        StoredItem {
            provider: item.provider.qualified_name(),
            type_name: item.provider.type_name().to_owned(),
            name: item.name().to_owned(),
            state,
            properties: self.properties(at),
            // A plugin item is the model's own: ral made it.
            created: created || before.is_some_and(|b| b.created) || item.role == Role::Model,
            requires: item
                .requires
                .iter()
                .filter(|&&r| self.catalog.items[r].role == Role::Resource)
                .map(|&r| self.key(r))
                .collect(),
            // Every item that yields it: those it had, and the one whose
            // task it is now (only a settled answer lets one go: `finish`).
            owners: {
                let mut owners = before.map(|b| b.owners.clone()).unwrap_or_default();
                if let Some(tie) = self.owner_of(at) {
                    if !owners.contains(&tie) {
                        owners.push(tie);
                        owners.sort();
                    }
                }
                owners
            },
            undetermined: false,
        }
    }

    /// Records the plan as it starts: its tasks, and the items' states
    /// before any runs (new ones Initial, changed ones Updated, removals
    /// ForRemoval).
    /// `report` is the plan's document as planned.
    pub fn begin(&mut self, plan: &Plan, manifest_digest: &str, report: &Report) -> Result<()> {
        let mut items = Vec::new();
        for at in 0..self.catalog.items.len() {
            // A plugin's callback or command owns nothing to record.
            if self.catalog.items[at].role == Role::Action {
                continue;
            }
            let key = self.key(at);
            let before = self.stored.get(&key);
            let state = if at >= self.declared || is_removed_model(&self.catalog.items[at]) {
                ItemState::ForRemoval
            } else {
                lifecycle::state_before(before, &self.properties(at))
            };
            if before.map(|b| b.state) != Some(state) || before.is_none() {
                let mut item = self.stored_item(at, state, false);
                if let Some(before) = before.filter(|_| state != ItemState::Initial) {
                    // Until it is applied again, it keeps what was applied.
                    item.properties = before.properties.clone();
                    item.requires = before.requires.clone();
                }
                items.push(item);
            }
        }
        if !items.is_empty() {
            self.store.put_items(&items)?;
        }
        let tasks: Vec<(usize, String, String, String)> = plan
            .tasks
            .iter()
            .enumerate()
            .map(|(at, task)| {
                let item = &self.catalog.items[task.item];
                let resource = match item.role {
                    Role::Action => item.reference(),
                    _ => format!("{}[{}]", item.type_query, item.name()),
                };
                (
                    Plan::task_id(at),
                    resource,
                    item.provider.qualified_name(),
                    task.action.as_str().to_owned(),
                )
            })
            .collect();
        let now = crate::store::now();
        self.store.begin_plan(
            &PlanRecord {
                id: plan.id.clone(),
                manifest_digest: manifest_digest.to_owned(),
                state: "Running".to_owned(),
                created: now,
                started: Some(now),
                ended: None,
                report: Some(report_text(report)),
                origin: self.origin.clone(),
            },
            &tasks,
        )
    }

    /// Settles the intents of tasks that failed to create their
    /// resource, from whether it exists when read right after the
    /// failure (see `ownership`): found made, it is ral's (the failed
    /// provider's doing); not found, nothing was made. One that could not
    /// be read keeps its failed intent, which no later run takes as a
    /// creation.
    fn settle_failures(&mut self, plan: &Plan, read: &[(usize, Option<bool>)]) -> Result<()> {
        let mut created = Vec::new();
        let mut settled = Vec::new();
        for &(task, exists) in read {
            let Some(exists) = exists else {
                continue;
            };
            let key = self.key(plan.tasks[task].item);
            if exists {
                created.push(key.clone());
            }
            settled.push(key);
        }
        if settled.is_empty() {
            return Ok(());
        }
        self.store.settle_failures(&created, &settled)
    }

    /// Records the end: items without a task are Applied as the manifest
    /// says (the system already was), and the plan's state and report.
    pub fn finish(&mut self, plan: &Plan, report: &Report) -> Result<()> {
        if self.failure.is_none() && plan.state != super::plan::PlanState::Stopped {
            self.settle_items(plan)?;
        }
        self.store
            .end_plan(&plan.id, plan.state.as_str(), &report_text(report))
    }

    /// What a run that went to its end settles in the store besides its
    /// tasks' own items: items as declared, plugin items whose tasks did
    /// not all succeed, removals, what plugin items let go of, resources
    /// taken over and refreshes no run would pay.
    fn settle_items(&mut self, plan: &Plan) -> Result<()> {
        // A refresh is no change of its item's: an item refreshed only
        // is as declared.
        let with_task: HashSet<usize> = plan
            .tasks
            .iter()
            .filter(|t| t.action != Action::Refresh)
            .map(|t| t.item)
            .collect();
        // A plugin item is applied (or, for removal, gone) once every
        // task tied to it succeeded; otherwise it stays as it was.
        // Found once: asked for each item, a scan of the tasks would
        // cost items times tasks.
        let unsettled: HashSet<usize> = (plan.tasks.iter())
            .filter(|t| t.state != TaskState::Success)
            .filter_map(|t| self.catalog.items[t.item].tie)
            .collect();
        let settled = |at: usize| !unsettled.contains(&at);
        self.put_as_declared(&with_task, &settled)?;
        self.put_undetermined(plan, &settled)?;
        self.forget_gone(&with_task, &settled)?;
        self.forget_taken_over(plan)?;
        self.forget_owed_refreshes()
    }

    /// Records Applied the declared items without a task (but those
    /// `with_task`) that are not yet as the manifest says: resources, and
    /// plugin items that `settled`.
    fn put_as_declared(
        &mut self,
        with_task: &HashSet<usize>,
        settled: &dyn Fn(usize) -> bool,
    ) -> Result<()> {
        let items: Vec<StoredItem> = (0..self.declared)
            .filter(|at| !with_task.contains(at))
            .filter(|&at| match self.catalog.items[at].role {
                Role::Resource => true,
                Role::Model => !is_removed_model(&self.catalog.items[at]) && settled(at),
                Role::Action => false,
            })
            .filter(|&at| {
                let before = self.stored.get(&self.key(at));
                // A resource already as a plugin's task wants it is
                // that item's too from now on.
                let newly_owned = self
                    .owner_of(at)
                    .is_some_and(|owner| before.is_none_or(|b| !b.owners.contains(&owner)));
                newly_owned
                    || lifecycle::state_before(before, &self.properties(at)) != ItemState::Applied
            })
            .map(|at| self.stored_item(at, ItemState::Applied, false))
            .collect();
        if !items.is_empty() {
            self.store.put_items(&items)?;
        }
        Ok(())
    }

    /// Marks undetermined each plugin item some of whose tasks ran and
    /// not all succeeded (it has not `settled`): what is applied cannot
    /// be told any more (a config task may have changed its resource
    /// before a check failed), so it needs work again even if the
    /// manifests go back to what was applied before.
    fn put_undetermined(&mut self, plan: &Plan, settled: &dyn Fn(usize) -> bool) -> Result<()> {
        let undetermined: Vec<StoredItem> = (0..self.declared)
            .filter(|&at| {
                let item = &self.catalog.items[at];
                let tied = || {
                    plan.tasks
                        .iter()
                        .filter(|t| self.catalog.items[t.item].tie == Some(at))
                };
                item.role == Role::Model
                    && !is_removed_model(item)
                    && !settled(at)
                    && tied().any(|t| matches!(t.state, TaskState::Success | TaskState::Failed))
            })
            .filter_map(|at| {
                let mut item = self.stored.get(&self.key(at))?.clone();
                item.undetermined = true;
                if item.state == ItemState::Applied {
                    item.state = ItemState::Updated;
                }
                Some(item)
            })
            .collect();
        if !undetermined.is_empty() {
            self.store.put_items(&undetermined)?;
        }
        Ok(())
    }

    /// Forgets the items gone (removals with nothing to do, plugin items
    /// removed that `settled` and the resources only they yielded), and
    /// lets the plugin items that settled go of what they no longer
    /// yield.
    fn forget_gone(
        &mut self,
        with_task: &HashSet<usize>,
        settled: &dyn Fn(usize) -> bool,
    ) -> Result<()> {
        let releasing = self.releasing(settled);
        let lets_go = |owner: &str, provider: &str, name: &str| {
            releasing
                .get(owner)
                .is_some_and(|named| !named.contains(&(provider.to_owned(), name.to_owned())))
        };
        // Whether a resource some item still yields.
        let kept = |at: usize| {
            let key = self.key(at);
            let owners = self.stored.get(&key).map(|s| s.owners.as_slice());
            owners.unwrap_or_default().iter().any(|owner| {
                Some(owner) != self.owner_of(at).as_ref() && !lets_go(owner, &key.0, &key.1)
            })
        };
        // Removals with nothing to do: the resource is gone already (a
        // run that removed it was cut short before recording it).
        let gone: Vec<(String, String)> = (self.declared..self.catalog.items.len())
            .filter(|at| !with_task.contains(at))
            // A plugin item removed leaves the store with the
            // resources its removal tasks settled, but for those
            // another item still yields.
            .chain((0..self.declared).filter(|&at| {
                let item = &self.catalog.items[at];
                let removed = |at: usize| is_removed_model(&self.catalog.items[at]) && settled(at);
                match (item.role, item.tie) {
                    (Role::Model, _) => removed(at),
                    (Role::Resource, Some(tie)) => removed(tie) && !kept(at),
                    _ => false,
                }
            }))
            .map(|at| self.key(at))
            .collect();
        if !gone.is_empty() || !releasing.is_empty() {
            self.store.forget_and_release(&gone, lets_go)?;
        }
        Ok(())
    }

    /// Forgets the resources taken over by a task that succeeded (or had
    /// nothing to do): they are no longer ral's to remove; one whose task
    /// did not succeed stays as it was, still ral's.
    fn forget_taken_over(&mut self, plan: &Plan) -> Result<()> {
        let taken_over: Vec<(String, String)> = self
            .replacements
            .iter()
            .filter(|(at, _)| {
                plan.tasks
                    .iter()
                    .filter(|t| t.item == *at)
                    .all(|t| t.state == TaskState::Success)
            })
            .flat_map(|(_, keys)| keys.iter().cloned())
            .filter(|key| self.stored.contains_key(key))
            .collect();
        if !taken_over.is_empty() {
            self.store.forget(&taken_over)?;
        }
        Ok(())
    }

    /// Forgets the refreshes owed to resources that no manifest lists any
    /// more and that left the store (removed or forgotten; one kept by
    /// `--keep-removed` is still owed), or whose provider cannot
    /// refresh: no run would pay them.
    fn forget_owed_refreshes(&mut self) -> Result<()> {
        let owed = self.store.owed_refreshes()?;
        if owed.is_empty() {
            return Ok(());
        }
        let refreshable: HashSet<(String, &str)> = self.catalog.items[..self.declared]
            .iter()
            .filter(|item| {
                item.role == Role::Resource
                    && item
                        .provider
                        .meta
                        .supports(crate::metadata::Action::Refresh)
            })
            .map(|item| (item.provider.qualified_name(), item.name()))
            .collect();
        let unlisted: Vec<(String, String)> = owed
            .into_iter()
            .filter(|o| !refreshable.contains(&(o.provider.clone(), o.name.as_str())))
            .map(|o| (o.provider, o.name))
            .collect();
        if unlisted.is_empty() {
            return Ok(());
        }
        let kept: HashSet<(String, String)> = self
            .store
            .items()?
            .into_iter()
            .map(|item| (item.provider, item.name))
            .collect();
        let orphaned: Vec<(String, String)> = unlisted
            .into_iter()
            .filter(|key| !kept.contains(key))
            .collect();
        self.store.forget_refreshes(&orphaned)
    }

    /// What the plugin items that `settled` let go of, by vpath, each
    /// with the resources it keeps: one removed lets go of all it
    /// yielded, one applied with a new answer of all that answer does
    /// not name. An item that did not settle keeps all it had.
    fn releasing(
        &self,
        settled: &dyn Fn(usize) -> bool,
    ) -> HashMap<String, HashSet<(String, String)>> {
        let yields = Yields::of(self.catalog);
        let mut releasing: HashMap<String, HashSet<(String, String)>> = HashMap::new();
        for at in 0..self.declared {
            let item = &self.catalog.items[at];
            if item.role != Role::Model || !settled(at) {
                continue;
            }
            let path = crate::plugin::model::vpath(item.provider.type_name(), item.name());
            if yields.leaving.contains(&path) || yields.answering.contains(&path) {
                releasing.insert(path, HashSet::new());
            }
        }
        for at in 0..self.declared {
            let named = (self.owner_of(at))
                .filter(|owner| yields.answering.contains(owner))
                .and_then(|owner| releasing.get_mut(&owner));
            if let Some(named) = named {
                named.insert(self.key(at));
            }
        }
        releasing
    }

    /// What task `at`'s end does to its item.
    fn outcome(&self, plan: &Plan, at: usize) -> Outcome {
        let task = &plan.tasks[at];
        // A refresh changes nothing the store keeps.
        if self.catalog.items[task.item].role == Role::Action || task.action == Action::Refresh {
            return Outcome::Keep;
        }
        match (task.state, task.action) {
            (TaskState::Success, Action::Remove) => Outcome::Removed,
            (TaskState::Success, _) if task.item >= self.declared => Outcome::Removed,
            (TaskState::Success, _) => {
                // What the task did decides, not what was planned: read
                // again just before the call, the resource may have
                // existed by then; and the provider may say it did.
                let provider = self.catalog.items[task.item].provider;
                let created = task
                    .transition
                    .as_deref()
                    .is_some_and(|t| ownership::created_by(provider, t, &task.changes));
                Outcome::Applied(self.stored_item(task.item, ItemState::Applied, created))
            }
            (TaskState::Failed, _) => Outcome::Failed,
            _ => Outcome::Keep,
        }
    }

    /// Whether task `at`, which ended, pays the refresh owed to its item:
    /// a refresh that succeeded, or a task that created, removed, started
    /// or stopped its resource (set its `ensure`), or ran its command (an
    /// exec's), which a refresh would only repeat.
    fn pays_refresh(catalog: &Catalog, plan: &Plan, at: usize) -> bool {
        let task = &plan.tasks[at];
        let runs_commands = catalog.items[task.item].provider.meta.runs_commands;
        task.state == TaskState::Success
            && (matches!(
                task.action,
                Action::Refresh | Action::Create | Action::Remove
            ) || task.changes.iter().any(|c| c.attr == "ensure")
                || (runs_commands && task.action == Action::Change))
    }

    /// The refreshes that `tasks`, about to start, may call for: those of
    /// the plan's refresh tasks that wait for a change of theirs.
    fn owed_by(&self, plan: &Plan, tasks: &[usize]) -> Vec<OwedRefresh> {
        let mut owed: Vec<OwedRefresh> = Vec::new();
        for refresh in plan.tasks.iter().filter(|t| t.action == Action::Refresh) {
            if !refresh
                .refresh_on
                .iter()
                .any(|source| tasks.contains(source))
            {
                continue;
            }
            let item = &self.catalog.items[refresh.item];
            let (provider, name) = self.key(refresh.item);
            if owed
                .iter()
                .any(|o| o.provider == provider && o.name == name)
            {
                continue;
            }
            owed.push(OwedRefresh {
                provider,
                name,
                resource: format!("{}[{}]", item.type_query, item.name()),
                plan_id: plan.id.clone(),
            });
        }
        owed
    }

    /// Records the ends of `tasks` (a batch's, or tasks skipped or stopped
    /// together) in one transaction.
    fn record_ends(&mut self, plan: &Plan, tasks: &[usize]) -> Result<()> {
        let owned: Vec<((String, String), Outcome)> = tasks
            .iter()
            .map(|&at| (self.key(plan.tasks[at].item), self.outcome(plan, at)))
            .collect();
        let ends: Vec<TaskEnd> = tasks
            .iter()
            .zip(&owned)
            .map(|(&at, ((provider, name), outcome))| {
                let task = &plan.tasks[at];
                TaskEnd {
                    plan_id: &plan.id,
                    task_id: Plan::task_id(at),
                    state: task.state.as_str(),
                    error: task.error.as_ref().map(
                        |e| serde_json::json!({"kind": e.kind.as_str(), "message": e.message}),
                    ),
                    changes: self.catalog.items[task.item]
                        .provider
                        .changes_json(&task.changes),
                    seconds: task.seconds,
                    item: match outcome {
                        Outcome::Keep => ItemChange::Keep,
                        Outcome::Failed => ItemChange::Failed { provider, name },
                        Outcome::Applied(item) => ItemChange::Applied(item),
                        Outcome::Removed => ItemChange::Removed { provider, name },
                    },
                    refreshed: Self::pays_refresh(self.catalog, plan, at)
                        .then_some((provider.as_str(), name.as_str())),
                }
            })
            .collect();
        self.store.tasks_ended(&ends)
    }

    /// Records the intents of tasks about to call their provider.
    fn record_intents(&mut self, plan: &Plan, calls: &[Calling]) -> Result<()> {
        let intents: Vec<Intent> = calls
            .iter()
            .map(|call| {
                let task = &plan.tasks[call.task];
                let item = &self.catalog.items[task.item];
                Intent {
                    provider: item.provider.qualified_name(),
                    name: item.name().to_owned(),
                    resource: format!("{}[{}]", item.type_query, item.name()),
                    plan_id: plan.id.clone(),
                    task_id: Plan::task_id(call.task),
                    action: match call.action {
                        Action::Create => IntentAction::Create,
                        Action::Remove => IntentAction::Remove,
                        // A plugin's callback or command records no
                        // intent: it owns no resource.
                        Action::Change | Action::Unknown | Action::Run | Action::Refresh => {
                            IntentAction::Change
                        }
                    },
                    existed: call.existed,
                    properties: self.properties(task.item),
                    failed: false,
                }
            })
            .collect();
        self.store.record_intents(&intents)
    }
}

/// Wraps the run's other events with the recording.
pub struct Recording<'a, 's, 'c, 'r> {
    pub recorder: &'a mut Recorder<'s, 'c, 'r>,
    pub inner: &'a mut dyn Events,
    /// Set when the store cannot be written: the run must stop, since what
    /// it does could not be remembered.
    pub failed: &'a AtomicBool,
}

impl Events for Recording<'_, '_, '_, '_> {
    fn plan_state(&mut self, catalog: &Catalog, plan: &Plan) {
        self.inner.plan_state(catalog, plan);
    }

    fn task_started(&mut self, catalog: &Catalog, plan: &Plan, task: usize) {
        self.tasks_started(catalog, plan, &[task]);
    }

    fn task_ended(&mut self, catalog: &Catalog, plan: &Plan, task: usize) {
        self.tasks_ended(catalog, plan, &[task]);
    }

    fn tasks_started(&mut self, catalog: &Catalog, plan: &Plan, tasks: &[usize]) {
        if self.recorder.failure.is_none() {
            let ids: Vec<usize> = tasks.iter().map(|&at| Plan::task_id(at)).collect();
            let owed = self.recorder.owed_by(plan, tasks);
            if let Err(e) = self.recorder.store.tasks_started(&plan.id, &ids, &owed) {
                self.recorder.failure = Some(e);
                self.failed.store(true, Ordering::SeqCst);
            }
        }
        self.inner.tasks_started(catalog, plan, tasks);
    }

    fn tasks_ended(&mut self, catalog: &Catalog, plan: &Plan, tasks: &[usize]) {
        if self.recorder.failure.is_none() {
            if let Err(e) = self.recorder.record_ends(plan, tasks) {
                self.recorder.failure = Some(e);
                self.failed.store(true, Ordering::SeqCst);
            }
        }
        self.inner.tasks_ended(catalog, plan, tasks);
    }

    fn tasks_calling(&mut self, catalog: &Catalog, plan: &Plan, calls: &[Calling]) -> bool {
        if self.recorder.failure.is_none() {
            if let Err(e) = self.recorder.record_intents(plan, calls) {
                self.recorder.failure = Some(e);
                self.failed.store(true, Ordering::SeqCst);
            }
        }
        self.recorder.failure.is_none() && self.inner.tasks_calling(catalog, plan, calls)
    }

    fn forgotten(&mut self, items: &[StoredItem]) {
        self.inner.forgotten(items);
    }

    fn tasks_verified(&mut self, catalog: &Catalog, plan: &Plan, tasks: &[usize]) {
        self.inner.tasks_verified(catalog, plan, tasks);
    }

    fn read_after_failure(
        &mut self,
        catalog: &Catalog,
        plan: &Plan,
        read: &[(usize, Option<bool>)],
    ) {
        if self.recorder.failure.is_none() {
            if let Err(e) = self.recorder.settle_failures(plan, read) {
                self.recorder.failure = Some(e);
                self.failed.store(true, Ordering::SeqCst);
            }
        }
        self.inner.read_after_failure(catalog, plan, read);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::converge::catalog::Item;
    use crate::converge::manifest::Origin;
    use crate::converge::plan::PlanState;
    use crate::provider::Provider;
    use crate::types::Value;
    use crate::update::Request;

    fn provider() -> Provider {
        let yaml = "provider:\n  type: t\n  invoke: json\n  actions: [get, set]\n  suitable: true\n  attributes:\n    name: {}\n    value: {}\n";
        let meta = crate::metadata::Metadata::parse(yaml, std::path::Path::new("t.yaml")).unwrap();
        Provider::new(meta, "t.prov".into(), None)
    }

    /// Item `a` asking for `value`.
    fn request(value: &str) -> Request {
        Request {
            name: "a".to_owned(),
            attrs: vec![("value".to_owned(), Value::from(value))],
        }
    }

    /// A catalog of one item of `p`, declared in m.yaml.
    fn one_item(p: &Provider, request: Request) -> Catalog<'_> {
        Catalog {
            items: vec![Item {
                provider: p,
                role: super::super::catalog::Role::Resource,
                tie: None,
                from_plugin: None,
                type_query: "t".to_owned(),
                origin: Origin {
                    file: std::sync::Arc::from(std::path::Path::new("m.yaml")),
                    line: 1,
                },
                request,
                requires: Vec::new(),
                subscribes: Vec::new(),
            }],
            order: vec![0],
            plugins: None,
            tangled: Vec::new(),
        }
    }

    /// Item `a` as the store keeps it once ral created and applied it.
    fn applied_item(properties: Map<String, Json>) -> StoredItem {
        StoredItem {
            provider: "t::t".to_owned(),
            type_name: "t".to_owned(),
            name: "a".to_owned(),
            state: ItemState::Applied,
            properties,
            created: true,
            requires: Vec::new(),
            owners: Vec::new(),
            undetermined: false,
        }
    }

    #[test]
    fn a_changed_item_keeps_what_was_applied_until_its_task_applies_it() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("state.db")).unwrap();
        let p = provider();
        let key = store.key().unwrap();
        let applied = applied_item(lifecycle::properties(&p, &request("old"), &key));
        store.put_items(std::slice::from_ref(&applied)).unwrap();
        let catalog = one_item(&p, request("new"));
        let plan = Plan {
            id: "p".to_owned(),
            state: PlanState::Running,
            tasks: Vec::new(),
            unchanged: 0,
        };
        let mut recorder =
            Recorder::new(&mut store, &catalog, std::slice::from_ref(&applied), 1).unwrap();
        recorder
            .begin(&plan, "d", &Report::of(&catalog, &plan))
            .unwrap();
        // Updated, with the old properties: a run that stops here leaves
        // no claim that the new ones were applied.
        let updated = StoredItem {
            state: ItemState::Updated,
            ..applied
        };
        assert_eq!(store.items().unwrap(), [updated]);
    }

    #[test]
    fn an_item_already_as_declared_is_recorded_applied_when_the_plan_ends() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("state.db")).unwrap();
        let p = provider();
        let catalog = one_item(&p, request("v"));
        // No task: the resource was read as the manifest says.
        let mut plan = Plan {
            id: "p".to_owned(),
            state: PlanState::Running,
            tasks: Vec::new(),
            unchanged: 1,
        };
        let mut recorder = Recorder::new(&mut store, &catalog, &[], 1).unwrap();
        recorder
            .begin(&plan, "d", &Report::of(&catalog, &plan))
            .unwrap();
        plan.state = PlanState::Successful;
        recorder
            .finish(&plan, &Report::of(&catalog, &plan))
            .unwrap();
        let items = store.items().unwrap();
        let states: Vec<(&str, ItemState, bool)> = items
            .iter()
            .map(|item| (item.name.as_str(), item.state, item.created))
            .collect();
        assert_eq!(states, [("a", ItemState::Applied, false)]);
    }

    #[test]
    fn a_declared_item_whose_removal_succeeded_leaves_the_store() {
        use crate::converge::plan::{Action, Task, TaskState};
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("state.db")).unwrap();
        let p = provider();
        let applied = applied_item(Map::new());
        store.put_items(std::slice::from_ref(&applied)).unwrap();
        // Declared (not one of the store's removals), and removed.
        let catalog = one_item(
            &p,
            Request {
                name: "a".to_owned(),
                attrs: Vec::new(),
            },
        );
        let mut plan = Plan {
            id: "p".to_owned(),
            state: PlanState::Running,
            tasks: vec![Task {
                ..Task::pending(0, Action::Remove, Vec::new())
            }],
            unchanged: 0,
        };
        let mut recorder =
            Recorder::new(&mut store, &catalog, std::slice::from_ref(&applied), 1).unwrap();
        recorder
            .begin(&plan, "d", &Report::of(&catalog, &plan))
            .unwrap();
        plan.tasks[0].state = TaskState::Success;
        recorder.record_ends(&plan, &[0]).unwrap();
        assert!(store.items().unwrap().is_empty());
    }
}
