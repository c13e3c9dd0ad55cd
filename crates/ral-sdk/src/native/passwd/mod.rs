//! `user::etc_passwd`: user accounts in `etc/passwd` and `etc/shadow`
//! below the root, with supplementary group membership in `etc/group`
//! (and `etc/gshadow` when it exists), as the Python provider kept them
//! (json calling convention).
//!
//! Edits take lckpwdf's lock, re-read the files under it, and replace
//! every changed file atomically as one edit (`accounts.rs`): passwd
//! last, so an account appears only once its shadow line and primary group
//! are in place. useradd(8) is never run. An account that is nevertheless
//! half made (no shadow line, or no group with its gid) is reported as
//! incomplete, and ensure=present completes it. Password aging and
//! expiry (shadow's day fields) are in `aging`.

mod aging;

use std::collections::HashSet;

use serde_json::{json, Value as Json};

use super::accounts::{
    change_each, check_field, check_id, member_problem, members_of, name_problem, shown, Accounts,
    Apply, Table, NAME_RULE,
};
use super::home::{self, Work};
use crate::files::{Owner, Root};
use crate::serve::{check_resource_fits, check_should};
use crate::text::{clean, quoted};
use crate::{error_entry, Call, CallError, CallResult, Change, Convention, Kind};
use crate::{Outcome, Provider, Resource, Update};

const AUTO_FIRST: u64 = 1000;
/// Exclusive.
const AUTO_END: u64 = 60000;
const ATTRIBUTES: [&str; 15] = [
    "name",
    "ensure",
    "uid",
    "gid",
    "comment",
    "home",
    "shell",
    "groups",
    "password",
    "password_min_age",
    "password_max_age",
    "password_warn_days",
    "expiry",
    "managehome",
    "allow_empty_password",
];
/// The write-only switches: booleans passed, never reported.
const SWITCHES: [&str; 2] = ["managehome", "allow_empty_password"];
const ENSURES: [&str; 2] = ["present", "absent"];
const TABLES: [&str; 4] = ["passwd", "group", "gshadow", "shadow"];

/// The provider.
pub struct EtcPasswd;

impl Provider for EtcPasswd {
    fn metadata(&self) -> &'static str {
        include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../providers/etc_passwd.yaml"
        ))
    }

    fn convention(&self) -> Convention {
        Convention::Json
    }

    fn get(&self, call: &Call, names: &[String]) -> CallResult<Vec<Resource>> {
        let root = Root::open(&call.root)?;
        // A reader need not be able to read shadow and gshadow (they are
        // not readable for everyone); then passwords and a missing shadow
        // line are not reported.
        let db = Accounts::read(call, &root, &TABLES, None, &["shadow", "gshadow"])?;
        let view = View::new(&db);
        let records = db.get("passwd").map(Table::records).unwrap_or_default();
        if names.is_empty() {
            return Ok(records.iter().map(|line| view.resource(line.f())).collect());
        }
        let mut resources = Vec::new();
        for name in names {
            match records.iter().find(|line| line.name() == Some(name)) {
                Some(line) => resources.push(view.resource(line.f())),
                None => {
                    if let Some(problem) = name_problem(name, "user name") {
                        let message = format!("{problem}; no such user can be created");
                        resources.push(error_entry(
                            name,
                            &CallError::of_kind(Kind::Unknown, message),
                        ));
                    }
                }
            }
        }
        Ok(resources)
    }

    fn set(&self, call: &Call, updates: &[Update]) -> CallResult<Vec<Outcome>> {
        let mut job = Users { work: Vec::new() };
        change_each(call, updates, &mut job)
    }
}

/// What a resource is made from: the tables, and what of them a reader
/// could read.
struct View<'d> {
    group: Option<&'d Table>,
    shadow: Option<&'d Table>,
    group_ids: HashSet<u64>,
}

