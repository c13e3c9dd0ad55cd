//! Findings of an attack on the state store, saved plans and sensitive
//! values: each test shows one way in that is now closed (or, marked
//! ignored, one that is still open).

use std::process::Command;

use crate::plans::Bench;
use crate::support::run_with_stdin;
use crate::support::Sandbox;

/// `ralsh --attrs-stdin` with a JSON object naming one attribute twice:
/// refused as the command line refuses `comment=a comment=b`, not read as
/// its last value (a reader that keeps the first would set another).
#[test]
fn attrs_stdin_refuses_an_attribute_given_twice() {
    for input in [
        r#"{"comment": "a", "comment": "b"}"#,
        r#"{"password": "a", "password": "b"}"#,
    ] {
        let sandbox = Sandbox::new();
        let run = run_with_stdin(
            &mut sandbox.fixture_command(&["--attrs-stdin", "envsecret", "d"]),
            input,
        );
        run.expect(2).stderr_has("is given twice");
        assert!(!sandbox.root().join("made.d").exists(), "{input}: it ran");
    }
}

/// `ral plan -o FILE` names one of its own manifests: refused, and the
/// manifest is left as it was (it was replaced by the plan, which then
/// could never apply: its manifests had changed).
#[test]
fn plan_o_never_writes_over_a_manifest() {
    let bench = Bench::new();
    let text = "beta:\n  b1: {value: x}\n";
    let m = bench.manifest("m.yaml", text);
    bench
        .ral("plan", &["-o", &m, &m])
        .expect(2)
        .stderr_has("it is the manifest");
    assert_eq!(std::fs::read_to_string(&m).unwrap(), text);
    // Through another path to the same file too.
    let dir = bench.manifests.path().to_str().unwrap().to_owned();
    let other = format!("{dir}/./m.yaml");
    bench
        .ral("plan", &["-o", &other, &m])
        .expect(2)
        .stderr_has("it is the manifest");
    assert_eq!(std::fs::read_to_string(&m).unwrap(), text);
}

/// `ral plan -o FILE` names the state store's database, key or lock (in a
/// root, or given with --state): refused, and the store still works (the
/// database was replaced by the plan, and every record of what ral
/// created with it).
#[test]
fn plan_o_never_writes_over_the_state_stores_files() {
    let bench = Bench::new();
    let m = bench.manifest("m.yaml", "beta:\n  b1: {value: x}\n");
    bench.ral("apply", &[&m]).expect(0);
    let dir = bench.sandbox.root().join("var/lib/ral");
    for name in ["state.db", "state.db.key", "state.db.lock", "state.db-wal"] {
        let out = dir.join(name);
        bench
            .ral("plan", &["-o", out.to_str().unwrap(), &m])
            .expect(2)
            .stderr_has("the state store's");
        let run = bench.ral("plan", &[&m]);
        run.expect(0).stdout_has("1 unchanged");
    }
    let state = bench.manifests.path().join("s.db");
    let state = state.to_str().unwrap();
    bench.ral("apply", &["--state", state, &m]).expect(0);
    for out in [state.to_owned(), format!("{state}.key")] {
        bench
            .ral("plan", &["--state", state, "-o", &out, &m])
            .expect(2)
            .stderr_has("the state store's");
    }
    bench.ral("plan", &["--state", state, &m]).expect(0);
    // Beside a --state file, other files are the user's.
    let beside = bench.manifests.path().join("p.plan");
    bench
        .ral(
            "plan",
            &["--state", state, "-o", beside.to_str().unwrap(), &m],
        )
        .expect(0);
}

/// A simple provider `waiter` whose find of `slow` makes ROOT/started and
/// waits for ROOT/release: a `ral plan` that reads it is held between
/// reading the store and writing its plan.
fn waiter_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let providers = dir.path().join("providers");
    std::fs::create_dir(&providers).unwrap();
    std::fs::write(
        providers.join("waiter.yaml"),
        "provider:\n  type: waiter\n  invoke: simple\n  actions: [list, find, update]\n  \
         suitable: true\n  desc: waits\n  attributes:\n    name: {desc: the name}\n    \
         ensure: {desc: exists or not, type: 'enum[present, absent]'}\n",
    )
    .unwrap();
    let script = providers.join("waiter.prov");
    std::fs::write(
        &script,
        "#!/bin/sh\neval \"$@\"\nr=$RALSH_ROOT_DIR\ncase $ral_action in\n  list) echo '# simple' ;;\n  \
         find)\n    if [ \"$name\" = slow ]; then : > \"$r/started\"\n      \
         while [ ! -e \"$r/release\" ]; do sleep 0.01; done; fi\n    \
         printf '# simple\\nname: %s\\nensure: absent\\n' \"$name\" ;;\n  \
         update) printf '# simple\\nname: %s\\nensure: present\\n' \"$name\" ;;\nesac\n",
    )
    .unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    dir
}

