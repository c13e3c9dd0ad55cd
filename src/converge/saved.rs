//! Saved plans: `ral plan -o FILE` writes the plan with what it was made
//! from (the manifests and their digest, the root, the store's serial, and
//! the state it read of every resource), and `ral apply FILE` makes exactly
//! that plan again from those states, refusing it whole when the manifests
//! or the store changed since, or when it was applied already.

use std::path::{Path, PathBuf};

use serde_json::{json, Map, Value as Json};

use crate::error::{Error, Result};
use crate::resource::Resource;
use crate::types::Value;

use super::catalog::Catalog;
use super::read::Found;

/// The key that marks a saved plan's JSON.
const MARK: &str = "ral_saved_plan";
/// The format this binary writes and reads.
const FORMAT: u64 = 1;

/// A saved plan, read back.
#[derive(Debug, Clone)]
pub struct SavedPlan {
    pub id: String,
    pub manifests: Vec<PathBuf>,
    pub manifest_digest: String,
    pub root: PathBuf,
    pub store_serial: i64,
    /// What the plan read of each resource.
    pub observed: Vec<Observed>,
}

/// What a saved plan read of one resource: its attributes, `None` when
/// it was not found, or the read's error.
#[derive(Debug, Clone)]
pub struct Observed {
    pub provider: String,
    pub name: String,
    pub state: std::result::Result<Option<Map<String, Json>>, String>,
}

fn invalid(path: &Path, message: impl Into<String>) -> Error {
    Error::Store {
        path: path.to_owned(),
        message: message.into(),
    }
}

/// What a saved plan records besides the catalog.
pub struct Origin<'a> {
    pub manifests: &'a [PathBuf],
    pub manifest_digest: &'a str,
    pub root: &'a Path,
    pub store_serial: i64,
}

/// Writes the plan `document` (as `ral plan -j` prints it) with what it
/// was made from: `found` holds each catalog item's state.
pub fn write(
    path: &Path,
    catalog: &Catalog,
    found: &[Found],
    document: &Json,
    origin: &Origin,
) -> Result<()> {
    let observed: Vec<Json> = catalog
        .items
        .iter()
        .zip(found)
        .map(|(item, found)| {
            let state = match found {
                Ok(Some(resource)) => json!({"attrs": Json::Object(
                    resource.attrs.iter().map(|(k, v)| (k.clone(), Json::from(v))).collect()
                )}),
                Ok(None) => json!({"attrs": null}),
                Err(message) => json!({"error": message}),
            };
            json!({
                "provider": item.provider.qualified_name(),
                "name": item.name(),
                "state": state,
            })
        })
        .collect();
    let manifests: Vec<String> = origin
        .manifests
        .iter()
        .map(|p| {
            std::path::absolute(p)
                .unwrap_or_else(|_| p.clone())
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    let saved = json!({
        MARK: FORMAT,
        "id": document["plan"]["id"],
        "manifests": manifests,
        "manifest_digest": origin.manifest_digest,
        "root": origin.root.to_string_lossy(),
        "store_serial": origin.store_serial,
        "observed": observed,
        "plan": document,
    });
    let text = serde_json::to_string_pretty(&saved).expect("JSON values serialize");
    // Written whole or not at all.
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

/// Reads `path` as a saved plan; `None` when it is not one (a manifest).
pub fn read(path: &Path) -> Result<Option<SavedPlan>> {
    let Ok(text) = super::input::read_text(path) else {
        return Ok(None);
    };
    if !text.trim_start().starts_with('{') {
        return Ok(None);
    }
    let Ok(doc) = serde_json::from_str::<Json>(&text) else {
        return Ok(None);
    };
    let Some(format) = doc.get(MARK) else {
        return Ok(None);
    };
    if format.as_u64() != Some(FORMAT) {
        return Err(invalid(
            path,
            format!("a saved plan of format {format}; this ral reads format {FORMAT}"),
        ));
    }
    let text_of = |key: &str| {
        doc[key]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| invalid(path, format!("the saved plan has no '{key}'")))
    };
    let manifests = doc["manifests"]
        .as_array()
        .ok_or_else(|| invalid(path, "the saved plan has no 'manifests'"))?
        .iter()
        .filter_map(Json::as_str)
        .map(PathBuf::from)
        .collect();
    let mut observed = Vec::new();
    for entry in doc["observed"].as_array().into_iter().flatten() {
        let provider = entry["provider"].as_str().unwrap_or_default().to_owned();
        let name = entry["name"].as_str().unwrap_or_default().to_owned();
        let state = &entry["state"];
        let state = match (state.get("error"), &state["attrs"]) {
            (Some(error), _) => Err(error.as_str().unwrap_or_default().to_owned()),
            (None, Json::Object(attrs)) => Ok(Some(attrs.clone())),
            (None, _) => Ok(None),
        };
        observed.push(Observed {
            provider,
            name,
            state,
        });
    }
    Ok(Some(SavedPlan {
        id: text_of("id")?,
        manifests,
        manifest_digest: text_of("manifest_digest")?,
        root: PathBuf::from(text_of("root")?),
        store_serial: doc["store_serial"]
            .as_i64()
            .ok_or_else(|| invalid(path, "the saved plan has no 'store_serial'"))?,
        observed,
    }))
}

/// The state each catalog item was planned from, typed again by its
/// provider's metadata; an error when the catalog holds an item the saved
/// plan did not read (its manifests or the store differ).
pub fn found_for(catalog: &Catalog, saved: &SavedPlan) -> std::result::Result<Vec<Found>, String> {
    let by_key: std::collections::HashMap<(&str, &str), &Observed> = saved
        .observed
        .iter()
        .map(|o| ((o.provider.as_str(), o.name.as_str()), o))
        .collect();
    catalog
        .items
        .iter()
        .map(|item| {
            let provider = item.provider.qualified_name();
            let observed = by_key
                .get(&(provider.as_str(), item.name()))
                .ok_or_else(|| format!("{} is not in the saved plan", item.reference()))?;
            Ok(match &observed.state {
                Err(message) => Err(message.clone()),
                Ok(None) => Ok(None),
                Ok(Some(attrs)) => {
                    let mut resource = Resource::with_capacity(item.name(), attrs.len());
                    for (key, json) in attrs {
                        let value = item
                            .provider
                            .attribute(key)
                            .and_then(|a| a.attr_type.check_json(json).ok())
                            .unwrap_or_else(|| Value::from_json(json));
                        resource.attrs.insert(key.clone(), value);
                    }
                    Ok(Some(resource))
                }
            })
        })
        .collect()
}
