//! Test helpers: a sandbox (fake root and private cache), a way to run
//! ralsh in it, and JSON Schema checks of its output.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

use serde_json::Value as Json;

/// Account files of root and alice (uid and gid 1000, a member of staff,
/// gid 50), for the tests of the user and group types.
pub const PASSWD: &str =
    "root:x:0:0:root:/root:/bin/bash\nalice:x:1000:1000::/home/alice:/bin/sh\n";
pub const SHADOW: &str = "root:*:19700:0:99999:7:::\nalice:!:19700:0:99999:7:::\n";
pub const GROUP: &str = "root:x:0:\nstaff:x:50:alice\nalice:x:1000:\n";
pub const GSHADOW: &str = "root:*::\nstaff:!::alice\nalice:!::\n";

/// A sandbox holding [`PASSWD`], [`SHADOW`], [`GROUP`] and [`GSHADOW`].
pub fn accounts_sandbox() -> Sandbox {
    let sandbox = Sandbox::new();
    sandbox.write("etc/passwd", PASSWD);
    sandbox.write("etc/shadow", SHADOW);
    sandbox.write("etc/group", GROUP);
    sandbox.write("etc/gshadow", GSHADOW);
    sandbox
}

/// A fake root for providers and a private cache for the bundled ones.
pub struct Sandbox {
    pub root: tempfile::TempDir,
    pub cache: tempfile::TempDir,
    _watch: watchdog::Watch,
}

/// What one ralsh run left behind.
#[derive(Debug)]
pub struct Run {
    pub status: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// Parses stdout as one JSON document and checks it against the schema.
    pub fn json(&self) -> Json {
        let doc: Json = serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not JSON ({e}):\n{}", self.stdout));
        assert_valid_output(&doc);
        doc
    }

    #[track_caller]
    pub fn stderr_has(&self, needle: &str) -> &Run {
        assert!(
            self.stderr.contains(needle),
            "stderr lacks {needle:?}:\n{}",
            self.stderr
        );
        self
    }

    #[track_caller]
    pub fn stdout_has(&self, needle: &str) -> &Run {
        assert!(
            self.stdout.contains(needle),
            "stdout lacks {needle:?}:\n{}",
            self.stdout
        );
        self
    }

    #[track_caller]
    pub fn stdout_lacks(&self, needle: &str) -> &Run {
        assert!(
            !self.stdout.contains(needle),
            "stdout holds {needle:?}:\n{}",
            self.stdout
        );
        self
    }

    #[track_caller]
    pub fn expect(&self, status: i32) -> &Run {
        assert_eq!(
            self.status, status,
            "unexpected exit status\nstdout:\n{}\nstderr:\n{}",
            self.stdout, self.stderr
        );
        self
    }
}

pub fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

pub fn ralsh_bin() -> &'static str {
    env!("CARGO_BIN_EXE_ralsh")
}

impl Sandbox {
    pub fn new() -> Sandbox {
        Sandbox {
            root: tempfile::tempdir().unwrap(),
            cache: tempfile::tempdir().unwrap(),
            _watch: watchdog::Watch::start(),
        }
    }

    /// A sandbox whose root is a copy of tests/fixtures/seed.
    pub fn seeded() -> Sandbox {
        let sandbox = Sandbox::new();
        let status = Command::new("cp")
            .arg("-a")
            .arg(fixtures_dir().join("seed/."))
            .arg(sandbox.root())
            .status()
            .unwrap();
        assert!(status.success());
        sandbox
    }

    pub fn root(&self) -> &Path {
        self.root.path()
    }

