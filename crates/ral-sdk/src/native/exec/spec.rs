//! What an exec's values ask for, checked: the command as an argv and
//! how it is shown, its guards, where, as whom, within how long, and
//! which exit statuses mean success. Every value is checked before
//! anything runs; a problem names the attribute and the value.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value as Json;

use crate::{CallError, CallResult, Resource};

/// How long a command or a check may take when `timeout` is not given
/// (Puppet's default).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);

/// The shell `shell: true` hands a text to.
const SHELL: &str = "/bin/sh";

/// One command ready to run.
#[derive(Debug, Clone, PartialEq)]
pub struct Command {
    pub argv: Vec<String>,
    /// As it is shown in messages: the text written, or the argv's words
    /// joined by spaces.
    pub shown: String,
}

/// An exec's values, checked.
#[derive(Debug, Clone)]
pub struct Spec {
    pub command: Command,
    /// The path (as written, absolute) whose existence below the root
    /// means the work is done.
    pub creates: Option<String>,
    pub onlyif: Option<Command>,
    pub unless: Option<Command>,
    pub refreshonly: bool,
    /// Where the command runs: an absolute path below the root (`/`, the
    /// root itself, by default).
    pub cwd: String,
    /// `KEY=VALUE` pairs added to the provider's environment.
    pub environment: Vec<(String, String)>,
    /// The user it runs as, when one is named (looked up when it runs:
    /// see `users`).
    pub user: Option<String>,
    pub timeout: Duration,
    pub returns: Vec<i64>,
}

impl Spec {
    /// Checks the values of exec `name` (the manifest's, as a get is told
    /// them, or what a set was given); reads nothing.
    pub fn parse(name: &str, values: &Resource) -> CallResult<Spec> {
        let shell = match values.get("shell") {
            None | Some(Json::Null) => false,
            Some(Json::Bool(shell)) => *shell,
            Some(other) => return Err(bad("shell", other, "it must be true or false")),
        };
        let command = match values.get("command") {
            None | Some(Json::Null) => parse_command(&Json::from(name), shell, "name")?,
            Some(value) => parse_command(value, shell, "command")?,
        };
        let check = |attr: &str| match values.get(attr) {
            None | Some(Json::Null) => Ok(None),
            Some(value) => parse_command(value, shell, attr).map(Some),
        };
        let creates = match values.get("creates") {
            None | Some(Json::Null) => None,
            Some(value) => Some(absolute(value, "creates")?),
        };
        let cwd = match values.get("cwd") {
            None | Some(Json::Null) => "/".to_owned(),
            Some(value) => absolute(value, "cwd")?,
        };
        let user = match values.get("user") {
            None | Some(Json::Null) => None,
            Some(Json::String(user)) => Some(user.clone()),
            Some(other) => return Err(bad("user", other, "it must be a user name or uid")),
        };
        Ok(Spec {
            command,
            creates,
            onlyif: check("onlyif")?,
            unless: check("unless")?,
            refreshonly: flag(values, "refreshonly")?,
            cwd,
            environment: environment(values.get("environment"))?,
            user,
            timeout: timeout(values.get("timeout"))?,
            returns: returns(values.get("returns"))?,
        })
    }
}

/// `root` joined with the absolute `path`.
pub fn below(root: &Path, path: &str) -> PathBuf {
    root.join(path.trim_start_matches('/'))
}

fn bad(attr: &str, value: &Json, why: &str) -> CallError {
    let shown = crate::text::clean(&value.to_string());
    CallError::new(format!("{attr}: {shown} is not valid: {why}"))
}

fn flag(values: &Resource, attr: &str) -> CallResult<bool> {
    match values.get(attr) {
        None | Some(Json::Null) => Ok(false),
        Some(Json::Bool(set)) => Ok(*set),
        Some(other) => Err(bad(attr, other, "it must be true or false")),
    }
}

