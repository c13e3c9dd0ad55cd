//! Refresh edges: `notify` and `subscribe` in manifests, `autonotify` and
//! `autosubscribe` in metadata, and the `refresh` action of both calling
//! conventions, against the store fixtures (tests/fixtures/plans: svc is
//! json and subscribes to the alpha its `watch` names; gammasvc is simple
//! and subscribes to beta[conf]; a beta notifies the svc its `needs`
//! names). Each refresh is logged to ROOT/refreshed.log as "STEM NAME
//! KEYS".

use crate::plans::Bench;
use crate::support::plan_schema;

/// The refreshes logged so far.
fn refreshed(bench: &Bench) -> Vec<String> {
    let path = bench.sandbox.root().join("refreshed.log");
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

const TWO_FILES_ONE_SERVICE: &str =
    "alpha:\n  a1: {value: one}\n  a2: {value: two}\nsvc:\n  web:\n    \
                                     value: v\n    subscribe: ['alpha[a1]', 'Alpha[a2]']\n";

/// The manifest with both alphas' values changed.
fn changed(text: &str) -> String {
    text.replace("value: one", "value: ONE")
        .replace("value: two", "value: TWO")
}

#[test]
fn two_changed_sources_refresh_their_subscriber_once_after_its_own_task() {
    let bench = Bench::new();
    let m = bench.manifest("m.yaml", TWO_FILES_ONE_SERVICE);
    // Created in this run: nothing to refresh, and no refresh planned.
    let first = bench.ral("plan", &[&m]);
    first.expect(0);
    assert!(!first.stdout.contains("^ svc[web]"), "{}", first.stdout);
    let first = bench.ral("apply", &[&m]);
    first.expect(0);
    assert!(!first.stdout.contains("^ svc[web]"), "{}", first.stdout);
    assert!(refreshed(&bench).is_empty());
    let m = bench.manifest("m2.yaml", &changed(TWO_FILES_ONE_SERVICE));
    bench
        .ral("plan", &[&m])
        .expect(0)
        .stdout_has("^ svc[web] (waits for alpha[a1], alpha[a2])")
        .stdout_has("    would refresh if alpha[a1] or alpha[a2] changes");
    assert!(refreshed(&bench).is_empty(), "a plan refreshes nothing");
    bench.take_calls();
    let applied = bench.ral("apply", &[&m]);
    applied
        .expect(0)
        .stdout_has("Success ^ svc[web]")
        .stdout_has(": refreshed, as alpha[a1] and alpha[a2] changed");
    assert_eq!(refreshed(&bench), ["svc web ensure,value"]);
    // Its line comes after those of what called for it.
    let at = |needle: &str| applied.stdout.find(needle).unwrap();
    assert!(at("~ alpha[a2]") < at("^ svc[web]"), "{}", applied.stdout);
    // After both changes, once.
    let calls = bench.take_calls();
    let at = |needle: &str| calls.iter().position(|c| c.contains(needle)).unwrap();
    assert!(at("alpha end set") < at("svc begin refresh"), "{calls:?}");
    // Nothing changed: no refresh is planned or made.
    bench
        .ral("plan", &[&m])
        .expect(0)
        .stdout_has("Plan: 0 to create, 0 to change, 0 to remove; 3 unchanged.");
    bench.ral("apply", &[&m]).expect(0);
    assert_eq!(refreshed(&bench).len(), 1);
}

#[test]
fn a_failed_source_skips_the_refresh() {
    let bench = Bench::new();
    let m = bench.manifest("m.yaml", TWO_FILES_ONE_SERVICE);
    bench.ral("apply", &[&m]).expect(0);
    bench.sandbox.write("fail", "a2\n");
    let m = bench.manifest("m2.yaml", &changed(TWO_FILES_ONE_SERVICE));
    bench
        .ral("apply", &[&m])
        .expect(1)
        .stdout_has("Failed  ~ alpha[a2]")
        .stdout_has("Skipped ^ svc[web]: not run: alpha[a2] did not succeed");
    assert!(refreshed(&bench).is_empty());
}

#[test]
fn a_refresh_that_fails_fails_its_task_and_what_waits_for_it() {
    let bench = Bench::new();
    let text = format!("{TWO_FILES_ONE_SERVICE}beta:\n  after: {{require: 'svc[web]'}}\n");
    let m = bench.manifest("m.yaml", &text);
    bench.ral("apply", &[&m]).expect(0);
    bench.sandbox.write("fail-refresh", "web\n");
    let m = bench.manifest(
        "m2.yaml",
        &changed(&text).replace("after: {", "after: {value: x, "),
    );
    let run = bench.ral("apply", &["--json", &m]);
    run.expect(1);
    let report: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    let tasks = report["plan"]["tasks"].as_array().unwrap();
    let refresh = tasks.iter().find(|t| t["action"] == "refresh").unwrap();
    assert_eq!(refresh["state"], "Failed");
    assert!(
        refresh["error"]["message"]
            .as_str()
            .unwrap()
            .contains("web: its refresh was refused by the test"),
        "{refresh}"
    );
    let after = tasks
        .iter()
        .find(|t| t["resource"] == "beta[after]")
        .unwrap();
    assert_eq!(
        after["state"], "Skipped",
        "what requires svc[web] waits for its refresh"
    );
    assert!(bench.store("beta")["after"].get("value").is_none());
}

#[test]
fn notify_in_puppet_s_form_and_one_reference_refreshes_too() {
    let bench = Bench::new();
    let text = "alpha:\n  a1: {value: one, notify: 'Svc[web]'}\nsvc:\n  web: {value: v}\n";
    let m = bench.manifest("m.yaml", text);
    bench.ral("apply", &[&m]).expect(0);
    let m = bench.manifest("m2.yaml", &changed(text));
    bench
        .ral("apply", &[&m])
        .expect(0)
        .stdout_has("Success ^ svc[web]");
    assert_eq!(refreshed(&bench), ["svc web ensure,value"]);
}

#[test]
fn metadata_subscribes_by_attribute_and_notifies_by_attribute() {
    let bench = Bench::new();
    // svc subscribes to the alpha its `watch` names; a beta notifies the
    // svc its `needs` names.
    let text = "alpha:\n  conf: {value: one}\nbeta:\n  b: {value: two, needs: api}\nsvc:\n  \
                web: {watch: conf}\n  api: {value: x}\n";
    let m = bench.manifest("m.yaml", text);
    bench.ral("apply", &[&m]).expect(0);
    let m = bench.manifest("m2.yaml", &text.replace("value: one", "value: ONE"));
    bench.ral("apply", &[&m]).expect(0);
    assert_eq!(refreshed(&bench), ["svc web ensure,watch"]);
    let text = text.replace("value: one", "value: ONE");
    let m = bench.manifest("m3.yaml", &text.replace("value: two", "value: TWO"));
    bench.ral("apply", &[&m]).expect(0);
    assert_eq!(
        refreshed(&bench),
        ["svc web ensure,watch", "svc api ensure,value"]
    );
}

#[test]
fn the_simple_convention_refreshes_with_its_attributes_and_no_secret() {
    let bench = Bench::new();
    let text = "beta:\n  conf: {value: one}\ngammasvc:\n  /s: {value: v}\nsvc:\n  \
                web: {watch: conf, secret: hunter2, value: v}\nalpha:\n  conf: {value: a}\n";
    let m = bench.manifest("m.yaml", text);
    bench.ral("apply", &[&m]).expect(0);
    let m = bench.manifest(
        "m2.yaml",
        &text
            .replace("conf: {value: one}", "conf: {value: ONE}")
            .replace("conf: {value: a}", "conf: {value: A}"),
    );
    bench.ral("apply", &[&m]).expect(0);
    let mut got = refreshed(&bench);
    got.sort();
    // gammasvc gets only its own attributes, never ral's; svc not its secret.
    assert_eq!(
        got,
        ["gammasvc /s ensure,value", "svc web ensure,value,watch"]
    );
}

#[test]
fn what_cannot_be_refreshed_is_refused_before_anything_runs() {
    let bench = Bench::new();
    let m = bench.manifest(
        "m.yaml",
        "alpha:\n  a: {value: x}\nbeta:\n  b:\n    value: y\n    subscribe: alpha[a]\n",
    );
    bench.ral("apply", &[&m]).expect(2).stderr_has(&format!(
        "{m}:6: beta[b]: subscribe alpha[a]: beta[b] cannot be refreshed: its provider beta::beta \
         has no refresh action"
    ));
    assert!(bench.take_calls().iter().all(|c| !c.contains("set")));
}

#[test]
fn the_json_report_and_a_saved_plan_carry_the_refresh() {
    let bench = Bench::new();
    let m = bench.manifest("m.yaml", TWO_FILES_ONE_SERVICE);
    bench.ral("apply", &[&m]).expect(0);
    let m = bench.manifest("m2.yaml", &changed(TWO_FILES_ONE_SERVICE));
    let planned = bench.ral("plan", &["--json", &m]);
    let doc: serde_json::Value = serde_json::from_str(&planned.stdout).unwrap();
    assert!(plan_schema().is_valid(&doc), "{doc}");
    let tasks = doc["plan"]["tasks"].as_array().unwrap();
    let refresh = tasks.iter().find(|t| t["action"] == "refresh").unwrap();
    assert_eq!(refresh["resource"], "svc[web]");
    assert_eq!(refresh["refresh_on"], serde_json::json!([1, 2]));
    assert_eq!(doc["plan"]["counts"]["refresh"], 1);
    // Saved, then applied: the refresh runs as planned.
    let file = bench.manifests.path().join("plan.json");
    bench
        .ral("plan", &["-o", file.to_str().unwrap(), &m])
        .expect(0);
    bench
        .ral("apply", &[file.to_str().unwrap()])
        .expect(0)
        .stdout_has("Success ^ svc[web]");
    assert_eq!(refreshed(&bench), ["svc web ensure,value"]);
}

#[test]
fn what_a_refresh_says_is_redacted_of_its_resource_s_secrets() {
    let bench = Bench::new();
    let text = "alpha:\n  a1: {value: one}\nsvc:\n  web: {value: v, secret: hunter2, watch: a1}\n";
    let m = bench.manifest("m.yaml", text);
    bench.ral("apply", &[&m]).expect(0);
    bench.sandbox.write("fail-refresh", "web\n");
    bench.sandbox.write("refresh-says", "the secret is hunter2");
    let m = bench.manifest("m2.yaml", &text.replace("value: one", "value: two"));
    let run = bench.ral("apply", &[&m]);
    run.expect(1)
        .stdout_has("its refresh was refused by the test the secret is [redacted]")
        .stderr_has("the secret is [redacted]");
    assert!(!run.stdout.contains("hunter2") && !run.stderr.contains("hunter2"));
    let history = crate::support::run(&mut bench.sandbox.ral_command("state", &["history"]));
    let last = history.stdout.lines().last().unwrap();
    let id = last.split_whitespace().next().unwrap();
    let shown = crate::support::run(&mut bench.sandbox.ral_command("state", &["show", id]));
    shown.expect(0).stdout_has("[redacted]");
    assert!(!shown.stdout.contains("hunter2"), "{}", shown.stdout);
    let db = std::fs::read(bench.sandbox.root().join("var/lib/ral/state.db")).unwrap();
    assert!(
        !db.windows(7).any(|w| w == b"hunter2"),
        "the store holds the secret"
    );
}

#[test]
fn a_source_whose_change_did_not_hold_skips_the_refresh() {
    let bench = Bench::new();
    // Sources and subscriber of one provider: the source is read back
    // before the refresh runs.
    let text = "svc:\n  conf: {value: one, notify: 'svc[web]'}\n  web: {value: v}\n";
    let m = bench.manifest("m.yaml", text);
    bench.ral("apply", &[&m]).expect(0);
    bench.sandbox.write("lie", "conf\n");
    let m = bench.manifest("m2.yaml", &text.replace("value: one", "value: two"));
    bench
        .ral("apply", &[&m])
        .expect(1)
        .stdout_has("Failed  ~ svc[conf]")
        .stdout_has("Skipped ^ svc[web]: not run: svc[conf] did not succeed");
    assert!(refreshed(&bench).is_empty());
}

#[test]
fn an_unquoted_reference_in_a_flow_list_is_told_how_to_quote_it() {
    let bench = Bench::new();
    let m = bench.manifest(
        "m.yaml",
        "alpha:\n  a1: {value: one}\nsvc:\n  web:\n    subscribe: [Alpha[a1]]\n",
    );
    bench.ral("plan", &[&m]).expect(2).stderr_has(
        "m.yaml:5: invalid YAML: while parsing a flow sequence, expected ',' or ']' (is a [ left \
         without its ]? a reference TYPE[NAME] inside [ ] must be quoted: ['file[/a]', \
         'file[/b]'])",
    );
}

#[test]
fn a_resource_with_problems_of_its_own_still_has_its_references_checked() {
    let bench = Bench::new();
    let m = bench.manifest(
        "m.yaml",
        "delta:\n  d1: {value: x, size: 99, notify: 'svc[nope]'}\nalpha:\n  \
         a1: {value: y, subscribe: 'delta[d1]'}\n",
    );
    bench
        .ral("plan", &[&m])
        .expect(2)
        .stderr_has("3 problems in the manifest")
        .stderr_has("m.yaml:2: delta[d1]: invalid value '99' for attribute 'size'")
        .stderr_has("m.yaml:2: delta[d1]: notify svc[nope]: no such resource in the manifest")
        .stderr_has(
            "m.yaml:4: alpha[a1]: subscribe delta[d1]: alpha[a1] cannot be refreshed: its \
             provider alpha::alpha has no refresh action",
        );
}

#[test]
fn a_misspelt_reference_gets_the_closest_name_of_its_type() {
    let bench = Bench::new();
    let m = bench.manifest(
        "m.yaml",
        "alpha:\n  conf: {value: one, notify: 'svc[webb]'}\nsvc:\n  web: {value: v}\n",
    );
    bench.ral("plan", &[&m]).expect(2).stderr_has(
        "alpha[conf]: notify svc[webb]: no such resource in the manifest (did you mean 'web'?)",
    );
}

/// A refresh that failed stays owed: `ral plan` shows it, and the next
/// apply runs it though nothing changes then; once it succeeded it is
/// owed no more.
#[test]
fn a_failed_refresh_is_owed_and_runs_on_the_next_apply() {
    let bench = Bench::new();
    let m = bench.manifest("m.yaml", TWO_FILES_ONE_SERVICE);
    bench.ral("apply", &[&m]).expect(0);
    bench.sandbox.write("fail-refresh", "web\n");
    let m = bench.manifest("m2.yaml", &changed(TWO_FILES_ONE_SERVICE));
    bench
        .ral("apply", &[&m])
        .expect(1)
        .stdout_has("Failed  ^ svc[web]")
        .stdout_has("; the refresh stays owed, and the next apply runs it");
    assert!(refreshed(&bench).is_empty());
    bench.sandbox.write("fail-refresh", "");
    // Nothing else to do: the refresh alone.
    bench
        .ral("plan", &["--detailed-exitcodes", &m])
        .expect(2)
        .stdout_has("^ svc[web]\n    owed: an earlier run's refresh of it did not succeed")
        .stdout_has("0 to create, 0 to change, 0 to remove; 3 unchanged; 1 refresh(es) owed by an earlier run.");
    let json = bench.ral("plan", &["-j", &m]);
    let report: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    plan_schema().validate(&report).unwrap();
    assert_eq!(report["plan"]["tasks"][0]["owed"], true);
    // A refresh is a change.
    bench
        .ral("apply", &["--detailed-exitcodes", &m])
        .expect(2)
        .stdout_has("Success ^ svc[web]")
        .stdout_has(": refreshed, as an earlier run owed");
    assert_eq!(refreshed(&bench), ["svc web ensure,value"]);
    bench
        .ral("plan", &["--detailed-exitcodes", &m])
        .expect(0)
        .stdout_has("Plan: 0 to create, 0 to change, 0 to remove; 3 unchanged.");
}

/// A refresh under way when ral is killed is owed, as is one its run
/// never reached; a saved plan carries it.
#[test]
fn a_killed_refresh_is_owed_and_a_saved_plan_runs_it() {
    use std::os::unix::process::CommandExt;
    let bench = Bench::new();
    let m = bench.manifest("m.yaml", TWO_FILES_ONE_SERVICE);
    bench.ral("apply", &[&m]).expect(0);
    bench.sandbox.write("wait-refresh", "web\n");
    let m = bench.manifest("m2.yaml", &changed(TWO_FILES_ONE_SERVICE));
    let mut apply = bench
        .command("apply", &[&m])
        .process_group(0)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let marker = bench.sandbox.root().join("refreshing-web");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !marker.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the refresh never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    // SAFETY: signals the process group the child leads, not yet reaped.
    assert_eq!(
        unsafe { libc::kill(-(apply.id() as i32), libc::SIGKILL) },
        0
    );
    apply.wait().unwrap();
    bench.sandbox.write("wait-refresh", "");
    assert!(refreshed(&bench).is_empty());
    let saved = bench.manifests.path().join("plan.json");
    let saved = saved.to_str().unwrap();
    bench
        .ral("plan", &["-o", saved, &m])
        .expect(0)
        .stdout_has("    owed: an earlier run's refresh of it did not succeed");
    bench
        .ral("apply", &[saved])
        .expect(0)
        .stdout_has(": refreshed, as an earlier run owed");
    assert_eq!(refreshed(&bench), ["svc web ensure,value"]);
}

/// A refresh owed to a resource no manifest lists any more stays owed
/// while the store keeps it (`--keep-removed`), and is forgotten with it.
#[test]
fn a_refresh_owed_to_a_resource_left_out_is_forgotten_with_it() {
    let bench = Bench::new();
    let m = bench.manifest("m.yaml", TWO_FILES_ONE_SERVICE);
    bench.ral("apply", &[&m]).expect(0);
    bench.sandbox.write("fail-refresh", "web\n");
    let m = bench.manifest("m2.yaml", &changed(TWO_FILES_ONE_SERVICE));
    bench.ral("apply", &[&m]).expect(1);
    bench.sandbox.write("fail-refresh", "");
    let without =
        changed("alpha:\n  a1: {value: one}\n  a2: {value: two}\nsvc:\n  api: {value: v}\n");
    let without = bench.manifest("m3.yaml", &without);
    bench.ral("apply", &["--keep-removed", &without]).expect(0);
    bench
        .ral("plan", &[&m])
        .expect(0)
        .stdout_has("^ svc[web]\n    owed: an earlier run's refresh of it did not succeed");
    // Removed: nothing is owed to it any more.
    bench.ral("apply", &[&without]).expect(0);
    let db = bench.sandbox.root().join("var/lib/ral/state.db");
    let conn = rusqlite::Connection::open(db).unwrap();
    let owed: i64 = conn
        .query_row("SELECT count(*) FROM refreshes", [], |row| row.get(0))
        .unwrap();
    assert_eq!(owed, 0);
    assert!(refreshed(&bench).is_empty());
}
