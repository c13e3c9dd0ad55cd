//! What `ralsh` and `ral plan`/`ral apply` share to run on remote targets:
//! the options (`-t`, `-i`, `--limit`, `--ssh-config`, `--sudo`,
//! `--forks`), the targets they select, one connection per target with
//! the providers copied there, and a host per target that runs its
//! providers over that connection.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, Context};
use ral::discovery::Registry;
use ral::remote::{self, inventory::Inventory, Bundle, Connector, Session, SshSettings, Target};
use ral::{Host, HostConfig};

/// The options that choose remote targets.
#[derive(Debug, Clone, clap::Args)]
pub struct RemoteArgs {
    /// Run on TARGET over ssh instead of here: a host as ssh takes it
    /// (host, user@host, ssh://user@host:port) or, with -i, a host pattern
    /// of the inventory (hosts and groups). Comma-separated; repeatable.
    #[arg(short = 't', long = "target", value_name = "TARGET")]
    pub targets: Vec<String>,

    /// An Ansible YAML inventory naming the targets: all its hosts, unless
    /// -t or --limit select some. Host variables ansible_host,
    /// ansible_port, ansible_user, ansible_ssh_private_key_file,
    /// ansible_become (as --sudo) and ral_root (as --root) apply.
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
    bundle: Arc<Bundle>,
}

impl Fleet {
    /// Gets ready to connect: the files of every provider `registry` holds
    /// (with their directories' helpers) and the toolkit make the bundle.
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
        let bundle = Bundle::collect(&dirs)?;
        // ssh runs in `/`: relative paths mean the caller's directory.
        let config = args
            .ssh_config
            .as_deref()
            .map(std::path::absolute)
            .transpose()?;
        let connector = Connector::new(SshSettings {
            config,
            ..SshSettings::default()
        })?;
        Ok(Fleet {
            targets,
            forks: usize::from(args.forks),
            connector,
            bundle: Arc::new(bundle),
        })
    }

    /// Connects to `target`; the host then runs its providers there.
    pub fn connect(
        &self,
        target: &Target,
        local: &Host,
    ) -> ral::error::Result<(Host, Arc<Session>)> {
        let session = Arc::new(self.connector.open(target, &self.bundle)?);
        if session.uploaded() {
            log::info!(
                "{}: copied {} provider files ({})",
                target.name,
                self.bundle.len(),
                self.bundle.digest()
            );
        }
        let config = HostConfig {
            root: target.root.clone().unwrap_or_else(|| PathBuf::from("/")),
            remote: Some(Arc::clone(&session)),
            ..local.config().clone()
        };
        Ok((Host::new(config), session))
    }
}

/// The whole text of an error, causes included, as one line each.
pub fn message(error: &anyhow::Error) -> String {
    format!("{error:#}")
}

/// `--ssh-config` must name a file (ssh would otherwise fail each target
/// with the same message).
pub fn check_files(args: &RemoteArgs) -> anyhow::Result<()> {
    if let Some(config) = &args.ssh_config {
        std::fs::metadata(config).with_context(|| format!("--ssh-config {}", config.display()))?;
    }
    Ok(())
}
