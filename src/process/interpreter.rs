//! Scripts started through `#!/usr/bin/env NAME`, with NAME's program
//! found once per run instead of once per call. `env` looks NAME up on
//! PATH at every start, and where NAME on PATH is a version manager's shim
//! (pyenv, asdf: a shell script that finds the real interpreter), every
//! call also pays the shim. Here NAME is looked up on the call's own PATH
//! once, a Python that is a script there (a shim) is asked once for its
//! real executable, and the script is started as the kernel would start
//! it: `PROGRAM ARGS... SCRIPT CALL-ARGS...`. The first script of a NAME
//! starts as before: finding the program may cost a start of the
//! interpreter, which only a run of several calls wins back.
//!
//! Only the plain forms are taken over: `#!/usr/bin/env NAME` and
//! `#!/usr/bin/env -S NAME WORD...` with words free of quotes, escapes and
//! `$` (which `env -S` would interpret). Anything else, or a NAME not
//! found, starts the script as before, and the kernel and `env` decide.
//!
//! The runner starts every script through [`launch`], so a Python is
//! asked where it is through the [`Ask`] the runner hands in, never by
//! naming the runner here.

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

/// The most of a script's first line read to find its interpreter.
const FIRST_LINE: usize = 256;
/// How long a Python may take to say where it is.
const ASK_LIMIT: Duration = Duration::from_secs(30);

/// How to start a script: its interpreter, then these words, then the
/// script and its arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Launch {
    pub program: PathBuf,
    pub words: Vec<OsString>,
}

/// A question put to a program: run with these arguments and this
/// environment, within `limit`.
pub struct Question<'a> {
    /// Names the program in errors and log lines.
    pub label: &'a str,
    pub program: &'a Path,
    pub args: &'a [OsString],
    pub env: &'a [(OsString, OsString)],
    pub limit: Duration,
}

/// Puts a [`Question`] to a program: what it wrote on stdout when it
/// exited 0, `None` when it failed. The one runner's, handed in by it.
pub type Ask = fn(&Question) -> Option<Vec<u8>>;

/// What is known of (NAME, PATH) in this process.
#[derive(Clone)]
enum Known {
    /// One script of it started as it is: a run of one call pays nothing
    /// more than before.
    Started,
    /// The program found for it, or none.
    Found(Option<PathBuf>),
}

type Found = HashMap<(OsString, OsString), Known>;
static FOUND: Mutex<Option<Found>> = Mutex::new(None);

/// How to start `script` with the environment `env` without `env` or a
/// shim in between, when its first line says `#!/usr/bin/env NAME ...`
/// and NAME is found; `None` to start it as it is.
pub fn launch(script: &Path, env: &[(OsString, OsString)], ask: Ask) -> Option<Launch> {
    // What the kernel would refuse to start stays refused the same way.
    let executable =
        std::fs::metadata(script).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0);
    if !executable {
        return None;
    }
    let (name, words) = env_shebang(&first_line(script)?)?;
    let program = found(&name, &path_of(env), env, false, ask)?;
    Some(Launch { program, words })
}

/// One interpreter the scripts of a run start with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Used {
    /// NAME, as `#!/usr/bin/env NAME` gives it.
    pub name: String,
    /// The program found for it.
    pub program: PathBuf,
    /// NAME's program on PATH, when it is not `program` (a shim).
    pub shim: Option<PathBuf>,
    /// How many of the scripts start with it.
    pub scripts: usize,
}

/// The interpreters `scripts` start with, each once, in order of first use.
pub fn used<'a>(
    scripts: impl IntoIterator<Item = &'a Path>,
    env: &[(OsString, OsString)],
    ask: Ask,
) -> Vec<Used> {
    let mut all: Vec<Used> = Vec::new();
    for script in scripts {
        let Some((name, program, listed)) = interpreter_of(script, env, ask) else {
            continue;
        };
        let name = name.to_string_lossy().into_owned();
        match all
            .iter_mut()
            .find(|u| u.name == name && u.program == program)
        {
            Some(used) => used.scripts += 1,
            None => all.push(Used {
                name,
                shim: listed.filter(|listed| *listed != program),
                program,
                scripts: 1,
            }),
        }
    }
    all
}

/// The interpreter `script` starts with through `#!/usr/bin/env NAME`:
/// NAME, the program found for it, and NAME's program on PATH (the same,
/// or the shim that led to it); `None` when it starts otherwise.
pub fn interpreter_of(
    script: &Path,
    env: &[(OsString, OsString)],
    ask: Ask,
) -> Option<(OsString, PathBuf, Option<PathBuf>)> {
    let (name, _) = env_shebang(&first_line(script)?)?;
    let path = path_of(env);
    let program = found(&name, &path, env, true, ask)?;
    let listed = on_path(&name, &path);
    Some((name, program, listed))
}

fn path_of(env: &[(OsString, OsString)]) -> OsString {
    env.iter()
        .find(|(key, _)| key == "PATH")
        .map_or_else(|| OsString::from("/usr/bin:/bin"), |(_, v)| v.clone())
}

/// The first line of `script` (without its newline), if it starts `#!`
/// and fits in [`FIRST_LINE`] bytes.
fn first_line(script: &Path) -> Option<Vec<u8>> {
    let mut head = Vec::with_capacity(FIRST_LINE);
    std::fs::File::open(script)
        .ok()?
        .take(FIRST_LINE as u64)
        .read_to_end(&mut head)
        .ok()?;
    let end = head.iter().position(|&b| b == b'\n')?;
    head.truncate(end);
    head.starts_with(b"#!").then_some(head)
}

