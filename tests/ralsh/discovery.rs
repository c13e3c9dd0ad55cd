//! Finding providers: data directory order, broken and unsuitable
//! providers, describe-only metadata, name resolution.

use std::path::Path;

use crate::support::{fixtures_dir, names_in, run, Sandbox};

fn with_dirs(
    sandbox: &Sandbox,
    includes: &[&Path],
    data_dir: Option<&str>,
    args: &[&str],
) -> crate::support::Run {
    let mut command = sandbox.command();
    for dir in includes {
        command.arg("-I").arg(dir);
    }
    if let Some(value) = data_dir {
        command.env("RALSH_DATA_DIR", value);
    }
    command.args(args);
    run(&mut command)
}

#[test]
fn an_include_without_providers_below_it_is_warned_of_once() {
    let sandbox = Sandbox::new();
    // The providers/ directory itself, given instead of its parent.
    let providers = fixtures_dir().join("broken/providers");
    let run = with_dirs(&sandbox, &[&providers], None, &["nosuchtype"]);
    let wanted = "ralsh: warn: -I ";
    let warnings: Vec<&str> = run
        .stderr
        .lines()
        .filter(|l| l.starts_with(wanted))
        .collect();
    assert_eq!(warnings.len(), 1, "{}", run.stderr);
    assert!(
        warnings[0].contains("it holds .prov files")
            && warnings[0].contains("the directory above it"),
        "{}",
        warnings[0]
    );
    // A directory with neither providers/ nor plugins/.
    let empty = sandbox.root().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let run = with_dirs(&sandbox, &[&empty], None, &["-j"]);
    run.expect(0);
    assert!(
        run.stderr
            .contains("no providers/ or plugins/ directory in it"),
        "{}",
        run.stderr
    );
    // A data directory as it should be: nothing said.
    let run = with_dirs(&sandbox, &[&fixtures_dir()], None, &["-j"]);
    assert!(!run.stderr.contains(wanted), "{}", run.stderr);
}

#[test]
fn bad_metadata_from_describe_is_said_to_be_describe_s() {
    use std::os::unix::fs::PermissionsExt;
    let sandbox = Sandbox::new();
    let dir = sandbox.root().join("data");
    std::fs::create_dir_all(dir.join("providers")).unwrap();
    let provider = dir.join("providers/badmeta.prov");
    // An unquoted description holding ": ", a YAML error at line 4.
    std::fs::write(
        &provider,
        "#!/bin/sh\n[ \"$1\" = ral_action=describe ] && \
         printf -- '---\\nprovider:\\n  type: badmeta\\n  desc: a: b\\n'\nexit 0\n",
    )
    .unwrap();
    std::fs::set_permissions(&provider, std::fs::Permissions::from_mode(0o755)).unwrap();
    let run = with_dirs(&sandbox, &[&dir], None, &["-j"]);
    run.expect(0);
    let warning = run
        .stderr
        .lines()
        .find(|l| l.contains("badmeta.prov"))
        .unwrap_or_else(|| panic!("{}", run.stderr));
    assert!(
        warning.contains("the metadata its describe printed: ") && warning.contains("line 4"),
        "{warning}"
    );
}

