//! Intents: what a task is about to do to its resource, recorded and
//! committed before its provider is called, and cleared in the transaction
//! that records the task's end. An intent still there when the next run
//! starts belongs to a run that was killed (or to a task that failed):
//! that run settles it from what it finds (`converge::ownership`), so that
//! whether ral created a resource never depends on where a kill fell.

use rusqlite::{params, Transaction};
use serde_json::{Map, Value as Json};

use super::database::Store;
use super::items::{put_item, StoredItem};
use super::sql::{bump_serial, db_error, execute_cached, now};
use crate::error::{Error, Result};

/// What a task was about to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IntentAction {
    Create,
    Change,
    Remove,
}

impl IntentAction {
    pub fn as_str(self) -> &'static str {
        match self {
            IntentAction::Create => "create",
            IntentAction::Change => "change",
            IntentAction::Remove => "remove",
        }
    }

    fn parse(text: &str) -> Option<IntentAction> {
        [
            IntentAction::Create,
            IntentAction::Change,
            IntentAction::Remove,
        ]
        .into_iter()
        .find(|action| action.as_str() == text)
    }
}

/// One task's intent, as the store keeps it.
#[derive(Debug, Clone, PartialEq)]
pub struct Intent {
    /// The qualified provider name, which with the name is the item.
    pub provider: String,
    pub name: String,
    /// The resource as the plan shows it, `TYPE[NAME]`.
    pub resource: String,
    pub plan_id: String,
    pub task_id: usize,
    pub action: IntentAction,
    /// Whether the resource existed when last read before the call (the
    /// read just before it where the scheduler reads again, else the
    /// plan's).
    pub existed: bool,
    /// What the task asks for, kept as the items' properties are
    /// (sensitive values as keyed digests).
    pub properties: Map<String, Json>,
    /// Its task failed: what its resource is now may be another's doing
    /// as well as the provider's.
    pub failed: bool,
}

/// What settling the leftover intents does to the store, in one
/// transaction.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Settlement {
    /// Items written again (now known as created, or Applied).
    pub items: Vec<StoredItem>,
    /// Items whose removal was done: deleted.
    pub removed: Vec<(String, String)>,
    /// The intents settled, by (provider, name): deleted.
    pub settled: Vec<(String, String)>,
}

impl Settlement {
    pub fn is_empty(&self) -> bool {
        self.items.is_empty() && self.removed.is_empty() && self.settled.is_empty()
    }
}

impl Store {
    /// Every intent left in the store, ordered by provider and name.
    pub fn intents(&self) -> Result<Vec<Intent>> {
        let mut statement = self
            .conn
            .prepare(
                "SELECT provider, name, resource, plan_id, task_id, action, existed, properties, \
                 failed FROM intents ORDER BY provider, name",
            )
            .map_err(|e| self.fail(e))?;
        let rows = statement
            .query_map([], |row| {
                Ok((
                    row.get::<_, String>(0)?,
                    row.get::<_, String>(1)?,
                    row.get::<_, String>(2)?,
                    row.get::<_, String>(3)?,
                    row.get::<_, i64>(4)?,
                    row.get::<_, String>(5)?,
                    row.get::<_, bool>(6)?,
                    row.get::<_, String>(7)?,
                    row.get::<_, bool>(8)?,
                ))
            })
            .map_err(|e| self.fail(e))?;
        let mut intents = Vec::new();
        for row in rows {
            let (provider, name, resource, plan_id, task_id, action, existed, properties, failed) =
                row.map_err(|e| self.fail(e))?;
            let corrupt = |what: &str| Error::Store {
                path: self.path.clone(),
                message: format!("intent for {provider} '{name}': {what}"),
            };
            let action = IntentAction::parse(&action).ok_or_else(|| corrupt("unknown action"))?;
            let properties: Map<String, Json> =
                serde_json::from_str(&properties).map_err(|_| corrupt("unreadable properties"))?;
            let task_id = usize::try_from(task_id).map_err(|_| corrupt("bad task id"))?;
            intents.push(Intent {
                provider,
                name,
                resource,
                plan_id,
                task_id,
                action,
                existed,
                properties,
                failed,
            });
        }
        Ok(intents)
    }

    /// Records the intents of the tasks about to call their provider, in
    /// one transaction committed before this returns. An intent replaces
    /// any older one of its item (which the run settled before planning).
    pub fn record_intents(&mut self, intents: &[Intent]) -> Result<()> {
        let path = self.path.clone();
        let tx = self.conn.transaction().map_err(|e| db_error(&path, e))?;
        for intent in intents {
            execute_cached(
                &tx,
                "INSERT OR REPLACE INTO intents \
                 (provider, name, resource, plan_id, task_id, action, existed, properties, recorded, \
                 failed) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
                params![
                    intent.provider,
                    intent.name,
                    intent.resource,
                    intent.plan_id,
                    intent.task_id as i64,
                    intent.action.as_str(),
                    intent.existed,
                    Json::Object(intent.properties.clone()).to_string(),
                    now(),
                    intent.failed
                ],
            )
            .map_err(|e| db_error(&path, e))?;
        }
        tx.commit().map_err(|e| db_error(&path, e))
    }

