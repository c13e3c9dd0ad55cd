//! A locked, crash-safe edit of one or more files guarded by a [`Lock`]:
//!
//! ```text
//! let mut edit = Edit::begin(Lock::beside(&target), call)?;
//! let data = edit.read(&target)?;            // re-read under the lock
//! edit.write(&target, new_data, Attrs::default())?;   // staged
//! edit.commit()?;                            // all files, or none
//! ```
//!
//! Taking the lock finishes an interrupted edit and removes temporary
//! files of ours that a crash left. `commit` writes each staged file to a
//! temporary file in the same directory (keeping the original's mode,
//! owner, SELinux context and access control list), syncs it, and renames
//! it over the original through the directory's descriptor, in the order
//! staged; with several files, a journal written first lets the next edit
//! (or reader) finish what a crash interrupted. The original's other
//! names (hard links) keep the old content, which a warning says. Staged files whose original changed since it
//! was read (a writer that does not take the lock) make commit refuse.
//!
//! Under noop the same code previews a change: no lock is taken (nothing,
//! not even a lock file, is created), files are read as a reader sees
//! them, and commit writes nothing. Dropped without a commit, an edit
//! removes its temporary files and lets go of the lock.

use std::collections::{HashMap, HashSet};
use std::ffi::OsStr;
use std::fs::File;
use std::io::Write;
use std::os::fd::{AsFd, OwnedFd};

use super::guard::Guard;
use super::journal::{fsync_dir, remove_temps, temp_name, Entry};
use super::lock::Lock;
use super::root::{Dir, Target};
use super::stat::{identity, Stat};
use super::sys::{self, Mode, OFlags};
use crate::error::{CallError, CallResult};
use crate::text::quoted;
use crate::Call;

/// An owner to give a file: `None` leaves that id as the writer's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Owner {
    pub uid: Option<u32>,
    pub gid: Option<u32>,
}

impl Owner {
    pub fn new(uid: u32, gid: u32) -> Owner {
        Owner {
            uid: Some(uid),
            gid: Some(gid),
        }
    }
}

/// The mode and owner a written file gets. It keeps its own, or gets
/// `new_mode` and `new_owner` when it does not exist yet; `mode` and
/// `owner`, when given, apply either way. Owners are given only when
/// running as root.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attrs {
    pub mode: Option<u32>,
    pub owner: Option<Owner>,
    pub new_mode: u32,
    pub new_owner: Option<Owner>,
}

impl Default for Attrs {
    fn default() -> Attrs {
        Attrs {
            mode: None,
            owner: None,
            new_mode: 0o644,
            new_owner: None,
        }
    }
}

impl Attrs {
    /// The mode `mode` whether the file exists or not.
    pub fn mode(mode: u32) -> Attrs {
        Attrs {
            mode: Some(mode),
            ..Attrs::default()
        }
    }

    /// The mode `new_mode` for a file made new.
    pub fn new_mode(new_mode: u32) -> Attrs {
        Attrs {
            new_mode,
            ..Attrs::default()
        }
    }
}

/// A file staged for commit.
struct Staged {
    target: Target,
    data: Vec<u8>,
    mode: u32,
    owner: Option<Owner>,
}

/// A locked, crash-safe edit (see the module).
pub struct Edit<'a> {
    call: &'a Call,
    guard: Guard<'a>,
    noop: bool,
    /// The key of an edit of a batch, naming it in the batch's failures.
    key: usize,
    read_as: HashMap<(String, String), Option<Stat>>,
    staged: Vec<Staged>,
    /// Temporary files written and not yet renamed.
    temps: Vec<(Dir, String)>,
    cleaned: HashSet<(String, String)>,
}

#[cfg(test)]
thread_local! {
    /// A test's crash: the rename onto this name fails.
    pub(super) static FAIL_RENAME_ONTO: std::cell::RefCell<Option<String>> =
        const { std::cell::RefCell::new(None) };
}

