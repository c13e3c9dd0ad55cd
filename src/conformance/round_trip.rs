//! The round trip of `ral check`, for a provider that can create and
//! delete resources: create one (a copy of a listed resource's required
//! attributes), find it, change it, find it, delete it, find it, on the
//! temporary root (when nothing is listed, the resource copied is first
//! made from the metadata: `make_up`), checking at each step that what
//! was asked was done and what was reported is true. The change sets each
//! read-write attribute it can make a value for, arrays and hashes too,
//! one update each, and reads it back. Then names built from characters that
//! shells and regular expressions treat specially, and a value holding a
//! line break: each must come back exactly, or be refused; it must never
//! split a line or reach another resource.

use super::checker::{differences, steady, Checker};
use crate::error::Error;
use crate::metadata::Kind;
use crate::provider::Provider;
use crate::resource::Resource;
use crate::types::{AttrType, Value};
use crate::update::{self, Request, Transition};

/// The name of the resource the round trip creates (its last path
/// component, for providers whose names are paths).
const NEW: &str = "ralcheck1";
/// The name of the resource made from the metadata when nothing is
/// listed (below `/` for providers whose names are paths).
pub(super) const MADE: &str = "ralcheck0";
/// A value made up for a required attribute, when its type takes it.
const MADE_VALUE: &str = "ral-check";
/// A name made of characters shells and regular expressions treat
/// specially.
const AWKWARD: &str = "ral check.*[x]$(y)";
/// A new value for a string attribute.
const CHANGED: &str = "ral-check-changed";
/// A value with a line break.
const TWO_LINES: &str = "ral\ncheck";

const HINT_APPLIED: &str = "apply every attribute you are asked to set, and report exactly that";
const HINT_NAMES: &str =
    "compare names as plain strings (never as patterns or shell words), or refuse a name you cannot store with ral_error";
const HINT_VALUES: &str =
    "store a value exactly, or refuse one you cannot with ral_error (one line of the file per resource)";