/// An apply that ends while `ral plan -o` reads the resources: the plan
/// was made from the store as it was before, so it must carry that
/// store's serial and be refused, not the serial found when it is written
/// (it then applied, its removals decided on a store that was no more).
#[test]
fn a_saved_plan_carries_the_serial_of_the_store_it_was_made_from() {
    let bench = Bench::new();
    let waiter = waiter_dir();
    let waiter = waiter.path().to_str().unwrap();
    let m1 = bench.manifest("m1.yaml", "beta:\n  a: {value: x}\n");
    bench.ral("apply", &[&m1]).expect(0);
    // It names the store's item too: one naming none of them is refused
    // before it reads anything (the guard against an emptied manifest).
    let m2 = bench.manifest("m2.yaml", "beta:\n  a: {value: x}\nwaiter:\n  slow: {}\n");
    let saved = bench.manifests.path().join("p.plan");
    let saved = saved.to_str().unwrap();
    let mut planning = bench
        .command("plan", &["-I", waiter, "-o", saved, &m2])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let started = bench.sandbox.root().join("started");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !started.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the plan never read slow"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let m3 = bench.manifest("m3.yaml", "beta:\n  a: {value: x}\n  b: {value: y}\n");
    bench.ral("apply", &[&m3]).expect(0);
    std::fs::write(bench.sandbox.root().join("release"), "").unwrap();
    assert!(planning.wait().unwrap().success());
    bench.take_calls();
    bench
        .ral("apply", &["-I", waiter, saved])
        .expect(2)
        .stderr_has("the state store changed since it was made");
    assert!(bench.store("beta").get("a").is_some(), "a was removed");
}

/// `ral state list` shows a stored value with a bidirectional override
/// (U+202E) escaped, as `ral plan` and `ral apply` do: printed as it is,
/// it reorders what the terminal shows after it.
#[test]
fn ral_state_list_escapes_what_a_terminal_would_reorder() {
    let bench = Bench::new();
    let m = bench.manifest("m.yaml", "beta:\n  b1: {value: \"a\\u202eb\"}\n");
    bench
        .ral("apply", &[&m])
        .expect(0)
        .stdout_has("a\\u{202e}b");
    let run = crate::support::run(&mut bench.sandbox.ral_command("state", &["list"]));
    run.expect(0);
    assert!(!run.stdout.contains('\u{202e}'), "{}", run.stdout);
    assert!(run.stdout.contains("a\\u{202e}b"), "{}", run.stdout);
}

/// A saved plan given with other manifests, to `ral plan`, or with a
/// blank or byte-order mark before its mark, is refused as a saved plan
/// (not read as a manifest, with a dozen problems about its members).
#[test]
fn a_saved_plan_is_never_read_as_a_manifest() {
    let bench = Bench::new();
    let m = bench.manifest("m.yaml", "beta:\n  b1: {value: x}\n");
    let saved = bench.manifests.path().join("p.plan");
    let saved = saved.to_str().unwrap();
    bench.ral("plan", &["-o", saved, &m]).expect(0);
    bench
        .ral("apply", &[saved, &m])
        .expect(2)
        .stderr_has("is a saved plan: ral apply takes it alone");
    bench
        .ral("plan", &[saved])
        .expect(2)
        .stderr_has("is a saved plan: ral apply takes it alone");
    let text = std::fs::read_to_string(saved).unwrap();
    for before in [" ", "\n", "\u{feff}"] {
        let changed = bench.manifest("q.plan", &format!("{before}{text}"));
        let run = bench.ral("apply", &[&changed]);
        run.expect(2)
            .stderr_has("it was changed after it was written");
    }
    assert!(bench.store("beta").get("b1").is_none(), "it ran");
}

