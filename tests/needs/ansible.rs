//! The Ansible collection ral.core (ansible_collections/ral/core): real
//! playbooks run by ansible-playbook, from a virtualenv with ansible-core
//! from PyPI, with `connection: local` against a fake root, the modules
//! calling the ralsh and ral just built. Pipelining is on, as the modules
//! must work with it.
//!
//! The virtualenv is `$RAL_TEST_ANSIBLE_VENV`, or `target/ansible-venv` of
//! this repository, which `.ci/run` makes; without it these tests are
//! ignored, saying how to make it (see `host.rs`).

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{json, Value as Json};

use crate::host::Test;
use crate::support::{assert_same_tree, run, tree_snapshot, Run, Sandbox};
use crate::tests;

/// This module's tests and what each needs.
pub fn tests() -> Vec<Test> {
    [tests![[AnsibleVenv]
        ansible_doc_reads_both_modules,
        resource_creates_then_changes_nothing_then_reads,
        resource_values_are_typed_as_in_json_and_include_adds_providers,
        resource_check_mode_changes_nothing_and_reports_the_changes,
        resource_diff_mode_shows_the_resource_before_and_after,
        resource_bad_attributes_fail_with_ralsh_message_and_change_nothing,
        resource_refuses_an_integer_mode_and_takes_a_quoted_one,
        resource_without_a_name_lists_and_never_changes,
        ral_path_missing_fails_naming_it_and_the_default_is_found_on_path,
        apply_creates_then_changes_nothing,
        apply_inline_content_check_mode_changes_nothing_then_applies_with_diff,
        apply_with_a_failing_task_fails_the_play_naming_it,
        apply_refused_manifest_fails_with_ral_message_and_changes_nothing,
        collection_builds_and_installs_as_the_readme_says,
        readme_playbook_runs_as_shown,
        resource_keeps_sensitive_values_off_command_lines_and_out_of_its_result,
        resource_refuses_attribute_names_that_are_not_plain_names,
        apply_returns_no_inline_manifest_and_no_sensitive_value,
        the_ansible_modules_log_no_sensitive_value_on_the_managed_host,
        apply_templates_each_host_with_its_variables_and_hides_secrets,
        apply_gives_ral_its_variables_in_a_private_file_removed_after,
    ]]
    .concat()
}

const HOSTS: &str = "127.0.0.1\tlocalhost\n";

/// The program NAME of the Ansible virtualenv.
pub fn ansible_program(name: &str) -> PathBuf {
    crate::host::ansible_venv().join("bin").join(name)
}

/// The playbook around a test's TASKS: the module defaults pass the root
/// (and the built ralsh and ral as ral_path), and a last task writes the
/// RESULTS registered by the tasks to a file, in check mode too.
const PLAYBOOK: &str = r#"- hosts: localhost
  connection: local
  gather_facts: false
  module_defaults:
    ral.core.resource: {RALSH_PATH root: "{{ root }}"}
    ral.core.apply: {RAL_PATH root: "{{ root }}"}
  tasks:
TASKS
    - name: results
      check_mode: false
      changed_when: false
      diff: false
      ansible.builtin.copy:
        dest: "{{ out }}"
        content: "{{ RESULTS | to_json }}"
"#;

/// A fake root with etc/hosts, and a private directory for HOME, the
/// caches, Ansible's temporary files, the playbook and its results.
struct Play {
    sandbox: Sandbox,
    home: tempfile::TempDir,
    /// Whether module_defaults pass the built ralsh and ral as ral_path.
    ral_path: bool,
}

/// What one ansible-playbook run left behind: its output, and the
/// registered results the playbook's last task wrote (Null when it did
/// not get there).
struct PlayRun {
    run: Run,
    results: Json,
}

impl PlayRun {
    #[track_caller]
    fn result(&self, name: &str) -> &Json {
        let result = &self.results[name];
        assert!(
            result.is_object(),
            "no result {name}; stdout:\n{}\nstderr:\n{}",
            self.run.stdout,
            self.run.stderr
        );
        result
    }

    /// The result `ansible-playbook -v` printed for the task that ended
    /// `OUTCOME` (`changed`, `ok`), over several lines.
    #[track_caller]
    fn printed(&self, outcome: &str) -> Json {
        let start = format!("{outcome}: [localhost] => {{");
        let mut lines = self.run.stdout.lines().skip_while(|line| *line != start);
        let mut text = String::from("{");
        lines
            .next()
            .unwrap_or_else(|| panic!("no {start}:\n{}", self.run.stdout));
        for line in lines {
            text.push_str(line);
            if line == "}" {
                break;
            }
        }
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
    }

    /// The result printed on the `fatal: [localhost]: FAILED! => {...}`
    /// line of a task that failed and was not ignored.
    #[track_caller]
    fn fatal(&self) -> Json {
        let line = self
            .run
            .stdout
            .lines()
            .find_map(|line| line.strip_prefix("fatal: [localhost]: FAILED! => "))
            .unwrap_or_else(|| panic!("no failed task:\n{}", self.run.stdout));
        serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"))
    }
}

impl Play {
    fn new() -> Play {
        let sandbox = Sandbox::new();
        sandbox.write("etc/hosts", HOSTS);
        Play {
            sandbox,
            home: tempfile::tempdir().unwrap(),
            ral_path: true,
        }
    }

    /// A play on a copy of tests/fixtures/seed (users, groups, hosts).
    fn seeded() -> Play {
        Play {
            sandbox: Sandbox::seeded(),
            home: tempfile::tempdir().unwrap(),
            ral_path: true,
        }
    }

    fn root(&self) -> &Path {
        self.sandbox.root()
    }

    /// ansible-playbook with a private environment: HOME, XDG_CACHE_HOME,
    /// ANSIBLE_HOME and ANSIBLE_LOCAL_TEMP in this play's directory, an
    /// empty ansible.cfg, the collection found through
    /// ANSIBLE_COLLECTIONS_PATH (this repository), pipelining on.
    fn command(&self, program: &str, path: &std::ffi::OsStr) -> Command {
        let home = self.home.path();
        let config = home.join("ansible.cfg");
        std::fs::write(&config, "").unwrap();
        let mut command = Command::new(ansible_program(program));
        command
            .env_clear()
            .current_dir(home)
            .env("PATH", path)
            .env("HOME", home)
            .env("XDG_CACHE_HOME", home.join("cache"))
            .env("ANSIBLE_HOME", home.join("ansible"))
            .env("ANSIBLE_LOCAL_TEMP", home.join("ansible-local"))
            .env("ANSIBLE_REMOTE_TEMP", home.join("ansible-remote"))
            .env("ANSIBLE_CONFIG", &config)
            .env("ANSIBLE_COLLECTIONS_PATH", env!("CARGO_MANIFEST_DIR"))
            .env("ANSIBLE_PIPELINING", "true")
            .env("ANSIBLE_NOCOLOR", "true")
            .env("ANSIBLE_LOCALHOST_WARNING", "false")
            .env("ANSIBLE_INVENTORY_UNPARSED_WARNING", "false")
            .env("LC_ALL", "C.UTF-8");
        command
    }

    /// Runs a playbook of TASKS (YAML, indented for a play's task list)
    /// with these ansible-playbook ARGS, and reads back the variables
    /// named in REGISTERED.
    fn run(&self, tasks: &str, registered: &[&str], args: &[&str]) -> PlayRun {
        self.run_with_path(tasks, registered, args, &std::env::var_os("PATH").unwrap())
    }

