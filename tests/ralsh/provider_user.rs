//! The bundled `user::etc_passwd` provider end to end through ralsh on a fake
//! root: accounts in etc/passwd and etc/shadow, with supplementary groups in
//! etc/group and etc/gshadow, edited in place and never through useradd(8).

use std::ffi::{OsStr, OsString};
use std::io::Write as _;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::{json, Value as Json};
use tempfile::TempDir;

use crate::support::Sandbox;

const PASSWD: &str = "root:x:0:0:root:/root:/bin/bash\ndaemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n# a comment stays\nalice:x:1000:1000:Alice,,,:/home/alice:/bin/bash\n";
const HASH: &str = "$6$c2FsdHNhbHQ$NotARealHashJustATestValue0123456789abcdefABCDEF/.";
const GROUP: &str = "root:x:0:\ndaemon:x:1:\nstaff:x:50:alice\nalice:x:1000:\n";
const GSHADOW: &str = "root:*::\ndaemon:*::\nstaff:!::alice\nalice:!::\n";

fn shadow() -> String {
    format!(
        "root:*:19700:0:99999:7:::\ndaemon:*:19700:0:99999:7:::\nalice:{HASH}:19700:0:99999:7:::\n"
    )
}

fn user_sandbox() -> Sandbox {
    let sandbox = Sandbox::new();
    sandbox.write("etc/passwd", PASSWD);
    sandbox.write("etc/shadow", &shadow());
    sandbox.write("etc/group", GROUP);
    sandbox.write("etc/gshadow", GSHADOW);
    sandbox
}

/// Every file the provider may touch, to compare before and after.
pub fn files(sandbox: &Sandbox) -> Vec<String> {
    ["etc/passwd", "etc/shadow", "etc/group", "etc/gshadow"]
        .iter()
        .map(|f| sandbox.read(f))
        .collect()
}

#[test]
fn user_lists_and_finds_accounts_with_the_password_redacted() {
    let sandbox = user_sandbox();
    let run = sandbox.ralsh(&["-j", "user"]);
    let doc = run.expect(0).json();
    assert!(!run.stdout.contains(HASH) && !run.stderr.contains(HASH));
    let ral = json!({"type": "user", "provider": "user::etc_passwd"});
    assert_eq!(
        doc["resources"][0],
        json!({"name": "root", "ensure": "present", "uid": 0, "gid": 0, "comment": "root",
            "home": "/root", "shell": "/bin/bash", "groups": [], "password": "[redacted]",
            "password_min_age": 0, "password_max_age": 99999, "password_warn_days": 7,
            "expiry": "absent", "ral": ral})
    );
    assert_eq!(doc["resources"].as_array().unwrap().len(), 3);
    let run = sandbox.ralsh(&["-j", "user", "alice"]);
    let doc = run.expect(0).json();
    assert!(!run.stdout.contains(HASH) && !run.stderr.contains(HASH));
    assert_eq!(
        doc["resource"],
        json!({"name": "alice", "ensure": "present", "uid": 1000, "gid": 1000,
            "comment": "Alice,,,", "home": "/home/alice", "shell": "/bin/bash",
            "groups": ["staff"], "password": "[redacted]", "password_min_age": 0,
            "password_max_age": 99999, "password_warn_days": 7, "expiry": "absent",
            "ral": ral})
    );
    let run = sandbox.ralsh(&["user", "alice"]);
    run.expect(0).stdout_has("password           => [redacted]");
    assert!(!run.stdout.contains(HASH) && !run.stderr.contains(HASH));
}

