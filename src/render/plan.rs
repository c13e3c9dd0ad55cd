//! Plans for people and programs: the preview Terraform-style (`+`
//! create, `~` change, `-` remove), one line per task as `ral apply` ends
//! it, the summary, and the JSON document `schemas/ral-plan.schema.json`
//! describes (`converge::report` makes it). Sensitive values are redacted
//! in both forms.

use std::io::{self, Write};

use serde_json::{json, Value as Json};

use crate::converge::catalog::Catalog;
use crate::converge::plan::{Action, Plan, PlanState, Task, TaskState};
use crate::converge::report::Done;
use crate::error::Problem;
use crate::resource::Change;
use crate::store::{ItemState, StoredItem};
use crate::text::escape;
use crate::types::Value;

use super::diff::{self, Diff, Kind};
use super::human::{self, Style, NAME, NEW, OLD};

/// The colours of the signs: what is made green, what is changed yellow,
/// what is removed red, what only runs cyan, what is unknown magenta.
fn sign_style(sign: &str) -> anstyle::Style {
    use anstyle::AnsiColor::{Blue, Cyan, Green, Magenta, Red, Yellow};
    let colour = match sign {
        "+" => Green,
        "~" | "?" => Yellow,
        "-" => Red,
        "*" => Cyan,
        "^" => Blue,
        _ => Magenta,
    };
    colour.on_default().bold()
}

/// The colour of a line of a diff.
pub fn diff_style(kind: Kind) -> anstyle::Style {
    match kind {
        Kind::Header => NAME,
        Kind::Hunk => anstyle::AnsiColor::Cyan.on_default(),
        Kind::Same | Kind::NoNewline => anstyle::Style::new(),
        Kind::Removed => OLD,
        Kind::Added => NEW,
    }
}

fn painted_sign(task: &Task, style: Style) -> String {
    let sign = sign(task);
    style.paint(sign_style(sign), sign)
}

fn sign(task: &Task) -> &'static str {
    if task.deferred.is_some() && task.action == Action::Unknown {
        return "?";
    }
    action_sign(task.action)
}

/// The sign of what a task does, in every view of a plan.
pub fn action_sign(action: Action) -> &'static str {
    match action {
        Action::Create => "+",
        Action::Change => "~",
        Action::Remove => "-",
        Action::Run => "*",
        Action::Refresh => "^",
        Action::Unknown => "!",
    }
}

/// `from plugin NAME, ITEM: DESCRIPTION` for a plugin's task.
fn from_plugin(item: &crate::converge::catalog::Item) -> Option<String> {
    let from = item.from_plugin.as_deref()?;
    let task = from.task()?;
    let mut line = format!(
        "from plugin {}, {} {}",
        from.plugin().unwrap_or_default(),
        task.kind.as_str(),
        escape(&task.item)
    );
    if !task.description.is_empty() {
        line.push_str(&format!(": {}", escape(&task.description)));
    }
    // What a command runs is shown whole: it is what a reviewer approves.
    if let crate::plugin::TaskKind::Remote { command } = &task.kind {
        let words: Vec<String> = command.iter().map(|word| human::quote(word)).collect();
        line.push_str(&format!("\n    runs: {}", words.join(" ")));
    }
    if let crate::plugin::TaskKind::Config { replaces, .. } = &task.kind {
        let replaced: Vec<String> = replaces
            .iter()
            .map(|(type_name, title)| format!("{}[{}]", escape(type_name), escape(title)))
            .collect();
        if !replaced.is_empty() {
            line.push_str(&format!(
                "\n    replaces {} (left as it is; ral no longer manages it once this succeeds)",
                replaced.join(", ")
            ));
        }
    }
    Some(line)
}

/// `attr: value` for a creation (`ensure: directory`: what is made, as
/// a word), `attr: was -> is` otherwise.
fn change_text(catalog: &Catalog, task: &Task, change: &Change, style: Style) -> String {
    let provider = catalog.items[task.item].provider;
    let is = style.paint(NEW, &human::shown(provider, &change.attr, &change.is));
    let text = change_words(task, change, provider, is, style);
    format!("{text}{}", human::digest_note(provider, change))
}

