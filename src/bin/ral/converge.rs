//! `ral plan MANIFEST...` and `ral apply MANIFEST...`: read and check the
//! manifests, plan from one read per provider, and (apply) run the tasks,
//! printing each as it ends. The engine is `ral::converge`; this module
//! turns arguments into its calls and its events into output.

use std::io::{self, Write};

use anyhow::bail;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use ral::converge::apply::{self, Events};
use ral::converge::catalog::Catalog;
use ral::converge::lifecycle;
use ral::converge::manifest;
use ral::converge::ownership;
use ral::converge::plan::{self, ErrorKind, Plan, PlanState, TaskState};
use ral::converge::record::{Recorder, Recording};
use ral::converge::saved;
use ral::render::human::Style;
use ral::render::plan as render;
use ral::store::{Holder, Identity, Location, Store};
use ral::text::escape_lines;

use crate::load::{self, Setup};

#[derive(Debug, clap::Args)]
pub struct ConvergeArgs {
    /// Also search DIR/providers for providers (before RALSH_DATA_DIR and
    /// the bundled providers); repeatable.
    #[arg(short = 'I', long = "include", value_name = "DIR")]
    include: Vec<PathBuf>,

    /// Root directory for providers that edit files (RALSH_ROOT_DIR); with
    /// -t, a directory on the targets.
    #[arg(long, value_name = "DIR", default_value = "/")]
    pub root: PathBuf,

    /// Time limit for each provider call, in seconds.
    #[arg(long, value_name = "SECONDS", default_value = "300", value_parser = load::parse_timeout)]
    timeout: Duration,

    /// How long to wait for another ral apply's lock of the state store
    /// (without it: fail at once, naming the holder), and for the lock of a
    /// file a provider edits (RALSH_LOCK_TIMEOUT; without it: 15).
    #[arg(long, value_name = "SECONDS", value_parser = load::parse_lock_timeout)]
    lock_timeout: Option<Duration>,

    /// The state store (default: ROOT/var/lib/ral/state.db). With -t, a
    /// directory on this machine holding one store per target and root,
    /// named from the user, host and port ssh uses and the root
    /// (default: $XDG_STATE_HOME/ral/targets, or
    /// ~/.local/state/ral/targets).
    #[arg(long, value_name = "FILE")]
    pub state: Option<PathBuf>,

    /// Plan no removals: items no manifest lists any more stay as they
    /// are, and stay in the store.
    #[arg(long)]
    keep_removed: bool,

    /// Remove everything ral manages that these manifests do not list,
    /// also when that is everything: without it, manifests that declare
    /// no resource, or name none of the resources ral manages, are
    /// refused. MANIFEST may then be omitted (no manifest: remove all
    /// that ral created).
    #[arg(long, conflicts_with = "keep_removed")]
    destroy: bool,

    /// Log level (error, warn, info, debug, trace, off), or TARGET=LEVEL
    /// pairs and a level, comma-separated; RUST_LOG works too. Default:
    /// warn (error with -q).
    #[arg(short = 'l', long = "log-level", value_name = "LEVEL", value_parser = load::parse_log_level)]
    pub log_level: Option<String>,

    /// Print nothing on stdout: only the exit status tells the outcome.
    #[arg(short = 'q', long)]
    pub quiet: bool,

    /// Treat provider output that breaks the metadata as an error.
    #[arg(long)]
    strict: bool,

    /// Run every provider's describe instead of using the metadata cache.
    #[arg(long)]
    no_cache: bool,

    /// Print one JSON document (schemas/ral-plan.schema.json) instead of
    /// text.
    #[arg(short = 'j', long)]
    pub json: bool,

    /// How many providers are read, and how many tasks run, at once.
    #[arg(long, value_name = "N", default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..=256))]
    jobs: u16,

    /// Exit 0 when there were no changes, 2 when there were (for plan:
    /// are pending), 4 on failures, 6 for both; 1 when nothing ran.
    #[arg(long)]
    pub detailed_exitcodes: bool,

