//! Man pages for ral's binaries: the sections clap_mangen makes from the
//! command's own definitions (with the help text's Markdown backticks
//! taken out, which roff would print as they are), then the sections a
//! man page needs that clap knows nothing of: ENVIRONMENT, FILES, EXIT
//! STATUS, EXAMPLES and SEE ALSO.

use std::io::{self, Write};

/// The sections beyond clap's: each a list of (term, text) pairs, except
/// SEE ALSO, one line.
pub struct Sections<'a> {
    pub environment: &'a [(&'a str, &'a str)],
    pub files: &'a [(&'a str, &'a str)],
    pub exit_status: &'a [(&'a str, &'a str)],
    pub examples: &'a [(&'a str, &'a str)],
    pub see_also: &'a str,
}

/// Writes the man page of `command` with `sections`.
pub fn render(command: clap::Command, sections: &Sections, out: &mut dyn Write) -> io::Result<()> {
    let command = without_backticks(command);
    let man = clap_mangen::Man::new(command.clone());
    let mut page = Vec::new();
    man.render_title(&mut page)?;
    man.render_name_section(&mut page)?;
    man.render_synopsis_section(&mut page)?;
    man.render_description_section(&mut page)?;
    man.render_options_section(&mut page)?;
    subcommands(&mut page, &command)?;
    pairs(&mut page, "ENVIRONMENT", sections.environment)?;
    pairs(&mut page, "FILES", sections.files)?;
    pairs(&mut page, "EXIT STATUS", sections.exit_status)?;
    examples(&mut page, sections.examples)?;
    writeln!(page, ".SH \"SEE ALSO\"\n{}", roff_text(sections.see_also))?;
    man.render_version_section(&mut page)?;
    out.write_all(&page)
}

/// Each subcommand (but `help`) with its description and options, in this
/// page: there is no page of its own to point to. Their own subcommands
/// (`ral agent status`) follow each, named in full.
fn subcommands(out: &mut Vec<u8>, command: &clap::Command) -> io::Result<()> {
    if command
        .get_subcommands()
        .all(|sub| sub.get_name() == "help")
    {
        return Ok(());
    }
    writeln!(out, ".SH COMMANDS")?;
    described(out, command, command.get_name())
}

/// The subcommands of `command`, whose full name is `name`, and theirs.
fn described(out: &mut Vec<u8>, command: &clap::Command, name: &str) -> io::Result<()> {
    for sub in command
        .get_subcommands()
        .filter(|sub| sub.get_name() != "help")
    {
        let name = format!("{name} {}", sub.get_name());
        writeln!(out, ".SS \"{name}\"")?;
        let about = sub.get_long_about().or(sub.get_about());
        if let Some(about) = about {
            writeln!(out, "{}", roff_text(&about.to_string()))?;
        }
        for arg in sub.get_arguments().filter(|arg| !arg.is_hide_set()) {
            let mut term = match (arg.get_short(), arg.get_long()) {
                (Some(short), Some(long)) => format!("-{short}, --{long}"),
                (Some(short), None) => format!("-{short}"),
                (None, Some(long)) => format!("--{long}"),
                (None, None) => String::new(),
            };
            // A flag (--noop) takes no value, whatever name clap gives it.
            let names = arg
                .get_value_names()
                .filter(|_| arg.get_action().takes_values());
            if let Some(names) = names {
                let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
                if !term.is_empty() {
                    term.push(' ');
                }
                term.push_str(&names.join(" "));
            } else if term.is_empty() {
                term = arg.get_id().to_string();
            }
            let help = arg
                .get_long_help()
                .or(arg.get_help())
                .map(|h| h.to_string())
                .unwrap_or_default();
            writeln!(
                out,
                ".TP\n\\fB{}\\fR\n{}",
                roff_text(&term),
                roff_text(&help)
            )?;
        }
        if let Some(after) = sub.get_after_long_help().or(sub.get_after_help()) {
            writeln!(out, ".PP\n.nf\n{}\n.fi", roff_text(&after.to_string()))?;
        }
        described(out, sub, &name)?;
    }
    Ok(())
}

/// A section of tagged paragraphs: the term in bold, its text below.
fn pairs(out: &mut Vec<u8>, title: &str, items: &[(&str, &str)]) -> io::Result<()> {
    writeln!(out, ".SH \"{title}\"")?;
    for (term, text) in items {
        writeln!(out, ".TP\n\\fB{}\\fR\n{}", roff_text(term), roff_text(text))?;
    }
    Ok(())
}

/// Each example: what it does, then the command, verbatim.
fn examples(out: &mut Vec<u8>, items: &[(&str, &str)]) -> io::Result<()> {
    writeln!(out, ".SH EXAMPLES")?;
    for (what, command) in items {
        writeln!(
            out,
            ".PP\n{}\n.PP\n.RS 4\n.nf\n{}\n.fi\n.RE",
            roff_text(what),
            roff_text(command)
        )?;
    }
    Ok(())
}

/// Text as roff prints it literally: backslashes and hyphens escaped, and
/// no line starting with a request character.
fn roff_text(text: &str) -> String {
    text.replace('\\', "\\e")
        .replace('-', "\\-")
        .lines()
        .map(|line| {
            if line.starts_with('.') || line.starts_with('\'') {
                format!("\\&{line}")
            } else {
                line.to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The command with every help text's backticks removed, subcommands too.
fn without_backticks(command: clap::Command) -> clap::Command {
    let plain = |text: &clap::builder::StyledStr| text.to_string().replace('`', "");
    let mut command = command;
    if let Some(about) = command.get_about().map(plain) {
        command = command.about(about);
    }
    if let Some(about) = command.get_long_about().map(plain) {
        command = command.long_about(about);
    }
    if let Some(after) = command.get_after_help().map(plain) {
        command = command.after_help(after);
    }
    if let Some(after) = command.get_after_long_help().map(plain) {
        command = command.after_long_help(after);
    }
    command
        .mut_args(|arg| {
            let help = arg.get_help().map(plain);
            let long = arg.get_long_help().map(plain);
            let arg = match help {
                Some(help) => arg.help(help),
                None => arg,
            };
            match long {
                Some(long) => arg.long_help(long),
                None => arg,
            }
        })
        .mut_subcommands(without_backticks)
}
