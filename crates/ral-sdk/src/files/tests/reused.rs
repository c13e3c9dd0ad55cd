//! A file parsed once and reused while it is unchanged: what is reused,
//! what is read again, and what is no missing file.

use std::cell::Cell;
use std::sync::Arc;

use super::Sandbox;
use crate::files::Reused;

/// Parses by copying the bytes, and counts the calls.
fn parse_counted(count: &Cell<u32>) -> impl FnOnce(Option<&[u8]>) -> Option<Vec<u8>> + '_ {
    move |data| {
        count.set(count.get() + 1);
        data.map(<[u8]>::to_vec)
    }
}

#[test]
fn an_unchanged_file_is_parsed_once_and_a_changed_one_again() {
    let sandbox = Sandbox::new();
    sandbox.write("etc/hosts", b"one\n");
    let reused = Reused::new();
    let count = Cell::new(0);

    let first = reused
        .get(&sandbox.call, "etc/hosts", parse_counted(&count))
        .unwrap();
    let second = reused
        .get(&sandbox.call, "etc/hosts", parse_counted(&count))
        .unwrap();
    assert_eq!(count.get(), 1, "the unchanged file was parsed again");
    assert!(Arc::ptr_eq(&first, &second));
    assert_eq!(second.as_deref(), Some(&b"one\n"[..]));

    // Same size, new content: the file's times and inode tell it apart.
    let tmp = sandbox.path("etc/hosts.new");
    std::fs::write(&tmp, b"two\n").unwrap();
    std::fs::rename(&tmp, sandbox.path("etc/hosts")).unwrap();
    let third = reused
        .get(&sandbox.call, "etc/hosts", parse_counted(&count))
        .unwrap();
    assert_eq!(count.get(), 2);
    assert_eq!(third.as_deref(), Some(&b"two\n"[..]));
}

#[test]
fn a_missing_file_or_directory_is_parsed_as_none_and_never_reused() {
    let sandbox = Sandbox::new();
    let reused = Reused::new();
    let count = Cell::new(0);
    for rel in ["etc/hosts", "etc/hosts", "nowhere/hosts"] {
        let parsed = reused
            .get(&sandbox.call, rel, parse_counted(&count))
            .unwrap();
        assert_eq!(*parsed, None, "{rel}");
    }
    assert_eq!(count.get(), 3);
}

#[test]
fn a_path_through_a_file_is_an_error_not_a_missing_file() {
    let sandbox = Sandbox::new();
    sandbox.write("etc", b"not a directory\n");
    let reused = Reused::new();
    let count = Cell::new(0);
    let err = reused
        .get(&sandbox.call, "etc/hosts", parse_counted(&count))
        .unwrap_err();
    assert!(!err.missing);
    assert!(
        err.message.contains("is not a directory"),
        "{}",
        err.message
    );
    assert_eq!(count.get(), 0, "parsed as if the file were missing");
}
