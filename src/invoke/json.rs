//! The json calling convention: the documents a provider gets on stdin and
//! the checks of the documents it answers with.
//!
//! Every violation of the documented shape is an [`OutputError`] naming the
//! offending path (`resources[2].name`, `changes[0].mode.is`), never a
//! panic or a silent success. A whole-call error
//! (`{"error": {"kind", "message"}}`) becomes [`OutputError::Call`].

use std::collections::{HashMap, HashSet};

use serde_json::{json, Map, Value as Json};

use super::{
    require, ErrorKind, Invocation, OutputError, ReportedError, Runner, Update, UpdateAnswer,
};
use crate::error::{Error, Result};
use crate::metadata::Action;
use crate::output_check::Raw;
use crate::process::Budget;
use crate::provider::Provider;
use crate::resource::{Change, Resource, ResourceSink};
use crate::secrets;
use crate::text::{escape, escape_lines};

/// The largest document accepted from a provider, in bytes. A listing in
/// this convention is one document, so it is held in memory whole.
pub const MAX_DOCUMENT: usize = 64 * 1024 * 1024;

/// One resource of a get answer: its attributes, or its error.
#[derive(Debug, Clone, PartialEq)]
pub struct GetEntry {
    pub name: String,
    pub body: std::result::Result<Map<String, Json>, ReportedError>,
}

/// One attribute change of a set answer.
#[derive(Debug, Clone, PartialEq)]
pub struct JsonChange {
    pub attr: String,
    pub is: Json,
    /// `Json::Null` when the provider gave no old value.
    pub was: Json,
}

/// One entry of a set answer.
#[derive(Debug, Clone, PartialEq)]
pub struct SetEntry {
    pub name: String,
    pub body: std::result::Result<Vec<JsonChange>, ReportedError>,
}

/// A whole set answer.
#[derive(Debug, Clone, PartialEq)]
pub struct SetReport {
    pub entries: Vec<SetEntry>,
    pub derive: bool,
}

/// One update of a set request.
#[derive(Debug, Clone, PartialEq)]
pub struct SetUpdate<'a> {
    pub name: &'a str,
    /// What get reported; `{}` when the resource was not found.
    pub is: Map<String, Json>,
    /// Only the attributes that must change; never empty.
    pub should: Map<String, Json>,
}

/// `{"names": [...]}`; no names means all resources.
pub fn get_request(names: &[&str]) -> Vec<u8> {
    json!({ "names": names }).to_string().into_bytes()
}

/// `{"ral": {"noop": ...}, "updates": [...]}`.
pub fn set_request(updates: &[SetUpdate], noop: bool) -> Vec<u8> {
    let updates: Vec<Json> = updates
        .iter()
        .map(|u| json!({ "name": u.name, "is": u.is, "should": u.should }))
        .collect();
    json!({ "ral": { "noop": noop }, "updates": updates })
        .to_string()
        .into_bytes()
}

fn malformed(message: String) -> OutputError {
    OutputError::Protocol(message)
}

/// Parses the document and handles a whole-call error.
fn document(text: &str) -> Result<Map<String, Json>, OutputError> {
    let parsed: Json = serde_json::from_str(text)
        .map_err(|e| malformed(format!("the output is not one JSON document: {e}")))?;
    let Json::Object(map) = parsed else {
        return Err(malformed(format!(
            "the output is {}, not a JSON object",
            kind_of(&parsed)
        )));
    };
    if let Some(error) = map.get("error") {
        return Err(OutputError::Call(reported_error(error, "error")?));
    }
    Ok(map)
}

fn reported_error(value: &Json, path: &str) -> std::result::Result<ReportedError, OutputError> {
    let Json::Object(map) = value else {
        return Err(malformed(format!(
            "{path} is {}, not an object",
            kind_of(value)
        )));
    };
    let text = |key: &str| match map.get(key) {
        Some(Json::String(text)) => Ok(text.clone()),
        Some(other) => Err(malformed(format!(
            "{path}.{key} is {}, not a string",
            kind_of(other)
        ))),
        None => Err(malformed(format!("{path} has no '{key}'"))),
    };
    let message = text("message")?;
    let kind = text("kind")?;
    let Some(kind) = ErrorKind::parse(&kind) else {
        return Err(malformed(format!(
            "{path}.kind is '{kind}'; expected one of unknown, forbidden, failed"
        )));
    };
    Ok(ReportedError { kind, message })
}

