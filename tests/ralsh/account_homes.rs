//! `managehome` on a fake root: a user's home is removed with the account
//! only when it is a directory the user owns whole, below a parent, and
//! no system directory; anything else is kept with a warning that says
//! why, and the account is removed all the same. Making a home leaves one
//! that exists as it is.
//!
//! Owners: as root, the account's files are given its uid; as another
//! user, the account is given that user's uid, so that "the user owns it"
//! holds either way. The cases that need a file of another owner inside a
//! home are in tests/needs (as_root.rs).

use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::Path;

use crate::support::{assert_same_tree, tree_snapshot, Sandbox};

/// The uid the test's accounts get: one the files made here can belong
/// to (root gives them to it).
fn account_uid() -> u32 {
    // SAFETY: geteuid has no preconditions.
    match unsafe { libc::geteuid() } {
        0 => 4242,
        uid => uid,
    }
}

/// Gives everything at and below `path` (links themselves) to the
/// account's uid, where that needs root.
fn give_to_account(path: &Path) {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return;
    }
    let uid = account_uid();
    std::os::unix::fs::lchown(path, Some(uid), Some(uid)).unwrap();
    if std::fs::symlink_metadata(path).unwrap().is_dir() {
        for entry in std::fs::read_dir(path).unwrap() {
            give_to_account(&entry.unwrap().path());
        }
    }
}

fn homes_sandbox() -> Sandbox {
    let sandbox = Sandbox::new();
    sandbox.write_accounts();
    sandbox
}

/// A user `v` with the account's uid and the home `home`, made below the
/// root with some data in it and given to the user.
fn user_with_home(sandbox: &Sandbox, home: &str) {
    let dir = sandbox.root().join(home.trim_start_matches('/'));
    std::fs::create_dir_all(dir.join("data")).unwrap();
    std::fs::write(dir.join("data/file"), "kept?\n").unwrap();
    give_to_account(&dir);
    let uid = format!("uid={}", account_uid());
    let home_attr = format!("home={home}");
    sandbox
        .ralsh(&["user", "v", &uid, &home_attr])
        .expect(0)
        .stdout_has("ensure: 'absent' -> 'present'");
}

/// Removes `v` with managehome=true: the account goes, and the warning
/// says its home was kept for `why`.
#[track_caller]
fn remove_keeping(sandbox: &Sandbox, home: &str, why: &str) {
    let run = sandbox.ralsh(&["user", "v", "ensure=absent", "managehome=true"]);
    run.expect(0)
        .stdout_has("ensure: 'present' -> 'absent'")
        .stderr_has(&format!(
            "v: deleting: the home directory '{}' was kept: {why}",
            sandbox.root().join(home.trim_start_matches('/')).display()
        ));
    assert!(!sandbox.read("etc/passwd").contains("\nv:"), "v is gone");
}

#[test]
fn managehome_never_removes_a_top_level_or_system_directory() {
    for (home, why) in [
        ("/srv", "it is the root or a top-level directory"),
        ("/home", "it is the root or a top-level directory"),
        ("/opt/", "it is the root or a top-level directory"),
        ("/usr/lib", "it is a system directory"),
        ("/usr/local", "it is a system directory"),
        ("/var/lib", "it is a system directory"),
        ("/etc/app", "it is below the system directory '/etc'"),
        ("/srv/../srv/v", "its path is not a plain absolute path"),
    ] {
        let sandbox = homes_sandbox();
        user_with_home(&sandbox, home);
        let before = tree_snapshot(sandbox.root());
        remove_keeping(&sandbox, home, why);
        let dir = sandbox.root().join(home.trim_start_matches('/'));
        assert_eq!(
            std::fs::read_to_string(dir.join("data/file")).unwrap(),
            "kept?\n",
            "{home}"
        );
        let kept: Vec<_> = before
            .keys()
            .filter(|path| !path.starts_with("etc"))
            .collect();
        let now = tree_snapshot(sandbox.root());
        assert!(kept.iter().all(|path| now.contains_key(*path)), "{home}");
    }
}

