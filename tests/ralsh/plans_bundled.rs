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

/// The first of the reported applies: a group, and a user of its gid
/// that requires it (and a hosts entry, so that no manifest is empty).
const A1: &str = "host:\n  h.example: {ip: 10.0.0.9}\ngroup:\n  g: {gid: 3000}\nuser:\n  u: {gid: \
                  3000, require: \"Group[g]\"}\n";
/// The last: neither the group nor the user.
const A3: &str = "host:\n  h.example: {ip: 10.0.0.9}\n";

/// Whether `name` has a line in the sandbox's `etc/FILE`.
fn has_line(sandbox: &Sandbox, file: &str, name: &str) -> bool {
    (sandbox.read(&format!("etc/{file}")).lines()).any(|line| line.starts_with(&format!("{name}:")))
}

#[test]
fn a_group_and_its_user_removed_together_go_in_one_run_whatever_the_key_order() {
    let bench = Bench::seeded();
    let sandbox = &bench.sandbox;
    let made = bench.manifest(
        "made.yaml",
        "group:\n  bob: {gid: 3100}\nuser:\n  bob: {gid: 3100}\n",
    );
    run(&mut sandbox.ral_command("apply", &[&made])).expect(0);
    // The group first: its removal must still wait for the user's.
    let gone = bench.manifest(
        "gone.yaml",
        "group:\n  bob: {ensure: absent}\nuser:\n  bob: {ensure: absent}\n",
    );
    run(&mut sandbox.ral_command("apply", &[&gone]))
        .expect(0)
        .stdout_has("Apply complete: 2 removed");
    assert!(!has_line(sandbox, "passwd", "bob") && !has_line(sandbox, "group", "bob"));
}

#[test]
fn a_group_made_after_its_user_is_still_removed_after_it_when_both_leave_the_manifests() {
    let bench = Bench::seeded();
    let sandbox = &bench.sandbox;
    let a1 = bench.manifest("a1.yaml", A1);
    run(&mut sandbox.ral_command("apply", &[&a1])).expect(0);
    // Both exist: the group now requires the user, and the store keeps
    // that edge (the user's gid is left as it is).
    let a2 = bench.manifest(
        "a2.yaml",
        "host:\n  h.example: {ip: 10.0.0.9}\ngroup:\n  g: {gid: 3000, members: [u], require: \
         \"User[u]\"}\nuser:\n  u: {}\n",
    );
    run(&mut sandbox.ral_command("apply", &[&a2])).expect(0);
    // Neither is listed: the stored edge reversed would remove the group,
    // u's primary group, first; it is removed after the user.
    let a3 = bench.manifest("a3.yaml", A3);
    run(&mut sandbox.ral_command("apply", &[&a3]))
        .expect(0)
        .stdout_has("Apply complete: 2 removed");
    assert!(!has_line(sandbox, "passwd", "u") && !has_line(sandbox, "group", "g"));
    run(&mut sandbox.ral_command("plan", &["--detailed-exitcodes", &a3]))
        .expect(0)
        .stdout_has("0 to create, 0 to change, 0 to remove");
}

#[test]
fn the_three_applies_of_the_report_end_with_both_removed() {
    // As reported: a2 lists the user in the members of its primary group
    // and makes the group require it, which wins over the user's gid; the
    // store keeps the group after the user, and a3 removes both.
    let bench = Bench::seeded();
    let sandbox = &bench.sandbox;
    let a1 = bench.manifest("a1.yaml", A1);
    let a2 = bench.manifest(
        "a2.yaml",
        "host:\n  h.example: {ip: 10.0.0.9}\ngroup:\n  g: {gid: 3000, members: [u], require: \
         \"User[u]\"}\nuser:\n  u: {gid: 3000}\n",
    );
    let a3 = bench.manifest("a3.yaml", A3);
    run(&mut sandbox.ral_command("apply", &[&a1])).expect(0);
    run(&mut sandbox.ral_command("apply", &[&a2]))
        .expect(0)
        .stdout_has("Apply complete: 1 changed");
    assert!(sandbox.read("etc/group").contains("g:x:3000:u\n"));
    run(&mut sandbox.ral_command("apply", &[&a3]))
        .expect(0)
        .stdout_has("2 removed");
    assert!(!has_line(sandbox, "passwd", "u") && !has_line(sandbox, "group", "g"));
}

