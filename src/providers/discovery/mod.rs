//! Finding providers in data directories and loading their metadata.
//!
//! Each data directory holds `providers/*.prov`. Metadata comes from `X.yaml`
//! beside `X.prov` when there is one, otherwise from running
//! `X.prov ral_action=describe`, whose output is cached per version of the
//! file ([`MetadataCache`]); the describes a run still needs run
//! concurrently, a few at a time. A broken provider is skipped with one
//! warning naming its file and the reason; it never hides the others. For
//! `ralsh TYPE`, the bundled directory's providers of other types are not
//! looked at at all: the binary knows each one's type. When
//! two data directories hold a provider with the same qualified name, the
//! earlier directory wins.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::bounded_read::{self, Links};
use crate::bundled;
use crate::error::{Error, Result};
use crate::metadata::{Metadata, MAX_METADATA};
use crate::metadata_cache::{Files, Known, MetadataCache};
use crate::plugin_meta::Plugin;
use crate::provider::{is_executable, Provider};

pub mod plugins;

/// What discovery needs from whoever runs providers (the host): a way to
/// run a describe, and what the outcome of one depends on.
pub trait Describer: Sync {
    /// Runs `program ral_action=describe` for the provider `label` (its
    /// file stem) and returns what it printed.
    fn describe(&self, label: &str, program: &Path) -> Result<String>;

    /// The PATH providers get, which suitability checks search.
    fn path(&self) -> Option<&OsStr>;

    /// What a describe may depend on besides the file (the environment
    /// providers get): part of the metadata cache's key.
    fn context(&self) -> String;

    /// The time limit of a describe.
    fn timeout(&self) -> Duration;
}

/// A directory holding `providers/*.prov`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DataDir {
    /// Given with `-I` or in `RALSH_DATA_DIR`.
    Given(PathBuf),
    /// The bundled providers, as [`bundled::data_dir`] wrote and checked
    /// them. Only the files built into the binary count (anything else
    /// there was not checked), and which has which type is known without
    /// reading them.
    Bundled(PathBuf),
}

impl DataDir {
    /// The provider files to load: those in the directory, or for the
    /// bundled one those built in (of type `only_type`, if given).
    fn provider_files(&self, only_type: Option<&str>) -> Vec<PathBuf> {
        match self {
            DataDir::Bundled(path) => bundled::provider_files(only_type)
                .map(|file| path.join("providers").join(file))
                .collect(),
            DataDir::Given(path) => provider_files(path),
        }
    }

    /// The model plugins' programs (`plugins/*.plugin`) to load.
    fn plugin_files(&self) -> Vec<PathBuf> {
        match self {
            DataDir::Bundled(path) => bundled::plugin_files()
                .map(|file| path.join("plugins").join(file))
                .collect(),
            DataDir::Given(path) => plugins::files_in(path),
        }
    }
}

/// The data directories to search, in order: each `-I` directory, each part
/// of `RALSH_DATA_DIR`, then the bundled directory (if any).
pub fn data_dirs(
    includes: &[PathBuf],
    data_dir_var: Option<OsString>,
    bundled: Option<PathBuf>,
) -> Vec<DataDir> {
    let mut dirs: Vec<DataDir> = includes.iter().cloned().map(DataDir::Given).collect();
    if let Some(value) = data_dir_var {
        dirs.extend(
            std::env::split_paths(&value)
                .filter(|p| !p.as_os_str().is_empty())
                .map(DataDir::Given),
        );
    }
    dirs.extend(bundled.map(DataDir::Bundled));
    dirs
}

/// Every provider that loaded, suitable or not, in discovery order.
#[derive(Debug, Default, Clone)]
pub struct Registry {
    providers: Vec<Provider>,
    /// How many providers were skipped as broken.
    broken: usize,
    /// Model plugins, with every type (all of them were looked for).
    plugins: Vec<Plugin>,
    /// The plugins' item types, provider-shaped (no actions), which type
    /// manifests' plugin items.
    models: Vec<Provider>,
    /// Item types that clash with a provider's type or with each other.
    clashes: Vec<plugins::Clash>,
    /// The data directories searched, in order (where custom facts,
    /// `DIR/facts.d`, are found too).
    data_dirs: Vec<DataDir>,
}

