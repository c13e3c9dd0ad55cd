//! Mount points below a fake root, made in a mount namespace of the
//! test's own (never in the machine's): a bind mount of a directory
//! outside the root, or of one on the same file system, is never crossed
//! by a removal, and what is mounted on a path is never changed through
//! it unasked. The file provider refuses to remove a tree that holds a
//! mount point, before anything goes, and to replace, remove or change a
//! path something is mounted on (its mode and owner only with `force`);
//! and the toolkit's `remove_tree` never crosses a mount, whoever calls
//! it. The user provider's `managehome` keeps a home whole that is a
//! mount point or holds one. An edit of several files (the account
//! files) that would rename over a mount point writes none of them; a
//! preview (`ralsh -n`) of an edit that would rename over one (a file,
//! or the journal) refuses as the change does, for an edit of one file
//! too. The mount provider reads what the namespace has mounted below
//! the root, and mounts, unmounts and remounts there.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use ral::sdk::files::Root;

use crate::host::Test;
use crate::support::{run, tree_snapshot, Run, Sandbox};
use crate::tests;

/// This module's tests and what each needs.
pub fn tests() -> Vec<Test> {
    let mut all = tests![[MountNamespace]
        file_never_removes_or_changes_through_a_mount_point,
        remove_tree_never_crosses_a_mount,
        an_edit_of_several_files_never_half_replaces_a_mount_point,
        a_preview_refuses_to_replace_a_mount_point_as_the_change_does,
        an_edit_of_one_file_stops_at_a_journal_that_is_a_mount_point,
        mount_reads_and_changes_what_is_mounted_below_a_root,
        a_mount_that_would_reach_other_namespaces_is_refused,
    ];
    all.extend(tests![[Root, MountNamespace]
        managehome_keeps_a_home_that_is_or_holds_a_mount_point,
    ]);
    all
}

/// Makes the namespace's mounts private (none reaches the machine's),
/// runs the setup given as the first argument (with `set -e`), then each
/// further argument as a command line, each after a `== ` line.
const IN_NAMESPACE: &str = r#"
set -e
mount --make-rprivate /
eval "$1"
shift
set +e
for line in "$@"; do
    echo "== $line"
    sh -c "$line" 2>&1 || echo "exit status $?"
done
"#;

/// Runs `setup` and then `lines` in a mount namespace of their own
/// (`unshare -m` as root, where files of other owners are needed; else
/// `unshare -rm`, in a user namespace too), ralsh's cache that of
/// `sandbox`; returns each line's output.
fn in_namespace(sandbox: &Sandbox, as_root: bool, setup: &str, lines: &[String]) -> Vec<String> {
    let mut command = Command::new("unshare");
    command
        .arg(if as_root { "-m" } else { "-rm" })
        .args(["sh", "-c", IN_NAMESPACE, "sh", setup])
        .args(lines)
        .env("HOME", sandbox.cache.path())
        .env("XDG_CACHE_HOME", sandbox.cache.path());
    let out = run(&mut command);
    let out = out.expect(0);
    let sections: Vec<String> = out.stdout.split("== ").skip(1).map(str::to_owned).collect();
    assert_eq!(sections.len(), lines.len(), "{}", out.stdout);
    sections
}

/// `ralsh --root ROOT ARGS` as a command line for [`in_namespace`].
fn ralsh(sandbox: &Sandbox, args: &str) -> String {
    format!(
        "{} --root '{}' {args}",
        crate::support::ralsh_bin(),
        sandbox.root().display()
    )
}

#[track_caller]
fn has(section: &str, text: &str) {
    assert!(section.contains(text), "lacks {text:?}:\n{section}");
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o7777
}

