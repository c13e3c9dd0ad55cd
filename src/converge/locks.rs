//! Lock tasks (LITP's `create_lock_tasks`): with targets, a target whose
//! plan has tasks gets each involved plugin's lock task before all of
//! them and its unlock task after all of them, also when one in between
//! failed. A plugin is asked with the node (the target) in its input; its
//! answer is a callback or a remote task each way (a config task would
//! need a read and a verification of its own around the plan, which LITP's
//! lock tasks, calls of a node's agent, never are).

use std::sync::Arc;

use serde_json::{json, Map, Value as Json};

use crate::discovery::Registry;
use crate::error::Error;
use crate::plugin::{self, Answer, PluginTask, TaskKind};
use crate::plugin_meta::{Plugin, PluginCall};
use crate::remote::Target;
use crate::update::Request;

use super::catalog::{Catalog, Item, Role};
use super::expand::Context;
use super::from_plugin::{FromPlugin, Phase, PluginRun};
use super::manifest::Origin;
use super::plan::{Action, Plan, Task};

/// What a plugin is told of the node it locks.
pub fn node(target: &Target) -> Json {
    json!({
        "name": target.name,
        "destination": target.destination,
        "port": target.port,
        "user": target.user,
        "root": target.root.as_ref().map(|r| r.to_string_lossy()),
    })
}

/// Adds the lock and unlock tasks of the plugins that answer
/// `create_lock_tasks` to a plan that has tasks: locks first, unlocks
/// last (in the reverse order), the plan's own tasks in between.
pub fn add<'r>(
    context: &Context,
    registry: &'r Registry,
    catalog: &mut Catalog<'r>,
    plan: &mut Plan,
    node: &Json,
    origin: &Origin,
) -> Result<(), Error> {
    let Some(run) = catalog.plugins.clone() else {
        return Ok(());
    };
    if plan.tasks.is_empty() {
        return Ok(());
    }
    let mut locks: Vec<Task> = Vec::new();
    let mut unlocks: Vec<Task> = Vec::new();
    for plugin in run
        .plugins
        .iter()
        .filter(|p| p.answers(PluginCall::CreateLockTasks))
    {
        let [lock, unlock] = lock_tasks(context, registry, &run, plugin, node)?;
        let provider = plugin
            .meta
            .item_types
            .first()
            .and_then(|t| registry.resolve_item(&t.name).ok())
            .ok_or_else(|| refused(plugin, "its item type is not found"))?;
        for (task, phase) in [(lock, Phase::Lock), (unlock, Phase::Unlock)] {
            check_lock_task(plugin, &task)?;
            let at = catalog.items.len();
            catalog
                .items
                .push(lock_item(provider, plugin.name(), task, phase, origin));
            let task = Task::pending(at, Action::Run, Vec::new());
            match phase {
                Phase::Unlock => unlocks.insert(0, task),
                _ => locks.push(task),
            }
        }
    }
    if locks.is_empty() {
        return Ok(());
    }
    let shift = locks.len();
    let mut tasks = locks;
    for mut task in std::mem::take(&mut plan.tasks) {
        for required in &mut task.requires {
            *required += shift;
        }
        tasks.push(task);
    }
    tasks.extend(unlocks);
    plan.tasks = tasks;
    Ok(())
}

/// The lock and the unlock task `plugin` answers for `node`, keeping
/// the model's secrets out of sight.
fn lock_tasks(
    context: &Context,
    registry: &Registry,
    run: &PluginRun,
    plugin: &Plugin,
    node: &Json,
) -> Result<[PluginTask; 2], Error> {
    let mut extra = Map::new();
    extra.insert("node".to_owned(), node.clone());
    let answer = plugin::call(
        context.runner,
        plugin,
        PluginCall::CreateLockTasks,
        &run.input(plugin, extra),
    )?;
    let Answer::Lock { lock, unlock } = answer else {
        unreachable!("create_lock_tasks answers a lock and an unlock task")
    };
    let mut pair = [*lock, *unlock];
    super::expand::guard_secrets(
        plugin,
        PluginCall::CreateLockTasks,
        &mut pair,
        run,
        registry,
    )?;
    Ok(pair)
}

/// Refuses a lock or unlock `task` that requires anything (it runs
/// before or after all the others) or is a config task.
fn check_lock_task(plugin: &Plugin, task: &PluginTask) -> Result<(), Error> {
    if !task.requires.is_empty() {
        return Err(refused(
            plugin,
            "a lock or unlock task requires nothing: it runs before or after all the others",
        ));
    }
    if let TaskKind::Config { .. } = task.kind {
        return Err(refused(
            plugin,
            "a lock or unlock task is a callback or a remote task here, not a config task",
        ));
    }
    Ok(())
}

/// What `plugin`'s answer to `create_lock_tasks` is refused for.
fn refused(plugin: &Plugin, message: &str) -> Error {
    Error::Plugin {
        plugin: plugin.name().to_owned(),
        call: PluginCall::CreateLockTasks.as_str().to_owned(),
        message: message.to_owned(),
    }
}

fn lock_item<'r>(
    provider: &'r crate::provider::Provider,
    plugin: &str,
    task: PluginTask,
    phase: Phase,
    origin: &Origin,
) -> Item<'r> {
    let word = if phase == Phase::Lock {
        "lock"
    } else {
        "unlock"
    };
    Item {
        provider,
        role: Role::Action,
        tie: None,
        type_query: provider.type_name().to_owned(),
        origin: origin.clone(),
        request: Request {
            name: format!("{word}:{plugin}:{}", task.id),
            attrs: Vec::new(),
        },
        requires: Vec::new(),
        subscribes: Vec::new(),
        from_plugin: Some(Arc::new(FromPlugin::Task {
            plugin: plugin.to_owned(),
            task: Box::new(task),
            phase,
        })),
    }
}

/// The phase of task `at` of `plan`.
pub fn phase(catalog: &Catalog, plan: &Plan, at: usize) -> Phase {
    catalog.items[plan.tasks[at].item]
        .from_plugin
        .as_deref()
        .map_or(Phase::Main, FromPlugin::phase)
}
