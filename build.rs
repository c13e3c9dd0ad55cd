//! Embeds the bundled providers (`providers/`) in the binary, so that an
//! installed binary can write them out on first use wherever it was moved.

use std::fmt::Write as _;
use std::path::Path;

fn main() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("providers");
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut names = provider_files(&dir, "");
    // The Python toolkit is a package: a directory of modules, which goes
    // along as NAME/FILE (but not the __pycache__ Python writes beside it).
    for package in packages(&dir) {
        println!("cargo:rerun-if-changed={}", dir.join(&package).display());
        names.extend(provider_files(&dir.join(&package), &format!("{package}/")));
    }
    names.sort();
    // FNV-1a over names and contents: a stable digest that names the cache
    // directory, so a changed provider never reuses an old extraction.
    let mut digest: u64 = 0xcbf2_9ce4_8422_2325;
    let mut source = String::from("/// Bundled provider files: (file name, contents).\npub static FILES: &[(&str, &[u8])] = &[\n");
    for name in &names {
        let path = dir.join(name);
        println!("cargo:rerun-if-changed={}", path.display());
        let contents = std::fs::read(&path).expect("readable provider file");
        for byte in name.bytes().chain([0]).chain(contents.iter().copied()) {
            digest ^= u64::from(byte);
            digest = digest.wrapping_mul(0x0100_0000_01b3);
        }
        writeln!(
            source,
            "    ({name:?}, include_bytes!({:?})),",
            path.display().to_string()
        )
        .unwrap();
    }
    source.push_str("];\n");
    // The model plugins (`plugins/`), written out beside `providers/`:
    // their names say where, relative to it.
    let plugins_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("plugins");
    println!("cargo:rerun-if-changed={}", plugins_dir.display());
    source.push_str("/// Bundled plugin files: (../plugins/NAME, contents).\npub static PLUGIN_FILES: &[(&str, &[u8])] = &[\n");
    let mut plugins: Vec<String> = std::fs::read_dir(&plugins_dir)
        .map(|entries| {
            entries
                .map(|entry| entry.expect("readable plugins/ entry").file_name())
                .map(|name| name.into_string().expect("plugin file names are UTF-8"))
                .filter(|name| name.ends_with(".plugin") || name.ends_with(".yaml"))
                .collect()
        })
        .unwrap_or_default();
    plugins.sort();
    for name in &plugins {
        let path = plugins_dir.join(name);
        println!("cargo:rerun-if-changed={}", path.display());
        let contents = std::fs::read(&path).expect("readable plugin file");
        let named = format!("../plugins/{name}");
        for byte in named.bytes().chain([0]).chain(contents.iter().copied()) {
            digest ^= u64::from(byte);
            digest = digest.wrapping_mul(0x0100_0000_01b3);
        }
        writeln!(
            source,
            "    ({named:?}, include_bytes!({:?})),",
            path.display().to_string()
        )
        .unwrap();
    }
    source.push_str("];\n");
    source.push_str(&types_table(&dir, &names));
    writeln!(
        source,
        "/// Digest of the bundled files.\npub const DIGEST: &str = \"{digest:016x}\";"
    )
    .unwrap();
    let out = Path::new(&std::env::var("OUT_DIR").unwrap()).join("bundled_providers.rs");
    std::fs::write(out, source).expect("write bundled_providers.rs");
}

/// The provider files directly in `dir` (scripts, metadata, Python
/// modules), each named `prefix` and its file name.
fn provider_files(dir: &Path, prefix: &str) -> Vec<String> {
    std::fs::read_dir(dir)
        .expect("providers/ must exist")
        .map(|entry| entry.expect("readable providers/ entry").file_name())
        .map(|name| name.into_string().expect("provider file names are UTF-8"))
        .filter(|name| {
            [".prov", ".yaml", ".py"]
                .iter()
                .any(|ext| name.ends_with(ext))
        })
        .map(|name| format!("{prefix}{name}"))
        .collect()
}

/// The Python packages in `dir`: its subdirectories with an `__init__.py`.
fn packages(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .expect("providers/ must exist")
        .map(|entry| entry.expect("readable providers/ entry").path())
        .filter(|path| path.join("__init__.py").is_file())
        .map(|path| {
            path.file_name()
                .and_then(|name| name.to_str())
                .expect("package names are UTF-8")
                .to_owned()
        })
        .collect()
}

/// The type of each bundled provider, read from its `.yaml` file, so that
/// `ralsh TYPE` knows without touching the disk which bundled providers (if
/// any) have that type. Every bundled provider must have a `.yaml`.
fn types_table(dir: &Path, names: &[String]) -> String {
    let providers: Vec<(String, String)> = names
        .iter()
        .filter_map(|name| name.strip_suffix(".prov").map(|stem| (name, stem)))
        .map(|(name, stem)| {
            let yaml = dir.join(format!("{stem}.yaml"));
            let text = std::fs::read_to_string(&yaml).unwrap_or_else(|e| {
                panic!("bundled provider {stem}.prov needs {}: {e}", yaml.display())
            });
            let kind = provider_type(&text)
                .unwrap_or_else(|| panic!("{}: no '  type: NAME' line", yaml.display()));
            (name.clone(), kind)
        })
        .collect();
    format!(
        "/// Each bundled provider file and its type.\npub static PROVIDER_TYPES: &[(&str, &str)] = &{providers:?};\n"
    )
}

/// The value of the first `  type:` line (the provider's type in the
/// metadata layout every bundled `.yaml` follows; a unit test checks the
/// table against the parsed metadata).
fn provider_type(yaml: &str) -> Option<String> {
    yaml.lines()
        .find_map(|line| line.strip_prefix("  type:"))
        .map(|value| {
            value
                .trim()
                .trim_matches(|c| c == '"' || c == '\'')
                .to_owned()
        })
        .filter(|value| !value.is_empty())
}
