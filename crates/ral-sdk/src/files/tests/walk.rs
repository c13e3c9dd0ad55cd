//! The walk below the root: links resolved inside it or refused, missing
//! and swapped directories.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use super::Sandbox;
use crate::files::{root, sys, Create, Root};

#[test]
fn links_resolve_inside_the_root_and_never_leave_it() {
    let sandbox = Sandbox::new();
    sandbox.write("real/etc/hosts", b"inside\n");
    sandbox.symlink("/real/etc", "etc"); // absolute
    sandbox.symlink("../../../../real", "up"); // climbs above
    let root = sandbox.open();
    let target = root.file("etc/hosts", true, None).unwrap();
    assert_eq!(target.read(None).unwrap().unwrap().0, b"inside\n");
    assert_eq!(target.dir().rel(), "real/etc");
    let target = root.file("up/etc/hosts", true, None).unwrap();
    assert_eq!(target.dir().rel(), "real/etc");
    assert_eq!(target.read(None).unwrap().unwrap().0, b"inside\n");
    // An outside file a link seems to name is never what is read.
    let outside = sandbox.tmp.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(outside.join("hosts"), b"outside\n").unwrap();
    sandbox.symlink(outside.to_str().unwrap(), "out");
    let err = root.file("out/hosts", true, None).unwrap_err();
    assert!(err.missing, "{err:?}");
    assert!(
        err.message.contains("which is resolved inside the root"),
        "{}",
        err.message
    );
    assert!(root.read("out/hosts", true).unwrap().is_none());
}

#[test]
fn follow_false_refuses_links() {
    let sandbox = Sandbox::new();
    sandbox.mkdir("home/alice");
    sandbox.mkdir("etc");
    sandbox.symlink("/etc", "home/alice/.ssh");
    let root = sandbox.open();
    let home = root.directory("home/alice", false, None).unwrap();
    let err = home.subdir(".ssh", None).unwrap_err();
    assert!(
        err.message.ends_with(
            "home/alice/.ssh' is a symbolic link, which ral does not follow here; refusing to use it"
        ),
        "{}",
        err.message
    );
    let err = root.directory("home/alice/.ssh", false, None).unwrap_err();
    assert!(
        err.message.contains("is a symbolic link"),
        "{}",
        err.message
    );
    assert!(root.directory("home/alice/.ssh", true, None).is_ok());
}

#[test]
fn a_last_link_is_followed_only_when_asked() {
    let sandbox = Sandbox::new();
    sandbox.write("etc/real-group", b"g\n");
    sandbox.symlink("real-group", "etc/group");
    let root = sandbox.open();
    assert_eq!(
        root.file("etc/group", true, None).unwrap().name(),
        "real-group"
    );
    let last = root.file("etc/group", true, Some(false)).unwrap();
    assert_eq!(last.name(), "group");
    let err = last.read(None).unwrap_err();
    assert!(
        err.message
            .ends_with("etc/group' is a symbolic link, not a regular file"),
        "{}",
        err.message
    );
}

#[test]
fn link_loops_end() {
    let sandbox = Sandbox::new();
    sandbox.symlink("b", "a");
    sandbox.symlink("a", "b");
    let err = sandbox.open().directory("a", true, None).unwrap_err();
    assert_eq!(
        err.message,
        format!(
            "too many levels of symbolic links in '{}'",
            sandbox.path("a").display()
        )
    );
}

#[test]
fn missing_directories_are_made_with_the_last_one_as_asked() {
    let sandbox = Sandbox::new();
    let dir = sandbox
        .open()
        .directory("var/spool/cron", true, Some(Create::mode(0o1730)))
        .unwrap();
    assert_eq!(dir.rel(), "var/spool/cron");
    let mode = |rel| {
        std::fs::metadata(sandbox.path(rel))
            .unwrap()
            .permissions()
            .mode()
            & 0o7777
    };
    assert_eq!(mode("var/spool/cron"), 0o1730);
    assert_eq!(mode("var/spool"), 0o755);
    assert_eq!(mode("var"), 0o755);
}

