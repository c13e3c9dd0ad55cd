//! The simple calling convention: `key=value` arguments in, `# simple`
//! output back.
//!
//! The parsers here are fed one line at a time, so a listing is turned into
//! resources while the provider is still writing it and memory does not grow
//! with the number of resources. [`SimpleConvention`] is the convention's three
//! operations: list, get (one find per name, or a listing where the
//! provider has no find) and set (one update call per resource).

use std::cell::RefCell;
use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::sync::Mutex;

use super::{require, Invocation, OutputError, Runner, Update, UpdateAnswer};
use crate::error::{Error, Result};
use crate::metadata::{Action, SensitiveIn, SENSITIVE_VAR};
use crate::output_check::Raw;
use crate::process::Budget;
use crate::provider::Provider;
use crate::quoting::assignment;
use crate::resource::{Change, Resource, ResourceSink};
use crate::secrets::REDACTED;
use crate::text::escape;
use crate::types::Value;

/// A resource as the provider wrote it: its name and untyped key/value
/// pairs, in order. All of it lives in one buffer (name, then each key and
/// value), so a resource costs two allocations however many attributes it
/// has; the typed conversion copies what it keeps anyway.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawResource {
    text: String,
    name_len: usize,
    /// Where each attribute's key ends and its value ends in `text`.
    ends: Vec<(usize, usize)>,
}

impl RawResource {
    /// A resource with no attributes yet, with room for about `text` bytes
    /// and `attrs` attributes.
    fn with_capacity(name: &str, text: usize, attrs: usize) -> RawResource {
        let mut buffer = String::with_capacity(text.max(name.len()));
        buffer.push_str(name);
        RawResource {
            text: buffer,
            name_len: name.len(),
            ends: Vec::with_capacity(attrs),
        }
    }

    fn push(&mut self, key: &str, value: &str) {
        self.text.push_str(key);
        let key_end = self.text.len();
        self.text.push_str(value);
        self.ends.push((key_end, self.text.len()));
    }

    pub fn name(&self) -> &str {
        &self.text[..self.name_len]
    }

    /// The value of a `ral_*` marker such as `ral_unknown`.
    pub fn marker(&self, key: &str) -> Option<&str> {
        self.attrs().find(|(k, _)| *k == key).map(|(_, v)| v)
    }

    /// The `key: value` pairs after the name line, in order.
    pub fn attrs(&self) -> impl Iterator<Item = (&str, &str)> {
        let mut start = self.name_len;
        self.ends.iter().map(move |&(key_end, value_end)| {
            let pair = (&self.text[start..key_end], &self.text[key_end..value_end]);
            start = value_end;
            pair
        })
    }
}

/// Builds the argument vector for one call.
pub fn arguments<'a>(
    action: Action,
    name: Option<&str>,
    attrs: impl IntoIterator<Item = (&'a str, &'a Value)>,
    noop: bool,
) -> Vec<String> {
    let mut args = vec![format!("ral_action={action}")];
    if let Some(name) = name {
        args.push(assignment("name", name));
    }
    args.extend(attrs.into_iter().map(|(key, value)| argument(key, value)));
    if noop {
        args.push("ral_noop=true".to_owned());
    }
    args
}

/// One `key=value` argument. Scalars are one quoted word; arrays and hashes
/// are written `key=(word word)`, so that bash's `eval "$@"` makes a real
/// array, and a Python provider recovers the list with
/// `shlex.split(raw[1:-1])` on the argument (see docs/providers.md).
pub fn argument(key: &str, value: &Value) -> String {
    match value {
        Value::Array(_) | Value::Hash(_) => format!("{key}=({})", value.shell_words().join(" ")),
        scalar => assignment(key, &scalar.to_text()),
    }
}

/// `text` without leading and trailing whitespace, exactly as `str::trim`
/// has it, but without decoding characters when both ends are plain ASCII
/// (nearly always): this runs three times per line of every listing.
fn trim(text: &str) -> &str {
    let trimmed = text.trim_ascii();
    let unsure = |byte: Option<&u8>| byte.is_some_and(|&b| b >= 0x80 || b == 0x0b);
    let bytes = trimmed.as_bytes();
    if unsure(bytes.first()) || unsure(bytes.last()) {
        // Non-ASCII whitespace (U+00A0, U+3000, ...) or a vertical tab,
        // which `trim_ascii` keeps.
        trimmed.trim()
    } else {
        trimmed
    }
}

