//! Shell completion that asks ralsh itself, as libral's did: the script
//! `ralsh --completions SHELL` prints calls `RALSH_COMPLETE=SHELL ralsh --
//! WORDS...` at each Tab, and ralsh answers with the options, the types and
//! providers it finds (with the `-I` directories on the line), and the
//! names of the resources of the type on the line (listed below its
//! `--root`; after `--yaml`, for every word after TYPE).

use std::collections::HashSet;
use std::ffi::{OsStr, OsString};
use std::time::Duration;

use clap::Parser;
use clap_complete::engine::{ArgValueCompleter, CompletionCandidate};
use clap_complete::env::Shells;
use clap_complete::{CompleteEnv, Shell};

use crate::args::{self, Args};
use crate::command;

/// The variable that turns a run into a completion request.
const VAR: &str = "RALSH_COMPLETE";
/// The longest a describe or listing for completion may take: a shell
/// waits for it.
const LIST_LIMIT: Duration = Duration::from_secs(5);

/// Answers a completion request and exits, when this run is one.
pub fn answer_if_asked() {
    CompleteEnv::with_factory(completing)
        .var(VAR)
        .bin("ralsh")
        .completer("ralsh")
        .complete();
}

/// The clap command with the completers of TYPE, NAME and ATTR=VALUE
/// (added here, so that the options need nothing of completion).
fn completing() -> clap::Command {
    args::command()
        .mut_arg("provider", |arg| arg.add(ArgValueCompleter::new(types)))
        .mut_arg("name", |arg| arg.add(ArgValueCompleter::new(names)))
        .mut_arg("attrs", |arg| arg.add(ArgValueCompleter::new(more_names)))
}

/// Prints the script that makes `shell` ask ralsh for completions.
pub fn print_registration(shell: Shell) -> std::io::Result<()> {
    let name = shell.to_string();
    let shells = Shells::builtins();
    let completer = shells
        .completer(&name)
        .ok_or_else(|| std::io::Error::other(format!("no completion for {name}")))?;
    let mut script = Vec::new();
    completer.write_registration(VAR, "ralsh", "ralsh", "ralsh", &mut script)?;
    std::io::Write::write_all(&mut std::io::stdout(), &script)
}

/// Candidates for TYPE: every type and every qualified provider name.
fn types(current: &OsStr) -> Vec<CompletionCandidate> {
    let Some(mut args) = args_before_cursor() else {
        return Vec::new();
    };
    args.provider = None;
    args.timeout = args.timeout.min(LIST_LIMIT);
    let Ok((_, registry)) = load(&args) else {
        return Vec::new();
    };
    let mut words: Vec<String> = registry
        .providers()
        .iter()
        .flat_map(|p| [p.type_name().to_owned(), p.qualified_name()])
        .collect();
    words.sort();
    words.dedup();
    matching(words, current)
}

/// Candidates for NAME: the resources of the TYPE on the line.
fn names(current: &OsStr) -> Vec<CompletionCandidate> {
    match args_before_cursor() {
        Some(args) => matching(listed_names(args), current),
        None => Vec::new(),
    }
}

/// Candidates for the words after NAME: with `--yaml` they are NAMEs too
/// (those not on the line yet); ATTR=VALUE is not completed.
fn more_names(current: &OsStr) -> Vec<CompletionCandidate> {
    let Some(args) = args_before_cursor().filter(|args| args.yaml) else {
        return Vec::new();
    };
    let given: HashSet<String> = args.name.iter().chain(&args.attrs).cloned().collect();
    let mut words = listed_names(args);
    words.retain(|word| !given.contains(word));
    matching(words, current)
}

/// The names of the resources of the TYPE in `args`, listed below its root.
fn listed_names(mut args: Args) -> Vec<String> {
    let Some(query) = args.provider.clone() else {
        return Vec::new();
    };
    args.timeout = args.timeout.min(LIST_LIMIT);
    let Ok((host, registry)) = load(&args) else {
        return Vec::new();
    };
    let Ok(provider) = registry.resolve(&query) else {
        return Vec::new();
    };
    let mut words = Vec::new();
    // What was listed before a failure still helps.
    let _ = host.list(provider, &mut |resource: ral::Resource| {
        words.push(resource.name);
        Ok(())
    });
    ral::process::exit_if_interrupted();
    words
}

/// The providers for a completion: a cache that is read but not written,
/// since a completion's short time limit must not decide for later runs.
fn load(args: &Args) -> anyhow::Result<(ral::Host, ral::discovery::Registry)> {
    command::load_with(args, &command::cache_for(args).read_only())
}

/// The words that start with what was typed, quoted for the shell where
/// they hold anything but plain characters (a resource named `x;rm` must
/// not become two commands on the line); words with control characters
/// are left out.
fn matching(words: Vec<String>, current: &OsStr) -> Vec<CompletionCandidate> {
    let prefix = current.to_string_lossy();
    words
        .into_iter()
        .filter(|word| word.starts_with(prefix.as_ref()) && !word.chars().any(char::is_control))
        .map(|word| CompletionCandidate::new(shell_words::quote(&word).into_owned()))
        .collect()
}

/// The command line up to the word being completed, parsed: a completion
/// request is `ralsh -- ralsh WORD...`, with the index of the word under
/// the cursor in `_CLAP_COMPLETE_INDEX` where the shell says (bash, zsh),
/// the last word otherwise.
fn args_before_cursor() -> Option<Args> {
    let all: Vec<OsString> = std::env::args_os().collect();
    let start = all.iter().position(|word| word == "--")? + 1;
    let words = &all[start..];
    let index = std::env::var("_CLAP_COMPLETE_INDEX")
        .ok()
        .and_then(|index| index.parse::<usize>().ok())
        .unwrap_or(words.len().saturating_sub(1))
        .min(words.len());
    Args::try_parse_from(&words[..index]).ok()
}
