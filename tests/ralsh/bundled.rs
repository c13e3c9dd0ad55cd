//! The bundled providers, end to end through ralsh on a fake root, and the
//! bundled set surviving a moved binary.

use std::os::unix::fs::{MetadataExt, PermissionsExt};

use crate::support::{names_in, run, Sandbox};

const HOSTS: &str = "# The hosts file\n127.0.0.1\tlocalhost\n127.0.1.1  myhost.example.org myhost   # primary\n::1     localhost ip6-localhost ip6-loopback\n\n# unrelated\nff02::1 ip6-allnodes\n";

fn hosts_sandbox() -> Sandbox {
    let sandbox = Sandbox::new();
    sandbox.write("etc/hosts", HOSTS);
    sandbox
}

#[test]
fn host_lists_and_finds_entries() {
    let sandbox = hosts_sandbox();
    let doc = sandbox.ralsh(&["-j", "host"]).expect(0).json();
    let names = names_in(&doc["resources"]);
    assert_eq!(names, ["localhost", "myhost.example.org", "ip6-allnodes"]);
    let run = sandbox.ralsh(&["host", "myhost.example.org"]);
    assert_eq!(
        run.expect(0).stdout,
        "host::etc_hosts { 'myhost.example.org':\n  ensure       => 'present',\n  comment      => 'primary',\n  host_aliases => ['myhost'],\n  ip           => '127.0.1.1',\n}\n"
    );
    let run = sandbox.ralsh(&["host", "nothere"]);
    assert!(run.expect(0).stdout.contains("ensure => 'absent'"));
    sandbox.ralsh(&["-a", "host", "nothere"]).expect(1);
}

#[test]
fn host_creates_changes_and_deletes_keeping_other_lines() {
    let sandbox = hosts_sandbox();
    let before = std::fs::metadata(sandbox.root().join("etc/hosts"))
        .unwrap()
        .ino();
    let doc = sandbox
        .ralsh(&[
            "-j",
            "host",
            "new.example",
            "ip=10.0.0.5",
            "host_aliases=new,n2",
        ])
        .expect(0)
        .json();
    assert_eq!(
        doc["result"][0]["changes"],
        serde_json::json!([
            {"attr": "ensure", "is": "present", "was": "absent"},
            {"attr": "ip", "is": "10.0.0.5", "was": null},
            {"attr": "host_aliases", "is": ["new", "n2"], "was": null},
        ])
    );
    assert_eq!(
        sandbox.read("etc/hosts"),
        format!("{HOSTS}10.0.0.5\tnew.example new n2\n")
    );
    let after = std::fs::metadata(sandbox.root().join("etc/hosts"))
        .unwrap()
        .ino();
    assert_ne!(
        before, after,
        "the file is replaced, not rewritten in place"
    );
    // The lock file stays (removing it would race with the next writer);
    // no temporary file does.
    assert_eq!(sandbox.names_in_dir("etc"), [".hosts.ral-lock", "hosts"]);

    let run = sandbox.ralsh(&["host", "myhost.example.org", "ip=127.0.1.2"]);
    assert!(
        run.expect(0)
            .stdout
            .ends_with("ip: '127.0.1.1' -> '127.0.1.2'\n"),
        "{}",
        run.stdout
    );
    assert_eq!(
        sandbox.read("etc/hosts"),
        format!(
            "{}10.0.0.5\tnew.example new n2\n",
            HOSTS.replace(
                "127.0.1.1  myhost.example.org myhost   # primary",
                "127.0.1.2\tmyhost.example.org myhost\t# primary"
            )
        )
    );
    let again = sandbox.ralsh(&["host", "myhost.example.org", "ip=127.0.1.2"]);
    assert!(
        again.expect(0).stdout.ends_with("no changes needed\n"),
        "idempotent: {}",
        again.stdout
    );

    let run = sandbox.ralsh(&["host", "new.example", "ensure=absent"]);
    assert!(
        run.expect(0)
            .stdout
            .ends_with("ensure: 'present' -> 'absent'\n"),
        "{}",
        run.stdout
    );
    assert!(!sandbox.read("etc/hosts").contains("new.example"));
    assert!(sandbox
        .read("etc/hosts")
        .contains("# unrelated\nff02::1 ip6-allnodes\n"));
    let again = sandbox.ralsh(&["host", "new.example", "ensure=absent"]);
    assert!(again.expect(0).stdout.ends_with("no changes needed\n"));
}

