//! Relationships a provider's metadata declares for every resource of its
//! type, as the Resource API's `autorequire`, `autobefore`, `autonotify`
//! and `autosubscribe`: each maps a resource type to titles, a title being
//! a constant or, when it starts with `$`, the value of one of the
//! resource's attributes (each element of an array). A plan links two
//! resources this way only when the manifest declares both.

use indexmap::IndexMap;
use serde::Deserialize;

use crate::types::Value;

/// Which way an automatic relationship points, and whether a change of
/// the earlier resource refreshes the later one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RelationKind {
    /// The resource comes after the ones named.
    Require,
    /// The resource comes before the ones named.
    Before,
    /// Before them, and a change of it refreshes them.
    Notify,
    /// After them, and a change of any of them refreshes it.
    Subscribe,
}

impl RelationKind {
    pub const ALL: [RelationKind; 4] = [
        RelationKind::Require,
        RelationKind::Before,
        RelationKind::Notify,
        RelationKind::Subscribe,
    ];

    /// The metadata key that declares it.
    pub fn key(self) -> &'static str {
        match self {
            RelationKind::Require => "autorequire",
            RelationKind::Before => "autobefore",
            RelationKind::Notify => "autonotify",
            RelationKind::Subscribe => "autosubscribe",
        }
    }

    /// Whether the named resources come before this one.
    pub fn named_first(self) -> bool {
        matches!(self, RelationKind::Require | RelationKind::Subscribe)
    }

    /// Whether a change of the earlier resource refreshes the later one.
    pub fn refreshes(self) -> bool {
        matches!(self, RelationKind::Notify | RelationKind::Subscribe)
    }
}

/// A title as declared.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Title {
    /// This very name.
    Constant(String),
    /// The value of this attribute of the resource.
    Attribute(String),
}

/// One declared relationship: to the resources of `type_name` titled
/// `title`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Relation {
    pub kind: RelationKind,
    pub type_name: String,
    pub title: Title,
}

impl Relation {
    /// The names this relationship gives for a resource named `name` with
    /// the attributes `attrs`: none when the attribute is not set.
    pub fn titles<'a>(&'a self, name: &'a str, attrs: &'a [(String, Value)]) -> Vec<&'a str> {
        match &self.title {
            Title::Constant(title) => vec![title.as_str()],
            Title::Attribute(attr) if attr == "name" => vec![name],
            Title::Attribute(attr) => {
                match attrs.iter().find(|(key, _)| key == attr).map(|(_, v)| v) {
                    Some(Value::String(text)) => vec![text.as_str()],
                    Some(Value::Array(values)) => values.iter().filter_map(Value::as_str).collect(),
                    _ => Vec::new(),
                }
            }
        }
    }
}

/// One or several titles, as YAML writes them.
#[derive(Deserialize)]
#[serde(untagged)]
pub(crate) enum RawTitles {
    One(String),
    Many(Vec<String>),
}

/// The four keys as read: type name to titles.
pub(crate) type RawRelations = IndexMap<String, RawTitles>;

/// Checks the declared relationships of kind `kind` against the provider's
/// attribute names `attributes`, of which `sensitive` may not name a
/// resource: the name would show the value in plans.
pub(crate) fn check(
    kind: RelationKind,
    raw: RawRelations,
    attributes: &[&str],
    sensitive: &[&str],
) -> Result<Vec<Relation>, String> {
    let mut relations = Vec::new();
    for (type_name, titles) in raw {
        let path = format!("provider.{}.{type_name}", kind.key());
        if !is_type_name(&type_name) {
            return Err(format!(
                "provider.{}: '{}' is not a type name (a word of letters, digits and '_')",
                kind.key(),
                crate::text::escape(&type_name)
            ));
        }
        let titles = match titles {
            RawTitles::One(title) => vec![title],
            RawTitles::Many(titles) => titles,
        };
        if titles.is_empty() {
            return Err(format!("{path}: give at least one title"));
        }
        for title in titles {
            let title = match title.strip_prefix('$') {
                Some(attr) if sensitive.contains(&attr) => {
                    return Err(format!(
                        "{path}: '${attr}' is sensitive: a resource named by it would show its \
                         value in every plan"
                    ))
                }
                Some(attr) if attributes.contains(&attr) => Title::Attribute(attr.to_owned()),
                Some(attr) => {
                    return Err(format!(
                        "{path}: '${}' names no attribute of this provider (known: {})",
                        crate::text::escape(attr),
                        attributes.join(", ")
                    ))
                }
                None if title.is_empty() => return Err(format!("{path}: a title is empty")),
                None => Title::Constant(title),
            };
            relations.push(Relation {
                kind,
                type_name: type_name.clone(),
                title,
            });
        }
    }
    Ok(relations)
}

fn is_type_name(text: &str) -> bool {
    !text.is_empty() && text.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(yaml: &str) -> RawRelations {
        serde_yaml::from_str(yaml).unwrap()
    }

    #[test]
    fn titles_are_constants_or_attributes_and_lists_or_one() {
        let relations = check(
            RelationKind::Notify,
            raw("service: [web, $unit]\nfile: /etc/x\n"),
            &["name", "unit"],
            &[],
        )
        .unwrap();
        assert_eq!(relations.len(), 3);
        assert_eq!(relations[0].title, Title::Constant("web".to_owned()));
        assert_eq!(relations[1].title, Title::Attribute("unit".to_owned()));
        assert_eq!(relations[2].type_name, "file");
    }

    #[test]
    fn an_unknown_attribute_or_a_bad_type_is_named() {
        let e = check(
            RelationKind::Subscribe,
            raw("file: $nope\n"),
            &["name"],
            &[],
        )
        .unwrap_err();
        assert_eq!(
            e,
            "provider.autosubscribe.file: '$nope' names no attribute of this provider (known: name)"
        );
        let e = check(RelationKind::Require, raw("'a b': x\n"), &["name"], &[]).unwrap_err();
        assert!(e.contains("'a b' is not a type name"), "{e}");
        let e = check(RelationKind::Before, raw("file: []\n"), &["name"], &[]).unwrap_err();
        assert!(e.contains("at least one title"), "{e}");
        let e = check(
            RelationKind::Notify,
            raw("user: $pw\n"),
            &["name", "pw"],
            &["pw"],
        )
        .unwrap_err();
        assert!(e.contains("'$pw' is sensitive"), "{e}");
    }

    #[test]
    fn an_attribute_title_gives_its_value_or_each_element() {
        let relations = check(
            RelationKind::Require,
            raw("group: [$groups, $name, $unset]\n"),
            &["name", "groups", "unset"],
            &[],
        )
        .unwrap();
        let attrs = vec![(
            "groups".to_owned(),
            Value::Array(vec![
                Value::String("a".to_owned()),
                Value::String("b".to_owned()),
            ]),
        )];
        let all: Vec<&str> = relations
            .iter()
            .flat_map(|r| r.titles("me", &attrs))
            .collect();
        assert_eq!(all, ["a", "b", "me"]);
    }
}
