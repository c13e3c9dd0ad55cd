//! Checking what providers report against their metadata: every value is
//! converted to its declared type; a value that does not fit, or an
//! attribute the metadata does not declare, is a warning naming provider,
//! resource, attribute and value (once per provider and attribute), or an
//! error under `--strict`. Sensitive values are never shown.

use std::collections::HashSet;
use std::sync::Mutex;

use crate::error::{Error, Result};
use crate::metadata::{Action, Attribute, Kind};
use crate::provider::Provider;
use crate::resource::Resource;
use crate::secrets::REDACTED;
use crate::text::escape;
use crate::types::Value;

/// A value as a provider wrote it.
#[derive(Debug, Clone, Copy)]
pub enum Raw<'a> {
    /// From `# simple` output.
    Text(&'a str),
    /// From a json-convention document.
    Json(&'a serde_json::Value),
}

impl Raw<'_> {
    fn untyped(self) -> Value {
        match self {
            Raw::Text(text) => Value::String(text.to_owned()),
            Raw::Json(json) => Value::from_json(json),
        }
    }

    fn shown(self) -> String {
        match self {
            Raw::Text(text) => format!("'{}'", escape(text)),
            Raw::Json(json) => escape(&json.to_string()),
        }
    }
}

/// How many (provider, attribute) warnings are remembered and shown.
const MAX_WARNED: usize = 100;

/// The output checker of one host.
#[derive(Debug, Default)]
pub struct OutputCheck {
    strict: bool,
    warned: Mutex<HashSet<(String, String)>>,
    /// Every problem seen, for `ral check` (bounded).
    seen: Mutex<Vec<String>>,
}

/// How many problems are kept for [`OutputCheck::problems`].
const MAX_SEEN: usize = 200;

impl OutputCheck {
    pub fn new(strict: bool) -> OutputCheck {
        OutputCheck {
            strict,
            warned: Mutex::new(HashSet::new()),
            seen: Mutex::new(Vec::new()),
        }
    }

