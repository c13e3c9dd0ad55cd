//! The tasks a plugin answers with (`create_configuration`,
//! `create_lock_tasks`, `create_snapshot_plan`), parsed strictly into
//! typed tasks: config (a resource), callback (a call of the plugin) and
//! remote (a command), with ordered lists (nested ones opened) flattened
//! into tasks that each require the one before. Every id is unique within one answer (a task
//! without one gets `#N`, its position), and every `requires` entry is
//! told apart: a task id, a resource `type[title]`, or an item's vpath.

use serde::Deserialize;
use serde_json::{Map, Value as Json};

/// The most tasks one answer may hold (ordered lists opened): far more
/// than any model needs (the bench expands 1,000 items into 5,000), and
/// few enough that planning them stays a matter of seconds.
pub const MAX_TASKS: usize = 100_000;

/// What a task does.
#[derive(Debug, Clone, PartialEq)]
pub enum TaskKind {
    /// LITP's ConfigTask: a resource converged by its provider.
    Config {
        type_name: String,
        title: String,
        attributes: Map<String, Json>,
        /// `[type, title]` pairs of resources applied earlier that this
        /// task takes over.
        replaces: Vec<(String, String)>,
    },
    /// LITP's CallbackTask: `PLUGIN ral_action=callback` at its turn.
    Callback {
        callback: String,
        args: Vec<Json>,
        kwargs: Map<String, Json>,
    },
    /// LITP's RemoteExecutionTask: an argv run on the target.
    Remote { command: Vec<String> },
}

impl TaskKind {
    pub fn as_str(&self) -> &'static str {
        match self {
            TaskKind::Config { .. } => "config",
            TaskKind::Callback { .. } => "callback",
            TaskKind::Remote { .. } => "remote",
        }
    }
}

/// What a task waits for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Requirement {
    /// Another task of the same answer, by id.
    Task(String),
    /// A resource (of the manifest or a config task), `type[title]`.
    Resource { type_query: String, title: String },
    /// Every task of a model item, `/TYPE/NAME`.
    Item(String),
}

/// One task of a plugin's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct PluginTask {
    /// The vpath of the model item whose state it settles; empty for a
    /// lock or snapshot task that names none.
    pub item: String,
    /// Unique within its answer.
    pub id: String,
    pub description: String,
    pub requires: Vec<Requirement>,
    /// What a change of this task's resource refreshes (ral's own, as in
    /// manifests; each also comes after it).
    pub notify: Vec<Requirement>,
    /// What refreshes this task's resource when it changes.
    pub subscribe: Vec<Requirement>,
    pub kind: TaskKind,
}

#[derive(Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
enum RawTask {
    Config {
        #[serde(default)]
        item: Option<String>,
        #[serde(default)]
        id: Option<String>,
        #[serde(rename = "type")]
        type_name: String,
        title: String,
        #[serde(default)]
        attributes: Map<String, Json>,
        #[serde(default)]
        requires: Vec<String>,
        #[serde(default)]
        notify: Vec<String>,
        #[serde(default)]
        subscribe: Vec<String>,
        #[serde(default)]
        replaces: Vec<(String, String)>,
        #[serde(default)]
        description: Option<String>,
    },
    Callback {
        #[serde(default)]
        item: Option<String>,
        #[serde(default)]
        id: Option<String>,
        callback: String,
        #[serde(default)]
        args: Vec<Json>,
        #[serde(default)]
        kwargs: Map<String, Json>,
        #[serde(default)]
        requires: Vec<String>,
        #[serde(default)]
        notify: Vec<String>,
        #[serde(default)]
        subscribe: Vec<String>,
        #[serde(default)]
        description: Option<String>,
    },
    Remote {
        #[serde(default)]
        item: Option<String>,
        #[serde(default)]
        id: Option<String>,
        command: Vec<String>,
        #[serde(default)]
        requires: Vec<String>,
        #[serde(default)]
        notify: Vec<String>,
        #[serde(default)]
        subscribe: Vec<String>,
        #[serde(default)]
        description: Option<String>,
    },
    Ordered {
        #[serde(default)]
        item: Option<String>,
        tasks: Vec<RawTask>,
    },
}

