//! The metadata cache: describe runs once per version of a provider file,
//! a changed file (the .prov, or the .yaml whose type it remembers) or a
//! corrupt entry means one more describe or read, `--no-cache`
//! bypasses it, and concurrent first runs agree.

use std::path::{Path, PathBuf};

use crate::support::{fixtures_dir, run, Sandbox};

/// A data directory holding copies of the cache fixtures, so tests can
/// change them.
fn data_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let providers = dir.path().join("providers");
    std::fs::create_dir(&providers).unwrap();
    for name in ["counted.prov", "listed.prov", "listed.yaml"] {
        std::fs::copy(
            fixtures_dir().join("cache/providers").join(name),
            providers.join(name),
        )
        .unwrap();
    }
    dir
}

fn describes(sandbox: &Sandbox) -> usize {
    sandbox.read("describes.log").lines().count()
}

/// The cache entries for the counted provider (other providers have
/// entries too: their type and name).
fn entries(sandbox: &Sandbox) -> Vec<PathBuf> {
    let Ok(dir) = std::fs::read_dir(sandbox.cache.path().join("ral/metadata")) else {
        return Vec::new();
    };
    dir.map(|e| e.unwrap().path())
        .filter(|path| {
            std::fs::read_to_string(path).is_ok_and(|text| text.contains("counted.prov"))
        })
        .collect()
}

#[test]
fn describe_runs_once_per_version_of_the_file() {
    let sandbox = Sandbox::new();
    let data = data_dir();
    for _ in 0..3 {
        run(&mut sandbox.command_in(data.path(), &["counted"]))
            .expect(0)
            .stdout_has("counted::counted { 'two':");
    }
    assert_eq!(describes(&sandbox), 1, "described once, then cached");
    assert_eq!(entries(&sandbox).len(), 1);

    // A changed file is described again, once.
    let script = data.path().join("providers/counted.prov");
    let mut text = std::fs::read_to_string(&script).unwrap();
    text.push_str("# changed\n");
    std::fs::write(&script, text).unwrap();
    run(&mut sandbox.command_in(data.path(), &["counted"])).expect(0);
    run(&mut sandbox.command_in(data.path(), &["counted"])).expect(0);
    assert_eq!(describes(&sandbox), 2);
}

#[test]
fn resolving_a_type_does_not_describe_providers_known_from_the_cache() {
    let sandbox = Sandbox::new();
    let data = data_dir();
    run(&mut sandbox.command_in(data.path(), &[])).expect(0);
    assert_eq!(describes(&sandbox), 1);
    run(&mut sandbox.command_in(data.path(), &["listed"]))
        .expect(0)
        .stdout_has("listed::listed { 'only':");
    assert_eq!(describes(&sandbox), 1, "the other type was not described");
}

#[test]
fn a_changed_yaml_invalidates_what_the_cache_knew_of_its_provider() {
    // The cache remembers a .yaml provider's type, so that `ralsh TYPE`
    // can pass it over; once the .yaml names another type, it must be
    // found under that one and no longer under the old.
    let sandbox = Sandbox::new();
    let data = data_dir();
    run(&mut sandbox.command_in(data.path(), &["listed"]))
        .expect(0)
        .stdout_has("listed::listed { 'only':");
    let yaml = data.path().join("providers/listed.yaml");
    let text = std::fs::read_to_string(&yaml).unwrap();
    std::fs::write(&yaml, text.replace("type: listed", "type: renamed")).unwrap();
    run(&mut sandbox.command_in(data.path(), &["renamed"]))
        .expect(0)
        .stdout_has("renamed::listed { 'only':");
    run(&mut sandbox.command_in(data.path(), &["listed"])).expect(2);
}

