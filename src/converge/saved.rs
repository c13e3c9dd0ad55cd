//! Saved plans: `ral plan -o FILE` writes the tasks of a plan with all
//! they need, and `ral apply FILE` runs exactly those tasks or nothing
//! (Terraform's rule): the plan is never made again from the manifests.
//!
//! A file is a saved plan exactly when its text starts with
//! `{"ral_saved_plan":` ([`is_marked`]); anything else is a manifest. Its
//! layout is fixed: `{"ral_saved_plan":2,"plan":BODY,"hmac":"TAG"}` and a
//! newline, where TAG is the HMAC-SHA256, under the state store's key, of
//! every byte before it. One changed byte anywhere and the file is refused
//! whole. The body binds the plan to its store (identity and serial), root
//! and target, names the manifests it was made from (with their digest,
//! keyed too), and holds every task: its resource, action, the ids it waits
//! for, the attributes it asks for and sets, and the state it was planned
//! from. Sensitive values never enter the file, only their keyed digests:
//! `ral apply` takes them from the manifests again and checks each against
//! its digest.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

use crate::discovery::Registry;
use crate::error::{Error, Result};
use crate::provider::Provider;
use crate::resource::{Change, Resource};
use crate::secrets::REDACTED;
use crate::store::{Store, StoreKey};
use crate::types::{Mismatch, Value};
use crate::update;

use super::catalog::{Catalog, Item};
use super::input::{is_marked, read_text, MARK};
use super::plan::{Action, ErrorKind, Plan, PlanState, Task, TaskError, TaskState};
use super::planned::{secret_digest, secret_matches, Planned};

/// The format this binary writes and reads.
const FORMAT: u64 = 3;
/// What comes between the body and the tag.
const TAG_FIELD: &str = ",\"hmac\":\"";
/// What follows the tag.
const END: &str = "\"}\n";
/// The length of a tag (hex HMAC-SHA256).
const TAG_LEN: usize = 64;
/// The target a plan made on this machine is for (remote targets do not
/// take saved plans yet).
pub const LOCAL: &str = "local";

/// The file, as written and read.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Framed {
    ral_saved_plan: u64,
    plan: Body,
    hmac: String,
}

/// What a saved plan holds.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Body {
    id: String,
    /// The identity of the state store it was made against.
    store: String,
    store_serial: i64,
    root: String,
    target: String,
    manifests: Vec<String>,
    /// The manifests' digest, keyed: the plain digest of a manifest with a
    /// password in it would let a guess be tested offline.
    manifest_digest: String,
    /// Whether it was made with `--keep-removed` (no removals planned):
    /// the items of the store its manifests do not list are then kept.
    keep_removed: bool,
    unchanged: usize,
    /// The programs of the providers its tasks run: the same must run
    /// them at apply.
    providers: Vec<ProviderFile>,
    tasks: Vec<SavedTask>,
}

/// A provider's program, as the plan was made with it.
#[derive(Serialize, Deserialize, Clone)]
#[serde(deny_unknown_fields)]
struct ProviderFile {
    provider: String,
    source: String,
    sha256: String,
}

impl ProviderFile {
    /// `provider`'s program as it is now: its path, and the digest of its
    /// bytes (`-` when it cannot be read).
    fn of(provider: &Provider) -> ProviderFile {
        use sha2::{Digest, Sha256};
        ProviderFile {
            provider: provider.qualified_name(),
            source: provider.source.to_string_lossy().into_owned(),
            sha256: std::fs::read(&provider.source).map_or_else(
                |_| "-".to_owned(),
                |bytes| crate::text::hex(&Sha256::digest(bytes)),
            ),
        }
    }
}

/// One task, with all it needs to run.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct SavedTask {
    id: usize,
    provider: String,
    /// The type (or qualified provider name) the manifest listed it under.
    #[serde(rename = "type")]
    type_query: String,
    name: String,
    action: String,
    requires: Vec<usize>,
    drifted: bool,
    /// The state it was planned from.
    read: Observed,
    /// Every attribute the manifest asks for (the request).
    request: Vec<Attr>,
    /// The attributes the task sets.
    should: Vec<Attr>,
    /// A refresh's: the ids of the tasks whose change calls for it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    refresh_on: Vec<usize>,
    /// A refresh's: an earlier run owes it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    owed: bool,
}

