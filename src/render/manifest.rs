//! The manifest form (`ralsh --yaml`): resources as YAML whose top level
//! maps TYPE to NAME to attributes, the shape `puppet resource --to_yaml`
//! prints and `ral plan` reads.
//!
//! ```yaml
//! user:
//!   alice:
//!     ensure: present
//!     uid: 1500
//! ```
//!
//! `ral plan` reads a manifest with [`crate::converge::manifest`] and types
//! each value with [`crate::types::AttrType::convert_written`] (a scalar's
//! text as the command line converts it), so what is printed must read
//! back as exactly the values that were read: a manifest of the current
//! state plans nothing. Left out are read-only attributes (nothing can
//! set them), sensitive ones (their
//! values are redacted, and `[redacted]` would become the new password),
//! attributes the metadata does not declare, attributes named like a
//! metaparameter (`require`, `before`), any value that would read back as
//! something else (an empty string of an `optional[string]` reads as null,
//! `5` of a `variant[integer, string]` is ambiguous), and resources whose
//! names a manifest cannot hold (leading spaces, control characters). All
//! but the read-only ones are named in a log line when the output ends,
//! one line for each reason.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{self, Write};

use crate::converge::manifest::METAPARAMETERS;
use crate::error::Error;
use crate::host::check_name;
use crate::metadata::Kind;
use crate::provider::Provider;
use crate::resource::Resource;
use crate::text::escape;
use crate::types::Value;
use crate::types::Written;
use crate::update::Outcome;

use super::{human, yaml, Printer};

/// How many undeclared attribute names are remembered for the log line (a
/// provider could invent a new one for every resource).
const MAX_UNDECLARED: usize = 10;

/// The manifest [`Printer`]: a listing, or the resources found by name,
/// streamed as one YAML document under `TYPE:`.
pub struct ManifestPrinter<W: Write> {
    out: W,
    /// The top key: TYPE as the user wrote it.
    type_key: String,
    /// Resources written so far.
    written: usize,
    left_out: LeftOut,
}

/// The attributes left out so far, by reason.
#[derive(Debug, Default)]
struct LeftOut {
    sensitive: BTreeSet<String>,
    /// Attributes only a digest stands for (a file's content too large
    /// or private to show).
    withheld: BTreeSet<String>,
    undeclared: BTreeSet<String>,
    more_undeclared: bool,
    /// By attribute: how many resources, and the first one with why.
    unreadable: BTreeMap<String, (usize, String, String)>,
    /// Resources a manifest cannot name: how many, and why for the first.
    unnamable: Option<(usize, String)>,
}

impl<W: Write> ManifestPrinter<W> {
    /// A manifest whose top key is `type_key`.
    pub fn new(out: W, type_key: &str) -> ManifestPrinter<W> {
        ManifestPrinter {
            out,
            type_key: type_key.to_owned(),
            written: 0,
            left_out: LeftOut::default(),
        }
    }

    fn push(&mut self, provider: &Provider, item: &Resource) -> io::Result<()> {
        if let Err(why) = check_name(&item.name) {
            self.left_out
                .unnamable
                .get_or_insert((0, why.to_string()))
                .0 += 1;
            return Ok(());
        }
        if self.written == 0 {
            yaml::key(&mut self.out, 0, &self.type_key)?;
            writeln!(self.out)?;
        }
        self.written += 1;
        for attribute in provider.meta.attributes.values() {
            let digest_only = attribute.digest.as_ref().is_some_and(|digest| {
                item.attrs.contains_key(digest) && !item.attrs.contains_key(&attribute.name)
            });
            if digest_only {
                self.left_out.withheld.insert(attribute.name.clone());
            }
        }
        let attrs: Vec<(&str, &Value)> = item
            .display_order()
            .into_iter()
            .filter(|(key, value)| self.keeps(provider, &item.name, key, value))
            .collect();
        yaml::key(&mut self.out, 2, &item.name)?;
        if attrs.is_empty() {
            return writeln!(self.out, " {{}}");
        }
        writeln!(self.out)?;
        for (key, value) in attrs {
            yaml::entry(&mut self.out, 4, key, value)?;
        }
        Ok(())
    }

