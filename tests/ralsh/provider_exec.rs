//! The exec type through ral plan, ral apply and ralsh on a fake root:
//! its guards decide and the plan says why; a refreshonly exec runs when
//! what it subscribes to changes (on the first run too) and once; checks
//! run under plan and noop, the command never; a command is argv, never
//! a shell's text; an exec is never removed; its secrets stay out of
//! plans, output and the store. Every command only writes below the
//! sandbox's root, which it finds in RALSH_ROOT_DIR.

use crate::support::{run, Run, Sandbox};

/// A manifest written beside the sandbox, and its path.
fn manifest(dir: &tempfile::TempDir, name: &str, text: &str) -> String {
    let path = dir.path().join(name);
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_owned()
}

fn ral(sandbox: &Sandbox, subcommand: &str, args: &[&str]) -> Run {
    run(&mut sandbox.ral_command(subcommand, args))
}

/// What a command appends to ROOT/log: each run leaves one line.
fn log(sandbox: &Sandbox) -> Vec<String> {
    std::fs::read_to_string(sandbox.root().join("log"))
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

const APP: &str = r#"file:
  /etc/app.conf: {content: "port 80\n"}
exec:
  migrate:
    command: [sh, -c, 'echo migrate >> "$RALSH_ROOT_DIR/log"; touch "$RALSH_ROOT_DIR/etc/.migrated"']
    creates: /etc/.migrated
  reload:
    command: sh -c 'echo reload >> "$RALSH_ROOT_DIR/log"'
    refreshonly: true
    subscribe: file[/etc/app.conf]
"#;

#[test]
fn guards_decide_the_plan_says_why_and_a_second_run_has_nothing_to_do() {
    let sandbox = Sandbox::seeded();
    let dir = tempfile::tempdir().unwrap();
    let m = manifest(&dir, "app.yaml", APP);
    ral(&sandbox, "plan", &[&m])
        .expect(0)
        .stdout_has("~ exec[migrate]\n    runs: /etc/.migrated does not exist")
        .stdout_has("^ exec[reload] (waits for file[/etc/app.conf])");
    assert!(log(&sandbox).is_empty(), "a plan runs no command");
    // The config file is created in this run: the refreshonly exec,
    // which has no ensure of its own, is refreshed on the first run too.
    ral(&sandbox, "apply", &[&m])
        .expect(0)
        .stdout_has("Success ~ exec[migrate]")
        .stdout_has("ran: /etc/.migrated does not exist")
        .stdout_has("Success ^ exec[reload]");
    assert_eq!(log(&sandbox), ["migrate", "reload"]);
    ral(&sandbox, "plan", &["--detailed-exitcodes", &m])
        .expect(0)
        .stdout_has("0 to create, 0 to change, 0 to remove; 3 unchanged");
    ral(&sandbox, "apply", &[&m]).expect(0);
    assert_eq!(log(&sandbox), ["migrate", "reload"], "nothing ran again");
    // A change of what it subscribes to refreshes it once.
    let m2 = manifest(&dir, "app2.yaml", &APP.replace("port 80", "port 81"));
    ral(&sandbox, "apply", &[&m2]).expect(0);
    assert_eq!(log(&sandbox), ["migrate", "reload", "reload"]);
}

#[test]
fn an_exec_that_runs_as_its_own_task_is_not_refreshed_again() {
    let sandbox = Sandbox::seeded();
    let dir = tempfile::tempdir().unwrap();
    let text = r#"file:
  /etc/app.conf: {content: "x\n"}
exec:
  always:
    command: sh -c 'echo always >> "$RALSH_ROOT_DIR/log"'
    subscribe: file[/etc/app.conf]
"#;
    let m = manifest(&dir, "m.yaml", text);
    ral(&sandbox, "apply", &[&m]).expect(0);
    assert_eq!(
        log(&sandbox),
        ["always"],
        "one run, not a run and a refresh"
    );
    // Without guards it runs every time, as Puppet's does: not drift.
    ral(&sandbox, "plan", &[&m])
        .expect(0)
        .stdout_has("runs: it has no creates, onlyif or unless: it runs every time")
        .stdout_lacks("drifted");
}

#[test]
fn an_owed_refresh_is_paid_by_the_exec_s_own_run() {
    let sandbox = Sandbox::seeded();
    let dir = tempfile::tempdir().unwrap();
    let command = r#"sh -c 'test -e "$RALSH_ROOT_DIR/ok" && touch "$RALSH_ROOT_DIR/done"'"#;
    let first = format!(
        "file:\n  /etc/a.conf: {{content: \"v1\\n\"}}\nexec:\n  e:\n    command: {command}\n    \
         refreshonly: true\n    subscribe: file[/etc/a.conf]\n"
    );
    let m = manifest(&dir, "first.yaml", &first);
    // Its refresh fails: it is owed.
    ral(&sandbox, "apply", &[&m]).stdout_has("the refresh stays owed");
    ral(&sandbox, "plan", &[&m]).stdout_has("owed: an earlier run's refresh");
    // Now it runs as its own task (creates not there yet): that run pays
    // the refresh, which is not run again after it.
    sandbox.write("ok", "");
    let second = first.replace("refreshonly: true", "creates: /done");
    let m = manifest(&dir, "second.yaml", &second);
    ral(&sandbox, "apply", &[&m])
        .expect(0)
        .stdout_has("Success ~ exec[e]")
        .stdout_lacks("^ exec[e]");
    ral(&sandbox, "plan", &["--detailed-exitcodes", &m])
        .expect(0)
        .stdout_lacks("owed");
}

#[test]
fn checks_run_under_plan_and_noop_the_command_never() {
    let sandbox = Sandbox::seeded();
    let dir = tempfile::tempdir().unwrap();
    let text = r#"exec:
  guarded:
    command: sh -c 'echo command >> "$RALSH_ROOT_DIR/log"'
    onlyif: sh -c 'echo check >> "$RALSH_ROOT_DIR/log"; exit 0'
"#;
    let m = manifest(&dir, "m.yaml", text);
    ral(&sandbox, "plan", &[&m])
        .expect(0)
        .stdout_has("runs: onlyif sh -c 'echo check");
    assert_eq!(log(&sandbox), ["check"]);
    ral(&sandbox, "apply", &["--noop", &m]);
    assert!(
        !log(&sandbox).contains(&"command".to_owned()),
        "{:?}",
        log(&sandbox)
    );
    ral(&sandbox, "apply", &[&m]).expect(0);
    assert_eq!(log(&sandbox).last().unwrap(), "command");
    // unless: a check that succeeds means there is nothing to do.
    let m = manifest(
        &dir,
        "unless.yaml",
        "exec:\n  skipped:\n    command: touch /nonexistent/never\n    unless: 'true'\n",
    );
    ral(&sandbox, "plan", &["--detailed-exitcodes", &m])
        .expect(0)
        .stdout_has("1 unchanged");
}

#[test]
fn a_command_is_argv_and_its_words_never_reach_a_shell() {
    let sandbox = Sandbox::new();
    let attack = "; touch \"$RALSH_ROOT_DIR/pwned\" #";
    let out = run(sandbox.command().args([
        "exec",
        "x",
        &format!("command=echo {}", shell_words::quote(attack)),
    ]));
    out.expect(0);
    assert!(!sandbox.root().join("pwned").exists());
    // The same text with shell: true is the shell's, as asked.
    let out = run(sandbox.command().args([
        "exec",
        "y",
        "command=touch \"$RALSH_ROOT_DIR/shelled\"",
        "shell=true",
    ]));
    out.expect(0);
    assert!(sandbox.root().join("shelled").exists());
    // A JSON list on the command line is the argv, as for any data value.
    let out = run(sandbox.command().args([
        "exec",
        "z",
        r#"command=["sh", "-c", "touch \"$RALSH_ROOT_DIR/listed\""]"#,
        "returns=[0, 2]",
    ]));
    out.expect(0);
    assert!(sandbox.root().join("listed").exists());
}

#[test]
fn a_failing_command_fails_its_task_with_status_and_output_and_is_never_removed() {
    let sandbox = Sandbox::seeded();
    let dir = tempfile::tempdir().unwrap();
    let m = manifest(
        &dir,
        "m.yaml",
        "exec:\n  broken:\n    command: sh -c 'echo why-it-broke >&2; exit 3'\n  fine:\n    command: 'true'\n    returns: [0, 3]\n",
    );
    let applied = ral(&sandbox, "apply", &[&m]);
    assert_ne!(applied.status, 0);
    applied
        .stdout_has("exited with status 3 (returns: 0)")
        .stdout_has("why-it-broke")
        .stdout_has("Success ~ exec[fine]");
    // Left out of the manifest, an exec is not something to remove.
    let empty = manifest(&dir, "other.yaml", "file:\n  /etc/other: {content: x}\n");
    ral(&sandbox, "plan", &[&empty])
        .expect(0)
        .stdout_has("= exec[fine] is only forgotten, left as it is")
        .stdout_has("0 to remove");
}

#[test]
fn a_sensitive_value_of_an_exec_is_never_shown_or_stored() {
    let sandbox = Sandbox::seeded();
    let dir = tempfile::tempdir().unwrap();
    let text = r#"vars:
  token: s3cr3t-t0ken
  ral_sensitive: [token]
exec:
  login:
    command: sh -c 'echo "failed with $TOKEN" >&2; exit 1'
    environment: ["TOKEN={{ token }}"]
"#;
    let m = manifest(&dir, "m.yaml", text);
    let plan = ral(&sandbox, "plan", &["-j", &m]);
    assert!(!plan.stdout.contains("s3cr3t"), "{}", plan.stdout);
    let applied = ral(&sandbox, "apply", &[&m]);
    assert!(
        !applied.stdout.contains("s3cr3t") && !applied.stderr.contains("s3cr3t"),
        "{}{}",
        applied.stdout,
        applied.stderr
    );
    applied.stdout_has("failed with [redacted]");
    let store = std::fs::read(sandbox.root().join("var/lib/ral/state.db")).unwrap_or_default();
    assert!(
        !store.windows(6).any(|w| w == b"s3cr3t"),
        "the secret reached the state store"
    );
}

#[test]
fn a_secret_in_a_guard_or_a_bad_value_never_shows_in_why_or_errors() {
    let sandbox = Sandbox::seeded();
    let dir = tempfile::tempdir().unwrap();
    let text = r#"vars:
  ral_sensitive: [token]
  token: S3cr3tToken42
exec:
  guarded:
    command: "true"
    onlyif: ["test", "{{ token }}", "=", "{{ token }}"]
  made:
    command: "true"
    creates: "/srv/{{ token }}"
  broken:
    command: "echo {{ token }} 'open"
  slow:
    command: "true"
    onlyif: "sh -c 'echo {{ token }}; sleep 5'"
    timeout: 1
"#;
    // Alone in their manifest (no other value holds the secret by itself):
    // a command and a check holding the secret in their text, which print
    // it alone.
    let printing = r#"vars:
  ral_sensitive: [token]
  token: S3cr3tToken42
exec:
  printed:
    command: "sh -c 'echo {{ token }}; exit 3'"
  killed:
    command: "true"
    onlyif: "sh -c 'echo {{ token }}; kill -9 $$'"
"#;
    for m in [
        manifest(&dir, "m.yaml", text),
        manifest(&dir, "printing.yaml", printing),
    ] {
        for args in [["plan", ""], ["plan", "-j"], ["apply", ""], ["apply", "-j"]] {
            let [subcommand, flag] = args;
            let mut given: Vec<&str> = vec![m.as_str()];
            if !flag.is_empty() {
                given.insert(0, flag);
            }
            let out = ral(&sandbox, subcommand, &given);
            let all = format!("{}{}", out.stdout, out.stderr);
            assert!(!all.contains("3cr3t"), "{subcommand} {given:?}: {all}");
            assert!(all.contains("[redacted]"), "{subcommand} {given:?}: {all}");
        }
    }
    let store = std::fs::read(sandbox.root().join("var/lib/ral/state.db")).unwrap();
    assert!(!store.windows(5).any(|w| w == b"3cr3t"));
}

#[test]
fn guards_are_read_again_once_what_the_exec_waits_for_is_done() {
    let sandbox = Sandbox::seeded();
    let dir = tempfile::tempdir().unwrap();
    let root = sandbox.root().display().to_string();
    let text = format!(
        r#"file:
  /srv/flag: {{content: "x\n"}}
exec:
  after-flag:
    command: sh -c 'echo ran >> "$RALSH_ROOT_DIR/log"'
    onlyif: [test, -e, "{root}/srv/flag"]
    require: file[/srv/flag]
  made-by-flag:
    command: sh -c 'echo never >> "$RALSH_ROOT_DIR/log"'
    creates: /srv/flag
    require: file[/srv/flag]
"#
    );
    let m = manifest(&dir, "m.yaml", &text);
    ral(&sandbox, "plan", &[&m])
        .expect(0)
        .stdout_has("? exec[after-flag] (waits for file[/srv/flag])")
        .stdout_has("its guards are checked again once the tasks it waits for are done");
    ral(&sandbox, "apply", &[&m])
        .expect(0)
        .stdout_has("Success ~ exec[after-flag]")
        .stdout_has("exec[made-by-flag] (0.")
        .stdout_has("nothing left to do when read again")
        .stdout_has("Apply complete: 1 created, 1 changed;");
    assert_eq!(
        log(&sandbox),
        ["ran"],
        "made-by-flag's creates exists by then"
    );
}

#[test]
fn a_relative_program_is_found_from_cwd_and_creates_never_looks_out_of_the_root() {
    let sandbox = Sandbox::seeded();
    sandbox.write(
        "srv/app/bin/run.sh",
        "#!/bin/sh\necho inside >> \"$RALSH_ROOT_DIR/log\"\n",
    );
    let script = sandbox.root().join("srv/app/bin/run.sh");
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    // A link in the root to /proc: creates looks below the root (the link
    // resolved as if the root were /), where /proc/cpuinfo does not exist.
    std::os::unix::fs::symlink("/proc", sandbox.root().join("srv/out")).unwrap();
    assert!(!sandbox.root().join("proc").exists());
    let out = run(sandbox.command().args([
        "exec",
        "x",
        "command=./bin/run.sh",
        "cwd=/srv/app",
        "creates=/srv/out/cpuinfo",
    ]));
    out.expect(0);
    assert_eq!(log(&sandbox), ["inside"]);
}

#[test]
fn a_saved_plan_reads_an_exec_again_at_its_turn_too() {
    let sandbox = Sandbox::seeded();
    let dir = tempfile::tempdir().unwrap();
    let text = r#"file:
  /srv/t: {content: "x\n", before: "exec[made]"}
exec:
  made:
    command: sh -c 'echo made >> "$RALSH_ROOT_DIR/log"'
    creates: /srv/t
  other:
    command: sh -c 'echo other >> "$RALSH_ROOT_DIR/log"'
    creates: /srv/other
    require: file[/srv/t]
"#;
    let m = manifest(&dir, "m.yaml", text);
    let saved = dir.path().join("plan.json");
    let saved = saved.to_str().unwrap();
    ral(&sandbox, "plan", &["-o", saved, &m])
        .expect(0)
        .stdout_has("~ exec[made]");
    // The file its creates names is made first: read again, it has
    // nothing to do, which is no drift from the plan.
    ral(&sandbox, "apply", &[saved])
        .expect(0)
        .stdout_has("Success ~ exec[made] (0.")
        .stdout_has("nothing left to do when read again")
        .stdout_has("Success ~ exec[other]");
    assert_eq!(log(&sandbox), ["other"]);
}
