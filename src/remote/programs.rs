//! Which copy of ral's native providers' program goes to a target, and so
//! which bundle: the machine a target's session reports (`uname -m`, its
//! glibc) is matched against the copies at hand, read as ELF files
//! (`elf.rs`), before anything is sent.
//!
//! A target is given, first that runs there:
//! 1. `ral-provider` beside the running binary (what this machine runs),
//!    when it is built for the target's machine and is either statically
//!    linked or needs no newer glibc than the target has;
//! 2. `ral-provider-ARCH` (ARCH as the target's `uname -m` prints it) in
//!    the directory `RAL_TARGET_PROGRAMS` names, then beside the running
//!    binary: a static build for older machines of the same architecture,
//!    or a build for another one (docs/remote.md says how to make them).
//!
//! A target none of them can run gets the bundle without the program: its
//! script providers work, and a call of a native provider is refused with
//! the reason (never a loader's error). Each machine is decided once per
//! run.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::bounded_read;
use crate::error::Result;
use crate::remote::bundle::{Bundle, MAX_PROGRAM, NATIVE_PROGRAM};
use crate::remote::elf::{Elf, Version};
use crate::remote::script::Machine;
use crate::text::escape;

/// The environment variable naming the directory of the copies for
/// other machines.
pub const PROGRAMS_VAR: &str = "RAL_TARGET_PROGRAMS";

/// What a target of one machine is sent.
#[derive(Debug)]
pub struct Choice {
    pub bundle: Arc<Bundle>,
    /// Why the native providers cannot run there, when the bundle has no
    /// program for them.
    pub refused: Option<String>,
}

/// The bundles of a run, one per copy of the program in use.
pub struct Bundles {
    dirs: Vec<PathBuf>,
    /// The directory of the native providers' scripts and this machine's
    /// program, when native providers are in use.
    native: Option<(PathBuf, PathBuf)>,
    /// Where `ral-provider-ARCH` files are looked for, in order.
    elsewhere: Vec<PathBuf>,
    /// The bundle with this machine's program: the one a session asks
    /// about first.
    first: Arc<Bundle>,
    chosen: Mutex<HashMap<Machine, Arc<Choice>>>,
}

impl Bundles {
    /// The files of `dirs`, with `native` (the native providers'
    /// directory and this machine's program) in the first bundle.
    pub fn new(dirs: Vec<PathBuf>, native: Option<(PathBuf, PathBuf)>) -> Result<Bundles> {
        let first = Bundle::collect_with(
            &dirs,
            native
                .as_ref()
                .map(|(dir, program)| (dir.as_path(), program.as_path())),
        )?;
        let beside = native
            .as_ref()
            .and_then(|(_, program)| program.parent())
            .map(Path::to_owned)
            .unwrap_or_default();
        let mut elsewhere: Vec<PathBuf> = std::env::var_os(PROGRAMS_VAR)
            .filter(|dir| !dir.is_empty())
            .map(PathBuf::from)
            .into_iter()
            .collect();
        elsewhere.push(beside);
        elsewhere.dedup();
        Ok(Bundles {
            dirs,
            native,
            elsewhere,
            first: Arc::new(first),
            chosen: Mutex::new(HashMap::new()),
        })
    }

    /// The bundle a session asks about before its machine is known.
    pub fn first(&self) -> &Arc<Bundle> {
        &self.first
    }

    /// What a target of `machine` is sent.
    pub fn for_machine(&self, machine: &Machine) -> Result<Arc<Choice>> {
        let mut chosen = self.chosen.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(choice) = chosen.get(machine) {
            return Ok(Arc::clone(choice));
        }
        let choice = Arc::new(self.choose(machine)?);
        chosen.insert(machine.clone(), Arc::clone(&choice));
        Ok(choice)
    }