    /// A ralsh command with a clean environment, this sandbox's cache and
    /// root, and no data directories beyond the bundled one.
    pub fn command(&self) -> Command {
        let mut command = Command::new(ralsh_bin());
        command
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.cache.path())
            .env("XDG_CACHE_HOME", self.cache.path())
            .arg("--root")
            .arg(self.root.path());
        command
    }

    /// `ralsh -j TYPE --attrs-stdin -- NAME` (the bundled providers) with
    /// `attrs` as its JSON input, each value a string. A ralsh that ends
    /// before it reads its input is no failure of the test's.
    pub fn ralsh_attrs_stdin(&self, type_name: &str, name: &str, attrs: &[(&str, String)]) -> Run {
        use std::io::Write;
        let input: serde_json::Map<String, Json> = attrs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), Json::from(v.as_str())))
            .collect();
        let mut child = self
            .command()
            .args(["-j", type_name, "--attrs-stdin", "--", name])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let input = Json::Object(input).to_string();
        let written = child.stdin.take().unwrap().write_all(input.as_bytes());
        if let Err(err) = written {
            assert_eq!(
                err.kind(),
                std::io::ErrorKind::BrokenPipe,
                "writing ralsh's input: {err}"
            );
        }
        run_output(child.wait_with_output().unwrap())
    }

    /// A ralsh command with the fixture providers and these arguments.
    pub fn fixture_command(&self, args: &[&str]) -> Command {
        let mut command = self.command();
        command.arg("-I").arg(fixtures_dir()).args(args);
        command
    }

    /// Runs ralsh with the fixture providers.
    pub fn ralsh(&self, args: &[&str]) -> Run {
        run(&mut self.fixture_command(args))
    }

    /// Runs ralsh with the fixture providers and those of `data`.
    pub fn ralsh_in(&self, data: &Path, args: &[&str]) -> Run {
        run(self.fixture_command(&[]).arg("-I").arg(data).args(args))
    }

    /// A ralsh command with the providers of `data` and the bundled ones
    /// (no fixtures).
    pub fn command_in(&self, data: &Path, args: &[&str]) -> Command {
        let mut command = self.command();
        command.arg("-I").arg(data).args(args);
        command
    }

    /// Runs ralsh with the bundled providers only.
    pub fn ralsh_bundled(&self, args: &[&str]) -> Run {
        run(self.command().args(args))
    }

    /// Writes a file below the fake root.
    pub fn write(&self, relative: &str, contents: &str) {
        let path = self.root.path().join(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, contents).unwrap();
    }

    /// The account files with root only (and the `users` group).
    pub fn write_accounts(&self) {
        self.write("etc/passwd", "root:x:0:0:root:/root:/bin/bash\n");
        self.write("etc/shadow", "root:*:19700:0:99999:7:::\n");
        self.write("etc/group", "root:x:0:\nusers:x:100:\n");
        self.write("etc/gshadow", "root:*::\nusers:!::\n");
    }

    /// Reads a file below the fake root ("" when missing).
    pub fn read(&self, relative: &str) -> String {
        std::fs::read_to_string(self.root.path().join(relative)).unwrap_or_default()
    }

    /// The names in a directory below the fake root, sorted.
    pub fn names_in_dir(&self, relative: &str) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(self.root.path().join(relative))
            .unwrap()
            .map(|entry| entry.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        names
    }

    /// `ral SUBCOMMAND --root ROOT ARGS...` with the same clean
    /// environment as [`Sandbox::command`].
    pub fn ral_command(&self, subcommand: &str, args: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_ral"));
        command
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.cache.path())
            .env("XDG_CACHE_HOME", self.cache.path())
            .arg(subcommand)
            .arg("--root")
            .arg(self.root.path())
            .args(args);
        command
    }

    /// The calls the scripted fixture recorded, one line each.
    pub fn calls(&self) -> Vec<String> {
        self.read("calls.log").lines().map(str::to_owned).collect()
    }
}

/// Opens the FIFO `path` for reading (or writing, with `write`) as
/// `File::open` does, which waits for a process to open its other end;
/// fails after a minute instead of waiting forever when that process died
/// first.
pub fn open_fifo(path: &Path, write: bool) -> std::fs::File {
    use std::os::unix::fs::OpenOptionsExt;
    let (sender, receiver) = std::sync::mpsc::channel();
    let owned = path.to_owned();
    std::thread::spawn(move || {
        let opened = std::fs::OpenOptions::new()
            .read(!write)
            .write(write)
            .open(owned);
        let _ = sender.send(opened);
    });
    match receiver.recv_timeout(std::time::Duration::from_secs(60)) {
        Ok(opened) => opened.unwrap(),
        Err(_) => {
            // The other end of our own lets the waiting open go.
            let _partner = std::fs::OpenOptions::new()
                .read(write)
                .write(!write)
                .custom_flags(libc::O_NONBLOCK)
                .open(path);
            panic!(
                "{}: no process opened the other end of the FIFO within a minute",
                path.display()
            );
        }
    }
}

