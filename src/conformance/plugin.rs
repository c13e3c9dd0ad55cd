//! `ral check` of a model plugin (`NAME.plugin`, docs/plugins.md):
//! its metadata, then every call it lists, run the way a plan runs it
//! (the host's process rules, a temporary root) on models made from its
//! item types: one item of each type, every property given a valid value
//! of its type (its default, else one made up), in each LITP state that
//! matters (a model of Initial items, of Applied ones, of Updated ones, of
//! ForRemoval ones), beside one resource item. Callbacks named by the
//! callback tasks of `create_configuration` are called too, with
//! `ral.noop` true, so a well-behaved callback changes nothing.
//!
//! Its findings: failed calls (a non-zero exit, an error document, a
//! listed call answered `unknown action`), answers the strict parsers
//! refuse, tasks for items that are not the plugin's or do not exist,
//! `requires` naming nothing, config tasks no provider here can type,
//! updates that do not type-check or touch other items, and, as warnings
//! or notes, what a plugin may do but most likely does not mean:
//! validation errors in a model of valid values, an Initial or ForRemoval
//! item without tasks, an Applied one with tasks.

use std::path::Path;

use serde_json::{json, Map, Value as Json};

use crate::discovery::Registry;
use crate::error::Error;
use crate::host::{Host, HostConfig};
use crate::plugin::{self, Answer, CallInput, Model, ModelItem, PluginTask, Requirement, TaskKind};
use crate::plugin_meta::{ItemType, Plugin, PluginCall};
use crate::store::ItemState;
use crate::types::{Value, Written};
use crate::update::{Request, WrittenIn, METAPARAMETERS};

use super::checker::{Checker, StepHints};
use super::report::{CheckOptions, Level, NotRun, Report, Subject};
use super::round_trip::{made_value, other_value, MADE};

const PLUGIN_HINTS: StepHints = StepHints {
    slow: "plugins are called on every plan; keep a call to computing its answer from the model",
    noise: "warn: and error: (or unprefixed) lines are for real problems; \
            commentary goes at debug: or info:",
};

/// The name of the resource item of every model.
const RESOURCE: &str = "ralcheck-resource";
/// The target a lock is asked for.
const NODE: &str = "ralcheck-node";
/// The snapshot a snapshot plan is asked for.
const SNAPSHOT: &str = "ralcheck";

const HINT_EXIT: &str = "a call exits 0 with one JSON document on stdout; on a model of valid \
     values none should fail";
const HINT_ERROR: &str = "every value of the model was valid for its declared type: declare \
     the constraint in the metadata (integer[MIN, MAX], an enum, a pattern) or refuse it in \
     validate_model, rather than failing here";
const HINT_UNKNOWN: &str = "answer every call plugin.actions lists, or leave it out of the list";
const HINT_ANSWER: &str = "see the answer of this call in docs/plugins.md";
const HINT_IDS: &str = "a task id is unique within one answer";
const HINT_REQUIRES: &str = "requires names a task id of the same answer, a resource \
     TYPE[TITLE] (a manifest's or a config task's) or an item's vpath /TYPE/NAME";
const HINT_LOCK: &str = "create_lock_tasks answers {\"lock\": TASK, \"unlock\": TASK}";
const HINT_ITEM: &str = "a task's item is the vpath of one of this plugin's items in the model \
     (the item whose state the task settles)";
const HINT_TYPE: &str = "a config task's type is a provider type found where ral runs (its \
     data directories, the bundled providers)";
const HINT_ATTRS: &str = "a config task's attributes are checked as a manifest resource's: \
     declared, settable, of their type";
const HINT_UPDATE: &str = "update_model sets declared properties of this plugin's own items, \
     each a value of its type";
const HINT_VALIDATE: &str = "suspicious: every value was valid for its declared type; declare \
     the constraint in the metadata (integer[MIN, MAX], an enum, a pattern, a default), or \
     validate_model refuses what it should not";
const HINT_APPLIED: &str = "an Applied item needs no work: tasks for it run on every apply, \
     unless the plugin sees drift";
