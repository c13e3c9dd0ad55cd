//! The plan a person reads at a glance: what a create makes (`ensure`),
//! multi-line values as unified diffs (never a sensitive one), colour only
//! where a terminal is (or is forced), and the counts of what an apply
//! did, in text, JSON and `ral state show`.

use serde_json::json;

use crate::plans::{plan_json, Bench};
use crate::support::{run, Sandbox};

#[test]
fn a_create_says_what_it_makes_a_directory_or_a_file() {
    let sandbox = Sandbox::new();
    sandbox.write("srv/.keep", "");
    let manifests = tempfile::tempdir().unwrap();
    let manifest = manifests.path().join("m.yaml");
    std::fs::write(
        &manifest,
        "file:\n  /srv/d: {ensure: directory}\n  /srv/f: {ensure: file, content: hi}\n",
    )
    .unwrap();
    let m = manifest.to_str().unwrap();
    let plan = run(&mut sandbox.ral_command("plan", &[m]));
    plan.expect(0)
        .stdout_has("+ file[/srv/d]\n    ensure: directory\n")
        .stdout_has("+ file[/srv/f]\n    ensure: file\n    content: 'hi'\n");
    let apply = run(&mut sandbox.ral_command("apply", &[m]));
    apply.expect(0);
    let line = |name: &str| {
        apply
            .stdout
            .lines()
            .find(|l| l.contains(&format!("+ file[{name}] (")))
            .unwrap_or_else(|| panic!("no line for {name}:\n{}", apply.stdout))
            .to_owned()
    };
    assert!(
        line("/srv/d").contains("): ensure: directory"),
        "{}",
        line("/srv/d")
    );
    assert!(
        line("/srv/f").contains("): ensure: file, content: 'hi'"),
        "{}",
        line("/srv/f")
    );
}

/// A stored alpha[a1] and a manifest changing the second of its 8 lines
/// and the last (which loses its line break).
fn multi_line_bench() -> (Bench, String) {
    let bench = Bench::new();
    let was: String = (1..=8).map(|n| format!("line {n}\n")).collect();
    let is = was
        .replace("line 2\n", "line two\n")
        .replace("line 8\n", "line 8");
    bench.sandbox.write(
        "alpha.json",
        &json!({"a1": {"ensure": "present", "value": was}}).to_string(),
    );
    let m = bench.manifest(
        "m.yaml",
        &format!("alpha:\n  a1: {{value: {}}}\n", json!(is)),
    );
    (bench, m)
}

#[test]
fn a_multi_line_change_is_a_unified_diff_in_the_plan_and_a_phrase_once_done() {
    let (bench, m) = multi_line_bench();
    let plan = bench.ral("plan", &[&m]);
    plan.expect(0);
    assert_eq!(
        plan.stdout,
        "~ alpha[a1]\n\
         \x20   value:\n\
         \x20     --- was\n\
         \x20     +++ is\n\
         \x20     @@ -1,8 +1,8 @@\n\
         \x20      line 1\n\
         \x20     -line 2\n\
         \x20     +line two\n\
         \x20      line 3\n\
         \x20      line 4\n\
         \x20      line 5\n\
         \x20      line 6\n\
         \x20      line 7\n\
         \x20     -line 8\n\
         \x20     +line 8\n\
         \x20     \\ No newline at end of file\n\
         Plan: 0 to create, 1 to change, 0 to remove; 0 unchanged.\n"
    );
    let apply = bench.ral("apply", &[&m]);
    apply
        .expect(0)
        .stdout_has("~ alpha[a1] (")
        .stdout_has("): value: changed (8 lines, +2 -2)\n");
    assert!(!apply.stdout.contains("@@"), "{}", apply.stdout);
}

#[test]
fn a_control_character_in_a_diff_line_is_escaped() {
    let bench = Bench::new();
    bench.sandbox.write(
        "alpha.json",
        &json!({"a1": {"ensure": "present", "value": "a\nb\n"}}).to_string(),
    );
    let m = bench.manifest("m.yaml", "alpha:\n  a1: {value: \"a\\n\\e[31mb\\n\"}\n");
    let plan = bench.ral("plan", &[&m]);
    plan.expect(0).stdout_has("      +\\u{1b}[31mb\n");
    assert!(!plan.stdout.contains('\x1b'), "{:?}", plan.stdout);
}

