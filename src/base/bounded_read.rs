//! Reading files whose content ral does not control (a provider's `.yaml`,
//! a metadata cache entry): regular files only, never more than a limit,
//! and never left waiting on a FIFO or a device.

use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Whether a symbolic link as the last component is followed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Links {
    Follow,
    Refuse,
}

/// Why a file was not read.
#[derive(Debug, thiserror::Error)]
pub enum Refused {
    /// Opening or reading it failed (missing, no permission, EIO, ...).
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// A symbolic link where links are refused.
    #[error("it is a symbolic link")]
    Link,
    /// A directory, FIFO, device or socket.
    #[error("it is not a regular file")]
    NotRegular,
    /// More than the limit.
    #[error("it is larger than {max} bytes")]
    TooLarge { max: usize },
}

impl Refused {
    /// Whether the file does not exist.
    pub fn is_missing(&self) -> bool {
        matches!(self, Refused::Io(e) if e.kind() == std::io::ErrorKind::NotFound)
    }
}

/// Reads `path` whole if it is a regular file of at most `max` bytes.
/// The file is opened without blocking (a FIFO answers at once), its type
/// is checked on the open descriptor, and no more than `max + 1` bytes are
/// ever read, whatever the file claims its size is.
pub fn read_file(path: &Path, max: usize, links: Links) -> Result<Vec<u8>, Refused> {
    let mut flags = libc::O_NONBLOCK | libc::O_NOCTTY;
    if links == Links::Refuse {
        flags |= libc::O_NOFOLLOW;
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(flags)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) if links == Links::Refuse => Refused::Link,
            _ => Refused::Io(e),
        })?;
    if !file.metadata()?.is_file() {
        return Err(Refused::NotRegular);
    }
    read_at_most(file, max)
}

/// Reads all of `stream`, refusing it as soon as it holds more than `max`
/// bytes rather than after reading it all.
pub fn read_at_most(stream: impl Read, max: usize) -> Result<Vec<u8>, Refused> {
    let mut bytes = Vec::new();
    stream.take(max as u64 + 1).read_to_end(&mut bytes)?;
    if bytes.len() > max {
        return Err(Refused::TooLarge { max });
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_regular_files_within_the_limit_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, "12345").unwrap();
        assert_eq!(read_file(&file, 5, Links::Refuse).unwrap(), b"12345");
        let err = read_file(&file, 4, Links::Refuse).unwrap_err();
        assert!(matches!(err, Refused::TooLarge { max: 4 }));
        assert_eq!(err.to_string(), "it is larger than 4 bytes");
        let err = read_file(&dir.path().join("none"), 4, Links::Refuse).unwrap_err();
        assert!(err.is_missing());

        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        assert_eq!(read_file(&link, 5, Links::Follow).unwrap(), b"12345");
        let err = read_file(&link, 5, Links::Refuse).unwrap_err();
        assert_eq!(err.to_string(), "it is a symbolic link");

        // A device that never ends, and a FIFO nobody writes to.
        let err = read_file(Path::new("/dev/zero"), 5, Links::Follow).unwrap_err();
        assert_eq!(err.to_string(), "it is not a regular file");
        let fifo = dir.path().join("fifo");
        let path = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo with a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(path.as_ptr(), 0o600) }, 0);
        let err = read_file(&fifo, 5, Links::Follow).unwrap_err();
        assert_eq!(err.to_string(), "it is not a regular file");
    }
}
