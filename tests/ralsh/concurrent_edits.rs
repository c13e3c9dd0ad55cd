//! Many writers at once on one fake root, and a directory swapped for a
//! symbolic link while updates run, for every bundled provider that edits
//! files. Each writer is a whole ralsh process, as users run them.
//!
//! - 8 workers x 25 creates of distinct resources: every create exits 0
//!   (none refused for lack of a lock), every one is listed afterwards, the
//!   listing has no warnings, and no temporary file is left anywhere.
//! - While updates run, a directory the provider works in is swapped again
//!   and again (renameat2 RENAME_EXCHANGE) with a symbolic link that, read
//!   the usual way, leads to a decoy outside the root: nothing outside
//!   changes, whatever the updates report.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::Value as Json;

use crate::support::{names_in, shadow_tools_accept, tree_snapshot, Run, Sandbox};

/// Writers at once, and how many resources each creates: every writer
/// races the others at each of its creates; more rounds only repeat the
/// same race.
const WORKERS: usize = 8;
const CREATES: usize = 10;
/// Updates run while a directory is swapped for a link: each is one race
/// with the swapper.
const SWAPPED_UPDATES: usize = 40;

/// One writable provider as these tests drive it.
struct Case {
    kind: &'static str,
    /// Seeds the fake root.
    setup: fn(&Sandbox),
    /// The name and the attributes of the `n`th resource of `worker`.
    create: fn(usize, usize) -> (String, Vec<String>),
    /// Whether the change to the resource named so is there, given the
    /// sandbox and the provider's listing.
    kept: fn(&Sandbox, &Json, &str) -> bool,
}

/// The resource is in the listing.
fn listed(_: &Sandbox, listing: &Json, name: &str) -> bool {
    names_in(&listing["resources"]).contains(&name)
}

const HOST: Case = Case {
    kind: "host",
    setup: |sandbox| sandbox.write("etc/hosts", "127.0.0.1\tlocalhost\n"),
    create: |w, n| {
        (
            format!("h{w}-{n}.example"),
            vec![format!("ip=10.0.{w}.{n}")],
        )
    },
    kept: listed,
};

const USER: Case = Case {
    kind: "user",
    setup: Sandbox::write_accounts,
    create: |w, n| (format!("u{w}-{n}"), vec!["ensure=present".into()]),
    kept: listed,
};

const GROUP: Case = Case {
    kind: "group",
    setup: Sandbox::write_accounts,
    create: |w, n| (format!("g{w}-{n}"), vec!["ensure=present".into()]),
    kept: listed,
};

/// The bash provider of docs/providers.md, which follows the same rules
/// with flock(1).
const SETTING: Case = Case {
    kind: "setting",
    setup: |sandbox| sandbox.write("etc/example.conf", ""),
    create: |w, n| (format!("s{w}-{n}"), vec![format!("value={w} {n}")]),
    kept: listed,
};

const MOUNT: Case = Case {
    kind: "mount",
    setup: |sandbox| sandbox.write("etc/fstab", "proc\t/proc\tproc\tdefaults\t0\t0\n"),
    create: |w, n| {
        (
            format!("/mnt/m{w}-{n}"),
            vec![format!("device=/dev/vd{w}{n}"), "fstype=ext4".into()],
        )
    },
    kept: listed,
};

/// alice, with a home directory and an empty crontab spool.
fn alice(sandbox: &Sandbox) {
    sandbox.write_accounts();
    sandbox.write(
        "etc/passwd",
        "root:x:0:0:root:/root:/bin/bash\nalice:x:1000:1000::/home/alice:/bin/sh\n",
    );
    std::fs::create_dir_all(sandbox.root().join("home/alice/.ssh")).unwrap();
    std::fs::create_dir_all(sandbox.root().join("var/spool/cron/crontabs")).unwrap();
    std::fs::create_dir_all(sandbox.root().join("srv")).unwrap();
}

const CRON: Case = Case {
    kind: "cron",
    setup: alice,
    create: |w, n| {
        (
            format!("job{w}-{n}"),
            vec!["user=alice".into(), format!("command=true {w} {n}")],
        )
    },
    kept: listed,
};

