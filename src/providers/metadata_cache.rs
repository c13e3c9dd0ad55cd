//! The metadata cache: a provider without a `.yaml` is described once per
//! version of its file, not on every command; and every provider's type and
//! name are remembered, so resolving `ralsh TYPE` reads the metadata of that
//! type's providers only.
//!
//! An entry is keyed by the provider's path, device, inode, size,
//! modification and change times (and those of its `.yaml`), and by what its
//! describe may depend on (the `PATH` and root given to providers, and ral's
//! version). Entries live
//! in `$XDG_CACHE_HOME/ral/metadata` (a private directory, like the bundled
//! providers'), one JSON file each, written to a temporary file and renamed
//! into place, so concurrent ralsh processes never see half an entry. An
//! entry that cannot be read or does not match is ignored and rewritten,
//! never an error.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::bounded_read::{self, Links};
use crate::fnv::fnv1a;

/// Bumped when the entry format changes.
const FORMAT: u32 = 3;
/// The largest entry read; a larger file is no entry of ours.
const MAX_ENTRY: usize = 2 * 1024 * 1024;

/// Where describe results are kept; a disabled cache keeps nothing.
#[derive(Debug, Clone)]
pub struct MetadataCache {
    dir: Option<PathBuf>,
    /// Entries are read but never written (shell completion, whose short
    /// time limits must not decide what later commands see).
    read_only: bool,
}

/// What identifies one version of a provider file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fingerprint {
    path: PathBuf,
    dev: u64,
    ino: u64,
    size: u64,
    mtime_ns: i128,
    ctime_ns: i128,
}

impl Fingerprint {
    /// The fingerprint of `source` now, or `None` when it cannot be read.
    pub fn of(source: &Path) -> Option<Fingerprint> {
        let meta = std::fs::metadata(source).ok()?;
        let nanos = |secs: i64, nsec: i64| i128::from(secs) * 1_000_000_000 + i128::from(nsec);
        Some(Fingerprint {
            path: source.to_owned(),
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.size(),
            mtime_ns: nanos(meta.mtime(), meta.mtime_nsec()),
            ctime_ns: nanos(meta.ctime(), meta.ctime_nsec()),
        })
    }
}

/// The files an entry is for: the provider and its `.yaml`, if any.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Files {
    pub provider: Fingerprint,
    pub yaml: Option<Fingerprint>,
}

impl Files {
    /// The fingerprints of `source` and of the `.yaml` beside it.
    pub fn of(source: &Path) -> Option<Files> {
        let yaml = source.with_extension("yaml");
        Some(Files {
            provider: Fingerprint::of(source)?,
            yaml: Fingerprint::of(&yaml),
        })
    }
}

/// What the cache knows about one version of a provider.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "verdict", rename_all = "snake_case", deny_unknown_fields)]
pub enum Known {
    /// It loaded.
    Loaded {
        /// The provider's type and name.
        kind: String,
        name: String,
        /// Its describe output, for a provider without a `.yaml`.
        describe: Option<String>,
    },
    /// It was skipped, for this reason: until its files change, it is
    /// skipped again without being described (a describe that hangs or
    /// prints metadata that cannot be used costs one stat next time). A
    /// describe that timed out says after how many milliseconds: a run that
    /// allows more describes it again.
    Skipped {
        reason: String,
        #[serde(default)]
        timed_out_after_ms: Option<u64>,
    },
}

impl Known {
    /// The provider's type, when it loaded.
    pub fn kind(&self) -> Option<&str> {
        match self {
            Known::Loaded { kind, .. } => Some(kind),
            Known::Skipped { .. } => None,
        }
    }
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    format: u32,
    ral: String,
    context: String,
    files: Files,
    known: Known,
}

impl MetadataCache {
    /// A cache that keeps nothing (`--no-cache`).
    pub fn disabled() -> MetadataCache {
        MetadataCache {
            dir: None,
            read_only: false,
        }
    }

    /// This cache, read but never written.
    pub fn read_only(self) -> MetadataCache {
        MetadataCache {
            read_only: true,
            ..self
        }
    }

    /// The user's cache, or a disabled one (with a note in the log) when
    /// its directory cannot be made private.
    pub fn open() -> MetadataCache {
        let dir = crate::cache_dir::cache_dir().join("metadata");
        match crate::cache_dir::private_dir(&dir) {
            Ok(()) => MetadataCache {
                dir: Some(dir),
                read_only: false,
            },
            Err(e) => {
                log::info!("not caching provider metadata: {e}");
                MetadataCache::disabled()
            }
        }
    }

    /// A cache in `dir` (for tests and tools).
    pub fn at(dir: PathBuf) -> MetadataCache {
        MetadataCache {
            dir: Some(dir),
            read_only: false,
        }
    }

    fn entry_path(&self, files: &Files, context: &str) -> Option<PathBuf> {
        let dir = self.dir.as_ref()?;
        let mut key = files.provider.path.as_os_str().as_encoded_bytes().to_vec();
        key.push(0);
        key.extend_from_slice(context.as_bytes());
        Some(dir.join(format!("{:016x}.json", fnv1a(&key))))
    }

