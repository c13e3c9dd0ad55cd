//! Diagnostics on stderr through `log`: the binary's own messages, and
//! provider stderr lines under the provider's qualified name.

use std::io::Write;

use crate::text::{escape, escape_lines};

/// Sets up env_logger for `program`: `level` (from `-l`), then RUST_LOG,
/// then warn (error with `-q`, which asks for nothing but the exit status
/// and errors).
pub fn init(program: &'static str, level: Option<&str>, quiet: bool) {
    builder(program, level, quiet).init();
}

/// [`init`], with each record written whole to `output` instead of
/// stderr (a binary that draws on the terminal writes them around its
/// drawing).
pub fn init_to(
    program: &'static str,
    level: Option<&str>,
    quiet: bool,
    output: Box<dyn Write + Send>,
) {
    let mut builder = builder(program, level, quiet);
    builder.target(env_logger::Target::Pipe(output));
    builder.init();
}

fn builder(program: &'static str, level: Option<&str>, quiet: bool) -> env_logger::Builder {
    let mut builder = env_logger::Builder::new();
    let filter = match (level, std::env::var("RUST_LOG")) {
        (Some(level), _) => level.to_owned(),
        (None, Ok(filter)) => filter,
        (None, Err(_)) if quiet => "error".to_owned(),
        (None, Err(_)) => "warn".to_owned(),
    };
    builder.parse_filters(&filter);
    builder.format(move |out, record| {
        let level = record.level().as_str().to_ascii_lowercase();
        // Messages may quote provider text: escape at this edge, whatever
        // the message's author did.
        let message = escape_lines(&record.args().to_string());
        // Our own records have their module as target; provider stderr
        // lines are logged from crate::process under the provider's name.
        let target = record.target();
        if record.module_path() == Some(target) {
            writeln!(out, "{program}: {level}: {message}")
        } else {
            writeln!(out, "{program}: {level}: [{}] {message}", escape(target))
        }
    });
    builder
}