/// What the plan's read of a task's resource gave.
#[derive(Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case", deny_unknown_fields)]
enum Observed {
    /// Read: `found` tells whether the provider knew it at all; `attrs`
    /// is the state (the absent state when not found).
    Read { found: bool, attrs: Vec<Attr> },
    /// The read failed: the task fails without running.
    Failed { error: String },
    /// The read failed while it waited for other tasks: it is read again
    /// before it runs, and does what that state calls for.
    Deferred { error: String },
}

/// One attribute's value, or a sensitive one's keyed digest.
#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum Attr {
    Plain(PlainAttr),
    Secret(SecretAttr),
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct PlainAttr {
    attr: String,
    value: Json,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct SecretAttr {
    attr: String,
    hmac: String,
}

impl Attr {
    fn name(&self) -> &str {
        match self {
            Attr::Plain(a) => &a.attr,
            Attr::Secret(a) => &a.attr,
        }
    }
}

/// The keyed digest of the manifests' digest.
fn manifest_digest(key: &StoreKey, digest: &str) -> String {
    key.digest(&manifest_parts(digest))
}

fn manifest_parts(digest: &str) -> [&[u8]; 2] {
    [b"ral saved plan: manifests", digest.as_bytes()]
}

/// The attributes as the file keeps them.
fn attrs_out<'a>(
    key: &StoreKey,
    provider: &Provider,
    name: &str,
    attrs: impl Iterator<Item = (&'a String, &'a Value)>,
) -> Vec<Attr> {
    let qualified = provider.qualified_name();
    attrs
        .map(|(attr, value)| {
            if provider.attribute(attr).is_some_and(|a| a.kept_keyed()) {
                Attr::Secret(SecretAttr {
                    attr: attr.clone(),
                    hmac: secret_digest(key, &qualified, name, attr, value),
                })
            } else {
                Attr::Plain(PlainAttr {
                    attr: attr.clone(),
                    value: Json::from(value),
                })
            }
        })
        .collect()
}

/// What a saved plan records besides its tasks.
pub struct Origin<'a> {
    pub manifests: &'a [PathBuf],
    /// The manifests' digest as read.
    pub manifest_digest: &'a str,
    pub root: &'a Path,
    pub store_id: &'a str,
    pub store_serial: i64,
    pub key: &'a StoreKey,
    pub keep_removed: bool,
    /// The state store's database: the plan is never written over it or
    /// the files beside it that share its name.
    pub store_path: &'a Path,
}

/// Refuses `path` as the file of a plan when it is one of `manifests`,
/// by any path to it (device and inode): the plan would replace the
/// manifest it was made from, and could then never apply. `ral plan -o`
/// asks before it reads anything; writing the plan asks again.
pub fn check_not_a_manifest(path: &Path, manifests: &[PathBuf]) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    let id = |meta: std::fs::Metadata| (meta.dev(), meta.ino());
    let Ok(target) = std::fs::metadata(path).map(id) else {
        return Ok(());
    };
    for manifest in manifests.iter().filter(|m| m.as_os_str() != "-") {
        if std::fs::metadata(manifest).map(id).ok() == Some(target) {
            return Err(invalid(
                path,
                format!(
                    "it is the manifest {}: ral plan -o would write over it; give -o another \
                     file",
                    manifest.display()
                ),
            ));
        }
    }
    Ok(())
}

/// Refuses to write a plan to `path` when that would replace one of its
/// manifests (the plan could then never apply) or one of the state
/// store's files (and the record of what ral created).
fn check_target(path: &Path, origin: &Origin) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    let id = |meta: std::fs::Metadata| (meta.dev(), meta.ino());
    // The file is replaced by a rename: a link at `path` is replaced, not
    // what it points to.
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        // Renamed over a device or a link (`-o /dev/null`, `-o
        // /dev/stdout`), the plan would replace it.
        if !meta.is_file() {
            return Err(invalid(
                path,
                "it is not a regular file: ral plan -o writes a file of its own, and would \
                 replace it",
            ));
        }
        check_not_a_manifest(path, origin.manifests)?;
    }
    let dir_of = |p: &Path| {
        let dir = p.parent().filter(|d| !d.as_os_str().is_empty());
        std::fs::metadata(dir.unwrap_or(Path::new(".")))
            .map(id)
            .ok()
    };
    let store_dir = dir_of(origin.store_path);
    let (Some(name), Some(db)) = (path.file_name(), origin.store_path.file_name()) else {
        return Ok(());
    };
    if store_dir.is_some()
        && dir_of(path) == store_dir
        && name.as_encoded_bytes().starts_with(db.as_encoded_bytes())
    {
        return Err(invalid(
            path,
            format!(
                "it is one of the state store's files ({}): ral plan -o would write over it",
                origin.store_path.display()
            ),
        ));
    }
    Ok(())
}

