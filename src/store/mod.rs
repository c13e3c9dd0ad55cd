//! The state store: what ral applied, kept in an SQLite database so that a
//! later run can tell new items from changed ones, remove what a manifest no
//! longer lists, and report every plan. Items move through LITP's states
//! (Initial, Applied, Updated, ForRemoval; Removed items are deleted);
//! plans and their tasks are recorded as they run, each task's end in its
//! own transaction, so a crash loses no finished change.

mod intents;
mod key;
mod lock;
mod paths;
mod refreshes;
mod schema;
mod snapshots;

pub use snapshots::Snapshot;

use std::path::{Path, PathBuf};

use std::os::unix::fs::MetadataExt;

use rusqlite::{params, Connection, OpenFlags, OptionalExtension};
use serde_json::{Map, Value as Json};

use crate::error::{Error, Result};

pub use intents::{Intent, IntentAction, Settlement};
pub use key::StoreKey;
pub use lock::{Holder, RunLock};
pub use paths::Location;
pub use refreshes::OwedRefresh;

use paths::StoreDir;

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

/// The state of an item (a resource a manifest declares), as in LITP's
/// model item state diagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ItemState {
    /// Declared, never applied yet.
    Initial,
    /// Applied; the manifest still says what was applied.
    Applied,
    /// Applied, but the manifest now says something else.
    Updated,
    /// Applied, and no manifest lists it any more: to be removed.
    ForRemoval,
}

impl ItemState {
    pub fn as_str(self) -> &'static str {
        match self {
            ItemState::Initial => "Initial",
            ItemState::Applied => "Applied",
            ItemState::Updated => "Updated",
            ItemState::ForRemoval => "ForRemoval",
        }
    }

    fn parse(text: &str) -> Option<ItemState> {
        [
            ItemState::Initial,
            ItemState::Applied,
            ItemState::Updated,
            ItemState::ForRemoval,
        ]
        .into_iter()
        .find(|state| state.as_str() == text)
    }
}

/// One item as the store keeps it.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredItem {
    /// The qualified provider name, which with the name identifies it.
    pub provider: String,
    pub type_name: String,
    pub name: String,
    pub state: ItemState,
    /// The attribute values last applied, as JSON; a sensitive value is
    /// kept as `{"hmac": HEX}` under the store's key, never in clear.
    pub properties: Map<String, Json>,
    /// Whether ral created the resource (it was absent when first
    /// applied). Only what ral created is removed when no manifest lists
    /// it any more; the rest is forgotten and left as it is.
    pub created: bool,
    /// The items it came after when last applied, as (provider, name).
    pub requires: Vec<(String, String)>,
    /// For a resource model plugins' config tasks made: the vpaths of the
    /// plugin items whose answers yield it, sorted (several items may
    /// share one). It stays while any of them still yields it: while one
    /// is applied and not expanded again, or its plugin is not found.
    pub owners: Vec<String>,
    /// Its tasks ran and not all succeeded, so what is applied cannot be
    /// told from its properties (LITP's `applied_properties_determinable`
    /// false): it needs work whatever the manifests say.
    pub undetermined: bool,
}

/// A plan as the history shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanRecord {
    pub id: String,
    pub manifest_digest: String,
    pub state: String,
    pub created: f64,
    pub started: Option<f64>,
    pub ended: Option<f64>,
    /// The plan document `ral apply -j` prints: as planned until the
    /// plan ends, as it ended afterwards.
    pub report: Option<String>,
    /// Who started it and why, when not a person (`ral agent`'s runs).
    pub origin: Option<String>,
}

/// One task's end, recorded with what it did to its item.
#[derive(Debug, Clone)]
pub struct TaskEnd<'a> {
    pub plan_id: &'a str,
    pub task_id: usize,
    pub state: &'a str,
    /// The error, as `{kind, message}` JSON, if any.
    pub error: Option<Json>,
    pub changes: Json,
    pub seconds: f64,
    /// What the item becomes: stored (Applied), or deleted (removed).
    pub item: ItemChange<'a>,
    /// The item (provider, name) whose owed refresh this end pays: a
    /// refresh that succeeded, or a task that created, removed, started
    /// or stopped its resource, which a refresh would only repeat.
    pub refreshed: Option<(&'a str, &'a str)>,
}

