//! Custom facts, as Facter's external facts: each data directory may
//! hold a `facts.d/` beside its `providers/`, whose files each give
//! facts by name:
//!
//! - `NAME.yaml`, `NAME.yml`: a YAML mapping of facts (values of any
//!   shape, typed as YAML 1.2's core schema types them);
//! - `NAME.json`: a JSON object of facts;
//! - `NAME.txt`: `key=value` lines (blank lines and `#` comments aside);
//! - any other executable file: a program run without arguments that
//!   prints a JSON or YAML mapping, or `key=value` lines. It runs as a
//!   provider does (argv only, no shell; the scrubbed environment with
//!   `RALSH_ROOT_DIR`, the time limit, bounded output, its process group
//!   ended at the limit), on the host whose facts they are: on a remote
//!   target, its copy there.
//!
//! The static files are read where ral runs. An earlier data directory's
//! fact wins over a later one's, and within a directory the file first by
//! name; custom facts win over core facts of the same top-level name. A
//! file that cannot be read or parsed is skipped with a warning naming it
//! (and the line, where known); it never stops the others.

use std::path::{Path, PathBuf};

use marked_yaml::types::Node;
use serde_json::Value as Json;

use crate::bounded_read::{self, Links};
use crate::discovery::DataDir;
use crate::error::Error;
use crate::invoke::{Invocation, Runner};
use crate::metadata::Action;
use crate::process::Budget;
use crate::sdk::facts::Facts;
use crate::text::escape;
use crate::yaml_doc;

/// The directory of custom facts in a data directory.
pub const FACTS_DIR: &str = "facts.d";

/// The most bytes of a static file, and of a program's output.
const MAX_BYTES: usize = 1 << 20;

/// The deepest nesting of a YAML file.
const MAX_DEPTH: usize = 32;

/// Why a file's facts were skipped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The line (1-based), where known.
    pub line: Option<usize>,
    pub message: String,
}

impl Problem {
    fn at(line: usize, message: impl Into<String>) -> Problem {
        Problem {
            line: Some(line),
            message: message.into(),
        }
    }

