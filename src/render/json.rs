//! libral's JSON shapes, for programs. Every document is described by
//! `schemas/ralsh-output.schema.json`.

use std::io::{self, Write};

use serde_json::{json, Map, Value as Json};

use crate::error::Error;
use crate::provider::Provider;
use crate::resource::Resource;
use crate::secrets::{hides, REDACTED};

use super::Printer;
use crate::types::Value;
use crate::update::Outcome;

/// `{"providers": [...]}`, sorted by name as the text forms are.
pub fn providers(providers: &[Provider]) -> Json {
    let mut sorted: Vec<&Provider> = providers.iter().collect();
    sorted.sort_by_cached_key(|p| p.qualified_name());
    let list: Vec<Json> = sorted
        .into_iter()
        .map(|p| {
            let attributes: Vec<Json> = p
                .meta
                .attributes
                .values()
                .map(|a| {
                    let mut entry = json!({
                        "name": a.name,
                        "desc": a.desc,
                        "type": a.attr_type.to_string(),
                        "kind": a.kind.as_str(),
                    });
                    if a.required {
                        entry["required"] = Json::Bool(true);
                    }
                    if a.sensitive {
                        entry["sensitive"] = Json::Bool(true);
                    }
                    if let Some(default) = &a.default {
                        entry["default"] = shown(p, &a.name, default);
                    }
                    entry
                })
                .collect();
            json!({
                "name": p.qualified_name(),
                "type": p.type_name(),
                "source": p.source.to_string_lossy(),
                "desc": p.meta.desc,
                "suitable": p.is_suitable(),
                "attributes": attributes,
            })
        })
        .collect();
    json!({ "providers": list })
}

/// One resource with its `ral` block.
pub fn resource(provider: &Provider, resource: &Resource) -> Json {
    let mut map = Map::new();
    map.insert("name".to_owned(), Json::from(resource.name.as_str()));
    for (key, value) in resource.display_order() {
        map.insert(key.to_owned(), shown(provider, key, value));
    }
    map.insert(
        "ral".to_owned(),
        json!({ "type": provider.type_name(), "provider": provider.qualified_name() }),
    );
    Json::Object(map)
}

/// Writes what [`resource`] builds, without building it.
struct ResourceJson<'a> {
    shape: &'a ProviderShape<'a>,
    item: &'a Resource,
}

/// What every resource of one provider shares in the JSON output, worked
/// out once per listing rather than once per resource.
struct ProviderShape<'a> {
    provider: &'a Provider,
    ral: RalBlock<'a>,
    /// Whether any attribute is sensitive (when none is, no lookups).
    redacts: bool,
}

impl<'a> ProviderShape<'a> {
    fn of(provider: &'a Provider) -> ProviderShape<'a> {
        ProviderShape {
            provider,
            ral: RalBlock {
                kind: provider.type_name(),
                provider: provider.qualified_name(),
            },
            redacts: provider.meta.attributes.values().any(|a| a.sensitive),
        }
    }

    fn is_sensitive(&self, attr: &str) -> bool {
        self.redacts && self.provider.attribute(attr).is_some_and(|a| a.sensitive)
    }
}

impl serde::Serialize for ResourceJson<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let attrs = self.item.display_order();
        let ral = &self.shape.ral;
        let mut map = serializer.serialize_map(Some(attrs.len() + 2))?;
        map.serialize_entry("name", &self.item.name)?;
        // As in `resource`, an attribute called `ral` gives its place to
        // the `ral` block.
        let mut ral_written = false;
        for (key, value) in attrs {
            if key == "ral" {
                map.serialize_entry("ral", &ral)?;
                ral_written = true;
            } else if self.shape.is_sensitive(key) && hides(value) {
                map.serialize_entry(key, REDACTED)?;
            } else {
                map.serialize_entry(key, value)?;
            }
        }
        if !ral_written {
            map.serialize_entry("ral", &ral)?;
        }
        map.end()
    }
}

#[derive(serde::Serialize)]
struct RalBlock<'a> {
    #[serde(rename = "type")]
    kind: &'a str,
    provider: String,
}

/// A value, or `"[redacted]"` for a sensitive attribute (unless empty:
/// see [`hides`]).
fn shown(provider: &Provider, attr: &str, value: &Value) -> Json {
    provider.shown_json(attr, value)
}

