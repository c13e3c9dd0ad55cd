//! Items and the state store: which stored items a manifest no longer
//! lists (removed when ral created them, forgotten otherwise), the
//! properties kept for an item (sensitive values as keyed digests), and
//! the item state each plan step leads to; and the refusal of a run that
//! would remove everything without being asked to.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;

use serde_json::{Map, Value as Json};

use crate::discovery::Registry;
use crate::provider::Provider;
use crate::store::{ItemState, OwedRefresh, StoreKey, StoredItem};
use crate::types::Value;
use crate::update::Request;

use super::catalog::{Catalog, Item};
use super::manifest::Origin;

/// The properties the store keeps for a request: every attribute's value
/// as JSON, a sensitive one as `{"hmac": HEX}`, its keyed digest under the
/// store's key (a store written before keys kept `{"sha256": ...}`: such an
/// item reads as Updated once, and is kept keyed from then on).
pub fn properties(provider: &Provider, request: &Request, key: &StoreKey) -> Map<String, Json> {
    // A refresh's parameters are no state of the resource.
    request
        .attrs
        .iter()
        .filter(|(attr, _)| {
            provider
                .attribute(attr)
                .is_none_or(|a| a.kind != crate::metadata::Kind::Refresh)
        })
        .map(|(attr, value)| {
            (
                attr.clone(),
                kept(provider, &request.name, attr, value, key),
            )
        })
        .collect()
}

/// How the store keeps one value of `attr`: as JSON, or as
/// [`kept_value`] when it is kept keyed and hides something (an empty
/// text hides nothing: `ral state` shows it as the empty password it is).
pub fn kept(provider: &Provider, name: &str, attr: &str, value: &Value, key: &StoreKey) -> Json {
    let keyed = provider.attribute(attr).is_some_and(|a| a.kept_keyed());
    match keyed && crate::secrets::hides(value) {
        true => kept_value(provider, name, attr, value, key),
        false => Json::from(value),
    }
}

/// What the state store remembers of earlier runs: what ral last applied
/// to each resource it keeps, and the refreshes it still owes.
pub struct Remembered<'s> {
    by_key: HashMap<(String, &'s str), &'s StoredItem>,
    key: &'s StoreKey,
    owed: HashSet<(String, String)>,
}

