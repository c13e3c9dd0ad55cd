//! Jinja2 through minijinja: the environment every text is rendered in
//! (undefined values are errors, never empty text; a rendered text keeps
//! its trailing newline; a render has a budget of steps, so no template
//! runs without end), and the two ways a text is read: a text that is one
//! `{{ EXPRESSION }}` and nothing else keeps the expression's own type (a
//! list stays a list, as Ansible's native types), any other text with
//! `{{`, `{%` or `{#` is rendered as a template.

use minijinja::value::{Value, ValueKind};
use minijinja::{Environment, UndefinedBehavior};

use crate::types::Written;

/// The most steps one render may take: far more than any real template
/// needs (a 10,000-line loop takes a few hundred thousand), and a nested
/// loop over huge ranges stops at it within a second.
const FUEL: u64 = 5_000_000;

/// The longest text one render may give (and one variable hold): far
/// more than any config file, and a chain of variables doubling a text
/// stops at it instead of filling memory.
pub const MAX_RENDERED: usize = 16 << 20;

/// The environment of one run's renders.
pub fn environment() -> Environment<'static> {
    let mut env = Environment::new();
    env.set_undefined_behavior(UndefinedBehavior::Strict);
    env.set_fuel(Some(FUEL));
    env.add_filter("bool", to_bool);
    // debug() prints every variable, sensitive ones too, without naming
    // any: a template cannot call it.
    env.remove_global("debug");
    // The filters that turn a whole value into text measure it first.
    env.add_filter(
        "tojson",
        |value: &Value, indent: Option<Value>, args: minijinja::value::Kwargs| {
            bounded(value)?;
            minijinja::filters::tojson(value, indent, args)
        },
    );
    env.add_filter("string", |state: &minijinja::State, value: &Value| {
        bounded(value)?;
        minijinja::filters::string(state, value)
    });
    // A list or mapping printed whole is measured first: lists nested in
    // themselves double at each level and would fill memory in one step.
    env.set_formatter(|out, state, value| {
        if matches!(
            value.kind(),
            ValueKind::Seq | ValueKind::Map | ValueKind::Iterable
        ) {
            bounded(value)?;
        }
        minijinja::escape_formatter(out, state, value)
    });
    // Manifests and config files are not HTML: nothing is escaped.
    env.set_auto_escape_callback(|_| minijinja::AutoEscape::None);
    if let Ok(syntax) = minijinja::syntax::SyntaxConfig::builder()
        .keep_trailing_newline(true)
        .build()
    {
        env.set_syntax(syntax);
    }
    env
}

/// Ansible's `bool` filter: a text is true for `yes`, `on`, `1`, `true`
/// and `y` (in any case), false otherwise; any other value by its truth.
/// (The engine's own `bool` goes by truth alone: `"false"` would be true.)
fn to_bool(value: Value) -> bool {
    match value.as_str() {
        Some(text) => matches!(
            text.trim().to_ascii_lowercase().as_str(),
            "yes" | "on" | "1" | "true" | "y" | "t"
        ),
        None => value.is_true(),
    }
}

/// Whether `text` holds anything Jinja2 would read.
pub fn is_template(text: &str) -> bool {
    text.contains("{{") || text.contains("{%") || text.contains("{#")
}

/// The expression of a text that is exactly `{{ EXPRESSION }}`, nothing
/// before or after it (a text with a newline after it is a template).
pub fn sole_expression(text: &str) -> Option<&str> {
    let inner = text.strip_prefix("{{")?.strip_suffix("}}")?;
    let inner = inner.strip_prefix('-').unwrap_or(inner);
    let inner = inner.strip_suffix('-').unwrap_or(inner);
    if inner.contains("{{") || inner.contains("}}") || inner.contains("{%") {
        return None;
    }
    Some(inner)
}

/// A text read by the engine: what it became, and the variables it
/// names (the top-level names, for sensitivity and provenance).
pub struct Read {
    pub value: Value,
    pub names: Vec<String>,
}

/// What went wrong reading a text: the line of the text it was on (1 for
/// a one-line text) and the message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub line: usize,
    pub message: String,
}

