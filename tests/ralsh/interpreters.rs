//! Scripts of `#!/usr/bin/env python3` started without `env` or a shim at
//! each call: a fake shim first on PATH (as pyenv's or asdf's is) counts
//! how often it is run, and leads to the real Python.

use std::os::unix::fs::PermissionsExt;

use crate::support::{run, Sandbox};

/// The real Python's executable, as it says itself.
fn real_python() -> String {
    let out = std::process::Command::new("python3")
        .args([
            "-I",
            "-S",
            "-c",
            "import sys; sys.stdout.write(sys.executable)",
        ])
        .output()
        .expect("python3 runs");
    String::from_utf8(out.stdout).unwrap()
}

/// A directory holding a `python3` shim that logs each start to `log`
/// and then runs the real Python.
fn shim_dir(log: &std::path::Path) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let shim = dir.path().join("python3");
    std::fs::write(
        &shim,
        format!(
            "#!/bin/sh\necho started >> '{}'\nexec '{}' \"$@\"\n",
            log.display(),
            real_python()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&shim, std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

#[test]
fn a_shim_first_on_path_runs_at_most_twice_per_run_not_once_per_call() {
    let sandbox = Sandbox::new();
    let logs = tempfile::tempdir().unwrap();
    let log = logs.path().join("shim.log");
    let shims = shim_dir(&log);
    let path = format!(
        "{}:{}",
        shims.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    // Three names changed: six calls of a Python provider of the simple
    // convention, a find and an update each (six starts of the shim
    // without the change).
    let mut command = sandbox.fixture_command(&["quote::python", "web", "db", "mail", "value=x"]);
    let changed = run(command.env("PATH", &path));
    changed.expect(0);
    let starts = std::fs::read_to_string(&log).unwrap_or_default();
    assert_eq!(
        starts.lines().count(),
        2,
        "the shim ran for the first call, then once to say where Python is"
    );
    // Each update wrote the name it was given: the last one is there.
    assert_eq!(sandbox.read("name.python"), "mail");
    assert_eq!(sandbox.read("value.python"), "x");
    // ralsh -v says which program runs the providers, and through what.
    let listed = run(sandbox.fixture_command(&["-v"]).env("PATH", &path));
    listed.expect(0).stderr_has(&format!(
        "providers run python3 as {}, through {}/python3 on PATH (found once per run)",
        real_python(),
        shims.path().display()
    ));
}

#[test]
fn a_script_that_is_not_executable_is_refused_as_before() {
    let sandbox = Sandbox::new();
    let data = tempfile::tempdir().unwrap();
    let providers = data.path().join("providers");
    std::fs::create_dir(&providers).unwrap();
    std::fs::write(
        providers.join("plain.prov"),
        "#!/usr/bin/env -S python3 -I -S\nprint('# simple')\n",
    )
    .unwrap();
    std::fs::write(
        providers.join("plain.yaml"),
        "provider:\n  type: plain\n  invoke: simple\n  actions: [list]\n  suitable: true\n  \
         attributes:\n    name: {}\n",
    )
    .unwrap();
    let listed = sandbox.ralsh_in(data.path(), &["plain"]);
    assert_ne!(listed.status, 0, "a provider without the x bit never runs");
}
