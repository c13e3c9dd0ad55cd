//! `ral plan -t`/`ral apply -t`: the same manifests on every target, one
//! plan per target, each with its own state store on this machine, named
//! from what the target really is (the user, host name and port ssh uses,
//! and the root: `STATE_DIR/USER@HOST:PORT%2FROOT.db`); the output grouped
//! under each target's name or gathered in `{"targets": [...]}`, and the
//! worst outcome.

use std::path::{Path, PathBuf};

use anyhow::Context;
use ral::remote::Target;
use ral::store::{Identity, Location};
use sha2::{Digest, Sha256};

use crate::converge::{self, ConvergeArgs, Ending, Input, Mode, StoreAt};
use crate::load;
use crate::remote::{self, Fleet};

pub fn execute(args: &ConvergeArgs, mode: Mode, input: &Input) -> anyhow::Result<Ending> {
    // An interrupt between calls is only noted too, so that the masters
    // are ended and the control directory removed before ral ends.
    ral::process::forward_interrupts_deferred();
    remote::check_files(&args.remote)?;
    let targets = args.remote.select(&args.root)?;
    let state_dir = match &args.state {
        Some(dir) => dir.clone(),
        None => default_state_dir()?,
    };
    // Discovery runs here; each target gets its own root.
    let (local, registry) = load::load(&converge::setup(args, Path::new("/")))?;
    let fleet = Fleet::new(&args.remote, targets, &local, &registry)?;
    let ssh_config = args
        .remote
        .ssh_config
        .as_deref()
        .map(std::path::absolute)
        .transpose()?;
    let failed = Ending {
        errors: true,
        ..Ending::default()
    };
    let runs = fleet.run_all(&local, failed, |target, host, out| {
        let destination = Destination::resolve(ssh_config.as_deref(), target)?;
        let older = state_dir.join(format!("{}.db", file_name(&target.name)));
        if older.exists() {
            log::warn!(
                "{}: {} is a store of an older ral, named by the target only, and is not \
                 used any more: its items are not managed (see ral state list --state)",
                target.name,
                older.display()
            );
        }
        let root = target.root.clone().unwrap_or_else(|| PathBuf::from("/"));
        let identity = Identity::new(&destination.uri(), &root);
        let store_at = StoreAt {
            location: Location::File(state_dir.join(store_file(&destination, &identity.root))),
            identity,
        };
        converge::converge(args, mode, input, host, &registry, &store_at, out)
    });
    remote::report(
        &runs,
        args.json,
        args.quiet,
        &format!("ral {}", mode_name(mode)),
    )?;
    let mut all = Ending::default();
    for run in &runs {
        all.changes |= run.outcome.changes;
        all.failures |= run.outcome.failures;
        all.errors |= run.outcome.errors;
    }
    Ok(all)
}

fn mode_name(mode: Mode) -> &'static str {
    match mode {
        Mode::Plan => "plan",
        Mode::Apply => "apply",
    }
}

/// Where the stores of targets are kept by default.
fn default_state_dir() -> anyhow::Result<PathBuf> {
    let base = match std::env::var_os("XDG_STATE_HOME").map(PathBuf::from) {
        Some(dir) if dir.is_absolute() => dir,
        _ => match std::env::var_os("HOME").map(PathBuf::from) {
            Some(home) if home.is_absolute() => home.join(".local/state"),
            _ => anyhow::bail!("no HOME to keep the targets' state stores in: give --state DIR"),
        },
    };
    Ok(base.join("ral/targets"))
}

/// Where ssh really connects for a target: the user, host name and port
/// after its options and ssh's configuration, as `ssh -G` prints them (it
/// connects to nothing). Two names of one machine give one, two machines
/// (or two ports of one) two.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Destination {
    user: String,
    host: String,
    port: u16,
}

impl Destination {
    fn resolve(ssh_config: Option<&Path>, target: &Target) -> anyhow::Result<Destination> {
        let settings = ral::remote::SshSettings {
            config: ssh_config.map(Path::to_owned),
            ..Default::default()
        };
        let said = ral::remote::ssh_resolved(&settings, target)?.join("\n");
        Destination::parse(&said).with_context(|| {
            format!(
                "ssh -G {} printed no user, hostname or port",
                target.destination
            )
        })
    }

