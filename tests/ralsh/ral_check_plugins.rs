//! `ral check` of model plugins: the bundled webapp and the demo fixture
//! pass; each fixture of `plugin_cases/misfit` (one script, linked as
//! FAULT.plugin, misbehaving in one way only) yields its finding, with
//! its hint, and nothing else.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::ral_check::{check_fixture, ral_check};
use crate::support::fixtures_dir;

fn misfit(fault: &str) -> PathBuf {
    fixtures_dir()
        .join("plugin_cases/misfit/plugins")
        .join(format!("{fault}.plugin"))
}

/// One plugin's part of the output: its verdict and its findings, each
/// problem line (`STEP: ...`, trimmed) with its hint line.
#[derive(Debug)]
struct Section {
    verdict: String,
    findings: Vec<(String, String)>,
}

/// The sections of `stdout` by plugin name.
fn sections(stdout: &str) -> BTreeMap<String, Section> {
    let mut found = BTreeMap::new();
    let mut current: Option<String> = None;
    let lines: Vec<&str> = stdout.lines().collect();
    for (at, line) in lines.iter().enumerate() {
        if let Some((verdict, rest)) = line.split_once("  /") {
            if !verdict.starts_with(' ') {
                let name = rest
                    .rsplit_once("(plugin ")
                    .map(|(_, name)| name.trim_end_matches(')').to_owned())
                    .unwrap_or_default();
                found.insert(
                    name.clone(),
                    Section {
                        verdict: verdict.to_owned(),
                        findings: Vec::new(),
                    },
                );
                current = Some(name);
                continue;
            }
        }
        if line.starts_with("  ") && !line.starts_with("   ") {
            let hint = lines.get(at + 1).copied().unwrap_or_default();
            let section = found.get_mut(current.as_ref().unwrap()).unwrap();
            section
                .findings
                .push((line.trim().to_owned(), hint.trim().to_owned()));
        }
    }
    found
}

/// (problem, hint) fragments of a finding.
type Said = (&'static str, &'static str);

