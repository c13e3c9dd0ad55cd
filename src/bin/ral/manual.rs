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
                ("RUST_LOG", "The log filter (default: error; warn for ral plan and apply, whose -l overrides it)."),
                ("RALSH_DATA_DIR", "ral plan, apply, facts: more data directories, as for ralsh(1) (ral facts reads their facts.d); ral check: where the providers a plugin's config tasks name are found, too."),
                ("XDG_CACHE_HOME, HOME, TMPDIR", "Where ral's cache is, as for ralsh(1): the bundled providers and the Python toolkit ral check gives providers."),
                ("HOLO_ROOT_DIR", "ral holo: the root Holo works below (default /)."),
                ("NO_COLOR, CLICOLOR, CLICOLOR_FORCE", "ral plan, apply and holo: colour (signs, diffs), as anstream reads them; never in JSON."),
                ("NOTIFY_SOCKET, WATCHDOG_USEC, WATCHDOG_PID", "ral agent: systemd's socket (READY, STATUS, RELOADING, STOPPING) and watchdog, as a Type=notify unit sets them."),
            ],
            files: &[
                ("ROOT/etc/holorc, ROOT/etc/holorc.d/*", "ral holo: the plugins to run."),
                ("ROOT/usr/lib/holo/holo-PLUGIN", "ral holo: the plugins."),
                ("ROOT/run/holo.pid", "ral holo apply: the lock."),
                ("DIR/providers/NAME.prov, NAME.yaml", "ral check, plan, apply: a provider and its metadata."),
                ("DIR/facts.d/*", "ral facts: custom facts (NAME.yaml, NAME.json, NAME.txt, or a program printing them), in each data directory."),
                ("DIR/plugins/NAME.plugin, NAME.yaml", "ral check, plan, apply: a model plugin and its metadata (ral check types its config tasks against DIR's providers, RALSH_DATA_DIR's and the bundled ones)."),
                ("MANIFEST.yaml, MANIFEST.json", "ral plan, apply: TYPE -> NAME -> attributes, with require and before."),
                ("ROOT/var/lib/ral/state.db, state.db.lock", "ral apply, state: the state store and the lock of the apply that runs."),
                ("STORE.agent, STORE.agent.lock", "ral agent: its status beside the store (what ral agent status reads), and the lock it holds while it runs."),
            ],
            exit_status: &[
                ("ral plan", "0 the plan was made; 1 some resources could not be read; 2 nothing ran (a usage, manifest or validation error, or a removal of everything ral manages not asked for with --destroy). With --detailed-exitcodes: 0 nothing to change, 2 changes pending, 4 unreadable resources, 6 both, 1 nothing ran."),
                ("ral apply", "0 every task succeeded or there was nothing to do; 1 a task failed, was skipped or was stopped; 2 nothing ran (as for ral plan). With --detailed-exitcodes: 0 no changes, 2 changes made, 4 failures, 6 both, 1 nothing ran."),
                ("ral agent", "0 stopped by a signal (SIGTERM, SIGINT); 2 it could not start (a usage or manifest argument error, another agent on the store, a store it cannot use)."),
                ("ral agent status", "0 an agent runs on the store; 3 none does (as LSB's status); 2 an error."),
                ("ral state", "0 success; 2 an error (no store, an unknown plan or item)."),
                ("ral facts", "0 the facts were gathered (of every target); 1 a target failed; 2 nothing could be gathered (a usage error, no facts provider)."),
                ("ral check", "0 when no provider or plugin has findings (notes aside; each is clean, or PARTIAL: not fully checked, with what did not run and why on its not run line); 1 when there are findings; 2 when the check could not run."),
                ("ral holo", "As Holo's: 0 success; 1 a generator failed (with --strict, also a plugin); 2 a usage error; 255 a configuration, plugin info, scan, selector or lock error."),
                ("ral (usage error)", "2."),
            ],
            examples: &[
                ("What a manifest would change below a fake root, then change it:", "ral plan --root /tmp/fake site.yaml\nral apply --root /tmp/fake site.yaml"),
                ("Keep this machine converged, what the agent did last, and its systemd unit:", "ral agent --interval 30m /etc/ral/site.yaml\nral agent status\nral agent unit /etc/ral/site.yaml > /etc/systemd/system/ral-agent.service"),
                ("This machine's facts, then two targets' as JSON:", "ral facts\nral facts -j -t web1,web2"),
                ("Check the bundled providers on a seeded fake root:", "ral check --seed tests/fixtures/seed providers/*.prov"),
                ("What Holo would do, then do it:", "ral holo scan --short\nral holo apply"),
                ("Run as holo:", "ln -s \"$(command -v ral)\" /usr/local/bin/holo"),
            ],
            see_also: "ralsh(1), holo(8) (from Holo's own package, where installed)",
        },
        out,
    )
}
