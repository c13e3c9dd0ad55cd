//! A mistyped type, provider, attribute or file is answered with the
//! closest known name, in ralsh, in a manifest and in ral check; a name
//! far from every known one gets no guess.

use std::path::Path;
use std::process::Command;

use crate::support::{run, Sandbox};

#[test]
fn mistyped_names_are_answered_with_the_closest_known_one() {
    let sandbox = Sandbox::new();
    sandbox.write("etc/hosts", "127.0.0.1 localhost\n");
    for (args, said) in [
        (
            &["usr"][..],
            "unknown provider or type 'usr' (did you mean 'user'?)",
        ),
        (
            &["hots", "web"],
            "unknown provider or type 'hots' (did you mean 'host'?)",
        ),
        (
            &["host::etc_host"],
            "unknown provider or type 'host::etc_host' (did you mean 'host::etc_hosts'?)",
        ),
        (
            &["host", "web", "aliases=x"],
            "unknown attribute 'aliases' (did you mean 'host_aliases'?)",
        ),
    ] {
        let mut command = sandbox.command();
        run(command.args(args)).expect(2).stderr_has(said);
    }
    let mut far = sandbox.command();
    let far = run(far.arg("zzzz"));
    far.expect(2)
        .stderr_has("unknown provider or type 'zzzz'; run `ralsh`");
    assert!(!far.stderr.contains("did you mean"), "{}", far.stderr);

    let manifests = tempfile::tempdir().unwrap();
    let manifest = manifests.path().join("site.yaml");
    std::fs::write(
        &manifest,
        "hots:\n  web: {ip: 10.0.0.5}\nhost:\n  db: {ip: 10.0.0.6, aliases: [x]}\n  \
         app: {ip: 10.0.0.7, requires: \"host[db]\"}\n",
    )
    .unwrap();
    run(&mut sandbox.ral_command("plan", &[manifest.to_str().unwrap()]))
        .expect(2)
        .stderr_has("site.yaml:2: unknown provider or type 'hots' (did you mean 'host'?)")
        .stderr_has(
            "site.yaml:4: host[db]: unknown attribute 'aliases' (did you mean 'host_aliases'?)",
        )
        .stderr_has(
            "site.yaml:5: host[app]: unknown attribute 'requires' (did you mean 'require'?)",
        );

    let providers = Path::new(env!("CARGO_MANIFEST_DIR")).join("providers");
    run(Command::new(env!("CARGO_BIN_EXE_ral"))
        .arg("check")
        .arg(providers.join("etc_host.prov")))
    .expect(2)
    .stderr_has(&format!(
        "no such file (did you mean '{}'?)",
        providers.join("etc_hosts.prov").display()
    ));
    // Only provider files are offered: no other file is suggested to run.
    let other = run(Command::new(env!("CARGO_BIN_EXE_ral"))
        .arg("check")
        .arg(providers.join("ral_accounts.pyy")));
    other.expect(2).stderr_has("no such file");
    assert!(!other.stderr.contains("did you mean"), "{}", other.stderr);
    run(Command::new(env!("CARGO_BIN_EXE_ral"))
        .arg("check")
        .arg(&providers))
    .expect(2)
    .stderr_has(&format!(
        "{} is a directory: give its providers",
        providers.display()
    ));
    // Case is no edit.
    let mut upper = sandbox.command();
    run(upper.arg("HOST"))
        .expect(2)
        .stderr_has("unknown provider or type 'HOST' (did you mean 'host'?)");
}
