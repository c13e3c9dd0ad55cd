//! `hostname`, `fqdn` and `domain` (also under `networking`), as
//! Facter's hostname resolver finds them: the host name's first label;
//! its domain from the name itself when it has dots, else from its
//! canonical name (`getaddrinfo` with `AI_CANONNAME`) when that extends
//! it, else `resolv.conf`'s `domain` (or first `search`) line; the fqdn
//! the canonical name, else host and domain joined.
//!
//! At the root `/` the host name is the kernel's (gethostname(2)) and the
//! canonical name the resolver's. Below another root they are
//! `ROOT/etc/hostname` and the first line of `ROOT/etc/hosts` naming the
//! host, each the machine's own when the root lacks the file; so is
//! `ROOT/etc/resolv.conf`.

use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{Map, Value as Json};

use super::sources::{is_system_root, machine_file, root_file, Sources};
use crate::files::Root;

/// How long the resolver may take to say the canonical name: it may ask
/// DNS, and a fact is not worth waiting on a dead server for.
const RESOLVER_WAIT: Duration = Duration::from_secs(1);

/// A host's names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Names {
    pub hostname: String,
    pub domain: Option<String>,
    pub fqdn: String,
}

impl Names {
    /// Facter's algorithm: `raw` is the host name as the system gives it
    /// (perhaps with a domain), `canonical` finds a host's canonical
    /// name, `resolv` the resolver's domain. `None` for an empty name.
    pub fn find(
        raw: &str,
        canonical: impl FnOnce(&str) -> Option<String>,
        resolv: impl FnOnce() -> Option<String>,
    ) -> Option<Names> {
        let (hostname, mut domain) = split_fqdn(raw.trim());
        if hostname.is_empty() {
            return None;
        }
        let mut fqdn = None;
        if domain.is_none() {
            fqdn = canonical(&hostname).filter(|name| !name.is_empty() && *name != hostname);
            if let Some(name) = &fqdn {
                if name.starts_with(&format!("{hostname}.")) {
                    domain = split_fqdn(name).1;
                }
            }
        }
        if domain.is_none() {
            domain = resolv().filter(|domain| !domain.is_empty());
        }
        let fqdn = fqdn.unwrap_or_else(|| match &domain {
            Some(domain) => format!("{hostname}.{domain}"),
            None => hostname.clone(),
        });
        Some(Names {
            hostname,
            domain,
            fqdn,
        })
    }

    /// Adds `hostname`, `fqdn` and `domain` (when there is one) to `facts`.
    pub(super) fn insert(&self, facts: &mut Map<String, Json>) {
        facts.insert("hostname".into(), Json::from(self.hostname.as_str()));
        facts.insert("fqdn".into(), Json::from(self.fqdn.as_str()));
        if let Some(domain) = &self.domain {
            facts.insert("domain".into(), Json::from(domain.as_str()));
        }
    }
}

/// A name's first label and the rest (its domain), as Facter splits
/// them: `web1.example.com` is `web1` and `example.com`; a name without
/// a dot, or ending at its first one, has no domain.
pub fn split_fqdn(name: &str) -> (String, Option<String>) {
    match name.split_once('.') {
        Some((host, domain)) if !domain.is_empty() => (host.to_owned(), Some(domain.to_owned())),
        _ => (name.to_owned(), None),
    }
}

/// The domain a resolv.conf gives: its first `domain` line's, else its
/// first `search` line's first domain.
pub fn resolv_domain(text: &str) -> Option<String> {
    let first = |keyword: &str| {
        text.lines().find_map(|line| {
            let rest = line.strip_prefix(keyword)?;
            if !rest.starts_with([' ', '\t']) {
                return None;
            }
            rest.split_whitespace().next().map(str::to_owned)
        })
    };
    first("domain").or_else(|| first("search"))
}

/// The canonical name a hosts file gives `host`: the first name of the
/// first line that names it (as the resolver's files source answers
/// `AI_CANONNAME`), compared without regard to case.
pub fn canonical_in_hosts(text: &str, host: &str) -> Option<String> {
    text.lines().find_map(|line| {
        let line = line.split('#').next().unwrap_or_default();
        let mut words = line.split_whitespace();
        let _address = words.next()?;
        let names: Vec<&str> = words.collect();
        names
            .iter()
            .any(|name| name.eq_ignore_ascii_case(host))
            .then(|| names[0].to_owned())
    })
}

/// The names of the host, from below the root where it has the files
/// (see the module's documentation).
pub(super) fn names(root: Option<&Root>, sources: &Sources) -> Option<Names> {
    let system = is_system_root(sources.root);
    let below = |rel: &str| match (system, root) {
        (false, Some(root)) => root_file(root, rel),
        _ => None,
    };
    let raw = match below("etc/hostname") {
        Some(text) => first_line(&text),
        None => kernel_hostname(),
    };
    let Some(raw) = raw else {
        log::debug!("facts: no host name");
        return None;
    };
    let hosts = below("etc/hosts");
    let canonical = |host: &str| match &hosts {
        Some(text) => canonical_in_hosts(text, host),
        None => resolver_canonical(host),
    };
    let resolv = || {
        below("etc/resolv.conf")
            .or_else(|| machine_file(Path::new("/"), "etc/resolv.conf"))
            .and_then(|text| resolv_domain(&text))
    };
    Names::find(&raw, canonical, resolv)
}