fn change_words(
    task: &Task,
    change: &Change,
    provider: &crate::provider::Provider,
    is: String,
    style: Style,
) -> String {
    match (&change.was, task.action) {
        // A command's need to run reads as why it runs.
        (Some(Value::String(why)), _)
            if provider.meta.runs_commands && change.attr == crate::metadata::RUN =>
        {
            let verb = match task.state {
                TaskState::Success => "ran",
                _ => "runs",
            };
            format!("{verb}: {}", style.paint(OLD, &escape(why)))
        }
        (_, Action::Create) if change.attr == "ensure" => {
            let made = match &change.is {
                Value::String(word) if is_word(word) => style.paint(NEW, word),
                _ => is,
            };
            format!("ensure: {made}")
        }
        (_, Action::Create) => format!("{}: {is}", escape(&change.attr)),
        (None, _) => format!("{}: (none) -> {is}", escape(&change.attr)),
        (Some(was), _) => format!(
            "{}: {} -> {is}",
            escape(&change.attr),
            style.paint(OLD, &human::shown(provider, &change.attr, was))
        ),
    }
}

/// A plain word (`present`, `directory`), shown without quotes.
pub(crate) fn is_word(text: &str) -> bool {
    !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// The diff of a change whose old or new value has a line break: never
/// for a sensitive attribute, whose values are only ever `[redacted]`.
fn multi_line(catalog: &Catalog, task: &Task, change: &Change) -> Option<Diff> {
    let provider = catalog.items[task.item].provider;
    if human::is_sensitive(provider, &change.attr) {
        return None;
    }
    let Value::String(is) = &change.is else {
        return None;
    };
    let was = match &change.was {
        None => None,
        Some(Value::String(was)) => Some(was.as_str()),
        Some(_) => return None,
    };
    diff::is_multi_line(was, is).then(|| diff::unified(was.unwrap_or(""), is))
}

/// A diff's lines, escaped and painted, each indented by `indent`.
pub fn write_diff(out: &mut impl Write, diff: &Diff, indent: &str, style: Style) -> io::Result<()> {
    for line in &diff.lines {
        let text = style.paint(diff_style(line.kind), &escape(&line.text));
        writeln!(out, "{indent}{text}")?;
    }
    Ok(())
}

/// A change in the line per ended task: a multi-line value as one short
/// phrase, never its diff.
fn change_phrase(catalog: &Catalog, task: &Task, change: &Change, style: Style) -> String {
    match multi_line(catalog, task, change) {
        Some(_) if change.was.is_none() => {
            let lines = match &change.is {
                Value::String(text) => text.lines().count(),
                _ => 0,
            };
            format!(
                "{}: set ({})",
                escape(&change.attr),
                super::diff::lines(lines)
            )
        }
        Some(diff) => format!("{}: {}", escape(&change.attr), diff.phrase()),
        None => change_text(catalog, task, change, style),
    }
}

/// Writes ` (waits for A, B, ...)`: the resources `names` (of every
/// task, made once) of the tasks `tasks` (indices). A task may wait for
/// thousands: nothing is made for each but its name, written.
fn write_waits_for(out: &mut impl Write, names: &[String], tasks: &[usize]) -> io::Result<()> {
    write!(out, " (waits for ")?;
    for (at, &task) in tasks.iter().enumerate() {
        if at > 0 {
            write!(out, ", ")?;
        }
        write!(out, "{}", names[task])?;
    }
    write!(out, ")")
}

/// The resources of the tasks `tasks` (indices), joined by `between`.
fn resources_of(catalog: &Catalog, plan: &Plan, tasks: &[usize], between: &str) -> String {
    let names: Vec<String> = tasks
        .iter()
        .map(|&at| catalog.items[plan.tasks[at].item].reference())
        .collect();
    names.join(between)
}

/// The tasks `task` waits for, as shown: a refresh's own resource's task
/// goes without saying.
fn shown_requires(plan: &Plan, task: &Task) -> Vec<usize> {
    task.requires
        .iter()
        .copied()
        .filter(|&at| task.action != Action::Refresh || plan.tasks[at].item != task.item)
        .collect()
}

/// The preview: each task with its changes, then the summary line.
pub fn preview(
    out: &mut impl Write,
    catalog: &Catalog,
    plan: &Plan,
    style: Style,
) -> io::Result<()> {
    let names: Vec<String> = (plan.tasks.iter())
        .map(|task| catalog.items[task.item].reference())
        .collect();
    for (at, task) in plan.tasks.iter().enumerate() {
        let item = &catalog.items[task.item];
        write!(
            out,
            "{} {}",
            painted_sign(task, style),
            style.paint(NAME, &names[at])
        )?;
        if task.drifted {
            write!(out, " (drifted)")?;
        }
        let waits = shown_requires(plan, task);
        if !waits.is_empty() {
            write_waits_for(out, &names, &waits)?;
        }
        writeln!(out)?;
        if let Some(error) = &task.error {
            writeln!(out, "    error: {}", escape(&error.message))?;
        }
        if let Some(from) = from_plugin(item) {
            writeln!(out, "    {from}")?;
        }
        if task.owed {
            writeln!(
                out,
                "    owed: an earlier run's refresh of it did not succeed"
            )?;
        } else if task.action == Action::Refresh {
            writeln!(
                out,
                "    would refresh if {} changes",
                resources_of(catalog, plan, &task.refresh_on, " or ")
            )?;
        }
        match &task.deferred {
            Some(why) if why == crate::converge::plan::GUARDS_LATER => {
                writeln!(out, "    ({why})")?
            }
            Some(why) => writeln!(
                out,
                "    (read again once the tasks it waits for are done; it could not be read: {})",
                escape(why)
            )?,
            None => {}
        }
        for change in &task.changes {
            match multi_line(catalog, task, change) {
                Some(diff) => {
                    writeln!(out, "    {}:", escape(&change.attr))?;
                    write_diff(out, &diff, "      ", style)?;
                }
                None => writeln!(out, "    {}", change_text(catalog, task, change, style))?,
            }
        }
    }
    writeln!(out, "{}", summary(plan))
}

/// `Plan: 2 to create, 1 to change, 0 to remove; 17 unchanged.`
pub fn summary(plan: &Plan) -> String {
    let unreadable = plan
        .tasks
        .iter()
        .filter(|t| t.action == Action::Unknown && t.deferred.is_none())
        .count();
    let deferred = plan.tasks.iter().filter(|t| t.deferred.is_some()).count();
    let mut line = format!(
        "Plan: {} to create, {} to change, {} to remove; {} unchanged",
        plan.count(Action::Create),
        plan.count(Action::Change),
        plan.count(Action::Remove),
        plan.unchanged
    );
    let run = plan.count(Action::Run);
    if run > 0 {
        line.push_str(&format!(
            "; {run} to run (callbacks and commands of plugins)"
        ));
    }
    let owed = plan.tasks.iter().filter(|t| t.owed).count();
    let refresh = plan.count(Action::Refresh) - owed;
    if refresh > 0 {
        line.push_str(&format!(
            "; {refresh} to refresh (if what they subscribe to changes)"
        ));
    }
    if owed > 0 {
        line.push_str(&format!("; {owed} refresh(es) owed by an earlier run"));
    }
    if deferred > 0 {
        line.push_str(&format!(
            "; {deferred} to read once what they wait for is done"
        ));
    }
    if unreadable > 0 {
        line.push_str(&format!("; {unreadable} could not be read"));
    }
    line.push('.');
    line
}

/// The line for a task that ended: state, resource, changes (or the
/// error), time.
pub fn task_ended(
    out: &mut impl Write,
    catalog: &Catalog,
    plan: &Plan,
    task: usize,
    style: Style,
) -> io::Result<()> {
    let task = &plan.tasks[task];
    let item = &catalog.items[task.item];
    let state = match task.state {
        TaskState::Success => style.paint(NEW, "Success"),
        TaskState::Failed => style.paint(OLD, "Failed"),
        other => other.as_str().to_owned(),
    };
    write!(
        out,
        "{state:<7} {} {}",
        painted_sign(task, style),
        style.paint(NAME, &item.reference())
    )?;
    if task.state == TaskState::Success || task.state == TaskState::Failed {
        write!(out, " ({:.2} s)", task.seconds)?;
    }
    match (&task.error, &task.note) {
        (Some(error), _) => writeln!(out, ": {}", escape(&error.message)),
        (None, Some(note)) => writeln!(out, ": {}", escape(note)),
        (None, None) if task.action == Action::Refresh => {
            // What called for it: the tasks it subscribes to that changed.
            let changed: Vec<usize> = task
                .refresh_on
                .iter()
                .copied()
                .filter(|&at| plan.tasks[at].state == TaskState::Success)
                .collect();
            match (task.owed, changed.is_empty()) {
                (true, true) => writeln!(out, ": refreshed, as an earlier run owed"),
                (true, false) => writeln!(
                    out,
                    ": refreshed, as an earlier run owed and {} changed",
                    resources_of(catalog, plan, &changed, " and ")
                ),
                (false, _) => writeln!(
                    out,
                    ": refreshed, as {} changed",
                    resources_of(catalog, plan, &changed, " and ")
                ),
            }
        }
        (None, None) => {
            let changes: Vec<String> = task
                .changes
                .iter()
                .map(|change| change_phrase(catalog, task, change, style))
                .collect();
            if changes.is_empty() {
                writeln!(out)
            } else {
                writeln!(out, ": {}", changes.join(", "))
            }
        }
    }
}

/// The summary after a run, by what happened:
/// `Apply failed: 3 created, 1 changed, 1 failed, 2 skipped; 17 unchanged (4.20 s).`
pub fn run_summary(plan: &Plan, seconds: f64) -> String {
    let done = Done::of(
        plan.tasks
            .iter()
            .map(|t| (t.action, t.state, t.note.as_ref())),
    );
    outcome_line(plan.state, &done, plan.unchanged, seconds)
}

/// [`run_summary`] of a plan ended in `state` with these counts.
fn outcome_line(state: PlanState, done: &Done, unchanged: usize, seconds: f64) -> String {
    let how = match state {
        PlanState::Stopping | PlanState::Stopped => "Apply stopped",
        PlanState::Failed => "Apply failed",
        _ if done.failed > 0 => "Apply failed",
        _ => "Apply complete",
    };
    format!(
        "{how}: {}; {unchanged} unchanged ({seconds:.2} s).",
        done_phrase(done)
    )
}

/// The non-zero outcome counts, `3 created, 1 failed`, or `no changes`.
pub fn done_phrase(done: &Done) -> String {
    let named: Vec<String> = done
        .named()
        .iter()
        .map(|(name, count)| format!("{count} {name}"))
        .collect();
    if named.is_empty() {
        "no changes".to_owned()
    } else {
        named.join(", ")
    }
}

/// One line per stored item no manifest lists any more that is only
/// forgotten (ral did not create it): dropping a resource from the
/// manifest does not always remove it, and the user sees which it does
/// not. `tense`: "is" for a plan, "was" for an apply.
pub fn forgotten(out: &mut impl Write, items: &[StoredItem], tense: &str) -> io::Result<()> {
    for item in items {
        // A plugin item's resource that its removal leaves (or the
        // removals of the items that shared it).
        if !item.owners.is_empty() {
            let owners: Vec<String> = item.owners.iter().map(|o| escape(o)).collect();
            let whose = match owners.len() {
                1 => "its removal leaves",
                _ => "their removals leave",
            };
            writeln!(
                out,
                "= {}[{}] {tense} only forgotten, left as it is: {} made it, and {whose} it",
                escape(&item.type_name),
                escape(&item.name),
                owners.join(" and ")
            )?;
            continue;
        }
        // Why it is not removed, as lifecycle::leftovers decides.
        let why = if !item.created {
            "ral did not create it"
        } else if item.state == ItemState::Initial {
            "it was never applied"
        } else {
            "its provider cannot remove"
        };
        writeln!(
            out,
            "= {}[{}] {tense} only forgotten, left as it is: no manifest lists it, and {why}",
            escape(&item.type_name),
            escape(&item.name)
        )?;
    }
    Ok(())
}

/// The document `--json` prints when nothing ran: the message, and each
/// problem of the manifests with its file and line.
pub fn error_document(message: &str, problems: &[Problem]) -> Json {
    let problems: Vec<Json> = problems
        .iter()
        .map(|p| {
            json!({
                "file": p.file.to_string_lossy(),
                "line": p.line,
                "message": p.message,
            })
        })
        .collect();
    json!({"error": {"message": message, "problems": problems}})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_says_how_the_apply_ended_and_only_the_counts_not_zero() {
        let done = Done {
            created: 3,
            changed: 1,
            failed: 1,
            skipped: 2,
            ..Done::default()
        };
        assert_eq!(
            outcome_line(PlanState::Failed, &done, 17, 4.2),
            "Apply failed: 3 created, 1 changed, 1 failed, 2 skipped; 17 unchanged (4.20 s)."
        );
        let stopped = Done {
            created: 1,
            stopped: 4,
            ..Done::default()
        };
        assert_eq!(
            outcome_line(PlanState::Stopped, &stopped, 0, 1.0),
            "Apply stopped: 1 created, 4 stopped; 0 unchanged (1.00 s)."
        );
        assert_eq!(
            outcome_line(PlanState::Successful, &Done::default(), 2, 0.5),
            "Apply complete: no changes; 2 unchanged (0.50 s)."
        );
    }
}
