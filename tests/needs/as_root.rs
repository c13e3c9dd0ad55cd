//! Tests that need root, which a fresh machine's user may not be: a cache
//! directory given to another user (chown), a manifest of bundled
//! resources that sets a file's owner, useradd -R (it chroots) beside
//! ralsh on one root, homes holding files of several owners, and pwck
//! and grpck -R (they chroot) on what the user and group types write,
//! the owners of account files they make new, and an exec run as another
//! user (its ids, groups and home; ordered after that user).

use std::collections::BTreeSet;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::host::Test;
use crate::support::{names_in, run, shadow_tools_accept, tree_snapshot, Sandbox};
use crate::tests;

/// This module's tests and what each needs.
pub fn tests() -> Vec<Test> {
    tests![[Root]
        a_temporary_cache_directory_another_user_owns_is_not_used,
        an_exec_s_command_runs_with_its_user_s_ids_and_home,
        an_exec_runs_after_the_user_and_the_directory_it_names,
        a_manifest_of_bundled_resources_converges_and_the_next_plan_is_empty,
        ralsh_and_useradd_side_by_side_lose_nothing,
        a_change_of_owner_keeps_setuid_and_file_capabilities,
        managehome_keeps_a_home_that_holds_a_file_of_another_owner,
        managehome_on_creation_never_gives_away_a_directory_that_exists,
        what_ral_writes_to_the_account_files_pwck_and_grpck_accept,
        account_files_made_new_get_the_owners_and_modes_shadow_utils_gives,
        a_directory_made_gets_the_user_or_group_asked_alone,
        as_another_user_a_change_of_owner_or_group_is_refused,
    ]
}

/// chown(2) clears setuid, setgid and file capabilities: a change of
/// owner alone keeps them, and a hard-linked file's owner is never
/// changed in place.
fn a_change_of_owner_keeps_setuid_and_file_capabilities() {
    let sandbox = Sandbox::new();
    sandbox.write(
        "etc/passwd",
        "root:x:0:0::/root:/bin/sh\nsvc:x:4242:4242::/:/bin/sh\n",
    );
    sandbox.write("etc/group", "root:x:0:\nsvc:x:4242:\n");
    sandbox.write("usr/bin/tool", "#!/bin/sh\n");
    let tool = sandbox.root().join("usr/bin/tool");
    std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o6755)).unwrap();
    // cap_net_raw+ep, as setcap(8) writes it (VFS_CAP_REVISION_2).
    let capability: [u8; 20] = [
        0x01, 0x00, 0x00, 0x02, 0x00, 0x20, 0x00, 0x00, 0x00, 0x20, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00,
    ];
    let c_path = std::ffi::CString::new(tool.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: the path and the attribute name are NUL-terminated, and the
    // value is valid for its length, for the whole call.
    let set = unsafe {
        libc::setxattr(
            c_path.as_ptr(),
            c"security.capability".as_ptr(),
            capability.as_ptr().cast(),
            capability.len(),
            0,
        )
    };
    assert_eq!(set, 0, "setxattr: {}", std::io::Error::last_os_error());
    sandbox
        .ralsh(&["file", "/usr/bin/tool", "owner=svc", "group=svc"])
        .expect(0)
        .stdout_has("owner: 'root' -> 'svc'")
        .stdout_has("mode     => '6755'");
    let meta = std::fs::metadata(&tool).unwrap();
    assert_eq!((meta.uid(), meta.gid()), (4242, 4242));
    assert_eq!(meta.mode() & 0o7777, 0o6755, "setuid and setgid kept");
    let mut read = [0u8; 64];
    // SAFETY: as above; `read` has room for its length.
    let got = unsafe {
        libc::getxattr(
            c_path.as_ptr(),
            c"security.capability".as_ptr(),
            read.as_mut_ptr().cast(),
            read.len(),
        )
    };
    assert_eq!(
        got,
        20,
        "capabilities kept: {}",
        std::io::Error::last_os_error()
    );
    // A plan of the same is settled, the bits and capabilities too.
    let manifest = sandbox.root().join("m.yaml");
    std::fs::write(
        &manifest,
        "file:\n  /usr/bin/tool: {owner: svc, group: svc, mode: '6755'}\n",
    )
    .unwrap();
    run(&mut sandbox.ral_command("plan", &[manifest.to_str().unwrap()]))
        .expect(0)
        .stdout_has("0 to change");
    // A hard link to it: its owner is not changed in place.
    std::fs::hard_link(&tool, sandbox.root().join("usr/bin/alias")).unwrap();
    sandbox
        .ralsh(&["file", "/usr/bin/alias", "owner=root"])
        .expect(2)
        .stderr_has("has 2 hard links");
    assert_eq!(std::fs::metadata(&tool).unwrap().uid(), 4242);
}

