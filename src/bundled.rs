//! The providers shipped inside the binary.
//!
//! They are embedded at build time and written out on first use to a cache
//! directory named after the crate version and a digest of their contents
//! (`$XDG_CACHE_HOME/ral/bundled-VERSION-DIGEST`, or under `~/.cache`), so a
//! binary that was installed and moved still finds them, and an upgraded
//! binary never runs stale scripts. The directory is private to the user
//! (0700) and is rejected if someone else owns it or can write to it, since
//! its scripts may run as root.

use std::fs;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

mod embedded {
    include!(concat!(env!("OUT_DIR"), "/bundled_providers.rs"));
}

const COMPLETE_MARKER: &str = ".complete";

/// The names of the embedded provider files.
pub fn file_names() -> impl Iterator<Item = &'static str> {
    embedded::FILES.iter().map(|(name, _)| *name)
}

/// The base directory for caches: `$XDG_CACHE_HOME`, `$HOME/.cache`, or the
/// system temporary directory.
fn cache_base() -> PathBuf {
    let from_env = |key: &str| {
        std::env::var_os(key)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    from_env("XDG_CACHE_HOME")
        .or_else(|| from_env("HOME").map(|home| home.join(".cache")))
        .unwrap_or_else(std::env::temp_dir)
}

/// Returns the data directory holding the bundled providers, writing them out
/// first when needed.
pub fn data_dir() -> Result<PathBuf> {
    let parent = cache_base().join("ral");
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&parent)
        .map_err(|e| Error::io(format!("creating {}", parent.display()), e))?;
    check_private(&parent)?;
    let name = format!("bundled-{}-{}", env!("CARGO_PKG_VERSION"), embedded::DIGEST);
    let target = parent.join(&name);
    if target.join(COMPLETE_MARKER).exists() {
        check_private(&target)?;
        return Ok(target);
    }
    // Write into a fresh directory and rename it into place, so a reader
    // never sees a half-written set and concurrent first runs do not clash.
    let staging = parent.join(format!(".{name}.{}", std::process::id()));
    let _ = fs::remove_dir_all(&staging);
    write_all(&staging).map_err(|e| {
        Error::io(
            format!("writing bundled providers to {}", staging.display()),
            e,
        )
    })?;
    match fs::rename(&staging, &target) {
        Ok(()) => Ok(target),
        Err(_) if target.join(COMPLETE_MARKER).exists() => {
            // Another process finished first; its copy is identical.
            let _ = fs::remove_dir_all(&staging);
            check_private(&target)?;
            Ok(target)
        }
        Err(e) => {
            let _ = fs::remove_dir_all(&staging);
            Err(Error::io(
                format!("moving bundled providers to {}", target.display()),
                e,
            ))
        }
    }
}

fn write_all(staging: &Path) -> std::io::Result<()> {
    let providers = staging.join("providers");
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&providers)?;
    for (name, contents) in embedded::FILES {
        let mode = if name.ends_with(".prov") {
            0o700
        } else {
            0o600
        };
        let mut file = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(providers.join(name))?;
        file.write_all(contents)?;
        file.sync_all()?;
    }
    fs::File::create(staging.join(COMPLETE_MARKER))?;
    Ok(())
}

/// Refuses directories that another user owns or may write to.
fn check_private(dir: &Path) -> Result<()> {
    let meta = fs::symlink_metadata(dir)
        .map_err(|e| Error::io(format!("checking {}", dir.display()), e))?;
    // SAFETY: geteuid has no preconditions and cannot fail.
    let uid = unsafe { libc::geteuid() };
    if !meta.is_dir() || meta.uid() != uid || meta.permissions().mode() & 0o022 != 0 {
        return Err(Error::io(
            format!("{}: not a private directory of this user", dir.display()),
            std::io::Error::from(std::io::ErrorKind::PermissionDenied),
        ));
    }
    Ok(())
}
