//! The bundled `ssh_authorized_key::authorized_keys` provider, end to end
//! through ralsh on a fake root: listing and finding keys of every user in
//! etc/passwd, creating a key (with ~/.ssh 0700 and authorized_keys 0600
//! owned by the user), changing options in place, deleting, noop, idempotence,
//! unrelated lines kept byte for byte, and the refusals (unknown user, a key
//! moving to another user, invalid keys and options, symbolic links out of
//! the root).
//!
//! The key blobs are random bytes in the layout of OpenSSH public keys (a
//! length-prefixed type name, then key data), not real keys.

use std::os::unix::fs::{MetadataExt, PermissionsExt};

use serde_json::json;

use crate::support::Sandbox;

const PASSWD: &str = "root:x:0:0:root:/root:/bin/bash\n\
    daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n\
    alice:x:1000:1000:Alice,,,:/home/alice:/bin/bash\n\
    bob:x:1001:1002:Bob:/home/bob:/bin/sh\n";

const ED_1: &str = "AAAAC3NzaC1lZDI1NTE5AAAAIB50a3nIQpXr2jxsUTP0b4hg2hNb+WrkStPakYJWDCCl";
const ED_2: &str = "AAAAC3NzaC1lZDI1NTE5AAAAIOG0lkAg5vKD5k+WsI0T4OCnpl5CC2n/lJDcNXYMldR5";
const ED_3: &str = "AAAAC3NzaC1lZDI1NTE5AAAAIONl6DjDeYW0LWIFvg2+eELxTq/aTjDqm721/U4Wzet9";
const ED_4: &str = "AAAAC3NzaC1lZDI1NTE5AAAAIEW5BB3GlHWOIct71LmJm85ofh1Qjef0CpUJfaKksKXr";
const ECDSA: &str = "AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTYAAABBBE9knq4Tj0jHXMdxW/uBaudOl6ySN39ypEfXdaTFUZdR7MedEidOojEptuSpljmK5hVVqDKx3W87ugTZcLmo8Jk=";

const ALICE_KEYS: &str = "home/alice/.ssh/authorized_keys";

/// alice's file: a comment, a blank line, a key without a comment, a CRLF
/// line and two managed keys.
fn alice_keys() -> String {
    format!(
        "# alice's keys\n\
         ssh-ed25519 {ED_2} alice@laptop\n\
         \n\
         ssh-ed25519 {ED_3}\n\
         command=\"/usr/bin/rrsync -ro /srv/backup\",restrict ecdsa-sha2-nistp256 {ECDSA}  alice  backup \r\n\
         ssh-ed25519 {ED_4} last key\n"
    )
}

fn sandbox() -> Sandbox {
    let sandbox = Sandbox::new();
    sandbox.write("etc/passwd", PASSWD);
    sandbox.write(ALICE_KEYS, &alice_keys());
    sandbox
}

fn mode(sandbox: &Sandbox, relative: &str) -> u32 {
    let meta = std::fs::symlink_metadata(sandbox.root().join(relative)).unwrap();
    meta.permissions().mode() & 0o7777
}

fn own_uid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

fn is_root() -> bool {
    own_uid() == 0
}

#[test]
fn describe_prints_the_yaml_file() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("providers");
    let output = std::process::Command::new(dir.join("authorized_keys.prov"))
        .arg("ral_action=describe")
        .output()
        .unwrap();
    assert!(output.status.success() && output.stderr.is_empty());
    assert_eq!(
        String::from_utf8(output.stdout).unwrap(),
        std::fs::read_to_string(dir.join("authorized_keys.yaml")).unwrap()
    );
}