    fn parse(text: &str) -> Option<Destination> {
        let value = |key: &str| {
            text.lines()
                .find_map(|line| line.strip_prefix(key)?.strip_prefix(' '))
                .map(str::to_owned)
        };
        Some(Destination {
            user: value("user")?,
            host: value("hostname")?,
            port: value("port")?.parse().ok()?,
        })
    }

    /// As the store records it: `ssh://USER@HOST:PORT`.
    fn uri(&self) -> String {
        if self.host.contains(':') {
            format!("ssh://{}@[{}]:{}", self.user, self.host, self.port)
        } else {
            format!("ssh://{}@{}:{}", self.user, self.host, self.port)
        }
    }
}

/// The file name of the store of `destination` below `root` (absolute):
/// distinct destinations and roots give distinct names; a name too long
/// for a file system is cut and completed with a digest of the whole.
fn store_file(destination: &Destination, root: &str) -> String {
    let whole = file_name(&format!(
        "{}@{}:{}{root}",
        destination.user, destination.host, destination.port
    ));
    if whole.len() <= 200 {
        return format!("{whole}.db");
    }
    let mut cut = 160;
    while !whole.is_char_boundary(cut) {
        cut -= 1;
    }
    let digest = ral::text::hex(&Sha256::digest(whole.as_bytes()));
    format!("{}-{}.db", &whole[..cut], &digest[..32])
}

/// A target's name as a file name (what stores were named by before): `/`, NUL and `%` are escaped as `%XX`,
/// and so is a leading dot, so distinct names stay distinct files.
fn file_name(name: &str) -> String {
    let mut out = String::new();
    for (at, c) in name.chars().enumerate() {
        if c == '/' || c == '%' || c == '\0' || (at == 0 && c == '.') {
            out.push_str(&format!("%{:02X}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{file_name, store_file, Destination};

    fn at(user: &str, host: &str, port: u16) -> Destination {
        Destination {
            user: user.to_owned(),
            host: host.to_owned(),
            port,
        }
    }

    #[test]
    fn two_roots_ports_users_or_hosts_give_two_store_files() {
        let web = at("root", "web1", 22);
        assert_eq!(store_file(&web, "/srv/a"), "root@web1:22%2Fsrv%2Fa.db");
        let files = [
            store_file(&web, "/srv/a"),
            store_file(&web, "/srv/b"),
            store_file(&web, "/"),
            store_file(&at("root", "web1", 2222), "/srv/a"),
            store_file(&at("alice", "web1", 22), "/srv/a"),
            store_file(&at("root", "web2", 22), "/srv/a"),
        ];
        let distinct: std::collections::HashSet<&String> = files.iter().collect();
        assert_eq!(distinct.len(), files.len(), "{files:?}");
        // A root too long for one file name still gives its own.
        let long = format!("/{}", "d".repeat(300));
        let longer = format!("{long}e");
        assert!(store_file(&web, &long).len() < 255);
        assert_ne!(store_file(&web, &long), store_file(&web, &longer));
    }

    #[test]
    fn a_targets_port_and_user_win_over_its_destination_as_for_the_connection() {
        let mut target = ral::remote::Target::destination("ssh://alice@example.org:2200").unwrap();
        let none = Some(std::path::Path::new("/dev/null"));
        assert_eq!(
            Destination::resolve(none, &target).unwrap(),
            at("alice", "example.org", 2200)
        );
        target.port = Some(2222);
        target.user = Some("bob".to_owned());
        assert_eq!(
            Destination::resolve(none, &target).unwrap(),
            at("bob", "example.org", 2222)
        );
    }

    #[test]
    fn ssh_g_output_gives_the_destination() {
        let text = "user bob\nhostname example.org\nport 2222\nhostkeyalias x\n";
        assert_eq!(
            Destination::parse(text),
            Some(at("bob", "example.org", 2222))
        );
        assert_eq!(at("u", "::1", 22).uri(), "ssh://u@[::1]:22");
        assert_eq!(Destination::parse("user bob\n"), None);
    }

    #[test]
    fn target_names_make_distinct_file_names() {
        assert_eq!(file_name("web1"), "web1");
        assert_eq!(file_name("ssh://u@h:22/x"), "ssh:%2F%2Fu@h:22%2Fx");
        assert_eq!(file_name(".."), "%2E.");
        assert_ne!(file_name("a/b"), file_name("a%2Fb"));
    }
}
