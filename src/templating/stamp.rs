//! One declaration as written, made into the resources it stands for on
//! one host: its `loop:` gives one element per resource (as `item`), its
//! `when:` keeps or drops each, and every text of its title, attributes
//! and references is rendered; a file's `template: PATH` (rendered) or
//! `source: PATH` (as it is) becomes its `content`, PATH relative to the
//! manifest. Each rendered attribute knows the variables it used: where
//! they came from (for `-v`) and whether one was sensitive.

use std::path::{Path, PathBuf};

use minijinja::value::Value;
use minijinja::Environment;

use crate::converge::manifest::{Declared, RawAttr, Reference};
use crate::error::Problem;
use crate::types::Written;

use super::engine::{self, Failure};
use super::scope::Variables;

/// What one declaration gave.
#[derive(Default)]
pub struct Stamped {
    pub declared: Vec<Stamp>,
    pub problems: Vec<Problem>,
}

/// One resource it stands for.
pub struct Stamp {
    pub declared: Declared,
    /// Which element of its loop it is (from 1), when it has one.
    pub element: Option<usize>,
    /// Its attributes computed from a sensitive value.
    pub sensitive: Vec<String>,
    /// `ATTRIBUTE: VARIABLE from SOURCE, ...` for each attribute that used
    /// variables.
    pub provenance: Vec<String>,
}

/// The attributes that read a file instead of holding their text.
pub const TEMPLATE: &str = "template";
pub const SOURCE: &str = "source";

/// Whether a type takes `template:` and `source:`: the file type.
fn is_file_type(type_query: &str) -> bool {
    type_query == "file" || type_query.starts_with("file::")
}

/// The resources `declared` stands for with `vars`.
pub fn stamp(env: &Environment<'_>, declared: &Declared, vars: &Variables) -> Stamped {
    let mut out = Stamped::default();
    let mut stamper = Stamper {
        env,
        declared,
        vars,
        looped_from: String::new(),
    };
    let elements = match stamper.elements() {
        Ok(elements) => elements,
        Err(problems) => {
            out.problems = problems;
            return out;
        }
    };
    for (index, element) in elements.into_iter().enumerate() {
        if vars.past_deadline() {
            out.problems.push(stamper.too_slow());
            return out;
        }
        let pass = stamper.pass(index, element);
        match stamper.when_holds(&pass) {
            Ok(true) => {}
            Ok(false) => continue,
            Err(problems) => {
                out.problems.extend(problems);
                continue;
            }
        }
        match stamper.one(&pass) {
            Ok(stamp) => out.declared.push(stamp),
            Err(problems) => out.problems.extend(problems),
        }
    }
    out
}

/// One declaration being made into resources with one host's variables.
struct Stamper<'a, 'e> {
    env: &'a Environment<'e>,
    declared: &'a Declared,
    vars: &'a Variables,
    /// Where the loop's list came from, ` (NAME from SOURCE, ...)`, for
    /// `-v`; empty without a loop or variables.
    looped_from: String,
}

/// One pass over the declaration: an element of its loop, or the one
/// pass of a declaration without one.
struct Pass {
    /// What its texts render with (`item` among it, in a loop).
    context: Value,
    /// Which element of the loop it is (from 1), when there is one.
    number: Option<usize>,
    /// Its `item` came from a sensitive value.
    item_sensitive: bool,
}

impl Stamper<'_, '_> {
    /// A failure of a text of the declaration at `line`, as a problem.
    fn at(&self, line: usize, failure: Failure) -> Problem {
        Problem {
            file: self.declared.origin.file.to_path_buf(),
            line: line + failure.line - 1,
            message: format!(
                "{}[{}]: {}",
                crate::text::escape(&self.declared.type_query),
                crate::text::escape(&self.declared.name),
                failure.message
            ),
        }
    }

    /// A problem of the declaration as a whole, at its first line.
    fn problem(&self, what: &str) -> Problem {
        self.declared.origin.problem(format!(
            "{}[{}]: {what}",
            crate::text::escape(&self.declared.type_query),
            crate::text::escape(&self.declared.name),
        ))
    }

