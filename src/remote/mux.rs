//! OpenSSH's multiplexing protocol (its PROTOCOL.mux), spoken directly to
//! a kept master's control socket, so that a warm run starts no ssh for
//! what it asks there:
//!
//! - [`master_alive`]: the question `ssh -O check` asks;
//! - [`open_session`]: what `ssh -o ControlMaster=no HOST COMMAND` does: a
//!   session over the master's connection that runs `COMMAND` with the
//!   stdin, stdout and stderr this process hands the master (sent over
//!   the socket as file descriptors). The master reads and writes them
//!   itself; the session lasts until the command ends, its stdin closes,
//!   or the socket does (the master then closes the session: so it does
//!   when this process dies, however it dies).
//!
//! Every message is its length, then big-endian words and strings (a
//! length, then the bytes). Each exchange has one time limit for the
//! whole of it, the connection included: a socket whose listener never
//! accepts, accepts and never answers, or answers a byte at a time, costs
//! at most that limit. The alive check's is short ([`ALIVE_LIMIT`]).

use std::fs::File;
use std::io::{IoSlice, PipeReader, PipeWriter, Read, Write};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

use rustix::io::Errno;
use rustix::net::{
    AddressFamily, SendAncillaryBuffer, SendAncillaryMessage, SendFlags, SocketAddrUnix,
    SocketFlags, SocketType,
};

/// How long a master has to answer the alive check, from the connection
/// to its answer. A master answers at once: it is a process on this
/// machine, and the check asks nothing of the target. A socket silent
/// this long (a stuck master, or a listener that is no master) is taken
/// for no master, so that a run replaces it instead of waiting on it.
pub const ALIVE_LIMIT: Duration = Duration::from_secs(2);

const HELLO: u32 = 1;
const VERSION: u32 = 4;
const NEW_SESSION: u32 = 0x1000_0002;
const ALIVE_CHECK: u32 = 0x1000_0004;
const PERMISSION_DENIED: u32 = 0x8000_0002;
const FAILURE: u32 = 0x8000_0003;
const ALIVE: u32 = 0x8000_0005;
const SESSION_OPENED: u32 = 0x8000_0006;
/// The request ID of the one request each connection makes.
const REQUEST: u32 = 1;
/// No escape character: nothing read on stdin is taken for ssh itself.
const NO_ESCAPE: u32 = 0xffff_ffff;
/// The longest message read: answers are a few words and an error text.
const MAX_MESSAGE: usize = 64 << 10;

/// The process ID of the master listening on `socket`, when one answers
/// within [`ALIVE_LIMIT`]: both sides say hello with the protocol
/// version, then an alive check gets the master's process ID.
pub fn master_alive(socket: &Path) -> Option<u32> {
    let mut stream = connect(socket, Instant::now() + ALIVE_LIMIT).ok()?;
    send(&mut stream, &Message::words(&[ALIVE_CHECK, REQUEST])).ok()?;
    match words(&receive(&mut stream)?, 3)?[..] {
        [ALIVE, REQUEST, pid] => Some(pid),
        _ => None,
    }
}

/// Why a session was not opened.
#[derive(Debug)]
pub enum OpenError {
    /// The master answered no, with its reason (it takes no more sessions,
    /// or the target refused one).
    Refused(String),
    /// No master, a master that did not answer, or not as it should.
    Failed(std::io::Error),
}

impl std::fmt::Display for OpenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OpenError::Refused(why) => write!(f, "the master refused the session: {why}"),
            OpenError::Failed(e) => e.fmt(f),
        }
    }
}

impl From<std::io::Error> for OpenError {
    fn from(e: std::io::Error) -> OpenError {
        OpenError::Failed(e)
    }
}

/// A session the master runs for this process.
pub struct MuxSession {
    /// Held until the session is over: closing it ends the session.
    pub control: UnixStream,
    /// The command's stdin: it reads end of file once this is dropped.
    pub stdin: PipeWriter,
    /// The command's stdout.
    pub stdout: PipeReader,
}