const HINT_INITIAL: &str = "an Initial item gets the tasks that bring the system to it";
const HINT_REMOVAL: &str = "a ForRemoval item gets the tasks that remove what it made";
const HINT_CALLBACK_FAILS: &str = "ral check calls callbacks with ral.noop true: a callback \
     then changes nothing and succeeds, saying at info: what it would do";
const HINT_CALLBACK: &str = "list callback in plugin.actions when a callback task names one";

/// The states a model is made in, each a model of its own.
const STATES: [ItemState; 4] = [
    ItemState::Initial,
    ItemState::Applied,
    ItemState::Updated,
    ItemState::ForRemoval,
];

/// Checks one plugin file; `registry` holds the providers its config
/// tasks are typed against.
pub fn check_plugin(source: &Path, options: &CheckOptions, registry: &Registry) -> Report {
    let mut check = PluginCheck {
        checker: Checker {
            host: Host::new(HostConfig {
                timeout: options.timeout,
                root: options.root.clone(),
                provider_lib: options.provider_lib.clone(),
                ..HostConfig::default()
            }),
            options,
            hints: &PLUGIN_HINTS,
            report: Report {
                subject: Subject::Plugin,
                source: source.to_owned(),
                provider: None,
                findings: Vec::new(),
                steps: Vec::new(),
                round_trip: Vec::new(),
                not_run: Vec::new(),
            },
        },
        registry,
        pending: Vec::new(),
    };
    check.run(source);
    check.flush();
    check.checker.report
}

struct PluginCheck<'a> {
    checker: Checker<'a>,
    registry: &'a Registry,
    /// Findings met in a model or call, with each that met them.
    pending: Vec<Pending>,
}

struct Pending {
    level: Level,
    step: &'static str,
    problem: String,
    hint: &'static str,
    contexts: Vec<String>,
}

/// A call to make: its model and what the input adds.
struct Call<'m> {
    which: PluginCall,
    /// Said in findings: which model.
    context: String,
    /// What the call was about, before its problems (which callback).
    subject: Option<String>,
    model: &'m Model,
    noop: bool,
    target: Option<&'static str>,
    extra: Map<String, Json>,
}

/// What the findings of one call say it was: which call, about which
/// subject (`SUBJECT: `, or nothing), in which context.
struct Said<'c> {
    which: PluginCall,
    about: String,
    context: &'c str,
}

/// Whether a plugin's message says it does not know the call.
fn unknown_action(message: &str) -> bool {
    message.to_ascii_lowercase().contains("unknown action")
}