impl Checker<'_> {
    fn note(&mut self, done: String) {
        self.report.round_trip.push(done);
    }

    /// The round trip, copying `template` (a resource that exists), for a
    /// provider whose resources can be absent.
    pub(super) fn check_round_trip(&mut self, provider: &Provider, template: &Resource) {
        self.check_lookalikes(provider, template);
        let name = sibling(&template.name, NEW);
        if !self.create(provider, template, &name) {
            return;
        }
        self.change(provider, template, &name);
        self.check_two_lines(provider, &name);
        self.delete(provider, &name);
        self.check_awkward_name(provider, template);
    }

    /// Creates a resource from the metadata alone (a name of its own, an
    /// ensure that is not absent, a value for each required attribute) for
    /// the checks to work on when nothing is listed, and returns it as
    /// find reports it; or says why it could not.
    pub(super) fn make_up(&mut self, provider: &Provider) -> Result<Resource, String> {
        let name = made_name(provider)?;
        let attrs = made_attrs(provider)?;
        self.create_made(provider, &name, &attrs)?;
        let keys: Vec<&str> = attrs.iter().map(|(k, _)| k.as_str()).collect();
        self.note(format!(
            "nothing listed: created '{name}' from the metadata ({})",
            keys.join(", ")
        ));
        self.expect_found(provider, &name, &attrs, "created");
        let Some(made) = self.found(provider, &name) else {
            return Err(format!(
                "find does not report '{name}', created from the metadata"
            ));
        };
        self.compare_with_list(provider, &name, &made);
        Ok(made)
    }

    /// Creates the made-up resource; a failure that is no refusal is a
    /// finding.
    fn create_made(
        &mut self,
        provider: &Provider,
        name: &str,
        attrs: &[(String, Value)],
    ) -> Result<(), String> {
        match self.try_apply(provider, name, attrs.to_vec()) {
            Ok(()) => Ok(()),
            Err(e) if refused(&e) => Err(format!(
                "creating '{name}' from the metadata was refused: {e}"
            )),
            Err(e) => {
                self.find(
                    "round trip",
                    format!("create '{name}': {e}"),
                    "update must succeed or refuse with ral_error",
                );
                Err(format!(
                    "creating '{name}' from the metadata failed (see below)"
                ))
            }
        }
    }

    /// list and find must agree on the made-up resource too, if list
    /// shows it at all.
    fn compare_with_list(&mut self, provider: &Provider, name: &str, made: &Resource) {
        match self
            .list_quietly(provider)
            .and_then(|listed| listed.into_iter().find(|r| r.name == name))
        {
            Some(listed) if steady(provider, &listed) == steady(provider, made) => {}
            Some(listed) => self.find(
                "find",
                format!(
                    "find '{name}' disagrees with list: {}",
                    differences(provider, &listed, made)
                ),
                "find NAME must report exactly what list reports for NAME",
            ),
            None => self.note("list does not report it".to_owned()),
        }
    }

    /// Creates `name` as a copy of the template (its ensure and settable
    /// attributes), or failing that with only its required ones; false
    /// when both were refused (nothing more to check then).
    fn create(&mut self, provider: &Provider, template: &Resource, name: &str) -> bool {
        let full = creation(provider, template, |kind| {
            matches!(kind, Kind::ReadWrite | Kind::InitOnly)
        });
        let minimal = creation(provider, template, |_| false);
        let mut refusals = Vec::new();
        for attrs in [full, minimal].into_iter().flatten() {
            let keys: Vec<String> = attrs.iter().map(|(k, _)| k.clone()).collect();
            match self.try_apply(provider, name, attrs.clone()) {
                Ok(()) => {
                    self.note(format!("created '{name}' ({})", keys.join(", ")));
                    self.expect_found(provider, name, &attrs, "created");
                    return true;
                }
                Err(e) if refused(&e) => {
                    let said = e.to_string();
                    if !refusals.contains(&said) {
                        self.note(format!(
                            "create '{name}' ({}) refused: {said}",
                            keys.join(", ")
                        ));
                        refusals.push(said);
                    } else {
                        self.note(format!("create '{name}' ({}) refused too", keys.join(", ")));
                    }
                    continue;
                }
                Err(e) => {
                    self.find(
                        "round trip",
                        format!("create '{name}': {e}"),
                        "update must succeed or refuse with ral_error",
                    );
                    return false;
                }
            }
        }
        // Nothing to change, read back or delete: said, never passed over.
        self.report.not_run.push(super::NotRun {
            checks: vec!["round trip"],
            why: format!(
                "the provider refused to create '{name}' as a copy of '{}'",
                template.name
            ),
            hint: Some(
                "a provider that cannot create what ral check makes up (a package no source \
                 offers, a service without its script) can still be checked by the rest",
            ),
        });
        false
    }

    /// Sets the read-write attributes whose values differ from the
    /// template's to the template's values, all in one update; then each
    /// other read-write attribute, one update each, to a value made up
    /// for its type (arrays and hashes too). Each change must be read
    /// back; an attribute no value can be made up for is named.
    fn change(&mut self, provider: &Provider, template: &Resource, name: &str) {
        let Some(current) = self.found(provider, name) else {
            return;
        };
        let settable = |a: &&crate::metadata::Attribute| {
            a.name != "name" && a.name != "ensure" && a.kind == Kind::ReadWrite
        };
        let copied: Vec<(String, Value)> = template
            .attrs
            .iter()
            .filter(|(key, value)| {
                provider.attribute(key).as_ref().is_some_and(settable)
                    && current.attrs.get(*key) != Some(value)
            })
            .map(|(key, value)| (key.clone(), value.clone()))
            .collect();
        if !copied.is_empty()
            && self.apply(provider, name, copied.clone(), "change")
            && self.expect_found(provider, name, &copied, "changed")
        {
            let keys: Vec<&str> = copied.iter().map(|(k, _)| k.as_str()).collect();
            self.note(format!("changed {}", keys.join(", ")));
        }
        let others: Vec<&crate::metadata::Attribute> = provider
            .meta
            .attributes
            .values()
            .filter(settable)
            .filter(|a| !copied.iter().any(|(key, _)| *key == a.name))
            .collect();
        let mut skipped = Vec::new();
        for attribute in others {
            let now = current.attrs.get(&attribute.name);
            let value = match other_value(&attribute.attr_type, now) {
                _ if attribute.sensitive => {
                    skipped.push(format!("{} (sensitive: not read back)", attribute.name));
                    continue;
                }
                Some(value) => value,
                None => {
                    skipped.push(format!(
                        "{} (no other value of {} to make up)",
                        attribute.name, attribute.attr_type
                    ));
                    continue;
                }
            };
            let attrs = vec![(attribute.name.clone(), value)];
            let what = format!("change of {} of", attribute.name);
            if self.apply(provider, name, attrs.clone(), &what)
                && self.expect_found(provider, name, &attrs, "changed")
            {
                self.note(format!("changed {}", attribute.name));
            }
        }
        if !skipped.is_empty() {
            self.note(format!("not changed: {}", skipped.join(", ")));
        }
    }

    /// A string attribute set to two lines must come back as two lines of
    /// one value, and the listing must not grow.
    fn check_two_lines(&mut self, provider: &Provider, name: &str) {
        let Some(attribute) = provider.meta.attributes.values().find(|a| {
            a.name != "name"
                && a.kind == Kind::ReadWrite
                && !a.sensitive
                && a.attr_type == AttrType::String
        }) else {
            return;
        };
        let before = self.list_quietly(provider);
        let value = Value::String(TWO_LINES.to_owned());
        let attrs = vec![(attribute.name.clone(), value)];
        if !self.apply(provider, name, attrs.clone(), "two lines") {
            return;
        }
        self.note(format!("stored two lines in {}", attribute.name));
        self.expect_found(provider, name, &attrs, "set to two lines");
        let after = self.list_quietly(provider);
        if let (Some(before), Some(after)) = (before, after) {
            if after.len() != before.len() {
                self.find(
                    "round trip",
                    format!(
                        "setting {} of '{name}' to a value with a line break changed the \
                         listing from {} to {} resources",
                        attribute.name,
                        before.len(),
                        after.len()
                    ),
                    HINT_VALUES,
                );
            }
        }
    }

    /// Deletes `name`; find must not report it any more.
    pub(super) fn delete(&mut self, provider: &Provider, name: &str) {
        let attrs = vec![("ensure".to_owned(), Value::String("absent".to_owned()))];
        if !self.apply(provider, name, attrs, "delete") {
            return;
        }
        self.note(format!("deleted '{name}'"));
        if self.found(provider, name).is_some() {
            self.find(
                "round trip",
                format!("'{name}' was deleted, but find still reports it"),
                HINT_APPLIED,
            );
        }
    }

    /// Names that a pattern or a shell word would read as the template's
    /// name: find must not report the template under them, and deleting
    /// them must leave it alone.
    fn check_lookalikes(&mut self, provider: &Provider, template: &Resource) {
        let last = last_component(&template.name);
        let chars: Vec<char> = last.chars().collect();
        if chars.len() < 2 {
            return;
        }
        let dotted: String = chars[..1]
            .iter()
            .chain(['.'].iter())
            .chain(&chars[2..])
            .collect();
        let starred = format!("{}.*", chars[0]);
        for lookalike in [dotted, starred] {
            let name = sibling(&template.name, &lookalike);
            if name == template.name {
                continue;
            }
            if let Some(found) = self.found(provider, &name) {
                if found.attrs == template.attrs {
                    self.find(
                        "round trip",
                        format!(
                            "find '{name}' reports the resource '{}': the name was matched as a pattern",
                            template.name
                        ),
                        HINT_NAMES,
                    );
                }
            }
            // Straight to the provider: ralsh would not call it for a name
            // find does not know. Refused or done, the template must stay.
            let mut state = Resource::bare(&name);
            state.attrs.extend(
                template
                    .attrs
                    .get("ensure")
                    .map(|e| ("ensure".to_owned(), e.clone())),
            );
            let plan = Transition {
                name: name.clone(),
                found: true,
                state,
                should: vec![("ensure".to_owned(), Value::String("absent".to_owned()))],
            };
            let _ = self.step("round trip", |host| {
                host.set_many(provider, &[plan.as_update()], false)
            });
            if self.found(provider, &template.name).as_ref() != Some(template) {
                self.find(
                    "round trip",
                    format!("deleting '{name}' changed or deleted '{}'", template.name),
                    HINT_NAMES,
                );
                return;
            }
        }
    }

    /// A resource named with spaces, dots, stars, brackets, dollars and
    /// parentheses: created, found under exactly that name, and deleted,
    /// with every other resource untouched, or refused.
    fn check_awkward_name(&mut self, provider: &Provider, template: &Resource) {
        let name = sibling(&template.name, AWKWARD);
        let Some(before) = self.list_quietly(provider) else {
            return;
        };
        let Some(attrs) = creation(provider, template, |_| false) else {
            return;
        };
        match self.try_apply(provider, &name, attrs) {
            Ok(()) => self.note(format!("created and deleted '{name}'")),
            Err(e) if refused(&e) => {
                self.note(format!("'{name}' refused"));
                return;
            }
            Err(e) => {
                self.find("round trip", e.to_string(), HINT_NAMES);
                return;
            }
        }
        let Some(after) = self.list_quietly(provider) else {
            return;
        };
        if before.is_empty() && after.is_empty() {
            // A provider that lists nothing (file's listing is empty by
            // design) is asked with find instead.
            self.check_awkward_name_by_find(provider, template, &name);
            return;
        }
        let named: Vec<&Resource> = after.iter().filter(|r| r.name == name).collect();
        let others_kept = before.iter().all(|old| after.iter().any(|new| new == old));
        if named.len() != 1 || after.len() != before.len() + 1 || !others_kept {
            self.find(
                "round trip",
                format!(
                    "creating '{name}' listed it {} time(s) and changed the listing from {} to \
                     {} resources{}",
                    named.len(),
                    before.len(),
                    after.len(),
                    if others_kept { "" } else { ", changing others" }
                ),
                HINT_NAMES,
            );
        }
        let gone = vec![("ensure".to_owned(), Value::String("absent".to_owned()))];
        if self.apply(provider, &name, gone, "delete")
            && self.list_quietly(provider).as_ref() != Some(&before)
        {
            self.find(
                "round trip",
                format!(
                    "after deleting '{name}' the listing is not what it was before it was created"
                ),
                HINT_NAMES,
            );
        }
    }

    /// The awkward name created, checked without a listing: find reports
    /// it under exactly that name, and the template stays as it was, both
    /// while it exists and once it is deleted.
    fn check_awkward_name_by_find(&mut self, provider: &Provider, template: &Resource, name: &str) {
        if self.found(provider, name).is_none() {
            self.find(
                "round trip",
                format!("'{name}' was created, but find does not report it"),
                HINT_NAMES,
            );
        }
        let gone = vec![("ensure".to_owned(), Value::String("absent".to_owned()))];
        let deleted = self.apply(provider, name, gone, "delete");
        if deleted && self.found(provider, name).is_some() {
            self.find(
                "round trip",
                format!("'{name}' was deleted, but find still reports it"),
                HINT_NAMES,
            );
        }
        if self.found(provider, &template.name).as_ref() != Some(template) {
            self.find(
                "round trip",
                format!(
                    "creating and deleting '{name}' changed or deleted '{}'",
                    template.name
                ),
                HINT_NAMES,
            );
        }
    }

    /// Runs an update as ralsh would (find, plan, update, answer checks);
    /// false when it failed. A refusal by the provider (ral_error, or a
    /// value ral refuses before calling it) is no finding.
    fn apply(
        &mut self,
        provider: &Provider,
        name: &str,
        attrs: Vec<(String, Value)>,
        what: &str,
    ) -> bool {
        match self.try_apply(provider, name, attrs) {
            Ok(()) => true,
            Err(e) if refused(&e) => {
                self.note(format!("{what} '{name}' refused: {e}"));
                false
            }
            Err(e) => {
                self.find(
                    "round trip",
                    format!("{what} '{name}': {e}"),
                    "update must succeed or refuse with ral_error",
                );
                false
            }
        }
    }

    fn try_apply(
        &mut self,
        provider: &Provider,
        name: &str,
        attrs: Vec<(String, Value)>,
    ) -> crate::error::Result<()> {
        let request = Request {
            name: name.to_owned(),
            attrs,
        };
        self.step("round trip", |host| {
            update::apply(host, provider, &request, false)
        })
        .map(|_| ())
    }

    /// What find reports for `name`, when it reports a resource that is
    /// not absent.
    fn found(&mut self, provider: &Provider, name: &str) -> Option<Resource> {
        self.step("round trip", |host| host.find(provider, name))
            .ok()
            .flatten()
            .filter(|found| !found.is_absent())
    }

    /// Find must report `name` with every value of `attrs`: false (and a
    /// finding) when it does not.
    fn expect_found(
        &mut self,
        provider: &Provider,
        name: &str,
        attrs: &[(String, Value)],
        done: &str,
    ) -> bool {
        let Some(found) = self.found(provider, name) else {
            self.find(
                "round trip",
                format!("'{name}' was {done}, but find does not report it"),
                HINT_APPLIED,
            );
            return false;
        };
        let mut all = true;
        for (key, value) in attrs {
            let Some(attribute) = provider.attribute(key) else {
                continue;
            };
            if attribute.kind == Kind::Write
                || found.attrs.get(key) == Some(value)
                || update::present_met(key, value, found.attrs.get(key))
                || crate::withheld::met(provider, key, value, &found)
            {
                continue;
            }
            all = false;
            let now = found
                .attrs
                .get(key)
                .map_or("nothing".to_owned(), |v| attribute.show(v));
            self.find(
                "round trip",
                format!(
                    "'{name}' was {done} with {key} {}, but find reports {now}",
                    attribute.show(value)
                ),
                if value.as_str() == Some(TWO_LINES) {
                    HINT_VALUES
                } else {
                    HINT_APPLIED
                },
            );
        }
        all
    }
}

