//! One update of a path, worked out under its directory's lock: the
//! values asked for checked, what is there compared with them, the
//! changes to report, and the [`Action`] that makes them — a file written
//! through the edit (queued in the batch), a link made under a temporary
//! name and renamed into place, a directory made, a mode or owner
//! changed, something removed. Nothing is written while planning.

use std::ffi::OsStr;
use std::os::fd::{AsFd, BorrowedFd};

use serde_json::{Map, Value as Json};

use super::ids::{IdMap, Ids};
use super::place::{read_sum, sha256_hex, Place, What, CONTENT_MAX};
use super::sys;
use crate::files::{temp_name, Attrs, Edit, Owner, Stat};
use crate::text::{python_dumps, python_str, quoted};
use crate::{CallError, CallResult, Change, Update};

/// The attributes an update may name.
const ATTRIBUTES: [&str; 9] = [
    "name", "ensure", "content", "checksum", "target", "mode", "owner", "group", "force",
];
const ENSURES: [&str; 5] = ["present", "file", "directory", "link", "absent"];
const DEFAULT_FILE_MODE: u32 = 0o644;
const DEFAULT_DIR_MODE: u32 = 0o755;

/// What an update comes to: the changes to report (none: nothing to do),
/// the work that makes them, and whether it removes the path.
#[derive(Debug, Default)]
pub struct Plan {
    pub changes: Vec<Change>,
    pub action: Option<Action>,
    pub gone: bool,
    /// The report holds an old link target that is not UTF-8, which no
    /// answer can carry (the change is still made).
    pub unreadable: bool,
}

impl Plan {
    /// The outcome to answer once the work is done.
    pub fn report(self) -> CallResult<Vec<Change>> {
        if self.unreadable {
            return Err(CallError::new(
                "the report of this change (which was made) holds bytes that are not UTF-8 (in a \
                 name, a link target...), which ral cannot read",
            ));
        }
        Ok(self.changes)
    }
}

/// The work of one update; ids left `None` are left as they are (or as
/// the writer's for something new).
#[derive(Debug, PartialEq)]
pub enum Action {
    Remove {
        old: What,
    },
    WriteFile {
        data: Vec<u8>,
        mode: u32,
        uid: Option<u32>,
        gid: Option<u32>,
        old: What,
    },
    Link {
        target: String,
        uid: Option<u32>,
        gid: Option<u32>,
        old: What,
    },
    MakeDir {
        mode: u32,
        uid: Option<u32>,
        gid: Option<u32>,
        old: What,
    },
    Meta {
        kind: What,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        /// A mount point, changed in place as `force` allows.
        on_mount: bool,
    },
}

/// `value` as Python's `json.dumps` writes it (ASCII only), for messages
/// worded as the script's.
pub fn dumps(value: &Json) -> String {
    python_dumps(value, true)
}

fn mode_text(mode: u32) -> String {
    format!("{mode:04o}")
}

/// Checks what every provider checks of an update: known attributes, no
/// rename, a known ensure. Returns the ensure asked for.
fn check_should<'a>(name: &str, should: &'a Map<String, Json>) -> CallResult<Option<&'a str>> {
    for key in should.keys() {
        if !ATTRIBUTES.contains(&key.as_str()) {
            return Err(CallError::new(format!("unknown attribute {}", quoted(key))));
        }
    }
    if let Some(other) = should.get("name") {
        if other.as_str() != Some(name) {
            return Err(CallError::new(format!(
                "name: cannot rename {} to {}",
                quoted(name),
                quoted(&python_str(other))
            )));
        }
    }
    match should.get("ensure") {
        None | Some(Json::Null) => Ok(None),
        Some(Json::String(ensure)) if ENSURES.contains(&ensure.as_str()) => Ok(Some(ensure)),
        Some(other) => Err(CallError::new(format!(
            "ensure: {} is not one of {}",
            dumps(other),
            ENSURES.join(", ")
        ))),
    }
}

/// Sets the change of `attribute`, where it was if it is there already
/// (as a Python dict keeps a key's place).
fn put(changes: &mut Vec<Change>, attribute: &str, was: Json, is: Json) {
    let change = Change::new(attribute, was, is);
    match changes.iter_mut().find(|c| c.attribute == attribute) {
        Some(slot) => *slot = change,
        None => changes.push(change),
    }
}

