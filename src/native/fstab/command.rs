//! Running mount(8) and umount(8) for `mount::fstab` the way the Python
//! toolkit's `Commands.change` ran them: argv only (never a shell), stdin
//! from /dev/null, `/` as the working directory, a scrubbed environment
//! (PATH and HOME as given, the C locale) and a time limit; under noop
//! nothing runs and a log line says what would have. The SDK has no
//! command runner yet, so this small one is private to the provider.
//!
//! Served inside ralsh, the command is a child of ralsh that leads no
//! call, which ralsh's sweeps for what calls leave behind (a child
//! subreaper's, `process::orphans`) would count as left behind: a sweep
//! run meanwhile by another call's end could end it. ralsh makes one call
//! at a time, but `ral apply` runs several providers' tasks side by side:
//! a runner the host knows of (one that keeps its children out of the
//! sweeps, as `process::Daemon` does) belongs in the SDK.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use crate::sdk::error::strerror;
use crate::sdk::text::{clean, join_words};
use crate::sdk::Log;

/// PATH for a command when the provider was given none.
const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
/// The bytes kept of each of a command's outputs (the last ones).
const TAIL_BYTES: u64 = 16384;
/// The lines of stdout logged at debug.
const LOGGED_LINES: usize = 20;
/// The lines of output quoted in a failure.
const QUOTED_LINES: usize = 5;

/// How a command ended: its exit status (`None` when it did not run or
/// finish), why not, and the tail of its outputs as text.
#[derive(Debug, Default, PartialEq)]
pub struct Ran {
    pub argv: Vec<String>,
    pub status: Option<i32>,
    pub problem: Option<String>,
    pub stdout: String,
    pub stderr: String,
}

impl Ran {
    pub fn ok(&self) -> bool {
        self.status == Some(0)
    }

    fn outcome(&self) -> String {
        match (&self.problem, self.status) {
            (Some(problem), _) => problem.clone(),
            (None, Some(status)) => format!("exit status {status}"),
            (None, None) => "no exit status".to_owned(),
        }
    }

    /// `:` and the last lines of stderr (of stdout when stderr says
    /// nothing), or ` (no output)`.
    fn tail(&self) -> String {
        for text in [&self.stderr, &self.stdout] {
            let kept: Vec<String> = py_splitlines(text)
                .into_iter()
                .map(|line| line.trim_matches(is_space))
                .filter(|line| !line.is_empty())
                .map(clean)
                .collect();
            if !kept.is_empty() {
                let from = kept.len().saturating_sub(QUOTED_LINES);
                return format!(":\n{}", kept[from..].join("\n"));
            }
        }
        " (no output)".to_owned()
    }

    /// `COMMAND failed (OUTCOME): OUTPUT`, for an error message.
    pub fn failure(&self) -> String {
        format!(
            "{} failed ({}){}",
            shown_command(&self.argv),
            self.outcome(),
            self.tail()
        )
    }
}

/// The command as a shell would read it, for messages.
fn shown_command(argv: &[String]) -> String {
    join_words(argv)
}

/// Runs `argv` unless the call is noop (then logs what would have run and
/// returns `None`). Its stderr is kept for the caller, not logged.
pub fn change(log: &Log, noop: bool, argv: &[String], timeout: Duration) -> Option<Ran> {
    if noop {
        log.info(&format!("noop: would run {}", shown_command(argv)));
        return None;
    }
    log.debug(&format!("running {}", shown_command(argv)));
    let ran = run(argv, timeout);
    let command = argv
        .first()
        .map(|program| program.rsplit('/').next().unwrap_or(program))
        .unwrap_or_default();
    let lines = py_splitlines(&ran.stdout);
    for line in &lines[lines.len().saturating_sub(LOGGED_LINES)..] {
        log.debug(&format!("{command}: {line}"));
    }
    Some(ran)
}

