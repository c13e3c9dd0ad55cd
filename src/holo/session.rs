//! One command's work once its plugins are loaded and its resources
//! built ([`Session`]): scanning every plugin, refusing duplicate
//! entities, selecting, and printing the scan or the diffs (applying is
//! `apply.rs`'s).

use std::collections::HashMap;

use serde_json::json;

use super::diff;
use super::options::{Op, Options, ScanFormat};
use super::output::{info_line, raw, Printer, To};
use super::plugin::{self, Operation, Phase, Plugin, Runner};
use super::resources::Resources;
use super::scan::{self, Entity, DEFAULT_VERB};
use super::stop::Stop;

/// Everything one command works with.
pub struct Session {
    pub(super) runner: Runner,
    pub(super) printer: Printer,
    pub(super) plugins: Vec<Plugin>,
    pub(super) resources: Resources,
}

impl Session {
    pub(super) fn run(&mut self, options: &Options) -> Result<i32, Stop> {
        let entities = self.scan_all()?;
        if options.strict {
            self.refuse_duplicates(&entities)?;
        }
        let selected = self.select(&entities, &options.selectors)?;
        match options.op {
            Op::Scan => Ok(self.print_scan(&selected, options)),
            Op::Diff => Ok(self.diff_all(&selected)),
            Op::Apply => self.apply_all(&selected, options),
        }
    }

    /// Scans every plugin in configuration order; each plugin's entities
    /// sorted by ID.
    fn scan_all(&mut self) -> Result<Vec<Entity>, Stop> {
        let mut all = Vec::new();
        for index in 0..self.plugins.len() {
            crate::process::exit_if_interrupted();
            let plugin = &self.plugins[index];
            let outcome = self.runner.run(
                plugin,
                Operation::whole("scan", Phase::Run),
                &mut self.printer,
                None,
            );
            let stdout = match outcome {
                Ok((ended, stdout)) if ended.success() => stdout,
                Ok((ended, _)) => return Err(self.scan_failed(index, &plugin::exit_text(&ended))),
                Err(error) => return Err(self.scan_failed(index, &error.to_string())),
            };
            let resources = &self.resources;
            let translate = |path: &str| resources.translate(path);
            let report = String::from_utf8_lossy(&stdout);
            match scan::parse(&plugin.id, index, &report, &translate) {
                Ok(entities) => all.extend(entities),
                Err(errors) => {
                    for error in errors {
                        self.printer.error(&error);
                    }
                    return Err(Stop(255));
                }
            }
            self.printer.end_paragraph(To::Out);
        }
        Ok(all)
    }

    fn scan_failed(&mut self, index: usize, status: &str) -> Stop {
        let id = &self.plugins[index].id;
        self.printer
            .error(&format!("scan with plugin {id} failed: {status}"));
        Stop(255)
    }

    /// `--strict`: an entity ID reported twice is an error.
    fn refuse_duplicates(&mut self, entities: &[Entity]) -> Result<(), Stop> {
        let mut first: HashMap<&str, &Entity> = HashMap::new();
        let mut found = false;
        for entity in entities {
            match first.get(entity.id.as_str()) {
                Some(earlier) => {
                    found = true;
                    let message = format!(
                        "duplicate entity ID {} (reported by plugin {} and plugin {})",
                        entity.id, self.plugins[earlier.plugin].id, self.plugins[entity.plugin].id
                    );
                    self.printer.error(&message);
                }
                None => {
                    first.insert(&entity.id, entity);
                }
            }
        }
        if found {
            Err(Stop(255))
        } else {
            Ok(())
        }
    }