/// Works out one update of `place` (see the module).
pub fn plan(update: &Update, place: &Place, users: &IdMap, groups: &IdMap) -> CallResult<Plan> {
    let asked = Asked::of(update, users, groups)?;
    let found = Found::of(place, &update.name, asked.ensure, asked.target)?;
    if found.new == What::Absent {
        return plan_removal(&found, asked.force);
    }
    check_kinds(&found, &asked)?;
    let kept = owners_kept(&found, &asked)?;
    if found.old != found.new {
        return plan_replacement(&found, &asked, kept);
    }
    plan_in_place(&found, &asked, kept, users, groups)
}

/// What an update asks for, its values checked.
struct Asked<'a> {
    should: &'a Map<String, Json>,
    ensure: Option<&'a str>,
    force: bool,
    content: Option<&'a str>,
    target: Option<&'a str>,
    mode: Option<u32>,
    uid: Option<u32>,
    gid: Option<u32>,
}

impl<'a> Asked<'a> {
    fn of(update: &'a Update, users: &IdMap, groups: &IdMap) -> CallResult<Asked<'a>> {
        let should = &update.should;
        let ensure = check_should(&update.name, should)?;
        if should.contains_key("checksum") {
            return Err(CallError::new("checksum is read-only; set content instead"));
        }
        let force = force_of(should)?;
        let (content, target) = texts_of(should)?;
        let mode = match should.get("mode") {
            None => None,
            Some(value) => Some(parse_mode(value).ok_or_else(|| {
                CallError::new(format!(
                    "mode: {} is not 4 octal digits (such as 0644)",
                    dumps(value)
                ))
            })?),
        };
        let uid = match should.get("owner") {
            Some(value) => Some(users.lookup(value, Ids::Users)?),
            None => None,
        };
        let gid = match should.get("group") {
            Some(value) => Some(groups.lookup(value, Ids::Groups)?),
            None => None,
        };
        Ok(Asked {
            should,
            ensure,
            force,
            content,
            target,
            mode,
            uid,
            gid,
        })
    }
}

/// The `force` asked for: false unless given.
fn force_of(should: &Map<String, Json>) -> CallResult<bool> {
    match should.get("force") {
        None => Ok(false),
        Some(Json::Bool(force)) => Ok(*force),
        Some(other) => Err(CallError::new(format!(
            "force: {} is not a boolean",
            dumps(other)
        ))),
    }
}

/// The `content` and `target` asked for, each a string; a link's text
/// never empty nor holding NUL.
fn texts_of(should: &Map<String, Json>) -> CallResult<(Option<&str>, Option<&str>)> {
    for key in ["content", "target"] {
        if let Some(value) = should.get(key) {
            if !value.is_string() {
                return Err(CallError::new(format!(
                    "{key}: {} is not a string",
                    dumps(value)
                )));
            }
        }
    }
    let content = should.get("content").and_then(Json::as_str);
    let target = should.get("target").and_then(Json::as_str);
    if target.is_some_and(|t| t.is_empty() || t.contains('\0')) {
        return Err(CallError::new(
            "target: a link's text must be non-empty and without NUL",
        ));
    }
    Ok((content, target))
}

/// The path as found, and what it is to become.
struct Found<'a> {
    place: &'a Place,
    name: &'a str,
    /// The name, quoted for messages.
    path: String,
    st: Option<Stat>,
    old: What,
    new: What,
}

