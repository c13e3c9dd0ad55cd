//! `ral agent` on a fake root: drift repaired and recorded, unmanaged
//! changes ignored, broken manifests never in force, signals, --noop,
//! backoff, the store's lock beside a person's apply, systemd's socket,
//! `ral agent status` and `ral agent unit`.
//!
//! The tests follow the agent by its lines (`ral agent: run (WHY): ...`,
//! one per run, in order) and never by the clock: a change the agent must
//! not act on is shown by the next run's reasons, which name everything
//! that asked for it (SIGUSR1 sent after the change makes that run).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::{Duration, Instant};

use crate::support::{run, Sandbox};

/// The longest a test waits for a line it expects.
const PATIENCE: Duration = Duration::from_secs(30);

/// A running agent and its stdout, line by line.
struct Agent {
    child: Child,
    lines: Receiver<String>,
    seen: Vec<String>,
}

impl Agent {
    fn start(sandbox: &Sandbox, args: &[&str]) -> Agent {
        Agent::start_with(sandbox.ral_command("agent", args))
    }

    fn start_with(mut command: Command) -> Agent {
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (sender, lines) = channel();
        // Its log lines too, marked, in the order they come: shown when a
        // line waited for never comes.
        let stderr = child.stderr.take().unwrap();
        let to_log = sender.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if to_log.send(format!("stderr: {line}")).is_err() {
                    break;
                }
            }
        });
        let stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        Agent {
            child,
            lines,
            seen: Vec::new(),
        }
    }

    /// The next line holding `needle` (lines before it are kept in
    /// `seen`).
    fn line_with(&mut self, needle: &str) -> String {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    self.seen.push(line.clone());
                    if line.contains(needle) {
                        return line;
                    }
                }
                Err(_) => panic!(
                    "no line with {needle:?} within {PATIENCE:?}; the agent said:\n{}",
                    self.seen.join("\n")
                ),
            }
        }
    }

    /// The next run's line: `ral agent: run (WHY): OUTCOME in S s`.
    fn next_run(&mut self) -> String {
        self.line_with("ral agent: run (")
    }

    fn signal(&self, signal: libc::c_int) {
        // SAFETY: kill takes plain integers; the child is unreaped.
        assert_eq!(unsafe { libc::kill(self.child.id() as i32, signal) }, 0);
    }

    /// Its exit status, once it exits: a failure when it has not within
    /// [`PATIENCE`] (waited on through a pidfd, not by looking again).
    fn exit_code(&mut self) -> Option<i32> {
        // SAFETY: pidfd_open takes a process ID (unreaped: ours) and flags.
        let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, self.child.id(), 0) } as i32;
        assert!(
            pidfd >= 0,
            "pidfd_open: {}",
            std::io::Error::last_os_error()
        );
        let mut ready = libc::pollfd {
            fd: pidfd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one pollfd of ours; then the descriptor is closed.
        let got = unsafe { libc::poll(&mut ready, 1, PATIENCE.as_millis() as i32) };
        unsafe { libc::close(pidfd) };
        assert_eq!(
            got,
            1,
            "the agent did not exit within {PATIENCE:?}; it said:\n{}",
            self.seen.join("\n")
        );
        self.child.wait().unwrap().code()
    }

    /// SIGTERM, then its exit status and the rest of what it said.
    fn stop(mut self) -> (Option<i32>, Vec<String>) {
        self.signal(libc::SIGTERM);
        let code = self.exit_code();
        let rest: Vec<String> = self.lines.iter().collect();
        self.seen.extend(rest);
        (code, std::mem::take(&mut self.seen))
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A fake root with a hosts file, and a directory of manifests.
struct Site {
    sandbox: Sandbox,
    manifests: tempfile::TempDir,
}

impl Site {
    fn new() -> Site {
        let sandbox = Sandbox::new();
        sandbox.write("etc/hosts", "127.0.0.1 localhost\n");
        Site {
            sandbox,
            manifests: tempfile::tempdir().unwrap(),
        }
    }

    fn root(&self) -> &Path {
        self.sandbox.root()
    }

    /// Writes manifest `name` (replacing it whole, as editors do).
    fn manifest(&self, name: &str, text: &str) -> String {
        let path = self.manifests.path().join(name);
        let fresh = self.manifests.path().join(format!(".{name}.new"));
        std::fs::write(&fresh, text).unwrap();
        std::fs::rename(&fresh, &path).unwrap();
        path.to_str().unwrap().to_owned()
    }

    fn read(&self, relative: &str) -> Option<String> {
        std::fs::read_to_string(self.root().join(relative)).ok()
    }

    fn ral(&self, subcommand: &str, args: &[&str]) -> crate::support::Run {
        run(&mut self.sandbox.ral_command(subcommand, args))
    }

    /// `ral agent SUB --root ROOT ARGS...` (status, unit).
    fn agent(&self, sub: &str, args: &[&str]) -> crate::support::Run {
        let mut command = self.sandbox.ral_command("agent", &[]);
        // The root goes after the subcommand, whose option it is.
        let mut all: Vec<std::ffi::OsString> = command.get_args().map(|a| a.to_owned()).collect();
        all.insert(1, sub.into());
        all.extend(args.iter().map(|a| a.into()));
        let mut fresh = Command::new(command.get_program());
        fresh.env_clear().args(all);
        for (key, value) in command.get_envs() {
            if let Some(value) = value {
                fresh.env(key, value);
            }
        }
        command = fresh;
        run(&mut command)
    }

    /// `ral agent status -j` while an agent runs (exit 0), as JSON.
    fn status_json(&self) -> serde_json::Value {
        let status = self.agent("status", &["-j"]);
        status.expect(0);
        status.stdout.parse().unwrap()
    }

    fn history(&self) -> String {
        self.ral("state", &["history"]).expect(0).stdout.clone()
    }
}

const MOTD_AND_HOST: &str = "file:\n  /etc/motd: {ensure: file, content: \"hello\\n\"}\n\
                             host:\n  db: {ip: 10.0.0.5}\n";

#[test]
fn a_managed_file_edited_by_hand_is_restored_and_the_repair_recorded() {
    let site = Site::new();
    let m = site.manifest("site.yaml", MOTD_AND_HOST);
    let mut agent = Agent::start(&site.sandbox, &["--interval", "1h", &m]);
    let first = agent.next_run();
    assert!(first.contains("run (start): repaired"), "{first}");
    assert_eq!(site.read("etc/motd").as_deref(), Some("hello\n"));

    std::fs::write(site.root().join("etc/motd"), "tampered\n").unwrap();
    let repair = agent.next_run();
    assert!(
        repair.contains("run (drift: /etc/motd): repaired"),
        "{repair}"
    );
    assert_eq!(site.read("etc/motd").as_deref(), Some("hello\n"));

    // The hosts file rewritten without the managed entry, by a rename.
    let fresh = site.root().join("etc/.hosts.new");
    std::fs::write(&fresh, "127.0.0.1 localhost\n").unwrap();
    std::fs::rename(&fresh, site.root().join("etc/hosts")).unwrap();
    let repair = agent.next_run();
    assert!(
        repair.contains("run (drift: /etc/hosts): repaired"),
        "{repair}"
    );
    assert!(site.read("etc/hosts").unwrap().contains("10.0.0.5\tdb"));

    // Its own writes made no run: the next one, asked for, has no drift.
    agent.signal(libc::SIGUSR1);
    let asked = agent.next_run();
    assert!(asked.contains("run (SIGUSR1): unchanged"), "{asked}");

    let (code, said) = agent.stop();
    assert_eq!(code, Some(0), "{said:#?}");
    assert!(said.iter().any(|l| l == "ral agent: stopped"), "{said:#?}");
    let history = site.history();
    let agents: Vec<&str> = history
        .lines()
        .filter(|l| l.contains("  by ral agent ("))
        .collect();
    assert_eq!(agents.len(), 4, "{history}");
    assert!(
        agents[1].ends_with("by ral agent (drift: /etc/motd)"),
        "{history}"
    );
    assert!(agents[1].contains("tasks: 1 succeeded"), "{history}");
    assert!(
        agents[2].ends_with("by ral agent (drift: /etc/hosts)"),
        "{history}"
    );
    // The store shows the repair: why it ran, and what it changed.
    let id = agents[2].split_whitespace().next().unwrap();
    let shown = site.ral("state", &["show", id]).expect(0).stdout.clone();
    let mut lines = shown.lines();
    let head = lines.next().unwrap();
    assert!(
        head.starts_with(&format!("plan {id}: Successful, "))
            && head.ends_with(", by ral agent (drift: /etc/hosts)"),
        "{shown}"
    );
    assert_eq!(
        lines.next(),
        Some("Success create host[db]: ensure: \"absent\" -> \"present\", ip: \"10.0.0.5\""),
        "{shown}"
    );
}

#[test]
fn a_user_group_or_mount_changed_by_hand_is_restored() {
    // The account files and fstab of the seed, below the root.
    let site = Site {
        sandbox: Sandbox::seeded(),
        manifests: tempfile::tempdir().unwrap(),
    };
    let m = site.manifest(
        "site.yaml",
        "group:\n  ops: {gid: 1500}\n\
         user:\n  carol: {uid: 1501, gid: 1500, home: /home/carol, shell: /bin/sh}\n\
         mount:\n  /srv/data: {ensure: defined, device: /dev/vdb1, fstype: ext4, options: defaults}\n",
    );
    let mut agent = Agent::start(&site.sandbox, &["--interval", "1h", &m]);
    let first = agent.next_run();
    assert!(first.contains("run (start): repaired"), "{first}");
    let without = |file: &str, word: &str| {
        let text = site.read(file).unwrap();
        assert!(text.contains(word), "{file}: {text}");
        let kept: String = text
            .lines()
            .filter(|line| !line.contains(word))
            .map(|line| format!("{line}\n"))
            .collect();
        std::fs::write(site.root().join(file), kept).unwrap();
    };
    for (file, word) in [
        ("etc/passwd", "carol:"),
        ("etc/group", "ops:"),
        ("etc/fstab", "/srv/data"),
    ] {
        without(file, word);
        let repair = agent.next_run();
        assert!(
            repair.contains(&format!("run (drift: /{file}): repaired")),
            "{file}: {repair}"
        );
        assert!(site.read(file).unwrap().contains(word), "{file}");
    }
    assert_eq!(agent.stop().0, Some(0));
}

#[test]
fn a_change_to_an_unmanaged_file_triggers_nothing() {
    let site = Site::new();
    let m = site.manifest("site.yaml", MOTD_AND_HOST);
    let mut agent = Agent::start(&site.sandbox, &["--interval", "1h", &m]);
    agent.next_run();
    // Beside the managed files, in the directory the agent watches.
    site.sandbox.write("etc/motd.d", "not managed\n");
    site.sandbox.write("etc/hostname", "box\n");
    std::fs::remove_file(site.root().join("etc/hostname")).unwrap();
    agent.signal(libc::SIGUSR1);
    let asked = agent.next_run();
    assert!(asked.contains("run (SIGUSR1): unchanged"), "{asked}");
    // The same check sees a managed file's change (it is not blind).
    site.sandbox.write("etc/motd", "changed\n");
    agent.signal(libc::SIGUSR1);
    let both = agent.next_run();
    assert!(
        both.contains("SIGUSR1") && both.contains("drift: /etc/motd"),
        "{both}"
    );
    assert_eq!(agent.stop().0, Some(0));
}

#[test]
fn a_manifest_broken_by_an_edit_keeps_the_last_catalog_and_removes_nothing() {
    let site = Site::new();
    let two = "file:\n  /srv/a: {ensure: file, content: a}\n  /srv/b: {ensure: file, content: b}\n";
    std::fs::create_dir(site.root().join("srv")).unwrap();
    let m = site.manifest("site.yaml", two);
    let mut agent = Agent::start(&site.sandbox, &["--interval", "1h", &m]);
    assert!(agent.next_run().contains("repaired"));
    assert_eq!(site.read("srv/b").as_deref(), Some("b"));

    for broken in [
        // Not YAML.
        "file: [\n",
        // Empty: never "remove everything".
        "",
        // Read, but its catalog cannot be made.
        "nosuchtype:\n  x: {}\n",
        // Read, but its template cannot be rendered.
        "file:\n  /srv/a: {ensure: file, content: \"{{ missing.var }}\"}\n",
        // Good, but it names nothing ral manages: refused as a sweep.
        "file:\n  /srv/c: {ensure: file, content: c}\n",
    ] {
        site.manifest("site.yaml", broken);
        let run = agent.next_run();
        assert!(
            run.contains("run (manifests changed): unchanged"),
            "{broken:?}: {run}"
        );
        assert_eq!(site.read("srv/a").as_deref(), Some("a"), "{broken:?}");
        assert_eq!(site.read("srv/b").as_deref(), Some("b"), "{broken:?}");
        let status = site.status_json();
        let problem = status["status"]["manifest_problem"].as_str().unwrap_or("");
        assert!(
            problem.starts_with("the manifests cannot be used"),
            "{broken:?}: {status}"
        );
    }
    assert_eq!(site.read("srv/c"), None);
    // The sweep's refusal names --destroy, which the agent does not take:
    // it is told what to do instead.
    let hint = "ral agent takes no --destroy: run ral apply --destroy with these manifests \
                once, then SIGHUP the agent";
    if !agent.seen.iter().any(|l| l.contains(hint)) {
        agent.line_with(hint);
    }
    // The last good catalog still repairs.
    site.sandbox.write("srv/b", "tampered");
    assert!(agent.next_run().contains("drift: /srv/b): repaired"));
    assert_eq!(site.read("srv/b").as_deref(), Some("b"));

    // A good edit is in force at once: b, which ral made, goes.
    site.manifest("site.yaml", "file:\n  /srv/a: {ensure: file, content: a}\n");
    let run = agent.next_run();
    assert!(run.contains("run (manifests changed): repaired"), "{run}");
    assert_eq!(site.read("srv/b"), None);
    let status = site.status_json();
    assert!(status["status"]["manifest_problem"].is_null(), "{status}");
    assert_eq!(agent.stop().0, Some(0));
}

#[test]
fn an_agent_started_on_a_broken_manifest_waits_for_a_good_one() {
    let site = Site::new();
    let m = site.manifest("site.yaml", "file: [\n");
    let mut agent = Agent::start(&site.sandbox, &["--interval", "1h", &m]);
    let first = agent.next_run();
    // The time, then why: the error is the end of the line's first part.
    let (head, why) = first
        .split_once(" s: ")
        .unwrap_or_else(|| panic!("{first}"));
    assert!(
        head.starts_with("ral agent: run (start): failed in "),
        "{first}"
    );
    assert!(
        why.starts_with("no manifests could be used yet; 1 failed in a row"),
        "{first}"
    );
    site.manifest("site.yaml", MOTD_AND_HOST);
    let fixed = agent.next_run();
    assert!(
        fixed.contains("run (manifests changed): repaired"),
        "{fixed}"
    );
    assert_eq!(site.read("etc/motd").as_deref(), Some("hello\n"));
    let status = site.agent("status", &[]).expect(0).stdout.clone();
    assert!(
        status.contains("since it started: 2 runs, 2 drifted, 2 repaired, 1 failed run\n"),
        "{status}"
    );
    assert_eq!(agent.stop().0, Some(0));
}

#[test]
fn sighup_reads_the_manifests_again_and_sigusr1_runs_now() {
    let site = Site::new();
    let m = site.manifest("site.yaml", MOTD_AND_HOST);
    let mut agent = Agent::start(&site.sandbox, &["--interval", "1h", &m]);
    agent.next_run();
    // Written in place and closed: read again at once.
    std::fs::write(&m, MOTD_AND_HOST.replace("hello", "hello again")).unwrap();
    let reload = agent.next_run();
    assert!(
        reload.contains("run (manifests changed): repaired"),
        "{reload}"
    );
    assert_eq!(site.read("etc/motd").as_deref(), Some("hello again\n"));
    agent.signal(libc::SIGHUP);
    agent.line_with("ral agent: SIGHUP: reading the providers and the manifests again");
    let run = agent.next_run();
    assert!(run.contains("run (SIGHUP): unchanged"), "{run}");
    agent.signal(libc::SIGUSR1);
    assert!(agent.next_run().contains("run (SIGUSR1): unchanged"));
    assert_eq!(agent.stop().0, Some(0));
}

#[test]
fn sighup_finds_providers_added_since_the_start() {
    let site = Site::new();
    let include = tempfile::tempdir().unwrap();
    let m = site.manifest("site.yaml", MOTD_AND_HOST);
    let dir = include.path().to_str().unwrap();
    let mut agent = Agent::start(&site.sandbox, &["-I", dir, "--interval", "1h", &m]);
    agent.next_run();
    // A package puts a provider in place, and the manifest uses it: the
    // type is unknown to the agent until SIGHUP.
    let status = Command::new("cp")
        .arg("-a")
        .arg(crate::plans::plans_dir().join("providers"))
        .arg(include.path())
        .status()
        .unwrap();
    assert!(status.success());
    site.manifest(
        "site.yaml",
        &format!("{MOTD_AND_HOST}alpha:\n  a1: {{value: one}}\n"),
    );
    let unknown = agent.next_run();
    assert!(
        unknown.contains("run (manifests changed): unchanged"),
        "{unknown}"
    );
    // Told by the status (written before the run's line; the log line
    // comes on another pipe, in no set order with it).
    let status = site.agent("status", &["-j"]).expect(0).stdout.clone();
    assert!(
        status.contains("unknown provider or type 'alpha'"),
        "{status}"
    );
    agent.signal(libc::SIGHUP);
    let known = agent.next_run();
    assert!(known.contains("run (SIGHUP): repaired"), "{known}");
    assert!(site.history().contains("tasks: 1 succeeded"));
    assert_eq!(agent.stop().0, Some(0));
}

/// A manifest whose first task blocks reading ROOT/gate (a FIFO) and
/// writes what it read to ROOT/done; /srv/after comes after it.
fn gated(site: &Site) -> String {
    let root = site.root();
    let gate = root.join("gate");
    let status = Command::new("mkfifo").arg(&gate).status().unwrap();
    assert!(status.success());
    std::fs::create_dir_all(root.join("srv")).unwrap();
    format!(
        "exec:\n  wait:\n    command: [/bin/sh, -c, 'cat {gate} > {done}']\n    creates: /done\n\
         file:\n  /srv/after: {{ensure: file, content: x, require: ['exec[wait]']}}\n",
        gate = gate.display(),
        done = root.join("done").display()
    )
}

/// Opens the gate for writing once its task reads it, writes and closes.
fn open_gate(site: &Site, then: impl FnOnce()) {
    use std::io::Write;
    let mut gate = crate::support::open_fifo(&site.root().join("gate"), true);
    then();
    gate.write_all(b"opened\n").unwrap();
}

#[test]
fn sigterm_lets_the_running_task_finish_records_the_run_and_exits_0() {
    let site = Site::new();
    let m = site.manifest("site.yaml", &gated(&site));
    let mut agent = Agent::start(&site.sandbox, &["--interval", "1h", &m]);
    open_gate(&site, || {
        // The task runs (it opened the gate): SIGTERM now.
        agent.signal(libc::SIGTERM);
    });
    let code = agent.exit_code();
    let said: Vec<String> = agent.lines.iter().collect();
    assert_eq!(code, Some(0), "{said:#?}");
    assert!(
        said.iter()
            .any(|l| l.starts_with("ral agent: run (start): stopped")),
        "{said:#?}"
    );
    assert_eq!(site.read("done").as_deref(), Some("opened\n"));
    assert_eq!(site.read("srv/after"), None, "nothing starts after SIGTERM");
    let history = site.history();
    assert!(
        history.contains("Stopped") && history.contains("by ral agent (start)"),
        "{history}"
    );
    assert!(history.contains("tasks: 1 succeeded, 0 failed, 0 skipped, 1 stopped"));
    let status = site.agent("status", &["-j"]);
    assert_eq!(status.status, 3, "not running: {}", status.stdout);
    assert_eq!(
        status.stdout.parse::<serde_json::Value>().unwrap()["status"]["stopped"],
        true
    );
}

#[test]
fn noop_reports_drift_and_changes_nothing() {
    let site = Site::new();
    site.sandbox.write("etc/motd", "as it was\n");
    let m = site.manifest("site.yaml", MOTD_AND_HOST);
    let mut agent = Agent::start(&site.sandbox, &["--noop", "--interval", "1h", &m]);
    let first = agent.next_run();
    assert!(first.contains("run (start): drift found"), "{first}");
    site.sandbox.write("etc/motd", "changed by hand\n");
    let drift = agent.next_run();
    assert!(
        drift.contains("run (drift: /etc/motd): drift found"),
        "{drift}"
    );
    assert_eq!(site.read("etc/motd").as_deref(), Some("changed by hand\n"));
    assert!(!site.read("etc/hosts").unwrap().contains("db"));
    assert_eq!(agent.stop().0, Some(0));
    let history = site.history();
    let noop: Vec<&str> = history.lines().filter(|l| l.contains(" Noop ")).collect();
    assert_eq!(noop.len(), 2, "{history}");
    assert!(
        noop[1].contains("tasks: 1 to create, 1 to change, 0 to remove, nothing done")
            && noop[1].ends_with("by ral agent --noop (drift: /etc/motd)"),
        "{history}"
    );
    // Shown as the history says it: Noop, what it would have done.
    let id = noop[1].split_whitespace().next().unwrap();
    let shown = site.ral("state", &["show", id]).expect(0).stdout.clone();
    assert!(shown.starts_with(&format!("plan {id}: Noop, ")), "{shown}");
    assert!(
        shown.contains("Initial change file[/etc/motd]: content: changed\n")
            && shown.ends_with(
                "\nnothing done (noop): 1 to create, 1 to change, 0 to remove; 0 unchanged\n"
            ),
        "{shown}"
    );
    // The store holds no item: nothing was applied.
    let items = site
        .ral("state", &["list", "-j"])
        .expect(0)
        .stdout
        .parse::<serde_json::Value>()
        .unwrap();
    assert_eq!(items["items"].as_array().unwrap().len(), 0, "{items}");
}

#[test]
fn failures_back_off_and_hold_drift_runs_but_not_a_request() {
    let site = Site::new();
    // Fails every time: its owner does not exist.
    let m = site.manifest(
        "site.yaml",
        "file:\n  /etc/motd: {ensure: file, content: \"hi\\n\"}\n  \
         /etc/broken: {ensure: file, content: x, owner: nosuchuser}\n",
    );
    let mut agent = Agent::start(&site.sandbox, &["--interval", "2h", "--backoff", "1m", &m]);
    let first = agent.next_run();
    assert!(
        first.contains("run (start): failed")
            && first
                .ends_with("; 1 failed in a row, next interval or drift run in 1m at the soonest"),
        "{first}"
    );
    // Drift now waits for the backoff (and says so): it joins the next
    // run, which a request starts at once.
    site.sandbox.write("etc/motd", "tampered\n");
    let held = agent.line_with("ral agent: drift held back");
    assert!(
        held.contains("(1 failed run in a row): it runs in 59s, or at once on SIGUSR1")
            || held.contains("(1 failed run in a row): it runs in 1m, or at once on SIGUSR1"),
        "{held}"
    );
    agent.signal(libc::SIGUSR1);
    let second = agent.next_run();
    assert!(
        second.contains("run (SIGUSR1; drift: /etc/motd): failed")
            && second
                .ends_with("; 2 failed in a row, next interval or drift run in 2m at the soonest"),
        "{second}"
    );
    assert_eq!(site.read("etc/motd").as_deref(), Some("hi\n"));
    assert_eq!(agent.stop().0, Some(0));
}

#[test]
fn a_persons_apply_is_told_the_agent_runs_and_the_agent_waits_for_one() {
    let site = Site::new();
    let m = site.manifest("site.yaml", &gated(&site));
    let mut agent = Agent::start(&site.sandbox, &["--interval", "1h", &m]);
    let other = site.manifest("other.yaml", "host:\n  web: {ip: 10.0.0.7}\n");
    open_gate(&site, || {
        // The agent's run holds the store.
        let refused = site.ral("apply", &[&other]);
        refused.expect(2);
        assert!(
            refused.stderr.contains("run by ral-agent"),
            "{}",
            refused.stderr
        );
    });
    assert!(agent.next_run().contains("run (start): repaired"));

    // And the other way round: a person's apply holds the store (its
    // exec waits at the gate) when the agent is asked to run.
    std::fs::remove_file(site.root().join("done")).unwrap();
    let mut apply = site
        .sandbox
        .ral_command("apply", &[&m])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    open_gate(&site, || {
        agent.signal(libc::SIGUSR1);
        let waits = agent.line_with("; running after it");
        assert!(
            waits.starts_with("ral agent: another ral apply is running (process "),
            "{waits}"
        );
    });
    assert!(apply.wait().unwrap().success());
    let after = agent.next_run();
    assert!(after.contains("run (SIGUSR1): unchanged"), "{after}");
    assert_eq!(agent.stop().0, Some(0));
}

#[test]
fn one_agent_per_store_and_its_status_says_what_it_did() {
    let site = Site::new();
    let m = site.manifest("site.yaml", MOTD_AND_HOST);
    let none = site.agent("status", &[]);
    assert_eq!(none.status, 3);
    assert!(
        none.stdout.contains("not running; no agent has run on"),
        "{}",
        none.stdout
    );
    let mut agent = Agent::start(&site.sandbox, &["--interval", "45m", &m]);
    agent.next_run();
    let second = site.ral("agent", &["--interval", "1h", &m]);
    second.expect(2);
    assert!(
        second.stderr.contains(&format!(
            "another ral agent (process {}) runs on the state store",
            agent.child.id()
        )),
        "{}",
        second.stderr
    );
    site.sandbox.write("etc/motd", "x\n");
    agent.next_run();
    let status = site.agent("status", &[]).expect(0).stdout.clone();
    assert!(
        status.contains(&format!("agent: running (process {})", agent.child.id())),
        "{status}"
    );
    assert!(status.contains(", every 45m\n"), "{status}");
    assert!(status.contains("(drift: /etc/motd): repaired; 1 drifted, 1 repaired, plan "));
    assert!(status.contains("since it started: 2 runs, 3 drifted, 3 repaired, 0 failed runs"));
    let json = site.status_json();
    let next = json["status"]["next_run"].as_f64().unwrap();
    let ended = json["status"]["last_run"]["ended"].as_f64().unwrap();
    assert!((next - ended - 2700.0).abs() < 5.0, "{json}");
    assert_eq!(agent.stop().0, Some(0));
}

/// systemd's side of `NOTIFY_SOCKET`: a datagram socket in a directory of
/// its own, and what the agent sent it.
struct Systemd {
    _dir: tempfile::TempDir,
    path: PathBuf,
    socket: std::os::unix::net::UnixDatagram,
    deadline: Instant,
    heard: Vec<String>,
}

impl Systemd {
    fn listening() -> Systemd {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify");
        let socket = std::os::unix::net::UnixDatagram::bind(&path).unwrap();
        socket.set_read_timeout(Some(PATIENCE)).unwrap();
        Systemd {
            _dir: dir,
            path,
            socket,
            deadline: Instant::now() + PATIENCE,
            heard: Vec::new(),
        }
    }

    /// The next message that starts with `prefix` (the watchdog's pings,
    /// never ending, may come between: within PATIENCE).
    fn until(&mut self, prefix: &str) -> String {
        loop {
            let mut buffer = [0u8; 1024];
            let n = self
                .socket
                .recv(&mut buffer)
                .expect("systemd hears from the agent");
            let text = String::from_utf8_lossy(&buffer[..n]).into_owned();
            self.heard.push(text.clone());
            if text.starts_with(prefix) {
                return text;
            }
            assert!(
                Instant::now() < self.deadline,
                "no {prefix:?} within {PATIENCE:?}: {:#?}",
                self.heard
            );
        }
    }
}

#[test]
fn systemd_hears_ready_watchdog_reloading_and_stopping() {
    let site = Site::new();
    let m = site.manifest("site.yaml", MOTD_AND_HOST);
    let mut systemd = Systemd::listening();
    let mut command = site.sandbox.ral_command("agent", &["--interval", "1h", &m]);
    command
        .env("NOTIFY_SOCKET", &systemd.path)
        // Pinged every 0.1 s.
        .env("WATCHDOG_USEC", "200000");
    let agent = Agent::start_with(command);
    let mut until = |prefix: &str| systemd.until(prefix);
    until("READY=1\nSTATUS=");
    until("STATUS=last run: ");
    until("WATCHDOG=1");
    // A reload is RELOADING, then READY again once it is done: without
    // that READY, systemd holds the unit in "reloading" until it times
    // out.
    agent.signal(libc::SIGHUP);
    until("RELOADING=1\nMONOTONIC_USEC=");
    until("READY=1\n");
    let (code, _) = agent.stop();
    assert_eq!(code, Some(0));
    until("STOPPING=1");
}

#[test]
fn the_unit_runs_this_ral_with_the_options_given() {
    let site = Site::new();
    let m = site.manifest("my site.yaml", MOTD_AND_HOST);
    let unit = site
        .agent("unit", &["--interval", "1h", "--splay", "5m", "--noop", &m])
        .expect(0)
        .stdout
        .clone();
    let ral = PathBuf::from(env!("CARGO_BIN_EXE_ral"));
    let exec = unit.lines().find(|l| l.starts_with("ExecStart=")).unwrap();
    assert_eq!(
        exec,
        format!(
            "ExecStart={} agent --interval 1h --splay 5m --root {} --noop \"{m}\"",
            ral.display(),
            site.root().display()
        )
    );
    for line in [
        "Type=notify",
        "KillMode=mixed",
        "ExecReload=/bin/kill -HUP $MAINPID",
    ] {
        assert!(unit.lines().any(|l| l == line), "{line}: {unit}");
    }
    // A manifest systemd could not be given is refused, not mangled.
    let bad = site.manifest("a\nb.yaml", MOTD_AND_HOST);
    site.agent("unit", &[&bad])
        .expect(2)
        .stderr_has("control character");
}

#[test]
fn the_unit_names_every_path_absolutely() {
    // systemd starts the unit in /: a relative path given here would name
    // something else there.
    let site = Site::new();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("site.yaml"), MOTD_AND_HOST).unwrap();
    std::fs::write(dir.path().join("vars.yaml"), "greeting: hi\n").unwrap();
    let mut command = site.sandbox.ral_command("agent", &[]);
    let program = command.get_program().to_owned();
    let envs: Vec<_> = command
        .get_envs()
        .filter_map(|(k, v)| Some((k.to_owned(), v?.to_owned())))
        .collect();
    command = Command::new(program);
    command
        .env_clear()
        .envs(envs)
        .current_dir(dir.path())
        .args([
            "agent",
            "unit",
            "--root",
            "fake",
            "-I",
            "inc",
            "--state",
            "st.db",
            "-e",
            "@vars.yaml",
            "-e",
            "x=1",
            "site.yaml",
        ]);
    let unit = run(&mut command).expect(0).stdout.clone();
    let exec = unit.lines().find(|l| l.starts_with("ExecStart=")).unwrap();
    let d = dir.path().display();
    assert!(
        exec.ends_with(&format!(
            " agent -I {d}/inc --root {d}/fake --state {d}/st.db -e @{d}/vars.yaml -e x=1 \
             {d}/site.yaml"
        )),
        "{exec}"
    );
}

