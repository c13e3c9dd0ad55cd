//! The kernel and the hardware model, from uname(2): `kernel`,
//! `kernelrelease`, `kernelversion`, `kernelmajversion`, `hardwaremodel`
//! and `architecture` (which Facter names as the distribution does:
//! Debian's `amd64` and `arm64`).

use std::ffi::CStr;

use serde_json::Value as Json;

use super::sources::Facts;

/// What uname(2) says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Uname {
    pub sysname: String,
    pub release: String,
    pub machine: String,
}

/// This machine's uname (`Option` for the callers that tell a failure
/// apart: Linux's uname(2) has none).
pub fn uname() -> Option<Uname> {
    let name = rustix::system::uname();
    let field = |text: &CStr| text.to_string_lossy().into_owned();
    Some(Uname {
        sysname: field(name.sysname()),
        release: field(name.release()),
        machine: field(name.machine()),
    })
}

/// Adds the kernel's facts.
pub(super) fn insert(facts: &mut Facts, uname: &Uname) {
    facts.insert("kernel".into(), Json::from(uname.sysname.as_str()));
    facts.insert("kernelrelease".into(), Json::from(uname.release.as_str()));
    facts.insert(
        "kernelversion".into(),
        Json::from(kernel_version(&uname.release)),
    );
    facts.insert(
        "kernelmajversion".into(),
        Json::from(kernel_major_version(&uname.release)),
    );
}

/// Facter's `kernelversion`: the release's first three numbers
/// (`6.1.0-18-amd64` is `6.1.0`).
pub fn kernel_version(release: &str) -> String {
    release
        .split(|c: char| !c.is_ascii_digit())
        .filter(|part| !part.is_empty())
        .take(3)
        .collect::<Vec<_>>()
        .join(".")
}

/// Facter's `kernelmajversion`: the release's first two dot-separated
/// parts (`6.1.0-18-amd64` is `6.1`).
pub fn kernel_major_version(release: &str) -> String {
    release.split('.').take(2).collect::<Vec<_>>().join(".")
}

/// Facter's `architecture`: the machine as the Debian family names it
/// (`amd64`, `arm64`) on that family, the machine itself elsewhere, and
/// `i386` for every 32-bit x86.
pub fn architecture(machine: &str, debian_family: bool) -> String {
    let x86_32 =
        matches!(machine, "i386" | "i486" | "i586" | "i686") || machine.contains("pentium");
    match (machine, debian_family) {
        _ if x86_32 => "i386".to_owned(),
        ("x86_64", true) => "amd64".to_owned(),
        ("aarch64", true) => "arm64".to_owned(),
        (other, _) => other.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_versions_as_facter_makes_them() {
        assert_eq!(kernel_version("6.1.0-18-amd64"), "6.1.0");
        assert_eq!(kernel_version("6.18.44-fc-v1272"), "6.18.44");
        assert_eq!(kernel_version("5.14.0-362.el9.x86_64"), "5.14.0");
        assert_eq!(kernel_version("4.4"), "4.4");
        assert_eq!(kernel_major_version("6.1.0-18-amd64"), "6.1");
        assert_eq!(kernel_major_version("6"), "6");
    }

    #[test]
    fn architectures_as_the_family_names_them() {
        assert_eq!(architecture("x86_64", true), "amd64");
        assert_eq!(architecture("aarch64", true), "arm64");
        assert_eq!(architecture("x86_64", false), "x86_64");
        assert_eq!(architecture("aarch64", false), "aarch64");
        assert_eq!(architecture("i686", false), "i386");
        assert_eq!(architecture("riscv64", true), "riscv64");
    }

    #[test]
    fn uname_reads_this_kernel() {
        let uname = uname().expect("uname works here");
        assert_eq!(uname.sysname, "Linux");
        assert!(!uname.release.is_empty() && !uname.machine.is_empty());
        let proc_release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
        assert_eq!(uname.release, proc_release.trim());
    }
}
