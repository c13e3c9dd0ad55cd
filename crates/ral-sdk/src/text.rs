//! Text for answers and messages, as the Python toolkit writes it:
//! control characters made visible, values quoted for messages, and arrays
//! as shell words on a `# simple` line; and text from outside made safe to
//! print. Provider output, metadata and file names can hold control
//! characters (terminal escape sequences) and invisible Unicode formatting
//! characters (bidirectional overrides, zero-width spaces) that would let
//! them rewrite or disguise what a person sees: everything ral prints that
//! came from outside goes through [`escape`] or [`escape_lines`].

/// `value` made safe for one line of an answer or message: control
/// characters and line breaks become `?`.
pub fn clean(value: &str) -> String {
    if !value.chars().any(is_control) {
        return value.to_owned();
    }
    value
        .chars()
        .map(|c| if is_control(c) { '?' } else { c })
        .collect()
}

/// Like [`clean`], but keeps line breaks (a command's output quoted).
pub fn clean_lines(value: &str) -> String {
    value.split('\n').map(clean).collect::<Vec<_>>().join("\n")
}

/// `value` in single quotes, for messages.
pub fn quoted(value: &str) -> String {
    format!("'{}'", clean(value))
}

/// `value` in single quotes with every character that cannot be seen
/// written as an escape (`\n`, `\t`, `\r`, `\u{HEX}`; a backslash as
/// `\\`): for messages that refuse a value for what it holds, which
/// [`quoted`] would hide behind a `?`.
pub fn escaped(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 2);
    out.push('\'');
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if is_control(c) || is_format(c) => {
                out.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
            }
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}

/// True when `value` holds a control character or a line break.
pub fn has_control(value: &str) -> bool {
    value.chars().any(is_control)
}

/// Control characters (Unicode's Cc: C0, DEL and C1) and the line and
/// paragraph separators.
pub fn is_control(c: char) -> bool {
    c.is_control() || c == '\u{2028}' || c == '\u{2029}'
}

/// Unicode's format characters (Cf), as Python's unicodedata 14 has them:
/// invisible, and some (the bidirectional overrides) reorder what is
/// shown around them.
pub fn is_format(c: char) -> bool {
    const FORMAT: [(u32, u32); 21] = [
        (0xAD, 0xAD),
        (0x600, 0x605),
        (0x61C, 0x61C),
        (0x6DD, 0x6DD),
        (0x70F, 0x70F),
        (0x890, 0x891),
        (0x8E2, 0x8E2),
        (0x180E, 0x180E),
        (0x200B, 0x200F),
        (0x202A, 0x202E),
        (0x2060, 0x2064),
        (0x2066, 0x206F),
        (0xFEFF, 0xFEFF),
        (0xFFF9, 0xFFFB),
        (0x110BD, 0x110BD),
        (0x110CD, 0x110CD),
        (0x13430, 0x13438),
        (0x1BCA0, 0x1BCA3),
        (0x1D173, 0x1D17A),
        (0xE0001, 0xE0001),
        (0xE0020, 0xE007F),
    ];
    let code = u32::from(c);
    FORMAT
        .iter()
        .any(|&(low, high)| (low..=high).contains(&code))
}

/// An array value for a `# simple` line: each word shell-quoted as
/// Python's `shlex.quote` does (bare when it needs no quotes).
pub fn join_words<S: AsRef<str>>(words: &[S]) -> String {
    words
        .iter()
        .map(|word| shell_quote(&clean(word.as_ref())))
        .collect::<Vec<_>>()
        .join(" ")
}

fn shell_quote(word: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "@%+=:,./-_".contains(c);
    if word.is_empty() {
        "''".to_owned()
    } else if word.chars().all(safe) {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', "'\"'\"'"))
    }
}

/// `value` as JSON written the way Python's `json.dumps` writes it
/// (`", "` and `": "` between items, text as it is): the bytes the Python
/// providers wrote, which some readers compare.
pub fn python_json(value: &serde_json::Value) -> String {
    let mut out = Vec::new();
    let mut writer = serde_json::Serializer::with_formatter(&mut out, PythonStyle);
    serde::Serialize::serialize(value, &mut writer).expect("a JSON value serializes");
    String::from_utf8(out).expect("serde_json writes UTF-8")
}

/// A JSON value as Python's `json.dumps` writes it (`ascii`: with
/// `ensure_ascii`), for messages and sizes that match the script's.
pub fn python_dumps(value: &serde_json::Value, ascii: bool) -> String {
    match value {
        serde_json::Value::String(text) => {
            let mut out = String::with_capacity(text.len() + 2);
            out.push('"');
            for c in text.chars() {
                match c {
                    '"' => out.push_str("\\\""),
                    '\\' => out.push_str("\\\\"),
                    '\n' => out.push_str("\\n"),
                    '\r' => out.push_str("\\r"),
                    '\t' => out.push_str("\\t"),
                    '\x08' => out.push_str("\\b"),
                    '\x0c' => out.push_str("\\f"),
                    c if c < ' ' || (ascii && !(' '..='~').contains(&c)) => {
                        let mut units = [0u16; 2];
                        for unit in c.encode_utf16(&mut units) {
                            out.push_str(&format!("\\u{unit:04x}"));
                        }
                    }
                    c => out.push(c),
                }
            }
            out.push('"');
            out
        }
        serde_json::Value::Array(items) => {
            let items: Vec<String> = items.iter().map(|v| python_dumps(v, ascii)).collect();
            format!("[{}]", items.join(", "))
        }
        serde_json::Value::Object(map) => {
            let items: Vec<String> = map
                .iter()
                .map(|(k, v)| {
                    let key = python_dumps(&serde_json::Value::from(k.as_str()), ascii);
                    format!("{key}: {}", python_dumps(v, ascii))
                })
                .collect();
            format!("{{{}}}", items.join(", "))
        }
        other => other.to_string(),
    }
}

