//! The pure logic of `mount::fstab`: parsing lines as the script did,
//! field edits that keep the spacing, escapes, checks and their messages.

use serde_json::json;

use super::*;

fn call() -> Call {
    Call {
        lock_timeout: Duration::from_secs(1),
        ..Call::new(
            "/nonexistent",
            false,
            crate::Log::new(Box::new(std::io::sink()), false),
        )
    }
}

fn update(name: &str, should: Json) -> Update {
    Update {
        name: name.to_owned(),
        is: Resource::new(),
        should: should.as_object().cloned().unwrap_or_default(),
    }
}

/// A fake root (never the real one), for updates, where mounting is
/// refused as in the machine's namespace.
fn fake_root() -> (tempfile::TempDir, Place) {
    let dir = tempfile::tempdir().unwrap();
    let root = Root::open(dir.path()).unwrap();
    let place = Place {
        root,
        prefix: root_prefix(dir.path()).unwrap(),
        refusal: Some("not here".to_owned()),
    };
    (dir, place)
}

const FSTAB: &[u8] = b"# c\n\
UUID=1 /  ext4 errors=remount-ro 0 1\n\
\n\
broken line\n\
LABEL=my\\040disk\t/mnt/my\\040disk ext4 noatime  \r\n\
/dev/sdz1 / xfs defaults 0 2\n\
x /bad 10 y 0 10\n\
\xe9t\xe9 /lat1 ext4 defaults\n\
tmpfs /tmp tmpfs defaults";

#[test]
fn entries_are_read_as_the_script_read_them_and_every_byte_survives() {
    let file = File::parse(Some(FSTAB));
    assert_eq!(file.content(), FSTAB.to_vec());
    let names: Vec<&str> = file.entries().keys().copied().collect();
    assert_eq!(names, ["/", "/mnt/my disk", "/lat1", "/tmp"]);
    let disk = file.entry(file.find("/mnt/my disk").unwrap());
    assert_eq!(disk.device, "LABEL=my disk");
    assert_eq!((disk.dump, disk.pass), (0, 0));
    assert_eq!(file.entry(file.find("/lat1").unwrap()).device, "été");
    assert_eq!(file.find("/"), Some(1), "the first '/' line wins");
    assert_eq!(
        resource(file.entry(1), "unmounted"),
        json!({"name": "/", "ensure": "unmounted", "device": "UUID=1", "fstype": "ext4",
               "options": ["errors=remount-ro"], "dump": 0, "pass": 1})
        .as_object()
        .cloned()
        .unwrap()
    );
}

#[test]
fn numbers_and_escapes_read_as_fstab_5_writes_them() {
    assert_eq!(small_number(b"007"), Some(7));
    assert_eq!(small_number(b"10"), None);
    assert_eq!(small_number(b"-1"), None);
    assert_eq!(small_number(b"99999999999999999999999"), None);
    assert_eq!(unescape(b"a\\040b\\134\\8"), "a b\\\\8");
    assert_eq!(escape("a b\\"), b"a\\040b\\134".to_vec());
    assert_eq!(escape("a#"), b"a#".to_vec());
}

#[test]
fn a_changed_field_keeps_the_spacing_and_missing_dump_is_added() {
    let mut line = Line::new(b"  a\t/m  ext4 noatime  \r\n".to_vec());
    line.set_field("pass", Value::Number(2));
    assert_eq!(line.raw, b"  a\t/m  ext4 noatime 0 2  \r\n".to_vec());
    line.set_field("options", Value::Options(vec!["ro".into(), "x y".into()]));
    assert_eq!(line.raw, b"  a\t/m  ext4 ro,x\\040y 0 2  \r\n".to_vec());
    assert_eq!(line.entry.as_ref().unwrap().options, ["ro", "x y"]);
    let mut line = Line::new(b"a /m ext4 defaults".to_vec());
    line.set_field("dump", Value::Number(1));
    assert_eq!(line.raw, b"a /m ext4 defaults 1".to_vec());
}

#[test]
fn options_filled_in_before_a_dump_are_reported_and_never_asked_empty() {
    let (_dir, place) = fake_root();
    let mut file = File::parse(Some(b"proc /proc proc\n"));
    let (changes, _) = apply_update(
        &call(),
        &place,
        &update("/proc", json!({"dump": 8})),
        &mut file,
    )
    .unwrap();
    assert_eq!(
        changes,
        vec![
            Change::new("dump", 0, 8),
            Change::new("options", json!([]), json!(["defaults"])),
        ],
        "what the file now says is what is reported"
    );
    assert_eq!(file.content(), b"proc /proc proc defaults 8\n".to_vec());

    let mut file = File::parse(Some(b"proc /proc proc\n"));
    let err = apply_update(
        &call(),
        &place,
        &update("/proc", json!({"options": [], "pass": 2})),
        &mut file,
    )
    .unwrap_err();
    assert!(
        err.message.contains("options: must not be empty"),
        "{}",
        err.message
    );
}

