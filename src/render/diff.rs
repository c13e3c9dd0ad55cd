//! Unified diffs of multi-line values, for the plan's preview and the HTML
//! report: an attribute such as a file's `content` is shown as the lines
//! it changes (`--- was`, `+++ is`, `@@ -a,b +c,d @@` hunks with three
//! lines of context), not as one long escaped string.
//!
//! Which lines changed is the `similar` crate's Myers diff, given
//! [`DEADLINE`]: past it the search stops refining, and what it has not
//! matched yet is shown as removed and added whole. A huge pair thus
//! still gets a correct diff, coarser but in bounded time. This module
//! writes the hunks; their lines are raw text, which each renderer
//! escapes its own way (the terminal's escapes, HTML's entities).

use std::ops::Range;
use std::time::{Duration, Instant};

use similar::{Algorithm, ChangeTag, DiffOp, DiffTag, TextDiff};

/// Lines of context around each change.
const CONTEXT: usize = 3;

/// How long the search for the smallest diff of one value may take: a
/// plan shows one diff per changed file, and a person waits for it. Two
/// 50,000-line files with scattered changes take some 35 ms of CPU; only
/// a pathological pair (few distinct lines, shuffled) or a loaded machine
/// reaches it.
pub const DEADLINE: Duration = Duration::from_millis(500);

/// What a line of the diff is, for its colour.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `--- was` and `+++ is`.
    Header,
    /// `@@ -a,b +c,d @@`.
    Hunk,
    Same,
    Removed,
    Added,
    /// `\ No newline at end of file`.
    NoNewline,
}

/// One line of the diff as written, with its prefix, without its line
/// break.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    pub kind: Kind,
    pub text: String,
}

/// The unified diff of two texts: its lines, how many lines the new text
/// has, and how many were added and removed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diff {
    pub lines: Vec<Line>,
    pub is_lines: usize,
    pub added: usize,
    pub removed: usize,
}

impl Diff {
    /// One short phrase: `changed (12 lines, +3 -1)`.
    pub fn phrase(&self) -> String {
        format!(
            "changed ({}, +{} -{})",
            lines(self.is_lines),
            self.added,
            self.removed
        )
    }
}

/// `1 line`, `3 lines`.
pub fn lines(count: usize) -> String {
    match count {
        1 => "1 line".to_owned(),
        n => format!("{n} lines"),
    }
}

/// Whether a change from `was` to `is` is shown as a diff: one of them
/// has a line break.
pub fn is_multi_line(was: Option<&str>, is: &str) -> bool {
    is.contains('\n') || was.is_some_and(|was| was.contains('\n'))
}

/// Lines with their line breaks, so that a last line without one differs
/// from the same line with one. Only `\n` ends a line: `similar`'s own
/// splitting would also end one at a lone `\r`, which ral shows escaped
/// inside its line.
fn lines_of(text: &str) -> Vec<&str> {
    text.split_inclusive('\n').collect()
}

/// The unified diff from `was` to `is`, searched for at most [`DEADLINE`].
pub fn unified(was: &str, is: &str) -> Diff {
    unified_by(was, is, Instant::now() + DEADLINE)
}

/// The unified diff from `was` to `is`, as fine as the search could make
/// it by `deadline`.
fn unified_by(was: &str, is: &str, deadline: Instant) -> Diff {
    let (old, new) = (lines_of(was), lines_of(is));
    let diff = TextDiff::configure()
        .algorithm(Algorithm::Myers)
        .deadline(deadline)
        .diff_slices(&old, &new);
    let (mut added, mut removed) = (0, 0);
    for op in diff.ops().iter().filter(|op| op.tag() != DiffTag::Equal) {
        removed += op.old_range().len();
        added += op.new_range().len();
    }
    let mut lines = vec![header("--- was"), header("+++ is")];
    for hunk in diff.grouped_ops(CONTEXT) {
        write_hunk(&mut lines, &diff, &hunk);
    }
    Diff {
        lines,
        is_lines: new.len(),
        added,
        removed,
    }
}

fn header(text: &str) -> Line {
    Line {
        kind: Kind::Header,
        text: text.to_owned(),
    }
}

