//! Ownership that survives any kill: whether ral created a resource (and
//! so removes it once no manifest lists it) is decided from facts recorded
//! before anything changes, never from where a kill fell.
//!
//! Before a task calls its provider, the store commits an intent: the item,
//! the action, what is asked, and whether the resource existed when last
//! read (the read just before the call where the scheduler reads again,
//! else the plan's). The transaction that records the task's end clears it.
//! The next run (`ral apply`, and `ral plan`, which keeps the result to
//! itself) settles every intent left over, before it plans, from a fresh
//! read of its resource:
//!
//! - it existed before: never ral's; the item keeps `created` as it was,
//!   and a removal whose resource is gone removes the item;
//! - it did not exist, and exists now: ral created it; the item is
//!   recorded as created, Applied when the resource is as asked, else left
//!   as it was for the plan to finish;
//! - it did not exist, and still does not: nothing happened.
//!
//! Every kill point: before the call (intent committed), nothing changed,
//! and the settling finds it so; during the call, or after the change but
//! before the answer is recorded, the resource is there or not, and the
//! settling finds which; after the end is recorded, no intent is left;
//! between that record and the next task, the next task had no intent yet;
//! during verification, every end is recorded already. A kill while
//! settling leaves all or nothing of it (one transaction), and the intents
//! stay until it is written, so the following run settles them again. A
//! killed ral's provider runs on until ral's keeper ends its process group
//! (at once, with SIGTERM; see `process`), and may make its change
//! meanwhile: the settling sees the change if the provider made it before
//! the read, and one made later is not ral's by the record, only a leak at
//! worst, never the removal of something ral did not create. A fleet keeps
//! one store per target, and each target's run settles its own store.
//! `ral plan` takes no lock: when an apply holds it, the intents are that
//! apply's, still under way, and the plan settles none of them (their
//! items are left out of its removals).
//!
//! A task that fails marks its intent failed, in the transaction that
//! records its end. One that failed to create its resource has it read
//! again right after, by the batch it ran in (before any other task of its
//! provider starts), and its intent is settled from that: what the failed
//! provider made is ral's, and nobody else had the time to make it. A failed intent a later run finds (its run was
//! killed before settling it) is never taken as a creation: the resource
//! may have been made since by anyone (a package whose install failed,
//! then installed by hand), and ral never removes what it did not make.
//!
//! One window stays: killed after a provider answered that someone else
//! made the resource (`ensure` was `present`) but before that answer was
//! recorded, the rerun has only the intent, which says the resource did
//! not exist when read, and takes it as ral's.
//!
//! A task that ends records its creation from the provider's own word where
//! it gives one (`ensure` was `absent`, or `present` because someone else
//! made it between ral's read and the task, or no `ensure` change at all):
//! see [`created_by`].

use std::collections::HashMap;

use serde_json::Value as Json;

use crate::discovery::Registry;
use crate::error::Result;
use crate::host::Host;
use crate::metadata::Kind;
use crate::provider::Provider;
use crate::resource::{Change, Resource};
use crate::store::{Intent, IntentAction, ItemState, Settlement, Store, StoreKey, StoredItem};
use crate::types::Value;
use crate::update;

use super::lifecycle;
use super::read::{read_all, Group, Observed};

/// What settling found: what to write, and the items whose intent could
/// not be settled (their resource could not be read), which this run
/// leaves as they are.
#[derive(Debug, Default)]
pub struct Settled {
    pub settlement: Settlement,
    pub unsettled: Vec<(String, String)>,
}

