//! Unit tests of the file provider: its checks and plans on a temporary
//! root, and a set of many files made as one batch.

use std::os::unix::fs::{FileTypeExt, PermissionsExt};

use serde_json::{json, Value as Json};

use super::plan::{dumps, plan, Action};
use super::*;
use crate::files::probe::{Event, Trace};
use crate::{Change, Log};

fn call(root: &std::path::Path, noop: bool) -> Call {
    Call {
        lock_timeout: std::time::Duration::from_secs(5),
        ..Call::new(root, noop, Log::new(Box::new(std::io::sink()), noop))
    }
}

fn update(name: &str, should: Json) -> Update {
    Update {
        name: name.to_owned(),
        is: Resource::new(),
        should: should.as_object().cloned().unwrap_or_default(),
    }
}

/// The plan of one update on `root`, or its error's message.
fn planned(root: &std::path::Path, name: &str, should: Json) -> Result<Plan, String> {
    let root = Root::open(root).unwrap();
    let place = Place::open(&root, name).map_err(|e| e.message)?;
    let (users, groups) = (IdMap::default(), IdMap::default());
    plan(&update(name, should), &place, &users, &groups).map_err(|e| e.message)
}

use super::plan::Plan;

/// Makes a FIFO at `path`.
fn mkfifo(path: &std::path::Path) {
    let path = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid C string; mkfifo(3) keeps no pointer.
    assert_eq!(unsafe { libc::mkfifo(path.as_ptr(), 0o644) }, 0);
}

/// Whether this runs as root; if not, says that the test, which needs
/// root for `what`, is skipped.
fn is_root_for(what: &str) -> bool {
    let root = super::sys::effective_ids().0 == 0;
    if !root {
        eprintln!("skipped: {what} needs root");
    }
    root
}