#[test]
fn an_agent_refuses_what_it_cannot_run_at_once() {
    let site = Site::new();
    site.ral("agent", &["missing.yaml"])
        .expect(2)
        .stderr_has("manifest missing.yaml");
    site.ral("agent", &["-"])
        .expect(2)
        .stderr_has("not - (standard input)");
    let m = site.manifest("site.yaml", MOTD_AND_HOST);
    site.ral("agent", &["--interval", "10ms", &m])
        .expect(2)
        .stderr_has("shorter than the shortest interval, 100ms");
    site.ral("agent", &["--interval", "1x", &m])
        .expect(2)
        .stderr_has("\"1x\" is not a duration");
    // A subcommand's options go after it: said when they did not.
    site.ral("agent", &["status"])
        .expect(2)
        .stderr_has("for ral agent status, give its options after it");
}

#[test]
fn the_unit_names_every_path_as_it_was_meant_from_where_it_was_made() {
    // systemd starts the unit in /: a relative root there is another
    // directory, and `--root .` the machine itself.
    let here = tempfile::tempdir().unwrap();
    let dir = here.path().canonicalize().unwrap();
    let unit = run(Command::new(env!("CARGO_BIN_EXE_ral"))
        .current_dir(&dir)
        .env_clear()
        .args(["agent", "unit", "--root", ".", "--state", "store/state.db"])
        .args(["-I", "mine", "-e", "@vars.yaml", "-e", "a=b", "site.yaml"]))
    .expect(0)
    .stdout
    .clone();
    let exec = unit.lines().find(|l| l.starts_with("ExecStart=")).unwrap();
    let d = dir.display();
    assert!(
        exec.ends_with(&format!(
            " agent -I {d}/mine --root {d} --state {d}/store/state.db -e @{d}/vars.yaml -e a=b \
             {d}/site.yaml"
        )),
        "{exec}"
    );
    // A name that is not UTF-8 is refused, not changed into another.
    use std::os::unix::ffi::OsStrExt;
    let odd = std::ffi::OsStr::from_bytes(b"/srv/r\xff");
    let refused = run(Command::new(env!("CARGO_BIN_EXE_ral"))
        .env_clear()
        .args(["agent", "unit", "--root"])
        .arg(odd)
        .arg("/site.yaml"));
    refused.expect(2).stderr_has("not UTF-8");
}
#[test]
fn a_manifest_emptied_beside_others_removes_nothing() {
    // A `: > b.yaml`, a write that found the disk full: the other
    // manifests still declare something, but what b.yaml declared must
    // not go.
    let site = Site::new();
    let a = site.manifest(
        "a.yaml",
        "file:\n  /etc/motd: {ensure: file, content: \"hi\\n\"}\n",
    );
    let b = site.manifest("b.yaml", "host:\n  db: {ip: 10.0.0.5}\n");
    let mut agent = Agent::start(&site.sandbox, &["--interval", "1h", &a, &b]);
    assert!(agent.next_run().contains("run (start): repaired"));
    assert!(site.read("etc/hosts").unwrap().contains("10.0.0.5\tdb"));
    for emptied in ["", "\n# nothing yet\n", "host: {}\n", "---\n"] {
        std::fs::write(&b, emptied).unwrap();
        let run = agent.next_run();
        assert!(
            run.contains("run (manifests changed): unchanged"),
            "{emptied:?}: {run}"
        );
        assert!(
            site.read("etc/hosts").unwrap().contains("10.0.0.5\tdb"),
            "{emptied:?}"
        );
        let status = site.status_json();
        let problem = status["status"]["manifest_problem"].as_str().unwrap_or("");
        assert!(
            problem.starts_with("the manifests cannot be used: ") && problem.contains("b.yaml"),
            "{emptied:?}: {status}"
        );
        assert!(
            emptied == "---\n" || problem.contains("b.yaml: declares nothing"),
            "{emptied:?}: {status}"
        );
    }
    // Listed again, and then emptied of that one resource only by an
    // edit that keeps another: in force.
    std::fs::write(&b, "host:\n  db: {ip: 10.0.0.5}\n  web: {ip: 10.0.0.6}\n").unwrap();
    assert!(agent
        .next_run()
        .contains("run (manifests changed): repaired"));
    std::fs::write(&b, "host:\n  web: {ip: 10.0.0.6}\n").unwrap();
    assert!(agent
        .next_run()
        .contains("run (manifests changed): repaired"));
    assert!(!site.read("etc/hosts").unwrap().contains("db"));
    assert_eq!(agent.stop().0, Some(0));
}

