//! Running mount(8) and umount(8) for `mount::fstab` the way the Python
//! toolkit's `Commands.change` ran them: argv only (never a shell), stdin
//! from /dev/null, `/` as the working directory, a scrubbed environment
//! (PATH and HOME as given, the C locale) and a time limit; under noop
//! nothing runs and a log line says what would have. The call's runner of
//! commands runs them (`sdk::command`): served inside ralsh, the host's,
//! so that its sweeps of what calls leave behind know them.

use std::time::Duration;

use crate::text::{clean, join_words};
use crate::Call;

/// PATH for a command when the provider was given none.
const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
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
/// returns `None`), through the call's runner of commands. Its stderr is
/// kept for the caller, not logged.
pub fn change(call: &Call, argv: &[String], timeout: Duration) -> Option<Ran> {
    let log = &call.log;
    if call.noop {
        log.info(&format!("noop: would run {}", shown_command(argv)));
        return None;
    }
    log.debug(&format!("running {}", shown_command(argv)));
    let finished = call.commands.run(argv, &command_env(call), timeout);
    let ran = Ran {
        argv: argv.to_vec(),
        status: finished.status,
        problem: finished.problem,
        stdout: String::from_utf8_lossy(&finished.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&finished.stderr).into_owned(),
    };
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

/// The scrubbed environment of commands, from the provider's: PATH
/// without relative entries, HOME, the C locale.
fn command_env(call: &Call) -> Vec<(String, String)> {
    let given = |key: &str| call.var(key).filter(|value| !value.is_empty());
    let path = given("PATH").map(|path| {
        let absolute: Vec<&str> = path.split(':').filter(|dir| dir.starts_with('/')).collect();
        absolute.join(":")
    });
    vec![
        (
            "PATH".to_owned(),
            path.filter(|path| !path.is_empty())
                .unwrap_or_else(|| DEFAULT_PATH.to_owned()),
        ),
        ("HOME".to_owned(), given("HOME").unwrap_or("/").to_owned()),
        ("LANG".to_owned(), "C".to_owned()),
        ("LC_ALL".to_owned(), "C".to_owned()),
    ]
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

    fn call(noop: bool) -> (Call, crate::Buffer) {
        let shared = crate::Buffer::default();
        let log = crate::Log::new(Box::new(shared.clone()), noop);
        let mut call = Call::new("/", noop, log);
        call.env = std::env::vars().collect();
        (call, shared)
    }

    #[test]
    fn noop_runs_nothing_and_says_what_would_have_run() {
        let (call, said) = call(true);
        let argv = vec!["/nonexistent/mount".to_owned(), "/srv".to_owned()];
        assert_eq!(change(&call, &argv, Duration::from_secs(1)), None);
        assert_eq!(
            said.text(),
            "info: noop: would run /nonexistent/mount /srv\n"
        );
    }

    #[test]
    fn commands_run_with_a_scrubbed_environment_and_their_output_kept() {
        let (call, said) = call(false);
        let argv: Vec<String> = ["sh", "-c", "env | sort; pwd; echo oops >&2; exit 3"]
            .map(String::from)
            .to_vec();
        let ran = change(&call, &argv, Duration::from_secs(30)).unwrap();
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
        let said = said.text();
        assert!(said.starts_with("debug: running sh -c "), "{said}");
        assert!(said.contains("debug: sh: LC_ALL=C\n"), "{said}");
        assert!(!said.contains("sh: oops"), "stderr is not logged: {said}");
    }

    #[test]
    fn only_a_command_that_exits_0_is_ok() {
        // A mount that worked must not be reported as failed: only exit 0
        // is success.
        let (call, _) = call(false);
        let run = |script: &str| {
            let argv: Vec<String> = ["sh", "-c", script].map(String::from).to_vec();
            change(&call, &argv, Duration::from_secs(30)).unwrap()
        };
        assert!(run("exit 0").ok());
        assert!(!run("exit 1").ok());
    }

    /// The value of `key` in a command's environment.
    fn value<'a>(env: &'a [(String, String)], key: &str) -> Option<&'a str> {
        env.iter()
            .find(|(k, _)| k == key)
            .map(|(_, value)| value.as_str())
    }

    /// A command gets the caller's PATH without its relative entries
    /// (looked up from `/`, they would name other programs) and the
    /// caller's HOME; without them, the default PATH and `/`.
    #[test]
    fn commands_get_the_callers_absolute_path_and_home() {
        let (mut call, _) = call(false);
        call.env = vec![
            (
                "PATH".to_owned(),
                "bin:/opt/tools/bin:.:/usr/bin".to_owned(),
            ),
            ("HOME".to_owned(), "/home/ops".to_owned()),
        ];
        let env = command_env(&call);
        assert_eq!(value(&env, "PATH"), Some("/opt/tools/bin:/usr/bin"));
        assert_eq!(value(&env, "HOME"), Some("/home/ops"));
        call.env = vec![
            ("PATH".to_owned(), "bin:.".to_owned()),
            ("HOME".to_owned(), String::new()),
        ];
        let env = command_env(&call);
        assert_eq!(value(&env, "PATH"), Some(DEFAULT_PATH));
        assert_eq!(value(&env, "HOME"), Some("/"));
    }

    #[test]
    fn a_command_past_its_time_is_killed_with_its_group() {
        let argv: Vec<String> = ["sh", "-c", "sleep 30 & sleep 30; echo late"]
            .map(String::from)
            .to_vec();
        use crate::command::{Commands, Direct};
        let (call, _) = call(false);
        let env = command_env(&call);
        let run = |argv: &[String], timeout| Direct.run(argv, &env, timeout);
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
