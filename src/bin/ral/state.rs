//! `ral state list|history|show|forget`: what the state store holds — the
//! items ral manages with their states and applied properties (sensitive
//! ones only as digests), the plans run, one plan's full report — and
//! `forget`, which stops managing items without touching them.

use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use serde_json::{json, Value as Json};

use ral::converge::report::Report;
use ral::converge::state::{PlanSummary, StateStore, StoredItem};
use ral::text::{escape, escape_lines};

#[derive(Debug, clap::Args)]
pub struct StateArgs {
    /// The state store (default: ROOT/var/lib/ral/state.db).
    #[arg(long, value_name = "FILE", global = true)]
    state: Option<PathBuf>,

    /// The root whose store is meant when --state is not given.
    #[arg(long, value_name = "DIR", default_value = "/", global = true)]
    root: PathBuf,

    /// Print JSON instead of text.
    #[arg(short = 'j', long, global = true)]
    json: bool,

    #[command(subcommand)]
    command: StateCommand,
}

#[derive(Debug, clap::Subcommand)]
enum StateCommand {
    /// The items ral manages: state, provider and applied properties.
    List,
    /// The plans run, oldest first, with their states, times and counts.
    History,
    /// One plan's report, in the shape `ral apply -j` prints.
    Show {
        /// The plan's id (see `ral state history`).
        plan: String,

        /// Print the report as one self-contained HTML page, the one
        /// `ral apply --report` writes.
        #[arg(long, conflicts_with = "json")]
        html: bool,
    },
    /// Stop managing items, leaving the resources as they are.
    Forget {
        /// Items as TYPE[NAME] (TYPE may be a qualified provider name).
        #[arg(value_name = "TYPE[NAME]", required = true)]
        items: Vec<String>,
    },
}

