//! `ral state list|history|show|forget`: what the state store holds — the
//! items ral manages with their states and applied properties (sensitive
//! ones only as digests), the plans run, one plan's full report — and
//! `forget`, which stops managing items without touching them.

use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context};
use serde_json::{json, Value as Json};

use ral::store::{Holder, Identity, Location, PlanRecord, RecordedTask, Store, StoredItem};
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
    // A store named with --state is looked at whatever it serves (a
    // target's store, say); a root's own is checked to be this machine's.
    let (location, identity) = match &args.state {
        Some(file) => (Location::File(file.clone()), None),
        None => (
            Location::InRoot(args.root.clone()),
            Some(Identity::local(&args.root)),
        ),
    };
    let path = location.path();
    let mut out = io::stdout().lock();
    if let StateCommand::Forget { items } = &args.command {
        let mut store = Store::open_locked(
            &location,
            identity.as_ref(),
            &Holder::me("ral state forget"),
            Default::default(),
        )?;
        let stored = store.items()?;
        let mut keys = Vec::new();
        for wanted in items {
            let reference =
                ral::converge::manifest::parse_reference(wanted, 0).map_err(anyhow::Error::msg)?;
            let found = stored.iter().find(|item| {
                item.name == reference.name
                    && (item.type_name == reference.type_query
                        || item.provider == reference.type_query)
            });
            match found {
                Some(item) => keys.push((item.provider.clone(), item.name.clone())),
                None => bail!("{}: no such item in {}", escape(wanted), path.display()),
            }
        }
        store.forget(&keys)?;
        if !args.json {
            for wanted in items {
                writeln!(out, "forgotten: {}", escape(wanted))?;
            }
        }
        return Ok(ExitCode::SUCCESS);
    }
    let Some(store) = Store::open_existing_at(&location, identity.as_ref())? else {
        bail!(
            "{}: no state store here yet (ral apply makes it)",
            path.display()
        );
    };
    match &args.command {
        StateCommand::List => list(&mut out, &store.items()?, args.json)?,
        StateCommand::History => history(&mut out, &store, args.json)?,
        StateCommand::Show { plan } => {
            let record = store.history()?.into_iter().find(|p| &p.id == plan);
            let Some(report) = record.map(|r| report(&store, &r)).transpose()?.flatten() else {
                bail!("no plan '{}' in {}", escape(plan), path.display());
            };
            if args.json {
                writeln!(out, "{report}")?;
            } else {
                show(&mut out, &report)?;
            }
        }
        StateCommand::Forget { .. } => unreachable!("handled above"),
    }
    Ok(ExitCode::SUCCESS)
}

/// A stored property as shown: a sensitive value's digest is never printed.
fn shown_property(value: &Json) -> Json {
    match value {
        Json::Object(map)
            if map.len() == 1 && (map.contains_key("hmac") || map.contains_key("sha256")) =>
        {
            Json::from(ral::secrets::REDACTED)
        }
        other => other.clone(),
    }
}

fn list(out: &mut impl Write, items: &[StoredItem], as_json: bool) -> anyhow::Result<()> {
    if as_json {
        let items: Vec<Json> = items
            .iter()
            .map(|item| {
                let properties: serde_json::Map<String, Json> = item
                    .properties
                    .iter()
                    .map(|(k, v)| (k.clone(), shown_property(v)))
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
            .map(|(k, v)| format!("{}: {}", escape(k), escape(&shown_property(v).to_string())))
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

fn history(out: &mut impl Write, store: &Store, as_json: bool) -> anyhow::Result<()> {
    let mut plans = Vec::new();
    for record in store.history()? {
        let report = report(store, &record)?.unwrap_or(Json::Null);
        plans.push(json!({
            "id": record.id,
            "state": record.state,
            "manifest_digest": record.manifest_digest,
            "created": record.created,
            "started": record.started,
            "ended": record.ended,
            "counts": report["plan"]["counts"],
        }));
    }
    if as_json {
        writeln!(out, "{}", json!({ "plans": plans }))?;
        return Ok(());
    }
    for plan in &plans {
        let counts = &plan["counts"];
        writeln!(
            out,
            "{}  {:<10}  {}  tasks: {} succeeded, {} failed, {} skipped, {} stopped",
            plan["id"].as_str().unwrap_or_default(),
            plan["state"].as_str().unwrap_or_default(),
            ral::local_time::local_date(plan["created"].as_f64().unwrap_or_default() as i64),
            counts["success"],
            counts["failed"],
            counts["skipped"],
            counts["stopped"]
        )?;
    }
    Ok(())
}

/// The plan's document: as it ended, or (for a plan a crash cut short) as
/// planned with the tasks' recorded states.
fn report(store: &Store, record: &PlanRecord) -> anyhow::Result<Option<Json>> {
    let id = record.id.as_str();
    let mut report: Json = match &record.report {
        Some(text) => serde_json::from_str(text).context("the stored report is not JSON")?,
        None => return Ok(None),
    };
    if record.ended.is_some() && record.state != "Failed" {
        return Ok(Some(report));
    }
    let recorded: Vec<RecordedTask> = store.tasks(id)?;
    report["plan"]["state"] = Json::from(record.state.clone());
    if let Some(tasks) = report["plan"]["tasks"].as_array_mut() {
        for task in tasks {
            let Some(row) = recorded
                .iter()
                .find(|r| Some(r.id as u64) == task["id"].as_u64())
            else {
                continue;
            };
            task["state"] = Json::from(row.state.clone());
            if let Some(error) = &row.error {
                task["error"] = serde_json::from_str(error).unwrap_or(Json::Null);
            }
            if let Some(changes) = &row.changes {
                task["changes"] = serde_json::from_str(changes).unwrap_or(json!([]));
            }
            if let Some(seconds) = row.seconds {
                task["seconds"] = Json::from(seconds);
            }
        }
    }
    let states: Vec<String> = report["plan"]["tasks"]
        .as_array()
        .map(|tasks| {
            tasks
                .iter()
                .map(|t| t["state"].as_str().unwrap_or_default().to_owned())
                .collect()
        })
        .unwrap_or_default();
    let count = |state: &str| states.iter().filter(|s| *s == state).count();
    for (key, state) in [
        ("success", "Success"),
        ("failed", "Failed"),
        ("skipped", "Skipped"),
        ("stopped", "Stopped"),
    ] {
        report["plan"]["counts"][key] = Json::from(count(state));
    }
    Ok(Some(report))
}

fn show(out: &mut impl Write, report: &Json) -> anyhow::Result<()> {
    let plan = &report["plan"];
    writeln!(
        out,
        "plan {}: {}",
        plan["id"].as_str().unwrap_or_default(),
        plan["state"].as_str().unwrap_or_default()
    )?;
    for task in plan["tasks"].as_array().into_iter().flatten() {
        let error = task["error"]["message"]
            .as_str()
            .map(|m| format!(": {}", escape(m)))
            .unwrap_or_default();
        writeln!(
            out,
            "{:<7} {} {}{error}",
            task["state"].as_str().unwrap_or_default(),
            task["action"].as_str().unwrap_or_default(),
            escape(task["resource"].as_str().unwrap_or_default())
        )?;
    }
    Ok(())
}