const ED25519: &str = "AAAAC3NzaC1lZDI1NTE5AAAAIB50a3nIQpXr2jxsUTP0b4hg2hNb+WrkStPakYJWDCCl";

const SSH_KEY: Case = Case {
    kind: "ssh_authorized_key",
    setup: alice,
    create: |w, n| {
        (
            format!("key{w}-{n}"),
            vec![
                "user=alice".into(),
                "type=ssh-ed25519".into(),
                format!("key={ED25519}"),
            ],
        )
    },
    kept: listed,
};

const FILE: Case = Case {
    kind: "file",
    setup: alice,
    create: |w, n| (format!("/srv/f{w}-{n}"), vec![format!("content={w} {n}\n")]),
    // A listing of files is empty: look at the file itself.
    kept: |sandbox, _, name| {
        let (w, n) = name["/srv/f".len()..].split_once('-').unwrap();
        sandbox.read(&name[1..]) == format!("{w} {n}\n")
    },
};

/// An init script with an LSB header and a status action.
const INIT_SCRIPT: &str = "#!/bin/sh\n### BEGIN INIT INFO\n# Default-Start: 2 3 4 5\n\
    # Default-Stop: 0 1 6\n### END INIT INFO\ncase $1 in status) exit 3 ;; esac\n";

const SERVICE: Case = Case {
    kind: "service",
    setup: |sandbox| {
        use std::os::unix::fs::PermissionsExt;
        for level in "0123456S".chars() {
            std::fs::create_dir_all(sandbox.root().join(format!("etc/rc{level}.d"))).unwrap();
        }
        for w in 0..WORKERS {
            for n in 0..CREATES {
                let script = format!("etc/init.d/s{w}-{n}");
                sandbox.write(&script, INIT_SCRIPT);
                let path = sandbox.root().join(script);
                std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
            }
        }
    },
    create: |w, n| (format!("s{w}-{n}"), vec!["enable=true".into()]),
    // Every script is listed: the change is that it is enabled.
    kept: |_, listing, name| {
        listing["resources"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["name"] == name && r["enable"] == true)
    },
};

