//! What is copied to a target: the directories the providers in use live
//! in (each provider with its `.yaml` and helper files) and the Python
//! toolkit, named by the digest of their content.
//!
//! A target keeps one directory per digest (`~/.cache/ral/DIGEST`, see
//! `script.rs`), so the files go over once and later runs only ask
//! whether they are there. The payload that writes them is a `sh` script:
//! a here-document per text file, octal `printf` for anything a
//! here-document cannot carry exactly (no final newline, a NUL byte, a
//! line equal to the delimiter), then the mode, and a `.complete` marker
//! as its last step. Each run checks the copy against the files' SHA-256
//! ([`Bundle::manifest`]) before it uses it.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use sha2::{Digest, Sha256};

use crate::bounded_read;
use crate::error::{Error, Result};
use crate::quoting::quote_word;
use crate::text::hex;

/// The most bytes a bundle may hold: providers and their helpers, not
/// data.
pub const MAX_BUNDLE: usize = 32 << 20;
/// The most bytes of the manifest, which travels on a target's command
/// line (Linux takes 128 KiB in one argument).
const MAX_MANIFEST: usize = 96 << 10;
/// The most bytes one file of a bundle may hold.
const MAX_FILE: usize = 8 << 20;
/// The name of ral's native providers' program in a bundle's directory.
pub const NATIVE_PROGRAM: &str = "ral-provider";
/// The most bytes of that program (a release build is well under 2 MiB;
/// a debug one, without its debug information, about 3).
pub(super) const MAX_PROGRAM: usize = 16 << 20;
/// Bytes per `printf` line of a file sent in octal.
const OCTAL_CHUNK: usize = 2048;
/// Each byte as the `\ooo` escape `printf` reads: looked up rather than
/// formatted, since the native program, megabytes, is sent this way to
/// every new target.
const OCTAL: [[u8; 4]; 256] = octal_escapes();

const fn octal_escapes() -> [[u8; 4]; 256] {
    let mut table = [[0; 4]; 256];
    let mut byte = 0;
    while byte < 256 {
        let (high, middle, low) = ((byte >> 6) as u8, ((byte >> 3) & 7) as u8, (byte & 7) as u8);
        table[byte] = [b'\\', b'0' + high, b'0' + middle, b'0' + low];
        byte += 1;
    }
    table
}

/// One file to copy.
#[derive(Debug, Clone)]
struct File {
    /// `dN/NAME`, below the bundle's directory.
    path: String,
    executable: bool,
    bytes: Vec<u8>,
}

/// The files of some local directories, each directory copied as `dN`.
#[derive(Debug, Clone)]
pub struct Bundle {
    /// Local directory → its name in the bundle.
    dirs: BTreeMap<PathBuf, String>,
    /// `dN/PACKAGE`: the Python packages in those directories.
    packages: Vec<String>,
    files: Vec<File>,
    digest: String,
    /// See [`Bundle::manifest`].
    manifest: String,
    /// Which of `files` is ral's native providers' program.
    program: Option<usize>,
    /// See [`Bundle::payload`]: made once, for the first target that
    /// needs it, and sent as it is to the others.
    payload: OnceLock<Vec<u8>>,
}

impl Bundle {
    /// Reads the regular files directly in each of `dirs` (not below
    /// them, and not hidden ones), and those of the Python packages there
    /// (a subdirectory with an `__init__.py`, such as the toolkit
    /// `ral_provider`), which travel with their directory. Links are
    /// followed, as the providers found through them are run.
    pub fn collect(dirs: &[PathBuf]) -> Result<Bundle> {
        Bundle::collect_with(dirs, None)
    }

