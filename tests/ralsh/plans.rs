//! `ral plan` and `ral apply` against the recording store fixtures
//! (tests/fixtures/plans: alpha, beta and delta speak json, gamma simple;
//! every call is logged to ROOT/calls.log as "STEM begin ACTION NAMES" and
//! "STEM end ACTION").

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value as Json;

use crate::support::{fixtures_dir, plan_schema, run, Run, Sandbox};

pub fn plans_dir() -> PathBuf {
    fixtures_dir().join("plans")
}

/// `ral SUBCOMMAND` with the plan fixtures and a manifest written to the
/// sandbox's parent-free temp file `m.yaml` (outside the root).
pub struct Bench {
    pub sandbox: Sandbox,
    pub manifests: tempfile::TempDir,
}

impl Bench {
    pub fn new() -> Bench {
        Bench {
            sandbox: Sandbox::new(),
            manifests: tempfile::tempdir().unwrap(),
        }
    }

    /// A bench whose root holds the seeded account files and hosts.
    pub fn seeded() -> Bench {
        Bench {
            sandbox: Sandbox::seeded(),
            manifests: tempfile::tempdir().unwrap(),
        }
    }

    pub fn manifest(&self, name: &str, text: &str) -> String {
        let path = self.manifests.path().join(name);
        std::fs::write(&path, text).unwrap();
        path.to_str().unwrap().to_owned()
    }

    pub fn command(&self, subcommand: &str, args: &[&str]) -> Command {
        let dir = plans_dir();
        let mut with_fixtures = vec!["-I", dir.to_str().unwrap()];
        with_fixtures.extend_from_slice(args);
        self.sandbox.ral_command(subcommand, &with_fixtures)
    }

    pub fn ral(&self, subcommand: &str, args: &[&str]) -> Run {
        run(&mut self.command(subcommand, args))
    }

    /// Waits until the store fixture's update of `name` has started (it
    /// creates ROOT/started-NAME, see `wait` in store.py).
    pub fn await_started(&self, name: &str) {
        let started = self.sandbox.root().join(format!("started-{name}"));
        let deadline = Instant::now() + Duration::from_secs(60);
        while !started.exists() {
            assert!(Instant::now() < deadline, "{name}'s update never started");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The calls logged since the last `take_calls`.
    pub fn take_calls(&self) -> Vec<String> {
        let calls = self.sandbox.calls();
        let _ = std::fs::remove_file(self.sandbox.root().join("calls.log"));
        calls
    }

    /// The resources a store holds, as JSON.
    pub fn store(&self, stem: &str) -> Json {
        let text = self.sandbox.read(&format!("{stem}.json"));
        if text.is_empty() {
            Json::Object(Default::default())
        } else {
            serde_json::from_str(&text).unwrap()
        }
    }
}

/// The update calls among `calls`: "STEM NAMES".
pub fn updates(calls: &[String]) -> Vec<String> {
    calls
        .iter()
        .filter_map(|line| {
            let mut words = line.splitn(4, ' ');
            let (stem, event, action) = (words.next()?, words.next()?, words.next()?);
            (event == "begin" && (action == "set" || action == "update"))
                .then(|| format!("{stem} {}", words.next().unwrap_or_default()))
        })
        .collect()
}

/// Each resource a change call was made for, in call order: a batched
/// `alpha a1,a2` counts as `alpha a1` then `alpha a2`.
fn each_update(calls: &[String]) -> Vec<String> {
    updates(calls)
        .iter()
        .flat_map(|call| {
            let (stem, names) = call.split_once(' ').unwrap_or((call, ""));
            names.split(',').map(move |name| format!("{stem} {name}"))
        })
        .collect()
}

fn reads(calls: &[String]) -> Vec<String> {
    calls
        .iter()
        .filter(|line| {
            line.contains(" begin get")
                || line.contains(" begin list")
                || line.contains(" begin find")
        })
        .cloned()
        .collect()
}

fn position(list: &[String], wanted: &str) -> usize {
    list.iter()
        .position(|line| line == wanted)
        .unwrap_or_else(|| panic!("{wanted:?} not in {list:#?}"))
}

pub fn plan_json(run: &Run) -> Json {
    let doc: Json = serde_json::from_str(&run.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}):\n{}\n{}", run.stdout, run.stderr));
    if let Err(e) = plan_schema().validate(&doc) {
        panic!("does not match the plan schema: {e}\n{doc:#}");
    }
    doc
}

pub fn task<'a>(doc: &'a Json, resource: &str) -> &'a Json {
    doc["plan"]["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["resource"] == resource)
        .unwrap_or_else(|| panic!("no task for {resource} in {doc:#}"))
}

