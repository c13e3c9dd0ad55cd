//! One ssh connection per target: a ControlMaster whose socket lives in a
//! private directory of this run (`control_dir.rs`), opened by the first round trip (which
//! also asks whether the providers are there), shared by every provider
//! call, and closed at the end (`ssh -O exit`; on an interrupt the master
//! is ended with everything else this process started).
//!
//! Everything the user set up for ssh applies: their config (or the one
//! `--ssh-config` names), keys, agent, known hosts and jumps. ral only
//! adds what it needs: batch mode (no prompt can stall a fan-out), a
//! connect timeout, the control socket, and the port, user and key an
//! inventory gives.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use super::bundle::Bundle;
use super::control_dir::ControlDir;
use super::script;
use super::Target;
use crate::error::{Error, Result};
use crate::process::streams::{run_streams, Stream, StreamCall};
use crate::process::{self, ProviderEnv};

/// The most connections being opened at once: sshd drops new ones beyond
/// its MaxStartups (10 by default) while they authenticate.
pub const MAX_OPENING: usize = 10;
/// How long an idle master stays up when ral could not close it (killed):
/// the safety net, not the way it ends.
const CONTROL_PERSIST: &str = "60";

/// How ssh is run.
#[derive(Debug, Clone)]
pub struct SshSettings {
    /// `--ssh-config FILE`, passed as `-F FILE`.
    pub config: Option<PathBuf>,
    /// Time to connect and log in.
    pub connect_timeout: Duration,
    /// The ssh program.
    pub program: PathBuf,
}

impl Default for SshSettings {
    fn default() -> SshSettings {
        SshSettings {
            config: None,
            connect_timeout: Duration::from_secs(10),
            program: PathBuf::from("ssh"),
        }
    }
}

/// Opens sessions: holds the private directory of the control sockets
/// and the bound on connections opened at once.
pub struct Connector {
    settings: SshSettings,
    control_dir: ControlDir,
    env: ProviderEnv,
    opening: Gate,
    count: AtomicUsize,
}

impl Connector {
    pub fn new(settings: SshSettings) -> Result<Connector> {
        // Socket paths must stay short (108 bytes): the runtime directory
        // or /tmp, and a number per target.
        // ssh reads ControlPath as a config value (words, `%` tokens): the
        // directory's name keeps to letters, digits and `/._-`.
        let plain = |dir: &PathBuf| {
            dir.to_str().is_some_and(|text| {
                text.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "/._-".contains(c))
            })
        };
        let base = [
            std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from),
            Some(std::env::temp_dir()),
        ]
        .into_iter()
        .flatten()
        .find(|dir| dir.is_absolute() && dir.is_dir() && dir.as_os_str().len() < 60 && plain(dir))
        .unwrap_or_else(|| PathBuf::from("/tmp"));
        let control_dir = ControlDir::create(&base)?;
        let mut settings = settings;
        settings.program = find_program(&settings.program).ok_or_else(|| {
            Error::io(
                format!("looking for {} on PATH", settings.program.display()),
                std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    "not found: remote targets need OpenSSH's ssh client",
                ),
            )
        })?;
        Ok(Connector {
            settings,
            control_dir,
            env: ProviderEnv::inherited(),
            opening: Gate::new(MAX_OPENING),
            count: AtomicUsize::new(0),
        })
    }

    /// Connects to `target` and makes sure `bundle` is there (copying it
    /// when it is not): one round trip when it is.
    pub fn open(&self, target: &Target, bundle: &Arc<Bundle>) -> Result<Session> {
        let index = self.count.fetch_add(1, Ordering::SeqCst);
        let control = self.control_dir.path().join(index.to_string());
        let mut session = Session {
            target: target.clone(),
            program: self.settings.program.clone(),
            env: self.env.clone(),
            base_args: base_args(&self.settings, target, &control),
            control,
            remote_dir: String::new(),
            bundle: Arc::clone(bundle),
            uploaded: false,
            open: AtomicBool::new(false),
            master: Mutex::new(None),
            timeout: self.settings.connect_timeout + Duration::from_secs(20),
        };
        let answer = {
            let _opening = self.opening.enter();
            session.control(
                &[
                    "-o",
                    "ControlMaster=yes",
                    "-o",
                    &format!("ControlPersist={CONTROL_PERSIST}"),
                ],
                script::probe(bundle.digest()),
                None,
            )?
        };
        session.open.store(true, Ordering::SeqCst);
        session.find_master();
        let (present, dir) = session.answer(&answer)?;
        if !present {
            let payload = bundle.payload();
            let answer = session.control(
                &["-o", "ControlMaster=no"],
                script::upload(bundle.digest()),
                Some(&payload),
            )?;
            let (present, _) = session.answer(&answer)?;
            if !present {
                return Err(session.error("the upload of the providers did not complete".into()));
            }
            session.uploaded = true;
        }
        session.remote_dir = dir;
        Ok(session)
    }
}

