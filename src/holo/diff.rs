//! Diffs: a plugin's `diff` operation names two files on file descriptor 3
//! (NUL-separated: the state last applied, then the current one), and
//! `git diff --no-index` compares them. Its headers are rewritten to the
//! paths the plugin gave (`diff --holo A B`, `--- A`, `+++ B`) and its
//! `index` lines dropped, as Holo does.

use std::ffi::OsString;
use std::path::Path;

use super::output::{Printer, To};
#[cfg(doc)]
use super::plugin::pass_on;
use super::plugin::{os_text, Forward, Operation, Plugin, RunError, Runner};
use super::resources::Resources;
use super::streams::run_streams;
use crate::process::streams::{Stream, StreamCall};

/// Why an entity's diff could not be made, in Holo's words.
#[derive(Debug, thiserror::Error)]
pub enum DiffError {
    /// The plugin's `diff`, or git, did not run or did not succeed.
    #[error(transparent)]
    Run(#[from] RunError),
    /// A file the plugin named is neither a regular file nor a symlink.
    #[error("file {path} has wrong file type")]
    WrongFileType { path: String },
    /// A file the plugin named could not be looked at.
    #[error("lstat {path}: {}", os_text(.error))]
    Lstat { path: String, error: std::io::Error },
}

/// Asks the plugin for the entity's two files and diffs them. `Ok("")`
/// when the entity has no diff. The plugin's own output goes to `forward`
/// ([`pass_on`] shows it).
pub fn render(
    runner: &Runner,
    resources: &Resources,
    plugin: &Plugin,
    entity: &str,
    printer: &mut Printer,
    forward: &mut Forward,
) -> Result<String, DiffError> {
    let (ended, _) = runner.run(
        plugin,
        Operation::on("diff", entity),
        printer,
        Some(forward),
    )?;
    if !ended.success() {
        return Err(RunError::exited(&ended).into());
    }
    let fd3 = String::from_utf8_lossy(&ended.fd3).into_owned();
    let parts: Vec<&str> = fd3.split('\0').collect();
    if parts.len() < 2 {
        return Ok(String::new());
    }
    let (old, new) = (parts[0], parts[1]);
    let diff = git_diff(runner, &checked(old)?, &checked(new)?, printer)?;
    Ok(rewrite_headers(
        &diff,
        &resources.translate(old),
        &resources.translate(new),
    ))
}

/// The path to diff: itself for a regular file or symlink, `/dev/null`
/// for one that does not exist; anything else is refused.
fn checked(path: &str) -> Result<String, DiffError> {
    if path == "/dev/null" {
        return Ok(path.to_owned());
    }
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.is_file() || meta.file_type().is_symlink() => Ok(path.to_owned()),
        Ok(_) => Err(DiffError::WrongFileType {
            path: path.to_owned(),
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok("/dev/null".to_owned()),
        Err(error) => Err(DiffError::Lstat {
            path: path.to_owned(),
            error,
        }),
    }
}

fn git_diff(
    runner: &Runner,
    old: &str,
    new: &str,
    printer: &mut Printer,
) -> Result<String, RunError> {
    // The prefixes and colours git would take from the user's configuration
    // would defeat the header rewriting, so they are fixed here.
    let args: Vec<OsString> = [
        "-c",
        "diff.noprefix=false",
        "-c",
        "diff.mnemonicPrefix=false",
        "diff",
        "--no-index",
        "--no-color",
        "--no-ext-diff",
        "--src-prefix=a/",
        "--dst-prefix=b/",
        "--",
        old,
        new,
    ]
    .iter()
    .map(OsString::from)
    .collect();
    let arg0 = OsString::from("git");
    let call = StreamCall {
        label: "git diff",
        program: Path::new("git"),
        arg0: &arg0,
        args: &args,
        env: &runner.base_env,
        fd3: false,
        stdin: None,
        timeout: runner.timeout,
        release: false,
        dir: None,
        user: None,
    };
    let mut diff = Vec::new();
    let ended = run_streams(&call, &mut |stream, line| match stream {
        Stream::Stdout => {
            diff.extend_from_slice(line);
            diff.push(b'\n');
        }
        Stream::Stderr => {
            let mut bytes = line.to_vec();
            bytes.push(b'\n');
            printer.write(To::Err, &bytes);
        }
    })
    .map_err(|e| match e {
        crate::error::Error::Spawn { source, .. }
            if source.kind() == std::io::ErrorKind::NotFound =>
        {
            RunError::NotOnPath {
                program: "git".to_owned(),
            }
        }
        other => RunError::Run(other),
    })?;
    match ended.code {
        Some(0 | 1) => Ok(String::from_utf8_lossy(&diff).into_owned()),
        _ => Err(RunError::exited(&ended)),
    }
}

/// Drops `index` lines and rewrites the header lines to the plugin's paths.
pub fn rewrite_headers(diff: &str, old: &str, new: &str) -> String {
    let mut out = String::with_capacity(diff.len());
    for line in diff.split_inclusive('\n') {
        let body = line.strip_suffix('\n').unwrap_or(line);
        let end = &line[body.len()..];
        if body.starts_with("index ") {
            continue;
        }
        if body.starts_with("diff --git ") {
            out.push_str(&format!("diff --holo {old} {new}{end}"));
        } else if body.starts_with("--- a/") {
            out.push_str(&format!("--- {old}{end}"));
        } else if body.starts_with("+++ b/") {
            out.push_str(&format!("+++ {new}{end}"));
        } else {
            out.push_str(line);
        }
    }
    out
}

/// Indents every line by four spaces (Holo's diff under an apply message).
pub fn indent(diff: &str) -> String {
    let mut out: String = diff
        .split_inclusive('\n')
        .map(|line| format!("    {line}"))
        .collect();
    if diff.ends_with('\n') || diff.is_empty() {
        // The indent Holo would add after the last newline is dropped.
    } else {
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_name_the_plugin_paths_and_index_lines_go() {
        let git = "diff --git a/x/a b/y/b\nindex 123..456 100644\n--- a/x/a\n+++ b/y/b\n@@ -1 +1 @@\n-old\n+new\n";
        assert_eq!(
            rewrite_headers(git, "state/a", "etc/a"),
            "diff --holo state/a etc/a\n--- state/a\n+++ etc/a\n@@ -1 +1 @@\n-old\n+new\n"
        );
        let created = "diff --git a/etc/a b/etc/a\nnew file mode 100644\nindex 0000000..257cc56\n--- /dev/null\n+++ b/etc/a\n";
        assert_eq!(
            rewrite_headers(created, "s/a", "etc/a"),
            "diff --holo s/a etc/a\nnew file mode 100644\n--- /dev/null\n+++ etc/a\n"
        );
    }

    #[test]
    fn only_files_links_and_nothing_are_diffed() {
        let dir = tempfile::tempdir().unwrap();
        let dir = dir.path().to_str().unwrap();
        let file = format!("{dir}/file");
        std::fs::write(&file, "x").unwrap();
        assert_eq!(checked(&file).unwrap(), file);
        assert_eq!(checked(&format!("{dir}/gone")).unwrap(), "/dev/null");
        let error = checked(dir).unwrap_err();
        assert!(
            matches!(error, DiffError::WrongFileType { .. }),
            "{error:?}"
        );
        assert_eq!(error.to_string(), format!("file {dir} has wrong file type"));
        let below_file = format!("{file}/x");
        let error = checked(&below_file).unwrap_err();
        assert!(matches!(error, DiffError::Lstat { .. }), "{error:?}");
        assert_eq!(
            error.to_string(),
            format!("lstat {below_file}: not a directory")
        );
    }

    #[test]
    fn indenting_keeps_empty_lines_as_four_spaces() {
        assert_eq!(indent("a\n\nb\n"), "    a\n    \n    b\n");
        assert_eq!(indent(""), "");
    }
}
