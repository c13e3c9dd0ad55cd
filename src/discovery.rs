//! Finding providers in data directories and loading their metadata.
//!
//! Each data directory holds `providers/*.prov`. Metadata comes from `X.yaml`
//! beside `X.prov` when there is one, otherwise from running
//! `X.prov ral_action=describe`. A broken provider is skipped with one warning
//! naming its file and the reason; it never hides the others. When two data
//! directories hold a provider with the same qualified name, the earlier
//! directory wins.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::host::Host;
use crate::metadata::Metadata;
use crate::provider::{is_executable, Provider};

/// The data directories to search, in order: each `-I` directory, each part
/// of `RALSH_DATA_DIR`, then the bundled directory (if any).
pub fn data_dirs(
    includes: &[PathBuf],
    data_dir_var: Option<OsString>,
    bundled: Option<PathBuf>,
) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = includes.to_vec();
    if let Some(value) = data_dir_var {
        dirs.extend(std::env::split_paths(&value).filter(|p| !p.as_os_str().is_empty()));
    }
    dirs.extend(bundled);
    dirs
}

/// Every provider that loaded, suitable or not, in discovery order.
#[derive(Debug, Default)]
pub struct Registry {
    providers: Vec<Provider>,
}

/// Loads every provider of `dirs`.
pub fn discover(host: &Host, dirs: &[PathBuf]) -> Registry {
    let mut registry = Registry::default();
    for dir in dirs {
        for source in provider_files(dir) {
            match load(host, &source) {
                Ok(provider) => registry.add(provider),
                Err(e) => log::warn!(
                    "skipping provider {}: {}",
                    source.display(),
                    reason(&e, &source)
                ),
            }
        }
    }
    registry
}

/// Why a provider was skipped, without repeating its own file name.
fn reason(error: &Error, source: &Path) -> String {
    match error {
        Error::Metadata { file, message } if file == source => message.clone(),
        Error::Metadata { file, message } => format!("{}: {message}", file.display()),
        other => other.to_string(),
    }
}

/// The `.prov` files of one data directory, sorted by name.
fn provider_files(dir: &Path) -> Vec<PathBuf> {
    let providers = dir.join("providers");
    let entries = match std::fs::read_dir(&providers) {
        Ok(entries) => entries,
        Err(e) => {
            log::info!("no providers in {}: {e}", providers.display());
            return Vec::new();
        }
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.extension().is_some_and(|ext| ext == "prov"))
        .collect();
    files.sort();
    files
}

/// Loads one provider: metadata from the `.yaml` beside it or from describe.
pub fn load(host: &Host, source: &Path) -> Result<Provider> {
    if !is_executable(source) {
        return Err(Error::Metadata {
            file: source.to_owned(),
            message: "the file is not executable (chmod +x it)".to_owned(),
        });
    }
    let yaml = source.with_extension("yaml");
    let (text, origin) = if yaml.exists() {
        let text = std::fs::read_to_string(&yaml).map_err(|e| Error::Metadata {
            file: yaml.clone(),
            message: format!("cannot read it: {e}"),
        })?;
        (text, yaml)
    } else {
        let label = source
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        (host.describe(&label, source)?, source.to_owned())
    };
    let meta = Metadata::parse(&text, &origin)?;
    let provider = Provider::new(meta, source.to_owned(), host.env());
    if let Some(reason) = &provider.unsuitable {
        log::info!(
            "{} is not suitable here: {reason}",
            provider.qualified_name()
        );
    }
    Ok(provider)
}

impl Registry {
    fn add(&mut self, provider: Provider) {
        let name = provider.qualified_name();
        if let Some(first) = self.providers.iter().find(|p| p.qualified_name() == name) {
            log::info!(
                "{} from {} is shadowed by {}",
                name,
                provider.source.display(),
                first.source.display()
            );
            return;
        }
        self.providers.push(provider);
    }

    /// All providers, suitable or not.
    pub fn providers(&self) -> &[Provider] {
        &self.providers
    }

    /// Resolves `type::name` first, then a type with one suitable provider.
    pub fn resolve(&self, query: &str) -> Result<&Provider> {
        if let Some(provider) = self.providers.iter().find(|p| p.qualified_name() == query) {
            return match &provider.unsuitable {
                None => Ok(provider),
                Some(reason) => Err(Error::Unsuitable {
                    provider: query.to_owned(),
                    reason: reason.clone(),
                }),
            };
        }
        let of_type: Vec<&Provider> = self
            .providers
            .iter()
            .filter(|p| p.type_name() == query)
            .collect();
        let suitable: Vec<&Provider> = of_type
            .iter()
            .copied()
            .filter(|p| p.is_suitable())
            .collect();
        match (suitable.as_slice(), of_type.first()) {
            ([one], _) => Ok(one),
            ([], Some(unsuitable)) => Err(Error::Unsuitable {
                provider: unsuitable.qualified_name(),
                reason: unsuitable.unsuitable.clone().unwrap_or_default(),
            }),
            ([], None) => Err(Error::UnknownProvider {
                query: query.to_owned(),
            }),
            (many, _) => Err(Error::AmbiguousType {
                query: query.to_owned(),
                candidates: many.iter().map(|p| p.qualified_name()).collect(),
            }),
        }
    }
}
