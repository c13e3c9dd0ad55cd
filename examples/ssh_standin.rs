//! A stand-in for OpenSSH's `ssh`, to measure what a fleet of 1,000
//! targets costs the controller on one machine (`bench/fleet.py`): put
//! first on PATH as `ssh`, it does what ral asks of ssh for a target by
//! running the target's side here, with no network at all.
//!
//! Each destination `HOST` (or `USER@HOST`) is the directory
//! `$RAL_STANDIN_DIR/HOST`; its `home` is the target's HOME, and its
//! fake root is whatever the inventory's `ral_root` names. A destination
//! without a directory fails as an unknown host does; one whose directory
//! holds a file `hang` never answers (a dead target).
//!
//! What ral uses, from connection.rs, kept.rs and mux.rs:
//! - `ssh [OPTIONS] -- HOST COMMAND`: runs `sh -c COMMAND` in the
//!   target's HOME with a login's environment, stdin, stdout and stderr
//!   passed through, and exits with its status (as `-o ControlMaster=no`
//!   through a master: there is no login to share here).
//! - `-o ControlMaster=yes -o ControlPersist=no -- HOST COMMAND` (a run's
//!   own master, `--no-persist`): the same, also serving the multiplexing
//!   protocol on the ControlPath while the command runs.
//! - `-o ControlMaster=yes -o ControlPersist=N -N -- HOST` (a kept
//!   master): binds the ControlPath, leaves a master in the background
//!   that serves OpenSSH's multiplexing protocol (PROTOCOL.mux: hello,
//!   alive check, new session with its three descriptors, terminate) and
//!   exits once it has been idle N seconds, then exits itself.
//! - `-O check` and `-O exit`: asked of the master on the socket.
//! - `-G`: what ssh resolves (user, hostname, port).
//!
//! The target's side never runs below ral: ral is a child subreaper, so
//! whatever a target's command leaves running (the provider wrapper's
//! watchdog and killer) would become ral's child, and ral's sweeps would
//! count and end it, which no real target costs. So the commands run in
//! a hub, `ssh_standin --hub`, started beside ral (not by it) and
//! listening on `$RAL_STANDIN_DIR/.hub`: each ssh here, and each session
//! of a kept master, hands it the command and its three descriptors (as
//! the multiplexing protocol does), then waits for its exit status.
//! Without a hub, the command runs below the ssh that asked.
//!
//! With `RAL_STANDIN_LOG=FILE`, each session's script (one per target
//! and run) appends `start HOST` and `end HOST` lines to FILE under
//! `flock`, so their order says how many targets were worked on at once.
//!
//! An example rather than a binary of the package: nothing ships it, and
//! it is built only when asked (`cargo build --release --example
//! ssh_standin`), on std and libc alone.

use std::fs::OpenOptions;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const HELLO: u32 = 1;
const VERSION: u32 = 4;
const NEW_SESSION: u32 = 0x1000_0002;
const ALIVE_CHECK: u32 = 0x1000_0004;
const TERMINATE: u32 = 0x1000_0005;
const OK: u32 = 0x8000_0001;
const EXIT_MESSAGE: u32 = 0x8000_0004;
const ALIVE: u32 = 0x8000_0005;
const SESSION_OPENED: u32 = 0x8000_0006;
/// The stack of the master's and the hub's threads: they start a
/// command, then wait.
const STACK: usize = 256 << 10;

