//! The host: runs provider actions and turns their answers into typed
//! resources and changes. The simple convention is handled here, the json
//! convention in [`json`].

mod json;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use crate::check::{OutputCheck, Raw};
use crate::error::{Error, Result};
use crate::invoke::simple::{self, ListParser, OutputError, RawResource, UpdateParser};
use crate::metadata::{Action, Invoke, REDACTED};
use crate::process::{self, Budget, Call, ProviderEnv, MAX_ANSWER, MAX_LINE};
use crate::provider::Provider;
use crate::resource::{Change, Resource};
use crate::text::{escape, escape_lines};
use crate::types::Value;
use crate::update::Plan;

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
        }
    }
}

/// Runs providers and keeps the counters that decide the final exit status.
#[derive(Debug)]
pub struct Host {
    config: HostConfig,
    env: ProviderEnv,
    error_lines: AtomicUsize,
    problem_lines: AtomicUsize,
    check: OutputCheck,
}

/// What an update answered, typed.
#[derive(Debug, Clone, PartialEq)]
pub struct UpdateAnswer {
    pub changes: Vec<Change>,
    /// The provider asked the host to derive changes it did not list.
    pub derive: bool,
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
        let strict = config.strict;
        Host {
            config,
            env,
            error_lines: AtomicUsize::new(0),
            problem_lines: AtomicUsize::new(0),
            check: OutputCheck::new(strict),
        }
    }

    pub fn env(&self) -> &ProviderEnv {
        &self.env
    }

    /// The time limit of one call.
    pub fn timeout(&self) -> Duration {
        self.config.timeout
    }

    /// How many error-level stderr lines providers wrote so far.
    pub fn provider_error_lines(&self) -> usize {
        self.error_lines.load(Ordering::SeqCst)
    }

    /// How many warning and error lines providers wrote on stderr so far
    /// (describe excluded).
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

    fn call(
        &self,
        label: &str,
        program: &Path,
        invocation: Invocation,
        sink: &mut process::LineSink,
    ) -> Result<process::Finished> {
        self.call_paced(label, program, invocation, sink, &mut || Ok(()))
    }

    /// [`Host::call`] with an [`process::Idle`] callback.
    fn call_paced(
        &self,
        label: &str,
        program: &Path,
        invocation: Invocation,
        sink: &mut process::LineSink,
        idle: &mut process::Idle,
    ) -> Result<process::Finished> {
        let action = invocation.action;
        let describing = action == Action::Describe;
        log::debug!(
            "{label}: running {} {}",
            program.display(),
            escape(&invocation.shown.join(" "))
        );
        let call = Call {
            label,
            program,
            action: action.as_str(),
            args: invocation.args,
            env: &self.env,
            timeout: self.config.timeout,
            max_answer: invocation.max_answer,
            max_line: invocation.max_line,
            stdin: invocation.stdin,
            log_stderr: !describing,
            secrets: invocation.secrets,
            sensitive: invocation.sensitive,
            starts_daemons: invocation.starts_daemons,
        };
        let finished = process::run(&call, sink, idle)?;
        // A describe's stderr fails discovery of that provider instead.
        if !describing {
            self.error_lines
                .fetch_add(finished.error_lines, Ordering::SeqCst);
            self.problem_lines
                .fetch_add(finished.problem_lines, Ordering::SeqCst);
        }
        Ok(finished)
    }

    /// Runs `X.prov ral_action=describe` and returns its YAML. Any output on
    /// stderr counts as failure, as a describe must be clean.
    pub fn describe(&self, label: &str, program: &Path) -> Result<String> {
        let mut text = String::new();
        let finished = self.call(
            label,
            program,
            Invocation::plain(
                Action::Describe,
                simple::arguments(Action::Describe, None, [], false),
            ),
            &mut |line| {
                text.push_str(line);
                text.push('\n');
                Ok(Budget::Continue)
            },
        )?;
        if finished.stderr_lines > 0 {
            return Err(Error::Protocol {
                provider: label.to_owned(),
                action: "describe".to_owned(),
                message: format!(
                    "wrote to stderr, which a describe must not: {}",
                    finished.stderr_tail.join(" / ")
                ),
            });
        }
        Ok(text)
    }

    /// Streams every resource to `each` as the provider lists it.
    pub fn list(
        &self,
        provider: &Provider,
        each: &mut dyn FnMut(Resource) -> Result<()>,
    ) -> Result<()> {
        self.list_paced(provider, each, &mut || Ok(()))
    }

    /// [`Host::list`], calling `idle` whenever the resources listed so far
    /// were handed over and the provider has not written more yet (when
    /// buffered output should be flushed).
    pub fn list_paced(
        &self,
        provider: &Provider,
        each: &mut dyn FnMut(Resource) -> Result<()>,
        idle: &mut process::Idle,
    ) -> Result<()> {
        if provider.meta.invoke == Invoke::Json {
            return self.json_list(provider, each);
        }
        let label = provider.qualified_name();
        let mut parser = ListParser::default();
        let fail = |e| output_error(&label, Action::List, e);
        self.call_paced(
            &label,
            &provider.source,
            Invocation::to(
                provider,
                Action::List,
                simple::arguments(Action::List, None, [], false),
            ),
            &mut |line| match parser.feed(line).map_err(fail)? {
                Some(raw) => {
                    each(self.typed(provider, Action::List, raw)?)?;
                    Ok(Budget::Reset)
                }
                None => Ok(Budget::Continue),
            },
            idle,
        )?;
        if let Some(raw) = parser.finish().map_err(fail)? {
            each(self.typed(provider, Action::List, raw)?)?;
        }
        Ok(())
    }

    /// Finds one resource; `None` when the provider does not know it
    /// (`ral_unknown: true`, or a list without it when find is missing).
    pub fn find(&self, provider: &Provider, name: &str) -> Result<Option<Resource>> {
        check_name(name).map_err(|message| Error::Request {
            provider: provider.qualified_name(),
            message,
        })?;
        if provider.meta.invoke == Invoke::Json {
            return self.json_find(provider, name);
        }
        if !provider.meta.supports(Action::Find) {
            let mut found = None;
            self.list(provider, &mut |resource| {
                if resource.name == name && found.is_none() {
                    found = Some(resource);
                }
                Ok(())
            })?;
            return Ok(found);
        }
        let label = provider.qualified_name();
        let mut parser = ListParser::default();
        let mut resources = Vec::new();
        let fail = |e| output_error(&label, Action::Find, e);
        self.call(
            &label,
            &provider.source,
            Invocation::to(
                provider,
                Action::Find,
                simple::arguments(Action::Find, Some(name), [], false),
            ),
            &mut |line| {
                resources.extend(parser.feed(line).map_err(fail)?);
                Ok(Budget::Continue)
            },
        )?;
        resources.extend(parser.finish().map_err(fail)?);
        let mut answer = None;
        for raw in resources {
            if raw.name() != name {
                return Err(fail(OutputError::Protocol(format!(
                    "find for '{}' answered with '{}'",
                    escape(name),
                    escape(raw.name())
                ))));
            }
            if answer.is_some() {
                return Err(fail(OutputError::Protocol(format!(
                    "find for '{}' answered with several resources",
                    escape(name)
                ))));
            }
            answer = Some(raw);
        }
        answer
            .filter(|raw| raw.marker("ral_unknown") != Some("true"))
            .map(|raw| self.typed(provider, Action::Find, raw))
            .transpose()
    }

    /// Runs the updates of several plans. A simple provider gets one call
    /// per resource; each result stands on its own.
    pub fn update_batch(
        &self,
        provider: &Provider,
        plans: &[&Plan],
        noop: bool,
    ) -> Result<Vec<Result<UpdateAnswer>>> {
        if provider.meta.invoke == Invoke::Json {
            return self.json_update_batch(provider, plans, noop);
        }
        Ok(plans
            .iter()
            .map(|plan| {
                self.update_with(
                    provider,
                    &plan.name,
                    &plan.should,
                    noop,
                    plan_secrets(provider, plan),
                )
            })
            .collect())
    }

    /// Calls update with exactly the given attributes.
    pub fn update(
        &self,
        provider: &Provider,
        name: &str,
        attrs: &[(String, Value)],
        noop: bool,
    ) -> Result<UpdateAnswer> {
        let secrets = secrets_of(provider, attrs.iter().map(|(k, v)| (k, v)));
        self.update_with(provider, name, attrs, noop, secrets)
    }

    fn update_with(
        &self,
        provider: &Provider,
        name: &str,
        attrs: &[(String, Value)],
        noop: bool,
        secrets: Vec<String>,
    ) -> Result<UpdateAnswer> {
        let label = provider.qualified_name();
        if !provider.meta.supports(Action::Update) {
            return Err(Error::Unsupported {
                provider: label,
                action: "update".to_owned(),
            });
        }
        let mut parser = UpdateParser::new(name);
        let fail = |e| output_error(&label, Action::Update, redacted(e, &secrets));
        let args = simple::arguments(
            Action::Update,
            Some(name),
            attrs.iter().map(|(k, v)| (k.as_str(), v)),
            noop,
        );
        let redacted_value = Value::String(REDACTED.to_owned());
        let shown = simple::arguments(
            Action::Update,
            Some(name),
            attrs.iter().map(|(k, v)| {
                let sensitive = provider.attribute(k).is_some_and(|a| a.sensitive);
                (k.as_str(), if sensitive { &redacted_value } else { v })
            }),
            noop,
        );
        self.call(
            &label,
            &provider.source,
            Invocation {
                shown,
                secrets: secrets.clone(),
                ..Invocation::to(provider, Action::Update, args)
            },
            &mut |line| {
                parser.feed(line).map_err(fail)?;
                Ok(Budget::Continue)
            },
        )?;
        let report = parser.finish().map_err(fail)?;
        let value = |attr: &str, text: &str| {
            self.check
                .value(provider, Action::Update, name, attr, Raw::Text(text))
        };
        let changes = report
            .changes
            .into_iter()
            .map(|change| {
                Ok(Change {
                    is: value(&change.attr, &change.is)?,
                    was: change
                        .was
                        .map(|was| value(&change.attr, &was))
                        .transpose()?,
                    attr: change.attr,
                })
            })
            .collect::<Result<_>>()?;
        Ok(UpdateAnswer {
            changes,
            derive: report.derive,
        })
    }

    fn typed(&self, provider: &Provider, action: Action, raw: RawResource) -> Result<Resource> {
        self.check.resource(
            provider,
            action,
            raw.name(),
            raw.attrs().map(|(k, v)| (k, Raw::Text(v))),
        )
    }
}

