//! Reading `etc/holorc.d/*` and `etc/holorc`, and turning each `plugin`
//! line into a [`Plugin`]: its binary checked, its `info` run and its API
//! version range checked, its resource directory required, its state and
//! cache directories created. Messages are Holo's, word for word.

use std::path::Path;

use super::output::Printer;
use super::paths::join;
use super::plugin::{exit_text, os_text, Operation, Phase, Plugin, Runner, API_VERSION};
use super::stop::Stop;

/// Loads every configured plugin, running `info` for each as its line is
/// read (as Holo does).
pub fn load(runner: &Runner, cache: &str, printer: &mut Printer) -> Result<Vec<Plugin>, Stop> {
    let lines = read_lines(&runner.root, printer)?;
    let mut plugins = Vec::new();
    for line in lines {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let Some(spec) = line.strip_prefix("plugin ") else {
            printer.error(&format!(
                "cannot parse configuration: unknown command: {line}"
            ));
            return Err(Stop(255));
        };
        let spec = spec.trim();
        let (id, binary) = match spec.split_once('=') {
            Some((id, binary)) => (id.to_owned(), binary.to_owned()),
            None => (
                spec.to_owned(),
                join(&runner.root, &format!("usr/lib/holo/holo-{spec}")),
            ),
        };
        match std::fs::metadata(&binary) {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                printer.error(&format!("{binary}: file not found"));
                printer.warning(&format!("Skipping plugin: {spec}"));
                continue;
            }
            Err(e) => {
                printer.error(&format!("stat {binary}: {}", os_text(&e)));
                return Err(Stop(255));
            }
        }
        let plugin = Plugin::new(&id, &binary, &runner.root, cache);
        check_info(runner, &plugin, printer)?;
        plugins.push(plugin);
    }
    prepare_directories(&plugins, printer)?;
    Ok(plugins)
}

/// Every regular (non-directory) entry of holorc.d, sorted by path, then
/// holorc; each file trimmed and split into lines.
fn read_lines(root: &str, printer: &mut Printer) -> Result<Vec<String>, Stop> {
    let snippets = join(root, "etc/holorc.d");
    let mut files = Vec::new();
    match std::fs::read_dir(&snippets) {
        Ok(entries) => {
            for entry in entries {
                let entry = entry.map_err(|e| {
                    printer.error(&format!("readdirent {snippets}: {}", os_text(&e)));
                    Stop(255)
                })?;
                let is_dir = entry.file_type().map(|t| t.is_dir()).unwrap_or(false);
                if !is_dir {
                    files.push(join(&snippets, &entry.file_name().to_string_lossy()));
                }
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => {
            // Go opens the directory first and fails only when reading it.
            let op = if e.raw_os_error() == Some(libc::ENOTDIR) {
                "readdirent"
            } else {
                "open"
            };
            printer.error(&format!("{op} {snippets}: {}", os_text(&e)));
            return Err(Stop(255));
        }
    }
    files.sort();
    files.push(join(root, "etc/holorc"));
    let mut lines = Vec::new();
    for file in files {
        let text = std::fs::read(&file).map_err(|e| {
            let op = if e.raw_os_error() == Some(libc::EISDIR) {
                "read"
            } else {
                "open"
            };
            printer.error(&format!("cannot read {file}: {op} {file}: {}", os_text(&e)));
            Stop(255)
        })?;
        let text = String::from_utf8_lossy(&text);
        lines.extend(text.trim().split('\n').map(str::to_owned));
    }
    Ok(lines)
}

/// Runs `info` and checks the plugin's API version range.
fn check_info(runner: &Runner, plugin: &Plugin, printer: &mut Printer) -> Result<(), Stop> {
    let (ended, stdout) = runner
        .run(plugin, Operation::whole("info", Phase::Info), printer, None)
        .map_err(|error| {
            printer.error(&error.to_string());
            Stop(255)
        })?;
    if !ended.success() {
        printer.error(&exit_text(&ended));
        return Err(Stop(255));
    }
    let stdout = String::from_utf8_lossy(&stdout);
    let mut min = "";
    let mut max = "";
    for line in stdout.split('\n') {
        match line.split_once('=') {
            Some(("MIN_API_VERSION", value)) => min = value,
            Some(("MAX_API_VERSION", value)) => max = value,
            _ => {}
        }
    }
    let min = parse_version(min, printer)?;
    let max = parse_version(max, printer)?;
    if min > API_VERSION || max < API_VERSION {
        printer.error(&format!(
            "plugin holo-{} is incompatible with this Holo (plugin min: {min}, plugin max: {max}, Holo: {API_VERSION})",
            plugin.id
        ));
        return Err(Stop(255));
    }
    Ok(())
}

/// An integer as Go's `strconv.Atoi` reads it, with its error text.
fn parse_version(text: &str, printer: &mut Printer) -> Result<i64, Stop> {
    let digits = text.strip_prefix(['+', '-']).unwrap_or(text);
    let problem = if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        "invalid syntax"
    } else {
        match text.parse::<i64>() {
            Ok(value) => return Ok(value),
            Err(_) => "value out of range",
        }
    };
    printer.error(&format!("strconv.Atoi: parsing {text:?}: {problem}"));
    Err(Stop(255))
}

/// Requires every static resource directory, then creates the cache and
/// state directories; reports every problem before stopping.
fn prepare_directories(plugins: &[Plugin], printer: &mut Printer) -> Result<(), Stop> {
    let mut failed = false;
    for plugin in plugins {
        let dir = &plugin.static_dir;
        match std::fs::metadata(dir) {
            Ok(meta) if meta.is_dir() => {}
            Ok(_) => {
                printer.error(&format!("cannot open {dir}: not a directory!"));
                failed = true;
            }
            Err(e) => {
                printer.error(&format!("cannot open {dir}: stat {dir}: {}", os_text(&e)));
                failed = true;
            }
        }
    }
    if failed {
        return Err(Stop(255));
    }
    for plugin in plugins {
        for dir in [&plugin.cache_dir, &plugin.state_dir] {
            if let Err(e) = std::fs::create_dir_all(Path::new(dir)) {
                printer.error(&format!("mkdir {dir}: {}", os_text(&e)));
                failed = true;
            }
        }
    }
    if failed {
        Err(Stop(255))
    } else {
        Ok(())
    }
}
