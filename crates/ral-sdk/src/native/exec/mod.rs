//! `exec::exec`: the one command no other type covers, run when its
//! guards allow (Puppet's exec, Ansible's command and shell). Its
//! provider `runs_commands`: a get is told the manifest's values and
//! reads `run` as `done` (a guard says there is nothing to do, or it
//! runs only on refresh) or as why it would run; a set runs it; a
//! refresh runs it when its guards allow. What it runs goes through the
//! call's command runner: argv only, its own process group killed at its
//! time limit, a bounded tail of its output kept.

mod spec;
#[cfg(test)]
mod tests;
mod users;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use serde_json::Value as Json;

use crate::command::{Finished, Spec as RunSpec, TAIL_BYTES};
use crate::files::Root;
use crate::{error_entry, Call, CallError, CallResult, Change, Convention, Kind};
use crate::{Outcome, Provider, Resource, Update};
use crate::{RUN, RUN_DONE};

use spec::{below, Command, Spec};

/// The lines of a failed command's output its error quotes (the last).
const QUOTED_LINES: usize = 20;

/// The provider.
pub struct Exec;

impl Provider for Exec {
    fn metadata(&self) -> &'static str {
        include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../providers/exec.yaml"
        ))
    }

    fn convention(&self) -> Convention {
        Convention::Json
    }

    /// Execs are not listed (they are the manifest's alone), and one
    /// named without its values is not there to read: only what the
    /// manifest says of a command makes it one.
    fn get(&self, call: &Call, names: &[String]) -> CallResult<Vec<Resource>> {
        Ok(names
            .iter()
            .map(|name| match call.should_of(name) {
                Some(values) => read(call, name, values).unwrap_or_else(|e| error_entry(name, &e)),
                None => error_entry(
                    name,
                    &CallError::of_kind(
                        Kind::Unknown,
                        "an exec is read with its values (command, creates, ...): give some",
                    ),
                ),
            })
            .collect())
    }

    fn set(&self, call: &Call, updates: &[Update]) -> CallResult<Vec<Outcome>> {
        Ok(updates
            .iter()
            .map(|update| run_update(call, update))
            .collect())
    }

    fn refresh(&self, call: &Call, name: &str, attrs: &Resource) -> CallResult<()> {
        let spec = Spec::parse(name, attrs)?;
        let place = Place::of(call, &spec)?;
        if let Some(done) = guarded(call, &spec, &place)? {
            call.log
                .info(&format!("{name}: not run on refresh: {done}"));
            return Ok(());
        }
        execute(call, &spec, &place)
    }
}

/// The exec `name` as its manifest `values` find it now: the values as
/// given, and `run`.
fn read(call: &Call, name: &str, values: &Resource) -> CallResult<Resource> {
    let spec = Spec::parse(name, values)?;
    // A directory or a user that is not there fails the read, as a plan
    // should know (one made earlier in the run is there when it is read
    // again).
    let place = Place::of(call, &spec)?;
    let run = match spec.refreshonly {
        true => RUN_DONE.to_owned(),
        false => match guarded(call, &spec, &place)? {
            Some(_) => RUN_DONE.to_owned(),
            None => why_it_runs(&spec),
        },
    };
    let mut resource = values.clone();
    resource.insert("name".into(), Json::from(name));
    resource.insert(RUN.into(), Json::from(run));
    Ok(resource)
}

/// Whether `path` exists below the root, links on the way resolved
/// inside it (never out of it), the last one not followed: what cannot
/// be reached (a directory on the way missing) does not exist.
fn exists_below(call: &Call, path: &str) -> bool {
    let Ok(root) = Root::open(&call.root) else {
        return false;
    };
    let rel = path.trim_start_matches('/');
    if rel.is_empty() {
        // `/`: the root itself, which is there.
        return true;
    }
    root.file(rel, true, Some(false))
        .and_then(|target| target.lstat())
        .is_ok_and(|found| found.is_some())
}

/// Why a command the guards allow would run.
fn why_it_runs(spec: &Spec) -> String {
    let mut why = Vec::new();
    if let Some(path) = &spec.creates {
        why.push(format!("{path} does not exist"));
    }
    if let Some(check) = &spec.onlyif {
        why.push(format!("onlyif {} succeeded", check.shown));
    }
    if let Some(check) = &spec.unless {
        why.push(format!("unless {} failed", check.shown));
    }
    match why.is_empty() {
        true => "it has no creates, onlyif or unless: it runs every time".to_owned(),
        false => why.join("; "),
    }
}