/// Names travel as one line of `# simple` output, trimmed; a name that could
/// not come back unchanged is refused before anything runs.
pub fn check_name(name: &str) -> std::result::Result<(), String> {
    if name.is_empty() {
        return Err("the resource name must not be empty".to_owned());
    }
    if name.trim() != name {
        return Err(format!(
            "the resource name '{}' must not start or end with whitespace",
            escape(name)
        ));
    }
    if name.chars().any(char::is_control) {
        return Err(format!(
            "the resource name '{}' must not contain control characters",
            escape(name)
        ));
    }
    Ok(())
}

/// What one provider call is given, and how it may be shown.
struct Invocation {
    action: Action,
    args: Vec<String>,
    /// The JSON document for stdin (json convention).
    stdin: Option<Vec<u8>>,
    max_line: usize,
    max_answer: usize,
    /// The arguments as the debug log shows them (sensitive values redacted).
    shown: Vec<String>,
    /// Sensitive values, redacted from everything the provider says.
    secrets: Vec<String>,
    /// The provider's sensitive attributes.
    sensitive: Vec<String>,
    /// Processes the call leaves running are left alone: an update of a
    /// provider that starts daemons.
    starts_daemons: bool,
}

impl Invocation {
    fn plain(action: Action, args: Vec<String>) -> Invocation {
        Invocation {
            action,
            shown: args.clone(),
            args,
            stdin: None,
            max_line: MAX_LINE,
            max_answer: MAX_ANSWER,
            secrets: Vec::new(),
            sensitive: Vec::new(),
            starts_daemons: false,
        }
    }