    /// ral plan: also write the plan's tasks to FILE (0600), bound to the
    /// state store (made when missing), for `ral apply FILE` to run exactly.
    #[arg(short = 'o', long = "out", value_name = "FILE")]
    out: Option<PathBuf>,

    /// Manifest files (YAML, or JSON by the .json extension), read as one;
    /// `-` reads YAML from stdin. ral apply also takes one saved plan
    /// (`ral plan -o FILE`): a file whose text starts with
    /// `{"ral_saved_plan":`.
    #[arg(value_name = "MANIFEST", required_unless_present = "destroy")]
    manifests: Vec<PathBuf>,

    #[command(flatten)]
    pub remote: crate::remote::RemoteArgs,
}

/// Which command runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Plan,
    Apply,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Plan => "plan",
            Mode::Apply => "apply",
        }
    }
}

/// How a run ended, for the exit status.
#[derive(Debug, Clone, Copy, Default)]
pub struct Ending {
    pub changes: bool,
    pub failures: bool,
    /// Some target could not be planned or applied at all (with -t).
    pub errors: bool,
}

/// The exit status of an ending.
fn exit_code(args: &ConvergeArgs, ending: Ending) -> u8 {
    match (args.detailed_exitcodes, ending) {
        (true, Ending { errors: true, .. }) => 1,
        (false, Ending { errors: true, .. }) => 2,
        (false, Ending { failures, .. }) => u8::from(failures),
        (
            true,
            Ending {
                changes, failures, ..
            },
        ) => 2 * u8::from(changes) + 4 * u8::from(failures),
    }
}

/// What every target's run shares: the manifests as read, and when the run
/// started.
pub struct Input<'a> {
    pub manifests: &'a [PathBuf],
    pub reading: &'a manifest::Reading,
    pub saved: Option<&'a saved::SavedPlan>,
    pub started: Instant,
}

/// The options that decide the host and the providers, with `root`.
pub fn setup<'a>(args: &'a ConvergeArgs, root: &'a std::path::Path) -> Setup<'a> {
    Setup {
        root,
        include: &args.include,
        timeout: args.timeout,
        lock_timeout: args.lock_timeout.unwrap_or(ral::DEFAULT_LOCK_TIMEOUT),
        strict: args.strict,
        no_cache: args.no_cache,
    }
}

pub fn run(args: &ConvergeArgs, mode: Mode) -> ExitCode {
    // Until tasks run, nothing has changed: an interrupt ends the run at
    // once (apply asks for a graceful stop only once its tasks start).
    ral::process::forward_interrupts();
    let outcome = execute(args, mode);
    ral::process::exit_if_interrupted();
    match outcome {
        Ok(ending) => ExitCode::from(exit_code(args, ending)),
        // `ral plan | head`: the reader has seen what it wanted.
        Err(e) if ral::error::is_broken_pipe(e.chain()) => ExitCode::SUCCESS,
        Err(e) => {
            let message = format!("{e:#}");
            if args.json && !args.quiet {
                let problems = e
                    .downcast_ref::<ral::Error>()
                    .and_then(|e| match e {
                        ral::Error::Manifest { problems } => Some(problems.clone()),
                        _ => None,
                    })
                    .unwrap_or_default();
                let problems: Vec<serde_json::Value> = problems
                    .iter()
                    .map(|p| {
                        serde_json::json!({
                            "file": p.file.to_string_lossy(),
                            "line": p.line,
                            "message": p.message,
                        })
                    })
                    .collect();
                let document =
                    serde_json::json!({"error": {"message": message, "problems": problems}});
                let _ = writeln!(io::stdout(), "{document}");
            }
            eprintln!("ral {}: error: {}", mode.name(), escape_lines(&message));
            ExitCode::from(if args.detailed_exitcodes { 1 } else { 2 })
        }
    }
}

