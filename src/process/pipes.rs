//! Non-blocking pipe ends for the runner's single-threaded event loop: a
//! reader that splits what arrives into bounded lines without copying
//! them, a writer that feeds a document to a child's stdin, and the set of
//! descriptors one turn of the loop waits on.

use std::fs::File;
use std::io::{ErrorKind, Read, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::time::Instant;

use super::limits::{remaining, INTERRUPT_POLL};

/// How much one read asks for at first: most answers are small, and a
/// one-resource call should not pay for touching a large buffer.
const FIRST_READ: usize = 4 * 1024;
/// How much one read asks for at most; a pipe holds 64 KiB by default.
const MAX_READ: usize = 64 * 1024;

/// The index of the first newline in `bytes`.
fn find_newline(bytes: &[u8]) -> Option<usize> {
    // SSE2 is part of x86_64 itself: this searcher needs no run-time CPU
    // detection, whose `cpuid` instructions are slow under a hypervisor and
    // would cost a one-resource call more than the search ever saves.
    #[cfg(target_arch = "x86_64")]
    if let Some(searcher) = memchr::arch::x86_64::sse2::memchr::One::new(b'\n') {
        return searcher.find(bytes);
    }
    memchr::memchr(b'\n', bytes)
}

fn set_nonblocking(fd: BorrowedFd<'_>) -> std::io::Result<()> {
    let flags = rustix::fs::fcntl_getfl(fd)?;
    Ok(rustix::fs::fcntl_setfl(
        fd,
        flags | rustix::fs::OFlags::NONBLOCK,
    )?)
}

/// A piece of a line: the whole line when it fits the limit, otherwise
/// pieces of at most the limit, the last of which `ends` the line.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Piece<'a> {
    /// Without the newline.
    pub bytes: &'a [u8],
    /// A previous piece of the same line came before.
    pub continues: bool,
    /// The line ends here (at a newline, or at the end of the output).
    pub ends: bool,
    /// The output ended here without a newline.
    pub unterminated: bool,
}

/// Reads a pipe without blocking and hands out its lines.
pub(super) struct LineReader {
    file: File,
    buf: Vec<u8>,
    /// What is still to be handed out is `buf[start..end]`.
    start: usize,
    end: usize,
    /// How many bytes after `start` are known to hold no newline.
    searched: usize,
    eof: bool,
    /// The last piece handed out did not end its line.
    in_line: bool,
    /// How much the next read asks for: doubled while reads fill it.
    read_size: usize,
}

impl LineReader {
    pub(super) fn new(fd: impl Into<OwnedFd>) -> std::io::Result<LineReader> {
        let fd: OwnedFd = fd.into();
        set_nonblocking(fd.as_fd())?;
        Ok(LineReader {
            file: File::from(fd),
            buf: Vec::new(),
            start: 0,
            end: 0,
            searched: 0,
            eof: false,
            in_line: false,
            read_size: FIRST_READ,
        })
    }

    pub(super) fn fd(&self) -> RawFd {
        self.file.as_raw_fd()
    }

    /// The writers closed the pipe and every byte was handed out.
    pub(super) fn is_done(&self) -> bool {
        self.eof && self.start == self.end
    }

    /// Stops reading: what is left counts as handed out.
    pub(super) fn give_up(&mut self) {
        self.eof = true;
        self.start = self.end;
    }

    /// Hands out every byte that arrived, lines or not.
    pub(super) fn take_all(&mut self) -> &[u8] {
        let bytes = &self.buf[self.start..self.end];
        self.start = self.end;
        self.searched = 0;
        bytes
    }