/// Each fault, with its verdict and what its findings say. Every finding
/// of the fault's plugin matches one, and each matches one.
const FAULTS: &[(&str, &str, &[Said])] = &[
    ("well", "ok", &[]),
    (
        "exit_nonzero",
        "FAIL",
        &[(
            "validate_model: plugin::exit_nonzero: validate_model failed: exit status 3 \
             (no output on stderr) (models of Initial, Applied, Updated, ForRemoval items)",
            "hint: a call exits 0 with one JSON document on stdout",
        )],
    ),
    (
        "error_doc",
        "FAIL",
        &[(
            "create_configuration: answered an error: no tasks today (models of Initial, \
             Applied, Updated, ForRemoval items)",
            "hint: every value of the model was valid for its declared type",
        )],
    ),
    (
        "bad_answer",
        "FAIL",
        &[(
            "create_configuration: plugin bad_answer: create_configuration: the answer: \
             unknown variant `shell`",
            "hint: see the answer of this call in docs/plugins.md",
        )],
    ),
    (
        "duplicate_ids",
        "FAIL",
        &[(
            "create_configuration: plugin duplicate_ids: create_configuration: the task id \
             'page' is used twice (models of Initial, Updated items)",
            "hint: a task id is unique within one answer",
        )],
    ),
    (
        "requires_unknown_id",
        "FAIL",
        &[(
            "requires 'nope', which is no task id of this answer",
            "hint: requires names a task id of the same answer",
        )],
    ),
    (
        "requires_nothing",
        "FAIL",
        &[
            (
                "task 'page' requires '/thing/nosuch', which names no task, resource or item \
                 (models of Initial, Updated items)",
                "hint: requires names a task id of the same answer",
            ),
            (
                "requires 'file[/nowhere]', which names no task, resource or item",
                "hint: requires names",
            ),
            ("task '#1' requires '/thing/nosuch'", "hint: requires names"),
        ],
    ),
    (
        "foreign_item",
        "FAIL",
        &[
            (
                "create_configuration: task 'page' is for '/file//ralcheck-resource', an item \
                 of type file, which is not this plugin's",
                "hint: a task's item is the vpath of one of this plugin's items",
            ),
            (
                "create_configuration: task '#1' is for '/file//ralcheck-resource'",
                "hint: a task's item",
            ),
            (
                "create_configuration: warning: the ForRemoval item /thing/ralcheck0 got no task",
                "hint: a ForRemoval item gets the tasks that remove what it made",
            ),
        ],
    ),
    (
        "missing_item",
        "FAIL",
        &[
            (
                "is for '/thing/nosuch', which is no item of the model",
                "hint: a task's item is the vpath of one of this plugin's items",
            ),
            (
                "create_configuration: warning: the ForRemoval item /thing/ralcheck0 got no task",
                "hint: a ForRemoval item",
            ),
        ],
    ),
    (
        "unknown_type",
        "FAIL",
        &[(
            "(nosuchtype[/thing-ralcheck0]): unknown provider or type 'nosuchtype'",
            "hint: a config task's type is a provider type",
        )],
    ),
    (
        "bad_attrs",
        "FAIL",
        &[
            (
                "config task 'page' (file[/thing-ralcheck0]): invalid value '99' for attribute \
                 'mode'",
                "hint: a config task's attributes are checked as a manifest resource's",
            ),
            (
                "unknown attribute 'colour'",
                "hint: a config task's attributes",
            ),
            (
                "config task '#1' (file[/thing-ralcheck0]): invalid value '99'",
                "hint: a config",
            ),
        ],
    ),
    (
        "validate_errors",
        "FAIL",
        &[(
            "validate_model: warning: refuses a model of valid values: /thing/ralcheck0: \
             size: too small (models of Initial, Applied, Updated, ForRemoval items)",
            "hint: suspicious: every value was valid for its declared type",
        )],
    ),
    (
        "bad_update",
        "FAIL",
        &[
            (
                "update_model: /thing/ralcheck0: size: sets \"big\", which is not a \
                 integer[1, 10]",
                "hint: update_model sets declared properties of this plugin's own items",
            ),
            (
                "update_model: updates '/file//ralcheck-resource', which is not an item of this \
                 plugin's types",
                "hint: update_model sets",
            ),
        ],
    ),
    (
        "applied_tasks",
        "ok",
        &[(
            "create_configuration: note: the Applied item /thing/ralcheck0 got 2 task(s) \
             (model of Applied items)",
            "hint: an Applied item needs no work: tasks for it run on every apply, unless the \
             plugin sees drift",
        )],
    ),
    (
        "lazy",
        "FAIL",
        &[
            (
                "create_configuration: warning: the Initial item /thing/ralcheck0 got no task",
                "hint: an Initial item gets the tasks that bring the system to it",
            ),
            (
                "create_configuration: warning: the ForRemoval item /thing/ralcheck0 got no task",
                "hint: a ForRemoval item gets the tasks that remove what it made",
            ),
        ],
    ),
    (
        "no_unlock",
        "FAIL",
        &[(
            "create_lock_tasks: plugin no_unlock: create_lock_tasks: the answer has no \
             'unlock' task (node ralcheck-node, model of Initial items)",
            "hint: create_lock_tasks answers {\"lock\": TASK, \"unlock\": TASK}",
        )],
    ),
    (
        "noisy",
        "FAIL",
        &[(
            "validate_model: wrote 1 warning or error line(s) to stderr: 'warn: warning: the \
             model looks odd'",
            "hint: warn: and error: (or unprefixed) lines are for real problems",
        )],
    ),
    (
        "unknown_action",
        "FAIL",
        &[(
            "create_snapshot_plan: listed in plugin.actions, but answered: \
             plugin::unknown_action: create_snapshot_plan failed: exit status 1",
            "hint: answer every call plugin.actions lists, or leave it out of the list",
        )],
    ),
    (
        "callback_unlisted",
        "FAIL",
        &[(
            "create_configuration: callback tasks name ping, but callback is not in \
             plugin.actions",
            "hint: list callback in plugin.actions when a callback task names one",
        )],
    ),
    (
        "callback_fails",
        "FAIL",
        &[(
            "callback: callback 'ping' of task '#2', under noop: answered an error: no pong \
             (models of Initial, Updated items)",
            "hint: ral check calls callbacks with ral.noop true",
        )],
    ),
];

