//! The checker of one provider: it runs the provider's actions the way
//! the host does, on a fake root, and notes every finding in the report
//! (the round trip of changes is `round_trip.rs`'s).

use crate::discovery;
use crate::error::Error;
use crate::host::{Host, HostConfig};
use crate::metadata::{Action, Kind, Metadata};
use crate::provider::Provider;
use crate::resource::Resource;
use crate::types::{AttrType, Value};
use crate::update::Transition;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use super::report::{CheckOptions, Finding, Level, NotRun, Report, Subject};

/// How many listed resources a noop update is tried on before its
/// refusal is a finding: a provider may refuse one for a reason of its
/// own.
const NOOP_SUBJECTS: usize = 3;

const HINT_NOOP_FAILS: &str = "a noop update must succeed and report what it would change";

/// What to do when nothing is listed to work on, on a temporary root.
const HINT_SEED: &str = "pass --seed DIR, a directory holding resources of this type in the \
     files the provider reads (etc/..., var/...), copied in as the root";

/// The same on a root given with --root.
const HINT_ROOT: &str = "check on a root that holds resources of this type, or on a copy of \
     one with --seed DIR";

/// How many listed resources are looked up with find.
const MAX_FINDS: usize = 25;

/// A name no provider should know.
const UNKNOWN_NAME: &str = "ral-check-no-such-resource";

/// Checks one provider file.
pub fn check(source: &Path, options: &CheckOptions) -> Report {
    let mut checker = Checker {
        host: Host::new(HostConfig {
            timeout: options.timeout,
            root: options.root.clone(),
            provider_lib: options.provider_lib.clone(),
            ..HostConfig::default()
        }),
        options,
        hints: &PROVIDER_HINTS,
        report: Report {
            subject: Subject::Provider,
            source: source.to_owned(),
            provider: None,
            findings: Vec::new(),
            steps: Vec::new(),
            round_trip: Vec::new(),
            not_run: Vec::new(),
        },
    };
    checker.run(source);
    checker.report
}

pub(super) struct Checker<'a> {
    pub(super) host: Host,
    pub(super) options: &'a CheckOptions,
    pub(super) hints: &'static StepHints,
    pub(super) report: Report,
}

/// What the checks of changes work on: a resource to copy or change,
/// the name of one made up for them (removed after), or why there is
/// none.
struct Work {
    template: Option<Resource>,
    made: Option<String>,
    lacking: String,
}

/// The hints of the findings every step can have.
pub(super) struct StepHints {
    pub(super) slow: &'static str,
    pub(super) noise: &'static str,
}

const PROVIDER_HINTS: StepHints = StepHints {
    slow: "providers are run often; avoid one process per resource and network calls",
    noise: "warn: and error: (or unprefixed) lines are for real problems; \
            commentary goes at debug: or info:",
};

