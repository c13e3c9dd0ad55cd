//! What the templates of one host see: its facts (as `facts`), its
//! variables merged from every layer in order of precedence, and the
//! names Ansible gives every host (`inventory_hostname`, `group_names`).
//!
//! A variable's value may itself be a template (`url: "http://{{
//! facts.fqdn }}:{{ port }}"`): such variables are rendered in the order
//! their references give, a cycle being an error. A variable is sensitive
//! when a layer's `ral_sensitive` list names it, or when its value is
//! computed from a sensitive one; the lists of every layer add up, so no
//! layer can take another's sensitivity away.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;

use minijinja::value::Value;
use minijinja::Environment;

use crate::error::Problem;

use super::engine::{self, Failure};

/// The variable whose list (in any layer) names the sensitive variables.
pub const SENSITIVE_LIST: &str = "ral_sensitive";

/// Facts as Ansible (and Facter's legacy facts) name them, and what ral
/// names them: `facts.` and Facter 4's structured names.
const FOREIGN_FACTS: &[(&str, &str)] = &[
    ("ansible_os_family", "facts.os.family"),
    ("ansible_distribution", "facts.os.name"),
    ("ansible_distribution_version", "facts.os.release.full"),
    (
        "ansible_distribution_major_version",
        "facts.os.release.major",
    ),
    ("ansible_distribution_release", "facts.os.distro.codename"),
    ("ansible_hostname", "facts.hostname"),
    ("ansible_nodename", "facts.hostname"),
    ("ansible_fqdn", "facts.fqdn"),
    ("ansible_domain", "facts.domain"),
    ("ansible_architecture", "facts.hardwaremodel"),
    ("ansible_kernel", "facts.kernelrelease"),
    ("ansible_system", "facts.kernel"),
    ("ansible_default_ipv4", "facts.networking.ip"),
    ("ansible_default_ipv6", "facts.networking.ip6"),
    ("ansible_interfaces", "facts.networking.interfaces"),
    ("ansible_processor_vcpus", "facts.processors.count"),
    ("ansible_processor_count", "facts.processors.physicalcount"),
    ("ansible_memtotal_mb", "facts.memory.system.total_bytes"),
    ("ansible_virtualization_type", "facts.virtual"),
    ("ansible_uptime_seconds", "facts.uptime_seconds"),
    ("ansible_facts", "facts"),
    ("osfamily", "facts.os.family"),
    ("operatingsystem", "facts.os.name"),
    ("operatingsystemmajrelease", "facts.os.release.major"),
    ("lsbdistcodename", "facts.os.distro.codename"),
    ("ipaddress", "facts.networking.ip"),
    ("processorcount", "facts.processors.count"),
    ("memorysize", "facts.memory.system.total"),
];

/// The longest chain of variables computed from each other: far beyond
/// any real one, and short of what the stack holds.
const MAX_CHAIN: usize = 256;

/// The reserved names `-e` may set: which inventory host a run is for.
pub const OVERRIDABLE: &[&str] = &["inventory_hostname", "group_names"];

/// Names a template sees that no variable may take.
pub const RESERVED: &[&str] = &["facts", "item", "inventory_hostname", "group_names"];

/// The variables one place gives: a manifest's `vars:`, an inventory
/// group's or host's, a `group_vars`/`host_vars` file, `-e`.
#[derive(Debug, Clone, PartialEq)]
pub struct Layer {
    /// How `-v` names where a value came from: `group_vars/web.yaml`,
    /// `hosts.yaml (group web)`, `-e`.
    pub source: String,
    /// The file problems name.
    pub file: PathBuf,
    /// Name, value and line (0 when there is none).
    pub vars: Vec<(String, serde_json::Value, usize)>,
    /// Given on the command line (`-e`): only such a layer may say which
    /// inventory host a run is for.
    pub command_line: bool,
}