fn array<'a>(map: &'a Map<String, Json>, key: &str) -> Result<&'a Vec<Json>, OutputError> {
    match map.get(key) {
        Some(Json::Array(items)) => Ok(items),
        Some(other) => Err(malformed(format!(
            "'{key}' is {}, not an array",
            kind_of(other)
        ))),
        None => Err(malformed(format!("the document has no '{key}'"))),
    }
}

fn object<'a>(value: &'a Json, path: &str) -> Result<&'a Map<String, Json>, OutputError> {
    match value {
        Json::Object(map) => Ok(map),
        other => Err(malformed(format!(
            "{path} is {}, not an object",
            kind_of(other)
        ))),
    }
}

fn name_of(map: &Map<String, Json>, path: &str) -> std::result::Result<String, OutputError> {
    match map.get("name") {
        Some(Json::String(name)) => Ok(name.clone()),
        Some(other) => Err(malformed(format!(
            "{path}.name is {}, not a string",
            kind_of(other)
        ))),
        None => Err(malformed(format!("{path} has no 'name'"))),
    }
}

/// Checks a get answer: `{"resources": [{"name", ...}]}`.
pub fn parse_get(text: &str) -> Result<Vec<GetEntry>, OutputError> {
    let map = document(text)?;
    let mut entries = Vec::new();
    for (index, item) in array(&map, "resources")?.iter().enumerate() {
        let path = format!("resources[{index}]");
        let resource = object(item, &path)?;
        let name = name_of(resource, &path)?;
        let body = match resource.get("error") {
            Some(error) => Err(reported_error(error, &format!("{path}.error"))?),
            None => Ok(resource
                .iter()
                .filter(|(key, _)| key.as_str() != "name")
                .map(|(key, value)| (key.clone(), value.clone()))
                .collect()),
        };
        entries.push(GetEntry { name, body });
    }
    Ok(entries)
}

/// Checks a set answer: `{"changes": [{"name", ATTR: {"is", "was"}}], "derive"}`.
pub fn parse_set(text: &str) -> std::result::Result<SetReport, OutputError> {
    let map = document(text)?;
    let derive = match map.get("derive") {
        None => false,
        Some(Json::Bool(flag)) => *flag,
        Some(other) => {
            return Err(malformed(format!(
                "'derive' is {}, not a boolean",
                kind_of(other)
            )))
        }
    };
    let mut entries = Vec::new();
    for (index, item) in array(&map, "changes")?.iter().enumerate() {
        let path = format!("changes[{index}]");
        let entry = object(item, &path)?;
        let name = name_of(entry, &path)?;
        let body = match entry.get("error") {
            Some(error) => Err(reported_error(error, &format!("{path}.error"))?),
            None => {
                let mut changes = Vec::new();
                for (attr, change) in entry.iter().filter(|(key, _)| key.as_str() != "name") {
                    let at = format!("{path}.{attr}");
                    let change = object(change, &at)?;
                    if let Some(unknown) = change.keys().find(|k| *k != "is" && *k != "was") {
                        return Err(malformed(format!("{at} has an unknown key '{unknown}'")));
                    }
                    let is = change
                        .get("is")
                        .ok_or_else(|| malformed(format!("{at} has no 'is'")))?;
                    changes.push(JsonChange {
                        attr: attr.clone(),
                        is: is.clone(),
                        was: change.get("was").cloned().unwrap_or(Json::Null),
                    });
                }
                Ok(changes)
            }
        };
        entries.push(SetEntry { name, body });
    }
    Ok(SetReport { entries, derive })
}

fn kind_of(value: &Json) -> &'static str {
    match value {
        Json::Null => "null",
        Json::Bool(_) => "a boolean",
        Json::Number(_) => "a number",
        Json::String(_) => "a string",
        Json::Array(_) => "an array",
        Json::Object(_) => "an object",
    }
}

/// `{"ral": {"noop": false}, "refresh": [{"name", "attributes"}]}`.
pub fn refresh_request(name: &str, attrs: Map<String, Json>) -> Vec<u8> {
    json!({ "ral": { "noop": false }, "refresh": [{ "name": name, "attributes": attrs }] })
        .to_string()
        .into_bytes()
}