/// What ral put on the command line.
#[derive(Default)]
struct Args {
    master: Option<String>,
    persist: Option<String>,
    control_path: Option<PathBuf>,
    control_command: Option<String>,
    no_command: bool,
    resolve: bool,
    user: Option<String>,
    port: Option<String>,
    destination: String,
    command: Vec<String>,
}

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    if argv.first().map(String::as_str) == Some("--hub") {
        return hub();
    }
    let args = match parse(&argv) {
        Ok(args) => args,
        Err(e) => return fail(&e),
    };
    if args.resolve {
        return resolve(&args);
    }
    if let Some(command) = &args.control_command {
        return control(&args, command);
    }
    let host = args
        .destination
        .rsplit_once('@')
        .map_or(args.destination.as_str(), |(_, host)| host);
    let dir = match std::env::var_os("RAL_STANDIN_DIR") {
        Some(base) => PathBuf::from(base).join(host),
        None => return fail("RAL_STANDIN_DIR is not set"),
    };
    if host.is_empty() || host.contains('/') || host.starts_with('.') || !dir.is_dir() {
        return fail(&format!(
            "Could not resolve hostname {host}: Name or service not known"
        ));
    }
    if dir.join("hang").exists() {
        // A dead target: nothing ever comes back.
        loop {
            // SAFETY: pause only waits for a signal.
            unsafe { libc::pause() };
        }
    }
    let target = Target {
        host: host.to_owned(),
        home: dir.join("home"),
    };
    let master = args.master.as_deref().unwrap_or("no");
    let persist = args.persist.as_deref().unwrap_or("no");
    if master == "yes" && persist != "no" && args.no_command {
        let idle = persist.parse::<u64>().unwrap_or(60);
        return start_kept(&args, target, Duration::from_secs(idle));
    }
    if args.command.is_empty() {
        return fail("no command: the stand-in runs none without one");
    }
    let command = args.command.join(" ");
    if master == "yes" {
        return own_master(&args, target, &command);
    }
    // A session through the master: the command, run by the hub with
    // this ssh's descriptors, or in place of this ssh.
    if let Some(code) = target.through_hub(&command, [0, 1, 2]) {
        return ExitCode::from(code.clamp(0, 255) as u8);
    }
    let error = target.command(&command).exec();
    fail(&format!("running sh: {error}"))
}

/// The hub: runs the targets' commands for the ssh stand-ins, so that
/// none runs below ral.
fn hub() -> ExitCode {
    let Some(base) = std::env::var_os("RAL_STANDIN_DIR") else {
        return fail("RAL_STANDIN_DIR is not set");
    };
    let path = PathBuf::from(base).join(".hub");
    let _ = std::fs::remove_file(&path);
    let listener = match bind(&path) {
        Ok(listener) => listener,
        Err(e) => return fail(&e),
    };
    for stream in listener.incoming().flatten() {
        spawn(move || hub_client(stream));
    }
    ExitCode::SUCCESS
}

/// One request of a stand-in: hellos, then a new session whose reserved
/// string names the target.
fn hub_client(mut stream: UnixStream) {
    if send(&mut stream, &words(&[HELLO, VERSION])).is_err() || receive(&mut stream).is_none() {
        return;
    }
    let Some(request) = receive(&mut stream) else {
        return;
    };
    let (Some(host), Some(command)) = (first_string(&request), last_string(&request)) else {
        return;
    };
    let Some(base) = std::env::var_os("RAL_STANDIN_DIR") else {
        return;
    };
    let target = Target {
        home: PathBuf::from(base).join(&host).join("home"),
        host,
    };
    let Some([stdin, stdout, stderr]) = receive_fds(&stream) else {
        return;
    };
    let code = match target
        .session_command(&command)
        .stdin(Stdio::from(stdin))
        .stdout(Stdio::from(stdout))
        .stderr(Stdio::from(stderr))
        .spawn()
    {
        Ok(child) => {
            let _ = send(&mut stream, &words(&[SESSION_OPENED, 1, 1]));
            wait_child(child.id() as i32)
        }
        Err(_) => 255,
    };
    let _ = send(&mut stream, &words(&[EXIT_MESSAGE, 1, code as u32]));
}

/// Waits for the child `pid`: what its command leaves running goes to
/// init, as on a target.
fn wait_child(pid: i32) -> i32 {
    let mut status = 0;
    // SAFETY: waits for our own child, into a local integer.
    let got = unsafe { libc::waitpid(pid, &mut status, libc::__WALL) };
    if got != pid {
        return 255;
    }
    if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        128 + libc::WTERMSIG(status)
    }
}

/// One target's side.
#[derive(Clone)]
struct Target {
    host: String,
    home: PathBuf,
}

impl Target {
    /// [`Target::command`] leading a process group of its own, as sshd
    /// gives each session (the provider wrapper signals its group whole).
    fn session_command(&self, command: &str) -> Command {
        let mut sh = self.command(command);
        sh.process_group(0);
        sh
    }

    /// `sh -c COMMAND` as a login runs it: in HOME, with a login's
    /// environment only.
    fn command(&self, command: &str) -> Command {
        let mut sh = Command::new("/bin/sh");
        sh.arg("-c").arg(command);
        sh.env_clear()
            .env("HOME", &self.home)
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("USER", "root")
            .env("LOGNAME", "root")
            .env("SHELL", "/bin/sh")
            .current_dir(&self.home);
        sh
    }

