//! `file::file`: files, directories and symbolic links below the root
//! (json calling convention), as the script it replaces managed them. A
//! resource's name is an absolute path as seen inside the root; nothing
//! outside it is ever read or written. The directories holding a path are
//! opened one at a time, a link among them resolved as if the root were
//! `/` ([`Place`]); the last component itself is never followed. What is
//! mounted on a path (maybe from outside the root) is no file of the root:
//! it is never replaced or removed, its mode and owner are changed only
//! with `force`, and a removal never crosses into another mount.
//!
//! A change holds an flock on the directory of the path (no lock file
//! appears beside the files managed), decides on what it finds under it
//! ([`plan`]) and replaces a regular file atomically (a synced temporary
//! file renamed over the original). A set of many updates is one
//! [`Batch`]: the temporary files are synced together and renamed at its
//! flushes, and an update whose path is, or lies above or below, one
//! still queued is looked up only after a flush.

mod ids;
mod place;
mod plan;
mod sys;

use std::collections::BTreeSet;

use serde_json::{Map, Value as Json};

use crate::files::{Batch, Root};
use crate::{error_entry, Call, CallError, CallResult, Convention, Level};
use crate::{Outcome, Provider, Resource, Update};
use ids::{IdMap, Ids};
use place::{read_sum, Place, What, CHECKSUM_MAX};

/// The provider.
pub struct File;

impl Provider for File {
    fn metadata(&self) -> &'static str {
        include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../providers/file.yaml"
        ))
    }

    fn convention(&self) -> Convention {
        Convention::Json
    }

    /// The paths named; there is no sensible listing of all files, so a
    /// get of none is empty.
    fn get(&self, call: &Call, names: &[String]) -> CallResult<Vec<Resource>> {
        let root = Root::open(&call.root)?;
        let users = IdMap::read(&root, Ids::Users);
        let groups = IdMap::read(&root, Ids::Groups);
        Ok(names
            .iter()
            .map(|name| {
                Place::open(&root, name)
                    .and_then(|place| describe(call, &place, &users, &groups))
                    .unwrap_or_else(|err| error_entry(name, &err))
            })
            .collect())
    }

    fn set(&self, call: &Call, updates: &[Update]) -> CallResult<Vec<Outcome>> {
        let root = Root::open(&call.root)?;
        let users = IdMap::read(&root, Ids::Users);
        let groups = IdMap::read(&root, Ids::Groups);
        let mut batch = Batch::new(call.noop);
        let mut outcomes = Vec::with_capacity(updates.len());
        let mut changed = BTreeSet::new();
        for (key, update) in updates.iter().enumerate() {
            let (outcome, made) = update_one(call, &root, &mut batch, key, update, &users, &groups);
            if made {
                changed.insert(key);
            }
            outcomes.push(outcome);
        }
        // A queued file that could not be written changed nothing.
        for (key, err) in batch.finish() {
            if let (true, Some(outcome), Some(update)) = (
                changed.contains(&key),
                outcomes.get_mut(key),
                updates.get(key),
            ) {
                let said = format!("failed: {}", err.message);
                call.log
                    .resource(Level::Debug, &update.name, None, Some(&said), Map::new());
                *outcome = Err(err);
            }
        }
        Ok(outcomes)
    }
}

