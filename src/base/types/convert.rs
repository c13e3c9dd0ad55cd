//! Converting values into a type: from the command line, from `# simple`
//! output and from JSON. Conversion is strict: a value becomes the declared
//! type in exactly one way or is rejected with the reason.
//!
//! Arrays and hashes as text: on the command line an array is
//! comma-separated (`a,b`) or a JSON array (`["a,b", "c"]`), a hash is
//! `key=value` pairs, comma-separated, or a JSON object. In `# simple` output
//! both are shell words: `a 'b c'` and `key=value 'other key=x y'`.

use indexmap::IndexMap;
use serde_json::Value as Json;

use super::{AttrType, Found, Mismatch, Value};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    CommandLine,
    SimpleOutput,
}

impl AttrType {
    /// True when the type accepts this text from the command line, as
    /// `ensure` must accept `present` and `absent`.
    pub fn accepts_text(&self, text: &str) -> bool {
        self.parse_cli(text).is_ok()
    }

    /// Converts a value typed by a person on the command line.
    pub fn parse_cli(&self, raw: &str) -> Result<Value, Mismatch> {
        self.convert_text(raw, Source::CommandLine)
    }

    /// Converts a value read from `# simple` provider output.
    pub fn parse_wire(&self, raw: &str) -> Result<Value, Mismatch> {
        self.convert_text(raw, Source::SimpleOutput)
    }

    /// Checks a JSON value (json convention output, or a JSON literal on the
    /// command line) against the type.
    pub fn check_json(&self, json: &Json) -> Result<Value, Mismatch> {
        match (self, json) {
            (AttrType::Optional(_), Json::Null) => Ok(Value::Null),
            (AttrType::Optional(inner), other) => inner.check_json(other),
            (AttrType::Variant(types), _) => {
                // JSON carries its own type: a reading of that very type wins.
                let exact: Vec<AttrType> = types
                    .iter()
                    .filter(|t| t.is_json_type_of(json))
                    .cloned()
                    .collect();
                match exact.as_slice() {
                    [only] => only.check_json(json),
                    _ => choose(types, |t| t.check_json(json)),
                }
            }
            (AttrType::Data, json) => Ok(Value::from_json(json)),
            (_, Json::Null) => Err(Mismatch::Null),
            (AttrType::String, Json::String(text)) => Ok(Value::String(text.clone())),
            (AttrType::Boolean, Json::Bool(flag)) => Ok(Value::Bool(*flag)),
            (AttrType::Integer(range), Json::Number(number)) => {
                let integer = number
                    .as_i64()
                    .ok_or_else(|| Mismatch::Fraction(number.to_string()))?;
                in_range(integer, *range).map(Value::Integer)
            }
            (AttrType::Float, Json::Number(number)) => number
                .as_f64()
                .map(Value::Float)
                .ok_or_else(|| Mismatch::NotFloat(number.to_string())),
            (AttrType::Pattern(_) | AttrType::Enum(_), Json::String(text)) => {
                self.convert_text(text, Source::CommandLine)
            }
            (AttrType::Array(inner), Json::Array(items)) => {
                elements(items, |item| inner.check_json(item))
            }
            (AttrType::Hash, Json::Object(map)) => map
                .iter()
                .map(|(key, item)| {
                    hash_text(item)
                        .map(|text| (key.clone(), Value::String(text)))
                        .ok_or_else(|| Mismatch::HashValueNotText {
                            key: key.clone(),
                            found: json_kind(item),
                        })
                })
                .collect::<Result<_, _>>()
                .map(|map| Value::Hash(Box::new(map))),
            (expected, found) => Err(Mismatch::WrongKind {
                expected: expected.to_string(),
                found: json_kind(found),
            }),
        }
    }