#[test]
fn host_noop_previews_without_touching_the_file() {
    let sandbox = hosts_sandbox();
    for args in [
        &["-n", "host", "new.example", "ip=10.0.0.5"][..],
        &[
            "-n",
            "host",
            "myhost.example.org",
            "ip=127.0.1.9",
            "comment=changed",
        ][..],
        &["-n", "host", "localhost", "ensure=absent"][..],
    ] {
        let run = sandbox.ralsh(args);
        assert!(
            run.expect(0).stdout.contains("(noop: would change)"),
            "{args:?}: {}",
            run.stdout
        );
        assert_eq!(
            sandbox.read("etc/hosts"),
            HOSTS,
            "{args:?} changed the file"
        );
    }
    let doc = sandbox
        .ralsh(&["-n", "-j", "host", "localhost", "ip=127.0.0.2"])
        .expect(0)
        .json();
    assert_eq!(doc["noop"], true);
    assert_eq!(doc["result"][0]["resource"]["ip"], "127.0.0.2");
    assert_eq!(sandbox.read("etc/hosts"), HOSTS);
}

#[test]
fn host_refuses_a_value_it_could_not_read_back_and_lists_one_made_by_hand() {
    let sandbox = hosts_sandbox();
    let long = "x".repeat(70_000);
    let comment = format!("comment={long}");
    sandbox
        .ralsh(&["host", "long.example", "ip=10.0.0.7", &comment])
        .expect(2)
        .stderr_has("comment of 'long.example' would make a line of 70010 bytes, longer than the 65536 ral reads");
    assert_eq!(sandbox.read("etc/hosts"), HOSTS);
    // Such a line written by hand: the entry is still listed, found and
    // removed; only the comment ral cannot read is left out, with a warning.
    sandbox.write(
        "etc/hosts",
        &format!("{HOSTS}10.0.0.7 long.example # {long}\n"),
    );
    let run = sandbox.ralsh(&["-j", "host"]);
    let doc = run.expect(0).json();
    run.stderr_has("long.example: comment is 70009 bytes long, more than ral reads");
    let names = names_in(&doc["resources"]);
    assert_eq!(
        names,
        [
            "localhost",
            "myhost.example.org",
            "ip6-allnodes",
            "long.example"
        ]
    );
    assert!(doc["resources"][3].get("comment").is_none());
    sandbox
        .ralsh(&["host", "long.example", "comment=short"])
        .expect(0)
        .stdout_has("comment: ");
    assert!(sandbox
        .read("etc/hosts")
        .ends_with("10.0.0.7\tlong.example\t# short\n"));
    sandbox
        .ralsh(&["host", "long.example", "ensure=absent"])
        .expect(0);
    assert_eq!(sandbox.read("etc/hosts"), HOSTS);
}

#[test]
fn host_rejects_bad_values_and_leaves_the_file_alone() {
    let sandbox = hosts_sandbox();
    let run = sandbox.ralsh(&["host", "localhost", "ip=999.1.1.1"]);
    run.expect(2);
    run.stderr_has("host::etc_hosts: update reported an error: invalid ip '999.1.1.1'");
    let run = sandbox.ralsh(&["host", "brand.new", "comment=no ip"]);
    run.expect(2);
    run.stderr_has("ip is required");
    let run = sandbox.ralsh(&["host", "bad..name", "ip=10.0.0.9"]);
    run.expect(2)
        .stderr_has("cannot create host 'bad..name': the name has an empty label");
    let run = sandbox.ralsh(&["host", "localhost", "host_aliases=ok,-dash"]);
    run.expect(2)
        .stderr_has("invalid host_aliases entry '-dash' for host 'localhost'");
    assert_eq!(sandbox.read("etc/hosts"), HOSTS);
    // A name that could never be written is unknown, not absent.
    sandbox
        .ralsh(&["host", "bad..name"])
        .expect(1)
        .stderr_has("no resource named 'bad..name'");
    let doc = sandbox
        .ralsh(&["-j", "host", "fine.example"])
        .expect(0)
        .json();
    assert_eq!(doc["resource"]["ensure"], "absent");
}

