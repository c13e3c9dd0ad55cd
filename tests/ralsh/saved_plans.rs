//! Saved plans: `ral plan -o FILE` and `ral apply FILE` apply exactly that
//! plan, refused whole when the file was changed, when it is for another
//! store or root, when the store or the manifests changed since or when it
//! was applied already, and each task refused when its resource drifted
//! since the plan. A file holds no sensitive value.

use std::os::unix::fs::PermissionsExt;

use serde_json::Value as Json;

use crate::plans::{plan_json, plans_dir, task, updates, Bench};
use crate::support::{run, Run};

/// `ral state --root ROOT ARGS...`.
fn state(bench: &Bench, args: &[&str]) -> Run {
    let mut command = bench.sandbox.ral_command("state", &[]);
    command.args(args);
    run(&mut command)
}

/// The path of the saved plan `p.plan` beside the bench's manifests.
fn plan_path(bench: &Bench) -> String {
    bench
        .manifests
        .path()
        .join("p.plan")
        .to_str()
        .unwrap()
        .to_owned()
}

/// A saved plan parsed as JSON.
fn parsed(path: &str) -> Json {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Writes `doc` back as ral lays a saved plan out (compact, one line), so
/// that only the edit differs.
fn write_back(path: &str, doc: &Json) {
    std::fs::write(path, format!("{doc}\n")).unwrap();
}

/// Applies `saved` and checks that it is refused whole with `message`:
/// exit 2, no update called.
fn refused(bench: &Bench, saved: &str, message: &str) {
    bench.take_calls();
    bench.ral("apply", &[saved]).expect(2).stderr_has(message);
    let calls = bench.take_calls();
    assert!(updates(&calls).is_empty(), "something ran: {calls:#?}");
}

/// Removes every member named `key` anywhere in `doc`.
fn remove_all(doc: &mut Json, key: &str) -> usize {
    match doc {
        Json::Object(map) => {
            let here = usize::from(map.shift_remove(key).is_some());
            here + map.values_mut().map(|v| remove_all(v, key)).sum::<usize>()
        }
        Json::Array(items) => items.iter_mut().map(|v| remove_all(v, key)).sum(),
        _ => 0,
    }
}

/// The value of the first member named `key` anywhere in `doc`.
fn find<'a>(doc: &'a Json, key: &str) -> Option<&'a Json> {
    match doc {
        Json::Object(map) => map
            .get(key)
            .or_else(|| map.values().find_map(|v| find(v, key))),
        Json::Array(items) => items.iter().find_map(|v| find(v, key)),
        _ => None,
    }
}

/// Sets every member named `key` anywhere in `doc` to `value`.
fn set_all(doc: &mut Json, key: &str, value: &Json) {
    match doc {
        Json::Object(map) => {
            for (k, v) in map.iter_mut() {
                if k == key {
                    *v = value.clone();
                } else {
                    set_all(v, key, value);
                }
            }
        }
        Json::Array(items) => items.iter_mut().for_each(|v| set_all(v, key, value)),
        _ => {}
    }
}

#[test]
fn a_saved_plan_applies_exactly_once() {
    let bench = Bench::new();
    let m = bench.manifest(
        "m.yaml",
        "beta:\n  b1: {value: x}\nalpha:\n  a1: {value: z, needs: b1}\n",
    );
    let saved = bench.manifests.path().join("p.plan");
    let saved = saved.to_str().unwrap();
    bench.ral("plan", &["-o", saved, &m]).expect(0);
    bench.take_calls();
    let run = bench.ral("apply", &["-j", saved]);
    run.expect(0);
    let doc = plan_json(&run);
    assert_eq!(doc["plan"]["id"], parsed(saved)["plan"]["id"]);
    assert_eq!(updates(&bench.take_calls()), ["beta b1", "alpha a1"]);
    // Applied once: it is refused whole.
    refused(&bench, saved, "is Invalid: it was already applied");
    // A plan with nothing to do leaves the store as it is; applying it
    // twice is refused for that.
    bench.ral("plan", &["-o", saved, &m]).expect(0);
    bench.ral("apply", &[saved]).expect(0);
    bench
        .ral("apply", &[saved])
        .expect(2)
        .stderr_has("it was already applied (a plan applies at most once)");
    assert!(updates(&bench.take_calls()).is_empty());
}

