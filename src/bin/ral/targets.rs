//! `ral plan -t`/`ral apply -t`: the same manifests on every target, one
//! plan per target, each with its own state store on this machine
//! (`STATE_DIR/TARGET.db`); the output grouped under each target's name
//! or gathered in `{"targets": [...]}`, and the worst outcome.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use ral::text::escape_lines;
use serde_json::{Map, Value};

use crate::converge::{self, ConvergeArgs, Ending, Input, Mode};
use crate::load;
use crate::remote::{self, Fleet};

/// What one target gave.
struct Outcome {
    ending: Ending,
    out: Vec<u8>,
    error: Option<String>,
}

pub fn execute(args: &ConvergeArgs, mode: Mode, input: &Input) -> anyhow::Result<Ending> {
    // An interrupt between calls is only noted too, so that the masters
    // are ended and the control directory removed before ral ends.
    ral::process::forward_interrupts_deferred();
    remote::check_files(&args.remote)?;
    let targets = args.remote.select(&args.root)?;
    let state_dir = match &args.state {
        Some(dir) => dir.clone(),
        None => default_state_dir()?,
    };
    // Discovery runs here; each target gets its own root.
    let (local, registry) = load::load(&converge::setup(args, Path::new("/")))?;
    let fleet = Fleet::new(&args.remote, targets, &local, &registry)?;
    let results = ral::remote::fan_out(&fleet.targets, fleet.forks, |target| {
        let mut out = Vec::new();
        let state = state_dir.join(format!("{}.db", file_name(&target.name)));
        let result = fleet
            .connect(target, &local)
            .map_err(anyhow::Error::new)
            .and_then(|(host, _session)| {
                converge::converge(args, mode, input, &host, &registry, &state, &mut out)
            });
        match result {
            Ok(ending) => Outcome {
                ending,
                out,
                error: None,
            },
            Err(e) => Outcome {
                ending: Ending {
                    errors: true,
                    ..Ending::default()
                },
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
                ending: Ending {
                    errors: true,
                    ..Ending::default()
                },
                out: Vec::new(),
                error: Some("not run: interrupted".to_owned()),
            });
            (target.name.as_str(), outcome)
        })
        .collect();
    if !args.quiet {
        let mut stdout = io::stdout().lock();
        if args.json {
            print_json(&mut stdout, &outcomes)?;
        } else {
            print_grouped(&mut stdout, &outcomes)?;
        }
        stdout.flush()?;
    }
    let mut all = Ending::default();
    for (name, outcome) in &outcomes {
        if let Some(error) = &outcome.error {
            eprintln!(
                "ral {}: error: {}",
                mode_name(mode),
                escape_lines(&named(name, error))
            );
        }
        all.changes |= outcome.ending.changes;
        all.failures |= outcome.ending.failures;
        all.errors |= outcome.ending.errors;
    }
    Ok(all)
}

fn mode_name(mode: Mode) -> &'static str {
    match mode {
        Mode::Plan => "plan",
        Mode::Apply => "apply",
    }
}

/// Where the stores of targets are kept by default.
fn default_state_dir() -> anyhow::Result<PathBuf> {
    let base = match std::env::var_os("XDG_STATE_HOME").map(PathBuf::from) {
        Some(dir) if dir.is_absolute() => dir,
        _ => match std::env::var_os("HOME").map(PathBuf::from) {
            Some(home) if home.is_absolute() => home.join(".local/state"),
            _ => anyhow::bail!("no HOME to keep the targets' state stores in: give --state DIR"),
        },
    };
    Ok(base.join("ral/targets"))
}

/// A target's name as a file name: `/`, NUL and `%` are escaped as `%XX`,
/// and so is a leading dot, so distinct names stay distinct files.
fn file_name(name: &str) -> String {
    let mut out = String::new();
    for (at, c) in name.chars().enumerate() {
        if c == '/' || c == '%' || c == '\0' || (at == 0 && c == '.') {
            out.push_str(&format!("%{:02X}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
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

fn print_json(out: &mut dyn Write, outcomes: &[(&str, Outcome)]) -> anyhow::Result<()> {
    let mut entries = Vec::new();
    for (name, outcome) in outcomes {
        let mut entry = Map::new();
        entry.insert("target".to_owned(), Value::from(*name));
        if !outcome.out.is_empty() {
            if let Value::Object(document) = serde_json::from_slice::<Value>(&outcome.out)? {
                entry.extend(document);
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

#[cfg(test)]
mod tests {
    use super::file_name;

    #[test]
    fn target_names_make_distinct_file_names() {
        assert_eq!(file_name("web1"), "web1");
        assert_eq!(file_name("ssh://u@h:22/x"), "ssh:%2F%2Fu@h:22%2Fx");
        assert_eq!(file_name(".."), "%2E.");
        assert_ne!(file_name("a/b"), file_name("a%2Fb"));
    }
}