impl Failure {
    /// The failure of a value read from a one-line text.
    pub(super) fn on_line_one(error: &ValueError) -> Failure {
        Failure {
            line: 1,
            message: error.to_string(),
        }
    }
}

/// Reads `text` in `context`: an expression keeps its type, a template is
/// rendered to text. Every undefined variable of the text is reported at
/// once, each with the closest known name.
pub fn read(
    env: &Environment<'_>,
    text: &str,
    context: &Value,
    suggest: &dyn Fn(&str) -> String,
) -> Result<Read, Vec<Failure>> {
    let Some(expression) = sole_expression(text) else {
        return render(env, text, context, suggest);
    };
    let Read { value, names } = evaluate(env, expression, context, suggest)?;
    if !within_bounds(&value) {
        return Err(vec![Failure {
            line: 1,
            message: too_large(),
        }]);
    }
    Ok(Read { value, names })
}

/// Renders `text` as a template, to text (a template file, whatever it
/// holds).
pub fn render(
    env: &Environment<'_>,
    text: &str,
    context: &Value,
    suggest: &dyn Fn(&str) -> String,
) -> Result<Read, Vec<Failure>> {
    let template = env
        .template_from_str(text)
        .map_err(|e| vec![failure(&e, context, suggest)])?;
    let names = sorted(template.undeclared_variables(false));
    let rendered = retried(context, suggest, |context| template.render(context))?;
    if rendered.len() > MAX_RENDERED {
        return Err(vec![too_long(rendered.len())]);
    }
    Ok(Read {
        value: Value::from(rendered),
        names,
    })
}

/// Evaluates a condition (`when:`): its truth, and the names it uses.
pub fn holds(
    env: &Environment<'_>,
    expression: &str,
    context: &Value,
    suggest: &dyn Fn(&str) -> String,
) -> Result<(bool, Vec<String>), Vec<Failure>> {
    // `when: "{{ x }}"` is accepted as Ansible accepts it (with a warning
    // there): the expression inside.
    let expression = sole_expression(expression).unwrap_or(expression);
    let Read { value, names } = evaluate(env, expression, context, suggest)?;
    Ok((value.is_true(), names))
}

/// Evaluates an expression, and the names it uses. Undefined is an
/// error, not a value: a misspelt condition must not quietly drop a
/// resource, nor a misspelt value become empty.
fn evaluate(
    env: &Environment<'_>,
    expression: &str,
    context: &Value,
    suggest: &dyn Fn(&str) -> String,
) -> Result<Read, Vec<Failure>> {
    let compiled = env
        .compile_expression(expression)
        .map_err(|e| vec![failure(&e, context, suggest)])?;
    let names = sorted(compiled.undeclared_variables(false));
    let value = retried(context, suggest, |context| compiled.eval(context))?;
    if value.is_undefined() {
        return Err(vec![undefined_expression(expression, context, suggest)]);
    }
    Ok(Read { value, names })
}

/// The failure of an expression that evaluated to undefined (the engine
/// gives undefined, not an error, for a bare name): for a name or a
/// dotted path, which part is missing and the closest one.
fn undefined_expression(
    expression: &str,
    context: &Value,
    suggest: &dyn Fn(&str) -> String,
) -> Failure {
    let path = expression.trim();
    let is_path = !path.is_empty()
        && path.split('.').all(|part| {
            !part.is_empty() && part.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        });
    Failure {
        line: 1,
        message: match is_path {
            true => undefined_path(path, context, suggest),
            false => format!("'{}' is undefined", crate::text::escape(path)),
        },
    }
}

fn too_long(length: usize) -> Failure {
    Failure {
        line: 1,
        message: format!(
            "the rendered text is {length} bytes, more than the {MAX_RENDERED} a value may hold"
        ),
    }
}

/// How many undefined variables of one text are looked for.
const MOST_UNDEFINED: usize = 16;

