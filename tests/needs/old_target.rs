//! A Debian 11 (bullseye) machine as a target: older than the controller
//! (glibc 2.31, Python 3.9), so what ral copies there must run on it.
//!
//! Each test starts its own target from the cached root (see
//! [`old_target_root`]): in a mount and PID namespace of its own, an
//! overlay mount whose lower directory is that root and whose upper one is
//! in the test's temporary directory (so the cached root is never changed
//! and every test starts from it as it was made), with /proc, /dev and a
//! /run of its own inside, and the root's own sshd chrooted there,
//! listening on 127.0.0.1 only. When the test ends its sshd, the first
//! process of the PID namespace, is killed, which kills every other
//! process there; the mounts go with the namespace.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::Value as Json;

use crate::host::{old_target_root, Test};
use crate::pids::{assert_gone, assert_running};
use crate::sshd::{controller_command, listen, make_keys, write_ssh_config, Log};
use crate::support::{run, Run};
use crate::tests;

/// This module's tests and what each needs.
pub fn tests() -> Vec<Test> {
    tests![[OldTarget]
        ralsh_lists_and_changes_hosts_and_users_as_the_targets_files_say,
        a_manifest_converges_with_ral_apply_and_then_plans_nothing,
        python_providers_run_on_the_targets_python_and_init_scripts,
        each_target_starts_from_the_cached_root_and_leaves_nothing_running,
        without_a_static_copy_its_native_types_are_refused_by_glibc_version,
        the_static_copy_asks_the_targets_getent_for_users_in_no_file,
    ]
}

/// Run by `sh` as the first process of the namespace, with the cached
/// root, the test's directory and the port as arguments: mounts the
/// target's file systems (private to the namespace: `unshare` made every
/// mount there private), puts sshd's keys in its /run, and becomes its
/// sshd. Anything that fails ends it before sshd listens, with the error
/// on stderr, which the test shows.
const IN_NAMESPACE: &str = r#"
set -eu
lower=$1 dir=$2 port=$3
root=$dir/root
mount -t overlay overlay \
    -o "lowerdir=$lower,upperdir=$dir/upper,workdir=$dir/work" "$root"
mount -t proc proc "$root/proc"
mount --bind /dev "$root/dev"
mount -t tmpfs -o mode=0755 tmpfs "$root/run"
mkdir -m 0755 "$root/run/sshd" "$root/run/ral-test"
cp "$dir/host_key" "$dir/authorized_keys" "$root/run/ral-test/"
exec chroot "$root" /usr/sbin/sshd -D -e -p "$port" \
    -o ListenAddress=127.0.0.1 \
    -o HostKey=/run/ral-test/host_key \
    -o AuthorizedKeysFile=/run/ral-test/authorized_keys \
    -o StrictModes=no -o UsePAM=no -o PasswordAuthentication=no \
    -o PermitRootLogin=prohibit-password
"#;

/// A running Debian 11 target and a controller for it (its HOME,
/// temporary directory and an inventory naming the target `old`).
struct OldTarget {
    /// The cached root, the overlay's lower directory.
    lower: PathBuf,
    /// The keys and ssh configurations, the inventory, the overlay's
    /// `upper`, `work` and mount (`root`) directories, and the
    /// controller's HOME, `controller`.
    dir: tempfile::TempDir,
    /// Where its sshd listens, on 127.0.0.1.
    port: u16,
    /// `unshare`, whose only child is the target's sshd.
    child: Child,
    log: Log,
}