/// Writes `line` to the FIFO `path` once a reader has it open, or not at
/// all when `child` ended first (whose provider would have read it): the
/// open never waits for a reader that will never come.
pub fn write_fifo_while_running(path: &Path, line: &[u8], child: &mut std::process::Child) {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let opened = std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(path);
        match opened {
            Ok(mut fifo) => {
                let _ = fifo.write_all(line);
                return;
            }
            // No reader yet.
            Err(e) if e.raw_os_error() == Some(libc::ENXIO) => {
                if child.try_wait().unwrap().is_some() {
                    return;
                }
                assert!(
                    std::time::Instant::now() < deadline,
                    "{}: no reader opened the FIFO within a minute",
                    path.display()
                );
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            Err(e) => panic!("{}: {e}", path.display()),
        }
    }
}

/// Runs COMMAND with INPUT on its stdin.
pub fn run_with_stdin(command: &mut std::process::Command, input: &str) -> Run {
    use std::io::Write;
    use std::process::Stdio;
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    Run {
        status: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8(output.stdout).unwrap(),
        stderr: String::from_utf8(output.stderr).unwrap(),
    }
}

pub fn run(command: &mut Command) -> Run {
    run_output(command.output().expect("ralsh runs"))
}

/// What a finished ralsh's output says.
fn run_output(output: Output) -> Run {
    let Output {
        status,
        stdout,
        stderr,
    } = output;
    Run {
        status: status.code().unwrap_or(-1),
        stdout: String::from_utf8(stdout).expect("stdout is UTF-8"),
        stderr: String::from_utf8(stderr).expect("stderr is UTF-8"),
    }
}

fn load_schema(name: &str) -> jsonschema::Validator {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("schemas")
        .join(name);
    let schema: Json = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    jsonschema::validator_for(&schema).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

pub fn output_schema() -> &'static jsonschema::Validator {
    static SCHEMA: OnceLock<jsonschema::Validator> = OnceLock::new();
    SCHEMA.get_or_init(|| load_schema("ralsh-output.schema.json"))
}

pub fn plan_schema() -> &'static jsonschema::Validator {
    static SCHEMA: OnceLock<jsonschema::Validator> = OnceLock::new();
    SCHEMA.get_or_init(|| load_schema("ral-plan.schema.json"))
}

pub fn metadata_schema() -> &'static jsonschema::Validator {
    static SCHEMA: OnceLock<jsonschema::Validator> = OnceLock::new();
    SCHEMA.get_or_init(|| load_schema("provider-metadata.schema.json"))
}

/// Every entry below `root` by relative path: its type and mode, and a
/// file's bytes or a link's target. Equal snapshots mean byte-identical
/// trees.
pub fn tree_snapshot(root: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    use std::os::unix::fs::PermissionsExt;
    let mut entries = BTreeMap::new();
    let mut pending = vec![root.to_owned()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            let mode = meta.permissions().mode();
            let what = if meta.is_symlink() {
                format!("link {}", std::fs::read_link(&path).unwrap().display()).into_bytes()
            } else if meta.is_dir() {
                pending.push(path.clone());
                format!("dir {mode:o}").into_bytes()
            } else {
                let mut what = format!("file {mode:o}\n").into_bytes();
                what.extend(std::fs::read(&path).unwrap());
                what
            };
            entries.insert(path.strip_prefix(root).unwrap().to_owned(), what);
        }
    }
    entries
}

/// Fails naming every path whose entry differs from `before` (a
/// [`tree_snapshot`]) under the root now.
#[track_caller]
pub fn assert_same_tree(before: &BTreeMap<PathBuf, Vec<u8>>, root: &Path, what: &str) {
    let after = tree_snapshot(root);
    let changed: Vec<_> = before
        .keys()
        .chain(after.keys())
        .filter(|path| before.get(*path) != after.get(*path))
        .collect();
    assert!(changed.is_empty(), "{what} changed {changed:?}");
}

/// The `name` of every object in a JSON array (resources, providers).
#[track_caller]
pub fn names_in(list: &Json) -> Vec<&str> {
    list.as_array()
        .expect("a JSON array")
        .iter()
        .map(|item| item["name"].as_str().expect("a name"))
        .collect()
}

#[track_caller]
pub fn assert_valid_output(doc: &Json) {
    let errors: Vec<String> = output_schema()
        .iter_errors(doc)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "output does not match the schema: {errors:?}\n{doc}"
    );
}

/// A ralsh command like [`Sandbox::command`] but without `--root`.
pub fn run_command_without_root(sandbox: &Sandbox) -> Command {
    let mut command = Command::new(ralsh_bin());
    command
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("XDG_CACHE_HOME", sandbox.cache.path());
    command
}

