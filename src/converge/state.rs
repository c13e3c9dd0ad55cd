//! What `ral state` reads and does: the items a state store holds (a
//! sensitive property only as its digest, and that never shown), the plans
//! run with their counts, one plan's report, and forgetting items, which
//! stops managing them without touching them.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::{Map, Value as Json};

use crate::error::Error;
use crate::store::{Holder, Identity, Location, Store};
use crate::text::escape;

pub use crate::store::{ItemState, StoredItem};

use super::manifest::{parse_reference, NotAReference};
use super::report::{Counts, Report};

/// Why `ral state` could not answer.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error(transparent)]
    Ral(#[from] Error),
    #[error("{}: no state store here yet (ral apply makes it)", .0.display())]
    NoStore(PathBuf),
    #[error("no plan '{}' in {}", escape(plan), path.display())]
    NoPlan { plan: String, path: PathBuf },
    #[error("{}: no such item in {}", escape(item), path.display())]
    NoItem { item: String, path: PathBuf },
    /// An item not written `TYPE[NAME]`.
    #[error("{0}")]
    Reference(#[from] NotAReference),
}

type Result<T> = std::result::Result<T, StateError>;

/// A plan the store recorded.
#[derive(Debug, Clone, Serialize)]
pub struct PlanSummary {
    pub id: String,
    pub state: String,
    pub manifest_digest: String,
    /// Seconds since the epoch.
    pub created: f64,
    pub started: Option<f64>,
    pub ended: Option<f64>,
    /// `None` for a plan recorded without a report.
    pub counts: Option<Counts>,
    /// Who ran it when not a person: `ral agent (drift: /etc/hosts)`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub origin: Option<String>,
}

/// A state store as `ral state` sees it.
pub struct StateStore {
    location: Location,
    /// `None`: a store named by its file is looked at whatever it serves
    /// (a target's, say); a root's own is checked to be this machine's.
    identity: Option<Identity>,
}

impl StateStore {
    /// `file`, or the store inside `root`.
    pub fn new(root: &Path, file: Option<&Path>) -> StateStore {
        match file {
            Some(file) => StateStore {
                location: Location::File(file.to_owned()),
                identity: None,
            },
            None => StateStore {
                location: Location::InRoot(root.to_owned()),
                identity: Some(Identity::local(root)),
            },
        }
    }

    /// The database file.
    pub fn path(&self) -> PathBuf {
        self.location.path()
    }

    fn open(&self) -> Result<Store> {
        Store::open_existing_at(&self.location, self.identity.as_ref())?
            .ok_or_else(|| StateError::NoStore(self.path()))
    }

    /// The items ral manages, a sensitive property's digest replaced by
    /// `[redacted]`.
    pub fn items(&self) -> Result<Vec<StoredItem>> {
        let mut items = self.open()?.items()?;
        for item in &mut items {
            for value in item.properties.values_mut() {
                if is_digest(value) {
                    *value = Json::from(crate::secrets::REDACTED);
                }
            }
        }
        Ok(items)
    }

    /// The plans run, oldest first.
    pub fn history(&self) -> Result<Vec<PlanSummary>> {
        let store = self.open()?;
        let mut plans = Vec::new();
        for record in store.history()? {
            let report = Report::as_recorded(&record, || store.tasks(&record.id))?;
            plans.push(PlanSummary {
                counts: report.map(|r| r.plan.counts),
                id: record.id,
                state: record.state,
                manifest_digest: record.manifest_digest,
                created: record.created,
                started: record.started,
                ended: record.ended,
                origin: record.origin,
            });
        }
        Ok(plans)
    }

    /// One plan's report, as it ended or as far as its tasks recorded.
    pub fn report(&self, plan: &str) -> Result<Report> {
        let store = self.open()?;
        let record = store.history()?.into_iter().find(|p| p.id == plan);
        let report = match record {
            Some(record) => Report::as_recorded(&record, || store.tasks(plan))?,
            None => None,
        };
        report.ok_or_else(|| StateError::NoPlan {
            plan: plan.to_owned(),
            path: self.path(),
        })
    }

    /// Stops managing the items `references` (`TYPE[NAME]`, TYPE a type
    /// or a qualified provider name), leaving the resources as they are:
    /// all of them, or none when one is not in the store. Waits for no
    /// other run: one that holds the store fails this at once.
    pub fn forget(&self, references: &[String]) -> Result<()> {
        let mut store = Store::open_locked(
            &self.location,
            self.identity.as_ref(),
            &Holder::me("ral state forget"),
            Default::default(),
        )?;
        let stored = store.items()?;
        let mut keys = Vec::new();
        // Plugin items forgotten: what they shared with others stays,
        // the others' only.
        let mut owners_gone = HashSet::new();
        for wanted in references {
            let reference = parse_reference(wanted, 0).map_err(StateError::Reference)?;
            let found = stored.iter().find(|item| {
                // Puppet's form `User[carol]` too: types are not told
                // apart by case.
                item.name == reference.name
                    && (item.type_name.eq_ignore_ascii_case(&reference.type_query)
                        || item.provider.eq_ignore_ascii_case(&reference.type_query))
            });
            match found {
                Some(item) => {
                    keys.push((item.provider.clone(), item.name.clone()));
                    owners_gone.insert(crate::plugin::model::vpath(&item.type_name, &item.name));
                }
                None => {
                    return Err(StateError::NoItem {
                        item: wanted.clone(),
                        path: self.path(),
                    })
                }
            }
        }
        // A plugin item's resources go with it (left as they are, and no
        // longer ral's), but for those another item still yields.
        keys.extend(
            stored
                .iter()
                .filter(|s| {
                    !s.owners.is_empty() && s.owners.iter().all(|o| owners_gone.contains(o))
                })
                .map(|s| (s.provider.clone(), s.name.clone())),
        );
        store.forget_and_release(&keys, |owner, _, _| owners_gone.contains(owner))?;
        Ok(())
    }
}

/// A sensitive value as the store keeps it: only its digest.
fn is_digest(value: &Json) -> bool {
    matches!(value, Json::Object(map) if is_digest_map(map))
}

fn is_digest_map(map: &Map<String, Json>) -> bool {
    map.len() == 1 && (map.contains_key("hmac") || map.contains_key("sha256"))
}

#[cfg(test)]
mod tests {
    use super::is_digest;
    use serde_json::json;

    #[test]
    fn only_a_lone_digest_reads_as_a_sensitive_value() {
        assert!(is_digest(&json!({"hmac": "ab12"})));
        assert!(is_digest(&json!({"sha256": "ab12"})));
        // A hash property of one key, or a digest beside another key, is
        // a value to show.
        assert!(!is_digest(&json!({"k": "v"})));
        assert!(!is_digest(&json!({"hmac": "ab12", "k": "v"})));
        assert!(!is_digest(&json!("hmac")));
        assert!(!is_digest(&json!({})));
    }
}