#[test]
fn new_manifests_are_not_blamed_for_what_failed_the_old_ones_too() {
    // The store cannot be used for a moment (here its lock file is a
    // link, as a full disk or a damaged file would fail it) just as the
    // manifests change: once it can, the new manifests are in force, not
    // the old ones.
    let site = Site::new();
    let m = site.manifest(
        "site.yaml",
        "file:\n  /etc/motd: {ensure: file, content: \"v1\\n\"}\n",
    );
    let mut agent = Agent::start(
        &site.sandbox,
        &["--interval", "1h", "--backoff", "100ms", &m],
    );
    assert!(agent.next_run().contains("run (start): repaired"));
    let lock = site.root().join("var/lib/ral/state.db.lock");
    let aside = site.root().join("var/lib/ral/lock.aside");
    std::fs::rename(&lock, &aside).unwrap();
    std::os::unix::fs::symlink("nowhere", &lock).unwrap();
    site.manifest(
        "site.yaml",
        "file:\n  /etc/motd: {ensure: file, content: \"v2\\n\"}\n",
    );
    let failed = agent.next_run();
    assert!(
        failed.contains("run (manifests changed): failed"),
        "{failed}"
    );
    std::fs::remove_file(&lock).unwrap();
    std::fs::rename(&aside, &lock).unwrap();
    agent.signal(libc::SIGUSR1);
    let run = agent.next_run();
    assert!(run.contains("): repaired"), "{run}");
    assert_eq!(site.read("etc/motd").as_deref(), Some("v2\n"));
    // And a hand edit to what the manifests say is left alone.
    site.sandbox.write("etc/motd", "v2\n");
    agent.signal(libc::SIGUSR1);
    let run = agent.next_run();
    assert!(run.contains("): unchanged"), "{run}");
    assert_eq!(site.read("etc/motd").as_deref(), Some("v2\n"));
    let status = site.status_json();
    assert!(status["status"]["manifest_problem"].is_null(), "{status}");
    assert_eq!(agent.stop().0, Some(0));
}

