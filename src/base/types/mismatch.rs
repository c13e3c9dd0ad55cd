//! Why a value is not of a type, and why a type string is not a type: the
//! two typed errors of `types`. Callers tell the cases apart by variant (an
//! integer out of its range, a text no enum member spells, a value inside
//! an array...), and each prints as the reason a message gives after the
//! attribute and the value. Texts from outside (items, keys) print
//! escaped.

use std::fmt;

use crate::text::escape;

/// A value that does not convert into a type.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Mismatch {
    /// A boolean written other than `true` or `false`.
    #[error("expected true or false")]
    NotBoolean,
    /// A text that is no decimal integer (hex, fraction, empty, ...).
    #[error("expected a decimal integer")]
    NotInteger,
    /// A decimal integer beyond what 64 bits hold.
    #[error("the integer is out of the 64-bit range")]
    IntegerTooLarge,
    /// A JSON number that is no integer.
    #[error("expected an integer, found {0}")]
    Fraction(String),
    /// An integer outside the type's declared range.
    #[error("{value} is outside the range {min} to {max}")]
    OutOfRange { value: i64, min: i64, max: i64 },
    /// A text that is no decimal number.
    #[error("expected a decimal number")]
    NotNumber,
    /// A number too large for a float.
    #[error("the number is too large")]
    NumberTooLarge,
    /// A JSON number that is no float.
    #[error("{0} is not a float")]
    NotFloat(String),
    /// A text the type's regular expression does not match.
    #[error("does not match /{pattern}/")]
    NoMatch { pattern: String },
    /// A text that is none of the enum's members.
    #[error("expected one of {}", .members.join(", "))]
    NotAMember { members: Vec<String> },
    /// A hash's item written without `=`.
    #[error("'{}' is not key=value", escape(.item))]
    NotKeyValue { item: String },
    /// A hash's value that is no text (hashes hold texts).
    #[error("the value of '{}' is {found}; hash values are text", escape(.key))]
    HashValueNotText { key: String, found: Found },
    /// `# simple` output that is no list of shell words.
    #[error("not a list of shell words (unbalanced quotes)")]
    UnbalancedQuotes,
    /// A command-line value starting like JSON that is not JSON.
    #[error("not valid JSON: {0}")]
    BadJson(String),
    /// A JSON null for a type that is not optional.
    #[error("null is not allowed (only optional[T] may be null)")]
    Null,
    /// A manifest's null for a type that is not optional.
    #[error("it has no value (null); write '' for an empty text, or leave the attribute out")]
    NoValue,
    /// A value of another kind than the type's (a boolean for an integer,
    /// a list for a string, ...).
    #[error("{}", kind_message(expected, found))]
    WrongKind { expected: String, found: Found },
    /// An element of an array that does not convert.
    #[error("element {index}{}: {reason}", .item.as_ref().map(|i| format!(" ('{}')", escape(i))).unwrap_or_default())]
    Element {
        index: usize,
        /// The element as written, when it was text.
        item: Option<String>,
        reason: Box<Mismatch>,
    },
    /// A variant none of whose types takes the value, with each one's
    /// reason.
    #[error("matches none of its types ({})", rejections(.reasons))]
    NoneOf { reasons: Vec<(String, Mismatch)> },
    /// A manifest's list or mapping that no type of a variant takes.
    #[error("it is none of {variant}")]
    NotAnyOf { variant: String },
    /// A variant two of whose types read the value differently.
    #[error("is ambiguous: it reads as {}", .readings.join(" and as "))]
    Ambiguous { readings: Vec<String> },
}

/// The kind of value found where another was expected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Found {
    JsonNull,
    Boolean,
    Integer,
    Float,
    String,
    Array,
    Object,
    /// A manifest's list.
    List,
    /// A manifest's mapping.
    Mapping,
}

impl fmt::Display for Found {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Found::JsonNull => "null",
            Found::Boolean => "a boolean",
            Found::Integer => "an integer",
            Found::Float => "a float",
            Found::String => "a string",
            Found::Array => "an array",
            Found::Object => "an object",
            Found::List => "a list",
            Found::Mapping => "a mapping",
        })
    }
}

fn kind_message(expected: &str, found: &Found) -> String {
    match found {
        // A manifest's list or mapping: said as the person wrote it.
        Found::List | Found::Mapping => format!("{found} is not a {expected}"),
        _ => format!("expected {expected}, found {found}"),
    }
}

fn rejections(reasons: &[(String, Mismatch)]) -> String {
    reasons
        .iter()
        .map(|(candidate, reason)| format!("not {candidate}: {reason}"))
        .collect::<Vec<_>>()
        .join("; ")
}

/// A type string (`integer[0, 10]`, `optional[enum[a, b]]`) that is no
/// type: the text and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("type '{text}': {reason}")]
pub struct BadType {
    pub text: String,
    pub reason: String,
}