/// NAME and the words after it, from `#!/usr/bin/env NAME` or
/// `#!/usr/bin/env -S NAME WORD...`.
fn env_shebang(line: &[u8]) -> Option<(OsString, Vec<OsString>)> {
    let text = std::str::from_utf8(&line[2..]).ok()?;
    let mut tokens = text.split_ascii_whitespace();
    if !matches!(tokens.next()?, "/usr/bin/env" | "/bin/env") {
        return None;
    }
    let rest: Vec<&str> = tokens.collect();
    let words: &[&str] = match rest.as_slice() {
        ["-S", words @ ..] => words,
        // Without -S the kernel hands `env` the rest as one word.
        [one] => std::slice::from_ref(one),
        _ => return None,
    };
    let (name, words) = words.split_first()?;
    let plain_name = !name.is_empty() && !name.starts_with('-') && !name.contains(['/', '=']);
    let plain_words = words
        .iter()
        .all(|w| !w.contains(['\\', '$', '\'', '"', '#']));
    (plain_name && plain_words).then(|| {
        (
            OsString::from(name),
            words.iter().map(OsString::from).collect(),
        )
    })
}

/// NAME's program under `path`, found once per process, from its second
/// use on (or at once with `now`): finding it may cost a start of the
/// interpreter, which only a run of several calls wins back.
fn found(
    name: &OsStr,
    path: &OsStr,
    env: &[(OsString, OsString)],
    now: bool,
    ask: Ask,
) -> Option<PathBuf> {
    let key = (name.to_owned(), path.to_owned());
    {
        let mut found = FOUND.lock().unwrap_or_else(|e| e.into_inner());
        let found = found.get_or_insert_with(HashMap::new);
        match found.get(&key) {
            Some(Known::Found(program)) => return program.clone(),
            Some(Known::Started) => {}
            None if now => {}
            None => {
                found.insert(key, Known::Started);
                return None;
            }
        }
    }
    // Looked up outside the lock: asking a Python may take a moment.
    let program = on_path(name, path).map(|program| {
        // A Python on PATH that is a script (a shim) is asked where the
        // real one is; a program there is taken as it is.
        let real = if name.as_bytes().starts_with(b"python") && !is_binary(&program) {
            real_python(&program, env, ask)
        } else {
            None
        };
        match real {
            Some(real) => {
                log::info!(
                    "{} is {} (found on PATH as {}; asked once for this run)",
                    name.to_string_lossy(),
                    real.display(),
                    program.display()
                );
                real
            }
            None => {
                log::info!(
                    "{} is {} (found on PATH once for this run)",
                    name.to_string_lossy(),
                    program.display()
                );
                program
            }
        }
    });
    FOUND
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get_or_insert_with(HashMap::new)
        .insert(key, Known::Found(program.clone()));
    program
}

/// Whether `program` is a compiled program (ELF), not a script.
fn is_binary(program: &Path) -> bool {
    let mut magic = [0u8; 4];
    std::fs::File::open(program)
        .and_then(|mut f| f.read_exact(&mut magic))
        .is_ok_and(|()| magic == *b"\x7fELF")
}

/// The first executable file named `name` in the directories of `path`.
fn on_path(name: &OsStr, path: &OsStr) -> Option<PathBuf> {
    std::env::split_paths(path)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(name))
        .find(|candidate| {
            std::fs::metadata(candidate)
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// Where the Python started as `program` really is (`sys.executable`),
/// when it says so plainly: a shim's real interpreter.
fn real_python(program: &Path, env: &[(OsString, OsString)], ask: Ask) -> Option<PathBuf> {
    let args: Vec<OsString> = [
        "-I",
        "-S",
        "-c",
        "import sys; sys.stdout.write(sys.executable)",
    ]
    .iter()
    .map(OsString::from)
    .collect();
    let said = ask(&Question {
        label: "python3",
        program,
        args: &args,
        env,
        limit: ASK_LIMIT,
    })?;
    let real = PathBuf::from(OsStr::from_bytes(said.trim_ascii()));
    let executable =
        std::fs::metadata(&real).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0);
    (real.is_absolute() && executable).then_some(real)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(line: &str) -> Option<(String, Vec<String>)> {
        env_shebang(line.as_bytes()).map(|(name, words)| {
            (
                name.to_string_lossy().into_owned(),
                words
                    .iter()
                    .map(|w| w.to_string_lossy().into_owned())
                    .collect(),
            )
        })
    }

    #[test]
    fn the_plain_env_forms_are_taken_and_nothing_else() {
        assert_eq!(
            parsed("#!/usr/bin/env -S python3 -I -S"),
            Some(("python3".to_owned(), vec!["-I".to_owned(), "-S".to_owned()]))
        );
        assert_eq!(
            parsed("#!/usr/bin/env python3"),
            Some(("python3".to_owned(), vec![]))
        );
        assert_eq!(
            parsed("#! /bin/env bash"),
            Some(("bash".to_owned(), vec![]))
        );
        for other in [
            "#!/bin/sh",
            "#!/usr/bin/python3",
            "#!/usr/bin/env -i python3",
            "#!/usr/bin/env -S VAR=1 python3",
            "#!/usr/bin/env -S python3 -c 'x'",
            "#!/usr/bin/env -S python3 ${HOME}",
            "#!/usr/bin/env python3 -I",
            "#!/usr/bin/env ./local",
            "#!/usr/bin/env",
        ] {
            assert_eq!(parsed(other), None, "{other}");
        }
    }
}
