//! The providers shipped inside the binary.
//!
//! They are embedded at build time and written out on first use to a cache
//! directory named after the crate version and a digest of their contents
//! (`$XDG_CACHE_HOME/ral/bundled-2-VERSION-DIGEST`, or under `~/.cache`), so a
//! binary that was installed and moved still finds them, and an upgraded
//! binary never runs stale scripts. The Python toolkit alone is also written
//! to `lib-1-VERSION-DIGEST/python`, for providers that are not bundled. The
//! directories are private to the user (0700) and are rejected if someone
//! else owns them or can write to them, since their scripts may run as root;
//! a manifest of the files' sizes, times and inodes is checked on every use,
//! and they are written out again if any of them changed.

use std::fs;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use crate::cache_dir::{cache_dir, check_private, private_dir};
use crate::error::{Error, Result};

mod embedded {
    include!(concat!(env!("OUT_DIR"), "/bundled_providers.rs"));
}

const COMPLETE_MARKER: &str = ".complete";

/// True when a bundled provider has type `kind`. Known from the binary
/// alone, so `ralsh TYPE` for another type never touches the bundled
/// directory.
pub fn has_type(kind: &str) -> bool {
    provider_files(Some(kind)).next().is_some()
}

/// True when every bundled provider of type `kind` is native code (and
/// there is one): none of them runs a script.
pub fn all_native(kind: &str) -> bool {
    let mut files = provider_files(Some(kind)).peekable();
    files.peek().is_some()
        && files.all(|file| crate::native::find(file.trim_end_matches(".prov")).is_some())
}

/// The bundled provider files (`NAME.prov`), or those of type `kind`,
/// known from the binary alone.
pub fn provider_files(kind: Option<&str>) -> impl Iterator<Item = &'static str> + '_ {
    embedded::PROVIDER_TYPES
        .iter()
        .filter(move |(_, provider_kind)| kind.is_none_or(|kind| *provider_kind == kind))
        .map(|(file, _)| *file)
}

/// The bundled model plugins' programs (`NAME.plugin`), written out to
/// `plugins/` beside `providers/`.
pub fn plugin_files() -> impl Iterator<Item = &'static str> {
    embedded::PLUGIN_FILES
        .iter()
        .filter_map(|(name, _)| name.strip_prefix(PLUGINS_PREFIX))
        .filter(|name| name.ends_with(".plugin"))
}

/// Where the plugins' files go, relative to `providers/`.
const PLUGINS_PREFIX: &str = "../plugins/";

/// A set of embedded files that is written out together into one cache
/// directory: `SUB/NAME` for each file (NAME may be `PACKAGE/FILE`).
struct FileSet {
    /// The directory's name without the version and digest.
    label: &'static str,
    sub: &'static str,
    files: Vec<(&'static str, &'static [u8])>,
}

impl FileSet {
    /// Every bundled file, in `providers/`.
    fn providers() -> FileSet {
        FileSet {
            // The "2" names the layout (the manifest in the marker), so a
            // directory written by an older ral is never mistaken for a
            // changed one.
            label: "bundled-2",
            sub: "providers",
            files: embedded::FILES
                .iter()
                .chain(embedded::PLUGIN_FILES)
                .copied()
                .collect(),
        }
    }

    /// The Python toolkit for providers that are not bundled.
    fn provider_lib() -> FileSet {
        FileSet {
            label: "lib-1",
            sub: "python",
            files: embedded::FILES
                .iter()
                .copied()
                .filter(|(name, _)| name.starts_with(LIB_PACKAGE))
                .collect(),
        }
    }

    /// One line of the manifest kept in the completion marker: a file's
    /// name, size, modification and change times and inode as written (the
    /// change time catches a rewrite that restores the modification time).
    fn manifest_line(out: &mut String, name: &str, meta: &fs::Metadata) {
        use std::fmt::Write;
        // Writing to a String cannot fail.
        let _ = writeln!(
            out,
            "{name} {} {}.{} {}.{} {}",
            meta.len(),
            meta.mtime(),
            meta.mtime_nsec(),
            meta.ctime(),
            meta.ctime_nsec(),
            meta.ino()
        );
    }

