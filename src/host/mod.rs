//! The host: runs provider calls — with the scrubbed environment, the time
//! limit and the counters that decide the exit status — for the calling
//! conventions of [`crate::invoke`], which build the calls and read the
//! answers. It offers the operations on resources (list, find, get many,
//! set many, describe) and the check of names before anything runs.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::discovery::Describer;
use crate::error::{Error, Exited, Result};
use crate::invoke::{self, Invocation, Runner, Update, UpdateAnswer};
use crate::metadata::Action;
use crate::output_check::OutputCheck;
use crate::process::{self, Call, ProviderEnv};
use crate::provider::Provider;
use crate::remote::{script, Session};
use crate::resource::{Resource, ResourceSink};
use crate::text::escape;

/// Settings shared by every call.
#[derive(Debug, Clone)]
pub struct HostConfig {
    /// Time limit of one provider call.
    pub timeout: Duration,
    /// Passed to providers as `RALSH_ROOT_DIR`.
    pub root: PathBuf,
    /// Treat values that do not fit their type, and undeclared attributes,
    /// as errors instead of warnings.
    pub strict: bool,
    /// How long a provider waits for a lock on a file it edits, passed as
    /// `RALSH_LOCK_TIMEOUT`.
    pub lock_timeout: Duration,
    /// The directory of the Python toolkit, passed as `RALSH_PROVIDER_LIB`.
    pub provider_lib: Option<PathBuf>,
    /// Run the providers on this target instead of here; `root` is then
    /// the target's.
    pub remote: Option<Arc<Session>>,
}

/// How long providers wait for a lock by default: lckpwdf(3)'s 15 seconds.
pub const DEFAULT_LOCK_TIMEOUT: Duration = Duration::from_secs(15);

impl Default for HostConfig {
    fn default() -> HostConfig {
        HostConfig {
            timeout: Duration::from_secs(300),
            root: PathBuf::from("/"),
            strict: false,
            lock_timeout: DEFAULT_LOCK_TIMEOUT,
            provider_lib: None,
            remote: None,
        }
    }
}

/// How much longer than the time limit a remote call may take before ssh
/// itself is ended: the target's watchdog ends the provider at the limit
/// and gives it two seconds; the rest is for the network.
const REMOTE_MARGIN: Duration = Duration::from_secs(10);

/// The longest command line sent to a target (one argument to ssh, one to
/// `sh -c` there, which Linux caps at 128 KiB), with room to spare.
const MAX_REMOTE_COMMAND: usize = 120 * 1024;

/// Runs providers and keeps the counters that decide the final exit status.
#[derive(Debug)]
pub struct Host {
    config: HostConfig,
    env: ProviderEnv,
    /// A remote call's environment on the target, as `VAR=VALUE` words.
    remote_env: Vec<String>,
    error_lines: AtomicUsize,
    problem_lines: AtomicUsize,
    /// The warning and error lines of the calls, to be quoted (at most
    /// [`QUOTED_PROBLEMS`](crate::process::QUOTED_PROBLEMS) a call, and
    /// as many until taken).
    problem_quotes: std::sync::Mutex<Vec<String>>,
    check: OutputCheck,
}

impl Host {
    pub fn new(config: HostConfig) -> Host {
        let mut env = ProviderEnv::scrubbed(&config.root);
        env.set(
            "RALSH_LOCK_TIMEOUT",
            format!("{}", config.lock_timeout.as_secs_f64()),
        );
        if let Some(lib) = &config.provider_lib {
            env.set("RALSH_PROVIDER_LIB", lib);
        }
        // What a native provider's script runs when it is run as a
        // program here (`ral check FILE`): the program beside this one.
        if let Ok(program) = crate::native::program() {
            env.set("RALSH_NATIVE_PROGRAM", program);
        }
        let strict = config.strict;
        let remote_env = match &config.remote {
            Some(session) => remote_env(&config, session),
            None => Vec::new(),
        };
        Host {
            config,
            env,
            remote_env,
            error_lines: AtomicUsize::new(0),
            problem_lines: AtomicUsize::new(0),
            problem_quotes: std::sync::Mutex::new(Vec::new()),
            check: OutputCheck::new(strict),
        }
    }

    /// The settings it was made with.
    pub fn config(&self) -> &HostConfig {
        &self.config
    }

    /// The root providers work below.
    pub fn root(&self) -> &Path {
        &self.config.root
    }

    /// How many error-level stderr lines providers wrote so far.
    pub fn provider_error_lines(&self) -> usize {
        self.error_lines.load(Ordering::SeqCst)
    }