/// The resource at `place`, as get reports it.
fn describe(call: &Call, place: &Place, users: &IdMap, groups: &IdMap) -> CallResult<Resource> {
    let name = place.name.as_str();
    let st = place.lstat("read")?;
    let Some(kind) = What::of(st.as_ref()) else {
        return Err(CallError::new(format!(
            "{} is a special file (not a file, directory or link), which this provider does \
             not manage",
            crate::text::quoted(name)
        )));
    };
    let mut res = Resource::new();
    res.insert("name".into(), Json::from(name));
    res.insert("ensure".into(), Json::from(kind.as_str()));
    let Some(st) = st else {
        return Ok(res);
    };
    res.insert("owner".into(), Json::from(users.show(st.uid())));
    res.insert("group".into(), Json::from(groups.show(st.gid())));
    if kind == What::Link {
        let read = place
            .read_link()
            .map_err(|err| CallError::io(&err, &format!("read {}", crate::text::quoted(name))))?;
        let target = String::from_utf8(read).map_err(|_| {
            CallError::new(
                "this resource holds bytes that are not UTF-8 (in a name, a link target...), \
                 which ral cannot read",
            )
        })?;
        res.insert("target".into(), Json::from(target));
        return Ok(res);
    }
    res.insert(
        "mode".into(),
        Json::from(format!("{:04o}", st.permissions())),
    );
    if kind == What::File {
        let Some(sum) = read_sum(place, "read")? else {
            let said = format!(
                "the file is larger than {CHECKSUM_MAX} bytes; its checksum is not reported"
            );
            call.log
                .resource(Level::Warn, name, None, Some(&said), Map::new());
            return Ok(res);
        };
        res.insert(
            "checksum".into(),
            Json::from(format!("sha256:{}", sum.digest)),
        );
        // What others may not read is no content to show: its checksum
        // stands for it.
        let private = st.permissions() & 0o004 == 0;
        if let Some(text) = sum
            .head
            .filter(|_| !private)
            .and_then(|h| String::from_utf8(h).ok())
        {
            res.insert("content".into(), Json::from(text));
        }
    }
    Ok(res)
}

/// The [`Place`] of `name` once no queued edit of `batch` could change
/// what its lookup finds: one of the same path or a path above or below
/// it, or one the lookup stopped at (a directory on the way that is
/// missing or not a directory may be replaced by the queued file). Queued
/// edits never replace links, so a lookup that succeeds went through none
/// of them.
fn locate(root: &Root, name: &str, batch: &mut Batch) -> CallResult<Place> {
    let place = match Place::open(root, name) {
        Ok(place) => place,
        Err(err) if batch.queued() == 0 => return Err(err),
        Err(_) => {
            batch.flush();
            return Place::open(root, name);
        }
    };
    if batch.queued() > 0 && place.rel().is_none_or(|rel| batch.touches(&rel)) {
        drop(place);
        batch.flush();
        return Place::open(root, name);
    }
    Ok(place)
}

/// Plans and makes one change under an flock on the directory of its
/// path (taken only to change: a preview takes nothing); a file's new
/// content is queued in `batch`. Says also whether it changed something
/// (a queued file may still fail).
fn update_one(
    call: &Call,
    root: &Root,
    batch: &mut Batch,
    key: usize,
    update: &Update,
    users: &IdMap,
    groups: &IdMap,
) -> (Outcome, bool) {
    let name = update.name.as_str();
    let place = match locate(root, name, batch) {
        Ok(place) => place,
        Err(err) => return (Err(err), false),
    };
    let Some(dir) = place.dir.clone() else {
        // Its directory is missing: nothing to lock.
        return match plan::plan(update, &place, users, groups) {
            Ok(plan) => {
                let made = !plan.changes.is_empty();
                (plan.report(), made)
            }
            Err(err) => (Err(err), false),
        };
    };
    let noop = batch.noop();
    let result = (|| {
        let mut edit = batch.edit(call, &dir, key)?;
        if let Some(target) = &place.target {
            edit.note(target, place.lstat("change")?)?;
        }
        let mut plan = plan::plan(update, &place, users, groups)?;
        if let (false, Some(action)) = (noop, plan.action.take()) {
            let work = || plan::execute(action, &mut edit, &place);
            match plan.gone {
                true => call.log.deleting(name, work)?,
                false => call.log.updating(name, work)?,
            }
        }
        Ok::<_, CallError>(plan)
    })();
    match result {
        Ok(plan) => {
            let made = !plan.changes.is_empty();
            (plan.report(), made)
        }
        Err(err) => (Err(err), false),
    }
}

#[cfg(test)]
mod tests;
