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

mod attr_type;
mod convert;
mod mismatch;
mod parse;
mod value;
mod written;

pub use attr_type::{AttrType, Pattern};
pub use mismatch::{BadType, Found, Mismatch};
pub use value::Value;
pub use written::Written;

/// A map keyed by attribute names, in insertion order, hashed with FNV (see
/// [`crate::fnv`]: attribute names are hashed for every attribute listed).
pub type AttrMap<V> = indexmap::IndexMap<String, V, crate::fnv::BuildFnv>;

#[cfg(test)]
mod tests;