impl<'s> Remembered<'s> {
    pub fn new(
        stored: &'s [StoredItem],
        key: &'s StoreKey,
        owed: &'s [OwedRefresh],
    ) -> Remembered<'s> {
        Remembered {
            by_key: stored
                .iter()
                .map(|item| ((item.provider.clone(), item.name.as_str()), item))
                .collect(),
            key,
            owed: owed
                .iter()
                .map(|o| (o.provider.clone(), o.name.clone()))
                .collect(),
        }
    }

    fn item(&self, provider: &Provider, name: &str) -> Option<&'s StoredItem> {
        self.by_key.get(&(provider.qualified_name(), name)).copied()
    }

    /// Whether catalog item `item`, which has a task, drifted from what
    /// ral applied: the store says it was applied as the manifest now
    /// says. `None` when the store cannot tell: for an item ral never
    /// applied, and for a command (one that runs again was not changed by
    /// anyone).
    pub fn drifted(&self, item: &Item) -> Option<bool> {
        if item.provider.meta.runs_commands {
            return None;
        }
        let before = self.item(item.provider, item.name())?;
        let now = properties(item.provider, &item.request, self.key);
        Some(state_before(Some(before), &now) == ItemState::Applied)
    }

    /// Drops from `changes`, planned for the existing resource `name`, the
    /// write-only parameters ral last applied to it with the same value:
    /// they go to the provider again with the other changes, but change
    /// nothing, so they are no change to show.
    pub fn hide_applied_parameters(
        &self,
        provider: &Provider,
        name: &str,
        changes: &mut Vec<crate::resource::Change>,
    ) {
        let Some(item) = self.applied_item(provider, name) else {
            return;
        };
        changes.retain(|change| !self.applied_as(item, provider, name, &change.attr, &change.is));
    }

    /// The stored item of the resource `name`, when ral applied it as it
    /// was asked to (so that its stored parameters are what it was given).
    fn applied_item(&self, provider: &Provider, name: &str) -> Option<&'s StoredItem> {
        self.item(provider, name)
            .filter(|item| item.state == ItemState::Applied && !item.undetermined)
    }

    /// Whether `attr` is a write-only parameter that ral last applied to
    /// the resource `name` (its stored `item`) with `value`.
    fn applied_as(
        &self,
        item: &StoredItem,
        provider: &Provider,
        name: &str,
        attr: &str,
        value: &crate::types::Value,
    ) -> bool {
        provider
            .attribute(attr)
            .is_some_and(|a| a.kind == crate::metadata::Kind::Write)
            && item.properties.get(attr) == Some(&kept(provider, name, attr, value, self.key))
    }

    /// Whether an earlier run owes the resource a refresh: one was called
    /// for and did not succeed (see `store::refreshes`).
    pub fn owes_refresh(&self, provider: &Provider, name: &str) -> bool {
        self.owed
            .contains(&(provider.qualified_name(), name.to_owned()))
    }

    /// Whether a transition of an existing resource sets only write-only
    /// parameters, each to the value ral last applied to it: those are
    /// never read back, so only the store can tell that they are as
    /// asked, and such a transition has nothing to do (`managehome`
    /// after the user was made with it).
    pub fn settles(&self, provider: &Provider, transition: &crate::update::Transition) -> bool {
        let Some(item) = self.applied_item(provider, &transition.name) else {
            return false;
        };
        let exists = transition.found && !transition.state.is_absent();
        exists
            && (transition.should.iter())
                .all(|(attr, value)| self.applied_as(item, provider, &transition.name, attr, value))
    }
}

/// How the store keeps one sensitive value: `{"hmac": HEX}`.
fn kept_value(provider: &Provider, name: &str, attr: &str, value: &Value, key: &StoreKey) -> Json {
    serde_json::json!({"hmac": digest(key, provider, name, attr, value)})
}

/// The keyed digest of one sensitive value, bound to its provider, item
/// and attribute: the same secret in two places gives two digests, so the
/// store does not even tell that two secrets are equal.
fn digest(key: &StoreKey, provider: &Provider, name: &str, attr: &str, value: &Value) -> String {
    key.digest(&[
        provider.qualified_name().as_bytes(),
        name.as_bytes(),
        attr.as_bytes(),
        Json::from(value).to_string().as_bytes(),
    ])
}

/// What the store means for a catalog: the stored items it no longer
/// lists, split into those to remove and those to forget.
#[derive(Debug, Default)]
pub struct Leftovers {
    /// Created by ral, so removed (ensure: absent) by the plan.
    pub remove: Vec<StoredItem>,
    /// Not created by ral (or of a provider that cannot remove): dropped
    /// from the store, left as they are.
    pub forget: Vec<StoredItem>,
}

/// Splits the stored items the catalog does not list.
pub fn leftovers(
    catalog: &Catalog,
    stored: &[StoredItem],
    registry: &Registry,
    keep_removed: bool,
) -> Leftovers {
    let listed: HashSet<(String, &str)> = catalog
        .items
        .iter()
        .map(|item| (item.provider.qualified_name(), item.name()))
        .collect();
    let mut out = Leftovers::default();
    for item in stored {
        if listed.contains(&(item.provider.clone(), item.name.as_str())) {
            continue;
        }
        if keep_removed {
            continue;
        }
        // Without its provider (a data directory not given this time),
        // nothing can be decided: the item stays as it is.
        let Ok(provider) = registry.resolve(&item.provider) else {
            log::warn!(
                "{}[{}] is in no manifest, but its provider {} is not found: it stays in the \
                 state store, untouched",
                item.type_name,
                crate::text::escape(&item.name),
                item.provider
            );
            continue;
        };
        // Created by ral, also when not yet as asked (Initial: a run that
        // ended early created it, as settling its intent found).
        let removable = item.created && crate::update::can_be_absent(provider);
        if removable {
            out.remove.push(item.clone());
        } else {
            out.forget.push(item.clone());
        }
    }
    out
}

