//! Ownership that survives a kill: `ral apply` SIGKILLed (its process
//! group) before, during and after a provider's change, then run again;
//! what ral created is removed once no manifest lists it, what existed
//! before ral managed it never is, nor what someone else made between
//! ral's read and its task. The store fixture's `wait` and `hold` files
//! (tests/fixtures/plans/providers/store.py) make each point exact.

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use crate::pids::{assert_gone, pid_in, KillOnDrop};
use crate::plans::{updates, Bench};

/// Two beta resources: b0 exists before ral manages it, b1 is new.
const BOTH: &str =
    "beta:\n  b0: {ensure: present, value: ours}\n  b1: {ensure: present, value: x}\n";
/// Neither any more: both leave the manifest.
/// Names none of the items in the store: applied with --destroy, as the
/// guard against an emptied manifest asks.
const NEITHER: &str = "alpha:\n  a1: {value: one}\n";

fn seed_b0(bench: &Bench) {
    bench.sandbox.write(
        "beta.json",
        "{\"b0\": {\"ensure\": \"present\", \"value\": \"theirs\"}}",
    );
}

/// `ral apply ARGS` in a process group of its own, as a service manager
/// would run it.
fn spawn_apply(bench: &Bench, args: &[&str]) -> Child {
    bench
        .command("apply", args)
        .process_group(0)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// Waits (at most a minute) until the fixture wrote ROOT/`marker`.
fn await_marker(root: &Path, marker: &str) {
    let path = root.join(marker);
    let deadline = Instant::now() + Duration::from_secs(60);
    while !path.exists() {
        assert!(Instant::now() < deadline, "{marker} never appeared");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// SIGKILL to the apply's whole process group, and its end.
fn kill_group(mut child: Child) {
    // SAFETY: signals the process group the child leads; it is not
    // reaped yet, so the group cannot be another's.
    assert_eq!(
        unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) },
        0
    );
    child.wait().unwrap();
}

/// SIGKILL to the keeper of the running `ral apply` (the child it forks
/// at its first call, which ends the calls' groups once ral is gone), and
/// its end: as when both die at once, a provider then outlives ral.
fn kill_keeper(apply: &Child) {
    let ral = apply.id();
    let tasks = std::fs::read_dir(format!("/proc/{ral}/task")).unwrap();
    let keeper = tasks
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("children")).ok())
        .flat_map(|children| {
            children
                .split_whitespace()
                .filter_map(|pid| pid.parse::<i32>().ok())
                .collect::<Vec<_>>()
        })
        .find(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .is_ok_and(|comm| comm == "ral-keeper\n")
        })
        .expect("ral's keeper");
    // SAFETY: ral has not reaped its child, so the ID is still the keeper's.
    assert_eq!(unsafe { libc::kill(keeper, libc::SIGKILL) }, 0);
    assert_gone(keeper, "ral");
}

