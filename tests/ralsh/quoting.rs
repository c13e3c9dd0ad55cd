//! Values reach providers exactly, through bash `eval "$@"` and Python
//! `shlex.split`, and nothing inside a value ever runs.

use crate::quoting_cases::cases;
use crate::support::Sandbox;

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