impl<'a> Found<'a> {
    /// What is at `place` and what `ensure` (with `target`) makes of it;
    /// refused when it is special, the root, or a mount point to replace
    /// or remove.
    fn of(
        place: &'a Place,
        name: &'a str,
        ensure: Option<&str>,
        target: Option<&str>,
    ) -> CallResult<Found<'a>> {
        let st = place.lstat("change")?;
        let Some(old) = What::of(st.as_ref()) else {
            return Err(CallError::new(format!(
                "{} is a special file, which this provider does not manage",
                quoted(name)
            )));
        };
        let new = match ensure {
            None | Some("present") if old != What::Absent => old,
            None | Some("present") if target.is_some() => What::Link,
            None | Some("present") => What::File,
            Some(ensure) => What::parse(ensure).unwrap_or(What::File),
        };
        let found = Found {
            place,
            name,
            path: quoted(name),
            st,
            old,
            new,
        };
        found.refuse_root()?;
        found.refuse_mount_point()?;
        Ok(found)
    }

    fn refuse_root(&self) -> CallResult<()> {
        if self.place.is_root() && self.new != What::Directory {
            return Err(CallError::new(format!(
                "refusing to replace or remove the root directory {}",
                quoted(&self.place.show())
            )));
        }
        Ok(())
    }

    /// What is mounted on the path (maybe from outside the root) is no
    /// file of it to replace or remove.
    fn refuse_mount_point(&self) -> CallResult<()> {
        let (old, new) = (self.old, self.new);
        if old != What::Absent && new != old && self.place.is_mount_point("change")? {
            let verb = match new {
                What::Absent => "remove",
                _ => "replace",
            };
            return Err(CallError::new(format!(
                "{} is a mount point (something is mounted on it, maybe from outside the \
                 root): refusing to {verb} it; unmount it first",
                self.path
            )));
        }
        Ok(())
    }

    /// The error of a failed change.
    fn failed(&self, err: std::io::Error) -> CallError {
        CallError::io(&err, &format!("change {}", quoted(self.name)))
    }
}

/// The plan that removes what is found, if anything: a non-empty
/// directory only with `force`, and never one holding a mount point.
fn plan_removal(found: &Found, force: bool) -> CallResult<Plan> {
    let (old, place, path) = (found.old, found.place, &found.path);
    if old == What::Absent {
        return Ok(Plan::default());
    }
    let empty = || place.is_empty_dir().map_err(|err| found.failed(err));
    if old == What::Directory && !force && !empty()? {
        return Err(CallError::new(format!(
            "{path} is a non-empty directory; set force=true to remove it with everything in \
             it"
        )));
    }
    if old == What::Directory {
        refuse_mounts_below(place, path)?;
    }
    Ok(Plan {
        changes: vec![Change::new("ensure", old.as_str(), "absent")],
        action: Some(Action::Remove { old }),
        gone: true,
        unreadable: false,
    })
}

/// Refuses what the kind to be cannot have (a content but for a file, a
/// target but for a link, a link's mode), a path whose directory is
/// missing, and a directory replaced, or replacing, without `force`.
fn check_kinds(found: &Found, asked: &Asked) -> CallResult<()> {
    let (old, new, path) = (found.old, found.new, &found.path);
    if found.place.dir.is_none() {
        return Err(CallError::new(format!(
            "the directory holding {path} does not exist"
        )));
    }
    if asked.content.is_some() && new != What::File {
        return Err(CallError::new(format!(
            "content: only a regular file has content, and {path} would be a {}",
            new.as_str()
        )));
    }
    if asked.target.is_some() && new != What::Link {
        return Err(CallError::new(format!(
            "target: only a link has a target, and {path} would be a {}",
            new.as_str()
        )));
    }
    if asked.mode.is_some() && new == What::Link {
        return Err(CallError::new("mode: a link has no mode of its own"));
    }
    let either_dir = old == What::Directory || new == What::Directory;
    if old != new && either_dir && old != What::Absent && !asked.force {
        return Err(CallError::new(format!(
            "{path} is a {}; refusing to replace it with a {} without force=true",
            old.as_str(),
            new.as_str()
        )));
    }
    Ok(())
}

/// Refuses a change of owner or group without root. Returns the owner
/// and group a replacement keeps: those of what it replaces, as root
/// only (what we create is ours anyway).
fn owners_kept(found: &Found, asked: &Asked) -> CallResult<(Option<u32>, Option<u32>)> {
    let (euid, egid) = sys::effective_ids();
    let (st, path) = (found.st, &found.path);
    if euid != 0 {
        if asked
            .uid
            .is_some_and(|uid| uid != st.map_or(euid, |st| st.uid()))
        {
            return Err(CallError::new(format!(
                "owner: changing the owner of {path} needs root"
            )));
        }
        if asked
            .gid
            .is_some_and(|gid| gid != st.map_or(egid, |st| st.gid()))
        {
            return Err(CallError::new(format!(
                "group: changing the group of {path} needs root"
            )));
        }
    }
    Ok(match (euid, st) {
        (0, Some(st)) => (Some(st.uid()), Some(st.gid())),
        _ => (None, None),
    })
}

