//! `ral facts` (and `ralsh facts`): this machine's facts against its own
//! files and system calls, a fake root's os and names, and custom facts
//! from a data directory's `facts.d`.

use std::path::Path;
use std::process::Command;

use serde_json::Value as Json;

use crate::support::{run, Run, Sandbox};

/// `ral facts ARGS` with a clean environment (the sandbox's cache) and
/// `vars` added; no --root unless ARGS say.
fn ral_facts(sandbox: &Sandbox, args: &[&str], vars: &[(&str, &Path)]) -> Run {
    let mut command = Command::new(env!("CARGO_BIN_EXE_ral"));
    command
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", sandbox.cache.path())
        .env("XDG_CACHE_HOME", sandbox.cache.path())
        .arg("facts")
        .args(args);
    for (key, value) in vars {
        command.env(key, value);
    }
    run(&mut command)
}

fn json_of(run: &Run) -> Json {
    serde_json::from_str(&run.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}):\n{}\n{}", run.stdout, run.stderr))
}

/// An os-release's value of `key`, unquoted.
fn os_release(key: &str) -> Option<String> {
    let text = std::fs::read_to_string("/etc/os-release")
        .or_else(|_| std::fs::read_to_string("/usr/lib/os-release"))
        .ok()?;
    text.lines().find_map(|line| {
        let value = line.strip_prefix(key)?.strip_prefix('=')?;
        Some(value.trim_matches('"').to_owned())
    })
}

fn command_output(program: &str, args: &[&str]) -> String {
    let output = Command::new(program).args(args).output().unwrap();
    assert!(output.status.success(), "{program} {args:?}");
    String::from_utf8(output.stdout).unwrap().trim().to_owned()
}

/// The interface of the first default route of /proc/net/route, read
/// here without ral's parser.
fn default_route() -> Option<String> {
    let table = std::fs::read_to_string("/proc/net/route").ok()?;
    table.lines().skip(1).find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        (f.len() > 7 && f[1] == "00000000" && f[7] == "00000000").then(|| f[0].to_owned())
    })
}

#[test]
fn this_machines_facts_are_its_own() {
    let sandbox = Sandbox::new();
    let run = ral_facts(&sandbox, &["-j"], &[]);
    run.expect(0);
    let facts = json_of(&run);
    // The kernel and hardware, as uname(1) tells them.
    assert_eq!(facts["kernel"], "Linux");
    assert_eq!(facts["kernelrelease"], command_output("uname", &["-r"]));
    assert_eq!(facts["hardwaremodel"], command_output("uname", &["-m"]));
    assert_eq!(facts["os"]["hardware"], facts["hardwaremodel"]);
    // The host's name, as the kernel has it.
    let kernel_name = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    let short = kernel_name.trim().split('.').next().unwrap();
    assert_eq!(facts["hostname"], short);
    assert_eq!(facts["networking"]["hostname"], short);
    assert_eq!(facts["networking"]["fqdn"], facts["fqdn"]);
    // The distribution, from its os-release.
    if let Some(name) = os_release("NAME") {
        let first = name.split_whitespace().next().unwrap();
        assert!(
            facts["os"]["name"].as_str().unwrap().starts_with(first),
            "{} vs {name}",
            facts["os"]["name"]
        );
    }
    if let Some(codename) = os_release("VERSION_CODENAME") {
        assert_eq!(facts["os"]["distro"]["codename"], codename.as_str());
    }
    if os_release("ID").as_deref() == Some("debian") {
        assert_eq!(facts["os"]["family"], "Debian");
        let version = std::fs::read_to_string("/etc/debian_version").unwrap();
        assert_eq!(facts["os"]["release"]["full"], version.trim());
    }
    // Memory, from /proc/meminfo.
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap();
    let total_kib: u64 = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(facts["memory"]["system"]["total_bytes"], total_kib * 1024);
    // The processors online, as getconf counts them.
    let online: u64 = command_output("getconf", &["_NPROCESSORS_ONLN"])
        .parse()
        .unwrap();
    assert_eq!(facts["processors"]["count"], online);
    // The primary interface is the default route's, and its address the
    // one the kernel sends from on that route.
    if let Some(interface) = default_route() {
        assert_eq!(facts["networking"]["primary"], interface.as_str());
        let socket = std::net::UdpSocket::bind("0.0.0.0:0").unwrap();
        if socket.connect("192.0.2.1:9").is_ok() {
            let source = socket.local_addr().unwrap().ip().to_string();
            let bindings = facts["networking"]["interfaces"][&interface]["bindings"]
                .as_array()
                .unwrap();
            assert!(
                bindings.iter().any(|b| b["address"] == source.as_str()),
                "{source} is not among {bindings:?}"
            );
        }
    }
    assert!(facts["virtual"].is_string());
    assert_eq!(facts["is_virtual"], facts["virtual"] != "physical");
    assert!(facts["uptime_seconds"].as_u64().unwrap() > 0);
    // YAML by default, the same facts.
    let yaml = ral_facts(&sandbox, &[], &[]);
    yaml.expect(0);
    let read: Json = serde_yaml::from_str(&yaml.stdout).unwrap();
    for key in ["os", "kernel", "networking", "processors", "hostname"] {
        assert_eq!(read[key], facts[key], "{key}");
    }
}

