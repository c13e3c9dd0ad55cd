//! Running a program for a provider (mount(8), say): argv only, never a
//! shell; stdin from /dev/null; a given environment; its own process
//! group, ended whole at the time limit. A call has a [`Commands`] that
//! runs them: [`Direct`] in a provider program, and, for the providers the
//! host serves in its own process, the host's, which runs them through its
//! one process runner so that its sweeps of what calls leave behind know
//! them.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use rustix::process::{kill_process_group, Pid, Signal};

use super::error::strerror;

/// The bytes kept of each of a command's outputs (the last ones).
pub const TAIL_BYTES: usize = 16384;

/// How a command ended: its exit status (`None` when it did not run or
/// finish), why not, and the tail of its outputs.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Finished {
    pub status: Option<i32>,
    /// "could not be run: ...", "did not finish within Ns", "was killed
    /// by signal N".
    pub problem: Option<String>,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

/// Who a command runs as: ids the caller looked up (the process must be
/// root to take them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credentials {
    pub uid: u32,
    pub gid: u32,
    /// The supplementary groups, which replace the caller's.
    pub groups: Vec<u32>,
}

impl Credentials {
    /// Takes these ids in a forked child before it execs: groups, then
    /// the group, then the user, each checked (a failure fails the spawn,
    /// the command never runs with the caller's privileges).
    ///
    /// # Safety
    /// Only for `pre_exec`: it calls setgroups, setgid and setuid alone,
    /// which are async-signal-safe, on a vector allocated before the fork.
    unsafe fn take(uid: u32, gid: u32, groups: &[libc::gid_t]) -> std::io::Result<()> {
        let taken = unsafe {
            libc::setgroups(groups.len() as _, groups.as_ptr()) == 0
                && libc::setgid(gid) == 0
                && libc::setuid(uid) == 0
        };
        match taken {
            true => Ok(()),
            false => Err(std::io::Error::last_os_error()),
        }
    }

    /// Sets `command` to run with these ids.
    pub fn apply(&self, command: &mut Command) {
        let (uid, gid, groups) = (self.uid, self.gid, self.groups.clone());
        // SAFETY: `take` is async-signal-safe, and the groups were
        // allocated here, before the fork.
        unsafe {
            command.pre_exec(move || Credentials::take(uid, gid, &groups));
        }
    }
}

/// One command to run: argv only, with exactly `env`, within `timeout`;
/// in `dir` (`/` when `None`), as `user` (the caller when `None`).
#[derive(Debug, Clone, Copy)]
pub struct Spec<'a> {
    pub argv: &'a [String],
    pub env: &'a [(String, String)],
    pub timeout: Duration,
    pub dir: Option<&'a std::path::Path>,
    pub user: Option<&'a Credentials>,
}

/// Runs commands for a provider.
pub trait Commands: Send + Sync {
    /// Runs `argv` with exactly `env`, within `timeout`, in `/`.
    fn run(&self, argv: &[String], env: &[(String, String)], timeout: Duration) -> Finished {
        self.run_spec(&Spec {
            argv,
            env,
            timeout,
            dir: None,
            user: None,
        })
    }

    /// Runs the command `spec` describes.
    fn run_spec(&self, spec: &Spec) -> Finished;
}

/// Runs commands as children of the provider's own process.
pub struct Direct;

impl Commands for Direct {
    fn run_spec(&self, spec: &Spec) -> Finished {
        let mut ran = Finished::default();
        let Some((program, args)) = spec.argv.split_first() else {
            ran.problem = Some("could not be run: no command".to_owned());
            return ran;
        };
        // Anonymous files need no draining, and a daemon the command
        // leaves holding one holds up nobody.
        let files = tempfile::tempfile().and_then(|out| Ok((out, tempfile::tempfile()?)));
        let (mut out, mut err) = match files {
            Ok(files) => files,
            Err(e) => {
                ran.problem = Some(format!("could not be run: {}", strerror(&e)));
                return ran;
            }
        };
        let child = match spawn(command(spec, program, args), &out, &err) {
            Ok(child) => child,
            Err(e) => {
                ran.problem = Some(format!("could not be run: {}", strerror(&e)));
                return ran;
            }
        };
        match wait(child, spec.timeout) {
            Ok(code) => ran.status = Some(code),
            Err(problem) => ran.problem = Some(problem),
        }
        ran.stdout = read_back(&mut out);
        ran.stderr = read_back(&mut err);
        ran
    }
}

/// The command `spec` describes, `program` with `args`: stdin from
/// /dev/null, exactly its environment, in its directory (`/` by default),
/// as its user, in a process group of its own.
fn command(spec: &Spec, program: &str, args: &[String]) -> Command {
    let mut command = Command::new(program);
    command
        .args(args)
        .stdin(Stdio::null())
        .current_dir(spec.dir.unwrap_or(std::path::Path::new("/")))
        .env_clear()
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        // Its own group, so that a timeout ends the helpers it started
        // (mount.nfs...) too.
        .process_group(0);
    if let Some(user) = spec.user {
        user.apply(&mut command);
    }
    command
}

/// Starts `command`, its stdout and stderr written to `out` and `err`.
fn spawn(mut command: Command, out: &File, err: &File) -> std::io::Result<Child> {
    let spawned = out
        .try_clone()
        .and_then(|o| Ok((o, err.try_clone()?)))
        .and_then(|(o, e)| command.stdout(o).stderr(e).spawn());
    // Dropped so that the command's copies are the only ones writing.
    drop(command);
    spawned
}

