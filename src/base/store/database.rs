//! The store's database: opening it below its directory (made when
//! missing, locked for a run, probed for a running apply), its schema
//! migrated, the identity of the system it serves, its id, serial and key.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use rusqlite::{params, Connection, OpenFlags, OptionalExtension};

use crate::error::{Error, Result};

use super::key::StoreKey;
use super::lock::{self, Holder, RunLock};
use super::paths::{self, Location, StoreDir};
use super::schema;
use super::sql::db_error;

/// What a store keeps the state of: a machine and a root on it. A store
/// records it when made and refuses to serve another, so that the items
/// of one system are never planned against another (and resources ral
/// never created there removed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// `local`, or a target's destination as ssh resolves it
    /// (`ssh://USER@HOST:PORT`).
    pub target: String,
    /// The root, made absolute (without resolving links).
    pub root: String,
}

impl Identity {
    /// This machine, below `root`.
    pub fn local(root: &Path) -> Identity {
        Identity::new("local", root)
    }

    /// `target`, below `root`: `.` and repeated or trailing slashes do
    /// not make another root.
    pub fn new(target: &str, root: &Path) -> Identity {
        let absolute = std::path::absolute(root).unwrap_or_else(|_| root.to_owned());
        let root: PathBuf = absolute.components().collect();
        Identity {
            target: target.to_owned(),
            root: root.to_string_lossy().into_owned(),
        }
    }

    fn describe(target: &str, root: &str) -> String {
        format!("{target}, root {root}")
    }
}

/// The database, open.
pub struct Store {
    pub(super) conn: Connection,
    pub(super) path: PathBuf,
    pub(super) dir: StoreDir,
    /// Held, never read: the run lock lasts as long as the store is open.
    /// Declared after `conn`, so dropped after it: closing the locked
    /// descriptor while SQLite has the file open would drop its locks.
    _lock: Option<RunLock>,
    /// Descriptors of the database opened to see whether an apply runs,
    /// closed after `conn` for the same reason.
    probes: Vec<std::fs::File>,
}

impl Store {
    /// Opens (creating it and its directory when missing) the store file
    /// at `path`, with no identity to check and no lock (tests, tools).
    pub fn open(path: &Path) -> Result<Store> {
        Store::open_at(&Location::File(path.to_owned()), None)
    }

    /// Opens (creating it and its directories when missing) the store at
    /// `location`, in WAL mode with full synchronous commits, brings its
    /// schema up to date and checks that it is `identity`'s. A schema
    /// newer than this binary knows is refused.
    pub fn open_at(location: &Location, identity: Option<&Identity>) -> Result<Store> {
        let dir = StoreDir::open(location, true)?.expect("made when missing");
        let db = dir.open_db(true)?.expect("made when missing");
        let id = dir.check_db(&db)?;
        // Closed before SQLite opens the file (see `lock`).
        drop(db);
        Store::connect(location, dir, id, None, identity)
    }

    /// Opens an existing store to read; `None` when there is none yet.
    pub fn open_existing_at(
        location: &Location,
        identity: Option<&Identity>,
    ) -> Result<Option<Store>> {
        let Some(dir) = StoreDir::open(location, false)? else {
            return Ok(None);
        };
        let Some(db) = dir.open_db(false)? else {
            return Ok(None);
        };
        let id = dir.check_db(&db)?;
        drop(db);
        Store::connect(location, dir, id, None, identity).map(Some)
    }

    /// Takes the run lock of the store at `location` for `holder` (waiting
    /// up to `wait` for another holder), then opens it as
    /// [`Store::open_at`]; the lock is held as long as the store is open.
    pub fn open_locked(
        location: &Location,
        identity: Option<&Identity>,
        holder: &Holder,
        wait: std::time::Duration,
    ) -> Result<Store> {
        let dir = StoreDir::open(location, true)?.expect("made when missing");
        let lock = RunLock::acquire(&dir, holder, wait)?;
        let id = lock.db_id();
        Store::connect(location, dir, id, Some(lock), identity)
    }

    /// Opens the database file `dir` holds, which is `id`, through SQLite.
    fn connect(
        location: &Location,
        dir: StoreDir,
        id: paths::FileId,
        lock: Option<RunLock>,
        identity: Option<&Identity>,
    ) -> Result<Store> {
        let path = location.path();
        dir.check_journals()?;
        // SQLite opens the database and its journals by name: the name
        // the kernel gives the open directory holds no link, and SQLite
        // refuses any it meets (NOFOLLOW) and never follows one as the
        // last component of its files.
        let name = dir.sqlite_path()?;
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_NOFOLLOW
            | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(&name, flags).map_err(|e| db_error(&path, e))?;
        let opened = std::fs::symlink_metadata(&name)
            .ok()
            .map(|m| (m.dev(), m.ino()));
        if opened != Some(id) || dir.db_id()? != Some(id) {
            return Err(Error::Store {
                path,
                message: "the file was replaced while it was opened".to_owned(),
            });
        }
        let mut store = Store {
            conn,
            path: path.clone(),
            dir,
            _lock: lock,
            probes: Vec::new(),
        };
        store.configure()?;
        schema::migrate(&mut store.conn).map_err(|e| Error::Store {
            path: path.clone(),
            message: e.to_string(),
        })?;
        store.make_id()?;
        if let Some(identity) = identity {
            store.check_identity(identity, matches!(location, Location::InRoot(_)))?;
        }
        Ok(store)
    }