/// How many describes run at once when the cache cannot answer.
const CONCURRENT_DESCRIBES: usize = 8;

/// Loads the providers of `dirs`, or, with `only_type`, those of that type
/// and those whose type is not known yet. Providers with neither a `.yaml`
/// nor a current cache entry are described, several at a time.
///
/// When a forwarded interrupt cut a describe short, the registry is empty
/// (see `process::exit_if_interrupted`).
pub fn discover(
    host: &dyn Describer,
    dirs: &[DataDir],
    cache: &MetadataCache,
    only_type: Option<&str>,
) -> Registry {
    let context = host.context();
    let mut found: Vec<Found> = dirs
        .iter()
        .flat_map(|dir| dir.provider_files(only_type))
        .map(|source| Found::new(source, cache, &context, host.timeout().as_millis() as u64))
        .filter(
            |found| match (found.known.as_ref().and_then(Known::kind), only_type) {
                (Some(kind), Some(wanted)) => kind == wanted,
                _ => true,
            },
        )
        .collect();
    for found in &mut found {
        found.read_cheaply();
    }
    let pending: Vec<usize> = (0..found.len())
        .filter(|&i| found[i].meta.is_none())
        .collect();
    let described = describe_all(host, &found, &pending);
    // An interrupt ends discovery with nothing found, remembered or reported.
    if described
        .iter()
        .any(|r| matches!(r, Err(Skip::Now(Error::Interrupted { .. }))))
    {
        return Registry::default();
    }
    for (index, result) in pending.into_iter().zip(described) {
        found[index].meta = Some(result);
    }
    let mut registry = Registry {
        data_dirs: dirs.to_vec(),
        ..Registry::default()
    };
    if only_type.is_none() {
        registry.plugins = plugins::find(dirs);
    }
    for found in found {
        found.remember(cache, &context);
        let Found { source, meta, .. } = found;
        match meta.expect("every provider has metadata or an error") {
            Ok((meta, _)) => {
                let mut provider = provider_from(meta, &source, host);
                provider.native = native_code(dirs, &source);
                registry.add(provider)
            }
            // Warned about once per version of its files: the cache
            // remembers the verdict.
            Err(Skip::Remembered(reason)) => {
                log::info!(
                    "skipping provider {} (unchanged since it was found broken): {reason}",
                    source.display()
                );
                registry.broken += 1;
            }
            Err(Skip::Now(e)) => {
                log::warn!(
                    "skipping provider {}: {}",
                    source.display(),
                    reason(&e, &source)
                );
                registry.broken += 1;
            }
        }
    }
    let (models, clashes) = plugins::models(&registry.plugins, &registry.providers);
    // Said at once: a run whose manifests name the type, or whose model
    // holds plugin items, fails on it; `ralsh` goes on with the provider.
    for clash in &clashes {
        log::warn!("{}", clash.error());
    }
    registry.models = models;
    registry.clashes = clashes;
    registry
}

/// The code of a native provider, for a provider file of the bundled
/// directory that is one (`NAME.prov` there only runs it elsewhere).
/// Files of other directories are always run as they are.
fn native_code(dirs: &[DataDir], source: &Path) -> Option<crate::sdk::Native> {
    let bundled = dirs.iter().find_map(|dir| match dir {
        DataDir::Bundled(path) => Some(path.join("providers")),
        DataDir::Given(_) => None,
    })?;
    if source.parent() != Some(bundled.as_path()) {
        return None;
    }
    crate::native::find(&label_of(source))
}

/// Metadata and the describe text it came from (none for a `.yaml`), or
/// why there is none.
type Loaded = std::result::Result<(Metadata, Option<String>), Skip>;

/// Why a provider is skipped.
enum Skip {
    /// Found out on this run.
    Now(Error),
    /// The cache's verdict on this version of its files.
    Remembered(String),
}

impl From<Error> for Skip {
    fn from(e: Error) -> Skip {
        Skip::Now(e)
    }
}

