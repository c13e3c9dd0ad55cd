//! The declared type of an attribute ([`AttrType`]), its compiled
//! patterns, and its written form; reading one is `parse.rs`'s, and
//! converting values by one `convert.rs`'s.

use std::fmt;

/// The declared type of an attribute.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AttrType {
    String,
    Boolean,
    /// Optionally bounded, both ends inclusive.
    Integer(Option<(i64, i64)>),
    Float,
    Pattern(Pattern),
    Enum(Vec<String>),
    Array(Box<AttrType>),
    Hash,
    /// Any JSON value: text, numbers, booleans, null, and arrays and
    /// maps of them at any depth (what Facter calls structured facts).
    Data,
    Optional(Box<AttrType>),
    Variant(Vec<AttrType>),
}

/// A compiled `pattern[/re/]`; equal when written the same.
#[derive(Debug, Clone)]
pub struct Pattern {
    source: String,
    regex: regex::Regex,
}

impl Pattern {
    /// Compiles `source`; a regular expression the `regex` crate refuses
    /// is the type string's error.
    pub(super) fn new(source: &str) -> Result<Pattern, regex::Error> {
        Ok(Pattern {
            source: source.to_owned(),
            regex: regex::Regex::new(source)?,
        })
    }

    pub fn is_match(&self, text: &str) -> bool {
        self.regex.is_match(text)
    }

    /// The regular expression as written.
    pub(super) fn source(&self) -> &str {
        &self.source
    }
}

impl PartialEq for Pattern {
    fn eq(&self, other: &Pattern) -> bool {
        self.source == other.source
    }
}

impl Eq for Pattern {}

impl AttrType {
    /// True when a value of the type may be an array or a hash.
    pub fn may_hold_collection(&self) -> bool {
        match self {
            AttrType::Array(_) | AttrType::Hash | AttrType::Data => true,
            AttrType::Optional(inner) => inner.may_hold_collection(),
            AttrType::Variant(types) => types.iter().any(AttrType::may_hold_collection),
            _ => false,
        }
    }
}

impl fmt::Display for AttrType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let list = |f: &mut fmt::Formatter<'_>, name: &str, items: &[AttrType]| {
            let inner: Vec<String> = items.iter().map(ToString::to_string).collect();
            write!(f, "{name}[{}]", inner.join(", "))
        };
        match self {
            AttrType::String => f.write_str("string"),
            AttrType::Boolean => f.write_str("boolean"),
            AttrType::Integer(None) => f.write_str("integer"),
            AttrType::Integer(Some((min, max))) => write!(f, "integer[{min}, {max}]"),
            AttrType::Float => f.write_str("float"),
            AttrType::Pattern(pattern) => {
                write!(f, "pattern[/{}/]", pattern.source.replace('/', "\\/"))
            }
            AttrType::Enum(members) => write!(f, "enum[{}]", members.join(", ")),
            AttrType::Array(inner) => write!(f, "array[{inner}]"),
            AttrType::Hash => f.write_str("hash"),
            AttrType::Data => f.write_str("data"),
            AttrType::Optional(inner) => write!(f, "optional[{inner}]"),
            AttrType::Variant(types) => list(f, "variant", types),
        }
    }
}
