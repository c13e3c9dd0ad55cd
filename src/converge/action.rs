//! Running a model plugin's callback or remote task at its turn in a plan.
//! A callback is `PLUGIN ral_action=callback`, run here (where ral runs,
//! as LITP runs callbacks on its management server); a remote task is its
//! argv, run by the plan's host like a provider (no shell, the scrubbed
//! environment, the time limit, its output logged, redacted).

use std::path::Path;

use serde_json::{Map, Value as Json};

use crate::host::{Host, HostConfig};
use crate::invoke::{Invocation, Runner};
use crate::metadata::Action;
use crate::plugin::{self, TaskKind};
use crate::plugin_meta::PluginCall;
use crate::process::Budget;

use super::catalog::{Catalog, Item};
use super::expand::FromPlugin;

/// Runs the callback or command of `item`; the error says why it failed.
pub fn run(host: &Host, catalog: &Catalog, item: &Item) -> Result<(), String> {
    let from = item
        .from_plugin
        .as_deref()
        .ok_or_else(|| "internal error: not a plugin's task".to_owned())?;
    let (FromPlugin::Task { plugin, task, .. }, Some(run)) = (from, catalog.plugins.as_deref())
    else {
        return Err("internal error: not a plugin's task".to_owned());
    };
    match &task.kind {
        TaskKind::Callback {
            callback,
            args,
            kwargs,
        } => {
            let plugin = run
                .plugin(plugin)
                .ok_or_else(|| format!("the plugin {plugin} is not found"))?;
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
            .map_err(|e| e.to_string())
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
            .map_err(|e| e.to_string())
        }
        TaskKind::Config { .. } => Err("internal error: a config task is a resource".to_owned()),
    }
}

/// `program` as it is when it names a file, else the executable of that
/// name on the PATH providers get: the command runs without a shell, and
/// a relative name would be looked for in the call's working directory.
fn on_path(program: &str) -> Result<std::path::PathBuf, String> {
    if program.contains('/') {
        return Ok(program.into());
    }
    let env = crate::process::ProviderEnv::scrubbed(Path::new("/"));
    let path = env.get("PATH").unwrap_or_default();
    std::env::split_paths(path)
        .map(|dir| dir.join(program))
        .find(|candidate| crate::provider::is_executable(candidate))
        .ok_or_else(|| {
            format!(
                "the command '{}' is not on the PATH ({})",
                crate::text::escape(program),
                path.to_string_lossy()
            )
        })
}