/// One line per item no manifest lists any more that is only forgotten
/// (ral did not create it): dropping a resource from the manifest does not
/// always remove it, and the user sees which it does not.
fn forgotten_lines(
    out: &mut impl Write,
    forget: &[ral::store::StoredItem],
    tense: &str,
) -> io::Result<()> {
    for item in forget {
        // Why it is not removed, as lifecycle::leftovers decides.
        let why = if !item.created {
            "ral did not create it"
        } else if item.state == ral::store::ItemState::Initial {
            "it was never applied"
        } else {
            "its provider cannot remove"
        };
        writeln!(
            out,
            "= {}[{}] {tense} only forgotten, left as it is: no manifest lists it, and {why}",
            ral::text::escape(&item.type_name),
            ral::text::escape(&item.name)
        )?;
    }
    Ok(())
}

fn execute(args: &ConvergeArgs, mode: Mode) -> anyhow::Result<Ending> {
    let started = Instant::now();
    if mode == Mode::Apply && args.out.is_some() {
        bail!("-o is for ral plan: ral plan -o FILE MANIFEST..., then ral apply FILE");
    }
    // `ral apply FILE` of a saved plan: the file is one exactly when it
    // carries the mark, and must then verify whole.
    if let (Mode::Apply, [one]) = (mode, args.manifests.as_slice()) {
        if let Some(file) = saved::read(one)? {
            return execute_saved(args, file, started);
        }
    }
    // Anywhere else a saved plan is no manifest.
    for path in &args.manifests {
        if !matches!(saved::read(path), Ok(None)) {
            bail!(
                "{} is a saved plan: ral apply takes it alone (ral apply {})",
                path.display(),
                path.display()
            );
        }
    }
    if args.out.is_some() && args.manifests.iter().any(|m| m.as_os_str() == "-") {
        bail!(
            "ral apply FILE reads a saved plan's manifests again (for its sensitive values): \
             ral plan -o takes manifest files, not - (standard input)"
        );
    }
    if let Some(out) = &args.out {
        saved::check_not_a_manifest(out, &args.manifests)?;
    }
    let manifests = args.manifests.clone();
    let reading = manifest::read_all(&manifests);
    if !reading.complete {
        return Err(ral::Error::Manifest {
            problems: reading.problems,
        }
        .into());
    }
    // A manifest whose resources are all wrong declares none: its problems
    // say why, not the refusal of an empty manifest.
    if reading.declared.is_empty() && !reading.problems.is_empty() {
        return Err(ral::Error::Manifest {
            problems: reading.problems,
        }
        .into());
    }
    // An empty or emptied file must not read as "remove everything".
    lifecycle::check_declared(&manifests, reading.declared.len(), args.destroy)?;
    let input = Input {
        manifests: &manifests,
        reading: &reading,
        saved: None,
        started,
    };
    if args.remote.is_remote() {
        if args.out.is_some() {
            bail!(
                "a saved plan is made for one machine and its store: ral plan -o and ral apply \
                 FILE do not take -t or -i"
            );
        }
        return crate::targets::execute(args, mode, &input);
    }
    let (host, registry) = load::load(&setup(args, &args.root))?;
    let store_at = store_at(args, &host);
    converge(
        args,
        mode,
        &input,
        &host,
        &registry,
        &store_at,
        &mut output(args),
    )
}

/// The state store of a run on this machine, and what it must be the
/// store of.
fn store_at(args: &ConvergeArgs, host: &ral::Host) -> StoreAt {
    StoreAt {
        location: match &args.state {
            Some(file) => Location::File(file.clone()),
            None => Location::InRoot(host.root().to_owned()),
        },
        identity: Identity::local(host.root()),
    }
}

fn output(args: &ConvergeArgs) -> Box<dyn Write> {
    if args.quiet {
        Box::new(io::sink())
    } else {
        // A plan or an apply goes on when its reader goes: its exit
        // status, its saved plan and its record still tell what it did.
        Box::new(crate::unread::stdout())
    }
}

