//! `ralsh -t`/`-i`: providers run on targets over a real sshd (started by
//! each test on 127.0.0.1), each target with its own fake root.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value as Json;

use crate::host::Test;
use crate::pids::{assert_gone, pids_in};
use crate::quoting_cases::cases;
use crate::sshd::{free_port, Sshd};
use crate::support::{fixtures_dir, run, run_with_stdin, Run};
use crate::tests;

/// This module's tests and what each needs.
pub fn tests() -> Vec<Test> {
    [tests![[Sshd]
        list_find_update_and_noop_run_on_every_target_over_one_connection_each,
        hostile_values_reach_the_target_exactly_and_run_nothing,
        providers_are_copied_once_into_a_private_directory_and_a_foreign_one_is_refused,
        providers_on_a_target_get_the_scrubbed_environment_in_slash,
        the_time_limit_ends_the_remote_provider_and_its_child,
        an_unreachable_target_is_reported_and_the_others_still_run,
        an_interrupt_ends_the_remote_provider_and_closes_the_connection,
        ral_apply_converges_every_target_with_a_store_per_target_here,
        sudo_and_ansible_become_run_the_providers_through_sudo_n,
        thirty_targets_at_once_all_get_through_sshds_default_startup_limit,
        a_killed_ralsh_leaves_nothing_running_on_the_target_and_the_next_run_sweeps_its_directory,
        a_killed_ral_apply_leaves_nothing_running_on_the_target,
        a_changed_copy_of_the_providers_is_replaced_and_a_link_is_never_followed,
        a_sensitive_value_reaches_a_target_on_no_command_line,
        plugin_lock_tasks_wrap_each_target_and_serial_rolls_out_in_batches,
        a_run_within_the_persist_time_reuses_the_connection_until_it_is_closed,
        a_kept_connection_ends_after_its_time,
        a_kept_socket_that_never_answers_is_replaced_without_a_wait,
        two_runs_at_once_to_one_target_share_one_login,
        a_directory_of_kept_connections_open_to_others_is_refused,
        a_killed_run_through_a_kept_connection_leaves_no_provider_on_the_target,
        two_inventory_entries_of_one_machine_keep_a_master_each,
        an_interrupt_of_a_run_through_a_kept_connection_ends_its_provider_and_keeps_the_master,
        a_kept_master_that_takes_no_more_sessions_is_left_to_the_run_using_it,
        a_copied_file_named_like_pythons_cache_is_checked_as_any_other,
        a_targets_port_and_user_win_over_its_destination_as_for_the_connection,
        the_web_app_job_renders_one_manifest_per_target_in_one_run,
        another_machine_gets_a_copy_of_the_native_program_for_it_or_the_reason,
        two_names_of_one_machine_and_root_take_turns_in_one_apply,
        ral_apply_report_is_one_page_for_all_targets_failed_first,
        ral_plan_and_apply_json_over_targets_is_one_document,
    ], tests![[Sshd, Chromium]
        chromium_opens_the_failed_target_first_in_the_fleet_report,
    ]]
    .concat()
}

/// The hosts file each target's root starts with.
const HOSTS: &str = "127.0.0.1 localhost\n";

/// A server, a controller (its HOME and temporary directory) and targets,
/// each with a root of its own.
struct Fleet {
    sshd: Sshd,
    controller: tempfile::TempDir,
    roots: Vec<(String, tempfile::TempDir)>,
    inventory: PathBuf,
}

impl Fleet {
    /// Targets named `names`, and, when `down` is set, one more named
    /// `down` at a port where nothing listens.
    fn new(names: &[&str], down: bool) -> Fleet {
        Fleet::with_sshd(Sshd::start(), names, down)
    }

    fn with_sshd(sshd: Sshd, names: &[&str], down: bool) -> Fleet {
        let controller = tempfile::tempdir().unwrap();
        std::fs::create_dir(controller.path().join("tmp")).unwrap();
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(controller.path().join("run"))
            .unwrap();
        let mut inventory = String::from("all:\n  hosts:\n");
        let mut roots = Vec::new();
        for name in names {
            let root = tempfile::tempdir().unwrap();
            std::fs::create_dir(root.path().join("etc")).unwrap();
            std::fs::write(root.path().join("etc/hosts"), HOSTS).unwrap();
            inventory.push_str(&format!(
                "    {name}:\n      ral_root: {}\n",
                root.path().display()
            ));
            roots.push((name.to_string(), root));
        }
        if down {
            inventory.push_str(&format!(
                "    down:\n      ansible_host: 127.0.0.1\n      ansible_port: {}\n      ral_root: /nonexistent\n",
                free_port()
            ));
        }
        let file = controller.path().join("inventory.yaml");
        std::fs::write(&file, inventory).unwrap();
        Fleet {
            sshd,
            controller,
            roots,
            inventory: file,
        }
    }

    fn root(&self, name: &str) -> &Path {
        self.roots
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, root)| root.path())
            .unwrap()
    }

    /// The root of `name`, with the fixtures' seed files copied in.
    fn seeded(&self, name: &str) -> &Path {
        let root = self.root(name);
        let copied = Command::new("cp")
            .arg("-a")
            .arg(fixtures_dir().join("seed/."))
            .arg(root)
            .status()
            .unwrap();
        assert!(copied.success());
        root
    }

    fn read(&self, name: &str, file: &str) -> String {
        std::fs::read_to_string(self.root(name).join(file)).unwrap_or_default()
    }

    /// ralsh with a clean environment, the controller's HOME and TMPDIR,
    /// and the test sshd's ssh config; its connections close with it
    /// (RAL_SSH_PERSIST=0; see [`Fleet::warm`] for kept ones).
    fn command(&self) -> Command {
        let mut command =
            crate::sshd::controller_command(env!("CARGO_BIN_EXE_ralsh"), self.controller.path());
        command.arg("--ssh-config").arg(self.sshd.ssh_config());
        command
    }

    /// `ral SUBCOMMAND` over the inventory's targets, with the stores in
    /// the controller's `state`, on `manifest`.
    fn ral(&self, subcommand: &str, args: &[&str], manifest: &Path) -> Run {
        let mut command =
            crate::sshd::controller_command(env!("CARGO_BIN_EXE_ral"), self.controller.path());
        command
            .arg(subcommand)
            .arg("--ssh-config")
            .arg(self.sshd.ssh_config())
            .arg("-i")
            .arg(&self.inventory)
            .arg("--state")
            .arg(self.controller.path().join("state"))
            .args(args)
            .arg(manifest);
        run(&mut command)
    }

    /// The controller's XDG_RUNTIME_DIR, where kept connections are.
    fn runtime(&self) -> PathBuf {
        self.controller.path().join("run")
    }

    fn kept_dir(&self) -> PathBuf {
        self.runtime().join("ral-connections")
    }

    /// ralsh on the inventory's targets, keeping its connections open
    /// `persist` seconds after the run.
    fn warm(&self, persist: &str) -> Command {
        let mut command = self.command();
        command
            .env_remove("RAL_SSH_PERSIST")
            .env("XDG_RUNTIME_DIR", self.runtime())
            .args(["--persist", persist, "-i"])
            .arg(&self.inventory);
        command
    }

    /// `ral connections ARGS`, as the warm runs' user.
    fn connections_command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_ral"));
        command
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.controller.path())
            .env("TMPDIR", self.controller.path().join("tmp"))
            .env("XDG_RUNTIME_DIR", self.runtime())
            .arg("connections")
            .args(args);
        command
    }

    fn connections(&self, args: &[&str]) -> Run {
        run(&mut self.connections_command(args))
    }

    /// The kept connections' targets and masters, as `ral connections`
    /// lists them.
    fn masters(&self) -> Vec<(String, i32)> {
        let listed = self.connections(&["-j"]);
        listed.expect(0);
        let doc: Json = serde_json::from_str(&listed.stdout).unwrap();
        doc["connections"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                let pid = c["master"].as_i64().unwrap_or_else(|| panic!("{c}"));
                (c["target"].as_str().unwrap().to_owned(), pid as i32)
            })
            .collect()
    }

    /// What is in the directory of kept connections.
    fn kept_files(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(self.kept_dir())
            .map(|entries| {
                entries
                    .flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    }

    /// ralsh on the inventory's targets.
    fn ralsh(&self, args: &[&str]) -> Run {
        run(self.command().arg("-i").arg(&self.inventory).args(args))
    }

    /// The directory of the one copy of the providers on the targets
    /// (they share the server's HOME).
    fn copy_on_target(&self) -> PathBuf {
        let cache = self.sshd.home().join(".cache/ral");
        let mut copies = std::fs::read_dir(&cache)
            .unwrap()
            .map(|e| e.unwrap().path());
        let copy = copies.next().expect("a copy of the providers");
        assert!(copies.next().is_none(), "one copy in {}", cache.display());
        copy
    }

    /// No ssh of this controller is left running: every master was
    /// closed. (Its control sockets are in the controller's TMPDIR, which
    /// every ssh it starts names on its command line.)
    #[track_caller]
    fn assert_no_ssh_left(&self) {
        let marker = self.controller.path().join("tmp").display().to_string();
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
                continue;
            };
            let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
            if String::from_utf8_lossy(&cmdline).contains(&marker) {
                assert_gone(pid, &marker);
            }
        }
        let left: Vec<_> = std::fs::read_dir(self.controller.path().join("tmp"))
            .unwrap()
            .collect();
        assert!(left.is_empty(), "the control directory is left: {left:?}");
    }
}

impl Drop for Fleet {
    /// Closes the masters the warm runs kept, also when a test failed,
    /// so none outlives its test for its persist time.
    fn drop(&mut self) {
        if self.kept_dir().exists() {
            let _ = self.connections_command(&["close"]).output();
        }
    }
}

/// Whether `pid` runs (a zombie does not).
fn running(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        !stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
    })
}

fn targets(doc: &Json) -> &Vec<Json> {
    doc["targets"].as_array().expect("a targets array")
}

