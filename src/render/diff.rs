//! Unified diffs of multi-line values, for the plan's preview and the HTML
//! report: an attribute such as a file's `content` is shown as the lines
//! it changes (`--- was`, `+++ is`, `@@ -a,b +c,d @@` hunks with three
//! lines of context), not as one long escaped string.
//!
//! The diff is a longest common subsequence of lines after the common
//! head and tail are set aside; past [`MAX_CELLS`] comparisons it is not
//! made, and [`Diff::TooLarge`] gives the sizes instead. The lines are raw
//! text: each renderer escapes them its own way (the terminal's escapes,
//! HTML's entities).

/// Lines of context around each change.
const CONTEXT: usize = 3;

/// The most line pairs the LCS table may compare (4 bytes each): past it,
/// the diff is too large to be worth reading in a plan.
pub const MAX_CELLS: usize = 4_000_000;

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

/// A diff of two texts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Diff {
    /// The lines of the unified diff, with how many lines each side has
    /// and how many were added and removed.
    Lines {
        lines: Vec<Line>,
        is_lines: usize,
        added: usize,
        removed: usize,
    },
    /// Too large to compare: the number of lines of each side.
    TooLarge { was_lines: usize, is_lines: usize },
}

impl Diff {
    /// One short phrase: `changed (12 lines, +3 -1)`.
    pub fn phrase(&self) -> String {
        match self {
            Diff::Lines {
                is_lines,
                added,
                removed,
                ..
            } => format!("changed ({}, +{added} -{removed})", lines(*is_lines)),
            Diff::TooLarge {
                was_lines,
                is_lines,
            } => format!(
                "changed ({} to {}, too large to compare)",
                lines(*was_lines),
                lines(*is_lines)
            ),
        }
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
/// from the same line with one.
fn lines_of(text: &str) -> Vec<&str> {
    text.split_inclusive('\n').collect()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Same,
    Removed,
    Added,
}

/// The unified diff from `was` to `is`.
pub fn unified(was: &str, is: &str) -> Diff {
    let old = lines_of(was);
    let new = lines_of(is);
    let Some(ops) = edit_script(&old, &new) else {
        return Diff::TooLarge {
            was_lines: old.len(),
            is_lines: new.len(),
        };
    };
    let added = ops.iter().filter(|op| **op == Op::Added).count();
    let removed = ops.iter().filter(|op| **op == Op::Removed).count();
    let mut lines = vec![
        Line {
            kind: Kind::Header,
            text: "--- was".to_owned(),
        },
        Line {
            kind: Kind::Header,
            text: "+++ is".to_owned(),
        },
    ];
    for hunk in hunks(&ops) {
        write_hunk(
            &mut lines,
            &ops[hunk.clone()],
            &old,
            &new,
            start_of(&ops, hunk.start),
        );
    }
    Diff::Lines {
        lines,
        is_lines: new.len(),
        added,
        removed,
    }
}

/// The operations from `old` to `new`, or `None` past [`MAX_CELLS`].
fn edit_script(old: &[&str], new: &[&str]) -> Option<Vec<Op>> {
    let head = old.iter().zip(new).take_while(|(a, b)| a == b).count();
    let tail = old[head..]
        .iter()
        .rev()
        .zip(new[head..].iter().rev())
        .take_while(|(a, b)| a == b)
        .count();
    let (a, b) = (&old[head..old.len() - tail], &new[head..new.len() - tail]);
    if a.len().saturating_mul(b.len()) > MAX_CELLS {
        return None;
    }
    let mut ops = vec![Op::Same; head];
    ops.extend(lcs_ops(a, b));
    ops.extend(std::iter::repeat_n(Op::Same, tail));
    Some(ops)
}

/// The classic LCS table, then a walk from its start: removals before
/// additions where both are possible, as diff(1) writes them.
fn lcs_ops(a: &[&str], b: &[&str]) -> Vec<Op> {
    let width = b.len() + 1;
    // suffix[i * width + j]: the LCS length of a[i..] and b[j..].
    let mut suffix = vec![0u32; (a.len() + 1) * width];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            suffix[i * width + j] = if a[i] == b[j] {
                suffix[(i + 1) * width + j + 1] + 1
            } else {
                suffix[(i + 1) * width + j].max(suffix[i * width + j + 1])
            };
        }
    }
    let mut ops = Vec::with_capacity(a.len() + b.len());
    let (mut i, mut j) = (0, 0);
    while i < a.len() || j < b.len() {
        if i < a.len() && j < b.len() && a[i] == b[j] {
            ops.push(Op::Same);
            i += 1;
            j += 1;
        } else if j == b.len()
            || (i < a.len() && suffix[(i + 1) * width + j] >= suffix[i * width + j + 1])
        {
            ops.push(Op::Removed);
            i += 1;
        } else {
            ops.push(Op::Added);
            j += 1;
        }
    }
    ops
}

