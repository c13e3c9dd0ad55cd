//! Values shown only as their digest. An attribute whose metadata names a
//! `digest` attribute (the file type's `content`, whose digest is
//! `checksum`) can hold more than anyone wants printed, or what only its
//! owner may read:
//!
//! - a value the provider does not report (a file too large to report, or
//!   a private one) is compared through its digest ([`met`]), so that it
//!   converges like any other;
//! - a value over [`SHOWN_MAX`] bytes, and a private value (its resource's
//!   `private_by` permission bits, as asked for, else as read, give others
//!   no read permission), is withheld: plans, reports, changes and the
//!   state store show it as its digest, never in clear ([`withheld`],
//!   [`digested`]);
//! - a private value a provider reports anyway is dropped where what
//!   providers report is typed, its digest kept ([`withhold_read`]), so
//!   nothing ral prints, keeps or saves holds it;
//! - model plugins, whose model is made before anything is read, get a
//!   value that is or may be withheld as `[redacted]`
//!   ([`withheld_unread`]).
//!
//! A digest is `sha256:` and the hex SHA-256 of the value's text.

use crate::provider::Provider;
use crate::resource::{Change, Resource};
use crate::types::Value;

/// The largest value, in bytes, that is shown in clear.
pub const SHOWN_MAX: usize = 64 * 1024;

/// The attribute that reports `attr`'s digest, if it has one.
fn digest_attribute<'p>(provider: &'p Provider, attr: &str) -> Option<&'p str> {
    provider.attribute(attr)?.digest.as_deref()
}

/// Whether `wanted` for `attr` is met by `state` through its digest:
/// `state` has no value of `attr` (the provider did not report it), and
/// its digest attribute holds the digest of `wanted`.
pub fn met(provider: &Provider, attr: &str, wanted: &Value, state: &Resource) -> bool {
    let Some(digest) = digest_attribute(provider, attr) else {
        return false;
    };
    !state.attrs.contains_key(attr)
        && state.attrs.get(digest).and_then(Value::as_str) == Some(wanted.digest().as_str())
}

/// Whether permission bits written as octal digits give others no read
/// permission; `None` for a value that is no such bits.
fn is_private_mode(mode: &Value) -> Option<bool> {
    let text = mode.as_str()?;
    if text.is_empty() || text.len() > 6 || !text.bytes().all(|b| (b'0'..=b'7').contains(&b)) {
        return None;
    }
    let bits = u32::from_str_radix(text, 8).ok()?;
    Some(bits & 0o004 == 0)
}

/// Whether `attr`'s value is private for a resource asked to have
/// `wanted` and found as `state`: its `private_by` bits, as asked for, else
/// as found, give others no read permission.
fn is_private(
    provider: &Provider,
    attr: &str,
    wanted: &[(String, Value)],
    state: Option<&Resource>,
) -> bool {
    let Some(by) = provider
        .attribute(attr)
        .and_then(|a| a.private_by.as_deref())
    else {
        return false;
    };
    let asked = wanted.iter().find(|(key, _)| key == by).map(|(_, v)| v);
    let found = state.and_then(|state| state.attrs.get(by));
    asked.or(found).and_then(is_private_mode) == Some(true)
}

/// The attributes among `wanted` whose values are private for a
/// resource found as `state` (`None`: not found): what a provider says is
/// redacted of them, as of sensitive ones.
pub fn private(
    provider: &Provider,
    wanted: &[(String, Value)],
    state: Option<&Resource>,
) -> Vec<String> {
    wanted
        .iter()
        .filter(|(attr, _)| is_private(provider, attr, wanted, state))
        .map(|(attr, _)| attr.clone())
        .collect()
}

