//! What ral writes, the system reads the same (mount): generated values,
//! many of them awkward (spaces, '#', backslashes, quotes, commas, '=',
//! control and format characters, Unicode white space, other scripts'
//! letters and combining marks, tags and reserved words, values and lines
//! at and past the readers' lengths, hundreds of options), are written with
//! `ralsh mount` below a fake root; then the root's fstab is read by
//! util-linux's libmount (`findmnt --tab-file FILE -J`) and by glibc's
//! getmntent, which must both read exactly what `ralsh -j mount` reports,
//! and `findmnt --verify` must find no error it did not find before.
//! A value ral refuses leaves the file as it was.

use std::ffi::{CStr, CString};
use std::path::Path;
use std::process::Command;

use proptest::prelude::*;
use serde_json::{json, Value as Json};

use crate::property::REFUSED;
use crate::support::{Run, Sandbox};

/// What the file holds before a case.
const SEED: &str = "# /etc/fstab: static file system information.\n\
                    UUID=0a1b /\text4\terrors=remount-ro 0 1\n\
                    /dev/sdb1 /srv/data xfs defaults,noatime 0 2 # the data disk\n\
                    tmpfs /tmp tmpfs defaults,nosuid 0 0\n\
                    proc /proc proc\n";

/// Characters the values are made of: plain ones; those fstab escapes or
/// splits on, or libmount and getmntent treat specially; letters and
/// marks of other scripts (a combining accent, a four-byte emoji, the
/// Kelvin sign that folds to 'k'), which every reader takes as bytes; and
/// control, format and line separator characters, which no value may
/// hold.
const PLAIN: &[char] = &['a', 'b', 'z', 'A', '0', '9', '.', '-', '_', ':', '@', '+'];
const SPECIAL: &[char] = &[
    '=', ',', '"', '\'', '#', '\\', ' ', 'é', '✓', '\u{a0}', '\u{3000}',
];
const LETTERS: &[char] = &[
    'ß', 'ж', '日', '\u{301}', '\u{308}', '😀', '\u{212a}', 'ǅ', 'İ',
];

fn character() -> impl Strategy<Value = char> {
    prop_oneof![
        80 => proptest::sample::select(PLAIN),
        12 => proptest::sample::select(SPECIAL),
        4 => proptest::sample::select(LETTERS),
        1 => proptest::sample::select(REFUSED),
    ]
}

fn piece(max: usize) -> impl Strategy<Value = String> {
    proptest::collection::vec(character(), 0..max).prop_map(|chars| chars.into_iter().collect())
}

/// Lengths at readers' limits: a file name's 255 bytes, a path's 4096,
/// getmntent's line of 4095 bytes (which a line of one long value
/// reaches from 4030 bytes), and around them.
fn long_length() -> impl Strategy<Value = usize> {
    prop_oneof![
        1 => proptest::sample::select(vec![254, 255, 256, 1000, 4095, 4096, 4097, 5000]),
        1 => 4030..4100usize,
    ]
}

/// A long value of `long_length` bytes, of plain characters and other
/// scripts' letters (so that it can be taken).
fn long_piece() -> impl Strategy<Value = String> {
    let character = prop_oneof![
        40 => proptest::sample::select(PLAIN),
        1 => proptest::sample::select(LETTERS),
    ];
    long_length().prop_flat_map(move |bytes| {
        proptest::collection::vec(character.clone(), bytes / 2..=bytes).prop_map(move |chars| {
            let mut text = String::new();
            for c in chars {
                if text.len() + c.len_utf8() > bytes {
                    break;
                }
                text.push(c);
            }
            while text.len() < bytes {
                text.push('a');
            }
            text
        })
    })
}

fn name() -> impl Strategy<Value = String> {
    prop_oneof![
        8 => (piece(8), piece(6)).prop_map(|(a, b)| format!("/m{a}/{b}x")),
        4 => piece(6).prop_map(|p| format!("/srv/data/{p}x")),
        2 => piece(6).prop_map(|p| format!("/{p}")),
        2 => prop::sample::select(vec![
            "/", "/srv", "/tmp", "none", "swap", "srv", "/m/", "/m/../x", "/m/./x", "//m",
            "/proc", "/none", "/#", "/m#x", "/-", "/=", "/UUID=x", "/\\040",
        ])
        .prop_map(str::to_owned),
        2 => piece(6),
        1 => long_piece().prop_map(|p| format!("/m/{p}")),
        1 => proptest::collection::vec(long_piece(), 1..3).prop_map(|parts| {
            let parts: Vec<String> = parts.iter().map(|p| p.chars().take(200).collect()).collect();
            format!("/m/{}", parts.join("/"))
        }),
    ]
}

