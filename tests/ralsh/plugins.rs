//! Model plugins in `ral plan` and `ral apply`: the fixture plugin `demo`
//! (tests/fixtures/plugins) expands each `site` item into a page file (a
//! config task), a marker made by a command (a remote task) and a check
//! (a callback); it logs every call it gets to ROOT/calls.log with the
//! states of the items it was given. The plugin `rogue`
//! (tests/fixtures/plugin_cases/rogue) answers whatever the test wrote.

use std::path::{Path, PathBuf};

use serde_json::Value as Json;

use crate::support::{fixtures_dir, run, Run, Sandbox};

struct Bench {
    sandbox: Sandbox,
    manifests: tempfile::TempDir,
    data: Vec<PathBuf>,
}

impl Bench {
    fn new() -> Bench {
        let sandbox = Sandbox::seeded();
        std::fs::create_dir_all(sandbox.root().join("marks")).unwrap();
        std::fs::create_dir_all(sandbox.root().join("srv/blog")).unwrap();
        Bench {
            sandbox,
            manifests: tempfile::tempdir().unwrap(),
            data: vec![fixtures_dir().join("plugins")],
        }
    }

    fn with_data(mut self, dir: &str) -> Bench {
        self.data
            .push(fixtures_dir().join("plugin_cases").join(dir));
        self
    }

    fn manifest(&self, name: &str, text: &str) -> String {
        let path = self.manifests.path().join(name);
        std::fs::write(&path, text).unwrap();
        path.to_str().unwrap().to_owned()
    }

    fn ral(&self, subcommand: &str, args: &[&str]) -> Run {
        let mut command = self.sandbox.ral_command(subcommand, &[]);
        for dir in &self.data {
            command.arg("-I").arg(dir);
        }
        run(command.args(args))
    }

    /// The calls the demo plugin logged, then forgets them.
    fn take_calls(&self) -> Vec<String> {
        let calls = self.sandbox.calls();
        let _ = std::fs::remove_file(self.sandbox.root().join("calls.log"));
        calls
    }