#[test]
fn user_and_group_report_the_databases() {
    let sandbox = Sandbox::new();
    sandbox.write("etc/passwd", "root:x:0:0:root:/root:/bin/bash\nalice:x:1000:1000:Alice Liddell,,,:/home/alice:/bin/zsh\n");
    // (alice's primary group exists: without it she would be incomplete)
    sandbox.write(
        "etc/group",
        "root:x:0:\nstaff:x:50:alice,bob\nalice:x:1000:\n",
    );
    let doc = sandbox.ralsh(&["-j", "user", "alice"]).expect(0).json();
    assert_eq!(
        doc["resource"],
        serde_json::json!({"name": "alice", "ensure": "present", "comment": "Alice Liddell,,,", "gid": 1000,
            "groups": ["staff"], "home": "/home/alice", "shell": "/bin/zsh", "uid": 1000,
            "ral": {"type": "user", "provider": "user::etc_passwd"}})
    );
    let doc = sandbox.ralsh(&["-j", "group"]).expect(0).json();
    assert_eq!(
        doc["resources"][1]["members"],
        serde_json::json!(["alice", "bob"])
    );
}

#[test]
fn a_moved_binary_writes_its_bundled_providers_to_a_private_cache() {
    let scratch = tempfile::tempdir().unwrap();
    let binary = scratch.path().join("bin/ralsh");
    std::fs::create_dir_all(binary.parent().unwrap()).unwrap();
    std::fs::copy(crate::support::ralsh_bin(), &binary).unwrap();
    let cache = scratch.path().join("cache");
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(root.path().join("etc")).unwrap();
    std::fs::write(root.path().join("etc/hosts"), "10.1.1.1 moved.example\n").unwrap();
    let mut command = std::process::Command::new(&binary);
    command
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap())
        .env("XDG_CACHE_HOME", &cache)
        .arg("--root")
        .arg(root.path())
        .args(["-j", "host"]);
    let doc = run(&mut command).expect(0).json();
    assert_eq!(doc["resources"][0]["name"], "moved.example");
    let dir = bundled_dir(&cache);
    assert!(dir
        .file_name()
        .unwrap()
        .to_str()
        .unwrap()
        .starts_with(&format!("bundled-2-{}-", env!("CARGO_PKG_VERSION"))));
    assert_eq!(
        std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777,
        0o700
    );
    assert!(dir.join("providers/etc_hosts.prov").exists());
    // A second run reuses the extraction.
    run(&mut command).expect(0);
    let extractions = std::fs::read_dir(cache.join("ral"))
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with("bundled-")
        })
        .count();
    assert_eq!(extractions, 1);
}

