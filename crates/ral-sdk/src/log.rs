//! The log: messages on stderr, one line each, prefixed by their level,
//! which the host logs under the provider's name. Messages about one
//! resource carry it and the action under way as a `ral_log` JSON object,
//! which the host shows as `NAME: ACTION: message` and redacts where an
//! attribute is sensitive (the same lines the Python toolkit writes).

use std::io::Write;
use std::sync::Mutex;

use serde_json::{json, Map, Value as Json};

use super::error::{CallError, CallResult};
use super::text::{clean, python_json};

/// Where a call's log lines go: stderr for a provider program, a buffer
/// for one the host runs in its own process.
pub struct Log {
    out: Mutex<Box<dyn Write + Send>>,
    noop: bool,
}

/// The levels the host reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Debug,
    Info,
    Warn,
    Error,
}

impl Level {
    fn prefix(self) -> &'static str {
        match self {
            Level::Debug => "debug",
            Level::Info => "info",
            Level::Warn => "warn",
            Level::Error => "error",
        }
    }
}

impl Log {
    /// A log writing to `out`; `noop` words what it says about changes
    /// ("would be created").
    pub fn new(out: Box<dyn Write + Send>, noop: bool) -> Log {
        Log {
            out: Mutex::new(out),
            noop,
        }
    }

    /// Whether the call is noop.
    pub fn noop(&self) -> bool {
        self.noop
    }

    /// One line at `level`. A reader that went away is not an error.
    pub fn line(&self, level: Level, message: &str) {
        let mut out = self.out.lock().unwrap_or_else(|e| e.into_inner());
        let _ = writeln!(out, "{}: {}", level.prefix(), clean(message));
        let _ = out.flush();
    }

    pub fn debug(&self, message: &str) {
        self.line(Level::Debug, message);
    }

    pub fn info(&self, message: &str) {
        self.line(Level::Info, message);
    }

    pub fn warning(&self, message: &str) {
        self.line(Level::Warn, message);
    }

    pub fn error(&self, message: &str) {
        self.line(Level::Error, message);
    }

    /// A message about the resource `name`, with the action under way
    /// (`context`) and any further fields (`attribute`, `old`, `new`).
    pub fn resource(
        &self,
        level: Level,
        name: &str,
        context: Option<&str>,
        message: Option<&str>,
        fields: Map<String, Json>,
    ) {
        let mut record = Map::new();
        record.insert("resource".into(), json!(name));
        if let Some(context) = context {
            record.insert("context".into(), json!(context));
        }
        record.extend(fields);
        if let Some(message) = message {
            record.insert("message".into(), json!(message));
        }
        self.line(
            level,
            &format!("ral_log {}", python_json(&Json::Object(record))),
        );
    }

    /// An attribute of `name` changed from `old` to `new`.
    pub fn attribute_changed(&self, name: &str, attribute: &str, old: &str, new: &str) {
        let mut fields = Map::new();
        fields.insert("attribute".into(), json!(attribute));
        fields.insert("old".into(), json!(old));
        fields.insert("new".into(), json!(new));
        self.resource(Level::Info, name, None, None, fields);
    }

    /// Runs `work` as the creation of `name`, saying it started, failed,
    /// or was done ("would be created" under noop).
    pub fn creating<T>(&self, name: &str, work: impl FnOnce() -> CallResult<T>) -> CallResult<T> {
        self.within(name, "creating", "created", work)
    }

    pub fn updating<T>(&self, name: &str, work: impl FnOnce() -> CallResult<T>) -> CallResult<T> {
        self.within(name, "updating", "updated", work)
    }

    pub fn deleting<T>(&self, name: &str, work: impl FnOnce() -> CallResult<T>) -> CallResult<T> {
        self.within(name, "deleting", "deleted", work)
    }

    fn within<T>(
        &self,
        name: &str,
        doing: &str,
        done: &str,
        work: impl FnOnce() -> CallResult<T>,
    ) -> CallResult<T> {
        self.resource(Level::Debug, name, Some(doing), Some("started"), Map::new());
        match work() {
            Ok(value) => {
                let word = match self.noop {
                    true => format!("would be {done}"),
                    false => done.to_owned(),
                };
                self.resource(Level::Info, name, Some(doing), Some(&word), Map::new());
                Ok(value)
            }
            Err(err) => {
                let said = format!("failed: {}", err.message);
                self.resource(Level::Debug, name, Some(doing), Some(&said), Map::new());
                Err::<T, CallError>(err)
            }
        }
    }
}

/// Log lines kept in memory, shared by its clones: where the host reads
/// the log of a provider it serves in its own process, and a test the log
/// of a call.
#[derive(Clone, Default)]
pub struct Buffer(std::sync::Arc<Mutex<Vec<u8>>>);

impl Buffer {
    /// The bytes written so far, leaving it empty.
    pub fn take(&self) -> Vec<u8> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// The text written so far (bytes that are not UTF-8 as U+FFFD).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap_or_else(|e| e.into_inner())).into_owned()
    }
}

impl Write for Buffer {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl std::fmt::Debug for Log {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Log").field("noop", &self.noop).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resource_contexts_say_started_and_done_as_noop_words_it() {
        let shared = Buffer::default();
        let log = Log::new(Box::new(shared.clone()), true);
        let got: CallResult<u8> = log.creating("web1", || Ok(7));
        assert_eq!(got, Ok(7));
        let text = shared.text();
        assert_eq!(
            text,
            "debug: ral_log {\"resource\": \"web1\", \"context\": \"creating\", \"message\": \"started\"}\n\
             info: ral_log {\"resource\": \"web1\", \"context\": \"creating\", \"message\": \"would be created\"}\n"
        );
    }

    #[test]
    fn lines_are_made_one_line() {
        let shared = Buffer::default();
        let log = Log::new(Box::new(shared.clone()), false);
        log.warning("two\nlines");
        assert_eq!(shared.text().as_bytes(), b"warn: two?lines\n");
    }

    #[test]
    fn errors_and_changed_attributes_are_written_as_the_host_reads_them() {
        let shared = Buffer::default();
        let log = Log::new(Box::new(shared.clone()), false);
        assert!(!log.noop());
        assert!(Log::new(Box::new(std::io::sink()), true).noop());
        log.error("disk full");
        log.attribute_changed("web1", "ip", "10.0.0.1", "10.0.0.2");
        assert_eq!(
            shared.text(),
            "error: disk full\n\
             info: ral_log {\"resource\": \"web1\", \"attribute\": \"ip\", \"old\": \"10.0.0.1\", \
             \"new\": \"10.0.0.2\"}\n"
        );
    }
}
