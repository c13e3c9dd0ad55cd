//! One whole `ral plan` or `ral apply` on one host, as a library call.
//!
//! [`Input`] reads the manifests (or verifies a saved plan against its
//! store), [`prepare`] opens the state store (an apply locks it for the
//! whole run), recovers the plans dead runs left, settles their intents,
//! refuses a run that would sweep away what it does not name, plans the
//! removals of what no manifest lists and marks drift; [`Prepared::save`]
//! binds the plan to its store (`ral plan -o`) and [`Prepared::apply`]
//! runs it while the store records every step. The binaries parse
//! arguments and print what these return; a Rust program gets the same
//! run from the same calls.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::discovery::Registry;
use crate::error::{Error, Problem};
use crate::host::Host;
use crate::store::{Holder, Identity, Location, OwedRefresh, Store, StoreKey, StoredItem};

use super::apply::{self, Events, StopRequested};
use super::catalog::Catalog;
use super::lifecycle::{self, Sweep};
use super::manifest::{self, Origin, Reading};
use super::ownership;
use super::plan::{self, ErrorKind, Plan, PlanState, TaskState};
use super::record::{Recorder, Recording};
use super::report::Report;
use super::saved::Disagreement;
use super::saved::{self, SavedFile, SavedPlan};

/// Which command runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Read and plan; change nothing, not even the store.
    Plan,
    /// Plan, run the tasks and record them.
    Apply,
}

/// What a run is asked for besides its input.
#[derive(Debug, Clone)]
pub struct Options {
    /// Plan only, or plan and apply: [`Prepared::apply`] refuses a plan
    /// prepared with [`Mode::Plan`].
    pub mode: Mode,
    /// How many providers are read, and how many tasks run, at once.
    pub jobs: usize,
    /// Plan no removals: what no manifest lists stays, in the store too.
    pub keep_removed: bool,
    /// Remove what the manifests do not list also when that is
    /// everything (see [`Sweep`]).
    pub destroy: bool,
    /// How long an apply waits for another run's lock of the store; zero
    /// fails at once, naming the holder.
    pub lock_timeout: Duration,
    /// The plan is to be saved ([`Prepared::save`]): the store is made
    /// when there is none, for the plan to be bound to it.
    pub saving: bool,
    /// Who starts the run and why, when it is not a person's command
    /// (`ral agent (drift: /etc/hosts)`): recorded with the plan, and
    /// named to whoever finds the store locked by it. A plan with an
    /// origin takes the store's lock too, and is recorded as a `Noop`
    /// plan by [`Prepared::record_noop`].
    pub origin: Option<RunOrigin>,
}

/// Who starts a run that is not a person's command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunOrigin {
    /// One word, for the lock's holder (`ral-agent`).
    pub by: String,
    /// What the history shows.
    pub text: String,
}

/// Which state store a run uses, and what it must be the store of.
#[derive(Debug, Clone)]
pub struct StoreAt {
    pub location: Location,
    pub identity: Identity,
}

impl StoreAt {
    /// The store of a run on this machine: `file`, or the one inside
    /// `root`.
    pub fn local(root: &Path, file: Option<&Path>) -> StoreAt {
        StoreAt {
            location: match file {
                Some(file) => Location::File(file.to_owned()),
                None => Location::InRoot(root.to_owned()),
            },
            identity: Identity::local(root),
        }
    }

    /// Makes the store when there is none (its directories too), and
    /// checks that it is this one's: what a long-running process (`ral
    /// agent`) does before its first run, so that it can keep files
    /// beside it and fail at once on a store it cannot use.
    pub fn make(&self) -> Result<(), Error> {
        Store::open_at(&self.location, Some(&self.identity)).map(drop)
    }
}

/// Why a run did not start, or stopped short of its end.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Ral(#[from] Error),
    /// It would remove what the manifests do not name.
    #[error(transparent)]
    Sweep(#[from] Sweep),
    /// A saved plan that can no longer be applied.
    #[error("plan {plan} is Invalid: {why}")]
    Invalid { plan: String, why: Invalid },
    /// `--keep-removed` given for a saved plan made without it.
    #[error(
        "plan {plan} was made without --keep-removed, and applies as it was made: make a new \
         plan with ral plan --keep-removed -o"
    )]
    SavedWithoutKeepRemoved { plan: String },
}