fn list_find_update_and_noop_run_on_every_target_over_one_connection_each() {
    let fleet = Fleet::new(&["t1", "t2"], false);
    std::fs::write(fleet.root("t2").join("etc/hosts"), "10.0.0.2 only-on-t2\n").unwrap();

    let listed = fleet.ralsh(&["host"]);
    listed.expect(0);
    let t1_at = listed.stdout.find("== t1 ==").expect("a t1 group");
    let t2_at = listed.stdout.find("== t2 ==").expect("a t2 group");
    assert!(t1_at < t2_at, "{}", listed.stdout);
    assert!(listed.stdout[t1_at..t2_at].contains("'localhost'"));
    assert!(!listed.stdout[t1_at..t2_at].contains("only-on-t2"));
    assert!(listed.stdout[t2_at..].contains("'only-on-t2'"));
    assert_eq!(fleet.sshd.accepted(), 2, "one connection per target");

    let found = fleet.ralsh(&["-j", "host", "localhost"]);
    found.expect(0);
    // One form for -j everywhere: one line, as without -t.
    assert_eq!(found.stdout.lines().count(), 1, "{}", found.stdout);
    let doc: Json = serde_json::from_str(&found.stdout).unwrap();
    let all = targets(&doc);
    assert_eq!(all[0]["target"], "t1");
    assert_eq!(all[0]["resource"]["ip"], "127.0.0.1");
    assert_eq!(all[1]["target"], "t2");
    assert_eq!(all[1]["resource"]["ensure"], "absent", "not on t2: {doc}");
    // With -a an absent resource is not found: the worst status wins.
    fleet.ralsh(&["-a", "host", "localhost"]).expect(1);
    assert_eq!(fleet.sshd.accepted(), 6);

    let noop = fleet.ralsh(&["-n", "host", "web", "ip=10.1.1.1"]);
    noop.expect(0).stdout_has("ip: (none) -> '10.1.1.1'");
    assert_eq!(fleet.read("t1", "etc/hosts"), HOSTS, "noop changed nothing");

    let changed = fleet.ralsh(&["-t", "t2", "host", "web", "ip=10.1.1.1"]);
    changed.expect(0);
    assert!(!changed.stdout.contains("== t1 =="), "-t picks t2 only");
    assert_eq!(fleet.read("t1", "etc/hosts"), HOSTS);
    assert!(fleet.read("t2", "etc/hosts").contains("10.1.1.1\tweb"));
    fleet.assert_no_ssh_left();
}

fn hostile_values_reach_the_target_exactly_and_run_nothing() {
    let fleet = Fleet::new(&["t1"], false);
    let root = fleet.root("t1");
    let canary = root.join("canary");
    let canary = canary.to_str().unwrap();
    for (provider, suffix) in [("quote::bash", "bash"), ("quote::python", "python")] {
        for (name, value) in cases(root) {
            let value_arg = format!("value={value}");
            let mut command = fleet.command();
            command
                .args(["-t", "target-by-name", "--root"])
                .arg(root)
                .arg("-I")
                .arg(fixtures_dir())
                .args([provider, &name, &value_arg]);
            run(&mut command).expect(0);
            assert_eq!(
                fleet.read("t1", &format!("value.{suffix}")),
                value,
                "{value:?}"
            );
            assert_eq!(
                fleet.read("t1", &format!("name.{suffix}")),
                name,
                "{name:?}"
            );
            assert!(!Path::new(canary).exists(), "{value:?} ran a command");
        }
    }
}

fn providers_are_copied_once_into_a_private_directory_and_a_foreign_one_is_refused() {
    let fleet = Fleet::new(&["t1"], false);
    let first = fleet.ralsh(&["-l", "info", "host"]);
    first.expect(0).stderr_has("t1: copied ");
    let cache = fleet.sshd.home().join(".cache/ral");
    let bundles: Vec<_> = std::fs::read_dir(&cache).unwrap().flatten().collect();
    assert_eq!(bundles.len(), 1, "one directory per digest: {bundles:?}");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&cache).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o700);
    assert!(bundles[0].path().join("d0/etc_hosts.prov").exists());

    let second = fleet.ralsh(&["-l", "info", "host"]);
    second.expect(0);
    assert!(
        !second.stderr.contains("copied"),
        "nothing copied the second time: {}",
        second.stderr
    );
    assert_eq!(
        std::fs::read_dir(&cache).unwrap().count(),
        1,
        "no second copy"
    );

    // A directory another user owns or can write is not used.
    std::os::unix::fs::chown(&cache, Some(65534), Some(65534)).unwrap();
    let refused = fleet.ralsh(&["host"]);
    refused
        .expect(2)
        .stderr_has("is owned by another user or writable by others");
    std::os::unix::fs::chown(&cache, Some(0), Some(0)).unwrap();
    std::fs::set_permissions(&cache, std::fs::Permissions::from_mode(0o777)).unwrap();
    fleet
        .ralsh(&["host"])
        .expect(2)
        .stderr_has("is owned by another user or writable by others");
}

fn providers_on_a_target_get_the_scrubbed_environment_in_slash() {
    let fleet = Fleet::new(&["t1"], false);
    let mut command = fleet.command();
    command
        .env("LEAK_ME", "secret")
        .arg("-i")
        .arg(&fleet.inventory)
        .arg("-I")
        .arg(fixtures_dir())
        .arg("envdump");
    run(&mut command).expect(0);
    let env = fleet.read("t1", "env");
    let mut names: Vec<&str> = env
        .split('\0')
        .filter(|entry| !entry.is_empty())
        .map(|entry| entry.split_once('=').unwrap().0)
        // bash itself adds these when it starts.
        .filter(|key| !["PWD", "SHLVL", "_"].contains(key))
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "HOME",
            "LANG",
            "LC_ALL",
            "PATH",
            "RALSH_LOCK_TIMEOUT",
            "RALSH_PROVIDER_LIB",
            "RALSH_ROOT_DIR",
        ]
    );
    assert!(env.contains(&format!("RALSH_ROOT_DIR={}\0", fleet.root("t1").display())));
    assert!(env.contains(&format!("HOME={}\0", fleet.sshd.home().display())));
    assert_eq!(fleet.read("t1", "cwd"), "/\n");
}

fn the_time_limit_ends_the_remote_provider_and_its_child() {
    let fleet = Fleet::new(&["t1"], false);
    let mut command = fleet.command();
    command
        .arg("-i")
        .arg(&fleet.inventory)
        .args(["--timeout", "2", "-I"])
        .arg(fixtures_dir())
        .arg("hang");
    let result = run(&mut command);
    result
        .expect(2)
        .stderr_has("t1: hang::hang: list did not finish within 2s");
    let pids = pids_in(&fleet.root("t1").join("pids"));
    assert_eq!(
        pids.len(),
        2,
        "the provider and its child that ignores SIGTERM"
    );
    for pid in pids {
        assert_gone(pid, "hang");
    }
    fleet.assert_no_ssh_left();
}

fn an_unreachable_target_is_reported_and_the_others_still_run() {
    let fleet = Fleet::new(&["t1", "t2"], true);
    let human = fleet.ralsh(&["host", "localhost"]);
    human.expect(2).stderr_has("ralsh: error: down: ");
    let down_at = human.stdout.find("== down ==").expect("a group for down");
    assert!(
        human.stdout[down_at..].contains("error: "),
        "{}",
        human.stdout
    );
    assert!(
        human.stdout[down_at..].contains("Connection refused"),
        "{}",
        human.stdout
    );
    assert_eq!(human.stdout.matches("'localhost'").count(), 2);

    let json = fleet.ralsh(&["-j", "host", "localhost"]);
    json.expect(2);
    let doc: Json = serde_json::from_str(&json.stdout).unwrap();
    let all = targets(&doc);
    let names: Vec<&str> = all.iter().map(|t| t["target"].as_str().unwrap()).collect();
    assert_eq!(names, ["t1", "t2", "down"]);
    assert_eq!(all[0]["resource"]["name"], "localhost");
    assert_eq!(all[1]["resource"]["name"], "localhost");
    let message = all[2]["error"]["message"].as_str().unwrap();
    assert!(message.contains("Connection refused"), "{message}");
    fleet.assert_no_ssh_left();
}

fn an_interrupt_ends_the_remote_provider_and_closes_the_connection() {
    let fleet = Fleet::new(&["t1"], false);
    let mut command = fleet.command();
    command.arg("-i").arg(&fleet.inventory);
    interrupt_and_check(&fleet, command);
    fleet.assert_no_ssh_left();
}

fn an_interrupt_of_a_run_through_a_kept_connection_ends_its_provider_and_keeps_the_master() {
    let fleet = Fleet::new(&["t1"], false);
    run(fleet.warm("60").args(["host", "localhost"])).expect(0);
    let masters = fleet.masters();
    assert_eq!(masters.len(), 1);
    interrupt_and_check(&fleet, fleet.warm("60"));
    // Nothing of the run is left but the master, which the next run
    // reuses.
    let marker = fleet.kept_dir().display().to_string();
    for pid in processes_naming(&marker) {
        if pid != masters[0].1 {
            assert_gone(pid, &marker);
        }
    }
    assert!(running(masters[0].1));
    run(fleet.warm("60").args(["host", "localhost"])).expect(0);
    assert_eq!(fleet.sshd.accepted(), 1);
    assert_eq!(fleet.masters(), masters);
}