impl Checker<'_> {
    pub(super) fn find(&mut self, step: &'static str, problem: String, hint: &'static str) {
        self.find_at(Level::Error, step, problem, hint);
    }

    pub(super) fn find_at(
        &mut self,
        level: Level,
        step: &'static str,
        problem: String,
        hint: &'static str,
    ) {
        let finding = Finding {
            step,
            level,
            problem,
            hint,
        };
        // The same problem met again (find after find) is one finding.
        if !self.report.findings.contains(&finding) {
            self.report.findings.push(finding);
        }
    }

    /// Runs one step, timing it and collecting stderr noise and output
    /// problems.
    pub(super) fn step<T>(&mut self, step: &'static str, run: impl FnOnce(&Host) -> T) -> T {
        let stderr_before = self.host.provider_problem_lines();
        self.host.take_problem_quotes();
        let started = Instant::now();
        let result = run(&self.host);
        let took = started.elapsed();
        self.report.steps.push((step, took));
        if took > self.options.slow {
            self.find(
                step,
                format!(
                    "took {:.2}s (limit {:.2}s)",
                    took.as_secs_f64(),
                    self.options.slow.as_secs_f64()
                ),
                self.hints.slow,
            );
        }
        let noise = self.host.provider_problem_lines() - stderr_before;
        if noise > 0 {
            let quotes = self.host.take_problem_quotes();
            let mut said: Vec<String> = quotes.iter().map(|line| format!("'{line}'")).collect();
            if quotes.len() < noise {
                said.push(format!("and {} more", noise - quotes.len()));
            }
            self.find(
                step,
                format!(
                    "wrote {noise} warning or error line(s) to stderr: {}",
                    said.join("; ")
                ),
                self.hints.noise,
            );
        }
        for problem in self.host.take_output_problems() {
            self.find(
                step,
                problem,
                "report every attribute the metadata declares, in its declared type",
            );
        }
        result
    }

    fn run(&mut self, source: &Path) {
        let Some(provider) = self.load(source) else {
            return;
        };
        self.check_describe(&provider);
        let Some(listed) = self.check_list(&provider) else {
            return;
        };
        self.check_find(&provider, &listed);
        let updates = provider.meta.supports(provider.meta.update_action());
        // Commands (an exec's) are the manifest's: never listed, made or
        // removed, so there is nothing to work on.
        let commands = provider.meta.runs_commands;
        let creates = updates && crate::update::can_be_absent(&provider) && !commands;
        let work = self.work_on(&provider, &listed, updates, creates);
        let mut skipped = Vec::new();
        if listed.is_empty() && work.made.is_none() {
            skipped.push("find of a listed name");
        }
        if updates {
            self.check_changes(&provider, &listed, &work, creates, &mut skipped);
        }
        if let Some(name) = &work.made {
            self.delete(&provider, name);
        }
        self.note_not_run(skipped, work.lacking, updates);
    }

    /// The provider at `source`, when its metadata loads and it is
    /// suitable here; a finding otherwise.
    fn load(&mut self, source: &Path) -> Option<Provider> {
        let provider = match self.step("metadata", |host| discovery::load(host, source)) {
            Ok(provider) => provider,
            Err(e) => {
                self.find(
                    "metadata",
                    e.to_string(),
                    "see the metadata section of docs/providers.md",
                );
                return None;
            }
        };
        self.report.provider = Some(provider.qualified_name());
        if let Some(reason) = &provider.unsuitable {
            self.find(
                "metadata",
                format!("not suitable here: {reason}"),
                "ral check runs only suitable providers",
            );
            return None;
        }
        Some(provider)
    }

    /// What the checks of changes work on. The round trip copies a
    /// resource that exists; failing one, it works on one made from the
    /// metadata, as do noop and update when nothing at all is listed.
    fn work_on(
        &mut self,
        provider: &Provider,
        listed: &[Resource],
        updates: bool,
        creates: bool,
    ) -> Work {
        let commands = provider.meta.runs_commands;
        let mut work = Work {
            template: listed.iter().find(|r| !r.is_absent()).cloned(),
            made: None,
            lacking: if listed.is_empty() {
                "nothing is listed to work on".to_owned()
            } else {
                "nothing present is listed to copy".to_owned()
            },
        };
        if work.template.is_none() && creates && self.options.scratch {
            match self.make_up(provider) {
                Ok(resource) => {
                    work.made = Some(resource.name.clone());
                    work.template = Some(resource);
                }
                Err(why) => work.lacking = format!("{}, and {why}", work.lacking),
            }
        } else if work.template.is_none() && commands {
            work.lacking.push_str(
                ", and its resources are commands, which are never created (runs_commands)",
            );
        } else if work.template.is_none() && updates && !creates {
            work.lacking
                .push_str(", and none can be created (its ensure has no 'absent')");
        }
        work
    }

    /// Noop, update and the round trip, on what there is to work on;
    /// those that have nothing are noted in `skipped`.
    fn check_changes(
        &mut self,
        provider: &Provider,
        listed: &[Resource],
        work: &Work,
        creates: bool,
        skipped: &mut Vec<&'static str>,
    ) {
        match listed.first().or(work.template.as_ref()).cloned() {
            Some(subject) => {
                // noop first: a real update could hide what a noop changed.
                let subjects = match listed.is_empty() {
                    true => std::slice::from_ref(&subject),
                    false => &listed[..listed.len().min(NOOP_SUBJECTS)],
                };
                self.check_noop(provider, subjects);
                self.check_update_without_change(provider, &subject);
            }
            None => {
                if provider.meta.supports_noop {
                    skipped.push("noop");
                }
                skipped.push("update");
            }
        }
        if creates && self.options.scratch {
            match &work.template {
                Some(template) => self.check_round_trip(provider, template),
                None => skipped.push("round trip"),
            }
        }
    }

    /// The checks that did not run, and why, in the report.
    fn note_not_run(&mut self, skipped: Vec<&'static str>, lacking: String, updates: bool) {
        if !skipped.is_empty() {
            self.report.not_run.push(NotRun {
                checks: skipped,
                why: lacking,
                hint: Some(if self.options.scratch {
                    HINT_SEED
                } else {
                    HINT_ROOT
                }),
            });
        }
        if updates && !self.options.scratch {
            self.report.not_run.push(NotRun {
                checks: vec!["round trip"],
                why: "it runs only on a temporary copy, not on --root".to_owned(),
                hint: None,
            });
        }
    }

    /// describe must print what the `.yaml` says.
    fn check_describe(&mut self, provider: &Provider) {
        let yaml = provider.source.with_extension("yaml");
        if !yaml.exists() || !provider.meta.supports(Action::Describe) {
            return;
        }
        let label = provider.qualified_name();
        let described = self.step("describe", |host| host.describe(&label, &provider.source));
        match described.and_then(|text| Metadata::parse(&text, &provider.source)) {
            Ok(meta) if meta == provider.meta => {}
            Ok(_) => self.find(
                "describe",
                format!(
                    "describe prints metadata that differs from {}",
                    yaml.display()
                ),
                "keep the .yaml and the describe output identical (print the file)",
            ),
            Err(e) => self.find(
                "describe",
                e.to_string(),
                "describe must print valid YAML metadata and exit 0",
            ),
        }
    }

    fn check_list(&mut self, provider: &Provider) -> Option<Vec<Resource>> {
        let mut listed = Vec::new();
        let result = self.step("list", |host| {
            host.list(provider, &mut |resource: Resource| {
                listed.push(resource);
                Ok(())
            })
        });
        if let Err(e) = result {
            // A provider failing (rather than answering badly) on an
            // empty root most likely found none of its files.
            let empty_root = matches!(e, Error::Exit { .. } | Error::Reported { .. })
                && std::fs::read_dir(&self.options.root)
                    .map(|mut entries| entries.next().is_none())
                    .unwrap_or(false);
            self.find(
                "list",
                e.to_string(),
                if empty_root {
                    "list prints '# simple' (or a json document) and exits 0; here the root \
                     is empty: pass --seed DIR, a directory holding the files the provider \
                     reads (etc/..., var/...), copied in as the root"
                } else {
                    "list prints '# simple' (or a json document) and exits 0"
                },
            );
            return None;
        }
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        for resource in &listed {
            *counts.entry(resource.name.as_str()).or_default() += 1;
        }
        let repeated: Vec<String> = counts
            .iter()
            .filter(|(_, count)| **count > 1)
            .map(|(name, count)| format!("'{name}' ({count} times)"))
            .collect();
        if !repeated.is_empty() {
            self.find(
                "list",
                format!("the listing repeats names: {}", repeated.join(", ")),
                "names identify resources; list each once",
            );
        }
        Some(listed)
    }

    fn check_find(&mut self, provider: &Provider, listed: &[Resource]) {
        for resource in listed.iter().take(MAX_FINDS) {
            let found = self.step("find", |host| host.find(provider, &resource.name));
            match found {
                Ok(Some(found)) if steady(provider, &found) == steady(provider, resource) => {}
                Ok(Some(found)) => self.find(
                    "find",
                    format!(
                        "find '{}' disagrees with list: {}",
                        resource.name,
                        differences(provider, resource, &found)
                    ),
                    "find NAME must report exactly what list reports for NAME",
                ),
                Ok(None) => self.find(
                    "find",
                    format!(
                        "find '{}' says it does not exist, but list reports it",
                        resource.name
                    ),
                    "find NAME must report exactly what list reports for NAME",
                ),
                Err(e) => self.find(
                    "find",
                    e.to_string(),
                    "find must answer for every listed name",
                ),
            }
        }
        match self.step("find", |host| host.find(provider, UNKNOWN_NAME)) {
            Ok(None) => {}
            Ok(Some(found)) if found.is_absent() => {}
            Ok(Some(_)) => self.find(
                "find",
                format!("find '{UNKNOWN_NAME}' reports a resource that does not exist"),
                "answer ral_unknown: true (or ensure: absent) for names you do not know",
            ),
            Err(e) => self.find(
                "find",
                e.to_string(),
                "find must answer for unknown names too",
            ),
        }
    }

    /// Settable attributes of `resource` at their current values: an update
    /// with nothing to change.
    fn unchanged(provider: &Provider, resource: &Resource) -> Vec<(String, Value)> {
        resource
            .attrs
            .iter()
            .filter(|(key, _)| {
                provider
                    .attribute(key)
                    .is_some_and(|a| matches!(a.kind, Kind::ReadWrite | Kind::InitOnly))
            })
            .map(|(key, value)| (key.clone(), value.clone()))
            .collect()
    }

    fn check_update_without_change(&mut self, provider: &Provider, resource: &Resource) {
        let should = Self::unchanged(provider, resource);
        if should.is_empty() {
            return;
        }
        let plan = Transition {
            name: resource.name.clone(),
            found: true,
            state: resource.clone(),
            should,
        };
        let answer = self.step("update", |host| {
            host.set_many(provider, &[plan.as_update()], false)
        });
        match answer.map(|mut answers| answers.pop()) {
            Ok(Some(Ok(answer))) if answer.changes.is_empty() => {}
            Ok(Some(Ok(answer))) => {
                let attrs: Vec<&str> = answer.changes.iter().map(|c| c.attr.as_str()).collect();
                self.find(
                    "update",
                    format!(
                        "an update of '{}' to its current values reported changes to {}",
                        resource.name,
                        attrs.join(", ")
                    ),
                    "report only attributes whose value really changed",
                );
            }
            Ok(Some(Err(e))) | Err(e) => self.find(
                "update",
                e.to_string(),
                "update must accept the values find reports",
            ),
            Ok(None) => {}
        }
    }

    /// Under noop nothing may change: neither the listing nor any file
    /// below the root. The update must succeed on one of `subjects`: a
    /// provider may refuse one for a reason of its own (group refuses to
    /// remove a user's primary group, as groupdel does), and is then
    /// checked on the next.
    fn check_noop(&mut self, provider: &Provider, subjects: &[Resource]) {
        if !provider.meta.supports_noop {
            return;
        }
        let mut refused = None;
        for resource in subjects {
            match self.noop_once(provider, resource) {
                Some(message) => {
                    refused.get_or_insert(message);
                }
                None => return,
            }
        }
        if let Some(message) = refused {
            self.find("noop", message, HINT_NOOP_FAILS);
        }
    }

    /// One noop update of `resource`, whose findings are made here but for
    /// a refusal of this resource, which is returned.
    fn noop_once(&mut self, provider: &Provider, resource: &Resource) -> Option<String> {
        let change = match provider.attribute("ensure") {
            Some(_) if crate::update::can_be_absent(provider) => {
                ("ensure".to_owned(), Value::String("absent".to_owned()))
            }
            // An ensure without absent (running or stopped): another value.
            Some(ensure) => match &ensure.attr_type {
                AttrType::Enum(values) => match values
                    .iter()
                    .find(|v| Some(v.as_str()) != resource.ensure())
                {
                    Some(other) => ("ensure".to_owned(), Value::String(other.clone())),
                    None => return None,
                },
                _ => return None,
            },
            None => match provider.meta.attributes.values().find(|a| {
                a.name != "name"
                    && a.kind == Kind::ReadWrite
                    && a.attr_type.accepts_text("ral-check")
            }) {
                Some(attr) => (attr.name.clone(), Value::String("ral-check".to_owned())),
                None => return None,
            },
        };
        let files_before = snapshot(&self.options.root);
        let listed_before = self.list_quietly(provider);
        let plan = Transition {
            name: resource.name.clone(),
            found: true,
            state: resource.clone(),
            should: vec![change],
        };
        let answer = self.step("noop", |host| {
            host.set_many(provider, &[plan.as_update()], true)
        });
        let refused = match answer.map(|mut answers| answers.pop()) {
            Ok(Some(Err(e))) => Some(e.to_string()),
            Err(e) => {
                self.find("noop", e.to_string(), HINT_NOOP_FAILS);
                None
            }
            Ok(_) => None,
        };
        let changed_files = diff_snapshots(&files_before, &snapshot(&self.options.root));
        if !changed_files.is_empty() {
            self.find(
                "noop",
                format!("a noop update changed files: {}", changed_files.join(", ")),
                "with ral_noop=true (json: ral.noop), report the changes but make none",
            );
        }
        if self.list_quietly(provider) != listed_before {
            self.find(
                "noop",
                "a noop update changed what list reports".to_owned(),
                "with ral_noop=true (json: ral.noop), report the changes but make none",
            );
        }
        refused
    }

    pub(super) fn list_quietly(&mut self, provider: &Provider) -> Option<Vec<Resource>> {
        let mut listed = Vec::new();
        let result = self.host.list(provider, &mut |resource: Resource| {
            listed.push(resource);
            Ok(())
        });
        self.host.take_output_problems();
        result.ok().map(|()| listed)
    }
}