/// One provider file on its way to the registry.
struct Found {
    source: PathBuf,
    files: Option<Files>,
    /// What the cache knew about this version of the files.
    known: Option<Known>,
    /// The metadata and the describe text it came from (none for a `.yaml`),
    /// or why there is none; `None` while describe has yet to run.
    meta: Option<Loaded>,
}

impl Found {
    fn new(source: PathBuf, cache: &MetadataCache, context: &str, timeout_ms: u64) -> Found {
        let files = Files::of(&source);
        // A describe that timed out is tried again with a longer limit.
        let known = files
            .as_ref()
            .and_then(|files| cache.get(files, context))
            .filter(|known| {
                !matches!(known, Known::Skipped { timed_out_after_ms: Some(limit), .. } if timeout_ms > *limit)
            });
        Found {
            source,
            files,
            known,
            meta: None,
        }
    }

    /// Metadata known without running the provider: its `.yaml`, or a
    /// cached describe. Errors known already, or remembered by the cache,
    /// are kept too.
    fn read_cheaply(&mut self) {
        let source = &self.source;
        if let Some(Known::Skipped { reason, .. }) = &self.known {
            self.meta = Some(Err(Skip::Remembered(reason.clone())));
            return;
        }
        if !is_executable(source) {
            self.meta = Some(Err(not_executable(source).into()));
            return;
        }
        let yaml = source.with_extension("yaml");
        if yaml.exists() {
            let meta = read_yaml(&yaml).and_then(|text| Metadata::parse(&text, &yaml));
            self.meta = Some(meta.map(|meta| (meta, None)).map_err(Skip::Now));
            return;
        }
        if let Some(Known::Loaded {
            describe: Some(text),
            ..
        }) = &self.known
        {
            // A cached text that no longer parses is described again.
            if let Ok(meta) = Metadata::parse(text, source) {
                self.meta = Some(Ok((meta, Some(text.clone()))));
            }
        }
    }

    /// Caches what was learnt, when the cache did not know it yet and the
    /// files did not change meanwhile: the provider's type and name, or
    /// why it was skipped (unless the reason may pass by itself).
    fn remember(&self, cache: &MetadataCache, context: &str) {
        let (Some(files), Some(meta)) = (&self.files, &self.meta) else {
            return;
        };
        let known = match meta {
            Ok((meta, describe)) => Known::Loaded {
                kind: meta.type_name.clone(),
                name: meta.name.clone(),
                describe: describe.clone(),
            },
            Err(Skip::Now(e)) if lasts(e) => Known::Skipped {
                reason: reason(e, &self.source),
                timed_out_after_ms: match e {
                    Error::Timeout { limit, .. } => Some(limit.as_millis() as u64),
                    _ => None,
                },
            },
            Err(_) => return,
        };
        if self.known.as_ref() != Some(&known) && Files::of(&self.source).as_ref() == Some(files) {
            cache.put(files, context, &known);
        }
    }
}

/// The metadata a provider's describe printed. Its errors say so: their
/// lines and columns are of that output, not of the provider's file.
fn parse_described(text: &str, source: &Path) -> Result<Metadata> {
    Metadata::parse(text, source).map_err(|error| match error {
        Error::Metadata { file, message } => Error::Metadata {
            file,
            message: format!("the metadata its describe printed: {message}"),
        },
        other => other,
    })
}