#[test]
fn values_in_messages_are_written_as_python_wrote_them() {
    assert_eq!(dumps(&json!("é\n\"")), r#""\u00e9\n\"""#);
    assert_eq!(dumps(&json!([1, "a", null])), r#"[1, "a", null]"#);
    assert_eq!(dumps(&json!({"a": true})), r#"{"a": true}"#);
}

#[test]
fn a_new_file_reports_everything_asked_and_the_mode_it_gets() {
    let dir = tempfile::tempdir().unwrap();
    let plan = planned(
        dir.path(),
        "/f",
        json!({"ensure": "file", "mode": "0640", "content": "x"}),
    )
    .unwrap();
    // Others may not read it: its content is reported as its checksum.
    assert_eq!(
        plan.changes,
        vec![
            Change::new("ensure", "absent", "file"),
            Change::new(
                "content",
                Json::Null,
                "sha256:2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881"
            ),
            Change::new("mode", Json::Null, "0640"),
        ]
    );
    assert_eq!(
        plan.action,
        Some(Action::WriteFile {
            data: b"x".to_vec(),
            mode: 0o640,
            uid: None,
            gid: None,
            old: What::Absent
        })
    );
    // present with a target makes a link; without, a file of mode 0644.
    let plan = planned(dir.path(), "/l", json!({"target": "f"})).unwrap();
    assert_eq!(plan.changes[0], Change::new("ensure", "absent", "link"));
    let plan = planned(dir.path(), "/g", json!({})).unwrap();
    assert_eq!(
        plan.changes,
        vec![
            Change::new("ensure", "absent", "file"),
            Change::new("mode", Json::Null, "0644")
        ]
    );
}

#[test]
fn an_existing_file_changes_only_what_differs() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("f"), "old").unwrap();
    std::fs::set_permissions(dir.path().join("f"), std::fs::Permissions::from_mode(0o600)).unwrap();
    let same = planned(dir.path(), "/f", json!({"content": "old", "mode": "0600"})).unwrap();
    assert!(same.changes.is_empty() && same.action.is_none());
    let plan = planned(dir.path(), "/f", json!({"content": "new", "mode": "0644"})).unwrap();
    assert_eq!(
        plan.changes,
        vec![
            Change::new("content", "old", "new"),
            Change::new("mode", "0600", "0644"),
        ]
    );
}

#[test]
fn bad_updates_are_refused_with_the_scripts_messages() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("d/e")).unwrap();
    let refused = |name: &str, should: Json| planned(dir.path(), name, should).unwrap_err();
    assert_eq!(
        refused("/x", json!({"mode": "644"})),
        "mode: \"644\" is not 4 octal digits (such as 0644)"
    );
    assert_eq!(
        refused("/x", json!({"bogus": 1})),
        "unknown attribute 'bogus'"
    );
    assert_eq!(
        refused("/x", json!({"ensure": "fifo"})),
        "ensure: \"fifo\" is not one of present, file, directory, link, absent"
    );
    assert_eq!(
        refused("/x", json!({"checksum": "sha256:00"})),
        "checksum is read-only; set content instead"
    );
    assert_eq!(
        refused("/x", json!({"force": "yes"})),
        "force: \"yes\" is not a boolean"
    );
    assert_eq!(
        refused("/d", json!({"ensure": "file"})),
        "'/d' is a directory; refusing to replace it with a file without force=true"
    );
    assert_eq!(
        refused("/d", json!({"ensure": "absent"})),
        "'/d' is a non-empty directory; set force=true to remove it with everything in it"
    );
    assert_eq!(
        refused("/no/x", json!({"ensure": "file"})),
        "the directory holding '/no/x' does not exist"
    );
    assert_eq!(
        refused("/x", json!({"ensure": "directory", "content": "a"})),
        "content: only a regular file has content, and '/x' would be a directory"
    );
    assert_eq!(
        refused("/x", json!({"ensure": "link"})),
        "target: creating the link '/x' needs a target"
    );
    assert_eq!(
        refused("/", json!({"ensure": "absent"})),
        format!(
            "refusing to replace or remove the root directory {}",
            crate::text::quoted(&dir.path().to_string_lossy())
        )
    );
    assert!(refused("/d/", json!({})).contains("is not in normal form"));
    std::fs::write(dir.path().join("f"), "").unwrap();
    // A name too long for the system: its error, named.
    let long = format!("/{}", "n".repeat(300));
    assert_eq!(
        refused(&long, json!({"ensure": "file"})),
        format!("cannot change '{long}': File name too long")
    );
    // A file on the way is an error of its own, not a missing directory.
    assert_eq!(
        refused("/f/x", json!({"ensure": "file"})),
        format!("'{}' is not a directory", dir.path().join("f").display())
    );
    for target in ["", "a\0b"] {
        assert_eq!(
            refused("/x", json!({"ensure": "link", "target": target})),
            "target: a link's text must be non-empty and without NUL"
        );
    }
    assert_eq!(
        refused("/x", json!({"name": "/y"})),
        "name: cannot rename '/x' to '/y'"
    );
    // Its own name is no rename; an empty directory goes without force.
    assert!(planned(dir.path(), "/x", json!({"name": "/x"})).is_ok());
    std::fs::create_dir(dir.path().join("empty")).unwrap();
    assert!(planned(dir.path(), "/empty", json!({"ensure": "absent"})).is_ok());
    // Nothing asked to go, nothing there: nothing to do.
    let plan = planned(dir.path(), "/no/x", json!({"ensure": "absent"})).unwrap();
    assert!(plan.changes.is_empty());
}

/// Regular files below `root` whose name is one of ral's temporary files.
fn leftovers(root: &std::path::Path) -> Vec<String> {
    let mut found = Vec::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let entry = entry.unwrap();
            let name = entry.file_name().to_string_lossy().into_owned();
            if entry.file_type().unwrap().is_dir() {
                dirs.push(entry.path());
            } else if name.contains(".ral-") {
                found.push(name);
            }
        }
    }
    found
}