    /// Like [`Bundle::collect`], and `native` (a directory of `dirs` and
    /// ral's native providers' program) puts the program in that
    /// directory's copy as `ral-provider`, where the native providers'
    /// scripts there run it.
    pub fn collect_with(dirs: &[PathBuf], native: Option<(&Path, &Path)>) -> Result<Bundle> {
        let mut unique: Vec<&PathBuf> = Vec::new();
        for dir in dirs {
            if !unique.contains(&dir) {
                unique.push(dir);
            }
        }
        let mut names = BTreeMap::new();
        let mut packages = Vec::new();
        let mut files = Vec::new();
        let mut total = 0;
        let mut program_at = None;
        for (index, dir) in unique.iter().enumerate() {
            let name = format!("d{index}");
            for package in read_files(dir, &name, &mut files, &mut total)? {
                let below = format!("{name}/{package}");
                read_files(&dir.join(&package), &below, &mut files, &mut total)?;
                packages.push(below);
            }
            if let Some((native_dir, program)) = native.filter(|(d, _)| *d == dir.as_path()) {
                files.retain(|file: &File| file.path != format!("{name}/{NATIVE_PROGRAM}"));
                read_program(
                    program,
                    &format!("{name}/{NATIVE_PROGRAM}"),
                    &mut files,
                    &mut total,
                )
                .map_err(|e| {
                    Error::io(
                        format!(
                            "copying ral's native providers' program {} with {} to targets",
                            program.display(),
                            native_dir.display()
                        ),
                        e,
                    )
                })?;
                program_at = Some(files.len() - 1);
            }
            names.insert((*dir).clone(), name);
        }
        let mut hasher = Sha256::new();
        for file in &files {
            hasher.update(file.path.as_bytes());
            hasher.update([0, u8::from(file.executable)]);
            hasher.update((file.bytes.len() as u64).to_le_bytes());
            hasher.update(&file.bytes);
        }
        let digest = hex(&hasher.finalize()[..16]);
        let manifest = files
            .iter()
            .map(|file| format!("{}  {}", hex(&Sha256::digest(&file.bytes)), file.path))
            .collect::<Vec<_>>()
            .join("\n");
        if manifest.len() > MAX_MANIFEST {
            return Err(Error::io(
                "copying the provider directories to targets",
                std::io::Error::other(format!(
                    "they hold {} files, more than a target's command line can list for its \
                     check of the copy",
                    files.len()
                )),
            ));
        }
        Ok(Bundle {
            dirs: names,
            packages,
            files,
            digest,
            manifest,
            program: program_at,
            payload: OnceLock::new(),
        })
    }

    /// The bytes of ral's native providers' program, when it travels.
    pub fn native_bytes(&self) -> Option<&[u8]> {
        self.program.map(|at| self.files[at].bytes.as_slice())
    }

    /// Names the content: equal digests, equal files.
    pub fn digest(&self) -> &str {
        &self.digest
    }

    /// Each file's SHA-256 and path, as `sha256sum -c` reads them
    /// (`HEX  dN/NAME` lines, in order): what a target checks its copy
    /// against before each run (see `script.rs`).
    pub fn manifest(&self) -> &str {
        &self.manifest
    }

    /// How many files it holds.
    pub fn len(&self) -> usize {
        self.files.len()
    }

    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// Where a local file or directory of the bundle is on a target whose
    /// copy is in `remote_dir`; `None` when it is not in the bundle.
    pub fn remote_path(&self, remote_dir: &str, local: &Path) -> Option<String> {
        if let Some(name) = self.dirs.get(local) {
            return Some(format!("{remote_dir}/{name}"));
        }
        let parent = local.parent()?;
        let file = local.file_name()?.to_str()?;
        if let Some(name) = self.dirs.get(parent) {
            return Some(format!("{remote_dir}/{name}/{file}"));
        }
        // A file of a package in one of the directories.
        let name = self.dirs.get(parent.parent()?)?;
        let package = format!("{name}/{}", parent.file_name()?.to_str()?);
        self.packages
            .contains(&package)
            .then(|| format!("{remote_dir}/{package}/{file}"))
    }

