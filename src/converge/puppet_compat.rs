//! What `puppet resource --to_yaml` writes that is Puppet's and not an
//! attribute: `provider`, which picks a provider of the type (Puppet's
//! own names, `useradd`, `apt`, `parsed`, mean the type's provider here,
//! with a note), and `target` of the file-backed types, which names the
//! file ral's provider already manages (another file is refused, by
//! name). Taken out of a declaration before its attributes are checked,
//! so that what Puppet prints reads as a manifest; a provider that
//! declares an attribute of either name keeps it as its own.

use crate::discovery::Registry;
use crate::provider::Provider;
use crate::text::escape;
use crate::types::Written;

use super::manifest::{Declared, RawAttr};

/// The files Puppet's `target` names by default for the types whose
/// resources live in one file, which ral's providers manage.
const TARGETS: &[(&str, &str)] = &[("host", "/etc/hosts"), ("mount", "/etc/fstab")];

/// The provider the declaration asks for (its `provider:`, when the type
/// has one of that name) and its attributes without Puppet's keys; or
/// the problem with them, at their line.
pub fn resolve<'r, 'd>(
    registry: &'r Registry,
    listed: &'r Provider,
    resource: &'d Declared,
) -> Result<(&'r Provider, Vec<&'d RawAttr>), (usize, String)> {
    let mut provider = listed;
    let mut kept = Vec::with_capacity(resource.attrs.len());
    for attr in &resource.attrs {
        let own = listed.attribute(&attr.name).is_some();
        match attr.name.as_str() {
            "provider" if !own => provider = pick(registry, listed, resource, attr)?,
            "target" if !own => check_target(listed, attr)?,
            _ => kept.push(attr),
        }
    }
    Ok((provider, kept))
}

/// The provider `provider: NAME` names: `TYPE::NAME` when there is one,
/// else the type's (a note says so).
fn pick<'r>(
    registry: &'r Registry,
    listed: &'r Provider,
    resource: &Declared,
    attr: &RawAttr,
) -> Result<&'r Provider, (usize, String)> {
    let Written::Text(name) = &attr.value else {
        return Err((
            attr.line,
            "provider: the provider's name is a text".to_owned(),
        ));
    };
    let type_name = &listed.meta.type_name;
    if *name == listed.meta.name || *name == listed.qualified_name() {
        return Ok(listed);
    }
    // Listed by a qualified name already: the two must agree.
    if resource.type_query.contains("::") {
        return Err((
            attr.line,
            format!(
                "provider: '{}' disagrees with {}, which the manifest lists it under",
                escape(name),
                escape(&resource.type_query)
            ),
        ));
    }
    let qualified = match name.split_once("::") {
        Some((of_type, _)) if of_type == type_name => name.clone(),
        _ => format!("{type_name}::{name}"),
    };
    match registry.resolve_item(&qualified) {
        Ok(found) if found.meta.type_name == *type_name => Ok(found),
        _ => {
            // Once per file and Puppet provider: a listing of every user
            // names useradd as many times.
            if first_time(&resource.origin.file, name) {
                let at = super::manifest::Origin {
                    line: attr.line,
                    ..resource.origin.clone()
                };
                log::warn!(
                    "{}",
                    at.problem(format!(
                        "provider '{}' is not one of ral's; {} is used for {} (and any other \
                         resource naming it in this file)",
                        escape(name),
                        listed.qualified_name(),
                        escape(&format!("{}[{}]", resource.type_query, resource.name)),
                    ))
                );
            }
            Ok(listed)
        }
    }
}

/// Whether the Puppet provider `name` is met in `file` for the first
/// time in this process.
fn first_time(file: &std::path::Path, name: &str) -> bool {
    static SEEN: std::sync::Mutex<Vec<(std::path::PathBuf, String)>> =
        std::sync::Mutex::new(Vec::new());
    let mut seen = SEEN.lock().unwrap_or_else(|e| e.into_inner());
    let key = (file.to_owned(), name.to_owned());
    match seen.contains(&key) {
        true => false,
        false => {
            seen.push(key);
            true
        }
    }
}

/// A `target` naming the file the provider manages is what it does; any
/// other file it cannot.
fn check_target(listed: &Provider, attr: &RawAttr) -> Result<(), (usize, String)> {
    let type_name = listed.meta.type_name.as_str();
    let manages = TARGETS
        .iter()
        .find(|(t, _)| *t == type_name)
        .map(|(_, f)| *f);
    match (manages, &attr.value) {
        (Some(file), Written::Text(target)) if target == file => Ok(()),
        (Some(file), _) => Err((
            attr.line,
            format!(
                "target: {} manages {file} only (below --root): another file is not supported",
                listed.qualified_name()
            ),
        )),
        (None, _) => Err((
            attr.line,
            format!("unknown attribute 'target' for {}", listed.qualified_name()),
        )),
    }
}
