//! How providers are run: environment, stderr, exit status, time limit,
//! bounded and streamed output, closed pipes, and nothing left running
//! when ral is killed.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::Stdio;

use crate::pids::{assert_gone, pid_in, pids_in, KillOnDrop};
use crate::support::{run, Run, Sandbox};

/// True while `pid` is a live process (a zombie counts as gone: it has
/// exited and holds nothing but its exit status).
fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            let state = stat.rsplit(')').next().unwrap_or("").trim_start();
            !state.starts_with('Z') && !state.starts_with('X')
        }
        Err(_) => false,
    }
}

/// Opens ROOT/held, which the hang fixture holds open in the provider and
/// its TERM-ignoring child, and waits for them to say they started.
fn open_held(sandbox: &Sandbox) -> BufReader<std::fs::File> {
    let mut held = BufReader::new(crate::support::open_fifo(
        &sandbox.root().join("held"),
        false,
    ));
    let mut line = String::new();
    held.read_line(&mut line).unwrap();
    assert_eq!(line, "started\n");
    held
}

/// Reads ROOT/held to its end, which comes once every process holding it
/// has died; fails after 20 s instead of hanging.
fn assert_all_gone(held: BufReader<std::fs::File>) {
    assert_eq!(read_until_all_gone(held), "");
}

/// What the holders of ROOT/held wrote until the last of them died; fails
/// after 20 s instead of hanging.
fn read_until_all_gone(mut held: BufReader<std::fs::File>) -> String {
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut rest = String::new();
        let _ = sender.send(held.read_to_string(&mut rest).map(|_| rest));
    });
    receiver
        .recv_timeout(std::time::Duration::from_secs(20))
        .expect("a provider process is still running")
        .unwrap()
}

fn mkfifo(path: &std::path::Path) {
    assert!(std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .unwrap()
        .success());
}

