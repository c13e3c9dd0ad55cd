//! The library's modules form a straight line of layers: each may use only
//! the modules before it in `LAYERS` (and itself). The layout section of
//! docs/architecture.md gives the same order and the command that shows
//! the imports. Below them all is the SDK's crate (`crates/ral-sdk`),
//! whose own modules form a line too (`SDK_LAYERS`) and which depends on
//! none of the host's heavy crates.

use std::path::Path;

/// From the leaves up. The first five are the SDK's crate, which the
/// library re-exports under these names.
const LAYERS: &[&str] = &[
    "sdk",
    "native",
    "random",
    "text",
    "local_time",
    "error",
    "suggest",
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

/// The folders of src/ that group a layer's modules (docs/architecture.md
/// names them), with those modules, which the crate root re-exports under
/// their own names: a file in one is of the module below the folder.
const FOLDERS: &[(&str, &[&str])] = &[
    (
        "base",
        &[
            "error",
            "suggest",
            "yaml_doc",
            "yaml_stream",
            "quoting",
            "fnv",
            "types",
            "secrets",
            "bounded_read",
            "cache_dir",
            "store",
        ],
    ),
    (
        "model",
        &[
            "relations",
            "metadata",
            "plugin_meta",
            "log_line",
            "resource",
        ],
    ),
    (
        "providers",
        &[
            "provider",
            "withheld",
            "output_check",
            "bundled",
            "metadata_cache",
            "discovery",
        ],
    ),
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

/// The SDK crate's modules, from the leaves up.
const SDK_LAYERS: &[&str] = &[
    "random",
    "text",
    "local_time",
    "error",
    "log",
    "nss",
    "command",
    "provider",
    "files",
    "serve",
    "facts",
    "native",
];

/// What the SDK's root re-exports, by the module it comes from.
const SDK_REEXPORTS: &[(&str, &str)] = &[
    ("CallError", "error"),
    ("CallResult", "error"),
    ("Kind", "error"),
    ("Buffer", "log"),
    ("Level", "log"),
    ("Log", "log"),
    ("Convention", "provider"),
    ("Call", "provider"),
    ("Change", "provider"),
    ("Deadline", "provider"),
    ("Native", "provider"),
    ("Outcome", "provider"),
    ("Provider", "provider"),
    ("Resource", "provider"),
    ("Update", "provider"),
    ("RUN", "provider"),
    ("RUN_DONE", "provider"),
    ("error_entry", "provider"),
    ("testing", "provider"),
];

/// What the SDK's crate may depend on: what a provider needs, and none
/// of the host's SQLite, argument parser, progress bars or template engine.
const SDK_DEPENDENCIES: &[&str] = &[
    "indexmap",
    "jiff",
    "libc",
    "log",
    "rustix",
    "serde",
    "serde_json",
    "sha2",
    "shell-words",
    "tempfile",
];

/// Every `crate::NAME` a file mentions (each name of a grouped
/// `crate::{A, b::C}` too), as the module it comes from.
fn imports(text: &str, reexports: &[(&str, &str)]) -> Vec<String> {
    let ident = |s: &str| -> String {
        s.trim_start()
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    let mut names = Vec::new();
    for (at, _) in text.match_indices("crate::") {
        let rest = &text[at + 7..];
        match rest.strip_prefix('{') {
            Some(group) => {
                let mut depth = 0;
                let mut start = 0;
                for (i, c) in group.char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' if depth == 0 => {
                            names.push(ident(&group[start..i]));
                            break;
                        }
                        '}' => depth -= 1,
                        ',' if depth == 0 => {
                            names.push(ident(&group[start..i]));
                            start = i + 1;
                        }
                        _ => {}
                    }
                }
            }
            None => names.push(ident(rest)),
        }
    }
    names
        .into_iter()
        .filter(|name| !name.is_empty())
        .map(|name| {
            reexports
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
    let wrong = layering(&src, LAYERS, FOLDERS, REEXPORTS);
    assert!(wrong.is_empty(), "imports of a layer above: {wrong:#?}");
}

#[test]
fn no_module_of_the_sdk_imports_a_layer_above_it() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/ral-sdk/src");
    let wrong = layering(&src, SDK_LAYERS, &[], SDK_REEXPORTS);
    assert!(wrong.is_empty(), "imports of a layer above: {wrong:#?}");
}

/// The SDK's crate builds on its own: it names none of the host's
/// crates, and no code of the host's.
#[test]
fn the_sdk_depends_on_nothing_of_the_host() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/ral-sdk");
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let mut section = "";
    let mut wrong = Vec::new();
    for line in manifest.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            section = line;
        } else if section == "[dependencies]" && !line.is_empty() && !line.starts_with('#') {
            let name = line.split(['=', ' ']).next().unwrap();
            if !SDK_DEPENDENCIES.contains(&name) {
                wrong.push(format!("Cargo.toml depends on {name}"));
            }
        }
    }
    let mut all = Vec::new();
    files(&root.join("src"), &mut all);
    assert!(all.len() > 20, "{all:?}");
    for file in all {
        let text = std::fs::read_to_string(&file).unwrap();
        let code = text.lines().filter(|l| !l.trim_start().starts_with("//"));
        if code.into_iter().any(|line| line.contains("ral::")) {
            wrong.push(format!("{} uses the host's library", file.display()));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

/// The module `relative` (a path below src/) belongs to: its first
/// component, or its second below a layer's folder (which must list it);
/// the folder's own `mod.rs` counts as the folder.
fn module_of(relative: &Path, folders: &[(&str, &[&str])]) -> String {
    let mut parts = relative
        .components()
        .map(|part| part.as_os_str().to_str().unwrap().trim_end_matches(".rs"));
    let first = parts.next().unwrap();
    let Some((folder, modules)) = folders.iter().find(|(folder, _)| *folder == first) else {
        return first.to_owned();
    };
    match parts.next() {
        Some("mod") | None => folder.to_string(),
        Some(module) => {
            assert!(
                modules.contains(&module),
                "{}: {module} is not one of the modules of src/{folder}/",
                relative.display()
            );
            module.to_owned()
        }
    }
}

/// Each layer folder holds the modules of neighbouring layers, in the
/// order of `LAYERS`, and every one of them: a folder is a band of the
/// line, so that the tree shows the layers.
#[test]
fn each_folder_of_src_is_a_band_of_the_layers() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    for (folder, modules) in FOLDERS {
        let ranks: Vec<usize> = modules
            .iter()
            .map(|m| {
                LAYERS
                    .iter()
                    .position(|l| l == m)
                    .unwrap_or_else(|| panic!("{m}"))
            })
            .collect();
        let first = ranks[0];
        assert_eq!(
            ranks,
            (first..first + modules.len()).collect::<Vec<_>>(),
            "src/{folder}/ is not a band of LAYERS"
        );
        for module in *modules {
            let file = src.join(folder).join(format!("{module}.rs"));
            let dir = src.join(folder).join(module).join("mod.rs");
            assert!(
                file.is_file() || dir.is_file(),
                "{module} is not in src/{folder}/"
            );
        }
    }
    // Nothing of theirs is left at the top.
    for (_, modules) in FOLDERS {
        for module in *modules {
            assert!(
                !src.join(format!("{module}.rs")).exists(),
                "src/{module}.rs"
            );
            assert!(!src.join(module).exists(), "src/{module}/");
        }
    }
}

/// Each file's imports of modules after its own in `layers`.
fn layering(
    src: &Path,
    layers: &[&str],
    folders: &[(&str, &[&str])],
    reexports: &[(&str, &str)],
) -> Vec<String> {
    let mut all = Vec::new();
    files(src, &mut all);
    let mut wrong = Vec::new();
    for file in all {
        let relative = file.strip_prefix(src).unwrap();
        let module = module_of(relative, folders);
        if module == "lib" || module == "main" || folders.iter().any(|(f, _)| *f == module) {
            continue;
        }
        let rank = |name: &str| layers.iter().position(|layer| *layer == name);
        let own = rank(&module).unwrap_or_else(|| panic!("{module} is in no layer"));
        let text = std::fs::read_to_string(&file).unwrap();
        for used in imports(&text, reexports) {
            match rank(&used) {
                Some(other) if other > own => {
                    wrong.push(format!("{} uses crate::{used}", relative.display()))
                }
                Some(_) => {}
                None => panic!("{}: crate::{used} is in no layer", relative.display()),
            }
        }
    }
    wrong
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
