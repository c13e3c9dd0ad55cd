//! Tests that reach a target over ssh, against the tests' own sshd (see
//! `sshd.rs`), which a fresh machine may lack: a sensitive value on no
//! command line on either side, one store per target and root, and the
//! inventory's connection variables.

use std::path::Path;
use std::process::Command;

use crate::host::Test;
use crate::sshd::Sshd;
use crate::support::{fixtures_dir, run};
use crate::tests;

/// This module's tests and what each needs.
pub fn tests() -> Vec<Test> {
    tests![[Sshd]
        on_a_target_the_value_is_on_no_command_line_here_or_there,
        a_target_under_two_roots_has_two_stores,
        an_inventory_gives_ssh_its_port_user_key_and_options,
        a_target_that_fails_fails_the_run_whether_its_output_is_read_or_not,
    ]
}

/// `ral apply` of MANIFEST on one target of a test sshd whose root is
/// ROOT, with the fixture providers.
fn apply_on_a_target(root: &std::path::Path, manifest: &str) -> crate::support::Run {
    let sshd = crate::sshd::Sshd::start();
    let controller = tempfile::tempdir().unwrap();
    std::fs::create_dir(controller.path().join("tmp")).unwrap();
    let inventory = controller.path().join("inventory.yaml");
    std::fs::write(
        &inventory,
        format!(
            "all:\n  hosts:\n    t1:\n      ral_root: {}\n",
            root.display()
        ),
    )
    .unwrap();
    let file = controller.path().join("m.yaml");
    std::fs::write(&file, manifest).unwrap();
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_ral"));
    command
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", controller.path())
        .env("XDG_CACHE_HOME", controller.path())
        .env("XDG_STATE_HOME", controller.path())
        .env("TMPDIR", controller.path().join("tmp"))
        .env("RAL_SSH_PERSIST", "0")
        .arg("apply")
        .arg("--ssh-config")
        .arg(sshd.ssh_config())
        .arg("-i")
        .arg(&inventory)
        .arg("-I")
        .arg(fixtures_dir())
        .arg(&file);
    run(&mut command)
}

fn on_a_target_the_value_is_on_no_command_line_here_or_there() {
    let root = tempfile::tempdir().unwrap();
    let run = apply_on_a_target(
        root.path(),
        "envsecret:\n  a: {comment: plain, password: \"t0p s3cret 'q' $(id)\"}\n\
         argsecret:\n  b: {password: b-s3cret}\n",
    );
    run.expect(0);
    let read = |file: &str| std::fs::read_to_string(root.path().join(file)).unwrap_or_default();
    assert_eq!(read("password.a"), "t0p s3cret 'q' $(id)");
    // While the provider ran, no process on this machine (ssh here, the
    // wrapper and the provider there) had it on its command line.
    assert_eq!(read("seen.a"), "", "command lines holding the secret");
    assert!(read("env.a").contains("\0password=t0p s3cret 'q' $(id)\0"));
    let cmdline = read("cmdline.a");
    assert!(
        cmdline.contains("\0ral_action=update\0name=a\0"),
        "{cmdline:?}"
    );
    assert!(cmdline.contains("\0comment=plain\0"), "{cmdline:?}");
    // The libral way, for comparison: there it is, in the provider's own
    // command line and those that carried it.
    assert_eq!(read("password.b"), "b-s3cret");
    let seen = read("seen.b");
    assert!(seen.lines().count() >= 2, "{seen}");
    assert!(
        !run.stdout.contains("s3cret") && !run.stderr.contains("s3cret"),
        "{run:?}"
    );
}

