//! Journals: an edit of several files interrupted between its renames is
//! seen finished by readers and finished by the next edit, whichever
//! toolkit (Rust or Python) wrote it and whichever finishes it.

use std::time::Duration;

use super::Sandbox;
use crate::files::edit::FAIL_RENAME_ONTO;
use crate::files::{temp_name, Attrs, Edit, Lock, Root, Target, JOURNAL_MAX};

/// An edit of shadow and passwd that "crashes" before replacing passwd.
fn interrupted_rust_edit(sandbox: &Sandbox) -> (Root, Target) {
    sandbox.write("etc/passwd", b"root\n");
    sandbox.write_mode("etc/shadow", b"root-shadow\n", 0o640);
    let root = sandbox.open();
    let passwd = root.file("etc/passwd", true, None).unwrap();
    let shadow = root.file("etc/shadow", true, None).unwrap();
    FAIL_RENAME_ONTO.with(|fail| *fail.borrow_mut() = Some("passwd".to_owned()));
    let mut edit = Edit::begin(Lock::accounts(&root).unwrap(), &sandbox.call).unwrap();
    edit.read(&shadow).unwrap();
    edit.read(&passwd).unwrap();
    edit.write(
        &shadow,
        b"root-shadow\nbob-shadow\n".to_vec(),
        Attrs::default(),
    )
    .unwrap();
    edit.write(&passwd, b"root\nbob\n".to_vec(), Attrs::default())
        .unwrap();
    let err = edit.commit().unwrap_err();
    drop(edit);
    FAIL_RENAME_ONTO.with(|fail| *fail.borrow_mut() = None);
    assert!(
        err.message.contains("the next edit finishes the others"),
        "{}",
        err.message
    );
    // The state a crash leaves: shadow replaced, passwd not yet.
    assert_eq!(sandbox.read("etc/shadow"), b"root-shadow\nbob-shadow\n");
    assert_eq!(sandbox.read("etc/passwd"), b"root\n");
    assert!(sandbox
        .names("etc")
        .contains(&".pwd.lock.ral-journal".to_owned()));
    (root, passwd)
}

/// The same, by the Python toolkit (its rename made to fail the same way).
fn interrupted_python_edit(sandbox: &Sandbox) -> (Root, Target) {
    sandbox.write("etc/passwd", b"root\n");
    sandbox.write_mode("etc/shadow", b"root-shadow\n", 0o640);
    sandbox.python(
        "real_rename = os.rename\n\
         def failing_rename(src, dst, **kwargs):\n\
         \x20   if dst == 'passwd':\n\
         \x20       raise OSError(5, 'simulated crash')\n\
         \x20   return real_rename(src, dst, **kwargs)\n\
         ral.files.os.rename = failing_rename\n\
         root = ral.Root()\n\
         passwd, shadow = root.file('etc/passwd'), root.file('etc/shadow')\n\
         try:\n\
         \x20   with ral.Edit(ral.Lock.accounts(root), noop=False) as edit:\n\
         \x20       edit.read(shadow); edit.read(passwd)\n\
         \x20       edit.write(shadow, b'root-shadow\\nbob-shadow\\n')\n\
         \x20       edit.write(passwd, b'root\\nbob\\n')\n\
         \x20       edit.commit()\n\
         except ral.CallError:\n\
         \x20   pass\n\
         else:\n\
         \x20   raise SystemExit('the edit was not interrupted')\n",
    );
    assert_eq!(sandbox.read("etc/shadow"), b"root-shadow\nbob-shadow\n");
    assert_eq!(sandbox.read("etc/passwd"), b"root\n");
    assert!(sandbox
        .names("etc")
        .contains(&".pwd.lock.ral-journal".to_owned()));
    let root = sandbox.open();
    let passwd = root.file("etc/passwd", true, None).unwrap();
    (root, passwd)
}

fn finished_by_rust(sandbox: &Sandbox, root: &Root, passwd: &Target) {
    // A journal of another edit, killed while it was being written.
    let stale = temp_name(".pwd.lock.ral-journal").unwrap();
    sandbox.write(&format!("etc/{stale}"), b"{\"ral_journal\": 1, \"fi");
    let mut reader = Lock::accounts(root).unwrap();
    let seen = reader.read(&sandbox.call, passwd, None).unwrap().unwrap().0;
    assert_eq!(seen, b"root\nbob\n");
    let mut edit = Edit::begin(Lock::accounts(root).unwrap(), &sandbox.call).unwrap();
    assert_eq!(edit.read(passwd).unwrap().unwrap(), b"root\nbob\n");
    drop(edit);
    assert_eq!(sandbox.read("etc/passwd"), b"root\nbob\n");
    assert_eq!(sandbox.read("etc/shadow"), b"root-shadow\nbob-shadow\n");
    assert_eq!(sandbox.names("etc"), [".pwd.lock", "passwd", "shadow"]);
    assert!(sandbox
        .log()
        .contains("info: finished an interrupted edit: replaced '"));
}

