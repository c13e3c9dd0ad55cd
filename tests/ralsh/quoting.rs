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

fn round_trip(provider: &str, suffix: &str) {
    let sandbox = Sandbox::new();
    let canary = sandbox.root().join("canary");
    let canary = canary.to_str().unwrap();
    for template in VALUES {
        let value = template.replace("CANARY", canary);
        let name = format!("n {value}");
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