const LINKED: &str = "\
gamma:
  /srv/app/conf: {value: deep}
  /srv: {value: top}
alpha:
  a1: {value: one, needs: b1}
  a2: {value: two, require: 'gamma[/srv/app/conf]'}
beta:
  b1: {value: three, before: ['alpha[a2]']}
";

#[test]
fn plan_reads_each_provider_once_and_changes_nothing() {
    let bench = Bench::new();
    let m = bench.manifest("m.yaml", LINKED);
    let run = bench.ral("plan", &[&m]);
    run.expect(0)
        .stdout_has("+ alpha[a1] (waits for beta[b1])")
        .stdout_has("    value: 'one'")
        .stdout_has("Plan: 5 to create, 0 to change, 0 to remove; 0 unchanged.");
    let calls = bench.take_calls();
    assert!(
        updates(&calls).is_empty(),
        "plan changed something: {calls:#?}"
    );
    let mut read = reads(&calls);
    read.sort();
    // One get of all the names per json provider; gamma has two names and
    // is read by one listing, not a find per name.
    assert_eq!(
        read,
        [
            "alpha begin get a1,a2",
            "beta begin get b1",
            "gamma begin list",
        ]
    );
    assert_eq!(bench.store("alpha"), serde_json::json!({}));
}

#[test]
fn apply_follows_require_before_and_automatic_edges_then_plans_nothing() {
    let bench = Bench::new();
    let m = bench.manifest("m.yaml", LINKED);
    bench
        .ral("apply", &[&m])
        .expect(0)
        .stdout_has("Apply complete: 5 created; 0 unchanged (");
    let calls = bench.take_calls();
    // a1 and a2 go in one set when b1 is the last of their prerequisites to
    // finish, in separate ones otherwise: both orders are right.
    let done = each_update(&calls);
    assert_eq!(done.len(), 5, "{done:#?}");
    // names_are_paths: the parent path first.
    assert!(position(&done, "gamma /srv") < position(&done, "gamma /srv/app/conf"));
    // refers_to: a1 needs b1.
    assert!(position(&done, "beta b1") < position(&done, "alpha a1"));
    // require: a2 after the gamma path; before: b1 before a2.
    assert!(position(&done, "gamma /srv/app/conf") < position(&done, "alpha a2"));
    assert!(position(&done, "beta b1") < position(&done, "alpha a2"));
    // The verification read each provider once after the changes.
    let after = position(&calls, "alpha end set");
    let verified: Vec<&String> = calls[after..]
        .iter()
        .filter(|l| l.contains(" begin get") || l.contains(" begin list"))
        .collect();
    assert!(!verified.is_empty(), "no verification read: {calls:#?}");
    assert_eq!(bench.store("alpha")["a2"]["value"], "two");
    assert_eq!(bench.store("gamma")["/srv"]["value"], "top");

    let again = bench.ral("plan", &["--detailed-exitcodes", &m]);
    again
        .expect(0)
        .stdout_has("Plan: 0 to create, 0 to change, 0 to remove; 5 unchanged.");
    bench.take_calls();
    bench.ral("apply", &["--detailed-exitcodes", &m]).expect(0);
    assert!(
        updates(&bench.take_calls()).is_empty(),
        "a second apply changed something"
    );
}

#[test]
fn a_task_waits_through_unchanged_resources_for_each_task_behind_them_once() {
    let bench = Bench::new();
    let before = "beta:\n  b1: {value: one}\n  b2: {value: two, require: 'beta[b1]'}\n  \
                  b3: {value: three, require: 'beta[b1]'}\n  \
                  b4: {value: four, require: ['beta[b2]', 'beta[b3]', 'beta[b1]']}\n";
    bench
        .ral("apply", &[&bench.manifest("m.yaml", before)])
        .expect(0);
    // b1 and b4 change; b2 and b3, between them, do not: b4 waits for b1
    // through both, and directly, and names it once.
    let after = before
        .replace("value: one", "value: uno")
        .replace("value: four", "value: cuatro");
    bench
        .ral("plan", &[&bench.manifest("m2.yaml", &after)])
        .expect(0)
        .stdout_has("~ beta[b4] (waits for beta[b1])\n")
        .stdout_has("Plan: 0 to create, 2 to change, 0 to remove; 2 unchanged.");
}