#[test]
fn lists_and_finds_the_keys_of_every_user() {
    let sandbox = sandbox();
    sandbox.write(
        "root/.ssh/authorized_keys",
        &format!(
            "from=\"10.0.0.0/8,192.168.0.0/16\",no-pty ssh-ed25519 {ED_1} admin@bastion\n\
             ssh-ed25519 {ED_1} alice@laptop\n"
        ),
    );
    let doc = sandbox
        .ralsh(&["-j", "ssh_authorized_key"])
        .expect(0)
        .json();
    let resources = doc["resources"].as_array().unwrap();
    let names: Vec<&str> = resources
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    // passwd order, then file order; root's alice@laptop comes first and
    // wins; lines without a comment, blank and '#' lines are not reported.
    assert_eq!(
        names,
        ["admin@bastion", "alice@laptop", "alice  backup", "last key"]
    );
    assert_eq!(
        resources[0]["options"],
        json!(["from=\"10.0.0.0/8,192.168.0.0/16\"", "no-pty"])
    );
    assert_eq!(resources[1]["user"], json!("root"));
    assert_eq!(resources[1]["key"], json!(ED_1));
    assert_eq!(
        resources[2],
        json!({
            "name": "alice  backup",
            "ensure": "present",
            "user": "alice",
            "type": "ecdsa-sha2-nistp256",
            "key": ECDSA,
            "options": ["command=\"/usr/bin/rrsync -ro /srv/backup\"", "restrict"],
            "ral": {"type": "ssh_authorized_key", "provider": "ssh_authorized_key::authorized_keys"},
        })
    );

    let doc = sandbox
        .ralsh(&["-j", "ssh_authorized_key", "last key"])
        .expect(0)
        .json();
    assert_eq!(doc["resource"]["user"], json!("alice"));
    assert_eq!(doc["resource"]["type"], json!("ssh-ed25519"));
    assert_eq!(doc["resource"]["options"], json!([]));

    // with -a an unknown key is not found
    let doc = sandbox
        .ralsh(&["-j", "-a", "ssh_authorized_key", "nobody@nowhere"])
        .expect(1)
        .json();
    assert_eq!(doc, json!({}));
}

