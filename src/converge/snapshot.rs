//! Snapshot plans (`ral snapshot create|remove|restore NAME`, LITP's
//! `create_snapshot_plan`): every plugin that makes them is given the
//! model as the store holds it (and, to restore, the model recorded when
//! the snapshot was made) with `snapshot: {action, name}`, and its tasks
//! run as one plan under the store's lock. The store records each
//! snapshot: its name, when it was made, the model as applied then, and
//! how the last plan run on it ended. A snapshot plan changes no item of
//! the store: what it makes belongs to the snapshot, not to the manifests.

use std::sync::Arc;

use serde_json::{json, Map, Value as Json};

use crate::discovery::Registry;
use crate::error::{Error, Problem};
use crate::host::Host;
use crate::plugin::{self, Answer, Model, ModelItem, PluginTask, Requirement, TaskKind};
use crate::plugin_meta::{Plugin, PluginCall};
use crate::store::{Holder, Snapshot, Store, StoredItem};

use super::apply::{self, Events, StopRequested};
use super::catalog::Catalog;
use super::expand::{task_declaration, task_reference};
use super::from_plugin::PluginRun;
use super::manifest::{Declared, Origin, Reference};
use super::plan::{self, Plan, PlanState};
use super::run::{RunError, StoreAt};

/// What `ral snapshot` does to a snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SnapshotAction {
    Create,
    Remove,
    Restore,
}

impl SnapshotAction {
    pub fn as_str(self) -> &'static str {
        match self {
            SnapshotAction::Create => "create",
            SnapshotAction::Remove => "remove",
            SnapshotAction::Restore => "restore",
        }
    }
}

/// Why a snapshot plan was not run.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error(transparent)]
    Run(#[from] RunError),
    #[error("no plugin found makes snapshot plans (none lists create_snapshot_plan)")]
    NoPlugin,
    #[error("there is a snapshot '{0}' already: remove it first (ral snapshot remove)")]
    Exists(String),
    #[error("there is no snapshot '{0}' (ral snapshot list shows them)")]
    Missing(String),
    /// A name plugins would be handed, and the store keep, that is not a
    /// plain word (see [`crate::plugin_meta::name_problem`]).
    #[error(
        "'{}' cannot name a snapshot: {why}; a snapshot's name is {}",
        crate::text::escape(.name),
        crate::plugin_meta::NAME_RULE
    )]
    Name { name: String, why: String },
}

impl From<Error> for SnapshotError {
    fn from(e: Error) -> SnapshotError {
        SnapshotError::Run(RunError::Ral(e))
    }
}

/// A snapshot plan run: its catalog and plan, for showing.
pub struct SnapshotRun<'r> {
    pub catalog: Catalog<'r>,
    pub plan: Plan,
}

/// Runs the snapshot plan `action` of `name` on `host` with the store
/// `store_at`: plans it from what every plugin that makes snapshot plans
/// answers, runs it (`events` hears of each task) and records the outcome.
#[allow(clippy::too_many_arguments)]
pub fn run<'r>(
    host: &Host,
    registry: &'r Registry,
    store_at: &StoreAt,
    action: SnapshotAction,
    name: &str,
    jobs: usize,
    lock_timeout: std::time::Duration,
    stop: StopRequested,
    events: &mut dyn Events,
) -> Result<SnapshotRun<'r>, SnapshotError> {
    // Before anything runs or is stored: plugins get the name, and may
    // make file names or commands of it.
    if let Some(why) = crate::plugin_meta::name_problem(name) {
        return Err(SnapshotError::Name {
            name: name.to_owned(),
            why,
        });
    }
    let plugins: Vec<&Plugin> = registry
        .plugins()
        .iter()
        .filter(|p| p.answers(PluginCall::CreateSnapshotPlan))
        .collect();
    if plugins.is_empty() {
        return Err(SnapshotError::NoPlugin);
    }
    let plan_id = plan::new_id();
    let mut store = Store::open_locked(
        &store_at.location,
        Some(&store_at.identity),
        &Holder::me(&plan_id),
        lock_timeout,
    )?;
    let recorded = store.snapshot(name)?;
    match (action, &recorded) {
        (SnapshotAction::Create, Some(_)) => return Err(SnapshotError::Exists(name.to_owned())),
        (SnapshotAction::Remove | SnapshotAction::Restore, None) => {
            return Err(SnapshotError::Missing(name.to_owned()))
        }
        _ => {}
    }
    let model = model_of(&store.items()?);
    let run = PluginRun {
        model: model.clone(),
        extra: snapshot_keys(store_at, action, name, recorded.as_ref())?,
        plugins: plugins.iter().map(|p| (*p).clone()).collect(),
        secrets: Vec::new(),
        sensitive: Vec::new(),
        root: host.root().to_owned(),
        target: host.config().remote.as_ref().map(|s| s.target.name.clone()),
        noop: false,
    };
    let declared = snapshot_tasks(host, store_at, &plugins, &run)?;
    let mut catalog =
        Catalog::build(registry, &declared).map_err(|problems| Error::Manifest { problems })?;
    catalog.plugins = Some(Arc::new(run));
    let mut plan = plan::plan_with_id(host, &catalog, jobs, plan_id)?;
    apply::apply(host, &catalog, &mut plan, jobs, stop, events);
    record_outcome(&mut store, action, name, recorded.as_ref(), &model, &plan)?;
    Ok(SnapshotRun { catalog, plan })
}