/// A directory made by another between the look that found none and the
/// mkdir (or mounted there meanwhile) is not ours: it is opened and left
/// as it is, its mode and owner not set as asked.
#[test]
fn a_directory_made_meanwhile_is_left_as_it_is() {
    use std::os::fd::AsFd;
    let tmp = tempfile::tempdir().unwrap();
    let theirs = tmp.path().join("d");
    std::fs::create_dir(&theirs).unwrap();
    std::fs::set_permissions(&theirs, PermissionsExt::from_mode(0o700)).unwrap();
    let parent = sys::open_path(tmp.path().as_os_str(), sys::DIR_FLAGS).unwrap();
    root::make_dir(parent.as_fd(), "d", Create::mode(0o755), "d").unwrap();
    let mode = std::fs::metadata(&theirs).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode, 0o700);
}

#[test]
fn a_missing_directory_on_the_way_is_missing_and_reads_as_no_file() {
    let sandbox = Sandbox::new();
    let root = sandbox.open();
    let err = root.file("etc/sub/hosts", true, None).unwrap_err();
    assert!(err.missing);
    assert_eq!(
        err.message,
        format!(
            "the directory '{}' does not exist",
            sandbox.path("etc").display()
        )
    );
    assert!(root.read("etc/sub/hosts", true).unwrap().is_none());
    // A missing file in a directory that exists is no error at all.
    sandbox.mkdir("etc");
    assert!(root.read("etc/hosts", true).unwrap().is_none());
    let err = root
        .directory("etc", true, None)
        .unwrap()
        .subdir("sub", None)
        .unwrap_err();
    assert!(err.missing, "{err:?}");
}

#[test]
fn a_fifo_is_not_read() {
    let sandbox = Sandbox::new();
    sandbox.mkdir("etc");
    let status = std::process::Command::new("mkfifo")
        .arg(sandbox.path("etc/hosts"))
        .status()
        .unwrap();
    assert!(status.success());
    let err = sandbox.open().read("etc/hosts", true).unwrap_err();
    assert!(
        err.message.ends_with("etc/hosts' is not a regular file"),
        "{}",
        err.message
    );
}

#[test]
fn a_file_on_the_way_is_not_a_directory() {
    let sandbox = Sandbox::new();
    sandbox.write("etc", b"a file\n");
    let root = sandbox.open();
    let err = root.file("etc/hosts", true, None).unwrap_err();
    assert!(
        err.message.ends_with("/etc' is not a directory"),
        "{}",
        err.message
    );
    assert!(!err.missing);
    let err = root
        .directory("", true, None)
        .unwrap()
        .subdir("etc", None)
        .unwrap_err();
    assert!(
        err.message.ends_with("/etc' is not a directory"),
        "{}",
        err.message
    );
}

#[test]
fn a_directory_swapped_for_a_link_after_it_was_opened_is_still_the_one_read() {
    let sandbox = Sandbox::new();
    sandbox.write("etc/hosts", b"inside\n");
    sandbox.write("elsewhere/hosts", b"elsewhere\n");
    let root = sandbox.open();
    let target = root.file("etc/hosts", false, None).unwrap();
    sandbox.rename("etc", "etc.old");
    sandbox.symlink("/elsewhere", "etc");
    assert_eq!(target.read(None).unwrap().unwrap().0, b"inside\n");
    // A new walk that may not follow links refuses the swapped path.
    let err = root.file("etc/hosts", false, None).unwrap_err();
    assert!(
        err.message.contains("is a symbolic link"),
        "{}",
        err.message
    );
}

