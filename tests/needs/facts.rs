//! `ral facts` against Facter on this machine, and `ral facts -t`/`-i`
//! over a real sshd: each target's facts gathered there, below its own
//! root, with the custom facts' programs run there too.

use std::path::Path;
use std::process::Command;

use serde_json::Value as Json;

use crate::host::Test;
use crate::sshd::{free_port, Sshd};
use crate::support::{run, Run};
use crate::tests;

/// This module's tests and what each needs.
pub fn tests() -> Vec<Test> {
    [
        tests![[Facter] ral_facts_agree_with_facter],
        tests![[Sshd] each_targets_facts_are_gathered_there_below_its_root],
    ]
    .concat()
}

fn json_of(run: &Run) -> Json {
    serde_json::from_str(&run.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}):\n{}\n{}", run.stdout, run.stderr))
}

/// The facts Facter and ral both tell, compared; memory within 1%, and
/// `virtual` where Facter can tell it (it cannot read /proc/1/environ in
/// some sandboxes) unless ral found a container by a file Facter does not
/// look at (`/.dockerenv`, `/run/.containerenv`).
fn ral_facts_agree_with_facter() {
    let home = tempfile::tempdir().unwrap();
    let same_environment = |command: &mut Command| {
        command
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", home.path());
    };
    let mut facter = Command::new("facter");
    same_environment(&mut facter);
    facter.args([
        "-j",
        "os",
        "kernelrelease",
        "architecture",
        "hardwaremodel",
        "hostname",
        "processors",
        "memory",
        "virtual",
        "timezone",
        "networking",
    ]);
    let said = run(&mut facter);
    let theirs = json_of(&said);
    let mut ral = Command::new(env!("CARGO_BIN_EXE_ral"));
    same_environment(&mut ral);
    ral.args(["facts", "-j"]);
    let ours = ral_json(&mut ral);
    let at = |facts: &Json, path: &str| {
        path.split('.').fold(facts.clone(), |value, key| {
            value.get(key).cloned().unwrap_or(Json::Null)
        })
    };
    for path in [
        "os.name",
        "os.family",
        "os.release.major",
        "os.distro.codename",
        "kernelrelease",
        "architecture",
        "hardwaremodel",
        "hostname",
        "processors.count",
        "timezone",
        "networking.primary",
        "networking.ip",
    ] {
        let expected = at(&theirs, path);
        assert!(!expected.is_null(), "facter tells no {path}: {theirs}");
        assert_eq!(at(&ours, path), expected, "{path}");
    }
    let total = |facts: &Json| at(facts, "memory.system.total_bytes").as_f64().unwrap();
    let (mine, facters) = (total(&ours), total(&theirs));
    assert!(
        (mine - facters).abs() <= facters / 100.0,
        "memory.system.total_bytes: {mine} vs facter's {facters}"
    );
    let guessed = at(&ours, "virtual");
    match at(&theirs, "virtual") {
        Json::Null => assert!(guessed.is_string()),
        _ if ["docker", "podman"].contains(&guessed.as_str().unwrap_or_default())
            && (Path::new("/.dockerenv").exists() || Path::new("/run/.containerenv").exists()) => {}
        expected => assert_eq!(guessed, expected, "virtual"),
    }
}

/// Runs `ral facts -j` and reads its document.
fn ral_json(command: &mut Command) -> Json {
    let ran = run(command);
    ran.expect(0);
    json_of(&ran)
}

