//! Diagnostics on stderr through `log`: ralsh's own messages, and provider
//! stderr lines under the provider's qualified name.

use std::io::Write;

/// Sets up env_logger: `-q` wins, then `-l`, then RUST_LOG, then warn.
pub fn init(level: Option<&str>, quiet: bool) {
    let mut builder = env_logger::Builder::new();
    let filter = if quiet {
        "error".to_owned()
    } else if let Some(level) = level {
        level.to_owned()
    } else {
        std::env::var("RUST_LOG").unwrap_or_else(|_| "warn".to_owned())
    };
    builder.parse_filters(&filter);
    builder.format(|out, record| {
        let level = record.level().as_str().to_ascii_lowercase();
        let target = record.target();
        if target == "ral" || target.starts_with("ral::") || target.starts_with("ralsh") {
            writeln!(out, "ralsh: {level}: {}", record.args())
        } else {
            writeln!(out, "ralsh: {level}: [{target}] {}", record.args())
        }
    });
    builder.init();
}
