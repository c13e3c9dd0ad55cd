//! `ralsh --yaml`: resources as a manifest (TYPE, NAME, attributes) that
//! reads back, each scalar's text converted by the attribute's type as the
//! command line converts it, as exactly the values ralsh read.

use std::collections::BTreeMap;

use ral::types::{AttrType, Value};
use serde_json::Value as Json;
use serde_yaml::Value as Yaml;

use crate::support::{assert_same_tree, fixtures_dir, run, tree_snapshot, Run, Sandbox};

/// Each attribute's type, from `ralsh -j -e TYPE`.
fn types_of(sandbox: &Sandbox, query: &str) -> BTreeMap<String, AttrType> {
    let doc = sandbox.ralsh(&["-j", "-e", query]).expect(0).json();
    doc["providers"][0]["attributes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            let ty = AttrType::parse(a["type"].as_str().unwrap()).unwrap();
            (a["name"].as_str().unwrap().to_owned(), ty)
        })
        .collect()
}

fn text_of(node: &Yaml) -> String {
    match node {
        Yaml::String(text) => text.clone(),
        Yaml::Number(number) => number.to_string(),
        Yaml::Bool(flag) => flag.to_string(),
        other => panic!("not a scalar: {other:?}"),
    }
}

/// A node as the manifest reader converts it: a scalar's text with
/// `parse_cli`, a sequence element by element, a mapping as a hash of
/// texts, null only for an optional type.
fn convert(ty: &AttrType, node: &Yaml) -> Value {
    match (ty, node) {
        (AttrType::Optional(_), Yaml::Null) => Value::Null,
        (AttrType::Optional(inner), Yaml::Sequence(_) | Yaml::Mapping(_)) => convert(inner, node),
        (AttrType::Array(inner), Yaml::Sequence(items)) => {
            Value::Array(items.iter().map(|item| convert(inner, item)).collect())
        }
        (AttrType::Hash, Yaml::Mapping(map)) => Value::Hash(Box::new(
            map.iter()
                .map(|(key, item)| (text_of(key), Value::String(text_of(item))))
                .collect(),
        )),
        (_, scalar) => ty
            .parse_cli(&text_of(scalar))
            .unwrap_or_else(|e| panic!("{scalar:?} as {ty}: {e}")),
    }
}

/// The manifest on stdout, read back: TYPE, then each resource's
/// attributes as JSON (the form `ralsh -j` shows the values ralsh read).
fn read_back(run: &Run, types: &BTreeMap<String, AttrType>) -> (String, Vec<(String, Json)>) {
    let doc: serde_yaml::Mapping = serde_yaml::from_str(&run.stdout)
        .unwrap_or_else(|e| panic!("not YAML ({e}):\n{}", run.stdout));
    assert_eq!(doc.len(), 1, "one top key:\n{}", run.stdout);
    let (top, resources) = doc.into_iter().next().unwrap();
    let Yaml::Mapping(resources) = resources else {
        panic!("resources are a mapping:\n{}", run.stdout);
    };
    let resources = resources
        .into_iter()
        .map(|(name, attrs)| {
            let Yaml::Mapping(attrs) = attrs else {
                panic!("attributes are a mapping:\n{}", run.stdout);
            };
            let attrs: serde_json::Map<String, Json> = attrs
                .iter()
                .map(|(key, node)| {
                    let key = text_of(key);
                    let value = convert(&types[&key], node);
                    (key, Json::from(&value))
                })
                .collect();
            (text_of(&name), Json::Object(attrs))
        })
        .collect();
    (text_of(&top), resources)
}

/// What `ralsh -j TYPE` lists, without the names, the `ral` block and the
/// attributes the manifest leaves out.
fn listed(sandbox: &Sandbox, query: &str, left_out: &[&str]) -> Vec<(String, Json)> {
    let doc = sandbox.ralsh(&["-j", query]).expect(0).json();
    doc["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| {
            let mut attrs = item.as_object().unwrap().clone();
            let name = attrs.remove("name").unwrap();
            attrs.remove("ral");
            for key in left_out {
                attrs.remove(*key);
            }
            (name.as_str().unwrap().to_owned(), Json::Object(attrs))
        })
        .collect()
}

