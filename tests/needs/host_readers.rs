//! What ral writes, the system reads the same (host): generated values,
//! many of them awkward (names with '#', white space, control and format
//! characters, other scripts' letters, names of digits and dots, names
//! and labels at their length limits, many aliases, addresses in every
//! form, a zone, long comments with anything in them), are written with
//! `ralsh host` below a fake root; then glibc reads the root's hosts
//! file, in a mount namespace of its own where it is bound over
//! /etc/hosts (with an nsswitch.conf that says `hosts: files`): `getent
//! hosts` (gethostent, every entry) and `getent hosts NAME`
//! (gethostbyname2, each name and alias) must read exactly what `ralsh
//! -j host` reports, and `getent ahostsv4 NAME` (getaddrinfo, which
//! reads a name inet_aton takes, `0x10`, as an address) no other
//! address. A value ral refuses leaves the file as it was.

use std::net::IpAddr;
use std::process::Command;

use proptest::prelude::*;
use serde_json::json;

use crate::host::Test;
use crate::property::REFUSED;
use crate::support::{Run, Sandbox};
use crate::tests;

/// This module's tests and what each needs.
pub fn tests() -> Vec<Test> {
    tests![[MountNamespace] hosts_ral_writes_read_the_same_with_glibc]
}

/// What the file holds before a case.
const SEED: &str = "127.0.0.1\tlocalhost\n# the database\n10.0.0.1 db.example db # main\n";

/// Binds the fake root's hosts file (and its nsswitch.conf and host.conf)
/// over the system's, hides nscd (which would answer from the system's
/// file), then prints `getent hosts` and `getent hosts NAME` for each
/// name given, then `getent ahostsv4 NAME`, each after a `## ` line.
const READ: &str = r###"
set -e
etc=$1; shift
mount --make-rprivate /
mount --bind "$etc/hosts" /etc/hosts
mount --bind "$etc/nsswitch.conf" /etc/nsswitch.conf
if [ -e /etc/host.conf ]; then mount --bind "$etc/host.conf" /etc/host.conf; fi
for dir in /run/nscd /var/run/nscd; do
    if [ -d "$dir" ]; then mount -t tmpfs tmpfs "$dir"; fi
done
echo "## *"
getent hosts || true
for name in "$@"; do
    echo "## $name"
    getent hosts "$name" || true
    echo "## $name"
    getent ahostsv4 "$name" || true
done
"###;

/// Characters the values are made of: plain ones, ones a name may not
/// hold, letters and marks of other scripts (a combining accent, a
/// four-byte emoji, the Kelvin sign that folds to 'k'), and control,
/// format and line separator characters.
const PLAIN: &[char] = &['a', 'b', 'z', 'Q', '0', '7', '-', '_', '.'];
const SPECIAL: &[char] = &[
    '#', ' ', '%', ':', '/', '"', '\'', '\\', 'é', '\u{a0}', '\u{3000}',
];
const LETTERS: &[char] = &['ß', 'ж', '日', '\u{301}', '\u{308}', '😀', '\u{212a}', 'İ'];

fn character() -> impl Strategy<Value = char> {
    prop_oneof![
        60 => proptest::sample::select(PLAIN),
        6 => proptest::sample::select(SPECIAL),
        2 => proptest::sample::select(LETTERS),
        1 => proptest::sample::select(REFUSED),
    ]
}

fn piece(max: usize) -> impl Strategy<Value = String> {
    proptest::collection::vec(character(), 0..max).prop_map(|chars| chars.into_iter().collect())
}

/// A label of `length` letters, digits and '-' (not at its ends).
fn label(length: std::ops::RangeInclusive<usize>) -> impl Strategy<Value = String> {
    length.prop_flat_map(|n| {
        proptest::string::string_regex(&format!("[a-z][a-z0-9-]{{{}}}[a-z0-9]", n.max(2) - 2))
            .unwrap()
    })
}

/// A name that can be one: a label, maybe with a domain.
fn word() -> impl Strategy<Value = String> {
    (
        "[a-z][a-z0-9-]{0,6}",
        proptest::option::of("[a-zA-Z0-9_]{1,5}"),
    )
        .prop_map(|(a, b)| match b {
            Some(b) => format!("{a}.{b}"),
            None => a,
        })
}

