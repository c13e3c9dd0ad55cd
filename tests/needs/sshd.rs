//! A real OpenSSH server for the remote tests, started by each test on
//! 127.0.0.1 at a free port, with host and user keys made in a temporary
//! directory and its own HOME for the logins (so nothing is copied into a
//! real home). Its log is kept, to count the connections it accepted.
//! Its limits are sshd's defaults (MaxStartups 10:30:100: beyond 10
//! connections still logging in, it starts dropping new ones).

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};

const SSHD: &str = "/usr/sbin/sshd";

pub struct Sshd {
    pub dir: tempfile::TempDir,
    pub port: u16,
    child: Child,
    log: Log,
}

/// What sshd logged so far, kept by a thread that reads its stderr.
pub type Log = Arc<Mutex<Vec<String>>>;

fn keygen(path: &Path) {
    let status = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(path)
        .status()
        .expect("ssh-keygen runs (openssh-client)");
    assert!(status.success());
}

/// Makes a server's keys in `dir`: `host_key`, and `user_key`, whose
/// public half `authorized_keys` holds.
pub fn make_keys(dir: &Path) {
    keygen(&dir.join("host_key"));
    keygen(&dir.join("user_key"));
    std::fs::copy(dir.join("user_key.pub"), dir.join("authorized_keys")).unwrap();
}

/// Writes `dir/ssh_config`, which sends every name to root@127.0.0.1 at
/// `port` with the key [`make_keys`] made there, and keeps the host key it
/// learns in `dir/known_hosts`.
pub fn write_ssh_config(dir: &Path, port: u16) {
    std::fs::write(
        dir.join("ssh_config"),
        format!(
            "Host *\n  HostName 127.0.0.1\n  Port {port}\n  User root\n  \
             IdentityFile {dir}/user_key\n  IdentitiesOnly yes\n  \
             StrictHostKeyChecking accept-new\n  UserKnownHostsFile {dir}/known_hosts\n",
            dir = dir.display()
        ),
    )
    .unwrap();
}

/// Runs `spawn` with a free port until the sshd it starts (with `-D -e`,
/// its stderr piped) says it listens on 127.0.0.1 there, trying another
/// port when someone took that one in between. Returns the port, the
/// process and its log, which a thread keeps reading.
pub fn listen(mut spawn: impl FnMut(u16) -> Child) -> (u16, Child, Log) {
    for attempt in 0.. {
        let port = free_port();
        let mut child = spawn(port);
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let mut said = Vec::new();
        let listening = loop {
            match lines.next() {
                Some(Ok(line)) => {
                    let done = line.contains("Server listening on 127.0.0.1");
                    said.push(line);
                    if done {
                        break true;
                    }
                }
                _ => break false,
            }
        };
        if !listening {
            let _ = child.kill();
            let _ = child.wait();
            assert!(attempt < 5, "sshd did not start:\n{}", said.join("\n"));
            continue;
        }
        let log = Arc::new(Mutex::new(said));
        let keep = Arc::clone(&log);
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                keep.lock().unwrap().push(line);
            }
        });
        return (port, child, log);
    }
    unreachable!()
}

/// `program` as the tests run it on a controller: a clean environment
/// with the controller's directory `home` as HOME, cache and TMPDIR
/// (`home/tmp`), and connections that close with it.
pub fn controller_command(program: impl AsRef<std::ffi::OsStr>, home: &Path) -> Command {
    let mut command = Command::new(program);
    command
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("XDG_CACHE_HOME", home)
        .env("TMPDIR", home.join("tmp"))
        .env("RAL_SSH_PERSIST", "0");
    command
}

/// `ralsh`, `ral` and the ordinary `ral-provider`, linked into a directory
/// of their own: an installation without the static copy that the build
/// directory may hold beside them (`ral-provider-ARCH`, made by .ci/run).
pub fn ordinary_install() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (name, built) in [
        ("ralsh", env!("CARGO_BIN_EXE_ralsh")),
        ("ral", env!("CARGO_BIN_EXE_ral")),
        ("ral-provider", env!("CARGO_BIN_EXE_ral-provider")),
    ] {
        let to = dir.path().join(name);
        if std::fs::hard_link(built, &to).is_err() {
            std::fs::copy(built, &to).unwrap();
        }
    }
    dir
}

/// A port nothing listens on now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Sshd {
    /// Starts sshd and waits until it listens (it says so on its log).
    pub fn start() -> Sshd {
        Sshd::start_with("")
    }

    /// [`Sshd::start`] with more variables for the sessions, as
    /// ` NAME=VALUE` words (`DIR` stands for the server's directory).
    pub fn start_with(session_env: &str) -> Sshd {
        Sshd::start_configured(session_env, "")
    }

    /// [`Sshd::start_with`], with `more` lines of configuration (each
    /// ending with a newline).
    pub fn start_configured(session_env: &str, more: &str) -> Sshd {
        assert!(
            Path::new(SSHD).exists(),
            "the remote tests need {SSHD} (Debian's openssh-server; .ci/run installs it)"
        );
        // SAFETY: geteuid has no preconditions.
        assert_eq!(
            unsafe { libc::geteuid() },
            0,
            "the remote tests log in as root to an sshd of their own: run them as root (CI does)"
        );
        // sshd refuses to start without its privilege separation directory,
        // which a system without a running sshd may lack.
        std::fs::create_dir_all("/run/sshd").unwrap();
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        make_keys(d);
        std::fs::create_dir(d.join("home")).unwrap();
        let (port, child, log) = listen(|port| {
            std::fs::write(
                d.join("sshd_config"),
                format!(
                    "Port {port}\nListenAddress 127.0.0.1\nHostKey {dir}/host_key\n\
                     PidFile none\nAuthorizedKeysFile {dir}/authorized_keys\nStrictModes no\n\
                     PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\n\
                     PermitRootLogin prohibit-password\n\
                     SetEnv HOME={dir}/home{env}\nLogLevel DEBUG\n{more}",
                    dir = d.display(),
                    env = session_env.replace("DIR", &d.display().to_string()),
                ),
            )
            .unwrap();
            write_ssh_config(d, port);
            Command::new(SSHD)
                .args(["-D", "-e", "-f"])
                .arg(d.join("sshd_config"))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        });
        Sshd {
            dir,
            port,
            child,
            log,
        }
    }

    pub fn ssh_config(&self) -> PathBuf {
        self.dir.path().join("ssh_config")
    }

    /// A known_hosts file that holds this server's host key, as ssh looks
    /// it up for 127.0.0.1 at its port.
    pub fn pinned_known_hosts(&self) -> PathBuf {
        let key = std::fs::read_to_string(self.dir.path().join("host_key.pub")).unwrap();
        let file = self.dir.path().join("pinned_known_hosts");
        std::fs::write(&file, format!("[127.0.0.1]:{} {key}", self.port)).unwrap();
        file
    }

    /// The key the server takes for root.
    pub fn user_key(&self) -> PathBuf {
        self.dir.path().join("user_key")
    }

    /// The HOME of the logins: where the providers are copied.
    pub fn home(&self) -> PathBuf {
        self.dir.path().join("home")
    }

    /// Everything sshd logged so far.
    pub fn log(&self) -> String {
        self.log.lock().unwrap().join("\n")
    }

    /// How many connections sshd accepted so far.
    pub fn accepted(&self) -> usize {
        self.log
            .lock()
            .unwrap()
            .iter()
            .filter(|line| line.contains("Accepted publickey for root"))
            .count()
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
