//! The catalog: a manifest checked against the providers' metadata. Every
//! resource gets its provider and typed values, every reference and
//! automatic dependency becomes an edge, and the resources are put in
//! dependency order. All problems are collected, so one run reports them
//! all.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use crate::discovery::Registry;
use crate::error::Problem;
use crate::provider::Provider;
use crate::text::escape;
use crate::types::{Value, Written};
use crate::update::{Request, WrittenIn};

use std::sync::Arc;

use super::from_plugin::{FromPlugin, PluginRun};
use super::graph;
use super::manifest::{Declared, Origin, RawAttr, Reference};

/// What a catalog item is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// A resource, of a manifest or a plugin's config task.
    Resource,
    /// A model plugin's item: never read nor changed itself, it stands
    /// for its tasks (what requires it waits for them all). Its provider
    /// is its item type's, which has no actions.
    Model,
    /// A plugin's callback or remote task: never read, it runs whenever
    /// it is in the plan. Its provider is its item's type.
    Action,
}

/// One resource of the manifest, checked.
#[derive(Debug, Clone)]
pub struct Item<'r> {
    pub provider: &'r Provider,
    pub role: Role,
    /// For a plugin's task: the catalog index of the model item whose
    /// state it settles.
    pub tie: Option<usize>,
    /// Where a plugin's task or removed item came from.
    pub from_plugin: Option<Arc<FromPlugin>>,
    /// The type or qualified provider name the manifest listed it under.
    pub type_query: String,
    pub origin: Origin,
    /// The name and the typed attributes (`ensure` included).
    pub request: Request,
    /// The items it must come after, by index.
    pub requires: Vec<usize>,
    /// The items whose change in a run refreshes it (each also in
    /// `requires`).
    pub subscribes: Vec<usize>,
}

impl Item<'_> {
    pub fn name(&self) -> &str {
        &self.request.name
    }

    /// Whether it is a plugin item no manifest lists any more, which its
    /// plugin's tasks remove.
    pub fn is_removed_model(&self) -> bool {
        self.role == Role::Model
            && self
                .from_plugin
                .as_deref()
                .is_some_and(FromPlugin::is_removal)
    }

    /// `TYPE[NAME]`, as the manifest wrote the type; a plugin's callback
    /// or command is `callback[VPATH:ID]` or `remote[VPATH:ID]`.
    pub fn reference(&self) -> String {
        if let Some(task) = self.from_plugin.as_deref().and_then(FromPlugin::task) {
            if self.role == Role::Action {
                return format!("{}[{}]", task.kind.as_str(), escape(&self.request.name));
            }
        }
        format!(
            "{}[{}]",
            escape(&self.type_query),
            escape(&self.request.name)
        )
    }
}

/// A checked manifest: its items in manifest order, and an order that
/// puts every item after its prerequisites.
#[derive(Debug, Clone)]
pub struct Catalog<'r> {
    pub items: Vec<Item<'r>>,
    pub order: Vec<usize>,
    /// When model plugins made some of the items: what their callbacks
    /// are given when they run.
    pub plugins: Option<Arc<PluginRun>>,
    /// Pairs of items whose metadata orders each after the other (a group
    /// listing as a member a user whose gid is the group's): unordered,
    /// which does when either exists already (as what `ralsh --yaml`
    /// prints), and refused by the plan when it would create both.
    pub tangled: Vec<(usize, usize)>,
}

impl<'r> Catalog<'r> {
    /// Checks the declared resources against the providers of `registry`.
    pub fn build(
        registry: &'r Registry,
        declared: &[Declared],
    ) -> Result<Catalog<'r>, Vec<Problem>> {
        let mut problems = Vec::new();
        let accepted = Accepted::check(registry, declared, &mut problems);
        let written = Edges::of(registry, &accepted, &mut problems);
        let mut items = accepted.items;
        let tangled = settle_edges(&mut items, written);
        let edges: Vec<&[usize]> = items.iter().map(|i| i.requires.as_slice()).collect();
        let order = match graph::order(&edges) {
            Ok(order) => order,
            Err(cycles) => {
                problems.extend(cycles.iter().map(|cycle| cycle_problem(&items, cycle)));
                Vec::new()
            }
        };
        if problems.is_empty() {
            Ok(Catalog {
                items,
                order,
                plugins: None,
                tangled,
            })
        } else {
            Err(problems)
        }
    }
}

/// The declarations checked: the items they became, and what the
/// references between them are looked up in.
struct Accepted<'a, 'r> {
    items: Vec<Item<'r>>,
    /// (provider, name) -> item, for duplicates and references.
    index: HashMap<Key<'a>, usize>,
    /// What each item was declared as.
    sources: Vec<&'a Declared>,
    /// Declared resources with problems of their own: their references
    /// are still checked, so that one run reports every problem.
    rejected: Vec<&'a Declared>,
    /// Every resource declared, rejected or not: a reference to one
    /// with problems of its own adds none.
    named: HashSet<Key<'a>>,
    /// The item each declaration became, if it became one.
    item_of: Vec<Option<usize>>,
}

