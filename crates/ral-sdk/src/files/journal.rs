//! The journal of an edit of several files, `.NAME.ral-journal` beside the
//! lock file: which temporary file replaces which file, and the version of
//! that file it was made from. It is the Python toolkit's document
//! (`{"ral_journal": 1, "files": [{"dir", "temp", "name", "was"}]}`), so
//! an edit either toolkit left unfinished is finished by the other.
//!
//! Also here: the temporary files of ours a writer that died left, which
//! the next holder of the lock removes.

use std::ffi::{OsStr, OsString};
use std::fmt::Write as _;
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;

use serde_json::Value as Json;

use super::lock::{Lock, Pending};
use super::names::TEMP_TAG;
use super::root::{Dir, Target};
use super::stat::{identity, Stat};
use super::sys;
use crate::error::{CallError, CallResult};
use crate::text::quoted;
use crate::Call;
use crate::Log;

/// Bytes; a larger journal is not one ral wrote.
pub const JOURNAL_MAX: usize = 1 << 20;

/// What a journal file holds.
#[derive(Debug, Clone, PartialEq)]
pub enum Journal {
    /// There is none.
    Absent,
    /// Its JSON document.
    Document(Json),
    /// Not a journal ral wrote: larger than [`JOURNAL_MAX`], not JSON, or
    /// nested too deeply to parse (why, in words).
    Unreadable(String),
}

/// The journal `target`.
pub fn read_journal(target: &Target) -> CallResult<Journal> {
    let Some((data, _)) = target.read(Some(JOURNAL_MAX + 1))? else {
        return Ok(Journal::Absent);
    };
    if data.len() > JOURNAL_MAX {
        return Ok(Journal::Unreadable(format!(
            "larger than {JOURNAL_MAX} bytes"
        )));
    }
    Ok(match serde_json::from_slice(&data) {
        Ok(document) => Journal::Document(document),
        Err(err) => Journal::Unreadable(err.to_string()),
    })
}

/// One file of a journal.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Entry {
    pub dir: String,
    pub temp: String,
    pub name: String,
    /// The identity of the file the temporary one was made from.
    pub was: Json,
}

impl Entry {
    pub fn to_json(&self) -> Json {
        serde_json::json!({
            "dir": self.dir,
            "temp": self.temp,
            "name": self.name,
            "was": self.was,
        })
    }
}

/// The entries of a journal document, or `None` when it is not one ral
/// wrote. A `null` document has none, as for the Python toolkit.
fn entries_of(document: &Json) -> Option<Vec<Entry>> {
    if document.is_null() {
        return Some(Vec::new());
    }
    let files = document.get("files")?.as_array()?;
    let mut entries = Vec::with_capacity(files.len());
    for file in files {
        let dir = file.get("dir")?.as_str()?;
        let name = file.get("name")?.as_str()?;
        let temp = file.get("temp")?.as_str()?;
        let was = file.get("was")?;
        let ours = temp.starts_with(&format!(".{name}{TEMP_TAG}"));
        let plain = !temp.contains('/') && !name.contains('/');
        if !ours || !plain || matches!(name, "" | "." | "..") {
            return None;
        }
        entries.push(Entry {
            dir: dir.to_owned(),
            temp: temp.to_owned(),
            name: name.to_owned(),
            was: was.clone(),
        });
    }
    Some(entries)
}

impl Lock {
    /// The entries of a journal left by an interrupted edit, or none; a
    /// journal that does not parse is ignored, with a warning.
    fn journal_entries(&self, log: &Log) -> CallResult<Vec<Entry>> {
        let Some(journal) = self.journal() else {
            return Ok(Vec::new());
        };
        let entries = match read_journal(&self.dir().file(&journal)?)? {
            Journal::Absent => Some(Vec::new()),
            Journal::Document(document) => entries_of(&document),
            Journal::Unreadable(_) => None,
        };
        Ok(entries.unwrap_or_else(|| {
            log.warning(&format!(
                "ignoring the unreadable journal {}",
                quoted(&self.dir().show(&journal))
            ));
            Vec::new()
        }))
    }

    /// The files of an interrupted edit still to be finished (read without
    /// taking the lock).
    fn pending(&mut self, log: &Log) -> CallResult<&Pending> {
        if self.pending.is_none() {
            let mut pending = Pending::new();
            for entry in self.journal_entries(log)? {
                let Ok(directory) = self.dir().root().directory(&entry.dir, false, None) else {
                    continue;
                };
                let temp = directory.lstat(&entry.temp)?;
                let now = identity(directory.lstat(&entry.name)?.as_ref());
                if temp.is_some() && now == entry.was {
                    pending.insert((entry.dir, entry.name), (directory, entry.temp));
                }
            }
            self.pending = Some(pending);
        }
        Ok(self.pending.get_or_insert_with(Pending::new))
    }

    /// The bytes and status of `target` as they are once an interrupted
    /// edit is finished: what a reader without the lock should see; at most
    /// `limit` bytes when given.
    pub fn read(
        &mut self,
        call: &Call,
        target: &Target,
        limit: Option<usize>,
    ) -> CallResult<Option<(Vec<u8>, Stat)>> {
        let staged = self.pending(&call.log)?.get(&target.key()).cloned();
        if let Some((directory, temp)) = staged {
            if let Some(read) = directory.read(&temp, limit)? {
                return Ok(Some(read));
            }
        }
        target.read(limit)
    }

