//! Table tests: for each type, inputs that must convert (and to what) and
//! inputs that must be rejected (and why).

use super::{AttrType, Value};
use serde_json::json;

fn ty(text: &str) -> AttrType {
    AttrType::parse(text).unwrap_or_else(|e| panic!("{e}"))
}

fn s(text: &str) -> Value {
    Value::from(text)
}

/// Checks a table of command-line conversions for one type.
fn cli_table(type_text: &str, good: &[(&str, Value)], bad: &[(&str, &str)]) {
    let parsed = ty(type_text);
    for (input, expected) in good {
        assert_eq!(
            parsed.parse_cli(input).as_ref(),
            Ok(expected),
            "{type_text} <- {input:?}"
        );
    }
    for (input, reason) in bad {
        let err = parsed
            .parse_cli(input)
            .expect_err(&format!("{type_text} must reject {input:?}"));
        assert!(
            err.to_string().contains(reason),
            "{type_text} <- {input:?}: {err}"
        );
    }
}

#[test]
fn strings_take_anything() {
    cli_table(
        "string",
        &[("", s("")), ("a b", s("a b")), ("010", s("010"))],
        &[],
    );
}

#[test]
fn booleans_take_exactly_true_and_false() {
    cli_table(
        "boolean",
        &[("true", Value::Bool(true)), ("false", Value::Bool(false))],
        &[
            ("TRUE", "expected true or false"),
            ("yes", "expected true or false"),
            ("1", "expected true or false"),
            ("", "expected true or false"),
            (" true", "expected true or false"),
        ],
    );
}

#[test]
fn integers_are_decimal_only() {
    cli_table(
        "integer",
        &[
            ("0", Value::Integer(0)),
            ("010", Value::Integer(10)),
            ("-42", Value::Integer(-42)),
            ("+7", Value::Integer(7)),
            ("9223372036854775807", Value::Integer(i64::MAX)),
        ],
        &[
            ("0x10", "expected a decimal integer"),
            ("1e3", "expected a decimal integer"),
            ("1.0", "expected a decimal integer"),
            ("", "expected a decimal integer"),
            ("-", "expected a decimal integer"),
            (" 1", "expected a decimal integer"),
            ("١٢", "expected a decimal integer"),
            ("9223372036854775808", "out of the 64-bit range"),
        ],
    );
    cli_table(
        "integer[1, 65535]",
        &[("1", Value::Integer(1)), ("65535", Value::Integer(65535))],
        &[
            ("0", "0 is outside the range 1 to 65535"),
            ("65536", "65536 is outside the range 1 to 65535"),
        ],
    );
}

#[test]
fn floats_are_decimal_numbers() {
    cli_table(
        "float",
        &[
            ("1", Value::Float(1.0)),
            ("-2.5", Value::Float(-2.5)),
            (".5", Value::Float(0.5)),
            ("6.02e23", Value::Float(6.02e23)),
            ("1E-3", Value::Float(0.001)),
        ],
        &[
            ("inf", "expected a decimal number"),
            ("NaN", "expected a decimal number"),
            ("1e", "expected a decimal number"),
            ("0x1p3", "expected a decimal number"),
            (".", "expected a decimal number"),
            ("1e999", "too large"),
        ],
    );
}

#[test]
fn patterns_and_enums_are_enforced() {
    cli_table(
        "pattern[/^[a-z][a-z0-9_]*$/]",
        &[("abc_1", s("abc_1"))],
        &[
            ("1abc", "does not match /^[a-z][a-z0-9_]*$/"),
            ("", "does not match"),
        ],
    );
    cli_table(
        "enum[present, absent]",
        &[("present", s("present"))],
        &[
            ("Present", "expected one of present, absent"),
            ("", "expected one of"),
        ],
    );
}

