//! Provider metadata: parsed from YAML into `deny_unknown_fields` structs,
//! then checked and turned into the typed [`Metadata`] the rest of the crate
//! uses. Nothing untyped leaves this module.

use std::path::Path;

use indexmap::IndexMap;
use serde::Deserialize;

use crate::error::{Error, Result};
use crate::relations::{self, RawRelations, Relation, RelationKind};
use crate::secrets::{hides, EMPTY, REDACTED};
use crate::types::AttrMap;
use crate::types::{AttrType, Value};

/// The calling convention a provider speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Invoke {
    /// `ral_action=...` arguments and `# simple` output.
    Simple,
    /// One JSON document in on stdin, one out on stdout.
    Json,
}

impl Invoke {
    /// The actions this convention knows, and the one a provider must have.
    fn actions(self) -> (&'static [Action], Action) {
        match self {
            Invoke::Simple => (
                &[
                    Action::Describe,
                    Action::List,
                    Action::Find,
                    Action::Update,
                    Action::Refresh,
                ],
                Action::List,
            ),
            Invoke::Json => (
                &[Action::Describe, Action::Get, Action::Set, Action::Refresh],
                Action::Get,
            ),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Invoke::Simple => "simple",
            Invoke::Json => "json",
        }
    }
}

/// An action a provider can perform.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Describe,
    List,
    Find,
    Update,
    /// json convention: read resources.
    Get,
    /// json convention: change resources.
    Set,
    /// Either convention: refresh resources (restart a service) because
    /// something they subscribe to changed.
    Refresh,
    /// A model plugin's call (`validate_model`, `callback`, ...), or a
    /// plugin's remote task (`command`).
    Plugin(&'static str),
}

impl Action {
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Describe => "describe",
            Action::List => "list",
            Action::Find => "find",
            Action::Update => "update",
            Action::Get => "get",
            Action::Set => "set",
            Action::Refresh => "refresh",
            Action::Plugin(call) => call,
        }
    }
}

impl std::fmt::Display for Action {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Whether an attribute can be read, written, or both.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Reported by list and find, never set (`r`).
    Read,
    /// A parameter: passed to update, never reported (`w`).
    Write,
    /// Reported and settable (`rw`, the default).
    ReadWrite,
    /// Reported, and settable only when the resource is created (`init`).
    InitOnly,
    /// A parameter of refreshes only (`refresh`): passed to the refresh
    /// action, never set, never reported, never a change.
    Refresh,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Read => "r",
            Kind::Write => "w",
            Kind::ReadWrite => "rw",
            Kind::InitOnly => "init",
            Kind::Refresh => "refresh",
        }
    }
}

/// Where a simple-convention provider gets its sensitive values
/// (`provider.sensitive_in`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SensitiveIn {
    /// On its command line with the other attributes, as libral does:
    /// every user can read them in `/proc/PID/cmdline`.
    #[default]
    Args,
    /// Each in an environment variable named as the attribute, listed in
    /// [`SENSITIVE_VAR`], and never on its command line: a process's
    /// environment is readable only by its owner (and root).
    Env,
}

impl SensitiveIn {
    pub fn as_str(self) -> &'static str {
        match self {
            SensitiveIn::Args => "args",
            SensitiveIn::Env => "env",
        }
    }
}

/// The variable that names, separated by spaces, the sensitive attributes
/// a `sensitive_in: env` provider was given in its environment: only those
/// are attributes, whatever else its environment holds.
pub const SENSITIVE_VAR: &str = "RALSH_SENSITIVE";

/// Variables of a provider's environment that ral sets or passes on (see
/// `ProviderEnv`), which a sensitive attribute in the environment must not
/// replace. Every other upper-case name is refused too (see
/// [`env_name_problem`]).
pub const PROVIDER_ENV: [&str; 4] = ["PATH", "HOME", "LANG", "LC_ALL"];

/// Why `name` cannot be an environment variable holding a sensitive
/// attribute, if it cannot: it must be a shell variable name, and not one
/// of the provider's environment nor any upper-case name, which belong to
/// the environment's conventions (`RALSH_*`, `LD_PRELOAD`, `IFS`,
/// `PYTHONPATH`, ...) and could change how the provider runs.
pub fn env_name_problem(name: &str) -> Option<String> {
    if !is_identifier(name) {
        return Some(format!(
            "'{}' is not a shell variable name",
            crate::text::escape(name)
        ));
    }
    if PROVIDER_ENV.contains(&name) || name.starts_with("RALSH_") {
        return Some(format!(
            "'{name}' is a variable of the provider's environment that ral sets"
        ));
    }
    if name.chars().any(|c| c.is_ascii_uppercase()) {
        return Some(format!(
            "'{name}' has upper-case letters: such names belong to the environment's own \
             variables (PATH, LD_PRELOAD, RALSH_*, ...), which an attribute must not replace"
        ));
    }
    None
}

/// One command-line tool a provider needs, or needs to be absent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandCheck {
    pub command: String,
    pub wanted: bool,
}

/// When a provider can be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Suitable {
    Fixed(bool),
    /// Every listed command must be on PATH (or absent, for `not cmd`).
    Commands(Vec<CommandCheck>),
}

/// One declared attribute.
#[derive(Debug, Clone, PartialEq)]
pub struct Attribute {
    pub name: String,
    pub desc: String,
    pub attr_type: AttrType,
    pub kind: Kind,
    /// Must be given when the resource is created.
    pub required: bool,
    /// Used when the resource is created without a value for it.
    pub default: Option<Value>,
    /// Passed to the provider, but shown as `[redacted]` everywhere.
    pub sensitive: bool,
    /// The type whose resources the value names (a string, or each element
    /// of an array): a plan orders a resource after the ones it names.
    pub refers_to: Option<String>,
    /// With `refers_to`: the attribute of the resources referred to whose
    /// value this one holds, rather than their name (a user's `gid` names
    /// the group whose `gid` it is).
    pub refers_by: Option<String>,
    /// The read-only attribute that reports this one's digest
    /// (`sha256:HEX` of its text): a value the provider does not report
    /// (too large, or private) is compared through it, and a value too
    /// large to show is shown as it (see the `withheld` module).
    pub digest: Option<String>,
    /// The attribute holding the resource's permission bits (four octal
    /// digits): when they give others no read permission, this value is
    /// private, shown only as its digest (needs `digest`).
    pub private_by: Option<String>,
    /// An array whose order means nothing (a user's supplementary
    /// groups, which the group file orders): compared as the set of its
    /// elements, so a request in another order is met.
    pub unordered: bool,
    /// A read-only value that changes by itself from one read to the
    /// next (a machine's free memory, its uptime): `ral check` does not
    /// expect two reads to agree on it.
    pub volatile: bool,
}