/// `program` itself when it names a path, else the first executable of
/// that name on PATH: calls run in `/`, so a bare name would not do.
fn find_program(program: &Path) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    if program.components().count() > 1 {
        return Some(program.to_owned());
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(program))
        .find(|candidate| {
            std::fs::metadata(candidate)
                .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
        })
}

/// What every ssh run of a target gets, before its destination.
fn base_args(settings: &SshSettings, target: &Target, control: &Path) -> Vec<String> {
    let mut args: Vec<String> = Vec::new();
    if let Some(config) = &settings.config {
        args.extend(["-F".to_owned(), config.display().to_string()]);
    }
    for option in [
        "BatchMode=yes".to_owned(),
        format!(
            "ConnectTimeout={}",
            settings.connect_timeout.as_secs().max(1)
        ),
        format!("ControlPath={}", control.display()),
        "LogLevel=ERROR".to_owned(),
    ] {
        args.extend(["-o".to_owned(), option]);
    }
    args.push("-T".to_owned());
    if let Some(port) = target.port {
        args.extend(["-p".to_owned(), port.to_string()]);
    }
    if let Some(user) = &target.user {
        args.extend(["-l".to_owned(), user.clone()]);
    }
    if let Some(key) = &target.identity {
        args.extend(["-i".to_owned(), key.display().to_string()]);
    }
    args
}

/// One target's connection, and where its copy of the providers is.
pub struct Session {
    pub target: Target,
    program: PathBuf,
    env: ProviderEnv,
    base_args: Vec<String>,
    /// The master's control socket.
    control: PathBuf,
    /// The bundle's directory on the target.
    remote_dir: String,
    bundle: Arc<Bundle>,
    uploaded: bool,
    /// The master runs (and is to be closed).
    open: AtomicBool,
    /// The master's process ID, when known.
    master: Mutex<Option<i32>>,
    /// The limit of a control round trip.
    timeout: Duration,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("target", &self.target.name)
            .field("remote_dir", &self.remote_dir)
            .finish()
    }
}

impl Session {
    /// Whether this run copied the providers (they were not there yet).
    pub fn uploaded(&self) -> bool {
        self.uploaded
    }

    /// Where a local provider file, or directory, is on the target.
    pub fn remote_path(&self, local: &Path) -> Option<String> {
        self.bundle.remote_path(&self.remote_dir, local)
    }

    /// The program a provider call runs locally: ssh.
    pub fn program(&self) -> &Path {
        &self.program
    }

    /// ssh's environment: the caller's, as any ssh the user runs.
    pub fn env(&self) -> &ProviderEnv {
        &self.env
    }

    /// ssh's arguments for one call of `command` through the master.
    pub fn call_args(&self, command: String) -> Vec<String> {
        let mut args = self.base_args.clone();
        args.extend(["-o".to_owned(), "ControlMaster=no".to_owned()]);
        args.extend(["--".to_owned(), self.target.destination.clone(), command]);
        args
    }

    /// Closes the master (`ssh -O exit`); later calls fail. Done once,
    /// also on drop. (A SIGTERM is what an interrupt gives it; here the
    /// master is asked, since a signal that lands while it is finishing a
    /// session is sometimes lost.)
    pub fn close(&self) {
        if !self.open.swap(false, Ordering::SeqCst) {
            return;
        }
        log::debug!("{}: closing the connection", self.target.name);
        match self.ssh(&["-O", "exit"], None, None, false) {
            // After an interrupt nothing starts: the master stays listed
            // for the interrupt's end to kill.
            Err(e) => log::debug!("{}: closing the connection: {e}", self.target.name),
            Ok(_) => {
                if let Some(pid) = *self.master.lock().unwrap_or_else(|e| e.into_inner()) {
                    process::keep_running_on_interrupt(pid);
                }
            }
        }
    }

    /// Finds the master, so that an interrupt can end it too: among this
    /// process's children by the title ssh gives it (it was adopted when
    /// ssh went to the background), else by asking it (`ssh -O check`).
    fn find_master(&self) {
        let title = format!("ssh: {} [mux]", self.control.display());
        let pid = process::adopted_child(&title).or_else(|| {
            let (_, _, stderr) = self.ssh(&["-O", "check"], None, None, false).ok()?;
            stderr.iter().find_map(|line| {
                line.split_once("(pid=")?
                    .1
                    .split_once(')')?
                    .0
                    .parse::<i32>()
                    .ok()
            })
        });
        log::debug!("{}: connected (master {pid:?})", self.target.name);
        if let Some(pid) = pid {
            process::end_on_interrupt(pid);
            *self.master.lock().unwrap_or_else(|e| e.into_inner()) = Some(pid);
        }
    }

