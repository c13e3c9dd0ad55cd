//! The core types on a host without Python: ralsh runs in a mount
//! namespace where `/usr/bin` holds every program but Python's and the
//! other directories a Python could come from (`/usr/local/bin`, a version
//! manager's) are empty, and lists, finds and changes resources of each
//! native type (host, mount) below a fake root; and mount(8) run for the
//! real root of a namespace whose `/etc` is a copy.

use std::process::Command;

use serde_json::{json, Value as Json};

use crate::host::Test;
use crate::support::{run, Sandbox};
use crate::tests;

/// This module's tests and what each needs.
pub fn tests() -> Vec<Test> {
    tests![[MountNamespace]
        the_core_types_work_where_no_python3_exists,
        mount_and_umount_run_for_the_real_root_of_a_private_namespace,
        a_failed_mount_fails_its_own_mount_point_alone,
    ]
}

/// Hides every Python, then checks that none is left, then runs the
/// arguments (ralsh's command lines, one per argument, each run by sh).
const HIDE_PYTHON: &str = r#"
set -e
orig=$1; shift
mount --make-rprivate /
mount --bind /usr/bin "$orig"
mount -t tmpfs tmpfs /usr/bin
"$orig/cp" -s "$orig"/* /usr/bin/ 2>/dev/null || true
"$orig/rm" -f /usr/bin/python*
for dir in /usr/local/bin /usr/local/lib /opt "$HOME/.pyenv" /root/.pyenv; do
    if [ -d "$dir" ]; then mount -t tmpfs tmpfs "$dir"; fi
done
export PATH=/usr/bin:/bin
if command -v python3 >/dev/null 2>&1 || [ -e /usr/bin/python3 ]; then
    echo "a python3 is still there: $(command -v python3)" >&2
    exit 90
fi
for line in "$@"; do
    echo "== $line"
    sh -c "$line" 2>&1 || echo "exit status $?"
done
"#;

fn the_core_types_work_where_no_python3_exists() {
    let sandbox = Sandbox::new();
    sandbox.write("etc/hosts", "127.0.0.1 localhost\n10.0.0.1 db db.lan\n");
    sandbox.write_accounts();
    sandbox.write(
        "etc/fstab",
        "# fs\ntmpfs /tmp tmpfs defaults,nosuid 0 0\nproc /proc proc defaults 0 0\n",
    );
    sandbox.write("srv/www/index.html", "<h1>hi</h1>\n");
    let orig = tempfile::tempdir().unwrap();
    let ralsh = format!(
        "{} --root {} ",
        crate::support::ralsh_bin(),
        sandbox.root().display()
    );
    let lines = [
        format!("{ralsh} host"),
        format!("{ralsh} host db"),
        format!("{ralsh} host web ip=10.0.0.5 host_aliases='[\"w1\"]'"),
        format!("{ralsh} host db ensure=absent"),
        format!("{ralsh} user"),
        format!("{ralsh} group staff ensure=present gid=1500"),
        format!("{ralsh} user carol ensure=present groups='[\"staff\"]'"),
        format!("{ralsh} user carol"),
        format!("{ralsh} mount"),
        format!("{ralsh} mount /tmp"),
        format!("{ralsh} mount /srv/data device=/dev/vdb fstype=xfs pass=2"),
        format!("{ralsh} mount /proc ensure=absent"),
        format!("{ralsh} file"),
        format!("{ralsh} file /srv/www/index.html"),
        format!("{ralsh} file /srv/www/new content=made mode=0600"),
    ];
    let mut command = Command::new("unshare");
    command
        .args(["-rm", "sh", "-c", HIDE_PYTHON, "sh"])
        .arg(orig.path())
        .args(&lines)
        .env("HOME", sandbox.cache.path())
        .env("XDG_CACHE_HOME", sandbox.cache.path());
    let out = run(&mut command);
    let out = out.expect(0);
    let sections: Vec<&str> = out.stdout.split("== ").skip(1).collect();
    assert_eq!(sections.len(), lines.len(), "{}", out.stdout);
    for section in &sections {
        assert!(!section.contains("exit status"), "{section}");
        assert!(!section.contains("python"), "{section}");
    }
    assert!(
        sections[0].contains("host::etc_hosts { 'localhost':"),
        "{}",
        sections[0]
    );
    assert!(
        sections[1].contains("host_aliases => ['db.lan'],"),
        "{}",
        sections[1]
    );
    assert!(
        sections[2].contains("ip: (none) -> '10.0.0.5'"),
        "{}",
        sections[2]
    );
    assert!(
        sections[4].contains("user::etc_passwd { 'root':"),
        "{}",
        sections[4]
    );
    assert!(
        sections[5].contains("gid: (none) -> 1500"),
        "{}",
        sections[5]
    );
    assert!(
        sections[7].contains("groups             => ['staff'],"),
        "{}",
        sections[7]
    );
    assert!(sandbox.read("etc/passwd").contains("\ncarol:x:1000:"));
    assert!(sandbox.read("etc/group").contains("\nstaff:x:1500:carol\n"));
    assert!(
        sections[8].contains("mount::fstab { '/proc':"),
        "{}",
        sections[8]
    );
    assert!(
        sections[9].contains("options => ['defaults', 'nosuid'],"),
        "{}",
        sections[9]
    );
    assert!(
        sections[10].contains("device: (none) -> '/dev/vdb'"),
        "{}",
        sections[10]
    );
    // Below the root nothing is mounted on /proc: its entry reads
    // unmounted, and goes from fstab alone.
    assert!(
        sections[11].contains("ensure: 'unmounted' -> 'absent'"),
        "{}",
        sections[11]
    );
    assert_eq!(
        sandbox.read("etc/fstab"),
        "# fs\ntmpfs /tmp tmpfs defaults,nosuid 0 0\n/dev/vdb\t/srv/data\txfs\tdefaults\t0\t2\n",
        "the mount changes were made, with no Python to make them"
    );
    assert!(
        !sections[12].contains("file {"),
        "no listing of all files: {}",
        sections[12]
    );
    assert!(
        sections[13].contains("content  => '<h1>hi</h1>\\n',"),
        "{}",
        sections[13]
    );
    assert!(
        sections[14].contains("ensure: 'absent' -> 'file'"),
        "{}",
        sections[14]
    );
    assert_eq!(sandbox.read("srv/www/new"), "made");
    assert_eq!(
        sandbox.read("etc/hosts"),
        "127.0.0.1 localhost\n10.0.0.5\tweb w1\n",
        "the changes were made, with no Python to make them"
    );
}

/// Gives the namespace an `/etc` of its own (a copy, bound over it) with
/// an empty fstab, so that ralsh works on the real root `/` without
/// touching the system's files; mounts made there stay in the namespace.
const PRIVATE_ETC: &str = r#"
mkdir -p "$WORK/etc" "$WORK/mnt"
cp -a /etc/. "$WORK/etc/" 2>/dev/null || true
mount --bind "$WORK/etc" /etc
if [ -d /run/mount ]; then mount -t tmpfs tmpfs /run/mount; fi
: > /etc/fstab
"#;

fn mount_and_umount_run_for_the_real_root_of_a_private_namespace() {
    let sandbox = Sandbox::new();
    let work = tempfile::tempdir().unwrap();
    let work_path = work.path().display().to_string();
    let orig = tempfile::tempdir().unwrap();
    let system_fstab = std::fs::read("/etc/fstab").ok();
    let ralsh = format!("{} ", crate::support::ralsh_bin());
    let mnt = format!("{work_path}/mnt");
    let bad = format!("{work_path}/bad");
    let swap = format!("{work_path}/swap");
    let mounted = format!("grep -c ' {mnt} ' /proc/self/mountinfo");
    let lines = [
        PRIVATE_ETC.to_owned(),
        format!("{ralsh} mount {mnt} device=tmpfs fstype=tmpfs options=size=1m ensure=mounted"),
        mounted.clone(),
        format!("{ralsh} mount {mnt} ensure=mounted"),
        format!("{ralsh} -n mount {mnt} ensure=unmounted"),
        mounted.clone(),
        format!("{ralsh} mount {mnt} ensure=unmounted"),
        mounted,
        format!("{ralsh} mount {bad} device=/dev/nonexistent fstype=ext4 ensure=mounted"),
        "cat /etc/fstab".to_owned(),
        format!("{ralsh} mount {swap} device=/dev/nonexistent fstype=swap ensure=mounted"),
        "cat /etc/fstab".to_owned(),
    ];
    let mut command = Command::new("unshare");
    command
        .args(["-rm", "sh", "-c", HIDE_PYTHON, "sh"])
        .arg(orig.path())
        .args(&lines)
        .env("WORK", work.path())
        .env("HOME", sandbox.cache.path())
        .env("XDG_CACHE_HOME", sandbox.cache.path());
    let out = run(&mut command);
    let out = out.expect(0);
    let sections: Vec<&str> = out.stdout.split("== ").skip(1).collect();
    assert_eq!(sections.len(), lines.len(), "{}", out.stdout);
    let ends = |at: usize, text: &str| {
        assert!(
            sections[at].ends_with(text),
            "section {at} should end with {text:?}:\n{}",
            sections[at]
        );
    };
    assert!(!sections[0].contains("exit status"), "{}", sections[0]);
    assert!(
        sections[1].contains("ensure: 'absent' -> 'mounted'"),
        "{}",
        sections[1]
    );
    ends(2, "\n1\n");
    ends(3, "no changes needed\n");
    assert!(
        sections[4].contains("ensure: 'mounted' -> 'unmounted' (noop: would change)"),
        "{}",
        sections[4]
    );
    ends(5, "\n1\n");
    assert!(
        sections[6].contains("ensure: 'mounted' -> 'unmounted'"),
        "{}",
        sections[6]
    );
    ends(7, "\n0\nexit status 1\n");
    // mount(8) runs first, told the entry in full; it failed, so fstab
    // was not written.
    assert!(
        sections[8].contains(&format!(
            "mount -t ext4 -o defaults -- /dev/nonexistent {bad} failed (exit status 32):\n"
        )),
        "{}",
        sections[8]
    );
    assert!(
        sections[8].contains("fstab was left as it was"),
        "{}",
        sections[8]
    );
    let fstab = format!("tmpfs\t{mnt}\ttmpfs\tsize=1m\t0\t0\n");
    ends(9, &fstab);
    // A swap entry is never mounted (nor added to fstab by the attempt).
    assert!(
        sections[10].contains("ensure: mounted does not apply to the swap entry"),
        "{}",
        sections[10]
    );
    ends(11, &fstab);
    for section in &sections {
        assert!(!section.contains("python"), "{section}");
    }
    assert_eq!(
        std::fs::read("/etc/fstab").ok(),
        system_fstab,
        "the system's fstab is untouched"
    );
}

/// One set call of two mount points (as `ral apply` batches a provider's
/// updates) where the mount of one fails: the failure takes the place of
/// that mount point's report only; the other's change is still reported.
fn a_failed_mount_fails_its_own_mount_point_alone() {
    let work = tempfile::tempdir().unwrap();
    let system_fstab = std::fs::read("/etc/fstab").ok();
    let kept = format!("{}/kept", work.path().display());
    let bad = format!("{}/bad", work.path().display());
    let update = |name: &str, should: Json| json!({"name": name, "is": {}, "should": should});
    let request = json!({"ral": {"noop": false}, "updates": [
        update(&kept, json!({"ensure": "present", "device": "tmpfs", "fstype": "tmpfs"})),
        update(&bad, json!({"ensure": "mounted", "device": "/dev/nonexistent", "fstype": "ext4"})),
    ]});
    let script =
        format!("{PRIVATE_ETC}\nprintf '%s' \"$REQUEST\" | \"$PROGRAM\" fstab ral_action=set\n");
    let mut command = Command::new("unshare");
    command
        .args(["-rm", "sh", "-c", &script])
        .env("WORK", work.path())
        .env("REQUEST", request.to_string())
        .env("PROGRAM", env!("CARGO_BIN_EXE_ral-provider"));
    let out = run(&mut command);
    let answer: Json = serde_json::from_str(&out.expect(0).stdout).unwrap();
    let changes = answer["changes"].as_array().unwrap();
    let of = |name: &str| -> Vec<&Json> { changes.iter().filter(|c| c["name"] == name).collect() };
    let error = of(&bad)
        .iter()
        .find_map(|c| c["error"]["message"].as_str())
        .unwrap_or_default();
    assert!(
        error.contains(&format!("{bad} failed (exit status 32)"))
            && error.contains("fstab was left as it was"),
        "{answer}"
    );
    assert!(
        of(&kept)
            .iter()
            .any(|c| c.get("error").is_none() && c.to_string().contains("present")),
        "the other mount point's change is reported: {answer}"
    );
    assert_eq!(
        std::fs::read("/etc/fstab").ok(),
        system_fstab,
        "the system's fstab is untouched"
    );
}