/// The plan that creates the path, or replaces it with another kind of
/// thing: everything asked for is new.
fn plan_replacement(
    found: &Found,
    asked: &Asked,
    kept: (Option<u32>, Option<u32>),
) -> CallResult<Plan> {
    let (old, new) = (found.old, found.new);
    if old == What::Directory {
        refuse_mounts_below(found.place, &found.path)?;
    }
    let mut changes = vec![Change::new("ensure", old.as_str(), new.as_str())];
    for key in ["content", "target", "mode", "owner", "group"] {
        if let Some(value) = asked.should.get(key) {
            changes.push(Change::new(key, Json::Null, value.clone()));
        }
    }
    if new != What::Link {
        replacement_mode(found, asked.mode, &mut changes);
    }
    if new == What::File {
        let last = asked.mode.unwrap_or(DEFAULT_FILE_MODE);
        withhold_content(&mut changes, asked.content, last, None);
    }
    let action = replacement_action(found, asked, asked.uid.or(kept.0), asked.gid.or(kept.1))?;
    Ok(Plan {
        changes,
        action: Some(action),
        gone: false,
        unreadable: false,
    })
}

/// The mode change of a file or directory made new: from the mode of
/// what it replaces (none for a link) to the one asked for or the
/// default; none when they are the same.
fn replacement_mode(found: &Found, mode: Option<u32>, changes: &mut Vec<Change>) {
    let default = match found.new {
        What::File => DEFAULT_FILE_MODE,
        _ => DEFAULT_DIR_MODE,
    };
    let last = mode.unwrap_or(default);
    let was = found
        .st
        .filter(|_| found.old != What::Link)
        .map(|st| st.permissions());
    if Some(last) != was {
        let was = was.map_or(Json::Null, |was| Json::from(mode_text(was)));
        put(changes, "mode", was, Json::from(mode_text(last)));
    } else {
        changes.retain(|c| c.attribute != "mode");
    }
}

/// The work that makes the new file, link or directory, owned by `uid`
/// and `gid`.
fn replacement_action(
    found: &Found,
    asked: &Asked,
    uid: Option<u32>,
    gid: Option<u32>,
) -> CallResult<Action> {
    let old = found.old;
    Ok(match found.new {
        What::File => Action::WriteFile {
            data: asked.content.unwrap_or("").as_bytes().to_vec(),
            mode: asked.mode.unwrap_or(DEFAULT_FILE_MODE),
            uid,
            gid,
            old,
        },
        What::Link => {
            let Some(target) = asked.target else {
                return Err(CallError::new(format!(
                    "target: creating the link {} needs a target",
                    found.path
                )));
            };
            Action::Link {
                target: target.to_owned(),
                uid,
                gid,
                old,
            }
        }
        _ => Action::MakeDir {
            mode: asked.mode.unwrap_or(DEFAULT_DIR_MODE),
            uid,
            gid,
            old,
        },
    })
}

/// What differs between a path and the same kind of thing asked for,
/// and is to change: a new content or link target, a mode, an owner, a
/// group (`None`: that stays as it is).
struct Differs {
    content: Option<Vec<u8>>,
    target: Option<String>,
    mode: Option<u32>,
    uid: Option<u32>,
    gid: Option<u32>,
}

