//! What ral writes into the account files, the system reads the same: a
//! property test over generated values of the user and group types. Each
//! case makes and changes accounts with ralsh below a fake root, then
//! reads the root's files with glibc's own parsers (`fgetpwent_r`,
//! `fgetspent_r`, `fgetgrent_r`, `fgetsgent_r`) and checks that they read
//! exactly what `ralsh -j user NAME` and `group NAME` report, and that
//! running the same change again changes nothing. The values include
//! other scripts' letters and combining marks, long texts, ids at and
//! past their limits, names at the length limit, and removals. Values
//! that would be read otherwise (a control character, ':', a member name
//! glibc splits or skips) or leave an account broken (a primary gid no
//! group has, the removal of a user's primary group) must be refused,
//! leaving every file as it was; plain values must be accepted. With `shadow_tools`, `pwck -r` and `grpck -r` (run
//! with `-R`, which chroots: root only) must find nothing new after each
//! change. Shared by tests/ralsh (glibc) and tests/needs (shadow tools).

use std::collections::BTreeMap;
use std::ffi::{CStr, CString};
use std::io::Write as _;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};

use proptest::prelude::*;
use serde_json::{json, Value as Json};

use crate::support::{Run, Sandbox};

const PASSWD: &str = "root:x:0:0:root:/root:/bin/sh\nalice:x:1000:1000:Alice:/home/alice:/bin/sh\n";
const SHADOW: &str = "root:*:19700:0:99999:7:::\nalice:!:19700:0:99999:7:::\n";
const GROUP: &str = "root:x:0:\nstaff:x:50:alice\naudio:x:29:\nalice:x:1000:\n";
/// alice administers staff: an administrators field ral must keep.
const GSHADOW: &str = "root:*::\nstaff:!:alice:alice\naudio:!::\nalice:!::\n";
const GROUPS: [&str; 3] = ["staff", "audio", "root"];

/// Characters of values that every reader reads as written: ASCII, and
/// letters and marks of other scripts (a combining accent, a four-byte
/// emoji, a ligature, the Kelvin sign that folds to 'k'), non-breaking
/// and ideographic spaces, a bidirectional override.
const PLAIN: &[char] = &[
    'a',
    'b',
    'z',
    'A',
    'Z',
    '0',
    '9',
    ' ',
    '.',
    ',',
    '-',
    '_',
    '/',
    '#',
    '+',
    '=',
    '\'',
    '"',
    '\\',
    '$',
    '*',
    '!',
    '(',
    '\u{e9}',
    '\u{df}',
    '\u{65e5}',
    '\u{2713}',
    '\u{a0}',
    '\u{202e}',
    '\u{fb00}',
    '\u{301}',
    '\u{308}',
    '\u{1f600}',
    '\u{212a}',
    '\u{436}',
    '\u{3000}',
    '&',
    '%',
];
/// Characters no account file can hold as they are.
const BAD: &[char] = &[
    '\0', '\u{1}', '\t', '\n', '\r', '\u{1b}', '\u{7f}', '\u{85}', '\u{9f}', '\u{2028}',
    '\u{2029}', ':',
];

/// Whether a text value must be refused: it holds a character glibc or
/// ral would read otherwise.
fn has_bad(text: &str) -> bool {
    text.chars().any(|c| BAD.contains(&c))
}

/// The largest user or group id (4294967295 is -1, "no id", to the
/// system calls).
const ID_MAX: u64 = 4_294_967_294;

/// A user's uid and gid.
type UserIds = (u32, u32);

/// An id given as text, as ral must take it.
enum Id {
    /// A decimal number, written as such.
    Number(u64),
    /// No number at all: refused.
    Bad,
    /// Another way to write one (`00`, `1e3`, ` 1`): taken or refused.
    Unsure,
}

impl Id {
    fn of(text: &str) -> Id {
        match text.parse::<u64>() {
            Ok(n) if n.to_string() == text => Id::Number(n),
            _ if ["-1", "", "x"].contains(&text) => Id::Bad,
            _ => Id::Unsure,
        }
    }
}

