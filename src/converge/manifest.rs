//! Reading manifests: YAML or JSON files whose top level maps TYPE → NAME →
//! attributes, the shape `puppet resource --to_yaml` prints. Values stay
//! untyped text here, each with its line; the catalog types them by the
//! provider's metadata, as ralsh's command line does.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use marked_yaml::types::{MarkedScalarNode, Node};

use crate::error::Problem;
use crate::types::Written;
use crate::yaml_doc::{self, mapping_or_empty};
use crate::yaml_stream;

/// Where something was declared.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    pub file: Arc<Path>,
    pub line: usize,
}

impl Origin {
    pub fn problem(&self, message: impl Into<String>) -> Problem {
        Problem {
            file: self.file.to_path_buf(),
            line: self.line,
            message: message.into(),
        }
    }
}

/// One attribute as written.
#[derive(Debug, Clone, PartialEq)]
pub struct RawAttr {
    pub name: String,
    pub value: Written,
    pub line: usize,
}

/// A reference `TYPE[NAME]` as written in `require`, `before`, `notify`
/// or `subscribe`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reference {
    pub type_query: String,
    pub name: String,
    pub line: usize,
}

impl std::fmt::Display for Reference {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        // Escaped: a name with a line break must not forge a line of its own
        // in a message.
        write!(
            f,
            "{}[{}]",
            crate::text::escape(&self.type_query),
            crate::text::escape(&self.name)
        )
    }
}

/// One resource as the manifest declares it.
#[derive(Debug, Clone, PartialEq)]
pub struct Declared {
    /// The type or qualified provider name it was listed under.
    pub type_query: String,
    pub name: String,
    pub origin: Origin,
    pub attrs: Vec<RawAttr>,
    pub require: Vec<Reference>,
    /// Declarations of the same list this one requires, by their place
    /// in it: found already (a plugin's task requiring another of its
    /// answer, or an item; a plugin item requiring its tasks), so not
    /// looked up by name. A manifest's are always empty.
    pub require_at: Vec<usize>,
    pub before: Vec<Reference>,
    /// Resources a change of this one refreshes (they come after it).
    pub notify: Vec<Reference>,
    /// Resources whose change refreshes this one (they come before it).
    pub subscribe: Vec<Reference>,
    /// Not a manifest's: a model plugin's task, or a plugin item for
    /// removal (see `expand`).
    pub from_plugin: Option<std::sync::Arc<super::from_plugin::FromPlugin>>,
    /// Its `when:` and `loop:`, which only the rendering phase
    /// (the templating module) can resolve: a declaration that still has
    /// them was not rendered, and the catalog refuses it.
    pub varying: Option<Box<Varying>>,
}

/// What makes one declaration stand for none, one or many resources.
#[derive(Debug, Clone, PartialEq)]
pub struct Varying {
    /// `when: EXPRESSION`, with its line: declared only where it holds.
    pub when: Option<(String, usize)>,
    /// `loop: LIST|MAPPING|EXPRESSION`, with its line: one resource per
    /// element, the element as `item`.
    pub over: Option<(Written, usize)>,
}

/// One variable of a manifest's top-level `vars:` mapping.
#[derive(Debug, Clone, PartialEq)]
pub struct ManifestVar {
    pub name: String,
    /// As YAML types it: unquoted numbers, booleans and null are typed,
    /// everything else is text.
    pub value: serde_json::Value,
    pub origin: Origin,
}

/// The top-level key of a manifest that holds its variables, not
/// resources of a type.
pub const VARS_KEY: &str = "vars";

/// The metaparameters (`require`, `before`, `notify`, `subscribe`).
pub use crate::update::METAPARAMETERS;

/// The key of a resource's condition, as Ansible's.
pub const WHEN: &str = "when";
/// The key of a resource's loop, as Ansible's.
pub const LOOP: &str = "loop";

/// What reading manifests gave.
#[derive(Debug, Default)]
pub struct Reading {
    /// Every resource that could be read, in file order.
    pub declared: Vec<Declared>,
    /// The variables of the manifests' `vars:` mappings, in file order
    /// (a later one overrides an earlier one of the same name).
    pub vars: Vec<ManifestVar>,
    pub problems: Vec<Problem>,
    /// Whether every file could be read as a whole (its problems, if any,
    /// are each resource's own): checking the catalog then adds no noise.
    pub complete: bool,
    /// The SHA-256 of the manifests' texts (each preceded by its length),
    /// which a plan records.
    pub digest: String,
}

