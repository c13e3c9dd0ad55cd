//! The engine as a library call: a Rust program plans, applies and
//! reads the state store through `ral::converge::run` and
//! `ral::converge::state` alone, as the `ral` binary does, with the plan
//! fixtures (tests/fixtures/plans) on a temporary root.

use std::path::{Path, PathBuf};
use std::time::Duration;

use ral::converge::apply::{Calling, Events};
use ral::converge::catalog::Catalog;
use ral::converge::plan::{Action, Plan, TaskState};
use ral::converge::run::{self, Input, Mode, Options, Outcome, RunError, StoreAt};
use ral::converge::state::{ItemState, StateStore, StoredItem};
use ral::discovery::{self, Registry};
use ral::metadata_cache::MetadataCache;
use ral::{Host, HostConfig};

use crate::plans::Bench;
use crate::support::fixtures_dir;

fn host(root: &Path) -> Host {
    Host::new(HostConfig {
        timeout: Duration::from_secs(60),
        root: root.canonicalize().unwrap(),
        strict: false,
        lock_timeout: Duration::from_secs(15),
        provider_lib: None,
        remote: None,
    })
}

fn registry(host: &Host) -> Registry {
    let dirs = discovery::data_dirs(&[fixtures_dir().join("plans")], None, None);
    discovery::discover(host, &dirs, &MetadataCache::disabled(), None)
}

fn options(mode: Mode) -> Options {
    Options {
        origin: None,
        mode,
        jobs: 4,
        keep_removed: false,
        destroy: false,
        lock_timeout: Duration::ZERO,
        saving: false,
    }
}

/// What the run told as it went.
#[derive(Default)]
struct Heard {
    ended: Vec<(String, TaskState)>,
    forgotten: Vec<String>,
}

impl Events for Heard {
    fn plan_state(&mut self, _catalog: &Catalog, _plan: &Plan) {}
    fn task_started(&mut self, _catalog: &Catalog, _plan: &Plan, _task: usize) {}
    fn task_ended(&mut self, catalog: &Catalog, plan: &Plan, task: usize) {
        let task = &plan.tasks[task];
        let name = catalog.items[task.item].reference();
        self.ended.push((name, task.state));
    }
    fn forgotten(&mut self, items: &[StoredItem]) {
        self.forgotten
            .extend(items.iter().map(|i| format!("{}[{}]", i.type_name, i.name)));
    }
}

/// Plans and applies `manifest` on `host`, returning the outcome and
/// what was heard.
fn apply(
    host: &Host,
    registry: &Registry,
    store_at: &StoreAt,
    manifest: &Path,
) -> (Outcome, Heard) {
    let input = Input::read(&[manifest.to_owned()], false).unwrap();
    let mut prepared =
        run::prepare(host, registry, store_at, &input, options(Mode::Apply)).unwrap();
    let mut heard = Heard::default();
    let outcome = prepared.apply(host, &|| false, &mut heard).unwrap();
    (outcome, heard)
}

#[test]
fn a_program_plans_applies_and_reads_the_store_through_the_library() {
    let bench = Bench::new();
    let host = host(bench.sandbox.root());
    let registry = registry(&host);
    let store_at = StoreAt::local(host.root(), None);
    let both = PathBuf::from(bench.manifest(
        "both.yaml",
        "alpha:\n  a1: {value: one}\nbeta:\n  b1: {value: x}\n",
    ));

    // A plan reads and changes nothing, not even the store.
    let input = Input::read(std::slice::from_ref(&both), false).unwrap();
    let planned = run::prepare(&host, &registry, &store_at, &input, options(Mode::Plan)).unwrap();
    let actions: Vec<Action> = planned.plan.tasks.iter().map(|t| t.action).collect();
    assert_eq!(actions, [Action::Create, Action::Create]);
    assert_eq!(
        planned.planned(),
        Outcome {
            changes: true,
            failures: false
        }
    );
    let report = planned.report();
    assert_eq!(report.plan.counts.create, 2);
    assert_eq!(report.plan.tasks[0].resource, "alpha[a1]");
    let store = StateStore::new(host.root(), None);
    assert!(
        store.items().is_err(),
        "a plan made a store: {:?}",
        store.path()
    );

    let (outcome, heard) = apply(&host, &registry, &store_at, &both);
    assert_eq!(
        outcome,
        Outcome {
            changes: true,
            failures: false
        }
    );
    // They run side by side: the order they end in is not known.
    let mut ended = heard.ended;
    ended.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        ended,
        [
            ("alpha[a1]".to_owned(), TaskState::Success),
            ("beta[b1]".to_owned(), TaskState::Success)
        ]
    );
    assert_eq!(bench.store("beta")["b1"]["value"], "x");
    let items = store.items().unwrap();
    assert_eq!(items.len(), 2);
    assert!(items
        .iter()
        .all(|i| i.state == ItemState::Applied && i.created));
    let history = store.history().unwrap();
    assert_eq!(history.len(), 1);
    assert_eq!(history[0].counts.unwrap().success, 2);
    assert_eq!(store.report(&history[0].id).unwrap().plan.tasks.len(), 2);

    // Dropped from the manifest, what ral created is removed.
    let one = PathBuf::from(bench.manifest("one.yaml", "alpha:\n  a1: {value: one}\n"));
    let (outcome, heard) = apply(&host, &registry, &store_at, &one);
    assert!(outcome.changes && !outcome.failures);
    assert_eq!(heard.ended, [("beta[b1]".to_owned(), TaskState::Success)]);
    assert!(heard.forgotten.is_empty());
    assert!(bench.store("beta").get("b1").is_none());
    assert_eq!(store.items().unwrap().len(), 1);
}