    /// Reads what the pipe holds now. True when something changed (bytes
    /// came, or the end of the output); false when a read would block.
    pub(super) fn fill(&mut self) -> std::io::Result<bool> {
        if self.eof {
            return Ok(false);
        }
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
        if self.buf.len() - self.end < self.read_size {
            if self.start > 0 {
                self.buf.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            }
            if self.buf.len() - self.end < self.read_size {
                self.buf.resize(self.end + self.read_size, 0);
            }
        }
        loop {
            let room = self.buf.len() - self.end;
            match self.file.read(&mut self.buf[self.end..]) {
                Ok(0) => {
                    self.eof = true;
                    return Ok(true);
                }
                Ok(n) => {
                    self.end += n;
                    if n == room {
                        self.read_size = (self.read_size * 2).min(MAX_READ);
                    }
                    return Ok(true);
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
    }

    /// The next piece of at most `max` bytes, once it is complete: a line
    /// ended by a newline, `max` bytes of a longer one, or what is left at
    /// the end of the output.
    pub(super) fn next_piece(&mut self, max: usize) -> Option<Piece<'_>> {
        let pending = &self.buf[self.start..self.end];
        if pending.is_empty() {
            return None;
        }
        let window = pending.len().min(max.saturating_add(1));
        let newline = if self.searched < window {
            find_newline(&pending[self.searched..window]).map(|i| i + self.searched)
        } else {
            None
        };
        let (len, consumed, ends) = match newline {
            Some(i) => (i, i + 1, true),
            None if pending.len() > max => (max, max, false),
            None if self.eof => (pending.len(), pending.len(), true),
            None => {
                self.searched = window;
                return None;
            }
        };
        let piece = Piece {
            bytes: &self.buf[self.start..self.start + len],
            continues: self.in_line,
            ends,
            unterminated: newline.is_none() && ends,
        };
        self.start += consumed;
        self.searched = 0;
        self.in_line = !ends;
        Some(piece)
    }
}

/// `bytes` as text: borrowed when it is UTF-8, which is checked much faster
/// than `String::from_utf8_lossy` finds it out; invalid sequences become
/// U+FFFD.
pub(super) fn text(bytes: &[u8]) -> std::borrow::Cow<'_, str> {
    match std::str::from_utf8(bytes) {
        Ok(text) => std::borrow::Cow::Borrowed(text),
        Err(_) => String::from_utf8_lossy(bytes),
    }
}

/// Writes a document to a child's stdin as the pipe takes it, then closes
/// it. A child that stops reading early only loses the rest.
pub(super) struct Feeder<'a> {
    file: Option<File>,
    bytes: &'a [u8],
    written: usize,
}

impl<'a> Feeder<'a> {
    pub(super) fn new(
        fd: Option<impl Into<OwnedFd>>,
        bytes: &'a [u8],
    ) -> std::io::Result<Feeder<'a>> {
        let file = match fd {
            Some(fd) if !bytes.is_empty() => {
                let fd: OwnedFd = fd.into();
                set_nonblocking(fd.as_fd())?;
                Some(File::from(fd))
            }
            _ => None,
        };
        Ok(Feeder {
            file,
            bytes,
            written: 0,
        })
    }

    /// The descriptor to poll for room, while there is more to write.
    pub(super) fn fd(&self) -> Option<RawFd> {
        self.file.as_ref().map(File::as_raw_fd)
    }

    /// Writes as much as the pipe takes now.
    pub(super) fn write_some(&mut self) {
        let Some(file) = &mut self.file else { return };
        while self.written < self.bytes.len() {
            match file.write(&self.bytes[self.written..]) {
                Ok(n) => self.written += n,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                // The child closed its stdin; what it did not read is lost.
                Err(_) => break,
            }
        }
        self.file = None;
    }
}

/// The descriptors one turn of an event loop waits on: a child's pipes and
/// its exit, never more than five, so no allocation per turn.
pub(super) struct PollSet {
    fds: [libc::pollfd; 5],
    len: usize,
}

impl Default for PollSet {
    fn default() -> PollSet {
        let none = libc::pollfd {
            fd: -1,
            events: 0,
            revents: 0,
        };
        PollSet {
            fds: [none; 5],
            len: 0,
        }
    }
}

impl PollSet {
    /// Waits for `events` on `fd`, if there is one.
    pub(super) fn add(&mut self, fd: Option<RawFd>, events: libc::c_short) {
        if let Some(fd) = fd {
            self.fds[self.len] = libc::pollfd {
                fd,
                events,
                revents: 0,
            };
            self.len += 1;
        }
    }