#[test]
fn a_set_of_many_files_writes_them_all_as_one_batch() {
    let dir = tempfile::tempdir().unwrap();
    for d in 0..3 {
        std::fs::create_dir(dir.path().join(format!("d{d}"))).unwrap();
    }
    // More than a batch holds, so that it flushes on the way too.
    let names: Vec<String> = (0..300).map(|i| format!("/d{}/f{i:03}", i % 3)).collect();
    let updates: Vec<Update> = names
        .iter()
        .map(|name| {
            update(
                name,
                json!({"ensure": "file", "content": name, "mode": "0640"}),
            )
        })
        .collect();
    let preview = File.set(&call(dir.path(), true), &updates).unwrap();
    assert!(preview
        .iter()
        .all(|o| o.as_ref().is_ok_and(|c| !c.is_empty())));
    assert!(!dir.path().join("d0/f000").exists(), "noop writes nothing");
    let outcomes = File.set(&call(dir.path(), false), &updates).unwrap();
    assert_eq!(outcomes, preview, "the preview said what was done");
    for name in &names {
        let path = dir.path().join(&name[1..]);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), *name);
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode, 0o640, "{name}");
    }
    assert!(leftovers(dir.path()).is_empty());
    let again = File.set(&call(dir.path(), false), &updates).unwrap();
    assert!(again.iter().all(|o| o.as_ref().is_ok_and(Vec::is_empty)));
    let found = File.get(&call(dir.path(), false), &names[..1]).unwrap();
    assert_eq!(found[0]["mode"], json!("0640"));
    // Others may not read it: its checksum stands for its content.
    assert_eq!(found[0].get("content"), None);
    assert_eq!(
        found[0]["checksum"],
        json!(format!("sha256:{}", super::place::sha256_hex(b"/d0/f000")))
    );
}

#[test]
fn content_is_shown_only_when_small_and_readable_by_others() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, data: &[u8], mode: u32| {
        let path = dir.path().join(name);
        std::fs::write(&path, data).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
    };
    write("open", b"hello", 0o644);
    write("mine", b"hunter2", 0o640);
    write("big", &vec![b'a'; super::place::CONTENT_MAX + 1], 0o644);
    let names = ["/open".to_owned(), "/mine".to_owned(), "/big".to_owned()];
    let found = File.get(&call(dir.path(), false), &names).unwrap();
    assert_eq!(found[0]["content"], json!("hello"));
    for res in &found[1..] {
        assert_eq!(res.get("content"), None, "{res:?}");
        assert!(res["checksum"].as_str().unwrap().starts_with("sha256:"));
    }
    // A change of what is not shown is reported as checksums, both ways.
    let sum = |data: &[u8]| format!("sha256:{}", super::place::sha256_hex(data));
    let changed = File
        .set(
            &call(dir.path(), false),
            &[update("/mine", json!({"content": "hunter3"}))],
        )
        .unwrap()
        .remove(0)
        .unwrap();
    assert_eq!(
        changed,
        vec![Change::new("content", sum(b"hunter2"), sum(b"hunter3"))]
    );
    assert_eq!(std::fs::read(dir.path().join("mine")).unwrap(), b"hunter3");
    let large = "b".repeat(super::place::CONTENT_MAX + 1);
    let changed = File
        .set(
            &call(dir.path(), false),
            &[update("/open", json!({"content": large}))],
        )
        .unwrap()
        .remove(0)
        .unwrap();
    assert_eq!(
        changed,
        vec![Change::new("content", sum(b"hello"), sum(large.as_bytes()))]
    );
    // Made private by the change: its new content is not shown either.
    let changed = planned(
        dir.path(),
        "/open",
        json!({"content": "new", "mode": "0600"}),
    )
    .unwrap()
    .changes;
    // (A large file of another size is not read to tell it differs: its
    // old checksum is the host's to show, from its read.)
    assert_eq!(changed[0], Change::new("content", Json::Null, sum(b"new")));
}

