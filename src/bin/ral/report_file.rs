//! `ral apply --report FILE`: the run's HTML page (`ral::render::html`)
//! written to a file, whole or not at all.

use std::io::Write;

/// Writes the HTML page of `report` to `file` atomically (a temporary
/// file beside it, renamed over it), mode 0600 as the store's files: a
/// report may name private paths.
pub fn write(
    file: &std::path::Path,
    report: &ral::converge::report::Report,
    when: std::time::SystemTime,
) -> anyhow::Result<()> {
    use anyhow::Context;
    let seconds = when
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    let mut page = Vec::new();
    ral::render::html::page(&mut page, report, &ral::local_time::local_date(seconds))?;
    let dir = directory_of(file);
    let context = || format!("writing the report {}", file.display());
    // tempfile makes its files 0600.
    let mut temp = tempfile::Builder::new()
        .prefix(".ral-report-")
        .tempfile_in(dir)
        .with_context(context)?;
    temp.write_all(&page).with_context(context)?;
    temp.as_file().sync_all().with_context(context)?;
    temp.persist(file)
        .map_err(|e| e.error)
        .with_context(context)?;
    Ok(())
}

/// The directory `file` is to be written in (`.` for a bare name).
pub fn directory_of(file: &std::path::Path) -> &std::path::Path {
    match file.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => std::path::Path::new("."),
    }
}

/// Refuses a `--report` path that holds something else than a report of
/// ral's, before anything runs: a manifest, a saved plan, the store or any
/// other file given there by mistake would be replaced by the page. A
/// link there would be replaced too (never followed), so it is refused as
/// well.
pub fn check_replaceable(file: &std::path::Path) -> anyhow::Result<()> {
    use std::io::Read;
    let Ok(meta) = std::fs::symlink_metadata(file) else {
        return Ok(());
    };
    let refuse = |what: &str| {
        anyhow::anyhow!(
            "--report {}: {what}; the report would replace it: give a new file, or a report \
             of ral's to replace",
            file.display()
        )
    };
    if !meta.is_file() {
        return Err(refuse("it is not a regular file"));
    }
    let mut head = Vec::new();
    let read = std::fs::File::open(file).and_then(|f| f.take(512).read_to_end(&mut head));
    let text = String::from_utf8_lossy(&head);
    match read {
        Ok(_) if text.contains(ral::render::html::GENERATOR) => Ok(()),
        Ok(_) => Err(refuse("it is a file that is no report of ral's")),
        Err(e) => Err(refuse(&format!("it cannot be read ({e})"))),
    }
}