#[test]
fn a_fake_root_tells_its_own_os_and_names() {
    let sandbox = Sandbox::new();
    sandbox.write(
        "etc/os-release",
        "NAME=\"Rocky Linux\"\nID=\"rocky\"\nID_LIKE=\"rhel centos fedora\"\nVERSION_ID=\"9.3\"\n",
    );
    sandbox.write("etc/hostname", "db7.lab.example\n");
    let run = run(&mut sandbox.ral_command("facts", &["-j"]));
    run.expect(0);
    let facts = json_of(&run);
    assert_eq!(facts["os"]["name"], "Rocky");
    assert_eq!(facts["os"]["family"], "RedHat");
    assert_eq!(facts["os"]["release"]["major"], "9");
    assert_eq!(facts["hostname"], "db7");
    assert_eq!(facts["domain"], "lab.example");
    assert_eq!(facts["fqdn"], "db7.lab.example");
    assert_eq!(facts["networking"]["fqdn"], "db7.lab.example");
    // The rest is the machine's.
    assert_eq!(facts["kernelrelease"], command_output("uname", &["-r"]));
    assert_eq!(facts["architecture"], command_output("uname", &["-m"]));
}

/// Writes `text` to `dir/facts.d/name` with `mode`.
fn fact_file(dir: &Path, name: &str, text: &str, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join("facts.d").join(name);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, text).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
}

#[test]
fn custom_facts_come_from_each_data_directorys_facts_d() {
    let sandbox = Sandbox::new();
    let first = tempfile::tempdir().unwrap();
    let second = tempfile::tempdir().unwrap();
    fact_file(
        first.path(),
        "role.yaml",
        "role: web\nports: [80, 443]\nkernel: custom\n",
        0o644,
    );
    fact_file(
        first.path(),
        "site.json",
        "{\"site\": {\"dc\": \"fra1\", \"rack\": 7}}",
        0o644,
    );
    fact_file(first.path(), "team.txt", "# who\nteam=ops\n", 0o644);
    fact_file(
        first.path(),
        "probe",
        "#!/bin/sh\necho \"probed=yes\"\necho \"root=$RALSH_ROOT_DIR\"\n",
        0o755,
    );
    fact_file(
        first.path(),
        "yaml_out.sh",
        "#!/bin/sh\nprintf 'service:\\n  name: nginx\\n'\n",
        0o755,
    );
    // Broken files: named with their line, and the others still count.
    fact_file(first.path(), "broken.yaml", "good: 1\ngood: 2\n", 0o644);
    fact_file(
        first.path(),
        "broken.txt",
        "fine=1\nno equals here\n",
        0o644,
    );
    fact_file(
        first.path(),
        "fails",
        "#!/bin/sh\necho oops >&2\nexit 3\n",
        0o755,
    );
    // Not a facts file: not executable, no known extension.
    fact_file(first.path(), "README", "notes=1\n", 0o644);
    // A later data directory loses to an earlier one.
    fact_file(second.path(), "role.txt", "role=db\nzone=b\n", 0o644);
    let data_dirs = std::env::join_paths([first.path(), second.path()]).unwrap();
    let run = ral_facts(
        &sandbox,
        &["-j", "--root", sandbox.root().to_str().unwrap()],
        &[("RALSH_DATA_DIR", Path::new(&data_dirs))],
    );
    run.expect(0);
    let facts = json_of(&run);
    assert_eq!(facts["role"], "web");
    assert_eq!(facts["ports"], serde_json::json!([80, 443]));
    assert_eq!(facts["site"], serde_json::json!({"dc": "fra1", "rack": 7}));
    assert_eq!(facts["team"], "ops");
    assert_eq!(facts["probed"], "yes");
    assert_eq!(facts["root"], sandbox.root().to_str().unwrap());
    assert_eq!(facts["service"]["name"], "nginx");
    assert_eq!(facts["zone"], "b");
    // A custom fact replaces the core one of its name.
    assert_eq!(facts["kernel"], "custom");
    for absent in ["good", "fine", "notes"] {
        assert!(facts.get(absent).is_none(), "{absent}: {facts}");
    }
    let dir = first.path().join("facts.d");
    run.stderr_has(&format!(
        "ral: warn: custom facts: {}: line 2: 'good' is given twice (first on line 1); its facts are skipped",
        dir.join("broken.yaml").display()
    ))
    .stderr_has(&format!(
        "custom facts: {}: line 2: 'no equals here' is not key=value",
        dir.join("broken.txt").display()
    ))
    .stderr_has(&format!(
        "custom facts: {}: custom facts failed: exit status 3",
        dir.join("fails").display()
    ))
    .stderr_has("oops");
    // -I comes before RALSH_DATA_DIR.
    let included = tempfile::tempdir().unwrap();
    fact_file(included.path(), "role.json", "{\"role\": \"cache\"}", 0o644);
    let run = ral_facts(
        &sandbox,
        &["-j", "-I", included.path().to_str().unwrap()],
        &[("RALSH_DATA_DIR", Path::new(&data_dirs))],
    );
    assert_eq!(json_of(run.expect(0))["role"], "cache");
}