/// The plan that changes what differs of the same kind of thing.
fn plan_in_place(
    found: &Found,
    asked: &Asked,
    kept: (Option<u32>, Option<u32>),
    users: &IdMap,
    groups: &IdMap,
) -> CallResult<Plan> {
    let Some(st) = found.st else {
        return Ok(Plan::default());
    };
    let mut changes = Vec::new();
    let (content, old_digest) = content_change(found, st, asked.content, &mut changes)?;
    let (target, unreadable) = target_change(found, asked.target, &mut changes)?;
    let (mode, uid, gid) = meta_changes(st, asked, users, groups, &mut changes);
    if changes.is_empty() {
        return Ok(Plan::default());
    }
    if found.new == What::File {
        let last = mode.unwrap_or(st.permissions());
        withhold_content(&mut changes, asked.content, last, old_digest);
    }
    let mut differs = Differs {
        content,
        target,
        mode,
        uid,
        gid,
    };
    let in_place = differs.content.is_none() && differs.target.is_none();
    let mounted = found.place.is_mount_point("change")?;
    if mounted {
        refuse_on_mount_point(&found.path, in_place, asked.force)?;
    }
    // A file or link with other hard links shares its inode with them,
    // maybe with a file outside the root: its mode and owner are never
    // changed in place. A new content replaces the path anyway.
    if in_place && found.new != What::Directory && st.nlink() > 1 && !mounted {
        return replace_hard_linked(found, st, asked.force, differs, changes);
    }
    // chown(2) clears setuid and setgid (and file capabilities): the mode
    // is set again after it.
    if in_place && found.new != What::Link && (uid.is_some() || gid.is_some()) {
        differs.mode = Some(mode.unwrap_or(st.permissions()));
    }
    Ok(Plan {
        changes,
        action: Some(in_place_action(found, st, differs, kept, mounted)),
        gone: false,
        unreadable,
    })
}

/// The new content of a file whose content is not `content`, with its
/// old checksum (for a change shown as checksums); the change is added to
/// `changes`. A file of another size differs: a large one is not read to
/// tell (a small one is, for its old content).
fn content_change(
    found: &Found,
    st: Stat,
    content: Option<&str>,
    changes: &mut Vec<Change>,
) -> CallResult<(Option<Vec<u8>>, Option<String>)> {
    let (What::File, Some(text)) = (found.new, content) else {
        return Ok((None, None));
    };
    let data = text.as_bytes();
    let size = st.size();
    let sum = if size == data.len() as u64 || size <= CONTENT_MAX as u64 {
        read_sum(found.place, "change")?
    } else {
        None
    };
    if sum.as_ref().map(|sum| sum.digest.as_str()) == Some(sha256_hex(data).as_str()) {
        return Ok((None, None));
    }
    let old_digest = sum.as_ref().map(|sum| format!("sha256:{}", sum.digest));
    let was = sum
        .and_then(|sum| sum.head)
        .and_then(|head| String::from_utf8(head).ok())
        .map_or(Json::Null, Json::from);
    changes.push(Change::new("content", was, text));
    Ok((Some(data.to_vec()), old_digest))
}

/// The new target of a link that points elsewhere than `target`, and
/// whether its old target is not UTF-8 (shown as best it can be); the
/// change is added to `changes`.
fn target_change(
    found: &Found,
    target: Option<&str>,
    changes: &mut Vec<Change>,
) -> CallResult<(Option<String>, bool)> {
    let (What::Link, Some(text)) = (found.new, target) else {
        return Ok((None, false));
    };
    let current = found.place.read_link().map_err(|err| found.failed(err))?;
    if current == text.as_bytes() {
        return Ok((None, false));
    }
    let (was, unreadable) = match String::from_utf8(current) {
        Ok(was) => (was, false),
        Err(err) => (String::from_utf8_lossy(err.as_bytes()).into_owned(), true),
    };
    changes.push(Change::new("target", was, text));
    Ok((Some(text.to_owned()), unreadable))
}

/// The mode, owner and group asked for that differ from `st`'s (`None`
/// for those that do not), their changes added to `changes`.
fn meta_changes(
    st: Stat,
    asked: &Asked,
    users: &IdMap,
    groups: &IdMap,
    changes: &mut Vec<Change>,
) -> (Option<u32>, Option<u32>, Option<u32>) {
    let old_mode = st.permissions();
    let mode = asked.mode.filter(|&m| m != old_mode);
    if let Some(m) = mode {
        changes.push(Change::new("mode", mode_text(old_mode), mode_text(m)));
    }
    let uid = asked.uid.filter(|&u| u != st.uid());
    if let Some(u) = uid {
        changes.push(Change::new("owner", users.show(st.uid()), users.show(u)));
    }
    let gid = asked.gid.filter(|&g| g != st.gid());
    if let Some(g) = gid {
        changes.push(Change::new("group", groups.show(st.gid()), groups.show(g)));
    }
    (mode, uid, gid)
}