fn device() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => (piece(6), piece(6)).prop_map(|(a, b)| format!("/dev/{a}/{b}")),
        2 => piece(8).prop_map(|p| format!("UUID={p}")),
        2 => piece(8).prop_map(|p| format!("LABEL={p}")),
        3 => prop::sample::select(vec![
            "uuid=1", "FOO=bar", "h@fsid.fs=/", "server:/export", "tmpfs", "#dev", "a\\040b",
            "none", "proc", "UUID=", "LABEL=", "PARTUUID=", "ID=", "PARTLABEL=x", "LABEL=\"x\"",
            "LABEL='x'", "LABEL=\"x", "LABEL=a=b", "UUID==", "/dev/sda1 ", "-", "\\\\",
            "\"/dev/sda\"", "//server/share", "[::1]:/export", "LABEL=\u{e9}t\u{e9}",
        ])
            .prop_map(str::to_owned),
        4 => piece(10),
        1 => long_piece(),
        1 => long_piece().prop_map(|p| format!("LABEL={p}")),
    ]
}

fn fstype() -> impl Strategy<Value = String> {
    prop_oneof![
        16 => prop::sample::select(vec![
            "ext4", "xfs", "tmpfs", "swap", "nfs", "udf,iso9660", "auto", "none", "ignore",
            "fuse.sshfs", "nfs4", "ext4,", ",", "proc", "btrfs", "9p", "cifs", "ntfs-3g", "squashfs",
        ])
            .prop_map(str::to_owned),
        2 => piece(6),
        1 => long_piece(),
    ]
}

fn option() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => prop::sample::select(vec![
            "defaults", "ro", "noatime", "x-systemd.automount", "uid=1000",
            "context=\"system_u:object_r:tmp_t:s0:c1,c2\"", "x=\"a", "a,b", "bind", "rbind",
            "noauto", "nofail", "user", "users", "owner", "x-mount.mkdir=0755", "comment=x",
            "=", "==", "x=", "\"\"", "a=\"\"", "\"a,b\"", "ro=rw", "x-systemd.requires=/a",
        ])
        .prop_map(str::to_owned),
        4 => piece(8),
        1 => long_piece(),
    ]
}

/// A number as ralsh takes it on its command line, in range or not.
fn number() -> impl Strategy<Value = String> {
    prop_oneof![
        12 => (0u8..=9).prop_map(|n| n.to_string()),
        1 => prop::sample::select(vec!["10", "-1", "x", "", "07"]).prop_map(str::to_owned),
    ]
}