/// Settles the intents an earlier run left in `store`, before a run plans
/// with the items `stored` (read from it), which are brought up to date.
/// `write`: an apply, which holds the store's lock, writes the settlement
/// (so no run of its own is among those left over); a plan only uses it.
/// Returns the items whose intent could not be settled: unreadable, or,
/// for a plan, an apply's still under way.
pub fn settle_store(
    host: &Host,
    registry: &Registry,
    store: &mut Store,
    write: bool,
    stored: &mut Vec<StoredItem>,
    jobs: usize,
) -> Result<Vec<(String, String)>> {
    let intents = store.intents()?;
    if intents.is_empty() {
        return Ok(Vec::new());
    }
    // Asked after the intents are read: an apply that starts later
    // records its own only once it holds the lock.
    if !write {
        if let Some(holder) = store.apply_running()? {
            log::info!(
                "an apply is running ({holder}): the {} resource(s) it is changing are left \
                 as they are in this plan",
                intents.len()
            );
            return Ok(intents
                .into_iter()
                .map(|intent| (intent.provider, intent.name))
                .collect());
        }
    }
    let key = if write {
        Some(store.key()?)
    } else {
        store.existing_key()?
    };
    let settled = settle(host, registry, &intents, stored, key.as_ref(), jobs);
    if write {
        store.settle_intents(&settled.settlement)?;
    }
    apply_to(stored, &settled.settlement);
    Ok(settled.unsettled)
}

/// Settles the `intents` left over by an earlier run against `stored`,
/// reading each one's resource (one read per provider). `key` is the
/// store's, to compare sensitive values with their digests (without one
/// such a value never matches).
pub fn settle(
    host: &Host,
    registry: &Registry,
    intents: &[Intent],
    stored: &[StoredItem],
    key: Option<&StoreKey>,
    jobs: usize,
) -> Settled {
    let mut settled = Settled::default();
    let (groups, members) = group_by_provider(registry, intents, &mut settled.unsettled);
    if groups.is_empty() {
        return settled;
    }
    let by_key: HashMap<(&str, &str), &StoredItem> = stored
        .iter()
        .map(|item| ((item.provider.as_str(), item.name.as_str()), item))
        .collect();
    let answers = read_all(host, &groups, jobs);
    for ((provider, _), (answer, intents)) in groups.iter().zip(answers.into_iter().zip(members)) {
        for (found, intent) in answer.into_iter().zip(intents) {
            let before = by_key.get(&(intent.provider.as_str(), intent.name.as_str()));
            settle_one(&mut settled, provider, intent, found, before.copied(), key);
        }
    }
    settled
}

/// The `intents` grouped by their provider, for one read per provider:
/// each provider with its resources' names, and the intents. One whose
/// provider is not found stays as it is, `unsettled`.
fn group_by_provider<'a>(
    registry: &'a Registry,
    intents: &'a [Intent],
    unsettled: &mut Vec<(String, String)>,
) -> (Vec<Group<'a>>, Vec<Vec<&'a Intent>>) {
    let mut groups: Vec<Group> = Vec::new();
    let mut members: Vec<Vec<&Intent>> = Vec::new();
    for intent in intents {
        let Ok(provider) = registry.resolve(&intent.provider) else {
            log::warn!(
                "{}: a run that ended early left what it was doing unsettled, and its provider \
                 {} is not found: it stays in the state store, untouched",
                crate::text::escape(&intent.resource),
                intent.provider
            );
            unsettled.push((intent.provider.clone(), intent.name.clone()));
            continue;
        };
        match groups.iter().position(|(p, _)| std::ptr::eq(*p, provider)) {
            Some(at) => {
                groups[at].1.push(&intent.name);
                members[at].push(intent);
            }
            None => {
                groups.push((provider, vec![&intent.name]));
                members.push(vec![intent]);
            }
        }
    }
    (groups, members)
}