    /// How many warning and error lines providers wrote on stderr so far
    /// (describe excluded).
    /// The warning and error lines kept since the last time they were
    /// taken (see [`Host::provider_problem_lines`] for how many there were).
    pub fn take_problem_quotes(&self) -> Vec<String> {
        std::mem::take(
            &mut *self
                .problem_quotes
                .lock()
                .unwrap_or_else(|e| e.into_inner()),
        )
    }

    pub fn provider_problem_lines(&self) -> usize {
        self.problem_lines.load(Ordering::SeqCst)
    }

    /// Records a problem with what a provider answered (see
    /// [`OutputCheck::report`]): an error under `--strict`, else a warning.
    pub fn report_output_problem(
        &self,
        provider: &Provider,
        action: Action,
        attr: &str,
        problem: String,
    ) -> Result<()> {
        self.check.report(provider, action, attr, problem)
    }

    /// Takes the output problems (misfit values, undeclared attributes)
    /// seen since the last call.
    pub fn take_output_problems(&self) -> Vec<String> {
        self.check.take_problems()
    }

    /// Runs `X.prov ral_action=describe` and returns its YAML. Any output
    /// on stderr counts as failure, as a describe must be clean.
    pub fn describe(&self, label: &str, program: &Path) -> Result<String> {
        invoke::simple::describe(self, label, program)
    }

    /// The interpreters the providers `providers` start with through
    /// `#!/usr/bin/env NAME`, as this host finds them (once per run): each
    /// NAME with its program, NAME's program on PATH when that differs (a
    /// shim), and how many of the providers use it.
    pub fn interpreters(&self, providers: &[Provider]) -> Vec<process::interpreter::Used> {
        process::interpreters(
            providers.iter().map(|p| p.source.as_path()),
            self.env.vars(),
        )
    }

    /// Streams every resource to `sink` as the provider lists it.
    pub fn list(&self, provider: &Provider, sink: &mut dyn ResourceSink) -> Result<()> {
        invoke::convention(provider.meta.invoke).list(self, provider, sink)
    }

    /// Finds one resource; `None` when the provider does not know it.
    pub fn find(&self, provider: &Provider, name: &str) -> Result<Option<Resource>> {
        self.get_many(provider, &[name])?
            .pop()
            .expect("one result per name")
    }

    /// Reads the resources named, in order: each found, not found, or its
    /// own error. Names that could not come back unchanged are refused
    /// before anything runs.
    pub fn get_many(
        &self,
        provider: &Provider,
        names: &[&str],
    ) -> Result<Vec<Result<Option<Resource>>>> {
        self.get_with_should(provider, names, &[])
    }

    /// [`Host::get_many`], telling a provider that runs commands the
    /// manifest's values of each name (`should`: its attributes, one list
    /// per name, in order, or none), which its checks need.
    pub fn get_with_should(
        &self,
        provider: &Provider,
        names: &[&str],
        should: &[&[(String, crate::types::Value)]],
    ) -> Result<Vec<Result<Option<Resource>>>> {
        for name in names {
            check_name(name).map_err(|bad| Error::Request {
                provider: provider.qualified_name(),
                message: bad.to_string(),
            })?;
        }
        invoke::convention(provider.meta.invoke).get_with_should(self, provider, names, should)
    }

    /// Changes several resources of one provider (previews them under
    /// `noop`), as one batch where the convention allows; one result per
    /// update.
    pub fn set_many(
        &self,
        provider: &Provider,
        updates: &[Update],
        noop: bool,
    ) -> Result<Vec<Result<UpdateAnswer>>> {
        invoke::convention(provider.meta.invoke).set_many(self, provider, updates, noop)
    }

    /// Refreshes one resource (restarts a service) because something it
    /// subscribes to changed; `attrs` are the manifest's.
    pub fn refresh(
        &self,
        provider: &Provider,
        name: &str,
        attrs: &[(String, crate::types::Value)],
    ) -> Result<()> {
        check_name(name).map_err(|bad| Error::Request {
            provider: provider.qualified_name(),
            message: bad.to_string(),
        })?;
        invoke::convention(provider.meta.invoke).refresh(self, provider, name, attrs)
    }
}

impl Host {
    /// A call on a target that its watchdog ended at the time limit, as
    /// the timeout it is.
    fn timed_out_there(
        &self,
        ran: Result<process::Finished>,
        label: &str,
        action: Action,
    ) -> Result<process::Finished> {
        match ran {
            Err(Error::Exit { status, .. })
                if self.config.remote.is_some() && status == Exited::Code(script::TIMED_OUT) =>
            {
                Err(Error::Timeout {
                    provider: label.to_owned(),
                    action: action.as_str().to_owned(),
                    limit: self.config.timeout,
                })
            }
            other => other,
        }
    }