#[test]
fn a_saved_plan_is_refused_when_the_store_or_the_manifests_changed() {
    let bench = Bench::new();
    let m = bench.manifest("m.yaml", "beta:\n  b1: {value: x}\n");
    let other = bench.manifest("other.yaml", "gamma:\n  /g: {value: y}\n");
    let saved = bench.manifests.path().join("p.plan");
    let saved = saved.to_str().unwrap();
    bench.ral("plan", &["-o", saved, &m]).expect(0);
    bench.ral("apply", &[&other]).expect(0);
    bench.take_calls();
    bench
        .ral("apply", &["--detailed-exitcodes", saved])
        .expect(1)
        .stderr_has("the state store changed since it was made (serial 0, now ");
    // m names none of what ral manages now (gamma[/g]): without
    // --keep-removed, planning its removal would be refused.
    bench
        .ral("plan", &["--keep-removed", "-o", saved, &m])
        .expect(0);
    bench.manifest("m.yaml", "beta:\n  b1: {value: changed}\n");
    bench
        .ral("apply", &[saved])
        .expect(2)
        .stderr_has("its manifests changed since it was made");
    assert!(updates(&bench.take_calls()).is_empty(), "nothing ran");
}

#[test]
fn a_task_whose_resource_drifted_since_the_plan_is_refused_and_skips_its_dependents() {
    let bench = Bench::new();
    let m = bench.manifest("m.yaml", "beta:\n  b1: {value: x}\n  b2: {value: y}\n");
    bench.ral("apply", &[&m]).expect(0);
    let m = bench.manifest(
        "m.yaml",
        "beta:\n  b1: {value: x2}\n  b2: {value: y2}\nalpha:\n  a1: {value: z, needs: b1}\n",
    );
    let saved = bench.manifests.path().join("p.plan");
    let saved = saved.to_str().unwrap();
    bench.ral("plan", &["-o", saved, &m]).expect(0);
    // Someone changes b1 between the plan and the apply.
    bench.sandbox.write(
        "beta.json",
        "{\"b1\": {\"ensure\": \"present\", \"value\": \"other\"}, \"b2\": {\"ensure\": \"present\", \"value\": \"y\"}}",
    );
    bench.take_calls();
    let run = bench.ral("apply", &["-j", saved]);
    run.expect(1);
    let doc = plan_json(&run);
    let drifted = task(&doc, "beta[b1]");
    assert_eq!(drifted["state"], "Failed");
    assert_eq!(drifted["error"]["kind"], "drifted");
    assert_eq!(
        drifted["error"]["message"],
        "attribute 'value' was 'x' when the plan was made, and is 'other' now"
    );
    assert_eq!(task(&doc, "alpha[a1]")["state"], "Skipped");
    assert_eq!(task(&doc, "beta[b2]")["state"], "Success");
    assert_eq!(updates(&bench.take_calls()), ["beta b2"]);
    assert_eq!(bench.store("beta")["b1"]["value"], "other");
}

#[test]
fn a_saved_plan_runs_its_own_tasks_and_an_edited_task_is_refused() {
    let bench = Bench::new();
    let m = bench.manifest("m.yaml", "beta:\n  b1: {value: x}\n");
    let saved = plan_path(&bench);
    bench.ral("plan", &["-o", &saved, &m]).expect(0);
    let text = std::fs::read_to_string(&saved).unwrap();
    // What a task sets, edited: refused, not planned again.
    std::fs::write(&saved, text.replace("\"x\"", "\"evil\"")).unwrap();
    refused(&bench, &saved, "was changed after it was written");
    assert_eq!(bench.store("beta"), serde_json::json!({}));
    // The tasks are in the file: the resource, the action and what it sets.
    assert!(text.starts_with("{\"ral_saved_plan\":"), "{text}");
    let doc: Json = serde_json::from_str(&text).unwrap();
    let tasks = &doc["plan"]["tasks"];
    assert_eq!(tasks[0]["provider"], "beta::beta");
    assert_eq!(tasks[0]["name"], "b1");
    assert_eq!(tasks[0]["action"], "create");
    assert!(tasks[0]["should"]
        .as_array()
        .unwrap()
        .contains(&serde_json::json!({"attr": "value", "value": "x"})));
}

