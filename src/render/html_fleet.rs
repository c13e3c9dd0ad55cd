//! The HTML report of a run over many targets (`ral apply -t/-i --report
//! FILE.html`): one self-contained page with the run's totals, then one
//! row per target — its outcome, its counts, its time — failed and
//! unreachable targets first, the others in the targets' order. Each row
//! is a `<details>` that opens (no script) to that target's tasks as the
//! one-target page shows them ([`super::html`] writes both).
//!
//! As on the one-target page, every text goes through [`html::text`]: a
//! target named `<script>` or a value holding `</details>` is only text.
//! Sensitive values are already `[redacted]` in each target's report.

use std::io::{self, Write};

use crate::converge::plan::PlanState;
use crate::converge::report::Report;

use super::html::{self, text};

/// What a fleet run gave one target.
#[derive(Debug, Clone)]
pub struct TargetResult {
    /// The target's name, as the targets were given.
    pub name: String,
    pub reach: Reach,
    /// Why the target failed as a whole: no connection, a command error
    /// (its manifests could not be rendered or planned there), not run.
    pub error: Option<String>,
    /// Its run's report, when it was applied.
    pub report: Option<Report>,
    /// How long its work took, once connected (none when never reached).
    pub seconds: Option<f64>,
}

/// Whether a target's work began.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    /// Connected: its work ran (it may still have failed).
    Reached,
    /// It could not be connected to.
    Unreachable,
    /// It was never tried: a rollout stopped before it.
    NotRun,
}

/// How one target's run ended, as its row says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Outcome {
    Failed,
    Unreachable,
    NotRun,
    Changed,
    Unchanged,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Failed => "failed",
            Outcome::Unreachable => "unreachable",
            Outcome::NotRun => "not run",
            Outcome::Changed => "changed",
            Outcome::Unchanged => "unchanged",
        }
    }

    /// The class of its badge (one word).
    fn class(self) -> &'static str {
        match self {
            Outcome::NotRun => "notrun",
            other => other.as_str(),
        }
    }

    /// Whether its row comes before those of targets that ran well.
    pub fn comes_first(self) -> bool {
        matches!(self, Outcome::Failed | Outcome::Unreachable)
    }
}

/// What a target's tasks did, as its row counts them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    /// Tasks that succeeded in doing something.
    pub changes: usize,
    /// Tasks that failed.
    pub failures: usize,
    /// Resources already as declared.
    pub unchanged: usize,
}

impl TargetResult {
    pub fn tally(&self) -> Tally {
        let Some(report) = &self.report else {
            return Tally::default();
        };
        let done = html::done(report);
        Tally {
            changes: done.created + done.changed + done.removed + done.run + done.refreshed,
            failures: done.failed,
            unchanged: report.plan.counts.unchanged,
        }
    }

    pub fn outcome(&self) -> Outcome {
        match self.reach {
            Reach::Unreachable => return Outcome::Unreachable,
            Reach::NotRun => return Outcome::NotRun,
            Reach::Reached => {}
        }
        let Some(report) = self.report.as_ref().filter(|_| self.error.is_none()) else {
            return Outcome::Failed;
        };
        let tally = self.tally();
        // A stopped run did not get where it was going either.
        if tally.failures > 0 || report.plan.state != PlanState::Successful {
            Outcome::Failed
        } else if tally.changes > 0 {
            Outcome::Changed
        } else {
            Outcome::Unchanged
        }
    }
}

/// The whole run, as its page shows it.
pub struct FleetRun<'r> {
    /// In the targets' order.
    pub targets: &'r [TargetResult],
    /// The run's wall time.
    pub seconds: f64,
    /// When it started.
    pub when: &'r str,
}