/// Splits output into `key: value` pairs, handling the header and
/// `ral_error` ... `ral_eom` blocks.
#[derive(Debug, Default)]
struct Lines {
    line_no: usize,
    header_seen: bool,
    error: Option<String>,
    error_closed: bool,
}

/// A `key: value` line with its line number.
struct Pair<'a> {
    key: &'a str,
    value: &'a str,
    line_no: usize,
}

impl Lines {
    fn feed<'a>(&mut self, raw: &'a str) -> Result<Option<Pair<'a>>, OutputError> {
        self.line_no += 1;
        let line = trim(raw);
        if let Some(message) = &mut self.error {
            // Inside an error message everything up to `ral_eom` is text, and
            // everything after it is disregarded.
            if self.error_closed {
            } else if line == "ral_eom" {
                self.error_closed = true;
            } else {
                message.push('\n');
                message.push_str(raw.trim_end());
            }
            return Ok(None);
        }
        if line.is_empty() {
            return Ok(None);
        }
        if !self.header_seen {
            if line == "# simple" {
                self.header_seen = true;
                return Ok(None);
            }
            return Err(OutputError::Protocol(format!(
                "line {}: expected '# simple' as the first line, found '{}'",
                self.line_no,
                escape(line)
            )));
        }
        let Some((key, value)) = line.split_once(':') else {
            return Err(OutputError::Protocol(format!(
                "line {}: expected 'key: value', found '{}'",
                self.line_no,
                escape(line)
            )));
        };
        let key = trim(key);
        let value = trim(value);
        if key.is_empty() {
            return Err(OutputError::Protocol(format!(
                "line {}: empty key in '{}'",
                self.line_no,
                escape(line)
            )));
        }
        if key == "ral_error" {
            self.error = Some(value.to_owned());
            return Ok(None);
        }
        if key == "ral_eom" {
            return Ok(None);
        }
        Ok(Some(Pair {
            key,
            value,
            line_no: self.line_no,
        }))
    }

    fn finish(&self) -> Result<(), OutputError> {
        if let Some(message) = &self.error {
            return Err(OutputError::Reported(message.trim().to_owned()));
        }
        if !self.header_seen {
            return Err(OutputError::Protocol(
                "the output is empty; expected '# simple' as the first line".to_owned(),
            ));
        }
        Ok(())
    }
}

/// Parses list and find output into resources, one at a time.
#[derive(Debug, Default)]
pub struct ListParser {
    lines: Lines,
    current: Option<RawResource>,
}

impl ListParser {
    /// Feeds one line; returns a resource when the line completed one.
    pub fn feed(&mut self, raw: &str) -> Result<Option<RawResource>, OutputError> {
        let Some(pair) = self.lines.feed(raw)? else {
            return Ok(None);
        };
        if pair.key == "name" {
            // Sized like the previous resource: listings are uniform.
            let (text, attrs) = self
                .current
                .as_ref()
                .map_or((0, 0), |r| (r.text.len(), r.ends.len()));
            let next = RawResource::with_capacity(pair.value, text, attrs);
            return Ok(self.current.replace(next));
        }
        match &mut self.current {
            Some(resource) => {
                resource.push(pair.key, pair.value);
                Ok(None)
            }
            None => Err(OutputError::Protocol(format!(
                "line {}: attribute '{}' comes before any 'name:' line",
                pair.line_no,
                escape(pair.key)
            ))),
        }
    }

    /// Ends the output; returns the last resource, or the reported error.
    pub fn finish(mut self) -> Result<Option<RawResource>, OutputError> {
        self.lines.finish()?;
        Ok(self.current.take())
    }
}

/// One change an update reported, still untyped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReportedChange {
    pub attr: String,
    pub is: String,
    pub was: Option<String>,
}

/// What an update call answered.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UpdateReport {
    pub changes: Vec<ReportedChange>,
    /// `ral_derive: true`: derive changes for attributes not mentioned.
    pub derive: bool,
}

/// Parses update output for the resource `name`.
#[derive(Debug)]
pub struct UpdateParser {
    lines: Lines,
    name: String,
    unknown: bool,
    report: UpdateReport,
}

impl UpdateParser {
    pub fn new(name: &str) -> UpdateParser {
        UpdateParser {
            lines: Lines::default(),
            name: name.to_owned(),
            unknown: false,
            report: UpdateReport::default(),
        }
    }