#[test]
fn the_bundled_webapp_and_the_demo_plugin_pass() {
    let webapp = Path::new(env!("CARGO_MANIFEST_DIR")).join("plugins/webapp.plugin");
    let demo = fixtures_dir().join("plugins/plugins/demo.plugin");
    let run = ral_check(&["--slow", "60"], &[webapp.clone(), demo.clone()]);
    run.expect(0)
        .stdout_has(&format!("ok  {} (plugin webapp)\n", webapp.display()))
        .stdout_has(&format!("ok  {} (plugin demo)\n", demo.display()))
        .stdout_has("2 of 2 plugin(s) clean\n");
    let found = sections(&run.stdout);
    for name in ["webapp", "demo"] {
        assert!(found[name].findings.is_empty(), "{}", run.stdout);
    }
    // Every listed call ran, the callbacks of callback tasks too.
    let ran = |name: &str| {
        run.stdout
            .lines()
            .skip_while(|line| !line.ends_with(&format!("(plugin {name})")))
            .nth(1)
            .unwrap()
            .to_owned()
    };
    for call in [
        "validate_model ",
        "create_configuration ",
        "(4 calls)",
        "callback ",
    ] {
        assert!(ran("webapp").contains(call), "{call}: {}", run.stdout);
    }
    assert!(ran("demo").contains("update_model "), "{}", run.stdout);
}

#[test]
fn each_kind_of_violation_is_a_finding_with_its_hint() {
    let plugins: Vec<PathBuf> = FAULTS.iter().map(|(fault, _, _)| misfit(fault)).collect();
    let run = ral_check(&["--slow", "60"], &plugins);
    run.expect(1)
        .stdout_has(&format!("2 of {} plugin(s) clean\n", FAULTS.len()));
    let found = sections(&run.stdout);
    for (fault, verdict, expected) in FAULTS {
        let section = found
            .get(*fault)
            .unwrap_or_else(|| panic!("{fault}: {}", run.stdout));
        assert_eq!(section.verdict, *verdict, "{fault}:\n{}", run.stdout);
        for (problem, hint) in *expected {
            assert!(
                section
                    .findings
                    .iter()
                    .any(|(p, h)| p.contains(problem) && h.starts_with(hint)),
                "{fault}: no finding '{problem}' with '{hint}':\n{:#?}",
                section.findings
            );
        }
        for (problem, _) in &section.findings {
            assert!(
                expected.iter().any(|(e, _)| problem.contains(e)),
                "{fault}: a finding not expected: {problem}\n{:#?}",
                section.findings
            );
        }
    }
}

#[test]
fn a_slow_call_is_a_finding() {
    let run = ral_check(&["--slow", "1"], &[misfit("slow")]);
    run.expect(1).stdout_has("0 of 1 plugin(s) clean\n");
    let section = &sections(&run.stdout)["slow"];
    assert!(
        section.findings.iter().any(
            |(problem, hint)| problem.starts_with("validate_model: took ")
                && problem.ends_with("(limit 1.00s)")
                && hint.starts_with("hint: plugins are called on every plan")
        ),
        "{}",
        run.stdout
    );
}

#[test]
fn a_type_no_item_can_be_made_of_is_named_as_not_run() {
    let run = ral_check(&["--slow", "60"], &[misfit("unmakeable")]);
    run.expect(0)
        .stdout_has("PARTIAL  ")
        .stdout_has(
            "      not run: the calls on items of those types: no value can be made up for the \
             required property 'blob' of thing (hash)\n      hint: give the property a default \
             in the metadata\n",
        )
        .stdout_has("0 of 1 plugin(s) clean, 1 not fully checked (see 'not run')\n");
}