impl<'d> View<'d> {
    fn new(db: &'d Accounts) -> View<'d> {
        let group = db.get("group");
        View {
            group,
            shadow: db.get("shadow"),
            group_ids: group.map(|g| g.ids(2)).unwrap_or_default(),
        }
    }

    /// What a half-made account lacks: its shadow line (while shadow is
    /// in use), its primary group.
    fn missing(&self, fields: &[String]) -> Vec<&'static str> {
        let mut lacks = Vec::new();
        if let Some(shadow) = self.shadow {
            if shadow.exists && shadow.find(&fields[0]).is_none() {
                lacks.push("shadow");
            }
        }
        let gid: u64 = fields[3].parse().unwrap_or_default();
        if self.group.is_some_and(|g| g.exists) && !self.group_ids.contains(&gid) {
            lacks.push("group");
        }
        lacks
    }

    fn groups_of(&self, name: &str) -> Vec<String> {
        groups_of(self.group, name)
    }

    fn resource(&self, f: &[String]) -> Resource {
        let mut res = Resource::new();
        res.insert("name".into(), json!(clean(&f[0])));
        let ensure = match self.missing(f).is_empty() {
            true => "present",
            false => "incomplete",
        };
        res.insert("ensure".into(), json!(ensure));
        res.insert("uid".into(), json!(f[2].parse::<u64>().unwrap_or_default()));
        res.insert("gid".into(), json!(f[3].parse::<u64>().unwrap_or_default()));
        res.insert("comment".into(), json!(clean(&f[4])));
        res.insert("home".into(), json!(clean(&f[5])));
        res.insert("shell".into(), json!(clean(&f[6])));
        let groups: Vec<String> = self.groups_of(&f[0]).iter().map(|g| clean(g)).collect();
        res.insert("groups".into(), json!(groups));
        if let Some(shadow) = self.shadow {
            if let Some(at) = shadow.find(&f[0]) {
                let line = shadow.lines[at].f();
                res.insert("password".into(), json!(clean(&line[1])));
                aging::report(line, &mut res);
            }
        }
        res
    }
}

fn groups_of(group: Option<&Table>, name: &str) -> Vec<String> {
    group
        .map(|group| {
            group
                .records()
                .iter()
                .filter(|line| members_of(line.f()).iter().any(|m| m == name))
                .map(|line| line.f()[0].clone())
                .collect()
        })
        .unwrap_or_default()
}

/// The set of a call: its updates, and the home directories they need.
struct Users {
    work: Vec<Work>,
}

impl Apply for Users {
    fn tables(&self) -> &'static [&'static str] {
        &TABLES
    }

    fn drop_missing(&self) -> &'static [&'static str] {
        &["gshadow"]
    }

    fn apply(
        &mut self,
        call: &Call,
        update: &Update,
        db: &mut Accounts,
    ) -> CallResult<Vec<Change>> {
        apply_update(call, update, db, &mut self.work)
    }

    fn new_owners(&self, db: &Accounts) -> Vec<(&'static str, Owner)> {
        let gid = db
            .get("group")
            .and_then(|group| group.find("shadow").map(|at| group.lines[at].id(2)))
            .unwrap_or(0) as u32;
        vec![
            ("shadow", Owner::new(0, gid)),
            ("gshadow", Owner::new(0, gid)),
        ]
    }

    fn after(&mut self, call: &Call, root: &Root, db: &Accounts) -> CallResult<()> {
        // Most calls make or remove no home: no copy of the accounts.
        if self.work.is_empty() {
            return Ok(());
        }
        home::run(
            call,
            root,
            &home::Accounts::of(db.get("passwd")),
            &self.work,
        )
    }
}

fn check_path(attr: &str, value: &Json) -> CallResult<String> {
    let text = check_field(attr, value, false)?;
    if !text.starts_with('/') {
        return Err(CallError::new(format!(
            "{attr}: {} is not an absolute path",
            shown(&text)
        )));
    }
    Ok(text)
}

/// Refuses an empty password unless `allow_empty_password` says it is
/// meant: with one, anyone can log in as the user without a password.
fn check_password(name: &str, should: &Resource) -> CallResult<()> {
    let Some(value) = should.get("password") else {
        return Ok(());
    };
    let password = check_field("password", value, true)?;
    if password.is_empty() && should.get("allow_empty_password") != Some(&Json::Bool(true)) {
        return Err(CallError::new(format!(
            "password: an empty password lets anyone log in as {} without one; give \
             allow_empty_password=true with it if that is meant (a locked account has \
             the password '!')",
            shown(name)
        )));
    }
    Ok(())
}