/// Writes `text` to `path` with `mode`, making its directory.
fn write(path: &Path, text: &str, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn each_targets_facts_are_gathered_there_below_its_root() {
    let sshd = Sshd::start();
    let controller = tempfile::tempdir().unwrap();
    std::fs::create_dir(controller.path().join("tmp")).unwrap();
    let roots: Vec<(&str, tempfile::TempDir, &str)> =
        [("t1", "Debian GNU/Linux"), ("t2", "Alpine Linux")]
            .into_iter()
            .map(|(name, os)| (name, tempfile::tempdir().unwrap(), os))
            .collect();
    let mut inventory = String::from("all:\n  hosts:\n");
    for (name, root, os) in &roots {
        write(
            &root.path().join("etc/os-release"),
            &format!(
                "NAME=\"{os}\"\nID={}\n",
                os.split(' ').next().unwrap().to_lowercase()
            ),
            0o644,
        );
        write(
            &root.path().join("etc/hostname"),
            &format!("{name}-host\n"),
            0o644,
        );
        inventory.push_str(&format!(
            "    {name}:\n      ral_root: {}\n",
            root.path().display()
        ));
    }
    inventory.push_str(&format!(
        "    down:\n      ansible_host: 127.0.0.1\n      ansible_port: {}\n",
        free_port()
    ));
    let inventory_file = controller.path().join("inventory.yaml");
    std::fs::write(&inventory_file, inventory).unwrap();
    // Custom facts: a static file, read here, and a program, run there
    // (from the copy in the target's HOME).
    let data = tempfile::tempdir().unwrap();
    write(
        &data.path().join("facts.d/site.yaml"),
        "site: fra1\n",
        0o644,
    );
    write(
        &data.path().join("facts.d/where"),
        "#!/bin/sh\necho \"ran_from=$0\"\necho \"root=$RALSH_ROOT_DIR\"\n",
        0o755,
    );
    write(
        &data.path().join("facts.d/broken"),
        "#!/bin/sh\necho 'not a fact'\nexit 3\n",
        0o755,
    );
    let mut command = crate::sshd::controller_command(env!("CARGO_BIN_EXE_ral"), controller.path());
    command
        .env("RALSH_DATA_DIR", data.path())
        .args(["facts", "-j", "--ssh-config"])
        .arg(sshd.ssh_config())
        .arg("-i")
        .arg(&inventory_file);
    let ran = run(&mut command);
    // The unreachable target fails the run, not the others.
    ran.expect(1).stderr_has("ral facts: error: down: ");
    for name in ["t1", "t2"] {
        ran.stderr_has(&format!(
            "ral: warn: {name}: custom facts: {}: custom facts failed: exit status 3",
            data.path().join("facts.d/broken").display()
        ));
    }
    let document = json_of(&ran);
    assert!(document["errors"]["down"].is_string(), "{document}");
    let targets = document["targets"].as_object().unwrap();
    assert_eq!(targets.keys().collect::<Vec<_>>(), ["t1", "t2"]);
    let home = sshd.home();
    for (name, root, os) in &roots {
        let facts = &targets[*name];
        assert_eq!(facts["os"]["name"], os.split(' ').next().unwrap(), "{name}");
        assert_eq!(facts["hostname"], format!("{name}-host"));
        assert_eq!(facts["kernel"], "Linux");
        assert_eq!(facts["site"], "fra1");
        assert_eq!(facts["root"], root.path().to_str().unwrap());
        let ran_from = facts["ran_from"].as_str().unwrap();
        assert!(
            Path::new(ran_from).starts_with(&home) && ran_from.ends_with("/where"),
            "{name}: the program ran from {ran_from}, not from the copy in {}",
            home.display()
        );
    }
    // YAML: a mapping of the targets' names to their facts.
    let mut yaml = Command::new(env!("CARGO_BIN_EXE_ral"));
    yaml.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", controller.path())
        .env("XDG_CACHE_HOME", controller.path())
        .env("TMPDIR", controller.path().join("tmp"))
        .env("RAL_SSH_PERSIST", "0")
        .args(["facts", "--ssh-config"])
        .arg(sshd.ssh_config())
        .arg("-i")
        .arg(&inventory_file)
        .args(["--limit", "t2"]);
    let ran = run(&mut yaml);
    ran.expect(0);
    let read: Json = serde_yaml::from_str(&ran.stdout).unwrap();
    assert_eq!(read["t2"]["os"]["name"], "Alpine");
    assert_eq!(read.as_object().unwrap().len(), 1);
}