/// The attributes that create a copy of `template`: its ensure, every
/// required attribute, and those of the kinds `copied` picks; `None` when
/// the template lacks a required one.
fn creation(
    provider: &Provider,
    template: &Resource,
    copied: impl Fn(Kind) -> bool,
) -> Option<Vec<(String, Value)>> {
    let mut attrs: Vec<(String, Value)> = Vec::new();
    if let Some(ensure) = template.attrs.get("ensure") {
        attrs.push(("ensure".to_owned(), ensure.clone()));
    }
    for attribute in provider.meta.attributes.values() {
        if attribute.name == "name" || attribute.name == "ensure" {
            continue;
        }
        let value = template.attrs.get(&attribute.name);
        if attribute.required || (copied(attribute.kind) && value.is_some()) {
            attrs.push((attribute.name.clone(), value?.clone()));
        }
    }
    Some(attrs)
}

/// A value of type `attr_type` for an attribute the metadata requires,
/// when one can be made up: a word, 1, true, an enum's first member, an
/// array of one; none for a hash or a pattern that takes none of those.
pub(super) fn made_value(attr_type: &AttrType) -> Option<Value> {
    match attr_type {
        AttrType::Enum(values) => values
            .iter()
            .find(|v| *v != "absent")
            .map(|v| Value::String(v.clone())),
        AttrType::Array(inner) => Some(Value::Array(vec![made_value(inner)?])),
        AttrType::Optional(inner) => made_value(inner),
        AttrType::Variant(types) => types.iter().find_map(made_value),
        AttrType::Hash | AttrType::Data => None,
        AttrType::Integer(Some((min, max))) => Some(Value::Integer(1.clamp(*min, *max))),
        _ => [MADE_VALUE, "1", "true"]
            .into_iter()
            .find_map(|text| attr_type.parse_cli(text).ok()),
    }
}