/// Checks a refresh answer for `name`: `{"refreshed": [{"name"}]}`, or the
/// entry `{"name", "error"}`.
pub fn parse_refresh(text: &str, name: &str) -> std::result::Result<(), OutputError> {
    let map = document(text)?;
    let mut answered = false;
    for (index, item) in array(&map, "refreshed")?.iter().enumerate() {
        let path = format!("refreshed[{index}]");
        let entry = object(item, &path)?;
        if name_of(entry, &path)? != name {
            return Err(malformed(format!(
                "{path} names '{}', which was not asked for",
                escape(&name_of(entry, &path)?)
            )));
        }
        if let Some(unknown) = entry.keys().find(|k| *k != "name" && *k != "error") {
            return Err(malformed(format!(
                "{path} has the key '{}': a refresh reports no attribute",
                escape(unknown)
            )));
        }
        if answered {
            return Err(malformed(format!(
                "{path} names '{}' a second time",
                escape(name)
            )));
        }
        if let Some(error) = entry.get("error") {
            return Err(OutputError::Call(reported_error(
                error,
                &format!("{path}.error"),
            )?));
        }
        answered = true;
    }
    match answered {
        true => Ok(()),
        false => Err(malformed(format!(
            "'refreshed' does not name '{}'",
            escape(name)
        ))),
    }
}

/// The json convention.
pub struct JsonConvention;

impl super::Convention for JsonConvention {
    fn list(
        &self,
        runner: &dyn Runner,
        provider: &Provider,
        sink: &mut dyn ResourceSink,
    ) -> Result<()> {
        for entry in get(runner, provider, &[], &[])? {
            match entry.body {
                Ok(attrs) => sink.resource(typed(runner, provider, &entry.name, &attrs)?)?,
                Err(error) => log::warn!(
                    "{}: get reported an error for '{}': {}",
                    provider.qualified_name(),
                    escape(&entry.name),
                    escape_lines(&error.to_string())
                ),
            }
        }
        Ok(())
    }

    fn get_with_should(
        &self,
        runner: &dyn Runner,
        provider: &Provider,
        names: &[&str],
        should: &[&[(String, crate::types::Value)]],
    ) -> Result<Vec<Result<Option<Resource>>>> {
        // The provider may answer with more than was asked; what was asked
        // is picked out.
        let entries = match get(runner, provider, names, should) {
            // "Does not exist and cannot be created" is not found, whether
            // it comes for the whole call or for the resource.
            Err(Error::Reported {
                kind: Some(kind), ..
            }) if kind == ErrorKind::Unknown.as_str() => {
                return Ok(names.iter().map(|_| Ok(None)).collect());
            }
            other => other?,
        };
        Ok(answers_for(&entries, names)
            .into_iter()
            .zip(names)
            .map(|(entry, name)| {
                let Some(entry) = entry else {
                    return Ok(None);
                };
                match &entry.body {
                    Ok(attrs) => typed(runner, provider, name, attrs).map(Some),
                    Err(error) if error.kind == ErrorKind::Unknown => {
                        log::info!(
                            "{}: '{}' is unknown: {}",
                            provider.qualified_name(),
                            escape(name),
                            escape_lines(&error.message)
                        );
                        Ok(None)
                    }
                    Err(error) => Err(Error::Reported {
                        provider: provider.qualified_name(),
                        action: Action::Get.as_str().to_owned(),
                        message: escape_lines(&error.message),
                        kind: Some(escape(error.kind.as_str())),
                    }),
                }
            })
            .collect())
    }

    fn refresh(
        &self,
        runner: &dyn Runner,
        provider: &Provider,
        name: &str,
        attrs: &[(String, crate::types::Value)],
    ) -> Result<()> {
        require(provider, Action::Refresh)?;
        let told = super::refresh_attrs(provider, attrs)
            .map(|(key, value)| (key.clone(), Json::from(value)))
            .collect();
        let secrets = super::told_secrets(provider, attrs);
        let text = call(
            runner,
            provider,
            Action::Refresh,
            refresh_request(name, told),
            secrets.clone(),
        )?;
        parse_refresh(&text, name)
            .map_err(|e| e.redacted(&secrets).into_error(provider, Action::Refresh))
    }