fn file_never_removes_or_changes_through_a_mount_point() {
    let sandbox = Sandbox::new();
    let outside = tempfile::tempdir().unwrap();
    let out = outside.path();
    sandbox.write("srv/x/keep", "mine\n");
    std::fs::create_dir(sandbox.root().join("srv/x/sub")).unwrap();
    std::fs::create_dir_all(out.join("dir")).unwrap();
    std::fs::write(out.join("dir/data"), "outside\n").unwrap();
    sandbox.write("srv/f", "");
    std::fs::write(out.join("file"), "secret\n").unwrap();
    std::fs::set_permissions(out.join("file"), PermissionsExt::from_mode(0o600)).unwrap();
    std::fs::create_dir(sandbox.root().join("srv/d")).unwrap();
    std::fs::create_dir(out.join("d")).unwrap();
    std::fs::set_permissions(out.join("d"), PermissionsExt::from_mode(0o755)).unwrap();
    let (root, o) = (sandbox.root().display(), out.display());
    let setup = format!(
        "mount --bind '{o}/dir' '{root}/srv/x/sub'\n\
         mount --bind '{o}/file' '{root}/srv/f'\n\
         mount --bind '{o}/d' '{root}/srv/d'"
    );
    let before = tree_snapshot(sandbox.root());
    let lines = [
        ralsh(&sandbox, "file /srv/x ensure=absent force=true"),
        ralsh(&sandbox, "-n file /srv/x ensure=absent force=true"),
        ralsh(&sandbox, "file /srv/x ensure=file content=x force=true"),
        ralsh(&sandbox, "file /srv/x/sub ensure=absent force=true"),
        ralsh(&sandbox, "file /srv/f mode=0644"),
        ralsh(&sandbox, "file /srv/f content=new"),
        ralsh(&sandbox, "file /srv/f ensure=absent"),
        ralsh(&sandbox, "file /srv/d mode=0700"),
        ralsh(&sandbox, "file /srv/d ensure=link target=/srv/x force=true"),
        format!("stat -c %a '{o}/file' '{o}/d'"),
        ralsh(&sandbox, "file /srv/f mode=0640 force=true"),
        ralsh(&sandbox, "file /srv/d ensure=directory"),
    ];
    let sections = in_namespace(&sandbox, false, &setup, &lines);
    let holds = "'/srv/x' holds the mount point '/srv/x/sub': refusing to remove anything of it, \
                 as a removal never crosses into another mount; unmount it first";
    has(&sections[0], holds);
    has(&sections[1], holds);
    has(&sections[2], holds);
    has(
        &sections[3],
        "'/srv/x/sub' is a mount point (something is mounted on it, maybe from outside the \
         root): refusing to remove it; unmount it first",
    );
    has(
        &sections[4],
        "'/srv/f' is a mount point (something is mounted on it, maybe from outside the root), \
         whose mode and owner are those of what is mounted there: refusing to change them; set \
         force=true to change them in place",
    );
    has(
        &sections[5],
        "'/srv/f' is a mount point (something is mounted on it, maybe from outside the root): \
         refusing to replace it with a new content or target",
    );
    has(&sections[6], "'/srv/f' is a mount point");
    has(&sections[6], "refusing to remove it");
    has(&sections[7], "'/srv/d' is a mount point");
    has(&sections[7], "set force=true to change them in place");
    has(&sections[8], "refusing to replace it");
    for (at, section) in sections[..9].iter().enumerate() {
        has(section, "exit status");
        assert!(!section.contains("->"), "{at} changed nothing:\n{section}");
    }
    assert!(sections[9].ends_with("\n600\n755\n"), "{}", sections[9]);
    has(&sections[10], "mode: '0600' -> '0640'");
    // A mount point asked to be what it is needs nothing.
    assert!(!sections[11].contains("exit status"), "{}", sections[11]);
    assert!(!sections[11].contains("->"), "{}", sections[11]);
    // The namespace is gone: what is left is what was there.
    assert_eq!(std::fs::read(out.join("dir/data")).unwrap(), b"outside\n");
    assert_eq!(std::fs::read(out.join("file")).unwrap(), b"secret\n");
    assert_eq!(mode(&out.join("file")), 0o640, "changed in place, forced");
    assert_eq!(mode(&out.join("d")), 0o755);
    assert_eq!(
        before,
        tree_snapshot(sandbox.root()),
        "nothing of the root went"
    );
}

