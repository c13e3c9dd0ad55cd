//! Watching files with inotify, without polling: each watched file through
//! its directory (so that a file replaced by a rename, as editors and ral
//! itself write, stays watched), or through the nearest directory that
//! exists when its own does not yet. The kernel queues what happens; the
//! agent's loop polls the descriptor with the rest of what wakes it.
//!
//! A manifest counts as changed once written and closed, moved in place or
//! removed (not at each write, which would read it half written); a
//! managed file at any change of its content, metadata or name.

use std::collections::{BTreeSet, HashMap};
use std::ffi::OsString;
use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};

use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};
use rustix::io::Errno;

/// What a watched file is to the agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A file a managed resource is kept in.
    Managed,
    /// A manifest.
    Manifest,
}

/// One file to watch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Watched {
    /// As this machine reaches it (below the root).
    pub path: PathBuf,
    /// As the root names it, for the record.
    pub shown: PathBuf,
    pub kind: Kind,
}

/// The events asked of every watched directory.
fn mask() -> WatchFlags {
    WatchFlags::CLOSE_WRITE
        | WatchFlags::MODIFY
        | WatchFlags::ATTRIB
        | WatchFlags::CREATE
        | WatchFlags::DELETE
        | WatchFlags::MOVED_FROM
        | WatchFlags::MOVED_TO
        | WatchFlags::DELETE_SELF
        | WatchFlags::MOVE_SELF
        | WatchFlags::ONLYDIR
        | WatchFlags::EXCL_UNLINK
}

/// The events that say a manifest is ready to be read again.
fn manifest_events() -> ReadFlags {
    ReadFlags::CLOSE_WRITE | ReadFlags::MOVED_TO | ReadFlags::MOVED_FROM | ReadFlags::DELETE
}

/// One entry of a watched directory that matters: which watched file it
/// is, and whether it is that file itself or a directory on its way.
#[derive(Debug, Clone, Copy)]
struct Entry {
    watched: usize,
    last: bool,
}

#[derive(Debug)]
struct Dir {
    path: PathBuf,
    entries: HashMap<OsString, Vec<Entry>>,
}

/// An inotify instance and what it watches.
pub struct Watcher {
    fd: OwnedFd,
    watched: Vec<Watched>,
    dirs: HashMap<i32, Dir>,
    /// The watch each watched file is seen through, by its index.
    through: Vec<Option<i32>>,
    buffer: Vec<MaybeUninit<u8>>,
    /// Ways watched (one `watch_way_to` each) since made: what an event
    /// costs, for the tests.
    ways: usize,
}

impl Watcher {
    pub fn new() -> io::Result<Watcher> {
        let fd = inotify::init(CreateFlags::CLOEXEC | CreateFlags::NONBLOCK)?;
        Ok(Watcher {
            fd,
            watched: Vec::new(),
            dirs: HashMap::new(),
            through: Vec::new(),
            ways: 0,
            buffer: vec![MaybeUninit::uninit(); 64 * 1024],
        })
    }