#[test]
fn broken_providers_are_skipped_with_one_warning_each() {
    let sandbox = Sandbox::new();
    let broken = fixtures_dir().join("broken");
    let run = with_dirs(&sandbox, &[&broken], None, &["-j"]);
    let doc = run.expect(0).json();
    let names = names_in(&doc["providers"]);
    assert!(names.contains(&"fine::fine"), "{names:?}");
    assert!(
        names.contains(&"host::etc_hosts"),
        "bundled providers still there: {names:?}"
    );
    let dir = broken.join("providers");
    for (file, reason) in [
        ("not_executable.prov", "the file is not executable"),
        (
            "bad_yaml.prov",
            "bad_yaml.yaml: found unexpected end of stream",
        ),
        ("unknown_key.prov", "unknown field `colour`"),
        ("unknown_invoke.prov", "unknown calling convention 'holo'"),
        ("describe_fails.prov", "describe failed: exit status 3"),
        ("describe_stderr.prov", "describe: wrote to stderr"),
    ] {
        let expected = format!(
            "ralsh: warn: skipping provider {}: ",
            dir.join(file).display()
        );
        let warnings: Vec<&str> = run
            .stderr
            .lines()
            .filter(|l| l.starts_with(&expected))
            .collect();
        assert_eq!(warnings.len(), 1, "{file}: {}", run.stderr);
        assert!(warnings[0].contains(reason), "{file}: {}", warnings[0]);
    }
    let noise: Vec<&str> = run
        .stderr
        .lines()
        .filter(|l| !l.starts_with("ralsh: warn: skipping provider "))
        .collect();
    assert!(noise.is_empty(), "only the skip warnings: {noise:?}");
    assert!(
        run.stderr.contains("describe is noisy"),
        "the skip warning quotes the describe's stderr: {}",
        run.stderr
    );
    assert!(
        run.stderr.contains("line 3 column 3"),
        "unknown key names its line: {}",
        run.stderr
    );
}

#[test]
fn unsuitable_providers_are_listed_but_not_used() {
    let sandbox = Sandbox::new();
    let broken = fixtures_dir().join("broken");
    let run = with_dirs(&sandbox, &[&broken], None, &["-l", "info"]);
    run.expect(0);
    // Columns are aligned to the longest name, so look at the line itself.
    let picky = run
        .stdout
        .lines()
        .find(|l| l.starts_with("picky::unsuitable "))
        .unwrap();
    assert!(
        picky.ends_with(" (unsuitable: command 'ral_no_such_command_xyz' is not on PATH)"),
        "{picky}"
    );
    run.stderr_has("ralsh: info: picky::unsuitable is not suitable here: command 'ral_no_such_command_xyz' is not on PATH");
    let not_sh = run
        .stdout
        .lines()
        .find(|l| l.starts_with("notsh::not_sh "))
        .unwrap();
    assert!(
        not_sh.ends_with(" (unsuitable: command 'sh' is on PATH)"),
        "'not CMD' wants CMD absent: {}",
        run.stdout
    );
    let run = with_dirs(&sandbox, &[&broken], None, &["picky"]);
    run.expect(2);
    run.stderr_has("picky::unsuitable is not suitable on this system");
}

#[test]
fn a_describe_that_hangs_is_timed_out_and_skipped() {
    // The limit holds for every call: 5 s leaves the other describes and
    // fine's list ample time on a busy machine.
    let sandbox = Sandbox::new();
    let slow = fixtures_dir().join("slow");
    let broken = fixtures_dir().join("broken");
    let run = with_dirs(
        &sandbox,
        &[&slow, &broken],
        None,
        &["--timeout", "5", "fine"],
    );
    assert_eq!(run.expect(0).stdout, "fine::fine { 'one':\n}\n");
    run.stderr_has("slow_describe.prov: slow_describe: describe did not finish within 5s");
}

