//! Running a model plugin's callback or remote task at its turn in a plan.
//! A callback is `PLUGIN ral_action=callback`, run here (where ral runs,
//! as LITP runs callbacks on its management server); a remote task is its
//! argv, run by the plan's host like a provider (no shell, the scrubbed
//! environment, the time limit, its output logged, redacted).

use std::path::Path;

use serde_json::{Map, Value as Json};

use crate::error::Error;
use crate::host::{Host, HostConfig};
use crate::invoke::{Invocation, Runner};
use crate::metadata::Action;
use crate::plugin::{self, TaskKind};
use crate::plugin_meta::PluginCall;
use crate::process::Budget;

use super::catalog::{Catalog, Item};
use super::from_plugin::FromPlugin;

/// Why a callback or a command failed, or did not start.
#[derive(Debug, thiserror::Error)]
pub enum ActionError {
    /// The item is no callback or command of a plugin: a plan built
    /// wrongly, never a user's mistake.
    #[error("internal error: {item} is not a plugin's callback or command")]
    NotAnAction { item: String },
    /// The plan names a plugin the run has not loaded.
    #[error("the plugin {plugin} is not found")]
    NoPlugin { plugin: String },
    /// A command named without a `/` that no directory of the PATH holds.
    #[error("the command '{}' is not on the PATH ({path})", crate::text::escape(.command))]
    NotOnPath { command: String, path: String },
    /// The task's thread panicked: a bug, reported as the task's failure.
    #[error("internal error: the task's thread panicked")]
    Panicked,
    /// The callback's call or the command's run failed (its exit, its
    /// time limit, what the plugin said).
    #[error(transparent)]
    Run(Error),
}

/// Runs the callback or command of `item`; the error says why it failed.
pub fn run(host: &Host, catalog: &Catalog, item: &Item) -> Result<(), ActionError> {
    let not_an_action = || ActionError::NotAnAction {
        item: item.name().to_owned(),
    };
    let from = item.from_plugin.as_deref().ok_or_else(not_an_action)?;
    let (FromPlugin::Task { plugin, task, .. }, Some(run)) = (from, catalog.plugins.as_deref())
    else {
        return Err(not_an_action());
    };
    match &task.kind {
        TaskKind::Callback {
            callback,
            args,
            kwargs,
        } => {
            let plugin = run.plugin(plugin).ok_or_else(|| ActionError::NoPlugin {
                plugin: plugin.clone(),
            })?;
            let mut extra = Map::new();
            extra.insert("callback".to_owned(), Json::from(callback.as_str()));
            extra.insert("args".to_owned(), Json::Array(args.clone()));
            extra.insert("kwargs".to_owned(), Json::Object(kwargs.clone()));
            let local;
            let runner: &dyn Runner = match host.config().remote {
                None => host,
                Some(_) => {
                    local = Host::new(HostConfig {
                        remote: None,
                        ..host.config().clone()
                    });
                    &local
                }
            };
            plugin::call(
                runner,
                plugin,
                PluginCall::Callback,
                &run.input(plugin, extra),
            )
            .map(|_| ())
            .map_err(ActionError::Run)
        }
        TaskKind::Remote { command } => {
            let label = format!("plugin::{plugin}");
            // A command may (re)start a service, as LITP's remote tasks
            // do: what it leaves running outlives it.
            let secrets = run.secrets.clone();
            let invocation = Invocation {
                secrets: secrets.clone(),
                system_command: true,
                starts_daemons: true,
                ..Invocation::plain(Action::Plugin("command"), command[1..].to_vec())
            };
            let program = match host.config().remote {
                Some(_) => command[0].clone().into(),
                None => on_path(&command[0])?,
            };
            host.run(
                &label,
                &program,
                invocation,
                // Its output is logged as its stderr is: redacted.
                &mut |line| {
                    let line = crate::secrets::redact(line, &secrets);
                    log::info!(target: &label, "{}: {}", task.item, crate::text::escape(&line));
                    Ok(Budget::Continue)
                },
                &mut || Ok(()),
            )
            .map(|_| ())
            .map_err(ActionError::Run)
        }
        // A config task is a resource, run by its provider.
        TaskKind::Config { .. } => Err(not_an_action()),
    }
}

/// `program` as it is when it names a file, else the executable of that
/// name on the PATH providers get: the command runs without a shell, and
/// a relative name would be looked for in the call's working directory.
fn on_path(program: &str) -> Result<std::path::PathBuf, ActionError> {
    if program.contains('/') {
        return Ok(program.into());
    }
    let env = crate::process::ProviderEnv::scrubbed(Path::new("/"));
    let path = env.get("PATH").unwrap_or_default();
    std::env::split_paths(path)
        .map(|dir| dir.join(program))
        .find(|candidate| crate::provider::is_executable(candidate))
        .ok_or_else(|| ActionError::NotOnPath {
            command: program.to_owned(),
            path: path.to_string_lossy().into_owned(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_on_no_directory_of_the_path_is_named_with_that_path() {
        let error = on_path("no-such-command-\u{1b}").unwrap_err();
        let ActionError::NotOnPath { command, path } = &error else {
            panic!("{error:?}");
        };
        assert_eq!(command, "no-such-command-\u{1b}");
        assert!(path.contains("/usr/bin"), "{path}");
        assert_eq!(
            error.to_string(),
            format!("the command 'no-such-command-\\u{{1b}}' is not on the PATH ({path})")
        );
        assert_eq!(on_path("./x").unwrap(), Path::new("./x"));
        assert!(on_path("sh").unwrap().is_absolute());
    }
}