fn check_groups(group: Option<&Table>, value: &Json) -> CallResult<Vec<String>> {
    let bad = || CallError::new(format!("groups: {value} is not an array of strings"));
    let list = value.as_array().ok_or_else(bad)?;
    let mut groups = Vec::new();
    for item in list {
        groups.push(item.as_str().ok_or_else(bad)?.to_owned());
    }
    let known: HashSet<&str> = group
        .map(|g| g.records().iter().filter_map(|l| l.name()).collect())
        .unwrap_or_default();
    for g in &groups {
        if !known.contains(g.as_str()) {
            return Err(CallError::new(format!(
                "groups: unknown group {}",
                quoted(g)
            )));
        }
    }
    let mut seen = HashSet::new();
    groups.retain(|g| seen.insert(g.clone()));
    Ok(groups)
}

/// `gid` as a new primary group: one the group file has (while there is
/// one), as useradd and usermod require. An account whose primary group
/// does not exist is incomplete (pwck and grpck call it broken), and a
/// later ensure=present would make a group for it: the same request would
/// change the files again.
fn check_primary_group(db: &Accounts, gid: u64) -> CallResult<u64> {
    match db.get("group") {
        Some(group) if group.exists && !group.ids(2).contains(&gid) => {
            Err(CallError::new(format!(
                "gid: no group has the gid {gid} (in {}); create that group first (a plan \
                 makes a group of the manifest with that gid before the user), or leave gid \
                 out to get a group named like the user",
                group.target.path()
            )))
        }
        _ => Ok(gid),
    }
}

fn free_id(used: &HashSet<u64>, attr: &str, preferred: Option<u64>) -> CallResult<u64> {
    if let Some(preferred) = preferred.filter(|p| !used.contains(p)) {
        return Ok(preferred);
    }
    (AUTO_FIRST..AUTO_END)
        .find(|value| !used.contains(value))
        .ok_or_else(|| {
            CallError::new(format!(
                "{attr}: no free {attr} from {AUTO_FIRST} to {}",
                AUTO_END - 1
            ))
        })
}

/// Makes `name` an explicit member of exactly the groups `wanted`.
fn set_membership(db: &mut Accounts, name: &str, wanted: &[String]) {
    for table_name in ["group", "gshadow"] {
        let Some(table) = db.get_mut(table_name) else {
            continue;
        };
        let mut changed = false;
        for line in table.lines.iter_mut() {
            let Some(group) = line.name().map(str::to_owned) else {
                continue;
            };
            let mut members = members_of(line.f());
            let want = wanted.contains(&group);
            let has = members.iter().any(|m| m == name);
            if want && !has {
                members.push(name.to_owned());
            } else if !want && has {
                members.retain(|m| m != name);
            } else {
                continue;
            }
            line.set_field(3, &members.join(","));
            changed = true;
        }
        if changed {
            table.changed = true;
        }
    }
}

/// Takes a removed user out of every group's administrators (gshadow's
/// third field).
fn drop_admin(db: &mut Accounts, name: &str) {
    let Some(gshadow) = db.get_mut("gshadow") else {
        return;
    };
    let mut changed = false;
    for line in gshadow.lines.iter_mut() {
        if line.fields.is_none() {
            continue;
        }
        let admins: Vec<String> = line.f()[2].split(',').map(str::to_owned).collect();
        if admins.iter().any(|a| a == name) {
            let kept: Vec<String> = admins
                .into_iter()
                .filter(|a| !a.is_empty() && a != name)
                .collect();
            line.set_field(2, &kept.join(","));
            changed = true;
        }
    }
    if changed {
        gshadow.changed = true;
    }
}

fn days_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default();
    (secs / 86400).to_string()
}

/// A shadow line for `name`, replacing any stale one left for it.
fn add_shadow(db: &mut Accounts, name: &str, password: &str) {
    if let Some(shadow) = db.get_mut("shadow") {
        shadow.remove(name);
        let days = days_now();
        shadow.append(&[name, password, &days, "0", "99999", "7", "", "", ""]);
    }
}

/// The group `name` with `gid`, as a new user's primary group.
fn add_group(db: &mut Accounts, name: &str, gid: u64) {
    if let Some(group) = db.get_mut("group") {
        group.append(&[name, "x", &gid.to_string(), ""]);
    }
    if let Some(gshadow) = db.get_mut("gshadow") {
        gshadow.remove(name);
        gshadow.append(&[name, "!", "", ""]);
    }
}

