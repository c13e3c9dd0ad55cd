//! What this machine offers the tests that need more than a Rust toolchain
//! and Python 3 (root, an OpenSSH server, an Ansible virtualenv, Chromium,
//! Facter, a Debian 11 root), found
//! when the test binary starts, and the registry that turns each test
//! into a trial ignored, with the reason, where a need is missing.
//!
//! `RAL_TEST_NEEDS=all` (set by `.ci/run`) turns a missing need into a
//! failure instead: there every test must run.

use std::fmt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use std::ffi::OsString;
use std::process::{Command, Stdio};

use libtest_mimic::{Arguments, Failed, Trial};

/// Something a test needs that a fresh machine may lack.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Need {
    /// uid 0: dpkg installs, chown, useradd -R.
    Root,
    /// `/usr/sbin/sshd`, `ssh` and `ssh-keygen`, and root: the remote tests
    /// start their own sshd and log in to it as root.
    Sshd,
    /// A virtualenv with ansible-core (see [`ansible_venv`]).
    AnsibleVenv,
    /// Debian's dpkg and apt tools (the package provider's tests).
    Dpkg,
    /// Debian's `chromium`, run headless on the HTML report.
    Chromium,
    /// `unshare -rm` (util-linux) works: a mount namespace of its own,
    /// where a test hides programs from what it runs.
    MountNamespace,
    /// Puppet's `facter` (Debian's facter), whose facts `ral facts` is
    /// compared with.
    Facter,
    /// A Debian 11 (bullseye) root to start an old target from (see
    /// [`old_target_root`]), and root: the target runs in a chroot on an
    /// overlay mount of its own.
    OldTarget,
}

impl fmt::Display for Need {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Need::Root => "root",
            Need::Sshd => "sshd",
            Need::AnsibleVenv => "ansible-venv",
            Need::Dpkg => "dpkg",
            Need::Chromium => "chromium",
            Need::MountNamespace => "mount-namespace",
            Need::Facter => "facter",
            Need::OldTarget => "old-target",
        })
    }
}

/// One test of this binary: its module, name, body and needs.
#[derive(Clone, Copy)]
pub struct Test {
    pub module: &'static str,
    pub name: &'static str,
    pub run: fn(),
    pub needs: &'static [Need],
}

/// `tests![[NEED, ...] test, test, ...]`: the listed functions of the
/// calling module as [`Test`]s with those needs. A test function left out
/// of every list is dead code, which the lints refuse.
#[macro_export]
macro_rules! tests {
    ($needs:tt $($test:ident),+ $(,)?) => {
        vec![$($crate::host::Test {
            module: module_path!(),
            name: stringify!($test),
            run: $test,
            needs: $crate::needs!($needs),
        }),+]
    };
}

/// `needs!([Root, Sshd])`: the list as `&[Need]`.
#[macro_export]
macro_rules! needs {
    ([$($need:ident),*]) => {
        &[$($crate::host::Need::$need),*]
    };
}

/// The virtualenv the Ansible tests run ansible-playbook from:
/// `$RAL_TEST_ANSIBLE_VENV`, or `target/ansible-venv` of this repository
/// (which `.ci/run` makes).
pub fn ansible_venv() -> PathBuf {
    match std::env::var_os("RAL_TEST_ANSIBLE_VENV") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => Path::new(env!("CARGO_MANIFEST_DIR")).join("target/ansible-venv"),
    }
}

/// The Debian 11 root the old target starts from: `$RAL_TEST_OLD_TARGET`,
/// or the one `.ci/run` keeps in its cache (`$RAL_CI_CACHE`, by default
/// `/var/cache/ral-ci`), `bullseye` there, once its marker
/// `bullseye.complete` says it was made to the end. Err says why there is
/// none.
pub fn old_target_root() -> Result<PathBuf, String> {
    let root = match std::env::var_os("RAL_TEST_OLD_TARGET") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => {
            let cache = match std::env::var_os("RAL_CI_CACHE") {
                Some(dir) if !dir.is_empty() => PathBuf::from(dir),
                _ => PathBuf::from("/var/cache/ral-ci"),
            };
            if !cache.join("bullseye.complete").is_file() {
                return Err(format!(
                    "no Debian 11 root (.ci/run makes one with debootstrap in {}, \
                     or set RAL_TEST_OLD_TARGET)",
                    cache.join("bullseye").display()
                ));
            }
            cache.join("bullseye")
        }
    };
    // What the target runs: its sshd, and Python for the script providers.
    let lacking: Vec<&str> = ["usr/sbin/sshd", "usr/bin/python3"]
        .into_iter()
        .filter(|program| !executable(root.join(program)))
        .collect();
    if !lacking.is_empty() {
        return Err(format!(
            "no Debian 11 root (.ci/run makes one with debootstrap): {} lacks {}",
            root.display(),
            lacking.join(", ")
        ));
    }
    Ok(root)
}

/// What is missing here, need by need.
pub struct Host {
    missing: Vec<(Need, String)>,
    strict: bool,
}

