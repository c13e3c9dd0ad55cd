//! `ral agent`: converges this machine to its manifests continuously, in
//! the foreground, for a service manager (`daemon`); `ral agent status`
//! tells what it did last and when it runs next (`status`); `ral agent
//! unit` prints a systemd unit to run it (`unit`). When and what to watch
//! are the library's (`ral::agent`); each run is an ordinary apply
//! (`one_run`), recorded with the agent as its origin.

mod daemon;
mod observe;
mod status;
mod unit;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use crate::load;

#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct AgentArgs {
    #[command(subcommand)]
    command: Option<AgentCommand>,

    #[command(flatten)]
    run: RunArgs,
}

#[derive(Debug, clap::Subcommand)]
enum AgentCommand {
    /// The agent's last run, its next one, and what it found and
    /// repaired since it started. Exit status: 0 when an agent runs on
    /// the store, 3 when none does, 2 on an error.
    Status(StatusArgs),
    /// Print a systemd unit (Type=notify) that runs ral agent with the
    /// options and manifests given, for /etc/systemd/system or
    /// `systemctl edit --full --force ral-agent.service`.
    Unit(RunArgs),
}

/// What the agent runs with.
#[derive(Debug, Clone, clap::Args)]
pub struct RunArgs {
    /// Time between runs: seconds, or a duration such as 30m or 1h30m
    /// (at least 100ms).
    #[arg(long, value_name = "DURATION", default_value = "30m", value_parser = interval)]
    pub interval: Duration,

    /// Put each run on the interval off by a random time up to this
    /// (machines started together then do not all run together).
    #[arg(long, value_name = "DURATION", default_value = "0s", value_parser = duration)]
    pub splay: Duration,

    /// After a failed run, wait this long before the next interval or
    /// drift run, twice as long after each further failure (up to 5
    /// minutes, or the interval). A run on changed manifests or on SIGUSR1
    /// is not held back.
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = duration)]
    pub backoff: Duration,

    /// Find and report drift; change nothing (each run is recorded as a
    /// plan in state Noop).
    #[arg(long)]
    pub noop: bool,

    /// Also look for providers in DIR/providers (before RALSH_DATA_DIR's);
    /// repeatable.
    #[arg(short = 'I', long = "include", value_name = "DIR")]
    pub include: Vec<PathBuf>,

    /// The root to converge (RALSH_ROOT_DIR): files are read, written and
    /// watched below it.
    #[arg(long, value_name = "DIR", default_value = "/")]
    pub root: PathBuf,

    /// The state store (default: ROOT/var/lib/ral/state.db).
    #[arg(long, value_name = "FILE")]
    pub state: Option<PathBuf>,

    /// Time limit for each provider call, in seconds.
    #[arg(long, value_name = "SECONDS", default_value = "300", value_parser = load::parse_timeout)]
    pub timeout: Duration,

    /// How many providers are read, and how many tasks run, at once.
    #[arg(long, value_name = "N", default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub jobs: u16,

    /// Variables for the manifests' templates (KEY=VALUE, YAML or
    /// @FILE), as ral apply takes them; repeatable.
    #[arg(short = 'e', long = "extra-vars", value_name = "VARS")]
    pub extra_vars: Vec<String>,

    /// Plan no removals: what no manifest lists stays.
    #[arg(long)]
    pub keep_removed: bool,

    /// Log level (error, warn, info, debug, trace, off), or TARGET=LEVEL
    /// pairs; RUST_LOG is read when it is not given.
    #[arg(short = 'l', long = "log-level", value_name = "LEVEL", value_parser = load::parse_log_level)]
    pub log_level: Option<String>,

    /// Print no task lines, only the agent's own and errors.
    #[arg(short = 'q', long)]
    pub quiet: bool,

    /// Treat provider output that breaks the metadata as an error.
    #[arg(long)]
    pub strict: bool,

    /// Run every provider's describe instead of using the metadata cache.
    #[arg(long)]
    pub no_cache: bool,

    /// The manifests (YAML files) to keep this machine converged to.
    #[arg(value_name = "MANIFEST", required = true)]
    pub manifests: Vec<PathBuf>,
}

#[derive(Debug, clap::Args)]
pub struct StatusArgs {
    /// The root whose store is meant when --state is not given.
    #[arg(long, value_name = "DIR", default_value = "/")]
    root: PathBuf,

    /// The state store the agent runs on (default:
    /// ROOT/var/lib/ral/state.db).
    #[arg(long, value_name = "FILE")]
    state: Option<PathBuf>,

    /// Print JSON instead of text.
    #[arg(short = 'j', long)]
    json: bool,
}

fn duration(text: &str) -> Result<Duration, ral::agent::duration::BadDuration> {
    ral::agent::duration::parse(text)
}

/// The shortest interval: runs back to back would only spin.
const SHORTEST_INTERVAL: Duration = Duration::from_millis(100);

fn interval(text: &str) -> anyhow::Result<Duration> {
    let interval = duration(text)?;
    if interval < SHORTEST_INTERVAL {
        anyhow::bail!("{text:?} is shorter than the shortest interval, 100ms");
    }
    Ok(interval)
}

impl AgentArgs {
    /// The log level the agent itself runs with.
    pub fn log_level(&self) -> Option<&str> {
        match &self.command {
            None => self.run.log_level.as_deref(),
            _ => None,
        }
    }
}

pub fn run(args: &AgentArgs) -> ExitCode {
    match &args.command {
        Some(AgentCommand::Status(status)) => status::run(status),
        Some(AgentCommand::Unit(run)) => unit::run(run),
        None => daemon::run(&args.run),
    }
}
