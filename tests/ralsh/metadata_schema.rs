//! schemas/provider-metadata.schema.json and the Rust metadata types must
//! agree: on every bundled and fixture metadata file, and on a table of
//! good and bad snippets, the schema accepts exactly what the parser accepts.

use std::path::{Path, PathBuf};

use ral::metadata::Metadata;
use serde_json::Value as Json;

use crate::support::{fixtures_dir, metadata_schema};

fn schema_accepts(text: &str) -> bool {
    match serde_yaml::from_str::<Json>(text) {
        Ok(doc) => metadata_schema().is_valid(&doc),
        Err(_) => false,
    }
}

fn rust_accepts(text: &str) -> bool {
    Metadata::parse(text, Path::new("/x/fixture.yaml")).is_ok()
}

/// Every metadata document we ship or test with: `.yaml` files, and the
/// describe output of providers without one.
fn metadata_documents() -> Vec<(PathBuf, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dirs = [
        root.join("providers"),
        fixtures_dir().join("providers"),
        fixtures_dir().join("broken/providers"),
        fixtures_dir().join("ambiguous/providers"),
        fixtures_dir().join("check/providers"),
    ];
    let mut docs = Vec::new();
    for dir in dirs {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        entries.sort();
        for path in entries {
            let ext = path.extension().and_then(|e| e.to_str());
            if ext == Some("yaml") {
                docs.push((path.clone(), std::fs::read_to_string(&path).unwrap()));
            } else if ext == Some("prov") && !path.with_extension("yaml").exists() {
                let output = std::process::Command::new(&path)
                    .arg("ral_action=describe")
                    .env("RALSH_ROOT_DIR", "/nonexistent")
                    .output()
                    .unwrap();
                if output.status.success() {
                    docs.push((path.clone(), String::from_utf8(output.stdout).unwrap()));
                }
            }
        }
    }
    docs
}

#[test]
fn every_shipped_and_fixture_metadata_file_agrees_with_the_schema() {
    let docs = metadata_documents();
    assert!(docs.len() >= 15, "found only {} documents", docs.len());
    let known_bad = ["bad_yaml.yaml", "unknown_key.yaml", "unknown_invoke.yaml"];
    for (path, text) in &docs {
        let name = path.file_name().unwrap().to_str().unwrap();
        let schema = schema_accepts(text);
        assert_eq!(
            schema,
            rust_accepts(text),
            "{}: schema and parser disagree",
            path.display()
        );
        assert_eq!(schema, !known_bad.contains(&name), "{}", path.display());
    }
}