impl<'a, 'r: 'a> Accepted<'a, 'r> {
    /// Checks each of `declared`; the problems go to `problems`.
    fn check(
        registry: &'r Registry,
        declared: &'a [Declared],
        problems: &mut Vec<Problem>,
    ) -> Accepted<'a, 'r> {
        let mut accepted = Accepted {
            items: Vec::with_capacity(declared.len()),
            index: HashMap::new(),
            sources: Vec::new(),
            rejected: Vec::new(),
            named: HashSet::new(),
            item_of: vec![None; declared.len()],
        };
        for (at, resource) in declared.iter().enumerate() {
            if let Ok(provider) = registry.resolve_item(&resource.type_query) {
                accepted.named.insert(key(provider, &resource.name));
            }
            match check_resource(registry, resource, problems) {
                Some(item) => accepted.add(at, resource, item, problems),
                None => accepted.rejected.push(resource),
            }
        }
        accepted
    }

    /// Adds `item`, which the `at`th declaration `resource` became,
    /// unless an earlier one declared it: a problem then.
    fn add(
        &mut self,
        at: usize,
        resource: &'a Declared,
        item: Item<'r>,
        problems: &mut Vec<Problem>,
    ) {
        let key = key(item.provider, &resource.name);
        if let Some(&first) = self.index.get(&key) {
            let earlier: &Item = &self.items[first];
            problems.push(resource.origin.problem(format!(
                "{} is declared twice; first as {} at {}",
                item.reference(),
                earlier.reference(),
                place(&earlier.origin)
            )));
            return;
        }
        self.index.insert(key, self.items.len());
        self.item_of[at] = Some(self.items.len());
        self.items.push(item);
        self.sources.push(resource);
    }
}

/// The edges the declarations write: for each item, those it comes
/// after, and those whose change refreshes it.
struct Edges {
    requires: Vec<Vec<usize>>,
    subscribes: Vec<Vec<usize>>,
}

impl Edges {
    /// The edges of every reference `accepted` declares; a reference that
    /// names nothing, or a refresh an item cannot take, is a problem.
    fn of<'a>(
        registry: &'a Registry,
        accepted: &Accepted<'a, '_>,
        problems: &mut Vec<Problem>,
    ) -> Edges {
        // Declarations found already; one with problems of its own (which
        // are reported) is no edge.
        let requires = (accepted.sources.iter())
            .map(|resource| {
                (resource.require_at.iter())
                    .filter_map(|&other| accepted.item_of[other])
                    .collect()
            })
            .collect();
        let mut edges = Edges {
            requires,
            subscribes: vec![Vec::new(); accepted.items.len()],
        };
        // The type each reference names, looked up once per type written.
        let mut types = Types::new(registry);
        // The accepted resources' references make edges; a rejected one's
        // are still checked, so that one run reports every problem.
        let all = (accepted.sources.iter().enumerate())
            .map(|(at, resource)| (Some(at), *resource))
            .chain(accepted.rejected.iter().map(|resource| (None, *resource)));
        for (at, resource) in all {
            edges.add_references(&mut types, accepted, at, resource, problems);
        }
        edges
    }

    /// Adds the edges of the references `resource` writes: the item at
    /// `at`, or a rejected declaration (`None`), which makes none but
    /// has its references checked.
    fn add_references<'a>(
        &mut self,
        types: &mut Types<'a>,
        accepted: &Accepted<'a, '_>,
        at: Option<usize>,
        resource: &'a Declared,
        problems: &mut Vec<Problem>,
    ) {
        let items = &accepted.items;
        let own = match at {
            Some(at) => items[at].reference(),
            None => format!(
                "{}[{}]",
                escape(&resource.type_query),
                escape(&resource.name)
            ),
        };
        let written = [
            (&resource.require, "require"),
            (&resource.before, "before"),
            (&resource.notify, "notify"),
            (&resource.subscribe, "subscribe"),
        ];
        for (references, word) in written {
            for reference in references {
                let problem = |message: String| {
                    Origin {
                        line: reference.line,
                        ..resource.origin.clone()
                    }
                    .problem(format!("{own}: {word} {reference}: {message}"))
                };
                let other = match lookup(types, &accepted.index, reference) {
                    Ok(other) => other,
                    // Named, with problems of its own: no edge, but
                    // what this one cannot do is still said.
                    Err((_, key)) if accepted.named.contains(&key) => {
                        if word == "subscribe" {
                            let why = at.and_then(|at| cannot_refresh(&items[at]));
                            problems.extend(why.map(&problem));
                        }
                        continue;
                    }
                    Err((message, _)) => {
                        problems.push(problem(message));
                        continue;
                    }
                };
                let why = self.add_edge(items, word, at, other);
                problems.extend(why.map(&problem));
            }
        }
    }

    /// Adds the edge that `word` (`require`, `before`, `notify` or
    /// `subscribe`) written at the item at `at` (`None`: a rejected
    /// declaration) makes with the item at `other`; why the item to be
    /// refreshed cannot be, if it cannot.
    fn add_edge(
        &mut self,
        items: &[Item],
        word: &str,
        at: Option<usize>,
        other: usize,
    ) -> Option<String> {
        // (earlier, later): the later one requires the earlier; a
        // rejected resource is neither.
        let (earlier, later) = match word {
            "require" | "subscribe" => (Some(other), at),
            _ => (at, Some(other)),
        };
        if let (Some(earlier), Some(later)) = (earlier, later) {
            self.requires[later].push(earlier);
        }
        let refreshes = word == "notify" || word == "subscribe";
        let refreshed = later.filter(|_| refreshes)?;
        match (cannot_refresh(&items[refreshed]), earlier) {
            (Some(why), _) => Some(why),
            (None, Some(earlier)) => {
                self.subscribes[refreshed].push(earlier);
                None
            }
            (None, None) => None,
        }
    }
}

