//! One Holo plugin: its directories, its environment, and running one of its
//! operations (`info`, `scan`, `apply`, `force-apply`, `diff`) through the
//! process module, with the caller's environment plus the `HOLO_*`
//! variables, as Holo gives them.

use std::ffi::OsString;
use std::path::Path;
use std::time::Duration;

use super::output::{Printer, To};
use super::paths::{for_env, join};
use super::streams::run_streams;
use crate::error::{Error, Exited};
use crate::process::streams::{Ended, Stream, StreamCall};

/// The API version this host speaks.
pub const API_VERSION: i64 = 3;

/// Why a program Holo runs (a plugin, or git for a diff) did not run, or
/// did not succeed. Shown in Holo's words, as Go writes them: Holo's
/// interface prescribes them, and its users' scripts read them.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The program could not be started.
    #[error("fork/exec {binary}: {}", os_text(.error))]
    Spawn {
        binary: String,
        error: std::io::Error,
    },
    /// No directory of the PATH holds the program.
    #[error("exec: \"{program}\": executable file not found in $PATH")]
    NotOnPath { program: String },
    /// The program ended unsuccessfully: "exit status 1", "signal: killed".
    #[error("{}", status_text(.status, *.signal))]
    Exited { status: Exited, signal: Option<i32> },
    /// The run failed otherwise (its time limit): ral's own message.
    #[error(transparent)]
    Run(Error),
}

impl RunError {
    /// The failure of a program that ended as `ended` says.
    pub fn exited(ended: &Ended) -> RunError {
        RunError::Exited {
            status: ended.status,
            signal: ended.signal,
        }
    }
}

/// A configured plugin whose binary exists.
#[derive(Debug, Clone)]
pub struct Plugin {
    pub id: String,
    /// The binary as configured (argv[0] and messages use it unchanged).
    pub binary: String,
    /// `ROOT/usr/share/holo/ID`: the static resources.
    pub static_dir: String,
    /// `CACHE/generated-resources/ID`: what scan, apply and diff see.
    pub resource_dir: String,
    pub state_dir: String,
    pub cache_dir: String,
}

/// What every plugin run shares.
pub struct Runner {
    /// `HOLO_ROOT_DIR` as given (or `/`).
    pub root: String,
    /// The caller's environment, passed on.
    pub base_env: Vec<(OsString, OsString)>,
    pub timeout: Duration,
}

/// Receives a plugin's output lines as they arrive.
pub type Forward<'f> = dyn FnMut(&mut Printer, Stream, &[u8]) + 'f;

/// One operation of a plugin.
#[derive(Debug, Clone, Copy)]
pub struct Operation<'a> {
    /// `info`, `scan`, `apply`, `force-apply` or `diff`.
    pub name: &'a str,
    pub entity: Option<&'a str>,
    pub phase: Phase,
    /// Whether file descriptor 3 is opened and read.
    pub fd3: bool,
}

impl<'a> Operation<'a> {
    /// An operation on all of the plugin's entities (`info`, `scan`).
    pub fn whole(name: &'a str, phase: Phase) -> Operation<'a> {
        Operation {
            name,
            entity: None,
            phase,
            fd3: false,
        }
    }

    /// An operation on one entity, with file descriptor 3.
    pub fn on(name: &'a str, entity: &'a str) -> Operation<'a> {
        Operation {
            name,
            entity: Some(entity),
            phase: Phase::Run,
            fd3: true,
        }
    }
}

/// Which resource directory a run sees: the static one during `info`, the
/// virtual copy afterwards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Info,
    Run,
}

impl Plugin {
    pub fn new(id: &str, binary: &str, root: &str, cache: &str) -> Plugin {
        Plugin {
            id: id.to_owned(),
            binary: binary.to_owned(),
            static_dir: join(root, &format!("usr/share/holo/{id}")),
            resource_dir: join(cache, &format!("generated-resources/{id}")),
            state_dir: join(root, &format!("var/lib/holo/{id}")),
            cache_dir: join(cache, id),
        }
    }
}

impl Runner {
    fn env(&self, plugin: &Plugin, phase: Phase) -> Vec<(OsString, OsString)> {
        let resource_dir = match phase {
            Phase::Info => &plugin.static_dir,
            Phase::Run => &plugin.resource_dir,
        };
        let mut added: Vec<(&str, String)> = vec![
            ("HOLO_API_VERSION", API_VERSION.to_string()),
            ("HOLO_CACHE_DIR", for_env(&plugin.cache_dir)),
            ("HOLO_RESOURCE_DIR", for_env(resource_dir)),
            ("HOLO_STATE_DIR", for_env(&plugin.state_dir)),
        ];
        let root_given = self
            .base_env
            .iter()
            .any(|(k, v)| k == "HOLO_ROOT_DIR" && !v.is_empty());
        if !root_given {
            added.push(("HOLO_ROOT_DIR", for_env(&self.root)));
        }
        let mut env: Vec<(OsString, OsString)> = self
            .base_env
            .iter()
            .filter(|(k, _)| !added.iter().any(|(name, _)| k == name))
            .cloned()
            .collect();
        env.extend(added.into_iter().map(|(k, v)| (k.into(), v.into())));
        env
    }

