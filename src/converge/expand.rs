//! Model plugins in a plan: the model made from the catalog and the store,
//! the plugins' `update_model`, `validate_model` and
//! `create_configuration` calls, and their tasks made into catalog items
//! beside the manifests' resources, so that one graph orders them all.
//!
//! A config task is a resource like any other (read once per provider,
//! planned where it differs, batched, verified); a callback or remote
//! task is an item that always runs when it is in the plan; a plugin item
//! is an item with no task of its own that requires all its tasks, so
//! whatever requires it waits for them. A plugin is called only when the
//! model holds an item of one of its types.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;

use serde_json::{Map, Value as Json};

use crate::discovery::Registry;
use crate::error::{Error, Problem};
use crate::invoke::Runner;
use crate::plugin::model::vpath;
use crate::plugin::{
    self, Answer, Model, ModelItem, PluginTask, Requirement, ResourceName, TaskKind,
};
use crate::plugin_meta::{Plugin, PluginCall};
use crate::store::{ItemState, StoreKey, StoredItem};
use crate::types::{Value, Written};

use super::catalog::{Catalog, Item, Role};
use super::from_plugin::{FromPlugin, Phase, PluginRun};
use super::lifecycle;
use super::manifest::{Declared, Origin, RawAttr, Reading, Reference};

/// Where plugins run: locally, for this root and target.
pub struct Context<'a> {
    pub runner: &'a dyn Runner,
    pub root: &'a Path,
    pub target: Option<&'a str>,
    pub noop: bool,
    /// `--keep-removed`: no removals are planned, so stored items no
    /// manifest lists are not in the model at all.
    pub keep_removed: bool,
}

/// The catalog with the plugins' tasks, when the model holds plugin
/// items (declared or stored); otherwise `catalog` as it is. `stored`:
/// the store's items; `key`: its key (none without a store).
pub fn expand<'r>(
    context: &Context,
    registry: &'r Registry,
    reading: &Reading,
    mut catalog: Catalog<'r>,
    stored: &[StoredItem],
    key: Option<&StoreKey>,
    store_origin: &Origin,
) -> Result<Catalog<'r>, Error> {
    let kept_only: Vec<StoredItem>;
    let stored = match context.keep_removed {
        false => stored,
        true => {
            kept_only = listed_only(&catalog, stored);
            &kept_only
        }
    };
    let removed = removed_models(registry, &catalog, stored);
    let declared_models = catalog.items.iter().any(|i| i.role == Role::Model);
    if !declared_models && removed.is_empty() {
        return Ok(catalog);
    }
    if !registry.plugin_clashes().is_empty() {
        return Err(Error::Manifest {
            problems: registry
                .plugin_clashes()
                .iter()
                .map(clash_problem)
                .collect(),
        });
    }
    let involved = involved(registry, &catalog, &removed);
    let by_key: HashMap<(String, &str), &StoredItem> = stored
        .iter()
        .map(|s| ((s.provider.clone(), s.name.as_str()), s))
        .collect();
    let mut run = PluginRun {
        model: Model::default(),
        extra: Map::new(),
        plugins: involved.iter().map(|p| (*p).clone()).collect(),
        secrets: secrets(&catalog, true),
        sensitive: secrets(&catalog, false),
        root: context.root.to_owned(),
        target: context.target.map(str::to_owned),
        noop: context.noop,
    };
    for plugin in involved
        .iter()
        .filter(|p| p.answers(PluginCall::UpdateModel))
    {
        run.model = model(&catalog, stored, &by_key, key);
        let Answer::Updates(updates) = call(context, plugin, PluginCall::UpdateModel, &run)? else {
            unreachable!("update_model answers updates")
        };
        update(&mut catalog, plugin, updates, reading)?;
    }
    run.model = model(&catalog, stored, &by_key, key);
    run.secrets = secrets(&catalog, true);
    run.sensitive = secrets(&catalog, false);
    validate(context, &catalog, reading, &involved, &run)?;
    let answers = configurations(context, registry, &involved, &run)?;
    let declared = declared_with_tasks(&catalog, reading, &removed, answers, store_origin)?;
    let mut expanded = Catalog::build(registry, &declared).map_err(|problems| Error::Manifest {
        problems: naming_tasks(problems, &declared),
    })?;
    keep_updates(&catalog, &mut expanded);
    tie_tasks(&mut expanded);
    check_replaces(registry, &expanded, stored)?;
    check_shared_removals(&expanded, stored)?;
    expanded.plugins = Some(Arc::new(run));
    Ok(expanded)
}

/// The stored items `catalog` lists (`--keep-removed`: the others are
/// not in the model at all).
fn listed_only(catalog: &Catalog, stored: &[StoredItem]) -> Vec<StoredItem> {
    let listed: HashSet<(String, &str)> = catalog
        .items
        .iter()
        .map(|i| (i.provider.qualified_name(), i.name()))
        .collect();
    stored
        .iter()
        .filter(|s| listed.contains(&(s.provider.clone(), s.name.as_str())))
        .cloned()
        .collect()
}

/// The plugins that own an item type of the catalog's plugin items or
/// of the `removed` ones: the only ones called.
fn involved<'g>(
    registry: &'g Registry,
    catalog: &Catalog,
    removed: &[StoredItem],
) -> Vec<&'g Plugin> {
    registry
        .plugins()
        .iter()
        .filter(|plugin| {
            let owns = |type_name: &str| plugin.meta.item_types.iter().any(|t| t.name == type_name);
            catalog
                .items
                .iter()
                .any(|i| i.role == Role::Model && owns(i.provider.type_name()))
                || removed.iter().any(|s| owns(&s.type_name))
        })
        .collect()
}

/// The `validate_model` calls of the `involved` plugins on the model
/// of `run`: what they find wrong, redacted, refuses the plan as the
/// manifest's problems.
fn validate(
    context: &Context,
    catalog: &Catalog,
    reading: &Reading,
    involved: &[&Plugin],
    run: &PluginRun,
) -> Result<(), Error> {
    let mut problems = Vec::new();
    for plugin in involved
        .iter()
        .filter(|p| p.answers(PluginCall::ValidateModel))
    {
        let Answer::Errors(errors) = call(context, plugin, PluginCall::ValidateModel, run)? else {
            unreachable!("validate_model answers errors")
        };
        for error in errors {
            let error = plugin::ValidationError {
                message: crate::secrets::redact(&error.message, &run.secrets),
                ..error
            };
            problems.push(validation_problem(catalog, reading, plugin, &error));
        }
    }
    match problems.is_empty() {
        true => Ok(()),
        false => Err(Error::Manifest { problems }),
    }
}

/// The `create_configuration` answers of the `involved` plugins for the
/// model of `run`: each plugin's tasks, for its own items and keeping
/// the model's secrets out of sight.
fn configurations<'p>(
    context: &Context,
    registry: &Registry,
    involved: &[&'p Plugin],
    run: &PluginRun,
) -> Result<Vec<(&'p Plugin, Vec<PluginTask>)>, Error> {
    let mut answers: Vec<(&Plugin, Vec<PluginTask>)> = Vec::new();
    for plugin in involved
        .iter()
        .filter(|p| p.answers(PluginCall::CreateConfiguration))
    {
        let Answer::Tasks(tasks) = call(context, plugin, PluginCall::CreateConfiguration, run)?
        else {
            unreachable!("create_configuration answers tasks")
        };
        check_items(plugin, &tasks, &run.model, registry)?;
        let mut tasks = tasks;
        guard_secrets(
            plugin,
            PluginCall::CreateConfiguration,
            &mut tasks,
            run,
            registry,
        )?;
        answers.push((plugin, tasks));
    }
    Ok(answers)
}

