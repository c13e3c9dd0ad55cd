//! Puppet-style text for people.
//!
//! Values are single-quoted with `\` and `'` escaped, and control characters
//! written as escapes, so a value holding quotes or newlines stays
//! unambiguous and text from a provider cannot drive the terminal. Colour is
//! the caller's decision, passed in as [`Style`].

use std::io::{self, Write};

use crate::error::Error;
use crate::metadata::Attribute;
use crate::provider::Provider;
use crate::resource::{Change, Resource};
use crate::text::{escape, needs_escape};
use crate::types::Value;
use crate::update::Outcome;

/// How to paint the output.
#[derive(Debug, Clone, Copy, Default)]
pub struct Style {
    pub color: bool,
}

/// Names in bold, old values red, new values green.
pub const NAME: anstyle::Style = anstyle::Style::new().bold();
pub const OLD: anstyle::Style = anstyle::AnsiColor::Red.on_default();
pub const NEW: anstyle::Style = anstyle::AnsiColor::Green.on_default();

impl Style {
    pub fn paint(self, style: anstyle::Style, text: &str) -> String {
        if self.color {
            format!("{style}{text}{style:#}")
        } else {
            text.to_owned()
        }
    }
}

/// `'text'` with quotes, backslashes and control characters escaped.
pub fn quote(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('\'');
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\'' => out.push_str("\\'"),
            c if needs_escape(c) => out.push_str(&escape(c.encode_utf8(&mut [0; 4]))),
            // Most characters: no escaping, and no allocation either.
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}

/// A value as Puppet would write it.
pub fn value(value: &Value) -> String {
    match value {
        Value::Null => "undef".to_owned(),
        Value::String(text) => quote(text),
        Value::Bool(flag) => flag.to_string(),
        Value::Integer(number) => number.to_string(),
        Value::Float(number) => format!("{number:?}"),
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(self::value).collect();
            format!("[{}]", items.join(", "))
        }
        Value::Hash(map) => {
            let pairs: Vec<String> = map
                .iter()
                .map(|(key, item)| format!("{} => {}", quote(key), self::value(item)))
                .collect();
            format!("{{{}}}", pairs.join(", "))
        }
    }
}

/// The first sentence of a description, on one line.
fn summary_of(desc: &str) -> String {
    let paragraph = desc.trim().split("\n\n").next().unwrap_or("");
    let line = paragraph.split_whitespace().collect::<Vec<_>>().join(" ");
    match line.find(". ") {
        Some(end) => line[..=end].to_owned(),
        None => line,
    }
}

/// Whether `attr` is sensitive: its values are never shown.
pub fn is_sensitive(provider: &Provider, attr: &str) -> bool {
    provider.attribute(attr).is_some_and(|a| a.sensitive)
}

/// A value, or `[redacted]` for a sensitive attribute (`'' (empty)` for
/// an empty one, which hides nothing: see [`crate::secrets::hides`]); a
/// digest standing for a value too large or private to show, unquoted.
pub fn shown(provider: &Provider, attr: &str, val: &Value) -> String {
    match provider.attribute(attr) {
        Some(attribute) if attribute.sensitive => attribute.show(val),
        _ if is_digest_of(provider, attr, val) => val.to_text(),
        _ => value(val),
    }
}

