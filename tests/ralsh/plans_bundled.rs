//! `ral apply` end to end with the bundled providers on a seeded fake root:
//! a manifest of groups, users, files, hosts entries and mounts converges
//! in the order the metadata implies (a file after its owner, group and
//! parent directory), the next plan is empty, and the root holds exactly
//! what the manifest says and nothing else changed.

use std::collections::BTreeSet;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

use crate::support::{run, tree_snapshot, Sandbox};

const MANIFEST: &str = "\
group:
  devs: {gid: 2000}
user:
  carol: {uid: 1500, gid: 2000, home: /home/carol, shell: /bin/bash, groups: [devs]}
file:
  /srv/app/app.ini:
    content: \"port = 80\\n\"
    mode: \"0640\"
    owner: carol
    group: devs
  /srv/app: {ensure: directory, mode: \"0750\"}
host:
  db.internal: {ip: 10.0.0.5, host_aliases: [db]}
mount:
  /data: {device: LABEL=data, fstype: ext4}
";

#[test]
fn a_manifest_of_bundled_resources_converges_and_the_next_plan_is_empty() {
    let sandbox = Sandbox::seeded();
    let manifests = tempfile::tempdir().unwrap();
    let manifest: PathBuf = manifests.path().join("site.yaml");
    std::fs::write(&manifest, MANIFEST).unwrap();
    let m = manifest.to_str().unwrap();
    let before = tree_snapshot(sandbox.root());

    run(&mut sandbox.ral_command("plan", &[m]))
        .expect(0)
        .stdout_has("+ file[/srv/app/app.ini] (waits for ")
        .stdout_has("Plan: 6 to create, 0 to change, 0 to remove; 0 unchanged.");
    let plan_left = tree_snapshot(sandbox.root());
    assert_eq!(before, plan_left, "ral plan changed the root");

    run(&mut sandbox.ral_command("apply", &["--detailed-exitcodes", m]))
        .expect(2)
        .stdout_has("Tasks: 6 succeeded, 0 failed, 0 skipped, 0 stopped. Plan Successful");
    run(&mut sandbox.ral_command("plan", &["--detailed-exitcodes", m]))
        .expect(0)
        .stdout_has("Plan: 0 to create, 0 to change, 0 to remove; 6 unchanged.");

    let line_of = |file: &str, start: &str| -> String {
        sandbox
            .read(file)
            .lines()
            .find(|line| line.starts_with(start))
            .unwrap_or_else(|| panic!("{file} has no line starting {start:?}"))
            .to_owned()
    };
    assert_eq!(
        line_of("etc/passwd", "carol:"),
        "carol:x:1500:2000::/home/carol:/bin/bash"
    );
    assert_eq!(line_of("etc/group", "devs:"), "devs:x:2000:carol");
    assert!(line_of("etc/shadow", "carol:").starts_with("carol:"));
    let hosts: Vec<String> = line_of("etc/hosts", "10.0.0.5")
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    assert_eq!(hosts, ["10.0.0.5", "db.internal", "db"]);
    let mount: Vec<String> = line_of("etc/fstab", "LABEL=data")
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    assert_eq!(mount, ["LABEL=data", "/data", "ext4", "defaults", "0", "0"]);
    assert_eq!(sandbox.read("srv/app/app.ini"), "port = 80\n");
    let ini = std::fs::metadata(sandbox.root().join("srv/app/app.ini")).unwrap();
    assert_eq!(ini.mode() & 0o7777, 0o640);
    assert_eq!((ini.uid(), ini.gid()), (1500, 2000));
    let dir = std::fs::metadata(sandbox.root().join("srv/app")).unwrap();
    assert!(dir.is_dir());
    assert_eq!(dir.mode() & 0o7777, 0o750);

    // Nothing but what the manifest names changed. The empty lock files
    // the providers take (as useradd leaves etc/.pwd.lock) stay by design.
    let after = tree_snapshot(sandbox.root());
    // The state store is ral's own record, beside what it manages.
    let is_lock = |path: &String| {
        path.ends_with(".ral-lock") || path == "etc/.pwd.lock" || path.starts_with("var/lib/ral")
    };
    let changed: BTreeSet<String> = before
        .keys()
        .chain(after.keys())
        .filter(|path| before.get(*path) != after.get(*path))
        .map(|path| path.display().to_string())
        .filter(|path| !is_lock(path))
        .collect();
    let expected: BTreeSet<String> = [
        "etc/passwd",
        "etc/shadow",
        "etc/group",
        "etc/gshadow",
        "etc/hosts",
        "etc/fstab",
        "srv/app",
        "srv/app/app.ini",
    ]
    .into_iter()
    .map(str::to_owned)
    .collect();
    assert_eq!(changed, expected);
}

/// The listing of other types is covered by tests/ralsh/manifest.rs; a
/// file has no listing, so it is printed by name.
#[test]
fn what_ralsh_yaml_prints_for_files_by_name_plans_nothing() {
    let sandbox = Sandbox::seeded();
    let printed = run(sandbox
        .command()
        .args(["--yaml", "file", "/srv", "/etc/hosts"]));
    printed.expect(0);
    assert!(printed.stdout.starts_with("file:\n"), "{}", printed.stdout);
    let manifests = tempfile::tempdir().unwrap();
    let path = manifests.path().join("file.yaml");
    std::fs::write(&path, &printed.stdout).unwrap();
    let plan =
        run(&mut sandbox.ral_command("plan", &["--detailed-exitcodes", path.to_str().unwrap()]));
    plan.expect(0)
        .stdout_has("Plan: 0 to create, 0 to change, 0 to remove; 2 unchanged.");
}

#[test]
fn defaults_a_provider_does_not_report_and_forced_removals_verify() {
    let sandbox = Sandbox::seeded();
    sandbox.write("srv/old/inside", "x\n");
    let manifests = tempfile::tempdir().unwrap();
    let manifest = manifests.path().join("m.yaml");
    // special: daily leaves minute, hour and the rest unreported; their
    // defaults, which ral adds on creation, must not fail the check.
    std::fs::write(
        &manifest,
        "cron:\n  nightly: {user: root, command: /bin/true, special: daily}\nfile:\n  /srv/old: {ensure: absent, force: true}\n",
    )
    .unwrap();
    let m = manifest.to_str().unwrap();
    run(&mut sandbox.ral_command("apply", &["--detailed-exitcodes", m])).expect(2);
    assert!(!sandbox.root().join("srv/old").exists());
    run(&mut sandbox.ral_command("plan", &["--detailed-exitcodes", m]))
        .expect(0)
        .stdout_has("0 to create, 0 to change, 0 to remove");
}
