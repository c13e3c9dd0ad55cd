//! `ral snapshot create|remove|restore NAME` and `ral snapshot list`: the
//! model plugins' snapshot plans (LITP's `create_snapshot_plan`) run here,
//! each task printed as it ends, and the snapshots the store records.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use serde_json::json;

use ral::converge::plan::PlanState;
use ral::converge::run::StoreAt;
use ral::converge::snapshot::{self, SnapshotAction};
use ral::render::human::Style;
use ral::render::plan as render;
use ral::text::{escape, escape_lines};

use crate::load::{self, Setup};
use crate::one_run::TaskLines;

#[derive(Debug, clap::Args)]
pub struct SnapshotArgs {
    /// Also search DIR/plugins and DIR/providers; repeatable.
    #[arg(short = 'I', long = "include", value_name = "DIR", global = true)]
    include: Vec<PathBuf>,

    /// Root directory for providers that edit files (RALSH_ROOT_DIR).
    #[arg(long, value_name = "DIR", default_value = "/", global = true)]
    root: PathBuf,

    /// The state store (default: ROOT/var/lib/ral/state.db).
    #[arg(long, value_name = "FILE", global = true)]
    state: Option<PathBuf>,

    /// Time limit for each provider or plugin call, in seconds.
    #[arg(long, value_name = "SECONDS", default_value = "300", global = true,
          value_parser = load::parse_timeout)]
    timeout: Duration,

    /// How long to wait for another run's lock of the state store.
    #[arg(long, value_name = "SECONDS", global = true, value_parser = load::parse_lock_timeout)]
    lock_timeout: Option<Duration>,

    /// Print JSON instead of text.
    #[arg(short = 'j', long, global = true)]
    json: bool,

    #[command(subcommand)]
    command: SnapshotCommand,
}

#[derive(Debug, clap::Subcommand)]
enum SnapshotCommand {
    /// Run the plugins' plan that makes the snapshot NAME, and record it
    /// with the model as applied now.
    Create { name: String },
    /// Run the plugins' plan that removes the snapshot NAME; it leaves the
    /// store once that plan succeeded.
    Remove { name: String },
    /// Run the plugins' plan that brings the system back to the snapshot
    /// NAME (they are given the model recorded with it).
    Restore { name: String },
    /// The snapshots recorded: name, when made, the last action and how
    /// it ended.
    List,
}

pub fn run(args: &SnapshotArgs) -> ExitCode {
    match execute(args) {
        Ok(code) => code,
        Err(e) if ral::error::is_broken_pipe(e.chain()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ral snapshot: error: {}", escape_lines(&format!("{e:#}")));
            ExitCode::from(2)
        }
    }
}

fn execute(args: &SnapshotArgs) -> anyhow::Result<ExitCode> {
    let (action, name) = match &args.command {
        SnapshotCommand::List => return list(args),
        SnapshotCommand::Create { name } => (SnapshotAction::Create, name),
        SnapshotCommand::Remove { name } => (SnapshotAction::Remove, name),
        SnapshotCommand::Restore { name } => (SnapshotAction::Restore, name),
    };
    let started = Instant::now();
    let lock_timeout = args.lock_timeout.unwrap_or(ral::DEFAULT_LOCK_TIMEOUT);
    let (host, registry) = load::load(&Setup {
        root: &args.root,
        include: &args.include,
        timeout: args.timeout,
        lock_timeout,
        strict: false,
        no_cache: false,
    })?;
    let store_at = StoreAt::local(host.root(), args.state.as_deref());
    let mut out = std::io::stdout().lock();
    let style = Style {
        color: !args.json && crate::use_color(),
    };
    let mut lines = TaskLines::new(&mut out, style, args.json);
    ral::process::forward_interrupts_graceful();
    let stop = || ral::process::stop_requested().is_some();
    let done = snapshot::run(
        &host,
        &registry,
        &store_at,
        action,
        name,
        4,
        args.lock_timeout.unwrap_or_default(),
        &stop,
        &mut lines,
    )?;
    if args.json {
        let report = ral::converge::report::Report::of(&done.catalog, &done.plan);
        writeln!(out, "{}", serde_json::to_string(&report)?)?;
    } else {
        let seconds = started.elapsed().as_secs_f64();
        writeln!(
            out,
            "Snapshot {} {}: {}",
            action.as_str(),
            escape(name),
            render::run_summary(&done.plan, seconds)
        )?;
    }
    Ok(match done.plan.state {
        PlanState::Successful => ExitCode::SUCCESS,
        _ => ExitCode::from(1),
    })
}

fn list(args: &SnapshotArgs) -> anyhow::Result<ExitCode> {
    let root = args.root.canonicalize()?;
    let store_at = StoreAt::local(&root, args.state.as_deref());
    let snapshots = snapshot::list(&store_at)?;
    let mut out = std::io::stdout().lock();
    if args.json {
        let all: Vec<_> = snapshots
            .iter()
            .map(|s| {
                json!({"name": s.name, "created": s.created, "action": s.action,
                       "state": s.state, "updated": s.updated})
            })
            .collect();
        writeln!(out, "{}", json!({ "snapshots": all }))?;
        return Ok(ExitCode::SUCCESS);
    }
    for s in &snapshots {
        writeln!(
            out,
            "{}  made {}  last: {} {}",
            escape(&s.name),
            ral::local_time::local_date(s.created as i64),
            s.action,
            s.state
        )?;
    }
    Ok(ExitCode::SUCCESS)
}
