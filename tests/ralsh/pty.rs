//! A command on a pseudo-terminal, for the tests of what ral does on a
//! terminal: its stdin, stdout and stderr are the terminal, and the test
//! reads what it shows and types answers. Every read and wait has a
//! deadline: a test that waits for text that never comes fails instead of
//! hanging.

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

/// How long any one wait for the terminal or the child may take.
const PATIENCE: Duration = Duration::from_secs(60);

/// The terminal's size: wide enough that no line wraps.
const ROWS: u16 = 40;
const COLUMNS: u16 = 200;

/// A command running on a pseudo-terminal: its stdin, stdout and stderr
/// are the terminal, whose other side this holds.
pub struct Terminal {
    /// The terminal's other side, to answer on.
    master: File,
    /// What the command printed, in chunks, from a reader thread.
    chunks: Receiver<Vec<u8>>,
    /// The command's exit, from a waiter thread.
    exit: Receiver<ExitStatus>,
    pid: i32,
    exited: bool,
    /// All it printed so far, line ends as `\n`.
    pub seen: String,
    /// The same bytes as they came, for a terminal emulator.
    raw: Vec<u8>,
}

impl Terminal {
    pub fn start(command: &mut Command) -> Terminal {
        let (master, slave) = open_pty();
        command
            .stdin(Stdio::from(slave.try_clone().unwrap()))
            .stdout(Stdio::from(slave.try_clone().unwrap()))
            .stderr(Stdio::from(slave));
        let mut child = command.spawn().expect("ral starts");
        // The command's copies of the terminal are closed here: once the
        // command ends, reading the master side ends too (EIO).
        command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let pid = i32::try_from(child.id()).unwrap();
        let (exit_tx, exit) = mpsc::channel();
        std::thread::spawn(move || {
            if let Ok(status) = child.wait() {
                let _ = exit_tx.send(status);
            }
        });
        let (chunk_tx, chunks) = mpsc::channel();
        let mut reader = master.try_clone().unwrap();
        std::thread::spawn(move || {
            let mut buffer = [0u8; 4096];
            while let Ok(n @ 1..) = reader.read(&mut buffer) {
                if chunk_tx.send(buffer[..n].to_vec()).is_err() {
                    break;
                }
            }
        });
        Terminal {
            master,
            chunks,
            exit,
            pid,
            exited: false,
            seen: String::new(),
            raw: Vec::new(),
        }
    }

    /// Reads until what was printed holds `pattern`, or fails at the
    /// deadline showing what it holds.
    #[track_caller]
    pub fn wait_for(&mut self, pattern: &str) {
        let pattern = regex::Regex::new(pattern).unwrap();
        let deadline = Instant::now() + PATIENCE;
        while !pattern.is_match(&self.seen) {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.chunks.recv_timeout(left) {
                Ok(chunk) => self.take(&chunk),
                Err(RecvTimeoutError::Timeout) => {
                    panic!(
                        "the terminal never showed {pattern}; it shows:\n{}",
                        self.seen
                    )
                }
                Err(RecvTimeoutError::Disconnected) => {
                    panic!(
                        "the terminal closed without {pattern}; it showed:\n{}",
                        self.seen
                    )
                }
            }
        }
    }

    fn take(&mut self, chunk: &[u8]) {
        self.raw.extend_from_slice(chunk);
        self.seen
            .push_str(&String::from_utf8_lossy(chunk).replace("\r\n", "\n"));
    }

    /// Types `line` and Enter.
    pub fn answer(&mut self, line: &str) {
        self.master
            .write_all(format!("{line}\n").as_bytes())
            .unwrap();
    }

    /// Types Ctrl-D at the start of a line: the end of the input.
    pub fn end_input(&mut self) {
        self.master.write_all(&[4]).unwrap();
    }

    /// Waits for the command's exit and the rest of its output: its exit
    /// status and all it printed.
    #[track_caller]
    pub fn finish(self) -> (i32, String) {
        let (status, seen, _) = self.finish_with_screen();
        (status, seen)
    }

    /// [`Terminal::finish`], and the screen's rows as a terminal shows
    /// them at the end (the cursor movements and erasures done).
    #[track_caller]
    pub fn finish_with_screen(mut self) -> (i32, String, Vec<String>) {
        let status = match self.exit.recv_timeout(PATIENCE) {
            Ok(status) => status,
            Err(_) => panic!("ral did not end; the terminal shows:\n{}", self.seen),
        };
        self.exited = true;
        let deadline = Instant::now() + PATIENCE;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.chunks.recv_timeout(left) {
                Ok(chunk) => self.take(&chunk),
                Err(RecvTimeoutError::Disconnected) => break,
                Err(RecvTimeoutError::Timeout) => {
                    panic!("the terminal stayed open after ral ended:\n{}", self.seen)
                }
            }
        }
        let size = |n| std::num::NonZeroU16::new(n).unwrap();
        let mut screen = vt100::Parser::new(size(ROWS), size(COLUMNS), 0);
        screen.process(&self.raw);
        let rows = screen.screen().rows(0, COLUMNS).collect();
        let seen = std::mem::take(&mut self.seen);
        (status.code().unwrap_or(-1), seen, rows)
    }
}

/// A new pseudo-terminal, both sides: the master side, and the slave
/// side (the terminal a command is given).
///
/// Both are opened close-on-exec (openpty does not), so that the command
/// another test starts meanwhile never holds the terminal open.
fn open_pty() -> (File, OwnedFd) {
    use std::os::unix::fs::OpenOptionsExt;
    let open = |path: &std::path::Path| {
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NOCTTY)
            .open(path)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    };
    let master = open(std::path::Path::new("/dev/ptmx"));
    let fd = master.as_raw_fd();
    let mut name = [0 as libc::c_char; 128];
    // SAFETY: grantpt and unlockpt take the master's descriptor, which
    // `master` owns; ptsname_r writes at most `name.len()` bytes, NUL
    // included, into `name`.
    let named = unsafe {
        libc::grantpt(fd) == 0
            && libc::unlockpt(fd) == 0
            && libc::ptsname_r(fd, name.as_mut_ptr(), name.len()) == 0
    };
    assert!(
        named,
        "a pseudo-terminal: {}",
        std::io::Error::last_os_error()
    );
    // SAFETY: ptsname_r wrote a NUL-terminated name into `name`.
    let name = unsafe { std::ffi::CStr::from_ptr(name.as_ptr()) };
    let slave = open(std::path::Path::new(name.to_str().unwrap()));
    // A wide terminal: a progress line is never cut or wrapped.
    let size = libc::winsize {
        ws_row: ROWS,
        ws_col: COLUMNS,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCSWINSZ reads one winsize from the pointer given.
    let sized = unsafe { libc::ioctl(slave.as_raw_fd(), libc::TIOCSWINSZ, &size) };
    assert_eq!(sized, 0, "TIOCSWINSZ: {}", std::io::Error::last_os_error());
    (master, OwnedFd::from(slave))
}

impl Drop for Terminal {
    /// A test that failed midway leaves no ral waiting for an answer.
    fn drop(&mut self) {
        if !self.exited {
            // SAFETY: kill takes plain integers; the child is not reaped
            // until its waiter thread sees it end, so the pid is its own.
            unsafe { libc::kill(self.pid, libc::SIGKILL) };
        }
    }
}
