//! Holo's output layout: paragraphs separated by one blank line, `!!` error
//! and `>>` warning lines, bold entity IDs, and colour as anstream decides
//! for each stream (NO_COLOR, CLICOLOR, CLICOLOR_FORCE, TERM, and whether
//! it is a terminal), painted with anstyle's styles.
//!
//! Holo tracks paragraphs across stdout and stderr together: the first
//! tracked write of a run is preceded by a newline on stdout, and ending a
//! paragraph adds newlines on the stream it is ended on until the output
//! ends with a blank line. Some output (diff text, `scan --short` lines,
//! `Unrecognized argument`) bypasses the tracker, exactly as in Holo.

use std::io::Write;

use anstyle::{AnsiColor, Style};

/// Holo's styles: entity IDs and diff headers bold, `!!` lines bold red,
/// `>>` lines bold yellow, hunk headers cyan, removed lines red, added
/// lines green.
const BOLD: Style = Style::new().bold();
const RED: Style = AnsiColor::Red.on_default().bold();
const YELLOW: Style = AnsiColor::Yellow.on_default().bold();
const CYAN: Style = AnsiColor::Cyan.on_default();
const PLAIN_RED: Style = AnsiColor::Red.on_default();
const GREEN: Style = AnsiColor::Green.on_default();

/// `text` in `style`, reset after it.
fn paint(style: Style, text: &str) -> String {
    format!("{style}{text}{style:#}")
}

/// Colour as anstream decides for a stream.
fn colour_for(stream: &impl anstream::stream::RawStream) -> bool {
    matches!(
        anstream::AutoStream::choice(stream),
        anstream::ColorChoice::Always | anstream::ColorChoice::AlwaysAnsi
    )
}

/// Which of the two output streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum To {
    Out,
    Err,
}

/// Writes to stdout and stderr with Holo's paragraph rules.
pub struct Printer {
    had_output: bool,
    trailing_newlines: usize,
    colour_out: bool,
    colour_err: bool,
    /// Tracked stdout goes to stderr (`--json` keeps stdout for the
    /// document).
    out_to_err: bool,
}

impl Default for Printer {
    fn default() -> Self {
        Printer::new()
    }
}

impl Printer {
    pub fn new() -> Printer {
        Printer {
            had_output: false,
            trailing_newlines: 0,
            colour_out: colour_for(&std::io::stdout()),
            colour_err: colour_for(&std::io::stderr()),
            out_to_err: false,
        }
    }

    /// Sends every tracked stdout write (headings, paragraphs, plugin
    /// output) to stderr instead.
    pub fn tracked_stdout_to_stderr(&mut self) {
        self.out_to_err = true;
        self.colour_out = self.colour_err;
    }

    fn colour(&self, to: To) -> bool {
        match to {
            To::Out => self.colour_out,
            To::Err => self.colour_err,
        }
    }

    /// A tracked write.
    pub fn write(&mut self, to: To, bytes: &[u8]) {
        let to = if self.out_to_err { To::Err } else { to };
        if !self.had_output {
            self.had_output = true;
            raw(if self.out_to_err { To::Err } else { To::Out }, b"\n");
        }
        let newlines = bytes.iter().rev().take_while(|b| **b == b'\n').count();
        if newlines == bytes.len() {
            self.trailing_newlines += newlines;
        } else {
            self.trailing_newlines = newlines;
        }
        raw(to, bytes);
    }

    /// Ends the current paragraph on `to`: newlines until the output ends in
    /// a blank line. Nothing before the first tracked write.
    pub fn end_paragraph(&mut self, to: To) {
        if !self.had_output {
            return;
        }
        while self.trailing_newlines < 2 {
            self.write(to, b"\n");
        }
    }

    /// `!! message` on stderr.
    pub fn error(&mut self, message: &str) {
        let line = self.tagged(To::Err, RED, "!! ", message);
        self.write(To::Err, line.as_bytes());
    }

    /// `>> message` on stderr.
    pub fn warning(&mut self, message: &str) {
        let line = self.tagged(To::Err, YELLOW, ">> ", message);
        self.write(To::Err, line.as_bytes());
    }

    fn tagged(&self, to: To, style: Style, tag: &str, message: &str) -> String {
        let message = message.strip_suffix('\n').unwrap_or(message);
        if self.colour(to) {
            format!("{}\n", paint(style, &format!("{tag}{message}")))
        } else {
            format!("{tag}{message}\n")
        }
    }