    /// Where ral's native providers' program is on a target whose copy is
    /// in `remote_dir`, when it travels with the directory `dir`.
    pub fn native_program(&self, remote_dir: &str, dir: &Path) -> Option<String> {
        let path = format!("{}/{NATIVE_PROGRAM}", self.dirs.get(dir)?);
        self.files
            .iter()
            .any(|file| file.path == path)
            .then(|| format!("{remote_dir}/{path}"))
    }

    /// The `sh` script that writes every file in the current directory.
    pub fn payload(&self) -> &[u8] {
        self.payload.get_or_init(|| self.make_payload())
    }

    fn make_payload(&self) -> Vec<u8> {
        let delimiter = format!("RAL_END_OF_FILE_{}", self.digest);
        let mut out = Vec::new();
        for name in self.dirs.values() {
            out.extend_from_slice(format!("mkdir -m 700 {name} || exit 1\n").as_bytes());
        }
        for package in &self.packages {
            out.extend_from_slice(format!("mkdir -m 700 {package} || exit 1\n").as_bytes());
        }
        for file in &self.files {
            let target = quote_word(&file.path);
            if fits_here_document(&file.bytes, &delimiter) {
                out.extend_from_slice(
                    format!("cat > {target} <<'{delimiter}' || exit 1\n").as_bytes(),
                );
                out.extend_from_slice(&file.bytes);
                out.extend_from_slice(format!("{delimiter}\n").as_bytes());
            } else {
                out.extend_from_slice(format!(": > {target} || exit 1\n").as_bytes());
                for chunk in file.bytes.chunks(OCTAL_CHUNK) {
                    out.reserve(chunk.len() * 4 + 64);
                    out.extend_from_slice(b"printf '");
                    for &byte in chunk {
                        out.extend_from_slice(&OCTAL[usize::from(byte)]);
                    }
                    out.extend_from_slice(format!("' >> {target} || exit 1\n").as_bytes());
                }
            }
            let mode = if file.executable { "700" } else { "600" };
            out.extend_from_slice(format!("chmod {mode} {target} || exit 1\n").as_bytes());
        }
        out.extend_from_slice(b": > .complete || exit 1\n");
        out
    }
}

/// Adds the regular files directly in `dir` (not hidden ones) to `files`
/// as `prefix/NAME`, counting their bytes in `total`; returns the names of
/// the Python packages in `dir` (safe-named subdirectories holding an
/// `__init__.py`; `__pycache__` holds none).
/// Adds the program at `path` as the executable `named`.
fn read_program(
    path: &Path,
    named: &str,
    files: &mut Vec<File>,
    total: &mut usize,
) -> std::io::Result<()> {
    let bytes = bounded_read::read_file(path, MAX_PROGRAM, bounded_read::Links::Follow).map_err(
        |e| match e {
            bounded_read::Refused::Io(e) => e,
            lasting => std::io::Error::other(lasting.to_string()),
        },
    )?;
    *total += bytes.len();
    if *total > MAX_BUNDLE {
        return Err(std::io::Error::other(format!(
            "the files to copy are larger than {MAX_BUNDLE} bytes"
        )));
    }
    files.push(File {
        path: named.to_owned(),
        executable: true,
        bytes,
    });
    Ok(())
}