/// Whether `val` is a digest (`sha256:HEX`) standing for a value of
/// `attr`, which has one: how a value too large or private to show is
/// shown.
fn is_digest_of(provider: &Provider, attr: &str, val: &Value) -> bool {
    let has_digest = provider.attribute(attr).is_some_and(|a| a.digest.is_some());
    let digest = val.as_str().and_then(|text| text.strip_prefix("sha256:"));
    has_digest
        && digest.is_some_and(|hex| hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// What a change shown as digests says after it.
pub fn digest_note(provider: &Provider, change: &Change) -> &'static str {
    match is_digest_of(provider, &change.attr, &change.is) {
        true => " (as checksums: too large or private to show)",
        false => "",
    }
}

/// The line on stderr for a resource that is not there.
pub fn not_found(provider: &Provider, name: &str) -> String {
    format!(
        "ralsh: {}: no resource named {}",
        provider.qualified_name(),
        quote(name)
    )
}

/// The provider list of a bare `ralsh`.
/// One qualified name per line, sorted, as libral printed them (its shell
/// completion reads them); an unsuitable one says why.
pub fn provider_names(out: &mut impl Write, providers: &[Provider]) -> io::Result<()> {
    let mut lines: Vec<String> = providers
        .iter()
        .map(|provider| match &provider.unsuitable {
            None => provider.qualified_name(),
            Some(reason) => format!(
                "{} (unsuitable: {})",
                provider.qualified_name(),
                escape(reason)
            ),
        })
        .collect();
    lines.sort();
    for line in lines {
        writeln!(out, "{line}")?;
    }
    Ok(())
}

/// Providers with their summaries, names aligned, sorted by name as
/// without `-v`.
pub fn providers(out: &mut impl Write, providers: &[Provider], style: Style) -> io::Result<()> {
    let width = providers
        .iter()
        .map(|p| p.qualified_name().len())
        .max()
        .unwrap_or(0);
    let mut sorted: Vec<&Provider> = providers.iter().collect();
    sorted.sort_by_cached_key(|p| p.qualified_name());
    for provider in sorted {
        let name = provider.qualified_name();
        let padding = " ".repeat(width - name.len());
        let summary = match &provider.unsuitable {
            None => escape(&summary_of(&provider.meta.desc)),
            Some(reason) => format!("(unsuitable: {})", escape(reason)),
        };
        let line = format!("{}{padding}  {summary}", style.paint(NAME, &name));
        writeln!(out, "{}", line.trim_end())?;
    }
    Ok(())
}

/// One resource as a Puppet block.
pub fn resource(
    out: &mut impl Write,
    provider: &Provider,
    resource: &Resource,
    style: Style,
) -> io::Result<()> {
    let attrs = resource.display_order();
    let width = attrs.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    writeln!(
        out,
        "{} {{ {}:",
        style.paint(NAME, &provider.qualified_name()),
        quote(&resource.name)
    )?;
    for (key, val) in attrs {
        let padding = " ".repeat(width - key.len());
        writeln!(
            out,
            "  {}{padding} => {},",
            escape(key),
            shown(provider, key, val)
        )?;
    }
    writeln!(out, "}}")
}

/// The changes of an update, one line each.
pub fn changes(
    out: &mut impl Write,
    provider: &Provider,
    changes: &[Change],
    noop: bool,
    style: Style,
) -> io::Result<()> {
    if changes.is_empty() {
        return writeln!(out, "no changes needed");
    }
    for change in changes {
        let was = change.was.as_ref().map_or("(none)".to_owned(), |was| {
            shown(provider, &change.attr, was)
        });
        let line = format!(
            "{}: {} -> {}{}",
            escape(&change.attr),
            style.paint(OLD, &was),
            style.paint(NEW, &shown(provider, &change.attr, &change.is)),
            digest_note(provider, change)
        );
        if noop {
            writeln!(out, "{line} (noop: would change)")?;
        } else {
            writeln!(out, "{line}")?;
        }
    }
    Ok(())
}

/// The resource and changes of an update.
pub fn outcome(
    out: &mut impl Write,
    provider: &Provider,
    outcome: &Outcome,
    style: Style,
) -> io::Result<()> {
    resource(out, provider, &outcome.resource, style)?;
    changes(out, provider, &outcome.changes, outcome.noop, style)
}

/// `--explain`: the provider and each attribute's type, kind, desc, and
/// whether it is required, defaulted or sensitive.
pub fn explain(out: &mut impl Write, provider: &Provider, style: Style) -> io::Result<()> {
    writeln!(out, "{}", style.paint(NAME, &provider.qualified_name()))?;
    writeln!(
        out,
        "  source:   {}",
        escape(&provider.source.to_string_lossy())
    )?;
    let actions: Vec<&str> = provider.meta.actions.iter().map(|a| a.as_str()).collect();
    writeln!(out, "  actions:  {}", actions.join(", "))?;
    let noop = if provider.meta.supports_noop {
        "supported"
    } else {
        "derived by ralsh (update is never called)"
    };
    writeln!(out, "  noop:     {noop}")?;
    for line in provider.meta.desc.lines() {
        writeln!(out, "  {}", escape(line))?;
    }
    writeln!(out, "attributes:")?;
    let attrs: Vec<&Attribute> = provider.meta.attributes.values().collect();
    let name_width = attrs.iter().map(|a| a.name.len()).max().unwrap_or(0);
    let type_width = attrs
        .iter()
        .map(|a| a.attr_type.to_string().len())
        .max()
        .unwrap_or(0);
    for attr in attrs {
        let mut notes = Vec::new();
        if attr.required {
            notes.push("required".to_owned());
        }
        if let Some(default) = &attr.default {
            notes.push(format!("default: {}", shown(provider, &attr.name, default)));
        }
        if attr.sensitive {
            notes.push("sensitive".to_owned());
        }
        let notes = if notes.is_empty() {
            String::new()
        } else {
            format!(" ({})", notes.join("; "))
        };
        let line = format!(
            "  {:name_width$}  {:type_width$}  {:4}  {}{notes}",
            attr.name,
            attr.attr_type.to_string(),
            attr.kind.as_str(),
            escape(attr.desc.trim())
        );
        writeln!(out, "{}", line.trim_end())?;
    }
    writeln!(
        out,
        "kinds: r read-only, w write-only parameter, rw read-write, init set at creation only, \
         refresh told to refreshes only"
    )
}

/// The human [`Printer`](super::Printer): Puppet-style text.
pub struct HumanPrinter<W: Write> {
    out: W,
    style: Style,
}

impl<W: Write> HumanPrinter<W> {
    pub fn new(out: W, style: Style) -> HumanPrinter<W> {
        HumanPrinter { out, style }
    }
}

impl<'p, W: Write> super::Printer<'p> for HumanPrinter<W> {
    fn providers(&mut self, all: &[Provider], long: bool) -> io::Result<()> {
        if long {
            providers(&mut self.out, all, self.style)
        } else {
            provider_names(&mut self.out, all)
        }
    }

    fn explain(&mut self, provider: &Provider) -> io::Result<()> {
        explain(&mut self.out, provider, self.style)
    }

    fn listed(&mut self, provider: &'p Provider, item: &Resource) -> io::Result<()> {
        resource(&mut self.out, provider, item, self.style)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    fn end_list(&mut self, _provider: &'p Provider, _error: Option<&str>) -> io::Result<()> {
        // What was listed before an error is shown; the error itself goes
        // to stderr.
        self.out.flush()
    }

    fn found(
        &mut self,
        provider: &Provider,
        name: &str,
        found: Option<&Resource>,
    ) -> io::Result<()> {
        match found {
            Some(item) => resource(&mut self.out, provider, item, self.style),
            None => {
                eprintln!("{}", not_found(provider, name));
                Ok(())
            }
        }
    }

    fn outcomes(
        &mut self,
        provider: &Provider,
        results: &[(String, Result<Outcome, Error>)],
        _noop: bool,
    ) -> io::Result<()> {
        for (_, result) in results {
            if let Ok(done) = result {
                outcome(&mut self.out, provider, done, self.style)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_keeps_values_unambiguous() {
        assert_eq!(quote("it's"), "'it\\'s'");
        assert_eq!(quote("a\\b"), "'a\\\\b'");
        assert_eq!(quote("l1\nl2\x1b"), "'l1\\nl2\\u{1b}'");
        assert_eq!(quote("é\tü\u{202e}x"), "'é\\tü\\u{202e}x'");
        assert_eq!(
            value(&Value::Array(vec!["a".into(), "b c".into()])),
            "['a', 'b c']"
        );
        assert_eq!(value(&Value::Bool(true)), "true");
    }
}
