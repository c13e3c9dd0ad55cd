//! Hostile input paths for `ral plan` and `ral apply`: a FIFO,
//! `/dev/zero`, a directory and a file over 64 MiB are refused at once,
//! naming the file, instead of blocking or reading without end.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::plans::Bench;

/// Runs `command` with stdout and stderr captured, killing it and failing
/// the test when it has not ended within a generous bound. Its address
/// space is limited so that a regression reading `/dev/zero` without end
/// fails quickly instead of exhausting the machine's memory.
fn run_bounded(mut command: Command) -> (i32, String) {
    use std::os::unix::process::CommandExt;
    command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    // SAFETY: setrlimit is async-signal-safe and touches no memory of the
    // parent; the limit struct lives on the child's stack.
    unsafe {
        command.pre_exec(|| {
            let limit = libc::rlimit {
                rlim_cur: 2 << 30,
                rlim_max: 2 << 30,
            };
            if libc::setrlimit(libc::RLIMIT_AS, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = command.spawn().unwrap();
    let pid = child.id();
    let mut stderr = child.stderr.take().unwrap();
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        let status = child.wait().unwrap();
        let _ = sender.send((status.code().unwrap_or(-1), text));
    });
    match receiver.recv_timeout(Duration::from_secs(30)) {
        Ok(ended) => ended,
        Err(_) => {
            // SAFETY: kill(2) on the pid of our own child, not yet reaped
            // (the waiting thread has not returned).
            unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
            panic!("ral did not end within 30 s");
        }
    }
}

fn mkfifo(path: &std::path::Path) {
    assert!(Command::new("mkfifo").arg(path).status().unwrap().success());
}

#[test]
fn a_fifo_a_device_and_a_directory_are_refused_at_once_naming_the_file() {
    let bench = Bench::new();
    let fifo = bench.manifests.path().join("p.yaml");
    mkfifo(&fifo);
    let fifo = fifo.to_str().unwrap().to_owned();
    let dir = bench.manifests.path().to_str().unwrap().to_owned();
    for path in [fifo.as_str(), "/dev/zero", dir.as_str()] {
        for mode in ["plan", "apply"] {
            let (status, stderr) = run_bounded(bench.command(mode, &[path]));
            assert_eq!(status, 2, "ral {mode} {path}: {stderr}");
            assert!(
                stderr.contains(&format!(
                    "{path}: cannot read the manifest: it is not a regular file"
                )),
                "ral {mode} {path}: {stderr}"
            );
        }
    }
    assert_eq!(bench.take_calls(), Vec::<String>::new(), "nothing ran");
}

#[test]
fn a_manifest_over_64_mib_is_refused() {
    let bench = Bench::new();
    let big = bench.manifests.path().join("big.yaml");
    let file = std::fs::File::create(&big).unwrap();
    // Sparse: no disk is used for the hole.
    file.set_len((64 << 20) + 1).unwrap();
    drop(file);
    let big = big.to_str().unwrap();
    for mode in ["plan", "apply"] {
        let (status, stderr) = run_bounded(bench.command(mode, &[big]));
        assert_eq!(status, 2, "{stderr}");
        assert!(
            stderr.contains(&format!(
                "{big}: cannot read the manifest: it is larger than 67108864 bytes"
            )),
            "{stderr}"
        );
    }
}

#[test]
fn apply_reads_standard_input_once_as_a_manifest() {
    // `ral apply FILE` first looks whether FILE is a saved plan; for `-`
    // that look must not swallow the manifest.
    let bench = Bench::new();
    let mut command = bench.command("apply", &["-"]);
    command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command.spawn().unwrap();
    std::io::Write::write_all(child.stdin.as_mut().unwrap(), b"beta:\n  b1: {value: x}\n").unwrap();
    drop(child.stdin.take());
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert_eq!(bench.store("beta")["b1"]["value"], "x");
}
