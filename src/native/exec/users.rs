//! Who an exec runs as: a user named (or a uid) looked up in the root's
//! passwd file, with the primary group it gives and the groups of the
//! root's group file that list it, as initgroups(3) would make them.
//! Only root can take another user's ids; anyone may run as themselves.

use std::path::Path;

use crate::sdk::command::Credentials;
use crate::sdk::{CallError, CallResult};

/// The ids of `user` (a name, or a uid) below `root`, and its home
/// (`/` for a uid no account has).
pub fn look_up(user: &str, root: &Path) -> CallResult<(Credentials, String)> {
    let read = |file: &str| {
        let path = root.join("etc").join(file);
        std::fs::read_to_string(&path).map_err(|e| {
            CallError::io(
                &e,
                &format!("read {} to run as user '{}'", path.display(), clean(user)),
            )
        })
    };
    let passwd = read("passwd")?;
    let by_uid = match !user.is_empty() && user.bytes().all(|b| b.is_ascii_digit()) {
        true => user.parse::<u32>().ok(),
        false => None,
    };
    let entry = passwd.lines().find_map(|line| {
        let fields: Vec<&str> = line.split(':').collect();
        let uid = fields.get(2)?.parse::<u32>().ok()?;
        let gid = fields.get(3)?.parse::<u32>().ok()?;
        let home = fields.get(5).copied().unwrap_or("/").to_owned();
        (fields[0] == user || by_uid == Some(uid)).then(|| (fields[0].to_owned(), uid, gid, home))
    });
    let mut home = "/".to_owned();
    let credentials = match (entry, by_uid) {
        (Some((name, uid, gid, its_home)), _) => {
            home = its_home;
            Credentials {
                uid,
                gid,
                groups: groups_of(&name, gid, &read("group").unwrap_or_default()),
            }
        }
        // A uid no account has runs with that uid as its group too, in
        // no other group (as `runuser` cannot, but Puppet's exec does).
        (None, Some(uid)) => Credentials {
            uid,
            gid: uid,
            groups: vec![uid],
        },
        (None, None) => {
            return Err(CallError::new(format!(
                "user: '{}' is not in {}",
                clean(user),
                root.join("etc/passwd").display()
            )))
        }
    };
    // SAFETY: geteuid(2) takes nothing and cannot fail.
    let euid = unsafe { libc::geteuid() };
    if euid != 0 && euid != credentials.uid {
        return Err(CallError::new(format!(
            "user: running as '{}' (uid {}) needs root; ral runs as uid {euid}",
            clean(user),
            credentials.uid
        )));
    }
    Ok((credentials, home))
}

/// `gid` and the gids of the groups in `group` (a group file's text)
/// that list `name` as a member.
fn groups_of(name: &str, gid: u32, group: &str) -> Vec<u32> {
    let mut groups = vec![gid];
    for line in group.lines() {
        let fields: Vec<&str> = line.split(':').collect();
        let (Some(id), Some(members)) = (fields.get(2), fields.get(3)) else {
            continue;
        };
        let Ok(id) = id.parse::<u32>() else {
            continue;
        };
        if members.split(',').any(|member| member == name) && !groups.contains(&id) {
            groups.push(id);
        }
    }
    groups
}

fn clean(text: &str) -> String {
    crate::sdk::text::clean(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root(passwd: &str, group: &str) -> tempfile::TempDir {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir(root.path().join("etc")).unwrap();
        std::fs::write(root.path().join("etc/passwd"), passwd).unwrap();
        std::fs::write(root.path().join("etc/group"), group).unwrap();
        root
    }

    #[test]
    fn a_user_has_the_primary_group_and_the_groups_listing_it() {
        let root = root(
            "root:x:0:0::/root:/bin/sh\napp:x:1500:1501::/srv:/bin/sh\n",
            "root:x:0:\napp:x:1501:\nweb:x:1600:other,app\nappx:x:1700:apps\n",
        );
        let app = look_up("app", root.path());
        // Only root may take the ids; anyone else is told so.
        // SAFETY: geteuid(2) takes nothing and cannot fail.
        if unsafe { libc::geteuid() } == 0 {
            let (app, home) = app.unwrap();
            assert_eq!((app.uid, app.gid, home.as_str()), (1500, 1501, "/srv"));
            assert_eq!(app.groups, [1501, 1600]);
            assert_eq!(look_up("1500", root.path()).unwrap().0.uid, 1500);
            assert_eq!(look_up("4242", root.path()).unwrap().0.groups, [4242]);
        } else {
            assert!(app.unwrap_err().message.contains("needs root"));
        }
        let err = look_up("nobody-here", root.path()).unwrap_err().message;
        assert!(err.contains("'nobody-here' is not in"), "{err}");
    }
}
