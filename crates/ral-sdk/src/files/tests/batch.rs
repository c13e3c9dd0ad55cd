//! Batches: edits of files that are resources themselves, queued and made
//! together, each failing alone.

use std::os::fd::AsRawFd;
use std::time::Duration;

use super::Sandbox;
use crate::files::{Attrs, Batch};

/// Queues an edit of `rel` in `batch`.
fn edit(
    sandbox: &Sandbox,
    batch: &mut Batch,
    rel: &str,
    data: &[u8],
    key: usize,
) -> crate::CallResult<()> {
    let target = sandbox.open().file(rel, true, None)?;
    let mut edit = batch.edit(&sandbox.call, target.dir(), key)?;
    edit.note(&target, target.lstat()?)?;
    edit.write(&target, data.to_vec(), Attrs::default())?;
    edit.commit()
}

/// Whether another open file description would find `rel` flocked.
fn is_locked(sandbox: &Sandbox, rel: &str) -> bool {
    let dir = std::fs::File::open(sandbox.path(rel)).unwrap();
    // SAFETY: a plain flock call on a descriptor open for the call.
    let got = unsafe { libc::flock(dir.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    got != 0
}

#[test]
fn queued_edits_are_made_together_and_leave_nothing() {
    let sandbox = Sandbox::new();
    sandbox.mkdir("a");
    sandbox.mkdir("b");
    sandbox.write_mode("a/old", b"old\n", 0o640);
    let mut batch = Batch::new(false);
    edit(&sandbox, &mut batch, "a/new", b"new\n", 1).unwrap();
    edit(&sandbox, &mut batch, "a/old", b"changed\n", 2).unwrap();
    edit(&sandbox, &mut batch, "b/new", b"b\n", 3).unwrap();
    // Nothing replaced yet, and the locks kept for the flush.
    assert_eq!(batch.queued(), 3);
    assert_eq!(sandbox.read("a/old"), b"old\n");
    assert!(!sandbox.path("a/new").exists());
    assert!(is_locked(&sandbox, "a") && is_locked(&sandbox, "b"));
    assert!(batch.touches("a/old") && batch.touches("a"));
    assert!(batch.touches("a/new/below") && batch.touches(""));
    assert!(!(batch.touches("a/other") || batch.touches("c")));
    assert!(batch.finish().is_empty());
    assert_eq!(sandbox.read("a/new"), b"new\n");
    assert_eq!(sandbox.read("a/old"), b"changed\n");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(sandbox.path("a/old"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o7777, 0o640);
    assert_eq!(sandbox.read("b/new"), b"b\n");
    assert_eq!(sandbox.names("a"), ["new", "old"]);
    assert_eq!(sandbox.names("b"), ["new"]);
    assert!(!(is_locked(&sandbox, "a") || is_locked(&sandbox, "b")));
    assert!(!batch.touches("a/old"));
}

/// An open edit keeps the lock of its directory, also through a flush
/// its own commit sets off (the batch full): it counts as a user of the
/// lock until it is done, and only the next flush lets the lock go.
#[test]
fn an_open_edit_keeps_its_lock_through_a_flush_it_sets_off() {
    let sandbox = Sandbox::new();
    sandbox.mkdir("a");
    sandbox.mkdir("b");
    let mut batch = Batch::new(false);
    for n in 1..Batch::LIMIT {
        edit(&sandbox, &mut batch, &format!("b/f{n}"), b"b\n", n).unwrap();
    }
    assert_eq!(batch.queued(), Batch::LIMIT - 1);
    let target = sandbox.open().file("a/x", true, None).unwrap();
    let mut open = batch.edit(&sandbox.call, target.dir(), 0).unwrap();
    open.note(&target, target.lstat().unwrap()).unwrap();
    open.write(&target, b"x\n".to_vec(), Attrs::default())
        .unwrap();
    open.commit().unwrap();
    assert_eq!(sandbox.read("a/x"), b"x\n", "the full batch was flushed");
    assert!(is_locked(&sandbox, "a"), "the edit is still open");
    drop(open);
    assert!(batch.finish().is_empty());
    assert!(!(is_locked(&sandbox, "a") || is_locked(&sandbox, "b")));
}

#[test]
fn a_file_changed_meanwhile_fails_alone() {
    let sandbox = Sandbox::new();
    sandbox.write("a/x", b"x\n");
    let mut batch = Batch::new(false);
    edit(&sandbox, &mut batch, "a/x", b"ours\n", 7).unwrap();
    edit(&sandbox, &mut batch, "a/y", b"y\n", 8).unwrap();
    // A writer that takes no lock replaces x before the flush.
    sandbox.write("a/x.new", b"theirs\n");
    sandbox.rename("a/x.new", "a/x");
    let failed = batch.finish();
    assert_eq!(failed.keys().copied().collect::<Vec<_>>(), [7]);
    assert!(failed[&7].message.contains("does not take the lock"));
    assert_eq!(sandbox.read("a/x"), b"theirs\n");
    assert_eq!(sandbox.read("a/y"), b"y\n");
    assert_eq!(sandbox.names("a"), ["x", "y"]);
}

#[test]
fn a_queued_edit_of_a_directory_moved_meanwhile_fails_alone() {
    let sandbox = Sandbox::new();
    sandbox.mkdir("a");
    sandbox.mkdir("b");
    let mut batch = Batch::new(false);
    edit(&sandbox, &mut batch, "a/new", b"new\n", 1).unwrap();
    edit(&sandbox, &mut batch, "b/new", b"b\n", 2).unwrap();
    sandbox.rename("a", "a.moved");
    sandbox.mkdir("a");
    let failed = batch.finish();
    assert_eq!(failed.keys().copied().collect::<Vec<_>>(), [1]);
    assert!(failed[&1]
        .message
        .contains("was moved or replaced while it was being edited"));
    assert!(sandbox.names("a.moved").is_empty());
    assert_eq!(sandbox.read("b/new"), b"b\n");
}

#[test]
fn queued_edits_are_made_before_waiting_for_a_lock() {
    let mut sandbox = Sandbox::new();
    sandbox.mkdir("a");
    sandbox.mkdir("b");
    let held = std::fs::File::open(sandbox.path("b")).unwrap();
    // SAFETY: a plain flock call on a descriptor open for the call.
    assert_eq!(unsafe { libc::flock(held.as_raw_fd(), libc::LOCK_EX) }, 0);
    sandbox.call.lock_timeout = Duration::from_millis(100);
    let mut batch = Batch::new(false);
    edit(&sandbox, &mut batch, "a/x", b"x\n", 1).unwrap();
    let err = edit(&sandbox, &mut batch, "b/y", b"y\n", 2).unwrap_err();
    assert!(err.message.contains("timed out"), "{}", err.message);
    // a/x was finished, and a's lock let go, before the wait.
    assert_eq!(sandbox.read("a/x"), b"x\n");
    assert!(!is_locked(&sandbox, "a"));
    assert!(batch.finish().is_empty());
    assert!(sandbox.names("b").is_empty());
}

#[test]
fn temporary_files_a_crash_left_go_but_queued_ones_stay() {
    let sandbox = Sandbox::new();
    sandbox.mkdir("a");
    // Older versions' names too (`.NAME.ralsh-*`, `.ralsh-*.NAME`).
    for stale in [
        ".x.ral-tmp-0123456789ab",
        ".y.ral-tmp-0123456789ab",
        ".y.ralsh-abc",
        ".ralsh-abc.y",
    ] {
        sandbox.write(&format!("a/{stale}"), b"half");
    }
    let mut batch = Batch::new(false);
    edit(&sandbox, &mut batch, "a/x", b"x\n", 1).unwrap();
    let queued: Vec<String> = sandbox
        .names("a")
        .into_iter()
        .filter(|n| n.starts_with(".x.ral-tmp-"))
        .collect();
    assert_eq!(queued.len(), 1);
    assert_ne!(queued[0], ".x.ral-tmp-0123456789ab");
    edit(&sandbox, &mut batch, "a/y", b"y\n", 2).unwrap();
    assert!(!sandbox
        .names("a")
        .contains(&".y.ral-tmp-0123456789ab".to_owned()));
    assert!(sandbox.names("a").contains(&queued[0]));
    assert!(batch.finish().is_empty());
    assert_eq!(sandbox.names("a"), ["x", "y"]);
}

#[test]
fn a_noop_batch_previews_and_creates_nothing() {
    let sandbox = Sandbox::with(true, Duration::from_secs(15));
    sandbox.mkdir("a");
    let mut batch = Batch::new(true);
    edit(&sandbox, &mut batch, "a/x", b"x\n", 1).unwrap();
    assert!(batch.finish().is_empty());
    assert!(sandbox.names("a").is_empty());
}

#[test]
fn a_batch_dropped_unfinished_makes_nothing_and_lets_go() {
    let sandbox = Sandbox::new();
    sandbox.write("a/x", b"x\n");
    let mut batch = Batch::new(false);
    edit(&sandbox, &mut batch, "a/x", b"changed\n", 1).unwrap();
    edit(&sandbox, &mut batch, "a/y", b"y\n", 2).unwrap();
    assert!(is_locked(&sandbox, "a"));
    drop(batch);
    assert_eq!(sandbox.read("a/x"), b"x\n");
    assert_eq!(sandbox.names("a"), ["x"]);
    assert!(!is_locked(&sandbox, "a"));
}

#[test]
fn queued_files_not_renamed_by_the_calls_deadline_are_left_untouched() {
    let mut sandbox = Sandbox::new();
    sandbox.write("a/x", b"x\n");
    let late = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    sandbox.call.deadline = Some(crate::testing::deadline(Duration::from_secs(5), &late));
    let mut batch = Batch::new(false);
    edit(&sandbox, &mut batch, "a/x", b"ours\n", 1).unwrap();
    edit(&sandbox, &mut batch, "a/y", b"y\n", 2).unwrap();
    // The deadline passes between the queueing and the final flush.
    late.store(true, std::sync::atomic::Ordering::SeqCst);
    let failed = batch.finish();
    assert_eq!(failed.keys().copied().collect::<Vec<_>>(), [1, 2]);
    for err in failed.values() {
        assert_eq!(
            err.message,
            "the call ran past its time limit of 5s (--timeout); this was not done"
        );
    }
    assert_eq!(sandbox.read("a/x"), b"x\n");
    assert_eq!(sandbox.names("a"), ["x"], "no temporary file left");
    assert!(!is_locked(&sandbox, "a"));
    // Nor is an edit begun past it, in a batch or alone: what it would
    // change directly (a mode, a directory) is not changed either.
    let mut batch = Batch::new(false);
    let target = sandbox.open().file("a/x", true, None).unwrap();
    let begun = batch.edit(&sandbox.call, target.dir(), 3);
    assert!(begun.is_err_and(|err| err.message.contains("ran past its time limit")));
    let lock = crate::files::Lock::beside(&target);
    let begun = crate::files::Edit::begin(lock, &sandbox.call);
    assert!(begun.is_err_and(|err| err.message.contains("ran past its time limit")));
    assert!(batch.finish().is_empty());
    assert_eq!(sandbox.names("a"), ["x"]);
}
