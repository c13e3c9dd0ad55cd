//! Values as a person wrote them, before their type is known: a manifest's
//! text, list, mapping or nothing, and the command line's text (always
//! [`Written::Text`]). One converter takes both to a typed [`Value`], so a
//! manifest and `ralsh TYPE NAME attr=value` accept the same values.

use crate::text::escape;

use super::{AttrType, Found, Mismatch, Value};

/// A value as written.
#[derive(Debug, Clone, PartialEq)]
pub enum Written {
    /// `null`, `~` or nothing, unquoted (manifests only).
    Null,
    Text(String),
    List(Vec<Written>),
    Map(Vec<(String, Written)>),
}

impl Written {
    /// What a JSON value reads as where a manifest's would be read (a
    /// plugin's config task attributes): the text of each scalar.
    pub fn from_json(json: &serde_json::Value) -> Written {
        use serde_json::Value as Json;
        match json {
            Json::Null => Written::Null,
            Json::String(text) => Written::Text(text.clone()),
            Json::Bool(flag) => Written::Text(flag.to_string()),
            Json::Number(number) => Written::Text(number.to_string()),
            Json::Array(items) => Written::List(items.iter().map(Written::from_json).collect()),
            Json::Object(map) => Written::Map(
                map.iter()
                    .map(|(key, value)| (key.clone(), Written::from_json(value)))
                    .collect(),
            ),
        }
    }

    /// The value as a message quotes it: a text in quotes, escaped; a
    /// list or a mapping by its kind.
    pub fn shown(&self) -> String {
        match self {
            Written::Null => "null".to_owned(),
            Written::Text(text) => format!("'{}'", escape(text)),
            Written::List(_) => "(a list)".to_owned(),
            Written::Map(_) => "(a mapping)".to_owned(),
        }
    }

    /// The value as `data` takes it: texts, lists and mappings as they
    /// are written, null as null.
    fn data(&self) -> Value {
        match self {
            Written::Null => Value::Null,
            Written::Text(text) => Value::String(text.clone()),
            Written::List(items) => Value::Array(items.iter().map(Written::data).collect()),
            Written::Map(pairs) => Value::Hash(Box::new(
                pairs
                    .iter()
                    .map(|(key, value)| (key.clone(), value.data()))
                    .collect(),
            )),
        }
    }

    /// The kind of value written, for a [`Mismatch`].
    fn found(&self) -> Found {
        match self {
            Written::Null => Found::JsonNull,
            Written::Text(_) => Found::String,
            Written::List(_) => Found::List,
            Written::Map(_) => Found::Mapping,
        }
    }
}

impl AttrType {
    /// Converts a written value: a text as on the command line, a list
    /// into an array, a mapping of texts into a hash; null only into an
    /// optional type.
    pub fn convert_written(&self, written: &Written) -> Result<Value, Mismatch> {
        match (self, written) {
            (AttrType::Optional(_), Written::Null) => Ok(Value::Null),
            (AttrType::Data, written) => Ok(written.data()),
            (_, Written::Null) => Err(Mismatch::NoValue),
            (_, Written::Text(text)) => self.parse_cli(text),
            (AttrType::Optional(inner), _) => inner.convert_written(written),
            (AttrType::Variant(types), _) => types
                .iter()
                .find_map(|t| t.convert_written(written).ok())
                .ok_or_else(|| Mismatch::NotAnyOf {
                    variant: self.to_string(),
                }),
            (AttrType::Array(inner), Written::List(items)) => {
                super::convert::elements(items, |item| inner.convert_written(item))
            }
            (AttrType::Hash, Written::Map(pairs)) => pairs
                .iter()
                .map(|(key, value)| match value {
                    Written::Text(text) => Ok((key.clone(), Value::String(text.clone()))),
                    other => Err(Mismatch::HashValueNotText {
                        key: key.clone(),
                        found: other.found(),
                    }),
                })
                .collect::<Result<_, _>>()
                .map(|map| Value::Hash(Box::new(map))),
            (_, Written::List(_) | Written::Map(_)) => Err(Mismatch::WrongKind {
                expected: self.to_string(),
                found: written.found(),
            }),
        }
    }
}