/// Writes `plan` (of `catalog`) to `path`, readable by its owner only,
/// whole or not at all.
pub fn write(path: &Path, catalog: &Catalog, plan: &Plan, origin: &Origin) -> Result<()> {
    check_target(path, origin)?;
    let key = origin.key;
    let tasks = (plan.tasks.iter().enumerate())
        .map(|(at, task)| saved_task(key, catalog, at, task))
        .collect();
    // Paths are kept as text: one that is not UTF-8 could not be read back.
    let text_of = |p: &Path| {
        absolute(p).to_str().map(str::to_owned).ok_or_else(|| {
            invalid(
                path,
                format!("{} is not UTF-8: a saved plan cannot name it", p.display()),
            )
        })
    };
    let manifests = origin
        .manifests
        .iter()
        .map(|p| text_of(p))
        .collect::<Result<_>>()?;
    let body = Body {
        id: plan.id.clone(),
        store: origin.store_id.to_owned(),
        store_serial: origin.store_serial,
        root: text_of(origin.root)?,
        target: LOCAL.to_owned(),
        manifests,
        manifest_digest: manifest_digest(key, origin.manifest_digest),
        keep_removed: origin.keep_removed,
        unchanged: plan.unchanged,
        providers: providers_of(catalog, plan),
        tasks,
    };
    write_whole(path, &seal(&body, key))
}

/// The `at`th task of a plan of `catalog` as the file keeps it, its
/// sensitive values as digests keyed with `key`.
fn saved_task(key: &StoreKey, catalog: &Catalog, at: usize, task: &Task) -> SavedTask {
    let item = &catalog.items[task.item];
    let provider = item.provider;
    let name = item.name();
    let should = task.transition.as_ref().map_or_else(Vec::new, |t| {
        attrs_out(key, provider, name, t.should.iter().map(|(k, v)| (k, v)))
    });
    SavedTask {
        id: Plan::task_id(at),
        provider: provider.qualified_name(),
        type_query: item.type_query.clone(),
        name: name.to_owned(),
        action: task.action.as_str().to_owned(),
        requires: task.requires.iter().map(|&r| Plan::task_id(r)).collect(),
        drifted: task.drifted,
        read: read_of(key, item, task),
        request: attrs_out(
            key,
            provider,
            name,
            item.request.attrs.iter().map(|(k, v)| (k, v)),
        ),
        should,
        refresh_on: task.refresh_on.iter().map(|&r| Plan::task_id(r)).collect(),
        owed: task.owed,
    }
}

/// What the plan's read of the resource of `task` (`item`) gave, as the
/// file keeps it.
fn read_of(key: &StoreKey, item: &Item, task: &Task) -> Observed {
    match (&task.error, &task.deferred, &task.transition) {
        // A refresh reads nothing: its resource's own task does.
        _ if task.action == Action::Refresh => Observed::Read {
            found: true,
            attrs: Vec::new(),
        },
        (Some(error), _, _) if task.state == TaskState::Failed => Observed::Failed {
            error: error.message.clone(),
        },
        (_, Some(error), _) => Observed::Deferred {
            error: error.clone(),
        },
        (_, None, Some(transition)) => Observed::Read {
            found: transition.found,
            attrs: attrs_out(
                key,
                item.provider,
                item.name(),
                transition.state.attrs.iter(),
            ),
        },
        (_, None, None) => Observed::Failed {
            error: "its state could not be read".to_owned(),
        },
    }
}

/// The providers of the plan's tasks, each once, in the order of their
/// first task.
fn providers_of(catalog: &Catalog, plan: &Plan) -> Vec<ProviderFile> {
    let mut providers: Vec<ProviderFile> = Vec::new();
    for task in &plan.tasks {
        let provider = catalog.items[task.item].provider;
        if !providers
            .iter()
            .any(|p| p.provider == provider.qualified_name())
        {
            providers.push(ProviderFile::of(provider));
        }
    }
    providers
}

/// Writes `text` to `path` whole or not at all, created 0600 (the
/// temporary file is).
fn write_whole(path: &Path, text: &str) -> Result<()> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mut file = tempfile::NamedTempFile::new_in(dir)
        .map_err(|e| Error::io(path.display().to_string(), e))?;
    std::io::Write::write_all(&mut file, text.as_bytes())
        .and_then(|()| file.as_file().sync_all())
        .map_err(|e| Error::io(path.display().to_string(), e))?;
    file.persist(path)
        .map_err(|e| Error::io(path.display().to_string(), e.error))?;
    Ok(())
}