#[test]
fn a_saved_plan_whose_manifests_were_rewritten_with_their_digest_is_refused() {
    let bench = Bench::new();
    let m = bench.manifest("m.yaml", "beta:\n  b1: {value: x}\n");
    let evil = bench.manifest("evil.yaml", "beta:\n  b1: {value: uid-4444}\n");
    let saved = plan_path(&bench);
    let other = bench.manifests.path().join("q.plan");
    let other = other.to_str().unwrap();
    bench.ral("plan", &["-o", &saved, &m]).expect(0);
    bench.ral("plan", &["-o", other, &evil]).expect(0);
    let donor = parsed(other);
    let mut doc = parsed(&saved);
    for key in ["manifests", "manifest_digest"] {
        let value = find(&donor, key).unwrap().clone();
        set_all(&mut doc, key, &value);
    }
    write_back(&saved, &doc);
    refused(&bench, &saved, "was changed after it was written");
    assert_eq!(bench.store("beta"), serde_json::json!({}));
}

#[test]
fn a_saved_plan_whose_recorded_state_was_edited_is_refused() {
    let bench = Bench::new();
    let m = bench.manifest("m.yaml", "beta:\n  b1: {value: x}\n");
    let saved = plan_path(&bench);
    bench.ral("plan", &["-o", &saved, &m]).expect(0);
    // Claim that b1 already was as the manifest says.
    let mut doc = parsed(&saved);
    doc["plan"]["tasks"][0]["read"] = serde_json::json!({
        "state": "read",
        "found": true,
        "attrs": [
            {"attr": "ensure", "value": "present"},
            {"attr": "value", "value": "x"},
        ],
    });
    write_back(&saved, &doc);
    refused(&bench, &saved, "was changed after it was written");
    // Nothing recorded b1 as applied.
    let listed = state(&bench, &["list"]);
    listed.expect(0);
    assert!(!listed.stdout.contains("beta[b1]"), "{listed:?}");
}

#[test]
fn a_saved_plan_with_one_byte_flipped_anywhere_is_refused() {
    let bench = Bench::new();
    let m = bench.manifest("m.yaml", "beta:\n  b1: {value: x}\n  b2: {value: y}\n");
    let saved = plan_path(&bench);
    bench.ral("plan", &["-o", &saved, &m]).expect(0);
    let original = std::fs::read(&saved).unwrap();
    let mark = "{\"ral_saved_plan\":2".len();
    // Past the mark and format, at spread positions, the tag and the end.
    let len = original.len();
    let mut positions: Vec<usize> = (0..12).map(|i| mark + i * (len - mark) / 12).collect();
    positions.extend([len - 40, len - 3, len - 2, len - 1]);
    for at in positions {
        let mut bytes = original.clone();
        bytes[at] ^= 1;
        std::fs::write(&saved, &bytes).unwrap();
        bench.take_calls();
        let run = bench.ral("apply", &[&saved]);
        assert_eq!(run.status, 2, "byte {at} flipped: {run:?}");
        assert!(
            run.stderr.contains("was changed after it was written"),
            "byte {at} flipped: {run:?}"
        );
        assert!(updates(&bench.take_calls()).is_empty(), "byte {at} ran");
    }
    assert_eq!(bench.store("beta"), serde_json::json!({}));
    // The file as written still applies.
    std::fs::write(&saved, &original).unwrap();
    bench.ral("apply", &[&saved]).expect(0);
    assert_eq!(bench.store("beta")["b2"]["value"], "y");
}

#[test]
fn a_saved_plan_with_a_field_deleted_is_refused() {
    let bench = Bench::new();
    let m = bench.manifest(
        "m.yaml",
        "beta:\n  b1: {value: x}\nalpha:\n  a1: {needs: b1}\n",
    );
    let saved = plan_path(&bench);
    bench.ral("plan", &["-o", &saved, &m]).expect(0);
    let mut doc = parsed(&saved);
    assert!(remove_all(&mut doc, "requires") > 0);
    write_back(&saved, &doc);
    refused(&bench, &saved, "was changed after it was written");
}

