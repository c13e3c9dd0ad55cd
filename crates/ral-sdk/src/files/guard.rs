//! What guards an edit: a lock of its own, or the lock of its directory
//! that a batch holds. The batch is seen through [`Queue`], what an edit
//! asks of it, so that edits know nothing else of batches and a batch
//! builds on edits.

use std::os::fd::OwnedFd;

use serde_json::Value as Json;

use super::lock::Lock;
use super::root::{Dir, Target};
use crate::error::CallResult;
use crate::Call;

/// A directory's device and inode.
pub(super) type Ident = (u64, u64);

/// What an edit made in a batch asks of it (the batch is
/// [`Batch`](super::Batch)).
pub(super) trait Queue {
    /// An edit is done with the lock `ident`.
    fn let_go(&mut self, ident: Ident);

    /// Removes the temporary files a crash left for `name` in `dir`, the
    /// directory listed once while its lock is held.
    fn remove_temps(&mut self, call: &Call, dir: &Dir, name: &str) -> CallResult<()>;

    /// Takes over the temporary file `temp` (open as `fd`) of an edit
    /// holding the lock `ident` of `dir`, to replace `target` at the
    /// flush, if `target` is still `was`. `target` must be in that
    /// directory, which keeps others from its temporary files.
    #[allow(clippy::too_many_arguments)]
    fn queue(
        &mut self,
        ident: Option<Ident>,
        dir: &Dir,
        key: usize,
        target: &Target,
        temp: String,
        fd: OwnedFd,
        was: Json,
    ) -> CallResult<()>;

    /// Syncs `dir` at the flush.
    fn sync_later(&mut self, dir: &Dir) -> CallResult<()>;
}

/// What guards an edit: a lock of its own, or one a batch holds.
pub(super) enum Guard<'a> {
    Lock(Lock),
    Batch {
        batch: &'a mut dyn Queue,
        dir: Dir,
        ident: Option<Ident>,
    },
}

impl Guard<'_> {
    /// The lock's path, or the directory's, for messages.
    pub fn show(&self) -> String {
        match self {
            Guard::Lock(lock) => lock.show(),
            Guard::Batch { dir, .. } => dir.path().to_owned(),
        }
    }

    /// The journal's name; `None` in a batch, whose edits are of one
    /// file each.
    pub fn journal(&self) -> Option<String> {
        match self {
            Guard::Lock(lock) => lock.journal(),
            Guard::Batch { .. } => None,
        }
    }

    /// The directory of the lock.
    pub fn dir(&self) -> &Dir {
        match self {
            Guard::Lock(lock) => lock.dir(),
            Guard::Batch { dir, .. } => dir,
        }
    }

    /// Lets go of the lock, or tells the batch this edit is done with it.
    pub fn release(&mut self) {
        match self {
            Guard::Lock(lock) => lock.release(),
            Guard::Batch { batch, ident, .. } => {
                if let Some(ident) = ident.take() {
                    batch.let_go(ident);
                }
            }
        }
    }
}
