//! The bundled `file::file` provider, end to end through ralsh on a fake
//! root: finding files, directories and links; creating, changing (atomically)
//! and deleting them; refusing to replace a directory without force; noop,
//! idempotence; links that would lead out of the root; and the host's type check
//! of `mode`.

use std::os::unix::fs::{MetadataExt, PermissionsExt};

use std::io::Write;

use serde_json::{json, Value as Json};

use crate::support::{tree_snapshot, Sandbox};

/// A sandbox with a passwd and group file, a page and a link to it.
fn file_sandbox() -> Sandbox {
    let sandbox = Sandbox::new();
    sandbox.write("etc/passwd", "root:x:0:0:root:/root:/bin/bash\n");
    sandbox.write("etc/group", "root:x:0:\n");
    sandbox.write("srv/www/index.html", "<h1>hello</h1>\n");
    std::os::unix::fs::symlink("index.html", sandbox.root().join("srv/www/current")).unwrap();
    std::fs::set_permissions(
        sandbox.root().join("srv/www/index.html"),
        std::fs::Permissions::from_mode(0o640),
    )
    .unwrap();
    sandbox
}

/// `sha256:HEX` of `text`, as the file reports a checksum.
fn sha256(text: &str) -> String {
    use sha2::Digest;
    format!("sha256:{}", ral::text::hex(&sha2::Sha256::digest(text)))
}

fn mode_of(sandbox: &Sandbox, rel: &str) -> u32 {
    std::fs::symlink_metadata(sandbox.root().join(rel))
        .unwrap()
        .permissions()
        .mode()
        & 0o7777
}

#[test]
fn file_finds_files_directories_and_links() {
    let sandbox = file_sandbox();
    let uid = std::fs::metadata(sandbox.root().join("srv/www/index.html"))
        .unwrap()
        .uid();
    let owner = if uid == 0 {
        "root".to_owned()
    } else {
        uid.to_string()
    };

    let doc = sandbox
        .ralsh(&["-j", "file", "/srv/www/index.html"])
        .expect(0)
        .json();
    let res = &doc["resource"];
    assert_eq!(res["ensure"], "file");
    // Others may not read it (0640): its checksum stands for its content.
    assert_eq!(res.get("content"), None);
    assert_eq!(
        res["checksum"],
        "sha256:186ea20da38447cf0c59fa62a9dfaea3bdcca431517b83d3a9c00ebc2044e95a"
    );
    assert_eq!(res["mode"], "0640");
    assert_eq!(res["owner"], owner.as_str());
    std::fs::set_permissions(
        sandbox.root().join("srv/www/index.html"),
        std::fs::Permissions::from_mode(0o644),
    )
    .unwrap();
    let doc = sandbox
        .ralsh(&["-j", "file", "/srv/www/index.html"])
        .expect(0)
        .json();
    assert_eq!(doc["resource"]["content"], "<h1>hello</h1>\n");

    let doc = sandbox
        .ralsh(&["-j", "file", "/srv/www/current"])
        .expect(0)
        .json();
    assert_eq!(doc["resource"]["ensure"], "link");
    assert_eq!(doc["resource"]["target"], "index.html");
    assert!(doc["resource"].get("content").is_none());

    let doc = sandbox.ralsh(&["-j", "file", "/srv/www"]).expect(0).json();
    assert_eq!(doc["resource"]["ensure"], "directory");
    sandbox
        .ralsh(&["file", "/srv/nothere/x"])
        .expect(0)
        .stdout_has("ensure => 'absent'");
    // There is no listing of all files.
    let doc = sandbox.ralsh(&["-j", "file"]).expect(0).json();
    assert_eq!(doc["resources"], serde_json::json!([]));
}

