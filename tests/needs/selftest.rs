//! The harness itself: this binary, run again on one Ansible test with a
//! virtualenv that is not there, reports that test ignored with the
//! reason, and fails it where every need is required or where it is run
//! anyway, rather than pass a test that did not run.

use std::process::Command;

use crate::host::Test;
use crate::support::{run, Run};
use crate::tests;

/// This module's tests and what each needs.
pub fn tests() -> Vec<Test> {
    tests![[] a_missing_need_is_ignored_with_its_reason_and_never_passed]
}

const PROBE: &str = "ansible::ansible_doc_reads_both_modules";

/// This binary on [`PROBE`] alone, with no virtualenv, `needs` as
/// `RAL_TEST_NEEDS`, and `args`.
fn probe(needs: Option<&str>, args: &[&str]) -> (Run, String) {
    let empty = tempfile::tempdir().unwrap();
    let mut command = Command::new(std::env::current_exe().unwrap());
    command
        .env("RAL_TEST_ANSIBLE_VENV", empty.path())
        .env_remove("RAL_TEST_NEEDS")
        .args(["--exact", PROBE])
        .args(args);
    if let Some(needs) = needs {
        command.env("RAL_TEST_NEEDS", needs);
    }
    let why = format!("no {}/bin/ansible-playbook", empty.path().display());
    (run(&mut command), why)
}

fn a_missing_need_is_ignored_with_its_reason_and_never_passed() {
    let (ignored, why) = probe(None, &[]);
    ignored
        .expect(0)
        .stdout_has(&format!(
            "[needs ansible-venv] tests are ignored here: {why}"
        ))
        .stdout_has(&format!("test [needs ansible-venv] {PROBE} ... ignored"))
        .stdout_has("0 passed; 0 failed; 1 ignored");

    let (required, why) = probe(Some("all"), &[]);
    required
        .expect(101)
        .stdout_has("[needs ansible-venv] tests fail here")
        .stdout_has(&format!(
            "RAL_TEST_NEEDS=all, and needs ansible-venv: {why}"
        ))
        .stdout_has("0 passed; 1 failed; 0 ignored");

    let (anyway, why) = probe(None, &["--include-ignored"]);
    anyway
        .expect(101)
        .stdout_has(&format!("needs ansible-venv: {why}"))
        .stdout_has("0 passed; 1 failed");
}
