//! `ral check PROVIDER.prov|PLUGIN.plugin...`, the conformance checker's
//! command: runs each provider or model plugin on its own temporary fake
//! root (a copy of `--seed DIR` when given) through `ral::conformance` and
//! prints every finding with a hint, and every check that could not run
//! with why. A plugin's config tasks are typed against the providers of
//! its own data directory (`DIR` of `DIR/plugins/NAME.plugin`), of
//! `RALSH_DATA_DIR` and the bundled ones. Exit status: 0 when nothing
//! checked has findings (notes aside; each is clean, or not fully checked
//! and said to be), 1 when there are findings, 2 when the check itself
//! could not run.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use ral::conformance::{self, CheckOptions, Level, Report, Subject};
use ral::discovery::{self, Registry};
use ral::text::escape_lines;

#[derive(Debug, clap::Args)]
#[command(
    after_help = "A model plugin (NAME.plugin, NAME.yaml beside it) is checked by calling \
    each call it lists on models made from its item types (an item of each type in each \
    state: Initial, Applied, Updated, ForRemoval), the callbacks its callback tasks name \
    included (with noop true); see \"Checking a plugin\" in docs/plugins.md.\n\n\
    Exit status: 0 when nothing checked has findings (notes do not count): each is clean, or PARTIAL, \
    not fully checked (a check that could not run, as when nothing is listed to work on and \
    nothing could be made from the metadata, or the round trip on --root, is named on its \
    'not run' line, and the last line counts these apart from the clean ones); 1 when there \
    are findings; 2 when the check could not run (a missing file, a file that is not a \
    provider, a bad option).\n\n\
    Example:\n  ral check --seed tests/fixtures/seed providers/*.prov"
)]
pub struct CheckArgs {
    /// Copy this directory into each temporary root first (a fake system
    /// for the provider to find resources in).
    #[arg(long, value_name = "DIR", conflicts_with = "root")]
    seed: Option<PathBuf>,

    /// Work on this root directly instead of a temporary copy. Updates run
    /// for real there (to the resources' current values; the round trip,
    /// which creates and deletes resources, does not run); `--root /`
    /// checks the live system.
    #[arg(long, value_name = "DIR")]
    root: Option<PathBuf>,

    /// Print JSON lines instead of the report: one per provider or plugin
    /// (`"type": "report"`: subject, source, name, verdict, root, steps,
    /// findings with their level and hint, not_run, round_trip), then
    /// `"type": "summary"` with the counts.
    #[arg(long)]
    json: bool,

    /// Time limit of each provider call, in seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 60.0)]
    timeout: f64,

    /// An action slower than this, in seconds, is a finding.
    #[arg(long, value_name = "SECONDS", default_value_t = 2.0)]
    slow: f64,

    /// The providers and model plugins to check.
    #[arg(value_name = "PROVIDER.prov|PLUGIN.plugin", required = true)]
    providers: Vec<PathBuf>,
}

pub fn run(args: &CheckArgs) -> ExitCode {
    match check_all(args) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        // `ral check ... | head`: the reader has seen what it wanted.
        Err(e) if ral::error::is_broken_pipe(e.chain()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ral: error: {}", escape_lines(&format!("{e:#}")));
            ExitCode::from(2)
        }
    }
}

fn seconds(value: f64, flag: &str) -> anyhow::Result<Duration> {
    anyhow::ensure!(
        value > 0.0 && value < 86_400.0,
        "{flag} must be a positive number of seconds"
    );
    Ok(Duration::from_secs_f64(value))
}

/// ` (did you mean 'DIR/NAME.prov'?)` for the provider (or plugin) file
/// of `missing`'s directory whose name is closest to it, or nothing: only
/// `.prov` and `.plugin` files are named, so that no other file is
/// offered to be run.
fn nearby(missing: &Path) -> String {
    let (Some(name), dir) = (
        missing.file_name().and_then(|n| n.to_str()),
        missing.parent(),
    ) else {
        return String::new();
    };
    let dir = dir
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let Ok(entries) = std::fs::read_dir(dir) else {
        return String::new();
    };
    let names: Vec<String> = entries
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|name| name.ends_with(".prov") || name.ends_with(".plugin"))
        .collect();
    match ral::suggest::closest(name, names.iter().map(String::as_str)) {
        Some(close) => format!(
            " (did you mean '{}'?)",
            missing.with_file_name(close).display()
        ),
        None => String::new(),
    }
}