/// Runs `attempt`; when it fails on an undefined variable, runs it again
/// with that variable set to an empty text, to find the text's other
/// undefined variables too (a name used safely, `x | default(1)` or `x is
/// defined`, is never one). Reports them all, or the first other error
/// (an error after a stand-in was set may be the stand-in's doing, and is
/// not reported).
fn retried<T>(
    context: &Value,
    suggest: &dyn Fn(&str) -> String,
    attempt: impl Fn(&Value) -> Result<T, minijinja::Error>,
) -> Result<T, Vec<Failure>> {
    let mut failures: Vec<Failure> = Vec::new();
    let mut patched = context.clone();
    for _ in 0..MOST_UNDEFINED {
        let error = match attempt(&patched) {
            Ok(value) if failures.is_empty() => return Ok(value),
            Ok(_) => return Err(failures),
            Err(error) => error,
        };
        // Only a plain name can stand in: a path (`fact.os`) or an
        // index after an undefined name is that name's consequence.
        let undefined = undefined_name(&error).filter(|name| is_identifier(name));
        if failures.is_empty() || undefined.is_some() {
            failures.push(failure(&error, context, suggest));
        }
        match undefined {
            Some(name) => {
                let mut stand_in = indexmap::IndexMap::new();
                stand_in.insert(Value::from(name), Value::from(""));
                patched = minijinja::context! { ..Value::from_object(stand_in), ..patched };
            }
            None => return Err(failures),
        }
    }
    Err(failures)
}