/// What a task's end does to its item.
#[derive(Debug, Clone)]
pub enum ItemChange<'a> {
    /// Nothing (the task was skipped or stopped, or changes no item).
    Keep,
    /// Nothing, and the intent of the item (provider, name) is its failed
    /// task's, which no later run takes as ral's creation.
    Failed { provider: &'a str, name: &'a str },
    /// Applied with these properties.
    Applied(&'a StoredItem),
    /// Removed: the item is gone.
    Removed { provider: &'a str, name: &'a str },
}

/// The database, open.
pub struct Store {
    conn: Connection,
    path: PathBuf,
    dir: StoreDir,
    /// Held, never read: the run lock lasts as long as the store is open.
    /// Declared after `conn`, so dropped after it: closing the locked
    /// descriptor while SQLite has the file open would drop its locks.
    _lock: Option<RunLock>,
    /// Descriptors of the database opened to see whether an apply runs,
    /// closed after `conn` for the same reason.
    probes: Vec<std::fs::File>,
}

fn db_error(path: &Path, error: rusqlite::Error) -> Error {
    Error::Store {
        path: path.to_owned(),
        message: error.to_string(),
    }
}

/// Seconds since the epoch, for the records' times.
pub fn now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
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

    fn fail(&self, error: rusqlite::Error) -> Error {
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

    /// Every item, ordered by provider and name.
    pub fn items(&self) -> Result<Vec<StoredItem>> {
        let mut statement = self
            .conn
            .prepare(
                "SELECT provider, type, name, state, properties, created, requires, owners, \
                 undetermined FROM items ORDER BY provider, name",
            )
            .map_err(|e| self.fail(e))?;
        let rows = statement
            .query_map([], |row| {
                Ok((
                    row.get::<_, String>(0)?,
                    row.get::<_, String>(1)?,
                    row.get::<_, String>(2)?,
                    row.get::<_, String>(3)?,
                    row.get::<_, String>(4)?,
                    row.get::<_, bool>(5)?,
                    row.get::<_, String>(6)?,
                    row.get::<_, String>(7)?,
                    row.get::<_, bool>(8)?,
                ))
            })
            .map_err(|e| self.fail(e))?;
        let mut items = Vec::new();
        for row in rows {
            let (
                provider,
                type_name,
                name,
                state,
                properties,
                created,
                requires,
                owners,
                undetermined,
            ) = row.map_err(|e| self.fail(e))?;
            let corrupt = |what: &str| Error::Store {
                path: self.path.clone(),
                message: format!("item {provider} '{name}': {what}"),
            };
            let state = ItemState::parse(&state).ok_or_else(|| corrupt("unknown state"))?;
            let properties: Map<String, Json> =
                serde_json::from_str(&properties).map_err(|_| corrupt("unreadable properties"))?;
            let requires: Vec<(String, String)> =
                serde_json::from_str(&requires).map_err(|_| corrupt("unreadable requires"))?;
            let owners: Vec<String> =
                serde_json::from_str(&owners).map_err(|_| corrupt("unreadable owners"))?;
            items.push(StoredItem {
                provider,
                type_name,
                name,
                state,
                properties,
                created,
                requires,
                owners,
                undetermined,
            });
        }
        Ok(items)
    }

    /// Writes items (inserted or replaced) and bumps the serial, in one
    /// transaction.
    pub fn put_items(&mut self, items: &[StoredItem]) -> Result<()> {
        let path = self.path.clone();
        let tx = self.conn.transaction().map_err(|e| db_error(&path, e))?;
        for item in items {
            put_item(&tx, item).map_err(|e| db_error(&path, e))?;
        }
        bump_serial(&tx).map_err(|e| db_error(&path, e))?;
        tx.commit().map_err(|e| db_error(&path, e))
    }

    /// Deletes items by (provider, name); returns how many existed.
    pub fn forget(&mut self, keys: &[(String, String)]) -> Result<usize> {
        let path = self.path.clone();
        let tx = self.conn.transaction().map_err(|e| db_error(&path, e))?;
        let mut gone = 0;
        for (provider, name) in keys {
            gone += tx
                .execute(
                    "DELETE FROM items WHERE provider = ?1 AND name = ?2",
                    params![provider, name],
                )
                .map_err(|e| db_error(&path, e))?;
        }
        bump_serial(&tx).map_err(|e| db_error(&path, e))?;
        tx.commit().map_err(|e| db_error(&path, e))?;
        Ok(gone)
    }

    /// Forgets the items `keys`, and takes off every other item's owners
    /// those that `lets_go(owner, provider, name)`, in one transaction:
    /// the owners are read as they are now (a run may have added some
    /// since it read the store), and an item keeps its other owners.
    pub fn forget_and_release(
        &mut self,
        keys: &[(String, String)],
        lets_go: impl Fn(&str, &str, &str) -> bool,
    ) -> Result<()> {
        let path = self.path.clone();
        let tx = self.conn.transaction().map_err(|e| db_error(&path, e))?;
        for (provider, name) in keys {
            execute_cached(
                &tx,
                "DELETE FROM items WHERE provider = ?1 AND name = ?2",
                params![provider, name],
            )
            .map_err(|e| db_error(&path, e))?;
        }
        release_owners(&tx, &path, lets_go)?;
        bump_serial(&tx).map_err(|e| db_error(&path, e))?;
        tx.commit().map_err(|e| db_error(&path, e))
    }

    /// Records a plan that starts running, with its tasks (Initial).
    pub fn begin_plan(
        &mut self,
        plan: &PlanRecord,
        tasks: &[(usize, String, String, String)],
    ) -> Result<()> {
        let path = self.path.clone();
        let tx = self.conn.transaction().map_err(|e| db_error(&path, e))?;
        execute_cached(
            &tx,
            "INSERT INTO plans (id, manifest_digest, state, created, started, report, origin) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![
                plan.id,
                plan.manifest_digest,
                plan.state,
                plan.created,
                plan.started,
                plan.report,
                plan.origin
            ],
        )
        .map_err(|e| db_error(&path, e))?;
        for (task_id, resource, provider, action) in tasks {
            execute_cached(
                &tx,
                "INSERT INTO tasks (plan_id, task_id, resource, provider, action, state) \
                 VALUES (?1, ?2, ?3, ?4, ?5, 'Initial')",
                params![plan.id, *task_id as i64, resource, provider, action],
            )
            .map_err(|e| db_error(&path, e))?;
        }
        tx.commit().map_err(|e| db_error(&path, e))
    }

    /// Records tasks as started, and the refreshes they may call for as
    /// owed, in one transaction committed before their providers are
    /// called.
    pub fn tasks_started(
        &mut self,
        plan_id: &str,
        task_ids: &[usize],
        owed: &[OwedRefresh],
    ) -> Result<()> {
        let path = self.path.clone();
        let tx = self.conn.transaction().map_err(|e| db_error(&path, e))?;
        for refresh in owed {
            refreshes::owe(&tx, refresh).map_err(|e| db_error(&path, e))?;
        }
        let started = now();
        for &task_id in task_ids {
            execute_cached(
                &tx,
                "UPDATE tasks SET state = 'Running', started = ?3 WHERE plan_id = ?1 AND task_id = ?2",
                params![plan_id, task_id as i64, started],
            )
            .map_err(|e| db_error(&path, e))?;
        }
        tx.commit().map_err(|e| db_error(&path, e))
    }

    /// Records tasks' ends and what each did to its item, in one
    /// transaction committed before this returns: the tasks of a batch end
    /// together, and one commit (one wait for the disk) records them all.
    /// A task that changed its item clears its intent in it (a failed one
    /// leaves it to be settled).
    pub fn tasks_ended(&mut self, ends: &[TaskEnd]) -> Result<()> {
        let path = self.path.clone();
        let tx = self.conn.transaction().map_err(|e| db_error(&path, e))?;
        let ended = now();
        for end in ends {
            record_end(&tx, end, ended).map_err(|e| db_error(&path, e))?;
        }
        tx.commit().map_err(|e| db_error(&path, e))
    }

    /// Records a plan's end with its report.
    pub fn end_plan(&mut self, plan_id: &str, state: &str, report: &str) -> Result<()> {
        self.conn
            .execute(
                "UPDATE plans SET state = ?2, ended = ?3, report = ?4 WHERE id = ?1",
                params![plan_id, state, now(), report],
            )
            .map(|_| ())
            .map_err(|e| self.fail(e))
    }

    /// Plans left Running by a process that died (the caller holds the run
    /// lock, so no other one runs): each is marked Failed and its Running
    /// tasks Failed as interrupted. Returns their ids.
    pub fn recover_dead_plans(&mut self) -> Result<Vec<String>> {
        let path = self.path.clone();
        let tx = self.conn.transaction().map_err(|e| db_error(&path, e))?;
        let ids: Vec<String> = {
            let mut statement = tx
                .prepare("SELECT id FROM plans WHERE state IN ('Running', 'Stopping')")
                .map_err(|e| db_error(&path, e))?;
            let rows = statement
                .query_map([], |row| row.get::<_, String>(0))
                .map_err(|e| db_error(&path, e))?;
            rows.collect::<rusqlite::Result<_>>()
                .map_err(|e| db_error(&path, e))?
        };
        for id in &ids {
            let error = serde_json::json!({
                "kind": "interrupted",
                "message": "the process running the plan ended while this task ran",
            })
            .to_string();
            execute_cached(
                &tx,
                "UPDATE tasks SET state = 'Failed', error = ?2, ended = ?3 \
                 WHERE plan_id = ?1 AND state = 'Running'",
                params![id, error, now()],
            )
            .map_err(|e| db_error(&path, e))?;
            execute_cached(
                &tx,
                "UPDATE tasks SET state = 'Stopped' WHERE plan_id = ?1 AND state = 'Initial'",
                params![id],
            )
            .map_err(|e| db_error(&path, e))?;
            execute_cached(
                &tx,
                "UPDATE plans SET state = 'Failed', ended = ?2 WHERE id = ?1",
                params![id, now()],
            )
            .map_err(|e| db_error(&path, e))?;
        }
        tx.commit().map_err(|e| db_error(&path, e))?;
        Ok(ids)
    }

    /// Every plan, oldest first.
    pub fn history(&self) -> Result<Vec<PlanRecord>> {
        let mut statement = self
            .conn
            .prepare(
                "SELECT id, manifest_digest, state, created, started, ended, report, origin \
                 FROM plans ORDER BY created, id",
            )
            .map_err(|e| self.fail(e))?;
        let rows = statement
            .query_map([], |row| {
                Ok(PlanRecord {
                    id: row.get(0)?,
                    manifest_digest: row.get(1)?,
                    state: row.get(2)?,
                    created: row.get(3)?,
                    started: row.get(4)?,
                    ended: row.get(5)?,
                    report: row.get(6)?,
                    origin: row.get(7)?,
                })
            })
            .map_err(|e| self.fail(e))?;
        rows.collect::<rusqlite::Result<_>>()
            .map_err(|e| self.fail(e))
    }

    /// The tasks of a plan as recorded: (id, resource, provider, action,
    /// state, error JSON).
    pub fn tasks(&self, plan_id: &str) -> Result<Vec<RecordedTask>> {
        let mut statement = self
            .conn
            .prepare(
                "SELECT task_id, resource, provider, action, state, error, changes, seconds \
                 FROM tasks WHERE plan_id = ?1 ORDER BY task_id",
            )
            .map_err(|e| self.fail(e))?;
        let rows = statement
            .query_map(params![plan_id], |row| {
                Ok(RecordedTask {
                    id: row.get::<_, i64>(0)? as usize,
                    resource: row.get(1)?,
                    provider: row.get(2)?,
                    action: row.get(3)?,
                    state: row.get(4)?,
                    error: row.get(5)?,
                    changes: row.get(6)?,
                    seconds: row.get(7)?,
                })
            })
            .map_err(|e| self.fail(e))?;
        rows.collect::<rusqlite::Result<_>>()
            .map_err(|e| self.fail(e))
    }
}

