//! The store's schema and its migrations: each version's statements run in
//! one transaction, forward only; a database from a newer ral is refused.
//!
//! Version 1: items, plans and their tasks. Version 2: intents, what a
//! task is about to do to its resource, committed before the provider is
//! called (see `intents.rs`). Version 3: an item's owner, the vpath of
//! the model plugin item whose config task made the resource. Version 4:
//! snapshots (`ral snapshot`), each with the model as applied when made,
//! and whether an item's applied properties can be told (LITP's
//! `applied_properties_determinable`). Version 5: an item's owners, every
//! plugin item whose answer yields the resource (several items may share
//! one), as a JSON list (the single `owner` of version 3 moves into it and
//! is no longer used); whether an intent's task failed (its resource is
//! then never taken as made by ral in a later run); and the refreshes
//! owed: a refresh called for by a change, kept until it succeeds.
//! Version 6: who started a plan (`origin`, NULL for a person's `ral
//! apply`; `ral agent` names itself and why it ran).

use rusqlite::Connection;

/// The schema this binary writes.
pub const VERSION: i64 = 6;

/// The statements that bring version `n - 1` to `n`, at index `n - 1`.
const MIGRATIONS: &[&str] = &[
    "
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE items (
    provider TEXT NOT NULL,
    name TEXT NOT NULL,
    type TEXT NOT NULL,
    state TEXT NOT NULL,
    properties TEXT NOT NULL,
    created INTEGER NOT NULL,
    requires TEXT NOT NULL,
    updated REAL NOT NULL,
    PRIMARY KEY (provider, name)
);
CREATE TABLE plans (
    id TEXT PRIMARY KEY,
    manifest_digest TEXT NOT NULL,
    state TEXT NOT NULL,
    created REAL NOT NULL,
    started REAL,
    ended REAL,
    report TEXT
);
CREATE TABLE tasks (
    plan_id TEXT NOT NULL REFERENCES plans (id),
    task_id INTEGER NOT NULL,
    resource TEXT NOT NULL,
    provider TEXT NOT NULL,
    action TEXT NOT NULL,
    state TEXT NOT NULL,
    error TEXT,
    changes TEXT,
    seconds REAL,
    started REAL,
    ended REAL,
    PRIMARY KEY (plan_id, task_id)
);
",
    "
CREATE TABLE intents (
    provider TEXT NOT NULL,
    name TEXT NOT NULL,
    resource TEXT NOT NULL,
    plan_id TEXT NOT NULL,
    task_id INTEGER NOT NULL,
    action TEXT NOT NULL,
    existed INTEGER NOT NULL,
    properties TEXT NOT NULL,
    recorded REAL NOT NULL,
    PRIMARY KEY (provider, name)
);
",
    "ALTER TABLE items ADD COLUMN owner TEXT;",
    "
CREATE TABLE snapshots (
    name TEXT PRIMARY KEY,
    created REAL NOT NULL,
    model TEXT NOT NULL,
    action TEXT NOT NULL,
    state TEXT NOT NULL,
    updated REAL NOT NULL
);
ALTER TABLE items ADD COLUMN undetermined INTEGER NOT NULL DEFAULT 0;
",
    "
ALTER TABLE items ADD COLUMN owners TEXT NOT NULL DEFAULT '[]';
UPDATE items SET owners = json_array(owner), owner = NULL WHERE owner IS NOT NULL;
ALTER TABLE intents ADD COLUMN failed INTEGER NOT NULL DEFAULT 0;
CREATE TABLE refreshes (
    provider TEXT NOT NULL,
    name TEXT NOT NULL,
    resource TEXT NOT NULL,
    plan_id TEXT NOT NULL,
    recorded REAL NOT NULL,
    PRIMARY KEY (provider, name)
);
",
    "ALTER TABLE plans ADD COLUMN origin TEXT;",
];