#[test]
fn a_hard_linked_file_is_never_changed_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let secret = outside.path().join("secret");
    std::fs::write(&secret, "outside").unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::hard_link(&secret, dir.path().join("hl")).unwrap();
    let set = |should: Json| {
        File.set(&call(dir.path(), false), &[update("/hl", should)])
            .unwrap()
            .remove(0)
    };
    let err = set(json!({"mode": "0666"})).unwrap_err();
    assert!(err.message.contains("has 2 hard links"), "{}", err.message);
    let mode =
        |path: &std::path::Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode(&secret), 0o600, "the file outside is untouched");
    // With force, the path gets a copy of its own.
    let changes = set(json!({"mode": "0644", "force": true})).unwrap();
    assert_eq!(changes, vec![Change::new("mode", "0600", "0644")]);
    assert_eq!(mode(&secret), 0o600);
    assert_eq!(mode(&dir.path().join("hl")), 0o644);
    assert_eq!(std::fs::read(dir.path().join("hl")).unwrap(), b"outside");
    use std::os::unix::fs::MetadataExt;
    assert_eq!(std::fs::metadata(&secret).unwrap().nlink(), 1);
    assert!(leftovers(dir.path()).is_empty());
    // A new content replaces the path: the other link keeps its own.
    std::fs::remove_file(dir.path().join("hl")).unwrap();
    std::fs::hard_link(&secret, dir.path().join("hl")).unwrap();
    set(json!({"content": "inside"})).unwrap();
    assert_eq!(std::fs::read(&secret).unwrap(), b"outside");
    assert_eq!(std::fs::read(dir.path().join("hl")).unwrap(), b"inside");
}

#[test]
fn a_change_of_owner_sets_the_mode_again_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("su");
    std::fs::write(&path, "x").unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o4755)).unwrap();
    let plan = planned(dir.path(), "/su", json!({"owner": "4242"}));
    if super::sys::effective_ids().0 != 0 {
        // Only root changes owners.
        assert!(plan.unwrap_err().contains("needs root"));
        return;
    }
    assert_eq!(
        plan.unwrap().action,
        Some(Action::Meta {
            kind: What::File,
            mode: Some(0o4755),
            uid: Some(4242),
            gid: None,
            on_mount: false
        })
    );
    // A mode change alone is only that.
    let plan = planned(dir.path(), "/su", json!({"mode": "0755"})).unwrap();
    assert_eq!(
        plan.action,
        Some(Action::Meta {
            kind: What::File,
            mode: Some(0o755),
            uid: None,
            gid: None,
            on_mount: false
        })
    );
}

#[test]
fn links_are_made_changed_and_never_followed() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("f"), "x").unwrap();
    let set = |name: &str, should: Json| {
        File.set(&call(dir.path(), false), &[update(name, should)])
            .unwrap()
            .remove(0)
    };
    let made = set("/l", json!({"ensure": "link", "target": "f"})).unwrap();
    assert_eq!(made[0], Change::new("ensure", "absent", "link"));
    let changed = set("/l", json!({"target": "g"})).unwrap();
    assert_eq!(changed, vec![Change::new("target", "f", "g")]);
    assert_eq!(
        std::fs::read_link(dir.path().join("l")).unwrap(),
        std::path::Path::new("g")
    );
    set("/l", json!({"ensure": "file", "content": "now a file"})).unwrap();
    assert_eq!(
        std::fs::read_to_string(dir.path().join("l")).unwrap(),
        "now a file"
    );
    assert_eq!(std::fs::read_to_string(dir.path().join("f")).unwrap(), "x");
    set("/t", json!({"ensure": "directory"})).unwrap();
    std::fs::write(dir.path().join("t/in"), "y").unwrap();
    std::os::unix::fs::symlink(dir.path().join("f"), dir.path().join("t/out")).unwrap();
    set("/t", json!({"ensure": "absent", "force": true})).unwrap();
    assert!(!dir.path().join("t").exists());
    assert!(
        dir.path().join("f").exists(),
        "a link in a tree removed is not followed"
    );
    assert!(leftovers(dir.path()).is_empty());
}

/// A log that, once the line of `trigger` comes, replaces `path` as a
/// program that takes no lock would.
struct Meddler {
    trigger: &'static [u8],
    path: std::path::PathBuf,
    done: bool,
}