    fn choose(&self, machine: &Machine) -> Result<Choice> {
        let Some((dir, own)) = &self.native else {
            return Ok(Choice {
                bundle: Arc::clone(&self.first),
                refused: None,
            });
        };
        let mut why = Vec::new();
        if machine.os != "Linux" {
            return self.refusal(machine, "ral-provider runs on Linux only".to_owned());
        }
        if let Some(bytes) = self.first.native_bytes() {
            match usable(bytes, machine, false) {
                Ok(()) => {
                    return Ok(Choice {
                        bundle: Arc::clone(&self.first),
                        refused: None,
                    })
                }
                Err(problem) => why.push(format!("{} {problem}", own.display())),
            }
        }
        match named_for(&machine.arch) {
            None => why.push(format!(
                "no copy is looked for a machine named '{}' by uname -m",
                escape(&machine.arch)
            )),
            Some(name) => {
                let mut missing = Vec::new();
                for path in self.elsewhere.iter().map(|place| place.join(&name)) {
                    match read(&path) {
                        Ok(Some(bytes)) => match usable(&bytes, machine, true) {
                            Ok(()) => {
                                let bundle = Bundle::collect_with(&self.dirs, Some((dir, &path)))?;
                                return Ok(Choice {
                                    bundle: Arc::new(bundle),
                                    refused: None,
                                });
                            }
                            Err(problem) => why.push(format!("{} {problem}", path.display())),
                        },
                        Ok(None) => missing.push(path.display().to_string()),
                        Err(e) => why.push(format!("{}: {e}", path.display())),
                    }
                }
                if !missing.is_empty() {
                    why.push(format!("there is no {}", missing.join(" nor ")));
                }
            }
        }
        self.refusal(machine, why.join("; "))
    }

    /// The bundle without the program, and why.
    fn refusal(&self, machine: &Machine, why: String) -> Result<Choice> {
        let bundle = Bundle::collect_with(&self.dirs, None)?;
        Ok(Choice {
            bundle: Arc::new(bundle),
            refused: Some(format!(
                "no copy of their program runs on its machine ({}): {why} (docs/remote.md, \
                 \"Older and other machines\", says how to build one)",
                describe(machine),
            )),
        })
    }
}

/// `ral-provider-ARCH`, for an ARCH that is a plain name.
fn named_for(arch: &str) -> Option<String> {
    let plain = !arch.is_empty()
        && arch.len() <= 32
        && arch
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.')
        && !arch.starts_with('.');
    plain.then(|| format!("{NATIVE_PROGRAM}-{arch}"))
}

/// `uname -sm` and the C library, as an error tells them.
fn describe(machine: &Machine) -> String {
    let arch = match (machine.os.as_str(), machine.arch.as_str()) {
        ("", _) | (_, "") => "uname -sm said nothing".to_owned(),
        ("Linux", arch) => escape(arch),
        (os, arch) => format!("{} {}", escape(os), escape(arch)),
    };
    match &machine.glibc {
        Some(version) => format!("{arch}, glibc {}", escape(version)),
        None => format!("{arch}, no glibc"),
    }
}

/// The bytes of `path`, `None` when there is no such file.
fn read(path: &Path) -> std::result::Result<Option<Vec<u8>>, String> {
    match bounded_read::read_file(path, MAX_PROGRAM, bounded_read::Links::Follow) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(bounded_read::Refused::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e.to_string()),
    }
}