fn text_of(should: &Resource, key: &str) -> Option<String> {
    should.get(key).and_then(Json::as_str).map(str::to_owned)
}

/// Adds what a half-made account lacks: a shadow line (locked, unless a
/// password is given) and a group with its gid (named like the user).
fn complete(db: &mut Accounts, fields: &[String], should: &Resource) -> CallResult<()> {
    let (name, gid) = (&fields[0], fields[3].parse::<u64>().unwrap_or_default());
    let lacks = View::new(db).missing(fields);
    if lacks.contains(&"shadow") {
        let password = text_of(should, "password").unwrap_or_else(|| "!".to_owned());
        add_shadow(db, name, &password);
    }
    if lacks.contains(&"group") {
        let group = db.get("group");
        if let Some(same) = group.and_then(|g| g.find(name).map(|at| &g.lines[at])) {
            let other = &same.f()[2];
            return Err(CallError::new(format!(
                "gid: the primary group {gid} of {} does not exist, and the group {} that would \
                 be made for it has gid {other} already; set gid={other} or create a group with \
                 gid {gid}",
                quoted(name),
                quoted(name)
            )));
        }
        add_group(db, name, gid);
    }
    Ok(())
}

/// Gives the shadow line of `name` the `wanted` aging values; their
/// changes, or an error when the account has no shadow line to hold them.
fn age_shadow(db: &mut Accounts, name: &str, wanted: &[aging::Wanted]) -> CallResult<Vec<Change>> {
    let Some(first) = wanted.first() else {
        return Ok(Vec::new());
    };
    let shadow = db.get_mut("shadow");
    let Some((shadow, at)) = shadow.and_then(|s| s.find(name).map(|at| (s, at))) else {
        return Err(CallError::new(format!(
            "{}: {} has no shadow line to hold it; ensure=present adds one",
            first.attr(),
            quoted(name)
        )));
    };
    let changes = aging::apply(&mut shadow.lines[at], wanted);
    if !changes.is_empty() {
        shadow.changed = true;
    }
    Ok(changes)
}

/// What a new account's aging fields were set to, as changes from
/// nothing: the defaults of its shadow line and the values given.
fn aging_made(db: &Accounts, name: &str) -> Vec<Change> {
    let mut made = Resource::new();
    if let Some(shadow) = db.get("shadow") {
        if let Some(at) = shadow.find(name) {
            aging::report(shadow.lines[at].f(), &mut made);
        }
    }
    made.into_iter()
        .map(|(attr, value)| Change::new(&attr, Json::Null, value))
        .collect()
}

fn create(
    db: &mut Accounts,
    name: &str,
    should: &Resource,
    wanted: &[aging::Wanted],
    work: &mut Vec<Work>,
) -> CallResult<Vec<Change>> {
    if let Some(problem) = name_problem(name, "user name") {
        return Err(CallError::new(format!("name: {problem} ({NAME_RULE})")));
    }
    let uid = new_uid(db, should)?;
    let gid = new_gid(db, name, should, uid)?;
    let comment = text_of(should, "comment").unwrap_or_default();
    let home = text_of(should, "home").unwrap_or_else(|| format!("/home/{name}"));
    let shell = text_of(should, "shell").unwrap_or_else(|| "/bin/sh".to_owned());
    let password = text_of(should, "password").unwrap_or_else(|| "!".to_owned());
    let groups = groups_in(should.get("groups"));
    add_shadow(db, name, &password);
    age_shadow(db, name, wanted)?;
    if let Some(passwd) = db.get_mut("passwd") {
        passwd.append(&[
            name,
            "x",
            &uid.to_string(),
            &gid.to_string(),
            &comment,
            &home,
            &shell,
        ]);
    }
    set_membership(db, name, &groups);
    if should.get("managehome") == Some(&Json::Bool(true)) {
        work.push(Work::Make {
            name: name.to_owned(),
            home: home.clone(),
            uid: uid as u32,
            gid: gid as u32,
        });
    }
    let mut changes = vec![
        Change::new("ensure", "absent", "present"),
        Change::new("uid", Json::Null, uid),
        Change::new("gid", Json::Null, gid),
        Change::new("comment", Json::Null, comment),
        Change::new("home", Json::Null, home),
        Change::new("shell", Json::Null, shell),
        Change::new("groups", Json::Null, groups),
        Change::new("password", Json::Null, password),
    ];
    changes.extend(aging_made(db, name));
    Ok(changes)
}

