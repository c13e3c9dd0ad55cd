//! The errors a provider returns: a [`CallError`] fails a whole call, or,
//! returned for one update or one name, only that resource. Their kind is
//! one of the json convention's error kinds, so both conventions can say
//! it.

use std::fmt;
use std::io;

use super::text::quoted;

/// The json convention's error kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The resource does not exist and cannot be created.
    Unknown,
    /// The caller lacks a permission.
    Forbidden,
    /// Anything else.
    Failed,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Unknown => "unknown",
            Kind::Forbidden => "forbidden",
            Kind::Failed => "failed",
        }
    }
}

/// A call, or one resource of it, that failed, with the message the host
/// shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallError {
    pub kind: Kind,
    pub message: String,
    /// A directory on the way to a path below the root does not exist
    /// (callers that read treat that as "no such file").
    pub missing: bool,
}

impl CallError {
    /// A failure of kind `failed`.
    pub fn new(message: impl Into<String>) -> CallError {
        CallError {
            kind: Kind::Failed,
            message: message.into(),
            missing: false,
        }
    }

    /// A failure of the given kind.
    pub fn of_kind(kind: Kind, message: impl Into<String>) -> CallError {
        CallError {
            kind,
            message: message.into(),
            missing: false,
        }
    }

    /// A directory on the way to `path` does not exist.
    pub fn missing(path: &str) -> CallError {
        CallError {
            kind: Kind::Failed,
            message: format!("{} does not exist", quoted(path)),
            missing: true,
        }
    }

    /// `cannot WHAT: reason` for an I/O error; a denied permission is of
    /// kind `forbidden`.
    pub fn io(err: &io::Error, what: &str) -> CallError {
        let kind = match err.kind() {
            io::ErrorKind::PermissionDenied => Kind::Forbidden,
            _ => Kind::Failed,
        };
        CallError::of_kind(kind, format!("cannot {what}: {}", strerror(err)))
    }
}

impl fmt::Display for CallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for CallError {}

/// The system's text for an I/O error, without Rust's "(os error N)".
pub fn strerror(err: &io::Error) -> String {
    let text = err.to_string();
    match text.rfind(" (os error ") {
        Some(at) => text[..at].to_owned(),
        None => text,
    }
}

/// What a provider function returns.
pub type CallResult<T> = std::result::Result<T, CallError>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn io_errors_say_what_failed_and_a_denied_permission_is_forbidden() {
        let denied = io::Error::from_raw_os_error(libc::EACCES);
        let err = CallError::io(&denied, "open 'x'");
        assert_eq!(err.kind, Kind::Forbidden);
        assert_eq!(err.message, "cannot open 'x': Permission denied");
        let full = io::Error::from_raw_os_error(libc::ENOSPC);
        assert_eq!(CallError::io(&full, "write").kind, Kind::Failed);
        // Shown as its message, as a provider author prints it.
        assert_eq!(err.to_string(), "cannot open 'x': Permission denied");
    }
}
