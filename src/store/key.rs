//! The store's secret key: 32 random bytes that authenticate saved plans
//! and key the digests of sensitive values (HMAC-SHA256). It is kept in
//! its own file beside the database, `STORE.key`, mode 0600, never inside
//! the database: a copy of `state.db` (a backup, a bug report) then holds
//! digests nobody can test guesses against without the key.

use std::io::{Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::error::{Error, Result};

/// The key's length in bytes.
const LEN: usize = 32;

/// A store's secret key.
#[derive(Clone)]
pub struct StoreKey([u8; LEN]);

impl std::fmt::Debug for StoreKey {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        // Never printed, not even in a debug dump.
        f.write_str("StoreKey(..)")
    }
}

impl StoreKey {
    /// The key file of the store at `store`: `STORE.key` beside it.
    pub fn path_for(store: &Path) -> PathBuf {
        let mut name = store.as_os_str().to_owned();
        name.push(".key");
        PathBuf::from(name)
    }

    /// A key made from bytes (tests, and keys read back).
    pub fn from_bytes(bytes: [u8; LEN]) -> StoreKey {
        StoreKey(bytes)
    }

    /// HMAC-SHA256 of `parts` under this key, as lowercase hex. Each part
    /// is preceded by its length, so that no two lists of parts give the
    /// same message.
    pub fn digest(&self, parts: &[&[u8]]) -> String {
        let mut mac =
            <Hmac<Sha256> as Mac>::new_from_slice(&self.0).expect("HMAC takes a key of any length");
        for part in parts {
            mac.update(&(part.len() as u64).to_le_bytes());
            mac.update(part);
        }
        crate::text::hex(&mac.finalize().into_bytes())
    }

    /// Whether `tag` is the digest of `parts`, compared in constant time.
    pub fn verify(&self, parts: &[&[u8]], tag: &str) -> bool {
        let wanted = self.digest(parts);
        wanted.len() == tag.len()
            && wanted
                .bytes()
                .zip(tag.bytes())
                .fold(0u8, |acc, (a, b)| acc | (a ^ b))
                == 0
    }

    /// Reads the key of the store at `store`; `None` when it has none yet.
    pub fn read(store: &Path) -> Result<Option<StoreKey>> {
        let path = StoreKey::path_for(store);
        let bytes = match crate::bounded_read::read_file(
            &path,
            4 * LEN,
            crate::bounded_read::Links::Refuse,
        ) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(key_error(&path, format!("cannot read the key: {e}"))),
        };
        parse(&bytes)
            .map(Some)
            .ok_or_else(|| key_error(&path, "the key file is damaged (not 64 hex digits)"))
    }

    /// The key of the store at `store`, made (random, 0600) when it has
    /// none. Two runs making it at once agree on one: the key is written
    /// to a temporary file and linked into place, and the loser reads the
    /// winner's.
    pub fn read_or_make(store: &Path) -> Result<StoreKey> {
        if let Some(key) = StoreKey::read(store)? {
            return Ok(key);
        }
        let path = StoreKey::path_for(store);
        let dir = path
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let mut bytes = [0u8; LEN];
        std::fs::File::open("/dev/urandom")
            .and_then(|mut random| random.read_exact(&mut bytes))
            .map_err(|e| Error::io("/dev/urandom", e))?;
        let temporary = tempfile::Builder::new()
            .prefix(".ral-key-")
            .permissions(std::fs::Permissions::from_mode(0o600))
            .tempfile_in(dir)
            .map_err(|e| key_error(&path, format!("cannot write the key: {e}")))?;
        let mut file = temporary.as_file();
        file.write_all(format!("{}\n", crate::text::hex(&bytes)).as_bytes())
            .and_then(|()| file.sync_all())
            .map_err(|e| key_error(&path, format!("cannot write the key: {e}")))?;
        match std::fs::hard_link(temporary.path(), &path) {
            Ok(()) => {
                sync_dir(dir);
                Ok(StoreKey(bytes))
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => StoreKey::read(store)?
                .ok_or_else(|| key_error(&path, "the key file vanished while it was made")),
            Err(e) => Err(key_error(&path, format!("cannot write the key: {e}"))),
        }
    }
}

fn parse(bytes: &[u8]) -> Option<StoreKey> {
    let text = std::str::from_utf8(bytes).ok()?.trim_end_matches('\n');
    if text.len() != 2 * LEN {
        return None;
    }
    let mut key = [0u8; LEN];
    for (at, byte) in key.iter_mut().enumerate() {
        *byte = u8::from_str_radix(text.get(2 * at..2 * at + 2)?, 16).ok()?;
    }
    Some(StoreKey(key))
}

fn key_error(path: &Path, message: impl Into<String>) -> Error {
    Error::Store {
        path: path.to_owned(),
        message: message.into(),
    }
}

/// Makes a new directory entry durable; a failure only costs durability.
fn sync_dir(dir: &Path) {
    if let Ok(dir) = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY)
        .open(dir)
    {
        let _ = dir.sync_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_made_once_private_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let store = dir.path().join("state.db");
        assert!(StoreKey::read(&store).unwrap().is_none());
        let made = StoreKey::read_or_make(&store).unwrap();
        let again = StoreKey::read_or_make(&store).unwrap();
        assert_eq!(made.digest(&[b"x"]), again.digest(&[b"x"]));
        let mode = std::fs::metadata(StoreKey::path_for(&store))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        // No temporary file is left beside it.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn digests_depend_on_the_key_and_on_how_the_parts_are_cut() {
        let one = StoreKey::from_bytes([1; LEN]);
        let two = StoreKey::from_bytes([2; LEN]);
        assert_ne!(one.digest(&[b"secret"]), two.digest(&[b"secret"]));
        assert_ne!(one.digest(&[b"ab", b"c"]), one.digest(&[b"a", b"bc"]));
        let tag = one.digest(&[b"plan"]);
        assert!(one.verify(&[b"plan"], &tag));
        assert!(!two.verify(&[b"plan"], &tag));
        assert!(!one.verify(&[b"plan!"], &tag));
        assert!(!one.verify(&[b"plan"], &tag[1..]));
    }

    #[test]
    fn a_damaged_or_linked_key_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let store = dir.path().join("state.db");
        std::fs::write(StoreKey::path_for(&store), "zz\n").unwrap();
        let err = StoreKey::read(&store).unwrap_err().to_string();
        assert!(err.contains("damaged"), "{err}");
        std::fs::remove_file(StoreKey::path_for(&store)).unwrap();
        std::fs::write(dir.path().join("elsewhere"), "x").unwrap();
        std::os::unix::fs::symlink("elsewhere", StoreKey::path_for(&store)).unwrap();
        let err = StoreKey::read(&store).unwrap_err().to_string();
        assert!(err.contains("symbolic link"), "{err}");
    }
}