/// The intents the store holds: (name, action, existed).
fn intents(bench: &Bench) -> Vec<(String, String, bool)> {
    let db = bench.sandbox.root().join("var/lib/ral/state.db");
    let conn = rusqlite::Connection::open(db).unwrap();
    let mut statement = conn
        .prepare("SELECT name, action, existed FROM intents ORDER BY name")
        .unwrap();
    statement
        .query_map([], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap()
}

fn intent(name: &str, action: &str, existed: bool) -> (String, String, bool) {
    (name.to_owned(), action.to_owned(), existed)
}

/// After the kill: the rerun converges, then both leave the manifest: b1,
/// which ral created, is removed; b0, which existed before, is left.
fn rerun_then_drop_both(bench: &Bench) {
    let m = bench.manifest("m.yaml", BOTH);
    bench.ral("apply", &[&m]).expect(0);
    bench.ral("plan", &["--detailed-exitcodes", &m]).expect(0);
    let fewer = bench.manifest("m.yaml", NEITHER);
    bench.take_calls();
    bench.ral("apply", &["--destroy", &fewer]).expect(0);
    let mut done = updates(&bench.take_calls());
    // alpha and beta run side by side.
    done.sort();
    assert_eq!(done, ["alpha a1", "beta b1"]);
    let beta = bench.store("beta");
    assert!(beta.get("b1").is_none(), "b1 leaked: {beta}");
    assert_eq!(beta["b0"]["value"], "ours", "b0 was left as it is");
    assert!(intents(bench).is_empty(), "{:?}", intents(bench));
}

#[test]
fn killed_before_the_provider_acted_nothing_is_taken_as_created() {
    let bench = Bench::new();
    seed_b0(&bench);
    bench.sandbox.write("wait", "b0\n");
    let m = bench.manifest("m.yaml", BOTH);
    let apply = spawn_apply(&bench, &[&m]);
    await_marker(bench.sandbox.root(), "started-b0");
    // The intents were committed before the provider was called.
    assert_eq!(
        intents(&bench),
        [intent("b0", "change", true), intent("b1", "create", false)]
    );
    let provider = KillOnDrop::new(&[pid_in(&bench.sandbox.root().join("started-b0"))]);
    kill_group(apply);
    // The provider ends too, before it changed anything.
    drop(provider);
    bench.sandbox.write("wait", "");
    assert!(bench.store("beta").get("b1").is_none());
    // Nothing was created: a plan without them forgets both, removes none.
    let fewer = bench.manifest("m.yaml", NEITHER);
    bench
        .ral("plan", &["--destroy", &fewer])
        .expect(0)
        .stdout_has("1 to create, 0 to change, 0 to remove");
    rerun_then_drop_both(&bench);
}

#[test]
fn killed_during_the_call_what_the_provider_then_created_is_rals() {
    let bench = Bench::new();
    seed_b0(&bench);
    bench.sandbox.write("wait", "b0\n");
    let m = bench.manifest("m.yaml", BOTH);
    let apply = spawn_apply(&bench, &[&m]);
    await_marker(bench.sandbox.root(), "started-b0");
    let provider = pid_in(&bench.sandbox.root().join("started-b0"));
    let _ending = KillOnDrop::new(&[provider]);
    kill_keeper(&apply);
    kill_group(apply);
    // The provider, answering late to a ral that is gone, makes both
    // changes.
    bench.sandbox.write("release", "");
    assert_gone(provider, "beta.prov");
    assert_eq!(bench.store("beta")["b1"]["value"], "x");
    bench.sandbox.write("wait", "");
    // A plan settles what the killed run did without writing it: b1 is
    // ral's, to be removed once no manifest lists it.
    let fewer = bench.manifest("m.yaml", NEITHER);
    bench
        .ral("plan", &["--destroy", &fewer])
        .expect(0)
        .stdout_has("- beta[b1]")
        .stdout_has("1 to create, 0 to change, 1 to remove");
    assert_eq!(intents(&bench).len(), 2, "a plan writes nothing");
    rerun_then_drop_both(&bench);
}

#[test]
fn killed_after_the_change_before_its_record_the_resource_is_rals() {
    let bench = Bench::new();
    seed_b0(&bench);
    bench.sandbox.write("hold", "b1\n");
    let m = bench.manifest("m.yaml", BOTH);
    let apply = spawn_apply(&bench, &[&m]);
    await_marker(bench.sandbox.root(), "changed-b1");
    let provider = KillOnDrop::new(&[pid_in(&bench.sandbox.root().join("changed-b1"))]);
    kill_group(apply);
    drop(provider);
    bench.sandbox.write("hold", "");
    assert_eq!(bench.store("beta")["b1"]["value"], "x", "b1 was made");
    rerun_then_drop_both(&bench);
}

#[test]
fn a_simple_provider_killed_after_its_change_leaves_its_resource_rals() {
    let bench = Bench::new();
    bench.sandbox.write(
        "gamma.json",
        "{\"/g0\": {\"ensure\": \"present\", \"value\": \"theirs\"}}",
    );
    bench.sandbox.write("hold", "/g1\n");
    let m = bench.manifest(
        "m.yaml",
        "gamma:\n  /g0: {value: ours}\n  /g1: {ensure: present, value: x}\n",
    );
    let apply = spawn_apply(&bench, &["--jobs", "1", &m]);
    await_marker(bench.sandbox.root(), "changed-_g1");
    let provider = KillOnDrop::new(&[pid_in(&bench.sandbox.root().join("changed-_g1"))]);
    kill_group(apply);
    drop(provider);
    bench.sandbox.write("hold", "");
    bench.ral("apply", &[&m]).expect(0);
    let fewer = bench.manifest("m.yaml", NEITHER);
    bench.take_calls();
    bench.ral("apply", &["--destroy", &fewer]).expect(0);
    let mut done = updates(&bench.take_calls());
    done.sort();
    assert_eq!(done, ["alpha a1", "gamma /g1"]);
    let gamma = bench.store("gamma");
    assert!(gamma.get("/g1").is_none(), "/g1 leaked: {gamma}");
    assert_eq!(gamma["/g0"]["value"], "ours", "/g0 was left as it is");
}

#[test]
fn a_resource_someone_else_made_between_the_read_and_the_task_is_not_rals() {
    let bench = Bench::new();
    bench.sandbox.write("wait", "b1\n");
    let m = bench.manifest("m.yaml", "beta:\n  b1: {ensure: present, value: x}\n");
    let apply = bench
        .command("apply", &[&m])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // ral read b1 absent and planned its creation; before the provider
    // acts, another process makes it.
    await_marker(bench.sandbox.root(), "started-b1");
    bench.sandbox.write(
        "beta.json",
        "{\"b1\": {\"ensure\": \"present\", \"value\": \"theirs\"}}",
    );
    bench.sandbox.write("release", "");
    let output = apply.wait_with_output().unwrap();
    assert!(output.status.success(), "{output:?}");
    bench.sandbox.write("wait", "");
    let fewer = bench.manifest("m.yaml", NEITHER);
    bench.take_calls();
    bench.ral("apply", &["--destroy", &fewer]).expect(0);
    assert_eq!(updates(&bench.take_calls()), ["alpha a1"]);
    assert_eq!(
        bench.store("beta")["b1"]["value"],
        "x",
        "b1 was left as it is"
    );
}

#[test]
fn one_made_by_someone_else_before_the_read_again_is_not_rals_whatever_the_kill() {
    let bench = Bench::new();
    // a1 waits for b1, so its state is read again just before its call.
    bench.sandbox.write("wait", "b1\na1\n");
    let m = bench.manifest(
        "m.yaml",
        "alpha:\n  a1: {value: one, needs: b1}\nbeta:\n  b1: {value: x}\n",
    );
    let apply = spawn_apply(&bench, &[&m]);
    let root = bench.sandbox.root();
    await_marker(root, "started-b1");
    let _b1 = KillOnDrop::new(&[pid_in(&root.join("started-b1"))]);
    // The plan read a1 absent; another process makes it while b1 runs.
    bench.sandbox.write(
        "alpha.json",
        "{\"a1\": {\"ensure\": \"present\", \"value\": \"theirs\"}}",
    );
    bench.sandbox.write("release-b1", "");
    await_marker(root, "started-a1");
    // The intent says what the read just before the call found.
    assert_eq!(intents(&bench), [intent("a1", "change", true)]);
    let a1 = KillOnDrop::new(&[pid_in(&root.join("started-a1"))]);
    kill_group(apply);
    drop(a1);
    bench.sandbox.write("wait", "");
    bench.ral("apply", &[&m]).expect(0);
    let fewer = bench.manifest("m.yaml", "beta:\n  b1: {value: x}\n");
    bench.take_calls();
    bench.ral("apply", &[&fewer]).expect(0);
    assert!(updates(&bench.take_calls()).is_empty());
    assert_eq!(
        bench.store("alpha")["a1"]["value"],
        "one",
        "a1 was left as it is"
    );
}

#[test]
fn one_made_by_someone_else_before_the_read_again_is_not_taken_as_created() {
    let bench = Bench::new();
    bench.sandbox.write("wait", "b1\n");
    let m = bench.manifest(
        "m.yaml",
        "alpha:\n  a1: {value: one, needs: b1}\nbeta:\n  b1: {value: x}\n",
    );
    let apply = bench
        .command("apply", &[&m])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    await_marker(bench.sandbox.root(), "started-b1");
    bench.sandbox.write(
        "alpha.json",
        "{\"a1\": {\"ensure\": \"present\", \"value\": \"theirs\"}}",
    );
    bench.sandbox.write("release-b1", "");
    assert!(apply.wait_with_output().unwrap().status.success());
    let fewer = bench.manifest("m.yaml", "beta:\n  b1: {value: x}\n");
    bench.take_calls();
    bench.ral("apply", &[&fewer]).expect(0);
    assert!(updates(&bench.take_calls()).is_empty());
    assert_eq!(bench.store("alpha")["a1"]["value"], "one");
}

/// A create that failed, the resource then made by someone else: not
/// ral's, so never removed (the package whose install failed, installed
/// by hand later).
#[test]
fn what_appears_after_a_failed_create_is_not_rals() {
    let bench = Bench::new();
    seed_b0(&bench);
    bench.sandbox.write("fail", "b1\n");
    let m = bench.manifest("m.yaml", BOTH);
    bench.ral("apply", &[&m]).expect(1);
    assert!(intents(&bench).is_empty(), "{:?}", intents(&bench));
    bench.sandbox.write("fail", "");
    b1_made_by_hand(&bench);
    let fewer = bench.manifest("m.yaml", NEITHER);
    bench
        .ral("plan", &["--destroy", &fewer])
        .expect(0)
        .stdout_has("1 to create, 0 to change, 0 to remove");
    bench.ral("apply", &["--destroy", &fewer]).expect(0);
    assert_eq!(
        bench.store("beta")["b1"]["value"],
        "theirs",
        "left as it is"
    );
}

/// b1 made by someone else, beside the b0 ral applied.
fn b1_made_by_hand(bench: &Bench) {
    bench.sandbox.write(
        "beta.json",
        "{\"b0\": {\"ensure\": \"present\", \"value\": \"ours\"}, \
         \"b1\": {\"ensure\": \"present\", \"value\": \"theirs\"}}",
    );
}

/// A create that failed after making its resource: read again at the end
/// of the run, it is ral's, and removed once no manifest lists it.
#[test]
fn what_a_failed_create_made_is_rals() {
    let bench = Bench::new();
    seed_b0(&bench);
    bench.sandbox.write("fail-after", "b1\n");
    let m = bench.manifest("m.yaml", BOTH);
    bench.ral("apply", &[&m]).expect(1);
    assert_eq!(bench.store("beta")["b1"]["value"], "x");
    assert!(intents(&bench).is_empty(), "{:?}", intents(&bench));
    bench.sandbox.write("fail-after", "");
    let fewer = bench.manifest("m.yaml", NEITHER);
    bench
        .ral("plan", &["--destroy", &fewer])
        .expect(0)
        .stdout_has("- beta[b1]");
}

/// A failed create whose run was killed before it read the resource
/// again: its intent, marked failed, is never taken as a creation.
#[test]
fn a_failed_intent_left_by_a_killed_run_is_never_a_creation() {
    let bench = Bench::new();
    seed_b0(&bench);
    let m = bench.manifest("m.yaml", BOTH);
    bench.ral("apply", &[&m]).expect(0);
    bench
        .ral("apply", &["--destroy", &bench.manifest("n.yaml", NEITHER)])
        .expect(0);
    assert!(bench.store("beta").get("b1").is_none());
    // The record a kill right after the failure leaves.
    let db = bench.sandbox.root().join("var/lib/ral/state.db");
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.execute(
        "INSERT INTO intents (provider, name, resource, plan_id, task_id, action, existed, \
         properties, recorded, failed) VALUES ('beta::beta', 'b1', 'beta[b1]', 'p', 1, \
         'create', 0, '{}', 0, 1)",
        [],
    )
    .unwrap();
    conn.execute(
        "INSERT OR REPLACE INTO items (provider, name, type, state, properties, created, \
         requires, updated) VALUES ('beta::beta', 'b1', 'beta', 'Initial', '{}', 0, '[]', 0)",
        [],
    )
    .unwrap();
    drop(conn);
    b1_made_by_hand(&bench);
    let fewer = bench.manifest("m.yaml", NEITHER);
    bench
        .ral("apply", &["--destroy", &fewer])
        .expect(0)
        .stdout_has("= beta[b1] was only forgotten")
        .stdout_lacks("- beta[b1]");
    assert_eq!(bench.store("beta")["b1"]["value"], "theirs");
    assert!(intents(&bench).is_empty());
}

/// `ral plan` beside an apply under way settles none of its intents: the
/// resource the apply is making is not shown as made by a dead run.
#[test]
fn a_plan_beside_a_running_apply_leaves_its_intents_alone() {
    let bench = Bench::new();
    seed_b0(&bench);
    bench.sandbox.write("hold", "b1\n");
    let m = bench.manifest("m.yaml", BOTH);
    let apply = spawn_apply(&bench, &[&m]);
    let _apply = KillOnDrop::new(&[apply.id() as i32]);
    await_marker(bench.sandbox.root(), "changed-b1");
    let fewer = bench.manifest("n.yaml", NEITHER);
    let plan = bench.ral("plan", &["-l", "info", "--destroy", &fewer]);
    plan.expect(0)
        .stderr_has("an apply is running (")
        .stdout_lacks("- beta[b1]");
    bench.sandbox.write("release", "");
    let output = apply.wait_with_output().unwrap();
    assert!(output.status.success());
    // Done: now it is ral's.
    bench
        .ral("plan", &["--destroy", &fewer])
        .expect(0)
        .stdout_has("- beta[b1]");
}

/// A create that failed, the resource made by hand while the run goes on
/// (another provider's task waits): read right after the failure, it was
/// not there, so it is not ral's.
#[test]
fn what_appears_while_the_run_goes_on_after_a_failed_create_is_not_rals() {
    let bench = Bench::new();
    bench.sandbox.write("fail", "x\n");
    bench.sandbox.write("wait", "y\n");
    let m = bench.manifest(
        "m.yaml",
        "alpha:\n  x: {value: one}\nbeta:\n  y: {value: slow}\n",
    );
    let apply = spawn_apply(&bench, &[&m]);
    let _apply = KillOnDrop::new(&[apply.id() as i32]);
    await_marker(bench.sandbox.root(), "started-y");
    // alpha[x] failed, and was read again right after: its set, then a
    // get, ended in the calls' log.
    let read_after_set = |calls: Vec<String>| {
        let set = calls.iter().position(|c| c == "alpha end set");
        set.is_some_and(|set| calls[set..].iter().any(|c| c == "alpha end get"))
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while !read_after_set(bench.sandbox.calls()) {
        assert!(
            Instant::now() < deadline,
            "alpha[x] was never read after its set"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    bench.sandbox.write(
        "alpha.json",
        "{\"x\": {\"ensure\": \"present\", \"value\": \"handmade\"}}",
    );
    bench.sandbox.write("release", "");
    let output = apply.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let only_y = bench.manifest("n.yaml", "beta:\n  y: {value: slow}\n");
    bench.sandbox.write("fail", "");
    bench.sandbox.write("wait", "");
    bench
        .ral("plan", &[&only_y])
        .expect(0)
        .stdout_lacks("- alpha[x]");
    bench.ral("apply", &[&only_y]).expect(0);
    assert_eq!(bench.store("alpha")["x"]["value"], "handmade");
}