/// The variable that tells this test it runs again inside the namespace,
/// with the directory of its trees.
const INSIDE: &str = "RAL_TEST_REMOVE_TREE_INSIDE";

/// The toolkit's own removal, called directly (no provider's check
/// before it): this test binary runs the test again in a namespace where
/// `top/sub` is a bind mount of a directory outside, and there
/// `remove_tree` refuses `top` whole and `sub` itself.
fn remove_tree_never_crosses_a_mount() {
    if let Some(dir) = std::env::var_os(INSIDE) {
        return remove_tree_inside(Path::new(&dir));
    }
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path();
    std::fs::create_dir_all(base.join("root/top/a/sub")).unwrap();
    std::fs::write(base.join("root/top/a/file"), "mine\n").unwrap();
    std::fs::write(base.join("root/top/z"), "mine too\n").unwrap();
    std::fs::create_dir(base.join("outside")).unwrap();
    std::fs::write(base.join("outside/data"), "outside\n").unwrap();
    let before = tree_snapshot(base);
    let mut command = Command::new("unshare");
    command
        .args(["-rm", "sh", "-c"])
        .arg(
            "set -e; mount --make-rprivate /; mount --bind \"$1/outside\" \"$1/root/top/a/sub\"; \
             shift; exec \"$@\"",
        )
        .arg("sh")
        .arg(base)
        .arg(std::env::current_exe().unwrap())
        .args(["--exact", "mounts::remove_tree_never_crosses_a_mount"])
        .env(INSIDE, base);
    let inside: Run = run(&mut command);
    inside.expect(0).stdout_has("1 passed");
    assert_eq!(before, tree_snapshot(base), "nothing went");
}

fn remove_tree_inside(base: &Path) {
    let root = Root::open(&base.join("root")).unwrap();
    let dir = root.directory("", false, None).unwrap();
    let err = dir.remove_tree("top").unwrap_err();
    assert_eq!(
        err.to_string(),
        "it holds the mount point 'a/sub', and a removal never crosses into another mount: \
         nothing was removed"
    );
    let a = root.directory("top/a", false, None).unwrap();
    let err = a.remove_tree("sub").unwrap_err();
    assert_eq!(
        err.to_string(),
        "it is a mount point, and a removal never crosses into another mount: nothing was \
         removed"
    );
    assert_eq!(
        std::fs::read(base.join("root/top/a/sub/data")).unwrap(),
        b"outside\n"
    );
    assert!(base.join("root/top/z").is_file());
}

/// Gives `path` and everything below it (links themselves) to `uid`.
fn chown_tree(path: &Path, uid: u32) {
    std::os::unix::fs::lchown(path, Some(uid), Some(uid)).unwrap();
    if std::fs::symlink_metadata(path).unwrap().is_dir() {
        for entry in std::fs::read_dir(path).unwrap() {
            chown_tree(&entry.unwrap().path(), uid);
        }
    }
}