/// Runs `command` (ralsh on the fleet's `t1`) with a provider that hangs,
/// sends it SIGINT once the provider and its child run on the target,
/// and checks that it ends by the signal and the provider with it.
fn interrupt_and_check(fleet: &Fleet, mut command: Command) {
    let root = fleet.root("t1");
    // The provider says "started" on this FIFO once it and its child run.
    let held = root.join("held");
    let status = Command::new("mkfifo").arg(&held).status().unwrap();
    assert!(status.success());
    command
        .args(["--timeout", "120", "-I"])
        .arg(fixtures_dir())
        .args(["-l", "debug", "hang"])
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(fleet.controller.path().join("stderr")).unwrap());
    let mut ralsh = command.spawn().unwrap();
    let mut fifo = crate::support::open_fifo(&held, false);
    let mut said = [0u8; 8];
    use std::io::Read;
    fifo.read_exact(&mut said).unwrap();
    assert_eq!(&said, b"started\n");
    // SAFETY: kill with plain integers, to the ralsh this test started.
    unsafe { libc::kill(ralsh.id() as i32, libc::SIGINT) };
    let status = ralsh.wait().unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(
        status.signal(),
        Some(libc::SIGINT),
        "ralsh ends by the signal"
    );
    let said = std::fs::read_to_string(fleet.controller.path().join("stderr")).unwrap();
    assert!(said.contains("t1: connected ("), "{said}");
    let pids = pids_in(&root.join("pids"));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    while pids.iter().any(|pid| running(*pid)) && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    if pids.iter().any(|pid| running(*pid)) {
        let ps = Command::new("ps")
            .args(["-eo", "pid,ppid,pgid,sid,stat,etime,args"])
            .output()
            .unwrap();
        panic!(
            "the remote provider {pids:?} still runs; ralsh said:\n{said}\nprocesses:\n{}\nsshd:\n{}",
            String::from_utf8_lossy(&ps.stdout),
            fleet.sshd.log()
        );
    }
    for pid in pids {
        assert_gone(pid, "hang");
    }
}