/// One entry of `result`: the resource and its changes, or, when that
/// resource failed in a batch, its name and the error.
fn result_entry(provider: &Provider, name: &str, outcome: &Result<Outcome, Error>) -> Json {
    let outcome = match outcome {
        Ok(outcome) => outcome,
        Err(error) => {
            let message = error.to_string();
            return json!({ "name": name, "error": { "message": message } });
        }
    };
    json!({
        "resource": resource(provider, &outcome.resource),
        "changes": provider.changes_json(&outcome.changes),
    })
}

/// `{"result": [...]}` for one or more updates, with `"noop": true` on a
/// preview.
pub fn outcomes(
    provider: &Provider,
    results: &[(String, Result<Outcome, Error>)],
    noop: bool,
) -> Json {
    let entries: Vec<Json> = results
        .iter()
        .map(|(name, outcome)| result_entry(provider, name, outcome))
        .collect();
    let mut doc = json!({ "result": entries });
    if noop {
        doc["noop"] = Json::Bool(true);
    }
    doc
}

/// `{"error": {"message": ...}}`, with the provider's `kind` when it gave
/// one (unknown, forbidden, failed).
pub fn error(message: &str, kind: Option<&str>) -> Json {
    let mut doc = json!({ "error": { "message": message } });
    if let Some(kind) = kind {
        doc["error"]["kind"] = Json::from(kind);
    }
    doc
}

/// Writes `{"resources": [...]}` one resource at a time, so a listing is
/// never held in memory. The document is opened with the first resource:
/// when the listing fails before any, [`finish`] writes the plain
/// `{"error": ...}` document; when it fails midway, the error goes beside the
/// resources already written, keeping the document valid.
///
/// [`finish`]: ResourceStream::finish
pub struct ResourceStream<'p, W: Write> {
    out: W,
    shape: ProviderShape<'p>,
    count: usize,
}

impl<'p, W: Write> ResourceStream<'p, W> {
    /// A stream of `provider`'s resources.
    pub fn new(out: W, provider: &'p Provider) -> ResourceStream<'p, W> {
        ResourceStream {
            out,
            shape: ProviderShape::of(provider),
            count: 0,
        }
    }

    /// The writer, for flushing between resources.
    pub fn get_mut(&mut self) -> &mut W {
        &mut self.out
    }

    pub fn push(&mut self, item: &Resource) -> io::Result<()> {
        self.out.write_all(if self.count == 0 {
            b"{\"resources\": [\n  "
        } else {
            b",\n  "
        })?;
        let shape = &self.shape;
        serde_json::to_writer(&mut self.out, &ResourceJson { shape, item })?;
        self.count += 1;
        Ok(())
    }

    /// Ends the document (with the error that cut the listing short, if
    /// any) and gives the writer back.
    /// Ends the document (and flushes); the writer stays with the stream,
    /// also when writing failed ([`ResourceStream::into_inner`]).
    pub fn finish(&mut self, error_message: Option<&str>) -> io::Result<()> {
        match (self.count, error_message) {
            (0, None) => self.out.write_all(b"{\"resources\": []}\n")?,
            (0, Some(message)) => writeln!(self.out, "{}", error(message, None))?,
            (_, None) => self.out.write_all(b"\n]}\n")?,
            (_, Some(message)) => {
                self.out.write_all(b"\n], \"error\": ")?;
                serde_json::to_writer(&mut self.out, &json!({ "message": message }))?;
                self.out.write_all(b"}\n")?;
            }
        }
        self.out.flush()
    }

    pub fn into_inner(self) -> W {
        self.out
    }
}

/// The JSON [`Printer`]: libral's documents, a listing streamed.
pub struct JsonPrinter<'p, W: Write> {
    /// The writer, while no listing holds it.
    out: Option<W>,
    list: Option<ResourceStream<'p, W>>,
}

impl<'p, W: Write> JsonPrinter<'p, W> {
    pub fn new(out: W) -> JsonPrinter<'p, W> {
        JsonPrinter {
            out: Some(out),
            list: None,
        }
    }

    fn out(&mut self) -> &mut W {
        match (&mut self.out, &mut self.list) {
            (Some(out), _) => out,
            (None, Some(list)) => list.get_mut(),
            (None, None) => unreachable!("the writer is held by the printer or its listing"),
        }
    }
}