/// A mount point in a home, of a directory on the same file system (so
/// of the same device number), or the home itself a mount point (a bind
/// mount, a tmpfs): the home is kept whole, what is mounted there is
/// never removed, and the warning says so before anything goes.
fn managehome_keeps_a_home_that_is_or_holds_a_mount_point() {
    let sandbox = Sandbox::new();
    sandbox.write_accounts();
    let users = [
        ("bob", "4242"),
        ("carol", "4243"),
        ("dave", "4244"),
        ("erin", "4245"),
    ];
    for (user, uid) in users {
        sandbox
            .ralsh(&["user", user, &format!("uid={uid}")])
            .expect(0);
    }
    let root = sandbox.root();
    sandbox.write("home/bob/notes", "bob's\n");
    std::fs::create_dir(root.join("home/bob/proj")).unwrap();
    sandbox.write("srv/shared/data", "shared\n");
    sandbox.write("srv/carol/notes", "carol's\n");
    std::fs::create_dir(root.join("home/carol")).unwrap();
    std::fs::create_dir(root.join("home/dave")).unwrap();
    // erin's home holds a file that is a mount point (her own file,
    // bound over one of hers): kept whole, none of it removed first.
    sandbox.write("home/erin/a-notes", "erin's\n");
    sandbox.write("home/erin/m", "");
    sandbox.write("srv/erin-file", "bound\n");
    chown_tree(&root.join("home/erin"), 4245);
    chown_tree(&root.join("srv/erin-file"), 4245);
    chown_tree(&root.join("home/bob"), 4242);
    chown_tree(&root.join("srv/shared"), 4242);
    chown_tree(&root.join("home/carol"), 4243);
    chown_tree(&root.join("srv/carol"), 4243);
    chown_tree(&root.join("home/dave"), 4244);
    let r = root.display();
    let setup = format!(
        "mount --bind '{r}/srv/shared' '{r}/home/bob/proj'\n\
         mount --bind '{r}/srv/carol' '{r}/home/carol'\n\
         mount --bind '{r}/srv/erin-file' '{r}/home/erin/m'\n\
         mount -t tmpfs tmpfs '{r}/home/dave'\n\
         echo \"dave's\" >'{r}/home/dave/notes'\n\
         chown -R 4244:4244 '{r}/home/dave'"
    );
    let before = (
        tree_snapshot(&root.join("home")),
        tree_snapshot(&root.join("srv")),
    );
    let lines = [
        ralsh(&sandbox, "-n user bob ensure=absent managehome=true"),
        ralsh(&sandbox, "user bob ensure=absent managehome=true"),
        ralsh(&sandbox, "user carol ensure=absent managehome=true"),
        ralsh(&sandbox, "user dave ensure=absent managehome=true"),
        ralsh(&sandbox, "user erin ensure=absent managehome=true"),
        format!("ls -A '{r}/home/bob/proj' '{r}/home/carol' '{r}/home/dave'"),
    ];
    let sections = in_namespace(&sandbox, true, &setup, &lines);
    let held = format!(
        "it holds '{r}/home/bob/proj', a mount point (something is mounted on it, maybe from \
         outside the root), and a removal never crosses into another mount"
    );
    has(
        &sections[0],
        &format!("bob: deleting: the home directory '{r}/home/bob' would be kept: {held}\n"),
    );
    has(
        &sections[1],
        &format!("bob: deleting: the home directory '{r}/home/bob' was kept: {held}\n"),
    );
    for (at, user) in [(2, "carol"), (3, "dave")] {
        has(
            &sections[at],
            &format!(
                "{user}: deleting: the home directory '{r}/home/{user}' was kept: it is a mount \
                 point (something is mounted on it, maybe from outside the root), and a removal \
                 never crosses into another mount\n"
            ),
        );
    }
    for section in &sections[1..5] {
        has(section, "ensure: 'present' -> 'absent'");
    }
    has(
        &sections[4],
        &format!(
            "erin: deleting: the home directory '{r}/home/erin' was kept: it holds \
             '{r}/home/erin/m', a mount point"
        ),
    );
    has(&sections[5], "home/dave:\nnotes\n");
    // The namespace is gone: what is left is what was there.
    let after = (
        tree_snapshot(&root.join("home")),
        tree_snapshot(&root.join("srv")),
    );
    assert_eq!(before, after, "nothing of the homes or of /srv went");
    let passwd = sandbox.read("etc/passwd");
    for (user, _) in users {
        assert!(!passwd.contains(&format!("\n{user}:")), "{passwd}");
    }
}