/// A command of `attr`: an argv list as it is, a text split into words
/// (or given to the shell whole with `shell`).
fn parse_command(value: &Json, shell: bool, attr: &str) -> CallResult<Command> {
    let argv: Vec<String> = match (value, shell) {
        (Json::String(text), true) => {
            if text.trim().is_empty() {
                return Err(bad(attr, value, "the command is empty"));
            }
            vec![SHELL.to_owned(), "-c".to_owned(), text.clone()]
        }
        (Json::String(text), false) => shell_words::split(text)
            .map_err(|e| bad(attr, value, &format!("its words cannot be told apart: {e}")))?,
        (Json::Array(words), false) => words
            .iter()
            .map(|word| word.as_str().map(str::to_owned))
            .collect::<Option<_>>()
            .ok_or_else(|| bad(attr, value, "a command's words must be texts"))?,
        (Json::Array(_), true) => {
            return Err(bad(
                attr,
                value,
                "with shell: true a command is one text for /bin/sh -c, not a list of words",
            ))
        }
        _ => return Err(bad(attr, value, "it must be a text or a list of words")),
    };
    if argv.first().is_none_or(String::is_empty) {
        return Err(bad(attr, value, "the command is empty"));
    }
    if argv.iter().any(|word| word.contains('\0')) {
        return Err(bad(attr, value, "a command cannot hold a NUL character"));
    }
    // Shown on one line of a message: a list's words as they are, so that
    // a secret among them is found whole and redacted.
    let shown = crate::text::clean(&match value {
        Json::String(text) => text.clone(),
        _ => argv.join(" "),
    });
    Ok(Command { argv, shown })
}

/// An absolute path of `attr`, without NUL or `..` (which could leave
/// the root).
fn absolute(value: &Json, attr: &str) -> CallResult<String> {
    let Json::String(path) = value else {
        return Err(bad(attr, value, "it must be a path"));
    };
    if !path.starts_with('/') {
        return Err(bad(
            attr,
            value,
            "it must be an absolute path (starting with '/')",
        ));
    }
    if path.contains('\0') || Path::new(path).components().any(|c| c.as_os_str() == "..") {
        return Err(bad(attr, value, "a path may not hold NUL or '..'"));
    }
    Ok(path.clone())
}

fn environment(value: Option<&Json>) -> CallResult<Vec<(String, String)>> {
    let words = match value {
        None | Some(Json::Null) => return Ok(Vec::new()),
        Some(Json::Array(words)) => words,
        Some(other) => {
            return Err(bad(
                "environment",
                other,
                "it must be a list of KEY=VALUE texts",
            ))
        }
    };
    words
        .iter()
        .map(|word| {
            let pair = word.as_str().and_then(|text| text.split_once('='));
            match pair {
                Some((key, value))
                    if !key.is_empty()
                        && !key.contains('\0')
                        && !value.contains('\0')
                        && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                        && !key.starts_with(|c: char| c.is_ascii_digit()) =>
                {
                    Ok((key.to_owned(), value.to_owned()))
                }
                // The value may be a secret: only the key is named.
                _ => Err(CallError::new(match word.as_str() {
                    Some(text) => match text.split_once('=') {
                        Some((key, _)) => format!(
                            "environment: '{}' is not a variable name (KEY=VALUE)",
                            crate::text::clean(key)
                        ),
                        None => "environment: an entry has no '=' (KEY=VALUE)".to_owned(),
                    },
                    None => "environment: an entry is not a text (KEY=VALUE)".to_owned(),
                })),
            }
        })
        .collect()
}

fn timeout(value: Option<&Json>) -> CallResult<Duration> {
    match value {
        None | Some(Json::Null) => Ok(DEFAULT_TIMEOUT),
        Some(Json::Number(n)) if n.as_u64().is_some_and(|s| (1..=86400).contains(&s)) => {
            Ok(Duration::from_secs(n.as_u64().unwrap_or(1)))
        }
        Some(other) => Err(bad("timeout", other, "it must be 1 to 86400 seconds")),
    }
}

