//! Sensitive values, in one place: what is shown instead of them, how
//! their texts are found among a resource's attributes, and how they are
//! taken out of any text a provider writes or an error quotes.
//!
//! A sensitive attribute's value is passed to the provider as it is and
//! never shown: renderers print [`REDACTED`] for it, and every text that
//! could echo it (the provider's stderr, its error messages, the arguments
//! in the debug log) has each of its [`secret_texts`] replaced first.
//!
//! A secret of several lines (a key, a certificate) does not reach a text
//! whole when the text is read line by line, as a provider's stderr is,
//! or when it was escaped on the way (`\n` in a JSON string or a Python
//! repr): so each of its pieces between line breaks (or other control
//! characters) is taken out as well, once it is [`MIN_PIECE`] characters
//! long, leading and trailing blanks aside. Shorter pieces would blank
//! out ordinary words and say next to nothing of the secret; so would a
//! whole secret that short (a locked account's password `!`), which is
//! left in free text too: renderers still show its attribute as
//! [`REDACTED`]. A text cut at a length ([`redact_cut`]) loses also the
//! start of a secret it ends with.

use std::cmp::Reverse;

use crate::types::Value;

/// What is shown in place of a sensitive value.
pub const REDACTED: &str = "[redacted]";

/// What the text output shows for an empty sensitive value (see
/// [`hides`]).
pub const EMPTY: &str = "'' (empty)";

/// Whether output hides a sensitive value: every value but the empty
/// text, which is no secret and which whoever reviews a change must see
/// (an empty password is no password at all). It is shown as [`EMPTY`] in
/// text, `""` in JSON.
pub fn hides(value: &Value) -> bool {
    !matches!(value, Value::String(text) if text.is_empty())
}

/// The fewest characters a piece of a multi-line secret has to be taken
/// out on its own (see the module).
pub const MIN_PIECE: usize = 4;

/// Replaces every occurrence of a secret, and of each piece of a
/// multi-line one, by [`REDACTED`].
pub fn redact(text: &str, secrets: &[String]) -> String {
    Needles::of(secrets).redact(text)
}

/// Whether `text` holds a secret, or a piece of a multi-line one, that
/// [`redact`] would take out.
pub fn holds(text: &str, secrets: &[String]) -> bool {
    Needles::of(secrets).holds(text)
}

/// What [`redact`] takes out for some secrets, worked out once: for a
/// caller that looks at many texts against the same secrets.
pub struct Needles(Vec<String>);

impl Needles {
    /// The needles of `secrets` (see [`needles`]).
    pub fn of(secrets: &[String]) -> Needles {
        Needles(needles(secrets))
    }

    /// [`redact`] of `text`.
    pub fn redact(&self, text: &str) -> String {
        self.0.iter().fold(text.to_owned(), |text, needle| {
            match text.contains(needle.as_str()) {
                true => text.replace(needle.as_str(), REDACTED),
                false => text,
            }
        })
    }

    /// [`holds`] of `text`.
    pub fn holds(&self, text: &str) -> bool {
        self.0.iter().any(|needle| text.contains(needle.as_str()))
    }
}

/// [`redact`] for a text cut at some length (a line longer than is read,
/// the start of a line quoted): a secret's start of [`MIN_PIECE`]
/// characters or more at its end goes too, the rest of that secret having
/// been cut off.
pub fn redact_cut(text: &str, secrets: &[String]) -> String {
    let found = Needles::of(secrets);
    let mut text = found.redact(text);
    let needles = found.0;
    // Only an end shorter than the longest secret can start one.
    let from = text
        .len()
        .saturating_sub(needles.first().map_or(0, |n| n.len()));
    let cut = (from..text.len())
        .filter(|&at| text.is_char_boundary(at))
        .find(|&at| {
            let end = &text[at..];
            end.chars().count() >= MIN_PIECE
                && needles
                    .iter()
                    .any(|needle| needle.len() > end.len() && needle.starts_with(end))
        });
    if let Some(at) = cut {
        text.truncate(at);
        text.push_str(REDACTED);
    }
    text
}

