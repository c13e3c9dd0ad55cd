//! `ral`: the jobs beyond libral's resource shell. `ralsh` keeps libral's
//! positional interface; `ral` has subcommands, starting with `ral check`,
//! the conformance checker for provider authors.

mod agent;
mod confirm;
mod conformance;
mod connections;
mod converge;
mod converge_args;
mod facts;
mod holo;
mod manual;
mod one_run;
mod progress;
mod render;
mod report_file;
mod snapshot;
mod state;
mod targets;

use ral::cli::{load, logging, man, remote, unread};

use std::process::ExitCode;

/// A plan holds a few dozen small strings and vectors per resource; the
/// system allocator spends a 32-byte chunk on each, mimalloc its size
/// class (8 bytes for a short attribute name), which keeps a plan of a
/// hundred thousand resources a quarter smaller, and faster.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use clap::{CommandFactory, Parser, Subcommand};

/// Tools for resource providers.
#[derive(Debug, Parser)]
#[command(
    name = "ral",
    version,
    propagate_version = true,
    arg_required_else_help = true,
    args_conflicts_with_subcommands = true,
    max_term_width = 100,
    after_help = "Exit status: that of the subcommand (see its --help); 2 for a usage error.\n\n\
                  Examples:\n  \
                  ral check --seed tests/fixtures/seed providers/*.prov\n  \
                  ral holo scan --short"
)]
struct Args {
    /// Print the man page (roff) and exit.
    #[arg(long, exclusive = true)]
    man: bool,

    /// Print a completion script for SHELL (bash, zsh, fish, elvish,
    /// powershell) and exit.
    #[arg(long, value_name = "SHELL", exclusive = true)]
    completions: Option<clap_complete::Shell>,

    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Show what it takes to bring the system to the manifests: one read
    /// per provider, no change.
    #[command(after_help = PLAN_HELP)]
    Plan(converge_args::ConvergeArgs),
    /// Bring the system to the manifests: plan, then run the tasks in
    /// dependency order, and verify the result.
    #[command(after_help = APPLY_HELP)]
    Apply(converge_args::ConvergeArgs),
    /// Keep this machine converged: a run at start, every --interval, and
    /// within a second of a change to a file a managed resource is kept
    /// in; ral agent status, ral agent unit.
    #[command(after_help = AGENT_HELP)]
    Agent(agent::AgentArgs),
    /// What the state store holds: ral state list|history|show|forget.
    State(state::StateArgs),
    /// Model plugins' snapshot plans: ral snapshot create|remove|restore
    /// NAME, and ral snapshot list.
    Snapshot(snapshot::SnapshotArgs),
    /// Run providers (and model plugins) the way the host does and report
    /// every violation of the calling convention.
    Check(conformance::CheckArgs),
    /// The facts of this machine, or of each target: os, networking,
    /// processors, memory, virtual... as Facter names them, and the
    /// custom facts of the data directories' facts.d.
    #[command(after_help = FACTS_HELP)]
    Facts(facts::FactsArgs),
    /// The ssh connections a run on remote targets leaves open for the
    /// next one (--persist): ral connections lists them, ral connections
    /// close [TARGET...] closes them.
    Connections(connections::ConnectionsArgs),
    /// A drop-in for Holo's holo command: ral holo scan|diff|apply
    /// [options] [selector...]; ral holo help shows its options and exit
    /// codes. The same binary run under the name holo behaves the same way.
    // Holo's own parser answers --help and --version (as Holo does).
    #[command(disable_help_flag = true, disable_version_flag = true)]
    Holo {
        /// Holo's operation (scan, diff, apply, version, help) with its
        /// options and selectors.
        #[arg(
            value_name = "OPERATION [OPTIONS] [SELECTOR]",
            trailing_var_arg = true,
            allow_hyphen_values = true
        )]
        args: Vec<std::ffi::OsString>,
    },
}

const PLAN_HELP: &str = "Exit status: 0 when the plan could be made (changes or not), 1 when the \
    state of some resources could not be read, 2 when nothing ran (a usage, manifest or \
    validation error, or a removal of everything ral manages not asked for with --destroy). \
    With --detailed-exitcodes: 0 nothing to change, 2 changes pending, 4 \
    unreadable resources, 6 both; 1 when nothing ran.\n\n\
    Example:\n  ral plan --root /tmp/fake site.yaml";

const AGENT_HELP: &str = "Runs in the foreground, for a service manager (ral agent unit prints a \
    systemd unit). Watches, with inotify, the files the file, host, user, group and mount \
    resources are kept in, and the manifests: a change to a managed file is converged once \
    its writes settle (a tenth of a second); changed manifests are read again at once, and \
    manifests that cannot be used leave the last good ones in force. Each run takes the \
    state store's lock (a person's ral apply is told the agent runs; a run the agent finds \
    locked waits for it) and is recorded with the agent as its origin (ral state history). \
    Signals: SIGHUP reads the providers and manifests again, SIGUSR1 runs now, SIGTERM or SIGINT lets the \
    running task finish, records the run and exits 0.\n\n\
    Exit status: 0 when stopped by a signal, 2 when it could not start (a usage or manifest \
    argument error, another agent on the store, a store it cannot use).\n\n\
    Examples:\n  ral agent --interval 30m --splay 5m /etc/ral/site.yaml\n  \
    ral agent --root /tmp/fake --interval 1m site.yaml\n  ral agent status\n  \
    ral agent unit /etc/ral/site.yaml > /etc/systemd/system/ral-agent.service";