/// A task as the store recorded it.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedTask {
    pub id: usize,
    pub resource: String,
    pub provider: String,
    pub action: String,
    pub state: String,
    pub error: Option<String>,
    pub changes: Option<String>,
    pub seconds: Option<f64>,
}

fn put_item(tx: &rusqlite::Transaction, item: &StoredItem) -> rusqlite::Result<()> {
    let requires = serde_json::to_string(&item.requires).unwrap_or_else(|_| "[]".to_owned());
    execute_cached(
        tx,
        "INSERT INTO items (provider, name, type, state, properties, created, requires, updated, \
         owners, undetermined) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10) \
         ON CONFLICT (provider, name) DO UPDATE SET type = ?3, state = ?4, properties = ?5, \
         created = ?6, requires = ?7, updated = ?8, owners = ?9, undetermined = ?10",
        params![
            item.provider,
            item.name,
            item.type_name,
            item.state.as_str(),
            Json::Object(item.properties.clone()).to_string(),
            item.created,
            requires,
            now(),
            owners_text(&item.owners),
            item.undetermined
        ],
    )
    .map(|_| ())
}

/// Takes off each item's owners those that `lets_go(owner, provider,
/// name)`, within `tx`.
fn release_owners(
    tx: &rusqlite::Transaction,
    path: &std::path::Path,
    lets_go: impl Fn(&str, &str, &str) -> bool,
) -> Result<()> {
    let owned: Vec<(String, String, String)> = {
        let mut statement = tx
            .prepare("SELECT provider, name, owners FROM items WHERE owners != '[]'")
            .map_err(|e| db_error(path, e))?;
        let rows = statement
            .query_map([], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))
            .map_err(|e| db_error(path, e))?;
        rows.collect::<rusqlite::Result<_>>()
            .map_err(|e| db_error(path, e))?
    };
    for (provider, name, text) in owned {
        let owners: Vec<String> = serde_json::from_str(&text).map_err(|_| Error::Store {
            path: path.to_owned(),
            message: format!("item {provider} '{name}': unreadable owners"),
        })?;
        let kept: Vec<&String> = (owners.iter())
            .filter(|owner| !lets_go(owner, &provider, &name))
            .collect();
        if kept.len() < owners.len() {
            let kept = serde_json::to_string(&kept).unwrap_or_else(|_| "[]".to_owned());
            execute_cached(
                tx,
                "UPDATE items SET owners = ?3 WHERE provider = ?1 AND name = ?2",
                params![provider, name, kept],
            )
            .map_err(|e| db_error(path, e))?;
        }
    }
    Ok(())
}