#[test]
fn readers_see_a_rust_edit_finished_and_the_next_edit_finishes_it() {
    let sandbox = Sandbox::new();
    let (root, passwd) = interrupted_rust_edit(&sandbox);
    finished_by_rust(&sandbox, &root, &passwd);
}

#[test]
fn an_edit_the_python_toolkit_left_is_finished_here() {
    let sandbox = Sandbox::new();
    let (root, passwd) = interrupted_python_edit(&sandbox);
    finished_by_rust(&sandbox, &root, &passwd);
}

#[test]
fn an_edit_left_here_is_finished_by_the_python_toolkit() {
    let sandbox = Sandbox::new();
    interrupted_rust_edit(&sandbox);
    let out = sandbox.python(
        "root = ral.Root()\n\
         passwd = root.file('etc/passwd')\n\
         print(ral.Lock.accounts(root).read(passwd)[0].decode(), end='')\n\
         with ral.Edit(ral.Lock.accounts(root), noop=False) as edit:\n\
         \x20   print(edit.read(passwd).decode(), end='')\n",
    );
    assert_eq!(out.stdout, b"root\nbob\nroot\nbob\n");
    assert!(String::from_utf8_lossy(&out.stderr).contains("finished an interrupted edit"));
    assert_eq!(sandbox.read("etc/passwd"), b"root\nbob\n");
    assert_eq!(sandbox.names("etc"), [".pwd.lock", "passwd", "shadow"]);
}

#[test]
fn a_file_another_program_changed_since_is_left_to_it() {
    let sandbox = Sandbox::new();
    let (root, passwd) = interrupted_rust_edit(&sandbox);
    sandbox.write("etc/passwd.new", b"root\nuseradd-made\n");
    sandbox.rename("etc/passwd.new", "etc/passwd");
    let mut reader = Lock::accounts(&root).unwrap();
    let seen = reader
        .read(&sandbox.call, &passwd, None)
        .unwrap()
        .unwrap()
        .0;
    assert_eq!(seen, b"root\nuseradd-made\n");
    let mut edit = Edit::begin(Lock::accounts(&root).unwrap(), &sandbox.call).unwrap();
    edit.read(&passwd).unwrap();
    drop(edit);
    assert_eq!(sandbox.read("etc/passwd"), b"root\nuseradd-made\n");
    assert_eq!(sandbox.names("etc"), [".pwd.lock", "passwd", "shadow"]);
    assert!(sandbox.log().contains("was changed by another program"));
}

#[test]
fn a_journal_too_deep_or_too_large_to_parse_is_ignored() {
    let sandbox = Sandbox::new();
    sandbox.write("etc/passwd", b"root\n");
    let root = sandbox.open();
    let passwd = root.file("etc/passwd", true, None).unwrap();
    let temp = temp_name("passwd").unwrap();
    let was = crate::files::identity(passwd.lstat().unwrap().as_ref());
    // A journal that would replace passwd, were it read.
    let valid = serde_json::json!({"ral_journal": 1, "files": [
        {"dir": "etc", "temp": temp, "name": "passwd", "was": was}]})
    .to_string();
    // One byte past the limit; the same journal at it is read below.
    let mut large = valid.clone().into_bytes();
    large.resize(JOURNAL_MAX + 1, b' ');
    let deep = [vec![b'['; 100_000], vec![b']'; 100_000]].concat();
    for journal in [deep, large, b"{\"files\": [{\"dir\": 1}]}".to_vec()] {
        sandbox.write(&format!("etc/{temp}"), b"root\nbob\n");
        sandbox.write("etc/.pwd.lock.ral-journal", &journal);
        let mut reader = Lock::accounts(&root).unwrap();
        assert_eq!(
            reader
                .read(&sandbox.call, &passwd, None)
                .unwrap()
                .unwrap()
                .0,
            b"root\n"
        );
        let mut edit = Edit::begin(Lock::accounts(&root).unwrap(), &sandbox.call).unwrap();
        assert_eq!(edit.read(&passwd).unwrap().unwrap(), b"root\n");
        drop(edit);
        assert!(!sandbox
            .names("etc")
            .contains(&".pwd.lock.ral-journal".to_owned()));
        assert!(sandbox
            .log()
            .contains("warn: ignoring the unreadable journal"));
    }
    assert_eq!(sandbox.read("etc/passwd"), b"root\n");
    // The same journal, readable (as long as the limit), is finished.
    let mut at_limit = valid.into_bytes();
    at_limit.resize(JOURNAL_MAX, b' ');
    sandbox.write("etc/.pwd.lock.ral-journal", &at_limit);
    sandbox.write(&format!("etc/{temp}"), b"root\nbob\n");
    drop(Edit::begin(Lock::accounts(&root).unwrap(), &sandbox.call).unwrap());
    assert_eq!(sandbox.read("etc/passwd"), b"root\nbob\n");
}

