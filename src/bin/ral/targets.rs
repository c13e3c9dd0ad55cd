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

use ral::converge::run::{Input, StoreAt};
use ral::converge::target_store;
use ral::remote::{Destination, Target};

use crate::converge_args::{self, ConvergeArgs, Ending, Mode};
use crate::load;
use crate::one_run::{Given, Run};
use crate::remote::{self, Fleet, Rollout, TargetRun};
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
    let stores = Stores::new(args)?;
    // Discovery runs here; each target gets its own root.
    let (local, registry) = load::load(&converge_args::setup(args, Path::new("/")))?;
    let fleet = Fleet::new(&args.remote, targets, &local, &registry)?;
    let run = Run::new(args, mode, started, vars);
    // `--report`: each target's report is kept for one page of them all.
    let kept = crate::report_file::Kept::default();
    let page = args.report.as_deref().filter(|_| mode == Mode::Apply);
    // One target's work, connected: its store here, its run there.
    let converge_target = |run: &Run, target: &Target, host: &ral::Host, out: &mut Vec<u8>| {
        let store_at = stores.of(target)?;
        let turn = stores.turns.of(&store_at.location.path());
        let _held = turn.lock().unwrap_or_else(|e| e.into_inner());
        let name = Some(target.name.as_str());
        run.converge(Given::Shared(input), name, host, &registry, &store_at, out)
    };
    // A target that could not be reached or planned counts as an error.
    let failed = Ending {
        errors: true,
        ..Ending::default()
    };
    let failure = |ending: &Ending| ending.failures || ending.errors;
    let runs = fleet.roll_out(
        rollout(args),
        &local,
        failed,
        failure,
        |target, host, out| {
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
        },
    );
    let command = format!("ral {}", converge_args::mode_name(mode));
    remote::report(&runs, args.json, args.quiet, &command)?;
    let mut all = worst(&runs);
    if let Some(file) = page {
        all.failures |= !page_written(kept.write(file, &runs, started));
    }
    Ok(all)
}

/// Whether the `--report` page of every target was written. As for one
/// machine, a page that could not be is said and fails the command: the
/// runs are made and recorded; only the page is missing.
fn page_written(written: anyhow::Result<()>) -> bool {
    match written {
        Ok(()) => true,
        Err(e) => {
            log::error!("{e:#}");
            false
        }
    }
}

/// `--serial` and `--max-fail-percentage`.
fn rollout(args: &ConvergeArgs) -> Rollout {
    Rollout {
        serial: args.serial.map(usize::from),
        max_fail_percentage: args.max_fail_percentage.unwrap_or(0),
    }
}

/// The targets' state stores on this machine, and the turns their runs
/// take.
struct Stores {
    state_dir: PathBuf,
    /// `--ssh-config`, absolute: ssh says where a target really is.
    ssh_config: Option<PathBuf>,
    turns: Turns,
}

impl Stores {
    fn new(args: &ConvergeArgs) -> anyhow::Result<Stores> {
        Ok(Stores {
            state_dir: match &args.state {
                Some(dir) => dir.clone(),
                None => target_store::default_state_dir()?,
            },
            ssh_config: args
                .remote
                .ssh_config
                .as_deref()
                .map(std::path::absolute)
                .transpose()?,
            turns: Turns::default(),
        })
    }

    /// The store of `target`'s run: named from where ssh really connects
    /// and the target's root (warning of an older ral's store, named by
    /// the target only, which is not used).
    fn of(&self, target: &Target) -> anyhow::Result<StoreAt> {
        let destination = Destination::resolve(self.ssh_config.as_deref(), target)?;
        let older = target_store::older_store(&self.state_dir, &target.name);
        if older.exists() {
            log::warn!(
                "{}: {} is a store of an older ral, named by the target only, and is not \
                 used any more: its items are not managed (see ral state list --state)",
                target.name,
                older.display()
            );
        }
        let root = target.root.clone().unwrap_or_else(|| PathBuf::from("/"));
        Ok(target_store::store_at(&self.state_dir, &destination, &root))
    }
}

/// The worst of the targets' outcomes.
fn worst(runs: &[TargetRun<Ending>]) -> Ending {
    runs.iter().fold(Ending::default(), |all, run| Ending {
        changes: all.changes || run.outcome.changes,
        failures: all.failures || run.outcome.failures,
        errors: all.errors || run.outcome.errors,
        // Nothing is asked over targets.
        cancelled: false,
    })
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