#[test]
fn file_creates_changes_and_deletes() {
    let sandbox = file_sandbox();
    sandbox
        .ralsh(&["file", "/srv/secret", "content=top secret\n", "mode=0600"])
        .expect(0)
        .stdout_has("ensure: 'absent' -> 'file'");
    assert_eq!(sandbox.read("srv/secret"), "top secret\n");
    assert_eq!(mode_of(&sandbox, "srv/secret"), 0o600);
    // Three digits would never match the four the file reports (and a
    // plan would show it drifted for ever): refused before any call.
    sandbox
        .ralsh(&["file", "/srv/secret", "content=top secret\n", "mode=600"])
        .expect(2)
        .stderr_has("invalid value '600' for attribute 'mode'");
    sandbox
        .ralsh(&["file", "/srv/secret", "content=top secret\n", "mode=0600"])
        .expect(0)
        .stdout_has("no changes needed");

    // A change replaces the file atomically: a new inode, the mode kept.
    let inode = |s: &Sandbox| {
        std::fs::metadata(s.root().join("srv/secret"))
            .unwrap()
            .ino()
    };
    let before = inode(&sandbox);
    sandbox
        .ralsh(&["file", "/srv/secret", "content=new"])
        .expect(0)
        // Private (0600): shown as checksums only.
        .stdout_has(&format!(
            "content: {} -> {} (as checksums: too large or private to show)",
            sha256("top secret\n"),
            sha256("new")
        ))
        .stdout_lacks("top secret");
    assert_eq!(sandbox.read("srv/secret"), "new");
    assert_ne!(inode(&sandbox), before);
    assert_eq!(mode_of(&sandbox, "srv/secret"), 0o600);

    // Noop writes nothing.
    sandbox
        .ralsh(&["-n", "file", "/srv/secret", "content=other", "mode=0644"])
        .expect(0)
        .stdout_has("(noop: would change)");
    assert_eq!(sandbox.read("srv/secret"), "new");
    assert_eq!(mode_of(&sandbox, "srv/secret"), 0o600);

    sandbox
        .ralsh(&["file", "/srv/data", "ensure=directory", "mode=0750"])
        .expect(0);
    assert!(sandbox.root().join("srv/data").is_dir());
    assert_eq!(mode_of(&sandbox, "srv/data"), 0o750);
    sandbox
        .ralsh(&[
            "file",
            "/srv/data/latest",
            "ensure=link",
            "target=../secret",
        ])
        .expect(0);
    let link = sandbox.root().join("srv/data/latest");
    assert_eq!(
        std::fs::read_link(&link).unwrap().to_str(),
        Some("../secret")
    );
    sandbox
        .ralsh(&["file", "/srv/data/latest", "target=../secret"])
        .expect(0)
        .stdout_has("no changes needed");

    sandbox
        .ralsh(&["file", "/srv/data/latest", "ensure=absent"])
        .expect(0);
    assert!(std::fs::symlink_metadata(&link).is_err());
    assert!(sandbox.root().join("srv/secret").exists(), "never followed");
    sandbox
        .ralsh(&["file", "/srv/secret", "ensure=absent"])
        .expect(0);
    assert!(!sandbox.root().join("srv/secret").exists());
    sandbox
        .ralsh(&["file", "/srv/secret", "ensure=absent"])
        .expect(0)
        .stdout_has("no changes needed");
}

#[test]
fn the_view_after_a_change_shows_the_new_checksum() {
    let sandbox = file_sandbox();
    sandbox.ralsh(&["file", "/srv/v", "content=one"]).expect(0);
    sandbox
        .ralsh(&["file", "/srv/v", "content=two"])
        .expect(0)
        .stdout_has("content: 'one' -> 'two'")
        .stdout_has(&format!("checksum => '{}'", sha256("two")))
        .stdout_lacks(&sha256("one"));
}

#[test]
fn file_replaces_a_directory_only_with_force() {
    let sandbox = file_sandbox();
    let run = sandbox.ralsh(&["file", "/srv/www", "ensure=file", "content=x"]);
    assert_ne!(run.status, 0);
    run.stderr_has("'/srv/www' is a directory")
        .stderr_has("force=true");
    assert_eq!(sandbox.read("srv/www/index.html"), "<h1>hello</h1>\n");
    let run = sandbox.ralsh(&["file", "/srv/www", "ensure=absent"]);
    assert_ne!(run.status, 0);
    run.stderr_has("non-empty directory");
    assert!(sandbox.root().join("srv/www/index.html").exists());

    sandbox
        .ralsh(&["file", "/srv/www", "ensure=file", "content=x", "force=true"])
        .expect(0)
        .stdout_has("ensure: 'directory' -> 'file'");
    assert_eq!(sandbox.read("srv/www"), "x");
}

