//! `ralsh -t TARGET...`: the same command on every target, over ssh, many
//! at once; the results grouped under each target's name (human output)
//! or gathered in `{"targets": [...]}` (`--json`), and the worst status.

use std::io::{self, Write};

use ral::text::escape_lines;
use serde_json::{Map, Value};

use crate::app::{self, Form, Output, Status};
use crate::args::Args;
use crate::load;
use crate::remote::{self, Fleet};

/// What one target gave.
struct Outcome {
    status: Status,
    /// Its output, as the command prints it locally.
    out: Vec<u8>,
    /// Why it failed as a whole (no connection, a command error).
    error: Option<String>,
}

pub fn execute(args: &Args, output: &Output) -> anyhow::Result<Status> {
    // An interrupt between calls is only noted too, so that the masters
    // are ended and the control directory removed before ralsh ends.
    ral::process::forward_interrupts_deferred();
    remote::check_files(&args.remote)?;
    let targets = args.remote.select(&args.root)?;
    // Discovery runs here, against the controller's root; each target gets
    // its own root.
    let local_setup = load::Setup {
        root: std::path::Path::new("/"),
        ..app::setup(args)
    };
    let only_type = args
        .provider
        .as_deref()
        .map(|query| query.split_once("::").map_or(query, |(kind, _)| kind));
    let (local, registry) = load::load_with(&local_setup, &app::cache_for(args), only_type)?;
    let fleet = Fleet::new(&args.remote, targets, &local, &registry)?;
    let per_target = Output {
        progress: false,
        ..output.clone()
    };
    let results = ral::remote::fan_out(&fleet.targets, fleet.forks, |target| {
        let mut out = Vec::new();
        let result = fleet
            .connect(target, &local)
            .map_err(anyhow::Error::new)
            .and_then(|(host, _session)| {
                app::run_on(args, &per_target, &host, &registry, &mut out)
            });
        match result {
            Ok(status) => Outcome {
                status,
                out,
                error: None,
            },
            Err(e) => Outcome {
                status: Status::Error,
                out,
                error: Some(remote::message(&e)),
            },
        }
    });
    ral::process::exit_if_interrupted();
    let outcomes: Vec<(&str, Outcome)> = fleet
        .targets
        .iter()
        .zip(results)
        .map(|(target, outcome)| {
            let outcome = outcome.unwrap_or(Outcome {
                status: Status::Error,
                out: Vec::new(),
                error: Some("not run: interrupted".to_owned()),
            });
            (target.name.as_str(), outcome)
        })
        .collect();
    if !output.quiet {
        let mut stdout = io::stdout().lock();
        match output.form {
            Form::Json => print_json(&mut stdout, &outcomes)?,
            Form::Human | Form::Manifest => print_grouped(&mut stdout, &outcomes)?,
        }
        stdout.flush()?;
    }
    let failed: Vec<&str> = outcomes
        .iter()
        .filter(|(_, outcome)| outcome.status == Status::Error)
        .map(|(name, _)| *name)
        .collect();
    for (name, outcome) in &outcomes {
        if let Some(error) = &outcome.error {
            eprintln!("ralsh: error: {}", escape_lines(&named(name, error)));
        }
    }
    if !failed.is_empty() {
        log::error!(
            "{} of {} targets failed: {}",
            failed.len(),
            outcomes.len(),
            failed.join(", ")
        );
    }
    Ok(outcomes
        .iter()
        .map(|(_, outcome)| outcome.status)
        .max()
        .unwrap_or(Status::Success))
}

/// `error`, starting with the target's name.
fn named(name: &str, error: &str) -> String {
    match error
        .strip_prefix(name)
        .is_some_and(|rest| rest.starts_with(": "))
    {
        true => error.to_owned(),
        false => format!("{name}: {error}"),
    }
}

/// Each target's output under a `== NAME ==` line; a target that failed
/// as a whole says why there.
fn print_grouped(out: &mut dyn Write, outcomes: &[(&str, Outcome)]) -> io::Result<()> {
    for (name, outcome) in outcomes {
        writeln!(out, "== {name} ==")?;
        out.write_all(&outcome.out)?;
        if let Some(error) = &outcome.error {
            writeln!(out, "error: {}", escape_lines(error))?;
        }
    }
    Ok(())
}

/// `{"targets": [{"target": NAME, ...the usual document...}]}`, with an
/// `error` member for a target that failed as a whole.
fn print_json(out: &mut dyn Write, outcomes: &[(&str, Outcome)]) -> anyhow::Result<()> {
    let mut entries = Vec::new();
    for (name, outcome) in outcomes {
        let mut entry = Map::new();
        entry.insert("target".to_owned(), Value::from(*name));
        if !outcome.out.is_empty() {
            match serde_json::from_slice::<Value>(&outcome.out)? {
                Value::Object(document) => entry.extend(document),
                other => {
                    entry.insert("result".to_owned(), other);
                }
            }
        }
        if let Some(error) = &outcome.error {
            entry.insert("error".to_owned(), serde_json::json!({ "message": error }));
        }
        entries.push(Value::Object(entry));
    }
    let document = serde_json::to_string_pretty(&serde_json::json!({ "targets": entries }))?;
    // An io::Error, so a closed stdout reads as one.
    writeln!(out, "{document}")?;
    Ok(())
}