    fn whole(message: impl Into<String>) -> Problem {
        Problem {
            line: None,
            message: message.into(),
        }
    }
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.line {
            Some(line) => write!(f, "line {line}: {}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

/// The `facts.d` directories of `data_dirs` that exist, in their order.
/// The bundled directory holds only what the binary built in: none.
pub fn dirs(data_dirs: &[DataDir]) -> Vec<PathBuf> {
    data_dirs
        .iter()
        .filter_map(|dir| match dir {
            DataDir::Given(path) => Some(path.join(FACTS_DIR)),
            DataDir::Bundled(_) => None,
        })
        .filter(|dir| dir.is_dir())
        .collect()
}

/// What a file of `facts.d` is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FileKind {
    Yaml,
    Json,
    Text,
    Program,
}

/// The kind of `path` by its name and mode: `None` for a file that gives
/// no facts (hidden, not regular, neither named as data nor executable).
fn kind_of(path: &Path) -> Option<FileKind> {
    let name = path.file_name()?.to_string_lossy();
    if name.starts_with('.') {
        return None;
    }
    let meta = std::fs::metadata(path).ok()?;
    if !meta.is_file() {
        return None;
    }
    let extension = path.extension().map(|e| e.to_string_lossy().to_lowercase());
    match extension.as_deref() {
        Some("yaml" | "yml") => Some(FileKind::Yaml),
        Some("json") => Some(FileKind::Json),
        Some("txt") => Some(FileKind::Text),
        _ => {
            use std::os::unix::fs::PermissionsExt;
            (meta.permissions().mode() & 0o111 != 0).then_some(FileKind::Program)
        }
    }
}

/// The custom facts of `dirs` (see the module's documentation), the
/// programs run by `runner`: the host whose facts they are, whose
/// `target` name (none here) starts its warnings.
pub fn read(runner: &dyn Runner, dirs: &[PathBuf], target: Option<&str>) -> Facts {
    let on = target.map_or(String::new(), |name| format!("{name}: "));
    let mut facts = Facts::new();
    let started = std::time::Instant::now();
    for dir in dirs {
        let mut files: Vec<PathBuf> = match std::fs::read_dir(dir) {
            Ok(entries) => entries.flatten().map(|entry| entry.path()).collect(),
            Err(e) => {
                log::warn!("{on}custom facts: {}: {e}; skipped", dir.display());
                continue;
            }
        };
        files.sort();
        for file in files {
            let Some(kind) = kind_of(&file) else {
                log::debug!("custom facts: {} gives no facts", file.display());
                continue;
            };
            if kind == FileKind::Program && started.elapsed() > PROGRAMS_BUDGET {
                log::warn!(
                    "{on}custom facts: {}: not run: the custom facts took more than {} s \
                     already",
                    file.display(),
                    PROGRAMS_BUDGET.as_secs()
                );
                continue;
            }
            match read_file(runner, &file, kind) {
                Ok(found) => {
                    for (name, value) in found {
                        if facts.contains_key(&name) {
                            log::debug!(
                                "custom facts: {}: '{}' is given before; this one is not used",
                                file.display(),
                                escape(&name)
                            );
                            continue;
                        }
                        facts.insert(name, value);
                    }
                }
                Err(why) => {
                    // A call's error on a target starts with its name.
                    let why = why.to_string();
                    let why = why.strip_prefix(&on).unwrap_or(&why);
                    let why = shortened(why);
                    log::warn!(
                        "{on}custom facts: {}: {why}; its facts are skipped",
                        file.display()
                    )
                }
            }
        }
    }
    facts
}

/// How long the programs of one host's custom facts may take together:
/// once past it, the ones left are not run (each one is bounded by the
/// call's time limit).
const PROGRAMS_BUDGET: std::time::Duration = std::time::Duration::from_secs(60);

/// The longest reason a warning quotes.
const MAX_QUOTED: usize = 400;

/// `why`, cut to [`MAX_QUOTED`] bytes (at a character's boundary).
fn shortened(why: &str) -> String {
    if why.len() <= MAX_QUOTED {
        return why.to_owned();
    }
    let mut end = MAX_QUOTED;
    while !why.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}... ({} bytes in all)", &why[..end], why.len())
}

/// The facts of one file.
fn read_file(runner: &dyn Runner, file: &Path, kind: FileKind) -> Result<Facts, Problem> {
    if kind == FileKind::Program {
        return run(runner, file).and_then(|output| parse_output(&output));
    }
    let bytes = bounded_read::read_file(file, MAX_BYTES, Links::Follow)
        .map_err(|e| Problem::whole(format!("cannot be read: {e}")))?;
    let text = String::from_utf8(bytes).map_err(|_| Problem::whole("is not UTF-8 text"))?;
    match kind {
        FileKind::Yaml => parse_yaml(&text),
        FileKind::Json => parse_json(&text),
        _ => parse_text(&text),
    }
}

/// Runs the program `file` on the runner's host; its output.
fn run(runner: &dyn Runner, file: &Path) -> Result<String, Problem> {
    let mut output = String::new();
    let invocation = Invocation {
        max_line: MAX_BYTES,
        max_answer: MAX_BYTES,
        ..Invocation::plain(Action::Plugin("custom facts"), Vec::new())
    };
    let label = file.display().to_string();
    let ran = runner.run(
        &label,
        file,
        invocation,
        &mut |line| {
            output.push_str(line);
            output.push('\n');
            Ok(Budget::Continue)
        },
        &mut || Ok(()),
    );
    match ran {
        Ok(_) => Ok(output),
        // The error names the file (after the target's name, on one),
        // which the warning names already.
        Err(e) => {
            let message = e.to_string();
            let named = format!("{label}: ");
            let message = match (&e, message.find(&named)) {
                (Error::Interrupted { .. }, _) | (_, None) => message,
                (_, Some(at)) => format!("{}{}", &message[..at], &message[at + named.len()..]),
            };
            Err(Problem::whole(message))
        }
    }
}

/// A YAML file's facts: one mapping.
pub fn parse_yaml(text: &str) -> Result<Facts, Problem> {
    if no_content(text) {
        return Ok(Facts::new());
    }
    if let Some((line, message)) = yaml_doc::shape_problem(text, "a facts file", MAX_DEPTH) {
        return Err(Problem::at(line, message));
    }
    let options = marked_yaml::LoaderOptions::default()
        .error_on_duplicate_keys(true)
        .prevent_coercion(true)
        .toplevel_mapping();
    let root = marked_yaml::parse_yaml_with_options(0, text, options).map_err(|e| {
        let (line, message) = yaml_doc::load_problem(e, "a facts file is a mapping of facts");
        Problem::at(line, message)
    })?;
    let Node::Mapping(map) = root else {
        return Err(Problem::at(1, "a facts file is a mapping of facts"));
    };
    let mut facts = Facts::new();
    for (key, value) in map.iter() {
        let name = key.as_str();
        if name.is_empty() {
            return Err(Problem::at(
                yaml_doc::line_of(key),
                "a fact's name is empty",
            ));
        }
        facts.insert(name.to_owned(), yaml_doc::typed_json(value));
    }
    Ok(facts)
}

/// Whether a YAML text holds only blank lines, comments and markers.
fn no_content(text: &str) -> bool {
    text.lines()
        .map(str::trim)
        .all(|line| line.is_empty() || line.starts_with('#') || line == "---" || line == "...")
}

/// A JSON file's facts: one object.
pub fn parse_json(text: &str) -> Result<Facts, Problem> {
    match serde_json::from_str::<Json>(text) {
        Ok(Json::Object(facts)) => Ok(facts),
        Ok(_) => Err(Problem::at(1, "a facts file is an object of facts")),
        Err(e) => {
            let shown = e.to_string();
            let message = shown
                .rsplit_once(" at line ")
                .map_or(shown.as_str(), |(message, _)| message);
            Err(Problem::at(e.line(), format!("invalid JSON: {message}")))
        }
    }
}

/// A text file's facts: `key=value` lines; blank lines and `#` comments
/// are skipped, a key is trimmed and a value kept as written.
pub fn parse_text(text: &str) -> Result<Facts, Problem> {
    let mut facts = Facts::new();
    for (index, line) in text.lines().enumerate() {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.trim().is_empty() || line.trim_start().starts_with('#') {
            continue;
        }
        match line.split_once('=') {
            Some((key, value)) if !key.trim().is_empty() => {
                facts.insert(key.trim().to_owned(), Json::from(value));
            }
            _ => {
                return Err(Problem::at(
                    index + 1,
                    format!("'{}' is not key=value", escape(line)),
                ))
            }
        }
    }
    Ok(facts)
}

/// A program's facts, as Facter reads them: a JSON or YAML mapping, else
/// `key=value` lines.
pub fn parse_output(text: &str) -> Result<Facts, Problem> {
    if text.trim_start().starts_with('{') {
        return parse_json(text);
    }
    if let Ok(facts) = parse_yaml(text) {
        return Ok(facts);
    }
    parse_text(text).map_err(|problem| Problem {
        message: format!(
            "{} (the output is neither a JSON or YAML mapping nor key=value lines)",
            problem.message
        ),
        ..problem
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_reason_is_cut_in_a_warning() {
        let long = "é".repeat(1000);
        let cut = shortened(&long);
        assert!(cut.len() < 500, "{}", cut.len());
        assert!(cut.ends_with("... (2000 bytes in all)"), "{cut}");
        assert_eq!(shortened("short"), "short");
    }
    use serde_json::json;

    #[test]
    fn yaml_files_are_mappings_of_typed_values() {
        let facts = parse_yaml(
            "---\n# custom\nrole: web\nport: 8080\nenabled: true\nratio: 0.5\nnothing: ~\n\
             quoted: '8080'\nnested:\n  list: [a, 2]\n  map: {k: v}\n",
        )
        .unwrap();
        assert_eq!(
            Json::Object(facts),
            json!({"role": "web", "port": 8080, "enabled": true, "ratio": 0.5, "nothing": null,
                   "quoted": "8080", "nested": {"list": ["a", 2], "map": {"k": "v"}}})
        );
        assert_eq!(parse_yaml("# nothing\n").unwrap(), Facts::new());
        let problem = |text: &str| parse_yaml(text).unwrap_err();
        assert_eq!(problem("a: 1\na: 2\n").line, Some(2));
        assert!(problem("a: 1\na: 2\n")
            .message
            .contains("'a' is given twice"));
        assert_eq!(problem("- a\n- b\n").line, Some(1));
        assert!(problem("- a\n").message.contains("a mapping of facts"));
        assert_eq!(problem("a: 1\nb: [\n").line.map(|l| l >= 2), Some(true));
        assert_eq!(problem("a: 1\n---\nb: 2\n").line, Some(2));
        assert_eq!(problem("a: &x 1\nb: *x\n").line, Some(1));
    }

    #[test]
    fn json_files_are_objects() {
        assert_eq!(
            Json::Object(parse_json("{\"a\": {\"b\": [1, null]}}").unwrap()),
            json!({"a": {"b": [1, null]}})
        );
        let broken = parse_json("{\n\"a\": 1,\n}\n").unwrap_err();
        assert_eq!(broken.line, Some(3));
        assert!(broken.message.starts_with("invalid JSON: "), "{broken}");
        assert!(!broken.message.contains("at line"), "{broken}");
        assert_eq!(parse_json("[1]").unwrap_err().line, Some(1));
    }

    #[test]
    fn text_files_are_key_value_lines() {
        let facts = parse_text("# comment\n\nrole=web\r\n spaced = a = b \nempty=\n").unwrap();
        assert_eq!(
            Json::Object(facts),
            json!({"role": "web", "spaced": " a = b ", "empty": ""})
        );
        let problem = parse_text("a=1\nno equals sign\n").unwrap_err();
        assert_eq!(
            problem.to_string(),
            "line 2: 'no equals sign' is not key=value"
        );
        assert_eq!(parse_text("=x\n").unwrap_err().line, Some(1));
    }

    #[test]
    fn program_output_is_json_yaml_or_key_value_lines() {
        let json_out = parse_output("{\"a\": [1]}\n").unwrap();
        assert_eq!(Json::Object(json_out), json!({"a": [1]}));
        let yaml_out = parse_output("a: 1\nb:\n  c: d\n").unwrap();
        assert_eq!(Json::Object(yaml_out), json!({"a": 1, "b": {"c": "d"}}));
        let lines = parse_output("a=1\nb=x: y\n").unwrap();
        assert_eq!(Json::Object(lines), json!({"a": "1", "b": "x: y"}));
        assert_eq!(parse_output("").unwrap(), Facts::new());
        let bad = parse_output("a=1\nwhat\n").unwrap_err();
        assert_eq!(bad.line, Some(2));
        assert!(
            bad.message.contains("neither a JSON or YAML mapping"),
            "{bad}"
        );
        assert!(parse_output("{broken")
            .unwrap_err()
            .message
            .contains("invalid JSON"));
    }

    #[test]
    fn files_are_told_apart_by_name_and_mode() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let file = |name: &str, mode: u32| {
            let path = dir.path().join(name);
            std::fs::write(&path, "").unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
            kind_of(&path)
        };
        assert_eq!(file("a.yaml", 0o644), Some(FileKind::Yaml));
        assert_eq!(file("a.YML", 0o755), Some(FileKind::Yaml));
        assert_eq!(file("a.json", 0o644), Some(FileKind::Json));
        assert_eq!(file("a.txt", 0o644), Some(FileKind::Text));
        assert_eq!(file("a.sh", 0o755), Some(FileKind::Program));
        assert_eq!(file("run", 0o700), Some(FileKind::Program));
        assert_eq!(file("README", 0o644), None);
        assert_eq!(file(".hidden.yaml", 0o644), None);
        std::fs::create_dir(dir.path().join("sub.yaml")).unwrap();
        assert_eq!(kind_of(&dir.path().join("sub.yaml")), None);
    }

    #[test]
    fn only_given_data_directories_with_a_facts_dir_count() {
        let a = tempfile::tempdir().unwrap();
        let b = tempfile::tempdir().unwrap();
        std::fs::create_dir(a.path().join(FACTS_DIR)).unwrap();
        std::fs::create_dir(b.path().join(FACTS_DIR)).unwrap();
        let data = [
            DataDir::Given(b.path().to_owned()),
            DataDir::Given(a.path().join("missing")),
            DataDir::Bundled(a.path().to_owned()),
            DataDir::Given(a.path().to_owned()),
        ];
        assert_eq!(
            dirs(&data),
            [b.path().join(FACTS_DIR), a.path().join(FACTS_DIR)]
        );
    }
}
