//! What `ralsh` and `ral plan`/`ral apply` share to run on remote targets:
//! the options (`-t`, `-i`, `--limit`, `--ssh-config`, `--sudo`,
//! `--forks`, `--connect-timeout`, `--persist`), the targets they select, one connection per target with
//! the providers copied there, and a host per target that runs its
//! providers over that connection.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::discovery::Registry;
use crate::host::{Host, HostConfig};
use crate::remote::{self, inventory::Inventory, Bundles, Connector, SshSettings, Target};
use crate::text::escape_lines;
use anyhow::{bail, Context};
use serde_json::{Map, Value};

/// The options that choose remote targets.
#[derive(Debug, Clone, clap::Args)]
pub struct RemoteArgs {
    /// Run on TARGET over ssh instead of here: a host as ssh takes it
    /// (host, user@host, ssh://user@host:port) or, with -i, a host pattern
    /// of the inventory (hosts and groups). Comma-separated; repeatable.
    /// The native providers run there as a copy of ral-provider built for
    /// the target's machine: ral-provider-ARCH in the directory
    /// RAL_TARGET_PROGRAMS names, or beside this program (docs/remote.md,
    /// "Older and other machines").
    #[arg(short = 't', long = "target", value_name = "TARGET")]
    pub targets: Vec<String>,

    /// An Ansible YAML inventory naming the targets: all its hosts, unless
    /// -t or --limit select some. Host variables ansible_host,
    /// ansible_port, ansible_user, ansible_ssh_private_key_file,
    /// ansible_ssh_common_args, ansible_ssh_extra_args, ansible_become (as
    /// --sudo) and ral_root (as --root) apply.
    #[arg(short = 'i', long, value_name = "FILE")]
    pub inventory: Option<PathBuf>,

    /// Only the inventory's hosts that PATTERN matches (as ansible's
    /// --limit: names, groups, `a:b`, `a:&b`, `a:!b`, `web*`).
    #[arg(long, value_name = "PATTERN", requires = "inventory")]
    pub limit: Option<String>,

    /// ssh's configuration file for the targets (ssh -F FILE).
    #[arg(long, value_name = "FILE")]
    pub ssh_config: Option<PathBuf>,

    /// Run the providers on the targets through `sudo -n`.
    #[arg(long)]
    pub sudo: bool,

    /// How many targets are worked on at once (at most 10 connections are
    /// opened at a time).
    #[arg(long, value_name = "N", default_value = "20",
          value_parser = clap::value_parser!(u16).range(1..=1000))]
    pub forks: u16,

    /// How long ssh may take to connect and log in to a target (ssh's
    /// ConnectTimeout); a target whose session gives no answer within
    /// this and 20 seconds more fails alone, as unreachable.
    #[arg(long, value_name = "SECONDS", default_value = "10",
          value_parser = clap::value_parser!(u16).range(1..))]
    pub connect_timeout: u16,

    /// Keep each target's connection open SECONDS after the run, so that
    /// the next run within that time reuses it instead of logging in
    /// again (as Ansible's ControlPersist); `ral connections` lists and
    /// closes them. 0 is --no-persist.
    #[arg(long, value_name = "SECONDS", env = "RAL_SSH_PERSIST", default_value = "60",
          value_parser = crate::cli::load::parse_persist)]
    pub persist: std::time::Duration,

    /// Close every connection when the run ends: nothing is left running
    /// (wins over --persist).
    #[arg(long)]
    pub no_persist: bool,
}

impl RemoteArgs {
    /// Whether the command runs on remote targets.
    pub fn is_remote(&self) -> bool {
        !self.targets.is_empty() || self.inventory.is_some()
    }

    /// The targets, each once, in order; `--root` (when not `/`) and
    /// `--sudo` apply where the inventory sets nothing.
    pub fn select(&self, root: &Path) -> anyhow::Result<Vec<Target>> {
        let inventory = match &self.inventory {
            Some(file) => Some(Inventory::load(file)?),
            None => None,
        };
        let mut targets = remote::select(&self.targets, inventory.as_ref(), self.limit.as_deref())?;
        if targets.is_empty() {
            bail!("no target selected");
        }
        for target in &mut targets {
            target.sudo |= self.sudo;
            // ssh runs in `/`: a relative key file means the caller's
            // directory, as for ansible.
            if let Some(key) = &target.identity {
                target.identity = Some(std::path::absolute(key)?);
            }
            if target.root.is_none() && root != Path::new("/") {
                target.root = Some(root.to_owned());
            }
            if let Some(root) = &target.root {
                if !root.is_absolute() {
                    bail!(
                        "{}: the root {} must be an absolute path on the target",
                        target.name,
                        root.display()
                    );
                }
            }
        }
        Ok(targets)
    }
}