/// `ral apply FILE` of a saved plan: the file is verified against the
/// store before anything it names is read, then the manifests it names are
/// read (for the catalog and the sensitive values) and must be those it
/// was made from.
fn execute_saved(
    args: &ConvergeArgs,
    file: saved::SavedFile,
    started: Instant,
) -> anyhow::Result<Ending> {
    if args.remote.is_remote() {
        bail!(
            "a saved plan is made for one machine and its store: ral plan -o and ral apply FILE \
             do not take -t or -i"
        );
    }
    let (host, registry) = load::load(&setup(args, &args.root))?;
    let store_at = store_at(args, &host);
    let store = Store::open_existing_at(&store_at.location, Some(&store_at.identity))?;
    let saved = file.verify(store.as_ref(), &store_at.location.path(), host.root())?;
    drop(store);
    if args.keep_removed && !saved.keep_removed {
        bail!(
            "plan {} was made without --keep-removed, and applies as it was made: make a new \
             plan with ral plan --keep-removed -o",
            saved.id
        );
    }
    let reading = manifest::read_all(&saved.manifests);
    if !saved.manifests_match(&reading.digest) {
        bail!(
            "plan {} is Invalid: its manifests changed since it was made; make a new plan",
            saved.id
        );
    }
    if !reading.complete {
        return Err(ral::Error::Manifest {
            problems: reading.problems,
        }
        .into());
    }
    let input = Input {
        manifests: &saved.manifests,
        reading: &reading,
        saved: Some(&saved),
        started,
    };
    converge(
        args,
        Mode::Apply,
        &input,
        &host,
        &registry,
        &store_at,
        &mut output(args),
    )
}

/// Which state store a run uses, and what it must be the store of.
pub struct StoreAt {
    pub location: Location,
    pub identity: Identity,
}

