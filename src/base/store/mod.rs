//! The state store: what ral applied, kept in an SQLite database so that a
//! later run can tell new items from changed ones, remove what a manifest no
//! longer lists, and report every plan. Items move through LITP's states
//! (Initial, Applied, Updated, ForRemoval; Removed items are deleted);
//! plans and their tasks are recorded as they run, each task's end in its
//! own transaction, so a crash loses no finished change.

mod database;
mod intents;
mod items;
mod key;
mod lock;
mod paths;
mod refreshes;
mod runs;
mod schema;
mod snapshots;
mod sql;

pub use database::{Identity, Store};
pub use intents::{Intent, IntentAction, Settlement};
pub use items::{ItemState, StoredItem};
pub use key::StoreKey;
pub use lock::{Holder, RunLock};
pub use paths::Location;
pub use refreshes::OwedRefresh;
pub use runs::{ItemChange, PlanRecord, RecordedTask, TaskEnd};
pub use snapshots::Snapshot;
pub use sql::now;

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

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