/// Whether the program `bytes` runs on `machine`; `named` when the file
/// was named for that machine (a machine ral knows no ELF name of is then
/// taken at its word).
fn usable(bytes: &[u8], machine: &Machine, named: bool) -> std::result::Result<(), String> {
    let elf = Elf::read(bytes).map_err(|e| format!("cannot be read as a program: {e}"))?;
    if !elf.for_linux() {
        return Err(format!(
            "is built for another system (ELF OS/ABI {})",
            elf.os_abi
        ));
    }
    match elf.runs_on(&machine.arch) {
        Some(true) => {}
        None if named => {}
        _ => return Err(format!("is built for {}", elf.machine_name())),
    }
    if !elf.dynamic {
        return Ok(());
    }
    let Some(need) = elf.glibc else {
        return Err("is linked dynamically against a C library other than glibc".to_owned());
    };
    let have = machine.glibc.as_deref().and_then(Version::parse);
    match have {
        Some(have) if have >= need => Ok(()),
        Some(have) => Err(format!(
            "needs glibc {need} or newer and the target has {have}"
        )),
        None => Err(format!(
            "needs glibc {need} or newer and the target has no glibc"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::remote::elf::tests::elf;

    const EM_X86_64: u16 = 62;
    const EM_AARCH64: u16 = 183;

    fn machine(arch: &str, glibc: Option<&str>) -> Machine {
        Machine {
            os: "Linux".to_owned(),
            arch: arch.to_owned(),
            glibc: glibc.map(str::to_owned),
        }
    }

    /// A provider directory with one script, and `own` as this machine's
    /// program beside the binary (the directory `bin`).
    fn setup(own: &[u8]) -> (tempfile::TempDir, PathBuf, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let providers = dir.path().join("providers");
        std::fs::create_dir(&providers).unwrap();
        std::fs::write(providers.join("etc_hosts.prov"), "#!/bin/sh\n").unwrap();
        std::fs::create_dir(dir.path().join("bin")).unwrap();
        let program = dir.path().join("bin").join(NATIVE_PROGRAM);
        std::fs::write(&program, own).unwrap();
        (dir, providers, program)
    }

    fn bundles(providers: &Path, program: &Path) -> Bundles {
        let mut made = Bundles::new(
            vec![providers.to_owned()],
            Some((providers.to_owned(), program.to_owned())),
        )
        .unwrap();
        // The tests name the directory themselves, whatever the caller's
        // environment holds.
        made.elsewhere = vec![program.parent().unwrap().to_owned()];
        made
    }

    #[test]
    fn a_target_with_a_new_enough_glibc_gets_this_machines_program() {
        let (_dir, providers, program) = setup(&elf(EM_X86_64, true, &["GLIBC_2.34"]));
        let made = bundles(&providers, &program);
        for glibc in ["2.36", "2.34"] {
            let choice = made.for_machine(&machine("x86_64", Some(glibc))).unwrap();
            assert!(Arc::ptr_eq(&choice.bundle, made.first()), "{glibc}");
            assert_eq!(choice.refused, None);
            assert!(choice.bundle.native_bytes().is_some());
        }
    }

    #[test]
    fn an_older_glibc_gets_the_static_copy_or_a_reason() {
        let (dir, providers, program) = setup(&elf(EM_X86_64, true, &["GLIBC_2.34"]));
        let made = bundles(&providers, &program);
        let old = machine("x86_64", Some("2.31"));
        let choice = made.for_machine(&old).unwrap();
        let why = choice.refused.as_deref().unwrap();
        assert!(
            why.contains("needs glibc 2.34 or newer and the target has 2.31"),
            "{why}"
        );
        assert!(why.contains("ral-provider-x86_64"), "{why}");
        assert!(choice.bundle.native_bytes().is_none());
        assert_ne!(choice.bundle.digest(), made.first().digest());

        // With a static copy beside the binary, a new run sends it.
        let copy = elf(EM_X86_64, false, &[]);
        std::fs::write(dir.path().join("bin/ral-provider-x86_64"), &copy).unwrap();
        let made = bundles(&providers, &program);
        let choice = made.for_machine(&old).unwrap();
        assert_eq!(choice.refused, None);
        assert_eq!(choice.bundle.native_bytes(), Some(&copy[..]));
        // A machine without glibc (musl) runs the static copy too.
        let choice = made.for_machine(&machine("x86_64", None)).unwrap();
        assert_eq!(choice.bundle.native_bytes(), Some(&copy[..]));
    }

    #[test]
    fn another_architecture_needs_a_copy_built_for_it() {
        let (dir, providers, program) = setup(&elf(EM_X86_64, false, &[]));
        let arm = machine("aarch64", Some("2.36"));
        let choice = bundles(&providers, &program).for_machine(&arm).unwrap();
        let why = choice.refused.as_deref().unwrap();
        assert!(why.contains("is built for x86_64"), "{why}");
        assert!(why.contains("there is no"), "{why}");
        assert!(why.contains("ral-provider-aarch64"), "{why}");

        // A file named for the machine but built for another is refused.
        let copy = dir.path().join("bin/ral-provider-aarch64");
        std::fs::write(&copy, elf(EM_X86_64, false, &[])).unwrap();
        let choice = bundles(&providers, &program).for_machine(&arm).unwrap();
        assert!(choice
            .refused
            .as_deref()
            .unwrap()
            .contains("ral-provider-aarch64 is built for x86_64"));

        std::fs::write(&copy, elf(EM_AARCH64, false, &[])).unwrap();
        let choice = bundles(&providers, &program).for_machine(&arm).unwrap();
        assert_eq!(choice.refused, None);
        assert_eq!(
            choice.bundle.native_bytes(),
            Some(&elf(EM_AARCH64, false, &[])[..])
        );
    }

    #[test]
    fn the_named_directory_is_looked_in_first_then_beside_the_binary() {
        let (dir, providers, program) = setup(&elf(EM_X86_64, true, &["GLIBC_2.34"]));
        let named = dir.path().join("named");
        std::fs::create_dir(&named).unwrap();
        let mut made = bundles(&providers, &program);
        made.elsewhere.insert(0, named.clone());
        let old = machine("x86_64", Some("2.31"));
        let why = made.for_machine(&old).unwrap().refused.clone().unwrap();
        assert!(
            why.contains(&format!(
                "there is no {}/ral-provider-x86_64 nor {}/ral-provider-x86_64",
                named.display(),
                dir.path().join("bin").display()
            )),
            "{why}"
        );
        // Beside the binary, when the named directory has none.
        let beside = elf(EM_X86_64, false, &["GLIBC_2.2.5"]);
        std::fs::write(dir.path().join("bin/ral-provider-x86_64"), &beside).unwrap();
        let mut made = bundles(&providers, &program);
        made.elsewhere.insert(0, named.clone());
        assert_eq!(
            made.for_machine(&old).unwrap().bundle.native_bytes(),
            Some(&beside[..])
        );
        // The named directory's copy wins.
        let first = elf(EM_X86_64, false, &[]);
        std::fs::write(named.join("ral-provider-x86_64"), &first).unwrap();
        let mut made = bundles(&providers, &program);
        made.elsewhere.insert(0, named);
        assert_eq!(
            made.for_machine(&old).unwrap().bundle.native_bytes(),
            Some(&first[..])
        );
    }

    #[test]
    fn an_odd_machine_name_is_never_a_path() {
        let (_dir, providers, program) = setup(&elf(EM_X86_64, false, &[]));
        let made = bundles(&providers, &program);
        for arch in ["", "../x86_64", "a/b", ".hidden", "x y"] {
            let choice = made.for_machine(&machine(arch, None)).unwrap();
            let why = choice.refused.as_deref().unwrap();
            assert!(
                why.contains("no copy is looked for") || arch.is_empty(),
                "{arch}: {why}"
            );
            assert!(!why.contains("/../"), "{why}");
        }
        assert_eq!(named_for("armv7l").as_deref(), Some("ral-provider-armv7l"));
    }

    #[test]
    fn a_system_other_than_linux_gets_no_program() {
        let (dir, providers, program) = setup(&elf(EM_X86_64, false, &[]));
        let made = bundles(&providers, &program);
        let mac = Machine {
            os: "Darwin".to_owned(),
            arch: "x86_64".to_owned(),
            glibc: None,
        };
        let why = made.for_machine(&mac).unwrap().refused.clone().unwrap();
        assert!(
            why.contains("(Darwin x86_64, no glibc): ral-provider runs on Linux only"),
            "{why}"
        );
        // A copy built for another system is refused by its header.
        let mut freebsd = elf(EM_AARCH64, false, &[]);
        freebsd[7] = 9;
        std::fs::write(dir.path().join("bin/ral-provider-aarch64"), &freebsd).unwrap();
        let arm = machine("aarch64", None);
        let why = made.for_machine(&arm).unwrap().refused.clone().unwrap();
        assert!(
            why.contains("is built for another system (ELF OS/ABI 9)"),
            "{why}"
        );
        std::fs::write(dir.path().join("bin/ral-provider-aarch64"), b"#!/bin/sh\n").unwrap();
        let why = bundles(&providers, &program)
            .for_machine(&arm)
            .unwrap()
            .refused
            .clone()
            .unwrap();
        assert!(
            why.contains("ral-provider-aarch64 cannot be read as a program: not an ELF program"),
            "{why}"
        );
    }
}
