//! Processes that leave the provider's process group (`setsid`, or
//! `setpgid(0, 0)`) are ended with the call all the same: ralsh is their
//! subreaper. A provider with
//! the `starts_daemons` feature keeps the daemons its updates start.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use crate::pids::{assert_gone, pid_in, KillOnDrop};
use crate::support::Sandbox;

/// A provider `NAME` (simple convention, list and update) in DATA/providers,
/// with the extra lines `yaml_extra` in its provider section.
fn write_provider(data: &Path, name: &str, script: &str, yaml_extra: &str) {
    let providers = data.join("providers");
    std::fs::create_dir_all(&providers).unwrap();
    let file = providers.join(format!("{name}.prov"));
    std::fs::write(&file, script).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(
        providers.join(format!("{name}.yaml")),
        format!(
            "provider:\n  type: {name}\n  invoke: simple\n  actions: [list, find, update]\n  \
             suitable: true\n{yaml_extra}  attributes:\n    name: {{}}\n    ensure: {{type: 'enum[present, absent]'}}\n"
        ),
    )
    .unwrap();
}

/// The process ID the provider wrote to ROOT/pid.
fn escapee(sandbox: &Sandbox) -> u32 {
    sandbox
        .read("pid")
        .trim()
        .parse()
        .expect("the provider wrote a PID")
}

/// True while `pid` is the escapee (its command line holds 6543); a
/// zombie, a process that is gone or a reused ID running something else is
/// not it.
fn still_running(pid: u32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let zombie = stat
        .rsplit_once(')')
        .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'));
    let command = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    !stat.is_empty() && !zombie && command.windows(4).any(|w| w == b"6543")
}

/// Leaves the process group for a session of its own, then runs the rest
/// of its arguments.
const SETSID: &str = "setsid";
/// Leaves the process group for a group of its own in the same session
/// (`setpgid(0, 0)`), then runs the rest of its arguments.
const SETPGID: &str =
    "python3 -c 'import os, sys; os.setpgid(0, 0); os.execvp(sys.argv[1], sys.argv[1:])'";

/// Shell lines that start `sleep 6543` out of the provider's process group
/// (by `leave`: [`SETSID`] or [`SETPGID`]), with `redirections`, and write
/// its PID to ROOT/pid once it runs there: the escapee tells its PID
/// through a FIFO the provider waits on.
fn start_escapee(leave: &str, redirections: &str, ignore_term: bool) -> String {
    let trap = if ignore_term { "trap '' TERM; " } else { "" };
    format!(
        "  mkfifo \"$RALSH_ROOT_DIR/ready\"\n  \
         ({trap}exec {leave} sh -c 'echo $$ > \"$0\"; exec sleep 6543' \"$RALSH_ROOT_DIR/ready\" {redirections}) &\n  \
         read pid < \"$RALSH_ROOT_DIR/ready\"; echo \"$pid\" > \"$RALSH_ROOT_DIR/pid\"; rm \"$RALSH_ROOT_DIR/ready\"\n"
    )
}

/// Ends the escapee, should a test fail with it still running.
struct Cleanup(Option<u32>);

impl Drop for Cleanup {
    fn drop(&mut self) {
        if let Some(pid) = self.0.filter(|&pid| still_running(pid)) {
            // SAFETY: signals the escapee this test's provider started.
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
        }
    }
}

/// A provider whose list prints one resource and starts an escapee (which
/// leaves by `leave`).
fn escaping_list(leave: &str, redirections: &str, ignore_term: bool) -> String {
    format!(
        "#!/bin/sh\ncase \"$1\" in\nral_action=list)\n  echo '# simple'\n  echo 'name: only'\n{}  ;;\n\
         *) echo '# simple'; echo 'name: only'; echo 'ensure: present' ;;\nesac\n",
        start_escapee(leave, redirections, ignore_term)
    )
}

#[test]
fn a_process_that_left_the_group_holding_stdout_is_killed_after_the_linger() {
    let sandbox = Sandbox::new();
    let data = tempfile::tempdir().unwrap();
    write_provider(
        data.path(),
        "escaping",
        &escaping_list(SETSID, "", false),
        "",
    );
    let run = sandbox.ralsh_in(data.path(), &["--timeout", "120", "escaping"]);
    let _cleanup = Cleanup(Some(escapee(&sandbox)));
    run.expect(0).stdout_has("'only'");
    run.stderr_has("escaping::escaping: list exited, but processes it started kept its output open for 2s; killing them");
    assert!(!still_running(escapee(&sandbox)), "the escapee still runs");
}