#[test]
fn ready_tasks_of_a_json_provider_go_in_one_set_and_calls_of_one_provider_never_overlap() {
    let bench = Bench::new();
    let m = bench.manifest(
        "m.yaml",
        "alpha:\n  a1: {value: x}\n  a2: {value: y}\n  a3: {value: z}\ngamma:\n  /g1: {value: x}\n  /g2: {value: y}\n",
    );
    bench.ral("apply", &["--jobs", "8", &m]).expect(0);
    let calls = bench.take_calls();
    let done = updates(&calls);
    assert!(done.contains(&"alpha a1,a2,a3".to_owned()), "{done:#?}");
    // gamma (simple) gets one update per resource.
    assert!(done.contains(&"gamma /g1".to_owned()) && done.contains(&"gamma /g2".to_owned()));
    for stem in ["alpha", "gamma"] {
        let mut open = false;
        for line in calls.iter().filter(|l| l.starts_with(&format!("{stem} "))) {
            let begins = line.contains(" begin ");
            assert!(begins != open, "{stem} overlaps itself: {calls:#?}");
            open = begins;
        }
    }
}

#[test]
fn a_failed_task_skips_only_its_dependents() {
    let bench = Bench::new();
    bench.sandbox.write("fail", "b1\n");
    let m = bench.manifest("m.yaml", LINKED);
    let run = bench.ral("apply", &["-j", &m]);
    run.expect(1);
    let doc = plan_json(&run);
    assert_eq!(doc["plan"]["state"], "Failed");
    assert_eq!(doc["plan"]["counts"]["failed"], 1);
    let failed = task(&doc, "beta[b1]");
    assert_eq!(failed["state"], "Failed");
    assert_eq!(failed["error"]["kind"], "provider");
    assert!(failed["error"]["message"]
        .as_str()
        .unwrap()
        .contains("b1 refused by the test"));
    for dependent in ["alpha[a1]", "alpha[a2]"] {
        assert_eq!(task(&doc, dependent)["state"], "Skipped", "{dependent}");
        assert_eq!(task(&doc, dependent)["error"]["kind"], "prerequisite");
    }
    for independent in ["gamma[/srv]", "gamma[/srv/app/conf]"] {
        assert_eq!(task(&doc, independent)["state"], "Success", "{independent}");
    }
    let done = updates(&bench.take_calls());
    assert!(
        !done.iter().any(|u| u.starts_with("alpha")),
        "a dependent ran: {done:#?}"
    );
    assert_eq!(doc["plan"]["counts"]["skipped"], 2);
    // Detailed: changes made and failures.
    bench.sandbox.write("fail", "a1\n");
    bench.ral("apply", &["--detailed-exitcodes", &m]).expect(6);
}

#[test]
fn an_unreadable_provider_fails_its_own_resources_and_their_dependents_only() {
    let bench = Bench::new();
    bench.sandbox.write("broken-beta", "");
    let m = bench.manifest("m.yaml", LINKED);
    let plan = bench.ral("plan", &["--detailed-exitcodes", &m]);
    plan.expect(6)
        .stdout_has("! beta[b1]")
        .stdout_has("the store is broken");
    let run = bench.ral("apply", &["-j", &m]);
    run.expect(1);
    let doc = plan_json(&run);
    assert_eq!(task(&doc, "beta[b1]")["action"], "unknown");
    assert_eq!(task(&doc, "beta[b1]")["error"]["kind"], "read");
    assert_eq!(task(&doc, "alpha[a1]")["state"], "Skipped");
    assert_eq!(task(&doc, "gamma[/srv]")["state"], "Success");
    // A skipped task names what it waited for that did not succeed, and
    // only that: a2 also waited for gamma[/srv/app/conf], which succeeded.
    for skipped in ["alpha[a1]", "alpha[a2]"] {
        assert_eq!(
            task(&doc, skipped)["error"]["message"],
            "not run: beta[b1] did not succeed"
        );
    }
    // A task that failed at planning is shown as ended, once, and the
    // tasks still to run are not.
    let run = bench.ral("apply", &[&m]);
    run.expect(1);
    let ended = |state: &str, resource: &str| {
        run.stdout
            .lines()
            .filter(|line| line.starts_with(state) && line.contains(resource))
            .count()
    };
    assert_eq!(ended("Failed", "beta[b1]"), 1, "{}", run.stdout);
    assert_eq!(ended("Skipped", "alpha[a1]"), 1, "{}", run.stdout);
    assert_eq!(ended("Initial", ""), 0, "{}", run.stdout);
}