#[test]
fn schema_and_parser_agree_on_good_and_bad_snippets() {
    let base = "provider:\n  type: thing\n  invoke: simple\n  actions: [list, find]\n  suitable: true\n  attributes:\n    name: {}\n";
    let cases: &[(&str, &str, bool)] = &[
        ("", "", true),
        ("suitable: true", "suitable: false", true),
        (
            "suitable: true",
            "suitable: {commands: [sh, 'not foo', /bin/ls]}",
            true,
        ),
        ("suitable: true", "suitable: {commands: 5}", false),
        ("suitable: true", "suitable: {commands: ['not ']}", false),
        (
            "suitable: true",
            "suitable: {commands: [sh], extra: 1}",
            false,
        ),
        ("suitable: true", "suitable: yes please", false),
        ("actions: [list, find]", "actions: [find]", false),
        ("actions: [list, find]", "actions: [list, list]", false),
        ("actions: [list, find]", "actions: [list, frob]", false),
        ("invoke: simple", "invoke: json", false),
        ("type: thing", "type: two words", false),
        ("type: thing", "type: thing\n  name: other_name", true),
        ("type: thing", "type: thing\n  name: 'bad name'", false),
        (
            "type: thing",
            "type: thing\n  features: [supports_noop]",
            true,
        ),
        ("type: thing", "type: thing\n  features: [flying]", false),
        (
            "type: thing",
            "type: thing\n  features: [names_are_paths, supports_noop]",
            true,
        ),
        ("type: thing", "type: thing\n  desc: 5", false),
        ("type: thing", "type: thing\n  sensitive_in: env", true),
        ("type: thing", "type: thing\n  sensitive_in: args", true),
        ("type: thing", "type: thing\n  sensitive_in: argv", false),
        ("type: thing", "type: thing\n  sensitive_in: [env]", false),
        (
            "type: thing\n  invoke: simple\n  actions: [list, find]",
            "type: thing\n  invoke: json\n  actions: [get]\n  sensitive_in: env",
            false,
        ),
        (
            "type: thing\n  invoke: simple\n  actions: [list, find]",
            "type: thing\n  invoke: json\n  actions: [get]\n  sensitive_in: args",
            true,
        ),
        ("type: thing", "type: thing\n  colour: blue", false),
        (
            "    name: {}",
            "    name: {desc: x, type: string, kind: r}",
            true,
        ),
        (
            "    name: {}",
            "    name: {}\n    on: {type: Boolean}",
            true,
        ),
        (
            "    name: {}",
            "    name: {}\n    tags: {type: 'ARRAY[ string ]'}",
            true,
        ),
        (
            "    name: {}",
            "    name: {}\n    e: {type: 'enum[a, b,c]'}",
            true,
        ),
        (
            "    name: {}",
            "    name: {}\n    e: {type: 'optional[integer[1, 5]]', required: true}",
            true,
        ),
        (
            "    name: {}",
            "    name: {}\n    e: {type: integer, default: 5, sensitive: true, kind: init}",
            true,
        ),
        ("    name: {}", "    name: {}\n    e: {required: 1}", false),
        (
            "    name: {}",
            "    name: {}\n    e: {sensitive: 'yes'}",
            false,
        ),
        ("    name: {}", "    name: {}\n    e: {type: 5}", false),
        (
            "    name: {}",
            "    name: {}\n    e: {type: 'enum[a,'}",
            false,
        ),
        ("    name: {}", "    name: {}\n    e: {kind: x}", false),
        (
            "    name: {}",
            "    name: {}\n    owner: {refers_to: user}",
            true,
        ),
        (
            "    name: {}",
            "    name: {}\n    groups: {type: 'array[string]', refers_to: group}",
            true,
        ),
        (
            "    name: {}",
            "    name: {}\n    owner: {refers_to: 'two words'}",
            false,
        ),
        (
            "    name: {}",
            "    name: {}\n    owner: {refers_to: 5}",
            false,
        ),
        (
            "    name: {}",
            "    name: {}\n    owner: {refers_to: ''}",
            false,
        ),
        ("    name: {}", "    name: {refers_to: user}", false),
        (
            "    name: {}",
            "    name: {}\n    gid: {type: integer, refers_to: group, refers_by: gid}",
            true,
        ),
        (
            "    name: {}",
            "    name: {}\n    gid: {refers_by: gid}",
            false,
        ),
        (
            "    name: {}",
            "    name: {}\n    gid: {refers_to: group, refers_by: 'g id'}",
            false,
        ),
        (
            "type: thing",
            "type: thing\n  removed_after: [user, file]",
            true,
        ),
        (
            "type: thing",
            "type: thing\n  removed_after: [user, user]",
            false,
        ),
        (
            "type: thing",
            "type: thing\n  removed_after: ['a b']",
            false,
        ),
        ("type: thing", "type: thing\n  removed_after: user", false),
        ("    name: {}", "    name: {desc: x, kind: x}", false),
        ("    name: {}", "    name: {}\n    e: {typo: x}", false),
        ("    name: {}", "    name: {}\n    e: null", false),
        ("    name: {}", "    name: {}\n    ral: {}", false),
        ("    name: {}", "    name: {}\n    ral_x: {}", false),
        ("    name: {}", "    name: {}\n    __x: {}", false),
        ("    name: {}", "    name: {}\n    'a-b': {}", false),
        ("    name: {}", "    title: {}", false),
        ("provider:", "other: 1\nprovider:", false),
    ];
    for (from, to, expected) in cases {
        let text = if from.is_empty() {
            base.to_owned()
        } else {
            base.replacen(from, to, 1)
        };
        assert!(base.contains(from), "case does not apply: {from:?}");
        assert_eq!(rust_accepts(&text), *expected, "parser on {to:?}");
        assert_eq!(schema_accepts(&text), *expected, "schema on {to:?}");
    }
    // The schema checks only the outline of type strings and cannot relate
    // one key to another; ral checks these, and the schema lets them pass.
    let parser_only: &[&str] = &[
        "e: {type: enum}",
        "e: {type: 'enum[]'}",
        "e: {type: 'enum[a b]'}",
        "e: {type: 'array[int]'}",
        "e: {type: 'integer[5, 1]'}",
        "e: {type: 'pattern[/(/]'}",
        "e: {type: integer, default: x}",
        "e: {default: 1, required: true}",
        "e: {kind: r, required: true}",
    ];
    for attribute in parser_only {
        let text = base.replace("    name: {}", &format!("    name: {{}}\n    {attribute}"));
        assert!(!rust_accepts(&text), "parser must reject {attribute}");
        assert!(schema_accepts(&text), "schema outline accepts {attribute}");
    }
    // Nor can it relate sensitive_in to the names and types of the
    // sensitive attributes it puts in the environment.
    let in_env = base.replace("type: thing", "type: thing\n  sensitive_in: env");
    for attribute in [
        "PATH: {sensitive: true}",
        "Password: {sensitive: true}",
        "keys: {sensitive: true, type: 'array[string]'}",
    ] {
        let text = in_env.replace("    name: {}", &format!("    name: {{}}\n    {attribute}"));
        assert!(!rust_accepts(&text), "parser must reject {attribute}");
        assert!(schema_accepts(&text), "schema outline accepts {attribute}");
        let text = base.replace("    name: {}", &format!("    name: {{}}\n    {attribute}"));
        assert!(rust_accepts(&text), "on the command line: {attribute}");
    }
    // Any ensure enum, as libral's service providers have.
    let services = base.replace(
        "    name: {}",
        "    name: {}\n    ensure: {type: 'enum[running, stopped]'}",
    );
    assert!(rust_accepts(&services) && schema_accepts(&services));
}

#[test]
fn bundled_providers_describe_themselves_as_their_yaml_says() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("providers");
    let mut checked = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("prov") {
            continue;
        }
        let output = std::process::Command::new(&path)
            .arg("ral_action=describe")
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap())
            // Where a native provider's script finds the program that
            // serves it, as ral tells it.
            .env("RALSH_NATIVE_PROGRAM", env!("CARGO_BIN_EXE_ral-provider"))
            .env("RALSH_ROOT_DIR", "/nonexistent")
            // A native provider's script runs this build's ral-provider.
            .env("RALSH_NATIVE_PROGRAM", env!("CARGO_BIN_EXE_ral-provider"))
            .output()
            .unwrap();
        assert!(
            output.status.success() && output.stderr.is_empty(),
            "{}",
            path.display()
        );
        let described = Metadata::parse(&String::from_utf8(output.stdout).unwrap(), &path).unwrap();
        let yaml = std::fs::read_to_string(path.with_extension("yaml")).unwrap();
        assert_eq!(
            described,
            Metadata::parse(&yaml, &path).unwrap(),
            "{}",
            path.display()
        );
        checked += 1;
    }
    assert!(checked >= 3);
}