/// Opens a session on the master of `socket` that runs `command` (one
/// string, for the target's login shell), its stderr written to `stderr`;
/// `limit` bounds the exchange. A master that refuses gives its reason.
pub fn open_session(
    socket: &Path,
    command: &str,
    stderr: &File,
    limit: Duration,
) -> Result<MuxSession, OpenError> {
    let mut control = connect(socket, Instant::now() + limit)?;
    let mut request = Message::words(&[NEW_SESSION, REQUEST]);
    request.string(b""); // reserved
    request.word(0); // no tty
    request.word(0); // no X11 forwarding
    request.word(0); // no agent forwarding
    request.word(0); // a command, not a subsystem
    request.word(NO_ESCAPE);
    request.string(b""); // no terminal type
    request.string(command.as_bytes());
    send(&mut control, &request)?;
    let (stdin_read, stdin) = std::io::pipe()?;
    let (stdout, stdout_write) = std::io::pipe()?;
    for fd in [stdin_read.as_fd(), stdout_write.as_fd(), stderr.as_fd()] {
        control.arm()?;
        send_fd(&control.stream, fd)?;
    }
    // The master holds its own copies now.
    drop((stdin_read, stdout_write));
    let reply = receive(&mut control)
        .ok_or_else(|| std::io::Error::other("the master gave no answer to the session request"))?;
    match words(&reply, 2).as_deref() {
        Some([SESSION_OPENED, REQUEST]) => Ok(MuxSession {
            control: control.stream,
            stdin,
            stdout,
        }),
        Some([PERMISSION_DENIED | FAILURE, REQUEST]) => {
            Err(OpenError::Refused(string_at(&reply, 8).unwrap_or_default()))
        }
        _ => Err(std::io::Error::other(
            "the master gave an unexpected answer to the session request",
        )
        .into()),
    }
}

/// Connects to the master of `socket` and exchanges hellos, by `until`.
fn connect(socket: &Path, until: Instant) -> std::io::Result<Timed> {
    let mut stream = Timed {
        stream: connect_by(socket, until)?,
        until,
    };
    send(&mut stream, &Message::words(&[HELLO, VERSION]))?;
    let hello = receive(&mut stream).ok_or_else(|| std::io::Error::other("no hello"))?;
    if words(&hello, 2).as_deref() != Some(&[HELLO, VERSION]) {
        log::debug!("{}: not a master of a known version", socket.display());
        return Err(std::io::Error::other(
            "the master speaks another version of the protocol",
        ));
    }
    Ok(stream)
}

/// A connection whose every read and write ends by `until`.
struct Timed {
    stream: UnixStream,
    until: Instant,
}

impl Timed {
    /// Makes the next read or write wait no longer than the time left.
    fn arm(&self) -> std::io::Result<()> {
        let left = left(self.until)?;
        self.stream.set_read_timeout(Some(left))?;
        self.stream.set_write_timeout(Some(left))
    }
}

impl Read for Timed {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.arm()?;
        self.stream.read(buf)
    }
}

impl Write for Timed {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.arm()?;
        self.stream.write(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.stream.flush()
    }
}

/// The time left until `until`, or an error once it has come.
fn left(until: Instant) -> std::io::Result<Duration> {
    Some(until.saturating_duration_since(Instant::now()))
        .filter(|left| !left.is_zero())
        .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::TimedOut))
}

/// A stream connected to `socket` by `until`: a listener whose queue of
/// connections is full (it does not accept them) would otherwise keep
/// `connect` waiting for as long as it lasts.
fn connect_by(socket: &Path, until: Instant) -> std::io::Result<UnixStream> {
    // Room for the path and the NUL after it, as ssh makes its sockets.
    const ROOM: usize =
        std::mem::size_of::<libc::sockaddr_un>() - std::mem::size_of::<libc::sa_family_t>();
    let path = socket.as_os_str().as_bytes();
    let unfit = || {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "the socket's path is too long, or holds a NUL",
        )
    };
    if path.len() >= ROOM || path.contains(&0) {
        return Err(unfit());
    }
    let address = SocketAddrUnix::new(socket).map_err(|_| unfit())?;
    let flags = SocketFlags::CLOEXEC;
    let fd = rustix::net::socket_with(AddressFamily::UNIX, SocketType::STREAM, flags, None)?;
    let stream = UnixStream::from(fd);
    // A stream socket waits for room in the listener's queue for as long
    // as its send timeout, then fails with EAGAIN.
    stream.set_write_timeout(Some(left(until)?))?;
    loop {
        match rustix::net::connect(&stream, &address) {
            Ok(()) => return Ok(stream),
            Err(Errno::INTR) => stream.set_write_timeout(Some(left(until)?))?,
            Err(error) => return Err(error.into()),
        }
    }
}

/// A message being built.
struct Message(Vec<u8>);

impl Message {
    fn words(words: &[u32]) -> Message {
        let mut message = Message(Vec::new());
        words.iter().for_each(|word| message.word(*word));
        message
    }

    fn word(&mut self, word: u32) {
        self.0.extend_from_slice(&word.to_be_bytes());
    }

    fn string(&mut self, bytes: &[u8]) {
        self.word(bytes.len() as u32);
        self.0.extend_from_slice(bytes);
    }
}

