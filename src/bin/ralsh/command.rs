//! One ralsh command on one host (this machine or a target): the host and
//! providers its arguments ask for, then listing, showing or changing
//! resources through the library, with the printer of the output form.

use std::io::{self, Write};

use anyhow::bail;
use ral::discovery::Registry;
use ral::metadata_cache::MetadataCache;
use ral::render::human::{self, HumanPrinter};
use ral::render::json::JsonPrinter;
use ral::render::manifest::ManifestPrinter;
use ral::render::Printer;
use ral::resource::ResourceSink;
use ral::text::escape_lines;
use ral::update::{self, Request};
use ral::{Host, Provider};

use crate::args::Args;
use crate::load::{self, Setup};
use crate::progress::Progress;

/// The three exit statuses ralsh uses, from best to worst.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Status {
    Success = 0,
    NotFound = 1,
    Error = 2,
}

/// What stdout carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    Human,
    Json,
    /// `--yaml`: a manifest for `ral plan`.
    Manifest,
}

/// Output settings derived from the arguments and the terminal.
#[derive(Clone)]
pub struct Output {
    pub form: Form,
    /// `-q`: nothing on stdout.
    pub quiet: bool,
    /// A progress line for long listings, where stderr is a terminal.
    pub progress: bool,
    /// `-v`: providers with their summaries.
    pub long: bool,
    pub style: human::Style,
}

/// Runs the command with `host` and writes its output to `out`; a
/// provider that logged errors makes the status an error.
pub fn run_on(
    args: &Args,
    output: &Output,
    host: &Host,
    registry: &Registry,
    out: &mut dyn Write,
) -> anyhow::Result<Status> {
    let status = dispatch(args, output, host, registry, out)?;
    if host.provider_error_lines() > 0 {
        log::error!("a provider logged errors; exiting with status 2");
        return Ok(Status::Error);
    }
    Ok(status)
}

/// The options that decide the host and the providers.
pub fn setup(args: &Args) -> Setup<'_> {
    Setup {
        root: &args.root,
        include: &args.include,
        timeout: args.timeout,
        lock_timeout: args.lock_timeout,
        strict: args.strict,
        no_cache: args.no_cache,
    }
}

/// The metadata cache the arguments ask for.
pub fn cache_for(args: &Args) -> MetadataCache {
    load::cache_for(args.no_cache)
}

/// [`load_with`] the cache the arguments ask for.
pub fn load(args: &Args) -> anyhow::Result<(Host, Registry)> {
    load_with(args, &cache_for(args))
}

/// The host and the providers the arguments ask for: for `ralsh TYPE ...`
/// that type's providers only (the bundled ones are not even written out
/// when none has that type).
pub fn load_with(args: &Args, cache: &MetadataCache) -> anyhow::Result<(Host, Registry)> {
    let only_type = args
        .provider
        .as_deref()
        .map(|query| query.split_once("::").map_or(query, |(kind, _)| kind));
    load::load_with(&setup(args), cache, only_type)
}

/// An unknown type or provider, with the closest known name: the
/// registry of `ralsh TYPE` holds that type's providers only, so the names
/// to suggest from are those of every provider (found again, from the
/// metadata cache as a rule; only on this error).
fn with_suggestion(args: &Args, query: &str, error: ral::Error) -> ral::Error {
    if !matches!(&error, ral::Error::UnknownProvider { suggestion, .. } if suggestion.is_empty()) {
        return error;
    }
    let all = load::load_with(&setup(args), &cache_for(args), None);
    match all.as_ref().map(|(_, registry)| registry.resolve(query)) {
        Ok(Err(full @ ral::Error::UnknownProvider { .. })) => full,
        _ => error,
    }
}

fn dispatch(
    args: &Args,
    output: &Output,
    host: &Host,
    registry: &Registry,
    target: &mut dyn Write,
) -> anyhow::Result<Status> {
    // One buffer for everything printed; a listing flushes it whenever the
    // provider pauses, so a slow provider's resources show as they come.
    let out = io::BufWriter::with_capacity(64 * 1024, target);
    let mut printer: Box<dyn Printer> = match output.form {
        Form::Json => Box::new(JsonPrinter::new(out)),
        Form::Human => Box::new(HumanPrinter::new(out, output.style)),
        // `--yaml` requires TYPE; the top key is TYPE as it was written.
        Form::Manifest => Box::new(ManifestPrinter::new(
            out,
            args.provider.as_deref().unwrap_or_default(),
        )),
    };
    let status = run_command(args, output, host, registry, printer.as_mut());
    printer.flush()?;
    status
}