/// What one host's templates are rendered with, besides its manifests'
/// own `vars:` (the lowest layer).
#[derive(Debug, Clone, Default)]
pub struct Scope {
    /// `None` when they were not gathered (no template names `facts`).
    pub facts: Option<serde_json::Map<String, serde_json::Value>>,
    /// Above the manifests' variables, lowest first.
    pub layers: Vec<Layer>,
    /// `inventory_hostname`: the target's inventory name, `localhost`
    /// for this machine.
    pub host: String,
    /// `group_names`: the inventory groups the host is in (`all` and
    /// `ungrouped` aside, as Ansible's).
    pub groups: Vec<String>,
}

/// One variable as resolved.
#[derive(Debug, Clone)]
struct Resolved {
    value: serde_json::Value,
    source: String,
    file: PathBuf,
    line: usize,
}

/// How long one host's manifests may take to render: each render has its
/// budget of steps, and this bounds how many of them a manifest can make
/// (a runaway template in a loop of a thousand elements).
pub const RENDER_LIMIT: std::time::Duration = std::time::Duration::from_secs(60);

/// Whether `name` can be a variable: what Jinja2 can name.
pub fn is_variable_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The variables of one host, resolved.
pub struct Variables {
    values: indexmap::IndexMap<String, Resolved>,
    sensitive: HashSet<String>,
    /// The facts as the engine's value, made once.
    facts: Option<Value>,
    /// `inventory_hostname` and `group_names` as `-e` gave them.
    overrides: HashMap<String, serde_json::Value>,
    deadline: std::time::Instant,
    /// Everything a template sees, as the engine's value.
    pub context: Value,
}

/// The layers' variables merged, lowest first, before any is rendered:
/// each variable with where it was set, the names declared sensitive, the
/// names only `-e` may set, and what is wrong with any of them.
#[derive(Default)]
struct Merged {
    values: indexmap::IndexMap<String, Resolved>,
    sensitive: HashSet<String>,
    overrides: HashMap<String, serde_json::Value>,
    problems: Vec<Problem>,
}

impl Merged {
    fn of(layers: &[&Layer]) -> Merged {
        let mut merged = Merged::default();
        for layer in layers {
            for (name, value, line) in &layer.vars {
                merged.take(layer, name, value, *line);
            }
        }
        match merged.overrides.get("group_names") {
            Some(serde_json::Value::Array(_)) | None => {}
            Some(_) => merged.problems.push(Problem {
                file: PathBuf::from("-e"),
                line: 0,
                message: "group_names: expected a list of group names".to_owned(),
            }),
        }
        merged
    }

    /// One variable of `layer`, over what lower layers set.
    fn take(&mut self, layer: &Layer, name: &String, value: &serde_json::Value, line: usize) {
        let at = |message: String| Problem {
            file: layer.file.clone(),
            line,
            message,
        };
        if !is_variable_name(name) {
            self.problems.push(at(format!(
                "'{}' is not a variable name (letters, digits and '_', not starting \
                 with a digit)",
                crate::text::escape(name)
            )));
            return;
        }
        // `-e` may say which inventory host this run is for (the
        // Ansible module does, on the managed host).
        if layer.command_line && OVERRIDABLE.contains(&name.as_str()) {
            self.overrides.insert(name.clone(), value.clone());
            return;
        }
        if RESERVED.contains(&name.as_str()) {
            self.problems.push(at(format!(
                "'{}' is a name every template has; a variable cannot take it (only -e \
                 may set inventory_hostname and group_names)",
                crate::text::escape(name)
            )));
            return;
        }
        if name == SENSITIVE_LIST {
            match sensitive_names(value) {
                Some(names) => self.sensitive.extend(names),
                None => self.problems.push(at(format!(
                    "{SENSITIVE_LIST}: expected a list of variable names"
                ))),
            }
            return;
        }
        self.values.insert(
            name.clone(),
            Resolved {
                value: value.clone(),
                source: layer.source.clone(),
                file: layer.file.clone(),
                line,
            },
        );
    }
}

