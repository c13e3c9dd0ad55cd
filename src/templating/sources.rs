//! Where variables come from besides a manifest's `vars:`, read into
//! [`Layer`]s in Ansible's order of precedence (lowest first):
//!
//! 1. the inventory's `vars:` of each group the host is in (`all` first,
//!    a parent before its children, groups of one depth by name);
//! 2. `group_vars/all`, then `group_vars/GROUP` of those groups in the
//!    same order, beside the inventory;
//! 3. the host's own variables in the inventory;
//! 4. `host_vars/HOST` beside the inventory;
//! 5. `-e KEY=VALUE`, `-e @FILE` and `-e '{JSON}'`, in the order given.
//!
//! A `group_vars` or `host_vars` entry is a file `NAME`, `NAME.yaml`,
//! `NAME.yml` or `NAME.json`, or a directory `NAME/` whose such files
//! are read in name order. The manifests' own `vars:` are below all of
//! these: they are the manifests' defaults, as a role's defaults are in
//! Ansible.

use std::path::{Path, PathBuf};

use marked_yaml::types::Node;

use crate::error::{Error, Problem};
use crate::remote::inventory::{Host, Inventory};
use crate::yaml_doc;

pub use super::scope::is_variable_name;
use super::scope::Layer;

/// The largest variables file read.
pub const MAX_FILE: usize = 4 << 20;

/// The layers `-e` gives, one per word, in order.
pub fn extra_vars(words: &[String]) -> Result<Vec<Layer>, Error> {
    let mut layers = Vec::new();
    for word in words {
        let layer = extra_var(word)?;
        // Checked here, once, rather than for every host rendered.
        if let Some((name, _, _)) = layer.vars.iter().find(|(name, _, _)| {
            super::RESERVED.contains(&name.as_str())
                && !super::scope::OVERRIDABLE.contains(&name.as_str())
        }) {
            return Err(Error::Manifest {
                problems: vec![Problem {
                    file: PathBuf::from("-e"),
                    line: 0,
                    message: format!(
                        "'{}' is a name every template has; a variable cannot take it",
                        crate::text::escape(name)
                    ),
                }],
            });
        }
        layers.push(layer);
    }
    Ok(layers)
}

fn extra_var(word: &str) -> Result<Layer, Error> {
    let problem = |message: String| Error::Manifest {
        problems: vec![Problem {
            file: PathBuf::from("-e"),
            line: 0,
            message,
        }],
    };
    if let Some(file) = word.strip_prefix('@') {
        let path = PathBuf::from(file);
        let vars = read_file(&path).map_err(|p| Error::Manifest { problems: vec![p] })?;
        return Ok(Layer {
            command_line: true,
            source: format!("-e @{file}"),
            file: path,
            vars,
        });
    }
    if word.trim_start().starts_with('{') {
        let vars =
            parse_text(word, Path::new("-e")).map_err(|p| Error::Manifest { problems: vec![p] })?;
        return Ok(Layer {
            command_line: true,
            source: "-e".to_owned(),
            file: PathBuf::from("-e"),
            vars,
        });
    }
    let Some((name, value)) = word.split_once('=') else {
        return Err(problem(format!(
            "'{}': expected KEY=VALUE, @FILE or a JSON mapping",
            crate::text::escape(word)
        )));
    };
    if !is_variable_name(name) {
        return Err(problem(format!(
            "'{}' is not a variable name (letters, digits and '_', not starting with a digit)",
            crate::text::escape(name)
        )));
    }
    Ok(Layer {
        command_line: true,
        source: "-e".to_owned(),
        file: PathBuf::from("-e"),
        vars: vec![(name.to_owned(), typed_scalar(value), 0)],
    })
}

/// A `-e KEY=VALUE` value, typed as a YAML inventory's unquoted value:
/// `true`/`false`, a number or null are typed, anything else is text (so
/// `-e enabled=false` is false, not the true text "false"; a JSON mapping
/// gives a text that looks like one: `-e '{"port": "80"}'`).
fn typed_scalar(value: &str) -> serde_json::Value {
    // `-e name=` is the empty text, not null.
    if value.trim().is_empty() {
        return serde_json::Value::String(value.to_owned());
    }
    yaml_doc::typed_plain(value)
}