    /// Counts a call's warning and error lines, and keeps its first quotes.
    fn count_problems(&self, finished: &process::Finished) {
        self.error_lines
            .fetch_add(finished.error_lines, Ordering::SeqCst);
        self.problem_lines
            .fetch_add(finished.problem_lines, Ordering::SeqCst);
        let mut quotes = self
            .problem_quotes
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if quotes.len() < 64 {
            quotes.extend(finished.problem_quotes.iter().cloned());
        }
    }
}

impl Runner for Host {
    fn run(
        &self,
        label: &str,
        program: &Path,
        mut invocation: Invocation,
        sink: &mut process::LineSink,
        idle: &mut process::Idle,
    ) -> Result<process::Finished> {
        let action = invocation.action;
        // On a target, what runs there is named once it is known.
        if self.config.remote.is_none() {
            log::debug!(
                "{label}: running {} {}",
                program.display(),
                escape(&invocation.shown.join(" "))
            );
        }
        // On a target, ssh is the program: it runs the provider's copy
        // there through the watchdog of `script::provider`, with the
        // environment made for the target; the target's time limit comes
        // first, ssh's a margin later.
        // Variables of the call (sensitive values) go into the provider's
        // environment: here, in a copy of the host's; on a target, on
        // ssh's stdin (where the simple convention has nothing else) to a
        // shell that exports them there, never on a command line.
        let remote_label;
        let local_env;
        let mut stdin = invocation.stdin.take();
        let (label, program, args, env, timeout) = match &self.config.remote {
            Some(session) => {
                let args;
                (remote_label, args) = self.remote_call(session, label, program, &invocation)?;
                if !invocation.env.is_empty() {
                    stdin = Some(script::exports(&invocation.env));
                }
                let timeout = self.config.timeout + REMOTE_MARGIN;
                (
                    remote_label.as_str(),
                    session.program(),
                    args,
                    session.env(),
                    timeout,
                )
            }
            None => {
                let env = if invocation.env.is_empty() {
                    &self.env
                } else {
                    let mut env = self.env.clone();
                    for (key, value) in &invocation.env {
                        env.set(key, value);
                    }
                    local_env = env;
                    &local_env
                };
                (label, program, invocation.args, env, self.config.timeout)
            }
        };
        let call = Call {
            label,
            program,
            action,
            args,
            env,
            timeout,
            max_answer: invocation.max_answer,
            max_line: invocation.max_line,
            stdin,
            log_stderr: action != Action::Describe,
            secrets: invocation.secrets,
            sensitive: invocation.sensitive,
            starts_daemons: invocation.starts_daemons,
        };
        let ran = match invocation.native {
            // Here, ral's native providers are served in this process.
            Some(native) if self.config.remote.is_none() => {
                process::in_process::run(&call, native.0, sink, idle)
            }
            _ => process::run(&call, sink, idle),
        };
        let finished = self.timed_out_there(ran, label, action)?;
        // A describe's stderr fails discovery of that provider instead.
        if action != Action::Describe {
            self.count_problems(&finished);
        }
        Ok(finished)
    }

    fn check(&self) -> &OutputCheck {
        &self.check
    }
}