fn a_temporary_cache_directory_another_user_owns_is_not_used() {
    // The issue's case: another user made TMPDIR/ral-UID first (here:
    // nobody, mode 0755). Root could write there all the same; it must
    // not, and the run works from a fresh private directory.
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    let sandbox = Sandbox::new();
    sandbox.write("etc/hosts", "10.0.0.1 db\n");
    let tmp = tempfile::tempdir().unwrap();
    let shared = tmp.path().join(format!("ral-{uid}"));
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::os::unix::fs::chown(&shared, Some(65534), Some(65534)).unwrap();
    let mut command = sandbox.command();
    command
        .env_remove("HOME")
        .env_remove("XDG_CACHE_HOME")
        .env("TMPDIR", tmp.path())
        .arg("host");
    let run = run(&mut command);
    run.expect(0).stdout_has("host::etc_hosts { 'db':");
    run.stderr_has(&format!(
        "not using {}: not a private directory of this user",
        shared.display()
    ));
    assert_eq!(
        std::fs::read_dir(&shared).unwrap().count(),
        0,
        "nothing written there"
    );
    let meta = std::fs::metadata(&shared).unwrap();
    assert_eq!(
        (meta.uid(), meta.mode() & 0o7777),
        (65534, 0o755),
        "left as it was"
    );
    let left: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(
        left,
        [shared.file_name().unwrap()],
        "the run's directory is gone"
    );
}

const MANIFEST: &str = "\
group:
  devs: {gid: 2000}
user:
  carol: {uid: 1500, gid: 2000, home: /home/carol, shell: /bin/bash, groups: [devs]}