    /// True when the JSON value's own type is this type's (an integer for
    /// integer, a string for string, ...).
    fn is_json_type_of(&self, json: &Json) -> bool {
        match (self, json) {
            (AttrType::Integer(_), Json::Number(n)) => n.is_i64() || n.is_u64(),
            (AttrType::Float, Json::Number(n)) => n.is_f64(),
            (AttrType::Boolean, Json::Bool(_)) => true,
            (AttrType::String | AttrType::Pattern(_) | AttrType::Enum(_), Json::String(_)) => true,
            (AttrType::Array(_), Json::Array(_)) | (AttrType::Hash, Json::Object(_)) => true,
            (AttrType::Optional(inner), _) => json.is_null() || inner.is_json_type_of(json),
            (AttrType::Data, _) => true,
            _ => false,
        }
    }

    fn convert_text(&self, raw: &str, source: Source) -> Result<Value, Mismatch> {
        match self {
            AttrType::String => Ok(Value::String(raw.to_owned())),
            AttrType::Boolean => match raw {
                "true" => Ok(Value::Bool(true)),
                "false" => Ok(Value::Bool(false)),
                _ => Err(Mismatch::NotBoolean),
            },
            AttrType::Integer(range) => in_range(decimal_integer(raw)?, *range).map(Value::Integer),
            AttrType::Float => decimal_float(raw).map(Value::Float),
            AttrType::Pattern(pattern) => {
                if pattern.is_match(raw) {
                    Ok(Value::String(raw.to_owned()))
                } else {
                    Err(Mismatch::NoMatch {
                        pattern: pattern.source().to_owned(),
                    })
                }
            }
            AttrType::Enum(members) => {
                if members.iter().any(|member| member == raw) {
                    Ok(Value::String(raw.to_owned()))
                } else {
                    Err(Mismatch::NotAMember {
                        members: members.clone(),
                    })
                }
            }
            AttrType::Array(inner) => {
                if source == Source::CommandLine && raw.trim_start().starts_with('[') {
                    return self.check_json(&json_literal(raw)?);
                }
                let items = split_items(raw, source)?;
                items
                    .iter()
                    .enumerate()
                    .map(|(index, item)| {
                        inner
                            .convert_text(item, source)
                            .map_err(|reason| Mismatch::Element {
                                index,
                                item: Some(item.clone()),
                                reason: Box::new(reason),
                            })
                    })
                    .collect::<Result<_, _>>()
                    .map(Value::Array)
            }
            AttrType::Hash => {
                if source == Source::CommandLine && raw.trim_start().starts_with('{') {
                    return self.check_json(&json_literal(raw)?);
                }
                let mut map = IndexMap::new();
                for item in split_items(raw, source)? {
                    let Some((key, value)) = item.split_once('=') else {
                        return Err(Mismatch::NotKeyValue { item });
                    };
                    map.insert(key.to_owned(), Value::String(value.to_owned()));
                }
                Ok(Value::Hash(Box::new(map)))
            }
            // On the command line a JSON array or object is that value;
            // any other text (and all of a simple provider's) is text.
            AttrType::Data => match raw.trim_start().starts_with(['[', '{']) {
                true if source == Source::CommandLine => Ok(Value::from_json(&json_literal(raw)?)),
                _ => Ok(Value::String(raw.to_owned())),
            },
            AttrType::Optional(_) if raw.is_empty() => Ok(Value::Null),
            AttrType::Optional(inner) => inner.convert_text(raw, source),
            AttrType::Variant(types) => choose(types, |t| t.convert_text(raw, source)),
        }
    }
}

/// A hash value as text: hashes hold text, whichever way they are written,
/// so `k=1` and `{"k": 1}` are the same hash.
fn hash_text(json: &Json) -> Option<String> {
    match json {
        Json::String(text) => Some(text.clone()),
        Json::Number(number) => Some(number.to_string()),
        Json::Bool(flag) => Some(flag.to_string()),
        _ => None,
    }
}

/// The items of an array or hash written as text.
fn split_items(raw: &str, source: Source) -> Result<Vec<String>, Mismatch> {
    match source {
        Source::CommandLine if raw.trim().is_empty() => Ok(Vec::new()),
        Source::CommandLine => Ok(raw.split(',').map(|item| item.trim().to_owned()).collect()),
        Source::SimpleOutput => shell_words::split(raw).map_err(|_| Mismatch::UnbalancedQuotes),
    }
}