#[test]
fn mount_points_and_values_are_checked_with_the_scripts_messages() {
    assert_eq!(mount_point_problem("none", "swap"), None);
    assert_eq!(mount_point_problem("/", "ext4"), None);
    let problems = [
        ("", "must not be empty"),
        ("/a\u{200b}", "must not contain control characters"),
        ("/a ", "must not start or end with whitespace"),
        (
            "swap",
            "is only a mount point for swap entries (fstype 'swap')",
        ),
        ("srv", "must be an absolute path (or 'none' for swap)"),
        ("/a//b", "must not contain '//' or end with '/'"),
        ("/a/", "must not contain '//' or end with '/'"),
        ("/a/../b", "must not contain '.' or '..' components"),
    ];
    for (name, problem) in problems {
        assert_eq!(mount_point_problem(name, "ext4"), Some(problem), "{name:?}");
    }
    let message = |attr: &str, value: Json| check_value(attr, &value).unwrap_err().message;
    assert_eq!(message("device", json!(5)), "device: 5 is not a string");
    assert_eq!(message("device", json!("")), "device: must not be empty");
    assert_eq!(
        message("device", json!(" a")),
        "device: ' a' starts or ends with whitespace"
    );
    assert_eq!(
        message("fstype", json!("ext4,")),
        format!("fstype: 'ext4,' is not {FSTYPE_SHAPE}")
    );
    assert_eq!(
        check_value("fstype", &json!("udf,iso9660")),
        Ok(Value::Text("udf,iso9660".into()))
    );
    assert_eq!(
        message("options", json!("ro")),
        "options: \"ro\" is not an array of strings"
    );
    assert_eq!(
        message("options", json!([])),
        "options: must not be empty (use ['defaults'])"
    );
    assert_eq!(
        message("options", json!(["a b"])),
        "options: 'a b' contains whitespace or a control character"
    );
    assert_eq!(
        message("pass", json!(true)),
        "pass: true is not an integer from 0 to 9"
    );
    assert_eq!(
        message("dump", json!(1.0)),
        "dump: 1.0 is not an integer from 0 to 9"
    );
    assert_eq!(
        message("dump", json!(10)),
        "dump: 10 is not an integer from 0 to 9"
    );
}

#[test]
fn messages_quote_json_as_python_dumps_it() {
    assert_eq!(
        crate::text::python_dumps(&json!({"a": [1, "é\n"]}), true),
        "{\"a\": [1, \"\\u00e9\\n\"]}"
    );
    assert_eq!(crate::text::python_dumps(&json!("é"), false), "\"é\"");
    let err = check_should(&update("/a", json!({"ensure": "up"}))).unwrap_err();
    assert_eq!(
        err.message,
        "ensure: \"up\" is not one of present, defined, absent, mounted, unmounted"
    );
    let err = check_should(&update("/a", json!({"name": "/b"}))).unwrap_err();
    assert_eq!(err.message, "name: cannot rename '/a' to '/b'");
    let err = check_should(&update("/a", json!({"size": 1}))).unwrap_err();
    assert_eq!(err.message, "unknown attribute 'size'");
}