fn ral_apply_converges_every_target_with_a_store_per_target_here() {
    let fleet = Fleet::new(&["t1", "t2"], false);
    let manifest = fleet.controller.path().join("site.yaml");
    std::fs::write(
        &manifest,
        "host:\n  web:\n    ip: 10.0.0.5\n  db:\n    ip: 10.0.0.6\n",
    )
    .unwrap();
    let ral = |subcommand: &str, args: &[&str]| fleet.ral(subcommand, args, &manifest);
    let planned = ral("plan", &["--detailed-exitcodes"]);
    planned.expect(2);
    assert_eq!(
        planned.stdout.matches("Plan: 2 to create").count(),
        2,
        "{}",
        planned.stdout
    );
    assert_eq!(
        fleet.read("t1", "etc/hosts"),
        HOSTS,
        "a plan changes nothing"
    );

    let applied = ral("apply", &[]);
    applied.expect(0);
    for target in ["t1", "t2"] {
        let hosts = fleet.read(target, "etc/hosts");
        assert!(
            hosts.contains("10.0.0.5\tweb") && hosts.contains("10.0.0.6\tdb"),
            "{target}: {hosts}"
        );
        // Named from where ssh connects (the test's ssh config sends every
        // name to root@127.0.0.1) and the target's root.
        let root = fleet.root(target).display().to_string().replace('/', "%2F");
        let named = std::fs::read_dir(fleet.controller.path().join("state"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .any(|name| {
                name.starts_with("root@127.0.0.1:") && name.ends_with(&format!("{root}.db"))
            });
        assert!(named, "{target}'s store");
    }
    let again = ral("apply", &["-j", "--detailed-exitcodes"]);
    again.expect(0);
    let doc: Json = serde_json::from_str(&again.stdout).unwrap();
    for entry in targets(&doc) {
        assert_eq!(entry["plan"]["state"], "Successful", "{entry}");
        assert_eq!(entry["plan"]["counts"]["unchanged"], 2, "{entry}");
        assert_eq!(
            entry["plan"]["tasks"].as_array().unwrap().len(),
            0,
            "{entry}"
        );
    }

    // A resource dropped from the manifest is removed from every target
    // its store says ral created it on.
    std::fs::write(&manifest, "host:\n  web:\n    ip: 10.0.0.5\n").unwrap();
    ral("apply", &[]).expect(0);
    for target in ["t1", "t2"] {
        assert!(!fleet.read(target, "etc/hosts").contains("db"), "{target}");
    }
    fleet.assert_no_ssh_left();
}

fn sudo_and_ansible_become_run_the_providers_through_sudo_n() {
    // A sudo first on the sessions' PATH that notes how it was called and
    // runs the command, as sudo -n does for root.
    let sshd = Sshd::start_with(" PATH=DIR/bin:/usr/bin:/bin");
    let bin = sshd.dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let noted = sshd.dir.path().join("sudo.calls");
    std::fs::write(
        bin.join("sudo"),
        format!(
            "#!/bin/sh\necho \"$1 $2 $3 $4\" >> {}\n[ \"$1 $2\" = '-n --' ] || exit 1\nshift 2\nexec \"$@\"\n",
            noted.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(bin.join("sudo"), std::fs::Permissions::from_mode(0o755)).unwrap();
    let fleet = Fleet::with_sshd(sshd, &["t1"], false);
    fleet.ralsh(&["host", "localhost"]).expect(0);
    assert!(!noted.exists(), "no sudo unless asked");
    fleet.ralsh(&["--sudo", "host", "localhost"]).expect(0);
    let calls = std::fs::read_to_string(&noted).unwrap();
    assert_eq!(calls, "-n -- /bin/sh -c\n", "one call, the provider's find");

    let inventory = fleet.controller.path().join("become.yaml");
    std::fs::write(
        &inventory,
        format!(
            "all:\n  vars:\n    ansible_become: true\n  hosts:\n    t1:\n      ral_root: {}\n",
            fleet.root("t1").display()
        ),
    )
    .unwrap();
    run(fleet
        .command()
        .arg("-i")
        .arg(&inventory)
        .args(["host", "web", "ip=10.9.9.9"]))
    .expect(0);
    let calls = std::fs::read_to_string(&noted).unwrap();
    // The find, the update, and the read of what it created for its view.
    assert_eq!(
        calls.lines().count(),
        4,
        "find, update and read back through sudo: {calls}"
    );
    assert!(fleet.read("t1", "etc/hosts").contains("10.9.9.9\tweb"));
}

fn thirty_targets_at_once_all_get_through_sshds_default_startup_limit() {
    // sshd drops new connections at random once 10 are logging in; ral
    // opens at most 10 at a time, so none of 30 targets run together is
    // dropped.
    let names: Vec<String> = (1..=30).map(|i| format!("n{i:02}")).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let fleet = Fleet::new(&names, false);
    let run = fleet.ralsh(&["--forks", "30", "-j", "host", "localhost"]);
    run.expect(0);
    let doc: Json = serde_json::from_str(&run.stdout).unwrap();
    let all = targets(&doc);
    assert_eq!(all.len(), 30);
    for (entry, name) in all.iter().zip(&names) {
        assert_eq!(entry["target"], *name);
        assert_eq!(entry["resource"]["ip"], "127.0.0.1", "{entry}");
    }
    assert_eq!(fleet.sshd.accepted(), 30);
    fleet.assert_no_ssh_left();
}

/// The processes whose command line names `marker`.
fn processes_naming(marker: &str) -> Vec<i32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        if running(pid) && String::from_utf8_lossy(&cmdline).contains(marker) {
            found.push(pid);
        }
    }
    found
}

/// Starts `command` (a run on the fleet's `t1` whose provider hangs) as
/// the leader of a process group, waits until the provider and its child
/// run on the target, SIGKILLs the whole group, and checks that nothing
/// of the run is left: not the provider, not its child (which ignores
/// SIGTERM), not one ssh. Returns the run's control directory, left
/// behind, and its mode. With `kept`, the run goes through that kept
/// master, which must stay (it has no control directory: the empty
/// path, and 0).
fn kill_and_check(fleet: &Fleet, mut command: Command, kept: Option<i32>) -> (PathBuf, u32) {
    let root = fleet.root("t1");
    // The provider says "started" on this FIFO once it and its child run.
    let held = root.join("held");
    let status = Command::new("mkfifo").arg(&held).status().unwrap();
    assert!(status.success());
    command
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    std::os::unix::process::CommandExt::process_group(&mut command, 0);
    let mut run = command.spawn().unwrap();
    let mut fifo = crate::support::open_fifo(&held, false);
    let mut said = [0u8; 8];
    use std::io::Read;
    fifo.read_exact(&mut said).unwrap();
    assert_eq!(&said, b"started\n");

    let tmp = fleet.controller.path().join("tmp");
    let dirs: Vec<PathBuf> = std::fs::read_dir(&tmp)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .collect();
    let (dir, mode) = if kept.is_some() {
        assert!(dirs.is_empty(), "{dirs:?}");
        (PathBuf::new(), 0)
    } else {
        assert_eq!(dirs.len(), 1, "{dirs:?}");
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&dirs[0]).unwrap().permissions().mode();
        (dirs[0].clone(), mode)
    };

    // SIGKILL to the whole process group: nothing of it can clean up.
    let killed = std::time::Instant::now();
    // SAFETY: kill with plain integers, to the group of the run this test
    // started.
    unsafe { libc::kill(-(run.id() as i32), libc::SIGKILL) };
    run.wait().unwrap();
    // The provider and its child are gone within a few seconds
    // (assert_gone waits up to 10 s), not at --timeout.
    for pid in pids_in(&root.join("pids")) {
        assert_gone(pid, "hang");
    }
    // So is every ssh of the run (they name its control directory, or
    // the kept master's socket), but a kept master.
    let marker = match kept {
        Some(_) => fleet.kept_dir().display().to_string(),
        None => tmp.display().to_string(),
    };
    let of_the_run = || -> Vec<i32> {
        processes_naming(&marker)
            .into_iter()
            .filter(|pid| Some(*pid) != kept)
            .collect()
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !of_the_run().is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    for pid in of_the_run() {
        assert_gone(pid, &marker);
    }
    eprintln!("everything gone {:?} after the kill", killed.elapsed());
    (dir, mode)
}

fn a_killed_ralsh_leaves_nothing_running_on_the_target_and_the_next_run_sweeps_its_directory() {
    let fleet = Fleet::new(&["t1"], false);
    let mut command = fleet.command();
    command
        .arg("-i")
        .arg(&fleet.inventory)
        .args(["--timeout", "300", "-I"])
        .arg(fixtures_dir())
        .arg("hang");
    let (dir, mode) = kill_and_check(&fleet, command, None);
    assert_eq!(mode & 0o777, 0o700, "{}", dir.display());

    // The killed run's directory is left; the next run removes it, and
    // leaves a live run's (its lock held) alone.
    assert!(dir.exists());
    let live = fleet
        .controller
        .path()
        .join(format!("tmp/ral-ssh-{}-live", std::process::id()));
    std::fs::create_dir(&live).unwrap();
    let lock = std::fs::File::create(live.join("lock")).unwrap();
    // SAFETY: flock on a descriptor this test owns.
    assert_eq!(
        unsafe { libc::flock(std::os::fd::AsRawFd::as_raw_fd(&lock), libc::LOCK_EX) },
        0
    );
    fleet.ralsh(&["host", "localhost"]).expect(0);
    assert!(!dir.exists(), "the killed run's directory is swept");
    assert!(live.join("lock").exists(), "a live run's directory stays");
    drop(lock);
    std::fs::remove_dir_all(&live).unwrap();
    fleet.assert_no_ssh_left();
}

fn a_killed_ral_apply_leaves_nothing_running_on_the_target() {
    let fleet = Fleet::new(&["t1"], false);
    let manifest = fleet.controller.path().join("site.yaml");
    std::fs::write(&manifest, "hang:\n  x: {}\n").unwrap();
    let mut command =
        crate::sshd::controller_command(env!("CARGO_BIN_EXE_ral"), fleet.controller.path());
    command
        .arg("apply")
        .arg("--ssh-config")
        .arg(fleet.sshd.ssh_config())
        .arg("-i")
        .arg(&fleet.inventory)
        .arg("--state")
        .arg(fleet.controller.path().join("state"))
        .args(["--timeout", "300", "-I"])
        .arg(fixtures_dir())
        .arg(&manifest);
    kill_and_check(&fleet, command, None);
}

fn a_changed_copy_of_the_providers_is_replaced_and_a_link_is_never_followed() {
    let fleet = Fleet::new(&["t1"], false);
    fleet
        .ralsh(&["-l", "info", "host"])
        .expect(0)
        .stderr_has("t1: copied ");
    let bundle = fleet.copy_on_target();
    let provider = bundle.join("d0/etc_hosts.prov");
    let sent = std::fs::read(&provider).unwrap();
    // The provider, changed, would leave a mark in the root.
    let mark = fleet.root("t1").join("tampered");
    let evil = format!("#!/bin/sh\ntouch {}\nexit 1\n", mark.display());
    let again = |fleet: &Fleet, why: &str| {
        let run = fleet.ralsh(&["-l", "info", "host", "localhost"]);
        run.expect(0)
            .stderr_has("t1: the copy of the providers there cannot be used (")
            .stderr_has(why)
            .stderr_has("t1: copied ");
        assert!(!mark.exists(), "the changed provider ran");
        assert_eq!(std::fs::read(&provider).unwrap(), sent, "copied again");
    };

    std::fs::write(&provider, &evil).unwrap();
    again(&fleet, "d0/etc_hosts.prov differs from the file sent");

    // A file more (a module a provider would import first).
    std::fs::write(bundle.join("d0/json.py"), "raise SystemExit(1)\n").unwrap();
    again(&fleet, "does not hold the files copied");
    assert!(!bundle.join("d0/json.py").exists());

    // A file replaced by a link.
    let elsewhere = tempfile::tempdir().unwrap();
    let outside = elsewhere.path().join("etc_hosts.prov");
    std::fs::write(&outside, &evil).unwrap();
    std::fs::remove_file(&provider).unwrap();
    std::os::unix::fs::symlink(&outside, &provider).unwrap();
    again(&fleet, "d0/etc_hosts.prov is a link");

    // The whole directory replaced by a link to an exact copy: never
    // used, and what it points to is left as it is.
    let copy = elsewhere.path().join("copy");
    let status = Command::new("cp")
        .arg("-a")
        .arg(&bundle)
        .arg(&copy)
        .status()
        .unwrap();
    assert!(status.success());
    std::fs::write(copy.join("d0/etc_hosts.prov"), &evil).unwrap();
    std::fs::remove_dir_all(&bundle).unwrap();
    std::os::unix::fs::symlink(&copy, &bundle).unwrap();
    again(&fleet, "is a symbolic link");
    assert!(std::fs::symlink_metadata(&bundle).unwrap().is_dir());
    assert_eq!(
        std::fs::read_to_string(copy.join("d0/etc_hosts.prov")).unwrap(),
        evil,
        "the link's target is untouched"
    );
    assert!(outside.exists());

    // Left alone, the copy is used as it is: nothing copied. The run
    // before recorded the copy it found intact, and this one took that
    // record as it is, without checking every file again (a check would
    // have written a new one).
    use std::os::unix::fs::MetadataExt;
    let record = bundle.join(".checked");
    let recorded = std::fs::metadata(&record).expect("a record of the intact copy");
    let run = fleet.ralsh(&["-l", "info", "host", "localhost"]);
    run.expect(0);
    assert!(!run.stderr.contains("copied"), "{}", run.stderr);
    assert_eq!(std::fs::metadata(&record).unwrap().ino(), recorded.ino());

    // A change that keeps the file's size and modification time is seen
    // all the same: its change time moved, which nobody sets back.
    let mut changed = sent.clone();
    let last = changed.len() - 2;
    changed[last] ^= 1;
    let modified = std::fs::metadata(&provider).unwrap().modified().unwrap();
    std::fs::write(&provider, &changed).unwrap();
    std::fs::File::options()
        .write(true)
        .open(&provider)
        .unwrap()
        .set_modified(modified)
        .unwrap();
    again(&fleet, "d0/etc_hosts.prov differs from the file sent");
}

fn a_copied_file_named_like_pythons_cache_is_checked_as_any_other() {
    let fleet = Fleet::new(&["t1"], false);
    // A provider of its own directory, which travels with a helper file.
    let extra = tempfile::tempdir().unwrap();
    let providers = extra.path().join("providers");
    std::fs::create_dir(&providers).unwrap();
    for name in ["envdump.prov", "envdump.yaml"] {
        let from = fixtures_dir().join("providers").join(name);
        std::fs::copy(from, providers.join(name)).unwrap();
    }
    std::fs::write(providers.join("__pycache__notes.sh"), "echo sent\n").unwrap();
    let dir = extra.path().to_str().unwrap();
    let args = ["-I", dir, "-l", "info", "envdump"];
    fleet.ralsh(&args).expect(0).stderr_has("t1: copied ");
    let bundle = fleet.copy_on_target();
    let copy = (0..4)
        .map(|n| bundle.join(format!("d{n}/__pycache__notes.sh")))
        .find(|path| path.exists())
        .expect("the file travels with its directory");
    // Changed in place after the copy was recorded intact: not Python's
    // cache, whose name is __pycache__ exactly, so it is checked.
    assert!(bundle.join(".checked").exists());
    std::fs::write(&copy, "echo SENT\n").unwrap();
    fleet
        .ralsh(&args)
        .expect(0)
        .stderr_has("__pycache__notes.sh differs from the file sent")
        .stderr_has("t1: copied ");
    assert_eq!(std::fs::read_to_string(&copy).unwrap(), "echo sent\n");

    // A record of any size is compared only as far as it can match: one
    // of twenty megabytes is just not the copy's, and the run goes on.
    let record = bundle.join(".checked");
    std::fs::write(&record, "d 0 700 1 .\n".repeat(2 << 20)).unwrap();
    fleet.ralsh(&args).expect(0);
    assert!(std::fs::metadata(&record).unwrap().len() < 64 << 10);
}

/// A `sensitive_in: env` provider on a target gets its secret, quotes,
/// newlines and `$(...)` unchanged, in its environment, and no command
/// line on the machine (ralsh's, ssh's, sshd's shell's, the wrapper's,
/// the provider's) ever holds it: the envsecret fixture scans them all.
fn a_sensitive_value_reaches_a_target_on_no_command_line() {
    let fleet = Fleet::new(&["t1"], false);
    // No single quote: quoted on a command line, the value would then
    // differ from itself, and the fixture, which looks for it whole,
    // would not see it there.
    let secret = "s3cr\"et $(id) `id`\nline two\\";
    let mut command = fleet.command();
    command
        .arg("-i")
        .arg(&fleet.inventory)
        .arg("-I")
        .arg(fixtures_dir())
        .args(["--attrs-stdin", "envsecret", "a", "ensure=present"]);
    let input = serde_json::json!({ "password": secret }).to_string();
    let ran = run_with_stdin(&mut command, &input);
    let (stdout, stderr) = (&ran.stdout, &ran.stderr);
    assert_eq!(ran.status, 0, "{stdout}{stderr}");
    assert!(!stdout.contains("s3cr") && !stderr.contains("s3cr"));
    assert_eq!(fleet.read("t1", "password.a"), secret);
    assert_eq!(fleet.read("t1", "seen.a"), "");
}

/// The demo plugin's site, whose lock, unlock and check callbacks append
/// to `order` (a file here, shared by all targets) as they run.
fn site_manifest(fleet: &Fleet, order: &Path, fail_on: &str) -> PathBuf {
    let manifest = fleet.controller.path().join("site.yaml");
    std::fs::write(
        &manifest,
        format!(
            "site:\n  shop: {{dir: /etc, content: hi, order_log: {}, fail_on: '{fail_on}'}}\n",
            order.display()
        ),
    )
    .unwrap();
    manifest
}

fn plugin_lock_tasks_wrap_each_target_and_serial_rolls_out_in_batches() {
    let fleet = Fleet::new(&["a", "b", "c"], false);
    let order = fleet.controller.path().join("order.log");
    let state = fleet.controller.path().join("state");
    for target in ["a", "b", "c"] {
        std::fs::create_dir(fleet.root(target).join("marks")).unwrap();
    }
    let ral = |manifest: &Path, args: &[&str]| {
        let mut command =
            crate::sshd::controller_command(env!("CARGO_BIN_EXE_ral"), fleet.controller.path());
        command
            .arg("apply")
            .arg("--ssh-config")
            .arg(fleet.sshd.ssh_config())
            .arg("-i")
            .arg(&fleet.inventory)
            .arg("--state")
            .arg(&state)
            .arg("-I")
            .arg(fixtures_dir().join("plugins"))
            .args(args)
            .arg(manifest);
        run(&mut command)
    };
    // b's check fails: b is still unlocked, and the rollout stops there.
    let manifest = site_manifest(&fleet, &order, "b");
    let page = fleet.controller.path().join("rollout.html");
    let applied = ral(
        &manifest,
        &["--serial", "1", "--report", page.to_str().unwrap()],
    );
    applied
        .expect(2)
        .stdout_has("Success * callback[lock:demo:")
        .stdout_has("Failed  * callback[/site/shop:shop-check]")
        .stderr_has("c: not run: the rollout stopped after batch 2 (1 of its 1 targets failed; --max-fail-percentage 0)");
    // The page: b failed first, then a, then c, which was not run (not
    // unreachable: no connection to it was tried).
    let html = std::fs::read_to_string(&page).unwrap();
    let rows: Vec<(&str, &str)> = html
        .split("<details class=\"target ")
        .skip(1)
        .map(|row| {
            let class = row.split('"').next().unwrap();
            let name = row.split("<code>").nth(1).unwrap().split("</code>").next();
            (class, name.unwrap())
        })
        .collect();
    assert_eq!(
        rows,
        [("failed", "b"), ("changed", "a"), ("notrun", "c")],
        "{html}"
    );
    assert!(html.contains("3 targets: 1 failed, 0 unreachable, 1 changed, 0 unchanged, 1 not run;"));
    assert!(html.contains("not run: the rollout stopped after batch 2"));
    let log = std::fs::read_to_string(&order).unwrap();
    assert_eq!(
        log, "lock a a\ncheck shop a\nunlock a a\nlock b b\ncheck shop b\nunlock b b\n",
        "each target locked, converged and unlocked before the next; unlocked after a failure"
    );
    // The remote task made its marker on a and b, never on c.
    assert!(fleet.root("a").join("marks/shop").exists());
    assert!(fleet.root("b").join("marks/shop").exists());
    assert!(!fleet.root("c").join("marks/shop").exists());
    assert_eq!(fleet.read("c", "etc/index.html"), "", "c was not run");
    // Allowed to fail: the rollout goes on to c. a is applied already, so
    // it has no task and is not locked; b is retried.
    std::fs::remove_file(&order).unwrap();
    ral(
        &manifest,
        &["--serial", "1", "--max-fail-percentage", "100"],
    )
    .expect(1);
    let log = std::fs::read_to_string(&order).unwrap();
    assert_eq!(
        log,
        "lock b b\ncheck shop b\nunlock b b\nlock c c\ncheck shop c\nunlock c c\n"
    );
    assert_eq!(fleet.read("c", "etc/index.html"), "hi\n");
    assert!(fleet.root("c").join("marks/shop").exists());
    fleet.assert_no_ssh_left();
}

/// Waits (at most `secs`) until `done` holds; whether it did.
fn within(secs: u64, mut done: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    while !done() {
        if std::time::Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    true
}

fn a_run_within_the_persist_time_reuses_the_connection_until_it_is_closed() {
    let fleet = Fleet::new(&["t1", "t2"], false);
    let first = run(fleet.warm("60").args(["-j", "host", "localhost"]));
    first.expect(0);
    assert_eq!(fleet.sshd.accepted(), 2);
    let masters = fleet.masters();
    let names: Vec<&str> = masters.iter().map(|(t, _)| t.as_str()).collect();
    assert_eq!(names.len(), 2, "{masters:?}");
    assert!(
        names.contains(&"t1") && names.contains(&"t2"),
        "{masters:?}"
    );
    let marker = fleet.kept_dir().display().to_string();
    for (_, pid) in &masters {
        assert!(running(*pid), "master {pid}");
    }

    // The next run logs in nowhere: the same masters carry it.
    let second = run(fleet.warm("60").args(["-j", "host", "localhost"]));
    second.expect(0);
    let doc: Json = serde_json::from_str(&second.stdout).unwrap();
    for entry in targets(&doc) {
        assert_eq!(entry["resource"]["ip"], "127.0.0.1", "{entry}");
    }
    assert_eq!(fleet.sshd.accepted(), 2, "no new login");
    let mut again = fleet.masters();
    let mut before = masters.clone();
    again.sort();
    before.sort();
    assert_eq!(again, before, "the same masters");

    // A master that died leaves its socket: the next run replaces it.
    let (_, t2_master) = before.iter().find(|(t, _)| t == "t2").unwrap().clone();
    // SAFETY: kill with plain integers, to a master this test's run left.
    unsafe { libc::kill(t2_master, libc::SIGKILL) };
    assert!(within(10, || !running(t2_master)));
    run(fleet.warm("60").args(["-t", "t2", "host", "localhost"])).expect(0);
    assert_eq!(fleet.sshd.accepted(), 3, "one new login, for t2");
    let replaced = fleet.masters();
    let t2_now = replaced.iter().find(|(t, _)| t == "t2").unwrap().1;
    assert_ne!(t2_now, t2_master);

    // A name that matches nothing closes nothing, and says so.
    let typo = fleet.connections(&["close", "t9"]);
    typo.expect(1)
        .stderr_has("t9: no kept connection has that target or destination");
    assert_eq!(typo.stdout, "");
    assert_eq!(fleet.masters().len(), 2);

    // Closing one target's leaves the other's.
    let closed = fleet.connections(&["close", "t1"]);
    closed.expect(0).stdout_has("closed t1 (t1)");
    let (_, t1_master) = before.iter().find(|(t, _)| t == "t1").unwrap().clone();
    assert_gone(t1_master, &marker);
    let left = fleet.masters();
    assert_eq!(left, vec![("t2".to_owned(), t2_now)]);
    fleet.connections(&["close"]).expect(0);
    assert_gone(t2_now, &marker);
    assert!(fleet.masters().is_empty());
    assert_eq!(fleet.kept_files(), Vec::<String>::new(), "nothing left");

    // --no-persist: nothing stays running, nothing is left in either
    // directory.
    run(fleet.warm("60").args(["--no-persist", "host", "localhost"])).expect(0);
    assert_eq!(fleet.sshd.accepted(), 5);
    assert_eq!(fleet.kept_files(), Vec::<String>::new());
    assert!(processes_naming(&marker).is_empty());
    fleet.assert_no_ssh_left();
}

fn a_kept_socket_that_never_answers_is_replaced_without_a_wait() {
    use std::os::unix::net::UnixListener;
    let fleet = Fleet::new(&["t1"], false);
    run(fleet.warm("60").args(["host", "localhost"])).expect(0);
    let files = fleet.kept_files();
    let key = files
        .iter()
        .find(|name| !name.ends_with(".lock"))
        .unwrap_or_else(|| panic!("{files:?}"))
        .clone();
    fleet.connections(&["close"]).expect(0);
    // At the master's socket, a listener that takes every connection and
    // never says a word.
    let listener = UnixListener::bind(fleet.kept_dir().join(&key)).unwrap();
    listener.set_nonblocking(true).unwrap();
    let (stop, stopped) = std::sync::mpsc::channel::<()>();
    let silent = std::thread::spawn(move || {
        let mut held = Vec::new();
        loop {
            if let Ok((stream, _)) = listener.accept() {
                held.push(stream);
            }
            // The pace of the accept loop, and its end.
            match stopped.recv_timeout(std::time::Duration::from_millis(20)) {
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
                _ => return held.len(),
            }
        }
    });
    let started = std::time::Instant::now();
    let warm = run(fleet.warm("60").args(["-l", "debug", "host", "localhost"]));
    let took = started.elapsed();
    drop(stop);
    let asked = silent.join().unwrap();
    warm.expect(0)
        .stderr_has("t1: no kept master answers on ")
        .stderr_has(" within 2s");
    assert!(asked >= 1, "the run asked the silent socket");
    // A run waits 30 s for a target: well below, the socket was not
    // waited on that long.
    assert!(
        took < std::time::Duration::from_secs(20),
        "the run took {took:?}"
    );
    assert_eq!(fleet.sshd.accepted(), 2, "a new login, for a new master");
    let masters = fleet.masters();
    assert_eq!(masters.len(), 1, "{masters:?}");
    assert!(running(masters[0].1));
}

fn a_kept_connection_ends_after_its_time() {
    let fleet = Fleet::new(&["t1"], false);
    run(fleet.warm("2").args(["host", "localhost"])).expect(0);
    let masters = fleet.masters();
    assert_eq!(masters.len(), 1, "{masters:?}");
    let (_, master) = masters[0];
    let socket = fleet.kept_dir();
    // Idle for 2 s, the master exits and removes its socket.
    assert!(
        within(20, || !running(master)),
        "the master {master} outlived its time"
    );
    assert!(fleet.masters().is_empty());
    assert_eq!(
        fleet.kept_files(),
        Vec::<String>::new(),
        "{}",
        socket.display()
    );
    // The next run logs in again.
    run(fleet.warm("2").args(["host", "localhost"])).expect(0);
    assert_eq!(fleet.sshd.accepted(), 2);
    fleet.connections(&["close"]).expect(0);
}

fn two_runs_at_once_to_one_target_share_one_login() {
    let fleet = Fleet::new(&["t1"], false);
    let spawn = || {
        fleet
            .warm("30")
            .args(["-j", "host", "localhost"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (one, two) = (spawn(), spawn());
    for child in [one, two] {
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        let doc: Json = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(targets(&doc)[0]["resource"]["ip"], "127.0.0.1");
    }
    assert_eq!(fleet.sshd.accepted(), 1, "one master for both");
    assert_eq!(fleet.masters().len(), 1);
    fleet.connections(&["close"]).expect(0);
}

fn a_directory_of_kept_connections_open_to_others_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let fleet = Fleet::new(&["t1"], false);
    let dir = fleet.kept_dir();
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let refused = run(fleet.warm("30").args(["host", "localhost"]));
    refused
        .expect(2)
        .stderr_has(&dir.display().to_string())
        .stderr_has("mode 0755");
    std::fs::remove_dir(&dir).unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    std::fs::set_permissions(elsewhere.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    std::os::unix::fs::symlink(elsewhere.path(), &dir).unwrap();
    run(fleet.warm("30").args(["host", "localhost"]))
        .expect(2)
        .stderr_has("symbolic link");
    fleet.connections(&[]).expect(1).stderr_has("symbolic link");
    assert_eq!(fleet.sshd.accepted(), 0, "nothing connected");
    // --no-persist does not need it.
    run(fleet.warm("30").args(["--no-persist", "host", "localhost"])).expect(0);
}

fn a_killed_run_through_a_kept_connection_leaves_no_provider_on_the_target() {
    let fleet = Fleet::new(&["t1"], false);
    run(fleet
        .warm("60")
        .args(["-I"])
        .arg(fixtures_dir())
        .arg("host"))
    .expect(0);
    let masters = fleet.masters();
    assert_eq!(masters.len(), 1);
    let (_, master) = masters[0];
    let mut command = fleet.warm("60");
    command
        .args(["--timeout", "300", "-I"])
        .arg(fixtures_dir())
        .arg("hang");
    kill_and_check(&fleet, command, Some(master));
    assert_eq!(
        fleet.sshd.accepted(),
        1,
        "the hang ran through the kept master"
    );
    // The master stays for the next run, which reuses it.
    assert!(running(master));
    run(fleet.warm("60").args(["host", "localhost"])).expect(0);
    assert_eq!(fleet.sshd.accepted(), 1);
    assert_eq!(fleet.masters(), masters);
    fleet.connections(&["close"]).expect(0);
    assert_gone(master, &fleet.kept_dir().display().to_string());
}

fn a_kept_master_that_takes_no_more_sessions_is_left_to_the_run_using_it() {
    // Two sessions per connection: a run's own and its call's.
    let fleet = Fleet::with_sshd(
        Sshd::start_configured("", "MaxSessions 2\n"),
        &["t1"],
        false,
    );
    run(fleet.warm("60").args(["host", "localhost"])).expect(0);
    let masters = fleet.masters();
    assert_eq!(masters.len(), 1);
    // A run whose provider hangs holds both of the master's sessions.
    let held = fleet.root("t1").join("held");
    assert!(Command::new("mkfifo")
        .arg(&held)
        .status()
        .unwrap()
        .success());
    let mut busy = fleet
        .warm("60")
        .args(["--timeout", "120", "-I"])
        .arg(fixtures_dir())
        .arg("hang")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut fifo = crate::support::open_fifo(&held, false);
    let mut said = [0u8; 8];
    use std::io::Read;
    fifo.read_exact(&mut said).unwrap();
    assert_eq!(&said, b"started\n");
    // Refused a session, the next run logs in on its own, as ssh does,
    // and leaves the master, and the run on it, as they are.
    let other = run(fleet.warm("60").args(["-l", "debug", "host", "localhost"]));
    other
        .expect(0)
        .stderr_has("t1: the kept connection refused a session");
    assert!(
        !other.stderr.contains("opening a new one"),
        "{}",
        other.stderr
    );
    assert!(
        busy.try_wait().unwrap().is_none(),
        "the busy run still runs"
    );
    assert_eq!(fleet.masters(), masters, "the same master");
    // SAFETY: kill with plain integers, to the run this test started.
    unsafe { libc::kill(busy.id() as i32, libc::SIGINT) };
    busy.wait().unwrap();
    fleet.connections(&["close"]).expect(0);
}

fn two_inventory_entries_of_one_machine_keep_a_master_each() {
    // Both connect to the same destination with the same options: a
    // shared master would carry both targets' sessions at once.
    let fleet = Fleet::new(&["t1"], false);
    let root = fleet.root("t1").display().to_string();
    let inventory = fleet.controller.path().join("same.yaml");
    std::fs::write(
        &inventory,
        format!(
            "all:\n  hosts:\n    a:\n      ansible_host: t1\n      ral_root: {root}\n    \
             b:\n      ansible_host: t1\n      ral_root: {root}\n"
        ),
    )
    .unwrap();
    let mut command = fleet.command();
    command
        .env_remove("RAL_SSH_PERSIST")
        .env("XDG_RUNTIME_DIR", fleet.runtime())
        .arg("-i")
        .arg(&inventory)
        .args(["host", "localhost"]);
    run(&mut command).expect(0);
    let mut names: Vec<String> = fleet.masters().into_iter().map(|(t, _)| t).collect();
    names.sort();
    assert_eq!(names, ["a", "b"]);
    assert_eq!(fleet.sshd.accepted(), 2);
    fleet.connections(&["close"]).expect(0);
}

/// What `ssh -G` resolves (OpenSSH's client, which the sshd need brings):
/// a target's own port and user win over those of its destination.
fn a_targets_port_and_user_win_over_its_destination_as_for_the_connection() {
    use ral::remote::{Destination, Target};
    let mut target = Target::destination("ssh://alice@example.org:2200").unwrap();
    let none = Some(Path::new("/dev/null"));
    let resolved = |target: &Target| {
        let found = Destination::resolve(none, target).unwrap();
        (found.user, found.host, found.port)
    };
    assert_eq!(
        resolved(&target),
        ("alice".into(), "example.org".into(), 2200)
    );
    target.port = Some(2222);
    target.user = Some("bob".to_owned());
    assert_eq!(
        resolved(&target),
        ("bob".into(), "example.org".into(), 2222)
    );
}

/// Issue 39's web-app job: one manifest, an inventory with group and
/// host variables beside it, three targets whose facts differ (one is a
/// RedHat), one `ral apply -i`: three different config files, and the
/// second run changes nothing.
fn the_web_app_job_renders_one_manifest_per_target_in_one_run() {
    let fleet = Fleet::new(&["web1", "web2", "web3"], false);
    let dir = fleet.controller.path();
    for (name, os) in [
        (
            "web1",
            "ID=debian\nVERSION_ID=\"12\"\nVERSION_CODENAME=bookworm\nNAME=\"Debian GNU/Linux\"\n",
        ),
        (
            "web2",
            "ID=debian\nVERSION_ID=\"12\"\nVERSION_CODENAME=bookworm\nNAME=\"Debian GNU/Linux\"\n",
        ),
        (
            "web3",
            "ID=rocky\nID_LIKE=\"rhel centos fedora\"\nVERSION_ID=\"9.3\"\nNAME=\"Rocky Linux\"\n",
        ),
    ] {
        let root = fleet.seeded(name);
        std::fs::write(root.join("etc/os-release"), os).unwrap();
        std::fs::write(root.join("etc/hostname"), format!("{name}\n")).unwrap();
        std::fs::create_dir_all(root.join("etc/app")).unwrap();
    }
    let inventory = format!(
        "all:\n  vars:\n    app_port: 8000\n  children:\n    web:\n      hosts:\n        web1: {{ral_root: {}}}\n        web2: {{ral_root: {}}}\n    canary:\n      hosts:\n        web3: {{ral_root: {}}}\n",
        fleet.root("web1").display(),
        fleet.root("web2").display(),
        fleet.root("web3").display()
    );
    std::fs::write(&fleet.inventory, inventory).unwrap();
    std::fs::create_dir_all(dir.join("group_vars")).unwrap();
    std::fs::create_dir_all(dir.join("host_vars")).unwrap();
    std::fs::create_dir_all(dir.join("files")).unwrap();
    std::fs::write(
        dir.join("group_vars/web.yaml"),
        "app_port: 8080\npeers: {db: 10.0.0.5, cache: 10.0.0.6}\n",
    )
    .unwrap();
    std::fs::write(dir.join("host_vars/web1.yaml"), "app_workers: 8\n").unwrap();
    std::fs::write(
        dir.join("files/app.conf.j2"),
        "# {{ inventory_hostname }} ({{ facts.os.family }} {{ facts.os.release.major }})\n\
         listen {{ app_port }}\nworkers {{ app_workers | default(2) }}\n",
    )
    .unwrap();
    std::fs::write(dir.join("files/app.init"), "#!/bin/sh\nexec /usr/bin/app\n").unwrap();
    let manifest = dir.join("site.yaml");
    std::fs::write(
        &manifest,
        "group:\n  app: {gid: 3100}\n\
         user:\n  app: {uid: 3100, gid: 3100, home: /srv/app, shell: /usr/sbin/nologin}\n\
         file:\n  /etc/app/app.conf:\n    template: files/app.conf.j2\n    mode: '0644'\n\
         \x20 /etc/init.d/app:\n    source: files/app.init\n    mode: '0755'\n\
         \x20 /etc/app/redhat.conf:\n    content: \"selinux {{ selinux | default('enforcing') }}\\n\"\n\
         \x20   when: facts.os.family == 'RedHat'\n\
         host:\n  \"{{ item.key }}\":\n    loop: \"{{ peers | default({}) }}\"\n    ip: \"{{ item.value }}\"\n\
         exec:\n  app-reindex:\n    command: sh -c 'echo reindex >> \"$RALSH_ROOT_DIR/etc/app/reindex.log\"'\n\
         \x20   refreshonly: true\n    subscribe: file[/etc/app/app.conf]\n",
    )
    .unwrap();
    let ral = |subcommand: &str, args: &[&str]| fleet.ral(subcommand, args, &manifest);
    let planned = ral("plan", &["-v"]);
    planned.expect(0);
    assert!(
        planned.stdout.contains("app_port from ") && planned.stdout.contains("group_vars/web.yaml"),
        "{}",
        planned.stdout
    );
    ral("apply", &["--detailed-exitcodes"]).expect(2);
    assert_eq!(
        fleet.read("web1", "etc/app/app.conf"),
        "# web1 (Debian 12)\nlisten 8080\nworkers 8\n"
    );
    assert_eq!(
        fleet.read("web2", "etc/app/app.conf"),
        "# web2 (Debian 12)\nlisten 8080\nworkers 2\n"
    );
    assert_eq!(
        fleet.read("web3", "etc/app/app.conf"),
        "# web3 (RedHat 9)\nlisten 8000\nworkers 2\n"
    );
    assert_eq!(
        fleet.read("web3", "etc/app/redhat.conf"),
        "selinux enforcing\n"
    );
    assert!(!fleet.root("web1").join("etc/app/redhat.conf").exists());
    for name in ["web1", "web2", "web3"] {
        assert_eq!(
            fleet.read(name, "etc/init.d/app"),
            "#!/bin/sh\nexec /usr/bin/app\n"
        );
        assert!(
            fleet.read(name, "etc/passwd").contains("app:x:3100:3100:"),
            "{name}"
        );
        assert!(
            fleet.read(name, "etc/group").contains("app:x:3100:"),
            "{name}"
        );
    }
    assert!(fleet.read("web1", "etc/hosts").contains("10.0.0.5\tdb"));
    assert!(!fleet.read("web3", "etc/hosts").contains("10.0.0.5"));
    // The one-off step ran once on each target, as its config was made.
    for name in ["web1", "web2", "web3"] {
        assert_eq!(
            fleet.read(name, "etc/app/reindex.log"),
            "reindex\n",
            "{name}"
        );
    }
    let again = ral("apply", &["--detailed-exitcodes", "-j"]);
    again.expect(0);
    for name in ["web1", "web2", "web3"] {
        assert_eq!(
            fleet.read(name, "etc/app/reindex.log"),
            "reindex\n",
            "{name}"
        );
    }
    let doc: Json = serde_json::from_str(&again.stdout).unwrap();
    for entry in targets(&doc) {
        assert_eq!(
            entry["plan"]["tasks"].as_array().unwrap().len(),
            0,
            "{entry}"
        );
    }
    // web1's config changes: its step runs again there, and only there.
    std::fs::write(dir.join("host_vars/web1.yaml"), "app_workers: 9\n").unwrap();
    ral("apply", &[]).expect(0);
    assert_eq!(
        fleet.read("web1", "etc/app/reindex.log"),
        "reindex\nreindex\n"
    );
    assert_eq!(fleet.read("web2", "etc/app/reindex.log"), "reindex\n");
    fleet.assert_no_ssh_left();
}

fn another_machine_gets_a_copy_of_the_native_program_for_it_or_the_reason() {
    // uname and getconf first on the sessions' PATH, saying what the
    // files `machine` and `glibc` hold when they are there: a target of
    // another architecture or system, or with an older glibc, as ral sees
    // one.
    let sshd = Sshd::start_with(" PATH=DIR/bin:/usr/bin:/bin");
    let dir = sshd.dir.path().to_owned();
    let bin = dir.join("bin");
    std::fs::create_dir(&bin).unwrap();
    let fake = |name: &str, option: &str, file: &str, real: &str| {
        let script = format!(
            "#!/bin/sh\nif [ \"$1\" = {option} ] && [ -f {dir}/{file} ]; then cat {dir}/{file}; exit 0; fi\nexec {real} \"$@\"\n",
            dir = dir.display()
        );
        std::fs::write(bin.join(name), script).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(bin.join(name), std::fs::Permissions::from_mode(0o755)).unwrap();
    };
    fake("uname", "-sm", "machine", "/usr/bin/uname");
    fake("getconf", "GNU_LIBC_VERSION", "glibc", "/usr/bin/getconf");
    let fleet = Fleet::with_sshd(sshd, &["t1"], false);
    // A script provider's resource there: a crontab entry of root's.
    let root = fleet.root("t1");
    std::fs::write(root.join("etc/passwd"), "root:x:0:0:root:/root:/bin/sh\n").unwrap();
    std::fs::create_dir_all(root.join("var/spool/cron/crontabs")).unwrap();
    std::fs::write(
        root.join("var/spool/cron/crontabs/root"),
        "# Puppet Name: backup\n0 1 * * * /usr/bin/backup\n",
    )
    .unwrap();
    let programs = fleet.controller.path().join("programs");
    std::fs::create_dir(&programs).unwrap();
    // What the sessions say of the machine, from the next one on: a
    // target keeps its answer for the boot, which a real machine's never
    // changes within.
    let kept = fleet.sshd.home().join(".cache/ral.machine");
    let says = |file: &str, text: Option<&str>| {
        match text {
            Some(text) => std::fs::write(dir.join(file), text).unwrap(),
            None => std::fs::remove_file(dir.join(file)).unwrap(),
        }
        let _ = std::fs::remove_file(&kept);
    };
    let ralsh = |args: &[&str]| {
        run(fleet
            .command()
            .env("RAL_TARGET_PROGRAMS", &programs)
            .arg("-i")
            .arg(&fleet.inventory)
            .args(args))
    };

    // A machine ral has no copy for: its native types are refused with
    // the reason, before anything runs there; its script providers work.
    says("machine", Some("Linux toaster9\n"));
    let refused = ralsh(&["host", "localhost"]);
    refused.expect(2);
    for said in [
        "t1: host::etc_hosts: ral's native providers (etc_hosts is one) cannot run there",
        "no copy of their program runs on its machine (toaster9, glibc ",
        "ral-provider is built for x86_64",
        &format!("there is no {}/ral-provider-toaster9", programs.display()),
    ] {
        assert!(refused.stderr.contains(said), "{said}: {}", refused.stderr);
    }
    let cron = ralsh(&["cron", "backup"]);
    cron.expect(0);
    assert!(cron.stdout.contains("/usr/bin/backup"), "{}", cron.stdout);

    // The copy put where RAL_TARGET_PROGRAMS says is sent there and runs.
    let copy = std::fs::read(env!("CARGO_BIN_EXE_ral-provider")).unwrap();
    std::fs::write(programs.join("ral-provider-toaster9"), &copy).unwrap();
    let listed = ralsh(&["host", "localhost"]);
    listed.expect(0);
    assert!(listed.stdout.contains("127.0.0.1"), "{}", listed.stdout);
    let cache = fleet.sshd.home().join(".cache/ral");
    let sent = std::fs::read_dir(&cache)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|copy| {
            copy.join("d0/ral-provider").exists() || copy.join("d1/ral-provider").exists()
        })
        .count();
    assert_eq!(sent, 1, "one copy of the providers holds a program");
    // Another system, whatever its machine: nothing is sent to run.
    says("machine", Some("FreeBSD x86_64\n"));
    let other = ralsh(&["user", "root"]);
    other.expect(2);
    assert!(
        other
            .stderr
            .contains("(FreeBSD x86_64, glibc 2.36): ral-provider runs on Linux only")
            || other.stderr.contains("(FreeBSD x86_64, glibc ")
                && other.stderr.contains("runs on Linux only"),
        "{}",
        other.stderr
    );
    says("machine", None);

    // This machine's architecture with a glibc older than the program
    // needs: refused with both versions, never the loader's error.
    // (An installation with the ordinary ral-provider alone.)
    says("glibc", Some("glibc 2.17\n"));
    let install = crate::sshd::ordinary_install();
    let old = run(crate::sshd::controller_command(
        install.path().join("ralsh"),
        fleet.controller.path(),
    )
    .arg("--ssh-config")
    .arg(fleet.sshd.ssh_config())
    .arg("-i")
    .arg(&fleet.inventory)
    .args(["user", "root"]));
    old.expect(2);
    assert!(
        old.stderr.contains("needs glibc 2.") && old.stderr.contains("and the target has 2.17"),
        "{}",
        old.stderr
    );
    assert!(!old.stderr.contains("not found"), "{}", old.stderr);
    fleet.assert_no_ssh_left();
}
/// The name of the fleet report's target named as markup.
const HOSTILE: &str = "<script>t3</script>";

/// A fleet for `ral apply --report`: t1, t2 and a target named
/// [`HOSTILE`] (each a seeded root), and `down`, unreachable. The
/// manifest's file goes in `/etc/app`, which t2's root lacks: its task
/// fails there; elsewhere the file's content changes (to a value holding
/// `</details>`), as a user with a password and a group are made, and the
/// hosts file's `localhost` is already as declared.
fn report_fleet() -> (Fleet, PathBuf) {
    let fleet = Fleet::new(&["t1", "t2", "t3"], false);
    for name in ["t1", "t2", "t3"] {
        let root = fleet.seeded(name);
        std::fs::write(root.join("etc/hosts"), HOSTS).unwrap();
        if name != "t2" {
            std::fs::create_dir_all(root.join("etc/app")).unwrap();
            std::fs::write(root.join("etc/app/app.conf"), "listen 8080\nworkers 2\n").unwrap();
        }
    }
    let inventory = format!(
        "all:\n  hosts:\n    t1: {{ral_root: {}}}\n    t2: {{ral_root: {}}}\n    \
         \"{HOSTILE}\": {{ral_root: {}, ansible_host: 127.0.0.1}}\n    \
         down: {{ansible_host: 127.0.0.1, ansible_port: {}, ral_root: /nonexistent}}\n",
        fleet.root("t1").display(),
        fleet.root("t2").display(),
        fleet.root("t3").display(),
        free_port()
    );
    std::fs::write(&fleet.inventory, inventory).unwrap();
    let manifest = fleet.controller.path().join("site.yaml");
    std::fs::write(
        &manifest,
        "group:\n  app: {gid: 3100}\n\
         user:\n  app: {uid: 3100, gid: 3100, home: /srv/app, shell: /usr/sbin/nologin, \
         password: '$6$salt$s3cr3tHASH'}\n\
         file:\n  /etc/app/app.conf:\n    content: \"listen 80\\n</details><script>alert(2)</script>\\nworkers 2\\n\"\n\
         host:\n  localhost: {ip: 127.0.0.1}\n",
    )
    .unwrap();
    (fleet, manifest)
}

/// `ral apply --report FILE` over [`report_fleet`]: the page, and its
/// rows as `(class, the rest of the row)`, in the page's order.
fn apply_with_report(fleet: &Fleet, manifest: &Path) -> (PathBuf, String) {
    let page = fleet.controller.path().join("fleet.html");
    let applied = fleet.ral("apply", &["--report", page.to_str().unwrap()], manifest);
    // An unreachable target: an error, exit 2.
    applied.expect(2).stderr_has("ral apply: error: down: ");
    let html = std::fs::read_to_string(&page).expect("the page is written");
    (page, html)
}

fn ral_apply_report_is_one_page_for_all_targets_failed_first() {
    let (fleet, manifest) = report_fleet();
    let (page, html) = apply_with_report(&fleet, &manifest);
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&page).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    assert!(html.contains("<meta name=\"generator\" content=\"ral report\">"));
    assert!(
        html.contains("4 targets: 1 failed, 1 unreachable, 2 changed, 0 unchanged;"),
        "{html}"
    );
    // One row per target: its summary, then its body.
    let rows: Vec<&str> = html
        .split("<details class=\"target ")
        .skip(1)
        .map(|row| row.split("</details>\n").next().unwrap())
        .collect();
    assert_eq!(rows.len(), 4, "{html}");
    let summary = |row: &str| row.split("</summary>").next().unwrap().to_owned();
    let hostile = "&lt;script&gt;t3&lt;/script&gt;";
    let expected = [
        ("failed", "<code>t2</code>", [2, 1, 1]),
        ("unreachable", "<code>down</code>", [0, 0, 0]),
        ("changed", "<code>t1</code>", [3, 0, 1]),
        ("changed", &format!("<code>{hostile}</code>"), [3, 0, 1]),
    ];
    for (row, (class, name, [changes, failures, unchanged])) in rows.iter().zip(&expected) {
        let head = summary(row);
        assert!(row.starts_with(&format!("{class}\"")), "{row}");
        assert!(head.contains(name), "{head}");
        assert!(head.contains(&format!(">{class}</span>")), "{head}");
        let counts = format!(
            "<span class=\"num\">{changes}</span><span class=\"num\">{failures}</span>\
             <span class=\"num\">{unchanged}</span>"
        );
        assert!(head.contains(&counts), "{head}");
    }
    // Each target's tasks, as the one-target page shows them.
    assert!(rows[0].contains("<tr class=\"task failed\""), "{}", rows[0]);
    assert!(rows[0].contains("<code>file[/etc/app/app.conf]</code>"));
    assert!(rows[1].contains("Connection refused"), "{}", rows[1]);
    assert!(!rows[1].contains("<table>"));
    for row in &rows[2..] {
        assert!(
            row.contains("<span class=\"del\">-listen 8080</span>"),
            "{row}"
        );
        assert!(
            row.contains(
                "<span class=\"add\">+&lt;/details&gt;&lt;script&gt;alert(2)&lt;/script&gt;</span>"
            ),
            "{row}"
        );
        assert!(row.contains("<code>user[app]</code>"), "{row}");
    }
    // Markup from names and values stays text, and the password is
    // redacted as on the one-target page.
    assert!(!html.contains("<script"), "{html}");
    assert!(!html.contains("s3cr3t"), "{html}");
    assert!(html.contains("[redacted]"), "{html}");
    // The runs are made: the failed target's other tasks too.
    assert!(fleet
        .read("t1", "etc/app/app.conf")
        .starts_with("listen 80\n"));
    assert!(fleet.read("t2", "etc/passwd").contains("app:x:3100:3100:"));
    fleet.assert_no_ssh_left();
}

fn ral_plan_and_apply_json_over_targets_is_one_document() {
    let (fleet, manifest) = report_fleet();
    for subcommand in ["plan", "apply"] {
        let ran = fleet.ral(subcommand, &["-j"], &manifest);
        ran.expect(2);
        let doc: Json = serde_json::from_str(&ran.stdout)
            .unwrap_or_else(|e| panic!("{subcommand}: not one JSON value ({e}): {}", ran.stdout));
        let all = targets(&doc);
        let names: Vec<&str> = all.iter().map(|t| t["target"].as_str().unwrap()).collect();
        assert_eq!(names, ["t1", "t2", HOSTILE, "down"], "{subcommand}");
        for entry in &all[..3] {
            assert!(entry.get("error").is_none(), "{entry}");
            assert_eq!(
                entry["plan"]["tasks"].as_array().unwrap().len(),
                3,
                "{entry}"
            );
        }
        let message = all[3]["error"]["message"].as_str().unwrap();
        assert!(message.contains("Connection refused"), "{message}");
        assert!(all[3].get("plan").is_none());
    }
    // The apply failed on t2: its report says which task, and why.
    let again = fleet.ral("apply", &["-j"], &manifest);
    let doc: Json = serde_json::from_str(&again.stdout).unwrap();
    let t2 = &targets(&doc)[1];
    assert_eq!(t2["plan"]["state"], "Failed", "{t2}");
    let failed: Vec<&Json> = t2["plan"]["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["state"] == "Failed")
        .collect();
    assert_eq!(failed.len(), 1, "{t2}");
    assert_eq!(failed[0]["resource"], "file[/etc/app/app.conf]");
    assert!(failed[0]["error"]["message"].is_string(), "{t2}");
    fleet.assert_no_ssh_left();
}

/// The fleet page in Chromium: a copy of it with a script of the test's
/// own at its end reads the rendered rows, opens the first and measures
/// it and sees whether its table of tasks shows, before and after (the
/// page itself has no script).
fn chromium_opens_the_failed_target_first_in_the_fleet_report() {
    let (fleet, manifest) = report_fleet();
    let (_, html) = apply_with_report(&fleet, &manifest);
    let probe = r#"<script>
const rows = [...document.querySelectorAll("details.target")];
const first = rows[0];
const table = first.querySelector("table");
const before = {height: first.getBoundingClientRect().height, seen: table.checkVisibility()};
first.querySelector("summary").click();
const after = {height: first.getBoundingClientRect().height, seen: table.checkVisibility()};
document.body.setAttribute("data-probe", JSON.stringify({
  names: rows.map(r => r.querySelector(".name").textContent),
  open: first.open,
  before,
  after,
  tasks: [...first.querySelectorAll("tr.task")].map(r => r.innerText.replace(/\s+/g, " ")),
  others_open: rows.slice(1).filter(r => r.open).length,
}));
</script>
</body>"#;
    assert_eq!(html.matches("</body>").count(), 1);
    let dir = fleet.controller.path();
    let probed = dir.join("probed.html");
    std::fs::write(&probed, html.replace("</body>", probe)).unwrap();
    let dom = crate::html_browser::chromium(dir, &probed, &["--dump-dom"]).stdout;
    let dom = String::from_utf8(dom).unwrap();
    let attr = dom
        .split("data-probe=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap_or_else(|| panic!("the probe ran: {dom}"));
    let attr = attr
        .replace("&quot;", "\"")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&");
    let probe: Json = serde_json::from_str(&attr).unwrap_or_else(|e| panic!("{e}: {attr}"));
    assert_eq!(
        probe["names"],
        serde_json::json!(["t2", "down", "t1", HOSTILE]),
        "{probe}"
    );
    assert_eq!(probe["open"], true, "{probe}");
    assert_eq!(
        probe["before"]["seen"], false,
        "closed, its tasks are hidden: {probe}"
    );
    assert_eq!(probe["after"]["seen"], true, "{probe}");
    let height = |when: &str| probe[when]["height"].as_f64().unwrap();
    // Opened, the row holds its three tasks below its summary line.
    assert!(height("after") > 3.0 * height("before"), "{probe}");
    assert_eq!(probe["others_open"], 0, "{probe}");
    let tasks: Vec<&str> = probe["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert_eq!(tasks.len(), 3, "{probe}");
    assert!(
        tasks
            .iter()
            .any(|t| t.contains("file[/etc/app/app.conf]") && t.contains("Failed")),
        "{probe}"
    );
}

fn two_names_of_one_machine_and_root_take_turns_in_one_apply() {
    // Two inventory names of one machine with one root share a store:
    // their runs take turns (the second finds the first's work done)
    // instead of one failing on the other's lock.
    let fleet = Fleet::new(&["t1"], false);
    let root = fleet.root("t1").display().to_string();
    let mut inventory = String::from("all:\n  hosts:\n");
    for name in ["t1", "t1-alias", "t1-again"] {
        inventory.push_str(&format!("    {name}:\n      ral_root: {root}\n"));
    }
    std::fs::write(&fleet.inventory, inventory).unwrap();
    let manifest = fleet.controller.path().join("site.yaml");
    for ip in ["10.0.0.5", "10.0.0.6"] {
        std::fs::write(&manifest, format!("host:\n  web:\n    ip: {ip}\n")).unwrap();
        let applied = fleet.ral("apply", &["-j", "--forks", "3"], &manifest);
        applied.expect(0);
        assert!(
            !applied.stderr.contains("another ral apply"),
            "{}",
            applied.stderr
        );
        let doc: Json = serde_json::from_str(&applied.stdout).unwrap();
        let made: Vec<usize> = targets(&doc)
            .iter()
            .map(|entry| entry["plan"]["tasks"].as_array().map_or(99, Vec::len))
            .collect();
        // One of the three made the change; the others found it made.
        assert_eq!(made.iter().sum::<usize>(), 1, "{doc}");
        assert!(fleet
            .read("t1", "etc/hosts")
            .contains(&format!("{ip}\tweb")));
    }
    fleet.assert_no_ssh_left();
}
