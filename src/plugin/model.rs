//! The model a plugin is given: every item of the run (resources and
//! plugin items, those for removal too) with its vpath `/TYPE/NAME`, its
//! LITP state and its properties, current and last applied.

use serde_json::{json, Map, Value as Json};

use crate::store::ItemState;

/// One model item.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelItem {
    pub type_name: String,
    pub name: String,
    pub state: ItemState,
    pub properties: Map<String, Json>,
    /// What was applied last; `None` for an Initial item.
    pub applied_properties: Option<Map<String, Json>>,
    /// Its properties not every plugin may see, which read `[redacted]`
    /// in the model of the others: sensitive ones, which the plugin owning
    /// its type gets; and those of a resource shown only as their digest
    /// (a file's content, private or large), which no plugin owns.
    pub hidden: Vec<String>,
}

impl ModelItem {
    /// `/TYPE/NAME`.
    pub fn vpath(&self) -> String {
        vpath(&self.type_name, &self.name)
    }

    /// The item as a plugin owning `own` types sees it.
    fn to_json(&self, own: &[String]) -> Json {
        let mine = own.contains(&self.type_name);
        let shown = |map: &Map<String, Json>| -> Map<String, Json> {
            map.iter()
                .map(|(key, value)| match mine || !self.hidden.contains(key) {
                    true => (key.clone(), value.clone()),
                    false => (key.clone(), Json::from(crate::secrets::REDACTED)),
                })
                .collect()
        };
        json!({
            "vpath": self.vpath(),
            "type": self.type_name,
            "name": self.name,
            "state": self.state.as_str(),
            "properties": shown(&self.properties),
            "applied_properties": self.applied_properties.as_ref().map(shown),
        })
    }
}

/// The vpath of the item `name` of type `type_name`.
pub fn vpath(type_name: &str, name: &str) -> String {
    format!("/{type_name}/{name}")
}

/// Every item of a run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Model {
    pub items: Vec<ModelItem>,
}

impl Model {
    /// `{"items": [...]}`, as every call's input holds it, for a plugin
    /// owning the item types `own`: another type's hidden values are not
    /// its to see.
    pub fn to_json(&self, own: &[String]) -> Json {
        let items: Vec<Json> = self.items.iter().map(|item| item.to_json(own)).collect();
        json!({ "items": items })
    }

    /// The item at `vpath`.
    pub fn find(&self, vpath: &str) -> Option<&ModelItem> {
        self.items.iter().find(|item| item.vpath() == vpath)
    }
}
