//! The bundled `service::service` provider end to end through ralsh on a
//! fake root: the init scripts of ROOT/etc/init.d with their rc?.d links,
//! and systemd through a fake `systemctl` first on PATH. The fake scripts
//! and the fake systemctl (tests/fixtures/service) keep their state below
//! the fake root.

use std::os::unix::fs::{symlink, PermissionsExt};

use serde_json::{json, Value as Json};

use crate::pids::{assert_running, pid_in, KillOnDrop};
use crate::support::{assert_same_tree, fixtures_dir, names_in, run, tree_snapshot, Run, Sandbox};

const RAL: &str = "service::service";

fn fixture(name: &str) -> String {
    std::fs::read_to_string(fixtures_dir().join("service").join(name)).unwrap()
}

/// Runs ralsh with tests/fixtures/service, which holds the fake systemctl,
/// first on PATH.
fn ralsh_with_fake_systemctl(sandbox: &Sandbox, args: &[&str]) -> Run {
    let path = format!(
        "{}:{}",
        fixtures_dir().join("service").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    run(sandbox.command().env("PATH", path).args(args))
}

/// The fake root as the provider names it (symbolic links resolved).
fn real_root(sandbox: &Sandbox) -> String {
    sandbox.root().canonicalize().unwrap().display().to_string()
}

/// Writes an executable script below the fake root.
fn install(sandbox: &Sandbox, relative: &str, contents: &str) {
    sandbox.write(relative, contents);
    let path = sandbox.root().join(relative);
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// Makes the link ROOT/etc/rcLEVEL.d/ENTRY -> ../init.d/NAME.
fn link(sandbox: &Sandbox, level: char, entry: &str, name: &str) {
    let dir = sandbox.root().join(format!("etc/rc{level}.d"));
    std::fs::create_dir_all(&dir).unwrap();
    symlink(format!("../init.d/{name}"), dir.join(entry)).unwrap();
}

/// The rc?.d links of `name`, as `rc2.d/S01web -> ../init.d/web`, sorted.
fn links_of(sandbox: &Sandbox, name: &str) -> Vec<String> {
    let mut links = Vec::new();
    for entry in std::fs::read_dir(sandbox.root().join("etc")).unwrap() {
        let dir = entry.unwrap();
        let dir_name = dir.file_name().into_string().unwrap();
        if !(dir_name.starts_with("rc") && dir_name.ends_with(".d")) {
            continue;
        }
        for entry in std::fs::read_dir(dir.path()).unwrap() {
            let entry = entry.unwrap();
            let file = entry.file_name().into_string().unwrap();
            if file.get(3..) == Some(name) {
                let target = std::fs::read_link(entry.path()).unwrap();
                links.push(format!("{dir_name}/{file} -> {}", target.display()));
            }
        }
    }
    links.sort();
    links
}

/// What update-rc.d leaves for a script with Default-Start 2 3 4 5 and
/// Default-Stop 0 1 6: `S` (enabled) or `K` (disabled) in the boot levels.
fn default_links(name: &str, boot: char) -> Vec<String> {
    let mut links: Vec<String> = "0123456"
        .chars()
        .map(|level| {
            let kind = if "2345".contains(level) { boot } else { 'K' };
            format!("rc{level}.d/{kind}01{name} -> ../init.d/{name}")
        })
        .collect();
    links.sort();
    links
}

/// A fake root with init scripts: web runs and is enabled (links as
/// `update-rc.d web defaults` makes them), db is stopped and has no links,
/// legacy has neither an LSB header nor a status action; the other files
/// of etc/init.d are not services.
fn init_sandbox() -> Sandbox {
    let sandbox = Sandbox::new();
    for name in ["web", "db"] {
        install(
            &sandbox,
            &format!("etc/init.d/{name}"),
            &fixture("fake-init"),
        );
    }
    install(&sandbox, "etc/init.d/legacy", &fixture("legacy-init"));
    for not_a_service in ["skeleton", "rcS", "web.dpkg-old", "db~", ".hidden"] {
        install(
            &sandbox,
            &format!("etc/init.d/{not_a_service}"),
            &fixture("fake-init"),
        );
    }
    // A shutdown script: its header starts it in no boot runlevel.
    install(
        &sandbox,
        "etc/init.d/poweroff-now",
        &fixture("fake-init")
            .replace("# Default-Start:     2 3 4 5", "# Default-Start:")
            .replace("# Default-Stop:      0 1 6", "# Default-Stop:      0"),
    );
    sandbox.write("etc/init.d/README", "Scripts for System V init.\n");
    sandbox.write("etc/init.d/notes", "#!/bin/sh\necho not executable\n");
    for level in "2345".chars() {
        link(&sandbox, level, "S01web", "web");
    }
    for level in "016".chars() {
        link(&sandbox, level, "K01web", "web");
    }
    sandbox.write("run/fake/web.running", "");
    sandbox
}

#[test]
fn service_lists_init_scripts_and_finds_them() {
    let sandbox = init_sandbox();
    let doc = sandbox.ralsh_bundled(&["-j", "service"]).expect(0).json();
    let ral = json!({"type": "service", "provider": RAL});
    // legacy has no status action: its running state is unknown (no value).
    assert_eq!(
        doc["resources"],
        json!([
            {"name": "db", "ensure": "stopped", "enable": false, "ral": ral},
            {"name": "legacy", "enable": false, "ral": ral},
            {"name": "web", "ensure": "running", "enable": true, "ral": ral},
        ])
    );
    let run = sandbox.ralsh_bundled(&["service", "web"]);
    assert_eq!(
        run.expect(0).stdout,
        "service::service { 'web':\n  ensure => 'running',\n  enable => true,\n}\n"
    );
    // NAME.service means the script NAME.
    let doc = sandbox
        .ralsh_bundled(&["-j", "service", "web.service"])
        .expect(0)
        .json();
    assert_eq!(doc["resource"]["name"], "web.service");
    assert_eq!(doc["resource"]["ensure"], "running");
    // The listing left out README, skeleton, backups, hidden files, the
    // script that is not executable and the shutdown script.
    for unknown in ["nosuch", "poweroff-now"] {
        sandbox
            .ralsh_bundled(&["service", unknown])
            .expect(1)
            .stderr_has(&format!("no resource named '{unknown}'"));
    }
}

#[test]
fn service_starts_and_stops_through_the_init_script() {
    let sandbox = init_sandbox();
    let doc = sandbox
        .ralsh_bundled(&["-j", "service", "db", "ensure=running"])
        .expect(0)
        .json();
    assert_eq!(
        doc["result"][0]["changes"],
        json!([{"attr": "ensure", "is": "running", "was": "stopped"}])
    );
    assert!(sandbox.root().join("run/fake/db.running").exists());
    sandbox
        .ralsh_bundled(&["service", "db", "ensure=running"])
        .expect(0)
        .stdout_has("no changes needed");
    // absent means stopped (and present running).
    sandbox
        .ralsh_bundled(&["service", "db", "ensure=absent"])
        .expect(0)
        .stdout_has("ensure: 'running' -> 'stopped'");
    assert!(!sandbox.root().join("run/fake/db.running").exists());

    // Several services in one batch: only web needs stopping.
    sandbox
        .ralsh_bundled(&["service", "web", "db", "ensure=stopped"])
        .expect(0)
        .stdout_has("ensure: 'running' -> 'stopped'");
    assert!(!sandbox.root().join("run/fake/web.running").exists());

    // Without a status action the state is unknown: start runs every time
    // and is judged by its exit status alone.
    sandbox
        .ralsh_bundled(&["service", "legacy", "ensure=running"])
        .expect(0)
        .stdout_has("ensure: (none) -> 'running'");
    assert!(sandbox.root().join("run/fake/legacy.running").exists());
}

#[test]
fn service_enables_and_disables_with_the_links_update_rc_d_makes() {
    let sandbox = init_sandbox();
    // No links yet: 'update-rc.d db defaults' makes them from the header.
    let doc = sandbox
        .ralsh_bundled(&["-j", "service", "db", "enable=true", "ensure=running"])
        .expect(0)
        .json();
    assert_eq!(
        doc["result"][0]["changes"],
        json!([
            {"attr": "ensure", "is": "running", "was": "stopped"},
            {"attr": "enable", "is": true, "was": false},
        ])
    );
    assert_eq!(links_of(&sandbox, "db"), default_links("db", 'S'));
    sandbox
        .ralsh_bundled(&["service", "db", "enable=true"])
        .expect(0)
        .stdout_has("no changes needed");

    // 'update-rc.d web disable' turns the S links into K links, and
    // 'update-rc.d web enable' back; the stop links stay as they are.
    sandbox
        .ralsh_bundled(&["service", "web", "enable=false"])
        .expect(0)
        .stdout_has("enable: true -> false");
    assert_eq!(links_of(&sandbox, "web"), default_links("web", 'K'));
    sandbox
        .ralsh_bundled(&["service", "web", "enable=true"])
        .expect(0)
        .stdout_has("enable: false -> true");
    assert_eq!(links_of(&sandbox, "web"), default_links("web", 'S'));

    // The runlevels come from the LSB header; missing rc?.d directories
    // are made (0755), and rcS.d counts as starting at boot.
    let sandbox = Sandbox::new();
    install(
        &sandbox,
        "etc/init.d/clock",
        &fixture("fake-init")
            .replace("# Default-Start:     2 3 4 5", "# Default-Start:     S 3 5")
            .replace("# Default-Stop:      0 1 6", "# Default-Stop:      0 6"),
    );
    sandbox
        .ralsh_bundled(&["service", "clock", "enable=true"])
        .expect(0)
        .stdout_has("enable: false -> true");
    assert_eq!(
        links_of(&sandbox, "clock"),
        [
            "rc0.d/K01clock -> ../init.d/clock",
            "rc3.d/S01clock -> ../init.d/clock",
            "rc5.d/S01clock -> ../init.d/clock",
            "rc6.d/K01clock -> ../init.d/clock",
            "rcS.d/S01clock -> ../init.d/clock",
        ]
    );
    let mode = std::fs::metadata(sandbox.root().join("etc/rcS.d"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o755 & !umask());
}

const LINKS_JOURNAL: &str = "etc/.rc.d.ral-links.ral-journal";

#[test]
fn service_finishes_a_change_of_the_links_a_crash_interrupted() {
    // 'db enable=true' was killed after the first of its seven links: its
    // journal names them all.
    let sandbox = init_sandbox();
    let steps: Vec<Json> = "2345"
        .chars()
        .map(|level| json!(["link", level.to_string(), "S01db"]))
        .chain(
            "016"
                .chars()
                .map(|level| json!(["link", level.to_string(), "K01db"])),
        )
        .collect();
    sandbox.write(
        LINKS_JOURNAL,
        &json!({"name": "db", "steps": steps}).to_string(),
    );
    link(&sandbox, '2', "S01db", "db");

    // Readers see the change finished, and write nothing.
    let doc = sandbox
        .ralsh_bundled(&["-j", "service", "db"])
        .expect(0)
        .json();
    assert_eq!(doc["resource"]["enable"], true);
    assert_eq!(links_of(&sandbox, "db"), ["rc2.d/S01db -> ../init.d/db"]);

    // The next change of any service's links finishes it first.
    sandbox
        .ralsh_bundled(&["-l", "info", "service", "web", "enable=false"])
        .expect(0)
        .stderr_has("finished an interrupted change of the links of 'db'");
    assert_eq!(links_of(&sandbox, "db"), default_links("db", 'S'));
    assert_eq!(links_of(&sandbox, "web"), default_links("web", 'K'));
    assert!(!sandbox.root().join(LINKS_JOURNAL).exists());

    // 'web enable=true' was killed after two of its four renames: readers
    // see it enabled (so running it again changes nothing), and the next
    // change finishes it.
    let renames: Vec<Json> = "2345"
        .chars()
        .map(|level| json!(["rename", level.to_string(), "K01web", "S01web"]))
        .collect();
    sandbox.write(
        LINKS_JOURNAL,
        &json!({"name": "web", "steps": renames}).to_string(),
    );
    for level in ["rc2.d", "rc3.d"] {
        let dir = sandbox.root().join("etc").join(level);
        std::fs::rename(dir.join("K01web"), dir.join("S01web")).unwrap();
    }
    let doc = sandbox
        .ralsh_bundled(&["-j", "service", "web"])
        .expect(0)
        .json();
    assert_eq!(doc["resource"]["enable"], true);
    sandbox
        .ralsh_bundled(&["service", "web", "enable=true"])
        .expect(0)
        .stdout_has("no changes needed");
    sandbox
        .ralsh_bundled(&["service", "db", "enable=false"])
        .expect(0)
        .stdout_has("enable: true -> false");
    assert_eq!(links_of(&sandbox, "web"), default_links("web", 'S'));
    assert_eq!(links_of(&sandbox, "db"), default_links("db", 'K'));
    // A change of several links leaves no journal behind.
    assert!(!sandbox.root().join(LINKS_JOURNAL).exists());
}

#[test]
fn service_finishes_a_journal_whose_rc_directory_is_gone() {
    // 'web enable=false' was killed after its rename in rc2.d; rcS.d, named
    // by a later step, has been removed since.
    let sandbox = init_sandbox();
    sandbox.write(
        LINKS_JOURNAL,
        &json!({"name": "web", "steps": [
            ["rename", "2", "S01web", "K01web"],
            ["rename", "S", "S01web", "K01web"],
        ]})
        .to_string(),
    );
    let dir = sandbox.root().join("etc/rc2.d");
    std::fs::rename(dir.join("S01web"), dir.join("K01web")).unwrap();

    // The step with no directory is skipped, not a crash that wedges every
    // later change.
    sandbox.ralsh_bundled(&["-j", "service", "web"]).expect(0);
    sandbox
        .ralsh_bundled(&["service", "db", "enable=true"])
        .expect(0)
        .stdout_has("enable: false -> true");
    assert_eq!(links_of(&sandbox, "db"), default_links("db", 'S'));
    assert!(!sandbox.root().join(LINKS_JOURNAL).exists());
    assert!(!sandbox.root().join("etc/rcS.d").exists());
}

#[test]
fn service_disable_replaces_a_stop_link_beside_the_start_link() {
    // rc2.d holds both K01web and S01web: disabling renames S01web over
    // K01web, as update-rc.d's mv does.
    let sandbox = init_sandbox();
    link(&sandbox, '2', "K01web", "web");

    // A journal of that change, killed before its first rename: readers
    // see it made.
    let renames: Vec<Json> = "2345"
        .chars()
        .map(|level| json!(["rename", level.to_string(), "S01web", "K01web"]))
        .collect();
    sandbox.write(
        LINKS_JOURNAL,
        &json!({"name": "web", "steps": renames}).to_string(),
    );
    let doc = sandbox
        .ralsh_bundled(&["-j", "service", "web"])
        .expect(0)
        .json();
    assert_eq!(doc["resource"]["enable"], false);
    sandbox
        .ralsh_bundled(&["service", "db", "enable=true"])
        .expect(0);
    assert_eq!(links_of(&sandbox, "web"), default_links("web", 'K'));

    // Without a journal: the change itself.
    sandbox
        .ralsh_bundled(&["service", "web", "enable=true"])
        .expect(0)
        .stdout_has("enable: false -> true");
    assert_eq!(links_of(&sandbox, "web"), default_links("web", 'S'));
    link(&sandbox, '3', "K01web", "web");
    sandbox
        .ralsh_bundled(&["service", "web", "enable=false"])
        .expect(0)
        .stdout_has("enable: true -> false");
    assert_eq!(links_of(&sandbox, "web"), default_links("web", 'K'));
    assert!(!sandbox.root().join(LINKS_JOURNAL).exists());
}

#[test]
fn service_undoes_a_change_of_the_links_that_fails_and_keeps_no_journal() {
    // A directory where 'web enable=false' renames rc4.d/S01web to: the
    // third of its four renames fails.
    let sandbox = init_sandbox();
    let in_the_way = sandbox.root().join("etc/rc4.d/K01web");
    std::fs::create_dir(&in_the_way).unwrap();
    sandbox
        .ralsh_bundled(&["service", "web", "enable=false"])
        .expect(2)
        .stderr_has("cannot change the links of 'web'");
    // The renames made before it are undone, and no journal stays for
    // readers to see the change made or for the next change to fail on.
    assert!(!sandbox.root().join(LINKS_JOURNAL).exists());
    let doc = sandbox
        .ralsh_bundled(&["-j", "service", "web"])
        .expect(0)
        .json();
    assert_eq!(doc["resource"]["enable"], true);
    std::fs::remove_dir(&in_the_way).unwrap();
    assert_eq!(links_of(&sandbox, "web"), default_links("web", 'S'));
    sandbox
        .ralsh_bundled(&["service", "db", "enable=true"])
        .expect(0)
        .stdout_has("enable: false -> true");
    assert_eq!(links_of(&sandbox, "db"), default_links("db", 'S'));
}

#[test]
fn service_ignores_a_journal_whose_level_is_not_one_level() {
    // "" and "2345" are in "0123456S" as substrings, but name no rc?.d: a
    // journal naming them is not one ral wrote.
    for level in ["", "2345", "S0"] {
        let sandbox = init_sandbox();
        sandbox.write(
            LINKS_JOURNAL,
            &json!({"name": "db", "steps": [
                ["link", "2", "S01db"],
                ["link", level, "S01db"],
            ]})
            .to_string(),
        );
        let doc = sandbox
            .ralsh_bundled(&["-j", "service", "db"])
            .expect(0)
            .json();
        assert_eq!(doc["resource"]["enable"], false, "level {level:?}");
        sandbox
            .ralsh_bundled(&["service", "web", "enable=false"])
            .expect(0)
            .stderr_has("ignoring the unreadable journal");
        assert!(links_of(&sandbox, "db").is_empty(), "level {level:?}");
        assert!(!sandbox.root().join(format!("etc/rc{level}.d")).exists());
        assert!(!sandbox.root().join(LINKS_JOURNAL).exists());
    }
}

#[test]
fn service_ignores_a_journal_too_deep_or_too_large_to_parse() {
    // Nested too deeply for Python's parser, and a journal of valid steps
    // padded past the 1 MiB cap: neither is one ral wrote.
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    let large = format!(
        "{}{}",
        json!({"name": "db", "steps": [["link", "2", "S01db"], ["link", "3", "S01db"]]}),
        " ".repeat(1 << 20)
    );
    let clean = init_sandbox()
        .ralsh_bundled(&["-j", "service"])
        .expect(0)
        .json();
    for journal in [deep, large] {
        let sandbox = init_sandbox();
        sandbox.write(LINKS_JOURNAL, &journal);
        let doc = sandbox.ralsh_bundled(&["-j", "service"]).expect(0).json();
        assert_eq!(doc["resources"], clean["resources"]);
        sandbox
            .ralsh_bundled(&["service", "web", "enable=false"])
            .expect(0)
            .stderr_has("ignoring the unreadable journal");
        assert!(links_of(&sandbox, "db").is_empty());
        assert!(!sandbox.root().join(LINKS_JOURNAL).exists());
    }
}

/// The process's umask (read without changing it, from /proc).
fn umask() -> u32 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|line| line.strip_prefix("Umask:"))
                .and_then(|value| u32::from_str_radix(value.trim(), 8).ok())
        })
        .unwrap_or(0o022)
}