/// A text of up to `max` characters, now and then one that must be
/// refused.
fn short_text(max: usize) -> impl Strategy<Value = String> {
    let pool = prop_oneof![
        24 => proptest::sample::select(PLAIN),
        1 => proptest::sample::select(BAD),
    ];
    proptest::collection::vec(pool, 0..max).prop_map(|chars| chars.into_iter().collect())
}

/// A long text of plain characters: longer than a line of the readers
/// with fixed buffers of 1024, 4096 and 8192 bytes would hold.
fn long_text() -> impl Strategy<Value = String> {
    let length = prop_oneof![
        1 => proptest::sample::select(vec![255, 256, 1023, 1024, 4095, 4096, 8191, 8192]),
        1 => 200..9000usize,
    ];
    length.prop_flat_map(|n| {
        proptest::collection::vec(proptest::sample::select(PLAIN), n)
            .prop_map(|chars| chars.into_iter().collect())
    })
}

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        30 => short_text(10),
        1 => long_text(),
    ]
}

/// A path: absolute mostly, below /h or /s so that the shadow tools'
/// checks can be met by making it; long ones made of names of at most
/// 255 bytes, which a directory can have; sometimes relative (refused).
fn path(top: &'static str) -> impl Strategy<Value = String> {
    let long = proptest::collection::vec("[a-z\u{e9}\u{65e5}]{1,80}", 2..30)
        .prop_map(|names| names.join("/"));
    let tail = prop_oneof![
        30 => short_text(10).prop_map(|tail| tail.replace('/', "_")),
        1 => long,
    ];
    (tail, 0..16u8).prop_map(move |(tail, pick)| match pick {
        0 => format!("x{tail}"),
        _ => format!("/{top}/p{tail}"),
    })
}

fn password() -> impl Strategy<Value = (String, bool)> {
    prop_oneof![
        6 => text().prop_map(|t| (t, false)),
        1 => Just(("$6$salt$c29tZWhhc2g".to_owned(), false)),
        1 => Just((String::new(), false)),
        1 => Just((String::new(), true)),
        1 => Just(("!".to_owned(), false)),
    ]
}

/// Member names: mostly the users there are (chosen by index), and some
/// that glibc would read otherwise.
fn member() -> impl Strategy<Value = Member> {
    prop_oneof![
        12 => (0..8usize).prop_map(Member::User),
        1 => proptest::sample::select(vec![
            "alice,root", " alice", "alice ", "+alice", "-alice", "#x", "", "al\0ice", "a:b",
            "al\u{200b}ice", "no-such-user",
        ])
        .prop_map(|bad| Member::Bad(bad.to_owned())),
    ]
}

#[derive(Debug, Clone)]
enum Member {
    User(usize),
    Bad(String),
}

/// User names: those ral makes (shadow-utils' rule: lowercase letters,
/// digits, '_' and '-', starting with a letter or '_', maybe ending in
/// '$', at most 32 characters), the first four most often, and some it
/// refuses (`false`).
const USER_NAMES: [(&str, bool); 10] = [
    ("u0", true),
    ("u1", true),
    ("u2", true),
    ("u3", true),
    ("_s-1$", true),
    ("u1234567890123456789012345678901", true),
    ("u12345678901234567890123456789012", false),
    ("Upper", false),
    ("9lives", false),
    ("a.b", false),
];

fn user_name() -> impl Strategy<Value = usize> {
    prop_oneof![16 => 0..4usize, 1 => 4..USER_NAMES.len()]
}

/// An id as `--attrs-stdin` takes it: at the limits (0, the largest,
/// one more, 2^32, the 16-bit ones), in use, or any.
fn id() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => proptest::sample::select(vec![
            0u64, 1, 29, 50, 999, 1000, 1001, 59999, 60000, 65534, 65535, 65536, 4_294_967_294,
            4_294_967_295, 4_294_967_296,
        ])
        .prop_map(|id| id.to_string()),
        2 => any::<u32>().prop_map(|id| id.to_string()),
        1 => proptest::sample::select(vec!["-1", "", "x", "1e3", "00", "0x10", " 1", "1.0"])
            .prop_map(str::to_owned),
    ]
}

