//! `virtual` and `is_virtual`, guessed as Facter guesses them: a
//! container first (`docker`, `podman`, `lxc`, `systemd_nspawn`, from
//! `/.dockerenv`, `/run/.containerenv`, `/proc/1/environ`'s `container=`
//! and `/proc/1/cgroup`), then a hypervisor (from the firmware's
//! `/sys/class/dmi/id` and `/sys/hypervisor/type`: `kvm`, `vmware`,
//! `virtualbox`, `hyperv`, `xenhvm`, `xenu`, `gce`, ...), else
//! `physical`. Everything is read below a "machine" directory, `/` but
//! for tests, so the guess is a function of the files alone.

use std::path::Path;

use super::sources::machine_file;

/// The guesses that are a machine's own hardware, not a guest: Facter's
/// `is_virtual` is false for them.
const PHYSICAL: &[&str] = &[
    "physical",
    "xen0",
    "vmware_server",
    "vmware_workstation",
    "openvzhn",
    "vserver_host",
];

/// What a DMI product name says, as Facter's table has it.
const PRODUCTS: &[(&str, &str)] = &[
    ("VMware", "vmware"),
    ("VirtualBox", "virtualbox"),
    ("Parallels", "parallels"),
    ("KVM", "kvm"),
    ("Virtual Machine", "hyperv"),
    ("RHEV Hypervisor", "rhev"),
    ("oVirt Node", "ovirt"),
    ("HVM domU", "xenhvm"),
    ("Bochs", "bochs"),
    ("OpenBSD", "vmm"),
    ("BHYVE", "bhyve"),
];

/// Whether `guess` is a virtual machine or container.
pub fn is_virtual(guess: &str) -> bool {
    !PHYSICAL.contains(&guess)
}

/// The guess for the machine whose files are below `machine`.
pub fn detect(machine: &Path) -> String {
    container(machine)
        .or_else(|| hypervisor(machine))
        .unwrap_or("physical")
        .to_owned()
}

/// The container the machine's process 1 runs in, if any.
fn container(machine: &Path) -> Option<&'static str> {
    // Unreadable to all but root (and, in some sandboxes, to root too).
    let environ = std::fs::read(machine.join("proc/1/environ")).ok();
    if let Some(kind) = environ.as_deref().and_then(container_of_environ) {
        return Some(kind);
    }
    if machine.join(".dockerenv").exists() {
        return Some("docker");
    }
    if machine.join("run/.containerenv").exists() {
        return Some("podman");
    }
    machine_file(machine, "proc/1/cgroup").and_then(|text| container_of_cgroup(&text))
}

/// The container process 1's environment names (`container=lxc`).
pub fn container_of_environ(environ: &[u8]) -> Option<&'static str> {
    environ
        .split(|&b| b == 0)
        .find_map(|var| var.strip_prefix(b"container="))
        .and_then(|kind| match kind {
            b"lxc" | b"lxc-libvirt" => Some("lxc"),
            b"systemd-nspawn" => Some("systemd_nspawn"),
            b"podman" => Some("podman"),
            b"docker" => Some("docker"),
            _ => None,
        })
}

/// The container process 1's control groups name (`.../docker/ID`,
/// `/lxc/NAME`), as Facter reads `/proc/1/cgroup`.
pub fn container_of_cgroup(text: &str) -> Option<&'static str> {
    let paths = || text.lines().filter_map(|line| line.splitn(3, ':').nth(2));
    if paths().any(|path| path.contains("docker/") || path.contains("/docker-")) {
        return Some("docker");
    }
    if paths().any(|path| path.starts_with("/lxc/") || path.starts_with("/lxc.payload")) {
        return Some("lxc");
    }
    None
}

/// The hypervisor the firmware and `/sys/hypervisor` name, if any.
fn hypervisor(machine: &Path) -> Option<&'static str> {
    let dmi = |name: &str| {
        machine_file(machine, &format!("sys/class/dmi/id/{name}"))
            .map(|text| text.trim().to_owned())
            .unwrap_or_default()
    };
    let xen = machine_file(machine, "sys/hypervisor/type").is_some_and(|t| t.trim() == "xen");
    let dom0 = machine_file(machine, "proc/xen/capabilities")
        .is_some_and(|text| text.contains("control_d"));
    hypervisor_of(
        &dmi("product_name"),
        &dmi("sys_vendor"),
        &dmi("bios_vendor"),
        xen.then_some(dom0),
    )
}