#[test]
fn service_noop_reports_changes_and_leaves_the_root_alone() {
    let sandbox = init_sandbox();
    let before = tree_snapshot(sandbox.root());
    let doc = sandbox
        .ralsh_bundled(&[
            "-n",
            "-j",
            "service",
            "web",
            "ensure=stopped",
            "enable=false",
        ])
        .expect(0)
        .json();
    assert_eq!(doc["noop"], true);
    assert_eq!(
        doc["result"][0]["changes"],
        json!([
            {"attr": "ensure", "is": "stopped", "was": "running"},
            {"attr": "enable", "is": false, "was": true},
        ])
    );
    sandbox
        .ralsh_bundled(&["-n", "service", "db", "ensure=running", "enable=true"])
        .expect(0)
        .stdout_has("ensure: 'stopped' -> 'running' (noop: would change)")
        .stdout_has("enable: false -> true (noop: would change)");
    // A change that would fail fails under noop too.
    sandbox
        .ralsh_bundled(&["-n", "service", "legacy", "enable=true"])
        .expect(2)
        .stderr_has("has no Default-Start runlevels");
    assert_same_tree(&before, sandbox.root(), "noop");
}

#[test]
fn service_reports_failures_unknown_services_and_bad_values() {
    let sandbox = init_sandbox();
    let root = real_root(&sandbox);
    sandbox.write(
        "run/fake/db.fail",
        "db: cannot bind to port 8080: Address already in use\n",
    );
    // A failing start fails that service only; the other one still starts.
    sandbox.write("run/fake/legacy.running", "");
    let run = sandbox.ralsh_bundled(&["-j", "service", "db", "legacy", "ensure=running"]);
    run.expect(2).stderr_has(&format!(
        "'db': ensure: {root}/etc/init.d/db start failed (exit status 1):\n\
         db: cannot bind to port 8080: Address already in use"
    ));
    let doc = run.json();
    assert_eq!(doc["result"][0]["name"], "db");
    assert_eq!(
        doc["result"][1]["changes"],
        json!([{"attr": "ensure", "is": "running", "was": null}])
    );
    assert!(!sandbox.root().join("run/fake/db.running").exists());

    // A start that exits 0 without starting anything is caught by status.
    std::fs::remove_file(sandbox.root().join("run/fake/db.fail")).unwrap();
    sandbox.write("run/fake/db.lazy", "");
    sandbox
        .ralsh_bundled(&["service", "db", "ensure=running"])
        .expect(2)
        .stderr_has(&format!(
            "'db': ensure: {root}/etc/init.d/db start succeeded, but \
             '{root}/etc/init.d/db status' then says it is stopped"
        ));

    sandbox
        .ralsh_bundled(&["service", "nosuch", "ensure=running"])
        .expect(2)
        .stderr_has(&format!(
            "'nosuch': no such service: '{root}/etc/init.d/nosuch' does not exist (unknown)"
        ));
    sandbox
        .ralsh_bundled(&["service", "notes", "ensure=running"])
        .expect(2)
        .stderr_has(&format!(
            "'notes': '{root}/etc/init.d/notes' is not executable (unknown)"
        ));
    sandbox
        .ralsh_bundled(&["service", "legacy", "enable=true"])
        .expect(2)
        .stderr_has(&format!(
            "'legacy': enable: cannot enable 'legacy': '{root}/etc/init.d/legacy' has no \
             Default-Start runlevels (no '### BEGIN INIT INFO' header)"
        ));
    sandbox
        .ralsh_bundled(&["service", "web", "ensure=restarted"])
        .expect(2)
        .stderr_has(
            "invalid value 'restarted' for attribute 'ensure' of type \
             enum[running, stopped, present, absent]",
        );
    sandbox
        .ralsh_bundled(&["service", "web", "enable=yes"])
        .expect(2)
        .stderr_has(
            "invalid value 'yes' for attribute 'enable' of type variant[boolean, enum[mask]]",
        );
    assert!(sandbox.root().join("run/fake/web.running").exists());
    assert_eq!(links_of(&sandbox, "web"), default_links("web", 'S'));
}

