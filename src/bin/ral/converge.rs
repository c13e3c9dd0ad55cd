//! `ral plan MANIFEST...` and `ral apply MANIFEST...`: read and check the
//! manifests, plan from one read per provider, and (apply) run the tasks,
//! printing each as it ends. The engine is `ral::converge`; this module
//! turns arguments into its calls and its events into output.

use std::io::{self, Write};

use anyhow::bail;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use ral::converge::apply::Events;
use ral::converge::catalog::Catalog;
use ral::converge::plan::{Plan, PlanState, TaskState};
use ral::converge::run::{self, Input, Options, Outcome, Prepared, RunError, StoreAt};
use ral::converge::saved;
use ral::render::human::Style;
use ral::render::plan as render;
use ral::text::escape_lines;

use crate::load::{self, Setup};

pub use ral::converge::run::Mode;

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

/// How a run ended, for the exit status.
#[derive(Debug, Clone, Copy, Default)]
pub struct Ending {
    pub changes: bool,
    pub failures: bool,
    /// Some target could not be planned or applied at all (with -t).
    pub errors: bool,
}

impl From<Outcome> for Ending {
    fn from(outcome: Outcome) -> Ending {
        Ending {
            changes: outcome.changes,
            failures: outcome.failures,
            errors: false,
        }
    }
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

pub fn mode_name(mode: Mode) -> &'static str {
    match mode {
        Mode::Plan => "plan",
        Mode::Apply => "apply",
    }
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

/// What the library is asked for.
fn options(args: &ConvergeArgs, mode: Mode) -> Options {
    Options {
        mode,
        jobs: usize::from(args.jobs),
        keep_removed: args.keep_removed,
        destroy: args.destroy,
        lock_timeout: args.lock_timeout.unwrap_or_default(),
        saving: args.out.is_some(),
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
                let document = render::error_document(&message, manifest_problems(&e));
                let _ = writeln!(io::stdout(), "{document}");
            }
            eprintln!("ral {}: error: {}", mode_name(mode), escape_lines(&message));
            ExitCode::from(if args.detailed_exitcodes { 1 } else { 2 })
        }
    }
}

/// The problems of the manifests an error reports, each with its file and
/// line.
fn manifest_problems(e: &anyhow::Error) -> &[ral::error::Problem] {
    let ral_error = e
        .downcast_ref::<ral::Error>()
        .or_else(|| match e.downcast_ref() {
            Some(RunError::Ral(inner)) => Some(inner),
            _ => None,
        });
    match ral_error {
        Some(ral::Error::Manifest { problems }) => problems,
        _ => &[],
    }
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
    check_manifest_arguments(args)?;
    let input = Input::read(&args.manifests, args.destroy)?;
    if args.remote.is_remote() {
        if args.out.is_some() {
            return Err(saved_plans_over_targets());
        }
        return crate::targets::execute(args, mode, &input, started);
    }
    let (host, registry) = load::load(&setup(args, &args.root))?;
    let store_at = StoreAt::local(host.root(), args.state.as_deref());
    let run = Run {
        args,
        mode,
        started,
    };
    run.converge(&input, &host, &registry, &store_at, &mut output(args))
}

/// What manifests must not be: a saved plan, or (for a plan to be saved)
/// standard input or the file it is to be written to.
fn check_manifest_arguments(args: &ConvergeArgs) -> anyhow::Result<()> {
    for path in &args.manifests {
        if !matches!(saved::read(path), Ok(None)) {
            bail!(
                "{} is a saved plan: ral apply takes it alone (ral apply {})",
                path.display(),
                path.display()
            );
        }
    }
    if let Some(out) = &args.out {
        if args.manifests.iter().any(|m| m.as_os_str() == "-") {
            bail!(
                "ral apply FILE reads a saved plan's manifests again (for its sensitive \
                 values): ral plan -o takes manifest files, not - (standard input)"
            );
        }
        saved::check_not_a_manifest(out, &args.manifests)?;
    }
    Ok(())
}

fn saved_plans_over_targets() -> anyhow::Error {
    anyhow::anyhow!(
        "a saved plan is made for one machine and its store: ral plan -o and ral apply FILE do \
         not take -t or -i"
    )
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
/// store before anything it names is read.
fn execute_saved(
    args: &ConvergeArgs,
    file: saved::SavedFile,
    started: Instant,
) -> anyhow::Result<Ending> {
    if args.remote.is_remote() {
        return Err(saved_plans_over_targets());
    }
    let (host, registry) = load::load(&setup(args, &args.root))?;
    let store_at = StoreAt::local(host.root(), args.state.as_deref());
    let input = Input::saved(file, &host, &store_at, args.keep_removed)?;
    let run = Run {
        args,
        mode: Mode::Apply,
        started,
    };
    run.converge(&input, &host, &registry, &store_at, &mut output(args))
}

/// One command's run, on this machine or one target.
pub struct Run<'a> {
    pub args: &'a ConvergeArgs,
    pub mode: Mode,
    pub started: Instant,
}