/// Gives each of `items` the items it comes after and those whose
/// change refreshes it: those `written`, with the edges the metadata
/// implies where the manifest does not order the pair the other way.
/// Returns the pairs the metadata orders both ways
/// ([`Catalog::tangled`]).
fn settle_edges(items: &mut [Item], written: Edges) -> Vec<(usize, usize)> {
    let Edges {
        requires,
        mut subscribes,
    } = written;
    // What the metadata implies gives way to the order of removals;
    // what the manifest writes does not (against it, it is a cycle).
    let mut automatic: Vec<Vec<usize>> = vec![Vec::new(); items.len()];
    add_automatic_edges(items, &mut automatic);
    add_declared_relations(items, &mut automatic, &mut subscribes);
    let tangled = untangle(&requires, &mut automatic);
    order_removals(items, &mut automatic, 0);
    for (at, ((mut prerequisites, implied), mut sources)) in requires
        .into_iter()
        .zip(automatic)
        .zip(subscribes)
        .enumerate()
    {
        prerequisites.extend(implied);
        prerequisites.sort_unstable();
        prerequisites.dedup();
        // A refresh comes only with an order: one whose order gave
        // way goes with it.
        sources.retain(|source| prerequisites.binary_search(source).is_ok());
        sources.sort_unstable();
        sources.dedup();
        items[at].requires = prerequisites;
        items[at].subscribes = sources;
    }
    tangled
}

/// What tells catalog items apart: their provider's type and name, and
/// the resource's name. Borrowed, as a catalog of many resources would
/// otherwise copy every name twice while it is built.
type Key<'a> = (&'a str, &'a str, &'a str);

fn key<'a>(provider: &'a Provider, name: &'a str) -> Key<'a> {
    (&provider.meta.type_name, &provider.meta.name, name)
}

fn place(origin: &Origin) -> String {
    format!("{}:{}", origin.file.display(), origin.line)
}

/// The providers (or plugin item types) the types written in references
/// name, each looked up once: a catalog may hold many more references
/// than types.
struct Types<'a> {
    registry: &'a Registry,
    found: HashMap<&'a str, Result<&'a Provider, String>>,
}