/// Plans (and, for apply, converges) `host`'s system to the manifests with
/// the store `store_at`, writing the output to `out`.
pub fn converge(
    args: &ConvergeArgs,
    mode: Mode,
    input: &Input,
    host: &ral::Host,
    registry: &ral::discovery::Registry,
    store_at: &StoreAt,
    mut out: &mut dyn Write,
) -> anyhow::Result<Ending> {
    let Input {
        manifests,
        reading,
        saved,
        started,
    } = *input;
    let reading_digest = reading.digest.clone();
    // Every problem in one run: the manifests' own and the catalog's.
    let catalog = match Catalog::build(registry, &reading.declared) {
        Ok(catalog) if reading.problems.is_empty() => catalog,
        Ok(_) => Err(ral::Error::Manifest {
            problems: reading.problems.clone(),
        })?,
        Err(more) => {
            let mut problems = reading.problems.clone();
            problems.extend(more);
            Err(ral::Error::Manifest { problems })?
        }
    };
    let mut catalog = catalog;
    let declared_items = catalog.items.len();
    let state_path = store_at.location.path();
    let plan_id = saved.map_or_else(plan::new_id, |s| s.id.clone());
    // A plan reads the store as it is; an apply holds its lock throughout.
    // A saved plan is bound to its store: `-o` makes the store (and its
    // key) when there is none yet.
    let mut store = match mode {
        Mode::Plan if args.out.is_some() => Some(Store::open_at(
            &store_at.location,
            Some(&store_at.identity),
        )?),
        Mode::Plan => Store::open_existing_at(&store_at.location, Some(&store_at.identity))?,
        Mode::Apply => {
            let mut store = Store::open_locked(
                &store_at.location,
                Some(&store_at.identity),
                &Holder::me(&plan_id),
                args.lock_timeout.unwrap_or_default(),
            )?;
            for dead in store.recover_dead_plans()? {
                log::warn!(
                    "plan {dead} was left running by a process that ended; it is marked Failed, \
                     and this plan reads every resource again"
                );
            }
            if let Some(saved) = &saved {
                // Verified before the lock: still the same store.
                if store.id()? != saved.store_id {
                    bail!(
                        "plan {} is Invalid: the state store {} was replaced since the plan \
                         was verified",
                        saved.id,
                        state_path.display()
                    );
                }
                if store.history()?.iter().any(|p| p.id == saved.id) {
                    bail!(
                        "plan {} is Invalid: it was already applied (a plan applies at most once)",
                        saved.id
                    );
                }
                let serial = store.serial()?;
                if serial != saved.store_serial {
                    bail!(
                        "plan {} is Invalid: the state store changed since it was made (serial {}, \
                         now {serial}); make a new plan",
                        saved.id,
                        saved.store_serial
                    );
                }
            }
            Some(store)
        }
    };
    // The serial a saved plan carries is the one of the items it is made
    // from: read first, so that an apply ending in between makes the plan
    // stale (refused), never current.
    let serial_read = match &store {
        Some(store) => store.serial()?,
        None => 0,
    };
    let mut stored = match &store {
        Some(store) => store.items()?,
        None => Vec::new(),
    };
    // What a run that ended early was doing is settled before planning, so
    // that what it created is known as ral's (ownership's docs).
    let unsettled = match store.as_mut() {
        Some(store) => ownership::settle_store(
            host,
            registry,
            store,
            mode == Mode::Apply,
            &mut stored,
            usize::from(args.jobs),
        )?,
        None => Vec::new(),
    };
    let decidable: Vec<_> = stored
        .iter()
        .filter(|i| !unsettled.contains(&(i.provider.clone(), i.name.clone())))
        .cloned()
        .collect();
    // A saved plan removes what it was made to remove.
    let keep_removed = saved.map_or(args.keep_removed, |s| s.keep_removed);
    let leftovers = lifecycle::leftovers(&catalog, &decidable, registry, keep_removed);
    // A saved plan passed this check when it was made (or was made with
    // --destroy): no file is written for a plan the check refuses, and the
    // file cannot be changed since.
    if saved.is_none() {
        lifecycle::check_sweep(manifests, &catalog, &stored, &leftovers, args.destroy)?;
    }
    let origin = manifest::Origin {
        file: std::sync::Arc::from(state_path.as_path()),
        line: 0,
    };
    lifecycle::add_removals(&mut catalog, registry, &leftovers.remove, &origin);
    let jobs = usize::from(args.jobs);
    // A saved plan runs the tasks it holds, each of which must find its
    // resource as it was planned from.
    let mut plan = match saved {
        Some(saved) => saved
            .plan(&catalog)
            .map_err(|e| anyhow::anyhow!("plan {} is Invalid: {e}", saved.id))?,
        None => {
            let found = plan::read_states(host, &catalog, jobs);
            let mut plan = plan::plan_from(&catalog, &found, plan_id)?;
            if let Some(key) = match &store {
                Some(store) => store.existing_key()?,
                None => None,
            } {
                lifecycle::mark_drifted(&catalog, &mut plan, &stored, &key);
            }
            plan
        }
    };
    let style = Style {
        color: !args.json && crate::use_color(),
    };
    if mode == Mode::Plan {
        for item in &leftovers.forget {
            log::info!(
                "{}[{}] is no longer in any manifest; ral did not create it, so an apply only \
                 forgets it",
                item.type_name,
                item.name
            );
        }
        if !args.json {
            forgotten_lines(&mut out, &leftovers.forget, "is")?;
        }
        if !args.json && args.out.is_none() {
            // Text alone: the JSON document, most of a large plan's time
            // and memory, is not made.
            render::preview(&mut out, &catalog, &plan, style)?;
            out.flush()?;
            return Ok(planned(&plan));
        }
        let document = render::document(&catalog, &plan);
        if let (Some(file), Some(store)) = (&args.out, &store) {
            saved::write(
                file,
                &catalog,
                &plan,
                &saved::Origin {
                    manifests,
                    manifest_digest: &reading.digest,
                    root: host.root(),
                    store_id: &store.id()?,
                    store_serial: serial_read,
                    key: &store.key()?,
                    keep_removed: args.keep_removed,
                    store_path: &state_path,
                },
            )?;
        }
        if args.json {
            writeln!(out, "{document}")?;
        } else {
            render::preview(&mut out, &catalog, &plan, style)?;
        }
        out.flush()?;
        return Ok(planned(&plan));
    }
    let store = store.as_mut().expect("an apply opens the store");
    if !leftovers.forget.is_empty() {
        let keys: Vec<(String, String)> = leftovers
            .forget
            .iter()
            .map(|item| (item.provider.clone(), item.name.clone()))
            .collect();
        store.forget(&keys)?;
        if !args.json {
            forgotten_lines(&mut out, &leftovers.forget, "was")?;
        }
        for item in &leftovers.forget {
            log::info!(
                "{}[{}] is no longer in any manifest; ral did not create it, so it is left as it \
                 is and forgotten",
                item.type_name,
                item.name
            );
        }
    }
    let mut recorder = Recorder::new(store, &catalog, &stored, declared_items)?;
    recorder.begin(&plan, &reading_digest, &render::document(&catalog, &plan))?;
    let mut printer = TaskLines {
        out,
        catalog: &catalog,
        style,
        json: args.json,
        error: None,
    };
    // A stop request now lets the running tasks finish.
    ral::process::forward_interrupts_graceful();
    let failed_store = AtomicBool::new(false);
    {
        let mut events = Recording {
            recorder: &mut recorder,
            inner: &mut printer,
            failed: &failed_store,
        };
        let stop =
            || ral::process::stop_requested().is_some() || failed_store.load(Ordering::SeqCst);
        apply::apply(host, &catalog, &mut plan, jobs, &stop, &mut events);
    }
    let report = render::document(&catalog, &plan);
    recorder.finish(&plan, &report)?;
    if let Some(e) = recorder.failure.take() {
        return Err(e.into());
    }
    let write_error = printer.error.take();
    let ending = Ending {
        // A task that made changes counts, also when the verification
        // found them short of the manifest.
        changes: plan.tasks.iter().any(|t| {
            !t.changes.is_empty()
                && (t.state == TaskState::Success
                    || t.error
                        .as_ref()
                        .is_some_and(|e| e.kind == ErrorKind::Verify))
        }),
        failures: plan.state != PlanState::Successful,
        errors: false,
    };
    // The run is over: output that cannot be written changes no status.
    let out = printer.out;
    let written = write_error.map_or(Ok(()), Err).and_then(|()| {
        if args.json {
            writeln!(out, "{report}")?;
        } else {
            writeln!(
                out,
                "{}",
                render::run_summary(&plan, started.elapsed().as_secs_f64())
            )?;
        }
        out.flush()
    });
    if let Err(e) = written {
        if e.kind() != io::ErrorKind::BrokenPipe {
            log::error!("writing the report: {e}");
        }
    }
    Ok(ending)
}

