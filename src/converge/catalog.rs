//! The catalog: a manifest checked against the providers' metadata. Every
//! resource gets its provider and typed values, every reference and
//! automatic dependency becomes an edge, and the resources are put in
//! dependency order. All problems are collected, so one run reports them
//! all.

use std::collections::HashMap;
use std::path::Path;

use crate::discovery::Registry;
use crate::error::Problem;
use crate::provider::Provider;
use crate::text::escape;
use crate::types::{Value, Written};
use crate::update::{Request, WrittenIn};

use std::sync::Arc;

use super::expand::FromPlugin;
use super::graph;
use super::manifest::{Declared, Origin, Reference};

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
    pub plugins: Option<Arc<super::expand::PluginRun>>,
}

impl<'r> Catalog<'r> {
    /// Checks the declared resources against the providers of `registry`.
    pub fn build(
        registry: &'r Registry,
        declared: &[Declared],
    ) -> Result<Catalog<'r>, Vec<Problem>> {
        let mut problems = Vec::new();
        let mut items: Vec<Item<'r>> = Vec::with_capacity(declared.len());
        // (provider, name) -> item, for duplicates and references.
        let mut index: HashMap<Key, usize> = HashMap::new();
        // What each item was declared as.
        let mut sources: Vec<&Declared> = Vec::new();
        // Declared resources with problems of their own: their references
        // are still checked, so that one run reports every problem.
        let mut rejected: Vec<&Declared> = Vec::new();
        // Every resource declared, rejected or not: a reference to one
        // with problems of its own adds none.
        let mut named: std::collections::HashSet<Key> = Default::default();
        // The item each declaration became, if it became one.
        let mut item_of: Vec<Option<usize>> = vec![None; declared.len()];
        for (at, resource) in declared.iter().enumerate() {
            if let Ok(provider) = registry.resolve_item(&resource.type_query) {
                named.insert(key(provider, &resource.name));
            }
            let Some(item) = check_resource(registry, resource, &mut problems) else {
                rejected.push(resource);
                continue;
            };
            let key = key(item.provider, &resource.name);
            if let Some(&first) = index.get(&key) {
                let earlier: &Item = &items[first];
                problems.push(resource.origin.problem(format!(
                    "{} is declared twice; first as {} at {}",
                    item.reference(),
                    earlier.reference(),
                    place(&earlier.origin)
                )));
                continue;
            }
            index.insert(key, items.len());
            item_of[at] = Some(items.len());
            items.push(item);
            sources.push(resource);
        }
        // Declarations found already; one with problems of its own (which
        // are reported) is no edge.
        let mut requires: Vec<Vec<usize>> = sources
            .iter()
            .map(|resource| {
                (resource.require_at.iter())
                    .filter_map(|&other| item_of[other])
                    .collect()
            })
            .collect();
        // The type each reference names, looked up once per type written.
        let mut types = Types::new(registry);
        // For each item, those whose change refreshes it.
        let mut subscribes: Vec<Vec<usize>> = vec![Vec::new(); items.len()];
        // The accepted resources' references make edges; a rejected one's
        // are still checked, so that one run reports every problem.
        let all = (sources.iter().enumerate())
            .map(|(at, resource)| (Some(at), *resource))
            .chain(rejected.into_iter().map(|resource| (None, resource)));
        for (at, resource) in all {
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
                let refreshes = word == "notify" || word == "subscribe";
                for reference in references {
                    let problem = |message: String| {
                        Origin {
                            line: reference.line,
                            ..resource.origin.clone()
                        }
                        .problem(format!("{own}: {word} {reference}: {message}"))
                    };
                    let other = match lookup(&mut types, &index, reference) {
                        Ok(other) => other,
                        // Named, with problems of its own: no edge, but
                        // what this one cannot do is still said.
                        Err((_, key)) if named.contains(&key) => {
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
                    // (earlier, later): the later one requires the earlier;
                    // a rejected resource is neither.
                    let (earlier, later) = match word {
                        "require" | "subscribe" => (Some(other), at),
                        _ => (at, Some(other)),
                    };
                    if let (Some(earlier), Some(later)) = (earlier, later) {
                        requires[later].push(earlier);
                    }
                    let Some(refreshed) = later.filter(|_| refreshes) else {
                        continue;
                    };
                    match (cannot_refresh(&items[refreshed]), earlier) {
                        (Some(why), _) => problems.push(problem(why)),
                        (None, Some(earlier)) => subscribes[refreshed].push(earlier),
                        (None, None) => {}
                    }
                }
            }
        }
        add_automatic_edges(&items, &mut requires);
        add_declared_relations(&items, &mut requires, &mut subscribes);
        for (at, (mut prerequisites, mut sources)) in
            requires.into_iter().zip(subscribes).enumerate()
        {
            prerequisites.sort_unstable();
            prerequisites.dedup();
            items[at].requires = prerequisites;
            sources.sort_unstable();
            sources.dedup();
            items[at].subscribes = sources;
        }
        let edges: Vec<&[usize]> = items.iter().map(|i| i.requires.as_slice()).collect();
        let order = match graph::order(&edges) {
            Ok(order) => order,
            Err(cycles) => {
                for cycle in cycles {
                    let names: Vec<String> = cycle
                        .iter()
                        .chain(cycle.first())
                        .map(|&at| {
                            format!("{} ({})", items[at].reference(), place(&items[at].origin))
                        })
                        .collect();
                    problems.push(items[cycle[0]].origin.problem(format!(
                        "dependency cycle: {}; each must come after the next",
                        names.join(" -> ")
                    )));
                }
                Vec::new()
            }
        };
        if problems.is_empty() {
            Ok(Catalog {
                items,
                order,
                plugins: None,
            })
        } else {
            Err(problems)
        }
    }
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

/// Edges the metadata implies: an attribute that names a resource of
/// another type (`refers_to`), and paths under paths of the same type
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
    for (at, item) in items.iter().enumerate() {
        let mut link = |type_name: &str, name: &str| {
            for &other in by_type.get(&(type_name, name)).into_iter().flatten() {
                if other != at {
                    requires[at].push(other);
                }
            }
        };
        for (key, value) in &item.request.attrs {
            let Some(target) = item
                .provider
                .attribute(key)
                .and_then(|a| a.refers_to.as_deref())
            else {
                continue;
            };
            match value {
                Value::String(name) => link(target, name),
                Value::Array(values) => values
                    .iter()
                    .filter_map(Value::as_str)
                    .for_each(|name| link(target, name)),
                _ => {}
            }
        }
        if item.provider.meta.names_are_paths {
            for parent in Path::new(item.name()).ancestors().skip(1) {
                if let Some(parent) = parent.to_str().filter(|p| !p.is_empty()) {
                    link(item.provider.type_name(), parent);
                }
            }
        }
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
    let reference = format!(
        "{}[{}]",
        escape(&resource.type_query),
        escape(&resource.name)
    );
    let role = match (&resource.from_plugin, registry.plugin_of(provider)) {
        (Some(from), _) if from.is_action() => Role::Action,
        (_, Some(_)) => Role::Model,
        (_, None) => Role::Resource,
    };
    // A plugin's callback or remote task has no attributes, and an item
    // for removal is not checked against what it was.
    let unchecked = role == Role::Action
        || resource
            .from_plugin
            .as_deref()
            .is_some_and(FromPlugin::is_removal);
    let item = |attrs| Item {
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
    if unchecked {
        return Some(item(Vec::new()));
    }
    // A plugin item's name makes its vpath and the names of its tasks:
    // one outside the rule could be read as another item's, or a task's.
    if role == Role::Model {
        if let Some(why) = crate::plugin_meta::name_problem(&resource.name) {
            problems.push(resource.origin.problem(format!(
                "{reference}: {why}: a plugin item's name is {}",
                crate::plugin_meta::NAME_RULE
            )));
            return None;
        }
    }
    let written: Vec<(&str, &Written)> = resource
        .attrs
        .iter()
        .map(|attr| (attr.name.as_str(), &attr.value))
        .collect();
    let also = WrittenIn::Manifest {
        also: &super::manifest::METAPARAMETERS,
    };
    let mut attrs = match Request::check(provider, &resource.name, &written, also) {
        Ok(request) => request.attrs,
        Err(found) => {
            for problem in found {
                let at = match problem.attr {
                    Some(index) => Origin {
                        line: resource.attrs[index].line,
                        ..resource.origin.clone()
                    },
                    None => resource.origin.clone(),
                };
                problems.push(at.problem(format!("{reference}: {}", problem.message)));
            }
            return None;
        }
    };
    if role == Role::Model {
        let missing: Vec<&str> = provider
            .meta
            .attributes
            .values()
            .filter(|a| a.required && !attrs.iter().any(|(key, _)| *key == a.name))
            .map(|a| a.name.as_str())
            .collect();
        if !missing.is_empty() {
            problems.push(resource.origin.problem(format!(
                "{reference}: missing the required {} {} (item type of the plugin {})",
                if missing.len() == 1 {
                    "property"
                } else {
                    "properties"
                },
                missing.join(", "),
                provider.meta.name
            )));
            return None;
        }
        // Defaults fill what is left out, as the model holds it.
        for attribute in provider.meta.attributes.values() {
            if let Some(default) = &attribute.default {
                if !attrs.iter().any(|(key, _)| *key == attribute.name) {
                    attrs.push((attribute.name.clone(), default.clone()));
                }
            }
        }
    }
    // `ensure` defaults to present where the type has that value.
    if !attrs.iter().any(|(key, _)| key == "ensure") {
        if let Some(ensure) = provider.attribute("ensure") {
            if let Ok(present) = ensure.attr_type.parse_cli("present") {
                attrs.insert(0, ("ensure".to_owned(), present));
            }
        }
    }
    Some(item(attrs))
}