#[test]
fn a_corrupt_entry_is_ignored_and_rewritten() {
    let sandbox = Sandbox::new();
    let data = data_dir();
    run(&mut sandbox.command_in(data.path(), &["counted"])).expect(0);
    let [entry] = entries(&sandbox).try_into().expect("one entry");
    std::fs::write(&entry, "{\"format\": 1, \"ral\": tr").unwrap();
    let out = run(&mut sandbox.command_in(data.path(), &["counted"]));
    out.expect(0).stdout_has("'one'");
    assert!(!out.stderr.contains("error"), "{}", out.stderr);
    assert_eq!(describes(&sandbox), 2);
    let rewritten: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&entry).unwrap()).expect("valid again");
    assert!(rewritten["known"]["describe"]
        .as_str()
        .unwrap()
        .contains("type: counted"));
    run(&mut sandbox.command_in(data.path(), &["counted"])).expect(0);
    assert_eq!(describes(&sandbox), 2);
}

#[test]
fn no_cache_describes_every_time_and_writes_nothing() {
    let sandbox = Sandbox::new();
    let data = data_dir();
    for _ in 0..2 {
        run(&mut sandbox.command_in(data.path(), &["--no-cache", "counted"])).expect(0);
    }
    assert_eq!(describes(&sandbox), 2);
    assert!(entries(&sandbox).is_empty());
}

#[test]
fn concurrent_first_runs_agree_and_leave_one_valid_entry() {
    let sandbox = Sandbox::new();
    let data = data_dir();
    let children: Vec<_> = (0..8)
        .map(|_| {
            sandbox
                .command_in(data.path(), &["-j", "counted"])
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let outputs: Vec<_> = children
        .into_iter()
        .map(|child| child.wait_with_output().unwrap())
        .collect();
    for output in &outputs {
        assert!(output.status.success(), "{output:?}");
        assert_eq!(output.stdout, outputs[0].stdout);
    }
    let found = entries(&sandbox);
    assert_eq!(
        found.len(),
        1,
        "temporary files were renamed away: {found:?}"
    );
    let entry: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&found[0]).unwrap()).unwrap();
    assert!(entry["known"]["describe"]
        .as_str()
        .unwrap()
        .contains("type: counted"));
    let before = describes(&sandbox);
    run(&mut sandbox.command_in(data.path(), &["counted"])).expect(0);
    assert_eq!(describes(&sandbox), before, "the entry is used");
}