/// The file's text for `body`: framed, and tagged under `key`.
fn seal(body: &Body, key: &StoreKey) -> String {
    let body = serde_json::to_string_pretty(body).expect("a saved plan serializes");
    let signed = format!("{MARK}{FORMAT},\"plan\":{body}{TAG_FIELD}");
    let tag = key.digest(&[signed.as_bytes()]);
    format!("{signed}{tag}{END}")
}

fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_owned())
}

/// A file that carries the saved-plan mark and parses as one, not yet
/// verified against a store.
pub struct SavedFile {
    pub path: PathBuf,
    /// The bytes the tag authenticates.
    signed: String,
    /// The tag, as the file spells it.
    tag: String,
    framed: Framed,
}

fn invalid(path: &Path, message: impl Into<String>) -> Error {
    Error::SavedPlan {
        path: path.to_owned(),
        message: message.into(),
    }
}

const CHANGED: &str = "it was changed after it was written (or ral did not write it)";

/// Reads `path` as a saved plan: `None` when it is not one (no mark, or
/// not readable: a manifest); an error when it has the mark but is not a
/// whole saved plan of this format. Standard input is never a saved plan.
pub fn read(path: &Path) -> Result<Option<SavedFile>> {
    if path.as_os_str() == "-" {
        return Ok(None);
    }
    // What cannot be read is no saved plan: the manifest reader, which
    // reads inputs the same way, says why in its own words.
    let Ok(text) = read_text(path) else {
        return Ok(None);
    };
    let changed = |detail: String| invalid(path, format!("{CHANGED}: {detail}"));
    if !is_marked(&text) {
        // Blanks or a byte-order mark put before the mark (an editor's
        // doing) leave a saved plan, changed: never a manifest.
        if is_marked(text.trim_start_matches(|c: char| c == '\u{feff}' || c.is_whitespace())) {
            return Err(changed("something was put before its mark".to_owned()));
        }
        return Ok(None);
    }
    let loose: Json =
        serde_json::from_str(&text).map_err(|e| changed(format!("it is not JSON ({e})")))?;
    match loose.get("ral_saved_plan").and_then(Json::as_u64) {
        Some(FORMAT) => {}
        Some(other) => {
            return Err(invalid(
                path,
                format!(
                    "it is a saved plan of format {other}; this ral reads format {FORMAT}: make \
                     the plan again"
                ),
            ))
        }
        None => return Err(changed("its format is not a number".to_owned())),
    }
    let (signed, tag) = text
        .strip_suffix(END)
        .and_then(|rest| {
            let at = rest.len().checked_sub(TAG_LEN)?;
            rest.is_char_boundary(at).then(|| rest.split_at(at))
        })
        .filter(|(signed, _)| signed.ends_with(TAG_FIELD))
        .ok_or_else(|| changed("it does not end with its tag".to_owned()))?;
    let framed: Framed =
        serde_json::from_str(&text).map_err(|e| changed(format!("it does not parse ({e})")))?;
    if framed.hmac != tag {
        return Err(changed("its tag is spelled otherwise".to_owned()));
    }
    Ok(Some(SavedFile {
        path: path.to_owned(),
        signed: signed.to_owned(),
        tag: tag.to_owned(),
        framed,
    }))
}

/// A saved plan verified against the store it is to be applied to.
pub struct SavedPlan {
    pub path: PathBuf,
    pub id: String,
    pub manifests: Vec<PathBuf>,
    /// The identity of the store it was verified against.
    pub store_id: String,
    pub store_serial: i64,
    /// Made with `--keep-removed`: the items its manifests do not list
    /// are kept, not removed (nor forgotten).
    pub keep_removed: bool,
    manifest_digest: String,
    unchanged: usize,
    providers: Vec<ProviderFile>,
    tasks: Vec<SavedTask>,
    key: StoreKey,
}