#[test]
fn describe_only_providers_get_metadata_from_describe() {
    let sandbox = Sandbox::new();
    let doc = sandbox.ralsh(&["-j"]).expect(0).json();
    let quote = doc["providers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "quote::python")
        .expect("quote::python listed");
    assert_eq!(
        quote["desc"],
        "Test fixture for argument quoting (Python shlex)."
    );
    assert!(quote["source"]
        .as_str()
        .unwrap()
        .ends_with("tests/fixtures/providers/quoter_py.prov"));
}

#[test]
fn an_ambiguous_type_lists_its_candidates_and_qualified_names_resolve() {
    let sandbox = Sandbox::new();
    let dir = fixtures_dir().join("ambiguous");
    let run = with_dirs(&sandbox, &[&dir], None, &["dup"]);
    run.expect(2);
    run.stderr_has("type 'dup' has several providers: dup::dup_a, dup::dup_b; name one of them");
    let run = with_dirs(&sandbox, &[&dir], None, &["dup::dup_b"]);
    assert_eq!(run.expect(0).stdout, "dup::dup_b { 'one':\n}\n");
}

#[test]
fn an_unknown_type_says_how_to_list_providers() {
    let sandbox = Sandbox::new();
    let run = sandbox.ralsh(&["nosuchtype"]);
    run.expect(2);
    run.stderr_has(
        "unknown provider or type 'nosuchtype'; run `ralsh` without arguments to list providers",
    );
    let run = sandbox.ralsh(&["-j", "nosuchtype"]);
    run.expect(2);
    assert!(run.json()["error"]["message"]
        .as_str()
        .unwrap()
        .contains("nosuchtype"));
}

/// Writes a data directory whose `thing::same` provider lists one resource
/// named after the directory.
fn data_dir_with_marker(parent: &Path, marker: &str) -> std::path::PathBuf {
    let dir = parent.join(marker);
    let providers = dir.join("providers");
    std::fs::create_dir_all(&providers).unwrap();
    let script = providers.join("same.prov");
    std::fs::write(
        &script,
        format!("#!/bin/sh\nprintf '# simple\\nname: {marker}\\n'\n"),
    )
    .unwrap();
    std::process::Command::new("chmod")
        .arg("755")
        .arg(&script)
        .status()
        .unwrap();
    std::fs::write(
        providers.join("same.yaml"),
        "provider:\n  type: thing\n  invoke: simple\n  actions: [list]\n  suitable: true\n  attributes: {name: {}}\n",
    )
    .unwrap();
    dir
}

#[test]
fn data_directories_are_searched_in_order_and_the_first_wins() {
    let sandbox = Sandbox::new();
    let scratch = tempfile::tempdir().unwrap();
    let first = data_dir_with_marker(scratch.path(), "include_one");
    let second = data_dir_with_marker(scratch.path(), "include_two");
    let env_a = data_dir_with_marker(scratch.path(), "env_a");
    let env_b = data_dir_with_marker(scratch.path(), "env_b");
    let env_value = format!("{}:{}", env_a.display(), env_b.display());
    let cases: [(&[&Path], Option<&str>, &str); 4] = [
        (&[&first, &second], Some(&env_value), "include_one"),
        (&[&second, &first], Some(&env_value), "include_two"),
        (&[], Some(&env_value), "env_a"),
        (
            &[],
            Some(&format!("{}:{}", env_b.display(), env_a.display())),
            "env_b",
        ),
    ];
    for (includes, env, expected) in cases {
        let run = with_dirs(&sandbox, includes, env, &["thing"]);
        assert_eq!(
            run.expect(0).stdout,
            format!("thing::same {{ '{expected}':\n}}\n")
        );
    }
    // A data directory can shadow a bundled provider.
    let shadow = scratch.path().join("shadow/providers");
    std::fs::create_dir_all(&shadow).unwrap();
    std::fs::copy(
        first.join("providers/same.prov"),
        shadow.join("etc_hosts.prov"),
    )
    .unwrap();
    std::fs::write(
        shadow.join("etc_hosts.yaml"),
        "provider:\n  type: host\n  invoke: simple\n  actions: [list]\n  suitable: true\n  attributes: {name: {}}\n",
    )
    .unwrap();
    let run = with_dirs(&sandbox, &[&scratch.path().join("shadow")], None, &["host"]);
    assert_eq!(
        run.expect(0).stdout,
        "host::etc_hosts { 'include_one':\n}\n"
    );
}

/// Provider metadata of type `kind` holding `brackets` '[' and '{'
/// characters in all, padded with comment lines to `size` bytes.
fn metadata_of_size(kind: &str, brackets: usize, size: usize) -> String {
    // Its own '[' and '{' are three; the rest go in a quoted desc.
    let mut text = format!(
        "provider:\n  type: {kind}\n  invoke: simple\n  actions: [list]\n  suitable: true\n  \
         desc: '{}'\n  attributes: {{name: {{}}}}\n",
        "[".repeat(brackets - 3)
    );
    // Lines of at most 4 KiB (a describe's lines are bounded), each at
    // least "#\n".
    while text.len() < size {
        let left = size - text.len();
        let line = if left <= 4096 {
            left
        } else {
            4096.min(left - 2)
        };
        assert!(line >= 2);
        text.push('#');
        text.push_str(&"x".repeat(line - 2));
        text.push('\n');
    }
    assert_eq!(text.len(), size);
    text
}

#[test]
fn metadata_one_past_a_bound_is_skipped_with_the_bounds_message_and_at_it_loaded() {
    // The bounds: 256 '[' and '{' characters, 262,144 bytes. Each provider
    // comes twice, with a .yaml and with a describe. One past the bracket
    // bound, the text is an unclosed '[', which the YAML parser would
    // refuse with a message of its own: the bound's message shows it was
    // checked first. At both bounds at once, metadata loads.
    use std::os::unix::fs::PermissionsExt;
    let data = tempfile::tempdir().unwrap();
    let providers = data.path().join("providers");
    std::fs::create_dir(&providers).unwrap();
    // Metadata of type KIND for each case.
    let metadata = |case: &str, kind: &str| match case {
        "deep" => format!("provider:\n  type: {kind}\n  desc: {}\n", "[".repeat(257)),
        "big" => metadata_of_size(kind, 4, 262_145),
        _ => metadata_of_size(kind, 256, 262_144),
    };
    let write_script = |name: &str, script: &str| {
        let path = providers.join(format!("{name}.prov"));
        std::fs::write(&path, script).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    };
    for name in ["deep", "big", "edge"] {
        let yaml_name = format!("{name}_yaml");
        write_script(&yaml_name, "#!/bin/sh\necho '# simple'\n");
        std::fs::write(
            providers.join(format!("{yaml_name}.yaml")),
            metadata(name, &yaml_name),
        )
        .unwrap();
        let describe_name = format!("{name}_describe");
        write_script(
            &describe_name,
            &format!(
                "#!/bin/sh\ncat <<'EOF'\n{}EOF\n",
                metadata(name, &describe_name)
            ),
        );
    }
    let sandbox = Sandbox::new();
    let run = with_dirs(&sandbox, &[data.path()], None, &["-j"]);
    let doc = run.expect(0).json();
    let names = names_in(&doc["providers"]);
    assert!(names.contains(&"edge_yaml::edge_yaml"), "{names:?}");
    assert!(names.contains(&"edge_describe::edge_describe"), "{names:?}");
    let too_deep = "it holds 257 '[' and '{' characters; metadata may hold at most 256";
    for (file, reason) in [
        ("deep_yaml.prov", format!("deep_yaml.yaml: {too_deep}")),
        ("deep_describe.prov", too_deep.to_owned()),
        (
            "big_yaml.prov",
            "big_yaml.yaml: cannot read it: it is larger than 262144 bytes".to_owned(),
        ),
        (
            "big_describe.prov",
            "it is 262145 bytes long; metadata may be at most 262144 bytes".to_owned(),
        ),
    ] {
        let warning = format!(
            "ralsh: warn: skipping provider {}: ",
            providers.join(file).display()
        );
        let line = run
            .stderr
            .lines()
            .find(|l| l.starts_with(&warning))
            .unwrap_or_else(|| panic!("{file} not skipped: {}", run.stderr));
        assert!(line.contains(&reason), "{file}: {line}");
    }
    assert_eq!(
        run.stderr.lines().count(),
        4,
        "only the four warnings: {}",
        run.stderr
    );
}
