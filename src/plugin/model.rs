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
}

impl ModelItem {
    /// `/TYPE/NAME`.
    pub fn vpath(&self) -> String {
        vpath(&self.type_name, &self.name)
    }

    fn to_json(&self) -> Json {
        json!({
            "vpath": self.vpath(),
            "type": self.type_name,
            "name": self.name,
            "state": self.state.as_str(),
            "properties": self.properties,
            "applied_properties": self.applied_properties,
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
    /// `{"items": [...]}`, as every call's input holds it.
    pub fn to_json(&self) -> Json {
        json!({ "items": self.items.iter().map(ModelItem::to_json).collect::<Vec<Json>>() })
    }

    /// The item at `vpath`.
    pub fn find(&self, vpath: &str) -> Option<&ModelItem> {
        self.items.iter().find(|item| item.vpath() == vpath)
    }
}