/// The layers an inventory gives `host`: its groups' and its own
/// variables, and the `group_vars`/`host_vars` files beside it.
pub fn inventory_layers(inventory: &Inventory, host: &Host) -> Result<Vec<Layer>, Error> {
    let file = inventory.file();
    let dir = file.parent().unwrap_or(Path::new("."));
    let shown = file.display().to_string();
    let mut layers = Vec::new();
    let mut own = None;
    for layer in &host.var_layers {
        let made = Layer {
            command_line: false,
            source: match &layer.group {
                Some(group) => format!("{shown} (group {group})"),
                None => format!("{shown} (host {})", host.name),
            },
            file: file.to_path_buf(),
            vars: layer.vars.clone(),
        };
        match layer.group {
            Some(_) => layers.push(made),
            None => own = Some(made),
        }
    }
    for group in &host.group_order {
        layers.extend(entry_layers(&dir.join("group_vars"), group)?);
    }
    layers.extend(own);
    layers.extend(entry_layers(&dir.join("host_vars"), &host.name)?);
    Ok(layers)
}

/// The layers of `DIR/NAME` (a file, with or without an extension, or a
/// directory of files).
fn entry_layers(dir: &Path, name: &str) -> Result<Vec<Layer>, Error> {
    let mut files = Vec::new();
    for candidate in [
        name.to_owned(),
        format!("{name}.yaml"),
        format!("{name}.yml"),
        format!("{name}.json"),
    ] {
        let path = dir.join(&candidate);
        if path.is_file() {
            files.push(path);
        }
    }
    let whole = dir.join(name);
    if whole.is_dir() {
        let mut inside: Vec<PathBuf> = std::fs::read_dir(&whole)
            .map_err(|e| Error::io(format!("reading {}", whole.display()), e))?
            .filter_map(|entry| entry.ok().map(|e| e.path()))
            .filter(|path| {
                path.is_file()
                    && path
                        .extension()
                        .is_some_and(|e| e == "yaml" || e == "yml" || e == "json")
            })
            .collect();
        inside.sort();
        files.extend(inside);
    }
    let mut layers = Vec::new();
    for path in files {
        let vars = read_file(&path).map_err(|p| Error::Manifest { problems: vec![p] })?;
        layers.push(Layer {
            command_line: false,
            source: path.display().to_string(),
            file: path,
            vars,
        });
    }
    Ok(layers)
}

/// A variables file: a YAML (or JSON) mapping of names to values.
pub fn read_file(path: &Path) -> Result<Vec<(String, serde_json::Value, usize)>, Problem> {
    let at = |line: usize, message: String| Problem {
        file: path.to_path_buf(),
        line,
        message,
    };
    let bytes = crate::bounded_read::read_file(path, MAX_FILE, crate::bounded_read::Links::Follow)
        .map_err(|e| at(0, format!("cannot read the variables: {e}")))?;
    let text = String::from_utf8(bytes)
        .map_err(|_| at(0, "the variables are not UTF-8 text".to_owned()))?;
    parse_text(&text, path)
}

