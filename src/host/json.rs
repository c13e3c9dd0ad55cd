//! The host's side of the json calling convention: get for list and find,
//! set for batches of updates.

use serde_json::{Map, Value as Json};

use super::{output_error, plan_secrets, redacted, Host, Invocation, UpdateAnswer};
use crate::check::Raw;
use crate::error::{Error, Result};
use crate::invoke::json::{self, GetEntry, SetUpdate, MAX_DOCUMENT};
use crate::metadata::Action;
use crate::process::Budget;
use crate::provider::Provider;
use crate::resource::{Change, Resource};
use crate::text::{escape, escape_lines};
use crate::update::Plan;

impl Host {
    /// Runs one json-convention call and returns its whole stdout.
    fn json_call(
        &self,
        provider: &Provider,
        action: Action,
        stdin: Vec<u8>,
        secrets: Vec<String>,
    ) -> Result<String> {
        let label = provider.qualified_name();
        let mut text = String::new();
        let invocation = Invocation {
            stdin: Some(stdin),
            max_line: MAX_DOCUMENT,
            max_answer: MAX_DOCUMENT,
            secrets,
            ..Invocation::to(provider, action, vec![format!("ral_action={action}")])
        };
        self.call(&label, &provider.source, invocation, &mut |line| {
            text.push_str(line);
            text.push('\n');
            Ok(Budget::Continue)
        })?;
        Ok(text)
    }

    fn json_get(&self, provider: &Provider, names: &[&str]) -> Result<Vec<GetEntry>> {
        let text = self.json_call(provider, Action::Get, json::get_request(names), Vec::new())?;
        json::parse_get(&text).map_err(|e| output_error(&provider.qualified_name(), Action::Get, e))
    }

    fn json_resource(
        &self,
        provider: &Provider,
        name: &str,
        attrs: &Map<String, Json>,
    ) -> Result<Resource> {
        self.check.resource(
            provider,
            Action::Get,
            name,
            attrs.iter().map(|(k, v)| (k.as_str(), Raw::Json(v))),
        )
    }

    pub(super) fn json_list(
        &self,
        provider: &Provider,
        each: &mut dyn FnMut(Resource) -> Result<()>,
    ) -> Result<()> {
        for entry in self.json_get(provider, &[])? {
            match entry.body {
                Ok(attrs) => each(self.json_resource(provider, &entry.name, &attrs)?)?,
                Err(error) => log::warn!(
                    "{}: get reported an error for '{}': {}",
                    provider.qualified_name(),
                    escape(&entry.name),
                    escape_lines(&error.to_string())
                ),
            }
        }
        Ok(())
    }

    pub(super) fn json_find(&self, provider: &Provider, name: &str) -> Result<Option<Resource>> {
        // The provider may answer with more than was asked; the host filters.
        let entries = match self.json_get(provider, &[name]) {
            // "Does not exist and cannot be created" is not found, whether
            // it comes for the whole call or for the resource.
            Err(error) if error.kind() == Some("unknown") => {
                log::info!("{error}");
                return Ok(None);
            }
            other => other?,
        };
        let Some(entry) = entries.into_iter().find(|entry| entry.name == name) else {
            return Ok(None);
        };
        match entry.body {
            Ok(attrs) => self.json_resource(provider, name, &attrs).map(Some),
            Err(error) if error.kind == "unknown" => {
                log::info!(
                    "{}: '{}' is unknown: {}",
                    provider.qualified_name(),
                    escape(name),
                    escape_lines(&error.message)
                );
                Ok(None)
            }
            Err(error) => Err(Error::Reported {
                provider: provider.qualified_name(),
                action: Action::Get.as_str().to_owned(),
                message: escape_lines(&error.message),
                kind: Some(escape(&error.kind)),
            }),
        }
    }

    pub(super) fn json_update_batch(
        &self,
        provider: &Provider,
        plans: &[&Plan],
        noop: bool,
    ) -> Result<Vec<Result<UpdateAnswer>>> {
        let label = provider.qualified_name();
        if !provider.meta.supports(Action::Set) {
            return Err(Error::Unsupported {
                provider: label,
                action: "set".to_owned(),
            });
        }
        let updates: Vec<SetUpdate> = plans
            .iter()
            .map(|plan| SetUpdate {
                name: &plan.name,
                is: if plan.found {
                    json_object(&plan.state)
                } else {
                    Map::new()
                },
                should: plan
                    .should
                    .iter()
                    .map(|(key, value)| (key.clone(), Json::from(value)))
                    .collect(),
            })
            .collect();
        let mut secrets: Vec<String> = plans
            .iter()
            .flat_map(|plan| plan_secrets(provider, plan))
            .collect();
        secrets.sort_by_key(|text| std::cmp::Reverse(text.len()));
        secrets.dedup();
        let text = self.json_call(
            provider,
            Action::Set,
            json::set_request(&updates, noop),
            secrets.clone(),
        )?;
        let report = json::parse_set(&text)
            .map_err(|e| output_error(&label, Action::Set, redacted(e, &secrets)))?;
        // Side effects: resources the answer names that were not asked for.
        for entry in &report.entries {
            if plans.iter().any(|plan| plan.name == entry.name) {
                continue;
            }
            match &entry.body {
                Ok(changes) => log::info!(
                    "{label}: set also changed '{}' ({})",
                    escape(&entry.name),
                    changes
                        .iter()
                        .map(|c| escape(&c.attr))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                Err(error) => log::warn!(
                    "{label}: set reported an error for '{}', which was not asked for: {}",
                    escape(&entry.name),
                    escape_lines(&crate::process::redact(&error.to_string(), &secrets))
                ),
            }
        }
        Ok(plans
            .iter()
            .map(|plan| {
                let mine: Vec<_> = report
                    .entries
                    .iter()
                    .filter(|e| e.name == plan.name)
                    .collect();
                let mut changes = Vec::new();
                for entry in &mine {
                    let reported = entry.body.as_ref().map_err(|error| Error::Reported {
                        provider: label.clone(),
                        action: Action::Set.as_str().to_owned(),
                        message: escape_lines(&crate::process::redact(
                            &format!("'{}': {}", plan.name, error.message),
                            &secrets,
                        )),
                        kind: Some(escape(&error.kind)),
                    })?;
                    for change in reported {
                        let value = |json: &Json| {
                            self.check.value(
                                provider,
                                Action::Set,
                                &plan.name,
                                &change.attr,
                                Raw::Json(json),
                            )
                        };
                        changes.push(Change {
                            attr: change.attr.clone(),
                            is: value(&change.is)?,
                            was: if change.was.is_null() {
                                None
                            } else {
                                Some(value(&change.was)?)
                            },
                        });
                    }
                }
                Ok(UpdateAnswer {
                    changes,
                    derive: report.derive && mine.is_empty(),
                })
            })
            .collect())
    }
}

/// A resource as the JSON object get would have reported.
fn json_object(resource: &Resource) -> Map<String, Json> {
    let mut map = Map::new();
    map.insert("name".to_owned(), Json::from(resource.name.as_str()));
    for (key, value) in &resource.attrs {
        map.insert(key.clone(), Json::from(value));
    }
    map
}
