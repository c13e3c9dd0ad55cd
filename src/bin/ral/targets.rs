//! `ral plan -t`/`ral apply -t`: the same manifests on every target, one
//! plan per target, each with its own state store on this machine
//! (`STATE_DIR/TARGET.db`); the output grouped under each target's name
//! or gathered in `{"targets": [...]}`, and the worst outcome.

use std::path::{Path, PathBuf};

use crate::converge::{self, ConvergeArgs, Ending, Input, Mode};
use crate::load;
use crate::remote::{self, Fleet};

pub fn execute(args: &ConvergeArgs, mode: Mode, input: &Input) -> anyhow::Result<Ending> {
    // An interrupt between calls is only noted too, so that the masters
    // are ended and the control directory removed before ral ends.
    ral::process::forward_interrupts_deferred();
    remote::check_files(&args.remote)?;
    let targets = args.remote.select(&args.root)?;
    let state_dir = match &args.state {
        Some(dir) => dir.clone(),
        None => default_state_dir()?,
    };
    // Discovery runs here; each target gets its own root.
    let (local, registry) = load::load(&converge::setup(args, Path::new("/")))?;
    let fleet = Fleet::new(&args.remote, targets, &local, &registry)?;
    let failed = Ending {
        errors: true,
        ..Ending::default()
    };
    let runs = fleet.run_all(&local, failed, |target, host, out| {
        let state = state_dir.join(format!("{}.db", file_name(&target.name)));
        converge::converge(args, mode, input, host, &registry, &state, out)
    });
    remote::report(
        &runs,
        args.json,
        args.quiet,
        &format!("ral {}", mode_name(mode)),
    )?;
    let mut all = Ending::default();
    for run in &runs {
        all.changes |= run.outcome.changes;
        all.failures |= run.outcome.failures;
        all.errors |= run.outcome.errors;
    }
    Ok(all)
}

fn mode_name(mode: Mode) -> &'static str {
    match mode {
        Mode::Plan => "plan",
        Mode::Apply => "apply",
    }
}

/// Where the stores of targets are kept by default.
fn default_state_dir() -> anyhow::Result<PathBuf> {
    let base = match std::env::var_os("XDG_STATE_HOME").map(PathBuf::from) {
        Some(dir) if dir.is_absolute() => dir,
        _ => match std::env::var_os("HOME").map(PathBuf::from) {
            Some(home) if home.is_absolute() => home.join(".local/state"),
            _ => anyhow::bail!("no HOME to keep the targets' state stores in: give --state DIR"),
        },
    };
    Ok(base.join("ral/targets"))
}

/// A target's name as a file name: `/`, NUL and `%` are escaped as `%XX`,
/// and so is a leading dot, so distinct names stay distinct files.
fn file_name(name: &str) -> String {
    let mut out = String::new();
    for (at, c) in name.chars().enumerate() {
        if c == '/' || c == '%' || c == '\0' || (at == 0 && c == '.') {
            out.push_str(&format!("%{:02X}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::file_name;

    #[test]
    fn target_names_make_distinct_file_names() {
        assert_eq!(file_name("web1"), "web1");
        assert_eq!(file_name("ssh://u@h:22/x"), "ssh:%2F%2Fu@h:22%2Fx");
        assert_eq!(file_name(".."), "%2E.");
        assert_ne!(file_name("a/b"), file_name("a%2Fb"));
    }
}
