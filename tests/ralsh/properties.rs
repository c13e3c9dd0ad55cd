//! Property tests: the parsers never panic on any input, and values
//! round-trip through the quoting, the `# simple` format and real bash and
//! Python argument parsing.

use std::io::Write;
use std::process::{Command, Stdio};

use proptest::prelude::*;
use ral::invoke::json::{parse_get, parse_set};
use ral::invoke::simple::{argument, ListParser, UpdateParser};
use ral::quoting::{assignment, quote_word};
use ral::types::{AttrType, Value};

/// Any text a command-line argument can hold (no NUL).
fn arg_text() -> impl Strategy<Value = String> {
    proptest::string::string_regex("[^\\x00]{0,40}").unwrap()
}

/// A value that survives a trimmed `# simple` line.
fn line_value() -> impl Strategy<Value = String> {
    proptest::string::string_regex("[!-~é✓日]([ -~é✓日]{0,20}[!-~é✓日])?").unwrap()
}

fn key() -> impl Strategy<Value = String> {
    proptest::string::string_regex("[a-z][a-z0-9_]{0,8}")
        .unwrap()
        .prop_filter("not a convention key", |k| {
            k != "name" && !k.starts_with("ral")
        })
}

fn attr_type() -> impl Strategy<Value = AttrType> {
    let leaf = prop_oneof![
        Just(AttrType::String),
        Just(AttrType::Boolean),
        Just(AttrType::Float),
        Just(AttrType::Hash),
        (any::<i32>(), any::<i32>()).prop_map(|(a, b)| {
            AttrType::Integer(Some((i64::from(a.min(b)), i64::from(a.max(b)))))
        }),
        Just(AttrType::Integer(None)),
        proptest::collection::vec("[a-z][a-z0-9_.-]{0,6}", 1..4).prop_map(AttrType::Enum),
        "[a-z/]{1,4}(\\[[a-z/]\\])?[a-z/]{0,3}".prop_map(|re| AttrType::parse(&format!(
            "pattern[/{}/]",
            re.replace('/', "\\/")
        ))
        .expect("a valid pattern")),
    ];
    leaf.prop_recursive(3, 12, 3, |inner| {
        prop_oneof![
            inner.clone().prop_map(|t| AttrType::Array(Box::new(t))),
            inner.clone().prop_map(|t| AttrType::Optional(Box::new(t))),
            proptest::collection::vec(inner, 1..3).prop_map(AttrType::Variant),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn the_simple_parsers_never_panic(lines in proptest::collection::vec("[^\\n]{0,30}", 0..12)) {
        let mut list = ListParser::default();
        let mut update = UpdateParser::new("x");
        for line in &lines {
            let _ = list.feed(line);
            let _ = update.feed(line);
        }
        let _ = list.finish();
        let _ = update.finish();
    }

    #[test]
    fn listed_resources_read_back_exactly(
        resources in proptest::collection::vec((line_value(), proptest::collection::vec((key(), line_value()), 0..4)), 1..5)
    ) {
        let mut text = String::from("# simple\n");
        for (name, attrs) in &resources {
            text.push_str(&format!("name: {name}\n"));
            for (k, v) in attrs {
                text.push_str(&format!("  {k} :  {v}\n"));
            }
        }
        let mut parser = ListParser::default();
        let mut parsed = Vec::new();
        for line in text.lines() {
            parsed.extend(parser.feed(line).unwrap());
        }
        parsed.extend(parser.finish().unwrap());
        prop_assert_eq!(parsed.len(), resources.len());
        for (got, (name, attrs)) in parsed.iter().zip(&resources) {
            prop_assert_eq!(got.name(), name.as_str());
            let got_attrs: Vec<(&str, &str)> = got.attrs().collect();
            let want: Vec<(&str, &str)> = attrs.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            prop_assert_eq!(got_attrs, want);
        }
    }

    #[test]
    fn the_json_parsers_never_panic(text in "\\PC{0,80}") {
        let _ = parse_get(&text);
        let _ = parse_set(&text);
    }

    #[test]
    fn the_json_parsers_never_panic_on_json(value in json_value()) {
        let text = value.to_string();
        let _ = parse_get(&text);
        let _ = parse_set(&text);
        let wrapped = serde_json::json!({"resources": [value.clone()], "changes": [value]}).to_string();
        let _ = parse_get(&wrapped);
        let _ = parse_set(&wrapped);
    }

    #[test]
    fn the_type_parser_never_panics(text in "\\PC{0,40}") {
        let _ = AttrType::parse(&text);
    }

    #[test]
    fn types_read_back_as_written(t in attr_type()) {
        prop_assert_eq!(AttrType::parse(&t.to_string()), Ok(t));
    }

    #[test]
    fn conversions_never_panic(t in attr_type(), text in "\\PC{0,20}") {
        let _ = t.parse_cli(&text);
        let _ = t.parse_wire(&text);
    }

    #[test]
    fn any_value_survives_quoting(value in arg_text()) {
        let words = shell_words::split(&assignment("k", &value)).unwrap();
        prop_assert_eq!(words, vec![format!("k={value}")]);
        prop_assert_eq!(shell_words::split(&quote_word(&value)).unwrap(), vec![value]);
    }

    #[test]
    fn any_array_survives_the_argument_form(items in proptest::collection::vec(arg_text(), 0..6)) {
        let value = Value::Array(items.iter().map(|i| Value::String(i.clone())).collect());
        let arg = argument("k", &value);
        let inner = arg.strip_prefix("k=(").and_then(|rest| rest.strip_suffix(')')).unwrap();
        prop_assert_eq!(shell_words::split(inner).unwrap(), items.clone());
        prop_assert_eq!(AttrType::Array(Box::new(AttrType::String)).parse_wire(&value.to_text()), Ok(value));
    }
}

fn json_value() -> impl Strategy<Value = serde_json::Value> {
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::from),
        any::<i64>().prop_map(serde_json::Value::from),
        "[a-z]{0,5}".prop_map(serde_json::Value::from),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(serde_json::Value::from),
            proptest::collection::btree_map(
                prop_oneof![
                    Just("name".to_owned()),
                    Just("error".to_owned()),
                    Just("is".to_owned()),
                    "[a-z]{1,4}".prop_map(String::from)
                ],
                inner,
                0..4
            )
            .prop_map(|map| serde_json::Value::Object(map.into_iter().collect())),
        ]
    })
}