#[test]
fn the_library_refuses_an_empty_manifest_and_a_second_apply_with_typed_errors() {
    let bench = Bench::new();
    let host = host(bench.sandbox.root());
    let registry = registry(&host);
    let empty = PathBuf::from(bench.manifest("empty.yaml", "# nothing yet\n"));
    match Input::read(&[empty], false) {
        Err(RunError::Sweep(_)) => {}
        other => panic!(
            "an empty manifest was not refused as a sweep: {:?}",
            other.err()
        ),
    }

    // While one apply holds the store, another fails at once, naming it.
    let store_at = StoreAt::local(host.root(), None);
    let one = PathBuf::from(bench.manifest("one.yaml", "alpha:\n  a1: {value: one}\n"));
    let input = Input::read(&[one], false).unwrap();
    let first = run::prepare(&host, &registry, &store_at, &input, options(Mode::Apply)).unwrap();
    match run::prepare(&host, &registry, &store_at, &input, options(Mode::Apply)) {
        Err(RunError::Ral(ral::Error::Locked { .. })) => {}
        other => panic!(
            "a second apply was not refused as locked: {:?}",
            other.err()
        ),
    }
    drop(first);
    assert!(run::prepare(&host, &registry, &store_at, &input, options(Mode::Apply)).is_ok());
}

/// Refuses every call, as a recorder that cannot write the intents does.
struct Refusing(Heard);

impl Events for Refusing {
    fn plan_state(&mut self, _catalog: &Catalog, _plan: &Plan) {}
    fn task_started(&mut self, _catalog: &Catalog, _plan: &Plan, _task: usize) {}
    fn task_ended(&mut self, catalog: &Catalog, plan: &Plan, task: usize) {
        self.0.task_ended(catalog, plan, task);
    }
    fn tasks_calling(&mut self, _catalog: &Catalog, _plan: &Plan, _calls: &[Calling]) -> bool {
        false
    }
}

#[test]
fn a_task_whose_call_is_refused_before_it_starts_never_reaches_its_provider() {
    let bench = Bench::new();
    let host = host(bench.sandbox.root());
    let registry = registry(&host);
    let store_at = StoreAt::local(host.root(), None);
    let m = PathBuf::from(bench.manifest("m.yaml", "beta:\n  b1: {value: x}\n"));
    let input = Input::read(&[m], false).unwrap();
    let mut prepared =
        run::prepare(&host, &registry, &store_at, &input, options(Mode::Apply)).unwrap();
    bench.take_calls();
    let mut refusing = Refusing(Heard::default());
    let outcome = prepared.apply(&host, &|| false, &mut refusing).unwrap();
    assert!(outcome.failures && !outcome.changes);
    assert_eq!(
        refusing.0.ended,
        [("beta[b1]".to_owned(), TaskState::Failed)]
    );
    let error = prepared.plan.tasks[0].error.as_ref().unwrap();
    assert!(error.message.contains("could not be recorded"), "{error:?}");
    let calls = bench.take_calls();
    assert!(
        !calls.iter().any(|c| c.contains("set")),
        "the provider was called: {calls:#?}"
    );
    assert!(bench.store("beta").get("b1").is_none());
}