    /// The manifest of `dir` as it is now, if every file is there. Made
    /// on every run that may need the files, into one string.
    fn manifest(&self, dir: &Path) -> Option<String> {
        let base = dir.join(self.sub);
        let mut out = String::with_capacity(self.files.len() * 64);
        for (name, _) in &self.files {
            let meta = fs::symlink_metadata(base.join(name)).ok()?;
            Self::manifest_line(&mut out, name, &meta);
        }
        Some(out)
    }

    /// True when `dir` holds exactly the files written there, unchanged
    /// since: their sizes, modification times and inodes match the manifest
    /// recorded when they were written (checked with a few stats instead of
    /// reading every file on every run).
    fn is_intact(&self, dir: &Path) -> bool {
        match (
            fs::read_to_string(dir.join(COMPLETE_MARKER)),
            self.manifest(dir),
        ) {
            (Ok(recorded), Some(now)) => recorded == now,
            _ => false,
        }
    }

    /// Returns the directory holding the files, writing them out first
    /// when needed.
    fn materialize(&self) -> Result<PathBuf> {
        let parent = cache_dir();
        private_dir(&parent)?;
        let name = format!(
            "{}-{}-{}",
            self.label,
            env!("CARGO_PKG_VERSION"),
            embedded::DIGEST
        );
        let target = parent.join(&name);
        if target.exists() {
            check_private(&target)?;
            if self.is_intact(&target) {
                return Ok(target);
            }
            log::warn!(
                "{} is incomplete or was changed; writing it again",
                target.display()
            );
            // Moved aside first: a concurrent run may be doing the same, and
            // must not delete a fresh copy another run has just put in place.
            let aside = parent.join(format!(".stale-{name}.{}", std::process::id()));
            match fs::rename(&target, &aside) {
                Ok(()) => {
                    let _ = fs::remove_dir_all(&aside);
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(Error::io(format!("moving {} aside", target.display()), e)),
            }
        }
        // Write into a fresh directory and rename it into place, so a reader
        // never sees a half-written set and concurrent first runs do not
        // clash.
        let staging = parent.join(format!(".{name}.{}", std::process::id()));
        let _ = fs::remove_dir_all(&staging);
        self.write_all(&staging)
            .map_err(|e| Error::io(format!("writing {}", staging.display()), e))?;
        match fs::rename(&staging, &target) {
            Ok(()) => Ok(target),
            Err(_) if self.is_intact(&target) => {
                // Another process finished first; its copy is identical.
                let _ = fs::remove_dir_all(&staging);
                check_private(&target)?;
                Ok(target)
            }
            Err(e) => {
                let _ = fs::remove_dir_all(&staging);
                Err(Error::io(
                    format!("moving files to {}", target.display()),
                    e,
                ))
            }
        }
    }

    fn write_all(&self, staging: &Path) -> std::io::Result<()> {
        let dir = staging.join(self.sub);
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)?;
        for (name, contents) in &self.files {
            // A package's modules are NAME/FILE: its directory first.
            if let Some((package, _)) = name.rsplit_once('/') {
                fs::DirBuilder::new()
                    .recursive(true)
                    .mode(0o700)
                    .create(dir.join(package))?;
            }
            let mode = if name.ends_with(".prov") || name.ends_with(".plugin") {
                0o700
            } else {
                0o600
            };
            let mut file = fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(mode)
                .open(dir.join(name))?;
            file.write_all(contents)?;
            file.sync_all()?;
        }
        let recorded = self
            .manifest(staging)
            .ok_or_else(|| std::io::Error::other("a file just written is missing"))?;
        fs::write(staging.join(COMPLETE_MARKER), recorded)?;
        Ok(())
    }
}

/// The toolkit that providers which are not bundled may use: the files of
/// the Python package `ral_provider`.
const LIB_PACKAGE: &str = "ral_provider/";

/// Returns the data directory holding the bundled providers, writing them out
/// first when needed.
pub fn data_dir() -> Result<PathBuf> {
    FileSet::providers().materialize()
}

