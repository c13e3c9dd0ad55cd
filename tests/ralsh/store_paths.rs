//! Where the state store lives: its files stay inside the root whatever
//! links are planted there, one lock per store whatever path reaches it,
//! private files, and one store per machine and root (a `--state` file
//! shared by two roots, or a target's store under two roots, is never
//! mixed up).

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::Stdio;

use serde_json::Value as Json;

use crate::plans::Bench;
use crate::support::run;

const ONE: &str = "alpha:\n  a1: {value: one}\n";

/// The mode bits of `path` (not following a link).
fn mode(path: &Path) -> u32 {
    std::fs::symlink_metadata(path).unwrap().mode() & 0o777
}

#[test]
fn a_store_file_linked_outside_the_root_is_refused_and_the_file_left_as_it_was() {
    for name in [
        "state.db",
        "state.db-wal",
        "state.db-shm",
        "state.db-journal",
        "state.db.lock",
        "state.db.key",
    ] {
        let bench = Bench::new();
        let outside = tempfile::tempdir().unwrap();
        let target = outside.path().join("shadow");
        std::fs::write(&target, "root:$6$secret:19000::::::\n").unwrap();
        let dir = bench.sandbox.root().join("var/lib/ral");
        std::fs::create_dir_all(&dir).unwrap();
        std::os::unix::fs::symlink(&target, dir.join(name)).unwrap();
        let m = bench.manifest("m.yaml", ONE);
        bench
            .ral("apply", &[&m])
            .expect(2)
            .stderr_has(&format!("var/lib/ral/{name}: is a symbolic link"));
        assert_eq!(
            std::fs::read_to_string(&target).unwrap(),
            "root:$6$secret:19000::::::\n",
            "{name}"
        );
        assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 1);
        assert_eq!(bench.sandbox.read("alpha.json"), "", "{name}: nothing ran");
    }
}

#[test]
fn a_linked_directory_below_the_root_is_refused_and_nothing_is_written_outside() {
    for (link, made) in [("var", ""), ("var/lib", "var"), ("var/lib/ral", "var/lib")] {
        let bench = Bench::new();
        let outside = tempfile::tempdir().unwrap();
        let root = bench.sandbox.root();
        std::fs::create_dir_all(root.join(made)).unwrap();
        std::os::unix::fs::symlink(outside.path(), root.join(link)).unwrap();
        let m = bench.manifest("m.yaml", ONE);
        bench
            .ral("apply", &[&m])
            .expect(2)
            .stderr_has(&format!("{link}: is a symbolic link"));
        // A plan reads through no link either.
        bench
            .ral("plan", &[&m])
            .expect(2)
            .stderr_has(&format!("{link}: is a symbolic link"));
        assert_eq!(
            std::fs::read_dir(outside.path()).unwrap().count(),
            0,
            "{link}: something was written outside the root"
        );
    }
}

