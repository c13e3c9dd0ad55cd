//! Values reach providers exactly, through bash `eval "$@"` and Python
//! `shlex.split`, and nothing inside a value ever runs.

use crate::support::Sandbox;

/// Every awkward value the calling convention must carry. `CANARY` is
/// replaced by a path that only exists if something ran.
const VALUES: &[&str] = &[
    "plain",
    "with spaces  and  runs",
    "single ' quote",
    "double \" quote",
    "dollar $HOME and ${HOME}",
    // `$` words with nothing else a quoting rule might catch: each must be
    // quoted for its own sake, or eval expands it.
    "$HOME",
    "$0",
    "$1",
    "$$",
    "$ral_action",
    "${PATH}",
    "$(id)",
    "`id`",
    "a$HOME",
    "$RALSH_ROOT_DIR/x",
    "$(touch${IFS}CANARY)",
    "`touch${IFS}CANARY`",
    "backtick `touch CANARY`",
    "subshell $(touch CANARY)",
    "semi; touch CANARY",
    "pipe | touch CANARY && touch CANARY",
    "key=value=more",
    "back\\slash \\\\ \\n",
    "new\nline",
    "tab\there",
    "carriage\rreturn",
    "-n",
    "--leading-dash",
    "naïve ünïcødé ✓ 日本",
    "",
    "'",
    "'$(touch CANARY)'",
    "\"$(touch CANARY)\"",
    "\\'; touch CANARY; echo '",
    "*",
    "~",
    "{a,b}",
    "# not a comment",
    "> CANARY",
];

/// Each of [`VALUES`] with `CANARY` made a path below `root`, and a name
/// holding it: `(name, value)`. Names come back through `# simple`
/// output, one trimmed line, so only values may hold control characters
/// (names are checked below).
pub fn cases(root: &std::path::Path) -> Vec<(String, String)> {
    let canary = root.join("canary");
    let canary = canary.to_str().unwrap();
    VALUES
        .iter()
        .map(|template| {
            let value = template.replace("CANARY", canary);
            let name = if value.chars().any(char::is_control) {
                "plain".to_owned()
            } else {
                format!("n {value} end")
            };
            (name, value)
        })
        .collect()
}

fn round_trip(provider: &str, suffix: &str) {
    let sandbox = Sandbox::new();
    let canary = sandbox.root().join("canary");
    let canary = canary.to_str().unwrap();
    for (name, value) in cases(sandbox.root()) {
        let value_arg = format!("value={value}");
        let run = sandbox.ralsh(&[provider, &name, &value_arg]);
        run.expect(0);
        assert_eq!(
            sandbox.read(&format!("value.{suffix}")),
            value,
            "value {value:?}"
        );
        assert_eq!(
            sandbox.read(&format!("name.{suffix}")),
            name,
            "name {name:?}"
        );
        assert!(
            !std::path::Path::new(canary).exists(),
            "{value:?} ran a command"
        );
    }
}

#[test]
fn bash_eval_recovers_every_value_and_runs_nothing() {
    round_trip("quote::bash", "bash");
}

#[test]
fn python_shlex_recovers_every_value_and_runs_nothing() {
    round_trip("quote::python", "python");
}

#[test]
fn names_that_cannot_come_back_are_refused_before_anything_runs() {
    let sandbox = Sandbox::new();
    for (name, reason) in [
        ("a\nb", "must not contain control characters"),
        ("tab\there", "must not contain control characters"),
        (" lead", "must not start or end with whitespace"),
        ("trail ", "must not start or end with whitespace"),
        ("", "must not be empty"),
    ] {
        for args in [
            vec!["quote::bash", name, "value=x"],
            vec!["quote::bash", name],
        ] {
            let run = sandbox.ralsh(&args);
            run.expect(2);
            assert!(run.stderr.contains(reason), "{name:?}: {}", run.stderr);
        }
    }
    assert!(
        !sandbox.root().join("name.bash").exists(),
        "update never ran"
    );
}