impl SavedFile {
    /// Verifies the file for the store `store` (at `store_path`) and the
    /// root `root` of this machine: its tag under the store's key, the
    /// store's identity, the root and the target.
    pub fn verify(
        self,
        store: Option<&Store>,
        store_path: &Path,
        root: &Path,
    ) -> Result<SavedPlan> {
        let SavedFile {
            path,
            signed,
            tag,
            framed,
        } = self;
        let body = framed.plan;
        let refuse = |message: String| invalid(&path, message);
        let elsewhere = |id: Option<&str>| {
            refuse(format!(
                // The root it names (not yet verified) tells which
                // --root or --state was meant.
                "it was made for another state store (store {}, of the root {}), not for {} ({})",
                body.store,
                crate::text::escape(&body.root),
                store_path.display(),
                id.map_or("which does not exist".to_owned(), |id| format!(
                    "store {id}"
                ))
            ))
        };
        let Some(store) = store else {
            return Err(elsewhere(None));
        };
        let id = store.id()?;
        let Some(key) = store.existing_key()? else {
            return Err(elsewhere(Some(&id)));
        };
        if !key.verify(&[signed.as_bytes()], &tag) {
            return Err(if body.store == id {
                refuse(CHANGED.to_owned())
            } else {
                elsewhere(Some(&id))
            });
        }
        if body.store != id {
            return Err(elsewhere(Some(&id)));
        }
        let here = absolute(root);
        if Path::new(&body.root) != here {
            return Err(refuse(format!(
                "plan {} is Invalid: it was made for the root {}, not {}",
                body.id,
                body.root,
                here.display()
            )));
        }
        if body.target != LOCAL {
            return Err(refuse(format!(
                "plan {} is Invalid: it was made for the target {}, not this machine",
                body.id, body.target
            )));
        }
        Ok(SavedPlan {
            path,
            id: body.id,
            manifests: body.manifests.into_iter().map(PathBuf::from).collect(),
            store_id: body.store,
            store_serial: body.store_serial,
            keep_removed: body.keep_removed,
            manifest_digest: body.manifest_digest,
            unchanged: body.unchanged,
            providers: body.providers,
            tasks: body.tasks,
            key,
        })
    }
}

impl SavedPlan {
    /// Whether the manifests read now (`digest`, as read) are those the
    /// plan was made from.
    pub fn manifests_match(&self, digest: &str) -> bool {
        self.key
            .verify(&manifest_parts(digest), &self.manifest_digest)
    }

    /// The providers the plan's tasks run that `registry` does not have,
    /// each with the program it was made with: a plan applied without the
    /// provider directories it was made with (`-I`, `RALSH_DATA_DIR`).
    pub fn providers_missing_from(&self, registry: &Registry) -> Vec<(&str, &str)> {
        self.providers
            .iter()
            .filter(|file| {
                !registry
                    .providers()
                    .iter()
                    .any(|p| p.qualified_name() == file.provider)
            })
            .map(|file| (file.provider.as_str(), file.source.as_str()))
            .collect()
    }

    /// The plan's tasks, on the catalog made from its manifests (and the
    /// store's removals): exactly those the file holds, with the sensitive
    /// values taken from the manifests and checked against their digests.
    /// An error when the catalog and the file do not agree.
    pub fn plan(&self, catalog: &Catalog) -> std::result::Result<Plan, Disagreement> {
        let index: HashMap<(String, &str), usize> = catalog
            .items
            .iter()
            .enumerate()
            .map(|(at, item)| ((item.provider.qualified_name(), item.name()), at))
            .collect();
        let mut seen = HashSet::new();
        let mut checked = HashSet::new();
        let mut tasks = Vec::with_capacity(self.tasks.len());
        for (at, saved) in self.tasks.iter().enumerate() {
            let reference = format!("{}[{}]", saved.type_query, saved.name);
            if saved.id != at + 1 {
                return Err(Disagreement::OutOfOrder {
                    id: saved.id,
                    reference,
                });
            }
            if let Some(&id) = saved.requires.iter().find(|&&id| id == 0 || id >= saved.id) {
                return Err(Disagreement::WaitsForLater { reference, id });
            }
            let item_at = *index
                .get(&(saved.provider.clone(), saved.name.as_str()))
                .filter(|&&i| catalog.items[i].type_query == saved.type_query)
                .ok_or_else(|| Disagreement::Gone {
                    reference: reference.clone(),
                })?;
            // An item has at most one change and one refresh.
            if !seen.insert((item_at, saved.action == "refresh")) {
                return Err(Disagreement::Twice { reference });
            }
            let provider = catalog.items[item_at].provider;
            if checked.insert(saved.provider.as_str()) {
                let now = ProviderFile::of(provider);
                let then = self.providers.iter().find(|p| p.provider == saved.provider);
                // The program decides, not its path: bundled providers
                // live in a cache directory that may be another one.
                if then.is_none_or(|then| then.sha256 != now.sha256) {
                    return Err(Disagreement::ProviderChanged {
                        provider: saved.provider.clone(),
                        now: now.source,
                        then: then.map(|then| then.source.clone()),
                    });
                }
            }
            tasks.push(self.task(saved, item_at, &catalog.items[item_at])?);
        }
        Ok(Plan {
            id: self.id.clone(),
            state: PlanState::Initial,
            tasks,
            unchanged: self.unchanged,
        })
    }