/// A run refused because it would remove everything ral manages while
/// naming nothing of it: what an empty, truncated or wrong file looks
/// like. `--destroy` asks for such a run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Sweep {
    /// The manifests declare no resource at all.
    #[error(
        "{files}: no resource is declared: an empty manifest means removing everything ral \
         manages (whatever that is now), so it is refused and nothing ran (to remove \
         everything ral manages that these manifests do not list, give --destroy)"
    )]
    NothingDeclared { files: String },
    /// The manifests name none of the items in the store, and some of
    /// those would be removed.
    #[error(
        "{files}: lists none of the resources ral manages ({managed}), so this run would \
         remove the {removals} ral created ({examples}); refused, nothing ran (to remove \
         everything ral manages that these manifests do not list, give --destroy)"
    )]
    NoneListed {
        files: String,
        managed: usize,
        removals: usize,
        /// The first few removals, `TYPE[NAME]`.
        examples: String,
    },
}

/// How many removals a [`Sweep::NoneListed`] names.
const EXAMPLES: usize = 3;

/// Refuses a run whose manifests declare no resource, unless `destroy`:
/// checked as soon as the manifests are read, before anything else runs.
pub fn check_declared(manifests: &[PathBuf], declared: usize, destroy: bool) -> Result<(), Sweep> {
    if destroy || declared > 0 {
        return Ok(());
    }
    Err(Sweep::NothingDeclared {
        files: files(manifests),
    })
}

/// Refuses, unless `destroy`, a run that declares nothing, or whose
/// catalog names none of the `stored` items while `leftovers` removes
/// some of them: the plan would remove every item ral manages.
pub fn check_sweep(
    manifests: &[PathBuf],
    catalog: &Catalog,
    stored: &[StoredItem],
    leftovers: &Leftovers,
    destroy: bool,
) -> Result<(), Sweep> {
    check_declared(manifests, catalog.items.len(), destroy)?;
    // A plugin item no manifest lists is removed by its plugin's tasks:
    // it counts as a removal, and does not count as named.
    let removed_models: Vec<String> = catalog
        .items
        .iter()
        .filter(|item| item.is_removed_model())
        .map(|item| item.reference())
        .collect();
    if destroy || (leftovers.remove.is_empty() && removed_models.is_empty()) {
        return Ok(());
    }
    let listed: HashSet<(String, &str)> = catalog
        .items
        .iter()
        .filter(|item| item.from_plugin.is_none())
        .map(|item| (item.provider.qualified_name(), item.name()))
        .collect();
    if stored
        .iter()
        .any(|item| listed.contains(&(item.provider.clone(), item.name.as_str())))
    {
        return Ok(());
    }
    let removals = leftovers.remove.len() + removed_models.len();
    let mut examples: Vec<String> = leftovers
        .remove
        .iter()
        .map(|item| {
            format!(
                "{}[{}]",
                crate::text::escape(&item.type_name),
                crate::text::escape(&item.name)
            )
        })
        .chain(removed_models)
        .take(EXAMPLES)
        .collect();
    if removals > EXAMPLES {
        examples.push("...".to_owned());
    }
    Err(Sweep::NoneListed {
        files: files(manifests),
        managed: stored.len(),
        removals,
        examples: examples.join(", "),
    })
}

/// The manifests' names, for a message.
fn files(manifests: &[PathBuf]) -> String {
    let names: Vec<String> = manifests
        .iter()
        .map(|path| crate::text::escape(&path.to_string_lossy()))
        .collect();
    match names.as_slice() {
        [] => "no manifest".to_owned(),
        [one] => one.clone(),
        more => more.join(", "),
    }
}