/// The problems of the expanded catalog, each about a plugin's task
/// saying which plugin and task it is about: the line is the plugin
/// item's, where nothing of the task is written.
fn naming_tasks(problems: Vec<Problem>, declared: &[Declared]) -> Vec<Problem> {
    let tasks: Vec<(String, String)> = declared
        .iter()
        .filter_map(|d| {
            let what = d.from_plugin.as_deref()?.described()?;
            let reference = format!(
                "{}[{}]",
                crate::text::escape(&d.type_query),
                crate::text::escape(&d.name)
            );
            Some((reference, what))
        })
        .collect();
    problems
        .into_iter()
        .map(|mut problem| {
            if let Some((_, what)) = tasks
                .iter()
                .find(|(reference, _)| problem.message.starts_with(&format!("{reference}:")))
            {
                problem.message.push_str(what);
            }
            problem
        })
        .collect()
}

/// Stored plugin items no manifest lists any more.
fn removed_models(
    registry: &Registry,
    catalog: &Catalog,
    stored: &[StoredItem],
) -> Vec<StoredItem> {
    let listed: HashSet<(String, &str)> = catalog
        .items
        .iter()
        .map(|i| (i.provider.qualified_name(), i.name()))
        .collect();
    stored
        .iter()
        .filter(|s| !listed.contains(&(s.provider.clone(), s.name.as_str())))
        .filter(|s| {
            registry
                .resolve_item(&s.provider)
                .is_ok_and(|p| registry.plugin_of(p).is_some())
        })
        .cloned()
        .collect()
}

fn clash_problem(clash: &crate::discovery::plugins::Clash) -> Problem {
    Problem {
        file: clash.file.clone(),
        line: 0,
        message: clash.message(),
    }
}

fn call(
    context: &Context,
    plugin: &Plugin,
    which: PluginCall,
    run: &PluginRun,
) -> Result<Answer, Error> {
    plugin::call(
        context.runner,
        plugin,
        which,
        &run.input(plugin, Map::new()),
    )
}

/// The texts of the sensitive values in the catalog; with `private`, of
/// those private as asked for too (a file's content others may not
/// read): the model holds them as `[redacted]`, but a plugin may read
/// them elsewhere, and what it says is redacted of them as of sensitive
/// ones.
fn secrets(catalog: &Catalog, private: bool) -> Vec<String> {
    let mut texts: Vec<String> = catalog
        .items
        .iter()
        .flat_map(|item| {
            let attrs = &item.request.attrs;
            let private = match private {
                true => crate::withheld::private(item.provider, attrs, None),
                false => Vec::new(),
            };
            let is_secret = |key: &str| {
                item.provider.attribute(key).is_some_and(|a| a.sensitive)
                    || private.iter().any(|p| p == key)
            };
            crate::secrets::secret_texts(is_secret, attrs.iter().map(|(k, v)| (k.as_str(), v)))
        })
        .collect();
    texts.sort_by_key(|text| std::cmp::Reverse(text.len()));
    texts.dedup();
    texts
}