impl<'a> Types<'a> {
    fn new(registry: &'a Registry) -> Types<'a> {
        Types {
            registry,
            found: HashMap::new(),
        }
    }

    /// The provider `type_query` names, or why none (escaped).
    fn resolve(&mut self, type_query: &'a str) -> Result<&'a Provider, String> {
        let registry = self.registry;
        self.found
            .entry(type_query)
            .or_insert_with(|| {
                registry
                    .resolve_reference(type_query)
                    .map_err(|e| escape(&e.to_string()))
            })
            .clone()
    }
}

/// The item a reference names, or why there is none.
/// Fails with the message and the key looked for.
fn lookup<'a>(
    types: &mut Types<'a>,
    index: &HashMap<Key<'a>, usize>,
    reference: &'a Reference,
) -> Result<usize, (String, Key<'a>)> {
    let provider = types
        .resolve(&reference.type_query)
        .map_err(|message| (message, Default::default()))?;
    let key = key(provider, &reference.name);
    match index.get(&key) {
        Some(&at) => Ok(at),
        None => {
            // The closest name of that type, for a misspelt one.
            let names = index
                .keys()
                .filter(|(type_name, name, _)| (*type_name, *name) == (key.0, key.1))
                .map(|(_, _, name)| *name);
            let hint = crate::suggest::did_you_mean(&reference.name, names);
            Err((format!("no such resource in the manifest{hint}"), key))
        }
    }
}

/// Whether `item` is a resource the plan removes (`ensure: absent`).
fn removed(item: &Item) -> bool {
    item.role == Role::Resource && item.request.wants_absent()
}

/// The order of removals the metadata asks for (`removed_after`): each
/// pair `(later, earlier)` of removed items, the removal of `later` (a
/// group) waiting for that of `earlier` (a user), where `later` is an
/// item from `from` on or `earlier` is. Removing the one never needs the
/// other gone, while the other way round may fail.
pub(super) fn removal_waits(items: &[Item], from: usize) -> Vec<(usize, usize)> {
    if items
        .iter()
        .all(|item| item.provider.meta.removed_after.is_empty())
    {
        return Vec::new();
    }
    let mut by_type: HashMap<&str, Vec<usize>> = HashMap::new();
    for (at, item) in items.iter().enumerate().filter(|(_, item)| removed(item)) {
        by_type
            .entry(item.provider.type_name())
            .or_default()
            .push(at);
    }
    let mut waits = Vec::new();
    for (later, item) in items.iter().enumerate().filter(|(_, item)| removed(item)) {
        for type_name in &item.provider.meta.removed_after {
            // As references in manifests: a type not found as written is
            // looked for in its reference form.
            let lower = crate::discovery::reference_form(type_name);
            let found = by_type
                .get(type_name.as_str())
                .or_else(|| by_type.get(lower.as_str()));
            for &earlier in found.into_iter().flatten() {
                if earlier != later && (later >= from || earlier >= from) {
                    waits.push((later, earlier));
                }
            }
        }
    }
    waits
}

/// Puts into `requires` the order [`removal_waits`] asks for among the
/// items (those from `from` on with any other), taking out of it what
/// would order a pair the other way: an edge the metadata implies or one
/// reversed from the store's never blocks a removal with a cycle.
pub(super) fn order_removals(items: &[Item], requires: &mut [Vec<usize>], from: usize) {
    // What each later removal already waits for, as a set: a search of
    // its list for every pair would cost the cube of the removals.
    let mut waits_for: HashMap<usize, HashSet<usize>> = HashMap::new();
    for (later, earlier) in removal_waits(items, from) {
        requires[earlier].retain(|&other| other != later);
        let known = waits_for
            .entry(later)
            .or_insert_with(|| requires[later].iter().copied().collect());
        if known.insert(earlier) {
            requires[later].push(earlier);
        }
    }
}

/// Edges the metadata implies: an attribute that names a resource of
/// another type (`refers_to`), or holds the value of one of its
/// attributes (`refers_by`), and paths under paths of the same type
/// (`names_are_paths`). Only resources both in the manifest are linked.
fn add_automatic_edges(items: &[Item], requires: &mut [Vec<usize>]) {
    // Most catalogs have no such attribute, and a catalog of many
    // resources would index them all for nothing.
    let links = |provider: &Provider| {
        provider.meta.names_are_paths
            || (provider.meta.attributes.values()).any(|a| a.refers_to.is_some())
    };
    if !items.iter().any(|item| links(item.provider)) {
        return;
    }
    let mut by_type: HashMap<(&str, &str), Vec<usize>> = HashMap::new();
    for (at, item) in items.iter().enumerate() {
        by_type
            .entry((item.provider.type_name(), item.name()))
            .or_default()
            .push(at);
    }
    let by_value = ByValue::of(items);
    for (at, item) in items.iter().enumerate() {
        let mut link = |found: Option<&Vec<usize>>| {
            for &other in found.into_iter().flatten() {
                if other != at {
                    requires[at].push(other);
                }
            }
        };
        for (key, value) in &item.request.attrs {
            let Some(attribute) = item.provider.attribute(key) else {
                continue;
            };
            let Some(target) = attribute.refers_to.as_deref() else {
                continue;
            };
            for value in each_value(value) {
                match attribute.refers_by.as_deref() {
                    Some(by) => link(by_value.get(target, by, value)),
                    None => link(value.as_str().and_then(|name| by_type.get(&(target, name)))),
                }
            }
        }
        if item.provider.meta.names_are_paths {
            for parent in Path::new(item.name()).ancestors().skip(1) {
                if let Some(parent) = parent.to_str().filter(|p| !p.is_empty()) {
                    link(by_type.get(&(item.provider.type_name(), parent)));
                }
            }
        }
    }
}

/// The problem of a dependency cycle (each item after the next, the
/// last after the first), at its first item's place.
pub(super) fn cycle_problem(items: &[Item], cycle: &[usize]) -> Problem {
    let names: Vec<String> = (cycle.iter().chain(cycle.first()))
        .map(|&at| format!("{} ({})", items[at].reference(), place(&items[at].origin)))
        .collect();
    items[cycle[0]].origin.problem(format!(
        "dependency cycle: {}; each must come after the next{}",
        names.join(" -> "),
        cycle_reasons(items, cycle)
    ))
}

/// Takes out of `automatic` (what the metadata implies) the links that
/// a link `written` in the manifest orders the other way (the manifest's
/// word wins), and the pairs it orders both ways, which it returns: such
/// a link matters only when the resource it waits for is to be made,
/// which the plan tells (see [`Catalog::tangled`]).
fn untangle(written: &[Vec<usize>], automatic: &mut [Vec<usize>]) -> Vec<(usize, usize)> {
    for (later, links) in automatic.iter_mut().enumerate() {
        links.retain(|&earlier| !written[earlier].contains(&later));
    }
    let mut tangled = Vec::new();
    for (later, links) in automatic.iter().enumerate() {
        for &earlier in links {
            let both = later < earlier && automatic[earlier].contains(&later);
            if both && !tangled.contains(&(later, earlier)) {
                tangled.push((later, earlier));
            }
        }
    }
    for &(one, other) in &tangled {
        automatic[one].retain(|&at| at != other);
        automatic[other].retain(|&at| at != one);
    }
    tangled
}

/// What attributes make the links of a cycle (each item after the next,
/// the last after the first), as the end of its message: which value
/// names which resource, and what the metadata says of each such
/// attribute (where the way out is told). Empty when no attribute does.
fn cycle_reasons(items: &[Item], cycle: &[usize]) -> String {
    let mut links = Vec::new();
    let mut described: Vec<String> = Vec::new();
    for (at, &later) in cycle.iter().enumerate() {
        let earlier = cycle[(at + 1) % cycle.len()];
        for (attribute, why) in referring(&items[later], &items[earlier]) {
            links.push(why);
            let about = format!(
                "{} {}: {}",
                items[later].provider.type_name(),
                attribute.name,
                attribute.desc
            );
            if !attribute.desc.is_empty() && !described.contains(&about) {
                described.push(about);
            }
        }
    }
    if links.is_empty() {
        return String::new();
    }
    let mut text = format!(": {}", links.join(", and "));
    if !described.is_empty() {
        text.push_str(&format!(" ({})", described.join("; ")));
    }
    text
}

/// The attributes of `item` that refer to `other` (`refers_to`), each
/// with the words saying how.
fn referring<'i>(item: &'i Item, other: &Item) -> Vec<(&'i crate::metadata::Attribute, String)> {
    let mut found = Vec::new();
    for (key, value) in &item.request.attrs {
        let Some(attribute) = item.provider.attribute(key) else {
            continue;
        };
        if attribute.refers_to.as_deref() != Some(other.provider.type_name()) {
            continue;
        }
        let values = each_value(value);
        let why = match attribute.refers_by.as_deref() {
            Some(by) => values
                .iter()
                .find(|value| {
                    (other.request.attrs.iter())
                        .any(|(key, theirs)| key == by && theirs.to_text() == value.to_text())
                })
                .map(|value| {
                    format!(
                        "{}'s {key} {} is {}'s {by}",
                        item.reference(),
                        escape(&value.to_text()),
                        other.reference()
                    )
                }),
            None => {
                let verb = match value {
                    Value::Array(_) => "name",
                    _ => "names",
                };
                (values
                    .iter()
                    .any(|value| value.as_str() == Some(other.name())))
                .then(|| format!("{}'s {key} {verb} {}", item.reference(), other.reference()))
            }
        };
        found.extend(why.map(|why| (attribute, why)));
    }
    found
}

