//! Plugin processes under `ral holo`: all three streams read at once, the
//! time limit, and Ctrl-C ending the plugin and removing the cache
//! directory and the apply lock.

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, Stdio};

use crate::pids::{assert_gone, KillOnDrop};

/// A root with one plugin `t` whose script is `body` (bash).
pub(crate) fn root_with_plugin(work: &Path, body: &str) {
    root_with_script(
        work,
        &format!(
            "#!/bin/bash\ncase \"$1\" in\ninfo) echo MIN_API_VERSION=3; echo MAX_API_VERSION=3 ;;\nscan) echo 'ENTITY: t:one' ;;\n{body}\nesac\n"
        ),
    );
}

/// A root (work/target) whose one plugin `t` is `script`.
pub(crate) fn root_with_script(work: &Path, script: &str) {
    let target = work.join("target");
    for dir in [
        "etc",
        "run",
        "tmp",
        "usr/share/holo/t",
        "usr/share/holo/generators",
        "usr/lib/holo",
    ] {
        std::fs::create_dir_all(target.join(dir)).unwrap();
    }
    std::fs::write(target.join("etc/holorc"), "plugin t\n").unwrap();
    let path = target.join("usr/lib/holo/holo-t");
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

pub(crate) fn ral(work: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_ral"));
    command
        .arg("holo")
        .args(args)
        .current_dir(work)
        .env("HOLO_ROOT_DIR", "./target/")
        .env("TMPDIR", "./target/tmp")
        .stdin(Stdio::null());
    command
}

pub(crate) fn cache_dirs_left(work: &Path) -> usize {
    std::fs::read_dir(work.join("target/tmp")).unwrap().count()
}

#[test]
fn stdout_stderr_and_fd3_are_read_together() {
    let work = tempfile::tempdir().unwrap();
    // 3000 lines on each stream, interleaved: about 300 kB each, far beyond
    // a pipe buffer, so reading one stream to its end first would deadlock.
    root_with_plugin(
        work.path(),
        r#"apply)
  line=$(printf 'y%.0s' {1..100})
  for i in $(seq 1 3000); do
    echo "out $i $line"; echo "err $i $line" >&2; echo "fd3 $i $line" >&3
  done
  echo "not changed" >&3 ;;"#,
    );
    let output = ral(work.path(), &["apply", "--json", "--timeout", "60"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let doc: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let result = &doc["results"][0];
    assert_eq!(result["result"], "not changed");
    assert_eq!(result["stdout"].as_array().unwrap().len(), 3000);
    assert_eq!(result["stderr"].as_array().unwrap().len(), 3000);
    assert_eq!(
        result["stderr"][2999].as_str().unwrap().split(' ').nth(1),
        Some("3000")
    );
    assert_eq!(cache_dirs_left(work.path()), 0);
}

#[test]
fn a_hung_plugin_is_killed_at_the_time_limit() {
    // The limit holds for every call: 5 s leaves info and scan ample time
    // on a busy machine.
    let work = tempfile::tempdir().unwrap();
    root_with_plugin(
        work.path(),
        "apply) echo started; sleep 1000 & echo $! > target/child.pid; wait ;;",
    );
    let output = ral(work.path(), &["apply", "--timeout", "5", "--strict"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("!! plugin t: apply did not finish within 5s"),
        "{stderr}"
    );
    assert_eq!(output.status.code(), Some(1), "--strict counts the failure");
    // The plugin's own child went with its process group.
    let child = pid_in(&work.path().join("target/child.pid"));
    assert!(!alive(child), "the plugin's child {child} still runs");
    assert!(!work.path().join("target/run/holo.pid").exists());
    assert_eq!(cache_dirs_left(work.path()), 0);
}

/// The process ID a plugin wrote to `file`.
#[test]
fn a_plugin_flooding_fd3_is_still_killed_at_the_time_limit() {
    let work = tempfile::tempdir().unwrap();
    // `yes` writes faster than it is read, so a read never finds the pipe
    // empty; the limit must hold between reads all the same. (Fd 3 is kept
    // only up to its cap, so nothing but the time limit ends this.)
    root_with_plugin(work.path(), "apply) exec yes 'not changed' >&3 ;;");
    let output = ral(work.path(), &["apply", "--timeout", "5", "--strict"])
        .stdout(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("!! plugin t: apply did not finish within 5s"),
        "{}",
        &stderr[..stderr.len().min(2000)]
    );
    assert_eq!(output.status.code(), Some(1));
    assert!(!work.path().join("target/run/holo.pid").exists());
    assert_eq!(cache_dirs_left(work.path()), 0);
}

#[test]
fn a_plugin_flooding_its_output_is_ended_before_it_fills_the_memory() {
    let work = tempfile::tempdir().unwrap();
    // --json keeps every output line: without a cap, this would grow by
    // hundreds of MB a second until the time limit.
    root_with_plugin(work.path(), "apply) exec yes 'out line' ;;");
    let output = ral(work.path(), &["apply", "--json", "--timeout", "300"])
        .output()
        .unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let result = &doc["results"][0];
    assert_eq!(result["result"], "failed", "{result}");
    assert_eq!(
        result["status"],
        "plugin t: apply: wrote more than 16 MiB of output; it was killed"
    );
    let kept = result["stdout"].as_array().unwrap().len();
    assert!(kept < 16 * 1024 * 1024 / 64, "{kept} lines kept");
    assert!(!work.path().join("target/run/holo.pid").exists());
    assert_eq!(cache_dirs_left(work.path()), 0);
}

fn pid_in(file: &Path) -> i32 {
    std::fs::read_to_string(file)
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// Whether a process exists and is not a zombie.
fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

/// Sends `signal` to `ral holo apply` while its plugin runs: the plugin
/// must die, the cache directory and the lock must go, and ral must end by
/// that same signal. (A signal ral does not forward kills ral alone,
/// leaving the plugin running and the lock and the cache behind.)
fn a_signal_ends_the_plugin_and_removes_the_cache_and_the_lock(signal: libc::c_int) {
    let work = tempfile::tempdir().unwrap();
    let ready = work.path().join("ready");
    let status = Command::new("mkfifo").arg(&ready).status().unwrap();
    assert!(status.success());
    root_with_plugin(
        work.path(),
        "apply) echo $$ > target/plugin.pid; echo ready > ready; exec -a holo-t-plugin sleep 1000 ;;",
    );
    let mut child = ral(work.path(), &["apply"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Blocks until the plugin opened the FIFO and wrote: it is running, and
    // ral holds the lock and the cache directory.
    let said = std::fs::read_to_string(&ready).unwrap();
    assert_eq!(said, "ready\n");
    assert!(work.path().join("target/run/holo.pid").exists());
    assert_eq!(cache_dirs_left(work.path()), 1);
    let plugin = pid_in(&work.path().join("target/plugin.pid"));
    let _plugin = KillOnDrop::new(&[plugin]);
    // SAFETY: sends a signal to the ral process this test started.
    unsafe { libc::kill(child.id() as i32, signal) };
    let status = child.wait().unwrap();
    assert_eq!(status.signal(), Some(signal), "ral ends by the signal");
    assert_gone(plugin, "holo-t");
    assert!(
        !work.path().join("target/run/holo.pid").exists(),
        "lock left"
    );
    assert_eq!(cache_dirs_left(work.path()), 0, "cache directory left");
}

#[test]
fn ctrl_c_ends_the_plugin_and_removes_the_cache_and_the_lock() {
    a_signal_ends_the_plugin_and_removes_the_cache_and_the_lock(libc::SIGINT);
}

#[test]
fn sigterm_ends_the_plugin_and_removes_the_cache_and_the_lock() {
    a_signal_ends_the_plugin_and_removes_the_cache_and_the_lock(libc::SIGTERM);
}

#[test]
fn sighup_ends_the_plugin_and_removes_the_cache_and_the_lock() {
    a_signal_ends_the_plugin_and_removes_the_cache_and_the_lock(libc::SIGHUP);
}

/// `!! ` lines as Holo colours them: anstyle's bold and red.
const RED: &str = "\x1b[1m\x1b[31m";

#[test]
fn colour_only_when_the_stream_is_a_terminal() {
    let work = tempfile::tempdir().unwrap();
    root_with_plugin(
        work.path(),
        "apply) echo '!! plugin says no' >&2; exit 1 ;;",
    );
    let plain = ral(work.path(), &["apply"])
        .env_remove("CLICOLOR_FORCE")
        .output()
        .unwrap();
    let text = [plain.stdout, plain.stderr].concat();
    assert!(String::from_utf8_lossy(&text).contains("!! exit status 1"));
    assert!(!text.contains(&0x1b), "no escape sequences off a terminal");

    // script(1) gives ral a terminal for both streams.
    let line = format!("{} holo apply", env!("CARGO_BIN_EXE_ral"));
    let tty = Command::new("script")
        .args(["-qec", &line, "/dev/null"])
        .current_dir(work.path())
        .env("HOLO_ROOT_DIR", "./target/")
        .env("TMPDIR", "./target/tmp")
        .env("TERM", "xterm")
        .env_remove("NO_COLOR")
        .env_remove("CLICOLOR")
        .env_remove("CLICOLOR_FORCE")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&tty.stdout);
    assert!(
        shown.contains("Working on \x1b[1mt:one\x1b[0m"),
        "{shown:?}"
    );
    assert!(
        shown.contains(&format!("{RED}!! plugin says no\x1b[0m")),
        "{shown:?}"
    );
    assert!(
        shown.contains(&format!("{RED}!! exit status 1\x1b[0m")),
        "{shown:?}"
    );
}

#[test]
fn colour_follows_clicolor_force_and_no_color_as_anstream_reads_them() {
    let work = tempfile::tempdir().unwrap();
    root_with_plugin(
        work.path(),
        "apply) echo '!! plugin says no' >&2; exit 1 ;;",
    );
    // Off a terminal, CLICOLOR_FORCE turns colour on for both streams.
    let mut forced = ral(work.path(), &["apply"]);
    forced.env("CLICOLOR_FORCE", "1").env_remove("NO_COLOR");
    let output = forced.output().unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
    );
    assert!(
        stdout.contains("Working on \x1b[1mt:one\x1b[0m"),
        "{stdout:?}"
    );
    assert!(
        stderr.contains(&format!("{RED}!! plugin says no\x1b[0m"))
            && stderr.contains(&format!("{RED}!! exit status 1\x1b[0m")),
        "{stderr:?}"
    );
    // NO_COLOR turns it off, on a terminal too (script(1) gives one).
    let mut no_color = ral(work.path(), &["apply"]);
    no_color.env("NO_COLOR", "1").env_remove("CLICOLOR_FORCE");
    let output = no_color.output().unwrap();
    let text = [output.stdout, output.stderr].concat();
    assert!(String::from_utf8_lossy(&text).contains("!! exit status 1"));
    assert!(
        !text.contains(&0x1b),
        "{:?}",
        String::from_utf8_lossy(&text)
    );
    let line = format!("{} holo apply", env!("CARGO_BIN_EXE_ral"));
    let tty = Command::new("script")
        .args(["-qec", &line, "/dev/null"])
        .current_dir(work.path())
        .env("HOLO_ROOT_DIR", "./target/")
        .env("TMPDIR", "./target/tmp")
        .env("TERM", "xterm")
        .env("NO_COLOR", "1")
        .env_remove("CLICOLOR_FORCE")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&tty.stdout);
    assert!(shown.contains("!! exit status 1"), "{shown:?}");
    assert!(!shown.contains('\x1b'), "{shown:?}");
}

/// True while `pid` is the escapee (its command line holds 6543).
fn escapee_running(pid: i32) -> bool {
    alive(pid)
        && std::fs::read(format!("/proc/{pid}/cmdline"))
            .unwrap_or_default()
            .windows(4)
            .any(|w| w == b"6543")
}

/// An apply that starts `sleep 6543` in a session of its own (setsid) with
/// `redirections`, and writes its PID to target/child.pid once it runs
/// there (told through a FIFO the plugin waits on).
fn escaping_apply(redirections: &str) -> String {
    format!(
        "apply) mkfifo target/ready\n  \
         (exec setsid sh -c 'echo $$ > \"$0\"; exec sleep 6543' target/ready {redirections}) &\n  \
         read pid < target/ready; echo \"$pid\" > target/child.pid\n  \
         echo 'not changed' >&3 ;;"
    )
}

/// Whether the escapee a plugin started still runs (it is killed then).
fn escapee_survived(work: &Path) -> bool {
    let child = pid_in(&work.join("target/child.pid"));
    let running = escapee_running(child);
    if running {
        // SAFETY: ends the process this test's plugin started.
        unsafe { libc::kill(child, libc::SIGKILL) };
    }
    running
}

#[test]
fn a_process_that_left_the_plugins_group_holding_its_output_is_killed() {
    let work = tempfile::tempdir().unwrap();
    root_with_plugin(work.path(), &escaping_apply(""));
    let output = ral(work.path(), &["apply", "--timeout", "120"])
        .output()
        .unwrap();
    assert!(
        !escapee_survived(work.path()),
        "the plugin's escaped child still runs"
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("kept its output open after it exited; they were killed"),
        "{stderr}"
    );
    assert_eq!(output.status.code(), Some(0), "{stderr}");
}

#[test]
fn a_fully_detached_daemon_a_plugin_started_is_ended_with_it() {
    let work = tempfile::tempdir().unwrap();
    root_with_plugin(
        work.path(),
        &escaping_apply("</dev/null >/dev/null 2>&1 3>&-"),
    );
    let output = ral(work.path(), &["apply", "--timeout", "120"])
        .output()
        .unwrap();
    assert!(
        !escapee_survived(work.path()),
        "the plugin's daemon still runs"
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stderr.contains("kept its output open"), "{stderr}");
    assert_eq!(output.status.code(), Some(0), "{stderr}");
}

/// A plugin whose scan prints its entity and starts `sleep 6543` out of
/// the plugin's process group, holding its output, by `leave`: `setsid`
/// (a session of its own) or `setpgid(0, 0)` (a group of its own). It
/// writes the escapee's PID to target/child.pid once it runs there.
fn escaping_scan(leave: &str) -> String {
    let leave = match leave {
        "setsid" => "setsid",
        "setpgid" => {
            "python3 -c 'import os, sys; os.setpgid(0, 0); os.execvp(sys.argv[1], sys.argv[1:])'"
        }
        other => panic!("{other}"),
    };
    format!(
        "#!/bin/bash\ncase \"$1\" in\ninfo) echo MIN_API_VERSION=3; echo MAX_API_VERSION=3 ;;\n\
         scan) echo 'ENTITY: t:one'\n  mkfifo target/ready\n  \
         (exec {leave} sh -c 'echo $$ > \"$0\"; exec sleep 6543' target/ready) &\n  \
         read pid < target/ready; echo \"$pid\" > target/child.pid ;;\nesac\n"
    )
}

#[test]
fn a_process_that_left_the_plugins_group_during_scan_is_killed() {
    // The issue's case for `ral holo scan` (the tests above go through
    // apply), with both ways out of the group. The time limit (10 s) only
    // keeps a broken ral from waiting long: the linger is 2 s.
    for leave in ["setsid", "setpgid"] {
        let work = tempfile::tempdir().unwrap();
        root_with_script(work.path(), &escaping_scan(leave));
        let output = ral(work.path(), &["scan", "--timeout", "10"])
            .output()
            .unwrap();
        let child = pid_in(&work.path().join("target/child.pid"));
        let _child = KillOnDrop::new(&[child]);
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(0), "{leave}: {stdout}\n{stderr}");
        assert!(stdout.contains("t:one"), "{leave}: {stdout}");
        assert!(
            stderr.contains(
                ">> plugin t: processes started by 'scan' kept its output open after it \
                 exited; they were killed\n"
            ),
            "{leave}: {stderr}"
        );
        assert!(!stderr.contains("did not finish"), "{leave}: {stderr}");
        assert_gone(child, "6543");
        assert_eq!(cache_dirs_left(work.path()), 0);
    }
}