/// Sends `message` after its length.
fn send(stream: &mut impl Write, message: &Message) -> std::io::Result<()> {
    let mut bytes = (message.0.len() as u32).to_be_bytes().to_vec();
    bytes.extend_from_slice(&message.0);
    stream.write_all(&bytes)
}

/// One message, without its length.
fn receive(stream: &mut impl Read) -> Option<Vec<u8>> {
    let mut length = [0u8; 4];
    stream.read_exact(&mut length).ok()?;
    let length = u32::from_be_bytes(length) as usize;
    if length > MAX_MESSAGE {
        return None;
    }
    let mut message = vec![0u8; length];
    stream.read_exact(&mut message).ok()?;
    Some(message)
}

/// The first `count` big-endian words of `message`.
fn words(message: &[u8], count: usize) -> Option<Vec<u32>> {
    let words: Vec<u32> = message
        .chunks_exact(4)
        .take(count)
        .map(|w| u32::from_be_bytes([w[0], w[1], w[2], w[3]]))
        .collect();
    (words.len() == count).then_some(words)
}

/// The string at byte `offset` of `message`, as text.
fn string_at(message: &[u8], offset: usize) -> Option<String> {
    let length = words(message.get(offset..)?, 1)?[0] as usize;
    let bytes = message.get(offset + 4..offset + 4 + length)?;
    Some(String::from_utf8_lossy(bytes).into_owned())
}