/// The attributes among `wanted` that are shown as their digest before
/// the resource is read (a model plugin's model is made then, and holds
/// them as `[redacted]`): those too large to show, and private ones as
/// asked for or, their `private_by` bits not asked for, as the resource
/// may be found.
pub fn withheld_unread(provider: &Provider, wanted: &[(String, Value)]) -> Vec<String> {
    let perhaps_private = |by: &str| {
        let asked = wanted.iter().find(|(key, _)| key == by).map(|(_, v)| v);
        asked.and_then(is_private_mode) != Some(false)
    };
    wanted
        .iter()
        .filter(|(attr, value)| {
            let Some(attribute) = provider.attribute(attr) else {
                return false;
            };
            attribute.digest.is_some()
                && (is_large(value) || attribute.private_by.as_deref().is_some_and(perhaps_private))
        })
        .map(|(attr, _)| attr.clone())
        .collect()
}

/// Whether a value is too large to show.
fn is_large(value: &Value) -> bool {
    value.as_str().map_or(0, str::len) > SHOWN_MAX
}

/// The attributes among `wanted` (a request's attributes) that are shown
/// as their digest for a resource found as `state`: those too large to
/// show, private ones, and those whose value the provider did not report
/// though it reported their digest (only a digest could stand for the old
/// value).
pub fn withheld(provider: &Provider, wanted: &[(String, Value)], state: &Resource) -> Vec<String> {
    wanted
        .iter()
        .filter(|(attr, value)| {
            let Some(digest) = digest_attribute(provider, attr) else {
                return false;
            };
            let unreported = !state.attrs.contains_key(attr.as_str())
                && state.attrs.contains_key(digest)
                && !state.is_absent();
            is_large(value)
                || state.attrs.get(attr.as_str()).is_some_and(is_large)
                || unreported
                || is_private(provider, attr, wanted, Some(state))
        })
        .map(|(attr, _)| attr.clone())
        .collect()
}

/// A change of a withheld attribute as it is shown: from the digest of
/// the value found (or the digest attribute read, when the value was not
/// reported) to the digest of the value asked for (`wanted`, else the one
/// reported).
pub fn digested(
    provider: &Provider,
    change: &Change,
    state: &Resource,
    wanted: Option<&Value>,
) -> Change {
    let digest = digest_attribute(provider, &change.attr);
    let was = match state.attrs.get(&change.attr) {
        Some(value) => Some(Value::String(value.digest())),
        None => digest.and_then(|digest| state.attrs.get(digest)).cloned(),
    };
    Change {
        attr: change.attr.clone(),
        is: Value::String(wanted.unwrap_or(&change.is).digest()),
        was,
    }
}

/// The changes as shown: those of `withheld` attributes as digests.
pub fn shown_changes(
    provider: &Provider,
    changes: Vec<Change>,
    withheld: &[String],
    state: &Resource,
    wanted: &[(String, Value)],
) -> Vec<Change> {
    if withheld.is_empty() {
        return changes;
    }
    changes
        .into_iter()
        .map(|change| match withheld.contains(&change.attr) {
            true => {
                let asked = wanted
                    .iter()
                    .find(|(k, _)| *k == change.attr)
                    .map(|(_, v)| v);
                digested(provider, &change, state, asked)
            }
            false => change,
        })
        .collect()
}

/// The resource as it is after `changes` to `state` (what `ralsh` shows
/// after a change): each changed value with a digest has its digest
/// attribute follow it, and a withheld one is shown by its digest alone.
pub fn view_after(
    provider: &Provider,
    state: Resource,
    changes: &[Change],
    withheld: &[String],
    wanted: &[(String, Value)],
) -> Resource {
    let mut view = state;
    for change in changes {
        let Some(digest) = digest_attribute(provider, &change.attr) else {
            view.attrs.insert(change.attr.clone(), change.is.clone());
            continue;
        };
        let asked = wanted
            .iter()
            .find(|(k, _)| *k == change.attr)
            .map(|(_, v)| v);
        match withheld.contains(&change.attr) {
            // Already shown as its digest.
            true => {
                view.attrs.shift_remove(&change.attr);
                view.attrs.insert(digest.to_owned(), change.is.clone());
            }
            false => {
                let value = asked.unwrap_or(&change.is);
                view.attrs
                    .insert(digest.to_owned(), Value::String(value.digest()));
                view.attrs.insert(change.attr.clone(), value.clone());
            }
        }
    }
    view
}

