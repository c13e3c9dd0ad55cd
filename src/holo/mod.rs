//! A host for Holo plugins that behaves like Holo's own `holo` command
//! (`scan`, `diff`, `apply [--force]`), so `ral holo` can replace it:
//! holorc parsing, plugin `info` and version checks, generators and the
//! virtual resource directory, the scan report, selectors, the apply lock,
//! file descriptor 3 messages, diffs through git, and Holo's output layout
//! and exit codes. Beyond Holo: `--json`, `apply --noop`, `--strict`, a
//! time limit per plugin call, and cleanup on Ctrl-C.
//!
//! Plugins run through the process module like providers (own process
//! group, time limit, nothing left running), but with the caller's
//! environment plus the `HOLO_*` variables and the caller's working
//! directory, as Holo runs them.
//!
//! [`run`] is the body of the `holo` command, and acts for the binary on
//! a forwarded signal: a plugin run it interrupted ends the process by it
//! at once, before anything reports the run as failed, and so does one
//! noted between runs, at the next check.

mod apply;
mod config;
mod diff;
mod options;
mod output;
mod paths;
mod plugin;
mod resources;
mod scan;
mod session;
mod stop;
mod streams;

pub use options::{Op, Options, ScanFormat};
pub use stop::Stop;

use output::Printer;
use plugin::Runner;
use resources::Resources;
use session::Session;

/// Runs one command and returns the exit code. The cache directory is
/// removed on every way out, including a forwarded Ctrl-C (for which the
/// binary calls [`crate::process::forward_interrupts_deferred`], and
/// [`crate::process::exit_if_interrupted`] after this returns).
pub fn run(options: &Options) -> i32 {
    let mut printer = Printer::new();
    if options.json {
        // stdout carries the JSON document alone.
        printer.tracked_stdout_to_stderr();
    }
    let (Some(root), Some(tmp)) = (
        env_path(&mut printer, "HOLO_ROOT_DIR", "/"),
        env_path(&mut printer, "TMPDIR", "/tmp"),
    ) else {
        return 255;
    };
    let cache = match CacheDir::create(&tmp) {
        Ok(cache) => cache,
        Err(e) => {
            printer.error(&format!("mkdirtemp {tmp}/holo.*: {}", plugin::os_text(&e)));
            return 255;
        }
    };
    let cache_text = cache.text.clone();
    let runner = Runner {
        root,
        base_env: std::env::vars_os().collect(),
        timeout: options.timeout,
    };
    let code = match run_in_cache(runner, &cache_text, options, &mut printer) {
        Ok(code) | Err(Stop(code)) => code,
    };
    drop(cache);
    code
}

/// A path from the environment, or `default` when unset or empty. One that
/// is not UTF-8 is an error rather than a silent fall-back to the default.
fn env_path(printer: &mut Printer, name: &str, default: &str) -> Option<String> {
    match std::env::var_os(name) {
        None => Some(default.to_owned()),
        Some(value) if value.is_empty() => Some(default.to_owned()),
        Some(value) => match value.into_string() {
            Ok(text) => Some(text),
            Err(_) => {
                printer.error(&format!("{name} is not valid UTF-8"));
                None
            }
        },
    }
}

/// The run's cache directory, `TMPDIR/holo.NUMBER` (mode 0700) as Holo
/// names it; removed when dropped, and by a forwarded signal.
struct CacheDir {
    /// The path as Holo prints it: `TMPDIR/holo.NUMBER`, not cleaned.
    text: String,
}

impl CacheDir {
    fn create(tmp: &str) -> std::io::Result<CacheDir> {
        use std::hash::{BuildHasher, Hasher};
        use std::os::unix::fs::DirBuilderExt;
        for attempt in 0u32..10_000 {
            let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
            hasher.write_u32(attempt);
            hasher.write_u32(std::process::id());
            let text = format!("{tmp}/holo.{}", hasher.finish() as u32);
            match std::fs::DirBuilder::new().mode(0o700).create(&text) {
                Ok(()) => {
                    crate::process::remove_on_interrupt(std::path::Path::new(&text));
                    return Ok(CacheDir { text });
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            }
        }
        Err(std::io::Error::from_raw_os_error(libc::EEXIST))
    }
}

impl Drop for CacheDir {
    fn drop(&mut self) {
        let path = std::path::Path::new(&self.text);
        crate::process::keep_on_interrupt(path);
        let _ = std::fs::remove_dir_all(path);
    }
}

fn run_in_cache(
    runner: Runner,
    cache: &str,
    options: &Options,
    printer: &mut Printer,
) -> Result<i32, Stop> {
    let plugins = config::load(&runner, cache, printer)?;
    crate::process::exit_if_interrupted();
    let resources = Resources::build(&runner, cache, printer)?;
    let mut session = Session {
        runner,
        printer: std::mem::take(printer),
        plugins,
        resources,
    };
    let result = session.run(options);
    *printer = std::mem::take(&mut session.printer);
    result
}
