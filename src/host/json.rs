//! The host's side of the json calling convention: get for list and find,
//! set for batches of updates.

use serde_json::{Map, Value as Json};

use super::{output_error, redacted, secrets_of, Host, Invocation, UpdateAnswer};
use crate::check::Raw;
use crate::error::{Error, Result};
use crate::invoke::json::{self, GetEntry, SetUpdate, MAX_DOCUMENT};
use crate::metadata::Action;
use crate::process::Budget;
use crate::provider::Provider;
use crate::resource::{Change, Resource};
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
            ..Invocation::plain(action, vec![format!("ral_action={action}")])
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
                    "{}: get reported an error for '{}': {error}",
                    provider.qualified_name(),
                    crate::text::escape(&entry.name)
                ),
            }
        }
        Ok(())
    }

    pub(super) fn json_find(&self, provider: &Provider, name: &str) -> Result<Option<Resource>> {
        // The provider may answer with more than was asked; the host filters.
        let Some(entry) = self
            .json_get(provider, &[name])?
            .into_iter()
            .find(|entry| entry.name == name)
        else {
            return Ok(None);
        };
        match entry.body {
            Ok(attrs) => self.json_resource(provider, name, &attrs).map(Some),
            Err(error) if error.kind == "unknown" => Ok(None),
            Err(error) => Err(Error::Reported {
                provider: provider.qualified_name(),
                action: Action::Get.as_str().to_owned(),
                message: error.to_string(),
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
        let secrets: Vec<String> = plans
            .iter()
            .flat_map(|plan| secrets_of(provider, &plan.should))
            .collect();
        let text = self.json_call(
            provider,
            Action::Set,
            json::set_request(&updates, noop),
            secrets.clone(),
        )?;
        let report = json::parse_set(&text)
            .map_err(|e| output_error(&label, Action::Set, redacted(e, &secrets)))?;
        for entry in &report.entries {
            if !plans.iter().any(|plan| plan.name == entry.name) {
                log::info!(
                    "{label}: set also changed '{}', which was not asked for",
                    crate::text::escape(&entry.name)
                );
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
                        message: crate::process::redact(
                            &format!("'{}': {error}", plan.name),
                            &secrets,
                        ),
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