/// A host name or alias: mostly a word that can be one; names at the
/// limits (labels of 63 and 64 characters, names of 253 and 254); names
/// the resolver reads otherwise (only digits and dots, or inet_aton's
/// hex forms: an address to it); other scripts' letters; reserved ones;
/// sometimes not a name.
fn host_name() -> impl Strategy<Value = String> {
    prop_oneof![
        16 => word(),
        2 => Just("db".to_owned()),
        6 => piece(8).prop_map(|p| format!("h{p}")),
        1 => label(62..=65),
        1 => proptest::collection::vec(label(60..=63), 4..=4).prop_map(|labels| labels.join(".")),
        1 => proptest::sample::select(vec![
            "123", "0", "1.2.3.4", "10.0.0.1", "1.2.3.4.5", "4294967296", "0x10", "1e3", "1-2",
            "1.2.3.4a", "a.1", "127.0.0.1", "localhost", "localhost.localdomain", "LOCALHOST",
            "ip6-localhost", "DB", "xn--bcher-kva", "_gateway", "-x", "x-", "a..b", ".a", "a.",
            "h\u{e9}llo", "b\u{fc}cher", "\u{212a}elvin", "x\u{301}",
        ])
        .prop_map(str::to_owned),
        // Names getaddrinfo reads as addresses (inet_aton's hex forms),
        // and near misses it does not.
        1 => proptest::sample::select(vec![
            "0x10", "0X7f.1", "1.0x2", "0xa.0xb", "0x0a000001", "0XDEADBEEF", "0xfoo", "0x100.1",
        ])
        .prop_map(str::to_owned),
    ]
}

fn ip() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => any::<std::net::Ipv4Addr>().prop_map(|a| a.to_string()),
        2 => any::<std::net::Ipv6Addr>().prop_map(|a| a.to_string()),
        1 => any::<std::net::Ipv6Addr>().prop_map(|a| {
            let s = a.segments();
            format!("{:X}:{:x}:{:x}:{:x}:{:x}:{:x}:{:x}:{:04x}", s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7])
        }),
        1 => any::<std::net::Ipv4Addr>().prop_map(|a| format!("::ffff:{a}")),
        4 => prop::sample::select(vec![
            "::1", "::", "fe80::1%eth0", "fe80::2%2", "010.0.0.1", "10.0.0", "1.2.3.4 ",
            "::1.2.3.4", "0.0.0.0", "255.255.255.255", "0:0:0:0:0:0:0:1", "::ffff:0.0.0.0",
            "::ffff:255.255.255.255", "::0", "1::", "fe80::", "64:ff9b::1.2.3.4", "1.2.3.256",
            "0x7f.1", "127.1", "::ffff:1.2.3", "[::1]", "1:2:3:4:5:6:7:8:9",
            "0000:0000:0000:0000:0000:0000:0000:0001", "00000::1", "ff02::1", "::ffff:7f00:1",
        ])
        .prop_map(str::to_owned),
        1 => piece(8),
    ]
}

/// One `ralsh host NAME --attrs-stdin`: the attributes, as the text ralsh
/// takes on its command line.
#[derive(Debug, Clone)]
struct Change {
    name: String,
    attrs: Vec<(&'static str, String)>,
}

fn change(names: Vec<String>) -> impl Strategy<Value = Change> {
    let attrs = (
        proptest::option::weighted(0.9, ip()),
        proptest::option::of(prop_oneof![
            24 => proptest::collection::vec(host_name(), 0..4),
            1 => proptest::collection::vec(word(), 30..80),
        ]),
        proptest::option::of(prop_oneof![
            24 => piece(16),
            1 => piece(16).prop_map(|p| p.repeat(300)),
        ]),
        proptest::option::weighted(0.1, Just("absent")),
    );
    (proptest::sample::select(names), attrs).prop_map(|(name, (ip, aliases, comment, absent))| {
        let mut attrs = Vec::new();
        attrs.extend(ip.map(|v| ("ip", v)));
        attrs.extend(aliases.map(|v| ("host_aliases", json!(v).to_string())));
        attrs.extend(comment.map(|v| ("comment", v)));
        attrs.extend(absent.map(|v| ("ensure", v.to_owned())));
        Change { name, attrs }
    })
}

/// A case: a few names (no NUL: each is an argument), and changes of
/// them.
fn case() -> impl Strategy<Value = Vec<Change>> {
    let name = host_name().prop_map(|name| name.replace('\0', "\u{1}"));
    proptest::collection::vec(name, 1..4).prop_flat_map(|names| {
        let count = names.len() + 1;
        proptest::collection::vec(change(names), 1..=count)
    })
}

/// An entry as read: its address (in inet_ntop's form when it is one),
/// name and aliases.
type Read = (String, String, Vec<String>);

/// An address in inet_ntop's form, or as it is when it is none.
fn address(text: &str) -> String {
    text.parse::<IpAddr>()
        .map_or_else(|_| text.to_owned(), |ip| ip.to_string())
}

/// What `ralsh -j host` reports.
fn ral_entries(sandbox: &Sandbox) -> Vec<Read> {
    let listed = crate::support::run(sandbox.command().args(["-j", "host"]));
    listed.expect(0);
    let doc = listed.json();
    doc["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let aliases = r["host_aliases"]
                .as_array()
                .unwrap()
                .iter()
                .map(|a| a.as_str().unwrap().to_owned())
                .collect();
            let ip = address(r["ip"].as_str().unwrap());
            (ip, r["name"].as_str().unwrap().to_owned(), aliases)
        })
        .collect()
}

