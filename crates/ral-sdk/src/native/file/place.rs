//! Where a managed path lives: its directory, opened below the root one
//! component at a time (a link on the way resolved as if the root were
//! `/`), and its last component, which is never followed; what is there
//! (file, directory, link or nothing), and a regular file's checksum and
//! content, read through a descriptor of its own.

use std::ffi::OsStr;
use std::fs::File;
use std::io::Read;
use std::os::fd::{AsFd, OwnedFd};

use sha2::{Digest, Sha256};

use super::sys;
use crate::files::{Dir, Root, Stat, Target};
use crate::text::quoted;
use crate::{CallError, CallResult, Kind};

/// Bytes: a file's content is reported only up to this size.
pub const CONTENT_MAX: usize = 64 * 1024;
/// The largest file whose checksum is worked out. A file is read whole for
/// it, and whoever may write a managed file may make it a sparse file of
/// terabytes: read at disk speed, it would hold up the get of every path
/// until the call's time limit ended it.
pub const CHECKSUM_MAX: u64 = 1 << 30;

/// Why `name` cannot be a managed path, or `None` when it can: it must be
/// absolute and in normal form (as Python's `os.path.normpath` leaves it).
pub fn name_problem(name: &str) -> Option<String> {
    if name.contains('\0') {
        return Some(format!(
            "the path {} contains a NUL character",
            quoted(name)
        ));
    }
    let Some(rest) = name.strip_prefix('/') else {
        return Some(format!("the path {} is not absolute", quoted(name)));
    };
    let normal = rest.is_empty()
        || rest
            .split('/')
            .all(|part| !part.is_empty() && part != "." && part != "..");
    if !normal {
        return Some(format!(
            "the path {} is not in normal form (no '.', '..', '//' or trailing '/')",
            quoted(name)
        ));
    }
    None
}

/// What is at a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum What {
    Absent,
    File,
    Directory,
    Link,
}

impl What {
    pub fn as_str(self) -> &'static str {
        match self {
            What::Absent => "absent",
            What::File => "file",
            What::Directory => "directory",
            What::Link => "link",
        }
    }

    /// What an ensure value asks for (`present` is not one).
    pub fn parse(text: &str) -> Option<What> {
        [What::Absent, What::File, What::Directory, What::Link]
            .into_iter()
            .find(|what| what.as_str() == text)
    }

    /// What `info` says is there; `None` for a special file (a FIFO, a
    /// device, a socket), which this provider does not manage.
    pub fn of(info: Option<&Stat>) -> Option<What> {
        match info {
            None => Some(What::Absent),
            Some(info) if info.is_file() => Some(What::File),
            Some(info) if info.is_dir() => Some(What::Directory),
            Some(info) if info.is_symlink() => Some(What::Link),
            Some(_) => None,
        }
    }
}

/// Where a path lives: its directory (`None` when that does not exist),
/// opened below the root, and the last component (`None` for the root).
pub struct Place {
    pub name: String,
    pub dir: Option<Dir>,
    pub target: Option<Target>,
}

impl Place {
    /// Opens the directory of `name` below `root`; a name that could never
    /// be a path is of kind `unknown`.
    pub fn open(root: &Root, name: &str) -> CallResult<Place> {
        if let Some(problem) = name_problem(name) {
            return Err(CallError::of_kind(Kind::Unknown, problem));
        }
        if name == "/" {
            return Ok(Place {
                name: name.to_owned(),
                dir: Some(root.directory("", true, None)?),
                target: None,
            });
        }
        match root.file(&name[1..], true, Some(false)) {
            Ok(target) => Ok(Place {
                name: name.to_owned(),
                dir: Some(target.dir().clone()),
                target: Some(target),
            }),
            Err(err) if err.missing => Ok(Place {
                name: name.to_owned(),
                dir: None,
                target: None,
            }),
            Err(err) => Err(CallError::of_kind(err.kind, err.message)),
        }
    }

