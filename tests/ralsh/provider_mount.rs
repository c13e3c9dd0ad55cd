//! The bundled `mount::fstab` provider, end to end through ralsh on a fake
//! root: listing and finding fstab entries, creating, changing and deleting
//! them with every other line kept byte for byte, noop, idempotence, and
//! the values and states it refuses (mounting below a fake root among them).

use std::os::unix::fs::PermissionsExt;

use serde_json::json;

use crate::support::Sandbox;

/// A Debian-style fstab, plus a line with too few fields (kept, ignored), a
/// repeated mount point (the first line wins) and an escaped space.
const FSTAB: &str = "\
# /etc/fstab: static file system information.
#
# <file system> <mount point>   <type>  <options>       <dump>  <pass>
UUID=2f6c1b2e-8f3a-4c5d-9e7b-1a2b3c4d5e6f /               ext4    errors=remount-ro 0       1
UUID=9d8c7b6a-5f4e-4d3c-8b2a-1f0e9d8c7b6a none            swap    sw              0       0

tmpfs           /tmp            tmpfs   defaults,nosuid,nodev,size=2G 0 0
broken line
LABEL=my\\040disk /mnt/my\\040disk ext4 noatime
/dev/sdz1       /tmp            ext4    defaults        0       2
";

const TMP_LINE: &str =
    "tmpfs           /tmp            tmpfs   defaults,nosuid,nodev,size=2G 0 0\n";

fn fstab_sandbox() -> Sandbox {
    let sandbox = Sandbox::new();
    sandbox.write("etc/fstab", FSTAB);
    sandbox
}

#[test]
fn mount_lists_and_finds_entries() {
    let sandbox = fstab_sandbox();
    let run = sandbox.ralsh(&["-j", "mount"]);
    assert_eq!(
        run.expect(0).stderr,
        "",
        "malformed lines are skipped silently"
    );
    let doc = run.json();
    let provider = json!({"type": "mount", "provider": "mount::fstab"});
    assert_eq!(
        doc["resources"],
        json!([
            {"name": "/", "ensure": "unmounted",
             "device": "UUID=2f6c1b2e-8f3a-4c5d-9e7b-1a2b3c4d5e6f", "fstype": "ext4",
             "options": ["errors=remount-ro"], "dump": 0, "pass": 1, "ral": provider},
            {"name": "none", "ensure": "unmounted",
             "device": "UUID=9d8c7b6a-5f4e-4d3c-8b2a-1f0e9d8c7b6a", "fstype": "swap",
             "options": ["sw"], "dump": 0, "pass": 0, "ral": provider},
            {"name": "/tmp", "ensure": "unmounted", "device": "tmpfs", "fstype": "tmpfs",
             "options": ["defaults", "nosuid", "nodev", "size=2G"], "dump": 0, "pass": 0,
             "ral": provider},
            {"name": "/mnt/my disk", "ensure": "unmounted", "device": "LABEL=my disk",
             "fstype": "ext4", "options": ["noatime"], "dump": 0, "pass": 0, "ral": provider},
        ])
    );

    let doc = sandbox
        .ralsh(&["-j", "mount", "/mnt/my disk"])
        .expect(0)
        .json();
    assert_eq!(doc["resource"]["device"], "LABEL=my disk");
    let run = sandbox.ralsh(&["mount", "/tmp"]);
    run.expect(0)
        .stdout_has("mount::fstab { '/tmp':\n  ensure  => 'unmounted',\n")
        .stdout_has("  options => ['defaults', 'nosuid', 'nodev', 'size=2G'],\n");
    let run = sandbox.ralsh(&["mount", "/srv/nothere"]);
    run.expect(0).stdout_has("ensure => 'absent'");
    sandbox.ralsh(&["-a", "mount", "/srv/nothere"]).expect(1);
}

#[test]
fn mount_creates_changes_and_deletes_keeping_other_lines() {
    let sandbox = fstab_sandbox();
    let doc = sandbox
        .ralsh(&[
            "-j",
            "mount",
            "/srv/data",
            "device=/dev/sdb1",
            "fstype=ext4",
            "options=noatime,nofail",
            "pass=2",
        ])
        .expect(0)
        .json();
    assert_eq!(
        doc["result"][0]["changes"],
        json!([
            {"attr": "ensure", "is": "present", "was": "absent"},
            {"attr": "device", "is": "/dev/sdb1", "was": null},
            {"attr": "fstype", "is": "ext4", "was": null},
            {"attr": "options", "is": ["noatime", "nofail"], "was": null},
            {"attr": "dump", "is": 0, "was": null},
            {"attr": "pass", "is": 2, "was": null},
        ])
    );
    let created = format!("{FSTAB}/dev/sdb1\t/srv/data\text4\tnoatime,nofail\t0\t2\n");
    assert_eq!(sandbox.read("etc/fstab"), created);

    // A change rewrites only its own fields, keeping the line's spacing.
    let doc = sandbox
        .ralsh(&["-j", "mount", "/tmp", "options=defaults,size=1G", "pass=2"])
        .expect(0)
        .json();
    assert_eq!(
        doc["result"][0]["changes"],
        json!([
            {"attr": "options", "is": ["defaults", "size=1G"],
             "was": ["defaults", "nosuid", "nodev", "size=2G"]},
            {"attr": "pass", "is": 2, "was": 0},
        ])
    );
    let changed = created.replace(
        TMP_LINE,
        "tmpfs           /tmp            tmpfs   defaults,size=1G 0 2\n",
    );
    assert_eq!(sandbox.read("etc/fstab"), changed);
    // A line without dump and pass gets both when pass is set.
    sandbox
        .ralsh(&["mount", "/mnt/my disk", "pass=2"])
        .expect(0)
        .stdout_has("pass: 0 -> 2");
    let changed = changed.replace("ext4 noatime\n", "ext4 noatime 0 2\n");
    assert_eq!(sandbox.read("etc/fstab"), changed);

    // Deleting removes every line of the mount point, and nothing else.
    sandbox
        .ralsh(&["mount", "/tmp", "ensure=absent"])
        .expect(0)
        .stdout_has("ensure: 'unmounted' -> 'absent'");
    assert_eq!(
        sandbox.read("etc/fstab"),
        changed
            .replace(
                "tmpfs           /tmp            tmpfs   defaults,size=1G 0 2\n",
                ""
            )
            .replace(
                "/dev/sdz1       /tmp            ext4    defaults        0       2\n",
                ""
            )
    );
    // No temporary file is left behind; the lock file stays.
    assert_eq!(sandbox.names_in_dir("etc"), [".fstab.ral-lock", "fstab"]);
}

