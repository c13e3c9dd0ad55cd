//! Every command whose reader goes away (`ral state show ID | head -c 10`)
//! ends quietly, with exit status 0, as a closed stdout does elsewhere:
//! the reader has seen what it wanted.

use std::path::Path;
use std::process::{Command, Stdio};

use crate::support::{run, Sandbox};

/// Runs `command` with its stdout closed before it writes anything: its
/// exit status and its stderr.
fn with_stdout_closed(command: &mut Command) -> (Option<i32>, String) {
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let output = child.wait_with_output().unwrap();
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// A root with a hosts file, and a manifest (in its own directory) that
/// adds one entry: the root, the directory and the manifest's path.
fn one_host() -> (Sandbox, tempfile::TempDir, String) {
    let sandbox = Sandbox::new();
    sandbox.write("etc/hosts", "127.0.0.1 localhost\n");
    let manifests = tempfile::tempdir().unwrap();
    let manifest = manifests.path().join("site.yaml");
    std::fs::write(&manifest, "host:\n  web: {ip: 10.0.0.5}\n").unwrap();
    let path = manifest.to_str().unwrap().to_owned();
    (sandbox, manifests, path)
}

#[test]
fn every_command_ends_quietly_and_successfully_when_its_reader_goes_away() {
    let (sandbox, _manifests, manifest) = one_host();
    let m = manifest.as_str();
    run(&mut sandbox.ral_command("apply", &[m])).expect(0);
    let history = run(&mut sandbox.ral_command("state", &["history", "-j"]));
    let history: serde_json::Value = serde_json::from_str(&history.expect(0).stdout).unwrap();
    let id = history["plans"][0]["id"].as_str().unwrap().to_owned();
    let check = || {
        let mut command = Command::new(env!("CARGO_BIN_EXE_ral"));
        command
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .args(["check", "--slow", "60"])
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("providers/etc_hosts.prov"));
        command
    };
    let mut commands: Vec<(String, Command)> = Vec::new();
    for args in [
        vec!["state", "list"],
        vec!["state", "list", "-j"],
        vec!["state", "history"],
        vec!["state", "show", &id],
        vec!["state", "show", &id, "-j"],
        vec!["plan", m],
        vec!["plan", "-j", m],
    ] {
        commands.push((
            format!("ral {}", args.join(" ")),
            sandbox.ral_command(args[0], &args[1..]),
        ));
    }
    commands.push(("ral check".to_owned(), check()));
    for args in [vec!["host"], vec!["-j", "host"], vec!["host", "web"]] {
        let mut command = sandbox.command();
        command.args(&args);
        commands.push((format!("ralsh {}", args.join(" ")), command));
    }
    for (name, mut command) in commands {
        let (status, stderr) = with_stdout_closed(&mut command);
        assert_eq!((status, stderr.as_str()), (Some(0), ""), "{name}");
    }
}

#[test]
fn a_reader_that_goes_away_in_the_middle_of_a_listing_ends_it_quietly() {
    // The provider lists two names, waits on a FIFO, then lists a third:
    // the reader takes the first bytes and goes, and only then does the
    // provider go on, so the end of the listing meets a closed pipe.
    use std::io::Read;
    for form in [&[][..], &["-j"], &["--yaml"]] {
        let sandbox = Sandbox::new();
        sandbox.write("flood", "gated");
        let gate = sandbox.root().join("gate");
        assert!(Command::new("mkfifo")
            .arg(&gate)
            .status()
            .unwrap()
            .success());
        let mut command = sandbox.fixture_command(&["--timeout", "20"]);
        let mut child = command
            .args(form)
            .arg("flood")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut first = [0u8; 5];
        child
            .stdout
            .as_mut()
            .unwrap()
            .read_exact(&mut first)
            .unwrap();
        drop(child.stdout.take());
        // ralsh may have met the closed pipe already and ended its
        // provider, which then never reads the gate.
        crate::support::write_fifo_while_running(&gate, b"go\n", &mut child);
        let output = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(
            (output.status.code(), stderr.as_ref()),
            (Some(0), ""),
            "{form:?}"
        );
    }
}

#[test]
fn a_closed_stdout_never_hides_the_outcome_or_what_a_command_writes() {
    let (sandbox, manifests, manifest) = one_host();
    let m = manifest.as_str();
    // Changes pending: 2 with --detailed-exitcodes, read or not.
    let (status, stderr) =
        with_stdout_closed(&mut sandbox.ral_command("plan", &["--detailed-exitcodes", m]));
    assert_eq!((status, stderr.as_str()), (Some(2), ""));
    // The saved plan is written all the same, and applies.
    let saved = manifests.path().join("p.plan");
    let (status, stderr) =
        with_stdout_closed(&mut sandbox.ral_command("plan", &["-o", saved.to_str().unwrap(), m]));
    assert_eq!((status, stderr.as_str()), (Some(0), ""));
    run(&mut sandbox.ral_command("apply", &[saved.to_str().unwrap()])).expect(0);
    assert!(sandbox.read("etc/hosts").contains("10.0.0.5"));
    // A provider that fails its check fails it, read or not.
    let noisy =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/check/providers/noisy.prov");
    let mut check = Command::new(env!("CARGO_BIN_EXE_ral"));
    check.args(["check", "--slow", "60"]).arg(&noisy);
    let (status, _) = with_stdout_closed(&mut check);
    assert_eq!(status, Some(1));
    // The manual ends quietly.
    let mut manual = Command::new(env!("CARGO_BIN_EXE_ral"));
    manual.arg("--man");
    let (status, stderr) = with_stdout_closed(&mut manual);
    assert_eq!((status, stderr.as_str()), (Some(0), ""));
}
