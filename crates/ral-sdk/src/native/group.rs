//! `group::etc_group`: groups in `etc/group` below the root, with
//! `etc/gshadow` kept in step when it exists, as the Python provider kept
//! them (json calling convention). Edits take lckpwdf's lock, re-read the
//! files under it and replace them atomically, gshadow before group
//! (`accounts.rs`). A group whose gshadow line is missing is reported as
//! incomplete, and ensure=present completes it.

use std::collections::HashSet;

use serde_json::{json, Value as Json};

use super::accounts::{
    change_each, check_id, member_problem, members_of, name_problem, Accounts, Apply, Record,
    NAME_RULE,
};
use crate::files::Root;
use crate::serve::{check_resource_fits, check_should};
use crate::text::{clean, quoted};
use crate::{error_entry, Call, CallError, CallResult, Change, Convention, Kind};
use crate::{Outcome, Provider, Resource, Update};

const AUTO_GID_FIRST: u64 = 1000;
/// Exclusive.
const AUTO_GID_END: u64 = 60000;
const ATTRIBUTES: [&str; 4] = ["name", "ensure", "gid", "members"];
const ENSURES: [&str; 2] = ["present", "absent"];
const TABLES: [&str; 2] = ["group", "gshadow"];
/// What a change reads: passwd too, for the users whose primary group a
/// group is.
const SET_TABLES: [&str; 3] = ["group", "gshadow", "passwd"];

/// The provider.
pub struct EtcGroup;