/// The plan for a hard-linked file or link whose mode or owner changes:
/// refused without `force`, with it a copy of its own replaces it.
fn replace_hard_linked(
    found: &Found,
    st: Stat,
    force: bool,
    differs: Differs,
    changes: Vec<Change>,
) -> CallResult<Plan> {
    if !force {
        return Err(CallError::new(format!(
            "{} has {} hard links, which share its mode and owner (one may be outside the \
             root): refusing to change them in place; set force=true to replace it with a \
             copy of its own",
            found.path,
            st.nlink()
        )));
    }
    let Differs { mode, uid, gid, .. } = differs;
    replace_linked(found.place, found.new, st, mode, uid, gid, changes)
}

/// The work that changes what differs of the same kind of thing: a new
/// content written or target linked (with the owner kept), else the mode
/// and owner changed where they are.
fn in_place_action(
    found: &Found,
    st: Stat,
    differs: Differs,
    kept: (Option<u32>, Option<u32>),
    mounted: bool,
) -> Action {
    let Differs {
        content,
        target,
        mode,
        uid,
        gid,
    } = differs;
    let old = found.old;
    if let Some(data) = content {
        Action::WriteFile {
            data,
            mode: mode.unwrap_or(st.permissions()),
            uid: uid.or(kept.0),
            gid: gid.or(kept.1),
            old,
        }
    } else if let Some(target) = target {
        Action::Link {
            target,
            uid: Some(uid.unwrap_or(st.uid())),
            gid: Some(gid.unwrap_or(st.gid())),
            old,
        }
    } else {
        Action::Meta {
            kind: found.new,
            mode,
            uid,
            gid,
            on_mount: mounted,
        }
    }
}

/// Refuses to remove the directory at `place` (`path`, quoted) when a
/// mount point lies in it: a removal never crosses into another mount,
/// so none starts.
fn refuse_mounts_below(place: &Place, path: &str) -> CallResult<()> {
    match place.mount_below("remove")? {
        None => Ok(()),
        Some(inner) => Err(CallError::new(format!(
            "{path} holds the mount point {}: refusing to remove anything of it, as a removal \
             never crosses into another mount; unmount it first",
            quoted(&inner)
        ))),
    }
}

/// Refuses a change of the mount point `path` (quoted) in place, as a
/// hard-linked file's: its mode and owner are those of what is mounted
/// there (maybe from outside the root), changed only with `force`; and a
/// new content or target, which would be renamed over it, never.
fn refuse_on_mount_point(path: &str, in_place: bool, force: bool) -> CallResult<()> {
    if !in_place {
        return Err(CallError::new(format!(
            "{path} is a mount point (something is mounted on it, maybe from outside the root): \
             refusing to replace it with a new content or target; change it where it is \
             mounted from, or unmount it first"
        )));
    }
    if !force {
        return Err(CallError::new(format!(
            "{path} is a mount point (something is mounted on it, maybe from outside the root), \
             whose mode and owner are those of what is mounted there: refusing to change them; \
             set force=true to change them in place"
        )));
    }
    Ok(())
}

/// Shows a content change as checksums when the content is too large to
/// show or the file will be private (`mode` gives others no read
/// permission): the answer then never holds it.
fn withhold_content(changes: &mut [Change], content: Option<&str>, mode: u32, was: Option<String>) {
    let Some(text) = content else {
        return;
    };
    if text.len() <= CONTENT_MAX && mode & 0o004 != 0 {
        return;
    }
    if let Some(change) = changes.iter_mut().find(|c| c.attribute == "content") {
        change.was = was.map_or(Json::Null, Json::from);
        change.is = Json::from(format!("sha256:{}", sha256_hex(text.as_bytes())));
    }
}

/// The largest hard-linked file that `force` replaces with a copy.
pub(super) const COPY_MAX: u64 = 64 << 20;