#[test]
fn user_is_created_with_defaults_changed_and_refuses_a_new_uid() {
    let sandbox = user_sandbox();
    sandbox
        .ralsh(&["user", "bob", "managehome=true"])
        .expect(0)
        .stdout_has("ensure: 'absent' -> 'present'");
    assert_eq!(
        sandbox.read("etc/passwd"),
        format!("{PASSWD}bob:x:1001:1001::/home/bob:/bin/sh\n")
    );
    assert_eq!(sandbox.read("etc/group"), format!("{GROUP}bob:x:1001:\n"));
    assert_eq!(sandbox.read("etc/gshadow"), format!("{GSHADOW}bob:!::\n"));
    let shadow_now = sandbox.read("etc/shadow");
    let added = shadow_now.strip_prefix(shadow().as_str()).unwrap();
    assert!(
        added.starts_with("bob:!:") && added.ends_with(":0:99999:7:::\n"),
        "{added}"
    );
    let home = std::fs::metadata(sandbox.root().join("home/bob")).unwrap();
    assert!(home.is_dir());
    assert_eq!(home.permissions().mode() & 0o7777, 0o755);

    let run = sandbox.ralsh(&["user", "bob", "shell=/bin/bash", "groups=staff"]);
    run.expect(0)
        .stdout_has("shell: '/bin/sh' -> '/bin/bash'")
        .stdout_has("groups: [] -> ['staff']");
    assert!(sandbox
        .read("etc/passwd")
        .ends_with("bob:x:1001:1001::/home/bob:/bin/bash\n"));
    assert!(sandbox.read("etc/group").contains("staff:x:50:alice,bob\n"));
    assert!(sandbox.read("etc/gshadow").contains("staff:!::alice,bob\n"));

    let before = files(&sandbox);
    sandbox
        .ralsh(&["user", "bob", "shell=/bin/bash", "groups=staff"])
        .expect(0)
        .stdout_has("no changes needed");
    let run = sandbox.ralsh(&["user", "bob", "uid=5"]);
    run.expect(2)
        .stderr_has("attribute 'uid' can only be set when 'bob' is created");
    assert_eq!(files(&sandbox), before);
}

#[test]
fn user_delete_removes_the_account_and_its_memberships() {
    let sandbox = user_sandbox();
    sandbox
        .ralsh(&["user", "alice", "ensure=absent"])
        .expect(0)
        .stdout_has("ensure: 'present' -> 'absent'");
    assert_eq!(
        sandbox.read("etc/passwd"),
        PASSWD.replace("alice:x:1000:1000:Alice,,,:/home/alice:/bin/bash\n", "")
    );
    assert_eq!(
        sandbox.read("etc/shadow"),
        "root:*:19700:0:99999:7:::\ndaemon:*:19700:0:99999:7:::\n"
    );
    assert_eq!(sandbox.read("etc/group"), GROUP.replace("50:alice", "50:"));
    assert_eq!(
        sandbox.read("etc/gshadow"),
        GSHADOW.replace("!::alice", "!::")
    );
    sandbox
        .ralsh(&["user", "alice", "ensure=absent"])
        .expect(0)
        .stdout_has("no changes needed");
}

#[test]
fn user_noop_and_bad_values_leave_every_file_alone() {
    let sandbox = user_sandbox();
    let before = files(&sandbox);
    sandbox
        .ralsh(&["-n", "user", "bob", "managehome=true", "groups=staff"])
        .expect(0)
        .stdout_has("ensure: 'absent' -> 'present'");
    sandbox
        .ralsh(&["-n", "user", "alice", "ensure=absent"])
        .expect(0)
        .stdout_has("ensure: 'present' -> 'absent'");
    assert_eq!(files(&sandbox), before);
    assert!(!sandbox.root().join("home").exists());

    let run = sandbox.ralsh(&["user", "alice", "groups=staff,nope"]);
    run.expect(2).stderr_has("groups: unknown group 'nope'");
    let run = sandbox.ralsh(&["user", "alice", "shell=bash"]);
    run.expect(2)
        .stderr_has("shell: 'bash' is not an absolute path");
    let run = sandbox.ralsh(&["user", "Bad:Name", "ensure=present"]);
    run.stderr_has("name: 'Bad:Name' is not a valid user name");
    run.expect(2);
    assert_eq!(files(&sandbox), before);
}

#[test]
fn user_that_could_never_exist_is_unknown_not_absent() {
    let sandbox = user_sandbox();
    // A valid name that is missing could be created: absent.
    let doc = sandbox.ralsh(&["-j", "user", "bob"]).expect(0).json();
    assert_eq!(doc["resource"]["ensure"], "absent");
    // An invalid name could not: not found, with the reason at info level.
    let run = sandbox.ralsh(&["--log-level", "info", "user", "Bad:Name"]);
    run.expect(1)
        .stderr_has("'Bad:Name' is not a valid user name; no such user can be created")
        .stderr_has("no resource named 'Bad:Name'");
}