/// Why a saved plan is Invalid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Invalid {
    #[error("its manifests changed since it was made (or the -e variables they are rendered with); make a new plan")]
    ManifestsChanged,
    #[error("the state store {} was replaced since the plan was verified", .0.display())]
    StoreReplaced(PathBuf),
    #[error("it was already applied (a plan applies at most once)")]
    AlreadyApplied,
    #[error(
        "the state store changed since it was made (serial {planned}, now {now}); make a new plan"
    )]
    StoreChanged { planned: i64, now: i64 },
    /// Its tasks do not fit the manifests read again.
    #[error("{0}")]
    Tasks(#[from] Disagreement),
}

fn invalid(plan: &SavedPlan, why: Invalid) -> RunError {
    RunError::Invalid {
        plan: plan.id.clone(),
        why,
    }
}

/// What a run converges to: the manifests, read whole and checked, and
/// for `ral apply FILE` the saved plan they were planned from.
pub struct Input {
    pub manifests: Vec<PathBuf>,
    pub reading: Reading,
    pub saved: Option<SavedPlan>,
}

impl Input {
    /// Reads `manifests` as one. Every problem is reported together, and
    /// manifests that declare nothing are refused unless `destroy`: an
    /// empty or emptied file must not read as "remove everything".
    pub fn read(manifests: &[PathBuf], destroy: bool) -> Result<Input, RunError> {
        let reading = manifest::read_all(manifests);
        // A manifest whose resources are all wrong declares none: its
        // problems say why, not the refusal of an empty manifest.
        if !reading.complete || (reading.declared.is_empty() && !reading.problems.is_empty()) {
            return Err(Error::Manifest {
                problems: reading.problems,
            }
            .into());
        }
        lifecycle::check_declared(manifests, reading.declared.len(), destroy)?;
        Ok(Input {
            manifests: manifests.to_vec(),
            reading,
            saved: None,
        })
    }

    /// A saved plan, verified against the store `store_at` of `host`
    /// before anything it names is read; then the manifests it names,
    /// which must be those it was made from.
    pub fn saved(
        file: SavedFile,
        host: &Host,
        store_at: &StoreAt,
        keep_removed: bool,
    ) -> Result<Input, RunError> {
        Input::saved_with_vars(file, host, store_at, keep_removed, &[])
    }

    /// [`Input::saved`] for manifests rendered with the `-e` variables
    /// `extra_vars`, which must be those the plan was made with.
    pub fn saved_with_vars(
        file: SavedFile,
        host: &Host,
        store_at: &StoreAt,
        keep_removed: bool,
        extra_vars: &[String],
    ) -> Result<Input, RunError> {
        let store = Store::open_existing_at(&store_at.location, Some(&store_at.identity))?;
        let saved = file.verify(store.as_ref(), &store_at.location.path(), host.root())?;
        drop(store);
        if keep_removed && !saved.keep_removed {
            return Err(RunError::SavedWithoutKeepRemoved { plan: saved.id });
        }
        let mut reading = manifest::read_all(&saved.manifests);
        reading.digest = manifest::with_extra_vars(&reading.digest, extra_vars);
        if !saved.manifests_match(&reading.digest) {
            return Err(invalid(&saved, Invalid::ManifestsChanged));
        }
        if !reading.complete {
            return Err(Error::Manifest {
                problems: reading.problems,
            }
            .into());
        }
        Ok(Input {
            manifests: saved.manifests.clone(),
            reading,
            saved: Some(saved),
        })
    }
}

/// How a run ended, for the exit status: two yes-or-no answers, not
/// counts (the plan's tasks hold the details).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Outcome {
    /// Whether something changed (apply), or is to change (plan).
    pub changes: bool,
    /// Whether a task did not succeed, or a resource could not be read.
    pub failures: bool,
}

