//! ral's native providers: the core types (host, user, group, mount,
//! file and exec), and the machine's facts, written in Rust on the provider SDK
//! ([`crate`]), with the same names, metadata and behaviour as the
//! scripts they replace. The host serves their calls in its own process
//! (no interpreter, no child: a host without Python can use them);
//! anywhere else — on a remote target, or started by hand — the
//! `ral-provider` program serves them, called by each one's small
//! `NAME.prov` beside its metadata.

mod accounts;
mod exec;
mod facts;
mod file;
mod fstab;
mod group;
mod home;
mod hosts;
mod passwd;
#[cfg(test)]
mod tests;

use crate::{Native, Provider};

/// The native providers by file name (`NAME.prov`).
static PROVIDERS: &[(&str, &dyn Provider)] = &[
    ("etc_group", &group::EtcGroup),
    ("etc_hosts", &hosts::EtcHosts),
    ("etc_passwd", &passwd::EtcPasswd),
    ("exec", &exec::Exec),
    ("facts", &facts::Facts),
    ("file", &file::File),
    ("fstab", &fstab::Fstab),
];

/// The native provider bundled as `NAME.prov`, if it is one.
pub fn find(name: &str) -> Option<Native> {
    PROVIDERS
        .iter()
        .find(|(known, _)| *known == name)
        .map(|(_, provider)| Native(*provider))
}

/// The names of the native providers.
pub fn names() -> impl Iterator<Item = &'static str> {
    PROVIDERS.iter().map(|(name, _)| *name)
}

/// The program that serves the native providers elsewhere: `ral-provider`
/// beside the running binary (where `cargo install` and the build put
/// it). Looked for once per process: every host of a run (one per
/// target) asks.
pub fn program() -> Result<std::path::PathBuf, ProgramMissing> {
    static FOUND: std::sync::OnceLock<Result<std::path::PathBuf, (String, std::io::ErrorKind)>> =
        std::sync::OnceLock::new();
    FOUND
        .get_or_init(|| {
            let exe = std::env::current_exe()
                .map_err(|e| ("finding the running program".to_owned(), e.kind()))?;
            let program = exe.with_file_name("ral-provider");
            match program.is_file() {
                true => Ok(program),
                false => Err((
                    format!(
                        "finding ral's native providers' program, which runs them on targets, \
                         at {}",
                        program.display()
                    ),
                    std::io::ErrorKind::NotFound,
                )),
            }
        })
        .clone()
        .map_err(|(context, kind)| ProgramMissing { context, kind })
}

/// Why [`program`] found no program: what was looked for, and how the
/// system answered.
#[derive(Debug, Clone)]
pub struct ProgramMissing {
    context: String,
    kind: std::io::ErrorKind,
}

impl std::fmt::Display for ProgramMissing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.context, std::io::Error::from(self.kind))
    }
}

impl std::error::Error for ProgramMissing {}
