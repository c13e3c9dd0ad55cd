//! Plans and their tasks as the store records them: a plan begun, its
//! tasks started (with the refreshes they may owe) and ended (with what
//! each did to its item, in one transaction per batch), dead runs
//! recovered, and the history read back.

use rusqlite::params;
use serde_json::Value as Json;

use crate::error::Result;

use super::database::Store;
use super::intents;
use super::items::{put_item, StoredItem};
use super::refreshes::{self, OwedRefresh};
use super::sql::{bump_serial, db_error, execute_cached, now};

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

impl Store {
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