/// A plan made, with what it needs to be saved or applied.
pub struct Prepared<'a> {
    /// The resources the plan is about: the manifests' and the removals.
    pub catalog: Catalog<'a>,
    /// The tasks; each names its catalog item (`task.item`).
    pub plan: Plan,
    /// Items no manifest lists any more that ral leaves as they are and
    /// (on apply) forgets: it did not create them, they were never
    /// applied, or their provider cannot remove.
    pub forget: Vec<StoredItem>,
    input: &'a Input,
    options: Options,
    /// `None` for a plan without a store yet.
    store: Option<Store>,
    state_path: PathBuf,
    /// The store's items as the plan found them (intents settled).
    stored: Vec<StoredItem>,
    /// How many catalog items the manifests declared (the rest are
    /// removals).
    declared_items: usize,
    /// The store's serial when its items were read.
    serial_read: i64,
    /// Catalog items whose config tasks replace stored resources, and
    /// those resources.
    replacements: Vec<(usize, Vec<(String, String)>)>,
}

/// Plans `host` to `input` with the store `store_at`: everything before
/// the first provider call that changes anything.
pub fn prepare<'a>(
    host: &Host,
    registry: &'a Registry,
    store_at: &StoreAt,
    input: &'a Input,
    options: Options,
) -> Result<Prepared<'a>, RunError> {
    let made = Made::new(host, registry, store_at, input, &options)?;
    made.plan(host, registry, input, options)
}

/// [`prepare`] for the one run of `input` (one machine, not a fleet of
/// targets that each make their catalog from the same input): the
/// manifests' declarations are let go once the catalog is made, so that a
/// plan of many resources does not hold them beside its catalog and tasks.
/// `input` keeps its reading's digest and problems, and no declaration.
pub fn prepare_once<'a>(
    host: &Host,
    registry: &'a Registry,
    store_at: &StoreAt,
    input: &'a mut Input,
    options: Options,
) -> Result<Prepared<'a>, RunError> {
    let made = Made::new(host, registry, store_at, input, &options)?;
    input.reading.declared = Vec::new();
    made.plan(host, registry, input, options)
}

/// The catalog made, the model plugins' items in it, with the store's
/// items: what a plan is made from, and the last use of the declarations.
struct Made<'a> {
    catalog: Catalog<'a>,
    plan_id: String,
    store: Option<Store>,
    state_path: PathBuf,
    serial_read: i64,
    stored: Vec<StoredItem>,
    decidable: Vec<StoredItem>,
    /// The refreshes earlier runs owe.
    owed: Vec<OwedRefresh>,
    key: Option<StoreKey>,
    origin: Origin,
}