/// `{"tasks": [...]}`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTasks {
    tasks: Vec<RawTask>,
}

/// Whether an answer's tasks must each name the item they settle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Items {
    /// `create_configuration`: every task settles an item.
    Required,
    /// Lock and snapshot tasks: about a node or the whole model, an item
    /// may be named (or null).
    Optional,
}

/// Parses a `{"tasks": [...]}` answer.
pub fn parse_tasks(answer: &Json, items: Items) -> Result<Vec<PluginTask>, String> {
    let raw = RawTasks::deserialize(answer).map_err(|e| format!("the answer: {e}"))?;
    flatten(raw.tasks, items)
}

/// Parses one task (a lock or unlock task): never an ordered list.
pub fn parse_one(answer: &Json, what: &str) -> Result<PluginTask, String> {
    let raw = RawTask::deserialize(answer).map_err(|e| format!("{what}: {e}"))?;
    if matches!(raw, RawTask::Ordered { .. }) {
        return Err(format!("{what}: an ordered list is not one task"));
    }
    let mut tasks = flatten(vec![raw], Items::Optional).map_err(|e| format!("{what}: {e}"))?;
    Ok(tasks.remove(0))
}

/// The tasks in answer order, ordered lists made into chains, ids given
/// and checked, `requires` told apart.
fn flatten(raw: Vec<RawTask>, items: Items) -> Result<Vec<PluginTask>, String> {
    let mut tasks = Vec::new();
    for (at, task) in raw.into_iter().enumerate() {
        add(task, &format!("tasks[{at}]"), None, &mut tasks)?;
        if tasks.len() > MAX_TASKS {
            return Err(format!(
                "more than {MAX_TASKS} tasks in one answer; a plan of that many is not \
                 one a person or a machine can follow"
            ));
        }
    }
    if items == Items::Required {
        if let Some((at, _)) = tasks.iter().enumerate().find(|(_, t)| t.item.is_empty()) {
            return Err(format!(
                "task '{}' names no item: every task of create_configuration settles one",
                escape(&tasks[at].id)
            ));
        }
    }
    let mut seen = std::collections::HashSet::new();
    for task in &tasks {
        if !seen.insert(task.id.as_str()) {
            return Err(format!("the task id '{}' is used twice", escape(&task.id)));
        }
    }
    for task in &tasks {
        let lists = [
            ("requires", &task.requires),
            ("notify", &task.notify),
            ("subscribe", &task.subscribe),
        ];
        for (word, requirement) in lists
            .into_iter()
            .flat_map(|(word, list)| list.iter().map(move |r| (word, r)))
        {
            if let Requirement::Task(id) = requirement {
                if !seen.contains(id.as_str()) {
                    return Err(format!(
                        "task '{}' {} '{}', which is no task id of this answer, no \
                         TYPE[TITLE] and no /TYPE/NAME",
                        escape(&task.id),
                        word,
                        escape(id)
                    ));
                }
            }
        }
    }
    Ok(tasks)
}

fn escape(text: &str) -> String {
    crate::text::escape(text)
}

