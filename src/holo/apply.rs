//! `apply` and `apply --force`: the lock, one plugin call per selected
//! entity with file descriptor 3 read for its messages, the heading printed
//! before the entity's first output, and the outcome of each entity for
//! `--json` and `--strict`. Also `apply --noop`, which shows each entity's
//! diff instead of calling apply.

use std::cell::Cell;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;

use serde_json::json;

use super::diff::{self, DiffError};
use super::options::Options;
use super::output::raw;
use super::output::{info_line, Printer, To};
use super::plugin::{exit_text, os_text, Operation, Plugin};
use super::scan::Entity;
use super::session::Session;
use super::stop::Stop;
use crate::process::streams::Stream;

/// What became of one entity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Applied,
    NotChanged,
    /// Changed or deleted by someone else; `restore` when deleted.
    NeedsForce {
        restore: bool,
        diff: String,
    },
    Failed {
        status: String,
    },
    /// `--noop`: what the diff shows.
    Previewed {
        diff: String,
    },
}

/// Holds `ROOT/run/holo.pid` while apply runs.
pub struct Lock {
    path: String,
}

impl Lock {
    pub fn take(session: &mut Session) -> Result<Lock, Stop> {
        let path = super::paths::join(&session.runner.root, "run/holo.pid");
        let created = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .open(&path);
        match created {
            Ok(mut file) => {
                crate::process::remove_on_interrupt(std::path::Path::new(&path));
                let _ = writeln!(file, "{}", std::process::id());
                Ok(Lock { path })
            }
            Err(e) => {
                let printer = &mut session.printer;
                printer.error(&format!(
                    "Cannot create lock file {path}: open {path}: {}",
                    os_text(&e)
                ));
                if e.kind() == std::io::ErrorKind::AlreadyExists {
                    printer.write(
                        To::Err,
                        b"This usually means that another instance of Holo is currently running.\n",
                    );
                    printer.write(
                        To::Err,
                        b"If not, you can try to delete the lock file manually.\n",
                    );
                }
                Err(Stop(255))
            }
        }
    }

    /// Removes the lock, reporting a failure (which does not change the
    /// exit code, as in Holo).
    pub fn release(mut self, printer: &mut Printer) {
        crate::process::keep_on_interrupt(std::path::Path::new(&self.path));
        if let Err(e) = std::fs::remove_file(&self.path) {
            printer.error(&format!("remove {}: {}", self.path, os_text(&e)));
        }
        self.path.clear();
    }
}