#[test]
fn updates_create_change_and_delete_with_the_scripts_reports() {
    let (_dir, place) = fake_root();
    let mut file = File::parse(Some(b"tmpfs /tmp tmpfs defaults 0 0"));
    let (changes, action) = apply_update(
        &call(),
        &place,
        &update(
            "/srv/a b",
            json!({"device": "d#v", "fstype": "ext4", "pass": 2}),
        ),
        &mut file,
    )
    .unwrap();
    assert_eq!(action, []);
    assert_eq!(
        changes,
        vec![
            Change::new("ensure", "absent", "present"),
            Change::new("device", Json::Null, "d#v"),
            Change::new("fstype", Json::Null, "ext4"),
            Change::new("options", Json::Null, json!(["defaults"])),
            Change::new("dump", Json::Null, 0),
            Change::new("pass", Json::Null, 2),
        ]
    );
    assert_eq!(
        file.content(),
        b"tmpfs /tmp tmpfs defaults 0 0\nd#v\t/srv/a\\040b\text4\tdefaults\t0\t2\n".to_vec()
    );

    let (changes, _) = apply_update(
        &call(),
        &place,
        &update("/tmp", json!({"options": ["defaults"], "dump": 1})),
        &mut file,
    )
    .unwrap();
    assert_eq!(
        changes,
        vec![Change::new("dump", 0, 1)],
        "unchanged values are not reported"
    );

    let err = apply_update(
        &call(),
        &place,
        &update("/x", json!({"device": "d"})),
        &mut file,
    )
    .unwrap_err();
    assert_eq!(err.message, "creating '/x' needs fstype");
    let mut swap = File::parse(Some(b"/dev/sda3 none swap sw\n"));
    let err = apply_update(
        &call(),
        &place,
        &update("none", json!({"fstype": "ext4"})),
        &mut swap,
    )
    .unwrap_err();
    assert_eq!(
        err.message,
        "name: the mount point 'none' is only a mount point for swap entries (fstype 'swap')"
    );

    let (changes, _) = apply_update(
        &call(),
        &place,
        &update("/tmp", json!({"ensure": "absent"})),
        &mut file,
    )
    .unwrap();
    assert_eq!(changes, vec![Change::new("ensure", "unmounted", "absent")]);
    assert!(!String::from_utf8_lossy(&file.content()).contains("/tmp"));
}

#[test]
fn mounting_below_a_fake_root_is_refused_before_anything_changes() {
    let (_dir, place) = fake_root();
    let mut file = File::parse(Some(b"tmpfs /tmp tmpfs defaults 0 0\n"));
    let err = apply_update(
        &call(),
        &place,
        &update("/tmp", json!({"ensure": "mounted", "options": ["ro"]})),
        &mut file,
    )
    .unwrap_err();
    assert_eq!(
        err.message,
        format!(
            "ensure: refusing to mount or unmount '/tmp' below the root '{}': not here",
            place.prefix
        )
    );
    assert!(!file.changed);
}

/// Lines as the kernel writes them: optional fields (shared:1) before
/// the `-`, a bind mount (its file system root not `/`), escapes in the
/// mount point and source, a mount stacked over another.
const MOUNTINFO: &[u8] = b"22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n\
30 22 0:5 / /mnt/my\\040disk rw,nosuid - tmpfs my\\040tmpfs rw\n\
31 22 8:1 /srv/data /fake/root/srv ro,relatime shared:5 master:2 - ext4 /dev/sda1 rw\n\
32 22 0:6 / /fake/root rw - tmpfs tmpfs rw\n\
33 31 0:7 / /fake/root/srv ro,noexec - tmpfs top rw\n\
34 22 0:8 / /fake/rooted rw - tmpfs tmpfs rw\n\
35 22 0:9 / /fake/root/tab\\011and\\134 rw - tmpfs tmpfs rw\n\
short line\n\
36 22 0:10 / /no/separator rw shared:1 ext4 /dev/x rw\n";

#[test]
fn mountinfo_is_read_with_its_escapes_and_optional_fields() {
    let mounts = mountinfo::parse(MOUNTINFO, "/");
    let points: Vec<&str> = mounts.keys().map(String::as_str).collect();
    assert_eq!(
        points,
        [
            "/",
            "/mnt/my disk",
            "/fake/root/srv",
            "/fake/root",
            "/fake/rooted",
            "/fake/root/tab\tand\\"
        ]
    );
    let disk = &mounts["/mnt/my disk"];
    assert_eq!(disk.source, "my tmpfs");
    assert_eq!(disk.fstype, "tmpfs");
    assert_eq!(disk.options, ["rw", "nosuid"]);
    // The bind mount of /srv/data, and over it a tmpfs: the top one is
    // what the mount point shows.
    let srv = &mounts["/fake/root/srv"];
    assert_eq!((srv.id.as_str(), srv.source.as_str()), ("33", "top"));
    assert_eq!(srv.options, ["ro", "noexec"]);
}

#[test]
fn below_a_root_only_its_mounts_are_read_as_its_own_paths() {
    for root in ["/fake/root", "/fake/root/"] {
        let mounts = mountinfo::parse(MOUNTINFO, root);
        let points: Vec<&str> = mounts.keys().map(String::as_str).collect();
        // The root itself is '/'; /fake/rooted is not below /fake/root.
        assert_eq!(points, ["/srv", "/", "/tab\tand\\"], "{root}");
    }
    assert_eq!(
        mountinfo::below_root("/fake/root/a", "/fake/root"),
        Some("/a".into())
    );
    assert_eq!(mountinfo::below_root("/fake/rootx", "/fake/root"), None);
    assert_eq!(mountinfo::below_root("/a", "/"), Some("/a".into()));
}

