//! Changing a resource: check the request, find the current state, update
//! only what differs, and report the result and each change.
//!
//! Under noop nothing may change. A provider that declares `supports_noop`
//! is called with `ral_noop=true` and reports what it would do; any other
//! provider is not called at all, and the would-be changes are derived from
//! the current state and the request.

use crate::attr_type::Value;
use crate::error::{Error, Result};
use crate::host::{check_name, Host};
use crate::metadata::{Action, Kind};
use crate::provider::Provider;
use crate::resource::{Change, Resource};
use crate::text::escape;

/// A checked change request: typed values for declared, settable attributes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub name: String,
    pub attrs: Vec<(String, Value)>,
}

/// The result of an update (or of a preview, when `noop` is set).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// The resource after the change: found state plus the changes.
    pub resource: Resource,
    pub changes: Vec<Change>,
    pub noop: bool,
}

impl Request {
    /// Checks `attr=value` arguments against the provider's metadata. Nothing
    /// runs when this fails.
    pub fn parse(provider: &Provider, name: &str, args: &[String]) -> Result<Request> {
        let reject = |message: String| Error::Request {
            provider: provider.qualified_name(),
            message,
        };
        if !provider.meta.supports(Action::Update) {
            return Err(Error::Unsupported {
                provider: provider.qualified_name(),
                action: "update".to_owned(),
            });
        }
        check_name(name).map_err(reject)?;
        let mut attrs: Vec<(String, Value)> = Vec::new();
        for arg in args {
            let Some((key, raw)) = arg.split_once('=') else {
                return Err(reject(format!(
                    "argument '{}' is not of the form attribute=value",
                    escape(arg)
                )));
            };
            if key == "name" {
                return Err(reject(
                    "'name=' is not allowed: the name is the argument after the type".to_owned(),
                ));
            }
            let settable = || settable_names(provider).join(", ");
            let Some(attribute) = provider.attribute(key) else {
                return Err(reject(format!(
                    "unknown attribute '{}'; settable attributes: {}",
                    escape(key),
                    settable()
                )));
            };
            if attribute.kind == Kind::Read {
                return Err(reject(format!(
                    "attribute '{key}' is read-only; settable attributes: {}",
                    settable()
                )));
            }
            let value = attribute.attr_type.parse_cli(raw).map_err(|reason| {
                reject(format!(
                    "invalid value '{}' for attribute '{key}' of type {}: {reason}",
                    escape(raw),
                    attribute.attr_type
                ))
            })?;
            if attrs.iter().any(|(k, _)| k == key) {
                return Err(reject(format!("attribute '{key}' is given twice")));
            }
            attrs.push((key.to_owned(), value));
        }
        Ok(Request {
            name: name.to_owned(),
            attrs,
        })
    }

    fn wants_absent(&self) -> bool {
        self.attrs
            .iter()
            .any(|(k, v)| k == "ensure" && v.as_str() == Some("absent"))
    }
}

fn settable_names(provider: &Provider) -> Vec<&str> {
    let names: Vec<&str> = provider
        .meta
        .attributes
        .values()
        .filter(|a| a.name != "name" && a.kind != Kind::Read)
        .map(|a| a.name.as_str())
        .collect();
    if names.is_empty() {
        vec!["(none)"]
    } else {
        names
    }
}

/// Brings a resource to the requested state (or previews it under `noop`).
pub fn apply(host: &Host, provider: &Provider, request: &Request, noop: bool) -> Result<Outcome> {
    let found = host.find(provider, &request.name)?;
    let exists = found.as_ref().is_some_and(|r| !r.is_absent());
    let state = found.unwrap_or_else(|| absent_state(provider, &request.name));
    let unchanged = |resource| Outcome {
        resource,
        changes: Vec::new(),
        noop,
    };
    if request.wants_absent() && !exists {
        return Ok(unchanged(state));
    }
    let differing: Vec<(String, Value)> = request
        .attrs
        .iter()
        .filter(|(key, value)| state.attrs.get(key) != Some(value))
        .cloned()
        .collect();
    if differing.is_empty() {
        return Ok(unchanged(state));
    }
    let changes = if noop && !provider.meta.supports_noop {
        log::info!(
            "{} does not support noop; showing the changes derived from its current state",
            provider.qualified_name()
        );
        derived(&state, &differing, &[])
    } else {
        let answer = host.update(provider, &request.name, &differing, noop)?;
        let mut changes = answer.changes;
        if answer.derive {
            let extra = derived(&state, &differing, &changes);
            changes.extend(extra);
        }
        changes
    };
    Ok(Outcome {
        resource: state.with_changes(&changes),
        changes,
        noop,
    })
}

/// The state assumed for a resource the provider does not know.
fn absent_state(provider: &Provider, name: &str) -> Resource {
    let mut resource = Resource::bare(name);
    if provider.attribute("ensure").is_some() {
        resource
            .attrs
            .insert("ensure".to_owned(), Value::String("absent".to_owned()));
    }
    resource
}

/// Changes from `state` to the requested values, for attributes that
/// `reported` does not already cover.
fn derived(state: &Resource, differing: &[(String, Value)], reported: &[Change]) -> Vec<Change> {
    differing
        .iter()
        .filter(|(key, _)| !reported.iter().any(|c| &c.attr == key))
        .map(|(key, value)| Change {
            attr: key.clone(),
            is: value.clone(),
            was: state.attrs.get(key).cloned(),
        })
        .collect()
}