/// Why the database cannot be brought to [`VERSION`].
#[derive(Debug, thiserror::Error)]
pub enum SchemaError {
    #[error(
        "its schema is version {found}, newer than this ral knows (version {VERSION}); use the \
         ral that wrote it, or a newer one"
    )]
    Newer { found: i64 },
    #[error("migrating to schema version {version}: {error}")]
    Migration {
        version: i64,
        error: rusqlite::Error,
    },
    #[error("{0}")]
    Sql(#[from] rusqlite::Error),
}

/// Brings the database to [`VERSION`], or says why it cannot.
pub fn migrate(conn: &mut Connection) -> Result<(), SchemaError> {
    let found: i64 = conn.query_row("PRAGMA user_version", [], |row| row.get(0))?;
    if found > VERSION {
        return Err(SchemaError::Newer { found });
    }
    for version in found + 1..=VERSION {
        let tx = conn.transaction()?;
        tx.execute_batch(MIGRATIONS[(version - 1) as usize])
            .map_err(|error| SchemaError::Migration { version, error })?;
        tx.pragma_update(None, "user_version", version)?;
        tx.commit()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_version_2_store_keeps_its_items_and_gains_owners() {
        let mut conn = Connection::open_in_memory().unwrap();
        for (at, statements) in MIGRATIONS[..2].iter().enumerate() {
            conn.execute_batch(statements).unwrap();
            conn.pragma_update(None, "user_version", at as i64 + 1)
                .unwrap();
        }
        conn.execute(
            "INSERT INTO items (provider, name, type, state, properties, created, requires, \
             updated) VALUES ('t::t', 'a', 't', 'Applied', '{}', 1, '[]', 0)",
            [],
        )
        .unwrap();
        migrate(&mut conn).unwrap();
        let version: i64 = conn
            .query_row("PRAGMA user_version", [], |row| row.get(0))
            .unwrap();
        assert_eq!(version, VERSION);
        let (name, owners): (String, String) = conn
            .query_row("SELECT name, owners FROM items", [], |row| {
                Ok((row.get(0)?, row.get(1)?))
            })
            .unwrap();
        assert_eq!((name.as_str(), owners.as_str()), ("a", "[]"));
        // Migrating again changes nothing.
        migrate(&mut conn).unwrap();
    }

    #[test]
    fn a_version_5_store_s_plans_have_no_origin() {
        let mut conn = Connection::open_in_memory().unwrap();
        for (at, statements) in MIGRATIONS[..5].iter().enumerate() {
            conn.execute_batch(statements).unwrap();
            conn.pragma_update(None, "user_version", at as i64 + 1)
                .unwrap();
        }
        conn.execute(
            "INSERT INTO plans (id, manifest_digest, state, created) VALUES ('p1', 'd', \
             'Successful', 1)",
            [],
        )
        .unwrap();
        migrate(&mut conn).unwrap();
        let origin: Option<String> = conn
            .query_row("SELECT origin FROM plans WHERE id = 'p1'", [], |row| {
                row.get(0)
            })
            .unwrap();
        assert_eq!(origin, None);
    }

    #[test]
    fn a_version_4_store_s_owner_becomes_its_only_owner() {
        let mut conn = Connection::open_in_memory().unwrap();
        for (at, statements) in MIGRATIONS[..4].iter().enumerate() {
            conn.execute_batch(statements).unwrap();
            conn.pragma_update(None, "user_version", at as i64 + 1)
                .unwrap();
        }
        for (name, owner) in [("a", None), ("b", Some("/site/\"x\""))] {
            conn.execute(
                "INSERT INTO items (provider, name, type, state, properties, created, \
                 requires, updated, owner) VALUES ('t::t', ?1, 't', 'Applied', '{}', 1, '[]', \
                 0, ?2)",
                rusqlite::params![name, owner],
            )
            .unwrap();
        }
        migrate(&mut conn).unwrap();
        let rows: Vec<(String, String, Option<String>)> = conn
            .prepare("SELECT name, owners, owner FROM items ORDER BY name")
            .unwrap()
            .query_map([], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        assert_eq!(
            rows,
            [
                ("a".to_owned(), "[]".to_owned(), None),
                ("b".to_owned(), r#"["/site/\"x\""]"#.to_owned(), None)
            ]
        );
    }
}
