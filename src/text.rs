//! Making untrusted text safe to print.
//!
//! Provider output, metadata and file names can hold control characters
//! (terminal escape sequences) and invisible Unicode formatting characters
//! (bidirectional overrides, zero-width spaces) that would let them rewrite
//! or disguise what a person sees. Everything ral prints that came from
//! outside goes through [`escape`] or [`escape_lines`].

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
    fn control_and_invisible_characters_are_escaped() {
        assert_eq!(escape("a\x1b[31mb\n"), "a\\u{1b}[31mb\\n");
        assert_eq!(escape("abc\u{202e}cba"), "abc\\u{202e}cba");
        assert_eq!(escape("a\u{2028}b"), "a\\u{2028}b");
        assert_eq!(escape("naïve ✓"), "naïve ✓");
        assert_eq!(escape_lines("one\x07\ntwo"), "one\\u{7}\ntwo");
    }
}
