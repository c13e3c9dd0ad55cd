//! Saved plans: `ral plan -o FILE` and `ral apply FILE` apply exactly that
//! plan, refused whole when the store or the manifests changed since or
//! when it was applied already, and each task refused when its resource
//! drifted since the plan.

use crate::plans::{plan_json, task, updates, Bench};

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
    let planned: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(saved).unwrap()).unwrap();
    assert_eq!(doc["plan"]["id"], planned["id"]);
    assert_eq!(updates(&bench.take_calls()), ["beta b1", "alpha a1"]);
    // Applied once: the store moved on, so it is refused whole.
    bench
        .ral("apply", &[saved])
        .expect(2)
        .stderr_has("is Invalid: the state store changed since it was made");
    // A plan with nothing to do leaves the store as it is; applying it
    // twice is refused for that.
    bench.ral("plan", &["-o", saved, &m]).expect(0);
    bench.ral("apply", &[saved]).expect(0);
    bench
        .ral("apply", &[saved])
        .expect(2)
        .stderr_has("it was applied already (a plan applies at most once)");
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
