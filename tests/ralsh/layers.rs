//! The library's modules form a straight line of layers: each may use only
//! the modules before it in `LAYERS` (and itself). The layout section of
//! docs/architecture.md gives the same order and the command that shows
//! the imports.

use std::path::Path;

/// From the leaves up.
const LAYERS: &[&str] = &[
    "error",
    "random",
    "text",
    "suggest",
    "local_time",
    "yaml_doc",
    "yaml_stream",
    "quoting",
    "fnv",
    "types",
    "secrets",
    "bounded_read",
    "cache_dir",
    "store",
    "relations",
    "metadata",
    "plugin_meta",
    "log_line",
    "resource",
    "sdk",
    "native",
    "provider",
    "withheld",
    "output_check",
    "bundled",
    "metadata_cache",
    "discovery",
    "process",
    "invoke",
    "remote",
    "host",
    "facts",
    "update",
    "plugin",
    "conformance",
    "converge",
    "templating",
    "render",
    "holo",
    "agent",
    "cli",
];

/// The modules the crate root re-exports from.
const REEXPORTS: &[(&str, &str)] = &[
    ("Error", "error"),
    ("Host", "host"),
    ("HostConfig", "host"),
    ("Provider", "provider"),
    ("Change", "resource"),
    ("Resource", "resource"),
    ("AttrType", "types"),
    ("Value", "types"),
];

/// Every `crate::NAME` a file mentions, as the module it comes from.
fn imports(text: &str) -> Vec<String> {
    text.match_indices("crate::")
        .map(|(at, _)| {
            let name: String = text[at + 7..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            REEXPORTS
                .iter()
                .find(|(item, _)| *item == name)
                .map_or(name, |(_, module)| module.to_string())
        })
        .collect()
}

fn files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            if path.file_name().unwrap() != "bin" {
                files(&path, out);
            }
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn no_module_imports_a_layer_above_it() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut all = Vec::new();
    files(&src, &mut all);
    let mut wrong = Vec::new();
    for file in all {
        let relative = file.strip_prefix(&src).unwrap();
        let module = relative
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_str()
            .unwrap()
            .trim_end_matches(".rs")
            .to_owned();
        if module == "lib" {
            continue;
        }
        let rank = |name: &str| LAYERS.iter().position(|layer| *layer == name);
        let own = rank(&module).unwrap_or_else(|| panic!("{module} is in no layer"));
        let text = std::fs::read_to_string(&file).unwrap();
        for used in imports(&text) {
            match rank(&used) {
                Some(other) if other > own => {
                    wrong.push(format!("{} uses crate::{used}", relative.display()))
                }
                Some(_) => {}
                None => panic!("{}: crate::{used} is in no layer", relative.display()),
            }
        }
    }
    assert!(wrong.is_empty(), "imports of a layer above: {wrong:#?}");
}

/// What the binaries must leave to the library: the state store and the
/// parts of a run that use it are `converge::run`'s and `converge::state`'s.
const NOT_FOR_BINARIES: &[&str] = &[
    "ral::store",
    "ral::converge::record",
    "ral::converge::ownership",
    "ral::converge::lifecycle",
];

#[test]
fn the_binaries_leave_the_store_to_the_library_and_share_code_through_it() {
    let bin = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/bin");
    let mut all = Vec::new();
    binaries(&bin, &mut all);
    assert!(all.len() > 10, "{all:?}");
    let mut wrong = Vec::new();
    for file in all {
        let text = std::fs::read_to_string(&file).unwrap();
        let relative = file.strip_prefix(&bin).unwrap().display().to_string();
        for used in NOT_FOR_BINARIES {
            if text.contains(used) {
                wrong.push(format!("{relative} uses {used}"));
            }
        }
        // Code both binaries need is a library module (`ral::cli`), not a
        // file compiled into each.
        if text.contains("#[path") {
            wrong.push(format!("{relative} includes a file by #[path]"));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

fn binaries(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            binaries(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}
