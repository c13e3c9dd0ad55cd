//! ral's private cache directory, where the bundled providers are written
//! out and the metadata cache lives: `$XDG_CACHE_HOME/ral`,
//! `$HOME/.cache/ral`, or a per-user directory in the system temporary
//! directory (a fresh one for the run when another user took that name).
//! Directories there are private to the user and refused when someone else
//! owns them or may write to them, since the scripts in them may run as
//! root.

use std::fs;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// ral's cache directory: `$XDG_CACHE_HOME/ral`, `$HOME/.cache/ral`, or a
/// per-user directory in the system temporary directory. Relative settings
/// are ignored, as they would depend on the working directory. Chosen once
/// per process.
pub fn cache_dir() -> PathBuf {
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(choose_cache_dir).clone()
}

/// A directory made for this run only (see [`choose_cache_dir`]).
static RUN_CACHE: std::sync::Mutex<Option<PathBuf>> = std::sync::Mutex::new(None);

fn choose_cache_dir() -> PathBuf {
    let from_env = |key: &str| {
        std::env::var_os(key)
            .map(PathBuf::from)
            .filter(|path| path.is_absolute())
    };
    if let Some(dir) = from_env("XDG_CACHE_HOME")
        .map(|cache| cache.join("ral"))
        .or_else(|| from_env("HOME").map(|home| home.join(".cache/ral")))
    {
        return dir;
    }
    let uid = rustix::process::geteuid().as_raw();
    let shared = std::env::temp_dir().join(format!("ral-{uid}"));
    // Anyone may create names in the temporary directory: when another
    // user took this one first (or made it writable to others), a fresh
    // private directory serves this run instead of failing it.
    let _ = fs::DirBuilder::new().mode(0o700).create(&shared);
    let refused = match check_private(&shared) {
        Ok(()) => return shared,
        Err(e) => e,
    };
    match tempfile::Builder::new()
        .prefix(&format!("ral-{uid}-"))
        .tempdir()
    {
        Ok(fresh) => {
            let fresh = fresh.keep();
            log::warn!(
                "not using {refused}; this run uses {} instead (set XDG_CACHE_HOME or HOME \
                 to keep a cache)",
                fresh.display()
            );
            *RUN_CACHE.lock().unwrap_or_else(|e| e.into_inner()) = Some(fresh.clone());
            fresh
        }
        Err(_) => shared,
    }
}

/// Removes the cache directory made for this run only, if one was (see
/// [`cache_dir`]); binaries call it before they exit.
pub fn remove_run_cache() {
    if let Some(dir) = RUN_CACHE.lock().unwrap_or_else(|e| e.into_inner()).take() {
        let _ = fs::remove_dir_all(dir);
    }
}

/// Creates `dir` (and its parents) private to this user if missing, and
/// refuses it, and ral's cache directory above it, when another user owns
/// them or may write to them.
pub fn private_dir(dir: &Path) -> Result<()> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| Error::io(format!("creating {}", dir.display()), e))?;
    check_private(&cache_dir())?;
    check_private(dir)
}

/// Refuses directories that another user owns or may write to.
pub fn check_private(dir: &Path) -> Result<()> {
    let meta = fs::symlink_metadata(dir)
        .map_err(|e| Error::io(format!("checking {}", dir.display()), e))?;
    let uid = rustix::process::geteuid().as_raw();
    if !meta.is_dir() || meta.uid() != uid || meta.permissions().mode() & 0o022 != 0 {
        return Err(Error::io(
            format!("{}: not a private directory of this user", dir.display()),
            std::io::Error::from(std::io::ErrorKind::PermissionDenied),
        ));
    }
    Ok(())
}