/// `ral plan` of the manifests ralsh printed (with the fixture providers)
/// has nothing to do.
#[track_caller]
fn plans_nothing(sandbox: &Sandbox, printed: &[&Run]) {
    let dir = tempfile::tempdir().unwrap();
    let paths: Vec<String> = printed
        .iter()
        .enumerate()
        .map(|(at, run)| {
            let path = dir.path().join(format!("m{at}.yaml"));
            std::fs::write(&path, &run.stdout).unwrap();
            path.to_str().unwrap().to_owned()
        })
        .collect();
    let fixtures = fixtures_dir();
    let mut args = vec!["--detailed-exitcodes", "-I", fixtures.to_str().unwrap()];
    args.extend(paths.iter().map(String::as_str));
    let count: usize = printed
        .iter()
        .map(|run| {
            let doc: serde_yaml::Mapping = serde_yaml::from_str(&run.stdout).unwrap();
            doc.values()
                .map(|resources| resources.as_mapping().unwrap().len())
                .sum::<usize>()
        })
        .sum();
    assert!(count > 0, "resources to plan");
    let plan = run(&mut sandbox.ral_command("plan", &args));
    plan.expect(0).stdout_has(&format!(
        "Plan: 0 to create, 0 to change, 0 to remove; {count} unchanged."
    ));
}

#[test]
fn values_of_every_type_read_back_as_ralsh_read_them() {
    let sandbox = Sandbox::new();
    sandbox.write(
        "list",
        "# simple\n\
         name: yes\n\
         ensure: present\n\
         port: 80\n\
         ratio: 0.5\n\
         mode: 0640\n\
         ports: 22 80\n\
         tags: yes '' ' x' 'x ' 'a: b' 0640 'a,b' null '~' '- x' \"it's\"\n\
         labels: 'a: b=yes' k= n=0640 'sp= x'\n\
         nice: -5\n\
         size: auto\n\
         enabled: true\n\
         uid: 1500\n\
         shell: /bin/bash\n\
         owner: a: b\n\
         password: hush\n\
         name: 0640\n\
         ensure: absent\n\
         nice:\n\
         size: 5\n\
         enabled: false\n\
         ratio: 1e300\n\
         tags:\n\
         labels:\n\
         owner: null\n\
         shell: ~\n\
         name: a: b\n\
         owner: 1500\n\
         ratio: -2\n\
         mode: 7777\n",
    );
    let types = types_of(&sandbox, "typed");
    let run = sandbox.ralsh(&["--yaml", "typed"]);
    run.expect(0)
        .stderr_has("typed::typed: sensitive attributes left out of the manifest")
        .stdout_has("\n  'yes':\n    ensure: present\n")
        .stdout_has("\n  '0640':\n")
        .stdout_has("    port: 80\n")
        .stdout_has("    enabled: false\n")
        .stdout_has("    mode: '0640'\n")
        .stdout_has("    nice: null\n")
        .stdout_has("    owner: 'null'\n")
        .stdout_has("    tags: []\n")
        .stdout_has("    labels: {}\n")
        .stdout_has("      - 'yes'\n      - ''\n      - ' x'\n      - 'x '\n      - 'a: b'\n");
    assert!(!run.stdout.contains("hush"), "{}", run.stdout);
    let (top, resources) = read_back(&run, &types);
    assert_eq!(top, "typed");
    assert_eq!(resources, listed(&sandbox, "typed", &["password"]));
    plans_nothing(&sandbox, &[&run]);
}

