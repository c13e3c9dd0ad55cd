//! The exec provider called as the host calls it, on a temporary root,
//! with commands that only touch that root.

use serde_json::{json, Value as Json};

use super::*;
use crate::Log;

/// A call below a new temporary root, with a PATH.
fn call(noop: bool) -> (tempfile::TempDir, Call) {
    let root = tempfile::tempdir().unwrap();
    let mut call = Call::new(root.path(), noop, Log::new(Box::new(std::io::sink()), noop));
    call.env = vec![("PATH".into(), "/usr/bin:/bin".into())];
    (root, call)
}

/// The get of exec `name` told `values`.
fn get(call: &mut Call, name: &str, values: Json) -> Resource {
    call.should = serde_json::Map::from_iter([(name.to_owned(), values)]);
    let mut answer = Exec.get(call, &[name.to_owned()]).unwrap();
    assert_eq!(answer.len(), 1);
    answer.remove(0)
}

/// The error of the set that runs exec `m` as `found`.
fn set_error(call: &Call, found: &Resource) -> String {
    Exec.set(call, &[update("m", found)]).unwrap()[0]
        .clone()
        .unwrap_err()
        .message
}

fn update(name: &str, is: &Resource) -> Update {
    let mut should = Resource::new();
    should.insert(RUN.into(), Json::from(RUN_DONE));
    Update {
        name: name.into(),
        is: is.clone(),
        should,
    }
}

#[test]
fn without_values_an_exec_is_not_there_and_none_are_listed() {
    let (_root, call) = call(false);
    let answer = Exec.get(&call, &["x".into()]).unwrap();
    assert_eq!(answer[0]["error"]["kind"], "unknown");
    assert!(Exec.get(&call, &[]).unwrap().is_empty());
}

#[test]
fn guards_decide_whether_it_would_run_and_say_why() {
    let (root, mut call) = call(false);
    let found = get(
        &mut call,
        "m",
        json!({"command": "true", "creates": "/done"}),
    );
    assert_eq!(found[RUN], "/done does not exist");
    assert_eq!(found["creates"], "/done", "the values are read as given");
    // The root itself is always there.
    let found = get(&mut call, "r", json!({"command": "true", "creates": "/"}));
    assert_eq!(found[RUN], RUN_DONE);
    std::fs::write(root.path().join("done"), "").unwrap();
    let found = get(
        &mut call,
        "m",
        json!({"command": "true", "creates": "/done"}),
    );
    assert_eq!(found[RUN], RUN_DONE);

    let onlyif = |check: &str| json!({"command": "true", "onlyif": check});
    let mut call = call;
    assert_eq!(get(&mut call, "o", onlyif("false"))[RUN], RUN_DONE);
    assert_eq!(
        get(&mut call, "o", onlyif("true"))[RUN],
        "onlyif true succeeded"
    );
    let unless = |check: &str| json!({"command": "true", "unless": check});
    assert_eq!(get(&mut call, "u", unless("true"))[RUN], RUN_DONE);
    assert_eq!(
        get(&mut call, "u", unless("false"))[RUN],
        "unless false failed"
    );
    // Checks run in cwd, below the root, with the environment given.
    std::fs::create_dir(root.path().join("app")).unwrap();
    std::fs::write(root.path().join("app/flag"), "").unwrap();
    let found = get(
        &mut call,
        "c",
        json!({"command": "true", "cwd": "/app", "shell": true,
               "unless": "test -e flag && test \"$MODE\" = on", "environment": ["MODE=on"]}),
    );
    assert_eq!(found[RUN], RUN_DONE);
    let always = get(&mut call, "a", json!({"command": "true"}));
    assert_eq!(
        always[RUN],
        "it has no creates, onlyif or unless: it runs every time"
    );
    // refreshonly: nothing to run until a refresh.
    let found = get(
        &mut call,
        "r",
        json!({"command": "true", "refreshonly": true}),
    );
    assert_eq!(found[RUN], RUN_DONE);
}

#[test]
fn a_check_that_cannot_run_fails_the_read_naming_it() {
    let (_root, mut call) = call(false);
    let found = get(
        &mut call,
        "m",
        json!({"command": "true", "onlyif": "/nonexistent/check"}),
    );
    let message = found["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("onlyif: /nonexistent/check: /nonexistent/check is not a program"),
        "{message}"
    );
}