/// Settles one `intent` of `provider` whose resource was read as
/// `found`, into `settled`; `before` is its item in the store, unless it
/// was forgotten since.
fn settle_one(
    settled: &mut Settled,
    provider: &Provider,
    intent: &Intent,
    found: Observed,
    before: Option<&StoredItem>,
    key: Option<&StoreKey>,
) {
    let item_key = (intent.provider.clone(), intent.name.clone());
    let found = match found {
        Observed::Unreadable(message) => {
            log::warn!(
                "{}: a run that ended early left what it was doing unsettled, and it \
                 cannot be read ({message}): it stays in the state store, untouched",
                crate::text::escape(&intent.resource)
            );
            settled.unsettled.push(item_key);
            return;
        }
        found => found.into_resource(),
    };
    settled.settlement.settled.push(item_key.clone());
    // An item forgotten since (`ral state forget`) stays forgotten.
    let Some(before) = before else {
        return;
    };
    let exists = exists(provider, found.as_ref());
    match decide(intent, exists) {
        Decision::Nothing => {}
        Decision::Removed => {
            log::info!(
                "{}: removed by a run that ended early; it leaves the state store",
                crate::text::escape(&intent.resource)
            );
            settled.settlement.removed.push(item_key);
        }
        Decision::Created => {
            log::info!(
                "{}: created by a run that ended early; it is known as ral's",
                crate::text::escape(&intent.resource)
            );
            let mut item = before.clone();
            item.created = true;
            let resource = found.as_ref().expect("it exists");
            if matches(provider, intent, resource, key) {
                item.state = ItemState::Applied;
                item.properties = intent.properties.clone();
            }
            if &item != before {
                settled.settlement.items.push(item);
            }
        }
    }
}

/// What a leftover intent means, given whether its resource exists now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Nothing to record: what the item says stays true.
    Nothing,
    /// Ral created the resource.
    Created,
    /// The removal was done: the item goes.
    Removed,
}

/// The rule of the module docs, for one intent.
pub fn decide(intent: &Intent, exists_now: bool) -> Decision {
    match (intent.existed, exists_now) {
        (true, false) if intent.action == IntentAction::Remove => Decision::Removed,
        (true, _) => Decision::Nothing,
        // A failed task's, found by a later run: anyone may have made it
        // since (its own run read it right after the failure).
        (false, true) if intent.failed => Decision::Nothing,
        (false, true) => Decision::Created,
        (false, false) => Decision::Nothing,
    }
}

/// Whether a resource as read exists (where resources cannot be absent,
/// it always does).
pub fn exists(provider: &Provider, found: Option<&Resource>) -> bool {
    !update::can_be_absent(provider) || found.is_some_and(|r| !r.is_absent())
}

/// Whether the resource is as the intent asked, in every attribute that
/// can be read back (`ensure: present` met by any whole form of
/// existence; a sensitive value by its keyed digest).
fn matches(provider: &Provider, intent: &Intent, found: &Resource, key: Option<&StoreKey>) -> bool {
    intent.properties.iter().all(|(attr, asked)| {
        let attribute = provider.attribute(attr);
        if attribute.is_some_and(|a| matches!(a.kind, Kind::Write | Kind::Refresh)) {
            return true;
        }
        let value = found.attrs.get(attr);
        if attr == "ensure" && asked.as_str() == Some("present") {
            return update::present_met(attr, &Value::from("present"), value);
        }
        let Some(value) = value else {
            return false;
        };
        if attribute.is_some_and(|a| a.kept_keyed()) {
            return key.is_some_and(|key| {
                lifecycle::kept(provider, &intent.name, attr, value, key) == *asked
            });
        }
        Json::from(value) == *asked
    })
}

/// Whether a task that succeeded created its resource: its transition
/// created it (the resource was absent when last read), and the provider
/// does not say otherwise. A provider that reports what `ensure` was says
/// who made it: `absent` (or nothing) is ral's creation; any other value,
/// or no `ensure` change where one was asked for, means someone else made
/// it between ral's read and the task. A change ral derived for the
/// provider says only what the read said.
pub fn created_by(
    provider: &Provider,
    transition: &update::Transition,
    changes: &[Change],
) -> bool {
    if !transition.creates(provider) {
        return false;
    }
    let asked = transition.should.iter().any(|(key, _)| key == "ensure");
    match changes.iter().find(|change| change.attr == "ensure") {
        Some(change) => change
            .was
            .as_ref()
            .and_then(Value::as_str)
            .is_none_or(|was| was.is_empty() || was == "absent"),
        None => !asked,
    }
}