#[test]
fn a_change_during_a_run_to_a_file_whose_task_did_not_succeed_is_drift() {
    // The task of /srv/after waits for exec[wait], which fails (after
    // making /done, so that the next run does not need it): /srv/after
    // is skipped, and what someone wrote to it meanwhile is drift, not
    // taken for the run's own.
    let site = Site::new();
    let root = site.root();
    let gate = root.join("gate");
    assert!(Command::new("mkfifo")
        .arg(&gate)
        .status()
        .unwrap()
        .success());
    std::fs::create_dir_all(root.join("srv")).unwrap();
    let m = site.manifest(
        "site.yaml",
        &format!(
            "exec:\n  wait:\n    command: [/bin/sh, -c, 'cat {gate} > {done}; exit 1']\n    \
             creates: /done\n\
             file:\n  /srv/after: {{ensure: file, content: x, require: ['exec[wait]']}}\n",
            gate = gate.display(),
            done = root.join("done").display()
        ),
    );
    let mut agent = Agent::start(
        &site.sandbox,
        &["--interval", "1h", "--backoff", "100ms", &m],
    );
    open_gate(&site, || {
        site.sandbox.write("srv/after", "someone else's\n")
    });
    let first = agent.next_run();
    assert!(first.contains("run (start): failed"), "{first}");
    let repair = agent.next_run();
    assert!(
        repair.contains("run (drift: /srv/after): repaired"),
        "{repair}"
    );
    assert_eq!(site.read("srv/after").as_deref(), Some("x"));
    assert_eq!(agent.stop().0, Some(0));
}

