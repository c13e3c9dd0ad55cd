//! Shell quoting of values handed to providers.
//!
//! Providers recover their arguments with bash `eval "$@"` or Python
//! `shlex.split(" ".join(argv))`, so every value must come back exactly and
//! nothing in it may ever run. A value made only of characters that are inert
//! in both parsers is passed as it is; anything else is wrapped in single
//! quotes, where bash and shlex treat every character literally, and a single
//! quote inside is written `'\''`.
//!
//! We do not use `shell_words::quote` for this: it leaves characters such as
//! `\r` bare, which Python's shlex treats as whitespace, so a value holding one
//! would reach a Python provider split in two.

/// Quotes one word for `eval` and `shlex`.
pub fn quote_word(value: &str) -> String {
    let inert = |c: char| c.is_ascii_alphanumeric() || "_-./:@+,%".contains(c);
    // A leading '-' is harmless here (the word follows `key=`), but a bare word
    // must not be empty.
    if !value.is_empty() && value.chars().all(inert) {
        return value.to_owned();
    }
    let mut quoted = String::with_capacity(value.len() + 2);
    quoted.push('\'');
    for c in value.chars() {
        if c == '\'' {
            quoted.push_str("'\\''");
        } else {
            quoted.push(c);
        }
    }
    quoted.push('\'');
    quoted
}

/// Builds one `key=value` argument with the value quoted.
pub fn assignment(key: &str, value: &str) -> String {
    format!("{key}={}", quote_word(value))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_words_stay_bare_and_others_are_single_quoted() {
        assert_eq!(quote_word("etc_hosts-1.2"), "etc_hosts-1.2");
        assert_eq!(quote_word(""), "''");
        assert_eq!(quote_word("a b"), "'a b'");
        assert_eq!(quote_word("it's"), "'it'\\''s'");
        assert_eq!(quote_word("a\rb"), "'a\rb'");
        assert_eq!(quote_word("$(id)"), "'$(id)'");
        assert_eq!(assignment("name", "x y"), "name='x y'");
    }

    #[test]
    fn shell_words_split_recovers_every_value() {
        for value in [
            "", "a b", "'", "\"", "$HOME", "`id`", "$(id)", "a;b", "x=y", "\\", "\n\t", "-n",
            "naïve", "a\rb",
        ] {
            let words = shell_words::split(&assignment("k", value)).unwrap();
            assert_eq!(words, vec![format!("k={value}")], "{value:?}");
        }
    }
}