impl PluginCheck<'_> {
    /// Records a finding; the same problem met in several models (or
    /// calls) is one finding naming them all.
    fn find(
        &mut self,
        level: Level,
        step: &'static str,
        problem: String,
        hint: &'static str,
        context: Option<&str>,
    ) {
        let Some(context) = context else {
            self.checker.find_at(level, step, problem, hint);
            return;
        };
        let same = |f: &&mut Pending| {
            f.level == level && f.step == step && f.problem == problem && f.hint == hint
        };
        match self.pending.iter_mut().find(|f| same(f)) {
            Some(pending) => {
                if !pending.contexts.iter().any(|c| c == context) {
                    pending.contexts.push(context.to_owned());
                }
            }
            None => self.pending.push(Pending {
                level,
                step,
                problem,
                hint,
                contexts: vec![context.to_owned()],
            }),
        }
    }

    /// The findings met in several models, each saying where.
    fn flush(&mut self) {
        for pending in std::mem::take(&mut self.pending) {
            let states: Option<Vec<&str>> = pending
                .contexts
                .iter()
                .map(|c| c.strip_prefix("model of ")?.strip_suffix(" items"))
                .collect();
            let said = match states {
                Some(states) if states.len() > 1 => {
                    format!("models of {} items", states.join(", "))
                }
                _ => pending.contexts.join("; "),
            };
            self.checker.find_at(
                pending.level,
                pending.step,
                format!("{} ({said})", pending.problem),
                pending.hint,
            );
        }
    }

    fn run(&mut self, source: &Path) {
        let Some(plugin) = self.load(source) else {
            return;
        };
        let mut models = self.models(&plugin);
        // update_model first, as a run calls it before the others.
        if plugin.answers(PluginCall::UpdateModel) {
            for (state, model) in &mut models {
                let context = format!("model of {} items", state.as_str());
                let call = Call::new(PluginCall::UpdateModel, &context, model);
                if let Some(Answer::Updates(updates)) = self.call(&plugin, call) {
                    self.apply_updates(&plugin, updates, model, &context);
                }
            }
        }
        let mut callbacks: Vec<(String, &Model, PluginTask)> = Vec::new();
        for (state, model) in &models {
            let context = format!("model of {} items", state.as_str());
            if plugin.answers(PluginCall::ValidateModel) {
                self.check_validation(&plugin, model, &context);
            }
            if plugin.answers(PluginCall::CreateConfiguration) {
                for task in self.check_configuration(&plugin, model, &context) {
                    callbacks.push((state.as_str().to_owned(), model, task));
                }
            }
        }
        self.check_callbacks(&plugin, &callbacks);
        if plugin.answers(PluginCall::CreateLockTasks) {
            self.check_lock_tasks(&plugin, &models[0].1);
        }
        if plugin.answers(PluginCall::CreateSnapshotPlan) {
            self.check_snapshot_plans(&plugin, &models[1].1);
        }
    }

    /// The plugin at `source`, when its metadata loads; its item types
    /// that clash with a provider's type are findings.
    fn load(&mut self, source: &Path) -> Option<Plugin> {
        let loaded = self
            .checker
            .step("metadata", |_| crate::discovery::plugins::load(source));
        let plugin = match loaded {
            Ok(plugin) => plugin,
            Err(e) => {
                self.find(
                    Level::Error,
                    "metadata",
                    e.to_string(),
                    "see \"Finding plugins\" in docs/plugins.md",
                    None,
                );
                return None;
            }
        };
        self.checker.report.provider = Some(plugin.name().to_owned());
        for clash in crate::discovery::plugins::models(
            std::slice::from_ref(&plugin),
            self.registry.providers(),
        )
        .1
        {
            self.find(
                Level::Error,
                "metadata",
                clash.error().to_string(),
                "an item type's name must be no provider's type",
                None,
            );
        }
        Some(plugin)
    }

    /// A model for each state, of one item of each of the plugin's types
    /// (those a value can be made up for) and a resource item; the types
    /// none can be made for are noted as not run.
    fn models(&mut self, plugin: &Plugin) -> Vec<(ItemState, Model)> {
        let resource = self.resource_item(plugin);
        let mut models = Vec::new();
        let mut unmade = Vec::new();
        for state in STATES {
            let mut items = Vec::new();
            for item_type in &plugin.meta.item_types {
                match made_item(item_type, state) {
                    Ok(item) => items.push(item),
                    // The same in every state: said once.
                    Err(why) if state == ItemState::Initial => unmade.push(why),
                    Err(_) => {}
                }
            }
            items.extend(resource.clone());
            models.push((state, Model { items }));
        }
        if !unmade.is_empty() {
            self.checker.report.not_run.push(NotRun {
                checks: vec!["the calls on items of those types"],
                why: unmade.join("; "),
                hint: Some("give the property a default in the metadata"),
            });
        }
        models
    }

    /// validate_model must accept a model of valid values.
    fn check_validation(&mut self, plugin: &Plugin, model: &Model, context: &str) {
        let call = Call::new(PluginCall::ValidateModel, context, model);
        let Some(Answer::Errors(errors)) = self.call(plugin, call) else {
            return;
        };
        if errors.is_empty() {
            return;
        }
        let said: Vec<String> = errors
            .iter()
            .map(|e| match &e.property {
                Some(property) => format!(
                    "{}: {}: {}",
                    e.vpath,
                    crate::text::escape(property),
                    crate::text::escape(&e.message)
                ),
                None => format!("{}: {}", e.vpath, crate::text::escape(&e.message)),
            })
            .collect();
        self.find(
            Level::Warning,
            "validate_model",
            format!("refuses a model of valid values: {}", said.join("; ")),
            HINT_VALIDATE,
            Some(context),
        );
    }

    /// create_configuration's tasks on `model`, checked; its callbacks
    /// are returned, to be called after.
    fn check_configuration(
        &mut self,
        plugin: &Plugin,
        model: &Model,
        context: &str,
    ) -> Vec<PluginTask> {
        let call = Call::new(PluginCall::CreateConfiguration, context, model);
        let Some(Answer::Tasks(tasks)) = self.call(plugin, call) else {
            return Vec::new();
        };
        self.check_tasks(
            plugin,
            PluginCall::CreateConfiguration,
            &tasks,
            model,
            context,
        );
        self.check_states(plugin, &tasks, model, context);
        tasks
            .into_iter()
            .filter(|task| matches!(task.kind, TaskKind::Callback { .. }))
            .collect()
    }

    /// create_lock_tasks for a node, on the model of Initial items.
    fn check_lock_tasks(&mut self, plugin: &Plugin, initial: &Model) {
        let mut call = Call::new(
            PluginCall::CreateLockTasks,
            &format!("node {NODE}, model of Initial items"),
            initial,
        );
        call.target = Some(NODE);
        call.extra
            .insert("node".to_owned(), json!({ "name": NODE }));
        if let Some(Answer::Lock { lock, unlock }) = self.call(plugin, call) {
            let tasks = [*lock, *unlock];
            self.check_tasks(
                plugin,
                PluginCall::CreateLockTasks,
                &tasks,
                initial,
                "lock tasks",
            );
        }
    }

    /// create_snapshot_plan for each action, on the model of Applied
    /// items.
    fn check_snapshot_plans(&mut self, plugin: &Plugin, applied: &Model) {
        for action in ["create", "remove", "restore"] {
            let context = format!("snapshot {action}, model of Applied items");
            let mut call = Call::new(PluginCall::CreateSnapshotPlan, &context, applied);
            call.extra.insert(
                "snapshot".to_owned(),
                json!({ "action": action, "name": SNAPSHOT }),
            );
            if action == "restore" {
                call.extra.insert(
                    "snapshot_model".to_owned(),
                    applied.to_json(&own_types(plugin)),
                );
            }
            if let Some(Answer::Tasks(tasks)) = self.call(plugin, call) {
                self.check_tasks(
                    plugin,
                    PluginCall::CreateSnapshotPlan,
                    &tasks,
                    applied,
                    &context,
                );
            }
        }
    }

    /// One resource item beside the plugin's: a type of the registry's
    /// (file, when there is one), present.
    fn resource_item(&self, plugin: &Plugin) -> Option<ModelItem> {
        let providers = self.registry.providers();
        let own = |name: &str| plugin.meta.item_types.iter().any(|t| t.name == name);
        let provider = providers
            .iter()
            .find(|p| p.type_name() == "file" && !own("file"))
            .or_else(|| providers.iter().find(|p| !own(p.type_name())))?;
        let mut properties = Map::new();
        if provider
            .attribute("ensure")
            .is_some_and(|a| a.attr_type.accepts_text("present"))
        {
            properties.insert("ensure".to_owned(), json!("present"));
        }
        let name = if provider.meta.names_are_paths {
            format!("/{RESOURCE}")
        } else {
            RESOURCE.to_owned()
        };
        Some(ModelItem {
            type_name: provider.type_name().to_owned(),
            name,
            state: ItemState::Initial,
            properties,
            applied_properties: None,
            hidden: Vec::new(),
        })
    }

    /// Runs `call` as a step; its failures and answers against the
    /// protocol are findings.
    fn call(&mut self, plugin: &Plugin, call: Call) -> Option<Answer> {
        let step = call.which.as_str();
        let root = self.checker.options.root.clone();
        let input = CallInput {
            root: &root,
            target: call.target,
            noop: call.noop,
            model: call.model,
            extra: call.extra,
            secrets: secrets(plugin, call.model),
            own_types: own_types(plugin),
        };
        let mut text = String::new();
        let ran = self.checker.step(step, |host| {
            plugin::call::run(host, plugin, call.which, &input, &mut text)
        });
        let said = serde_json::from_str::<Json>(&text)
            .ok()
            .and_then(|answer| plugin::call::error_message(&answer));
        let about = Said {
            which: call.which,
            about: call
                .subject
                .as_ref()
                .map(|s| format!("{s}: "))
                .unwrap_or_default(),
            context: &call.context,
        };
        if let Err(e) = ran {
            self.failed(&about, e, said);
            return None;
        }
        if let Some(said) = said {
            self.answered_error(&about, &said);
            return None;
        }
        match plugin::call::parse(plugin, call.which, &text) {
            Ok(answer) => Some(answer),
            Err(e) => {
                let message = e.to_string();
                let hint = if message.contains("is used twice") {
                    HINT_IDS
                } else if message.contains("no task id of this answer") {
                    HINT_REQUIRES
                } else if call.which == PluginCall::CreateLockTasks {
                    HINT_LOCK
                } else {
                    HINT_ANSWER
                };
                self.find(
                    Level::Error,
                    step,
                    format!("{}{message}", about.about),
                    hint,
                    Some(about.context),
                );
                None
            }
        }
    }

    /// A call that failed (`said`: the error its answer gave, if any).
    fn failed(&mut self, about: &Said, e: Error, said: Option<String>) {
        let step = about.which.as_str();
        let mut message = e.to_string();
        if let Some(said) = &said {
            message = format!("{message}; it answered: {said}");
        }
        if unknown_action(&message) {
            self.find(
                Level::Error,
                step,
                format!("listed in plugin.actions, but answered: {message}"),
                HINT_UNKNOWN,
                None,
            );
            return;
        }
        let hint = match e {
            Error::Timeout { .. } => "a call must finish within the time limit (--timeout)",
            _ if about.which == PluginCall::Callback => HINT_CALLBACK_FAILS,
            _ => HINT_EXIT,
        };
        self.find(
            Level::Error,
            step,
            format!("{}{message}", about.about),
            hint,
            Some(about.context),
        );
    }

    /// A call that succeeded with an error as its answer.
    fn answered_error(&mut self, about: &Said, said: &str) {
        let step = about.which.as_str();
        if unknown_action(said) {
            self.find(
                Level::Error,
                step,
                format!("listed in plugin.actions, but answered: {said}"),
                HINT_UNKNOWN,
                None,
            );
            return;
        }
        self.find(
            Level::Error,
            step,
            format!("{}answered an error: {said}", about.about),
            match about.which {
                PluginCall::Callback => HINT_CALLBACK_FAILS,
                _ => HINT_ERROR,
            },
            Some(about.context),
        );
    }

    /// Sets the updates that type-check on `model`, as a run does; the
    /// others are findings.
    fn apply_updates(
        &mut self,
        plugin: &Plugin,
        updates: Vec<plugin::ModelUpdate>,
        model: &mut Model,
        context: &str,
    ) {
        let step = PluginCall::UpdateModel.as_str();
        for update in updates {
            let shown = crate::text::escape(&update.vpath);
            let Some(at) = model
                .items
                .iter()
                .position(|item| item.vpath() == update.vpath)
            else {
                self.find(
                    Level::Error,
                    step,
                    format!("updates '{shown}', which is no item of the model"),
                    HINT_UPDATE,
                    Some(context),
                );
                continue;
            };
            let Some(item_type) = own_type(plugin, &model.items[at].type_name) else {
                self.find(
                    Level::Error,
                    step,
                    format!("updates '{shown}', which is not an item of this plugin's types"),
                    HINT_UPDATE,
                    Some(context),
                );
                continue;
            };
            for (property, json) in update.properties {
                let attribute = item_type
                    .meta
                    .attributes
                    .get(&property)
                    .filter(|_| property != "name");
                let Some(attribute) = attribute else {
                    self.find(
                        Level::Error,
                        step,
                        format!(
                            "{shown}: sets '{}', which is no property of {}",
                            crate::text::escape(&property),
                            item_type.name
                        ),
                        HINT_UPDATE,
                        Some(context),
                    );
                    continue;
                };
                match attribute.attr_type.check_json(&json) {
                    Ok(value) => {
                        model.items[at]
                            .properties
                            .insert(property, Json::from(&value));
                    }
                    Err(e) => self.find(
                        Level::Error,
                        step,
                        format!(
                            "{shown}: {property}: sets {}, which is not a {}: {e}",
                            if attribute.sensitive {
                                "a value".to_owned()
                            } else {
                                crate::text::escape(&json.to_string())
                            },
                            attribute.attr_type
                        ),
                        HINT_UPDATE,
                        Some(context),
                    ),
                }
            }
        }
    }

    /// What any answer's tasks must be: for items of the plugin in the
    /// model, requiring what exists, config tasks typed by a provider.
    fn check_tasks(
        &mut self,
        plugin: &Plugin,
        which: PluginCall,
        tasks: &[PluginTask],
        model: &Model,
        context: &str,
    ) {
        let step = which.as_str();
        for task in tasks {
            let id = crate::text::escape(&task.id);
            let item = crate::text::escape(&task.item);
            // Lock and snapshot tasks may name no item: they are about a
            // node or the whole model.
            let itemless = which != PluginCall::CreateConfiguration && task.item.is_empty();
            match model.find(&task.item).filter(|_| !itemless) {
                None if itemless => {}
                None => self.find(
                    Level::Error,
                    step,
                    format!("task '{id}' is for '{item}', which is no item of the model"),
                    HINT_ITEM,
                    Some(context),
                ),
                Some(found) if own_type(plugin, &found.type_name).is_none() => self.find(
                    Level::Error,
                    step,
                    format!(
                        "task '{id}' is for '{item}', an item of type {}, which is not this \
                         plugin's",
                        found.type_name
                    ),
                    HINT_ITEM,
                    Some(context),
                ),
                Some(_) => {}
            }
            for requirement in &task.requires {
                let missing = match requirement {
                    Requirement::Task(_) => None,
                    Requirement::Item(wanted) => {
                        model.find(wanted).is_none().then(|| wanted.clone())
                    }
                    Requirement::Resource(resource) => {
                        let (type_query, title) = (&resource.type_query, &resource.title);
                        let type_name = type_query.split("::").next().unwrap_or(type_query);
                        let by_task = tasks.iter().any(|t| {
                            matches!(&t.kind, TaskKind::Config { type_name: t_type, title: t_title, .. }
                                if t_type.split("::").next() == Some(type_name) && t_title == title)
                        });
                        let by_item = model
                            .items
                            .iter()
                            .any(|i| i.type_name == type_name && &i.name == title);
                        (!by_task && !by_item).then(|| format!("{type_query}[{title}]"))
                    }
                };
                if let Some(missing) = missing {
                    self.find(
                        Level::Error,
                        step,
                        format!(
                            "task '{id}' requires '{}', which names no task, resource or item",
                            crate::text::escape(&missing)
                        ),
                        HINT_REQUIRES,
                        Some(context),
                    );
                }
            }
            if let TaskKind::Config {
                type_name,
                title,
                attributes,
                ..
            } = &task.kind
            {
                self.check_config(step, &id, type_name, title, attributes, context);
            }
        }
    }

    /// A config task is a resource: its type must be a provider's and its
    /// attributes must pass the check manifests get.
    fn check_config(
        &mut self,
        step: &'static str,
        id: &str,
        type_name: &str,
        title: &str,
        attributes: &Map<String, Json>,
        context: &str,
    ) {
        let reference = format!(
            "{}[{}]",
            crate::text::escape(type_name),
            crate::text::escape(title)
        );
        let provider = match self.registry.resolve(type_name) {
            Ok(provider) => provider,
            Err(e) => {
                self.find(
                    Level::Error,
                    step,
                    format!("config task '{id}' ({reference}): {e}"),
                    HINT_TYPE,
                    Some(context),
                );
                return;
            }
        };
        let written: Vec<(String, Written)> = attributes
            .iter()
            .map(|(key, value)| (key.clone(), Written::from_json(value)))
            .collect();
        let given: Vec<(&str, &Written)> = written.iter().map(|(k, v)| (k.as_str(), v)).collect();
        let also = WrittenIn::Manifest {
            also: &METAPARAMETERS,
        };
        if let Err(problems) = Request::check(provider, title, &given, also) {
            for problem in problems {
                self.find(
                    Level::Error,
                    step,
                    format!("config task '{id}' ({reference}): {}", problem.message),
                    HINT_ATTRS,
                    Some(context),
                );
            }
        }
    }

    /// Which of the plugin's items got tasks, against their states.
    fn check_states(
        &mut self,
        plugin: &Plugin,
        tasks: &[PluginTask],
        model: &Model,
        context: &str,
    ) {
        let step = PluginCall::CreateConfiguration.as_str();
        for item in &model.items {
            if own_type(plugin, &item.type_name).is_none() {
                continue;
            }
            let path = item.vpath();
            let count = tasks.iter().filter(|t| t.item == path).count();
            match (item.state, count) {
                (ItemState::Applied, 1..) => self.find(
                    Level::Note,
                    step,
                    format!("the Applied item {path} got {count} task(s)"),
                    HINT_APPLIED,
                    Some(context),
                ),
                (ItemState::Initial, 0) => self.find(
                    Level::Warning,
                    step,
                    format!("the Initial item {path} got no task"),
                    HINT_INITIAL,
                    Some(context),
                ),
                (ItemState::ForRemoval, 0) => self.find(
                    Level::Warning,
                    step,
                    format!("the ForRemoval item {path} got no task"),
                    HINT_REMOVAL,
                    Some(context),
                ),
                _ => {}
            }
        }
    }

    /// Calls each callback a callback task names, under noop, with the
    /// model the task came from.
    fn check_callbacks(&mut self, plugin: &Plugin, callbacks: &[(String, &Model, PluginTask)]) {
        if callbacks.is_empty() {
            return;
        }
        if !plugin.answers(PluginCall::Callback) {
            let mut names: Vec<String> = callbacks
                .iter()
                .filter_map(|(_, _, task)| match &task.kind {
                    TaskKind::Callback { callback, .. } => Some(crate::text::escape(callback)),
                    _ => None,
                })
                .collect();
            names.sort();
            names.dedup();
            self.find(
                Level::Error,
                PluginCall::CreateConfiguration.as_str(),
                format!(
                    "callback tasks name {}, but callback is not in plugin.actions",
                    names.join(", ")
                ),
                HINT_CALLBACK,
                None,
            );
            return;
        }
        for (state, model, task) in callbacks {
            let TaskKind::Callback {
                callback,
                args,
                kwargs,
            } = &task.kind
            else {
                continue;
            };
            let context = format!("model of {state} items");
            let mut call = Call::new(PluginCall::Callback, &context, model);
            call.subject = Some(format!(
                "callback '{}' of task '{}', under noop",
                crate::text::escape(callback),
                crate::text::escape(&task.id)
            ));
            call.noop = true;
            call.extra.insert("callback".to_owned(), json!(callback));
            call.extra.insert("args".to_owned(), json!(args));
            call.extra.insert("kwargs".to_owned(), json!(kwargs));
            self.call(plugin, call);
        }
    }
}