/// Reads manifest files (`-` is YAML on stdin) as one, keeping what could
/// be read beside the problems. Each is a regular file (or `-`) of at most
/// [`super::input::MAX_INPUT_BYTES`].
pub fn read_all(paths: &[PathBuf]) -> Reading {
    use sha2::Digest;
    let mut hash = sha2::Sha256::new();
    let mut reading = Reading {
        complete: true,
        ..Reading::default()
    };
    for path in paths {
        // A regular file or standard input, bounded: a FIFO, a device or a
        // directory is refused at once instead of blocking or never ending.
        match super::input::read_text(path) {
            Ok(text) => {
                hash.update((text.len() as u64).to_le_bytes());
                hash.update(text.as_bytes());
                let (found, wrong, whole) = parse_document(&text, path);
                reading.complete &= whole;
                reading.declared.extend(found.declared);
                reading.vars.extend(found.vars);
                reading.problems.extend(wrong);
            }
            Err(why) => {
                reading.complete = false;
                let why = why.reason();
                reading.problems.push(Problem {
                    file: path.clone(),
                    line: 0,
                    message: format!("cannot read the manifest: {why}"),
                });
            }
        }
    }
    reading.digest = crate::text::hex(&hash.finalize());
    reading
}

/// The digest of manifests read (`digest`) with the `-e` variables they
/// are rendered with: a saved plan made with other variables does not
/// apply.
pub fn with_extra_vars(digest: &str, words: &[String]) -> String {
    use sha2::Digest;
    if words.is_empty() {
        return digest.to_owned();
    }
    let mut hash = sha2::Sha256::new();
    hash.update(digest.as_bytes());
    for word in words {
        hash.update((word.len() as u64).to_le_bytes());
        hash.update(word.as_bytes());
    }
    crate::text::hex(&hash.finalize())
}

/// Parses one manifest's text; `file` names it in problems, and its
/// extension `.json` makes it JSON.
pub fn parse(text: &str, file: &Path) -> (Vec<Declared>, Vec<Problem>) {
    let (found, problems, _) = parse_document(text, file);
    (found.declared, problems)
}

/// What one manifest declares: its resources and its variables.
#[derive(Debug, Default)]
pub struct Found {
    pub declared: Vec<Declared>,
    pub vars: Vec<ManifestVar>,
}

/// [`parse`] with the variables, and whether the document could be read
/// as a whole (its problems, if any, being each resource's own).
pub fn parse_document(text: &str, file: &Path) -> (Found, Vec<Problem>, bool) {
    let (found, problems) = match parse_whole(text, file) {
        Ok(found) => found,
        Err(problem) => return (Found::default(), vec![problem], false),
    };
    (found, problems, true)
}

/// The resources and their problems, or the problem that kept the
/// document from being read.
fn parse_whole(text: &str, file: &Path) -> Result<(Found, Vec<Problem>), Problem> {
    let file: Arc<Path> = Arc::from(file);
    let at = |line: usize, message: String| Problem {
        file: file.to_path_buf(),
        line,
        message,
    };
    if file.extension().is_some_and(|e| e == "json") {
        // JSON's own rules first; the YAML reader below then gives lines.
        if let Err(e) = serde_json::from_str::<serde::de::IgnoredAny>(text) {
            return Err(at(e.line(), format!("invalid JSON: {e}")));
        }
    }
    // An editor's byte-order mark is not part of the first type.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    // A saved plan where a manifest is read (beside manifests, from -, or
    // given to ral plan): one clear problem, not a dozen about its fields.
    if super::input::is_marked(text) {
        return Err(at(
            1,
            "a saved plan (written by ral plan -o), not a manifest: apply it alone, from its \
             file: ral apply FILE"
                .to_owned(),
        ));
    }
    if let Some((line, message)) = yaml_doc::shape_problem(text, "a manifest", MAX_DEPTH) {
        return Err(at(line, message));
    }
    if text.trim().is_empty() {
        return Ok((Found::default(), Vec::new()));
    }
    let mut declared = Vec::new();
    let mut vars = Vec::new();
    let mut problems = Vec::new();
    // Each resource is checked as soon as it is read, and only what it
    // declares is kept: the document is never held as a tree.
    let mut value = |path: &[&MarkedScalarNode], node: Node| match path {
        [type_key, name_key] if type_key.as_str() == VARS_KEY => vars.push(ManifestVar {
            name: name_key.as_str().to_owned(),
            value: yaml_doc::typed_json(&node),
            origin: Origin {
                file: file.clone(),
                line: line_of_scalar(name_key),
            },
        }),
        [type_key] if type_key.as_str() == VARS_KEY && mapping_or_empty(&node).is_none() => {
            problems.push(at(
                line_of_scalar(type_key),
                "'vars' must map variable names to their values".to_owned(),
            ));
        }
        [type_key, name_key] => {
            let origin = Origin {
                file: file.clone(),
                line: line_of_scalar(name_key),
            };
            match declared_resource(type_key.as_str(), name_key.as_str(), &origin, &node) {
                Ok(resource) => declared.push(resource),
                Err(mut wrong) => problems.append(&mut wrong),
            }
        }
        // A type's value that is no mapping: nothing when null.
        [type_key] if mapping_or_empty(&node).is_none() => {
            problems.push(at(
                line_of_scalar(type_key),
                format!(
                    "'{}' must map resource names to their attributes",
                    type_key.as_str()
                ),
            ));
        }
        _ => {}
    };
    if let Err(e) = yaml_stream::load_streamed(text, 2, &mut value) {
        return Err(load_problem(&file, e));
    }
    Ok((Found { declared, vars }, problems))
}