/// A JSON value as Python's `str` shows it in a message.
pub fn python_str(value: &serde_json::Value) -> String {
    match value {
        serde_json::Value::String(text) => text.clone(),
        serde_json::Value::Null => "None".to_owned(),
        serde_json::Value::Bool(true) => "True".to_owned(),
        serde_json::Value::Bool(false) => "False".to_owned(),
        other => python_dumps(other, false),
    }
}

/// The separators of Python's `json.dumps`.
struct PythonStyle;

/// `", "` before every item of an array or object but the first.
fn item_separator<W: ?Sized + std::io::Write>(writer: &mut W, first: bool) -> std::io::Result<()> {
    match first {
        true => Ok(()),
        false => writer.write_all(b", "),
    }
}

impl serde_json::ser::Formatter for PythonStyle {
    fn begin_array_value<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        item_separator(writer, first)
    }

    fn begin_object_key<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        item_separator(writer, first)
    }

    fn begin_object_value<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
    ) -> std::io::Result<()> {
        writer.write_all(b": ")
    }
}

/// Writes control and invisible formatting characters as escapes
/// (`\n`, `\t`, `\u{1b}`), leaving all other text as it is.
pub fn escape(text: &str) -> String {
    if !text.chars().any(needs_escape) {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if needs_escape(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

/// Like [`escape`], but keeps line breaks: for multi-line messages.
pub fn escape_lines(text: &str) -> String {
    text.split('\n').map(escape).collect::<Vec<_>>().join("\n")
}

/// Characters that [`escape`] writes as an escape sequence.
pub fn needs_escape(c: char) -> bool {
    c.is_control()
        || matches!(c,
            '\u{200b}'..='\u{200f}'   // zero-width spaces and joiners, directional marks
            | '\u{202a}'..='\u{202e}' // bidirectional embeddings and overrides
            | '\u{2060}'..='\u{2064}' // word joiner and invisible operators
            | '\u{2066}'..='\u{2069}' // bidirectional isolates
            | '\u{feff}'              // zero-width no-break space
            | '\u{2028}' | '\u{2029}' // line and paragraph separators
        )
}

/// Bytes as lowercase hexadecimal (digests, salts).
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_quoted_only_where_a_shell_needs_it() {
        assert_eq!(join_words(&["a", "b.example"]), "a b.example");
        assert_eq!(join_words(&["it's", ""]), "'it'\"'\"'s' ''");
        assert_eq!(join_words(&["two words"]), "'two words'");
        assert_eq!(join_words::<&str>(&[]), "");
    }

    #[test]
    fn json_is_written_as_python_writes_it() {
        let value = serde_json::json!({"a": [1, "é\n"], "b": {}, "c": null});
        assert_eq!(
            python_json(&value),
            r#"{"a": [1, "é\n"], "b": {}, "c": null}"#
        );
        // A control character without a short escape is written \u, a
        // space as it is.
        let text = serde_json::json!("a b\u{1}\u{1f}é");
        assert_eq!(python_dumps(&text, false), "\"a b\\u0001\\u001fé\"");
        assert_eq!(python_dumps(&text, true), "\"a b\\u0001\\u001f\\u00e9\"");
    }

    #[test]
    fn control_characters_become_question_marks() {
        assert_eq!(clean("a\x1bb\nc"), "a?b?c");
        assert_eq!(quoted("x\u{2028}"), "'x?'");
        assert!(has_control("a\tb"));
        assert!(!has_control("naïve"));
    }

    #[test]
    fn escaped_values_show_every_invisible_character() {
        assert_eq!(escaped("svc\0"), "'svc\\u{0}'");
        assert_eq!(escaped("a\tb\n\r"), "'a\\tb\\n\\r'");
        assert_eq!(escaped("\x7f\u{85}\u{9f}"), "'\\u{7f}\\u{85}\\u{9f}'");
        assert_eq!(escaped("x\u{202e}y\u{2028}"), "'x\\u{202e}y\\u{2028}'");
        assert_eq!(
            escaped("C:\\u{0}"),
            "'C:\\\\u{0}'",
            "a backslash is told apart"
        );
        assert_eq!(escaped("naïve ✓"), "'naïve ✓'");
    }

    #[test]
    fn control_and_invisible_characters_are_escaped() {
        assert_eq!(escape("a\x1b[31mb\n"), "a\\u{1b}[31mb\\n");
        assert_eq!(escape("abc\u{202e}cba"), "abc\\u{202e}cba");
        assert_eq!(escape("a\u{2028}b"), "a\\u{2028}b");
        assert_eq!(escape("naïve ✓"), "naïve ✓");
        assert_eq!(escape_lines("one\x07\ntwo"), "one\\u{7}\ntwo");
    }
}