    fn suggest(&self, name: &str) -> String {
        self.vars.suggest(name)
    }

    /// The elements of the loop, each with whether it is sensitive (one
    /// `None` without a loop), noting where the list came from.
    fn elements(&mut self) -> Result<Vec<Option<Element>>, Vec<Problem>> {
        let varying = self.declared.varying.as_deref();
        let Some((over, line)) = varying.and_then(|v| v.over.as_ref()) else {
            return Ok(vec![None]);
        };
        let suggest = |name: &str| self.suggest(name);
        match elements_of(self.env, over, self.vars, &suggest) {
            Ok((elements, names)) => {
                let from: Vec<String> = names
                    .iter()
                    .filter_map(|n| self.vars.source(n).map(|s| format!("{n} from {s}")))
                    .collect();
                if !from.is_empty() {
                    self.looped_from = format!(" ({})", from.join(", "));
                }
                Ok(elements.into_iter().map(Some).collect())
            }
            Err(failures) => Err(failures.into_iter().map(|f| self.at(*line, f)).collect()),
        }
    }

    fn too_slow(&self) -> Problem {
        self.problem(&format!(
            "rendering stopped: the manifests took longer than {} s to render",
            super::scope::RENDER_LIMIT.as_secs()
        ))
    }

    /// The pass of the element at `index` (of `element`, in a loop).
    fn pass(&self, index: usize, element: Option<Element>) -> Pass {
        let (context, item_sensitive) = match &element {
            Some((item, sensitive)) => (
                minijinja::context! { item => item.clone(), ..self.vars.context.clone() },
                *sensitive,
            ),
            None => (self.vars.context.clone(), false),
        };
        Pass {
            context,
            number: element.as_ref().map(|_| index + 1),
            item_sensitive,
        }
    }

    /// Whether any of the variables `names` is sensitive in `pass`.
    fn is_sensitive(&self, pass: &Pass, names: &[String]) -> bool {
        names
            .iter()
            .any(|n| self.vars.is_sensitive(n) || (n == "item" && pass.item_sensitive))
    }

    /// Whether the declaration's `when:` keeps `pass` (true without one).
    fn when_holds(&self, pass: &Pass) -> Result<bool, Vec<Problem>> {
        let varying = self.declared.varying.as_deref();
        let Some((condition, line)) = varying.and_then(|v| v.when.as_ref()) else {
            return Ok(true);
        };
        let suggest = |name: &str| self.suggest(name);
        match engine::holds(self.env, condition, &pass.context, &suggest) {
            Ok((holds, _)) => Ok(holds),
            Err(failures) => Err(failures
                .into_iter()
                .map(|f| self.at(*line, with_item(f, pass.number)))
                .collect()),
        }
    }

    /// The resource of `pass`, or every problem with it.
    fn one(&self, pass: &Pass) -> Result<Stamp, Vec<Problem>> {
        let declared = self.declared;
        let mut problems = Vec::new();
        let name = self.title(pass, &mut problems);
        let mut stamp = Stamp {
            declared: Declared {
                type_query: declared.type_query.clone(),
                name,
                origin: declared.origin.clone(),
                attrs: Vec::with_capacity(declared.attrs.len()),
                require: Vec::new(),
                require_at: declared.require_at.clone(),
                before: Vec::new(),
                notify: Vec::new(),
                subscribe: Vec::new(),
                from_plugin: declared.from_plugin.clone(),
                varying: None,
            },
            element: pass.number,
            sensitive: Vec::new(),
            provenance: Vec::new(),
        };
        self.attributes(pass, &mut stamp, &mut problems);
        self.references(pass, &mut stamp, &mut problems);
        match problems.is_empty() {
            true => Ok(stamp),
            false => Err(problems),
        }
    }