/// The values of an attribute that refers to resources: each of a
/// list's, or the one value.
fn each_value(value: &Value) -> &[Value] {
    match value {
        Value::Array(values) => values.as_slice(),
        value => std::slice::from_ref(value),
    }
}

/// The items by the values of the attributes some `refers_by` names:
/// (type, attribute, value as text) -> items.
struct ByValue<'a> {
    found: HashMap<(&'a str, &'a str, String), Vec<usize>>,
}

impl<'a> ByValue<'a> {
    fn of(items: &'a [Item]) -> ByValue<'a> {
        // The (type, attribute) pairs referred to by value.
        let wanted: std::collections::HashSet<(&str, &str)> = items
            .iter()
            .flat_map(|item| item.provider.meta.attributes.values())
            .filter_map(|a| Some((a.refers_to.as_deref()?, a.refers_by.as_deref()?)))
            .collect();
        let mut found: HashMap<(&str, &str, String), Vec<usize>> = HashMap::new();
        if wanted.is_empty() {
            return ByValue { found };
        }
        for (at, item) in items.iter().enumerate() {
            let type_name = item.provider.type_name();
            for (key, value) in &item.request.attrs {
                if let Some(&(type_name, key)) = wanted.get(&(type_name, key.as_str())) {
                    found
                        .entry((type_name, key, value.to_text()))
                        .or_default()
                        .push(at);
                }
            }
        }
        ByValue { found }
    }

    /// The items of `type_name` whose `attribute` is `value`.
    fn get(&self, type_name: &'a str, attribute: &'a str, value: &Value) -> Option<&Vec<usize>> {
        self.found.get(&(type_name, attribute, value.to_text()))
    }
}

/// Why `item` cannot be refreshed, if it cannot: only a resource whose
/// provider has the refresh action can.
fn cannot_refresh(item: &Item) -> Option<String> {
    if item.role != Role::Resource {
        return Some(format!(
            "{} cannot be refreshed: only resources can, not a plugin's items or tasks",
            item.reference()
        ));
    }
    let meta = &item.provider.meta;
    (!meta.supports(crate::metadata::Action::Refresh)).then(|| {
        format!(
            "{} cannot be refreshed: its provider {} has no refresh action",
            item.reference(),
            item.provider.qualified_name()
        )
    })
}

/// The relationships the providers' metadata declares (`autorequire`,
/// `autobefore`, `autonotify`, `autosubscribe`), between resources both
/// in the manifest. A refresh the later resource cannot take leaves only
/// the order: the metadata speaks of a type, not of what each provider
/// of it can do.
fn add_declared_relations(
    items: &[Item],
    requires: &mut [Vec<usize>],
    subscribes: &mut [Vec<usize>],
) {
    if items
        .iter()
        .all(|item| item.provider.meta.relations.is_empty())
    {
        return;
    }
    let mut by_type: HashMap<(&str, &str), Vec<usize>> = HashMap::new();
    for (at, item) in items.iter().enumerate() {
        if item.role == Role::Resource {
            by_type
                .entry((item.provider.type_name(), item.name()))
                .or_default()
                .push(at);
        }
    }
    for (at, item) in items.iter().enumerate() {
        if item.role != Role::Resource {
            continue;
        }
        for relation in &item.provider.meta.relations {
            // As references in manifests: a type not found as written is
            // looked for in its reference form.
            let lower = crate::discovery::reference_form(&relation.type_name);
            for title in relation.titles(item.name(), &item.request.attrs) {
                let found = by_type
                    .get(&(relation.type_name.as_str(), title))
                    .or_else(|| by_type.get(&(lower.as_str(), title)));
                for &other in found.into_iter().flatten() {
                    if other == at {
                        continue;
                    }
                    let (earlier, later) = if relation.kind.named_first() {
                        (other, at)
                    } else {
                        (at, other)
                    };
                    requires[later].push(earlier);
                    if relation.kind.refreshes() && cannot_refresh(&items[later]).is_none() {
                        subscribes[later].push(earlier);
                    }
                }
            }
        }
    }
}

/// Checks one declared resource; its problems go to `problems`.
fn check_resource<'r>(
    registry: &'r Registry,
    resource: &Declared,
    problems: &mut Vec<Problem>,
) -> Option<Item<'r>> {
    let provider = match registry.resolve_item(&resource.type_query) {
        Ok(provider) => provider,
        Err(e) => {
            // The type as written may hold anything, line breaks too.
            problems.push(resource.origin.problem(escape(&e.to_string())));
            return None;
        }
    };
    let role = role_of(registry, provider, resource);
    let item = |provider, attrs| Item {
        provider,
        role,
        tie: None,
        from_plugin: resource.from_plugin.clone(),
        type_query: resource.type_query.clone(),
        origin: resource.origin.clone(),
        request: Request {
            name: resource.name.clone(),
            attrs,
        },
        requires: Vec::new(),
        subscribes: Vec::new(),
    };
    // A plugin's callback or remote task has no attributes, and an item
    // for removal is not checked against what it was.
    let unchecked = role == Role::Action
        || resource
            .from_plugin
            .as_deref()
            .is_some_and(FromPlugin::is_removal);
    if unchecked {
        return Some(item(provider, Vec::new()));
    }
    let checked = match role {
        Role::Model => check_model(provider, resource),
        _ => check_attributes(registry, provider, resource),
    };
    match checked {
        Ok((provider, mut attrs)) => {
            present_by_default(provider, &mut attrs);
            Some(item(provider, attrs))
        }
        Err(found) => {
            problems.extend(found);
            None
        }
    }
}

