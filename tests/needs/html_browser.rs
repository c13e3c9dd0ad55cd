//! The HTML report in a real browser: headless Chromium loads the page of
//! a run with a change, a failure and a skip from disk, with the network
//! features it would reach out with turned off, and its DOM holds the
//! table's rows; a screenshot of it is a PNG.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::host::Test;
use crate::support::{fixtures_dir, run, Sandbox};
use crate::tests;

/// This module's tests and what each needs.
pub fn tests() -> Vec<Test> {
    tests![[Chromium]
        chromium_reads_the_rows_of_the_report,
        chromium_draws_the_report,
    ]
}

/// A report of a run with a change (a diff), a create, a failure and a
/// skip, written to DIR/run.html.
fn report(dir: &Path) -> PathBuf {
    let sandbox = Sandbox::new();
    sandbox.write(
        "alpha.json",
        r#"{"a1": {"ensure": "present", "value": "port 22\nuser root\n"}}"#,
    );
    sandbox.write("fail", "b1\n");
    let manifest = dir.join("m.yaml");
    std::fs::write(
        &manifest,
        "alpha:\n  a1: {value: \"port 2222\\nuser root\\n\"}\n  a2: {value: x, needs: b1}\n\
         beta:\n  b1: {value: three}\n  b2: {value: four}\n",
    )
    .unwrap();
    let page = dir.join("run.html");
    let plans = fixtures_dir().join("plans");
    run(&mut sandbox.ral_command(
        "apply",
        &[
            "-I",
            plans.to_str().unwrap(),
            "--report",
            page.to_str().unwrap(),
            manifest.to_str().unwrap(),
        ],
    ))
    .expect(1);
    page
}

/// Headless Chromium on `page` with `args`, its profile in `dir`, bounded
/// in time by timeout(1).
pub fn chromium(dir: &Path, page: &Path, args: &[&str]) -> Output {
    let output = Command::new("timeout")
        .args([
            "120",
            "chromium",
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
        ])
        .args([
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
        ])
        .arg(format!("--user-data-dir={}", dir.join("profile").display()))
        .args(args)
        .arg(format!("file://{}", page.display()))
        .env("HOME", dir)
        .output()
        .expect("chromium runs");
    assert!(
        output.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

fn chromium_reads_the_rows_of_the_report() {
    let dir = tempfile::tempdir().unwrap();
    let page = report(dir.path());
    let dom = String::from_utf8(chromium(dir.path(), &page, &["--dump-dom"]).stdout).unwrap();
    let rows: Vec<&str> = dom
        .split("<tr class=\"")
        .skip(1)
        .map(|row| row.split("</tr>").next().unwrap())
        .collect();
    assert_eq!(rows.len(), 4, "{dom}");
    let row = |resource: &str| {
        *rows
            .iter()
            .find(|r| r.contains(&format!("<code>{resource}</code>")))
            .unwrap_or_else(|| panic!("no row for {resource} in {dom}"))
    };
    assert!(row("beta[b1]").starts_with("task failed\""));
    assert!(row("beta[b1]").contains(">Failed</span>"));
    assert!(row("alpha[a2]").contains(">Skipped</span>"));
    assert!(row("beta[b2]").contains(">Success</span>"));
    assert!(row("alpha[a1]").contains("<span class=\"del\">-port 22</span>"));
    assert!(row("alpha[a1]").contains("<span class=\"add\">+port 2222</span>"));
    assert!(!dom.contains("<script"), "{dom}");
}

fn chromium_draws_the_report() {
    let dir = tempfile::tempdir().unwrap();
    let page = report(dir.path());
    let shot = dir.path().join("shot.png");
    chromium(
        dir.path(),
        &page,
        &[
            &format!("--screenshot={}", shot.display()),
            "--window-size=1200,900",
        ],
    );
    let png = std::fs::read(&shot).expect("a screenshot was written");
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG");
    // The IHDR chunk: width and height as asked.
    assert_eq!(&png[12..16], b"IHDR");
    assert_eq!(u32::from_be_bytes(png[16..20].try_into().unwrap()), 1200);
    assert_eq!(u32::from_be_bytes(png[20..24].try_into().unwrap()), 900);
}
