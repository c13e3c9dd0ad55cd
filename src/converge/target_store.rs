//! Which state store a run on a remote target uses: one per target and
//! root, kept on this machine, named from what the target really is (the
//! user, host name and port ssh uses, and the root:
//! `STATE_DIR/USER@HOST:PORT%2FROOT.db`), so that two names of one
//! machine share a store and two roots never do.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::error::{Error, Result};
use crate::remote::Destination;
use crate::store::{Identity, Location};

use super::run::StoreAt;

/// The store of `root` on `destination`, in `state_dir`.
pub fn store_at(state_dir: &Path, destination: &Destination, root: &Path) -> StoreAt {
    let identity = Identity::new(&destination.uri(), root);
    StoreAt {
        location: Location::File(state_dir.join(store_file(destination, &identity.root))),
        identity,
    }
}

/// Where an older ral kept the store of the target named `name`: named by
/// the target only, so no longer used.
pub fn older_store(state_dir: &Path, name: &str) -> PathBuf {
    state_dir.join(format!("{}.db", file_name(name)))
}

/// Where the stores of targets are kept by default.
pub fn default_state_dir() -> Result<PathBuf> {
    let base = match std::env::var_os("XDG_STATE_HOME").map(PathBuf::from) {
        Some(dir) if dir.is_absolute() => dir,
        _ => match std::env::var_os("HOME").map(PathBuf::from) {
            Some(home) if home.is_absolute() => home.join(".local/state"),
            _ => {
                return Err(Error::Io {
                    context: "no HOME to keep the targets' state stores in: give --state DIR"
                        .to_owned(),
                    error: std::io::ErrorKind::NotFound.into(),
                })
            }
        },
    };
    Ok(base.join("ral/targets"))
}

/// The file name of the store of `destination` below `root` (absolute):
/// distinct destinations and roots give distinct names; a name too long
/// for a file system is cut and completed with a digest of the whole.
fn store_file(destination: &Destination, root: &str) -> String {
    let whole = file_name(&format!(
        "{}@{}:{}{root}",
        destination.user, destination.host, destination.port
    ));
    if whole.len() <= 200 {
        return format!("{whole}.db");
    }
    let mut cut = 160;
    while !whole.is_char_boundary(cut) {
        cut -= 1;
    }
    let digest = crate::text::hex(&Sha256::digest(whole.as_bytes()));
    format!("{}-{}.db", &whole[..cut], &digest[..32])
}

/// A target's name as a file name (what stores were named by before): `/`, NUL and `%` are escaped as `%XX`,
/// and so is a leading dot, so distinct names stay distinct files.
fn file_name(name: &str) -> String {
    let mut out = String::new();
    for (at, c) in name.chars().enumerate() {
        if c == '/' || c == '%' || c == '\0' || (at == 0 && c == '.') {
            out.push_str(&format!("%{:02X}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{file_name, store_file};
    use crate::remote::Destination;

    fn at(user: &str, host: &str, port: u16) -> Destination {
        Destination::new(user, host, port)
    }

    #[test]
    fn two_roots_ports_users_or_hosts_give_two_store_files() {
        let web = at("root", "web1", 22);
        assert_eq!(store_file(&web, "/srv/a"), "root@web1:22%2Fsrv%2Fa.db");
        let files = [
            store_file(&web, "/srv/a"),
            store_file(&web, "/srv/b"),
            store_file(&web, "/"),
            store_file(&at("root", "web1", 2222), "/srv/a"),
            store_file(&at("alice", "web1", 22), "/srv/a"),
            store_file(&at("root", "web2", 22), "/srv/a"),
        ];
        let distinct: std::collections::HashSet<&String> = files.iter().collect();
        assert_eq!(distinct.len(), files.len(), "{files:?}");
        // A root too long for one file name still gives its own.
        let long = format!("/{}", "d".repeat(300));
        let longer = format!("{long}e");
        assert!(store_file(&web, &long).len() < 255);
        assert_ne!(store_file(&web, &long), store_file(&web, &longer));
    }

    #[test]
    fn target_names_make_distinct_file_names() {
        assert_eq!(file_name("web1"), "web1");
        assert_eq!(file_name("ssh://u@h:22/x"), "ssh:%2F%2Fu@h:22%2Fx");
        assert_eq!(file_name(".."), "%2E.");
        assert_ne!(file_name("a/b"), file_name("a%2Fb"));
    }
}
