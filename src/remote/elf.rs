//! What an ELF program file says about where it can run: the machine it
//! was built for, whether it needs a dynamic loader, and the newest glibc
//! version it was linked against. ral reads this of its native providers'
//! program before sending it to a target, so that a target that cannot
//! run it is told why instead of failing at the loader (an exec format
//! error, or ``version `GLIBC_2.34' not found``).
//!
//! Only the headers are read: the ELF header, the program headers (a
//! `PT_INTERP` entry means a dynamically linked program) and, for those,
//! the section that lists the symbol versions needed from each library
//! (`SHT_GNU_verneed`). Every offset is checked against the file's length:
//! a truncated or hostile file is an error, never a panic.

use std::fmt;

/// `EM_*` values of the machines ral knows by their `uname -m` names.
const EM_386: u16 = 3;
const EM_MIPS: u16 = 8;
const EM_PPC: u16 = 20;
const EM_PPC64: u16 = 21;
const EM_S390: u16 = 22;
const EM_ARM: u16 = 40;
const EM_X86_64: u16 = 62;
const EM_AARCH64: u16 = 183;
const EM_RISCV: u16 = 243;
const EM_LOONGARCH: u16 = 258;

/// Why bytes are not those of an ELF program ral can read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ElfError {
    /// The file does not start as an ELF file does.
    #[error("not an ELF program")]
    NotElf,
    /// `EI_CLASS` is neither 32- nor 64-bit.
    #[error("unknown ELF class {0}")]
    Class(u8),
    /// `EI_DATA` is neither little- nor big-endian.
    #[error("unknown ELF byte order {0}")]
    ByteOrder(u8),
    /// A header's offset, a name's or a table's end does not fit in an
    /// offset.
    #[error("a {0} out of range")]
    OutOfRange(&'static str),
    /// The file ends before a field it points at.
    #[error("cut short: nothing at byte {at}")]
    CutShort { at: u64 },
    /// The file ends before a name it points at.
    #[error("cut short: no name at byte {at}")]
    NoName { at: u64 },
    /// A name runs to the end of the file without its NUL.
    #[error("a name at byte {at} does not end")]
    Unterminated { at: u64 },
    /// The version table's chains loop or overlap.
    #[error("its version table's chains are longer than the table")]
    LongChains,
}

const PT_INTERP: u32 = 3;
const SHT_GNU_VERNEED: u32 = 0x6fff_fffe;

/// What a program file is built for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Elf {
    /// `e_machine`.
    pub machine: u16,
    /// 64-bit (`ELFCLASS64`) rather than 32-bit.
    pub wide: bool,
    /// Little-endian (`ELFDATA2LSB`).
    pub little: bool,
    /// It names a dynamic loader (`PT_INTERP`): it runs only with the
    /// C library it was linked against, or a newer one.
    pub dynamic: bool,
    /// The newest `GLIBC_x.y[.z]` version it needs, if it needs glibc.
    pub glibc: Option<Version>,
    /// `EI_OSABI`: 0 (System V) or 3 (GNU/Linux) for a Linux program.
    pub os_abi: u8,
}

/// A glibc version, as `GLIBC_2.34` or `getconf GNU_LIBC_VERSION`'s
/// `glibc 2.31` writes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Version(pub u32, pub u32, pub u32);

impl Version {
    /// `2.34` or `2.3.4`; nothing else.
    pub fn parse(text: &str) -> Option<Version> {
        let mut parts = text.split('.');
        let mut number = || -> Option<Option<u32>> {
            match parts.next() {
                None => Some(None),
                Some(part) if !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()) => {
                    part.parse().ok().map(Some)
                }
                Some(_) => None,
            }
        };
        let major = number()??;
        let minor = number()??;
        let patch = number()?.unwrap_or(0);
        if parts.next().is_some() {
            return None;
        }
        Some(Version(major, minor, patch))
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.2 {
            0 => write!(f, "{}.{}", self.0, self.1),
            patch => write!(f, "{}.{}.{patch}", self.0, self.1),
        }
    }
}

