//! Reading the files `ral plan` and `ral apply` are given (manifests and
//! saved plans): a regular file or `-` (standard input), never more than
//! [`MAX_INPUT_BYTES`]. A FIFO, a device or a directory is refused at once
//! instead of blocking or reading without end.

use std::io::Read;
use std::path::Path;

use crate::bounded_read::{read_file, Links};

/// How every saved plan starts: the rule that tells it from a manifest.
pub const MARK: &str = "{\"ral_saved_plan\":";

/// Whether `text` is a saved plan's (and must then verify as one).
pub fn is_marked(text: &str) -> bool {
    text.starts_with(MARK)
}

/// The most a manifest or a saved plan may hold: far above any real one,
/// far below what would exhaust memory.
pub const MAX_INPUT_BYTES: usize = 64 << 20;

/// Reads `path` (`-`: standard input) as UTF-8 text, or says why it
/// cannot be read: the message is meant to follow the file's name.
pub fn read_text(path: &Path) -> Result<String, String> {
    read_text_at_most(path, MAX_INPUT_BYTES)
}

/// [`read_text`] with another bound.
pub fn read_text_at_most(path: &Path, max: usize) -> Result<String, String> {
    let bytes = if path.as_os_str() == "-" {
        read_stream(std::io::stdin().lock(), max)?
    } else {
        read_file(path, max, Links::Follow).map_err(|e| match e.kind() {
            std::io::ErrorKind::Other => e.to_string(),
            _ => format!("cannot read it: {e}"),
        })?
    };
    String::from_utf8(bytes).map_err(|e| {
        format!(
            "it is not UTF-8 text (byte {} is not valid)",
            e.utf8_error().valid_up_to()
        )
    })
}

/// Reads all of standard input (or a test's stand-in), refusing it as soon
/// as it holds more than `max` bytes rather than after reading it all.
fn read_stream(stream: impl Read, max: usize) -> Result<Vec<u8>, String> {
    let mut bytes = Vec::new();
    stream
        .take(max as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read standard input: {e}"))?;
    if bytes.len() > max {
        return Err(format!("standard input is larger than {max} bytes"));
    }
    Ok(bytes)
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
            read_text_at_most(&file, 3).unwrap_err(),
            "it is larger than 3 bytes"
        );
        assert_eq!(
            read_text(Path::new("/dev/zero")).unwrap_err(),
            "it is not a regular file"
        );
        assert_eq!(
            read_text(dir.path()).unwrap_err(),
            "it is not a regular file"
        );
        std::fs::write(&file, b"a: \xff\n").unwrap();
        assert!(read_text(&file).unwrap_err().contains("not UTF-8"));
        let missing = read_text(&dir.path().join("none")).unwrap_err();
        assert!(missing.starts_with("cannot read it: "), "{missing}");
    }

    #[test]
    fn standard_input_of_exactly_the_bound_is_read_and_one_byte_more_is_not() {
        let at_bound = vec![b'a'; 5];
        assert_eq!(read_stream(&at_bound[..], 5).unwrap(), at_bound);
        assert_eq!(
            read_stream(&[b'a'; 6][..], 5).unwrap_err(),
            "standard input is larger than 5 bytes"
        );
        // An endless stream is cut off just past the bound, not read whole.
        assert_eq!(
            read_stream(std::io::repeat(b'a'), 5).unwrap_err(),
            "standard input is larger than 5 bytes"
        );
        assert_eq!(read_stream(&b""[..], 5).unwrap(), b"");
    }
}