    fn set_many(
        &self,
        runner: &dyn Runner,
        provider: &Provider,
        updates: &[Update],
        noop: bool,
    ) -> Result<Vec<Result<UpdateAnswer>>> {
        require(provider, Action::Set)?;
        let label = provider.qualified_name();
        let requests: Vec<SetUpdate> = updates.iter().map(set_update).collect();
        let mut secrets: Vec<String> = updates
            .iter()
            .flat_map(|update| update.secrets(provider))
            .collect();
        secrets.sort_by_key(|text| std::cmp::Reverse(text.len()));
        secrets.dedup();
        let text = call(
            runner,
            provider,
            Action::Set,
            set_request(&requests, noop),
            secrets.clone(),
        )?;
        let report =
            parse_set(&text).map_err(|e| e.redacted(&secrets).into_error(provider, Action::Set))?;
        // Each name's entries, in the answer's order, found through a map
        // so that a batch of N updates is matched in time linear in N.
        let mut by_name: HashMap<&str, Vec<&SetEntry>> = HashMap::new();
        for entry in &report.entries {
            by_name.entry(entry.name.as_str()).or_default().push(entry);
        }
        let asked: HashSet<&str> = updates.iter().map(|update| update.name).collect();
        log_side_effects(&label, &report, &asked, &secrets);
        let answered = Answered {
            runner,
            provider,
            label: &label,
            secrets: &secrets,
        };
        Ok(updates
            .iter()
            .map(|update| {
                let mine: &[&SetEntry] = by_name.get(update.name).map_or(&[], Vec::as_slice);
                Ok(UpdateAnswer {
                    changes: answered.changes(update.name, mine)?,
                    derive: report.derive && mine.is_empty(),
                })
            })
            .collect())
    }
}

/// One update as a set request gives it.
fn set_update<'u>(update: &Update<'u>) -> SetUpdate<'u> {
    SetUpdate {
        name: update.name,
        is: update.state.map(as_object).unwrap_or_default(),
        should: update
            .should
            .iter()
            .map(|(key, value)| (key.clone(), serde_json::Value::from(value)))
            .collect(),
    }
}

/// Side effects: the resources a set answer names that were not asked
/// for, logged.
fn log_side_effects(label: &str, report: &SetReport, asked: &HashSet<&str>, secrets: &[String]) {
    for entry in &report.entries {
        if asked.contains(entry.name.as_str()) {
            continue;
        }
        match &entry.body {
            Ok(changes) => log::info!(
                "{label}: set also changed '{}' ({})",
                escape(&entry.name),
                changes
                    .iter()
                    .map(|c| escape(&c.attr))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            Err(error) => log::warn!(
                "{label}: set reported an error for '{}', which was not asked for: {}",
                escape(&entry.name),
                escape_lines(&secrets::redact(&error.to_string(), secrets))
            ),
        }
    }
}

/// What a set answer's entries mean for the updates asked.
struct Answered<'a> {
    runner: &'a dyn Runner,
    provider: &'a Provider,
    label: &'a str,
    secrets: &'a [String],
}

impl Answered<'_> {
    /// The changes `mine`, the entries of the update of `name`, report,
    /// each value checked against its type; an entry's error is the
    /// update's.
    fn changes(&self, name: &str, mine: &[&SetEntry]) -> Result<Vec<Change>> {
        let mut changes = Vec::new();
        for entry in mine {
            let reported = entry.body.as_ref().map_err(|error| Error::Reported {
                provider: self.label.to_owned(),
                action: Action::Set.as_str().to_owned(),
                message: escape_lines(&secrets::redact(
                    &format!("'{}': {}", name, error.message),
                    self.secrets,
                )),
                kind: Some(escape(error.kind.as_str())),
            })?;
            for change in reported {
                let value = |json: &serde_json::Value| {
                    self.runner.check().value(
                        self.provider,
                        Action::Set,
                        name,
                        &change.attr,
                        Raw::Json(json),
                    )
                };
                changes.push(Change {
                    attr: change.attr.clone(),
                    is: value(&change.is)?,
                    was: if change.was.is_null() {
                        None
                    } else {
                        Some(value(&change.was)?)
                    },
                });
            }
        }
        Ok(changes)
    }
}