impl Host {
    /// A call's label and ssh's arguments on `session`'s target.
    fn remote_call(
        &self,
        session: &Session,
        label: &str,
        program: &Path,
        invocation: &Invocation,
    ) -> Result<(String, Vec<String>)> {
        // A native provider's script there would only run the native
        // program beside it, with its name first: run that directly.
        let native = invocation
            .native
            .and_then(|_| Some((program.parent()?, program.file_stem()?.to_str()?)))
            .filter(|(_, name)| crate::native::find(name).is_some());
        if let (Some((_, name)), Some(why)) = (native, session.native_refused()) {
            return Err(Error::Remote {
                target: session.target.name.clone(),
                message: format!(
                    "{label}: ral's native providers ({name} is one) cannot run there: {why}"
                ),
            });
        }
        let native = native.and_then(|(dir, name)| Some((session.native_program(dir)?, name)));
        let native_name = native.as_ref().map(|(_, name)| format!(" {name}"));
        let (remote_program, args) = match native {
            Some((native_program, name)) => {
                let mut args = vec![name.to_owned()];
                args.extend(invocation.args.iter().cloned());
                (native_program, args)
            }
            None if invocation.system_command => (
                program.to_string_lossy().into_owned(),
                invocation.args.clone(),
            ),
            None => (
                session.remote_path(program).ok_or_else(|| Error::Remote {
                    target: session.target.name.clone(),
                    message: format!("{} was not copied there", program.display()),
                })?,
                invocation.args.clone(),
            ),
        };
        log::debug!(
            "{}: {label}: running {}{} {} there",
            session.target.name,
            escape(&remote_program),
            native_name.unwrap_or_default(),
            escape(&invocation.shown.join(" "))
        );
        let limit = self.config.timeout.as_secs_f64().ceil() as u64;
        // With variables for the call, a shell there reads them on stdin
        // and runs the provider with them exported.
        let (remote_program, args) = match invocation.env.is_empty() {
            true => (remote_program, args),
            false => script::with_exports(&remote_program, &args),
        };
        let command = script::provider(
            session.script_pid(),
            limit,
            invocation.starts_daemons,
            &self.remote_env,
            &remote_program,
            &args,
            session.target.sudo,
        );
        // The command line is one argument, for ssh here and `sh -c` there:
        // Linux takes at most 128 KiB for one.
        if command.len() > MAX_REMOTE_COMMAND {
            return Err(Error::Request {
                provider: format!("{}: {label}", session.target.name),
                message: format!(
                    "the call's arguments make a command line of {} bytes, more than the {} a \
                     target's shell takes in one; a json-convention provider reads them on stdin \
                     instead",
                    command.len(),
                    MAX_REMOTE_COMMAND
                ),
            });
        }
        Ok((
            format!("{}: {label}", session.target.name),
            session.call_args(command),
        ))
    }
}

/// The environment of a provider on a target: what a local one gets, with
/// the target's root, the default PATH (the caller's means nothing there)
/// and the toolkit's copy; the target's HOME is added there.
fn remote_env(config: &HostConfig, session: &Session) -> Vec<String> {
    let mut env = vec![
        format!("PATH={}", process::DEFAULT_PATH),
        "LANG=C".to_owned(),
        "LC_ALL=C".to_owned(),
        format!("RALSH_ROOT_DIR={}", config.root.display()),
        format!("RALSH_LOCK_TIMEOUT={}", config.lock_timeout.as_secs_f64()),
    ];
    if let Some(lib) = config
        .provider_lib
        .as_deref()
        .and_then(|lib| session.remote_path(lib))
    {
        env.push(format!("RALSH_PROVIDER_LIB={lib}"));
    }
    env
}

impl Describer for Host {
    fn describe(&self, label: &str, program: &Path) -> Result<String> {
        Host::describe(self, label, program)
    }

    fn path(&self) -> Option<&std::ffi::OsStr> {
        self.env.get("PATH")
    }

    fn context(&self) -> String {
        let var = |key| {
            self.env
                .get(key)
                .map(|v| v.to_string_lossy().into_owned())
                .unwrap_or_default()
        };
        format!(
            "PATH={}\0HOME={}\0RALSH_ROOT_DIR={}",
            var("PATH"),
            var("HOME"),
            var("RALSH_ROOT_DIR")
        )
    }

    fn timeout(&self) -> Duration {
        self.config.timeout
    }
}

/// Names travel as one line of `# simple` output, trimmed; a name that could
/// not come back unchanged is refused before anything runs.
pub fn check_name(name: &str) -> std::result::Result<(), BadName> {
    if name.is_empty() {
        Err(BadName::Empty)
    } else if name.trim() != name {
        Err(BadName::Whitespace(name.to_owned()))
    } else if name.chars().any(char::is_control) {
        Err(BadName::Control(name.to_owned()))
    } else {
        Ok(())
    }
}

/// Why a resource name cannot be passed to a provider.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadName {
    #[error("the resource name must not be empty")]
    Empty,
    #[error("the resource name '{}' must not start or end with whitespace", escape(.0))]
    Whitespace(String),
    #[error("the resource name '{}' must not contain control characters", escape(.0))]
    Control(String),
}

#[cfg(test)]
mod tests {
    use super::check_name;

    #[test]
    fn names_that_could_not_come_back_unchanged_are_refused() {
        assert!(check_name("web1.example").is_ok());
        assert!(check_name("a b (c) *.[x]$y").is_ok());
        for (name, why) in [
            ("", "must not be empty"),
            (" a", "must not start or end with whitespace"),
            ("a\t", "must not start or end with whitespace"),
            ("a\nb", "must not contain control characters"),
            ("a\u{7f}b", "must not contain control characters"),
        ] {
            let err = check_name(name).unwrap_err();
            assert!(err.to_string().contains(why), "{name:?}: {err}");
        }
    }
}