#[test]
fn service_daemon_left_by_a_script_does_not_hold_up_ralsh() {
    // The script leaves a process behind (a ten-minute sleep) that keeps
    // its stdout and stderr open; they are files, not ralsh's pipes or the
    // provider's, so neither the provider nor ralsh waits for it, and
    // service::service has the starts_daemons feature, so ralsh does not
    // end it: it still runs when ralsh has returned.
    let sandbox = init_sandbox();
    sandbox.write("run/fake/db.daemon", "");
    let run = sandbox.ralsh_bundled(&["service", "db", "ensure=running"]);
    let daemon = pid_in(&sandbox.root().join("run/fake/db.daemon.pid"));
    let _daemon = KillOnDrop::new(&[daemon]);
    run.expect(0).stdout_has("ensure: 'stopped' -> 'running'");
    assert!(
        !run.stderr.contains("kept its output open"),
        "{}",
        run.stderr
    );
    assert_running(daemon, "fake-daemon-db");
}

#[test]
fn service_manager_follows_the_root() {
    // The metadata says suitable: true (ralsh reads suitability from the
    // .yaml, which cannot look at the root), so without a service manager
    // below the root every call fails, saying what is missing.
    let sandbox = Sandbox::new();
    let root = real_root(&sandbox);
    let doc = sandbox.ralsh_bundled(&["-j"]).expect(0).json();
    let provider = doc["providers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == RAL)
        .expect("service::service is listed");
    assert_eq!(provider["suitable"], true);
    sandbox
        .ralsh_bundled(&["service"])
        .expect(2)
        .stderr_has(&format!(
            "no service manager below '{root}': systemd is not running \
         ('{root}/run/systemd/system' is not a directory) and '{root}/etc/init.d' does not exist"
        ));

    // With etc/init.d, the init scripts (none yet).
    std::fs::create_dir_all(sandbox.root().join("etc/init.d")).unwrap();
    let doc = sandbox.ralsh_bundled(&["-j", "service"]).expect(0).json();
    assert_eq!(doc["resources"], json!([]));

    // With run/systemd/system, systemd wins (sd_booted's test), and only
    // systemctl is asked.
    std::fs::create_dir_all(sandbox.root().join("run/systemd/system")).unwrap();
    sandbox.write("systemctl.state", "cron.service enabled active\n");
    let doc = ralsh_with_fake_systemctl(&sandbox, &["-j", "service"])
        .expect(0)
        .json();
    assert_eq!(names_in(&doc["resources"]), ["cron"]);
}

/// Whether a call the fake systemctl logged only asks (changes nothing).
fn is_query(call: &str) -> bool {
    let verb = call.split(' ').nth(1).unwrap_or_default();
    [
        "list-unit-files",
        "list-units",
        "is-enabled",
        "is-active",
        "show",
    ]
    .contains(&verb)
}

/// Units for the fake systemctl: UNIT FILE-STATE ACTIVE-STATE.
const UNITS: &str = "ssh.service enabled active
cron.service disabled inactive
dbus.service static active
broken.service disabled failed
getty@.service enabled -
getty@tty1.service disabled active
sshd.service alias -
oldd.service generated active
";

#[test]
fn service_uses_systemctl_with_the_root_when_systemd_runs() {
    let sandbox = Sandbox::new();
    let root = real_root(&sandbox);
    std::fs::create_dir_all(sandbox.root().join("run/systemd/system")).unwrap();
    std::fs::create_dir_all(sandbox.root().join("etc/systemd/system")).unwrap();
    symlink(
        "/lib/systemd/system/ssh.service",
        sandbox.root().join("etc/systemd/system/sshd.service"),
    )
    .unwrap();
    sandbox.write("systemctl.state", UNITS);
    // A unit generated from an init script is enabled by its rc?.d links.
    install(&sandbox, "etc/init.d/oldd", &fixture("fake-init"));
    link(&sandbox, '2', "S01oldd", "oldd");

    // Templates and aliases are not listed; an instance is, and a static
    // unit has no enable value.
    let doc = ralsh_with_fake_systemctl(&sandbox, &["-j", "service"])
        .expect(0)
        .json();
    let ral = json!({"type": "service", "provider": RAL});
    assert_eq!(
        doc["resources"],
        json!([
            {"name": "broken", "ensure": "stopped", "enable": false, "ral": ral},
            {"name": "cron", "ensure": "stopped", "enable": false, "ral": ral},
            {"name": "dbus", "ensure": "running", "ral": ral},
            {"name": "getty@tty1", "ensure": "running", "enable": false, "ral": ral},
            {"name": "oldd", "ensure": "running", "enable": true, "ral": ral},
            {"name": "ssh", "ensure": "running", "enable": true, "ral": ral},
        ])
    );
    // An alias is found as the unit it names.
    let doc = ralsh_with_fake_systemctl(&sandbox, &["-j", "service", "sshd.service"])
        .expect(0)
        .json();
    assert_eq!(
        doc["resource"],
        json!({"name": "sshd.service", "ensure": "running", "enable": true, "ral": ral})
    );

    std::fs::remove_file(sandbox.root().join("systemctl.log")).unwrap();
    let doc = ralsh_with_fake_systemctl(
        &sandbox,
        &["-j", "service", "cron", "ensure=running", "enable=true"],
    )
    .expect(0)
    .json();
    assert_eq!(
        doc["result"][0]["changes"],
        json!([
            {"attr": "ensure", "is": "running", "was": "stopped"},
            {"attr": "enable", "is": true, "was": false},
        ])
    );
    let calls = sandbox.read("systemctl.log");
    for call in calls.lines() {
        assert!(call.starts_with(&format!("--root={root} ")), "{calls}");
    }
    assert!(
        calls.contains(&format!(
            "--root={root} --no-ask-password start cron.service\n\
             --root={root} --no-ask-password enable cron.service\n"
        )),
        "{calls}"
    );
    assert!(sandbox
        .read("systemctl.state")
        .contains("cron.service enabled active\n"));
    // NAME.service is NAME, and present means running.
    ralsh_with_fake_systemctl(&sandbox, &["service", "cron.service", "ensure=present"])
        .expect(0)
        .stdout_has("no changes needed");

    // noop only asks systemctl.
    std::fs::remove_file(sandbox.root().join("systemctl.log")).unwrap();
    ralsh_with_fake_systemctl(&sandbox, &["-n", "service", "ssh", "ensure=stopped"])
        .expect(0)
        .stdout_has("(noop: would change)");
    assert!(
        sandbox.read("systemctl.log").lines().all(is_query),
        "{}",
        sandbox.read("systemctl.log")
    );

    ralsh_with_fake_systemctl(&sandbox, &["service", "dbus", "enable=false"])
        .expect(2)
        .stderr_has(
            "'dbus': enable: 'dbus.service' cannot be disabled: it is static \
             (its unit file has no [Install] section)",
        );
    ralsh_with_fake_systemctl(&sandbox, &["service", "nosuch", "ensure=running"])
        .expect(2)
        .stderr_has("'nosuch': no such service: systemd knows no unit 'nosuch.service' (unknown)");
    ralsh_with_fake_systemctl(&sandbox, &["service", "cron.socket"]).expect(1);

    // The real systemctl refuses to start or stop with --root.
    sandbox.write("systemctl.refuse", "");
    ralsh_with_fake_systemctl(&sandbox, &["service", "cron", "ensure=stopped"])
        .expect(2)
        .stderr_has(&format!(
            "'cron': ensure: {}/systemctl --root={root} --no-ask-password stop cron.service \
             failed (exit status 1); systemctl cannot start, stop or restart units below a fake \
             root ({root}):\nVerb 'stop' cannot be used with --root= or --image=.",
            fixtures_dir().join("service").display()
        ));
}

/// What the fake init script logged of NAME's restarts and reloads.
fn refreshes_of(sandbox: &Sandbox, name: &str) -> Vec<String> {
    std::fs::read_to_string(sandbox.root().join(format!("run/fake/{name}.log")))
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

#[test]
fn service_restarts_once_for_its_changed_files_and_reloads_when_asked() {
    let sandbox = init_sandbox();
    let manifests = tempfile::tempdir().unwrap();
    let write = |a: &str, b: &str, way: &str| {
        let path = manifests.path().join(format!("{a}{b}{way}.yaml"));
        std::fs::write(
            &path,
            format!(
                "file:\n  /etc/web.conf: {{ensure: file, content: \"{a}\\n\", notify: 'Service[web]'}}\n  \
                 /etc/web.extra: {{ensure: file, content: \"{b}\\n\", notify: 'service[web]'}}\n\
                 service:\n  web: {{ensure: running, refresh_with: {way}}}\n  \
                 db: {{ensure: stopped, subscribe: 'file[/etc/web.conf]'}}\n"
            ),
        )
        .unwrap();
        path.to_str().unwrap().to_owned()
    };
    let apply = |manifest: &str| run(&mut sandbox.ral_command("apply", &[manifest]));
    // Both files are made: web, running, restarts once; db, stopped, is
    // left stopped.
    apply(&write("a", "b", "restart"))
        .expect(0)
        .stdout_has("Success ^ service[web]")
        .stdout_has("Success ^ service[db]");
    assert_eq!(refreshes_of(&sandbox, "web"), ["restart"]);
    assert!(sandbox.root().join("run/fake/web.running").exists());
    assert!(refreshes_of(&sandbox, "db").is_empty());
    assert!(!sandbox.root().join("run/fake/db.running").exists());
    // Nothing changed: no task at all, the refresh's parameter aside.
    let same = apply(&write("a", "b", "restart"));
    same.expect(0);
    assert!(!same.stdout.contains("service["), "{}", same.stdout);
    assert_eq!(refreshes_of(&sandbox, "web"), ["restart"]);
    // Both changed, reload asked: one reload (the script has one).
    apply(&write("A", "B", "reload")).expect(0);
    assert_eq!(refreshes_of(&sandbox, "web"), ["restart", "reload"]);
}

#[test]
fn service_refreshes_a_running_unit_with_systemctl_and_leaves_a_stopped_one() {
    let sandbox = Sandbox::new();
    let root = real_root(&sandbox);
    std::fs::create_dir_all(sandbox.root().join("run/systemd/system")).unwrap();
    std::fs::create_dir_all(sandbox.root().join("etc")).unwrap();
    sandbox.write("systemctl.state", UNITS);
    let manifests = tempfile::tempdir().unwrap();
    let manifest = manifests.path().join("m.yaml");
    std::fs::write(
        &manifest,
        "file:\n  /etc/ssh.conf: {ensure: file, content: \"x\\n\"}\nservice:\n  \
         ssh: {subscribe: 'file[/etc/ssh.conf]', refresh_with: reload}\n  \
         cron: {subscribe: 'file[/etc/ssh.conf]'}\n",
    )
    .unwrap();
    let path = format!(
        "{}:{}",
        fixtures_dir().join("service").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let apply = || {
        run(sandbox
            .ral_command("apply", &[manifest.to_str().unwrap()])
            .env("PATH", &path))
    };
    apply().expect(0).stdout_has("Success ^ service[ssh]");
    let calls = sandbox.read("systemctl.log");
    assert!(
        calls.contains(&format!(
            "--root={root} --no-ask-password try-reload-or-restart ssh.service"
        )),
        "{calls}"
    );
    assert!(
        calls
            .lines()
            .filter(|call| call.ends_with(" cron.service"))
            .all(is_query),
        "a stopped unit is left alone: {calls}"
    );
    // Where systemctl refuses (a real one below a fake root), the refresh
    // fails and says why.
    sandbox.write("systemctl.refuse", "");
    std::fs::write(
        &manifest,
        std::fs::read_to_string(&manifest)
            .unwrap()
            .replace("content: \"x\\n\"", "content: \"y\\n\""),
    )
    .unwrap();
    apply()
        .expect(1)
        .stdout_has("systemctl cannot start, stop or restart units below a fake root");
}

/// A stand-in for Debian's /lib/init/init-d-script, written below the fake
/// root: like the real one it takes the script's name first, sources the
/// script for its settings and do_* functions, and dispatches the action,
/// with a status action whether or not the script mentions one.
const INIT_D_SCRIPT_LIBRARY: &str = r#"#!/bin/sh
__init_d_script_name="$1"
shift
do_start() { :; }
do_stop() { :; }
do_status() { return 3; }
. "$__init_d_script_name"
case "$1" in
  start) do_start ;;
  stop) do_stop ;;
  status) do_status ;;
  *) echo "Usage: $__init_d_script_name {start|stop|status|restart}" >&2; exit 3 ;;
