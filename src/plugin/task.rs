//! The tasks a plugin answers with (`create_configuration`,
//! `create_lock_tasks`, `create_snapshot_plan`), parsed strictly into
//! typed tasks: config (a resource), callback (a call of the plugin) and
//! remote (a command), with ordered lists (nested ones opened) flattened
//! into tasks that each require the one before. Every id is unique within
//! one answer (a task without one gets `#N`, its position), and every
//! `requires` entry is told apart: a task of the answer (found by its id
//! once, and known by its position from then on), a resource
//! `type[title]`, or an item's vpath.
//!
//! An answer is bounded in tasks and in requirements as well as in bytes,
//! and reading it costs in proportion to its size: a task answer is read
//! from its text straight into tasks, each id is looked up once, and a
//! task stands for another by its position, so a plan of many
//! requirements holds no copy of an id for each.

use std::borrow::Cow;
use std::collections::HashMap;

use serde::Deserialize;
use serde_json::{Map, Value as Json};

/// The most tasks one answer may hold (ordered lists opened): far more
/// than any model needs (the bench expands 1,000 items into 5,000), and
/// few enough that planning them stays a matter of seconds.
pub const MAX_TASKS: usize = 100_000;

/// The most requirements one answer may hold: the entries of every
/// task's `requires`, `notify` and `subscribe`, and the link of each task
/// of an ordered list to the one before. Twenty for each of the most
/// tasks an answer may hold; a plan of that many edges is made in about
/// a second (`bench/plugins.py`), where the 64 MiB an answer may take
/// could hold several times as many.
pub const MAX_REQUIREMENTS: usize = 2_000_000;

/// What is wrong with a task answer. Ids, items and requirements are
/// kept as the plugin wrote them and escaped when shown; `at` is where in
/// the answer a task stands (`tasks[2].tasks[0]`).
#[derive(Debug, thiserror::Error)]
pub enum AnswerError {
    /// The answer, or one task (`lock`, `unlock`), is not of the shape
    /// of tasks.
    #[error("{what}: {error}")]
    Shape {
        what: String,
        error: serde_json::Error,
    },
    /// A lock tasks answer with a key other than `lock` and `unlock`.
    #[error("the answer: unknown field '{key}'")]
    UnknownField { key: String },
    /// A lock tasks answer without its `lock` or `unlock` task.
    #[error("the answer has no '{key}' task")]
    NoTask { key: &'static str },
    /// A lock or unlock task that is an ordered list.
    #[error("{what}: an ordered list is not one task")]
    NotOneTask { what: String },
    /// What is wrong with the lock or unlock task `what`.
    #[error("{what}: {error}")]
    In {
        what: String,
        error: Box<AnswerError>,
    },
    #[error(
        "more than {MAX_TASKS} tasks in one answer; a plan of that many is not one a person or a \
         machine can follow"
    )]
    TooManyTasks,
    #[error(
        "{count} requirements (entries of requires, notify and subscribe, and the links of \
         ordered lists) in one answer, more than {MAX_REQUIREMENTS}; a plugin orders its tasks \
         with fewer (an ordered list, or a task requiring the last of those before it, orders as \
         much as one requiring them all)"
    )]
    TooManyRequirements { count: usize },
    /// A `create_configuration` task without an item.
    #[error("task '{}' names no item: every task of create_configuration settles one", escape(.id))]
    NoItem { id: String },
    #[error("the task id '{}' is used twice", escape(.id))]
    DuplicateId { id: String },
    /// A `requires`, `notify` or `subscribe` entry that names nothing.
    #[error(
        "task '{}' {list} '{}', which is no task id of this answer, no TYPE[TITLE] and no \
         /TYPE/NAME",
        escape(.id),
        escape(.requirement)
    )]
    UnknownRequirement {
        id: String,
        list: &'static str,
        requirement: String,
    },
    /// A task of an ordered list about another item than the list.
    #[error("{at}: its item '{}' is not the list's '{}'", escape(.item), escape(.list_item))]
    ItemNotTheList {
        at: String,
        item: String,
        list_item: String,
    },
    #[error("{at}: a config task needs a type and a title")]
    NoTypeOrTitle { at: String },
    #[error("{at}: a callback task needs a callback name")]
    NoCallback { at: String },
    #[error("{at}: a remote task needs a command [argv0, ...]")]
    NoCommand { at: String },
    #[error("{at}: a command argument holds a NUL byte")]
    NulInCommand { at: String },
    #[error("{at}: item '{}' is not a vpath /TYPE/NAME", escape(.item))]
    NotAVpath { at: String, item: String },
    #[error("{at}: an empty id")]
    EmptyId { at: String },
}

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
    /// Another task of the same answer, by its position among the
    /// answer's tasks (ordered lists opened).
    Task(usize),
    /// A resource (of the manifest or a config task), `type[title]`:
    /// boxed, so that the many requirements on tasks stay small.
    Resource(Box<ResourceName>),
    /// Every task of a model item, `/TYPE/NAME`.
    Item(String),
}