    /// Runs `command` in the hub with the descriptors `fds` as its stdin,
    /// stdout and stderr; its exit status, or `None` when there is no
    /// hub. Once the hub has the command, a failure is 255: the command
    /// may have run, and must not run twice.
    fn through_hub(&self, command: &str, fds: [RawFd; 3]) -> Option<i32> {
        let base = std::env::var_os("RAL_STANDIN_DIR")?;
        let stream = UnixStream::connect(PathBuf::from(base).join(".hub")).ok()?;
        Some(self.hub_session(stream, command, fds).unwrap_or(255))
    }

    fn hub_session(&self, mut stream: UnixStream, command: &str, fds: [RawFd; 3]) -> Option<i32> {
        send(&mut stream, &words(&[HELLO, VERSION])).ok()?;
        receive(&mut stream)?;
        let request = session_request(&self.host, command);
        send(&mut stream, &request).ok()?;
        for fd in fds {
            // SAFETY: the caller's descriptors (its own stdin, stdout and
            // stderr, or a session's), open for the whole session.
            let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
            ral::remote::mux::send_fd(&stream, fd).ok()?;
        }
        let opened = receive(&mut stream)?;
        if read_words(&opened, 1) != [SESSION_OPENED] {
            return Some(255);
        }
        let exit = receive(&mut stream)?;
        match read_words(&exit, 3)[..] {
            [EXIT_MESSAGE, _, code] => Some(code as i32),
            _ => Some(255),
        }
    }
}

/// A new-session request as ssh's client sends it, the reserved string
/// naming the target.
fn session_request(host: &str, command: &str) -> Vec<u8> {
    let mut request = words(&[NEW_SESSION, 1]);
    let string = |request: &mut Vec<u8>, bytes: &[u8]| {
        request.extend_from_slice(&(bytes.len() as u32).to_be_bytes());
        request.extend_from_slice(bytes);
    };
    string(&mut request, host.as_bytes());
    request.extend_from_slice(&words(&[0, 0, 0, 0, 0xffff_ffff]));
    string(&mut request, b"");
    string(&mut request, command.as_bytes());
    request
}

/// Reads ssh's options as ral gives them.
fn parse(argv: &[String]) -> Result<Args, String> {
    let mut args = Args::default();
    let mut words = argv.iter();
    let with_value = "BbcDEeFIiJLlmOoPpQRSWw";
    while let Some(word) = words.next() {
        if word == "--" {
            break;
        }
        let Some(flags) = word.strip_prefix('-') else {
            args.destination = word.clone();
            args.command = words.cloned().collect();
            return Ok(args);
        };
        let mut chars = flags.chars();
        while let Some(flag) = chars.next() {
            if !with_value.contains(flag) {
                match flag {
                    'N' => args.no_command = true,
                    'G' => args.resolve = true,
                    _ => {}
                }
                continue;
            }
            let rest: String = chars.collect();
            let value = if rest.is_empty() {
                words
                    .next()
                    .cloned()
                    .ok_or_else(|| format!("option requires an argument -- {flag}"))?
            } else {
                rest
            };
            match flag {
                'o' => option(&mut args, &value),
                'O' => args.control_command = Some(value),
                'S' => args.control_path = Some(PathBuf::from(value)),
                'l' => args.user = Some(value),
                'p' => args.port = Some(value),
                _ => {}
            }
            break;
        }
    }
    args.destination = words.next().cloned().unwrap_or_default();
    args.command = words.cloned().collect();
    if args.destination.is_empty() {
        return Err("no destination".to_owned());
    }
    Ok(args)
}

/// One `-o KEY=VALUE` (or `KEY VALUE`); ssh keeps the first value given.
fn option(args: &mut Args, text: &str) {
    let Some((key, value)) = text.split_once(['=', ' ']) else {
        return;
    };
    let value = value.trim().to_owned();
    match key.to_ascii_lowercase().as_str() {
        "controlmaster" => {
            args.master.get_or_insert(value.to_ascii_lowercase());
        }
        "controlpersist" => {
            args.persist.get_or_insert(value.to_ascii_lowercase());
        }
        "controlpath" => {
            args.control_path.get_or_insert(PathBuf::from(value));
        }
        "user" => {
            args.user.get_or_insert(value);
        }
        "port" => {
            args.port.get_or_insert(value);
        }
        _ => {}
    }
}

