//! The state store behind `ral apply`: item states, removal of what no
//! manifest lists any more (in reverse dependency order, and only what ral
//! created), `--keep-removed`, drift, the run lock and a killed holder,
//! the schema version check, redaction, and `ral state`.

use std::process::Stdio;

use serde_json::Value as Json;

use crate::plans::{plan_json, task, updates, Bench};
use crate::support::{run, Run};

fn state(bench: &Bench, args: &[&str]) -> Run {
    let mut command = bench.sandbox.ral_command("state", &[]);
    // `ral state --root R SUBCOMMAND`: ral_command put --root after "state".
    command.args(args);
    run(&mut command)
}

/// `ral state -j list` as (TYPE[NAME], state) pairs.
fn items(bench: &Bench) -> Vec<(String, String)> {
    let listed = state(bench, &["-j", "list"]);
    listed.expect(0);
    let doc: Json = serde_json::from_str(&listed.stdout).unwrap();
    doc["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| {
            (
                format!(
                    "{}[{}]",
                    item["type"].as_str().unwrap(),
                    item["name"].as_str().unwrap()
                ),
                item["state"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// The states of the plans `ral state -j history` lists, oldest first.
fn plan_states(bench: &Bench) -> Vec<String> {
    let history = state(bench, &["-j", "history"]);
    history.expect(0);
    let doc: Json = serde_json::from_str(&history.stdout).unwrap();
    doc["plans"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["state"].as_str().unwrap().to_owned())
        .collect()
}

fn pair(resource: &str, state: &str) -> (String, String) {
    (resource.to_owned(), state.to_owned())
}

const THREE: &str =
    "alpha:\n  a1: {value: one}\n  a2: {value: two, needs: b1}\nbeta:\n  b1: {value: x}\n";

#[test]
fn items_go_initial_applied_updated_and_back_then_removed_in_reverse_order() {
    let bench = Bench::new();
    let m = bench.manifest("m.yaml", THREE);
    // A first run whose a1 fails: a1 stays Initial, the rest are Applied.
    bench.sandbox.write("fail", "a1\n");
    bench.ral("apply", &[&m]).expect(1);
    assert_eq!(
        items(&bench),
        [
            pair("alpha[a1]", "Initial"),
            pair("alpha[a2]", "Applied"),
            pair("beta[b1]", "Applied")
        ]
    );
    bench.sandbox.write("fail", "");
    bench.ral("apply", &[&m]).expect(0);
    assert!(items(&bench).iter().all(|(_, s)| s == "Applied"));

    // A changed manifest whose change fails: Updated.
    let changed = bench.manifest("m.yaml", &THREE.replace("value: one", "value: uno"));
    bench.sandbox.write("fail", "a1\n");
    bench.ral("apply", &[&changed]).expect(1);
    assert!(items(&bench).contains(&pair("alpha[a1]", "Updated")));
    // Back to what was applied: Applied again, with nothing to do.
    let m = bench.manifest("m.yaml", THREE);
    bench.ral("apply", &["--detailed-exitcodes", &m]).expect(0);
    assert!(items(&bench).contains(&pair("alpha[a1]", "Applied")));

    // a2 and b1 leave the manifest: removed, a2 (which needs b1) first.
    bench.sandbox.write("fail", "");
    let fewer = bench.manifest("m.yaml", "alpha:\n  a1: {value: one}\n");
    bench
        .ral("plan", &[&fewer])
        .expect(0)
        .stdout_has("- alpha[a2]")
        .stdout_has("- beta[b1] (waits for alpha[a2])")
        .stdout_has("0 to create, 0 to change, 2 to remove; 1 unchanged");
    bench.take_calls();
    bench.ral("apply", &[&fewer]).expect(0);
    let done = updates(&bench.take_calls());
    assert_eq!(done, ["alpha a2", "beta b1"]);
    assert_eq!(items(&bench), [pair("alpha[a1]", "Applied")]);
    assert_eq!(bench.store("beta"), serde_json::json!({}));
    assert_eq!(bench.store("alpha").as_object().unwrap().len(), 1);
}

#[test]
fn what_ral_did_not_create_is_forgotten_not_removed_and_keep_removed_removes_nothing() {
    let bench = Bench::new();
    // b9 exists before ral manages it.
    bench.sandbox.write(
        "beta.json",
        "{\"b9\": {\"ensure\": \"present\", \"value\": \"old\"}}",
    );
    let m = bench.manifest("m.yaml", "beta:\n  b9: {value: new}\n  b1: {value: x}\n");
    bench.ral("apply", &[&m]).expect(0);
    let kept = bench.manifest("m.yaml", "alpha:\n  a1: {value: one}\n");
    bench
        .ral("apply", &["--keep-removed", "--detailed-exitcodes", &kept])
        .expect(2);
    assert!(items(&bench).contains(&pair("beta[b1]", "Applied")));
    assert!(items(&bench).contains(&pair("beta[b9]", "Applied")));
    bench.take_calls();
    bench.ral("apply", &[&kept]).expect(0);
    assert_eq!(
        updates(&bench.take_calls()),
        ["beta b1"],
        "only b1 is removed"
    );
    let beta = bench.store("beta");
    assert_eq!(beta["b9"]["value"], "new", "b9 was left as it is");
    assert!(beta.get("b1").is_none());
    assert_eq!(items(&bench), [pair("alpha[a1]", "Applied")]);
}

#[test]
fn a_drifted_resource_is_planned_again_and_says_so() {
    let bench = Bench::new();
    let m = bench.manifest("m.yaml", "beta:\n  b1: {value: x}\n");
    bench.ral("apply", &[&m]).expect(0);
    bench.sandbox.write(
        "beta.json",
        "{\"b1\": {\"ensure\": \"present\", \"value\": \"changed\"}}",
    );
    let planned = bench.ral("plan", &["-j", &m]);
    planned.expect(0);
    let doc = plan_json(&planned);
    assert_eq!(task(&doc, "beta[b1]")["drifted"], true);
    bench
        .ral("plan", &[&m])
        .expect(0)
        .stdout_has("~ beta[b1] (drifted)");
    bench.ral("apply", &[&m]).expect(0);
    assert_eq!(bench.store("beta")["b1"]["value"], "x");
}

#[test]
fn sensitive_values_are_kept_only_as_digests() {
    let bench = Bench::new();
    let m = bench.manifest(
        "m.yaml",
        "alpha:\n  a1: {value: v, secret: hunter2-plaintext}\n",
    );
    bench.ral("apply", &[&m]).expect(0);
    let db_dir = bench.sandbox.root().join("var/lib/ral");
    for entry in std::fs::read_dir(&db_dir).unwrap() {
        let bytes = std::fs::read(entry.unwrap().path()).unwrap();
        assert!(
            !bytes.windows(17).any(|w| w == b"hunter2-plaintext"),
            "the secret is in the store's files"
        );
    }
    let listed = state(&bench, &["list"]);
    listed
        .expect(0)
        .stdout_has("secret: \"[redacted]\"")
        .stdout_has("value: \"v\"");
    assert!(!listed.stdout.contains("hmac"), "{}", listed.stdout);
    // The same secret again is no change; another one is.
    bench.ral("plan", &["--detailed-exitcodes", &m]).expect(0);
    let other = bench.manifest("m.yaml", "alpha:\n  a1: {value: v, secret: other}\n");
    let planned = bench.ral("plan", &[&other]);
    planned.expect(0).stdout_has("secret: [redacted]");
}

#[test]
fn a_second_apply_fails_at_once_naming_the_holder_and_a_killed_holder_leaves_no_lock() {
    let bench = Bench::new();
    bench.sandbox.write("wait", "b1\n");
    let m = bench.manifest(
        "m.yaml",
        "beta:\n  b1: {value: x}\n  b2: {value: y}\ngamma:\n  /g: {value: z}\n",
    );
    let mut holder = bench
        .command("apply", &["--jobs", "1", &m])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    bench.await_started("b1");
    let second = bench.ral("apply", &[&m]);
    second
        .expect(2)
        .stderr_has("another ral apply is running (process ")
        .stderr_has(&format!("process {} on ", holder.id()));
    // `ral plan` needs no lock.
    bench.ral("plan", &[&m]).expect(0);
    // Killed mid-task: the kernel lets the lock go. What a killed ral
    // leaves running (its provider, waiting) is ended as well, as a
    // machine that lost both would have it.
    let provider = crate::pids::KillOnDrop::new(&crate::pids::pids_in(
        &bench.sandbox.root().join("started-b1"),
    ));
    holder.kill().unwrap();
    holder.wait().unwrap();
    drop(provider);
    bench.sandbox.write("wait", "");
    let rerun = bench.ral("apply", &["-j", &m]);
    rerun
        .expect(0)
        .stderr_has("was left running by a process that ended");
    let history = state(&bench, &["-j", "history"]);
    let doc: Json = serde_json::from_str(&history.stdout).unwrap();
    let plans = doc["plans"].as_array().unwrap();
    assert_eq!(plans.len(), 2);
    assert_eq!(plans[0]["state"], "Failed");
    assert_eq!(plans[1]["state"], "Successful");
    let dead = plans[0]["id"].as_str().unwrap();
    let shown = state(&bench, &["-j", "show", dead]);
    let report = plan_json(&shown);
    let interrupted: Vec<&Json> = report["plan"]["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["error"]["kind"] == "interrupted")
        .collect();
    // b1 and b2 went to beta in one set, which the kill cut short.
    let resources: Vec<&str> = interrupted
        .iter()
        .map(|t| t["resource"].as_str().unwrap())
        .collect();
    assert_eq!(resources, ["beta[b1]", "beta[b2]"], "{report:#}");
    assert_eq!(task(&report, "gamma[/g]")["state"], "Stopped");
    bench.ral("plan", &["--detailed-exitcodes", &m]).expect(0);
}

#[test]
fn a_store_with_a_newer_schema_is_refused() {
    let bench = Bench::new();
    let m = bench.manifest("m.yaml", "beta:\n  b1: {value: x}\n");
    bench.ral("apply", &[&m]).expect(0);
    let db = bench.sandbox.root().join("var/lib/ral/state.db");
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.pragma_update(None, "user_version", 99).unwrap();
    drop(conn);
    for subcommand in ["plan", "apply"] {
        bench
            .ral(subcommand, &[&m])
            .expect(2)
            .stderr_has("its schema is version 99, newer than this ral knows (version 6)");
    }
}

#[test]
fn forget_stops_managing_without_touching() {
    let bench = Bench::new();
    let m = bench.manifest("m.yaml", "beta:\n  b1: {value: x}\n  b2: {value: y}\n");
    bench.ral("apply", &[&m]).expect(0);
    state(&bench, &["forget", "beta[b1]"])
        .expect(0)
        .stdout_has("forgotten: beta[b1]");
    let db = bench.sandbox.root().join("var/lib/ral/state.db");
    state(&bench, &["forget", "beta[nope]"])
        .expect(2)
        .stderr_has(&format!("beta[nope]: no such item in {}", db.display()));
    // The provider's qualified name names the item too.
    state(&bench, &["forget", "beta::beta[b2]"])
        .expect(0)
        .stdout_has("forgotten: beta::beta[b2]");
    assert_eq!(items(&bench), [] as [(String, String); 0]);
    let m = bench.manifest("m.yaml", "beta:\n  b2: {value: y}\n");
    bench.ral("apply", &["--detailed-exitcodes", &m]).expect(0);
    assert_eq!(bench.store("beta")["b1"]["value"], "x", "b1 was left alone");
}

#[test]
fn a_removal_that_fails_leaves_the_item_for_removal_until_it_succeeds() {
    let bench = Bench::new();
    let m = bench.manifest("m.yaml", "beta:\n  b1: {value: x}\n  b2: {value: y}\n");
    bench.ral("apply", &[&m]).expect(0);
    bench.sandbox.write("fail", "b1\n");
    let fewer = bench.manifest("m.yaml", "beta:\n  b2: {value: y}\n");
    bench.ral("apply", &[&fewer]).expect(1);
    assert_eq!(
        items(&bench),
        [pair("beta[b1]", "ForRemoval"), pair("beta[b2]", "Applied")]
    );
    bench.sandbox.write("fail", "");
    bench.ral("apply", &[&fewer]).expect(0);
    assert_eq!(items(&bench), [pair("beta[b2]", "Applied")]);
    assert!(bench.store("beta").get("b1").is_none());
}

#[test]
fn an_item_whose_removal_was_done_but_not_recorded_leaves_the_store() {
    let bench = Bench::new();
    let m = bench.manifest("m.yaml", "beta:\n  b1: {value: x}\n  b2: {value: y}\n");
    bench.ral("apply", &[&m]).expect(0);
    // As after a kill between the provider's removal and its record: the
    // resource is gone, the store still has the item.
    bench.sandbox.write(
        "beta.json",
        "{\"b2\": {\"ensure\": \"present\", \"value\": \"y\"}}",
    );
    let fewer = bench.manifest("m.yaml", "beta:\n  b2: {value: y}\n");
    bench
        .ral("apply", &["--detailed-exitcodes", &fewer])
        .expect(0);
    assert_eq!(items(&bench), [pair("beta[b2]", "Applied")]);
}

#[test]
fn with_a_lock_timeout_a_second_apply_waits_for_the_first_and_then_runs() {
    let bench = Bench::new();
    bench.sandbox.write("wait", "b1\n");
    let m = bench.manifest("m.yaml", "beta:\n  b1: {value: x}\n");
    let mut first = bench
        .command("apply", &[&m])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    bench.await_started("b1");
    let mut second = bench
        .command(
            "apply",
            &["--lock-timeout", "120", "--detailed-exitcodes", &m],
        )
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The second says it waits for the first; only then is b1 released.
    let stderr = second.stderr.take().unwrap();
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(stderr));
    let waiting = lines
        .by_ref()
        .map(Result::unwrap)
        .find(|l| l.contains("waiting up to 120 s"));
    let waiting = waiting.expect("the second apply says it waits");
    assert!(
        waiting.contains(&format!("process {} on ", first.id())),
        "{waiting}"
    );
    bench.sandbox.write("release", "");
    let drain = std::thread::spawn(move || lines.map(Result::unwrap).collect::<Vec<_>>());
    assert_eq!(first.wait().unwrap().code(), Some(0));
    // The first made the change; the second found nothing left to do.
    assert_eq!(second.wait().unwrap().code(), Some(0));
    // It said so once, not at each try while it waited.
    let rest = drain.join().unwrap();
    assert!(
        !rest.iter().any(|l| l.contains("waiting up to")),
        "{rest:#?}"
    );
    let states = plan_states(&bench);
    assert_eq!(states, ["Successful", "Successful"]);
}

#[test]
fn after_an_interrupt_the_next_apply_resumes_without_redoing_finished_tasks() {
    let bench = Bench::new();
    bench.sandbox.write("wait", "b1\n");
    let m = bench.manifest(
        "m.yaml",
        "beta:\n  b1: {value: x}\nalpha:\n  a1: {value: y, needs: b1}\n",
    );
    let mut child = bench
        .command("apply", &[&m])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    bench.await_started("b1");
    // SAFETY: kill with a live child's PID.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    // b1 is released only once the plan logged its stop: a1 never starts.
    let stderr = child.stderr.take().unwrap();
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(stderr));
    assert!(
        lines
            .by_ref()
            .any(|line| line.unwrap().contains("stopping")),
        "the plan logs that it stops"
    );
    bench.sandbox.write("release", "");
    let drain = std::thread::spawn(move || lines.for_each(drop));
    assert_eq!(child.wait().unwrap().code(), Some(1));
    drain.join().unwrap();
    bench.sandbox.write("wait", "");
    bench.take_calls();
    bench.ral("apply", &[&m]).expect(0);
    let done = updates(&bench.take_calls());
    assert_eq!(done, ["alpha a1"], "b1 is not done again");
    let states = plan_states(&bench);
    assert_eq!(states, ["Stopped", "Successful"]);
}

#[test]
fn an_item_whose_provider_is_not_found_stays_untouched() {
    let bench = Bench::new();
    let m = bench.manifest("m.yaml", "beta:\n  b1: {value: x}\n");
    bench.ral("apply", &[&m]).expect(0);
    // The same store, without the fixtures' data directory: beta is unknown.
    bench.sandbox.write("etc/hosts", "127.0.0.1 localhost\n");
    let hosts = bench.manifest("hosts.yaml", "host:\n  db.internal: {ip: 10.0.0.5}\n");
    let run = crate::support::run(&mut bench.sandbox.ral_command("apply", &[&hosts]));
    run.expect(0)
        .stderr_has("beta[b1] is in no manifest, but its provider beta::beta is not found");
    assert!(items(&bench).contains(&pair("beta[b1]", "Applied")));
    assert_eq!(bench.store("beta")["b1"]["value"], "x");
}

#[test]
fn the_history_shows_each_plan_at_its_local_date() {
    let bench = Bench::new();
    let m = bench.manifest("m.yaml", "beta:\n  b1: {value: x}\n");
    bench.ral("apply", &[&m]).expect(0);
    let history = state(&bench, &["-j", "history"]);
    let doc: Json = serde_json::from_str(&history.expect(0).stdout).unwrap();
    let created = doc["plans"][0]["created"].as_f64().unwrap() as i64;
    // The moments recorded are the clock's, within this test's run.
    let after = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    for moment in ["created", "started", "ended"] {
        let at = doc["plans"][0][moment].as_f64().unwrap();
        assert!(
            at > after - 600.0 && at <= after,
            "{moment}: {at}, now {after}"
        );
    }
    // A zone nine hours east of UTC, named JST, as a POSIX TZ string
    // (no zone files needed): the date is the moment's there.
    let at = |tz: &str| {
        let mut command = bench.sandbox.ral_command("state", &["history"]);
        run(command.env("TZ", tz)).expect(0).stdout.clone()
    };
    let (utc, tokyo) = (at("UTC0"), at("JST-9"));
    let shown = |text: &str, zone: &str| -> i64 {
        let date = regex::Regex::new(&format!(r"(\d+)-(\d+)-(\d+) (\d+):(\d+):(\d+) {zone}"))
            .unwrap()
            .captures(text)
            .unwrap_or_else(|| panic!("no {zone} date in {text:?}"))
            .iter()
            .skip(1)
            .map(|n| n.unwrap().as_str().parse::<i64>().unwrap())
            .collect::<Vec<_>>();
        // The time of day, in seconds.
        date[3] * 3_600 + date[4] * 60 + date[5]
    };
    assert_eq!(created.rem_euclid(86_400), shown(&utc, "UTC"));
    let ahead = (shown(&tokyo, "JST") - shown(&utc, "UTC")).rem_euclid(86_400);
    assert_eq!(ahead, 9 * 3_600, "{utc}{tokyo}");
}
