//! `ral apply` on a terminal (a pseudo-terminal the test opens): the
//! question before removals, answered yes, no or not at all, skipped by
//! -y and absent without a terminal; and the progress lines on stderr,
//! absent from a pipe, a dumb terminal, --json and -q.

use std::process::Stdio;

use serde_json::Value as Json;

use crate::plans::{updates, Bench};
use crate::pty::Terminal;
use crate::support::run;

const QUESTION: &str = "Remove 1 resource(s) listed above? Only 'yes' goes on: ";
const CANCELLED: &str = "Apply cancelled; nothing was changed.";

/// `ral apply ARGS...` of the bench on a terminal, in plain text (no
/// colour) and with a terminal type that draws progress.
fn apply_on_terminal(bench: &Bench, args: &[&str]) -> Terminal {
    let mut command = bench.command("apply", args);
    command.env("NO_COLOR", "1").env("TERM", "xterm");
    Terminal::start(&mut command)
}

/// A bench where ral created alpha[a1] and beta[b1], and the manifest
/// `fewer.yaml` that lists only beta[b1]: its plan removes alpha[a1].
fn one_removal() -> (Bench, String) {
    let bench = Bench::new();
    let both = bench.manifest(
        "both.yaml",
        "alpha:\n  a1: {value: one}\nbeta:\n  b1: {value: x}\n",
    );
    bench.ral("apply", &[&both]).expect(0);
    bench.take_calls();
    let fewer = bench.manifest("fewer.yaml", "beta:\n  b1: {value: x}\n");
    (bench, fewer)
}

/// The plans the store recorded, as `ral state -j history` lists them.
fn history(bench: &Bench) -> Json {
    let mut command = bench.sandbox.ral_command("state", &[]);
    command.args(["-j", "history"]);
    let listed = run(&mut command);
    listed.expect(0);
    serde_json::from_str(&listed.stdout).unwrap()
}

fn names(bench: &Bench, stem: &str) -> Vec<String> {
    let store = bench.store(stem);
    store.as_object().unwrap().keys().cloned().collect()
}

/// Answered anything but yes, the apply ends at once: exit 1, nothing
/// called, nothing removed, no plan recorded, and no lock left behind.
fn assert_cancelled(bench: &Bench, before: &Json, (status, shown): (i32, String)) {
    assert_eq!(status, 1, "a cancelled apply exits 1:\n{shown}");
    assert!(shown.contains(CANCELLED), "{shown}");
    assert!(!shown.contains("Apply complete"), "no task ran:\n{shown}");
    assert_eq!(updates(&bench.take_calls()), Vec::<String>::new());
    assert_eq!(names(bench, "alpha"), ["a1"]);
    assert_eq!(&history(bench), before, "the store records no run");
}

#[test]
fn a_plan_that_removes_is_shown_and_asked_about() {
    let (bench, fewer) = one_removal();
    let before = history(&bench);
    let mut terminal = apply_on_terminal(&bench, &[&fewer]);
    terminal.wait_for(&regex::escape(QUESTION));
    // The plan comes first, as ral plan shows it.
    let plan = run(bench.command("plan", &[&fewer]).env("NO_COLOR", "1"));
    plan.expect(0);
    assert!(
        terminal.seen.starts_with(&plan.stdout),
        "the plan, then the question:\n{}",
        terminal.seen
    );
    terminal.answer("no");
    assert_cancelled(&bench, &before, terminal.finish());
    // The store was let go: the next apply takes it.
    bench.ral("apply", &[&fewer]).expect(0);
    assert_eq!(names(&bench, "alpha"), Vec::<String>::new());
}

#[test]
fn the_end_of_the_input_is_a_no() {
    let (bench, fewer) = one_removal();
    let before = history(&bench);
    // Where 0 would say "no changes", a cancelled apply still exits 1.
    let mut terminal = apply_on_terminal(&bench, &["--detailed-exitcodes", &fewer]);
    terminal.wait_for(&regex::escape(QUESTION));
    terminal.end_input();
    assert_cancelled(&bench, &before, terminal.finish());
}

#[test]
fn yes_applies_the_plan() {
    let (bench, fewer) = one_removal();
    let mut terminal = apply_on_terminal(&bench, &[&fewer]);
    terminal.wait_for(&regex::escape(QUESTION));
    terminal.answer("yes");
    let (status, shown) = terminal.finish();
    assert_eq!(status, 0, "{shown}");
    assert!(shown.contains("Apply complete: 1 removed;"), "{shown}");
    assert_eq!(updates(&bench.take_calls()), ["alpha a1"]);
    assert_eq!(names(&bench, "alpha"), Vec::<String>::new());
}

