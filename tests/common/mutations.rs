//! Negative schema tests: a real document, checked to be valid, then broken
//! one way at a time; the schema must reject every broken copy. A schema
//! loosened (to `{}`, say) accepts them and fails the test.

use serde_json::Value as Json;

/// One way to break a document; paths are JSON pointers (`/a/0/b`).
pub enum Edit {
    /// Sets (or adds) the value at the path.
    Set(String, Json),
    /// Removes the member or element at the path.
    Remove(String),
    /// Replaces the whole document.
    Whole(Json),
}

impl Edit {
    pub fn set(path: impl Into<String>, value: Json) -> Edit {
        Edit::Set(path.into(), value)
    }

    pub fn remove(path: impl Into<String>) -> Edit {
        Edit::Remove(path.into())
    }
}

/// A JSON pointer's parent, and its last token unescaped.
fn split(path: &str) -> (&str, String) {
    let (parent, last) = path.rsplit_once('/').expect("a JSON pointer");
    (parent, last.replace("~1", "/").replace("~0", "~"))
}

fn edited(doc: &Json, edit: &Edit) -> Json {
    let mut doc = doc.clone();
    match edit {
        Edit::Whole(value) => return value.clone(),
        Edit::Set(path, value) => {
            let (parent, last) = split(path);
            match doc.pointer_mut(parent) {
                Some(Json::Object(map)) => {
                    map.insert(last, value.clone());
                }
                Some(Json::Array(items)) => items[last.parse::<usize>().unwrap()] = value.clone(),
                _ => panic!("{path}: no such place in {doc}"),
            }
        }
        Edit::Remove(path) => {
            let (parent, last) = split(path);
            let removed = match doc.pointer_mut(parent) {
                Some(Json::Object(map)) => map.remove(&last).is_some(),
                Some(Json::Array(items)) => {
                    items.remove(last.parse::<usize>().unwrap());
                    true
                }
                _ => false,
            };
            assert!(removed, "{path}: nothing to remove in {doc}");
        }
    }
    doc
}

/// Fails unless `schema` accepts `doc` and rejects each edited copy of it
/// (each edit comes with a description); the message names every edit
/// that was accepted.
#[track_caller]
pub fn assert_each_edit_rejected<S: std::fmt::Display>(
    schema: &jsonschema::Validator,
    doc: &Json,
    edits: impl IntoIterator<Item = (S, Edit)>,
) {
    let errors: Vec<String> = schema.iter_errors(doc).map(|e| e.to_string()).collect();
    assert!(
        errors.is_empty(),
        "the real document is invalid: {errors:?}\n{doc}"
    );
    let accepted: Vec<String> = edits
        .into_iter()
        .map(|(what, edit)| (what, edited(doc, &edit)))
        .filter(|(_, broken)| schema.is_valid(broken))
        .map(|(what, broken)| format!("{what}: {broken}"))
        .collect();
    assert!(
        accepted.is_empty(),
        "the schema accepts broken documents:\n{}",
        accepted.join("\n")
    );
}