/// The deepest nesting a manifest may have: a resource's attributes sit
/// at depth three, and a hash value in an array of hashes at six.
pub const MAX_DEPTH: usize = 32;

fn top_level_shape() -> String {
    "the top level must map types to resources: TYPE: {NAME: {ATTRIBUTE: VALUE}}".to_owned()
}

fn declared_resource(
    type_query: &str,
    name: &str,
    origin: &Origin,
    body: &Node,
) -> Result<Declared, Vec<Problem>> {
    let mut resource = Declared {
        type_query: type_query.to_owned(),
        name: name.to_owned(),
        origin: origin.clone(),
        attrs: Vec::new(),
        require: Vec::new(),
        require_at: Vec::new(),
        before: Vec::new(),
        notify: Vec::new(),
        subscribe: Vec::new(),
        from_plugin: None,
        varying: None,
    };
    let Some(body) = mapping_or_empty(body) else {
        return Err(vec![origin.problem(format!(
            "{type_query}[{name}]: the attributes must be a mapping ATTRIBUTE: VALUE"
        ))]);
    };
    let mut problems = Vec::new();
    for (key, value) in body.iter() {
        let line = line_of_scalar(key);
        let attr = key.as_str();
        let set = if METAPARAMETERS.contains(&attr) {
            set_references(&mut resource, attr, value, line)
        } else if attr == WHEN || attr == LOOP {
            set_varying(&mut resource, attr, value, line)
        } else {
            resource.attrs.push(RawAttr {
                name: attr.to_owned(),
                value: raw(value),
                line,
            });
            Ok(())
        };
        if let Err(message) = set {
            let at = Origin {
                line,
                ..origin.clone()
            };
            problems.push(at.problem(format!("{type_query}[{name}]: {message}")));
        }
    }
    if problems.is_empty() {
        // Kept for the whole run, one per resource: no room to spare.
        resource.attrs.shrink_to_fit();
        Ok(resource)
    } else {
        Err(problems)
    }
}

/// Sets what the metaparameter `attr` (`require`, `before`, `notify` or
/// `subscribe`) of `resource`, written at `line`, lists; or says what is
/// wrong with it.
fn set_references(
    resource: &mut Declared,
    attr: &str,
    value: &Node,
    line: usize,
) -> Result<(), String> {
    let references = references(value, line).map_err(|message| format!("{attr}: {message}"))?;
    *match attr {
        "require" => &mut resource.require,
        "before" => &mut resource.before,
        "notify" => &mut resource.notify,
        _ => &mut resource.subscribe,
    } = references;
    Ok(())
}

/// Sets the `when:` or `loop:` (`attr`) of `resource`, written at
/// `line`; or says what is wrong with it.
fn set_varying(
    resource: &mut Declared,
    attr: &str,
    value: &Node,
    line: usize,
) -> Result<(), String> {
    let varying = resource.varying.get_or_insert_with(|| {
        Box::new(Varying {
            when: None,
            over: None,
        })
    });
    match (attr, value) {
        (WHEN, Node::Scalar(scalar)) => {
            varying.when = Some((scalar.as_str().to_owned(), line));
        }
        // A list of conditions holds when each does, as Ansible's.
        (WHEN, Node::Sequence(items))
            if !items.is_empty() && items.iter().all(|i| matches!(i, Node::Scalar(_))) =>
        {
            let all: Vec<String> = items
                .iter()
                .filter_map(|item| match item {
                    Node::Scalar(scalar) => Some(format!("({})", scalar.as_str())),
                    _ => None,
                })
                .collect();
            varying.when = Some((all.join(" and "), line));
        }
        (WHEN, _) => return Err("when: expected an expression, or a list of them".to_owned()),
        _ => varying.over = Some((raw(value), line)),
    }
    Ok(())
}

