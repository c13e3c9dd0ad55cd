//! A machine's facts, gathered natively: what it runs, what it is called,
//! its addresses, processors, memory and virtualization, named and shaped
//! as Facter 4 names them (`os.family`, `networking.ip`,
//! `memory.system.total_bytes`), so that a template written for Puppet or
//! Ansible reads them unchanged. No interpreter and no child process: each
//! fact is a few files of `/proc`, `/sys` and `/etc` and a system call or
//! two, well under a millisecond in all where Facter takes a second.
//!
//! Which facts come from where:
//!
//! - **below the root** (the `RALSH_ROOT_DIR` a call is given, `/` by
//!   default): `os` (from `ROOT/etc/os-release`, else
//!   `ROOT/usr/lib/os-release`, with `ROOT/etc/debian_version`,
//!   `redhat-release` and `alpine-release` as Facter reads them), and the
//!   names `hostname`, `fqdn` and `domain` (also under `networking`): at
//!   the root `/` the kernel's host name, its canonical name as
//!   `getaddrinfo` finds it, and `/etc/resolv.conf`'s domain, as Facter
//!   does; below another root `ROOT/etc/hostname`, `ROOT/etc/hosts` and
//!   `ROOT/etc/resolv.conf`, each falling back to the machine's own when
//!   the root has no such file. Custom facts (`facts.d`) are read by
//!   `ral::facts`, from the data directories.
//! - **always the machine's**, whatever the root: the kernel (`kernel`,
//!   `kernelrelease`, `kernelversion`, `kernelmajversion`), `architecture`
//!   and `hardwaremodel`, `networking` (its interfaces and the primary
//!   one), `processors`, `memory`, `virtual` and `is_virtual`, `timezone`,
//!   `uptime_seconds` and `system_uptime`.
//!
//! Every parser is a pure function over text, tested on samples. The
//! gatherers never panic and never fail as a whole: a fact that cannot be
//! read is left out, and the debug log says why.

mod hardware;
mod hostname;
mod kernel;
mod networking;
mod os;
mod sources;
mod uptime;
mod virtualization;

use std::path::Path;

use serde_json::Value as Json;

use super::files::Root;

pub use hardware::{capacity, human_bytes, parse_cpuinfo, parse_meminfo, Cpuinfo, Meminfo};
pub use hostname::{canonical_in_hosts, resolv_domain, split_fqdn, Names};
pub use kernel::{architecture, kernel_major_version, kernel_version};
pub use networking::{binding, default_route_v4, default_route_v6, scope6};
pub use os::{os_name, parse_os_release, OsRelease};
pub use sources::{Facts, Sources};
pub use uptime::{parse_uptime, system_uptime};
pub use virtualization::{detect as virtual_of, is_virtual};

/// The core facts of this machine, with the root `root` (see the module's
/// documentation for which facts depend on it).
pub fn gather(root: &Path) -> Facts {
    gather_from(&Sources {
        root,
        machine: Path::new("/"),
    })
}

/// The core facts from `sources`. Never fails: what cannot be read is
/// left out.
pub fn gather_from(sources: &Sources) -> Facts {
    let mut facts = Facts::new();
    let uname = kernel::uname();
    let root = match Root::open(sources.root) {
        Ok(root) => Some(root),
        Err(e) => {
            log::debug!("facts: the root {}: {}", sources.root.display(), e.message);
            None
        }
    };
    let machine = uname.as_ref().map(|u| u.machine.as_str());
    let os = root.as_ref().and_then(os::read);
    let family = os.as_ref().map(|os| os.family());
    let mut os_fact = os.as_ref().map(|os| os.facts()).unwrap_or_default();
    if let Some(machine) = machine {
        let arch = architecture(machine, family.as_deref() == Some("Debian"));
        os_fact.insert("architecture".into(), Json::from(arch.clone()));
        os_fact.insert("hardware".into(), Json::from(machine));
        facts.insert("architecture".into(), Json::from(arch));
        facts.insert("hardwaremodel".into(), Json::from(machine));
    }
    if !os_fact.is_empty() {
        facts.insert("os".into(), Json::Object(os_fact));
    }
    if let Some(uname) = &uname {
        kernel::insert(&mut facts, uname);
    }
    let names = hostname::names(root.as_ref(), sources);
    let mut networking = networking::gather(sources.machine);
    if let Some(names) = names {
        names.insert(&mut facts);
        names.insert(&mut networking);
    }
    if !networking.is_empty() {
        facts.insert("networking".into(), Json::Object(networking));
    }
    hardware::insert(&mut facts, sources.machine, machine);
    let guess = virtualization::detect(sources.machine);
    facts.insert("is_virtual".into(), Json::from(is_virtual(&guess)));
    facts.insert("virtual".into(), Json::from(guess));
    uptime::insert(&mut facts, sources.machine);
    sort(&mut facts);
    facts
}

/// Every mapping sorted by key, at every depth, as Facter prints them.
fn sort(facts: &mut Facts) {
    facts.sort_keys();
    for value in facts.values_mut() {
        sort_value(value);
    }
}

fn sort_value(value: &mut Json) {
    match value {
        Json::Object(map) => sort(map),
        Json::Array(items) => items.iter_mut().for_each(sort_value),
        _ => {}
    }
}

#[cfg(test)]
mod tests;