    /// Settles, in one transaction, the intents of tasks that failed to
    /// create their resource, read right after the failure: the items
    /// `created` (found made) are ral's from now on, and the intents of
    /// all `settled` are cleared.
    pub fn settle_failures(
        &mut self,
        created: &[(String, String)],
        settled: &[(String, String)],
    ) -> Result<()> {
        let path = self.path.clone();
        let tx = self.conn.transaction().map_err(|e| db_error(&path, e))?;
        for (provider, name) in created {
            execute_cached(
                &tx,
                "UPDATE items SET created = 1 WHERE provider = ?1 AND name = ?2",
                params![provider, name],
            )
            .map_err(|e| db_error(&path, e))?;
        }
        for (provider, name) in settled {
            clear(&tx, provider, name).map_err(|e| db_error(&path, e))?;
        }
        if !created.is_empty() {
            bump_serial(&tx).map_err(|e| db_error(&path, e))?;
        }
        tx.commit().map_err(|e| db_error(&path, e))
    }

    /// Writes what settling the leftover intents decided, in one
    /// transaction: a kill during it leaves either all or none of it.
    pub fn settle_intents(&mut self, settlement: &Settlement) -> Result<()> {
        if settlement.is_empty() {
            return Ok(());
        }
        let path = self.path.clone();
        let tx = self.conn.transaction().map_err(|e| db_error(&path, e))?;
        for item in &settlement.items {
            put_item(&tx, item).map_err(|e| db_error(&path, e))?;
        }
        for (provider, name) in &settlement.removed {
            execute_cached(
                &tx,
                "DELETE FROM items WHERE provider = ?1 AND name = ?2",
                params![provider, name],
            )
            .map_err(|e| db_error(&path, e))?;
        }
        for (provider, name) in &settlement.settled {
            clear(&tx, provider, name).map_err(|e| db_error(&path, e))?;
        }
        if !settlement.items.is_empty() || !settlement.removed.is_empty() {
            bump_serial(&tx).map_err(|e| db_error(&path, e))?;
        }
        tx.commit().map_err(|e| db_error(&path, e))
    }
}

/// Marks an item's intent as its failed task's: recorded in the
/// transaction of that end, so that a run killed before settling it
/// leaves it marked.
pub(super) fn mark_failed(tx: &Transaction, provider: &str, name: &str) -> rusqlite::Result<()> {
    execute_cached(
        tx,
        "UPDATE intents SET failed = 1 WHERE provider = ?1 AND name = ?2",
        params![provider, name],
    )
    .map(|_| ())
}