    /// What is known about this version of the files, if anything.
    pub fn get(&self, files: &Files, context: &str) -> Option<Known> {
        let path = self.entry_path(files, context)?;
        // Only a regular file of ours: a link to /dev/zero or a FIFO put in
        // its place is ignored (and replaced by the next put).
        let text = match bounded_read::read_file(&path, MAX_ENTRY, Links::Refuse) {
            Ok(text) => text,
            Err(e) if e.is_missing() => return None,
            Err(e) => {
                log::info!("ignoring the cache entry {}: {e}", path.display());
                return None;
            }
        };
        let entry: Entry = match serde_json::from_slice(&text) {
            Ok(entry) => entry,
            Err(e) => {
                log::info!(
                    "ignoring the unreadable cache entry {}: {e}",
                    path.display()
                );
                return None;
            }
        };
        let current = entry.format == FORMAT
            && entry.ral == env!("CARGO_PKG_VERSION")
            && entry.context == context
            && entry.files == *files;
        current.then_some(entry.known)
    }

    /// Stores what is known about this version of the files. Failures
    /// only cost the next run some work, so they are logged, not raised.
    pub fn put(&self, files: &Files, context: &str, known: &Known) {
        if self.read_only {
            return;
        }
        let Some(path) = self.entry_path(files, context) else {
            return;
        };
        let entry = Entry {
            format: FORMAT,
            ral: env!("CARGO_PKG_VERSION").to_owned(),
            context: context.to_owned(),
            files: files.clone(),
            known: known.clone(),
        };
        let written = serde_json::to_vec(&entry)
            .map_err(std::io::Error::other)
            .and_then(|bytes| write_atomically(&path, &bytes));
        if let Err(e) = written {
            log::info!("could not cache metadata in {}: {e}", path.display());
        }
    }
}

/// Writes to a temporary file in the same directory, then renames it over
/// `path`: readers see the old entry or the new one, never a mix.
fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut temp = tempfile::Builder::new()
        .prefix(".entry-")
        .tempfile_in(dir)?;
    temp.write_all(bytes)?;
    temp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A cache in a temporary directory, and the files of one provider
    /// there (the directory goes when the first value is dropped).
    fn one_provider() -> (tempfile::TempDir, MetadataCache, Files) {
        let dir = tempfile::tempdir().unwrap();
        let cache = MetadataCache::at(dir.path().to_owned());
        let file = dir.path().join("p.prov");
        std::fs::write(&file, "x").unwrap();
        let files = Files::of(&file).unwrap();
        (dir, cache, files)
    }

    fn known(describe: &str) -> Known {
        Known::Loaded {
            kind: "t".into(),
            name: "n".into(),
            describe: Some(describe.into()),
        }
    }

    #[test]
    fn an_entry_is_found_only_for_the_same_file_versions_and_context() {
        let dir = tempfile::tempdir().unwrap();
        let cache = MetadataCache::at(dir.path().to_owned());
        let file = dir.path().join("p.prov");
        std::fs::write(&file, "one").unwrap();
        let first = Files::of(&file).unwrap();
        cache.put(&first, "ctx", &known("described"));
        assert_eq!(cache.get(&first, "ctx"), Some(known("described")));
        assert_eq!(cache.get(&first, "other"), None);
        std::fs::write(&file, "two!").unwrap();
        assert_eq!(cache.get(&Files::of(&file).unwrap(), "ctx"), None);
        // A .yaml appearing beside it is a different version too.
        let now = Files::of(&file).unwrap();
        cache.put(&now, "ctx", &known("again"));
        std::fs::write(dir.path().join("p.yaml"), "---").unwrap();
        assert_eq!(cache.get(&Files::of(&file).unwrap(), "ctx"), None);
    }

    #[test]
    fn a_corrupt_entry_is_a_miss_and_is_replaced() {
        let (_dir, cache, files) = one_provider();
        let path = cache.entry_path(&files, "c").unwrap();
        std::fs::write(&path, "{not json").unwrap();
        assert_eq!(cache.get(&files, "c"), None);
        cache.put(&files, "c", &known("fresh"));
        assert_eq!(cache.get(&files, "c"), Some(known("fresh")));
    }

    #[test]
    fn an_entry_that_is_a_link_a_fifo_or_too_large_is_a_miss_and_is_replaced() {
        let (_dir, cache, files) = one_provider();
        let path = cache.entry_path(&files, "c").unwrap();
        let fifo = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
        let plant: [&dyn Fn(); 3] = [
            &|| std::os::unix::fs::symlink("/dev/zero", &path).unwrap(),
            // SAFETY: mkfifo with a valid NUL-terminated path.
            &|| assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0),
            &|| std::fs::write(&path, vec![b' '; MAX_ENTRY + 1]).unwrap(),
        ];
        for plant in plant {
            let _ = std::fs::remove_file(&path);
            plant();
            assert_eq!(cache.get(&files, "c"), None);
            cache.put(&files, "c", &known("fresh"));
            assert_eq!(cache.get(&files, "c"), Some(known("fresh")));
            assert!(std::fs::symlink_metadata(&path).unwrap().is_file());
        }
    }

    #[test]
    fn a_skipped_provider_is_remembered_with_its_reason() {
        let (_dir, cache, files) = one_provider();
        let skipped = Known::Skipped {
            reason: "describe did not finish within 1s".into(),
            timed_out_after_ms: Some(1000),
        };
        cache.put(&files, "c", &skipped);
        assert_eq!(cache.get(&files, "c"), Some(skipped));
        assert_eq!(cache.get(&files, "c").unwrap().kind(), None);
    }

    #[test]
    fn a_disabled_cache_keeps_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("p.prov");
        std::fs::write(&file, "x").unwrap();
        let files = Files::of(&file).unwrap();
        let cache = MetadataCache::disabled();
        cache.put(&files, "c", &known("kept?"));
        assert_eq!(cache.get(&files, "c"), None);
    }
}
