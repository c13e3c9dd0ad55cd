//! One call of a plugin: `PLUGIN ral_action=CALL` with one JSON document
//! on stdin and one on stdout, run by the host like a provider call
//! (scrubbed environment, `RALSH_ROOT_DIR`, time limit, bounded output,
//! stderr logged, sensitive values redacted from it). A non-zero exit or
//! `{"error": {"message": ...}}` fails the call with the plugin's words;
//! an answer of the wrong shape fails it naming what is wrong.

use std::path::Path;

use serde::Deserialize;
use serde_json::{json, Map, Value as Json};

use crate::error::{Error, Result};
use crate::invoke::{Invocation, Runner};
use crate::metadata::Action;
use crate::plugin_meta::{Plugin, PluginCall};
use crate::process::Budget;

use super::model::Model;
use super::task::{parse_one, parse_tasks, parse_tasks_text, AnswerError, Items, PluginTask};

/// The largest answer accepted, in bytes.
pub const MAX_ANSWER: usize = 64 * 1024 * 1024;

/// What every call's input holds, and what a call adds to it.
pub struct CallInput<'a> {
    pub root: &'a Path,
    /// The target's name, with `-t`.
    pub target: Option<&'a str>,
    pub noop: bool,
    pub model: &'a Model,
    /// The call's own keys (`callback`, `node`, `snapshot`, ...).
    pub extra: Map<String, Json>,
    /// Sensitive values in the model, redacted from what the plugin
    /// writes on stderr.
    pub secrets: Vec<String>,
    /// The plugin's item types: of the model's sensitive values it gets
    /// only those of its own items.
    pub own_types: Vec<String>,
}

impl CallInput<'_> {
    fn document(&self) -> Json {
        let mut document = Map::new();
        document.insert(
            "ral".to_owned(),
            json!({
                "root": self.root.to_string_lossy(),
                "target": self.target,
                "noop": self.noop,
            }),
        );
        document.insert("model".to_owned(), self.model.to_json(&self.own_types));
        for (key, value) in &self.extra {
            document.insert(key.clone(), value.clone());
        }
        Json::Object(document)
    }
}

/// A `validate_model` error.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ValidationError {
    pub vpath: String,
    #[serde(default)]
    pub property: Option<String>,
    pub message: String,
}

/// An `update_model` update: properties to set on an item.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelUpdate {
    pub vpath: String,
    pub properties: Map<String, Json>,
}