    pub fn is_root(&self) -> bool {
        self.name == "/"
    }

    /// The last component (`.` for the root, which names it in its own
    /// descriptor).
    pub fn base(&self) -> &str {
        self.target.as_ref().map_or(".", Target::name)
    }

    /// The path as seen from outside the root, for messages.
    pub fn show(&self) -> String {
        match (&self.target, &self.dir) {
            (Some(target), _) => target.path().to_owned(),
            (None, Some(dir)) => dir.path().to_owned(),
            (None, None) => self.name.clone(),
        }
    }

    /// Its path relative to the root, links on the way resolved ("" for
    /// the root); `None` when its directory does not exist.
    pub fn rel(&self) -> Option<String> {
        let dir = self.dir.as_ref()?;
        let parts = [dir.rel(), self.target.as_ref().map_or("", Target::name)];
        Some(
            parts
                .iter()
                .filter(|p| !p.is_empty())
                .copied()
                .collect::<Vec<_>>()
                .join("/"),
        )
    }

    /// What is there, a link not followed (`None`: nothing, or no
    /// directory to hold it). `doing` words the call in a failure's
    /// message, which names the path as asked, as the script's did.
    pub fn lstat(&self, doing: &str) -> CallResult<Option<Stat>> {
        let Some(dir) = &self.dir else {
            return Ok(None);
        };
        if self.target.is_none() {
            // The root: the directory opened is the file itself.
            return crate::files::sys::fstat(dir.as_fd())
                .map(Some)
                .map_err(|err| CallError::io(&err, &format!("{doing} {}", quoted(&self.name))));
        }
        dir.lstat(self.base()).map_err(|err| {
            match sys::file_type_at(dir.as_fd(), OsStr::new(self.base())) {
                Err(again) => CallError::io(&again, &format!("{doing} {}", quoted(&self.name))),
                Ok(_) => err,
            }
        })
    }

    /// Whether what is there is a mount point: something is mounted on
    /// it (maybe from outside the root), so that its mode, owner and
    /// content are what is mounted there. The root counts as none: it is
    /// never replaced, and its mode is the root's own. `doing` words the
    /// call in a failure's message (a mount id that cannot be read is
    /// one).
    pub fn is_mount_point(&self, doing: &str) -> CallResult<bool> {
        let (Some(dir), Some(_)) = (&self.dir, &self.target) else {
            return Ok(false);
        };
        sys::is_mount_point_at(dir.as_fd(), OsStr::new(self.base()))
            .map_err(|err| CallError::io(&err, &format!("{doing} {}", quoted(&self.name))))
    }

    /// The first mount point below the directory there, as a path inside
    /// the root; `None` when the whole tree lies on its mount.
    pub fn mount_below(&self, doing: &str) -> CallResult<Option<String>> {
        let Some(dir) = &self.dir else {
            return Ok(None);
        };
        let found = sys::find_mount(dir.as_fd(), OsStr::new(self.base()))
            .map_err(|err| CallError::io(&err, &format!("{doing} {}", quoted(&self.name))))?;
        Ok(found.map(|below| {
            let below = below.to_string_lossy();
            match below.is_empty() {
                true => self.name.clone(),
                false => format!("{}/{below}", self.name.trim_end_matches('/')),
            }
        }))
    }

    /// Opens what is there (never through a link in its last component).
    pub fn open_fd(&self, flags: sys::OFlags) -> std::io::Result<OwnedFd> {
        match &self.dir {
            Some(dir) => sys::open_at(dir.as_fd(), OsStr::new(self.base()), flags),
            None => Err(std::io::Error::from_raw_os_error(libc::ENOENT)),
        }
    }

    /// The bytes of the link there.
    pub fn read_link(&self) -> std::io::Result<Vec<u8>> {
        match &self.dir {
            Some(dir) => sys::read_link_at(dir.as_fd(), OsStr::new(self.base())),
            None => Err(std::io::Error::from_raw_os_error(libc::ENOENT)),
        }
    }