/// The directory the bundled providers were written to below `cache`.
fn bundled_dir(cache: &std::path::Path) -> std::path::PathBuf {
    std::fs::read_dir(cache.join("ral"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .find(|path| {
            path.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("bundled-")
        })
        .expect("the bundled providers were written out")
}

#[test]
fn a_cache_writable_by_others_is_refused() {
    let sandbox = Sandbox::new();
    let ral_dir = sandbox.cache.path().join("ral");
    std::fs::create_dir_all(&ral_dir).unwrap();
    std::fs::set_permissions(&ral_dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let run = sandbox.ralsh(&["-j"]);
    let doc = run.expect(0).json();
    run.stderr_has("bundled providers are unavailable");
    run.stderr_has("not a private directory of this user");
    let names = names_in(&doc["providers"]);
    assert!(!names.contains(&"host::etc_hosts"), "{names:?}");
    assert!(names.contains(&"scripted::scripted"), "{names:?}");
}

#[test]
fn a_changed_bundled_provider_is_written_again() {
    let sandbox = Sandbox::new();
    sandbox.write("etc/hosts", "10.9.9.9 original.example\n");
    sandbox.ralsh(&["host"]).expect(0);
    let dir = bundled_dir(sandbox.cache.path());
    let script = dir.join("providers/etc_hosts.prov");
    std::fs::write(
        &script,
        "#!/bin/sh\nprintf '# simple\\nname: tampered\\n'\n",
    )
    .unwrap();
    let run = sandbox.ralsh(&["host"]);
    assert_eq!(
        run.expect(0).stdout.lines().next(),
        Some("host::etc_hosts { 'original.example':")
    );
    run.stderr_has("is incomplete or was changed; writing it again");
}

#[test]
fn files_added_to_the_bundled_directory_are_not_providers() {
    // Only the files built into the binary were checked; anything else
    // there is ignored, whether all providers are listed or one type.
    let sandbox = Sandbox::new();
    sandbox.ralsh(&["host"]).expect(0);
    let providers = bundled_dir(sandbox.cache.path()).join("providers");
    std::fs::write(
        providers.join("zz_extra.prov"),
        "#!/bin/sh\nprintf '# simple\\nname: planted\\n'\n",
    )
    .unwrap();
    std::fs::set_permissions(
        providers.join("zz_extra.prov"),
        std::fs::Permissions::from_mode(0o700),
    )
    .unwrap();
    std::fs::write(
        providers.join("zz_extra.yaml"),
        "---\nprovider:\n  type: host\n  name: extra\n  invoke: simple\n  actions: [list]\n  suitable: true\n  desc: planted\n  attributes:\n    name: {}\n",
    )
    .unwrap();
    let all = sandbox.ralsh(&["-j"]).expect(0).json();
    let names = names_in(&all["providers"]);
    assert!(names.contains(&"host::etc_hosts"), "{names:?}");
    assert!(!names.contains(&"host::extra"), "{names:?}");
    sandbox
        .ralsh(&["host::extra"])
        .expect(2)
        .stderr_has("host::extra");
    // `ralsh host` is not ambiguous either.
    sandbox.ralsh(&["host"]).expect(0);
}

#[test]
fn group_is_managed_through_the_json_convention() {
    let sandbox = Sandbox::new();
    let group = "# groups\nroot:x:0:\nstaff:x:50:alice\n";
    sandbox.write("etc/group", group);
    sandbox.write(
        "etc/passwd",
        "root:x:0:0::/root:/bin/sh\nalice:x:1000:50::/home/alice:/bin/sh\nbob:x:1001:50::/home/bob:/bin/sh\n",
    );
    let doc = sandbox.ralsh(&["-j", "group", "staff"]).expect(0).json();
    assert_eq!(
        doc["resource"]["gid"],
        serde_json::json!(50),
        "gid stays an integer"
    );
    // noop changes nothing
    sandbox
        .ralsh(&["-n", "group", "staff", "members=alice,bob"])
        .expect(0)
        .stdout_has("(noop: would change)");
    assert_eq!(sandbox.read("etc/group"), group);
    // change, then the same again is no change
    let run = sandbox.ralsh(&["group", "staff", "members=alice,bob"]);
    run.expect(0)
        .stdout_has("members: ['alice'] -> ['alice', 'bob']");
    assert_eq!(
        sandbox.read("etc/group"),
        "# groups\nroot:x:0:\nstaff:x:50:alice,bob\n"
    );
    sandbox
        .ralsh(&["group", "staff", "members=alice,bob"])
        .expect(0)
        .stdout_has("no changes needed");
    // a member being added must be a user; nothing changes otherwise
    sandbox
        .ralsh(&["group", "staff", "members=alice,bob,zed"])
        .expect(2)
        .stderr_has("members: unknown user 'zed' (not in");
    assert_eq!(
        sandbox.read("etc/group"),
        "# groups\nroot:x:0:\nstaff:x:50:alice,bob\n"
    );
    // gid is set at creation only
    sandbox
        .ralsh(&["group", "staff", "gid=51"])
        .expect(2)
        .stderr_has("attribute 'gid' can only be set when 'staff' is created");
    // create with an explicit gid, then delete
    let doc = sandbox
        .ralsh(&["-j", "group", "devs", "ensure=present", "gid=1200"])
        .expect(0)
        .json();
    assert_eq!(doc["result"][0]["resource"]["gid"], serde_json::json!(1200));
    assert!(sandbox.read("etc/group").ends_with("devs:x:1200:\n"));
    sandbox
        .ralsh(&["group", "devs", "ensure=absent"])
        .expect(0)
        .stdout_has("ensure: 'present' -> 'absent'");
    assert_eq!(
        sandbox.read("etc/group"),
        "# groups\nroot:x:0:\nstaff:x:50:alice,bob\n"
    );
    sandbox
        .ralsh(&["group", "bad:name", "ensure=present"])
        .expect(2);
}

#[test]
fn a_type_no_bundled_provider_has_leaves_the_bundled_directory_alone() {
    let sandbox = Sandbox::new();
    let bundled_written = || {
        std::fs::read_dir(sandbox.cache.path().join("ral"))
            .map(|entries| {
                entries
                    .filter_map(|e| e.ok())
                    .any(|e| e.file_name().to_string_lossy().starts_with("bundled-"))
            })
            .unwrap_or(false)
    };
    sandbox.ralsh(&["-j", "setting"]).expect(0);
    assert!(
        !bundled_written(),
        "ralsh setting wrote the bundled providers"
    );
    // A bundled type, or the list of providers, needs them.
    sandbox.ralsh(&["-j"]).expect(0);
    assert!(bundled_written());
}

#[test]
fn a_temporary_cache_directory_another_user_could_write_is_not_used() {
    // Without HOME and XDG_CACHE_HOME, ral's cache is TMPDIR/ral-UID; made
    // first by someone else (here: writable by everyone), it is refused,
    // and a fresh private directory serves the run and goes with it.
    use std::os::unix::fs::PermissionsExt;
    let sandbox = Sandbox::new();
    sandbox.write("etc/hosts", "10.0.0.1 db\n");
    let tmp = tempfile::tempdir().unwrap();
    // SAFETY: geteuid has no preconditions.
    let shared = tmp
        .path()
        .join(format!("ral-{}", unsafe { libc::geteuid() }));
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).unwrap();
    let mut command = sandbox.command();
    command
        .env_remove("HOME")
        .env_remove("XDG_CACHE_HOME")
        .env("TMPDIR", tmp.path())
        .arg("host");
    let run = run(&mut command);
    run.expect(0).stdout_has("host::etc_hosts { 'db':");
    run.stderr_has(&format!("not using {}", shared.display()));
    assert_eq!(
        std::fs::read_dir(&shared).unwrap().count(),
        0,
        "nothing written there"
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

#[test]
fn setting_attributes_of_an_absent_resource_creates_it_for_every_bundled_provider() {
    // docs/cli.md (Updates) says so: no ensure=present needed.
    let sandbox = Sandbox::new();
    sandbox.write(
        "etc/passwd",
        "root:x:0:0:root:/root:/bin/bash\nalice:x:1000:1000::/home/alice:/bin/sh\n",
    );
    sandbox.write(
        "etc/shadow",
        "root:*:19700:0:99999:7:::\nalice:!:19700:0:99999:7:::\n",
    );
    sandbox.write("etc/group", "root:x:0:\nalice:x:1000:\n");
    sandbox.write("etc/gshadow", "root:*::\nalice:!::\n");
    sandbox.write("etc/hosts", "");
    sandbox.write("etc/fstab", "");
    sandbox.write("home/alice/.keep", "");
    let key = "AAAAC3NzaC1lZDI1NTE5AAAAIB50a3nIQpXr2jxsUTP0b4hg2hNb+WrkStPakYJWDCCl";
    let key_arg = format!("key={key}");
    let cases: [(&str, &str, Vec<&str>); 7] = [
        ("host", "demo", vec!["ip=10.0.0.9"]),
        ("group", "devs", vec!["gid=1200"]),
        ("user", "bob", vec!["shell=/bin/bash"]),
        ("mount", "/srv", vec!["device=/dev/vdb1", "fstype=ext4"]),
        (
            "cron",
            "backup",
            vec!["user=alice", "command=/bin/true", "hour=3"],
        ),
        (
            "ssh_authorized_key",
            "k1",
            vec!["user=alice", "type=ssh-ed25519", &key_arg],
        ),
        ("file", "/etc/motd", vec!["content=hi"]),
    ];
    for (kind, name, attrs) in cases {
        let mut args = vec![kind, name];
        args.extend(attrs);
        sandbox.ralsh(&args).expect(0).stdout_has(" -> ");
        let doc = sandbox.ralsh(&["-j", kind, name]).expect(0).json();
        let ensure = doc["resource"]["ensure"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        // A mount's entry made without mounting it reads unmounted.
        assert!(
            ensure == "present" || ensure == "file" || ensure == "unmounted",
            "{kind} {name} was not created: {doc}"
        );
    }
}