#[test]
fn an_entry_is_found_in_the_directory_opened() {
    let sandbox = Sandbox::new();
    sandbox.write("etc/passwd", b"opened\n");
    sandbox.write("etc/real-group", b"group\n");
    sandbox.symlink("real-group", "etc/group");
    let etc = sandbox.open().directory("etc", true, None).unwrap();
    // The path now leads to another directory; the one opened is used.
    sandbox.rename("etc", "etc.old");
    sandbox.write("etc/passwd", b"swapped in\n");
    let entry = etc.entry("passwd").unwrap();
    assert_eq!(entry.read(None).unwrap().unwrap().0, b"opened\n");
    // A link is resolved inside the root, from the directory's path.
    sandbox.rename("etc", "etc.new");
    sandbox.rename("etc.old", "etc");
    let group = etc.entry("group").unwrap();
    assert_eq!(group.name(), "real-group");
    assert_eq!(group.read(None).unwrap().unwrap().0, b"group\n");
}

#[test]
fn an_entrys_link_resolves_up_and_absolute_inside_the_root() {
    let sandbox = Sandbox::new();
    sandbox.write("etc/a", b"up\n");
    sandbox.write("srv/b", b"absolute\n");
    sandbox.mkdir("etc/sub");
    sandbox.symlink("../../etc/a", "etc/sub/up");
    sandbox.symlink("/srv/b", "etc/sub/abs");
    sandbox.symlink("../../../../../../etc/a", "etc/sub/far");
    let sub = sandbox.open().directory("etc/sub", true, None).unwrap();
    let up = sub.entry("up").unwrap();
    assert_eq!(up.read(None).unwrap().unwrap().0, b"up\n");
    assert_eq!(up.dir().rel(), "etc");
    let abs = sub.entry("abs").unwrap();
    assert_eq!(abs.read(None).unwrap().unwrap().0, b"absolute\n");
    assert_eq!(abs.dir().rel(), "srv");
    // '..' never climbs above the root.
    assert_eq!(
        sub.entry("far").unwrap().read(None).unwrap().unwrap().0,
        b"up\n"
    );
}

#[test]
fn the_root_is_opened_or_said_missing_and_an_empty_path_is_slash() {
    let sandbox = Sandbox::new();
    let missing = sandbox.path("nowhere");
    let err = Root::open(&missing).unwrap_err();
    assert_eq!(
        err.message,
        format!(
            "the root directory '{}' does not exist or is not a directory (No such file or directory)",
            missing.display()
        )
    );
    let slash = Root::open(Path::new("")).unwrap();
    assert_eq!(slash.path(), "/");
    assert!(slash.is_real());
    assert_eq!(slash.show("etc/hosts"), "/etc/hosts");
    let fake = sandbox.open();
    assert!(!fake.is_real());
    assert_eq!(fake.show(""), sandbox.root.display().to_string());
}

#[test]
fn names_that_are_not_plain_never_panic() {
    let sandbox = Sandbox::new();
    sandbox.mkdir("etc");
    let root = sandbox.open();
    for rel in [
        "",
        ".",
        "..",
        "/",
        "etc/..",
        "a\0b",
        "etc/\0",
        "//etc//./",
        "../../..",
    ] {
        let _ = root.file(rel, true, None);
        let _ = root.directory(rel, false, None);
        let _ = root.read(rel, true);
    }
    let err = root.file("etc/..", true, None).unwrap_err();
    assert!(
        err.message.contains("is a directory, not a file"),
        "{}",
        err.message
    );
    assert_eq!(
        root.directory("//etc//./", true, None).unwrap().rel(),
        "etc"
    );
    // A directory's entries are single names: the system would follow a
    // link on the way to "a/b", and ".." leads out.
    sandbox.mkdir("outside-dir");
    sandbox.symlink("/", "etc/up");
    let etc = root.directory("etc", true, None).unwrap();
    for name in ["up/outside-dir", "..", ".", "", "a/"] {
        let err = etc.file(name).unwrap_err();
        assert!(
            err.message.contains("is not the name of a file in"),
            "{}",
            err.message
        );
        assert!(etc.subdir(name, None).is_err());
        assert!(etc.read(name, None).is_err());
        assert!(etc.lstat(name).is_err());
        let mut lock = crate::files::Lock::named(&etc, name);
        assert!(lock.acquire(&sandbox.call).is_err());
    }
}

