//! The json calling convention: the documents a provider gets on stdin and
//! the checks of the documents it answers with.
//!
//! Every violation of the documented shape is an [`OutputError`] naming the
//! offending path (`resources[2].name`, `changes[0].mode.is`), never a
//! panic or a silent success. A whole-call error
//! (`{"error": {"kind", "message"}}`) becomes [`OutputError::Call`].

use serde_json::{json, Map, Value as Json};

use crate::invoke::simple::OutputError;

/// The largest document accepted from a provider, in bytes. A listing in
/// this convention is one document, so it is held in memory whole.
pub const MAX_DOCUMENT: usize = 64 * 1024 * 1024;

/// The kinds of error the convention defines.
const KINDS: [&str; 3] = ["unknown", "forbidden", "failed"];

/// An error a provider reported, for the whole call or one resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReportedError {
    pub kind: String,
    pub message: String,
}

impl std::fmt::Display for ReportedError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.message, self.kind)
    }
}

/// One resource of a get answer: its attributes, or its error.
#[derive(Debug, Clone, PartialEq)]
pub struct GetEntry {
    pub name: String,
    pub body: Result<Map<String, Json>, ReportedError>,
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
    pub body: Result<Vec<JsonChange>, ReportedError>,
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

fn reported_error(value: &Json, path: &str) -> Result<ReportedError, OutputError> {
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
    if !KINDS.contains(&kind.as_str()) {
        return Err(malformed(format!(
            "{path}.kind is '{kind}'; expected one of {}",
            KINDS.join(", ")
        )));
    }
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

fn name_of(map: &Map<String, Json>, path: &str) -> Result<String, OutputError> {
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
pub fn parse_set(text: &str) -> Result<SetReport, OutputError> {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn protocol(result: Result<impl std::fmt::Debug, OutputError>) -> String {
        match result {
            Err(OutputError::Protocol(message)) => message,
            other => panic!("expected a protocol error, got {other:?}"),
        }
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
                kind: "unknown".into(),
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
                kind: "forbidden".into(),
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