/// Runs the describes of `pending` (indices into `found`), a few at a
/// time; results in the order of `pending`.
fn describe_all(host: &dyn Describer, found: &[Found], pending: &[usize]) -> Vec<Loaded> {
    let describe = |index: usize| -> Loaded {
        let source = &found[index].source;
        let text = host.describe(&label_of(source), source)?;
        let meta = parse_described(&text, source)?;
        Ok((meta, Some(text)))
    };
    if pending.len() <= 1 {
        return pending.iter().map(|&i| describe(i)).collect();
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results: Vec<std::sync::Mutex<Option<Loaded>>> = pending
        .iter()
        .map(|_| std::sync::Mutex::new(None))
        .collect();
    std::thread::scope(|scope| {
        for _ in 0..CONCURRENT_DESCRIBES.min(pending.len()) {
            scope.spawn(|| loop {
                let slot = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let Some(&index) = pending.get(slot) else {
                    break;
                };
                let result = describe(index);
                *results[slot].lock().unwrap_or_else(|e| e.into_inner()) = Some(result);
            });
        }
    });
    results
        .into_iter()
        .map(|slot| {
            slot.into_inner()
                .unwrap_or_else(|e| e.into_inner())
                .expect("every pending describe ran")
        })
        .collect()
}

fn label_of(source: &Path) -> String {
    source
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn not_executable(source: &Path) -> Error {
    Error::Metadata {
        file: source.to_owned(),
        message: "the file is not executable (chmod +x it)".to_owned(),
    }
}

/// A `.yaml`'s text: a regular file of at most [`MAX_METADATA`] bytes of
/// UTF-8.
pub(crate) fn read_yaml(yaml: &Path) -> Result<String> {
    let invalid = |message: String| Error::Metadata {
        file: yaml.to_owned(),
        message,
    };
    // A file of the wrong kind or size stays so until it changes; a failed
    // read (EIO, EMFILE) may pass, and is not remembered.
    let bytes =
        bounded_read::read_file(yaml, MAX_METADATA, Links::Follow).map_err(|e| match e {
            bounded_read::Refused::Io(e) => Error::io(format!("reading {}", yaml.display()), e),
            lasting => invalid(format!("cannot read it: {lasting}")),
        })?;
    String::from_utf8(bytes).map_err(|e| invalid(format!("it is not UTF-8 text: {e}")))
}

/// Whether a reason to skip a provider lasts as long as its files do: not
/// a failure to start it (a missing interpreter may be installed, a
/// process limit may pass) nor one to read its files.
fn lasts(error: &Error) -> bool {
    !matches!(error, Error::Spawn { .. } | Error::Io { .. })
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

/// A type name as references also read it: one not found as written is
/// looked for in this form (see `Registry::resolve_reference`), so two
/// names of the same form could mean each other.
pub fn reference_form(type_name: &str) -> String {
    type_name.to_lowercase()
}

/// Loads one provider, without the cache: metadata from the `.yaml` beside
/// it or from describe.
pub fn load(host: &dyn Describer, source: &Path) -> Result<Provider> {
    if !is_executable(source) {
        return Err(not_executable(source));
    }
    let yaml = source.with_extension("yaml");
    let meta = if yaml.exists() {
        Metadata::parse(&read_yaml(&yaml)?, &yaml)?
    } else {
        parse_described(&host.describe(&label_of(source), source)?, source)?
    };
    Ok(provider_from(meta, source, host))
}

fn provider_from(meta: Metadata, source: &Path, host: &dyn Describer) -> Provider {
    let provider = Provider::new(meta, source.to_owned(), host.path());
    if let Some(reason) = &provider.unsuitable {
        log::info!(
            "{} is not suitable here: {reason}",
            provider.qualified_name()
        );
    }
    provider
}

#[cfg(test)]
impl Registry {
    /// A registry of the given providers, for other modules' unit tests.
    pub(crate) fn of(providers: Vec<Provider>) -> Registry {
        Registry {
            providers,
            ..Registry::default()
        }
    }
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

    /// The data directories the providers were looked for in, in order
    /// (none for a registry not made by [`discover`]).
    pub fn data_dirs(&self) -> &[DataDir] {
        &self.data_dirs
    }

    /// All providers, suitable or not.
    pub fn providers(&self) -> &[Provider] {
        &self.providers
    }

    /// The model plugins found.
    pub fn plugins(&self) -> &[Plugin] {
        &self.plugins
    }

    /// Item types that clash with a provider's type or each other.
    pub fn plugin_clashes(&self) -> &[plugins::Clash] {
        &self.clashes
    }

    /// The provider, or the plugin item type (provider-shaped: it has no
    /// actions), a manifest's `query` names. A name both an item type's
    /// and a provider's (or two plugins') is refused, naming both files:
    /// the manifest could mean either.
    pub fn resolve_item(&self, query: &str) -> Result<&Provider> {
        if let Some(clash) = self.clashes.iter().find(|c| c.is_named(query)) {
            return Err(clash.error());
        }
        // An item type first: no provider has one's name (they would
        // clash), and a failed provider lookup builds a suggestion.
        if let Some(model) = self.model(query) {
            return Ok(model);
        }
        match self.resolve(query) {
            // A misspelt item type is suggested as a misspelt type is.
            Err(Error::UnknownProvider { .. }) => {
                Err(self.unknown(query, self.providers.iter().chain(&self.models)))
            }
            other => other,
        }
    }

    /// The provider (or plugin item type) a reference's type names. Puppet
    /// writes references with a capital (`User[carol]`,
    /// `Host::Etc_hosts[x]`): a type not found as written is looked for in
    /// its `reference_form`, as Puppet's own are case-insensitive; the
    /// error is the one for the type as written.
    pub fn resolve_reference(&self, type_query: &str) -> Result<&Provider> {
        match self.resolve_item(type_query) {
            Err(e) if reference_form(type_query) != type_query => self
                .resolve_item(&reference_form(type_query))
                .map_err(|_| e),
            other => other,
        }
    }

    /// `query` names none of `known`: the error, with the closest of
    /// their types and qualified names as a suggestion.
    fn unknown<'p>(&self, query: &str, known: impl Iterator<Item = &'p Provider>) -> Error {
        let names: Vec<String> = known
            .flat_map(|p| [p.type_name().to_owned(), p.qualified_name()])
            .collect();
        Error::UnknownProvider {
            query: query.to_owned(),
            suggestion: crate::suggest::did_you_mean(query, names.iter().map(String::as_str)),
            broken: self.broken,
        }
    }

    fn model(&self, query: &str) -> Option<&Provider> {
        self.models
            .iter()
            .find(|m| m.type_name() == query || m.qualified_name() == query)
    }

    /// The plugin whose item type `provider` is, if it is one.
    pub fn plugin_of(&self, provider: &Provider) -> Option<&Plugin> {
        if !provider.meta.actions.is_empty() {
            return None;
        }
        self.plugins
            .iter()
            .find(|p| p.program == provider.source && p.name() == provider.meta.name)
    }

    /// A copy in which each attribute of `marked` (a provider found by
    /// [`Registry::resolve_item`] and an attribute of it) is sensitive:
    /// a manifest that computes a value from a sensitive variable makes
    /// that attribute sensitive for the run, so the value is redacted
    /// wherever it goes; `secrets`, the texts of those variables, are
    /// redacted from what the marked providers say (a part of a value:
    /// a secret in a command's text, which the command prints alone).
    /// Types not found are left for the catalog to report.
    pub fn marking_sensitive(&self, marked: &[(String, String)], secrets: &[String]) -> Registry {
        let secrets = std::sync::Arc::new(secrets.to_vec());
        let mut copy = Registry {
            providers: self.providers.clone(),
            broken: self.broken,
            plugins: self.plugins.clone(),
            models: self.models.clone(),
            clashes: self.clashes.clone(),
            data_dirs: self.data_dirs.clone(),
        };
        for (type_query, attr) in marked {
            let Ok(found) = self.resolve_item(type_query) else {
                continue;
            };
            let (name, source) = (found.qualified_name(), found.source.clone());
            for provider in copy.providers.iter_mut().chain(copy.models.iter_mut()) {
                if provider.qualified_name() == name && provider.source == source {
                    provider.also_secret = secrets.clone();
                    if let Some(attribute) = provider.meta.attributes.get_mut(attr) {
                        if attribute.name != "name" {
                            attribute.sensitive = true;
                        }
                    }
                }
            }
        }
        copy
    }

    /// A registry of providers and plugins, as [`discover`] makes one.
    pub fn with_plugins(providers: Vec<Provider>, plugins: Vec<Plugin>) -> Registry {
        let (models, clashes) = plugins::models(&plugins, &providers);
        Registry {
            providers,
            broken: 0,
            plugins,
            models,
            clashes,
            data_dirs: Vec::new(),
        }
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
            ([], None) => Err(self.unknown(query, self.providers.iter())),
            (many, _) => Err(Error::AmbiguousType {
                query: query.to_owned(),
                candidates: many.iter().map(|p| p.qualified_name()).collect(),
            }),
        }
    }
}