impl Host {
    pub fn probe() -> Host {
        // SAFETY: geteuid has no preconditions.
        let uid = unsafe { libc::geteuid() };
        let root = (uid != 0).then(|| format!("runs as uid {uid}, not root"));
        let mut missing = Vec::new();
        if let Some(why) = &root {
            missing.push((Need::Root, why.clone()));
        }
        let sshd_tools = [
            ("/usr/sbin/sshd", "openssh-server"),
            ("ssh", "openssh-client"),
            ("ssh-keygen", "openssh-client"),
        ]
        .iter()
        .filter(|(program, _)| !executable(program))
        .map(|(program, package)| format!("no {program} (Debian's {package})"))
        .chain(
            root.clone()
                .map(|why| format!("{why}: the tests log in to their sshd as root")),
        )
        .collect::<Vec<_>>();
        if !sshd_tools.is_empty() {
            missing.push((Need::Sshd, sshd_tools.join("; ")));
        }
        let dpkg: Vec<&str> = crate::provider_package::PACKAGE_TOOLS
            .iter()
            .copied()
            .filter(|tool| !executable(tool))
            .collect();
        if !dpkg.is_empty() {
            missing.push((
                Need::Dpkg,
                format!("no {} (Debian's dpkg, apt and coreutils)", dpkg.join(", ")),
            ));
        }
        if !executable("chromium") {
            missing.push((Need::Chromium, "no chromium (Debian's chromium)".to_owned()));
        }
        let unshare = Command::new("unshare")
            .args(["-rm", "true"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        if !unshare.is_ok_and(|status| status.success()) {
            missing.push((
                Need::MountNamespace,
                "`unshare -rm true` fails: no unshare (util-linux), or user namespaces are off"
                    .to_owned(),
            ));
        }
        let old_target = old_target_root()
            .err()
            .into_iter()
            .chain(root.map(|why| {
                format!("{why}: the old target is an overlay mount, chroot and sshd of root's")
            }))
            .collect::<Vec<_>>();
        if !old_target.is_empty() {
            missing.push((Need::OldTarget, old_target.join("; ")));
        }
        if !executable("facter") {
            missing.push((Need::Facter, "no facter (Debian's facter)".to_owned()));
        }
        let venv = ansible_venv();
        if !executable(venv.join("bin/ansible-playbook")) {
            missing.push((
                Need::AnsibleVenv,
                format!(
                    "no {}/bin/ansible-playbook: make it with `python3 -m venv {0} && \
                     {0}/bin/pip install ansible-core`, or set RAL_TEST_ANSIBLE_VENV",
                    venv.display()
                ),
            ));
        }
        Host {
            missing,
            strict: std::env::var_os("RAL_TEST_NEEDS").is_some_and(|v| v == "all"),
        }
    }

    /// Why `need` is missing here, if it is.
    pub fn missing(&self, need: Need) -> Option<&str> {
        self.missing
            .iter()
            .find(|(n, _)| *n == need)
            .map(|(_, why)| why.as_str())
    }

    /// Says what is missing, once, before the trials run.
    pub fn report(&self) {
        for (need, why) in &self.missing {
            let fate = if self.strict { "fail" } else { "are ignored" };
            println!("[needs {need}] tests {fate} here: {why}");
        }
    }

    /// `test` as a trial: kind `needs A, B`; ignored (or, strict, failed)
    /// where one of them is missing.
    pub fn trial(&self, test: Test) -> Trial {
        let module = test.module.split_once("::").map_or("", |(_, m)| m);
        let name = format!("{module}::{}", test.name);
        let kind = test
            .needs
            .iter()
            .map(|n| format!("needs {n}"))
            .collect::<Vec<_>>()
            .join(", ");
        let missing: Vec<String> = test
            .needs
            .iter()
            .filter_map(|&n| self.missing(n).map(|why| format!("needs {n}: {why}")))
            .collect();
        let run = test.run;
        let trial = if missing.is_empty() {
            Trial::test(name, move || {
                run();
                Ok(())
            })
        } else {
            // Run anyway (`--include-ignored`), it fails saying why.
            let strict = self.strict;
            Trial::test(name, move || {
                let setting = if strict {
                    "RAL_TEST_NEEDS=all, and "
                } else {
                    ""
                };
                Err(Failed::from(format!("{setting}{}", missing.join("; "))))
            })
            .with_ignored_flag(!strict)
        };
        trial.with_kind(kind)
    }
}

/// Whether `program` (a path, or a name looked up on PATH) is an
/// executable regular file.
fn executable(program: impl AsRef<Path>) -> bool {
    let program = program.as_ref();
    let is_executable = |path: &Path| {
        std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.components().count() > 1 {
        return is_executable(program);
    }
    std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path).any(|dir| is_executable(&dir.join(program)))
    })
}

/// The filters beyond the first that libtest-mimic takes, which libtest
/// would have applied: a test runs when it matches any filter.
pub struct Filters {
    more: Vec<String>,
    first: Option<String>,
    exact: bool,
}

impl Filters {
    pub fn matches(&self, name: &str) -> bool {
        if self.more.is_empty() {
            return true;
        }
        let hit = |filter: &String| match self.exact {
            true => name == filter,
            false => name.contains(filter.as_str()),
        };
        self.first.iter().chain(&self.more).any(hit)
    }
}

/// The harness's arguments with the first filter only, and the filters.
pub fn arguments(args: impl Iterator<Item = OsString>) -> (Arguments, Filters) {
    // libtest's options that take a value as the next argument.
    const VALUED: [&str; 5] = [
        "--test-threads",
        "--skip",
        "--color",
        "--format",
        "--logfile",
    ];
    let mut kept = Vec::new();
    let mut filters = Vec::new();
    let mut args = args.peekable();
    kept.extend(args.next());
    while let Some(arg) = args.next() {
        let text = arg.to_string_lossy();
        if VALUED.contains(&text.as_ref()) {
            kept.push(arg);
            kept.extend(args.next());
        } else if text.starts_with('-') {
            kept.push(arg);
        } else {
            filters.push(text.into_owned());
        }
    }
    let mut filters = filters.into_iter();
    let first = filters.next();
    kept.extend(first.clone().map(OsString::from));
    let mut parsed = Arguments::from_iter(kept);
    let more: Vec<String> = filters.collect();
    if !more.is_empty() {
        // Then every filter is applied here, the first included.
        parsed.filter = None;
    }
    let exact = parsed.exact;
    (parsed, Filters { more, first, exact })
}
