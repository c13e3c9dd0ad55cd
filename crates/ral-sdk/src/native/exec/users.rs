//! Who an exec runs as: a user named (or a uid) looked up in the root's
//! passwd file, with the primary group it gives and the groups of the
//! root's group file that list it, as initgroups(3) would make them. The
//! files are read as the user and group providers read them (under the
//! accounts' lock, links resolved inside the root, a crashed edit's
//! journal finished). Only root can take another user's ids; anyone may
//! run as themselves.

use crate::command::Credentials;
use crate::files::Root;
use crate::native::accounts::{members_of, Accounts};
use crate::{Call, CallError, CallResult};

/// A user to run as: its name as given, ids and home.
#[derive(Debug, Clone, PartialEq)]
pub struct RunAs {
    pub name: String,
    pub ids: Credentials,
    /// Its home (`/` for a uid no account has).
    pub home: String,
}

/// The ids of `user` (a name, or a uid) below the call's root.
pub fn look_up(call: &Call, user: &str) -> CallResult<RunAs> {
    let root = Root::open(&call.root)?;
    let accounts = Accounts::read(call, &root, &["passwd", "group"], None, &["group"])?;
    let by_uid = match !user.is_empty() && user.bytes().all(|b| b.is_ascii_digit()) {
        true => user.parse::<u32>().ok(),
        false => None,
    };
    let entry = accounts.get("passwd").and_then(|passwd| {
        passwd.records().into_iter().find_map(|record| {
            let fields = record.f();
            let uid = u32::try_from(record.id(2)).ok()?;
            let gid = u32::try_from(record.id(3)).ok()?;
            (fields[0] == user || by_uid == Some(uid))
                .then(|| (fields[0].clone(), uid, gid, fields[5].clone()))
        })
    });
    let run_as = match (entry, by_uid) {
        (Some((name, uid, gid, home)), _) => RunAs {
            name: user.to_owned(),
            ids: Credentials {
                uid,
                gid,
                groups: groups_of(&accounts, &name, gid),
            },
            home,
        },
        // A uid no account has runs with that uid as its group too, in
        // no other group (as Puppet's exec does).
        (None, Some(uid)) => RunAs {
            name: user.to_owned(),
            ids: Credentials {
                uid,
                gid: uid,
                groups: vec![uid],
            },
            home: "/".to_owned(),
        },
        (None, None) => {
            return Err(CallError::new(format!(
                "user: '{}' is not in {}",
                clean(user),
                root.show("etc/passwd")
            )))
        }
    };
    let euid = rustix::process::geteuid().as_raw();
    if euid != 0 && euid != run_as.ids.uid {
        return Err(CallError::new(format!(
            "user: running as '{}' (uid {}) needs root; ral runs as uid {euid}",
            clean(user),
            run_as.ids.uid
        )));
    }
    Ok(run_as)
}

/// `gid` and the gids of the root's groups that list `name` as a member.
fn groups_of(accounts: &Accounts, name: &str, gid: u32) -> Vec<u32> {
    let mut groups = vec![gid];
    for record in accounts
        .get("group")
        .map(|g| g.records())
        .unwrap_or_default()
    {
        let Ok(id) = u32::try_from(record.id(2)) else {
            continue;
        };
        if members_of(record.f()).iter().any(|m| m == name) && !groups.contains(&id) {
            groups.push(id);
        }
    }
    groups
}

fn clean(text: &str) -> String {
    crate::text::clean(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Log;

    fn call(passwd: &str, group: &str) -> (tempfile::TempDir, Call) {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir(root.path().join("etc")).unwrap();
        std::fs::write(root.path().join("etc/passwd"), passwd).unwrap();
        std::fs::write(root.path().join("etc/group"), group).unwrap();
        let call = Call::new(
            root.path(),
            false,
            Log::new(Box::new(std::io::sink()), false),
        );
        (root, call)
    }

    #[test]
    fn a_user_has_the_primary_group_and_the_groups_listing_it() {
        let (_root, call) = call(
            "root:x:0:0::/root:/bin/sh\napp:x:1500:1501::/srv:/bin/sh\n",
            "root:x:0:\napp:x:1501:\nweb:x:1600:other,app\nappx:x:1700:apps\n",
        );
        let app = look_up(&call, "app");
        // Only root may take the ids; anyone else is told so.
        if rustix::process::geteuid().is_root() {
            let app = app.unwrap();
            assert_eq!(
                (app.ids.uid, app.ids.gid, app.home.as_str()),
                (1500, 1501, "/srv")
            );
            assert_eq!(app.ids.groups, [1501, 1600]);
            assert_eq!(look_up(&call, "1500").unwrap().ids.uid, 1500);
            assert_eq!(look_up(&call, "4242").unwrap().ids.groups, [4242]);
            // Not a number: "+5" is a name no account has.
            assert!(look_up(&call, "+5").is_err());
        } else {
            assert!(app.unwrap_err().message.contains("needs root"));
        }
        let err = look_up(&call, "nobody-here").unwrap_err().message;
        assert!(err.contains("'nobody-here' is not in"), "{err}");
    }
}
