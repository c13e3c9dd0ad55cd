//! The bundled `package::dpkg` provider end to end through ralsh, with the
//! real dpkg and apt-get, on a fake root: a dpkg database below
//! var/lib/dpkg and a local flat apt repository below srv/apt-repo, made of
//! tiny packages built here with dpkg-deb.

use std::ffi::{OsStr, OsString};
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use serde_json::{json, Value as Json};

use crate::host::Test;
use crate::support::{assert_same_tree, names_in, run, tree_snapshot, Sandbox};
use crate::tests;

/// This module's tests and what each needs.
pub fn tests() -> Vec<Test> {
    [
        tests![[Root, Dpkg]
            package_lists_and_finds_what_dpkg_and_apt_know,
            package_installs_changes_versions_removes_and_purges,
            parallel_installs_wait_for_each_other_and_all_land,
            package_dependencies_come_along_and_are_reported,
            package_noop_previews_and_leaves_the_root_byte_identical,
            package_rejects_bad_requests_and_changes_nothing,
            package_fast_listing_equals_python_after_installs,
            package_mark_holds_and_releases_through_dpkg_selections,
            package_held_changes_only_when_the_request_releases_it,
            package_installs_and_holds_in_one_request,
        ],
        tests![[Dpkg]
            package_lists_a_large_database,
            package_fast_listing_equals_python_on_synthetic_databases,
            package_fast_listing_escapes_and_skips_what_python_does,
            package_fast_listing_runs_dpkg_query_as_python_does,
            package_fast_listing_falls_back_to_python,
            package_provider_hands_other_calls_to_python,
            package_listing_through_ralsh_runs_no_python,
        ],
    ]
    .concat()
}

const DPKG_STATUS: &str = "var/lib/dpkg/status";
const REPO: &str = "srv/apt-repo";
const HELLO_FILE: &str = "usr/share/ral-hello/hello";
const HELLO_CONF: &str = "etc/ral-hello.conf";

/// One package of the test repository.
struct Deb {
    name: &'static str,
    version: &'static str,
    /// Extra control fields (`Depends: ...`), each ending in a newline.
    fields: &'static str,
    /// Files shipped, relative to /, and whether each is a conffile.
    files: &'static [(&'static str, bool)],
}

const DEBS: &[Deb] = &[
    Deb {
        name: "ral-hello",
        version: "1.0",
        fields: "",
        files: &[(HELLO_FILE, false), (HELLO_CONF, true)],
    },
    Deb {
        name: "ral-hello",
        version: "2.0",
        fields: "",
        files: &[(HELLO_FILE, false), (HELLO_CONF, true)],
    },
    Deb {
        name: "ral-tools",
        version: "1.0",
        fields: "Depends: ral-hello\n",
        files: &[("usr/share/ral-tools/tool", false)],
    },
    Deb {
        name: "ral-broken",
        version: "1.0",
        fields: "Depends: ral-missing\n",
        files: &[("usr/share/ral-broken/file", false)],
    },
    // Independent packages, installed all at once.
    Deb {
        name: "ral-par1",
        version: "1.0",
        fields: "",
        files: &[("usr/share/ral-par/1", false)],
    },
    Deb {
        name: "ral-par2",
        version: "1.0",
        fields: "",
        files: &[("usr/share/ral-par/2", false)],
    },
    Deb {
        name: "ral-par3",
        version: "1.0",
        fields: "",
        files: &[("usr/share/ral-par/3", false)],
    },
    Deb {
        name: "ral-par4",
        version: "1.0",
        fields: "",
        files: &[("usr/share/ral-par/4", false)],
    },
];

/// The built repository: each .deb's file name and bytes, and the
/// `Packages` index describing them.
struct Repo {
    debs: Vec<(String, Vec<u8>)>,
    packages: String,
}