#[test]
fn file_never_follows_a_link_out_of_the_root_and_refuses_bad_modes() {
    let sandbox = file_sandbox();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("passwd"), "secret\n").unwrap();
    // A link is read as if the root were /: an absolute one names a path
    // below the root (here one that does not exist), and '..' stops at
    // the root.
    std::os::unix::fs::symlink(outside.path(), sandbox.root().join("out")).unwrap();
    let climb = "../".repeat(sandbox.root().components().count())
        + outside.path().strip_prefix("/").unwrap().to_str().unwrap();
    std::os::unix::fs::symlink(&climb, sandbox.root().join("up")).unwrap();
    for path in ["/out/passwd", "/up/passwd"] {
        let run = sandbox.ralsh(&["-j", "file", path]);
        assert_eq!(
            run.expect(0).json()["resource"]["ensure"],
            "absent",
            "{path}"
        );
        assert!(!run.stdout.contains("secret"));
        sandbox
            .ralsh(&["file", path, "content=x"])
            .expect(2)
            .stderr_has(&format!("the directory holding '{path}' does not exist"));
    }
    let outside_names: Vec<_> = std::fs::read_dir(outside.path()).unwrap().collect();
    assert_eq!(outside_names.len(), 1, "nothing was written outside");
    assert_eq!(
        std::fs::read_to_string(outside.path().join("passwd")).unwrap(),
        "secret\n"
    );

    let run = sandbox.ralsh(&["file", "/srv/x", "mode=0999"]);
    run.expect(2).stderr_has("does not match");
    assert!(!sandbox.root().join("srv/x").exists());
}

/// One `set` call of `file.prov` on the fake root of `sandbox`, as ralsh
/// makes it: the answer's `changes`, with the root's path as `ROOT`. The
/// script runs the native code through the `ral-provider` of this build.
fn set_directly(sandbox: &Sandbox, updates: &[Json]) -> Json {
    let mut child = std::process::Command::new(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("providers/file.prov"),
    )
    .arg("ral_action=set")
    .env_clear()
    .env("PATH", std::env::var_os("PATH").unwrap_or_default())
    .env("RALSH_ROOT_DIR", sandbox.root())
    .env("RALSH_NATIVE_PROGRAM", env!("CARGO_BIN_EXE_ral-provider"))
    .stdin(std::process::Stdio::piped())
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped())
    .spawn()
    .unwrap();
    let request = json!({"ral": {"noop": false}, "updates": updates});
    child
        .stdin
        .take()
        .unwrap()
        .write_all(request.to_string().as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "{output:?}");
    // Messages name the root; two sandboxes then answer alike.
    let text = String::from_utf8(output.stdout)
        .unwrap()
        .replace(sandbox.root().to_str().unwrap(), "ROOT");
    let answer: Json = serde_json::from_str(&text).unwrap();
    answer["changes"].clone()
}