/// Applies a settlement to the items as read, for a run that plans with
/// them (written or not).
pub fn apply_to(stored: &mut Vec<StoredItem>, settlement: &Settlement) {
    for item in &settlement.items {
        if let Some(slot) = stored
            .iter_mut()
            .find(|s| s.provider == item.provider && s.name == item.name)
        {
            *slot = item.clone();
        }
    }
    stored.retain(|s| {
        !settlement
            .removed
            .iter()
            .any(|(provider, name)| &s.provider == provider && &s.name == name)
    });
}

#[cfg(test)]
mod tests {
    use serde_json::Map;

    use super::*;

    fn provider() -> Provider {
        let yaml = "provider:\n  type: t\n  invoke: json\n  actions: [get, set]\n  suitable: true\n  attributes:\n    name: {}\n    ensure: {type: 'enum[present, absent]'}\n    value: {}\n    secret: {sensitive: true}\n    pass: {kind: w}\n";
        let meta = crate::metadata::Metadata::parse(yaml, std::path::Path::new("t.yaml")).unwrap();
        Provider::new(meta, "t.prov".into(), None)
    }

    fn intent(action: IntentAction, existed: bool) -> Intent {
        Intent {
            provider: "t::t".to_owned(),
            name: "a".to_owned(),
            resource: "t[a]".to_owned(),
            plan_id: "p".to_owned(),
            task_id: 1,
            action,
            existed,
            properties: Map::new(),
            failed: false,
        }
    }

    fn resource(attrs: &[(&str, &str)]) -> Resource {
        let mut r = Resource::bare("a");
        for (k, v) in attrs {
            r.attrs.insert((*k).to_owned(), Value::from(*v));
        }
        r
    }

    #[test]
    fn a_leftover_intent_is_settled_by_what_existed_before_and_exists_now() {
        use Decision::*;
        use IntentAction::*;
        let cases = [
            (Create, false, true, Created),
            (Create, false, false, Nothing),
            (Change, true, true, Nothing),
            (Change, true, false, Nothing),
            (Remove, true, false, Removed),
            (Remove, true, true, Nothing),
        ];
        for (action, existed, now, decision) in cases {
            assert_eq!(
                decide(&intent(action, existed), now),
                decision,
                "{action:?} existed {existed} exists {now}"
            );
        }
    }

    #[test]
    fn a_failed_task_s_resource_found_by_a_later_run_is_never_taken_as_rals() {
        let mut failed = intent(IntentAction::Create, false);
        failed.failed = true;
        assert_eq!(decide(&failed, true), Decision::Nothing);
        assert_eq!(decide(&failed, false), Decision::Nothing);
        // A removal that failed, its resource gone since: the item goes.
        let mut removal = intent(IntentAction::Remove, true);
        removal.failed = true;
        assert_eq!(decide(&removal, false), Decision::Removed);
    }

    #[test]
    fn a_settled_creation_matches_only_what_was_asked() {
        let p = provider();
        let key = StoreKey::from_bytes([3; 32]);
        let request = update::Request {
            name: "a".to_owned(),
            attrs: vec![
                ("ensure".to_owned(), Value::from("present")),
                ("value".to_owned(), Value::from("v")),
                ("secret".to_owned(), Value::from("s")),
                ("pass".to_owned(), Value::from("never read back")),
            ],
        };
        let mut i = intent(IntentAction::Create, false);
        i.properties = lifecycle::properties(&p, &request, &key);
        let found = resource(&[("ensure", "present"), ("value", "v"), ("secret", "s")]);
        assert!(matches(&p, &i, &found, Some(&key)));
        assert!(!matches(&p, &i, &found, None), "no key, no match");
        let other = resource(&[("ensure", "present"), ("value", "v"), ("secret", "t")]);
        assert!(!matches(&p, &i, &other, Some(&key)));
        let short = resource(&[("ensure", "present"), ("secret", "s")]);
        assert!(!matches(&p, &i, &short, Some(&key)));
    }