    /// Whether the directory there is empty.
    pub fn is_empty_dir(&self) -> std::io::Result<bool> {
        let fd = self.open_fd(sys::OFlags::RDONLY | sys::OFlags::DIRECTORY)?;
        Ok(sys::list(fd.as_fd())?.is_empty())
    }
}

/// What a regular file holds, as reported: the hex SHA-256 of its bytes,
/// and the bytes themselves when at most [`CONTENT_MAX`].
pub struct Sum {
    pub digest: String,
    pub head: Option<Vec<u8>>,
}

/// The checksum (and content when small) of the regular file at `place`;
/// `None` for one larger than [`CHECKSUM_MAX`], also when it grows past it
/// while being read. `doing` words the call in a failure's message.
pub fn read_sum(place: &Place, doing: &str) -> CallResult<Option<Sum>> {
    read_sum_within(place, doing, CHECKSUM_MAX)
}

/// [`read_sum`] with `limit` in place of [`CHECKSUM_MAX`] (for tests, at
/// sizes a test can make).
pub(super) fn read_sum_within(place: &Place, doing: &str, limit: u64) -> CallResult<Option<Sum>> {
    let io = |err: std::io::Error| CallError::io(&err, &format!("{doing} {}", quoted(&place.name)));
    let fd = place
        .open_fd(sys::OFlags::RDONLY | sys::OFlags::NONBLOCK)
        .map_err(io)?;
    let file = File::from(fd);
    let info = file.metadata().map_err(io)?;
    if !info.is_file() {
        return Err(CallError::new(format!(
            "{} is no longer a regular file",
            quoted(&place.name)
        )));
    }
    if info.len() > limit {
        return Ok(None);
    }
    let mut digest = Sha256::new();
    let mut head = Vec::new();
    let mut size: u64 = 0;
    // Room for the whole of a small file (and the end it reads), at most
    // 1 MiB at a time: a plan reads thousands of small files.
    let room = usize::try_from(info.len()).map_or(1 << 20, |len| (len + 1).clamp(4096, 1 << 20));
    let mut chunk = vec![0u8; room];
    let mut reader = &file;
    loop {
        let got = match reader.read(&mut chunk) {
            Ok(0) => break,
            Ok(got) => got,
            Err(err) if err.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(err) => return Err(io(err)),
        };
        size += got as u64;
        if size > limit {
            return Ok(None);
        }
        digest.update(&chunk[..got]);
        if head.len() <= CONTENT_MAX {
            head.extend_from_slice(&chunk[..got]);
        }
    }
    Ok(Some(Sum {
        digest: hex(&digest.finalize()),
        head: (head.len() <= CONTENT_MAX).then_some(head),
    }))
}

/// The hex SHA-256 of `data`.
pub fn sha256_hex(data: &[u8]) -> String {
    hex(&Sha256::digest(data))
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    let mut text = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        let _ = write!(text, "{byte:02x}");
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_must_be_absolute_and_normal() {
        assert_eq!(name_problem("/"), None);
        assert_eq!(name_problem("/srv/a..b/.x"), None);
        assert_eq!(
            name_problem("srv").as_deref(),
            Some("the path 'srv' is not absolute")
        );
        for bad in ["//srv", "/srv/", "/srv//x", "/srv/./x", "/srv/..", "/."] {
            assert!(
                name_problem(bad).unwrap().contains("is not in normal form"),
                "{bad}"
            );
        }
        assert!(name_problem("/a\0b").unwrap().contains("NUL"));
    }

    #[test]
    fn checksums_are_sha256_in_hex() {
        assert_eq!(
            sha256_hex(b"<h1>hello</h1>\n"),
            "186ea20da38447cf0c59fa62a9dfaea3bdcca431517b83d3a9c00ebc2044e95a"
        );
    }
}