impl<'a> Made<'a> {
    fn new(
        host: &Host,
        registry: &'a Registry,
        store_at: &StoreAt,
        input: &Input,
        options: &Options,
    ) -> Result<Made<'a>, RunError> {
        let catalog = checked_catalog(registry, &input.reading)
            .map_err(|e| with_missing_providers(e, input.saved.as_ref(), registry))?;
        let state_path = store_at.location.path();
        let saved = input.saved.as_ref();
        let plan_id = saved.map_or_else(plan::new_id, |s| s.id.clone());
        let mut store = open_store(store_at, options, &plan_id, saved)?;
        let StoreRead {
            serial: serial_read,
            stored,
            decidable,
            owed,
        } = read_store(host, registry, store.as_mut(), options)?;
        let origin = Origin {
            file: Arc::from(state_path.as_path()),
            line: 0,
        };
        let key = store
            .as_ref()
            .map(Store::existing_key)
            .transpose()?
            .flatten();
        let catalog = with_plugins(
            host,
            registry,
            input,
            catalog,
            &stored,
            key.as_ref(),
            &origin,
            options,
        )?;
        Ok(Made {
            catalog,
            plan_id,
            store,
            state_path,
            serial_read,
            stored,
            decidable,
            owed,
            key,
            origin,
        })
    }

    /// The plan of the catalog made, with its removals and, for a
    /// target, its locks.
    fn plan(
        self,
        host: &Host,
        registry: &'a Registry,
        input: &'a Input,
        options: Options,
    ) -> Result<Prepared<'a>, RunError> {
        let Made {
            mut catalog,
            plan_id,
            store,
            state_path,
            serial_read,
            stored,
            decidable,
            owed,
            key,
            origin,
        } = self;
        let saved = input.saved.as_ref();
        let declared_items = catalog.items.len();
        // Resources of plugin items applied and not expanded again are kept;
        // those of removed items that their removal leaves are forgotten.
        let owned = super::expand::owned(&catalog, decidable);
        // What a config task replaces is taken over, not removed: the
        // recorder forgets it once that task succeeded.
        let replaced = super::expand::replaced(registry, &catalog);
        let decidable: Vec<StoredItem> = owned
            .decidable
            .into_iter()
            .filter(|s| !replaced.contains(&(s.provider.clone(), s.name.clone())))
            .collect();
        // A saved plan removes what it was made to remove.
        let keep_removed = saved.map_or(options.keep_removed, |s| s.keep_removed);
        let mut leftovers = lifecycle::leftovers(&catalog, &decidable, registry, keep_removed);
        if !keep_removed {
            leftovers.forget.extend(owned.forget);
        }
        // A saved plan passed this check when it was made (or was made with
        // --destroy): no file is written for a plan the check refuses, and the
        // file cannot be changed since.
        if saved.is_none() {
            let destroy = options.destroy;
            lifecycle::check_sweep(&input.manifests, &catalog, &stored, &leftovers, destroy)?;
        }
        lifecycle::add_removals(&mut catalog, registry, &leftovers.remove, &origin);
        let plan = match saved {
            // A saved plan runs the tasks it holds, each of which must find
            // its resource as it was planned from.
            Some(saved) => saved
                .plan(&catalog)
                .map_err(|e| invalid(saved, Invalid::Tasks(e)))?,
            None => {
                let drift = key
                    .as_ref()
                    .map(|key| (stored.as_slice(), key, owed.as_slice()));
                // A plan that is neither applied nor saved is only shown:
                // its tasks need their changes, not their transitions.
                let keep = match (options.mode, options.saving) {
                    (Mode::Plan, false) => plan::Keep::Changes,
                    _ => plan::Keep::Transitions,
                };
                plan_anew(host, &catalog, plan_id, drift, options.jobs, keep)?
            }
        };
        let mut plan = plan;
        with_locks(host, registry, &mut catalog, &mut plan, &origin, &options)?;
        if options.mode == Mode::Plan {
            log_forgotten(&leftovers.forget, "an apply only forgets it");
        }
        let replacements = (0..catalog.items.len())
            .map(|at| {
                let keys: Vec<(String, String)> =
                    super::expand::replaced_by(registry, &catalog.items[at]).collect();
                (at, keys)
            })
            .filter(|(_, keys)| !keys.is_empty())
            .collect();
        Ok(Prepared {
            replacements,
            catalog,
            plan,
            forget: leftovers.forget,
            input,
            options,
            store,
            state_path,
            stored,
            declared_items,
            serial_read,
        })
    }
}

/// The catalog with what the model plugins make of it (see `expand`):
/// plugins run here, also for a plan of a target.
#[allow(clippy::too_many_arguments)]
fn with_plugins<'a>(
    host: &Host,
    registry: &'a Registry,
    input: &Input,
    catalog: Catalog<'a>,
    stored: &[StoredItem],
    key: Option<&StoreKey>,
    origin: &Origin,
    options: &Options,
) -> Result<Catalog<'a>, Error> {
    let local = local_host(host);
    let context = plugin_context(host, local.as_ref(), options);
    super::expand::expand(
        &context,
        registry,
        &input.reading,
        catalog,
        stored,
        key,
        origin,
    )
}

/// A host for calls that run here when `host` runs providers on a target:
/// plugins run where ral runs, as LITP's run on its management server.
fn local_host(host: &Host) -> Option<Host> {
    host.config().remote.as_ref().map(|_| {
        Host::new(crate::host::HostConfig {
            remote: None,
            ..host.config().clone()
        })
    })
}

fn plugin_context<'h>(
    host: &'h Host,
    local: Option<&'h Host>,
    options: &Options,
) -> super::expand::Context<'h> {
    let runner: &dyn crate::invoke::Runner = match local {
        Some(local) => local,
        None => host,
    };
    super::expand::Context {
        runner,
        root: host.root(),
        target: host
            .config()
            .remote
            .as_ref()
            .map(|s| s.target.name.as_str()),
        noop: options.mode == Mode::Plan,
        keep_removed: options.keep_removed,
    }
}