/// The account files are replaced together; one of them a bind mount
/// (a container's, of a file outside the root): the rename over it would
/// fail after the others were replaced, so none is, the mount point is
/// named, and no temporary file or journal stays. The file outside is
/// never written, nor the hosts file mounted the same way.
fn an_edit_of_several_files_never_half_replaces_a_mount_point() {
    let sandbox = Sandbox::new();
    sandbox.write_accounts();
    sandbox.write("etc/hosts", "");
    let outside = tempfile::tempdir().unwrap();
    let o = outside.path();
    std::fs::write(o.join("passwd"), "root:x:0:0:root:/root:/bin/sh\n").unwrap();
    std::fs::write(o.join("hosts"), "127.0.0.1 localhost\n").unwrap();
    let before = tree_snapshot(sandbox.root());
    let outside_before = tree_snapshot(o);
    let (r, od) = (sandbox.root().display(), o.display());
    let setup = format!(
        "mount --bind '{od}/passwd' '{r}/etc/passwd'\n\
         mount --bind '{od}/hosts' '{r}/etc/hosts'"
    );
    let lines = [
        ralsh(&sandbox, "user bob uid=4000"),
        ralsh(&sandbox, "host web ip=10.0.0.1"),
    ];
    let sections = in_namespace(&sandbox, false, &setup, &lines);
    has(
        &sections[0],
        &format!(
            "cannot replace '{r}/etc/passwd': it is a mount point (something is mounted on it, \
             maybe from outside the root), which a file is never renamed over; nothing was \
             written"
        ),
    );
    has(&sections[1], &format!("cannot replace '{r}/etc/hosts'"));
    for section in &sections {
        has(section, "exit status");
    }
    // Lock files may stay (as after any edit); nothing else is new.
    let mut after = tree_snapshot(sandbox.root());
    after.retain(|path, _| !path.to_string_lossy().ends_with("lock"));
    assert_eq!(before, after, "no file of the root changed or stayed");
    assert_eq!(outside_before, tree_snapshot(o), "nothing outside written");
}

/// `ralsh -n` says what the change would: that a file
/// (group, hosts, fstab) or the accounts' journal something is mounted
/// on cannot be replaced, not that it would change.
fn a_preview_refuses_to_replace_a_mount_point_as_the_change_does() {
    let sandbox = Sandbox::new();
    sandbox.write_accounts();
    sandbox.write("etc/hosts", "");
    sandbox.write("etc/fstab", "");
    sandbox.write("etc/.pwd.lock.ral-journal", "");
    let outside = tempfile::tempdir().unwrap();
    let o = outside.path();
    std::fs::write(o.join("file"), "root:x:0:\n").unwrap();
    let before = tree_snapshot(sandbox.root());
    let outside_before = tree_snapshot(o);
    let (r, od) = (sandbox.root().display(), o.display());
    let setup = ["group", "hosts", "fstab", ".pwd.lock.ral-journal"]
        .map(|name| format!("mount --bind '{od}/file' '{r}/etc/{name}'"))
        .join("\n");
    let lines = [
        ralsh(&sandbox, "-n user bob ensure=present"),
        ralsh(&sandbox, "-n host web ip=10.0.0.1"),
        ralsh(&sandbox, "-n mount /srv device=/dev/sdb1 fstype=ext4"),
        format!(
            "umount '{r}/etc/group' && {}",
            ralsh(&sandbox, "-n user bob ensure=present")
        ),
    ];
    let sections = in_namespace(&sandbox, false, &setup, &lines);
    let refused = |name: &str| {
        format!(
            "cannot replace '{r}/etc/{name}': it is a mount point (something is mounted on it, \
             maybe from outside the root), which a file is never renamed over; nothing was \
             written"
        )
    };
    for (section, name) in sections
        .iter()
        .zip(["group", "hosts", "fstab", ".pwd.lock.ral-journal"])
    {
        has(section, &refused(name));
        has(section, "exit status");
        assert!(!section.contains("would change"), "{section}");
    }
    // Lock files may stay; nothing else is new, nothing changed.
    let mut after = tree_snapshot(sandbox.root());
    after.retain(|path, _| !path.to_string_lossy().ends_with("lock"));
    assert_eq!(before, after, "no file of the root changed or stayed");
    assert_eq!(outside_before, tree_snapshot(o), "nothing outside written");
}

