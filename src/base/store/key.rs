//! The store's secret key: 32 random bytes that authenticate saved plans
//! and key the digests of sensitive values (HMAC-SHA256). It is kept in
//! its own file beside the database, `STORE.key`, mode 0600, never inside
//! the database: a copy of `state.db` (a backup, a bug report) then holds
//! digests nobody can test guesses against without the key.

use std::path::Path;

use hmac::{Hmac, Mac};
use sha2::Sha256;

use super::paths::StoreDir;
use crate::error::{Error, Result};

/// The key file's name: the database's with this suffix.
const SUFFIX: &str = ".key";

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

    /// Reads the key of the store in `dir`; `None` when it has none yet.
    pub(crate) fn read(dir: &StoreDir) -> Result<Option<StoreKey>> {
        let Some(bytes) = dir.read_small(SUFFIX, 4 * LEN)? else {
            return Ok(None);
        };
        parse(&bytes).map(Some).ok_or_else(|| {
            key_error(
                &dir.path_of(SUFFIX),
                "the key file is damaged (not 64 hex digits)",
            )
        })
    }

    /// The key of the store in `dir`, made (random, 0600) when it has
    /// none. Two runs making it at once agree on one: the key is written
    /// to a temporary file and linked into place, and the loser reads the
    /// winner's.
    pub(crate) fn read_or_make(dir: &StoreDir) -> Result<StoreKey> {
        if let Some(key) = StoreKey::read(dir)? {
            return Ok(key);
        }
        let bytes: [u8; LEN] =
            crate::random::bytes().map_err(|e| Error::io("the kernel's random bytes", e))?;
        let text = format!("{}\n", crate::text::hex(&bytes));
        if dir.create_once(SUFFIX, text.as_bytes())? {
            return Ok(StoreKey(bytes));
        }
        StoreKey::read(dir)?.ok_or_else(|| {
            key_error(
                &dir.path_of(SUFFIX),
                "the key file vanished while it was made",
            )
        })
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Location;
    use std::os::unix::fs::PermissionsExt;
    use std::path::PathBuf;

    fn key_path(store: &Path) -> PathBuf {
        PathBuf::from(format!("{}.key", store.display()))
    }

    fn dir_of(store: &Path) -> StoreDir {
        StoreDir::open(&Location::File(store.to_owned()), true)
            .unwrap()
            .unwrap()
    }

    #[test]
    fn a_key_is_made_once_private_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let store = dir.path().join("state.db");
        assert!(StoreKey::read(&dir_of(&store)).unwrap().is_none());
        let made = StoreKey::read_or_make(&dir_of(&store)).unwrap();
        let again = StoreKey::read_or_make(&dir_of(&store)).unwrap();
        assert_eq!(made.digest(&[b"x"]), again.digest(&[b"x"]));
        let mode = std::fs::metadata(key_path(&store))
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
    fn a_key_is_never_shown_in_a_debug_dump() {
        let key = StoreKey::from_bytes([0xab; LEN]);
        assert_eq!(format!("{key:?}"), "StoreKey(..)");
    }

    #[test]
    fn a_damaged_or_linked_key_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let store = dir.path().join("state.db");
        std::fs::write(key_path(&store), "zz\n").unwrap();
        let err = StoreKey::read(&dir_of(&store)).unwrap_err().to_string();
        assert!(err.contains("damaged"), "{err}");
        std::fs::remove_file(key_path(&store)).unwrap();
        std::fs::write(dir.path().join("elsewhere"), "x").unwrap();
        std::os::unix::fs::symlink("elsewhere", key_path(&store)).unwrap();
        let err = StoreKey::read(&dir_of(&store)).unwrap_err().to_string();
        assert!(err.contains("symbolic link"), "{err}");
    }
}