/// A copy of the plan fixtures' beta provider in a directory of its own,
/// changed to make ROOT/other-beta-ran when it runs.
fn other_beta() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let providers = dir.path().join("providers");
    std::fs::create_dir(&providers).unwrap();
    let fixtures = crate::support::fixtures_dir().join("plans/providers");
    std::fs::copy(fixtures.join("beta.yaml"), providers.join("beta.yaml")).unwrap();
    let script = std::fs::read_to_string(fixtures.join("store.py")).unwrap();
    let script = script.replacen(
        "\nroot = ",
        "\nopen(os.path.join(os.environ['RALSH_ROOT_DIR'], 'other-beta-ran'), 'w').close()\nroot = ",
        1,
    );
    std::fs::write(providers.join("beta.prov"), script).unwrap();
    std::fs::set_permissions(
        providers.join("beta.prov"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    dir
}

/// A saved plan runs its tasks with the providers it was made with: a
/// provider of the same name found elsewhere at apply (another -I), or
/// whose program changed since, is refused, not run in its place.
#[test]
fn a_saved_plan_runs_with_the_providers_it_was_made_with() {
    let bench = Bench::new();
    let m = bench.manifest("m.yaml", "beta:\n  b1: {value: x}\n");
    let saved = bench.manifests.path().join("p.plan");
    let saved = saved.to_str().unwrap();
    bench.ral("plan", &["-o", saved, &m]).expect(0);
    let other = other_beta();
    let run = run_ral(&bench, &["-I", other.path().to_str().unwrap(), saved]);
    run.expect(2).stderr_has("its provider beta::beta is");
    assert!(!bench.sandbox.root().join("other-beta-ran").exists());
    // The same directory, the program changed.
    let copy = tempfile::tempdir().unwrap();
    let fixtures = crate::support::fixtures_dir().join("plans/providers");
    std::fs::create_dir(copy.path().join("providers")).unwrap();
    for name in ["beta.yaml", "store.py"] {
        std::fs::copy(
            fixtures.join(name),
            copy.path().join("providers").join(name),
        )
        .unwrap();
    }
    let prov = copy.path().join("providers/beta.prov");
    std::fs::copy(fixtures.join("store.py"), &prov).unwrap();
    let include = copy.path().to_str().unwrap();
    bench.take_calls();
    let plan = |out: &str| run_ral_plan(&bench, &["-I", include, "-o", out, &m]);
    plan(saved).expect(0);
    let other_program = other.path().join("providers/beta.prov");
    std::fs::copy(&other_program, &prov).unwrap();
    run_ral(&bench, &["-I", include, saved])
        .expect(2)
        .stderr_has("its provider beta::beta is");
    assert!(!bench.sandbox.root().join("other-beta-ran").exists());
}

/// `ral apply ARGS` with only the given provider directories (not the
/// bench's fixtures).
fn run_ral(bench: &Bench, args: &[&str]) -> crate::support::Run {
    crate::support::run(&mut bench.sandbox.ral_command("apply", args))
}

fn run_ral_plan(bench: &Bench, args: &[&str]) -> crate::support::Run {
    crate::support::run(&mut bench.sandbox.ral_command("plan", args))
}

/// `ral plan -o FILE` where FILE is no regular file (a FIFO, a link, as
/// /dev/null and /dev/stdout are a device and a link): refused and left
/// as it was. The plan was renamed over it: run as root, `-o /dev/null`
/// replaced the machine's /dev/null with a file.
#[test]
fn plan_o_replaces_only_a_regular_file() {
    let bench = Bench::new();
    let m = bench.manifest("m.yaml", "beta:\n  b1: {value: x}\n");
    let dir = bench.manifests.path();
    let fifo = dir.join("fifo");
    let status = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(status.success());
    let link = dir.join("link");
    std::os::unix::fs::symlink(dir.join("elsewhere"), &link).unwrap();
    for out in [&fifo, &link] {
        bench
            .ral("plan", &["-o", out.to_str().unwrap(), &m])
            .expect(2)
            .stderr_has("is not a regular file");
        let kind = std::fs::symlink_metadata(out).unwrap().file_type();
        assert!(!kind.is_file(), "{} was replaced", out.display());
    }
    // A plan written before is replaced by the next.
    let saved = dir.join("p.plan");
    let saved = saved.to_str().unwrap();
    bench.ral("plan", &["-o", saved, &m]).expect(0);
    bench.ral("plan", &["-o", saved, &m]).expect(0);
}