#[test]
fn a_plan_prepared_for_saving_is_never_applied() {
    let bench = Bench::new();
    let host = host(bench.sandbox.root());
    let registry = registry(&host);
    let store_at = StoreAt::local(host.root(), None);
    let m = PathBuf::from(bench.manifest("m.yaml", "beta:\n  b1: {value: x}\n"));
    let input = Input::read(&[m], false).unwrap();
    let saving = Options {
        saving: true,
        ..options(Mode::Plan)
    };
    // It has a store (made for the plan to be bound to), but not locked.
    let mut prepared = run::prepare(&host, &registry, &store_at, &input, saving).unwrap();
    bench.take_calls();
    match prepared.apply(&host, &|| false, &mut Heard::default()) {
        Err(RunError::Ral(ral::Error::Store { message, .. })) => {
            assert!(message.contains("prepared for applying"), "{message}")
        }
        other => panic!("a plan prepared for saving was applied: {:?}", other.err()),
    }
    assert!(bench.take_calls().iter().all(|c| !c.contains("set")));
    assert!(bench.store("beta").get("b1").is_none());
}

#[test]
fn one_run_lets_its_declarations_go_and_a_plan_only_shown_its_transitions() {
    let bench = Bench::new();
    let host = host(bench.sandbox.root());
    let registry = registry(&host);
    let store_at = StoreAt::local(host.root(), None);
    let m = PathBuf::from(bench.manifest(
        "m.yaml",
        "alpha:\n  a1: {value: one}\nbeta:\n  b1: {value: x}\n",
    ));
    let changes = |prepared: &run::Prepared| -> Vec<Vec<ral::resource::Change>> {
        prepared
            .plan
            .tasks
            .iter()
            .map(|t| t.changes.clone())
            .collect()
    };

    // The targets of a fleet share their input: it stays whole. Made to
    // be shown only, the plan's tasks keep their changes alone.
    let input = Input::read(std::slice::from_ref(&m), false).unwrap();
    let shown = run::prepare(&host, &registry, &store_at, &input, options(Mode::Plan)).unwrap();
    assert_eq!(shown.input().reading.declared.len(), 2);
    assert!(shown.plan.tasks.iter().all(|t| t.transition.is_none()));

    // Saved or applied, they keep their transitions too, and the same
    // changes.
    let saving = Options {
        saving: true,
        ..options(Mode::Plan)
    };
    let saved = run::prepare(&host, &registry, &store_at, &input, saving).unwrap();
    assert!(saved.plan.tasks.iter().all(|t| t.transition.is_some()));
    assert_eq!(changes(&saved), changes(&shown));
    assert!(changes(&shown).iter().all(|c| !c.is_empty()));
    drop(saved);

    // The one run of its input lets the declarations go once the catalog
    // is made, and plans the same.
    let mut alone = Input::read(std::slice::from_ref(&m), false).unwrap();
    let once = run::prepare_once(&host, &registry, &store_at, &mut alone, options(Mode::Plan));
    let once = once.unwrap();
    assert!(once.input().reading.declared.is_empty());
    assert_eq!(once.input().reading.digest, input.reading.digest);
    assert_eq!(changes(&once), changes(&shown));
    let names: Vec<String> = once.catalog.items.iter().map(|i| i.reference()).collect();
    assert_eq!(names, ["alpha[a1]", "beta[b1]"]);
}

/// A program that skips the rendering phase never has a `when:` ignored:
/// the catalog refuses a declaration that still has one, and the same
/// input rendered (`ral::templating::render`) plans what holds.
#[test]
fn an_unrendered_condition_is_refused_and_a_rendered_one_plans() {
    let bench = Bench::new();
    let host = host(bench.sandbox.root());
    let registry = registry(&host);
    let store_at = StoreAt::local(host.root(), None);
    let manifest = PathBuf::from(bench.manifest(
        "when.yaml",
        "alpha:\n  a1: {value: one}\n  a2:\n    value: two\n    when: false\n",
    ));
    let mut input = Input::read(&[manifest], false).unwrap();
    match run::prepare(&host, &registry, &store_at, &input, options(Mode::Plan)) {
        Err(RunError::Ral(ral::Error::Manifest { problems })) => {
            assert!(problems[0]
                .message
                .contains("when: and loop: are resolved by rendering"));
        }
        other => panic!("an unrendered when: was planned: {:?}", other.err()),
    }
    let rendered =
        ral::templating::render(&input.reading, &ral::templating::Scope::default()).unwrap();
    input.reading.declared = rendered.declared;
    let prepared = run::prepare(&host, &registry, &store_at, &input, options(Mode::Plan)).unwrap();
    let names: Vec<&str> = prepared.catalog.items.iter().map(|i| i.name()).collect();
    assert_eq!(names, ["a1"]);
}