/// The page's own style: the rows of targets as a grid whose header and
/// summaries line up (a grid's summary loses its marker: a triangle
/// before the name says whether it is open), a failed or unreachable row
/// marked as a failed task is.
const STYLE: &str = "\
.targets .grid{display:grid;grid-template-columns:minmax(10em,2fr) 8em repeat(3,6em) 6em;gap:.5em;padding:.35em .5em}
.targets .head{background:#f3f5f7;font-weight:600;border-bottom:1px solid #d8dee4}
.targets details{border-bottom:1px solid #d8dee4}
.targets summary{cursor:pointer}
.targets summary .name::before{content:'\\25B8  '}.targets details[open] summary .name::before{content:'\\25BE  '}
.targets details.failed,.targets details.unreachable{background:#fff0f0;border-left:4px solid #cf222e}
.targets .body{padding:.3em .5em 1em 1.5em;background:#fff}
.num{text-align:right}
.badge.failed,.badge.unreachable{background:#cf222e}
.badge.changed{background:#9a6700}.badge.unchanged{background:#1a7f37}.badge.notrun{background:#6e7781}
";

/// The order the rows come in: failed and unreachable targets first,
/// each group in the targets' order.
pub fn row_order(targets: &[TargetResult]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..targets.len()).collect();
    // Stable: within each group, the targets' order.
    order.sort_by_key(|&at| !targets[at].outcome().comes_first());
    order
}

/// The whole page of `run`.
pub fn page(out: &mut impl Write, run: &FleetRun) -> io::Result<()> {
    let count = |outcome: Outcome| {
        run.targets
            .iter()
            .filter(|t| t.outcome() == outcome)
            .count()
    };
    let failed = count(Outcome::Failed);
    let unreachable = count(Outcome::Unreachable);
    let not_run = count(Outcome::NotRun);
    let total = run.targets.len();
    let targets = match total {
        1 => "1 target".to_owned(),
        n => format!("{n} targets"),
    };
    html::start(
        out,
        &format!("ral apply on {targets}: {failed} failed, {unreachable} unreachable"),
        STYLE,
    )?;
    writeln!(out, "<header>")?;
    writeln!(out, "<h1>ral apply on {targets}</h1>")?;
    writeln!(out, "<p class=\"meta\">When: {}</p>", text(run.when))?;
    let mut totals = vec![
        format!("{failed} failed"),
        format!("{unreachable} unreachable"),
        format!("{} changed", count(Outcome::Changed)),
        format!("{} unchanged", count(Outcome::Unchanged)),
    ];
    if not_run > 0 {
        totals.push(format!("{not_run} not run"));
    }
    writeln!(
        out,
        "<p class=\"summary\">{targets}: {}; {:.1} s.</p>",
        totals.join(", "),
        run.seconds
    )?;
    writeln!(out, "</header>")?;
    writeln!(out, "<div class=\"targets\">")?;
    writeln!(
        out,
        "<div class=\"grid head\"><span>Target</span><span>Outcome</span>\
         <span class=\"num\">Changes</span><span class=\"num\">Failures</span>\
         <span class=\"num\">Unchanged</span><span class=\"num\">Time</span></div>"
    )?;
    for at in row_order(run.targets) {
        target_row(out, &run.targets[at], at + 1)?;
    }
    writeln!(out, "</div>")?;
    html::end(out)
}

/// One target's row, `number` its place among the targets (its ids'
/// prefix: names may hold anything).
fn target_row(out: &mut impl Write, target: &TargetResult, number: usize) -> io::Result<()> {
    let outcome = target.outcome();
    let class = outcome.class();
    let tally = target.tally();
    let seconds = target
        .seconds
        .map(|s| format!("{s:.2} s"))
        .unwrap_or_default();
    writeln!(
        out,
        "<details class=\"target {class}\" id=\"target-{number}\">"
    )?;
    writeln!(
        out,
        "<summary class=\"grid\"><span class=\"name\"><code>{}</code></span>\
         <span><span class=\"badge {class}\">{}</span></span>\
         <span class=\"num\">{}</span><span class=\"num\">{}</span>\
         <span class=\"num\">{}</span><span class=\"num\">{seconds}</span></summary>",
        text(&target.name),
        outcome.as_str(),
        tally.changes,
        tally.failures,
        tally.unchanged,
    )?;
    writeln!(out, "<div class=\"body\">")?;
    if let Some(error) = &target.error {
        writeln!(out, "<p class=\"error\">{}</p>", text(error))?;
    }
    if let Some(report) = &target.report {
        writeln!(
            out,
            "<p class=\"meta\">Plan <code>{}</code></p>",
            text(&report.plan.id)
        )?;
        html::plan_facts(out, report, None)?;
        html::tasks(out, report, &format!("target-{number}-"))?;
    }
    writeln!(out, "</div>")?;
    writeln!(out, "</details>")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::converge::report::{Counts, PlanReport};

    fn report(state: PlanState, changed: usize, failed: usize) -> Report {
        Report {
            plan: PlanReport {
                id: "p".to_owned(),
                state,
                tasks: Vec::new(),
                counts: Counts {
                    unchanged: 4,
                    done: Some(crate::converge::report::Done {
                        changed,
                        failed,
                        ..Default::default()
                    }),
                    ..Counts::default()
                },
            },
        }
    }

    fn target(
        name: &str,
        reach: Reach,
        error: Option<&str>,
        report: Option<Report>,
    ) -> TargetResult {
        TargetResult {
            name: name.to_owned(),
            reach,
            error: error.map(str::to_owned),
            report,
            seconds: Some(1.0),
        }
    }

    fn fleet() -> Vec<TargetResult> {
        vec![
            target(
                "a",
                Reach::Reached,
                None,
                Some(report(PlanState::Successful, 2, 0)),
            ),
            target(
                "b",
                Reach::Reached,
                None,
                Some(report(PlanState::Failed, 1, 1)),
            ),
            target(
                "c",
                Reach::Reached,
                None,
                Some(report(PlanState::Successful, 0, 0)),
            ),
            target("d", Reach::Unreachable, Some("Connection refused"), None),
            target("e", Reach::Reached, Some("nothing is declared"), None),
            target(
                "f",
                Reach::NotRun,
                Some("not run: the rollout stopped"),
                None,
            ),
        ]
    }

    #[test]
    fn each_target_gets_its_outcome_and_failed_ones_come_first_in_order() {
        let targets = fleet();
        let outcomes: Vec<&str> = targets.iter().map(|t| t.outcome().as_str()).collect();
        assert_eq!(
            outcomes,
            [
                "changed",
                "failed",
                "unchanged",
                "unreachable",
                "failed",
                "not run"
            ]
        );
        let names: Vec<&str> = row_order(&targets)
            .into_iter()
            .map(|at| targets[at].name.as_str())
            .collect();
        assert_eq!(names, ["b", "d", "e", "a", "c", "f"]);
        assert_eq!(
            targets[1].tally(),
            Tally {
                changes: 1,
                failures: 1,
                unchanged: 4
            }
        );
    }

    #[test]
    fn the_page_totals_the_run_and_names_stay_text() {
        let mut targets = fleet();
        targets[0].name = "<script>alert(1)</script>".to_owned();
        targets[3].error = Some("</details><b>x".to_owned());
        let mut page = Vec::new();
        let run = FleetRun {
            targets: &targets,
            seconds: 3.5,
            when: "today",
        };
        super::page(&mut page, &run).unwrap();
        let page = String::from_utf8(page).unwrap();
        assert!(page.contains(
            "6 targets: 2 failed, 1 unreachable, 1 changed, 1 unchanged, 1 not run; 3.5 s."
        ));
        assert!(
            page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
            "{page}"
        );
        assert!(!page.contains("<script"), "{page}");
        assert!(page.contains("&lt;/details&gt;&lt;b&gt;x"), "{page}");
        assert_eq!(page.matches("<details").count(), 6);
        assert_eq!(page.matches("</details>").count(), 6);
    }
}
