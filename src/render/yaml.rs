//! YAML block text for [`Value`]s, written so that every YAML reader gets
//! back the text that was written.
//!
//! serde_yaml (YAML 1.2) leaves `yes`, `on`, `2001-01-01` or `1_000` plain,
//! which YAML 1.1 readers (PyYAML, Ruby's Psych, so Puppet) take for a
//! boolean, a date or a number, and offers no way to choose a scalar's
//! style. So the rule here is the other way round: a string is written
//! plain only when it starts with a letter, `_` or `/`, holds nothing but
//! ASCII letters, digits, spaces and `_./@+-,=:`, is not a boolean or null
//! word in any case, and has no `: ` and no trailing space or `:`. Anything
//! else is single-quoted, or double-quoted with escapes when it holds line
//! breaks, control characters or invisible formatting characters (so text
//! from a provider cannot drive the terminal either; see [`crate::text`]).

use std::borrow::Cow;
use std::io::{self, Write};

use crate::text::needs_escape;
use crate::types::Value;

/// Words YAML 1.1 or 1.2 reads as a boolean or null, compared ignoring case.
const SPECIAL_WORDS: [&str; 9] = ["y", "n", "yes", "no", "true", "false", "on", "off", "null"];

/// Longer keys are written as explicit `? KEY` entries: a reader takes an
/// implicit key of at most 1024 characters (counted here in bytes, which
/// are never fewer).
const IMPLICIT_KEY_MAX: usize = 1000;

/// The text of the scalar written for `value`: what a reader gets back as
/// that scalar's text (`None` for arrays and hashes, which are blocks).
pub fn text_of(value: &Value) -> Option<Cow<'_, str>> {
    Some(match value {
        Value::Null => Cow::Borrowed("null"),
        Value::Bool(flag) => Cow::Borrowed(if *flag { "true" } else { "false" }),
        Value::Integer(number) => Cow::Owned(number.to_string()),
        Value::Float(number) if number.is_nan() => Cow::Borrowed(".nan"),
        Value::Float(number) if number.is_infinite() => {
            Cow::Borrowed(if *number > 0.0 { ".inf" } else { "-.inf" })
        }
        // Debug is the shortest text that reads back as the same number
        // (`1.0`, `0.1`, `1e300`), and the command line's float accepts it.
        Value::Float(number) => Cow::Owned(format!("{number:?}")),
        Value::String(text) => Cow::Borrowed(text.as_str()),
        Value::Array(_) | Value::Hash(_) => return None,
    })
}

/// `text` as a YAML scalar: plain, single-quoted or double-quoted.
pub fn quoted(text: &str) -> Cow<'_, str> {
    if is_plain_safe(text) {
        Cow::Borrowed(text)
    } else if text.chars().all(is_single_quotable) {
        Cow::Owned(format!("'{}'", text.replace('\'', "''")))
    } else {
        Cow::Owned(double_quoted(text))
    }
}

fn is_plain_safe(text: &str) -> bool {
    let bytes = text.as_bytes();
    let Some(&first) = bytes.first() else {
        return false;
    };
    let last = bytes[bytes.len() - 1];
    (first.is_ascii_alphabetic() || first == b'_' || first == b'/')
        && last != b' '
        && last != b':'
        && bytes.iter().all(|b| {
            b.is_ascii_alphanumeric()
                || matches!(
                    b,
                    b' ' | b'_' | b'.' | b'/' | b'@' | b'+' | b'-' | b',' | b'=' | b':'
                )
        })
        && !text.contains(": ")
        && !SPECIAL_WORDS
            .iter()
            .any(|word| text.eq_ignore_ascii_case(word))
}

/// Characters a single-quoted scalar may hold as they are: not line
/// breaks (YAML 1.1 also breaks at U+2028 and U+2029), not characters YAML
/// does not allow in a stream, and nothing [`needs_escape`] would escape.
fn is_single_quotable(c: char) -> bool {
    !needs_escape(c) && !matches!(c, '\u{2028}' | '\u{2029}' | '\u{fffe}' | '\u{ffff}')
}