/// What a declaration of `provider`'s type makes: a plugin's callback or
/// remote task, a plugin item, or a resource.
fn role_of(registry: &Registry, provider: &Provider, resource: &Declared) -> Role {
    match (&resource.from_plugin, registry.plugin_of(provider)) {
        (Some(from), _) if from.is_action() => Role::Action,
        (_, Some(_)) => Role::Model,
        (_, None) => Role::Resource,
    }
}

/// `TYPE[NAME]` as `resource` was declared, for its problems.
fn declared_reference(resource: &Declared) -> String {
    format!(
        "{}[{}]",
        escape(&resource.type_query),
        escape(&resource.name)
    )
}

/// A declaration checked: the provider it is for and its typed
/// attributes, or its problems.
type Checked<'r> = Result<(&'r Provider, Vec<(String, Value)>), Vec<Problem>>;

/// The provider that a resource listed under `listed` is for, and its
/// typed attributes; or its problems.
fn check_attributes<'r>(
    registry: &'r Registry,
    listed: &'r Provider,
    resource: &Declared,
) -> Checked<'r> {
    // What Puppet prints besides attributes (`provider`, `target`).
    let (provider, written) =
        super::puppet_compat::resolve(registry, listed, resource).map_err(|(line, message)| {
            let at = Origin {
                line,
                ..resource.origin.clone()
            };
            let reference = declared_reference(resource);
            vec![at.problem(format!("{reference}: {message}"))]
        })?;
    Ok((provider, typed(provider, resource, &written)?))
}

