//! The items a store keeps, their states, and their reading, writing and
//! forgetting.

use rusqlite::params;
use serde_json::{Map, Value as Json};

use crate::error::{Error, Result};

use super::database::Store;
use super::sql::{bump_serial, db_error, execute_cached, now};

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

impl Store {
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
}

pub(super) fn put_item(tx: &rusqlite::Transaction, item: &StoredItem) -> rusqlite::Result<()> {
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