fn read_files(
    dir: &Path,
    prefix: &str,
    files: &mut Vec<File>,
    total: &mut usize,
) -> Result<Vec<String>> {
    let read_error = |e| Error::io(format!("reading {} to copy it", dir.display()), e);
    let mut entries: Vec<_> = fs::read_dir(dir)
        .map_err(read_error)?
        .collect::<std::io::Result<_>>()
        .map_err(read_error)?;
    entries.sort_by_key(|entry| entry.file_name());
    let mut packages = Vec::new();
    for entry in entries {
        let file_name = entry.file_name();
        let Some(file_name) = file_name.to_str() else {
            continue;
        };
        let path = entry.path();
        let Ok(meta) = fs::metadata(&path) else {
            continue;
        };
        if file_name.starts_with('.') || !safe_name(file_name) {
            continue;
        }
        if meta.is_dir() {
            if path.join("__init__.py").is_file() {
                packages.push(file_name.to_owned());
            }
            continue;
        }
        if !meta.is_file() {
            continue;
        }
        let bytes =
            bounded_read::read_file(&path, MAX_FILE, bounded_read::Links::Follow).map_err(|e| {
                let e = match e {
                    bounded_read::Refused::Io(e) => e,
                    lasting => std::io::Error::other(lasting.to_string()),
                };
                Error::io(format!("reading {} to copy it", path.display()), e)
            })?;
        *total += bytes.len();
        if *total > MAX_BUNDLE {
            return Err(Error::io(
                format!("copying {} to targets", dir.display()),
                std::io::Error::other(format!(
                    "the provider directories hold more than {} MiB",
                    MAX_BUNDLE >> 20
                )),
            ));
        }
        files.push(File {
            path: format!("{prefix}/{file_name}"),
            executable: meta.permissions().mode() & 0o111 != 0,
            bytes,
        });
    }
    Ok(packages)
}

/// File names written bare into the payload's quoting are kept to a safe
/// alphabet all the same.
fn safe_name(name: &str) -> bool {
    name.chars()
        .all(|c| c.is_ascii_alphanumeric() || "._-+,@".contains(c))
}

