//! Embeds the bundled providers (`providers/`) in the binary, so that an
//! installed binary can write them out on first use wherever it was moved.

use std::fmt::Write as _;
use std::path::Path;

fn main() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("providers");
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .expect("providers/ must exist")
        .map(|entry| entry.expect("readable providers/ entry").file_name())
        .map(|name| name.into_string().expect("provider file names are UTF-8"))
        .filter(|name| name.ends_with(".prov") || name.ends_with(".yaml"))
        .collect();
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
    writeln!(
        source,
        "/// Digest of the bundled files.\npub const DIGEST: &str = \"{digest:016x}\";"
    )
    .unwrap();
    let out = Path::new(&std::env::var("OUT_DIR").unwrap()).join("bundled_providers.rs");
    std::fs::write(out, source).expect("write bundled_providers.rs");
}
