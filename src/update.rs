//! Changing a resource: check the request, find the current state, update
//! only what differs, and report the result and each change.
//!
//! Under noop nothing may change. A provider that declares `supports_noop`
//! is called with `ral_noop=true` and reports what it would do; any other
//! provider is not called at all, and the would-be changes are derived from
//! the current state and the request.

use crate::error::{Error, Result};
use crate::host::{check_name, Host};
use crate::invoke::{Update, UpdateAnswer};
use crate::metadata::{self, Attribute, Kind};
use crate::provider::Provider;
use crate::resource::{Change, Resource};
use crate::secrets::REDACTED;
use crate::text::escape;
use crate::types::{Mismatch, Value, Written};
use crate::withheld;

/// A checked change request: typed values for declared, settable attributes.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    pub name: String,
    pub attrs: Vec<(String, Value)>,
}

/// The result of an update (or of a preview, when `noop` is set).
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// The resource after the change: found state plus the changes.
    pub resource: Resource,
    pub changes: Vec<Change>,
    pub noop: bool,
}

/// The metaparameters of a manifest's resource: they order resources (and
/// `notify`, `subscribe` refresh them) and are not attributes.
pub const METAPARAMETERS: [&str; 4] = ["require", "before", "notify", "subscribe"];

/// Where a request was written, for the words of its problems.
#[derive(Debug, Clone, Copy)]
pub enum WrittenIn<'a> {
    /// `ralsh TYPE NAME attr=value...`
    CommandLine,
    /// A manifest, which takes `also` (its metaparameters) besides the
    /// provider's attributes: they are suggested for a mistyped name too.
    Manifest { also: &'a [&'a str] },
}

/// One problem of a request.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestProblem {
    /// The attribute it is about, by its index among those given; `None`
    /// for the name.
    pub attr: Option<usize>,
    pub message: String,
}

impl Request {
    /// Checks a name and attributes as written against the provider's
    /// metadata, the one check of every request: the name is valid, each
    /// attribute is declared, settable and given once, and each value
    /// converts to its type. Every problem is reported.
    pub fn check(
        provider: &Provider,
        name: &str,
        attrs: &[(&str, &Written)],
        written_in: WrittenIn,
    ) -> std::result::Result<Request, Vec<RequestProblem>> {
        let mut problems = Vec::new();
        if let Err(message) = check_name(name) {
            problems.push(RequestProblem {
                attr: None,
                message: message.to_string(),
            });
        }
        let also = match written_in {
            WrittenIn::CommandLine => &[][..],
            WrittenIn::Manifest { also } => also,
        };
        let mut checked: Vec<(String, Value)> = Vec::new();
        for (at, &(key, written)) in attrs.iter().enumerate() {
            let mut problem = |message: String| {
                problems.push(RequestProblem {
                    attr: Some(at),
                    message,
                })
            };
            if key == "name" {
                problem(
                    match written_in {
                        WrittenIn::CommandLine => {
                            "'name=' is not allowed: the name is the argument after the type"
                        }
                        WrittenIn::Manifest { .. } => {
                            "'name' is not an attribute here: the name is the key above the \
                         attributes"
                        }
                    }
                    .to_owned(),
                );
                continue;
            }
            if provider.meta.runs_commands && key == metadata::RUN {
                problem(format!(
                    "'{key}' is not written: it is read, as '{}' when the command has nothing \
                     to do and as why it would run otherwise, and every request asks for '{}'",
                    metadata::RUN_DONE,
                    metadata::RUN_DONE
                ));
                continue;
            }
            let attribute = match settable_attribute_or(provider, key, also) {
                Ok(attribute) => attribute,
                Err(message) => {
                    problem(message);
                    continue;
                }
            };
            match attribute.attr_type.convert_written(written) {
                Err(reason) => problem(invalid_value(attribute, &written.shown(), &reason)),
                Ok(_) if checked.iter().any(|(k, _)| k == key) => {
                    problem(format!("attribute '{key}' is given twice"))
                }
                Ok(value) => checked.push((key.to_owned(), value)),
            }
        }
        // A command is asked to have nothing left to run: its need to run
        // is then the one difference a plan sees.
        if provider.meta.runs_commands {
            checked.push((
                metadata::RUN.to_owned(),
                Value::String(metadata::RUN_DONE.to_owned()),
            ));
        }
        match problems.is_empty() {
            true => Ok(Request {
                name: name.to_owned(),
                attrs: checked,
            }),
            false => Err(problems),
        }
    }