/// User attributes to set; `None` leaves one out.
#[derive(Debug, Clone)]
struct UserAttrs {
    uid: Option<String>,
    gid: Option<String>,
    comment: Option<String>,
    home: Option<String>,
    shell: Option<String>,
    password: Option<(String, bool)>,
    groups: Option<Vec<String>>,
    /// ensure=present, which completes an incomplete account.
    present: bool,
}

fn user_attrs() -> impl Strategy<Value = UserAttrs> {
    let groups = proptest::collection::vec(
        prop_oneof![
            12 => proptest::sample::select(&GROUPS[..]).prop_map(str::to_owned),
            1 => Just("no-such-group".to_owned()),
        ],
        0..3,
    );
    (
        (
            proptest::option::weighted(0.15, id()),
            proptest::option::weighted(0.15, id()),
            proptest::option::of(text()),
            proptest::option::of(path("h")),
        ),
        proptest::option::of(path("s")),
        proptest::option::of(password()),
        proptest::option::of(groups),
        proptest::bool::weighted(0.2),
    )
        .prop_map(
            |((uid, gid, comment, home), shell, password, groups, present)| UserAttrs {
                uid,
                gid,
                comment,
                home,
                shell,
                password,
                groups,
                present,
            },
        )
}

/// Group names: made ones, staff (which alice administers), and the
/// groups made for users u0 and u1 (their primary groups).
const GROUP_NAMES: [&str; 6] = ["g0", "g1", "g2", "staff", "u0", "u1"];

#[derive(Debug, Clone)]
enum Op {
    /// Creates or changes the user `USER_NAMES[N]`.
    User(usize, UserAttrs),
    /// Removes it.
    RemoveUser(usize),
    /// Creates or changes the group `GROUP_NAMES[N]`: its members, and
    /// maybe its gid.
    Group(usize, Vec<Member>, Option<String>),
    /// Removes it (never staff).
    RemoveGroup(usize),
}

fn ops() -> impl Strategy<Value = Vec<Op>> {
    let op = prop_oneof![
        12 => (user_name(), user_attrs()).prop_map(|(n, attrs)| Op::User(n, attrs)),
        1 => user_name().prop_map(Op::RemoveUser),
        4 => (
            0..GROUP_NAMES.len(),
            proptest::collection::vec(member(), 0..4),
            proptest::option::weighted(0.2, id()),
        )
            .prop_map(|(n, members, gid)| Op::Group(n, members, gid)),
        1 => prop_oneof![0..3usize, 4..6usize].prop_map(Op::RemoveGroup),
    ];
    proptest::collection::vec(op, 1..8)
}

/// What a run tried and found, by kind of value.
#[derive(Debug, Default)]
pub struct Counts {
    /// The run's cases and seed.
    pub run: String,
    /// Values tried per attribute (`user.comment`, `group.members`, ...).
    pub tried: BTreeMap<String, usize>,
    pub accepted: usize,
    pub refused: usize,
    /// Users and groups compared with what glibc reads.
    pub compared: usize,
}

impl std::fmt::Display for Counts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let tried: Vec<String> = self.tried.iter().map(|(k, n)| format!("{k} {n}")).collect();
        write!(
            f,
            "{}: values tried: {}; changes accepted {}, refused {}; {} entries compared \
             with glibc; disagreements 0",
            self.run,
            tried.join(", "),
            self.accepted,
            self.refused,
            self.compared
        )
    }
}

/// Runs `default_cases` generated cases (or `RAL_PROPERTY_CASES`); the
/// counts when every one passed.
pub fn run_cases(default_cases: u32, shadow_tools: bool) -> Counts {
    let (mut runner, seed) = crate::property::runner(default_cases);
    let run = crate::property::describe(&runner, seed);
    let counts = std::sync::Mutex::new(Counts {
        run: run.clone(),
        ..Counts::default()
    });
    let result = runner.run(&ops(), |ops| {
        let mut case = Case::new(shadow_tools);
        for op in &ops {
            case.apply(op, &mut counts.lock().unwrap())?;
        }
        Ok(())
    });
    if let Err(err) = result {
        panic!("{run}: {err}");
    }
    counts.into_inner().unwrap()
}

/// One case's fake root and the users made in it so far.
struct Case {
    sandbox: Sandbox,
    users: Vec<String>,
    shadow_tools: bool,
}