/// What gethostent returns for an entry: the lines it reads only (IPv4,
/// and the IPv6 loopback and IPv4-mapped addresses, as IPv4).
fn as_gethostent_reads(entry: &Read) -> Option<Read> {
    let (ip, name, aliases) = entry;
    let ip: IpAddr = match ip.parse().ok()? {
        IpAddr::V4(v4) => IpAddr::V4(v4),
        IpAddr::V6(v6) if v6.is_loopback() => IpAddr::from([127, 0, 0, 1]),
        IpAddr::V6(v6) => IpAddr::V4(v6.to_ipv4_mapped()?),
    };
    Some((ip.to_string(), name.clone(), aliases.clone()))
}

/// `getent` lines as entries.
fn parse_getent(lines: &[&str]) -> Vec<Read> {
    lines
        .iter()
        .map(|line| {
            let mut words = line.split_whitespace();
            let ip = address(words.next().unwrap());
            let name = words.next().unwrap().to_owned();
            (ip, name, words.map(str::to_owned).collect())
        })
        .collect()
}

/// What getaddrinfo gives for a name: the addresses of `getent ahostsv4`
/// lines (one for each socket type).
fn parse_ahosts(lines: &[&str]) -> Vec<String> {
    let mut addresses: Vec<String> = lines
        .iter()
        .filter_map(|line| line.split_whitespace().next())
        .map(address)
        .collect();
    addresses.dedup();
    addresses
}

/// One name looked up: what gethostbyname2 and getaddrinfo (IPv4) read.
struct Lookup {
    name: String,
    by_name: Vec<Read>,
    by_getaddrinfo: Vec<String>,
}

/// glibc's reading of the fake root's hosts file: every entry, and each
/// of `names` looked up.
fn glibc_reads(sandbox: &Sandbox, names: &[String]) -> (Vec<Read>, Vec<Lookup>) {
    let etc = sandbox.root().join("etc");
    std::fs::write(etc.join("nsswitch.conf"), "hosts: files\n").unwrap();
    std::fs::write(etc.join("host.conf"), "").unwrap();
    let out = Command::new("unshare")
        .args(["-rm", "sh", "-c", READ, "sh"])
        .arg(&etc)
        .args(names)
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).expect("getent prints what ral wrote: UTF-8");
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut sections = stdout.split("## ").skip(1).map(|section| {
        let mut lines = section.lines();
        let key = lines.next().unwrap_or_default().to_owned();
        (key, lines.collect::<Vec<_>>())
    });
    let (_, all) = sections.next().expect("the enumeration");
    let all = parse_getent(&all);
    let mut lookups = Vec::new();
    while let (Some((name, by_name)), Some((_, by_getaddrinfo))) =
        (sections.next(), sections.next())
    {
        lookups.push(Lookup {
            name,
            by_name: parse_getent(&by_name),
            by_getaddrinfo: parse_ahosts(&by_getaddrinfo),
        });
    }
    (all, lookups)
}

/// `ralsh host NAME --attrs-stdin`, the attributes given as JSON.
fn ralsh_change(sandbox: &Sandbox, change: &Change) -> Run {
    let attrs: Vec<(&str, String)> = change.attrs.iter().map(|(k, v)| (*k, v.clone())).collect();
    sandbox.ralsh_attrs_stdin("host", &change.name, &attrs)
}

#[derive(Default, Debug)]
struct Tally {
    cases: usize,
    changes: usize,
    refused: usize,
    /// Values taken that hold a character a name may not, a letter of
    /// another script, or that are long (250 bytes, or 30 aliases).
    special: usize,
    letters: usize,
    long: usize,
    enumerated: usize,
    looked_up: usize,
    /// Names getaddrinfo found (it may find none where the machine has
    /// no IPv4 address of its own: `getent` asks with AI_ADDRCONFIG).
    by_getaddrinfo: usize,
    shared_names: usize,
    disagreements: usize,
}

/// Whether `name` is a name or alias of an entry other than `at`, without
/// regard to case (as the resolver compares).
fn shared(entries: &[Read], at: usize, name: &str) -> bool {
    entries.iter().enumerate().any(|(other, (_, n, aliases))| {
        other != at
            && (n.eq_ignore_ascii_case(name)
                || aliases.iter().any(|a| a.eq_ignore_ascii_case(name)))
    })
}