/// The connections of a run and what they carry.
pub struct Fleet {
    pub targets: Vec<Target>,
    pub forks: usize,
    connector: Connector,
    bundles: Bundles,
}

impl Fleet {
    /// Gets ready to connect: the files of every provider `registry` holds
    /// (with their directories' helpers), the toolkit and each data
    /// directory's custom facts (`facts.d`, whose programs run on the
    /// targets) make the bundle.
    pub fn new(
        args: &RemoteArgs,
        targets: Vec<Target>,
        local: &Host,
        registry: &Registry,
    ) -> anyhow::Result<Fleet> {
        let mut dirs: Vec<PathBuf> = registry
            .providers()
            .iter()
            .filter_map(|provider| provider.source.parent().map(Path::to_owned))
            .collect();
        dirs.extend(local.config().provider_lib.clone());
        dirs.extend(crate::facts::custom::dirs(registry.data_dirs()));
        // Native providers run on a target through their program, which
        // travels beside their scripts.
        let native_dir = registry
            .providers()
            .iter()
            .find(|provider| provider.native.is_some())
            .and_then(|provider| provider.source.parent());
        let program = match native_dir {
            Some(_) => Some(crate::native::program()?),
            None => None,
        };
        let native = native_dir.map(Path::to_owned).zip(program);
        let bundles = Bundles::new(dirs, native)?;
        // ssh runs in `/`: relative paths mean the caller's directory.
        let config = args
            .ssh_config
            .as_deref()
            .map(std::path::absolute)
            .transpose()?;
        let persist = (!args.no_persist && !args.persist.is_zero()).then_some(args.persist);
        let connector = Connector::new(SshSettings {
            config,
            persist,
            connect_timeout: std::time::Duration::from_secs(args.connect_timeout.into()),
            ..SshSettings::default()
        })?;
        Ok(Fleet {
            targets,
            forks: usize::from(args.forks),
            connector,
            bundles,
        })
    }

    /// Connects to `target`; the host then runs its providers there, and
    /// the connection closes when the host is dropped (it holds the only
    /// reference to the session).
    pub fn connect(&self, target: &Target, local: &Host) -> crate::error::Result<Host> {
        let session = Arc::new(self.connector.open(target, &self.bundles)?);
        if session.uploaded() {
            log::info!(
                "{}: copied {} provider files ({})",
                target.name,
                session.bundle().len(),
                session.bundle().digest()
            );
        }
        let config = HostConfig {
            root: target.root.clone().unwrap_or_else(|| PathBuf::from("/")),
            remote: Some(session),
            ..local.config().clone()
        };
        Ok(Host::new(config))
    }
}

/// `--ssh-config` must name a file (ssh would otherwise fail each target
/// with the same message).
pub fn check_files(args: &RemoteArgs) -> anyhow::Result<()> {
    if let Some(config) = &args.ssh_config {
        std::fs::metadata(config).with_context(|| format!("--ssh-config {}", config.display()))?;
    }
    Ok(())
}

/// What one target's run gave: its outcome (`T`), its output as the
/// command prints it here, and why it failed as a whole (no connection, a
/// command error).
/// How `ral apply -t` rolls out: all targets at once (`--forks` at a
/// time), or `serial` at a time.
#[derive(Debug, Clone, Copy, Default)]
pub struct Rollout {
    pub serial: Option<usize>,
    pub max_fail_percentage: u8,
}

pub struct TargetRun<'t, T> {
    pub name: &'t str,
    pub outcome: T,
    pub out: Vec<u8>,
    pub error: Option<String>,
}

