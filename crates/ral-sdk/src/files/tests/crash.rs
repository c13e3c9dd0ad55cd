//! Crash safety, seen through the toolkit's test instruments (`probe`):
//! every file is synced before it replaces another and its directory
//! after, each once; and an edit killed after any of its renames is seen
//! whole by readers and finished by the next edit.

use std::path::PathBuf;

use super::Sandbox;
use crate::files::probe::{killed_after, Trace};
use crate::files::{Attrs, Batch, Edit, Lock};

/// The temporary files a trace saw renamed into `dir`, and their targets.
fn renamed_into(trace: &Trace, dir: &std::path::Path) -> Vec<(PathBuf, PathBuf)> {
    trace
        .renames()
        .into_iter()
        .filter(|(_, to)| to.parent() == Some(dir))
        .collect()
}

#[test]
fn an_edit_syncs_each_file_before_its_rename_and_the_directory_once_after() {
    let sandbox = Sandbox::new();
    sandbox.write("etc/hosts", b"old\n");
    let trace = Trace::below(&sandbox.root);
    let etc = sandbox.path("etc").canonicalize().unwrap();
    let target = sandbox.open().file("etc/hosts", true, None).unwrap();
    let mut edit = Edit::begin(Lock::beside(&target), &sandbox.call).unwrap();
    edit.write(&target, b"new\n".to_vec(), Attrs::default())
        .unwrap();
    edit.commit().unwrap();
    drop(edit);
    assert_eq!(trace.problems(), Vec::<String>::new());
    let renames = renamed_into(&trace, &etc);
    assert_eq!(renames.len(), 1);
    assert_eq!(renames[0].1, etc.join("hosts"));
    assert_eq!(trace.syncs_of(&renames[0].0), 1, "the new file, once");
    assert_eq!(trace.syncs_of(&etc), 1, "the directory, once");
}

#[test]
fn an_edit_of_several_files_makes_its_journal_durable_before_any_rename() {
    let sandbox = Sandbox::new();
    sandbox.write("etc/passwd", b"root\n");
    sandbox.write("etc/shadow", b"root\n");
    let trace = Trace::below(&sandbox.root);
    let etc = sandbox.path("etc").canonicalize().unwrap();
    let root = sandbox.open();
    let mut edit = Edit::begin(Lock::accounts(&root).unwrap(), &sandbox.call).unwrap();
    for name in ["shadow", "passwd"] {
        let target = root.file(&format!("etc/{name}"), true, None).unwrap();
        edit.write(&target, b"root\nbob\n".to_vec(), Attrs::default())
            .unwrap();
    }
    edit.commit().unwrap();
    drop(edit);
    assert_eq!(trace.problems(), Vec::<String>::new());
    let targets: Vec<PathBuf> = trace.renames().into_iter().map(|(_, to)| to).collect();
    assert_eq!(
        targets,
        ["ral-journal", "shadow", "passwd"].map(|name| match name {
            "ral-journal" => etc.join(".pwd.lock.ral-journal"),
            name => etc.join(name),
        })
    );
    for (temp, _) in trace.renames() {
        assert_eq!(trace.syncs_of(&temp), 1, "{}", temp.display());
    }
    assert_eq!(
        trace.syncs_of(&etc),
        2,
        "after the journal, after the files"
    );
}

/// Queues an edit of `rel` (a new file) in `batch`.
fn queue(sandbox: &Sandbox, batch: &mut Batch, rel: &str, key: usize) {
    let target = sandbox.open().file(rel, true, None).unwrap();
    let mut edit = batch.edit(&sandbox.call, target.dir(), key).unwrap();
    edit.note(&target, target.lstat().unwrap()).unwrap();
    edit.write(&target, rel.as_bytes().to_vec(), Attrs::default())
        .unwrap();
    edit.commit().unwrap();
}

