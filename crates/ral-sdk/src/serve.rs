//! Serving a [`Provider`] in the calling convention its metadata declares:
//! reading the call (simple: `KEY=VALUE` arguments; json: `ral_action=X`
//! and a document on stdin), answering it within the sizes the host reads
//! back, and reporting errors in the convention's form, always with exit
//! status 0 as both conventions want. [`main`] does it for a program of
//! its own; the host calls [`serve`] directly for the providers it runs in
//! its own process, with the same bytes in and out.

use std::collections::HashSet;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Map, Value as Json};

use super::command::{Commands, Direct};
use super::error::{CallError, CallResult};
use super::text::{clean, clean_lines, join_words, python_json, quoted};
use super::{error_entry, Call, Deadline, Log, Outcome, Provider, Resource, Update};
pub use crate::provider::{Convention, LOCK_WAIT};

/// The longest line the host reads (keep in step with `process::MAX_LINE`).
pub const LINE_MAX: usize = 64 * 1024;
/// The most bytes of one resource the host reads (`process::MAX_ANSWER`).
pub const RESOURCE_MAX: usize = 1024 * 1024;
/// The longest json answer the host reads (`invoke::json::MAX_DOCUMENT`).
pub const DOCUMENT_MAX: usize = 64 * 1024 * 1024;
/// The variable naming the variables that hold sensitive values of a
/// simple call (`sensitive_in: env`).
pub const SENSITIVE_VAR: &str = "RALSH_SENSITIVE";

/// The environment a call sees: the variables the host gives providers.
pub type Env = [(String, String)];

fn var(env: &Env, key: &str) -> Option<String> {
    env.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone())
}

/// Runs a provider program: `args` (its arguments after the program's
/// name), its stdin and environment, its answer on stdout and its log on
/// stderr. Returns the exit status. A provider's `main` is
/// `std::process::exit(serve::main(&MyProvider, &args))`.
pub fn main(provider: &dyn Provider, args: &[String]) -> i32 {
    let env: Vec<(String, String)> = std::env::vars_os()
        .map(|(k, v)| {
            (
                k.to_string_lossy().into_owned(),
                v.to_string_lossy().into_owned(),
            )
        })
        .collect();
    let mut stdin = std::io::stdin().lock();
    let mut out = std::io::stdout().lock();
    serve(
        provider,
        args,
        &mut stdin,
        &Made {
            env: &env,
            commands: Arc::new(Direct),
            deadline: None,
        },
        &mut out,
        Box::new(std::io::stderr()),
    )
}

/// Answers one call: `args` as the program's arguments, `stdin` read only
/// by the json convention's actions that take a document. Returns the
/// exit status (0 whatever the call answered).
pub fn serve(
    provider: &dyn Provider,
    args: &[String],
    stdin: &mut dyn Read,
    made: &Made,
    out: &mut dyn Write,
    log: Box<dyn Write + Send>,
) -> i32 {
    let convention = provider.convention();
    let mut answer = Answer {
        out,
        convention,
        failed: false,
    };
    let result = match convention {
        Convention::Simple => simple(provider, args, made, log, &mut answer),
        Convention::Json => json_call(provider, args, stdin, made, log, &mut answer),
    };
    if let Err(err) = result {
        answer.error(&err);
    }
    // A reader that went away (answer.failed) is no failure of the
    // provider: it did what it did.
    0
}

/// The answer being written.
struct Answer<'o> {
    out: &'o mut dyn Write,
    convention: Convention,
    /// Writing failed (the reader went away): the rest is dropped.
    failed: bool,
}

impl Answer<'_> {
    fn write(&mut self, text: &str) {
        if self.failed {
            return;
        }
        if self.out.write_all(text.as_bytes()).is_err() || self.out.flush().is_err() {
            self.failed = true;
        }
    }

    fn error(&mut self, err: &CallError) {
        match self.convention {
            Convention::Simple => {
                let text = format!("# simple\nral_error: {}\nral_eom\n", clean(&err.message));
                self.write(&text);
            }
            Convention::Json => {
                let document = json!({"error": {"kind": err.kind.as_str(),
                                                "message": clean_lines(&err.message)}});
                self.write(&format!("{}\n", python_json(&document)));
            }
        }
    }
}

/// What a call is made from besides its arguments: the environment it
/// was given, what runs its commands, and when it must be over (for a
/// call served in the host's process, which cannot be killed).
pub struct Made<'e> {
    pub env: &'e Env,
    pub commands: Arc<dyn Commands>,
    pub deadline: Option<Deadline>,
}

/// The call's settings from the environment the host gives providers.
fn call(made: &Made, log: Box<dyn Write + Send>, noop: bool) -> Call {
    let env = made.env;
    let root = var(env, "RALSH_ROOT_DIR")
        .filter(|root| !root.is_empty())
        .unwrap_or_else(|| "/".to_owned());
    let lock_timeout = var(env, "RALSH_LOCK_TIMEOUT")
        .and_then(|text| text.parse::<f64>().ok())
        .and_then(|secs| Duration::try_from_secs_f64(secs).ok())
        .unwrap_or(LOCK_WAIT);
    Call {
        root: PathBuf::from(root),
        noop,
        lock_timeout,
        log: Log::new(log, noop),
        env: env.to_vec(),
        commands: made.commands.clone(),
        deadline: made.deadline.clone(),
        should: Map::new(),
    }
}

fn describe(provider: &dyn Provider, answer: &mut Answer) {
    answer.write(provider.metadata());
}

// ------------------------------------------------------------ simple