    fn task(
        &self,
        saved: &SavedTask,
        at: usize,
        item: &Item,
    ) -> std::result::Result<Task, Disagreement> {
        let qualified = item.provider.qualified_name();
        let name = item.name();
        let reference = item.reference();
        let secret_of = |attr: &str, hmac: &str, value: &Value| {
            secret_matches(&self.key, &qualified, name, attr, value, hmac)
        };
        // The request the manifests make now must be the one planned.
        if !same_request(&item.request.attrs, &saved.request, &secret_of) {
            return Err(Disagreement::RequestChanged { reference });
        }
        // Checked above: every task it waits for is before it.
        let requires: Vec<usize> = saved.requires.iter().map(|id| id - 1).collect();
        if saved.action == "refresh" {
            return refresh_task(saved, at, requires, reference);
        }
        let action = match saved.action.as_str() {
            "create" => Action::Create,
            "change" => Action::Change,
            "remove" => Action::Remove,
            "unknown" => Action::Unknown,
            other => {
                return Err(Disagreement::UnknownAction {
                    reference,
                    action: other.to_owned(),
                })
            }
        };
        let mut task = Task {
            drifted: saved.drifted,
            ..Task::pending(at, action, requires)
        };
        let (found, attrs) = match &saved.read {
            Observed::Failed { error } => {
                task.state = TaskState::Failed;
                task.error = Some(TaskError {
                    kind: ErrorKind::Read,
                    message: error.clone(),
                });
                return Ok(task);
            }
            Observed::Deferred { error } => {
                task.deferred = Some(error.clone());
                task.transition = Some(Box::new(update::Transition {
                    name: name.to_owned(),
                    found: false,
                    state: Resource::bare(name),
                    should: Vec::new(),
                }));
                return Ok(task);
            }
            Observed::Read { found, attrs } => (*found, attrs),
        };
        let should = self.should(saved, item, &secret_of)?;
        self.set_transition(&mut task, item, found, attrs, should);
        Ok(task)
    }

    /// Gives `task` of `item` its transition from the state the plan read
    /// (`found`, its `attrs`) to `should`, the changes it shows and the
    /// state it was planned from.
    fn set_transition(
        &self,
        task: &mut Task,
        item: &Item,
        found: bool,
        attrs: &[Attr],
        should: Vec<(String, Value)>,
    ) {
        let provider = item.provider;
        let name = item.name();
        let (state, secrets) = state_read(provider, name, attrs);
        task.changes = should
            .iter()
            .map(|(key, value)| Change {
                attr: key.clone(),
                is: value.clone(),
                was: state.attrs.get(key).cloned().or_else(|| {
                    secrets
                        .iter()
                        .any(|(a, _)| a == key)
                        .then(|| Value::from(REDACTED))
                }),
            })
            .collect();
        task.planned_from = Some(Box::new(Planned::new(
            found.then(|| state.clone()),
            secrets,
            self.key.clone(),
            provider.qualified_name(),
        )));
        let transition = update::Transition {
            name: name.to_owned(),
            found,
            state,
            should,
        };
        // A value too large or private to show is shown as its digest.
        task.changes = transition.shown(provider, std::mem::take(&mut task.changes));
        task.transition = Some(Box::new(transition));
    }

