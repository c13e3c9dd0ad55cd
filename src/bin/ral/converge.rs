//! `ral plan MANIFEST...` and `ral apply MANIFEST...`: read and check the
//! manifests, plan from one read per provider, and (apply) run the tasks,
//! printing each as it ends. The engine is `ral::converge`; this module
//! turns arguments into its calls and its events into output.

use std::io::{self, Write};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::bail;
use ral::converge::run::{Input, RunError, StoreAt};
use ral::converge::{manifest, saved};
use ral::render::plan as render;
use ral::text::escape_lines;

use crate::converge_args::{exit_code, mode_name, setup, ConvergeArgs, Ending, Mode};
use crate::load;
use crate::one_run::{Given, Run};
use crate::render::Vars;

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
    check_report_argument(args, mode)?;
    // `ral apply FILE` of a saved plan: the file is one exactly when it
    // carries the mark, and must then verify whole.
    if let (Mode::Apply, [one]) = (mode, args.manifests.as_slice()) {
        if let Some(file) = saved::read(one)? {
            return execute_saved(args, file, started);
        }
    }
    check_manifest_arguments(args)?;
    if args.serial.is_some() && !args.remote.is_remote() {
        bail!("--serial rolls out over targets: give them with -t or -i");
    }
    let mut input = Input::read(&args.manifests, args.destroy)?;
    // A saved plan is bound to the variables too.
    input.reading.digest = manifest::with_extra_vars(&input.reading.digest, &args.extra_vars);
    let vars = Vars::new(
        &args.extra_vars,
        args.remote.inventory.as_deref(),
        args.destroy,
    )?;
    if args.remote.is_remote() {
        if args.out.is_some() {
            return Err(saved_plans_over_targets());
        }
        return crate::targets::execute(args, mode, &input, &vars, started);
    }
    let (host, registry) = load::load(&setup(args, &args.root))?;
    let store_at = StoreAt::local(host.root(), args.state.as_deref());
    let run = Run::new(args, mode, started, &vars);
    let input = Given::Alone(&mut input);
    run.converge(input, None, &host, &registry, &store_at, &mut output(args))
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

/// `--report FILE`: for ral apply (on this machine, or one page for all
/// the targets of -t/-i), to a directory that exists (checked before
/// anything runs, not found missing after).
fn check_report_argument(args: &ConvergeArgs, mode: Mode) -> anyhow::Result<()> {
    let Some(file) = &args.report else {
        return Ok(());
    };
    if mode == Mode::Plan {
        bail!("--report is for ral apply: it reports a run");
    }
    let dir = crate::report_file::directory_of(file);
    if !dir.is_dir() {
        bail!(
            "--report {}: {} is not a directory",
            file.display(),
            dir.display()
        );
    }
    crate::report_file::check_replaceable(file)
}

fn saved_plans_over_targets() -> anyhow::Error {
    anyhow::anyhow!(
        "a saved plan is made for one machine and its store: ral plan -o and ral apply FILE do \
         not take -t or -i"
    )
}

pub(crate) fn output(args: &ConvergeArgs) -> Box<dyn Write> {
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
    let mut input =
        Input::saved_with_vars(file, &host, &store_at, args.keep_removed, &args.extra_vars)?;
    let vars = Vars::new(&args.extra_vars, None, args.destroy)?;
    let run = Run::new(args, Mode::Apply, started, &vars);
    let input = Given::Alone(&mut input);
    run.converge(input, None, &host, &registry, &store_at, &mut output(args))
}