/// An edit of one file renames no journal into place, but the lock's
/// journal is looked at when the edit begins (one left by a crash is
/// finished), and one that is a mount point cannot be removed: the change
/// stops, and so does its preview; a preview of no change says so.
fn an_edit_of_one_file_stops_at_a_journal_that_is_a_mount_point() {
    let sandbox = Sandbox::new();
    sandbox.write("etc/hosts", "10.0.0.2\tdb\n");
    sandbox.write("etc/.hosts.ral-lock.ral-journal", "");
    let outside = tempfile::tempdir().unwrap();
    let o = outside.path();
    std::fs::write(o.join("file"), "").unwrap();
    let (r, od) = (sandbox.root().display(), o.display());
    let setup = format!("mount --bind '{od}/file' '{r}/etc/.hosts.ral-lock.ral-journal'");
    let lines = [
        ralsh(&sandbox, "-n host web ip=10.0.0.1"),
        ralsh(&sandbox, "host web ip=10.0.0.1"),
        ralsh(&sandbox, "-n host db ip=10.0.0.2"),
    ];
    let sections = in_namespace(&sandbox, false, &setup, &lines);
    has(
        &sections[0],
        &format!("cannot replace '{r}/etc/.hosts.ral-lock.ral-journal': it is a mount point"),
    );
    for section in &sections[..2] {
        has(section, "exit status");
    }
    has(&sections[1], "cannot remove the journal");
    assert!(!sections[2].contains("exit status"), "{}", sections[2]);
    assert_eq!(
        std::fs::read_to_string(sandbox.root().join("etc/hosts")).unwrap(),
        "10.0.0.2\tdb\n"
    );
}

