//! Model plugins' metadata (`NAME.yaml` beside `NAME.plugin`): the plugin's
//! name, the item types it owns with their typed properties, and the calls
//! it answers. Checked as strictly as provider metadata: unknown keys,
//! bad names, unknown calls and property types are errors naming the
//! file. Each item type becomes provider-shaped [`Metadata`] (no actions),
//! so manifests' plugin items are typed and checked by the very code that
//! checks resources.

use std::path::{Path, PathBuf};

use indexmap::IndexMap;
use serde::Deserialize;

use crate::error::{Error, Result};
use crate::metadata::{
    is_identifier, is_reserved, Attribute, Invoke, Metadata, RawAttribute, SensitiveIn, Suitable,
};
use crate::types::AttrMap;

/// A call a plugin may answer (`ral_action=...`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PluginCall {
    ValidateModel,
    UpdateModel,
    CreateConfiguration,
    CreateLockTasks,
    CreateSnapshotPlan,
    Callback,
}

impl PluginCall {
    pub const ALL: [PluginCall; 6] = [
        PluginCall::ValidateModel,
        PluginCall::UpdateModel,
        PluginCall::CreateConfiguration,
        PluginCall::CreateLockTasks,
        PluginCall::CreateSnapshotPlan,
        PluginCall::Callback,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            PluginCall::ValidateModel => "validate_model",
            PluginCall::UpdateModel => "update_model",
            PluginCall::CreateConfiguration => "create_configuration",
            PluginCall::CreateLockTasks => "create_lock_tasks",
            PluginCall::CreateSnapshotPlan => "create_snapshot_plan",
            PluginCall::Callback => "callback",
        }
    }

    fn parse(text: &str) -> Option<PluginCall> {
        PluginCall::ALL.into_iter().find(|c| c.as_str() == text)
    }
}

/// Keys of a manifest's item that are the host's, never properties: a
/// property so named would never reach the plugin.
const HOST_KEYS: [&str; 6] = ["name", "ensure", "require", "before", "notify", "subscribe"];

/// The longest name of a plugin item or a snapshot, in characters.
pub const MAX_NAME: usize = 128;

/// The rule of [`name_problem`], as errors state it.
pub const NAME_RULE: &str =
    "letters, digits, '_', '-' and '.', not starting with '.' or '-', at most 128 characters";

/// Why `name` cannot name a plugin item or a snapshot, if it cannot. As
/// LITP's item ids: letters, digits, `_`, `-` and `.`, not starting with
/// `.` or `-`, at most [`MAX_NAME`] characters. Such a name holds no `/`,
/// so a vpath `/TYPE/NAME` names one item; no `:`, so the names ral makes
/// of it (a task's `VPATH:ID`) can be written by no manifest; and nothing
/// a shell, a terminal or a path would read as more than a word.
pub fn name_problem(name: &str) -> Option<String> {
    let plain = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.');
    let first = name.chars().next();
    if first.is_none() {
        return Some("it is empty".to_owned());
    }
    if let Some(c) = name.chars().find(|&c| !plain(c)) {
        return Some(format!("it holds '{}'", c.escape_debug()));
    }
    if matches!(first, Some('.' | '-')) {
        return Some("it starts with '.' or '-'".to_owned());
    }
    let length = name.chars().count();
    (length > MAX_NAME).then(|| format!("it is {length} characters long"))
}

/// One item type a plugin owns.
#[derive(Debug, Clone, PartialEq)]
pub struct ItemType {
    pub name: String,
    pub desc: String,
    /// Provider-shaped metadata: `name` plus the properties as attributes,
    /// for typing manifest items exactly as resources are typed.
    pub meta: Metadata,
}

/// A plugin's checked metadata.
#[derive(Debug, Clone, PartialEq)]
pub struct PluginMeta {
    pub name: String,
    pub desc: String,
    pub item_types: Vec<ItemType>,
    pub calls: Vec<PluginCall>,
}

/// A plugin found: its executable and checked metadata.
#[derive(Debug, Clone, PartialEq)]
pub struct Plugin {
    pub meta: PluginMeta,
    /// `NAME.plugin`.
    pub program: PathBuf,
    /// `NAME.yaml`.
    pub yaml: PathBuf,
}