/// A data directory with one provider `broken` whose describe counts itself
/// in ROOT/describes.log and then runs `describe_body`.
fn broken_provider(describe_body: &str) -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let providers = dir.path().join("providers");
    std::fs::create_dir(&providers).unwrap();
    let script = providers.join("broken.prov");
    std::fs::write(
        &script,
        format!("#!/bin/sh\necho describe >> \"$RALSH_ROOT_DIR/describes.log\"\n{describe_body}\n"),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

/// Runs `ralsh -I DATA ARGS` three times: the first warns that `broken`
/// is skipped (with `reason`), the others neither describe it again nor
/// warn; the reason is still there at level info. A changed file is
/// described and warned about again.
fn assert_skipped_once(data: &Path, args: &[&str], reason: &str) {
    assert_verdict_remembered(data, args, reason, "broken.prov", 1);
}

/// [`assert_skipped_once`] for the file `changed` in DATA/providers (the
/// `.prov`, or its `.yaml`), where each check describes `describes_each` times
/// (none when a `.yaml` gives the metadata).
fn assert_verdict_remembered(
    data: &Path,
    args: &[&str],
    reason: &str,
    changed: &str,
    describes_each: usize,
) {
    let sandbox = Sandbox::new();
    let first = run(&mut sandbox.command_in(data, args));
    first.stderr_has("skipping provider").stderr_has(reason);
    assert_eq!(describes(&sandbox), describes_each);
    // Not looked at again: a new look would warn again.
    let second = run(&mut sandbox.command_in(data, args));
    assert!(!second.stderr.contains("broken"), "{}", second.stderr);
    let mut with_info = args.to_vec();
    with_info.extend(["-l", "info"]);
    run(&mut sandbox.command_in(data, &with_info))
        .stderr_has("(unchanged since it was found broken)")
        .stderr_has(reason);
    assert_eq!(
        describes(&sandbox),
        describes_each,
        "checked once, then remembered"
    );

    let file = data.join("providers").join(changed);
    let mut text = std::fs::read_to_string(&file).unwrap();
    text.push_str("# changed\n");
    std::fs::write(&file, text).unwrap();
    run(&mut sandbox.command_in(data, args))
        .stderr_has("skipping provider")
        .stderr_has(reason);
    assert_eq!(describes(&sandbox), 2 * describes_each);
}

#[test]
fn a_describe_that_hangs_is_not_run_again_until_the_file_changes() {
    let data = broken_provider("exec sleep 60");
    assert_skipped_once(
        data.path(),
        &["--timeout", "0.5"],
        "describe did not finish within 0.5s",
    );
}

#[test]
fn a_describe_that_timed_out_is_tried_again_with_a_longer_limit() {
    let sandbox = Sandbox::new();
    let data = broken_provider("exec sleep 60");
    let first = run(&mut sandbox.command_in(data.path(), &["--timeout", "0.5", "broken"]));
    first
        .expect(2)
        .stderr_has("describe did not finish within 0.5s");
    // Remembered for the same limit: not described again, and the error
    // says a provider was skipped.
    let again = run(&mut sandbox.command_in(data.path(), &["--timeout", "0.5", "broken"]));
    again
        .expect(2)
        .stderr_has("unknown provider or type 'broken'")
        .stderr_has("(1 provider was skipped as broken; -l info says why)");
    assert_eq!(describes(&sandbox), 1);
    // A longer limit gives it another chance.
    run(&mut sandbox.command_in(data.path(), &["--timeout", "1", "broken"]))
        .expect(2)
        .stderr_has("describe did not finish within 1s");
    assert_eq!(describes(&sandbox), 2);
}

#[test]
fn metadata_too_deep_to_parse_quickly_is_refused_once_and_remembered() {
    // 200,000 levels of nesting (20 lines of 10,000) took the YAML parser
    // 83 s before metadata was bounded; the bound refuses it before parsing.
    let data = broken_provider(
        "printf 'provider:\\n  type: broken\\n  desc:\\n'\n\
         awk 'BEGIN { for (l = 0; l < 20; l++) { s = \"   \"; for (i = 0; i < 10000; i++) s = s \"[\"; print s } }'",
    );
    assert_skipped_once(
        data.path(),
        &[],
        "holds 200000 '[' and '{' characters; metadata may hold at most 256",
    );
}

#[test]
fn metadata_too_deep_under_a_time_limit_is_refused_by_its_bound_not_timed_out() {
    // The same 200,000 levels under --timeout 5: the describe prints them
    // at once, and the bound, not the time limit, refuses them (before
    // metadata was bounded, the parse ran 86 s past the limit).
    let sandbox = Sandbox::new();
    let data = broken_provider(
        "printf 'provider:\\n  type: broken\\n  desc:\\n'\n\
         awk 'BEGIN { for (l = 0; l < 20; l++) { s = \"   \"; for (i = 0; i < 10000; i++) s = s \"[\"; print s } }'",
    );
    let run = run(&mut sandbox.command_in(data.path(), &["--timeout", "5", "broken"]));
    run.expect(2)
        .stderr_has("skipping provider")
        .stderr_has("holds 200000 '[' and '{' characters; metadata may hold at most 256");
    assert!(
        !run.stderr.contains("did not finish within"),
        "{}",
        run.stderr
    );
    assert_eq!(describes(&sandbox), 1);
}

#[test]
fn a_broken_yaml_is_warned_about_once_and_checked_again_when_it_changes() {
    // The describe path is tested above; a .yaml's verdict is remembered
    // by the same file identity. Its provider is never described.
    let data = broken_provider("echo described");
    std::fs::write(
        data.path().join("providers/broken.yaml"),
        "provider:\n  type: broken\n  invoke: simple\n  actions: [list]\n  suitable: true\n  \
         colour: red\n  attributes: {name: {}}\n",
    )
    .unwrap();
    assert_verdict_remembered(
        data.path(),
        &[],
        "broken.yaml: provider: unknown field `colour`",
        "broken.yaml",
        0,
    );
}