impl Case {
    fn new(shadow_tools: bool) -> Case {
        let sandbox = Sandbox::new();
        sandbox.write("etc/passwd", PASSWD);
        sandbox.write("etc/shadow", SHADOW);
        sandbox.write("etc/group", GROUP);
        sandbox.write("etc/gshadow", GSHADOW);
        let case = Case {
            sandbox,
            users: vec!["root".to_owned(), "alice".to_owned()],
            shadow_tools,
        };
        if shadow_tools {
            for home in ["root", "home/alice"] {
                std::fs::create_dir_all(case.sandbox.root().join(home)).unwrap();
            }
            case.make_program("/bin/sh");
        }
        case
    }

    fn files(&self) -> Vec<String> {
        ["passwd", "shadow", "group", "gshadow"]
            .iter()
            .map(|f| self.sandbox.read(&format!("etc/{f}")))
            .collect()
    }

    fn apply(&mut self, op: &Op, counts: &mut Counts) -> Result<(), TestCaseError> {
        let (type_name, name, attrs, must_refuse, plain) = match op {
            Op::User(n, attrs) => {
                let (name, valid) = USER_NAMES[*n];
                let (json, must_refuse, plain) = self.user_request(name, valid, attrs, counts);
                ("user", name, json, must_refuse, plain)
            }
            Op::RemoveUser(n) => {
                let (name, valid) = USER_NAMES[*n];
                *counts.tried.entry("user.ensure".into()).or_default() += 1;
                ("user", name, json!({"ensure": "absent"}), false, valid)
            }
            Op::Group(n, members, gid) => {
                let name = GROUP_NAMES[*n];
                let (json, must_refuse, plain) = self.group_request(name, members, gid, counts);
                ("group", name, json, must_refuse, plain)
            }
            Op::RemoveGroup(n) => {
                let name = GROUP_NAMES[*n];
                *counts.tried.entry("group.ensure".into()).or_default() += 1;
                // As groupdel, ral keeps a group a user needs.
                let primary = self.is_primary_group(name);
                (
                    "group",
                    name,
                    json!({"ensure": "absent"}),
                    primary,
                    !primary,
                )
            }
        };
        let name = name.to_owned();
        let before = self.files();
        let findings = self.findings();
        let run = self.set(type_name, &name, &attrs);
        let what = format!("ralsh {type_name} {name} --attrs-stdin <<< {attrs}");
        match run.status {
            0 => {
                prop_assert!(!must_refuse, "{what} was accepted:\n{run:?}");
                counts.accepted += 1;
                let exists = read_passwd(&self.sandbox.root().join("etc/passwd"))
                    .iter()
                    .any(|entry| entry.name == name);
                self.users.retain(|user| *user != name);
                if exists {
                    self.users.push(name.clone());
                }
                counts.compared += self.check_read_back(&what)?;
                let again = self.set(type_name, &name, &attrs);
                prop_assert_eq!(again.status, 0, "{} again: {:?}", what, again);
                prop_assert!(
                    again.stdout.contains("no changes needed"),
                    "{what} again changed something: {again:?}"
                );
                if self.shadow_tools {
                    self.make_environment();
                    let now = self.findings();
                    let new: Vec<&String> = now.iter().filter(|f| !findings.contains(f)).collect();
                    prop_assert!(new.is_empty(), "{what}: pwck/grpck found {new:?}");
                }
            }
            2 => {
                prop_assert!(!plain, "{what} was refused:\n{run:?}");
                counts.refused += 1;
                prop_assert_eq!(self.files(), before, "{} was refused but wrote", what);
            }
            _ => prop_assert!(false, "{what}: {run:?}"),
        }
        Ok(())
    }

    /// `ralsh TYPE NAME --attrs-stdin` with `attrs` on stdin.
    fn set(&self, type_name: &str, name: &str, attrs: &Json) -> Run {
        let mut command = self
            .sandbox
            .fixture_command(&[type_name, name, "--attrs-stdin"]);
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = command.spawn().unwrap();
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(attrs.to_string().as_bytes()).unwrap();
        drop(stdin);
        let output = child.wait_with_output().unwrap();
        Run {
            status: output.status.code().unwrap_or(-1),
            stdout: String::from_utf8(output.stdout).unwrap(),
            stderr: String::from_utf8(output.stderr).unwrap(),
        }
    }