    /// Checks `attr=value` arguments against the provider's metadata
    /// ([`Request::check`]), failing at the first problem. Nothing runs
    /// when this fails.
    pub fn parse(provider: &Provider, name: &str, args: &[String]) -> Result<Request> {
        let reject = |message: String| Error::Request {
            provider: provider.qualified_name(),
            message,
        };
        let update = provider.meta.update_action();
        if !provider.meta.supports(update) {
            return Err(Error::Unsupported {
                provider: provider.qualified_name(),
                action: update.as_str().to_owned(),
            });
        }
        check_name(name).map_err(|bad| reject(bad.to_string()))?;
        let mut written = Vec::new();
        for arg in args {
            let Some((key, text)) = arg.split_once('=') else {
                return Err(reject(format!(
                    "argument '{}' is not of the form attribute=value",
                    escape(arg)
                )));
            };
            // A `data` value on the command line is a JSON array or object
            // when it reads as one (docs/cli.md), else text.
            let is_data = provider
                .attribute(key)
                .is_some_and(|a| a.attr_type == crate::types::AttrType::Data);
            let json = match is_data && text.trim_start().starts_with(['[', '{']) {
                true => serde_json::from_str::<serde_json::Value>(text).ok(),
                false => None,
            };
            written.push((
                key,
                json.as_ref()
                    .map_or_else(|| Written::Text(text.to_owned()), Written::from_json),
            ));
        }
        let attrs: Vec<(&str, &Written)> = written.iter().map(|(k, v)| (*k, v)).collect();
        Request::check(provider, name, &attrs, WrittenIn::CommandLine).map_err(|problems| {
            let first = problems.into_iter().next().expect("a problem");
            reject(first.message)
        })
    }

    /// Whether it asks for the resource to be removed (`ensure: absent`).
    pub fn wants_absent(&self) -> bool {
        self.attrs
            .iter()
            .any(|(k, v)| k == "ensure" && v.as_str() == Some("absent"))
    }
}

/// The declared attribute `key`, if a request may set it; else why not,
/// naming those it may set. `also` are names the caller takes besides the
/// provider's (a manifest's `require` and `before`): they are suggested for
/// a mistyped name too.
fn settable_attribute_or<'p>(
    provider: &'p Provider,
    key: &str,
    also: &[&str],
) -> std::result::Result<&'p Attribute, String> {
    let settable = || {
        let names: Vec<&str> = provider
            .meta
            .attributes
            .values()
            .filter(|a| a.name != "name" && a.kind != Kind::Read)
            .map(|a| a.name.as_str())
            .collect();
        if names.is_empty() {
            "(none)".to_owned()
        } else {
            names.join(", ")
        }
    };
    match provider.attribute(key) {
        None => Err(format!(
            "unknown attribute '{}'{}; settable attributes: {}",
            escape(key),
            crate::suggest::did_you_mean(
                key,
                (provider.meta.attributes.keys().map(String::as_str)).chain(also.iter().copied())
            ),
            settable()
        )),
        Some(attribute) if attribute.kind == Kind::Read => Err(format!(
            "attribute '{key}' is read-only; settable attributes: {}",
            settable()
        )),
        Some(attribute) => Ok(attribute),
    }
}