/// A new account's uid: the one asked for, unless another user has it,
/// or the first free one.
fn new_uid(db: &Accounts, should: &Resource) -> CallResult<u64> {
    let passwd = db.get("passwd").expect("passwd is read");
    let used_uids = passwd.ids(2);
    let Some(value) = should.get("uid") else {
        return free_id(&used_uids, "uid", None);
    };
    let uid = check_id("uid", value)?;
    if used_uids.contains(&uid) {
        let owner = passwd
            .records()
            .iter()
            .find(|r| r.id(2) == uid)
            .and_then(|r| r.name().map(str::to_owned))
            .unwrap_or_default();
        return Err(CallError::new(format!(
            "uid: {uid} is already used by user {}",
            quoted(&owner)
        )));
    }
    Ok(uid)
}

/// A new account's primary gid: the one asked for (a group must have
/// it), else that of the group named like the user, else a new group of
/// that name with a free gid (`uid` when free), added now.
fn new_gid(db: &mut Accounts, name: &str, should: &Resource, uid: u64) -> CallResult<u64> {
    if let Some(value) = should.get("gid") {
        return check_primary_group(db, check_id("gid", value)?);
    }
    let group = db.get("group");
    if let Some(own) = group.and_then(|g| g.find(name).map(|at| g.lines[at].id(2))) {
        return Ok(own);
    }
    let used = group.map(|g| g.ids(2)).unwrap_or_default();
    let gid = free_id(&used, "gid", Some(uid))?;
    add_group(db, name, gid);
    Ok(gid)
}