/// A resource without the attributes its provider declares volatile
/// (they change by themselves between two reads).
pub(super) fn steady(provider: &Provider, resource: &Resource) -> Resource {
    let mut steady = resource.clone();
    steady
        .attrs
        .retain(|key, _| provider.attribute(key).is_none_or(|a| !a.volatile));
    steady
}

/// Says which attributes of two resources differ (volatile ones aside).
pub(super) fn differences(provider: &Provider, listed: &Resource, found: &Resource) -> String {
    let mut keys: Vec<&String> = listed.attrs.keys().chain(found.attrs.keys()).collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .filter(|key| provider.attribute(key).is_none_or(|a| !a.volatile))
        .filter(|key| listed.attrs.get(*key) != found.attrs.get(*key))
        .map(|key| {
            let show = |value: Option<&Value>| {
                value.map_or("nothing".to_owned(), |v| format!("'{}'", v.to_text()))
            };
            format!(
                "{key}: list says {}, find says {}",
                show(listed.attrs.get(key)),
                show(found.attrs.get(key))
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// Every regular file below `root` with its contents.
fn snapshot(root: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut files = BTreeMap::new();
    let mut pending = vec![root.to_owned()];
    while let Some(dir) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            match entry.file_type() {
                Ok(kind) if kind.is_dir() => pending.push(path),
                Ok(kind) if kind.is_file() => {
                    if let Ok(contents) = std::fs::read(&path) {
                        let relative = path.strip_prefix(root).unwrap_or(&path).to_owned();
                        files.insert(relative, contents);
                    }
                }
                _ => {}
            }
        }
    }
    files
}

fn diff_snapshots(
    before: &BTreeMap<PathBuf, Vec<u8>>,
    after: &BTreeMap<PathBuf, Vec<u8>>,
) -> Vec<String> {
    let mut paths: Vec<&PathBuf> = before.keys().chain(after.keys()).collect();
    paths.sort();
    paths.dedup();
    paths
        .into_iter()
        .filter(|path| before.get(*path) != after.get(*path))
        .map(|path| path.display().to_string())
        .collect()
}