    fn run_with_path(
        &self,
        tasks: &str,
        registered: &[&str],
        args: &[&str],
        path: &std::ffi::OsStr,
    ) -> PlayRun {
        let home = self.home.path();
        let out = home.join("results.json");
        let _ = std::fs::remove_file(&out);
        let vars = serde_json::json!({
            "ralsh": env!("CARGO_BIN_EXE_ralsh"),
            "ral": env!("CARGO_BIN_EXE_ral"),
            "root": self.root(),
            "out": out,
        });
        std::fs::write(home.join("vars.json"), vars.to_string()).unwrap();
        let ral_path = |var: &str| {
            if self.ral_path {
                format!("ral_path: \"{{{{ {var} }}}}\", ")
            } else {
                String::new()
            }
        };
        let results: Vec<String> = registered
            .iter()
            .map(|name| format!("'{name}': {name}"))
            .collect();
        let playbook = PLAYBOOK
            .replace("RALSH_PATH ", &ral_path("ralsh"))
            .replace("RAL_PATH ", &ral_path("ral"))
            .replace("TASKS\n", tasks)
            .replace("RESULTS", &format!("{{{}}}", results.join(", ")));
        std::fs::write(home.join("playbook.yml"), &playbook).unwrap();
        let run = run(self
            .command("ansible-playbook", path)
            .arg("-e")
            .arg("@vars.json")
            .args(args)
            .arg("playbook.yml"));
        let results = match std::fs::read_to_string(&out) {
            Ok(text) => serde_json::from_str(&text).unwrap(),
            Err(_) => Json::Null,
        };
        PlayRun { run, results }
    }
}

/// The attribute changes of a result, as (attr, is, was).
fn changes(result: &Json) -> Vec<(String, Json, Json)> {
    result["changes"]
        .as_array()
        .unwrap_or_else(|| panic!("no changes in {result}"))
        .iter()
        .map(|c| {
            (
                c["attr"].as_str().unwrap().to_owned(),
                c["is"].clone(),
                c["was"].clone(),
            )
        })
        .collect()
}

fn ansible_doc_reads_both_modules() {
    let play = Play::new();
    let path = std::env::var_os("PATH").unwrap();
    for (module, options) in [
        (
            "ral.core.resource",
            &["type", "name", "attributes", "root", "include", "ral_path"][..],
        ),
        (
            "ral.core.apply",
            &[
                "manifest",
                "content",
                "root",
                "include",
                "state",
                "ral_path",
                "host_vars",
                "vars",
                "sensitive_vars",
            ][..],
        ),
    ] {
        let run = run(play.command("ansible-doc", &path).args(["-j", module]));
        run.expect(0);
        let doc: Json = serde_json::from_str(&run.stdout).unwrap();
        let doc = &doc[module];
        for option in options {
            assert!(
                doc["doc"]["options"][option]["description"].is_array(),
                "{module} documents no {option}: {doc}"
            );
        }
        assert!(doc["examples"].as_str().unwrap().contains(module));
        assert!(doc["return"].is_object(), "{module}: no RETURN");
        assert_eq!(doc["doc"]["attributes"]["check_mode"]["support"], "full");
        assert_eq!(doc["doc"]["attributes"]["diff_mode"]["support"], "full");
    }
}

fn resource_creates_then_changes_nothing_then_reads() {
    let play = Play::new();
    let task = "      ral.core.resource:\n        type: host\n        name: web\n        \
                attributes: {ip: 10.0.0.5, host_aliases: [www, \"w2\"]}\n";
    let done = play.run(
        &format!(
            "    - register: create\n{task}    - register: again\n{task}    \
             - register: read\n      ral.core.resource: {{type: host, name: web}}\n"
        ),
        &["create", "again", "read"],
        &[],
    );
    done.run.expect(0);
    let create = done.result("create");
    assert_eq!(create["changed"], true, "{create}");
    assert_eq!(create["resource"]["ip"], "10.0.0.5");
    assert_eq!(
        create["resource"]["host_aliases"],
        serde_json::json!(["www", "w2"])
    );
    assert_eq!(create["resource"]["ral"]["provider"], "host::etc_hosts");
    assert!(changes(create).contains(&("ip".into(), "10.0.0.5".into(), Json::Null)));
    // Values go to ralsh on stdin, never on its command line.
    assert!(create["cmd"]
        .as_array()
        .unwrap()
        .contains(&"--attrs-stdin".into()));
    assert!(!create["cmd"].to_string().contains("10.0.0.5"), "{create}");
    assert_eq!(
        play.sandbox.read("etc/hosts"),
        format!("{HOSTS}10.0.0.5\tweb www w2\n")
    );
    let again = done.result("again");
    assert_eq!(again["changed"], false, "{again}");
    assert_eq!(again["changes"], serde_json::json!([]));
    assert_eq!(again["resource"]["ip"], "10.0.0.5");
    let read = done.result("read");
    assert_eq!(read["changed"], false);
    assert_eq!(
        read["resource"]["host_aliases"],
        serde_json::json!(["www", "w2"])
    );
    assert!(
        done.run.stdout.contains("ok=4    changed=1 "),
        "{}",
        done.run.stdout
    );
}

fn resource_values_are_typed_as_in_json_and_include_adds_providers() {
    let play = Play::new();
    let fixtures = crate::support::fixtures_dir();
    let done = play.run(
        &format!(
            "    - register: typed\n      ral.core.resource:\n        type: typed\n        \
             name: t1\n        include: [{fixtures:?}]\n        attributes:\n          \
             port: 8080\n          ratio: 0.5\n          ports: [80, 443]\n          \
             tags: [\"a,b\", c]\n          labels: {{k: v, n: 1}}\n          nice: null\n          \
             enabled: true\n          size: auto\n          owner: alice\n"
        ),
        &["typed"],
        &[],
    );
    done.run.expect(0);
    let typed = done.result("typed");
    assert_eq!(typed["changed"], true, "{typed}");
    let resource = &typed["resource"];
    assert_eq!(resource["ral"]["provider"], "typed::typed", "{typed}");
    assert_eq!(resource["port"], 8080);
    assert_eq!(resource["ratio"], 0.5);
    assert_eq!(resource["ports"], serde_json::json!([80, 443]));
    assert_eq!(resource["tags"], serde_json::json!(["a,b", "c"]));
    assert_eq!(resource["labels"], serde_json::json!({"k": "v", "n": "1"}));
    assert_eq!(resource["nice"], Json::Null);
    assert_eq!(resource["enabled"], true);
    // What the provider was called with: each value of its declared type.
    let update = play
        .sandbox
        .calls()
        .into_iter()
        .find(|call| call.starts_with("ral_action=update"))
        .expect("an update call");
    for arg in [
        " port=8080 ",
        " ratio=0.5 ",
        " ports=(80 443) ",
        " tags=(a,b c) ",
        " labels=('k=v' 'n=1') ",
        " nice='' ",
        " enabled=true ",
        " size=auto ",
        " owner=alice ",
    ] {
        assert!(update.contains(arg), "{arg:?} not in {update}");
    }
    assert_eq!(play.sandbox.read("tags.t1"), "2\0a,b\0c\0");
}

fn resource_check_mode_changes_nothing_and_reports_the_changes() {
    let play = Play::new();
    play.sandbox
        .write("etc/hosts", &format!("{HOSTS}10.0.0.5\tweb\n"));
    let before = tree_snapshot(play.root());
    let done = play.run(
        "    - register: change\n      ral.core.resource: \
         {type: host, name: web, attributes: {ip: 10.0.0.6}}\n    \
         - register: create\n      ral.core.resource: \
         {type: host, name: db, attributes: {ip: 10.0.0.7}}\n",
        &["change", "create"],
        &["--check"],
    );
    done.run.expect(0);
    assert_same_tree(&before, play.root(), "check mode");
    let change = done.result("change");
    assert_eq!(change["changed"], true, "{change}");
    assert_eq!(
        changes(change),
        [("ip".into(), "10.0.0.6".into(), "10.0.0.5".into())]
    );
    assert_eq!(change["resource"]["ip"], "10.0.0.6");
    assert!(change["cmd"].as_array().unwrap().contains(&"-n".into()));
    let create = done.result("create");
    assert_eq!(create["changed"], true, "{create}");
    assert!(changes(create).contains(&("ensure".into(), "present".into(), "absent".into())));
}