/// Why a value does not fit `attribute`: `shown` is the value as the
/// message quotes it, left out (with the reason, which may quote it) for a
/// sensitive attribute.
fn invalid_value(attribute: &Attribute, shown: &str, reason: &Mismatch) -> String {
    let key = &attribute.name;
    if attribute.sensitive {
        format!(
            "invalid value {REDACTED} for sensitive attribute '{key}': expected {}",
            attribute.attr_type
        )
    } else {
        format!(
            "invalid value {shown} for attribute '{key}' of type {}: {reason}",
            attribute.attr_type
        )
    }
}

/// What must happen to one resource, worked out before anything changes.
#[derive(Debug, Clone, PartialEq)]
pub struct Transition {
    pub name: String,
    /// Whether find knew the resource at all.
    pub found: bool,
    /// The state find reported (or the absent state).
    pub state: Resource,
    /// The attributes update must change; empty when nothing differs.
    pub should: Vec<(String, Value)>,
}

/// What a removal asks for: `ensure` and the parameters (a removal may
/// need one: file's force), or nothing when there is nothing to remove.
fn removal(provider: &Provider, wanted: &mut Vec<(String, Value)>, exists: bool) {
    wanted.retain(|(key, _)| {
        key == "ensure"
            || provider
                .attribute(key)
                .is_some_and(|a| a.kind == Kind::Write)
    });
    if !exists {
        wanted.clear();
    }
}

/// What a creation asks for: the request with the defaults filled in,
/// and every required attribute given.
fn creation(
    provider: &Provider,
    request: &Request,
    wanted: &mut Vec<(String, Value)>,
) -> std::result::Result<(), String> {
    for attribute in provider.meta.attributes.values() {
        if let Some(default) = &attribute.default {
            if !wanted.iter().any(|(key, _)| key == &attribute.name) {
                wanted.push((attribute.name.clone(), default.clone()));
            }
        }
    }
    let missing: Vec<&str> = provider
        .meta
        .attributes
        .values()
        .filter(|a| a.required && !wanted.iter().any(|(key, _)| key == &a.name))
        .map(|a| a.name.as_str())
        .collect();
    if !missing.is_empty() {
        return Err(format!(
            "creating '{}' needs the required attribute(s) {}",
            escape(&request.name),
            missing.join(", ")
        ));
    }
    Ok(())
}

/// A change of an existing resource may not change an init-only
/// attribute.
fn init_only_unchanged(
    provider: &Provider,
    request: &Request,
    wanted: &[(String, Value)],
    state: &Resource,
) -> std::result::Result<(), String> {
    for (key, value) in wanted {
        let Some(attribute) = provider.attribute(key) else {
            continue;
        };
        if attribute.kind == Kind::InitOnly && state.attrs.get(key) != Some(value) {
            let now = state
                .attrs
                .get(key)
                .map_or("no value".to_owned(), |v| attribute.show(v));
            return Err(format!(
                "attribute '{key}' can only be set when '{}' is created; it is {now} now",
                escape(&request.name)
            ));
        }
    }
    Ok(())
}

impl Transition {
    /// Works out the transition from `found` to the request:
    /// - delete (present to absent) passes only `ensure`;
    /// - absent to absent is no change;
    /// - create (absent to present) fills in defaults and checks that
    ///   every required attribute is given;
    /// - changing an init-only attribute of an existing resource is refused.
    pub fn new(
        provider: &Provider,
        request: &Request,
        found: Option<Resource>,
    ) -> Result<Transition> {
        let reject = |message: String| Error::Request {
            provider: provider.qualified_name(),
            message,
        };
        // Where resources cannot be absent (libral's services: ensure is
        // running or stopped), there is no creating or deleting: whatever
        // find answered, the resource is there to change.
        let lifecycle = can_be_absent(provider);
        let exists = !lifecycle || found.as_ref().is_some_and(|r| !r.is_absent());
        let known = found.is_some();
        let state = found.unwrap_or_else(|| absent_state(provider, &request.name));
        let mut wanted = request.attrs.clone();
        if lifecycle && request.wants_absent() {
            removal(provider, &mut wanted, exists);
        } else if !exists {
            creation(provider, request, &mut wanted).map_err(reject)?;
        } else {
            init_only_unchanged(provider, request, &wanted, &state).map_err(reject)?;
        }
        // A resource being created gets everything asked for: whatever its
        // absent record says is no state to compare with.
        // A refresh's parameters are the refresh's alone.
        wanted.retain(|(key, _)| {
            provider
                .attribute(key)
                .is_none_or(|a| a.kind != Kind::Refresh)
        });
        wanted.retain(|(key, value)| {
            let found = state.attrs.get(key);
            let met = match provider.attribute(key) {
                Some(attribute) => attribute.met_by(value, found),
                None => found == Some(value),
            } || (exists
                && (present_met(key, value, found) || withheld::met(provider, key, value, &state)));
            (!exists && key != "ensure") || !met
        });
        // Kept with every planned task: no room for what was dropped.
        wanted.shrink_to_fit();
        let should = wanted;
        Ok(Transition {
            name: request.name.clone(),
            found: known,
            state,
            should,
        })
    }
}