    pub fn feed(&mut self, raw: &str) -> Result<(), OutputError> {
        let Some(pair) = self.lines.feed(raw)? else {
            return Ok(());
        };
        match pair.key {
            "name" if pair.value != self.name => Err(OutputError::Protocol(format!(
                "line {}: update of '{}' answered for '{}'",
                pair.line_no,
                escape(&self.name),
                escape(pair.value)
            ))),
            "name" => Ok(()),
            "ral_was" => match self.report.changes.last_mut() {
                Some(change) if change.was.is_none() => {
                    change.was = Some(pair.value.to_owned());
                    Ok(())
                }
                Some(change) => Err(OutputError::Protocol(format!(
                    "line {}: a second ral_was for '{}'",
                    pair.line_no, change.attr
                ))),
                None => Err(OutputError::Protocol(format!(
                    "line {}: ral_was comes before any changed attribute",
                    pair.line_no
                ))),
            },
            "ral_derive" => {
                self.report.derive = pair.value == "true";
                Ok(())
            }
            "ral_unknown" => {
                self.unknown = pair.value == "true";
                Ok(())
            }
            key if key.starts_with("ral_") => {
                log::debug!("ignoring '{key}' in update output");
                Ok(())
            }
            key => {
                self.report.changes.push(ReportedChange {
                    attr: key.to_owned(),
                    is: pair.value.to_owned(),
                    was: None,
                });
                Ok(())
            }
        }
    }

    pub fn finish(self) -> Result<UpdateReport, OutputError> {
        self.lines.finish()?;
        if self.unknown {
            return Err(OutputError::Reported(format!(
                "resource '{}' does not exist and cannot be created",
                escape(&self.name)
            )));
        }
        Ok(self.report)
    }
}

/// The simple convention.
pub struct SimpleConvention;

impl super::Convention for SimpleConvention {
    fn list(
        &self,
        runner: &dyn Runner,
        provider: &Provider,
        sink: &mut dyn ResourceSink,
    ) -> Result<()> {
        let mut parser = ListParser::default();
        let fail = |e: OutputError| e.into_error(provider, Action::List);
        // Both callbacks of the run hand over to the one sink.
        let sink = RefCell::new(sink);
        runner.run(
            &provider.qualified_name(),
            &provider.source,
            Invocation::to(
                provider,
                Action::List,
                arguments(Action::List, None, [], false),
            ),
            &mut |line| match parser.feed(line).map_err(fail)? {
                Some(raw) => {
                    let resource = typed(runner, provider, Action::List, raw)?;
                    sink.borrow_mut().resource(resource)?;
                    Ok(Budget::Reset)
                }
                None => Ok(Budget::Continue),
            },
            &mut || sink.borrow_mut().idle(),
        )?;
        if let Some(raw) = parser.finish().map_err(fail)? {
            let resource = typed(runner, provider, Action::List, raw)?;
            sink.into_inner().resource(resource)?;
        }
        Ok(())
    }

    /// The simple convention carries no manifest values in a find (no
    /// provider of it runs commands): `should` is not told.
    fn get_with_should(
        &self,
        runner: &dyn Runner,
        provider: &Provider,
        names: &[&str],
        _should: &[&[(String, crate::types::Value)]],
    ) -> Result<Vec<Result<Option<Resource>>>> {
        if !provider.meta.supports(Action::Find) {
            // One listing answers for every name, each matched through a
            // map (a plan asks for thousands); the first listed wins.
            let mut found: Vec<Option<Resource>> = vec![None; names.len()];
            let mut slots: HashMap<&str, Vec<usize>> = HashMap::with_capacity(names.len());
            for (at, name) in names.iter().enumerate() {
                slots.entry(name).or_default().push(at);
            }
            self.list(runner, provider, &mut |resource: Resource| {
                if let Some(at) = slots.remove(resource.name.as_str()) {
                    for at in at {
                        found[at] = Some(resource.clone());
                    }
                }
                Ok(())
            })?;
            return Ok(found.into_iter().map(Ok).collect());
        }
        Ok(names
            .iter()
            .map(|name| find(runner, provider, name))
            .collect())
    }

    fn set_many(
        &self,
        runner: &dyn Runner,
        provider: &Provider,
        updates: &[Update],
        noop: bool,
    ) -> Result<Vec<Result<UpdateAnswer>>> {
        require(provider, Action::Update)?;
        Ok(updates
            .iter()
            .map(|update| update_one(runner, provider, update, noop))
            .collect())
    }