/// In a namespace of its own, below a fake root: a tmpfs and a bind mount
/// without entries read as ghosts, an entry mounted as `mounted`, one not
/// mounted as `unmounted`; `ensure: mounted` mounts, a new option
/// remounts, `unmounted` unmounts, each seen in the namespace's
/// mountinfo; a manifest that does not name the ghosts leaves them
/// mounted; a mount that fails says why and leaves fstab as it was.
fn mount_reads_and_changes_what_is_mounted_below_a_root() {
    let sandbox = Sandbox::new();
    let fstab = "tmpfs /mnt/a tmpfs size=1m 0 0\ntmpfs /mnt/b tmpfs size=2m 0 0\n";
    sandbox.write("etc/fstab", fstab);
    for dir in [
        "mnt/a",
        "mnt/b",
        "mnt/c",
        "mnt/ghost",
        "mnt/bound",
        "mnt/bad",
    ] {
        std::fs::create_dir_all(sandbox.root().join(dir)).unwrap();
    }
    std::os::unix::fs::symlink("mnt", sandbox.root().join("lnk")).unwrap();
    let outside = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(sandbox.root()).unwrap();
    let (r, o) = (root.display(), outside.path().display());
    let setup = format!(
        "mount -t tmpfs -o size=2m tmpfs '{r}/mnt/b'\n\
         mount -t tmpfs ghost '{r}/mnt/ghost'\n\
         mount --bind '{o}' '{r}/mnt/bound'"
    );
    let manifest = outside.path().join("m.yaml");
    std::fs::write(
        &manifest,
        "mount:\n  /mnt/c: {ensure: mounted, device: tmpfs, fstype: tmpfs}\n",
    )
    .unwrap();
    // The mount points of the namespace below the root, with their
    // options.
    let mounted = format!("grep ' {r}/' /proc/self/mountinfo | cut -d' ' -f5,6");
    let lines = [
        ralsh(&sandbox, "-j mount"),
        ralsh(&sandbox, "mount /mnt/a ensure=mounted"),
        mounted.clone(),
        ralsh(&sandbox, "mount /mnt/b options=size=2m,ro"),
        mounted.clone(),
        ralsh(&sandbox, "mount /mnt/b ensure=unmounted"),
        mounted.clone(),
        format!(
            "{} apply --root '{r}' '{}'",
            env!("CARGO_BIN_EXE_ral"),
            manifest.display()
        ),
        mounted.clone(),
        ralsh(
            &sandbox,
            "mount /mnt/bad ensure=mounted device=nothing fstype=nosuchfs",
        ),
        mounted.clone(),
        ralsh(&sandbox, "mount / ensure=mounted device=tmpfs fstype=tmpfs"),
        ralsh(
            &sandbox,
            "mount /lnk/a ensure=mounted device=tmpfs fstype=tmpfs",
        ),
    ];
    let sections = in_namespace(&sandbox, false, &setup, &lines);
    let listed: serde_json::Value =
        serde_json::from_str(sections[0].split_once('\n').unwrap().1).unwrap();
    let states: Vec<(&str, &str)> = listed["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["name"].as_str().unwrap(), r["ensure"].as_str().unwrap()))
        .collect();
    assert_eq!(
        states,
        [
            ("/mnt/a", "unmounted"),
            ("/mnt/b", "mounted"),
            ("/mnt/ghost", "ghost"),
            ("/mnt/bound", "ghost"),
        ],
        "only the mounts below the root, as its paths: {}",
        sections[0]
    );
    has(&sections[1], "ensure  => 'mounted',");
    has(&sections[1], "ensure: 'unmounted' -> 'mounted'");
    has(&sections[2], &format!("{r}/mnt/a rw,"));
    has(&sections[3], "options: ['size=2m'] -> ['size=2m', 'ro']");
    has(&sections[4], &format!("{r}/mnt/b ro,"));
    has(&sections[5], "ensure: 'mounted' -> 'unmounted'");
    assert!(!sections[6].contains("/mnt/b "), "{}", sections[6]);
    assert!(!sections[7].contains("exit status"), "{}", sections[7]);
    for point in ["a", "c", "ghost", "bound"] {
        has(&sections[8], &format!("{r}/mnt/{point} "));
    }
    has(
        &sections[9],
        &format!("mount -t nosuchfs -o defaults -- nothing {r}/mnt/bad failed (exit status "),
    );
    has(&sections[9], "fstab was left as it was");
    has(&sections[9], "exit status 2");
    assert!(!sections[10].contains("/mnt/bad"), "{}", sections[10]);
    // Mounting on / below the root would cover the root itself.
    has(
        &sections[11],
        "refusing to mount or unmount '/' below the root",
    );
    // Through a link inside the root it would be mounted under another
    // name, and read back as unmounted: refused.
    has(
        &sections[12],
        "leads through a symbolic link to '/mnt/a' below the root",
    );
    assert_eq!(
        sandbox.read("etc/fstab"),
        "tmpfs /mnt/a tmpfs size=1m 0 0\ntmpfs /mnt/b tmpfs size=2m,ro 0 0\n\
         tmpfs\t/mnt/c\ttmpfs\tdefaults\t0\t0\n",
        "the failed mount added no entry"
    );
}

/// In a namespace of its own, ral still mounts nothing that would show
/// elsewhere: a mount point on a shared mount below the root (a peer
/// bound elsewhere stands for the machine's namespace) is refused, and
/// one on a private mount is mounted.
fn a_mount_that_would_reach_other_namespaces_is_refused() {
    let root = tempfile::tempdir().unwrap();
    let peer = tempfile::tempdir().unwrap();
    let script = r#"
set -e
mount -t tmpfs rt "$R"
mkdir -p "$R/etc" "$R/mnt" "$R/ok"
: > "$R/etc/fstab"
mount -t tmpfs t2 "$R/mnt"
mount --make-shared "$R/mnt"
mkdir "$R/mnt/x"
mount --bind "$R/mnt" "$P"
"$RALSH" --root "$R" mount /mnt/x ensure=mounted device=tmpfs fstype=tmpfs || echo "refused $?"
echo "peer sees: $(grep -c " $P/x " /proc/self/mountinfo || true)"
"$RALSH" --root "$R" mount /ok ensure=mounted device=tmpfs fstype=tmpfs >/dev/null
echo "ok: $(grep -c " $R/ok " /proc/self/mountinfo)"
"#;
    let out = run(Command::new("unshare")
        .args(["-rm", "--propagation", "private", "sh", "-c", script])
        .env("R", root.path())
        .env("P", peer.path())
        .env("RALSH", crate::support::ralsh_bin()));
    let out = out.expect(0);
    assert!(
        out.stderr.contains("is shared with other mount namespaces"),
        "{out:?}"
    );
    assert!(
        out.stdout.contains("refused 2\npeer sees: 0\nok: 1\n"),
        "{out:?}"
    );
}
