//! Where facts are read from: the [`Facts`] a gatherer fills, the
//! [`Sources`] (the root, and the machine's own files), and the reading of
//! one file of either, bounded in size, which gives `None` (logged) rather
//! than an error: a fact that cannot be read is left out.

use std::io::Read;
use std::path::Path;

use serde_json::{Map, Value as Json};

use crate::files::Root;

/// Facts by name, in Facter's (sorted) order; values are JSON, nested as
/// Facter nests them.
pub type Facts = Map<String, Json>;

/// Where facts are read from.
#[derive(Debug, Clone, Copy)]
pub struct Sources<'a> {
    /// The root directory: `os` and the host's names come from below it.
    pub root: &'a Path,
    /// The machine's own files (`/proc`, `/sys`, `/run`, `/.dockerenv`):
    /// `/`, but for tests, which give a fake tree.
    pub machine: &'a Path,
}

/// The most bytes read of one file (`/proc/cpuinfo` of a large machine
/// is a few hundred KiB).
const MAX_FILE: u64 = 4 << 20;

/// The text of the machine's file `rel` (below `machine`), or `None`
/// (logged) when it cannot be read.
pub(super) fn machine_file(machine: &Path, rel: &str) -> Option<String> {
    let path = machine.join(rel);
    let read = std::fs::File::open(&path).and_then(|file| {
        let mut text = String::new();
        file.take(MAX_FILE).read_to_string(&mut text)?;
        Ok(text)
    });
    match read {
        Ok(text) => Some(text),
        Err(e) => {
            log::debug!("facts: {}: {e}", path.display());
            None
        }
    }
}

/// The text of the file `rel` below the root, links resolved inside it,
/// or `None` when it is missing or cannot be read (logged).
pub(super) fn root_file(root: &Root, rel: &str) -> Option<String> {
    let read = root
        .file(rel, true, None)
        .and_then(|target| target.read(Some(MAX_FILE as usize)));
    match read {
        Ok(Some((bytes, _))) => Some(String::from_utf8_lossy(&bytes).into_owned()),
        Ok(None) => None,
        Err(e) if e.missing => None,
        Err(e) => {
            log::debug!("facts: {}: {}", root.show(rel), e.message);
            None
        }
    }
}

/// Whether `root` is the machine's own `/`.
pub(super) fn is_system_root(root: &Path) -> bool {
    root.as_os_str().is_empty() || root.components().eq(Path::new("/").components())
}