/// A value of type `attr_type` other than `now`, when one can be made
/// up: a boolean flipped, another enum member, a new word, another number,
/// an array of one other element, a hash of one entry.
pub(super) fn other_value(attr_type: &AttrType, now: Option<&Value>) -> Option<Value> {
    let differs = |value: &Value| Some(value) != now;
    match attr_type {
        AttrType::Boolean => Some(Value::Bool(!matches!(now, Some(Value::Bool(true))))),
        AttrType::Enum(values) => values
            .iter()
            .map(|v| Value::String(v.clone()))
            .find(|v| v.as_str() != Some("absent") && differs(v)),
        AttrType::Integer(range) => {
            let (min, max) = range.unwrap_or((i64::MIN, i64::MAX));
            [1, 2, min, max]
                .into_iter()
                .map(|n| Value::Integer(n.clamp(min, max)))
                .find(differs)
        }
        AttrType::Float => [1.5, 2.5].into_iter().map(Value::Float).find(differs),
        AttrType::Array(inner) => {
            let first = match now {
                Some(Value::Array(items)) => items.first(),
                _ => None,
            };
            let one = Value::Array(vec![other_value(inner, first)?]);
            differs(&one).then_some(one)
        }
        AttrType::Hash => {
            let taken = matches!(now, Some(Value::Hash(h)) if h.contains_key(MADE_VALUE));
            let key = if taken { CHANGED } else { MADE_VALUE };
            let entry = (key.to_owned(), Value::String(CHANGED.to_owned()));
            Some(Value::Hash(Box::new([entry].into_iter().collect())))
        }
        AttrType::Optional(inner) => other_value(inner, now),
        AttrType::Variant(types) => types.iter().find_map(|t| other_value(t, now)),
        // Words, numbers, and the file modes patterns often stand for.
        AttrType::String | AttrType::Pattern(_) | AttrType::Data => {
            [CHANGED, MADE_VALUE, "1", "true", "0600", "0644"]
                .into_iter()
                .filter_map(|text| attr_type.parse_cli(text).ok())
                .find(differs)
        }
    }
}