#[test]
fn two_lists_of_one_namespace_share_their_mount_ids() {
    let other = b"40 39 8:1 / / rw - ext4 /dev/sda1 rw\n41 40 0:5 / /mnt rw - tmpfs t rw\n";
    assert!(mountinfo::same_namespace(MOUNTINFO, MOUNTINFO));
    assert!(!mountinfo::same_namespace(MOUNTINFO, other));
    assert!(!mountinfo::same_namespace(b"", MOUNTINFO));
}

#[test]
fn a_get_reads_the_file_again_once_it_changed() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("etc")).unwrap();
    let path = dir.path().join("etc/fstab");
    let call = Call {
        root: dir.path().to_owned(),
        ..call()
    };
    let names = |call: &Call| -> Vec<String> {
        let found = Fstab.get(call, &[]).unwrap();
        found
            .iter()
            .map(|r| r["name"].as_str().unwrap().to_owned())
            .collect()
    };
    assert!(names(&call).is_empty(), "no fstab: no entries");
    std::fs::write(&path, "a /a e d\n").unwrap();
    assert_eq!(names(&call), ["/a"]);
    assert_eq!(names(&call), ["/a"], "read again from the copy kept");
    // Written in place (with another size: two writes within one tick of
    // the file system's clock may leave the times as they were).
    std::fs::write(&path, "b /bb e d\n").unwrap();
    assert_eq!(names(&call), ["/bb"]);
    // Replaced by another file.
    std::fs::write(dir.path().join("etc/new"), "c /c e d 0 0\n").unwrap();
    std::fs::rename(dir.path().join("etc/new"), &path).unwrap();
    assert_eq!(names(&call), ["/c"]);
}

#[test]
fn control_characters_are_refused_in_every_attribute_and_shown_escaped() {
    use crate::native::hosts::tests::{controls, shown};
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("etc")).unwrap();
    let call = Call {
        root: dir.path().to_owned(),
        ..call()
    };
    for c in controls() {
        let value = format!("a{c}b");
        let cases = [
            (
                "name",
                update(&value, json!({"device": "d", "fstype": "ext4"})),
            ),
            (
                "device",
                update("/m", json!({"device": value, "fstype": "ext4"})),
            ),
            (
                "fstype",
                update("/m", json!({"device": "d", "fstype": value})),
            ),
            (
                "options",
                update(
                    "/m",
                    json!({"device": "d", "fstype": "ext4", "options": ["ro", value]}),
                ),
            ),
        ];
        for (attribute, update) in cases {
            let outcomes = Fstab.set(&call, &[update]).unwrap();
            let err = outcomes[0].as_ref().unwrap_err();
            assert!(
                err.message.contains(attribute) && err.message.contains(&shown(c)),
                "{c:?} in {attribute}: {}",
                err.message
            );
        }
        let found = Fstab.get(&call, std::slice::from_ref(&value)).unwrap();
        let message = found[0]["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(&shown(c)), "{found:?}");
    }
    assert!(
        !dir.path().join("etc/fstab").exists(),
        "nothing was written"
    );
}

#[test]
fn a_device_starting_with_a_hash_is_refused_as_no_reader_agrees_on_its_escape() {
    let message = |value: Json| check_value("device", &value).unwrap_err().message;
    assert_eq!(
        message(json!("#dev")),
        "device: '#dev' starts with '#', which would make its line a comment"
    );
    assert_eq!(
        check_value("device", &json!("a#b")),
        Ok(Value::Text("a#b".into()))
    );
}