fn resource_diff_mode_shows_the_resource_before_and_after() {
    let play = Play::new();
    play.sandbox
        .write("etc/hosts", &format!("{HOSTS}10.0.0.5\tweb\n"));
    let done = play.run(
        "    - register: change\n      ral.core.resource: \
         {type: host, name: web, attributes: {ip: 10.0.0.6, comment: front}}\n",
        &["change"],
        &["--diff"],
    );
    done.run.expect(0);
    let diff = &done.result("change")["diff"];
    assert_eq!(diff["before"]["ip"], "10.0.0.5", "{diff}");
    assert_eq!(diff["after"]["ip"], "10.0.0.6", "{diff}");
    assert_eq!(diff["before"]["comment"], "", "{diff}");
    assert_eq!(diff["after"]["comment"], "front", "{diff}");
    assert_eq!(diff["before"]["name"], "web");
    let out = &done.run.stdout;
    assert!(out.contains("--- before\n+++ after\n"), "{out}");
    assert!(out.contains("-    \"ip\": \"10.0.0.5\""), "{out}");
    assert!(out.contains("+    \"ip\": \"10.0.0.6\""), "{out}");
    assert!(out.contains("+    \"comment\": \"front\","), "{out}");
    assert_eq!(
        play.sandbox.read("etc/hosts"),
        format!("{HOSTS}10.0.0.6\tweb\t# front\n")
    );

    // Without --diff, no diff.
    let done = play.run(
        "    - register: change\n      ral.core.resource: \
         {type: host, name: web, attributes: {ip: 10.0.0.7}}\n",
        &["change"],
        &[],
    );
    assert_eq!(done.result("change").get("diff"), None);
    assert!(!done.run.stdout.contains("--- before"));
}

fn resource_bad_attributes_fail_with_ralsh_message_and_change_nothing() {
    let play = Play::new();
    let before = tree_snapshot(play.root());
    let done = play.run(
        "    - register: unknown\n      ignore_errors: true\n      ral.core.resource: \
         {type: host, name: web, attributes: {ip: 10.0.0.5, bogus: 1}}\n    \
         - register: badtype\n      ignore_errors: true\n      ral.core.resource: \
         {type: host, name: web, attributes: {ensure: maybe}}\n    \
         - register: badvalue\n      ignore_errors: true\n      ral.core.resource: \
         {type: host, name: web, attributes: {ip: not-an-ip}}\n    \
         - register: notype\n      ignore_errors: true\n      ral.core.resource: \
         {type: nosuchtype}\n",
        &["unknown", "badtype", "badvalue", "notype"],
        &[],
    );
    done.run.expect(0);
    assert_same_tree(&before, play.root(), "rejected attributes");
    for (name, message) in [
        (
            "unknown",
            "host::etc_hosts: unknown attribute 'bogus'; settable attributes: ensure, ip, host_aliases, comment",
        ),
        (
            "badtype",
            "host::etc_hosts: invalid value 'maybe' for attribute 'ensure' of type enum[present, absent]: expected one of present, absent",
        ),
        (
            "badvalue",
            "invalid ip 'not-an-ip' for host 'web': not an IPv4 or IPv6 address",
        ),
        ("notype", "unknown provider or type 'nosuchtype'"),
    ] {
        let result = done.result(name);
        assert_eq!(result["failed"], true, "{result}");
        assert_eq!(result["changed"], false, "{result}");
        assert_eq!(result["rc"], 2, "{result}");
        let msg = result["msg"].as_str().unwrap();
        assert!(msg.contains(message), "{name}: {msg}");
        assert!(done.run.stdout.contains(message), "{}", done.run.stdout);
    }
    assert!(done.run.stdout.contains("ignored=4"), "{}", done.run.stdout);
}

/// YAML reads `mode: 0640` as the octal number 416, which ralsh would take
/// as the mode 0416: an integer mode is refused by both modules, naming
/// the fix, and a quoted one works.
fn resource_refuses_an_integer_mode_and_takes_a_quoted_one() {
    let play = Play::new();
    let file = play.root().join("srv/app.ini");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    let path = file.to_str().unwrap().to_owned();
    let path = path.strip_prefix(play.root().to_str().unwrap()).unwrap();
    let before = tree_snapshot(play.root());
    let done = play.run(
        &format!(
            "    - register: octal\n      ignore_errors: true\n      ral.core.resource: \
             {{type: file, name: {path}, attributes: {{content: x, mode: 0640}}}}\n    \
             - register: decimal\n      ignore_errors: true\n      ral.core.resource: \
             {{type: file, name: {path}, attributes: {{content: x, mode: 640}}}}\n"
        ),
        &["octal", "decimal"],
        &[],
    );
    done.run.expect(0);
    assert_same_tree(&before, play.root(), "an integer mode");
    // The same trap in ral.core.apply's content given as a mapping.
    let applied = play.run(
        &format!(
            "    - register: mapping\n      ignore_errors: true\n      ral.core.apply:\n        \
             content:\n          file:\n            {path}: {{content: x, mode: 0640}}\n"
        ),
        &["mapping"],
        &[],
    );
    applied.run.expect(0);
    assert_same_tree(&before, play.root(), "an integer mode in a manifest");
    let mapping = applied.result("mapping");
    assert_eq!(mapping["failed"], true, "{mapping}");
    let msg = mapping["msg"].as_str().unwrap();
    assert!(
        msg.contains(&format!(
            "content: file[{path}]: mode: the integer 416 is not a mode"
        )),
        "{msg}"
    );
    for (name, integer) in [("octal", 416), ("decimal", 640)] {
        let result = done.result(name);
        assert_eq!(result["failed"], true, "{result}");
        let msg = result["msg"].as_str().unwrap();
        assert!(
            msg.contains(&format!("mode: the integer {integer} is not a mode"))
                && msg.contains("Quote it, as in mode: '0640'"),
            "{name}: {msg}"
        );
    }
    let done = play.run(
        &format!(
            "    - register: quoted\n      ral.core.resource: \
             {{type: file, name: {path}, attributes: {{content: x, mode: '0640'}}}}\n"
        ),
        &["quoted"],
        &[],
    );
    done.run.expect(0);
    assert_eq!(done.result("quoted")["changed"], true);
    let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode, 0o640);
}