/// Deletes an item's intent: its task's end is recorded in the same
/// transaction, so no kill leaves the one without the other.
pub(super) fn clear(tx: &Transaction, provider: &str, name: &str) -> rusqlite::Result<()> {
    execute_cached(
        tx,
        "DELETE FROM intents WHERE provider = ?1 AND name = ?2",
        params![provider, name],
    )
    .map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{ItemChange, ItemState, PlanRecord, TaskEnd};

    fn intent(name: &str, existed: bool) -> Intent {
        Intent {
            provider: "t::t".to_owned(),
            name: name.to_owned(),
            resource: format!("t[{name}]"),
            plan_id: "p1".to_owned(),
            task_id: 1,
            action: IntentAction::Create,
            existed,
            properties: serde_json::json!({"value": name})
                .as_object()
                .unwrap()
                .clone(),
            failed: false,
        }
    }

    fn item(name: &str) -> StoredItem {
        StoredItem {
            provider: "t::t".to_owned(),
            type_name: "t".to_owned(),
            name: name.to_owned(),
            state: ItemState::Applied,
            properties: Map::new(),
            created: true,
            requires: Vec::new(),
            owners: Vec::new(),
            undetermined: false,
        }
    }

    /// The names of the items whose intents the store holds.
    fn intent_names(store: &Store) -> Vec<String> {
        store
            .intents()
            .unwrap()
            .into_iter()
            .map(|i| i.name)
            .collect()
    }

    #[test]
    fn intents_survive_reopening_and_a_task_end_clears_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        let mut store = Store::open(&path).unwrap();
        store
            .record_intents(&[intent("a", false), intent("b", true)])
            .unwrap();
        drop(store);
        let mut store = Store::open(&path).unwrap();
        assert_eq!(
            store.intents().unwrap(),
            [intent("a", false), intent("b", true)]
        );
        // A newer intent of the same item replaces the older one.
        let mut again = intent("a", true);
        again.action = IntentAction::Remove;
        store.record_intents(&[again.clone()]).unwrap();
        assert_eq!(store.intents().unwrap(), [again, intent("b", true)]);
        let record = PlanRecord::running("p1");
        let tasks = [(1, "t[b]".to_owned(), "t::t".to_owned(), "create".to_owned())];
        store.begin_plan(&record, &tasks).unwrap();
        let applied = item("b");
        let end = |change| TaskEnd {
            plan_id: "p1",
            task_id: 1,
            state: "Success",
            error: None,
            changes: Json::Null,
            seconds: 0.0,
            item: change,
            refreshed: None,
        };
        // A failed task leaves its intent for the next run to settle,
        // marked as a failed task's.
        store
            .tasks_ended(&[end(ItemChange::Failed {
                provider: "t::t",
                name: "b",
            })])
            .unwrap();
        let left = store.intents().unwrap();
        assert_eq!(left.len(), 2);
        assert!(left.iter().all(|i| i.failed == (i.name == "b")), "{left:?}");
        store
            .tasks_ended(&[end(ItemChange::Applied(&applied))])
            .unwrap();
        let left = intent_names(&store);
        assert_eq!(left, ["a"]);
        store
            .tasks_ended(&[end(ItemChange::Removed {
                provider: "t::t",
                name: "a",
            })])
            .unwrap();
        assert!(store.intents().unwrap().is_empty());
    }

    #[test]
    fn a_batch_starts_and_ends_together_each_task_recorded_as_it_ended() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("state.db")).unwrap();
        store.put_items(&[item("b")]).unwrap();
        store
            .record_intents(&[intent("a", false), intent("b", true), intent("c", false)])
            .unwrap();
        let record = PlanRecord::running("p1");
        let tasks: Vec<_> = ["a", "b", "c"]
            .iter()
            .enumerate()
            .map(|(at, n)| {
                (
                    at + 1,
                    format!("t[{n}]"),
                    "t::t".to_owned(),
                    "create".to_owned(),
                )
            })
            .collect();
        store.begin_plan(&record, &tasks).unwrap();
        store.tasks_started("p1", &[1, 2, 3], &[]).unwrap();
        let states = |store: &Store| -> Vec<String> {
            store
                .tasks("p1")
                .unwrap()
                .into_iter()
                .map(|t| t.state)
                .collect()
        };
        assert_eq!(states(&store), ["Running", "Running", "Running"]);
        let applied = item("a");
        let end = |task_id, state, item| TaskEnd {
            plan_id: "p1",
            task_id,
            state,
            error: None,
            changes: Json::Null,
            seconds: 0.5,
            item,
            refreshed: None,
        };
        store
            .tasks_ended(&[
                end(1, "Success", ItemChange::Applied(&applied)),
                end(
                    2,
                    "Success",
                    ItemChange::Removed {
                        provider: "t::t",
                        name: "b",
                    },
                ),
                end(3, "Failed", ItemChange::Keep),
            ])
            .unwrap();
        assert_eq!(states(&store), ["Success", "Success", "Failed"]);
        let names: Vec<String> = store.items().unwrap().into_iter().map(|i| i.name).collect();
        assert_eq!(names, ["a"]);
        // The failed task's intent stays for the next run to settle.
        let left = intent_names(&store);
        assert_eq!(left, ["c"]);
    }

    #[test]
    fn a_settlement_writes_items_removes_items_and_clears_intents_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("state.db")).unwrap();
        store.put_items(&[item("gone"), item("kept")]).unwrap();
        store
            .record_intents(&[intent("gone", true), intent("kept", false)])
            .unwrap();
        let serial = store.serial().unwrap();
        let mut kept = item("kept");
        kept.state = ItemState::Initial;
        store
            .settle_intents(&Settlement {
                items: vec![kept.clone()],
                removed: vec![("t::t".to_owned(), "gone".to_owned())],
                settled: vec![
                    ("t::t".to_owned(), "gone".to_owned()),
                    ("t::t".to_owned(), "kept".to_owned()),
                ],
            })
            .unwrap();
        assert_eq!(store.items().unwrap(), [kept]);
        assert!(store.intents().unwrap().is_empty());
        assert_eq!(store.serial().unwrap(), serial + 1);
        // Only intents settled: the items did not change, nor the serial.
        store.record_intents(&[intent("kept", false)]).unwrap();
        store
            .settle_intents(&Settlement {
                settled: vec![("t::t".to_owned(), "kept".to_owned())],
                ..Settlement::default()
            })
            .unwrap();
        assert_eq!(store.serial().unwrap(), serial + 1);
        assert!(store.intents().unwrap().is_empty());
        // Items written alone, or removed alone, change the serial too.
        let mut applied = item("kept");
        applied.state = ItemState::Applied;
        store
            .settle_intents(&Settlement {
                items: vec![applied],
                ..Settlement::default()
            })
            .unwrap();
        assert_eq!(store.serial().unwrap(), serial + 2);
        store
            .settle_intents(&Settlement {
                removed: vec![("t::t".to_owned(), "kept".to_owned())],
                ..Settlement::default()
            })
            .unwrap();
        assert_eq!(store.serial().unwrap(), serial + 3);
        assert!(store.items().unwrap().is_empty());
    }
}