#[test]
fn options_are_split_as_libmount_splits_them_and_checked_to_read_back() {
    assert_eq!(split_options("ro,,noatime,"), ["ro", "noatime"]);
    assert_eq!(
        split_options(r#"ro,context="a:b:s0:c1,c2",noexec"#),
        ["ro", r#"context="a:b:s0:c1,c2""#, "noexec"]
    );
    // libmount reads nothing from an unclosed quote on.
    assert_eq!(split_options(r#"ro,x="a,noexec"#), ["ro"]);
    assert_eq!(
        check_value("options", &json!(["ro", r#"context="a,b""#])),
        Ok(Value::Options(vec!["ro".into(), r#"context="a,b""#.into()]))
    );
    let message = |value: Json| check_value("options", &value).unwrap_err().message;
    assert_eq!(
        message(json!(["ro", r#"x="a"#])),
        r#"options: 'x="a' has a '"' that is not closed, which would hide it and every option after it from libmount"#
    );
    assert_eq!(
        message(json!(["a,b"])),
        "options: 'a,b' contains ',' outside double quotes; give each option as its own element"
    );
    assert_eq!(
        message(json!([r#""a",b"#])),
        r#"options: '"a",b' contains ',' outside double quotes; give each option as its own element"#
    );
    let file = File::parse(Some(b"d /m ext4 ro,context=\"a,b\" 0 0\n"));
    assert_eq!(
        file.entry(0).options,
        ["ro", "context=\"a,b\""],
        "read as libmount reads it"
    );
}

#[test]
fn a_line_glibc_would_cut_is_refused_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("etc")).unwrap();
    std::fs::write(dir.path().join("etc/fstab"), "d /m ext4 defaults 0 0\n").unwrap();
    let call = Call {
        root: dir.path().to_owned(),
        ..call()
    };
    // "d\t/n\text4\t" + options + "\t0\t0\n": 4095 bytes fit, 4096 do not.
    let fits = "o".repeat(4095 - 15);
    let long = "o".repeat(4096 - 15);
    let outcomes = Fstab
        .set(
            &call,
            &[update(
                "/n",
                json!({"device": "d", "fstype": "ext4", "options": [long]}),
            )],
        )
        .unwrap();
    assert_eq!(
        outcomes[0].as_ref().unwrap_err().message,
        "the line of '/n' would be 4096 bytes long, more than the 4095 glibc's getmntent reads \
         (it would cut the rest); nothing was changed"
    );
    let outcomes = Fstab
        .set(
            &call,
            &[update("/m", json!({"options": ["x".repeat(4096)]}))],
        )
        .unwrap();
    assert!(outcomes[0].is_err(), "an update is refused too");
    assert_eq!(
        std::fs::read(dir.path().join("etc/fstab")).unwrap(),
        b"d /m ext4 defaults 0 0\n"
    );
    let outcomes = Fstab
        .set(
            &call,
            &[update(
                "/n",
                json!({"device": "d", "fstype": "ext4", "options": [fits]}),
            )],
        )
        .unwrap();
    assert!(outcomes[0].is_ok(), "{outcomes:?}");
    let written = std::fs::read(dir.path().join("etc/fstab")).unwrap();
    assert_eq!(written.len(), 23 + 4095);
}

#[test]
fn a_new_entry_goes_before_the_first_entry_mounted_below_it() {
    assert!(is_below("/srv/data", "/srv") && is_below("/srv", "/"));
    assert!(!(is_below("/srvx", "/srv") || is_below("/srv", "/srv") || is_below("none", "/")));
    let (_dir, place) = fake_root();
    let mut file = File::parse(Some(
        b"# top\nswap none swap sw 0 0\n/dev/b /srv/data ext4 defaults 0 2\n/dev/c /srvx ext4 defaults 0 2\n",
    ));
    for (name, device) in [("/srv", "/dev/s"), ("/opt", "/dev/o"), ("/", "/dev/r")] {
        let new = update(name, json!({"device": device, "fstype": "ext4"}));
        apply_update(&call(), &place, &new, &mut file).unwrap();
    }
    assert_eq!(
        String::from_utf8(file.content()).unwrap(),
        "# top\nswap none swap sw 0 0\n/dev/r\t/\text4\tdefaults\t0\t0\n\
         /dev/s\t/srv\text4\tdefaults\t0\t0\n/dev/b /srv/data ext4 defaults 0 2\n\
         /dev/c /srvx ext4 defaults 0 2\n/dev/o\t/opt\text4\tdefaults\t0\t0\n"
    );
}

#[test]
fn a_device_that_reads_as_a_tag_libmount_does_not_know_is_refused() {
    for device in [
        "UUID=1234",
        "LABEL=my disk",
        "PARTUUID=x",
        "ID=y",
        "admin@fsid.cephfs=/",
    ] {
        assert!(check_value("device", &json!(device)).is_ok(), "{device}");
    }
    assert_eq!(
        check_value("device", &json!("uuid=1234"))
            .unwrap_err()
            .message,
        "device: 'uuid=1234' reads as a tag 'uuid', which libmount does not know (it knows \
         LABEL, UUID, PARTLABEL, PARTUUID, ID); it would take it for a file name"
    );
    assert!(check_value("device", &json!("FOO_1=bar")).is_err());
    // An option to fsck and mount, which pass the device and type on.
    for attr in ["device", "fstype"] {
        assert_eq!(
            check_value(attr, &json!("-y")).unwrap_err().message,
            format!(
                "{attr}: '-y' starts with '-', which the programs fstab is given to read as an \
                 option"
            )
        );
    }
    // A tag with no name: findmnt --verify calls it unsupported.
    assert_eq!(
        check_value("device", &json!("=A_9@-0\""))
            .unwrap_err()
            .message,
        "device: '=A_9@-0\"' starts with '=', which reads as a tag with no name"
    );
}

/// libmount reads a line without options, and one with more than six
/// fields (a comment after the pass): so does ral, and a change keeps
/// what follows the pass. A '#' where a number should be is no entry to
/// libmount, nor to ral.
#[test]
fn lines_are_entries_as_libmount_reads_them() {
    let mut file = File::parse(Some(
        b"/dev/a /m ext4 defaults 0 1 # the data disk\nproc /proc proc\n/dev/b /n ext4 defaults # c\n",
    ));
    let names: Vec<&str> = file.entries().keys().copied().collect();
    assert_eq!(names, ["/m", "/proc"]);
    assert_eq!(file.entry(0).pass, 1);
    assert!(file.entry(1).options.is_empty());
    let (_dir, place) = fake_root();
    apply_update(
        &call(),
        &place,
        &update("/m", json!({"pass": 2})),
        &mut file,
    )
    .unwrap();
    apply_update(
        &call(),
        &place,
        &update("/proc", json!({"dump": 1})),
        &mut file,
    )
    .unwrap();
    assert_eq!(
        String::from_utf8(file.content()).unwrap(),
        "/dev/a /m ext4 defaults 0 2 # the data disk\nproc /proc proc defaults 1\n\
         /dev/b /n ext4 defaults # c\n"
    );
    assert_eq!(file.entry(1).options, ["defaults"]);
    // Not entries either: a mount point with a control character or
    // white space at an end, once its escapes are read.
    let odd = File::parse(Some(
        b"/dev/c /x\\011y ext4 defaults\n/dev/d \\040/p ext4 defaults\n/dev/e /q ext4 defaults\n",
    ));
    let names: Vec<&str> = odd.entries().keys().copied().collect();
    assert_eq!(names, ["/q"]);
    // Not an entry: created anew.
    let new = update("/n", json!({"device": "/dev/b", "fstype": "ext4"}));
    let (changes, _) = apply_update(&call(), &place, &new, &mut file).unwrap();
    assert_eq!(changes[0], Change::new("ensure", "absent", "present"));
}

#[test]
fn a_root_held_by_a_shared_mount_is_told_by_its_propagation_group() {
    let info = b"1 0 8:1 / / rw shared:1 - ext4 /dev/vda rw\n\
                 2 1 0:5 / /tmp/private rw - tmpfs tmpfs rw\n\
                 3 1 0:6 / /tmp/shared rw master:4 shared:7 - tmpfs tmpfs rw\n";
    // Held by / (shared:1), by a private mount, by a shared one.
    assert_eq!(
        mountinfo::shared_at(info, "/srv/root").as_deref(),
        Some("shared:1")
    );
    assert_eq!(mountinfo::shared_at(info, "/tmp/private/root"), None);
    assert_eq!(mountinfo::shared_at(info, "/tmp/private"), None);
    assert_eq!(
        mountinfo::shared_at(info, "/tmp/shared/r").as_deref(),
        Some("shared:7")
    );
    // A longer mount point that is not a parent does not hold it.
    assert_eq!(
        mountinfo::shared_at(info, "/tmp/privatex").as_deref(),
        Some("shared:1")
    );
}

#[test]
fn an_options_change_asked_for_is_reported_once() {
    let (_dir, place) = fake_root();
    let mut file = File::parse(Some(b"a /m ext4 defaults 0 0\n"));
    let (changes, _) = apply_update(
        &call(),
        &place,
        &update("/m", json!({"options": ["rw", "noatime"]})),
        &mut file,
    )
    .unwrap();
    assert_eq!(
        changes,
        vec![Change::new(
            "options",
            json!(["defaults"]),
            json!(["rw", "noatime"])
        )],
        "one change for one attribute"
    );
}