impl<'a> Edit<'a> {
    /// An edit guarded by `lock`, noop when the call is: the lock is taken,
    /// an interrupted edit finished and temporary files a crash left are
    /// removed.
    pub fn begin(lock: Lock, call: &'a Call) -> CallResult<Edit<'a>> {
        Edit::begin_as(lock, call, call.noop)
    }

    /// [`begin`](Edit::begin), noop or not whatever the call says: a
    /// noop edit reads files as a reader sees them, to preview a change or
    /// to read several files consistently.
    pub fn begin_as(lock: Lock, call: &'a Call, noop: bool) -> CallResult<Edit<'a>> {
        call.within_time()?;
        let mut edit = Edit::new(Guard::Lock(lock), call, noop, 0);
        if !noop {
            if let Guard::Lock(lock) = &mut edit.guard {
                lock.acquire(call)?;
                lock.recover(call)?;
            }
        }
        Ok(edit)
    }

    pub(super) fn new(guard: Guard<'a>, call: &'a Call, noop: bool, key: usize) -> Edit<'a> {
        Edit {
            call,
            guard,
            noop,
            key,
            read_as: HashMap::new(),
            staged: Vec::new(),
            temps: Vec::new(),
            cleaned: HashSet::new(),
        }
    }

    /// The directory of the lock (the account files' `etc` for
    /// lckpwdf's): where the files it guards are looked up.
    pub fn dir(&self) -> &Dir {
        self.guard.dir()
    }

    /// Whether the edit only previews.
    pub fn noop(&self) -> bool {
        self.noop
    }

    fn clean(&mut self, target: &Target) -> CallResult<()> {
        let key = target.key();
        if self.noop || self.cleaned.contains(&key) {
            return Ok(());
        }
        match &mut self.guard {
            Guard::Lock(_) => remove_temps(&self.call.log, target.dir(), target.name(), None)?,
            Guard::Batch { batch, .. } => {
                batch.remove_temps(self.call, target.dir(), target.name())?
            }
        }
        self.cleaned.insert(key);
        Ok(())
    }

    /// Records `info` (`target`'s lstat, `None` when absent) as what the
    /// caller decided its change on, instead of reading the file: for
    /// files that are resources themselves, which may be large, links or
    /// directories.
    pub fn note(&mut self, target: &Target, info: Option<Stat>) -> CallResult<()> {
        self.clean(target)?;
        self.read_as.insert(target.key(), info);
        Ok(())
    }

    /// The bytes of `target` (`None` when it does not exist), read under
    /// the lock; its version is remembered for commit.
    pub fn read(&mut self, target: &Target) -> CallResult<Option<Vec<u8>>> {
        self.read_limited(target, None)
    }

    /// [`read`](Edit::read), at most `limit` bytes when given: for a file
    /// someone else may make huge, which the caller then refuses to edit.
    pub fn read_limited(
        &mut self,
        target: &Target,
        limit: Option<usize>,
    ) -> CallResult<Option<Vec<u8>>> {
        let read = if self.noop {
            match &mut self.guard {
                Guard::Lock(lock) => lock.read(self.call, target, limit)?,
                Guard::Batch { .. } => target.read(limit)?,
            }
        } else {
            self.clean(target)?;
            target.read(limit)?
        };
        let (data, info) = match read {
            Some((data, info)) => (Some(data), Some(info)),
            None => (None, None),
        };
        self.read_as.insert(target.key(), info);
        Ok(data)
    }

    /// The status of `target` as read (`None` when it did not exist or
    /// was not read).
    pub fn read_stat(&self, target: &Target) -> Option<Stat> {
        self.read_as.get(&target.key()).copied().flatten()
    }

    /// Stages `data` as the new content of `target`, read first when it
    /// was not; `attrs` says its mode and owner.
    pub fn write(
        &mut self,
        target: &Target,
        data: impl Into<Vec<u8>>,
        attrs: Attrs,
    ) -> CallResult<()> {
        if !self.read_as.contains_key(&target.key()) {
            self.read(target)?;
        }
        let old = self.read_stat(target);
        if let Some(links) = old.map(|old| old.nlink()).filter(|&n| n > 1 && !self.noop) {
            self.call.log.warning(&format!(
                "{} has {links} names (hard links): the new file replaces this one only, and \
                 the others keep the old content",
                quoted(target.path())
            ));
        }
        let mode = attrs
            .mode
            .or(old.map(|old| old.permissions()))
            .unwrap_or(attrs.new_mode);
        let owner = attrs.owner.or(match old {
            Some(old) => Some(Owner::new(old.uid(), old.gid())),
            None => attrs.new_owner,
        });
        self.staged.push(Staged {
            target: target.clone(),
            data: data.into(),
            mode,
            owner,
        });
        Ok(())
    }

    /// Makes the names in `dir` durable after a change made there
    /// directly, not through `write`: now, or in a batch with its other
    /// syncs, before it answers.
    pub fn sync_dir(&mut self, dir: &Dir) -> CallResult<()> {
        match &mut self.guard {
            Guard::Lock(_) => {
                fsync_dir(dir);
                Ok(())
            }
            Guard::Batch { batch, .. } => batch.sync_later(dir),
        }
    }

    /// Replaces the staged files (see the module). In a batch, an edit of
    /// one file is queued.
    pub fn commit(&mut self) -> CallResult<()> {
        self.commit_as(false)
    }

    /// [`commit`](Edit::commit), finished at once even in a batch: when
    /// other paths may lead through this one (it replaces a link), it must
    /// be done before they are looked up.
    pub fn commit_now(&mut self) -> CallResult<()> {
        self.commit_as(true)
    }

    fn commit_as(&mut self, now: bool) -> CallResult<()> {
        // Before noop stops: a preview says what the change would say.
        let refused = self.refuse_mount_points();
        if self.noop || refused.is_err() {
            self.staged.clear();
        }
        refused?;
        if self.staged.is_empty() {
            return Ok(());
        }
        // A call past its time limit writes nothing more: the host has
        // given up on it, and said so.
        self.call.within_time()?;
        if matches!(self.guard, Guard::Batch { .. }) && !now && self.staged.len() == 1 {
            return self.queue();
        }
        let staged = std::mem::take(&mut self.staged);
        let entries = self.write_temps(&staged)?;
        self.refuse_changed(&staged)?;
        self.refuse_moved()?;
        let journal = staged.len() > 1;
        if journal {
            let Some(name) = self.guard.journal() else {
                return Err(CallError::new(
                    "an edit of several files needs a lock file for its journal, not a lock \
                     on a directory",
                ));
            };
            self.write_journal(&name, &entries)?;
        }
        self.replace_all(&staged, &entries, journal)?;
        if journal {
            self.drop_journal();
        }
        Ok(())
    }

    /// Writes and syncs the temporary file of each staged file; returns
    /// the journal's entry of each.
    fn write_temps(&mut self, staged: &[Staged]) -> CallResult<Vec<Entry>> {
        let mut entries = Vec::with_capacity(staged.len());
        for file in staged {
            let temp = self.write_temp(file)?;
            entries.push(Entry {
                dir: file.target.dir().rel().to_owned(),
                temp,
                name: file.target.name().to_owned(),
                was: identity(self.read_stat(&file.target).as_ref()),
            });
        }
        Ok(entries)
    }

    /// Refuses the commit when a staged file changed since it was read:
    /// a writer that does not take the lock.
    fn refuse_changed(&self, staged: &[Staged]) -> CallResult<()> {
        for file in staged {
            let now = file.target.lstat()?;
            if identity(now.as_ref()) != identity(self.read_stat(&file.target).as_ref()) {
                return Err(CallError::new(format!(
                    "{} was changed meanwhile by a program that does not take the lock {}; \
                     nothing was written",
                    quoted(file.target.path()),
                    quoted(&self.guard.show())
                )));
            }
        }
        Ok(())
    }

    /// Refuses the commit when the locked directory is no longer at its
    /// path: written there, the change would be made where nobody looks,
    /// and reported as made.
    fn refuse_moved(&self) -> CallResult<()> {
        let locked = self.guard.dir();
        if !in_place(locked)? {
            return Err(CallError::new(format!(
                "{} was moved or replaced while it was being edited, so the lock {} no \
                 longer guards that path; nothing was written",
                quoted(locked.path()),
                quoted(&self.guard.show())
            )));
        }
        Ok(())
    }

    /// Renames each temporary file over its staged file, in order, then
    /// syncs their directories. A rename that fails first leaves no
    /// trace; one that fails later leaves the journal (`journal`) to the
    /// next edit, which finishes the others.
    fn replace_all(
        &mut self,
        staged: &[Staged],
        entries: &[Entry],
        journal: bool,
    ) -> CallResult<()> {
        let mut synced: Vec<Dir> = Vec::new();
        for (index, (file, entry)) in staged.iter().zip(entries).enumerate() {
            let dir = file.target.dir();
            if let Err(err) = rename(dir, &entry.temp, file.target.name()) {
                return Err(self.replace_failed(err, file, index, journal));
            }
            self.temps
                .retain(|(d, t)| !(t == &entry.temp && d.rel() == dir.rel()));
            if !synced.iter().any(|d| d.rel() == dir.rel()) {
                synced.push(dir.clone());
            }
        }
        for dir in &synced {
            fsync_dir(dir);
        }
        Ok(())
    }

    /// The error of a failed rename over `file`, the `index`th. The first
    /// leaves no trace (its `journal` goes too); a later one leaves the
    /// temporary files and the journal, which let the next edit finish the
    /// rest.
    fn replace_failed(
        &mut self,
        err: std::io::Error,
        file: &Staged,
        index: usize,
        journal: bool,
    ) -> CallError {
        let shown = quoted(file.target.path());
        if index == 0 {
            // Nothing replaced yet: no trace of this edit may stay.
            if journal {
                self.drop_journal();
            }
            return CallError::io(&err, &format!("replace {shown}"));
        }
        // The journal lets the next edit finish the rest.
        self.temps.clear();
        CallError::io(
            &err,
            &format!(
                "replace {shown} (the files already replaced stay; the next edit finishes the \
                 others)"
            ),
        )
    }

    /// Hands the one staged file's temporary file, written but not synced,
    /// to the batch.
    fn queue(&mut self) -> CallResult<()> {
        let Some(file) = self.staged.pop() else {
            return Ok(());
        };
        let (temp, fd) = self.write_temp_unsynced(&file)?;
        let was = identity(self.read_stat(&file.target).as_ref());
        let Guard::Batch { batch, dir, ident } = &mut self.guard else {
            return Err(CallError::new("internal: a queued edit without a batch"));
        };
        batch.queue(*ident, dir, self.key, &file.target, temp.clone(), fd, was)?;
        // The batch's now.
        self.temps
            .retain(|(d, t)| !(t == &temp && d.rel() == file.target.dir().rel()));
        Ok(())
    }

    /// Refuses the staged change when a file it replaces, or the journal
    /// beside its lock, is a mount point: the rename over it would fail
    /// (EBUSY), maybe after other files were replaced. An edit of one file
    /// writes no journal, but cannot remove one either: the change stops
    /// there when it begins, and its preview must stop as well.
    fn refuse_mount_points(&self) -> CallResult<()> {
        let dir = self.guard.dir();
        let journal = self.guard.journal().filter(|_| !self.staged.is_empty());
        let targets = self
            .staged
            .iter()
            .map(|file| (file.target.dir(), file.target.name()))
            .chain(journal.as_deref().map(|name| (dir, name)));
        for (dir, name) in targets {
            if mounted_on(dir, name) {
                return Err(CallError::new(format!(
                    "cannot replace {}: it is a mount point (something is mounted on it, maybe \
                     from outside the root), which a file is never renamed over; nothing was \
                     written",
                    quoted(&dir.show(name))
                )));
            }
        }
        Ok(())
    }

    fn drop_journal(&self) {
        if let Some(name) = self.guard.journal() {
            let _ = sys::unlink_at(self.guard.dir().as_fd(), name.as_ref());
        }
    }

    /// Writes and syncs the temporary file that will replace the staged
    /// file; returns its name.
    fn write_temp(&mut self, file: &Staged) -> CallResult<String> {
        let (temp, fd) = self.write_temp_unsynced(file)?;
        sys::fsync(fd.as_fd()).map_err(|err| {
            CallError::io(
                &err,
                &format!("write {}", quoted(&file.target.dir().show(&temp))),
            )
        })?;
        Ok(temp)
    }

    /// Writes the temporary file that will replace the staged file,
    /// without syncing it; returns its name and descriptor.
    fn write_temp_unsynced(&mut self, file: &Staged) -> CallResult<(String, OwnedFd)> {
        let dir = file.target.dir();
        let (temp, fd) = create_temp(dir, file.target.name())?;
        self.temps.push((dir.clone(), temp.clone()));
        let old = self.read_stat(&file.target);
        let written = (|| {
            let mut out = File::from(fd.try_clone()?);
            out.write_all(&file.data)?;
            if old.is_some() {
                copy_attributes(dir, file.target.name(), &fd);
            }
            if let Some(owner) = file.owner {
                if sys::is_root() {
                    sys::fchown(fd.as_fd(), owner.uid, owner.gid)?;
                }
            }
            sys::fchmod(fd.as_fd(), Mode::from_raw_mode(file.mode))
        })();
        written
            .map_err(|err| CallError::io(&err, &format!("write {}", quoted(&dir.show(&temp)))))?;
        Ok((temp, fd))
    }

    fn write_journal(&mut self, name: &str, entries: &[Entry]) -> CallResult<()> {
        let dir = self.guard.dir().clone();
        let files: Vec<_> = entries.iter().map(Entry::to_json).collect();
        let text = serde_json::json!({"ral_journal": 1, "files": files}).to_string();
        let failed = |err: std::io::Error| {
            CallError::io(
                &err,
                &format!("write the journal {}", quoted(&dir.show(name))),
            )
        };
        let temp = temp_name(name).map_err(failed)?;
        let fd = sys::open_at(dir.as_fd(), temp.as_ref(), TEMP_FLAGS, PRIVATE).map_err(failed)?;
        self.temps.push((dir.clone(), temp.clone()));
        let mut out = File::from(fd);
        out.write_all(text.as_bytes()).map_err(failed)?;
        sys::fsync(out.as_fd()).map_err(failed)?;
        rename(&dir, &temp, name).map_err(failed)?;
        self.temps.retain(|(_, t)| t != &temp);
        sys::fsync(dir.as_fd()).map_err(failed)
    }
}

impl Drop for Edit<'_> {
    fn drop(&mut self) {
        for (dir, temp) in self.temps.drain(..) {
            let _ = sys::unlink_at(dir.as_fd(), temp.as_ref());
        }
        self.guard.release();
    }
}

