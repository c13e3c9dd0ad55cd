//! The library sketch of docs/architecture.md ("Using the library"),
//! verbatim below this header: `cargo test` compiles it, and
//! `tests/ralsh/example.rs` checks that the guide still shows it, so the
//! sketch a reader copies always builds. Run it with a fake root
//! /tmp/fake and a manifest site.yaml in the working directory:
//! `cargo run --example converge`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use ral::converge::apply::Events;
use ral::converge::catalog::Catalog;
use ral::converge::plan::Plan;
use ral::converge::run::{self, Input, Mode, Options, StoreAt};
use ral::discovery;
use ral::metadata_cache::MetadataCache;
use ral::{Host, HostConfig};

/// Prints each task as it ends.
struct Print;

impl Events for Print {
    fn plan_state(&mut self, _catalog: &Catalog, _plan: &Plan) {}
    fn task_started(&mut self, _catalog: &Catalog, _plan: &Plan, _task: usize) {}
    fn task_ended(&mut self, catalog: &Catalog, plan: &Plan, task: usize) {
        let task = &plan.tasks[task];
        println!("{} {:?}", catalog.items[task.item].reference(), task.state);
    }
}

fn main() {
    if let Err(e) = run() {
        eprintln!("error: {e}"); // the message, not the Debug form
        std::process::exit(1);
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let host = Host::new(HostConfig {
        timeout: Duration::from_secs(300),
        root: Path::new("/tmp/fake").canonicalize()?,
        strict: false,
        lock_timeout: Duration::from_secs(15),
        provider_lib: ral::bundled::provider_lib().ok(),
        remote: None,
    });
    // -I directories, RALSH_DATA_DIR, then the bundled providers.
    let dirs = discovery::data_dirs(&[], None, ral::bundled::data_dir().ok());
    let registry = discovery::discover(&host, &dirs, &MetadataCache::disabled(), None);
    let store_at = StoreAt::local(host.root(), None); // ROOT/var/lib/ral/state.db
    let input = Input::read(&[PathBuf::from("site.yaml")], false)?;
    let options = Options {
        mode: Mode::Apply, // Mode::Plan: see below
        jobs: 4,
        keep_removed: false,
        destroy: false,
        lock_timeout: Duration::ZERO, // another apply holds the store: fail at once
        saving: false,
        origin: None, // a person's run, not ral agent's
    };
    let mut prepared = run::prepare(&host, &registry, &store_at, &input, options)?;
    // With Mode::Plan, stop here: prepared.planned() and prepared.report()
    // tell what would change; apply refuses a plan not made for applying.
    let outcome = prepared.apply(&host, &|| false, &mut Print)?; // || false: never stop
    println!(
        "made changes: {}, had failures: {}",
        outcome.changes, outcome.failures
    );
    Ok(())
}