#[test]
fn the_verification_catches_a_provider_that_reports_success_but_changed_nothing() {
    let bench = Bench::new();
    let m = bench.manifest(
        "m.yaml",
        "alpha:\n  a1: {value: old}\n  a2: {value: fine}\n",
    );
    bench.ral("apply", &[&m]).expect(0);
    bench.sandbox.write("lie", "a1\n");
    let m = bench.manifest(
        "m.yaml",
        "alpha:\n  a1: {value: new}\n  a2: {value: better}\n",
    );
    let run = bench.ral("apply", &["-j", &m]);
    run.expect(1);
    let doc = plan_json(&run);
    let lied = task(&doc, "alpha[a1]");
    assert_eq!(lied["state"], "Failed");
    assert_eq!(lied["error"]["kind"], "verify");
    assert_eq!(
        lied["error"]["message"],
        "alpha::alpha reported success, but attribute 'value' is 'old' afterwards, not 'new'"
    );
    assert_eq!(task(&doc, "alpha[a2]")["state"], "Success");
}

#[test]
fn a_task_the_verification_fails_has_one_line_and_it_says_failed() {
    let bench = Bench::new();
    let m = bench.manifest(
        "m.yaml",
        "alpha:\n  a1: {value: old}\n  a2: {value: fine}\n",
    );
    bench.ral("apply", &[&m]).expect(0);
    bench.sandbox.write("lie", "a1\n");
    let m = bench.manifest(
        "m2.yaml",
        "alpha:\n  a1: {value: new}\n  a2: {value: better}\n",
    );
    let run = bench.ral("apply", &[&m]);
    run.expect(1);
    let lines = |name: &str| -> Vec<&str> {
        run.stdout
            .lines()
            .filter(|line| line.contains(&format!("alpha[{name}]")))
            .collect()
    };
    let lied = lines("a1");
    assert_eq!(lied.len(), 1, "{}", run.stdout);
    assert!(
        lied[0].starts_with("Failed  ~ alpha[a1]")
            && lied[0].ends_with(
                "reported success, but attribute 'value' is 'old' afterwards, not 'new'"
            ),
        "{}",
        run.stdout
    );
    let fine = lines("a2");
    assert_eq!(fine.len(), 1, "{}", run.stdout);
    assert!(fine[0].starts_with("Success ~ alpha[a2]"), "{}", run.stdout);
}

#[test]
fn the_verification_tells_a_removal_not_made_from_a_value_that_reads_absent() {
    let bench = Bench::new();
    let m = bench.manifest("m.yaml", "alpha:\n  a1: {value: old}\n  a2: {value: old}\n");
    bench.ral("apply", &[&m]).expect(0);
    bench.sandbox.write("lie", "a1\na2\n");
    // a1 is to go, a2 to hold the text "absent": neither is done.
    let m = bench.manifest(
        "m.yaml",
        "alpha:\n  a1: {ensure: absent}\n  a2: {value: absent}\n",
    );
    let run = bench.ral("apply", &["-j", &m]);
    run.expect(1);
    let doc = plan_json(&run);
    assert_eq!(
        task(&doc, "alpha[a1]")["error"]["message"],
        "alpha::alpha reported success, but the resource still exists afterwards"
    );
    assert_eq!(
        task(&doc, "alpha[a2]")["error"]["message"],
        "alpha::alpha reported success, but attribute 'value' is 'old' afterwards, not 'absent'"
    );
}

#[test]
fn every_validation_error_is_reported_with_its_file_and_line_and_nothing_runs() {
    let bench = Bench::new();
    let first = bench.manifest(
        "first.yaml",
        "\
nosuchtype:
  x: {}
delta:
  d1: {value: v, colour: red}
  d2: {value: v, serial: '5'}
  d3: {value: v, size: eleven}
alpha:
  a1: {value: v, require: 'beta[nope]'}
  c1: {value: v, require: 'alpha[c2]'}
  c2: {value: v, require: 'alpha[c1]'}
",
    );
    let second = bench.manifest("second.yaml", "alpha::alpha:\n  a1: {value: again}\n");
    let run = bench.ral("plan", &[&first, &second]);
    run.expect(2);
    let expected = [
        format!("{first}:2: unknown provider or type 'nosuchtype'"),
        format!("{first}:4: delta[d1]: unknown attribute 'colour'"),
        format!("{first}:5: delta[d2]: attribute 'serial' is read-only"),
        format!("{first}:6: delta[d3]: invalid value 'eleven' for attribute 'size'"),
        format!("{first}:8: alpha[a1]: require beta[nope]: no such resource in the manifest"),
        format!("{second}:2: alpha::alpha[a1] is declared twice; first as alpha[a1] at {first}:8"),
        format!("{first}:9: dependency cycle: alpha[c1] ({first}:9) -> alpha[c2] ({first}:10) -> alpha[c1] ({first}:9)"),
    ];
    for line in &expected {
        run.stderr_has(line);
    }
    assert!(bench.take_calls().is_empty(), "something ran");
    // JSON: the same problems in the error document; detailed: 1.
    let run = bench.ral("plan", &["-j", "--detailed-exitcodes", &first, &second]);
    run.expect(1);
    let doc = plan_json(&run);
    let problems = doc["error"]["problems"].as_array().unwrap();
    assert_eq!(problems.len(), expected.len(), "{doc:#}");
    assert_eq!(problems[1]["line"], 4);
}