    /// Takes the problems seen since the last call.
    pub fn take_problems(&self) -> Vec<String> {
        std::mem::take(&mut *self.seen.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Builds a typed resource; write-only attributes are dropped, and
    /// `ral`/`ral_*` keys belong to the convention.
    pub fn resource<'a>(
        &self,
        provider: &Provider,
        action: Action,
        name: &str,
        attrs: impl IntoIterator<Item = (&'a str, Raw<'a>)>,
    ) -> Result<Resource> {
        if name.is_empty() {
            return Err(Error::Protocol {
                provider: provider.qualified_name(),
                action: action.as_str().to_owned(),
                message: "a resource has an empty name".to_owned(),
            });
        }
        let attrs = attrs.into_iter();
        let mut resource = Resource::with_capacity(name, attrs.size_hint().0);
        for (key, raw) in attrs {
            if key == "name" || key == "ral" || key.starts_with("ral_") {
                continue;
            }
            let declared = provider.attribute(key);
            if matches!(declared.map(|a| a.kind), Some(Kind::Write | Kind::Refresh)) {
                continue;
            }
            // JSON null means "no value": the attribute is simply not set.
            if matches!(raw, Raw::Json(serde_json::Value::Null)) {
                continue;
            }
            let value = self.declared_value(provider, declared, action, name, key, raw)?;
            resource.attrs.insert(key.to_owned(), value);
        }
        // A private value never goes further than here.
        crate::withheld::withhold_read(provider, &mut resource);
        // A plan keeps each state it reads: no room for the keys skipped.
        resource.attrs.shrink_to_fit();
        Ok(resource)
    }

    /// Converts one reported value to its declared type.
    pub fn value(
        &self,
        provider: &Provider,
        action: Action,
        resource: &str,
        attr: &str,
        raw: Raw,
    ) -> Result<Value> {
        let declared = provider.attribute(attr);
        self.declared_value(provider, declared, action, resource, attr, raw)
    }

    /// [`Self::value`] for an attribute already looked up (listings look
    /// each one up once).
    fn declared_value(
        &self,
        provider: &Provider,
        declared: Option<&Attribute>,
        action: Action,
        resource: &str,
        attr: &str,
        raw: Raw,
    ) -> Result<Value> {
        if matches!(raw, Raw::Json(serde_json::Value::Null)) {
            return Ok(Value::Null);
        }
        let problem = match declared {
            None => format!(
                "resource '{}': attribute '{}' (value {}) is not declared in the metadata",
                escape(resource),
                escape(attr),
                raw.shown()
            ),
            Some(declared) => {
                let converted = match raw {
                    Raw::Text(text) => declared.attr_type.parse_wire(text),
                    Raw::Json(json) => declared.attr_type.check_json(json),
                };
                match converted {
                    Ok(value) => return Ok(value),
                    Err(_) if declared.sensitive => format!(
                        "resource '{}': attribute '{attr}' has value {REDACTED}, which is not a {}",
                        escape(resource),
                        declared.attr_type
                    ),
                    Err(reason) => format!(
                        "resource '{}': attribute '{attr}' has value {}, which is not a {}: {}",
                        escape(resource),
                        raw.shown(),
                        declared.attr_type,
                        escape(&reason.to_string())
                    ),
                }
            }
        };
        self.report(provider, action, attr, problem)?;
        Ok(raw.untyped())
    }

    /// Records a problem with what `provider` answered to `action` about
    /// `attr`: an error under `--strict`, otherwise a warning (once per
    /// provider and attribute).
    pub fn report(
        &self,
        provider: &Provider,
        action: Action,
        attr: &str,
        problem: String,
    ) -> Result<()> {
        let label = provider.qualified_name();
        {
            let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
            if seen.len() < MAX_SEEN {
                seen.push(problem.clone());
            }
        }
        if self.strict {
            return Err(Error::Protocol {
                provider: label,
                action: action.as_str().to_owned(),
                message: format!("{problem} (--strict)"),
            });
        }
        let mut warned = self.warned.lock().unwrap_or_else(|e| e.into_inner());
        // Bounded, so a provider inventing attribute names cannot grow it
        // without end.
        if warned.len() < MAX_WARNED && warned.insert((label.clone(), attr.to_owned())) {
            log::warn!("{label}: {problem}");
            if warned.len() == MAX_WARNED {
                log::warn!("{label}: too many attribute warnings; further ones are not shown");
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn provider() -> Provider {
        let yaml = "provider:\n  type: t\n  invoke: simple\n  actions: [list]\n  suitable: true\n  attributes:\n    name: {}\n    size: {type: integer}\n    secret: {type: integer, sensitive: true}\n    token: {kind: w}\n";
        let meta = crate::metadata::Metadata::parse(yaml, std::path::Path::new("t.yaml")).unwrap();
        Provider::new(meta, "t.prov".into(), None)
    }

    fn listed(check: &OutputCheck, attrs: &[(&str, &str)]) -> Result<Resource> {
        check.resource(
            &provider(),
            Action::List,
            "a",
            attrs.iter().map(|(k, v)| (*k, Raw::Text(v))),
        )
    }

    #[test]
    fn values_are_typed_and_convention_keys_and_parameters_dropped() {
        let check = OutputCheck::new(false);
        let resource = listed(
            &check,
            &[
                ("size", "010"),
                ("token", "t"),
                ("ral_unknown", "x"),
                ("name", "a"),
            ],
        )
        .unwrap();
        assert_eq!(resource.attrs.len(), 1);
        assert_eq!(resource.attrs["size"], Value::Integer(10));
        assert!(check.take_problems().is_empty());
    }

    #[test]
    fn misfits_and_undeclared_attributes_are_problems_or_strict_errors() {
        let lenient = OutputCheck::new(false);
        let resource = listed(&lenient, &[("size", "big"), ("mood", "fine")]).unwrap();
        // Kept as text, so nothing is lost.
        assert_eq!(resource.attrs["size"], Value::from("big"));
        let problems = lenient.take_problems();
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(problems[0].contains("attribute 'size' has value 'big', which is not a integer"));
        assert!(problems[1].contains("attribute 'mood' (value 'fine') is not declared"));
        let strict = OutputCheck::new(true);
        let err = listed(&strict, &[("size", "big")]).unwrap_err().to_string();
        assert!(err.ends_with("(--strict)"), "{err}");
    }

    #[test]
    fn a_sensitive_misfit_never_shows_its_value() {
        let check = OutputCheck::new(true);
        let err = listed(&check, &[("secret", "hunter2")])
            .unwrap_err()
            .to_string();
        assert!(err.contains("has value [redacted]"), "{err}");
        assert!(!err.contains("hunter2"), "{err}");
    }

    #[test]
    fn an_empty_name_is_a_protocol_error() {
        let check = OutputCheck::new(false);
        let err = check
            .resource(&provider(), Action::List, "", std::iter::empty())
            .unwrap_err();
        assert!(
            err.to_string().contains("a resource has an empty name"),
            "{err}"
        );
    }
}