#[test]
fn a_process_that_left_the_group_by_setpgid_holding_stdout_is_killed_after_the_linger() {
    // A group of its own in the same session: out of reach of a signal to
    // the provider's group, as much as a new session is.
    let sandbox = Sandbox::new();
    let data = tempfile::tempdir().unwrap();
    write_provider(
        data.path(),
        "escaping",
        &escaping_list(SETPGID, "", false),
        "",
    );
    let run = sandbox.ralsh_in(data.path(), &["--timeout", "120", "escaping"]);
    let pid = pid_in(&sandbox.root().join("pid"));
    let _escapee = KillOnDrop::new(&[pid]);
    run.expect(0).stdout_has("'only'");
    run.stderr_has("escaping::escaping: list exited, but processes it started kept its output open for 2s; killing them");
    assert_gone(pid, "6543");
}

#[test]
fn a_process_that_left_the_group_and_ignores_sigterm_is_killed_at_the_time_limit() {
    // The provider runs on after starting the escapee, so the linger
    // (which starts when the provider exits) never comes before the time
    // limit; the limit leaves the provider ample time to tell the
    // escapee's PID. At the limit the group gets SIGTERM, and the escapee,
    // which holds stdout and ignores SIGTERM, SIGKILL after the grace.
    let sandbox = Sandbox::new();
    let data = tempfile::tempdir().unwrap();
    let script = format!(
        "#!/bin/sh\ncase \"$1\" in\nral_action=list)\n  echo '# simple'\n  echo 'name: only'\n\
         {}  exec sleep 6544 ;;\n*) echo '# simple' ;;\nesac\n",
        start_escapee(SETSID, "", true)
    );
    write_provider(data.path(), "stubborn", &script, "");
    let run = sandbox.ralsh(&[
        "-I",
        data.path().to_str().unwrap(),
        "--timeout",
        "5",
        "stubborn",
    ]);
    let pid = pid_in(&sandbox.root().join("pid"));
    let _escapee = KillOnDrop::new(&[pid]);
    run.expect(2).stderr_has(
        "stubborn::stubborn: list did not finish within 5s; the provider and its children were \
         killed",
    );
    assert!(
        !run.stderr.contains("kept its output open"),
        "ended by the linger, not the time limit: {}",
        run.stderr
    );
    assert_gone(pid, "6543");
}

#[test]
fn a_fully_detached_daemon_is_ended_when_the_call_ends() {
    let sandbox = Sandbox::new();
    let data = tempfile::tempdir().unwrap();
    write_provider(
        data.path(),
        "detaching",
        &escaping_list(SETSID, "</dev/null >/dev/null 2>&1", true),
        "",
    );
    let run = sandbox.ralsh_in(data.path(), &["--timeout", "120", "detaching"]);
    let _cleanup = Cleanup(Some(escapee(&sandbox)));
    run.expect(0).stdout_has("'only'");
    // Nothing held the output: no linger, no warning.
    assert!(
        !run.stderr.contains("kept its output open"),
        "{}",
        run.stderr
    );
    assert!(!still_running(escapee(&sandbox)), "the daemon still runs");
}

#[test]
fn a_provider_that_starts_daemons_keeps_those_its_update_started() {
    let sandbox = Sandbox::new();
    let data = tempfile::tempdir().unwrap();
    // The update starts a detached daemon, as an init script does; the list
    // starts one too, which is ended as for any provider.
    let detached = start_escapee(SETSID, "</dev/null >/dev/null 2>&1", false);
    let script = format!(
        "#!/bin/sh\ncase \"$1\" in\nral_action=update)\n{detached}  \
         echo '# simple'; echo 'name: svc'; echo 'ensure: present'; echo 'ral_was: absent' ;;\n\
         ral_action=list)\n{detached}  echo '# simple' ;;\n*) echo '# simple' ;;\nesac\n"
    );
    write_provider(
        data.path(),
        "daemons",
        &script,
        "  features: [starts_daemons]\n",
    );
    let run = sandbox.ralsh_in(
        data.path(),
        &["--timeout", "120", "daemons", "svc", "ensure=present"],
    );
    let started = escapee(&sandbox);
    let _cleanup = Cleanup(Some(started));
    run.expect(0).stdout_has("ensure: 'absent' -> 'present'");
    assert!(
        still_running(started),
        "the daemon the update started was ended"
    );

    let run = sandbox.ralsh_in(data.path(), &["--timeout", "120", "daemons"]);
    let listed = escapee(&sandbox);
    let _cleanup_list = Cleanup(Some(listed));
    run.expect(0);
    assert_ne!(listed, started);
    assert!(!still_running(listed), "the list's daemon still runs");
}