/// A resource a task names, `TYPE[TITLE]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceName {
    pub type_query: String,
    pub title: String,
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

/// `requires`, `notify` and `subscribe` as written: borrowed from the
/// answer's text where they can be (a name without escapes).
type Written<'a> = Vec<Cow<'a, str>>;

#[derive(Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
enum RawTask<'a> {
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
        #[serde(default, borrow)]
        requires: Written<'a>,
        #[serde(default, borrow)]
        notify: Written<'a>,
        #[serde(default, borrow)]
        subscribe: Written<'a>,
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
        #[serde(default, borrow)]
        requires: Written<'a>,
        #[serde(default, borrow)]
        notify: Written<'a>,
        #[serde(default, borrow)]
        subscribe: Written<'a>,
        #[serde(default)]
        description: Option<String>,
    },
    Remote {
        #[serde(default)]
        item: Option<String>,
        #[serde(default)]
        id: Option<String>,
        command: Vec<String>,
        #[serde(default, borrow)]
        requires: Written<'a>,
        #[serde(default, borrow)]
        notify: Written<'a>,
        #[serde(default, borrow)]
        subscribe: Written<'a>,
        #[serde(default)]
        description: Option<String>,
    },
    Ordered {
        #[serde(default)]
        item: Option<String>,
        #[serde(borrow)]
        tasks: Vec<RawTask<'a>>,
    },
}

/// `{"tasks": [...]}`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTasks<'a> {
    #[serde(borrow)]
    tasks: Vec<RawTask<'a>>,
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
pub fn parse_tasks(answer: &Json, items: Items) -> Result<Vec<PluginTask>, AnswerError> {
    let raw = RawTasks::deserialize(answer).map_err(|error| AnswerError::Shape {
        what: "the answer".to_owned(),
        error,
    })?;
    flatten(raw.tasks, items)
}

/// Parses a `{"tasks": [...]}` answer from its text, with no document of
/// values made of it first (which would cost several times the text);
/// `None` when the text is no such answer, for the caller to say why from
/// the document (an error document, not JSON, an unknown key).
pub fn parse_tasks_text(text: &str, items: Items) -> Option<Result<Vec<PluginTask>, AnswerError>> {
    let raw: RawTasks = serde_json::from_str(text).ok()?;
    Some(flatten(raw.tasks, items))
}

/// Parses one task (a lock or unlock task): never an ordered list.
pub fn parse_one(answer: &Json, what: &str) -> Result<PluginTask, AnswerError> {
    let raw = RawTask::deserialize(answer).map_err(|error| AnswerError::Shape {
        what: what.to_owned(),
        error,
    })?;
    if matches!(raw, RawTask::Ordered { .. }) {
        return Err(AnswerError::NotOneTask {
            what: what.to_owned(),
        });
    }
    let mut tasks = flatten(vec![raw], Items::Optional).map_err(|error| AnswerError::In {
        what: what.to_owned(),
        error: Box::new(error),
    })?;
    Ok(tasks.remove(0))
}

/// A task as `add` leaves it: its requirements still as written.
struct Flat<'a> {
    task: PluginTask,
    /// `requires`, `notify` and `subscribe`.
    written: [Written<'a>; 3],
    /// The task before it in an ordered list, by position.
    after: Option<usize>,
}

