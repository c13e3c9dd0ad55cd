//! Where a store's files are, reached without following links. Below a
//! root, the directories `var`, `lib` and `ral` are opened one at a time,
//! each relative to the one before and never through a symbolic link (the
//! rule the providers' toolkit follows), and missing ones are made: `var`
//! and `lib` 0755 as on any system, `ral` 0700, since it holds the store
//! and its key. The store's own files (`state.db`, its `-wal`, `-shm` and
//! `-journal`, `STORE.lock`, `STORE.key`) are opened relative to that
//! directory, never through a link, must be regular files with one name
//! (a hard link would be a second way in), and are private (0600). With
//! `--state FILE` the directories are the user's choice and are followed;
//! the files still are not.
//!
//! SQLite opens its files by name: it is given the directory's path as the
//! kernel names the open descriptor (no link on the way), refuses any link
//! it meets, and never follows one as the last component; the database it
//! opened is then checked to be the file checked here. What remains is a
//! race with someone swapping a directory while the store opens, which
//! only whoever may write in the store's directory can run.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::sdk::files::sys::{self, Mode, OFlags};
use crate::sdk::files::Stat;

/// The directories below a root that hold its store, and the modes they
/// are made with.
const IN_ROOT: [(&str, u32); 3] = [("var", 0o755), ("lib", 0o755), ("ral", 0o700)];

/// The database's name in a root's store directory.
const DB_NAME: &str = "state.db";

/// SQLite's files beside the database.
const JOURNALS: [&str; 3] = ["-wal", "-shm", "-journal"];

/// Where a store is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// A root's own store, `ROOT/var/lib/ral/state.db`.
    InRoot(PathBuf),
    /// A database file the user named (`--state FILE`) or a target's store
    /// on this machine.
    File(PathBuf),
}

impl Location {
    /// The database's path, for messages.
    pub fn path(&self) -> PathBuf {
        match self {
            Location::InRoot(root) => root.join("var/lib/ral").join(DB_NAME),
            Location::File(path) => path.clone(),
        }
    }
}

/// A store's directory, open, and the database's name in it.
#[derive(Debug)]
pub(crate) struct StoreDir {
    dir: File,
    /// The directory's path, for messages.
    shown: PathBuf,
    name: OsString,
}

/// The device and inode of a file: what it is, whatever path reaches it.
pub(crate) type FileId = (u64, u64);

fn store_error(path: &Path, message: impl Into<String>) -> Error {
    Error::Store {
        path: path.to_owned(),
        message: message.into(),
    }
}

/// The store's files are private: 0600.
const PRIVATE: Mode = Mode::RUSR.union(Mode::WUSR);

/// `openat` relative to `dir`, never following a link in the last
/// component, never blocking on a FIFO.
fn open_at(dir: &File, name: &OsStr, flags: OFlags, mode: Mode) -> io::Result<File> {
    let flags = flags | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NOCTTY | OFlags::NONBLOCK;
    sys::open_at(dir.as_fd(), name, flags, mode).map(File::from)
}

/// What `name` in `dir` is, without following a link; `None` when absent.
fn lstat_at(dir: &File, name: &OsStr) -> io::Result<Option<Stat>> {
    match sys::lstat_at(dir.as_fd(), name) {
        Ok(stat) => Ok(Some(stat)),
        Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(error) => Err(error),
    }
}