impl<'m> Call<'m> {
    fn new(which: PluginCall, context: &str, model: &'m Model) -> Call<'m> {
        Call {
            which,
            context: context.to_owned(),
            subject: None,
            model,
            noop: false,
            target: None,
            extra: Map::new(),
        }
    }
}

fn own_type<'p>(plugin: &'p Plugin, type_name: &str) -> Option<&'p ItemType> {
    plugin.meta.item_types.iter().find(|t| t.name == type_name)
}

/// The texts of the model's sensitive values, redacted from stderr.
fn secrets(plugin: &Plugin, model: &Model) -> Vec<String> {
    let mut texts = Vec::new();
    for item in &model.items {
        let Some(item_type) = own_type(plugin, &item.type_name) else {
            continue;
        };
        for (key, value) in &item.properties {
            if item_type
                .meta
                .attributes
                .get(key)
                .is_some_and(|a| a.sensitive)
            {
                texts.push(match value {
                    Json::String(text) => text.clone(),
                    other => other.to_string(),
                });
            }
        }
    }
    texts.retain(|t| !t.is_empty());
    texts
}

/// One item of `item_type` in `state`: each property its default, else
/// a value made up for its type; an optional one that cannot be made up
/// is left out. Updated: what was applied differs in one property.
fn made_item(item_type: &ItemType, state: ItemState) -> Result<ModelItem, String> {
    let mut properties = Map::new();
    let mut values: Vec<(&crate::metadata::Attribute, Value)> = Vec::new();
    for attribute in item_type.meta.attributes.values() {
        if attribute.name == "name" {
            continue;
        }
        match attribute
            .default
            .clone()
            .or_else(|| made_value(&attribute.attr_type))
        {
            Some(value) => {
                properties.insert(attribute.name.clone(), Json::from(&value));
                values.push((attribute, value));
            }
            None if attribute.required => {
                return Err(format!(
                    "no value can be made up for the required property '{}' of {} ({})",
                    attribute.name, item_type.name, attribute.attr_type
                ))
            }
            None => {}
        }
    }
    let applied_properties = match state {
        ItemState::Initial => None,
        ItemState::Applied | ItemState::ForRemoval => Some(properties.clone()),
        ItemState::Updated => {
            let mut applied = properties.clone();
            if let Some((attribute, other)) = values.iter().find_map(|(attribute, now)| {
                other_value(&attribute.attr_type, Some(now)).map(|other| (attribute, other))
            }) {
                applied.insert(attribute.name.clone(), Json::from(&other));
            }
            Some(applied)
        }
    };
    Ok(ModelItem {
        type_name: item_type.name.clone(),
        name: MADE.to_owned(),
        state,
        properties,
        applied_properties,
        hidden: Vec::new(),
    })
}