/// Owners as the store keeps them: a JSON list of vpaths.
fn owners_text(owners: &[String]) -> String {
    serde_json::to_string(owners).unwrap_or_else(|_| "[]".to_owned())
}

/// Runs one statement through the connection's cache of prepared
/// statements: a run records every task's start and end, and preparing
/// the same SQL again for each was a quarter of the CPU of applying a
/// thousand files.
fn execute_cached(
    conn: &rusqlite::Connection,
    sql: &str,
    params: impl rusqlite::Params,
) -> rusqlite::Result<usize> {
    conn.prepare_cached(sql)?.execute(params)
}

fn bump_serial(tx: &rusqlite::Transaction) -> rusqlite::Result<()> {
    execute_cached(
        tx,
        "INSERT INTO meta (key, value) VALUES ('serial', '1') \
         ON CONFLICT (key) DO UPDATE SET value = CAST(value AS INTEGER) + 1",
        [],
    )
    .map(|_| ())
}

/// One task's end, in the caller's transaction (see [`Store::tasks_ended`]).
fn record_end(tx: &rusqlite::Transaction, end: &TaskEnd, ended: f64) -> rusqlite::Result<()> {
    execute_cached(
        tx,
        "UPDATE tasks SET state = ?3, error = ?4, changes = ?5, seconds = ?6, ended = ?7 \
         WHERE plan_id = ?1 AND task_id = ?2",
        params![
            end.plan_id,
            end.task_id as i64,
            end.state,
            end.error.as_ref().map(Json::to_string),
            end.changes.to_string(),
            end.seconds,
            ended
        ],
    )?;
    if let Some((provider, name)) = end.refreshed {
        refreshes::paid(tx, provider, name)?;
    }
    match &end.item {
        ItemChange::Keep => {}
        ItemChange::Failed { provider, name } => intents::mark_failed(tx, provider, name)?,
        ItemChange::Applied(item) => {
            put_item(tx, item)?;
            intents::clear(tx, &item.provider, &item.name)?;
            bump_serial(tx)?;
        }
        ItemChange::Removed { provider, name } => {
            execute_cached(
                tx,
                "DELETE FROM items WHERE provider = ?1 AND name = ?2",
                params![provider, name],
            )?;
            intents::clear(tx, provider, name)?;
            bump_serial(tx)?;
        }
    }
    Ok(())
}