    /// The users' uids and gids and the groups' gids, by name, as glibc
    /// reads them.
    fn ids(&self) -> (BTreeMap<String, UserIds>, BTreeMap<String, u32>) {
        let etc = self.sandbox.root().join("etc");
        let users = read_passwd(&etc.join("passwd"))
            .into_iter()
            .map(|entry| (entry.name, (entry.uid, entry.gid)))
            .collect();
        let groups = read_group(&etc.join("group"))
            .into_iter()
            .map(|entry| (entry.name, entry.gid))
            .collect();
        (users, groups)
    }

    /// Whether the group `name` is the primary group of a user (its gid
    /// the user's, on no other group's line).
    fn is_primary_group(&self, name: &str) -> bool {
        let etc = self.sandbox.root().join("etc");
        let groups = read_group(&etc.join("group"));
        let Some(gid) = groups.iter().find(|g| g.name == name).map(|g| g.gid) else {
            return false;
        };
        let others = groups.iter().any(|g| g.name != name && g.gid == gid);
        !others
            && read_passwd(&etc.join("passwd"))
                .iter()
                .any(|u| u.gid == gid)
    }

    /// The attributes as `--attrs-stdin` takes them (each value the text
    /// the command line takes: a list as a JSON literal), whether they
    /// must be refused, and whether they must be accepted.
    fn user_request(
        &self,
        name: &str,
        valid: bool,
        attrs: &UserAttrs,
        counts: &mut Counts,
    ) -> (Json, bool, bool) {
        let mut json = serde_json::Map::new();
        let (users, gids) = self.ids();
        let now = users.get(name).copied();
        let uid_now = now.map(|(uid, _)| uid);
        // A new account needs a name ral can make.
        let mut refuse = uid_now.is_none() && !valid;
        let mut either = false;
        let mut count = |attr: &str| *counts.tried.entry(format!("user.{attr}")).or_default() += 1;
        if let Some(uid) = &attrs.uid {
            count("uid");
            match Id::of(uid) {
                Id::Number(uid) => {
                    refuse |= match uid_now {
                        // uid is set at creation only.
                        Some(now) => uid != u64::from(now),
                        None => uid > ID_MAX || users.values().any(|&(u, _)| u64::from(u) == uid),
                    };
                }
                Id::Bad => refuse = true,
                Id::Unsure => either = true,
            }
            json.insert("uid".into(), json!(uid));
        }
        if let Some(gid) = &attrs.gid {
            count("gid");
            match Id::of(gid) {
                Id::Number(gid) => {
                    // A new primary group must exist, as useradd and
                    // usermod require.
                    let changed = now.is_none_or(|(_, g)| u64::from(g) != gid);
                    refuse |=
                        gid > ID_MAX || (changed && !gids.values().any(|&g| u64::from(g) == gid));
                }
                Id::Bad => refuse = true,
                Id::Unsure => either = true,
            }
            json.insert("gid".into(), json!(gid));
        }
        if let Some(comment) = &attrs.comment {
            count("comment");
            refuse |= has_bad(comment);
            json.insert("comment".into(), json!(comment));
        }
        for (attr, value) in [("home", &attrs.home), ("shell", &attrs.shell)] {
            if let Some(path) = value {
                count(attr);
                refuse |= has_bad(path) || !path.starts_with('/');
                json.insert(attr.into(), json!(path));
            }
        }
        if let Some((password, allow)) = &attrs.password {
            count("password");
            refuse |= has_bad(password) || (password.is_empty() && !allow);
            json.insert("password".into(), json!(password));
            if *allow {
                json.insert("allow_empty_password".into(), json!("true"));
            }
        }
        if let Some(groups) = &attrs.groups {
            count("groups");
            refuse |= groups.iter().any(|g| !GROUPS.contains(&g.as_str()));
            json.insert("groups".into(), json!(json!(groups).to_string()));
        }
        if json.is_empty() || attrs.present {
            json.insert("ensure".into(), json!("present"));
        }
        // Every refusal here is for a reason above.
        (Json::Object(json), refuse, !refuse && !either)
    }

