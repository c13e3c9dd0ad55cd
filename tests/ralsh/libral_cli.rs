//! libral's command-line habits: `ralsh` prints one qualified name per
//! line (its bash completion reads them), `-q` prints nothing but errors,
//! and mistyped options are errors, not silently ignored.

use crate::support::{fixtures_dir, Sandbox};

#[test]
fn ralsh_alone_prints_sorted_qualified_names_and_v_adds_summaries() {
    let sandbox = Sandbox::new();
    let broken = fixtures_dir().join("broken");
    let run = sandbox.ralsh(&["-I", broken.to_str().unwrap()]);
    let lines: Vec<&str> = run.expect(0).stdout.lines().collect();
    let mut sorted = lines.clone();
    sorted.sort();
    assert_eq!(lines, sorted);
    assert!(lines.contains(&"host::etc_hosts"), "{lines:?}");
    assert!(lines.contains(&"user::etc_passwd"), "{lines:?}");
    assert!(
        lines.contains(
            &"picky::unsuitable (unsuitable: command 'ral_no_such_command_xyz' is not on PATH)"
        ),
        "{lines:?}"
    );
    // Names only: each line is a qualified name, with the reason where
    // a provider is unsuitable.
    for line in &lines {
        let name = line.split(" (unsuitable: ").next().unwrap();
        assert!(!name.contains(' ') && name.contains("::"), "{line}");
    }

    let long = sandbox.ralsh(&["-v", "-I", broken.to_str().unwrap()]);
    let host = long
        .expect(0)
        .stdout
        .lines()
        .find(|l| l.starts_with("host::etc_hosts "))
        .unwrap()
        .to_owned();
    assert!(
        host.trim_end().len() > "host::etc_hosts".len() + 10,
        "{host}"
    );
    assert_eq!(long.stdout.lines().count(), lines.len());
    // In the same order as the names alone.
    let long_names: Vec<&str> = long
        .stdout
        .lines()
        .map(|line| line.split_whitespace().next().unwrap())
        .collect();
    let names: Vec<&str> = lines
        .iter()
        .map(|line| line.split_whitespace().next().unwrap())
        .collect();
    assert_eq!(long_names, names);
    // And -j, in the same order.
    let doc = sandbox
        .ralsh(&["-j", "-I", broken.to_str().unwrap()])
        .expect(0)
        .json();
    let json_names: Vec<String> = doc["providers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(json_names, names);
}

#[test]
fn quiet_prints_nothing_and_the_exit_status_tells() {
    let sandbox = Sandbox::new();
    sandbox.write("etc/hosts", "10.0.0.1 db\n");
    let listed = sandbox.ralsh(&["-q", "host"]);
    assert_eq!(listed.expect(0).stdout, "");
    assert_eq!(listed.stderr, "");
    let found = sandbox.ralsh(&["-q", "-a", "host", "db"]);
    assert_eq!(found.expect(0).stdout, "");
    let missing = sandbox.ralsh(&["-q", "-a", "host", "nothere"]);
    assert_eq!(missing.expect(1).stdout, "");
    let changed = sandbox.ralsh(&["-q", "host", "db", "ip=10.0.0.2"]);
    assert_eq!(changed.expect(0).stdout, "");
    assert_eq!(
        sandbox.read("etc/hosts"),
        "10.0.0.2\tdb\n",
        "the change was made"
    );
    // Errors still go to stderr, and with -j no JSON reaches stdout.
    let failed = sandbox.ralsh(&["-q", "-j", "host", "db", "ip=not-an-ip"]);
    assert_eq!(failed.expect(2).stdout, "");
    failed.stderr_has("not-an-ip");
    // -l still sets the log level.
    let logged = sandbox.ralsh(&["-q", "-l", "info", "host"]);
    assert_eq!(logged.expect(0).stdout, "");
}

#[test]
fn an_unknown_log_level_and_a_missing_include_dir_are_errors() {
    let sandbox = Sandbox::new();
    sandbox
        .ralsh(&["-l", "verbose", "host"])
        .expect(2)
        .stderr_has("'verbose' is not a log level");
    sandbox.ralsh(&["-l", "ral=debug,warn", "host"]).expect(0);
    sandbox
        .ralsh(&["-l", "ral=loud", "host"])
        .expect(2)
        .stderr_has("'ral=loud' is not a log level");
    sandbox
        .ralsh(&["-I", "/nonexistent/ral-data", "host"])
        .expect(2)
        .stderr_has("-I /nonexistent/ral-data: no such directory");
}