// ------------------------------------------------------ against Python
//
// The user provider is native code (src/native/passwd.rs) that replaced a
// Python one, kept as the reference in tests/fixtures/reference/. These
// tests run both directly on fake roots (RALSH_ROOT_DIR), the native one
// through its providers/etc_passwd.prov, and compare them; a `python3`
// stub that fails loudly, first on PATH, shows that the native answers
// come without Python.

const LIST_ALL: &[u8] = br#"{"names":[]}"#;

fn providers_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("providers")
}

/// PATH with `dirs` first.
fn path_with(dirs: &[&Path]) -> OsString {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let rest: Vec<PathBuf> = std::env::split_paths(&path).collect();
    std::env::join_paths(dirs.iter().map(|d| d.to_path_buf()).chain(rest)).unwrap()
}

fn executable(path: &Path, script: &str) {
    std::fs::write(path, script).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// A directory holding a `python3` that prints nothing on stdout and exits
/// with status 99.
fn python_stub() -> TempDir {
    let dir = tempfile::tempdir().unwrap();
    executable(
        &dir.path().join("python3"),
        "#!/bin/sh\necho 'python3 stub: Python was run' >&2\nexit 99\n",
    );
    dir
}

/// Runs `command` with only PATH and RALSH_ROOT_DIR=root set and `input` on
/// stdin.
fn run_provider(mut command: Command, root: &Path, path: &OsStr, input: &[u8]) -> Output {
    command
        .env_clear()
        .env("PATH", path)
        .env("RALSH_ROOT_DIR", root)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command.spawn().expect("the provider runs");
    // A provider that exits without reading (the stub) breaks the pipe.
    let _ = child.stdin.take().unwrap().write_all(input);
    child.wait_with_output().unwrap()
}

/// The native provider, `etc_passwd.prov ARGS`, with `dirs` first on PATH
/// and the native providers' program after them.
fn native(root: &Path, dirs: &[&Path], args: &[&str], input: &[u8]) -> Output {
    let program = Path::new(env!("CARGO_BIN_EXE_ral-provider"));
    let mut dirs = dirs.to_vec();
    dirs.push(program.parent().unwrap());
    let mut command = Command::new(providers_dir().join("etc_passwd.prov"));
    command.args(args);
    run_provider(command, root, &path_with(&dirs), input)
}

/// The Python reference on its own, `etc_passwd.py ARGS`, on the
/// toolkit of providers/.
fn python(root: &Path, args: &[&str], input: &[u8]) -> Output {
    let reference = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/reference");
    let script = reference.join("etc_passwd.py");
    let mut command = Command::new("python3");
    command
        .args(["-I", "-S", "-c"])
        .arg(
            "import runpy, sys\n\
             sys.path[:0] = sys.argv[1:3]\n\
             sys.argv = sys.argv[3:]\n\
             runpy.run_path(sys.argv[0], run_name='__main__')\n",
        )
        .arg(providers_dir())
        .arg(&reference)
        .arg(script)
        .args(args);
    run_provider(command, root, &path_with(&[]), input)
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn parse(what: &str, output: &Output) -> Json {
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "{what}: stdout is not JSON ({e}):\n{}",
            text(&output.stdout)
        )
    })
}

/// The attributes the native provider reads that the Python one never
/// had (password aging and expiry): tested on their own, in
/// account_aging.rs.
const NATIVE_ONLY: [&str; 4] = [
    "password_min_age",
    "password_max_age",
    "password_warn_days",
    "expiry",
];

/// An answer of the native provider with every resource's
/// [`NATIVE_ONLY`] attributes left out, the others in their order.
fn without_native_only(mut doc: Json) -> Json {
    let strip = |res: &mut Json| {
        if let Some(map) = res.as_object_mut() {
            *map = std::mem::take(map)
                .into_iter()
                .filter(|(key, _)| !NATIVE_ONLY.contains(&key.as_str()))
                .collect();
        }
    };
    if let Some(list) = doc.get_mut("resources").and_then(Json::as_array_mut) {
        list.iter_mut().for_each(strip);
    }
    doc
}