    /// The values a task sets, as the manifests give them now: each
    /// sensitive one must still match its digest.
    fn should(
        &self,
        saved: &SavedTask,
        item: &Item,
        secret_of: &dyn Fn(&str, &str, &Value) -> bool,
    ) -> std::result::Result<Vec<(String, Value)>, Disagreement> {
        let provider = item.provider;
        let reference = item.reference();
        let asked = &item.request.attrs;
        let mut should = Vec::with_capacity(saved.should.len());
        for attr in &saved.should {
            let key = attr.name();
            let asked = asked.iter().find(|(k, _)| k == key).map(|(_, v)| v);
            let value = match attr {
                Attr::Secret(a) => asked
                    .filter(|v| secret_of(key, &a.hmac, v))
                    .cloned()
                    .ok_or_else(|| Disagreement::SecretGone {
                        reference: reference.clone(),
                        attr: key.to_owned(),
                    })?,
                Attr::Plain(a) => match asked.filter(|v| Json::from(*v) == a.value) {
                    Some(v) => v.clone(),
                    // A default filled in on creation.
                    None => provider
                        .attribute(key)
                        .ok_or_else(|| Disagreement::NoAttribute {
                            reference: reference.clone(),
                            attr: key.to_owned(),
                        })?
                        .attr_type
                        .check_json(&a.value)
                        .map_err(|reason| Disagreement::BadValue {
                            reference: reference.clone(),
                            attr: key.to_owned(),
                            reason,
                        })?,
                },
            };
            should.push((key.to_owned(), value));
        }
        Ok(should)
    }
}

/// Whether the request the manifests make now (`asked`) is the one a
/// task was planned for (`saved`), each sensitive value matching its
/// digest (`secret_of`).
fn same_request(
    asked: &[(String, Value)],
    saved: &[Attr],
    secret_of: &dyn Fn(&str, &str, &Value) -> bool,
) -> bool {
    asked.len() == saved.len()
        && asked
            .iter()
            .zip(saved)
            .all(|((key, value), attr)| match attr {
                Attr::Plain(a) => &a.attr == key && a.value == Json::from(value),
                Attr::Secret(a) => &a.attr == key && secret_of(key, &a.hmac, value),
            })
}

/// The refresh task `saved`, of the item at `at` known as `reference`:
/// each task whose change calls for it is one it waits for
/// (`requires`), and it has one, or an earlier run owes it.
fn refresh_task(
    saved: &SavedTask,
    at: usize,
    requires: Vec<usize>,
    reference: String,
) -> std::result::Result<Task, Disagreement> {
    let refresh_on: Vec<usize> = saved
        .refresh_on
        .iter()
        .map(|id| id.wrapping_sub(1))
        .collect();
    if (refresh_on.is_empty() && !saved.owed) || refresh_on.iter().any(|r| !requires.contains(r)) {
        return Err(Disagreement::RefreshWithoutSource { reference });
    }
    Ok(Task {
        refresh_on,
        owed: saved.owed,
        ..Task::pending(at, Action::Refresh, requires)
    })
}

/// The state of the resource `name` the plan read, from its saved
/// `attrs` typed by `provider`'s metadata, and the sensitive attributes
/// it held, as (name, keyed digest).
fn state_read(
    provider: &Provider,
    name: &str,
    attrs: &[Attr],
) -> (Resource, Vec<(String, String)>) {
    let mut state = Resource::with_capacity(name, attrs.len());
    let mut secrets = Vec::new();
    for attr in attrs {
        match attr {
            Attr::Plain(a) => {
                let value = provider
                    .attribute(&a.attr)
                    .and_then(|t| t.attr_type.check_json(&a.value).ok())
                    .unwrap_or_else(|| Value::from_json(&a.value));
                state.attrs.insert(a.attr.clone(), value);
            }
            Attr::Secret(a) => secrets.push((a.attr.clone(), a.hmac.clone())),
        }
    }
    (state, secrets)
}

/// How a saved plan's tasks and the catalog made again from its manifests
/// disagree: the plan cannot be applied as it was made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Disagreement {
    #[error("task {id} of {reference} is out of order")]
    OutOfOrder { id: usize, reference: String },
    #[error("{reference} waits for task {id}, which is not before it")]
    WaitsForLater { reference: String, id: usize },
    #[error("{reference} is not in its manifests or the state store any more")]
    Gone { reference: String },
    #[error("{reference} has two tasks")]
    Twice { reference: String },
    #[error("the refresh of {reference} names no task before it that calls for it")]
    RefreshWithoutSource { reference: String },
    /// The provider's program is not the one the plan was made with.
    #[error("its provider {provider} is {now} now, {}", provider_then(.now, .then.as_deref()))]
    ProviderChanged {
        provider: String,
        now: String,
        /// Where it was when the plan was made; `None` when the plan does
        /// not name it.
        then: Option<String>,
    },
    #[error("the manifests ask for {reference} otherwise than when it was made")]
    RequestChanged { reference: String },
    #[error("{reference} has the unknown action '{action}'")]
    UnknownAction { reference: String, action: String },
    #[error("the manifests no longer give the sensitive value of '{attr}' for {reference}")]
    SecretGone { reference: String, attr: String },
    #[error("{reference} has no attribute '{attr}'")]
    NoAttribute { reference: String, attr: String },
    #[error("{reference}: attribute '{attr}': {reason}")]
    BadValue {
        reference: String,
        attr: String,
        reason: Mismatch,
    },
}

