//! The edges of saved plans the other tests leave: where `ral plan -o`
//! may write (a file named like the store's, in another directory; from a
//! working directory where nothing can be written), and a read that failed
//! when the plan was made, which its task keeps word for word.

use crate::plans::{plan_json, task, Bench};
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
