//! Which files a managed resource is kept in, for the agent to watch: the
//! core types' files are known (the native providers name them); other
//! types say nothing of where they keep their state, so the agent finds
//! their drift on the interval only.

use std::path::{Path, PathBuf};

/// The account files: users and groups are kept in all of them (a user's
/// groups are members' lists in `group`).
const ACCOUNTS: [&str; 4] = ["/etc/passwd", "/etc/shadow", "/etc/group", "/etc/gshadow"];

/// The files (absolute, in the root's terms) that a resource of type
/// `type_name` named `name` is kept in; `attr` gives its declared
/// attributes' values. Empty for a type whose files are not known.
pub fn kept_in(type_name: &str, name: &str, attr: impl Fn(&str) -> Option<String>) -> Vec<PathBuf> {
    match type_name {
        "file" => {
            let path = attr("path").unwrap_or_else(|| name.to_owned());
            // Only an absolute path names a file (the provider refuses
            // any other).
            match Path::new(&path).is_absolute() {
                true => vec![PathBuf::from(path)],
                false => Vec::new(),
            }
        }
        "host" => vec![PathBuf::from("/etc/hosts")],
        "user" => ACCOUNTS.iter().map(PathBuf::from).collect(),
        "group" => ACCOUNTS[2..].iter().map(PathBuf::from).collect(),
        "mount" => vec![PathBuf::from("/etc/fstab")],
        _ => Vec::new(),
    }
}

/// `path` (absolute, in the root's terms) as this machine sees it below
/// `root`; `None` for a path that climbs (`..`), which could leave it.
pub fn below(root: &Path, path: &Path) -> Option<PathBuf> {
    use std::path::Component;
    if path.components().any(|c| c == Component::ParentDir) {
        return None;
    }
    let relative = path.strip_prefix("/").unwrap_or(path);
    Some(root.join(relative))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_core_types_name_their_files_and_others_none() {
        let none = |_: &str| None;
        assert_eq!(kept_in("host", "db", none), [PathBuf::from("/etc/hosts")]);
        assert_eq!(
            kept_in("mount", "/srv", none),
            [PathBuf::from("/etc/fstab")]
        );
        assert_eq!(kept_in("user", "bob", none).len(), 4);
        assert_eq!(
            kept_in("group", "staff", none),
            [PathBuf::from("/etc/group"), PathBuf::from("/etc/gshadow")]
        );
        assert_eq!(
            kept_in("file", "/etc/motd", none),
            [PathBuf::from("/etc/motd")]
        );
        let path = |key: &str| (key == "path").then(|| "/srv/app.conf".to_owned());
        assert_eq!(
            kept_in("file", "app", path),
            [PathBuf::from("/srv/app.conf")]
        );
        assert!(kept_in("file", "relative/name", none).is_empty());
        assert!(kept_in("package", "vim", none).is_empty());
        assert!(kept_in("exec", "/bin/true", none).is_empty());
    }

    #[test]
    fn paths_are_found_below_the_root() {
        assert_eq!(
            below(Path::new("/tmp/root"), Path::new("/etc/hosts")),
            Some(PathBuf::from("/tmp/root/etc/hosts"))
        );
        assert_eq!(
            below(Path::new("/"), Path::new("/etc/hosts")),
            Some(PathBuf::from("/etc/hosts"))
        );
        assert_eq!(
            below(Path::new("/tmp/root"), Path::new("/etc/../../x")),
            None
        );
    }
}