file:
  /srv/app/app.ini:
    content: \"port = 80\\n\"
    mode: \"0640\"
    owner: carol
    group: devs
  /srv/app: {ensure: directory, mode: \"0750\"}
host:
  db.internal: {ip: 10.0.0.5, host_aliases: [db]}
mount:
  /data: {device: LABEL=data, fstype: ext4}
";

fn a_manifest_of_bundled_resources_converges_and_the_next_plan_is_empty() {
    let sandbox = Sandbox::seeded();
    let manifests = tempfile::tempdir().unwrap();
    let manifest: PathBuf = manifests.path().join("site.yaml");
    std::fs::write(&manifest, MANIFEST).unwrap();
    let m = manifest.to_str().unwrap();
    let before = tree_snapshot(sandbox.root());

    run(&mut sandbox.ral_command("plan", &[m]))
        .expect(0)
        .stdout_has("+ file[/srv/app/app.ini] (waits for ")
        .stdout_has("Plan: 6 to create, 0 to change, 0 to remove; 0 unchanged.");
    let plan_left = tree_snapshot(sandbox.root());
    assert_eq!(before, plan_left, "ral plan changed the root");

    run(&mut sandbox.ral_command("apply", &["--detailed-exitcodes", m]))
        .expect(2)
        .stdout_has("Apply complete: 6 created; 0 unchanged (");
    run(&mut sandbox.ral_command("plan", &["--detailed-exitcodes", m]))
        .expect(0)
        .stdout_has("Plan: 0 to create, 0 to change, 0 to remove; 6 unchanged.");

    let line_of = |file: &str, start: &str| -> String {
        sandbox
            .read(file)
            .lines()
            .find(|line| line.starts_with(start))
            .unwrap_or_else(|| panic!("{file} has no line starting {start:?}"))
            .to_owned()
    };
    assert_eq!(
        line_of("etc/passwd", "carol:"),
        "carol:x:1500:2000::/home/carol:/bin/bash"
    );
    assert_eq!(line_of("etc/group", "devs:"), "devs:x:2000:carol");
    assert!(line_of("etc/shadow", "carol:").starts_with("carol:"));
    let hosts: Vec<String> = line_of("etc/hosts", "10.0.0.5")
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    assert_eq!(hosts, ["10.0.0.5", "db.internal", "db"]);
    let mount: Vec<String> = line_of("etc/fstab", "LABEL=data")
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    assert_eq!(mount, ["LABEL=data", "/data", "ext4", "defaults", "0", "0"]);
    assert_eq!(sandbox.read("srv/app/app.ini"), "port = 80\n");
    let ini = std::fs::metadata(sandbox.root().join("srv/app/app.ini")).unwrap();
    assert_eq!(ini.mode() & 0o7777, 0o640);
    assert_eq!((ini.uid(), ini.gid()), (1500, 2000));
    let dir = std::fs::metadata(sandbox.root().join("srv/app")).unwrap();
    assert!(dir.is_dir());
    assert_eq!(dir.mode() & 0o7777, 0o750);

    // Nothing but what the manifest names changed. The empty lock files
    // the providers take (as useradd leaves etc/.pwd.lock) stay by design.
    let after = tree_snapshot(sandbox.root());
    // The state store is ral's own record, beside what it manages.
    let is_lock = |path: &String| {
        path.ends_with(".ral-lock") || path == "etc/.pwd.lock" || path.starts_with("var/lib/ral")
    };
    let changed: BTreeSet<String> = before
        .keys()
        .chain(after.keys())
        .filter(|path| before.get(*path) != after.get(*path))
        .map(|path| path.display().to_string())
        .filter(|path| !is_lock(path))
        .collect();
    let expected: BTreeSet<String> = [
        "etc/passwd",
        "etc/shadow",
        "etc/group",
        "etc/gshadow",
        "etc/hosts",
        "etc/fstab",
        "srv/app",
        "srv/app/app.ini",
    ]
    .into_iter()
    .map(str::to_owned)
    .collect();
    assert_eq!(changed, expected);
}

fn ralsh_and_useradd_side_by_side_lose_nothing() {
    // useradd -R chroots, which needs root; it takes the same lock.
    let useradd = Path::new("/usr/sbin/useradd");
    let sandbox = Sandbox::new();
    sandbox.write_accounts();
    sandbox.ralsh(&["-j", "user"]).expect(0);
    let made_by_useradd: Vec<String> = std::thread::scope(|scope| {
        let tool = scope.spawn(|| {
            (0..40)
                .map(|n| {
                    let name = format!("tool{n}");
                    let status = std::process::Command::new(useradd)
                        .arg("-R")
                        .arg(sandbox.root())
                        .arg(&name)
                        .status()
                        .unwrap();
                    assert!(status.success(), "useradd {name}: {status}");
                    name
                })
                .collect()
        });
        let ours: Vec<_> = (0..4)
            .map(|w| {
                let sandbox = &sandbox;
                scope.spawn(move || {
                    for n in 0..10 {
                        let name = format!("ral{w}-{n}");
                        sandbox.ralsh(&["user", &name, "ensure=present"]).expect(0);
                    }
                })
            })
            .collect();
        ours.into_iter().for_each(|worker| worker.join().unwrap());
        tool.join().unwrap()
    });
    let doc = sandbox.ralsh(&["-j", "user"]).expect(0).json();
    let listed: BTreeSet<&str> = names_in(&doc["resources"]).into_iter().collect();
    for name in &made_by_useradd {
        assert!(listed.contains(name.as_str()), "{name} was lost");
    }
    for w in 0..4 {
        for n in 0..10 {
            assert!(listed.contains(format!("ral{w}-{n}").as_str()));
        }
    }
    assert_ne!(shadow_tools_accept(sandbox.root()), Some(false));
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

fn managehome_keeps_a_home_that_holds_a_file_of_another_owner() {
    // userdel -r's case: a file another user put in the home (here deep
    // down, root's and then nobody's) keeps the whole home, and the
    // warning names it and its owner.
    for (owner, shown) in [(0, "uid 0 ('root')"), (65534, "uid 65534")] {
        let sandbox = Sandbox::new();
        sandbox.write_accounts();
        sandbox.write("home/v/notes", "mine\n");
        sandbox.write("home/v/a/b/theirs", "theirs\n");
        let home = sandbox.root().join("home/v");
        chown_tree(&home, 4242);
        chown_tree(&home.join("a/b/theirs"), owner);
        sandbox.ralsh(&["user", "v", "uid=4242"]).expect(0);
        let before = tree_snapshot(&home);
        let run = sandbox.ralsh(&["user", "v", "ensure=absent", "managehome=true"]);
        run.expect(0)
            .stdout_has("ensure: 'present' -> 'absent'")
            .stderr_has(&format!(
                "v: deleting: the home directory '{}' was kept: it holds '{}', owned by {shown}",
                home.display(),
                home.join("a/b/theirs").display()
            ));
        assert_eq!(before, tree_snapshot(&home), "nothing of it was removed");
        assert!(!sandbox.read("etc/passwd").contains("\nv:"));
    }
}

fn managehome_on_creation_never_gives_away_a_directory_that_exists() {
    let sandbox = Sandbox::new();
    sandbox.write_accounts();
    sandbox.write("srv/app/config", "keep\n");
    let app = sandbox.root().join("srv/app");
    chown_tree(&app, 4343);
    std::fs::set_permissions(&app, std::fs::Permissions::from_mode(0o2750)).unwrap();
    let run = sandbox.ralsh(&["user", "v", "uid=4242", "home=/srv/app", "managehome=true"]);
    run.expect(0).stderr_has(&format!(
        "v: creating: the home directory '{}' exists already and was left as it is: it is \
         owned by uid 4343",
        app.display()
    ));
    for path in [app.clone(), app.join("config")] {
        let meta = std::fs::metadata(&path).unwrap();
        assert_eq!((meta.uid(), meta.gid()), (4343, 4343), "{}", path.display());
    }
    let mode = std::fs::metadata(&app).unwrap().mode() & 0o7777;
    assert_eq!(mode, 0o2750);
    // A home made new is the user's.
    sandbox
        .ralsh(&["user", "w", "uid=4244", "managehome=true"])
        .expect(0);
    let made = std::fs::metadata(sandbox.root().join("home/w")).unwrap();
    assert_eq!((made.uid(), made.mode() & 0o7777), (4244, 0o755));
}

fn what_ral_writes_to_the_account_files_pwck_and_grpck_accept() {
    // The property of tests/ralsh/account_properties.rs, with pwck -r and
    // grpck -r run below the root after each change: nothing new found.
    let counts = crate::account_cases::run_cases(24, true);
    eprintln!("user and group, with pwck and grpck, {counts}");
    assert!(counts.accepted > 0 && counts.refused > 0, "{counts}");
}

/// Account files made new get the owners and modes shadow-utils gives
/// them: passwd root's, 0644; shadow root and the group `shadow` (which
/// may read the hashes), 0640.
fn account_files_made_new_get_the_owners_and_modes_shadow_utils_gives() {
    let sandbox = Sandbox::new();
    sandbox.write("etc/group", "root:x:0:\nshadow:x:42:\n");
    sandbox.write("etc/gshadow", "root:*::\nshadow:*::\n");
    sandbox
        .ralsh(&["user", "bob", "ensure=present"])
        .expect(0)
        .stdout_has("ensure: 'absent' -> 'present'");
    let of = |name: &str| {
        let meta = std::fs::metadata(sandbox.root().join("etc").join(name)).unwrap();
        (meta.uid(), meta.gid(), meta.mode() & 0o7777)
    };
    assert_eq!(of("passwd"), (0, 0, 0o644));
    assert_eq!(of("shadow"), (0, 42, 0o640));
}

/// The toolkit gives a directory it makes the owner asked, whether it
/// names a user, a group or both.
fn a_directory_made_gets_the_user_or_group_asked_alone() {
    use ral::sdk::files::{Create, Root};
    let tmp = tempfile::tempdir().unwrap();
    let root = Root::open(tmp.path()).unwrap();
    let user_only = Create {
        mode: 0o755,
        uid: Some(7001),
        gid: None,
    };
    let group_only = Create {
        mode: 0o755,
        uid: None,
        gid: Some(7002),
    };
    root.directory("u", true, Some(user_only)).unwrap();
    root.directory("g", true, Some(group_only)).unwrap();
    let owner = |rel: &str| {
        let meta = std::fs::metadata(tmp.path().join(rel)).unwrap();
        (meta.uid(), meta.gid())
    };
    assert_eq!(owner("u"), (7001, 0));
    assert_eq!(owner("g"), (0, 7002));
}

/// Only root gives files away: run as another user (nobody), ralsh
/// refuses another owner or group of a file with why, and asking the
/// ones it has is no change. (Copies of the binaries in a directory
/// nobody may read, whatever the checkout's own permissions.)
fn as_another_user_a_change_of_owner_or_group_is_refused() {
    use std::os::unix::process::CommandExt;
    const NOBODY: u32 = 65534;
    let bin = tempfile::tempdir().unwrap();
    std::fs::set_permissions(bin.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let ralsh = bin.path().join("ralsh");
    std::fs::copy(crate::support::ralsh_bin(), &ralsh).unwrap();
    std::fs::copy(
        env!("CARGO_BIN_EXE_ral-provider"),
        bin.path().join("ral-provider"),
    )
    .unwrap();
    let sandbox = Sandbox::new();
    sandbox.write("f", "x\n");
    for path in [
        sandbox.root().to_path_buf(),
        sandbox.root().join("f"),
        sandbox.cache.path().to_path_buf(),
    ] {
        std::os::unix::fs::chown(&path, Some(NOBODY), Some(NOBODY)).unwrap();
    }
    let as_nobody = |args: &[&str]| {
        let mut command = std::process::Command::new(&ralsh);
        command
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", sandbox.cache.path())
            .env("XDG_CACHE_HOME", sandbox.cache.path())
            .arg("--root")
            .arg(sandbox.root())
            .args(args)
            .uid(NOBODY)
            .gid(NOBODY);
        run(&mut command)
    };
    as_nobody(&["file", "/f", "owner=0"])
        .expect(2)
        .stderr_has("owner: changing the owner of '/f' needs root");
    as_nobody(&["file", "/f", "group=0"])
        .expect(2)
        .stderr_has("group: changing the group of '/f' needs root");
    let same = as_nobody(&["file", "/f", "owner=65534", "group=65534"]);
    same.expect(0);
    assert!(!same.stdout.contains("->"), "no change: {}", same.stdout);
    let meta = std::fs::metadata(sandbox.root().join("f")).unwrap();
    assert_eq!((meta.uid(), meta.gid()), (NOBODY, NOBODY));
}

/// An exec's `user`: its uid, its groups (primary and listed), its home
/// and name in the environment.
fn an_exec_s_command_runs_with_its_user_s_ids_and_home() {
    let sandbox = Sandbox::seeded();
    sandbox.write(
        "etc/passwd",
        "root:x:0:0:root:/root:/bin/sh\napp:x:1500:1500::/srv/app:/bin/sh\n",
    );
    sandbox.write("etc/group", "root:x:0:\napp:x:1500:\nweb:x:1600:app\n");
    let out_dir = sandbox.root().join("out");
    std::fs::create_dir(&out_dir).unwrap();
    std::fs::set_permissions(
        &out_dir,
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    let out = run(sandbox.command().args([
        "exec",
        "who",
        "command=echo \"$(id -u) $(id -G) $HOME $USER\" > \"$RALSH_ROOT_DIR/out/who\"",
        "shell=true",
        "user=app",
    ]));
    out.expect(0);
    assert_eq!(sandbox.read("out/who"), "1500 1500 1600 /srv/app app\n");
}

/// Listed first, with no require, an exec waits for the user and the
/// directory it names, and runs as that user.
fn an_exec_runs_after_the_user_and_the_directory_it_names() {
    let sandbox = Sandbox::seeded();
    let dir = tempfile::tempdir().unwrap();
    // Listed first, with no require: its user and cwd order it.
    let text = r#"exec:
  migrate:
    command: [sh, -c, 'id -u > "$RALSH_ROOT_DIR/srv/app/who"']
    user: app
    cwd: /srv/app
    creates: /srv/app/who
group:
  app: {gid: 3100}
user:
  app: {uid: 3100, gid: 3100, home: /srv/app}
file:
  /srv/app: {ensure: directory, mode: '0777'}
"#;
    let path = dir.path().join("m.yaml");
    std::fs::write(&path, text).unwrap();
    let m = path.to_str().unwrap();
    run(&mut sandbox.ral_command("plan", &[m]))
        .expect(0)
        .stdout_has("? exec[migrate] (waits for user[app], file[/srv/app])");
    run(&mut sandbox.ral_command("apply", &[m]))
        .expect(0)
        .stdout_has("Success ~ exec[migrate]");
    assert_eq!(sandbox.read("srv/app/who"), "3100\n");
}