    #[test]
    fn a_resource_exists_unless_read_absent_where_it_can_be() {
        let p = provider();
        assert!(!exists(&p, None));
        assert!(!exists(&p, Some(&resource(&[("ensure", "absent")]))));
        assert!(exists(&p, Some(&resource(&[("ensure", "present")]))));
        assert!(exists(&p, Some(&resource(&[("value", "v")]))));
        // Where resources cannot be absent, each one exists, read or not.
        let yaml = "provider:\n  type: t\n  invoke: json\n  actions: [get, set]\n  suitable: true\n  attributes:\n    name: {}\n    ensure: {type: 'enum[present]'}\n";
        let meta = crate::metadata::Metadata::parse(yaml, std::path::Path::new("t.yaml")).unwrap();
        let always = Provider::new(meta, "t.prov".into(), None);
        assert!(exists(&always, None));
        assert!(exists(&always, Some(&resource(&[("ensure", "absent")]))));
    }

    #[test]
    fn ensure_present_is_met_by_any_whole_form_and_another_ensure_only_by_itself() {
        let p = provider();
        let asking = |ensure: &str| {
            let mut i = intent(IntentAction::Create, false);
            i.properties.insert("ensure".to_owned(), Json::from(ensure));
            i
        };
        let present = asking("present");
        assert!(matches(
            &p,
            &present,
            &resource(&[("ensure", "directory")]),
            None
        ));
        assert!(matches(&p, &present, &resource(&[]), None));
        assert!(!matches(
            &p,
            &present,
            &resource(&[("ensure", "incomplete")]),
            None
        ));
        let directory = asking("directory");
        assert!(matches(
            &p,
            &directory,
            &resource(&[("ensure", "directory")]),
            None
        ));
        assert!(!matches(
            &p,
            &directory,
            &resource(&[("ensure", "file")]),
            None
        ));
    }

    #[test]
    fn the_providers_word_on_ensure_decides_created_or_adopted() {
        let p = provider();
        let request = update::Request {
            name: "a".to_owned(),
            attrs: vec![
                ("ensure".to_owned(), Value::from("present")),
                ("value".to_owned(), Value::from("v")),
            ],
        };
        let creating = update::Transition::new(&p, &request, None).unwrap();
        let ensure = |was: Option<&str>| Change {
            attr: "ensure".to_owned(),
            is: Value::from("present"),
            was: was.map(Value::from),
        };
        let value = Change {
            attr: "value".to_owned(),
            is: Value::from("v"),
            was: None,
        };
        assert!(created_by(
            &p,
            &creating,
            &[ensure(Some("absent")), value.clone()]
        ));
        assert!(created_by(&p, &creating, &[ensure(None)]));
        assert!(!created_by(&p, &creating, &[ensure(Some("present"))]));
        assert!(!created_by(&p, &creating, std::slice::from_ref(&value)));
        // Without ensure asked for, the read decides.
        let mut plain = request.clone();
        plain.attrs.remove(0);
        let creating = update::Transition::new(&p, &plain, None).unwrap();
        assert!(created_by(&p, &creating, std::slice::from_ref(&value)));
        // A change of what existed creates nothing, whatever it says.
        let found = resource(&[("ensure", "present"), ("value", "w")]);
        let changing = update::Transition::new(&p, &request, Some(found)).unwrap();
        assert!(!created_by(&p, &changing, &[ensure(Some("absent"))]));
    }

    #[test]
    fn a_settlement_applies_to_the_items_read() {
        let item = |name: &str, created: bool| StoredItem {
            provider: "t::t".to_owned(),
            type_name: "t".to_owned(),
            name: name.to_owned(),
            state: ItemState::Initial,
            properties: Map::new(),
            created,
            requires: Vec::new(),
            owners: Vec::new(),
            undetermined: false,
        };
        let mut stored = vec![item("a", false), item("b", true), item("c", false)];
        apply_to(
            &mut stored,
            &Settlement {
                items: vec![item("c", true)],
                removed: vec![("t::t".to_owned(), "b".to_owned())],
                settled: Vec::new(),
            },
        );
        // Each written item replaces its own (not the first of its provider).
        assert_eq!(stored, [item("a", false), item("c", true)]);
    }
}