/// Sends the descriptor `fd` over `socket` as ssh's own client does: one
/// byte, with the descriptor as its control message.
pub fn send_fd(socket: &UnixStream, fd: BorrowedFd<'_>) -> std::io::Result<()> {
    let byte = [0u8; 1];
    let fds = [fd];
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    if !control.push(SendAncillaryMessage::ScmRights(&fds)) {
        return Err(std::io::Error::other("no room for the descriptor"));
    }
    loop {
        let bytes = [IoSlice::new(&byte)];
        match rustix::net::sendmsg(socket, &bytes, &mut control, SendFlags::NOSIGNAL) {
            Ok(1) => return Ok(()),
            Ok(_) => return Err(std::io::Error::other("the master took no descriptor")),
            Err(Errno::INTR) => continue,
            Err(error) => return Err(error.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixListener;

    /// Receives one descriptor as the master does.
    fn receive_fd(stream: &UnixStream) -> std::os::fd::OwnedFd {
        use rustix::net::{RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags};
        let mut byte = [0u8; 1];
        let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
        let mut control = RecvAncillaryBuffer::new(&mut space);
        let mut bytes = [std::io::IoSliceMut::new(&mut byte)];
        let got = rustix::net::recvmsg(stream, &mut bytes, &mut control, RecvFlags::empty());
        assert_eq!(got.unwrap().bytes, 1);
        let fd = control.drain().find_map(|message| match message {
            RecvAncillaryMessage::ScmRights(mut fds) => fds.next(),
            _ => None,
        });
        fd.expect("a descriptor came with the byte")
    }

    #[test]
    fn a_master_is_asked_whether_it_is_alive_as_ssh_asks_it() {
        let base = tempfile::tempdir().unwrap();
        let socket = base.path().join("s");
        let listener = UnixListener::bind(&socket).unwrap();
        // A master as OpenSSH's mux.c answers: hello first, then the
        // check's reply, checking what the client sent.
        let master = std::thread::spawn(move || {
            let (mut stream, _) = listener.accept().unwrap();
            send(&mut stream, &Message::words(&[1, 4])).unwrap();
            let hello = receive(&mut stream).unwrap();
            assert_eq!(words(&hello, 2).unwrap(), [1, 4]);
            let check = receive(&mut stream).unwrap();
            assert_eq!(words(&check, 2).unwrap(), [0x1000_0004, 1]);
            send(&mut stream, &Message::words(&[0x8000_0005, 1, 4242])).unwrap();
            // Then one that speaks another version.
            let (mut stream, _) = listener.accept().unwrap();
            send(&mut stream, &Message::words(&[1, 3])).unwrap();
            let _ = receive(&mut stream);
        });
        assert_eq!(master_alive(&socket), Some(4242));
        assert_eq!(master_alive(&socket), None);
        master.join().unwrap();
        // Nobody listening any more: a stale socket.
        assert_eq!(master_alive(&socket), None);
        assert_eq!(master_alive(&base.path().join("none")), None);
    }

    /// Fails unless `check` is over well before the 30 s a run gives a
    /// target to answer, which the alive check once took.
    #[track_caller]
    fn soon<T>(check: impl FnOnce() -> T) -> T {
        let started = Instant::now();
        let result = check();
        let took = started.elapsed();
        assert!(took < Duration::from_secs(10), "the check took {took:?}");
        result
    }

    #[test]
    fn a_socket_that_does_not_answer_promptly_is_no_master() {
        let base = tempfile::tempdir().unwrap();
        let socket = base.path().join("s");
        let listener = UnixListener::bind(&socket).unwrap();
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        // Accepts and never answers; then answers a byte at a time, each
        // byte well within the limit, the whole not.
        let silent = std::thread::spawn(move || {
            let (_held, _) = listener.accept().unwrap();
            let (mut stream, _) = listener.accept().unwrap();
            let mut answers = Vec::new();
            send(&mut answers, &Message::words(&[HELLO, VERSION])).unwrap();
            send(&mut answers, &Message::words(&[ALIVE, REQUEST, 4242])).unwrap();
            let pause = ALIVE_LIMIT / 4;
            for byte in answers {
                if stream.write_all(&[byte]).is_err() {
                    break;
                }
                // The pace of a slow answer, not a wait for the test.
                if stopped.recv_timeout(pause).is_ok() {
                    break;
                }
            }
        });
        assert_eq!(soon(|| master_alive(&socket)), None);
        assert_eq!(soon(|| master_alive(&socket)), None);
        drop(stop);
        silent.join().unwrap();
    }

    #[test]
    fn a_listener_that_accepts_nothing_is_no_master() {
        let base = tempfile::tempdir().unwrap();
        let socket = base.path().join("s");
        let listener = UnixListener::bind(&socket).unwrap();
        // A queue of no connection waiting: the first connection fills it,
        // and the next one would wait for room.
        rustix::net::listen(&listener, 0).unwrap();
        let _first = UnixStream::connect(&socket).unwrap();
        assert_eq!(soon(|| master_alive(&socket)), None);
    }

    #[test]
    fn a_session_request_carries_the_command_and_the_three_descriptors() {
        let base = tempfile::tempdir().unwrap();
        let socket = base.path().join("s");
        let listener = UnixListener::bind(&socket).unwrap();
        // A master that checks the request field by field, then plays the
        // command through the descriptors it was given: reads stdin to its
        // end, echoes it on stdout and says something on stderr.
        let master = std::thread::spawn(move || {
            let (mut stream, _) = listener.accept().unwrap();
            send(&mut stream, &Message::words(&[1, 4])).unwrap();
            receive(&mut stream).unwrap();
            let request = receive(&mut stream).unwrap();
            let mut expected = Message::words(&[NEW_SESSION, REQUEST]);
            expected.string(b"");
            [0, 0, 0, 0, NO_ESCAPE]
                .iter()
                .for_each(|w| expected.word(*w));
            expected.string(b"");
            expected.string(b"exec /bin/sh -c 'it'");
            assert_eq!(request, expected.0);
            let stdin = File::from(receive_fd(&stream));
            let mut stdout = File::from(receive_fd(&stream));
            let mut stderr = File::from(receive_fd(&stream));
            send(&mut stream, &Message::words(&[SESSION_OPENED, REQUEST, 7])).unwrap();
            let mut input = String::new();
            (&stdin).read_to_string(&mut input).unwrap();
            writeln!(stdout, "got {input}").unwrap();
            writeln!(stderr, "a warning").unwrap();
            // The session is over: its descriptors close.
            drop((stdin, stdout, stderr));
            // Then one that refuses.
            let (mut stream, _) = listener.accept().unwrap();
            send(&mut stream, &Message::words(&[1, 4])).unwrap();
            receive(&mut stream).unwrap();
            receive(&mut stream).unwrap();
            for _ in 0..3 {
                receive_fd(&stream);
            }
            let mut refusal = Message::words(&[PERMISSION_DENIED, REQUEST]);
            refusal.string(b"not today");
            send(&mut stream, &refusal).unwrap();
        });
        let limit = Duration::from_secs(5);
        let stderr = tempfile::tempfile().unwrap();
        let mut session = open_session(&socket, "exec /bin/sh -c 'it'", &stderr, limit).unwrap();
        session.stdin.write_all(b"hello").unwrap();
        drop(session.stdin);
        let mut output = String::new();
        session.stdout.read_to_string(&mut output).unwrap();
        assert_eq!(output, "got hello\n");
        let mut said = String::new();
        let mut stderr_read = stderr.try_clone().unwrap();
        use std::io::Seek;
        stderr_read.rewind().unwrap();
        stderr_read.read_to_string(&mut said).unwrap();
        assert_eq!(said, "a warning\n");
        let refused = open_session(&socket, "x", &stderr, limit).err().unwrap();
        assert!(
            matches!(&refused, OpenError::Refused(why) if why == "not today"),
            "{refused}"
        );
        master.join().unwrap();
    }
}
