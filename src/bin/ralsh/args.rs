//! The command line, declared once with clap; `--help`, shell completions
//! and the man page are all generated from these definitions.

use std::path::PathBuf;
use std::time::Duration;

use clap::{CommandFactory, Parser};

use crate::load;

/// The resource shell: list, show and change system resources through
/// providers.
///
/// `ralsh` lists providers; `ralsh TYPE` lists resources; `ralsh TYPE NAME`
/// shows one; `ralsh TYPE NAME ATTR=VALUE...` changes it and prints the
/// resulting resource and each change; `ralsh --yaml TYPE [NAME...]` prints
/// resources as a manifest for `ral plan`. TYPE is a type (`host`) or a
/// qualified provider name (`host::etc_hosts`).
///
/// Exit status: 0 success, 1 not found, 2 any error (also a usage error).
#[derive(Debug, Parser)]
#[command(name = "ralsh", version, max_term_width = 100)]
pub struct Args {
    /// Also search DIR/providers for providers (before RALSH_DATA_DIR and the
    /// bundled providers); repeatable.
    #[arg(short = 'I', long = "include", value_name = "DIR")]
    pub include: Vec<PathBuf>,

    /// Print JSON (libral's shapes) instead of text.
    #[arg(short = 'j', long)]
    pub json: bool,

    /// Print the resources of TYPE, or the NAMEs given (every word after
    /// TYPE is a NAME), as a YAML manifest: TYPE, NAME, then attributes, as
    /// `ral plan` reads them back. Read-only and sensitive attributes are
    /// left out.
    #[arg(
        short = 'y',
        long,
        requires = "provider",
        conflicts_with_all = ["json", "noop", "explain"]
    )]
    pub yaml: bool,

    /// Also read ATTR=VALUE pairs from stdin, as one JSON object of texts
    /// (`{"password": "..."}`): values there are not on ralsh's command
    /// line, which every user can read in /proc. Needs NAME.
    #[arg(long, requires = "name", conflicts_with_all = ["yaml", "explain"])]
    pub attrs_stdin: bool,

    /// Describe the provider: its attributes with desc, type and kind.
    #[arg(short = 'e', long)]
    pub explain: bool,

    /// Preview a change without making it.
    #[arg(short = 'n', long)]
    pub noop: bool,

    /// Treat a resource with ensure=absent as not found.
    #[arg(short = 'a', long)]
    pub absent: bool,

    /// Log level (error, warn, info, debug, trace, off), or a filter of
    /// TARGET=LEVEL pairs and a level, comma-separated; RUST_LOG works too.
    /// Default: warn (error with -q).
    #[arg(short = 'l', long = "log-level", value_name = "LEVEL", value_parser = load::parse_log_level)]
    pub log_level: Option<String>,

    /// Time limit for each provider call, in seconds.
    #[arg(long, value_name = "SECONDS", default_value = "300", value_parser = load::parse_timeout)]
    pub timeout: Duration,

    /// How long a provider waits for the lock of a file it edits (another
    /// ralsh, useradd, ...) before it gives up, in seconds
    /// (RALSH_LOCK_TIMEOUT).
    #[arg(long, value_name = "SECONDS", default_value = "15", value_parser = load::parse_lock_timeout)]
    pub lock_timeout: Duration,

    /// Run every provider's describe instead of using the metadata cache
    /// (and do not write it).
    #[arg(long)]
    pub no_cache: bool,

    /// Root directory for providers that edit files (RALSH_ROOT_DIR); with
    /// -t, a directory on the targets.
    #[arg(long, value_name = "DIR", default_value = "/")]
    pub root: PathBuf,

    /// Treat provider output that breaks the metadata (a value of the wrong
    /// type, an undeclared attribute) as an error instead of a warning.
    #[arg(long)]
    pub strict: bool,

    /// Print nothing on stdout: only the exit status tells the outcome
    /// (errors are still logged on stderr).
    #[arg(short = 'q', long)]
    pub quiet: bool,

    /// Without TYPE: list providers with their summaries, aligned, instead
    /// of one qualified name per line.
    #[arg(short = 'v', long)]
    pub long: bool,

    #[command(flatten)]
    pub remote: crate::remote::RemoteArgs,

    /// Print a completion script for SHELL and exit.
    #[arg(long, value_name = "SHELL", conflicts_with = "provider")]
    pub completions: Option<clap_complete::Shell>,

    /// Print the man page (roff) and exit.
    #[arg(long, conflicts_with = "provider")]
    pub man: bool,

    /// A type (`host`) or qualified provider name (`host::etc_hosts`).
    #[arg(value_name = "TYPE")]
    pub provider: Option<String>,

    /// The resource to show or change.
    #[arg(value_name = "NAME")]
    pub name: Option<String>,

    /// Attributes to set, as ATTR=VALUE; arrays as comma-separated lists.
    /// With --yaml, more NAMEs.
    #[arg(value_name = "ATTR=VALUE")]
    pub attrs: Vec<String>,
}

impl Args {
    /// What clap cannot check: `--yaml` changes nothing, so a word that
    /// reads as ATTR=VALUE (an attribute name, then `=`) is refused rather
    /// than taken for a NAME.
    pub fn validate(&self) -> Result<(), clap::Error> {
        if !self.yaml {
            return Ok(());
        }
        let assignment = self.name.iter().chain(&self.attrs).find(|word| {
            word.split_once('=')
                .is_some_and(|(attr, _)| ral::metadata::is_identifier(attr))
        });
        match assignment {
            Some(word) => Err(command().error(
                clap::error::ErrorKind::ArgumentConflict,
                format!(
                    "the argument '--yaml' cannot be used with '{}': --yaml prints \
                     resources and changes nothing (every word after TYPE is a NAME)",
                    ral::text::escape(word)
                ),
            )),
            None => Ok(()),
        }
    }

    /// NAME and the words after it, each once, in order: the NAMEs of
    /// `--yaml`.
    pub fn names(&self) -> Vec<&str> {
        let mut seen = std::collections::HashSet::new();
        self.name
            .iter()
            .chain(&self.attrs)
            .map(String::as_str)
            .filter(|word| seen.insert(*word))
            .collect()
    }
}

/// The clap command, for completions and the man page.
pub fn command() -> clap::Command {
    Args::command()
}