/// The ranges of `ops` each hunk shows: every change with up to
/// [`CONTEXT`] unchanged lines around it, hunks whose context would touch
/// merged into one.
fn hunks(ops: &[Op]) -> Vec<std::ops::Range<usize>> {
    let mut ranges: Vec<std::ops::Range<usize>> = Vec::new();
    for (at, op) in ops.iter().enumerate() {
        if *op == Op::Same {
            continue;
        }
        let start = at.saturating_sub(CONTEXT);
        let end = (at + 1 + CONTEXT).min(ops.len());
        match ranges.last_mut() {
            Some(last) if start <= last.end => last.end = end,
            _ => ranges.push(start..end),
        }
    }
    ranges
}

/// The (old, new) line indices at which `ops[at]` stands.
fn start_of(ops: &[Op], at: usize) -> (usize, usize) {
    ops[..at].iter().fold((0, 0), |(old, new), op| match op {
        Op::Same => (old + 1, new + 1),
        Op::Removed => (old + 1, new),
        Op::Added => (old, new + 1),
    })
}

/// `@@ -a,b +c,d @@` and the hunk's lines. An empty side's start is the
/// line before it, as diff(1) writes it.
fn write_hunk(
    lines: &mut Vec<Line>,
    ops: &[Op],
    old: &[&str],
    new: &[&str],
    (mut at_old, mut at_new): (usize, usize),
) {
    let old_len = ops.iter().filter(|op| **op != Op::Added).count();
    let new_len = ops.iter().filter(|op| **op != Op::Removed).count();
    let start = |at: usize, len: usize| if len == 0 { at } else { at + 1 };
    lines.push(Line {
        kind: Kind::Hunk,
        text: format!(
            "@@ -{},{old_len} +{},{new_len} @@",
            start(at_old, old_len),
            start(at_new, new_len)
        ),
    });
    for op in ops {
        let (kind, prefix, text) = match op {
            Op::Same => {
                at_old += 1;
                at_new += 1;
                (Kind::Same, ' ', new[at_new - 1])
            }
            Op::Removed => {
                at_old += 1;
                (Kind::Removed, '-', old[at_old - 1])
            }
            Op::Added => {
                at_new += 1;
                (Kind::Added, '+', new[at_new - 1])
            }
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
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(diff: &Diff) -> Vec<&str> {
        match diff {
            Diff::Lines { lines, .. } => lines.iter().map(|l| l.text.as_str()).collect(),
            Diff::TooLarge { .. } => panic!("too large: {diff:?}"),
        }
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
        assert_eq!(
            texts(&unified("", "x\ny\n")),
            ["--- was", "+++ is", "@@ -0,0 +1,2 @@", "+x", "+y"]
        );
        assert_eq!(
            texts(&unified("a\nb\n", "a\nb\nc\n")),
            ["--- was", "+++ is", "@@ -1,2 +1,3 @@", " a", " b", "+c"]
        );
    }

    #[test]
    fn past_the_bound_only_the_sizes_are_given() {
        let was: String = (0..3000).map(|n| format!("a{n}\n")).collect();
        let is: String = (0..3000).map(|n| format!("b{n}\n")).collect();
        let diff = unified(&was, &is);
        assert_eq!(
            diff,
            Diff::TooLarge {
                was_lines: 3000,
                is_lines: 3000
            }
        );
        assert!(diff.phrase().contains("too large"), "{}", diff.phrase());
    }
}