/// What a transition does to its resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    Create,
    Change,
    Remove,
}

impl Transition {
    /// The update a convention sends for this transition.
    pub fn as_update(&self) -> Update<'_> {
        Update {
            name: &self.name,
            state: self.found.then_some(&self.state),
            should: &self.should,
        }
    }

    /// What it does: creating is bringing a resource that was not there
    /// (not found, or found absent) to anything but absent; removing is
    /// asking for absent.
    pub fn effect(&self, provider: &Provider) -> Effect {
        let removes = self
            .should
            .iter()
            .any(|(k, v)| k == "ensure" && v.as_str() == Some("absent"));
        let was_there = self.found && !self.state.is_absent();
        if can_be_absent(provider) && !was_there && !removes {
            Effect::Create
        } else if removes {
            Effect::Remove
        } else {
            Effect::Change
        }
    }

    /// Whether it creates the resource (see [`Transition::effect`]).
    pub fn creates(&self, provider: &Provider) -> bool {
        self.effect(provider) == Effect::Create
    }

    /// Its changes, each from the value found, as they are shown: a
    /// value too large to show or private as its digest.
    pub fn changes(&self, provider: &Provider) -> Vec<Change> {
        self.shown(provider, derived(&self.state, &self.should, &[]))
    }

    /// `changes` of this transition as they are shown (see
    /// [`crate::withheld`]).
    pub fn shown(&self, provider: &Provider, changes: Vec<Change>) -> Vec<Change> {
        let withheld = withheld::withheld(provider, &self.should, &self.state);
        withheld::shown_changes(provider, changes, &withheld, &self.state, &self.should)
    }

    /// The resource as it is once `changes` (as [`Self::shown`] gives
    /// them) are made.
    pub fn view_after(&self, provider: &Provider, changes: &[Change]) -> Resource {
        let withheld = withheld::withheld(provider, &self.should, &self.state);
        withheld::view_after(
            provider,
            self.state.clone(),
            changes,
            &withheld,
            &self.should,
        )
    }
}

/// What a get of `provider` is told of the names it reads: for one that
/// runs commands, each request's values (its checks need them), in the
/// requests' order; for any other, nothing.
pub fn told<'r>(
    provider: &Provider,
    requests: impl IntoIterator<Item = &'r Request>,
) -> Vec<&'r [(String, Value)]> {
    match provider.meta.runs_commands {
        true => requests.into_iter().map(|r| r.attrs.as_slice()).collect(),
        false => Vec::new(),
    }
}

/// Brings a resource to the requested state (or previews it under `noop`).
pub fn apply(host: &Host, provider: &Provider, request: &Request, noop: bool) -> Result<Outcome> {
    apply_many(host, provider, std::slice::from_ref(request), noop)?
        .pop()
        .expect("one outcome per request")
}