fn check_all(args: &CheckArgs) -> anyhow::Result<bool> {
    let timeout = seconds(args.timeout, "--timeout")?;
    let slow = seconds(args.slow, "--slow")?;
    let provider_lib = ral::bundled::provider_lib()
        .inspect_err(|e| log::warn!("the Python toolkit is unavailable: {e}"))
        .ok();
    for provider in &args.providers {
        check_argument(provider)?;
    }
    // Every provider is checked even when the reader has gone: the exit
    // status is the verdict.
    let mut stdout = crate::unread::stdout();
    let (mut clean, mut partial, mut failed) = (0, 0, 0);
    let mut registries: Vec<(Option<PathBuf>, Registry)> = Vec::new();
    for provider in &args.providers {
        let scratch = tempfile::tempdir()?;
        let root = root_for(args, scratch.path())?;
        let options = CheckOptions {
            root: root.clone(),
            scratch: args.root.is_none(),
            timeout,
            slow,
            provider_lib: provider_lib.clone(),
        };
        let report = check_one(provider, &options, &mut registries);
        if args.json {
            let line = JsonReport {
                kind: "report",
                verdict: verdict(&report),
                root: &root,
                root_was: root_was(args),
                report: &report,
            };
            writeln!(stdout, "{}", serde_json::to_string(&line)?)?;
        } else {
            print_report(&mut stdout, &report)?;
            writeln!(
                stdout,
                "      root: {} ({})",
                escape_lines(&root.display().to_string()),
                root_was(args)
            )?;
        }
        match (report.is_clean(), report.is_fully_checked()) {
            (false, _) => failed += 1,
            (true, false) => partial += 1,
            (true, true) => clean += 1,
        }
    }
    summary(&mut stdout, args, clean, partial, failed)?;
    Ok(failed == 0)
}

/// One provider's or plugin's check; a plugin's providers are discovered
/// once per data directory.
fn check_one(
    provider: &Path,
    options: &CheckOptions,
    registries: &mut Vec<(Option<PathBuf>, Registry)>,
) -> Report {
    if !is_plugin(provider) {
        return conformance::check(provider, options);
    }
    let dir = plugin_data_dir(provider);
    if !registries.iter().any(|(d, _)| *d == dir) {
        let registry = providers_for(dir.as_deref(), options);
        registries.push((dir.clone(), registry));
    }
    let (_, registry) = registries.iter().find(|(d, _)| *d == dir).unwrap();
    conformance::check_plugin(provider, options, registry)
}

/// The last line: how many were clean, not fully checked and failed.
fn summary(
    stdout: &mut impl Write,
    args: &CheckArgs,
    clean: usize,
    partial: usize,
    failed: usize,
) -> anyhow::Result<()> {
    if args.json {
        let summary = serde_json::json!({
            "type": "summary",
            "checked": args.providers.len(),
            "clean": clean,
            "partial": partial,
            "failed": failed,
        });
        writeln!(stdout, "{summary}")?;
        return Ok(());
    }
    let plugins = args.providers.iter().filter(|p| is_plugin(p)).count();
    let what = match (plugins, args.providers.len() - plugins) {
        (0, _) => "provider(s)",
        (_, 0) => "plugin(s)",
        _ => "provider(s) and plugin(s)",
    };
    write!(stdout, "{clean} of {} {what} clean", args.providers.len())?;
    if partial > 0 {
        write!(stdout, ", {partial} not fully checked (see 'not run')")?;
    }
    writeln!(stdout)?;
    Ok(())
}

fn is_plugin(path: &Path) -> bool {
    path.extension().is_some_and(|ext| ext == "plugin")
}

/// `DIR` of `DIR/plugins/NAME.plugin`, whose providers a plugin may use.
fn plugin_data_dir(plugin: &Path) -> Option<PathBuf> {
    let dir = plugin.parent()?;
    let data = dir.parent()?;
    (dir.file_name()? == "plugins").then(|| data.to_owned())
}

/// The providers a plugin's config tasks are typed against: those of its
/// data directory, of RALSH_DATA_DIR, and the bundled ones.
fn providers_for(data_dir: Option<&Path>, options: &CheckOptions) -> Registry {
    let host = ral::Host::new(ral::HostConfig {
        timeout: options.timeout,
        root: options.root.clone(),
        provider_lib: options.provider_lib.clone(),
        ..ral::HostConfig::default()
    });
    let bundled = ral::bundled::data_dir()
        .inspect_err(|e| log::warn!("bundled providers are unavailable: {e}"))
        .ok();
    let dirs = discovery::data_dirs(
        &data_dir.map(Path::to_owned).into_iter().collect::<Vec<_>>(),
        std::env::var_os("RALSH_DATA_DIR"),
        bundled,
    );
    discovery::discover(&host, &dirs, &ral::cli::load::cache_for(false), None)
}

/// Refuses what is not a provider's or plugin's executable: its
/// metadata, a directory, a missing file (naming a file nearby).
fn check_argument(provider: &Path) -> anyhow::Result<()> {
    if provider.extension().is_some_and(|ext| ext == "yaml")
        && provider.with_extension("plugin").is_file()
    {
        anyhow::bail!(
            "{} is a plugin's metadata; check the plugin itself, {}",
            provider.display(),
            provider.with_extension("plugin").display()
        );
    }
    if provider.extension().is_some_and(|ext| ext == "yaml") {
        anyhow::bail!(
            "{} is a provider's metadata; check the provider itself, {}",
            provider.display(),
            provider.with_extension("prov").display()
        );
    }
    if provider.is_dir() {
        anyhow::bail!(
            "{} is a directory: give its providers ({}/*.prov)",
            provider.display(),
            provider.display()
        );
    }
    if !provider.is_file() {
        anyhow::bail!("{}: no such file{}", provider.display(), nearby(provider));
    }
    Ok(())
}