/// `TYPE[NAME]` or a list of them.
fn references(node: &Node, line: usize) -> Result<Vec<Reference>, String> {
    let one = |scalar: &MarkedScalarNode| {
        parse_reference(scalar.as_str(), line_of(scalar, line)).map_err(|e| e.to_string())
    };
    match node {
        Node::Scalar(scalar) => Ok(vec![one(scalar)?]),
        Node::Sequence(items) => items
            .iter()
            .map(|item| match item {
                Node::Scalar(scalar) => one(scalar),
                _ => Err("each reference must be TYPE[NAME]".to_owned()),
            })
            .collect(),
        Node::Mapping(_) => Err("expected TYPE[NAME] or a list of them".to_owned()),
    }
}

/// A text that is no `TYPE[NAME]`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("'{}' is not a reference TYPE[NAME]", crate::text::escape(.text))]
pub struct NotAReference {
    pub text: String,
}

/// Parses `TYPE[NAME]`; the name runs to the last `]`, so it may hold
/// brackets itself.
pub fn parse_reference(text: &str, line: usize) -> Result<Reference, NotAReference> {
    let wrong = || NotAReference {
        text: text.to_owned(),
    };
    let (type_query, rest) = text.split_once('[').ok_or_else(wrong)?;
    let name = rest.strip_suffix(']').ok_or_else(wrong)?;
    if type_query.trim().is_empty() || name.is_empty() || type_query != type_query.trim() {
        return Err(wrong());
    }
    Ok(Reference {
        type_query: type_query.to_owned(),
        name: name.to_owned(),
        line,
    })
}

fn raw(node: &Node) -> Written {
    match node {
        Node::Scalar(scalar) => {
            let text = scalar.as_str();
            let null = matches!(text, "" | "~" | "null" | "Null" | "NULL");
            if scalar.may_coerce() && null {
                Written::Null
            } else {
                Written::Text(text.to_owned())
            }
        }
        Node::Sequence(items) => Written::List(items.iter().map(raw).collect()),
        Node::Mapping(map) => Written::Map(
            map.iter()
                .map(|(key, value)| (key.as_str().to_owned(), raw(value)))
                .collect(),
        ),
    }
}

fn line_of_scalar(scalar: &MarkedScalarNode) -> usize {
    yaml_doc::line_of(scalar)
}

fn line_of(scalar: &MarkedScalarNode, fallback: usize) -> usize {
    scalar.span().start().map_or(fallback, |mark| mark.line())
}

