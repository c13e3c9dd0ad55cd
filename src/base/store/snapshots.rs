//! Snapshots (`ral snapshot`): per name, when it was made, the model as
//! applied then (what a plugin restoring it is given), and the last action
//! run on it with how that plan ended.

use rusqlite::{params, OptionalExtension};

use super::database::Store;
use super::sql::{db_error, now};
use crate::error::Result;

/// One snapshot as the store keeps it.
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    pub name: String,
    /// Seconds since the epoch.
    pub created: f64,
    /// The model (`{"items": [...]}`) as applied when it was made.
    pub model: String,
    /// The last action run on it: create, remove or restore.
    pub action: String,
    /// How that plan ended (Successful, Failed, Stopped).
    pub state: String,
    pub updated: f64,
}

impl Store {
    /// Every snapshot, oldest first.
    pub fn snapshots(&self) -> Result<Vec<Snapshot>> {
        let mut statement = self
            .conn
            .prepare(
                "SELECT name, created, model, action, state, updated FROM snapshots \
                 ORDER BY created, name",
            )
            .map_err(|e| self.fail(e))?;
        let rows = statement
            .query_map([], |row| {
                Ok(Snapshot {
                    name: row.get(0)?,
                    created: row.get(1)?,
                    model: row.get(2)?,
                    action: row.get(3)?,
                    state: row.get(4)?,
                    updated: row.get(5)?,
                })
            })
            .map_err(|e| self.fail(e))?;
        rows.collect::<rusqlite::Result<Vec<_>>>()
            .map_err(|e| self.fail(e))
    }

    /// The snapshot `name`, if there is one.
    pub fn snapshot(&self, name: &str) -> Result<Option<Snapshot>> {
        Ok(self.snapshots()?.into_iter().find(|s| s.name == name))
    }

    /// Records `snapshot` (made, or with a new last action).
    pub fn put_snapshot(&mut self, snapshot: &Snapshot) -> Result<()> {
        self.conn
            .execute(
                "INSERT INTO snapshots (name, created, model, action, state, updated) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT (name) DO UPDATE SET \
                 created = ?2, model = ?3, action = ?4, state = ?5, updated = ?6",
                params![
                    snapshot.name,
                    snapshot.created,
                    snapshot.model,
                    snapshot.action,
                    snapshot.state,
                    now()
                ],
            )
            .map(|_| ())
            .map_err(|e| db_error(&self.path, e))
    }

    /// Drops the snapshot `name`; whether there was one.
    pub fn remove_snapshot(&mut self, name: &str) -> Result<bool> {
        self.conn
            .execute("DELETE FROM snapshots WHERE name = ?1", params![name])
            .map(|n| n > 0)
            .map_err(|e| db_error(&self.path, e))
    }

    /// Whether the snapshot `name` exists.
    pub fn has_snapshot(&self, name: &str) -> Result<bool> {
        self.conn
            .query_row(
                "SELECT 1 FROM snapshots WHERE name = ?1",
                params![name],
                |_| Ok(()),
            )
            .optional()
            .map(|found| found.is_some())
            .map_err(|e| db_error(&self.path, e))
    }
}
