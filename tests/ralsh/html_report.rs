//! `ral apply --report FILE.html` and `ral state show ID --html`: one
//! self-contained page, checked by parsing it back strictly (Python's
//! html.parser: every tag closed, in order), with no script, no URL, its
//! rows and diff as the run had them, and a hostile resource name inert.

use std::os::unix::fs::PermissionsExt;
use std::process::Command;

use serde_json::{json, Value as Json};

use crate::plans::Bench;
use crate::support::run;

/// Parses an HTML page and prints, as JSON, its tags and each table row
/// of the body (class and the text of each cell); exits 1 naming the
/// first tag left open or closed out of order.
const CHECK_HTML: &str = r#"
import json, sys
from html.parser import HTMLParser
VOID = {"meta", "br", "hr", "img", "input", "link", "wbr"}
class Check(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack, self.tags, self.rows, self.attrs = [], [], [], []
        self.cell = None
    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.attrs.extend(v or "" for _, v in attrs)
        if tag not in VOID:
            self.stack.append(tag)
        if tag == "tr" and "tbody" in self.stack:
            self.rows.append({"class": dict(attrs).get("class", ""), "cells": []})
        if tag == "td":
            self.cell = []
    def handle_startendtag(self, tag, attrs):
        self.tags.append(tag)
        self.attrs.extend(v or "" for _, v in attrs)
    def handle_endtag(self, tag):
        if tag in VOID:
            return
        if not self.stack or self.stack[-1] != tag:
            sys.exit(f"</{tag}> closes {self.stack[-1:] or 'nothing'}")
        self.stack.pop()
        if tag == "td":
            self.rows[-1]["cells"].append("".join(self.cell))
            self.cell = None
    def handle_data(self, data):
        if self.cell is not None:
            self.cell.append(data)
check = Check()
check.feed(open(sys.argv[1], encoding="utf-8").read())
check.close()
if check.stack:
    sys.exit(f"left open: {check.stack}")
print(json.dumps({"tags": check.tags, "attrs": check.attrs, "rows": check.rows}))
"#;

/// The page at `path`, parsed: `{tags, attrs, rows: [{class, cells}]}`.
pub fn parse_page(path: &std::path::Path) -> Json {
    let out = Command::new("python3")
        .args(["-I", "-S", "-c", CHECK_HTML])
        .arg(path)
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "not well-formed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// A run with a create, a change with a diff, a failure, a skip, and a
/// resource named as markup: the bench and the manifest.
pub fn realistic_run() -> (Bench, String) {
    let bench = Bench::new();
    bench.sandbox.write(
        "alpha.json",
        &json!({"a1": {"ensure": "present", "value": "port 22\nuser root\nlog on\n"}}).to_string(),
    );
    bench.sandbox.write("fail", "b1\n");
    let m = bench.manifest(
        "m.yaml",
        "alpha:\n  a1: {value: \"port 2222\\nuser root\\nlog on\\n\", \
         secret: \"s3cr3t one\\ns3cr3t two\\n\"}\n  \
         \"<script>alert(1)</script>\": {value: x, needs: b1}\n\
         beta:\n  b1: {value: three}\n  b2: {value: four}\n",
    );
    (bench, m)
}

#[test]
fn the_report_is_one_well_formed_page_with_the_tasks_states_and_diff() {
    let (bench, m) = realistic_run();
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("run.html");
    bench
        .ral("apply", &["--report", page.to_str().unwrap(), &m])
        .expect(1);
    let mode = std::fs::metadata(&page).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    // Only the page is left in its directory: no temporary file.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    let text = std::fs::read_to_string(&page).unwrap();
    assert!(text.starts_with("<!DOCTYPE html>\n"), "{text}");
    let doc = parse_page(&page);
    let tags: Vec<&str> = doc["tags"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    for absent in ["script", "link", "img", "iframe", "object"] {
        assert!(!tags.contains(&absent), "<{absent}> in {tags:?}");
    }
    assert!(
        tags.contains(&"style") && tags.contains(&"table"),
        "{tags:?}"
    );
    // No URL anywhere: not in the text, not in an attribute, not in the
    // style.
    assert!(!text.contains("http") && !text.contains("url("), "{text}");
    let rows = doc["rows"].as_array().unwrap();
    let row = |resource: &str| -> Vec<String> {
        rows.iter()
            .find(|r| r["cells"][2] == resource)
            .unwrap_or_else(|| panic!("no row for {resource}: {rows:#?}"))["cells"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c.as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(rows.len(), 4, "{rows:#?}");
    // Sign, state, and the change as a diff.
    let a1 = row("alpha[a1]");
    assert_eq!((a1[1].as_str(), a1[3].as_str()), ("~", "Success"));
    assert!(a1[4].ends_with(" s"), "{a1:?}");
    assert!(
        a1[6].contains(
            "--- was\n+++ is\n@@ -1,3 +1,3 @@\n-port 22\n+port 2222\n user root\n log on\n"
        ),
        "{a1:?}"
    );
    // A sensitive multi-line value: redacted, no diff, no size.
    assert!(a1[6].contains("secret: [redacted]"), "{a1:?}");
    assert!(!text.contains("s3cr3t"), "{text}");
    assert_eq!(a1[6].matches("@@").count(), 2, "{a1:?}");
    let b1 = row("beta[b1]");
    assert_eq!((b1[1].as_str(), b1[3].as_str()), ("+", "Failed"));
    assert!(b1[6].contains("b1 refused by the test"), "{b1:?}");
    let b2 = row("beta[b2]");
    assert_eq!(b2[3], "Success");
    assert!(b2[6].contains("ensure: present") && b2[6].contains("value: 'four'"));
    // The markup in a name is text: the cell reads it back as written,
    // and it waits for b1.
    let hostile = row("alpha[<script>alert(1)</script>]");
    assert_eq!(hostile[3], "Skipped");
    assert_eq!(hostile[5], "beta[b1]");
    assert!(
        text.contains("alpha[&lt;script&gt;alert(1)&lt;/script&gt;]"),
        "{text}"
    );
    // The failed row stands out.
    let failed: Vec<&Json> = rows
        .iter()
        .filter(|r| r["class"] == "task failed")
        .collect();
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0]["cells"][2], "beta[b1]");
    assert!(
        text.contains("1 created, 1 changed, 1 failed, 1 skipped"),
        "{text}"
    );
}

#[test]
fn ral_state_show_html_prints_the_page_of_a_saved_run() {
    let (bench, m) = realistic_run();
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("run.html");
    bench
        .ral("apply", &["--report", page.to_str().unwrap(), &m])
        .expect(1);
    let history = run(&mut bench.sandbox.ral_command("state", &["history"]));
    let id = history.stdout.split_whitespace().next().unwrap().to_owned();
    let shown = run(&mut bench.sandbox.ral_command("state", &["show", &id, "--html"]));
    shown.expect(0);
    // The same page, but for the moment given as its time (the command's
    // start and the plan's may be a second apart).
    let without_when = |text: &str| -> String {
        text.lines()
            .filter(|l| !l.starts_with("<p class=\"meta\">When: "))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let written = std::fs::read_to_string(&page).unwrap();
    assert_eq!(without_when(&shown.stdout), without_when(&written));
    assert!(shown.stdout.contains(&format!("<code>{id}</code>")));
    run(&mut bench
        .sandbox
        .ral_command("state", &["show", &id, "--html", "-j"]))
    .expect(2)
    .stderr_has("cannot be used with");
}

#[test]
fn report_is_refused_before_anything_runs_where_it_cannot_be() {
    let (bench, m) = realistic_run();
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no/such/dir/run.html");
    bench
        .ral("apply", &["--report", missing.to_str().unwrap(), &m])
        .expect(2)
        .stderr_has("is not a directory");
    bench
        .ral(
            "plan",
            &["--report", dir.path().join("p.html").to_str().unwrap(), &m],
        )
        .expect(2)
        .stderr_has("--report is for ral apply");
    // Nothing was read or changed.
    assert!(bench.take_calls().is_empty());
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn report_over_targets_is_checked_before_any_target_is_tried() {
    let (bench, m) = realistic_run();
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no/such/dir/run.html");
    let notes = dir.path().join("notes.txt");
    std::fs::write(&notes, "mine\n").unwrap();
    // A target no ssh could reach: refused before ssh is asked.
    let target = ["-t", "nowhere.invalid"];
    for (page, why) in [
        (missing.to_str().unwrap(), "is not a directory"),
        (
            notes.to_str().unwrap(),
            "it is a file that is no report of ral's",
        ),
    ] {
        let ran = bench.ral("apply", &[&target[..], &["--report", page, &m]].concat());
        ran.expect(2)
            .stderr_has(&format!("--report {page}: "))
            .stderr_has(why);
        assert!(!ran.stderr.contains("nowhere.invalid"), "{}", ran.stderr);
    }
    assert!(bench.take_calls().is_empty());
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), "mine\n");
    // `ral plan` has no run to report, over targets too.
    bench
        .ral("plan", &["-t", "nowhere.invalid", "--report", "p.html", &m])
        .expect(2)
        .stderr_has("--report is for ral apply");
}

#[test]
fn a_report_that_cannot_be_written_fails_the_exit_status_not_the_run() {
    let (bench, m) = realistic_run();
    bench.sandbox.write("fail", "");
    // A directory that is one, where no file can be made: found only when
    // the page is written, after the run.
    bench
        .ral("apply", &["--report", "/proc/self/run.html", &m])
        .expect(1)
        .stdout_has("Apply complete: ")
        .stderr_has("writing the report /proc/self/run.html");
    // The run was made and recorded.
    let history = run(&mut bench.sandbox.ral_command("state", &["history"]));
    history.expect(0).stdout_has("Successful");
}

#[test]
fn report_never_replaces_what_is_no_report_and_replaces_a_report() {
    let (bench, m) = realistic_run();
    bench.sandbox.write("fail", "");
    let dir = tempfile::tempdir().unwrap();
    // The manifest itself, a directory, a link and any other file are
    // refused before anything runs, and left as they were.
    let taken = dir.path().join("taken.html");
    std::fs::create_dir(&taken).unwrap();
    let link = dir.path().join("link.html");
    std::os::unix::fs::symlink(&m, &link).unwrap();
    let notes = dir.path().join("notes.txt");
    std::fs::write(&notes, "mine\n").unwrap();
    let manifest_text = std::fs::read_to_string(&m).unwrap();
    for (path, why) in [
        (m.as_str(), "it is a file that is no report of ral's"),
        (taken.to_str().unwrap(), "it is not a regular file"),
        (link.to_str().unwrap(), "it is not a regular file"),
        (
            notes.to_str().unwrap(),
            "it is a file that is no report of ral's",
        ),
    ] {
        bench
            .ral("apply", &["--report", path, &m])
            .expect(2)
            .stderr_has(&format!("--report {path}: {why}"));
    }
    assert!(bench.take_calls().is_empty(), "nothing ran");
    assert_eq!(std::fs::read_to_string(&m).unwrap(), manifest_text);
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), "mine\n");
    // A report of ral's is replaced by the next.
    let page = dir.path().join("run.html");
    let path = page.to_str().unwrap();
    bench.ral("apply", &["--report", path, &m]).expect(0);
    let first = std::fs::read_to_string(&page).unwrap();
    bench.ral("apply", &["--report", path, &m]).expect(0);
    let second = std::fs::read_to_string(&page).unwrap();
    assert_ne!(first, second, "a new run, a new page");
}
