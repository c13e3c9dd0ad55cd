//! Tests of the files toolkit, on fake roots in temporary directories:
//! the walk below the root, locks between threads and processes, edits,
//! journals shared with the Python toolkit, and batches.

mod batch;
mod crash;
mod edits;
mod journal;
mod locks;
mod mounts;
mod reused;
mod sys;
mod temps;
mod walk;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use super::Root;
use crate::{Buffer, Call, Log};

/// A fake root in a temporary directory, and a call below it whose log
/// the test reads.
pub(super) struct Sandbox {
    pub tmp: tempfile::TempDir,
    pub root: PathBuf,
    pub call: Call,
    log: Buffer,
}

impl Sandbox {
    pub fn new() -> Sandbox {
        Sandbox::with(false, Duration::from_secs(15))
    }

    pub fn with(noop: bool, lock_timeout: Duration) -> Sandbox {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("root");
        fs::create_dir(&root).unwrap();
        let log = Buffer::default();
        let call = Call {
            lock_timeout,
            ..Call::new(root.clone(), noop, Log::new(Box::new(log.clone()), noop))
        };
        Sandbox {
            tmp,
            root,
            call,
            log,
        }
    }

    pub fn open(&self) -> Root {
        Root::open(&self.root).unwrap()
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    pub fn write(&self, rel: &str, data: &[u8]) {
        self.write_mode(rel, data, 0o644);
    }

    pub fn write_mode(&self, rel: &str, data: &[u8], mode: u32) {
        let path = self.path(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(&path, data).unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(mode)).unwrap();
    }

    pub fn read(&self, rel: &str) -> Vec<u8> {
        fs::read(self.path(rel)).unwrap()
    }

    pub fn names(&self, rel: &str) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(self.path(rel))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        names
    }

    pub fn mkdir(&self, rel: &str) {
        fs::create_dir_all(self.path(rel)).unwrap();
    }

    pub fn symlink(&self, target: &str, rel: &str) {
        std::os::unix::fs::symlink(target, self.path(rel)).unwrap();
    }

    pub fn rename(&self, from: &str, to: &str) {
        fs::rename(self.path(from), self.path(to)).unwrap();
    }

    /// What the log said so far.
    pub fn log(&self) -> String {
        self.log.text()
    }

    /// Runs Python code with the Python toolkit importable as `ral` and
    /// RALSH_ROOT_DIR at the fake root; fails the test when it fails.
    pub fn python(&self, code: &str) -> Output {
        let out = python_command(code)
            .env("RALSH_ROOT_DIR", &self.root)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "python failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }
}

/// `python3 -I -S -c CODE`, with `import ral_provider as ral` done first.
pub(super) fn python_command(code: &str) -> Command {
    let providers = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../providers");
    let prelude = format!(
        "import sys, os, json\nsys.path.insert(0, {:?})\nimport ral_provider as ral\n",
        providers.display().to_string()
    );
    let mut command = Command::new("python3");
    command
        .args(["-I", "-S", "-c"])
        .arg(format!("{prelude}{code}"))
        .env_remove("RALSH_LOCK_TIMEOUT");
    command
}

/// The fixture that holds a lock in another process.
pub(super) fn hold_lock_fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/hold_lock.py")
}