impl Elf {
    /// Reads the headers of the program whose bytes are `bytes`; `Err`
    /// says why they are not those of an ELF program.
    pub fn read(bytes: &[u8]) -> Result<Elf, ElfError> {
        if bytes.len() < 16 || &bytes[..4] != b"\x7fELF" {
            return Err(ElfError::NotElf);
        }
        let wide = match bytes[4] {
            1 => false,
            2 => true,
            other => return Err(ElfError::Class(other)),
        };
        let little = match bytes[5] {
            1 => true,
            2 => false,
            other => return Err(ElfError::ByteOrder(other)),
        };
        let file = File { bytes, little };
        let machine = file.u16(18)?;
        let (phoff, shoff) = match wide {
            true => (file.u64(32)?, file.u64(40)?),
            false => (u64::from(file.u32(28)?), u64::from(file.u32(32)?)),
        };
        let at = if wide { 54 } else { 42 };
        let (phentsize, phnum) = (file.u16(at)?, file.u16(at + 2)?);
        let (shentsize, shnum) = (file.u16(at + 4)?, file.u16(at + 6)?);
        let mut dynamic = false;
        for index in 0..u64::from(phnum) {
            let header = offset(phoff, index, phentsize)?;
            if file.u32(header)? == PT_INTERP {
                dynamic = true;
            }
        }
        let mut glibc = None;
        for index in 0..u64::from(shnum) {
            let header = offset(shoff, index, shentsize)?;
            if file.u32(header + 4)? != SHT_GNU_VERNEED {
                continue;
            }
            let (table, size, link) = match wide {
                true => (
                    file.u64(header + 24)?,
                    file.u64(header + 32)?,
                    file.u32(header + 40)?,
                ),
                false => (
                    u64::from(file.u32(header + 16)?),
                    u64::from(file.u32(header + 20)?),
                    file.u32(header + 24)?,
                ),
            };
            let strings = offset(shoff, u64::from(link), shentsize)?;
            let strings = match wide {
                true => file.u64(strings + 24)?,
                false => u64::from(file.u32(strings + 16)?),
            };
            glibc = glibc.max(file.newest_glibc(table, size, strings)?);
        }
        Ok(Elf {
            os_abi: bytes[7],
            machine,
            wide,
            little,
            dynamic,
            glibc,
        })
    }

    /// Whether it is a program for Linux (or for no system in
    /// particular, as Linux's own programs say).
    pub fn for_linux(&self) -> bool {
        matches!(self.os_abi, 0 | 3)
    }

    /// Whether a machine whose `uname -m` is `name` runs this program
    /// (`None`: a machine ral does not know by that name).
    pub fn runs_on(&self, name: &str) -> Option<bool> {
        let (machine, wide, little) = match name {
            "x86_64" | "amd64" => (EM_X86_64, true, true),
            "i386" | "i486" | "i586" | "i686" => (EM_386, false, true),
            "aarch64" | "arm64" => (EM_AARCH64, true, true),
            "aarch64_be" => (EM_AARCH64, true, false),
            "ppc64le" => (EM_PPC64, true, true),
            "ppc64" => (EM_PPC64, true, false),
            "ppc" => (EM_PPC, false, false),
            "s390x" => (EM_S390, true, false),
            "riscv64" => (EM_RISCV, true, true),
            "loongarch64" => (EM_LOONGARCH, true, true),
            "mips64" => (EM_MIPS, true, false),
            "mips" => (EM_MIPS, false, false),
            "mipsel" => (EM_MIPS, false, true),
            _ if name.starts_with("armv") && name.ends_with('l') || name == "arm" => {
                (EM_ARM, false, true)
            }
            _ => return None,
        };
        Some(self.machine == machine && self.wide == wide && self.little == little)
    }

    /// The machine it is for, as `uname -m` would name it.
    pub fn machine_name(&self) -> String {
        let name = match (self.machine, self.wide, self.little) {
            (EM_X86_64, true, _) => "x86_64",
            (EM_386, false, _) => "i686",
            (EM_AARCH64, true, true) => "aarch64",
            (EM_AARCH64, true, false) => "aarch64_be",
            (EM_PPC64, true, true) => "ppc64le",
            (EM_PPC64, true, false) => "ppc64",
            (EM_S390, true, _) => "s390x",
            (EM_RISCV, true, _) => "riscv64",
            (EM_ARM, false, _) => "arm",
            (EM_LOONGARCH, true, _) => "loongarch64",
            (machine, wide, _) => {
                return format!("machine {machine} ({}-bit)", if wide { 64 } else { 32 })
            }
        };
        name.to_owned()
    }
}