const TEMP_FLAGS: OFlags = OFlags::WRONLY
    .union(OFlags::CREATE)
    .union(OFlags::EXCL)
    .union(OFlags::NOFOLLOW)
    .union(OFlags::CLOEXEC);
/// A temporary file's mode until its own is set: 0600.
const PRIVATE: Mode = Mode::RUSR.union(Mode::WUSR);

/// Whether something is mounted on `name` in `dir`. The rename would
/// fail on it anyway (EBUSY); told before, it keeps an edit of several
/// files from replacing some and not the others, and a preview from
/// promising what the change cannot do. A mount id that cannot be read
/// (or a file that does not exist) leaves that to the rename.
fn mounted_on(dir: &Dir, name: &str) -> bool {
    sys::is_mount_point_at(dir.as_fd(), name.as_ref()).unwrap_or(false)
}

/// A new temporary file for `name` in `dir`, open to write.
pub(super) fn create_temp(dir: &Dir, name: &str) -> CallResult<(String, OwnedFd)> {
    for _ in 0..100 {
        let temp = temp_name(name).map_err(|err| {
            CallError::io(
                &err,
                &format!("name a temporary file in {}", quoted(dir.path())),
            )
        })?;
        match sys::open_at(dir.as_fd(), temp.as_ref(), TEMP_FLAGS, PRIVATE) {
            Ok(fd) => return Ok((temp, fd)),
            Err(err) if err.raw_os_error() == Some(libc::EEXIST) => continue,
            Err(err) => {
                return Err(CallError::io(
                    &err,
                    &format!("create a temporary file in {}", quoted(dir.path())),
                ))
            }
        }
    }
    Err(CallError::new(format!(
        "cannot create a temporary file in {}",
        quoted(dir.path())
    )))
}