/// With a target, the lock and unlock tasks around a plan that has tasks.
fn with_locks<'a>(
    host: &Host,
    registry: &'a Registry,
    catalog: &mut Catalog<'a>,
    plan: &mut Plan,
    origin: &Origin,
    options: &Options,
) -> Result<(), Error> {
    let Some(session) = &host.config().remote else {
        return Ok(());
    };
    let local = local_host(host);
    let context = plugin_context(host, local.as_ref(), options);
    let node = super::locks::node(&session.target);
    super::locks::add(&context, registry, catalog, plan, &node, origin)
}

/// The plan from one read per provider, with the refreshes earlier runs
/// owe, its tasks marked drifted where `drift` (the stored items, the
/// store's key and the refreshes owed) says ral applied them as
/// declared and they changed since, and keeping what `keep` says.
fn plan_anew(
    host: &Host,
    catalog: &Catalog,
    id: String,
    drift: Option<(&[StoredItem], &StoreKey, &[OwedRefresh])>,
    jobs: usize,
    keep: plan::Keep,
) -> Result<Plan, Error> {
    let found = plan::read_states(host, catalog, jobs);
    let applied = drift.map(|(stored, key, owed)| lifecycle::Remembered::new(stored, key, owed));
    let mut plan = plan::plan_keeping(catalog, found, id, keep, applied.as_ref())?;
    if let Some(applied) = &applied {
        plan::mark_drifted(catalog, &mut plan, applied);
    }
    Ok(plan)
}

/// The catalog of what the manifests declare; every problem in one
/// error: the manifests' own and the catalog's.
fn checked_catalog<'a>(registry: &'a Registry, reading: &Reading) -> Result<Catalog<'a>, Error> {
    // `when:`, `loop:` and `vars:` mean something only once rendered for
    // a host: taken as they are, a condition would be ignored.
    let unrendered: Vec<Problem> = reading
        .declared
        .iter()
        .filter(|d| d.varying.is_some())
        .map(|d| {
            d.origin.problem(format!(
                "{}[{}]: when: and loop: are resolved by rendering the manifests for a host \
                 (ral::templating::render) before the catalog is made",
                crate::text::escape(&d.type_query),
                crate::text::escape(&d.name)
            ))
        })
        .collect();
    if !unrendered.is_empty() {
        return Err(Error::Manifest {
            problems: unrendered,
        });
    }
    match Catalog::build(registry, &reading.declared) {
        Ok(catalog) if reading.problems.is_empty() => Ok(catalog),
        Ok(_) => Err(Error::Manifest {
            problems: reading.problems.clone(),
        }),
        Err(more) => {
            let mut problems = reading.problems.clone();
            problems.extend(more);
            Err(Error::Manifest { problems })
        }
    }
}

/// A saved plan's manifests that name providers not found: says which of
/// the plan's providers are missing and where they were when it was made,
/// since `ralsh`'s list cannot show them.
fn with_missing_providers(error: Error, saved: Option<&SavedPlan>, registry: &Registry) -> Error {
    let (mut problems, saved) = match (error, saved) {
        (Error::Manifest { problems }, Some(saved)) => (problems, saved),
        (error, _) => return error,
    };
    for (provider, source) in saved.providers_missing_from(registry) {
        problems.push(Problem {
            file: saved.path.clone(),
            line: 0,
            message: format!(
                "the plan was made with the provider {provider} ({source}), which is not found \
                 now: give ral apply the -I directories (or RALSH_DATA_DIR) the plan was made \
                 with"
            ),
        });
    }
    Error::Manifest { problems }
}

/// What the store holds as a run starts.
#[derive(Default)]
struct StoreRead {
    serial: i64,
    stored: Vec<StoredItem>,
    /// The items whose intents are settled: only about those is anything
    /// decided.
    decidable: Vec<StoredItem>,
    owed: Vec<OwedRefresh>,
}

/// The store's serial and items, with what a run that ended early was
/// doing settled first, so that what it created is known as ral's
/// (ownership's docs). No store: nothing stored.
fn read_store(
    host: &Host,
    registry: &Registry,
    store: Option<&mut Store>,
    options: &Options,
) -> Result<StoreRead, Error> {
    let Some(store) = store else {
        return Ok(StoreRead::default());
    };
    // The serial a saved plan carries is the one of the items it is made
    // from: read first, so that an apply ending in between makes the plan
    // stale (refused), never current.
    let serial = store.serial()?;
    let mut stored = store.items()?;
    let apply = options.mode == Mode::Apply;
    let unsettled =
        ownership::settle_store(host, registry, store, apply, &mut stored, options.jobs)?;
    let decidable = stored
        .iter()
        .filter(|i| !unsettled.contains(&(i.provider.clone(), i.name.clone())))
        .cloned()
        .collect();
    Ok(StoreRead {
        serial,
        stored,
        decidable,
        owed: store.owed_refreshes()?,
    })
}