fn double_quoted(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if is_single_quotable(c) => out.push(c),
            c if u32::from(c) <= 0xffff => out.push_str(&format!("\\u{:04X}", u32::from(c))),
            c => out.push_str(&format!("\\U{:08X}", u32::from(c))),
        }
    }
    out.push('"');
    out
}

/// Writes `key:` for an entry of a block mapping whose keys are `indent`
/// spaces in, as an explicit `? key` entry when the key is long; the value
/// follows on the same line.
pub fn key(out: &mut impl Write, indent: usize, key: &str) -> io::Result<()> {
    let key = quoted(key);
    if key.len() > IMPLICIT_KEY_MAX {
        writeln!(out, "{:indent$}? {key}", "")?;
        write!(out, "{:indent$}:", "")
    } else {
        write!(out, "{:indent$}{key}:", "")
    }
}

/// Writes `key: value` as an entry of a block mapping whose keys are
/// `indent` spaces in; arrays and hashes become nested blocks.
pub fn entry(out: &mut impl Write, indent: usize, name: &str, value: &Value) -> io::Result<()> {
    key(out, indent, name)?;
    node(out, indent, value)
}

/// Writes a value after `key:` or `-` (no space yet), ending the line; a
/// non-empty array or hash goes on the next lines, two spaces further in.
fn node(out: &mut impl Write, indent: usize, value: &Value) -> io::Result<()> {
    match value {
        Value::Array(items) if items.is_empty() => writeln!(out, " []"),
        Value::Hash(map) if map.is_empty() => writeln!(out, " {{}}"),
        Value::Array(items) => {
            writeln!(out)?;
            let inner = indent + 2;
            for item in items {
                write!(out, "{:inner$}-", "")?;
                node(out, inner, item)?;
            }
            Ok(())
        }
        Value::Hash(map) => {
            writeln!(out)?;
            for (key, item) in map.iter() {
                entry(out, indent + 2, key, item)?;
            }
            Ok(())
        }
        Value::String(text) => writeln!(out, " {}", quoted(text)),
        scalar => writeln!(out, " {}", text_of(scalar).expect("a scalar")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use indexmap::IndexMap;
    use proptest::prelude::*;

    fn written(key: &str, value: &Value) -> String {
        let mut out = Vec::new();
        entry(&mut out, 0, key, value).unwrap();
        String::from_utf8(out).unwrap()
    }

    /// What serde_yaml reads from what was written, as plain data.
    fn read(text: &str) -> serde_yaml::Value {
        serde_yaml::from_str(text).unwrap_or_else(|e| panic!("{e}:\n{text}"))
    }

    fn yaml_of(value: &Value) -> serde_yaml::Value {
        match value {
            Value::Null => serde_yaml::Value::Null,
            Value::Bool(flag) => serde_yaml::Value::Bool(*flag),
            Value::Integer(number) => serde_yaml::Value::from(*number),
            Value::Float(number) => serde_yaml::Value::from(*number),
            Value::String(text) => serde_yaml::Value::from(text.as_str()),
            Value::Array(items) => serde_yaml::Value::Sequence(items.iter().map(yaml_of).collect()),
            Value::Hash(map) => serde_yaml::Value::Mapping(
                map.iter()
                    .map(|(key, item)| (serde_yaml::Value::from(key.as_str()), yaml_of(item)))
                    .collect(),
            ),
        }
    }

    #[track_caller]
    fn assert_reads_back(key: &str, value: &Value) {
        let text = written(key, value);
        let mut expected = serde_yaml::Mapping::new();
        expected.insert(serde_yaml::Value::from(key), yaml_of(value));
        assert_eq!(read(&text), serde_yaml::Value::Mapping(expected), "{text}");
    }

    #[test]
    fn only_plain_words_stay_plain() {
        for plain in [
            "present",
            "/bin/bash",
            "a b",
            "host::etc_hosts",
            "k=v,w",
            "x.y@z-1+2",
            "_a",
        ] {
            assert_eq!(quoted(plain), plain);
        }
        let cases = [
            ("yes", "'yes'"),
            ("No", "'No'"),
            ("ON", "'ON'"),
            ("y", "'y'"),
            ("null", "'null'"),
            ("True", "'True'"),
            ("0640", "'0640'"),
            ("1500", "'1500'"),
            ("1_000", "'1_000'"),
            ("2001-01-01", "'2001-01-01'"),
            (".inf", "'.inf'"),
            ("~", "'~'"),
            ("", "''"),
            (" x", "' x'"),
            ("x ", "'x '"),
            ("a: b", "'a: b'"),
            ("a:", "'a:'"),
            ("a #b", "'a #b'"),
            ("=", "'='"),
            ("<<", "'<<'"),
            ("-", "'-'"),
            (":sym", "':sym'"),
            ("it's", "'it''s'"),
            ("Zoë", "'Zoë'"),
            ("a\nb", "\"a\\nb\""),
            ("tab\there", "\"tab\\there\""),
            ("\x1b[31m\"\\", "\"\\u001B[31m\\\"\\\\\""),
            ("\u{202e}x", "\"\\u202Ex\""),
            ("\u{85}\u{2028}", "\"\\u0085\\u2028\""),
        ];
        for (text, expected) in cases {
            assert_eq!(quoted(text), expected, "{text:?}");
            assert_reads_back("k", &Value::from(text));
        }
    }

    #[test]
    fn numbers_and_flags_are_plain() {
        let cases = [
            (Value::Integer(1500), "k: 1500\n"),
            (Value::Integer(i64::MIN), "k: -9223372036854775808\n"),
            (Value::Bool(false), "k: false\n"),
            (Value::Null, "k: null\n"),
            (Value::Float(1.0), "k: 1.0\n"),
            (Value::Float(0.1), "k: 0.1\n"),
            (Value::Float(-2.5e300), "k: -2.5e300\n"),
            (Value::Float(1e-7), "k: 1e-7\n"),
        ];
        for (value, expected) in cases {
            assert_eq!(written("k", &value), expected);
            assert_reads_back("k", &value);
        }
    }

    #[test]
    fn arrays_and_hashes_are_blocks() {
        let hash: IndexMap<String, Value> = [
            ("a b".to_owned(), Value::from("1")),
            ("k".to_owned(), Value::from("")),
        ]
        .into_iter()
        .collect();
        let value = Value::Array(vec![
            Value::from("x"),
            Value::Array(vec![]),
            Value::Array(vec![Value::Integer(1), Value::Null]),
            Value::Hash(Box::new(hash.clone())),
            Value::Hash(Box::default()),
        ]);
        assert_eq!(
            written("k", &value),
            "k:\n  - x\n  - []\n  -\n    - 1\n    - null\n  -\n    a b: '1'\n    k: ''\n  - {}\n"
        );
        assert_reads_back("k", &value);
        assert_reads_back("h", &Value::Hash(Box::new(hash)));
        assert_eq!(written("e", &Value::Array(vec![])), "e: []\n");
    }

    #[test]
    fn long_keys_are_explicit() {
        let key = "k".repeat(IMPLICIT_KEY_MAX + 1);
        let text = written(&key, &Value::from("v"));
        assert!(text.starts_with("? kkk"), "{text}");
        assert_reads_back(&key, &Value::from("v"));
        assert_reads_back(&key, &Value::Array(vec![Value::from("v")]));
        assert_reads_back(&"é".repeat(1000), &Value::Hash(Box::default()));
        let hash = Value::Hash(Box::new(
            [("a".to_owned(), Value::from("b"))].into_iter().collect(),
        ));
        assert_reads_back(&key, &hash);
    }

    fn value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::Integer),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(Value::Float),
            any::<String>().prop_map(Value::String),
            "[ -~]{0,12}".prop_map(Value::String),
        ];
        leaf.prop_recursive(3, 16, 4, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                proptest::collection::vec((any::<String>(), inner), 0..4)
                    .prop_map(|pairs| Value::Hash(Box::new(pairs.into_iter().collect()))),
            ]
        })
    }

    proptest! {
        #[test]
        fn serde_yaml_reads_back_what_was_written(key in any::<String>(), value in value()) {
            assert_reads_back(&key, &value);
        }

        #[test]
        fn nothing_unsafe_is_written_as_it_is(text in any::<String>()) {
            let written = quoted(&text);
            let unsafe_char = written.chars().find(|&c| !is_single_quotable(c));
            prop_assert_eq!(unsafe_char, None);
        }
    }
}
