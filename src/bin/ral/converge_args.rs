//! The options of `ral plan` and `ral apply`, and what they make: the
//! library's options, the host's setup, and the exit status of how a run
//! ended.

use std::path::PathBuf;
use std::time::Duration;

use ral::converge::run::{Options, Outcome};

use crate::load::{self, Setup};

pub use ral::converge::run::Mode;

#[derive(Debug, clap::Args)]
pub struct ConvergeArgs {
    /// Also search DIR/providers for providers and DIR/plugins for model
    /// plugins (before RALSH_DATA_DIR and the bundled ones); repeatable.
    #[arg(short = 'I', long = "include", value_name = "DIR")]
    pub include: Vec<PathBuf>,

    /// Root directory for providers that edit files (RALSH_ROOT_DIR); with
    /// -t, a directory on the targets.
    #[arg(long, value_name = "DIR", default_value = "/")]
    pub root: PathBuf,

    /// Time limit for each provider call, in seconds.
    #[arg(long, value_name = "SECONDS", default_value = "300", value_parser = load::parse_timeout)]
    pub timeout: Duration,

    /// How long to wait for another ral apply's lock of the state store
    /// (without it: fail at once, naming the holder), and for the lock of a
    /// file a provider edits (RALSH_LOCK_TIMEOUT; without it: 15).
    #[arg(long, value_name = "SECONDS", value_parser = load::parse_lock_timeout)]
    pub lock_timeout: Option<Duration>,

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
    pub keep_removed: bool,

    /// With targets: converge them N at a time, each batch locked,
    /// converged and unlocked (model plugins' lock tasks) before the next
    /// starts; a batch with a failed target stops the rollout (Ansible's
    /// serial).
    #[arg(long, value_name = "N",
          value_parser = clap::value_parser!(u16).range(1..))]
    pub serial: Option<u16>,

    /// With --serial: the rollout goes on while at most PERCENT of a
    /// batch's targets failed (Ansible's max_fail_percentage; 0 by
    /// default: any failure stops it).
    #[arg(long, value_name = "PERCENT", requires = "serial",
          value_parser = clap::value_parser!(u8).range(0..=100))]
    pub max_fail_percentage: Option<u8>,

    /// Remove everything ral manages that these manifests do not list,
    /// also when that is everything: without it, manifests that declare
    /// no resource, or name none of the resources ral manages, are
    /// refused. MANIFEST may then be omitted (no manifest: remove all
    /// that ral created).
    #[arg(long, conflicts_with = "keep_removed")]
    pub destroy: bool,

    /// Log level (error, warn, info, debug, trace, off), or TARGET=LEVEL
    /// pairs and a level, comma-separated; RUST_LOG works too. Default:
    /// warn (error with -q).
    #[arg(short = 'l', long = "log-level", value_name = "LEVEL", value_parser = load::parse_log_level)]
    pub log_level: Option<String>,

    /// ral apply: remove without asking. On a terminal (standard input and
    /// output), an apply whose plan removes anything first shows the plan
    /// and goes on only when answered `yes`; without one, or with --json
    /// or -q, nothing is asked.
    #[arg(short = 'y', long)]
    pub auto_approve: bool,

    /// Print nothing on stdout: only the exit status tells the outcome.
    #[arg(short = 'q', long)]
    pub quiet: bool,

    /// Treat provider output that breaks the metadata as an error.
    #[arg(long)]
    pub strict: bool,

    /// Run every provider's describe instead of using the metadata cache.
    #[arg(long)]
    pub no_cache: bool,

    /// Print one JSON document (schemas/ral-plan.schema.json) instead of
    /// text.
    #[arg(short = 'j', long)]
    pub json: bool,

    /// How many providers are read, and how many tasks run, at once.
    #[arg(long, value_name = "N", default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub jobs: u16,

    /// Exit 0 when there were no changes, 2 when there were (for plan:
    /// are pending), 4 on failures, 6 for both; 1 when nothing ran.
    #[arg(long)]
    pub detailed_exitcodes: bool,

    /// ral plan: also write the plan's tasks to FILE (0600), bound to the
    /// state store (made when missing), for `ral apply FILE` to run exactly.
    #[arg(short = 'o', long = "out", value_name = "FILE")]
    pub out: Option<PathBuf>,

    /// ral apply: after the run (also a failed or stopped one), write its
    /// report to FILE as one self-contained HTML page (0600: it may name
    /// private paths); with -t/-i, one page for all the targets, failed
    /// ones first, each opening to its tasks.
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,

    /// Set a variable for the manifests' templates, above every other
    /// (the inventory's, the manifests' vars:): KEY=VALUE (typed as an
    /// unquoted YAML value: false and 8080 are a boolean and a number),
    /// @FILE (a YAML or JSON mapping) or a JSON mapping; repeatable, a
    /// later one winning. ral apply FILE of a saved plan needs the same.
    #[arg(short = 'e', long = "extra-vars", value_name = "VARS")]
    pub extra_vars: Vec<String>,

    /// Also print where each templated value's variables came from
    /// (`content: app_port from group_vars/web.yaml`).
    #[arg(short = 'v', long)]
    pub verbose: bool,

    /// Manifest files (YAML, or JSON by the .json extension), read as one;
    /// `-` reads YAML from stdin. ral apply also takes one saved plan
    /// (`ral plan -o FILE`): a file whose text starts with
    /// `{"ral_saved_plan":`.
    #[arg(value_name = "MANIFEST", required_unless_present = "destroy")]
    pub manifests: Vec<PathBuf>,

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
    /// The removals were not approved: nothing ran.
    pub cancelled: bool,
}

impl From<Outcome> for Ending {
    fn from(outcome: Outcome) -> Ending {
        Ending {
            changes: outcome.changes,
            failures: outcome.failures,
            errors: false,
            cancelled: false,
        }
    }
}

/// The exit status of an ending.
pub fn exit_code(args: &ConvergeArgs, ending: Ending) -> u8 {
    // Nothing ran: 1 with or without --detailed-exitcodes (where 0 would
    // mean "no changes"), as Terraform's cancelled apply.
    if ending.cancelled {
        return 1;
    }
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
pub fn options(args: &ConvergeArgs, mode: Mode) -> Options {
    Options {
        mode,
        jobs: usize::from(args.jobs),
        keep_removed: args.keep_removed,
        destroy: args.destroy,
        lock_timeout: args.lock_timeout.unwrap_or_default(),
        saving: args.out.is_some(),
        origin: None,
    }
}