impl Variables {
    /// Merges `layers` (lowest first) with the host's facts and names,
    /// then renders the variables that are templates.
    pub fn resolve(
        env: &Environment<'_>,
        layers: &[&Layer],
        scope: &Scope,
    ) -> Result<Variables, Vec<Problem>> {
        let merged = Merged::of(layers);
        if !merged.problems.is_empty() {
            return Err(merged.problems);
        }
        let mut variables = Variables {
            overrides: merged.overrides,
            values: merged.values,
            sensitive: merged.sensitive,
            facts: scope
                .facts
                .as_ref()
                .map(|facts| engine::value_of(&serde_json::Value::Object(facts.clone()))),
            deadline: std::time::Instant::now() + RENDER_LIMIT,
            context: Value::UNDEFINED,
        };
        variables.render_templated(env, scope)?;
        variables.context = variables.context_of(scope, None);
        Ok(variables)
    }

    /// Whether `name` is a sensitive variable.
    pub fn is_sensitive(&self, name: &str) -> bool {
        self.sensitive.contains(name)
    }

    /// The texts of the sensitive variables' values: each scalar, and
    /// each element of a list or mapping, as a value computed from one
    /// may hold it.
    pub fn sensitive_texts(&self) -> Vec<String> {
        fn texts(value: &serde_json::Value, out: &mut Vec<String>) {
            match value {
                serde_json::Value::Null => {}
                serde_json::Value::String(text) => out.push(text.clone()),
                serde_json::Value::Array(items) => items.iter().for_each(|v| texts(v, out)),
                serde_json::Value::Object(map) => map.values().for_each(|v| texts(v, out)),
                other => out.push(other.to_string()),
            }
        }
        let mut out = Vec::new();
        for name in &self.sensitive {
            if let Some(resolved) = self.values.get(name) {
                texts(&resolved.value, &mut out);
            }
        }
        out.sort();
        out.dedup();
        out
    }

    /// Where `name`'s value came from.
    pub fn source(&self, name: &str) -> Option<&str> {
        self.values.get(name).map(|r| r.source.as_str())
    }

    /// ` (did you mean 'NAME'?)` for a name that is not a variable: the
    /// fact an Ansible or older Facter name stands for, or the closest
    /// variable.
    pub fn suggest(&self, name: &str) -> String {
        if let Some((_, fact)) = FOREIGN_FACTS.iter().find(|(foreign, _)| *foreign == name) {
            return format!(" (did you mean '{fact}'?)");
        }
        let known = self
            .values
            .keys()
            .map(String::as_str)
            .chain(RESERVED.iter().copied());
        crate::suggest::did_you_mean(name, known)
    }

    /// This host's rendering as if it had taken too long already.
    #[cfg(test)]
    pub(super) fn expire(&mut self) {
        self.deadline = std::time::Instant::now() - std::time::Duration::from_secs(1);
    }

    /// Whether this host's rendering has taken too long.
    pub fn past_deadline(&self) -> bool {
        std::time::Instant::now() > self.deadline
    }

    /// What templates see: every variable, or only `names` (a variable
    /// being rendered needs only those it names).
    fn context_of(&self, scope: &Scope, names: Option<&[String]>) -> Value {
        let mut map = serde_json::Map::new();
        let mut add = |name: &String, resolved: &Resolved| {
            map.insert(name.clone(), resolved.value.clone());
        };
        match names {
            None => self.values.iter().for_each(|(n, r)| add(n, r)),
            Some(names) => names
                .iter()
                .filter_map(|n| self.values.get_key_value(n))
                .for_each(|(n, r)| add(n, r)),
        }
        map.insert(
            "inventory_hostname".to_owned(),
            serde_json::Value::String(scope.host.clone()),
        );
        map.insert("group_names".to_owned(), scope.groups.clone().into());
        for (name, value) in &self.overrides {
            map.insert(name.clone(), value.clone());
        }
        let values = engine::value_of(&serde_json::Value::Object(map));
        match &self.facts {
            Some(facts) => minijinja::context! { facts => facts.clone(), ..values },
            None => values,
        }
    }