    /// The apply that holds the store's run lock now, if one does (never
    /// this process's own, which holds it for a whole apply).
    pub fn apply_running(&mut self) -> Result<Option<String>> {
        if self._lock.is_some() {
            return Ok(None);
        }
        let (db, holder) = lock::probe(&self.dir)?;
        self.probes.extend(db);
        Ok(holder)
    }

    /// Records `identity` in a store that has none, and refuses a store
    /// made for another. A root's own store (inside it) belongs to that
    /// root wherever it is mounted: only its target must match, and the
    /// root it records follows the root's path.
    fn check_identity(&mut self, identity: &Identity, in_root: bool) -> Result<()> {
        let target = self.meta("target")?;
        let root = self.meta("root")?;
        let (Some(target), Some(root)) = (target, root) else {
            self.set_meta("target", &identity.target)?;
            return self.set_meta("root", &identity.root);
        };
        let same_root = root == identity.root;
        if target == identity.target && (same_root || in_root) {
            if !same_root {
                log::info!(
                    "{}: the root's store, made for the root {root}, now serves it at {}",
                    self.path.display(),
                    identity.root
                );
                self.set_meta("root", &identity.root)?;
            }
            return Ok(());
        }
        Err(Error::Store {
            path: self.path.clone(),
            message: format!(
                "it keeps the state of {}, and is used now for {}: a store serves one machine \
                 and root (give another --state, or none)",
                Identity::describe(&target, &root),
                Identity::describe(&identity.target, &identity.root)
            ),
        })
    }

    fn meta(&self, key: &str) -> Result<Option<String>> {
        self.conn
            .query_row("SELECT value FROM meta WHERE key = ?1", [key], |row| {
                row.get::<_, String>(0)
            })
            .optional()
            .map_err(|e| self.fail(e))
    }

    fn set_meta(&self, key: &str, value: &str) -> Result<()> {
        self.conn
            .execute(
                "INSERT INTO meta (key, value) VALUES (?1, ?2) \
                 ON CONFLICT (key) DO UPDATE SET value = ?2",
                params![key, value],
            )
            .map(|_| ())
            .map_err(|e| self.fail(e))
    }

    /// The machine and root the store keeps the state of, once recorded.
    pub fn identity(&self) -> Result<Option<Identity>> {
        Ok(match (self.meta("target")?, self.meta("root")?) {
            (Some(target), Some(root)) => Some(Identity { target, root }),
            _ => None,
        })
    }

    fn configure(&mut self) -> Result<()> {
        let path = self.path.clone();
        self.conn
            .busy_timeout(std::time::Duration::from_secs(30))
            .map_err(|e| db_error(&path, e))?;
        self.conn
            .pragma_update(None, "journal_mode", "WAL")
            .map_err(|e| db_error(&path, e))?;
        self.conn
            .pragma_update(None, "synchronous", "FULL")
            .map_err(|e| db_error(&path, e))?;
        self.conn
            .pragma_update(None, "foreign_keys", "ON")
            .map_err(|e| db_error(&path, e))
    }

    /// Gives a new store its identity (a store from before identities
    /// gets one the first time it is opened).
    fn make_id(&mut self) -> Result<()> {
        let bytes: [u8; 16] =
            crate::random::bytes().map_err(|e| Error::io("the kernel's random bytes", e))?;
        self.conn
            .execute(
                "INSERT OR IGNORE INTO meta (key, value) VALUES ('store_id', ?1)",
                params![crate::text::hex(&bytes)],
            )
            .map(|_| ())
            .map_err(|e| self.fail(e))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub(super) fn fail(&self, error: rusqlite::Error) -> Error {
        db_error(&self.path, error)
    }

    /// A number that grows with every change of the items: a saved plan
    /// remembers it, and is refused once it moved.
    pub fn serial(&self) -> Result<i64> {
        self.conn
            .query_row("SELECT value FROM meta WHERE key = 'serial'", [], |row| {
                row.get::<_, String>(0)
            })
            .optional()
            .map_err(|e| self.fail(e))
            .map(|value| value.and_then(|v| v.parse().ok()).unwrap_or(0))
    }

    /// The store's identity: random, made when the store is created, so
    /// that a saved plan made against one store is refused by another.
    pub fn id(&self) -> Result<String> {
        self.conn
            .query_row("SELECT value FROM meta WHERE key = 'store_id'", [], |row| {
                row.get::<_, String>(0)
            })
            .map_err(|e| self.fail(e))
    }

    /// The store's secret key if it has one yet (reading only).
    pub fn existing_key(&self) -> Result<Option<StoreKey>> {
        StoreKey::read(&self.dir)
    }

    /// The store's secret key, made the first time it is asked for.
    pub fn key(&self) -> Result<StoreKey> {
        StoreKey::read_or_make(&self.dir)
    }
}
