//! The providers shown in docs/providers.md (the provider author's guide)
//! work as it says, and it shows them verbatim: a bash one (simple
//! convention) and a Python one on the ral_provider toolkit (json
//! convention), which `ral check` passes.

use std::process::Command;

use crate::support::{fixtures_dir, run, Sandbox};

#[test]
fn the_guide_shows_the_tested_example_providers_verbatim() {
    let guide =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/providers.md")).unwrap();
    for file in [
        "example_setting.prov",
        "example_setting.yaml",
        "example_tokens.prov",
        "example_tokens.yaml",
    ] {
        let text = std::fs::read_to_string(fixtures_dir().join("providers").join(file)).unwrap();
        assert!(
            guide.contains(&text),
            "docs/providers.md must contain {file} verbatim"
        );
    }
}

#[test]
fn the_guide_shows_the_compiled_library_sketch_verbatim() {
    let root = env!("CARGO_MANIFEST_DIR");
    let guide = std::fs::read_to_string(format!("{root}/docs/architecture.md")).unwrap();
    let example = std::fs::read_to_string(format!("{root}/examples/converge.rs")).unwrap();
    // The example's own header (its //! lines and the blank line after
    // them) is not part of the sketch.
    let sketch: String = example
        .lines()
        .skip_while(|line| line.starts_with("//!") || line.is_empty())
        .map(|line| format!("{line}\n"))
        .collect();
    assert!(
        guide.contains(&format!("```rust\n{sketch}```")),
        "docs/architecture.md must show examples/converge.rs verbatim"
    );
}

#[test]
fn example_provider_lists_creates_changes_and_deletes() {
    let sandbox = Sandbox::new();
    sandbox.write("etc/example.conf", "");
    assert_eq!(sandbox.ralsh(&["setting"]).expect(0).stdout, "");
    let run = sandbox.ralsh(&["setting", "color", "value=dark blue"]);
    assert!(
        run.expect(0)
            .stdout
            .ends_with("ensure: 'absent' -> 'present'\nvalue: (none) -> 'dark blue'\n"),
        "{}",
        run.stdout
    );
    sandbox.ralsh(&["setting", "size", "value=3"]).expect(0);
    assert_eq!(
        sandbox.read("etc/example.conf"),
        "color = dark blue\nsize = 3\n"
    );
    let run = sandbox.ralsh(&["-n", "setting", "size", "value=4"]);
    assert!(run
        .expect(0)
        .stdout
        .ends_with("value: '3' -> '4' (noop: would change)\n"));
    assert_eq!(
        sandbox.read("etc/example.conf"),
        "color = dark blue\nsize = 3\n"
    );
    sandbox
        .ralsh(&["setting", "color", "ensure=absent"])
        .expect(0);
    assert_eq!(sandbox.read("etc/example.conf"), "size = 3\n");
    let run = sandbox.ralsh(&["setting", "bad name", "value=1"]);
    assert!(run
        .expect(2)
        .stderr
        .contains("invalid setting name 'bad name'"));
}

#[test]
fn python_example_uses_the_toolkit_locks_and_never_shows_the_token() {
    let sandbox = Sandbox::new();
    std::fs::create_dir(sandbox.root().join("etc")).unwrap();
    let run = sandbox.ralsh(&["-l", "info", "token", "api", "token=s3cr3t"]);
    run.expect(0)
        .stdout_has("ensure: 'absent' -> 'present'")
        .stdout_has("token: (none) -> [redacted]")
        .stderr_has("[token::example_tokens] api: creating: created");
    assert!(!run.stdout.contains("s3cr3t") && !run.stderr.contains("s3cr3t"));
    assert_eq!(sandbox.read("etc/example-tokens"), "api s3cr3t\n");
    sandbox.ralsh(&["token", "ci", "token=other"]).expect(0);
    let run = sandbox.ralsh(&["-n", "token", "api", "ensure=absent"]);
    run.expect(0).stdout_has("(noop: would change)");
    assert_eq!(sandbox.read("etc/example-tokens"), "api s3cr3t\nci other\n");
    let doc = sandbox.ralsh(&["-j", "token"]).expect(0).json();
    assert_eq!(doc["resources"][1]["token"], "[redacted]");
    sandbox
        .ralsh(&["token", "api", "ensure=absent"])
        .expect(0)
        .stdout_has("ensure: 'present' -> 'absent'");
    assert_eq!(sandbox.read("etc/example-tokens"), "ci other\n");
    assert_eq!(
        sandbox.names_in_dir("etc"),
        [".example-tokens.ral-lock", "example-tokens"]
    );
    sandbox
        .ralsh(&["token", "bad name", "token=x"])
        .expect(2)
        .stderr_has("name: 'bad name' is not one word");
}