/// A simple call: `list`, `find NAME` and `update NAME ATTR=VALUE...`,
/// served by the provider's get and set.
fn simple(
    provider: &dyn Provider,
    argv: &[String],
    made: &Made,
    log: Box<dyn Write + Send>,
    answer: &mut Answer,
) -> CallResult<()> {
    let args = simple_args(argv, made.env)?;
    let action = match args.get("ral_action") {
        Some(Json::String(action)) => action.clone(),
        Some(_) => return Err(CallError::new("ral_action must be one word")),
        None => return Err(CallError::new("missing required argument 'ral_action'")),
    };
    // ral_noop's value does not matter: its presence means noop.
    let call = call(made, log, args.contains_key("ral_noop"));
    match action.as_str() {
        "describe" => {
            describe(provider, answer);
            Ok(())
        }
        "list" => simple_list(provider, &call, answer),
        "find" => simple_find(provider, &call, &args, answer),
        "update" => simple_update(provider, &call, args, answer),
        other => Err(CallError::new(format!(
            "unknown action {}: expected one of describe, find, list, update",
            quoted(other)
        ))),
    }
}

/// A simple `list`: every resource but those in error.
fn simple_list(provider: &dyn Provider, call: &Call, answer: &mut Answer) -> CallResult<()> {
    let resources = read(provider, call, &[])?;
    // Each resource goes once its lines are written: the text of a long
    // listing is not held beside all its resources, nor beside all their
    // pairs.
    let mut text = SimpleText::new(Some(&call.log));
    let mut pairs = Vec::new();
    for resource in resources {
        if resource.contains_key("error") {
            continue;
        }
        resource_pairs(&resource, &mut pairs);
        text.add(&pairs);
        pairs.clear();
    }
    answer.write(&text.text);
    Ok(())
}

/// A simple `find NAME`: the resource, `ensure=absent` when there is
/// none, or `ral_unknown` when no such name can be.
fn simple_find(
    provider: &dyn Provider,
    call: &Call,
    args: &Map<String, Json>,
    answer: &mut Answer,
) -> CallResult<()> {
    let name = required_name(args)?;
    let found = read(provider, call, std::slice::from_ref(&name))?;
    let entry = found
        .iter()
        .find(|r| r.get("name") == Some(&Json::from(&*name)));
    let mut pairs = Vec::new();
    match entry {
        Some(entry) if entry.contains_key("error") => {
            let error = &entry["error"];
            if error.get("kind") == Some(&Json::from("unknown")) {
                pairs.push(("name".to_owned(), name.clone()));
                pairs.push(("ral_unknown".to_owned(), "true".to_owned()));
            } else {
                let message = error.get("message").and_then(Json::as_str);
                return Err(CallError::new(message.unwrap_or("failed")));
            }
        }
        Some(resource) => resource_pairs(resource, &mut pairs),
        None => {
            pairs.push(("name".to_owned(), name.clone()));
            pairs.push(("ensure".to_owned(), "absent".to_owned()));
        }
    }
    emit_simple(answer, &pairs, Some(&call.log));
    Ok(())
}

/// A simple `update NAME ATTR=VALUE...`: the changes made, each value
/// followed by the one it replaced (`ral_was`).
fn simple_update(
    provider: &dyn Provider,
    call: &Call,
    args: Map<String, Json>,
    answer: &mut Answer,
) -> CallResult<()> {
    let name = required_name(&args)?;
    let should: Resource = args
        .into_iter()
        .filter(|(key, _)| key != "name" && !key.starts_with("ral_"))
        .collect();
    let update = Update {
        name: name.clone(),
        is: Resource::new(),
        should,
    };
    let mut outcomes = provider.set(call, std::slice::from_ref(&update))?;
    let changes = outcomes.pop().unwrap_or_else(|| Ok(Vec::new()))?;
    let mut pairs = vec![("name".to_owned(), name)];
    for change in changes {
        pairs.push((change.attribute, simple_text(&change.is)));
        pairs.push(("ral_was".to_owned(), simple_text(&change.was)));
    }
    emit_simple(answer, &pairs, None);
    Ok(())
}

/// The provider's get of `names`, refused when it ended past the call's
/// deadline: a late answer is no more taken from code served in the
/// host's process than from a program killed at its time limit.
fn read(provider: &dyn Provider, call: &Call, names: &[String]) -> CallResult<Vec<Resource>> {
    let resources = provider.get(call, names)?;
    call.within_time()?;
    Ok(resources)
}

fn required_name(args: &Map<String, Json>) -> CallResult<String> {
    match args.get("name") {
        Some(Json::String(name)) => Ok(name.clone()),
        Some(_) => Err(CallError::new("name must be one word")),
        None => Err(CallError::new("missing required attribute 'name'")),
    }
}

/// A resource's `(key, value)` pairs, its name first.
fn resource_pairs(resource: &Resource, pairs: &mut Vec<(String, String)>) {
    let name = resource.get("name").map(simple_text).unwrap_or_default();
    pairs.push(("name".to_owned(), name));
    for (key, value) in resource {
        if key != "name" && !value.is_null() {
            pairs.push((key.clone(), simple_text(value)));
        }
    }
}

/// A value as a simple answer prints it: arrays as shell words.
pub fn simple_text(value: &Json) -> String {
    match value {
        Json::Null => String::new(),
        Json::String(text) => text.clone(),
        Json::Array(items) => {
            let words: Vec<String> = items.iter().map(simple_text).collect();
            join_words(&words)
        }
        other => other.to_string(),
    }
}

