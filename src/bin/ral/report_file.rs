//! `ral apply --report FILE`: the run's HTML page (`ral::render::html`,
//! or `ral::render::html_fleet` for a run over targets) written to a
//! file, whole or not at all.

use std::collections::HashMap;
use std::io::Write;
use std::sync::{Mutex, OnceLock};
use std::time::{Instant, SystemTime};

use ral::cli::remote::TargetRun;
use ral::converge::report::Report;
use ral::render::html_fleet::{self, Reach, TargetResult};

use crate::converge_args::Ending;

/// Writes the HTML page of `report` to `file` (see [`write_page`]);
/// `when` is when the run started.
pub fn write(file: &std::path::Path, report: &Report, when: SystemTime) -> anyhow::Result<()> {
    let mut page = Vec::new();
    ral::render::html::page(&mut page, report, &local_date(when))?;
    write_page(file, &page)
}

fn local_date(when: SystemTime) -> String {
    let seconds = when
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    ral::local_time::local_date(seconds)
}

/// Writes `page` to `file` atomically (a temporary file beside it,
/// renamed over it), mode 0600 as the store's files: a report may name
/// private paths.
fn write_page(file: &std::path::Path, page: &[u8]) -> anyhow::Result<()> {
    use anyhow::Context;
    let dir = directory_of(file);
    let context = || format!("writing the report {}", file.display());
    // tempfile makes its files 0600.
    let mut temp = tempfile::Builder::new()
        .prefix(".ral-report-")
        .tempfile_in(dir)
        .with_context(context)?;
    temp.write_all(page).with_context(context)?;
    temp.as_file().sync_all().with_context(context)?;
    temp.persist(file)
        .map_err(|e| e.error)
        .with_context(context)?;
    Ok(())
}

/// The reports of a run over targets, kept as each target's work ends,
/// for the one page written once all are over.
#[derive(Default)]
pub struct Kept {
    /// By target name (each target is run once): its report, if it got to
    /// apply, and the seconds its work took.
    by_target: Mutex<HashMap<String, (Option<Report>, f64)>>,
}

impl Kept {
    /// Runs `work`, the work of the connected target `name`, with the
    /// place its report is to be kept in, and keeps that report and the
    /// time the work took.
    pub fn run<T>(&self, name: &str, work: impl FnOnce(&OnceLock<Report>) -> T) -> T {
        let begun = Instant::now();
        let slot = OnceLock::new();
        let result = work(&slot);
        let seconds = begun.elapsed().as_secs_f64();
        self.by_target
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(name.to_owned(), (slot.into_inner(), seconds));
        result
    }

    /// Writes the page of `runs` (in the targets' order) to `file`;
    /// `started` is when the run started. A target whose work never began
    /// was unreachable, or not run (a rollout stopped before it).
    pub fn write(
        self,
        file: &std::path::Path,
        runs: &[TargetRun<Ending>],
        started: Instant,
    ) -> anyhow::Result<()> {
        let mut by_target = self
            .by_target
            .into_inner()
            .unwrap_or_else(|e| e.into_inner());
        let targets: Vec<TargetResult> = runs
            .iter()
            .map(|run| {
                let (reach, report, seconds) = match by_target.remove(run.name) {
                    Some((report, seconds)) => (Reach::Reached, report, Some(seconds)),
                    None => (never_reached(run.error.as_deref()), None, None),
                };
                TargetResult {
                    name: run.name.to_owned(),
                    reach,
                    error: run.error.clone(),
                    report,
                    seconds,
                }
            })
            .collect();
        let seconds = started.elapsed();
        let when = local_date(SystemTime::now() - seconds);
        let run = html_fleet::FleetRun {
            targets: &targets,
            seconds: seconds.as_secs_f64(),
            when: &when,
        };
        let mut page = Vec::new();
        html_fleet::page(&mut page, &run)?;
        write_page(file, &page)
    }
}

/// Why a target's work never began: a rollout that stopped says its
/// targets were "not run"; any other error is its connection's.
fn never_reached(error: Option<&str>) -> Reach {
    match error {
        Some(error) if error.starts_with("not run") => Reach::NotRun,
        _ => Reach::Unreachable,
    }
}

/// The directory `file` is to be written in (`.` for a bare name).
pub fn directory_of(file: &std::path::Path) -> &std::path::Path {
    match file.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => std::path::Path::new("."),
    }
}

/// Refuses a `--report` path that holds something else than a report of
/// ral's, before anything runs: a manifest, a saved plan, the store or any
/// other file given there by mistake would be replaced by the page. A
/// link there would be replaced too (never followed), so it is refused as
/// well.
pub fn check_replaceable(file: &std::path::Path) -> anyhow::Result<()> {
    use std::io::Read;
    let Ok(meta) = std::fs::symlink_metadata(file) else {
        return Ok(());
    };
    let refuse = |what: &str| {
        anyhow::anyhow!(
            "--report {}: {what}; the report would replace it: give a new file, or a report \
             of ral's to replace",
            file.display()
        )
    };
    if !meta.is_file() {
        return Err(refuse("it is not a regular file"));
    }
    let mut head = Vec::new();
    let read = std::fs::File::open(file).and_then(|f| f.take(512).read_to_end(&mut head));
    let text = String::from_utf8_lossy(&head);
    match read {
        Ok(_) if text.contains(ral::render::html::GENERATOR) => Ok(()),
        Ok(_) => Err(refuse("it is a file that is no report of ral's")),
        Err(e) => Err(refuse(&format!("it cannot be read ({e})"))),
    }
}
