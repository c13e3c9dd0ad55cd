//! The data model every renderer works from: resources and changes.

use crate::types::AttrMap;
use crate::types::Value;

/// One resource: its name and its typed attribute values, in the order the
/// provider reported them.
#[derive(Debug, Clone, PartialEq)]
pub struct Resource {
    pub name: String,
    pub attrs: AttrMap<Value>,
}

/// One attribute that changed (or would change, under noop).
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    pub attr: String,
    /// The new value.
    pub is: Value,
    /// The old value; `None` when the attribute had none.
    pub was: Option<Value>,
}

impl Resource {
    /// A resource with a name and nothing else.
    pub fn bare(name: &str) -> Resource {
        Resource::with_capacity(name, 0)
    }

    /// A resource with a name and room for `attrs` attributes.
    pub fn with_capacity(name: &str, attrs: usize) -> Resource {
        Resource {
            name: name.to_owned(),
            attrs: AttrMap::with_capacity_and_hasher(attrs, Default::default()),
        }
    }

    /// The `ensure` value, when the provider reports one as a string.
    pub fn ensure(&self) -> Option<&str> {
        self.attrs.get("ensure").and_then(Value::as_str)
    }

    /// True when the provider says the resource is absent.
    pub fn is_absent(&self) -> bool {
        self.ensure() == Some("absent")
    }

    /// Attributes in display order: `ensure` first, then alphabetical.
    pub fn display_order(&self) -> Vec<(&str, &Value)> {
        let mut attrs: Vec<(&str, &Value)> =
            self.attrs.iter().map(|(k, v)| (k.as_str(), v)).collect();
        attrs.sort_by(|(a, _), (b, _)| (*a != "ensure", *a).cmp(&(*b != "ensure", *b)));
        attrs
    }

    /// Applies changes on top of this state.
    pub fn with_changes(mut self, changes: &[Change]) -> Resource {
        for change in changes {
            self.attrs.insert(change.attr.clone(), change.is.clone());
        }
        self
    }
}

/// Where resources go as a provider lists them: each one as it is read,
/// and a word whenever those listed so far were handed over and the
/// provider has not written more yet (the moment to flush buffered
/// output). A closure taking each resource is a sink that ignores pauses.
pub trait ResourceSink {
    fn resource(&mut self, resource: Resource) -> crate::error::Result<()>;

    fn idle(&mut self) -> crate::error::Result<()> {
        Ok(())
    }
}

impl<F: FnMut(Resource) -> crate::error::Result<()>> ResourceSink for F {
    fn resource(&mut self, resource: Resource) -> crate::error::Result<()> {
        self(resource)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ensure_sorts_first_then_alphabetical() {
        let mut r = Resource::bare("x");
        for key in ["zeta", "ensure", "alpha"] {
            r.attrs.insert(key.into(), Value::String(String::new()));
        }
        let keys: Vec<&str> = r.display_order().into_iter().map(|(k, _)| k).collect();
        assert_eq!(keys, ["ensure", "alpha", "zeta"]);
    }
}