/// Waits for `child` up to `timeout`, then kills its process group: its
/// exit status, or why there is none.
fn wait(mut child: Child, timeout: Duration) -> Result<i32, String> {
    let pid = child.id() as i32;
    let (sender, receiver) = mpsc::channel();
    let waiter = std::thread::spawn(move || {
        let _ = sender.send(child.wait());
    });
    let waited = receiver.recv_timeout(timeout);
    if waited.is_err() {
        // The child is not reaped until the waiter's wait returns, so its
        // pid, which leads its group, still names it.
        if let Some(group) = Pid::from_raw(pid) {
            let _ = kill_process_group(group, Signal::KILL);
        }
        let _ = receiver.recv();
    }
    let _ = waiter.join();
    match waited {
        Err(_) => Err(format!("did not finish within {}s", seconds(timeout))),
        Ok(Ok(status)) => match (status.code(), status.signal()) {
            (Some(code), _) => Ok(code),
            (None, Some(signal)) => Err(format!("was killed by signal {signal}")),
            (None, None) => Err("ended without a status".to_owned()),
        },
        Ok(Err(e)) => Err(format!("could not be waited for: {}", strerror(&e))),
    }
}

/// The last [`TAIL_BYTES`] written to `file`.
fn read_back(file: &mut File) -> Vec<u8> {
    let mut data = Vec::new();
    let read = file.seek(SeekFrom::End(0)).and_then(|size| {
        file.seek(SeekFrom::Start(size.saturating_sub(TAIL_BYTES as u64)))?;
        file.read_to_end(&mut data)
    });
    if read.is_err() {
        data.clear();
    }
    data
}

/// A number of seconds as Python's `%g` writes it (`120`, `0.5`).
pub fn seconds(timeout: Duration) -> String {
    let text = format!("{}", timeout.as_secs_f64());
    text.strip_suffix(".0").map(str::to_owned).unwrap_or(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether the process `pid` is gone (or a zombie, dead but not yet
    /// reaped by whoever adopted it), waiting for it at most `limit`.
    fn gone_within(pid: i32, limit: Duration) -> bool {
        let deadline = std::time::Instant::now() + limit;
        loop {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"));
            // The state follows the command name's closing parenthesis.
            let state = stat.as_deref().ok().and_then(|s| s.rsplit(") ").next());
            if state.is_none_or(|s| s.starts_with('Z')) {
                return true;
            }
            if std::time::Instant::now() > deadline {
                return false;
            }
            std::thread::yield_now();
        }
    }

    /// `sh -c SCRIPT` with a plain PATH, within 10 seconds.
    fn shell(script: &str) -> Finished {
        let argv = ["sh", "-c", script].map(str::to_owned);
        let env = [("PATH".to_owned(), "/usr/bin:/bin".to_owned())];
        Direct.run(&argv, &env, Duration::from_secs(10))
    }

    #[test]
    fn a_command_s_status_and_each_output_come_back() {
        let ran = shell("echo out; echo err >&2; exit 3");
        assert_eq!(ran.problem, None);
        assert_eq!(ran.status, Some(3));
        assert_eq!(ran.stdout, b"out\n");
        assert_eq!(ran.stderr, b"err\n");
    }

    #[test]
    fn a_command_gets_exactly_its_environment_in_its_directory() {
        let dir = tempfile::tempdir().unwrap();
        let argv = ["/bin/sh", "-c", "pwd; env | sort"].map(str::to_owned);
        let env = [("ONLY".to_owned(), "this".to_owned())];
        let ran = Direct.run_spec(&Spec {
            argv: &argv,
            env: &env,
            timeout: Duration::from_secs(10),
            dir: Some(dir.path()),
            user: None,
        });
        assert_eq!(ran.status, Some(0), "{ran:?}");
        let text = String::from_utf8(ran.stdout).unwrap();
        let mut lines = text.lines();
        let pwd = std::fs::canonicalize(dir.path()).unwrap();
        assert_eq!(lines.next(), Some(pwd.to_str().unwrap()));
        // The shell adds PWD and the like; nothing of the caller's passes.
        assert!(text.contains("ONLY=this\n"), "{text}");
        assert!(!text.contains("CARGO"), "{text}");
    }

    #[test]
    fn a_command_killed_by_a_signal_has_no_status_and_says_why() {
        let ran = shell("kill -KILL $$");
        assert_eq!(ran.status, None);
        assert_eq!(ran.problem.as_deref(), Some("was killed by signal 9"));
    }

    #[test]
    fn a_command_that_cannot_start_says_why() {
        let none = Direct.run(&[], &[], Duration::from_secs(1));
        assert_eq!(
            none.problem.as_deref(),
            Some("could not be run: no command")
        );
        let argv = ["/nonexistent/program".to_owned()];
        let missing = Direct.run(&argv, &[], Duration::from_secs(1));
        assert_eq!(missing.status, None);
        let problem = missing.problem.unwrap_or_default();
        assert!(problem.starts_with("could not be run: "), "{problem}");
    }

    #[test]
    fn a_command_past_its_time_is_ended_with_the_processes_it_started() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("pid");
        let script = format!("sleep 60 & echo $! > '{}'; wait", pid_file.display());
        let argv = ["sh", "-c", &script].map(str::to_owned);
        let env = [("PATH".to_owned(), "/usr/bin:/bin".to_owned())];
        let ran = Direct.run(&argv, &env, Duration::from_secs(2));
        assert_eq!(ran.problem.as_deref(), Some("did not finish within 2s"));
        assert_eq!(ran.status, None);
        let pid: i32 = std::fs::read_to_string(&pid_file)
            .expect("the command started its child")
            .trim()
            .parse()
            .unwrap();
        assert!(
            gone_within(pid, Duration::from_secs(10)),
            "the command's child {pid} outlived the time limit"
        );
    }
}