/// The arguments of a simple call: `KEY=WORD` for one value (a string),
/// `KEY=(WORD WORD ...)` for an array, each word shell-quoted; and the
/// sensitive values passed in the environment, each variable that
/// `RALSH_SENSITIVE` names holding one value as it is.
pub fn simple_args(argv: &[String], env: &Env) -> CallResult<Map<String, Json>> {
    let mut args = Map::new();
    for key in var(env, SENSITIVE_VAR)
        .unwrap_or_default()
        .split_whitespace()
    {
        let value = var(env, key).ok_or_else(|| {
            CallError::new(format!(
                "{SENSITIVE_VAR} names {}, which is not in the environment",
                quoted(key)
            ))
        })?;
        args.insert(key.to_owned(), Json::from(value));
    }
    for arg in argv {
        let Some((key, raw)) = arg.split_once('=') else {
            return Err(CallError::new(format!(
                "malformed argument {}: expected KEY=VALUE",
                quoted(arg)
            )));
        };
        if args.contains_key(key) {
            return Err(CallError::new(format!(
                "argument {} is given twice",
                quoted(key)
            )));
        }
        let is_list = raw.len() >= 2 && raw.starts_with('(') && raw.ends_with(')');
        let inner = if is_list { &raw[1..raw.len() - 1] } else { raw };
        let words = shell_words::split(inner).map_err(|err| {
            CallError::new(format!("cannot parse argument {}: {err}", quoted(key)))
        })?;
        let value = match (is_list, words.len()) {
            (true, _) => Json::from(words),
            (false, 1) => Json::from(words.into_iter().next().unwrap_or_default()),
            (false, _) => {
                return Err(CallError::new(format!(
                    "malformed argument {}: expected one value",
                    quoted(arg)
                )))
            }
        };
        args.insert(key.to_owned(), value);
    }
    Ok(args)
}

/// Writes a `# simple` answer of `(key, value)` pairs, each `name`
/// starting a resource (see [`SimpleText`]).
fn emit_simple(answer: &mut Answer, pairs: &[(String, String)], log: Option<&Log>) {
    let mut text = SimpleText::new(log);
    text.add(pairs);
    answer.write(&text.text);
}

/// The text of a `# simple` answer, made from `(key, value)` pairs, each
/// `name` starting a resource. What the host could not read back (a line
/// longer than [`LINE_MAX`]) is left out with a warning: the attribute's
/// line, or the whole resource when its name is that long; an old value
/// (`ral_was`) that long is cut, so a change that was made is still told.
struct SimpleText<'l> {
    text: String,
    /// The resource whose name is too long, left out.
    skipping: bool,
    /// The resource the pairs are of.
    name: String,
    log: Option<&'l Log>,
}