/// The hypervisor of a DMI product name, system vendor and BIOS vendor;
/// `xen` says whether `/sys/hypervisor` names Xen, and then whether this
/// is its control domain.
pub fn hypervisor_of(
    product: &str,
    vendor: &str,
    bios: &str,
    xen: Option<bool>,
) -> Option<&'static str> {
    if bios.contains("Google") {
        return Some("gce");
    }
    match xen {
        Some(true) => return Some("xen0"),
        Some(false) if product.contains("HVM domU") || vendor.contains("Xen") => {
            return Some("xenhvm")
        }
        Some(false) => return Some("xenu"),
        None => {}
    }
    if bios.contains("Amazon EC2") || vendor.contains("Amazon EC2") {
        return Some("kvm");
    }
    if let Some((_, guess)) = PRODUCTS.iter().find(|(key, _)| product.contains(key)) {
        return Some(guess);
    }
    match vendor {
        "QEMU" => Some("kvm"),
        vendor if vendor.starts_with("VMware") => Some("vmware"),
        "innotek GmbH" => Some("virtualbox"),
        "Xen" => Some("xenhvm"),
        "Parallels Software International Inc." => Some("parallels"),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake machine with `files`.
    fn machine(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (path, text) in files {
            let path = dir.path().join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        dir
    }

    fn guess(files: &[(&str, &str)]) -> String {
        detect(machine(files).path())
    }

    #[test]
    fn containers_come_first() {
        let kvm = ("sys/class/dmi/id/product_name", "KVM\n");
        assert_eq!(guess(&[(".dockerenv", ""), kvm]), "docker");
        assert_eq!(guess(&[("run/.containerenv", ""), kvm]), "podman");
        assert_eq!(
            guess(&[("proc/1/environ", "PATH=/bin\0container=lxc\0"), kvm]),
            "lxc"
        );
        assert_eq!(
            guess(&[("proc/1/environ", "container=systemd-nspawn\0")]),
            "systemd_nspawn"
        );
        assert_eq!(
            guess(&[("proc/1/cgroup", "12:pids:/docker/0123abcd\n0::/\n")]),
            "docker"
        );
        assert_eq!(
            guess(&[("proc/1/cgroup", "1:name=systemd:/lxc/web\n")]),
            "lxc"
        );
        assert_eq!(guess(&[("proc/1/cgroup", "0::/init.scope\n"), kvm]), "kvm");
    }

    #[test]
    fn hypervisors_from_the_firmware() {
        let product = |name: &str| guess(&[("sys/class/dmi/id/product_name", name)]);
        assert_eq!(product("KVM"), "kvm");
        assert_eq!(product("VMware Virtual Platform"), "vmware");
        assert_eq!(product("VirtualBox"), "virtualbox");
        assert_eq!(product("Virtual Machine"), "hyperv");
        assert_eq!(product("HVM domU"), "xenhvm");
        assert_eq!(product("ProLiant DL380"), "physical");
        assert_eq!(
            guess(&[
                (
                    "sys/class/dmi/id/product_name",
                    "Standard PC (Q35 + ICH9, 2009)"
                ),
                ("sys/class/dmi/id/sys_vendor", "QEMU"),
            ]),
            "kvm"
        );
        assert_eq!(guess(&[("sys/class/dmi/id/bios_vendor", "Google")]), "gce");
        assert_eq!(
            guess(&[("sys/class/dmi/id/bios_vendor", "Amazon EC2")]),
            "kvm"
        );
        assert_eq!(guess(&[("sys/hypervisor/type", "xen\n")]), "xenu");
        assert_eq!(
            guess(&[
                ("sys/hypervisor/type", "xen\n"),
                ("sys/class/dmi/id/sys_vendor", "Xen"),
            ]),
            "xenhvm"
        );
        assert_eq!(
            guess(&[
                ("sys/hypervisor/type", "xen\n"),
                ("proc/xen/capabilities", "control_d\n"),
            ]),
            "xen0"
        );
        assert_eq!(guess(&[]), "physical");
    }

    #[test]
    fn the_machines_own_hardware_is_not_virtual() {
        assert!(!is_virtual("physical"));
        assert!(!is_virtual("xen0"));
        assert!(is_virtual("docker"));
        assert!(is_virtual("kvm"));
    }
}