esac
exit $?
"#;

/// A script shaped as Debian's /etc/init.d/procps: it re-runs itself
/// through the library and defines do_status, but never says the word
/// status on its own; its start and stop do nothing, and it is "running"
/// (do_status returns 0) whenever asked.
fn procps_shaped(name: &str) -> String {
    format!(
        r#"#! /bin/sh
root=$(cd "${{0%/*}}/../.." && pwd -P) || exit 4
if [ true != "$INIT_D_SCRIPT_SOURCED" ] ; then
    set "$0" "$@"; INIT_D_SCRIPT_SOURCED=true . "$root/lib/init/init-d-script"
fi
### BEGIN INIT INFO
# Provides:          {name}
# Required-Start:    mountkernfs $local_fs
# Required-Stop:
# Default-Start:     S
# Default-Stop:
# Short-Description: Configure kernel parameters at boottime
### END INIT INFO

DESC="Setting kernel variables"
DAEMON=/sbin/sysctl
PIDFILE=none

do_start_cmd() {{ return 0; }}
do_reload() {{ call do_start_cmd; }}
do_stop() {{ return 0; }}
do_status() {{ return 0; }}
"#
    )
}

#[test]
fn service_runs_the_status_of_a_script_written_for_init_d_script() {
    // procps runs through init-d-script, whose status calls its do_status:
    // it has a status action though its text never names one, and it runs.
    // It starts from rcS.d only: listed, and not enabled.
    let sandbox = Sandbox::new();
    install(&sandbox, "lib/init/init-d-script", INIT_D_SCRIPT_LIBRARY);
    install(&sandbox, "etc/init.d/procps", &procps_shaped("procps"));
    link(&sandbox, 'S', "S01procps", "procps");
    // One that leaves status to the library's do_status, which says
    // stopped here.
    install(
        &sandbox,
        "etc/init.d/quiet",
        &procps_shaped("quiet").replace("do_status() { return 0; }\n", ""),
    );
    let ral = json!({"type": "service", "provider": RAL});
    let doc = sandbox.ralsh_bundled(&["-j", "service"]).expect(0).json();
    assert_eq!(
        doc["resources"],
        json!([
            {"name": "procps", "ensure": "running", "enable": false, "ral": ral},
            {"name": "quiet", "ensure": "stopped", "enable": false, "ral": ral},
        ])
    );
}