/// Whether `pwck -r -q` and `grpck -r` accept the files below `root`, when
/// they can run here (they chroot, which needs root); `None` otherwise.
pub fn shadow_tools_accept(root: &Path) -> Option<bool> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return None;
    }
    let check = |tool: &str, args: &[&str]| {
        let path = Path::new("/usr/sbin").join(tool);
        path.exists().then(|| {
            Command::new(path)
                .args(args)
                .arg("-R")
                .arg(root)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .unwrap()
                .success()
        })
    };
    Some(check("pwck", &["-r", "-q"])? && check("grpck", &["-r"])?)
}

/// A guard against a test that never ends. Every sandbox is watched while
/// it lives; when one has lived longer than `RAL_TEST_HANG_SECONDS` (20
/// minutes by default, many times the slowest test), the test binary
/// takes its test as hung: it names the test and the processes the tests
/// started, kills those, and exits with status 3. A hang then fails the
/// run with a name instead of holding CI until its time is up.
mod watchdog {
    use std::sync::{Mutex, Once};
    use std::time::{Duration, Instant};

    static WATCHED: Mutex<Vec<(u64, String, Instant)>> = Mutex::new(Vec::new());
    static START: Once = Once::new();

    pub struct Watch(u64);

    impl Watch {
        pub fn start() -> Watch {
            START.call_once(|| {
                std::thread::spawn(watch);
            });
            static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
            let id = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let name = std::thread::current()
                .name()
                .unwrap_or("(unnamed)")
                .to_owned();
            let mut watched = WATCHED.lock().unwrap_or_else(|e| e.into_inner());
            watched.push((id, name, Instant::now()));
            Watch(id)
        }
    }

    impl Drop for Watch {
        fn drop(&mut self) {
            let mut watched = WATCHED.lock().unwrap_or_else(|e| e.into_inner());
            watched.retain(|(id, _, _)| *id != self.0);
        }
    }

    fn limit() -> Duration {
        let seconds = std::env::var("RAL_TEST_HANG_SECONDS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(1200);
        Duration::from_secs(seconds)
    }

    /// Straight to stderr: `eprintln!` in a thread a test started is
    /// captured with that test's output, and lost when the binary exits.
    fn say(line: String) {
        use std::io::Write;
        let _ = writeln!(std::io::stderr(), "{line}");
    }

    fn watch() {
        let limit = limit();
        loop {
            std::thread::sleep(Duration::from_secs(5));
            let watched = WATCHED.lock().unwrap_or_else(|e| e.into_inner()).clone();
            let Some((_, name, since)) =
                watched.iter().find(|(_, _, since)| since.elapsed() > limit)
            else {
                continue;
            };
            say(format!(
                "\nwatchdog: test {name} has run for {} s: taken as hung; the binary ends",
                since.elapsed().as_secs()
            ));
            for (_, other, since) in &watched {
                say(format!(
                    "watchdog: still running: {other} ({} s)",
                    since.elapsed().as_secs()
                ));
            }
            for (pid, command) in descendants() {
                say(format!("watchdog: killing process {pid}: {command}"));
                // SAFETY: a process this binary started (or one of theirs).
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
            std::process::exit(3);
        }
    }

    /// The processes below this one, each with its command line.
    fn descendants() -> Vec<(i32, String)> {
        let mut parent_of = Vec::new();
        for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
                continue;
            };
            let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
            // After the command's closing parenthesis: state, then ppid.
            let ppid = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().nth(1))
                .and_then(|p| p.parse::<i32>().ok());
            if let Some(ppid) = ppid {
                parent_of.push((pid, ppid));
            }
        }
        let mut found = vec![std::process::id() as i32];
        let mut at = 0;
        while at < found.len() {
            let parent = found[at];
            found.extend(
                parent_of
                    .iter()
                    .filter(|(_, p)| *p == parent)
                    .map(|(pid, _)| *pid),
            );
            at += 1;
        }
        found
            .into_iter()
            .skip(1)
            .map(|pid| {
                let line = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
                let words: Vec<String> = line
                    .split(|&b| b == 0)
                    .map(|w| String::from_utf8_lossy(w).into_owned())
                    .collect();
                (pid, words.join(" ").trim().to_owned())
            })
            .collect()
    }
}