    /// One ssh run of this target outside the provider calls: `options`
    /// before the destination, `command` after it; how it ended, with its
    /// stdout and stderr lines.
    fn ssh(
        &self,
        options: &[&str],
        command: Option<String>,
        stdin: Option<&[u8]>,
        release: bool,
    ) -> Result<(process::streams::Ended, Vec<String>, Vec<String>)> {
        let mut args: Vec<OsString> = self.base_args.iter().map(OsString::from).collect();
        args.extend(options.iter().map(OsString::from));
        args.extend(["--".into(), self.target.destination.clone().into()]);
        args.extend(command.map(OsString::from));
        let arg0 = OsString::from("ssh");
        let label = format!("{}: ssh", self.target.name);
        let call = StreamCall {
            label: &label,
            program: &self.program,
            arg0: &arg0,
            args: &args,
            env: self.env.vars(),
            fd3: false,
            stdin,
            timeout: self.timeout,
            release,
        };
        let mut stdout = Vec::new();
        let mut stderr = Vec::new();
        let ended = run_streams(&call, &mut |stream, line| {
            let line = String::from_utf8_lossy(line).trim_end().to_owned();
            match stream {
                Stream::Stdout => stdout.push(line),
                Stream::Stderr => stderr.push(line),
            }
        })?;
        Ok((ended, stdout, stderr))
    }

    /// A probe or upload: its stdout lines, or the error its stderr
    /// explains. The master it may start stays up for the later calls.
    fn control(
        &self,
        options: &[&str],
        command: String,
        stdin: Option<&[u8]>,
    ) -> Result<Vec<String>> {
        let (ended, stdout, stderr) =
            self.ssh(options, Some(command), stdin, true)
                .map_err(|e| match e {
                    Error::Timeout { limit, .. } => self.error(format!(
                        "no answer within {}s; is it reachable?",
                        limit.as_secs()
                    )),
                    other => other,
                })?;
        if !ended.success() {
            let said = stderr
                .iter()
                .map(|line| line.strip_prefix("error: ").unwrap_or(line))
                .filter(|line| !line.is_empty())
                .collect::<Vec<_>>()
                .join("; ");
            let said = if said.is_empty() {
                format!("ssh ended with {}", ended.status)
            } else {
                said
            };
            return Err(self.error(said));
        }
        for line in &stderr {
            log::warn!("{}: ssh: {line}", self.target.name);
        }
        Ok(stdout)
    }

    /// The bundle's state and directory from a probe's or upload's lines.
    fn answer(&self, lines: &[String]) -> Result<(bool, String)> {
        lines
            .iter()
            .find_map(|line| script::parse_answer(line))
            .map(|(present, dir)| (present, dir.to_owned()))
            .ok_or_else(|| {
                self.error(format!(
                    "its shell did not answer as expected (it said: {})",
                    lines.join(" / ")
                ))
            })
    }

    fn error(&self, message: String) -> Error {
        Error::Remote {
            target: self.target.name.clone(),
            message,
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.close();
    }
}

/// A counting gate: at most `limit` holders at once.
struct Gate {
    free: Mutex<usize>,
    changed: Condvar,
}

struct Permit<'a>(&'a Gate);

impl Gate {
    fn new(limit: usize) -> Gate {
        Gate {
            free: Mutex::new(limit),
            changed: Condvar::new(),
        }
    }

    fn enter(&self) -> Permit<'_> {
        let mut free = self.free.lock().unwrap_or_else(|e| e.into_inner());
        while *free == 0 {
            free = self.changed.wait(free).unwrap_or_else(|e| e.into_inner());
        }
        *free -= 1;
        Permit(self)
    }

    #[cfg(test)]
    fn try_enter(&self) -> Option<Permit<'_>> {
        let mut free = self.free.lock().unwrap_or_else(|e| e.into_inner());
        if *free == 0 {
            return None;
        }
        *free -= 1;
        Some(Permit(self))
    }
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        *self.0.free.lock().unwrap_or_else(|e| e.into_inner()) += 1;
        self.0.changed.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gate_lets_no_more_than_its_limit_in() {
        let gate = Gate::new(2);
        let first = gate.enter();
        let _second = gate.enter();
        assert!(gate.try_enter().is_none());
        drop(first);
        let third = gate.try_enter();
        assert!(third.is_some());
        assert!(gate.try_enter().is_none());
    }

    #[test]
    fn inventory_variables_become_ssh_options_before_the_destination() {
        let target = Target {
            name: "web".into(),
            destination: "10.0.0.1".into(),
            port: Some(2222),
            user: Some("deploy".into()),
            identity: Some("/k/id".into()),
            sudo: false,
            root: None,
        };
        let settings = SshSettings {
            config: Some("/c/config".into()),
            ..SshSettings::default()
        };
        let args = base_args(&settings, &target, Path::new("/s/0"));
        let text = args.join(" ");
        assert!(text.starts_with("-F /c/config -o BatchMode=yes"), "{text}");
        assert!(text.contains("-o ControlPath=/s/0"), "{text}");
        assert!(text.ends_with("-T -p 2222 -l deploy -i /k/id"), "{text}");
    }
}