#[test]
fn auto_approve_asks_nothing() {
    for flag in ["-y", "--auto-approve"] {
        let (bench, fewer) = one_removal();
        let (status, shown) = apply_on_terminal(&bench, &[flag, &fewer]).finish();
        assert_eq!(status, 0, "{flag}: {shown}");
        assert!(
            !shown.contains("Only 'yes'"),
            "{flag} asks nothing:\n{shown}"
        );
        assert_eq!(names(&bench, "alpha"), Vec::<String>::new(), "{flag}");
    }
}

#[test]
fn without_a_terminal_a_removal_applies_at_once() {
    let (bench, fewer) = one_removal();
    // Standard input is a closed pipe: an apply that asked would read its
    // end as a no.
    let applied = run(bench.command("apply", &[&fewer]).stdin(Stdio::piped()));
    applied.expect(0);
    assert!(!applied.stdout.contains("Only 'yes'"), "{}", applied.stdout);
    assert_eq!(names(&bench, "alpha"), Vec::<String>::new());
}

#[test]
fn a_plan_without_removals_asks_nothing() {
    let (bench, _) = one_removal();
    let changed = bench.manifest(
        "changed.yaml",
        "alpha:\n  a1: {value: two}\nbeta:\n  b1: {value: x}\n",
    );
    let (status, shown) = apply_on_terminal(&bench, &[&changed]).finish();
    assert_eq!(status, 0, "{shown}");
    assert!(!shown.contains("Only 'yes'"), "{shown}");
    assert_eq!(bench.store("alpha")["a1"]["value"], "two");
}

/// Six creations of beta, one json batch whose update waits for the test:
/// four lines with a spinner, "and 2 more", and the bar.
fn waiting_batch() -> (Bench, String) {
    let bench = Bench::new();
    bench.sandbox.write("wait", "b2\n");
    let text: String = (2..8).map(|n| format!("  b{n}: {{value: x}}\n")).collect();
    let manifest = bench.manifest("six.yaml", &format!("beta:\n{text}"));
    (bench, manifest)
}

/// Releases the waiting update when dropped: a test that fails while it
/// waits leaves no provider behind (dropped before the [`Terminal`]).
struct Release<'a>(&'a Bench);

impl Drop for Release<'_> {
    fn drop(&mut self) {
        self.0.sandbox.write("release", "");
    }
}

#[test]
fn progress_shows_the_running_tasks_on_a_terminal() {
    let (bench, manifest) = waiting_batch();
    let mut terminal = apply_on_terminal(&bench, &[&manifest]);
    let _release = Release(&bench);
    // A spinner, the resource and its time.
    terminal.wait_for(r"[⠁-⣿] beta\[b2\] \d+\.\ds");
    terminal.wait_for(r"and 2 more");
    terminal.wait_for(r"\[ +\] 0/6 tasks");
    bench.sandbox.write("release", "");
    let (status, shown, rows) = terminal.finish_with_screen();
    assert_eq!(status, 0, "{shown}");
    // On the screen at the end, each task's line is whole on its row, and
    // the summary is the last row: the progress was cleared.
    let rows: Vec<&str> = rows
        .iter()
        .map(|row| row.trim_end())
        .filter(|row| !row.is_empty())
        .collect();
    for n in 2..8 {
        let line = format!("+ beta[b{n}]");
        let whole = |row: &&str| row.contains(&line) && row.ends_with("value: 'x'");
        assert!(rows.iter().any(whole), "{line} whole:\n{rows:#?}");
    }
    assert!(
        rows.last()
            .unwrap()
            .starts_with("Apply complete: 6 created"),
        "{rows:#?}"
    );
    assert_cleared(&rows);
}

#[test]
fn no_progress_in_a_pipe() {
    let (bench, manifest) = waiting_batch();
    // Released at once: the run is the same, stderr a pipe.
    bench.sandbox.write("release", "");
    let applied = run(bench.command("apply", &[&manifest]).env("TERM", "xterm"));
    applied.expect(0);
    assert_nothing_drawn(&applied.stderr);
}

#[test]
fn log_lines_stay_whole_beside_the_progress() {
    let (bench, manifest) = waiting_batch();
    bench.sandbox.write("say", "b2\n");
    let mut terminal = apply_on_terminal(&bench, &[&manifest]);
    let _release = Release(&bench);
    terminal.wait_for(r"b2 is under way");
    terminal.wait_for(r"\] 0/6 tasks");
    bench.sandbox.write("release", "");
    let (status, shown, rows) = terminal.finish_with_screen();
    assert_eq!(status, 0, "{shown}");
    let rows: Vec<&str> = rows
        .iter()
        .map(|row| row.trim_end())
        .filter(|row| !row.is_empty())
        .collect();
    let said = |row: &&str| row.starts_with("ral: warn: [") && row.ends_with("] b2 is under way");
    assert!(
        rows.iter().any(said),
        "the provider's line whole:\n{rows:#?}"
    );
    assert_cleared(&rows);
}