#[test]
fn a_managed_directory_whose_entries_change_is_no_drift_but_its_mode_is() {
    let site = Site::new();
    std::fs::create_dir_all(site.root().join("srv")).unwrap();
    let m = site.manifest(
        "site.yaml",
        "file:\n  /srv/app: {ensure: directory, mode: '0755'}\n  \
         /srv/app/conf: {ensure: file, content: c}\n",
    );
    let mut agent = Agent::start(&site.sandbox, &["--interval", "1h", &m]);
    assert!(agent.next_run().contains("run (start): repaired"));
    // The repair writes into /srv/app (and so does an application's log):
    // the directory's times move, and it is no drift.
    site.sandbox.write("srv/app/conf", "tampered");
    let repair = agent.next_run();
    assert!(
        repair.contains("run (drift: /srv/app/conf): repaired"),
        "{repair}"
    );
    site.sandbox.write("srv/app/app.log", "started\n");
    agent.signal(libc::SIGUSR1);
    let asked = agent.next_run();
    assert_eq!(asked.split(": ").nth(1), Some("run (SIGUSR1)"), "{asked}");
    // Its mode is what the manifest says: a change of it is drift.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(
        site.root().join("srv/app"),
        std::fs::Permissions::from_mode(0o700),
    )
    .unwrap();
    let drift = agent.next_run();
    assert!(drift.contains("run (drift: /srv/app): repaired"), "{drift}");
    assert_eq!(agent.stop().0, Some(0));
}