/// Drops from a resource read the private values its provider reported,
/// keeping (or working out) their digest.
pub fn withhold_read(provider: &Provider, resource: &mut Resource) {
    for attribute in provider.meta.attributes.values() {
        let Some(digest) = attribute.digest.as_deref() else {
            continue;
        };
        if attribute.private_by.is_none()
            || !resource.attrs.contains_key(&attribute.name)
            || !is_private(provider, &attribute.name, &[], Some(resource))
        {
            continue;
        }
        if let Some(value) = resource.attrs.shift_remove(&attribute.name) {
            if !resource.attrs.contains_key(digest) {
                resource
                    .attrs
                    .insert(digest.to_owned(), Value::String(value.digest()));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn provider() -> Provider {
        let yaml = "provider:\n  type: file\n  invoke: json\n  actions: [get, set]\n  suitable: true\n  attributes:\n    name: {}\n    ensure: {}\n    content: {digest: checksum, private_by: mode}\n    checksum: {kind: r}\n    mode: {}\n";
        let meta = crate::metadata::Metadata::parse(yaml, std::path::Path::new("f.yaml")).unwrap();
        Provider::new(meta, "f.prov".into(), None)
    }

    fn resource(attrs: &[(&str, &str)]) -> Resource {
        let mut res = Resource::bare("/f");
        for (k, v) in attrs {
            res.attrs.insert((*k).to_owned(), Value::from(*v));
        }
        res
    }

    fn wanted(attrs: &[(&str, &str)]) -> Vec<(String, Value)> {
        attrs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), Value::from(*v)))
            .collect()
    }

    #[test]
    fn a_digest_is_sha256_of_the_text() {
        assert_eq!(
            Value::from("<h1>hello</h1>\n").digest(),
            "sha256:186ea20da38447cf0c59fa62a9dfaea3bdcca431517b83d3a9c00ebc2044e95a"
        );
    }

    #[test]
    fn an_unreported_value_is_met_by_its_digest_only() {
        let p = provider();
        let text = Value::String("x".repeat(70_000));
        let found = resource(&[("ensure", "file"), ("checksum", &text.digest())]);
        assert!(met(&p, "content", &text, &found));
        assert!(!met(&p, "content", &Value::from("other"), &found));
        // A reported value is compared as itself, not through its digest.
        let mut reported = found.clone();
        reported.attrs.insert("content".into(), Value::from("y"));
        assert!(!met(&p, "content", &text, &reported));
        // Only an attribute with a digest.
        assert!(!met(&p, "mode", &Value::from("0644"), &found));
    }

    #[test]
    fn large_and_private_values_are_withheld_and_others_shown() {
        let p = provider();
        let public = resource(&[("ensure", "file"), ("mode", "0644"), ("content", "a")]);
        assert!(withheld(&p, &wanted(&[("content", "b")]), &public).is_empty());
        let big = "b".repeat(SHOWN_MAX + 1);
        assert_eq!(
            withheld(&p, &wanted(&[("content", &big)]), &public),
            ["content"]
        );
        assert!(withheld(&p, &wanted(&[("content", &big[1..])]), &public).is_empty());
        // Private as asked for, or as found when not asked.
        assert_eq!(
            withheld(&p, &wanted(&[("content", "b"), ("mode", "0640")]), &public),
            ["content"]
        );
        let private = resource(&[
            ("ensure", "file"),
            ("mode", "0600"),
            ("checksum", "sha256:00"),
        ]);
        assert_eq!(
            withheld(&p, &wanted(&[("content", "b")]), &private),
            ["content"]
        );
        assert!(withheld(
            &p,
            &wanted(&[("content", "b"), ("mode", "0604")]),
            &resource(&[("ensure", "absent")])
        )
        .is_empty());
        // Found without its value but with its digest: the old value can
        // only be shown as that digest.
        let unreported = resource(&[
            ("ensure", "file"),
            ("mode", "0644"),
            ("checksum", "sha256:00"),
        ]);
        assert_eq!(
            withheld(&p, &wanted(&[("content", "b")]), &unreported),
            ["content"]
        );
    }

    #[test]
    fn before_reading_a_value_is_withheld_unless_asked_public_and_small() {
        let p = provider();
        let content = |mode: Option<&str>, text: &str| {
            let mut asked = vec![("content".to_owned(), Value::from(text))];
            asked.extend(mode.map(|m| ("mode".to_owned(), Value::from(m))));
            withheld_unread(&p, &asked)
        };
        assert!(content(Some("0644"), "hi").is_empty());
        assert_eq!(content(Some("0640"), "hi"), ["content"]);
        // The file found decides: it may give others no read permission.
        assert_eq!(content(None, "hi"), ["content"]);
        assert_eq!(
            content(Some("0644"), &"b".repeat(SHOWN_MAX + 1)),
            ["content"]
        );
        // Only an attribute with a digest.
        let mode = [("mode".to_owned(), Value::from("0600"))];
        assert!(withheld_unread(&p, &mode).is_empty());
    }

    #[test]
    fn a_withheld_change_shows_digests_on_both_sides() {
        let p = provider();
        let found = resource(&[("ensure", "file"), ("content", "old")]);
        let change = Change {
            attr: "content".into(),
            is: Value::from("new"),
            was: Some(Value::from("old")),
        };
        let shown = digested(&p, &change, &found, Some(&Value::from("new")));
        assert_eq!(shown.was, Some(Value::String(Value::from("old").digest())));
        assert_eq!(shown.is, Value::String(Value::from("new").digest()));
        let unreported = resource(&[("ensure", "file"), ("checksum", "sha256:aa")]);
        let shown = digested(&p, &change, &unreported, None);
        assert_eq!(shown.was, Some(Value::from("sha256:aa")));
        assert!(!format!("{shown:?}").contains("new\""));
    }

    #[test]
    fn a_private_value_read_is_dropped_and_its_digest_kept() {
        let p = provider();
        let mut read = resource(&[("ensure", "file"), ("mode", "0640"), ("content", "secret")]);
        withhold_read(&p, &mut read);
        assert!(!read.attrs.contains_key("content"));
        assert_eq!(
            read.attrs["checksum"],
            Value::String(Value::from("secret").digest())
        );
        let mut public = resource(&[("ensure", "file"), ("mode", "0644"), ("content", "hi")]);
        withhold_read(&p, &mut public);
        assert_eq!(public.attrs["content"], Value::from("hi"));
    }

    #[test]
    fn the_view_after_a_change_has_the_new_digest() {
        let p = provider();
        let found = resource(&[
            ("ensure", "file"),
            ("content", "a"),
            ("checksum", "sha256:old"),
        ]);
        let change = Change {
            attr: "content".into(),
            is: Value::from("b"),
            was: Some(Value::from("a")),
        };
        let view = view_after(
            &p,
            found.clone(),
            std::slice::from_ref(&change),
            &[],
            &wanted(&[("content", "b")]),
        );
        assert_eq!(view.attrs["content"], Value::from("b"));
        assert_eq!(
            view.attrs["checksum"],
            Value::String(Value::from("b").digest())
        );
        let shown = digested(&p, &change, &found, Some(&Value::from("b")));
        let withheld = vec!["content".to_owned()];
        let view = view_after(&p, found, &[shown], &withheld, &wanted(&[("content", "b")]));
        assert!(!view.attrs.contains_key("content"));
        assert_eq!(
            view.attrs["checksum"],
            Value::String(Value::from("b").digest())
        );
    }
}