fn load_problem(file: &Path, error: marked_yaml::LoadError) -> Problem {
    let (line, message) = yaml_doc::load_problem(error, &top_level_shape());
    Problem {
        file: file.to_owned(),
        line,
        message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(text: &str) -> (Vec<Declared>, Vec<Problem>) {
        parse(text, Path::new("m.yaml"))
    }

    #[test]
    fn a_saved_plan_read_as_a_manifest_is_one_problem_naming_it() {
        let (found, problems) =
            parsed("{\"ral_saved_plan\":2,\"plan\":{\"id\": \"x\"},\"hmac\":\"00\"}\n");
        assert!(found.is_empty());
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(
            problems[0]
                .message
                .contains("a saved plan (written by ral plan -o), not a manifest"),
            "{problems:?}"
        );
    }

    #[test]
    fn resources_come_in_file_order_with_their_lines() {
        let (found, problems) = parsed(
            "user:\n  alice: {uid: 1500, shell: /bin/bash}\nfile:\n  /srv/a:\n    content: \"x\\n\"\n    mode: \"0640\"\n    require: user[alice]\n",
        );
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(found.len(), 2);
        assert_eq!(
            (found[0].type_query.as_str(), found[0].name.as_str()),
            ("user", "alice")
        );
        assert_eq!(found[0].origin.line, 2);
        assert_eq!(found[0].attrs[0].value, Written::Text("1500".to_owned()));
        assert_eq!(found[1].origin.line, 4);
        assert_eq!(found[1].attrs[1].line, 6);
        assert_eq!(found[1].attrs[0].value, Written::Text("x\n".to_owned()));
        assert_eq!(found[1].require[0].to_string(), "user[alice]");
        assert_eq!(found[1].require[0].line, 7);
    }

    #[test]
    fn values_keep_their_text_and_null_is_only_unquoted() {
        let (found, _) =
            parsed("t:\n  a: {x: 0640, y: '', z: ~, w: 'null', l: [1, b], m: {k: v}}\n");
        let values: Vec<&Written> = found[0].attrs.iter().map(|a| &a.value).collect();
        assert_eq!(values[0], &Written::Text("0640".to_owned()));
        assert_eq!(values[1], &Written::Text(String::new()));
        assert_eq!(values[2], &Written::Null);
        assert_eq!(values[3], &Written::Text("null".to_owned()));
        assert_eq!(
            values[4],
            &Written::List(vec![
                Written::Text("1".to_owned()),
                Written::Text("b".to_owned())
            ])
        );
        assert_eq!(
            values[5],
            &Written::Map(vec![("k".to_owned(), Written::Text("v".to_owned()))])
        );
    }

    #[test]
    fn mistakes_are_problems_with_lines() {
        let (found, problems) = parsed("user:\nhost:\n  a:\n  b: ~\n");
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(found.len(), 2);
        assert!(found[1].attrs.is_empty());
        let (_, problems) = parsed("user:\n  alice: {}\n  alice: {}\n");
        assert_eq!(problems.len(), 1);
        assert_eq!(problems[0].line, 3);
        assert!(problems[0]
            .message
            .contains("given twice (first on line 2)"));
        let (_, problems) = parsed("a: &x {}\nb: *x\n");
        assert!(problems[0].message.contains("anchors"), "{problems:?}");
        let (_, problems) = parsed("- a\n");
        assert!(problems[0].message.contains("top level"), "{problems:?}");
        let (_, problems) = parsed("user: [a]\nhost:\n  x: {require: 'nope'}\n  y: 5\n");
        let lines: Vec<usize> = problems.iter().map(|p| p.line).collect();
        assert_eq!(lines, [1, 3, 4], "{problems:?}");
        assert!(problems[1]
            .message
            .contains("'nope' is not a reference TYPE[NAME]"));
    }

    #[test]
    fn a_second_document_and_deep_nesting_are_refused_before_parsing() {
        let (_, problems) = parsed("---\nalpha: {a: {}}\n---\nbeta: {b: {}}\n");
        assert_eq!(problems.len(), 1);
        assert_eq!(problems[0].line, 3);
        assert!(
            problems[0].message.contains("one YAML document"),
            "{problems:?}"
        );
        let (_, problems) = parsed("alpha: {a: {}}\n...\n");
        assert_eq!(problems[0].line, 2);
        let deep = format!("t:\n  a:\n    x:\n      {}1\n", "- ".repeat(25_000));
        let (_, problems) = parsed(&deep);
        assert_eq!(problems[0].line, 4);
        assert!(problems[0].message.contains("nests deeper"), "{problems:?}");
        let deep = format!("t: {{a: {{x: {}1{}}}}}\n", "[".repeat(100), "]".repeat(100));
        assert!(parsed(&deep).1[0].message.contains("nests deeper"));
        // A leading document marker and a byte-order mark are fine.
        let (found, problems) = parsed("\u{feff}---\nalpha:\n  a: {value: '[x'}\n");
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(found[0].type_query, "alpha");
    }

    #[test]
    fn json_is_read_by_its_extension_with_lines() {
        let (found, problems) = parse(
            "{\"host\": {\n  \"db\": {\"ip\": \"10.0.0.5\", \"require\": [\"user[a]\"]}\n}}\n",
            Path::new("m.json"),
        );
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(found[0].origin.line, 2);
        assert_eq!(found[0].require[0].name, "a");
        let (_, problems) = parse("{\"host\": {,}}", Path::new("m.json"));
        assert!(
            problems[0].message.starts_with("invalid JSON"),
            "{problems:?}"
        );
    }

    #[test]
    fn references_are_shown_escaped() {
        let r = parse_reference("user[a\nb]", 1).unwrap();
        assert_eq!(r.to_string(), "user[a\\nb]");
    }

    #[test]
    fn references_take_qualified_types_and_bracketed_names() {
        let r = parse_reference("host::etc_hosts[a[1]]", 4).unwrap();
        assert_eq!(
            (r.type_query.as_str(), r.name.as_str()),
            ("host::etc_hosts", "a[1]")
        );
        for wrong in ["host", "[a]", "host[]", "host[a", " host[a]"] {
            assert!(parse_reference(wrong, 1).is_err(), "{wrong}");
        }
    }
}
