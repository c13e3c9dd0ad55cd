//! What is mounted, for `mount::fstab`: the kernel's list for this
//! process's mount namespace (`/proc/self/mountinfo`), seen from the root
//! ral works below, and whether that namespace is the machine's (PID 1's)
//! or one of the process's own, where mounting below a root touches
//! nothing of the machine.

use std::fmt;
use std::path::Path;

use indexmap::IndexMap;

use super::unescape;
use crate::CallError;

/// Where the kernel lists what this process's namespace has mounted.
pub const SELF_MOUNTINFO: &str = "/proc/self/mountinfo";
/// The same for PID 1, the machine's namespace.
const INIT_MOUNTINFO: &str = "/proc/1/mountinfo";
const SELF_NS: &str = "/proc/self/ns/mnt";
const INIT_NS: &str = "/proc/1/ns/mnt";

/// Why the kernel's lists of mounts could not tell what was asked.
/// Written by hand rather than derived: the SDK's errors take no
/// dependency for their messages.
#[derive(Debug)]
pub enum MountinfoError {
    /// A mountinfo file or namespace link could not be read.
    Read {
        path: &'static str,
        error: std::io::Error,
    },
    /// This process's mountinfo lists nothing, so its mount ids say
    /// nothing about its namespace.
    NoMounts,
}

impl fmt::Display for MountinfoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MountinfoError::Read { path, error } => write!(f, "cannot read {path}: {error}"),
            MountinfoError::NoMounts => write!(f, "{SELF_MOUNTINFO} lists no mounts"),
        }
    }
}

// No `source`: the message already says the I/O error, and a chain
// printed whole would say it twice.
impl std::error::Error for MountinfoError {}

/// A call that needed the mounts fails with the reason they are unknown.
impl From<MountinfoError> for CallError {
    fn from(error: MountinfoError) -> CallError {
        CallError::new(error.to_string())
    }
}

/// The bytes of the mountinfo file at `path`.
fn read_list(path: &'static str) -> Result<Vec<u8>, MountinfoError> {
    std::fs::read(path).map_err(|error| MountinfoError::Read { path, error })
}

/// One mount, as mountinfo(5) lists it (the top one when several are
/// stacked on a mount point).
#[derive(Debug, Clone, PartialEq)]
pub struct Mount {
    /// The kernel's id of the mount, unique among all namespaces.
    pub id: String,
    /// What is mounted (the source field: a device, `tmpfs`, ...).
    pub source: String,
    pub fstype: String,
    /// The mount's own options (`rw`, `nosuid`, ...).
    pub options: Vec<String>,
}

/// The mount point `path` as the root `root` sees it: `root` itself is
/// `/`, a path below it loses the prefix, a path outside it is not the
/// root's (`None`). `root` is a canonical path.
pub fn below_root(path: &str, root: &str) -> Option<String> {
    let root = root.trim_end_matches('/');
    if root.is_empty() {
        return Some(path.to_owned());
    }
    if path == root {
        return Some("/".to_owned());
    }
    path.strip_prefix(root)
        .filter(|rest| rest.starts_with('/'))
        .map(str::to_owned)
}

/// The mounts of a mountinfo text that are the root's, by their mount
/// points as the root sees them, in the kernel's order (later ones on
/// the same point stack over earlier ones, and win). Lines that do not
/// read as mountinfo lines are skipped.
pub fn parse(data: &[u8], root: &str) -> IndexMap<String, Mount> {
    let mut mounts = IndexMap::new();
    for line in data.split(|&b| b == b'\n') {
        let fields: Vec<&[u8]> = line.split(|&b| b == b' ').collect();
        // ID PARENT MAJ:MIN FSROOT MOUNTPOINT OPTIONS [OPTIONAL...] - TYPE SOURCE SUPER
        // (a bind mount differs only in FSROOT, which is not read).
        let Some(dash) = fields.iter().skip(6).position(|f| *f == b"-") else {
            continue;
        };
        let dash = dash + 6;
        if fields.len() < dash + 3 {
            continue;
        }
        let Some(point) = below_root(&unescape(fields[4]), root) else {
            continue;
        };
        let mount = Mount {
            id: unescape(fields[0]),
            source: unescape(fields[dash + 2]),
            fstype: unescape(fields[dash + 1]),
            options: unescape(fields[5]).split(',').map(str::to_owned).collect(),
        };
        // A mount stacked later hides the one below: it is listed where
        // the first was, with its own values.
        mounts.insert(point, mount);
    }
    mounts
}