/// Runs a tool the tests need and returns its stdout; it must succeed.
#[track_caller]
fn tool(command: &mut Command) -> String {
    let output = command
        .output()
        .unwrap_or_else(|e| panic!("{command:?} runs: {e}"));
    assert!(
        output.status.success(),
        "{command:?} failed\nstdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// What a shipped file holds: it differs between versions.
fn content(path: &str, deb: &Deb) -> String {
    format!("{path} of {} {}\n", deb.name, deb.version)
}

/// Builds the .deb files once (in a scratch directory that is removed
/// again) and keeps them in memory.
fn repo() -> &'static Repo {
    static REPO: OnceLock<Repo> = OnceLock::new();
    REPO.get_or_init(|| {
        let scratch = tempfile::tempdir().unwrap();
        let mut debs = Vec::new();
        let mut packages = String::new();
        for deb in DEBS {
            let tree = scratch.path().join(format!("{}-{}", deb.name, deb.version));
            std::fs::create_dir_all(tree.join("DEBIAN")).unwrap();
            std::fs::write(
                tree.join("DEBIAN/control"),
                format!(
                    "Package: {}\nVersion: {}\nArchitecture: all\nMaintainer: ral tests <ral@example.org>\n{}Description: a package for ral's tests\n",
                    deb.name, deb.version, deb.fields
                ),
            )
            .unwrap();
            let mut conffiles = String::new();
            for (path, conffile) in deb.files {
                let file = tree.join(path);
                std::fs::create_dir_all(file.parent().unwrap()).unwrap();
                std::fs::write(&file, content(path, deb)).unwrap();
                if *conffile {
                    conffiles.push_str(&format!("/{path}\n"));
                }
            }
            if !conffiles.is_empty() {
                std::fs::write(tree.join("DEBIAN/conffiles"), conffiles).unwrap();
            }
            let file_name = format!("{}_{}_all.deb", deb.name, deb.version);
            let built = scratch.path().join(&file_name);
            tool(
                Command::new("dpkg-deb")
                    .args(["--root-owner-group", "-Zgzip", "--build"])
                    .arg(&tree)
                    .arg(&built),
            );
            let sha256 = tool(Command::new("sha256sum").arg(&built));
            let bytes = std::fs::read(&built).unwrap();
            packages.push_str(&format!(
                "Package: {}\nVersion: {}\nArchitecture: all\nMaintainer: ral tests <ral@example.org>\n{}Filename: ./{file_name}\nSize: {}\nSHA256: {}\nDescription: a package for ral's tests\n\n",
                deb.name,
                deb.version,
                deb.fields,
                bytes.len(),
                sha256.split_whitespace().next().unwrap()
            ));
            debs.push((file_name, bytes));
        }
        Repo { debs, packages }
    })
}

/// The host's dpkg architecture.
#[track_caller]
fn native_arch() -> String {
    require_tools(&["dpkg"]);
    tool(Command::new("dpkg").arg("--print-architecture"))
        .trim()
        .to_owned()
}

/// An apt configuration that keeps apt below the root: apt reads the
/// host's /etc/apt/apt.conf.d (whose hooks would run) before any -o
/// option, so only APT_CONFIG can stop it.
fn apt_config(sandbox: &Sandbox) -> PathBuf {
    let path = sandbox.cache.path().join("test-apt.conf");
    let config = format!(
        "Dir \"{}/\";\nDir::Etc::parts \"/dev/null\";\nDir::Etc::main \"/dev/null\";\n",
        sandbox.root().display()
    );
    std::fs::write(&path, config).unwrap();
    path
}

/// The tools the package tests run: Debian's dpkg and apt, and coreutils'
/// sha256sum.
pub const PACKAGE_TOOLS: &[&str] = &[
    "dpkg",
    "dpkg-deb",
    "dpkg-query",
    "apt-get",
    "apt-cache",
    "sha256sum",
];

/// Fails, naming the missing ones, unless each tool can be run. The
/// package tests never skip themselves: a skip would pass where they
/// cannot run, and hide a broken set-up.
#[track_caller]
fn require_tools(tools: &[&str]) {
    let missing: Vec<&str> = tools
        .iter()
        .copied()
        .filter(|tool| Command::new(tool).arg("--version").output().is_err())
        .collect();
    assert!(
        missing.is_empty(),
        "the package tests cannot run: {} not found on PATH (Debian's dpkg and apt \
         packages provide them)",
        missing.join(", ")
    );
}

/// Fails, saying why, unless dpkg and apt can install below a fake root
/// here: that needs the tools, and root, since dpkg installs as root only
/// (run the tests as root, as `.ci/run` does).
#[track_caller]
fn require_install() {
    require_tools(PACKAGE_TOOLS);
    let uid = std::fs::metadata("/proc/self")
        .map(|meta| meta.uid())
        .unwrap_or_else(|e| panic!("/proc/self: {e}"));
    assert_eq!(
        uid, 0,
        "the package tests cannot run: they install .deb files below a fake root, \
         which dpkg does only for root, and they run as user {uid}; run them as root"
    );
}

/// A fake root with a dpkg database holding `status`, and the test
/// repository as its only apt source, its package lists already fetched.
/// Fails when packages cannot be installed here.
#[track_caller]
fn package_sandbox(status: &str) -> Sandbox {
    require_install();
    let sandbox = Sandbox::new();
    let root = sandbox.root().to_owned();
    for dir in [
        "var/lib/dpkg/info",
        "var/lib/dpkg/updates",
        "var/lib/apt/lists/partial",
        "var/cache/apt/archives/partial",
        "var/log/apt",
        "etc/apt/apt.conf.d",
        "etc/apt/preferences.d",
        "etc/apt/sources.list.d",
        REPO,
    ] {
        std::fs::create_dir_all(root.join(dir)).unwrap();
    }
    sandbox.write(DPKG_STATUS, status);
    let repo = repo();
    for (file_name, bytes) in &repo.debs {
        std::fs::write(root.join(REPO).join(file_name), bytes).unwrap();
    }
    sandbox.write(&format!("{REPO}/Packages"), &repo.packages);
    sandbox.write(
        "etc/apt/sources.list",
        &format!("deb [trusted=yes] file:{}/{REPO} ./\n", root.display()),
    );
    tool(
        Command::new("apt-get")
            .env("APT_CONFIG", apt_config(&sandbox))
            .env("LC_ALL", "C")
            .arg("-q")
            .arg("-o")
            .arg(format!("Dir={}/", root.display()))
            .args(["-o", "APT::Sandbox::User=root", "update"]),
    );
    sandbox
}

/// dpkg's word for the package's state and its version in the fake root's
/// database, or None when dpkg does not know it.
fn dpkg_state(sandbox: &Sandbox, package: &str) -> Option<String> {
    dpkg_query(sandbox, package, "${db:Status-Status} ${Version}")
}

/// What dpkg-query prints of `package` below the root in `format`, or
/// None when dpkg does not know it.
fn dpkg_query(sandbox: &Sandbox, package: &str, format: &str) -> Option<String> {
    let output = Command::new("dpkg-query")
        .arg(format!(
            "--admindir={}",
            sandbox.root().join("var/lib/dpkg").display()
        ))
        .args(["-W", "-f", format, "--", package])
        .output()
        .unwrap();
    output
        .status
        .success()
        .then(|| String::from_utf8(output.stdout).unwrap())
}

/// The host's package state, which no test may change.
fn host_package_state() -> Vec<(String, Option<Vec<u8>>)> {
    let mut state: Vec<(String, Option<Vec<u8>>)> = [
        "/var/lib/dpkg/status",
        "/var/log/dpkg.log",
        "/var/lib/apt/extended_states",
        "/var/log/apt/history.log",
        "/var/log/apt/term.log",
    ]
    .iter()
    .map(|path| (path.to_string(), std::fs::read(path).ok()))
    .collect();
    for dir in ["/var/cache/apt/archives", "/var/lib/dpkg/info"] {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .map(|entries| {
                entries
                    .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        state.push((dir.to_owned(), Some(names.join("\n").into_bytes())));
    }
    state
}

/// A status-file stanza.
/// A status file of 2,000 installed packages, ral-pkg0000 to ral-pkg1999.
fn large_status() -> String {
    (0..2000)
        .map(|n| {
            stanza(
                &format!("ral-pkg{n:04}"),
                "install ok installed",
                &format!("1.{n}-1"),
                "all",
                "",
            )
        })
        .collect()
}

fn stanza(package: &str, status: &str, version: &str, arch: &str, extra: &str) -> String {
    format!(
        "Package: {package}\nStatus: {status}\nMaintainer: ral tests <ral@example.org>\nArchitecture: {arch}\nVersion: {version}\n{extra}Description: synthetic\n\n"
    )
}

fn ral() -> Json {
    json!({"type": "package", "provider": "package::dpkg"})
}

fn package_lists_and_finds_what_dpkg_and_apt_know() {
    let arch = native_arch();
    let status = [
        stanza(
            "libral1",
            "install ok installed",
            "3.1-2",
            &arch,
            "Multi-Arch: same\n",
        ),
        stanza(
            "ral-gone",
            "deinstall ok config-files",
            "0.5",
            "all",
            "Conffiles:\n /etc/ral-gone.conf 00000000000000000000000000000000\n",
        ),
        stanza("ral-half", "install ok unpacked", "0.7", "all", ""),
        stanza("ral-hello", "hold ok installed", "1.0", "all", ""),
        stanza("ral-purged", "purge ok not-installed", "0.1", "all", ""),
    ]
    .concat();
    let sandbox = package_sandbox(&status);
    let doc = sandbox.ralsh(&["-j", "package"]).expect(0).json();
    let multiarch = format!("libral1:{arch}");
    assert_eq!(
        doc["resources"],
        json!([
            {"name": multiarch, "ensure": "present", "status": "installed",
             "version": "3.1-2", "arch": arch, "mark": "none", "ral": ral()},
            {"name": "ral-gone", "ensure": "absent", "status": "config-files",
             "mark": "none", "ral": ral()},
            {"name": "ral-half", "ensure": "absent", "status": "unpacked",
             "version": "0.7", "arch": "all", "mark": "none", "ral": ral()},
            {"name": "ral-hello", "ensure": "present", "status": "installed",
             "version": "1.0", "arch": "all", "mark": "hold", "ral": ral()},
        ])
    );
    let hello = doc["resources"][3].clone();
    let found = sandbox
        .ralsh(&["-j", "package", "ral-hello"])
        .expect(0)
        .json();
    assert_eq!(found["resource"], hello, "find agrees with list");
    // The native package of a Multi-Arch: same name is found without ':ARCH'.
    let found = sandbox
        .ralsh(&["-j", "package", "libral1"])
        .expect(0)
        .json();
    assert_eq!(found["resource"]["version"], "3.1-2");
    // Never installed but offered by the repository: absent.
    let found = sandbox
        .ralsh(&["-j", "package", "ral-tools"])
        .expect(0)
        .json();
    assert_eq!(
        found["resource"],
        json!({"name": "ral-tools", "ensure": "absent", "status": "not-installed",
               "mark": "none", "ral": ral()})
    );
    // Config files only: absent, and not found with -a.
    sandbox.ralsh(&["-a", "package", "ral-gone"]).expect(1);
    // Neither installed nor offered, and not even a valid name: unknown.
    let run = sandbox.ralsh(&["-j", "package", "ral-nosuch"]);
    assert_eq!(run.expect(1).json(), json!({}));
    sandbox.ralsh(&["package", "Not_A_Name"]).expect(1);
}

fn package_lists_a_large_database() {
    require_tools(&["dpkg-query"]);
    let sandbox = Sandbox::new();
    let status = large_status();
    sandbox.write(DPKG_STATUS, &status);
    let doc = sandbox.ralsh(&["-j", "package"]).expect(0).json();
    let names = names_in(&doc["resources"]);
    assert_eq!(names.len(), 2000);
    assert_eq!(names[0], "ral-pkg0000");
    assert_eq!(names[1999], "ral-pkg1999");
    assert_eq!(doc["resources"][1234]["version"], "1.1234-1");
}

fn package_installs_changes_versions_removes_and_purges() {
    let host_before = host_package_state();
    let sandbox = package_sandbox("");
    let root = sandbox.root();
    // apt runs the hooks of its configuration on the host, so a fake root's
    // apt.conf.d must not be read.
    let hook_ran = sandbox.cache.path().join("hook-ran");
    sandbox.write(
        "etc/apt/apt.conf.d/99hook",
        &format!(
            "DPkg::Post-Invoke {{ \"touch {}\"; }};\n",
            hook_ran.display()
        ),
    );

    // Create: the candidate (2.0) is installed below the root.
    let doc = sandbox
        .ralsh(&["-j", "package", "ral-hello", "ensure=present"])
        .expect(0)
        .json();
    assert_eq!(
        doc["result"][0]["changes"],
        json!([
            {"attr": "ensure", "is": "present", "was": "absent"},
            {"attr": "version", "is": "2.0", "was": null},
            {"attr": "arch", "is": "all", "was": null},
            {"attr": "status", "is": "installed", "was": "not-installed"},
        ])
    );
    let deb = &DEBS[1];
    assert_eq!(sandbox.read(HELLO_FILE), content(HELLO_FILE, deb));
    assert_eq!(sandbox.read(HELLO_CONF), content(HELLO_CONF, deb));
    assert_eq!(
        dpkg_state(&sandbox, "ral-hello").as_deref(),
        Some("installed 2.0")
    );
    assert!(
        root.join("var/log/dpkg.log").exists(),
        "dpkg logs below the root"
    );
    sandbox
        .ralsh(&["package", "ral-hello", "ensure=installed"])
        .expect(0)
        .stdout_has("no changes needed");

    // A version: a downgrade, then the same again is no change.
    sandbox
        .ralsh(&["package", "ral-hello", "ensure=1.0"])
        .expect(0)
        .stdout_has("version: '2.0' -> '1.0'");
    assert_eq!(sandbox.read(HELLO_FILE), content(HELLO_FILE, &DEBS[0]));
    let doc = sandbox
        .ralsh(&["-j", "package", "ral-hello", "ensure=1.0"])
        .expect(0)
        .json();
    assert_eq!(doc["result"][0]["changes"], json!([]));

    // latest upgrades to the candidate, once.
    sandbox
        .ralsh(&["package", "ral-hello", "ensure=latest"])
        .expect(0)
        .stdout_has("version: '1.0' -> '2.0'");
    assert_eq!(sandbox.read(HELLO_FILE), content(HELLO_FILE, deb));
    let doc = sandbox
        .ralsh(&["-j", "package", "ral-hello", "ensure=latest"])
        .expect(0)
        .json();
    assert_eq!(doc["result"][0]["changes"], json!([]));

    // absent removes the files but keeps the conffile.
    let doc = sandbox
        .ralsh(&["-j", "package", "ral-hello", "ensure=absent"])
        .expect(0)
        .json();
    assert_eq!(
        doc["result"][0]["changes"],
        json!([
            {"attr": "ensure", "is": "absent", "was": "present"},
            {"attr": "version", "is": null, "was": "2.0"},
            {"attr": "arch", "is": null, "was": "all"},
            {"attr": "status", "is": "config-files", "was": "installed"},
        ])
    );
    assert!(!root.join(HELLO_FILE).exists());
    assert_eq!(sandbox.read(HELLO_CONF), content(HELLO_CONF, deb));
    assert_eq!(
        dpkg_state(&sandbox, "ral-hello").as_deref(),
        Some("config-files 2.0")
    );
    sandbox
        .ralsh(&["package", "ral-hello", "ensure=absent"])
        .expect(0)
        .stdout_has("no changes needed");

    // purged removes the conffile too, and dpkg forgets the package.
    sandbox
        .ralsh(&["package", "ral-hello", "ensure=purged"])
        .expect(0)
        .stdout_has("status: 'config-files' -> 'not-installed'");
    assert!(!root.join(HELLO_CONF).exists());
    assert_eq!(dpkg_state(&sandbox, "ral-hello"), None);
    let doc = sandbox
        .ralsh(&["-j", "package", "ral-hello", "ensure=purged"])
        .expect(0)
        .json();
    assert_eq!(doc["result"][0]["changes"], json!([]));

    assert!(!hook_ran.exists(), "a hook of the root's apt.conf.d ran");
    assert!(
        host_before == host_package_state(),
        "the host's dpkg and apt state changed"
    );
}

fn parallel_installs_wait_for_each_other_and_all_land() {
    // dpkg and apt take their own locks (apt-get waits for dpkg's, as the
    // provider asks it to): ralsh processes installing at once must all
    // succeed, one after another.
    let sandbox = package_sandbox("");
    let names = ["ral-par1", "ral-par2", "ral-par3", "ral-par4"];
    let runs: Vec<_> = std::thread::scope(|scope| {
        let workers: Vec<_> = names
            .iter()
            .map(|name| {
                let sandbox = &sandbox;
                scope.spawn(move || sandbox.ralsh(&["package", name, "ensure=present"]))
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    for (name, run) in names.iter().zip(&runs) {
        run.expect(0);
        assert_eq!(
            dpkg_state(&sandbox, name).as_deref(),
            Some("installed 1.0"),
            "{name}"
        );
    }
}

fn package_dependencies_come_along_and_are_reported() {
    let sandbox = package_sandbox("");
    // A noop batch: ral-hello comes with ral-tools and is asked for too,
    // and its changes are reported once.
    let doc = sandbox
        .ralsh(&[
            "-n",
            "-j",
            "package",
            "ral-tools",
            "ral-hello",
            "ensure=present",
        ])
        .expect(0)
        .json();
    let installed = |version: &str| {
        json!([
            {"attr": "ensure", "is": "present", "was": "absent"},
            {"attr": "version", "is": version, "was": null},
            {"attr": "arch", "is": "all", "was": null},
            {"attr": "status", "is": "installed", "was": "not-installed"},
        ])
    };
    assert_eq!(doc["result"][0]["changes"], installed("1.0"));
    assert_eq!(doc["result"][1]["changes"], installed("2.0"));
    assert_eq!(dpkg_state(&sandbox, "ral-hello"), None);
    let run = sandbox.ralsh(&["-l", "info", "-j", "package", "ral-tools", "ensure=present"]);
    run.expect(0)
        .stderr_has("set also changed 'ral-hello' (ensure, version, arch, status)");
    assert_eq!(run.json()["result"][0]["resource"]["version"], json!("1.0"));
    assert_eq!(
        dpkg_state(&sandbox, "ral-hello").as_deref(),
        Some("installed 2.0")
    );
    // Removing what ral-tools needs removes ral-tools too.
    sandbox
        .ralsh(&["-l", "info", "package", "ral-hello", "ensure=absent"])
        .expect(0)
        .stderr_has("set also changed 'ral-tools'");
    assert_eq!(
        dpkg_state(&sandbox, "ral-tools"),
        None,
        "no conffiles: gone"
    );
}

fn package_noop_previews_and_leaves_the_root_byte_identical() {
    let sandbox = package_sandbox("");
    sandbox
        .ralsh(&["package", "ral-hello", "ensure=1.0"])
        .expect(0);
    let before = tree_snapshot(sandbox.root());
    for (args, changes) in [
        (
            &["ral-tools", "ensure=present"][..],
            json!([
                {"attr": "ensure", "is": "present", "was": "absent"},
                {"attr": "version", "is": "1.0", "was": null},
                {"attr": "arch", "is": "all", "was": null},
                {"attr": "status", "is": "installed", "was": "not-installed"},
            ]),
        ),
        (
            &["ral-hello", "ensure=latest"][..],
            json!([{"attr": "version", "is": "2.0", "was": "1.0"}]),
        ),
        (
            &["ral-hello", "ensure=2.0"][..],
            json!([{"attr": "version", "is": "2.0", "was": "1.0"}]),
        ),
        (
            &["ral-hello", "ensure=absent"][..],
            json!([
                {"attr": "ensure", "is": "absent", "was": "present"},
                {"attr": "version", "is": null, "was": "1.0"},
                {"attr": "arch", "is": null, "was": "all"},
                {"attr": "status", "is": "config-files", "was": "installed"},
            ]),
        ),
        (
            &["ral-hello", "ensure=purged"][..],
            json!([
                {"attr": "ensure", "is": "absent", "was": "present"},
                {"attr": "version", "is": null, "was": "1.0"},
                {"attr": "arch", "is": null, "was": "all"},
                {"attr": "status", "is": "not-installed", "was": "installed"},
            ]),
        ),
    ] {
        let mut all = vec!["-n", "-j", "package"];
        all.extend_from_slice(args);
        let doc = sandbox.ralsh(&all).expect(0).json();
        assert_eq!(doc["noop"], true);
        assert_eq!(doc["result"][0]["changes"], changes, "{args:?}");
        assert_same_tree(&before, sandbox.root(), &format!("noop {args:?}"));
    }
    sandbox
        .ralsh(&["-n", "package", "ral-hello", "ensure=latest"])
        .expect(0)
        .stdout_has("version: '1.0' -> '2.0' (noop: would change)");
    assert_same_tree(&before, sandbox.root(), "noop");
}

fn package_rejects_bad_requests_and_changes_nothing() {
    let sandbox = package_sandbox("");
    let before = tree_snapshot(sandbox.root());
    sandbox
        .ralsh(&["package", "ral-nosuch", "ensure=present"])
        .expect(2)
        .stderr_has("'ral-nosuch': package 'ral-nosuch' not found: it is not installed and no configured apt source offers it");
    sandbox
        .ralsh(&["package", "ral-hello", "ensure=3.0"])
        .expect(2)
        .stderr_has("'ral-hello': ensure: version '3.0' of 'ral-hello' is not available; available: 2.0, 1.0");
    sandbox
        .ralsh(&["package", "Ral_Hello", "ensure=present"])
        .expect(2)
        .stderr_has("invalid package name 'Ral_Hello'");
    sandbox
        .ralsh(&["package", "ral-hello", "ensure=1.0:x"])
        .expect(2)
        .stderr_has(
            "ensure: invalid version '1.0:x': the epoch '1.0' (before ':') is not a number",
        );
    // Not a version at all: refused by ralsh before the provider runs.
    sandbox
        .ralsh(&["package", "ral-hello", "ensure=newest"])
        .expect(2)
        .stderr_has("'newest'");
    assert_same_tree(&before, sandbox.root(), "a refused request");
    // apt-get's own failure is quoted.
    sandbox
        .ralsh(&["package", "ral-broken", "ensure=present"])
        .expect(2)
        .stderr_has("apt-get install ral-broken failed (exit status 100)")
        .stderr_has("ral-broken : Depends: ral-missing but it is not installable")
        .stderr_has("E: Unable to correct problems, you have held broken packages.");
    assert_eq!(dpkg_state(&sandbox, "ral-broken"), None);
}

/// dpkg's own `${Status}` of a package below the root ("hold ok
/// installed"), or None when dpkg does not know it.
fn dpkg_status(sandbox: &Sandbox, package: &str) -> Option<String> {
    dpkg_query(sandbox, package, "${Status} ${Version}")
}

fn package_mark_holds_and_releases_through_dpkg_selections() {
    let host_before = host_package_state();
    let sandbox = package_sandbox("");
    sandbox
        .ralsh(&["package", "ral-hello", "ensure=1.0"])
        .expect(0);
    let found = sandbox
        .ralsh(&["-j", "package", "ral-hello"])
        .expect(0)
        .json();
    assert_eq!(found["resource"]["mark"], "none");

    // Under noop the hold is reported and nothing is written.
    let before = tree_snapshot(sandbox.root());
    let doc = sandbox
        .ralsh(&["-n", "-j", "package", "ral-hello", "mark=hold"])
        .expect(0)
        .json();
    assert_eq!(
        doc["result"][0]["changes"],
        json!([{"attr": "mark", "is": "hold", "was": "none"}])
    );
    assert_same_tree(&before, sandbox.root(), "noop mark=hold");

    // Held: dpkg's selection says so, and so do the next read and a listing.
    let doc = sandbox
        .ralsh(&["-j", "package", "ral-hello", "mark=hold"])
        .expect(0)
        .json();
    assert_eq!(
        doc["result"][0]["changes"],
        json!([{"attr": "mark", "is": "hold", "was": "none"}])
    );
    assert_eq!(
        dpkg_status(&sandbox, "ral-hello").as_deref(),
        Some("hold ok installed 1.0")
    );
    let found = sandbox
        .ralsh(&["-j", "package", "ral-hello"])
        .expect(0)
        .json();
    assert_eq!(found["resource"]["mark"], "hold");
    let listed = sandbox.ralsh(&["-j", "package"]).expect(0).json();
    assert_eq!(listed["resources"][0]["mark"], "hold", "{listed}");
    sandbox
        .ralsh(&["package", "ral-hello", "mark=hold"])
        .expect(0)
        .stdout_has("no changes needed");

    // Released: under noop nothing is written, then dpkg's selection is
    // install again.
    let before = tree_snapshot(sandbox.root());
    sandbox
        .ralsh(&["-n", "package", "ral-hello", "mark=none"])
        .expect(0)
        .stdout_has("mark: 'hold' -> 'none' (noop: would change)");
    assert_same_tree(&before, sandbox.root(), "noop mark=none");
    sandbox
        .ralsh(&["package", "ral-hello", "mark=none"])
        .expect(0)
        .stdout_has("mark: 'hold' -> 'none'");
    assert_eq!(
        dpkg_status(&sandbox, "ral-hello").as_deref(),
        Some("install ok installed 1.0")
    );
    assert!(
        host_before == host_package_state(),
        "the host's dpkg and apt state changed"
    );
}

fn package_held_changes_only_when_the_request_releases_it() {
    let sandbox = package_sandbox("");
    sandbox
        .ralsh(&["package", "ral-hello", "ensure=1.0", "mark=hold"])
        .expect(0);
    assert_eq!(
        dpkg_status(&sandbox, "ral-hello").as_deref(),
        Some("hold ok installed 1.0")
    );

    // Without mark, a change to the held package is refused, saying how
    // to ask for it, and nothing is written.
    let before = tree_snapshot(sandbox.root());
    for (ensure, message) in [
        ("ensure=latest", "ensure: 'latest' would change package 'ral-hello', which is held (mark: hold); add mark: none to release the hold"),
        ("ensure=2.0", "ensure: '2.0' would change package 'ral-hello', which is held"),
        ("ensure=absent", "ensure: 'absent' would remove package 'ral-hello', which is held (mark: hold); add mark: none"),
    ] {
        sandbox
            .ralsh(&["package", "ral-hello", ensure])
            .expect(2)
            .stderr_has(message);
    }
    // mark hold equals what is there, so ralsh does not send it: the same
    // refusal.
    sandbox
        .ralsh(&["package", "ral-hello", "ensure=latest", "mark=hold"])
        .expect(2)
        .stderr_has("would change package 'ral-hello', which is held");
    // Under noop, apt-get's simulation of the change the request allows.
    let doc = sandbox
        .ralsh(&[
            "-n",
            "-j",
            "package",
            "ral-hello",
            "ensure=latest",
            "mark=none",
        ])
        .expect(0)
        .json();
    assert_eq!(
        sorted_changes(&doc),
        json!([
            {"attr": "mark", "is": "none", "was": "hold"},
            {"attr": "version", "is": "2.0", "was": "1.0"},
        ])
    );
    assert_same_tree(&before, sandbox.root(), "a refused or noop change");

    // When apt-get fails (the repository's 2.0 is damaged), the hold is
    // put back.
    let deb = sandbox.root().join(REPO).join("ral-hello_2.0_all.deb");
    let good = std::fs::read(&deb).unwrap();
    std::fs::write(&deb, b"not a deb").unwrap();
    sandbox
        .ralsh(&["package", "ral-hello", "ensure=2.0", "mark=none"])
        .expect(2)
        .stderr_has("apt-get install ral-hello=2.0 failed");
    assert_eq!(
        dpkg_status(&sandbox, "ral-hello").as_deref(),
        Some("hold ok installed 1.0")
    );
    std::fs::write(&deb, good).unwrap();

    // With mark none the hold is released and the change made; a later
    // request holds the new version.
    sandbox
        .ralsh(&["package", "ral-hello", "ensure=latest", "mark=none"])
        .expect(0)
        .stdout_has("version: '1.0' -> '2.0'")
        .stdout_has("mark: 'hold' -> 'none'");
    assert_eq!(
        dpkg_status(&sandbox, "ral-hello").as_deref(),
        Some("install ok installed 2.0")
    );
    // A removal drops the selection to deinstall: mark none.
    sandbox
        .ralsh(&["package", "ral-hello", "ensure=absent", "mark=none"])
        .expect(0);
    assert_eq!(
        dpkg_status(&sandbox, "ral-hello").as_deref(),
        Some("deinstall ok config-files 2.0")
    );
}

/// The changes of a ralsh -j run's first result, by attribute name: ralsh
/// orders them as the provider reported them.
fn sorted_changes(doc: &Json) -> Json {
    let mut changes = doc["result"][0]["changes"].as_array().unwrap().clone();
    changes.sort_by_key(|c| c["attr"].as_str().unwrap().to_owned());
    Json::Array(changes)
}

fn package_installs_and_holds_in_one_request() {
    let sandbox = package_sandbox("");
    let before = tree_snapshot(sandbox.root());
    // A package that is not installed cannot be held on its own.
    sandbox
        .ralsh(&["package", "ral-hello", "mark=hold"])
        .expect(2)
        .stderr_has("mark: hold: package 'ral-hello' is not installed, and only an installed package can be held");
    let doc = sandbox
        .ralsh(&[
            "-n",
            "-j",
            "package",
            "ral-hello",
            "ensure=present",
            "mark=hold",
        ])
        .expect(0)
        .json();
    let previewed = sorted_changes(&doc);
    assert_eq!(
        previewed,
        json!([
            {"attr": "arch", "is": "all", "was": null},
            {"attr": "ensure", "is": "present", "was": "absent"},
            {"attr": "mark", "is": "hold", "was": "none"},
            {"attr": "status", "is": "installed", "was": "not-installed"},
            {"attr": "version", "is": "2.0", "was": null},
        ])
    );
    assert_same_tree(&before, sandbox.root(), "refused or noop install and hold");
    let doc = sandbox
        .ralsh(&["-j", "package", "ral-hello", "ensure=present", "mark=hold"])
        .expect(0)
        .json();
    assert_eq!(sorted_changes(&doc), previewed, "as previewed");
    assert_eq!(doc["result"][0]["resource"]["mark"], "hold", "{doc}");
    assert_eq!(
        dpkg_status(&sandbox, "ral-hello").as_deref(),
        Some("hold ok installed 2.0")
    );
    sandbox
        .ralsh(&["package", "ral-hello", "ensure=present", "mark=hold"])
        .expect(0)
        .stdout_has("no changes needed");
}

// ------------------------------------------------- the listing's fast path
//
// providers/dpkg.prov answers `get` with no names itself (sh and awk) and
// hands everything else to providers/dpkg.py. Its answer must be the one
// dpkg.py gives, byte for byte.

/// The repository's providers directory.
fn providers_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("providers")
}

/// What one provider call left behind.
#[derive(Debug, PartialEq)]
struct Answer {
    status: Option<i32>,
    stdout: String,
    stderr: String,
}

/// Runs a provider call the way ralsh does (only PATH, HOME, LANG, LC_ALL
/// and RALSH_ROOT_DIR set) with `request` on stdin.
fn call(command: Command, root: &Path, path: &OsStr, request: &str) -> Answer {
    call_with(command, root, path, request, &[])
}

/// [`call`] with more environment variables (ralsh passes no others, but
/// the provider must not depend on that).
fn call_with(
    mut command: Command,
    root: &Path,
    path: &OsStr,
    request: &str,
    extra: &[(&str, &str)],
) -> Answer {
    let mut child = command
        .env_clear()
        .env("PATH", path)
        .env("HOME", "/")
        .env("LANG", "C")
        .env("LC_ALL", "C")
        .env("RALSH_ROOT_DIR", root)
        .envs(extra.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{command:?} runs: {e}"));
    // A call that never reads stdin (describe) may be gone already.
    let written = child.stdin.take().unwrap().write_all(request.as_bytes());
    if let Err(e) = written {
        assert_eq!(e.kind(), std::io::ErrorKind::BrokenPipe, "{e}");
    }
    let output = child.wait_with_output().unwrap();
    Answer {
        status: output.status.code(),
        stdout: String::from_utf8(output.stdout).expect("UTF-8 stdout"),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// `dpkg.prov ral_action=get`, as ralsh runs it.
fn prov_get(root: &Path, path: &OsStr, request: &str) -> Answer {
    let mut command = Command::new(providers_dir().join("dpkg.prov"));
    command.arg("ral_action=get");
    call(command, root, path, request)
}

/// The Python interpreter `python3` on PATH runs, by its absolute path: a
/// wrapper (pyenv's shims) may change PATH before starting it.
fn python() -> &'static str {
    static PYTHON: OnceLock<String> = OnceLock::new();
    PYTHON.get_or_init(|| {
        tool(Command::new("python3").args(["-c", "import sys; print(sys.executable)"]))
            .trim()
            .to_owned()
    })
}

/// `python3 -I -S dpkg.py ARGS`: the reference.
fn dpkg_py(args: &[&str]) -> Command {
    let mut command = Command::new(python());
    command
        .args(["-I", "-S"])
        .arg(providers_dir().join("dpkg.py"))
        .args(args);
    command
}

/// `python3 -I -S dpkg.py ral_action=get`.
fn python_get(root: &Path, path: &OsStr, request: &str) -> Answer {
    call(dpkg_py(&["ral_action=get"]), root, path, request)
}

const LISTING: &str = r#"{"names":[]}"#;

/// Directories of stub commands put before the host's PATH.
struct Stubs {
    dir: tempfile::TempDir,
}

impl Stubs {
    /// `bin/python3`, which says so and exits 99: a fast path that runs
    /// Python fails.
    fn new() -> Stubs {
        let stubs = Stubs {
            dir: tempfile::tempdir().unwrap(),
        };
        stubs.script(
            "no-python/python3",
            "#!/bin/sh\necho 'stub python3 ran' >&2\nexit 99\n",
        );
        stubs
    }

    fn script(&self, relative: &str, text: &str) {
        use std::os::unix::fs::PermissionsExt;
        let path = self.dir.path().join(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    /// A `dpkg-query` that ignores its arguments, prints `stdout` and
    /// `stderr` and exits with `status` (it reads them from files beside
    /// itself: the provider runs it with a minimal environment).
    fn dpkg_query(&self, stdout: &[u8], stderr: &str, status: i32) {
        let dir = self.dir.path().join("dpkg-query");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("out"), stdout).unwrap();
        std::fs::write(dir.join("err"), stderr).unwrap();
        self.script(
            "dpkg-query/dpkg-query",
            &format!(
                "#!/bin/sh\ncat \"${{0%/*}}/out\"\ncat \"${{0%/*}}/err\" >&2\nexit {status}\n"
            ),
        );
    }

    /// The host's PATH after the given stub directories.
    fn path(&self, dirs: &[&str]) -> OsString {
        let host = std::env::var_os("PATH").unwrap_or_default();
        let mut all: Vec<PathBuf> = dirs.iter().map(|d| self.dir.path().join(d)).collect();
        all.extend(std::env::split_paths(&host));
        std::env::join_paths(all).unwrap()
    }
}

/// Asserts that dpkg.prov lists the packages below `root` without running
/// Python, exactly as dpkg.py does (with the stub directories `dirs` on
/// PATH for both), and returns the listing.
#[track_caller]
fn assert_fast_listing(root: &Path, stubs: &Stubs, dirs: &[&str]) -> Json {
    let reference = python_get(root, &stubs.path(dirs), LISTING);
    assert_eq!(reference.status, Some(0), "{reference:?}");
    let mut no_python = vec!["no-python"];
    no_python.extend_from_slice(dirs);
    let fast = prov_get(root, &stubs.path(&no_python), LISTING);
    assert_eq!(fast.status, Some(0), "the fast path ran Python: {fast:?}");
    let parsed: Json = serde_json::from_str(&fast.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", fast.stdout));
    let expected: Json = serde_json::from_str(&reference.stdout).unwrap();
    assert_eq!(parsed, expected);
    assert_eq!(fast.stdout, reference.stdout, "the same bytes");
    assert_eq!(fast.stderr, reference.stderr);
    assert!(parsed["resources"].is_array(), "{parsed}");
    parsed
}

/// Asserts that dpkg.prov hands the listing below `root` to Python (it
/// fails with Python stubbed out) and answers exactly as dpkg.py does;
/// returns the answer.
#[track_caller]
fn assert_python_listing(root: &Path, stubs: &Stubs, dirs: &[&str]) -> Json {
    let mut no_python = vec!["no-python"];
    no_python.extend_from_slice(dirs);
    let stubbed = prov_get(root, &stubs.path(&no_python), LISTING);
    assert_eq!(stubbed.status, Some(99), "Python was not run: {stubbed:?}");
    assert_eq!(stubbed.stdout, "", "the fast path printed something");
    assert!(stubbed.stderr.contains("stub python3 ran"), "{stubbed:?}");
    let reference = python_get(root, &stubs.path(dirs), LISTING);
    let answer = prov_get(root, &stubs.path(dirs), LISTING);
    assert_eq!(answer, reference);
    serde_json::from_str(&answer.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", answer.stdout))
}

fn package_fast_listing_equals_python_on_synthetic_databases() {
    require_tools(&["dpkg-query"]);
    let stubs = Stubs::new();
    let arch = native_arch();
    // No dpkg database at all, then an empty one.
    let sandbox = Sandbox::new();
    let doc = assert_fast_listing(sandbox.root(), &stubs, &[]);
    assert_eq!(doc, json!({"resources": []}));
    sandbox.write(DPKG_STATUS, "");
    let doc = assert_fast_listing(sandbox.root(), &stubs, &[]);
    assert_eq!(doc, json!({"resources": []}));
    // Every state dpkg knows, Multi-Arch, a held package.
    let status = [
        stanza(
            "libral1",
            "install ok installed",
            "3.1-2",
            &arch,
            "Multi-Arch: same\n",
        ),
        stanza(
            "libral1",
            "install ok installed",
            "3.1-2",
            "i386",
            "Multi-Arch: same\n",
        ),
        stanza(
            "ral-awaited",
            "install ok triggers-awaited",
            "1:2.0~rc1+dfsg-3",
            "all",
            "Triggers-Awaited: ral-pending\n",
        ),
        stanza(
            "ral-gone",
            "deinstall ok config-files",
            "0.5",
            "all",
            "Conffiles:\n /etc/ral-gone.conf 00000000000000000000000000000000\n",
        ),
        stanza("ral-half", "install ok unpacked", "0.7", "all", ""),
        stanza(
            "ral-halfconf",
            "install ok half-configured",
            "0.8",
            "all",
            "",
        ),
        stanza(
            "ral-halfinst",
            "install reinstreq half-installed",
            "0.9",
            "all",
            "",
        ),
        stanza("ral-held", "hold ok installed", "1.0", "all", ""),
        stanza(
            "ral-pending",
            "install ok triggers-pending",
            "2.0",
            "all",
            "Triggers-Pending: /usr/share/ral\n",
        ),
        stanza("ral-purged", "purge ok not-installed", "0.1", "all", ""),
    ]
    .concat();
    sandbox.write(DPKG_STATUS, &status);
    let doc = assert_fast_listing(sandbox.root(), &stubs, &[]);
    let names = names_in(&doc["resources"]);
    assert_eq!(names.len(), 9, "{doc}");
    assert!(names.contains(&format!("libral1:{arch}").as_str()), "{doc}");
    assert!(!names.contains(&"ral-purged"), "{doc}");
    // mark is dpkg's selection: hold only where the status says so.
    for resource in doc["resources"].as_array().unwrap() {
        let held = resource["name"] == "ral-held";
        assert_eq!(
            resource["mark"],
            if held { "hold" } else { "none" },
            "{doc}"
        );
    }
    // A root given through a symbolic link, with a trailing slash.
    let link = stubs.dir.path().join("root-link");
    std::os::unix::fs::symlink(sandbox.root(), &link).unwrap();
    let mut slashed = link.into_os_string();
    slashed.push("/");
    assert_eq!(assert_fast_listing(Path::new(&slashed), &stubs, &[]), doc);
    // The 2,000 packages of package_lists_a_large_database.
    let large = large_status();
    sandbox.write(DPKG_STATUS, &large);
    let doc = assert_fast_listing(sandbox.root(), &stubs, &[]);
    assert_eq!(names_in(&doc["resources"]).len(), 2000);
}

fn package_fast_listing_equals_python_after_installs() {
    let sandbox = package_sandbox("");
    let stubs = Stubs::new();
    // ral-tools brings ral-hello along: two packages dpkg installed.
    sandbox
        .ralsh(&["package", "ral-tools", "ensure=present"])
        .expect(0);
    let doc = assert_fast_listing(sandbox.root(), &stubs, &[]);
    assert_eq!(
        doc["resources"],
        json!([
            {"name": "ral-hello", "ensure": "present", "status": "installed",
             "version": "2.0", "arch": "all", "mark": "none"},
            {"name": "ral-tools", "ensure": "present", "status": "installed",
             "version": "1.0", "arch": "all", "mark": "none"},
        ])
    );
    // Removing ral-hello removes ral-tools and leaves ral-hello's conffile:
    // "rc" in dpkg -l.
    sandbox
        .ralsh(&["package", "ral-hello", "ensure=absent"])
        .expect(0);
    let doc = assert_fast_listing(sandbox.root(), &stubs, &[]);
    assert_eq!(
        doc["resources"],
        json!([{"name": "ral-hello", "ensure": "absent", "status": "config-files",
                "mark": "none"}])
    );
}

fn package_fast_listing_escapes_and_skips_what_python_does() {
    let stubs = Stubs::new();
    let root = tempfile::tempdir().unwrap();
    let cases: &[&[u8]] = &[
        // Quotes and backslashes to escape, states dpkg.py leaves out, an
        // empty line, extra blanks in the status.
        b"a\"q\\\ta\t1\\\"\tinstall ok installed\tall\n\
          b\tb\t2\tpurge ok not-installed\tall\n\
          \n\
          c\tc\t3\tinstall ok no-such-state\tall\n\
          d\\\td\t4\tdeinstall ok config-files\tall\n\
          e\te\t%s\t  hold ok  triggers-pending \tam\"d\\64\n\
          f\tf\t5\t\tall\n\
          g\"\tg\t6\tinstall ok installed\tall\n",
        // No line break after the last line.
        b"a\ta\t1.0\tinstall ok installed\tall",
        // Nothing at all.
        b"",
    ];
    for output in cases {
        stubs.dpkg_query(output, "", 0);
        assert_fast_listing(root.path(), &stubs, &["dpkg-query"]);
    }
}

fn package_fast_listing_runs_dpkg_query_as_python_does() {
    let stubs = Stubs::new();
    // A dpkg-query that lists its arguments, working directory, stdin and
    // environment as the versions of packages.
    stubs.script(
        "dpkg-query/dpkg-query",
        "#!/bin/sh\n\
         printf 'args\\targs\\t%s\\tinstall ok installed\\tall\\n' \"$*\"\n\
         printf 'cwd\\tcwd\\t%s\\tinstall ok installed\\tall\\n' \"$(pwd)\"\n\
         printf 'stdin\\tstdin\\t%s\\tinstall ok installed\\tall\\n' \"$(cat)\"\n\
         printf 'env\\tenv\\t%s\\tinstall ok installed\\tall\\n' \"$(env | sort | tr '\\n\\t' '  ')\"\n",
    );
    let root = tempfile::tempdir().unwrap();
    let link = stubs.dir.path().join("root-link");
    std::os::unix::fs::symlink(root.path(), &link).unwrap();
    // Variables dpkg.py does not pass on (DPKG_ADMINDIR would move
    // dpkg-query's database), an empty HOME, the real root and a fake one
    // through a symbolic link.
    let extra = [
        ("DPKG_ADMINDIR", "/nowhere"),
        ("RAL_TEST", "x"),
        ("HOME", ""),
    ];
    for root in [Path::new("/"), &link] {
        let path = stubs.path(&["no-python", "dpkg-query"]);
        let reference = call_with(dpkg_py(&["ral_action=get"]), root, &path, LISTING, &extra);
        let doc: Json = serde_json::from_str(&reference.stdout).unwrap();
        let seen = |name: &str| {
            doc["resources"]
                .as_array()
                .unwrap()
                .iter()
                .find(|r| r["name"] == name)
                .unwrap_or_else(|| panic!("no {name} in {doc}"))["version"]
                .as_str()
                .unwrap()
                .to_owned()
        };
        let admindir = format!(
            "--admindir={}/var/lib/dpkg ",
            root.canonicalize().unwrap().display()
        );
        assert_eq!(
            seen("args"),
            format!(
                "{}-W -f ${{binary:Package}}\\t${{Package}}\\t${{Version}}\\t${{Status}}\\t${{Architecture}}\\n",
                if root == Path::new("/") { "" } else { &admindir }
            )
        );
        assert_eq!(seen("cwd"), "/");
        assert_eq!(seen("stdin"), "");
        assert!(!seen("env").contains("DPKG_ADMINDIR"), "{doc}");
        let mut command = Command::new(providers_dir().join("dpkg.prov"));
        command.arg("ral_action=get");
        let fast = call_with(command, root, &path, LISTING, &extra);
        assert_eq!(fast.status, Some(0), "the fast path ran Python: {fast:?}");
        assert_eq!(fast, reference);
    }
}

fn package_fast_listing_falls_back_to_python() {
    let stubs = Stubs::new();
    let root = tempfile::tempdir().unwrap();
    // dpkg-query fails: dpkg.py's error, quoting its stderr.
    stubs.dpkg_query(b"", "dpkg-query: error: the database is on fire\n", 2);
    let doc = assert_python_listing(root.path(), &stubs, &["dpkg-query"]);
    assert_eq!(
        doc,
        json!({"error": {"kind": "failed", "message":
            "dpkg-query failed (exit status 2):\ndpkg-query: error: the database is on fire"}})
    );
    // It fails saying nothing on stderr, after a good listing.
    stubs.dpkg_query(b"a\ta\t1.0\tinstall ok installed\tall\n", "", 1);
    let doc = assert_python_listing(root.path(), &stubs, &["dpkg-query"]);
    assert_eq!(
        doc["error"]["message"],
        "dpkg-query failed (exit status 1):\na?a?1.0?install ok installed?all"
    );
    let cases: &[(&[u8], &str)] = &[
        // A warning on stderr.
        (b"a\ta\t1.0\tinstall ok installed\tall\n", "dpkg-query: warning: x\n"),
        // Bytes dpkg.py decodes, splits lines on or escapes.
        (b"a\ta\t1.0\xc3\xa9\tinstall ok installed\tall\n", ""),
        (b"a\ta\t1.0\xff\tinstall ok installed\tall\n", ""),
        (b"a\ta\t1.0\0\tinstall ok installed\tall\n", ""),
        (b"a\ta\t1.0\tinstall ok installed\tall\r\nb\tb\t2\tinstall ok installed\tall\n", ""),
        (b"a\ta\t1.0\x7f\tinstall ok installed\tall\n", ""),
        // Not five fields, no name, a name twice (dpkg.py keeps the first
        // place and the last value).
        (b"a\ta\t1.0\tinstall ok installed\tall\tx\n", ""),
        (b"a\ta\t1.0\tinstall ok installed\n", ""),
        (b"\ta\t1.0\tinstall ok installed\tall\n", ""),
        (b"a\ta\t1\tinstall ok installed\tall\nb\tb\t1\tinstall ok installed\tall\na\ta\t2\tinstall ok unpacked\tall\n", ""),
        // What looks like the status line the fast path appends.
        (b"a\ta\t1\tinstall ok installed\tall\n\x01status=0 stderr=0\n", ""),
    ];
    for (output, stderr) in cases {
        stubs.dpkg_query(output, stderr, 0);
        assert_python_listing(root.path(), &stubs, &["dpkg-query"]);
    }
    // With the real dpkg-query: a version that is not ASCII, which dpkg
    // warns about on stderr.
    require_tools(&["dpkg-query"]);
    let sandbox = Sandbox::new();
    let status = [
        stanza("ral-accent", "install ok installed", "1.0\u{e9}", "all", ""),
        stanza("ral-plain", "install ok installed", "1.0", "all", ""),
    ]
    .concat();
    sandbox.write(DPKG_STATUS, &status);
    let doc = assert_python_listing(sandbox.root(), &stubs, &[]);
    assert_eq!(doc["resources"][0]["version"], "1.0\u{e9}", "{doc}");
    assert_eq!(names_in(&doc["resources"]), ["ral-accent", "ral-plain"]);
}

fn package_provider_hands_other_calls_to_python() {
    require_tools(&["dpkg-query"]);
    let stubs = Stubs::new();
    let sandbox = Sandbox::new();
    sandbox.write(
        DPKG_STATUS,
        &stanza("ral-hello", "install ok installed", "1.0", "all", ""),
    );
    let root = sandbox.root();
    for request in [
        r#"{"names":["ral-hello"]}"#,
        "{\"names\":[]}\n",
        r#"{"names":[]} "#,
        r#"{"names":[]}{}"#,
        r#"{"names":["#,
        "",
    ] {
        let stubbed = prov_get(root, &stubs.path(&["no-python"]), request);
        assert_eq!(stubbed.status, Some(99), "{request:?}: {stubbed:?}");
        assert_eq!(stubbed.stdout, "", "{request:?}");
        let answer = prov_get(root, &stubs.path(&[]), request);
        assert_eq!(
            answer,
            python_get(root, &stubs.path(&[]), request),
            "{request:?}"
        );
    }
    // Other actions and arguments: dpkg.py, with stdin as it was.
    for args in [
        &["ral_action=describe"][..],
        &["ral_action=get", "extra"],
        &["ral_action=set"],
        &[],
    ] {
        let request = r#"{"updates": [], "ral": {"noop": true}}"#;
        let mut command = Command::new(providers_dir().join("dpkg.prov"));
        command.args(args);
        let answer = call(command, root, &stubs.path(&[]), request);
        let reference = call(dpkg_py(args), root, &stubs.path(&[]), request);
        assert_eq!(answer, reference, "{args:?}");
        assert_eq!(answer.status, Some(0), "{args:?}: {answer:?}");
    }
}

fn package_listing_through_ralsh_runs_no_python() {
    require_tools(&["dpkg-query"]);
    let stubs = Stubs::new();
    let sandbox = Sandbox::new();
    let status = [
        stanza("ral-gone", "deinstall ok config-files", "0.5", "all", ""),
        stanza("ral-hello", "hold ok installed", "1.0", "all", ""),
    ]
    .concat();
    sandbox.write(DPKG_STATUS, &status);
    let no_python = stubs.path(&["no-python"]);
    let mut command = sandbox.fixture_command(&["-j", "package"]);
    command.env("PATH", &no_python);
    let doc = run(&mut command).expect(0).json();
    assert_eq!(
        doc["resources"],
        json!([
            {"name": "ral-gone", "ensure": "absent", "status": "config-files",
             "mark": "none", "ral": ral()},
            {"name": "ral-hello", "ensure": "present", "status": "installed",
             "version": "1.0", "arch": "all", "mark": "hold", "ral": ral()},
        ])
    );
    // The stub is in the way of anything else: finding one package needs
    // Python.
    let mut command = sandbox.fixture_command(&["-j", "package", "ral-hello"]);
    command.env("PATH", &no_python);
    let run = run(&mut command);
    assert_ne!(run.status, 0, "{run:?}");
    run.stderr_has("stub python3 ran");
}