fn resource_without_a_name_lists_and_never_changes() {
    let play = Play::new();
    play.sandbox.write(
        "etc/hosts",
        &format!("{HOSTS}10.0.0.5\tweb www\n10.0.0.6\tdb\n"),
    );
    let before = tree_snapshot(play.root());
    let done = play.run(
        "    - register: list\n      ral.core.resource: {type: host}\n    \
         - register: checked\n      check_mode: true\n      ral.core.resource: {type: host}\n    \
         - register: nameless\n      ignore_errors: true\n      \
         ral.core.resource: {type: host, attributes: {ip: 10.0.0.1}}\n",
        &["list", "checked", "nameless"],
        &[],
    );
    done.run.expect(0);
    assert_same_tree(&before, play.root(), "a listing");
    for name in ["list", "checked"] {
        let result = done.result(name);
        assert_eq!(result["changed"], false, "{result}");
        let names: Vec<&str> = result["resources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["localhost", "web", "db"], "{result}");
        assert_eq!(
            result["resources"][1]["host_aliases"],
            serde_json::json!(["www"])
        );
    }
    // attributes need a name: a listing changes nothing.
    let nameless = done.result("nameless");
    assert_eq!(nameless["failed"], true);
    assert!(
        nameless["msg"].as_str().unwrap().contains("name"),
        "{nameless}"
    );
}

fn ral_path_missing_fails_naming_it_and_the_default_is_found_on_path() {
    let mut play = Play::new();
    play.ral_path = false;
    let missing = play.home.path().join("nowhere/ralsh");
    let done = play.run_with_path(
        &format!(
            "    - register: missing\n      ignore_errors: true\n      ral.core.resource: \
             {{type: host, ral_path: {missing:?}}}\n    \
             - register: missing_ral\n      ignore_errors: true\n      ral.core.apply: \
             {{content: 'host: {{}}', ral_path: {missing:?}}}\n    \
             - register: unset\n      ignore_errors: true\n      ral.core.resource: {{type: host}}\n"
        ),
        &["missing", "missing_ral", "unset"],
        &[],
        std::ffi::OsStr::new("/usr/bin:/bin"),
    );
    done.run.expect(0);
    for name in ["missing", "missing_ral"] {
        let result = done.result(name);
        assert_eq!(result["failed"], true, "{result}");
        assert_eq!(
            result["msg"],
            format!(
                "ral_path {}: no such file on the managed host",
                missing.display()
            )
        );
    }
    let unset = done.result("unset");
    assert_eq!(unset["failed"], true, "{unset}");
    assert!(
        unset["msg"]
            .as_str()
            .unwrap()
            .starts_with("ralsh not found on the managed host (PATH is /usr/bin:/bin)"),
        "{unset}"
    );

    // With ralsh and ral on PATH, ral_path is not needed.
    let bin = Path::new(env!("CARGO_BIN_EXE_ralsh")).parent().unwrap();
    let mut path = std::ffi::OsString::from(bin);
    path.push(":/usr/bin:/bin");
    let done = play.run_with_path(
        "    - register: list\n      ral.core.resource: {type: host}\n    \
         - register: plan\n      check_mode: true\n      ral.core.apply: \
         {content: 'host: {db: {ip: 10.0.0.9}}'}\n",
        &["list", "plan"],
        &[],
        &path,
    );
    done.run.expect(0);
    let list = done.result("list");
    assert_eq!(list["resources"][0]["name"], "localhost", "{list}");
    assert_eq!(list["cmd"][0], env!("CARGO_BIN_EXE_ralsh"));
    let plan = done.result("plan");
    assert_eq!(plan["changed"], true, "{plan}");
    assert_eq!(plan["cmd"][0], env!("CARGO_BIN_EXE_ral"));
}

const SITE: &str = "host:\n  db: {ip: 10.0.0.9}\n  web: {ip: 10.0.0.5, host_aliases: [www]}\n";

fn apply_creates_then_changes_nothing() {
    let play = Play::new();
    let manifest = play.home.path().join("site.yaml");
    std::fs::write(&manifest, SITE).unwrap();
    let state = play.home.path().join("site.db");
    let task = format!("      ral.core.apply: {{manifest: {manifest:?}, state: {state:?}}}\n",);
    let done = play.run(
        &format!("    - register: create\n{task}    - register: again\n{task}"),
        &["create", "again"],
        &[],
    );
    done.run.expect(0);
    let create = done.result("create");
    assert_eq!(create["changed"], true, "{create}");
    assert_eq!(create["plan_state"], "Successful");
    assert!(!create["plan_id"].as_str().unwrap().is_empty());
    let tasks = create["tasks"].as_array().unwrap();
    let resources: Vec<&str> = tasks
        .iter()
        .map(|t| t["resource"].as_str().unwrap())
        .collect();
    assert_eq!(resources, ["host[db]", "host[web]"], "{create}");
    assert!(tasks
        .iter()
        .all(|t| t["state"] == "Success" && t["action"] == "create"));
    assert_eq!(create["failed_tasks"], serde_json::json!([]));
    assert_eq!(create["counts"]["create"], 2);
    assert_eq!(
        play.sandbox.read("etc/hosts"),
        format!("{HOSTS}10.0.0.9\tdb\n10.0.0.5\tweb www\n")
    );
    assert!(state.is_file(), "the state option names ral's store");
    assert!(!play.root().join("var").exists());
    let again = done.result("again");
    assert_eq!(again["changed"], false, "{again}");
    assert_eq!(again["tasks"], serde_json::json!([]));
    assert_eq!(again["counts"]["unchanged"], 2);
    assert_ne!(again["plan_id"], create["plan_id"]);
}

fn apply_inline_content_check_mode_changes_nothing_then_applies_with_diff() {
    let play = Play::new();
    play.sandbox
        .write("etc/hosts", &format!("{HOSTS}10.0.0.4\tdb\n"));
    let before = tree_snapshot(play.root());
    let content = serde_json::to_string(SITE).unwrap();
    let done = play.run(
        &format!(
            "    - register: plan\n      check_mode: true\n      \
             ral.core.apply: {{content: {content}}}\n"
        ),
        &["plan"],
        &["--diff"],
    );
    done.run.expect(0);
    assert_same_tree(&before, play.root(), "check mode");
    let plan = done.result("plan");
    assert_eq!(plan["changed"], true, "{plan}");
    assert_eq!(plan["plan_state"], "Initial");
    assert_eq!(plan["cmd"][1], "plan");
    assert_eq!(plan["counts"]["change"], 1);
    assert_eq!(plan["counts"]["create"], 1);
    assert_eq!(
        plan["diff"][0]["before"],
        serde_json::json!({"ip": "10.0.0.4"})
    );
    assert_eq!(
        plan["diff"][0]["after"],
        serde_json::json!({"ip": "10.0.0.9"})
    );

    // A mapping as content, applied with --diff: a diff per resource.
    let done = play.run(
        "    - register: apply\n      ral.core.apply:\n        content:\n          \
         host:\n            db: {ip: 10.0.0.9}\n            \
         web: {ip: 10.0.0.5, host_aliases: [www]}\n",
        &["apply"],
        &["--diff"],
    );
    done.run.expect(0);
    let apply = done.result("apply");
    assert_eq!(apply["changed"], true, "{apply}");
    assert_eq!(apply["plan_state"], "Successful");
    let diffs = apply["diff"].as_array().unwrap();
    assert_eq!(diffs.len(), 2, "{apply}");
    assert_eq!(diffs[0]["before_header"], "host[db]");
    assert_eq!(diffs[1]["before"], serde_json::json!({"ensure": "absent"}));
    assert_eq!(
        diffs[1]["after"],
        serde_json::json!({"ensure": "present", "ip": "10.0.0.5", "host_aliases": ["www"]})
    );
    let out = &done.run.stdout;
    assert!(
        out.contains("--- before: host[db]\n+++ after: host[db]\n"),
        "{out}"
    );
    assert!(
        out.contains("-    \"ip\": \"10.0.0.4\"\n+    \"ip\": \"10.0.0.9\""),
        "{out}"
    );
    assert!(
        out.contains("--- before: host[web]\n+++ after: host[web]\n"),
        "{out}"
    );
    assert_eq!(
        play.sandbox.read("etc/hosts"),
        format!("{HOSTS}10.0.0.9\tdb\n10.0.0.5\tweb www\n")
    );
    // The store under the root, by default, holds what was applied.
    assert!(play.root().join("var/lib/ral/state.db").is_file());

    // Check mode again: nothing pending.
    let done = play.run(
        &format!(
            "    - register: plan\n      check_mode: true\n      \
             ral.core.apply: {{content: {content}}}\n"
        ),
        &["plan"],
        &[],
    );
    let plan = done.result("plan");
    assert_eq!(plan["changed"], false, "{plan}");
    assert_eq!(plan["tasks"], serde_json::json!([]));
}

fn apply_with_a_failing_task_fails_the_play_naming_it() {
    let play = Play::new();
    let done = play.run(
        "    - ral.core.apply:\n        content: |\n          host:\n            \
         bad: {ip: 10.0.0.300}\n            good: {ip: 10.0.0.8}\n",
        &[],
        &[],
    );
    done.run.expect(2);
    let fatal = done.fatal();
    assert_eq!(fatal["plan_state"], "Failed", "{fatal}");
    assert_eq!(fatal["rc"], 1);
    // The good task ran: the failure is the bad one's alone.
    assert_eq!(fatal["changed"], true, "{fatal}");
    let failed = fatal["failed_tasks"].as_array().unwrap();
    assert_eq!(failed.len(), 1, "{fatal}");
    assert_eq!(failed[0]["resource"], "host[bad]");
    assert_eq!(failed[0]["state"], "Failed");
    let message = "invalid ip '10.0.0.300' for host 'bad'";
    assert!(
        failed[0]["error"]["message"]
            .as_str()
            .unwrap()
            .contains(message),
        "{fatal}"
    );
    let msg = fatal["msg"].as_str().unwrap();
    assert!(
        msg.starts_with("1 of 2 tasks did not succeed: host[bad]: "),
        "{msg}"
    );
    assert!(msg.contains(message), "{msg}");
    assert!(done.run.stdout.contains("failed=1"), "{}", done.run.stdout);
    assert_eq!(
        play.sandbox.read("etc/hosts"),
        format!("{HOSTS}10.0.0.8\tgood\n")
    );
}

fn apply_refused_manifest_fails_with_ral_message_and_changes_nothing() {
    let play = Play::new();
    let before = tree_snapshot(play.root());
    let done = play.run(
        "    - register: refused\n      ignore_errors: true\n      ral.core.apply:\n        \
         content: |\n          host:\n            db: {ip: 10.0.0.9}\n            \
         bad: {ipx: 10.0.0.1}\n    \
         - register: missing\n      ignore_errors: true\n      \
         ral.core.apply: {manifest: /nonexistent/site.yaml}\n    \
         - register: both\n      ignore_errors: true\n      \
         ral.core.apply: {manifest: /x.yaml, content: 'host: {}'}\n",
        &["refused", "missing", "both"],
        &[],
    );
    done.run.expect(0);
    assert_same_tree(&before, play.root(), "a refused manifest");
    let refused = done.result("refused");
    assert_eq!(refused["failed"], true, "{refused}");
    assert_eq!(refused["rc"], 2);
    assert_eq!(
        refused["msg"],
        "content:3: host[bad]: unknown attribute 'ipx' (did you mean 'ip'?); settable attributes: ensure, ip, host_aliases, comment"
    );
    assert_eq!(refused["problems"][0]["file"], "content");
    assert_eq!(refused["problems"][0]["line"], 3);
    let missing = done.result("missing");
    assert_eq!(missing["failed"], true, "{missing}");
    assert!(
        missing["msg"]
            .as_str()
            .unwrap()
            .contains("/nonexistent/site.yaml"),
        "{missing}"
    );
    let both = done.result("both");
    assert_eq!(both["failed"], true, "{both}");
    assert!(
        both["msg"].as_str().unwrap().contains("mutually exclusive"),
        "{both}"
    );
}

fn collection_builds_and_installs_as_the_readme_says() {
    let play = Play::new();
    let home = play.home.path();
    let path = std::env::var_os("PATH").unwrap();
    let collection = Path::new(env!("CARGO_MANIFEST_DIR")).join("ansible_collections/ral/core");
    run(play
        .command("ansible-galaxy", &path)
        .arg("collection")
        .arg("build")
        .arg(&collection))
    .expect(0);
    let tarball = home.join("ral-core-0.1.0.tar.gz");
    assert!(tarball.is_file(), "no {}", tarball.display());
    // Installed where ansible-galaxy puts collections by default
    // (ANSIBLE_HOME/collections), and found there without
    // ANSIBLE_COLLECTIONS_PATH.
    let installed = home.join("ansible/collections");
    run(play
        .command("ansible-galaxy", &path)
        .env_remove("ANSIBLE_COLLECTIONS_PATH")
        .args(["collection", "install"])
        .arg(&tarball))
    .expect(0);
    let run = run(play
        .command("ansible-doc", &path)
        .env_remove("ANSIBLE_COLLECTIONS_PATH")
        .args(["-j", "ral.core.apply"]));
    run.expect(0);
    let doc: Json = serde_json::from_str(&run.stdout).unwrap();
    let filename = doc["ral.core.apply"]["doc"]["filename"]
        .as_str()
        .unwrap_or_else(|| panic!("no filename: {doc}\n{}", run.stderr));
    assert!(
        filename.starts_with(installed.to_str().unwrap()),
        "ansible-doc read {filename}"
    );
}

/// The playbook docs/remote.md shows (its Ansible section) runs as shown.
fn readme_playbook_runs_as_shown() {
    let guide =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/remote.md")).unwrap();
    let start = guide
        .find("```yaml\n- hosts: web\n  become: true\n  tasks:\n")
        .expect("docs/remote.md shows a playbook");
    let playbook = &guide[start..];
    let tasks = &playbook[playbook.find("  tasks:\n").unwrap() + "  tasks:\n".len()
        ..playbook.find("\n```").unwrap() + 1];
    let play = Play::seeded();
    // The state store below the fake root, as every path of the manifest.
    let store = play.root().join("var/lib/ral/site.db");
    let tasks = tasks.replace("/var/lib/ral/site.db", store.to_str().unwrap());
    assert!(tasks.contains("ral.core.resource:") && tasks.contains("ral.core.apply:"));
    let done = play.run(&tasks, &["site"], &[]);
    done.run.expect(0);
    let site = done.result("site");
    assert_eq!(site["changed"], true, "{site}");
    assert_eq!(site["plan_state"], "Successful", "{site}");
    assert_eq!(site["counts"]["success"], 4, "{site}");
    assert!(store.is_file());
    assert!(play
        .sandbox
        .read("etc/hosts")
        .contains("10.0.0.5\tdb.internal db\n"));
    assert!(play
        .sandbox
        .read("etc/passwd")
        .contains("carol:x:1500:2000:"));
    assert!(play.sandbox.read("etc/group").contains("devs:x:2000:carol"));
    assert_eq!(play.sandbox.read("srv/app/app.ini"), "port = 80\n");
}

fn resource_keeps_sensitive_values_off_command_lines_and_out_of_its_result() {
    let play = Play::new();
    let fixtures = crate::support::fixtures_dir();
    // The envsecret fixture scans every command line on the machine for
    // the password while it runs (ROOT/seen.NAME).
    let done = play.run(
        &format!(
            "    - register: secret\n      ral.core.resource:\n        type: envsecret\n        \
             name: a\n        include: [{fixtures:?}]\n        attributes:\n          \
             password: pw-s3cret-hash\n          comment: plain\n"
        ),
        &["secret"],
        // At -vvv the results hold the invocation, and Ansible prints them.
        &["-vvv", "--diff"],
    );
    done.run.expect(0);
    let result = done.result("secret");
    assert_eq!(result["changed"], true, "{result}");
    assert!(!result.to_string().contains("s3cret"), "{result}");
    assert!(!done.run.stdout.contains("s3cret"), "{}", done.run.stdout);
    assert!(!done.run.stderr.contains("s3cret"), "{}", done.run.stderr);
    let shown = &done.printed("changed")["invocation"]["module_args"]["attributes"];
    assert_eq!(shown["password"], "VALUE_SPECIFIED_IN_NO_LOG_PARAMETER");
    // The plain value is shown; no value is on ralsh's command line.
    assert_eq!(shown["comment"], "plain");
    let cmd = result["cmd"].as_array().unwrap();
    assert!(cmd.contains(&"--attrs-stdin".into()), "{result}");
    assert!(!result["cmd"].to_string().contains("plain"), "{result}");
    assert_eq!(play.sandbox.read("password.a"), "pw-s3cret-hash");
    assert_eq!(play.sandbox.read("seen.a"), "", "command lines holding it");
}

fn resource_refuses_attribute_names_that_are_not_plain_names() {
    let play = Play::new();
    let before = tree_snapshot(play.root());
    let done = play.run(
        "    - register: pwn\n      ignore_errors: true\n      ral.core.resource: \
         {type: host, name: web, attributes: {ip: 10.0.0.5, 'comment=pwn': x}}\n    \
         - register: space\n      ignore_errors: true\n      ral.core.resource: \
         {type: host, name: web, attributes: {'ip address': 10.0.0.5}}\n",
        &["pwn", "space"],
        &[],
    );
    done.run.expect(0);
    assert_same_tree(&before, play.root(), "refused attribute names");
    for (name, attr) in [("pwn", "'comment=pwn'"), ("space", "'ip address'")] {
        let result = done.result(name);
        assert_eq!(result["failed"], true, "{result}");
        assert_eq!(result["changed"], false, "{result}");
        assert_eq!(
            result["msg"],
            format!(
                "attributes: {attr} is not an attribute name (letters, digits and '_', not \
                 starting with a digit)"
            ),
            "{result}"
        );
    }
}

fn apply_returns_no_inline_manifest_and_no_sensitive_value() {
    let play = Play::new();
    let fixtures = crate::support::fixtures_dir();
    let content = serde_json::to_string("envsecret:\n  a: {password: pw-s3cret-hash}\n").unwrap();
    let done = play.run(
        &format!(
            "    - register: applied\n      ral.core.apply: {{content: {content}, include: \
             [{fixtures:?}]}}\n"
        ),
        &["applied"],
        &["-vvv", "--diff"],
    );
    done.run.expect(0);
    let applied = done.result("applied");
    assert_eq!(applied["changed"], true, "{applied}");
    assert_eq!(
        done.printed("changed")["invocation"]["module_args"]["content"],
        "CONTENT_NOT_SHOWN"
    );
    assert!(!applied.to_string().contains("s3cret"), "{applied}");
    assert!(!done.run.stdout.contains("s3cret"), "{}", done.run.stdout);
    assert_eq!(play.sandbox.read("password.a"), "pw-s3cret-hash");
    assert_eq!(play.sandbox.read("seen.a"), "", "command lines holding it");
}

/// What an Ansible module of ral.core logs on the managed host (its
/// syslog or journal, where AnsibleModule writes "Invoked with ..." for
/// every run) when run with ARGS: the module is run as Ansible runs it,
/// with its `log` recording instead.
fn ansible_logged(module: &str, args: &Json) -> String {
    let (run, logged) = run_module(module, args);
    assert_eq!(run.status, 0, "{}{}", run.stdout, run.stderr);
    logged
}

/// Runs an Ansible module of ral.core as Ansible runs it, with ARGS: its
/// output, and what it logged on the managed host (see ansible_logged).
fn run_module(module: &str, args: &Json) -> (Run, String) {
    let python = ansible_program("python");
    let dir = tempfile::tempdir().unwrap();
    let args_file = dir.path().join("args.json");
    std::fs::write(
        &args_file,
        json!({ "ANSIBLE_MODULE_ARGS": args }).to_string(),
    )
    .unwrap();
    let logged = dir.path().join("logged");
    let module = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("ansible_collections/ral/core/plugins/modules")
        .join(module);
    let script = "import runpy, sys\n\
        from ansible.module_utils import basic\n\
        out = open(sys.argv[3], 'w')\n\
        basic.AnsibleModule.log = lambda self, msg, log_args=None: out.write(msg + '\\n')\n\
        sys.argv = sys.argv[1:3]\n\
        try:\n    runpy.run_path(sys.argv[0], run_name='__main__')\n\
        except SystemExit:\n    pass\n\
        out.close()\n";
    let run = crate::support::run(
        Command::new(python)
            .env("PYTHONPATH", env!("CARGO_MANIFEST_DIR"))
            .arg("-c")
            .arg(script)
            .arg(&module)
            .arg(&args_file)
            .arg(&logged),
    );
    let logged = std::fs::read_to_string(&logged).unwrap_or_default();
    (run, logged)
}

/// The Ansible modules never log a sensitive value on the managed host:
/// AnsibleModule logs every parameter when it is made, before the module
/// knows which attributes are sensitive (resource) or hides its inline
/// manifest (apply); both went to the host's syslog in clear.
fn the_ansible_modules_log_no_sensitive_value_on_the_managed_host() {
    let sandbox = Sandbox::new();
    let root = sandbox.root().to_str().unwrap().to_owned();
    let fixtures = crate::support::fixtures_dir();
    let bin = |name: &str| {
        Path::new(env!("CARGO_BIN_EXE_ralsh"))
            .with_file_name(name)
            .to_str()
            .unwrap()
            .to_owned()
    };
    let logged = ansible_logged(
        "resource.py",
        &json!({
            "type": "envsecret", "name": "a1", "root": root,
            "include": [fixtures], "ral_path": bin("ralsh"),
            "attributes": {"password": "Hunter2 'q'\nline", "comment": "plain"},
        }),
    );
    assert!(logged.contains("Invoked with"), "{logged}");
    assert!(logged.contains("plain"), "{logged}");
    assert!(!logged.contains("Hunter2"), "{logged}");
    assert!(sandbox.root().join("made.a1").exists());

    let logged = ansible_logged(
        "apply.py",
        &json!({
            "content": "envsecret:\n  a2: {password: Hunter2}\n", "root": root,
            "include": [fixtures], "ral_path": bin("ral"),
            "state": sandbox.root().join("s.db"),
        }),
    );
    assert!(logged.contains("Invoked with"), "{logged}");
    assert!(!logged.contains("Hunter2"), "{logged}");
    assert!(sandbox.root().join("made.a2").exists());
}

/// The secrets of [`apply_templates_each_host_with_its_variables_and_hides_secrets`],
/// each made sensitive another way: a `ral_sensitive` list in group_vars,
/// an inline `!vault` value, a vault-encrypted vars file, and a value
/// Ansible computed from that one.
const LISTED_SECRET: &str = "Listed-s3cret-1";
const INLINE_SECRET: &str = "Inline-s3cret-2";
const FILE_SECRET: &str = "File-s3cret-3";

/// The manifest of that test, as `ral apply -i` would take it: the host's
/// port, a file per group's tier, a host entry only where the group says
/// so (`when:`), and the secrets in comments, which ral's plan shows
/// unless they are sensitive (ral redacts an attribute of a type for
/// every resource once one value of it is sensitive: the computed one is
/// in a type of its own, the envsecret fixture, which takes its sensitive
/// values in its environment and the others on its command line).
const TEMPLATED_SITE: &str = r#"file:
  /etc/app.conf:
    content: "port={{ app_port }}\ntier={{ tier }}\nlabel={{ label }}\n"
    mode: '0640'
host:
  frontend:
    ip: 10.0.0.5
    comment: "{{ listed_secret }}"
    when: "tier == 'web'"
  backend:
    ip: 10.0.0.6
    comment: "{{ api_token }}"
    when: "'dbs' in group_names and inventory_hostname == 'db1'"
envsecret:
  pg:
    comment: "{{ dsn }}"
"#;

/// Every file below DIR (a path relative to it) that holds TEXT.
fn files_holding(dir: &Path, text: &str) -> Vec<PathBuf> {
    tree_snapshot(dir)
        .into_iter()
        .filter(|(_, what)| what.windows(text.len()).any(|w| w == text.as_bytes()))
        .map(|(path, _)| path)
        .collect()
}

/// The result `ansible-playbook -v` printed for HOST's TASK, which ended
/// OUTCOME (`changed`, `ok`), over several lines.
#[track_caller]
fn printed_result(stdout: &str, task: &str, outcome: &str, host: &str) -> Json {
    let heading = format!("TASK [{task}] ");
    let start = format!("{outcome}: [{host}] => {{");
    let mut lines = stdout
        .lines()
        .skip_while(|line| !line.starts_with(&heading))
        .skip_while(|line| *line != start);
    lines
        .next()
        .unwrap_or_else(|| panic!("no {start} for {task}:\n{stdout}"));
    let mut text = String::from("{");
    for line in lines {
        text.push_str(line);
        if line == "}" {
            break;
        }
    }
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// Whether a directory named ral-vars-* (the module's variables file's) is
/// anywhere below DIR.
fn vars_dirs_below(dir: &Path) -> Vec<PathBuf> {
    tree_snapshot(dir)
        .into_keys()
        .filter(|path| {
            path.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("ral-vars-"))
        })
        .collect()
}

/// ral.core.apply gives ral the play's variables for each host (its action
/// plugin reads them), so one manifest with `{{ app_port }}` and `when:`
/// makes different files on two inventory hosts; the sensitive values
/// (listed in `ral_sensitive`, vault-encrypted inline or in a file, or
/// computed from one) are redacted in ral's plan and store, and show
/// nowhere in Ansible's output at -vvv; the variables file is gone after
/// each run, a failed one too.
fn apply_templates_each_host_with_its_variables_and_hides_secrets() {
    let play = Play::new();
    let web = play.sandbox.root().to_owned();
    let db_sandbox = Sandbox::new();
    db_sandbox.write("etc/hosts", HOSTS);
    let db = db_sandbox.root().to_owned();
    let home = play.home.path();
    let path = std::env::var_os("PATH").unwrap();
    // The inputs (which hold the secrets in clear) apart from the play's
    // home, whose every file is searched for them.
    let inputs = tempfile::tempdir().unwrap();
    let input = |name: &str, text: &str| {
        let file = inputs.path().join(name);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, text).unwrap();
        file
    };
    let password = input("vault-password", "the vault password\n");
    let vault = |command: &str, args: &[&str]| {
        let run = run(play
            .command("ansible-vault", &path)
            .arg(command)
            .arg("--vault-password-file")
            .arg(&password)
            .args(args));
        run.expect(0);
        run.stdout
    };
    let results = home.join("results");
    std::fs::create_dir_all(&results).unwrap();
    input(
        "inventory/hosts.yaml",
        &format!(
            "all:\n  vars:\n    ansible_connection: local\n    \
             ansible_python_interpreter: \"{{{{ ansible_playbook_python }}}}\"\n    \
             ral: {ral:?}\n    out: {results:?}\n  children:\n    web:\n      hosts:\n        \
             web1: {{root: {web:?}, app_port: 8080}}\n    dbs:\n      hosts:\n        \
             db1: {{root: {db:?}, app_port: 5432}}\n",
            ral = env!("CARGO_BIN_EXE_ral"),
        ),
    );
    input("inventory/group_vars/web.yaml", "tier: web\n");
    input("inventory/group_vars/dbs.yaml", "tier: db\n");
    let inline = vault("encrypt_string", &["--name", "api_token", INLINE_SECRET]);
    assert!(inline.contains("!vault"), "{inline}");
    input(
        "inventory/group_vars/all/main.yaml",
        &format!(
            "ral_sensitive: [listed_secret]\nlisted_secret: {LISTED_SECRET}\n\
             dsn: \"pg://app:{{{{ vault_db_password }}}}@db\"\n\
             unused: \"{{{{ no_such_variable }}}}\"\n{inline}"
        ),
    );
    let vaulted = input(
        "inventory/group_vars/all/vault.yaml",
        &format!("vault_db_password: {FILE_SECRET}\n"),
    );
    vault("encrypt", &[vaulted.to_str().unwrap()]);
    assert!(!std::fs::read_to_string(&vaulted)
        .unwrap()
        .contains(FILE_SECRET));
    let manifest = input("site.yaml", TEMPLATED_SITE);
    let fixtures = crate::support::fixtures_dir();
    let refused = input(
        "refused.yaml",
        "file:\n  /etc/x:\n    content: \"{{ no_such_var }}\"\n",
    );
    let playbook = input(
        "playbook.yml",
        &format!(
            r#"- hosts: all
  gather_facts: false
  tasks:
    - name: site
      register: site
      ral.core.apply:
        manifest: {manifest:?}
        root: "{{{{ root }}}}"
        ral_path: "{{{{ ral }}}}"
        include: [{fixtures:?}]
        vars:
          label: "{{{{ tier | upper }}}}-{{{{ inventory_hostname }}}}"
    - name: refused
      register: refused
      ignore_errors: true
      ral.core.apply:
        manifest: {refused:?}
        root: "{{{{ root }}}}"
        ral_path: "{{{{ ral }}}}"
    - name: results
      check_mode: false
      changed_when: false
      diff: false
      ansible.builtin.copy:
        dest: "{{{{ out }}}}/{{{{ inventory_hostname }}}}.json"
        content: "{{{{ {{'site': site, 'refused': refused}} | to_json }}}}"
"#
        ),
    );
    let inventory = inputs.path().join("inventory/hosts.yaml");
    let playbook_run = |args: &[&str], keep_remote_files: bool| {
        for host in ["web1", "db1"] {
            let _ = std::fs::remove_file(results.join(format!("{host}.json")));
        }
        let mut command = play.command("ansible-playbook", &path);
        if keep_remote_files {
            command.env("ANSIBLE_KEEP_REMOTE_FILES", "true");
        }
        let run = run(command
            .arg("-i")
            .arg(&inventory)
            .arg("--vault-password-file")
            .arg(&password)
            .arg("-vvv")
            .args(args)
            .arg(&playbook));
        for secret in [LISTED_SECRET, INLINE_SECRET, FILE_SECRET] {
            assert!(
                !run.stdout.contains(secret) && !run.stderr.contains(secret),
                "{secret} shown:\n{}\n{}",
                run.stdout,
                run.stderr
            );
        }
        run.expect(0);
        let result = |host: &str| -> Json {
            let file = results.join(format!("{host}.json"));
            let text = std::fs::read_to_string(&file)
                .unwrap_or_else(|e| panic!("{}: {e}\n{}", file.display(), run.stdout));
            serde_json::from_str(&text).unwrap()
        };
        (result("web1"), result("db1"), run)
    };
    let refused_as_expected = |result: &Json| {
        let refused = &result["refused"];
        assert_eq!(refused["failed"], true, "{refused}");
        let msg = refused["msg"].as_str().unwrap();
        assert!(msg.contains("no_such_var"), "{msg}");
    };

    // Check mode, keeping Ansible's remote files: ral plan with the
    // variables changes nothing, and no variables file stays behind (a
    // refused manifest's neither), though Ansible kept its own files.
    let web_before = tree_snapshot(&web);
    let db_before = tree_snapshot(&db);
    let (web1, db1, _) = playbook_run(&["--check"], true);
    assert_same_tree(&web_before, &web, "check mode");
    assert_same_tree(&db_before, &db, "check mode");
    for result in [&web1, &db1] {
        let site = &result["site"];
        assert_eq!(site["changed"], true, "{site}");
        assert_eq!(site["cmd"][1], "plan", "{site}");
        let cmd = site["cmd"].as_array().unwrap();
        let e = cmd.iter().position(|w| w == "-e").expect("-e");
        assert!(cmd[e + 1].as_str().unwrap().starts_with('@'), "{site}");
        refused_as_expected(result);
    }
    let remote = home.join("ansible-remote");
    assert!(
        tree_snapshot(&remote)
            .keys()
            .any(|p| p.ends_with("AnsiballZ_apply.py")),
        "Ansible kept no remote files"
    );
    assert_eq!(vars_dirs_below(home), Vec::<PathBuf>::new());
    // Ansible's kept module files hold its arguments, as for any module.
    std::fs::remove_dir_all(&remote).unwrap();

    // Applied: each host gets its own file and host entries.
    let (web1, db1, applied) = playbook_run(&[], false);
    for (result, host, port, tier) in [(&web1, "web1", 8080, "web"), (&db1, "db1", 5432, "db")] {
        let site = &result["site"];
        assert_eq!(site["changed"], true, "{site}");
        assert_eq!(site["plan_state"], "Successful", "{site}");
        // Every secret (the dsn holds the vaulted password) is redacted.
        for task in site["tasks"].as_array().unwrap() {
            for change in task["changes"].as_array().unwrap() {
                if change["attr"] == "comment" {
                    assert_eq!(change["is"], "[redacted]", "{task}");
                }
            }
        }
        // The invocation, as ansible-playbook -vvv printed it.
        let printed = printed_result(&applied.stdout, "site", "changed", host);
        let args = &printed["invocation"]["module_args"];
        let passed = args["vars"].as_object().unwrap();
        for name in [
            "app_port",
            "tier",
            "label",
            "dsn",
            "api_token",
            "listed_secret",
        ] {
            assert_eq!(
                passed.get(name),
                Some(&json!("VALUE_SPECIFIED_IN_NO_LOG_PARAMETER")),
                "{name} not passed: {args}"
            );
        }
        // The host's inventory name and groups go to ral too (as -e, the
        // one place ral takes them from): the backend entry's when: needs
        // them (checked on the roots below).
        for name in ["inventory_hostname", "group_names"] {
            assert!(passed.contains_key(name), "{name} not passed: {args}");
        }
        for name in [
            "hostvars",
            "groups",
            "ansible_connection",
            "playbook_dir",
            "unused",
            "ral_sensitive",
        ] {
            assert!(!passed.contains_key(name), "{name} passed: {args}");
        }
        let sensitive: Vec<&str> = args["sensitive_vars"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n.as_str().unwrap())
            .collect();
        for name in ["api_token", "listed_secret", "vault_db_password"] {
            assert!(sensitive.contains(&name), "{name} not sensitive: {args}");
        }
        refused_as_expected(result);
        let root = if host == "web1" { &web } else { &db };
        assert_eq!(
            std::fs::read_to_string(root.join("etc/app.conf")).unwrap(),
            format!(
                "port={port}\ntier={tier}\nlabel={}-{host}\n",
                tier.to_uppercase()
            )
        );
        assert!(root.join("var/lib/ral/state.db").is_file());
        // The computed dsn went to the provider as a sensitive value: in
        // its environment, not on its command line.
        let env = std::fs::read_to_string(root.join("env.pg")).unwrap();
        assert!(
            env.contains(&format!("comment=pg://app:{FILE_SECRET}@db\0")),
            "{env:?}"
        );
        let cmdline = std::fs::read_to_string(root.join("cmdline.pg")).unwrap();
        assert!(!cmdline.contains("comment="), "{cmdline:?}");
    }
    assert_eq!(
        play.sandbox.read("etc/hosts"),
        format!("{HOSTS}10.0.0.5\tfrontend\t# {LISTED_SECRET}\n")
    );
    assert_eq!(
        db_sandbox.read("etc/hosts"),
        format!("{HOSTS}10.0.0.6\tbackend\t# {INLINE_SECRET}\n")
    );
    assert!(
        applied
            .stdout
            .contains("web1                       : ok=3    changed=1 ")
            && applied
                .stdout
                .contains("db1                        : ok=3    changed=1 "),
        "{}",
        applied.stdout
    );

    // Again: nothing to do on either host.
    let (web1, db1, again) = playbook_run(&[], false);
    for result in [&web1, &db1] {
        assert_eq!(result["site"]["changed"], false, "{}", result["site"]);
        assert_eq!(result["site"]["tasks"], json!([]));
    }
    assert!(
        again.stdout.contains("changed=0") && !again.stdout.contains("changed=1"),
        "{}",
        again.stdout
    );

    // The secrets are in the managed files alone (etc/hosts, and the
    // environment the fixture saw): not in ral's state stores, nor
    // anywhere Ansible and ral keep their files (the results, the caches,
    // the temporary directories), nor a variables file.
    for secret in [LISTED_SECRET, INLINE_SECRET, FILE_SECRET] {
        assert_eq!(
            files_holding(home, secret),
            Vec::<PathBuf>::new(),
            "{secret}"
        );
        for root in [&web, &db] {
            let holding = files_holding(root, secret);
            assert!(
                holding
                    .iter()
                    .all(|p| p == Path::new("etc/hosts") || p == Path::new("env.pg")),
                "{secret} in {holding:?} below {}",
                root.display()
            );
        }
    }
    assert_eq!(vars_dirs_below(home), Vec::<PathBuf>::new());
}