fn a_target_under_two_roots_has_two_stores() {
    let sshd = Sshd::start();
    let controller = tempfile::tempdir().unwrap();
    std::fs::create_dir(controller.path().join("tmp")).unwrap();
    let roots = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    for root in &roots {
        std::fs::create_dir(root.path().join("etc")).unwrap();
        std::fs::write(root.path().join("etc/hosts"), "127.0.0.1 localhost\n").unwrap();
    }
    let ral = |subcommand: &str, root: &Path, manifest: &str| {
        let file = controller.path().join("site.yaml");
        std::fs::write(&file, manifest).unwrap();
        let mut command =
            crate::sshd::controller_command(env!("CARGO_BIN_EXE_ral"), controller.path());
        command
            .arg(subcommand)
            .arg("--ssh-config")
            .arg(sshd.ssh_config())
            .args(["-t", "t1", "--root"])
            .arg(root)
            .arg(&file);
        run(&mut command)
    };
    ral("apply", roots[0].path(), "host:\n  web: {ip: 10.0.0.5}\n").expect(0);
    // Under the other root ral created nothing: nothing to remove there.
    let planned = ral("plan", roots[1].path(), "host:\n  db: {ip: 10.0.0.6}\n");
    planned
        .expect(0)
        .stdout_has("Plan: 1 to create, 0 to change, 0 to remove");
    assert!(!planned.stdout.contains("web"), "{}", planned.stdout);
    // Each store is named from where ssh connects and the root.
    let mut stores: Vec<String> =
        std::fs::read_dir(controller.path().join(".local/state/ral/targets"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|name| name.ends_with(".db"))
            .collect();
    stores.sort();
    assert_eq!(stores.len(), 1, "a plan makes no store: {stores:?}");
    let escaped = roots[0].path().display().to_string().replace('/', "%2F");
    assert!(
        stores[0].starts_with("root@127.0.0.1:") && stores[0].ends_with(&format!("{escaped}.db")),
        "{stores:?}"
    );
}

/// Every connection variable of an inventory reaches ssh: the port, the
/// user and the key, and the options of `ansible_ssh_common_args` and
/// `ansible_ssh_extra_args` (the usual way to say which host keys to
/// trust). Without them the connection fails, and a host key that is not
/// known is reported with what to do about it.
fn an_inventory_gives_ssh_its_port_user_key_and_options() {
    let sshd = Sshd::start();
    let controller = tempfile::tempdir().unwrap();
    let c = controller.path();
    std::fs::create_dir(c.join("tmp")).unwrap();
    // Neither this user's ~/.ssh/config (it is replaced) nor a known_hosts
    // file outside the test is read.
    std::fs::write(
        c.join("ssh_config"),
        format!(
            "Host *\n  UserKnownHostsFile {}/unknown\n  GlobalKnownHostsFile /dev/null\n  \
             IdentitiesOnly yes\n",
            c.display()
        ),
    )
    .unwrap();
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir(root.path().join("etc")).unwrap();
    std::fs::write(root.path().join("etc/hosts"), "127.0.0.1 localhost\n").unwrap();
    std::fs::write(c.join("site.yaml"), "host:\n  web: {ip: 10.0.0.5}\n").unwrap();
    let pinned = format!(
        "-o UserKnownHostsFile={}",
        sshd.pinned_known_hosts().display()
    );
    let port = sshd.port.to_string();
    let key = sshd.user_key().display().to_string();
    let plan = |vars: &[(&str, &str)]| {
        let mut inventory = "all:\n  hosts:\n    t1:\n      ansible_host: 127.0.0.1\n".to_owned();
        for (name, value) in vars {
            inventory.push_str(&format!("      {name}: '{value}'\n"));
        }
        std::fs::write(c.join("inventory.yaml"), inventory).unwrap();
        let mut command = Command::new(env!("CARGO_BIN_EXE_ral"));
        command
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", c)
            .env("TMPDIR", c.join("tmp"))
            .env("RAL_SSH_PERSIST", "0")
            .arg("plan")
            .arg("--ssh-config")
            .arg(c.join("ssh_config"))
            .arg("-i")
            .arg(c.join("inventory.yaml"))
            .args(["-t", "t1", "--root"])
            .arg(root.path())
            .arg(c.join("site.yaml"));
        run(&mut command)
    };
    let all = [
        ("ansible_port", port.as_str()),
        ("ansible_user", "root"),
        ("ansible_ssh_private_key_file", key.as_str()),
        ("ansible_ssh_common_args", pinned.as_str()),
    ];
    plan(&all)
        .expect(0)
        .stdout_has("Plan: 1 to create, 0 to change, 0 to remove");
    // The options given as extra arguments instead.
    let mut extra = all;
    extra[3] = ("ansible_ssh_extra_args", pinned.as_str());
    plan(&extra).expect(0);

    let unknown = plan(&all[..3]);
    unknown
        .expect(2)
        .stderr_has("Host key verification failed")
        .stderr_has("The target's host key is not known here")
        .stderr_has("ansible_ssh_common_args");
    let free = crate::sshd::free_port().to_string();
    for (index, value, said) in [
        (0, free.as_str(), "Connection refused"),
        (1, "ral-no-such-user", "Permission denied"),
        (2, "/dev/null", "Permission denied"),
    ] {
        let mut wrong = all;
        wrong[index].1 = value;
        let run = plan(&wrong);
        run.expect(2).stderr_has(said);
        assert!(
            !run.stderr.contains("host key is not known"),
            "{}",
            run.stderr
        );
    }
}

/// A target nothing answers on fails the run (exit 2), also when the
/// reader of the output has gone before it was written.
fn a_target_that_fails_fails_the_run_whether_its_output_is_read_or_not() {
    let home = tempfile::tempdir().unwrap();
    let target = format!("ssh://root@127.0.0.1:{}", crate::sshd::free_port());
    let root = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("site.yaml"),
        "host:\n  web: {ip: 10.0.0.5}\n",
    )
    .unwrap();
    let site = home.path().join("site.yaml");
    let commands: [(&str, Vec<&std::ffi::OsStr>); 2] = [
        (env!("CARGO_BIN_EXE_ralsh"), vec!["host".as_ref()]),
        (
            env!("CARGO_BIN_EXE_ral"),
            vec!["plan".as_ref(), site.as_os_str()],
        ),
    ];
    for (program, args) in commands {
        for closed in [false, true] {
            let mut command = Command::new(program);
            command
                .env_clear()
                .env("PATH", std::env::var_os("PATH").unwrap_or_default())
                .env("HOME", home.path())
                .args(&args[..1])
                .args(["-t", &target, "--root"])
                .arg(root.path())
                .args(&args[1..])
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped());
            let mut child = command.spawn().unwrap();
            if closed {
                drop(child.stdout.take());
            }
            let output = child.wait_with_output().unwrap();
            assert_eq!(
                output.status.code(),
                Some(2),
                "{program} {args:?}, stdout closed: {closed}"
            );
        }
    }
}
