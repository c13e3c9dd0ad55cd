//! Sensitive values, in one place: what is shown instead of them, how
//! their texts are found among a resource's attributes, and how they are
//! taken out of any text a provider writes or an error quotes.
//!
//! A sensitive attribute's value is passed to the provider as it is and
//! never shown: renderers print [`REDACTED`] for it, and every text that
//! could echo it (the provider's stderr, its error messages, the arguments
//! in the debug log) has each of its [`secret_texts`] replaced first.

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

/// Replaces every occurrence of a secret by [`REDACTED`].
pub fn redact(text: &str, secrets: &[String]) -> String {
    secrets
        .iter()
        .filter(|secret| !secret.is_empty())
        .fold(text.to_owned(), |text, secret| {
            text.replace(secret.as_str(), REDACTED)
        })
}

/// The texts of the values of `attrs` that `is_sensitive` names: each whole
/// value, and each element of an array or hash, as a provider could echo
/// them. Longest first, so that a secret holding another is taken out
/// whole; without repeats or empty texts.
pub fn secret_texts<'a>(
    is_sensitive: impl Fn(&str) -> bool,
    attrs: impl IntoIterator<Item = (&'a str, &'a Value)>,
) -> Vec<String> {
    fn texts(value: &Value, out: &mut Vec<String>) {
        out.push(value.to_text());
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
    secrets.sort_by_key(|text| std::cmp::Reverse(text.len()));
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
    fn secrets_are_found_whole_and_by_element_longest_first() {
        let list = Value::Array(vec![Value::from("ab"), Value::from("abcd")]);
        let plain = Value::from("shown");
        let found = secret_texts(
            |key| key == "password",
            [("password", &list), ("comment", &plain)],
        );
        assert_eq!(found, ["ab abcd", "abcd", "ab"]);
        assert_eq!(
            redact("got abcd and ab, shown", &found),
            "got [redacted] and [redacted], shown"
        );
    }

    #[test]
    fn each_value_of_a_sensitive_hash_is_a_secret_too() {
        let mut map = indexmap::IndexMap::new();
        map.insert("user".to_owned(), Value::from("alice-token"));
        map.insert("key".to_owned(), Value::from("k3y"));
        let hash = Value::Hash(Box::new(map));
        let found = secret_texts(|key| key == "creds", [("creds", &hash)]);
        assert!(found.contains(&"alice-token".to_owned()), "{found:?}");
        assert!(found.contains(&"k3y".to_owned()), "{found:?}");
        assert_eq!(
            redact("echoed k3y and alice-token", &found),
            "echoed [redacted] and [redacted]"
        );
    }
}