impl OldTarget {
    /// Starts the target and waits until its sshd listens.
    fn start() -> OldTarget {
        let lower = old_target_root().unwrap_or_else(|why| panic!("{why}"));
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        for sub in ["upper", "work", "root", "controller", "controller/tmp"] {
            std::fs::create_dir(d.join(sub)).unwrap();
        }
        make_keys(d);
        // No ral_root: the target's providers work on its own root, the
        // overlay, which goes with the test.
        std::fs::write(d.join("inventory.yaml"), "all:\n  hosts:\n    old:\n").unwrap();
        let (port, child, log) = listen(|port| {
            write_ssh_config(d, port);
            Command::new("unshare")
                .args(["--mount", "--propagation", "private"])
                // The sshd is the PID namespace's first process: when it
                // dies, the kernel kills everything it started; and it
                // dies with unshare, which the test kills when it ends.
                .args(["--pid", "--kill-child"])
                .args(["sh", "-c", IN_NAMESPACE, "sh"])
                .arg(&lower)
                .arg(d)
                .arg(port.to_string())
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .expect("unshare runs (util-linux)")
        });
        OldTarget {
            lower,
            dir,
            port,
            child,
            log,
        }
    }

    /// Its sshd's command line, as `ps` shows it, holds this.
    fn sshd_marker(&self) -> String {
        format!("/usr/sbin/sshd -D -e -p {} ", self.port)
    }

    /// What its sshd logged so far.
    fn log_text(&self) -> String {
        self.log.lock().unwrap().join("\n")
    }

    fn controller(&self) -> PathBuf {
        self.dir.path().join("controller")
    }

    fn inventory(&self) -> PathBuf {
        self.dir.path().join("inventory.yaml")
    }

    fn ssh_config(&self) -> PathBuf {
        self.dir.path().join("ssh_config")
    }

    /// The target's sshd as this machine numbers it: unshare's child.
    fn sshd_pid(&self) -> i32 {
        let pid = self.child.id();
        let children = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
            .unwrap_or_else(|e| panic!("the children of unshare ({pid}): {e}"));
        let mut pids = children.split_whitespace();
        let sshd = pids.next().expect("unshare has a child, the target's sshd");
        assert_eq!(pids.next(), None, "{children}");
        sshd.parse().unwrap()
    }

    /// `path` (absolute) as the target sees it: through its sshd's root.
    fn path(&self, path: &str) -> PathBuf {
        Path::new(&format!("/proc/{}/root", self.sshd_pid())).join(path.trim_start_matches('/'))
    }

    /// The target's file `path`; empty when there is none.
    fn read(&self, path: &str) -> String {
        std::fs::read_to_string(self.path(path)).unwrap_or_default()
    }

    fn write(&self, path: &str, text: &str) {
        std::fs::write(self.path(path), text).unwrap();
    }

    /// `ralsh -i INVENTORY ARGS` from the controller.
    fn ralsh(&self, args: &[&str]) -> Run {
        self.ralsh_with(None, args)
    }

    /// [`OldTarget::ralsh`], run from `install` (see
    /// [`crate::sshd::ordinary_install`]) when given.
    fn ralsh_with(&self, install: Option<&Path>, args: &[&str]) -> Run {
        let program = match install {
            Some(dir) => dir.join("ralsh"),
            None => PathBuf::from(env!("CARGO_BIN_EXE_ralsh")),
        };
        let mut command = controller_command(program, &self.controller());
        command
            .arg("--ssh-config")
            .arg(self.ssh_config())
            .arg("-i")
            .arg(self.inventory())
            .args(args);
        run(&mut command)
    }

    /// `ral SUBCOMMAND -i INVENTORY ARGS MANIFEST`, the store in the
    /// controller's `state`.
    fn ral(&self, subcommand: &str, args: &[&str], manifest: &Path) -> Run {
        let mut command = controller_command(env!("CARGO_BIN_EXE_ral"), &self.controller());
        command
            .arg(subcommand)
            .arg("--ssh-config")
            .arg(self.ssh_config())
            .arg("-i")
            .arg(self.inventory())
            .arg("--state")
            .arg(self.controller().join("state"))
            .args(args)
            .arg(manifest);
        run(&mut command)
    }

    /// `script` run by the target's shell over ssh: its own programs.
    fn ssh(&self, script: &str) -> Run {
        let mut command = Command::new("ssh");
        command
            .arg("-F")
            .arg(self.ssh_config())
            .args(["-o", "BatchMode=yes", "old", script]);
        run(&mut command)
    }

