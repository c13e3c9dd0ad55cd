//! Refreshes owed: a refresh (a service restarted) that a change called
//! for, kept from the moment the task that may make the change starts
//! until a refresh of its resource succeeds. A refresh that failed, was
//! skipped, or never ran because ral was killed stays owed, and the next
//! run plans it whatever else changes; Puppet loses such refreshes, ral
//! does not. Owing is recorded in the transaction that starts the task
//! that calls for it, and paid in the one that ends the refresh.

use rusqlite::{params, Transaction};

use super::database::Store;
use super::sql::{db_error, execute_cached, now};
use crate::error::Result;

/// One refresh owed to a resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwedRefresh {
    /// The qualified provider name, which with the name is the item.
    pub provider: String,
    pub name: String,
    /// The resource as the plan shows it, `TYPE[NAME]`.
    pub resource: String,
    /// The plan that first owed it.
    pub plan_id: String,
}

impl Store {
    /// Every refresh owed, ordered by provider and name.
    pub fn owed_refreshes(&self) -> Result<Vec<OwedRefresh>> {
        let mut statement = self
            .conn
            .prepare(
                "SELECT provider, name, resource, plan_id FROM refreshes ORDER BY provider, name",
            )
            .map_err(|e| self.fail(e))?;
        let rows = statement
            .query_map([], |row| {
                Ok(OwedRefresh {
                    provider: row.get(0)?,
                    name: row.get(1)?,
                    resource: row.get(2)?,
                    plan_id: row.get(3)?,
                })
            })
            .map_err(|e| self.fail(e))?;
        rows.collect::<rusqlite::Result<_>>()
            .map_err(|e| self.fail(e))
    }

    /// Forgets the refreshes owed to `items` (provider, name): resources
    /// no manifest lists any more.
    pub fn forget_refreshes(&mut self, items: &[(String, String)]) -> Result<()> {
        let path = self.path.clone();
        let tx = self.conn.transaction().map_err(|e| db_error(&path, e))?;
        for (provider, name) in items {
            paid(&tx, provider, name).map_err(|e| db_error(&path, e))?;
        }
        tx.commit().map_err(|e| db_error(&path, e))
    }
}

/// Records `refresh` as owed (the plan that owes it first is kept).
pub(super) fn owe(tx: &Transaction, refresh: &OwedRefresh) -> rusqlite::Result<()> {
    execute_cached(
        tx,
        "INSERT OR IGNORE INTO refreshes (provider, name, resource, plan_id, recorded) \
         VALUES (?1, ?2, ?3, ?4, ?5)",
        params![
            refresh.provider,
            refresh.name,
            refresh.resource,
            refresh.plan_id,
            now()
        ],
    )
    .map(|_| ())
}

/// The refresh owed to an item is done.
pub(super) fn paid(tx: &Transaction, provider: &str, name: &str) -> rusqlite::Result<()> {
    execute_cached(
        tx,
        "DELETE FROM refreshes WHERE provider = ?1 AND name = ?2",
        params![provider, name],
    )
    .map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{ItemChange, PlanRecord, TaskEnd};

    fn owed(name: &str, plan: &str) -> OwedRefresh {
        OwedRefresh {
            provider: "svc::svc".to_owned(),
            name: name.to_owned(),
            resource: format!("svc[{name}]"),
            plan_id: plan.to_owned(),
        }
    }

    #[test]
    fn a_refresh_is_owed_from_its_source_s_start_until_one_succeeds() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        let mut store = Store::open(&path).unwrap();
        store
            .begin_plan(
                &PlanRecord::running("p1"),
                &[
                    (1, "alpha[a]".into(), "alpha::alpha".into(), "change".into()),
                    (2, "svc[web]".into(), "svc::svc".into(), "refresh".into()),
                ],
            )
            .unwrap();
        store
            .tasks_started("p1", &[1], &[owed("web", "p1")])
            .unwrap();
        // Owed again by a later source: the first plan is kept.
        store
            .tasks_started("p1", &[1], &[owed("web", "p2")])
            .unwrap();
        drop(store);
        let mut store = Store::open(&path).unwrap();
        assert_eq!(store.owed_refreshes().unwrap(), [owed("web", "p1")]);
        let end = |state, refreshed| TaskEnd {
            plan_id: "p1",
            task_id: 2,
            state,
            error: None,
            changes: serde_json::json!([]),
            seconds: 0.0,
            item: ItemChange::Keep,
            refreshed,
        };
        // A failed refresh pays nothing.
        store.tasks_ended(&[end("Failed", None)]).unwrap();
        assert_eq!(store.owed_refreshes().unwrap().len(), 1);
        store
            .tasks_ended(&[end("Success", Some(("svc::svc", "web")))])
            .unwrap();
        assert!(store.owed_refreshes().unwrap().is_empty());
        store
            .tasks_started("p1", &[1], &[owed("web", "p1"), owed("db", "p1")])
            .unwrap();
        store
            .forget_refreshes(&[("svc::svc".to_owned(), "db".to_owned())])
            .unwrap();
        assert_eq!(store.owed_refreshes().unwrap(), [owed("web", "p1")]);
    }
}