impl Provider for EtcGroup {
    fn metadata(&self) -> &'static str {
        include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../providers/etc_group.yaml"
        ))
    }

    fn convention(&self) -> Convention {
        Convention::Json
    }

    fn get(&self, call: &Call, names: &[String]) -> CallResult<Vec<Resource>> {
        let root = Root::open(&call.root)?;
        // gshadow is not readable for everyone: a reader does without it.
        let db = match Accounts::read(call, &root, &TABLES, None, &["gshadow"]) {
            Ok(mut db) => {
                if db.get("gshadow").is_some_and(|t| !t.exists) {
                    db.tables.insert("gshadow", None);
                }
                Some(db)
            }
            // No etc: no groups.
            Err(err) if err.missing => None,
            Err(err) => return Err(err),
        };
        let records: Vec<&Record> = db
            .as_ref()
            .and_then(|db| db.get("group"))
            .map(|g| g.records())
            .unwrap_or_default();
        let resource = |line: &Record| resource(db.as_ref().expect("records come from it"), line);
        if names.is_empty() {
            return Ok(records.iter().map(|line| resource(line)).collect());
        }
        let mut resources = Vec::new();
        for name in names {
            match records.iter().find(|line| line.name() == Some(name)) {
                Some(line) => resources.push(resource(line)),
                None => {
                    if let Some(problem) = name_problem(name, "group name") {
                        let message = format!("{problem}; no such group can be created");
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
        let root = Root::open(&call.root)?;
        let mut job = Groups {
            users: Users { root, names: None },
        };
        change_each(call, updates, &mut job)
    }
}

/// A group whose gshadow line is missing while gshadow is in use.
fn is_incomplete(db: &Accounts, name: &str) -> bool {
    db.get("gshadow")
        .is_some_and(|gshadow| gshadow.exists && gshadow.find(name).is_none())
}

fn resource(db: &Accounts, line: &Record) -> Resource {
    let f = line.f();
    let mut res = Resource::new();
    res.insert("name".into(), json!(clean(&f[0])));
    let ensure = match is_incomplete(db, &f[0]) {
        true => "incomplete",
        false => "present",
    };
    res.insert("ensure".into(), json!(ensure));
    res.insert("gid".into(), json!(line.id(2)));
    let members: Vec<String> = members_of(f).iter().map(|m| clean(m)).collect();
    res.insert("members".into(), json!(members));
    res
}

fn check_members(value: &Json) -> CallResult<Vec<String>> {
    let Some(list) = value.as_array() else {
        return Err(CallError::new(format!(
            "members: {value} is not an array of strings"
        )));
    };
    let mut members = Vec::new();
    for member in list {
        let Some(member) = member.as_str() else {
            return Err(CallError::new(format!(
                "members: member name must be a string, not {member}"
            )));
        };
        if let Some(problem) = member_problem(member, "member name") {
            return Err(CallError::new(format!("members: {problem}")));
        }
        members.push(member.to_owned());
    }
    Ok(members)
}

/// The user names new members are checked against: the system's user
/// database on the real root, `etc/passwd` below a fake one (read once).
struct Users {
    root: Root,
    names: Option<HashSet<String>>,
}

impl Users {
    fn check_new(&mut self, members: &[String], old: &[String]) -> CallResult<()> {
        let added: Vec<&String> = members.iter().filter(|m| !old.contains(m)).collect();
        if added.is_empty() {
            return Ok(());
        }
        if self.root.is_real() {
            for member in added {
                if !crate::nss::user_exists(member) {
                    return Err(CallError::new(format!(
                        "members: unknown user {}",
                        quoted(member)
                    )));
                }
            }
            return Ok(());
        }
        let path = self.root.show("etc/passwd");
        if self.names.is_none() {
            let data = self.root.read("etc/passwd", true).map_err(|err| {
                CallError::new(format!("members: cannot check {}: {err}", quoted(added[0])))
            })?;
            let data = data.map(|(data, _)| data).unwrap_or_default();
            let names = data
                .split(|&b| b == b'\n')
                .filter(|line| !line.is_empty() && !line.starts_with(b"#"))
                .map(|line| {
                    let name = line.split(|&b| b == b':').next().unwrap_or_default();
                    let name = name.strip_suffix(b"\r").unwrap_or(name);
                    String::from_utf8_lossy(name).into_owned()
                })
                .collect();
            self.names = Some(names);
        }
        let names = self.names.as_ref().expect("read just now");
        for member in added {
            if !names.contains(member.as_str()) {
                return Err(CallError::new(format!(
                    "members: unknown user {} (not in {})",
                    quoted(member),
                    quoted(&path)
                )));
            }
        }
        Ok(())
    }
}

/// Another group whose line uses `gid`, or `None`.
fn gid_owner(db: &Accounts, gid: u64, name: &str) -> Option<String> {
    db.get("group")?
        .records()
        .iter()
        .find(|line| line.name() != Some(name) && line.id(2) == gid)
        .and_then(|line| line.name().map(str::to_owned))
}

/// The gid of the group `name` and the users whose primary group it is,
/// when there are any and no other group has that gid: removing it would
/// leave them without a group (pwck calls such an account broken, ral
/// incomplete).
fn primary_of(db: &Accounts, name: &str) -> Option<(u64, Vec<String>)> {
    let group = db.get("group")?;
    let gid = group.lines[group.find(name)?].id(2);
    let shared = group
        .lines
        .iter()
        .any(|line| line.fields.is_some() && line.name() != Some(name) && line.id(2) == gid);
    if shared {
        return None;
    }
    let users: Vec<String> = db
        .get("passwd")?
        .records()
        .iter()
        .filter(|line| line.id(3) == gid)
        .filter_map(|line| line.name().map(str::to_owned))
        .collect();
    (!users.is_empty()).then_some((gid, users))
}

fn free_gid(db: &Accounts) -> CallResult<u64> {
    let used = db.get("group").map(|g| g.ids(2)).unwrap_or_default();
    (AUTO_GID_FIRST..AUTO_GID_END)
        .find(|gid| !used.contains(gid))
        .ok_or_else(|| {
            CallError::new(format!(
                "gid: no free gid from {AUTO_GID_FIRST} to {}",
                AUTO_GID_END - 1
            ))
        })
}

struct Groups {
    users: Users,
}

impl Apply for Groups {
    fn tables(&self) -> &'static [&'static str] {
        &SET_TABLES
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
        apply_update(call, update, db, &mut self.users)
    }
}

fn apply_update(
    call: &Call,
    update: &Update,
    db: &mut Accounts,
    users: &mut Users,
) -> CallResult<Vec<Change>> {
    let ensure = check_should(update, &ATTRIBUTES, Some(&ENSURES), &[])?.and_then(Json::as_str);
    let at = db.get("group").and_then(|g| g.find(&update.name));
    match (ensure, at) {
        (Some("absent"), None) => Ok(Vec::new()),
        (Some("absent"), Some(_)) => remove(call, &update.name, db),
        (_, None) => create(call, update, db, users),
        (_, Some(at)) => modify(call, update, ensure == Some("present"), at, db, users),
    }
}

/// Removes the group `name` from group and gshadow, unless a user's
/// primary group is lost with it.
fn remove(call: &Call, name: &str, db: &mut Accounts) -> CallResult<Vec<Change>> {
    let was = match is_incomplete(db, name) {
        true => "incomplete",
        false => "present",
    };
    refuse_primary(db, name)?;
    call.log.deleting(name, || {
        if let Some(group) = db.get_mut("group") {
            group.remove(name);
        }
        if let Some(gshadow) = db.get_mut("gshadow") {
            gshadow.remove(name);
        }
        Ok(vec![Change::new("ensure", was, "absent")])
    })
}

/// Refuses to remove the group `name` while it is the primary group of
/// users, as groupdel does.
fn refuse_primary(db: &Accounts, name: &str) -> CallResult<()> {
    let Some((gid, users)) = primary_of(db, name) else {
        return Ok(());
    };
    let users: Vec<String> = users.iter().map(|u| quoted(u)).collect();
    let (who, those, them) = match users.len() {
        1 => ("user", "that user", "it"),
        _ => ("users", "those users", "them"),
    };
    Err(CallError::new(format!(
        "ensure: group {} (gid {gid}) is the primary group of {who} {}; remove {those} or give \
         {them} another gid first, as groupdel requires (a plan that removes both removes the \
         users first)",
        quoted(name),
        users.join(", ")
    )))
}

/// Adds the group of `update`: to group, and to gshadow when it is used.
fn create(
    call: &Call,
    update: &Update,
    db: &mut Accounts,
    users: &mut Users,
) -> CallResult<Vec<Change>> {
    let name = update.name.as_str();
    let should = &update.should;
    if let Some(problem) = name_problem(name, "group name") {
        return Err(CallError::new(format!("name: {problem} ({NAME_RULE})")));
    }
    call.log.creating(name, || {
        let members = check_members(should.get("members").unwrap_or(&json!([])))?;
        users.check_new(&members, &[])?;
        let gid = match should.get("gid") {
            Some(value) => {
                let gid = check_id("gid", value)?;
                refuse_used_gid(db, gid, name)?;
                gid
            }
            None => free_gid(db)?,
        };
        let joined = members.join(",");
        if let Some(group) = db.get_mut("group") {
            group.append(&[name, "x", &gid.to_string(), &joined]);
        }
        if let Some(gshadow) = db.get_mut("gshadow") {
            // A stale line left behind for this name is replaced: its
            // password and administrators must not pass to a new group.
            gshadow.remove(name);
            gshadow.append(&[name, "!", "", &joined]);
        }
        check_fits(db, name)?;
        Ok(vec![
            Change::new("ensure", "absent", "present"),
            Change::new("gid", Json::Null, gid),
            Change::new("members", Json::Null, members),
        ])
    })
}

/// Changes the gid and members of the group of `update` (line `at` of
/// group) as asked, and completes it in gshadow when `present` is.
fn modify(
    call: &Call,
    update: &Update,
    present: bool,
    at: usize,
    db: &mut Accounts,
    users: &mut Users,
) -> CallResult<Vec<Change>> {
    let name = update.name.as_str();
    let should = &update.should;
    call.log.updating(name, || {
        let line = db.get("group").expect("group is read").lines[at].clone();
        let old_gid = line.id(2);
        let old_members = members_of(line.f());
        let new_gid = match should.get("gid") {
            Some(value) => check_id("gid", value)?,
            None => old_gid,
        };
        if new_gid != old_gid {
            refuse_used_gid(db, new_gid, name)?;
        }
        let new_members = match should.get("members") {
            Some(value) => {
                let members = check_members(value)?;
                users.check_new(&members, &old_members)?;
                members
            }
            None => old_members.clone(),
        };
        let mut changes = Vec::new();
        if present && is_incomplete(db, name) {
            if let Some(gshadow) = db.get_mut("gshadow") {
                gshadow.append(&[name, "!", "", &new_members.join(",")]);
            }
            changes.push(Change::new("ensure", "incomplete", "present"));
        }
        if new_gid != old_gid {
            let group = db.get_mut("group").expect("group is read");
            group.lines[at].set_field(2, &new_gid.to_string());
            group.changed = true;
            changes.push(Change::new("gid", old_gid, new_gid));
        }
        if new_members != old_members {
            set_members(db, name, at, &new_members);
            let was: Vec<String> = old_members.iter().map(|m| clean(m)).collect();
            changes.push(Change::new("members", was, new_members));
        }
        if !changes.is_empty() {
            check_fits(db, name)?;
        }
        Ok(changes)
    })
}

/// Refuses `gid` for the group `name` when another group has it.
fn refuse_used_gid(db: &Accounts, gid: u64, name: &str) -> CallResult<()> {
    match gid_owner(db, gid, name) {
        Some(owner) => Err(CallError::new(format!(
            "gid: {gid} is already used by group {}",
            quoted(&owner)
        ))),
        None => Ok(()),
    }
}

/// Gives the group `name` (line `at` of group) the members `members`,
/// in group and gshadow.
fn set_members(db: &mut Accounts, name: &str, at: usize, members: &[String]) {
    let joined = members.join(",");
    let group = db.get_mut("group").expect("group is read");
    group.lines[at].set_field(3, &joined);
    group.changed = true;
    if let Some(gshadow) = db.get_mut("gshadow") {
        if let Some(at) = gshadow.find(name) {
            gshadow.lines[at].set_field(3, &joined);
            gshadow.changed = true;
        }
    }
}

/// Refuses a group `name` whose resource would be too long to read back.
fn check_fits(db: &Accounts, name: &str) -> CallResult<()> {
    let group = db.get("group").expect("group is read");
    match group.find(name) {
        Some(at) => check_resource_fits(&resource(db, &group.lines[at])),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{call, outcome, update, write_accounts};
    use super::*;

    #[test]
    fn member_names_are_refused_as_the_script_refused_them() {
        assert_eq!(member_problem("alice", "member name"), None);
        assert_eq!(
            member_problem("a,b", "member name").as_deref(),
            Some("member name 'a,b' contains ','")
        );
        assert_eq!(
            member_problem("a b", "member name").as_deref(),
            Some("member name 'a b' contains whitespace")
        );
        assert_eq!(
            member_problem("a\u{202e}", "member name").as_deref(),
            Some(r"member name 'a\u{202e}' contains a control character")
        );
        assert_eq!(
            member_problem("-x", "member name").as_deref(),
            Some("member name '-x' starts with '-'")
        );
        assert!(member_problem(&"a".repeat(33), "member name").is_some());
        assert_eq!(member_problem(&"a".repeat(32), "member name"), None);
        assert_eq!(
            member_problem("", "member name").as_deref(),
            Some("member name must not be empty")
        );
    }

    /// `group u0 ensure=absent` while user u0 had its gid left the user
    /// without a primary group (pwck: "no group 1000"): refused, as
    /// groupdel refuses it, until no user needs it or another group has
    /// the gid.
    #[test]
    fn the_primary_group_of_a_user_is_not_removed() {
        let dir = tempfile::tempdir().unwrap();
        write_accounts(dir.path());
        let etc = dir.path().join("etc");
        let passwd = "root:x:0:0:root:/root:/bin/bash\nu0:x:1000:1000::/home/u0:/bin/sh\n";
        std::fs::write(etc.join("passwd"), passwd).unwrap();
        std::fs::write(etc.join("group"), "root:x:0:\nu0:x:1000:\n").unwrap();
        std::fs::write(etc.join("gshadow"), "root:*::\nu0:!::\n").unwrap();
        let call = call(dir.path());
        let remove = || update("u0", json!({"ensure": "absent"}));
        let outcomes = EtcGroup.set(&call, &[remove()]).unwrap();
        assert_eq!(
            outcomes[0].clone().unwrap_err().message,
            "ensure: group 'u0' (gid 1000) is the primary group of user 'u0'; remove that user \
             or give it another gid first, as groupdel requires (a plan that removes both \
             removes the users first)"
        );
        assert_eq!(
            std::fs::read_to_string(etc.join("group")).unwrap(),
            "root:x:0:\nu0:x:1000:\n"
        );
        // Another group has gid 1000: u0 keeps a primary group.
        std::fs::write(etc.join("group"), "root:x:0:\nu0:x:1000:\nother:x:1000:\n").unwrap();
        assert!(EtcGroup.set(&call, &[remove()]).unwrap()[0].is_ok());
        // Without users of its gid, a group goes.
        std::fs::write(etc.join("passwd"), "root:x:0:0:root:/root:/bin/bash\n").unwrap();
        let outcomes = EtcGroup.set(&call, &[update("other", json!({"ensure": "absent"}))]);
        assert!(outcomes.unwrap()[0].is_ok());
        assert_eq!(
            std::fs::read_to_string(etc.join("group")).unwrap(),
            "root:x:0:\n"
        );
    }

    /// Members added on the real root are checked against the system's
    /// user database (read only, never changed).
    #[test]
    fn members_added_on_the_real_root_must_be_known_users() {
        let root = Root::open(std::path::Path::new("/")).unwrap();
        let mut users = Users { root, names: None };
        assert!(users.check_new(&["root".to_owned()], &[]).is_ok());
        let unknown = "no-such-user-here-x9".to_owned();
        let unknown = std::slice::from_ref(&unknown);
        let err = users.check_new(unknown, &[]).unwrap_err();
        assert_eq!(err.message, "members: unknown user 'no-such-user-here-x9'");
        // Members already there are not checked again.
        assert!(users.check_new(unknown, unknown).is_ok());
    }

    /// The groups as `get` reports them, by name.
    fn listed(call: &Call, names: &[&str]) -> Vec<Json> {
        let names: Vec<String> = names.iter().map(|name| name.to_string()).collect();
        let found = EtcGroup.get(call, &names).unwrap();
        found
            .into_iter()
            .map(|res| Json::Object(res.into_iter().collect()))
            .collect()
    }

    #[test]
    fn groups_are_listed_and_found_with_a_missing_gshadow_line_incomplete() {
        let dir = tempfile::tempdir().unwrap();
        let call = call(dir.path());
        // No etc: no groups, no error.
        assert_eq!(listed(&call, &[]), Vec::<Json>::new());
        write_accounts(dir.path());
        let etc = dir.path().join("etc");
        std::fs::write(
            etc.join("group"),
            "root:x:0:\nstaff:x:50:root,bin\nlone:x:60:\n",
        )
        .unwrap();
        let all = listed(&call, &[]);
        let names: Vec<&str> = all.iter().map(|g| g["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["root", "staff", "lone"]);
        assert_eq!(all[1]["gid"], 50);
        assert_eq!(all[1]["members"], json!(["root", "bin"]));
        assert_eq!(all[1]["ensure"], "present");
        assert_eq!(all[2]["ensure"], "incomplete", "no gshadow line: {all:?}");
        // Found by name; an unknown valid name is absent, a bad one an error.
        assert_eq!(listed(&call, &["staff"])[0]["gid"], 50);
        assert_eq!(listed(&call, &["nobody-here"]), Vec::<Json>::new());
        let bad = listed(&call, &["Bad Name"]);
        assert!(bad[0]["error"].is_object(), "{bad:?}");
        // Without a gshadow file, no group is incomplete.
        std::fs::remove_file(etc.join("gshadow")).unwrap();
        assert_eq!(listed(&call, &["lone"])[0]["ensure"], "present");
        // A group file that cannot be read is an error, not "no groups".
        std::fs::remove_file(etc.join("group")).unwrap();
        std::fs::create_dir(etc.join("group")).unwrap();
        assert!(EtcGroup.get(&call, &[]).is_err());
    }

    #[test]
    fn a_gid_another_group_uses_is_refused_and_members_change_both_files() {
        let dir = tempfile::tempdir().unwrap();
        write_accounts(dir.path());
        let etc = dir.path().join("etc");
        let read = |file: &str| std::fs::read_to_string(etc.join(file)).unwrap();
        let call = call(dir.path());
        let one = |name: &str, should: Json| outcome(&EtcGroup, &call, &update(name, should));
        let err = one("web", json!({"gid": 50})).unwrap_err();
        assert_eq!(err.message, "gid: 50 is already used by group 'staff'");
        let err = one("root", json!({"gid": 50})).unwrap_err();
        assert_eq!(err.message, "gid: 50 is already used by group 'staff'");
        // Its own gid is no clash.
        assert_eq!(one("staff", json!({"gid": 50})).unwrap(), Vec::new());
        assert_eq!(
            one("web", json!({"gid": 70})).unwrap()[1],
            Change::new("gid", Json::Null, 70)
        );
        // Members change in group and gshadow; the same again is no change.
        let changes = one("staff", json!({"members": ["root"]})).unwrap();
        assert_eq!(
            changes,
            [Change::new("members", json!([]), json!(["root"]))]
        );
        assert!(
            read("group").contains("\nstaff:x:50:root\n"),
            "{}",
            read("group")
        );
        assert!(
            read("gshadow").contains("\nstaff:!::root\n"),
            "{}",
            read("gshadow")
        );
        assert_eq!(
            one("staff", json!({"members": ["root"]})).unwrap(),
            Vec::new()
        );
        // ensure=present of a whole group changes nothing.
        let gshadow = read("gshadow");
        assert_eq!(
            one("staff", json!({"ensure": "present"})).unwrap(),
            Vec::new()
        );
        assert_eq!(read("gshadow"), gshadow);
    }

    /// A change of members that would make the group too long for the
    /// host to read back is refused, and nothing is written.
    #[test]
    fn a_change_too_long_to_read_back_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        write_accounts(dir.path());
        let names: Vec<String> = (0..130_000).map(|n| format!("u{n:06}")).collect();
        let passwd: String = names
            .iter()
            .map(|n| format!("{n}:x:1:1::/:/bin/sh\n"))
            .collect();
        std::fs::write(dir.path().join("etc/passwd"), passwd).unwrap();
        let group = std::fs::read(dir.path().join("etc/group")).unwrap();
        let asked = update("staff", json!({"members": names}));
        let err = outcome(&EtcGroup, &call(dir.path()), &asked)
            .unwrap_err()
            .message;
        assert!(err.ends_with("; nothing was changed"), "{err:.300}");
        assert_eq!(std::fs::read(dir.path().join("etc/group")).unwrap(), group);
    }

    /// As groupadd does on a system without gshadow, a new group does not
    /// bring one into being.
    #[test]
    fn a_missing_gshadow_file_is_not_made() {
        let dir = tempfile::tempdir().unwrap();
        write_accounts(dir.path());
        let gshadow = dir.path().join("etc/gshadow");
        std::fs::remove_file(&gshadow).unwrap();
        let made = outcome(&EtcGroup, &call(dir.path()), &update("web", json!({})));
        assert!(made.is_ok(), "{made:?}");
        assert!(!gshadow.exists());
    }
}