    /// Whether `key` goes into the manifest; remembers why not.
    fn keeps(&mut self, provider: &Provider, resource: &str, key: &str, value: &Value) -> bool {
        let left = &mut self.left_out;
        let Some(attr) = provider.attribute(key) else {
            if left.undeclared.len() < MAX_UNDECLARED {
                left.undeclared.insert(key.to_owned());
            } else if !left.undeclared.contains(key) {
                left.more_undeclared = true;
            }
            return false;
        };
        if attr.kind == Kind::Read {
            return false;
        }
        if attr.sensitive {
            left.sensitive.insert(key.to_owned());
            return false;
        }
        let why = if METAPARAMETERS.contains(&key) {
            format!("in a manifest, '{key}' orders resources and is no attribute")
        } else {
            match attr.attr_type.convert_written(&as_written(value)) {
                Ok(back) if back == *value => return true,
                Ok(back) => format!(
                    "its value {} would read back as {}",
                    human::value(value),
                    human::value(&back)
                ),
                Err(reason) => format!(
                    "its value {} would not read back as {}: {reason}",
                    human::value(value),
                    attr.attr_type
                ),
            }
        };
        left.unreadable
            .entry(key.to_owned())
            .or_insert_with(|| (0, resource.to_owned(), why))
            .0 += 1;
        false
    }

    /// One log line for each reason attributes were left out.
    fn report_left_out(&mut self, provider: &Provider) {
        let left = std::mem::take(&mut self.left_out);
        let label = provider.qualified_name();
        let list = |names: &BTreeSet<String>| {
            names
                .iter()
                .map(|name| escape(name))
                .collect::<Vec<_>>()
                .join(", ")
        };
        if !left.sensitive.is_empty() {
            log::warn!(
                "{label}: sensitive attributes left out of the manifest (their values are \
                 redacted): {}",
                list(&left.sensitive)
            );
        }
        if !left.withheld.is_empty() {
            log::warn!(
                "{label}: attributes too large or private to show left out of the manifest \
                 (only their digest is known): {}",
                list(&left.withheld)
            );
        }
        if !left.undeclared.is_empty() {
            let more = if left.more_undeclared { ", ..." } else { "" };
            log::info!(
                "{label}: attributes the metadata does not declare left out of the manifest: \
                 {}{more}",
                list(&left.undeclared)
            );
        }
        for (attr, (count, first, why)) in left.unreadable {
            log::warn!(
                "{label}: attribute '{}' left out of the manifest for {count} resource(s) \
                 (resource {}: {why})",
                escape(&attr),
                human::quote(&first)
            );
        }
        if let Some((count, why)) = left.unnamable {
            log::warn!(
                "{label}: {count} resource(s) left out of the manifest, which cannot name them \
                 (the first: {why})"
            );
        }
    }
}

/// What the manifest reader gets from the YAML written for `value`: the
/// text of each scalar (strings that read as null are quoted, so only a
/// null is [`Written::Null`]), a list, or a mapping.
fn as_written(value: &Value) -> Written {
    match value {
        Value::Null => Written::Null,
        Value::Array(items) => Written::List(items.iter().map(as_written).collect()),
        Value::Hash(map) => Written::Map(
            map.iter()
                .map(|(key, item)| (key.clone(), as_written(item)))
                .collect(),
        ),
        scalar => Written::Text(yaml::text_of(scalar).expect("a scalar").into_owned()),
    }
}

/// The form shows resources and nothing else: ralsh refuses `--yaml` with
/// `--explain`, without TYPE and with ATTR=VALUE.
fn resources_only() -> io::Error {
    io::Error::new(
        io::ErrorKind::Unsupported,
        "the manifest form shows resources only",
    )
}

impl<'p, W: Write> Printer<'p> for ManifestPrinter<W> {
    fn providers(&mut self, _providers: &[Provider], _long: bool) -> io::Result<()> {
        Err(resources_only())
    }

    fn explain(&mut self, _provider: &Provider) -> io::Result<()> {
        Err(resources_only())
    }