/// What a guard says when it keeps the command from running (`None`:
/// every guard allows it). `creates` is looked at first, so that a
/// command whose work is done runs no check.
fn guarded(call: &Call, spec: &Spec, place: &Place) -> CallResult<Option<String>> {
    if let Some(path) = &spec.creates {
        if exists_below(call, path) {
            return Ok(Some(format!("{path} exists")));
        }
    }
    if let Some(check) = &spec.onlyif {
        let status = check_status(call, spec, place, check, "onlyif")?;
        if status != 0 {
            return Ok(Some(format!("onlyif {} failed ({status})", check.shown)));
        }
    }
    if let Some(check) = &spec.unless {
        if check_status(call, spec, place, check, "unless")? == 0 {
            return Ok(Some(format!("unless {} succeeded", check.shown)));
        }
    }
    Ok(None)
}

/// The exit status of a check; a check that cannot run or finish fails
/// the read: whether the command would run is then not known.
fn check_status(
    call: &Call,
    spec: &Spec,
    place: &Place,
    check: &Command,
    attr: &str,
) -> CallResult<i64> {
    let ran = run(call, spec, place, check)
        .map_err(|e| CallError::new(format!("{attr}: {}", e.message)))?;
    match ran.status {
        Some(status) => Ok(i64::from(status)),
        None => Err(CallError::new(format!(
            "{attr}: {} {}{}",
            check.shown,
            ran.problem.as_deref().unwrap_or("did not finish"),
            output_tail(&ran)
        ))),
    }
}

/// Runs the command of an update (`is` as read, `should` asking for
/// `run: done`), or says under noop that it would.
fn run_update(call: &Call, update: &Update) -> Outcome {
    let mut values = update.is.clone();
    values.extend(update.should.clone());
    let was = update.is.get(RUN).cloned().unwrap_or(Json::Null);
    let spec = Spec::parse(&update.name, &values)?;
    match update.should.get(RUN) {
        Some(run) if run.as_str() == Some(RUN_DONE) => {}
        Some(_) => {
            return Err(CallError::new(format!(
                "an exec's update asks for {RUN}: {RUN_DONE}, which running the command gives"
            )))
        }
        // An exec keeps nothing: values alone are taken as given, and
        // nothing runs (ral's own requests always ask for run: done).
        None => {
            return Ok((update.should.iter())
                .map(|(key, value)| {
                    let was = update.is.get(key).cloned().unwrap_or(Json::Null);
                    Change::new(key, was, value.clone())
                })
                .collect())
        }
    }
    if !call.noop {
        execute(call, &spec, &Place::of(call, &spec)?)?;
    }
    Ok(vec![Change::new(RUN, was, RUN_DONE)])
}

/// Runs the exec's command; its exit status must be one of `returns`.
fn execute(call: &Call, spec: &Spec, place: &Place) -> CallResult<()> {
    let command = &spec.command;
    let ran = run(call, spec, place, command)?;
    match ran.status {
        Some(status) if spec.returns.contains(&i64::from(status)) => {
            call.log
                .info(&format!("{} ran, exit status {status}", command.shown));
            Ok(())
        }
        Some(status) => Err(CallError::new(format!(
            "{} exited with status {status} (returns: {}){}",
            command.shown,
            shown_returns(&spec.returns),
            output_tail(&ran)
        ))),
        None => Err(CallError::new(format!(
            "{} {}{}",
            command.shown,
            ran.problem.as_deref().unwrap_or("did not finish"),
            output_tail(&ran)
        ))),
    }
}

fn shown_returns(returns: &[i64]) -> String {
    let all: Vec<String> = returns.iter().map(i64::to_string).collect();
    all.join(", ")
}

/// Where and as whom an exec's commands run, found once per call: its
/// directory below the root, its user, and the environment they get.
struct Place {
    dir: PathBuf,
    user: Option<users::RunAs>,
    env: Vec<(String, String)>,
}