/// Brings several resources of one provider to their requested states. The
/// updates go to the provider as one batch where its convention allows. The
/// outer error means nothing could be done; each inner result says how one
/// resource fared.
pub fn apply_many(
    host: &Host,
    provider: &Provider,
    requests: &[Request],
    noop: bool,
) -> Result<Vec<Result<Outcome>>> {
    for (index, request) in requests.iter().enumerate() {
        if requests[..index].iter().any(|r| r.name == request.name) {
            return Err(Error::Request {
                provider: provider.qualified_name(),
                message: format!("'{}' is named twice", escape(&request.name)),
            });
        }
    }
    // One read of all the names; a resource that cannot be read fails
    // alone, the others go on.
    let names: Vec<&str> = requests.iter().map(|r| r.name.as_str()).collect();
    let plans: Vec<Result<Transition>> = requests
        .iter()
        .zip(host.get_with_should(provider, &names, &told(provider, requests))?)
        .map(|(request, found)| found.and_then(|found| Transition::new(provider, request, found)))
        .collect();
    let pending: Vec<&Transition> = plans
        .iter()
        .filter_map(|plan| plan.as_ref().ok())
        .filter(|plan| !plan.should.is_empty())
        .collect();
    let mut answers = if pending.is_empty() {
        Vec::new()
    } else if noop && !provider.meta.supports_noop {
        log::info!(
            "{} does not support noop; showing the changes derived from its current state",
            provider.qualified_name()
        );
        pending
            .iter()
            .map(|plan| Ok(plan.changes(provider)))
            .collect()
    } else {
        let updates: Vec<Update> = pending.iter().map(|plan| plan.as_update()).collect();
        host.set_many(provider, &updates, noop)?
            .into_iter()
            .zip(&pending)
            .map(|(answer, plan)| {
                // Names are unique among the requests (checked above).
                let asked = requests.iter().find(|r| r.name == plan.name);
                answer.and_then(|answer| settle(host, provider, plan, asked, answer))
            })
            .collect()
    }
    .into_iter();
    let mut created = Vec::new();
    let mut outcomes: Vec<Result<Outcome>> = Vec::with_capacity(plans.len());
    for (at, plan) in plans.into_iter().enumerate() {
        outcomes.push(plan.and_then(|plan| {
            let changes = if plan.should.is_empty() {
                Vec::new()
            } else {
                answers.next().expect("one answer per pending plan")?
            };
            if !noop && !changes.is_empty() && plan.creates(provider) {
                created.push(at);
            }
            Ok(Outcome {
                resource: plan.view_after(provider, &changes),
                changes,
                noop,
            })
        }));
    }
    show_created_as_read(host, provider, requests, &created, &mut outcomes);
    Ok(outcomes)
}

/// Completes the view of each resource just created with what the
/// provider reads of it now: a creation's answer names what was set, and
/// the attributes it left at their defaults (a hosts entry's empty
/// aliases) are there only in a read. One get for all of them; a view
/// that cannot be read back stays as it was made.
fn show_created_as_read(
    host: &Host,
    provider: &Provider,
    requests: &[Request],
    created: &[usize],
    outcomes: &mut [Result<Outcome>],
) {
    if created.is_empty() {
        return;
    }
    let names: Vec<&str> = created
        .iter()
        .map(|&at| requests[at].name.as_str())
        .collect();
    let Ok(found) = host.get_many(provider, &names) else {
        return;
    };
    for (&at, found) in created.iter().zip(found) {
        if let (Ok(outcome), Ok(Some(read))) = (&mut outcomes[at], found) {
            let withheld = withheld::withheld(provider, &requests[at].attrs, &read);
            // What the read has wins; what it leaves out (a value the
            // provider never reports) stays as made.
            if withheld.is_empty() {
                outcome.resource.attrs.extend(read.attrs);
            }
        }
    }
}