/// Renames `from` to `to` in `dir`.
pub(super) fn rename(dir: &Dir, from: &str, to: &str) -> std::io::Result<()> {
    #[cfg(test)]
    if FAIL_RENAME_ONTO.with(|fail| fail.borrow().as_deref() == Some(to)) {
        return Err(std::io::Error::from_raw_os_error(libc::EIO));
    }
    sys::rename_at(dir.as_fd(), OsStr::new(from), dir.as_fd(), OsStr::new(to))
}

/// True when the path of `dir` (every link on it resolved when it was
/// opened) still leads to the directory open.
pub(super) fn in_place(dir: &Dir) -> CallResult<bool> {
    let Ok(now) = dir.root().directory(dir.rel(), false, None) else {
        return Ok(false);
    };
    Ok(now.identity()? == dir.identity()?)
}

/// The extended attributes a replaced file keeps: its SELinux context and
/// its access control list (which `chmod` then adjusts as it would the
/// old file's). Not the others: an IMA or EVM signature, for one, would
/// not match the new content.
const KEPT_XATTRS: [&std::ffi::CStr; 2] = [c"security.selinux", c"system.posix_acl_access"];

/// Gives the file `fd` the attributes of `name` it keeps
/// ([`KEPT_XATTRS`]), where it has them.
fn copy_attributes(dir: &Dir, name: &str, fd: &OwnedFd) {
    let Ok(source) = sys::open_at(dir.as_fd(), name.as_ref(), sys::READ_FLAGS, Mode::empty())
    else {
        return;
    };
    for attribute in KEPT_XATTRS {
        if let Some(value) = sys::xattr(source.as_fd(), attribute) {
            // The same file system as the old file's: what it held, the
            // new file can.
            let _ = sys::set_xattr(fd.as_fd(), attribute, &value);
        }
    }
}