/// ral.core.apply (the module alone) gives ral its `vars` as `-e @FILE`: a
/// JSON file 0600 in a directory of its own 0700, listing the sensitive
/// ones (named, or holding a sensitive one's text) in `ral_sensitive`, a
/// value that holds Jinja2 made an expression of itself (ral renders it
/// back to the same text), the file gone when ral has ended. The values
/// show neither in what the module returns nor in its log; a name ral
/// refuses fails the module, naming it, before ral runs.
fn apply_gives_ral_its_variables_in_a_private_file_removed_after() {
    let dir = tempfile::tempdir().unwrap();
    let seen = dir.path();
    // A ral that keeps what it was given: the file's and directory's
    // modes, the file, and its path.
    let fake = seen.join("ral");
    std::fs::write(
        &fake,
        format!(
            "#!/bin/sh\nseen={seen:?}\nwhile [ $# -gt 0 ]; do\n  if [ \"$1\" = -e ]; then\n    \
             f=${{2#@}}\n    stat -c %a \"$f\" > \"$seen/file-mode\"\n    \
             stat -c %a \"${{f%/*}}\" > \"$seen/dir-mode\"\n    cp \"$f\" \"$seen/vars.json\"\n    \
             printf %s \"$f\" > \"$seen/path\"\n  fi\n  shift\ndone\n\
             echo '{{\"plan\":{{\"id\":\"1\",\"state\":\"Successful\",\"tasks\":[],\"counts\":{{}}}}}}'\n"
        ),
    )
    .unwrap();
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let args = json!({
        "content": "host: {}\n", "ral_path": fake,
        "vars": {
            "app_port": 8080, "password": "Pw-s3cret", "dsn": "pg://app:Pw-s3cret@db",
            "tpl": "{{ not rendered }} {% raw %}\u{2028}", "nested": {"k": ["v", 1, null]},
            "ral_sensitive": ["listed"], "listed": "L-s3cret",
        },
        "sensitive_vars": ["password"],
    });
    let (module, logged) = run_module("apply.py", &args);
    assert_eq!(module.status, 0, "{}{}", module.stdout, module.stderr);
    assert_eq!(
        std::fs::read_to_string(seen.join("file-mode"))
            .unwrap()
            .trim(),
        "600"
    );
    assert_eq!(
        std::fs::read_to_string(seen.join("dir-mode"))
            .unwrap()
            .trim(),
        "700"
    );
    let path = PathBuf::from(std::fs::read_to_string(seen.join("path")).unwrap());
    assert!(
        !path.exists() && !path.parent().unwrap().exists(),
        "{}",
        path.display()
    );
    let given: Json =
        serde_json::from_str(&std::fs::read_to_string(seen.join("vars.json")).unwrap()).unwrap();
    assert_eq!(
        given,
        json!({
            "app_port": 8080, "password": "Pw-s3cret", "dsn": "pg://app:Pw-s3cret@db",
            "tpl": "{{ \"{{ not rendered }} {% raw %}\u{2028}\" }}", "nested": {"k": ["v", 1, null]},
            "listed": "L-s3cret", "ral_sensitive": ["dsn", "listed", "password"],
        })
    );
    // ral reads the file back as it was meant.
    let sandbox = Sandbox::new();
    let manifest = sandbox.root().join("site.yaml");
    std::fs::write(
        &manifest,
        "file:\n  /out:\n    content: \"{{ tpl }}|{{ app_port }}|{{ nested.k[0] }}\"\n",
    )
    .unwrap();
    run(Command::new(env!("CARGO_BIN_EXE_ral"))
        .env("HOME", sandbox.cache.path())
        .env("XDG_CACHE_HOME", sandbox.cache.path())
        .arg("apply")
        .arg("--root")
        .arg(sandbox.root())
        .arg("--state")
        .arg(sandbox.root().join("s.db"))
        .arg("-e")
        .arg(format!("@{}", seen.join("vars.json").display()))
        .arg(&manifest))
    .expect(0);
    assert_eq!(
        sandbox.read("out"),
        "{{ not rendered }} {% raw %}\u{2028}|8080|v"
    );
    // What the module returned and logged: the names, not the values.
    let result: Json = serde_json::from_str(&module.stdout).unwrap();
    let shown = &result["invocation"]["module_args"]["vars"];
    assert_eq!(
        shown["app_port"], "VALUE_SPECIFIED_IN_NO_LOG_PARAMETER",
        "{result}"
    );
    assert_eq!(
        shown["password"], "VALUE_SPECIFIED_IN_NO_LOG_PARAMETER",
        "{result}"
    );
    assert!(result["cmd"].to_string().contains("-e"), "{result}");
    for secret in ["s3cret", "8080"] {
        assert!(
            !module.stdout.contains(secret),
            "{secret}: {}",
            module.stdout
        );
        assert!(!logged.contains(secret), "{secret}: {logged}");
    }
    assert!(logged.contains("vars=NOT_LOGGING_PARAMETER"), "{logged}");

    // A name ral refuses: the module fails, naming it, and shows no value.
    for (name, message) in [
        ("facts", "'facts' is a name every ral template has"),
        ("bad-name", "'bad-name' is not a variable name"),
    ] {
        let _ = std::fs::remove_file(seen.join("path"));
        let (refused, _) = run_module(
            "apply.py",
            &json!({"content": "host: {}\n", "ral_path": fake,
                    "vars": {name: "Pw-s3cret"}, "sensitive_vars": []}),
        );
        let result: Json = serde_json::from_str(&refused.stdout).unwrap();
        assert_eq!(result["failed"], true, "{result}");
        assert_eq!(
            result["invocation"]["module_args"]["content"],
            "CONTENT_NOT_SHOWN"
        );
        assert!(
            result["msg"].as_str().unwrap().contains(message),
            "{result}"
        );
        assert!(!refused.stdout.contains("s3cret"), "{}", refused.stdout);
        assert!(!seen.join("path").exists(), "ral ran");
    }
}
