//! Sensitive values of simple-convention providers: with `sensitive_in:
//! env` each is an environment variable of the attribute's name, which
//! only the provider's owner can read, and never on its command line,
//! which every user can read in /proc; without it (libral's providers)
//! the value is on the command line as before, and ral warns once per run.
//! The fixtures `envsecret` and `argsecret` are one bash script that
//! does `eval "$@"` and records its command line and environment.

use crate::support::{fixtures_dir, run, Sandbox};

const SECRET: &str = "s3cr'et $(id) `id`\nline two";

/// The NUL-separated entries a fixture recorded in ROOT/FILE.
fn entries(sandbox: &Sandbox, file: &str) -> Vec<String> {
    let bytes = std::fs::read(sandbox.root().join(file)).unwrap();
    String::from_utf8(bytes)
        .unwrap()
        .split('\0')
        .filter(|entry| !entry.is_empty())
        .map(str::to_owned)
        .collect()
}

#[test]
fn a_sensitive_value_is_in_the_environment_and_never_on_the_command_line() {
    let sandbox = Sandbox::new();
    let password = format!("password={SECRET}");
    let run = sandbox.ralsh(&["-j", "envsecret", "a", "comment=plain", &password]);
    run.expect(0);
    assert!(!run.stdout.contains("s3cr"), "{}", run.stdout);
    assert!(!run.stderr.contains("s3cr"), "{}", run.stderr);
    assert!(!run.stderr.contains("/proc"), "no warning: {}", run.stderr);

    let cmdline = entries(&sandbox, "cmdline.a");
    assert!(
        cmdline.iter().all(|arg| !arg.contains("s3cr")),
        "{cmdline:?}"
    );
    assert_eq!(
        cmdline[2..],
        ["ral_action=update", "name=a", "comment=plain"]
    );
    let env = entries(&sandbox, "env.a");
    assert!(env.contains(&format!("password={SECRET}")), "{env:?}");
    assert!(
        env.contains(&"RALSH_SENSITIVE=password".to_owned()),
        "{env:?}"
    );
    // The script's `eval "$@"` leaves $password as the environment has it.
    assert_eq!(sandbox.read("password.a"), SECRET);
}

#[test]
fn without_a_sensitive_value_nothing_is_added_to_the_environment() {
    let sandbox = Sandbox::new();
    sandbox
        .ralsh(&["envsecret", "a", "comment=plain"])
        .expect(0);
    let env = entries(&sandbox, "env.a");
    assert!(
        env.iter()
            .all(|var| !var.starts_with("password=") && !var.starts_with("RALSH_SENSITIVE=")),
        "{env:?}"
    );
    assert_eq!(sandbox.read("password.a"), "unset");
}

#[test]
fn a_value_holding_a_nul_is_refused_before_the_provider_runs() {
    let sandbox = Sandbox::new();
    let manifests = tempfile::tempdir().unwrap();
    let manifest = manifests.path().join("m.yaml");
    std::fs::write(&manifest, "envsecret:\n  a: {password: \"x\\0y\"}\n").unwrap();
    let fixtures = fixtures_dir();
    let run = run(&mut sandbox.ral_command(
        "apply",
        &["-I", fixtures.to_str().unwrap(), manifest.to_str().unwrap()],
    ));
    // The task fails, as one with a NUL on the command line does ("nul
    // byte found in provided data").
    run.expect(1).stdout_has(
        "s): envsecret::envsecret: the value of the sensitive attribute 'password' holds a NUL \
         character, which no environment variable can hold",
    );
    assert!(!sandbox.root().join("made.a").exists(), "{run:?}");
}

#[test]
fn libral_providers_keep_the_value_on_the_command_line_with_one_warning_per_run() {
    let sandbox = Sandbox::new();
    let manifests = tempfile::tempdir().unwrap();
    let manifest = manifests.path().join("m.yaml");
    std::fs::write(
        &manifest,
        "argsecret:\n  a: {password: one-s3cret}\n  b: {password: two-s3cret}\n\
         envsecret:\n  c: {password: three-s3cret}\n",
    )
    .unwrap();
    let fixtures = fixtures_dir();
    let run = run(&mut sandbox.ral_command(
        "apply",
        &["-I", fixtures.to_str().unwrap(), manifest.to_str().unwrap()],
    ));
    run.expect(0);
    let warning = "argsecret::argsecret: its sensitive values are passed on its \
                   command line, which every user of this machine can read in /proc while it \
                   runs; a provider that reads them from its environment says so with \
                   'sensitive_in: env' under 'provider:' in its metadata";
    assert_eq!(run.stderr.matches(warning).count(), 1, "{}", run.stderr);
    assert_eq!(run.stderr.matches("/proc").count(), 1, "{}", run.stderr);
    assert!(!run.stderr.contains("s3cret"), "{}", run.stderr);
    assert!(!run.stdout.contains("s3cret"), "{}", run.stdout);
    for (name, secret) in [("a", "one-s3cret"), ("b", "two-s3cret")] {
        assert!(
            entries(&sandbox, &format!("cmdline.{name}")).contains(&format!("password={secret}")),
            "{name}"
        );
        assert_eq!(sandbox.read(&format!("password.{name}")), secret);
    }
    assert!(!entries(&sandbox, "cmdline.c")
        .iter()
        .any(|arg| arg.contains("s3cret")));
    assert_eq!(sandbox.read("password.c"), "three-s3cret");
}

