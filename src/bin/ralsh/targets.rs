//! `ralsh -t TARGET...`: the same command on every target, over ssh, many
//! at once; the results grouped under each target's name (human output)
//! or gathered in `{"targets": [...]}` (`--json`), and the worst status.

use crate::args::Args;
use crate::command::{self, Form, Output, Status};
use crate::load;
use crate::remote::{self, Fleet};

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
        ..command::setup(args)
    };
    let only_type = args
        .provider
        .as_deref()
        .map(|query| query.split_once("::").map_or(query, |(kind, _)| kind));
    let (local, registry) = load::load_with(&local_setup, &command::cache_for(args), only_type)?;
    let fleet = Fleet::new(&args.remote, targets, &local, &registry)?;
    let per_target = Output {
        progress: false,
        ..output.clone()
    };
    let runs = fleet.run_all(&local, Status::Error, |_, host, out| {
        command::run_on(args, &per_target, host, &registry, out)
    });
    remote::report(&runs, output.form == Form::Json, output.quiet, "ralsh")?;
    let failed: Vec<&str> = runs
        .iter()
        .filter(|run| run.outcome == Status::Error)
        .map(|run| run.name)
        .collect();
    if !failed.is_empty() {
        log::error!(
            "{} of {} targets failed: {}",
            failed.len(),
            runs.len(),
            failed.join(", ")
        );
    }
    Ok(runs
        .iter()
        .map(|run| run.outcome)
        .max()
        .unwrap_or(Status::Success))
}
