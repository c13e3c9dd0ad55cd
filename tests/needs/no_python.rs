//! The core types on a host without Python: ralsh runs in a mount
//! namespace where `/usr/bin` holds every program but Python's and the
//! other directories a Python could come from (`/usr/local/bin`, a version
//! manager's) are empty, and lists, finds and changes resources of each
//! native type below a fake root.

use std::process::Command;

use crate::host::Test;
use crate::support::{run, Sandbox};
use crate::tests;

/// This module's tests and what each needs.
pub fn tests() -> Vec<Test> {
    tests![[MountNamespace]
        the_core_types_work_where_no_python3_exists,
    ]
}

/// Hides every Python, then checks that none is left, then runs the
/// arguments (ralsh's command lines, one per argument, each run by sh).
const HIDE_PYTHON: &str = r#"
set -e
orig=$1; shift
mount --make-rprivate /
mount --bind /usr/bin "$orig"
mount -t tmpfs tmpfs /usr/bin
"$orig/cp" -s "$orig"/* /usr/bin/ 2>/dev/null || true
"$orig/rm" -f /usr/bin/python*
for dir in /usr/local/bin /usr/local/lib /opt "$HOME/.pyenv" /root/.pyenv; do
    if [ -d "$dir" ]; then mount -t tmpfs tmpfs "$dir"; fi
done
export PATH=/usr/bin:/bin
if command -v python3 >/dev/null 2>&1 || [ -e /usr/bin/python3 ]; then
    echo "a python3 is still there: $(command -v python3)" >&2
    exit 90
fi
for line in "$@"; do
    echo "== $line"
    sh -c "$line" 2>&1 || echo "exit status $?"
done
"#;

fn the_core_types_work_where_no_python3_exists() {
    let sandbox = Sandbox::new();
    sandbox.write("etc/hosts", "127.0.0.1 localhost\n10.0.0.1 db db.lan\n");
    sandbox.write("srv/www/index.html", "<h1>hi</h1>\n");
    let orig = tempfile::tempdir().unwrap();
    let ralsh = format!(
        "{} --root {} ",
        crate::support::ralsh_bin(),
        sandbox.root().display()
    );
    let lines = [
        format!("{ralsh} host"),
        format!("{ralsh} host db"),
        format!("{ralsh} host web ip=10.0.0.5 host_aliases='[\"w1\"]'"),
        format!("{ralsh} host db ensure=absent"),
        format!("{ralsh} file"),
        format!("{ralsh} file /srv/www/index.html"),
        format!("{ralsh} file /srv/www/new content=made mode=0600"),
    ];
    let mut command = Command::new("unshare");
    command
        .args(["-rm", "sh", "-c", HIDE_PYTHON, "sh"])
        .arg(orig.path())
        .args(&lines)
        .env("HOME", sandbox.cache.path())
        .env("XDG_CACHE_HOME", sandbox.cache.path());
    let out = run(&mut command);
    let out = out.expect(0);
    let sections: Vec<&str> = out.stdout.split("== ").skip(1).collect();
    assert_eq!(sections.len(), lines.len(), "{}", out.stdout);
    for section in &sections {
        assert!(!section.contains("exit status"), "{section}");
        assert!(!section.contains("python"), "{section}");
    }
    assert!(
        sections[0].contains("host::etc_hosts { 'localhost':"),
        "{}",
        sections[0]
    );
    assert!(
        sections[1].contains("host_aliases => ['db.lan'],"),
        "{}",
        sections[1]
    );
    assert!(
        sections[2].contains("ip: (none) -> '10.0.0.5'"),
        "{}",
        sections[2]
    );
    assert!(
        !sections[4].contains("file {"),
        "no listing of all files: {}",
        sections[4]
    );
    assert!(
        sections[5].contains("content  => '<h1>hi</h1>\\n',"),
        "{}",
        sections[5]
    );
    assert!(
        sections[6].contains("ensure: 'absent' -> 'file'"),
        "{}",
        sections[6]
    );
    assert_eq!(sandbox.read("srv/www/new"), "made");
    assert_eq!(
        sandbox.read("etc/hosts"),
        "127.0.0.1 localhost\n10.0.0.5\tweb w1\n",
        "the changes were made, with no Python to make them"
    );
}
