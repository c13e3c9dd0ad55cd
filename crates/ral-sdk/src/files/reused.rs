//! A file parsed once and reused while it is unchanged: a plan asks a
//! provider for each of thousands of names in a call of its own, and each
//! call would otherwise read and parse the whole file again. A version is
//! the root and the file's device, inode, size, and modification and
//! change times (the change time cannot be set back by anyone), taken
//! before the read and kept only when the file read is that version.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use super::root::Root;
use super::stat::Stat;
use crate::error::CallResult;
use crate::Call;

/// What tells one version of a file from another.
type Version = (PathBuf, [i64; 5]);

/// The last version read of one file, and what it parsed to.
pub struct Reused<T> {
    last: Mutex<Option<(Version, Arc<T>)>>,
}

impl<T> Reused<T> {
    pub const fn new() -> Reused<T> {
        Reused {
            last: Mutex::new(None),
        }
    }

    /// The file `rel` below the call's root, parsed by `parse` (given
    /// `None` when it, or a directory on the way, is missing), or what it
    /// parsed to last time when it has not changed since.
    pub fn get(
        &self,
        call: &Call,
        rel: &str,
        parse: impl FnOnce(Option<&[u8]>) -> T,
    ) -> CallResult<Arc<T>> {
        let root = Root::open(&call.root)?;
        let target = match root.file(rel, true, None) {
            Ok(target) => target,
            Err(err) if err.missing => return Ok(Arc::new(parse(None))),
            Err(err) => return Err(err),
        };
        let version = target
            .lstat()?
            .map(|info| (call.root.clone(), stamp(&info)));
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        if let (Some(version), Some((known, parsed))) = (&version, last.as_ref()) {
            if version == known {
                return Ok(parsed.clone());
            }
        }
        let (data, read) = match target.read(None)? {
            Some((data, info)) => (Some(data), Some((call.root.clone(), stamp(&info)))),
            None => (None, None),
        };
        let parsed = Arc::new(parse(data.as_deref()));
        // Kept only when what was read is the version looked at first (the
        // file was not replaced in between).
        if let Some(version) = version.filter(|version| read.as_ref() == Some(version)) {
            *last = Some((version, parsed.clone()));
        }
        Ok(parsed)
    }
}

impl<T> Default for Reused<T> {
    fn default() -> Self {
        Reused::new()
    }
}

fn stamp(info: &Stat) -> [i64; 5] {
    [
        info.dev() as i64,
        info.ino() as i64,
        info.size() as i64,
        info.mtime_ns(),
        info.ctime_ns(),
    ]
}