#[test]
fn a_sensitive_multi_line_value_is_never_diffed_nor_measured() {
    let bench = Bench::new();
    bench.sandbox.write(
        "alpha.json",
        &json!({"a1": {"ensure": "present", "secret": "old one\nold two\n"}}).to_string(),
    );
    let m = bench.manifest(
        "m.yaml",
        "alpha:\n  a1: {secret: \"new one\\nnew two\\nnew three\\n\"}\n",
    );
    let plan = bench.ral("plan", &[&m]);
    plan.expect(0)
        .stdout_has("~ alpha[a1]\n    secret: [redacted] -> [redacted]\n");
    let apply = bench.ral("apply", &[&m]);
    apply
        .expect(0)
        .stdout_has("): secret: [redacted] -> [redacted]\n");
    for shown in [&plan.stdout, &apply.stdout] {
        for hint in ["@@", "--- was", "new", "old", "lines"] {
            assert!(!shown.contains(hint), "{hint:?} in\n{shown}");
        }
    }
}

/// `ral plan` of a change with `env` set, its stdout a pipe.
fn plan_with(env: &[(&str, &str)]) -> String {
    let (bench, m) = multi_line_bench();
    let mut command = bench.command("plan", &[&m]);
    command.env("TERM", "xterm-256color");
    for (key, value) in env {
        command.env(key, value);
    }
    let plan = run(&mut command);
    plan.expect(0);
    plan.stdout
}

#[test]
fn colour_only_on_a_terminal_or_forced_and_never_with_no_color() {
    // A pipe: plain text, even with a terminal type that has colours.
    let piped = plan_with(&[]);
    assert!(!piped.contains('\x1b'), "{piped:?}");
    // Forced: the sign yellow, removed lines red, added lines green.
    let forced = plan_with(&[("CLICOLOR_FORCE", "1")]);
    let yellow_sign = format!("{}~", anstyle::AnsiColor::Yellow.on_default().bold());
    assert!(forced.starts_with(&yellow_sign), "{forced:?}");
    let red = anstyle::AnsiColor::Red.on_default();
    let green = anstyle::AnsiColor::Green.on_default();
    assert!(
        forced.contains(&format!("{red}-line 2{red:#}")),
        "{forced:?}"
    );
    assert!(
        forced.contains(&format!("{green}+line two{green:#}")),
        "{forced:?}"
    );
    // NO_COLOR wins over the force.
    let refused = plan_with(&[("CLICOLOR_FORCE", "1"), ("NO_COLOR", "1")]);
    assert_eq!(refused, piped);
}

const ONE_FAILURE: &str = "\
alpha:
  a1: {value: one}
  a2: {value: two, needs: b1}
beta:
  b1: {value: three}
  b2: {value: four}
";

#[test]
fn the_counts_after_a_run_say_what_happened_a_failed_create_as_failed() {
    let bench = Bench::new();
    bench
        .sandbox
        .write("beta.json", r#"{"b2": {"ensure": "present"}}"#);
    bench.sandbox.write("fail", "b1\n");
    let m = bench.manifest("m.yaml", ONE_FAILURE);
    let apply = bench.ral("apply", &[&m]);
    apply.expect(1);
    let last = apply.stdout.lines().last().unwrap();
    assert!(
        last.starts_with("Apply failed: 1 created, 1 changed, 1 failed, 1 skipped; 0 unchanged (")
            && last.ends_with(" s)."),
        "{}",
        apply.stdout
    );
    // Again, as JSON: a1 and b2 are done now, b1 fails again.
    let doc = plan_json(&bench.ral("apply", &["-j", &m]));
    assert_eq!(
        doc["plan"]["counts"]["done"],
        json!({"created": 0, "changed": 0, "removed": 0, "run": 0, "refreshed": 0,
               "failed": 1, "skipped": 1, "stopped": 0})
    );
    assert_eq!(doc["plan"]["counts"]["unchanged"], 2);
    // The first run, as the store shows it.
    let history = run(&mut bench.sandbox.ral_command("state", &["history"]));
    let first = history.stdout.split_whitespace().next().unwrap();
    run(&mut bench.sandbox.ral_command("state", &["show", first]))
        .expect(0)
        .stdout_has("\ndone: 1 created, 1 changed, 1 failed, 1 skipped; 0 unchanged\n");
}

#[test]
fn a_run_with_nothing_to_do_is_complete_with_no_changes() {
    let bench = Bench::new();
    let m = bench.manifest("m.yaml", "beta:\n  b1: {value: three}\n");
    bench.ral("apply", &[&m]).expect(0);
    let again = bench.ral("apply", &[&m]);
    again.expect(0);
    assert!(
        again
            .stdout
            .starts_with("Apply complete: no changes; 1 unchanged ("),
        "{}",
        again.stdout
    );
}