/// Opens the directory `name` below `dir` without following a link,
/// making it with `mode` when it is missing and `create`; `None` when it
/// is missing and not to be made.
fn open_below(
    dir: &File,
    name: &str,
    shown: &Path,
    create: bool,
    mode: u32,
) -> Result<Option<File>> {
    let name = OsStr::new(name);
    let flags = OFlags::RDONLY | OFlags::DIRECTORY;
    let mut made = false;
    loop {
        match open_at(dir, name, flags, Mode::empty()) {
            Ok(opened) => return Ok(Some(opened)),
            Err(e) if e.kind() == io::ErrorKind::NotFound && create && !made => {
                match sys::mkdir_at(dir.as_fd(), name, Mode::from_raw_mode(mode)) {
                    Err(error) if error.kind() != io::ErrorKind::AlreadyExists => {
                        return Err(store_error(
                            shown,
                            format!("cannot make the directory: {error}"),
                        ));
                    }
                    _ => made = true,
                }
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound && !create => return Ok(None),
            Err(e) => {
                let message = match lstat_at(dir, name) {
                    Ok(Some(stat)) if stat.is_symlink() => {
                        "is a symbolic link: the state store's directories below the root are \
                         never followed (remove the link, or give --state FILE)"
                            .to_owned()
                    }
                    Ok(Some(_)) if e.raw_os_error() == Some(libc::ENOTDIR) => {
                        "is not a directory".to_owned()
                    }
                    _ => format!("cannot open the directory: {e}"),
                };
                return Err(store_error(shown, message));
            }
        }
    }
}

/// A plain error for a file that is a link, not regular, or has several
/// names; `None` when it is fine.
fn refusal(stat: &Stat) -> Option<String> {
    if stat.is_symlink() {
        Some("is a symbolic link: the state store's files are never followed".to_owned())
    } else if !stat.is_file() {
        Some("is not a regular file".to_owned())
    } else if stat.nlink() > 1 {
        Some(format!(
            "has {} names (hard links): a state store's files must have one, so that no \
             other path reaches them",
            stat.nlink()
        ))
    } else {
        None
    }
}

/// Checks an open file as [`refusal`] does and makes it private (0600)
/// when it is not; returns what it is.
fn check_open(file: &File, path: &Path) -> Result<FileId> {
    let meta = file
        .metadata()
        .map_err(|e| store_error(path, format!("cannot read its status: {e}")))?;
    if !meta.is_file() {
        return Err(store_error(path, "is not a regular file"));
    }
    if meta.nlink() > 1 {
        return Err(store_error(
            path,
            format!(
                "has {} names (hard links): a state store's files must have one, so that no \
                 other path reaches them",
                meta.nlink()
            ),
        ));
    }
    if meta.mode() & 0o077 != 0 {
        // Made before stores were private: a copy of it must not stay
        // readable by all. Not ours to change (another user's store read
        // by a plan): said, not fatal.
        if let Err(e) = file.set_permissions(std::fs::Permissions::from_mode(0o600)) {
            log::warn!(
                "{} is mode {:o}, readable by others, and cannot be made private: {e}",
                path.display(),
                meta.mode() & 0o777
            );
        }
    }
    Ok((meta.dev(), meta.ino()))
}

impl StoreDir {
    /// Opens the directory of the store at `location`, making the missing
    /// directories when `create`; `None` when one is missing and not.
    pub fn open(location: &Location, create: bool) -> Result<Option<StoreDir>> {
        match location {
            Location::InRoot(root) => {
                let fail = |e: io::Error| {
                    store_error(
                        &location.path(),
                        format!("cannot open the root {}: {e}", root.display()),
                    )
                };
                // The root itself is the user's choice.
                let mut dir = std::fs::OpenOptions::new()
                    .read(true)
                    .custom_flags_directory()
                    .open(root)
                    .map_err(fail)?;
                let mut shown = root.clone();
                for (name, mode) in IN_ROOT {
                    shown.push(name);
                    match open_below(&dir, name, &shown, create, mode)? {
                        Some(below) => dir = below,
                        None => return Ok(None),
                    }
                }
                Ok(Some(StoreDir {
                    dir,
                    shown,
                    name: OsString::from(DB_NAME),
                }))
            }
            Location::File(path) => {
                let name = path
                    .file_name()
                    .filter(|_| !path.as_os_str().as_bytes().ends_with(b"/"))
                    .ok_or_else(|| store_error(path, "names no file"))?;
                // Shown as given; opened as "." when it is empty.
                let shown = path.parent().unwrap_or(Path::new(""));
                let parent = Some(shown)
                    .filter(|d| !d.as_os_str().is_empty())
                    .unwrap_or(Path::new("."));
                if create {
                    std::fs::DirBuilder::new()
                        .recursive(true)
                        .mode(0o700)
                        .create(parent)
                        .map_err(|e| {
                            store_error(path, format!("cannot make its directory: {e}"))
                        })?;
                }
                let dir = match std::fs::OpenOptions::new()
                    .read(true)
                    .custom_flags_directory()
                    .open(parent)
                {
                    Ok(dir) => dir,
                    Err(e) if e.kind() == io::ErrorKind::NotFound && !create => return Ok(None),
                    Err(e) => {
                        return Err(store_error(path, format!("cannot open its directory: {e}")))
                    }
                };
                Ok(Some(StoreDir {
                    dir,
                    shown: shown.to_owned(),
                    name: name.to_owned(),
                }))
            }
        }
    }

    /// The name of the store's file with `suffix` (`""` for the database).
    fn name_with(&self, suffix: &str) -> OsString {
        let mut name = self.name.clone();
        name.push(suffix);
        name
    }

    /// The path of the store's file with `suffix`, for messages.
    pub fn path_of(&self, suffix: &str) -> PathBuf {
        self.shown.join(self.name_with(suffix))
    }

    fn refuse_link(&self, suffix: &str, error: io::Error) -> Error {
        let path = self.path_of(suffix);
        match lstat_at(&self.dir, &self.name_with(suffix)) {
            Ok(Some(stat)) if refusal(&stat).is_some() => {
                store_error(&path, refusal(&stat).unwrap_or_default())
            }
            _ => store_error(&path, format!("cannot open: {error}")),
        }
    }

    /// Opens the database file itself (read and write), making it empty
    /// and private when `create`; `None` when it is missing and not. It is
    /// not checked yet: see [`StoreDir::check_db`].
    pub fn open_db(&self, create: bool) -> Result<Option<File>> {
        let mut flags = OFlags::RDWR;
        if create {
            flags |= OFlags::CREATE;
        }
        match open_at(&self.dir, &self.name, flags, PRIVATE) {
            Ok(file) => Ok(Some(file)),
            Err(e) if e.kind() == io::ErrorKind::NotFound && !create => Ok(None),
            Err(e) => Err(self.refuse_link("", e)),
        }
    }

    /// Checks the open database file: regular, one name, private.
    pub fn check_db(&self, file: &File) -> Result<FileId> {
        check_open(file, &self.path_of(""))
    }

    /// The device and inode of the open database file.
    pub fn id_of(&self, file: &File) -> Result<FileId> {
        file.metadata()
            .map(|m| (m.dev(), m.ino()))
            .map_err(|e| store_error(&self.path_of(""), e.to_string()))
    }

    /// What the database file is now, without following a link.
    pub fn db_id(&self) -> Result<Option<FileId>> {
        lstat_at(&self.dir, &self.name)
            .map(|stat| stat.map(|s| (s.dev(), s.ino())))
            .map_err(|e| store_error(&self.path_of(""), e.to_string()))
    }

    /// Refuses SQLite's journals when one is a link, not a regular file,
    /// or has another name, and makes them private. SQLite opens them
    /// itself, by name, never following a link in the last component.
    pub fn check_journals(&self) -> Result<()> {
        for suffix in JOURNALS {
            let name = self.name_with(suffix);
            let stat = lstat_at(&self.dir, &name)
                .map_err(|e| store_error(&self.path_of(suffix), e.to_string()))?;
            let Some(stat) = stat else { continue };
            if let Some(why) = refusal(&stat) {
                return Err(store_error(&self.path_of(suffix), why));
            }
            if stat.mode() & 0o077 != 0 {
                let file = open_at(&self.dir, &name, OFlags::RDONLY, Mode::empty())
                    .map_err(|e| self.refuse_link(suffix, e))?;
                check_open(&file, &self.path_of(suffix))?;
            }
        }
        Ok(())
    }

    /// The database's path as the kernel knows its directory (no link on
    /// the way), for SQLite, which opens its files by name.
    pub fn sqlite_path(&self) -> Result<PathBuf> {
        let fd_path = format!("/proc/self/fd/{}", self.dir.as_raw_fd());
        let dir = std::fs::read_link(&fd_path).map_err(|e| {
            store_error(
                &self.path_of(""),
                format!("cannot tell where its directory is ({fd_path}): {e}"),
            )
        })?;
        Ok(dir.join(&self.name))
    }

    /// Opens (making it, 0600) the store's file with `suffix` to read and
    /// write, as [`StoreDir::open_db`] checks it.
    pub fn open_private(&self, suffix: &str) -> Result<File> {
        let file = open_at(
            &self.dir,
            &self.name_with(suffix),
            OFlags::RDWR | OFlags::CREATE,
            PRIVATE,
        )
        .map_err(|e| self.refuse_link(suffix, e))?;
        check_open(&file, &self.path_of(suffix))?;
        Ok(file)
    }

    /// Reads the store's file with `suffix` if it is a regular file of at
    /// most `max` bytes with one name; `None` when it does not exist.
    pub fn read_small(&self, suffix: &str, max: usize) -> Result<Option<Vec<u8>>> {
        let path = self.path_of(suffix);
        let file = match open_at(
            &self.dir,
            &self.name_with(suffix),
            OFlags::RDONLY,
            Mode::empty(),
        ) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(self.refuse_link(suffix, e)),
        };
        check_open(&file, &path)?;
        let mut bytes = Vec::new();
        file.take(max as u64 + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| store_error(&path, format!("cannot read: {e}")))?;
        if bytes.len() > max {
            return Err(store_error(&path, format!("is larger than {max} bytes")));
        }
        Ok(Some(bytes))
    }

    /// Puts `bytes` in the store's file with `suffix` (0600) unless it
    /// exists: written to a new temporary file, then linked into place, so
    /// that nobody sees it half written and two writers agree on one.
    /// Returns whether this call put it there.
    pub fn create_once(&self, suffix: &str, bytes: &[u8]) -> Result<bool> {
        let path = self.path_of(suffix);
        let fail = |e: io::Error| store_error(&path, format!("cannot write: {e}"));
        let random: [u8; 8] =
            crate::random::bytes().map_err(|e| Error::io("the kernel's random bytes", e))?;
        let temporary = OsString::from(format!(".ral-new-{}", crate::text::hex(&random)));
        let mut file = open_at(
            &self.dir,
            &temporary,
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL,
            PRIVATE,
        )
        .map_err(fail)?;
        let written = io::Write::write_all(&mut file, bytes).and_then(|()| file.sync_all());
        let linked = written.and_then(|()| {
            match sys::link_at(self.dir.as_fd(), &temporary, &self.name_with(suffix)) {
                Ok(()) => Ok(true),
                Err(error) if error.kind() == io::ErrorKind::AlreadyExists => Ok(false),
                Err(error) => Err(error),
            }
        });
        // Linked or not, the temporary name goes; one left behind is only
        // a stray file.
        let _ = sys::unlink_at(self.dir.as_fd(), &temporary);
        let made = linked.map_err(fail)?;
        // A new directory entry is durable once its directory is synced;
        // a failure only costs durability.
        let _ = self.dir.sync_all();
        Ok(made)
    }
}