#[test]
fn a_batch_syncs_every_file_before_its_rename_and_each_directory_once() {
    // A few files (an fsync each) and many (a syncfs for all).
    for files in [3, 40] {
        let sandbox = Sandbox::new();
        sandbox.mkdir("a");
        sandbox.mkdir("b");
        let trace = Trace::below(&sandbox.root);
        let mut batch = Batch::new(false);
        for key in 0..files {
            let dir = if key % 2 == 0 { "a" } else { "b" };
            queue(&sandbox, &mut batch, &format!("{dir}/f{key}"), key);
        }
        assert!(trace.renames().is_empty(), "queued, not yet made");
        assert!(batch.finish().is_empty());
        assert_eq!(trace.problems(), Vec::<String>::new(), "{files} files");
        assert_eq!(trace.renames().len(), files);
        for dir in ["a", "b"] {
            let dir = sandbox.path(dir).canonicalize().unwrap();
            assert_eq!(trace.syncs_of(&dir), 1, "{} once", dir.display());
        }
    }
}

/// Writes passwd, shadow and group as one edit, each file's new content
/// its old one with `bob` added.
fn add_bob(sandbox: &Sandbox) {
    let root = sandbox.open();
    let mut edit = Edit::begin(Lock::accounts(&root).unwrap(), &sandbox.call).unwrap();
    for name in ["group", "shadow", "passwd"] {
        let target = root.file(&format!("etc/{name}"), true, None).unwrap();
        let mut data = edit.read(&target).unwrap().unwrap();
        data.extend_from_slice(b"bob\n");
        edit.write(&target, data, Attrs::default()).unwrap();
    }
    edit.commit().unwrap();
}

#[test]
fn an_edit_killed_after_any_rename_is_seen_whole_and_finished_by_the_next() {
    for renames in 1.. {
        let sandbox = Sandbox::new();
        for name in ["group", "shadow", "passwd"] {
            sandbox.write(&format!("etc/{name}"), b"root\n");
        }
        let trace = Trace::below(&sandbox.root);
        if killed_after(renames, || add_bob(&sandbox)).is_some() {
            assert!(renames > 3, "killed after the journal and after each file");
            break;
        }
        // As the kill left it: the files replaced so far, nothing
        // cleaned up.
        let replaced = renames - 1;
        for (at, name) in ["group", "shadow", "passwd"].iter().enumerate() {
            let want: &[u8] = if at < replaced {
                b"root\nbob\n"
            } else {
                b"root\n"
            };
            assert_eq!(sandbox.read(&format!("etc/{name}")), want, "{name}");
        }
        assert!(sandbox
            .names("etc")
            .contains(&".pwd.lock.ral-journal".to_owned()));
        // A reader sees the whole edit.
        let root = sandbox.open();
        for name in ["group", "shadow", "passwd"] {
            let target = root.file(&format!("etc/{name}"), true, None).unwrap();
            let mut reader = Lock::accounts(&root).unwrap();
            let seen = reader.read(&sandbox.call, &target, None).unwrap().unwrap();
            assert_eq!(seen.0, b"root\nbob\n", "{name} after {renames} renames");
        }
        // The next edit finishes it, itself killed once on the way.
        let next = || drop(Edit::begin(Lock::accounts(&root).unwrap(), &sandbox.call).unwrap());
        let _ = killed_after(1, next);
        next();
        for name in ["group", "shadow", "passwd"] {
            assert_eq!(sandbox.read(&format!("etc/{name}")), b"root\nbob\n");
        }
        assert_eq!(
            sandbox.names("etc"),
            [".pwd.lock", "group", "passwd", "shadow"]
        );
        assert_eq!(trace.problems(), Vec::<String>::new());
    }
}

#[test]
fn a_batch_killed_during_its_flush_leaves_each_file_old_or_new() {
    let sandbox = Sandbox::new();
    sandbox.mkdir("a");
    let keys = 4;
    let flush = |sandbox: &Sandbox| {
        let mut batch = Batch::new(false);
        for key in 0..keys {
            queue(sandbox, &mut batch, &format!("a/f{key}"), key);
        }
        batch.finish()
    };
    assert!(killed_after(2, || flush(&sandbox)).is_none());
    // Two files made, two temporary files left, which the next edit of
    // the directory removes.
    let names = sandbox.names("a");
    assert_eq!(names.iter().filter(|n| n.contains(".ral-tmp-")).count(), 2);
    for key in 0..2 {
        assert_eq!(
            sandbox.read(&format!("a/f{key}")),
            format!("a/f{key}").as_bytes()
        );
    }
    assert!(flush(&sandbox).is_empty());
    assert_eq!(sandbox.names("a"), ["f0", "f1", "f2", "f3"]);
}