    /// The title rendered; one that cannot be is a problem, and the
    /// title as written stands in.
    fn title(&self, pass: &Pass, problems: &mut Vec<Problem>) -> String {
        let suggest = |name: &str| self.suggest(name);
        match render_text(self.env, &self.declared.name, &pass.context, &suggest) {
            Ok((name, names)) if self.is_sensitive(pass, &names) => {
                problems.push(
                    self.problem(
                        "a title is shown everywhere and cannot come from a sensitive value",
                    ),
                );
                name
            }
            Ok((name, _)) if name.is_empty() => {
                problems.push(self.problem("the title renders empty"));
                name
            }
            Ok((name, _)) => name,
            Err(failures) => {
                problems.extend(
                    failures
                        .into_iter()
                        .map(|f| self.at(self.declared.origin.line, with_item(f, pass.number))),
                );
                self.declared.name.clone()
            }
        }
    }

    /// Every attribute rendered (a file's `template:` and `source:` read
    /// into its `content`), each with the variables it used.
    fn attributes(&self, pass: &Pass, stamp: &mut Stamp, problems: &mut Vec<Problem>) {
        let declared = self.declared;
        let file_type = is_file_type(&declared.type_query);
        let has_content = declared.attrs.iter().any(|a| a.name == "content");
        let suggest = |name: &str| self.suggest(name);
        let is_sensitive = |names: &[String]| self.is_sensitive(pass, names);
        for attr in &declared.attrs {
            let from_file = file_type && (attr.name == TEMPLATE || attr.name == SOURCE);
            let rendered = match from_file {
                true => content_from_file(
                    self.env,
                    attr,
                    &declared.origin.file,
                    has_content,
                    &pass.context,
                    &suggest,
                    &is_sensitive,
                ),
                false => render_written(self.env, &attr.value, &pass.context, &suggest)
                    .map(|(value, names)| (attr.name.clone(), value, names))
                    .map_err(|failures| {
                        failures
                            .into_iter()
                            .map(|f| self.at(attr.line, with_item(f, pass.number)))
                            .collect()
                    }),
            };
            match rendered {
                Ok((name, value, names)) => {
                    if is_sensitive(&names) {
                        stamp.sensitive.push(name.clone());
                    }
                    let from = self.provenance(pass, &names);
                    if !from.is_empty() {
                        stamp
                            .provenance
                            .push(format!("{name}: {}", from.join(", ")));
                    }
                    stamp.declared.attrs.push(RawAttr {
                        name,
                        value,
                        line: attr.line,
                    });
                }
                Err(more) => problems.extend(more),
            }
        }
    }

    /// Where each of the variables `names` came from, for `-v`.
    fn provenance(&self, pass: &Pass, names: &[String]) -> Vec<String> {
        names
            .iter()
            .filter_map(|n| match (n.as_str(), pass.number) {
                ("item", Some(number)) => Some(format!(
                    "item from loop element {number}{}",
                    self.looped_from
                )),
                _ => self.vars.source(n).map(|s| format!("{n} from {s}")),
            })
            .collect()
    }

    /// The references (`require`, `before`, `notify`, `subscribe`)
    /// rendered; none may come from a sensitive value.
    fn references(&self, pass: &Pass, stamp: &mut Stamp, problems: &mut Vec<Problem>) {
        let declared = self.declared;
        let suggest = |name: &str| self.suggest(name);
        for (from, to) in [
            (&declared.require, &mut stamp.declared.require),
            (&declared.before, &mut stamp.declared.before),
            (&declared.notify, &mut stamp.declared.notify),
            (&declared.subscribe, &mut stamp.declared.subscribe),
        ] {
            for reference in from {
                match render_text(self.env, &reference.name, &pass.context, &suggest) {
                    Ok((_, names)) if self.is_sensitive(pass, &names) => {
                        problems.push(self.problem(
                            "a reference is shown everywhere and cannot come from a sensitive \
                             value",
                        ))
                    }
                    Ok((name, _)) => to.push(Reference {
                        name,
                        ..reference.clone()
                    }),
                    Err(failures) => problems.extend(
                        failures
                            .into_iter()
                            .map(|f| self.at(reference.line, with_item(f, pass.number))),
                    ),
                }
            }
        }
    }
}

