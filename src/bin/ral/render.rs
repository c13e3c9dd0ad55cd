//! Rendering a run's manifests for one host (`ral::templating`): the
//! host's facts, asked once and only when the manifests use templating,
//! its variables from the inventory and `-e`, and the rendered input and
//! registry the run is planned from. `-v` prints where each templated
//! value's variables came from.

use std::io::Write;

use anyhow::Context;
use ral::converge::manifest::Reading;
use ral::converge::run::Input;
use ral::discovery::Registry;
use ral::remote::inventory::Inventory;
use ral::templating::{self, Layer, Scope};

/// The variables a command gives every host: `-e`, and the inventory the
/// targets' own come from.
pub struct Vars {
    /// `--destroy`: a host rendered to nothing may remove everything.
    destroy: bool,
    extra: Vec<Layer>,
    /// Whether the run's manifests use templating: asked once, not for
    /// every target of a fleet (they all share the manifests).
    templated: std::sync::OnceLock<bool>,
    inventory: Option<Inventory>,
}

impl Vars {
    pub fn new(
        words: &[String],
        inventory: Option<&std::path::Path>,
        destroy: bool,
    ) -> anyhow::Result<Vars> {
        let extra = templating::sources::extra_vars(words)?;
        let inventory = inventory.map(Inventory::load).transpose()?;
        Ok(Vars {
            destroy,
            extra,
            templated: std::sync::OnceLock::new(),
            inventory,
        })
    }

    /// The scope of the host named `target` (`None`: this machine).
    fn scope(
        &self,
        target: Option<&str>,
        host: &ral::Host,
        registry: &Registry,
    ) -> anyhow::Result<Scope> {
        let facts = ral::facts::of_host(host, registry).context("gathering the facts")?;
        let mut scope = Scope {
            facts: Some(facts),
            layers: Vec::new(),
            host: target.unwrap_or("localhost").to_owned(),
            groups: Vec::new(),
        };
        if let (Some(inventory), Some(name)) = (&self.inventory, target) {
            if let Some(found) = inventory.host(name) {
                scope.layers = templating::sources::inventory_layers(inventory, found)?;
                scope.groups = found
                    .group_order
                    .iter()
                    .filter(|g| *g != "all" && *g != "ungrouped")
                    .cloned()
                    .collect();
            }
        }
        scope.layers.extend(self.extra.iter().cloned());
        Ok(scope)
    }

    /// `reading` rendered for the host: `None` when it uses no templating
    /// and no variables were given (it is taken as it is).
    pub fn render(
        &self,
        reading: &Reading,
        target: Option<&str>,
        host: &ral::Host,
        registry: &Registry,
    ) -> anyhow::Result<Option<templating::Rendered>> {
        if !*self
            .templated
            .get_or_init(|| templating::uses_templates(reading))
        {
            return Ok(None);
        }
        let scope = self.scope(target, host, registry)?;
        let rendered = templating::render(reading, &scope)?;
        if rendered.declared.is_empty() && !reading.declared.is_empty() && !self.destroy {
            anyhow::bail!(
                "nothing is declared for {}: every resource's when: is false there, or its loop \
                 is empty; an empty manifest would mean removing everything ral created there \
                 (give --destroy to mean that)",
                scope.host
            );
        }
        Ok(Some(rendered))
    }
}

/// `input` with its declarations replaced by `declared`; it keeps its
/// manifests and digest, and takes the saved plan `saved`.
pub fn rendered_input(
    input: &Input,
    declared: Vec<ral::converge::manifest::Declared>,
    saved: Option<ral::converge::saved::SavedPlan>,
) -> Input {
    Input {
        manifests: input.manifests.clone(),
        reading: Reading {
            declared,
            vars: Vec::new(),
            problems: input.reading.problems.clone(),
            complete: input.reading.complete,
            digest: input.reading.digest.clone(),
        },
        saved,
    }
}

/// `-v`: where each templated value's variables came from.
pub fn print_provenance(out: &mut dyn Write, lines: &[String]) -> std::io::Result<()> {
    if lines.is_empty() {
        return Ok(());
    }
    writeln!(out, "Values from variables:")?;
    for line in lines {
        writeln!(out, "  {}", ral::text::escape(line))?;
    }
    Ok(())
}
