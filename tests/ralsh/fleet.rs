//! Fleets without sshd: a shell stand-in for `ssh`, first on PATH, runs
//! each target's side here (each target its own HOME), so that `--forks`
//! and a dead target can be checked by what the targets record.
//!
//! The stand-in serves `--no-persist` runs only (a run's own master runs
//! the session's script; the provider calls run their command): kept
//! masters need OpenSSH's multiplexing protocol, which the benchmark's
//! stand-in (`examples/ssh_standin.rs`) speaks.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::{run, Run, Sandbox};

/// The stand-in. Each session's script (one per target and run) appends
/// `start T` and `end T` to `$STANDIN/log` under its lock, the lines'
/// order being the order of events; a session first waits (at most ten
/// seconds, then says `gate-timeout T`) until `$STANDIN_GATE` sessions
/// have started, so that the targets a run may work on at once must
/// overlap. A target whose directory holds `hang` never answers.
const STANDIN: &str = r#"#!/bin/sh
own=
while [ "$#" -gt 0 ] && [ "$1" != -- ]; do
  [ "$1" = -o ] && [ "$2" = ControlMaster=yes ] && own=1
  shift
done
shift
dest=$1
shift
dir=$STANDIN/$dest
[ -d "$dir" ] || { echo "ssh: Could not resolve hostname $dest" >&2; exit 255; }
run() { exec env -i HOME="$dir/home" PATH=/usr/bin:/bin sh -c "$*"; }
[ -n "$own" ] || run "$@"
[ -e "$dir/hang" ] && exec sleep 600
note() { ( flock 9; echo "$1 $dest" >&9 ) 9>>"$STANDIN/log"; }
note start
tries=0
while [ "$(grep -c '^start ' "$STANDIN/log")" -lt "${STANDIN_GATE:-1}" ]; do
  tries=$((tries + 1))
  [ "$tries" -gt 200 ] && { note gate-timeout; break; }
  sleep 0.05
done
( run "$@" )
status=$?
note end
exit "$status"
"#;

/// A fleet of `names` in an inventory, all on `sandbox`'s root, each
/// with its own HOME below the stand-in's directory.
struct Fleet {
    sandbox: Sandbox,
    dir: tempfile::TempDir,
    inventory: PathBuf,
}

impl Fleet {
    fn new(names: &[&str]) -> Fleet {
        let sandbox = Sandbox::new();
        sandbox.write_accounts();
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        write_program(&bin.join("ssh"), STANDIN);
        let mut inventory = String::from("all:\n  hosts:\n");
        for name in names {
            std::fs::create_dir_all(dir.path().join(name).join("home")).unwrap();
            inventory += &format!(
                "    {name}:\n      ral_root: {}\n",
                sandbox.root().display()
            );
        }
        std::fs::write(dir.path().join("log"), "").unwrap();
        let path = dir.path().join("inventory.yaml");
        std::fs::write(&path, inventory).unwrap();
        Fleet {
            sandbox,
            dir,
            inventory: path,
        }
    }

    /// `ralsh --no-persist -i INV ARGS` with the stand-in first on PATH,
    /// sessions waiting until `gate` have started.
    fn ralsh(&self, gate: usize, args: &[&str]) -> Run {
        let path = format!(
            "{}:{}",
            self.dir.path().join("bin").display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let tmp = self.dir.path().join("tmp");
        std::fs::create_dir_all(&tmp).unwrap();
        let mut command = Command::new(crate::support::ralsh_bin());
        command
            .env_clear()
            .env("PATH", path)
            .env("HOME", self.sandbox.cache.path())
            .env("XDG_CACHE_HOME", self.sandbox.cache.path())
            .env("TMPDIR", &tmp)
            .env("STANDIN", self.dir.path())
            .env("STANDIN_GATE", gate.to_string())
            .arg("--no-persist")
            .arg("-i")
            .arg(&self.inventory)
            .args(args);
        run(&mut command)
    }

    /// The stand-in's log, one event a line.
    fn log(&self) -> Vec<String> {
        std::fs::read_to_string(self.dir.path().join("log"))
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect()
    }
}

fn write_program(path: &Path, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// The most sessions running at once, by the log's order.
fn most_at_once(log: &[String]) -> usize {
    let (mut running, mut most) = (0usize, 0usize);
    for line in log {
        if line.starts_with("start ") {
            running += 1;
            most = most.max(running);
        } else if line.starts_with("end ") {
            running = running.saturating_sub(1);
        }
    }
    most
}

#[test]
fn forks_bounds_the_targets_worked_on_at_once() {
    let names = ["t1", "t2", "t3", "t4", "t5", "t6", "t7"];
    let fleet = Fleet::new(&names);
    // The first three wait for each other: three must run together, and
    // no more may.
    let run = fleet.ralsh(3, &["--forks", "3", "user", "root"]);
    run.expect(0);
    for name in names {
        run.stdout_has(&format!("== {name} ==\nuser::etc_passwd {{ 'root':"));
    }
    let log = fleet.log();
    assert!(
        !log.iter().any(|line| line.starts_with("gate-timeout")),
        "three targets were never worked on at once: {log:?}"
    );
    assert_eq!(most_at_once(&log), 3, "{log:?}");
    for name in names {
        let sessions = log
            .iter()
            .filter(|l| **l == format!("start {name}"))
            .count();
        assert_eq!(sessions, 1, "{name}: {log:?}");
    }
}

#[test]
fn a_dead_target_costs_its_own_time_out_and_the_others_finish() {
    let names = ["t1", "dead", "t3", "t4", "t5"];
    let fleet = Fleet::new(&names);
    std::fs::write(fleet.dir.path().join("dead/hang"), "").unwrap();
    let run = fleet.ralsh(
        1,
        &["--forks", "2", "--connect-timeout", "1", "user", "root"],
    );
    assert_ne!(run.status, 0, "{run:?}");
    for name in ["t1", "t3", "t4", "t5"] {
        run.stdout_has(&format!("== {name} ==\nuser::etc_passwd {{ 'root':"));
    }
    // Its time-out is its own, the one --connect-timeout gives (and 20 s
    // for the session's answer), not the default's 30 s.
    run.stdout_has("== dead ==\nerror: dead: no answer within 21s");
    run.stderr_has("error: dead: no answer within 21s");
    // The other worker took every other target while the dead one held
    // its own: all of them ended, each once.
    let log = fleet.log();
    for name in ["t1", "t3", "t4", "t5"] {
        assert!(log.contains(&format!("end {name}")), "{name}: {log:?}");
    }
}