/// The propagation group of the mount that holds `path` (the one whose
/// mount point is its longest prefix), when that mount is shared with
/// other namespaces (`shared:N` among its optional fields): a mount made
/// below it shows in them too.
pub fn shared_at(data: &[u8], path: &str) -> Option<String> {
    let mut holder: Option<(usize, Option<String>)> = None;
    for line in data.split(|&b| b == b'\n') {
        let text = String::from_utf8_lossy(line);
        let fields: Vec<&str> = text.split(' ').collect();
        let Some(dash) = fields.iter().skip(6).position(|f| *f == "-") else {
            continue;
        };
        let point = unescape(fields[4].as_bytes());
        let holds = path == point
            || point == "/"
            || path
                .strip_prefix(point.as_str())
                .is_some_and(|rest| rest.starts_with('/'));
        if !holds || holder.as_ref().is_some_and(|(len, _)| point.len() < *len) {
            continue;
        }
        let shared = fields[6..6 + dash]
            .iter()
            .find(|f| f.starts_with("shared:"))
            .map(|f| (*f).to_owned());
        holder = Some((point.len(), shared));
    }
    holder.and_then(|(_, shared)| shared)
}

/// The first of `places` (canonical paths) whose holding mount is
/// shared with other namespaces, and its propagation group: a mount made
/// there would reach them. One read of this namespace's mounts.
pub fn propagates<'p>(places: &[&'p str]) -> Result<Option<(&'p str, String)>, MountinfoError> {
    let data = read_list(SELF_MOUNTINFO)?;
    Ok(places
        .iter()
        .find_map(|&place| shared_at(&data, place).map(|group| (place, group))))
}

/// What this process's namespace has mounted below `root`.
pub fn read(root: &str) -> Result<IndexMap<String, Mount>, MountinfoError> {
    let data = read_list(SELF_MOUNTINFO)?;
    Ok(parse(&data, root))
}

/// The ids of the mounts of a mountinfo text.
fn mount_ids(data: &[u8]) -> Vec<&[u8]> {
    data.split(|&b| b == b'\n')
        .filter_map(|line| line.split(|&b| b == b' ').next())
        .filter(|id| !id.is_empty())
        .collect()
}

/// Whether two mountinfo texts list the same namespace: a mount belongs
/// to one namespace only, and its id is unique among all of them, so two
/// lists of one namespace share their ids, and those of two share none.
pub fn same_namespace(ours: &[u8], theirs: &[u8]) -> bool {
    let theirs = mount_ids(theirs);
    mount_ids(ours).iter().any(|id| theirs.contains(id))
}

/// Whether this process runs in a mount namespace other than PID 1's
/// (as under `unshare -m`): the links of the two namespaces compared, or,
/// where PID 1's cannot be read (it needs the right to trace PID 1), the
/// mount ids of the two mountinfo lists. The error says why neither
/// could tell.
pub fn own_namespace() -> Result<bool, MountinfoError> {
    let link = |path: &str| std::fs::read_link(Path::new(path));
    if let (Ok(ours), Ok(init)) = (link(SELF_NS), link(INIT_NS)) {
        return Ok(ours != init);
    }
    let ours = read_list(SELF_MOUNTINFO)?;
    let init = read_list(INIT_MOUNTINFO)?;
    if mount_ids(&ours).is_empty() {
        return Err(MountinfoError::NoMounts);
    }
    Ok(!same_namespace(&ours, &init))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Kind;

    #[test]
    fn an_unreadable_list_is_named_in_the_error_and_fails_the_call() {
        let error = read_list("/nonexistent/mountinfo").unwrap_err();
        assert!(
            matches!(&error, MountinfoError::Read { path: "/nonexistent/mountinfo", error }
                if error.kind() == std::io::ErrorKind::NotFound),
            "{error:?}"
        );
        let text = error.to_string();
        assert!(
            text.starts_with("cannot read /nonexistent/mountinfo: "),
            "{text}"
        );
        let failed = CallError::from(error);
        assert_eq!((failed.kind, failed.message), (Kind::Failed, text));
        assert_eq!(
            MountinfoError::NoMounts.to_string(),
            "/proc/self/mountinfo lists no mounts"
        );
    }
}
