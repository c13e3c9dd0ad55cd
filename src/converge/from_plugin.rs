//! What the declarations and catalog items that model plugins make carry:
//! where one came from ([`FromPlugin`]: a plugin's task, run in its
//! [`Phase`], or a plugin item for removal) and what the plugins'
//! callbacks need when they run ([`PluginRun`]). `expand` makes them;
//! the manifest's declarations and the catalog's items hold them, so they
//! live below all three.

use std::path::PathBuf;

use serde_json::{Map, Value as Json};

use crate::plugin::{CallInput, Model, PluginTask, TaskKind};
use crate::plugin_meta::Plugin;

/// Where a catalog item that no manifest declared came from.
#[derive(Debug, Clone, PartialEq)]
pub enum FromPlugin {
    /// A plugin item no manifest lists any more (ForRemoval).
    Removal,
    /// A task of a plugin's answer. What it requires, notifies and
    /// subscribes to are its declaration's edges, not kept here.
    Task {
        plugin: String,
        task: Box<PluginTask>,
        phase: Phase,
    },
}

/// When a plugin's task runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// In the graph, at its turn.
    Main,
    /// Before every other task of the target's plan (create_lock_tasks).
    Lock,
    /// After every other, also when one of them failed.
    Unlock,
}

impl FromPlugin {
    /// A callback or remote task.
    pub fn is_action(&self) -> bool {
        self.task()
            .is_some_and(|t| !matches!(t.kind, TaskKind::Config { .. }))
    }

    pub fn is_removal(&self) -> bool {
        matches!(self, FromPlugin::Removal)
    }

    pub fn task(&self) -> Option<&PluginTask> {
        match self {
            FromPlugin::Task { task, .. } => Some(task),
            FromPlugin::Removal => None,
        }
    }

    pub fn plugin(&self) -> Option<&str> {
        match self {
            FromPlugin::Task { plugin, .. } => Some(plugin),
            FromPlugin::Removal => None,
        }
    }

    pub fn phase(&self) -> Phase {
        match self {
            FromPlugin::Task { phase, .. } => *phase,
            FromPlugin::Removal => Phase::Main,
        }
    }

    /// ` (task 'ID' of the plugin NAME for VPATH)`, which a problem about
    /// a task adds to its catalog reference; `None` for a removed item.
    pub fn described(&self) -> Option<String> {
        let task = self.task()?;
        Some(format!(
            " (task '{}' of the plugin {} for {})",
            crate::text::escape(&task.id),
            self.plugin().unwrap_or_default(),
            crate::text::escape(&task.item)
        ))
    }
}

/// What the plugins' callbacks need when they run: the model as the plan
/// saw it and where it runs.
#[derive(Debug, Clone)]
pub struct PluginRun {
    pub model: Model,
    /// Keys every call of this run is given besides `ral` and `model`
    /// (a snapshot plan's `snapshot` and `snapshot_model`).
    pub extra: Map<String, Json>,
    pub plugins: Vec<Plugin>,
    /// The texts what the plugins say is redacted of: the model's
    /// sensitive values and private ones (`expand`'s `secrets`).
    pub secrets: Vec<String>,
    /// The texts of its sensitive values alone, which a task may not put
    /// where they would be shown (`expand`'s `guard_secrets`).
    pub sensitive: Vec<String>,
    pub root: PathBuf,
    pub target: Option<String>,
    pub noop: bool,
}

impl PluginRun {
    pub fn plugin(&self, name: &str) -> Option<&Plugin> {
        self.plugins.iter().find(|p| p.name() == name)
    }

    /// The input of a call of `plugin`, with the call's own keys.
    pub fn input(&self, plugin: &Plugin, mut extra: Map<String, Json>) -> CallInput<'_> {
        for (key, value) in &self.extra {
            extra.entry(key.clone()).or_insert_with(|| value.clone());
        }
        CallInput {
            root: &self.root,
            target: self.target.as_deref(),
            noop: self.noop,
            model: &self.model,
            extra,
            secrets: self.secrets.clone(),
            own_types: plugin
                .meta
                .item_types
                .iter()
                .map(|t| t.name.clone())
                .collect(),
        }
    }
}
