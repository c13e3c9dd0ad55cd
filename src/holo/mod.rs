//! A host for Holo plugins that behaves like Holo's own `holo` command
//! (`scan`, `diff`, `apply [--force]`), so `ral holo` can replace it:
//! holorc parsing, plugin `info` and version checks, generators and the
//! virtual resource directory, the scan report, selectors, the apply lock,
//! file descriptor 3 messages, diffs through git, and Holo's output layout
//! and exit codes. Beyond Holo: `--json`, `apply --noop`, `--strict`, a
//! time limit per plugin call, and cleanup on Ctrl-C.
//!
//! Plugins run through the process module like providers (own process
//! group, time limit, nothing left running), but with the caller's
//! environment plus the `HOLO_*` variables and the caller's working
//! directory, as Holo runs them.
//!
//! [`run`] is the body of the `holo` command, and acts for the binary on
//! a forwarded signal: a plugin run it interrupted ends the process by it
//! at once, before anything reports the run as failed, and so does one
//! noted between runs, at the next check.

mod apply;
mod config;
mod diff;
mod output;
mod paths;
mod plugin;
mod resources;
mod scan;

use std::collections::HashMap;
use std::time::Duration;

use serde_json::json;

use crate::process::streams::{Ended, Stream, StreamCall};
use output::{info_line, raw, Printer, To};
use plugin::{Operation, Phase, Plugin, Runner};
use resources::Resources;
use scan::{Entity, DEFAULT_VERB};

/// The three Holo operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Scan,
    Diff,
    Apply,
}

/// How `scan` prints entities.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ScanFormat {
    #[default]
    Report,
    Short,
    Porcelain,
}

/// One `holo` command, parsed.
#[derive(Debug, Clone)]
pub struct Options {
    pub op: Op,
    pub scan_format: ScanFormat,
    pub force: bool,
    pub json: bool,
    pub noop: bool,
    pub strict: bool,
    pub timeout: Duration,
    pub selectors: Vec<String>,
}

/// A run that must stop with this exit code; its message was printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stop(pub i32);

/// Everything one command works with.
pub struct Session {
    runner: Runner,
    printer: Printer,
    plugins: Vec<Plugin>,
    resources: Resources,
}

/// Runs one command and returns the exit code. The cache directory is
/// removed on every way out, including a forwarded Ctrl-C (for which the
/// binary calls [`crate::process::forward_interrupts_deferred`], and
/// [`crate::process::exit_if_interrupted`] after this returns).
pub fn run(options: &Options) -> i32 {
    let mut printer = Printer::new();
    if options.json {
        // stdout carries the JSON document alone.
        printer.tracked_stdout_to_stderr();
    }
    let (Some(root), Some(tmp)) = (
        env_path(&mut printer, "HOLO_ROOT_DIR", "/"),
        env_path(&mut printer, "TMPDIR", "/tmp"),
    ) else {
        return 255;
    };
    let cache = match CacheDir::create(&tmp) {
        Ok(cache) => cache,
        Err(e) => {
            printer.error(&format!("mkdirtemp {tmp}/holo.*: {}", plugin::os_text(&e)));
            return 255;
        }
    };
    let cache_text = cache.text.clone();
    let runner = Runner {
        root,
        base_env: std::env::vars_os().collect(),
        timeout: options.timeout,
    };
    let code = match run_in_cache(runner, &cache_text, options, &mut printer) {
        Ok(code) | Err(Stop(code)) => code,
    };
    drop(cache);
    code
}

/// Runs a plugin, generator or `git` ([`crate::process::streams`]). When a
/// forwarded signal interrupted it, the process ends by that signal here,
/// before anything reports the run as failed; the cache directory and the
/// lock are registered with [`crate::process::remove_on_interrupt`].
fn run_streams(
    call: &StreamCall,
    on_line: &mut dyn FnMut(Stream, &[u8]),
) -> crate::error::Result<Ended> {
    let result = crate::process::streams::run_streams(call, on_line);
    if let Err(crate::error::Error::Interrupted { .. }) = result {
        crate::process::exit_if_interrupted();
    }
    result
}

/// A path from the environment, or `default` when unset or empty. One that
/// is not UTF-8 is an error rather than a silent fall-back to the default.
fn env_path(printer: &mut Printer, name: &str, default: &str) -> Option<String> {
    match std::env::var_os(name) {
        None => Some(default.to_owned()),
        Some(value) if value.is_empty() => Some(default.to_owned()),
        Some(value) => match value.into_string() {
            Ok(text) => Some(text),
            Err(_) => {
                printer.error(&format!("{name} is not valid UTF-8"));
                None
            }
        },
    }
}

/// The run's cache directory, `TMPDIR/holo.NUMBER` (mode 0700) as Holo
/// names it; removed when dropped, and by a forwarded signal.
struct CacheDir {
    /// The path as Holo prints it: `TMPDIR/holo.NUMBER`, not cleaned.
    text: String,
}

impl CacheDir {
    fn create(tmp: &str) -> std::io::Result<CacheDir> {
        use std::hash::{BuildHasher, Hasher};
        use std::os::unix::fs::DirBuilderExt;
        for attempt in 0u32..10_000 {
            let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
            hasher.write_u32(attempt);
            hasher.write_u32(std::process::id());
            let text = format!("{tmp}/holo.{}", hasher.finish() as u32);
            match std::fs::DirBuilder::new().mode(0o700).create(&text) {
                Ok(()) => {
                    crate::process::remove_on_interrupt(std::path::Path::new(&text));
                    return Ok(CacheDir { text });
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            }
        }
        Err(std::io::Error::from_raw_os_error(libc::EEXIST))
    }
}

impl Drop for CacheDir {
    fn drop(&mut self) {
        let path = std::path::Path::new(&self.text);
        crate::process::keep_on_interrupt(path);
        let _ = std::fs::remove_dir_all(path);
    }
}

fn run_in_cache(
    runner: Runner,
    cache: &str,
    options: &Options,
    printer: &mut Printer,
) -> Result<i32, Stop> {
    let plugins = config::load(&runner, cache, printer)?;
    crate::process::exit_if_interrupted();
    let resources = Resources::build(&runner, cache, printer)?;
    let mut session = Session {
        runner,
        printer: std::mem::take(printer),
        plugins,
        resources,
    };
    let result = session.run(options);
    *printer = std::mem::take(&mut session.printer);
    result
}

impl Session {
    fn run(&mut self, options: &Options) -> Result<i32, Stop> {
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

    fn apply_all(&mut self, entities: &[Entity], options: &Options) -> Result<i32, Stop> {
        let lock = if options.noop {
            None
        } else {
            Some(apply::Lock::take(self)?)
        };
        let mut results = Vec::new();
        let mut failed = false;
        for entity in entities {
            crate::process::exit_if_interrupted();
            let mut collected = Vec::new();
            let outcome = if options.noop {
                apply::preview_one(self, entity, options.json, &mut collected)
            } else {
                apply::apply_one(self, entity, options.force, options.json, &mut collected)
            };
            failed |= matches!(outcome, apply::Outcome::Failed { .. });
            if options.json {
                results.push(apply::outcome_json(self, entity, &outcome, &collected));
            }
        }
        if let Some(lock) = lock {
            lock.release(&mut self.printer);
        }
        if options.json {
            raw(
                To::Out,
                format!("{:#}\n", json!({ "results": results })).as_bytes(),
            );
        }
        Ok(if options.strict && failed { 1 } else { 0 })
    }
}