/// The changes an update's answer reports for `plan`, completed and
/// checked: derived changes added where the provider asked for them, no old
/// value for what a created resource had none of, and the answer checked
/// against the request `asked` (every attribute set reported, no change
/// from a value to itself).
pub fn settle(
    host: &Host,
    provider: &Provider,
    plan: &Transition,
    asked: Option<&Request>,
    answer: UpdateAnswer,
) -> Result<Vec<Change>> {
    let mut changes = answer.changes;
    if answer.derive {
        let extra = derived(&plan.state, &plan.should, &changes);
        changes.extend(extra);
    }
    if plan.creates(provider) {
        // What the absent resource had no value for has no old value,
        // whatever the provider wrote for it ('' or nothing); what find did
        // report (a package's status 'not-installed') stays.
        for change in &mut changes {
            if change.attr != "ensure" && !plan.state.attrs.contains_key(&change.attr) {
                change.was = None;
            }
        }
    }
    check_answer(host, provider, plan, asked, &changes)?;
    Ok(plan.shown(provider, changes))
}

/// Whether `ensure: present` is asked for and met by the `found` value of
/// a resource that exists: present asks only that it exist, in whatever
/// form (a file, a directory, an installed version; a provider may report
/// no ensure at all), but whole: `incomplete`, which the account providers
/// report for an account that exists only in part, is to be repaired.
pub fn present_met(key: &str, wanted: &Value, found: Option<&Value>) -> bool {
    key == "ensure"
        && matches!(wanted.as_str(), Some("present" | "defined"))
        && found
            .and_then(Value::as_str)
            .is_none_or(|found| found != "absent" && found != "incomplete")
}

/// Checks that an update's answer accounts for the request honestly:
/// every attribute the request set is reported changed (write-only
/// parameters and the defaults ral added aside), and no reported change has equal old and new values.
/// A lapse is a warning naming provider, resource and attribute (an error
/// under `--strict`): the change may not have been made.
fn check_answer(
    host: &Host,
    provider: &Provider,
    plan: &Transition,
    asked: Option<&Request>,
    changes: &[Change],
) -> Result<()> {
    let action = provider.meta.update_action();
    let name = escape(&plan.name);
    for (key, value) in &plan.should {
        let Some(attribute) = provider.attribute(key) else {
            continue;
        };
        // Defaults ral added for a creation were not asked for.
        let requested = asked.is_none_or(|request| request.attrs.iter().any(|(k, _)| k == key));
        if !requested || attribute.kind == Kind::Write || changes.iter().any(|c| &c.attr == key) {
            continue;
        }
        host.report_output_problem(
            provider,
            action,
            key,
            format!(
                "resource '{name}': the answer leaves out '{key}', which the request set to {}; \
                 it may not have been changed",
                attribute.show(value)
            ),
        )?;
    }
    for change in changes {
        if change.was.as_ref() != Some(&change.is) {
            continue;
        }
        let shown = provider.attribute(&change.attr).map_or_else(
            || format!("'{}'", escape(&change.is.to_text())),
            |a| a.show(&change.is),
        );
        host.report_output_problem(
            provider,
            action,
            &change.attr,
            format!(
                "resource '{name}': the answer reports a change of '{}' from {shown} to {shown}, \
                 which is no change",
                escape(&change.attr)
            ),
        )?;
    }
    Ok(())
}

/// Whether the provider's resources can be absent, and so be created and
/// deleted: it has no `ensure`, or its `ensure` takes `absent`.
pub fn can_be_absent(provider: &Provider) -> bool {
    provider
        .attribute("ensure")
        .is_none_or(|ensure| ensure.attr_type.accepts_text("absent"))
}

/// The state assumed for a resource the provider does not know.
fn absent_state(provider: &Provider, name: &str) -> Resource {
    let absent = provider.attribute("ensure").is_some() && can_be_absent(provider);
    // Room for that one attribute only: a plan keeps this state with each
    // creation it plans.
    let mut resource = Resource::with_capacity(name, usize::from(absent));
    if absent {
        resource
            .attrs
            .insert("ensure".to_owned(), Value::String("absent".to_owned()));
    }
    resource
}