/// ralsh with the fixture providers, ARGS, and INPUT on its stdin.
fn ralsh_with_stdin(sandbox: &Sandbox, args: &[&str], input: &str) -> crate::support::Run {
    crate::support::run_with_stdin(&mut sandbox.fixture_command(args), input)
}

#[test]
fn ralsh_reads_values_from_stdin_so_that_no_command_line_holds_them() {
    let sandbox = Sandbox::new();
    let input = serde_json::json!({"password": SECRET, "comment": "plain"}).to_string();
    let run = ralsh_with_stdin(
        &sandbox,
        &["-j", "--attrs-stdin", "envsecret", "a", "ensure=present"],
        &input,
    );
    run.expect(0);
    assert_eq!(run.json()["result"][0]["resource"]["comment"], "plain");
    assert_eq!(sandbox.read("password.a"), SECRET);
    // Neither ralsh's command line nor any other held it while the
    // provider ran.
    assert_eq!(sandbox.read("seen.a"), "");
    assert!(entries(&sandbox, "cmdline.a").contains(&"comment=plain".to_owned()));

    // A name holding '=' would set another attribute: refused, as is a
    // value that is not a text.
    for (input, message) in [
        (
            r#"{"comment=pwn": "x"}"#,
            "ralsh: error: --attrs-stdin: 'comment=pwn' is not an attribute name (letters, \
             digits and '_', not starting with a digit)",
        ),
        (
            r#"{"comment": 5}"#,
            "ralsh: error: --attrs-stdin: the value of 'comment' is not a string",
        ),
        (
            "[1]",
            "ralsh: error: --attrs-stdin: stdin is not a JSON object of attribute texts",
        ),
    ] {
        let sandbox = Sandbox::new();
        let run = ralsh_with_stdin(&sandbox, &["--attrs-stdin", "envsecret", "b"], input);
        run.expect(2).stderr_has(message);
        assert!(!sandbox.root().join("made.b").exists(), "{input}");
    }
}

#[test]
fn every_bundled_provider_with_sensitive_attributes_keeps_them_off_its_command_line() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("providers");
    let mut checked = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|ext| ext != "yaml") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let meta = ral::metadata::Metadata::parse(&text, &path).unwrap();
        if meta.attributes.values().any(|a| a.sensitive) {
            // json providers read every value on stdin.
            assert!(
                meta.invoke == ral::metadata::Invoke::Json
                    || meta.sensitive_in == ral::metadata::SensitiveIn::Env,
                "{}",
                path.display()
            );
            checked.push(meta.name);
        }
    }
    assert!(checked.contains(&"etc_passwd".to_owned()), "{checked:?}");
}

#[test]
fn the_bundled_user_provider_sets_a_password_hash_that_no_command_line_holds() {
    const HASH: &str = "$6$c2FsdA$SecretiveHashForTheTest0123456789";
    let sandbox = Sandbox::new();
    sandbox.write("etc/passwd", "root:x:0:0:root:/root:/bin/bash\n");
    sandbox.write("etc/shadow", "root:*:19700:0:99999:7:::\n");
    sandbox.write("etc/group", "root:x:0:\n");
    // ralsh runs the bundled provider in its own process, where no
    // command line is made; run as a program (from a data directory that
    // holds its script, which comes before the bundled one), the script
    // runs the native providers' program beside it: here a script that
    // looks for the hash on every command line of the machine, then the
    // real program.
    let data = tempfile::tempdir().unwrap();
    let providers = data.path().join("providers");
    std::fs::create_dir(&providers).unwrap();
    let bundled = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("providers");
    for file in ["etc_passwd.prov", "etc_passwd.yaml"] {
        std::fs::copy(bundled.join(file), providers.join(file)).unwrap();
    }
    let seen = sandbox.root().join("seen");
    let shim = providers.join("ral-provider");
    std::fs::write(
        &shim,
        format!(
            "#!/bin/bash\n: >> {seen}\nfor f in /proc/[0-9]*/cmdline; do\n  \
             c=$(tr '\\0' ' ' 2>/dev/null <\"$f\") || continue\n  \
             case $c in *'{HASH}'*) printf '%s\\n' \"$c\" >> {seen} ;; esac\ndone\n\
             exec {program} \"$@\"\n",
            seen = seen.display(),
            program = env!("CARGO_BIN_EXE_ral-provider")
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&shim, std::fs::Permissions::from_mode(0o755)).unwrap();

    let input = serde_json::json!({ "password": HASH }).to_string();
    let mut command = sandbox.command();
    command.arg("-I").arg(data.path()).args([
        "--attrs-stdin",
        "user",
        "carol",
        "ensure=present",
        "uid=1500",
    ]);
    crate::support::run_with_stdin(&mut command, &input).expect(0);
    assert!(
        sandbox
            .read("etc/shadow")
            .contains(&format!("\ncarol:{HASH}:")),
        "{}",
        sandbox.read("etc/shadow")
    );
    assert!(seen.exists(), "the shim did not run");
    assert_eq!(sandbox.read("seen"), "", "command lines holding the hash");

    // On ralsh's command line, the shim sees it there.
    let other = HASH.replace("Secretive", "Other");
    let mut command = sandbox.command();
    command
        .arg("-I")
        .arg(data.path())
        .args(["user", "carol", &format!("password={other}")]);
    std::fs::write(
        &shim,
        std::fs::read_to_string(&shim)
            .unwrap()
            .replace(HASH, &other),
    )
    .unwrap();
    run(&mut command).expect(0);
    assert!(
        sandbox.read("seen").contains("ralsh"),
        "{}",
        sandbox.read("seen")
    );
}