/// Fails unless both ran successfully with the same stderr and the same
/// JSON on stdout (keys in the same order too), but for the native
/// provider's [`NATIVE_ONLY`] attributes.
#[track_caller]
fn assert_same_answer(what: &str, native: &Output, python: &Output) {
    assert_eq!(
        (native.status.code(), text(&native.stderr)),
        (python.status.code(), text(&python.stderr)),
        "{what}: exit status and stderr differ (native, python)"
    );
    assert_eq!(native.status.code(), Some(0), "{what}");
    let ours = without_native_only(parse(what, native));
    let theirs = parse(what, python);
    assert_eq!(
        ours, theirs,
        "{what}: the native provider and Python disagree"
    );
    assert_eq!(ours.to_string(), theirs.to_string(), "{what}: key order");
}

/// Lists all users below `root` through the native provider, which must
/// answer as Python does; then again with a `python3` stub first on PATH,
/// whose result `judge` checks (given the first answer). Returns Python's
/// answer.
#[track_caller]
fn check_listing(what: &str, root: &Path, judge: impl Fn(&str, &Output, &Output)) -> Output {
    let expected = python(root, &["ral_action=get"], LIST_ALL);
    let stub = python_stub();
    let answer = native(root, &[], &["ral_action=get"], LIST_ALL);
    assert_same_answer(what, &answer, &expected);
    let alone = native(root, &[stub.path()], &["ral_action=get"], LIST_ALL);
    judge(what, &answer, &alone);
    expected
}

/// Checks that the native provider lists all users below `root` exactly
/// as Python does, and without running Python. Returns Python's answer.
#[track_caller]
fn assert_fast_path(what: &str, root: &Path) -> Json {
    let expected = check_listing(what, root, |what, answer, alone| {
        assert_eq!(
            (alone.status.code(), text(&alone.stderr)),
            (Some(0), text(&answer.stderr)),
            "{what}: the native provider ran Python or failed"
        );
        assert_eq!(alone.stdout, answer.stdout, "{what}");
    });
    parse(what, &expected)
}

/// Files the awk wrapper of the Python provider handed to Python (anything
/// unusual): the native provider answers them itself, as Python does,
/// without running it. Returns Python's answer (stdout and stderr).
#[track_caller]
fn assert_falls_back(what: &str, root: &Path) -> (String, String) {
    let expected = check_listing(what, root, |what, answer, alone| {
        assert_eq!(
            (alone.status.code(), &alone.stdout, text(&alone.stderr)),
            (Some(0), &answer.stdout, text(&answer.stderr)),
            "{what}: the native provider ran Python or answered otherwise"
        );
    });
    (text(&expected.stdout), text(&expected.stderr))
}

/// A fake root holding `files` (path below the root, bytes).
fn fake_root(files: &[(&str, &[u8])]) -> TempDir {
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir(root.path().join("etc")).unwrap();
    for (relative, contents) in files {
        std::fs::write(root.path().join(relative), contents).unwrap();
    }
    root
}