    fn group_request(
        &self,
        name: &str,
        members: &[Member],
        gid: &Option<String>,
        counts: &mut Counts,
    ) -> (Json, bool, bool) {
        *counts.tried.entry("group.members".into()).or_default() += 1;
        let mut refuse = false;
        let mut either = false;
        let names: Vec<String> = members
            .iter()
            .map(|member| match member {
                Member::User(n) => self.users[n % self.users.len()].clone(),
                Member::Bad(bad) => {
                    refuse = true;
                    bad.clone()
                }
            })
            .collect();
        let mut json = serde_json::Map::new();
        json.insert("members".into(), json!(json!(names).to_string()));
        if let Some(gid) = gid {
            *counts.tried.entry("group.gid".into()).or_default() += 1;
            let (_, gids) = self.ids();
            match Id::of(gid) {
                Id::Number(gid) => {
                    refuse |= match gids.get(name) {
                        // gid is set at creation only.
                        Some(&now) => gid != u64::from(now),
                        None => {
                            gid > ID_MAX
                                || gids
                                    .iter()
                                    .any(|(g, &id)| g != name && u64::from(id) == gid)
                        }
                    };
                }
                Id::Bad => refuse = true,
                Id::Unsure => either = true,
            }
            json.insert("gid".into(), json!(gid));
        }
        (Json::Object(json), refuse, !refuse && !either)
    }

    /// Fails unless glibc reads every account and group as ralsh reports
    /// it, and gshadow agrees with group; the number of accounts and
    /// groups compared.
    fn check_read_back(&self, what: &str) -> Result<usize, TestCaseError> {
        let etc = self.sandbox.root().join("etc");
        let passwd = read_passwd(&etc.join("passwd"));
        let shadow = read_shadow(&etc.join("shadow"));
        let groups = read_group(&etc.join("group"));
        let gshadow = read_gshadow(&etc.join("gshadow"));
        let listed = |type_name: &str| -> BTreeMap<String, Json> {
            let doc = self.sandbox.ralsh(&["-j", type_name]).expect(0).json();
            doc["resources"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| (r["name"].as_str().unwrap().to_owned(), r.clone()))
                .collect()
        };
        let (users, ral_groups) = (listed("user"), listed("group"));
        prop_assert_eq!(users.len(), passwd.len(), "{}: users", what);
        prop_assert_eq!(ral_groups.len(), groups.len(), "{}: groups", what);
        for user in &self.users {
            let ral = &users[user];
            let entry = passwd.iter().find(|e| &e.name == user);
            prop_assert!(entry.is_some(), "{what}: glibc finds no user {user}");
            let entry = entry.unwrap();
            let glibc_groups: Vec<&str> = groups
                .iter()
                .filter(|g| g.members.contains(user))
                .map(|g| g.name.as_str())
                .collect();
            let password = &shadow.iter().find(|e| &e.name == user).unwrap().password;
            let shown_password = match password.is_empty() {
                true => "",
                false => "[redacted]",
            };
            prop_assert_eq!(
                json!({"uid": entry.uid, "gid": entry.gid, "comment": entry.gecos,
                    "home": entry.dir, "shell": entry.shell, "groups": glibc_groups,
                    "password": shown_password}),
                json!({"uid": ral["uid"], "gid": ral["gid"], "comment": ral["comment"],
                    "home": ral["home"], "shell": ral["shell"], "groups": ral["groups"],
                    "password": ral["password"]}),
                "{}: glibc reads user {} otherwise than ral reports it",
                what,
                user
            );
        }
        for group in &groups {
            let ral = &ral_groups[&group.name];
            prop_assert_eq!(
                json!({"gid": group.gid, "members": group.members}),
                json!({"gid": ral["gid"], "members": ral["members"]}),
                "{}: glibc reads group {} otherwise than ral reports it",
                what,
                &group.name
            );
            let shadowed = gshadow.iter().find(|g| g.name == group.name);
            prop_assert!(
                shadowed.is_some(),
                "{what}: no gshadow line for {}",
                group.name
            );
            let shadowed = shadowed.unwrap();
            prop_assert_eq!(
                &shadowed.members,
                &group.members,
                "{}: gshadow members",
                what
            );
            let admins: Vec<&str> = match group.name.as_str() {
                "staff" => vec!["alice"],
                _ => Vec::new(),
            };
            prop_assert_eq!(
                &shadowed.admins,
                &admins,
                "{}: gshadow administrators",
                what
            );
        }
        Ok(self.users.len() + groups.len())
    }