#[test]
fn transitions_that_cannot_be_are_problems_found_at_planning() {
    let bench = Bench::new();
    let m = bench.manifest(
        "m.yaml",
        "delta:\n  d1: {size: 3}\n  d2: {value: v, fixed: a}\n",
    );
    bench.ral("apply", &[&m]).expect(2).stderr_has(&format!(
        "{m}:2: delta[d1]: creating 'd1' needs the required attribute(s) value"
    ));
    let m = bench.manifest("m.yaml", "delta:\n  d2: {value: v, fixed: a}\n");
    bench.ral("apply", &[&m]).expect(0);
    let m = bench.manifest("m.yaml", "delta:\n  d2: {value: v, fixed: b}\n");
    bench
        .ral("plan", &[&m])
        .expect(2)
        .stderr_has("attribute 'fixed' can only be set when 'd2' is created");
    assert_eq!(bench.store("delta")["d2"]["fixed"], "a");
}

#[test]
fn removal_changes_and_manifests_from_json_and_stdin() {
    let bench = Bench::new();
    let m = bench.manifest(
        "m.json",
        "{\"beta\": {\"b1\": {\"value\": \"x\"}, \"b2\": {\"value\": \"y\"}}}",
    );
    bench.ral("apply", &["--detailed-exitcodes", &m]).expect(2);
    let mut command = bench.command("plan", &["-j", "-"]);
    command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command.spawn().unwrap();
    std::io::Write::write_all(
        child.stdin.as_mut().unwrap(),
        b"beta:\n  b1: {ensure: absent}\n  b2: {value: z}\n",
    )
    .unwrap();
    drop(child.stdin.take());
    let output = child.wait_with_output().unwrap();
    let run = Run {
        status: output.status.code().unwrap(),
        stdout: String::from_utf8(output.stdout).unwrap(),
        stderr: String::from_utf8(output.stderr).unwrap(),
    };
    run.expect(0);
    let doc = plan_json(&run);
    assert_eq!(task(&doc, "beta[b1]")["action"], "remove");
    assert_eq!(
        task(&doc, "beta[b1]")["changes"],
        serde_json::json!([{"attr": "ensure", "is": "absent", "was": "present"}])
    );
    assert_eq!(task(&doc, "beta[b2]")["action"], "change");
    assert_eq!(
        task(&doc, "beta[b2]")["changes"],
        serde_json::json!([{"attr": "value", "is": "z", "was": "y"}])
    );
    assert_eq!(doc["plan"]["state"], "Initial");
}