impl Run<'_> {
    /// Plans (and, for apply, converges) `host`'s system to `input` with
    /// the store `store_at`, writing the output to `out`.
    pub fn converge(
        &self,
        input: &Input,
        host: &ral::Host,
        registry: &ral::discovery::Registry,
        store_at: &StoreAt,
        out: &mut dyn Write,
    ) -> anyhow::Result<Ending> {
        let options = options(self.args, self.mode);
        let mut prepared = run::prepare(host, registry, store_at, input, options)?;
        let style = Style {
            color: !self.args.json && crate::use_color(),
        };
        match self.mode {
            Mode::Plan => self.print_plan(&prepared, host, style, out),
            Mode::Apply => self.apply(&mut prepared, host, style, out),
        }
    }

    fn print_plan(
        &self,
        prepared: &Prepared,
        host: &ral::Host,
        style: Style,
        mut out: &mut dyn Write,
    ) -> anyhow::Result<Ending> {
        let args = self.args;
        if !args.json {
            render::forgotten(&mut out, &prepared.forget, "is")?;
        }
        if let Some(file) = &args.out {
            prepared.save(file, host.root())?;
        }
        if args.json {
            writeln!(out, "{}", serde_json::to_string(&prepared.report())?)?;
        } else {
            // Text alone: the JSON document, most of a large plan's time
            // and memory, is not made.
            render::preview(&mut out, &prepared.catalog, &prepared.plan, style)?;
        }
        out.flush()?;
        Ok(prepared.planned().into())
    }

    fn apply(
        &self,
        prepared: &mut Prepared,
        host: &ral::Host,
        style: Style,
        out: &mut dyn Write,
    ) -> anyhow::Result<Ending> {
        let json = self.args.json;
        let mut printer = TaskLines {
            out,
            style,
            json,
            error: None,
        };
        // A stop request now lets the running tasks finish.
        ral::process::forward_interrupts_graceful();
        let stop = || ral::process::stop_requested().is_some();
        let outcome = prepared.apply(host, &stop, &mut printer)?;
        // The run is over: output that cannot be written changes no status.
        let TaskLines { out, error, .. } = printer;
        let written = error.map_or(Ok(()), Err).and_then(|()| {
            if json {
                writeln!(out, "{}", serde_json::to_string(&prepared.report())?)?;
            } else {
                let seconds = self.started.elapsed().as_secs_f64();
                writeln!(out, "{}", render::run_summary(&prepared.plan, seconds))?;
            }
            out.flush()
        });
        if let Err(e) = written {
            if e.kind() != io::ErrorKind::BrokenPipe {
                log::error!("writing the report: {e}");
            }
        }
        Ok(outcome.into())
    }
}

/// Prints each task as it ends (text only; JSON is one document at the
/// end), and the plan's stop on stderr.
struct TaskLines<'a> {
    out: &'a mut dyn Write,
    style: Style,
    json: bool,
    error: Option<io::Error>,
}

impl TaskLines<'_> {
    fn write(&mut self, print: impl FnOnce(&mut dyn Write) -> io::Result<()>) {
        if self.json || self.error.is_some() {
            return;
        }
        if let Err(e) = print(&mut self.out).and_then(|()| self.out.flush()) {
            self.error = Some(e);
        }
    }
}

impl Events for TaskLines<'_> {
    fn plan_state(&mut self, _catalog: &Catalog, plan: &Plan) {
        if plan.state == PlanState::Stopping {
            let running = plan.count_state(TaskState::Running);
            log::warn!(
                "stopping: no new task starts; waiting for {running} running task(s) \
                 (a second interrupt ends them)"
            );
        }
    }

    fn task_started(&mut self, catalog: &Catalog, plan: &Plan, task: usize) {
        let task = &plan.tasks[task];
        log::info!("started {}", catalog.items[task.item].reference());
    }

    fn task_ended(&mut self, catalog: &Catalog, plan: &Plan, task: usize) {
        let style = self.style;
        self.write(|mut out| render::task_ended(&mut out, catalog, plan, task, style));
    }

    fn forgotten(&mut self, items: &[ral::converge::state::StoredItem]) {
        self.write(|mut out| render::forgotten(&mut out, items, "was"));
    }
}