    /// What pwck and grpck say of the root's files (nothing without
    /// `shadow_tools`).
    fn findings(&self) -> Vec<String> {
        if !self.shadow_tools {
            return Vec::new();
        }
        let mut said = Vec::new();
        for tool in ["pwck", "grpck"] {
            let output = Command::new(Path::new("/usr/sbin").join(tool))
                .arg("-r")
                .arg("-R")
                .arg(self.sandbox.root())
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&output.stdout).into_owned()
                + &String::from_utf8_lossy(&output.stderr);
            said.extend(
                text.lines()
                    .filter(|line| !line.ends_with("no changes"))
                    .map(|line| format!("{tool}: {line}")),
            );
        }
        said
    }

    /// Makes every home directory and shell the accounts name, below the
    /// root, as pwck looks for them there.
    fn make_environment(&self) {
        for entry in read_passwd(&self.sandbox.root().join("etc/passwd")) {
            let home = self.sandbox.root().join(entry.dir.trim_start_matches('/'));
            let _ = std::fs::create_dir_all(home);
            if !entry.shell.is_empty() {
                self.make_program(&entry.shell);
            }
        }
    }

    fn make_program(&self, path: &str) {
        let file = self.sandbox.root().join(path.trim_start_matches('/'));
        if file.exists() {
            return;
        }
        let _ = std::fs::create_dir_all(file.parent().unwrap());
        if std::fs::write(&file, "").is_ok() {
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
    }
}

// ------------------------------------------------------------ glibc
//
// The account files read by glibc's own parsers, through a FILE opened
// on each. Their strings are taken as UTF-8 (what ral wrote is): a field
// that is not would be a disagreement, and fails.

struct PasswdEntry {
    name: String,
    uid: u32,
    gid: u32,
    gecos: String,
    dir: String,
    shell: String,
}

struct ShadowEntry {
    name: String,
    password: String,
}

struct GroupEntry {
    name: String,
    gid: u32,
    members: Vec<String>,
}

struct GshadowEntry {
    name: String,
    admins: Vec<String>,
    members: Vec<String>,
}

/// glibc's `struct sgrp` (gshadow.h), which the libc crate lacks.
#[repr(C)]
struct Sgrp {
    sg_namp: *mut libc::c_char,
    sg_passwd: *mut libc::c_char,
    sg_adm: *mut *mut libc::c_char,
    sg_mem: *mut *mut libc::c_char,
}

extern "C" {
    fn fgetsgent_r(
        stream: *mut libc::FILE,
        result_buf: *mut Sgrp,
        buffer: *mut libc::c_char,
        buflen: libc::size_t,
        result: *mut *mut Sgrp,
    ) -> libc::c_int;
}

/// Room for the longest line the tests write, many times over.
const BUFFER: usize = 1 << 16;

/// Calls `next` on the open FILE of `path` until it says there is no
/// more (a non-zero status), collecting what it returns.
fn read_all<T>(
    path: &Path,
    mut next: impl FnMut(*mut libc::FILE, &mut [libc::c_char]) -> Option<T>,
) -> Vec<T> {
    let name = CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: both strings are NUL-terminated and outlive the call.
    let file = unsafe { libc::fopen(name.as_ptr(), c"re".as_ptr()) };
    assert!(!file.is_null(), "{}: cannot open", path.display());
    let mut buffer = vec![0 as libc::c_char; BUFFER];
    let mut entries = Vec::new();
    while let Some(entry) = next(file, &mut buffer) {
        entries.push(entry);
    }
    // SAFETY: `file` was opened above and is closed once.
    unsafe { libc::fclose(file) };
    entries
}

