//! Where `ral plan`/`ral apply` log records go: stderr, and while a
//! progress is drawn there, a queue that one thread writes out with the
//! progress taken off the terminal, so that a record and the progress
//! never tear each other.
//!
//! The queue is what keeps this free of deadlocks: the logger holds its
//! own lock while it writes a record, and the progress holds its lock
//! while the task lines are printed (which may log). A record therefore
//! never waits for the progress: it is queued, and only the writer
//! thread, which holds no other lock, waits for the progress.

use std::io::{self, Write};
use std::sync::mpsc::{self, Sender};
use std::sync::Mutex;
use std::thread::JoinHandle;

use indicatif::MultiProgress;

/// The queue to the writer thread, while a progress is drawn.
static QUEUE: Mutex<Option<Sender<Vec<u8>>>> = Mutex::new(None);

/// The logger's output: each record is written whole.
pub struct LogOutput;

impl Write for LogOutput {
    fn write(&mut self, record: &[u8]) -> io::Result<usize> {
        self.write_all(record).map(|()| record.len())
    }

    fn write_all(&mut self, record: &[u8]) -> io::Result<()> {
        let queue = QUEUE.lock().ok().and_then(|queue| queue.clone());
        match queue {
            Some(queue) if queue.send(record.to_vec()).is_ok() => Ok(()),
            _ => io::stderr().write_all(record),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        io::stderr().flush()
    }
}

/// Records go around `multi` until [`Routed::end`].
pub struct Routed {
    writer: Option<JoinHandle<()>>,
}

/// Sends the log records to a thread that writes each with `multi`
/// suspended.
pub fn around(multi: &MultiProgress) -> Routed {
    let (sender, records) = mpsc::channel::<Vec<u8>>();
    let multi = multi.clone();
    let writer = std::thread::spawn(move || {
        for record in records {
            multi.suspend(|| {
                let _ = io::stderr().write_all(&record);
            });
        }
    });
    if let Ok(mut queue) = QUEUE.lock() {
        *queue = Some(sender);
    }
    Routed {
        writer: Some(writer),
    }
}

impl Routed {
    /// Records go straight to stderr again, once those queued are
    /// written.
    pub fn end(&mut self) {
        // The writer ends when the last sender is gone: the queue's, and
        // the copy of a record being queued right now.
        if let Ok(mut queue) = QUEUE.lock() {
            *queue = None;
        }
        if let Some(writer) = self.writer.take() {
            let _ = writer.join();
        }
    }
}
