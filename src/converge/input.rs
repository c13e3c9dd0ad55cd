//! Reading the files `ral plan` and `ral apply` are given (manifests and
//! saved plans): a regular file or `-` (standard input), never more than
//! [`MAX_INPUT_BYTES`]. A FIFO, a device or a directory is refused at once
//! instead of blocking or reading without end.

use std::path::Path;

use crate::bounded_read::{read_at_most, read_file, Links, Refused};

/// How every saved plan starts: the rule that tells it from a manifest.
pub const MARK: &str = "{\"ral_saved_plan\":";

/// Whether `text` is a saved plan's (and must then verify as one).
pub fn is_marked(text: &str) -> bool {
    text.starts_with(MARK)
}

/// The most a manifest or a saved plan may hold: far above any real one,
/// far below what would exhaust memory.
pub const MAX_INPUT_BYTES: usize = 64 << 20;

/// Why a manifest or saved plan could not be read. It prints as what
/// follows the file's name in a message.
#[derive(Debug, thiserror::Error)]
pub enum Unreadable {
    /// The file is refused (not a regular file, too large) or could not
    /// be opened or read.
    #[error("{}", refused_text(.0))]
    File(Refused),
    /// Standard input could not be read or is too large.
    #[error("{}", stdin_text(.0))]
    Stdin(Refused),
    /// The bytes are no UTF-8 text.
    #[error("it is not UTF-8 text (byte {valid_up_to} is not valid)")]
    NotUtf8 { valid_up_to: usize },
}

impl Unreadable {
    /// Why, without the "cannot read it" a failed read is introduced by.
    pub fn reason(&self) -> String {
        match self {
            Unreadable::File(Refused::Io(e)) => e.to_string(),
            other => other.to_string(),
        }
    }
}

fn refused_text(refused: &Refused) -> String {
    match refused {
        Refused::Io(e) => format!("cannot read it: {e}"),
        other => other.to_string(),
    }
}

fn stdin_text(refused: &Refused) -> String {
    match refused {
        Refused::TooLarge { max } => format!("standard input is larger than {max} bytes"),
        other => format!("cannot read standard input: {other}"),
    }
}

/// Reads `path` (`-`: standard input) as UTF-8 text.
pub fn read_text(path: &Path) -> Result<String, Unreadable> {
    read_text_at_most(path, MAX_INPUT_BYTES)
}

/// [`read_text`] with another bound.
pub fn read_text_at_most(path: &Path, max: usize) -> Result<String, Unreadable> {
    let bytes = if path.as_os_str() == "-" {
        read_at_most(std::io::stdin().lock(), max).map_err(Unreadable::Stdin)?
    } else {
        read_file(path, max, Links::Follow).map_err(Unreadable::File)?
    };
    String::from_utf8(bytes).map_err(|e| Unreadable::NotUtf8 {
        valid_up_to: e.utf8_error().valid_up_to(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_bounded_regular_text_files_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("m.yaml");
        std::fs::write(&file, "a: {}\n").unwrap();
        assert_eq!(read_text(&file).unwrap(), "a: {}\n");
        assert_eq!(
            read_text_at_most(&file, 3).unwrap_err().to_string(),
            "it is larger than 3 bytes"
        );
        assert_eq!(
            read_text(Path::new("/dev/zero")).unwrap_err().to_string(),
            "it is not a regular file"
        );
        assert_eq!(
            read_text(dir.path()).unwrap_err().to_string(),
            "it is not a regular file"
        );
        std::fs::write(&file, b"a: \xff\n").unwrap();
        assert!(matches!(
            read_text(&file),
            Err(Unreadable::NotUtf8 { valid_up_to: 3 })
        ));
        let missing = read_text(&dir.path().join("none")).unwrap_err();
        assert!(
            missing.to_string().starts_with("cannot read it: "),
            "{missing}"
        );
        assert!(!missing.reason().starts_with("cannot read it"), "{missing}");
    }

    #[test]
    fn standard_input_of_exactly_the_bound_is_read_and_one_byte_more_is_not() {
        let read_stream = |stream: Box<dyn std::io::Read + '_>, max| {
            read_at_most(stream, max).map_err(Unreadable::Stdin)
        };
        let at_bound = vec![b'a'; 5];
        assert_eq!(read_stream(Box::new(&at_bound[..]), 5).unwrap(), at_bound);
        assert_eq!(
            read_stream(Box::new(&[b'a'; 6][..]), 5)
                .unwrap_err()
                .to_string(),
            "standard input is larger than 5 bytes"
        );
        // An endless stream is cut off just past the bound, not read whole.
        assert_eq!(
            read_stream(Box::new(std::io::repeat(b'a')), 5)
                .unwrap_err()
                .to_string(),
            "standard input is larger than 5 bytes"
        );
        assert_eq!(read_stream(Box::new(&b""[..]), 5).unwrap(), b"");
    }
}