#[test]
fn a_hung_provider_is_killed_with_its_whole_process_group() {
    let sandbox = Sandbox::new();
    mkfifo(&sandbox.root().join("held"));
    let child = sandbox
        .fixture_command(&["--timeout", "1", "hang"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let held = open_held(&sandbox);
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(
        stderr.contains(
            "hang::hang: list did not finish within 1s; the provider and its children were killed"
        ),
        "{stderr}"
    );
    assert_all_gone(held);
    let pids = sandbox.read("pids");
    let pids: Vec<u32> = pids
        .split_whitespace()
        .map(|p| p.parse().unwrap())
        .collect();
    assert_eq!(pids.len(), 2, "provider and background child recorded");
    for pid in pids {
        assert!(!alive(pid), "process {pid} is still running");
    }
}

/// Sends `signal` to ralsh while the hang fixture runs: the provider and
/// its child must die, and ralsh must end by that same signal. (A signal
/// ralsh does not forward kills ralsh alone and leaves the provider
/// running, which `assert_all_gone` reports within 20 s.)
fn a_signal_ends_the_provider_and_its_children(signal: libc::c_int) {
    use std::os::unix::process::ExitStatusExt;

    let sandbox = Sandbox::new();
    mkfifo(&sandbox.root().join("held"));
    let mut child = sandbox
        .fixture_command(&["--timeout", "60", "hang"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let held = open_held(&sandbox);
    let _leftovers = KillOnDrop::new(&pids_in(&sandbox.root().join("pids")));
    // SAFETY: sends a signal to our own child process.
    assert_eq!(unsafe { libc::kill(child.id() as i32, signal) }, 0);
    let status = child.wait().unwrap();
    assert_eq!(status.signal(), Some(signal), "ralsh ends by the signal");
    // The background child ignores SIGTERM; only the SIGKILL that follows
    // the grace period ends it.
    assert_all_gone(held);
}

#[test]
fn a_killed_ral_apply_leaves_neither_its_provider_nor_its_callback_running() {
    let sandbox = Sandbox::new();
    mkfifo(&sandbox.root().join("held"));
    let manifests = tempfile::tempdir().unwrap();
    let manifest = manifests.path().join("site.yaml");
    std::fs::write(
        &manifest,
        "hold:\n  x: {}\nholding:\n  a: {ensure: present}\n",
    )
    .unwrap();
    // An update that never ends and a callback that never ends, at once,
    // each with a child that ignores SIGTERM (tests/fixtures/holding).
    let mut ral = sandbox
        .ral_command("apply", &["--jobs", "2"])
        .arg("-I")
        .arg(crate::support::fixtures_dir().join("holding"))
        .arg(&manifest)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut held = BufReader::new(crate::support::open_fifo(
        &sandbox.root().join("held"),
        false,
    ));
    let mut started = Vec::new();
    for _ in 0..2 {
        let mut line = String::new();
        held.read_line(&mut line).unwrap();
        started.push(line);
    }
    started.sort();
    assert_eq!(started, ["callback\n", "provider\n"]);
    let mut pids = pids_in(&sandbox.root().join("pids.provider"));
    pids.extend(pids_in(&sandbox.root().join("pids.callback")));
    let _leftovers = KillOnDrop::new(&pids);
    ral.kill().unwrap();
    ral.wait().unwrap();
    // Every holder of the FIFO is gone once it reads its end: the SIGKILL
    // that follows the grace period ends even the children that ignore
    // SIGTERM.
    assert_all_gone(held);
    for pid in pids {
        assert_gone(pid, "holding");
    }
}

#[test]
fn an_interrupt_ends_the_provider_and_its_children() {
    a_signal_ends_the_provider_and_its_children(libc::SIGINT);
}

#[test]
fn sigterm_ends_the_provider_and_its_children() {
    a_signal_ends_the_provider_and_its_children(libc::SIGTERM);
}

#[test]
fn sighup_ends_the_provider_and_its_children() {
    a_signal_ends_the_provider_and_its_children(libc::SIGHUP);
}

#[test]
fn children_left_holding_the_output_are_killed_after_the_provider_exits() {
    let sandbox = Sandbox::new();
    let run = sandbox.ralsh(&["--timeout", "10", "lingering"]);
    run.expect(0);
    assert_eq!(run.stdout, "lingering::lingering { 'only':\n}\n");
    run.stderr_has("lingering::lingering: list exited, but processes it started kept its output open for 2s; killing them");
    let leftover = pid_in(&sandbox.root().join("leftover.pid"));
    assert_gone(leftover, "ral-lingering-leftover");
}

#[test]
fn providers_get_only_the_documented_environment() {
    let sandbox = Sandbox::new();
    let mut command = sandbox.fixture_command(&["envdump"]);
    command
        .env("RUST_LOG", "debug")
        .env("RALSH_DATA_DIR", "/nonexistent")
        .env(
            "PATH",
            format!("relative/bin::{}", std::env::var("PATH").unwrap()),
        )
        .current_dir(sandbox.root())
        .env("SECRET_TOKEN", "hunter2")
        .env("AWS_SECRET_ACCESS_KEY", "abc")
        .env("LANG", "de_DE.UTF-8")
        .env("LD_PRELOAD", "/nonexistent.so");
    let run = run(&mut command);
    run.expect(0);
    assert!(
        run.stderr.contains("ralsh: debug: "),
        "RUST_LOG sets the log level: {}",
        run.stderr
    );
    let env = sandbox.read("env");
    let mut vars: Vec<(&str, &str)> = env
        .split('\0')
        .filter(|entry| !entry.is_empty())
        .map(|entry| entry.split_once('=').unwrap())
        // bash itself adds these when it starts.
        .filter(|(key, _)| !["PWD", "SHLVL", "_"].contains(key))
        .collect();
    vars.sort();
    // The Python toolkit's directory, written out in ral's private cache.
    let lib = vars
        .iter()
        .position(|(key, _)| *key == "RALSH_PROVIDER_LIB")
        .map(|at| std::path::PathBuf::from(vars.remove(at).1))
        .expect("RALSH_PROVIDER_LIB is set");
    assert!(
        lib.starts_with(sandbox.cache.path().join("ral")),
        "{}",
        lib.display()
    );
    assert!(lib.join("ral_provider/__init__.py").is_file());
    assert!(lib.join("ral_provider/protocol.py").is_file());
    let root = sandbox.root().canonicalize().unwrap();
    let expected_path = std::env::var("PATH").unwrap();
    assert_eq!(
        vars,
        [
            ("HOME", sandbox.cache.path().to_str().unwrap()),
            ("LANG", "C"),
            ("LC_ALL", "C"),
            ("PATH", expected_path.as_str()),
            ("RALSH_LOCK_TIMEOUT", "15"),
            ("RALSH_NATIVE_PROGRAM", env!("CARGO_BIN_EXE_ral-provider")),
            ("RALSH_ROOT_DIR", root.to_str().unwrap()),
        ]
    );
    assert!(!env.contains("hunter2"));
    assert_eq!(sandbox.read("cwd"), "/\n", "providers run in /");
}

#[test]
fn providers_read_nothing_from_stdin() {
    let sandbox = Sandbox::new();
    let mut child = sandbox
        .fixture_command(&["envdump"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"typed by the user\n").unwrap();
    drop(stdin);
    assert!(child.wait().unwrap().success());
    assert!(sandbox.root().join("stdin").exists());
    assert_eq!(
        sandbox.read("stdin"),
        "",
        "the provider's stdin is /dev/null"
    );
}

#[test]
fn stderr_lines_are_logged_at_their_level_under_the_provider_name() {
    let sandbox = Sandbox::new();
    sandbox.write("list.out", "# simple\n");
    sandbox.write(
        "list.err",
        "debug: dbg line\nINFO: info line\nWarn:warn line\nplain line\nnotice: not a level\n",
    );
    let run = sandbox.ralsh(&["-l", "info", "scripted"]);
    run.expect(0);
    for expected in [
        "ralsh: info: [scripted::scripted] info line",
        "ralsh: warn: [scripted::scripted] warn line",
        "ralsh: warn: [scripted::scripted] plain line",
        "ralsh: warn: [scripted::scripted] notice: not a level",
    ] {
        assert!(
            run.stderr.contains(expected),
            "missing {expected:?} in\n{}",
            run.stderr
        );
    }
    assert!(!run.stderr.contains("dbg line"), "{}", run.stderr);
    let quiet = sandbox.ralsh(&["-q", "scripted"]);
    assert_eq!(quiet.expect(0).stderr, "");
}

#[test]
fn an_error_level_stderr_line_makes_the_exit_status_2() {
    let sandbox = Sandbox::new();
    sandbox.write("list.out", "# simple\nname: a\n");
    sandbox.write("list.err", "error: something broke\n");
    let run = sandbox.ralsh(&["scripted"]);
    run.expect(2);
    assert!(
        run.stdout.contains("'a'"),
        "the listing is still printed: {}",
        run.stdout
    );
    run.stderr_has("ralsh: error: [scripted::scripted] something broke");
}

#[test]
fn a_non_zero_exit_names_provider_action_status_and_stderr() {
    let sandbox = Sandbox::new();
    sandbox.write("find.out", "# simple\nname: a\n");
    sandbox.write("find.err", "line one\nline two\n");
    sandbox.write("find.exit", "3");
    let run = sandbox.ralsh(&["scripted", "a"]);
    run.expect(2);
    // Each stderr line is shown once: logged as it came, not quoted again.
    run.stderr_has(
        "ralsh: warn: [scripted::scripted] line one\nralsh: warn: [scripted::scripted] line two\n",
    );
    run.stderr_has("scripted::scripted: find failed: exit status 3 (its stderr is above)");
    assert_eq!(run.stderr.matches("line one").count(), 1, "{}", run.stderr);
    assert_eq!(run.stdout, "", "a failed find shows nothing");
    // Lines the log level hides are quoted in the error instead.
    let quiet = sandbox.ralsh(&["-l", "error", "scripted", "a"]);
    quiet.expect(2).stderr_has(
        "scripted::scripted: find failed: exit status 3; last lines of stderr:\n  line one\n  line two",
    );
}

#[test]
fn an_over_long_line_fails_the_call() {
    let sandbox = Sandbox::new();
    sandbox.write("flood", "longline");
    let run = sandbox.ralsh(&["flood"]);
    run.expect(2);
    run.stderr_has("flood::flood: list: line 2 of its output is longer than 65536 bytes");
    run.stderr_has("(it starts 'name: ");
}

#[test]
fn endless_output_for_one_resource_is_cut_off() {
    let sandbox = Sandbox::new();
    sandbox.write("flood", "endless");
    let run = sandbox.ralsh(&["--timeout", "60", "flood"]);
    run.expect(2);
    run.stderr_has("its answer is larger than 1048576 bytes");
}

#[test]
fn listings_are_printed_resource_by_resource() {
    // The provider completes one resource (a second name line ends it) and then blocks until the test, having
    // seen that resource on ralsh's stdout, writes to the gate. A host that
    // waited for the whole listing would never print it; the time limit turns
    // that into a failure instead of a hang.
    let sandbox = Sandbox::new();
    sandbox.write("flood", "gated");
    let gate = sandbox.root().join("gate");
    mkfifo(&gate);
    let mut child = sandbox
        .fixture_command(&["--timeout", "20", "flood"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    while !first.ends_with("}\n") {
        assert!(
            stdout.read_line(&mut first).unwrap() > 0,
            "stdout ended early: {first}"
        );
    }
    assert_eq!(first, "flood::flood { 'first':\n}\n");
    crate::support::open_fifo(&gate, true)
        .write_all(b"go\n")
        .unwrap();
    let mut rest = String::new();
    stdout.read_to_string(&mut rest).unwrap();
    assert_eq!(
        rest,
        "flood::flood { 'second':\n}\nflood::flood { 'third':\n}\n"
    );
    assert!(child.wait().unwrap().success());
}

#[test]
fn a_closed_pipe_ends_quietly() {
    let sandbox = Sandbox::new();
    sandbox.write("flood", "many");
    let mut child = sandbox
        .fixture_command(&["--timeout", "60", "flood"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    assert_eq!(line, "flood::flood { 'r0':\n");
    drop(stdout);
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&output.stderr), "");
}

#[test]
fn a_find_answer_larger_than_the_limit_fails() {
    let sandbox = Sandbox::new();
    let mut answer = String::from("# simple\nname: a\n");
    while answer.len() <= 1024 * 1024 {
        answer.push_str("color: 0123456789abcdef0123456789abcdef0123456789abcdef\n");
    }
    sandbox.write("find.out", &answer);
    let run = sandbox.ralsh(&["scripted", "a"]);
    run.expect(2);
    run.stderr_has("scripted::scripted: find: its answer is larger than 1048576 bytes");
}

#[test]
fn over_long_stderr_lines_are_cut() {
    let sandbox = Sandbox::new();
    sandbox.write("list.out", "# simple\n");
    sandbox.write(
        "list.err",
        &format!("warn: {}\nwarn: next\n", "e".repeat(100_000)),
    );
    let run = sandbox.ralsh(&["scripted"]);
    run.expect(0);
    let lines: Vec<&str> = run.stderr.lines().collect();
    assert_eq!(lines.len(), 2, "{:?}", &run.stderr[..200]);
    assert!(lines[0].ends_with("... (line cut at 65536 bytes)"));
    assert!(lines[0].len() < 66_000);
    assert_eq!(lines[1], "ralsh: warn: [scripted::scripted] next");
}

/// Starts ralsh listing providers over `count` describe-only providers,
/// described concurrently; each ignores SIGTERM and holds ROOT/held open
/// until it dies. Returns the data directory (keep it alive), ralsh and the
/// read end of ROOT/held.
fn start_slow_describes(
    sandbox: &Sandbox,
    count: usize,
) -> (
    tempfile::TempDir,
    std::process::Child,
    BufReader<std::fs::File>,
) {
    use std::os::unix::fs::PermissionsExt;

    mkfifo(&sandbox.root().join("held"));
    let data = tempfile::tempdir().unwrap();
    std::fs::create_dir(data.path().join("providers")).unwrap();
    for n in 1..=count {
        let script = data.path().join(format!("providers/slow{n}.prov"));
        std::fs::write(
            &script,
            "#!/bin/sh\ntrap '' TERM\nexec 3>\"$RALSH_ROOT_DIR/held\"\necho started >&3\nexec sleep 1000\n",
        )
        .unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let child = sandbox
        .command()
        .arg("--no-cache")
        .arg("-I")
        .arg(data.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let held = BufReader::new(crate::support::open_fifo(
        &sandbox.root().join("held"),
        false,
    ));
    (data, child, held)
}

#[test]
fn an_interrupt_ends_every_describe_running_at_once() {
    use std::os::unix::process::ExitStatusExt;

    let sandbox = Sandbox::new();
    let (_data, mut child, mut held) = start_slow_describes(&sandbox, 4);
    for _ in 0..4 {
        let mut line = String::new();
        held.read_line(&mut line).unwrap();
        assert_eq!(line, "started\n", "all four describes run at once");
    }
    // SAFETY: sends SIGINT to our own child process.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGINT) }, 0);
    let status = child.wait().unwrap();
    assert_eq!(status.signal(), Some(libc::SIGINT));
    // All four had started: nothing may start again (a describe run anew
    // after the interrupt ended it), and none may outlive ralsh.
    assert_eq!(
        read_until_all_gone(held),
        "",
        "a describe started after the interrupt"
    );
}

/// Writes an executable describe-less provider with a .yaml into `dir`.
fn write_provider(dir: &std::path::Path, name: &str, script: &str, attrs: &[&str]) {
    use std::os::unix::fs::PermissionsExt;
    let providers = dir.join("providers");
    std::fs::create_dir_all(&providers).unwrap();
    let script_path = providers.join(format!("{name}.prov"));
    std::fs::write(&script_path, script).unwrap();
    std::fs::set_permissions(&script_path, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut yaml = format!(
        "---\nprovider:\n  type: {name}\n  invoke: simple\n  actions: [list]\n  suitable: true\n  desc: test\n  attributes:\n    name: {{}}\n"
    );
    for attr in attrs {
        yaml.push_str(&format!("    {attr}: {{}}\n"));
    }
    std::fs::write(providers.join(format!("{name}.yaml")), yaml).unwrap();
}

/// Runs `ralsh -I DATA ARGS... NAME`, where DATA holds the one provider
/// NAME (type NAME) that `write_provider` makes of `script` and `attrs`.
fn ralsh_with_provider(name: &str, script: &str, attrs: &[&str], args: &[&str]) -> Run {
    let sandbox = Sandbox::new();
    let data = tempfile::tempdir().unwrap();
    write_provider(data.path(), name, script, attrs);
    let mut all = vec!["-I", data.path().to_str().unwrap()];
    all.extend_from_slice(args);
    all.push(name);
    sandbox.ralsh(&all)
}

#[test]
fn providers_start_with_no_blocked_signals_and_default_sigpipe() {
    // ralsh blocks and handles signals of its own; none of that may leak
    // into a provider, or `trap`, Ctrl-C and broken pipes act up there.
    let run = ralsh_with_provider(
        "sigs",
        "#!/bin/sh\nprintf '# simple\\nname: self\\n'\nsed -n 's/^\\(SigBlk\\|SigIgn\\):[[:space:]]*/\\1: /p' /proc/self/status\n",
        &["SigBlk", "SigIgn"],
        &["-j"],
    );
    run.expect(0);
    let doc = run.json();
    let attrs = &doc["resources"][0];
    let mask = |key: &str| {
        u64::from_str_radix(attrs[key].as_str().unwrap(), 16)
            .unwrap_or_else(|_| panic!("{key} in {doc}"))
    };
    assert_eq!(mask("SigBlk"), 0, "blocked signals: {doc}");
    let sigpipe = 1u64 << (libc::SIGPIPE - 1);
    assert_eq!(mask("SigIgn") & sigpipe, 0, "SIGPIPE ignored: {doc}");
}

#[test]
fn a_listing_that_never_pauses_still_meets_its_time_limit() {
    // `yes` writes as fast as the pipe takes it, so the host always finds
    // more output waiting and never has to wait for the provider.
    let run = ralsh_with_provider(
        "endless",
        "#!/bin/sh\necho '# simple'\nexec yes 'name: x'\n",
        &[],
        &["--timeout", "1", "-j"],
    );
    run.expect(2);
    run.stderr_has("endless::endless: list did not finish within 1s");
}

#[test]
fn an_interrupt_while_describes_are_being_started_leaves_none_behind() {
    use std::os::unix::process::ExitStatusExt;

    // More describe-only providers than run at once: the interrupt comes
    // while some are still being started.
    let sandbox = Sandbox::new();
    let (_data, mut child, mut held) = start_slow_describes(&sandbox, 24);
    let mut line = String::new();
    held.read_line(&mut line).unwrap();
    assert_eq!(line, "started\n");
    // SAFETY: sends SIGINT to our own child process.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGINT) }, 0);
    let status = child.wait().unwrap();
    assert_eq!(status.signal(), Some(libc::SIGINT));
    // Others may have started meanwhile; none may outlive ralsh.
    let rest = read_until_all_gone(held);
    assert!(rest.lines().all(|line| line == "started"), "{rest}");
    // Describes run eight at a time and none of these ends before the
    // interrupt, so at most eight can start before it: a ninth start
    // would have come after it.
    let started = 1 + rest.lines().count();
    assert!(
        started <= 8,
        "{started} describes started: one started after the interrupt"
    );
}

#[test]
fn a_relative_data_directory_means_the_callers_working_directory() {
    // Providers run in `/`; `-I dir` is still taken from where ralsh runs.
    let sandbox = Sandbox::new();
    let data = tempfile::tempdir().unwrap();
    write_provider(
        &data.path().join("data"),
        "here",
        "#!/bin/sh\nprintf '# simple\\nname: cwd\\nwhere: %s\\n' \"$PWD\"\n",
        &["where"],
    );
    let run = run(sandbox
        .command()
        .current_dir(data.path())
        .args(["-I", "data", "here"]));
    run.expect(0);
    assert_eq!(run.stdout, "here::here { 'cwd':\n  where => '/',\n}\n");
}

#[test]
fn a_provider_flooding_stderr_is_still_killed_at_the_time_limit() {
    let run = ralsh_with_provider(
        "chatty",
        "#!/bin/sh\necho '# simple'\nexec yes 'debug: again' >&2\n",
        &[],
        &["--timeout", "1"],
    );
    run.expect(2);
    run.stderr_has("chatty::chatty: list did not finish within 1s");
}

#[test]
fn stderr_written_before_a_rejected_answer_is_logged() {
    // The provider explains itself on stderr, then writes a line over the
    // limit while its listing is still streaming: the explanation must be
    // shown with the error, not lost with the killed provider.
    let run = ralsh_with_provider(
        "explains",
        "#!/bin/sh\necho '# simple'\nawk 'BEGIN { for (i = 0; i < 50000; i++) print \"name: r\" i }'\n\
         echo 'error: the database is corrupt' >&2\n\
         awk 'BEGIN { s = \"x\"; while (length(s) < 70000) s = s s; print \"name: \" s }'\n",
        &[],
        &["-j"],
    );
    run.expect(2);
    run.stderr_has("error: [explains::explains] the database is corrupt");
    run.stderr_has("line 50002 of its output is longer than 65536 bytes");
}

#[test]
fn children_flooding_the_output_after_the_provider_exits_are_killed_after_the_linger() {
    // The provider exits at once; what it left behind floods stdout with
    // absent resources (which -a leaves out), so the host is never left
    // waiting. It must still notice the exit and end the leftovers after
    // the linger, not at the time limit.
    let sandbox = Sandbox::new();
    let data = tempfile::tempdir().unwrap();
    write_provider(
        data.path(),
        "leaves",
        "#!/bin/bash\necho '# simple'\necho 'name: only'\n\
         ( exec -a ral-flooding-leftover yes 'name: gone\nensure: absent' ) &\n\
         echo \"$!\" > \"$RALSH_ROOT_DIR/leftover.pid\"\nexit 0\n",
        &["ensure"],
    );
    let run = sandbox.ralsh(&[
        "-I",
        data.path().to_str().unwrap(),
        "--timeout",
        "10",
        "-a",
        "leaves",
    ]);
    run.expect(0);
    // The kill may cut the last resource after its name: it is then listed
    // without its ensure (and its unfinished line dropped, with a warning).
    let rest = run
        .stdout
        .strip_prefix("leaves::leaves { 'only':\n}\n")
        .unwrap_or_else(|| panic!("{}", run.stdout));
    assert!(
        rest.is_empty() || rest == "leaves::leaves { 'gone':\n}\n",
        "{rest}"
    );
    run.stderr_has("leaves::leaves: list exited, but processes it started kept its output open for 2s; killing them");
    let leftover = pid_in(&sandbox.root().join("leftover.pid"));
    assert_gone(leftover, "ral-flooding-leftover");
}

#[test]
fn an_interrupt_while_the_output_is_blocked_still_ends_ralsh_by_that_signal() {
    use std::os::unix::process::ExitStatusExt;

    // ralsh's own stdout is a pipe nobody reads: it blocks writing. Ctrl-C
    // ends the provider meanwhile; when the pipe closes, ralsh must still
    // end by SIGINT, not report success.
    let sandbox = Sandbox::new();
    let data = tempfile::tempdir().unwrap();
    write_provider(
        data.path(),
        "big",
        "#!/bin/sh\necho '# simple'\nexec awk 'BEGIN { for (i = 0; i < 2000000; i++) print \"name: r\" i }'\n",
        &[],
    );
    let mut child = sandbox
        .command()
        .args(["-I", data.path().to_str().unwrap(), "big"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    stdout.read_line(&mut first).unwrap();
    assert_eq!(first, "big::big { 'r0':\n");
    // Once the pipe is full, the kernel shows ralsh waiting in a pipe write
    // (wchan `pipe_write`, or `anon_pipe_write` on newer kernels).
    let wchan = format!("/proc/{}/wchan", child.id());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !std::fs::read_to_string(&wchan)
        .unwrap_or_default()
        .ends_with("pipe_write")
    {
        assert!(
            std::time::Instant::now() < deadline,
            "ralsh never blocked writing"
        );
        std::thread::yield_now();
    }
    // SAFETY: sends SIGINT to our own child process.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGINT) }, 0);
    drop(stdout);
    let status = child.wait().unwrap();
    assert_eq!(status.signal(), Some(libc::SIGINT), "{status:?}");
}

/// The lines written to ROOT/held, read by a thread as they come, so a
/// test waiting for one fails after 20 s instead of hanging; keeps what
/// it saw for the failure messages.
struct HeldLines {
    lines: std::sync::mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl HeldLines {
    /// Starts reading ROOT/held (a FIFO), whose open waits for a writer.
    fn open(sandbox: &Sandbox) -> HeldLines {
        let path = sandbox.root().join("held");
        let (sender, receiver) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let held = BufReader::new(crate::support::open_fifo(&path, false));
            for line in held.lines() {
                if sender.send(line.unwrap()).is_err() {
                    break;
                }
            }
        });
        HeldLines {
            lines: receiver,
            seen: Vec::new(),
        }
    }

    /// The next line, or None once every writer has closed ROOT/held.
    #[track_caller]
    fn next(&mut self) -> Option<String> {
        use std::sync::mpsc::RecvTimeoutError;
        match self.lines.recv_timeout(std::time::Duration::from_secs(20)) {
            Ok(line) => {
                self.seen.push(line.clone());
                Some(line)
            }
            Err(RecvTimeoutError::Disconnected) => None,
            Err(RecvTimeoutError::Timeout) => {
                panic!("nothing came on ROOT/held for 20 s; seen: {:?}", self.seen)
            }
        }
    }
}

#[test]
fn describes_run_at_most_eight_at_a_time() {
    use std::os::unix::fs::PermissionsExt;

    // Twelve describe-only providers each say "start" when they begin and
    // "end" when they are done. They wait for a line on the FIFO ROOT/gate,
    // which the test writes only once one has ended, and the first to end
    // is ended by the time limit: for those 2 s nothing ends, so a build
    // running more than eight at once starts a ninth meanwhile. A describe
    // says "end" before it exits, and its slot is free only once it has
    // exited, so however late each line comes (a busy machine), the
    // started minus the ended are never more than eight.
    let sandbox = Sandbox::new();
    mkfifo(&sandbox.root().join("held"));
    mkfifo(&sandbox.root().join("gate"));
    let data = tempfile::tempdir().unwrap();
    std::fs::create_dir(data.path().join("providers")).unwrap();
    for n in 1..=12 {
        let script = data.path().join(format!("providers/gated{n}.prov"));
        std::fs::write(
            &script,
            "#!/bin/sh\nexec 3>\"$RALSH_ROOT_DIR/held\"\ntrap 'echo end >&3; exit 1' TERM\n\
             echo start >&3\nread -r _ < \"$RALSH_ROOT_DIR/gate\"\ntrap '' TERM\necho end >&3\n",
        )
        .unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    // Opened for reading and writing, which does not wait for a reader,
    // and kept open: a describe's open of the gate never waits, and its
    // read waits for a line.
    let mut gate = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(sandbox.root().join("gate"))
        .unwrap();
    // Held open by the test too: between one describe's exit and the
    // next one's start, ROOT/held may have no other writer.
    let keep_held = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(sandbox.root().join("held"))
        .unwrap();
    let mut child = sandbox
        .command()
        .args(["--no-cache", "--timeout", "2", "-I"])
        .arg(data.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut held = HeldLines::open(&sandbox);
    let (mut started, mut ended) = (0, 0);
    while ended < 12 {
        let line = held.next().expect("the test holds ROOT/held open");
        match line.as_str() {
            "start" => started += 1,
            "end" => {
                if ended == 0 {
                    // One line each for all that are left.
                    gate.write_all(&[b'\n'; 12]).unwrap();
                }
                ended += 1;
            }
            _ => panic!("unexpected line; seen: {:?}", held.seen),
        }
        assert!(
            started - ended <= 8,
            "more than eight describes ran at once; seen: {:?}",
            held.seen
        );
    }
    assert_eq!(started, 12, "seen: {:?}", held.seen);
    assert!(child.wait().unwrap().success());
    drop(keep_held);
    assert_eq!(
        held.next(),
        None,
        "nothing else runs; seen: {:?}",
        held.seen
    );
}

#[test]
fn a_flood_on_stderr_is_logged_up_to_the_cap_then_summed_up() {
    // 200,000 warnings: 5,000 are logged, the rest is counted in one line.
    let run = ralsh_with_provider(
        "noisy",
        "#!/bin/sh\necho '# simple'\necho 'name: only'\nawk 'BEGIN { for (i = 0; i < 200000; i++) print \"warn: line \" i > \"/dev/stderr\" }'\n",
        &[],
        &[],
    );
    run.expect(0).stdout_has("'only'");
    let logged = run.stderr.lines().filter(|l| l.contains("] line ")).count();
    assert_eq!(logged, 5000, "{}", &run.stderr[..run.stderr.len().min(500)]);
    run.stderr_has("[noisy::noisy] line 4999\n");
    assert!(!run.stderr.contains("] line 5000\n"));
    // "line 5000" to "line 199999": 195,000 lines of 9 to 11 bytes.
    let dropped_bytes: usize = (5000..200_000).map(|i| format!("line {i}").len()).sum();
    run.stderr_has(&format!(
        "195000 more lines ({dropped_bytes} bytes) of its stderr during list were not logged: at most 5000 lines or 1024 KiB are, per call"
    ));
    assert!(run.stderr.lines().count() < 5010);
}

#[test]
fn long_lines_on_stderr_are_logged_up_to_the_byte_cap_then_summed_up() {
    // 300 warnings of 8 KiB (2.4 MiB), far fewer lines than the line cap:
    // the byte cap (1 MiB) holds, exactly 128 fit, the rest is counted.
    let run = ralsh_with_provider(
        "wide",
        "#!/bin/sh\necho '# simple'\necho 'name: only'\n\
         awk 'BEGIN { pad = sprintf(\"%8188s\", \"\"); gsub(/ /, \"x\", pad); \
         for (i = 0; i < 300; i++) printf \"warn: %04d%s\\n\", i, pad > \"/dev/stderr\" }'\n",
        &[],
        &[],
    );
    run.expect(0).stdout_has("'only'");
    let logged: Vec<&str> = run
        .stderr
        .lines()
        .filter_map(|l| l.split_once("[wide::wide] ").map(|(_, message)| message))
        .filter(|message| message.ends_with("xxxx"))
        .collect();
    let head = &run.stderr[..run.stderr.len().min(500)];
    assert!(logged.iter().all(|message| message.len() == 8192), "{head}");
    let bytes: usize = logged.iter().map(|message| message.len()).sum();
    assert!(bytes <= 1024 * 1024, "{bytes} bytes logged");
    assert_eq!(logged.len(), 128, "{head}");
    assert!(logged[127].starts_with("0127x"), "{head}");
    run.stderr_has(
        "172 more lines (1409024 bytes) of its stderr during list were not logged: at most 5000 \
         lines or 1024 KiB are, per call",
    );
    // The cap, the line prefixes and the summary: nothing else.
    assert!(
        run.stderr.len() < 1024 * 1024 + 129 * 64,
        "{} bytes on stderr",
        run.stderr.len()
    );
}
