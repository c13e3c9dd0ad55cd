//! The names ral's own files take beside the files it edits: temporary
//! files, lock files and journals. The Python toolkit (`files.py`) uses
//! the same ones, so that either finds, waits for and finishes what the
//! other left.

/// In the name of a temporary file: `.NAME.ral-tmp-RANDOM`.
pub const TEMP_TAG: &str = ".ral-tmp-";
/// The end of a lock file's name: `.NAME.ral-lock`.
pub const LOCK_TAG: &str = ".ral-lock";
/// The end of a journal's name, after its lock file's: `.NAME.ral-lock.ral-journal`.
pub const JOURNAL_TAG: &str = ".ral-journal";