fn fail(message: &str) -> ExitCode {
    eprintln!("ssh: {message}");
    ExitCode::from(255)
}

/// `ssh -G`: what ssh would connect to.
fn resolve(args: &Args) -> ExitCode {
    let (user, host) = match args.destination.rsplit_once('@') {
        Some((user, host)) => (user.to_owned(), host.to_owned()),
        None => (
            args.user.clone().unwrap_or_else(|| "root".to_owned()),
            args.destination.clone(),
        ),
    };
    let port = args.port.clone().unwrap_or_else(|| "22".to_owned());
    println!("user {user}\nhostname {host}\nport {port}");
    ExitCode::SUCCESS
}

/// `ssh -O check|exit`, asked of the master on the control socket.
fn control(args: &Args, command: &str) -> ExitCode {
    let Some(path) = &args.control_path else {
        return fail("no ControlPath set");
    };
    let mut stream = match UnixStream::connect(path) {
        Ok(stream) => stream,
        Err(e) => return fail(&format!("Control socket connect({}): {e}", path.display())),
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    if send(&mut stream, &words(&[HELLO, VERSION])).is_err() || receive(&mut stream).is_none() {
        return fail("the master did not say hello");
    }
    let (request, expected) = match command {
        "check" => (ALIVE_CHECK, ALIVE),
        "exit" => (TERMINATE, OK),
        other => return fail(&format!("unknown control command {other}")),
    };
    if send(&mut stream, &words(&[request, 1])).is_err() {
        return fail("the master went away");
    }
    // The alive answer carries the master's process ID; the terminate
    // answer is its type and the request ID alone.
    match receive(&mut stream).map(|m| read_words(&m, 3)).as_deref() {
        Some(&[ALIVE, _, pid]) if expected == ALIVE => {
            eprintln!("Master running (pid={pid})");
            ExitCode::SUCCESS
        }
        Some(&[OK, _, ..]) if expected == OK => {
            eprintln!("Exit request sent.");
            ExitCode::SUCCESS
        }
        _ => fail("the master gave no answer"),
    }
}

/// Appends `what HOST` to `$RAL_STANDIN_LOG` under its lock.
fn record(what: &str, host: &str) {
    let Some(path) = std::env::var_os("RAL_STANDIN_LOG") else {
        return;
    };
    let Ok(mut file) = OpenOptions::new().append(true).create(true).open(path) else {
        return;
    };
    // SAFETY: flock on a descriptor we own.
    unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) };
    let _ = writeln!(file, "{what} {host}");
}

/// A run's own master: the command, with the master serving the control
/// socket beside it until it ends.
fn own_master(args: &Args, target: Target, command: &str) -> ExitCode {
    let listener = match args.control_path.as_deref().map(bind) {
        Some(Ok(listener)) => Some(listener),
        Some(Err(e)) => return fail(&e),
        None => None,
    };
    let master = listener.map(|listener| {
        let master = Master::new(target.clone(), args.control_path.clone());
        let serving = Arc::clone(&master);
        spawn(move || serving.serve(listener));
        master
    });
    record("start", &target.host);
    let code = target.through_hub(command, [0, 1, 2]).or_else(|| {
        let status = target.command(command).status().ok()?;
        Some(status.code().unwrap_or(255))
    });
    record("end", &target.host);
    if let Some(master) = master {
        master.remove_socket();
    }
    match code {
        Some(code) => ExitCode::from(code.clamp(0, 255) as u8),
        None => fail("running sh failed"),
    }
}

/// A kept master: the socket bound here, then served by a child in the
/// background; this process exits once it is there, as ssh does.
fn start_kept(args: &Args, target: Target, idle: Duration) -> ExitCode {
    let Some(path) = args.control_path.clone() else {
        return fail("ControlMaster=yes without a ControlPath");
    };
    let listener = match bind(&path) {
        Ok(listener) => listener,
        Err(e) => return fail(&e),
    };
    // SAFETY: this process has one thread; the child only goes on with
    // plain system calls before it starts its own.
    match unsafe { libc::fork() } {
        -1 => fail(&format!("fork: {}", std::io::Error::last_os_error())),
        0 => {
            detach(&target.home);
            let master = Master::new(target, Some(path));
            master.watch_idle(idle);
            master.serve(listener);
            std::process::exit(0)
        }
        _ => ExitCode::SUCCESS,
    }
}