    /// The cached root's file `path`, which no test may change.
    fn cached(&self, path: &str) -> Option<String> {
        std::fs::read_to_string(self.lower.join(path.trim_start_matches('/'))).ok()
    }
}

impl Drop for OldTarget {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The one target's answer in `ralsh -j` output.
fn answer(run: &Run) -> Json {
    let doc: Json = serde_json::from_str(&run.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}\n{}", run.stdout, run.stderr));
    let targets = doc["targets"].as_array().expect("a targets array");
    assert_eq!(targets.len(), 1, "{doc}");
    assert_eq!(targets[0]["target"], "old", "{doc}");
    targets[0].clone()
}

/// The names a listing on the target gives, sorted.
fn listed_names(run: &Run) -> Vec<String> {
    let answer = answer(run);
    let resources = answer["resources"]
        .as_array()
        .unwrap_or_else(|| panic!("a resources array: {answer}"));
    let mut names: Vec<String> = resources
        .iter()
        .map(|r| r["name"].as_str().unwrap().to_owned())
        .collect();
    names.sort();
    names
}

/// The first field of each line of a colon-separated account file, sorted.
fn account_names(text: &str) -> Vec<String> {
    let mut names: Vec<String> = text
        .lines()
        .filter_map(|line| line.split(':').next())
        .filter(|name| !name.is_empty())
        .map(str::to_owned)
        .collect();
    names.sort();
    names
}

fn ralsh_lists_and_changes_hosts_and_users_as_the_targets_files_say() {
    let target = OldTarget::start();
    let cached_hosts = target.cached("/etc/hosts");
    // debootstrap writes no hosts file; an installed machine has one.
    target.write(
        "/etc/hosts",
        "127.0.0.1\tlocalhost\n10.1.2.3\tbuild.example build\n",
    );

    let hosts = target.ralsh(&["-j", "host"]);
    hosts.expect(0);
    assert_eq!(listed_names(&hosts), ["build.example", "localhost"]);

    let users = target.ralsh(&["-j", "user"]);
    users.expect(0);
    let passwd = target.read("/etc/passwd");
    assert!(
        passwd.contains("\nsshd:"),
        "openssh-server's user: {passwd}"
    );
    assert_eq!(listed_names(&users), account_names(&passwd));

    target
        .ralsh(&["host", "demo", "ip=10.0.0.9"])
        .expect(0)
        .stdout_has("ip: (none) -> '10.0.0.9'");
    let written = target.read("/etc/hosts");
    assert!(written.contains("\n10.0.0.9\tdemo\n"), "{written}");
    assert!(written.starts_with("127.0.0.1\tlocalhost\n10.1.2.3\tbuild.example build\n"));
    let found = target.ralsh(&["-j", "host", "demo"]);
    found.expect(0);
    assert_eq!(answer(&found)["resource"]["ip"], "10.0.0.9", "{found:?}");
    // The target's own C library finds it.
    target
        .ssh("getent hosts demo")
        .expect(0)
        .stdout_has("10.0.0.9");
    assert_eq!(target.cached("/etc/hosts"), cached_hosts, "the cached root");
}

/// Every core type, and an exec run as the user the same manifest makes.
const MANIFEST: &str = r#"host:
  demo: {ip: 10.0.0.9}
group:
  app: {gid: 3100}
user:
  app: {uid: 3100, gid: 3100, home: /srv/app, shell: /bin/bash}
file:
  /srv/app: {ensure: directory, mode: '0755', owner: app}
  /srv/app/app.conf: {ensure: file, content: "port=8080\n", mode: '0640'}
exec:
  migrate:
    command: [sh, -c, 'id -un > /srv/app/who']
    user: app
    cwd: /srv/app
    creates: /srv/app/who
"#;

fn a_manifest_converges_with_ral_apply_and_then_plans_nothing() {
    let target = OldTarget::start();
    let manifest = target.controller().join("site.yaml");
    std::fs::write(&manifest, MANIFEST).unwrap();
    let passwd = target.read("/etc/passwd");

    let planned = target.ral("plan", &["--detailed-exitcodes"], &manifest);
    // The exec's cwd comes with the apply: it is read once that is done.
    planned
        .expect(2)
        .stdout_has("Plan: 5 to create")
        .stdout_has("1 to read once what they wait for is done");
    assert_eq!(target.read("/etc/passwd"), passwd, "a plan changes nothing");

    target.ral("apply", &[], &manifest).expect(0);
    let ids = target.ssh(
        "getent group app; getent passwd app; getent hosts demo; \
         stat -c '%U %a' /srv/app /srv/app/app.conf; cat /srv/app/app.conf /srv/app/who",
    );
    ids.expect(0);
    assert_eq!(
        ids.stdout,
        "app:x:3100:\napp:x:3100:3100::/srv/app:/bin/bash\n10.0.0.9        demo\n\
         app 755\nroot 640\nport=8080\napp\n"
    );

    let again = target.ral("plan", &["--detailed-exitcodes", "-j"], &manifest);
    again.expect(0);
    let plan = answer(&again);
    assert_eq!(plan["plan"]["counts"]["unchanged"], 6, "{plan}");
    assert_eq!(plan["plan"]["tasks"].as_array().unwrap().len(), 0, "{plan}");
}

fn python_providers_run_on_the_targets_python_and_init_scripts() {
    let target = OldTarget::start();
    let version = target.ssh("python3 -c 'import sys; print(sys.version_info[:2])'");
    assert_eq!(version.expect(0).stdout, "(3, 9)\n", "Debian 11's Python");
    let key = "AAAAC3NzaC1lZDI1NTE5AAAAIFpQYZk3k8bSbqgk9kGK8c6L0y2V6a2c3p8xQ5bWl4sR";
    target
        .ralsh(&[
            "ssh_authorized_key",
            "ops@example",
            "user=root",
            "type=ssh-ed25519",
            &format!("key={key}"),
        ])
        .expect(0);
    assert_eq!(
        target.read("/root/.ssh/authorized_keys"),
        format!("ssh-ed25519 {key} ops@example\n")
    );
    let listed = target.ralsh(&["-j", "ssh_authorized_key"]);
    listed.expect(0);
    assert_eq!(listed_names(&listed), ["ops@example"]);
    assert_eq!(target.cached("/root/.ssh/authorized_keys"), None);

    // The service provider runs the target's own init scripts (no systemd
    // runs there): ssh's status reads the pid file of the sshd the test
    // started.
    let services = target.ralsh(&["-j", "service"]);
    services.expect(0);
    let mut scripts: Vec<String> = std::fs::read_dir(target.path("/etc/init.d"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .collect();
    scripts.sort();
    assert_eq!(listed_names(&services), scripts);
    let ssh = target.ralsh(&["-j", "service", "ssh"]);
    let ssh = answer(ssh.expect(0));
    assert_eq!(ssh["resource"]["ensure"], "running", "{ssh}");
    assert_eq!(ssh["resource"]["enable"], true, "{ssh}");
    // On the target's real root, update-rc.d disables it.
    target
        .ralsh(&["service", "ssh", "enable=false"])
        .expect(0)
        .stdout_has("enable: true -> false");
    let links = target.ssh("ls /etc/rc2.d /etc/rc5.d");
    assert_eq!(
        links.expect(0).stdout,
        "/etc/rc2.d:\nK01ssh\n\n/etc/rc5.d:\nK01ssh\n"
    );
    let ssh = target.ralsh(&["-j", "service", "ssh"]);
    assert_eq!(answer(ssh.expect(0))["resource"]["enable"], false);
    assert!(target.lower.join("etc/rc2.d/S01ssh").exists());
}

/// The processes of this machine whose command line is `cmdline`
/// (its words joined by spaces).
fn processes_running(cmdline: &str) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            let words = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            String::from_utf8_lossy(&words)
                .replace('\0', " ")
                .trim_end()
                == cmdline
        })
        .collect()
}

