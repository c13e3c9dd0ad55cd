//! A discovered provider: its checked metadata, where it lives, and whether
//! it can run here.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use crate::metadata::{Attribute, Metadata, Suitable};
use crate::resource::Change;
use crate::sdk::Native;
use crate::secrets::{hides, REDACTED};
use crate::types::Value;

/// One attribute's change as output shows it (`{attr, is, was}`): its
/// values as JSON, a sensitive one redacted.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ShownChange {
    pub attr: String,
    pub is: serde_json::Value,
    pub was: Option<serde_json::Value>,
}

/// A provider ready to be called.
#[derive(Debug, Clone)]
pub struct Provider {
    pub meta: Metadata,
    /// The executable (`X.prov`).
    pub source: PathBuf,
    /// `None` when suitable; otherwise why not.
    pub unsuitable: Option<String>,
    /// Its code, when it is one of ral's native providers: then the host
    /// serves its calls in its own process (`source` is still the
    /// program that serves them elsewhere, on a target).
    pub native: Option<Native>,
    /// Texts redacted from whatever it says besides its own sensitive
    /// values: those of the sensitive variables a value of this run was
    /// computed from, which may be a part of the value alone (a secret in
    /// a command's text, which the command prints by itself).
    pub also_secret: std::sync::Arc<Vec<String>>,
}

impl Provider {
    /// Checks suitability against `path`, the PATH providers get.
    pub fn new(meta: Metadata, source: PathBuf, path: Option<&OsStr>) -> Provider {
        let unsuitable = unsuitable_reason(&meta.suitable, path);
        Provider {
            meta,
            source,
            unsuitable,
            native: None,
            also_secret: std::sync::Arc::default(),
        }
    }

    /// `type::name`, the name users and logs know the provider by.
    pub fn qualified_name(&self) -> String {
        format!("{}::{}", self.meta.type_name, self.meta.name)
    }

    pub fn type_name(&self) -> &str {
        &self.meta.type_name
    }

    pub fn attribute(&self, name: &str) -> Option<&Attribute> {
        self.meta.attributes.get(name)
    }

    /// A value as JSON output shows it: `"[redacted]"` for a sensitive
    /// attribute (unless empty: see [`hides`]).
    pub fn shown_json(&self, attr: &str, value: &Value) -> serde_json::Value {
        if self.attribute(attr).is_some_and(|a| a.sensitive) && hides(value) {
            serde_json::Value::from(REDACTED)
        } else {
            serde_json::Value::from(value)
        }
    }

    /// Changes as output shows them, sensitive values redacted.
    pub fn shown_changes(&self, changes: &[Change]) -> Vec<ShownChange> {
        changes
            .iter()
            .map(|change| ShownChange {
                attr: change.attr.clone(),
                is: self.shown_json(&change.attr, &change.is),
                was: change
                    .was
                    .as_ref()
                    .map(|was| self.shown_json(&change.attr, was)),
            })
            .collect()
    }

    /// [`Provider::shown_changes`] as JSON, `[{attr, is, was}]`.
    pub fn changes_json(&self, changes: &[Change]) -> serde_json::Value {
        serde_json::to_value(self.shown_changes(changes)).unwrap_or_default()
    }

    pub fn is_suitable(&self) -> bool {
        self.unsuitable.is_none()
    }
}

fn unsuitable_reason(suitable: &Suitable, path: Option<&OsStr>) -> Option<String> {
    match suitable {
        Suitable::Fixed(true) => None,
        Suitable::Fixed(false) => Some("its metadata says suitable: false".to_owned()),
        Suitable::Commands(checks) => checks.iter().find_map(|check| {
            let found = on_path(&check.command, path);
            match (check.wanted, found) {
                (true, false) => Some(format!("command '{}' is not on PATH", check.command)),
                (false, true) => Some(format!("command '{}' is on PATH", check.command)),
                _ => None,
            }
        }),
    }
}

/// True when `command` names an executable file, directly or on PATH.
fn on_path(command: &str, path: Option<&OsStr>) -> bool {
    if command.contains('/') {
        return is_executable(Path::new(command));
    }
    std::env::split_paths(path.unwrap_or_default()).any(|dir| is_executable(&dir.join(command)))
}

/// True for a regular file with an execute bit.
pub fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata()
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}