    /// Keeps the entities that any selector names (entity ID, plugin ID,
    /// source path, or the generator part of a generated source); no
    /// selectors keep all. Selectors that name nothing end the run.
    fn select(&mut self, entities: &[Entity], selectors: &[String]) -> Result<Vec<Entity>, Stop> {
        if selectors.is_empty() {
            return Ok(entities.to_vec());
        }
        let mut used = vec![false; selectors.len()];
        let mut selected = Vec::new();
        for entity in entities {
            let plugin = &self.plugins[entity.plugin].id;
            let mut matched = false;
            for (selector, used) in selectors.iter().zip(used.iter_mut()) {
                let names_it = *selector == entity.id
                    || selector == plugin
                    || entity.sources.iter().any(|source| {
                        source == selector
                            || source
                                .split_once("::")
                                .is_some_and(|(generator, _)| generator == selector)
                    });
                if names_it {
                    *used = true;
                    matched = true;
                }
            }
            if matched {
                selected.push(entity.clone());
            }
        }
        let mut unknown = false;
        for (selector, used) in selectors.iter().zip(&used) {
            if !used {
                raw(
                    To::Err,
                    format!("Unrecognized argument: {selector}\n").as_bytes(),
                );
                unknown = true;
            }
        }
        if unknown {
            return Err(Stop(255));
        }
        Ok(selected)
    }

    fn print_scan(&mut self, entities: &[Entity], options: &Options) -> i32 {
        if options.json {
            let list: Vec<_> = entities.iter().map(|e| self.entity_json(e)).collect();
            raw(
                To::Out,
                format!("{:#}\n", json!({ "entities": list })).as_bytes(),
            );
            return 0;
        }
        for entity in entities {
            match options.scan_format {
                ScanFormat::Short => raw(To::Out, format!("{}\n", entity.id).as_bytes()),
                ScanFormat::Porcelain => {
                    let mut text = format!("ENTITY: {}\n", entity.id);
                    if !entity.reason.is_empty() {
                        text.push_str(&format!("ACTION: {} ({})\n", entity.verb, entity.reason));
                    } else if entity.verb != DEFAULT_VERB {
                        text.push_str(&format!("ACTION: {}\n", entity.verb));
                    }
                    for source in &entity.sources {
                        text.push_str(&format!("SOURCE: {source}\n"));
                    }
                    for (key, value) in &entity.info {
                        text.push_str(&format!("{key}: {value}\n"));
                    }
                    self.printer.write(To::Out, text.as_bytes());
                    self.printer.end_paragraph(To::Out);
                }
                ScanFormat::Report => {
                    let mut text = self.printer.bold(To::Out, &entity.id);
                    if !entity.reason.is_empty() {
                        text.push_str(&format!(" ({})", entity.reason));
                    }
                    text.push('\n');
                    for (key, value) in &entity.info {
                        text.push_str(&info_line(12, key, value));
                    }
                    self.printer.write(To::Out, text.as_bytes());
                    self.printer.end_paragraph(To::Out);
                }
            }
        }
        0
    }

    fn entity_json(&self, entity: &Entity) -> serde_json::Value {
        json!({
            "id": entity.id,
            "plugin": self.plugins[entity.plugin].id,
            "action": { "verb": entity.verb, "reason": entity.reason },
            "sources": entity.sources,
            "info": entity.info.iter().map(|(k, v)| json!({ "key": k, "value": v })).collect::<Vec<_>>(),
        })
    }

    fn diff_all(&mut self, entities: &[Entity]) -> i32 {
        for entity in entities {
            crate::process::exit_if_interrupted();
            let plugin = self.plugins[entity.plugin].clone();
            let rendered = diff::render(
                &self.runner,
                &self.resources,
                &plugin,
                &entity.id,
                &mut self.printer,
                &mut plugin::pass_on,
            );
            match rendered {
                Ok(text) => {
                    let coloured = self.printer.colour_diff(To::Out, &text);
                    raw(To::Out, coloured.as_bytes());
                }
                Err(message) => self
                    .printer
                    .error(&format!("cannot diff {}: {message}", entity.id)),
            }
            self.printer.end_paragraph(To::Out);
        }
        0
    }
}
