//! One ssh connection per target: a ControlMaster shared by every provider
//! call, kept for the next runs (`--persist`, `kept.rs`) or not
//! (`--no-persist`: its socket in a private directory of this run,
//! `control_dir.rs`).
//!
//! Either way, one ssh of this run holds the session's script on the
//! target (`script::session`): it says whether the providers are there,
//! then reads that ssh's stdin, a pipe only this process writes to, until
//! its end. When this process dies, even by SIGKILL, the pipe closes with
//! it: the script ends, and the calls' watchdogs on the target see it gone
//! and end their providers. Without `--persist` that ssh is the master
//! itself, a child that stays in the foreground (no ControlPersist): its
//! last session closed, it exits. With it, the master runs in the
//! background (started by a call that releases it, so no sweep of what
//! calls leave ends it) and outlives the run; the script's ssh is a
//! session through it, ended with the run.
//!
//! Everything the user set up for ssh applies: their config (or the one
//! `--ssh-config` names), keys, agent, known hosts and jumps. ral only
//! adds what it needs: batch mode (no prompt can stall a fan-out), a
//! connect timeout, the control socket, and the port, user and key an
//! inventory gives.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use super::bundle::Bundle;
use super::control_dir::{self, ControlDir};
use super::kept::{self, KeptDir};
use super::mux;
use super::programs::Bundles;
use super::script::{self, Machine};
use super::Target;
use crate::error::{Error, Result};
use crate::process::streams::{run_streams, Ended, Stream, StreamCall};
use crate::process::{Daemon, ProviderEnv};

/// The most connections being opened at once: sshd drops new ones beyond
/// its MaxStartups (10 by default) while they authenticate.
pub const MAX_OPENING: usize = 10;
/// How long a master has to exit once its stdin is closed (it then waits
/// for the session's script to end on the target) before it is killed.
const CLOSE_GRACE: Duration = Duration::from_secs(3);

/// How ssh is run.
#[derive(Debug, Clone)]
pub struct SshSettings {
    /// `--ssh-config FILE`, passed as `-F FILE`.
    pub config: Option<PathBuf>,
    /// Time to connect and log in.
    pub connect_timeout: Duration,
    /// The ssh program.
    pub program: PathBuf,
    /// How long each master stays once the run is over, for the next run
    /// to reuse; `None`: closed with the run.
    pub persist: Option<Duration>,
}

/// How long a master stays after a run by default, as Ansible's.
pub const DEFAULT_PERSIST: Duration = Duration::from_secs(60);

impl Default for SshSettings {
    fn default() -> SshSettings {
        SshSettings {
            config: None,
            connect_timeout: Duration::from_secs(10),
            program: PathBuf::from("ssh"),
            persist: Some(DEFAULT_PERSIST),
        }
    }
}

/// Where the control sockets are.
enum Sockets {
    /// In this run's directory, gone with it.
    Run(ControlDir),
    /// In the directory of kept connections, each master staying that
    /// long after its last session.
    Kept(KeptDir, Duration),
}

/// Opens sessions: holds the directory of the control sockets and the
/// bound on connections opened at once.
pub struct Connector {
    settings: SshSettings,
    sockets: Sockets,
    env: ProviderEnv,
    opening: Gate,
    count: AtomicUsize,
}