fn each_target_starts_from_the_cached_root_and_leaves_nothing_running() {
    let first = OldTarget::start();
    first
        .ralsh(&["file", "/srv/left", "ensure=file", "content=first"])
        .expect(0);
    assert_eq!(first.read("/srv/left"), "first");
    // A process the target's sshd no longer waits for, named by the
    // port, which no other target has now; the login ends once it runs.
    let sleeper = format!("sleep {}", first.port);
    first
        .ssh(&format!(
            "{sleeper} </dev/null >/dev/null 2>&1 & \
             until [ \"$(tr '\\0' ' ' < /proc/$!/cmdline)\" = '{sleeper} ' ]; do :; done"
        ))
        .expect(0);
    let left = processes_running(&sleeper);
    assert_eq!(left.len(), 1, "{sleeper} runs on the target");
    let sshd = first.sshd_pid();
    let marker = first.sshd_marker();
    assert_running(sshd, &marker);
    assert_running(left[0], &sleeper);
    let log = first.log_text();
    drop(first);
    assert_gone(sshd, &marker);
    assert_gone(left[0], &sleeper);
    assert!(processes_running(&sleeper).is_empty(), "sshd's log:\n{log}");

    let second = OldTarget::start();
    assert!(
        !second.path("/srv/left").exists(),
        "the second target sees what the first one wrote"
    );
    assert_eq!(second.cached("/srv/left"), None, "the cached root changed");
}