/// Returns the directory holding the package `ral_provider` for providers
/// that are not bundled (passed to them as `RALSH_PROVIDER_LIB`), writing it
/// out first when needed. It is a directory of its own, so that using it does
/// not write out every bundled provider.
pub fn provider_lib() -> Result<PathBuf> {
    let set = FileSet::provider_lib();
    Ok(set.materialize()?.join(set.sub))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metadata::Metadata;

    /// The table build.rs reads from the `.yaml` files with a line scan
    /// must match what the metadata parser makes of those files.
    #[test]
    fn type_table_matches_the_parsed_metadata() {
        let mut parsed: Vec<String> = embedded::FILES
            .iter()
            .filter(|(name, _)| name.ends_with(".yaml"))
            .map(|(name, contents)| {
                let text = std::str::from_utf8(contents).expect("UTF-8 yaml");
                Metadata::parse(text, Path::new(name))
                    .unwrap_or_else(|e| panic!("{name}: {e}"))
                    .type_name
            })
            .collect();
        parsed.sort();
        parsed.dedup();
        let mut table: Vec<&str> = embedded::PROVIDER_TYPES
            .iter()
            .map(|(_, kind)| *kind)
            .collect();
        table.sort();
        table.dedup();
        assert_eq!(parsed, table);
        assert!(has_type("user") && has_type("package"));
        assert!(!has_type("kv") && !has_type(""));
        // Each provider's own entry, against its parsed .yaml.
        for (file, kind) in embedded::PROVIDER_TYPES {
            let yaml = file.replace(".prov", ".yaml");
            let (_, contents) = embedded::FILES
                .iter()
                .find(|(name, _)| *name == yaml)
                .unwrap_or_else(|| panic!("{file} has no {yaml}"));
            let meta =
                Metadata::parse(std::str::from_utf8(contents).unwrap(), Path::new(&yaml)).unwrap();
            assert_eq!(meta.type_name, *kind, "{file}");
        }
        let provs = embedded::FILES
            .iter()
            .filter(|(name, _)| name.ends_with(".prov"))
            .count();
        assert_eq!(embedded::PROVIDER_TYPES.len(), provs);
        assert_eq!(
            provider_files(Some("user")).collect::<Vec<_>>(),
            ["etc_passwd.prov"]
        );
        assert_eq!(provider_files(None).count(), provs);
    }

    /// The automatic dependencies a plan draws from the bundled metadata:
    /// each reference names a type some bundled provider manages (a typo
    /// would silently order nothing), and the list is the one we mean.
    #[test]
    fn bundled_references_name_bundled_types() {
        let mut references = Vec::new();
        let mut path_named = Vec::new();
        let mut removed_after = Vec::new();
        for (name, contents) in embedded::FILES {
            let Some(stem) = name.strip_suffix(".yaml") else {
                continue;
            };
            let meta =
                Metadata::parse(std::str::from_utf8(contents).unwrap(), Path::new(name)).unwrap();
            for attr in meta.attributes.values() {
                if let Some(target) = &attr.refers_to {
                    assert!(has_type(target), "{name}: {}: {target}", attr.name);
                    let by =
                        (attr.refers_by.as_deref()).map_or(String::new(), |by| format!(".{by}"));
                    references.push(format!("{stem}.{} -> {target}{by}", attr.name));
                }
            }
            for target in &meta.removed_after {
                assert!(has_type(target), "{name}: removed_after: {target}");
                removed_after.push(format!("{stem} after {target}"));
            }
            if meta.names_are_paths {
                path_named.push(stem);
            }
        }
        assert_eq!(removed_after, ["etc_group after user"]);
        references.sort();
        path_named.sort();
        assert_eq!(
            references,
            [
                "authorized_keys.user -> user",
                "crontab.user -> user",
                "etc_group.members -> user",
                "etc_passwd.gid -> group.gid",
                "etc_passwd.groups -> group",
                "exec.cwd -> file",
                "exec.user -> user",
                "file.group -> group",
                "file.owner -> user",
            ]
        );
        assert_eq!(path_named, ["file", "fstab"]);
    }
}
