//! The HTML report of a run (`ral apply --report FILE.html`, `ral state
//! show ID --html`): one self-contained page made from
//! [`Report`](crate::converge::report::Report) alone — the plan's id,
//! state, time and counts, then a table of its tasks in order with each
//! change, multi-line values as unified diffs.
//!
//! The page needs nothing else: its style is inline, it has no script and
//! names no external URL, so it opens the same from a mail, an artifact
//! store or a disk with no network. Every text in it comes from the
//! report and goes through [`text`] (HTML-escaped, control characters
//! made visible), so a resource named `<script>` is only text. Sensitive
//! values are already `[redacted]` in the report.

use std::io::{self, Write};

use serde_json::Value as Json;

use crate::converge::plan::{Action, TaskState};
use crate::converge::report::{Done, Report, TaskReport};
use crate::provider::ShownChange;
use crate::secrets::REDACTED;

use super::diff::{self, Diff, Kind};
use super::human;

/// The page's style: failed tasks stand out (a red bar and tint), states
/// are coloured badges, diff lines coloured as a terminal shows them.
const STYLE: &str = "\
body{font-family:system-ui,sans-serif;margin:1.5em;color:#1b1f24;background:#fff}
h1{font-size:1.4em;margin:0 0 .3em}
.meta{margin:.2em 0;color:#444}
.summary{font-weight:600;margin:.6em 0 1em}
table{border-collapse:collapse;width:100%}
th,td{border-bottom:1px solid #d8dee4;padding:.35em .5em;text-align:left;vertical-align:top}
th{background:#f3f5f7}
td.time{white-space:nowrap}
code,pre{font-family:ui-monospace,monospace;font-size:.92em}
pre{margin:.2em 0;padding:.4em;background:#f6f8fa;overflow-x:auto}
tr.failed{background:#fff0f0}
tr.failed td:first-child{border-left:4px solid #cf222e}
.sign{font-weight:700;font-family:ui-monospace,monospace}
.sign.create{color:#1a7f37}.sign.change{color:#9a6700}.sign.remove{color:#cf222e}
.sign.run{color:#0969da}.sign.refresh{color:#0550ae}.sign.unknown{color:#8250df}
.badge{display:inline-block;padding:.05em .5em;border-radius:.8em;font-size:.85em;color:#fff;background:#6e7781}
.badge.Success,.badge.Successful{background:#1a7f37}
.badge.Failed{background:#cf222e}
.badge.Skipped,.badge.Stopped,.badge.Stopping{background:#9a6700}
.badge.Running{background:#0969da}
.error{color:#a40e26;font-weight:600;margin:.2em 0}
.attr{font-weight:600}
.diff .add{color:#1a7f37}.diff .del{color:#cf222e}.diff .hunk{color:#0969da}.diff .head{font-weight:700}
";

/// `text` with `&`, `<`, `>` and quotes as entities, after control
/// characters are written as escapes (`\n`, `\u{1b}`).
pub fn text(raw: &str) -> String {
    let visible = crate::text::escape(raw);
    let mut out = String::with_capacity(visible.len());
    for c in visible.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The line that marks a page as a report of ral's, within its first
/// bytes: `ral apply --report` replaces such a file, and refuses others.
pub const GENERATOR: &str = "<meta name=\"generator\" content=\"ral report\">";

/// The whole page of `report`; `when` says when it ran (or was planned).
pub fn page(out: &mut impl Write, report: &Report, when: &str) -> io::Result<()> {
    let plan = &report.plan;
    let state = plan.state.as_str();
    start(out, &format!("ral plan {}: {state}", text(&plan.id)), "")?;
    writeln!(out, "<header>")?;
    writeln!(out, "<h1>ral plan <code>{}</code></h1>", text(&plan.id))?;
    plan_facts(out, report, Some(when))?;
    writeln!(out, "</header>")?;
    tasks(out, report, "")?;
    end(out)
}

/// The page's start up to its `<body>`, titled `title` (HTML already),
/// with `more_style` after the style every page has.
pub(super) fn start(out: &mut impl Write, title: &str, more_style: &str) -> io::Result<()> {
    writeln!(out, "<!DOCTYPE html>")?;
    writeln!(out, "<html lang=\"en\">")?;
    writeln!(out, "<head>")?;
    writeln!(out, "<meta charset=\"utf-8\">")?;
    writeln!(out, "{GENERATOR}")?;
    writeln!(
        out,
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
    )?;
    writeln!(out, "<title>{title}</title>")?;
    writeln!(out, "<style>\n{STYLE}{more_style}</style>")?;
    writeln!(out, "</head>")?;
    writeln!(out, "<body>")
}

pub(super) fn end(out: &mut impl Write) -> io::Result<()> {
    writeln!(out, "</body>")?;
    writeln!(out, "</html>")
}

/// What the page says of a plan before its tasks: its state, when it ran
/// (`when`, if known) and what it did.
pub(super) fn plan_facts(
    out: &mut impl Write,
    report: &Report,
    when: Option<&str>,
) -> io::Result<()> {
    let plan = &report.plan;
    let state = plan.state.as_str();
    writeln!(
        out,
        "<p class=\"meta\">State: <span class=\"badge {state}\">{state}</span></p>"
    )?;
    if let Some(when) = when {
        writeln!(out, "<p class=\"meta\">When: {}</p>", text(when))?;
    }
    writeln!(
        out,
        "<p class=\"summary\">{}; {} unchanged; {} tasks.</p>",
        text(&super::plan::done_phrase(&done(report))),
        plan.counts.unchanged,
        plan.tasks.len()
    )
}

/// How the plan's tasks ended, as the report counts it (or, for one
/// stored before it did, as its tasks say).
pub fn done(report: &Report) -> Done {
    let plan = &report.plan;
    plan.counts.done.unwrap_or_else(|| {
        Done::of(
            plan.tasks
                .iter()
                .map(|t| (t.action, t.state, t.note.as_ref())),
        )
    })
}

/// The table of the plan's tasks in order; each row's id is `task-ID`
/// after `id_prefix` (a page of many plans gives each its own).
pub(super) fn tasks(out: &mut impl Write, report: &Report, id_prefix: &str) -> io::Result<()> {
    writeln!(out, "<table>")?;
    writeln!(
        out,
        "<thead><tr><th>#</th><th>Sign</th><th>Resource</th><th>State</th><th>Time</th>\
         <th>Waits for</th><th>Changes</th></tr></thead>"
    )?;
    writeln!(out, "<tbody>")?;
    for task in &report.plan.tasks {
        row(out, report, task, id_prefix)?;
    }
    writeln!(out, "</tbody>")?;
    writeln!(out, "</table>")
}

/// The sign of an action, as the text shows it, and its class: the
/// action's name.
fn sign(action: Action) -> (&'static str, &'static str) {
    (super::plan::action_sign(action), action.as_str())
}

/// One task's row.
fn row(
    out: &mut impl Write,
    report: &Report,
    task: &TaskReport,
    id_prefix: &str,
) -> io::Result<()> {
    let state = task.state.as_str();
    let failed = if task.state == TaskState::Failed {
        " failed"
    } else {
        ""
    };
    let (sign, action) = sign(task.action);
    let seconds = match task.state {
        TaskState::Success | TaskState::Failed => format!("{:.2} s", task.seconds),
        _ => String::new(),
    };
    let waits = resources_of(report, &task.requires);
    writeln!(
        out,
        "<tr class=\"task{failed}\" id=\"{}task-{}\">",
        text(id_prefix),
        task.id
    )?;
    writeln!(out, "<td>{}</td>", task.id)?;
    writeln!(
        out,
        "<td class=\"sign {action}\" title=\"{action}\">{sign}</td>"
    )?;
    let drifted = if task.drifted { " (drifted)" } else { "" };
    writeln!(
        out,
        "<td><code>{}</code>{drifted}</td>",
        text(&task.resource)
    )?;
    writeln!(out, "<td><span class=\"badge {state}\">{state}</span></td>")?;
    writeln!(out, "<td class=\"time\">{seconds}</td>")?;
    writeln!(out, "<td>{}</td>", waits.join(", "))?;
    write!(out, "<td>")?;
    notes(out, report, task)?;
    writeln!(out, "</td>")?;
    writeln!(out, "</tr>")
}

/// The resources of the tasks `ids`, as code.
fn resources_of(report: &Report, ids: &[usize]) -> Vec<String> {
    ids.iter()
        .filter_map(|id| report.plan.tasks.iter().find(|t| t.id == *id))
        .map(|t| format!("<code>{}</code>", text(&t.resource)))
        .collect()
}

/// The last cell of a task's row: its error, its note, why it refreshes,
/// the plugin it came from, and its changes.
fn notes(out: &mut impl Write, report: &Report, task: &TaskReport) -> io::Result<()> {
    if let Some(error) = &task.error {
        write!(out, "<p class=\"error\">{}</p>", text(&error.message))?;
    }
    if let Some(note) = &task.note {
        write!(out, "<p>{}</p>", text(note))?;
    }
    if task.owed {
        write!(out, "<p>a refresh an earlier run owed</p>")?;
    }
    if !task.refresh_on.is_empty() {
        let sources = resources_of(report, &task.refresh_on);
        write!(
            out,
            "<p>a refresh for a change of {}</p>",
            sources.join(" or ")
        )?;
    }
    if let Some(plugin) = &task.plugin {
        write!(
            out,
            "<p>from plugin {}, {} {}</p>",
            text(&plugin.name),
            text(&plugin.kind),
            text(&plugin.item)
        )?;
    }
    for change in &task.changes {
        write_change(out, task, change)?;
    }
    Ok(())
}

/// One change: `attr: was → is`, `attr: is` for a creation, or the
/// attribute and the diff of its multi-line values.
fn write_change(out: &mut impl Write, task: &TaskReport, change: &ShownChange) -> io::Result<()> {
    let attr = text(&change.attr);
    if let Some(diff) = multi_line(change) {
        write!(
            out,
            "<div class=\"change\"><span class=\"attr\">{attr}</span>:"
        )?;
        write_diff(out, &diff)?;
        return write!(out, "</div>");
    }
    let is = match &change.is {
        // What a create makes, as the text says it: `ensure: directory`.
        Json::String(word)
            if task.action == Action::Create
                && change.attr == "ensure"
                && super::plan::is_word(word) =>
        {
            format!("<code>{}</code>", text(word))
        }
        other => value(other),
    };
    match (&change.was, task.action) {
        (_, Action::Create) | (None, _) => write!(
            out,
            "<div class=\"change\"><span class=\"attr\">{attr}</span>: {is}</div>"
        ),
        (Some(was), _) => write!(
            out,
            "<div class=\"change\"><span class=\"attr\">{attr}</span>: {} &rarr; {is}</div>",
            value(was)
        ),
    }
}

/// The diff of a change of strings with a line break. A redacted value is
/// one word, never multi-line.
fn multi_line(change: &ShownChange) -> Option<Diff> {
    let Json::String(is) = &change.is else {
        return None;
    };
    let was = match &change.was {
        None | Some(Json::Null) => None,
        Some(Json::String(was)) => Some(was.as_str()),
        Some(_) => return None,
    };
    diff::is_multi_line(was, is).then(|| diff::unified(was.unwrap_or(""), is))
}

fn write_diff(out: &mut impl Write, diff: &Diff) -> io::Result<()> {
    write!(out, "<pre class=\"diff\">")?;
    for line in &diff.lines {
        let class = match line.kind {
            Kind::Header => "head",
            Kind::Hunk => "hunk",
            Kind::Same | Kind::NoNewline => "same",
            Kind::Removed => "del",
            Kind::Added => "add",
        };
        writeln!(out, "<span class=\"{class}\">{}</span>", text(&line.text))?;
    }
    write!(out, "</pre>")
}

/// A value as the text output writes it (`'text'`, `[a, b]`), redacted
/// ones as `[redacted]`.
fn value(value: &Json) -> String {
    let shown = match value {
        Json::String(redacted) if redacted == REDACTED => REDACTED.to_owned(),
        Json::String(plain) => human::quote(plain),
        Json::Null => "(none)".to_owned(),
        other => other.to_string(),
    };
    format!("<code>{}</code>", text(&shown))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_and_control_characters_are_inert() {
        assert_eq!(
            text("<script>alert('x')</script>&\"\x1b"),
            "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;&amp;&quot;\\u{1b}"
        );
    }
}
