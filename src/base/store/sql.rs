//! What every table's file of the store shares: the error of a failed
//! statement, the cache of prepared statements, the serial that counts
//! changes to the items, and the clock of the records.

use std::path::Path;

use crate::error::Error;

pub(super) fn db_error(path: &Path, error: rusqlite::Error) -> Error {
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

/// Runs one statement through the connection's cache of prepared
/// statements: a run records every task's start and end, and preparing
/// the same SQL again for each was a quarter of the CPU of applying a
/// thousand files.
pub(super) fn execute_cached(
    conn: &rusqlite::Connection,
    sql: &str,
    params: impl rusqlite::Params,
) -> rusqlite::Result<usize> {
    conn.prepare_cached(sql)?.execute(params)
}

pub(super) fn bump_serial(tx: &rusqlite::Transaction) -> rusqlite::Result<()> {
    execute_cached(
        tx,
        "INSERT INTO meta (key, value) VALUES ('serial', '1') \
         ON CONFLICT (key) DO UPDATE SET value = CAST(value AS INTEGER) + 1",
        [],
    )
    .map(|_| ())
}