#[test]
fn a_leftover_holding_stdout_is_killed_but_a_released_daemon_is_not() {
    // An update of a starts_daemons provider starts a detached daemon and
    // leaves a child holding its stdout: after the linger the child goes,
    // the daemon stays.
    let sandbox = Sandbox::new();
    let data = tempfile::tempdir().unwrap();
    let detached = start_escapee(SETSID, "</dev/null >/dev/null 2>&1", false);
    let script = format!(
        "#!/bin/sh\ncase \"$1\" in\nral_action=update)\n{detached}  \
         sleep 6544 &\n  echo $! > \"$RALSH_ROOT_DIR/holder\"\n  \
         echo '# simple'; echo 'name: svc'; echo 'ensure: present'; echo 'ral_was: absent' ;;\n\
         *) echo '# simple' ;;\nesac\n"
    );
    write_provider(
        data.path(),
        "daemons",
        &script,
        "  features: [starts_daemons]\n",
    );
    let run = sandbox.ralsh_in(
        data.path(),
        &["--timeout", "120", "daemons", "svc", "ensure=present"],
    );
    let daemon = escapee(&sandbox);
    let _cleanup = Cleanup(Some(daemon));
    run.expect(0)
        .stderr_has("kept its output open for 2s; killing them");
    let holder: i32 = sandbox.read("holder").trim().parse().unwrap();
    let holder_alive = std::fs::read(format!("/proc/{holder}/cmdline"))
        .is_ok_and(|command| command == b"sleep\x006544\x00");
    assert!(!holder_alive, "the child holding stdout still runs");
    assert!(still_running(daemon), "the released daemon was killed");
}

#[test]
fn a_child_ralsh_inherits_through_exec_is_left_alone() {
    // sh starts a background sleep, then becomes ralsh: the sleep is
    // ralsh's child, but no provider started it.
    let sandbox = Sandbox::new();
    sandbox.write("etc/hosts", "10.0.0.1 db\n");
    let pid_file = sandbox.root().join("inherited");
    let mut command = std::process::Command::new("sh");
    command
        .arg("-c")
        .arg("sleep 6543 </dev/null >/dev/null 2>&1 & echo $! > \"$0\"; exec \"$1\" --root \"$2\" host")
        .arg(&pid_file)
        .arg(crate::support::ralsh_bin())
        .arg(sandbox.root())
        .env("XDG_CACHE_HOME", sandbox.root().join("cache"));
    let run = crate::support::run(&mut command);
    let pid: u32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let _cleanup = Cleanup(Some(pid));
    run.expect(0).stdout_has("'db'");
    assert!(still_running(pid), "ralsh ended a child it inherited");
}

#[test]
fn an_unfinished_last_line_after_leftovers_were_killed_is_dropped_aloud() {
    // The last line has no newline and a child still holds stdout: after
    // the linger the child is killed, and the unfinished line (which a
    // killed writer may have cut) is dropped with a warning, not silently.
    let sandbox = Sandbox::new();
    let data = tempfile::tempdir().unwrap();
    let script = "#!/bin/sh\nprintf '# simple\\nname: a\\nname: b'\n(exec sleep 6544) &\n";
    write_provider(data.path(), "unfinished", script, "");
    let run = sandbox.ralsh_in(data.path(), &["--timeout", "120", "unfinished"]);
    run.expect(0)
        .stdout_has("'a'")
        .stderr_has("unfinished::unfinished: list: dropping its unfinished last line 'name: b...'");
    assert!(!run.stdout.contains("'b'"), "{}", run.stdout);
}
