//! Reading files whose content ral does not control (a provider's `.yaml`,
//! a metadata cache entry): regular files only, never more than a limit,
//! and never left waiting on a FIFO or a device.

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Whether a symbolic link as the last component is followed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Links {
    Follow,
    Refuse,
}

/// Reads `path` whole if it is a regular file of at most `max` bytes.
/// The file is opened without blocking (a FIFO answers at once), its type
/// is checked on the open descriptor, and no more than `max + 1` bytes are
/// ever read, whatever the file claims its size is.
pub fn read_file(path: &Path, max: usize, links: Links) -> std::io::Result<Vec<u8>> {
    let mut flags = libc::O_NONBLOCK | libc::O_NOCTTY;
    if links == Links::Refuse {
        flags |= libc::O_NOFOLLOW;
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(flags)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) if links == Links::Refuse => {
                std::io::Error::other("it is a symbolic link")
            }
            _ => e,
        })?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::other("it is not a regular file"));
    }
    read_at_most(file, max)
}

fn read_at_most(file: File, max: usize) -> std::io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    file.take(max as u64 + 1).read_to_end(&mut bytes)?;
    if bytes.len() > max {
        return Err(std::io::Error::other(format!(
            "it is larger than {max} bytes"
        )));
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
        assert_eq!(err.to_string(), "it is larger than 4 bytes");

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