impl<'l> SimpleText<'l> {
    fn new(log: Option<&'l Log>) -> SimpleText<'l> {
        SimpleText {
            text: String::from("# simple\n"),
            skipping: false,
            name: String::new(),
            log,
        }
    }

    /// Adds the lines of `pairs`, which go on from those added before.
    fn add(&mut self, pairs: &[(String, String)]) {
        for (key, value) in pairs {
            let mut line = format!("{key}: {}", clean(value));
            if key == "name" {
                self.name = value.clone();
                self.skipping = line.len() + 1 > LINE_MAX;
                if let (true, Some(log)) = (self.skipping, self.log) {
                    log.warning(&format!(
                        "a name of {} characters is too long for ral to read; that resource is left \
                         out",
                        value.chars().count()
                    ));
                }
            }
            if self.skipping {
                continue;
            }
            if line.len() + 1 > LINE_MAX {
                if key == "ral_was" {
                    let mut keep = LINE_MAX - 100;
                    while !line.is_char_boundary(keep) {
                        keep -= 1;
                    }
                    line.truncate(keep);
                    line.push_str(&format!(" [cut at {} bytes]", LINE_MAX - 100));
                } else {
                    if let Some(log) = self.log {
                        log.resource(
                            super::Level::Warn,
                            &self.name,
                            None,
                            Some(&format!(
                                "{key} is {} bytes long, more than ral reads in one line; it is not \
                                 reported",
                                line.len()
                            )),
                            Map::new(),
                        );
                    }
                    continue;
                }
            }
            self.text.push_str(&line);
            self.text.push('\n');
        }
    }
}

// -------------------------------------------------------------- json

/// A json call: `ral_action=get` or `set`, with its document on stdin.
fn json_call(
    provider: &dyn Provider,
    argv: &[String],
    stdin: &mut dyn Read,
    made: &Made,
    log: Box<dyn Write + Send>,
    answer: &mut Answer,
) -> CallResult<()> {
    let action = match argv {
        [only] if only.starts_with("ral_action=") => &only["ral_action=".len()..],
        _ => {
            let shown: Vec<String> = argv.iter().map(|a| quoted(a)).collect();
            let shown = match shown.is_empty() {
                true => "none".to_owned(),
                false => shown.join(" "),
            };
            return Err(CallError::new(format!(
                "expected exactly one argument ral_action=ACTION, got {shown}"
            )));
        }
    };
    match action {
        "describe" => {
            describe(provider, answer);
            Ok(())
        }
        "get" => {
            let document = read_request(stdin)?;
            let names = get_names(&document)?;
            let mut call = call(made, log, false);
            call.should = get_should(&document, &names)?;
            let resources = read(provider, &call, &names)?;
            answer_get(answer, resources, &names)
        }
        "refresh" => {
            let document = read_request(stdin)?;
            let (name, attrs) = refresh_request(&document)?;
            let call = call(made, log, false);
            provider.refresh(&call, &name, &attrs)?;
            answer.write(&serde_json::json!({ "refreshed": [{ "name": name }] }).to_string());
            Ok(())
        }
        "set" => {
            let document = read_request(stdin)?;
            let (noop, updates) = set_request(&document)?;
            let call = call(made, log, noop);
            let outcomes = provider.set(&call, &updates)?;
            answer_set(answer, &updates, outcomes)
        }
        other => Err(CallError::new(format!(
            "unknown action {}: expected one of describe, get, set",
            quoted(other)
        ))),
    }
}

/// The manifest's values a get names (`"should": {NAME: {...}}`, sent to
/// providers that run commands): an object per name asked for, if any.
fn get_should(document: &Map<String, Json>, names: &[String]) -> CallResult<Map<String, Json>> {
    let Some(should) = document.get("should") else {
        return Ok(Map::new());
    };
    let bad = || CallError::new("'should' must be an object of an object per name asked for");
    let should = should.as_object().ok_or_else(bad)?;
    for (name, values) in should {
        if !values.is_object() || !names.contains(name) {
            return Err(bad());
        }
    }
    Ok(should.clone())
}

/// The one resource of a refresh request (`{"refresh": [{"name",
/// "attributes"}]}`) and the manifest's values it is told.
fn refresh_request(document: &Map<String, Json>) -> CallResult<(String, Resource)> {
    let bad = || {
        CallError::new(
            "a refresh request is {\"refresh\": [{\"name\": NAME, \"attributes\": {...}}]}",
        )
    };
    let [one] = document
        .get("refresh")
        .and_then(Json::as_array)
        .map(Vec::as_slice)
        .ok_or_else(bad)?
    else {
        return Err(bad());
    };
    let name = one.get("name").and_then(Json::as_str).ok_or_else(bad)?;
    let attrs = match one.get("attributes") {
        None => Resource::new(),
        Some(Json::Object(attrs)) => attrs.clone(),
        Some(_) => return Err(bad()),
    };
    Ok((name.to_owned(), attrs))
}

/// The document on stdin, which must be a JSON object.
fn read_request(stdin: &mut dyn Read) -> CallResult<Map<String, Json>> {
    let mut data = Vec::new();
    stdin
        .take(DOCUMENT_MAX as u64 + 1)
        .read_to_end(&mut data)
        .map_err(|err| CallError::io(&err, "read stdin"))?;
    if data.len() > DOCUMENT_MAX {
        // Cut, it could still read as JSON (spaces at its end): refused
        // whole, as the host refuses an answer that long.
        return Err(CallError::new(format!(
            "stdin is longer than {DOCUMENT_MAX} bytes"
        )));
    }
    let text = String::from_utf8(data)
        .map_err(|err| CallError::new(format!("stdin is not UTF-8: {err}")))?;
    match serde_json::from_str::<Json>(&text) {
        Ok(Json::Object(document)) => Ok(document),
        Ok(other) => Err(CallError::new(format!(
            "stdin must be a JSON object, not {}",
            type_name(&other)
        ))),
        Err(err) => Err(CallError::new(format!(
            "stdin is not a JSON document: {err}"
        ))),
    }
}

fn type_name(value: &Json) -> &'static str {
    match value {
        Json::Null => "null",
        Json::Bool(_) => "a boolean",
        Json::Number(_) => "a number",
        Json::String(_) => "a string",
        Json::Array(_) => "an array",
        Json::Object(_) => "an object",
    }
}

/// The names of a get request, each once, in order (none: all).
fn get_names(document: &Map<String, Json>) -> CallResult<Vec<String>> {
    let names = document
        .get("names")
        .ok_or_else(|| CallError::new("missing key 'names' in the get request"))?;
    let bad = || CallError::new("'names' must be an array of strings");
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for name in names.as_array().ok_or_else(bad)? {
        let name = name.as_str().ok_or_else(bad)?;
        if seen.insert(name) {
            out.push(name.to_owned());
        }
    }
    Ok(out)
}

/// Whether a set is noop, and its updates, each an object with a string
/// name and an object `should` (`is` as the host read it).
fn set_request(document: &Map<String, Json>) -> CallResult<(bool, Vec<Update>)> {
    let noop = match document.get("ral") {
        None => false,
        Some(Json::Object(ral)) => match ral.get("noop") {
            None => false,
            Some(Json::Bool(noop)) => *noop,
            Some(_) => return Err(CallError::new("'ral.noop' must be a boolean")),
        },
        Some(_) => return Err(CallError::new("'ral' must be a JSON object")),
    };
    let updates = document
        .get("updates")
        .ok_or_else(|| CallError::new("missing key 'updates' in the set request"))?
        .as_array()
        .ok_or_else(|| CallError::new("'updates' must be an array"))?;
    let malformed = || CallError::new("every update must be an object with a string 'name'");
    let mut out = Vec::with_capacity(updates.len());
    for update in updates {
        let update = update.as_object().ok_or_else(malformed)?;
        let name = update
            .get("name")
            .and_then(Json::as_str)
            .ok_or_else(malformed)?;
        let object = |key: &str| match update.get(key) {
            None => Ok(Resource::new()),
            Some(Json::Object(map)) => Ok(map.clone()),
            Some(_) => Err(CallError::new(format!(
                "{}: '{key}' must be a JSON object",
                quoted(name)
            ))),
        };
        out.push(Update {
            name: name.to_owned(),
            is: object("is")?,
            should: object("should")?,
        });
    }
    Ok((noop, out))
}

/// Why the host could not read back an entry of `size` bytes as JSON
/// (`said` words what it is), or `None`: it is longer than
/// [`RESOURCE_MAX`].
fn too_long(size: usize, said: &str) -> Option<String> {
    (size > RESOURCE_MAX).then(|| {
        format!(
            "{said} is {size} bytes long as ral reads it back, more than the {RESOURCE_MAX} it \
             accepts"
        )
    })
}