impl Fleet {
    /// Runs `work` on every target (connected, with its host), `--forks`
    /// at a time, in the targets' order; a target that could not be
    /// connected, whose work failed, or that an interrupt kept from
    /// starting gets `failed` with the error.
    pub fn run_all<'t, T: Send + Clone + Sync>(
        &'t self,
        local: &Host,
        failed: T,
        work: impl Fn(&Target, &Host, &mut Vec<u8>) -> anyhow::Result<T> + Sync,
    ) -> Vec<TargetRun<'t, T>> {
        self.run_on(&self.targets, local, failed, &work)
    }

    /// [`Fleet::run_all`] in batches of `rollout.serial` targets, each
    /// batch over before the next starts; once more than
    /// `rollout.max_fail_percentage` percent of a batch failed (`failure`
    /// tells a failed outcome), the targets after it are not run.
    pub fn roll_out<'t, T: Send + Clone + Sync>(
        &'t self,
        rollout: Rollout,
        local: &Host,
        failed: T,
        failure: impl Fn(&T) -> bool,
        work: impl Fn(&Target, &Host, &mut Vec<u8>) -> anyhow::Result<T> + Sync,
    ) -> Vec<TargetRun<'t, T>> {
        let Some(serial) = rollout.serial else {
            return self.run_all(local, failed, work);
        };
        let mut runs: Vec<TargetRun<'t, T>> = Vec::new();
        let mut stopped: Option<String> = None;
        for (number, batch) in self.targets.chunks(serial.max(1)).enumerate() {
            if let Some(why) = &stopped {
                runs.extend(batch.iter().map(|target| TargetRun {
                    name: &target.name,
                    outcome: failed.clone(),
                    out: Vec::new(),
                    error: Some(why.clone()),
                }));
                continue;
            }
            let done = self.run_on(batch, local, failed.clone(), &work);
            let failures = done
                .iter()
                .filter(|run| run.error.is_some() || failure(&run.outcome))
                .count();
            if failures * 100 > usize::from(rollout.max_fail_percentage) * batch.len() {
                stopped = Some(format!(
                    "not run: the rollout stopped after batch {} ({failures} of its {} targets \
                     failed; --max-fail-percentage {})",
                    number + 1,
                    batch.len(),
                    rollout.max_fail_percentage
                ));
            }
            runs.extend(done);
        }
        runs
    }

    fn run_on<'t, T: Send + Clone + Sync>(
        &self,
        targets: &'t [Target],
        local: &Host,
        failed: T,
        work: &(impl Fn(&Target, &Host, &mut Vec<u8>) -> anyhow::Result<T> + Sync),
    ) -> Vec<TargetRun<'t, T>> {
        let results = remote::fan_out(targets, self.forks, |target| {
            let mut out = Vec::new();
            let result = self
                .connect(target, local)
                .map_err(anyhow::Error::new)
                .and_then(|host| work(target, &host, &mut out));
            match result {
                Ok(outcome) => (outcome, out, None),
                Err(e) => (failed.clone(), out, Some(format!("{e:#}"))),
            }
        });
        // After an interrupt the binary ends here, before anything is shown.
        crate::process::exit_if_interrupted();
        targets
            .iter()
            .zip(results)
            .map(|(target, result)| {
                let (outcome, out, error) = result.unwrap_or_else(|| {
                    (
                        failed.clone(),
                        Vec::new(),
                        Some("not run: interrupted".to_owned()),
                    )
                });
                TargetRun {
                    name: &target.name,
                    outcome,
                    out,
                    error,
                }
            })
            .collect()
    }
}

/// Shows the runs on stdout (unless `quiet`): each target's output under a
/// `== NAME ==` line, or, with `json`, `{"targets": [{"target": NAME,
/// ...the usual document...}]}` with an `error` member for a target that
/// failed as a whole; then each such error on stderr after `program: error:`.
pub fn report<T>(
    runs: &[TargetRun<T>],
    json: bool,
    quiet: bool,
    program: &str,
) -> anyhow::Result<()> {
    if !quiet {
        // The exit status tells each target's outcome, read or not.
        let mut stdout = super::unread::stdout();
        if json {
            print_json(&mut stdout, runs)?;
        } else {
            print_grouped(&mut stdout, runs)?;
        }
        stdout.flush()?;
    }
    for run in runs {
        if let Some(error) = &run.error {
            eprintln!(
                "{program}: error: {}",
                escape_lines(&named(run.name, error))
            );
        }
    }
    Ok(())
}

/// `error`, starting with the target's name.
fn named(name: &str, error: &str) -> String {
    match error
        .strip_prefix(name)
        .is_some_and(|rest| rest.starts_with(": "))
    {
        true => error.to_owned(),
        false => format!("{name}: {error}"),
    }
}

fn print_grouped<T>(out: &mut dyn Write, runs: &[TargetRun<T>]) -> std::io::Result<()> {
    for run in runs {
        writeln!(out, "== {} ==", run.name)?;
        out.write_all(&run.out)?;
        if let Some(error) = &run.error {
            writeln!(out, "error: {}", escape_lines(error))?;
        }
    }
    Ok(())
}

fn print_json<T>(out: &mut dyn Write, runs: &[TargetRun<T>]) -> anyhow::Result<()> {
    let mut entries = Vec::new();
    for run in runs {
        let mut entry = Map::new();
        entry.insert("target".to_owned(), Value::from(run.name));
        if !run.out.is_empty() {
            match serde_json::from_slice::<Value>(&run.out)? {
                Value::Object(document) => entry.extend(document),
                other => {
                    entry.insert("result".to_owned(), other);
                }
            }
        }
        if let Some(error) = &run.error {
            entry.insert("error".to_owned(), serde_json::json!({ "message": error }));
        }
        entries.push(Value::Object(entry));
    }
    // One line, as -j prints without -t.
    let document = serde_json::to_string(&serde_json::json!({ "targets": entries }))?;
    // An io::Error, so a closed stdout reads as one.
    writeln!(out, "{document}")?;
    Ok(())
}
