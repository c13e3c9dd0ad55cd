//! Rendering: the phase between reading manifests and making a catalog,
//! in which one host's facts and variables make the manifests as written
//! into the resources that host gets (manifest → render per host →
//! catalog). Jinja2 (minijinja) renders every text that holds `{{`, `{%`
//! or `{#`; `when:` keeps a resource where its condition holds; `loop:`
//! stamps one resource per element; a file's `template:` or `source:`
//! becomes its content.
//!
//! Nothing here reads or changes a system: the host's facts come in its
//! [`Scope`], gathered by the caller (once per host), with the variables
//! of the inventory and the command line ([`sources`]). Every problem of
//! every resource is reported together, each with its file and line; a
//! host whose manifests do not render gets no catalog, so a render error
//! never plans a removal. A value computed from a sensitive variable is
//! sensitive: its attribute is redacted for the run wherever the value
//! goes ([`sensitive_registry`]).

mod engine;
mod scope;
pub mod sources;
mod stamp;

use std::collections::HashMap;

use crate::converge::manifest::{Declared, Reading};
use crate::discovery::Registry;
use crate::error::{Error, Problem};

pub use scope::{Layer, Scope, RESERVED, SENSITIVE_LIST};

/// One host's resources, rendered.
pub struct Rendered {
    /// In the manifests' order, a loop's resources in its elements'.
    pub declared: Vec<Declared>,
    /// `(TYPE, ATTRIBUTE)` whose value was computed from a sensitive
    /// variable for some resource.
    pub sensitive: Vec<(String, String)>,
    /// `TYPE[NAME] ATTRIBUTE: VARIABLE from SOURCE, ...`, for `-v`.
    pub provenance: Vec<String>,
    /// The texts of the sensitive variables' values: a value computed
    /// from one may hold it as a part only, which is redacted too.
    pub secrets: Vec<String>,
}

/// Whether the manifests use anything only rendering resolves: `vars:`,
/// `when:`, `loop:`, a file's `template:`/`source:` or a text with
/// Jinja2 in it. Manifests that do not are taken as they are (and need no
/// facts).
pub fn uses_templates(reading: &Reading) -> bool {
    !reading.vars.is_empty()
        || reading.declared.iter().any(|d| {
            d.varying.is_some()
                || engine::is_template(&d.name)
                || d.attrs.iter().any(|a| {
                    a.name == stamp::TEMPLATE || a.name == stamp::SOURCE || holds_template(&a.value)
                })
                || [&d.require, &d.before, &d.notify, &d.subscribe]
                    .iter()
                    .any(|refs| refs.iter().any(|r| engine::is_template(&r.name)))
        })
}

fn holds_template(written: &crate::types::Written) -> bool {
    use crate::types::Written;
    match written {
        Written::Text(text) => engine::is_template(text),
        Written::List(items) => items.iter().any(holds_template),
        Written::Map(pairs) => pairs.iter().any(|(_, v)| holds_template(v)),
        Written::Null => false,
    }
}

/// Renders `reading`'s declarations for the host of `scope`. The
/// manifests' `vars:` are the lowest layer, below `scope.layers`.
pub fn render(reading: &Reading, scope: &Scope) -> Result<Rendered, Error> {
    let env = engine::environment();
    // The manifests' variables, one layer per file, in file order.
    let mut manifest_layers: Vec<Layer> = Vec::new();
    for var in &reading.vars {
        let file = var.origin.file.to_path_buf();
        if manifest_layers.last().is_none_or(|l| l.file != file) {
            manifest_layers.push(Layer {
                command_line: false,
                source: file.display().to_string(),
                file,
                vars: Vec::new(),
            });
        }
        if let Some(layer) = manifest_layers.last_mut() {
            layer
                .vars
                .push((var.name.clone(), var.value.clone(), var.origin.line));
        }
    }
    let layers: Vec<&Layer> = manifest_layers.iter().chain(&scope.layers).collect();
    let vars = scope::Variables::resolve(&env, &layers, scope)
        .map_err(|problems| Error::Manifest { problems })?;
    let mut problems: Vec<Problem> = Vec::new();
    let mut rendered = Rendered {
        declared: Vec::with_capacity(reading.declared.len()),
        sensitive: Vec::new(),
        provenance: Vec::new(),
        secrets: vars.sensitive_texts(),
    };
    // Where each rendered title was declared, for the one declared twice.
    let mut seen: HashMap<(String, String), (usize, Option<usize>)> = HashMap::new();
    for declared in &reading.declared {
        let stamped = stamp::stamp(&env, declared, &vars);
        problems.extend(stamped.problems);
        for stamp in stamped.declared {
            let key = (
                stamp.declared.type_query.clone(),
                stamp.declared.name.clone(),
            );
            let here = (stamp.declared.origin.line, stamp.element);
            if let Some(&first) = seen.get(&key) {
                // Two plain declarations are the catalog's to report.
                if first.1.is_some() || here.1.is_some() {
                    problems.push(stamp.declared.origin.problem(format!(
                        "{}[{}] is declared twice: {} and {}",
                        crate::text::escape(&key.0),
                        crate::text::escape(&key.1),
                        place(first),
                        place(here)
                    )));
                    continue;
                }
            } else {
                seen.insert(key, here);
            }
            for attr in &stamp.sensitive {
                let pair = (stamp.declared.type_query.clone(), attr.clone());
                if !rendered.sensitive.contains(&pair) {
                    rendered.sensitive.push(pair);
                }
            }
            for line in &stamp.provenance {
                rendered.provenance.push(format!(
                    "{}[{}] {line}",
                    crate::text::escape(&stamp.declared.type_query),
                    crate::text::escape(&stamp.declared.name)
                ));
            }
            rendered.declared.push(stamp.declared);
        }
    }
    if !problems.is_empty() {
        return Err(Error::Manifest { problems });
    }
    Ok(rendered)
}

fn place((line, element): (usize, Option<usize>)) -> String {
    match element {
        Some(n) => format!("line {line} (loop element {n})"),
        None => format!("line {line}"),
    }
}

/// The registry a run of `rendered` uses: `registry` itself, or a copy
/// in which the attributes computed from sensitive variables are
/// sensitive (see [`Registry::marking_sensitive`]).
pub fn sensitive_registry(registry: &Registry, rendered: &Rendered) -> Option<Registry> {
    match rendered.sensitive.is_empty() {
        true => None,
        false => Some(registry.marking_sensitive(&rendered.sensitive, &rendered.secrets)),
    }
}

#[cfg(test)]
mod tests;