#[test]
fn users_and_groups_made_together_converge_in_one_run_in_any_key_order() {
    let groups = "group:\n  h: {gid: 3001, members: [u]}\n  g: {gid: 3000}\n";
    let users = "user:\n  u: {gid: 3000}\n";
    for text in [format!("{groups}{users}"), format!("{users}{groups}")] {
        let bench = Bench::seeded();
        let sandbox = &bench.sandbox;
        let m = bench.manifest("m.yaml", &text);
        run(&mut sandbox.ral_command("apply", &[&m]))
            .expect(0)
            .stdout_has("Apply complete: 3 created");
        run(&mut sandbox.ral_command("plan", &["--detailed-exitcodes", &m]))
            .expect(0)
            .stdout_has("0 to create, 0 to change, 0 to remove; 3 unchanged");
    }
}

#[test]
fn a_user_s_groups_in_another_order_than_the_group_file_s_converge() {
    // The group file orders a user's groups; a manifest need not.
    let bench = Bench::seeded();
    let sandbox = &bench.sandbox;
    let m = bench.manifest(
        "m.yaml",
        "group:\n  ga: {gid: 2000}\n  gb: {gid: 2001}\nuser:\n  u: {uid: 1500, groups: [gb, ga]}\n",
    );
    run(&mut sandbox.ral_command("apply", &[&m]))
        .expect(0)
        .stdout_has("Apply complete: 3 created");
    run(&mut sandbox.ral_command("plan", &["--detailed-exitcodes", &m]))
        .expect(0)
        .stdout_has("0 to create, 0 to change, 0 to remove; 3 unchanged");
    // A change of the set is still one.
    let more = bench.manifest(
        "more.yaml",
        "group:\n  ga: {gid: 2000}\n  gb: {gid: 2001}\nuser:\n  u: {uid: 1500, groups: [gb]}\n",
    );
    run(&mut sandbox.ral_command("apply", &[&more]))
        .expect(0)
        .stdout_has("1 changed");
    assert!(sandbox.read("etc/group").contains("ga:x:2000:\n"));
}

#[test]
fn a_new_group_listing_the_new_user_of_its_gid_is_refused_with_the_way_out() {
    let bench = Bench::seeded();
    let sandbox = &bench.sandbox;
    let before = [sandbox.read("etc/passwd"), sandbox.read("etc/group")];
    let m = bench.manifest(
        "m.yaml",
        "group:\n  g: {gid: 3000, members: [u]}\nuser:\n  u: {gid: 3000}\n",
    );
    run(&mut sandbox.ral_command("apply", &[&m]))
        .expect(2)
        .stderr_has("m.yaml:2: dependency cycle: group[g] (")
        .stderr_has("group[g]'s members name user[u], and user[u]'s gid 3000 is group[g]'s gid")
        .stderr_has("needs no listing here (glibc counts it a member through its gid)")
        .stderr_has("give the group in the user's groups instead");
    assert_eq!(
        [sandbox.read("etc/passwd"), sandbox.read("etc/group")],
        before
    );
    // Where both exist, the same manifest plans nothing.
    let made = bench.manifest(
        "made.yaml",
        "group:\n  g: {gid: 3000}\nuser:\n  u: {gid: 3000, groups: [g]}\n",
    );
    run(&mut sandbox.ral_command("apply", &[&made]))
        .expect(0)
        .stdout_has("Apply complete: 2 created");
    assert!(sandbox.read("etc/group").contains("g:x:3000:u\n"));
    run(&mut sandbox.ral_command("plan", &["--detailed-exitcodes", &m]))
        .expect(0)
        .stdout_has("0 to create, 0 to change, 0 to remove; 2 unchanged");
}