/// Runs every create of `case`, WORKERS processes at a time; returns each
/// name with its run.
fn create_all(sandbox: &Sandbox, case: &Case) -> Vec<(String, Run)> {
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..WORKERS)
            .map(|w| {
                scope.spawn(move || {
                    (0..CREATES)
                        .map(|n| {
                            let (name, attrs) = (case.create)(w, n);
                            let mut args = vec![case.kind, name.as_str()];
                            args.extend(attrs.iter().map(String::as_str));
                            let run = sandbox.ralsh(&args);
                            (name, run)
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|worker| worker.join().unwrap())
            .collect()
    })
}

/// Every path below `root` whose name marks it as a temporary file of ours.
fn temporary_files(root: &Path) -> Vec<PathBuf> {
    tree_snapshot(root)
        .into_keys()
        .filter(|path| path.to_string_lossy().contains(".ral-tmp-"))
        .collect()
}

fn check_parallel_creates(case: &Case) -> Sandbox {
    let sandbox = Sandbox::new();
    (case.setup)(&sandbox);
    // One run first, so the storm does not also race to write ral's cache.
    sandbox.ralsh(&["-j", case.kind]).expect(0);
    let results = create_all(&sandbox, case);
    let failed: Vec<_> = results.iter().filter(|(_, run)| run.status != 0).collect();
    assert!(
        failed.is_empty(),
        "{}: {} of {} creates failed; the first: {:?}",
        case.kind,
        failed.len(),
        results.len(),
        failed[0]
    );
    let run = sandbox.ralsh(&["-j", case.kind]);
    let doc = run.expect(0).json();
    assert!(
        !run.stderr.contains("warn"),
        "{}: the listing warns:\n{}",
        case.kind,
        run.stderr
    );
    let lost: Vec<&str> = results
        .iter()
        .map(|(name, _)| name.as_str())
        .filter(|name| !(case.kept)(&sandbox, &doc, name))
        .collect();
    assert!(
        lost.is_empty(),
        "{}: {} created resources were lost: {lost:?}",
        case.kind,
        lost.len()
    );
    assert_eq!(temporary_files(sandbox.root()), Vec::<PathBuf>::new());
    sandbox
}

#[test]
fn parallel_host_creates_all_survive() {
    check_parallel_creates(&HOST);
}

#[test]
fn parallel_user_creates_all_survive_and_pwck_accepts_the_files() {
    let sandbox = check_parallel_creates(&USER);
    assert_ne!(shadow_tools_accept(sandbox.root()), Some(false));
    let shadow = sandbox.read("etc/shadow");
    assert_eq!(shadow.lines().count(), 1 + WORKERS * CREATES, "{shadow}");
}

#[test]
fn parallel_group_creates_all_survive() {
    let sandbox = check_parallel_creates(&GROUP);
    assert_ne!(shadow_tools_accept(sandbox.root()), Some(false));
    assert_eq!(
        sandbox.read("etc/gshadow").lines().count(),
        2 + WORKERS * CREATES
    );
}

#[test]
fn parallel_mount_creates_all_survive() {
    check_parallel_creates(&MOUNT);
}

#[test]
fn parallel_cron_creates_in_one_crontab_all_survive() {
    check_parallel_creates(&CRON);
}

#[test]
fn parallel_ssh_key_creates_in_one_file_all_survive() {
    check_parallel_creates(&SSH_KEY);
}

#[test]
fn parallel_file_creates_in_one_directory_all_survive() {
    check_parallel_creates(&FILE);
}

#[test]
fn parallel_service_enables_all_survive() {
    check_parallel_creates(&SERVICE);
}

#[test]
fn parallel_creates_through_the_readme_bash_provider_all_survive() {
    check_parallel_creates(&SETTING);
}

// ------------------------------------------------------ the symlink race

/// A directory below the root that a provider edits in, and the updates to
/// run while it is being swapped.
struct Race {
    case: Case,
    /// The directory swapped, relative to the root.
    dir: &'static str,
    /// The arguments of the `n`th update.
    update: fn(usize) -> Vec<String>,
}

fn exchange(a: &Path, b: &Path) -> bool {
    let a = CString::new(a.as_os_str().as_bytes()).unwrap();
    let b = CString::new(b.as_os_str().as_bytes()).unwrap();
    // SAFETY: both are valid NUL-terminated paths.
    unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            a.as_ptr(),
            libc::AT_FDCWD,
            b.as_ptr(),
            libc::RENAME_EXCHANGE,
        ) == 0
    }
}

/// A symbolic link's text that leads from `link`'s directory up to `/` and
/// down to `target`: outside the root when read the usual way.
fn escaping_link(link: &Path, target: &Path) -> PathBuf {
    let depth = link.parent().unwrap().components().count() - 1;
    let mut text = PathBuf::new();
    for _ in 0..depth {
        text.push("..");
    }
    text.join(target.strip_prefix("/").unwrap())
}

fn check_swap_race(race: &Race, updates: usize) {
    let sandbox = Sandbox::new();
    (race.case.setup)(&sandbox);
    sandbox.ralsh(&["-j", race.case.kind]).expect(0);
    let real = sandbox.root().join(race.dir);
    // The decoy: a copy of the directory outside the root.
    let outside = tempfile::tempdir().unwrap();
    let decoy = outside.path().join("decoy");
    std::fs::create_dir(&decoy).unwrap();
    for entry in std::fs::read_dir(&real).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_file() {
            std::fs::copy(entry.path(), decoy.join(entry.file_name())).unwrap();
        }
    }
    let before = tree_snapshot(outside.path());
    let link = real.with_extension("ral-swap");
    std::os::unix::fs::symlink(escaping_link(&link, &decoy), &link).unwrap();
    assert!(
        std::fs::metadata(&link).unwrap().is_dir(),
        "the link leads to the decoy"
    );

    let done = AtomicBool::new(false);
    let (swaps, results) = std::thread::scope(|scope| {
        let swapper = scope.spawn(|| {
            let mut swaps = 0usize;
            while !done.load(Ordering::Relaxed) {
                assert!(exchange(&real, &link));
                swaps += 1;
            }
            if swaps % 2 == 1 {
                assert!(exchange(&real, &link));
            }
            swaps
        });
        let results: Vec<Run> = (0..updates)
            .map(|n| {
                let mut args = vec![race.case.kind.to_owned()];
                args.extend((race.update)(n));
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                sandbox.ralsh(&args)
            })
            .collect();
        done.store(true, Ordering::Relaxed);
        (swapper.join().unwrap(), results)
    });
    assert!(std::fs::symlink_metadata(&real).unwrap().is_dir());
    assert!(swaps > updates, "the directory was swapped {swaps} times");
    let changed: Vec<_> = {
        let after = tree_snapshot(outside.path());
        before
            .keys()
            .chain(after.keys())
            .filter(|path| before.get(*path) != after.get(*path))
            .cloned()
            .collect()
    };
    let succeeded = results.iter().filter(|run| run.status == 0).count();
    assert!(
        changed.is_empty(),
        "{}: {succeeded} of {updates} updates succeeded and changed the outside decoy: {changed:?}",
        race.case.kind
    );
    // Updates did get through (to the directory inside the root) while it
    // was being swapped, so the race was run, not just refused.
    assert!(
        succeeded > 0,
        "{}: no update succeeded; the first said: {}",
        race.case.kind,
        results[0].stderr
    );
    // What stays below the root is well formed.
    sandbox.ralsh(&["-j", race.case.kind]).expect(0);
    assert_eq!(temporary_files(sandbox.root()), Vec::<PathBuf>::new());
}