/// `entry` as the JSON of an answer, written once; one the host could not
/// read back is replaced by an error entry for its name: one such entry
/// must not fail the whole answer.
fn entry_text(entry: Resource, said: &str) -> String {
    let name = entry
        .get("name")
        .and_then(Json::as_str)
        .unwrap_or("")
        .to_owned();
    let text = python_json(&Json::Object(entry));
    match too_long(text.len(), said) {
        None => text,
        Some(problem) => python_json(&Json::Object(error_entry(&name, &CallError::new(problem)))),
    }
}

/// Writes the document `{"KEY": [ENTRIES]REST}` from its entries' JSON,
/// or fails the call when it is longer than the host reads.
fn emit_list(answer: &mut Answer, key: &str, entries: &[String], rest: &str) -> CallResult<()> {
    let text = format!("{{\"{key}\": [{}]{rest}}}", entries.join(", "));
    if text.len() + 1 > DOCUMENT_MAX {
        return Err(CallError::new(format!(
            "the answer is {} bytes long, more than the {DOCUMENT_MAX} ral reads",
            text.len() + 1
        )));
    }
    answer.write(&text);
    answer.write("\n");
    Ok(())
}

/// A get's answer: the named resources in the order asked (a name the
/// provider said nothing of does not exist), then any others it gave.
fn answer_get(answer: &mut Answer, resources: Vec<Resource>, names: &[String]) -> CallResult<()> {
    let said = "this resource";
    if names.is_empty() {
        let list: Vec<String> = resources.into_iter().map(|r| entry_text(r, said)).collect();
        return emit_list(answer, "resources", &list, "");
    }
    let mut found: std::collections::HashMap<String, Resource> = std::collections::HashMap::new();
    let mut others = Vec::new();
    let asked: HashSet<&str> = names.iter().map(String::as_str).collect();
    for resource in resources {
        let name = resource
            .get("name")
            .and_then(Json::as_str)
            .unwrap_or("")
            .to_owned();
        if asked.contains(name.as_str()) {
            found.entry(name).or_insert(resource);
        } else {
            others.push(entry_text(resource, said));
        }
    }
    let mut list: Vec<String> = names
        .iter()
        .map(|name| match found.remove(name) {
            Some(resource) => entry_text(resource, said),
            None => python_json(&json!({"name": name, "ensure": "absent"})),
        })
        .collect();
    list.extend(others);
    emit_list(answer, "resources", &list, "")
}

/// A set's answer: one change entry per update that changed something,
/// an error entry per update that failed.
fn answer_set(answer: &mut Answer, updates: &[Update], outcomes: Vec<Outcome>) -> CallResult<()> {
    if outcomes.len() != updates.len() {
        return Err(CallError::new(format!(
            "internal error: {} outcomes for {} updates",
            outcomes.len(),
            updates.len()
        )));
    }
    let said = "the report of this change (which was made)";
    let mut entries = Vec::new();
    for (update, outcome) in updates.iter().zip(outcomes) {
        match outcome {
            Err(err) => entries.push(entry_text(error_entry(&update.name, &err), said)),
            Ok(changes) if changes.is_empty() => {}
            Ok(changes) => {
                let mut entry = Resource::new();
                entry.insert("name".into(), Json::from(update.name.as_str()));
                for change in changes {
                    entry.insert(
                        change.attribute,
                        json!({"is": change.is, "was": change.was}),
                    );
                }
                entries.push(entry_text(entry, said));
            }
        }
    }
    emit_list(answer, "changes", &entries, ", \"derive\": false")
}

/// The name, `should` and `ensure` of one update, checked: `should` sets
/// only known `attributes` and none of `read_only`, does not rename, and
/// its ensure (when given) is one of `ensures` (any value when `None`: the
/// provider checks it). A failure fails this update alone.
pub fn check_should<'u>(
    update: &'u Update,
    attributes: &[&str],
    ensures: Option<&[&str]>,
    read_only: &[&str],
) -> CallResult<Option<&'u Json>> {
    for key in update.should.keys() {
        if read_only.contains(&key.as_str()) {
            return Err(CallError::new(format!("{key} is read-only")));
        }
        if !attributes.contains(&key.as_str()) {
            return Err(CallError::new(format!("unknown attribute {}", quoted(key))));
        }
    }
    if let Some(renamed) = update.should.get("name") {
        if renamed.as_str() != Some(update.name.as_str()) {
            return Err(CallError::new(format!(
                "name: cannot rename {} to {}",
                quoted(&update.name),
                quoted(&simple_text(renamed))
            )));
        }
    }
    let ensure = update.should.get("ensure").filter(|e| !e.is_null());
    if let (Some(ensure), Some(ensures)) = (ensure, ensures) {
        if !ensure.as_str().is_some_and(|e| ensures.contains(&e)) {
            return Err(CallError::new(format!(
                "ensure: {ensure} is not one of {}",
                ensures.join(", ")
            )));
        }
    }
    Ok(ensure)
}