/// The entry of a get answer for each name asked, in the order asked:
/// the first entry of that name (a provider may answer in any order, name
/// a resource twice, or add resources not asked for, which are left out),
/// or `None` when the answer does not name it. One map, so that matching
/// N names is linear in N.
fn answers_for<'e>(entries: &'e [GetEntry], names: &[&str]) -> Vec<Option<&'e GetEntry>> {
    let mut by_name: HashMap<&str, &GetEntry> = HashMap::with_capacity(entries.len());
    for entry in entries {
        by_name.entry(entry.name.as_str()).or_insert(entry);
    }
    names
        .iter()
        .map(|name| by_name.get(name).copied())
        .collect()
}

/// Runs one call and returns its whole stdout.
fn call(
    runner: &dyn Runner,
    provider: &Provider,
    action: Action,
    stdin: Vec<u8>,
    secrets: Vec<String>,
) -> Result<String> {
    let mut text = String::new();
    let invocation = Invocation {
        stdin: Some(stdin),
        max_line: MAX_DOCUMENT,
        max_answer: MAX_DOCUMENT,
        secrets,
        ..Invocation::to(provider, action, vec![format!("ral_action={action}")])
    };
    runner.run(
        &provider.qualified_name(),
        &provider.source,
        invocation,
        &mut |line| {
            text.push_str(line);
            text.push('\n');
            Ok(Budget::Continue)
        },
        &mut || Ok(()),
    )?;
    Ok(text)
}

/// The entries of one get call for `names` (none: every resource); a
/// provider that runs commands is told the manifest's values `should`
/// (redacted from what it says, as an update's are).
fn get(
    runner: &dyn Runner,
    provider: &Provider,
    names: &[&str],
    should: &[&[(String, crate::types::Value)]],
) -> Result<Vec<GetEntry>> {
    let (request, secrets) = match provider.meta.runs_commands && !should.is_empty() {
        true => {
            let mut told = Map::new();
            for (name, attrs) in names.iter().zip(should) {
                let values: Map<String, Json> = (attrs.iter())
                    .map(|(key, value)| (key.clone(), Json::from(value)))
                    .collect();
                told.insert((*name).to_owned(), Json::Object(values));
            }
            let mut secrets: Vec<String> = (should.iter())
                .flat_map(|attrs| super::told_secrets(provider, attrs))
                .collect();
            secrets.sort_by_key(|text| std::cmp::Reverse(text.len()));
            secrets.dedup();
            let request = json!({ "names": names, "should": told });
            (request.to_string().into_bytes(), secrets)
        }
        false => (get_request(names), Vec::new()),
    };
    let text = call(runner, provider, Action::Get, request, secrets.clone())?;
    let mut entries =
        parse_get(&text).map_err(|e| e.redacted(&secrets).into_error(provider, Action::Get))?;
    if !secrets.is_empty() {
        redact_entries(&mut entries, &secrets);
    }
    Ok(entries)
}

/// Takes the secrets a get was told out of what its provider (one that
/// runs commands) says of them: each resource's error, and the texts it
/// reads from the manifest's values (why a command would run quotes its
/// checks). The values it was told come back as they were, and are
/// shown as their attributes' sensitivity says.
fn redact_entries(entries: &mut [GetEntry], secrets: &[String]) {
    let needles = secrets::Needles::of(secrets);
    for entry in entries {
        match &mut entry.body {
            Ok(attrs) => {
                if let Some(Json::String(text)) = attrs.get_mut(crate::metadata::RUN) {
                    *text = needles.redact(text);
                }
            }
            Err(error) => error.message = needles.redact(&error.message),
        }
    }
}

/// A reported resource, typed against the metadata.
fn typed(
    runner: &dyn Runner,
    provider: &Provider,
    name: &str,
    attrs: &Map<String, serde_json::Value>,
) -> Result<Resource> {
    runner.check().resource(
        provider,
        Action::Get,
        name,
        attrs.iter().map(|(k, v)| (k.as_str(), Raw::Json(v))),
    )
}

/// A resource as the JSON object get would have reported.
fn as_object(resource: &Resource) -> Map<String, serde_json::Value> {
    let mut map = Map::new();
    map.insert(
        "name".to_owned(),
        serde_json::Value::from(resource.name.as_str()),
    );
    for (key, value) in &resource.attrs {
        map.insert(key.clone(), serde_json::Value::from(value));
    }
    map
}