pub fn run(args: &StateArgs) -> ExitCode {
    match execute(args) {
        Ok(code) => code,
        // `ral state ... | head`: the reader has seen what it wanted.
        Err(e) if ral::error::is_broken_pipe(e.chain()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ral state: error: {}", escape_lines(&format!("{e:#}")));
            ExitCode::from(2)
        }
    }
}

fn execute(args: &StateArgs) -> anyhow::Result<ExitCode> {
    let store = StateStore::new(&args.root, args.state.as_deref());
    let mut out = io::stdout().lock();
    match &args.command {
        StateCommand::List => list(&mut out, &store.items()?, args.json)?,
        StateCommand::History => history(&mut out, &store.history()?, args.json)?,
        StateCommand::Show { plan, html } => {
            let report = store.report(plan)?;
            if *html {
                // When it ran: the plan's start, else when it was made.
                let when = store
                    .history()?
                    .into_iter()
                    .find(|p| p.id == *plan)
                    .map(|p| ral::local_time::local_date(p.started.unwrap_or(p.created) as i64))
                    .unwrap_or_default();
                ral::render::html::page(&mut out, &report, &when)?;
            } else if args.json {
                writeln!(out, "{}", serde_json::to_string(&report)?)?;
            } else {
                let summary = store.history()?.into_iter().find(|p| p.id == *plan);
                show(&mut out, &report, summary.as_ref())?;
            }
        }
        StateCommand::Forget { items } => {
            store.forget(items)?;
            if !args.json {
                for wanted in items {
                    writeln!(out, "forgotten: {}", escape(wanted))?;
                }
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn list(out: &mut impl Write, items: &[StoredItem], as_json: bool) -> anyhow::Result<()> {
    if as_json {
        let items: Vec<Json> = items
            .iter()
            .map(|item| {
                let properties: serde_json::Map<String, Json> = item
                    .properties
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                json!({
                    "type": item.type_name,
                    "name": item.name,
                    "provider": item.provider,
                    "state": item.state.as_str(),
                    "created": item.created,
                    "properties": properties,
                })
            })
            .collect();
        writeln!(out, "{}", json!({ "items": items }))?;
        return Ok(());
    }
    for item in items {
        let properties: Vec<String> = item
            .properties
            .iter()
            .map(|(k, v)| format!("{}: {}", escape(k), escape(&v.to_string())))
            .collect();
        // Whether dropping it from the manifests removes it (created) or
        // only forgets it (adopted: it existed before ral applied it).
        writeln!(
            out,
            "{}[{}]  {}  {}  {}  {}",
            item.type_name,
            escape(&item.name),
            item.state.as_str(),
            if item.created { "created" } else { "adopted" },
            item.provider,
            properties.join(", ")
        )?;
    }
    Ok(())
}

fn history(out: &mut impl Write, plans: &[PlanSummary], as_json: bool) -> anyhow::Result<()> {
    if as_json {
        writeln!(out, "{}", json!({ "plans": plans }))?;
        return Ok(());
    }
    for plan in plans {
        let counts = plan.counts.unwrap_or_default();
        // A noop run (`ral agent --noop`) did nothing: what it found to do.
        let tasks = match plan.state.as_str() {
            "Noop" => format!(
                "tasks: {} to create, {} to change, {} to remove, nothing done",
                counts.create, counts.change, counts.remove
            ),
            _ => format!(
                "tasks: {} succeeded, {} failed, {} skipped, {} stopped",
                counts.success, counts.failed, counts.skipped, counts.stopped
            ),
        };
        let by = plan
            .origin
            .as_ref()
            .map(|origin| format!("  by {}", escape(origin)))
            .unwrap_or_default();
        writeln!(
            out,
            "{}  {:<10}  {}  {tasks}{by}",
            plan.id,
            plan.state,
            ral::local_time::local_date(plan.created as i64),
        )?;
    }
    Ok(())
}

/// A plan's report: its state as the history says it (`Noop` for a run
/// that changed nothing by design), when it ran and by whom, each task
/// with its changes or its error, and what was done.
fn show(
    out: &mut impl Write,
    report: &Report,
    summary: Option<&PlanSummary>,
) -> anyhow::Result<()> {
    let plan = &report.plan;
    let state = summary.map_or(plan.state.as_str(), |s| s.state.as_str());
    let when = summary
        .map(|s| {
            format!(
                ", {}",
                ral::local_time::local_date(s.started.unwrap_or(s.created) as i64)
            )
        })
        .unwrap_or_default();
    let by = summary
        .and_then(|s| s.origin.as_ref())
        .map(|origin| format!(", by {}", escape(origin)))
        .unwrap_or_default();
    writeln!(out, "plan {}: {state}{when}{by}", plan.id)?;
    for task in &plan.tasks {
        let detail = match &task.error {
            Some(e) => format!(": {}", escape(&e.message)),
            None if task.changes.is_empty() => String::new(),
            None => {
                let changes: Vec<String> = task.changes.iter().map(change_text).collect();
                format!(": {}", changes.join(", "))
            }
        };
        writeln!(
            out,
            "{:<7} {} {}{detail}",
            task.state.as_str(),
            task.action.as_str(),
            escape(&task.resource)
        )?;
    }
    let counts = &plan.counts;
    if state == "Noop" {
        writeln!(
            out,
            "nothing done (noop): {} to create, {} to change, {} to remove; {} unchanged",
            counts.create, counts.change, counts.remove, counts.unchanged
        )?;
    } else if let Some(done) = &counts.done {
        writeln!(
            out,
            "done: {}; {} unchanged",
            ral::render::plan::done_phrase(done),
            counts.unchanged
        )?;
    }
    Ok(())
}

/// One change as `ral state list` shows values: `ip: "10.9.9.9" ->
/// "10.0.0.5"`, `ensure: "present"` when there was nothing before, and a
/// text of several lines only as `content: changed`.
fn change_text(change: &ral::provider::ShownChange) -> String {
    let attr = escape(&change.attr);
    let lines = |value: &Json| value.as_str().is_some_and(|text| text.contains('\n'));
    if lines(&change.is) || change.was.as_ref().is_some_and(lines) {
        return format!("{attr}: changed");
    }
    let is = escape(&change.is.to_string());
    match &change.was {
        None | Some(Json::Null) => format!("{attr}: {is}"),
        Some(was) => format!("{attr}: {} -> {is}", escape(&was.to_string())),
    }
}
