//! `ral plan` and `ral apply` with the bundled providers on a fake root:
//! what `ralsh --yaml` prints plans nothing, and defaults a provider does
//! not report and forced removals verify. (The whole manifest of groups,
//! users, files, hosts entries and mounts sets a file's owner, which takes
//! root: it is in tests/needs/as_root.rs.)

use crate::plans::Bench;
use crate::support::{run, Sandbox};

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

#[test]
fn an_array_of_names_orders_a_resource_after_each_and_problems_are_on_their_own_lines() {
    // A user's supplementary groups, a list, make it wait for each group.
    let sandbox = Sandbox::seeded();
    let manifests = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let path = manifests.path().join(name);
        std::fs::write(&path, text).unwrap();
        path.to_str().unwrap().to_owned()
    };
    let site = write(
        "site.yaml",
        "group:\n  devs: {gid: 2000}\nuser:\n  carol: {uid: 1500, gid: 2000, groups: [devs], \
         home: /home/carol, shell: /bin/bash}\n",
    );
    run(&mut sandbox.ral_command("plan", &[&site]))
        .expect(0)
        .stdout_has("+ user[carol] (waits for group[devs])");
    // An attribute or a reference written on a line of its own is
    // reported at that line, not at its resource's.
    let wrong = write(
        "wrong.yaml",
        "host:\n  web:\n    ip: 10.0.0.5\n    require: \"host[nosuch]\"\n  db:\n    ip: 10.0.0.6\n    \
         aliases: [x]\n",
    );
    run(&mut sandbox.ral_command("plan", &[&wrong]))
        .expect(2)
        .stderr_has(
            "wrong.yaml:4: host[web]: require host[nosuch]: no such resource in the manifest",
        )
        .stderr_has("wrong.yaml:7: host[db]: unknown attribute 'aliases'");
}

/// A write-only parameter is never read back: the store says what ral
/// applied (`managehome: true` settled for ever before).
#[test]
fn write_only_parameters_ral_applied_are_settled() {
    let bench = Bench::new();
    bench
        .sandbox
        .write("etc/passwd", "root:x:0:0:root:/root:/bin/sh\n");
    bench.sandbox.write("etc/group", "root:x:0:\n");
    bench.sandbox.write("etc/shadow", "root:*:1::::::\n");
    bench.sandbox.write("home/.keep", "");
    let m = bench.manifest(
        "m.yaml",
        "user:\n  shop: {managehome: true, home: /home/shop}\n",
    );
    bench.ral("apply", &[&m]).expect(0);
    assert!(bench.sandbox.root().join("home/shop").is_dir());
    bench
        .ral("plan", &["--detailed-exitcodes", &m])
        .expect(0)
        .stdout_has("Plan: 0 to create, 0 to change, 0 to remove; 1 unchanged.");
    // Beside another change it is passed on again, but is none itself.
    let other = bench.manifest(
        "other.yaml",
        "user:\n  shop: {managehome: true, home: /home/shop, comment: Shop}\n",
    );
    let plan = bench.ral("plan", &[&other]);
    plan.expect(0).stdout_has("comment: '' -> 'Shop'");
    assert!(!plan.stdout.contains("managehome"), "{}", plan.stdout);
    // Another value than the one applied is a change, passed on.
    let m = bench.manifest(
        "m2.yaml",
        "user:\n  shop: {managehome: false, home: /home/shop}\n",
    );
    bench
        .ral("plan", &["--detailed-exitcodes", &m])
        .expect(2)
        .stdout_has("managehome: (none) -> false");
}