/// Keeps a plugin's tasks from showing a secret of the model (`run`'s):
/// descriptions have them redacted; a command, a resource's title or an
/// attribute that is not sensitive holding a sensitive value refuses the
/// answer, since it would reach a command line, every output or the
/// store in clear. (A private value the plugin was not given, a task
/// may hold: the same text may well be another file's.)
pub(super) fn guard_secrets(
    plugin: &Plugin,
    which: PluginCall,
    tasks: &mut [PluginTask],
    run: &PluginRun,
    registry: &Registry,
) -> Result<(), Error> {
    let (secrets, sensitive) = (&run.secrets, &run.sensitive);
    if secrets.is_empty() {
        return Ok(());
    }
    // Worked out once for every text of every task.
    let (secrets, sensitive) = (
        crate::secrets::Needles::of(secrets),
        crate::secrets::Needles::of(sensitive),
    );
    let holds = |text: &str| sensitive.holds(text);
    let refuse = |task: &PluginTask, place: String| Error::Plugin {
        plugin: plugin.name().to_owned(),
        call: which.as_str().to_owned(),
        message: format!(
            "task '{}' puts a sensitive value {place}, where it would be shown or kept in \
             clear; pass it in a sensitive attribute or a callback's arguments",
            crate::text::escape(&secrets.redact(&task.id)),
        ),
    };
    for task in tasks.iter_mut() {
        task.description = secrets.redact(&task.description);
        if holds(&task.id) {
            return Err(refuse(task, "in its id".to_owned()));
        }
        match &task.kind {
            TaskKind::Remote { command } if command.iter().any(|word| holds(word)) => {
                return Err(refuse(task, "on a command line".to_owned()));
            }
            TaskKind::Config {
                type_name,
                title,
                attributes,
                ..
            } => {
                if holds(title) {
                    return Err(refuse(task, "in a resource's title".to_owned()));
                }
                let provider = registry.resolve(type_name).ok();
                for (attr, value) in attributes {
                    let sensitive = provider
                        .and_then(|p| p.attribute(attr))
                        .is_some_and(|a| a.sensitive);
                    if !sensitive && json_holds(value, &holds) {
                        return Err(refuse(
                            task,
                            format!("in '{attr}' of {type_name}, which is not sensitive"),
                        ));
                    }
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// Whether a text of `value` (itself or any element) holds a secret.
fn json_holds(value: &Json, holds: &impl Fn(&str) -> bool) -> bool {
    match value {
        Json::String(text) => holds(text),
        Json::Array(items) => items.iter().any(|item| json_holds(item, holds)),
        Json::Object(map) => map
            .iter()
            .any(|(key, item)| holds(key) || json_holds(item, holds)),
        other => holds(&other.to_string()),
    }
}

/// The model: every resource and plugin item of the catalog with its
/// state, and every stored one no manifest lists (ForRemoval) but the
/// resources of plugins' config tasks, which are not model items.
fn model(
    catalog: &Catalog,
    stored: &[StoredItem],
    by_key: &HashMap<(String, &str), &StoredItem>,
    key: Option<&StoreKey>,
) -> Model {
    let mut items = Vec::new();
    let mut listed = HashSet::new();
    for item in &catalog.items {
        if item.role == Role::Action || item.from_plugin.is_some() {
            continue;
        }
        let qualified = item.provider.qualified_name();
        let before = by_key.get(&(qualified.clone(), item.name())).copied();
        let state = match key {
            Some(key) => lifecycle::state_before(
                before,
                &lifecycle::properties(item.provider, &item.request, key),
            ),
            None => ItemState::Initial,
        };
        listed.insert((qualified, item.name().to_owned()));
        items.push(ModelItem {
            type_name: item.provider.type_name().to_owned(),
            name: item.name().to_owned(),
            state,
            properties: attrs_json(&item.request.attrs),
            applied_properties: before
                .filter(|_| state != ItemState::Initial)
                .map(|b| b.properties.clone()),
            hidden: hidden(item),
        });
    }
    for item in stored {
        if !item.owners.is_empty() || listed.contains(&(item.provider.clone(), item.name.clone())) {
            continue;
        }
        items.push(ModelItem {
            type_name: item.type_name.clone(),
            name: item.name.clone(),
            state: ItemState::ForRemoval,
            properties: item.properties.clone(),
            applied_properties: Some(item.properties.clone()),
            // The store keeps sensitive values, and those shown as their
            // digest, as keyed digests only.
            hidden: Vec::new(),
        });
    }
    Model { items }
}

/// The properties of a catalog item that read `[redacted]` in the model
/// of a plugin not owning its type: its sensitive ones, and those shown
/// only as their digest (for a resource, which no plugin owns).
fn hidden(item: &Item) -> Vec<String> {
    let provider = item.provider;
    let sensitive = provider.meta.attributes.values().filter(|a| a.sensitive);
    let mut hidden: Vec<String> = sensitive.map(|a| a.name.clone()).collect();
    hidden.extend(crate::withheld::withheld_unread(
        provider,
        &item.request.attrs,
    ));
    hidden
}

fn attrs_json(attrs: &[(String, Value)]) -> Map<String, Json> {
    attrs
        .iter()
        .map(|(key, value)| (key.clone(), Json::from(value)))
        .collect()
}

/// The catalog's plugin item at `vpath`.
fn model_at(catalog: &Catalog, vpath_wanted: &str) -> Option<usize> {
    catalog.items.iter().position(|item| {
        item.role == Role::Model && vpath(item.provider.type_name(), item.name()) == vpath_wanted
    })
}

/// Where a problem with the item at `at` (its `property`, if given) is
/// shown: the property's line where the manifest wrote it.
fn origin_of(catalog: &Catalog, reading: &Reading, at: usize, property: Option<&str>) -> Origin {
    let item = &catalog.items[at];
    let line = property.and_then(|property| {
        reading
            .declared
            .iter()
            .find(|d| d.type_query == item.type_query && d.name == item.name())
            .and_then(|d| d.attrs.iter().find(|a| a.name == property))
            .map(|a| a.line)
    });
    Origin {
        line: line.unwrap_or(item.origin.line),
        ..item.origin.clone()
    }
}

/// Sets the properties `update_model` asked for, each typed as the
/// manifest's would be.
fn update(
    catalog: &mut Catalog,
    plugin: &Plugin,
    updates: Vec<plugin::ModelUpdate>,
    reading: &Reading,
) -> Result<(), Error> {
    let fail = |message: String| Error::Plugin {
        plugin: plugin.name().to_owned(),
        call: PluginCall::UpdateModel.as_str().to_owned(),
        message,
    };
    let mut problems = Vec::new();
    for update in updates {
        let Some(at) = model_at(catalog, &update.vpath) else {
            return Err(fail(format!(
                "'{}' is no plugin item of the model",
                crate::text::escape(&update.vpath)
            )));
        };
        if catalog.items[at].provider.meta.name != plugin.name() {
            return Err(fail(format!(
                "'{}' is an item of the plugin {}, not of this one",
                crate::text::escape(&update.vpath),
                catalog.items[at].provider.meta.name
            )));
        }
        for (property, json) in update.properties {
            let item = &catalog.items[at];
            let Some(attribute) = item
                .provider
                .attribute(&property)
                .filter(|_| property != "name")
            else {
                return Err(fail(format!(
                    "{}: no property '{}'",
                    update.vpath,
                    crate::text::escape(&property)
                )));
            };
            match attribute.attr_type.check_json(&json) {
                Ok(value) => {
                    let attrs = &mut catalog.items[at].request.attrs;
                    match attrs.iter_mut().find(|(key, _)| *key == property) {
                        Some(slot) => slot.1 = value,
                        None => attrs.push((property, value)),
                    }
                }
                Err(e) => problems.push(origin_of(catalog, reading, at, Some(&property)).problem(
                    format!(
                        "{}: {property}: the plugin {}'s update_model set {}, which is not a {}: {e}",
                        update.vpath,
                        plugin.name(),
                        if attribute.sensitive { "a value".to_owned() } else { json.to_string() },
                        attribute.attr_type
                    ),
                )),
            }
        }
    }
    match problems.is_empty() {
        true => Ok(()),
        false => Err(Error::Manifest { problems }),
    }
}

fn validation_problem(
    catalog: &Catalog,
    reading: &Reading,
    plugin: &Plugin,
    error: &plugin::ValidationError,
) -> Problem {
    let property = error.property.as_deref();
    let shown = crate::text::escape(&error.message);
    let what = match property {
        Some(property) => format!(
            "{}: {}",
            crate::text::escape(&error.vpath),
            crate::text::escape(property)
        ),
        None => crate::text::escape(&error.vpath),
    };
    let found = catalog.items.iter().position(|item| {
        item.role != Role::Action && vpath(item.provider.type_name(), item.name()) == error.vpath
    });
    match found {
        Some(at) => origin_of(catalog, reading, at, property)
            .problem(format!("{what}: {shown} (plugin {})", plugin.name())),
        None => Problem {
            file: plugin.program.clone(),
            line: 0,
            message: format!("validate_model: {what}: {shown} (no such item in the model)"),
        },
    }
}

/// Refuses tasks for items that are not the plugin's own.
fn check_items(
    plugin: &Plugin,
    tasks: &[PluginTask],
    model: &Model,
    registry: &Registry,
) -> Result<(), Error> {
    let _ = registry;
    // By vpath once: a lookup per task would scan the model each time.
    let types: HashMap<String, &str> = model
        .items
        .iter()
        .map(|item| (item.vpath(), item.type_name.as_str()))
        .collect();
    for task in tasks {
        let own = types
            .get(&task.item)
            .is_some_and(|type_name| plugin.meta.item_types.iter().any(|t| t.name == *type_name));
        if !own {
            return Err(Error::Plugin {
                plugin: plugin.name().to_owned(),
                call: PluginCall::CreateConfiguration.as_str().to_owned(),
                message: format!(
                    "task '{}' is for '{}', which is no item of this plugin's types in the model",
                    crate::text::escape(&task.id),
                    crate::text::escape(&task.item)
                ),
            });
        }
    }
    Ok(())
}

/// The catalog item name of a callback or remote task.
fn action_name(task: &PluginTask) -> String {
    format!("{}:{}", task.item, task.id)
}

/// The declarations of the expanded catalog: the manifests' (each plugin
/// item requiring its tasks), the plugin items for removal, and the tasks.
/// A task requiring another of its answer, or an item, is given the
/// other's place in the list (`require_at`): nothing is looked up by name
/// again for each of many requirements.
fn declared_with_tasks(
    catalog: &Catalog,
    reading: &Reading,
    removed: &[StoredItem],
    answers: Vec<(&Plugin, Vec<PluginTask>)>,
    store_origin: &Origin,
) -> Result<Vec<Declared>, Error> {
    let mut declared: Vec<Declared> = reading.declared.clone();
    let mut problems = Vec::new();
    for item in removed {
        declared.push(removal_declaration(item, store_origin));
    }
    let at_vpath = declared_at_vpath(catalog, &declared);
    for (plugin, tasks) in answers {
        let owners = owners_of(plugin, &tasks, &at_vpath)?;
        // The answer's tasks are declared in its order from here on.
        let first = declared.len();
        let references: Vec<Reference> = tasks
            .iter()
            .zip(&owners)
            .map(|(task, &owner_at)| {
                let owner = &declared[owner_at];
                task_reference(task, &owner.type_query, owner.origin.line)
            })
            .collect();
        let answer = Declaring {
            plugin,
            at_vpath: &at_vpath,
            first,
            references,
        };
        for ((at, mut task), &owner_at) in tasks.into_iter().enumerate().zip(&owners) {
            let origin = declared[owner_at].origin.clone();
            let (require_at, named) = answer.edges(&declared, &mut task, &origin, &mut problems);
            declared[owner_at].require_at.push(first + at);
            let [require, notify, subscribe] = named;
            let reference = &answer.references[at];
            let mut declaration = task_declaration(plugin, task, reference, &origin, require);
            declaration.require_at = require_at;
            declaration.notify = notify;
            declaration.subscribe = subscribe;
            declared.push(declaration);
        }
    }
    match problems.is_empty() {
        true => Ok(declared),
        false => Err(Error::Manifest { problems }),
    }
}

/// The declaration of a stored plugin `item` no manifest lists any more,
/// shown at `store_origin`: its plugin's tasks remove it.
fn removal_declaration(item: &StoredItem, store_origin: &Origin) -> Declared {
    Declared {
        type_query: item.type_name.clone(),
        name: item.name.clone(),
        origin: store_origin.clone(),
        attrs: Vec::new(),
        require: Vec::new(),
        require_at: Vec::new(),
        before: Vec::new(),
        notify: Vec::new(),
        subscribe: Vec::new(),
        from_plugin: Some(Arc::new(FromPlugin::Removal)),
        varying: None,
    }
}

/// Where each plugin item's vpath is among `declared`, to find an item's
/// origin and type: the catalog's items as they were declared, and the
/// items for removal.
fn declared_at_vpath(catalog: &Catalog, declared: &[Declared]) -> HashMap<String, usize> {
    let by_written: HashMap<(&str, &str), &Item> = catalog
        .items
        .iter()
        .map(|i| ((i.type_query.as_str(), i.name()), i))
        .collect();
    let mut at_vpath: HashMap<String, usize> = HashMap::new();
    for (at, d) in declared.iter().enumerate() {
        if let Some(item) = by_written.get(&(d.type_query.as_str(), d.name.as_str())) {
            at_vpath.insert(vpath(item.provider.type_name(), item.name()), at);
        } else if d.from_plugin.is_some() {
            at_vpath.insert(vpath(&d.type_query, &d.name), at);
        }
    }
    at_vpath
}

/// The place among the declarations of the item each of `plugin`'s
/// `tasks` is for.
fn owners_of(
    plugin: &Plugin,
    tasks: &[PluginTask],
    at_vpath: &HashMap<String, usize>,
) -> Result<Vec<usize>, Error> {
    // check_items let only the plugin's own items of the model through,
    // and each is declared or for removal.
    let owner = |task: &PluginTask| {
        at_vpath
            .get(&task.item)
            .copied()
            .ok_or_else(|| Error::Plugin {
                plugin: plugin.name().to_owned(),
                call: PluginCall::CreateConfiguration.as_str().to_owned(),
                message: format!(
                    "task '{}' is for '{}', which this run does not plan",
                    crate::text::escape(&task.id),
                    crate::text::escape(&task.item)
                ),
            })
    };
    tasks.iter().map(owner).collect()
}

/// A plugin's answer being declared: its tasks from `first` on among
/// the declarations, known by their `references`.
struct Declaring<'a> {
    plugin: &'a Plugin,
    at_vpath: &'a HashMap<String, usize>,
    first: usize,
    references: Vec<Reference>,
}

impl Declaring<'_> {
    /// What `task`, shown at `origin`, requires, notifies and subscribes
    /// to, taken out of it: the places of the declarations it requires,
    /// and what each of the three lists names by reference. A requirement
    /// of no item of the model is a problem.
    fn edges(
        &self,
        declared: &[Declared],
        task: &mut PluginTask,
        origin: &Origin,
        problems: &mut Vec<Problem>,
    ) -> (Vec<usize>, [Vec<Reference>; 3]) {
        let mut require_at = Vec::with_capacity(task.requires.len());
        let mut named: [Vec<Reference>; 3] = Default::default();
        let lists = [
            ("requires", std::mem::take(&mut task.requires)),
            ("notify", std::mem::take(&mut task.notify)),
            ("subscribe", std::mem::take(&mut task.subscribe)),
        ];
        for (index, (word, requirements)) in lists.into_iter().enumerate() {
            for requirement in requirements {
                let other = match requirement {
                    Requirement::Task(other) => self.first + other,
                    Requirement::Resource(resource) => {
                        let ResourceName { type_query, title } = *resource;
                        named[index].push(Reference {
                            type_query,
                            name: title,
                            line: origin.line,
                        });
                        continue;
                    }
                    Requirement::Item(wanted) => match self.at_vpath.get(&wanted) {
                        Some(&other) => other,
                        None => {
                            problems.push(self.no_item(task, origin, word, &wanted));
                            continue;
                        }
                    },
                };
                // Refreshes are rare: named as a manifest names them.
                match index {
                    0 => require_at.push(other),
                    _ => named[index].push(Reference {
                        line: origin.line,
                        ..reference_at(declared, &self.references, self.first, other)
                    }),
                }
            }
        }
        (require_at, named)
    }

    /// The problem of `task` naming in its list `word` the item `wanted`,
    /// which is no item of the model.
    fn no_item(&self, task: &PluginTask, origin: &Origin, word: &str, wanted: &str) -> Problem {
        origin.problem(format!(
            "{}: task '{}' of the plugin {} {word} '{}', which is no item of the model",
            task.item,
            crate::text::escape(&task.id),
            self.plugin.name(),
            crate::text::escape(wanted)
        ))
    }
}

/// The reference of the declaration at `at`: one of `declared`, or the
/// task at `at - first` of the answer being declared, whose `references`
/// are these. Its line is the declaration's own; a reference is shown at
/// the line of what names it.
fn reference_at(
    declared: &[Declared],
    references: &[Reference],
    first: usize,
    at: usize,
) -> Reference {
    match at.checked_sub(first) {
        Some(task) => references[task].clone(),
        None => Reference {
            type_query: declared[at].type_query.clone(),
            name: declared[at].name.clone(),
            line: declared[at].origin.line,
        },
    }
}

/// The declaration of a plugin's task known as `reference`, shown at
/// `origin` (its item's, where nothing of the task itself is written):
/// a config task's attributes are read as a manifest's would be. What
/// the task requires, notifies and subscribes to is the declaration's
/// (`require` here; the caller sets the rest).
pub(super) fn task_declaration(
    plugin: &Plugin,
    task: PluginTask,
    reference: &Reference,
    origin: &Origin,
    require: Vec<Reference>,
) -> Declared {
    let attrs = match &task.kind {
        TaskKind::Config { attributes, .. } => attributes
            .iter()
            .map(|(name, value)| RawAttr {
                name: name.clone(),
                value: Written::from_json(value),
                line: origin.line,
            })
            .collect(),
        _ => Vec::new(),
    };
    Declared {
        type_query: reference.type_query.clone(),
        name: reference.name.clone(),
        origin: origin.clone(),
        attrs,
        require,
        require_at: Vec::new(),
        before: Vec::new(),
        notify: Vec::new(),
        subscribe: Vec::new(),
        varying: None,
        from_plugin: Some(Arc::new(FromPlugin::Task {
            plugin: plugin.name().to_owned(),
            task: Box::new(PluginTask {
                requires: Vec::new(),
                notify: Vec::new(),
                subscribe: Vec::new(),
                ..task
            }),
            phase: Phase::Main,
        })),
    }
}

/// The reference a task is known by in the catalog: its resource for a
/// config task, else its item's type and `VPATH:ID`.
pub(super) fn task_reference(task: &PluginTask, item_type: &str, line: usize) -> Reference {
    match &task.kind {
        TaskKind::Config {
            type_name, title, ..
        } => Reference {
            type_query: type_name.clone(),
            name: title.clone(),
            line,
        },
        _ => Reference {
            type_query: item_type.to_owned(),
            name: action_name(task),
            line,
        },
    }
}

/// The resources (provider, name) a config task of item `item` replaces.
pub fn replaced_by<'c>(
    registry: &'c Registry,
    item: &'c Item,
) -> impl Iterator<Item = (String, String)> + 'c {
    let pairs = match item.from_plugin.as_deref().and_then(FromPlugin::task) {
        Some(PluginTask {
            kind: TaskKind::Config { replaces, .. },
            ..
        }) => replaces.as_slice(),
        _ => &[],
    };
    pairs.iter().map(move |(type_query, title)| {
        let provider = registry
            .resolve(type_query)
            .map(|p| p.qualified_name())
            .unwrap_or_else(|_| type_query.clone());
        (provider, title.clone())
    })
}

/// LITP's two conditions on `replaces`, checked at plan time: what a
/// task replaces is not also declared in this plan (by a manifest or a
/// config task), and no two tasks replace the same resource.
fn check_replaces(
    registry: &Registry,
    catalog: &Catalog,
    stored: &[StoredItem],
) -> Result<(), Error> {
    // A resource another item made and still has is not for taking.
    let present: HashSet<String> = catalog
        .items
        .iter()
        .filter(|i| i.role == Role::Model && !is_removed_model(i))
        .map(|i| vpath(i.provider.type_name(), i.name()))
        .collect();
    let owners: HashMap<(&str, &str), &[String]> = stored
        .iter()
        .map(|s| ((s.provider.as_str(), s.name.as_str()), s.owners.as_slice()))
        .collect();
    let declared: HashMap<(String, &str), usize> = catalog
        .items
        .iter()
        .enumerate()
        .filter(|(_, i)| i.role == Role::Resource)
        .map(|(at, i)| ((i.provider.qualified_name(), i.name()), at))
        .collect();
    let mut replacing: HashMap<(String, String), usize> = HashMap::new();
    let mut problems = Vec::new();
    for (at, item) in catalog.items.iter().enumerate() {
        for key in replaced_by(registry, item) {
            let shown = format!("{}[{}]", key.0, crate::text::escape(&key.1));
            if let Some(&other) = declared.get(&(key.0.clone(), key.1.as_str())) {
                problems.push(item.origin.problem(format!(
                    "{} replaces {shown}, which this plan also declares ({} at {}:{}): a \
                     resource is replaced only once nothing else declares it",
                    item.reference(),
                    catalog.items[other].reference(),
                    catalog.items[other].origin.file.display(),
                    catalog.items[other].origin.line
                )));
            }
            let task_item = item
                .from_plugin
                .as_deref()
                .and_then(FromPlugin::task)
                .map(|t| t.item.as_str())
                .unwrap_or_default();
            let made_by = owners.get(&(key.0.as_str(), key.1.as_str()));
            let other = made_by
                .into_iter()
                .flat_map(|owners| owners.iter())
                .find(|owner| *owner != task_item && present.contains(owner.as_str()));
            if let Some(owner) = other {
                problems.push(item.origin.problem(format!(
                    "{} replaces {shown}, which {} made and still has: a resource is \
                     replaced only once nothing else declares it",
                    item.reference(),
                    crate::text::escape(owner)
                )));
            }
            if let Some(&first) = replacing.get(&key) {
                problems.push(item.origin.problem(format!(
                    "{} and {} both replace {shown}: only one task may take a resource over",
                    catalog.items[first].reference(),
                    item.reference()
                )));
            } else {
                replacing.insert(key, at);
            }
        }
    }
    match problems.is_empty() {
        true => Ok(()),
        false => Err(Error::Manifest { problems }),
    }
}

/// A config task that removes (`ensure: absent`) a resource another
/// plugin item still yields would take it from that item: refused at plan
/// time, naming both. A resource stays while any item yields it.
fn check_shared_removals(catalog: &Catalog, stored: &[StoredItem]) -> Result<(), Error> {
    let owners: HashMap<(&str, &str), &[String]> = stored
        .iter()
        .filter(|s| !s.owners.is_empty())
        .map(|s| ((s.provider.as_str(), s.name.as_str()), s.owners.as_slice()))
        .collect();
    if owners.is_empty() {
        return Ok(());
    }
    let yields = Yields::of(catalog);
    let mut problems = Vec::new();
    for item in &catalog.items {
        let Some(task) = item.from_plugin.as_deref().and_then(FromPlugin::task) else {
            continue;
        };
        let TaskKind::Config { attributes, .. } = &task.kind else {
            continue;
        };
        if attributes.get("ensure").and_then(Json::as_str) != Some("absent") {
            continue;
        }
        let provider = item.provider.qualified_name();
        let Some(made_by) = owners.get(&(provider.as_str(), item.name())) else {
            continue;
        };
        let other = made_by
            .iter()
            .find(|owner| **owner != task.item && yields.keeps(owner));
        if let Some(other) = other {
            problems.push(item.origin.problem(format!(
                "{} (task '{}' of the plugin {} for {}) removes what {} still yields: a \
                 resource several items yield stays while any of them does",
                item.reference(),
                crate::text::escape(&task.id),
                item.from_plugin
                    .as_deref()
                    .and_then(FromPlugin::plugin)
                    .unwrap_or_default(),
                crate::text::escape(&task.item),
                crate::text::escape(other)
            )));
        }
    }
    match problems.is_empty() {
        true => Ok(()),
        false => Err(Error::Manifest { problems }),
    }
}

/// The stored resources the plan's config tasks replace: neither removed
/// nor forgotten while the plan runs (see `record`).
pub fn replaced(registry: &Registry, catalog: &Catalog) -> HashSet<(String, String)> {
    catalog
        .items
        .iter()
        .flat_map(|item| replaced_by(registry, item))
        .collect()
}

/// Gives the expanded catalog's plugin items the properties
/// `update_model` set (it is built again from the manifests).
fn keep_updates(updated: &Catalog, expanded: &mut Catalog) {
    let at: HashMap<(String, String), usize> = expanded
        .items
        .iter()
        .enumerate()
        .filter(|(_, e)| e.role == Role::Model)
        .map(|(at, e)| ((e.provider.qualified_name(), e.name().to_owned()), at))
        .collect();
    for item in updated.items.iter().filter(|i| i.role == Role::Model) {
        let key = (item.provider.qualified_name(), item.name().to_owned());
        if let Some(&twin) = at.get(&key) {
            expanded.items[twin].request.attrs = item.request.attrs.clone();
        }
    }
}

/// Ties each task to the plugin item it settles.
fn tie_tasks(catalog: &mut Catalog) {
    let models: HashMap<String, usize> = catalog
        .items
        .iter()
        .enumerate()
        .filter(|(_, item)| item.role == Role::Model)
        .map(|(at, item)| (vpath(item.provider.type_name(), item.name()), at))
        .collect();
    for item in &mut catalog.items {
        if let Some(task) = item.from_plugin.as_deref().and_then(FromPlugin::task) {
            item.tie = models.get(&task.item).copied();
        }
    }
}

/// How the store's resources made by plugins' config tasks fare when no
/// answer of this run names them.
#[derive(Debug, Default)]
pub struct Owned {
    /// The stored items left to decide as usual: a resource whose items
    /// all got tasks again (or left) and no longer name it, and one of
    /// which got tasks, is removed, as one a manifest dropped.
    pub decidable: Vec<StoredItem>,
    /// Resources of items for removal that their removal tasks do not name,
    /// and that no other item still yields: the plugin leaves them (an
    /// account may own other files), so ral forgets them, as it forgets
    /// what it did not create.
    pub forget: Vec<StoredItem>,
}

/// What this run does with what each plugin item yielded when it was
/// last applied (the resources it owns), by vpath.
#[derive(Debug, Default)]
pub struct Yields {
    /// Items that got tasks again and were not applied: what they own is
    /// exactly their new answer. An applied item's tasks (drift seen by
    /// its plugin) only add: what they do not name stays.
    pub answering: HashSet<String>,
    /// Items for removal: they let go of everything once removed.
    pub leaving: HashSet<String>,
    /// Every plugin item of the run, declared or for removal.
    pub present: HashSet<String>,
}

impl Yields {
    pub fn of(catalog: &Catalog) -> Yields {
        let with_tasks: HashSet<usize> = catalog.items.iter().filter_map(|i| i.tie).collect();
        let applied = |path: &str| {
            catalog
                .plugins
                .as_deref()
                .and_then(|run| run.model.find(path))
                .is_some_and(|item| item.state == ItemState::Applied)
        };
        let mut yields = Yields::default();
        for (at, item) in catalog.items.iter().enumerate() {
            if item.role != Role::Model {
                continue;
            }
            let path = vpath(item.provider.type_name(), item.name());
            if is_removed_model(item) {
                yields.leaving.insert(path.clone());
            } else if with_tasks.contains(&at) && !applied(&path) {
                yields.answering.insert(path.clone());
            }
            yields.present.insert(path);
        }
        yields
    }

    /// Whether `owner` still yields what it did, whatever this run
    /// answers: it is applied and not answering anew, or it is not in
    /// this run at all (its plugin is not found: nothing is decided about
    /// what it made).
    pub fn keeps(&self, owner: &str) -> bool {
        !self.answering.contains(owner) && !self.leaving.contains(owner)
    }
}

/// Splits `stored` (the items not already in the catalog are the
/// candidates for removal): a resource that some plugin item still yields
/// (applied and given no new answer) stays as it is, in the store too;
/// one that all its items let go is removed or forgotten.
pub fn owned(catalog: &Catalog, stored: Vec<StoredItem>) -> Owned {
    let yields = Yields::of(catalog);
    let listed: HashSet<(String, &str)> = catalog
        .items
        .iter()
        .map(|i| (i.provider.qualified_name(), i.name()))
        .collect();
    let mut out = Owned::default();
    let mut warned: HashSet<String> = HashSet::new();
    for item in stored {
        if item.owners.is_empty() {
            out.decidable.push(item);
            continue;
        }
        for owner in item.owners.iter().filter(|o| !yields.present.contains(*o)) {
            if warned.insert(owner.clone()) {
                // Its item is not in this run (its plugin is not found, or
                // its type is gone): nothing can be decided about what it
                // made, which stays as it is, in the store too.
                log::warn!(
                    "the resources made for {} stay as they are: that item is in no manifest \
                     and its plugin is not found",
                    crate::text::escape(owner)
                );
            }
        }
        if item.owners.iter().any(|owner| yields.keeps(owner)) {
            continue;
        }
        if item.owners.iter().any(|o| yields.answering.contains(o)) {
            out.decidable.push(item);
        } else if !listed.contains(&(item.provider.clone(), item.name.as_str())) {
            out.forget.push(item);
        }
    }
    out
}

/// Whether catalog item `item` is a plugin item no manifest lists
/// ([`Item::is_removed_model`], by the path the binaries name).
pub fn is_removed_model(item: &Item) -> bool {
    item.is_removed_model()
}

#[cfg(test)]
mod tests {
    //! Expanding a catalog with a model plugin whose answers the tests
    //! script: a runner stands for the plugin's program, answering each
    //! call with the text a test gives for it and keeping the document
    //! each call was given.

    use std::sync::Mutex;

    use serde_json::json;

    use super::*;
    use crate::converge::manifest;
    use crate::converge::plan::{self, Action};
    use crate::converge::read::Observed;
    use crate::invoke::Invocation;
    use crate::metadata::Metadata;
    use crate::output_check::OutputCheck;
    use crate::plugin_meta::PluginMeta;
    use crate::process::{Finished, Idle, LineSink};
    use crate::provider::Provider;
    use crate::resource::Resource;

    /// The plugin `demo`'s program: what it answers each call
    /// (`update_model`, ...), given the call's document, and the calls it
    /// got.
    struct Scripted {
        answer: fn(&str, &Json) -> String,
        calls: Mutex<Vec<(String, Json)>>,
        check: OutputCheck,
    }

    impl Runner for Scripted {
        fn run(
            &self,
            _label: &str,
            _program: &Path,
            invocation: Invocation,
            sink: &mut LineSink,
            _idle: &mut Idle,
        ) -> crate::error::Result<Finished> {
            let call = invocation.action.as_str().to_owned();
            let stdin = invocation.stdin.unwrap_or_default();
            let document: Json = serde_json::from_slice(&stdin).unwrap();
            let text = (self.answer)(&call, &document);
            self.calls.lock().unwrap().push((call, document));
            for line in text.lines() {
                sink(line)?;
            }
            Ok(Finished {
                stderr_lines: 0,
                problem_lines: 0,
                error_lines: 0,
                problem_quotes: Vec::new(),
                stderr_tail: Vec::new(),
            })
        }

        fn check(&self) -> &OutputCheck {
            &self.check
        }
    }

    impl Scripted {
        fn new(answer: fn(&str, &Json) -> String) -> Scripted {
            Scripted {
                answer,
                calls: Mutex::new(Vec::new()),
                check: OutputCheck::new(false),
            }
        }

        /// The calls made, in order.
        fn called(&self) -> Vec<String> {
            let calls = self.calls.lock().unwrap();
            calls.iter().map(|(call, _)| call.clone()).collect()
        }

        /// The model items the last call of `which` was given, as
        /// `VPATH STATE`.
        fn model_of(&self, which: &str) -> Vec<String> {
            let calls = self.calls.lock().unwrap();
            let (_, document) = calls.iter().rev().find(|(call, _)| call == which).unwrap();
            let items = document["model"]["items"].as_array().unwrap();
            (items.iter())
                .map(|i| format!("{} {}", i["vpath"].as_str().unwrap(), i["state"]))
                .collect()
        }
    }

    /// What a plugin with nothing to say answers `call`.
    fn nothing(call: &str) -> String {
        match call {
            "update_model" => r#"{"updates": []}"#,
            "validate_model" => r#"{"errors": []}"#,
            _ => r#"{"tasks": []}"#,
        }
        .to_owned()
    }

    /// A registry of the provider `alpha` (`name`, `ensure`, `value`) and
    /// the plugin `demo`, whose item type `site` has the properties
    /// `content` and `shout`.
    fn registry() -> Registry {
        let yaml = "provider:\n  type: alpha\n  invoke: json\n  actions: [get, set]\n  \
                    suitable: true\n  attributes:\n    name: {}\n    \
                    ensure: {type: 'enum[present, absent]'}\n    value: {}\n";
        let meta = Metadata::parse(yaml, Path::new("alpha.yaml")).unwrap();
        let alpha = Provider::new(meta, "alpha.prov".into(), None);
        let yaml = "plugin:\n  item_types:\n    site:\n      properties:\n        \
                    content: {type: string}\n        shout: {type: boolean, default: false}\n  \
                    actions: [validate_model, update_model, create_configuration, callback]\n";
        let plugin = Plugin {
            meta: PluginMeta::parse(yaml, Path::new("/plugins/demo.yaml")).unwrap(),
            program: "/plugins/demo.plugin".into(),
            yaml: "/plugins/demo.yaml".into(),
        };
        Registry::with_plugins(vec![alpha], vec![plugin])
    }

    /// Expands the catalog of `manifest` with the store's items `stored`,
    /// the plugin answering as `runner` says.
    fn expanded<'r>(
        registry: &'r Registry,
        runner: &Scripted,
        manifest: &str,
        stored: &[StoredItem],
        keep_removed: bool,
    ) -> Result<Catalog<'r>, Error> {
        let (declared, problems) = manifest::parse(manifest, Path::new("m.yaml"));
        assert!(problems.is_empty(), "{problems:?}");
        let reading = Reading {
            declared,
            vars: Vec::new(),
            problems: Vec::new(),
            complete: true,
            digest: String::new(),
        };
        let catalog = Catalog::build(registry, &reading.declared).unwrap();
        let context = Context {
            runner,
            root: Path::new("/root"),
            target: None,
            noop: false,
            keep_removed,
        };
        let store_origin = Origin {
            file: Arc::from(Path::new("state.db")),
            line: 0,
        };
        expand(
            &context,
            registry,
            &reading,
            catalog,
            stored,
            None,
            &store_origin,
        )
    }

    /// The index of the item `reference` in `catalog`.
    fn at(catalog: &Catalog, reference: &str) -> usize {
        catalog
            .items
            .iter()
            .position(|i| i.reference() == reference)
            .unwrap_or_else(|| panic!("no {reference} in the catalog"))
    }

    /// The manifests' problems an error holds, as `FILE:LINE: MESSAGE`.
    fn problems(error: Error) -> Vec<String> {
        match error {
            Error::Manifest { problems } => problems.iter().map(|p| p.to_string()).collect(),
            other => panic!("not a manifest's problems: {other}"),
        }
    }

    const WEB: &str = "site:\n  web: {content: hello}\n";

    /// A config task of /site/web: alpha[index], with `value: hello`.
    const PAGE: &str = r#"{"kind": "config", "item": "/site/web", "id": "page", "type": "alpha",
        "title": "index", "attributes": {"value": "hello"}, "description": "the page"}"#;

    #[test]
    fn a_config_task_becomes_a_resource_that_its_plugin_item_waits_for() {
        let registry = registry();
        let runner = Scripted::new(|call, _| match call {
            "create_configuration" => format!(r#"{{"tasks": [{PAGE}]}}"#),
            other => nothing(other),
        });
        let catalog = expanded(&registry, &runner, WEB, &[], false).unwrap();
        assert_eq!(
            runner.called(),
            ["update_model", "validate_model", "create_configuration"]
        );
        assert_eq!(
            runner.model_of("create_configuration"),
            ["/site/web \"Initial\""]
        );
        let (page, web) = (at(&catalog, "alpha[index]"), at(&catalog, "site[web]"));
        let item = &catalog.items[page];
        assert_eq!(item.role, Role::Resource);
        assert_eq!(item.provider.qualified_name(), "alpha::alpha");
        // Typed as a manifest's resource is, its default `ensure` added.
        assert_eq!(
            item.request.attrs,
            [
                ("ensure".to_owned(), Value::from("present")),
                ("value".to_owned(), Value::from("hello"))
            ]
        );
        let from = item.from_plugin.as_deref().unwrap();
        assert_eq!(from.plugin(), Some("demo"));
        assert_eq!(from.task().unwrap().id, "page");
        // The task settles its item, which waits for it.
        assert_eq!(item.tie, Some(web));
        assert_eq!(catalog.items[web].requires, [page]);
        assert_eq!(catalog.items[web].role, Role::Model);
        let order = |at: usize| catalog.order.iter().position(|&o| o == at).unwrap();
        assert!(order(page) < order(web));
        assert!(catalog.plugins.is_some());
    }

    #[test]
    fn a_callback_becomes_an_item_that_runs_whenever_it_is_planned() {
        let registry = registry();
        let runner = Scripted::new(|call, _| match call {
            "create_configuration" => format!(
                r#"{{"tasks": [{PAGE}, {{"kind": "callback", "item": "/site/web", "id": "check",
                    "callback": "check", "args": ["index"], "requires": ["page"]}}]}}"#
            ),
            other => nothing(other),
        });
        let catalog = expanded(&registry, &runner, WEB, &[], false).unwrap();
        let check = at(&catalog, "callback[/site/web:check]");
        let page = at(&catalog, "alpha[index]");
        let item = &catalog.items[check];
        assert_eq!(item.role, Role::Action);
        assert_eq!(item.requires, [page]);
        assert!(item.from_plugin.as_deref().unwrap().is_action());
        // The page is as the task wants it: only the callback is to run.
        let mut found = vec![Observed::NotFound; catalog.items.len()];
        let mut index = Resource::bare("index");
        index.attrs.insert("value".to_owned(), Value::from("hello"));
        found[page] = Observed::Found(Box::new(index));
        let plan = plan::plan_from(&catalog, found, "p".to_owned()).unwrap();
        let tasks: Vec<(usize, Action)> = plan.tasks.iter().map(|t| (t.item, t.action)).collect();
        assert_eq!(tasks, [(check, Action::Run)]);
    }

    /// Answers a config task of /site/web that replaces alpha[old].
    fn replacing(call: &str, _: &Json) -> String {
        match call {
            "create_configuration" => r#"{"tasks": [{"kind": "config", "item": "/site/web",
                "id": "page", "type": "alpha", "title": "index", "attributes": {"value": "hello"},
                "replaces": [["alpha", "old"]]}]}"#
                .to_owned(),
            other => nothing(other),
        }
    }

    #[test]
    fn what_a_config_task_replaces_is_taken_over_only_when_nothing_else_has_it() {
        let registry = registry();
        let runner = Scripted::new(replacing);
        let catalog = expanded(&registry, &runner, WEB, &[], false).unwrap();
        let taken: Vec<(String, String)> = replaced(&registry, &catalog).into_iter().collect();
        assert_eq!(taken, [("alpha::alpha".to_owned(), "old".to_owned())]);
        // Declared by a manifest too: refused.
        let manifest = format!("{WEB}alpha:\n  old: {{value: x}}\n");
        let error = expanded(&registry, &runner, &manifest, &[], false).unwrap_err();
        assert_eq!(
            problems(error),
            [
                "m.yaml:2: alpha[index] replaces alpha::alpha[old], which this plan also declares \
              (alpha[old] at m.yaml:4): a resource is replaced only once nothing else declares it"
            ]
        );
        // Made by another item of the run, which still has it: refused.
        let manifest = format!("{WEB}  other: {{content: hi}}\n");
        let stored = StoredItem {
            provider: "alpha::alpha".to_owned(),
            type_name: "alpha".to_owned(),
            name: "old".to_owned(),
            state: ItemState::Applied,
            properties: Map::new(),
            created: true,
            requires: Vec::new(),
            owners: vec!["/site/other".to_owned()],
            undetermined: false,
        };
        let error = expanded(&registry, &runner, &manifest, &[stored], false).unwrap_err();
        assert_eq!(
            problems(error),
            [
                "m.yaml:2: alpha[index] replaces alpha::alpha[old], which /site/other made and \
              still has: a resource is replaced only once nothing else declares it"
            ]
        );
    }

    #[test]
    fn a_plugins_error_is_reported_naming_the_plugin_and_its_call() {
        let registry = registry();
        // Its own error document.
        let runner = Scripted::new(|call, _| match call {
            "validate_model" => r#"{"error": {"message": "the database is down"}}"#.to_owned(),
            other => nothing(other),
        });
        let error = expanded(&registry, &runner, WEB, &[], false).unwrap_err();
        assert_eq!(
            error.to_string(),
            "plugin demo: validate_model: the database is down"
        );
        assert_eq!(runner.called(), ["update_model", "validate_model"]);
        // Its validation errors: each a problem where the item is written.
        let runner = Scripted::new(|call, _| match call {
            "validate_model" => r#"{"errors": [{"vpath": "/site/web", "property": "content",
                "message": "too short"}]}"#
                .to_owned(),
            other => nothing(other),
        });
        let error = expanded(&registry, &runner, WEB, &[], false).unwrap_err();
        assert_eq!(
            problems(error),
            ["m.yaml:2: /site/web: content: too short (plugin demo)"]
        );
        // A task for an item that is not its own.
        let runner = Scripted::new(|call, _| match call {
            "create_configuration" => format!(
                r#"{{"tasks": [{}]}}"#,
                PAGE.replace("/site/web", "/site/nope")
            ),
            other => nothing(other),
        });
        let error = expanded(&registry, &runner, WEB, &[], false).unwrap_err();
        assert_eq!(
            error.to_string(),
            "plugin demo: create_configuration: task 'page' is for '/site/nope', which is no \
             item of this plugin's types in the model"
        );
    }

    #[test]
    fn update_model_sets_typed_properties_that_the_later_calls_and_the_catalog_see() {
        let registry = registry();
        let runner = Scripted::new(|call, document| match call {
            "update_model" => {
                let web = &document["model"]["items"][0];
                assert_eq!(web["properties"]["content"], "hello");
                json!({"updates": [{"vpath": "/site/web", "properties": {"content": "HELLO"}}]})
                    .to_string()
            }
            "validate_model" => {
                let web = &document["model"]["items"][0];
                assert_eq!(web["properties"]["content"], "HELLO");
                nothing(call)
            }
            other => nothing(other),
        });
        let catalog = expanded(&registry, &runner, WEB, &[], false).unwrap();
        let web = &catalog.items[at(&catalog, "site[web]")];
        assert!(web
            .request
            .attrs
            .contains(&("content".to_owned(), Value::from("HELLO"))));
        // A value not of the property's type is the manifest's problem.
        let runner = Scripted::new(|call, _| match call {
            "update_model" => {
                r#"{"updates": [{"vpath": "/site/web", "properties": {"shout": "loud"}}]}"#
                    .to_owned()
            }
            other => nothing(other),
        });
        let error = expanded(&registry, &runner, WEB, &[], false).unwrap_err();
        assert_eq!(
            problems(error),
            ["m.yaml:2: /site/web: shout: the plugin demo's update_model set \"loud\", which is \
              not a boolean: expected boolean, found a string"]
        );
    }

    /// The item /site/old as the store keeps it once applied.
    fn stored_site() -> StoredItem {
        let mut properties = Map::new();
        properties.insert("content".to_owned(), Json::from("bye"));
        StoredItem {
            provider: "site::demo".to_owned(),
            type_name: "site".to_owned(),
            name: "old".to_owned(),
            state: ItemState::Applied,
            properties,
            created: true,
            requires: Vec::new(),
            owners: Vec::new(),
            undetermined: false,
        }
    }

    #[test]
    fn a_plugin_item_no_manifest_lists_is_given_to_its_plugin_for_removal() {
        let registry = registry();
        let runner = Scripted::new(|call, _| match call {
            "create_configuration" => r#"{"tasks": [{"kind": "config", "item": "/site/old",
                "id": "unpage", "type": "alpha", "title": "old-page",
                "attributes": {"ensure": "absent"}}]}"#
                .to_owned(),
            other => nothing(other),
        });
        let manifest = "alpha:\n  keep: {value: x}\n";
        let catalog = expanded(&registry, &runner, manifest, &[stored_site()], false).unwrap();
        assert_eq!(
            runner.model_of("create_configuration"),
            ["/alpha/keep \"Initial\"", "/site/old \"ForRemoval\""]
        );
        let old = at(&catalog, "site[old]");
        assert!(is_removed_model(&catalog.items[old]));
        assert_eq!(
            catalog.items[old].origin.file.as_ref(),
            Path::new("state.db")
        );
        let unpage = at(&catalog, "alpha[old-page]");
        assert_eq!(catalog.items[unpage].tie, Some(old));
        assert_eq!(catalog.items[old].requires, [unpage]);
        // Removals kept: the plugin is not even called.
        let runner = Scripted::new(|call, _| nothing(call));
        let catalog = expanded(&registry, &runner, manifest, &[stored_site()], true).unwrap();
        assert!(runner.called().is_empty(), "{:?}", runner.called());
        let references: Vec<String> = catalog.items.iter().map(Item::reference).collect();
        assert_eq!(references, ["alpha[keep]"]);
        assert!(catalog.plugins.is_none());
    }
}