const FACTS_HELP: &str = "Exit status: 0 when the facts were gathered (of every target, with -t \
    or -i), 1 when a target failed, 2 when nothing could be gathered (a usage error, no facts \
    provider). A custom facts file that cannot be read is a warning.\n\n\
    Examples:\n  ral facts\n  ral facts -j --root /tmp/fake\n  ral facts -t web1,web2";

const APPLY_HELP: &str = "Exit status: 0 when every task succeeded or there was nothing to do, 1 \
    when a task failed, was skipped or was stopped, or the removals were not approved, 2 when \
    nothing ran (a usage, manifest or validation error, or a removal of everything ral manages \
    not asked for with --destroy). With --detailed-exitcodes: 0 no changes, 2 changes made, 4 \
    failures, 6 both; 1 when nothing ran (removals not approved too). On a terminal, a plan \
    that removes anything is shown first and goes on only when answered yes (-y skips the \
    question). The first SIGINT or SIGTERM stops the plan: running tasks finish, the rest are \
    Stopped; a second one ends the running tasks.\n\n\
    Example:\n  ral apply --root /tmp/fake users.yaml files.yaml";

fn main() -> ExitCode {
    // What a provider or plugin starts is ended with its call, also when
    // it leaves the call's process group.
    ral::process::adopt_orphans();
    let mut argv = std::env::args_os();
    let arg0 = argv.next().unwrap_or_default();
    let invoked_as = std::path::Path::new(&arg0)
        .file_name()
        .map(|name| name.to_string_lossy().into_owned());
    let code = if invoked_as.as_deref() == Some("holo") {
        init_logging();
        let args: Vec<std::ffi::OsString> = argv.collect();
        holo::run(&arg0.to_string_lossy(), &args)
    } else {
        let args = match Args::try_parse() {
            Ok(args) => args,
            Err(e) => usage_error(e),
        };
        match &args.command {
            Some(Command::Plan(converge) | Command::Apply(converge)) => logging::init_to(
                "ral",
                converge.log_level.as_deref(),
                converge.quiet,
                Box::new(progress::LogOutput),
            ),
            Some(Command::Facts(facts)) => logging::init("ral", facts.log_level.as_deref(), false),
            Some(Command::Agent(agent)) => logging::init("ral", agent.log_level(), false),
            _ => init_logging(),
        }
        match (args.command, args.completions) {
            (Some(Command::Plan(converge)), _) => {
                converge::run(&converge, converge_args::Mode::Plan)
            }
            (Some(Command::Apply(converge)), _) => {
                converge::run(&converge, converge_args::Mode::Apply)
            }
            (Some(Command::Check(check)), _) => conformance::run(&check),
            (Some(Command::Facts(facts)), _) => facts::run(&facts),
            (Some(Command::Connections(connections)), _) => connections::run(&connections),
            (Some(Command::State(state)), _) => state::run(&state),
            (Some(Command::Agent(agent)), _) => agent::run(&agent),
            (Some(Command::Snapshot(snapshot)), _) => snapshot::run(&snapshot),
            (Some(Command::Holo { args }), _) => holo::run("ral holo", &args),
            (None, Some(shell)) => {
                // Into a buffer: generate() panics on a closed pipe.
                let mut script = Vec::new();
                clap_complete::generate(shell, &mut Args::command(), "ral", &mut script);
                let _ = std::io::Write::write_all(&mut std::io::stdout(), &script);
                ExitCode::SUCCESS
            }
            // arg_required_else_help leaves --man as the only way here.
            (None, None) => match manual::render(&mut unread::stdout()) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("ral: error: {e}");
                    ExitCode::from(2)
                }
            },
        }
    };
    ral::cache_dir::remove_run_cache();
    code
}

/// Help and version go out as clap prints them; a usage error exits 2, or
/// 1 with --detailed-exitcodes, where 2 means "changes".
fn usage_error(error: clap::Error) -> ! {
    use clap::error::ErrorKind;
    let detailed = std::env::args_os().any(|arg| arg == "--detailed-exitcodes");
    if detailed
        && !matches!(
            error.kind(),
            ErrorKind::DisplayHelp | ErrorKind::DisplayVersion
        )
    {
        let _ = error.print();
        std::process::exit(1);
    }
    error.exit()
}

/// Colour as anstream decides for stdout: NO_COLOR, CLICOLOR and
/// CLICOLOR_FORCE, TERM, and whether stdout is a terminal.
fn use_color() -> bool {
    matches!(
        anstream::AutoStream::choice(&std::io::stdout()),
        anstream::ColorChoice::Always | anstream::ColorChoice::AlwaysAnsi
    )
}

/// Errors only, unless RUST_LOG asks for more.
fn init_logging() {
    env_logger::Builder::new()
        .parse_filters(&std::env::var("RUST_LOG").unwrap_or_else(|_| "error".to_owned()))
        .format(|out, record| {
            use std::io::Write;
            writeln!(
                out,
                "ral: {}: {}",
                record.level().as_str().to_ascii_lowercase(),
                ral::text::escape_lines(&record.args().to_string())
            )
        })
        .init();
}