/// The issue's case: `home=/srv` over the server's data (root's, here
/// the test's), then `/etc` itself: nothing of either goes.
#[test]
fn managehome_keeps_srv_and_etc_of_the_issue() {
    let sandbox = homes_sandbox();
    sandbox.write("srv/www/index.html", "<p>data</p>\n");
    let srv = tree_snapshot(&sandbox.root().join("srv"));
    sandbox
        .ralsh(&["user", "v", "home=/srv", "managehome=true"])
        .expect(0);
    assert_same_tree(&srv, &sandbox.root().join("srv"), "creating v");
    let run = sandbox.ralsh(&["user", "v", "ensure=absent", "managehome=true"]);
    run.expect(0).stderr_has("the home directory '");
    assert_same_tree(&srv, &sandbox.root().join("srv"), "removing v");

    sandbox
        .ralsh(&["user", "w", "home=/etc", "managehome=true"])
        .expect(0);
    let etc = sandbox.root().join("etc");
    let run = sandbox.ralsh(&["user", "w", "ensure=absent", "managehome=true"]);
    run.expect(0)
        .stderr_has("it is the root or a top-level directory");
    for file in ["passwd", "shadow", "group", "gshadow"] {
        assert!(etc.join(file).is_file(), "{file} is still there");
    }
    assert!(!sandbox.read("etc/passwd").contains("\nw:"));
}

#[test]
fn managehome_removes_a_home_the_user_owns_whole() {
    let sandbox = homes_sandbox();
    user_with_home(&sandbox, "/home/v");
    let home = sandbox.root().join("home/v");
    std::fs::create_dir_all(home.join("deep/er/still")).unwrap();
    std::fs::write(home.join("deep/er/still/f"), "x").unwrap();
    std::os::unix::fs::symlink("/etc/passwd", home.join("link")).unwrap();
    give_to_account(&home);
    sandbox
        .ralsh(&["-n", "user", "v", "ensure=absent", "managehome=true"])
        .expect(0);
    assert!(
        home.join("deep/er/still/f").exists(),
        "noop removes nothing"
    );
    let run = sandbox.ralsh(&["user", "v", "ensure=absent", "managehome=true"]);
    run.expect(0).stdout_has("ensure: 'present' -> 'absent'");
    assert!(!run.stderr.contains("kept"), "{}", run.stderr);
    assert!(!home.exists());
    assert!(sandbox.root().join("home").is_dir(), "/home itself stays");
    assert!(
        sandbox.root().join("etc/passwd").is_file(),
        "links not followed"
    );
}

#[test]
fn managehome_never_follows_a_link_to_or_on_the_way_to_a_home() {
    // The home itself is a link to the user's data elsewhere.
    let sandbox = homes_sandbox();
    user_with_home(&sandbox, "/data/v");
    std::fs::create_dir(sandbox.root().join("home")).unwrap();
    std::os::unix::fs::symlink("/data/v", sandbox.root().join("home/v")).unwrap();
    sandbox.ralsh(&["user", "v", "home=/home/v"]).expect(0);
    remove_keeping(&sandbox, "/home/v", "it is a symbolic link");
    assert!(sandbox.root().join("data/v/data/file").is_file());
    assert!(std::fs::symlink_metadata(sandbox.root().join("home/v"))
        .unwrap()
        .is_symlink());

    // A link on the way to it.
    let sandbox = homes_sandbox();
    user_with_home(&sandbox, "/data/v");
    std::os::unix::fs::symlink("/data", sandbox.root().join("home")).unwrap();
    sandbox.ralsh(&["user", "v", "home=/home/v"]).expect(0);
    let why = format!(
        "'{}' is a symbolic link, which ral does not follow here",
        sandbox.root().join("home").display()
    );
    remove_keeping(&sandbox, "/home/v", &why);
    assert!(sandbox.root().join("data/v/data/file").is_file());
}

#[test]
fn managehome_keeps_a_home_that_is_no_directory() {
    let sandbox = homes_sandbox();
    std::fs::create_dir(sandbox.root().join("home")).unwrap();
    let fifo = sandbox.root().join("home/v");
    let path = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: `path` is a NUL-terminated path that outlives the call.
    assert_eq!(unsafe { libc::mkfifo(path.as_ptr(), 0o600) }, 0);
    give_to_account(&fifo);
    let uid = format!("uid={}", account_uid());
    sandbox
        .ralsh(&["user", "v", &uid, "home=/home/v"])
        .expect(0);
    remove_keeping(&sandbox, "/home/v", "it is a FIFO");
    assert!(std::fs::symlink_metadata(&fifo)
        .unwrap()
        .file_type()
        .is_fifo());
}