    fn listed(&mut self, provider: &'p Provider, item: &Resource) -> io::Result<()> {
        self.push(provider, item)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    /// Ends the document: `TYPE: {}` when there was no resource (but not
    /// when an error cut the listing short: that is not an empty state).
    fn end_list(&mut self, provider: &'p Provider, error: Option<&str>) -> io::Result<()> {
        if self.written == 0 && error.is_none() {
            yaml::key(&mut self.out, 0, &self.type_key)?;
            writeln!(self.out, " {{}}")?;
        }
        self.report_left_out(provider);
        self.out.flush()
    }

    fn found(
        &mut self,
        provider: &Provider,
        name: &str,
        found: Option<&Resource>,
    ) -> io::Result<()> {
        match found {
            Some(item) => self.push(provider, item),
            None => {
                eprintln!("{}", human::not_found(provider, name));
                Ok(())
            }
        }
    }

    fn outcomes(
        &mut self,
        _provider: &Provider,
        _results: &[(String, Result<Outcome, Error>)],
        _noop: bool,
    ) -> io::Result<()> {
        Err(resources_only())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::AttrType;
    use indexmap::IndexMap;
    use proptest::prelude::*;
    use std::path::Path;

    const METADATA: &str = "---
provider:
  type: t
  invoke: simple
  actions: [list]
  suitable: true
  desc: d
  attributes:
    name: {}
    ensure: {type: 'enum[present, absent]'}
    text: {}
    mode: {type: 'pattern[/^[0-7]{4}$/]'}
    port: {type: 'integer[1, 65535]'}
    ratio: {type: float}
    flag: {type: boolean}
    tags: {type: 'array[string]'}
    ports: {type: 'array[integer]'}
    nested: {type: 'array[array[string]]'}
    labels: {type: hash}
    nice: {type: 'optional[integer]'}
    note: {type: 'optional[string]'}
    maybe_tags: {type: 'optional[array[string]]'}
    size: {type: 'variant[integer, enum[auto]]'}
    either: {type: 'variant[integer, string]'}
    serial: {kind: r}
    secret: {sensitive: true}
    require: {}
";

    fn provider() -> Provider {
        let meta = crate::metadata::Metadata::parse(METADATA, Path::new("t.yaml")).unwrap();
        Provider::new(meta, "t.prov".into(), None)
    }

    fn s(text: &str) -> Value {
        Value::from(text)
    }

    fn array(items: &[Value]) -> Value {
        Value::Array(items.to_vec())
    }

    fn resource(name: &str, attrs: &[(&str, Value)]) -> Resource {
        let mut item = Resource::bare(name);
        for (key, value) in attrs {
            item.attrs.insert((*key).to_owned(), value.clone());
        }
        item
    }

    fn printed(type_key: &str, items: &[Resource]) -> String {
        let provider = provider();
        let mut printer = ManifestPrinter::new(Vec::new(), type_key);
        for item in items {
            printer.listed(&provider, item).unwrap();
        }
        printer.end_list(&provider, None).unwrap();
        String::from_utf8(printer.out).unwrap()
    }

    /// Reads a manifest as `ral plan` does, typing each value by the
    /// attribute's type.
    fn read_manifest(provider: &Provider, text: &str) -> Vec<Resource> {
        let (declared, problems) = crate::converge::manifest::parse(text, Path::new("m.yaml"));
        assert!(problems.is_empty(), "{problems:?}\n{text}");
        declared
            .into_iter()
            .map(|resource| {
                let mut item = Resource::bare(&resource.name);
                assert!(resource.require.is_empty() && resource.before.is_empty());
                for attr in resource.attrs {
                    let ty = &provider.attribute(&attr.name).unwrap().attr_type;
                    let value = ty
                        .convert_written(&attr.value)
                        .unwrap_or_else(|e| panic!("{}: {e}\n{text}", attr.name));
                    item.attrs.insert(attr.name, value);
                }
                item
            })
            .collect()
    }

    #[test]
    fn every_type_reads_back_as_it_was() {
        let labels: IndexMap<String, Value> = [("a: b", "yes"), ("1", "0640"), ("k", "")]
            .iter()
            .map(|(k, v)| ((*k).to_owned(), s(v)))
            .collect();
        let tricky = [
            "yes", "No", "on", "0640", "", " x", "x ", "a: b", "1500", "1e3", "true", "null", "~",
            "- a", "#", "it's", "a\nb", "\ttab", "é", "\u{202e}", "a,b", "[x]", "x[1]",
        ];
        let items: Vec<Resource> = tricky
            .iter()
            .enumerate()
            .map(|(at, text)| {
                resource(
                    &format!("n{text}{at}").replace(['\n', '\t', '\u{202e}'], "_"),
                    &[
                        ("ensure", s("present")),
                        ("text", s(text)),
                        ("mode", s("0640")),
                        ("port", Value::Integer(at as i64 + 1)),
                        ("ratio", Value::Float(at as f64 / 3.0 - 1.0)),
                        ("flag", Value::Bool(at % 2 == 0)),
                        ("tags", array(&[s(text), s("a,b"), s(""), s("yes")])),
                        ("ports", array(&[Value::Integer(22), Value::Integer(80)])),
                        ("nested", array(&[array(&[s(text)]), array(&[])])),
                        ("labels", Value::Hash(Box::new(labels.clone()))),
                        (
                            "nice",
                            if at % 2 == 0 {
                                Value::Null
                            } else {
                                Value::Integer(-5)
                            },
                        ),
                        (
                            "note",
                            if at % 2 == 0 {
                                Value::Null
                            } else {
                                s("a note")
                            },
                        ),
                        (
                            "maybe_tags",
                            if at % 2 == 0 { Value::Null } else { array(&[]) },
                        ),
                        (
                            "size",
                            if at % 2 == 0 {
                                s("auto")
                            } else {
                                Value::Integer(5)
                            },
                        ),
                        ("either", s("word")),
                    ],
                )
            })
            .collect();
        let text = printed("t", &items);
        assert_eq!(read_manifest(&provider(), &text), items, "{text}");
        assert!(text.contains("    text: 'yes'\n"), "{text}");
        assert!(text.contains("    text: '0640'\n"), "{text}");
        assert!(text.contains("    text: 'null'\n"), "{text}");
        assert!(text.contains("    port: 1\n"), "{text}");
        assert!(text.contains("    flag: true\n"), "{text}");
        assert!(text.contains("    nice: null\n"), "{text}");
        assert!(text.contains("    ratio: -1.0\n"), "{text}");
    }

    #[test]
    fn the_document_is_type_name_attributes() {
        let items = [
            resource(
                "alice",
                &[("ensure", s("present")), ("port", Value::Integer(1500))],
            ),
            resource("1500", &[]),
        ];
        assert_eq!(
            printed("host::etc_hosts", &items),
            "host::etc_hosts:\n  alice:\n    ensure: present\n    port: 1500\n  '1500': {}\n"
        );
        assert_eq!(printed("t", &[]), "t: {}\n");
    }

    #[test]
    fn what_a_manifest_cannot_say_is_left_out() {
        let item = resource(
            "a",
            &[
                ("ensure", s("present")),
                ("serial", s("123")),
                ("secret", s("hush")),
                ("bogus", s("x")),
                ("require", s("t[b]")),
                // As a provider could send them: none reads back the same.
                ("note", s("")),
                ("either", Value::Integer(5)),
                ("port", s("eighty")),
                (
                    "labels",
                    Value::Hash(Box::new([("k".to_owned(), Value::Integer(1))].into())),
                ),
            ],
        );
        let unnamable = [" a", "a\nb", "\u{1b}"].map(|name| resource(name, &[]));
        let mut items = vec![item];
        items.extend(unnamable);
        assert_eq!(printed("t", &items), "t:\n  a:\n    ensure: present\n");
        assert_eq!(printed("t", &items[1..]), "t: {}\n");
    }

    #[test]
    fn values_are_written_as_the_reader_reads_them() {
        let ty = |text: &str| AttrType::parse(text).unwrap();
        let back = |t: &str, value: &Value| ty(t).convert_written(&as_written(value));
        assert_eq!(back("optional[string]", &s("")), Ok(Value::Null));
        assert_eq!(back("optional[string]", &Value::Null), Ok(Value::Null));
        assert!(back("variant[integer, string]", &Value::Integer(5)).is_err());
        assert!(back("string", &Value::Null).is_err());
        assert_eq!(back("string", &s("null")), Ok(s("null")));
        assert_eq!(back("float", &Value::Float(1e300)), Ok(Value::Float(1e300)));
        assert_eq!(back("float", &Value::Float(-0.1)), Ok(Value::Float(-0.1)));
    }

    proptest! {
        #[test]
        fn any_text_reads_back(name in "[^\\s\\p{Cc}]([^\\p{Cc}]{0,20}[^\\s\\p{Cc}])?", text in any::<String>()) {
            prop_assume!(check_name(&name).is_ok());
            let item = resource(&name, &[("text", s(&text)), ("tags", array(&[s(&text)]))]);
            let printed = printed("t", std::slice::from_ref(&item));
            prop_assert_eq!(read_manifest(&provider(), &printed), vec![item]);
        }
    }
}