#[test]
fn an_interrupt_stops_the_plan_lets_the_running_task_finish_and_stops_the_rest() {
    let bench = Bench::new();
    bench.sandbox.write("wait", "b1\n");
    let m = bench.manifest("m.yaml", LINKED);
    let mut child = bench
        .command("apply", &["-j", "--jobs", "1", &m])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    bench.await_started("b1");
    // SAFETY: kill with a live child's PID.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    // Release b1 only once the plan has logged its stop, so nothing else
    // can start in between.
    let stderr = child.stderr.take().unwrap();
    let (stopping, stop_seen) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut seen = String::new();
        for line in std::io::BufRead::lines(std::io::BufReader::new(stderr)) {
            let line = line.unwrap();
            if line.contains("stopping") {
                let _ = stopping.send(());
            }
            seen.push_str(&line);
            seen.push('\n');
        }
        seen
    });
    stop_seen
        .recv_timeout(Duration::from_secs(60))
        .expect("the plan logs that it stops");
    bench.sandbox.write("release", "");
    let output = child.wait_with_output().unwrap();
    let stderr = reader.join().unwrap();
    assert!(stderr.contains("no new task starts"), "{stderr}");
    let run = Run {
        status: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8(output.stdout).unwrap(),
        stderr,
    };
    run.expect(1);
    let doc = plan_json(&run);
    assert_eq!(doc["plan"]["state"], "Stopped");
    assert_eq!(task(&doc, "beta[b1]")["state"], "Success");
    let stopped = doc["plan"]["counts"]["stopped"].as_u64().unwrap();
    let succeeded = doc["plan"]["counts"]["success"].as_u64().unwrap();
    assert_eq!(stopped + succeeded, 5, "{doc:#}");
    assert!(
        stopped >= 2,
        "a1 and a2 wait for b1 and were stopped: {doc:#}"
    );
    assert_eq!(task(&doc, "alpha[a1]")["state"], "Stopped");
    // What was done: the stopped tasks, and the succeeded ones as created.
    let done = &doc["plan"]["counts"]["done"];
    assert_eq!(done["stopped"].as_u64(), Some(stopped), "{done}");
    assert_eq!(done["created"].as_u64(), Some(succeeded), "{done}");
    assert!(!updates(&bench.take_calls())
        .iter()
        .any(|u| u.starts_with("alpha")));
}

#[test]
fn a_resource_unreadable_until_its_prerequisite_is_done_is_read_again_before_it_runs() {
    let bench = Bench::new();
    bench.sandbox.write("broken-beta", "");
    let m = bench.manifest(
        "m.yaml",
        "alpha:\n  a1: {value: fix-beta}\nbeta:\n  b1: {value: x, require: 'alpha[a1]'}\n",
    );
    bench
        .ral("plan", &["--detailed-exitcodes", &m])
        .expect(2)
        .stdout_has("? beta[b1] (waits for alpha[a1])")
        .stdout_has("read again once the tasks it waits for are done; it could not be read:")
        .stdout_has("1 to read once what they wait for is done");
    bench.take_calls();
    let run = bench.ral("apply", &["-j", &m]);
    run.expect(0);
    // Once read, the task does what its state called for: it created b1.
    let doc = plan_json(&run);
    assert_eq!(task(&doc, "beta[b1]")["action"], "create");
    assert_eq!(doc["plan"]["counts"]["create"], 2);
    let calls = bench.take_calls();
    // b1 was read again, after a1's set and before its own set.
    let fixed = position(&calls, "alpha end set");
    let set = position(&calls, "beta begin set b1");
    assert!(
        calls[fixed..set].contains(&"beta begin get b1".to_owned()),
        "{calls:#?}"
    );
    assert_eq!(bench.store("beta")["b1"]["value"], "x");
    bench.ral("plan", &["--detailed-exitcodes", &m]).expect(0);
}

#[test]
fn each_exit_status_plain_and_detailed() {
    let bench = Bench::new();
    let m = bench.manifest("m.yaml", "beta:\n  b1: {value: x}\n");
    let status = |subcommand: &str, detailed: bool| {
        let mut args = vec![m.as_str()];
        if detailed {
            args.insert(0, "--detailed-exitcodes");
        }
        bench.ral(subcommand, &args).status
    };
    // Pending changes: plan 0, detailed 2.
    assert_eq!((status("plan", false), status("plan", true)), (0, 2));
    // Every task fails: apply 1, detailed 4 (no change made).
    bench.sandbox.write("fail", "b1\n");
    assert_eq!((status("apply", false), status("apply", true)), (1, 4));
    // Unreadable: plan 1, detailed 4 (nothing to plan but the failure).
    bench.sandbox.write("broken-beta", "");
    assert_eq!((status("plan", false), status("plan", true)), (1, 4));
    std::fs::remove_file(bench.sandbox.root().join("broken-beta")).unwrap();
    // Made: apply detailed 2; then nothing to do: 0 and 0.
    bench.sandbox.write("fail", "");
    assert_eq!(status("apply", true), 2);
    assert_eq!((status("apply", false), status("apply", true)), (0, 0));
    assert_eq!((status("plan", false), status("plan", true)), (0, 0));
    // Nothing ran: 2, detailed 1; a missing manifest file too.
    let wrong = bench.manifest("wrong.yaml", "beta:\n  b1: {colour: x}\n");
    for subcommand in ["plan", "apply"] {
        assert_eq!(bench.ral(subcommand, &[&wrong]).status, 2);
        assert_eq!(
            bench
                .ral(subcommand, &["--detailed-exitcodes", &wrong])
                .status,
            1
        );
        bench
            .ral(subcommand, &["/nonexistent/m.yaml"])
            .expect(2)
            .stderr_has("/nonexistent/m.yaml: cannot read the manifest");
    }
}