#[test]
fn a_saved_plan_is_refused_by_another_store() {
    let bench = Bench::new();
    let m = bench.manifest("m.yaml", "beta:\n  b1: {value: x}\n");
    let saved = plan_path(&bench);
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.db");
    let b = dir.path().join("b.db");
    let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());
    // ral plan -o makes the store it binds the plan to.
    bench
        .ral("plan", &["--state", a, "-o", &saved, &m])
        .expect(0);
    bench.take_calls();
    // Store B does not exist, then exists fresh: refused both times.
    for _ in 0..2 {
        bench
            .ral("apply", &["--state", b, &saved])
            .expect(2)
            .stderr_has("it was made for another state store");
        assert!(updates(&bench.take_calls()).is_empty());
        let n = bench.manifest("n.yaml", "gamma:\n  /other: {value: z}\n");
        bench.ral("apply", &["--state", b, &n]).expect(0);
        bench.take_calls();
    }
    assert_eq!(bench.store("beta"), serde_json::json!({}));
    assert!(std::path::Path::new(a).exists());
    // Store A takes it.
    bench.ral("apply", &["--state", a, &saved]).expect(0);
    assert_eq!(bench.store("beta")["b1"]["value"], "x");
}

#[test]
fn a_saved_plan_is_refused_for_another_root() {
    let bench = Bench::new();
    let elsewhere = Bench::new();
    let m = bench.manifest("m.yaml", "beta:\n  b1: {value: x}\n");
    let saved = plan_path(&bench);
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state.db");
    let state = state.to_str().unwrap();
    bench
        .ral("plan", &["--state", state, "-o", &saved, &m])
        .expect(0);
    // The store refuses another root first (it serves one root); the
    // saved plan's own binding to its root stands behind it.
    let refused = elsewhere.ral("apply", &["--state", state, &saved]);
    refused.expect(2);
    assert!(
        refused.stderr.contains("it was made for the root")
            || refused
                .stderr
                .contains("a store serves one machine and root"),
        "{}",
        refused.stderr
    );
    assert!(updates(&elsewhere.take_calls()).is_empty());
    assert_eq!(elsewhere.store("beta"), serde_json::json!({}));
}

#[test]
fn a_saved_plan_applied_twice_is_already_applied() {
    let bench = Bench::new();
    let m = bench.manifest("m.yaml", "beta:\n  b1: {value: x}\n");
    let saved = plan_path(&bench);
    bench.ral("plan", &["-o", &saved, &m]).expect(0);
    bench.ral("apply", &[&saved]).expect(0);
    refused(&bench, &saved, "already applied");
}

#[test]
fn a_saved_plan_creates_two_resources_of_a_simple_provider() {
    // A simple provider's listing leaves out what does not exist, its
    // find reports it as ensure: absent: the same state.
    let bench = Bench::new();
    let m = bench.manifest("m.yaml", "gamma:\n  /a: {value: x}\n  /b: {value: y}\n");
    let saved = plan_path(&bench);
    bench.ral("plan", &["-o", &saved, &m]).expect(0);
    bench.take_calls();
    bench.ral("apply", &[&saved]).expect(0);
    assert_eq!(updates(&bench.take_calls()), ["gamma /a", "gamma /b"]);
    assert_eq!(bench.store("gamma")["/a"]["value"], "x");
    assert_eq!(bench.store("gamma")["/b"]["value"], "y");
}

#[test]
fn a_file_with_the_mark_that_does_not_parse_is_refused_not_read_as_a_manifest() {
    let bench = Bench::new();
    // Valid YAML (a flow mapping), not JSON.
    let saved = bench.manifest("p.plan", "{\"ral_saved_plan\":2, beta: {b1: {value: x}}}\n");
    bench.take_calls();
    bench
        .ral("apply", &[&saved])
        .expect(2)
        .stderr_has("saved plan ")
        .stderr_has("it is not JSON");
    assert!(updates(&bench.take_calls()).is_empty());
    // Without the mark, a file is a manifest.
    let manifest = bench.manifest("m.json", "{\"beta\": {\"b1\": {\"value\": \"x\"}}}\n");
    bench.ral("apply", &[&manifest]).expect(0);
    assert_eq!(bench.store("beta")["b1"]["value"], "x");
}