/// Changes from `state` to the requested values, for attributes that
/// `reported` does not already cover.
fn derived(state: &Resource, differing: &[(String, Value)], reported: &[Change]) -> Vec<Change> {
    let mut changes = Vec::with_capacity(differing.len());
    // Sized once: a plan's tasks keep these, and a filtered collect would
    // leave room for more.
    changes.extend(
        differing
            .iter()
            .filter(|(key, _)| !reported.iter().any(|c| &c.attr == key))
            .map(|(key, value)| Change {
                attr: key.clone(),
                is: value.clone(),
                was: state.attrs.get(key).cloned(),
            }),
    );
    changes
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A provider with `attributes` (YAML flow lines) besides name.
    fn provider(attributes: &str) -> Provider {
        let yaml = format!(
            "provider:\n  type: t\n  invoke: simple\n  actions: [list, find, update]\n  suitable: true\n  attributes:\n    name: {{}}\n{attributes}"
        );
        let meta = crate::metadata::Metadata::parse(&yaml, std::path::Path::new("t.yaml")).unwrap();
        Provider::new(meta, "t.prov".into(), None)
    }

    const FULL: &str = "    ensure: {type: 'enum[present, absent]'}\n    color: {default: red}\n    size: {type: integer, required: true}\n    uid: {type: integer, kind: init}\n";

    fn request(p: &Provider, words: &[&str]) -> Request {
        let words: Vec<String> = words.iter().map(|w| w.to_string()).collect();
        Request::parse(p, "a", &words).unwrap()
    }

    fn found(attrs: &[(&str, Value)]) -> Option<Resource> {
        let mut resource = Resource::bare("a");
        for (key, value) in attrs {
            resource.attrs.insert(key.to_string(), value.clone());
        }
        Some(resource)
    }

    #[test]
    fn the_command_line_and_a_manifest_are_checked_alike_and_every_problem_is_told() {
        let p = provider(FULL);
        let three = Written::Text("3".to_owned());
        let from_text = Request::check(&p, "a", &[("size", &three)], WrittenIn::CommandLine);
        let manifest = WrittenIn::Manifest { also: &["require"] };
        let from_manifest = Request::check(&p, "a", &[("size", &three)], manifest);
        assert_eq!(from_text.unwrap(), from_manifest.unwrap());
        assert_eq!(
            request(&p, &["size=3"]).attrs,
            [("size".to_owned(), Value::Integer(3))]
        );

        let wrong = Written::Text("big".to_owned());
        let list = Written::List(vec![]);
        let attrs = [
            ("size", &wrong),
            ("colour", &three),
            ("name", &three),
            ("color", &list),
        ];
        let problems = Request::check(&p, "", &attrs, manifest).unwrap_err();
        let at: Vec<Option<usize>> = problems.iter().map(|p| p.attr).collect();
        assert_eq!(at, [None, Some(0), Some(1), Some(2), Some(3)]);
        assert!(
            problems[1].message.contains("invalid value 'big'"),
            "{problems:?}"
        );
        assert!(
            problems[2].message.contains("did you mean 'color'"),
            "{problems:?}"
        );
        assert!(
            problems[3].message.contains("the key above"),
            "{problems:?}"
        );
        assert!(
            problems[4].message.contains("a list is not"),
            "{problems:?}"
        );
        let problems = Request::check(&p, "a", &[("name", &three)], WrittenIn::CommandLine);
        assert!(problems.unwrap_err()[0]
            .message
            .contains("'name=' is not allowed"));
        // The command line fails at the first, naming it.
        let words = ["size=big".to_owned(), "size=3".to_owned()];
        let error = Request::parse(&p, "a", &words).unwrap_err().to_string();
        assert!(error.contains("invalid value 'big'"), "{error}");
        let words = ["size=3".to_owned(), "size=4".to_owned()];
        let error = Request::parse(&p, "a", &words).unwrap_err().to_string();
        assert!(error.contains("'size' is given twice"), "{error}");
    }

    fn keys(plan: &Transition) -> Vec<&str> {
        plan.should.iter().map(|(k, _)| k.as_str()).collect()
    }

    #[test]
    fn a_creation_gets_defaults_and_needs_required_attributes() {
        let p = provider(FULL);
        let plan = Transition::new(&p, &request(&p, &["size=3"]), None).unwrap();
        assert_eq!(keys(&plan), ["size", "color"]);
        assert!(plan.creates(&p));
        assert!(plan.as_update().state.is_none());
        let err = Transition::new(&p, &request(&p, &["color=blue"]), None).unwrap_err();
        assert!(
            err.to_string()
                .contains("needs the required attribute(s) size"),
            "{err}"
        );
    }

    #[test]
    fn a_deletion_passes_only_ensure_and_absent_to_absent_is_nothing() {
        let p = provider(FULL);
        let present = found(&[
            ("ensure", Value::from("present")),
            ("size", Value::Integer(1)),
        ]);
        let plan =
            Transition::new(&p, &request(&p, &["ensure=absent", "size=9"]), present).unwrap();
        assert_eq!(keys(&plan), ["ensure"]);
        assert!(!plan.creates(&p));
        let absent = found(&[("ensure", Value::from("absent"))]);
        let plan = Transition::new(&p, &request(&p, &["ensure=absent"]), absent).unwrap();
        assert!(plan.should.is_empty());
    }

    #[test]
    fn only_what_differs_is_changed_and_init_only_attributes_stay() {
        let p = provider(FULL);
        let present = found(&[
            ("ensure", Value::from("present")),
            ("size", Value::Integer(1)),
            ("uid", Value::Integer(5)),
        ]);
        let plan =
            Transition::new(&p, &request(&p, &["size=1", "color=blue"]), present.clone()).unwrap();
        assert_eq!(keys(&plan), ["color"]);
        let err = Transition::new(&p, &request(&p, &["uid=6"]), present.clone()).unwrap_err();
        assert!(
            err.to_string()
                .contains("can only be set when 'a' is created"),
            "{err}"
        );
        assert!(Transition::new(&p, &request(&p, &["uid=5"]), present)
            .unwrap()
            .should
            .is_empty());
    }

    #[test]
    fn present_is_met_by_any_whole_form_of_existence() {
        let p = provider("    ensure: {type: 'enum[present, file, absent, incomplete]'}\n");
        let with = |ensure: &str| found(&[("ensure", Value::from(ensure))]);
        for (now, needed) in [("file", false), ("present", false), ("incomplete", true)] {
            let plan = Transition::new(&p, &request(&p, &["ensure=present"]), with(now)).unwrap();
            assert_eq!(!plan.should.is_empty(), needed, "{now}");
        }
        assert!(!present_met(
            "ensure",
            &Value::from("file"),
            Some(&Value::from("file"))
        ));
        assert!(present_met("ensure", &Value::from("present"), None));
    }

    #[test]
    fn resources_that_cannot_be_absent_are_never_created_or_deleted() {
        let p =
            provider("    ensure: {type: 'enum[running, stopped]'}\n    color: {default: red}\n");
        assert!(!can_be_absent(&p));
        // Not found: no defaults, nothing required, no creation.
        let plan = Transition::new(&p, &request(&p, &["ensure=running"]), None).unwrap();
        assert_eq!(keys(&plan), ["ensure"]);
        assert!(!plan.creates(&p));
        assert!(
            !plan.state.attrs.contains_key("ensure"),
            "no invented 'absent'"
        );
    }

    #[test]
    fn a_planned_creation_keeps_no_room_to_spare() {
        // A plan keeps the absent state and the changes of each creation.
        let p = provider(FULL);
        let plan = Transition::new(&p, &request(&p, &["size=3", "uid=7"]), None).unwrap();
        assert_eq!(plan.state.attrs.len(), 1);
        assert_eq!(plan.state.attrs.capacity(), 1);
        let changes = plan.changes(&p);
        assert_eq!(changes.len(), 3, "{changes:?}");
        assert_eq!(changes.capacity(), 3);
    }
}