impl std::io::Write for Meddler {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if !self.done && buf.windows(self.trigger.len()).any(|w| w == self.trigger) {
            self.done = true;
            let theirs = self.path.with_extension("theirs");
            std::fs::write(&theirs, "theirs").unwrap();
            std::fs::rename(&theirs, &self.path).unwrap();
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A queued file that another program replaced before the batch wrote it
/// is not written, and its update fails instead of reporting the change;
/// the other updates of the batch are made.
#[test]
fn a_queued_file_replaced_meanwhile_fails_its_update_alone() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("srv")).unwrap();
    std::fs::write(dir.path().join("srv/a"), "old").unwrap();
    // The second update's work is logged once the first is queued.
    let meddler = Meddler {
        trigger: b"\"/srv/b\"",
        path: dir.path().join("srv/a"),
        done: false,
    };
    let call = Call {
        log: Log::new(Box::new(meddler), false),
        ..call(dir.path(), false)
    };
    let updates = [
        update("/srv/a", json!({"content": "ours"})),
        update("/srv/b", json!({"ensure": "file", "content": "b"})),
    ];
    let outcomes = File.set(&call, &updates).unwrap();
    let err = outcomes[0].as_ref().unwrap_err();
    assert!(
        err.message.contains("was changed meanwhile"),
        "{}",
        err.message
    );
    assert!(outcomes[1].as_ref().is_ok_and(|c| !c.is_empty()));
    assert_eq!(
        std::fs::read_to_string(dir.path().join("srv/a")).unwrap(),
        "theirs"
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("srv/b")).unwrap(),
        "b"
    );
    assert!(leftovers(dir.path()).is_empty());
}

/// What a set removes, and a link it makes, is made durable: the
/// directory that held them is synced once the batch is done, after the
/// link was renamed into it, so that a crash neither brings the file back
/// nor loses the link.
#[test]
fn removals_and_links_of_a_batch_are_made_durable() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("srv")).unwrap();
    std::fs::write(dir.path().join("srv/old"), "old").unwrap();
    let trace = Trace::below(dir.path());
    let updates = [
        update("/srv/old", json!({"ensure": "absent"})),
        update("/srv/lnk", json!({"ensure": "link", "target": "new"})),
    ];
    let outcomes = File.set(&call(dir.path(), false), &updates).unwrap();
    assert!(
        outcomes
            .iter()
            .all(|o| o.as_ref().is_ok_and(|c| !c.is_empty())),
        "{outcomes:?}"
    );
    assert!(!dir.path().join("srv/old").exists());
    // A link has no data of its own to sync: its directory holds it.
    let srv = dir.path().canonicalize().unwrap().join("srv");
    let events = trace.events();
    let linked = events
        .iter()
        .position(|event| matches!(event, Event::Rename(_, to) if *to == srv.join("lnk")))
        .unwrap_or_else(|| panic!("no link renamed into place: {events:?}"));
    assert!(
        events[linked..].contains(&Event::Sync(srv.clone())),
        "{events:?}"
    );
}

#[test]
fn a_special_file_is_said_to_be_one_and_never_planned_over() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    mkfifo(&fifo);
    let found = File
        .get(&call(dir.path(), false), &["/fifo".to_owned()])
        .unwrap();
    let said = found[0]["error"]["message"].as_str().unwrap_or_default();
    assert!(said.starts_with("'/fifo' is a special file"), "{found:?}");
    let err = planned(dir.path(), "/fifo", json!({"ensure": "absent"})).unwrap_err();
    assert!(err.contains("special file"), "{err}");
    assert!(std::fs::symlink_metadata(&fifo)
        .unwrap()
        .file_type()
        .is_fifo());
}

#[test]
fn entries_are_opened_never_through_a_link_and_closed_on_exec() {
    // What a swapped-in link would be followed to between a look at an
    // entry and its opening: the open itself must refuse it.
    use std::os::fd::{AsFd, AsRawFd};
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("target"), "outside").unwrap();
    std::os::unix::fs::symlink("target", dir.path().join("link")).unwrap();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    let at = std::fs::File::open(dir.path()).unwrap();
    let open = |name: &str, flags| sys::open_at(at.as_fd(), std::ffi::OsStr::new(name), flags);
    let refused = open("link", sys::OFlags::RDONLY | sys::OFlags::NONBLOCK).unwrap_err();
    assert_eq!(refused.raw_os_error(), Some(libc::ELOOP));
    // The caller's flags are kept: a file is no directory.
    let refused = open("target", sys::OFlags::RDONLY | sys::OFlags::DIRECTORY).unwrap_err();
    assert_eq!(refused.raw_os_error(), Some(libc::ENOTDIR));
    let fd = open("sub", sys::OFlags::RDONLY | sys::OFlags::DIRECTORY).unwrap();
    // SAFETY: F_GETFD on a descriptor this test owns.
    let fd_flags = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFD) };
    assert_eq!(fd_flags & libc::FD_CLOEXEC, libc::FD_CLOEXEC);
}