#[test]
fn python_example_passes_ral_check() {
    let cache = tempfile::tempdir().unwrap();
    let run = run(Command::new(env!("CARGO_BIN_EXE_ral"))
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap())
        .env("HOME", cache.path())
        .arg("check")
        // Correctness, not speed: a loaded machine must not fail it.
        .args(["--slow", "60", "--seed"])
        .arg(fixtures_dir().join("seed"))
        .arg(fixtures_dir().join("providers/example_tokens.prov")));
    // The seed holds a token, so find, noop and update all run.
    run.expect(0)
        .stdout_has("noop ")
        .stdout_has("update ")
        .stdout_has("1 of 1 provider(s) clean");
}

/// The Rust example of the guide (crates/ral-sdk/examples/native_tokens.rs), as `cargo
/// test` builds it beside this build's binaries.
fn rust_example() -> std::path::PathBuf {
    let built = std::path::Path::new(env!("CARGO_BIN_EXE_ral"))
        .parent()
        .unwrap()
        .join("examples/native_tokens");
    assert!(
        built.is_file(),
        "{} is missing: `cargo test` builds it (or `cargo build --example native_tokens`)",
        built.display()
    );
    built
}

/// A data directory holding the Rust example as `native_tokens.prov`.
fn rust_example_dir() -> tempfile::TempDir {
    let data = tempfile::tempdir().unwrap();
    std::fs::create_dir(data.path().join("providers")).unwrap();
    std::fs::copy(
        rust_example(),
        data.path().join("providers/native_tokens.prov"),
    )
    .unwrap();
    data
}

#[test]
fn the_guide_shows_the_rust_example_verbatim() {
    let root = env!("CARGO_MANIFEST_DIR");
    let guide = std::fs::read_to_string(format!("{root}/docs/providers.md")).unwrap();
    let example =
        std::fs::read_to_string(format!("{root}/crates/ral-sdk/examples/native_tokens.rs"))
            .unwrap();
    assert!(
        guide.contains(&format!("```rust\n{example}```")),
        "docs/providers.md must show crates/ral-sdk/examples/native_tokens.rs verbatim"
    );
}

#[test]
fn rust_example_manages_tokens_as_the_python_one_does() {
    let sandbox = Sandbox::new();
    let data = rust_example_dir();
    let ralsh = |args: &[&str]| run(&mut sandbox.command_in(data.path(), args));
    sandbox.write("etc/example-tokens", "ci old\n");
    let created = ralsh(&["-l", "info", "token::native_tokens", "api", "token=s3cret"]);
    created
        .expect(0)
        .stdout_has("ensure: 'absent' -> 'present'")
        .stderr_has("[token::native_tokens] api: creating: created");
    assert!(!created.stdout.contains("s3cret") && !created.stderr.contains("s3cret"));
    ralsh(&["token::native_tokens", "ci", "token=new"])
        .expect(0)
        .stdout_has("token: [redacted] -> [redacted]");
    assert_eq!(sandbox.read("etc/example-tokens"), "ci new\napi s3cret\n");
    let doc = ralsh(&["-j", "token::native_tokens"]).expect(0).json();
    assert_eq!(doc["resources"][1]["name"], "api");
    assert_eq!(doc["resources"][1]["token"], "[redacted]");
    ralsh(&["-n", "token::native_tokens", "ci", "ensure=absent"]).expect(0);
    assert_eq!(
        sandbox.read("etc/example-tokens"),
        "ci new\napi s3cret\n",
        "noop"
    );
    ralsh(&["token::native_tokens", "ci", "ensure=absent"])
        .expect(0)
        .stdout_has("ensure: 'present' -> 'absent'");
    assert_eq!(sandbox.read("etc/example-tokens"), "api s3cret\n");
    ralsh(&["token::native_tokens", "bad name", "token=x"])
        .expect(2)
        .stderr_has("name: 'bad name' is not one word");
}

#[test]
fn rust_example_passes_ral_check() {
    let cache = tempfile::tempdir().unwrap();
    let data = rust_example_dir();
    let run = run(Command::new(env!("CARGO_BIN_EXE_ral"))
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap())
        .env("HOME", cache.path())
        .arg("check")
        // Correctness, not speed: a loaded machine must not fail it.
        .args(["--slow", "60", "--seed"])
        .arg(fixtures_dir().join("seed"))
        .arg(data.path().join("providers/native_tokens.prov")));
    run.expect(0)
        .stdout_has("noop ")
        .stdout_has("update ")
        .stdout_has("1 of 1 provider(s) clean");
}