fn provider_then(now: &str, then: Option<&str>) -> String {
    match then {
        Some(then) if then == now => "whose program changed since the plan was made".to_owned(),
        Some(then) => format!("not {then} as when the plan was made"),
        None => "and the plan does not name it".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(store: &Store, root: &Path) -> Body {
        Body {
            id: "1-000001-1".to_owned(),
            store: store.id().unwrap(),
            store_serial: 0,
            root: root.to_string_lossy().into_owned(),
            target: LOCAL.to_owned(),
            manifests: vec!["/m.yaml".to_owned()],
            manifest_digest: manifest_digest(&store.key().unwrap(), "abc"),
            keep_removed: false,
            unchanged: 0,
            providers: Vec::new(),
            tasks: vec![SavedTask {
                id: 1,
                provider: "beta::beta".to_owned(),
                type_query: "beta".to_owned(),
                name: "b1".to_owned(),
                action: "create".to_owned(),
                requires: Vec::new(),
                drifted: false,
                read: Observed::Read {
                    found: false,
                    attrs: vec![Attr::Plain(PlainAttr {
                        attr: "ensure".to_owned(),
                        value: Json::from("absent"),
                    })],
                },
                request: vec![Attr::Secret(SecretAttr {
                    attr: "secret".to_owned(),
                    hmac: "00".repeat(32),
                })],
                should: Vec::new(),
                refresh_on: Vec::new(),
                owed: false,
            }],
        }
    }

    fn verified(file: &Path, store: &Store, root: &Path) -> Result<SavedPlan> {
        let saved = read(file)?.expect("the file has the mark");
        saved.verify(Some(store), store.path(), root)
    }

    #[test]
    fn every_byte_is_authenticated() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("state.db")).unwrap();
        let root = dir.path();
        let text = seal(&body(&store, root), &store.key().unwrap());
        let file = dir.path().join("p.plan");
        std::fs::write(&file, &text).unwrap();
        let plan = verified(&file, &store, root).unwrap();
        assert_eq!(plan.id, "1-000001-1");
        assert!(plan.manifests_match("abc"));
        assert!(!plan.manifests_match("abd"));
        // Past the mark, any byte changed is refused; in the mark, the
        // file is no saved plan any more.
        for at in 0..text.len() {
            let mut bytes = text.clone().into_bytes();
            bytes[at] ^= 1;
            std::fs::write(&file, &bytes).unwrap();
            match read(&file) {
                Ok(None) => assert!(at < MARK.len(), "byte {at}: not a saved plan"),
                Ok(Some(saved)) => {
                    let refused = saved.verify(Some(&store), store.path(), root);
                    assert!(refused.is_err(), "byte {at} changed, and verified");
                }
                Err(_) => {}
            }
        }
        // Cut short, or with a byte added at the end: refused.
        for changed in [&text[..text.len() - 1], &format!("{text}\n")] {
            std::fs::write(&file, changed).unwrap();
            assert!(read(&file).is_err());
        }
    }

    #[test]
    fn a_plan_is_bound_to_its_store_root_and_target() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("a.db")).unwrap();
        let other = Store::open(&dir.path().join("b.db")).unwrap();
        let root = dir.path();
        let file = dir.path().join("p.plan");
        let key = store.key().unwrap();
        std::fs::write(&file, seal(&body(&store, root), &key)).unwrap();
        let message = |result: Result<SavedPlan>| result.err().unwrap().to_string();
        assert!(message(verified(&file, &other, root)).contains("another state store"));
        let elsewhere = dir.path().join("elsewhere");
        assert!(message(verified(&file, &store, &elsewhere)).contains("made for the root"));
        let mut remote = body(&store, root);
        remote.target = "web1".to_owned();
        std::fs::write(&file, seal(&remote, &key)).unwrap();
        assert!(message(verified(&file, &store, root)).contains("made for the target web1"));
        // Sealed under another store's key, with this store's id: changed.
        std::fs::write(&file, seal(&body(&store, root), &other.key().unwrap())).unwrap();
        assert!(message(verified(&file, &store, root)).contains("was changed after it was written"));
    }
}