/// The scrubbed environment of commands: what ralsh gives a provider
/// program (PATH without relative entries, HOME, the C locale), which a
/// provider served in ralsh's own process makes from ralsh's.
fn command_env() -> [(&'static str, String); 4] {
    let given = |key: &str| std::env::var(key).ok().filter(|value| !value.is_empty());
    let path = given("PATH").map(|path| {
        let absolute: Vec<&str> = path.split(':').filter(|dir| dir.starts_with('/')).collect();
        absolute.join(":")
    });
    [
        (
            "PATH",
            path.filter(|path| !path.is_empty())
                .unwrap_or_else(|| DEFAULT_PATH.to_owned()),
        ),
        ("HOME", given("HOME").unwrap_or_else(|| "/".to_owned())),
        ("LANG", "C".to_owned()),
        ("LC_ALL", "C".to_owned()),
    ]
}

fn run(argv: &[String], timeout: Duration) -> Ran {
    let mut ran = Ran {
        argv: argv.to_vec(),
        ..Ran::default()
    };
    let Some((program, args)) = argv.split_first() else {
        ran.problem = Some("could not be run: no command".to_owned());
        return ran;
    };
    // Anonymous files need no draining, and a daemon the command leaves
    // holding one holds up nobody.
    let files = tempfile::tempfile().and_then(|out| Ok((out, tempfile::tempfile()?)));
    let (mut out, mut err) = match files {
        Ok(files) => files,
        Err(e) => {
            ran.problem = Some(format!("could not be run: {}", strerror(&e)));
            return ran;
        }
    };
    let mut command = Command::new(program);
    command
        .args(args)
        .stdin(Stdio::null())
        .current_dir("/")
        .env_clear()
        .envs(command_env())
        // Its own group, so that a timeout ends the helpers it started
        // (mount.nfs...) too.
        .process_group(0);
    let spawned = out
        .try_clone()
        .and_then(|o| Ok((o, err.try_clone()?)))
        .and_then(|(o, e)| command.stdout(o).stderr(e).spawn());
    let mut child = match spawned {
        Ok(child) => child,
        Err(e) => {
            ran.problem = Some(format!("could not be run: {}", strerror(&e)));
            return ran;
        }
    };
    // Dropped so that the command's copies are the only ones writing.
    drop(command);
    let pid = child.id() as libc::pid_t;
    let (sender, receiver) = mpsc::channel();
    let waiter = std::thread::spawn(move || {
        let _ = sender.send(child.wait());
    });
    let waited = match receiver.recv_timeout(timeout) {
        Ok(waited) => Some(waited),
        Err(_) => {
            // SAFETY: kill(2) takes plain integers. The child is not
            // reaped until the waiter's wait returns, so its pid, which
            // leads its group, still names it.
            unsafe {
                libc::kill(-pid, libc::SIGKILL);
            }
            let _ = receiver.recv();
            ran.problem = Some(format!(
                "did not finish within {}s",
                py_float(timeout.as_secs_f64())
            ));
            None
        }
    };
    let _ = waiter.join();
    match waited {
        Some(Ok(status)) => match (status.code(), status.signal()) {
            (Some(code), _) => ran.status = Some(code),
            (None, Some(signal)) => ran.problem = Some(format!("was killed by signal {signal}")),
            (None, None) => ran.problem = Some("ended without a status".to_owned()),
        },
        Some(Err(e)) => ran.problem = Some(format!("could not be waited for: {}", strerror(&e))),
        None => {}
    }
    ran.stdout = read_back(&mut out);
    ran.stderr = read_back(&mut err);
    ran
}

/// The last [`TAIL_BYTES`] written to `file`, as text.
fn read_back(file: &mut File) -> String {
    let mut data = Vec::new();
    let read = file.seek(SeekFrom::End(0)).and_then(|size| {
        file.seek(SeekFrom::Start(size.saturating_sub(TAIL_BYTES)))?;
        file.read_to_end(&mut data)
    });
    if read.is_err() {
        data.clear();
    }
    String::from_utf8_lossy(&data).into_owned()
}

/// A number of seconds as Python's `%g` writes it (`120`, `0.5`).
fn py_float(secs: f64) -> String {
    let text = format!("{secs}");
    text.strip_suffix(".0").map(str::to_owned).unwrap_or(text)
}

/// Python's `str.isspace`: Unicode white space and the information
/// separators.
fn is_space(c: char) -> bool {
    c.is_whitespace() || ('\x1c'..='\x1f').contains(&c)
}

/// Python's `str.splitlines`: lines split at every line boundary it
/// knows, without their ends.
fn py_splitlines(text: &str) -> Vec<&str> {
    let is_break = |c: char| {
        matches!(
            c,
            '\n' | '\r'
                | '\x0b'
                | '\x0c'
                | '\x1c'
                | '\x1d'
                | '\x1e'
                | '\u{85}'
                | '\u{2028}'
                | '\u{2029}'
        )
    };
    let mut lines = Vec::new();
    let mut start = 0;
    let mut chars = text.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        if !is_break(c) {
            continue;
        }
        lines.push(&text[start..at]);
        start = at + c.len_utf8();
        if c == '\r' {
            if let Some(&(next, '\n')) = chars.peek() {
                chars.next();
                start = next + 1;
            }
        }
    }
    if start < text.len() {
        lines.push(&text[start..]);
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_split_as_python_splits_them() {
        assert_eq!(py_splitlines("a\nb\r\nc\rd\n"), ["a", "b", "c", "d"]);
        assert_eq!(py_splitlines("a\n\nb"), ["a", "", "b"]);
        assert!(py_splitlines("").is_empty());
    }

    #[test]
    fn a_failure_quotes_the_last_lines_of_stderr_else_stdout() {
        let mut ran = Ran {
            argv: vec!["mount".into(), "/mnt/my disk".into()],
            status: Some(32),
            stdout: "out\n".into(),
            ..Ran::default()
        };
        assert_eq!(
            ran.failure(),
            "mount '/mnt/my disk' failed (exit status 32):\nout"
        );
        ran.stderr = (1..=7).map(|n| format!(" e{n} \n\n")).collect();
        assert_eq!(
            ran.failure(),
            "mount '/mnt/my disk' failed (exit status 32):\ne3\ne4\ne5\ne6\ne7"
        );
        ran.stdout.clear();
        ran.stderr.clear();
        ran.status = None;
        ran.problem = Some("did not finish within 120s".into());
        assert_eq!(
            ran.failure(),
            "mount '/mnt/my disk' failed (did not finish within 120s) (no output)"
        );
    }

    fn log() -> (Log, std::sync::Arc<std::sync::Mutex<Vec<u8>>>) {
        #[derive(Clone)]
        struct Shared(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);
        impl std::io::Write for Shared {
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(buf);
                Ok(buf.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let shared = Shared(Default::default());
        (Log::new(Box::new(shared.clone()), false), shared.0)
    }

    #[test]
    fn noop_runs_nothing_and_says_what_would_have_run() {
        let (log, said) = log();
        let argv = vec!["/nonexistent/mount".to_owned(), "/srv".to_owned()];
        assert_eq!(change(&log, true, &argv, Duration::from_secs(1)), None);
        assert_eq!(
            String::from_utf8(said.lock().unwrap().clone()).unwrap(),
            "info: noop: would run /nonexistent/mount /srv\n"
        );
    }

    #[test]
    fn commands_run_with_a_scrubbed_environment_and_their_output_kept() {
        let (log, said) = log();
        let argv: Vec<String> = ["sh", "-c", "env | sort; pwd; echo oops >&2; exit 3"]
            .map(String::from)
            .to_vec();
        let ran = change(&log, false, &argv, Duration::from_secs(30)).unwrap();
        assert_eq!(ran.status, Some(3));
        assert!(!ran.ok());
        assert_eq!(ran.stderr, "oops\n");
        let names: Vec<&str> = ran
            .stdout
            .lines()
            .filter_map(|line| line.split_once('=').map(|(key, _)| key))
            .collect();
        // sh itself adds PWD (and some add SHLVL and _).
        for name in &names {
            assert!(
                ["HOME", "LANG", "LC_ALL", "PATH", "PWD", "SHLVL", "_"].contains(name),
                "{name} leaked into {names:?}"
            );
        }
        assert!(ran.stdout.contains("LC_ALL=C\n"));
        assert!(ran.stdout.ends_with("\n/\n"), "runs in /: {}", ran.stdout);
        let said = String::from_utf8(said.lock().unwrap().clone()).unwrap();
        assert!(said.starts_with("debug: running sh -c "), "{said}");
        assert!(said.contains("debug: sh: LC_ALL=C\n"), "{said}");
        assert!(!said.contains("sh: oops"), "stderr is not logged: {said}");
    }

    #[test]
    fn a_command_past_its_time_is_killed_with_its_group() {
        let argv: Vec<String> = ["sh", "-c", "sleep 30 & sleep 30; echo late"]
            .map(String::from)
            .to_vec();
        let started = std::time::Instant::now();
        let ran = run(&argv, Duration::from_millis(200));
        assert!(started.elapsed() < Duration::from_secs(20));
        assert_eq!(ran.status, None);
        assert_eq!(ran.problem.as_deref(), Some("did not finish within 0.2s"));
        let missing = run(&["/nonexistent/mount".to_owned()], Duration::from_secs(1));
        assert_eq!(
            missing.problem.as_deref(),
            Some("could not be run: No such file or directory")
        );
    }
}