#[test]
fn swapping_etc_for_a_link_never_makes_host_write_outside() {
    check_swap_race(
        &Race {
            case: HOST,
            dir: "etc",
            update: |n| vec!["web.example".into(), format!("ip=10.1.0.{}", n % 250)],
        },
        SWAPPED_UPDATES,
    );
}

#[test]
fn swapping_etc_for_a_link_never_makes_user_or_group_write_outside() {
    check_swap_race(
        &Race {
            case: USER,
            dir: "etc",
            update: |n| vec![format!("u{n}"), "ensure=present".into()],
        },
        SWAPPED_UPDATES,
    );
    check_swap_race(
        &Race {
            case: GROUP,
            dir: "etc",
            update: |n| vec![format!("g{n}"), "ensure=present".into()],
        },
        SWAPPED_UPDATES,
    );
}

#[test]
fn swapping_etc_for_a_link_never_makes_mount_write_outside() {
    check_swap_race(
        &Race {
            case: MOUNT,
            dir: "etc",
            update: |n| {
                vec![
                    format!("/mnt/r{n}"),
                    format!("device=/dev/r{n}"),
                    "fstype=ext4".into(),
                ]
            },
        },
        SWAPPED_UPDATES,
    );
}

#[test]
fn swapping_the_spool_for_a_link_never_makes_cron_write_outside() {
    check_swap_race(
        &Race {
            case: CRON,
            dir: "var/spool/cron/crontabs",
            update: |n| {
                vec![
                    format!("job{n}"),
                    "user=alice".into(),
                    format!("command=true {n}"),
                ]
            },
        },
        SWAPPED_UPDATES,
    );
}

#[test]
fn swapping_ssh_for_a_link_never_makes_ssh_key_write_outside() {
    check_swap_race(
        &Race {
            case: SSH_KEY,
            dir: "home/alice/.ssh",
            update: |n| {
                vec![
                    format!("key{n}"),
                    "user=alice".into(),
                    "type=ssh-ed25519".into(),
                    format!("key={ED25519}"),
                ]
            },
        },
        SWAPPED_UPDATES,
    );
}

#[test]
fn swapping_a_directory_for_a_link_never_makes_file_write_outside() {
    check_swap_race(
        &Race {
            case: FILE,
            dir: "srv",
            update: |n| vec!["/srv/page".into(), format!("content={n}\n")],
        },
        SWAPPED_UPDATES,
    );
}

#[test]
fn swapping_rc2_for_a_link_never_makes_service_write_outside() {
    check_swap_race(
        &Race {
            case: SERVICE,
            dir: "etc/rc2.d",
            update: |n| {
                vec![
                    format!("s0-{}", n % CREATES),
                    format!("enable={}", n % 2 == 0),
                ]
            },
        },
        SWAPPED_UPDATES,
    );
}