#[test]
fn mount_noop_changes_nothing_and_updates_are_idempotent() {
    let sandbox = fstab_sandbox();
    let doc = sandbox
        .ralsh(&["-n", "-j", "mount", "/", "options=ro", "dump=1"])
        .expect(0)
        .json();
    assert_eq!(doc["noop"], true);
    assert_eq!(doc["result"][0]["resource"]["options"], json!(["ro"]));
    sandbox
        .ralsh(&["-n", "mount", "/srv/new", "device=srv", "fstype=nfs"])
        .expect(0)
        .stdout_has("(noop: would change)");
    assert_eq!(sandbox.read("etc/fstab"), FSTAB, "noop left the file alone");

    let args = ["mount", "/", "options=errors=remount-ro,noatime"];
    sandbox
        .ralsh(&args)
        .expect(0)
        .stdout_has("options: ['errors=remount-ro'] -> ['errors=remount-ro', 'noatime']");
    let after = sandbox.read("etc/fstab");
    let again = sandbox.ralsh(&args);
    assert!(
        again.expect(0).stdout.ends_with("no changes needed\n"),
        "idempotent: {}",
        again.stdout
    );
    assert_eq!(sandbox.read("etc/fstab"), after);
}

#[test]
fn mount_creates_a_missing_fstab_but_needs_etc() {
    let sandbox = Sandbox::new();
    sandbox
        .ralsh(&["mount", "/data", "device=/dev/vdb", "fstype=xfs"])
        .expect(2)
        .stderr_has("does not exist");
    std::fs::create_dir(sandbox.root().join("etc")).unwrap();
    let doc = sandbox.ralsh(&["-j", "mount"]).expect(0).json();
    assert_eq!(doc["resources"], json!([]));
    sandbox
        .ralsh(&["mount", "/data", "device=/dev/vdb", "fstype=xfs"])
        .expect(0);
    assert_eq!(
        sandbox.read("etc/fstab"),
        "/dev/vdb\t/data\txfs\tdefaults\t0\t0\n"
    );
    let mode = std::fs::metadata(sandbox.root().join("etc/fstab"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o7777, 0o644);
}

/// The ids of the mounts a mountinfo file lists.
fn mount_ids(path: &str) -> Vec<String> {
    let text = std::fs::read_to_string(path).unwrap();
    text.lines()
        .filter_map(|line| line.split(' ').next().map(str::to_owned))
        .collect()
}

/// Below a fake root, in the machine's mount namespace (that of PID 1,
/// where this test runs), mounting and unmounting would change the
/// machine's mounts: refused, with the reason, before fstab changes; a
/// ghost is not asked to be absent either.
#[test]
fn mount_refuses_mounting_below_a_fake_root_and_bad_values() {
    let ours = mount_ids("/proc/self/mountinfo");
    if !mount_ids("/proc/1/mountinfo")
        .iter()
        .any(|id| ours.contains(id))
    {
        eprintln!("skipped: this test runs in a mount namespace other than PID 1's");
        return;
    }
    let sandbox = fstab_sandbox();
    for args in [
        &["mount", "/tmp", "ensure=mounted"][..],
        &[
            "mount",
            "/srv/new",
            "ensure=mounted",
            "device=tmpfs",
            "fstype=tmpfs",
        ],
    ] {
        let root = std::fs::canonicalize(sandbox.root()).unwrap();
        sandbox.ralsh(args).expect(2).stderr_has(&format!(
            "ensure: refusing to mount or unmount '{}' below the root '{}': ral runs in the \
             machine's mount namespace (that of PID 1), where this would change the machine's \
             mounts; below a root other than '/' ral mounts only in a mount namespace of its \
             own (as under 'unshare -m'); present and absent edit fstab alone",
            args[1],
            root.display()
        ));
    }
    // Nothing mounted: nothing to unmount, nothing refused.
    sandbox
        .ralsh(&["mount", "/tmp", "ensure=unmounted"])
        .expect(0)
        .stdout_has("no changes needed");
    let run = sandbox.ralsh(&["mount", "srv/data", "device=/dev/sdb1", "fstype=ext4"]);
    run.expect(2)
        .stderr_has("name: the mount point 'srv/data' must be an absolute path");
    // The host's type check refuses this before the provider runs.
    let run = sandbox.ralsh(&["mount", "/tmp", "dump=10"]);
    run.expect(2)
        .stderr_has("invalid value '10' for attribute 'dump' of type integer[0, 9]");
    let run = sandbox.ralsh(&["mount", "/tmp", "options=[\"a,b\"]"]);
    run.expect(2).stderr_has("options: 'a,b' contains ','");
    assert_eq!(sandbox.read("etc/fstab"), FSTAB);
}