#[test]
fn service_reads_status_exit_codes_as_lsb_defines_them() {
    // 0 running; 1 (dead, pid file left), 2 (dead, lock file left) and 3
    // stopped; 4 (unknown) and anything above: no value.
    let sandbox = Sandbox::new();
    let script = "#!/bin/sh\n\
                  # A script whose status exits with the code its name ends in.\n\
                  case \"$1\" in\n  status) exit \"${0##*-}\" ;;\n  *) exit 0 ;;\nesac\n";
    for code in 0..=5 {
        install(&sandbox, &format!("etc/init.d/code-{code}"), script);
    }
    let doc = sandbox.ralsh_bundled(&["-j", "service"]).expect(0).json();
    let ensures: Vec<(String, Json)> = doc["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["name"].as_str().unwrap().to_owned(), r["ensure"].clone()))
        .collect();
    let expected: Vec<(String, Json)> = [
        json!("running"),
        json!("stopped"),
        json!("stopped"),
        json!("stopped"),
        Json::Null,
        Json::Null,
    ]
    .into_iter()
    .enumerate()
    .map(|(code, ensure)| (format!("code-{code}"), ensure))
    .collect();
    assert_eq!(ensures, expected);
}

#[test]
fn service_counts_start_links_in_runlevels_2_to_5_only() {
    // Started from rcS.d only (as hwclock.sh and x11-common are): listed,
    // not enabled, and enabling is refused before anything changes.
    let sandbox = init_sandbox();
    let boot_only = fixture("fake-init")
        .replace("# Default-Start:     2 3 4 5", "# Default-Start:     S")
        .replace("# Default-Stop:      0 1 6", "# Default-Stop:      0 6");
    install(&sandbox, "etc/init.d/clock", &boot_only);
    link(&sandbox, 'S', "S01clock", "clock");
    for level in "06".chars() {
        link(&sandbox, level, "K01clock", "clock");
    }
    let doc = sandbox
        .ralsh_bundled(&["-j", "service", "clock"])
        .expect(0)
        .json();
    assert_eq!(doc["resource"]["enable"], false);
    let listed = sandbox.ralsh_bundled(&["-j", "service"]).expect(0).json();
    assert!(names_in(&listed["resources"]).contains(&"clock"));
    let before = links_of(&sandbox, "clock");
    sandbox
        .ralsh_bundled(&["service", "clock", "enable=true"])
        .expect(2)
        .stderr_has("cannot enable 'clock': the Default-Start runlevels (S)")
        .stderr_has("name none of 2, 3, 4, 5");
    assert_eq!(links_of(&sandbox, "clock"), before);
    sandbox
        .ralsh_bundled(&["service", "clock", "enable=false"])
        .expect(0)
        .stdout_has("no changes needed");

    // Started from rcS.d and disabled in 2-5: not enabled; enabling turns
    // the K links of 2-5 into S links and the next read says enabled;
    // disabling turns them back, with the one of rcS.d.
    let both = fixture("fake-init").replace(
        "# Default-Start:     2 3 4 5",
        "# Default-Start:     S 2 3 4 5",
    );
    install(&sandbox, "etc/init.d/early", &both);
    link(&sandbox, 'S', "S01early", "early");
    for level in "2345".chars() {
        link(&sandbox, level, "K01early", "early");
    }
    let read = |name: &str| {
        sandbox
            .ralsh_bundled(&["-j", "service", name])
            .expect(0)
            .json()["resource"]["enable"]
            .clone()
    };
    assert_eq!(read("early"), false);
    sandbox
        .ralsh_bundled(&["service", "early", "enable=true"])
        .expect(0)
        .stdout_has("enable: false -> true");
    assert_eq!(read("early"), true);
    assert!(links_of(&sandbox, "early").contains(&"rc2.d/S01early -> ../init.d/early".to_owned()));
    sandbox
        .ralsh_bundled(&["service", "early", "enable=false"])
        .expect(0)
        .stdout_has("enable: true -> false");
    assert_eq!(read("early"), false);
    assert!(links_of(&sandbox, "early")
        .iter()
        .all(|link| link.contains("/K01early")));
}

/// A fake root where systemd runs, with UNITS for the fake systemctl.
fn systemd_sandbox() -> Sandbox {
    let sandbox = Sandbox::new();
    std::fs::create_dir_all(sandbox.root().join("run/systemd/system")).unwrap();
    std::fs::create_dir_all(sandbox.root().join("etc/systemd/system")).unwrap();
    sandbox.write("systemctl.state", UNITS);
    sandbox
}

/// The fake systemctl's log of calls that change something, without the
/// root: `--no-ask-password VERB UNIT`.
fn changes_logged(sandbox: &Sandbox) -> Vec<String> {
    let log = std::fs::read_to_string(sandbox.root().join("systemctl.log")).unwrap_or_default();
    std::fs::remove_file(sandbox.root().join("systemctl.log")).ok();
    log.lines()
        .filter(|call| !is_query(call))
        .map(|call| call.split_once(' ').unwrap().1.to_owned())
        .collect()
}

#[test]
fn service_masks_and_unmasks_systemd_units_as_puppet_does() {
    let sandbox = systemd_sandbox();
    let enable = |name: &str| {
        ralsh_with_fake_systemctl(&sandbox, &["-j", "service", name])
            .expect(0)
            .json()["resource"]["enable"]
            .clone()
    };
    // Masking an enabled unit disables it first; the next read says mask.
    ralsh_with_fake_systemctl(&sandbox, &["service", "ssh", "enable=mask"])
        .expect(0)
        .stdout_has("enable: true -> 'mask'");
    assert_eq!(
        changes_logged(&sandbox),
        [
            "--no-ask-password disable ssh.service",
            "--no-ask-password mask ssh.service"
        ]
    );
    assert_eq!(enable("ssh"), "mask");
    ralsh_with_fake_systemctl(&sandbox, &["service", "ssh", "enable=mask"])
        .expect(0)
        .stdout_has("no changes needed");
    // true unmasks first, then enables.
    changes_logged(&sandbox);
    ralsh_with_fake_systemctl(&sandbox, &["service", "ssh", "enable=true"])
        .expect(0)
        .stdout_has("enable: 'mask' -> true");
    assert_eq!(
        changes_logged(&sandbox),
        [
            "--no-ask-password unmask ssh.service",
            "--no-ask-password enable ssh.service"
        ]
    );
    assert_eq!(enable("ssh"), true);
    // A static unit cannot be enabled, but can be masked; false unmasks.
    ralsh_with_fake_systemctl(&sandbox, &["service", "dbus", "enable=mask"])
        .expect(0)
        .stdout_has("enable: (none) -> 'mask'");
    ralsh_with_fake_systemctl(&sandbox, &["service", "dbus", "enable=false"])
        .expect(0)
        .stdout_has("enable: 'mask' -> false");
    assert_eq!(enable("dbus"), false);

    // A step that fails undoes the steps before it: the unit stays masked.
    ralsh_with_fake_systemctl(&sandbox, &["service", "cron", "enable=mask"]).expect(0);
    changes_logged(&sandbox);
    sandbox.write("systemctl.fail-enable", "");
    ralsh_with_fake_systemctl(&sandbox, &["service", "cron", "enable=true"])
        .expect(2)
        .stderr_has("'cron': enable: ")
        .stderr_has("--no-ask-password enable cron.service failed (exit status 1)");
    assert_eq!(
        changes_logged(&sandbox),
        [
            "--no-ask-password unmask cron.service",
            "--no-ask-password enable cron.service",
            "--no-ask-password mask cron.service",
        ]
    );
    assert_eq!(enable("cron"), "mask");

    // Init scripts have no mask: refused before anything changes.
    let init = init_sandbox();
    let before = tree_snapshot(init.root());
    init.ralsh_bundled(&["service", "db", "ensure=running", "enable=mask"])
        .expect(2)
        .stderr_has("'db': enable: 'db' cannot be masked");
    assert_same_tree(&before, init.root(), "mask of an init script");
}

#[test]
fn service_reloads_systemd_before_starting_a_unit_whose_file_changed() {
    // cron's unit file is changed by a file resource of the same run: the
    // start that follows comes after a daemon-reload.
    let sandbox = systemd_sandbox();
    sandbox.write(
        "etc/systemd/system/cron.service",
        "[Service]\nExecStart=/bin/cron\n",
    );
    sandbox.write(
        "systemctl.loaded/cron.service",
        "[Service]\nExecStart=/bin/cron\n",
    );
    let manifests = tempfile::tempdir().unwrap();
    let manifest = manifests.path().join("m.yaml");
    std::fs::write(
        &manifest,
        "file:\n  /etc/systemd/system/cron.service:\n    ensure: file\n    \
         content: \"[Service]\\nExecStart=/bin/cron -f\\n\"\n    before: 'service[cron]'\n\
         service:\n  cron: {ensure: running}\n",
    )
    .unwrap();
    let path = format!(
        "{}:{}",
        fixtures_dir().join("service").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    run(sandbox
        .ral_command("apply", &[manifest.to_str().unwrap()])
        .env("PATH", &path))
    .expect(0);
    assert_eq!(
        changes_logged(&sandbox),
        [
            "--no-ask-password daemon-reload",
            "--no-ask-password start cron.service"
        ]
    );
    // Unchanged since: a restart for a refresh needs no reload.
    sandbox.write(
        "systemctl.state",
        &UNITS.replace(
            "cron.service disabled inactive",
            "cron.service disabled active",
        ),
    );
    let doc = ralsh_with_fake_systemctl(&sandbox, &["-j", "service", "cron"])
        .expect(0)
        .json();
    assert_eq!(doc["resource"]["ensure"], "running");
    changes_logged(&sandbox);
    sandbox.write(
        "etc/systemd/system/cron.service",
        "[Service]\nExecStart=/bin/cron -n\n",
    );
    std::fs::write(
        &manifest,
        "file:\n  /etc/cron.conf: {ensure: file, content: \"x\\n\", notify: 'service[cron]'}\n\
         service:\n  cron: {ensure: running}\n",
    )
    .unwrap();
    run(sandbox
        .ral_command("apply", &[manifest.to_str().unwrap()])
        .env("PATH", &path))
    .expect(0);
    assert_eq!(
        changes_logged(&sandbox),
        [
            "--no-ask-password daemon-reload",
            "--no-ask-password try-restart cron.service"
        ]
    );
    // Nothing changed: no reload before a start.
    ralsh_with_fake_systemctl(&sandbox, &["service", "ssh", "ensure=stopped"]).expect(0);
    ralsh_with_fake_systemctl(&sandbox, &["service", "ssh", "ensure=running"]).expect(0);
    assert_eq!(
        changes_logged(&sandbox),
        [
            "--no-ask-password stop ssh.service",
            "--no-ask-password start ssh.service"
        ]
    );
}