#[test]
fn a_set_runs_the_command_once_and_noop_runs_nothing() {
    let (root, mut call) = call(false);
    let values = json!({"command": ["sh", "-c", "echo ran >> log"]});
    let found = get(&mut call, "m", values.clone());
    let outcome = Exec.set(&call, &[update("m", &found)]).unwrap();
    let changes = outcome[0].as_ref().unwrap();
    assert_eq!(changes.len(), 1);
    assert_eq!(changes[0].attribute, RUN);
    assert_eq!(changes[0].was, found[RUN]);
    assert_eq!(changes[0].is, RUN_DONE);
    assert_eq!(
        std::fs::read_to_string(root.path().join("log")).unwrap(),
        "ran\n"
    );

    call.noop = true;
    let outcome = Exec.set(&call, &[update("m", &found)]).unwrap();
    assert!(outcome[0].is_ok());
    assert_eq!(
        std::fs::read_to_string(root.path().join("log")).unwrap(),
        "ran\n",
        "noop runs nothing"
    );
}

#[test]
fn an_exit_status_not_in_returns_fails_with_the_output_tail() {
    let (_root, mut call) = call(false);
    let script = "for i in $(seq 1 30); do echo line$i; done; echo oops >&2; exit 3";
    let values = json!({"command": script, "shell": true});
    let found = get(&mut call, "m", values);
    let err = set_error(&call, &found);
    assert!(err.contains("exited with status 3 (returns: 0)"), "{err}");
    assert!(err.contains("line30") && err.contains("oops"), "{err}");
    assert!(!err.contains("line10\n"), "only the last lines: {err}");
    let found = get(
        &mut call,
        "m",
        json!({"command": script, "shell": true, "returns": [0, 3]}),
    );
    assert!(Exec.set(&call, &[update("m", &found)]).unwrap()[0].is_ok());
}

#[test]
fn a_command_past_its_timeout_is_killed_and_fails() {
    let (_root, mut call) = call(false);
    let found = get(&mut call, "m", json!({"command": "sleep 30", "timeout": 1}));
    let started = std::time::Instant::now();
    let err = set_error(&call, &found);
    assert!(err.contains("did not finish within 1s"), "{err}");
    assert!(started.elapsed() < std::time::Duration::from_secs(20));
}

#[test]
fn a_refresh_runs_the_command_when_its_guards_allow() {
    let (root, call) = call(false);
    let values = json!({"command": ["sh", "-c", "echo ran >> log"], "refreshonly": true,
                        "creates": "/stop"});
    let values = values.as_object().unwrap().clone();
    Exec.refresh(&call, "r", &values).unwrap();
    assert_eq!(
        std::fs::read_to_string(root.path().join("log")).unwrap(),
        "ran\n"
    );
    std::fs::write(root.path().join("stop"), "").unwrap();
    Exec.refresh(&call, "r", &values).unwrap();
    assert_eq!(
        std::fs::read_to_string(root.path().join("log")).unwrap(),
        "ran\n",
        "creates exists: not run"
    );
}

#[test]
fn an_update_that_asks_for_anything_but_run_done_is_refused() {
    let (_root, call) = call(false);
    let mut bad = update("m", &Resource::new());
    bad.should.insert(RUN.into(), Json::from("again"));
    let err = Exec.set(&call, &[bad]).unwrap()[0]
        .clone()
        .unwrap_err()
        .message;
    assert!(err.contains("asks for run: done"), "{err}");
}

#[test]
fn a_tail_cut_at_its_start_quotes_only_whole_lines() {
    // The first line of a kept tail may be the end of a longer one, a
    // secret's end among it: it goes.
    let mut stdout = b"EFGH-end-of-a-secret\n".to_vec();
    stdout.resize(TAIL_BYTES - 6, b'y');
    stdout.extend_from_slice(b"\nlast\n");
    assert_eq!(stdout.len(), TAIL_BYTES);
    let ran = Finished {
        status: Some(1),
        stdout,
        ..Finished::default()
    };
    let tail = output_tail(&ran);
    assert!(!tail.contains("EFGH"), "{tail}");
    assert!(tail.ends_with("\nlast"), "{tail}");
    // Not cut: every line stays.
    let ran = Finished {
        status: Some(1),
        stdout: b"first\nlast\n".to_vec(),
        ..Finished::default()
    };
    assert_eq!(output_tail(&ran), ":\nfirst\nlast");
}

#[test]
fn a_missing_cwd_fails_the_read() {
    let (_root, mut call) = call(false);
    let found = get(
        &mut call,
        "m",
        json!({"command": "true", "cwd": "/nowhere"}),
    );
    let message = found["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("cwd: /nowhere is not a directory below the root"),
        "{message}"
    );
}

#[test]
fn a_program_not_found_is_named_before_anything_runs() {
    let (root, mut call) = call(false);
    let found = get(&mut call, "m", json!({"command": "nosuch-program --flag"}));
    let err = set_error(&call, &found);
    assert!(
        err.contains("'nosuch-program' is not a program on PATH (/usr/bin:/bin)"),
        "{err}"
    );
    let found = get(&mut call, "m", json!({"command": "./missing", "cwd": "/"}));
    let err = set_error(&call, &found);
    let expected = format!("{}/./missing is not a program", root.path().display());
    assert!(err.contains(&expected), "{err}");
}