    /// `ral_action=refresh name=N attr=V...`; the answer is `# simple`
    /// alone, or a `ral_error`.
    fn refresh(
        &self,
        runner: &dyn Runner,
        provider: &Provider,
        name: &str,
        attrs: &[(String, Value)],
    ) -> Result<()> {
        require(provider, Action::Refresh)?;
        let told = super::refresh_attrs(provider, attrs).map(|(k, v)| (k.as_str(), v));
        let args = arguments(Action::Refresh, Some(name), told, false);
        let secrets = super::told_secrets(provider, attrs);
        let fail = |e: OutputError| e.redacted(&secrets).into_error(provider, Action::Refresh);
        let invocation = Invocation {
            secrets: secrets.clone(),
            ..Invocation::to(provider, Action::Refresh, args)
        };
        let report = update_answer(runner, provider, name, invocation, &fail)?;
        match report.changes.first() {
            Some(change) => Err(fail(OutputError::Protocol(format!(
                "refresh of '{}' reported a change of '{}': a refresh changes no attribute",
                escape(name),
                escape(&change.attr)
            )))),
            None => Ok(()),
        }
    }
}

/// One find call: the resource, or `None` when the provider does not know
/// it (`ral_unknown: true`).
fn find(runner: &dyn Runner, provider: &Provider, name: &str) -> Result<Option<Resource>> {
    let mut parser = ListParser::default();
    let mut resources = Vec::new();
    let fail = |e: OutputError| e.into_error(provider, Action::Find);
    runner.run(
        &provider.qualified_name(),
        &provider.source,
        Invocation::to(
            provider,
            Action::Find,
            arguments(Action::Find, Some(name), [], false),
        ),
        &mut |line| {
            resources.extend(parser.feed(line).map_err(fail)?);
            Ok(Budget::Continue)
        },
        &mut || Ok(()),
    )?;
    resources.extend(parser.finish().map_err(fail)?);
    let mut answer = None;
    for raw in resources {
        if raw.name() != name {
            return Err(fail(OutputError::Protocol(format!(
                "find for '{}' answered with '{}'",
                escape(name),
                escape(raw.name())
            ))));
        }
        if answer.is_some() {
            return Err(fail(OutputError::Protocol(format!(
                "find for '{}' answered with several resources",
                escape(name)
            ))));
        }
        answer = Some(raw);
    }
    answer
        .filter(|raw| raw.marker("ral_unknown") != Some("true"))
        .map(|raw| typed(runner, provider, Action::Find, raw))
        .transpose()
}

/// Runs `invocation` and reads its answer as an update's about `name`
/// (an update's, or a refresh's, which must report no change); `fail`
/// makes the error of an answer against the convention.
fn update_answer(
    runner: &dyn Runner,
    provider: &Provider,
    name: &str,
    invocation: Invocation,
    fail: &dyn Fn(OutputError) -> Error,
) -> Result<UpdateReport> {
    let mut parser = UpdateParser::new(name);
    runner.run(
        &provider.qualified_name(),
        &provider.source,
        invocation,
        &mut |line| {
            parser.feed(line).map_err(fail)?;
            Ok(Budget::Continue)
        },
        &mut || Ok(()),
    )?;
    parser.finish().map_err(fail)
}

/// One update call with exactly the update's attributes.
fn update_one(
    runner: &dyn Runner,
    provider: &Provider,
    update: &Update,
    noop: bool,
) -> Result<UpdateAnswer> {
    let secrets = update.secrets(provider);
    let name = update.name;
    let fail = |e: OutputError| e.redacted(&secrets).into_error(provider, Action::Update);
    let is_sensitive = |key: &str| provider.attribute(key).is_some_and(|a| a.sensitive);
    let in_env = |key: &str| provider.meta.sensitive_in == SensitiveIn::Env && is_sensitive(key);
    let on_command_line = || {
        update
            .should
            .iter()
            .filter(|(k, _)| !in_env(k))
            .map(|(k, v)| (k.as_str(), v))
    };
    let args = arguments(Action::Update, Some(name), on_command_line(), noop);
    if on_command_line().any(|(k, _)| is_sensitive(k)) {
        warn_visible(provider);
    }
    let env = environment(provider, update.should.iter().filter(|(k, _)| in_env(k)))?;
    let hidden = Value::String(REDACTED.to_owned());
    let shown = arguments(
        Action::Update,
        Some(name),
        on_command_line().map(|(k, v)| (k, if is_sensitive(k) { &hidden } else { v })),
        noop,
    );
    let invocation = Invocation {
        shown,
        env,
        secrets: secrets.clone(),
        ..Invocation::to(provider, Action::Update, args)
    };
    let report = update_answer(runner, provider, name, invocation, &fail)?;
    let value = |attr: &str, text: &str| {
        runner
            .check()
            .value(provider, Action::Update, name, attr, Raw::Text(text))
    };
    let changes = report
        .changes
        .into_iter()
        .map(|change| {
            Ok(Change {
                is: value(&change.attr, &change.is)?,
                was: change
                    .was
                    .map(|was| value(&change.attr, &was))
                    .transpose()?,
                attr: change.attr,
            })
        })
        .collect::<Result<_>>()?;
    Ok(UpdateAnswer {
        changes,
        derive: report.derive,
    })
}