/// Leaves the caller's session and descriptors, as a daemon does.
fn detach(home: &Path) {
    // SAFETY: setsid takes nothing; the descriptors are ours.
    unsafe {
        libc::setsid();
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
        for fd in 0..3 {
            libc::dup2(null, fd);
        }
        if null > 2 {
            libc::close(null);
        }
    }
    let _ = std::env::set_current_dir(home);
    if let Some(pids) = home.parent() {
        let _ = std::fs::write(pids.join("master.pid"), std::process::id().to_string());
    }
}

fn bind(path: &Path) -> Result<UnixListener, String> {
    UnixListener::bind(path).map_err(|e| format!("binding {}: {e}", path.display()))
}

fn spawn(work: impl FnOnce() + Send + 'static) {
    let _ = std::thread::Builder::new().stack_size(STACK).spawn(work);
}

/// A master serving the multiplexing protocol.
struct Master {
    target: Target,
    socket: Option<PathBuf>,
    sessions: AtomicUsize,
    idle_since: Mutex<Instant>,
}

impl Master {
    fn new(target: Target, socket: Option<PathBuf>) -> Arc<Master> {
        Arc::new(Master {
            target,
            socket,
            sessions: AtomicUsize::new(0),
            idle_since: Mutex::new(Instant::now()),
        })
    }

    fn remove_socket(&self) {
        if let Some(socket) = &self.socket {
            let _ = std::fs::remove_file(socket);
        }
    }

    /// Ends the process once no session has run for `idle`.
    fn watch_idle(self: &Arc<Self>, idle: Duration) {
        let master = Arc::clone(self);
        spawn(move || loop {
            std::thread::sleep(Duration::from_millis(500));
            let since = *master.idle_since.lock().unwrap_or_else(|e| e.into_inner());
            if master.sessions.load(Ordering::SeqCst) == 0 && since.elapsed() >= idle {
                master.remove_socket();
                std::process::exit(0);
            }
        });
    }

    fn serve(self: Arc<Self>, listener: UnixListener) {
        for stream in listener.incoming().flatten() {
            let master = Arc::clone(&self);
            spawn(move || master.client(stream));
        }
    }

    /// One client of the socket: hellos, then one request.
    fn client(&self, mut stream: UnixStream) {
        if send(&mut stream, &words(&[HELLO, VERSION])).is_err() {
            return;
        }
        let Some(hello) = receive(&mut stream) else {
            return;
        };
        if read_words(&hello, 1) != [HELLO] {
            return;
        }
        let Some(request) = receive(&mut stream) else {
            return;
        };
        let [kind, id] = read_words(&request, 2)[..] else {
            return;
        };
        match kind {
            ALIVE_CHECK => {
                let _ = send(&mut stream, &words(&[ALIVE, id, std::process::id()]));
            }
            TERMINATE => {
                let _ = send(&mut stream, &words(&[OK, id]));
                self.remove_socket();
                std::process::exit(0);
            }
            NEW_SESSION => self.session(stream, &request, id),
            _ => {}
        }
    }

    /// A new session: its command (the last string of the request) run
    /// with the three descriptors the client sends; the exit message when
    /// it ends.
    fn session(&self, mut stream: UnixStream, request: &[u8], id: u32) {
        let Some(command) = last_string(request) else {
            return;
        };
        let Some([stdin, stdout, stderr]) = receive_fds(&stream) else {
            return;
        };
        self.sessions.fetch_add(1, Ordering::SeqCst);
        record("start", &self.target.host);
        let _ = send(&mut stream, &words(&[SESSION_OPENED, id, 1]));
        let fds = [stdin.as_raw_fd(), stdout.as_raw_fd(), stderr.as_raw_fd()];
        let code = match self.target.through_hub(&command, fds) {
            Some(code) => code,
            None => {
                let child = self
                    .target
                    .session_command(&command)
                    .stdin(Stdio::from(stdin))
                    .stdout(Stdio::from(stdout))
                    .stderr(Stdio::from(stderr))
                    .spawn();
                child
                    .and_then(|mut child| child.wait())
                    .map_or(255, |status| {
                        status
                            .code()
                            .unwrap_or_else(|| 128 + status.signal().unwrap_or(0))
                    })
            }
        };
        record("end", &self.target.host);
        let _ = send(&mut stream, &words(&[EXIT_MESSAGE, 1, code as u32]));
        *self.idle_since.lock().unwrap_or_else(|e| e.into_inner()) = Instant::now();
        self.sessions.fetch_sub(1, Ordering::SeqCst);
    }
}