fn json_literal(raw: &str) -> Result<Json, Mismatch> {
    serde_json::from_str(raw).map_err(|e| Mismatch::BadJson(e.to_string()))
}

/// A variant takes the value when exactly one reading exists.
fn choose(
    types: &[AttrType],
    convert: impl Fn(&AttrType) -> Result<Value, Mismatch>,
) -> Result<Value, Mismatch> {
    let mut readings: Vec<(&AttrType, Value)> = Vec::new();
    let mut reasons = Vec::new();
    for candidate in types {
        match convert(candidate) {
            Ok(value) => readings.push((candidate, value)),
            Err(reason) => reasons.push((candidate.to_string(), reason)),
        }
    }
    match readings.split_first() {
        None => Err(Mismatch::NoneOf { reasons }),
        Some(((_, first), rest)) if rest.iter().all(|(_, other)| other == first) => {
            Ok(first.clone())
        }
        Some(_) => {
            let readings = readings.iter().map(|(t, _)| t.to_string()).collect();
            Err(Mismatch::Ambiguous { readings })
        }
    }
}

/// An array of `items`, each converted by `convert`; the first element
/// that does not convert fails the whole, naming its index.
pub(super) fn elements<T>(
    items: &[T],
    convert: impl Fn(&T) -> Result<Value, Mismatch>,
) -> Result<Value, Mismatch> {
    // Sized once: a plan keeps thousands of arrays, and collecting
    // through the results would leave each with room for more.
    let mut values = Vec::with_capacity(items.len());
    for (index, item) in items.iter().enumerate() {
        values.push(convert(item).map_err(|reason| Mismatch::Element {
            index,
            item: None,
            reason: Box::new(reason),
        })?);
    }
    Ok(Value::Array(values))
}

fn in_range(integer: i64, range: Option<(i64, i64)>) -> Result<i64, Mismatch> {
    match range {
        Some((min, max)) if integer < min || integer > max => Err(Mismatch::OutOfRange {
            value: integer,
            min,
            max,
        }),
        _ => Ok(integer),
    }
}

/// A decimal integer: an optional sign and ASCII digits. Leading zeros do
/// not make it octal; hex, exponents and fractions are refused.
pub(super) fn decimal_integer(text: &str) -> Result<i64, Mismatch> {
    let digits = text.strip_prefix(['+', '-']).unwrap_or(text);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(Mismatch::NotInteger);
    }
    text.parse::<i64>().map_err(|_| Mismatch::IntegerTooLarge)
}

/// A decimal number: sign, digits, optional fraction and exponent.
fn decimal_float(text: &str) -> Result<f64, Mismatch> {
    let unsigned = text.strip_prefix(['+', '-']).unwrap_or(text);
    let (mantissa, exponent) = match unsigned.find(['e', 'E']) {
        Some(at) => (&unsigned[..at], Some(&unsigned[at + 1..])),
        None => (unsigned, None),
    };
    let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits = |part: &str| part.bytes().all(|b| b.is_ascii_digit());
    let exponent_ok = exponent.is_none_or(|e| {
        let e = e.strip_prefix(['+', '-']).unwrap_or(e);
        !e.is_empty() && digits(e)
    });
    if (whole.is_empty() && fraction.is_empty())
        || !digits(whole)
        || !digits(fraction)
        || !exponent_ok
    {
        return Err(Mismatch::NotNumber);
    }
    let number: f64 = text.parse().map_err(|_| Mismatch::NotNumber)?;
    if number.is_finite() {
        Ok(number)
    } else {
        Err(Mismatch::NumberTooLarge)
    }
}

fn json_kind(json: &Json) -> Found {
    match json {
        Json::Null => Found::JsonNull,
        Json::Bool(_) => Found::Boolean,
        Json::Number(number) if number.is_i64() || number.is_u64() => Found::Integer,
        Json::Number(_) => Found::Float,
        Json::String(_) => Found::String,
        Json::Array(_) => Found::Array,
        Json::Object(_) => Found::Object,
    }
}