#[test]
fn text_a_provider_sends_as_json_reads_back_too() {
    let sandbox = Sandbox::new();
    let tags = [
        "",
        " x",
        "x ",
        "a: b",
        "yes",
        "0640",
        "l1\nl2\n",
        "tab\there",
        "\u{1b}[31m",
        "é ✓",
        "\u{202e}x",
        "'\"\\",
        "# c",
        "[a]",
        "{a}",
        "&a",
        "*a",
        "!a",
        "|",
        ">",
        "%",
        "@",
        "`",
    ];
    let state = serde_json::json!({"resources": [
        {"name": "one", "ensure": "present", "port": 80, "enabled": false, "ratio": 0.1,
         "tags": tags, "password": "hush"},
        {"name": "two words", "tags": [], "ratio": 1e-7},
    ]});
    sandbox.write("get.out", &state.to_string());
    let types = types_of(&sandbox, "jsonish");
    let run = sandbox.ralsh(&["-y", "jsonish"]);
    run.expect(0);
    assert!(
        !run.stdout.chars().any(|c| c == '\u{1b}' || c == '\u{202e}'),
        "control characters are escaped:\n{}",
        run.stdout
    );
    let (_, resources) = read_back(&run, &types);
    assert_eq!(resources, listed(&sandbox, "jsonish", &["password"]));
    plans_nothing(&sandbox, &[&run]);
}

#[test]
fn read_only_sensitive_and_undeclared_attributes_are_left_out() {
    let sandbox = Sandbox::new();
    sandbox.write(
        "list.out",
        "# simple\nname: a\nensure: present\ncolor: red\nserial: 42\ntoken: t\nbogus: x\n",
    );
    let run = sandbox.ralsh(&["-l", "info", "--yaml", "scripted"]);
    assert_eq!(
        run.expect(0).stdout,
        "scripted:\n  a:\n    ensure: present\n    color: red\n"
    );
    run.stderr_has("attributes the metadata does not declare left out of the manifest: bogus");
    // Nothing sensitive was there, so nothing is said about it.
    assert!(!run.stderr.contains("sensitive"), "{}", run.stderr);
    // A value that would read back as something else is left out too.
    sandbox.write("list", "# simple\nname: a\nport: eighty\nowner: me\n");
    let run = sandbox.ralsh(&["--yaml", "typed"]);
    assert_eq!(run.expect(0).stdout, "typed:\n  a:\n    owner: me\n");
    run.stderr_has(
        "typed::typed: attribute 'port' left out of the manifest for 1 resource(s) (resource \
         'a': its value 'eighty' would not read back as integer[1, 65535]: expected a decimal \
         integer)",
    );
}

#[test]
fn named_resources_in_the_order_given_and_missing_ones_exit_1() {
    let sandbox = Sandbox::new();
    sandbox.write("find.a", "# simple\nname: a\nensure: present\nport: 1\n");
    sandbox.write("find.b", "# simple\nname: b\nensure: absent\n");
    let run = sandbox.ralsh(&["--yaml", "typed", "b", "a", "b"]);
    assert_eq!(
        run.expect(0).stdout,
        "typed:\n  b:\n    ensure: absent\n  a:\n    ensure: present\n    port: 1\n"
    );
    // A missing name: the others are printed, the missing one named.
    let run = sandbox.ralsh(&["--yaml", "typed::typed", "a", "c", "d"]);
    assert_eq!(
        run.expect(1).stdout,
        "typed::typed:\n  a:\n    ensure: present\n    port: 1\n"
    );
    run.stderr_has("ralsh: typed::typed: no resource named 'c'")
        .stderr_has("ralsh: typed::typed: no resource named 'd'");
    // -a: an absent resource counts as missing, as for `ralsh TYPE NAME`.
    let run = sandbox.ralsh(&["-a", "--yaml", "typed", "b"]);
    assert_eq!(run.expect(1).stdout, "typed: {}\n");
    run.stderr_has("no resource named 'b'");
    // A name with `=` that is no ATTR=VALUE is a name.
    sandbox
        .ralsh(&["--yaml", "typed", "/x=y"])
        .expect(1)
        .stderr_has("no resource named '/x=y'");
}

