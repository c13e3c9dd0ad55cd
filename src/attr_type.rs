//! Attribute types and typed values.
//!
//! Metadata declares each attribute's type as a string (`string`, `boolean`,
//! `array[string]`, `enum[a, b]`). This module parses those strings, converts
//! values from the command line and from provider output into [`Value`]s, and
//! writes values back in the form the simple calling convention carries.
//!
//! Arrays travel through the simple convention as one string of POSIX shell
//! words (`a 'b c'`), in both directions, so that elements may hold spaces and
//! quotes. On the command line an array is written comma-separated (`a,b`).

use std::fmt;

use crate::invoke::quoting::quote_word;

/// The declared type of an attribute.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AttrType {
    /// Any text.
    String,
    /// Exactly `true` or `false`.
    Boolean,
    /// A list of strings.
    ArrayOfStrings,
    /// One of a fixed set of words.
    Enum(Vec<String>),
}

/// A typed attribute value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    String(String),
    Bool(bool),
    Array(Vec<String>),
}

impl AttrType {
    /// Parses a type string from metadata. Keywords are case-insensitive and
    /// spaces around brackets and commas are ignored.
    pub fn parse(text: &str) -> Result<AttrType, String> {
        let trimmed = text.trim();
        let (head, inner) = match trimmed.find('[') {
            Some(open) => {
                let Some(body) = trimmed[open + 1..].strip_suffix(']') else {
                    return Err(format!("type '{text}' has a '[' without a closing ']'"));
                };
                (trimmed[..open].trim(), Some(body))
            }
            None => (trimmed, None),
        };
        match (head.to_ascii_lowercase().as_str(), inner) {
            ("string", None) => Ok(AttrType::String),
            ("boolean", None) => Ok(AttrType::Boolean),
            ("array", Some(body)) if body.trim().eq_ignore_ascii_case("string") => {
                Ok(AttrType::ArrayOfStrings)
            }
            ("array", _) => Err(format!(
                "type '{text}' is not supported: arrays must be array[string]"
            )),
            ("enum", Some(body)) => parse_enum_members(text, body).map(AttrType::Enum),
            ("enum", None) => Err(format!("type '{text}' needs its members: enum[a, b, ...]")),
            _ => Err(format!(
                "unknown type '{text}'; expected string, boolean, array[string] or enum[...]"
            )),
        }
    }

    /// Converts a value typed by a person on the command line.
    pub fn parse_cli(&self, raw: &str) -> Result<Value, String> {
        match self {
            AttrType::ArrayOfStrings => Ok(Value::Array(if raw.trim().is_empty() {
                Vec::new()
            } else {
                raw.split(',').map(|item| item.trim().to_owned()).collect()
            })),
            _ => self.parse_scalar(raw),
        }
    }

    /// Converts a value read from `# simple` provider output.
    pub fn parse_wire(&self, raw: &str) -> Result<Value, String> {
        match self {
            AttrType::ArrayOfStrings => shell_words::split(raw)
                .map(Value::Array)
                .map_err(|_| format!("'{raw}' is not a list of shell words (unbalanced quotes)")),
            _ => self.parse_scalar(raw),
        }
    }

    fn parse_scalar(&self, raw: &str) -> Result<Value, String> {
        match self {
            AttrType::String | AttrType::ArrayOfStrings => Ok(Value::String(raw.to_owned())),
            AttrType::Boolean => match raw {
                "true" => Ok(Value::Bool(true)),
                "false" => Ok(Value::Bool(false)),
                _ => Err("expected true or false".to_owned()),
            },
            AttrType::Enum(members) => {
                if members.iter().any(|member| member == raw) {
                    Ok(Value::String(raw.to_owned()))
                } else {
                    Err(format!("expected one of {}", members.join(", ")))
                }
            }
        }
    }
}

fn parse_enum_members(text: &str, body: &str) -> Result<Vec<String>, String> {
    let members: Vec<String> = body.split(',').map(|m| m.trim().to_owned()).collect();
    if members.iter().any(|m| m.is_empty()) {
        return Err(format!("type '{text}' has an empty enum member"));
    }
    if let Some(bad) = members
        .iter()
        .find(|m| m.contains(|c: char| c.is_whitespace() || c == '[' || c == ']'))
    {
        return Err(format!("type '{text}' has an invalid enum member '{bad}'"));
    }
    Ok(members)
}

impl fmt::Display for AttrType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AttrType::String => f.write_str("string"),
            AttrType::Boolean => f.write_str("boolean"),
            AttrType::ArrayOfStrings => f.write_str("array[string]"),
            AttrType::Enum(members) => write!(f, "enum[{}]", members.join(", ")),
        }
    }
}

impl Value {
    /// The text a provider receives for this value (before shell quoting).
    pub fn to_wire(&self) -> String {
        match self {
            Value::String(text) => text.clone(),
            Value::Bool(flag) => flag.to_string(),
            Value::Array(items) => items
                .iter()
                .map(|item| quote_word(item))
                .collect::<Vec<_>>()
                .join(" "),
        }
    }

    /// The string inside, for values that are plain strings.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(text) => Some(text),
            _ => None,
        }
    }
}

impl From<&Value> for serde_json::Value {
    fn from(value: &Value) -> serde_json::Value {
        match value {
            Value::String(text) => serde_json::Value::from(text.as_str()),
            Value::Bool(flag) => serde_json::Value::from(*flag),
            Value::Array(items) => serde_json::Value::from(items.clone()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_libral_type_strings_with_spacing_and_case() {
        assert_eq!(AttrType::parse("string"), Ok(AttrType::String));
        assert_eq!(AttrType::parse(" Boolean "), Ok(AttrType::Boolean));
        assert_eq!(
            AttrType::parse("ARRAY[ string ]"),
            Ok(AttrType::ArrayOfStrings)
        );
        assert_eq!(
            AttrType::parse("enum[present,absent]"),
            AttrType::parse("enum[ present , absent ]")
        );
        assert_eq!(
            AttrType::parse("enum[a, b]").unwrap().to_string(),
            "enum[a, b]"
        );
    }

    #[test]
    fn rejects_malformed_type_strings_with_a_reason() {
        for (text, needle) in [
            ("enum", "needs its members"),
            ("enum[]", "empty enum member"),
            ("enum[a,", "without a closing"),
            ("enum[a,,b]", "empty enum member"),
            ("array[integer]", "array[string]"),
            ("strin", "unknown type"),
        ] {
            let err = AttrType::parse(text).unwrap_err();
            assert!(err.contains(needle), "{text}: {err}");
        }
    }

    #[test]
    fn booleans_accept_exactly_true_and_false() {
        let t = AttrType::Boolean;
        assert_eq!(t.parse_cli("true"), Ok(Value::Bool(true)));
        assert_eq!(t.parse_wire("false"), Ok(Value::Bool(false)));
        for bad in ["TRUE", "yes", "1", ""] {
            assert!(t.parse_cli(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn arrays_round_trip_through_shell_words() {
        let items = vec![
            "a".to_owned(),
            "b c".to_owned(),
            "it's".to_owned(),
            String::new(),
        ];
        let wire = Value::Array(items.clone()).to_wire();
        assert_eq!(
            AttrType::ArrayOfStrings.parse_wire(&wire),
            Ok(Value::Array(items))
        );
        assert_eq!(
            AttrType::ArrayOfStrings.parse_cli("x, y"),
            Ok(Value::Array(vec!["x".into(), "y".into()]))
        );
        assert_eq!(
            AttrType::ArrayOfStrings.parse_cli(""),
            Ok(Value::Array(vec![]))
        );
    }
}