    /// The descriptor to poll for reading.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    pub fn watched(&self) -> &[Watched] {
        &self.watched
    }

    /// Watches `watched`, and no longer what was watched before. Returns
    /// what could not be watched (no directory on the way could be), each
    /// with why.
    pub fn set(&mut self, watched: Vec<Watched>) -> Vec<(PathBuf, io::Error)> {
        self.watched = watched;
        self.arm()
    }

    fn arm(&mut self) -> Vec<(PathBuf, io::Error)> {
        let old = std::mem::take(&mut self.dirs);
        self.through = vec![None; self.watched.len()];
        let failed = self.add((0..self.watched.len()).collect());
        for wd in old.keys() {
            if !self.dirs.contains_key(wd) {
                // Gone already when its directory went.
                let _ = inotify::remove_watch(&self.fd, *wd);
            }
        }
        failed
    }

    /// Watches the ways to the watched files `again` anew (a directory on
    /// their way came, went or was replaced), the others' watches as they
    /// are: an event costs the files it is about, not all of them.
    fn rearm(&mut self, again: &BTreeSet<usize>) -> Vec<(PathBuf, io::Error)> {
        let mut left = BTreeSet::new();
        for &at in again {
            let Some(wd) = self.through[at].take() else {
                continue;
            };
            if let Some(dir) = self.dirs.get_mut(&wd) {
                dir.entries.retain(|_, entries| {
                    entries.retain(|e| e.watched != at);
                    !entries.is_empty()
                });
                left.insert(wd);
            }
        }
        let failed = self.add(again.iter().copied().collect());
        for wd in left {
            if self.dirs.get(&wd).is_some_and(|dir| dir.entries.is_empty()) {
                self.dirs.remove(&wd);
                let _ = inotify::remove_watch(&self.fd, wd);
            }
        }
        failed
    }

    /// Watches the ways to the watched files `which` into `self.dirs`.
    fn add(&mut self, which: Vec<usize>) -> Vec<(PathBuf, io::Error)> {
        let mut failed = Vec::new();
        for at in which {
            self.ways += 1;
            let path = &self.watched[at].path;
            match self.watch_way_to(path) {
                Ok((wd, dir, name, last)) => {
                    self.dirs
                        .entry(wd)
                        .or_insert_with(|| Dir {
                            path: dir,
                            entries: HashMap::new(),
                        })
                        .entries
                        .entry(name)
                        .or_default()
                        .push(Entry { watched: at, last });
                    self.through[at] = Some(wd);
                }
                Err(e) => failed.push((path.clone(), e)),
            }
        }
        failed
    }

    /// Watches the directory of `path`, or the nearest one on its way
    /// that exists: its watch, the directory, the entry of it that leads
    /// to `path`, and whether that entry is `path` itself.
    fn watch_way_to(&self, path: &Path) -> io::Result<(i32, PathBuf, OsString, bool)> {
        let mut name = path.file_name().map(OsString::from);
        let mut dir = path.parent();
        let mut last = true;
        loop {
            let (Some(entry), Some(at)) = (name.clone(), dir) else {
                return Err(io::Error::new(
                    io::ErrorKind::NotFound,
                    "no directory on its way exists",
                ));
            };
            let at = if at.as_os_str().is_empty() {
                Path::new(".")
            } else {
                at
            };
            match inotify::add_watch(&self.fd, at, mask()) {
                Ok(wd) => return Ok((wd, at.to_owned(), entry, last)),
                Err(Errno::NOENT | Errno::NOTDIR) => {
                    name = at.file_name().map(OsString::from);
                    dir = at.parent();
                    last = false;
                }
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// The watched files the waiting events may have changed, as indices
    /// into [`Watcher::watched`]: every one when the kernel's queue
    /// overflowed. Reads until nothing waits.
    pub fn changes(&mut self) -> io::Result<BTreeSet<usize>> {
        let mut raw: Vec<(i32, ReadFlags, Option<OsString>)> = Vec::new();
        {
            let mut reader = inotify::Reader::new(&self.fd, &mut self.buffer);
            loop {
                match reader.next() {
                    Ok(event) => raw.push((
                        event.wd(),
                        event.events(),
                        event.file_name().map(|name| {
                            use std::os::unix::ffi::OsStrExt;
                            std::ffi::OsStr::from_bytes(name.to_bytes()).to_owned()
                        }),
                    )),
                    Err(Errno::AGAIN) => break,
                    Err(Errno::INTR) => continue,
                    Err(e) => return Err(e.into()),
                }
            }
        }
        let mut changed = BTreeSet::new();
        // The watched files whose way must be watched anew, all of them
        // when the kernel's queue overflowed.
        let mut again = BTreeSet::new();
        let mut overflowed = false;
        for (wd, flags, name) in raw {
            if flags.contains(ReadFlags::QUEUE_OVERFLOW) {
                changed.extend(0..self.watched.len());
                overflowed = true;
                continue;
            }
            let Some(dir) = self.dirs.get(&wd) else {
                continue;
            };
            let Some(name) = name else {
                // The directory itself went or moved (or its watch did):
                // whatever was watched through it may have changed.
                if flags
                    .intersects(ReadFlags::DELETE_SELF | ReadFlags::MOVE_SELF | ReadFlags::IGNORED)
                {
                    let through: Vec<usize> =
                        dir.entries.values().flatten().map(|e| e.watched).collect();
                    changed.extend(&through);
                    again.extend(through);
                }
                continue;
            };
            for entry in dir.entries.get(&name).into_iter().flatten() {
                if !entry.last {
                    // A directory on the way came or went.
                    changed.insert(entry.watched);
                    again.insert(entry.watched);
                    continue;
                }
                let counts = match self.watched[entry.watched].kind {
                    Kind::Managed => true,
                    Kind::Manifest => flags.intersects(manifest_events()),
                };
                if counts {
                    changed.insert(entry.watched);
                }
            }
        }
        let failed = match (overflowed, again.is_empty()) {
            (true, _) => self.arm(),
            (false, false) => self.rearm(&again),
            (false, true) => Vec::new(),
        };
        for (path, e) in failed {
            log::warn!("cannot watch {}: {e}", path.display());
        }
        Ok(changed)
    }

    /// The directories watched now, for the log and the tests.
    pub fn directories(&self) -> Vec<&Path> {
        self.dirs.values().map(|d| d.path.as_path()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn watched(path: &Path, kind: Kind) -> Watched {
        Watched {
            path: path.to_owned(),
            shown: path.to_owned(),
            kind,
        }
    }

    #[test]
    fn a_change_to_a_watched_file_is_seen_and_one_beside_it_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let hosts = dir.path().join("hosts");
        std::fs::write(&hosts, "a\n").unwrap();
        let mut watcher = Watcher::new().unwrap();
        assert!(watcher.set(vec![watched(&hosts, Kind::Managed)]).is_empty());
        assert!(watcher.changes().unwrap().is_empty());
        std::fs::write(dir.path().join("motd"), "x").unwrap();
        assert!(watcher.changes().unwrap().is_empty());
        std::fs::write(&hosts, "b\n").unwrap();
        assert_eq!(watcher.changes().unwrap(), BTreeSet::from([0]));
        // Replaced by a rename, as editors do: still watched after.
        std::fs::write(dir.path().join(".hosts.new"), "c\n").unwrap();
        watcher.changes().unwrap();
        std::fs::rename(dir.path().join(".hosts.new"), &hosts).unwrap();
        assert_eq!(watcher.changes().unwrap(), BTreeSet::from([0]));
        std::fs::write(&hosts, "d\n").unwrap();
        assert_eq!(watcher.changes().unwrap(), BTreeSet::from([0]));
        // Its mode.
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&hosts, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(watcher.changes().unwrap(), BTreeSet::from([0]));
    }

    #[test]
    fn a_file_whose_directory_is_missing_is_watched_once_it_comes() {
        let dir = tempfile::tempdir().unwrap();
        let deep = dir.path().join("srv/app/app.conf");
        let mut watcher = Watcher::new().unwrap();
        assert!(watcher.set(vec![watched(&deep, Kind::Managed)]).is_empty());
        assert_eq!(watcher.directories(), [dir.path()]);
        std::fs::create_dir(dir.path().join("srv")).unwrap();
        assert_eq!(watcher.changes().unwrap(), BTreeSet::from([0]));
        assert_eq!(watcher.directories(), [dir.path().join("srv")]);
        std::fs::create_dir(dir.path().join("srv/app")).unwrap();
        assert_eq!(watcher.changes().unwrap(), BTreeSet::from([0]));
        std::fs::write(&deep, "x").unwrap();
        assert_eq!(watcher.changes().unwrap(), BTreeSet::from([0]));
        // Its directory removed: seen, and watched from above again.
        std::fs::remove_file(&deep).unwrap();
        std::fs::remove_dir(dir.path().join("srv/app")).unwrap();
        assert!(watcher.changes().unwrap().contains(&0));
        assert_eq!(watcher.directories(), [dir.path().join("srv")]);
    }

    #[test]
    fn a_directory_coming_and_going_watches_anew_only_the_ways_through_it() {
        let dir = tempfile::tempdir().unwrap();
        let mut all: Vec<Watched> = (0..50)
            .map(|n| {
                let sub = dir.path().join(format!("d{n}"));
                std::fs::create_dir(&sub).unwrap();
                watched(&sub.join("f"), Kind::Managed)
            })
            .collect();
        let missing = dir.path().join("opt/app/conf");
        all.push(watched(&missing, Kind::Managed));
        let mut watcher = Watcher::new().unwrap();
        assert!(watcher.set(all).is_empty());
        let armed = watcher.ways;
        for _ in 0..10 {
            std::fs::create_dir(dir.path().join("opt")).unwrap();
            assert_eq!(watcher.changes().unwrap(), BTreeSet::from([50]));
            std::fs::remove_dir(dir.path().join("opt")).unwrap();
            assert_eq!(watcher.changes().unwrap(), BTreeSet::from([50]));
        }
        // The one way through opt, twice for each time it came and went.
        assert_eq!(watcher.ways - armed, 20);
        // And the others are watched as before.
        std::fs::write(dir.path().join("d7/f"), "x").unwrap();
        assert_eq!(watcher.changes().unwrap(), BTreeSet::from([7]));
        std::fs::create_dir_all(dir.path().join("opt/app")).unwrap();
        watcher.changes().unwrap();
        watcher.changes().unwrap();
        std::fs::write(&missing, "x").unwrap();
        assert!(watcher.changes().unwrap().contains(&50));
    }

    #[test]
    fn a_manifest_counts_once_written_and_closed_not_at_each_write() {
        use std::io::Write;
        let dir = tempfile::tempdir().unwrap();
        let manifest = dir.path().join("site.yaml");
        std::fs::write(&manifest, "a: {}\n").unwrap();
        let mut watcher = Watcher::new().unwrap();
        watcher.set(vec![watched(&manifest, Kind::Manifest)]);
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(&manifest)
            .unwrap();
        file.write_all(b"b: {}\n").unwrap();
        file.flush().unwrap();
        assert!(watcher.changes().unwrap().is_empty());
        drop(file);
        assert_eq!(watcher.changes().unwrap(), BTreeSet::from([0]));
        std::fs::remove_file(&manifest).unwrap();
        assert_eq!(watcher.changes().unwrap(), BTreeSet::from([0]));
    }

    #[test]
    fn files_no_longer_watched_are_let_go() {
        let one = tempfile::tempdir().unwrap();
        let two = tempfile::tempdir().unwrap();
        let mut watcher = Watcher::new().unwrap();
        watcher.set(vec![watched(&one.path().join("f"), Kind::Managed)]);
        watcher.set(vec![watched(&two.path().join("g"), Kind::Managed)]);
        assert_eq!(watcher.directories(), [two.path()]);
        std::fs::write(one.path().join("f"), "x").unwrap();
        assert!(watcher.changes().unwrap().is_empty());
        std::fs::write(two.path().join("g"), "x").unwrap();
        assert_eq!(watcher.changes().unwrap(), BTreeSet::from([0]));
    }
}
