//! `ral agent unit`: the systemd unit that runs the agent as it was asked
//! to run here (this ral, the options given, the manifests as absolute
//! paths), printed for /etc/systemd/system/ral-agent.service or
//! `systemctl edit --full --force ral-agent.service`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context};
use ral::agent::duration::show;

use super::RunArgs;

pub fn run(args: &RunArgs) -> ExitCode {
    match unit(args) {
        Ok(text) => {
            let mut out = crate::unread::stdout();
            let _ = out.write_all(text.as_bytes()).and_then(|()| out.flush());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!(
                "ral agent unit: error: {}",
                ral::text::escape_lines(&format!("{e:#}"))
            );
            ExitCode::from(2)
        }
    }
}

/// The unit's text.
fn unit(args: &RunArgs) -> anyhow::Result<String> {
    let exe = std::env::current_exe().context("finding this ral")?;
    let mut words = vec![text(&exe)?, "agent".to_owned()];
    words.extend(options(args)?);
    for manifest in &args.manifests {
        words.push(text(&absolute(manifest)?)?);
    }
    let exec = words
        .iter()
        .map(|word| quoted(word))
        .collect::<anyhow::Result<Vec<_>>>()?
        .join(" ");
    // A run stops between tasks: the longest a task may take, and then
    // some for the record.
    let stop = args.timeout.as_secs() + 30;
    Ok(format!(
        "# ral agent: keeps this machine converged to its manifests.\n\
         # Made by `ral agent unit`; install with\n\
         #   ral agent unit ... > /etc/systemd/system/ral-agent.service\n\
         #   systemctl daemon-reload && systemctl enable --now ral-agent\n\
         # `systemctl reload ral-agent` reads the manifests again,\n\
         # `systemctl kill -s USR1 ral-agent` runs at once.\n\
         [Unit]\n\
         Description=ral agent: keep this machine converged to its manifests\n\
         Documentation=man:ral(1)\n\
         Wants=network-online.target\n\
         After=network-online.target\n\
         \n\
         [Service]\n\
         Type=notify\n\
         NotifyAccess=main\n\
         ExecStart={exec}\n\
         ExecReload=/bin/kill -HUP $MAINPID\n\
         # SIGTERM to ral alone: the running task finishes and the run is\n\
         # recorded; the providers end with their calls.\n\
         KillMode=mixed\n\
         TimeoutStopSec={stop}\n\
         WatchdogSec=60\n\
         Restart=on-failure\n\
         RestartSec=30\n\
         \n\
         [Install]\n\
         WantedBy=multi-user.target\n"
    ))
}

/// `path` made absolute from here: systemd starts the unit in `/`, where
/// a relative path names something else (`--root .` the machine itself).
fn absolute(path: &Path) -> anyhow::Result<PathBuf> {
    std::path::absolute(path).with_context(|| format!("{}", path.display()))
}

/// `path` as a word of the command line; a name that is not UTF-8 is
/// refused rather than changed into another.
fn text(path: &Path) -> anyhow::Result<String> {
    match path.to_str() {
        Some(text) => Ok(text.to_owned()),
        None => bail!(
            "{}: not UTF-8, which a unit's command line cannot hold",
            path.display()
        ),
    }
}

/// The options given that differ from the defaults, as words; the paths
/// among them (the root, the store, the include directories, `-e @FILE`)
/// made absolute.
fn options(args: &RunArgs) -> anyhow::Result<Vec<String>> {
    let mut words = Vec::new();
    let mut pair = |flag: &str, value: String| {
        words.push(flag.to_owned());
        words.push(value);
    };
    if args.interval != std::time::Duration::from_secs(1800) {
        pair("--interval", show(args.interval));
    }
    if !args.splay.is_zero() {
        pair("--splay", show(args.splay));
    }
    if args.backoff != std::time::Duration::from_secs(5) {
        pair("--backoff", show(args.backoff));
    }
    for dir in &args.include {
        pair("-I", text(&absolute(dir)?)?);
    }
    if args.root.as_os_str() != "/" {
        pair("--root", text(&absolute(&args.root)?)?);
    }
    if let Some(state) = &args.state {
        pair("--state", text(&absolute(state)?)?);
    }
    if args.timeout != std::time::Duration::from_secs(300) {
        pair("--timeout", args.timeout.as_secs().to_string());
    }
    if args.jobs != 4 {
        pair("--jobs", args.jobs.to_string());
    }
    for vars in &args.extra_vars {
        match vars.strip_prefix('@') {
            Some(file) => pair("-e", format!("@{}", text(&absolute(Path::new(file))?)?)),
            None => pair("-e", vars.clone()),
        }
    }
    if let Some(level) = &args.log_level {
        pair("--log-level", level.clone());
    }
    for (set, flag) in [
        (args.noop, "--noop"),
        (args.keep_removed, "--keep-removed"),
        (args.quiet, "--quiet"),
        (args.strict, "--strict"),
        (args.no_cache, "--no-cache"),
    ] {
        if set {
            words.push(flag.to_owned());
        }
    }
    Ok(words)
}

/// `word` as systemd's command lines read it back: as it is when plain,
/// else in double quotes with `\` and `"` escaped; `%` and `$` doubled
/// (specifiers and variables otherwise). A control character is refused.
fn quoted(word: &str) -> anyhow::Result<String> {
    if word.chars().any(char::is_control) {
        bail!("{word:?} holds a control character, which a unit's command line cannot");
    }
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-:=,@+".contains(c));
    let doubled = word.replace('%', "%%").replace('$', "$$");
    if plain {
        return Ok(doubled);
    }
    Ok(format!(
        "\"{}\"",
        doubled.replace('\\', "\\\\").replace('"', "\\\"")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_quoted_as_systemd_reads_them() {
        assert_eq!(quoted("/etc/ral/site.yaml").unwrap(), "/etc/ral/site.yaml");
        assert_eq!(quoted("a b").unwrap(), "\"a b\"");
        assert_eq!(quoted("100%").unwrap(), "\"100%%\"");
        assert_eq!(quoted("$HOME").unwrap(), "\"$$HOME\"");
        assert_eq!(quoted("say \"hi\"\\").unwrap(), "\"say \\\"hi\\\"\\\\\"");
        assert_eq!(quoted("").unwrap(), "\"\"");
        assert!(quoted("a\nb").is_err());
    }
}
