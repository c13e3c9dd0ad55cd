//! ralsh's man page: the options from the command line's definitions, and
//! what the definitions cannot say.

use std::io::{self, Write};

use crate::args;
use crate::man::{self, Sections};

pub fn render(out: &mut dyn Write) -> io::Result<()> {
    man::render(
        args::command(),
        &Sections {
            environment: &[
                ("RALSH_DATA_DIR", "Data directories (colon-separated) searched for DIR/providers after the -I ones and before the bundled providers."),
                ("RUST_LOG", "The log filter when -l is not given."),
                ("XDG_CACHE_HOME, HOME", "ral's cache is $XDG_CACHE_HOME/ral, else $HOME/.cache/ral."),
                ("TMPDIR", "Without XDG_CACHE_HOME and HOME, the cache is $TMPDIR/ral-UID (a fresh private directory for the run when another user made that one)."),
                ("NO_COLOR, CLICOLOR, CLICOLOR_FORCE", "Turn colour off, off (0) or on, as anstream reads them; otherwise colour is used on a terminal that supports it."),
                ("PATH", "Passed to providers (relative entries dropped); suitability checks search it."),
                ("RALSH_COMPLETE", "Set by the scripts of --completions when they ask ralsh for completions; not for use by hand."),
                ("Given to providers", "PATH, HOME, LANG=C, LC_ALL=C, RALSH_ROOT_DIR (--root), RALSH_LOCK_TIMEOUT (--lock-timeout) and RALSH_PROVIDER_LIB (the Python toolkit); nothing else from the environment."),
            ],
            files: &[
                ("DIR/providers/NAME.prov, DIR/providers/NAME.yaml", "A provider and its metadata, in each data directory."),
                ("$XDG_CACHE_HOME/ral/bundled-2-VERSION-DIGEST/providers/", "The bundled providers, written out on first use (private, mode 0700)."),
                ("$XDG_CACHE_HOME/ral/metadata/", "The metadata cache: each provider's type and name, its describe output, or why it was skipped, per version of its files."),
                ("ROOT/etc/.pwd.lock, .NAME.ral-lock", "The locks the bundled providers take before editing a file below the root."),
            ],
            exit_status: &[
                ("0", "Success."),
                ("1", "The resource was not found (TYPE NAME, or with -a a resource that is absent); with --yaml, a NAME was not found (the others are printed)."),
                ("2", "Any error: a usage error, an unknown provider, a provider that failed or logged an error, a refused change."),
            ],
            examples: &[
                ("List the providers, then the hosts entries:", "ralsh\nralsh host"),
                ("Make a fake root and change a resource below it, previewing first:", "mkdir -p /tmp/fake/etc\nralsh --root /tmp/fake -n host db ip=10.0.0.5\nralsh --root /tmp/fake host db ip=10.0.0.5"),
                ("A user as JSON, for programs:", "ralsh -j user root"),
                ("Users as a manifest for ral plan:", "ralsh --yaml user root alice > users.yaml"),
                ("A provider's attributes:", "ralsh -e user"),
                ("Enable completion in bash:", "source <(ralsh --completions bash)"),
            ],
            see_also: "ral(1), puppet-resource(8); libral: https://github.com/puppetlabs/libral",
        },
        out,
    )
}