/// Adds a removal item (`ensure: absent`) to the catalog for each stored
/// item in `remove`, ordered the reverse of how they were applied: what
/// came after another is removed before it. `store` names the origin.
pub fn add_removals<'r>(
    catalog: &mut Catalog<'r>,
    registry: &'r Registry,
    remove: &[StoredItem],
    origin: &Origin,
) {
    let first = catalog.items.len();
    let mut index: HashMap<(&str, &str), usize> = HashMap::new();
    for (at, stored) in remove.iter().enumerate() {
        index.insert((stored.provider.as_str(), stored.name.as_str()), first + at);
    }
    for stored in remove {
        let Ok(provider) = registry.resolve(&stored.provider) else {
            continue;
        };
        let absent = provider
            .attribute("ensure")
            .and_then(|ensure| ensure.attr_type.parse_cli("absent").ok());
        let mut request = Request {
            name: stored.name.clone(),
            attrs: Vec::new(),
        };
        if let Some(absent) = absent {
            request.attrs.push(("ensure".to_owned(), absent));
        }
        catalog.items.push(Item {
            provider,
            role: super::catalog::Role::Resource,
            tie: None,
            from_plugin: None,
            type_query: stored.type_name.clone(),
            origin: origin.clone(),
            request,
            requires: Vec::new(),
            subscribes: Vec::new(),
        });
    }
    let mut requires: Vec<Vec<usize>> = (catalog.items.iter_mut())
        .map(|item| std::mem::take(&mut item.requires))
        .collect();
    // Reverse the stored edges among the removed items.
    for (at, stored) in remove.iter().enumerate() {
        for (provider, name) in &stored.requires {
            if let Some(&prerequisite) = index.get(&(provider.as_str(), name.as_str())) {
                requires[prerequisite].push(first + at);
            }
        }
    }
    // The order of removals the metadata asks for (a group after the
    // users) overrides that reverse, also with the manifest's removals.
    super::catalog::order_removals(&catalog.items, &mut requires, first);
    for (item, mut prerequisites) in catalog.items.iter_mut().zip(requires) {
        prerequisites.sort_unstable();
        prerequisites.dedup();
        item.requires = prerequisites;
    }
    // The manifest's items come first as before, the new ones after them
    // unless one of the manifest's removals waits for them.
    let edges: Vec<&[usize]> = (catalog.items.iter())
        .map(|item| item.requires.as_slice())
        .collect();
    match super::graph::order(&edges) {
        Ok(order) => catalog.order = order,
        // The store's edges were made in an order, and the removals'
        // order only ever joins removals of two types: no cycle is
        // expected; should one come, the removals go last as listed.
        Err(_) => {
            log::warn!("the removals of items no manifest lists are ordered in a cycle");
            catalog.order.extend(first..catalog.items.len());
        }
    }
}