/// The first line that is not empty or a comment, trimmed.
fn first_line(text: &str) -> Option<String> {
    text.lines()
        .map(str::trim)
        .find(|line| !line.is_empty() && !line.starts_with('#'))
        .map(str::to_owned)
}

/// The kernel's host name (uname's node name, which gethostname(2)
/// reads on Linux).
fn kernel_hostname() -> Option<String> {
    let name = rustix::system::uname();
    Some(name.nodename().to_string_lossy().into_owned()).filter(|name| !name.is_empty())
}

/// The canonical name the system's resolver gives `host`, waiting for it
/// at most [`RESOLVER_WAIT`] (the lookup, if slower, ends unseen).
fn resolver_canonical(host: &str) -> Option<String> {
    let host = host.to_owned();
    let (sender, receiver) = mpsc::channel();
    let spawned = std::thread::Builder::new()
        .name("facts-getaddrinfo".into())
        .spawn(move || {
            let _ = sender.send(crate::nss::canonical_name(&host));
        });
    if let Err(e) = spawned {
        log::debug!("facts: starting the canonical name's lookup: {e}");
        return None;
    }
    match receiver.recv_timeout(RESOLVER_WAIT) {
        Ok(name) => name,
        Err(_) => {
            log::debug!(
                "facts: the resolver did not name the host's canonical name within {}s",
                RESOLVER_WAIT.as_secs()
            );
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(
        raw: &str,
        canonical: Option<&str>,
        resolv: Option<&str>,
    ) -> Option<(String, Option<String>, String)> {
        Names::find(
            raw,
            |_| canonical.map(str::to_owned),
            || resolv.map(str::to_owned),
        )
        .map(|n| (n.hostname, n.domain, n.fqdn))
    }

    fn some(
        host: &str,
        domain: Option<&str>,
        fqdn: &str,
    ) -> Option<(String, Option<String>, String)> {
        Some((host.into(), domain.map(str::to_owned), fqdn.into()))
    }

    #[test]
    fn names_are_found_as_facter_finds_them() {
        // A name with its domain needs nothing else.
        assert_eq!(
            names("web1.example.com", Some("other.net"), Some("x.org")),
            some("web1", Some("example.com"), "web1.example.com")
        );
        // The canonical name extends the host name: its domain.
        assert_eq!(
            names("web1", Some("web1.corp.example"), Some("x.org")),
            some("web1", Some("corp.example"), "web1.corp.example")
        );
        // A canonical name that is no extension is the fqdn, and the
        // domain comes from resolv.conf.
        assert_eq!(
            names("web1", Some("alias.net"), Some("x.org")),
            some("web1", Some("x.org"), "alias.net")
        );
        // Nothing more: the host alone.
        assert_eq!(names("vm", Some("vm"), None), some("vm", None, "vm"));
        assert_eq!(
            names("vm", None, Some("lan")),
            some("vm", Some("lan"), "vm.lan")
        );
        assert_eq!(names("  ", None, None), None);
        assert_eq!(
            names("trailing.", None, None),
            some("trailing.", None, "trailing.")
        );
    }

    #[test]
    fn resolv_conf_gives_its_domain_line_before_search() {
        assert_eq!(
            resolv_domain("search a.example b.example\ndomain d.example\n").as_deref(),
            Some("d.example")
        );
        assert_eq!(
            resolv_domain("nameserver 10.0.0.1\nsearch\ta.example b\n").as_deref(),
            Some("a.example")
        );
        assert_eq!(
            resolv_domain("nameserver 1.1.1.1\ndomainx y\n# domain z\n"),
            None
        );
        assert_eq!(resolv_domain("search\n"), None);
    }

    #[test]
    fn a_hosts_file_gives_the_first_name_of_the_line_naming_the_host() {
        let hosts = "127.0.0.1\tlocalhost\n# 10.0.0.1 web1.wrong web1\n\
                     127.0.1.1 web1.example.com web1 # me\n10.0.0.2 web1.later web1\n";
        assert_eq!(
            canonical_in_hosts(hosts, "WEB1").as_deref(),
            Some("web1.example.com")
        );
        assert_eq!(canonical_in_hosts(hosts, "db"), None);
        assert_eq!(canonical_in_hosts("10.0.0.1\n", "x"), None);
    }

    #[test]
    fn the_kernel_names_this_host() {
        let name = kernel_hostname().expect("a host name");
        let proc = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
        assert_eq!(name, proc.trim());
    }
}
