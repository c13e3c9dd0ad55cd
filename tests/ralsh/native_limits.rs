//! The native providers outside ralsh's process and at their limits: the
//! program that serves them (`ral-provider`), and an edit past
//! `--timeout`, which ralsh cannot kill in its own process as it kills a
//! program: it stops at its deadline and writes nothing more.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use crate::support::{fixtures_dir, Sandbox};

#[test]
fn a_native_edit_past_its_time_limit_writes_nothing() {
    let sandbox = Sandbox::new();
    sandbox.write("etc/hosts", "10.0.0.1 db\n");
    // Another writer holds the hosts file's lock until told to let go.
    let mut holder = Command::new("python3")
        .args(["-I", "-S"])
        .arg(fixtures_dir().join("hold_lock.py"))
        .arg(sandbox.root().join("etc/.hosts.ral-lock"))
        .args(["flock", "forever"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut said = BufReader::new(holder.stdout.take().unwrap());
    let mut line = String::new();
    said.read_line(&mut line).unwrap();
    assert_eq!(line, "locked\n");
    // The edit would wait a minute for the lock, but the call has a
    // second: the wait ends with it, and nothing is written.
    let out = sandbox
        .command()
        .args([
            "--timeout",
            "1",
            "--lock-timeout",
            "60",
            "host",
            "web",
            "ip=10.0.0.2",
        ])
        .output()
        .unwrap();
    drop(holder.stdin.take());
    holder.wait().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains(
            "host::etc_hosts: update reported an error: the call ran past its time limit of 1s \
             (--timeout); this was not done"
        ),
        "{stderr}"
    );
    assert_eq!(
        sandbox.read("etc/hosts"),
        "10.0.0.1 db\n",
        "nothing written"
    );
    assert_eq!(
        sandbox.names_in_dir("etc"),
        [".hosts.ral-lock", "hosts"],
        "no temporary file left"
    );
}

#[test]
fn the_native_providers_program_says_how_it_is_used_and_serves_them() {
    let program = env!("CARGO_BIN_EXE_ral-provider");
    for args in [&[][..], &["bogus"], &["--help"]] {
        let out = Command::new(program).args(args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(
            stderr.contains("usage: ral-provider NAME ral_action=ACTION")
                && stderr.contains("etc_hosts"),
            "{stderr}"
        );
    }
    let out = Command::new(program).args(["bogus"]).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("'bogus' is not one of"));
    let described = Command::new(program)
        .args(["etc_hosts", "ral_action=describe"])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&described.stdout),
        std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/providers/etc_hosts.yaml"
        ))
        .unwrap()
    );
}