/// A call's answer, typed by the call.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    Errors(Vec<ValidationError>),
    Updates(Vec<ModelUpdate>),
    Tasks(Vec<PluginTask>),
    Lock {
        lock: Box<PluginTask>,
        unlock: Box<PluginTask>,
    },
    /// A callback's (whatever else it said).
    Done,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Errors {
    errors: Vec<ValidationError>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Updates {
    updates: Vec<ModelUpdate>,
}

/// Runs `call` of `plugin` with `input` and parses its answer.
pub fn call(
    runner: &dyn Runner,
    plugin: &Plugin,
    which: PluginCall,
    input: &CallInput,
) -> Result<Answer> {
    let mut text = String::new();
    if let Err(e) = run(runner, plugin, which, input, &mut text) {
        // A plugin that failed says why in its error document, whatever
        // its exit status (the Python toolkit exits 1); without one, how
        // the call ended says it.
        let said = serde_json::from_str::<Json>(&text)
            .ok()
            .as_ref()
            .and_then(error_message);
        let label = format!("plugin::{}: ", plugin.name());
        let ended = e.to_string();
        let message =
            said.unwrap_or_else(|| ended.strip_prefix(&label).unwrap_or(&ended).to_owned());
        let message = crate::secrets::redact(&message, &input.secrets);
        return Err(Error::Plugin {
            plugin: plugin.name().to_owned(),
            call: which.as_str().to_owned(),
            message,
        });
    }
    // What a plugin says may quote a sensitive value of the model.
    parse(plugin, which, &text).map_err(|e| match e {
        Error::Plugin {
            plugin,
            call,
            message,
        } => Error::Plugin {
            plugin,
            call,
            message: crate::secrets::redact(&message, &input.secrets),
        },
        other => other,
    })
}

/// Parses `text`, what `which` of `plugin` wrote on stdout: an error
/// document fails with the plugin's message, an answer of the wrong
/// shape naming what is wrong.
pub fn parse(plugin: &Plugin, which: PluginCall, text: &str) -> Result<Answer> {
    let fail = |message: String| Error::Plugin {
        plugin: plugin.name().to_owned(),
        call: which.as_str().to_owned(),
        message,
    };
    // Tasks, the largest answers by far, are read from the text straight
    // into tasks; an answer that is not tasks is read again below, as a
    // document, to say why.
    let items = match which {
        PluginCall::CreateConfiguration => Some(Items::Required),
        PluginCall::CreateSnapshotPlan => Some(Items::Optional),
        _ => None,
    };
    if let Some(tasks) = items.and_then(|items| parse_tasks_text(text, items)) {
        return tasks
            .map(Answer::Tasks)
            .map_err(|e| fail(crate::text::escape(&e.to_string())));
    }
    let answer: Json = serde_json::from_str(text)
        .map_err(|e| fail(format!("the output is not one JSON document: {e}")))?;
    let Json::Object(map) = &answer else {
        return Err(fail("the output is not a JSON object".to_owned()));
    };
    if let Some(message) = error_message(&answer) {
        return Err(fail(message));
    }
    let shape = |error| AnswerError::Shape {
        what: "the answer".to_owned(),
        error,
    };
    let parsed = match which {
        PluginCall::ValidateModel => Errors::deserialize(&answer)
            .map(|e| Answer::Errors(e.errors))
            .map_err(shape),
        PluginCall::UpdateModel => Updates::deserialize(&answer)
            .map(|u| Answer::Updates(u.updates))
            .map_err(shape),
        PluginCall::CreateConfiguration => parse_tasks(&answer, Items::Required).map(Answer::Tasks),
        PluginCall::CreateSnapshotPlan => parse_tasks(&answer, Items::Optional).map(Answer::Tasks),
        PluginCall::CreateLockTasks => lock_tasks(map),
        PluginCall::Callback => Ok(Answer::Done),
    };
    parsed.map_err(|e| fail(crate::text::escape(&e.to_string())))
}

/// The message of an error document `{"error": {"message": ...}}`,
/// escaped for a terminal.
pub fn error_message(answer: &Json) -> Option<String> {
    let error = answer.as_object()?.get("error")?;
    Some(
        error
            .get("message")
            .and_then(Json::as_str)
            .map(crate::text::escape)
            .unwrap_or_else(|| format!("an error without a message: {error}")),
    )
}

fn lock_tasks(map: &Map<String, Json>) -> std::result::Result<Answer, AnswerError> {
    if let Some(key) = map.keys().find(|k| *k != "lock" && *k != "unlock") {
        return Err(AnswerError::UnknownField { key: key.clone() });
    }
    let one = |key: &'static str| {
        map.get(key)
            .ok_or(AnswerError::NoTask { key })
            .and_then(|task| parse_one(task, key))
    };
    Ok(Answer::Lock {
        lock: Box::new(one("lock")?),
        unlock: Box::new(one("unlock")?),
    })
}

/// Runs the call, its whole stdout into `text` (also when it fails, so
/// that what it said can be shown).
pub fn run(
    runner: &dyn Runner,
    plugin: &Plugin,
    which: PluginCall,
    input: &CallInput,
    text: &mut String,
) -> Result<()> {
    let action = Action::Plugin(which.as_str());
    let invocation = Invocation {
        stdin: Some(input.document().to_string().into_bytes()),
        max_line: MAX_ANSWER,
        max_answer: MAX_ANSWER,
        secrets: input.secrets.clone(),
        ..Invocation::plain(action, vec![format!("ral_action={action}")])
    };
    runner.run(
        &format!("plugin::{}", plugin.name()),
        &plugin.program,
        invocation,
        &mut |line| {
            text.push_str(line);
            text.push('\n');
            Ok(Budget::Continue)
        },
        &mut || Ok(()),
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lock_error(answer: Json) -> String {
        let Json::Object(map) = answer else {
            panic!("not an object");
        };
        lock_tasks(&map).unwrap_err().to_string()
    }

    #[test]
    fn a_lock_answer_names_the_task_that_is_wrong() {
        let lock = json!({"kind": "callback", "callback": "lock"});
        let answer = json!({"lock": lock, "unlock": {"kind": "callback", "callback": "unlock"}});
        let Json::Object(map) = answer else {
            unreachable!()
        };
        assert!(matches!(lock_tasks(&map), Ok(Answer::Lock { .. })));
        assert_eq!(
            lock_error(json!({"lock": lock})),
            "the answer has no 'unlock' task"
        );
        assert_eq!(
            lock_error(json!({"lock": lock, "unlock": lock, "other": 1})),
            "the answer: unknown field 'other'"
        );
        assert_eq!(
            lock_error(json!({"lock": {"kind": "ordered", "tasks": []}, "unlock": lock})),
            "lock: an ordered list is not one task"
        );
        assert_eq!(
            lock_error(
                json!({"lock": lock, "unlock": {"kind": "callback", "callback": "u", "item": "x"}})
            ),
            "unlock: tasks[0]: item 'x' is not a vpath /TYPE/NAME"
        );
        assert!(
            lock_error(json!({"lock": lock, "unlock": {"kind": "callback"}}))
                .starts_with("unlock: missing field `callback`"),
        );
    }
}