#[test]
fn broken_metadata_is_a_finding_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let plugins = dir.path().join("plugins");
    std::fs::create_dir(&plugins).unwrap();
    let program = plugins.join("broken.plugin");
    std::fs::write(&program, "#!/bin/sh\necho '{}'\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
    let yaml = plugins.join("broken.yaml");
    std::fs::write(
        &yaml,
        "plugin:\n  item_types: {thing: {}}\n  actions: [callbak]\n",
    )
    .unwrap();
    let run = ral_check(&[], std::slice::from_ref(&program));
    run.expect(1)
        .stdout_has(&format!("FAIL  {} (plugin ?)\n", program.display()))
        .stdout_has(&format!(
            "  metadata: {}: invalid plugin metadata: plugin.actions: unknown action 'callbak'",
            yaml.display()
        ))
        .stdout_has("hint: see \"Finding plugins\" in docs/plugins.md");
    // An item type that is a provider's type is a clash naming both.
    let clash = fixtures_dir().join("plugin_cases/clash_type/plugins/files.plugin");
    ral_check(&["--slow", "60"], &[clash])
        .expect(1)
        .stdout_has(
            "clash_type/plugins/files.yaml: invalid plugin metadata: item type 'file' is also \
             the type of the provider file::file (",
        )
        .stdout_has("      hint: an item type's name must be no provider's type\n");
    // The metadata itself is not what is checked, and says so.
    let run = ral_check(&[], std::slice::from_ref(&yaml));
    run.expect(2).stderr_has(&format!(
        "{} is a plugin's metadata; check the plugin itself, {}",
        yaml.display(),
        program.display()
    ));
}

#[test]
fn json_lines_carry_the_same_reports_for_providers_and_plugins() {
    let provider = check_fixture("undeclared");
    let checked = [
        misfit("well"),
        misfit("lazy"),
        misfit("applied_tasks"),
        provider.clone(),
    ];
    let run = ral_check(&["--slow", "60", "--json"], &checked);
    run.expect(1);
    let lines: Vec<serde_json::Value> = run
        .stdout
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(lines.len(), 5, "{}", run.stdout);
    let verdicts: Vec<(&str, &str, &str)> = lines[..4]
        .iter()
        .map(|l| {
            assert_eq!(l["type"], "report");
            (
                l["subject"].as_str().unwrap(),
                l["name"].as_str().unwrap(),
                l["verdict"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        verdicts,
        [
            ("plugin", "well", "ok"),
            ("plugin", "lazy", "FAIL"),
            ("plugin", "applied_tasks", "ok"),
            ("provider", "undeclared::undeclared", "FAIL"),
        ]
    );
    assert_eq!(lines[0]["findings"], serde_json::json!([]));
    let lazy = &lines[1]["findings"][0];
    assert_eq!(lazy["step"], "create_configuration");
    assert_eq!(lazy["level"], "warning");
    assert_eq!(
        lazy["problem"],
        "the Initial item /thing/ralcheck0 got no task (model of Initial items)"
    );
    assert_eq!(
        lazy["hint"],
        "an Initial item gets the tasks that bring the system to it"
    );
    assert_eq!(lines[2]["findings"][0]["level"], "note");
    assert_eq!(lines[3]["findings"][0]["level"], "error");
    assert_eq!(lines[3]["findings"][0]["step"], "list");
    let calls: Vec<&str> = lines[0]["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["step"].as_str().unwrap())
        .collect();
    assert!(calls.contains(&"callback"), "{calls:?}");
    assert!(lines[0]["steps"][0]["ms"].is_number());
    assert_eq!(
        lines[4],
        serde_json::json!({"type": "summary", "checked": 4, "clean": 2, "partial": 0, "failed": 2})
    );
    // The same run in words counts both kinds.
    let run = ral_check(&["--slow", "60"], &[misfit("well"), provider]);
    run.expect(1)
        .stdout_has("1 of 2 provider(s) and plugin(s) clean\n");
}