/// The typed attributes of the plugin item `resource` of the item type
/// `provider`, its defaults filling what it leaves out, as the model
/// holds it; or its problems.
fn check_model<'r>(provider: &'r Provider, resource: &Declared) -> Checked<'r> {
    let reference = declared_reference(resource);
    // A plugin item's name makes its vpath and the names of its tasks:
    // one outside the rule could be read as another item's, or a task's.
    if let Some(why) = crate::plugin_meta::name_problem(&resource.name) {
        return Err(vec![resource.origin.problem(format!(
            "{reference}: {why}: a plugin item's name is {}",
            crate::plugin_meta::NAME_RULE
        ))]);
    }
    let written: Vec<&RawAttr> = resource.attrs.iter().collect();
    let mut attrs = typed(provider, resource, &written)?;
    let missing: Vec<&str> = provider
        .meta
        .attributes
        .values()
        .filter(|a| a.required && !attrs.iter().any(|(key, _)| *key == a.name))
        .map(|a| a.name.as_str())
        .collect();
    if !missing.is_empty() {
        return Err(vec![resource.origin.problem(format!(
            "{reference}: missing the required {} {} (item type of the plugin {})",
            if missing.len() == 1 {
                "property"
            } else {
                "properties"
            },
            missing.join(", "),
            provider.meta.name
        ))]);
    }
    for attribute in provider.meta.attributes.values() {
        if let Some(default) = &attribute.default {
            if !attrs.iter().any(|(key, _)| *key == attribute.name) {
                attrs.push((attribute.name.clone(), default.clone()));
            }
        }
    }
    Ok((provider, attrs))
}

/// The attributes `written` for `resource`, typed by `provider`'s
/// metadata (the manifest's metaparameters allowed too); or a problem
/// for each that is wrong, at its line.
fn typed(
    provider: &Provider,
    resource: &Declared,
    written: &[&RawAttr],
) -> Result<Vec<(String, Value)>, Vec<Problem>> {
    let attr_lines: Vec<usize> = written.iter().map(|attr| attr.line).collect();
    let written: Vec<(&str, &Written)> = written
        .iter()
        .map(|attr| (attr.name.as_str(), &attr.value))
        .collect();
    let also = WrittenIn::Manifest {
        also: &super::manifest::METAPARAMETERS,
    };
    let found = match Request::check(provider, &resource.name, &written, also) {
        Ok(request) => return Ok(request.attrs),
        Err(found) => found,
    };
    let reference = declared_reference(resource);
    let problem = |problem: crate::update::RequestProblem| {
        let at = match problem.attr {
            Some(index) => Origin {
                line: attr_lines[index],
                ..resource.origin.clone()
            },
            None => resource.origin.clone(),
        };
        at.problem(format!("{reference}: {}", problem.message))
    };
    Err(found.into_iter().map(problem).collect())
}

