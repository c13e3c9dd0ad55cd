//! Random bytes from the kernel only: getrandom(2), or `/dev/urandom`
//! where a kernel or a sandbox lacks that call. They make the temporary
//! names nobody can guess, the state store's key and identity, the
//! agent's splay. Never the clock: a name made from it can be guessed,
//! and O_EXCL catches only a guess that lands first.

use std::io::{self, Read};

/// Fills `buf` with the kernel's random bytes.
pub fn fill(buf: &mut [u8]) -> io::Result<()> {
    let mut filled = 0;
    while filled < buf.len() {
        let flags = rustix::rand::GetRandomFlags::empty();
        match rustix::rand::getrandom(&mut buf[filled..], flags) {
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "getrandom gave no bytes",
                ))
            }
            Ok(got) => filled += got,
            Err(rustix::io::Errno::INTR) => continue,
            Err(rustix::io::Errno::NOSYS) => {
                return std::fs::File::open("/dev/urandom")?.read_exact(&mut buf[filled..])
            }
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// `N` of the kernel's random bytes.
pub fn bytes<const N: usize>() -> io::Result<[u8; N]> {
    let mut buf = [0u8; N];
    fill(&mut buf)?;
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Names nobody can guess: no pattern within them, none between them
    /// (a clock's bytes would repeat).
    #[test]
    fn bytes_are_the_kernels_and_never_repeat() {
        let a: [u8; 32] = bytes().unwrap();
        assert_ne!(a[..16], a[16..]);
        assert_ne!(bytes::<16>().unwrap(), bytes::<16>().unwrap());
        let mut large = vec![0u8; 1 << 20];
        fill(&mut large).unwrap();
        // Every byte value turns up in a mebibyte of them.
        let mut seen = [false; 256];
        for byte in &large {
            seen[usize::from(*byte)] = true;
        }
        assert!(seen.iter().all(|&s| s));
        fill(&mut []).unwrap();
    }
}
