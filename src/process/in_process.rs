//! Calls of providers the host runs in its own process (ral's native
//! ones, see `crate::native`): no child, but the same rules as for one.
//! The provider is served the call's arguments, document and environment
//! as a program would be, and its answer and log go through the same
//! handler as a child's output: every stdout line to the caller's sink
//! within the line and answer limits, every stderr line logged by level
//! and redacted, the same counters and the same errors. A provider that
//! panics fails its call as a program that crashed would, and the host
//! goes on.

use std::sync::Arc;

use super::call::{Answers, Call, Finished, Idle, LineSink};
use super::pipes::Piece;
use crate::error::{Error, Exited, Result};
use crate::sdk;

/// Runs `call` by serving `provider` here, then hands its output to
/// `sink` line by line as [`super::run`] does a child's.
pub fn run(
    call: &Call,
    provider: &dyn sdk::Provider,
    sink: &mut LineSink,
    idle: &mut Idle,
) -> Result<Finished> {
    let env: Vec<(String, String)> = call
        .env
        .vars()
        .iter()
        .map(|(k, v)| {
            (
                k.to_string_lossy().into_owned(),
                v.to_string_lossy().into_owned(),
            )
        })
        .collect();
    // Code here cannot be killed at its time limit as a program is: it is
    // told the limit, and starts nothing past it.
    let deadline = sdk::Deadline::after(call.timeout);
    let commands = Arc::new(Hosted {
        label: call.label.to_owned(),
        deadline: deadline.clone(),
    });
    let stdin = call.stdin.as_deref().unwrap_or_default();
    let mut stdout = Vec::new();
    let stderr = sdk::Buffer::default();
    let served = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        sdk::serve::serve(
            provider,
            &call.args,
            &mut { stdin },
            &sdk::serve::Made {
                env: &env,
                commands,
                deadline: Some(deadline),
            },
            &mut stdout,
            Box::new(stderr.clone()),
        )
    }));
    let mut answers = Answers::new(call, sink, idle);
    let logged = stderr.take();
    for piece in pieces(&logged, super::call::MAX_LINE) {
        answers.stderr.log(call, piece);
    }
    let status = match served {
        Ok(status) => status,
        Err(payload) => {
            answers.stderr.report_dropped(call);
            let said = payload
                .downcast_ref::<&str>()
                .map(|text| text.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            return Err(Error::Protocol {
                provider: call.label.to_owned(),
                action: call.action.as_str().to_owned(),
                message: format!("the native provider failed with a bug in ral: {said}"),
            });
        }
    };
    for piece in pieces(&stdout, call.max_line) {
        answers.answer(piece)?;
    }
    (answers.idle)()?;
    answers.stderr.report_dropped(call);
    answers
        .stderr
        .summary
        .ended(call, status == 0, Exited::Code(status))
}

/// The lines of `output` as a pipe's reader hands them out: each whole
/// when it fits `limit`, else its first `limit` bytes as a piece that
/// does not end the line (which the handler refuses).
fn pieces(output: &[u8], limit: usize) -> impl Iterator<Item = Piece<'_>> {
    let mut rest = output;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let (line, terminated, next) = match memchr::memchr(b'\n', rest) {
            Some(at) => (&rest[..at], true, &rest[at + 1..]),
            None => (rest, false, &rest[rest.len()..]),
        };
        rest = next;
        let ends = line.len() <= limit;
        Some(Piece {
            bytes: &line[..line.len().min(limit)],
            continues: false,
            ends,
            unterminated: !terminated,
        })
    })
}

/// Runs the commands of a provider served here through the one process
/// runner, as calls of their own: in their own process group, ended at
/// their time limit or the call's deadline, whichever comes first, and
/// known to the sweeps of what calls leave behind (a command started by
/// hand here would be taken for one).
struct Hosted {
    /// The provider's name, for errors.
    label: String,
    /// The deadline of the call the commands are run for.
    deadline: sdk::Deadline,
}

impl sdk::command::Commands for Hosted {
    fn run_spec(&self, spec: &sdk::command::Spec) -> sdk::command::Finished {
        let sdk::command::Spec {
            argv,
            env,
            timeout,
            dir,
            user,
        } = *spec;
        let mut ran = sdk::command::Finished::default();
        let Some(program) = argv.first() else {
            ran.problem = Some("could not be run: no command".to_owned());
            return ran;
        };
        if let Err(late) = self.deadline.check() {
            ran.problem = Some(format!("was not run: {}", late.message));
            return ran;
        }
        let timeout = timeout.min(self.deadline.left());
        let arg0 = std::ffi::OsString::from(program);
        let args: Vec<std::ffi::OsString> = argv[1..].iter().map(Into::into).collect();
        let env: Vec<(std::ffi::OsString, std::ffi::OsString)> =
            env.iter().map(|(k, v)| (k.into(), v.into())).collect();
        let call = super::streams::StreamCall {
            label: &self.label,
            program: std::path::Path::new(program),
            arg0: &arg0,
            args: &args,
            env: &env,
            fd3: false,
            stdin: None,
            timeout,
            release: false,
            dir,
            user,
        };
        let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
        let ended = super::streams::run_streams(&call, &mut |stream, line| {
            let kept = match stream {
                super::runner::Stream::Stdout => &mut stdout,
                super::runner::Stream::Stderr => &mut stderr,
            };
            kept.extend_from_slice(line);
            kept.push(b'\n');
            let over = kept.len().saturating_sub(sdk::command::TAIL_BYTES);
            kept.drain(..over);
        });
        match ended {
            Ok(ended) => match (ended.code, ended.signal) {
                (Some(code), _) => ran.status = Some(code),
                (None, Some(signal)) => {
                    ran.problem = Some(format!("was killed by signal {signal}"))
                }
                (None, None) => ran.problem = Some("ended without a status".to_owned()),
            },
            Err(Error::Timeout { .. }) => {
                ran.problem = Some(format!(
                    "did not finish within {}s",
                    sdk::command::seconds(timeout)
                ))
            }
            Err(err) => ran.problem = Some(format!("could not be run: {err}")),
        }
        ran.stdout = stdout;
        ran.stderr = stderr;
        ran
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;
    use crate::sdk::command::Commands;

    #[test]
    fn a_command_of_a_native_call_gets_only_what_is_left_of_its_time() {
        let dir = tempfile::tempdir().unwrap();
        let made = dir.path().join("made");
        let touch = ["/bin/sh", "-c", "touch \"$0\"", made.to_str().unwrap()].map(String::from);
        let late = Arc::new(AtomicBool::new(false));
        let hosted = Hosted {
            label: "native::test".to_owned(),
            deadline: sdk::testing::deadline(Duration::from_millis(300), &late),
        };
        // Less is left than the command's own limit: it is ended then.
        let sleep = ["sleep", "30"].map(String::from);
        let ran = hosted.run(&sleep, &[], Duration::from_secs(60));
        assert_eq!(ran.problem.as_deref(), Some("did not finish within 0.3s"));
        // Past the deadline, nothing is started.
        late.store(true, Ordering::SeqCst);
        let ran = hosted.run(&touch, &[], Duration::from_secs(60));
        assert_eq!(
            ran.problem.as_deref(),
            Some(
                "was not run: the call ran past its time limit of 0.3s (--timeout); this was \
                 not done"
            )
        );
        assert!(!made.exists());
    }
}