    /// `ral state list` as `TYPE[NAME] STATE` lines.
    fn states(&self) -> Vec<String> {
        let listed = run(&mut self.sandbox.ral_command("state", &["list"]));
        listed.expect(0);
        listed
            .stdout
            .lines()
            .map(|line| {
                line.split_whitespace()
                    .take(2)
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect()
    }

    fn exists(&self, relative: &str) -> bool {
        self.sandbox.root().join(relative).exists()
    }
}

const TWO_SITES: &str = "\
site:
  shop:
    dir: /srv
    content: hello shop
  blog:
    dir: /srv/blog
    content: hello blog
    shout: true
";

#[test]
fn a_plan_shows_every_task_kind_in_one_graph_and_runs_no_callback() {
    let bench = Bench::new();
    let m = bench.manifest(
        "site.yaml",
        &format!("{TWO_SITES}file:\n  /srv/after: {{ensure: file, require: \"site[shop]\"}}\n"),
    );
    let plan = bench.ral("plan", &[&m]);
    plan.expect(0)
        .stdout_has("+ file[/srv/index.html]\n    from plugin demo, config /site/shop: the page\n")
        .stdout_has(
            "* remote[/site/shop:shop-mark] (waits for file[/srv/index.html])\n    from plugin \
             demo, remote /site/shop: mark it\n",
        )
        .stdout_has("* callback[/site/shop:shop-check] (waits for file[/srv/index.html])")
        // The manifest's resource waits for every task of the item.
        .stdout_has(
            "+ file[/srv/after] (waits for file[/srv/index.html], remote[/site/shop:shop-mark], \
             callback[/site/shop:shop-check])",
        )
        // update_model upper-cased the content before the tasks were made.
        .stdout_has(
            "    content:\n      --- was\n      +++ is\n      @@ -0,0 +1,1 @@\n      +HELLO BLOG\n",
        )
        .stdout_has("Plan: 3 to create, 0 to change, 0 to remove; 0 unchanged; 4 to run");
    assert_eq!(
        bench.take_calls(),
        [
            "update_model shop=Initial blog=Initial",
            "validate_model shop=Initial blog=Initial",
            "create_configuration shop=Initial blog=Initial",
        ],
        "a plan calls no callback"
    );
    assert!(
        bench.sandbox.names_in_dir("marks").is_empty(),
        "nor any command"
    );
    assert!(!bench.exists("srv/index.html"));
    // The JSON plan says where each task came from.
    let json: Json = serde_json::from_str(&bench.ral("plan", &["-j", &m]).stdout).unwrap();
    let wrong: Vec<String> = crate::support::plan_schema()
        .iter_errors(&json)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect();
    assert!(wrong.is_empty(), "{wrong:#?}");
    let tasks = json["plan"]["tasks"].as_array().unwrap();
    let check = tasks
        .iter()
        .find(|t| t["resource"] == "callback[/site/shop:shop-check]")
        .unwrap();
    assert_eq!(check["action"], "run");
    assert_eq!(
        check["plugin"],
        serde_json::json!({"name": "demo", "kind": "callback", "item": "/site/shop",
                           "id": "shop-check", "description": "check the page"})
    );
    let page = tasks
        .iter()
        .find(|t| t["resource"] == "file[/srv/index.html]")
        .unwrap();
    assert_eq!(page["plugin"]["kind"], "config");
    let after = tasks
        .iter()
        .find(|t| t["resource"] == "file[/srv/after]")
        .unwrap();
    assert!(after.get("plugin").is_none(), "{after}");
    assert_eq!(json["plan"]["counts"]["run"], 4);
}

#[test]
fn an_item_is_created_changed_and_dropped_across_three_applies() {
    let bench = Bench::new();
    let m = bench.manifest("site.yaml", TWO_SITES);
    bench.ral("apply", &[&m]).expect(0);
    assert_eq!(bench.sandbox.read("srv/index.html"), "hello shop\n");
    assert_eq!(bench.sandbox.read("srv/blog/index.html"), "HELLO BLOG\n");
    assert_eq!(bench.sandbox.names_in_dir("marks"), ["blog", "shop"]);
    let calls = bench.take_calls();
    assert!(
        calls.contains(&"callback check shop".to_owned()),
        "{calls:?}"
    );
    assert!(
        calls.contains(&"callback check blog".to_owned()),
        "{calls:?}"
    );
    assert_eq!(
        bench.states(),
        [
            "file[/srv/blog/index.html] Applied",
            "file[/srv/index.html] Applied",
            "site[blog] Applied",
            "site[shop] Applied",
        ]
    );
    // Applied items get no tasks: nothing to plan, and their pages stay.
    bench.ral("plan", &["--detailed-exitcodes", &m]).expect(0);
    assert!(bench
        .take_calls()
        .contains(&"create_configuration shop=Applied blog=Applied".to_owned()));
    // Second: shop's content changes. It is Updated, its page changes and
    // its check runs again; blog is left alone.
    let changed = TWO_SITES.replace("hello shop", "open all day");
    let m2 = bench.manifest("site2.yaml", &changed);
    bench
        .ral("plan", &[&m2])
        .expect(0)
        .stdout_has("~ file[/srv/index.html]")
        .stdout_has("Plan: 0 to create, 1 to change, 0 to remove; 0 unchanged; 2 to run");
    bench.take_calls();
    bench.ral("apply", &[&m2]).expect(0);
    assert_eq!(bench.sandbox.read("srv/index.html"), "open all day\n");
    let calls = bench.take_calls();
    assert!(
        calls.contains(&"create_configuration shop=Updated blog=Applied".to_owned()),
        "{calls:?}"
    );
    assert!(
        calls.contains(&"callback check shop".to_owned()),
        "{calls:?}"
    );
    assert!(
        !calls.contains(&"callback check blog".to_owned()),
        "{calls:?}"
    );
    let stored = run(&mut bench.sandbox.ral_command("state", &["list"]));
    stored.stdout_has("content: \"open all day\"");
    // Third: blog is dropped. It is ForRemoval: its removal tasks remove
    // its page and say goodbye, and it leaves the store.
    let shop_only = bench.manifest(
        "shop.yaml",
        "site:\n  shop: {dir: /srv, content: open all day}\n",
    );
    // Its page is gone already (by hand): the removal task has nothing to
    // do, and the page leaves the store with its item all the same.
    std::fs::remove_file(bench.sandbox.root().join("srv/blog/index.html")).unwrap();
    bench.ral("apply", &[&shop_only]).expect(0);
    assert!(!bench.exists("srv/blog/index.html"));
    assert!(bench.exists("srv/index.html"), "shop's page stays");
    let calls = bench.take_calls();
    assert!(
        calls.contains(&"create_configuration shop=Applied blog=ForRemoval".to_owned()),
        "{calls:?}"
    );
    assert!(
        calls.contains(&"callback goodbye blog".to_owned()),
        "{calls:?}"
    );
    assert_eq!(
        bench.states(),
        ["file[/srv/index.html] Applied", "site[shop] Applied"]
    );
    bench
        .ral("plan", &["--detailed-exitcodes", &shop_only])
        .expect(0);
}

#[test]
fn a_failing_callback_leaves_its_item_unapplied_while_unrelated_items_succeed() {
    let bench = Bench::new();
    let failing = TWO_SITES.replace("    shout: true\n", "    fail_callback: true\n");
    let m = bench.manifest("site.yaml", &failing);
    bench
        .ral("apply", &[&m])
        .expect(1)
        .stdout_has("Failed  * callback[/site/blog:blog-check]")
        .stdout_has("plugin demo: callback: site blog does not answer");
    assert_eq!(
        bench.states(),
        [
            "file[/srv/blog/index.html] Applied",
            "file[/srv/index.html] Applied",
            "site[blog] Initial",
            "site[shop] Applied",
        ]
    );
    // The failed item is asked for again; its page is in place, so only
    // its command and check are left to run.
    bench.take_calls();
    bench
        .ral("plan", &[&m])
        .expect(0)
        .stdout_has("* callback[/site/blog:blog-check]")
        .stdout_has("Plan: 0 to create, 0 to change, 0 to remove; 1 unchanged; 2 to run");
    assert!(bench
        .take_calls()
        .contains(&"create_configuration shop=Applied blog=Initial".to_owned()));
}

#[test]
fn validation_errors_name_the_file_and_line_and_nothing_runs() {
    let bench = Bench::new();
    let m = bench.manifest(
        "site.yaml",
        "site:\n  one:\n    dir: /srv\n    content: a\n  two:\n    content: b\n    dir: /srv\n  \
         three:\n    dir: /x\n    content: invalid\n",
    );
    bench
        .ral("apply", &[&m])
        .expect(2)
        .stderr_has("site.yaml:7: /site/two: dir: dir /srv is also one's (plugin demo)")
        .stderr_has("site.yaml:8: /site/three: the content may not be 'invalid' (plugin demo)");
    let calls = bench.take_calls();
    assert_eq!(calls.len(), 2, "{calls:?}");
    assert!(calls[1].starts_with("validate_model"), "{calls:?}");
    assert!(!bench.exists("srv/index.html"));
    assert!(!bench.exists("var/lib/ral/state.db") || bench.states().is_empty());
}

#[test]
fn plugin_items_are_typed_like_resources_with_every_problem_reported_together() {
    let bench = Bench::new();
    let m = bench.manifest(
        "site.yaml",
        "site:\n  one:\n    dir: /srv\n    content: a\n    shout: loud\n  two:\n    dir: /x\n  \
         three: {dir: /y, content: c, colour: red}\nfile:\n  /srv/x: {mode: '99'}\n",
    );
    bench
        .ral("plan", &[&m])
        .expect(2)
        .stderr_has("site.yaml:5: site[one]: invalid value 'loud' for attribute 'shout'")
        .stderr_has(
            "site.yaml:6: site[two]: missing the required property content (item type of the \
             plugin demo)",
        )
        .stderr_has("site.yaml:8: site[three]: unknown attribute 'colour'")
        .stderr_has("site.yaml:10: file[/srv/x]: invalid value '99' for attribute 'mode'");
    assert!(
        bench.take_calls().is_empty(),
        "no plugin runs on a manifest with problems"
    );
}

#[test]
fn item_type_clashes_name_both_files() {
    let bench = Bench::new().with_data("clash_type");
    let m = bench.manifest("site.yaml", TWO_SITES);
    bench
        .ral("plan", &[&m])
        .expect(2)
        .stderr_has("clash_type/plugins/files.yaml: item type 'file' is also the type of the provider file::file (")
        .stderr_has("file.prov)");
    // A manifest naming the type could mean either: refused at its line,
    // naming both files, and nothing runs.
    let files = bench.manifest(
        "files.yaml",
        "host:\n  web: {ip: 10.0.0.5}\nfile:\n  /srv/x: {ensure: file}\n",
    );
    let applied = bench.ral("apply", &[&files]);
    applied
        .expect(2)
        .stderr_has("files.yaml:4: ")
        .stderr_has("clash_type/plugins/files.yaml: invalid plugin metadata: item type 'file' is also the type of the provider file::file (")
        .stderr_has("file.prov): a manifest could not tell which is meant; rename one");
    assert!(!bench.exists("srv/x"));
    assert!(!bench.sandbox.read("etc/hosts").contains("web"));
    // Also as a reference, and as the item type's qualified name.
    let named = bench.manifest(
        "named.yaml",
        "host:\n  web: {ip: 10.0.0.5, require: \"file[/srv/x]\"}\nfile::files:\n  a: {size: 1}\n",
    );
    bench
        .ral("plan", &[&named])
        .expect(2)
        .stderr_has("named.yaml:2: host[web]: require file[/srv/x]: ")
        .stderr_has("named.yaml:4: ")
        .stderr_has("item type 'file' is also the type of the provider file::file");
    // The provider named by its qualified name, or a manifest not naming
    // the type, goes on, with a warning.
    let qualified = bench.manifest(
        "qualified.yaml",
        "host:\n  web: {ip: 10.0.0.5}\nfile::file:\n  /srv/x: {ensure: file}\n",
    );
    bench
        .ral("apply", &[&qualified])
        .expect(0)
        .stderr_has("item type 'file' is also the type of the provider file::file");
    assert!(bench.exists("srv/x"));
    // ralsh, which knows no plugin items, lists providers with the
    // warning, and shows the provider's resources.
    let clash_dir = fixtures_dir().join("plugin_cases/clash_type");
    run(&mut bench.sandbox.command_in(&clash_dir, &[]))
        .expect(0)
        .stdout_has("file::file")
        .stderr_has("item type 'file' is also the type of the provider file::file");
    run(&mut bench.sandbox.command_in(&clash_dir, &["file", "/srv/x"]))
        .expect(0)
        .stdout_has("file::file { '/srv/x':");
    let bench = Bench::new().with_data("clash_plugins");
    bench
        .ral("plan", &[&m])
        .expect(2)
        .stderr_has("site.yaml:2: ")
        .stderr_has("clash_plugins/plugins/other.yaml: invalid plugin metadata: item type 'site' is also an item type of the plugin demo (")
        .stderr_has("plugins/demo.yaml)");
}

#[test]
fn item_types_differing_only_by_case_clash_too() {
    let bench = Bench::new().with_data("clash_case");
    // A reference is read in any case (`Host[web]` is host[web]): the
    // item type 'Host' would take it over, so it clashes as 'host' would.
    let hosts = bench.manifest(
        "hosts.yaml",
        "host:\n  web: {ip: 10.0.0.5}\nfile:\n  /srv/x: {ensure: file, require: \"Host[web]\"}\n",
    );
    let applied = bench.ral("apply", &[&hosts]);
    applied
        .expect(2)
        .stderr_has("hosts.yaml:2: ")
        .stderr_has("hosts.yaml:4: file[/srv/x]: require Host[web]: ")
        .stderr_has(
            "clash_case/plugins/cased.yaml: invalid plugin metadata: item type 'Host' is also \
             the type of the provider host::",
        )
        .stderr_has("a manifest could not tell which is meant; rename one");
    assert!(!bench.exists("srv/x"));
    assert!(!bench.sandbox.read("etc/hosts").contains("web"));
    // So does one of another plugin's item types, named in either case.
    let sites = bench.manifest("site.yaml", &TWO_SITES.replace("site:", "Site:"));
    for manifest in [bench.manifest("sites.yaml", TWO_SITES), sites] {
        bench
            .ral("plan", &[&manifest])
            .expect(2)
            .stderr_has(":2: ")
            .stderr_has(
                "clash_case/plugins/cased.yaml: invalid plugin metadata: item type 'Site' is \
                 also an item type of the plugin demo (",
            );
    }
}

#[test]
fn a_plugin_item_cannot_be_named_like_a_task_or_a_vpath() {
    let bench = Bench::new().with_data("rogue");
    // A task's name in the plan is its item's vpath and its id: these
    // names would be those of /thing/x's task 'b' (or 'a:b').
    answer(
        &bench,
        "create_configuration",
        r#"{"tasks": [{"kind": "callback", "item": "/thing/x", "id": "b", "callback": "c"}]}"#,
        0,
    );
    for (name, why) in [
        ("/thing/x:b", "it holds '/'"),
        ("x:a", "it holds ':'"),
        ("a/b", "it holds '/'"),
        ("", "it is empty"),
        ("-x", "it starts with '.' or '-'"),
        ("$(id)", "it holds '$'"),
    ] {
        let m = bench.manifest(
            "thing.yaml",
            &format!("thing:\n  x: {{size: 1}}\n  {name:?}: {{size: 2}}\n"),
        );
        bench.ral("plan", &[&m]).expect(2).stderr_has(&format!(
            "thing.yaml:3: thing[{name}]: {why}: a plugin item's name is letters, digits, '_', '-' \
             and '.', not starting with '.' or '-', at most 128 characters"
        ));
        assert!(
            !bench.exists("rogue/validate_model.in"),
            "no plugin ran: {name}"
        );
    }
    let m = bench.manifest(
        "thing.yaml",
        "thing:\n  x: {size: 1}\n  x.y_z-1: {size: 2}\n",
    );
    bench
        .ral("plan", &[&m])
        .expect(0)
        .stdout_has("* callback[/thing/x:b]");
}

#[test]
fn sensitive_properties_reach_the_plugin_but_no_output_or_store() {
    // One line, and several (a key's), which the plugin's stderr, read
    // line by line, never holds whole.
    for secret in [
        "hunter2-token",
        "hunter2-token\\nthen-hunter2\\r\\n  hunter2-end",
    ] {
        let bench = Bench::new();
        let m = bench.manifest(
            "site.yaml",
            &format!("site:\n  shop: {{dir: /srv, content: hi, secret: \"{secret}\"}}\n"),
        );
        let applied = bench.ral("apply", &["-l", "debug", &m]);
        applied.expect(0);
        assert!(!applied.stdout.contains("hunter2"), "{}", applied.stdout);
        assert!(!applied.stderr.contains("hunter2"), "{}", applied.stderr);
        // The plugin had it (its callback echoes it on stderr, redacted).
        applied.stderr_has("token [redacted]");
        let db = std::fs::read(bench.sandbox.root().join("var/lib/ral/state.db")).unwrap();
        let text = String::from_utf8_lossy(&db);
        assert!(!text.contains("hunter2"), "the store holds only a digest");
        let listed = run(&mut bench.sandbox.ral_command("state", &["list"]));
        assert!(!listed.stdout.contains("hunter2"), "{}", listed.stdout);
    }
}

#[test]
fn private_file_content_reaches_plugins_redacted_and_their_stderr_never() {
    let bench = Bench::new().with_data("rogue");
    // The plugin says on its stderr what it could have read elsewhere
    // (the file, once made), a line of it too.
    let dir = bench.sandbox.root().join("rogue");
    std::fs::create_dir_all(&dir).unwrap();
    for action in ["validate_model", "create_configuration"] {
        let said = "read MANISECRET-7f3a and then-second-line";
        std::fs::write(dir.join(format!("{action}.err")), said).unwrap();
    }
    let big = "b".repeat(70_000);
    let m = bench.manifest(
        "x.yaml",
        &format!(
            "thing:\n  a: {{size: 3}}\nfile:\n  \
             /etc/x: {{content: \"MANISECRET-7f3a\\nthen-second-line\\n\", mode: '0600'}}\n  \
             /etc/open: {{content: \"open text\\n\", mode: '0644'}}\n  \
             /etc/unsure: {{content: \"unsure text\\n\"}}\n  \
             /etc/big: {{content: {big}, mode: '0644'}}\n"
        ),
    );
    for command in ["plan", "apply", "plan"] {
        let ran = bench.ral(command, &["-l", "debug", &m]);
        ran.expect(0);
        for shown in [&ran.stdout, &ran.stderr] {
            assert!(!shown.contains("MANISECRET"), "{command}: {shown}");
            assert!(!shown.contains("then-second"), "{command}: {shown}");
        }
        ran.stderr_has("read [redacted] and [redacted]");
        for action in ["validate_model", "create_configuration"] {
            let text = bench.sandbox.read(&format!("rogue/{action}.in"));
            let input: Json = serde_json::from_str(&text).unwrap();
            let items = input["model"]["items"].as_array().unwrap();
            let private = items.iter().find(|i| i["name"] == "/etc/x");
            assert!(
                !text.contains("MANISECRET"),
                "{command}: {action}: {private:?}"
            );
            let content = |name: &str| {
                let item = items.iter().find(|i| i["name"] == name).unwrap();
                item["properties"]["content"].clone()
            };
            // Private, perhaps private (as the file is found), too
            // large: as a sensitive value; public: as it is.
            assert_eq!(content("/etc/x"), "[redacted]");
            assert_eq!(content("/etc/unsure"), "[redacted]");
            assert_eq!(content("/etc/big"), "[redacted]");
            assert_eq!(content("/etc/open"), "open text\n");
        }
    }
    assert_eq!(
        bench.sandbox.read("etc/x"),
        "MANISECRET-7f3a\nthen-second-line\n"
    );
}

/// The rogue plugin's answer to `action`, and how it exits.
fn answer(bench: &Bench, action: &str, out: &str, status: i32) {
    let dir = bench.sandbox.root().join("rogue");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(format!("{action}.out")), out).unwrap();
    std::fs::write(dir.join(format!("{action}.status")), status.to_string()).unwrap();
}

fn rogue_input(bench: &Bench, action: &str) -> Json {
    let text = bench.sandbox.read(&format!("rogue/{action}.in"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

#[test]
fn answers_against_the_protocol_fail_the_run_naming_the_plugin_and_call() {
    let bench = Bench::new().with_data("rogue");
    let m = bench.manifest("thing.yaml", "thing:\n  a: {size: 3}\n");
    for (action, out, status, expected) in [
        ("validate_model", "not json", 0, "plugin rogue: validate_model: the output is not one JSON document"),
        ("validate_model", "{\"errors\": 3}", 0, "plugin rogue: validate_model: the answer: invalid type"),
        ("validate_model", "{\"error\": {\"message\": \"no \\u001b[31m way\"}}", 0, "plugin rogue: validate_model: no \\u{1b}[31m way"),
        ("validate_model", "{\"errors\": []}", 3, "plugin rogue: validate_model: validate_model failed: exit status 3"),
        // A plugin that fails says why in its error document, also when
        // it exits non-zero (the Python toolkit exits 1).
        ("validate_model", "{\"error\": {\"message\": \"over quota\"}}", 1, "plugin rogue: validate_model: over quota\n"),
        (
            "create_configuration",
            "{\"tasks\": [{\"kind\": \"callback\", \"item\": \"/user/root\", \"callback\": \"x\"}]}",
            0,
            "task '#1' is for '/user/root', which is no item of this plugin's types in the model",
        ),
        (
            "create_configuration",
            "{\"tasks\": [{\"kind\": \"config\", \"item\": \"/thing/a\", \"type\": \"nosuch\", \"title\": \"t\"}]}",
            0,
            "unknown provider or type 'nosuch'",
        ),
    ] {
        let _ = std::fs::remove_dir_all(bench.sandbox.root().join("rogue"));
        answer(&bench, action, out, status);
        let plan = bench.ral("apply", &[&m]);
        plan.expect(2).stderr_has(expected);
        assert!(!plan.stderr.contains('\u{1b}'), "{}", plan.stderr);
    }
    assert!(!bench.exists("var/lib/ral/state.db") || bench.states().is_empty());
}

#[test]
fn an_answer_of_too_many_requirements_is_refused_naming_the_plugin_and_their_count() {
    let bench = Bench::new().with_data("rogue");
    let m = bench.manifest("thing.yaml", "thing:\n  a: {size: 3}\n");
    // Two million and one entries: one more than an answer may hold
    // (about 8 MB, well within the bytes an answer may take).
    let mut out = String::from(
        r#"{"tasks": [{"kind": "callback", "item": "/thing/a", "id": "x", "callback": "c", "requires": ["#,
    );
    out.push_str(&vec![r#""x""#; 2_000_001].join(","));
    out.push_str("]}]}");
    answer(&bench, "create_configuration", &out, 0);
    bench.ral("apply", &[&m]).expect(2).stderr_has(
        "plugin rogue: create_configuration: 2000001 requirements (entries of requires, notify \
         and subscribe, and the links of ordered lists) in one answer, more than 2000000",
    );
    assert!(!bench.exists("var/lib/ral/state.db") || bench.states().is_empty());
}

/// An answer of `n` callbacks of /thing/a, a config task of /thing/a
/// (`file[/srv/hub]`, as the sandbox has it already) requiring them all,
/// and `n` callbacks of /thing/b each requiring `what`.
fn fan_out_answer(n: usize, what: &str) -> String {
    let a = (0..n).map(|i| {
        format!(r#"{{"kind": "callback", "item": "/thing/a", "id": "a{i}", "callback": "c"}}"#)
    });
    let hub = format!(
        r#"{{"kind": "config", "item": "/thing/a", "id": "hub", "type": "file", "title": "/srv/hub",
            "attributes": {{"ensure": "file", "content": "hub\n"}}, "requires": [{}]}}"#,
        (0..n)
            .map(|i| format!(r#""a{i}""#))
            .collect::<Vec<_>>()
            .join(",")
    );
    let b = (0..n).map(|i| {
        format!(
            r#"{{"kind": "callback", "item": "/thing/b", "id": "b{i}", "callback": "c",
                 "requires": ["{what}"]}}"#
        )
    });
    let tasks: Vec<String> = a.chain([hub]).chain(b).collect();
    format!(r#"{{"tasks": [{}]}}"#, tasks.join(","))
}

#[test]
fn a_requirement_on_an_item_counts_once_for_each_task_it_waits_for() {
    let bench = Bench::new().with_data("rogue");
    std::fs::write(bench.sandbox.root().join("srv/hub"), "hub\n").unwrap();
    let m = bench.manifest("thing.yaml", "thing:\n  a: {size: 3}\n  b: {size: 4}\n");
    // 1,500 requirements, each on an item standing for 1,500 tasks (the
    // plugin item's: its callbacks, which its unchanged file passes on;
    // or the file's): the plan's tasks would wait for 2,250,000, more
    // than a plan may gain beyond the requirements written.
    for (what, through) in [
        ("/thing/a", "thing[a] standing for 1500 of them"),
        ("file[/srv/hub]", "file[/srv/hub] standing for 1500 of them"),
    ] {
        answer(
            &bench,
            "create_configuration",
            &fan_out_answer(1500, what),
            0,
        );
        let planned = bench.ral("plan", &[&m]);
        planned
            .expect(2)
            .stderr_has("thing.yaml:3: callback[/thing/b:b")
            .stderr_has("of the plugin rogue for /thing/b): waits for ")
            .stderr_has(through)
            .stderr_has(
                "; the plan would wait for more than 2000000 tasks beyond the requirements \
                 written: a requirement on a plugin item waits for every task of that item",
            );
        assert!(planned.stdout.is_empty(), "no plan is shown");
    }
    // Fewer plan, each task of b waiting for every task of a.
    answer(
        &bench,
        "create_configuration",
        &fan_out_answer(3, "/thing/a"),
        0,
    );
    let planned = bench.ral("plan", &["-j", &m]);
    planned.expect(0);
    let report: Json = serde_json::from_str(&planned.stdout).unwrap();
    let tasks = report["plan"]["tasks"].as_array().unwrap();
    let last = tasks.last().unwrap();
    assert_eq!(last["plugin"]["item"], "/thing/b", "{last}");
    assert_eq!(last["requires"].as_array().unwrap().len(), 3, "{last}");
}

#[test]
fn every_call_gets_the_model_with_states_and_applied_properties() {
    let bench = Bench::new().with_data("rogue");
    let m = bench.manifest(
        "thing.yaml",
        "thing:\n  a: {size: 3}\nhost:\n  web: {ip: 10.0.0.5}\n",
    );
    bench.ral("apply", &[&m]).expect(0);
    let first = rogue_input(&bench, "create_configuration");
    assert_eq!(first["ral"]["noop"], false);
    assert_eq!(
        first["ral"]["root"],
        bench
            .sandbox
            .root()
            .canonicalize()
            .unwrap()
            .to_str()
            .unwrap()
    );
    let items = first["model"]["items"].as_array().unwrap();
    let thing = items.iter().find(|i| i["vpath"] == "/thing/a").unwrap();
    assert_eq!(
        thing,
        &serde_json::json!({"vpath": "/thing/a", "type": "thing", "name": "a",
            "state": "Initial", "properties": {"size": 3}, "applied_properties": null})
    );
    assert!(items.iter().any(|i| i["vpath"] == "/host/web"), "{items:?}");
    // Changed: Updated, with what was applied; a plan says noop.
    let m2 = bench.manifest("thing2.yaml", "thing:\n  a: {size: 4}\n");
    bench.ral("plan", &[&m2]).expect(0);
    let second = rogue_input(&bench, "validate_model");
    assert_eq!(second["ral"]["noop"], true);
    let items = second["model"]["items"].as_array().unwrap();
    let thing = items.iter().find(|i| i["vpath"] == "/thing/a").unwrap();
    assert_eq!(thing["state"], "Updated");
    assert_eq!(thing["properties"]["size"], 4);
    assert_eq!(thing["applied_properties"]["size"], 3);
    let host = items.iter().find(|i| i["vpath"] == "/host/web").unwrap();
    assert_eq!(
        host["state"], "ForRemoval",
        "dropped resources are in the model"
    );
}

#[test]
fn a_manifest_without_plugin_items_calls_no_plugin() {
    let bench = Bench::new().with_data("rogue");
    let m = bench.manifest("host.yaml", "host:\n  web: {ip: 10.0.0.5}\n");
    // A rogue answer that would fail any call.
    answer(&bench, "validate_model", "garbage", 1);
    bench.ral("apply", &[&m]).expect(0);
    assert!(bench.take_calls().is_empty());
    assert!(!Path::new(&bench.sandbox.root().join("rogue/validate_model.in")).exists());
}

#[test]
fn a_plan_with_plugin_items_is_not_saved() {
    let bench = Bench::new();
    let m = bench.manifest("site.yaml", TWO_SITES);
    let file = bench.manifests.path().join("plan.json");
    bench
        .ral("plan", &["-o", file.to_str().unwrap(), &m])
        .expect(2)
        .stderr_has("a plan with them cannot be saved yet");
    assert!(!file.exists());
}

/// Stops the bundled webapp's daemon below `root` however the test ends.
struct Daemon<'a> {
    root: &'a Path,
    name: &'a str,
}

impl Drop for Daemon<'_> {
    fn drop(&mut self) {
        let script = self.root.join(format!("etc/init.d/webapp-{}", self.name));
        if script.exists() {
            let _ = std::process::Command::new(&script)
                .arg("stop")
                .env("RALSH_ROOT_DIR", self.root)
                .output();
        }
    }
}

/// A TCP port on 127.0.0.1 that was free a moment ago.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn answer_on(port: u16) -> Option<String> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .unwrap();
    stream.write_all(b"GET / HTTP/1.0\r\n\r\n").ok()?;
    let mut text = String::new();
    stream.read_to_string(&mut text).ok()?;
    Some(text)
}

#[test]
fn the_bundled_webapp_serves_its_message_and_is_removed_whole() {
    let sandbox = Sandbox::seeded();
    let manifests = tempfile::tempdir().unwrap();
    let port = free_port();
    let manifest = manifests.path().join("web.yaml");
    std::fs::write(
        &manifest,
        format!("webapp:\n  shop: {{port: {port}, owner: shop, message: the shop is open}}\n"),
    )
    .unwrap();
    let m = manifest.to_str().unwrap();
    let root = sandbox.root().canonicalize().unwrap();
    let _daemon = Daemon {
        root: &root,
        name: "shop",
    };
    let applied = run(&mut sandbox.ral_command("apply", &[m]));
    applied
        .expect(0)
        .stdout_has("Success + user[shop]")
        .stdout_has("Success + service[webapp-shop]")
        .stdout_has("Success * callback[/webapp/shop:");
    let page = answer_on(port).expect("the webapp answers");
    assert!(page.ends_with("the shop is open\n"), "{page}");
    assert!(sandbox.read("etc/passwd").contains("\nshop:x:"));
    run(&mut sandbox.ral_command("plan", &["--detailed-exitcodes", m])).expect(0);
    // Changed: the config changes, the daemon restarts (and keeps
    // running after the command that restarted it) and answers anew.
    std::fs::write(
        &manifest,
        format!("webapp:\n  shop: {{port: {port}, owner: shop, message: closing soon}}\n"),
    )
    .unwrap();
    run(&mut sandbox.ral_command("apply", &[m]))
        .expect(0)
        .stdout_has("Success * remote[/webapp/shop:");
    let page = answer_on(port).expect("the webapp answers after its restart");
    assert!(page.ends_with("closing soon\n"), "{page}");
    // Dropped: stopped, its files removed; the account stays (forgotten).
    run(&mut sandbox.ral_command("apply", &["--destroy"]))
        .expect(0)
        .stdout_has("= user[shop] was only forgotten, left as it is: /webapp/shop made it");
    assert!(answer_on(port).is_none(), "the webapp was stopped");
    assert!(!sandbox.root().join("etc/webapp/shop.conf").exists());
    assert!(!sandbox.root().join("etc/init.d/webapp-shop").exists());
    assert!(sandbox.read("etc/passwd").contains("\nshop:x:"));
    let listed = run(&mut sandbox.ral_command("state", &["list"]));
    assert_eq!(listed.stdout, "", "the store holds nothing any more");
}

#[test]
fn a_replaced_resource_is_kept_and_let_go_once_its_replacement_succeeds() {
    let bench = Bench::new();
    let old = bench.manifest(
        "old.yaml",
        "file:\n  /srv/old.ini: {ensure: file, content: \"old\\n\"}\n",
    );
    bench.ral("apply", &[&old]).expect(0);
    assert_eq!(bench.states(), ["file[/srv/old.ini] Applied"]);
    // The site's page takes /srv/old.ini over: it is not removed.
    let new = bench.manifest(
        "new.yaml",
        "site:\n  shop: {dir: /srv, content: hi, replaces: \"file:/srv/old.ini\"}\n",
    );
    bench
        .ral("plan", &[&new])
        .expect(0)
        .stdout_has("    replaces file[/srv/old.ini] (left as it is; ral no longer manages it once this succeeds)")
        .stdout_has("0 to remove");
    bench.ral("apply", &[&new]).expect(0);
    assert_eq!(bench.sandbox.read("srv/old.ini"), "old\n", "kept");
    assert_eq!(
        bench.states(),
        ["file[/srv/index.html] Applied", "site[shop] Applied"],
        "and no longer ral's"
    );
    // Never removed later either.
    bench.ral("apply", &[&new]).expect(0);
    assert!(bench.exists("srv/old.ini"));
}

#[test]
fn a_replaced_resource_stays_ral_s_when_its_replacement_fails() {
    let bench = Bench::new();
    let old = bench.manifest(
        "old.yaml",
        "file:\n  /srv/old.ini: {ensure: file, content: \"old\\n\"}\n",
    );
    bench.ral("apply", &[&old]).expect(0);
    // The page's directory does not exist: its task fails.
    let new = bench.manifest(
        "new.yaml",
        "site:\n  shop: {dir: /nowhere, content: hi, replaces: \"file:/srv/old.ini\"}\n",
    );
    bench
        .ral("apply", &[&new])
        .expect(1)
        .stdout_has("Failed  + file[/nowhere/index.html]");
    assert_eq!(bench.sandbox.read("srv/old.ini"), "old\n");
    assert!(bench
        .states()
        .contains(&"file[/srv/old.ini] Applied".to_owned()));
    // Still ral's: a run that no longer replaces it removes it.
    let other = bench.manifest("other.yaml", "site:\n  shop: {dir: /srv, content: hi}\n");
    bench.ral("apply", &[&other]).expect(0);
    assert!(!bench.exists("srv/old.ini"));
}

#[test]
fn replacing_what_the_plan_declares_or_twice_is_refused_at_plan_time() {
    let bench = Bench::new();
    let kept = bench.manifest(
        "kept.yaml",
        "site:\n  shop: {dir: /srv, content: hi, replaces: \"file:/srv/old.ini\"}\nfile:\n  \
         /srv/old.ini: {ensure: file}\n",
    );
    bench
        .ral("plan", &[&kept])
        .expect(2)
        .stderr_has("file[/srv/index.html] replaces file::file[/srv/old.ini], which this plan also declares (file[/srv/old.ini] at ");
    let twice = bench.manifest(
        "twice.yaml",
        "site:\n  shop: {dir: /srv, content: hi, replaces: \"file:/srv/old.ini\"}\n  \
         blog: {dir: /srv/blog, content: hi, replaces: \"file:/srv/old.ini\"}\n",
    );
    bench
        .ral("plan", &[&twice])
        .expect(2)
        .stderr_has("file[/srv/index.html] and file[/srv/blog/index.html] both replace file::file[/srv/old.ini]");
}

#[test]
fn snapshots_are_made_listed_restored_and_removed_by_the_plugins_plans() {
    let bench = Bench::new();
    let m = bench.manifest("site.yaml", TWO_SITES);
    bench.ral("apply", &[&m]).expect(0);
    // Made: the plugin's plan ran, the store records it with the model.
    bench
        .ral("snapshot", &["create", "before"])
        .expect(0)
        .stdout_has("Success * callback[snapshot:demo:#1]")
        .stdout_has("Snapshot create before: Apply complete: 1 run;");
    assert_eq!(
        bench.sandbox.read("snapshots/before.json"),
        "[\"blog\", \"shop\"]"
    );
    let listed = bench.ral("snapshot", &["list", "-j"]);
    listed.expect(0);
    let doc: Json = serde_json::from_str(&listed.stdout).unwrap();
    assert_eq!(doc["snapshots"][0]["name"], "before");
    assert_eq!(doc["snapshots"][0]["action"], "create");
    assert_eq!(doc["snapshots"][0]["state"], "Successful");
    bench
        .ral("snapshot", &["create", "before"])
        .expect(2)
        .stderr_has("there is a snapshot 'before' already");
    // The pages change; restoring brings back what the snapshot recorded.
    let changed = TWO_SITES.replace("hello shop", "closed");
    let m2 = bench.manifest("site2.yaml", &changed);
    bench.ral("apply", &[&m2]).expect(0);
    assert_eq!(bench.sandbox.read("srv/index.html"), "closed\n");
    bench
        .ral("snapshot", &["restore", "before"])
        .expect(0)
        .stdout_has("Success ~ file[/srv/index.html]")
        .stdout_has("Success * callback[snapshot:demo:#3]");
    assert_eq!(bench.sandbox.read("srv/index.html"), "hello shop\n");
    // A snapshot plan changes no item of the store.
    let stored = run(&mut bench.sandbox.ral_command("state", &["list"]));
    stored.stdout_has("content: \"closed\"");
    // Removed: its plan ran, and it leaves the store.
    bench.ral("snapshot", &["remove", "before"]).expect(0);
    assert!(!bench.exists("snapshots/before.json"));
    let listed = bench.ral("snapshot", &["list"]);
    listed.expect(0);
    assert_eq!(listed.stdout, "");
    bench
        .ral("snapshot", &["remove", "before"])
        .expect(2)
        .stderr_has("there is no snapshot 'before'");
}

#[test]
fn a_snapshot_name_that_is_no_plain_word_is_refused_before_anything_runs() {
    let bench = Bench::new();
    let m = bench.manifest("site.yaml", TWO_SITES);
    bench.ral("apply", &[&m]).expect(0);
    bench.take_calls();
    let long = "s".repeat(129);
    for (name, why) in [
        ("", "it is empty"),
        ("../../x", "it holds '/'"),
        ("a\nb", "it holds '\\n'"),
        ("$(id)", "it holds '$'"),
        (".hidden", "it starts with '.' or '-'"),
        ("-x", "it starts with '.' or '-'"),
        (&long, "it is 129 characters long"),
    ] {
        for action in ["create", "restore", "remove"] {
            bench
                .ral("snapshot", &[action, "--", name])
                .expect(2)
                .stderr_has(&format!(
                    "cannot name a snapshot: {why}; a snapshot's name is letters, digits"
                ));
        }
    }
    assert!(
        bench.take_calls().is_empty(),
        "no plugin was given a bad name"
    );
    assert_eq!(
        bench.ral("snapshot", &["list"]).stdout,
        "",
        "none was stored"
    );
    assert!(!bench.exists("snapshots"));
    // A plain one is made.
    bench.ral("snapshot", &["create", "before-1.2_a"]).expect(0);
}

#[test]
fn a_failed_snapshot_plan_is_recorded_failed_and_a_failed_removal_keeps_it() {
    let bench = Bench::new();
    let m = bench.manifest("site.yaml", TWO_SITES);
    bench.ral("apply", &[&m]).expect(0);
    // The record directory is a file: the snapshot callback fails.
    bench.sandbox.write("snapshots", "not a directory");
    bench.ral("snapshot", &["create", "s1"]).expect(1);
    let listed = bench.ral("snapshot", &["list"]);
    listed
        .stdout_has("s1  made ")
        .stdout_has("last: create Failed");
    // Its removal fails too (nothing to rm): it stays recorded.
    bench.ral("snapshot", &["remove", "s1"]).expect(1);
    bench
        .ral("snapshot", &["list"])
        .stdout_has("last: remove Failed");
}

#[test]
fn a_manifest_naming_nothing_ral_manages_does_not_let_plugins_remove_their_items() {
    let bench = Bench::new();
    let m = bench.manifest("site.yaml", TWO_SITES);
    bench.ral("apply", &[&m]).expect(0);
    // A manifest of something else entirely (a wrong or truncated file):
    // both sites would go, by their plugin's removal tasks.
    let other = bench.manifest("other.yaml", "file:\n  /srv/x: {ensure: file}\n");
    bench
        .ral("apply", &[&other])
        .expect(2)
        .stderr_has("site[blog]");
    assert!(bench.exists("srv/index.html"));
    assert!(bench.exists("srv/blog/index.html"));
    assert!(!bench
        .take_calls()
        .iter()
        .any(|c| c.starts_with("callback goodbye")));
    // Asked for, it goes.
    bench.ral("apply", &["--destroy", &other]).expect(0);
    assert!(!bench.exists("srv/index.html"));
    assert!(!bench.exists("srv/blog/index.html"));
}

#[test]
fn keep_removed_plans_no_removal_of_plugin_items() {
    let bench = Bench::new();
    let m = bench.manifest("site.yaml", TWO_SITES);
    bench.ral("apply", &[&m]).expect(0);
    bench.take_calls();
    let shop_only = bench.manifest(
        "shop.yaml",
        "site:\n  shop: {dir: /srv, content: hello shop}\n",
    );
    bench
        .ral("apply", &["--keep-removed", &shop_only])
        .expect(0);
    assert!(bench.exists("srv/blog/index.html"));
    let calls = bench.take_calls();
    assert!(
        calls.contains(&"create_configuration shop=Applied".to_owned()),
        "blog is not in the model at all: {calls:?}"
    );
    assert!(bench.states().contains(&"site[blog] Applied".to_owned()));
}

#[test]
fn an_item_whose_tasks_failed_needs_work_even_when_the_manifest_goes_back() {
    let bench = Bench::new();
    let first = bench.manifest("a.yaml", "site:\n  shop: {dir: /srv, content: first}\n");
    bench.ral("apply", &[&first]).expect(0);
    // The page is written, then the check fails: shop stays Updated.
    let failing = bench.manifest(
        "b.yaml",
        "site:\n  shop: {dir: /srv, content: second, fail_callback: true}\n",
    );
    bench.ral("apply", &[&failing]).expect(1);
    assert_eq!(bench.sandbox.read("srv/index.html"), "second\n");
    assert!(bench.states().contains(&"site[shop] Updated".to_owned()));
    // Back to what was applied: the page is not what was applied any
    // more, so the item still needs work, and gets it.
    bench.take_calls();
    bench
        .ral("plan", &[&first])
        .expect(0)
        .stdout_has("~ file[/srv/index.html]");
    assert!(bench
        .take_calls()
        .contains(&"create_configuration shop=Updated".to_owned()));
    bench.ral("apply", &[&first]).expect(0);
    assert_eq!(bench.sandbox.read("srv/index.html"), "first\n");
    assert!(bench.states().contains(&"site[shop] Applied".to_owned()));
    bench
        .ral("plan", &["--detailed-exitcodes", &first])
        .expect(0);
}

#[test]
fn a_problem_with_a_plugin_task_names_the_plugin_and_the_task() {
    let bench = Bench::new().with_data("rogue");
    let m = bench.manifest("thing.yaml", "thing:\n  a: {size: 3}\n");
    answer(
        &bench,
        "create_configuration",
        "{\"tasks\": [{\"kind\": \"config\", \"item\": \"/thing/a\", \"id\": \"conf\", \
         \"type\": \"file\", \"title\": \"/srv/x\", \"attributes\": {\"contnet\": \"hi\"}}]}",
        0,
    );
    bench
        .ral("plan", &[&m])
        .expect(2)
        .stderr_has(
            "thing.yaml:2: file[/srv/x]: unknown attribute 'contnet' (did you mean 'content'?); \
         settable attributes:",
        )
        .stderr_has("(task 'conf' of the plugin rogue for /thing/a)");
}

#[test]
fn a_problem_with_what_a_task_names_is_shown_at_the_line_of_its_own_item() {
    let bench = Bench::new().with_data("rogue");
    let m = bench.manifest("thing.yaml", "thing:\n  a: {size: 1}\n  b: {size: 2}\n");
    answer(
        &bench,
        "create_configuration",
        r#"{"tasks": [
            {"kind": "config", "item": "/thing/a", "id": "f", "type": "file", "title": "/srv/f",
             "attributes": {"ensure": "file"}, "notify": ["cb", "/thing/b"]},
            {"kind": "callback", "item": "/thing/b", "id": "cb", "callback": "c"}]}"#,
        0,
    );
    // Task f of /thing/a (line 2) names b's task and b (line 3).
    bench
        .ral("plan", &[&m])
        .expect(2)
        .stderr_has("thing.yaml:2: file[/srv/f]: notify thing[/thing/b:cb]: callback[/thing/b:cb] cannot be refreshed")
        .stderr_has("thing.yaml:2: file[/srv/f]: notify thing[b]: thing[b] cannot be refreshed");
}

#[test]
fn a_misspelt_item_type_is_suggested() {
    let bench = Bench::new();
    let m = bench.manifest("site.yaml", "sitte:\n  shop: {dir: /srv, content: hi}\n");
    bench
        .ral("plan", &[&m])
        .expect(2)
        .stderr_has("site.yaml:2: unknown provider or type 'sitte' (did you mean 'site'?)");
}

/// The rogue plugin's create_configuration: config tasks making the
/// files `files` (TITLE, CONTENT) for the item /thing/a.
fn files_answer(files: &[(&str, &str)]) -> String {
    let tasks: Vec<Json> = files
        .iter()
        .map(|(title, content)| {
            serde_json::json!({"kind": "config", "item": "/thing/a", "type": "file",
                "title": title, "attributes": {"ensure": "file", "content": content}})
        })
        .collect();
    serde_json::json!({ "tasks": tasks }).to_string()
}

#[test]
fn drift_tasks_of_an_applied_item_only_add() {
    let bench = Bench::new().with_data("rogue");
    let m = bench.manifest("thing.yaml", "thing:\n  a: {size: 3}\n");
    answer(
        &bench,
        "create_configuration",
        &files_answer(&[("/srv/r1", "one\n"), ("/srv/r2", "two\n")]),
        0,
    );
    bench.ral("apply", &[&m]).expect(0);
    // Applied; its plugin sees r1 drift and answers only its repair.
    bench.sandbox.write("srv/r1", "changed\n");
    answer(
        &bench,
        "create_configuration",
        &files_answer(&[("/srv/r1", "one\n")]),
        0,
    );
    bench.ral("apply", &[&m]).expect(0);
    assert_eq!(bench.sandbox.read("srv/r1"), "one\n");
    assert_eq!(bench.sandbox.read("srv/r2"), "two\n", "not removed");
    assert!(bench.states().contains(&"file[/srv/r2] Applied".to_owned()));
}

/// The rogue plugin's create_configuration: for each (ITEM, TITLE, ENSURE),
/// a config task of the thing ITEM for the file TITLE.
fn shared_answer(tasks: &[(&str, &str, &str)]) -> String {
    let tasks: Vec<Json> = tasks
        .iter()
        .map(|(item, title, ensure)| {
            serde_json::json!({"kind": "config", "item": format!("/thing/{item}"),
                "type": "file", "title": title,
                "attributes": {"ensure": ensure, "content": "shared\n"}})
        })
        .collect();
    serde_json::json!({ "tasks": tasks }).to_string()
}

const NO_TASKS: &str = r#"{"tasks": []}"#;

#[test]
fn a_resource_several_items_yield_stays_until_the_last_of_them_goes() {
    let bench = Bench::new().with_data("rogue");
    let a = bench.manifest("a.yaml", "thing:\n  a: {size: 1}\n");
    let ab = bench.manifest("ab.yaml", "thing:\n  a: {size: 1}\n  b: {size: 2}\n");
    let b = bench.manifest("b.yaml", "thing:\n  b: {size: 2}\n");
    let c = bench.manifest("c.yaml", "thing:\n  c: {size: 3}\n");
    let shared = |item, ensure| shared_answer(&[(item, "/srv/shared", ensure)]);
    // a makes the file; then b, added, yields it too (as b wants it
    // already: its task has nothing to do).
    answer(&bench, "create_configuration", &shared("a", "file"), 0);
    bench.ral("apply", &[&a]).expect(0);
    answer(&bench, "create_configuration", &shared("b", "file"), 0);
    bench.ral("apply", &[&ab]).expect(0);
    // a goes, its plugin answering no removal task: b still yields the
    // file, which stays recorded, neither forgotten nor removed.
    answer(&bench, "create_configuration", NO_TASKS, 0);
    for _ in 0..2 {
        let applied = bench.ral("apply", &[&b]);
        applied.expect(0);
        assert!(!applied.stdout.contains("forgotten"), "{}", applied.stdout);
        assert_eq!(
            bench.states(),
            ["file[/srv/shared] Applied", "thing[b] Applied"]
        );
    }
    assert_eq!(bench.sandbox.read("srv/shared"), "shared\n");
    // A removal task of one item may not take it from the other.
    answer(&bench, "create_configuration", &shared("a", "file"), 0);
    bench.ral("apply", &[&ab]).expect(0);
    answer(&bench, "create_configuration", &shared("a", "absent"), 0);
    bench.ral("apply", &[&b]).expect(2).stderr_has(
        "file[/srv/shared] (task '#1' of the plugin rogue for /thing/a) removes what /thing/b \
         still yields",
    );
    assert_eq!(bench.sandbox.read("srv/shared"), "shared\n");
    answer(&bench, "create_configuration", NO_TASKS, 0);
    bench.ral("apply", &[&b]).expect(0);
    // When the last item that yields it goes, its removal decides: it
    // leaves the file, which is forgotten, left as it is.
    bench
        .ral("apply", &["--destroy", &c])
        .expect(0)
        .stdout_has("= file[/srv/shared] was only forgotten, left as it is: /thing/b made it");
    assert_eq!(bench.states(), ["thing[c] Applied"]);
    assert_eq!(bench.sandbox.read("srv/shared"), "shared\n");
}

#[test]
fn an_item_answering_anew_without_a_shared_resource_lets_go_of_it_alone() {
    let bench = Bench::new().with_data("rogue");
    let a = bench.manifest("a.yaml", "thing:\n  a: {size: 1}\n");
    let ab = bench.manifest("ab.yaml", "thing:\n  a: {size: 1}\n  b: {size: 2}\n");
    let changed = bench.manifest("ab2.yaml", "thing:\n  a: {size: 5}\n  b: {size: 2}\n");
    let a_changed = bench.manifest("a2.yaml", "thing:\n  a: {size: 5}\n");
    answer(
        &bench,
        "create_configuration",
        &shared_answer(&[("a", "/srv/shared", "file")]),
        0,
    );
    bench.ral("apply", &[&a]).expect(0);
    answer(
        &bench,
        "create_configuration",
        &shared_answer(&[("b", "/srv/shared", "file")]),
        0,
    );
    bench.ral("apply", &[&ab]).expect(0);
    // a changes, and its new answer no longer names the file: b still
    // yields it, so it stays.
    answer(
        &bench,
        "create_configuration",
        &shared_answer(&[("a", "/srv/a2", "file")]),
        0,
    );
    bench.ral("apply", &[&changed]).expect(0);
    assert_eq!(
        bench.states(),
        [
            "file[/srv/a2] Applied",
            "file[/srv/shared] Applied",
            "thing[a] Applied",
            "thing[b] Applied"
        ]
    );
    // a applied lets go of it: once b goes, nothing yields it any more.
    answer(&bench, "create_configuration", NO_TASKS, 0);
    bench
        .ral("apply", &[&a_changed])
        .expect(0)
        .stdout_has("= file[/srv/shared] was only forgotten, left as it is: /thing/b made it");
    assert_eq!(
        bench.states(),
        ["file[/srv/a2] Applied", "thing[a] Applied"]
    );
    assert_eq!(bench.sandbox.read("srv/shared"), "shared\n");
}

#[test]
fn what_an_item_made_stays_while_its_plugin_is_not_found() {
    let bench = Bench::new().with_data("rogue");
    let m = bench.manifest(
        "thing.yaml",
        "thing:\n  a: {size: 3}\nfile:\n  /srv/keep: {ensure: file}\n",
    );
    answer(
        &bench,
        "create_configuration",
        &files_answer(&[("/srv/r1", "one\n")]),
        0,
    );
    bench.ral("apply", &[&m]).expect(0);
    // The plugin's directory is not given this time, and the item is
    // dropped: nothing can be decided about what it made.
    let keep = bench.manifest("keep.yaml", "file:\n  /srv/keep: {ensure: file}\n");
    run(&mut bench.sandbox.ral_command("apply", &[&keep]))
        .expect(0)
        .stderr_has("the resources made for /thing/a stay as they are");
    assert_eq!(bench.sandbox.read("srv/r1"), "one\n");
    assert!(bench.states().contains(&"file[/srv/r1] Applied".to_owned()));
    // Forgetting the item forgets what it made: left as it is.
    run(&mut bench.sandbox.ral_command("state", &["forget", "thing[a]"])).expect(0);
    assert_eq!(bench.states(), ["file[/srv/keep] Applied"]);
    run(&mut bench.sandbox.ral_command("apply", &[&keep])).expect(0);
    assert_eq!(bench.sandbox.read("srv/r1"), "one\n");
}

#[test]
fn replacing_what_another_present_item_made_is_refused() {
    let bench = Bench::new();
    let m = bench.manifest("site.yaml", TWO_SITES);
    bench.ral("apply", &[&m]).expect(0);
    // shop changes and would take over blog's page, which blog (applied,
    // so not declared in this plan) made and still has.
    let taking = TWO_SITES.replace(
        "    content: hello shop\n",
        "    content: taken\n    replaces: \"file:/srv/blog/index.html\"\n",
    );
    let m2 = bench.manifest("site2.yaml", &taking);
    bench.ral("apply", &[&m2]).expect(2).stderr_has(
        "replaces file::file[/srv/blog/index.html], which /site/blog made and still has",
    );
    assert_eq!(bench.sandbox.read("srv/index.html"), "hello shop\n");
    assert!(bench
        .states()
        .contains(&"file[/srv/blog/index.html] Applied".to_owned()));
}

#[test]
fn a_validation_error_cannot_forge_a_line() {
    let bench = Bench::new().with_data("rogue");
    let m = bench.manifest("thing.yaml", "thing:\n  a: {size: 3}\n");
    answer(
        &bench,
        "validate_model",
        "{\"errors\": [{\"vpath\": \"/x\\nral: forged\", \"message\": \"m\\nral: forged too\"}]}",
        0,
    );
    let planned = bench.ral("plan", &[&m]);
    planned.expect(2);
    assert!(
        !planned
            .stderr
            .lines()
            .any(|line| line.starts_with("ral: forged")),
        "{}",
        planned.stderr
    );
}

#[test]
fn a_plugin_cannot_show_a_sensitive_value_of_the_model() {
    let bench = Bench::new().with_data("rogue");
    let m = bench.manifest(
        "thing.yaml",
        "thing:\n  a: {size: 3, token: tok-5ecret-77}\n",
    );
    let leaks = |run: &Run| {
        assert!(!run.stdout.contains("5ecret"), "{}", run.stdout);
        assert!(!run.stderr.contains("5ecret"), "{}", run.stderr);
    };
    for (answer_text, expected) in [
        (
            r#"{"tasks": [{"kind": "remote", "item": "/thing/a", "command": ["echo", "--token=tok-5ecret-77"]}]}"#,
            "puts a sensitive value on a command line",
        ),
        (
            r#"{"tasks": [{"kind": "config", "item": "/thing/a", "type": "file", "title": "/srv/x", "attributes": {"content": "tok-5ecret-77"}}]}"#,
            "puts a sensitive value in 'content' of file, which is not sensitive",
        ),
        (
            r#"{"tasks": [{"kind": "config", "item": "/thing/a", "type": "file", "title": "/srv/tok-5ecret-77"}]}"#,
            "puts a sensitive value in a resource's title",
        ),
        (
            r#"{"error": {"message": "no, tok-5ecret-77"}}"#,
            "plugin rogue: create_configuration: no, [redacted]",
        ),
    ] {
        answer(&bench, "create_configuration", answer_text, 0);
        let planned = bench.ral("plan", &[&m]);
        planned.expect(2).stderr_has(expected);
        leaks(&planned);
    }
    // A description quoting it is shown redacted.
    answer(
        &bench,
        "create_configuration",
        r#"{"tasks": [{"kind": "callback", "item": "/thing/a", "callback": "c", "description": "uses tok-5ecret-77"}]}"#,
        0,
    );
    let planned = bench.ral("plan", &[&m]);
    planned.expect(0).stdout_has("uses [redacted]");
    leaks(&planned);
    let json = bench.ral("plan", &["-j", &m]);
    leaks(&json);
    // A line of a value of several lines is as much a secret.
    let m = bench.manifest(
        "thing.yaml",
        "thing:\n  a: {size: 3, token: \"tok-5ecret-77\\nmore-5ecret\"}\n",
    );
    answer(
        &bench,
        "create_configuration",
        r#"{"tasks": [{"kind": "remote", "item": "/thing/a", "command": ["echo", "more-5ecret"]}]}"#,
        0,
    );
    let planned = bench.ral("plan", &[&m]);
    planned
        .expect(2)
        .stderr_has("puts a sensitive value on a command line");
    leaks(&planned);
    // A command that comes upon the value elsewhere and prints it: its
    // output is logged redacted, as its stderr is.
    let token = bench.sandbox.root().join("token");
    std::fs::write(&token, "tok-5ecret-77\nmore-5ecret\n").unwrap();
    answer(
        &bench,
        "create_configuration",
        &format!(
            r#"{{"tasks": [{{"kind": "remote", "item": "/thing/a", "command": ["cat", "{}"]}}]}}"#,
            token.display()
        ),
        0,
    );
    let applied = bench.ral("apply", &["-l", "info", &m]);
    applied
        .expect(0)
        .stderr_has("/thing/a: [redacted]\n")
        .stderr_has("/thing/a: [redacted]\n");
    leaks(&applied);
}

#[test]
fn a_plugin_sees_sensitive_values_of_its_own_items_only() {
    let bench = Bench::new().with_data("rogue");
    let m = bench.manifest(
        "thing.yaml",
        "thing:\n  a: {size: 3, token: own-t0ken}\nuser:\n  carol: {password: '$6$abc$HASHED'}\n",
    );
    bench.ral("plan", &[&m]).expect(0);
    let input = rogue_input(&bench, "create_configuration");
    let items = input["model"]["items"].as_array().unwrap();
    let carol = items.iter().find(|i| i["vpath"] == "/user/carol").unwrap();
    assert_eq!(carol["properties"]["password"], "[redacted]", "{carol}");
    let thing = items.iter().find(|i| i["vpath"] == "/thing/a").unwrap();
    assert_eq!(thing["properties"]["token"], "own-t0ken");
    assert!(!bench
        .sandbox
        .read("rogue/create_configuration.in")
        .contains("HASHED"));
}

#[test]
fn a_plugin_s_config_task_notifies_a_manifest_resource() {
    let mut bench = Bench::new().with_data("rogue");
    bench.data.push(crate::plans::plans_dir());
    let tasks = |value: &str| {
        format!(
            "{{\"tasks\": [{{\"kind\": \"config\", \"item\": \"/thing/a\", \"id\": \"conf\", \
             \"type\": \"alpha\", \"title\": \"a1\", \"attributes\": {{\"value\": \"{value}\"}}, \
             \"notify\": [\"svc[web]\"]}}]}}"
        )
    };
    let m = bench.manifest(
        "m.yaml",
        "thing:\n  a: {size: 3}\nsvc:\n  web: {value: v}\n",
    );
    answer(&bench, "create_configuration", &tasks("one"), 0);
    bench.ral("apply", &[&m]).expect(0);
    let refreshed = || bench.sandbox.read("refreshed.log");
    assert_eq!(refreshed(), "", "made in the same run: nothing to refresh");
    answer(&bench, "create_configuration", &tasks("two"), 0);
    bench
        .ral("apply", &[&m])
        .expect(0)
        .stdout_has("Success ^ svc[web]");
    assert_eq!(refreshed(), "svc web ensure,value\n");
    // A notify naming no task, resource or item of the answer is refused.
    answer(
        &bench,
        "create_configuration",
        &tasks("three").replace("svc[web]", "nope"),
        0,
    );
    bench
        .ral("plan", &[&m])
        .expect(2)
        .stderr_has("task 'conf' notify 'nope', which is no task id of this answer");
}