#[test]
fn a_checksum_is_worked_out_up_to_its_limit_and_never_past_it() {
    use super::place::{read_sum_within, sha256_hex};
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("empty"), "").unwrap();
    std::fs::write(dir.path().join("ten"), "0123456789").unwrap();
    let root = Root::open(dir.path()).unwrap();
    let sum = |root: &Root, name: &str, limit| {
        let place = Place::open(root, name).unwrap();
        read_sum_within(&place, "read", limit).map(|sum| sum.map(|sum| (sum.digest, sum.head)))
    };
    assert_eq!(
        sum(&root, "/empty", 10).unwrap(),
        Some((sha256_hex(b""), Some(Vec::new())))
    );
    assert_eq!(
        sum(&root, "/ten", 10).unwrap(),
        Some((sha256_hex(b"0123456789"), Some(b"0123456789".to_vec())))
    );
    assert_eq!(sum(&root, "/ten", 9).unwrap(), None);
    // The content comes with the checksum up to 64 KiB (CONTENT_MAX).
    let edge = "e".repeat(64 * 1024);
    std::fs::write(dir.path().join("edge"), &edge).unwrap();
    std::fs::write(dir.path().join("over"), edge.clone() + "e").unwrap();
    let (_, head) = sum(&root, "/edge", 1 << 20).unwrap().unwrap();
    assert_eq!(head.as_deref(), Some(edge.as_bytes()));
    let (_, head) = sum(&root, "/over", 1 << 20).unwrap().unwrap();
    assert_eq!(head, None);
    // A file that grows while it is read is cut off there too: a file of
    // /proc says it is empty and reads as much more (read only).
    let proc = Root::open(std::path::Path::new("/proc/self")).unwrap();
    assert_eq!(sum(&proc, "/status", 0).unwrap(), None);
    assert!(sum(&proc, "/status", 1 << 20).unwrap().is_some());
    // Something other than a regular file there by now (here a FIFO) is
    // refused, and its opening never waits for a writer.
    mkfifo(&dir.path().join("fifo"));
    let err = sum(&root, "/fifo", 10).unwrap_err();
    assert_eq!(err.message, "'/fifo' is no longer a regular file");
}

#[test]
fn a_copy_is_read_up_to_its_limit_and_never_past_it() {
    use super::plan::read_whole;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("ten"), "0123456789").unwrap();
    let root = Root::open(dir.path()).unwrap();
    let read = |root: &Root, name: &str, limit| {
        read_whole(&Place::open(root, name).unwrap(), limit).map_err(|err| err.to_string())
    };
    assert_eq!(read(&root, "/ten", 10).unwrap(), b"0123456789");
    // A file that grows past the limit while read (a /proc file says it
    // is empty): refused, not cut.
    let proc = Root::open(std::path::Path::new("/proc/self")).unwrap();
    assert_eq!(
        read(&proc, "/status", 10).unwrap_err(),
        "it grew past the size it may be copied at"
    );
    mkfifo(&dir.path().join("fifo"));
    assert_eq!(
        read(&root, "/fifo", 10).unwrap_err(),
        "it is no longer a regular file"
    );
}