#[test]
fn a_removal_whose_resource_a_prerequisite_already_removed_succeeds() {
    let bench = Bench::new();
    let m = bench.manifest("m.yaml", "beta:\n  b1: {value: x}\n");
    bench.ral("apply", &[&m]).expect(0);
    let m = bench.manifest(
        "m.yaml",
        "alpha:\n  a1: {value: drop-beta-b1}\nbeta:\n  b1: {ensure: absent, require: 'alpha[a1]'}\n",
    );
    bench.take_calls();
    let run = bench.ral("apply", &["-j", &m]);
    run.expect(0);
    let doc = plan_json(&run);
    assert_eq!(task(&doc, "beta[b1]")["state"], "Success");
    // Read again before it ran, it had nothing left to do: no set.
    assert!(!updates(&bench.take_calls())
        .iter()
        .any(|u| u.starts_with("beta")));
}

#[test]
fn references_to_a_rejected_resource_add_no_problem_and_manifest_problems_come_together() {
    let bench = Bench::new();
    let first = bench.manifest(
        "first.yaml",
        "beta:\n  b1: {valeu: x}\nalpha:\n  a1: {value: y, require: 'beta[b1]'}\n  a2: {value: z, require: 'beta[nope]'}\n",
    );
    let second = bench.manifest("second.yaml", "alpha:\n  a3: [not, a, mapping]\n");
    let run = bench.ral("plan", &[&first, &second]);
    run.expect(2)
        .stderr_has(&format!("{first}:2: beta[b1]: unknown attribute 'valeu'"))
        .stderr_has(&format!(
            "{first}:5: alpha[a2]: require beta[nope]: no such resource"
        ))
        .stderr_has(&format!(
            "{second}:2: alpha[a3]: the attributes must be a mapping"
        ));
    assert!(!run.stderr.contains("require beta[b1]"), "{}", run.stderr);
    assert!(
        run.stderr.contains("3 problems in the manifest"),
        "{}",
        run.stderr
    );
}

#[test]
fn exit_statuses_hold_with_a_closed_stdout_and_for_usage_errors() {
    let bench = Bench::new();
    bench.sandbox.write("fail", "b1\n");
    let m = bench.manifest(
        "m.yaml",
        "beta:\n  b1: {value: x}\ngamma:\n  /g: {value: y}\n",
    );
    let mut child = bench
        .command("apply", &["--detailed-exitcodes", &m])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // The reading end is gone before ral writes anything.
    drop(child.stdout.take());
    assert_eq!(child.wait().unwrap().code(), Some(6));
    bench
        .ral("plan", &["--detailed-exitcodes", "--jobs", "0", &m])
        .expect(1);
    bench.ral("plan", &["--jobs", "0", &m]).expect(2);
    bench
        .ral("plan", &["--detailed-exitcodes", "--no-such-flag", &m])
        .expect(1);
}

#[test]
fn a_manifest_path_that_is_not_utf8_is_reported_in_json_without_a_panic() {
    use std::os::unix::ffi::OsStrExt;
    let bench = Bench::new();
    let path = bench
        .manifests
        .path()
        .join(std::ffi::OsStr::from_bytes(b"bad\xff.yaml"));
    let run = run(bench.command("plan", &["-j"]).arg(&path));
    run.expect(2);
    let doc = plan_json(&run);
    let file = doc["error"]["problems"][0]["file"].as_str().unwrap();
    assert!(file.ends_with("bad\u{fffd}.yaml"), "{file}");
}

#[test]
fn names_and_types_with_line_breaks_cannot_forge_lines_of_their_own() {
    let bench = Bench::new();
    let m = bench.manifest(
        "m.yaml",
        "\"no\\nsuch\": {x: {}}\nbeta:\n  b1: {value: x, require: \"beta[a\\nm.yaml:1: forged]\"}\n",
    );
    let run = bench.ral("plan", &[&m]);
    run.expect(2);
    assert_eq!(run.stderr.lines().count(), 3, "{}", run.stderr);
    assert!(
        !run.stderr
            .lines()
            .any(|l| l.starts_with("m.yaml:1: forged")),
        "{}",
        run.stderr
    );
    run.stderr_has("'no\\nsuch'");
}