impl Connector {
    pub fn new(settings: SshSettings) -> Result<Connector> {
        let sockets = match settings.persist {
            Some(persist) if !persist.is_zero() => {
                // What killed runs without kept connections left goes all
                // the same.
                control_dir::sweep(&run_base());
                Sockets::Kept(KeptDir::open()?, persist)
            }
            _ => Sockets::Run(ControlDir::create(&run_base())?),
        };
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
            sockets,
            env: ProviderEnv::inherited(),
            opening: Gate::new(MAX_OPENING),
            count: AtomicUsize::new(0),
        })
    }

    /// Connects to `target` and makes sure an intact copy of the bundle
    /// for its machine is there (copying it when it is not): one round
    /// trip when it is, and the target runs this machine's program (one
    /// more, to ask about another bundle, when it does not).
    pub fn open(&self, target: &Target, bundles: &Bundles) -> Result<Session> {
        let bundle = bundles.first();
        let (control, kept) = match &self.sockets {
            Sockets::Run(dir) => {
                let index = self.count.fetch_add(1, Ordering::SeqCst);
                (dir.path().join(index.to_string()), None)
            }
            Sockets::Kept(dir, persist) => {
                let options = base_args(&self.settings, target, Path::new(""));
                let key = kept::key(
                    &target.name,
                    &self.settings.program,
                    &options,
                    &target.destination,
                );
                (dir.socket(&key), Some((dir, key, *persist)))
            }
        };
        let mut session = Session {
            target: target.clone(),
            program: self.settings.program.clone(),
            env: self.env.clone(),
            base_args: base_args(&self.settings, target, &control),
            control,
            remote_dir: String::new(),
            bundle: Arc::clone(bundle),
            machine: None,
            refused: None,
            uploaded: false,
            holder: Mutex::new(None),
            script: 0,
            timeout: self.settings.connect_timeout + Duration::from_secs(20),
        };
        let (present, dir) = match kept {
            None => {
                let _opening = self.opening.enter();
                session.start_script(Via::OwnMaster)?
            }
            Some((dir, key, persist)) => {
                // Held until this run's session runs through the master:
                // another run to the same target waits, then reuses it.
                let mut entry = dir.lock(&key)?;
                session.open_kept(&mut entry, persist, &self.opening)?
            }
        };
        let (present, dir) = session.choose_bundle(bundles, present, dir)?;
        if !present {
            let bundle = Arc::clone(&session.bundle);
            let payload = bundle.payload();
            let answer = session.control(
                &["-o", "ControlMaster=no"],
                script::upload(bundle.digest(), bundle.manifest()),
                Some(payload),
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

/// Where a run's control directory goes: the runtime directory or the
/// temporary one, whose name is short (socket paths hold 108 bytes, and
/// a number per target is added) and plain (ssh reads ControlPath as a
/// config value, with words and `%` tokens); else `/tmp`.
fn run_base() -> PathBuf {
    let plain = |dir: &PathBuf| {
        dir.to_str().is_some_and(|text| {
            text.chars()
                .all(|c| c.is_ascii_alphanumeric() || "/._-".contains(c))
        })
    };
    [
        std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from),
        Some(std::env::temp_dir()),
    ]
    .into_iter()
    .flatten()
    .find(|dir| dir.is_absolute() && dir.is_dir() && dir.as_os_str().len() < 60 && plain(dir))
    .unwrap_or_else(|| PathBuf::from("/tmp"))
}

/// What ssh makes of `target` with `settings`' configuration file and
/// the target's port and user: the `KEY VALUE` lines of `ssh -G`, which
/// reads the configuration and connects nowhere. It runs through the
/// process runner like every child, so no sweep of another thread's
/// orphans takes it for one.
pub fn ssh_resolved(settings: &SshSettings, target: &Target) -> Result<Vec<String>> {
    let error = |message: String| Error::Remote {
        target: target.name.clone(),
        message,
    };
    let program = find_program(&settings.program).ok_or_else(|| {
        error(format!(
            "{} is not on PATH: remote targets need OpenSSH's ssh client",
            settings.program.display()
        ))
    })?;
    let mut args: Vec<OsString> = vec!["-G".into()];
    if let Some(config) = &settings.config {
        args.extend(["-F".into(), config.clone().into_os_string()]);
    }
    if let Some(port) = target.port {
        args.extend(["-p".into(), port.to_string().into()]);
    }
    if let Some(user) = &target.user {
        args.extend(["-l".into(), user.into()]);
    }
    args.extend(target.ssh_args.iter().map(OsString::from));
    args.extend(["--".into(), target.destination.clone().into()]);
    let env = ProviderEnv::inherited();
    let label = format!("{}: ssh -G", target.name);
    let call = StreamCall {
        label: &label,
        program: &program,
        arg0: &OsString::from("ssh"),
        args: &args,
        env: env.vars(),
        fd3: false,
        stdin: None,
        timeout: settings.connect_timeout,
        release: false,
        dir: None,
        user: None,
    };
    let (ended, stdout, stderr) = run_collecting(&call)?;
    if !ended.success() {
        let said = stderr.join(" / ");
        return Err(error(format!(
            "ssh -G {}: {}",
            target.destination,
            if said.is_empty() {
                ended.status.to_string()
            } else {
                said
            }
        )));
    }
    Ok(stdout)
}

/// Runs an ssh `call` to its end: how it ended, and its stdout and stderr
/// lines (trimmed, as text).
fn run_collecting(call: &StreamCall) -> Result<(Ended, Vec<String>, Vec<String>)> {
    let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
    let ended = run_streams(call, &mut |stream, line| {
        let line = String::from_utf8_lossy(line).trim_end().to_owned();
        match stream {
            Stream::Stdout => stdout.push(line),
            Stream::Stderr => stderr.push(line),
        }
    })?;
    Ok((ended, stdout, stderr))
}

/// What ssh `said` on stderr as one error message (with what to do about
/// it, where known), or `fallback` when it said nothing.
fn said_error(said: &[String], fallback: &str) -> String {
    let said: Vec<&str> = said
        .iter()
        .map(|line| line.strip_prefix("error: ").unwrap_or(line).trim_end())
        .filter(|line| !line.trim().is_empty())
        .collect();
    if said.is_empty() {
        fallback.to_owned()
    } else {
        said.join("; ").trim_end_matches('.').to_owned() + hint(&said)
    }
}

/// All of `file`, read from its start without moving its offset (a child
/// may still be writing to it).
fn read_all(file: &std::fs::File) -> String {
    use std::os::unix::fs::FileExt;
    let mut bytes = Vec::new();
    let mut buffer = [0u8; 8192];
    while let Ok(n) = file.read_at(&mut buffer, bytes.len() as u64) {
        if n == 0 || bytes.len() > 1 << 20 {
            break;
        }
        bytes.extend_from_slice(&buffer[..n]);
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

/// What to do about the ssh failures a first connection runs into, to
/// follow what ssh said.
fn hint(said: &[&str]) -> &'static str {
    let has = |words: &str| said.iter().any(|line| line.contains(words));
    // A changed key also says "Host key verification failed": it is
    // asked first, and never answered with a way to trust the new key.
    if has("REMOTE HOST IDENTIFICATION HAS CHANGED") {
        ". The target's host key is not the one known here, which may mean someone is in \
         between: if the key was really changed, remove the old one (ssh-keygen -R HOST)"
    } else if has("Host key verification failed") || has("host key is known") {
        ". The target's host key is not known here (ral runs ssh with BatchMode=yes, \
         which asks nothing): add it to known_hosts (ssh-keyscan), or name a known_hosts \
         file or StrictHostKeyChecking=accept-new with -o in the inventory's \
         ansible_ssh_common_args or in --ssh-config"
    } else {
        ""
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
    args.extend(target.ssh_args.iter().cloned());
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
    /// What the session's script said of the machine.
    machine: Option<Machine>,
    /// Why ral's native providers cannot run there, if they cannot.
    refused: Option<String>,
    uploaded: bool,
    /// The ssh that runs the session's script, until the connection is
    /// closed: the master itself, or a session through a kept one.
    holder: Mutex<Option<Daemon>>,
    /// The process ID of the session's script on the target.
    script: u32,
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

    /// What was sent, or found there: the bundle for the target's machine.
    pub fn bundle(&self) -> &Bundle {
        &self.bundle
    }

    /// Where a local provider file, or directory, is on the target.
    pub fn remote_path(&self, local: &Path) -> Option<String> {
        self.bundle.remote_path(&self.remote_dir, local)
    }

    /// Where ral's native providers' program is on the target, when it
    /// was copied with the provider directory `dir`.
    pub fn native_program(&self, dir: &Path) -> Option<String> {
        self.bundle.native_program(&self.remote_dir, dir)
    }

    /// Why ral's native providers cannot run on the target (no copy of
    /// their program runs on its machine), if they cannot.
    pub fn native_refused(&self) -> Option<&str> {
        self.refused.as_deref()
    }

    /// The bundle for the machine the session's script reported, and
    /// whether it is there: the first bundle's answer when that is the
    /// one; else a second question, about the other one.
    fn choose_bundle(
        &mut self,
        bundles: &Bundles,
        present: bool,
        dir: String,
    ) -> Result<(bool, String)> {
        // A script that said nothing of it: a machine of no name.
        let machine = self.machine.clone().unwrap_or_default();
        let choice = bundles.for_machine(&machine)?;
        if let Some(why) = &choice.refused {
            log::debug!("{}: {why}", self.target.name);
        }
        self.refused = choice.refused.clone();
        if Arc::ptr_eq(&choice.bundle, &self.bundle) {
            return Ok((present, dir));
        }
        self.bundle = Arc::clone(&choice.bundle);
        let answer = self.control(
            &["-o", "ControlMaster=no"],
            script::probe(self.bundle.digest(), self.bundle.manifest()),
            None,
        )?;
        self.answer(&answer)
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

    /// The process ID of the session's script on the target, which the
    /// provider calls watch (see `script::provider`).
    pub fn script_pid(&self) -> u32 {
        self.script
    }

    /// Closes this run's connection: the stdin of the ssh that holds the
    /// session's script, so the script ends, and with it that ssh and a
    /// master that is not kept (killed if it takes longer than
    /// `CLOSE_GRACE`); later calls fail. A kept master stays for the
    /// next run. Done once, also on drop.
    pub fn close(&self) {
        let holder = self.holder.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(mut holder) = holder {
            log::debug!("{}: ending the run's session there", self.target.name);
            holder.end(CLOSE_GRACE);
        }
    }

    /// Opens the session through the kept master of `entry` (whose lock
    /// is held), after starting one when there is none or it does not
    /// answer its check; a master that takes the session but gives no
    /// answer through it (a dead network) is closed and replaced once.
    fn open_kept(
        &mut self,
        entry: &mut kept::Entry,
        persist: Duration,
        opening: &Gate,
    ) -> Result<(bool, String)> {
        if self.master_answers() {
            match self.try_script(Via::KeptMaster) {
                Ok(answer) => {
                    log::debug!("{}: reusing the kept connection", self.target.name);
                    return Ok(answer);
                }
                // Replaced only when it is its fault: a silent target, or
                // a master that went away, not an error the target gave.
                Err(Failed::Silent(e)) => {
                    log::warn!(
                        "{}: the kept connection failed ({e}); opening a new one",
                        self.target.name
                    );
                    let _ = self.ssh(&["-O", "exit"], None, None, false);
                }
                Err(Failed::Said(e @ Error::Interrupted { .. })) => return Err(e),
                Err(Failed::Said(e)) if !self.master_answers() => {
                    log::warn!(
                        "{}: the kept connection ended ({e}); opening a new one",
                        self.target.name
                    );
                }
                Err(Failed::Said(e)) => return Err(e),
            }
        }
        entry.remove_socket();
        {
            let _opening = opening.enter();
            self.start_kept_master(persist)?;
        }
        entry.record(&kept::Info {
            target: self.target.name.clone(),
            destination: self.target.destination.clone(),
            program: self.program.clone(),
            persist: kept::persist_seconds(persist),
        })?;
        self.start_script(Via::KeptMaster)
    }

    /// Whether a master answers on the control socket (what `ssh -O
    /// check` asks, without starting ssh: see `mux::master_alive`), within
    /// `mux::ALIVE_LIMIT`.
    fn master_answers(&self) -> bool {
        let pid = mux::master_alive(&self.control);
        match pid {
            Some(pid) => log::debug!("{}: the kept master {pid} answers", self.target.name),
            None => log::debug!(
                "{}: no kept master answers on {} within {}s",
                self.target.name,
                self.control.display(),
                mux::ALIVE_LIMIT.as_secs()
            ),
        }
        pid.is_some()
    }

    /// Starts a kept master: ssh logs in, then leaves a master in the
    /// background for `persist` after its last session, and exits. The
    /// call releases it, so it is never taken for something a call left.
    fn start_kept_master(&self, persist: Duration) -> Result<()> {
        let persist = format!("ControlPersist={}", kept::persist_seconds(persist));
        let options = ["-o", "ControlMaster=yes", "-o", &persist, "-N"];
        let (ended, _, stderr) = self.ssh(&options, None, None, true)?;
        if !ended.success() {
            return Err(self.error(said_error(&stderr, &ended.status.to_string())));
        }
        for line in stderr.iter().filter(|line| !line.trim().is_empty()) {
            log::warn!("{}: ssh: {line}", self.target.name);
        }
        Ok(())
    }

    /// Starts the session's script, `via` a master, and waits for its
    /// answer: whether the bundle is there, and in which directory.
    fn start_script(&mut self, via: Via) -> Result<(bool, String)> {
        self.try_script(via)
            .map_err(|(Failed::Said(e) | Failed::Silent(e))| e)
    }

    /// [`Session::start_script`], telling a silent target apart.
    fn try_script(&mut self, via: Via) -> std::result::Result<(bool, String), Failed> {
        let said = |e| Failed::Said(e);
        let stderr = tempfile::tempfile()
            .map_err(|e| said(Error::io("creating a temporary file for ssh's errors", e)))?;
        let written = stderr
            .try_clone()
            .map_err(|e| said(Error::io("creating a temporary file for ssh's errors", e)))?;
        let command = script::session(self.bundle.digest(), self.bundle.manifest());
        let label = format!("{}: ssh", self.target.name);
        let ssh = |options: &[&str], stderr| {
            let mut args: Vec<OsString> = self.base_args.iter().map(OsString::from).collect();
            for option in options {
                args.extend(["-o".into(), OsString::from(option)]);
            }
            args.extend(["--".into(), self.target.destination.clone().into()]);
            args.push(OsString::from(&command));
            Daemon::start(&label, &self.program, &args, self.env.vars(), stderr).map_err(said)
        };
        let mut holder = match via {
            // Asked directly on the master's socket, as ssh would ask it,
            // without starting ssh.
            Via::KeptMaster => {
                match mux::open_session(&self.control, &command, &stderr, self.timeout) {
                    Ok(opened) => {
                        Daemon::attach(&label, opened.stdin, opened.stdout, opened.control)
                            .map_err(said)?
                    }
                    // A master that answers but takes no more sessions (the
                    // target's MaxSessions, shared with other runs) is not at
                    // fault: ssh then logs in on its own, as it always did.
                    Err(mux::OpenError::Refused(why)) => {
                        log::debug!(
                            "{}: the kept connection refused a session ({why}); ssh opens one",
                            self.target.name
                        );
                        ssh(&["ControlMaster=no"], stderr)?
                    }
                    Err(mux::OpenError::Failed(e)) => {
                        return Err(Failed::Silent(
                            self.error(format!("the kept connection did not open a session: {e}")),
                        ))
                    }
                }
            }
            Via::OwnMaster => ssh(&["ControlMaster=yes", "ControlPersist=no"], stderr)?,
        };
        let (answer, lines) = self.read_answer(&mut holder)?;
        let Some(answer) = answer.filter(|_| self.script > 0) else {
            // The ssh ended: what went wrong is on its stderr.
            holder.end(CLOSE_GRACE);
            let text = read_all(&written);
            let stderr: Vec<String> = text.lines().map(str::to_owned).collect();
            let fallback = format!(
                "its shell did not answer as expected (it said: {})",
                lines.join(" / ")
            );
            return Err(said(self.error(said_error(&stderr, &fallback))));
        };
        // What ssh and the script said on the way (only read here: later
        // lines stay in the file until the connection is closed).
        for line in read_all(&written)
            .lines()
            .filter(|line| !line.trim().is_empty())
        {
            log::warn!("{}: ssh: {line}", self.target.name);
        }
        let through = match holder.pid() {
            Some(pid) => format!("master {pid}"),
            None => "the kept master".to_owned(),
        };
        log::debug!(
            "{}: connected ({through}, session script {})",
            self.target.name,
            self.script
        );
        *self.holder.lock().unwrap_or_else(|e| e.into_inner()) = Some(holder);
        Ok(answer)
    }

    /// What the session script says first, within the time limit: its
    /// process, the machine, a damaged bundle, and then its answer (none
    /// when the ssh ended first), with the other lines it read.
    #[allow(clippy::type_complexity)]
    fn read_answer(
        &mut self,
        holder: &mut Daemon,
    ) -> std::result::Result<(Option<(bool, String)>, Vec<String>), Failed> {
        let until = std::time::Instant::now() + self.timeout;
        let mut lines = Vec::new();
        loop {
            let line = match holder.read_line(until) {
                Ok(Some(line)) => line,
                Ok(None) => return Ok((None, lines)),
                Err(Error::Timeout { .. }) => {
                    return Err(Failed::Silent(self.no_answer(self.timeout)))
                }
                Err(e) => return Err(Failed::Said(e)),
            };
            if let Some(pid) = line.strip_prefix("ral-session ") {
                self.script = pid.trim().parse().unwrap_or(0);
            } else if let Some(machine) = script::parse_machine(&line) {
                self.machine = Some(machine);
            } else if let Some(why) = line.strip_prefix("ral-bundle damaged ") {
                log::warn!(
                    "{}: the copy of the providers there cannot be used ({why}); copying it again",
                    self.target.name
                );
            } else if let Some((present, dir)) = script::parse_answer(&line) {
                return Ok((Some((present, dir.to_owned())), lines));
            }
            lines.push(line);
        }
    }

    /// One ssh run of this target outside the provider calls: `options`
    /// before the destination, `command` after it; how it ended, with its
    /// stdout and stderr lines.
    /// With `release`, what it leaves running (a kept master) stays.
    fn ssh(
        &self,
        options: &[&str],
        command: Option<String>,
        stdin: Option<&[u8]>,
        release: bool,
    ) -> Result<(Ended, Vec<String>, Vec<String>)> {
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
            dir: None,
            user: None,
        };
        run_collecting(&call).map_err(|e| match e {
            Error::Timeout { limit, .. } => self.no_answer(limit),
            other => other,
        })
    }

    /// The error of a target that did not answer within `limit`.
    fn no_answer(&self, limit: Duration) -> Error {
        self.error(format!(
            "no answer within {}s; is it reachable?",
            limit.as_secs()
        ))
    }

    /// An upload through the master: its stdout lines, or the error its
    /// stderr explains.
    fn control(
        &self,
        options: &[&str],
        command: String,
        stdin: Option<&[u8]>,
    ) -> Result<Vec<String>> {
        let (ended, stdout, stderr) = self.ssh(options, Some(command), stdin, false)?;
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

/// How the session's script reaches the target.
#[derive(Clone, Copy)]
enum Via {
    /// An ssh that logs in and is itself the master, for this run alone.
    OwnMaster,
    /// The kept master, asked on its control socket.
    KeptMaster,
}

/// How the session's script failed to answer.
enum Failed {
    /// With an error: ssh's, the target's, or this process's.
    Said(Error),
    /// Nothing within the time limit.
    Silent(Error),
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
            ssh_args: vec!["-o".into(), "ControlPath=/elsewhere".into(), "-4".into()],
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
        // The inventory's own options come last: ssh keeps the first value
        // of an option, so ral's ControlPath wins.
        assert!(
            text.ends_with("-T -p 2222 -l deploy -i /k/id -o ControlPath=/elsewhere -4"),
            "{text}"
        );
    }

    #[test]
    fn a_changed_host_key_is_never_answered_with_a_way_to_trust_the_new_one() {
        let changed = [
            "@    WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!     @",
            "Host key verification failed.",
        ];
        assert!(hint(&changed).contains("someone is in between"));
        assert!(!hint(&changed).contains("accept-new"));
        let unknown = ["Host key verification failed."];
        assert!(hint(&unknown).contains("ssh-keyscan"));
        assert_eq!(hint(&["Connection refused"]), "");
    }
}
