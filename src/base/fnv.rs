//! FNV-1a, 64 bits: a short, stable name for a path or a key (cache entry
//! files, a generator's cache directory), and the hasher of the maps keyed
//! by attribute names, which are hashed for every attribute of every
//! resource listed. Attribute names come from metadata and from providers,
//! which run with the caller's rights anyway, so collision attacks on these
//! maps buy nothing; SipHash's resistance is not needed, and FNV is several
//! times faster on names this short.

use std::hash::{BuildHasherDefault, Hasher};

/// The FNV-1a hash of `bytes`.
pub fn fnv1a(bytes: &[u8]) -> u64 {
    let mut hasher = FnvHasher::default();
    hasher.write(bytes);
    hasher.finish()
}

/// FNV-1a as a [`Hasher`].
#[derive(Debug, Clone, Copy)]
pub struct FnvHasher(u64);

impl Default for FnvHasher {
    fn default() -> FnvHasher {
        FnvHasher(0xcbf2_9ce4_8422_2325)
    }
}

impl Hasher for FnvHasher {
    fn write(&mut self, bytes: &[u8]) {
        self.0 = bytes.iter().fold(self.0, |hash, byte| {
            (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3)
        });
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// Builds [`FnvHasher`]s.
pub type BuildFnv = BuildHasherDefault<FnvHasher>;

#[cfg(test)]
mod tests {
    #[test]
    fn known_values() {
        assert_eq!(super::fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(super::fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
        let mut hasher = super::FnvHasher::default();
        std::hash::Hasher::write(&mut hasher, b"a");
        assert_eq!(std::hash::Hasher::finish(&hasher), super::fnv1a(b"a"));
    }
}