    /// Runs `BINARY OP [ENTITY]`. Stderr lines go to the printer as they come
    /// (through `on_output` when given, so a heading can go first); stdout
    /// lines go to `on_output`, or are collected when it is `None`.
    pub fn run(
        &self,
        plugin: &Plugin,
        op: Operation,
        printer: &mut Printer,
        on_output: Option<&mut Forward>,
    ) -> Result<(Ended, Vec<u8>), RunError> {
        let env = self.env(plugin, op.phase);
        let mut args: Vec<OsString> = vec![op.name.into()];
        if let Some(entity) = op.entity {
            args.push(entity.into());
        }
        let arg0 = OsString::from(&plugin.binary);
        let call = StreamCall {
            label: &format!("plugin {}", plugin.id),
            program: Path::new(&plugin.binary),
            arg0: &arg0,
            args: &args,
            env: &env,
            fd3: op.fd3,
            stdin: None,
            timeout: self.timeout,
            release: false,
            dir: None,
            user: None,
        };
        let mut stdout = Vec::new();
        let mut on_output = on_output;
        let ended = run_streams(&call, &mut |stream, line| match (&mut on_output, stream) {
            (Some(forward), _) => forward(printer, stream, line),
            (None, Stream::Stdout) => {
                stdout.extend_from_slice(line);
                stdout.push(b'\n');
            }
            (None, Stream::Stderr) => printer.plugin_stderr_line(line),
        })
        .map_err(|e| match e {
            Error::Spawn { source, .. } => RunError::Spawn {
                binary: plugin.binary.clone(),
                error: source,
            },
            other => RunError::Run(other),
        })?;
        if ended.killed_leftovers {
            printer.warning(&format!(
                "plugin {}: processes started by '{}' kept its output open after it exited; they were killed",
                plugin.id, op.name
            ));
        }
        Ok((ended, stdout))
    }
}

/// How a finished program ended, in Go's words: "exit status 1",
/// "signal: killed".
pub fn exit_text(ended: &Ended) -> String {
    status_text(&ended.status, ended.signal)
}

/// [`exit_text`] of a program that ended with `status`, by `signal` if
/// one ended it.
fn status_text(status: &Exited, signal: Option<i32>) -> String {
    let Some(signal) = signal else {
        return status.to_string();
    };
    let name = match signal {
        libc::SIGHUP => "hangup",
        libc::SIGINT => "interrupt",
        libc::SIGQUIT => "quit",
        libc::SIGILL => "illegal instruction",
        libc::SIGTRAP => "trace/breakpoint trap",
        libc::SIGABRT => "aborted",
        libc::SIGBUS => "bus error",
        libc::SIGFPE => "floating point exception",
        libc::SIGKILL => "killed",
        libc::SIGUSR1 => "user defined signal 1",
        libc::SIGSEGV => "segmentation fault",
        libc::SIGUSR2 => "user defined signal 2",
        libc::SIGPIPE => "broken pipe",
        libc::SIGALRM => "alarm clock",
        libc::SIGTERM => "terminated",
        _ => return format!("signal: signal {signal}"),
    };
    format!("signal: {name}")
}

/// An OS error as Go prints it: "no such file or directory".
pub fn os_text(error: &std::io::Error) -> String {
    match error.raw_os_error() {
        Some(_) => {
            let text = crate::sdk::error::strerror(error);
            let mut chars = text.chars();
            match chars.next() {
                Some(first) => first.to_lowercase().chain(chars).collect(),
                None => text,
            }
        }
        None => error.to_string(),
    }
}

/// Passes a plugin's stdout or stderr line on to the user.
pub fn pass_on(printer: &mut Printer, stream: Stream, line: &[u8]) {
    match stream {
        Stream::Stdout => {
            let mut bytes = line.to_vec();
            bytes.push(b'\n');
            printer.write(To::Out, &bytes);
        }
        Stream::Stderr => printer.plugin_stderr_line(line),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_are_told_in_go_s_words() {
        let missing = RunError::Spawn {
            binary: "/usr/lib/holo/holo-x".to_owned(),
            error: std::io::Error::from_raw_os_error(libc::ENOENT),
        };
        assert_eq!(
            missing.to_string(),
            "fork/exec /usr/lib/holo/holo-x: no such file or directory"
        );
        let git = RunError::NotOnPath {
            program: "git".to_owned(),
        };
        assert_eq!(
            git.to_string(),
            "exec: \"git\": executable file not found in $PATH"
        );
        let exited = |status, signal| RunError::Exited { status, signal }.to_string();
        assert_eq!(exited(Exited::Code(3), None), "exit status 3");
        assert_eq!(
            exited(Exited::Signal(libc::SIGKILL), Some(libc::SIGKILL)),
            "signal: killed"
        );
    }

    #[test]
    fn a_plugin_that_cannot_start_is_a_spawn_failure() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_str().unwrap();
        let binary = format!("{root}/holo-missing");
        let plugin = Plugin::new("missing", &binary, root, root);
        let runner = Runner {
            root: root.to_owned(),
            base_env: Vec::new(),
            timeout: Duration::from_secs(10),
        };
        let error = runner
            .run(
                &plugin,
                Operation::whole("scan", Phase::Run),
                &mut Printer::new(),
                None,
            )
            .unwrap_err();
        assert!(matches!(error, RunError::Spawn { .. }), "{error:?}");
        assert_eq!(
            error.to_string(),
            format!("fork/exec {binary}: no such file or directory")
        );
    }

    #[test]
    fn an_os_error_reads_as_go_prints_it() {
        let missing = std::io::Error::from_raw_os_error(libc::ENOENT);
        assert_eq!(os_text(&missing), "no such file or directory");
        let denied = std::io::Error::from_raw_os_error(libc::EACCES);
        assert_eq!(os_text(&denied), "permission denied");
        let plain = std::io::Error::other("gone");
        assert_eq!(os_text(&plain), "gone");
    }
}