fn words(values: &[u32]) -> Vec<u8> {
    values.iter().flat_map(|w| w.to_be_bytes()).collect()
}

fn read_words(message: &[u8], count: usize) -> Vec<u32> {
    message
        .chunks_exact(4)
        .take(count)
        .map(|w| u32::from_be_bytes([w[0], w[1], w[2], w[3]]))
        .collect()
}

/// The new-session request's command: its last string.
fn last_string(request: &[u8]) -> Option<String> {
    // Two words, the reserved string, five words, the terminal type, then
    // the command.
    let mut at = 8;
    let string = |at: &mut usize| -> Option<Vec<u8>> {
        let length = *read_words(request.get(*at..)?, 1).first()? as usize;
        let bytes = request.get(*at + 4..*at + 4 + length)?.to_vec();
        *at += 4 + length;
        Some(bytes)
    };
    string(&mut at)?;
    at += 20;
    string(&mut at)?;
    String::from_utf8(string(&mut at)?).ok()
}

fn send(stream: &mut UnixStream, message: &[u8]) -> std::io::Result<()> {
    let mut bytes = (message.len() as u32).to_be_bytes().to_vec();
    bytes.extend_from_slice(message);
    stream.write_all(&bytes)
}

fn receive(stream: &mut UnixStream) -> Option<Vec<u8>> {
    let mut length = [0u8; 4];
    stream.read_exact(&mut length).ok()?;
    let length = u32::from_be_bytes(length) as usize;
    if length > 256 << 10 {
        return None;
    }
    let mut message = vec![0u8; length];
    stream.read_exact(&mut message).ok()?;
    Some(message)
}

/// The first string of a new-session request (the reserved one).
fn first_string(request: &[u8]) -> Option<String> {
    let length = *read_words(request.get(8..)?, 1).first()? as usize;
    String::from_utf8(request.get(12..12 + length)?.to_vec()).ok()
}

/// The three descriptors of a new session.
fn receive_fds(stream: &UnixStream) -> Option<[OwnedFd; 3]> {
    Some([
        receive_fd(stream)?,
        receive_fd(stream)?,
        receive_fd(stream)?,
    ])
}

/// One descriptor sent as ssh's client sends it: a byte with the
/// descriptor as its control message.
fn receive_fd(stream: &UnixStream) -> Option<OwnedFd> {
    let mut byte = [0u8; 1];
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
    };
    // SAFETY: CMSG_SPACE only computes a size.
    let space = unsafe { libc::CMSG_SPACE(std::mem::size_of::<RawFd>() as u32) } as usize;
    let mut control = vec![0u64; space.div_ceil(8)];
    // SAFETY: msghdr is plain data, filled in below.
    let mut header = unsafe { std::mem::zeroed::<libc::msghdr>() };
    header.msg_iov = &mut iov;
    header.msg_iovlen = 1;
    header.msg_control = control.as_mut_ptr().cast();
    header.msg_controllen = space as _;
    // SAFETY: receives into the buffers above, which outlive the call.
    let got = unsafe { libc::recvmsg(stream.as_raw_fd(), &mut header, libc::MSG_CMSG_CLOEXEC) };
    if got != 1 {
        return None;
    }
    // SAFETY: the kernel filled the control buffer; the first header is
    // checked before its data is read.
    unsafe {
        let message = libc::CMSG_FIRSTHDR(&header);
        if message.is_null() || (*message).cmsg_type != libc::SCM_RIGHTS {
            return None;
        }
        let mut fd: RawFd = -1;
        std::ptr::copy_nonoverlapping(
            libc::CMSG_DATA(message),
            (&mut fd as *mut RawFd).cast::<u8>(),
            std::mem::size_of::<RawFd>(),
        );
        (fd >= 0).then(|| OwnedFd::from_raw_fd(fd))
    }
}