#[test]
fn systemd_hears_ready_again_once_a_reload_is_done() {
    // `systemctl reload` waits for READY=1 after RELOADING=1 (sd_notify(3)):
    // without it the reload hangs until its timeout, and fails.
    let site = Site::new();
    let m = site.manifest("site.yaml", MOTD_AND_HOST);
    let mut systemd = Systemd::listening();
    let mut command = site.sandbox.ral_command("agent", &["--interval", "1h", &m]);
    command.env("NOTIFY_SOCKET", &systemd.path);
    let mut agent = Agent::start_with(command);
    systemd.until("READY=1\n");
    agent.next_run();
    agent.signal(libc::SIGHUP);
    systemd.until("RELOADING=1\n");
    systemd.until("READY=1");
    assert!(agent.next_run().contains("run (SIGHUP)"));
    assert_eq!(agent.stop().0, Some(0), "{:#?}", systemd.heard);
}

#[test]
fn a_storm_of_sighup_reads_the_providers_once_per_run() {
    let site = Site::new();
    let m = site.manifest("site.yaml", MOTD_AND_HOST);
    let mut agent = Agent::start(&site.sandbox, &["--interval", "1h", &m]);
    agent.next_run();
    // As logrotate scripts or a loop of `systemctl reload` would.
    for _ in 0..300 {
        agent.signal(libc::SIGHUP);
        std::thread::sleep(Duration::from_millis(3));
    }
    agent.signal(libc::SIGUSR1);
    let (code, said) = agent.stop();
    assert_eq!(code, Some(0), "{said:#?}");
    let reads = said
        .iter()
        .filter(|l| l.starts_with("ral agent: SIGHUP: reading the providers"))
        .count();
    let runs = said
        .iter()
        .filter(|l| l.starts_with("ral agent: run ("))
        .count();
    assert!(reads >= 1, "{said:#?}");
    assert!(reads <= runs, "{reads} reads for {runs} runs: {said:#?}");
}