/// Variables from the text of a YAML or JSON mapping.
fn parse_text(text: &str, file: &Path) -> Result<Vec<(String, serde_json::Value, usize)>, Problem> {
    let at = |line: usize, message: String| Problem {
        file: file.to_path_buf(),
        line,
        message,
    };
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    if let Some((line, message)) = yaml_doc::shape_problem(text, "a variables file", 64) {
        return Err(at(line, message));
    }
    if text.trim().is_empty() {
        return Ok(Vec::new());
    }
    let options = marked_yaml::LoaderOptions::default()
        .error_on_duplicate_keys(true)
        .prevent_coercion(true)
        .toplevel_mapping();
    let root = marked_yaml::parse_yaml_with_options(0, text, options).map_err(|e| {
        let (line, message) = yaml_doc::load_problem(e, "variables must be a mapping NAME: VALUE");
        at(line, message)
    })?;
    let Node::Mapping(map) = &root else {
        return Err(at(1, "variables must be a mapping NAME: VALUE".to_owned()));
    };
    let mut vars = Vec::new();
    for (key, value) in map.iter() {
        let line = yaml_doc::line_of(key);
        if !is_variable_name(key.as_str()) {
            return Err(at(
                line,
                format!(
                    "'{}' is not a variable name (letters, digits and '_', not starting with a \
                     digit)",
                    crate::text::escape(key.as_str())
                ),
            ));
        }
        vars.push((key.as_str().to_owned(), yaml_doc::typed_json(value), line));
    }
    Ok(vars)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn extra_vars_take_pairs_files_and_json() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("extra.yaml");
        std::fs::write(&file, "port: 81\nname: 'x'\nlist: [1, two]\n").unwrap();
        let words = [
            "a=b=c".to_owned(),
            format!("@{}", file.display()),
            r#"{"port": 82}"#.to_owned(),
        ];
        let layers = extra_vars(&words).unwrap();
        assert_eq!(layers[0].vars, [("a".to_owned(), json!("b=c"), 0)]);
        let typed = extra_vars(&[
            "on=false".to_owned(),
            "n=5000".to_owned(),
            "t=x: y".to_owned(),
            "e=".to_owned(),
            "c=v2 # not a comment".to_owned(),
        ])
        .unwrap();
        let values: Vec<&serde_json::Value> = typed.iter().map(|l| &l.vars[0].1).collect();
        assert_eq!(
            values,
            [
                &json!(false),
                &json!(5000),
                &json!("x: y"),
                &json!(""),
                &json!("v2 # not a comment")
            ]
        );
        assert!(typed.iter().all(|l| l.command_line));
        // A reserved name is refused at once, but for the two -e may set.
        assert!(extra_vars(&["facts=1".to_owned()]).is_err());
        assert!(extra_vars(&["inventory_hostname=web1".to_owned()]).is_ok());
        assert_eq!(
            layers[1].vars,
            [
                ("port".to_owned(), json!(81), 1),
                ("name".to_owned(), json!("x"), 2),
                ("list".to_owned(), json!([1, "two"]), 3)
            ]
        );
        assert_eq!(layers[2].vars[0].1, json!(82));
        for wrong in ["novalue", "1x=2", "@/nonexistent/vars.yaml", "{not json"] {
            assert!(extra_vars(&[wrong.to_owned()]).is_err(), "{wrong}");
        }
    }

    #[test]
    fn group_and_host_files_come_in_ansible_order() {
        let dir = tempfile::tempdir().unwrap();
        let inventory = dir.path().join("hosts.yaml");
        std::fs::write(
            &inventory,
            "all:\n  vars: {port: 1, tier: all}\n  children:\n    web:\n      vars: {port: 2}\n      \
             hosts:\n        web1: {port: 3, own: yes}\n",
        )
        .unwrap();
        std::fs::create_dir_all(dir.path().join("group_vars/web")).unwrap();
        std::fs::create_dir_all(dir.path().join("host_vars")).unwrap();
        std::fs::write(
            dir.path().join("group_vars/all.yaml"),
            "tier: files\nport: 10\n",
        )
        .unwrap();
        std::fs::write(dir.path().join("group_vars/web/a.yml"), "port: 20\n").unwrap();
        // Only YAML and JSON files of a directory are variables.
        std::fs::write(dir.path().join("group_vars/web/README.txt"), "not: [yaml\n").unwrap();
        std::fs::create_dir(dir.path().join("group_vars/web/old.yaml.d")).unwrap();
        std::fs::write(dir.path().join("host_vars/web1.json"), "{\"port\": 30}").unwrap();
        let inventory = Inventory::load(&inventory).unwrap();
        let host = inventory.host("web1").unwrap();
        let layers = inventory_layers(&inventory, host).unwrap();
        let sources: Vec<String> = layers
            .iter()
            .map(|l| l.source.replace(&format!("{}/", dir.path().display()), ""))
            .collect();
        assert_eq!(
            sources,
            [
                "hosts.yaml (group all)",
                "hosts.yaml (group web)",
                "group_vars/all.yaml",
                "group_vars/web/a.yml",
                "hosts.yaml (host web1)",
                "host_vars/web1.json"
            ]
        );
        let ports: Vec<serde_json::Value> = layers
            .iter()
            .filter_map(|l| l.vars.iter().find(|v| v.0 == "port").map(|v| v.1.clone()))
            .collect();
        assert_eq!(
            ports,
            [
                json!(1),
                json!(2),
                json!(10),
                json!(20),
                json!(3),
                json!(30)
            ]
        );
    }

    #[test]
    fn a_bad_variables_file_is_named_with_its_line() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("v.yaml");
        std::fs::write(&file, "a: 1\na: 2\n").unwrap();
        let problem = read_file(&file).unwrap_err();
        assert_eq!(problem.line, 2, "{problem:?}");
        std::fs::write(&file, "- a\n").unwrap();
        assert!(read_file(&file).is_err());
        std::fs::write(&file, "9lives: 1\n").unwrap();
        assert!(read_file(&file)
            .unwrap_err()
            .message
            .contains("not a variable name"));
    }
}
