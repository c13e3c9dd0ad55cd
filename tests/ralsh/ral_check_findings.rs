//! `ral check` findings no other test provokes: a noop update that
//! changes what list reports without changing any file, a noop update
//! refused for every resource it is tried on, and an attribute the
//! metadata does not declare. Each fixture breaks one rule, so its
//! findings are listed exactly.

use crate::ral_check::{check_fixture, ral_check};

/// The findings `ral check` printed: each problem line (`  STEP: ...`)
/// with the hint line after it.
fn findings(stdout: &str) -> Vec<(String, String)> {
    let lines: Vec<&str> = stdout.lines().collect();
    lines
        .iter()
        .enumerate()
        .filter(|(_, line)| line.starts_with("  ") && !line.starts_with("   "))
        .map(|(at, line)| {
            let hint = lines.get(at + 1).copied().unwrap_or_default();
            (line.trim().to_owned(), hint.trim().to_owned())
        })
        .collect()
}

#[test]
fn a_noop_update_that_changes_the_listing_is_a_finding() {
    // The noop makes an empty directory below the root, which list then
    // reports as a resource; no file changes.
    let fixture = check_fixture("noop_changes_listing");
    let run = ral_check(&["--slow", "60"], std::slice::from_ref(&fixture));
    run.expect(1)
        .stdout_has(&format!("FAIL  {}", fixture.display()))
        .stdout_has("0 of 1 provider(s) clean");
    let hint = "hint: with ral_noop=true (json: ral.noop), report the changes but make none";
    assert!(
        findings(&run.stdout).contains(&(
            "noop: a noop update changed what list reports".to_owned(),
            hint.to_owned()
        )),
        "{}",
        run.stdout
    );
    assert!(
        findings(&run.stdout)
            .iter()
            .all(|(problem, _)| problem.starts_with("noop: ")),
        "only the noop breaks a rule:\n{}",
        run.stdout
    );
}

#[test]
fn an_undeclared_attribute_is_a_finding_of_list_and_find() {
    let fixture = check_fixture("undeclared");
    let run = ral_check(&["--slow", "60"], std::slice::from_ref(&fixture));
    run.expect(1)
        .stdout_has(&format!("FAIL  {}", fixture.display()))
        .stdout_has("0 of 1 provider(s) clean");
    let hint = "hint: report every attribute the metadata declares, in its declared type";
    let problem = "resource 'a': attribute 'mood' (value 'fine') is not declared in the metadata";
    assert_eq!(
        findings(&run.stdout),
        [
            (format!("list: {problem}"), hint.to_owned()),
            (format!("find: {problem}"), hint.to_owned()),
        ],
        "{}",
        run.stdout
    );
}

#[test]
fn a_noop_update_refused_for_one_resource_is_tried_on_the_next_ones() {
    // A provider may refuse to remove one resource for a reason of its
    // own (group::etc_group a user's primary group): the noop is tried on
    // the next listed, and a finding only when each one tried refuses.
    let fixture = check_fixture("noop_refused");
    let seed = tempfile::tempdir().unwrap();
    let check = |refuse: &str| {
        std::fs::write(seed.path().join("refuse"), refuse).unwrap();
        let args = ["--seed", seed.path().to_str().unwrap(), "--slow", "60"];
        ral_check(&args, std::slice::from_ref(&fixture))
    };
    check("a\n")
        .expect(0)
        .stdout_has("1 of 1 provider(s) clean");
    let run = check("a\nb\nc\n");
    run.expect(1);
    assert_eq!(
        findings(&run.stdout),
        [(
            "noop: nooprefused::noop_refused: update reported an error: a is in use".to_owned(),
            "hint: a noop update must succeed and report what it would change".to_owned()
        )],
        "{}",
        run.stdout
    );
}