#[test]
fn arrays_take_commas_or_json() {
    cli_table(
        "array[integer]",
        &[
            ("", Value::Array(vec![])),
            (
                "1, 2,3",
                Value::Array(vec![
                    Value::Integer(1),
                    Value::Integer(2),
                    Value::Integer(3),
                ]),
            ),
            (
                "[1, 2]",
                Value::Array(vec![Value::Integer(1), Value::Integer(2)]),
            ),
        ],
        &[
            ("1,x", "element 1 ('x'): expected a decimal integer"),
            ("[1, \"2\"]", "element 1: expected integer, found a string"),
            ("[1,", "not valid JSON"),
            ("[1.5]", "element 0: expected an integer, found 1.5"),
        ],
    );
    cli_table(
        "array[string]",
        &[(
            "[\"a,b\", \"c 'd'\"]",
            Value::Array(vec![s("a,b"), s("c 'd'")]),
        )],
        &[],
    );
}

#[test]
fn data_takes_any_value_nested() {
    let facts = json!({"os": {"release": {"major": "12"}, "names": ["a", 1, true, null]}});
    let data = ty("data");
    assert_eq!(data.to_string(), "data");
    assert!(data.may_hold_collection());
    assert_eq!(data.check_json(&facts), Ok(Value::from_json(&facts)));
    assert_eq!(data.check_json(&json!(null)), Ok(Value::Null));
    assert_eq!(data.check_json(&json!(2.5)), Ok(Value::Float(2.5)));
    // Nested as a hash never is.
    assert!(ty("hash").check_json(&facts).is_err());
    cli_table(
        "data",
        &[
            ("plain", s("plain")),
            (
                "[1, {\"a\": \"b\"}]",
                Value::from_json(&json!([1, {"a": "b"}])),
            ),
        ],
        &[("{\"a\": ", "not valid JSON")],
    );
    // A simple provider's text stays text.
    assert_eq!(data.parse_wire("[x"), Ok(s("[x")));
    // A manifest's mapping of lists, as written.
    use super::Written;
    let written = Written::Map(vec![(
        "a".to_owned(),
        Written::List(vec![Written::Text("1".to_owned()), Written::Null]),
    )]);
    assert_eq!(
        data.convert_written(&written),
        Ok(Value::from_json(&json!({"a": ["1", null]})))
    );
}

#[test]
fn hashes_take_pairs_or_json_objects() {
    let hash = |pairs: &[(&str, Value)]| {
        Value::Hash(Box::new(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
        ))
    };
    cli_table(
        "hash",
        &[
            ("", hash(&[])),
            ("a=1, b=x=y", hash(&[("a", s("1")), ("b", s("x=y"))])),
            (
                "{\"n\": 5, \"b\": true}",
                hash(&[("n", s("5")), ("b", s("true"))]),
            ),
        ],
        &[
            ("a", "'a' is not key=value"),
            ("{\"a\": ", "not valid JSON"),
            ("{}x", "not valid JSON"),
            (
                "{\"l\": [1]}",
                "the value of 'l' is an array; hash values are text",
            ),
        ],
    );
}

#[test]
fn optionals_take_an_empty_value_as_null() {
    cli_table(
        "optional[integer]",
        &[("", Value::Null), ("3", Value::Integer(3))],
        &[("x", "expected a decimal integer")],
    );
}

#[test]
fn variants_need_exactly_one_reading() {
    cli_table(
        "variant[integer, enum[auto, off]]",
        &[("5", Value::Integer(5)), ("auto", s("auto"))],
        &[("on", "matches none of its types (not integer: expected a decimal integer; not enum[auto, off]: expected one of auto, off)")],
    );
    cli_table(
        "variant[integer, string]",
        &[],
        &[("5", "is ambiguous: it reads as integer and as string")],
    );
    // Two types reading the same value the same way are not ambiguous.
    cli_table("variant[string, pattern[/^a/]]", &[("abc", s("abc"))], &[]);
}

