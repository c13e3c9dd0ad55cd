//! What `ralsh` and `ral plan`/`ral apply` share at start: the host and the
//! providers their options ask for, and the parsers of those options.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::bundled;
use crate::discovery::{self, Registry};
use crate::host::{Host, HostConfig};
use crate::metadata_cache::MetadataCache;
use anyhow::{bail, Context};

/// The options that decide the host and the providers.
pub struct Setup<'a> {
    pub root: &'a Path,
    pub include: &'a [PathBuf],
    pub timeout: Duration,
    pub lock_timeout: Duration,
    pub strict: bool,
    pub no_cache: bool,
}

/// The metadata cache the options ask for.
pub fn cache_for(no_cache: bool) -> MetadataCache {
    if no_cache {
        MetadataCache::disabled()
    } else {
        MetadataCache::open()
    }
}

/// [`load_with`] the cache the options ask for, every type.
pub fn load(setup: &Setup) -> anyhow::Result<(Host, Registry)> {
    load_with(setup, &cache_for(setup.no_cache), None)
}

/// The host and the providers: the root, the data directories, and (when
/// `only_type` is given) that type's providers only.
pub fn load_with(
    setup: &Setup,
    cache: &MetadataCache,
    only_type: Option<&str>,
) -> anyhow::Result<(Host, Registry)> {
    let root = setup
        .root
        .canonicalize()
        .with_context(|| format!("--root {}", setup.root.display()))?;
    if !root.is_dir() {
        bail!("--root {}: not a directory", setup.root.display());
    }
    for dir in setup.include {
        if !dir.is_dir() {
            bail!("-I {}: no such directory", dir.display());
        }
        warn_if_nothing_there(dir);
    }
    // The Python toolkit is written out and checked only where a provider
    // may need it: not for a type whose providers are all bundled native
    // ones, with no other data directory.
    let others = !setup.include.is_empty()
        || std::env::var_os("RALSH_DATA_DIR").is_some_and(|dirs| !dirs.is_empty());
    let natives_only = !others && only_type.is_some_and(bundled::all_native);
    let provider_lib = match natives_only {
        true => None,
        false => bundled::provider_lib()
            .inspect_err(|e| log::warn!("the Python toolkit for providers is unavailable: {e}"))
            .ok(),
    };
    let host = Host::new(HostConfig {
        timeout: setup.timeout,
        root,
        strict: setup.strict,
        lock_timeout: setup.lock_timeout,
        provider_lib,
        remote: None,
    });
    // The bundled providers are not even written out when none has the
    // one type asked for.
    let bundled = match only_type.is_none_or(bundled::has_type) {
        false => None,
        true => bundled::data_dir()
            .inspect_err(|e| log::warn!("bundled providers are unavailable: {e}"))
            .ok(),
    };
    let dirs = discovery::data_dirs(setup.include, std::env::var_os("RALSH_DATA_DIR"), bundled);
    let registry = discovery::discover(&host, &dirs, cache, only_type);
    // An interrupted discovery found nothing; that is not to be shown.
    crate::process::exit_if_interrupted();
    Ok((host, registry))
}

const LEVELS: [&str; 6] = ["off", "error", "warn", "info", "debug", "trace"];

/// An option's value that is refused (clap prints it after the option).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadOptionValue {
    #[error(
        "'{0}' is not a log level: use one of {levels}, or TARGET=LEVEL pairs and a level, \
         comma-separated",
        levels = LEVELS.join(", ")
    )]
    LogLevel(String),
    #[error("'{0}' is not a number of seconds")]
    NotSeconds(String),
    #[error("'{text}' must be {allowed}")]
    OutOfRange { text: String, allowed: &'static str },
}

/// A log level, or env_logger directives whose levels are all known words
/// (a misspelt level would otherwise silently read as a module name).
pub fn parse_log_level(text: &str) -> Result<String, BadOptionValue> {
    let known = |level: &str| LEVELS.contains(&level.to_ascii_lowercase().as_str());
    let valid = !text.is_empty()
        && text
            .split(',')
            .all(|directive| match directive.split_once('=') {
                Some((target, level)) => !target.is_empty() && known(level),
                None => known(directive),
            });
    if valid {
        Ok(text.to_owned())
    } else {
        Err(BadOptionValue::LogLevel(text.to_owned()))
    }
}

/// `--timeout`: more than 0 seconds, at most a year.
pub fn parse_timeout(text: &str) -> Result<Duration, BadOptionValue> {
    seconds_in(
        text,
        |s| s > 0.0 && s <= 86_400.0 * 365.0,
        "a positive number of seconds",
    )
}

/// `--lock-timeout`: 0 (do not wait) to a day.
pub fn parse_lock_timeout(text: &str) -> Result<Duration, BadOptionValue> {
    seconds_in(
        text,
        |s| (0.0..=86_400.0).contains(&s),
        "from 0 to 86400 seconds",
    )
}

/// `--persist`: 0 (close at the end) to a day.
pub fn parse_persist(text: &str) -> Result<Duration, BadOptionValue> {
    parse_lock_timeout(text)
}

fn seconds_in(
    text: &str,
    allowed: impl Fn(f64) -> bool,
    said: &'static str,
) -> Result<Duration, BadOptionValue> {
    let seconds: f64 = text
        .parse()
        .map_err(|_| BadOptionValue::NotSeconds(text.to_owned()))?;
    if !allowed(seconds) {
        return Err(BadOptionValue::OutOfRange {
            text: text.to_owned(),
            allowed: said,
        });
    }
    Ok(Duration::from_secs_f64(seconds))
}

/// Says so, once a run, when a directory given with `-I` holds neither
/// `providers/` nor `plugins/`, where ral looks: most often it is the
/// `providers/` directory itself, given instead of the one above it.
fn warn_if_nothing_there(dir: &Path) {
    static WARNED: std::sync::Once = std::sync::Once::new();
    if dir.join("providers").is_dir() || dir.join("plugins").is_dir() {
        return;
    }
    let holds_providers = std::fs::read_dir(dir).is_ok_and(|entries| {
        entries
            .filter_map(Result::ok)
            .any(|entry| entry.path().extension().is_some_and(|ext| ext == "prov"))
    });
    let shown = crate::text::escaped(&dir.display().to_string());
    WARNED.call_once(|| match holds_providers {
        true => log::warn!(
            "-I {shown}: it holds .prov files, but ral looks for them in a providers/ \
             directory below the one given: give the directory above it"
        ),
        false => log::warn!("-I {shown}: no providers/ or plugins/ directory in it"),
    });
}