#[cfg(test)]
mod tests {
    use super::super::canned::Canned;
    use super::*;

    /// A json answer of a provider on the SDK is read whole.
    #[test]
    fn the_sdk_writes_documents_within_the_limit_read_here() {
        assert_eq!(crate::sdk::serve::DOCUMENT_MAX, MAX_DOCUMENT);
    }

    fn protocol(result: Result<impl std::fmt::Debug, OutputError>) -> String {
        match result {
            Err(OutputError::Protocol(message)) => message,
            other => panic!("expected a protocol error, got {other:?}"),
        }
    }

    fn provider() -> Provider {
        super::super::canned::provider("json", "[get, set]")
    }

    #[test]
    fn get_answers_are_matched_to_the_names_asked() {
        use super::super::Convention;
        // Out of order, b twice (the first counts), x not asked for, c
        // missing, d unknown.
        let runner = Canned {
            answer: r#"{"resources": [
                {"name": "b", "value": "b1"}, {"name": "x", "value": "x"},
                {"name": "a", "value": "a"}, {"name": "b", "value": "b2"},
                {"name": "d", "error": {"kind": "unknown", "message": "no d"}},
                {"name": "e", "error": {"kind": "failed", "message": "broken e"}}
            ]}"#
            .to_owned(),
            check: Default::default(),
        };
        let found = JsonConvention
            .get_many(&runner, &provider(), &["a", "b", "c", "d", "e", "a"])
            .unwrap();
        let value = |at: usize| match &found[at] {
            Ok(Some(resource)) => resource
                .attrs
                .get("value")
                .unwrap()
                .as_str()
                .map(str::to_owned),
            Ok(None) => None,
            Err(e) => panic!("{at}: {e}"),
        };
        assert_eq!(found.len(), 6);
        assert_eq!(value(0).as_deref(), Some("a"));
        assert_eq!(value(1).as_deref(), Some("b1"));
        assert_eq!(value(2), None, "c is not in the answer");
        assert_eq!(value(3), None, "d is unknown");
        let Err(Error::Reported { message, .. }) = &found[4] else {
            panic!("e: {:?}", found[4]);
        };
        assert_eq!(message, "broken e");
        assert_eq!(value(5).as_deref(), Some("a"), "a name asked twice");
    }

    #[test]
    fn answers_for_picks_the_first_entry_of_each_name_asked() {
        let entry = |name: &str, value: &str| GetEntry {
            name: name.to_owned(),
            body: Ok([("value".to_owned(), Json::from(value))]
                .into_iter()
                .collect()),
        };
        let entries = [entry("z", "1"), entry("y", "2"), entry("z", "3")];
        let picked = answers_for(&entries, &["y", "z", "w"]);
        let values: Vec<Option<&Json>> = picked
            .iter()
            .map(|e| e.map(|e| &e.body.as_ref().unwrap()["value"]))
            .collect();
        assert_eq!(
            values,
            [Some(&Json::from("2")), Some(&Json::from("1")), None]
        );
    }

    #[test]
    fn a_get_of_many_names_answered_in_reverse_is_matched_whole() {
        use super::super::Convention;
        // Names answered in reverse order, each matched to its own answer.
        // (That the matching is linear is a speed figure: bench/plan_scale.py
        // measures it, no test times it.)
        let names: Vec<String> = (0..5_000).map(|n| format!("n{n}")).collect();
        let resources: Vec<Json> = names
            .iter()
            .rev()
            .map(|n| json!({"name": n, "value": n}))
            .collect();
        let runner = Canned {
            answer: json!({ "resources": resources }).to_string(),
            check: Default::default(),
        };
        let asked: Vec<&str> = names.iter().map(String::as_str).collect();
        let found = JsonConvention
            .get_many(&runner, &provider(), &asked)
            .unwrap();
        assert!(found.iter().zip(&names).all(|(one, name)| matches!(
            one,
            Ok(Some(resource)) if &resource.name == name
                && resource.attrs.get("value").and_then(|v| v.as_str()) == Some(name)
        )));
    }

    #[test]
    fn get_keeps_json_types_and_per_resource_errors() {
        let entries = parse_get(
            r#"{"resources": [{"name": "a", "port": 80, "on": true, "l": [1]},
                {"name": "b", "error": {"kind": "unknown", "message": "no such"}}]}"#,
        )
        .unwrap();
        assert_eq!(entries[0].body.as_ref().unwrap()["port"], json!(80));
        assert_eq!(
            entries[1].body,
            Err(ReportedError {
                kind: ErrorKind::Unknown,
                message: "no such".into()
            })
        );
    }

    #[test]
    fn malformed_get_documents_name_the_path() {
        for (text, needle) in [
            ("not json", "not one JSON document"),
            ("[1]", "the output is an array, not a JSON object"),
            ("{}", "the document has no 'resources'"),
            (
                r#"{"resources": {}}"#,
                "'resources' is an object, not an array",
            ),
            (
                r#"{"resources": [5]}"#,
                "resources[0] is a number, not an object",
            ),
            (
                r#"{"resources": [{"name": "a"}, {"port": 1}]}"#,
                "resources[1] has no 'name'",
            ),
            (
                r#"{"resources": [{"name": 7}]}"#,
                "resources[0].name is a number, not a string",
            ),
            (
                r#"{"resources": [{"name": "a", "error": {"kind": "failed"}}]}"#,
                "resources[0].error has no 'message'",
            ),
            (
                r#"{"resources": [{"name": "a", "error": {"kind": "oops", "message": "m"}}]}"#,
                "resources[0].error.kind is 'oops'",
            ),
            (r#"{"error": {"message": "m"}}"#, "error has no 'kind'"),
            (r#"{"error": "boom"}"#, "error is a string, not an object"),
        ] {
            assert!(protocol(parse_get(text)).contains(needle), "{text}");
        }
    }

    #[test]
    fn whole_call_errors_are_reported() {
        assert_eq!(
            parse_set(r#"{"error": {"kind": "forbidden", "message": "not root"}, "changes": []}"#),
            Err(OutputError::Call(ReportedError {
                kind: ErrorKind::Forbidden,
                message: "not root".into()
            }))
        );
    }

    #[test]
    fn set_answers_are_checked() {
        let report = parse_set(
            r#"{"changes": [{"name": "a", "mode": {"is": "0600", "was": "0644"}, "n": {"is": 1}},
                {"name": "b", "error": {"kind": "failed", "message": "disk full"}}], "derive": true}"#,
        )
        .unwrap();
        assert!(report.derive);
        let changes = report.entries[0].body.as_ref().unwrap();
        assert_eq!(
            changes[1],
            JsonChange {
                attr: "n".into(),
                is: json!(1),
                was: Json::Null
            }
        );
        assert!(report.entries[1].body.is_err());
        for (text, needle) in [
            ("{}", "the document has no 'changes'"),
            (
                r#"{"changes": [{"name": "a", "mode": {"was": 1}}]}"#,
                "changes[0].mode has no 'is'",
            ),
            (
                r#"{"changes": [{"name": "a", "mode": 5}]}"#,
                "changes[0].mode is a number, not an object",
            ),
            (
                r#"{"changes": [{"name": "a", "mode": {"is": 1, "old": 2}}]}"#,
                "changes[0].mode has an unknown key 'old'",
            ),
            (
                r#"{"changes": [], "derive": "yes"}"#,
                "'derive' is a string, not a boolean",
            ),
            (
                r#"{"changes": [{"mode": {"is": 1}}]}"#,
                "changes[0] has no 'name'",
            ),
        ] {
            assert!(protocol(parse_set(text)).contains(needle), "{text}");
        }
    }

    #[test]
    fn requests_have_the_documented_shape() {
        let get: Json = serde_json::from_slice(&get_request(&["a"])).unwrap();
        assert_eq!(get, json!({"names": ["a"]}));
        let mut should = Map::new();
        should.insert("mode".into(), json!("0600"));
        let set: Json = serde_json::from_slice(&set_request(
            &[SetUpdate {
                name: "a",
                is: Map::new(),
                should,
            }],
            true,
        ))
        .unwrap();
        assert_eq!(
            set,
            json!({"ral": {"noop": true}, "updates": [{"name": "a", "is": {}, "should": {"mode": "0600"}}]})
        );
    }
}