impl Attribute {
    /// Whether `found` holds what `wanted` asks for: equal, or for an
    /// unordered array the same elements in any order.
    pub fn met_by(&self, wanted: &Value, found: Option<&Value>) -> bool {
        match (wanted, found) {
            (Value::Array(wanted), Some(Value::Array(found))) if self.unordered => {
                wanted.iter().all(|w| found.contains(w)) && found.iter().all(|f| wanted.contains(f))
            }
            _ => found == Some(wanted),
        }
    }

    /// Whether the state store and saved plans keep its values only as
    /// keyed digests: a sensitive one, and one shown as its digest (a
    /// file's content, which may be private or large).
    pub fn kept_keyed(&self) -> bool {
        self.sensitive || self.digest.is_some()
    }

    /// The value as messages show it: quoted, or redacted when sensitive
    /// (unless empty: see [`hides`]); one with a digest as its digest,
    /// since it may be private or large.
    pub fn show(&self, value: &Value) -> String {
        if self.sensitive {
            match hides(value) {
                true => REDACTED.to_owned(),
                false => EMPTY.to_owned(),
            }
        } else if self.digest.is_some() {
            format!("'{}'", value.digest())
        } else {
            format!("'{}'", crate::text::escape(&value.to_text()))
        }
    }
}

/// Checked provider metadata.
#[derive(Debug, Clone, PartialEq)]
pub struct Metadata {
    pub type_name: String,
    pub name: String,
    pub invoke: Invoke,
    pub actions: Vec<Action>,
    pub suitable: Suitable,
    pub desc: String,
    pub supports_noop: bool,
    /// Its updates may start daemons (services) that outlive the call;
    /// they are not ended with it.
    pub starts_daemons: bool,
    /// Its names are absolute paths, and a resource depends on those of
    /// the same type that name its parent directories.
    pub names_are_paths: bool,
    /// Its resources are commands to run (`exec`): a get is given the
    /// manifest's values (`should`), which its checks need; a task runs
    /// the command, is never verified by reading back, and never creates
    /// or removes anything ral would own.
    pub runs_commands: bool,
    /// Where its sensitive values go (simple convention only).
    pub sensitive_in: SensitiveIn,
    pub attributes: AttrMap<Attribute>,
    /// `autorequire`, `autobefore`, `autonotify` and `autosubscribe`.
    pub relations: Vec<Relation>,
    /// The types whose removals a removal of one of its resources waits
    /// for, when one plan removes both (a group after the users).
    pub removed_after: Vec<String>,
}

/// The most bytes of metadata accepted, from a `.yaml` or a describe.
pub const MAX_METADATA: usize = 256 * 1024;
/// The most `[` and `{` characters accepted in metadata, wherever they
/// stand. Each may open a level of flow nesting, and the YAML parser's
/// work grows with the size of the text times the nesting, so counting
/// them bounds the parse (to about a tenth of a second at the size limit)
/// without having to tell apart, before parsing, which ones open a level.
/// Real metadata holds a few dozen.
pub const MAX_BRACKETS: usize = 256;

/// Refuses, before the YAML parser sees it, metadata that could take it
/// long to parse.
pub(crate) fn check_bounds(text: &str) -> std::result::Result<(), String> {
    if text.len() > MAX_METADATA {
        return Err(format!(
            "it is {} bytes long; metadata may be at most {MAX_METADATA} bytes",
            text.len()
        ));
    }
    if let Some(line) = anchor_line(text) {
        return Err(format!(
            "line {line}: metadata may not use YAML anchors ('&NAME'): an alias of one repeats \
             it, and aliases of aliases multiply the document; write the values out (a word \
             starting with '&' in a text is taken for an anchor: quote the whole text)"
        ));
    }
    let brackets = text.bytes().filter(|b| matches!(b, b'[' | b'{')).count();
    if brackets > MAX_BRACKETS {
        return Err(format!(
            "it holds {brackets} '[' and '{{' characters; metadata may hold at most \
             {MAX_BRACKETS}, since each may nest a level deeper, which makes YAML slow to parse"
        ));
    }
    Ok(())
}

