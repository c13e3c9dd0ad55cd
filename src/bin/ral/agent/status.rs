//! `ral agent status`: whether an agent runs on the store, and what its
//! status file says: the last run, the next, the counts since it started.

use std::io::Write;
use std::process::ExitCode;

use ral::agent::status::{self, LastRun, Status};
use ral::converge::run::StoreAt;
use ral::local_time::local_date;
use ral::text::{escape, escape_lines};
use serde_json::json;

use super::StatusArgs;

/// The exit status when no agent runs (as LSB's `status` says "not
/// running").
const NOT_RUNNING: u8 = 3;

pub fn run(args: &StatusArgs) -> ExitCode {
    match report(args) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(NOT_RUNNING),
        Err(e) => {
            eprintln!(
                "ral agent status: error: {}",
                escape_lines(&format!("{e:#}"))
            );
            ExitCode::from(2)
        }
    }
}

/// Prints the status; whether an agent runs.
fn report(args: &StatusArgs) -> anyhow::Result<bool> {
    let store = StoreAt::local(&args.root, args.state.as_deref())
        .location
        .path();
    let running = status::running(&store)?;
    let last = status::read(&status::path_for(&store))?;
    let mut out = crate::unread::stdout();
    if args.json {
        writeln!(
            out,
            "{}",
            json!({"store": store, "running": running, "status": last})
        )?;
    } else {
        text(&mut out, &store, running, last.as_ref())?;
    }
    out.flush()?;
    Ok(running)
}

/// A duration of the status file, as the agent shows one; `?` for one no
/// agent writes (negative, not a number, beyond any duration).
fn seconds(value: f64) -> String {
    std::time::Duration::try_from_secs_f64(value)
        .map_or_else(|_| "?".to_owned(), ral::agent::duration::show)
}

fn text(
    out: &mut dyn Write,
    store: &std::path::Path,
    running: bool,
    status: Option<&Status>,
) -> std::io::Result<()> {
    let store = escape(&store.to_string_lossy());
    let Some(status) = status else {
        let state = if running { "starting" } else { "not running" };
        return writeln!(out, "agent: {state}; no agent has run on {store} yet");
    };
    let state = match (running, status.stopped) {
        (true, _) => format!("running (process {})", status.pid),
        (false, true) => format!("not running (stopped; it was process {})", status.pid),
        (false, false) => format!(
            "not running (process {} ended without stopping)",
            status.pid
        ),
    };
    writeln!(out, "agent: {state}, store {store}")?;
    writeln!(
        out,
        "since: {}, every {}{}{}",
        local_date(status.started as i64),
        seconds(status.interval_seconds),
        if status.splay_seconds > 0.0 {
            format!(" (splay {})", seconds(status.splay_seconds))
        } else {
            String::new()
        },
        if status.noop { ", noop" } else { "" }
    )?;
    writeln!(out, "last run: {}", last_run(status.last_run.as_ref()))?;
    match (running, status.next_run) {
        (true, Some(next)) => writeln!(out, "next run: {}", local_date(next as i64))?,
        _ => writeln!(out, "next run: none (not running)")?,
    }
    writeln!(
        out,
        "since it started: {}, {} drifted, {} repaired, {}",
        counted(status.runs, "run"),
        status.drift_found,
        status.repaired,
        counted(status.failed_runs, "failed run")
    )?;
    if let Some(problem) = &status.manifest_problem {
        writeln!(out, "manifests: {}", escape_lines(problem))?;
    }
    Ok(())
}

/// The last run: when, why, its outcome and what it found and did.
fn last_run(last: Option<&LastRun>) -> String {
    let Some(last) = last else {
        return "none yet".to_owned();
    };
    format!(
        "{} ({}): {}; {} drifted, {} repaired{}",
        local_date(last.started as i64),
        escape(&last.why),
        escape(&last.outcome),
        last.drift,
        last.repaired,
        last.plan
            .as_ref()
            .map(|plan| format!(", plan {}", escape(plan)))
            .unwrap_or_default()
    )
}

/// `1 run`, `3 runs`.
fn counted(n: u64, what: &str) -> String {
    match n {
        1 => format!("1 {what}"),
        n => format!("{n} {what}s"),
    }
}