/// The plugin's item types: the model's items it owns.
fn own_types(plugin: &Plugin) -> Vec<String> {
    plugin
        .meta
        .item_types
        .iter()
        .map(|t| t.name.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugin::model::vpath;

    fn webapp() -> ItemType {
        let text = "plugin:
  item_types:
    webapp:
      properties:
        port: {type: 'integer[1024, 65535]'}
        owner: {type: string}
        mode: {type: string, default: '0640'}
        extra: {type: hash, required: false}
  actions: [create_configuration]
";
        let meta =
            crate::plugin_meta::PluginMeta::parse(text, Path::new("/p/webapp.yaml")).unwrap();
        meta.item_types[0].clone()
    }

    #[test]
    fn an_item_gets_defaults_and_made_up_values_of_its_types() {
        let item = made_item(&webapp(), ItemState::Initial).unwrap();
        assert_eq!(item.vpath(), "/webapp/ralcheck0");
        assert_eq!(item.properties["port"], json!(1024));
        assert_eq!(item.properties["mode"], json!("0640"));
        assert!(item.properties["owner"].is_string());
        assert!(
            !item.properties.contains_key("extra"),
            "an optional hash is left out"
        );
        assert_eq!(item.applied_properties, None);
    }

    #[test]
    fn an_updated_item_was_applied_with_another_value() {
        let item = made_item(&webapp(), ItemState::Updated).unwrap();
        let applied = item.applied_properties.clone().unwrap();
        assert_ne!(applied, item.properties);
        let applied_port = applied["port"].as_i64().unwrap();
        assert!((1024..=65535).contains(&applied_port));
        let same = made_item(&webapp(), ItemState::Applied).unwrap();
        assert_eq!(same.applied_properties.as_ref(), Some(&same.properties));
        assert_eq!(vpath("webapp", MADE), same.vpath());
    }
}