/// `force` replaces a hard-linked file with a copy up to COPY_MAX bytes
/// (sparse files here, so that nothing of that size is written).
#[test]
fn a_hard_linked_file_is_copied_up_to_the_copy_limit() {
    use super::plan::COPY_MAX;
    let dir = tempfile::tempdir().unwrap();
    for (name, size) in [("edge", COPY_MAX), ("over", COPY_MAX + 1)] {
        let file = std::fs::File::create(dir.path().join(name)).unwrap();
        file.set_len(size).unwrap();
        // Whatever the umask: the 0600 asked must be a change.
        file.set_permissions(std::fs::Permissions::from_mode(0o644))
            .unwrap();
        std::fs::hard_link(
            dir.path().join(name),
            dir.path().join(format!("{name}-link")),
        )
        .unwrap();
    }
    let should = json!({"mode": "0600", "force": true});
    let plan = planned(dir.path(), "/edge", should.clone()).unwrap();
    match plan.action {
        Some(Action::WriteFile { data, .. }) => assert_eq!(data.len() as u64, COPY_MAX),
        _ => panic!("no copy planned"),
    }
    assert_eq!(
        planned(dir.path(), "/over", should).unwrap_err(),
        format!("'/over' is larger than {COPY_MAX} bytes, too large to replace with a copy")
    );
}

/// As root, what replaces a file keeps its owner and group (what is new
/// is root's anyway).
#[test]
fn a_replacement_keeps_the_owner_of_what_it_replaces() {
    if !is_root_for("a file of another owner") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f");
    std::fs::write(&path, "x").unwrap();
    std::os::unix::fs::chown(&path, Some(4242), Some(4243)).unwrap();
    let plan = planned(
        dir.path(),
        "/f",
        json!({"ensure": "link", "target": "/etc"}),
    )
    .unwrap();
    assert_eq!(
        plan.action,
        Some(Action::Link {
            target: "/etc".to_owned(),
            uid: Some(4242),
            gid: Some(4243),
            old: What::File
        })
    );
}

/// A replacement reports the mode it gives against the mode of what it
/// replaces (a link has none): no change when they agree.
#[test]
fn a_replacement_reports_its_mode_against_the_old_ones() {
    let dir = tempfile::tempdir().unwrap();
    for (name, mode) in [("a", 0o644), ("b", 0o755)] {
        let path = dir.path().join(name);
        std::fs::write(&path, "x").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
    }
    std::os::unix::fs::symlink("a", dir.path().join("c")).unwrap();
    let modes = |name: &str, should: Json| -> Vec<Change> {
        let plan = planned(dir.path(), name, should).unwrap();
        plan.changes
            .into_iter()
            .filter(|c| c.attribute == "mode")
            .collect()
    };
    let to_dir = json!({"ensure": "directory", "force": true});
    assert_eq!(
        modes("/a", to_dir.clone()),
        [Change::new("mode", "0644", "0755")]
    );
    assert_eq!(modes("/b", to_dir), []);
    let to_file = json!({"ensure": "file", "force": true});
    assert_eq!(
        modes("/c", to_file),
        [Change::new("mode", Json::Null, "0644")]
    );
}

/// An owner or group asked as the file has it is no change; another
/// group is (only root may give it).
#[test]
fn an_owner_or_group_asked_as_it_is_is_no_change() {
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f");
    std::fs::write(&path, "x").unwrap();
    let meta = std::fs::metadata(&path).unwrap();
    let (uid, gid) = (meta.uid().to_string(), meta.gid().to_string());
    let plan = planned(dir.path(), "/f", json!({"owner": uid, "group": gid})).unwrap();
    assert_eq!(plan.changes, []);
    if super::sys::effective_ids().0 == 0 {
        let plan = planned(dir.path(), "/f", json!({"group": "4243"})).unwrap();
        assert_eq!(plan.changes, [Change::new("group", gid.as_str(), "4243")]);
    }
}

/// As root, a new link gets the owner or the group asked, either alone;
/// a new file gets them too.
#[test]
fn a_new_link_gets_the_owner_or_group_asked_alone() {
    use std::os::unix::fs::MetadataExt;
    if !is_root_for("giving a link away") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let updates = [
        update(
            "/o",
            json!({"ensure": "link", "target": "x", "owner": "4242"}),
        ),
        update(
            "/g",
            json!({"ensure": "link", "target": "x", "group": "4243"}),
        ),
        update(
            "/f",
            json!({"content": "x", "owner": "4242", "group": "4243"}),
        ),
    ];
    let outcomes = File.set(&call(dir.path(), false), &updates).unwrap();
    assert!(outcomes.iter().all(Result::is_ok), "{outcomes:?}");
    let ids = |name: &str| {
        let meta = std::fs::symlink_metadata(dir.path().join(name)).unwrap();
        (meta.uid(), meta.gid())
    };
    // Each alone: the other id is the creator's.
    let (euid, egid) = super::sys::effective_ids();
    assert_eq!(ids("o"), (4242, egid));
    assert_eq!(ids("g"), (euid, 4243));
    assert_eq!(ids("f"), (4242, 4243), "a new file too");
}

