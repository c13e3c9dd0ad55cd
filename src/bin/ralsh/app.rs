//! ralsh's entry: parses the arguments, runs the command here or on
//! targets, and turns its outcome into the exit status (and, for errors,
//! stderr and the JSON error document).

use std::io::{self, Write};
use std::process::ExitCode;

use clap::Parser;
use ral::render::human;
use ral::render::json;
use ral::text::escape_lines;

use crate::args::Args;
use crate::command::{load, run_on, Form, Output, Status};
use crate::complete;
use crate::logging;

pub fn run() -> ExitCode {
    ral::process::forward_interrupts();
    // What a provider starts is ended with its call, also when it leaves
    // the provider's process group (completion runs providers too).
    ral::process::adopt_orphans();
    // A shell asking for completions gets them and nothing else.
    complete::answer_if_asked();
    let args = match Args::try_parse().and_then(|args| args.validate().map(|()| args)) {
        Ok(args) => args,
        Err(e) => return usage_error(e),
    };
    if let Some(shell) = args.completions {
        return match complete::print_registration(shell) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => report(&anyhow::Error::new(e), false),
        };
    }
    if args.man {
        return match crate::manual::render(&mut io::stdout()) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => report(&anyhow::Error::new(e), false),
        };
    }
    logging::init("ralsh", args.log_level.as_deref(), args.quiet);
    let form = if args.json {
        Form::Json
    } else if args.yaml {
        Form::Manifest
    } else {
        Form::Human
    };
    let output = Output {
        form,
        quiet: args.quiet,
        progress: !args.quiet,
        long: args.long,
        style: human::Style { color: use_color() },
    };
    let outcome = if args.remote.is_remote() {
        crate::targets::execute(&args, &output)
    } else {
        execute(&args, &output)
    };
    // An interrupt ends ralsh by that signal, before anything reports the
    // error it caused: `Error::Interrupted`, or a write that failed on a
    // closed pipe while ralsh was blocked writing (the provider was ended
    // then).
    ral::process::exit_if_interrupted();
    match outcome {
        Ok(status) => ExitCode::from(status as u8),
        Err(e) => report(&e, output.form == Form::Json && !output.quiet),
    }
}

/// Help and version go out as clap prints them; a usage error becomes a
/// JSON error document when `--json` was asked for, so a program reading
/// stdout always gets JSON.
fn usage_error(error: clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    let wants_json = std::env::args_os().skip(1).any(|arg| {
        arg.to_str().is_some_and(|arg| {
            arg == "--json" || (arg.starts_with('-') && !arg.starts_with("--") && arg.contains('j'))
        })
    });
    if !wants_json
        || matches!(
            error.kind(),
            ErrorKind::DisplayHelp | ErrorKind::DisplayVersion
        )
    {
        error.exit();
    }
    let text = error.to_string();
    let first = text.lines().next().unwrap_or_default();
    let message = first.strip_prefix("error: ").unwrap_or(first);
    report(&anyhow::anyhow!("{message}"), true)
}

/// Colour as anstream decides for stdout: NO_COLOR, CLICOLOR and
/// CLICOLOR_FORCE, TERM, and whether stdout is a terminal.
fn use_color() -> bool {
    matches!(
        anstream::AutoStream::choice(&io::stdout()),
        anstream::ColorChoice::Always | anstream::ColorChoice::AlwaysAnsi
    )
}

pub fn report(error: &anyhow::Error, as_json: bool) -> ExitCode {
    if ral::error::is_broken_pipe(error.chain()) {
        return ExitCode::SUCCESS;
    }
    let message = format!("{error:#}");
    if as_json {
        let kind = error
            .chain()
            .find_map(|cause| cause.downcast_ref::<ral::Error>())
            .and_then(ral::Error::kind);
        let _ = writeln!(io::stdout(), "{}", json::error(&message, kind));
    }
    eprintln!("ralsh: error: {}", escape_lines(&message));
    ExitCode::from(Status::Error as u8)
}

fn execute(args: &Args, output: &Output) -> anyhow::Result<Status> {
    let (host, registry) = load(args)?;
    // The buffer outside the box: the printers' many small writes go
    // straight into it, and only its flushes are dynamic calls.
    let mut stdout: Box<dyn Write> = if output.quiet {
        Box::new(io::sink())
    } else {
        Box::new(io::stdout().lock())
    };
    run_on(args, output, &host, &registry, &mut stdout)
}