fn run_command<'p>(
    args: &Args,
    output: &Output,
    host: &Host,
    registry: &'p Registry,
    printer: &mut dyn Printer<'p>,
) -> anyhow::Result<Status> {
    let Some(query) = &args.provider else {
        if args.explain {
            bail!("--explain needs a provider: ralsh --explain TYPE");
        }
        printer.providers(registry.providers(), output.long)?;
        if output.long {
            say_how_providers_run(host, registry);
        }
        return Ok(Status::Success);
    };
    let provider = registry
        .resolve(query)
        .map_err(|e| with_suggestion(args, query, e))?;
    if args.explain {
        if args.name.is_some() {
            bail!("--explain takes only a provider: ralsh --explain {query}");
        }
        printer.explain(provider)?;
        return Ok(Status::Success);
    }
    if args.yaml {
        return manifest(printer, host, provider, args, output);
    }
    let Some(name) = &args.name else {
        return list(printer, host, provider, args.absent, output.progress);
    };
    let stdin_attrs;
    let attrs = match args.attrs_stdin {
        true => {
            stdin_attrs = attrs_from_stdin(&args.attrs)?;
            &stdin_attrs
        }
        false => &args.attrs,
    };
    if attrs.is_empty() {
        return show(printer, host, provider, name, args);
    }
    change(printer, host, provider, name, attrs, args.noop)
}

/// `ralsh -v`, on stderr (stdout stays one line per provider): which
/// providers run in ralsh's own process, and which interpreters the
/// scripts run with.
fn say_how_providers_run(host: &Host, registry: &Registry) {
    let native: Vec<String> = registry
        .providers()
        .iter()
        .filter(|provider| provider.native.is_some())
        .map(|provider| provider.qualified_name())
        .collect();
    if !native.is_empty() {
        eprintln!(
            "ralsh: {} providers run natively in ralsh's own process, with no \
             interpreter: {}",
            native.len(),
            native.join(", ")
        );
    }
    for used in host.interpreters(registry.providers()) {
        let shim = used
            .shim
            .map(|shim| format!(", through {} on PATH", shim.display()))
            .unwrap_or_default();
        eprintln!(
            "ralsh: {} providers run {} as {}{shim} (found once per run)",
            used.scripts,
            ral::text::escape(&used.name),
            used.program.display()
        );
    }
}

/// `ralsh TYPE NAME`: one resource, or that it is not there.
fn show<'p>(
    printer: &mut dyn Printer<'p>,
    host: &Host,
    provider: &'p Provider,
    name: &str,
    args: &Args,
) -> anyhow::Result<Status> {
    if args.noop {
        log::info!("--noop has no effect without attributes to change");
    }
    let found = host
        .find(provider, name)?
        .filter(|resource| !(args.absent && resource.is_absent()));
    printer.found(provider, name, found.as_ref())?;
    Ok(match found {
        Some(_) => Status::Success,
        None => Status::NotFound,
    })
}

/// The most bytes `--attrs-stdin` reads.
const MAX_STDIN_ATTRS: usize = 16 * 1024 * 1024;

/// `words` followed by the `ATTR=VALUE` pairs of the JSON object on stdin
/// (`--attrs-stdin`). Each key must be a plain attribute name: one holding
/// `=` would otherwise set another attribute.
fn attrs_from_stdin(words: &[String]) -> anyhow::Result<Vec<String>> {
    let text = ral::converge::input::read_text_at_most(std::path::Path::new("-"), MAX_STDIN_ATTRS)
        .map_err(|e| anyhow::anyhow!("--attrs-stdin: {e}"))?;
    // Every member as written: a name given twice is then refused as on
    // the command line, not read as one of its values.
    let Members(object) = serde_json::from_str(&text).map_err(|e| {
        anyhow::anyhow!("--attrs-stdin: stdin is not a JSON object of attribute texts: {e}")
    })?;
    let mut all = words.to_vec();
    for (key, value) in object {
        if !ral::metadata::is_identifier(&key) {
            bail!(
                "--attrs-stdin: '{}' is not an attribute name (letters, digits and '_', not \
                 starting with a digit)",
                ral::text::escape(&key)
            );
        }
        let serde_json::Value::String(text) = value else {
            bail!(
                "--attrs-stdin: the value of '{key}' is not a string: give the text ralsh \
                 takes on its command line"
            );
        };
        all.push(format!("{key}={text}"));
    }
    Ok(all)
}

/// The members of a JSON object in order, each one as written (a map
/// would keep one value of a name given twice).
struct Members(Vec<(String, serde_json::Value)>);

impl<'de> serde::Deserialize<'de> for Members {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Members, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = Members;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a map")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Members, A::Error> {
                let mut members = Vec::new();
                while let Some(member) = map.next_entry()? {
                    members.push(member);
                }
                Ok(Members(members))
            }
        }
        deserializer.deserialize_map(Visitor)
    }
}