/// The line of the first '&' that may start a YAML anchor: one after a
/// line start, a blank, '[', '{', ',' or ':', and before a character that
/// is not blank. Quotes are not told apart (an '&word' inside one counts),
/// so no anchor can hide from it.
fn anchor_line(text: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    bytes.iter().enumerate().find_map(|(at, &byte)| {
        let before = at.checked_sub(1).map(|b| bytes[b]);
        let after = bytes.get(at + 1).copied();
        let opens = before
            .is_none_or(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r' | b'[' | b'{' | b',' | b':'));
        let named = after.is_some_and(|a| !matches!(a, b' ' | b'\t' | b'\n' | b'\r'));
        (byte == b'&' && opens && named).then(|| text[..at].matches('\n').count() + 1)
    })
}

impl Metadata {
    /// Parses and checks metadata text. `file` names the source in errors and
    /// its stem is the default provider name.
    pub fn parse(text: &str, file: &Path) -> Result<Metadata> {
        let invalid = |message: String| Error::Metadata {
            file: file.to_owned(),
            message,
        };
        check_bounds(text).map_err(invalid)?;
        let raw: RawDocument = serde_yaml::from_str(text).map_err(|e| invalid(e.to_string()))?;
        let default_name = file
            .file_stem()
            .map(|stem| stem.to_string_lossy().into_owned())
            .unwrap_or_default();
        raw.provider.check(&default_name).map_err(invalid)
    }

    pub fn supports(&self, action: Action) -> bool {
        self.actions.contains(&action)
    }

    /// The action that changes resources in this provider's convention.
    pub fn update_action(&self) -> Action {
        match self.invoke {
            Invoke::Simple => Action::Update,
            Invoke::Json => Action::Set,
        }
    }
}

/// A YAML string that really is a string: YAML would otherwise hand serde
/// `desc: 5` or `type: true` as text, which the JSON Schema (rightly)
/// rejects.
struct Text(String);

impl<'de> Deserialize<'de> for Text {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Text, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = Text;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<Text, E> {
                Ok(Text(text.to_owned()))
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}

fn text<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    Text::deserialize(deserializer).map(|t| t.0)
}

fn optional_text<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<String>, D::Error> {
    Option::<Text>::deserialize(deserializer).map(|t| t.map(|t| t.0))
}

fn text_list<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Vec<String>, D::Error> {
    Vec::<Text>::deserialize(deserializer).map(|list| list.into_iter().map(|t| t.0).collect())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDocument {
    provider: RawProvider,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawProvider {
    #[serde(rename = "type")]
    #[serde(deserialize_with = "text")]
    type_name: String,
    #[serde(deserialize_with = "text")]
    invoke: String,
    #[serde(deserialize_with = "text_list")]
    actions: Vec<String>,
    suitable: RawSuitable,
    #[serde(default, deserialize_with = "optional_text")]
    desc: Option<String>,
    #[serde(default, deserialize_with = "optional_text")]
    name: Option<String>,
    #[serde(default, deserialize_with = "text_list")]
    features: Vec<String>,
    #[serde(default, deserialize_with = "optional_text")]
    sensitive_in: Option<String>,
    #[serde(default)]
    autorequire: RawRelations,
    #[serde(default)]
    autobefore: RawRelations,
    #[serde(default)]
    autonotify: RawRelations,
    #[serde(default)]
    autosubscribe: RawRelations,
    #[serde(default, deserialize_with = "text_list")]
    removed_after: Vec<String>,
    attributes: IndexMap<String, RawAttribute>,
}

enum RawSuitable {
    Fixed(bool),
    Commands(RawCommands),
}

// By hand rather than `untagged`, so that a mistake inside the map keeps its
// key path and line in the error.
impl<'de> Deserialize<'de> for RawSuitable {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<RawSuitable, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = RawSuitable;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a boolean or a map {commands: [...]}")
            }
            fn visit_bool<E: serde::de::Error>(self, flag: bool) -> Result<RawSuitable, E> {
                Ok(RawSuitable::Fixed(flag))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> Result<RawSuitable, A::Error> {
                RawCommands::deserialize(serde::de::value::MapAccessDeserializer::new(map))
                    .map(RawSuitable::Commands)
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCommands {
    #[serde(deserialize_with = "text_list")]
    commands: Vec<String>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawAttribute {
    #[serde(default, deserialize_with = "optional_text")]
    desc: Option<String>,
    #[serde(default, rename = "type", deserialize_with = "optional_text")]
    attr_type: Option<String>,
    #[serde(default, deserialize_with = "optional_text")]
    kind: Option<String>,
    /// Absent: not required (an item type's property: required unless
    /// it has a default).
    #[serde(default)]
    pub(crate) required: Option<bool>,
    #[serde(default)]
    pub(crate) default: Option<serde_json::Value>,
    #[serde(default)]
    sensitive: bool,
    #[serde(default, deserialize_with = "optional_text")]
    refers_to: Option<String>,
    #[serde(default, deserialize_with = "optional_text")]
    refers_by: Option<String>,
    #[serde(default, deserialize_with = "optional_text")]
    digest: Option<String>,
    #[serde(default, deserialize_with = "optional_text")]
    private_by: Option<String>,
    #[serde(default)]
    unordered: bool,
    #[serde(default)]
    volatile: bool,
}

/// True for names a shell or Python provider can use as a variable.
pub fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Attribute names the calling conventions keep for themselves.
pub fn is_reserved(name: &str) -> bool {
    name == "ral" || name.starts_with("ral_") || name.starts_with("__")
}

impl RawProvider {
    fn check(self, default_name: &str) -> std::result::Result<Metadata, String> {
        if !is_identifier(&self.type_name) {
            return Err(format!(
                "provider.type '{}' must be a word of letters, digits and '_'",
                self.type_name
            ));
        }
        let name = self.name.unwrap_or_else(|| default_name.to_owned());
        if !is_identifier(&name) {
            return Err(format!(
                "provider.name '{name}' must be a word of letters, digits and '_'"
            ));
        }
        let invoke = check_invoke(&self.invoke)?;
        let actions = check_actions(invoke, &self.actions)?;
        let suitable = match self.suitable {
            RawSuitable::Fixed(flag) => Suitable::Fixed(flag),
            RawSuitable::Commands(raw) => Suitable::Commands(
                raw.commands
                    .iter()
                    .map(|entry| parse_command_check(entry))
                    .collect::<std::result::Result<_, _>>()?,
            ),
        };
        let features = Features::check(&self.features)?;
        let mut attributes = AttrMap::default();
        for (attr_name, raw) in self.attributes {
            let attribute = raw.check(&attr_name)?;
            attributes.insert(attr_name, attribute);
        }
        if !attributes.contains_key("name") {
            return Err("provider.attributes must declare the 'name' attribute".to_owned());
        }
        check_digests(&attributes)?;
        let sensitive_in = check_sensitive_in(self.sensitive_in.as_deref(), invoke, &attributes)?;
        let names: Vec<&str> = attributes.keys().map(String::as_str).collect();
        let sensitive: Vec<&str> = attributes
            .values()
            .filter(|a| a.sensitive)
            .map(|a| a.name.as_str())
            .collect();
        let mut relations = Vec::new();
        for (kind, raw) in RelationKind::ALL.into_iter().zip([
            self.autorequire,
            self.autobefore,
            self.autonotify,
            self.autosubscribe,
        ]) {
            relations.extend(relations::check(kind, raw, &names, &sensitive)?);
        }
        let removed_after = check_removed_after(self.removed_after)?;
        if features.runs_commands {
            check_runs_commands(invoke, &attributes)?;
        }
        Ok(Metadata {
            type_name: self.type_name,
            name,
            invoke,
            actions,
            suitable,
            desc: self.desc.unwrap_or_default(),
            supports_noop: features.supports_noop,
            starts_daemons: features.starts_daemons,
            names_are_paths: features.names_are_paths,
            runs_commands: features.runs_commands,
            sensitive_in,
            attributes,
            relations,
            removed_after,
        })
    }
}

/// The calling convention `provider.invoke` names.
fn check_invoke(text: &str) -> std::result::Result<Invoke, String> {
    match text {
        "simple" => Ok(Invoke::Simple),
        "json" => Ok(Invoke::Json),
        other => Err(format!(
            "provider.invoke: unknown calling convention '{other}' (supported: simple, json)"
        )),
    }
}

/// `provider.actions`: each an action of the convention, listed once,
/// the convention's required one among them.
fn check_actions(invoke: Invoke, texts: &[String]) -> std::result::Result<Vec<Action>, String> {
    let (known, required) = invoke.actions();
    let mut actions = Vec::new();
    for text in texts {
        let action = known
            .iter()
            .copied()
            .find(|a| a.as_str() == text)
            .ok_or_else(|| {
                let names: Vec<&str> = known.iter().map(|a| a.as_str()).collect();
                format!(
                    "provider.actions: unknown action '{text}' for the {} convention (known: {})",
                    invoke.as_str(),
                    names.join(", ")
                )
            })?;
        if actions.contains(&action) {
            return Err(format!("provider.actions: '{text}' is listed twice"));
        }
        actions.push(action);
    }
    if !actions.contains(&required) {
        return Err(format!(
            "provider.actions must include {} for the {} convention",
            required.as_str(),
            invoke.as_str()
        ));
    }
    Ok(actions)
}

/// The features `provider.features` lists.
#[derive(Default)]
struct Features {
    supports_noop: bool,
    starts_daemons: bool,
    names_are_paths: bool,
    runs_commands: bool,
}

impl Features {
    /// Each a known feature, listed once.
    fn check(texts: &[String]) -> std::result::Result<Features, String> {
        let mut features = Features::default();
        for feature in texts {
            let flag = match feature.as_str() {
                "supports_noop" => &mut features.supports_noop,
                "starts_daemons" => &mut features.starts_daemons,
                "names_are_paths" => &mut features.names_are_paths,
                "runs_commands" => &mut features.runs_commands,
                other => {
                    return Err(format!(
                        "provider.features: unknown feature '{other}' (known: supports_noop, \
                         starts_daemons, names_are_paths, runs_commands)"
                    ))
                }
            };
            if *flag {
                return Err(format!("provider.features: '{feature}' is listed twice"));
            }
            *flag = true;
        }
        Ok(features)
    }
}

/// The attribute a `runs_commands` provider reads its need to run into,
/// and its value when there is nothing to run: the SDK's, which its
/// `exec` provider writes.
pub use crate::sdk::{RUN, RUN_DONE};

/// A provider whose resources are commands is told the manifest's values
/// in its get, which only the json convention carries; it has no
/// `ensure` (a command is never created or removed) and reads whether it
/// would run into [`RUN`].
fn check_runs_commands(
    invoke: Invoke,
    attributes: &AttrMap<Attribute>,
) -> std::result::Result<(), String> {
    if invoke != Invoke::Json {
        return Err(
            "provider.features: runs_commands needs the json calling convention, whose get \
             carries the manifest's values"
                .to_owned(),
        );
    }
    if attributes.contains_key("ensure") {
        return Err(
            "provider.features: a provider that runs_commands has no 'ensure': its commands \
             are run, never created or removed"
                .to_owned(),
        );
    }
    match attributes.get(RUN) {
        Some(run) if run.kind == Kind::ReadWrite => Ok(()),
        _ => Err(format!(
            "provider.features: a provider that runs_commands declares the attribute '{RUN}' \
             (rw), which its get reads as '{RUN_DONE}' or why the command would run"
        )),
    }
}

impl RawAttribute {
    fn check(self, name: &str) -> std::result::Result<Attribute, String> {
        self.check_at(&format!("provider.attributes.{name}"), name)
    }

    /// Checks the attribute `name`, which messages call `path`.
    pub(crate) fn check_at(self, path: &str, name: &str) -> std::result::Result<Attribute, String> {
        let path = path.to_owned();
        let required = self.required.unwrap_or(false);
        if is_reserved(name) {
            return Err(format!(
                "{path}: the name '{name}' is reserved ('ral', 'ral_*' and '__*' belong to the host)"
            ));
        }
        if !is_identifier(name) {
            return Err(format!(
                "{path}: attribute names must be words of letters, digits and '_'"
            ));
        }
        let attr_type = match &self.attr_type {
            Some(text) => AttrType::parse(text).map_err(|e| format!("{path}.type: {e}"))?,
            None => AttrType::String,
        };
        let kind = check_kind(&path, self.kind.as_deref())?;
        let default = match &self.default {
            None => None,
            Some(json) => Some(attr_type.check_json(json).map_err(|e| {
                if self.sensitive {
                    format!("{path}.default: the default is not a {attr_type}")
                } else {
                    format!("{path}.default: {json} is not a {attr_type}: {e}")
                }
            })?),
        };
        if kind == Kind::Read && (required || default.is_some()) {
            return Err(format!(
                "{path}: a read-only attribute cannot be required or have a default"
            ));
        }
        if required && default.is_some() {
            return Err(format!(
                "{path}: an attribute with a default is never missing, so it cannot be required"
            ));
        }
        if name == "name" && (kind == Kind::Write || self.sensitive || default.is_some()) {
            return Err(format!(
                "{path}: the name cannot be write-only, sensitive or defaulted"
            ));
        }
        self.check_refers(&path, name)?;
        if self.unordered && !matches!(attr_type, AttrType::Array(_)) {
            return Err(format!(
                "{path}.unordered: only an array can be unordered (its type is {attr_type})"
            ));
        }
        if self.volatile && kind != Kind::Read {
            return Err(format!(
                "{path}.volatile: only a read-only attribute (kind: r) can be volatile"
            ));
        }
        Ok(Attribute {
            name: name.to_owned(),
            desc: self.desc.unwrap_or_default(),
            attr_type,
            kind,
            required,
            default,
            sensitive: self.sensitive,
            refers_to: self.refers_to,
            refers_by: self.refers_by,
            digest: self.digest,
            private_by: self.private_by,
            unordered: self.unordered,
            volatile: self.volatile,
        })
    }
}

impl RawAttribute {
    /// `refers_to` names a type, and `refers_by` (only with it) an
    /// attribute of it; the name refers to nothing.
    fn check_refers(&self, path: &str, name: &str) -> std::result::Result<(), String> {
        if let Some(target) = &self.refers_to {
            if !is_identifier(target) {
                return Err(format!(
                    "{path}.refers_to: '{target}' is not a type name (a word of letters, digits \
                     and '_')"
                ));
            }
            if name == "name" {
                return Err(format!("{path}: the name cannot refer to another resource"));
            }
        }
        match (&self.refers_by, &self.refers_to) {
            (Some(_), None) => Err(format!(
                "{path}.refers_by: only with refers_to (it names an attribute of that type)"
            )),
            (Some(by), Some(_)) if !is_identifier(by) => Err(format!(
                "{path}.refers_by: '{by}' is not an attribute name (a word of letters, \
                 digits and '_')"
            )),
            _ => Ok(()),
        }
    }
}

/// The kind an attribute's `kind:` names; `rw` when it names none.
fn check_kind(path: &str, kind: Option<&str>) -> std::result::Result<Kind, String> {
    match kind {
        None | Some("rw") => Ok(Kind::ReadWrite),
        Some("r") => Ok(Kind::Read),
        Some("w") => Ok(Kind::Write),
        Some("init") => Ok(Kind::InitOnly),
        Some("refresh") => Ok(Kind::Refresh),
        Some(other) => Err(format!(
            "{path}.kind: unknown kind '{other}' (expected r, w, rw, init or refresh)"
        )),
    }
}

/// The types of `removed_after`: each a word, listed once.
fn check_removed_after(types: Vec<String>) -> std::result::Result<Vec<String>, String> {
    for (at, type_name) in types.iter().enumerate() {
        if !is_identifier(type_name) {
            return Err(format!(
                "provider.removed_after: '{type_name}' is not a type name (a word of letters, \
                 digits and '_')"
            ));
        }
        if types[..at].contains(type_name) {
            return Err(format!(
                "provider.removed_after: '{type_name}' is listed twice"
            ));
        }
    }
    Ok(types)
}

/// Each `digest` names a read-only attribute of the provider, and each
/// `private_by` another attribute, on an attribute that has a digest to be
/// shown as.
fn check_digests(attributes: &AttrMap<Attribute>) -> std::result::Result<(), String> {
    for attribute in attributes.values() {
        let path = format!("provider.attributes.{}", attribute.name);
        if let Some(digest) = &attribute.digest {
            match attributes.get(digest) {
                Some(other) if other.kind == Kind::Read && other.name != attribute.name => {}
                _ => {
                    return Err(format!(
                        "{path}.digest: '{digest}' is not another, read-only (kind: r) attribute \
                         of this provider"
                    ))
                }
            }
            if attribute.name == "name" || attribute.sensitive {
                return Err(format!(
                    "{path}.digest: the name and sensitive attributes are never shown, so they \
                     have no digest to be shown as"
                ));
            }
        }
        if let Some(by) = &attribute.private_by {
            if attribute.digest.is_none() {
                return Err(format!(
                    "{path}.private_by: a private value is shown as its digest, and this \
                     attribute has none (give digest too)"
                ));
            }
            if by == &attribute.name || !attributes.contains_key(by) {
                return Err(format!(
                    "{path}.private_by: '{by}' is not another attribute of this provider"
                ));
            }
        }
    }
    Ok(())
}

/// `provider.sensitive_in`, checked against the convention and the
/// sensitive attributes it would put in the environment.
fn check_sensitive_in(
    text: Option<&str>,
    invoke: Invoke,
    attributes: &AttrMap<Attribute>,
) -> std::result::Result<SensitiveIn, String> {
    let sensitive_in = match text {
        None | Some("args") => return Ok(SensitiveIn::Args),
        Some("env") => SensitiveIn::Env,
        Some(other) => {
            return Err(format!(
                "provider.sensitive_in: unknown value '{}' (expected args or env)",
                crate::text::escape(other)
            ))
        }
    };
    if invoke != Invoke::Simple {
        return Err(format!(
            "provider.sensitive_in: 'env' is for the simple convention; a {} provider reads \
             every value on stdin, never on its command line",
            invoke.as_str()
        ));
    }
    for attribute in attributes.values().filter(|a| a.sensitive) {
        let path = format!("provider.attributes.{}", attribute.name);
        if let Some(problem) = env_name_problem(&attribute.name) {
            return Err(format!(
                "{path}: a sensitive attribute is passed in an environment variable of its \
                 name (sensitive_in: env), and {problem}"
            ));
        }
        if attribute.attr_type.may_hold_collection() {
            return Err(format!(
                "{path}: a sensitive attribute passed in the environment (sensitive_in: env) \
                 must hold one value, not an array or a hash (type {})",
                attribute.attr_type
            ));
        }
    }
    Ok(sensitive_in)
}

fn parse_command_check(entry: &str) -> std::result::Result<CommandCheck, String> {
    let (wanted, command) = match entry.strip_prefix("not ") {
        Some(rest) => (false, rest.trim_start_matches(' ')),
        None => (true, entry),
    };
    if command.is_empty() || command.contains(char::is_whitespace) {
        return Err(format!(
            "provider.suitable.commands: '{entry}' is not a command name or 'not NAME'"
        ));
    }
    Ok(CommandCheck {
        command: command.to_owned(),
        wanted,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Metadata> {
        Metadata::parse(text, Path::new("/p/my_prov.yaml"))
    }

    const MINIMAL: &str = "provider:\n  type: thing\n  invoke: simple\n  actions: [list]\n  suitable: true\n  attributes:\n    name: {}\n";

    /// MINIMAL with `attributes` (YAML lines) after `name`.
    fn with(attributes: &str) -> Result<Metadata> {
        parse(&MINIMAL.replace("    name: {}\n", &format!("    name: {{}}\n{attributes}")))
    }

    #[test]
    fn minimal_metadata_gets_defaults() {
        let meta = parse(MINIMAL).unwrap();
        assert_eq!(meta.name, "my_prov");
        assert_eq!(meta.attributes["name"].kind, Kind::ReadWrite);
        assert_eq!(meta.attributes["name"].attr_type, AttrType::String);
        assert!(!meta.supports_noop);
        assert!(!meta.starts_daemons);
        assert!(!meta.names_are_paths);
        assert_eq!(meta.attributes["name"].refers_to, None);
    }

    #[test]
    fn metadata_that_would_be_slow_to_parse_is_refused_before_parsing() {
        // 100,000 levels of nesting: the parser would take minutes; the
        // message comes from the bound, not from the parser.
        let deep = format!("{}{}{}", MINIMAL, "  desc: ", "[".repeat(100_000));
        let err = parse(&deep).unwrap_err().to_string();
        // (MINIMAL holds one '[' and one '{'.)
        assert!(
            err.contains("it holds 100002 '[' and '{' characters; metadata may hold at most 256"),
            "{err}"
        );
        let long = format!("{MINIMAL}# {}\n", "x".repeat(MAX_METADATA));
        let err = parse(&long).unwrap_err().to_string();
        assert!(
            err.contains("metadata may be at most 262144 bytes"),
            "{err}"
        );
        // At the limits, metadata is accepted.
        let nested = MINIMAL.replace(
            "name: {}",
            &format!("name: {{desc: '{}'}}", "[".repeat(MAX_BRACKETS - 2)),
        );
        assert!(parse(&nested).is_ok());
    }

    #[test]
    fn metadata_one_past_a_bound_is_refused_before_parsing_and_at_it_accepted() {
        // Small inputs right at the bounds. Text the parser would refuse
        // with a message of its own (an unclosed '[') gets the bound's:
        // the bound is checked first, not after a parse.
        // (MINIMAL holds one '[' and one '{'.)
        let brackets = |count: usize| {
            MINIMAL.replace(
                "name: {}",
                &format!("name: {{desc: '{}'}}", "[".repeat(count - 2)),
            )
        };
        assert!(parse(&brackets(MAX_BRACKETS)).is_ok());
        let refused = "it holds 257 '[' and '{' characters; metadata may hold at most 256";
        let err = parse(&brackets(MAX_BRACKETS + 1)).unwrap_err().to_string();
        assert!(err.contains(refused), "{err}");
        let unclosed = format!("{MINIMAL}  desc: {}\n", "[".repeat(MAX_BRACKETS - 1));
        let err = parse(&unclosed).unwrap_err().to_string();
        assert!(err.contains(refused), "{err}");
        // One bracket fewer, the parser sees it, and says what it thinks.
        let err = parse(&unclosed.replacen('[', "", 1))
            .unwrap_err()
            .to_string();
        assert!(!err.contains("metadata may hold"), "{err}");

        // Padded with a comment to a size.
        let sized = |size: usize| {
            let text = format!("{MINIMAL}#{}\n", "x".repeat(size - MINIMAL.len() - 2));
            assert_eq!(text.len(), size);
            text
        };
        assert!(parse(&sized(MAX_METADATA)).is_ok());
        let err = parse(&sized(MAX_METADATA + 1)).unwrap_err().to_string();
        assert!(
            err.contains("it is 262145 bytes long; metadata may be at most 262144 bytes"),
            "{err}"
        );
        // Unparsable as well as too long: the size is what is said.
        let unparsable = format!("{}: [\n", sized(MAX_METADATA - 3));
        assert_eq!(unparsable.len(), MAX_METADATA + 1);
        let err = parse(&unparsable).unwrap_err().to_string();
        assert!(
            err.contains("metadata may be at most 262144 bytes"),
            "{err}"
        );
    }

    #[test]
    fn yaml_anchors_are_refused_before_parsing() {
        // 2,500 aliases of a 5,000-item anchor took the parser 2.8 s and
        // 887 MB; an anchor is refused before it sees one.
        let bomb = MINIMAL.replace(
            "    name: {}",
            "    name: {}\n    a: {desc: x, default: &list [1, 2]}\n    b: {default: *list}",
        );
        let err = parse(&bomb).unwrap_err().to_string();
        assert!(
            err.contains("line 8: metadata may not use YAML anchors"),
            "{err}"
        );
        let quoted = MINIMAL.replace("  suitable: true", "  suitable: true\n  desc: 'Tom &Jerry'");
        assert!(
            parse(&quoted).is_err(),
            "an '&word' counts even inside quotes"
        );
        // '&' elsewhere is fine.
        let plain = MINIMAL.replace(
            "  suitable: true",
            "  suitable: true\n  desc: salt & pepper, A&B",
        );
        assert!(parse(&plain).is_ok());
    }

    #[test]
    fn features_are_known_words_each_given_once() {
        let with = |features: &str| {
            parse(&MINIMAL.replace(
                "  suitable: true\n",
                &format!("  suitable: true\n  features: {features}\n"),
            ))
        };
        let meta = with("[starts_daemons, supports_noop]").unwrap();
        assert!(meta.supports_noop && meta.starts_daemons);
        assert!(!meta.names_are_paths);
        let meta = with("[names_are_paths]").unwrap();
        assert!(meta.names_are_paths && !meta.supports_noop && !meta.starts_daemons);
        let err = with("[starts_daemons, starts_daemons]")
            .unwrap_err()
            .to_string();
        assert!(err.contains("'starts_daemons' is listed twice"), "{err}");
        let err = with("[daemons]").unwrap_err().to_string();
        assert!(
            err.contains(
                "unknown feature 'daemons' (known: supports_noop, starts_daemons, \
                 names_are_paths, runs_commands)"
            ),
            "{err}"
        );
    }

    #[test]
    fn refers_by_names_an_attribute_and_needs_refers_to() {
        let meta = with("    gid: {type: integer, refers_to: group, refers_by: gid}\n").unwrap();
        assert_eq!(meta.attributes["gid"].refers_by.as_deref(), Some("gid"));
        assert_eq!(meta.attributes["name"].refers_by, None);
        let err = with("    gid: {refers_by: gid}\n").unwrap_err().to_string();
        assert!(
            err.contains("provider.attributes.gid.refers_by: only with refers_to"),
            "{err}"
        );
        let err = with("    gid: {refers_to: group, refers_by: 'g id'}\n")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("refers_by: 'g id' is not an attribute name"),
            "{err}"
        );
    }

    #[test]
    fn an_unordered_array_is_met_by_its_elements_in_any_order() {
        let meta = with(
            "    groups: {type: 'array[string]', unordered: true}\n    tags: {type: 'array[string]'}\n",
        )
        .unwrap();
        let list = |items: &[&str]| {
            Value::Array(
                items
                    .iter()
                    .map(|i| Value::String((*i).to_owned()))
                    .collect(),
            )
        };
        let groups = &meta.attributes["groups"];
        assert!(groups.met_by(&list(&["gb", "ga"]), Some(&list(&["ga", "gb"]))));
        assert!(!groups.met_by(&list(&["gb", "ga"]), Some(&list(&["ga"]))));
        assert!(!groups.met_by(&list(&["ga"]), Some(&list(&["ga", "gb"]))));
        assert!(!groups.met_by(&list(&["ga"]), None));
        // An ordered array is met only in its own order.
        let tags = &meta.attributes["tags"];
        assert!(!tags.met_by(&list(&["gb", "ga"]), Some(&list(&["ga", "gb"]))));
        assert!(tags.met_by(&list(&["ga", "gb"]), Some(&list(&["ga", "gb"]))));
        let err = with("    shell: {unordered: true}\n")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("provider.attributes.shell.unordered: only an array can be unordered"),
            "{err}"
        );
    }

    #[test]
    fn only_a_read_only_attribute_is_volatile() {
        let meta = with("    free: {kind: r, volatile: true}\n    os: {kind: r}\n").unwrap();
        assert!(meta.attributes["free"].volatile);
        assert!(!meta.attributes["os"].volatile);
        let err = with("    free: {volatile: true}\n")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("provider.attributes.free.volatile: only a read-only attribute"),
            "{err}"
        );
    }

    #[test]
    fn removed_after_lists_type_names_once() {
        let with = |types: &str| {
            parse(&MINIMAL.replace(
                "  suitable: true\n",
                &format!("  suitable: true\n  removed_after: {types}\n"),
            ))
        };
        assert!(parse(MINIMAL).unwrap().removed_after.is_empty());
        assert_eq!(
            with("[user, file]").unwrap().removed_after,
            ["user", "file"]
        );
        let err = with("[user, user]").unwrap_err().to_string();
        assert!(
            err.contains("provider.removed_after: 'user' is listed twice"),
            "{err}"
        );
        let err = with("['user::etc_passwd']").unwrap_err().to_string();
        assert!(
            err.contains("provider.removed_after: 'user::etc_passwd' is not a type name"),
            "{err}"
        );
    }

    #[test]
    fn refers_to_is_a_type_name_on_any_attribute_but_name() {
        let meta = with(
            "    owner: {refers_to: user}\n    groups: {type: 'array[string]', refers_to: group}\n    \
             mode: {}\n",
        )
        .unwrap();
        assert_eq!(meta.attributes["owner"].refers_to.as_deref(), Some("user"));
        assert_eq!(
            meta.attributes["groups"].refers_to.as_deref(),
            Some("group")
        );
        assert_eq!(meta.attributes["mode"].refers_to, None);
        for bad in ["'two words'", "'user::etc_passwd'", "9lives", "''"] {
            let err = with(&format!("    owner: {{refers_to: {bad}}}\n"))
                .unwrap_err()
                .to_string();
            assert!(
                err.contains("provider.attributes.owner.refers_to: '")
                    && err.contains("is not a type name"),
                "{bad}: {err}"
            );
        }
        let err = with("    owner: {refers_to: 5}\n").unwrap_err().to_string();
        assert!(
            err.contains("provider.attributes.owner.refers_to: invalid type: integer `5`"),
            "{err}"
        );
        let err = parse(&MINIMAL.replace("    name: {}", "    name: {refers_to: user}"))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("provider.attributes.name: the name cannot refer to another resource"),
            "{err}"
        );
    }

    #[test]
    fn sensitive_in_is_args_or_env_and_env_names_are_checked() {
        let with = |key: &str, attributes: &str| {
            parse(
                &MINIMAL
                    .replace("  suitable: true\n", &format!("  suitable: true\n{key}"))
                    .replace("    name: {}\n", &format!("    name: {{}}\n{attributes}")),
            )
        };
        let secret = "    password: {sensitive: true}\n";
        assert_eq!(with("", secret).unwrap().sensitive_in, SensitiveIn::Args);
        let meta = with("  sensitive_in: args\n", secret).unwrap();
        assert_eq!(meta.sensitive_in, SensitiveIn::Args);
        let meta = with("  sensitive_in: env\n", secret).unwrap();
        assert_eq!(meta.sensitive_in, SensitiveIn::Env);
        // Non-sensitive attributes may have any name.
        assert!(with("  sensitive_in: env\n", "    PATH: {}\n").is_ok());
        for (key, attributes, needle) in [
            (
                "  sensitive_in: argv\n",
                secret,
                "provider.sensitive_in: unknown value 'argv' (expected args or env)",
            ),
            (
                "  sensitive_in: [env]\n",
                secret,
                "provider.sensitive_in: invalid type: sequence, expected a string",
            ),
            (
                "  sensitive_in: env\n",
                "    PATH: {sensitive: true}\n",
                "provider.attributes.PATH: a sensitive attribute is passed in an environment \
                 variable of its name (sensitive_in: env), and 'PATH' is a variable of the \
                 provider's environment that ral sets",
            ),
            (
                "  sensitive_in: env\n",
                "    RALSH_SENSITIVE: {sensitive: true}\n",
                "'RALSH_SENSITIVE' is a variable of the provider's environment that ral sets",
            ),
            (
                "  sensitive_in: env\n",
                "    LD_PRELOAD: {sensitive: true}\n",
                "provider.attributes.LD_PRELOAD: a sensitive attribute is passed in an \
                 environment variable of its name (sensitive_in: env), and 'LD_PRELOAD' has \
                 upper-case letters",
            ),
            (
                "  sensitive_in: env\n",
                "    keys: {sensitive: true, type: 'optional[array[string]]'}\n",
                "provider.attributes.keys: a sensitive attribute passed in the environment \
                 (sensitive_in: env) must hold one value, not an array or a hash (type \
                 optional[array[string]])",
            ),
        ] {
            let err = with(key, attributes).unwrap_err().to_string();
            assert!(err.starts_with("/p/my_prov.yaml: "), "{err}");
            assert!(err.contains(needle), "{key}{attributes}: {err}");
        }
        // The json convention reads values on stdin: 'env' means nothing.
        let json = MINIMAL
            .replace("invoke: simple", "invoke: json")
            .replace("actions: [list]", "actions: [get]")
            .replace(
                "  suitable: true\n",
                "  suitable: true\n  sensitive_in: env\n",
            );
        let err = parse(&json).unwrap_err().to_string();
        assert!(
            err.contains("provider.sensitive_in: 'env' is for the simple convention"),
            "{err}"
        );
        assert!(parse(&json.replace("sensitive_in: env", "sensitive_in: args")).is_ok());
    }

    #[test]
    fn unknown_key_names_path_and_line() {
        let text = MINIMAL.replace("    name: {}", "    name:\n      desc: x\n      typo: y");
        let err = parse(&text).unwrap_err().to_string();
        assert!(err.contains("/p/my_prov.yaml"), "{err}");
        assert!(err.contains("provider.attributes.name"), "{err}");
        assert!(err.contains("typo"), "{err}");
        assert!(err.contains("line 9"), "{err}");
    }

    #[test]
    fn checks_reject_bad_metadata_with_reasons() {
        for (from, to, needle) in [
            ("type: thing", "type: 'a b'", "provider.type"),
            (
                "invoke: simple",
                "invoke: yaml",
                "unknown calling convention 'yaml'",
            ),
            (
                "invoke: simple",
                "invoke: json",
                "unknown action 'list' for the json convention (known: describe, get, set, refresh)",
            ),
            ("actions: [list]", "actions: [find]", "must include list"),
            (
                "actions: [list]",
                "actions: [list, frob]",
                "unknown action 'frob'",
            ),
            (
                "suitable: true",
                "suitable: {commands: [ls, 'not ']}",
                "'not '",
            ),
            ("suitable: true", "suitable: 3", "a boolean or a map"),
            ("    name: {}", "    ral_x: {}", "reserved"),
            ("    name: {}", "    name: {}\n    __x: {}", "reserved"),
            ("    name: {}", "    name: {}\n    ral: {}", "reserved"),
            ("    name: {}", "    title: {}", "declare the 'name'"),
            ("    name: {}", "    name: {kind: x}", "unknown kind 'x'"),
            (
                "    name: {}",
                "    name: {type: 'enum[]'}",
                "provider.attributes.name.type",
            ),
        ] {
            let err = parse(&MINIMAL.replace(from, to)).unwrap_err().to_string();
            assert!(err.contains(needle), "{to}: {err}");
        }
    }

    #[test]
    fn mistakes_inside_suitable_keep_their_path_and_line() {
        let text = MINIMAL.replace(
            "suitable: true",
            "suitable:\n    commands: [sh]\n    extra: 1",
        );
        let err = parse(&text).unwrap_err().to_string();
        assert!(err.contains("provider.suitable"), "{err}");
        assert!(err.contains("unknown field `extra`"), "{err}");
        assert!(err.contains("line 7"), "{err}");
    }

    #[test]
    fn suitable_commands_parse_negation() {
        let meta =
            parse(&MINIMAL.replace("suitable: true", "suitable: {commands: [ls, not frob]}"))
                .unwrap();
        assert_eq!(
            meta.suitable,
            Suitable::Commands(vec![
                CommandCheck {
                    command: "ls".into(),
                    wanted: true
                },
                CommandCheck {
                    command: "frob".into(),
                    wanted: false
                },
            ])
        );
    }

    #[test]
    fn a_value_with_a_digest_is_shown_by_it_in_messages_and_digests_are_checked() {
        let yaml = "provider:\n  type: file\n  invoke: json\n  actions: [get]\n  suitable: true\n  attributes:\n    name: {}\n    content: {digest: checksum, private_by: mode}\n    checksum: {kind: r}\n    mode: {}\n";
        let meta = Metadata::parse(yaml, Path::new("f.yaml")).unwrap();
        let content = &meta.attributes["content"];
        let shown = content.show(&Value::from("hunter2"));
        assert_eq!(shown, format!("'{}'", Value::from("hunter2").digest()));
        assert!(content.kept_keyed());
        assert!(!meta.attributes["mode"].kept_keyed());
        for (attrs, problem) in [
            (
                "content: {digest: nope}",
                "'nope' is not another, read-only",
            ),
            (
                "content: {digest: mode}\n    mode: {}",
                "'mode' is not another, read-only",
            ),
            (
                "content: {private_by: mode}\n    mode: {}",
                "has none (give digest too)",
            ),
            (
                "content: {digest: checksum, private_by: nope}\n    checksum: {kind: r}",
                "'nope' is not another attribute",
            ),
        ] {
            let yaml = format!(
                "provider:\n  type: file\n  invoke: json\n  actions: [get]\n  suitable: true\n  attributes:\n    name: {{}}\n    {attrs}\n"
            );
            let err = Metadata::parse(&yaml, Path::new("f.yaml"))
                .unwrap_err()
                .to_string();
            assert!(err.contains(problem), "{attrs}: {err}");
        }
    }
}