    /// Finishes an edit of several files that a crash interrupted: each
    /// staged file that is still there replaces its target, unless the
    /// target changed since (another program wrote it), in which case that
    /// part is dropped with a warning. Needs the lock.
    pub fn recover(&mut self, call: &Call) -> CallResult<()> {
        let log = &call.log;
        let entries = self.journal_entries(log)?;
        self.pending = None;
        let mut synced = Vec::new();
        for entry in &entries {
            let directory = match self.dir().root().directory(&entry.dir, false, None) {
                Ok(directory) => directory,
                Err(err) => {
                    log.warning(&format!("cannot finish an interrupted edit: {err}"));
                    continue;
                }
            };
            if directory.lstat(&entry.temp)?.is_none() {
                continue;
            }
            let now = identity(directory.lstat(&entry.name)?.as_ref());
            let shown = quoted(&directory.show(&entry.name));
            let done = if now == entry.was {
                sys::rename_at(
                    directory.as_fd(),
                    entry.temp.as_ref(),
                    directory.as_fd(),
                    entry.name.as_ref(),
                )
                .map(|()| log.info(&format!("finished an interrupted edit: replaced {shown}")))
            } else {
                sys::unlink_at(directory.as_fd(), entry.temp.as_ref()).map(|()| {
                    log.warning(&format!(
                        "{shown} was changed by another program after an edit of ral's \
                         was interrupted; that edit's change to it was dropped"
                    ))
                })
            };
            done.map_err(|err| {
                CallError::io(&err, &format!("finish the interrupted edit of {shown}"))
            })?;
            synced.push(directory);
        }
        for directory in &synced {
            fsync_dir(directory);
        }
        let Some(journal) = self.journal() else {
            return Ok(());
        };
        if !entries.is_empty() || self.dir().lstat(&journal)?.is_some() {
            match sys::unlink_at(self.dir().as_fd(), journal.as_ref()) {
                Ok(()) => {}
                Err(err) if err.raw_os_error() == Some(libc::ENOENT) => {}
                Err(err) => {
                    return Err(CallError::io(
                        &err,
                        &format!("remove the journal {}", quoted(&self.dir().show(&journal))),
                    ))
                }
            }
            fsync_dir(self.dir());
        }
        remove_temps(log, self.dir(), &journal, None)
    }
}

/// Makes the names in `dir` durable, where the file system allows it
/// (some refuse fsync on a directory).
pub fn fsync_dir(dir: &impl AsFd) {
    let _ = sys::fsync(dir.as_fd());
}

/// A new name for a temporary file that will replace `name`: hidden,
/// recognisable as ours by the next edit, and not to be guessed (the
/// kernel's random bytes; an error when it has none to give).
pub fn temp_name(name: &str) -> std::io::Result<String> {
    #[cfg(test)]
    if let Some(next) = NEXT_TEMP_NAMES.with(|names| names.borrow_mut().pop_front()) {
        return Ok(next);
    }
    let mut text = format!(".{name}{TEMP_TAG}");
    for byte in crate::random::bytes::<6>()? {
        let _ = write!(text, "{byte:02x}");
    }
    Ok(text)
}

#[cfg(test)]
thread_local! {
    /// A test's temporary names, given out before random ones: a name
    /// someone else took first is then no matter of chance.
    pub(super) static NEXT_TEMP_NAMES: std::cell::RefCell<std::collections::VecDeque<String>> =
        const { std::cell::RefCell::new(std::collections::VecDeque::new()) };
}

/// Removes the temporary files of ours for `name` in `dir`: with the lock
/// held, they were left by a writer that died. Older versions' names
/// (`.ralsh-*.NAME`, `.NAME.ralsh-*`, `.hosts.*.tmp`) count too.
/// `entries`, when given, are the names in `dir` that may be such files
/// ([`temp_like`]), listed earlier under the same lock; those removed
/// leave the list.
pub(super) fn remove_temps(
    log: &Log,
    dir: &Dir,
    name: &str,
    entries: Option<&mut Vec<OsString>>,
) -> CallResult<()> {
    let ours = format!(".{name}{TEMP_TAG}");
    let legacy = format!(".{name}.ralsh-");
    let legacy_end = format!(".{name}");
    let is_ours = |entry: &OsStr| {
        let entry = entry.as_bytes();
        entry.starts_with(ours.as_bytes())
            || entry.starts_with(legacy.as_bytes())
            || (entry.starts_with(b".ralsh-") && entry.ends_with(legacy_end.as_bytes()))
            || (name == "hosts" && entry.starts_with(b".hosts.") && entry.ends_with(b".tmp"))
    };
    let remove = |entry: &OsStr| {
        if sys::unlink_at(dir.as_fd(), entry).is_ok() {
            log.info(&format!(
                "removed {}, left by an edit that was interrupted",
                quoted(&dir.show(&entry.to_string_lossy()))
            ));
        }
    };
    match entries {
        None => {
            for entry in dir.names()? {
                if is_ours(&entry) {
                    remove(&entry);
                }
            }
        }
        Some(entries) => entries.retain(|entry| {
            if is_ours(entry) {
                remove(entry);
                false
            } else {
                true
            }
        }),
    }
    Ok(())
}

/// True for the names [`remove_temps`] may remove, whatever `name`.
pub(super) fn temp_like(entry: &OsStr) -> bool {
    let entry = entry.as_bytes();
    let has = |part: &[u8]| entry.windows(part.len()).any(|w| w == part);
    entry.starts_with(b".")
        && (has(TEMP_TAG.as_bytes()) || has(b".ralsh-") || entry.ends_with(b".tmp"))
}
