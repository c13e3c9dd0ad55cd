//! ral's man page: the subcommands from the command line's definitions,
//! and what the definitions cannot say.

use std::io::{self, Write};

use clap::CommandFactory;

use crate::man::{self, Sections};
use crate::Args;

pub fn render(out: &mut dyn Write) -> io::Result<()> {
    man::render(
        Args::command(),
        &Sections {
            environment: &[
                ("RUST_LOG", "The log filter (default: error)."),
                ("XDG_CACHE_HOME, HOME, TMPDIR", "Where ral's cache is, as for ralsh(1): the bundled providers and the Python toolkit ral check gives providers."),
                ("HOLO_ROOT_DIR", "ral holo: the root Holo works below (default /)."),
                ("NO_COLOR, CLICOLOR, CLICOLOR_FORCE", "ral holo: colour, as anstream reads them."),
            ],
            files: &[
                ("ROOT/etc/holorc, ROOT/etc/holorc.d/*", "ral holo: the plugins to run."),
                ("ROOT/usr/lib/holo/holo-PLUGIN", "ral holo: the plugins."),
                ("ROOT/run/holo.pid", "ral holo apply: the lock."),
                ("DIR/providers/NAME.prov, NAME.yaml", "ral check: a provider and its metadata."),
            ],
            exit_status: &[
                ("ral check", "0 when every provider is clean, 1 when there are findings, 2 when the check could not run."),
                ("ral holo", "As Holo's: 0 success; 1 a generator failed (with --strict, also a plugin); 2 a usage error; 255 a configuration, plugin info, scan, selector or lock error."),
                ("ral (usage error)", "2."),
            ],
            examples: &[
                ("Check the bundled providers on a seeded fake root:", "ral check --seed tests/fixtures/seed providers/*.prov"),
                ("What Holo would do, then do it:", "ral holo scan --short\nral holo apply"),
                ("Run as holo:", "ln -s \"$(command -v ral)\" /usr/local/bin/holo"),
            ],
            see_also: "ralsh(1), holo(8) (from Holo's own package, where installed)",
        },
        out,
    )
}