/// A plan reads the store as it is (`None` when there is none); an apply
/// holds its lock throughout, after recovering the plans of runs that
/// died, and a saved plan must find the store it was made against.
fn open_store(
    store_at: &StoreAt,
    options: &Options,
    plan_id: &str,
    saved: Option<&SavedPlan>,
) -> Result<Option<Store>, RunError> {
    let identity = Some(&store_at.identity);
    if options.mode == Mode::Plan && options.origin.is_none() {
        // A saved plan is bound to its store: saving makes the store (and
        // its key) when there is none yet.
        return Ok(match options.saving {
            true => Some(Store::open_at(&store_at.location, identity)?),
            false => Store::open_existing_at(&store_at.location, identity)?,
        });
    }
    let holder = match &options.origin {
        Some(origin) => Holder::me(plan_id).by(&origin.by),
        None => Holder::me(plan_id),
    };
    let mut store =
        Store::open_locked(&store_at.location, identity, &holder, options.lock_timeout)?;
    for dead in store.recover_dead_plans()? {
        log::warn!(
            "plan {dead} was left running by a process that ended; it is marked Failed, and \
             this plan reads every resource again"
        );
    }
    if let Some(saved) = saved {
        // Verified before the lock: still the same store.
        if store.id()? != saved.store_id {
            let path = store_at.location.path();
            return Err(invalid(saved, Invalid::StoreReplaced(path)));
        }
        if store.history()?.iter().any(|p| p.id == saved.id) {
            return Err(invalid(saved, Invalid::AlreadyApplied));
        }
        let now = store.serial()?;
        if now != saved.store_serial {
            let planned = saved.store_serial;
            return Err(invalid(saved, Invalid::StoreChanged { planned, now }));
        }
    }
    Ok(Some(store))
}