impl<'p, W: Write> Printer<'p> for JsonPrinter<'p, W> {
    fn providers(&mut self, all: &[Provider], _long: bool) -> io::Result<()> {
        writeln!(self.out(), "{}", providers(all))
    }

    fn explain(&mut self, provider: &Provider) -> io::Result<()> {
        writeln!(self.out(), "{}", providers(std::slice::from_ref(provider)))
    }

    fn listed(&mut self, provider: &'p Provider, item: &Resource) -> io::Result<()> {
        if self.list.is_none() {
            let out = self.out.take().expect("no listing holds the writer yet");
            self.list = Some(ResourceStream::new(out, provider));
        }
        self.list.as_mut().expect("a listing").push(item)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out().flush()
    }

    fn end_list(&mut self, provider: &'p Provider, error: Option<&str>) -> io::Result<()> {
        let mut stream = match self.list.take() {
            Some(stream) => stream,
            None => ResourceStream::new(self.out.take().expect("the writer"), provider),
        };
        // The writer comes back whatever happened, so that a closed stdout
        // is an error to report, not a writer lost.
        let finished = stream.finish(error);
        self.out = Some(stream.into_inner());
        finished
    }

    fn found(
        &mut self,
        provider: &Provider,
        _name: &str,
        found: Option<&Resource>,
    ) -> io::Result<()> {
        match found {
            Some(item) => writeln!(
                self.out(),
                "{}",
                json!({ "resource": resource(provider, item) })
            ),
            None => writeln!(self.out(), "{{}}"),
        }
    }

    fn outcomes(
        &mut self,
        provider: &Provider,
        results: &[(String, Result<Outcome, Error>)],
        noop: bool,
    ) -> io::Result<()> {
        writeln!(self.out(), "{}", outcomes(provider, results, noop))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn the_streamed_form_equals_the_built_one() {
        let yaml = "---\nprovider:\n  type: t\n  invoke: simple\n  actions: [list]\n  suitable: true\n  desc: d\n  attributes:\n    name: {}\n    ensure: {}\n    secret: {sensitive: true}\n    n: {type: integer}\n";
        let meta = crate::metadata::Metadata::parse(yaml, Path::new("t.yaml")).unwrap();
        let provider = Provider::new(meta, "t.prov".into(), None);
        let mut item = Resource::bare("x");
        item.attrs.insert("secret".into(), Value::from("hush"));
        item.attrs.insert("n".into(), Value::Integer(3));
        item.attrs.insert("ensure".into(), Value::from("present"));
        item.attrs.insert("ral".into(), Value::Float(f64::NAN));
        let built = serde_json::to_string(&resource(&provider, &item)).unwrap();
        let streamed = serde_json::to_string(&ResourceJson {
            shape: &ProviderShape::of(&provider),
            item: &item,
        })
        .unwrap();
        assert_eq!(streamed, built);
        assert!(!streamed.contains("hush"));
    }

    /// A stdout whose reader has gone: every write fails as a closed pipe
    /// does.
    struct Closed;

    impl Write for Closed {
        fn write(&mut self, _: &[u8]) -> io::Result<usize> {
            Err(io::ErrorKind::BrokenPipe.into())
        }

        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_listing_that_cannot_be_ended_keeps_the_writer_for_what_follows() {
        // `ralsh -j TYPE | head -c 5`: the end of the listing meets the
        // closed pipe; the error is reported, and flushing afterwards (as
        // ralsh does on its way out) must not find the writer gone.
        let yaml = "---\nprovider:\n  type: t\n  invoke: simple\n  actions: [list]\n  suitable: true\n  desc: d\n  attributes:\n    name: {}\n";
        let meta = crate::metadata::Metadata::parse(yaml, Path::new("t.yaml")).unwrap();
        let provider = Provider::new(meta, "t.prov".into(), None);
        let item = Resource::bare("x");
        let mut printer = JsonPrinter::new(io::BufWriter::new(Closed));
        printer.listed(&provider, &item).unwrap();
        let ended = printer.end_list(&provider, None).unwrap_err();
        assert_eq!(ended.kind(), io::ErrorKind::BrokenPipe);
        let flushed = printer.flush().unwrap_err();
        assert_eq!(flushed.kind(), io::ErrorKind::BrokenPipe);
    }
}