/// The words of a task's three lists, in messages.
const LISTS: [&str; 3] = ["requires", "notify", "subscribe"];

/// The tasks in answer order, ordered lists made into chains, ids given
/// and checked, `requires` told apart.
fn flatten(raw: Vec<RawTask>, items: Items) -> Result<Vec<PluginTask>, AnswerError> {
    let mut flat = Vec::new();
    for (at, task) in raw.into_iter().enumerate() {
        add(task, &format!("tasks[{at}]"), None, &mut flat)?;
        if flat.len() > MAX_TASKS {
            return Err(AnswerError::TooManyTasks);
        }
    }
    let count = requirement_count(&flat);
    if count > MAX_REQUIREMENTS {
        return Err(AnswerError::TooManyRequirements { count });
    }
    if items == Items::Required {
        if let Some(unnamed) = flat.iter().find(|f| f.task.item.is_empty()) {
            return Err(AnswerError::NoItem {
                id: unnamed.task.id.clone(),
            });
        }
    }
    let mut position: HashMap<String, usize> = HashMap::with_capacity(flat.len());
    for (at, f) in flat.iter().enumerate() {
        if position.insert(f.task.id.clone(), at).is_some() {
            return Err(AnswerError::DuplicateId {
                id: f.task.id.clone(),
            });
        }
    }
    // Each task's lists as written are let go once read: an answer of
    // many requirements is not held twice.
    let mut tasks = Vec::with_capacity(flat.len());
    for Flat {
        mut task,
        written,
        after,
    } in flat
    {
        let lists = [&mut task.requires, &mut task.notify, &mut task.subscribe];
        for ((&word, written), list) in LISTS.iter().zip(written).zip(lists) {
            list.reserve_exact(written.len());
            for text in written {
                let found = requirement(&text, &position).ok_or_else(|| {
                    AnswerError::UnknownRequirement {
                        id: task.id.clone(),
                        list: word,
                        requirement: text.into_owned(),
                    }
                })?;
                list.push(found);
            }
        }
        task.requires.extend(after.map(Requirement::Task));
        tasks.push(task);
    }
    Ok(tasks)
}

/// How many requirements `flat` holds: every entry of its lists, and
/// each link of an ordered list.
fn requirement_count(flat: &[Flat]) -> usize {
    flat.iter()
        .map(|f| f.written.iter().map(Vec::len).sum::<usize>() + usize::from(f.after.is_some()))
        .sum()
}

fn escape(text: &str) -> String {
    crate::text::escape(text)
}

/// Adds `raw` (at `path` in the answer) to `tasks`; `after` is the
/// position of the task before it in an ordered list.
fn add<'a>(
    raw: RawTask<'a>,
    path: &str,
    after: Option<usize>,
    tasks: &mut Vec<Flat<'a>>,
) -> Result<(), AnswerError> {
    let parts = match raw {
        RawTask::Ordered { item, tasks: inner } => {
            return add_ordered(
                item.as_deref().unwrap_or_default(),
                inner,
                path,
                after,
                tasks,
            )
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
            let kind = config_kind(path, type_name, title, attributes, replaces)?;
            (item, id, [requires, notify, subscribe], description, kind)
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
                return Err(AnswerError::NoCallback {
                    at: path.to_owned(),
                });
            }
            let kind = TaskKind::Callback {
                callback,
                args,
                kwargs,
            };
            (item, id, [requires, notify, subscribe], description, kind)
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
            let kind = remote_kind(path, command)?;
            (item, id, [requires, notify, subscribe], description, kind)
        }
    };
    push(parts, path, after, tasks)
}

/// What one task (not an ordered list) says: its item, its id, its three
/// lists, its description, and what it does.
type Parts<'a> = (
    Option<String>,
    Option<String>,
    [Written<'a>; 3],
    Option<String>,
    TaskKind,
);

