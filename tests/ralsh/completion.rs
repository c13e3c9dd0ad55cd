//! Completion in a real bash: the script `ralsh --completions bash` prints
//! calls back into ralsh, which answers with options, types, providers and
//! the names of resources, as libral's completion did.

use std::process::Command;

use crate::support::{fixtures_dir, ralsh_bin, Sandbox};

/// What bash offers for the last of `words` (the word being completed),
/// through the registered completion function; one candidate a line.
fn complete(sandbox: &Sandbox, words: &[&str]) -> Vec<String> {
    let bin_dir = std::path::Path::new(ralsh_bin()).parent().unwrap();
    let script = r#"
source <(ralsh --completions bash)
COMP_WORDS=("$@")
COMP_CWORD=$(( $# - 1 ))
COMP_LINE="$*"
COMP_POINT=${#COMP_LINE}
COMP_TYPE=9
_clap_complete_ralsh ralsh "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
printf '%s\n' "${COMPREPLY[@]}"
"#;
    let output = Command::new("bash")
        .arg("-c")
        .arg(script)
        .arg("bash")
        .args(words)
        .env_clear()
        .env(
            "PATH",
            format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap()),
        )
        .env("HOME", sandbox.root())
        .env("XDG_CACHE_HOME", sandbox.root().join("cache"))
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .filter(|line| !line.is_empty())
        .map(str::to_owned)
        .collect()
}

#[test]
fn types_and_providers_complete_from_the_providers_found() {
    let sandbox = Sandbox::new();
    assert_eq!(
        complete(&sandbox, &["ralsh", "ho"]),
        ["host", "host::etc_hosts"]
    );
    assert_eq!(
        complete(&sandbox, &["ralsh", "user::"]),
        ["user::etc_passwd"]
    );
    // Providers of an -I directory on the line count too.
    let data = fixtures_dir().join("libral");
    let offered = complete(
        &sandbox,
        &["ralsh", "-I", data.to_str().unwrap(), "service::"],
    );
    assert_eq!(
        offered,
        ["service::initd", "service::service", "service::unitd"]
    );
}

#[test]
fn names_complete_from_the_listing_below_the_root_on_the_line() {
    let sandbox = Sandbox::new();
    sandbox.write(
        "etc/hosts",
        "10.0.0.1 db\n10.0.0.2 dbx web\n10.0.0.3 mail\n",
    );
    let root = sandbox.root().to_str().unwrap();
    assert_eq!(
        complete(&sandbox, &["ralsh", "--root", root, "host", "d"]),
        ["db", "dbx"]
    );
    // With nothing typed yet, the options come after the names.
    let all = complete(&sandbox, &["ralsh", "--root", root, "host::etc_hosts", ""]);
    assert_eq!(all[..3], ["db", "dbx", "mail"]);
    assert!(
        all[3..].iter().all(|word| word.starts_with("--")),
        "{all:?}"
    );
    // An unknown type offers no names.
    let none = complete(&sandbox, &["ralsh", "--root", root, "nosuch", ""]);
    assert!(none.iter().all(|word| word.starts_with("--")), "{none:?}");
    // With --yaml every word after TYPE is a NAME; those given are not
    // offered again. Without it, ATTR=VALUE follows and is not completed.
    let more = complete(&sandbox, &["ralsh", "--root", root, "-y", "host", "db", ""]);
    assert_eq!(more[..2], ["dbx", "mail"]);
    assert!(
        more[2..].iter().all(|word| word.starts_with("--")),
        "{more:?}"
    );
    let attrs = complete(&sandbox, &["ralsh", "--root", root, "host", "db", ""]);
    assert!(attrs.iter().all(|word| word.starts_with("--")), "{attrs:?}");
}

#[test]
fn options_complete_too() {
    let sandbox = Sandbox::new();
    assert_eq!(complete(&sandbox, &["ralsh", "--ro"]), ["--root"]);
}

#[test]
fn names_are_quoted_for_the_shell() {
    // A name a shell would split or run is offered quoted.
    let sandbox = Sandbox::new();
    sandbox.write("etc/kv.conf", "x;rm = 1\nplain = 2\n");
    let data = fixtures_dir().join("check/kv");
    let root = sandbox.root().to_str().unwrap();
    let offered = complete(
        &sandbox,
        &[
            "ralsh",
            "-I",
            data.to_str().unwrap(),
            "--root",
            root,
            "kv",
            "x",
        ],
    );
    assert_eq!(offered, ["'x;rm'"]);
}

#[test]
fn completion_reads_the_metadata_cache_but_never_writes_it() {
    // Its short time limits must not decide what later commands see.
    let sandbox = Sandbox::new();
    let data = fixtures_dir().join("libral");
    complete(
        &sandbox,
        &["ralsh", "-I", data.to_str().unwrap(), "service::"],
    );
    let entries = sandbox.root().join("cache/ral/metadata");
    let written = std::fs::read_dir(&entries).map_or(0, |dir| dir.count());
    assert_eq!(
        written,
        0,
        "completion wrote cache entries in {}",
        entries.display()
    );
}
