//! A provider in Rust on ral's provider SDK: the worked example of
//! docs/providers.md ("Rust providers"), which `ral check` passes. It
//! manages what the Python example_tokens does, API tokens in
//! /etc/example-tokens, one "NAME TOKEN" line each.

use ral_sdk::files::{Attrs, Edit, Lock, Root};
use ral_sdk::serve::{self, check_should};
use ral_sdk::text::quoted;
use ral_sdk::{
    Call, CallError, CallResult, Change, Convention, Outcome, Provider, Resource, Update,
};
use serde_json::{json, Value};

const TOKENS: &str = "etc/example-tokens";

const METADATA: &str = r#"---
provider:
  type: token
  name: native_tokens
  invoke: json
  actions: [get, set]
  suitable: true
  features: [supports_noop]
  desc: API tokens in /etc/example-tokens, one "NAME TOKEN" line each.
  attributes:
    name:
      desc: the token's name (one word)
    ensure:
      desc: whether the token is there
      type: enum[present, absent]
    token:
      desc: the token itself (one word)
      sensitive: true
"#;

struct Tokens;

/// The file's tokens by name, in file order (the first line of a name
/// wins).
fn parse(data: Option<Vec<u8>>) -> Vec<(String, String)> {
    let text = String::from_utf8_lossy(&data.unwrap_or_default()).into_owned();
    let mut tokens: Vec<(String, String)> = Vec::new();
    for line in text.lines() {
        let (name, token) = line.split_once(' ').unwrap_or((line, ""));
        if !tokens.iter().any(|(known, _)| known == name) {
            tokens.push((name.to_owned(), token.to_owned()));
        }
    }
    tokens
}

impl Provider for Tokens {
    fn metadata(&self) -> &'static str {
        METADATA
    }

    fn convention(&self) -> Convention {
        Convention::Json
    }

    fn get(&self, call: &Call, names: &[String]) -> CallResult<Vec<Resource>> {
        let data = Root::open(&call.root)?
            .read(TOKENS, true)?
            .map(|(data, _)| data);
        let resources = parse(data)
            .into_iter()
            .filter(|(name, _)| names.is_empty() || names.contains(name))
            .map(|(name, token)| {
                let resource = json!({"name": name, "ensure": "present", "token": token});
                resource.as_object().cloned().unwrap_or_default()
            });
        // A name left out does not exist: the SDK answers it as absent.
        Ok(resources.collect())
    }

    fn set(&self, call: &Call, updates: &[Update]) -> CallResult<Vec<Outcome>> {
        let target = Root::open(&call.root)?.file(TOKENS, true, None)?;
        // The lock beside the file; the file is read again under it, and
        // replaced whole (synced, renamed) on commit; nothing under noop.
        let mut edit = Edit::begin(Lock::beside(&target), call)?;
        let mut tokens = parse(edit.read(&target)?);
        let outcomes = updates
            .iter()
            .map(|update| change(call, &mut tokens, update))
            .collect();
        let text: String = tokens.iter().map(|(n, t)| format!("{n} {t}\n")).collect();
        edit.write(&target, text, Attrs::new_mode(0o600))?;
        edit.commit()?;
        Ok(outcomes)
    }
}

/// One update; an error fails this token alone.
fn change(call: &Call, tokens: &mut Vec<(String, String)>, update: &Update) -> Outcome {
    let ensure = check_should(
        update,
        &["ensure", "token"],
        Some(&["present", "absent"]),
        &[],
    )?;
    let name = update.name.as_str();
    if name.is_empty() || name.contains(char::is_whitespace) {
        return Err(CallError::new(format!(
            "name: {} is not one word",
            quoted(name)
        )));
    }
    let at = tokens.iter().position(|(known, _)| known == name);
    if ensure.and_then(Value::as_str) == Some("absent") {
        let Some(at) = at else {
            return Ok(Vec::new());
        };
        return call.log.deleting(name, || {
            tokens.remove(at);
            Ok(vec![Change::new("ensure", "present", "absent")])
        });
    }
    let old = at.map(|at| tokens[at].1.clone());
    let token = match update.should.get("token") {
        Some(token) => token.as_str().unwrap_or_default().to_owned(),
        None => old.clone().unwrap_or_default(),
    };
    if token.is_empty() || token.contains(char::is_whitespace) {
        return Err(CallError::new(format!(
            "token: one word, needed to create {}",
            quoted(name)
        )));
    }
    if Some(&token) == old.as_ref() {
        return Ok(Vec::new());
    }
    let was = old.clone().map_or(Value::Null, Value::from);
    let work = || {
        let mut changes = vec![Change::new("token", was, token.as_str())];
        match at {
            Some(at) => tokens[at].1 = token.clone(),
            None => {
                tokens.push((name.to_owned(), token.clone()));
                changes.push(Change::new("ensure", "absent", "present"));
            }
        }
        Ok(changes)
    };
    match old {
        None => call.log.creating(name, work),
        Some(_) => call.log.updating(name, work),
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    std::process::exit(serve::main(&Tokens, &args));
}
