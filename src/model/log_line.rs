//! Structured log lines: what a provider says on stderr about one resource.
//!
//! After its level prefix, a stderr line may be `ral_log` followed by a JSON
//! object naming the resource, the action under way and, for a change, the
//! attribute with its old and new values (the Log of the ral_provider
//! toolkit writes them). ralsh shows such a line as `RESOURCE: ACTION:
//! ATTR: OLD -> NEW: MESSAGE`, with the values of sensitive attributes
//! redacted by name, so a provider cannot leak a password by logging its
//! change. Any other line is shown as it is.

use serde_json::{Map, Value as Json};

use crate::secrets::REDACTED;

/// The word that starts a structured line, after the level prefix.
const MARKER: &str = "ral_log ";

/// One structured line.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    pub resource: String,
    /// `creating`, `updating`, `deleting`, or what else the provider says.
    pub context: Option<String>,
    pub attribute: Option<String>,
    pub old: Option<Json>,
    pub new: Option<Json>,
    pub message: Option<String>,
}

impl Record {
    /// Reads a structured line (the text after its level prefix); `None`
    /// when the line is not one, or does not hold a resource name.
    pub fn parse(line: &str) -> Option<Record> {
        let object: Map<String, Json> = serde_json::from_str(line.strip_prefix(MARKER)?).ok()?;
        let text = |key: &str| object.get(key).and_then(Json::as_str).map(str::to_owned);
        Some(Record {
            resource: text("resource")?,
            context: text("context"),
            attribute: text("attribute"),
            old: object.get("old").cloned(),
            new: object.get("new").cloned(),
            message: text("message"),
        })
    }

    /// The line as ralsh shows it; the values of an attribute that
    /// `is_sensitive` are redacted.
    pub fn render(&self, is_sensitive: impl Fn(&str) -> bool) -> String {
        let mut parts = vec![self.resource.clone()];
        parts.extend(self.context.clone());
        if let Some(attribute) = &self.attribute {
            let value = |value: &Option<Json>| match value {
                _ if is_sensitive(attribute) => REDACTED.to_owned(),
                Some(value) => show(value),
                None => "(none)".to_owned(),
            };
            parts.push(format!(
                "{attribute}: {} -> {}",
                value(&self.old),
                value(&self.new)
            ));
        }
        parts.extend(self.message.clone());
        parts.join(": ")
    }
}

/// A value in the style of ralsh's human output: text in single quotes,
/// arrays of them in brackets, no value as `(none)`.
fn show(value: &Json) -> String {
    match value {
        Json::Null => "(none)".to_owned(),
        Json::String(text) => format!("'{}'", text.replace('\\', "\\\\").replace('\'', "\\'")),
        Json::Array(items) => {
            let items: Vec<String> = items.iter().map(show).collect();
            format!("[{}]", items.join(", "))
        }
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_is_shown_with_its_values_and_a_sensitive_one_redacted() {
        let line = r#"ral_log {"resource": "web1", "context": "updating", "attribute": "ip", "old": "10.0.0.1", "new": "10.0.0.2"}"#;
        let record = Record::parse(line).unwrap();
        assert_eq!(
            record.render(|_| false),
            "web1: updating: ip: '10.0.0.1' -> '10.0.0.2'"
        );
        assert_eq!(
            record.render(|attr| attr == "ip"),
            "web1: updating: ip: [redacted] -> [redacted]"
        );
        let line = r#"ral_log {"resource": "bob", "attribute": "groups", "old": null, "new": ["a", "it's"]}"#;
        assert_eq!(
            Record::parse(line).unwrap().render(|_| false),
            r"bob: groups: (none) -> ['a', 'it\'s']"
        );
    }

    #[test]
    fn context_and_message_without_a_change() {
        let line = r#"ral_log {"resource": "bob", "context": "creating", "message": "created"}"#;
        assert_eq!(
            Record::parse(line).unwrap().render(|_| true),
            "bob: creating: created"
        );
    }

    #[test]
    fn other_lines_are_not_records() {
        for line in [
            "plain text",
            "ral_log not json",
            r#"ral_log {"context": "creating"}"#,
            r#"ral_log ["resource"]"#,
            r#"{"resource": "x"}"#,
        ] {
            assert_eq!(Record::parse(line), None, "{line}");
        }
    }
}