    /// Waits until a descriptor is ready, `until` passes (at once when it
    /// has), or a signal arrives, but never longer than [`INTERRUPT_POLL`],
    /// so that an interrupt taken by another thread is noticed. Returns the
    /// descriptors that are ready.
    pub(super) fn wait(
        &mut self,
        until: Instant,
    ) -> std::io::Result<impl Iterator<Item = RawFd> + '_> {
        let wait = remaining(until).min(INTERRUPT_POLL);
        // Rounded up: a wait cut to 0 ms would spin until the deadline.
        let millis = wait.as_micros().div_ceil(1000) as libc::c_int;
        let fds = &mut self.fds[..self.len];
        // SAFETY: `fds` is a valid, exclusively borrowed array of pollfd.
        let ready = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, millis) };
        if ready < 0 {
            let error = std::io::Error::last_os_error();
            if error.kind() != ErrorKind::Interrupted {
                return Err(error);
            }
            // Interrupted: nothing is ready (revents may be stale).
            fds.iter_mut().for_each(|fd| fd.revents = 0);
        }
        Ok(fds.iter().filter(|fd| fd.revents != 0).map(|fd| fd.fd))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reader(input: &[u8]) -> LineReader {
        let (read, mut write) = std::io::pipe().unwrap();
        write.write_all(input).unwrap();
        drop(write);
        let mut reader = LineReader::new(read).unwrap();
        while !reader.eof {
            reader.fill().unwrap();
        }
        reader
    }

    fn pieces(reader: &mut LineReader, max: usize) -> Vec<(Vec<u8>, bool, bool)> {
        let mut out = Vec::new();
        while let Some(piece) = reader.next_piece(max) {
            out.push((piece.bytes.to_vec(), piece.continues, piece.ends));
        }
        out
    }

    #[test]
    fn a_last_line_without_a_newline_is_marked_unterminated() {
        let mut r = reader(b"ab\ncd");
        assert!(!r.next_piece(10).unwrap().unterminated);
        let last = r.next_piece(10).unwrap();
        assert_eq!((last.bytes, last.unterminated), (&b"cd"[..], true));
        let mut r = reader(b"ab\n");
        assert!(!r.next_piece(10).unwrap().unterminated);
        assert!(r.next_piece(10).is_none());
    }

    #[test]
    fn lines_split_at_newlines_and_the_last_needs_none() {
        let mut r = reader(b"abc\n\nde");
        assert_eq!(
            pieces(&mut r, 10),
            [
                (b"abc".to_vec(), false, true),
                (b"".to_vec(), false, true),
                (b"de".to_vec(), false, true)
            ]
        );
        assert!(r.is_done());
    }

    #[test]
    fn long_lines_come_in_pieces_of_the_limit() {
        let mut r = reader(b"abcd\nabcdefghij\nxy\n");
        assert_eq!(
            pieces(&mut r, 4),
            [
                (b"abcd".to_vec(), false, true),
                (b"abcd".to_vec(), false, false),
                (b"efgh".to_vec(), true, false),
                (b"ij".to_vec(), true, true),
                (b"xy".to_vec(), false, true)
            ]
        );
    }

    #[test]
    fn an_incomplete_line_waits_for_more() {
        let (read, mut write) = std::io::pipe().unwrap();
        let mut r = LineReader::new(read).unwrap();
        write.write_all(b"ab").unwrap();
        assert!(r.fill().unwrap());
        assert_eq!(r.next_piece(10), None);
        assert!(!r.fill().unwrap(), "an empty pipe would block");
        write.write_all(b"c\nd").unwrap();
        assert!(r.fill().unwrap());
        assert_eq!(pieces(&mut r, 10), [(b"abc".to_vec(), false, true)]);
        drop(write);
        assert!(r.fill().unwrap());
        assert_eq!(pieces(&mut r, 10), [(b"d".to_vec(), false, true)]);
        assert!(r.is_done());
    }

    #[test]
    fn the_feeder_writes_everything_and_closes() {
        let (mut read, write) = std::io::pipe().unwrap();
        let document = vec![b'x'; 300_000];
        let mut feeder = Feeder::new(Some(write), &document).unwrap();
        let mut got = Vec::new();
        while feeder.fd().is_some() {
            feeder.write_some();
            let mut chunk = vec![0; 65536];
            let n = read.read(&mut chunk).unwrap();
            got.extend_from_slice(&chunk[..n]);
        }
        read.read_to_end(&mut got).unwrap();
        assert_eq!(got, document);
    }
}
