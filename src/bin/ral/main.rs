//! `ral`: the jobs beyond libral's resource shell. `ralsh` keeps libral's
//! positional interface; `ral` has subcommands, starting with `ral check`,
//! the conformance checker for provider authors.

mod check;
mod holo;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Tools for resource providers.
#[derive(Debug, Parser)]
#[command(name = "ral", version, max_term_width = 100)]
struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run providers the way the host does and report every violation of
    /// the calling convention.
    Check(check::CheckArgs),
    /// A drop-in for Holo's `holo` command: `ral holo scan|diff|apply
    /// [options] [selector...]`; `ral holo help` shows its options. The same
    /// binary run under the name `holo` behaves the same way.
    #[command(disable_help_flag = true)]
    Holo {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<std::ffi::OsString>,
    },
}

fn main() -> ExitCode {
    init_logging();
    // What a provider or plugin starts is ended with its call, also when
    // it leaves the call's process group.
    ral::process::adopt_orphans();
    let mut argv = std::env::args_os();
    let arg0 = argv.next().unwrap_or_default();
    let invoked_as = std::path::Path::new(&arg0)
        .file_name()
        .map(|name| name.to_string_lossy().into_owned());
    let code = if invoked_as.as_deref() == Some("holo") {
        let args: Vec<std::ffi::OsString> = argv.collect();
        holo::run(&arg0.to_string_lossy(), &args)
    } else {
        match Args::parse().command {
            Command::Check(check) => check::run(&check),
            Command::Holo { args } => holo::run("ral holo", &args),
        }
    };
    ral::bundled::remove_run_cache();
    code
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