fn is_identifier(name: &str) -> bool {
    !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The name an undefined-value error names (`nope`, `facts.os.x`).
fn undefined_name(error: &minijinja::Error) -> Option<String> {
    if error.kind() != minijinja::ErrorKind::UndefinedError {
        return None;
    }
    error
        .detail()?
        .strip_prefix('`')?
        .strip_suffix("` is undefined")
        .map(str::to_owned)
}

fn sorted(names: std::collections::HashSet<String>) -> Vec<String> {
    let mut names: Vec<String> = names.into_iter().collect();
    names.sort();
    names
}

/// An engine error as a failure: its line in the text, and for an
/// undefined name (`facts.os.familly`), the part that is missing and the
/// closest name found where it was looked for.
fn failure(error: &minijinja::Error, context: &Value, suggest: &dyn Fn(&str) -> String) -> Failure {
    let line = error.line().unwrap_or(1).max(1);
    let detail = error.detail().unwrap_or_default();
    if error.kind() == minijinja::ErrorKind::UndefinedError {
        if let Some(path) = detail
            .strip_prefix('`')
            .and_then(|rest| rest.strip_suffix("` is undefined"))
        {
            return Failure {
                line,
                message: undefined_path(path, context, suggest),
            };
        }
    }
    let message = match detail.is_empty() {
        true => error.kind().to_string(),
        false => format!("{}: {detail}", error.kind()),
    };
    Failure { line, message }
}

/// `facts.os.familly is undefined: facts.os has no 'familly' (did you
/// mean 'family'?)`.
fn undefined_path(path: &str, context: &Value, suggest: &dyn Fn(&str) -> String) -> String {
    let parts: Vec<&str> = path.split('.').collect();
    let mut at = context.clone();
    for (depth, part) in parts.iter().enumerate() {
        let next = at.get_attr(part).ok().filter(|v| !v.is_undefined());
        match next {
            Some(value) => at = value,
            None if depth == 0 => {
                return format!(
                    "undefined variable '{}'{}",
                    crate::text::escape(part),
                    suggest(part)
                );
            }
            None => {
                let keys: Vec<String> = match at.kind() {
                    ValueKind::Map => at
                        .try_iter()
                        .map(|keys| keys.filter_map(|k| k.as_str().map(str::to_owned)).collect())
                        .unwrap_or_default(),
                    _ => Vec::new(),
                };
                let parent = parts[..depth].join(".");
                // `facts.osfamily`: Facter's legacy name of a structured fact.
                let foreign = suggest(part);
                if parent == "facts" && foreign.contains("facts.") {
                    return format!(
                        "'{}' is undefined: facts has no '{}'{foreign}",
                        crate::text::escape(path),
                        crate::text::escape(part)
                    );
                }
                return format!(
                    "'{}' is undefined: {} has no '{}'{}",
                    crate::text::escape(path),
                    crate::text::escape(&parent),
                    crate::text::escape(part),
                    crate::suggest::did_you_mean(part, keys.iter().map(String::as_str))
                );
            }
        }
    }
    format!("'{}' is undefined", crate::text::escape(path))
}

/// The most elements (at every depth, a shared one each time it is
/// reached) a value may hold: lists that hold themselves twice double at
/// each level, and are refused before they are copied or printed.
const MAX_ELEMENTS: usize = 1_000_000;

/// Whether `value` holds at most [`MAX_ELEMENTS`] elements and
/// [`MAX_RENDERED`] bytes of text, counted without copying it.
pub fn within_bounds(value: &Value) -> bool {
    fn walk(value: &Value, elements: &mut usize, bytes: &mut usize) -> bool {
        *elements += 1;
        if *elements > MAX_ELEMENTS || *bytes > MAX_RENDERED {
            return false;
        }
        match value.kind() {
            ValueKind::String => {
                *bytes += value.as_str().map_or(0, str::len);
                *bytes <= MAX_RENDERED
            }
            ValueKind::Seq | ValueKind::Iterable => match value.try_iter() {
                Ok(items) => {
                    for item in items {
                        if !walk(&item, elements, bytes) {
                            return false;
                        }
                    }
                    true
                }
                Err(_) => true,
            },
            ValueKind::Map => match value.try_iter() {
                Ok(keys) => {
                    for key in keys {
                        let item = value.get_item(&key).unwrap_or_default();
                        if !walk(&key, elements, bytes) || !walk(&item, elements, bytes) {
                            return false;
                        }
                    }
                    true
                }
                Err(_) => true,
            },
            _ => true,
        }
    }
    walk(value, &mut 0, &mut 0)
}

/// An engine error for a value out of [`within_bounds`].
fn bounded(value: &Value) -> Result<(), minijinja::Error> {
    match within_bounds(value) {
        true => Ok(()),
        false => Err(minijinja::Error::new(
            minijinja::ErrorKind::InvalidOperation,
            too_large(),
        )),
    }
}

fn too_large() -> String {
    format!(
        "the value holds more than {MAX_ELEMENTS} elements or {MAX_RENDERED} bytes of text, more \
         than a value may hold"
    )
}

/// Why a rendered value cannot be used as a written value or as JSON.
#[derive(Debug, thiserror::Error)]
pub enum ValueError {
    /// The expression gave nothing (a missing attribute, `none.x`).
    #[error("the value is undefined")]
    Undefined,
    /// The engine could not walk the value (a list or mapping that
    /// fails when iterated).
    #[error("{0}")]
    Engine(minijinja::Error),
    /// The value has no JSON form.
    #[error("{0}")]
    Json(serde_json::Error),
}

/// A value as a manifest would have written it: text stays text, a
/// number or a boolean becomes its text (`true`, not Python's `True`),
/// none becomes null, and lists and mappings keep their shape.
pub fn written(value: &Value) -> Result<Written, ValueError> {
    Ok(match value.kind() {
        ValueKind::Undefined => return Err(ValueError::Undefined),
        ValueKind::None => Written::Null,
        ValueKind::Bool => Written::Text(value.is_true().to_string()),
        ValueKind::String => Written::Text(value.as_str().unwrap_or_default().to_owned()),
        ValueKind::Number => Written::Text(value.to_string()),
        ValueKind::Seq | ValueKind::Iterable => Written::List(
            value
                .try_iter()
                .map_err(ValueError::Engine)?
                .map(|item| written(&item))
                .collect::<Result<_, _>>()?,
        ),
        ValueKind::Map => {
            let mut pairs = Vec::new();
            for key in value.try_iter().map_err(ValueError::Engine)? {
                let item = value.get_item(&key).map_err(ValueError::Engine)?;
                let key = match key.as_str() {
                    Some(text) => text.to_owned(),
                    None => key.to_string(),
                };
                pairs.push((key, written(&item)?));
            }
            Written::Map(pairs)
        }
        _ => Written::Text(value.to_string()),
    })
}

/// A JSON value as the engine's.
pub fn value_of(json: &serde_json::Value) -> Value {
    Value::from(minijinja::value::Serde(json))
}

/// A value as JSON (for variables computed from others).
pub fn json(value: &Value) -> Result<serde_json::Value, ValueError> {
    if value.is_undefined() {
        return Err(ValueError::Undefined);
    }
    serde_json::to_value(value).map_err(ValueError::Json)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn context() -> Value {
        value_of(&serde_json::json!({
            "facts": {"os": {"family": "Debian"}},
            "app_port": 8080,
            "admins": ["ann", "bo"],
            "flag": true,
        }))
    }

    fn suggest(name: &str) -> String {
        crate::suggest::did_you_mean(name, ["facts", "app_port", "admins", "flag"])
    }

    fn read_text(text: &str) -> Result<Read, Vec<Failure>> {
        read(&environment(), text, &context(), &suggest)
    }

    #[test]
    fn a_sole_expression_keeps_its_type_and_a_template_becomes_text() {
        let list = read_text("{{ admins }}").unwrap();
        assert_eq!(
            written(&list.value).unwrap(),
            Written::List(vec![
                Written::Text("ann".into()),
                Written::Text("bo".into())
            ])
        );
        assert_eq!(list.names, ["admins"]);
        let nothing = read_text("{{ none }}").unwrap();
        assert_eq!(written(&nothing.value).unwrap(), Written::Null);
        assert!(matches!(
            written(&Value::UNDEFINED),
            Err(ValueError::Undefined)
        ));
        let map = read_text("{{ {'port': app_port} }}").unwrap();
        assert_eq!(
            written(&map.value).unwrap(),
            Written::Map(vec![("port".to_owned(), Written::Text("8080".to_owned()))])
        );
        let flag = read_text("{{ flag }}").unwrap();
        assert_eq!(written(&flag.value).unwrap(), Written::Text("true".into()));
        let text = read_text("port={{ app_port }} on {{ facts.os.family }}\n").unwrap();
        assert_eq!(
            written(&text.value).unwrap(),
            Written::Text("port=8080 on Debian\n".into()),
            "the trailing newline is kept"
        );
        assert_eq!(text.names, ["app_port", "facts"]);
    }

    #[test]
    fn every_undefined_name_is_reported_with_a_suggestion() {
        let failures = read_text("{{ app_prot }} {{ nothing_like_it }}")
            .err()
            .unwrap();
        let messages: Vec<&str> = failures.iter().map(|f| f.message.as_str()).collect();
        assert_eq!(
            messages,
            [
                "undefined variable 'app_prot' (did you mean 'app_port'?)",
                "undefined variable 'nothing_like_it'"
            ]
        );
        let failures = read_text("a\n{{ facts.os.familly }}").err().unwrap();
        assert_eq!(failures[0].line, 2);
        assert_eq!(
            failures[0].message,
            "'facts.os.familly' is undefined: facts.os has no 'familly' (did you mean 'family'?)"
        );
    }

    #[test]
    fn a_condition_is_an_expression_with_or_without_braces() {
        let env = environment();
        let (yes, names) = holds(&env, "app_port > 8000", &context(), &suggest).unwrap();
        assert!(yes);
        assert_eq!(names, ["app_port"]);
        let (no, _) = holds(
            &env,
            "{{ facts.os.family == 'RedHat' }}",
            &context(),
            &suggest,
        )
        .unwrap();
        assert!(!no);
        assert!(holds(&env, "missing", &context(), &suggest).is_err());
        let (no, _) = holds(&env, "missing | default(false)", &context(), &suggest).unwrap();
        assert!(!no, "a name used with a default is no error");
    }

    #[test]
    fn an_undefined_name_is_reported_once_whatever_follows_it() {
        for (text, message) in [
            (
                "{{ fact.os.family }}",
                "undefined variable 'fact' (did you mean 'facts'?)",
            ),
            ("{{ af['x'] }} {{ af['y'] }}", "undefined variable 'af'"),
        ] {
            let failures = read_text(text).err().unwrap();
            let messages: Vec<&str> = failures.iter().map(|f| f.message.as_str()).collect();
            assert_eq!(messages, [message], "{text}");
        }
    }

    #[test]
    fn an_expression_that_gives_nothing_is_an_error_named_as_written() {
        let failures = read_text("{{ 1 if false }}").err().unwrap();
        assert_eq!(failures[0].message, "'1 if false' is undefined");
        let failures = read_text("{{ app_prot }}").err().unwrap();
        assert_eq!(
            failures[0].message,
            "undefined variable 'app_prot' (did you mean 'app_port'?)"
        );
    }

    #[test]
    fn an_undefined_value_is_no_json_and_its_failure_says_so_on_line_one() {
        let error = json(&Value::UNDEFINED).unwrap_err();
        assert!(matches!(error, ValueError::Undefined), "{error:?}");
        assert_eq!(
            Failure::on_line_one(&error),
            Failure {
                line: 1,
                message: "the value is undefined".to_owned()
            }
        );
        let list = read_text("{{ admins }}").unwrap();
        assert_eq!(json(&list.value).unwrap(), serde_json::json!(["ann", "bo"]));
    }

    #[test]
    fn the_bool_filter_reads_texts_as_ansible_does() {
        for (text, truth) in [
            ("'false'", false),
            ("'no'", false),
            ("'0'", false),
            ("'yes'", true),
            ("'True'", true),
            ("1", true),
            ("0", false),
        ] {
            let (holds_now, _) = holds(
                &environment(),
                &format!("{text} | bool"),
                &context(),
                &suggest,
            )
            .unwrap();
            assert_eq!(holds_now, truth, "{text}");
        }
    }

    #[test]
    fn a_runaway_template_stops_at_its_budget() {
        let failures = read_text(
            "{% for i in range(50000) %}{% for j in range(50000) %}{% endfor %}{% endfor %}",
        )
        .err()
        .unwrap();
        assert!(failures[0].message.contains("fuel"), "{failures:?}");
        for text in ["{{ 'x' * 20000000 }}", "{{ 'x' * 20000000 }} "] {
            let failures = read_text(text).err().unwrap();
            assert!(failures[0].message.contains("more than"), "{failures:?}");
        }
        // Lists holding themselves twice, forty times over: measured, not
        // copied, whether kept whole or printed.
        let doubling = "{% set ns = namespace(v='x') %}{% for i in range(40) %}\
                        {% set ns.v = [ns.v, ns.v] %}{% endfor %}";
        for shown in [
            "{{ ns.v }}",
            "{{ ns.v | length }}{{ ns.v }}",
            "{{ ns.v | tojson | length }}",
            "{{ ns.v | string | length }}",
        ] {
            let failures = read_text(&format!("{doubling}{shown}")).err().unwrap();
            assert!(failures[0].message.contains("elements"), "{failures:?}");
        }
        // Numbers have no text to count: their number bounds them.
        let numbers = doubling.replace("v='x'", "v=1");
        let mappings = numbers.replace("[ns.v, ns.v]", "{'a': ns.v, 'b': ns.v}");
        for nested in [numbers, mappings] {
            let failures = read_text(&format!("{nested}{{{{ ns.v }}}}")).err().unwrap();
            assert!(failures[0].message.contains("elements"), "{failures:?}");
        }
        assert!(
            read_text("{{ debug() }}").is_err(),
            "debug() would print every variable"
        );
    }

    #[test]
    fn text_without_markers_is_not_a_template() {
        assert!(!is_template("plain } { text"));
        assert!(is_template("{# note #}"));
        assert_eq!(sole_expression("{{ a }}"), Some(" a "));
        assert_eq!(sole_expression("{{ a }}\n"), None);
        assert_eq!(sole_expression("{{ a }}{{ b }}"), None);
        assert_eq!(sole_expression("x {{ a }}"), None);
        assert_eq!(sole_expression("{{ a }} {% if b %}{{ c }}"), None);
        assert_eq!(
            sole_expression("{{ a }} {% if b %}c{% endif %}{{ d }}"),
            None
        );
        assert_eq!(sole_expression("{{ a }}}}"), None);
    }
}
