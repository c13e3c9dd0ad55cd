//! `ral plan -t`/`ral apply -t`: the same manifests on every target, one
//! plan per target, each with its own state store on this machine, named
//! from what the target really is (the user, host name and port ssh uses,
//! and the root: `STATE_DIR/USER@HOST:PORT%2FROOT.db`); the output grouped
//! under each target's name or gathered in `{"targets": [...]}`, and the
//! worst outcome.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use ral::converge::run::Input;
use ral::converge::target_store;
use ral::remote::{Destination, Target};

use crate::converge_args::{self, ConvergeArgs, Ending, Mode};
use crate::load;
use crate::one_run::{Given, Run};
use crate::remote::{self, Fleet, Rollout};
use crate::render::Vars;

pub fn execute(
    args: &ConvergeArgs,
    mode: Mode,
    input: &Input,
    vars: &Vars,
    started: Instant,
) -> anyhow::Result<Ending> {
    // An interrupt between calls is only noted too, so that the masters
    // are ended and the control directory removed before ral ends.
    ral::process::forward_interrupts_deferred();
    remote::check_files(&args.remote)?;
    let targets = args.remote.select(&args.root)?;
    let state_dir = match &args.state {
        Some(dir) => dir.clone(),
        None => target_store::default_state_dir()?,
    };
    // Discovery runs here; each target gets its own root.
    let (local, registry) = load::load(&converge_args::setup(args, Path::new("/")))?;
    let fleet = Fleet::new(&args.remote, targets, &local, &registry)?;
    let ssh_config = args
        .remote
        .ssh_config
        .as_deref()
        .map(std::path::absolute)
        .transpose()?;
    let failed = Ending {
        errors: true,
        ..Ending::default()
    };
    let run = Run {
        args,
        mode,
        started,
        vars,
        kept: None,
        origin: None,
        observer: None,
    };
    // `--report`: each target's report is kept for one page of them all.
    let kept = crate::report_file::Kept::default();
    let page = args.report.as_deref().filter(|_| mode == Mode::Apply);
    let rollout = Rollout {
        serial: args.serial.map(usize::from),
        max_fail_percentage: args.max_fail_percentage.unwrap_or(0),
    };
    let failure = |ending: &Ending| ending.failures || ending.errors;
    let turns = Turns::default();
    // One target's work, connected: its store here, its run there.
    let converge_target = |run: &Run, target: &Target, host: &ral::Host, out: &mut Vec<u8>| {
        let destination = Destination::resolve(ssh_config.as_deref(), target)?;
        let older = target_store::older_store(&state_dir, &target.name);
        if older.exists() {
            log::warn!(
                "{}: {} is a store of an older ral, named by the target only, and is not \
                 used any more: its items are not managed (see ral state list --state)",
                target.name,
                older.display()
            );
        }
        let root = target.root.clone().unwrap_or_else(|| PathBuf::from("/"));
        let store_at = target_store::store_at(&state_dir, &destination, &root);
        let turn = turns.of(&store_at.location.path());
        let _held = turn.lock().unwrap_or_else(|e| e.into_inner());
        let name = Some(target.name.as_str());
        run.converge(Given::Shared(input), name, host, &registry, &store_at, out)
    };
    let runs = fleet.roll_out(rollout, &local, failed, failure, |target, host, out| {
        if page.is_none() {
            return converge_target(&run, target, host, out);
        }
        kept.run(&target.name, |slot| {
            let run = Run {
                kept: Some(slot),
                origin: run.origin.clone(),
                ..run
            };
            converge_target(&run, target, host, out)
        })
    });
    let command = format!("ral {}", converge_args::mode_name(mode));
    remote::report(&runs, args.json, args.quiet, &command)?;
    let mut all = runs.iter().fold(Ending::default(), |all, run| Ending {
        changes: all.changes || run.outcome.changes,
        failures: all.failures || run.outcome.failures,
        errors: all.errors || run.outcome.errors,
        // Nothing is asked over targets.
        cancelled: false,
    });
    if let Some(file) = page {
        if let Err(e) = kept.write(file, &runs, started) {
            // As for one machine: the runs are made and recorded; only
            // the page is missing.
            log::error!("{e:#}");
            all.failures = true;
        }
    }
    Ok(all)
}

/// One run at a time per store. Two names of one machine and root (two
/// inventory entries, or an alias) share a store and the machine's files:
/// their runs take turns, the second finding what the first did, instead
/// of one failing on the other's lock.
#[derive(Default)]
struct Turns(Mutex<HashMap<PathBuf, Arc<Mutex<()>>>>);

impl Turns {
    /// The turn of the store at `path`.
    fn of(&self, path: &Path) -> Arc<Mutex<()>> {
        let mut turns = self.0.lock().unwrap_or_else(|e| e.into_inner());
        Arc::clone(turns.entry(path.to_owned()).or_default())
    }
}