impl Prepared<'_> {
    /// The plan as a report: what `--json` prints and the store keeps.
    pub fn report(&self) -> Report {
        Report::of(&self.catalog, &self.plan)
    }

    /// What the plan was made from.
    pub fn input(&self) -> &Input {
        self.input
    }

    /// How the plan ends when it is not applied: changes pending,
    /// resources that could not be read.
    pub fn planned(&self) -> Outcome {
        Outcome {
            changes: self.plan.has_changes(),
            failures: self.plan.tasks.iter().any(|t| t.state == TaskState::Failed),
        }
    }

    /// Writes the plan's tasks to `file` (0600), bound to the store and
    /// the root, for `ral apply FILE` to run exactly. Needs
    /// [`Options::saving`].
    pub fn save(&self, file: &Path, root: &Path) -> Result<(), RunError> {
        let store = self.store.as_ref().ok_or_else(|| Error::Store {
            path: self.state_path.clone(),
            message: "a plan is saved only when prepared for saving".to_owned(),
        })?;
        // A saved plan runs exactly what it holds, never planning again;
        // a plugin's answer is made anew each time it is asked.
        if self.catalog.plugins.is_some() {
            return Err(Error::SavedPlan {
                path: file.to_owned(),
                message: "the plan holds model plugins' items, and a plan with them cannot be \
                          saved yet: run ral apply with the manifests"
                    .to_owned(),
            }
            .into());
        }
        saved::write(
            file,
            &self.catalog,
            &self.plan,
            &saved::Origin {
                manifests: &self.input.manifests,
                manifest_digest: &self.input.reading.digest,
                root,
                store_id: &store.id()?,
                store_serial: self.serial_read,
                key: &store.key()?,
                keep_removed: self.options.keep_removed,
                store_path: &self.state_path,
            },
        )?;
        Ok(())
    }

    /// Records the plan of a run with an origin prepared with
    /// [`Mode::Plan`] (`ral agent --noop`) as a plan in state `Noop`:
    /// what it found to do, nothing done. The items' states stay as they
    /// are.
    pub fn record_noop(&mut self) -> Result<(), RunError> {
        let (Some(origin), Mode::Plan, Some(store)) =
            (&self.options.origin, self.options.mode, self.store.as_mut())
        else {
            return Err(Error::Store {
                path: self.state_path.clone(),
                message: "only a plan with an origin is recorded without being applied".to_owned(),
            }
            .into());
        };
        let report = super::record::report_text(&Report::of(&self.catalog, &self.plan));
        let now = crate::store::now();
        store.begin_plan(
            &crate::store::PlanRecord {
                id: self.plan.id.clone(),
                manifest_digest: self.input.reading.digest.clone(),
                state: "Noop".to_owned(),
                created: now,
                started: Some(now),
                ended: None,
                report: Some(report.clone()),
                origin: Some(origin.text.clone()),
            },
            &[],
        )?;
        store.end_plan(&self.plan.id, "Noop", &report)?;
        Ok(())
    }

    /// Runs the plan (prepared with [`Mode::Apply`]): forgets what is
    /// only forgotten, records the plan, runs its tasks (`stop` is asked
    /// between them) and verifies them, recording each step. `events`
    /// hears of each step as it happens.
    pub fn apply(
        &mut self,
        host: &Host,
        stop: StopRequested,
        events: &mut dyn Events,
    ) -> Result<Outcome, RunError> {
        // Only an apply's store is locked, with its dead plans recovered:
        // a plan prepared for saving has a store too, but not those.
        let store = match (self.options.mode, self.store.as_mut()) {
            (Mode::Apply, Some(store)) => store,
            _ => {
                return Err(Error::Store {
                    path: self.state_path.clone(),
                    message: "a plan is applied only when prepared for applying".to_owned(),
                }
                .into())
            }
        };
        if !self.forget.is_empty() {
            let keys: Vec<(String, String)> = self
                .forget
                .iter()
                .map(|item| (item.provider.clone(), item.name.clone()))
                .collect();
            store.forget(&keys)?;
            log_forgotten(&self.forget, "it is left as it is and forgotten");
            events.forgotten(&self.forget);
        }
        let mut recorder = Recorder::new(store, &self.catalog, &self.stored, self.declared_items)?;
        recorder.replacements = self.replacements.clone();
        recorder.origin = self.options.origin.as_ref().map(|o| o.text.clone());
        let report = Report::of(&self.catalog, &self.plan);
        recorder.begin(&self.plan, &self.input.reading.digest, &report)?;
        let failed_store = AtomicBool::new(false);
        {
            let mut recording = Recording {
                recorder: &mut recorder,
                inner: events,
                failed: &failed_store,
            };
            let stop = || stop() || failed_store.load(Ordering::SeqCst);
            apply::apply(
                host,
                &self.catalog,
                &mut self.plan,
                self.options.jobs,
                &stop,
                &mut recording,
            );
        }
        recorder.finish(&self.plan, &Report::of(&self.catalog, &self.plan))?;
        if let Some(e) = recorder.failure.take() {
            return Err(e.into());
        }
        Ok(applied(&self.plan))
    }
}

fn log_forgotten(items: &[StoredItem], what_happens: &str) {
    for item in items {
        if !item.owners.is_empty() {
            log::info!(
                "{}[{}] was made for {}, whose removal leaves it, so {what_happens}",
                item.type_name,
                item.name,
                item.owners.join(" and ")
            );
            continue;
        }
        log::info!(
            "{}[{}] is no longer in any manifest; ral did not create it, so {what_happens}",
            item.type_name,
            item.name
        );
    }
}

/// How an applied plan ended.
fn applied(plan: &Plan) -> Outcome {
    Outcome {
        // A task that made changes counts, also when the verification
        // found them short of the manifest; so does a refresh that ran
        // (not one found not needed).
        changes: plan.tasks.iter().any(|t| {
            let refreshed = t.action == plan::Action::Refresh
                && t.state == TaskState::Success
                && t.note.is_none();
            refreshed
                || (!t.changes.is_empty()
                    && (t.state == TaskState::Success
                        || t.error
                            .as_ref()
                            .is_some_and(|e| e.kind == ErrorKind::Verify)))
        }),
        failures: plan.state != PlanState::Successful,
    }
}