/// A C string of glibc's, as UTF-8.
fn text_of(ptr: *const libc::c_char) -> String {
    // SAFETY: glibc's entries point into the buffer given, at
    // NUL-terminated strings, while the buffer lives.
    let bytes = unsafe { CStr::from_ptr(ptr) }.to_bytes();
    String::from_utf8(bytes.to_vec()).expect("glibc read UTF-8 that ral wrote")
}

/// A NULL-terminated list of C strings of glibc's.
fn list_of(mut ptr: *mut *mut libc::c_char) -> Vec<String> {
    let mut list = Vec::new();
    // SAFETY: glibc's lists are arrays of string pointers ending in a
    // null one, in the buffer given, while it lives.
    unsafe {
        while !(*ptr).is_null() {
            list.push(text_of(*ptr));
            ptr = ptr.add(1);
        }
    }
    list
}

fn read_passwd(path: &Path) -> Vec<PasswdEntry> {
    read_all(path, |file, buffer| {
        // SAFETY: a zeroed passwd is a valid value of this plain struct.
        let mut entry: libc::passwd = unsafe { std::mem::zeroed() };
        let mut found: *mut libc::passwd = std::ptr::null_mut();
        // SAFETY: `file` is open; `entry`, `buffer` (with its length) and
        // `found` are valid for the call.
        let status = unsafe {
            libc::fgetpwent_r(
                file,
                &mut entry,
                buffer.as_mut_ptr(),
                buffer.len(),
                &mut found,
            )
        };
        (status == 0 && !found.is_null()).then(|| PasswdEntry {
            name: text_of(entry.pw_name),
            uid: entry.pw_uid,
            gid: entry.pw_gid,
            gecos: text_of(entry.pw_gecos),
            dir: text_of(entry.pw_dir),
            shell: text_of(entry.pw_shell),
        })
    })
}

fn read_shadow(path: &Path) -> Vec<ShadowEntry> {
    read_all(path, |file, buffer| {
        // SAFETY: a zeroed spwd is a valid value of this plain struct.
        let mut entry: libc::spwd = unsafe { std::mem::zeroed() };
        let mut found: *mut libc::spwd = std::ptr::null_mut();
        // SAFETY: as for fgetpwent_r.
        let status = unsafe {
            libc::fgetspent_r(
                file,
                &mut entry,
                buffer.as_mut_ptr(),
                buffer.len(),
                &mut found,
            )
        };
        (status == 0 && !found.is_null()).then(|| ShadowEntry {
            name: text_of(entry.sp_namp),
            password: text_of(entry.sp_pwdp),
        })
    })
}

fn read_group(path: &Path) -> Vec<GroupEntry> {
    read_all(path, |file, buffer| {
        // SAFETY: a zeroed group is a valid value of this plain struct.
        let mut entry: libc::group = unsafe { std::mem::zeroed() };
        let mut found: *mut libc::group = std::ptr::null_mut();
        // SAFETY: as for fgetpwent_r.
        let status = unsafe {
            libc::fgetgrent_r(
                file,
                &mut entry,
                buffer.as_mut_ptr(),
                buffer.len(),
                &mut found,
            )
        };
        (status == 0 && !found.is_null()).then(|| GroupEntry {
            name: text_of(entry.gr_name),
            gid: entry.gr_gid,
            members: list_of(entry.gr_mem),
        })
    })
}

fn read_gshadow(path: &Path) -> Vec<GshadowEntry> {
    read_all(path, |file, buffer| {
        let mut entry = Sgrp {
            sg_namp: std::ptr::null_mut(),
            sg_passwd: std::ptr::null_mut(),
            sg_adm: std::ptr::null_mut(),
            sg_mem: std::ptr::null_mut(),
        };
        let mut found: *mut Sgrp = std::ptr::null_mut();
        // SAFETY: as for fgetpwent_r; `Sgrp` is laid out as glibc's.
        let status = unsafe {
            fgetsgent_r(
                file,
                &mut entry,
                buffer.as_mut_ptr(),
                buffer.len(),
                &mut found,
            )
        };
        (status == 0 && !found.is_null()).then(|| GshadowEntry {
            name: text_of(entry.sg_namp),
            admins: list_of(entry.sg_adm),
            members: list_of(entry.sg_mem),
        })
    })
}
