//! Attribute types and typed values.
//!
//! Metadata declares each attribute's type as a string such as `string`,
//! `integer[0, 65535]`, `array[pattern[/^[a-z]+$/]]` or
//! `optional[variant[integer, enum[auto]]]`. [`AttrType::parse`] reads those
//! strings (`parse`), values are converted to and from the command line,
//! `# simple` output and JSON (`convert`), and [`Value`] holds the result
//! (`value`).
//!
//! | type | accepts |
//! | --- | --- |
//! | `string` | any text |
//! | `boolean` | exactly `true` or `false` |
//! | `integer`, `integer[min, max]` | decimal integers (`010` is ten), within the bounds |
//! | `float` | decimal numbers such as `1`, `-2.5`, `6.02e23` |
//! | `pattern[/re/]` | text the regular expression matches (anywhere; anchor with `^...$`) |
//! | `enum[a, b]` | one of the words |
//! | `array[T]` | a list of T |
//! | `hash` | a map with string keys |
//! | `data` | any JSON value, nested as deep as it goes (read-only facts: a machine's `os`, its `networking`) |
//! | `optional[T]` | T, or no value (null) |
//! | `variant[T1, T2]` | a value exactly one of the types accepts in one way |

mod convert;
mod mismatch;
mod parse;
mod value;
mod written;

use std::fmt;

pub use mismatch::{BadType, Found, Mismatch};
pub use value::Value;
pub use written::Written;

/// A map keyed by attribute names, in insertion order, hashed with FNV (see
/// [`crate::fnv`]: attribute names are hashed for every attribute listed).
pub type AttrMap<V> = indexmap::IndexMap<String, V, crate::fnv::BuildFnv>;

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
}

impl PartialEq for Pattern {
    fn eq(&self, other: &Pattern) -> bool {
        self.source == other.source
    }
}

impl Eq for Pattern {}

impl AttrType {
    /// Parses a type string from metadata. Keywords are case-insensitive and
    /// spaces around brackets and commas are ignored.
    pub fn parse(text: &str) -> Result<AttrType, BadType> {
        parse::parse(text)
    }

    /// True when the type accepts this text from the command line, as
    /// `ensure` must accept `present` and `absent`.
    pub fn accepts_text(&self, text: &str) -> bool {
        self.parse_cli(text).is_ok()
    }

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

#[cfg(test)]
mod tests;