/// The user resources of a listing by name, and their groups.
fn groups_by_user(listing: &Json) -> Vec<(String, Json)> {
    listing["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["name"].as_str().unwrap().to_owned(), r["groups"].clone()))
        .collect()
}

#[test]
fn user_listing_fast_path_answers_as_python_without_running_it() {
    let plain = user_sandbox();
    let listing = assert_fast_path("plain", plain.root());
    assert_eq!(listing["resources"].as_array().unwrap().len(), 3);
    assert_eq!(listing["resources"][2]["password"], HASH);

    // Several groups per user, several members per group, a user in no
    // group, unknown members, spaces and repeats in member lists, and a
    // repeated group name (its first line wins).
    let root = fake_root(&[
        (
            "etc/passwd",
            b"root:x:0:0:root:/root:/bin/bash\nalice:x:1000:1000:Alice:/home/alice:/bin/bash\n\
              bob:x:1001:1001:Bob:/home/bob:/bin/sh\ncarol:x:1002:1002::/home/carol:/bin/sh\n",
        ),
        (
            "etc/group",
            b"root:x:0:\nstaff:x:50:alice,bob\nwheel:x:10: bob , alice,,alice\naudio:x:29:ghost,bob\n\
              empty:x:30:\nstaff:x:51:carol\nusers:x:100:nobody,ghost\n",
        ),
        (
            "etc/shadow",
            b"root:*:19700:0:99999:7:::\nalice:$6$a$b:19700:0:99999:7:::\nbob::19700:0:99999:7:::\n",
        ),
        ("etc/gshadow", b"root:*::\nstaff:!::alice,bob\n"),
    ]);
    let listing = assert_fast_path("groups", root.path());
    assert_eq!(
        groups_by_user(&listing),
        [
            ("root".to_owned(), json!([])),
            ("alice".to_owned(), json!(["staff", "wheel"])),
            ("bob".to_owned(), json!(["staff", "wheel", "audio"])),
            ("carol".to_owned(), json!([])),
        ]
    );
    assert_eq!(listing["resources"][2]["password"], "");
    assert!(listing["resources"][3].get("password").is_none());

    // Repeated names (the first line wins, in shadow too), names awk would
    // compare as numbers, and characters JSON escapes.
    let root = fake_root(&[
        (
            "etc/passwd",
            br#"alice:x:1000:1000:first:/home/alice:/bin/bash
alice:x:2000:2000:second:/home/alice2:/bin/sh
01:x:1:1:zero one:/:/bin/sh
1:x:2:2:one:/:/bin/sh
1e0:x:3:3:one e zero:/:/bin/sh
quote:x:4:4:say "hi" \o/ {}[],:/home/"q":/bin/\sh
"#,
        ),
        ("etc/group", b"g1:x:5:01\ng2:x:6:1,1e0\nback\\slash:x:7:quote\n"),
        (
            "etc/shadow",
            b"alice:first:1:0:99999:7:::\nalice:second:1:0:99999:7:::\n1:one:::::::\n01:zero-one:::::::\n",
        ),
    ]);
    let listing = assert_fast_path("duplicates", root.path());
    assert_eq!(
        groups_by_user(&listing),
        [
            ("alice".to_owned(), json!([])),
            ("01".to_owned(), json!(["g1"])),
            ("1".to_owned(), json!(["g2"])),
            ("1e0".to_owned(), json!(["g2"])),
            ("quote".to_owned(), json!(["back\\slash"])),
        ]
    );
    assert_eq!(listing["resources"][0]["comment"], "first");
    assert_eq!(listing["resources"][0]["password"], "first");
    assert_eq!(listing["resources"][1]["password"], "zero-one");
    assert_eq!(listing["resources"][4]["comment"], r#"say "hi" \o/ {}[],"#);

    // Comments, blank lines and NIS lines are skipped; spaces stay in values
    // but not around members (so no member names " spaced").
    let root = fake_root(&[
        (
            "etc/passwd",
            b"# users\n\n   \n+\n+@admins::::::\n-bob\n  # indented\n-:x:9:9::/:/bin/sh\n\
              root:x:0:0:root:/root:/bin/bash\n\n spaced:x:5:5: a comment :/home/s:/bin/sh \n",
        ),
        ("etc/group", b"# groups\n+\n-staff\n\nstaff:x:50: spaced\n"),
        ("etc/shadow", b"+::::::::\n# x\nroot:*:1:0:99999:7:::\n"),
        ("etc/gshadow", b"# x\n+\n"),
    ]);
    let listing = assert_fast_path("comments", root.path());
    assert_eq!(
        groups_by_user(&listing),
        [
            ("root".to_owned(), json!([])),
            (" spaced".to_owned(), json!([])),
        ]
    );
    assert_eq!(listing["resources"][1]["shell"], "/bin/sh ");

    // No line break at the end of any file.
    let root = fake_root(&[
        (
            "etc/passwd",
            b"root:x:0:0:root:/root:/bin/bash\nalice:x:1000:1000::/home/alice:/bin/sh",
        ),
        ("etc/group", b"staff:x:50:alice"),
        ("etc/shadow", b"alice:$6$x:19700:0:99999:7:::"),
        ("etc/gshadow", b"staff:!::alice"),
    ]);
    let listing = assert_fast_path("no final line break", root.path());
    assert_eq!(listing["resources"][1]["groups"], json!(["staff"]));
    assert_eq!(listing["resources"][1]["password"], "$6$x");

    // Missing shadow: no passwords; missing group and gshadow: no groups.
    let root = fake_root(&[
        ("etc/passwd", PASSWD.as_bytes()),
        ("etc/group", GROUP.as_bytes()),
    ]);
    let listing = assert_fast_path("no shadow", root.path());
    assert_eq!(listing["resources"][2]["groups"], json!(["staff"]));
    assert!(listing["resources"][2].get("password").is_none());
    let root = fake_root(&[
        ("etc/passwd", PASSWD.as_bytes()),
        ("etc/shadow", shadow().as_bytes()),
    ]);
    let listing = assert_fast_path("no group", root.path());
    assert_eq!(listing["resources"][2]["groups"], json!([]));
    assert_eq!(listing["resources"][2]["password"], HASH);

    // The extreme ids, and leading zeros (Python reads them as integers).
    let root = fake_root(&[(
        "etc/passwd",
        b"root:x:0:0:root:/root:/bin/bash\nnobody:x:4294967294:4294967294::/:/bin/false\n\
          padded:x:0007:000:::\nlong:x:00000000000004294967294:1::/:/bin/sh\n",
    )]);
    let listing = assert_fast_path("ids", root.path());
    let ids: Vec<(Json, Json)> = listing["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["uid"].clone(), r["gid"].clone()))
        .collect();
    assert_eq!(
        ids,
        [
            (json!(0), json!(0)),
            (json!(4294967294u64), json!(4294967294u64)),
            (json!(7), json!(0)),
            (json!(4294967294u64), json!(1)),
        ]
    );

    // Nothing at all, and empty files.
    let root = fake_root(&[]);
    assert_eq!(
        assert_fast_path("no files", root.path()),
        json!({"resources": []})
    );
    let root = fake_root(&[
        ("etc/passwd", b""),
        ("etc/group", b""),
        ("etc/shadow", b""),
        ("etc/gshadow", b""),
    ]);
    assert_eq!(
        assert_fast_path("empty files", root.path()),
        json!({"resources": []})
    );
}

#[test]
fn user_listing_falls_back_to_python_on_anything_unusual() {
    let passwd = |extra: &[u8]| -> Vec<u8> { [PASSWD.as_bytes(), extra].concat() };
    // Bytes outside printable ASCII: Python decodes and cleans them.
    for (what, line, shown) in [
        (
            "UTF-8",
            &b"zoe:x:1003:1003:Zo\xc3\xab:/home/zoe:/bin/sh\n"[..],
            "Zo\u{eb}",
        ),
        (
            "Latin-1",
            b"zoe:x:1003:1003:Zo\xeb:/home/zoe:/bin/sh\n",
            "Zo\u{eb}",
        ),
        ("tab", b"zoe:x:1003:1003:Zo\te:/home/zoe:/bin/sh\n", "Zo?e"),
        ("NUL", b"zoe:x:1003:1003:Zo\0e:/home/zoe:/bin/sh\n", "Zo?e"),
        (
            "DEL",
            b"zoe:x:1003:1003:Zo\x7fe:/home/zoe:/bin/sh\n",
            "Zo?e",
        ),
    ] {
        let root = fake_root(&[("etc/passwd", &passwd(line))]);
        let (stdout, _) = assert_falls_back(what, root.path());
        assert!(
            stdout.contains(&format!("\"comment\": \"{shown}\"")),
            "{what}: {stdout}"
        );
    }
    let crlf = PASSWD.replace('\n', "\r\n");
    let root = fake_root(&[
        ("etc/passwd", crlf.as_bytes()),
        ("etc/group", GROUP.as_bytes()),
    ]);
    let (stdout, _) = assert_falls_back("CRLF", root.path());
    assert!(
        stdout.contains(r#""shell": "/bin/bash", "groups": ["staff"]"#),
        "{stdout}"
    );

    // Lines Python skips with a warning, in each file it reads.
    for (what, file, contents, warning) in [
        (
            "6 fields",
            "etc/passwd",
            passwd(b"bad:x:1:1::/\n"),
            "expected 7 ':'-separated fields, found 6",
        ),
        (
            "empty name",
            "etc/passwd",
            passwd(b":x:1:1::/:/bin/sh\n"),
            "empty name",
        ),
        (
            "uid too big",
            "etc/passwd",
            passwd(b"big:x:4294967295:1::/:/bin/sh\n"),
            "'4294967295' is not a number",
        ),
        (
            "gid not a number",
            "etc/passwd",
            passwd(b"neg:x:1:-1::/:/bin/sh\n"),
            "'-1' is not a number",
        ),
        (
            "group gid",
            "etc/group",
            b"staff:x:5O:alice\n".to_vec(),
            "'5O' is not a number",
        ),
        (
            "group fields",
            "etc/group",
            b"staff:x:50\n".to_vec(),
            "expected 4",
        ),
        (
            "shadow fields",
            "etc/shadow",
            b"alice:x:1:0:99999:7::\n".to_vec(),
            "expected 9",
        ),
        (
            "gshadow fields",
            "etc/gshadow",
            b"staff:!:\n".to_vec(),
            "expected 4",
        ),
    ] {
        let root = fake_root(&[("etc/passwd", PASSWD.as_bytes()), (file, &contents)]);
        let (stdout, stderr) = assert_falls_back(what, root.path());
        assert!(
            stderr.starts_with("warn: ") && stderr.contains(warning),
            "{what}: {stderr}"
        );
        assert!(stdout.contains(r#""name": "alice""#), "{what}: {stdout}");
    }

    // Symlinks: resolved inside the root, as if it were / (so a link to
    // an outside file names a file below the root), and followed there.
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("passwd"), PASSWD).unwrap();
    let root = fake_root(&[]);
    std::os::unix::fs::symlink(
        outside.path().join("passwd"),
        root.path().join("etc/passwd"),
    )
    .unwrap();
    let (stdout, _) = assert_falls_back("passwd out of the root", root.path());
    assert!(
        stdout.contains("which is resolved inside the root") && !stdout.contains("alice"),
        "{stdout}"
    );
    let root = fake_root(&[
        ("etc/passwd", PASSWD.as_bytes()),
        ("etc/real-group", GROUP.as_bytes()),
    ]);
    std::os::unix::fs::symlink("real-group", root.path().join("etc/group")).unwrap();
    let (stdout, _) = assert_falls_back("group link", root.path());
    assert!(stdout.contains(r#""groups": ["staff"]"#), "{stdout}");
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir(root.path().join("etc.d")).unwrap();
    std::fs::write(root.path().join("etc.d/passwd"), PASSWD).unwrap();
    std::os::unix::fs::symlink("etc.d", root.path().join("etc")).unwrap();
    let (stdout, _) = assert_falls_back("etc link", root.path());
    assert!(stdout.contains(r#""name": "alice""#), "{stdout}");

    // Files that are not plain files, and missing directories.
    let root = fake_root(&[("etc/passwd", PASSWD.as_bytes())]);
    std::fs::create_dir(root.path().join("etc/shadow")).unwrap();
    std::fs::write(root.path().join("etc/shadow/alice"), shadow()).unwrap();
    let (stdout, _) = assert_falls_back("shadow directory", root.path());
    assert!(
        stdout.contains(r#""name": "alice""#) && !stdout.contains("password"),
        "{stdout}"
    );
    let root = fake_root(&[("etc/passwd", PASSWD.as_bytes())]);
    std::fs::create_dir(root.path().join("etc/group")).unwrap();
    let (stdout, _) = assert_falls_back("group directory", root.path());
    assert!(stdout.contains("etc/group': Is a directory"), "{stdout}");
    let root = tempfile::tempdir().unwrap();
    let (stdout, _) = assert_falls_back("no etc", root.path());
    assert!(stdout.contains("does not exist"), "{stdout}");
    let (stdout, _) = assert_falls_back("no root", &root.path().join("missing"));
    assert!(stdout.contains("is not a directory"), "{stdout}");
}

/// Both answered the same, or both refused a request that is not one JSON
/// document (the JSON parsers word why differently).
#[track_caller]
fn assert_same_answer_or_refusal(what: &str, native: &Output, python: &Output) {
    let (ours, theirs) = (parse(what, native), parse(what, python));
    let refused = |doc: &Json| {
        doc["error"]["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("stdin is not a JSON document: "))
    };
    if refused(&theirs) {
        assert!(refused(&ours), "{what}: {ours}");
        assert_eq!(ours["error"]["kind"], theirs["error"]["kind"], "{what}");
        assert_eq!(native.status.code(), Some(0), "{what}");
    } else {
        assert_same_answer(what, native, python);
    }
}

#[test]
fn user_provider_answers_every_other_call_as_python_did_without_python() {
    let sandbox = user_sandbox();
    let root = sandbox.root();
    let stub = python_stub();
    let get = ["ral_action=get"];
    // Requests other than the plain listing, byte for byte.
    for input in [
        &br#"{"names":["alice","nobody","Bad:Name"]}"#[..],
        b"{\"names\":[]}\n",
        b"{\"names\":[]}\n\n",
        b" {\"names\":[]}",
        br#"{"names":[],"x":1}"#,
        br#"{"names":[]}{"names":[]}"#,
        b"{\"names\":[\"alice\"]}\n{\"names\":\n[]}",
    ] {
        let what = text(input);
        let answer = native(root, &[], &get, input);
        assert_same_answer_or_refusal(&what, &answer, &python(root, &get, input));
        let alone = native(root, &[stub.path()], &get, input);
        assert_eq!(alone.stdout, answer.stdout, "{what}");
    }
    // Bad requests: refused as Python refused them.
    for input in [
        &b""[..],
        b"\n",
        b"{\"names\":[]",
        b"{\"names\":[]}\n]",
        b"[]",
    ] {
        let what = text(input);
        let answer = native(root, &[], &get, input);
        let expected = python(root, &get, input);
        assert_same_answer_or_refusal(&what, &answer, &expected);
        assert!(
            text(&expected.stdout).starts_with(r#"{"error": "#),
            "{what}"
        );
    }
    // The other spelling of the listing is the same listing.
    let alone = native(root, &[stub.path()], &get, br#"{"names": []}"#);
    assert_eq!(alone.status.code(), Some(0), "{}", text(&alone.stderr));
    let listing = native(root, &[stub.path()], &get, LIST_ALL);
    assert_eq!(alone.stdout, listing.stdout);
    // Other actions and arguments.
    for args in [&["ral_action=get", "extra"][..], &[], &["ral_action=other"]] {
        let what = format!("{args:?}");
        let answer = native(root, &[stub.path()], args, LIST_ALL);
        let expected = python(root, args, LIST_ALL);
        assert_eq!(answer.status.code(), expected.status.code(), "{what}");
        assert_eq!(parse(&what, &answer), parse(&what, &expected), "{what}");
    }
    // describe prints the metadata beside the provider.
    let described = native(root, &[stub.path()], &["ral_action=describe"], b"");
    assert_eq!(
        text(&described.stdout),
        std::fs::read_to_string(providers_dir().join("etc_passwd.yaml")).unwrap()
    );
    let input = br#"{"ral": {"noop": true}, "updates": [{"name": "alice", "is": {}, "should": {"shell": "/bin/zsh"}}]}"#;
    let before = files(&sandbox);
    let set = ["ral_action=set"];
    let answer = native(root, &[stub.path()], &set, input);
    assert_same_answer("set", &answer, &python(root, &set, input));
    assert!(text(&answer.stdout).contains("/bin/zsh"));
    assert_eq!(files(&sandbox), before);
}

#[test]
fn user_listing_through_ralsh_needs_no_python() {
    let sandbox = user_sandbox();
    let stub = python_stub();
    let stubbed = path_with(&[stub.path()]);
    let ralsh = |args: &[&str]| {
        let mut command = sandbox.fixture_command(args);
        command.env("PATH", &stubbed);
        crate::support::run(&mut command)
    };
    let doc = ralsh(&["-j", "user"]).expect(0).json();
    assert_eq!(
        crate::support::names_in(&doc["resources"]),
        ["root", "daemon", "alice"]
    );
    assert_eq!(doc["resources"][2]["groups"], json!(["staff"]));
    assert_eq!(doc["resources"][2]["password"], "[redacted]");
    let run = ralsh(&["user"]);
    run.expect(0)
        .stdout_has("user::etc_passwd { 'root':")
        .stdout_has("user::etc_passwd { 'alice':")
        .stdout_has("groups             => ['staff'],");
    assert!(!run.stdout.contains(HASH) && !run.stderr.contains(HASH));
    // Finding one user needs no Python either (the Python provider's
    // wrapper left that to Python).
    ralsh(&["user", "alice"])
        .expect(0)
        .stdout_has("user::etc_passwd { 'alice':");
}