/// Whether an update failed because the provider (or ral, before calling
/// it) refused the request, rather than by breaking the convention.
fn refused(error: &Error) -> bool {
    matches!(error, Error::Reported { .. } | Error::Request { .. })
}

/// `name` with its last path component replaced by `last` (the whole
/// name, when it is not a path).
fn sibling(name: &str, last: &str) -> String {
    match name.rfind('/') {
        Some(at) => format!("{}{last}", &name[..=at]),
        None => last.to_owned(),
    }
}

fn last_component(name: &str) -> &str {
    name.rsplit('/').next().unwrap_or(name)
}

/// The name of the resource made up from the metadata, if its type takes
/// it.
fn made_name(provider: &Provider) -> Result<String, String> {
    let name = if provider.meta.names_are_paths {
        format!("/{MADE}")
    } else {
        MADE.to_owned()
    };
    if let Some(named) = provider.attribute("name") {
        if !named.attr_type.accepts_text(&name) {
            return Err(format!(
                "the name '{name}' does not fit its type {}",
                named.attr_type
            ));
        }
    }
    Ok(name)
}

/// The attributes of the resource made up from the metadata: an ensure
/// that is not absent, and a value for each required attribute.
fn made_attrs(provider: &Provider) -> Result<Vec<(String, Value)>, String> {
    let mut attrs: Vec<(String, Value)> = Vec::new();
    if let Some(ensure) = provider.attribute("ensure") {
        let value = match &ensure.attr_type {
            t if t.accepts_text("present") => Some("present".to_owned()),
            AttrType::Enum(values) => values.iter().find(|v| *v != "absent").cloned(),
            _ => None,
        }
        .ok_or_else(|| {
            format!(
                "no ensure but absent can be made up for {}",
                ensure.attr_type
            )
        })?;
        attrs.push(("ensure".to_owned(), Value::String(value)));
    }
    for attribute in provider.meta.attributes.values() {
        if !attribute.required || attribute.name == "name" || attribute.name == "ensure" {
            continue;
        }
        let value = attribute
            .default
            .clone()
            .or_else(|| made_value(&attribute.attr_type))
            .ok_or_else(|| {
                format!(
                    "no value can be made up for its required attribute '{}' ({})",
                    attribute.name, attribute.attr_type
                )
            })?;
        attrs.push((attribute.name.clone(), value));
    }
    Ok(attrs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn siblings_keep_the_directory_of_path_names() {
        assert_eq!(sibling("/etc/motd", NEW), "/etc/ralcheck1");
        assert_eq!(sibling("/srv", NEW), "/ralcheck1");
        assert_eq!(sibling("alice", NEW), "ralcheck1");
        assert_eq!(last_component("/etc/motd"), "motd");
    }

    #[test]
    fn values_are_made_up_only_where_the_type_takes_one() {
        let made = |text: &str| made_value(&AttrType::parse(text).unwrap());
        let word = || Value::String(MADE_VALUE.to_owned());
        assert_eq!(made("string"), Some(word()));
        assert_eq!(made("enum[absent, present]"), Some(Value::from("present")));
        assert_eq!(made("integer[0, 9]"), Some(Value::Integer(1)));
        assert_eq!(made("integer[1000, 2000]"), Some(Value::Integer(1000)));
        assert_eq!(made("boolean"), Some(Value::Bool(true)));
        assert_eq!(made("array[string]"), Some(Value::Array(vec![word()])));
        assert_eq!(made("optional[string]"), Some(word()));
        assert_eq!(made("variant[hash, integer]"), Some(Value::Integer(1)));
        assert_eq!(made("pattern[/^[a-z-]+$/]"), Some(word()));
        assert_eq!(made("pattern[/^[0-7]{3,4}$/]"), None);
        assert_eq!(made("hash"), None);
    }

    #[test]
    fn another_value_differs_from_the_current_one_for_every_type_it_can() {
        let other = |text: &str, now: Option<Value>| {
            other_value(&AttrType::parse(text).unwrap(), now.as_ref())
        };
        let word = |w: &str| Value::String(w.to_owned());
        assert_eq!(
            other("boolean", Some(Value::Bool(true))),
            Some(Value::Bool(false))
        );
        assert_eq!(other("boolean", None), Some(Value::Bool(true)));
        assert_eq!(
            other("enum[absent, present, latest]", Some(word("present"))),
            Some(word("latest"))
        );
        assert_eq!(
            other("integer[1, 9]", Some(Value::Integer(1))),
            Some(Value::Integer(2))
        );
        assert_eq!(other("integer[5, 5]", Some(Value::Integer(5))), None);
        assert_eq!(other("string", Some(word(CHANGED))), Some(word(MADE_VALUE)));
        assert_eq!(
            other("array[string]", Some(Value::Array(vec![word("root")]))),
            Some(Value::Array(vec![word(CHANGED)]))
        );
        assert_eq!(
            other("array[string]", Some(Value::Array(vec![word(CHANGED)]))),
            Some(Value::Array(vec![word(MADE_VALUE)]))
        );
        let hash = other("hash", None).unwrap();
        assert_eq!(
            other("hash", Some(hash.clone())).map(|h| h == hash),
            Some(false)
        );
        assert_eq!(
            other("pattern[/^[0-7]{4}$/]", Some(word("0644"))),
            Some(word("0600"))
        );
        assert_eq!(
            other("pattern[/^[0-7]{4}$/]", Some(word("0600"))),
            Some(word("0644"))
        );
        assert_eq!(other("pattern[/^[a-f]{8}$/]", None), None);
        assert_eq!(
            other("optional[boolean]", Some(Value::Null)),
            Some(Value::Bool(true))
        );
    }
}