/// A failure in a loop's element says which element.
fn with_item(failure: Failure, element: Option<usize>) -> Failure {
    match element {
        None => failure,
        Some(n) => Failure {
            message: format!("{} (loop element {n})", failure.message),
            ..failure
        },
    }
}

/// One element of a loop, and whether it came from a sensitive value.
type Element = (Value, bool);

/// A loop's elements: a list's items, or a mapping's entries as
/// `{key, value}` (Ansible's `dict2items`), each with whether it came
/// from a sensitive value.
fn elements_of(
    env: &Environment<'_>,
    over: &Written,
    vars: &Variables,
    suggest: &dyn Fn(&str) -> String,
) -> Result<(Vec<Element>, Vec<String>), Vec<Failure>> {
    let (value, names) = match over {
        Written::Text(text) if engine::is_template(text) => {
            let read = engine::read(env, text, &vars.context, suggest)?;
            (read.value, read.names)
        }
        Written::Text(_) | Written::Null => {
            return Err(vec![Failure {
                line: 1,
                message: "loop: expected a list, a mapping or an expression giving one".to_owned(),
            }])
        }
        other => {
            let (written, names) = render_written(env, other, &vars.context, suggest)?;
            (written_value(&written), names)
        }
    };
    let sensitive = names.iter().any(|n| vars.is_sensitive(n));
    let items = || {
        value.try_iter().map_err(|e| {
            vec![Failure {
                line: 1,
                message: e.to_string(),
            }]
        })
    };
    let elements: Vec<Value> = match value.kind() {
        minijinja::value::ValueKind::Seq | minijinja::value::ValueKind::Iterable => {
            items()?.collect()
        }
        minijinja::value::ValueKind::Map => items()?
            .map(|key| {
                let entry = value.get_item(&key).unwrap_or_default();
                minijinja::context! { key => key, value => entry }
            })
            .collect(),
        _ => {
            return Err(vec![Failure {
                line: 1,
                message: format!("loop: expected a list or a mapping, not {}", value.kind()),
            }])
        }
    };
    Ok((
        elements.into_iter().map(|e| (e, sensitive)).collect(),
        names,
    ))
}

/// A written value as the engine's.
fn written_value(written: &Written) -> Value {
    match written {
        Written::Null => Value::from(()),
        Written::Text(text) => Value::from(text.as_str()),
        Written::List(items) => Value::from(items.iter().map(written_value).collect::<Vec<_>>()),
        Written::Map(pairs) => Value::from_object(
            pairs
                .iter()
                .map(|(key, value)| (Value::from(key.as_str()), written_value(value)))
                .collect::<indexmap::IndexMap<Value, Value>>(),
        ),
    }
}

/// A text rendered (a title or a reference's name): always text.
fn render_text(
    env: &Environment<'_>,
    text: &str,
    context: &Value,
    suggest: &dyn Fn(&str) -> String,
) -> Result<(String, Vec<String>), Vec<Failure>> {
    if !engine::is_template(text) {
        return Ok((text.to_owned(), Vec::new()));
    }
    let read = engine::read(env, text, context, suggest)?;
    let text = match engine::written(&read.value) {
        Ok(Written::Text(text)) => text,
        Ok(_) => {
            return Err(vec![Failure {
                line: 1,
                message: "expected a text, not a list or a mapping".to_owned(),
            }])
        }
        Err(error) => return Err(vec![Failure::on_line_one(&error)]),
    };
    Ok((text, read.names))
}

