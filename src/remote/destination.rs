//! Where ssh really connects for a target: the user, host name and port
//! after the target's options and ssh's configuration, as `ssh -G` prints
//! them. What a target's state store is named by: two names of one
//! machine give one destination, two machines (or two ports of one) two.

use std::path::Path;

use crate::error::{Error, Result};

use super::{ssh_resolved, SshSettings, Target};

/// A target's destination as ssh resolves it (`ssh -G` connects to
/// nothing).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Destination {
    pub user: String,
    pub host: String,
    pub port: u16,
}

impl Destination {
    pub fn new(user: &str, host: &str, port: u16) -> Destination {
        Destination {
            user: user.to_owned(),
            host: host.to_owned(),
            port,
        }
    }

    pub fn resolve(ssh_config: Option<&Path>, target: &Target) -> Result<Destination> {
        let settings = SshSettings {
            config: ssh_config.map(Path::to_owned),
            ..Default::default()
        };
        let said = ssh_resolved(&settings, target)?.join("\n");
        Destination::parse(&said).ok_or_else(|| Error::Remote {
            target: target.name.clone(),
            message: format!(
                "ssh -G {} printed no user, hostname or port",
                target.destination
            ),
        })
    }

    pub fn parse(text: &str) -> Option<Destination> {
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
    pub fn uri(&self) -> String {
        if self.host.contains(':') {
            format!("ssh://{}@[{}]:{}", self.user, self.host, self.port)
        } else {
            format!("ssh://{}@{}:{}", self.user, self.host, self.port)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Destination;

    fn at(user: &str, host: &str, port: u16) -> Destination {
        Destination::new(user, host, port)
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
}
