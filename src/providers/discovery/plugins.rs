//! Finding model plugins: `plugins/NAME.plugin` with `NAME.yaml` beside
//! it in each data directory. A plugin whose files are broken is skipped
//! with a warning naming the file, as a broken provider is; an item type
//! that clashes with a provider's type or another plugin's item type is a
//! problem naming both files, which fails every run that could meet it
//! (a manifest cannot tell which one it means): a manifest naming that
//! type, and one whose model holds plugin items.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::metadata::MAX_METADATA;
use crate::plugin_meta::{Plugin, PluginMeta};
use crate::provider::{is_executable, Provider};

use super::DataDir;

/// The plugins of `dirs`, in search order; an earlier directory's plugin
/// shadows a later one of the same name. Broken ones are warned about and
/// left out.
pub fn find(dirs: &[DataDir]) -> Vec<Plugin> {
    let mut plugins: Vec<Plugin> = Vec::new();
    for program in dirs.iter().flat_map(DataDir::plugin_files) {
        match load(&program) {
            Ok(plugin) => {
                if let Some(first) = plugins.iter().find(|p| p.name() == plugin.name()) {
                    log::info!(
                        "plugin {} from {} is shadowed by {}",
                        plugin.name(),
                        program.display(),
                        first.program.display()
                    );
                    continue;
                }
                plugins.push(plugin);
            }
            Err(e) => log::warn!("skipping plugin {}: {e}", program.display()),
        }
    }
    plugins
}

/// The `*.plugin` files of `dir/plugins`, sorted.
pub(super) fn files_in(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir.join("plugins")) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.extension().is_some_and(|ext| ext == "plugin"))
        .collect();
    files.sort();
    files
}

/// One plugin: its program must be executable and its metadata valid.
pub fn load(program: &Path) -> Result<Plugin> {
    let yaml = program.with_extension("yaml");
    if !is_executable(program) {
        return Err(Error::PluginMetadata {
            file: program.to_owned(),
            message: "the file is not executable (chmod +x it)".to_owned(),
        });
    }
    let text = super::read_yaml(&yaml).map_err(|e| match e {
        Error::Metadata { file, message } => Error::PluginMetadata { file, message },
        other => other,
    })?;
    debug_assert!(text.len() <= MAX_METADATA);
    let meta = PluginMeta::parse(&text, &yaml)?;
    Ok(Plugin {
        meta,
        program: program.to_owned(),
        yaml,
    })
}

/// An item type whose name is also a provider's type or an item type of
/// an earlier plugin, as references compare them (in any case: Puppet's
/// `Host[web]` is `host[web]`): a manifest could not tell which is meant,
/// so no manifest may name it (see `Registry::resolve_item`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Clash {
    /// The item type's name.
    pub type_name: String,
    /// Its qualified name, `TYPE::PLUGIN`.
    pub qualified: String,
    /// The plugin's metadata file.
    pub file: PathBuf,
    /// What else has the name, with its file.
    pub other: String,
}

impl Clash {
    /// What is wrong, naming the other file (the error names this one).
    pub fn message(&self) -> String {
        format!(
            "item type '{}' is also {}: a manifest could not tell which is meant; rename one",
            self.type_name, self.other
        )
    }

    /// The error naming both files.
    pub fn error(&self) -> Error {
        Error::PluginMetadata {
            file: self.file.clone(),
            message: self.message(),
        }
    }

    /// Whether a manifest's `query` (a type, or a qualified name) names it,
    /// in any case: either name, as a reference, could mean the other.
    pub fn is_named(&self, query: &str) -> bool {
        same_type(query, &self.type_name) || same_type(query, &self.qualified)
    }
}

/// Whether two type names (or qualified names) could mean each other as
/// references read them (see `reference_form`).
fn same_type(one: &str, other: &str) -> bool {
    super::reference_form(one) == super::reference_form(other)
}

/// The item types of `plugins` as providers (for typing manifest items),
/// and the clashes among them and with `providers`' types, each naming
/// both files.
pub fn models(plugins: &[Plugin], providers: &[Provider]) -> (Vec<Provider>, Vec<Clash>) {
    let mut models: Vec<Provider> = Vec::new();
    let mut clashes = Vec::new();
    for plugin in plugins {
        for item_type in &plugin.meta.item_types {
            let clash = |other: String| Clash {
                type_name: item_type.name.clone(),
                qualified: format!("{}::{}", item_type.name, plugin.name()),
                file: plugin.yaml.clone(),
                other,
            };
            let named = |other: &str| same_type(other, &item_type.name);
            if let Some(provider) = providers.iter().find(|p| named(p.type_name())) {
                clashes.push(clash(format!(
                    "the type of the provider {} ({})",
                    provider.qualified_name(),
                    provider.source.display()
                )));
                continue;
            }
            if let Some(model) = models.iter().find(|m| named(m.type_name())) {
                clashes.push(clash(format!(
                    "an item type of the plugin {} ({})",
                    model.meta.name,
                    model.source.with_extension("yaml").display()
                )));
                continue;
            }
            models.push(Provider::new(
                item_type.meta.clone(),
                plugin.program.clone(),
                None,
            ));
        }
    }
    (models, clashes)
}