/// How a plan (without apply) ended: changes pending, resources that could
/// not be read.
fn planned(plan: &Plan) -> Ending {
    Ending {
        changes: plan.has_changes(),
        failures: plan.tasks.iter().any(|t| t.state == TaskState::Failed),
        errors: false,
    }
}

/// Prints each task as it ends (text only; JSON is one document at the
/// end), and the plan's stop on stderr.
struct TaskLines<'a, 'c> {
    out: &'a mut dyn Write,
    catalog: &'a Catalog<'c>,
    style: Style,
    json: bool,
    error: Option<io::Error>,
}

impl Events for TaskLines<'_, '_> {
    fn plan_state(&mut self, plan: &Plan) {
        if plan.state == PlanState::Stopping {
            let running = plan.count_state(TaskState::Running);
            log::warn!(
                "stopping: no new task starts; waiting for {running} running task(s) \
                 (a second interrupt ends them)"
            );
        }
    }

    fn task_started(&mut self, plan: &Plan, task: usize) {
        let task = &plan.tasks[task];
        log::info!("started {}", self.catalog.items[task.item].reference());
    }

    fn task_ended(&mut self, plan: &Plan, task: usize) {
        if self.json || self.error.is_some() {
            return;
        }
        let written = render::task_ended(&mut self.out, self.catalog, plan, task, self.style)
            .and_then(|()| self.out.flush());
        if let Err(e) = written {
            self.error = Some(e);
        }
    }
}