/// A link with another hard link (`ln` of a link) is replaced with a
/// link of its own, never read as a file, when its owner changes.
#[test]
fn a_hard_linked_link_is_replaced_with_a_link_of_its_own() {
    if !is_root_for("giving a link away") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink("x", dir.path().join("l")).unwrap();
    // linkat(2) without AT_SYMLINK_FOLLOW links the link itself.
    std::fs::hard_link(dir.path().join("l"), dir.path().join("l2")).unwrap();
    let plan = planned(dir.path(), "/l", json!({"owner": "4242", "force": true})).unwrap();
    match plan.action {
        Some(Action::Link { target, uid, .. }) => {
            assert_eq!((target.as_str(), uid), ("x", Some(4242)))
        }
        _ => panic!("no link planned"),
    }
}

/// `force` replaces a file or a link with a directory.
#[test]
fn a_file_or_link_is_replaced_with_a_directory_by_force() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("f"), "x").unwrap();
    std::os::unix::fs::symlink("f", dir.path().join("l")).unwrap();
    let to_dir = json!({"ensure": "directory", "force": true});
    let updates = [update("/f", to_dir.clone()), update("/l", to_dir)];
    let outcomes = File.set(&call(dir.path(), false), &updates).unwrap();
    assert!(outcomes.iter().all(Result::is_ok), "{outcomes:?}");
    for name in ["f", "l"] {
        let meta = std::fs::symlink_metadata(dir.path().join(name)).unwrap();
        assert!(meta.is_dir(), "{name}");
    }
}

/// What changes mode and owner in place: the mode of a file or a
/// directory, the owner or group alone (as root), a link's owner; never
/// a file that gained another hard link since it was planned.
#[test]
fn mode_and_owner_are_set_in_place_unless_a_link_came_meanwhile() {
    use super::plan::set_meta;
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("f"), "x").unwrap();
    std::fs::create_dir(dir.path().join("d")).unwrap();
    std::os::unix::fs::symlink("f", dir.path().join("l")).unwrap();
    let root = Root::open(dir.path()).unwrap();
    let place = |name: &str| Place::open(&root, name).unwrap();
    let meta = |name: &str| std::fs::symlink_metadata(dir.path().join(name)).unwrap();
    set_meta(&place("/f"), What::File, Some(0o600), None, None, false).unwrap();
    assert_eq!(meta("f").mode() & 0o7777, 0o600);
    set_meta(
        &place("/d"),
        What::Directory,
        Some(0o700),
        None,
        None,
        false,
    )
    .unwrap();
    assert_eq!(meta("d").mode() & 0o7777, 0o700);
    if super::sys::effective_ids().0 == 0 {
        set_meta(&place("/f"), What::File, None, Some(4242), None, false).unwrap();
        set_meta(&place("/d"), What::Directory, None, None, Some(4243), false).unwrap();
        set_meta(&place("/l"), What::Link, None, Some(4244), None, false).unwrap();
        assert_eq!(meta("f").uid(), 4242);
        assert_eq!(meta("d").gid(), 4243);
        assert_eq!(meta("l").uid(), 4244);
        assert_eq!(meta("f").mode() & 0o7777, 0o600, "the mode is kept");
    }
    std::fs::hard_link(dir.path().join("f"), dir.path().join("f2")).unwrap();
    let err = set_meta(&place("/f"), What::File, Some(0o644), None, None, false).unwrap_err();
    assert_eq!(
        err.to_string(),
        "it gained another hard link since it was read; refusing to change it in place"
    );
    assert_eq!(meta("f").mode() & 0o7777, 0o600);
}