#[test]
fn a_directory_swapped_back_between_open_and_readlink_is_opened() {
    // The race a swapper wins: the open meets a link (refused with
    // O_NOFOLLOW), and by the readlink the directory is back. The walk
    // opens it again rather than calling it "not a directory".
    use crate::files::root::BEFORE_READ_LINK;
    let sandbox = Sandbox::new();
    sandbox.write("etc.real/hosts", b"inside\n");
    sandbox.symlink("/nowhere", "etc");
    let root = sandbox.open();
    let swaps = std::rc::Rc::new(std::cell::Cell::new(0));
    let (seen, base) = (swaps.clone(), sandbox.root.clone());
    BEFORE_READ_LINK.with(|hook| {
        *hook.borrow_mut() = Some(Box::new(move |name: &str| {
            if name == "etc" && seen.get() == 0 {
                seen.set(1);
                std::fs::rename(base.join("etc"), base.join("etc.link")).unwrap();
                std::fs::rename(base.join("etc.real"), base.join("etc")).unwrap();
            }
        }));
    });
    let target = root.file("etc/hosts", false, None);
    BEFORE_READ_LINK.with(|hook| *hook.borrow_mut() = None);
    assert_eq!(swaps.get(), 1);
    assert_eq!(target.unwrap().read(None).unwrap().unwrap().0, b"inside\n");
}

/// A tree deeper than a small stack would allow a recursion through is
/// removed whole: the removal loops over a stack of its own. (Deep enough
/// for the recursive removal to overflow the 64 KiB stack of the thread,
/// shallow enough for the open-files limit of a default shell.)
#[test]
fn a_deep_tree_is_removed_on_a_small_stack() {
    let tmp = tempfile::tempdir().unwrap();
    let mut deepest = tmp.path().join("top");
    for _ in 0..900 {
        deepest.push("d");
    }
    std::fs::create_dir_all(&deepest).unwrap();
    std::fs::write(deepest.join("leaf"), "x").unwrap();
    std::os::unix::fs::symlink("/", deepest.join("out")).unwrap();
    let dir = std::fs::File::open(tmp.path()).unwrap();
    let removed = std::thread::Builder::new()
        .stack_size(64 * 1024)
        .spawn(move || {
            use std::os::fd::AsFd;
            crate::files::sys::remove_tree(dir.as_fd(), std::ffi::OsStr::new("top"))
        })
        .unwrap()
        .join()
        .unwrap();
    removed.unwrap();
    assert!(!tmp.path().join("top").exists());
    assert!(
        std::path::Path::new("/").exists(),
        "a link is removed, not followed"
    );
}

/// `..` climbs one directory, however many are climbed and from where,
/// and stops at the root: every climb of 1 to 7 levels, odd and even,
/// from the root and from directories 1 to 3 deep, through a link read
/// by `Root::file`, a link read by `Dir::entry`, and a path with `..`
/// in it. Each directory holds a `where` file naming it, and so do the
/// directories above the root, where a climb that leaves it would land.
#[test]
fn dot_dot_climbs_one_directory_at_a_time_and_never_above_the_root() {
    let tmp = tempfile::tempdir().unwrap();
    let mut outside = tmp.path().to_owned();
    for level in 1..=8 {
        outside.push(format!("above{level}"));
        std::fs::create_dir(&outside).unwrap();
        std::fs::write(outside.join("where"), "above the root").unwrap();
    }
    let root_path = outside.join("root");
    let dirs = ["", "d1", "d1/d2", "d1/d2/d3"];
    for dir in dirs {
        std::fs::create_dir_all(root_path.join(dir)).unwrap();
        std::fs::write(root_path.join(dir).join("where"), format!("/{dir}")).unwrap();
    }
    let root = Root::open(&root_path).unwrap();
    let read = |target: crate::CallResult<crate::files::Target>| {
        let target = target.unwrap_or_else(|err| panic!("{}", err.message));
        String::from_utf8(target.read(None).unwrap().unwrap().0).unwrap()
    };
    for (depth, start) in dirs.iter().enumerate() {
        let opened = root.directory(start, false, None).unwrap();
        for climb in 1..=7 {
            let want = format!("/{}", dirs[depth.saturating_sub(climb)]);
            let up = "../".repeat(climb);
            let link = format!("up{climb}");
            std::os::unix::fs::symlink(format!("{up}where"), root_path.join(start).join(&link))
                .unwrap();
            let shown = format!("{climb} up from /{start}");
            let rel = |name: &str| [*start, name].join("/");
            assert_eq!(read(root.file(&rel(&link), true, None)), want, "{shown}");
            assert_eq!(read(opened.entry(&link)), want, "{shown}, an entry");
            assert_eq!(
                read(root.file(&rel(&format!("{up}where")), true, None)),
                want,
                "{shown}, a path"
            );
            let dir = root.directory(&rel(&up), false, None).unwrap();
            assert_eq!(format!("/{}", dir.rel()), want, "{shown}, a directory");
        }
    }
}