impl Plugin {
    pub fn name(&self) -> &str {
        &self.meta.name
    }

    pub fn answers(&self, call: PluginCall) -> bool {
        self.meta.calls.contains(&call)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDocument {
    plugin: RawPlugin,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPlugin {
    name: Option<String>,
    #[serde(default)]
    desc: Option<String>,
    item_types: IndexMap<String, RawItemType>,
    actions: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawItemType {
    #[serde(default)]
    desc: Option<String>,
    #[serde(default)]
    properties: IndexMap<String, RawAttribute>,
}

impl PluginMeta {
    /// Parses and checks `text`, read from `file` (whose stem is the
    /// default plugin name).
    pub fn parse(text: &str, file: &Path) -> Result<PluginMeta> {
        let invalid = |message: String| Error::PluginMetadata {
            file: file.to_owned(),
            message,
        };
        crate::metadata::check_bounds(text).map_err(invalid)?;
        let raw: RawDocument = serde_yaml::from_str(text).map_err(|e| invalid(e.to_string()))?;
        let stem = file
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        raw.plugin.check(&stem).map_err(invalid)
    }
}

impl RawPlugin {
    fn check(self, stem: &str) -> std::result::Result<PluginMeta, String> {
        let name = self.name.unwrap_or_else(|| stem.to_owned());
        if !is_identifier(&name) {
            return Err(format!(
                "plugin.name '{}' must be a word of letters, digits and '_'",
                crate::text::escape(&name)
            ));
        }
        let mut calls = Vec::new();
        for text in &self.actions {
            let call = PluginCall::parse(text).ok_or_else(|| {
                let known: Vec<&str> = PluginCall::ALL.iter().map(|c| c.as_str()).collect();
                format!(
                    "plugin.actions: unknown action '{}' (known: {})",
                    crate::text::escape(text),
                    known.join(", ")
                )
            })?;
            if calls.contains(&call) {
                return Err(format!("plugin.actions: '{text}' is listed twice"));
            }
            calls.push(call);
        }
        if self.item_types.is_empty() {
            return Err("plugin.item_types must declare at least one item type".to_owned());
        }
        let mut item_types = Vec::new();
        for (type_name, raw) in self.item_types {
            item_types.push(raw.check(&type_name, &name)?);
        }
        Ok(PluginMeta {
            name,
            desc: self.desc.unwrap_or_default(),
            item_types,
            calls,
        })
    }
}

impl RawItemType {
    fn check(self, type_name: &str, plugin: &str) -> std::result::Result<ItemType, String> {
        let path = format!("plugin.item_types.{type_name}");
        if !is_identifier(type_name) || is_reserved(type_name) {
            return Err(format!(
                "{path}: item type names must be words of letters, digits and '_' (not 'ral', \
                 'ral_*' or '__*')"
            ));
        }
        let mut attributes = AttrMap::default();
        attributes.insert(
            "name".to_owned(),
            Attribute {
                name: "name".to_owned(),
                desc: format!("the {type_name}'s name"),
                attr_type: crate::types::AttrType::String,
                kind: crate::metadata::Kind::ReadWrite,
                required: false,
                default: None,
                sensitive: false,
                refers_to: None,
                refers_by: None,
                digest: None,
                private_by: None,
                unordered: false,
                volatile: false,
            },
        );
        for (property, mut raw) in self.properties {
            let at = format!("{path}.properties.{property}");
            if HOST_KEYS.contains(&property.as_str()) {
                return Err(format!(
                    "{at}: '{property}' belongs to the host (an item's name is its key in the \
                     manifest; an item is removed by leaving it out; require, before, notify \
                     and subscribe order items)"
                ));
            }
            // A LITP property is mandatory unless said otherwise.
            raw.required = Some(raw.required.unwrap_or(raw.default.is_none()));
            let attribute = raw.check_at(&at, &property)?;
            if attribute.kind != crate::metadata::Kind::ReadWrite {
                return Err(format!(
                    "{at}.kind: a property is written and read back as the model holds it; \
                     leave kind out"
                ));
            }
            attributes.insert(property, attribute);
        }
        let desc = self.desc.unwrap_or_default();
        Ok(ItemType {
            name: type_name.to_owned(),
            desc: desc.clone(),
            meta: Metadata {
                type_name: type_name.to_owned(),
                name: plugin.to_owned(),
                invoke: Invoke::Json,
                actions: Vec::new(),
                suitable: Suitable::Fixed(true),
                desc,
                supports_noop: true,
                starts_daemons: false,
                names_are_paths: false,
                runs_commands: false,
                sensitive_in: SensitiveIn::Args,
                attributes,
                relations: Vec::new(),
                removed_after: Vec::new(),
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> std::result::Result<PluginMeta, String> {
        PluginMeta::parse(text, Path::new("/d/plugins/webapp.yaml")).map_err(|e| e.to_string())
    }

    const GOOD: &str = "plugin:
  desc: One web application.
  item_types:
    webapp:
      desc: a web application
      properties:
        port: {type: integer, desc: the port}
        owner: {type: string}
        message: {type: string, required: false}
        mode: {type: string, default: '0640'}
  actions: [validate_model, create_configuration, callback]
";

    #[test]
    fn a_plugin_gets_its_file_stem_for_a_name_and_required_properties_by_default() {
        let meta = parse(GOOD).unwrap();
        assert_eq!(meta.name, "webapp");
        assert_eq!(
            meta.calls,
            [
                PluginCall::ValidateModel,
                PluginCall::CreateConfiguration,
                PluginCall::Callback
            ]
        );
        let webapp = &meta.item_types[0];
        assert_eq!(webapp.meta.type_name, "webapp");
        assert_eq!(webapp.meta.name, "webapp");
        assert!(webapp.meta.actions.is_empty());
        let attr = |name: &str| webapp.meta.attributes.get(name).unwrap();
        assert!(attr("port").required);
        assert!(!attr("message").required);
        assert!(
            !attr("mode").required,
            "a defaulted property is never missing"
        );
        assert_eq!(
            attr("port").attr_type,
            crate::types::AttrType::Integer(None)
        );
    }

    #[test]
    fn mistakes_are_refused_naming_the_path() {
        for (text, expected) in [
            (
                GOOD.replace("callback]", "callbak]"),
                "unknown action 'callbak'",
            ),
            (GOOD.replace("type: integer", "type: integr"), "port.type"),
            (
                GOOD.replace("owner:", "name:"),
                "'name' belongs to the host",
            ),
            (
                GOOD.replace("owner:", "ensure:"),
                "'ensure' belongs to the host",
            ),
            (
                GOOD.replace("    webapp:", "    web-app:"),
                "item_types.web-app",
            ),
            (GOOD.replace("desc: the port", "desk: the port"), "desk"),
            (
                GOOD.replace("[validate_model,", "[callback, validate_model,"),
                "listed twice",
            ),
            (
                GOOD.replace("{type: string}", "{type: string, kind: w}"),
                "leave kind out",
            ),
            (
                "plugin: {item_types: {}, actions: []}".to_owned(),
                "at least one item type",
            ),
        ] {
            let error = parse(&text).unwrap_err();
            assert!(error.contains(expected), "{expected}: {error}");
            assert!(error.contains("webapp.yaml"), "{error}");
        }
    }

    #[test]
    fn item_and_snapshot_names_are_plain_words() {
        assert!(NAME_RULE.contains(&format!("at most {MAX_NAME} characters")));
        for good in [
            "shop",
            "node1.example.com",
            "_x",
            "v-2",
            "0",
            &"a".repeat(MAX_NAME),
        ] {
            assert_eq!(name_problem(good), None, "{good}");
        }
        for (bad, expected) in [
            ("", "empty"),
            ("../../x", "holds '/'"),
            ("a:b", "holds ':'"),
            ("a\nb", "holds '\\n'"),
            ("$(id)", "holds '$'"),
            ("a b", "holds ' '"),
            ("caf\u{e9}", "holds 'é'"),
            (".hidden", "starts with '.' or '-'"),
            ("-rf", "starts with '.' or '-'"),
            (&"a".repeat(MAX_NAME + 1), "129 characters long"),
        ] {
            let problem = name_problem(bad).unwrap_or_default();
            assert!(problem.contains(expected), "{bad:?}: {problem}");
        }
    }
}