fn without_a_static_copy_its_native_types_are_refused_by_glibc_version() {
    // Only the ordinary ral-provider, built against this machine's newer
    // glibc: ral says so before anything runs, never the loader's
    // `GLIBC_2.34' not found; the script providers still work.
    let target = OldTarget::start();
    let install = crate::sshd::ordinary_install();
    let refused = target.ralsh_with(Some(install.path()), &["user", "root"]);
    refused.expect(2);
    let said = &refused.stderr;
    assert!(
        said.contains("ral's native providers (etc_passwd is one) cannot run there")
            && said.contains("(x86_64, glibc 2.31)")
            && said.contains("or newer and the target has 2.31")
            && said.contains("ral-provider-x86_64"),
        "{said}"
    );
    assert!(!said.contains("not found"), "{said}");
    let services = target.ralsh_with(Some(install.path()), &["-j", "service", "ssh"]);
    services.expect(0);
    assert_eq!(
        answer(&services)["resource"]["ensure"],
        "running",
        "{services:?}"
    );
}

fn the_static_copy_asks_the_targets_getent_for_users_in_no_file() {
    // A user the target's name services know but no file holds (as from
    // LDAP or sssd): a static glibc cannot load another glibc's NSS
    // modules, so the static copy asks the target's getent, which here
    // knows `directory-user` besides what the files say.
    let target = OldTarget::start();
    let getent = target.path("/usr/bin/getent");
    let real = target.path("/usr/bin/getent.real");
    std::fs::rename(&getent, &real).unwrap();
    target.write(
        "/usr/bin/getent",
        "#!/bin/sh\n[ \"$1 $2\" = 'passwd directory-user' ] && \
         { echo 'directory-user:*:5000:5000::/home/d:/bin/sh'; exit 0; }\n\
         exec /usr/bin/getent.real \"$@\"\n",
    );
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&getent, std::fs::Permissions::from_mode(0o755)).unwrap();
    assert!(!target.read("/etc/passwd").contains("directory-user"));

    target
        .ralsh(&["group", "adm", "members=root,directory-user"])
        .expect(0)
        .stdout_has("'directory-user'");
    assert!(
        target
            .read("/etc/group")
            .contains("\nadm:x:4:root,directory-user\n"),
        "{}",
        target.read("/etc/group")
    );
    let unknown = target.ralsh(&["group", "adm", "members=nobody-known-x"]);
    unknown.expect(2);
    assert!(
        unknown
            .stderr
            .contains("members: unknown user 'nobody-known-x'"),
        "{}",
        unknown.stderr
    );
}
