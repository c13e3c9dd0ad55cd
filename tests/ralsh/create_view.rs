//! What `ralsh -j TYPE NAME attr=value...` shows of a resource it just
//! created is what the next read shows: every attribute, those left at
//! their defaults (a hosts entry's empty aliases, a user's shell) too.

use crate::support::{accounts_sandbox, run, Sandbox};

/// Creates the resource, reads it again, and compares the two views.
fn created_as_read(sandbox: &Sandbox, args: &[&str]) {
    let created = run(sandbox.command().arg("-j").args(args));
    created.expect(0);
    let created = created.json();
    let result = &created["result"][0];
    assert!(
        result["changes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["attr"] == "ensure"),
        "{args:?} created nothing: {result}"
    );
    let read = run(sandbox.command().arg("-j").args(&args[..2]));
    read.expect(0);
    assert_eq!(
        result["resource"],
        read.json()["resource"],
        "{args:?}: the view after the creation differs from the next read"
    );
}

#[test]
fn a_creation_shows_every_attribute_the_next_read_would() {
    let sandbox = accounts_sandbox();
    sandbox.write("etc/hosts", "127.0.0.1 localhost\n");
    sandbox.write("etc/fstab", "");
    created_as_read(&sandbox, &["host", "demo", "ip=10.0.0.9"]);
    created_as_read(&sandbox, &["group", "web", "gid=3000"]);
    created_as_read(&sandbox, &["user", "bob", "uid=3001", "gid=3000"]);
    created_as_read(
        &sandbox,
        &["mount", "/srv/data", "device=/dev/vdb1", "fstype=ext4"],
    );
    created_as_read(&sandbox, &["file", "/etc/motd", "content=hi"]);
}