/// The state an item of the catalog is in before the plan runs: new
/// (Initial), applied as the manifest says (Applied), or applied with
/// other properties (Updated).
pub fn state_before(stored: Option<&StoredItem>, properties: &Map<String, Json>) -> ItemState {
    match stored {
        None => ItemState::Initial,
        Some(item) if item.state == ItemState::Initial => ItemState::Initial,
        // What is applied cannot be told: it needs work (see `record`).
        Some(item) if item.undetermined => ItemState::Updated,
        Some(item) if &item.properties == properties => ItemState::Applied,
        Some(_) => ItemState::Updated,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn provider() -> Provider {
        let yaml = "provider:\n  type: t\n  invoke: json\n  actions: [get, set]\n  suitable: true\n  attributes:\n    name: {}\n    value: {}\n    secret: {sensitive: true}\n";
        let meta = crate::metadata::Metadata::parse(yaml, std::path::Path::new("t.yaml")).unwrap();
        Provider::new(meta, "t.prov".into(), None)
    }

    fn request(value: &str, secret: &str) -> Request {
        Request {
            name: "a".to_owned(),
            attrs: vec![
                ("value".to_owned(), Value::from(value)),
                ("secret".to_owned(), Value::from(secret)),
            ],
        }
    }

    #[test]
    fn sensitive_properties_are_keyed_digests() {
        let p = provider();
        let key = StoreKey::from_bytes([7; 32]);
        let kept = properties(&p, &request("v", "hunter2"), &key);
        assert_eq!(kept["value"], "v");
        let digest = kept["secret"]["hmac"].as_str().unwrap();
        assert_eq!(digest.len(), 64);
        assert!(!Json::Object(kept.clone()).to_string().contains("hunter2"));
        let other = StoreKey::from_bytes([8; 32]);
        assert_ne!(
            properties(&p, &request("v", "hunter2"), &other)["secret"],
            kept["secret"]
        );
        assert_eq!(properties(&p, &request("v", "hunter2"), &key), kept);
        // The same secret for another attribute or item digests otherwise.
        let mut renamed = request("v", "hunter2");
        renamed.name = "b".to_owned();
        assert_ne!(properties(&p, &renamed, &key)["secret"], kept["secret"]);
    }

    fn stored(name: &str, created: bool) -> StoredItem {
        StoredItem {
            provider: "t::t".to_owned(),
            type_name: "t".to_owned(),
            name: name.to_owned(),
            state: ItemState::Applied,
            properties: Map::new(),
            created,
            requires: Vec::new(),
            owners: Vec::new(),
            undetermined: false,
        }
    }

    fn catalog<'r>(provider: &'r Provider, names: &[&str]) -> Catalog<'r> {
        let origin = Origin {
            file: std::sync::Arc::from(std::path::Path::new("m.yaml")),
            line: 1,
        };
        Catalog {
            items: names
                .iter()
                .map(|name| Item {
                    provider,
                    role: super::super::catalog::Role::Resource,
                    tie: None,
                    from_plugin: None,
                    type_query: "t".to_owned(),
                    origin: origin.clone(),
                    request: Request {
                        name: (*name).to_owned(),
                        attrs: Vec::new(),
                    },
                    requires: Vec::new(),
                    subscribes: Vec::new(),
                })
                .collect(),
            order: (0..names.len()).collect(),
            plugins: None,
            tangled: Vec::new(),
        }
    }

    #[test]
    fn a_run_that_would_remove_everything_is_refused_unless_asked_for() {
        let p = provider();
        let files = [PathBuf::from("a.yaml"), PathBuf::from("b.yaml")];
        let store = [stored("a", true), stored("b", true), stored("c", false)];
        let leftovers = |remove: &[&StoredItem]| Leftovers {
            remove: remove.iter().map(|&item| item.clone()).collect(),
            forget: Vec::new(),
        };
        // Nothing declared: refused whatever the store holds.
        let none = catalog(&p, &[]);
        let refused = check_sweep(&files, &none, &[], &Leftovers::default(), false);
        assert_eq!(
            refused,
            Err(Sweep::NothingDeclared {
                files: "a.yaml, b.yaml".to_owned()
            })
        );
        assert!(refused.unwrap_err().to_string().contains("--destroy"));
        assert!(check_declared(&files, 0, false).is_err());
        assert!(check_declared(&files, 1, false).is_ok());
        assert!(check_declared(&[], 0, true).is_ok());
        assert!(check_sweep(&files, &none, &store, &Leftovers::default(), true).is_ok());
        // Naming none of the stored items while removing some: refused.
        let other = catalog(&p, &["x"]);
        let all = leftovers(&[&store[0], &store[1]]);
        assert_eq!(
            check_sweep(&files[..1], &other, &store, &all, false),
            Err(Sweep::NoneListed {
                files: "a.yaml".to_owned(),
                managed: 3,
                removals: 2,
                examples: "t[a], t[b]".to_owned(),
            })
        );
        assert!(check_sweep(&files, &other, &store, &all, true).is_ok());
        // Nothing to remove (only forgotten, or --keep-removed): allowed.
        assert!(check_sweep(&files, &other, &store, &Leftovers::default(), false).is_ok());
        // One stored item named: the others are removed as usual.
        let named = catalog(&p, &["x", "c"]);
        assert!(check_sweep(&files, &named, &store, &all, false).is_ok());
        // Many removals: the first few are named.
        let many: Vec<StoredItem> = (0..5).map(|n| stored(&n.to_string(), true)).collect();
        let Err(Sweep::NoneListed { examples, .. }) = check_sweep(
            &files,
            &other,
            &many,
            &leftovers(&many.iter().collect::<Vec<_>>()),
            false,
        ) else {
            panic!("not refused");
        };
        assert_eq!(examples, "t[0], t[1], t[2], ...");
        // Exactly as many as are named: no ellipsis.
        let three = &many[..EXAMPLES];
        let Err(Sweep::NoneListed { examples, .. }) = check_sweep(
            &files,
            &other,
            three,
            &leftovers(&three.iter().collect::<Vec<_>>()),
            false,
        ) else {
            panic!("not refused");
        };
        assert_eq!(examples, "t[0], t[1], t[2]");
    }

    /// A provider of type `u` whose `ensure` takes `ensure` (its values).
    fn provider_u(ensure: &str) -> Provider {
        let yaml = format!(
            "provider:\n  type: u\n  invoke: json\n  actions: [get, set]\n  suitable: true\n  attributes:\n    name: {{}}\n    ensure: {{type: '{ensure}'}}\n"
        );
        let meta = crate::metadata::Metadata::parse(&yaml, std::path::Path::new("u.yaml")).unwrap();
        Provider::new(meta, "u.prov".into(), None)
    }

    fn stored_of(provider: &str, name: &str, created: bool) -> StoredItem {
        StoredItem {
            provider: provider.to_owned(),
            type_name: provider.split("::").next().unwrap().to_owned(),
            ..stored(name, created)
        }
    }

    fn names(items: &[StoredItem]) -> Vec<&str> {
        items.iter().map(|item| item.name.as_str()).collect()
    }

    #[test]
    fn only_what_ral_created_and_can_remove_is_removed_the_rest_forgotten() {
        let p = provider();
        let registry = Registry::of(vec![provider(), provider_u("enum[present]")]);
        let listed = catalog(&p, &["kept"]);
        let store = [
            stored("kept", true),
            stored("made", true),
            stored("adopted", false),
            stored_of("u::u", "cannot-go", true),
            stored_of("v::v", "no-provider", true),
        ];
        let out = leftovers(&listed, &store, &registry, false);
        assert_eq!(names(&out.remove), ["made"]);
        assert_eq!(names(&out.forget), ["adopted", "cannot-go"]);
        // --keep-removed: nothing removed, nothing forgotten.
        let out = leftovers(&listed, &store, &registry, true);
        assert!(out.remove.is_empty() && out.forget.is_empty());
    }

    #[test]
    fn removals_are_absent_requests_ordered_the_reverse_of_their_edges() {
        let p = provider();
        let registry = Registry::of(vec![provider_u("enum[present, absent]")]);
        let mut listed = catalog(&p, &["kept"]);
        let item = |name: &str, requires: &[&str]| StoredItem {
            requires: requires
                .iter()
                .map(|r| ("u::u".to_owned(), (*r).to_owned()))
                .collect(),
            ..stored_of("u::u", name, true)
        };
        // c requires b, which requires a: c goes first, a last.
        let remove = [item("a", &[]), item("b", &["a"]), item("c", &["b"])];
        let origin = Origin {
            file: std::sync::Arc::from(std::path::Path::new("state.db")),
            line: 0,
        };
        add_removals(&mut listed, &registry, &remove, &origin);
        let added: Vec<(&str, Vec<usize>)> = listed.items[1..]
            .iter()
            .map(|item| (item.name(), item.requires.clone()))
            .collect();
        assert_eq!(added, [("a", vec![2]), ("b", vec![3]), ("c", vec![])]);
        for item in &listed.items[1..] {
            assert_eq!(
                item.request.attrs,
                [("ensure".to_owned(), Value::from("absent"))]
            );
        }
        assert_eq!(listed.order, [0, 3, 2, 1]);
    }

    #[test]
    fn a_stored_group_is_removed_after_the_users_whatever_its_stored_edges_say() {
        use super::super::catalog::tests::{ordered, registry};
        let registry = registry();
        let origin = Origin {
            file: std::sync::Arc::from(std::path::Path::new("state.db")),
            line: 0,
        };
        // The group was made after the user (it required it): reversed,
        // its removal would come first, and fail while it is the user's
        // primary group.
        let group = StoredItem {
            requires: vec![("user::etc_passwd".to_owned(), "u".to_owned())],
            ..stored_of("group::etc_group", "g", true)
        };
        let user = stored_of("user::etc_passwd", "u", true);
        let remove = [group.clone(), user.clone()];
        let (declared, _) =
            super::super::manifest::parse("user:\n  v: {}\n", std::path::Path::new("m.yaml"));
        let mut catalog = Catalog::build(&registry, &declared).unwrap();
        add_removals(&mut catalog, &registry, &remove, &origin);
        assert_eq!(ordered(&catalog), ["user[v]", "user[u]", "group[g]"]);
        assert_eq!(catalog.items[1].requires, [2]);
        assert!(catalog.items[2].requires.is_empty());
        // A group the manifest removes waits for a user the store's
        // leftovers remove, though it comes first in the manifest.
        let (declared, _) = super::super::manifest::parse(
            "group:\n  h: {ensure: absent}\n",
            std::path::Path::new("m.yaml"),
        );
        let mut catalog = Catalog::build(&registry, &declared).unwrap();
        add_removals(&mut catalog, &registry, &[user], &origin);
        assert_eq!(ordered(&catalog), ["user[u]", "group[h]"]);
        assert_eq!(catalog.items[0].requires, [1]);
    }

    #[test]
    fn only_a_task_whose_item_was_applied_as_asked_is_drifted() {
        use super::super::plan::{mark_drifted, Action, Plan, PlanState, Task};
        let p = provider();
        let listed = catalog(&p, &["same", "other", "new"]);
        let task = |item: usize| Task {
            ..Task::pending(item, Action::Change, Vec::new())
        };
        let mut plan = Plan {
            id: "p".to_owned(),
            state: PlanState::Initial,
            tasks: vec![task(0), task(1), task(2)],
            unchanged: 0,
        };
        // "same" was applied as the manifest says (no attributes); "other"
        // with a value the manifest no longer asks for; "new" never.
        let mut other = stored("other", true);
        other
            .properties
            .insert("value".to_owned(), Json::from("old"));
        let key = StoreKey::from_bytes([7; 32]);
        let stored = [stored("same", true), other];
        mark_drifted(&listed, &mut plan, &Remembered::new(&stored, &key, &[]));
        let drifted: Vec<bool> = plan.tasks.iter().map(|t| t.drifted).collect();
        assert_eq!(drifted, [true, false, false]);
    }

    #[test]
    fn the_state_before_a_plan_follows_the_applied_properties() {
        let p = provider();
        let applied = properties(&p, &request("v", "s"), &StoreKey::from_bytes([7; 32]));
        let stored = |state: ItemState| StoredItem {
            provider: "t::t".to_owned(),
            type_name: "t".to_owned(),
            name: "a".to_owned(),
            state,
            properties: applied.clone(),
            created: true,
            requires: Vec::new(),
            owners: Vec::new(),
            undetermined: false,
        };
        let other = properties(&p, &request("w", "s"), &StoreKey::from_bytes([7; 32]));
        assert_eq!(state_before(None, &applied), ItemState::Initial);
        assert_eq!(
            state_before(Some(&stored(ItemState::Initial)), &applied),
            ItemState::Initial
        );
        assert_eq!(
            state_before(Some(&stored(ItemState::Applied)), &applied),
            ItemState::Applied
        );
        assert_eq!(
            state_before(Some(&stored(ItemState::Applied)), &other),
            ItemState::Updated
        );
        // Updated, and the manifest says again what was applied: Applied.
        assert_eq!(
            state_before(Some(&stored(ItemState::Updated)), &applied),
            ItemState::Applied
        );
    }
}