#[test]
fn a_saved_plan_holds_no_sensitive_value_and_is_private() {
    let bench = Bench::new();
    // A resource with a secret the manifest never mentions (a shadow-like
    // hash), and one whose manifest gives a password.
    bench.sandbox.write(
        "alpha.json",
        "{\"u1\": {\"ensure\": \"present\", \"value\": \"x\", \"secret\": \"$6$salt$SHADOWHASH\"}}",
    );
    let m = bench.manifest(
        "m.yaml",
        "alpha:\n  u1: {value: y}\n  u2: {value: v, secret: hunter2-password}\n",
    );
    let saved = plan_path(&bench);
    bench.ral("plan", &["-o", &saved, &m]).expect(0);
    let text = std::fs::read_to_string(&saved).unwrap();
    assert!(!text.contains("SHADOWHASH"), "observed secret in the file");
    assert!(!text.contains("hunter2"), "wanted secret in the file");
    let mode = std::fs::metadata(&saved).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    // It applies, with the password from the manifest, and leaves the
    // observed secret as it was.
    bench.ral("apply", &[&saved]).expect(0);
    let store = bench.store("alpha");
    assert_eq!(store["u2"]["secret"], "hunter2-password");
    assert_eq!(store["u1"]["secret"], "$6$salt$SHADOWHASH");
    assert_eq!(store["u1"]["value"], "y");
}

#[test]
fn a_saved_plan_whose_manifest_changed_its_sensitive_value_is_refused() {
    let bench = Bench::new();
    let m = bench.manifest("m.yaml", "alpha:\n  u2: {value: v, secret: first}\n");
    let saved = plan_path(&bench);
    bench.ral("plan", &["-o", &saved, &m]).expect(0);
    bench.manifest("m.yaml", "alpha:\n  u2: {value: v, secret: second}\n");
    refused(&bench, &saved, "its manifests changed since it was made");
    assert_eq!(bench.store("alpha"), serde_json::json!({}));
}