/// `@@ -a,b +c,d @@` and the lines of one hunk (its changes with up to
/// [`CONTEXT`] unchanged lines around them).
fn write_hunk(lines: &mut Vec<Line>, diff: &TextDiff<'_, '_, str>, ops: &[DiffOp]) {
    let (Some(first), Some(last)) = (ops.first(), ops.last()) else {
        return;
    };
    let old = first.old_range().start..last.old_range().end;
    let new = first.new_range().start..last.new_range().end;
    lines.push(Line {
        kind: Kind::Hunk,
        text: format!("@@ -{} +{} @@", span(&old), span(&new)),
    });
    for op in ops {
        for change in diff.iter_changes(op) {
            write_line(lines, change.tag(), change.value());
        }
    }
}

/// `a,b`: the first line (from 1) and the count. An empty side's start is
/// the line before it, as diff(1) writes it.
fn span(lines: &Range<usize>) -> String {
    let start = match lines.is_empty() {
        true => lines.start,
        false => lines.start + 1,
    };
    format!("{start},{}", lines.len())
}

/// One line with its prefix, and the note when it has no line break.
fn write_line(lines: &mut Vec<Line>, tag: ChangeTag, text: &str) {
    let (kind, prefix) = match tag {
        ChangeTag::Equal => (Kind::Same, ' '),
        ChangeTag::Delete => (Kind::Removed, '-'),
        ChangeTag::Insert => (Kind::Added, '+'),
    };
    let (body, ends) = match text.strip_suffix('\n') {
        Some(body) => (body, true),
        None => (text, false),
    };
    lines.push(Line {
        kind,
        text: format!("{prefix}{body}"),
    });
    if !ends {
        lines.push(Line {
            kind: Kind::NoNewline,
            text: "\\ No newline at end of file".to_owned(),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(diff: &Diff) -> Vec<&str> {
        diff.lines.iter().map(|l| l.text.as_str()).collect()
    }

    /// The first line (from 0) of the old side of `@@ -a,b +c,d @@`.
    fn old_start(hunk: &str) -> usize {
        let old = hunk.trim_start_matches("@@ -").split(' ').next().unwrap();
        let (start, len) = old.split_once(',').unwrap();
        let (start, len): (usize, usize) = (start.parse().unwrap(), len.parse().unwrap());
        if len == 0 {
            start
        } else {
            start - 1
        }
    }

    /// `was` with `diff`'s hunks applied, as patch(1) would: every context
    /// and removed line must be the old text's line at its place.
    fn apply(was: &str, diff: &Diff) -> String {
        let old = lines_of(was);
        let (mut out, mut at, mut last) = (String::new(), 0, Kind::Header);
        for line in &diff.lines {
            let body = line.text.get(1..).unwrap_or("");
            match line.kind {
                Kind::Header => {}
                Kind::Hunk => {
                    let start = old_start(&line.text);
                    assert!(at <= start, "hunks overlap at {}", line.text);
                    out.extend(old[at..start].iter().copied());
                    at = start;
                }
                Kind::Same | Kind::Removed => {
                    assert_eq!(old[at].trim_end_matches('\n'), body, "old line {at}");
                    if line.kind == Kind::Same {
                        out.push_str(body);
                        out.push('\n');
                    }
                    at += 1;
                }
                Kind::Added => {
                    out.push_str(body);
                    out.push('\n');
                }
                Kind::NoNewline => {
                    if last != Kind::Removed {
                        out.pop();
                    }
                }
            }
            last = line.kind;
        }
        out.extend(old[at..].iter().copied());
        out
    }

    /// 50,000 lines, and the same with one line in a thousand changed, one
    /// removed and one added: the part between the first and last change
    /// is far past the 4M comparisons the old quadratic diff gave up at.
    fn large_pair() -> (String, String) {
        let was: String = (0..50_000).map(|n| format!("line {n}\n")).collect();
        let is: String = (0..50_000)
            .filter_map(|n| match n % 1_000 {
                100 => Some(format!("line {n} changed\n")),
                400 => None,
                700 => Some(format!("line {n}\nline {n} added\n")),
                _ => Some(format!("line {n}\n")),
            })
            .collect();
        (was, is)
    }

    #[test]
    fn one_changed_line_among_many_is_shown_with_three_lines_of_context() {
        let was: String = (1..=10).map(|n| format!("l{n}\n")).collect();
        let is = was.replace("l5\n", "five\n");
        let diff = unified(&was, &is);
        assert_eq!(
            texts(&diff),
            [
                "--- was",
                "+++ is",
                "@@ -2,7 +2,7 @@",
                " l2",
                " l3",
                " l4",
                "-l5",
                "+five",
                " l6",
                " l7",
                " l8"
            ]
        );
        assert_eq!(diff.phrase(), "changed (10 lines, +1 -1)");
    }

    #[test]
    fn distant_changes_are_two_hunks_and_near_ones_one() {
        let was: String = (1..=20).map(|n| format!("{n}\n")).collect();
        let is = was
            .replace("\n2\n", "\ntwo\n")
            .replace("\n19\n", "\nnineteen\n");
        let diff = unified(&was, &is);
        let hunks: Vec<&str> = texts(&diff)
            .into_iter()
            .filter(|l| l.starts_with("@@"))
            .collect();
        assert_eq!(hunks, ["@@ -1,5 +1,5 @@", "@@ -16,5 +16,5 @@"]);
        let is = was
            .replace("\n5\n", "\nfive\n")
            .replace("\n11\n", "\neleven\n");
        let hunks = texts(&unified(&was, &is))
            .into_iter()
            .filter(|l| l.starts_with("@@"))
            .count();
        assert_eq!(hunks, 1);
    }

    #[test]
    fn a_missing_final_line_break_is_said() {
        assert_eq!(
            texts(&unified("a\nb", "a\nb\n")),
            [
                "--- was",
                "+++ is",
                "@@ -1,2 +1,2 @@",
                " a",
                "-b",
                "\\ No newline at end of file",
                "+b"
            ]
        );
    }

    #[test]
    fn a_new_text_is_all_additions_after_line_zero() {
        let diff = unified("", "x\ny\n");
        assert_eq!(
            texts(&diff),
            ["--- was", "+++ is", "@@ -0,0 +1,2 @@", "+x", "+y"]
        );
        assert_eq!(diff.phrase(), "changed (2 lines, +2 -0)");
        assert_eq!(
            texts(&unified("a\nb\n", "a\nb\nc\n")),
            ["--- was", "+++ is", "@@ -1,2 +1,3 @@", " a", " b", "+c"]
        );
    }

    #[test]
    fn a_lone_carriage_return_stays_inside_its_line() {
        assert_eq!(
            texts(&unified("a\rb\nc\n", "a\rB\nc\n")),
            [
                "--- was",
                "+++ is",
                "@@ -1,2 +1,2 @@",
                "-a\rb",
                "+a\rB",
                " c"
            ]
        );
    }

    #[test]
    fn a_large_pair_is_diffed_line_by_line_and_the_diff_applies() {
        let (was, is) = large_pair();
        // A deadline no test machine reaches, however loaded: the figures
        // below are those of the finest diff.
        let diff = unified_by(&was, &is, Instant::now() + Duration::from_secs(600));
        // 50 changed, 50 removed, 50 added: nothing coarser.
        assert_eq!((diff.removed, diff.added), (100, 100), "{}", diff.phrase());
        let hunks = diff.lines.iter().filter(|l| l.kind == Kind::Hunk).count();
        assert_eq!(hunks, 150);
        assert_eq!(diff.is_lines, 50_000);
        assert!(apply(&was, &diff) == is, "the diff does not apply");
    }

    #[test]
    fn past_the_deadline_the_rest_is_removed_and_added_whole_and_still_applies() {
        let (was, is) = large_pair();
        let past = Instant::now()
            .checked_sub(Duration::from_secs(1))
            .expect("the clock has run for a second");
        let diff = unified_by(&was, &is, past);
        // Only the common head and tail were set aside: lines 100 to
        // 49,700 are one block removed and added.
        assert_eq!(
            (diff.removed, diff.added),
            (49_601, 49_601),
            "{}",
            diff.phrase()
        );
        let hunks: Vec<&Line> = diff.lines.iter().filter(|l| l.kind == Kind::Hunk).collect();
        assert_eq!(hunks.len(), 1, "{hunks:?}");
        assert!(apply(&was, &diff) == is, "the diff does not apply");
    }
}