/// The environment variables of a `sensitive_in: env` call: each sensitive
/// value under its attribute's name, as its text, and [`SENSITIVE_VAR`]
/// naming them; nothing when there are none. (Metadata made sure the names
/// are shell variable names of no other use and the values are scalars.)
fn environment<'a>(
    provider: &Provider,
    sensitive: impl Iterator<Item = &'a (String, Value)>,
) -> Result<Vec<(String, String)>> {
    let mut env = Vec::new();
    for (key, value) in sensitive {
        let text = value.to_text();
        // No variable can hold a NUL, as no argument can.
        if text.contains('\0') {
            return Err(Error::Request {
                provider: provider.qualified_name(),
                message: format!(
                    "the value of the sensitive attribute '{key}' holds a NUL character, which \
                     no environment variable can hold"
                ),
            });
        }
        env.push((key.clone(), text));
    }
    if !env.is_empty() {
        let names: Vec<&str> = env.iter().map(|(key, _)| key.as_str()).collect();
        let names = names.join(" ");
        env.push((SENSITIVE_VAR.to_owned(), names));
    }
    Ok(env)
}

/// The providers already warned about in this process.
static WARNED: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());

/// Warns, once per provider in a run, that the sensitive values it is
/// given on its command line are visible to every user.
fn warn_visible(provider: &Provider) {
    let label = provider.qualified_name();
    let first = WARNED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(label.clone());
    if first {
        log::warn!(
            "{label}: its sensitive values are passed on its command line, which every user of \
             this machine can read in /proc while it runs; a provider that reads them from its \
             environment says so with 'sensitive_in: env' under 'provider:' in its metadata \
             ({})",
            provider.source.display()
        );
    }
}

/// A listed or found resource, typed against the metadata.
fn typed(
    runner: &dyn Runner,
    provider: &Provider,
    action: Action,
    raw: RawResource,
) -> Result<Resource> {
    runner.check().resource(
        provider,
        action,
        raw.name(),
        raw.attrs().map(|(k, v)| (k, Raw::Text(v))),
    )
}

