//! `ral holo` (and the binary run under the name `holo`): Holo's command
//! line, parsed the way Holo parses it, then handed to `ral::holo`.

use std::ffi::OsString;
use std::process::ExitCode;
use std::time::Duration;

use ral::holo::{Op, Options, ScanFormat};

/// The time limit per plugin call unless `--timeout` says otherwise.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);

fn usage(program: &str) -> String {
    format!(
        "Usage: {program} apply [-f|--force] [--noop] [--json] [selector ...]
   or: {program} diff [selector ...]
   or: {program} scan [-s|--short|-p|--porcelain|--json] [selector ...]
   or: {program} version
   or: {program} help

Options for every operation: --strict (apply exits 1 when a plugin failed;
duplicate entity IDs are errors), --timeout SECONDS (per plugin call,
default {}).

Exit status, as Holo's: 0 success; 1 a generator failed (or, with --strict,
a plugin); 2 a usage error; 255 a configuration, plugin info, scan,
selector or lock error.

Example: {program} scan --short; {program} apply --noop etc/motd
",
        DEFAULT_TIMEOUT.as_secs()
    )
}

/// A usage error: the message and the usage text on stderr, exit 2.
fn usage_error(program: &str, message: Option<String>) -> ExitCode {
    let mut text = message.map_or_else(String::new, |m| format!("{program}: {m}\n"));
    text.push_str(&usage(program));
    print_to(std::io::stderr(), &text);
    ExitCode::from(2)
}

/// Writes and ignores a closed pipe (`holo version | true`), as a plain
/// print in Holo would.
fn print_to(mut stream: impl std::io::Write, text: &str) {
    let _ = stream
        .write_all(text.as_bytes())
        .and_then(|()| stream.flush());
}

/// Runs Holo's command line; `program` is how the usage names the command.
pub fn run(program: &str, args: &[OsString]) -> ExitCode {
    let args: Vec<String> = args
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let Some(op) = args.first() else {
        return usage_error(program, None);
    };
    let op = match op.as_str() {
        "scan" => Op::Scan,
        "diff" => Op::Diff,
        "apply" => Op::Apply,
        "help" | "--help" => {
            print_to(std::io::stdout(), &usage(program));
            return ExitCode::SUCCESS;
        }
        "version" | "--version" => {
            print_to(std::io::stdout(), concat!(env!("CARGO_PKG_VERSION"), "\n"));
            return ExitCode::SUCCESS;
        }
        other => return usage_error(program, Some(format!("unknown operation '{other}'"))),
    };
    let options = match parse_options(op, &args[0], &args[1..]) {
        Ok(options) => options,
        Err(message) => return usage_error(program, Some(message)),
    };
    ral::process::forward_interrupts_deferred();
    let code = ral::holo::run(&options);
    // A signal noted after the last check still ends the process by it.
    ral::process::exit_if_interrupted();
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}

/// The options and selectors after the operation `op` (named `op_name`).
fn parse_options(op: Op, op_name: &str, args: &[String]) -> Result<Options, String> {
    let mut options = Options {
        op,
        scan_format: ScanFormat::Report,
        force: false,
        json: false,
        noop: false,
        strict: false,
        timeout: DEFAULT_TIMEOUT,
        selectors: Vec::new(),
    };
    let mut porcelain = false;
    let mut short = false;
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        match (op, arg.as_str()) {
            (Op::Scan, "-s" | "--short") => short = true,
            (Op::Scan, "-p" | "--porcelain") => porcelain = true,
            (Op::Apply, "-f" | "--force") => options.force = true,
            (Op::Apply, "--noop") => options.noop = true,
            (Op::Scan | Op::Apply, "--json") => options.json = true,
            (_, "--strict") => options.strict = true,
            (_, "--timeout") => match rest.next() {
                Some(value) => options.timeout = seconds(value)?,
                None => return Err("--timeout needs a value".to_owned()),
            },
            (_, flag) if flag.starts_with("--timeout=") => options.timeout = seconds(&flag[10..])?,
            (_, flag) if flag.starts_with('-') && flag.len() > 1 => {
                return Err(format!("unknown option '{flag}' for {op_name}"))
            }
            (_, selector) => options.selectors.push(selector.to_owned()),
        }
    }
    options.scan_format = if porcelain {
        ScanFormat::Porcelain
    } else if short {
        ScanFormat::Short
    } else {
        ScanFormat::Report
    };
    Ok(options)
}

fn seconds(text: &str) -> Result<Duration, String> {
    match text.parse::<f64>() {
        Ok(s) if s > 0.0 && s.is_finite() => Ok(Duration::from_secs_f64(s.min(1e9))),
        _ => Err(format!(
            "invalid --timeout '{text}': expected a positive number of seconds"
        )),
    }
}