/// The plan that replaces a hard-linked file or link at `place` with a
/// copy of its own, with the mode and owner asked for.
fn replace_linked(
    place: &Place,
    kind: What,
    st: Stat,
    mode: Option<u32>,
    uid: Option<u32>,
    gid: Option<u32>,
    changes: Vec<Change>,
) -> CallResult<Plan> {
    let name = quoted(&place.name);
    let io = |err: std::io::Error| CallError::io(&err, &format!("copy {name}"));
    let action = match kind {
        What::Link => Action::Link {
            target: String::from_utf8(place.read_link().map_err(io)?).map_err(|_| {
                CallError::new(format!(
                    "the link {name} holds bytes that are not UTF-8, which ral cannot copy"
                ))
            })?,
            uid: Some(uid.unwrap_or(st.uid())),
            gid: Some(gid.unwrap_or(st.gid())),
            old: What::Link,
        },
        _ => {
            if st.size() > COPY_MAX {
                return Err(CallError::new(format!(
                    "{name} is larger than {COPY_MAX} bytes, too large to replace with a copy"
                )));
            }
            Action::WriteFile {
                data: read_whole(place, COPY_MAX).map_err(io)?,
                mode: mode.unwrap_or(st.permissions()),
                uid: Some(uid.unwrap_or(st.uid())),
                gid: Some(gid.unwrap_or(st.gid())),
                old: What::File,
            }
        }
    };
    Ok(Plan {
        changes,
        action: Some(action),
        gone: false,
        unreadable: false,
    })
}

/// The whole content of the regular file at `place`, at most `limit`
/// bytes ([`COPY_MAX`]; smaller in tests).
pub(super) fn read_whole(place: &Place, limit: u64) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let fd = place.open_fd(sys::OFlags::RDONLY | sys::OFlags::NONBLOCK)?;
    let file = std::fs::File::from(fd);
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::other("it is no longer a regular file"));
    }
    let mut data = Vec::new();
    file.take(limit + 1).read_to_end(&mut data)?;
    if data.len() as u64 > limit {
        return Err(std::io::Error::other(
            "it grew past the size it may be copied at",
        ));
    }
    Ok(data)
}

/// Four octal digits, as the file reports its mode.
fn parse_mode(value: &Json) -> Option<u32> {
    let text = value.as_str()?;
    if text.len() != 4 || !text.bytes().all(|b| (b'0'..=b'7').contains(&b)) {
        return None;
    }
    u32::from_str_radix(text, 8).ok()
}

/// Does the work of `action` at `place` through `edit` (under its lock).
pub fn execute(action: Action, edit: &mut Edit<'_>, place: &Place) -> CallResult<()> {
    let os = change_failed(place);
    let Some(dir) = place.dir.as_ref() else {
        return Err(CallError::new(format!(
            "the directory holding {} does not exist",
            quoted(&place.name)
        )));
    };
    match action {
        Action::Remove { old } => {
            remove(place, dir.as_fd(), old).map_err(os)?;
            edit.sync_dir(dir)
        }
        Action::WriteFile {
            data,
            mode,
            uid,
            gid,
            old,
        } => {
            let attrs = Attrs {
                mode: Some(mode),
                owner: Some(Owner { uid, gid }),
                ..Attrs::default()
            };
            write_file(edit, place, dir.as_fd(), data, attrs, old)
        }
        Action::Link {
            target,
            uid,
            gid,
            old,
        } => {
            make_link(place, dir.as_fd(), &target, (uid, gid), old).map_err(os)?;
            edit.sync_dir(dir)
        }
        Action::MakeDir {
            mode,
            uid,
            gid,
            old,
        } => {
            make_dir(place, dir.as_fd(), mode, (uid, gid), old).map_err(os)?;
            edit.sync_dir(dir)
        }
        Action::Meta {
            kind,
            mode,
            uid,
            gid,
            on_mount,
        } => set_meta(place, kind, mode, uid, gid, on_mount).map_err(os),
    }
}

/// The error of a failed change of `place`.
fn change_failed(place: &Place) -> impl Fn(std::io::Error) -> CallError + '_ {
    move |err| CallError::io(&err, &format!("change {}", quoted(&place.name)))
}

/// Removes what is at `place` (`old`), a directory with all it holds.
fn remove(place: &Place, fd: BorrowedFd<'_>, old: What) -> std::io::Result<()> {
    let base = OsStr::new(place.base());
    match old {
        What::Directory => sys::remove_tree(fd, base),
        What::Absent => Ok(()),
        _ => sys::unlink_at(fd, base, false),
    }
}

