//! Help and man pages of both binaries: exit codes and an example in every
//! --help, --version everywhere, and man pages with the usual sections and
//! no Markdown backticks.

use std::process::Command;

use crate::support::{ralsh_bin, run, Run};

fn ral(args: &[&str]) -> Run {
    run(Command::new(env!("CARGO_BIN_EXE_ral")).args(args))
}

fn ralsh(args: &[&str]) -> Run {
    run(Command::new(ralsh_bin()).args(args))
}

#[test]
fn man_pages_have_the_usual_sections_and_no_backticks() {
    for page in [ralsh(&["--man"]), ral(&["--man"])] {
        let text = &page.expect(0).stdout;
        for section in [
            ".SH NAME",
            ".SH SYNOPSIS",
            ".SH OPTIONS",
            ".SH \"ENVIRONMENT\"",
            ".SH \"FILES\"",
            ".SH \"EXIT STATUS\"",
            ".SH EXAMPLES",
            ".SH \"SEE ALSO\"",
        ] {
            assert!(text.contains(section), "{section} missing");
        }
        assert!(!text.contains('`'), "a backtick in the man page");
    }
    let ral_page = ral(&["--man"]).stdout;
    assert!(ral_page.contains(".SS \"ral check\""));
    assert!(ral_page.contains(".SS \"ral holo\""));
    assert!(!ral_page.contains("ral-check(1)"), "no page to point to");
    // A subcommand's own subcommands, each with its options.
    assert!(ral_page.contains(".SS \"ral agent status\""));
    assert!(ral_page.contains(".SS \"ral state show\""));
    // A flag takes no value: no "--noop NOOP".
    assert!(ral_page.contains("\\fB\\-\\-noop\\fR\n"), "--noop");
    assert!(!ral_page.contains("\\-\\-noop NOOP"), "--noop NOOP");
    assert!(ral_page.contains("\\fBral agent status\\fR\n0 an agent runs"));
}

#[test]
fn every_help_gives_exit_codes_and_an_example() {
    for (help, example) in [
        (ral(&["--help"]), "ral check --seed"),
        (ral(&["check", "--help"]), "ral check --seed"),
        (ral(&["holo", "help"]), "ral holo scan --short"),
    ] {
        let text = &help.expect(0).stdout;
        assert!(text.contains("Exit status"), "{text}");
        assert!(text.contains(example), "{text}");
    }
    let holo = ral(&["holo", "--help"]).expect(0).stdout.clone();
    assert!(
        !holo.contains("man 8"),
        "no man page that is not installed: {holo}"
    );
    let ralsh_help = ralsh(&["--help"]).expect(0).stdout.clone();
    assert!(ralsh_help.contains("Exit status: 0 success, 1 not found, 2 any error"));
}

#[test]
fn version_works_on_every_subcommand() {
    let version = env!("CARGO_PKG_VERSION");
    ral(&["--version"]).expect(0).stdout_has(version);
    ral(&["check", "--version"]).expect(0).stdout_has(version);
    ral(&["holo", "--version"]).expect(0).stdout_has(version);
    ral(&["holo", "version"]).expect(0).stdout_has(version);
}

#[test]
fn ral_prints_completions() {
    ral(&["--completions", "bash"])
        .expect(0)
        .stdout_has("complete -F _ral");
    ral(&["--completions", "zsh"])
        .expect(0)
        .stdout_has("#compdef ral");
    // Exclusive: not with a subcommand.
    ral(&["--completions", "bash", "check", "x.prov"]).expect(2);
}
