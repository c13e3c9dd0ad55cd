//! `ral holo` against Holo-style test cases: each directory under
//! tests/fixtures/holo/cases holds a fake root (`tree/`), the commands to
//! run (`commands`), the expected transcript (`expected-output`: each
//! command, its combined stdout and stderr, its exit status) and the
//! expected final tree (`expected-tree`). The commands run in a scratch
//! directory with `HOLO_ROOT_DIR=./target/` (a copy of the tree) and
//! `TMPDIR=./target/tmp`, as Holo's own test runner does; the plugins of
//! tests/fixtures/holo/plugins are copied to `target/usr/lib/holo`, and
//! `target/{tmp,run,usr/share/holo/generators}` are created when missing.
//!
//! `RAL_BLESS=1 cargo test --test holo` writes the expected files from the
//! actual results instead of comparing (review the diff before committing).

use std::fmt::Write as _;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/holo")
}

/// Copies a tree, keeping symlinks as links and file modes.
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    let mut entries: Vec<_> = std::fs::read_dir(from)
        .unwrap()
        .map(|e| e.unwrap())
        .collect();
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let kind = entry.file_type().unwrap();
        let target = to.join(entry.file_name());
        if kind.is_dir() {
            copy_tree(&entry.path(), &target);
        } else if kind.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(entry.path()).unwrap(), &target).unwrap();
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// A listing of the tree: directories, links with their targets, files
/// with their mode and content. Placeholder `.keep` files are left out.
fn dump_tree(dir: &Path, prefix: &str, out: &mut String) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .collect();
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let name = entry.file_name().to_string_lossy().into_owned();
        let path = format!("{prefix}{name}");
        if path == "usr/lib/holo" || name == ".keep" {
            continue;
        }
        let kind = entry.file_type().unwrap();
        if kind.is_dir() {
            writeln!(out, "dir  {path}").unwrap();
            dump_tree(&entry.path(), &format!("{path}/"), out);
        } else if kind.is_symlink() {
            let link = std::fs::read_link(entry.path()).unwrap();
            writeln!(out, "link {path} -> {}", link.display()).unwrap();
        } else {
            let mode = entry.metadata().unwrap().permissions().mode() & 0o7777;
            writeln!(out, "file {path} ({mode:04o})").unwrap();
            for line in String::from_utf8_lossy(&std::fs::read(entry.path()).unwrap()).lines() {
                writeln!(out, "   | {line}").unwrap();
            }
        }
    }
}

/// Strips colour sequences and makes cache directory names stable.
fn normalise(text: &str) -> String {
    let ansi = regex::Regex::new("\x1b\\[[0-9;]*m").unwrap();
    let cache = regex::Regex::new(r"target/tmp/holo\.[0-9]+").unwrap();
    cache
        .replace_all(&ansi.replace_all(text, ""), "target/tmp/holo")
        .into_owned()
}

/// The caller's PATH behind the scratch `bin` holding the `holo` link.
fn search_path(work: &Path) -> std::ffi::OsString {
    let mut dirs = vec![work.join("bin")];
    dirs.extend(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    ));
    std::env::join_paths(dirs).unwrap()
}

/// Runs one command line of a case: `holo ...` through a link named holo,
/// `ral holo ...` through the ral binary, `sh ...` as a shell step. A
/// plugin that writes to both stdout and stderr makes the interleaving
/// depend on timing, so the fixtures write to one stream per call.
fn run_line(line: &str, work: &Path) -> String {
    let words = shell_words::split(line).unwrap_or_else(|e| panic!("{line}: {e}"));
    let (program, args): (PathBuf, &[String]) = match words[0].as_str() {
        // Found through PATH, so argv[0] is plain `holo`.
        "holo" => (PathBuf::from("holo"), &words[1..]),
        "ral" => (PathBuf::from(env!("CARGO_BIN_EXE_ral")), &words[1..]),
        "sh" => (PathBuf::from("/bin/sh"), &words[1..]),
        other => panic!("unknown command {other} in {line}"),
    };
    let (reader, writer) = std::io::pipe().unwrap();
    let mut child = Command::new(&program)
        .args(args)
        .current_dir(work)
        .env_clear()
        .env("PATH", search_path(work))
        .env("HOME", work)
        .env("HOLO_ROOT_DIR", "./target/")
        .env("TMPDIR", "./target/tmp")
        .stdin(Stdio::null())
        .stdout(writer.try_clone().unwrap())
        .stderr(writer)
        .spawn()
        .unwrap_or_else(|e| panic!("{}: {e}", program.display()));
    let mut output = Vec::new();
    std::io::Read::read_to_end(&mut { reader }, &mut output).unwrap();
    let status = child.wait().unwrap();
    let code = status.code().map_or("signal".to_owned(), |c| c.to_string());
    format!(
        "$ {line}\n{}exit status {code}\n",
        normalise(&String::from_utf8_lossy(&output))
    )
}

/// Runs one case; returns a description of each mismatch.
fn run_case(case: &Path, bless: bool) -> Vec<String> {
    let scratch = tempfile::tempdir().unwrap();
    let work = scratch.path();
    let target = work.join("target");
    copy_tree(&case.join("tree"), &target);
    // Directories every Holo root has, which git cannot keep empty.
    for dir in ["tmp", "run", "usr/share/holo/generators"] {
        std::fs::create_dir_all(target.join(dir)).unwrap();
    }
    let plugins = target.join("usr/lib/holo");
    std::fs::create_dir_all(&plugins).unwrap();
    for plugin in std::fs::read_dir(fixtures().join("plugins")).unwrap() {
        let plugin = plugin.unwrap();
        let to = plugins.join(plugin.file_name());
        if !to.exists() {
            std::fs::copy(plugin.path(), to).unwrap();
        }
    }
    std::fs::create_dir_all(work.join("bin")).unwrap();
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_ral"), work.join("bin/holo")).unwrap();

    let commands = std::fs::read_to_string(case.join("commands")).unwrap();
    let mut transcript = String::new();
    for line in commands
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
    {
        transcript.push_str(&run_line(line, work));
    }
    let mut tree = String::new();
    dump_tree(&target, "", &mut tree);

    let mut problems = Vec::new();
    let leftovers: Vec<_> = std::fs::read_dir(target.join("tmp")).unwrap().collect();
    if !leftovers.is_empty() {
        problems.push(format!(
            "{}: the cache directory was left in target/tmp",
            case.display()
        ));
    }
    for (file, actual) in [("expected-output", &transcript), ("expected-tree", &tree)] {
        let path = case.join(file);
        if bless {
            std::fs::write(&path, actual).unwrap();
            continue;
        }
        let expected = std::fs::read_to_string(&path).unwrap_or_default();
        if &expected != actual {
            problems.push(format!(
                "{}: {file} differs\n--- expected\n{expected}\n--- actual\n{actual}",
                case.display()
            ));
        }
    }
    problems
}

#[test]
fn every_case_gives_the_expected_output_and_tree() {
    let bless = std::env::var_os("RAL_BLESS").is_some();
    let mut cases: Vec<PathBuf> = std::fs::read_dir(fixtures().join("cases"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    cases.sort();
    assert!(cases.len() >= 10, "the cases are missing");
    let problems: Vec<String> = cases
        .iter()
        .flat_map(|case| run_case(case, bless))
        .collect();
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
}

mod json_schema;
mod leftovers;
#[path = "../common/mutations.rs"]
mod mutations;
#[path = "../common/pids.rs"]
mod pids;
mod processes;
