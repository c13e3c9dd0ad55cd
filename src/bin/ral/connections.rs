//! `ral connections` and `ral connections close [TARGET...]`: the ssh
//! masters that runs on remote targets left open for the next ones
//! (`--persist`), listed with their age, and closed (`ssh -O exit`).

use std::io::Write;
use std::process::ExitCode;
use std::time::SystemTime;

use serde_json::json;

use ral::remote::kept::{Kept, KeptDir};
use ral::remote::mux;
use ral::text::escape;

#[derive(Debug, clap::Args)]
pub struct ConnectionsArgs {
    /// Print JSON instead of text.
    #[arg(short = 'j', long, global = true)]
    json: bool,

    #[command(subcommand)]
    command: Option<ConnectionsCommand>,
}

#[derive(Debug, clap::Subcommand)]
enum ConnectionsCommand {
    /// Close the kept connections to TARGETs (a target's name, as -t or
    /// the inventory gave it, or its ssh destination); all without one.
    Close {
        #[arg(value_name = "TARGET")]
        targets: Vec<String>,
    },
}

/// One connection as shown.
struct Shown<'k> {
    kept: &'k Kept,
    /// The master's process ID; `None` when it no longer answers.
    master: Option<u32>,
    age: Option<u64>,
}

pub fn run(args: &ConnectionsArgs) -> ExitCode {
    match try_run(args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("ral: error: {}", ral::text::escape_lines(&format!("{e:#}")));
            ExitCode::FAILURE
        }
    }
}

fn try_run(args: &ConnectionsArgs) -> anyhow::Result<ExitCode> {
    let dir = KeptDir::open()?;
    let all = dir.list()?;
    match &args.command {
        None => list(args, &all),
        Some(ConnectionsCommand::Close { targets }) => close(args, &dir, &all, targets),
    }
}

/// `ral connections`: the kept masters, whether each answers, and their age.
fn list(args: &ConnectionsArgs, all: &[Kept]) -> anyhow::Result<ExitCode> {
    let now = SystemTime::now();
    let mut shown = Vec::new();
    for kept in all {
        shown.push(Shown {
            kept,
            master: mux::master_alive(&kept.socket),
            age: kept
                .since
                .and_then(|since| now.duration_since(since).ok())
                .map(|age| age.as_secs()),
        });
    }
    let mut out = ral::cli::unread::stdout();
    if args.json {
        print_json(&mut out, &shown)?;
    } else {
        print_text(&mut out, &shown)?;
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

/// `ral connections close [TARGET...]`: ends the masters of the targets
/// named (all without a name); a name that matches none fails.
fn close(
    args: &ConnectionsArgs,
    dir: &KeptDir,
    all: &[Kept],
    targets: &[String],
) -> anyhow::Result<ExitCode> {
    let named = |kept: &Kept, target: &String| {
        kept.info.target == *target || kept.info.destination == *target
    };
    let chosen: Vec<&Kept> = all
        .iter()
        .filter(|kept| targets.is_empty() || targets.iter().any(|t| named(kept, t)))
        .collect();
    let mut closed = Vec::new();
    for kept in &chosen {
        let ran = dir.close(kept)?;
        closed.push(json!({
            "target": kept.info.target,
            "destination": kept.info.destination,
            "was_running": ran,
        }));
        if !args.json {
            println!(
                "closed {} ({}){}",
                escape(&kept.info.target),
                escape(&kept.info.destination),
                if ran { "" } else { ": its master had ended" }
            );
        }
    }
    let mut unknown = false;
    for target in targets {
        if !chosen.iter().any(|kept| named(kept, target)) {
            eprintln!(
                "ral: error: {}: no kept connection has that target or destination",
                escape(target)
            );
            unknown = true;
        }
    }
    if args.json {
        println!("{}", json!({ "closed": closed }));
    } else if closed.is_empty() && targets.is_empty() {
        println!("no kept connections to close");
    }
    // A name that matched nothing may be a typo: the caller learns.
    Ok(match unknown {
        true => ExitCode::FAILURE,
        false => ExitCode::SUCCESS,
    })
}

fn print_text(out: &mut dyn Write, shown: &[Shown]) -> std::io::Result<()> {
    if shown.is_empty() {
        return writeln!(out, "no kept connections");
    }
    for entry in shown {
        let info = &entry.kept.info;
        let state = match entry.master {
            Some(pid) => format!("master {pid}"),
            None => "not answering".to_owned(),
        };
        let age = entry
            .age
            .map_or_else(|| "?".to_owned(), |s| format!("{s}s"));
        writeln!(
            out,
            "{}  {}  {state}, open {age}, kept {}s once idle",
            escape(&info.target),
            escape(&info.destination),
            info.persist
        )?;
    }
    Ok(())
}

fn print_json(out: &mut dyn Write, shown: &[Shown]) -> anyhow::Result<()> {
    let entries: Vec<_> = shown
        .iter()
        .map(|entry| {
            json!({
                "target": entry.kept.info.target,
                "destination": entry.kept.info.destination,
                "socket": entry.kept.socket,
                "master": entry.master,
                "age": entry.age,
                "persist": entry.kept.info.persist,
            })
        })
        .collect();
    writeln!(out, "{}", json!({ "connections": entries }))?;
    Ok(())
}
