//! A file's status (`stat(2)`), as the toolkit reads it through open
//! directories, and the identity that tells one version of a file from
//! another.

use std::fmt;

use serde_json::{json, Value as Json};

/// What `stat(2)` says of a file (links not followed where the toolkit
/// says `lstat`).
#[derive(Clone, Copy)]
pub struct Stat {
    raw: rustix::fs::Stat,
}

impl Stat {
    pub(super) fn from_raw(raw: rustix::fs::Stat) -> Stat {
        Stat { raw }
    }

    /// The whole structure, for a field this type does not name.
    pub fn raw(&self) -> &rustix::fs::Stat {
        &self.raw
    }

    /// Type and permission bits (`st_mode`).
    pub fn mode(&self) -> u32 {
        self.raw.st_mode
    }

    /// The permission bits, with setuid, setgid and sticky (`S_IMODE`).
    pub fn permissions(&self) -> u32 {
        self.raw.st_mode & 0o7777
    }

    pub fn uid(&self) -> u32 {
        self.raw.st_uid
    }

    pub fn gid(&self) -> u32 {
        self.raw.st_gid
    }

    // The field types differ between architectures.
    #[allow(clippy::useless_conversion)]
    pub fn dev(&self) -> u64 {
        u64::from(self.raw.st_dev)
    }

    #[allow(clippy::useless_conversion)]
    pub fn ino(&self) -> u64 {
        u64::from(self.raw.st_ino)
    }

    pub fn size(&self) -> u64 {
        u64::try_from(self.raw.st_size).unwrap_or(0)
    }

    // st_nlink is 32 bits on some architectures.
    #[allow(clippy::useless_conversion)]
    pub fn nlink(&self) -> u64 {
        u64::from(self.raw.st_nlink)
    }

    /// The modification time in nanoseconds since the epoch
    /// (`st_mtime_ns`).
    #[allow(clippy::unnecessary_cast)] // i64 here, not everywhere
    pub fn mtime_ns(&self) -> i64 {
        nanoseconds(self.raw.st_mtime as i64, self.raw.st_mtime_nsec as i64)
    }

    /// The status change time in nanoseconds since the epoch
    /// (`st_ctime_ns`).
    #[allow(clippy::unnecessary_cast)] // i64 here, not everywhere
    pub fn ctime_ns(&self) -> i64 {
        nanoseconds(self.raw.st_ctime as i64, self.raw.st_ctime_nsec as i64)
    }

    fn kind(&self) -> u32 {
        self.raw.st_mode & libc::S_IFMT
    }

    pub fn is_file(&self) -> bool {
        self.kind() == libc::S_IFREG
    }

    pub fn is_dir(&self) -> bool {
        self.kind() == libc::S_IFDIR
    }

    pub fn is_symlink(&self) -> bool {
        self.kind() == libc::S_IFLNK
    }

    /// The same file (device and inode) as `other`.
    pub fn same_file(&self, other: &Stat) -> bool {
        self.dev() == other.dev() && self.ino() == other.ino()
    }
}

/// A time as seconds and nanoseconds, in nanoseconds (saturating). The
/// fields' types differ between architectures: hence `as` at the callers.
fn nanoseconds(seconds: i64, nanoseconds: i64) -> i64 {
    seconds
        .saturating_mul(1_000_000_000)
        .saturating_add(nanoseconds)
}

impl fmt::Debug for Stat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Stat")
            .field("dev", &self.dev())
            .field("ino", &self.ino())
            .field("mode", &format_args!("{:o}", self.mode()))
            .field("uid", &self.uid())
            .field("gid", &self.gid())
            .field("size", &self.size())
            .field("mtime_ns", &self.mtime_ns())
            .finish()
    }
}

/// What tells one version of a file from another, as the journal records
/// it (`[dev, ino, size, mtime_ns]`, `null` when absent): the Python
/// toolkit writes and compares the same list.
pub fn identity(info: Option<&Stat>) -> Json {
    match info {
        None => Json::Null,
        Some(info) => json!([info.dev(), info.ino(), info.size(), info.mtime_ns()]),
    }
}