/// `ensure` set to present where the type has that value and the
/// attributes leave it out.
fn present_by_default(provider: &Provider, attrs: &mut Vec<(String, Value)>) {
    if attrs.iter().any(|(key, _)| key == "ensure") {
        return;
    }
    if let Some(ensure) = provider.attribute("ensure") {
        if let Ok(present) = ensure.attr_type.parse_cli("present") {
            attrs.insert(0, ("ensure".to_owned(), present));
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::metadata::Metadata;

    /// The bundled user and group providers, by their metadata.
    pub(in crate::converge) fn registry() -> Registry {
        let provider = |yaml: &str, file: &str| {
            let meta = Metadata::parse(yaml, Path::new(file)).unwrap();
            Provider::new(meta, file.into(), None)
        };
        Registry::of(vec![
            provider(
                include_str!("../../providers/etc_passwd.yaml"),
                "etc_passwd.yaml",
            ),
            provider(
                include_str!("../../providers/etc_group.yaml"),
                "etc_group.yaml",
            ),
        ])
    }

    fn build<'r>(registry: &'r Registry, text: &str) -> Result<Catalog<'r>, Vec<Problem>> {
        let (declared, problems) = super::super::manifest::parse(text, Path::new("m.yaml"));
        assert!(problems.is_empty(), "{problems:?}");
        Catalog::build(registry, &declared)
    }

    /// The references in the catalog's order.
    pub(in crate::converge) fn ordered(catalog: &Catalog) -> Vec<String> {
        (catalog.order.iter())
            .map(|&at| catalog.items[at].reference())
            .collect()
    }

    #[test]
    fn a_user_waits_for_the_group_of_its_gid_and_a_group_for_its_members() {
        let registry = registry();
        let groups = "group:\n  h: {gid: 3001, members: [u]}\n  g: {gid: 3000}\n";
        let users = "user:\n  u: {gid: 3000}\n";
        for text in [format!("{groups}{users}"), format!("{users}{groups}")] {
            let catalog = build(&registry, &text).unwrap();
            assert_eq!(
                ordered(&catalog),
                ["group[g]", "user[u]", "group[h]"],
                "{text}"
            );
        }
        // A gid no group of the manifest has orders nothing.
        let catalog = build(
            &registry,
            "user:\n  u: {gid: 7}\ngroup:\n  g: {gid: 3000}\n",
        )
        .unwrap();
        assert_eq!(ordered(&catalog), ["user[u]", "group[g]"]);
    }

    #[test]
    fn groups_are_removed_after_users_whatever_the_metadata_implies() {
        let registry = registry();
        // The key order puts the group first, and the user's gid and
        // groups would make it wait for the groups: the removal order wins.
        let text = "group:\n  bob: {ensure: absent}\n  g: {ensure: absent, gid: 3000}\nuser:\n  \
                    bob: {ensure: absent, gid: 3000, groups: [g]}\n  carol: {ensure: absent}\n";
        let catalog = build(&registry, text).unwrap();
        assert_eq!(
            ordered(&catalog),
            ["user[bob]", "user[carol]", "group[bob]", "group[g]"]
        );
        // Made, not removed: the user still waits for its groups.
        let catalog = build(
            &registry,
            "group:\n  g: {gid: 3000}\nuser:\n  bob: {gid: 3000}\n",
        );
        assert_eq!(ordered(&catalog.unwrap()), ["group[g]", "user[bob]"]);
    }

    #[test]
    fn a_written_order_wins_over_what_the_metadata_implies_the_other_way() {
        let registry = registry();
        let text = "group:\n  g: {gid: 3000, members: [u], require: 'User[u]'}\nuser:\n  \
                    u: {gid: 3000}\n";
        let catalog = build(&registry, text).unwrap();
        assert!(catalog.tangled.is_empty());
        assert_eq!(ordered(&catalog), ["user[u]", "group[g]"]);
    }

    #[test]
    fn a_written_order_against_the_removal_order_is_a_cycle() {
        let registry = registry();
        let text =
            "group:\n  g: {ensure: absent, before: 'User[u]'}\nuser:\n  u: {ensure: absent}\n";
        let problems = build(&registry, text).unwrap_err();
        let message = problems[0].to_string();
        assert!(
            message.contains("dependency cycle: group[g] (m.yaml:2) -> user[u] (m.yaml:4)"),
            "{message}"
        );
    }

    #[test]
    fn a_group_listing_a_user_of_its_gid_is_a_cycle_told_with_its_way_out() {
        let registry = registry();
        let text = "group:\n  g: {gid: 3000, members: [u]}\nuser:\n  u: {gid: 3000}\n";
        // Unordered, as when both exist; the plan refuses to make both.
        let catalog = build(&registry, text).unwrap();
        assert_eq!(catalog.tangled, [(0, 1)]);
        assert!(catalog.items.iter().all(|item| item.requires.is_empty()));
        let message = cycle_problem(&catalog.items, &[0, 1]).to_string();
        for part in [
            "dependency cycle: group[g] (m.yaml:2) -> user[u] (m.yaml:4) -> group[g] (m.yaml:2)",
            "group[g]'s members name user[u], and user[u]'s gid 3000 is group[g]'s gid",
            "A user whose primary group this is needs no listing here (glibc counts it a \
             member through its gid); to list it all the same, give the group in the user's \
             groups instead",
        ] {
            assert!(message.contains(part), "{part}\n{message}");
        }
        // The way out it tells: the membership given in the user's groups.
        let text = "group:\n  g: {gid: 3000}\nuser:\n  u: {gid: 3000, groups: [g]}\n";
        assert_eq!(
            ordered(&build(&registry, text).unwrap()),
            ["group[g]", "user[u]"]
        );
    }
}