/// Adds `raw` (at `path` in the answer) to `tasks`; `after` is the id of
/// the task before it in an ordered list.
fn add(
    raw: RawTask,
    path: &str,
    after: Option<&str>,
    tasks: &mut Vec<PluginTask>,
) -> Result<(), String> {
    let default_id = || format!("#{}", tasks.len() + 1);
    let (item, id, (requires, notify, subscribe), description, kind) = match raw {
        RawTask::Ordered { item, tasks: inner } => {
            let mut before: Option<String> = after.map(str::to_owned);
            for (at, task) in inner.into_iter().enumerate() {
                // A list within a list is opened: its tasks join the chain.
                let inner_path = format!("{path}.tasks[{at}]");
                let list_item = item.as_deref().unwrap_or_default();
                if task_item(&task) != list_item {
                    return Err(format!(
                        "{inner_path}: its item '{}' is not the list's '{}'",
                        escape(task_item(&task)),
                        escape(list_item)
                    ));
                }
                add(task, &inner_path, before.as_deref(), tasks)?;
                before = tasks.last().map(|t| t.id.clone());
            }
            return Ok(());
        }
        RawTask::Config {
            item,
            id,
            type_name,
            title,
            attributes,
            requires,
            notify,
            subscribe,
            replaces,
            description,
        } => {
            if type_name.is_empty() || title.is_empty() {
                return Err(format!("{path}: a config task needs a type and a title"));
            }
            let kind = TaskKind::Config {
                type_name,
                title,
                attributes,
                replaces,
            };
            (item, id, (requires, notify, subscribe), description, kind)
        }
        RawTask::Callback {
            item,
            id,
            callback,
            args,
            kwargs,
            requires,
            notify,
            subscribe,
            description,
        } => {
            if callback.is_empty() {
                return Err(format!("{path}: a callback task needs a callback name"));
            }
            let kind = TaskKind::Callback {
                callback,
                args,
                kwargs,
            };
            (item, id, (requires, notify, subscribe), description, kind)
        }
        RawTask::Remote {
            item,
            id,
            command,
            requires,
            notify,
            subscribe,
            description,
        } => {
            if command.first().is_none_or(|argv0| argv0.is_empty()) {
                return Err(format!(
                    "{path}: a remote task needs a command [argv0, ...]"
                ));
            }
            if command.iter().any(|arg| arg.contains('\0')) {
                return Err(format!("{path}: a command argument holds a NUL byte"));
            }
            (
                item,
                id,
                (requires, notify, subscribe),
                description,
                TaskKind::Remote { command },
            )
        }
    };
    let item = item.unwrap_or_default();
    if !item.is_empty() && !item.starts_with('/') {
        return Err(format!(
            "{path}: item '{}' is not a vpath /TYPE/NAME",
            escape(&item)
        ));
    }
    let id = id.unwrap_or_else(default_id);
    if id.is_empty() {
        return Err(format!("{path}: an empty id"));
    }
    let mut requirements: Vec<Requirement> = requires.iter().map(|r| requirement(r)).collect();
    if let Some(after) = after {
        requirements.push(Requirement::Task(after.to_owned()));
    }
    tasks.push(PluginTask {
        item,
        id,
        description: description.unwrap_or_default(),
        requires: requirements,
        notify: notify.iter().map(|r| requirement(r)).collect(),
        subscribe: subscribe.iter().map(|r| requirement(r)).collect(),
        kind,
    });
    Ok(())
}

fn task_item(raw: &RawTask) -> &str {
    match raw {
        RawTask::Config { item, .. }
        | RawTask::Callback { item, .. }
        | RawTask::Remote { item, .. }
        | RawTask::Ordered { item, .. } => item.as_deref().unwrap_or_default(),
    }
}