/// `ral agent status ARGS`, its exit status and output once it exits: a
/// failure when it has not within [`PATIENCE`].
fn status_within_patience(args: &[&std::ffi::OsStr]) -> crate::support::Run {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ral"))
        .env_clear()
        .args(["agent", "status"])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // SAFETY: pidfd_open takes a process ID (unreaped: ours) and flags.
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, child.id(), 0) } as i32;
    assert!(pidfd >= 0);
    let mut ready = libc::pollfd {
        fd: pidfd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one pollfd of ours; then the descriptor is closed.
    let got = unsafe { libc::poll(&mut ready, 1, PATIENCE.as_millis() as i32) };
    unsafe { libc::close(pidfd) };
    if got != 1 {
        let _ = child.kill();
        let _ = child.wait();
        panic!("ral agent status {args:?} did not exit within {PATIENCE:?}");
    }
    let output = child.wait_with_output().unwrap();
    crate::support::Run {
        status: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}
#[test]
fn status_beside_a_store_in_a_shared_directory_never_waits_nor_follows() {
    // Another user plants a FIFO, or a link to one, where the agent's
    // lock goes.
    let shared = tempfile::tempdir().unwrap();
    let store = shared.path().join("state.db");
    let lock = shared.path().join("state.db.agent.lock");
    let fifo = shared.path().join("fifo");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    std::fs::rename(&fifo, &lock).unwrap();
    let state = [std::ffi::OsStr::new("--state"), store.as_os_str()];
    status_within_patience(&state)
        .expect(2)
        .stderr_has("state.db.agent.lock: not a regular file");
    std::fs::remove_file(&lock).unwrap();
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    std::os::unix::fs::symlink(&fifo, &lock).unwrap();
    status_within_patience(&state)
        .expect(2)
        .stderr_has("state.db.agent.lock: ");
}
#[test]
fn status_of_a_damaged_status_file_is_an_error_or_said_plainly_never_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("state.db");
    let state = [std::ffi::OsStr::new("--state"), store.as_os_str()];
    let status = |interval: &str, why: &str| {
        format!(
            "{{\"pid\":7,\"started\":1e300,\"manifests\":[],\"interval_seconds\":{interval},\
             \"splay_seconds\":{interval},\"noop\":false,\"next_run\":null,\"last_run\":\
             {{\"plan\":\"p\\u001b]0;x\\u0007\",\"why\":\"{why}\",\"started\":-1e300,\"ended\":0,\
             \"outcome\":\"o\",\"drift\":0,\"repaired\":0}},\"runs\":0,\"drift_found\":0,\
             \"repaired\":0,\"failed_runs\":0,\"manifest_problem\":null,\"stopped\":true}}"
        )
    };
    for interval in ["-1", "1e300"] {
        std::fs::write(
            dir.path().join("state.db.agent"),
            status(interval, "drift: /etc/a\\u001b[31m\\nb"),
        )
        .unwrap();
        let said = status_within_patience(&state);
        said.expect(3);
        assert!(said.stdout.contains("every ?"), "{}", said.stdout);
        assert!(
            !said.stdout.contains('\u{1b}') && !said.stdout.contains("\nb)"),
            "{:?}",
            said.stdout
        );
    }
    // Refused once, with its reason once.
    std::fs::write(dir.path().join("state.db.agent"), "{").unwrap();
    let said = status_within_patience(&state);
    said.expect(2);
    assert_eq!(
        said.stderr.matches("EOF while parsing").count(),
        1,
        "{}",
        said.stderr
    );
}