/// Opening a directory with `O_DIRECTORY`.
trait DirectoryFlag {
    fn custom_flags_directory(&mut self) -> &mut Self;
}

impl DirectoryFlag for std::fs::OpenOptions {
    fn custom_flags_directory(&mut self) -> &mut Self {
        std::os::unix::fs::OpenOptionsExt::custom_flags(self, libc::O_DIRECTORY | libc::O_CLOEXEC)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directories_below_the_root_are_made_and_links_among_them_refused() {
        let root = tempfile::tempdir().unwrap();
        let location = Location::InRoot(root.path().to_owned());
        assert!(StoreDir::open(&location, false).unwrap().is_none());
        let dir = StoreDir::open(&location, true).unwrap().unwrap();
        assert_eq!(dir.path_of(""), root.path().join("var/lib/ral/state.db"));
        let mode = |p: &str| std::fs::metadata(root.path().join(p)).unwrap().mode() & 0o777;
        assert_eq!(mode("var/lib/ral"), 0o700);

        let other = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), other.path().join("var")).unwrap();
        let err = StoreDir::open(&Location::InRoot(other.path().to_owned()), true)
            .unwrap_err()
            .to_string();
        assert!(err.contains("/var: is a symbolic link"), "{err}");
        assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
    }

    #[test]
    fn the_stores_files_are_private_single_named_and_never_links() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("s.db");
        let store = StoreDir::open(&Location::File(db.clone()), true)
            .unwrap()
            .unwrap();
        store
            .check_db(&store.open_db(true).unwrap().unwrap())
            .unwrap();
        assert_eq!(std::fs::metadata(&db).unwrap().mode() & 0o777, 0o600);
        std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o644)).unwrap();
        store
            .check_db(&store.open_db(false).unwrap().unwrap())
            .unwrap();
        assert_eq!(std::fs::metadata(&db).unwrap().mode() & 0o777, 0o600);

        std::fs::hard_link(&db, dir.path().join("alias")).unwrap();
        let db_file = store.open_db(false).unwrap().unwrap();
        let err = store.check_db(&db_file).unwrap_err().to_string();
        assert!(err.contains("has 2 names"), "{err}");
        std::fs::remove_file(dir.path().join("alias")).unwrap();

        std::fs::write(dir.path().join("elsewhere"), "x").unwrap();
        std::os::unix::fs::symlink("elsewhere", dir.path().join("s.db-wal")).unwrap();
        let err = store.check_journals().unwrap_err().to_string();
        assert!(err.contains("s.db-wal: is a symbolic link"), "{err}");
        std::os::unix::fs::symlink("elsewhere", dir.path().join("s.db.lock")).unwrap();
        let err = store.open_private(".lock").unwrap_err().to_string();
        assert!(err.contains("s.db.lock: is a symbolic link"), "{err}");
        assert_eq!(
            std::fs::read_to_string(dir.path().join("elsewhere")).unwrap(),
            "x"
        );

        assert!(store.create_once(".key", b"k").unwrap());
        assert!(!store.create_once(".key", b"other").unwrap());
        assert_eq!(store.read_small(".key", 4).unwrap().unwrap(), b"k");
    }

    fn store_in(dir: &Path) -> StoreDir {
        StoreDir::open(&Location::File(dir.join("s.db")), true)
            .unwrap()
            .unwrap()
    }

    #[test]
    fn below_the_root_a_file_a_link_and_a_directory_that_cannot_be_made_are_each_said() {
        let root = tempfile::tempdir().unwrap();
        std::fs::write(root.path().join("var"), "x").unwrap();
        for create in [false, true] {
            let err = StoreDir::open(&Location::InRoot(root.path().to_owned()), create)
                .unwrap_err()
                .to_string();
            assert!(err.ends_with("/var: is not a directory"), "{err}");
        }
        // Only read (a plan): a link is refused, not taken for a missing store.
        let other = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), other.path().join("var")).unwrap();
        let err = StoreDir::open(&Location::InRoot(other.path().to_owned()), false)
            .unwrap_err()
            .to_string();
        assert!(err.contains("/var: is a symbolic link"), "{err}");
        // /proc/self takes no new directory, even from root: the failed
        // mkdir is reported as such (and nothing is made anywhere).
        let err = StoreDir::open(&Location::InRoot(PathBuf::from("/proc/self")), true)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("/proc/self/var: cannot make the directory"),
            "{err}"
        );
    }

    #[test]
    fn a_missing_store_is_none_unmade_and_a_wrong_one_refused() {
        let dir = tempfile::tempdir().unwrap();
        let missing = Location::File(dir.path().join("missing/s.db"));
        assert!(StoreDir::open(&missing, false).unwrap().is_none());
        assert!(!dir.path().join("missing").exists());
        std::fs::write(dir.path().join("file"), "x").unwrap();
        let err = StoreDir::open(&Location::File(dir.path().join("file/s.db")), false)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("file/s.db: cannot open its directory"),
            "{err}"
        );

        let store = StoreDir::open(&Location::File(dir.path().join("s.db")), false)
            .unwrap()
            .unwrap();
        assert!(store.open_db(false).unwrap().is_none());
        assert!(!dir.path().join("s.db").exists());
        std::os::unix::fs::symlink("file", dir.path().join("s.db")).unwrap();
        for create in [false, true] {
            let err = store.open_db(create).unwrap_err().to_string();
            assert!(err.contains("s.db: is a symbolic link"), "{err}");
        }
    }

    #[test]
    fn journals_are_made_private_and_refused_with_a_second_name() {
        let dir = tempfile::tempdir().unwrap();
        let store = store_in(dir.path());
        let wal = dir.path().join("s.db-wal");
        std::fs::write(&wal, "").unwrap();
        std::fs::set_permissions(&wal, std::fs::Permissions::from_mode(0o644)).unwrap();
        store.check_journals().unwrap();
        assert_eq!(std::fs::metadata(&wal).unwrap().mode() & 0o777, 0o600);
        std::fs::hard_link(&wal, dir.path().join("copy")).unwrap();
        let err = store.check_journals().unwrap_err().to_string();
        assert!(err.contains("s.db-wal: has 2 names"), "{err}");
    }

    #[test]
    fn small_files_are_read_whole_up_to_their_bound_never_waited_on_nor_inherited() {
        let dir = tempfile::tempdir().unwrap();
        let store = store_in(dir.path());
        std::fs::write(dir.path().join("s.db.key"), "abcd").unwrap();
        assert_eq!(store.read_small(".key", 4).unwrap().unwrap(), b"abcd");
        let err = store.read_small(".key", 3).unwrap_err().to_string();
        assert!(err.contains("s.db.key: is larger than 3 bytes"), "{err}");
        // A FIFO in its place is refused at once, not waited on.
        std::fs::remove_file(dir.path().join("s.db.key")).unwrap();
        rustix::fs::mkfifoat(rustix::fs::CWD, dir.path().join("s.db.key"), PRIVATE).unwrap();
        let err = store.read_small(".key", 64).unwrap_err().to_string();
        assert!(err.contains("s.db.key: is not a regular file"), "{err}");
        // Providers are children: none may inherit the database file, whose
        // flock would then outlive ral.
        let db = store.open_db(true).unwrap().unwrap();
        let flags = rustix::io::fcntl_getfd(&db).unwrap();
        assert!(flags.contains(rustix::io::FdFlags::CLOEXEC));
    }
}
