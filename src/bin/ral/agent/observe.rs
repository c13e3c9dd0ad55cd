//! What the agent learns of each run as it goes (`one_run::Observer`):
//! the files the catalog's resources are kept in (to watch them), their
//! stamps once the resources were read and again as each task ends (so
//! that the run's own writes wake the agent without making a run), and
//! what the run found and did.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use ral::agent::files;
use ral::agent::stamps::Stamps;
use ral::converge::catalog::{Catalog, Item, Role};
use ral::converge::plan::{Action, Plan, TaskState};

use crate::one_run::Observer;

/// One run's observer.
pub struct RunObserver<'a> {
    root: &'a Path,
    pub stamps: Mutex<Stamps>,
    /// The stamps as the run found the files (once planned).
    before: Mutex<Stamps>,
    /// The files the catalog keeps resources in, as this machine reaches
    /// them, with the root's names for them.
    pub managed: Mutex<Vec<(PathBuf, PathBuf)>>,
    pub plan: Mutex<Option<String>>,
    /// Resources to change (drifted), and those changed (repaired).
    pub drift: AtomicU64,
    pub repaired: AtomicU64,
}

impl<'a> RunObserver<'a> {
    pub fn new(root: &'a Path, stamps: Stamps) -> RunObserver<'a> {
        RunObserver {
            root,
            stamps: Mutex::new(stamps),
            before: Mutex::new(Stamps::default()),
            managed: Mutex::new(Vec::new()),
            plan: Mutex::new(None),
            drift: AtomicU64::new(0),
            repaired: AtomicU64::new(0),
        }
    }

    /// The files `item` is kept in: (below the root, as the root names it).
    fn files_of(&self, item: &Item) -> Vec<(PathBuf, PathBuf)> {
        let attr = |key: &str| {
            item.request
                .attrs
                .iter()
                .find(|(name, _)| name == key)
                .and_then(|(_, value)| value.as_str().map(str::to_owned))
        };
        files::kept_in(item.provider.type_name(), item.name(), attr)
            .into_iter()
            .filter_map(|shown| Some((files::below(self.root, &shown)?, shown)))
            .collect()
    }
}

/// `mutex`'s value (a panic elsewhere leaves it as it was).
fn locked<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// A task that changes its resource (a refresh changes none).
fn changes(action: Action) -> bool {
    action != Action::Refresh
}

impl Observer for RunObserver<'_> {
    fn planned(&self, catalog: &Catalog, plan: &Plan) {
        // In the catalog's order, each once (every user names the same
        // account files): a set to tell, as a catalog may hold thousands.
        let mut managed: Vec<(PathBuf, PathBuf)> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for item in catalog.items.iter().filter(|i| i.role != Role::Action) {
            for file in self.files_of(item) {
                if seen.insert(file.clone()) {
                    managed.push(file);
                }
            }
        }
        // Read just now: a file first seen in this catalog is stamped as
        // the run found it (those seen before were stamped before it).
        let mut stamps = locked(&self.stamps);
        for (path, _) in &managed {
            if !stamps.knows(path) {
                stamps.refresh(path);
            }
        }
        *locked(&self.before) = stamps.clone();
        *locked(&self.managed) = managed;
        *locked(&self.plan) = Some(plan.id.clone());
        let drift = plan.tasks.iter().filter(|t| changes(t.action)).count();
        self.drift.store(drift as u64, Ordering::SeqCst);
    }

    /// A task that succeeded wrote its files: they are stamped as they
    /// are now. One that did not (failed, skipped, stopped, or found
    /// otherwise when read back) may have written nothing: its files keep
    /// the stamps the run found them with, so that what someone else wrote
    /// meanwhile is drift, not taken for the run's own.
    fn touched(&self, catalog: &Catalog, plan: &Plan, tasks: &[usize]) {
        let mut stamps = locked(&self.stamps);
        let before = locked(&self.before);
        for &task in tasks {
            let succeeded = plan.tasks[task].state == TaskState::Success;
            for (path, _) in self.files_of(&catalog.items[plan.tasks[task].item]) {
                match succeeded {
                    true => stamps.refresh(&path),
                    false => stamps.restore(&path, &before),
                }
            }
        }
    }

    fn ended(&self, _catalog: &Catalog, plan: &Plan) {
        let repaired = plan
            .tasks
            .iter()
            .filter(|t| changes(t.action) && t.state == TaskState::Success)
            .count();
        self.repaired.store(repaired as u64, Ordering::SeqCst);
    }
}
