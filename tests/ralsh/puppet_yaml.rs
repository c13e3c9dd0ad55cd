//! What `puppet resource TYPE --to_yaml` prints reads as a manifest: its
//! `provider` picks the type's provider of that name, or the type's own
//! with one warning per file and Puppet provider (naming the line); its
//! `target` of a host names /etc/hosts or is refused; an attribute ral
//! lacks is refused by name. The texts are what Puppet 7.23 printed on
//! this project's machine, the password shortened.

use crate::support::{accounts_sandbox, run, Run, Sandbox};

/// What `puppet resource user root --to_yaml`, `... host --to_yaml` and
/// `... group root --to_yaml` printed, one document.
const PUPPET: &str = r#"---
user:
  root:
    ensure: present
    comment: root
    gid: 0
    home: "/root"
    password: "*"
    password_max_age: 99999
    password_min_age: 0
    password_warn_days: 7
    provider: useradd
    shell: "/bin/bash"
    uid: 0
host:
  localhost:
    ensure: present
    ip: 127.0.0.1
    provider: parsed
    target: "/etc/hosts"
group:
  root:
    ensure: present
    gid: 0
    provider: groupadd
"#;

fn plan(sandbox: &Sandbox, text: &str) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("puppet.yaml");
    std::fs::write(&path, text).unwrap();
    run(&mut sandbox.ral_command("plan", &["--detailed-exitcodes", path.to_str().unwrap()]))
}

/// A plan refused before anything ran: the manifest's problem.
fn refused(out: Run) -> Run {
    assert!(out.status != 0 && out.stdout.is_empty(), "{out:?}");
    out
}

fn puppet_s_machine() -> Sandbox {
    let sandbox = accounts_sandbox();
    sandbox.write("etc/passwd", "root:x:0:0:root:/root:/bin/bash\n");
    sandbox.write("etc/shadow", "root:*:19700:0:99999:7:::\n");
    sandbox.write("etc/group", "root:x:0:\n");
    sandbox.write("etc/gshadow", "root:*::\n");
    sandbox.write("etc/hosts", "127.0.0.1\tlocalhost\n");
    sandbox
}

#[test]
fn what_puppet_prints_of_a_machine_plans_nothing_on_the_same_files() {
    let sandbox = puppet_s_machine();
    let planned = plan(&sandbox, PUPPET);
    planned
        .expect(0)
        .stdout_has("Plan: 0 to create, 0 to change, 0 to remove; 3 unchanged.")
        .stderr_has(
            "puppet.yaml:12: provider 'useradd' is not one of ral's; user::etc_passwd is used",
        )
        .stderr_has(
            "puppet.yaml:19: provider 'parsed' is not one of ral's; host::etc_hosts is used",
        );
    // A second resource naming the same Puppet provider is not warned of
    // again.
    let two = PUPPET.replace(
        "group:\n",
        "  other:\n    ensure: absent\n    provider: parsed\ngroup:\n",
    );
    let planned = plan(&sandbox, &two);
    assert_eq!(
        planned.stderr.matches("'parsed'").count(),
        1,
        "{}",
        planned.stderr
    );
    // The aging differs: a plan changes it, as Puppet's would.
    let aged = PUPPET.replace("password_max_age: 99999", "password_max_age: 90");
    plan(&sandbox, &aged)
        .expect(2)
        .stdout_has("password_max_age: 99999 -> 90");
}

#[test]
fn ral_s_own_provider_is_picked_without_a_word_and_another_target_is_refused() {
    let sandbox = puppet_s_machine();
    let own = "host:\n  localhost:\n    ip: 127.0.0.1\n    provider: etc_hosts\n  \
               other:\n    ip: 10.0.0.1\n    provider: host::etc_hosts\n";
    let planned = plan(&sandbox, own);
    planned.expect(2).stdout_has("+ host[other]");
    assert!(!planned.stderr.contains("warn"), "{}", planned.stderr);
    let elsewhere = "host:\n  x:\n    ip: 10.0.0.1\n    target: /etc/hosts.other\n";
    refused(plan(&sandbox, elsewhere))
        .stderr_has("puppet.yaml:4: host[x]: target: host::etc_hosts manages /etc/hosts only");
    let lacking = "user:\n  root:\n    purge_ssh_keys: true\n";
    refused(plan(&sandbox, lacking))
        .stderr_has("puppet.yaml:3: user[root]: unknown attribute 'purge_ssh_keys'");
}