/// A `requires` entry: `/...` a vpath, `TYPE[TITLE]` a resource, anything
/// else a task id.
fn requirement(text: &str) -> Requirement {
    if text.starts_with('/') {
        return Requirement::Item(text.to_owned());
    }
    // As manifests read `TYPE[NAME]`: the name runs to the last `]`.
    let resource = text.split_once('[').and_then(|(type_query, rest)| {
        let title = rest.strip_suffix(']')?;
        let plain = !type_query.is_empty() && type_query == type_query.trim();
        (plain && !title.is_empty()).then(|| Requirement::Resource {
            type_query: type_query.to_owned(),
            title: title.to_owned(),
        })
    });
    resource.unwrap_or_else(|| Requirement::Task(text.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse_tasks_required(answer: &Json) -> Result<Vec<PluginTask>, String> {
        parse_tasks(answer, Items::Required)
    }

    #[test]
    fn ordered_lists_become_chains_and_ids_are_given() {
        let tasks = parse_tasks_required(&json!({"tasks": [
            {"kind": "config", "item": "/webapp/a", "type": "file", "title": "/x",
             "attributes": {"content": "hi"}},
            {"kind": "ordered", "item": "/webapp/a", "tasks": [
                {"kind": "remote", "item": "/webapp/a", "id": "r", "command": ["true"]},
                {"kind": "callback", "item": "/webapp/a", "callback": "check",
                 "requires": ["file[/x]", "/user/a", "#1"]}
            ]}
        ]}))
        .unwrap();
        let ids: Vec<&str> = tasks.iter().map(|t| t.id.as_str()).collect();
        assert_eq!(ids, ["#1", "r", "#3"]);
        assert_eq!(
            tasks[2].requires,
            [
                Requirement::Resource {
                    type_query: "file".into(),
                    title: "/x".into()
                },
                Requirement::Item("/user/a".into()),
                Requirement::Task("#1".into()),
                Requirement::Task("r".into()),
            ]
        );
        assert!(
            tasks[1].requires.is_empty(),
            "the first of a list waits for none"
        );
    }

    #[test]
    fn a_list_within_a_list_joins_its_chain() {
        let tasks = parse_tasks_required(&json!({"tasks": [
            {"kind": "ordered", "item": "/a/b", "tasks": [
                {"kind": "callback", "item": "/a/b", "id": "x", "callback": "c"},
                {"kind": "ordered", "item": "/a/b", "tasks": [
                    {"kind": "callback", "item": "/a/b", "id": "y", "callback": "c"},
                    {"kind": "callback", "item": "/a/b", "id": "z", "callback": "c"}]},
                {"kind": "callback", "item": "/a/b", "id": "w", "callback": "c"}]}]}))
        .unwrap();
        let chain: Vec<(&str, Vec<Requirement>)> = tasks
            .iter()
            .map(|t| (t.id.as_str(), t.requires.clone()))
            .collect();
        let after = |id: &str| vec![Requirement::Task(id.to_owned())];
        assert_eq!(
            chain,
            [
                ("x", vec![]),
                ("y", after("x")),
                ("z", after("y")),
                ("w", after("z"))
            ]
        );
    }

    #[test]
    fn answers_against_the_protocol_are_refused() {
        for (answer, expected) in [
            (json!({"task": []}), "unknown field"),
            (
                json!({"tasks": [{"kind": "shell", "item": "/a/b"}]}),
                "unknown variant",
            ),
            (
                json!({"tasks": [{"kind": "remote", "item": "/a/b", "command": []}]}),
                "needs a command",
            ),
            (
                json!({"tasks": [{"kind": "callback", "item": "a", "callback": "x"}]}),
                "not a vpath",
            ),
            (
                json!({"tasks": [
                    {"kind": "callback", "item": "/a/b", "id": "x", "callback": "c"},
                    {"kind": "callback", "item": "/a/b", "id": "x", "callback": "d"}]}),
                "used twice",
            ),
            (
                json!({"tasks": [{"kind": "callback", "item": "/a/b", "callback": "c",
                                  "requires": ["nope"]}]}),
                "no task id",
            ),
            (
                json!({"tasks": [{"kind": "ordered", "item": "/a/b", "tasks": [
                    {"kind": "callback", "item": "/a/c", "callback": "c"}]}]}),
                "not the list's",
            ),
            (
                json!({"tasks": [{"kind": "config", "item": "/a/b", "type": "file",
                                  "title": "/x", "colour": 1}]}),
                "unknown field",
            ),
        ] {
            let error = parse_tasks_required(&answer).unwrap_err();
            assert!(error.contains(expected), "{expected}: {error}");
        }
    }
}