/// What [`redact`] takes out for `secrets`: each one whole, and the
/// pieces of each multi-line one, each also as the escaped forms a
/// provider may echo it in ([`escaped_forms`]); longest first, so that a
/// text holding another is taken out whole.
fn needles(secrets: &[String]) -> Vec<String> {
    let mut plain: Vec<&str> = Vec::new();
    for secret in secrets.iter().filter(|secret| !secret.is_empty()) {
        if secret.trim().chars().count() >= MIN_PIECE {
            plain.push(secret);
        }
        if secret.chars().any(breaks) {
            plain.extend(
                secret
                    .split(breaks)
                    .map(str::trim)
                    .filter(|piece| piece.chars().count() >= MIN_PIECE),
            );
        }
    }
    let mut needles: Vec<String> = plain
        .iter()
        .flat_map(|text| std::iter::once((*text).to_owned()).chain(escaped_forms(text)))
        .collect();
    needles.sort_by_key(|needle| Reverse(needle.len()));
    needles.dedup();
    needles
}

/// The forms a text takes when a provider echoes it escaped, where they
/// differ from it: inside a JSON string (serde's and Python's `json.dumps`
/// with non-ASCII kept, and `json.dumps`'s default, every non-ASCII
/// character as `\uXXXX`), and inside a Python `repr` (its `\` and `'`
/// escaped).
fn escaped_forms(text: &str) -> Vec<String> {
    let json = serde_json::to_string(text).unwrap_or_default();
    let json = json[1..json.len() - 1].to_owned();
    let mut ascii = String::with_capacity(json.len());
    for c in json.chars() {
        match c.is_ascii() {
            true => ascii.push(c),
            false => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    ascii.push_str(&format!("\\u{unit:04x}"));
                }
            }
        }
    }
    let repr = text.replace('\\', "\\\\").replace('\'', "\\'");
    let mut forms = vec![json, ascii, repr];
    forms.retain(|form| form != text);
    forms.sort();
    forms.dedup();
    forms
}

/// Where a secret is split into pieces: line breaks, and the other
/// characters that are escaped or taken for the end of a line on the way
/// to an output.
fn breaks(c: char) -> bool {
    c.is_control() || matches!(c, '\u{2028}' | '\u{2029}')
}