    /// Renders every variable whose value holds a template, those it
    /// names first; one that names itself through others is an error.
    fn render_templated(
        &mut self,
        env: &Environment<'_>,
        scope: &Scope,
    ) -> Result<(), Vec<Problem>> {
        let mut references: HashMap<String, Vec<String>> = HashMap::new();
        for (name, resolved) in &self.values {
            let mut texts = Vec::new();
            templates_in(&resolved.value, &mut texts);
            if texts.is_empty() {
                continue;
            }
            let mut names = Vec::new();
            for text in texts {
                names.extend(names_in(env, text));
            }
            names.sort();
            names.dedup();
            references.insert(name.clone(), names);
        }
        if references.is_empty() {
            return Ok(());
        }
        let mut problems = Vec::new();
        let mut done: HashSet<String> = HashSet::new();
        let order: Vec<String> = references.keys().cloned().collect();
        for start in order {
            let mut path = Vec::new();
            self.visit(
                env,
                scope,
                &start,
                &references,
                &mut done,
                &mut path,
                &mut problems,
            );
        }
        match problems.is_empty() {
            true => Ok(()),
            false => Err(problems),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn visit(
        &mut self,
        env: &Environment<'_>,
        scope: &Scope,
        name: &str,
        references: &HashMap<String, Vec<String>>,
        done: &mut HashSet<String>,
        path: &mut Vec<String>,
        problems: &mut Vec<Problem>,
    ) {
        if done.contains(name) {
            return;
        }
        let Some(names) = references.get(name) else {
            done.insert(name.to_owned());
            return;
        };
        if let Some(message) = self.unfollowable(name, path) {
            problems.push(self.problem_at(name, message));
            done.insert(name.to_owned());
            return;
        }
        path.push(name.to_owned());
        for referenced in names {
            if self.values.contains_key(referenced) {
                self.visit(env, scope, referenced, references, done, path, problems);
            }
        }
        path.pop();
        if names.iter().any(|n| self.sensitive.contains(n)) {
            self.sensitive.insert(name.to_owned());
        }
        self.render_one(env, scope, name, names, problems);
        done.insert(name.to_owned());
    }

    /// Why `name`, reached through `path`, cannot be followed further: it
    /// is computed from itself, or through too long a chain.
    fn unfollowable(&self, name: &str, path: &[String]) -> Option<String> {
        if let Some(at) = path.iter().position(|n| n == name) {
            let mut cycle = path[at..].to_vec();
            cycle.push(name.to_owned());
            return Some(format!(
                "variable '{}' is computed from itself: {}",
                crate::text::escape(name),
                cycle.join(" → ")
            ));
        }
        (path.len() >= MAX_CHAIN).then(|| {
            format!(
                "variable '{}' is computed through a chain of more than {MAX_CHAIN} \
                 variables",
                crate::text::escape(name)
            )
        })
    }

    /// A problem with the variable `name`, where it was set.
    fn problem_at(&self, name: &str, message: String) -> Problem {
        let resolved = &self.values[name];
        Problem {
            file: resolved.file.clone(),
            line: resolved.line,
            message,
        }
    }

    /// Renders the variable `name`, which uses `names` (rendered
    /// already), unless the variables' time is up.
    fn render_one(
        &mut self,
        env: &Environment<'_>,
        scope: &Scope,
        name: &str,
        names: &[String],
        problems: &mut Vec<Problem>,
    ) {
        if self.past_deadline() {
            let message = format!(
                "variable '{}': rendering stopped: the variables took longer than {} s",
                crate::text::escape(name),
                RENDER_LIMIT.as_secs()
            );
            problems.push(self.problem_at(name, message));
            return;
        }
        let context = self.context_of(scope, Some(names));
        let resolved = &self.values[name];
        let at = |failure: Failure| Problem {
            file: resolved.file.clone(),
            line: resolved.line,
            message: format!(
                "variable '{}' (from {}): {}",
                crate::text::escape(name),
                resolved.source,
                failure.message
            ),
        };
        let suggest = |n: &str| self.suggest(n);
        match render_json(env, &resolved.value, &context, &suggest) {
            Ok(value) => {
                if let Some(resolved) = self.values.get_mut(name) {
                    resolved.value = value;
                }
            }
            Err(failures) => problems.extend(failures.into_iter().map(at)),
        }
    }
}

/// The names a list `ral_sensitive` gives.
fn sensitive_names(value: &serde_json::Value) -> Option<Vec<String>> {
    match value {
        serde_json::Value::Array(items) => items
            .iter()
            .map(|item| item.as_str().map(str::to_owned))
            .collect(),
        serde_json::Value::String(one) => Some(vec![one.clone()]),
        serde_json::Value::Null => Some(Vec::new()),
        _ => None,
    }
}

/// The texts of a value that are templates.
fn templates_in<'v>(value: &'v serde_json::Value, out: &mut Vec<&'v str>) {
    match value {
        serde_json::Value::String(text) if engine::is_template(text) => out.push(text),
        serde_json::Value::Array(items) => items.iter().for_each(|i| templates_in(i, out)),
        serde_json::Value::Object(map) => map.values().for_each(|v| templates_in(v, out)),
        _ => {}
    }
}

/// The top-level names a text uses (none when it does not compile: its
/// rendering reports why).
pub fn names_in(env: &Environment<'_>, text: &str) -> Vec<String> {
    let names = match engine::sole_expression(text) {
        Some(expression) => env
            .compile_expression(expression)
            .map(|e| e.undeclared_variables(false)),
        None => env
            .template_from_str(text)
            .map(|t| t.undeclared_variables(false)),
    };
    names.map(|n| n.into_iter().collect()).unwrap_or_default()
}

/// A variable's value with its templates rendered.
fn render_json(
    env: &Environment<'_>,
    value: &serde_json::Value,
    context: &Value,
    suggest: &dyn Fn(&str) -> String,
) -> Result<serde_json::Value, Vec<Failure>> {
    Ok(match value {
        serde_json::Value::String(text) if engine::is_template(text) => {
            let read = engine::read(env, text, context, suggest)?;
            engine::json(&read.value).map_err(|e| vec![Failure::on_line_one(&e)])?
        }
        serde_json::Value::Array(items) => serde_json::Value::Array(
            items
                .iter()
                .map(|item| render_json(env, item, context, suggest))
                .collect::<Result<_, _>>()?,
        ),
        serde_json::Value::Object(map) => {
            let mut out = serde_json::Map::new();
            for (key, item) in map {
                out.insert(key.clone(), render_json(env, item, context, suggest)?);
            }
            serde_json::Value::Object(out)
        }
        other => other.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn layer(source: &str, vars: serde_json::Value) -> Layer {
        Layer {
            command_line: source.starts_with("-e "),
            source: source.to_owned(),
            file: PathBuf::from(source),
            vars: vars
                .as_object()
                .unwrap()
                .iter()
                .map(|(k, v)| (k.clone(), v.clone(), 1))
                .collect(),
        }
    }

    fn resolve(layers: &[Layer]) -> Result<Variables, Vec<Problem>> {
        let refs: Vec<&Layer> = layers.iter().collect();
        let scope = Scope {
            host: "web1".to_owned(),
            ..Scope::default()
        };
        Variables::resolve(&engine::environment(), &refs, &scope)
    }

    fn value(vars: &Variables, name: &str) -> serde_json::Value {
        serde_json::to_value(vars.context.get_attr(name).unwrap()).unwrap()
    }

    #[test]
    fn a_higher_layer_wins_and_says_where_it_came_from() {
        let vars = resolve(&[
            layer("site.yaml", json!({"port": 80, "name": "app"})),
            layer("group_vars/web.yaml", json!({"port": 8080})),
        ])
        .unwrap();
        assert_eq!(value(&vars, "port"), json!(8080));
        assert_eq!(vars.source("port"), Some("group_vars/web.yaml"));
        assert_eq!(vars.source("name"), Some("site.yaml"));
        assert_eq!(value(&vars, "inventory_hostname"), json!("web1"));
    }

    #[test]
    fn templated_variables_render_in_order_and_carry_sensitivity() {
        let vars = resolve(&[
            layer(
                "a",
                json!({"url": "http://{{ host }}:{{ port }}/", "dsn": "pg://app:{{ password }}@db",
                       "host": "{{ inventory_hostname }}", "port": 80}),
            ),
            layer(
                "b",
                json!({"password": "s3cret", "ral_sensitive": ["password"]}),
            ),
        ])
        .unwrap();
        assert_eq!(value(&vars, "url"), json!("http://web1:80/"));
        assert!(vars.is_sensitive("password"));
        assert!(vars.is_sensitive("dsn"), "computed from a sensitive value");
        assert!(!vars.is_sensitive("url"));
    }

    #[test]
    fn sensitivity_lists_add_up_and_a_cycle_or_reserved_name_is_refused() {
        let vars = resolve(&[
            layer("a", json!({"ral_sensitive": ["x"], "x": 1, "y": 2})),
            layer("b", json!({"ral_sensitive": ["y"]})),
        ])
        .unwrap();
        assert!(vars.is_sensitive("x") && vars.is_sensitive("y"));
        let problems = resolve(&[layer("a", json!({"a": "{{ b }}", "b": "{{ a }}"}))])
            .err()
            .unwrap();
        assert!(
            problems[0].message.contains("is computed from itself"),
            "{problems:?}"
        );
        let problems = resolve(&[layer("a", json!({"facts": 1}))]).err().unwrap();
        assert!(problems[0].message.contains("a variable cannot take it"));
        for source in ["host_vars/x.yaml", "-evil.yaml"] {
            let problems = resolve(&[layer(source, json!({"group_names": ["web"]}))])
                .err()
                .unwrap();
            assert!(problems[0].message.contains("only -e may set"), "{source}");
        }
        let vars = resolve(&[layer(
            "-e @vars.json",
            json!({"inventory_hostname": "web7", "group_names": ["web"]}),
        )])
        .unwrap();
        assert_eq!(value(&vars, "inventory_hostname"), json!("web7"));
        assert_eq!(value(&vars, "group_names"), json!(["web"]));
    }

    #[test]
    fn templates_nested_in_lists_and_mappings_render_and_one_name_or_none_may_be_sensitive() {
        let vars = resolve(&[layer(
            "a",
            json!({"host": "web1", "urls": ["http://{{ host }}/"], "by": {"main": "{{ host }}"},
                   "ral_sensitive": "host"}),
        )])
        .unwrap();
        assert_eq!(value(&vars, "urls"), json!(["http://web1/"]));
        assert_eq!(value(&vars, "by"), json!({"main": "web1"}));
        assert!(vars.is_sensitive("host") && vars.is_sensitive("urls"));
        let vars = resolve(&[layer("a", json!({"x": 1, "ral_sensitive": null}))]).unwrap();
        assert!(!vars.is_sensitive("x"));
        assert!(resolve(&[layer("a", json!({"ral_sensitive": 5}))]).is_err());
    }

    #[test]
    fn a_host_past_its_deadline_stops_rendering_its_variables() {
        let refs = [layer("a", json!({"a": "{{ b }}", "b": 1}))];
        let refs: Vec<&Layer> = refs.iter().collect();
        let mut vars =
            Variables::resolve(&engine::environment(), &refs, &Scope::default()).unwrap();
        assert!(!vars.past_deadline());
        vars.expire();
        assert!(vars.past_deadline());
    }

    #[test]
    fn a_chain_of_variables_too_long_to_follow_is_an_error_not_a_crash() {
        let chain = |length: usize| {
            let mut vars = serde_json::Map::new();
            for i in 0..length {
                vars.insert(format!("a{i}"), json!(format!("{{{{ a{} }}}}", i + 1)));
            }
            vars.insert(format!("a{length}"), json!(1));
            resolve(&[layer("a", serde_json::Value::Object(vars))])
        };
        assert_eq!(value(&chain(200).unwrap(), "a0"), json!(1));
        let problems = chain(2_000).err().unwrap();
        assert!(
            problems[0].message.contains("a chain of more than"),
            "{problems:?}"
        );
    }

    #[test]
    fn an_undefined_name_in_a_variable_names_the_variable_and_its_source() {
        let problems = resolve(&[layer(
            "host_vars/web1.yaml",
            json!({"a": "{{ prot }}", "port": 1}),
        )])
        .err()
        .unwrap();
        assert_eq!(
            problems[0].message,
            "variable 'a' (from host_vars/web1.yaml): undefined variable 'prot' (did you mean 'port'?)"
        );
        assert_eq!(problems[0].file, PathBuf::from("host_vars/web1.yaml"));
    }
}