#[test]
fn a_manifest_that_is_a_link_is_read_again_when_what_it_links_to_changes() {
    // /etc/ral/site.yaml -> a checkout: a pull replaces the file there.
    let site = Site::new();
    let checkout = tempfile::tempdir().unwrap();
    let first = checkout.path().join("v1/site.yaml");
    std::fs::create_dir_all(first.parent().unwrap()).unwrap();
    std::fs::write(
        &first,
        "file:\n  /etc/motd: {ensure: file, content: \"v1\\n\"}\n",
    )
    .unwrap();
    // Two links: the manifest to `current`, `current` to v1.
    let current = checkout.path().join("current.yaml");
    std::os::unix::fs::symlink("v1/site.yaml", &current).unwrap();
    let m = site.manifests.path().join("site.yaml");
    std::os::unix::fs::symlink(&current, &m).unwrap();
    let m = m.to_str().unwrap();
    let mut agent = Agent::start(&site.sandbox, &["--interval", "1h", m]);
    assert!(agent.next_run().contains("run (start): repaired"));
    let fresh = checkout.path().join("v1/.site.yaml.new");
    std::fs::write(
        &fresh,
        "file:\n  /etc/motd: {ensure: file, content: \"v2\\n\"}\n",
    )
    .unwrap();
    std::fs::rename(&fresh, &first).unwrap();
    let run = agent.next_run();
    assert!(run.contains("run (manifests changed): repaired"), "{run}");
    assert_eq!(site.read("etc/motd").as_deref(), Some("v2\n"));
    // `current` pointed elsewhere: the new file is read, and watched.
    let second = checkout.path().join("v3.yaml");
    std::fs::write(
        &second,
        "file:\n  /etc/motd: {ensure: file, content: \"v3\\n\"}\n",
    )
    .unwrap();
    let link = checkout.path().join(".current.new");
    std::os::unix::fs::symlink("v3.yaml", &link).unwrap();
    std::fs::rename(&link, &current).unwrap();
    assert!(agent
        .next_run()
        .contains("run (manifests changed): repaired"));
    assert_eq!(site.read("etc/motd").as_deref(), Some("v3\n"));
    std::fs::write(
        &second,
        "file:\n  /etc/motd: {ensure: file, content: \"v4\\n\"}\n",
    )
    .unwrap();
    assert!(agent
        .next_run()
        .contains("run (manifests changed): repaired"));
    assert_eq!(site.read("etc/motd").as_deref(), Some("v4\n"));
    assert_eq!(agent.stop().0, Some(0));
}

#[test]
fn drift_that_came_before_a_run_that_read_nothing_is_still_drift() {
    // The store cannot be used for a moment (its lock file a link) when
    // a managed file is edited: the drift run fails before it reads
    // anything, and the edit is repaired once the store can be used.
    let site = Site::new();
    let m = site.manifest("site.yaml", MOTD_AND_HOST);
    let mut agent = Agent::start(
        &site.sandbox,
        &["--interval", "1h", "--backoff", "100ms", &m],
    );
    assert!(agent.next_run().contains("run (start): repaired"));
    let lock = site.root().join("var/lib/ral/state.db.lock");
    let aside = site.root().join("var/lib/ral/lock.aside");
    std::fs::rename(&lock, &aside).unwrap();
    std::os::unix::fs::symlink("nowhere", &lock).unwrap();
    site.sandbox.write("etc/motd", "tampered\n");
    let failed = agent.next_run();
    assert!(
        failed.contains("run (drift: /etc/motd): failed"),
        "{failed}"
    );
    std::fs::remove_file(&lock).unwrap();
    std::fs::rename(&aside, &lock).unwrap();
    // (A run that found the store still unusable may come first.)
    let repair = loop {
        let run = agent.next_run();
        if !run.contains("): failed") {
            break run;
        }
    };
    assert!(repair.contains("drift: /etc/motd): repaired"), "{repair}");
    assert_eq!(site.read("etc/motd").as_deref(), Some("hello\n"));
    assert_eq!(agent.stop().0, Some(0));
}