/// A written value with its texts rendered, and the names they used.
fn render_written(
    env: &Environment<'_>,
    written: &Written,
    context: &Value,
    suggest: &dyn Fn(&str) -> String,
) -> Result<(Written, Vec<String>), Vec<Failure>> {
    match written {
        Written::Text(text) if engine::is_template(text) => {
            let read = engine::read(env, text, context, suggest)?;
            let value = engine::written(&read.value).map_err(|e| vec![Failure::on_line_one(&e)])?;
            Ok((value, read.names))
        }
        Written::List(items) => {
            let (values, names) = render_all(env, items.iter(), context, suggest)?;
            Ok((Written::List(values), names))
        }
        Written::Map(pairs) => {
            let (values, names) = render_all(env, pairs.iter().map(|(_, v)| v), context, suggest)?;
            let keys = pairs.iter().map(|(k, _)| k.clone());
            Ok((Written::Map(keys.zip(values).collect()), names))
        }
        other => Ok((other.clone(), Vec::new())),
    }
}

/// Each of `items` rendered, with every name they used, or every
/// failure among them.
fn render_all<'w>(
    env: &Environment<'_>,
    items: impl Iterator<Item = &'w Written>,
    context: &Value,
    suggest: &dyn Fn(&str) -> String,
) -> Result<(Vec<Written>, Vec<String>), Vec<Failure>> {
    let mut names = Vec::new();
    let mut values = Vec::new();
    let mut failures = Vec::new();
    for item in items {
        match render_written(env, item, context, suggest) {
            Ok((value, used)) => {
                values.push(value);
                names.extend(used);
            }
            Err(more) => failures.extend(more),
        }
    }
    match failures.is_empty() {
        true => Ok((values, names)),
        false => Err(failures),
    }
}

/// A file's `template: PATH` or `source: PATH` read (and for a template,
/// rendered) into its `content`.
#[allow(clippy::too_many_arguments)]
fn content_from_file(
    env: &Environment<'_>,
    attr: &RawAttr,
    manifest: &Path,
    has_content: bool,
    context: &Value,
    suggest: &dyn Fn(&str) -> String,
    is_sensitive: &dyn Fn(&[String]) -> bool,
) -> Result<(String, Written, Vec<String>), Vec<Problem>> {
    let at = |message: String| {
        vec![Problem {
            file: manifest.to_path_buf(),
            line: attr.line,
            message,
        }]
    };
    if has_content {
        return Err(at(format!(
            "{}: give content, template or source, not two of them",
            attr.name
        )));
    }
    let Written::Text(given) = &attr.value else {
        return Err(at(format!("{}: expected a path", attr.name)));
    };
    let (given, mut names) = render_text(env, given, context, suggest).map_err(|failures| {
        failures
            .into_iter()
            .map(|f| Problem {
                file: manifest.to_path_buf(),
                line: attr.line,
                message: format!("{}: {}", attr.name, f.message),
            })
            .collect::<Vec<_>>()
    })?;
    if is_sensitive(&names) {
        return Err(at(format!(
            "{}: a path is shown in messages and cannot come from a sensitive value",
            attr.name
        )));
    }
    let path = relative_to(manifest, &given);
    let text = crate::converge::input::read_text(&path).map_err(|why| {
        at(format!(
            "{}: cannot read {}: {}",
            attr.name,
            path.display(),
            why.reason()
        ))
    })?;
    if attr.name == SOURCE {
        return Ok(("content".to_owned(), Written::Text(text), names));
    }
    let read = engine::render(env, &text, context, suggest).map_err(|failures| {
        failures
            .into_iter()
            .map(|f| Problem {
                file: path.clone(),
                line: f.line,
                message: format!("(template of {}) {}", manifest.display(), f.message),
            })
            .collect::<Vec<_>>()
    })?;
    names.extend(read.names);
    let rendered = match read.value.as_str() {
        Some(text) => text.to_owned(),
        None => read.value.to_string(),
    };
    Ok(("content".to_owned(), Written::Text(rendered), names))
}

/// `given` relative to the manifest's directory (standard input's is the
/// working directory).
fn relative_to(manifest: &Path, given: &str) -> PathBuf {
    let given = Path::new(given);
    if given.is_absolute() || manifest.as_os_str() == "-" {
        return given.to_path_buf();
    }
    manifest
        .parent()
        .map_or_else(|| given.to_path_buf(), |dir| dir.join(given))
}