/// Runs `X.prov ral_action=describe` and returns its YAML. Any output on
/// stderr counts as failure, as a describe must be clean.
pub fn describe(runner: &dyn Runner, label: &str, program: &Path) -> Result<String> {
    let mut text = String::new();
    let finished = runner.run(
        label,
        program,
        Invocation::plain(
            Action::Describe,
            arguments(Action::Describe, None, [], false),
        ),
        &mut |line| {
            text.push_str(line);
            text.push('\n');
            Ok(Budget::Continue)
        },
        &mut || Ok(()),
    )?;
    if finished.stderr_lines > 0 {
        return Err(Error::Protocol {
            provider: label.to_owned(),
            action: "describe".to_owned(),
            message: format!(
                "wrote to stderr, which a describe must not: {}",
                finished.stderr_tail.join(" / ")
            ),
        });
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(text: &str) -> Result<Vec<RawResource>, OutputError> {
        let mut parser = ListParser::default();
        let mut out = Vec::new();
        for line in text.lines() {
            out.extend(parser.feed(line)?);
        }
        out.extend(parser.finish()?);
        Ok(out)
    }

    fn update(name: &str, text: &str) -> Result<UpdateReport, OutputError> {
        let mut parser = UpdateParser::new(name);
        for line in text.lines() {
            parser.feed(line)?;
        }
        parser.finish()
    }

    #[test]
    fn list_splits_resources_at_name_lines() {
        let got =
            list("\n# simple\nname: a\n  ip :  1.2.3.4  \n\nname: b\nurl: http://x:80\n").unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].name(), "a");
        assert_eq!(got[0].attrs().collect::<Vec<_>>(), [("ip", "1.2.3.4")]);
        assert_eq!(got[1].name(), "b");
        assert_eq!(got[1].attrs().collect::<Vec<_>>(), [("url", "http://x:80")]);
    }

    #[test]
    fn header_and_line_errors_quote_the_line() {
        assert_eq!(
            list("simple\nname: a"),
            Err(OutputError::Protocol(
                "line 1: expected '# simple' as the first line, found 'simple'".into()
            ))
        );
        assert_eq!(
            list("# simple\nname: a\nbogus"),
            Err(OutputError::Protocol(
                "line 3: expected 'key: value', found 'bogus'".into()
            ))
        );
        assert_eq!(
            list("# simple\nip: 1"),
            Err(OutputError::Protocol(
                "line 2: attribute 'ip' comes before any 'name:' line".into()
            ))
        );
        assert!(matches!(list(""), Err(OutputError::Protocol(m)) if m.contains("empty")));
    }

    #[test]
    fn ral_error_with_and_without_eom() {
        assert_eq!(
            list("# simple\nname: a\nral_error: first\nsecond: line\nral_eom\nname: b"),
            Err(OutputError::Reported("first\nsecond: line".into()))
        );
        assert_eq!(
            list("# simple\nral_error: broken"),
            Err(OutputError::Reported("broken".into()))
        );
    }

    #[test]
    fn update_records_changes_and_was() {
        let report = update(
            "a",
            "# simple\nname: a\nip: 2\nral_was: 1\nensure: present\nral_derive: true",
        )
        .unwrap();
        assert!(report.derive);
        assert_eq!(
            report.changes,
            vec![
                ReportedChange {
                    attr: "ip".into(),
                    is: "2".into(),
                    was: Some("1".into())
                },
                ReportedChange {
                    attr: "ensure".into(),
                    is: "present".into(),
                    was: None
                },
            ]
        );
    }

    #[test]
    fn update_rejects_misplaced_was_and_wrong_names() {
        assert!(
            matches!(update("a", "# simple\nral_was: 1"), Err(OutputError::Protocol(m)) if m.contains("before any changed"))
        );
        assert!(
            matches!(update("a", "# simple\nx: 1\nral_was: 1\nral_was: 2"), Err(OutputError::Protocol(m)) if m.contains("second ral_was"))
        );
        assert!(
            matches!(update("a", "# simple\nname: b"), Err(OutputError::Protocol(m)) if m.contains("answered for 'b'"))
        );
        assert!(
            matches!(update("a", "# simple\nname: a\nral_unknown: true"), Err(OutputError::Reported(m)) if m.contains("cannot be created"))
        );
    }

    #[test]
    fn trimming_matches_str_trim() {
        for text in [
            "",
            " ",
            "a",
            " a b ",
            "\ta\r",
            "\u{b}a\u{b}",
            "\u{a0}a\u{3000}",
            " \u{85}x\u{2029} ",
            "é",
            " é ",
            "x\u{c}",
        ] {
            assert_eq!(trim(text), text.trim(), "{text:?}");
        }
    }

    #[test]
    fn arguments_quote_every_value() {
        let ip = Value::String("1;id".to_owned());
        let tags = Value::Array(vec![Value::String("x y".to_owned()), Value::Integer(3)]);
        let empty = Value::Array(vec![]);
        let args = arguments(
            Action::Update,
            Some("a b"),
            [("ip", &ip), ("tags", &tags), ("none", &empty)],
            true,
        );
        assert_eq!(
            args,
            vec![
                "ral_action=update",
                "name='a b'",
                "ip='1;id'",
                "tags=('x y' 3)",
                "none=()",
                "ral_noop=true"
            ]
        );
    }
}

#[cfg(test)]
mod get_tests {
    use super::super::canned::Canned;
    use super::super::Convention;
    use super::*;

    #[test]
    fn without_find_one_listing_answers_every_name_the_first_listed_winning() {
        let provider = super::super::canned::provider("simple", "[list, update]");
        let runner = Canned {
            answer: "# simple\nname: b\nvalue: b1\nname: x\nvalue: x\nname: a\nvalue: a\n\
                     name: b\nvalue: b2\n"
                .to_owned(),
            check: Default::default(),
        };
        let found = SimpleConvention
            .get_many(&runner, &provider, &["a", "b", "zz", "b"])
            .unwrap();
        let values: Vec<Option<String>> = found
            .into_iter()
            .map(|one| one.unwrap().map(|r| r.attrs["value"].to_text()))
            .collect();
        assert_eq!(
            values,
            [
                Some("a".to_owned()),
                Some("b1".to_owned()),
                None,
                Some("b1".to_owned())
            ]
        );
    }
}