#[test]
fn creates_a_key_with_a_private_directory_and_file() {
    let sandbox = sandbox();
    std::fs::create_dir_all(sandbox.root().join("home/bob")).unwrap();
    let create = [
        "ssh_authorized_key",
        "bob@desk",
        "user=bob",
        "type=ssh-ed25519",
        &format!("key={ED_1}"),
        "options=no-agent-forwarding,no-pty",
    ];

    // noop creates nothing, not even ~/.ssh
    let mut args = vec!["-n"];
    args.extend(create);
    sandbox
        .ralsh(&args)
        .expect(0)
        .stdout_has("ensure: 'absent' -> 'present' (noop: would change)");
    assert!(!sandbox.root().join("home/bob/.ssh").exists());

    let mut args = vec!["-j"];
    args.extend(create);
    let doc = sandbox.ralsh(&args).expect(0).json();
    let result = &doc["result"][0];
    assert_eq!(result["resource"]["user"], json!("bob"));
    let changed: Vec<&str> = result["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["attr"].as_str().unwrap())
        .collect();
    assert!(changed.contains(&"ensure") && changed.contains(&"key"));
    assert_eq!(
        sandbox.read("home/bob/.ssh/authorized_keys"),
        format!("no-agent-forwarding,no-pty ssh-ed25519 {ED_1} bob@desk\n")
    );
    assert_eq!(mode(&sandbox, "home/bob/.ssh"), 0o700);
    assert_eq!(mode(&sandbox, "home/bob/.ssh/authorized_keys"), 0o600);
    // bob's, where the provider can give them away; otherwise they stay
    // the running user's (not root's, not anyone else's).
    // SAFETY: getegid has no preconditions and cannot fail.
    let owner = match is_root() {
        true => (1001, 1002),
        false => (own_uid(), unsafe { libc::getegid() }),
    };
    for path in ["home/bob/.ssh", "home/bob/.ssh/authorized_keys"] {
        let meta = std::fs::metadata(sandbox.root().join(path)).unwrap();
        assert_eq!((meta.uid(), meta.gid()), owner, "owner of {path}");
    }
    // the other users' files are untouched
    assert_eq!(sandbox.read(ALICE_KEYS), alice_keys());

    // the same request again changes nothing
    sandbox
        .ralsh(&create)
        .expect(0)
        .stdout_has("no changes needed");
}

#[test]
fn changes_and_deletes_keys_in_place() {
    let sandbox = sandbox();
    // options with a quoted value holding a comma, given as a JSON array
    let run = sandbox.ralsh(&[
        "ssh_authorized_key",
        "alice@laptop",
        r#"options=["from=\"10.0.0.1,10.0.0.2\"", "no-pty"]"#,
    ]);
    run.expect(0)
        .stdout_has(r#"options: [] -> ['from="10.0.0.1,10.0.0.2"', 'no-pty']"#);
    let changed = alice_keys().replace(
        &format!("ssh-ed25519 {ED_2} alice@laptop"),
        &format!("from=\"10.0.0.1,10.0.0.2\",no-pty ssh-ed25519 {ED_2} alice@laptop"),
    );
    assert_eq!(sandbox.read(ALICE_KEYS), changed);

    // a new key on the CRLF line: its comment and line ending stay
    sandbox
        .ralsh(&[
            "ssh_authorized_key",
            "alice  backup",
            "type=ssh-ed25519",
            &format!("key={ED_1}"),
            "options=",
        ])
        .expect(0)
        .stdout_has("type: 'ecdsa-sha2-nistp256' -> 'ssh-ed25519'");
    let changed = changed.replace(
        &format!(
            "command=\"/usr/bin/rrsync -ro /srv/backup\",restrict ecdsa-sha2-nistp256 {ECDSA}  alice"
        ),
        &format!("ssh-ed25519 {ED_1}  alice"),
    );
    assert_eq!(sandbox.read(ALICE_KEYS), changed);

    // a noop delete leaves the file byte for byte
    sandbox
        .ralsh(&["-n", "ssh_authorized_key", "alice@laptop", "ensure=absent"])
        .expect(0)
        .stdout_has("ensure: 'present' -> 'absent' (noop: would change)");
    assert_eq!(sandbox.read(ALICE_KEYS), changed);

    sandbox
        .ralsh(&["ssh_authorized_key", "alice@laptop", "ensure=absent"])
        .expect(0)
        .stdout_has("ensure: 'present' -> 'absent'");
    let deleted = changed.replace(
        &format!("from=\"10.0.0.1,10.0.0.2\",no-pty ssh-ed25519 {ED_2} alice@laptop\n"),
        "",
    );
    assert_eq!(sandbox.read(ALICE_KEYS), deleted);
    assert_eq!(mode(&sandbox, ALICE_KEYS), 0o600);

    sandbox
        .ralsh(&["ssh_authorized_key", "alice@laptop", "ensure=absent"])
        .expect(0)
        .stdout_has("no changes needed");
}

#[test]
fn refuses_bad_requests_and_changes_nothing() {
    let sandbox = sandbox();
    let key = format!("key={ED_1}");
    sandbox
        .ralsh(&[
            "ssh_authorized_key",
            "carol@home",
            "user=carol",
            "type=ssh-ed25519",
            &key,
        ])
        .expect(2)
        .stderr_has("'carol@home': user: no user 'carol' in");
    // user is init-only: a key does not move to another user
    sandbox
        .ralsh(&["ssh_authorized_key", "alice@laptop", "user=bob"])
        .expect(2)
        .stderr_has("attribute 'user' can only be set when 'alice@laptop' is created");
    sandbox
        .ralsh(&[
            "ssh_authorized_key",
            "bob@desk",
            "user=bob",
            "type=ssh-rsa",
            "key=not base64!",
        ])
        .expect(2)
        .stderr_has("key: 'not base64!' is not valid base64");
    // options must be ones sshd reads
    sandbox
        .ralsh(&[
            "ssh_authorized_key",
            "alice@laptop",
            "options=from=10.0.0.1",
        ])
        .expect(2)
        .stderr_has("options: 'from=10.0.0.1' is not an option sshd accepts");
    assert_eq!(sandbox.read(ALICE_KEYS), alice_keys());
    assert!(!sandbox.root().join("home/bob").exists());
}

#[test]
fn never_follows_a_symlinked_ssh_directory_out_of_the_root() {
    let sandbox = sandbox();
    let outside = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(sandbox.root().join("home/bob")).unwrap();
    std::os::unix::fs::symlink(outside.path(), sandbox.root().join("home/bob/.ssh")).unwrap();
    sandbox
        .ralsh(&[
            "ssh_authorized_key",
            "bob@desk",
            "user=bob",
            "type=ssh-ed25519",
            &format!("key={ED_1}"),
        ])
        .expect(2)
        .stderr_has("home/bob/.ssh' is a symbolic link, which ral does not follow here");
    assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
    // the other users' keys are still listed, with a warning
    let run = sandbox.ralsh(&["-j", "ssh_authorized_key"]);
    run.expect(0)
        .stderr_has("is a symbolic link, which ral does not follow here")
        .stdout_has("alice@laptop");
}

#[test]
fn never_reads_or_writes_through_a_link_a_user_planted_in_their_home() {
    // bob's authorized_keys is a link to the shadow file of the same root:
    // resolved inside the root, following it would have a root-run provider
    // read that file and rewrite it with bob's key appended, and give it
    // to bob.
    let sandbox = sandbox();
    let shadow = "root:$6$secret:19700:0:99999:7:::\n";
    sandbox.write("etc/shadow", shadow);
    std::fs::create_dir_all(sandbox.root().join("home/bob/.ssh")).unwrap();
    std::os::unix::fs::symlink(
        "../../../etc/shadow",
        sandbox.root().join("home/bob/.ssh/authorized_keys"),
    )
    .unwrap();
    let run = sandbox.ralsh(&["-j", "ssh_authorized_key"]);
    run.expect(0)
        .stderr_has("is a symbolic link, not a regular file");
    assert!(!run.stdout.contains("secret"));
    sandbox
        .ralsh(&[
            "ssh_authorized_key",
            "bob@desk",
            "user=bob",
            "type=ssh-ed25519",
            &format!("key={ED_1}"),
        ])
        .expect(2)
        .stderr_has("home/bob/.ssh/authorized_keys' is a symbolic link");
    assert_eq!(sandbox.read("etc/shadow"), shadow);
    let meta = std::fs::symlink_metadata(sandbox.root().join("etc/shadow")).unwrap();
    assert_eq!(meta.uid(), own_uid(), "the shadow file keeps its owner");
}

#[test]
fn a_key_file_its_user_made_huge_is_not_read_and_fails_only_its_user() {
    // bob owns his key file and may make it any size: a sparse file of
    // terabytes costs him nothing, and read whole it would exhaust the
    // memory of the root-run provider and fail every user's keys. 64 MiB
    // (over the 16 MiB read) stands for it here.
    let sandbox = sandbox();
    let keys = sandbox.root().join("home/bob/.ssh/authorized_keys");
    std::fs::create_dir_all(keys.parent().unwrap()).unwrap();
    let size = 64 << 20;
    std::fs::File::create(&keys).unwrap().set_len(size).unwrap();
    sandbox
        .ralsh(&["-j", "ssh_authorized_key"])
        .expect(0)
        .stderr_has("home/bob/.ssh/authorized_keys' is larger than 16777216 bytes")
        .stdout_has("alice@laptop");
    sandbox
        .ralsh(&[
            "ssh_authorized_key",
            "bob@desk",
            "user=bob",
            "type=ssh-ed25519",
            &format!("key={ED_1}"),
        ])
        .expect(2)
        .stderr_has("is larger than 16777216 bytes; ral does not read it");
    assert_eq!(std::fs::metadata(&keys).unwrap().len(), size);
    // alice's keys can still be changed.
    sandbox
        .ralsh(&[
            "ssh_authorized_key",
            "alice@desk",
            "user=alice",
            "type=ssh-ed25519",
            &format!("key={ED_1}"),
        ])
        .expect(0);
}