/// Whether a here-document carries `bytes` exactly: text ending in a
/// newline, no NUL, no carriage return at all (a line ending a shell may
/// read otherwise), and no line equal to the delimiter.
fn fits_here_document(bytes: &[u8], delimiter: &str) -> bool {
    bytes.last() == Some(&b'\n')
        && !bytes.iter().any(|&b| b == 0 || b == b'\r')
        && !bytes
            .split(|&b| b == b'\n')
            .any(|line| line == delimiter.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Command, Stdio};

    #[test]
    fn each_byte_is_sent_as_the_octal_escape_printf_reads() {
        for byte in 0..=255u8 {
            let escape = std::str::from_utf8(&OCTAL[usize::from(byte)]).unwrap();
            assert_eq!(escape, format!("\\{byte:03o}"));
        }
    }

    fn write(dir: &Path, name: &str, bytes: &[u8], mode: u32) {
        fs::write(dir.join(name), bytes).unwrap();
        fs::set_permissions(dir.join(name), fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn the_payload_writes_every_file_exactly_with_its_mode() {
        let source = tempfile::tempdir().unwrap();
        let a = source.path().join("a");
        let b = source.path().join("b");
        fs::create_dir_all(&a).unwrap();
        fs::create_dir_all(&b).unwrap();
        write(&a, "x.prov", b"#!/bin/sh\necho '$HOME' `id`\n", 0o755);
        write(&a, "x.yaml", b"no final newline", 0o644);
        write(&b, "bin.dat", b"\0\x01\xff\r\n'\"\\%s", 0o644);
        let tricky = format!("a\nRAL_END_OF_FILE_{}\nb\n", "0".repeat(32));
        write(&b, "tricky", tricky.as_bytes(), 0o644);
        write(&a, ".hidden", b"skipped", 0o644);
        fs::create_dir(a.join("sub")).unwrap();
        write(&a.join("sub"), "not_copied.py", b"", 0o644);
        // A package travels with its directory, without Python's cache.
        fs::create_dir_all(a.join("pkg/__pycache__")).unwrap();
        write(&a.join("pkg"), "__init__.py", b"from .m import x\n", 0o644);
        write(&a.join("pkg"), "m.py", b"x = 1\n", 0o644);
        write(&a.join("pkg/__pycache__"), "m.pyc", b"\0", 0o644);
        let bundle = Bundle::collect(&[a.clone(), b.clone(), a.clone()]).unwrap();
        assert_eq!(bundle.len(), 6);
        let out = tempfile::tempdir().unwrap();
        let mut sh = Command::new("sh")
            .arg("-s")
            .current_dir(out.path())
            .stdin(Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        sh.stdin
            .take()
            .unwrap()
            .write_all(bundle.payload())
            .unwrap();
        assert!(sh.wait().unwrap().success());
        for (dir, name) in [
            (&a, "x.prov"),
            (&a, "x.yaml"),
            (&a, "pkg/__init__.py"),
            (&a, "pkg/m.py"),
            (&b, "bin.dat"),
            (&b, "tricky"),
        ] {
            let remote = bundle.remote_path(out.path().to_str().unwrap(), &dir.join(name));
            let remote = PathBuf::from(remote.unwrap());
            assert_eq!(
                fs::read(&remote).unwrap(),
                fs::read(dir.join(name)).unwrap(),
                "{name}"
            );
            let mode = fs::metadata(&remote).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, if name == "x.prov" { 0o700 } else { 0o600 }, "{name}");
        }
        assert!(out.path().join(".complete").exists());
        assert!(!out.path().join("d0/.hidden").exists());
        assert!(!out.path().join("d0/sub").exists());
        assert_eq!(bundle.remote_path("/r", &a.join("sub/not_copied.py")), None);
        assert!(!out.path().join("d0/pkg/__pycache__").exists());
        assert_eq!(
            bundle.remote_path("/r", &a).as_deref(),
            Some("/r/d0"),
            "a directory maps too"
        );
        assert_eq!(bundle.remote_path("/r", Path::new("/elsewhere/x")), None);
    }

    /// Every byte value, through both ways of sending a file (octal
    /// `printf`, and a here-document for text), arrives exactly under each
    /// shell a target may have as `sh`, in a UTF-8 locale too.
    #[test]
    fn every_byte_round_trips_through_each_shell() {
        let source = tempfile::tempdir().unwrap();
        let all: Vec<u8> = (0..=255u8).cycle().take(256 * 20 + 7).collect();
        let text: Vec<u8> = (1..=255u8)
            .filter(|&b| b != b'\r')
            .chain([b'\\', b'\n', b'$', b'`', b'\'', b'\n'])
            .collect();
        write(source.path(), "all.bin", &all, 0o644);
        write(source.path(), "text.txt", &text, 0o644);
        write(source.path(), "empty", b"", 0o644);
        write(source.path(), "pct", b"%s%d%%\\c\\0\\x41", 0o644);
        let bundle = Bundle::collect(&[source.path().to_path_buf()]).unwrap();
        let shells: &[&[&str]] = &[&["dash", "-s"], &["bash", "--posix", "-s"], &["bash", "-s"]];
        for shell in shells {
            if Command::new(shell[0]).arg("-c").arg(":").status().is_err() {
                continue;
            }
            for locale in ["C", "C.UTF-8"] {
                let out = tempfile::tempdir().unwrap();
                let mut sh = Command::new(shell[0])
                    .args(&shell[1..])
                    .env("LC_ALL", locale)
                    .current_dir(out.path())
                    .stdin(Stdio::piped())
                    .spawn()
                    .unwrap();
                use std::io::Write;
                sh.stdin
                    .take()
                    .unwrap()
                    .write_all(bundle.payload())
                    .unwrap();
                assert!(sh.wait().unwrap().success(), "{shell:?} {locale}");
                for name in ["all.bin", "text.txt", "empty", "pct"] {
                    assert_eq!(
                        fs::read(out.path().join("d0").join(name)).unwrap(),
                        fs::read(source.path().join(name)).unwrap(),
                        "{name} through {shell:?} in {locale}"
                    );
                }
            }
        }
    }

    /// Runs a target's command line here, as its login shell would, with
    /// `home` as HOME and `stdin` fed; its stdout.
    fn run_on_target(line: &str, home: &Path, stdin: &[u8]) -> (bool, String, String) {
        use std::io::Write;
        let mut sh = Command::new("sh")
            .arg("-c")
            .arg(line)
            .env("HOME", home)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        sh.stdin.take().unwrap().write_all(stdin).unwrap();
        let out = sh.wait_with_output().unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    #[test]
    fn a_copy_is_used_only_while_it_matches_the_manifest() {
        use crate::remote::script;
        let source = tempfile::tempdir().unwrap();
        write(source.path(), "p.prov", b"#!/bin/sh\necho p\n", 0o755);
        write(source.path(), "p.yaml", b"no final newline", 0o644);
        let bundle = Bundle::collect(&[source.path().to_owned()]).unwrap();
        let (digest, manifest) = (bundle.digest(), bundle.manifest());
        assert_eq!(manifest.lines().count(), 2, "{manifest}");
        let home = tempfile::tempdir().unwrap();
        let copy = home.path().join(".cache/ral").join(digest);
        let session = script::session(digest, manifest);
        let probe = || run_on_target(&session, home.path(), b"").1;

        assert!(probe().contains("ral-bundle need "), "nothing there yet");
        let (ok, out, err) = run_on_target(
            &script::upload(digest, manifest),
            home.path(),
            bundle.payload(),
        );
        assert!(ok && out.contains("ral-bundle have "), "{out} {err}");
        let said = probe();
        assert!(said.starts_with("ral-session "), "{said}");
        assert!(said.contains("ral-bundle have "), "{said}");

        // Changed, one file more, a link: each found, named, and replaced
        // by the next upload.
        let provider = copy.join("d0/p.prov");
        let damage: [(&str, &dyn Fn()); 3] = [
            ("d0/p.prov differs from the file sent", &|| {
                fs::write(&provider, b"#!/bin/sh\necho evil\n").unwrap()
            }),
            ("does not hold the files copied", &|| {
                fs::write(copy.join("d0/extra.py"), b"").unwrap()
            }),
            ("is a symbolic link", &|| {
                let aside = home.path().join("aside");
                fs::rename(&copy, &aside).unwrap();
                std::os::unix::fs::symlink(&aside, &copy).unwrap();
            }),
        ];
        for (why, harm) in damage {
            harm();
            let said = probe();
            assert!(said.contains("ral-bundle damaged "), "{why}: {said}");
            assert!(said.contains(why), "{why}: {said}");
            assert!(said.contains("ral-bundle need "), "{why}: {said}");
            let (ok, out, err) = run_on_target(
                &script::upload(digest, manifest),
                home.path(),
                bundle.payload(),
            );
            assert!(ok && out.contains("ral-bundle have "), "{why}: {out} {err}");
            assert!(probe().contains("ral-bundle have "), "{why}: repaired");
            assert_eq!(fs::read(&provider).unwrap(), b"#!/bin/sh\necho p\n");
        }
        assert!(
            fs::symlink_metadata(&copy).unwrap().is_dir(),
            "the link was replaced"
        );
        assert!(
            home.path().join("aside/d0/p.prov").exists(),
            "and not followed"
        );
    }

    #[test]
    fn the_digest_follows_the_content() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "p.prov", b"one\n", 0o755);
        let first = Bundle::collect(&[dir.path().to_owned()]).unwrap();
        let again = Bundle::collect(&[dir.path().to_owned()]).unwrap();
        assert_eq!(first.digest(), again.digest());
        assert_eq!(first.digest().len(), 32);
        write(dir.path(), "p.prov", b"two\n", 0o755);
        let changed = Bundle::collect(&[dir.path().to_owned()]).unwrap();
        assert_ne!(first.digest(), changed.digest());
        write(dir.path(), "p.prov", b"two\n", 0o644);
        let mode = Bundle::collect(&[dir.path().to_owned()]).unwrap();
        assert_ne!(changed.digest(), mode.digest());
    }
}