    /// A call of `provider`, whose sensitive attributes are redacted from
    /// its structured log lines.
    fn to(provider: &Provider, action: Action, args: Vec<String>) -> Invocation {
        Invocation {
            sensitive: provider
                .meta
                .attributes
                .values()
                .filter(|a| a.sensitive)
                .map(|a| a.name.clone())
                .collect(),
            starts_daemons: provider.meta.starts_daemons && action == provider.meta.update_action(),
            ..Invocation::plain(action, args)
        }
    }
}

/// The text of every sensitive value among `attrs` (whole, and each
/// element of an array or hash), longest first so that a secret holding
/// another is taken out whole.
fn secrets_of<'a>(
    provider: &Provider,
    attrs: impl IntoIterator<Item = (&'a String, &'a Value)>,
) -> Vec<String> {
    fn texts(value: &Value, out: &mut Vec<String>) {
        out.push(value.to_text());
        match value {
            Value::Array(items) => items.iter().for_each(|item| texts(item, out)),
            Value::Hash(map) => map.values().for_each(|item| texts(item, out)),
            _ => {}
        }
    }
    let mut secrets = Vec::new();
    for (key, value) in attrs {
        if provider.attribute(key).is_some_and(|a| a.sensitive) {
            texts(value, &mut secrets);
        }
    }
    secrets.retain(|text| !text.is_empty());
    secrets.sort_by_key(|text| std::cmp::Reverse(text.len()));
    secrets.dedup();
    secrets
}

/// The sensitive values of a plan: the new ones and the current ones.
fn plan_secrets(provider: &Provider, plan: &Plan) -> Vec<String> {
    // secrets_of already orders them longest first, without repeats.
    secrets_of(
        provider,
        plan.should
            .iter()
            .map(|(k, v)| (k, v))
            .chain(plan.state.attrs.iter()),
    )
}

/// An output error with the secrets of the call taken out.
fn redacted(error: OutputError, secrets: &[String]) -> OutputError {
    match error {
        OutputError::Protocol(message) => OutputError::Protocol(process::redact(&message, secrets)),
        OutputError::Reported(message) => OutputError::Reported(process::redact(&message, secrets)),
        OutputError::Call(mut error) => {
            error.message = process::redact(&error.message, secrets);
            OutputError::Call(error)
        }
    }
}

fn output_error(label: &str, action: Action, error: OutputError) -> Error {
    match error {
        OutputError::Protocol(message) => Error::Protocol {
            provider: label.to_owned(),
            action: action.as_str().to_owned(),
            message,
        },
        OutputError::Reported(message) => Error::Reported {
            provider: label.to_owned(),
            action: action.as_str().to_owned(),
            message: escape_lines(&message),
            kind: None,
        },
        OutputError::Call(error) => Error::Reported {
            provider: label.to_owned(),
            action: action.as_str().to_owned(),
            message: escape_lines(&error.message),
            kind: Some(escape(&error.kind)),
        },
    }
}