fn returns(value: Option<&Json>) -> CallResult<Vec<i64>> {
    // A number, or its digits as ralsh's command line gives them.
    let status = |value: &Json| {
        (value.as_i64())
            .or_else(|| {
                let text = value.as_str()?;
                let digits = !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit());
                digits.then(|| text.parse().ok()).flatten()
            })
            .filter(|n| (0..=255).contains(n))
    };
    match value {
        None | Some(Json::Null) => Ok(vec![0]),
        Some(Json::Array(all)) if all.is_empty() => Err(bad(
            "returns",
            &Json::Array(Vec::new()),
            "it names at least one status",
        )),
        Some(Json::Array(all)) => all
            .iter()
            .map(status)
            .collect::<Option<_>>()
            .ok_or_else(|| {
                bad(
                    "returns",
                    &Json::Array(all.clone()),
                    "each status must be 0 to 255",
                )
            }),
        // `returns=0,2` on a command line.
        Some(Json::String(text)) if text.contains(',') => text
            .split(',')
            .map(|one| status(&Json::from(one)))
            .collect::<Option<_>>()
            .ok_or_else(|| {
                bad(
                    "returns",
                    &Json::from(text.as_str()),
                    "each status must be 0 to 255",
                )
            }),
        Some(one) => status(one)
            .map(|n| vec![n])
            .ok_or_else(|| bad("returns", one, "a status must be 0 to 255")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(values: Json) -> CallResult<Spec> {
        Spec::parse("title", values.as_object().unwrap())
    }

    #[test]
    fn a_text_is_split_into_words_and_never_given_to_a_shell() {
        let spec = parse(json!({"command": "printf '%s' 'a b' $HOME;"})).unwrap();
        assert_eq!(spec.command.argv, ["printf", "%s", "a b", "$HOME;"]);
        let spec = parse(json!({"command": "echo $HOME | cat", "shell": true})).unwrap();
        assert_eq!(spec.command.argv, ["/bin/sh", "-c", "echo $HOME | cat"]);
        let spec = parse(json!({"command": ["touch", "a b"]})).unwrap();
        assert_eq!(spec.command.shown, "touch a b");
        // The title is the command when none is given.
        let spec = Spec::parse("newaliases -v", &Resource::new()).unwrap();
        assert_eq!(spec.command.argv, ["newaliases", "-v"]);
    }

    #[test]
    fn defaults_are_puppet_s() {
        let spec = parse(json!({"command": "true"})).unwrap();
        assert_eq!(spec.returns, [0]);
        assert_eq!(spec.timeout, DEFAULT_TIMEOUT);
        assert_eq!(spec.cwd, "/");
        assert!(!spec.refreshonly && spec.creates.is_none() && spec.user.is_none());
        let spec = parse(
            json!({"command": "true", "returns": [0, 2], "cwd": "/srv/app",
            "timeout": 5, "refreshonly": true, "creates": "/x"}),
        )
        .unwrap();
        assert_eq!(spec.returns, [0, 2]);
        for written in [json!("0,2"), json!(["0", 2])] {
            let spec = parse(json!({"command": "true", "returns": written})).unwrap();
            assert_eq!(spec.returns, [0, 2], "{written}");
        }
        assert_eq!(parse(json!({"returns": "3"})).unwrap().returns, [3]);
        for loose in ["+2", "2 ", ""] {
            assert!(parse(json!({"returns": loose})).is_err(), "{loose:?}");
        }
        assert_eq!(spec.cwd, "/srv/app");
        assert_eq!(spec.timeout, Duration::from_secs(5));
        assert!(spec.refreshonly);
        assert_eq!(spec.creates.as_deref(), Some("/x"));
    }

    #[test]
    fn bad_values_are_refused_naming_attribute_and_value() {
        for (values, said) in [
            (
                json!({"command": ""}),
                "command: \"\" is not valid: the command is empty",
            ),
            (
                json!({"command": "echo 'open"}),
                "command: \"echo 'open\" is not valid",
            ),
            (
                json!({"command": ["a"], "shell": true}),
                "not a list of words",
            ),
            (json!({"command": [1]}), "a command's words must be texts"),
            (
                json!({"creates": "relative"}),
                "creates: \"relative\" is not valid",
            ),
            (json!({"cwd": "/a/../../etc"}), "cwd: \"/a/../../etc\""),
            (json!({"returns": 256}), "returns: 256 is not valid"),
            (
                json!({"returns": []}),
                "returns: [] is not valid: it names at least",
            ),
            (json!({"timeout": 0}), "timeout: 0 is not valid"),
            (json!({"onlyif": ""}), "onlyif: \"\" is not valid"),
        ] {
            let err = parse(values.clone()).unwrap_err().message;
            assert!(err.contains(said), "{values}: {err}");
        }
    }

    #[test]
    fn an_environment_is_key_value_and_a_bad_one_never_shows_its_value() {
        let spec = parse(json!({"command": "env", "environment": ["A_1=x=y", "B="]})).unwrap();
        assert_eq!(
            spec.environment,
            [("A_1".into(), "x=y".into()), ("B".into(), String::new())]
        );
        let err = parse(json!({"environment": ["1BAD=secret-value"]}))
            .unwrap_err()
            .message;
        assert!(
            err.contains("'1BAD'") && !err.contains("secret-value"),
            "{err}"
        );
        let err = parse(json!({"environment": ["secret-value"]}))
            .unwrap_err()
            .message;
        assert!(
            err.contains("has no '='") && !err.contains("secret"),
            "{err}"
        );
    }
}