/// The group names of a `groups` value (checked already), none when it
/// is not given.
fn groups_in(value: Option<&Json>) -> Vec<String> {
    value
        .and_then(Json::as_array)
        .map(|list| {
            list.iter()
                .filter_map(|g| g.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

fn modify(
    db: &mut Accounts,
    at: usize,
    should: &Resource,
    wanted: &[aging::Wanted],
    ensure: Option<&str>,
) -> CallResult<Vec<Change>> {
    let fields = db.get("passwd").expect("passwd is read").lines[at]
        .f()
        .to_vec();
    let name = fields[0].clone();
    let mut changes = Vec::new();
    if ensure == Some("present") && !View::new(db).missing(&fields).is_empty() {
        complete(db, &fields, should)?;
        changes.push(Change::new("ensure", "incomplete", "present"));
    }
    refuse_new_uid(should, &fields)?;
    let new_gid = changed_gid(db, should, &fields)?;
    changes.extend(change_passwd_line(db, at, should, &fields, new_gid));
    changes.extend(change_password(db, &name, should));
    changes.extend(age_shadow(db, &name, wanted)?);
    changes.extend(change_groups(db, &name, should)?);
    Ok(changes)
}

/// Refuses a uid other than the account's (`fields`, its passwd line):
/// a uid is set only when the user is created.
fn refuse_new_uid(should: &Resource, fields: &[String]) -> CallResult<()> {
    let Some(value) = should.get("uid") else {
        return Ok(());
    };
    let uid = check_id("uid", value)?;
    if uid.to_string() != fields[2] {
        return Err(CallError::new(format!(
            "uid: {uid} can only be set when the user is created; it is {} now",
            fields[2]
        )));
    }
    Ok(())
}

/// The primary gid asked for when it is not the account's (`fields`),
/// checked as a new primary group.
fn changed_gid(db: &Accounts, should: &Resource, fields: &[String]) -> CallResult<Option<u64>> {
    let old_gid: u64 = fields[3].parse().unwrap_or_default();
    let new_gid = match should.get("gid") {
        Some(value) => Some(check_id("gid", value)?).filter(|gid| *gid != old_gid),
        None => None,
    };
    if let Some(gid) = new_gid {
        check_primary_group(db, gid)?;
    }
    Ok(new_gid)
}

/// Writes the new gid, comment, home and shell asked for in the passwd
/// line `at` (whose fields were `fields`); their changes.
fn change_passwd_line(
    db: &mut Accounts,
    at: usize,
    should: &Resource,
    fields: &[String],
    new_gid: Option<u64>,
) -> Vec<Change> {
    let mut changes = Vec::new();
    let passwd = db.get_mut("passwd").expect("passwd is read");
    if let Some(gid) = new_gid {
        let old_gid: u64 = fields[3].parse().unwrap_or_default();
        changes.push(Change::new("gid", old_gid, gid));
        passwd.lines[at].set_field(3, &gid.to_string());
        passwd.changed = true;
    }
    for (attr, index) in [("comment", 4), ("home", 5), ("shell", 6)] {
        if let Some(value) = text_of(should, attr) {
            if value != fields[index] {
                changes.push(Change::new(attr, clean(&fields[index]), value.as_str()));
                passwd.lines[at].set_field(index, &value);
                passwd.changed = true;
            }
        }
    }
    changes
}

/// Writes the password asked for in the shadow line of `name` (added
/// when missing), dated today; its change.
fn change_password(db: &mut Accounts, name: &str, should: &Resource) -> Option<Change> {
    let password = text_of(should, "password")?;
    let shadow = db.get("shadow");
    let entry = shadow.and_then(|s| s.find(name));
    let old = entry.and_then(|at| shadow.map(|s| s.lines[at].f()[1].clone()));
    if Some(&password) == old.as_ref() {
        return None;
    }
    match entry {
        None => add_shadow(db, name, &password),
        Some(at) => {
            if let Some(shadow) = db.get_mut("shadow") {
                shadow.lines[at].set_field(1, &password);
                shadow.lines[at].set_field(2, &days_now());
                shadow.changed = true;
            }
        }
    }
    Some(Change::new(
        "password",
        old.map_or(Json::Null, Json::from),
        password,
    ))
}

/// Makes `name` a member of the groups asked for and no others, when
/// they are not the ones it is in (in any order); its change.
fn change_groups(db: &mut Accounts, name: &str, should: &Resource) -> CallResult<Option<Change>> {
    let Some(groups) = should.get("groups") else {
        return Ok(None);
    };
    let groups = groups_in(Some(groups));
    let old_groups = groups_of(db.get("group"), name);
    let (mut a, mut b) = (groups.clone(), old_groups.clone());
    a.sort();
    b.sort();
    if a == b {
        return Ok(None);
    }
    if let Some(problem) = member_problem(name, "the user name") {
        return Err(CallError::new(format!(
            "groups: {problem}, so it cannot be written in a group's member list"
        )));
    }
    set_membership(db, name, &groups);
    Ok(Some(Change::new("groups", old_groups, groups)))
}

fn apply_update(
    call: &Call,
    update: &Update,
    db: &mut Accounts,
    work: &mut Vec<Work>,
) -> CallResult<Vec<Change>> {
    let ensure = check_should(update, &ATTRIBUTES, Some(&ENSURES), &[])?;
    let ensure = ensure.and_then(Json::as_str);
    let name = update.name.as_str();
    check_switches(&update.should)?;
    let at = db.get("passwd").and_then(|p| p.find(name));
    if ensure == Some("absent") {
        let managehome = update.should.get("managehome") == Some(&Json::Bool(true));
        return match at {
            None => Ok(Vec::new()),
            Some(at) => remove(call, name, at, db, work, managehome),
        };
    }
    let mut should = update.should.clone();
    let wanted = check_values(name, db, &mut should)?;
    match at {
        None => call.log.creating(name, || {
            let changes = create(db, name, &should, &wanted, work)?;
            let passwd = db.get("passwd").expect("passwd is read");
            if let Some(at) = passwd.find(name) {
                check_resource_fits(&View::new(db).resource(passwd.lines[at].f()))?;
            }
            Ok(changes)
        }),
        Some(at) => call.log.updating(name, || {
            let changes = modify(db, at, &should, &wanted, ensure)?;
            if !changes.is_empty() {
                let passwd = db.get("passwd").expect("passwd is read");
                check_resource_fits(&View::new(db).resource(passwd.lines[at].f()))?;
            }
            Ok(changes)
        }),
    }
}

/// Refuses a write-only switch that is not a boolean.
fn check_switches(should: &Resource) -> CallResult<()> {
    for switch in SWITCHES {
        if let Some(value) = should.get(switch).filter(|v| !v.is_boolean()) {
            return Err(CallError::new(format!(
                "{switch}: {value} is not a boolean"
            )));
        }
    }
    Ok(())
}

/// Removes the account `name` (passwd line `at`): its lines, its group
/// memberships and administrations, and with `managehome` its home (as
/// `work` for later).
fn remove(
    call: &Call,
    name: &str,
    at: usize,
    db: &mut Accounts,
    work: &mut Vec<Work>,
    managehome: bool,
) -> CallResult<Vec<Change>> {
    let fields = db.get("passwd").expect("passwd is read").lines[at]
        .f()
        .to_vec();
    let was = match View::new(db).missing(&fields).is_empty() {
        true => "present",
        false => "incomplete",
    };
    call.log.deleting(name, || {
        db.get_mut("passwd").expect("passwd is read").remove(name);
        if let Some(shadow) = db.get_mut("shadow") {
            shadow.remove(name);
        }
        set_membership(db, name, &[]);
        drop_admin(db, name);
        if managehome {
            work.push(Work::Remove {
                name: name.to_owned(),
                home: fields[5].clone(),
                uid: fields[2].parse().unwrap_or_default(),
            });
        }
        Ok(vec![Change::new("ensure", was, "absent")])
    })
}

/// Checks the values of an account to create or modify: its comment,
/// password, home, shell and groups (made a list without repeats in
/// `should`); returns the aging values asked for.
fn check_values(
    name: &str,
    db: &Accounts,
    should: &mut Resource,
) -> CallResult<Vec<aging::Wanted>> {
    if let Some(value) = should.get("comment") {
        check_field("comment", value, false)?;
    }
    check_password(name, should)?;
    for attr in ["home", "shell"] {
        if let Some(value) = should.get(attr) {
            check_path(attr, value)?;
        }
    }
    if let Some(groups) = should.get("groups") {
        let checked = check_groups(db.get("group"), groups)?;
        should.insert("groups".into(), json!(checked));
    }
    aging::check(should)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use serde_json::json;

    use super::super::tests::{call, update, write_accounts};
    use super::*;

    fn files(root: &Path) -> Vec<String> {
        ["passwd", "shadow", "group", "gshadow"]
            .iter()
            .map(|f| std::fs::read_to_string(root.join("etc").join(f)).unwrap())
            .collect()
    }

    /// `user u0 ensure=present gid=999` with no group 999 made an account
    /// without its primary group (pwck: "no group 999"), which the same
    /// request run again completed with a new group: refused, as useradd
    /// and usermod refuse it, naming the attribute and the value.
    #[test]
    fn a_primary_gid_no_group_has_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        write_accounts(dir.path());
        let call = call(dir.path());
        let before = files(dir.path());
        let create = update("u0", json!({"ensure": "present", "gid": 999}));
        let outcomes = EtcPasswd.set(&call, &[create]).unwrap();
        let err = outcomes[0].clone().unwrap_err();
        assert!(
            err.message
                .starts_with("gid: no group has the gid 999 (in "),
            "{}",
            err.message
        );
        assert_eq!(files(dir.path()), before, "nothing written");
        // A gid a group has is taken, and an account's gid is changed
        // only to one a group has.
        let create = update("u0", json!({"ensure": "present", "gid": 50}));
        assert!(EtcPasswd.set(&call, &[create]).unwrap()[0].is_ok());
        let change = update("u0", json!({"gid": 4_294_967_294u64}));
        let outcomes = EtcPasswd.set(&call, &[change]).unwrap();
        assert!(
            outcomes[0]
                .clone()
                .unwrap_err()
                .message
                .starts_with("gid: no group has the gid 4294967294"),
            "{outcomes:?}"
        );
        let change = update("u0", json!({"gid": 0}));
        assert!(EtcPasswd.set(&call, &[change]).unwrap()[0].is_ok());
        let passwd = std::fs::read_to_string(dir.path().join("etc/passwd")).unwrap();
        assert!(passwd.contains("\nu0:x:1000:0:"), "{passwd}");
    }
}
