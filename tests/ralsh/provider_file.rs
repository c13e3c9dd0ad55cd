//! The bundled `file::file` provider, end to end through ralsh on a fake
//! root: finding files, directories and links; creating, changing (atomically)
//! and deleting them; refusing to replace a directory without force; noop,
//! idempotence; links that would lead out of the root; and the host's type check
//! of `mode`.

use std::os::unix::fs::{MetadataExt, PermissionsExt};

use crate::support::Sandbox;

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
    assert_eq!(res["content"], "<h1>hello</h1>\n");
    assert_eq!(
        res["checksum"],
        "sha256:186ea20da38447cf0c59fa62a9dfaea3bdcca431517b83d3a9c00ebc2044e95a"
    );
    assert_eq!(res["mode"], "0640");
    assert_eq!(res["owner"], owner.as_str());

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
    sandbox
        .ralsh(&["file", "/srv/secret", "content=top secret\n", "mode=600"])
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
        .stdout_has("content: 'top secret\\n' -> 'new'");
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
