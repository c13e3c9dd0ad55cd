//! The edges of saved plans the other tests leave: where `ral plan -o`
//! may write (a file named like the store's, in another directory; from a
//! working directory where nothing can be written), and a read that failed
//! when the plan was made, which its task keeps word for word.

use serde_json::Value as Json;

use crate::plans::{plan_json, task, updates, Bench};
use crate::support::run;

#[test]
fn a_plan_named_like_the_stores_files_may_go_in_another_directory() {
    let bench = Bench::new();
    let m = bench.manifest("m.yaml", "beta:\n  b1: {value: x}\n");
    bench.ral("apply", &[&m]).expect(0);
    // Only the store's own directory is refused (see misplaced_inputs).
    let elsewhere = bench.manifests.path().join("state.db.plan");
    let m = bench.manifest("m.yaml", "beta:\n  b1: {value: y}\n");
    bench
        .ral("plan", &["-o", elsewhere.to_str().unwrap(), &m])
        .expect(0);
    bench.ral("apply", &[elsewhere.to_str().unwrap()]).expect(0);
    assert!(bench.sandbox.read("beta.json").contains("\"y\""));
}

#[test]
fn a_plan_is_written_beside_its_path_whatever_the_working_directory() {
    // From /proc, where no file can be made, the plan still goes where -o
    // says (its temporary file beside it, renamed into place).
    let bench = Bench::new();
    let m = bench.manifest("m.yaml", "beta:\n  b1: {value: x}\n");
    let saved = bench.manifests.path().join("p.plan");
    let mut command = bench.command("plan", &["-o", saved.to_str().unwrap(), &m]);
    run(command.current_dir("/proc")).expect(0);
    let left: Vec<_> = std::fs::read_dir(bench.manifests.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert!(left.contains(&"p.plan".to_owned()), "{left:?}");
    assert_eq!(left.len(), 2, "no temporary file left: {left:?}");
    bench.ral("apply", &[saved.to_str().unwrap()]).expect(0);
}

#[test]
fn a_read_that_failed_when_the_plan_was_made_fails_its_task_with_the_providers_words() {
    let bench = Bench::new();
    bench.sandbox.write("broken-beta", "");
    let m = bench.manifest("m.yaml", "beta:\n  b1: {value: x}\n");
    let saved = bench.manifests.path().join("p.plan");
    let saved = saved.to_str().unwrap();
    // The plan says it could not read b1, and is saved all the same.
    bench.ral("plan", &["-o", saved, &m]).expect(1);
    let applied = bench.ral("apply", &["-j", saved]);
    applied.expect(1);
    let doc = plan_json(&applied);
    let b1 = task(&doc, "beta[b1]");
    assert_eq!(b1["state"], "Failed", "{b1}");
    assert_eq!(b1["error"]["kind"], "read", "{b1}");
    let message = b1["error"]["message"].as_str().unwrap();
    assert!(message.contains("the store is broken"), "{message}");
}

/// Edits the saved plan at `path` and seals it again with its store's key,
/// as only someone holding that key could: what ral still refuses then is
/// refused by its own checks of the plan, not by the seal.
fn reseal(bench: &Bench, path: &str, edit: impl FnOnce(&mut Json)) {
    let key_file = bench.sandbox.root().join("var/lib/ral/state.db.key");
    let hex = std::fs::read_to_string(key_file).unwrap();
    let bytes: Vec<u8> = (0..64)
        .step_by(2)
        .map(|at| u8::from_str_radix(&hex[at..at + 2], 16).unwrap())
        .collect();
    let key = ral::store::StoreKey::from_bytes(bytes.try_into().unwrap());
    let mut doc: Json = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    edit(&mut doc["plan"]);
    // The tag covers every byte before it, its field's name included.
    let signed = format!(
        "{{\"ral_saved_plan\":{},\"plan\":{},\"hmac\":\"",
        doc["ral_saved_plan"], doc["plan"]
    );
    let tag = key.digest(&[signed.as_bytes()]);
    std::fs::write(path, format!("{signed}{tag}\"}}\n")).unwrap();
}

/// A change made to a saved plan's body.
type Edit = fn(&mut Json);

/// A saved plan of two tasks, b1 then a1 (which needs b1), and its path.
fn two_tasks(bench: &Bench) -> String {
    let m = bench.manifest(
        "m.yaml",
        "beta:\n  b1: {value: x}\nalpha:\n  a1: {value: z, needs: b1}\n",
    );
    let saved = bench.manifests.path().join("p.plan");
    let saved = saved.to_str().unwrap().to_owned();
    bench.ral("plan", &["-o", &saved, &m]).expect(0);
    saved
}

#[test]
fn a_resealed_plan_is_still_checked_task_by_task() {
    // Sealed again as it was, it applies: the seal is made right here.
    let bench = Bench::new();
    let saved = two_tasks(&bench);
    reseal(&bench, &saved, |_| {});
    bench.ral("apply", &[&saved]).expect(0);

    let cases: [(&str, Edit); 6] = [
        ("is out of order", |plan| {
            plan["tasks"][0]["id"] = Json::from(2);
        }),
        ("waits for task 2, which is not before it", |plan| {
            plan["tasks"][1]["requires"] = serde_json::json!([2]);
        }),
        ("waits for task 0, which is not before it", |plan| {
            plan["tasks"][1]["requires"] = serde_json::json!([0]);
        }),
        ("has two tasks", |plan| {
            let mut again = plan["tasks"][0].clone();
            again["id"] = Json::from(3);
            again["requires"] = serde_json::json!([]);
            plan["tasks"].as_array_mut().unwrap().push(again);
        }),
        ("has the unknown action 'explode'", |plan| {
            plan["tasks"][0]["action"] = Json::from("explode");
        }),
        (
            "is not in its manifests or the state store any more",
            |plan| {
                plan["tasks"][0]["type"] = Json::from("beta::beta");
            },
        ),
    ];
    for (said, edit) in cases {
        let bench = Bench::new();
        let saved = two_tasks(&bench);
        reseal(&bench, &saved, edit);
        bench.take_calls();
        bench.ral("apply", &[&saved]).expect(2).stderr_has(said);
        assert!(
            updates(&bench.take_calls()).is_empty(),
            "{said}: something ran"
        );
    }
}

#[test]
fn a_resealed_request_other_than_the_manifests_is_refused_plain_or_secret() {
    let plan = |bench: &Bench| {
        let m = bench.manifest("m.yaml", "alpha:\n  u1: {value: v, secret: s3cret}\n");
        let saved = bench.manifests.path().join("p.plan");
        let saved = saved.to_str().unwrap().to_owned();
        bench.ral("plan", &["-o", &saved, &m]).expect(0);
        saved
    };
    let cases: [Edit; 2] = [
        |plan| {
            for attr in plan["tasks"][0]["request"].as_array_mut().unwrap() {
                if attr["attr"] == "value" {
                    attr["value"] = Json::from("w");
                }
            }
        },
        |plan| {
            for attr in plan["tasks"][0]["request"].as_array_mut().unwrap() {
                if attr["attr"] == "secret" {
                    attr["hmac"] = Json::from("00".repeat(32));
                }
            }
        },
    ];
    for edit in cases {
        let bench = Bench::new();
        let saved = plan(&bench);
        reseal(&bench, &saved, edit);
        bench.take_calls();
        bench
            .ral("apply", &[&saved])
            .expect(2)
            .stderr_has("the manifests ask for alpha[u1] otherwise than when it was made");
        assert!(updates(&bench.take_calls()).is_empty());
    }
}

#[test]
fn a_secret_that_had_no_value_then_and_has_none_now_is_no_drift() {
    let bench = Bench::new();
    bench.sandbox.write(
        "alpha.json",
        "{\"u1\": {\"ensure\": \"present\", \"value\": \"x\"}}",
    );
    let m = bench.manifest("m.yaml", "alpha:\n  u1: {value: x, secret: first-s3cret}\n");
    let saved = bench.manifests.path().join("p.plan");
    let saved = saved.to_str().unwrap();
    bench.ral("plan", &["-o", saved, &m]).expect(0);
    bench.ral("apply", &[saved]).expect(0);
    assert_eq!(bench.store("alpha")["u1"]["secret"], "first-s3cret");
}

#[test]
fn a_task_refused_as_drifted_shows_the_old_value_of_a_secret_redacted() {
    let bench = Bench::new();
    let stored = |value: &str| {
        format!(
            "{{\"u1\": {{\"ensure\": \"present\", \"value\": \"{value}\", \"secret\": \"old-s3cret\"}}}}"
        )
    };
    bench.sandbox.write("alpha.json", &stored("x"));
    let m = bench.manifest("m.yaml", "alpha:\n  u1: {value: y, secret: new-s3cret}\n");
    let saved = bench.manifests.path().join("p.plan");
    let saved = saved.to_str().unwrap();
    bench.ral("plan", &["-o", saved, &m]).expect(0);
    // Someone else changes the plain value: the task is refused, and its
    // planned changes are shown, the secret's old value redacted.
    bench.sandbox.write("alpha.json", &stored("theirs"));
    let applied = bench.ral("apply", &["-j", saved]);
    applied.expect(1);
    let doc = plan_json(&applied);
    let u1 = task(&doc, "alpha[u1]");
    assert_eq!(u1["error"]["kind"], "drifted", "{u1}");
    let change = u1["changes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["attr"] == "secret")
        .unwrap_or_else(|| panic!("no change of the secret: {u1}"));
    assert_eq!(change["was"], "[redacted]", "{u1}");
    assert!(!applied.stdout.contains("s3cret"));
}