impl Place {
    /// A directory or a user that is not there fails here, before
    /// anything runs.
    fn of(call: &Call, spec: &Spec) -> CallResult<Place> {
        let dir = working_dir(call, spec)?;
        let user = (spec.user.as_deref())
            .map(|user| users::look_up(call, user))
            .transpose()?;
        let mut env = call.env.clone();
        let mut set = |key: &str, value: &str| {
            env.retain(|(k, _)| k != key);
            env.push((key.to_owned(), value.to_owned()));
        };
        if let Some(user) = &user {
            // Who it runs as, as login(1) would say (Puppet's exec too).
            set("HOME", &user.home);
            set("USER", &user.name);
            set("LOGNAME", &user.name);
        }
        for (key, value) in &spec.environment {
            set(key, value);
        }
        Ok(Place { dir, user, env })
    }
}

/// Runs `command` in the exec's place, within its time limit. A program
/// that is not found fails before anything runs.
fn run(call: &Call, spec: &Spec, place: &Place, command: &Command) -> CallResult<Finished> {
    call.within_time()?;
    let mut argv = command.argv.clone();
    argv[0] = program(&argv[0], &place.dir, &place.env, &command.shown)?;
    Ok(call.commands.run_spec(&RunSpec {
        argv: &argv,
        env: &place.env,
        timeout: spec.timeout,
        dir: Some(&place.dir),
        user: place.user.as_ref().map(|user| &user.ids),
    }))
}

/// The exec's directory below the root, found as the root sees it (a
/// link in it resolved inside the root, never out of it).
fn working_dir(call: &Call, spec: &Spec) -> CallResult<PathBuf> {
    let root = Root::open(&call.root)?;
    let rel = spec.cwd.trim_start_matches('/');
    let found = root.directory(rel, true, None).map_err(|e| {
        CallError::new(format!(
            "cwd: {} is not a directory below the root: {}",
            spec.cwd, e.message
        ))
    })?;
    Ok(below(&call.root, found.rel()))
}

/// The program `word` names: a path with a `/` as it is (a relative one
/// from `dir`, where it runs), a bare name looked up on the command's
/// PATH, as a shell would; one not found fails naming it.
fn program(word: &str, dir: &Path, env: &[(String, String)], shown: &str) -> CallResult<String> {
    let runnable = |candidate: &Path| {
        std::fs::metadata(candidate)
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    let clean = crate::text::clean;
    if word.contains('/') {
        let path = match word.starts_with('/') {
            true => PathBuf::from(word),
            false => dir.join(word),
        };
        return match runnable(&path) {
            true => Ok(path.to_string_lossy().into_owned()),
            false => Err(CallError::new(format!(
                "{}: {} is not a program (no executable file there)",
                clean(shown),
                clean(&path.to_string_lossy())
            ))),
        };
    }
    let path = env.iter().find(|(k, _)| k == "PATH").map_or("", |(_, v)| v);
    let found = path
        .split(':')
        .filter(|part| part.starts_with('/'))
        .map(|part| Path::new(part).join(word))
        .find(|candidate| runnable(candidate));
    match found {
        Some(found) => Ok(found.to_string_lossy().into_owned()),
        None => Err(CallError::new(format!(
            "{}: '{}' is not a program on PATH ({})",
            clean(shown),
            clean(word),
            clean(path)
        ))),
    }
}

/// The last lines of what a command wrote (stderr after stdout), as a
/// message's tail: `:\n` and the lines, or nothing when it wrote nothing.
/// Only whole lines: of an output cut to its end, the first line, cut,
/// goes (a secret cut there could not be told and redacted).
fn output_tail(ran: &Finished) -> String {
    let whole = |bytes: &[u8]| {
        let text = String::from_utf8_lossy(bytes).into_owned();
        match bytes.len() >= TAIL_BYTES {
            true => text
                .split_once('\n')
                .map_or(String::new(), |(_, rest)| rest.to_owned()),
            false => text,
        }
    };
    let mut text = whole(&ran.stdout);
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str(&whole(&ran.stderr));
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    if lines.is_empty() {
        return String::new();
    }
    let from = lines.len().saturating_sub(QUOTED_LINES);
    let quoted: Vec<String> = lines[from..]
        .iter()
        .map(|line| crate::text::clean(line))
        .collect();
    format!(":\n{}", quoted.join("\n"))
}