/// `ralsh TYPE NAME [NAME...] ATTR=VALUE...`: words before the first
/// `ATTR=VALUE` are further names, and all of them get the same change, as
/// one batch.
fn change(
    printer: &mut dyn Printer,
    host: &Host,
    provider: &Provider,
    first: &str,
    words: &[String],
    noop: bool,
) -> anyhow::Result<Status> {
    let split = words.iter().position(|word| word.contains('='));
    let (more_names, attrs) = match split {
        Some(at) => words.split_at(at),
        None => (&words[..0], words),
    };
    let names: Vec<&str> = std::iter::once(first)
        .chain(more_names.iter().map(String::as_str))
        .collect();
    let requests = names
        .iter()
        .map(|name| Request::parse(provider, name, attrs))
        .collect::<ral::error::Result<Vec<_>>>()?;
    let mut outcomes = update::apply_many(host, provider, &requests, noop)?;
    // The resources an interrupt caught are not reported as failed.
    ral::process::exit_if_interrupted();
    if names.len() == 1 {
        // One resource: a failure is the command's error, reported as usual.
        let outcome = outcomes.pop().expect("one outcome")?;
        outcomes.push(Ok(outcome));
    }
    let results: Vec<(String, ral::error::Result<update::Outcome>)> = names
        .iter()
        .map(|name| name.to_string())
        .zip(outcomes)
        .collect();
    printer.outcomes(provider, &results, noop)?;
    let mut status = Status::Success;
    for (_, result) in &results {
        if let Err(error) = result {
            eprintln!("ralsh: error: {}", escape_lines(&error.to_string()));
            status = Status::Error;
        }
    }
    Ok(status)
}

/// `ralsh --yaml TYPE [NAME...]`: all the resources, or the named ones
/// (read in one call where the convention allows); a name not found is
/// reported after the others are printed, as with `ralsh TYPE NAME`.
fn manifest<'p>(
    printer: &mut dyn Printer<'p>,
    host: &Host,
    provider: &'p Provider,
    args: &Args,
    output: &Output,
) -> anyhow::Result<Status> {
    let names = args.names();
    if names.is_empty() {
        return list(printer, host, provider, args.absent, output.progress);
    }
    let results = host.get_many(provider, &names)?;
    ral::process::exit_if_interrupted();
    let mut status = Status::Success;
    for (name, result) in names.iter().zip(results) {
        match result {
            Ok(found) => {
                let found = found.filter(|resource| !(args.absent && resource.is_absent()));
                printer.found(provider, name, found.as_ref())?;
                if found.is_none() && status == Status::Success {
                    status = Status::NotFound;
                }
            }
            Err(e) => {
                eprintln!("ralsh: error: {}", escape_lines(&e.to_string()));
                status = Status::Error;
            }
        }
    }
    printer.end_list(provider, None)?;
    Ok(status)
}

/// A listing on its way to the printer, with the progress line.
struct Listing<'a, 'p> {
    printer: &'a mut dyn Printer<'p>,
    provider: &'p Provider,
    skip_absent: bool,
    progress: Progress,
    count: usize,
}

fn write_error(error: io::Error) -> ral::Error {
    ral::Error::io("writing output", error)
}

impl ResourceSink for Listing<'_, '_> {
    fn resource(&mut self, resource: ral::Resource) -> ral::error::Result<()> {
        self.count += 1;
        self.progress.tick(self.count);
        if self.skip_absent && resource.is_absent() {
            return Ok(());
        }
        self.printer
            .listed(self.provider, &resource)
            .map_err(write_error)
    }

    fn idle(&mut self) -> ral::error::Result<()> {
        self.progress.tick(self.count);
        self.printer.flush().map_err(write_error)
    }
}

fn list<'p>(
    printer: &mut dyn Printer<'p>,
    host: &Host,
    provider: &'p Provider,
    skip_absent: bool,
    progress: bool,
) -> anyhow::Result<Status> {
    let mut listing = Listing {
        printer,
        provider,
        skip_absent,
        progress: Progress::new(provider.qualified_name(), !progress),
        count: 0,
    };
    let listed = host.list(provider, &mut listing);
    // What was listed is neither flushed nor closed after an interrupt.
    ral::process::exit_if_interrupted();
    listing.progress.finish();
    match listed {
        Ok(()) => {
            listing.printer.end_list(provider, None)?;
            Ok(Status::Success)
        }
        Err(e) if e.is_broken_pipe() => Err(e.into()),
        Err(e) => {
            // What was listed before the error is shown before it (in JSON,
            // the error goes inside the document so it stays valid).
            let message = e.to_string();
            listing.printer.end_list(provider, Some(&message))?;
            listing.printer.flush()?;
            eprintln!("ralsh: error: {}", escape_lines(&message));
            Ok(Status::Error)
        }
    }
}