/// Refuses, before anything is written, a resource the host could not
/// read back: its JSON must fit in [`RESOURCE_MAX`] bytes.
pub fn check_resource_fits(resource: &Resource) -> CallResult<()> {
    let name = resource.get("name").map(simple_text).unwrap_or_default();
    let said = format!("{} as ral reads it back", quoted(&name));
    let size = python_json(&Json::Object(resource.clone())).len();
    match too_long(size, &said) {
        Some(problem) => Err(CallError::new(format!("{problem}; nothing was changed"))),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn made(env: &Env) -> Made<'_> {
        Made {
            env,
            commands: Arc::new(Direct),
            deadline: None,
        }
    }

    /// A json provider that has one resource, `a`, and changes nothing.
    struct One;

    impl Provider for One {
        fn metadata(&self) -> &'static str {
            ""
        }

        fn convention(&self) -> Convention {
            Convention::Json
        }

        fn get(&self, _call: &Call, _names: &[String]) -> CallResult<Vec<Resource>> {
            let mut a = Resource::new();
            a.insert("name".into(), Json::from("a"));
            Ok(vec![a])
        }

        fn set(&self, _call: &Call, updates: &[Update]) -> CallResult<Vec<Outcome>> {
            Ok(updates.iter().map(|_| Ok(Vec::new())).collect())
        }
    }

    #[test]
    fn a_get_that_ends_past_the_calls_deadline_answers_an_error() {
        let late = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let get = |made: &Made| {
            let mut out = Vec::new();
            let args = ["ral_action=get".to_owned()];
            serve(
                &One,
                &args,
                &mut &b"{\"names\": []}"[..],
                made,
                &mut out,
                Box::new(std::io::sink()),
            );
            String::from_utf8(out).unwrap()
        };
        let made = Made {
            deadline: Some(crate::testing::deadline(Duration::from_secs(2), &late)),
            ..made(&[])
        };
        assert_eq!(get(&made), "{\"resources\": [{\"name\": \"a\"}]}\n");
        late.store(true, std::sync::atomic::Ordering::SeqCst);
        assert_eq!(
            get(&made),
            "{\"error\": {\"kind\": \"failed\", \"message\": \"the call ran past its time \
             limit of 2s (--timeout); this was not done\"}}\n"
        );
    }

    /// A simple provider: `a` (a list and a null among its attributes),
    /// `bad` failed, `gone` unknown; its set records the call it got and
    /// says `shell` changed.
    #[derive(Default)]
    struct Simple {
        seen: std::sync::Mutex<Vec<String>>,
    }

    impl Provider for Simple {
        fn metadata(&self) -> &'static str {
            "provider:\n  type: thing\n"
        }

        fn convention(&self) -> Convention {
            Convention::Simple
        }

        fn get(&self, _call: &Call, _names: &[String]) -> CallResult<Vec<Resource>> {
            let resource = |value: Json| value.as_object().cloned().unwrap();
            Ok(vec![
                resource(
                    json!({"name": "a", "ensure": "present", "tags": ["x y", "z"],
                                "note": null}),
                ),
                resource(json!({"name": "bad", "error": {"kind": "failed",
                                                         "message": "cannot read bad"}})),
                resource(json!({"name": "gone", "error": {"kind": "unknown",
                                                          "message": "no such thing"}})),
            ])
        }

        fn set(&self, call: &Call, updates: &[Update]) -> CallResult<Vec<Outcome>> {
            let update = &updates[0];
            self.seen.lock().unwrap().push(format!(
                "{} {} noop={} root={}",
                update.name,
                Json::Object(update.should.clone()),
                call.noop,
                call.root.display()
            ));
            Ok(vec![Ok(vec![crate::Change::new(
                "shell",
                Json::from("/bin/sh"),
                Json::from("/bin/zsh"),
            )])])
        }
    }

    /// The answer of `provider` to the simple call `args`, in `env`.
    fn simple_call(provider: &Simple, args: &[&str], env: &Env) -> String {
        let args: Vec<String> = args.iter().map(|&a| a.to_owned()).collect();
        let mut out = Vec::new();
        serve(
            provider,
            &args,
            &mut &b""[..],
            &made(env),
            &mut out,
            Box::new(std::io::sink()),
        );
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn a_simple_provider_lists_finds_and_describes() {
        let simple = Simple::default();
        let list = simple_call(&simple, &["ral_action=list"], &[]);
        // The name first, a null left out, a list as shell words; the
        // failed and unknown ones are no resources.
        assert_eq!(list, "# simple\nname: a\nensure: present\ntags: 'x y' z\n");
        let find =
            |name: &str| simple_call(&simple, &["ral_action=find", &format!("name={name}")], &[]);
        assert!(
            find("a").contains("name: a\nensure: present\n"),
            "{}",
            find("a")
        );
        let gone = find("gone");
        assert!(gone.contains("name: gone\nral_unknown: true\n"), "{gone}");
        let missing = find("nowhere");
        assert!(
            missing.contains("name: nowhere\nensure: absent\n"),
            "{missing}"
        );
        let bad = find("bad");
        assert!(bad.contains("ral_error: cannot read bad\n"), "{bad}");
        let described = simple_call(&simple, &["ral_action=describe"], &[]);
        assert_eq!(described, "provider:\n  type: thing\n");
    }

    #[test]
    fn a_simple_update_gets_the_attributes_asked_and_answers_what_changed() {
        let simple = Simple::default();
        let root = [("RALSH_ROOT_DIR".to_owned(), "/tmp/fake".to_owned())];
        let answer = simple_call(
            &simple,
            &[
                "ral_action=update",
                "name=bob",
                "shell=/bin/zsh",
                "ral_noop=true",
            ],
            &root,
        );
        assert!(
            answer.contains("name: bob\nshell: /bin/zsh\nral_was: /bin/sh\n"),
            "{answer}"
        );
        let empty_root = [("RALSH_ROOT_DIR".to_owned(), String::new())];
        simple_call(
            &simple,
            &["ral_action=update", "name=bob", "shell=/bin/zsh"],
            &empty_root,
        );
        assert_eq!(
            *simple.seen.lock().unwrap(),
            [
                "bob {\"shell\":\"/bin/zsh\"} noop=true root=/tmp/fake",
                "bob {\"shell\":\"/bin/zsh\"} noop=false root=/"
            ]
        );
    }

    #[test]
    fn a_simple_argument_in_parentheses_is_a_list() {
        let simple = Simple::default();
        let args = [
            "ral_action=update",
            "name=bob",
            "groups=(a 'b c')",
            "none=()",
            "open=(",
            "shut=a)",
        ];
        simple_call(&simple, &args, &[]);
        assert_eq!(
            *simple.seen.lock().unwrap(),
            [
                "bob {\"groups\":[\"a\",\"b c\"],\"none\":[],\"open\":\"(\",\"shut\":\"a)\"} \
              noop=false root=/"
            ]
        );
    }

    #[test]
    fn a_resource_whose_name_line_is_too_long_to_read_is_left_out() {
        let said = crate::Buffer::default();
        let log = Log::new(Box::new(said.clone()), false);
        // "name: " and the newline make the line.
        let longest = "n".repeat(LINE_MAX - 7);
        let pairs = |name: &str| {
            [("name", name), ("shell", "/bin/sh")].map(|(k, v)| (k.to_owned(), v.to_owned()))
        };
        let mut text = SimpleText::new(Some(&log));
        text.add(&pairs(&longest));
        assert_eq!(
            text.text,
            format!("# simple\nname: {longest}\nshell: /bin/sh\n")
        );
        let mut text = SimpleText::new(Some(&log));
        text.add(&pairs(&format!("{longest}n")));
        text.add(&pairs("short"));
        assert_eq!(text.text, "# simple\nname: short\nshell: /bin/sh\n");
        assert!(said.text().contains("is too long for ral to read"));
    }

    #[test]
    fn an_attribute_line_too_long_to_read_is_left_out_and_an_old_value_cut() {
        let said = crate::Buffer::default();
        let log = Log::new(Box::new(said.clone()), false);
        // "content: " (9 bytes) and the newline make the line.
        let longest = "c".repeat(LINE_MAX - 10);
        let pair = |key: &str, value: &str| (key.to_owned(), value.to_owned());
        let mut text = SimpleText::new(Some(&log));
        text.add(&[pair("name", "f"), pair("content", &longest)]);
        assert_eq!(
            text.text,
            format!("# simple\nname: f\ncontent: {longest}\n")
        );
        assert_eq!(said.text(), "");
        let mut text = SimpleText::new(Some(&log));
        let long = format!("{longest}c");
        text.add(&[
            pair("name", "f"),
            pair("content", &long),
            pair("ral_was", &long),
        ]);
        let kept = LINE_MAX - 100 - "ral_was: ".len();
        assert_eq!(
            text.text,
            format!(
                "# simple\nname: f\nral_was: {} [cut at {} bytes]\n",
                &long[..kept],
                LINE_MAX - 100
            )
        );
        assert!(
            said.text()
                .contains("content is 65536 bytes long, more than ral reads"),
            "{}",
            said.text()
        );
        // The cut falls inside a character: it is cut before it.
        let wide = "é".repeat(LINE_MAX / 2);
        let mut text = SimpleText::new(None);
        text.add(&[pair("name", "f"), pair("ral_was", &wide)]);
        let kept = (LINE_MAX - 100 - "ral_was: ".len()) / 2;
        assert_eq!(
            text.text,
            format!(
                "# simple\nname: f\nral_was: {} [cut at {} bytes]\n",
                "é".repeat(kept),
                LINE_MAX - 100
            )
        );
    }

    /// The answer of the json provider `One` to `args`, given `stdin`.
    fn json_call(args: &[&str], stdin: &[u8]) -> String {
        let args: Vec<String> = args.iter().map(|&a| a.to_owned()).collect();
        let mut out = Vec::new();
        let mut stdin = stdin;
        serve(
            &One,
            &args,
            &mut stdin,
            &made(&[]),
            &mut out,
            Box::new(std::io::sink()),
        );
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn a_json_call_needs_its_one_action_argument_and_an_object() {
        let err = |message: &str| {
            format!("{{\"error\": {{\"kind\": \"failed\", \"message\": \"{message}\"}}}}\n")
        };
        assert_eq!(
            json_call(&["get"], b"{}"),
            err("expected exactly one argument ral_action=ACTION, got 'get'")
        );
        assert_eq!(
            json_call(&["ral_action=get"], b"[1]"),
            err("stdin must be a JSON object, not an array")
        );
        assert_eq!(
            json_call(&["ral_action=get"], b"7"),
            err("stdin must be a JSON object, not a number")
        );
    }

    #[test]
    fn a_request_of_the_longest_size_is_read_and_a_longer_one_refused() {
        let request = |size: usize| {
            let mut text = b"{\"names\": []".to_vec();
            text.resize(size - 1, b' ');
            text.push(b'}');
            text
        };
        let all = "{\"resources\": [{\"name\": \"a\"}]}\n";
        assert_eq!(json_call(&["ral_action=get"], &request(DOCUMENT_MAX)), all);
        let mut longer = request(DOCUMENT_MAX);
        longer.push(b' ');
        let refused = json_call(&["ral_action=get"], &longer);
        assert!(
            refused.contains(&format!("stdin is longer than {DOCUMENT_MAX} bytes")),
            "{refused}"
        );
    }

    #[test]
    fn an_entry_longer_than_the_host_reads_becomes_an_error_of_its_own() {
        assert_eq!(too_long(RESOURCE_MAX, "it"), None);
        assert_eq!(
            too_long(RESOURCE_MAX + 1, "it").as_deref(),
            Some("it is 1048577 bytes long as ral reads it back, more than the 1048576 it accepts")
        );
        let mut big = Resource::new();
        big.insert("name".into(), Json::from("big"));
        big.insert("content".into(), Json::from("x".repeat(RESOURCE_MAX)));
        let text = entry_text(big, "'big'");
        assert!(
            text.starts_with("{\"name\": \"big\", \"error\": {"),
            "{}",
            &text[..80.min(text.len())]
        );
        assert!(
            text.contains("more than the 1048576 it accepts"),
            "{}",
            &text[..200.min(text.len())]
        );
    }

    #[test]
    fn an_answer_as_long_as_the_host_reads_is_written_and_a_longer_one_refused() {
        // With its newline, the document is DOCUMENT_MAX bytes at most.
        let base = "{\"resources\": []}".len();
        let mut out = Vec::new();
        let mut answer = Answer {
            out: &mut out,
            convention: Convention::Json,
            failed: false,
        };
        let fits = ["x".repeat(DOCUMENT_MAX - 1 - base)];
        assert_eq!(emit_list(&mut answer, "resources", &fits, ""), Ok(()));
        let longer = ["x".repeat(DOCUMENT_MAX - base)];
        let err = emit_list(&mut answer, "resources", &longer, "").unwrap_err();
        assert!(
            err.message.starts_with("the answer is 67108865 bytes long"),
            "{}",
            err.message
        );
        assert_eq!(out.len(), DOCUMENT_MAX);
    }

    /// A json provider whose set changes `changed`, finds `same` as asked,
    /// fails `bad`, and answers one outcome too few when `short` is asked.
    struct Sets;

    impl Provider for Sets {
        fn metadata(&self) -> &'static str {
            ""
        }

        fn convention(&self) -> Convention {
            Convention::Json
        }

        fn get(&self, _call: &Call, _names: &[String]) -> CallResult<Vec<Resource>> {
            Ok(Vec::new())
        }

        fn set(&self, _call: &Call, updates: &[Update]) -> CallResult<Vec<Outcome>> {
            let mut outcomes: Vec<Outcome> = (updates.iter())
                .map(|update| match update.name.as_str() {
                    "changed" => Ok(vec![crate::Change::new(
                        "ip",
                        Json::from("10.0.0.1"),
                        Json::from("10.0.0.2"),
                    )]),
                    "bad" => Err(CallError::new("cannot write")),
                    _ => Ok(Vec::new()),
                })
                .collect();
            if updates.iter().any(|update| update.name == "short") {
                outcomes.pop();
            }
            Ok(outcomes)
        }
    }

    fn set_call(names: &[&str]) -> String {
        let updates: Vec<Json> = names.iter().map(|name| json!({"name": name})).collect();
        let request = json!({"updates": updates}).to_string();
        let mut out = Vec::new();
        let args = ["ral_action=set".to_owned()];
        serve(
            &Sets,
            &args,
            &mut request.as_bytes(),
            &made(&[]),
            &mut out,
            Box::new(std::io::sink()),
        );
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn a_json_set_answers_a_change_per_changed_update_and_an_error_per_failed_one() {
        assert_eq!(
            set_call(&["changed", "same", "bad"]),
            "{\"changes\": [{\"name\": \"changed\", \"ip\": {\"is\": \"10.0.0.2\", \"was\": \
             \"10.0.0.1\"}}, {\"name\": \"bad\", \"error\": {\"kind\": \"failed\", \"message\": \
             \"cannot write\"}}], \"derive\": false}\n"
        );
        assert!(
            set_call(&["same", "short"]).contains("internal error: 1 outcomes for 2 updates"),
            "{}",
            set_call(&["same", "short"])
        );
    }

    #[test]
    fn an_update_may_name_its_resource_but_never_rename_it() {
        let update = |should: Json| Update {
            name: "web".to_owned(),
            is: Resource::new(),
            should: should.as_object().cloned().unwrap(),
        };
        let same = update(json!({"name": "web", "ip": "10.0.0.1"}));
        assert!(check_should(&same, &["name", "ip"], None, &[]).is_ok());
        let renamed = update(json!({"name": "db"}));
        assert!(check_should(&renamed, &["name", "ip"], None, &[]).is_err());
    }

    /// A reader that went away: every write fails, and they are counted.
    struct Gone(usize);

    impl Write for Gone {
        fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
            self.0 += 1;
            Err(std::io::Error::from_raw_os_error(libc::EPIPE))
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn an_answer_whose_reader_went_away_writes_no_more() {
        let mut gone = Gone(0);
        let mut answer = Answer {
            out: &mut gone,
            convention: Convention::Simple,
            failed: false,
        };
        answer.write("one\n");
        answer.write("two\n");
        assert!(answer.failed);
        assert_eq!(gone.0, 1);
    }

    #[test]
    fn a_lock_wait_no_duration_holds_is_the_default_not_a_panic() {
        for text in ["1e30", "-1", "nan", "inf", "x"] {
            let env = [("RALSH_LOCK_TIMEOUT".to_owned(), text.to_owned())];
            let call = call(&made(&env), Box::new(std::io::sink()), false);
            assert_eq!(call.lock_timeout, LOCK_WAIT, "{text}");
        }
        let env = [("RALSH_LOCK_TIMEOUT".to_owned(), "2.5".to_owned())];
        let call = call(&made(&env), Box::new(std::io::sink()), false);
        assert_eq!(call.lock_timeout, Duration::from_millis(2500));
    }
}