#[test]
fn listings_empty_absent_and_failing() {
    let sandbox = Sandbox::new();
    sandbox.write("list", "# simple\n");
    let run = sandbox.ralsh(&["--yaml", "typed::typed"]);
    assert_eq!(run.expect(0).stdout, "typed::typed: {}\n");
    sandbox.write(
        "list",
        "# simple\nname: a\nensure: absent\nname: b\nensure: present\n",
    );
    let run = sandbox.ralsh(&["-a", "--yaml", "typed"]);
    assert_eq!(run.expect(0).stdout, "typed:\n  b:\n    ensure: present\n");
    // A listing that fails prints what came before, and no empty document
    // when nothing came: that is not an empty state.
    sandbox.write("list.out", "# simple\nname: a\nname: b\nbroken line\n");
    let run = sandbox.ralsh(&["--yaml", "scripted"]);
    assert_eq!(run.expect(2).stdout, "scripted:\n  a: {}\n");
    sandbox.write("list.out", "no header\n");
    let run = sandbox.ralsh(&["--yaml", "scripted"]);
    assert_eq!(run.expect(2).stdout, "");
}

#[test]
fn conflicts_are_usage_errors() {
    let sandbox = Sandbox::new();
    for args in [
        &["--yaml", "--json", "typed"][..],
        &["-y", "-j", "typed"],
        &["--yaml", "--noop", "typed", "a"],
        &["--yaml", "--explain", "typed"],
        &["--yaml"],
    ] {
        let run = sandbox.ralsh(args);
        run.expect(2);
        assert!(run.stderr.contains("error:"), "{args:?}: {}", run.stderr);
    }
    let run = sandbox.ralsh(&["--yaml", "typed", "a", "port=5"]);
    run.expect(2)
        .stderr_has("the argument '--yaml' cannot be used with 'port=5'");
    assert_eq!(run.stdout, "");
    assert!(sandbox.calls().is_empty(), "no provider ran");
}

#[test]
fn ral_plan_of_what_the_bundled_providers_print_plans_nothing() {
    let sandbox = Sandbox::seeded();
    // Text a YAML reader could take for something else.
    let append = |file: &str, lines: &str| {
        let text = sandbox.read(file) + lines;
        sandbox.write(file, &text);
    };
    append("etc/hosts", "10.0.0.9 yes 0640 # on: off, ~\n");
    append(
        "etc/passwd",
        "bob:x:1500:1500:Bob, yes #2:/home/bob:/bin/sh\n",
    );
    append("etc/shadow", "bob:$6$salt$hash:19000:0:99999:7:::\n");
    append("etc/group", "bob:x:1500:\nnull:x:1501:bob\n");
    append("etc/gshadow", "bob:!::\nnull:!::bob\n");
    let types = [
        "group",
        "user",
        "host::etc_hosts",
        "mount",
        "cron",
        "ssh_authorized_key",
        "service",
        "package",
    ];
    let runs: Vec<Run> = types
        .iter()
        .map(|query| sandbox.ralsh(&["--yaml", query]))
        .collect();
    for (query, run) in types.iter().zip(&runs) {
        run.expect(0);
        assert!(
            run.stdout.starts_with(&format!("{query}:\n")),
            "{}",
            run.stdout
        );
    }
    runs[1]
        .stderr_has("user::etc_passwd: sensitive attributes left out of the manifest")
        .stdout_has("    comment: 'Bob, yes #2'\n");
    assert!(!runs[1].stdout.contains("$6$"), "{}", runs[1].stdout);
    runs[2]
        .stdout_has("  'yes':\n")
        .stdout_has("    comment: 'on: off, ~'\n")
        .stdout_has("      - '0640'\n");
    let before = tree_snapshot(sandbox.root());
    plans_nothing(&sandbox, &runs.iter().collect::<Vec<_>>());
    assert_same_tree(&before, sandbox.root(), "ral plan");
}