/// No row of the screen at the end holds a piece of the progress.
#[track_caller]
fn assert_cleared(rows: &[&str]) {
    let progress = regex::Regex::new(r"^[⠁-⣿]|\d+/\d+ tasks|and \d+ more").unwrap();
    assert!(!rows.iter().any(|row| progress.is_match(row)), "{rows:#?}");
}

#[test]
fn a_saved_plan_asks_nothing() {
    // It was shown when it was saved, as Terraform's saved plans are.
    let (bench, fewer) = one_removal();
    let saved = bench.manifests.path().join("saved.plan");
    let saved = saved.to_str().unwrap();
    bench.ral("plan", &["-o", saved, &fewer]).expect(0);
    let (status, shown) = apply_on_terminal(&bench, &[saved]).finish();
    assert_eq!(status, 0, "{shown}");
    assert!(!shown.contains("Only 'yes'"), "{shown}");
    assert_eq!(names(&bench, "alpha"), Vec::<String>::new());
}

/// No spinner, no bar, no escape sequence: nothing drawn.
#[track_caller]
fn assert_nothing_drawn(shown: &str) {
    assert!(
        !shown.contains('\x1b') && !shown.contains(" tasks"),
        "{shown:?}"
    );
    assert!(
        !shown.chars().any(|c| ('⠁'..='⣿').contains(&c)),
        "{shown:?}"
    );
}

#[test]
fn json_and_quiet_on_a_terminal_ask_nothing_and_draw_nothing() {
    for flag in ["--json", "-q"] {
        let (bench, fewer) = one_removal();
        let (status, shown) = apply_on_terminal(&bench, &[flag, &fewer]).finish();
        assert_eq!(status, 0, "{flag}: {shown}");
        assert!(
            !shown.contains("Only 'yes'"),
            "{flag} asks nothing:\n{shown}"
        );
        assert_nothing_drawn(&shown);
        assert_eq!(names(&bench, "alpha"), Vec::<String>::new(), "{flag}");
    }
}

#[test]
fn no_progress_on_a_dumb_terminal() {
    let (bench, manifest) = waiting_batch();
    bench.sandbox.write("release", "");
    let mut command = bench.command("apply", &[&manifest]);
    command.env("NO_COLOR", "1").env("TERM", "dumb");
    let (status, shown) = Terminal::start(&mut command).finish();
    assert_eq!(status, 0, "{shown}");
    assert_nothing_drawn(&shown);
}

/// A model plugin's item dropped from the model is a removal too, asked
/// about, whatever its removal runs (here a command): nothing runs on a no.
#[test]
fn dropping_a_plugin_item_is_asked_about_too() {
    let sandbox = crate::support::Sandbox::seeded();
    let manifests = tempfile::tempdir().unwrap();
    let rogue = crate::support::fixtures_dir().join("plugin_cases/rogue");
    let write = |name: &str, text: &str| {
        let path = manifests.path().join(name);
        std::fs::write(&path, text).unwrap();
        path.to_str().unwrap().to_owned()
    };
    let both = write(
        "both.yaml",
        "thing:\n  a: {size: 3}\nhost:\n  web: {ip: 10.0.0.5}\n",
    );
    let apply = |manifest: &str| {
        let mut command = sandbox.ral_command("apply", &["-I", rogue.to_str().unwrap(), manifest]);
        command.env("NO_COLOR", "1").env("TERM", "xterm");
        command
    };
    run(&mut apply(&both)).expect(0);
    // The item's removal: a command that would leave ROOT/removed.
    let mark = sandbox.root().join("removed");
    sandbox.write(
        "rogue/create_configuration.out",
        &format!(
            "{{\"tasks\": [{{\"kind\": \"remote\", \"item\": \"/thing/a\", \"command\": \
             [\"touch\", \"{}\"]}}]}}",
            mark.display()
        ),
    );
    let fewer = write("fewer.yaml", "host:\n  web: {ip: 10.0.0.5}\n");
    let mut terminal = Terminal::start(&mut apply(&fewer));
    terminal.wait_for(&regex::escape(QUESTION));
    terminal.answer("no");
    let (status, shown) = terminal.finish();
    assert_eq!(status, 1, "{shown}");
    assert!(shown.contains(CANCELLED), "{shown}");
    assert!(!mark.exists(), "the removal's command ran");
}
