//! What a watched file looked like when the agent last looked: its
//! identity, size, times, mode and owner. An event on a file whose stamp
//! is the one recorded changed nothing the agent has not seen: its own
//! run's writes, which are stamped as each task ends, wake it without
//! making a run of their own; anyone else's change differs (the change
//! time moves at every write) and does.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// One file's look; `None` in [`Stamps`] for a file that was missing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
    mode: u32,
    uid: u32,
    gid: u32,
}

impl Stamp {
    /// `path` now (not following a last link: the link itself is what
    /// the file resource manages), or `None` when it cannot be looked at.
    /// A directory's size and times are left out: they move whenever an
    /// entry in it comes or goes (an application's log, the agent's own
    /// write of a file in it), none of which is the directory's drift;
    /// what a directory resource manages (that it is one, its mode, its
    /// owner) is kept.
    pub fn of(path: &Path) -> Option<Stamp> {
        let meta = std::fs::symlink_metadata(path).ok()?;
        let contents = !meta.is_dir();
        Some(Stamp {
            dev: meta.dev(),
            ino: meta.ino(),
            size: if contents { meta.size() } else { 0 },
            mtime: if contents {
                (meta.mtime(), meta.mtime_nsec())
            } else {
                (0, 0)
            },
            ctime: if contents {
                (meta.ctime(), meta.ctime_nsec())
            } else {
                (0, 0)
            },
            mode: meta.mode(),
            uid: meta.uid(),
            gid: meta.gid(),
        })
    }
}

/// The stamps of the watched files.
#[derive(Debug, Default, Clone)]
pub struct Stamps {
    seen: HashMap<PathBuf, Option<Stamp>>,
}

impl Stamps {
    /// Looks at `path` now and records it.
    pub fn refresh(&mut self, path: &Path) {
        self.seen.insert(path.to_owned(), Stamp::of(path));
    }

    /// Whether `path` differs from its record (a file never recorded
    /// differs).
    pub fn changed(&self, path: &Path) -> bool {
        self.seen.get(path) != Some(&Stamp::of(path))
    }

    /// Whether `path` has a record.
    pub fn knows(&self, path: &Path) -> bool {
        self.seen.contains_key(path)
    }

    /// Puts back the record of `path` that `earlier` holds (none when it
    /// holds none, which makes `path` differ).
    pub fn restore(&mut self, path: &Path, earlier: &Stamps) {
        match earlier.seen.get(path) {
            Some(stamp) => self.seen.insert(path.to_owned(), *stamp),
            None => self.seen.remove(path),
        };
    }

    /// Keeps the records of `paths` only.
    pub fn keep_only(&mut self, paths: &[PathBuf]) {
        self.seen.retain(|path, _| paths.contains(path));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_changed_by_anyone_after_its_stamp_differs_and_one_left_alone_does_not() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("hosts");
        let mut stamps = Stamps::default();
        assert!(stamps.changed(&path), "never recorded");
        stamps.refresh(&path);
        assert!(!stamps.changed(&path), "missing, and still missing");
        std::fs::write(&path, "a\n").unwrap();
        assert!(stamps.changed(&path));
        stamps.refresh(&path);
        assert!(!stamps.changed(&path));
        // Same size, same content even: the change time moved.
        std::fs::write(&path, "a\n").unwrap();
        assert!(stamps.changed(&path));
        stamps.refresh(&path);
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(stamps.changed(&path));
        stamps.refresh(&path);
        std::fs::remove_file(&path).unwrap();
        assert!(stamps.changed(&path));
        stamps.keep_only(&[]);
        assert!(stamps.seen.is_empty());
    }

    #[test]
    fn a_directory_differs_by_its_mode_not_by_its_entries() {
        let dir = tempfile::tempdir().unwrap();
        let app = dir.path().join("app");
        std::fs::create_dir(&app).unwrap();
        let mut stamps = Stamps::default();
        stamps.refresh(&app);
        std::fs::write(app.join("app.log"), "x").unwrap();
        std::fs::remove_file(app.join("app.log")).unwrap();
        assert!(!stamps.changed(&app));
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&app, std::fs::Permissions::from_mode(0o700)).unwrap();
        assert!(stamps.changed(&app));
        stamps.refresh(&app);
        // Replaced by another directory, or by a file.
        std::fs::remove_dir(&app).unwrap();
        std::fs::write(&app, "").unwrap();
        assert!(stamps.changed(&app));
    }

    #[test]
    fn a_record_put_back_makes_what_changed_since_differ() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("motd");
        std::fs::write(&path, "a\n").unwrap();
        let mut stamps = Stamps::default();
        stamps.refresh(&path);
        let before = stamps.clone();
        std::fs::write(&path, "someone else's\n").unwrap();
        stamps.refresh(&path);
        assert!(!stamps.changed(&path));
        stamps.restore(&path, &before);
        assert!(stamps.changed(&path));
        // Never recorded before: unknown, and so changed.
        stamps.restore(&path, &Stamps::default());
        assert!(!stamps.knows(&path) && stamps.changed(&path));
    }
}
