//! The question `ral apply` asks before it removes anything, as
//! Terraform's apply does: on a terminal, a plan with removals is shown
//! whole, then only the answer `yes` lets the apply go on. Scripts, CI,
//! the Ansible module and runs over targets have no terminal (or give
//! --json or -q) and are never asked; `-y` (`--auto-approve`) skips the
//! question. A plan that removes nothing asks nothing, as Puppet's and
//! Ansible's runs do.

use std::io::{self, BufRead, IsTerminal, Write};

use ral::converge::catalog::Catalog;
use ral::converge::expand::is_removed_model;
use ral::converge::plan::{Action, Plan};
use ral::converge::run::Input;

use crate::converge_args::ConvergeArgs;

/// How many things `plan` removes: resources, and model plugins' items
/// dropped from the model (whatever their removal tasks run, a command
/// deleting data included), each counted once.
pub fn removals(catalog: &Catalog, plan: &Plan) -> usize {
    let items: std::collections::HashSet<usize> = plan
        .tasks
        .iter()
        .filter_map(|task| catalog.items[task.item].tie)
        .filter(|&item| is_removed_model(&catalog.items[item]))
        .collect();
    plan.count(Action::Remove) + items.len()
}

/// Whether this apply of `input` asks before it removes: a person is at
/// a terminal (standard input and output both are one), not a program
/// reading --json or only the status (-q), on this machine, and the plan
/// is not a saved one, which was shown when it was saved (as Terraform's
/// apply of a saved plan asks nothing).
pub fn asks(args: &ConvergeArgs, input: &Input) -> bool {
    !args.auto_approve
        && !args.json
        && !args.quiet
        && !args.remote.is_remote()
        && input.saved.is_none()
        && io::stdin().is_terminal()
        && io::stdout().is_terminal()
}

/// Asks on `out` whether the `count` removals shown above may go ahead,
/// and reads one line of `answer`. Only `yes` (spaces around it aside)
/// is a yes: any other line, or the end of the input, is a no.
pub fn removals_approved(
    out: &mut dyn Write,
    answer: &mut dyn BufRead,
    count: usize,
) -> io::Result<bool> {
    write!(
        out,
        "\nRemove {count} resource(s) listed above? Only 'yes' goes on: "
    )?;
    out.flush()?;
    let mut line = String::new();
    answer.read_line(&mut line)?;
    if !line.ends_with('\n') {
        // The input ended: what follows starts on a line of its own.
        writeln!(out)?;
    }
    Ok(line.trim() == "yes")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answered(input: &str) -> (bool, String) {
        let mut out = Vec::new();
        let yes = removals_approved(&mut out, &mut input.as_bytes(), 2).unwrap();
        (yes, String::from_utf8(out).unwrap())
    }

    #[test]
    fn only_yes_goes_on() {
        assert_eq!(
            answered("yes\n"),
            (
                true,
                "\nRemove 2 resource(s) listed above? Only 'yes' goes on: ".to_owned()
            )
        );
        assert_eq!(
            answered(""),
            (
                false,
                "\nRemove 2 resource(s) listed above? Only 'yes' goes on: \n".to_owned()
            )
        );
        assert!(answered("  yes \r\n").0);
        for no in ["no\n", "y\n", "YES\n", "yes please\n", "\n", "no\nyes\n"] {
            assert!(!answered(no).0, "{no:?} is not a yes");
        }
    }

    #[test]
    fn the_end_of_the_input_is_a_no() {
        assert!(!answered("").0);
        assert!(!answered("ye").0);
    }
}