#[cfg(test)]
impl PlanRecord {
    /// A plan started and running, for the store's tests.
    pub(crate) fn running(id: &str) -> PlanRecord {
        PlanRecord {
            id: id.to_owned(),
            manifest_digest: "d".to_owned(),
            state: "Running".to_owned(),
            created: 1.0,
            started: Some(1.0),
            ended: None,
            report: None,
            origin: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(name: &str, state: ItemState) -> StoredItem {
        StoredItem {
            provider: "t::t".to_owned(),
            type_name: "t".to_owned(),
            name: name.to_owned(),
            state,
            properties: serde_json::json!({"value": name})
                .as_object()
                .unwrap()
                .clone(),
            created: true,
            requires: vec![("t::t".to_owned(), "other".to_owned())],
            owners: Vec::new(),
            undetermined: false,
        }
    }

    #[test]
    fn items_round_trip_and_every_change_moves_the_serial() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/state.db");
        let mut store = Store::open(&path).unwrap();
        assert_eq!(store.serial().unwrap(), 0);
        store
            .put_items(&[item("a", ItemState::Initial), item("b", ItemState::Applied)])
            .unwrap();
        assert_eq!(store.serial().unwrap(), 1);
        assert_eq!(
            store.items().unwrap(),
            [item("a", ItemState::Initial), item("b", ItemState::Applied)]
        );
        store.put_items(&[item("a", ItemState::Updated)]).unwrap();
        assert_eq!(store.items().unwrap()[0].state, ItemState::Updated);
        assert_eq!(
            store
                .forget(&[("t::t".to_owned(), "a".to_owned())])
                .unwrap(),
            1
        );
        assert_eq!(store.serial().unwrap(), 3);
        drop(store);
        let again = Store::open(&path).unwrap();
        assert_eq!(again.items().unwrap(), [item("b", ItemState::Applied)]);
        let id = Store::open(&path).unwrap().id().unwrap();
        assert_eq!(id.len(), 32);
        assert_eq!(Store::open(&path).unwrap().id().unwrap(), id);
        let other = Store::open(&dir.path().join("other.db")).unwrap();
        assert_ne!(other.id().unwrap(), id);
    }

    #[test]
    fn forgetting_an_owner_keeps_what_others_still_own() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("state.db")).unwrap();
        let owned = |name: &str, owners: &[&str]| StoredItem {
            owners: owners.iter().map(|o| (*o).to_owned()).collect(),
            ..item(name, ItemState::Applied)
        };
        store
            .put_items(&[
                owned("shared", &["/x/a", "/x/b"]),
                owned("mine", &["/x/a"]),
                owned("theirs", &["/x/b"]),
                item("a", ItemState::Applied),
            ])
            .unwrap();
        store
            .forget_and_release(&[("t::t".to_owned(), "a".to_owned())], |owner, _, name| {
                owner == "/x/a" && name != "mine"
            })
            .unwrap();
        assert_eq!(
            store.items().unwrap(),
            [
                owned("mine", &["/x/a"]),
                owned("shared", &["/x/b"]),
                owned("theirs", &["/x/b"])
            ]
        );
    }

    #[test]
    fn a_plan_left_running_is_failed_with_its_running_tasks_interrupted() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("state.db")).unwrap();
        let record = PlanRecord::running("p1");
        let tasks = [
            (1, "t[a]".to_owned(), "t::t".to_owned(), "create".to_owned()),
            (2, "t[b]".to_owned(), "t::t".to_owned(), "create".to_owned()),
        ];
        store.begin_plan(&record, &tasks).unwrap();
        store.tasks_started("p1", &[1], &[]).unwrap();
        assert_eq!(store.recover_dead_plans().unwrap(), ["p1"]);
        let states: Vec<(String, Option<String>)> = store
            .tasks("p1")
            .unwrap()
            .into_iter()
            .map(|t| (t.state, t.error))
            .collect();
        assert_eq!(states[0].0, "Failed");
        assert!(states[0].1.as_deref().unwrap().contains("\"interrupted\""));
        assert_eq!(states[1].0, "Stopped");
        assert_eq!(store.history().unwrap()[0].state, "Failed");
        assert!(store.recover_dead_plans().unwrap().is_empty());
    }

    #[test]
    fn the_lock_is_exclusive_names_its_holder_and_goes_with_its_value() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        let at = Location::File(path.clone());
        let wait = std::time::Duration::from_millis(50);
        let held = Store::open_locked(&at, None, &Holder::me("p1"), wait).unwrap();
        let err = Store::open_locked(&at, None, &Holder::me("p2"), wait)
            .err()
            .unwrap()
            .to_string();
        assert!(
            err.contains(&format!("process {} on ", std::process::id())),
            "{err}"
        );
        assert!(err.contains("plan p1"), "{err}");
        // Through a second name of the file, its lock file names nobody:
        // the kernel still knows the holder.
        let other = dir.path().join("other.db");
        std::fs::hard_link(&path, &other).unwrap();
        let err = Store::open_locked(&Location::File(other), None, &Holder::me("p2"), wait)
            .err()
            .unwrap()
            .to_string();
        assert!(
            err.contains(&format!("process {}", std::process::id())),
            "{err}"
        );
        drop(held);
        std::fs::remove_file(dir.path().join("other.db")).unwrap();
        Store::open_locked(&at, None, &Holder::me("p3"), std::time::Duration::ZERO).unwrap();
    }

    #[test]
    fn a_store_refuses_another_machine_or_root_but_follows_its_own_root() {
        let dir = tempfile::tempdir().unwrap();
        let at = Location::File(dir.path().join("s.db"));
        let a = Identity::local(Path::new("/srv/a/"));
        assert_eq!(a.root, "/srv/a");
        Store::open_at(&at, Some(&a)).unwrap();
        Store::open_at(&at, Some(&Identity::local(Path::new("/srv/./a")))).unwrap();
        let err = Store::open_at(&at, Some(&Identity::local(Path::new("/srv/b"))))
            .err()
            .unwrap()
            .to_string();
        assert!(
            err.contains(
                "it keeps the state of local, root /srv/a, and is used now for local, root /srv/b"
            ),
            "{err}"
        );
        let remote = Identity::new("ssh://u@h:22", Path::new("/srv/a"));
        assert!(Store::open_at(&at, Some(&remote)).is_err());
        assert_eq!(
            Store::open(at.path().as_path())
                .unwrap()
                .identity()
                .unwrap(),
            Some(a)
        );

        let root = tempfile::tempdir().unwrap();
        let own = Location::InRoot(root.path().to_owned());
        Store::open_at(&own, Some(&Identity::local(root.path()))).unwrap();
        let moved = Identity::local(Path::new("/mnt/image"));
        let store = Store::open_at(&own, Some(&moved)).unwrap();
        assert_eq!(store.identity().unwrap(), Some(moved));
        assert!(Store::open_at(&own, Some(&remote)).is_err());
    }
}