/// One `ralsh mount NAME --attrs-stdin` of a case: the attributes, as the
/// text ralsh takes on its command line.
#[derive(Debug, Clone)]
struct Change {
    name: String,
    attrs: Vec<(&'static str, String)>,
}

/// A mount point that can be an argument (no NUL).
fn argument_name() -> impl Strategy<Value = String> {
    name().prop_map(|name| name.replace('\0', "\u{1}"))
}

fn change(names: Vec<String>) -> impl Strategy<Value = Change> {
    let attrs = (
        proptest::option::weighted(0.95, device()),
        proptest::option::weighted(0.95, fstype()),
        proptest::option::of(prop_oneof![
            24 => proptest::collection::vec(option(), 1..4),
            2 => Just(Vec::new()),
            1 => proptest::collection::vec(option(), 100..400),
        ]),
        proptest::option::of(number()),
        proptest::option::of(number()),
        proptest::option::weighted(0.1, Just("absent")),
    );
    (proptest::sample::select(names), attrs).prop_map(
        |(name, (device, fstype, options, dump, pass, absent))| {
            let mut attrs = Vec::new();
            attrs.extend(device.map(|v| ("device", v)));
            attrs.extend(fstype.map(|v| ("fstype", v)));
            attrs.extend(options.map(|v| ("options", json!(v).to_string())));
            attrs.extend(dump.map(|v| ("dump", v)));
            attrs.extend(pass.map(|v| ("pass", v)));
            attrs.extend(absent.map(|v| ("ensure", v.to_owned())));
            Change { name, attrs }
        },
    )
}

/// A case: a few names, and changes of them (a name changed twice is
/// created, then updated).
fn case() -> impl Strategy<Value = Vec<Change>> {
    proptest::collection::vec(argument_name(), 1..4).prop_flat_map(|names| {
        let count = names.len() + 1;
        proptest::collection::vec(change(names), 1..=count)
    })
}

/// An entry as one reader reads it: device, mount point, type, options
/// (as one field), dump and pass.
type Read = (String, String, String, String, u64, u64);

/// What `ralsh -j mount` reports, as entries, with each one's options.
fn ral_entries(sandbox: &Sandbox) -> Vec<(Read, Vec<String>)> {
    let listed = crate::support::run(sandbox.command().args(["-j", "mount"]));
    listed.expect(0);
    let doc = listed.json();
    let resources = doc["resources"].as_array().unwrap();
    resources
        .iter()
        .map(|r| {
            let options: Vec<String> = r["options"]
                .as_array()
                .unwrap()
                .iter()
                .map(|o| o.as_str().unwrap().to_owned())
                .collect();
            let read = (
                r["device"].as_str().unwrap().to_owned(),
                r["name"].as_str().unwrap().to_owned(),
                r["fstype"].as_str().unwrap().to_owned(),
                options.join(","),
                r["dump"].as_u64().unwrap(),
                r["pass"].as_u64().unwrap(),
            );
            (read, options)
        })
        .collect()
}

/// What libmount reads: `findmnt --tab-file FILE -J`.
fn libmount_entries(fstab: &Path) -> Vec<Read> {
    let out = Command::new("findmnt")
        .arg("--tab-file")
        .arg(fstab)
        .args(["-J", "-o", "SOURCE,TARGET,FSTYPE,OPTIONS,FREQ,PASSNO"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: Json = serde_json::from_slice(&out.stdout).unwrap();
    let text = |v: &Json| v.as_str().unwrap_or_default().to_owned();
    doc["filesystems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|fs| {
            (
                text(&fs["source"]),
                text(&fs["target"]),
                text(&fs["fstype"]),
                text(&fs["options"]),
                fs["freq"].as_u64().unwrap(),
                fs["passno"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// What glibc's getmntent reads.
fn glibc_entries(fstab: &Path) -> Vec<Read> {
    let path = CString::new(fstab.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: both strings are NUL-terminated and outlive the call.
    let file = unsafe { libc::setmntent(path.as_ptr(), c"r".as_ptr()) };
    assert!(!file.is_null(), "setmntent {}", fstab.display());
    let text = |field: *const libc::c_char| {
        // SAFETY: getmntent's fields are NUL-terminated strings valid
        // until the next call on `file`.
        String::from_utf8(unsafe { CStr::from_ptr(field) }.to_bytes().to_vec())
            .expect("ral writes UTF-8")
    };
    let mut entries = Vec::new();
    loop {
        // SAFETY: `file` is the open stream setmntent returned.
        let entry = unsafe { libc::getmntent(file) };
        if entry.is_null() {
            break;
        }
        // SAFETY: getmntent returned a valid entry.
        let entry = unsafe { &*entry };
        entries.push((
            text(entry.mnt_fsname),
            text(entry.mnt_dir),
            text(entry.mnt_type),
            text(entry.mnt_opts),
            u64::try_from(entry.mnt_freq).unwrap(),
            u64::try_from(entry.mnt_passno).unwrap(),
        ));
    }
    // SAFETY: `file` is open and closed once.
    unsafe { libc::endmntent(file) };
    entries
}

/// The errors of `findmnt --verify` that depend on the values (its parse
/// errors among them), not on this machine: a mount point or device that
/// does not exist here (and so a type `auto` cannot find) is no error of
/// ral's. findmnt calls any source
/// with a `=` that is not a file here an unsupported tag; ral refuses a
/// word before the `=` that is not a tag libmount knows (`uuid=1`), and
/// takes other such sources (Ceph's `user@fsid.fs=/`).
fn verify_errors(fstab: &Path, entries: &[Read]) -> Vec<String> {
    let out = Command::new("findmnt")
        .arg("--verify")
        .arg("--tab-file")
        .arg(fstab)
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    let mut errors: Vec<String> = text
        .lines()
        .filter(|line| line.contains("[E]"))
        .filter(|line| {
            !(line.contains("unreachable on boot required")
                || line.contains("cannot detect on-disk filesystem type"))
        })
        .filter(|line| {
            let Some(source) = line.split_once("unsupported source tag: ").map(|(_, s)| s) else {
                return true;
            };
            let tag = source.split('=').next().unwrap_or_default();
            !entries.iter().any(|e| e.0 == source)
                || tag.is_empty()
                || tag.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        })
        .map(str::to_owned)
        .collect();
    errors.extend(
        text.lines()
            .filter(|line| line.contains("parse error") && !line.starts_with("0 parse errors"))
            .map(str::to_owned),
    );
    errors
}

/// `ralsh mount NAME --attrs-stdin`, the attributes given as JSON.
fn ralsh_change(sandbox: &Sandbox, change: &Change) -> Run {
    let attrs: Vec<(&str, String)> = change.attrs.iter().map(|(k, v)| (*k, v.clone())).collect();
    sandbox.ralsh_attrs_stdin("mount", &change.name, &attrs)
}

#[derive(Default, Debug)]
struct Tally {
    cases: usize,
    changes: usize,
    refused: usize,
    /// Values taken that hold a character fstab escapes or readers treat
    /// specially, a letter of another script, or 250 bytes or more.
    special: usize,
    letters: usize,
    long: usize,
    entries_compared: usize,
    disagreements: usize,
}

impl Tally {
    /// Counts a value taken by the kinds of characters it holds and its
    /// length.
    fn count(&mut self, value: &str) {
        self.special += usize::from(SPECIAL.iter().any(|c| value.contains(*c)));
        self.letters += usize::from(LETTERS.iter().any(|c| value.contains(*c)));
        self.long += usize::from(value.len() >= 250);
    }
}

fn run_case(changes: &[Change], tally: &mut Tally) {
    let sandbox = Sandbox::new();
    sandbox.write("etc/fstab", SEED);
    let fstab = sandbox.root().join("etc/fstab");
    let before = verify_errors(&fstab, &[]);
    assert_eq!(before, Vec::<String>::new(), "the seed is clean");
    for change in changes {
        let old = std::fs::read(&fstab).unwrap();
        let ran = ralsh_change(&sandbox, change);
        tally.changes += 1;
        if ran.status != 0 {
            tally.refused += 1;
            assert_eq!(
                std::fs::read(&fstab).unwrap(),
                old,
                "refused, unchanged: {change:?}"
            );
            assert!(ran.stderr.contains("error"), "{change:?}: {}", ran.stderr);
            continue;
        }
        // What was asked is what ral now reports.
        let reported = ral_entries(&sandbox);
        let entry = reported.iter().find(|(e, _)| e.1 == change.name);
        if change
            .attrs
            .iter()
            .any(|(k, v)| *k == "ensure" && v == "absent")
        {
            assert!(entry.is_none(), "{change:?}");
            continue;
        }
        if change.attrs.is_empty() {
            continue; // no change asked: ralsh shows the entry, if any
        }
        let (entry, options) = entry.unwrap_or_else(|| panic!("{change:?} made no entry"));
        for (attr, asked) in &change.attrs {
            let (got, asked) = match *attr {
                "device" => (entry.0.clone(), asked.clone()),
                "fstype" => (entry.2.clone(), asked.clone()),
                // Options the entry had no field for read as none; a dump
                // or pass written after them fills the field with
                // `defaults`, which ral reports as a change of its own.
                "options" if asked == "[]" && (entry.4 != 0 || entry.5 != 0) => {
                    (json!(options).to_string(), json!(["defaults"]).to_string())
                }
                "options" => (json!(options).to_string(), asked.clone()),
                "dump" => (
                    entry.4.to_string(),
                    asked.parse::<u64>().unwrap().to_string(),
                ),
                _ => (
                    entry.5.to_string(),
                    asked.parse::<u64>().unwrap().to_string(),
                ),
            };
            assert_eq!(got, asked, "{attr}: {change:?}");
            let value = if *attr == "options" { &entry.3 } else { &got };
            tally.count(value);
        }
        tally.count(&change.name);
    }
    let ral: Vec<Read> = ral_entries(&sandbox)
        .into_iter()
        .map(|(read, _)| read)
        .collect();
    let libmount = libmount_entries(&fstab);
    let glibc = glibc_entries(&fstab);
    tally.cases += 1;
    tally.entries_compared += ral.len();
    let content = std::fs::read_to_string(&fstab).unwrap();
    if libmount != ral || glibc != ral {
        tally.disagreements += 1;
    }
    assert_eq!(libmount, ral, "libmount reads otherwise:\n{content}");
    assert_eq!(glibc, ral, "getmntent reads otherwise:\n{content}");
    let errors = verify_errors(&fstab, &ral);
    assert_eq!(errors, Vec::<String>::new(), "findmnt --verify:\n{content}");
}

#[test]
fn mounts_ral_writes_read_the_same_with_libmount_and_glibc() {
    let (mut runner, seed) = crate::property::runner(96);
    let run = crate::property::describe(&runner, seed);
    let tally = std::cell::RefCell::new(Tally::default());
    let result = runner.run(&case(), |changes| {
        run_case(&changes, &mut tally.borrow_mut());
        Ok(())
    });
    let tally = tally.into_inner();
    eprintln!(
        "mount, {run}: {} cases read back, {} changes tried ({} refused; values taken: {} \
         with a special character, {} with a letter of another script, {} of 250 bytes or \
         more), {} entries compared with libmount and getmntent, {} disagreements",
        tally.cases,
        tally.changes,
        tally.refused,
        tally.special,
        tally.letters,
        tally.long,
        tally.entries_compared,
        tally.disagreements
    );
    if let Err(err) = result {
        panic!("{run}: {err}");
    }
}