/// Adds the task of `parts` to `tasks`: its item a vpath (or none), its
/// id given or its position.
fn push<'a>(
    parts: Parts<'a>,
    path: &str,
    after: Option<usize>,
    tasks: &mut Vec<Flat<'a>>,
) -> Result<(), AnswerError> {
    let (item, id, written, description, kind) = parts;
    let default_id = || format!("#{}", tasks.len() + 1);
    let item = item.unwrap_or_default();
    if !item.is_empty() && !item.starts_with('/') {
        return Err(AnswerError::NotAVpath {
            at: path.to_owned(),
            item,
        });
    }
    let id = id.unwrap_or_else(default_id);
    if id.is_empty() {
        return Err(AnswerError::EmptyId {
            at: path.to_owned(),
        });
    }
    tasks.push(Flat {
        task: PluginTask {
            item,
            id,
            description: description.unwrap_or_default(),
            requires: Vec::new(),
            notify: Vec::new(),
            subscribe: Vec::new(),
            kind,
        },
        written,
        after,
    });
    Ok(())
}

/// Adds the tasks of an ordered list (of `list_item`), each after the one
/// before it; a list within a list is opened, its tasks joining the
/// chain.
fn add_ordered<'a>(
    list_item: &str,
    inner: Vec<RawTask<'a>>,
    path: &str,
    after: Option<usize>,
    tasks: &mut Vec<Flat<'a>>,
) -> Result<(), AnswerError> {
    let mut before = after;
    for (at, task) in inner.into_iter().enumerate() {
        let inner_path = format!("{path}.tasks[{at}]");
        if task_item(&task) != list_item {
            return Err(AnswerError::ItemNotTheList {
                at: inner_path,
                item: task_item(&task).to_owned(),
                list_item: list_item.to_owned(),
            });
        }
        add(task, &inner_path, before, tasks)?;
        before = tasks.len().checked_sub(1);
    }
    Ok(())
}

/// A config task's kind: it needs a type and a title.
fn config_kind(
    path: &str,
    type_name: String,
    title: String,
    attributes: Map<String, Json>,
    replaces: Vec<(String, String)>,
) -> Result<TaskKind, AnswerError> {
    if type_name.is_empty() || title.is_empty() {
        return Err(AnswerError::NoTypeOrTitle {
            at: path.to_owned(),
        });
    }
    Ok(TaskKind::Config {
        type_name,
        title,
        attributes,
        replaces,
    })
}

/// A remote task's kind: a command of argv0 and arguments, none holding
/// a NUL byte.
fn remote_kind(path: &str, command: Vec<String>) -> Result<TaskKind, AnswerError> {
    if command.first().is_none_or(|argv0| argv0.is_empty()) {
        return Err(AnswerError::NoCommand {
            at: path.to_owned(),
        });
    }
    if command.iter().any(|arg| arg.contains('\0')) {
        return Err(AnswerError::NulInCommand {
            at: path.to_owned(),
        });
    }
    Ok(TaskKind::Remote { command })
}

fn task_item<'r>(raw: &'r RawTask) -> &'r str {
    match raw {
        RawTask::Config { item, .. }
        | RawTask::Callback { item, .. }
        | RawTask::Remote { item, .. }
        | RawTask::Ordered { item, .. } => item.as_deref().unwrap_or_default(),
    }
}