#[test]
fn managehome_keeps_a_home_that_holds_or_is_another_users_home() {
    let sandbox = homes_sandbox();
    user_with_home(&sandbox, "/srv/v");
    std::fs::create_dir(sandbox.root().join("srv/v/w")).unwrap();
    give_to_account(&sandbox.root().join("srv/v/w"));
    sandbox.ralsh(&["user", "w", "home=/srv/v/w/"]).expect(0);
    remove_keeping(
        &sandbox,
        "/srv/v",
        "it holds the home directory of the user 'w'",
    );
    assert!(sandbox.root().join("srv/v/data/file").is_file());

    // A home shared by two accounts.
    let sandbox = homes_sandbox();
    user_with_home(&sandbox, "/srv/shared");
    sandbox.ralsh(&["user", "w", "home=/srv/shared"]).expect(0);
    remove_keeping(
        &sandbox,
        "/srv/shared",
        "it holds the home directory of the user 'w'",
    );
    assert!(sandbox.root().join("srv/shared/data/file").is_file());
}

#[test]
fn managehome_keeps_a_home_another_uid_owns() {
    let sandbox = homes_sandbox();
    sandbox.write("home/v/notes", "mine\n");
    // SAFETY: geteuid has no preconditions.
    let owner = unsafe { libc::geteuid() };
    // The account's uid is not the owner's.
    let uid = format!("uid={}", owner + 1);
    sandbox.ralsh(&["user", "v", &uid]).expect(0);
    let shown_owner = match owner {
        0 => "uid 0 ('root')".to_owned(),
        uid => format!("uid {uid}"),
    };
    remove_keeping(
        &sandbox,
        "/home/v",
        &format!("it is owned by {shown_owner}, not by the user"),
    );
    assert_eq!(sandbox.read("home/v/notes"), "mine\n");
}

#[test]
fn managehome_on_creation_leaves_a_home_that_exists_as_it_is() {
    let sandbox = homes_sandbox();
    sandbox.write("srv/app/config", "keep\n");
    let app = sandbox.root().join("srv/app");
    std::fs::set_permissions(&app, std::fs::Permissions::from_mode(0o700)).unwrap();
    let before = std::fs::metadata(&app).unwrap();
    let tree = tree_snapshot(&app);
    let run = sandbox.ralsh(&["user", "v", "home=/srv/app", "managehome=true"]);
    run.expect(0).stdout_has("ensure: 'absent' -> 'present'");
    if before.uid() == 0 {
        // As root the new user (uid 1000) would own a home it made.
        run.stderr_has(&format!(
            "v: creating: the home directory '{}' exists already and was left as it is: it \
             is owned by uid 0 ('root')",
            app.display()
        ));
    }
    let after = std::fs::metadata(&app).unwrap();
    assert_eq!(
        (after.uid(), after.gid(), after.mode()),
        (before.uid(), before.gid(), before.mode())
    );
    assert_same_tree(&tree, &app, "creating v");
}

#[test]
fn managehome_on_creation_leaves_a_link_where_the_home_would_be() {
    let sandbox = homes_sandbox();
    sandbox.write("srv/app/config", "keep\n");
    std::fs::create_dir(sandbox.root().join("home")).unwrap();
    let home = sandbox.root().join("home/v");
    std::os::unix::fs::symlink("/srv/app", &home).unwrap();
    let tree = tree_snapshot(&sandbox.root().join("srv"));
    let run = sandbox.ralsh(&["user", "v", "managehome=true"]);
    run.expect(0).stderr_has(&format!(
        "v: creating: the home directory '{}' exists already and was left as it is: it is a \
         symbolic link",
        home.display()
    ));
    assert!(std::fs::symlink_metadata(&home).unwrap().is_symlink());
    assert_same_tree(&tree, &sandbox.root().join("srv"), "creating v");
}