/// A batch queues the new content of files and writes it together: it must
/// come to what one call per update comes to, also where one update
/// depends on an earlier one (the same path twice, a directory made, a
/// file below a new link, a parent removed, a path through a new file).
#[test]
fn file_set_of_many_updates_equals_one_update_per_call() {
    let update = |name: &str, should: Json| json!({"name": name, "is": {}, "should": should});
    let updates = [
        update("/srv/new", json!({"ensure": "directory", "mode": "0750"})),
        update("/srv/new/a", json!({"ensure": "file", "content": "one"})),
        update("/srv/new/a", json!({"content": "two", "mode": "0600"})),
        update("/srv/new/b", json!({"ensure": "file", "content": "b"})),
        update("/srv/www/index.html", json!({"content": "changed\n"})),
        // A link replaced by a file, then a path through it.
        update(
            "/srv/www/current",
            json!({"ensure": "file", "content": "was a link"}),
        ),
        update(
            "/srv/www/current/y",
            json!({"ensure": "file", "content": "y"}),
        ),
        // A link to a directory replaced by a file, then a path through it.
        update("/srv/dl", json!({"ensure": "link", "target": "www"})),
        update("/srv/dl", json!({"ensure": "file", "content": "dl"})),
        update("/srv/dl/z", json!({"ensure": "file", "content": "z"})),
        // A new link, and a file reached through it.
        update("/srv/lnk", json!({"ensure": "link", "target": "new"})),
        update("/srv/lnk/c", json!({"ensure": "file", "content": "c"})),
        update("/srv/new/c", json!({"content": "c again"})),
        // A file in a new directory, and the directory removed.
        update("/srv/gone", json!({"ensure": "directory"})),
        update("/srv/gone/x", json!({"ensure": "file", "content": "x"})),
        update("/srv/gone", json!({"ensure": "absent"})),
        update("/srv/gone", json!({"ensure": "absent", "force": true})),
        // A new file, then a path below it, then one whose directory is missing.
        update("/srv/f", json!({"ensure": "file", "content": "f"})),
        update("/srv/f/g", json!({"ensure": "file", "content": "g"})),
        update("/srv/missing/z", json!({"ensure": "file"})),
        update("/srv/new/b", json!({"ensure": "absent"})),
        update("/srv/www", json!({"mode": "0700"})),
    ];
    let batch = file_sandbox();
    let batched = set_directly(&batch, &updates);
    let single = file_sandbox();
    let mut one_by_one = Vec::new();
    for update in &updates {
        one_by_one.extend(
            set_directly(&single, std::slice::from_ref(update))
                .as_array()
                .unwrap()
                .clone(),
        );
    }
    assert_eq!(batched, Json::Array(one_by_one));
    assert_eq!(tree_snapshot(batch.root()), tree_snapshot(single.root()));
    let errors: Vec<&str> = batched
        .as_array()
        .unwrap()
        .iter()
        .filter(|change| change.get("error").is_some())
        .map(|change| change["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        errors,
        [
            "/srv/www/current/y",
            "/srv/dl/z",
            "/srv/gone",
            "/srv/f/g",
            "/srv/missing/z"
        ]
    );
    assert_eq!(batch.read("srv/new/a"), "two");
    assert_eq!(batch.read("srv/new/c"), "c again");
    assert_eq!(mode_of(&batch, "srv/new/a"), 0o600);
    assert!(!batch.root().join("srv/gone").exists());
    let leftovers: Vec<_> = tree_snapshot(batch.root())
        .into_keys()
        .filter(|path| path.to_string_lossy().contains(".ral-"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn a_file_over_a_gibibyte_is_not_read_for_its_checksum() {
    // Whoever may write a managed file may make it a sparse file of
    // terabytes; read whole for its checksum, it held up the get of every
    // path until the call's time limit. Just over 1 GiB stands for it.
    let sandbox = file_sandbox();
    let big = sandbox.root().join("srv/www/big");
    let size = (1 << 30) + 1;
    std::fs::File::create(&big).unwrap().set_len(size).unwrap();
    let run = sandbox.ralsh(&["-j", "file", "/srv/www/big"]);
    run.expect(0)
        .stderr_has("the file is larger than 1073741824 bytes; its checksum is not reported");
    let found = &run.json()["resource"];
    assert_eq!(found["ensure"], "file", "{found}");
    assert!(found.get("checksum").is_none(), "{found}");
    // Content asked for is written without reading the file to compare.
    sandbox
        .ralsh(&["file", "/srv/www/big", "content=small\n"])
        .expect(0);
    assert_eq!(sandbox.read("srv/www/big"), "small\n");
    let found = sandbox
        .ralsh(&["-j", "file", "/srv/www/big"])
        .expect(0)
        .json();
    assert_eq!(found["resource"]["content"], "small\n", "{found}");
}

#[test]
fn a_link_whose_target_is_not_utf8_fails_alone() {
    // Whoever may make a link at a managed path may give it a target that
    // is not UTF-8; the get of every path failed with it.
    use std::os::unix::ffi::OsStrExt;
    let sandbox = file_sandbox();
    std::os::unix::fs::symlink(
        std::ffi::OsStr::from_bytes(b"a\xffb"),
        sandbox.root().join("srv/www/odd"),
    )
    .unwrap();
    let run = sandbox.ralsh(&["-y", "file", "/srv/www/odd", "/srv/www/index.html"]);
    run.expect(2)
        .stderr_has("holds bytes that are not UTF-8")
        .stdout_has("/srv/www/index.html");
}