#[test]
fn a_noop_edit_of_several_files_writes_no_journal() {
    let sandbox = Sandbox::with(true, Duration::from_secs(15));
    sandbox.write("etc/passwd", b"root\n");
    sandbox.write("etc/shadow", b"root\n");
    let root = sandbox.open();
    let passwd = root.file("etc/passwd", true, None).unwrap();
    let shadow = root.file("etc/shadow", true, None).unwrap();
    let mut edit = Edit::begin(Lock::accounts(&root).unwrap(), &sandbox.call).unwrap();
    edit.write(&passwd, b"x\n".to_vec(), Attrs::default())
        .unwrap();
    edit.write(&shadow, b"x\n".to_vec(), Attrs::default())
        .unwrap();
    edit.commit().unwrap();
    drop(edit);
    assert_eq!(sandbox.names("etc"), ["passwd", "shadow"]);
    assert_eq!(sandbox.read("etc/passwd"), b"root\n");
}

/// A journal may only name, as the file that replaces another, a
/// temporary file of ours for that very name beside it
/// (`.NAME.ral-tmp-...`): one that names shadow as passwd's replacement,
/// another file's temporary file, a path or a name that is no file is not
/// followed. Nothing is renamed; the journal is dropped with a warning.
#[test]
fn a_journal_that_names_a_file_not_ours_as_the_replacement_is_ignored() {
    let sandbox = Sandbox::new();
    sandbox.write("etc/passwd", b"root\n");
    sandbox.write("etc/shadow", b"root:secret\n");
    sandbox.write("etc/sub/.passwd.ral-tmp-0123456789ab", b"deeper\n");
    sandbox.write("etc/.passwd.ral-tmp-0123456789ab/x", b"deeper\n");
    let others = temp_name("shadow").unwrap();
    sandbox.write(&format!("etc/{others}"), b"shadow's\n");
    let root = sandbox.open();
    let passwd = root.file("etc/passwd", true, None).unwrap();
    let was = crate::files::identity(passwd.lstat().unwrap().as_ref());
    let cases = [
        ("shadow", "passwd"),
        (others.as_str(), "passwd"),
        ("sub/.passwd.ral-tmp-0123456789ab", "passwd"),
        ("..ral-tmp-0123456789ab", ".."),
        // Ours by its start, but a path.
        (".passwd.ral-tmp-0123456789ab/x", "passwd"),
        // Ours for the name, but the name is no file.
        ("....ral-tmp-0123456789ab", ".."),
    ];
    let warnings = || {
        sandbox
            .log()
            .matches("warn: ignoring the unreadable journal")
            .count()
    };
    for (temp, name) in cases {
        let before = warnings();
        let journal = serde_json::json!({"ral_journal": 1, "files": [
            {"dir": "etc", "temp": temp, "name": name, "was": was}]});
        sandbox.write("etc/.pwd.lock.ral-journal", journal.to_string().as_bytes());
        let mut reader = Lock::accounts(&root).unwrap();
        let seen = reader.read(&sandbox.call, &passwd, None).unwrap().unwrap();
        assert_eq!(seen.0, b"root\n", "{temp}");
        drop(Edit::begin(Lock::accounts(&root).unwrap(), &sandbox.call).unwrap());
        assert_eq!(sandbox.read("etc/passwd"), b"root\n", "{temp}");
        assert_eq!(sandbox.read("etc/shadow"), b"root:secret\n", "{temp}");
        assert_eq!(sandbox.read(&format!("etc/{others}")), b"shadow's\n");
        assert!(!sandbox
            .names("etc")
            .contains(&".pwd.lock.ral-journal".to_owned()));
        assert!(warnings() > before, "{temp}: {}", sandbox.log());
    }
}