/// The keys every call of a snapshot plan is given: `snapshot` (`action`
/// and `name`), and to restore the model `recorded` when the snapshot was
/// made (`snapshot_model`).
fn snapshot_keys(
    store_at: &StoreAt,
    action: SnapshotAction,
    name: &str,
    recorded: Option<&Snapshot>,
) -> Result<Map<String, Json>, SnapshotError> {
    let mut extra = Map::new();
    extra.insert(
        "snapshot".to_owned(),
        json!({"action": action.as_str(), "name": name}),
    );
    if let (SnapshotAction::Restore, Some(recorded)) = (action, recorded) {
        let made: Json = serde_json::from_str(&recorded.model).map_err(|e| Error::Store {
            path: store_at.location.path(),
            message: format!("snapshot '{name}': its recorded model is unreadable: {e}"),
        })?;
        extra.insert("snapshot_model".to_owned(), made);
    }
    Ok(extra)
}

/// The declarations of the tasks the `plugins` answer for the snapshot
/// plan of `run`, shown at the store's place.
fn snapshot_tasks(
    host: &Host,
    store_at: &StoreAt,
    plugins: &[&Plugin],
    run: &PluginRun,
) -> Result<Vec<Declared>, SnapshotError> {
    let origin = Origin {
        file: Arc::from(store_at.location.path().as_path()),
        line: 0,
    };
    let mut declared = Vec::new();
    for plugin in plugins {
        let answer = plugin::call(
            host,
            plugin,
            PluginCall::CreateSnapshotPlan,
            &run.input(plugin, Map::new()),
        )?;
        let Answer::Tasks(tasks) = answer else {
            unreachable!("create_snapshot_plan answers tasks")
        };
        let first = declared.len();
        declared.extend(declarations(plugin, tasks, &origin, first)?);
    }
    Ok(declared)
}

/// Records in `store` how the snapshot plan `action` of `name` ended: a
/// snapshot removed is gone; else it is kept with the `model` it was
/// made with (the one `recorded` then, or now for a new one) and its
/// last plan's state.
fn record_outcome(
    store: &mut Store,
    action: SnapshotAction,
    name: &str,
    recorded: Option<&Snapshot>,
    model: &Model,
    plan: &Plan,
) -> Result<(), SnapshotError> {
    if action == SnapshotAction::Remove && plan.state == PlanState::Successful {
        store.remove_snapshot(name)?;
        return Ok(());
    }
    let (created, made) = match (recorded, action) {
        (Some(recorded), SnapshotAction::Remove | SnapshotAction::Restore) => {
            (recorded.created, recorded.model.clone())
        }
        _ => (crate::store::now(), model.to_json(&[]).to_string()),
    };
    store.put_snapshot(&Snapshot {
        name: name.to_owned(),
        created,
        model: made,
        action: action.as_str().to_owned(),
        state: plan.state.as_str().to_owned(),
        updated: crate::store::now(),
    })?;
    Ok(())
}

/// The model as the store holds it: each item as last applied.
fn model_of(stored: &[StoredItem]) -> Model {
    Model {
        items: stored
            .iter()
            .filter(|item| item.owners.is_empty())
            .map(|item| ModelItem {
                type_name: item.type_name.clone(),
                name: item.name.clone(),
                state: item.state,
                properties: item.properties.clone(),
                applied_properties: Some(item.properties.clone()),
                // The store keeps sensitive values as digests only.
                hidden: Vec::new(),
            })
            .collect(),
    }
}

/// A plugin's snapshot tasks as catalog declarations, to follow the
/// first `first` of the list. Their `requires` name tasks of the same
/// answer or resources; a vpath names no task here, since a snapshot plan
/// has no model items of its own.
fn declarations(
    plugin: &Plugin,
    tasks: Vec<PluginTask>,
    origin: &Origin,
    first: usize,
) -> Result<Vec<Declared>, Error> {
    let item_type = plugin
        .meta
        .item_types
        .first()
        .map(|t| t.name.clone())
        .unwrap_or_default();
    // A callback or command for no item is named after the plugin.
    let reference_of = |task: &PluginTask| {
        let mut reference = task_reference(task, &item_type, 0);
        if !matches!(task.kind, TaskKind::Config { .. }) && task.item.is_empty() {
            reference.name = format!("snapshot:{}:{}", plugin.name(), task.id);
        }
        reference
    };
    let references: Vec<Reference> = tasks.iter().map(reference_of).collect();
    let mut problems = Vec::new();
    let mut declared = Vec::new();
    for (task, reference) in tasks.into_iter().zip(&references) {
        let mut require = Vec::new();
        let mut require_at = Vec::new();
        for requirement in &task.requires {
            match requirement {
                Requirement::Task(other) => require_at.push(first + other),
                Requirement::Resource(resource) => require.push(Reference {
                    type_query: resource.type_query.clone(),
                    name: resource.title.clone(),
                    line: 0,
                }),
                Requirement::Item(vpath) => problems.push(Problem {
                    file: plugin.program.clone(),
                    line: 0,
                    message: format!(
                        "create_snapshot_plan: task '{}' requires the item '{}': a snapshot \
                         plan's tasks require tasks or resources",
                        crate::text::escape(&task.id),
                        crate::text::escape(vpath)
                    ),
                }),
            }
        }
        let mut declaration = task_declaration(plugin, task, reference, origin, require);
        declaration.require_at = require_at;
        declared.push(declaration);
    }
    match problems.is_empty() {
        true => Ok(declared),
        false => Err(Error::Manifest { problems }),
    }
}

/// The snapshots the store at `store_at` holds (none without a store).
pub fn list(store_at: &StoreAt) -> Result<Vec<Snapshot>, Error> {
    match Store::open_existing_at(&store_at.location, Some(&store_at.identity))? {
        Some(store) => store.snapshots(),
        None => Ok(Vec::new()),
    }
}