/// The root one provider is checked under: --root as it is, else a fresh
/// copy of --seed (or an empty directory) in `scratch`.
fn root_for(args: &CheckArgs, scratch: &Path) -> anyhow::Result<PathBuf> {
    Ok(match (&args.root, &args.seed) {
        (Some(root), _) => root.canonicalize()?,
        (None, Some(seed)) => {
            copy_tree(seed, scratch)?;
            scratch.canonicalize()?
        }
        (None, None) => scratch.canonicalize()?,
    })
}

/// What the root of a check was, for its report.
fn root_was(args: &CheckArgs) -> String {
    match (&args.root, &args.seed) {
        (Some(_), _) => "given with --root, used as it is".to_owned(),
        (None, Some(seed)) => format!(
            "a fresh copy of --seed {}, removed afterwards",
            seed.display()
        ),
        (None, None) => "empty (no --seed), removed afterwards".to_owned(),
    }
}

/// One line of `--json`: a report with what the binary knows of it.
#[derive(serde::Serialize)]
struct JsonReport<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    verdict: &'static str,
    root: &'a Path,
    root_was: String,
    #[serde(flatten)]
    report: &'a Report,
}

/// `ok`, `PARTIAL` or `FAIL`.
fn verdict(report: &Report) -> &'static str {
    match (report.is_clean(), report.is_fully_checked()) {
        (false, _) => "FAIL",
        (true, false) => "PARTIAL",
        (true, true) => "ok",
    }
}

fn print_report(out: &mut impl Write, report: &Report) -> std::io::Result<()> {
    let name = match report.subject {
        Subject::Provider => report.provider.as_deref().unwrap_or("?").to_owned(),
        Subject::Plugin => format!("plugin {}", report.provider.as_deref().unwrap_or("?")),
    };
    writeln!(
        out,
        "{}  {} ({name})",
        verdict(report),
        report.source.display()
    )?;
    writeln!(out, "      ran: {}", steps_ran(report).join(", "))?;
    if !report.round_trip.is_empty() {
        writeln!(
            out,
            "      round trip: {}",
            escape_lines(&report.round_trip.join("; "))
        )?;
    }
    for not_run in &report.not_run {
        writeln!(
            out,
            "      not run: {}: {}",
            not_run.checks.join(", "),
            escape_lines(&not_run.why)
        )?;
        if let Some(hint) = not_run.hint {
            writeln!(out, "      hint: {hint}")?;
        }
    }
    for finding in &report.findings {
        let level = match finding.level {
            Level::Error => String::new(),
            other => format!("{}: ", other.as_str()),
        };
        writeln!(
            out,
            "  {}: {level}{}",
            finding.step,
            escape_lines(&finding.problem).replace('\n', "\n      ")
        )?;
        writeln!(out, "      hint: {}", finding.hint)?;
    }
    Ok(())
}

/// The steps a check ran, each with its time: a plugin's calls (one per
/// model) and the round trip's many calls summed up.
fn steps_ran(report: &Report) -> Vec<String> {
    let ms = |took: std::time::Duration| took.as_secs_f64() * 1000.0;
    let mut steps: Vec<String> = match report.subject {
        Subject::Provider => report
            .steps
            .iter()
            .filter(|(step, _)| *step != "round trip")
            .map(|(step, took)| format!("{step} {:.0}ms", ms(*took)))
            .collect(),
        Subject::Plugin => {
            let mut calls: Vec<(&str, std::time::Duration, usize)> = Vec::new();
            for (step, took) in &report.steps {
                match calls.iter_mut().find(|(name, _, _)| name == step) {
                    Some(call) => {
                        call.1 += *took;
                        call.2 += 1;
                    }
                    None => calls.push((step, *took, 1)),
                }
            }
            calls
                .into_iter()
                .map(|(step, took, count)| match count {
                    1 => format!("{step} {:.0}ms", ms(took)),
                    _ => format!("{step} {:.0}ms ({count} calls)", ms(took)),
                })
                .collect()
        }
    };
    let round_trip: Vec<std::time::Duration> = report
        .steps
        .iter()
        .filter(|(step, _)| *step == "round trip")
        .map(|(_, took)| *took)
        .collect();
    if !round_trip.is_empty() {
        steps.push(format!(
            "round trip {:.0}ms ({} calls)",
            ms(round_trip.iter().sum()),
            round_trip.len()
        ));
    }
    steps
}

/// Copies a directory tree (files, directories, symbolic links).
fn copy_tree(from: &Path, to: &Path) -> anyhow::Result<()> {
    use anyhow::Context;
    for entry in std::fs::read_dir(from).with_context(|| format!("reading {}", from.display()))? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        let kind = entry.file_type()?;
        if kind.is_dir() {
            std::fs::create_dir_all(&target)?;
            copy_tree(&entry.path(), &target)?;
        } else if kind.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(entry.path())?, &target)?;
        } else {
            std::fs::copy(entry.path(), &target)
                .with_context(|| format!("copying {}", entry.path().display()))?;
        }
    }
    Ok(())
}