#[test]
fn quiet_prints_nothing_and_the_exit_status_still_tells() {
    let bench = Bench::new();
    bench.sandbox.write("fail", "b2\n");
    let m = bench.manifest("m.yaml", "beta:\n  b1: {value: x}\n  b2: {value: y}\n");
    let planned = bench.ral("plan", &["-q", "--detailed-exitcodes", &m]);
    planned.expect(2);
    assert_eq!(planned.stdout, "");
    let applied = bench.ral("apply", &["-q", &m]);
    applied.expect(1);
    assert_eq!(applied.stdout, "");
    assert_eq!(bench.store("beta")["b1"]["value"], "x");
}

#[test]
fn a_manifest_that_cannot_be_read_whole_stops_the_plan_at_its_own_problems() {
    // a.yaml does not parse, and b.yaml requires what a.yaml would have
    // declared: only a.yaml's problem is said, not a missing requirement
    // that is only its echo. A bad reference is reported on its own line.
    let sandbox = crate::support::Sandbox::new();
    sandbox.write("etc/hosts", "127.0.0.1 localhost\n");
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path.to_str().unwrap().to_owned()
    };
    let a = write("a.yaml", "host:\n  db: {ip: 10.0.0.6\n");
    let b = write(
        "b.yaml",
        "host:\n  web:\n    ip: 10.0.0.5\n    require: \"host[db]\"\n",
    );
    let run_ab = run(&mut sandbox.ral_command("plan", &[&a, &b]));
    run_ab.expect(2).stderr_has("a.yaml:3: invalid YAML");
    assert_eq!(run_ab.stderr.lines().count(), 1, "{}", run_ab.stderr);
    let c = write(
        "c.yaml",
        "host:\n  web:\n    ip: 10.0.0.5\n    require: \"no reference\"\n",
    );
    run(&mut sandbox.ral_command("plan", &[&c]))
        .expect(2)
        .stderr_has("c.yaml:4: host[web]: require: 'no reference' is not a reference TYPE[NAME]");
}

#[test]
fn a_task_deferred_until_its_requirements_ran_gets_the_next_id() {
    // a1 cannot be read before b1 is made, so its task is deferred: it
    // still takes the next number, never an earlier task's.
    let bench = Bench::new();
    bench.sandbox.write("broken-alpha", "");
    let m = bench.manifest(
        "m.yaml",
        "beta:\n  b1: {value: x}\nalpha:\n  a1: {value: z, needs: b1}\n",
    );
    let planned = bench.ral("plan", &["-j", &m]);
    let doc = plan_json(&planned);
    let ids: Vec<u64> = doc["plan"]["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_u64().unwrap())
        .collect();
    assert_eq!(ids, [1, 2], "{doc}");
    assert_eq!(task(&doc, "alpha[a1]")["action"], "unknown", "{doc}");
}

#[test]
fn a_value_absent_of_another_attribute_than_ensure_is_a_change_not_a_removal() {
    let bench = Bench::new();
    let m = bench.manifest("m.yaml", "beta:\n  b1: {value: x}\n");
    bench.ral("apply", &[&m]).expect(0);
    let m = bench.manifest("m.yaml", "beta:\n  b1: {value: absent}\n");
    let doc = plan_json(&bench.ral("plan", &["-j", &m]));
    assert_eq!(task(&doc, "beta[b1]")["action"], "change", "{doc}");
}

#[test]
fn puppet_s_capitalised_references_are_accepted() {
    let bench = Bench::new();
    let m = bench.manifest(
        "m.yaml",
        "beta:\n  b1: {value: x}\n  b2: {value: y, require: \"Beta[b1]\"}\n",
    );
    bench
        .ral("plan", &[&m])
        .expect(0)
        .stdout_has("+ beta[b2] (waits for beta[b1])");
    bench.ral("apply", &[&m]).expect(0);
    run(&mut bench.sandbox.ral_command("state", &["forget", "Beta[b2]"])).expect(0);
    let listed = run(&mut bench.sandbox.ral_command("state", &["list"]));
    assert!(listed.stdout.contains("beta[b1]"), "{}", listed.stdout);
    assert!(!listed.stdout.contains("beta[b2]"), "{}", listed.stdout);
    let wrong = bench.manifest(
        "w.yaml",
        "beta:\n  b2: {value: y, require: \"Betta[b1]\"}\n",
    );
    bench
        .ral("plan", &[&wrong])
        .expect(2)
        .stderr_has("unknown provider or type 'Betta'");
}