/// Runs `script` with the quoted words on stdin (NUL-separated) and returns
/// the values it printed back (NUL-separated).
fn echo_through(program: &str, script: &str, words: &[String]) -> Vec<String> {
    let mut child = Command::new(program)
        .arg("-c")
        .arg(script)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = Vec::new();
    for word in words {
        input.extend_from_slice(word.as_bytes());
        input.push(0);
    }
    child.stdin.take().unwrap().write_all(&input).unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success());
    let text = String::from_utf8(output.stdout).unwrap();
    text.split_terminator('\0').map(str::to_owned).collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn any_value_survives_bash_eval_and_python_shlex(values in proptest::collection::vec(arg_text(), 1..40)) {
        let words: Vec<String> = values.iter().map(|v| assignment("v", v)).collect();
        let bash = echo_through(
            "bash",
            r#"while IFS= read -r -d '' word; do eval "$word"; printf '%s\0' "$v"; done"#,
            &words,
        );
        prop_assert_eq!(&bash, &values);
        let python = echo_through(
            "python3",
            "import shlex, sys\nfor w in sys.stdin.buffer.read().decode().split('\\0')[:-1]:\n    k, v = shlex.split(w)[0].split('=', 1)\n    sys.stdout.write(v + '\\0')",
            &words,
        );
        prop_assert_eq!(&python, &values);
    }
}