#[test]
fn a_saved_plan_holds_the_removals_of_stored_items() {
    let bench = Bench::new();
    let m = bench.manifest("m.yaml", "beta:\n  b1: {value: x}\n  b2: {value: y}\n");
    bench.ral("apply", &[&m]).expect(0);
    let m = bench.manifest("m.yaml", "beta:\n  b1: {value: x}\n");
    let saved = plan_path(&bench);
    bench.ral("plan", &["-o", &saved, &m]).expect(0);
    let doc = parsed(&saved);
    let tasks = doc["plan"]["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 1, "{doc:#}");
    assert_eq!(tasks[0]["name"], "b2");
    assert_eq!(tasks[0]["action"], "remove");
    bench.take_calls();
    bench.ral("apply", &[&saved]).expect(0);
    assert_eq!(updates(&bench.take_calls()), ["beta b2"]);
    assert_eq!(
        bench.store("beta"),
        serde_json::json!({"b1": {"ensure": "present", "value": "x"}})
    );
}

#[test]
fn a_saved_plan_is_for_this_machine_only() {
    let bench = Bench::new();
    let m = bench.manifest("m.yaml", "beta:\n  b1: {value: x}\n");
    let saved = plan_path(&bench);
    bench
        .ral("plan", &["-t", "elsewhere", "-o", &saved, &m])
        .expect(2)
        .stderr_has("do not take -t or -i");
    bench.ral("plan", &["-o", &saved, &m]).expect(0);
    bench.take_calls();
    bench
        .ral("apply", &["-t", "elsewhere", &saved])
        .expect(2)
        .stderr_has("do not take -t or -i");
    assert!(updates(&bench.take_calls()).is_empty());
}

#[test]
fn a_saved_plan_made_with_keep_removed_keeps_what_its_manifests_do_not_list() {
    let bench = Bench::new();
    let m = bench.manifest("m.yaml", "beta:\n  b1: {value: x}\n  b2: {value: y}\n");
    bench.ral("apply", &[&m]).expect(0);
    let m = bench.manifest("m.yaml", "beta:\n  b1: {value: x}\n");
    let saved = plan_path(&bench);
    bench
        .ral("plan", &["--keep-removed", "-o", &saved, &m])
        .expect(0);
    // Applied without the flag, it still keeps b2, in the store too.
    bench.take_calls();
    bench.ral("apply", &[&saved]).expect(0);
    assert!(updates(&bench.take_calls()).is_empty());
    assert_eq!(bench.store("beta")["b2"]["value"], "y");
    state(&bench, &["list"]).expect(0).stdout_has("beta[b2]");
    // A plan made to remove b2 does not take the flag.
    bench.ral("plan", &["-o", &saved, &m]).expect(0);
    bench
        .ral("apply", &["--keep-removed", &saved])
        .expect(2)
        .stderr_has("was made without --keep-removed");
    assert_eq!(bench.store("beta")["b2"]["value"], "y");
}

#[test]
fn a_saved_plan_is_not_made_from_standard_input() {
    // Its manifests are read again when it is applied.
    let bench = Bench::new();
    let saved = plan_path(&bench);
    bench
        .ral("plan", &["-o", &saved, "-"])
        .expect(2)
        .stderr_has("ral plan -o takes manifest files, not -");
    assert!(!std::path::Path::new(&saved).exists());
}

#[test]
fn a_sensitive_value_that_changed_since_the_plan_is_drift_and_is_not_shown() {
    let bench = Bench::new();
    let stored = |secret: &str| {
        format!(
            "{{\"u1\": {{\"ensure\": \"present\", \"value\": \"x\", \"secret\": \"{secret}\"}}}}"
        )
    };
    bench.sandbox.write("alpha.json", &stored("old-secret"));
    let m = bench.manifest("m.yaml", "alpha:\n  u1: {value: x, secret: new-secret}\n");
    let saved = plan_path(&bench);
    // Found as planned: it runs.
    bench.ral("plan", &["-o", &saved, &m]).expect(0);
    bench.ral("apply", &[&saved]).expect(0);
    assert_eq!(bench.store("alpha")["u1"]["secret"], "new-secret");
    // Changed by someone else since the plan: drifted, and not run.
    bench.sandbox.write("alpha.json", &stored("old-secret"));
    bench.ral("plan", &["-o", &saved, &m]).expect(0);
    bench.sandbox.write("alpha.json", &stored("their-secret"));
    bench.take_calls();
    let run = bench.ral("apply", &["-j", &saved]);
    run.expect(1);
    let doc = plan_json(&run);
    let drifted = task(&doc, "alpha[u1]");
    assert_eq!(drifted["error"]["kind"], "drifted");
    assert_eq!(
        drifted["error"]["message"],
        "sensitive attribute 'secret' changed since the plan was made"
    );
    assert!(updates(&bench.take_calls()).is_empty());
    for secret in ["old-secret", "their-secret", "new-secret"] {
        assert!(!run.stdout.contains(secret) && !run.stderr.contains(secret));
    }
    assert_eq!(bench.store("alpha")["u1"]["secret"], "their-secret");
}

#[test]
fn a_saved_plan_applied_without_its_provider_directories_says_which_and_where_they_were() {
    let bench = Bench::new();
    let m = bench.manifest("m.yaml", "beta:\n  b1: {value: x}\n");
    let saved = bench.manifests.path().join("p.plan");
    let saved = saved.to_str().unwrap();
    bench.ral("plan", &["-o", saved, &m]).expect(0);
    // Without the -I the plan was made with.
    let run = run(&mut bench.sandbox.ral_command("apply", &[saved]));
    run.expect(2)
        .stderr_has("unknown provider or type 'beta'")
        .stderr_has("the plan was made with the provider beta::beta")
        .stderr_has("give ral apply the -I directories (or RALSH_DATA_DIR) the plan was made with");
    assert!(
        run.stderr.contains(plans_dir().to_str().unwrap()),
        "{}",
        run.stderr
    );
    assert!(updates(&bench.take_calls()).is_empty());
}
