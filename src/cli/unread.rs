//! Standard output for the commands whose outcome is more than what they
//! print (ral plan, apply and check, and every run over `-t`): once the
//! reader has gone (`ral plan | head -1`), the rest of the output is
//! dropped quietly and the command goes on to its end, so that its exit
//! status still tells the outcome (changes pending, a task or a target
//! failed, a provider failed its check) and what it writes besides (a
//! saved plan, the state store) is written.

use std::io::{self, Write};

/// A writer that takes a closed pipe as the end of its reader, not as an
/// error: every write after it succeeds and goes nowhere.
pub struct Unread<W> {
    inner: W,
    gone: bool,
}

impl<W: Write> Unread<W> {
    pub fn new(inner: W) -> Unread<W> {
        Unread { inner, gone: false }
    }

    fn outcome<T>(&mut self, result: io::Result<T>, or: T) -> io::Result<T> {
        match result {
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => {
                self.gone = true;
                Ok(or)
            }
            other => other,
        }
    }
}

/// Standard output, as [`Unread`].
pub fn stdout() -> Unread<io::StdoutLock<'static>> {
    Unread::new(io::stdout().lock())
}

impl<W: Write> Write for Unread<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.gone {
            return Ok(buf.len());
        }
        let written = self.inner.write(buf);
        self.outcome(written, buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        if self.gone {
            return Ok(());
        }
        let flushed = self.inner.flush();
        self.outcome(flushed, ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Takes `room` bytes, then fails as a pipe whose reader has gone.
    struct Pipe {
        room: usize,
        taken: Vec<u8>,
    }

    impl Write for Pipe {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            if self.taken.len() >= self.room {
                return Err(io::ErrorKind::BrokenPipe.into());
            }
            let n = buf.len().min(self.room - self.taken.len());
            self.taken.extend_from_slice(&buf[..n]);
            Ok(n)
        }

        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn after_the_reader_goes_writes_succeed_and_go_nowhere_and_other_errors_stay() {
        let mut out = Unread::new(Pipe {
            room: 4,
            taken: Vec::new(),
        });
        out.write_all(b"abcdefgh").unwrap();
        writeln!(out, "more").unwrap();
        out.flush().unwrap();
        assert_eq!(out.inner.taken, b"abcd");
        assert!(out.gone);

        struct Full;
        impl Write for Full {
            fn write(&mut self, _: &[u8]) -> io::Result<usize> {
                Err(io::Error::other("disk full"))
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let mut full = Unread::new(Full);
        assert_eq!(full.write(b"x").unwrap_err().to_string(), "disk full");
    }
}