#[test]
fn a_custom_facts_program_past_the_time_limit_is_ended_and_named() {
    let sandbox = Sandbox::new();
    let data = tempfile::tempdir().unwrap();
    fact_file(
        data.path(),
        "slow",
        "#!/bin/sh\nsleep 30\necho late=1\n",
        0o755,
    );
    fact_file(data.path(), "quick.txt", "quick=1\n", 0o644);
    let started = std::time::Instant::now();
    let run = ral_facts(
        &sandbox,
        &["-j", "--timeout", "1"],
        &[("RALSH_DATA_DIR", data.path())],
    );
    assert!(started.elapsed().as_secs() < 20, "{:?}", started.elapsed());
    run.expect(0).stderr_has(&format!(
        "custom facts: {}: ",
        data.path().join("facts.d/slow").display()
    ));
    let facts = json_of(&run);
    assert_eq!(facts["quick"], "1");
    assert!(facts.get("late").is_none());
}

#[test]
fn ralsh_shows_the_facts_provider() {
    let sandbox = Sandbox::new();
    sandbox.write("etc/os-release", "NAME=Debian\nID=debian\n");
    let listed = sandbox.ralsh_bundled(&["-j", "facts"]);
    listed.expect(0);
    let document = listed.json();
    let resources = document["resources"].as_array().unwrap();
    assert_eq!(resources.len(), 1);
    assert_eq!(resources[0]["name"], "facts");
    assert_eq!(resources[0]["os"]["name"], "Debian");
    assert_eq!(resources[0]["ral"]["provider"], "facts::facts");
    sandbox
        .ralsh_bundled(&["facts", "facts"])
        .expect(0)
        .stdout_has("facts::facts { 'facts':")
        .stdout_has("kernel           => 'Linux',");
    // Read-only: there is nothing to set.
    sandbox
        .ralsh_bundled(&["facts", "facts", "kernel=BSD"])
        .expect(2);
}

#[test]
fn usage_errors_and_a_missing_root_exit_2() {
    let sandbox = Sandbox::new();
    ral_facts(&sandbox, &["--root", "/nonexistent/ral-facts"], &[])
        .expect(2)
        .stderr_has("ral facts: error: --root /nonexistent/ral-facts");
    ral_facts(&sandbox, &["--limit", "web"], &[]).expect(2);
    ral_facts(&sandbox, &["--help"], &[])
        .expect(0)
        .stdout_has("Exit status: 0 when the facts were gathered")
        .stdout_has("ral facts -t web1,web2");
}
