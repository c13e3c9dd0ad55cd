//! Typed attribute values and their plain-data forms (JSON, and the text a
//! simple provider receives).

use indexmap::IndexMap;

use crate::quoting::quote_word;

/// A typed attribute value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// No value (`optional[T]` left empty, JSON `null`).
    Null,
    Bool(bool),
    Integer(i64),
    Float(f64),
    String(String),
    Array(Vec<Value>),
    /// Boxed: every value is as large as its largest kind, and hashes
    /// are rare beside the strings a plan holds many of.
    Hash(Box<IndexMap<String, Value>>),
}

impl Value {
    /// The string inside, for values that are plain strings.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(text) => Some(text),
            _ => None,
        }
    }

    /// `sha256:` and the hex SHA-256 of its text: how a value too large or
    /// private to show is shown (see the `withheld` module).
    pub fn digest(&self) -> String {
        use sha2::Digest;
        format!(
            "sha256:{}",
            crate::text::hex(&sha2::Sha256::digest(self.to_text().as_bytes()))
        )
    }

    /// The text of a scalar as a simple provider receives and prints it.
    /// Arrays and hashes are written as shell words (see
    /// [`Value::shell_words`]).
    pub fn to_text(&self) -> String {
        match self {
            Value::Null => String::new(),
            Value::Bool(flag) => flag.to_string(),
            Value::Integer(number) => number.to_string(),
            Value::Float(number) => number.to_string(),
            Value::String(text) => text.clone(),
            Value::Array(_) | Value::Hash(_) => self.shell_words().join(" "),
        }
    }

    /// An array's elements, or a hash's `key=value` pairs, each quoted as one
    /// shell word; a scalar gives its own text, quoted.
    pub fn shell_words(&self) -> Vec<String> {
        match self {
            Value::Array(items) => items
                .iter()
                .map(|item| quote_word(&item.to_text()))
                .collect(),
            Value::Hash(map) => map
                .iter()
                .map(|(key, item)| quote_word(&format!("{key}={}", item.to_text())))
                .collect(),
            scalar => vec![quote_word(&scalar.to_text())],
        }
    }

    /// Converts untyped JSON (a hash's values).
    pub fn from_json(json: &serde_json::Value) -> Value {
        match json {
            serde_json::Value::Null => Value::Null,
            serde_json::Value::Bool(flag) => Value::Bool(*flag),
            serde_json::Value::Number(number) => match number.as_i64() {
                Some(integer) => Value::Integer(integer),
                None => Value::Float(number.as_f64().unwrap_or(f64::NAN)),
            },
            serde_json::Value::String(text) => Value::String(text.clone()),
            serde_json::Value::Array(items) => {
                Value::Array(items.iter().map(Value::from_json).collect())
            }
            serde_json::Value::Object(map) => Value::Hash(Box::new(
                map.iter()
                    .map(|(key, item)| (key.clone(), Value::from_json(item)))
                    .collect(),
            )),
        }
    }
}

/// Serialises like the `serde_json::Value` it converts to, without building
/// one (listings write many).
impl serde::Serialize for Value {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{SerializeMap, SerializeSeq};
        match self {
            Value::Null => serializer.serialize_unit(),
            Value::Bool(flag) => serializer.serialize_bool(*flag),
            Value::Integer(number) => serializer.serialize_i64(*number),
            Value::Float(number) if number.is_finite() => serializer.serialize_f64(*number),
            // serde_json::Value turns a non-finite float into null.
            Value::Float(_) => serializer.serialize_unit(),
            Value::String(text) => serializer.serialize_str(text),
            Value::Array(items) => {
                let mut seq = serializer.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(item)?;
                }
                seq.end()
            }
            Value::Hash(map) => {
                let mut out = serializer.serialize_map(Some(map.len()))?;
                for (key, item) in map.iter() {
                    out.serialize_entry(key, item)?;
                }
                out.end()
            }
        }
    }
}

impl From<&Value> for serde_json::Value {
    fn from(value: &Value) -> serde_json::Value {
        match value {
            Value::Null => serde_json::Value::Null,
            Value::Bool(flag) => serde_json::Value::from(*flag),
            Value::Integer(number) => serde_json::Value::from(*number),
            Value::Float(number) => serde_json::Value::from(*number),
            Value::String(text) => serde_json::Value::from(text.as_str()),
            Value::Array(items) => serde_json::Value::Array(items.iter().map(Into::into).collect()),
            Value::Hash(map) => serde_json::Value::Object(
                map.iter()
                    .map(|(key, item)| (key.clone(), item.into()))
                    .collect(),
            ),
        }
    }
}

impl From<&str> for Value {
    fn from(text: &str) -> Value {
        Value::String(text.to_owned())
    }
}