/// A `requires` entry: `/...` a vpath, `TYPE[TITLE]` a resource, anything
/// else the id of a task of the answer (`None` when no task has it).
fn requirement(text: &str, position: &HashMap<String, usize>) -> Option<Requirement> {
    if text.starts_with('/') {
        return Some(Requirement::Item(text.to_owned()));
    }
    // As manifests read `TYPE[NAME]`: the name runs to the last `]`.
    let resource = text.split_once('[').and_then(|(type_query, rest)| {
        let title = rest.strip_suffix(']')?;
        let plain = !type_query.is_empty() && type_query == type_query.trim();
        (plain && !title.is_empty()).then(|| {
            Requirement::Resource(Box::new(ResourceName {
                type_query: type_query.to_owned(),
                title: title.to_owned(),
            }))
        })
    });
    resource.or_else(|| position.get(text).map(|&at| Requirement::Task(at)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse_tasks_required(answer: &Json) -> Result<Vec<PluginTask>, AnswerError> {
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
                Requirement::Resource(Box::new(ResourceName {
                    type_query: "file".into(),
                    title: "/x".into()
                })),
                Requirement::Item("/user/a".into()),
                // #1, then r before it in its list.
                Requirement::Task(0),
                Requirement::Task(1),
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
        let after = |at: usize| vec![Requirement::Task(at)];
        assert_eq!(
            chain,
            [
                ("x", vec![]),
                ("y", after(0)),
                ("z", after(1)),
                ("w", after(2))
            ]
        );
    }

    #[test]
    fn an_answer_read_from_its_text_is_the_one_read_from_its_document() {
        let answer = json!({"tasks": [
            {"kind": "config", "item": "/a/b", "id": "c", "type": "file", "title": "/x",
             "attributes": {"content": "hi"}, "replaces": [["file", "/y"]],
             "requires": ["d", "file[/z]", "/a/b"], "notify": ["eA"]},
            {"kind": "ordered", "item": "/a/b", "tasks": [
                {"kind": "remote", "item": "/a/b", "id": "d", "command": ["true"]},
                {"kind": "callback", "item": "/a/b", "id": "eA", "callback": "x",
                 "args": [1], "kwargs": {"k": "v"}, "subscribe": ["c"]}]}]});
        // A name with an escape is not borrowed from the text, but read.
        let text = answer
            .to_string()
            .replace(r#""notify":["eA"]"#, r#""notify":["e\u0041"]"#);
        assert!(text.contains(r"e\u0041"), "{text}");
        let read = parse_tasks_text(&text, Items::Required)
            .expect("a task answer")
            .unwrap();
        assert_eq!(read, parse_tasks_required(&answer).unwrap());
        assert_eq!(read[0].notify, [Requirement::Task(2)], "escapes are read");
        // What is no task answer is left to the document's reading.
        for text in [
            r#"{"error": {"message": "no"}}"#,
            r#"{"tasks": [], "extra": 1}"#,
            "not json",
            "[]",
        ] {
            assert!(parse_tasks_text(text, Items::Required).is_none(), "{text}");
        }
    }

    #[test]
    fn requirements_are_every_entry_of_the_lists_and_every_link_of_a_list() {
        let answer = json!({"tasks": [
            {"kind": "callback", "item": "/a/b", "id": "x", "callback": "c",
             "requires": ["y", "file[/f]"], "notify": ["/a/b"], "subscribe": ["y"]},
            {"kind": "ordered", "item": "/a/b", "tasks": [
                {"kind": "callback", "item": "/a/b", "id": "y", "callback": "c"},
                {"kind": "callback", "item": "/a/b", "id": "z", "callback": "c",
                 "requires": ["x"]},
                {"kind": "callback", "item": "/a/b", "id": "w", "callback": "c"}]}]});
        let raw = RawTasks::deserialize(&answer).unwrap();
        let mut flat = Vec::new();
        for task in raw.tasks {
            add(task, "tasks[]", None, &mut flat).unwrap();
        }
        // 4 entries of x's lists, z's 1, and the links y-z and z-w.
        assert_eq!(requirement_count(&flat), 7);
    }

    #[test]
    fn an_answer_of_more_requirements_than_the_limit_is_refused_with_their_count() {
        let mut text = String::from(
            r#"{"tasks": [{"kind": "callback", "item": "/a/b", "id": "x", "callback": "c", "requires": ["#,
        );
        for at in 0..=MAX_REQUIREMENTS {
            text.push_str(if at == 0 { r#""x""# } else { r#","x""# });
        }
        text.push_str("]}]}");
        let error = parse_tasks_text(&text, Items::Required)
            .expect("a task answer")
            .unwrap_err();
        assert!(
            matches!(error, AnswerError::TooManyRequirements { count } if count == MAX_REQUIREMENTS + 1),
            "{error:?}"
        );
        assert!(
            error.to_string().starts_with(&format!(
                "{} requirements (entries of requires, notify and subscribe, and the links of \
                 ordered lists) in one answer, more than {MAX_REQUIREMENTS}",
                MAX_REQUIREMENTS + 1
            )),
            "{error}"
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
                "task '#1' requires 'nope', which is no task id",
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
            assert!(error.to_string().contains(expected), "{expected}: {error}");
        }
    }
}