#[test]
fn an_apply_through_another_path_to_a_store_in_use_is_refused_naming_the_holder() {
    let bench = Bench::new();
    bench.sandbox.write("wait", "b1\n");
    let m = bench.manifest("m.yaml", "beta:\n  b1: {value: x}\n");
    let mut holder = bench
        .command("apply", &[&m])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    bench.await_started("b1");
    // Should an assertion fail, neither the holder nor its provider
    // (waiting for a release that would never come) is left running.
    let _running = crate::pids::KillOnDrop::new(&[
        holder.id() as i32,
        crate::pids::pids_in(&bench.sandbox.root().join("started-b1"))[0],
    ]);
    let dir = bench.sandbox.root().join("var/lib/ral");
    let aliases = tempfile::tempdir().unwrap();
    let linked_dir = aliases.path().join("linked");
    std::os::unix::fs::symlink(&dir, &linked_dir).unwrap();
    let hard = aliases.path().join("other");
    std::fs::create_dir(&hard).unwrap();
    std::fs::hard_link(dir.join("state.db"), hard.join("state.db")).unwrap();
    let holder_named = format!("another ral apply is running (process {}", holder.id());
    // Another manifest, which waits for nothing, and removes nothing.
    let other = bench.manifest("other.yaml", ONE);
    for alias in [linked_dir.join("state.db"), hard.join("state.db")] {
        let state = alias.to_str().unwrap();
        let second = bench.ral("apply", &["--keep-removed", "--state", state, &other]);
        second.expect(2).stderr_has(&holder_named);
    }
    assert_eq!(bench.sandbox.read("alpha.json"), "", "the second apply ran");
    // A link to the file itself is no way in.
    let link = aliases.path().join("link.db");
    std::os::unix::fs::symlink(dir.join("state.db"), &link).unwrap();
    bench
        .ral("apply", &["--state", link.to_str().unwrap(), &m])
        .expect(2)
        .stderr_has("link.db: is a symbolic link");
    // The second name would be a way around the lock later on.
    std::fs::remove_file(hard.join("state.db")).unwrap();
    // While it runs, SQLite's files are private too.
    for name in ["state.db", "state.db-wal", "state.db-shm", "state.db.lock"] {
        assert_eq!(mode(&dir.join(name)), 0o600, "{name}");
    }

    // The holder, which held the lock on the database file throughout,
    // ends its apply and records it.
    bench.sandbox.write("release", "");
    assert!(holder.wait().unwrap().success());
    let listed = run(bench.sandbox.ral_command("state", &[]).args(["-j", "list"]));
    listed.expect(0);
    let doc: Json = serde_json::from_str(&listed.stdout).unwrap();
    assert_eq!(doc["items"][0]["name"], "b1");
    assert_eq!(doc["items"][0]["state"], "Applied");
}

#[test]
fn a_second_name_of_the_database_is_refused_even_when_nobody_holds_it() {
    let bench = Bench::new();
    let m = bench.manifest("m.yaml", ONE);
    bench.ral("apply", &[&m]).expect(0);
    let db = bench.sandbox.root().join("var/lib/ral/state.db");
    let other = tempfile::tempdir().unwrap();
    std::fs::hard_link(&db, other.path().join("copy.db")).unwrap();
    bench
        .ral("plan", &[&m])
        .expect(2)
        .stderr_has("state.db: has 2 names (hard links)");
}

#[test]
fn the_store_files_are_private_and_a_readable_store_is_made_private() {
    let bench = Bench::new();
    let m = bench.manifest("m.yaml", ONE);
    bench.ral("apply", &[&m]).expect(0);
    let dir = bench.sandbox.root().join("var/lib/ral");
    assert_eq!(mode(&dir), 0o700);
    let mut names = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let entry = entry.unwrap();
        names.push(entry.file_name().into_string().unwrap());
        assert_eq!(mode(&entry.path()), 0o600, "{:?}", entry.file_name());
    }
    names.sort();
    assert_eq!(names, ["state.db", "state.db.key", "state.db.lock"]);
    // A store made before (0644) is private after the next run.
    std::fs::set_permissions(dir.join("state.db"), std::fs::Permissions::from_mode(0o644)).unwrap();
    bench.ral("plan", &[&m]).expect(0);
    assert_eq!(mode(&dir.join("state.db")), 0o600);
}

#[test]
fn a_state_file_shared_by_two_roots_is_refused() {
    let bench = Bench::new();
    let other = Bench::new();
    let shared = bench.manifests.path().join("shared.db");
    let shared = shared.to_str().unwrap();
    let m = bench.manifest("m.yaml", ONE);
    bench.ral("apply", &["--state", shared, &m]).expect(0);
    let refused = other.ral("plan", &["--state", shared, &m]);
    refused
        .expect(2)
        .stderr_has(&format!(
            "state store {shared}: it keeps the state of local, root {}",
            bench.sandbox.root().display()
        ))
        .stderr_has(&format!(
            "is used now for local, root {}",
            other.sandbox.root().display()
        ));
    other.ral("apply", &["--state", shared, &m]).expect(2);
    assert_eq!(
        other.sandbox.read("alpha.json"),
        "",
        "nothing ran on the other root"
    );
    // The root it was made for still uses it.
    bench.ral("plan", &["--state", shared, &m]).expect(0);
}
