//! `ral facts`: the facts of this machine (below `--root`), or of each
//! target (`-t`, `-i`, `--limit`, one connection each), as YAML or, with
//! `-j`, JSON. The facts are `ral::facts::of_host`'s: the bundled `facts`
//! provider's core facts with the data directories' custom facts on top.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use serde_json::{Map, Value as Json};

use ral::text::escape_lines;

use crate::load::{self, Setup};
use crate::remote::{self, Fleet, RemoteArgs};

#[derive(Debug, clap::Args)]
pub struct FactsArgs {
    /// Also read custom facts from DIR/facts.d (and providers from
    /// DIR/providers), before RALSH_DATA_DIR's; repeatable.
    #[arg(short = 'I', long = "include", value_name = "DIR")]
    pub include: Vec<PathBuf>,

    /// The root whose os and host names are told (RALSH_ROOT_DIR); the
    /// other facts are the machine's. With -t, a directory on the targets.
    #[arg(long, value_name = "DIR", default_value = "/")]
    pub root: PathBuf,

    /// Time limit for the facts provider's call and for each custom
    /// facts program, in seconds.
    #[arg(long, value_name = "SECONDS", default_value = "300", value_parser = load::parse_timeout)]
    pub timeout: Duration,

    /// Print one JSON document instead of YAML.
    #[arg(short = 'j', long)]
    pub json: bool,

    /// Log level (error, warn, info, debug, trace, off), or TARGET=LEVEL
    /// pairs and a level, comma-separated; RUST_LOG works too. Default:
    /// warn.
    #[arg(short = 'l', long = "log-level", value_name = "LEVEL", value_parser = load::parse_log_level)]
    pub log_level: Option<String>,

    #[command(flatten)]
    pub remote: RemoteArgs,
}

pub fn run(args: &FactsArgs) -> ExitCode {
    match args.remote.is_remote() {
        true => ral::process::forward_interrupts_deferred(),
        false => ral::process::forward_interrupts(),
    }
    let outcome = execute(args);
    ral::process::exit_if_interrupted();
    match outcome {
        Ok(code) => code,
        Err(e) if ral::error::is_broken_pipe(e.chain()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ral facts: error: {}", escape_lines(&format!("{e:#}")));
            ExitCode::from(2)
        }
    }
}

/// The options that decide the host and the providers, with `root`.
fn setup<'a>(args: &'a FactsArgs, root: &'a Path) -> Setup<'a> {
    Setup {
        root,
        include: &args.include,
        timeout: args.timeout,
        lock_timeout: ral::DEFAULT_LOCK_TIMEOUT,
        strict: false,
        no_cache: false,
    }
}

fn execute(args: &FactsArgs) -> anyhow::Result<ExitCode> {
    if args.remote.is_remote() {
        return on_targets(args);
    }
    let cache = load::cache_for(false);
    // Only the facts providers are looked for: the custom facts come
    // from every data directory all the same.
    let (host, registry) = load::load_with(&setup(args, &args.root), &cache, Some("facts"))?;
    let facts = ral::facts::of_host(&host, &registry).context("gathering the facts")?;
    print(args.json, &Json::Object(facts))?;
    Ok(ExitCode::SUCCESS)
}

/// Each target's facts, one connection each: `{"targets": {NAME: facts}}`
/// (and `"errors": {NAME: message}` for those that failed) with `-j`, a
/// mapping of target names to facts otherwise; exit status 1 when a
/// target failed.
fn on_targets(args: &FactsArgs) -> anyhow::Result<ExitCode> {
    remote::check_files(&args.remote)?;
    let targets = args.remote.select(&args.root)?;
    // Discovery runs here; each target gets its own root.
    let cache = load::cache_for(false);
    let (local, registry) = load::load_with(&setup(args, Path::new("/")), &cache, Some("facts"))?;
    let fleet = Fleet::new(&args.remote, targets, &local, &registry)?;
    let runs = fleet.run_all(&local, None, |_, host, _| {
        let facts = ral::facts::of_host(host, &registry)?;
        Ok(Some(facts))
    });
    let mut gathered = Map::new();
    let mut errors = Map::new();
    for run in &runs {
        match (&run.outcome, &run.error) {
            (Some(facts), None) => {
                gathered.insert(run.name.to_owned(), Json::Object(facts.clone()));
            }
            (_, error) => {
                let message = error.clone().unwrap_or_else(|| "no facts".to_owned());
                eprintln!(
                    "ral facts: error: {}",
                    escape_lines(&named(run.name, &message))
                );
                errors.insert(run.name.to_owned(), Json::from(message));
            }
        }
    }
    let document = match args.json {
        true => {
            let mut document = Map::new();
            document.insert("targets".into(), Json::Object(gathered));
            if !errors.is_empty() {
                document.insert("errors".into(), Json::Object(errors.clone()));
            }
            Json::Object(document)
        }
        false => Json::Object(gathered),
    };
    print(args.json, &document)?;
    Ok(match errors.is_empty() {
        true => ExitCode::SUCCESS,
        false => ExitCode::FAILURE,
    })
}

/// `message`, starting with the target's name.
fn named(name: &str, message: &str) -> String {
    match message.starts_with(&format!("{name}: ")) {
        true => message.to_owned(),
        false => format!("{name}: {message}"),
    }
}

/// `document` on stdout: one line of JSON, or YAML.
fn print(json: bool, document: &Json) -> anyhow::Result<()> {
    let mut out = crate::unread::stdout();
    match json {
        true => writeln!(out, "{}", serde_json::to_string(document)?)?,
        false => out.write_all(serde_yaml::to_string(document)?.as_bytes())?,
    }
    out.flush()?;
    Ok(())
}
