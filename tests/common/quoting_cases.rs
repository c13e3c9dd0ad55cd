//! The awkward values every calling convention must carry exactly (spaces,
//! quotes, `$` words, command substitutions, control characters), shared
//! by the local quoting tests and the remote ones.

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