/// `base + index * size`, or why it does not fit.
fn offset(base: u64, index: u64, size: u16) -> Result<u64, ElfError> {
    index
        .checked_mul(u64::from(size))
        .and_then(|delta| base.checked_add(delta))
        .ok_or(ElfError::OutOfRange("header offset"))
}

/// The bytes of an ELF file with its byte order.
struct File<'a> {
    bytes: &'a [u8],
    little: bool,
}

impl File<'_> {
    fn take<const N: usize>(&self, at: u64) -> Result<[u8; N], ElfError> {
        usize::try_from(at)
            .ok()
            .and_then(|at| self.bytes.get(at..at.checked_add(N)?))
            .and_then(|slice| slice.try_into().ok())
            .ok_or(ElfError::CutShort { at })
    }

    fn u16(&self, at: u64) -> Result<u16, ElfError> {
        let bytes = self.take(at)?;
        Ok(if self.little {
            u16::from_le_bytes(bytes)
        } else {
            u16::from_be_bytes(bytes)
        })
    }

    fn u32(&self, at: u64) -> Result<u32, ElfError> {
        let bytes = self.take(at)?;
        Ok(if self.little {
            u32::from_le_bytes(bytes)
        } else {
            u32::from_be_bytes(bytes)
        })
    }

    fn u64(&self, at: u64) -> Result<u64, ElfError> {
        let bytes = self.take(at)?;
        Ok(if self.little {
            u64::from_le_bytes(bytes)
        } else {
            u64::from_be_bytes(bytes)
        })
    }

    /// The NUL-terminated name at `at`.
    fn name(&self, at: u64) -> Result<&[u8], ElfError> {
        let start = usize::try_from(at).map_err(|_| ElfError::OutOfRange("name"))?;
        let rest = self.bytes.get(start..).ok_or(ElfError::NoName { at })?;
        let end = rest
            .iter()
            .position(|&b| b == 0)
            .ok_or(ElfError::Unterminated { at })?;
        Ok(&rest[..end])
    }

    /// The newest `GLIBC_` version the version-needed table at `table`
    /// (`size` bytes; names in the string table at `strings`) asks for.
    /// Its entries (`Elf_Verneed`, 16 bytes) each chain their versions
    /// (`Elf_Vernaux`, 16 bytes); both chains are walked at most as far as
    /// the table reaches, so a loop in them ends.
    fn newest_glibc(
        &self,
        table: u64,
        size: u64,
        strings: u64,
    ) -> Result<Option<Version>, ElfError> {
        let end = table
            .checked_add(size)
            .ok_or(ElfError::OutOfRange("table"))?;
        // One budget for both chains: a table of N records holds at most N
        // of them, and records shared by many chains (a crafted file) end
        // the walk instead of multiplying it.
        let mut steps = size.min(self.bytes.len() as u64) / 16 + 1;
        let mut newest = None;
        let mut entry = table;
        while steps > 0 {
            steps -= 1;
            if entry >= end {
                break;
            }
            let count = self.u16(entry + 2)?;
            let mut aux = entry + u64::from(self.u32(entry + 8)?);
            for _ in 0..count {
                if steps == 0 {
                    return Err(ElfError::LongChains);
                }
                steps -= 1;
                let name = self.name(strings + u64::from(self.u32(aux + 8)?))?;
                let version = std::str::from_utf8(name)
                    .ok()
                    .and_then(|name| name.strip_prefix("GLIBC_"))
                    .and_then(Version::parse);
                newest = newest.max(version);
                match self.u32(aux + 12)? {
                    0 => break,
                    next => aux += u64::from(next),
                }
            }
            match self.u32(entry + 12)? {
                0 => break,
                next => entry += u64::from(next),
            }
        }
        Ok(newest)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A 64-bit little-endian ELF file with `interp` as its only program
    /// header when asked, and a version-needed table asking for
    /// `versions` of libc.so.6 (sections: null, strings, verneed).
    pub(crate) fn elf(machine: u16, interp: bool, versions: &[&str]) -> Vec<u8> {
        let mut strings = b"\0libc.so.6\0".to_vec();
        let mut names = Vec::new();
        for version in versions {
            names.push(strings.len() as u32);
            strings.extend_from_slice(version.as_bytes());
            strings.push(0);
        }
        let mut verneed = Vec::new();
        verneed.extend_from_slice(&1u16.to_le_bytes());
        verneed.extend_from_slice(&(versions.len() as u16).to_le_bytes());
        verneed.extend_from_slice(&1u32.to_le_bytes());
        verneed.extend_from_slice(&16u32.to_le_bytes());
        verneed.extend_from_slice(&0u32.to_le_bytes());
        for (index, name) in names.iter().enumerate() {
            verneed.extend_from_slice(&0u32.to_le_bytes());
            verneed.extend_from_slice(&0u16.to_le_bytes());
            verneed.extend_from_slice(&0u16.to_le_bytes());
            verneed.extend_from_slice(&name.to_le_bytes());
            let next: u32 = if index + 1 < names.len() { 16 } else { 0 };
            verneed.extend_from_slice(&next.to_le_bytes());
        }
        let phoff = 64u64;
        let phnum: u16 = u16::from(interp);
        let strings_at = phoff + 56 * u64::from(phnum);
        let verneed_at = strings_at + strings.len() as u64;
        let shoff = verneed_at + verneed.len() as u64;
        let mut out = vec![0u8; 64];
        out[..4].copy_from_slice(b"\x7fELF");
        out[4] = 2;
        out[5] = 1;
        out[6] = 1;
        out[16..18].copy_from_slice(&2u16.to_le_bytes());
        out[18..20].copy_from_slice(&machine.to_le_bytes());
        out[32..40].copy_from_slice(&phoff.to_le_bytes());
        out[40..48].copy_from_slice(&shoff.to_le_bytes());
        out[54..56].copy_from_slice(&56u16.to_le_bytes());
        out[56..58].copy_from_slice(&phnum.to_le_bytes());
        out[58..60].copy_from_slice(&64u16.to_le_bytes());
        out[60..62].copy_from_slice(&3u16.to_le_bytes());
        if interp {
            let mut header = vec![0u8; 56];
            header[..4].copy_from_slice(&PT_INTERP.to_le_bytes());
            out.extend_from_slice(&header);
        }
        out.extend_from_slice(&strings);
        out.extend_from_slice(&verneed);
        let section = |kind: u32, at: u64, size: u64, link: u32| {
            let mut header = vec![0u8; 64];
            header[4..8].copy_from_slice(&kind.to_le_bytes());
            header[24..32].copy_from_slice(&at.to_le_bytes());
            header[32..40].copy_from_slice(&size.to_le_bytes());
            header[40..44].copy_from_slice(&link.to_le_bytes());
            header
        };
        out.extend(section(0, 0, 0, 0));
        out.extend(section(3, strings_at, strings.len() as u64, 0));
        let table = if versions.is_empty() {
            0
        } else {
            verneed.len() as u64
        };
        let kind = if versions.is_empty() {
            1
        } else {
            SHT_GNU_VERNEED
        };
        out.extend(section(kind, verneed_at, table, 1));
        out
    }

    #[test]
    fn the_newest_glibc_version_needed_is_found() {
        let bytes = elf(
            EM_X86_64,
            true,
            &["GLIBC_2.2.5", "GLIBC_2.34", "GLIBC_PRIVATE", "GLIBC_2.33"],
        );
        let read = Elf::read(&bytes).unwrap();
        assert!(read.dynamic);
        assert_eq!(read.glibc, Some(Version(2, 34, 0)));
        assert_eq!(read.runs_on("x86_64"), Some(true));
        assert_eq!(read.runs_on("aarch64"), Some(false));
        assert_eq!(read.runs_on("sparc64"), None);
        assert_eq!(read.machine_name(), "x86_64");
        assert!(read.for_linux());
        let mut freebsd = bytes.clone();
        freebsd[7] = 9;
        assert!(!Elf::read(&freebsd).unwrap().for_linux());
    }

    #[test]
    fn a_static_program_needs_no_loader_and_no_glibc_version() {
        let read = Elf::read(&elf(EM_AARCH64, false, &[])).unwrap();
        assert!(!read.dynamic);
        assert_eq!(read.glibc, None);
        assert_eq!(read.runs_on("aarch64"), Some(true));
        assert_eq!(read.runs_on("x86_64"), Some(false));
        assert_eq!(read.machine_name(), "aarch64");
    }

    #[test]
    fn this_test_program_is_read_as_what_it_is() {
        let bytes = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        let read = Elf::read(&bytes).unwrap();
        assert_eq!(read.runs_on(std::env::consts::ARCH), Some(true));
        // Built on this machine: it runs with this glibc, which is at
        // least as new as what it needs.
        if read.dynamic {
            let need = read
                .glibc
                .expect("a dynamic Rust program needs glibc versions");
            assert!(need >= Version(2, 2, 5), "{need}");
            let here = unsafe { std::ffi::CStr::from_ptr(libc::gnu_get_libc_version()) };
            assert!(Version::parse(here.to_str().unwrap()).unwrap() >= need);
        }
    }

    #[test]
    fn a_cut_or_foreign_file_is_an_error_never_a_panic() {
        let bytes = elf(EM_X86_64, true, &["GLIBC_2.34"]);
        for end in 0..bytes.len() {
            let _ = Elf::read(&bytes[..end]);
        }
        // The first program header is 56 bytes at 64: its type is there,
        // then nothing.
        let cut = Elf::read(&bytes[..66]).unwrap_err();
        assert_eq!(cut, ElfError::CutShort { at: 64 });
        assert_eq!(cut.to_string(), "cut short: nothing at byte 64");
        assert_eq!(
            Elf::read(b"\x7fELF\x03\x01\x01\0\0\0\0\0\0\0\0\0"),
            Err(ElfError::Class(3))
        );
        assert_eq!(Elf::read(b"#!/bin/sh\n"), Err(ElfError::NotElf));
        // A byte flipped anywhere is read or refused, never a panic.
        for at in 0..bytes.len() {
            let mut changed = bytes.clone();
            changed[at] ^= 0xff;
            let _ = Elf::read(&changed);
        }
    }

    #[test]
    fn chains_shared_by_many_entries_end_the_walk() {
        // 2,000 entries, each pointing at one chain of 60,000 versions: a
        // walk of each chain would take 120 million steps.
        let (entries, chain) = (2000u32, 60_000u32);
        let mut bytes = Vec::new();
        for index in 0..entries {
            bytes.extend_from_slice(&1u16.to_le_bytes());
            bytes.extend_from_slice(&(chain as u16).to_le_bytes());
            bytes.extend_from_slice(&0u32.to_le_bytes());
            bytes.extend_from_slice(&((entries - index) * 16).to_le_bytes());
            let next: u32 = if index + 1 < entries { 16 } else { 0 };
            bytes.extend_from_slice(&next.to_le_bytes());
        }
        let strings = (entries + chain) * 16;
        for index in 0..chain {
            bytes.extend_from_slice(&[0; 8]);
            bytes.extend_from_slice(&1u32.to_le_bytes());
            let next: u32 = if index + 1 < chain { 16 } else { 0 };
            bytes.extend_from_slice(&next.to_le_bytes());
        }
        bytes.extend_from_slice(b"\0GLIBC_2.1\0");
        let file = File {
            bytes: &bytes,
            little: true,
        };
        let size = u64::from(strings);
        let read = file.newest_glibc(0, size, u64::from(strings));
        assert_eq!(read, Err(ElfError::LongChains));
        // One chain of its own per entry is read whole.
        assert_eq!(
            file.newest_glibc(u64::from(entries - 1) * 16, size, u64::from(strings)),
            Ok(Some(Version(2, 1, 0)))
        );
    }

    #[test]
    fn versions_parse_as_glibc_writes_them() {
        assert_eq!(Version::parse("2.31"), Some(Version(2, 31, 0)));
        assert_eq!(Version::parse("2.2.5"), Some(Version(2, 2, 5)));
        assert!(Version::parse("2.2.5") < Version::parse("2.31"));
        for bad in ["", "2", "2.", "x.1", "2.31.1.1", "2.-1", "PRIVATE"] {
            assert_eq!(Version::parse(bad), None, "{bad}");
        }
        assert_eq!(Version(2, 34, 0).to_string(), "2.34");
    }
}