/// The texts of the values of `attrs` that `is_sensitive` names: each whole
/// value, and each element of an array or hash, as a provider could echo
/// them; of a `NAME=VALUE` text (an environment's entry, which an exec
/// hands its command), its VALUE too, which the command sees alone.
/// Longest first, so that a secret holding another is taken out whole;
/// without repeats or empty texts.
pub fn secret_texts<'a>(
    is_sensitive: impl Fn(&str) -> bool,
    attrs: impl IntoIterator<Item = (&'a str, &'a Value)>,
) -> Vec<String> {
    fn texts(value: &Value, out: &mut Vec<String>) {
        let text = value.to_text();
        if let Some((name, assigned)) = text.split_once('=') {
            let is_name = !name.is_empty()
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                && !name.starts_with(|c: char| c.is_ascii_digit());
            if is_name {
                out.push(assigned.to_owned());
            }
        }
        out.push(text);
        match value {
            Value::Array(items) => items.iter().for_each(|item| texts(item, out)),
            Value::Hash(map) => map.values().for_each(|item| texts(item, out)),
            _ => {}
        }
    }
    let mut secrets = Vec::new();
    for (key, value) in attrs {
        if is_sensitive(key) {
            texts(value, &mut secrets);
        }
    }
    secrets.retain(|text| !text.is_empty());
    secrets.sort_by_key(|text| Reverse(text.len()));
    secrets.dedup();
    secrets
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_empty_text_is_not_hidden() {
        assert!(!hides(&Value::from("")));
        assert!(hides(&Value::from("x")));
        assert!(hides(&Value::Array(Vec::new())));
    }

    #[test]
    fn an_environment_entry_s_value_is_a_secret_of_its_own() {
        let env = Value::Array(vec![Value::from("TOKEN=t0ken"), Value::from("a b=c")]);
        let found = secret_texts(|_| true, [("environment", &env)]);
        assert!(found.contains(&"t0ken".to_owned()), "{found:?}");
        assert!(
            !found.contains(&"c".to_owned()),
            "not a NAME=VALUE: {found:?}"
        );
    }

    #[test]
    fn secrets_are_found_whole_and_by_element_longest_first() {
        let list = Value::Array(vec![Value::from("ab"), Value::from("abcd")]);
        let plain = Value::from("shown");
        let found = secret_texts(
            |key| key == "password",
            [("password", &list), ("comment", &plain)],
        );
        assert_eq!(found, ["ab abcd", "abcd", "ab"]);
        // A secret of fewer than four characters is left in free text: it
        // would blank out words and tells next to nothing.
        assert_eq!(
            redact("got abcd and ab, shown", &found),
            "got [redacted] and ab, shown"
        );
    }

    #[test]
    fn a_secret_echoed_escaped_is_taken_out_too() {
        let found = secret_texts(
            |_| true,
            [
                ("a", &Value::from("Pässwort-Geheim-42")),
                ("b", &Value::from("pa\"ss-word-123")),
                ("c", &Value::from("back\\slash-secret")),
                ("d", &Value::from("it's-a-secret\nsecond-line-ä")),
            ],
        );
        for echoed in [
            r#"json.dumps: "P\u00e4sswort-Geheim-42""#,
            r#"serde: "Pässwort-Geheim-42""#,
            r#"quoted: "pa\"ss-word-123""#,
            r#"repr: 'back\\slash-secret'"#,
            r#"repr: 'it\'s-a-secret\nsecond-line-ä'"#,
            r#"piece: "second-line-\u00e4""#,
        ] {
            let out = redact(echoed, &found);
            assert!(out.contains(REDACTED), "{echoed} -> {out}");
            for kept in ["42", "123", "slash", "second"] {
                assert!(!out.contains(kept), "{echoed} -> {out}");
            }
        }
    }

    #[test]
    fn a_locked_account_s_password_leaves_messages_whole() {
        let locked = secret_texts(|_| true, [("password", &Value::from("!"))]);
        let message = "a locked account has the password '!'";
        assert_eq!(redact(message, &locked), message);
        assert!(!holds(message, &locked));
        let four = secret_texts(|_| true, [("password", &Value::from("abcd"))]);
        assert_eq!(redact("x abcd y", &four), "x [redacted] y");
    }

    #[test]
    fn each_line_of_a_multi_line_secret_is_taken_out_wherever_the_lines_went() {
        let secrets = ["first-S3CRET\r\n  second-S3CRET \nab\n".to_owned()];
        // Whole, line by line, escaped, joined otherwise.
        for (text, redacted) in [
            (
                "got first-S3CRET\r\n  second-S3CRET \nab\n!",
                "got [redacted]!",
            ),
            ("token first-S3CRET", "token [redacted]"),
            ("  second-S3CRET ", "  [redacted] "),
            (
                r#""first-S3CRET\r\n  second-S3CRET \nab\n""#,
                r#""[redacted]""#,
            ),
            (
                r#""first-S3CRET\r\n  second-S3CRET""#,
                r#""[redacted]\r\n  [redacted]""#,
            ),
            ("first-S3CRET second-S3CRET", "[redacted] [redacted]"),
        ] {
            assert_eq!(redact(text, &secrets), redacted, "{text:?}");
        }
        // A piece too short to say anything is left: "ab" is everywhere.
        assert_eq!(redact("about", &secrets), "about");
        // So are the words of a one-line secret.
        assert_eq!(
            redact("a pass phrase", &["pass phrase here".to_owned()]),
            "a pass phrase"
        );
    }

    #[test]
    fn a_text_cut_in_a_secret_loses_the_start_of_it() {
        let secrets = ["S3CRET-value".to_owned()];
        assert_eq!(redact_cut("said S3CRET-va", &secrets), "said [redacted]");
        assert_eq!(
            redact_cut("said S3CRET-value and S3C", &secrets),
            "said [redacted] and S3C"
        );
        assert_eq!(redact_cut("said S3CRET-value", &secrets), "said [redacted]");
        assert_eq!(redact_cut("nothing", &secrets), "nothing");
        // The start of a line of a multi-line secret, too.
        let pem = ["-----BEGIN KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAAS\n".to_owned()];
        assert_eq!(redact_cut("key: MIIEvQIBAD", &pem), "key: [redacted]");
    }

    #[test]
    fn each_value_of_a_sensitive_hash_is_a_secret_too() {
        let mut map = indexmap::IndexMap::new();
        map.insert("user".to_owned(), Value::from("alice-token"));
        map.insert("key".to_owned(), Value::from("k3y4"));
        let hash = Value::Hash(Box::new(map));
        let found = secret_texts(|key| key == "creds", [("creds", &hash)]);
        assert!(found.contains(&"alice-token".to_owned()), "{found:?}");
        assert!(found.contains(&"k3y4".to_owned()), "{found:?}");
        assert_eq!(
            redact("echoed k3y4 and alice-token", &found),
            "echoed [redacted] and [redacted]"
        );
    }
}