    /// A line of a plugin's stderr: passed on, with `!! ` and `>> ` lines
    /// coloured like the host's own.
    pub fn plugin_stderr_line(&mut self, line: &[u8]) {
        let colour = if !self.colour_err {
            None
        } else if line.starts_with(b"!! ") {
            Some(RED)
        } else if line.starts_with(b">> ") {
            Some(YELLOW)
        } else {
            None
        };
        let mut bytes = Vec::with_capacity(line.len() + 16);
        if let Some(style) = colour {
            bytes.extend_from_slice(style.render().to_string().as_bytes());
            bytes.extend_from_slice(line);
            bytes.extend_from_slice(style.render_reset().to_string().as_bytes());
        } else {
            bytes.extend_from_slice(line);
        }
        bytes.push(b'\n');
        self.write(To::Err, &bytes);
    }

    /// An entity ID in bold (where colour is used).
    pub fn bold(&self, to: To, text: &str) -> String {
        if self.colour(to) {
            paint(BOLD, text)
        } else {
            text.to_owned()
        }
    }

    /// Colours diff lines (where colour is used), as Holo does.
    pub fn colour_diff(&self, to: To, diff: &str) -> String {
        if !self.colour(to) {
            return diff.to_owned();
        }
        let mut out = String::with_capacity(diff.len() + 64);
        for line in diff.split_inclusive('\n') {
            let (body, end) = match line.strip_suffix('\n') {
                Some(body) => (body, "\n"),
                None => (line, ""),
            };
            let colour = if ["diff ", "new ", "deleted ", "--- ", "+++ "]
                .iter()
                .any(|p| body.starts_with(p))
            {
                Some(BOLD)
            } else if body.starts_with("@@ ") {
                Some(CYAN)
            } else if body.starts_with('-') {
                Some(PLAIN_RED)
            } else if body.starts_with('+') {
                Some(GREEN)
            } else {
                None
            };
            match colour {
                Some(style) => {
                    out.push_str(&paint(style, body));
                    out.push_str(end);
                }
                None => out.push_str(line),
            }
        }
        out
    }
}

/// An untracked write, as Holo's plain prints.
pub fn raw(to: To, bytes: &[u8]) {
    // A closed stdout (`ral holo scan | head`) must not panic; the write
    // error is dropped like a print to a closed pipe in Holo.
    let _ = match to {
        To::Out => {
            let mut out = std::io::stdout().lock();
            out.write_all(bytes).and_then(|()| out.flush())
        }
        To::Err => std::io::stderr().lock().write_all(bytes),
    };
}

/// Formats `key value` with the key right-aligned to `width` characters.
pub fn info_line(width: usize, key: &str, value: &str) -> String {
    format!("{key:>width$} {value}\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn printer() -> Printer {
        Printer {
            had_output: false,
            trailing_newlines: 0,
            colour_out: false,
            colour_err: false,
            out_to_err: false,
        }
    }

    #[test]
    fn paragraphs_never_remove_newlines_and_end_in_one_blank_line() {
        let mut p = printer();
        p.end_paragraph(To::Out);
        assert!(!p.had_output, "ending before any output does nothing");
        p.trailing_newlines = 0;
        p.had_output = true;
        p.trailing_newlines = 3;
        p.end_paragraph(To::Out);
        assert_eq!(p.trailing_newlines, 3);
        p.trailing_newlines = 1;
        p.end_paragraph(To::Out);
        assert_eq!(p.trailing_newlines, 2);
    }

    #[test]
    fn info_keys_are_right_aligned() {
        assert_eq!(info_line(12, "apply", "x"), "       apply x\n");
        assert_eq!(info_line(3, "store at", "y"), "store at y\n");
    }

    #[test]
    fn diff_colours_follow_the_first_matching_prefix() {
        let mut p = printer();
        assert_eq!(p.colour_diff(To::Out, "--- a\n-x\n"), "--- a\n-x\n");
        p.colour_out = true;
        assert_eq!(
            p.colour_diff(To::Out, "--- a\n-x\n@@ -1 +1 @@\n ctx\n+y"),
            "\x1b[1m--- a\x1b[0m\n\x1b[31m-x\x1b[0m\n\x1b[36m@@ -1 +1 @@\x1b[0m\n ctx\n\x1b[32m+y\x1b[0m"
        );
    }
}