/// Writes the file at `place` through `edit`, replacing `old`.
fn write_file(
    edit: &mut Edit<'_>,
    place: &Place,
    fd: BorrowedFd<'_>,
    data: Vec<u8>,
    attrs: Attrs,
    old: What,
) -> CallResult<()> {
    // Not for the root, which is never replaced.
    let Some(target) = place.target.as_ref() else {
        return Err(CallError::new(format!(
            "refusing to replace or remove the root directory {}",
            quoted(&place.show())
        )));
    };
    if old == What::Directory {
        // A directory cannot be renamed over: it goes first.
        sys::remove_tree(fd, OsStr::new(place.base())).map_err(change_failed(place))?;
        edit.note(target, None)?;
    }
    edit.write(target, data, attrs)?;
    // A link is replaced at once even in a batch: paths looked up later
    // may lead through it.
    match old {
        What::Link => edit.commit_now(),
        _ => edit.commit(),
    }
}

/// Makes the link at `place` to `target`, owned by `owner` (`None`s
/// left as the writer's), under a temporary name (one the next edit
/// removes if a crash leaves it) renamed over `old`.
fn make_link(
    place: &Place,
    fd: BorrowedFd<'_>,
    target: &str,
    (uid, gid): (Option<u32>, Option<u32>),
    old: What,
) -> std::io::Result<()> {
    let base = OsStr::new(place.base());
    let temp = temp_name(place.base())?;
    let temp = OsStr::new(&temp);
    sys::symlink_at(target.as_bytes(), fd, temp)?;
    let placed = (|| {
        if uid.is_some() || gid.is_some() {
            sys::lchown_at(fd, temp, uid, gid)?;
        }
        if old == What::Directory {
            sys::remove_tree(fd, base)?;
        }
        sys::rename_at(fd, temp, base)
    })();
    if placed.is_err() {
        let _ = sys::unlink_at(fd, temp, false);
    }
    placed
}

/// Makes the directory at `place` with `mode` and `owner`, removing
/// `old` first when it is something else.
fn make_dir(
    place: &Place,
    fd: BorrowedFd<'_>,
    mode: u32,
    (uid, gid): (Option<u32>, Option<u32>),
    old: What,
) -> std::io::Result<()> {
    let base = OsStr::new(place.base());
    if old != What::Absent && old != What::Directory {
        sys::unlink_at(fd, base, false)?;
    }
    sys::mkdir_at(fd, base, 0o700)?;
    set_meta(place, What::Directory, Some(mode), uid, gid, false)
}

/// Changes mode and ownership of what is at `place`, never following it;
/// what is mounted there only when the plan allowed it (`on_mount`).
pub(super) fn set_meta(
    place: &Place,
    kind: What,
    mode: Option<u32>,
    uid: Option<u32>,
    gid: Option<u32>,
    on_mount: bool,
) -> std::io::Result<()> {
    if kind == What::Link {
        if let (Some(dir), true) = (&place.dir, uid.is_some() || gid.is_some()) {
            sys::lchown_at(dir.as_fd(), OsStr::new(place.base()), uid, gid)?;
        }
        return Ok(());
    }
    let mut flags = sys::OFlags::RDONLY | sys::OFlags::NONBLOCK;
    if kind == What::Directory {
        flags |= sys::OFlags::DIRECTORY;
    }
    let fd = place.open_fd(flags)?;
    // Mounted on since it was planned: what is open is the mount's.
    if !on_mount {
        if let Some(dir) = &place.dir {
            if sys::on_other_mount(fd.as_fd(), dir.as_fd())? {
                return Err(std::io::Error::other(
                    "it became a mount point since it was read; refusing to change it",
                ));
            }
        }
    }
    // Linked since it was planned: its inode is another path's too.
    if kind == What::File && !on_mount && sys::fstat(fd.as_fd())?.nlink() > 1 {
        return Err(std::io::Error::other(
            "it gained another hard link since it was read; refusing to change it in place",
        ));
    }
    if uid.is_some() || gid.is_some() {
        // chown(2) clears file capabilities: a change of owner alone
        // keeps them, as it keeps setuid (the mode is set again below).
        let capabilities = sys::file_capabilities(fd.as_fd());
        sys::fchown(fd.as_fd(), uid, gid)?;
        if let Some(capabilities) = capabilities {
            sys::set_file_capabilities(fd.as_fd(), &capabilities)?;
        }
    }
    if let Some(mode) = mode {
        sys::fchmod(fd.as_fd(), mode)?;
    }
    Ok(())
}
