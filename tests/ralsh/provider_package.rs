//! The bundled `package::dpkg` provider end to end through ralsh, with the
//! real dpkg and apt-get, on a fake root: a dpkg database below
//! var/lib/dpkg and a local flat apt repository below srv/apt-repo, made of
//! tiny packages built here with dpkg-deb.

use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

use serde_json::{json, Value as Json};

use crate::support::{assert_same_tree, names_in, tree_snapshot, Sandbox};

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
fn native_arch() -> String {
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

/// Whether dpkg and apt can install here: they run only as root (CI runs
/// the tests as root, on Debian).
fn can_install() -> bool {
    let root = std::fs::metadata("/proc/self").is_ok_and(|meta| meta.uid() == 0);
    let apt = Command::new("apt-get").arg("--version").output().is_ok();
    if !(root && apt) {
        skip_outside_ci("installing packages needs root and apt-get");
    }
    root && apt
}

/// Notes a skipped test; in CI (which runs as root on Debian) a skip would
/// hide a broken set-up, so it fails instead.
fn skip_outside_ci(reason: &str) {
    assert!(
        std::env::var_os("CI").is_none(),
        "CI must run this test, but {reason}"
    );
    eprintln!("skipped: {reason}");
}

/// A fake root with a dpkg database holding `status`, and the test
/// repository as its only apt source, its package lists already fetched;
/// None when packages cannot be installed here.
fn package_sandbox(status: &str) -> Option<Sandbox> {
    if !can_install() {
        return None;
    }
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
    Some(sandbox)
}

/// dpkg's word for the package's state and its version in the fake root's
/// database, or None when dpkg does not know it.
fn dpkg_state(sandbox: &Sandbox, package: &str) -> Option<String> {
    let output = Command::new("dpkg-query")
        .arg(format!(
            "--admindir={}",
            sandbox.root().join("var/lib/dpkg").display()
        ))
        .args(["-W", "-f", "${db:Status-Status} ${Version}", "--", package])
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
fn stanza(package: &str, status: &str, version: &str, arch: &str, extra: &str) -> String {
    format!(
        "Package: {package}\nStatus: {status}\nMaintainer: ral tests <ral@example.org>\nArchitecture: {arch}\nVersion: {version}\n{extra}Description: synthetic\n\n"
    )
}

fn ral() -> Json {
    json!({"type": "package", "provider": "package::dpkg"})
}

#[test]
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
        stanza("ral-hello", "install ok installed", "1.0", "all", ""),
        stanza("ral-purged", "purge ok not-installed", "0.1", "all", ""),
    ]
    .concat();
    let Some(sandbox) = package_sandbox(&status) else {
        return;
    };
    let doc = sandbox.ralsh(&["-j", "package"]).expect(0).json();
    let multiarch = format!("libral1:{arch}");
    assert_eq!(
        doc["resources"],
        json!([
            {"name": multiarch, "ensure": "present", "status": "installed",
             "version": "3.1-2", "arch": arch, "ral": ral()},
            {"name": "ral-gone", "ensure": "absent", "status": "config-files", "ral": ral()},
            {"name": "ral-half", "ensure": "absent", "status": "unpacked",
             "version": "0.7", "arch": "all", "ral": ral()},
            {"name": "ral-hello", "ensure": "present", "status": "installed",
             "version": "1.0", "arch": "all", "ral": ral()},
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
        json!({"name": "ral-tools", "ensure": "absent", "status": "not-installed", "ral": ral()})
    );
    // Config files only: absent, and not found with -a.
    sandbox.ralsh(&["-a", "package", "ral-gone"]).expect(1);
    // Neither installed nor offered, and not even a valid name: unknown.
    let run = sandbox.ralsh(&["-j", "package", "ral-nosuch"]);
    assert_eq!(run.expect(1).json(), json!({}));
    sandbox.ralsh(&["package", "Not_A_Name"]).expect(1);
}

#[test]
fn package_lists_a_large_database() {
    if Command::new("dpkg-query")
        .arg("--version")
        .output()
        .is_err()
    {
        skip_outside_ci("there is no dpkg-query");
        return;
    }
    let sandbox = Sandbox::new();
    let status: String = (0..2000)
        .map(|n| {
            stanza(
                &format!("ral-pkg{n:04}"),
                "install ok installed",
                &format!("1.{n}-1"),
                "all",
                "",
            )
        })
        .collect();
    sandbox.write(DPKG_STATUS, &status);
    let doc = sandbox.ralsh(&["-j", "package"]).expect(0).json();
    let names = names_in(&doc["resources"]);
    assert_eq!(names.len(), 2000);
    assert_eq!(names[0], "ral-pkg0000");
    assert_eq!(names[1999], "ral-pkg1999");
    assert_eq!(doc["resources"][1234]["version"], "1.1234-1");
}

#[test]
fn package_installs_changes_versions_removes_and_purges() {
    let host_before = host_package_state();
    let Some(sandbox) = package_sandbox("") else {
        return;
    };
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

#[test]
fn package_dependencies_come_along_and_are_reported() {
    let Some(sandbox) = package_sandbox("") else {
        return;
    };
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

#[test]
fn package_noop_previews_and_leaves_the_root_byte_identical() {
    let Some(sandbox) = package_sandbox("") else {
        return;
    };
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

#[test]
fn package_rejects_bad_requests_and_changes_nothing() {
    let Some(sandbox) = package_sandbox("") else {
        return;
    };
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