impl Tally {
    /// Counts a value taken (an alias list as one) by the kinds of
    /// characters it holds and its length.
    fn count(&mut self, values: &[String]) {
        let any = |chars: &[char]| values.iter().any(|v| chars.iter().any(|c| v.contains(*c)));
        self.special += usize::from(any(SPECIAL));
        self.letters += usize::from(any(LETTERS));
        self.long += usize::from(values.len() >= 30 || values.iter().any(|v| v.len() >= 250));
    }
}

fn run_case(changes: &[Change], tally: &mut Tally) {
    let sandbox = Sandbox::new();
    sandbox.write("etc/hosts", SEED);
    let hosts = sandbox.root().join("etc/hosts");
    for change in changes {
        let old = std::fs::read(&hosts).unwrap();
        let ran = ralsh_change(&sandbox, change);
        tally.changes += 1;
        if ran.status != 0 {
            tally.refused += 1;
            assert_eq!(
                std::fs::read(&hosts).unwrap(),
                old,
                "refused, unchanged: {change:?}"
            );
            continue;
        }
        if change.attrs.is_empty() || change.attrs.iter().any(|(k, _)| *k == "ensure") {
            continue;
        }
        let reported = ral_entries(&sandbox);
        let (ip, _, aliases) = reported
            .iter()
            .find(|(_, name, _)| *name == change.name)
            .unwrap_or_else(|| panic!("{change:?} made no entry"));
        for (attr, asked) in &change.attrs {
            match *attr {
                "ip" => assert_eq!(*ip, address(asked), "{change:?}"),
                "host_aliases" => assert_eq!(&json!(aliases).to_string(), asked),
                _ => {}
            }
            let values = match *attr {
                "host_aliases" => aliases.clone(),
                _ => vec![asked.clone()],
            };
            tally.count(&values);
        }
    }
    let ral = ral_entries(&sandbox);
    // Each name and alias, with the entry it names.
    let (entry_of, names): (Vec<usize>, Vec<String>) = ral
        .iter()
        .enumerate()
        .flat_map(|(at, (_, name, aliases))| {
            std::iter::once(name)
                .chain(aliases)
                .map(move |name| (at, name.clone()))
        })
        .unzip();
    let (all, looked_up) = glibc_reads(&sandbox, &names);
    let content = std::fs::read_to_string(&hosts).unwrap();
    let expected: Vec<Read> = ral.iter().filter_map(as_gethostent_reads).collect();
    tally.cases += 1;
    tally.enumerated += expected.len();
    let mut agree = all == expected;
    assert_eq!(all, expected, "gethostent reads otherwise:\n{content}");
    for (&at, lookup) in entry_of.iter().zip(&looked_up) {
        let name = &lookup.name;
        if shared(&ral, at, name) {
            tally.shared_names += 1;
            continue;
        }
        tally.looked_up += 1;
        agree &= lookup.by_name.as_slice() == std::slice::from_ref(&ral[at]);
        assert_eq!(
            lookup.by_name,
            std::slice::from_ref(&ral[at]),
            "looking up {name}:\n{content}"
        );
        // getaddrinfo reads a name inet_aton takes as that address, not
        // the entry's (asked for IPv4, compared for IPv4 entries only).
        let ip = &ral[at].0;
        if ip.parse::<std::net::Ipv4Addr>().is_ok() && !lookup.by_getaddrinfo.is_empty() {
            tally.by_getaddrinfo += 1;
            agree &= lookup.by_getaddrinfo == std::slice::from_ref(ip);
            assert_eq!(
                lookup.by_getaddrinfo,
                std::slice::from_ref(ip),
                "getaddrinfo for {name}:\n{content}"
            );
        }
    }
    if !agree {
        tally.disagreements += 1;
    }
}

fn hosts_ral_writes_read_the_same_with_glibc() {
    let (mut runner, seed) = crate::property::runner(64);
    let run = crate::property::describe(&runner, seed);
    let tally = std::cell::RefCell::new(Tally::default());
    let result = runner.run(&case(), |changes| {
        run_case(&changes, &mut tally.borrow_mut());
        Ok(())
    });
    let tally = tally.into_inner();
    eprintln!(
        "host, {run}: {} cases read back, {} changes tried ({} refused; values taken: {} \
         with a special character, {} with a letter of another script, {} long), {} entries \
         compared with gethostent, {} names and aliases looked up ({} found by getaddrinfo; \
         {} shared with another entry, not looked up), {} disagreements",
        tally.cases,
        tally.changes,
        tally.refused,
        tally.special,
        tally.letters,
        tally.long,
        tally.enumerated,
        tally.looked_up,
        tally.by_getaddrinfo,
        tally.shared_names,
        tally.disagreements
    );
    if let Err(err) = result {
        panic!("{run}: {err}");
    }
}
