//! `ral`: the jobs beyond libral's resource shell. `ralsh` keeps libral's
//! positional interface; `ral` has subcommands, starting with `ral check`,
//! the conformance checker for provider authors.

mod check;

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
}

fn main() -> ExitCode {
    let args = Args::parse();
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
    match args.command {
        Command::Check(check) => check::run(&check),
    }
}