#[test]
fn a_root_that_is_a_file_is_refused() {
    let sandbox = Sandbox::new();
    sandbox.write("file", b"not a directory\n");
    let err = Root::open(&sandbox.path("file")).unwrap_err();
    assert!(
        err.message
            .ends_with("does not exist or is not a directory (Not a directory)"),
        "{}",
        err.message
    );
}

/// Said forbidden, not failed: the caller lacks a permission. Root reads
/// anything, so the test drops its file-system identity on a thread of
/// its own (setfsuid is per thread) where it runs as root.
#[test]
fn a_root_that_cannot_be_entered_is_forbidden() {
    let sandbox = Sandbox::new();
    let closed = sandbox.path("closed");
    std::fs::create_dir(&closed).unwrap();
    std::fs::set_permissions(&closed, std::fs::Permissions::from_mode(0o700)).unwrap();
    let as_nobody = sys::is_root();
    let err = std::thread::spawn(move || {
        if as_nobody {
            // SAFETY: setfsuid takes no pointer; it changes this thread's
            // file-system user id only.
            unsafe { libc::setfsuid(65534) };
        } else {
            std::fs::set_permissions(&closed, std::fs::Permissions::from_mode(0o000)).unwrap();
        }
        Root::open(&closed.join("sub")).unwrap_err()
    })
    .join()
    .unwrap();
    assert_eq!(err.kind, crate::error::Kind::Forbidden, "{}", err.message);
    assert!(
        err.message.contains("(Permission denied)"),
        "{}",
        err.message
    );
}

#[test]
fn an_error_on_the_way_other_than_a_missing_directory_is_no_missing_file() {
    let sandbox = Sandbox::new();
    sandbox.write("etc", b"a file\n");
    let err = sandbox.open().read("etc/hosts", true).unwrap_err();
    assert!(
        err.message.ends_with("is not a directory"),
        "{}",
        err.message
    );
    // A name the system refuses is said so, not taken for a file.
    let long = format!("{}/hosts", "x".repeat(300));
    let err = sandbox.open().read(&long, true).unwrap_err();
    assert!(
        err.message.contains("File name too long"),
        "{}",
        err.message
    );
}

#[test]
fn a_chain_of_links_is_followed_up_to_the_limit() {
    let limit = crate::files::MAX_LINKS;
    let sandbox = Sandbox::new();
    std::fs::create_dir(sandbox.path("end")).unwrap();
    sandbox.symlink("end", "l0");
    for n in 1..=limit {
        sandbox.symlink(&format!("l{}", n - 1), &format!("l{n}"));
    }
    let root = sandbox.open();
    // l{limit - 1} is `limit` links from the directory.
    assert!(root
        .directory(&format!("l{}", limit - 1), true, None)
        .is_ok());
    let err = root
        .directory(&format!("l{limit}"), true, None)
        .unwrap_err();
    assert!(
        err.message.starts_with("too many levels"),
        "{}",
        err.message
    );
}

