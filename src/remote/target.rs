//! One machine to run on ([`Target`]), from an ssh destination or an
//! inventory's host, and which machines a command runs on ([`select`]),
//! from `-t` and an inventory.

use std::path::PathBuf;

use super::inventory;
use crate::error::{Error, Problem, Result};
use crate::text::escape;

/// One machine to run on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// How results are labelled: the inventory name, or the destination
    /// as given.
    pub name: String,
    /// What ssh connects to: `host`, `user@host` or `ssh://user@host:port`.
    pub destination: String,
    pub port: Option<u16>,
    pub user: Option<String>,
    pub identity: Option<PathBuf>,
    /// More ssh options (the inventory's `ansible_ssh_common_args`, then
    /// `ansible_ssh_extra_args`), after ral's own.
    pub ssh_args: Vec<String>,
    /// Run the providers through `sudo -n`.
    pub sudo: bool,
    /// The root the providers work below, on the target.
    pub root: Option<PathBuf>,
}

impl Target {
    /// A destination as `ssh` takes it, with no inventory variables.
    pub fn destination(text: &str) -> Result<Target> {
        if text.is_empty() || text.starts_with('-') || text.chars().any(char::is_whitespace) {
            return Err(Error::Remote {
                target: format!("'{}'", escape(text)),
                message: "not a target: give a host, user@host or ssh://user@host:port".to_owned(),
            });
        }
        Ok(Target {
            name: text.to_owned(),
            destination: text.to_owned(),
            port: None,
            user: None,
            identity: None,
            ssh_args: Vec::new(),
            sudo: false,
            root: None,
        })
    }

    fn from_inventory(host: &inventory::Host) -> Target {
        Target {
            name: host.name.clone(),
            destination: host.address.clone(),
            port: host.port,
            user: host.user.clone(),
            identity: host.private_key_file.clone(),
            ssh_args: [host.ssh_common_args.as_slice(), &host.ssh_extra_args].concat(),
            sudo: host.sudo.unwrap_or(false),
            root: host.root.clone(),
        }
    }
}

/// The targets `-t` (each word may list several, comma-separated),
/// `--inventory` and `--limit` name, each once, in order.
///
/// With an inventory, the `-t` words are host patterns (hosts and groups;
/// all hosts when there is none) and `--limit` narrows them further;
/// without one, they are ssh destinations.
pub fn select(
    words: &[String],
    inventory: Option<&inventory::Inventory>,
    limit: Option<&str>,
) -> Result<Vec<Target>> {
    let items: Vec<&str> = words
        .iter()
        .flat_map(|word| word.split(','))
        .map(str::trim)
        .filter(|item| !item.is_empty())
        .collect();
    let mut targets = match inventory {
        None => {
            if limit.is_some() {
                return Err(Error::Remote {
                    target: format!("--limit {}", escape(limit.unwrap_or_default())),
                    message: "selects hosts of an inventory: give one with -i FILE".to_owned(),
                });
            }
            items
                .iter()
                .map(|item| Target::destination(item))
                .collect::<Result<Vec<_>>>()?
        }
        Some(inventory) => {
            let pattern = if items.is_empty() {
                "all".to_owned()
            } else {
                items.join(":")
            };
            let mut hosts = inventory.select(&pattern)?;
            if let Some(limit) = limit {
                let allowed = inventory.select(limit)?;
                hosts.retain(|host| allowed.iter().any(|a| a.name == host.name));
                if hosts.is_empty() {
                    return Err(Error::Inventory {
                        problem: Problem {
                            file: inventory.file().to_owned(),
                            line: 0,
                            message: format!(
                                "--limit '{}' leaves none of the hosts '{}' selects",
                                escape(limit),
                                escape(&pattern)
                            ),
                        },
                    });
                }
            }
            hosts.into_iter().map(Target::from_inventory).collect()
        }
    };
    let mut seen = std::collections::HashSet::new();
    targets.retain(|target| seen.insert(target.name.clone()));
    Ok(targets)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn destinations_are_taken_as_given_once_each() {
        let words = vec![
            "a,root@b".to_owned(),
            "ssh://u@c:2222".to_owned(),
            "a".to_owned(),
        ];
        let targets = select(&words, None, None).unwrap();
        let names: Vec<&str> = targets.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["a", "root@b", "ssh://u@c:2222"]);
        for bad in ["-oProxyCommand=x", "a b"] {
            assert!(select(&[bad.to_owned()], None, None).is_err(), "{bad}");
        }
        assert!(select(&words, None, Some("a")).is_err());
    }

    #[test]
    fn an_inventory_gives_groups_limits_and_variables() {
        let text = "all:\n  hosts:\n    one:\n      ansible_host: 127.0.0.1\n      ansible_port: 2222\n      ral_root: /r1\n  children:\n    web:\n      hosts:\n        two:\n          ansible_user: deploy\n          ansible_become: true\n        three:\n";
        let inventory = inventory::Inventory::parse(text, Path::new("inv.yaml")).unwrap();
        let all = select(&[], Some(&inventory), None).unwrap();
        assert_eq!(all.len(), 3);
        let one = &all.iter().find(|t| t.name == "one").unwrap();
        assert_eq!(one.destination, "127.0.0.1");
        assert_eq!(one.port, Some(2222));
        assert_eq!(one.root.as_deref(), Some(Path::new("/r1")));
        let web = select(&["web".to_owned()], Some(&inventory), None).unwrap();
        let names: Vec<&str> = web.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["two", "three"]);
        assert!(web[0].sudo && web[0].user.as_deref() == Some("deploy"));
        let limited = select(&["web".to_owned()], Some(&inventory), Some("three")).unwrap();
        assert_eq!(limited.len(), 1);
        assert!(select(&["web".to_owned()], Some(&inventory), Some("one")).is_err());
        assert!(select(&["nosuch".to_owned()], Some(&inventory), None).is_err());
    }
}