#[test]
fn simple_output_arrays_and_hashes_are_shell_words() {
    let array = ty("array[string]");
    assert_eq!(
        array.parse_wire("a 'b c' \"d,e\""),
        Ok(Value::Array(vec![s("a"), s("b c"), s("d,e")]))
    );
    assert!(array
        .parse_wire("'open")
        .unwrap_err()
        .to_string()
        .contains("unbalanced quotes"));
    let hash = ty("hash");
    assert_eq!(
        hash.parse_wire("k=v 'a b=c d'"),
        Ok(Value::Hash(Box::new(
            [("k".to_owned(), s("v")), ("a b".to_owned(), s("c d"))]
                .into_iter()
                .collect()
        )))
    );
    // What a provider receives reads back as the same value.
    let value = Value::Array(vec![s("x y"), s("it's"), s(""), s("a,b")]);
    assert_eq!(array.parse_wire(&value.to_text()), Ok(value));
}

#[test]
fn json_values_keep_their_types() {
    let integer = ty("integer");
    assert_eq!(integer.check_json(&json!(5)), Ok(Value::Integer(5)));
    assert!(integer
        .check_json(&json!(true))
        .unwrap_err()
        .to_string()
        .contains("expected integer, found a boolean"));
    assert!(integer
        .check_json(&json!(5.5))
        .unwrap_err()
        .to_string()
        .contains("expected an integer, found 5.5"));
    assert!(integer
        .check_json(&json!(null))
        .unwrap_err()
        .to_string()
        .contains("null is not allowed"));
    assert_eq!(
        ty("boolean").check_json(&json!(false)),
        Ok(Value::Bool(false))
    );
    assert_eq!(
        ty("optional[string]").check_json(&json!(null)),
        Ok(Value::Null)
    );
    assert_eq!(ty("float").check_json(&json!(2)), Ok(Value::Float(2.0)));
    assert!(ty("array[string]")
        .check_json(&json!(["a", 1]))
        .unwrap_err()
        .to_string()
        .contains("element 1: expected string, found an integer"));
    // JSON carries its type, which settles a variant.
    assert_eq!(
        ty("variant[integer, float]").check_json(&json!(3)),
        Ok(Value::Integer(3))
    );
    assert_eq!(
        ty("variant[integer, float]").check_json(&json!(3.5)),
        Ok(Value::Float(3.5))
    );
    assert!(ty("variant[string, pattern[/a/]]")
        .check_json(&json!(3))
        .unwrap_err()
        .to_string()
        .contains("matches none"));
    // A hash is the same however it is written.
    assert_eq!(
        ty("hash").check_json(&json!({"k": 1})),
        ty("hash").parse_cli("k=1")
    );
}

#[test]
fn mismatches_are_told_apart_by_kind() {
    use super::{BadType, Found, Mismatch, Written};
    assert_eq!(
        ty("integer[1, 10]").parse_cli("11"),
        Err(Mismatch::OutOfRange {
            value: 11,
            min: 1,
            max: 10
        })
    );
    assert_eq!(
        ty("enum[a, b]").parse_cli("c"),
        Err(Mismatch::NotAMember {
            members: vec!["a".into(), "b".into()]
        })
    );
    assert!(matches!(
        ty("array[integer]").parse_cli("1,x"),
        Err(Mismatch::Element { index: 1, item: Some(item), reason })
            if item == "x" && *reason == Mismatch::NotInteger
    ));
    assert_eq!(
        ty("boolean").convert_written(&Written::List(Vec::new())),
        Err(Mismatch::WrongKind {
            expected: "boolean".into(),
            found: Found::List
        })
    );
    assert!(matches!(
        AttrType::parse("integer[3, 1]"),
        Err(BadType { text, reason }) if text == "integer[3, 1]" && reason.contains("is empty")
    ));
    // What came from outside prints escaped.
    assert_eq!(
        ty("hash").parse_cli("a\u{1b}[2J").unwrap_err().to_string(),
        "'a\\u{1b}[2J' is not key=value"
    );
}

#[test]
fn an_array_converted_has_no_room_to_spare() {
    use super::Written;
    // A plan keeps thousands of them: two elements take room for two.
    let written = Written::List(vec![Written::Text("a".into()), Written::Text("b".into())]);
    let Ok(Value::Array(items)) = ty("array[string]").convert_written(&written) else {
        panic!("not an array");
    };
    assert_eq!((items.len(), items.capacity()), (2, 2));
}