#[test]
fn a_directory_that_cannot_be_made_says_so() {
    use std::os::fd::AsFd;
    let tmp = tempfile::tempdir().unwrap();
    let parent = sys::open_path(tmp.path().as_os_str(), sys::DIR_FLAGS).unwrap();
    let long = "d".repeat(300);
    let err = root::make_dir(parent.as_fd(), &long, Create::mode(0o755), "d…").unwrap_err();
    assert!(
        err.message.starts_with("cannot create the directory 'd…'"),
        "{}",
        err.message
    );
}

#[test]
fn a_subdirectory_swapped_in_between_open_and_readlink_is_opened() {
    // The open meets a file (ENOTDIR); by the readlink a directory is
    // there: subdir opens again rather than calling it "not a directory".
    use crate::files::root::BEFORE_READ_LINK;
    let sandbox = Sandbox::new();
    sandbox.write("etc", b"a file for now\n");
    sandbox.write("etc.real/hosts", b"inside\n");
    let top = sandbox.open().directory("", true, None).unwrap();
    let swaps = std::rc::Rc::new(std::cell::Cell::new(0));
    let (seen, base) = (swaps.clone(), sandbox.root.clone());
    BEFORE_READ_LINK.with(|hook| {
        *hook.borrow_mut() = Some(Box::new(move |name: &str| {
            if name == "etc" && seen.get() == 0 {
                seen.set(1);
                std::fs::remove_file(base.join("etc")).unwrap();
                std::fs::rename(base.join("etc.real"), base.join("etc")).unwrap();
            }
        }));
    });
    let etc = top.subdir("etc", None);
    BEFORE_READ_LINK.with(|hook| *hook.borrow_mut() = None);
    assert_eq!(swaps.get(), 1);
    assert_eq!(
        etc.unwrap().read("hosts", None).unwrap().unwrap().0,
        b"inside\n"
    );
}

#[test]
fn an_entry_the_system_cannot_look_at_is_an_error_not_absent() {
    let sandbox = Sandbox::new();
    sandbox.mkdir("etc");
    let etc = sandbox.open().directory("etc", true, None).unwrap();
    let long = "x".repeat(300);
    let err = etc.lstat(&long).unwrap_err();
    assert!(
        err.message.contains("File name too long"),
        "{}",
        err.message
    );
    let err = etc.read(&long, None).unwrap_err();
    assert!(
        err.message.contains("File name too long"),
        "{}",
        err.message
    );
}

#[test]
fn a_subdirectory_knows_its_path_below_the_root() {
    let sandbox = Sandbox::new();
    sandbox.mkdir("etc/ssh");
    let top = sandbox.open().directory("", true, None).unwrap();
    let etc = top.subdir("etc", None).unwrap();
    let ssh = etc.subdir("ssh", None).unwrap();
    assert_eq!((top.rel(), etc.rel(), ssh.rel()), ("", "etc", "etc/ssh"));
    assert_eq!(
        ssh.show("x"),
        sandbox.path("etc/ssh/x").display().to_string()
    );
}

#[test]
fn a_link_target_of_any_length_is_read_whole() {
    use std::os::fd::AsFd;
    let sandbox = Sandbox::new();
    sandbox.mkdir("d");
    // Lengths around the first buffer (256 bytes), and the longest a
    // path may be.
    for len in [255, 256, 257, 300, 4095] {
        let target = "t".repeat(len);
        let name = format!("l{len}");
        sandbox.symlink(&target, &format!("d/{name}"));
        let dir = sys::open_path(sandbox.path("d").as_os_str(), sys::DIR_FLAGS).unwrap();
        let read = sys::read_link_at(dir.as_fd(), name.as_ref()).unwrap();
        assert_eq!(read.len(), len);
        assert_eq!(read, target.as_bytes());
    }
}