impl Drop for Lock {
    /// Removes a lock that was not released (a panic on the way).
    fn drop(&mut self) {
        if !self.path.is_empty() {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// The apply heading: verb, bold ID, reason, info lines aligned to the verb.
pub fn heading(printer: &Printer, entity: &Entity) -> String {
    let mut text = format!("{} {}", entity.verb, printer.bold(To::Out, &entity.id));
    if !entity.reason.is_empty() {
        text.push_str(&format!(" ({})", entity.reason));
    }
    text.push('\n');
    for (key, value) in &entity.info {
        text.push_str(&info_line(entity.verb.len(), key, value));
    }
    text
}

/// Applies one entity, printing as Holo does unless `quiet` (for `--json`,
/// where the plugin's output is collected instead).
pub fn apply_one(
    session: &mut Session,
    entity: &Entity,
    force: bool,
    quiet: bool,
    collected: &mut Vec<(Stream, String)>,
) -> Outcome {
    let plugin = session.plugins[entity.plugin].clone();
    let head = Head {
        text: heading(&session.printer, entity),
        shown: Cell::new(false),
        quiet,
    };
    let op = if force { "force-apply" } else { "apply" };
    let result = {
        let mut forward = |printer: &mut Printer, stream: Stream, line: &[u8]| {
            if quiet {
                collected.push((stream, String::from_utf8_lossy(line).into_owned()));
            } else {
                head.show(printer);
                super::plugin::pass_on(printer, stream, line);
            }
        };
        session.runner.run(
            &plugin,
            Operation::on(op, &entity.id),
            &mut session.printer,
            Some(&mut forward),
        )
    };
    let ended = match result {
        Ok((ended, _)) if ended.success() => ended,
        Ok((ended, _)) => {
            head.error(&mut session.printer, &exit_text(&ended));
            return finish(
                session,
                quiet,
                Outcome::Failed {
                    status: exit_text(&ended),
                },
            );
        }
        Err(error) => {
            let message = error.to_string();
            head.error(&mut session.printer, &message);
            return finish(session, quiet, Outcome::Failed { status: message });
        }
    };
    let said = said_on_fd3(&mut session.printer, &head, &ended.fd3);
    let mut outcome = said.outcome;
    if said.show_report {
        head.show(&mut session.printer);
    }
    if said.show_diff {
        show_diff(session, &plugin, entity, &head, collected, &mut outcome);
    }
    finish(session, quiet, outcome)
}

/// An entity's heading, printed once, before the first thing said about
/// it, unless the run is `quiet`.
struct Head {
    text: String,
    shown: Cell<bool>,
    quiet: bool,
}

impl Head {
    fn show(&self, printer: &mut Printer) {
        if !self.quiet && !self.shown.replace(true) {
            printer.write(To::Out, self.text.as_bytes());
            printer.end_paragraph(To::Out);
        }
    }

    /// An error about the entity, under its heading.
    fn error(&self, printer: &mut Printer, message: &str) {
        self.show(printer);
        if !self.quiet {
            printer.error(message);
        }
    }
}

/// What a plugin's messages on file descriptor 3 make of its apply.
struct Said {
    outcome: Outcome,
    /// The heading is shown though the plugin said nothing else.
    show_report: bool,
    /// The entity was changed by hand: its diff is shown.
    show_diff: bool,
}

fn said_on_fd3(printer: &mut Printer, head: &Head, fd3: &[u8]) -> Said {
    let mut said = Said {
        outcome: Outcome::Applied,
        show_report: true,
        show_diff: false,
    };
    for message in String::from_utf8_lossy(fd3).split('\n') {
        match message {
            "not changed" => {
                said.show_report = false;
                said.outcome = Outcome::NotChanged;
            }
            "requires --force to overwrite" => {
                head.error(
                    printer,
                    "Entity has been modified by user (use --force to overwrite)",
                );
                said.show_diff = true;
                said.outcome = Outcome::NeedsForce {
                    restore: false,
                    diff: String::new(),
                };
            }
            "requires --force to restore" => {
                head.error(
                    printer,
                    "Entity has been deleted by user (use --force to restore)",
                );
                said.outcome = Outcome::NeedsForce {
                    restore: true,
                    diff: String::new(),
                };
            }
            _ => {}
        }
    }
    said
}

/// The diff of an entity changed by hand, shown (unless quiet) and kept
/// in the outcome.
fn show_diff(
    session: &mut Session,
    plugin: &Plugin,
    entity: &Entity,
    head: &Head,
    collected: &mut Vec<(Stream, String)>,
    outcome: &mut Outcome,
) {
    match render_diff(session, plugin, entity, head.quiet, collected) {
        Err(error) => head.error(&mut session.printer, &error.to_string()),
        Ok(text) => {
            if let Outcome::NeedsForce { diff, .. } = outcome {
                diff.clone_from(&text);
            }
            if !head.quiet {
                let coloured = session.printer.colour_diff(To::Out, &text);
                session.printer.end_paragraph(To::Out);
                session
                    .printer
                    .write(To::Out, diff::indent(&coloured).as_bytes());
            }
        }
    }
}

fn finish(session: &mut Session, quiet: bool, outcome: Outcome) -> Outcome {
    if !quiet {
        session.printer.end_paragraph(To::Out);
    }
    outcome
}

/// The entity's diff; the plugin's own output is shown, or collected for
/// `--json` when `quiet`.
fn render_diff(
    session: &mut Session,
    plugin: &Plugin,
    entity: &Entity,
    quiet: bool,
    collected: &mut Vec<(Stream, String)>,
) -> Result<String, DiffError> {
    diff::render(
        &session.runner,
        &session.resources,
        plugin,
        &entity.id,
        &mut session.printer,
        &mut |printer, stream, line| {
            if quiet {
                collected.push((stream, String::from_utf8_lossy(line).into_owned()));
            } else {
                super::plugin::pass_on(printer, stream, line);
            }
        },
    )
}

/// `apply --noop`: the heading and the entity's diff, indented; nothing is
/// applied.
pub fn preview_one(
    session: &mut Session,
    entity: &Entity,
    quiet: bool,
    collected: &mut Vec<(Stream, String)>,
) -> Outcome {
    let plugin = session.plugins[entity.plugin].clone();
    if !quiet {
        let head = heading(&session.printer, entity);
        session.printer.write(To::Out, head.as_bytes());
        session.printer.end_paragraph(To::Out);
    }
    let rendered = render_diff(session, &plugin, entity, quiet, collected);
    let outcome = match rendered {
        Ok(text) => {
            if !quiet {
                let shown = if text.is_empty() {
                    "(the plugin reports no diff for this entity)\n".to_owned()
                } else {
                    session.printer.colour_diff(To::Out, &text)
                };
                session
                    .printer
                    .write(To::Out, diff::indent(&shown).as_bytes());
            }
            Outcome::Previewed { diff: text }
        }
        Err(error) => {
            let message = error.to_string();
            if !quiet {
                session
                    .printer
                    .error(&format!("cannot diff {}: {message}", entity.id));
            }
            Outcome::Failed { status: message }
        }
    };
    finish(session, quiet, outcome)
}

/// The JSON form of one entity's outcome.
pub fn outcome_json(
    session: &Session,
    entity: &Entity,
    outcome: &Outcome,
    output: &[(Stream, String)],
) -> serde_json::Value {
    let mut doc = json!({
        "id": entity.id,
        "plugin": session.plugins[entity.plugin].id,
    });
    let (result, extra) = match outcome {
        Outcome::Applied => ("applied", json!({})),
        Outcome::NotChanged => ("not changed", json!({})),
        Outcome::NeedsForce { restore, diff } => (
            "requires --force",
            json!({
                "reason": if *restore { "deleted by user" } else { "modified by user" },
                "diff": diff,
            }),
        ),
        Outcome::Failed { status } => ("failed", json!({ "status": status })),
        Outcome::Previewed { diff } => ("would apply", json!({ "diff": diff })),
    };
    doc["result"] = json!(result);
    if let (Some(target), Some(extra)) = (doc.as_object_mut(), extra.as_object()) {
        for (key, value) in extra {
            target.insert(key.clone(), value.clone());
        }
    }
    let lines = |wanted: Stream| -> Vec<&str> {
        output
            .iter()
            .filter(|(stream, _)| *stream == wanted)
            .map(|(_, line)| line.as_str())
            .collect()
    };
    doc["stdout"] = json!(lines(Stream::Stdout));
    doc["stderr"] = json!(lines(Stream::Stderr));
    doc
}

impl Session {
    pub(super) fn apply_all(
        &mut self,
        entities: &[Entity],
        options: &Options,
    ) -> Result<i32, Stop> {
        let lock = if options.noop {
            None
        } else {
            Some(Lock::take(self)?)
        };
        let mut results = Vec::new();
        let mut failed = false;
        for entity in entities {
            crate::process::exit_if_interrupted();
            let mut collected = Vec::new();
            let outcome = if options.noop {
                preview_one(self, entity, options.json, &mut collected)
            } else {
                apply_one(self, entity, options.force, options.json, &mut collected)
            };
            failed |= matches!(outcome, Outcome::Failed { .. });
            if options.json {
                results.push(outcome_json(self, entity, &outcome, &collected));
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
