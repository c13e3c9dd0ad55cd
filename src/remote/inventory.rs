//! Ansible's YAML inventory format, read into typed hosts.
//!
//! An inventory maps group names to group bodies; a body may hold `hosts:`
//! (host name → that host's variables), `children:` (group name → body) and
//! `vars:` (the group's variables). Every group is a descendant of `all`,
//! and a host that belongs to no other group is in `ungrouped`, as in
//! Ansible. A host or group may be named in several places: its memberships
//! add up and its variables merge, the later one winning.
//!
//! Variables follow Ansible's precedence: `all` < a parent group < its
//! child group < the host itself; groups at the same depth apply in name
//! order. The connection variables ral uses (`ansible_host`,
//! `ansible_port`, `ansible_user`, `ansible_ssh_private_key_file`,
//! `ansible_become`, `ral_root`) are checked where they are written, so an
//! error names the line that holds the bad value; every other variable is
//! kept as text.
//!
//! [`Inventory::select`] takes a host pattern as `ansible --limit` does,
//! but stricter: a term that matches nothing is an error, not a warning.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use marked_yaml::types::{MarkedMappingNode, MarkedScalarNode, Node};

use crate::error::{Error, Problem, Result};
use crate::text::escape;

/// The largest inventory file read.
pub const MAX_FILE: usize = 4 << 20;

/// The deepest YAML nesting an inventory may have (a group nested in
/// `children:` sits two levels below its parent).
pub const MAX_DEPTH: usize = 64;

/// The deepest chain of groups below `all`.
pub const MAX_GROUP_DEPTH: usize = 24;

/// The most hosts one ranged name (`web[001:999]`) may stand for.
pub const MAX_RANGE_HOSTS: usize = 10_000;

/// One target of an inventory, its variables resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Host {
    /// The inventory name, which patterns match.
    pub name: String,
    /// Where to connect: `ansible_host`, or else the name.
    pub address: String,
    /// `ansible_port`.
    pub port: Option<u16>,
    /// `ansible_user`.
    pub user: Option<String>,
    /// `ansible_ssh_private_key_file`.
    pub private_key_file: Option<PathBuf>,
    /// `ansible_become`: run the providers with elevated rights.
    pub sudo: Option<bool>,
    /// `ral_root`: the target's root, as `--root`; always absolute.
    pub root: Option<PathBuf>,
    /// Every group the host is in, with their ancestors (so `all` too).
    pub groups: BTreeSet<String>,
    /// The other variables, as text (a list or mapping as JSON, null as
    /// the empty text). ral does not use them.
    pub vars: BTreeMap<String, String>,
    /// The line that first names the host.
    pub line: usize,
}

/// A read inventory: its hosts in the order the file first names them.
#[derive(Debug, Clone)]
pub struct Inventory {
    file: PathBuf,
    hosts: Vec<Host>,
    /// Group name → the indexes of its hosts (members of descendants too).
    members: BTreeMap<String, BTreeSet<usize>>,
}

impl Inventory {
    /// Reads and checks the inventory at `path`.
    pub fn load(path: &Path) -> Result<Inventory> {
        let bytes =
            crate::bounded_read::read_file(path, MAX_FILE, crate::bounded_read::Links::Follow)
                .map_err(|e| problem(path, 0, format!("could not read the inventory: {e}")))?;
        let text = String::from_utf8(bytes)
            .map_err(|_| problem(path, 0, "the inventory is not UTF-8 text".to_owned()))?;
        Inventory::parse(&text, path)
    }

    /// Reads an inventory from `text`; `file` names it in errors.
    pub fn parse(text: &str, file: &Path) -> Result<Inventory> {
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        if let Some((line, message)) = nesting_problem(text) {
            return Err(problem(file, line, message));
        }
        let mut reader = Reader {
            file,
            groups: Vec::new(),
            group_index: HashMap::new(),
            hosts: Vec::new(),
            host_index: HashMap::new(),
        };
        reader.group_id("all", 0);
        if !text.trim().is_empty() {
            let options = marked_yaml::LoaderOptions::default()
                .error_on_duplicate_keys(true)
                .prevent_coercion(true)
                .toplevel_mapping();
            let root = marked_yaml::parse_yaml_with_options(0, text, options)
                .map_err(|e| load_problem(file, e))?;
            let Some(top) = root.as_mapping() else {
                return Err(problem(file, 1, top_level_shape()));
            };
            for (name, body) in top.iter() {
                reader.group(name, body, None, 1)?;
            }
        }
        reader.finish()
    }

    /// The file the inventory was read from.
    pub fn file(&self) -> &Path {
        &self.file
    }

    /// Every host, in the order the file first names them.
    pub fn hosts(&self) -> &[Host] {
        &self.hosts
    }

    /// The host named `name`.
    pub fn host(&self, name: &str) -> Option<&Host> {
        self.hosts.iter().find(|host| host.name == name)
    }

    /// Every group name, `all` and `ungrouped` included.
    pub fn groups(&self) -> impl Iterator<Item = &str> {
        self.members.keys().map(String::as_str)
    }

    /// The hosts an Ansible host pattern selects, in inventory order.
    ///
    /// Terms are separated by `,` or `:`; a term is a group or host name,
    /// where `*` and `?` are wildcards, `all` or `*` is every host. Plain
    /// terms add up; then `&term` keeps only the hosts it matches too,
    /// and `!term` removes the hosts it matches, wherever they stand (as
    /// Ansible orders them). A pattern of only `&` and `!` terms starts
    /// from every host. A term that matches nothing, or a pattern that
    /// selects no host, is an error.
    pub fn select(&self, pattern: &str) -> Result<Vec<&Host>> {
        let mut union: Option<BTreeSet<usize>> = None;
        let mut narrow = Vec::new();
        let mut exclude = Vec::new();
        for term in pattern.split([',', ':']) {
            let term = term.trim();
            let (kind, name) = match term.as_bytes().first() {
                Some(b'!') => (Some('!'), &term[1..]),
                Some(b'&') => (Some('&'), &term[1..]),
                _ => (None, term),
            };
            if name.is_empty() {
                return Err(self.pattern_problem(format!(
                    "the host pattern '{}' has an empty term",
                    escape(pattern)
                )));
            }
            let matched = self.matching(name).ok_or_else(|| {
                self.pattern_problem(format!(
                    "'{}' in the host pattern matches no host or group",
                    escape(term)
                ))
            })?;
            match kind {
                Some('!') => exclude.push(matched),
                Some(_) => narrow.push(matched),
                None => union.get_or_insert_with(BTreeSet::new).extend(matched),
            }
        }
        let mut chosen = union.unwrap_or_else(|| (0..self.hosts.len()).collect());
        for keep in &narrow {
            chosen.retain(|index| keep.contains(index));
        }
        for drop in &exclude {
            chosen.retain(|index| !drop.contains(index));
        }
        if chosen.is_empty() {
            return Err(self.pattern_problem(format!(
                "the host pattern '{}' selects no host",
                escape(pattern)
            )));
        }
        Ok(chosen.into_iter().map(|index| &self.hosts[index]).collect())
    }

    /// The hosts one term matches: those of the groups it names and, when
    /// no group matches or the term has a wildcard, the hosts it names
    /// (Ansible's rule). `None` when it matches neither.
    fn matching(&self, term: &str) -> Option<BTreeSet<usize>> {
        let wild = term.contains(['*', '?']);
        let mut found = false;
        let mut hosts = BTreeSet::new();
        for (group, members) in &self.members {
            if glob(term, group) {
                found = true;
                hosts.extend(members);
            }
        }
        if !found || wild {
            for (index, host) in self.hosts.iter().enumerate() {
                if glob(term, &host.name) {
                    found = true;
                    hosts.insert(index);
                }
            }
        }
        found.then_some(hosts)
    }

    fn pattern_problem(&self, message: String) -> Error {
        problem(&self.file, 0, message)
    }
}

/// Whether `text` matches `pattern`, where `*` stands for any run of
/// characters and `?` for one.
fn glob(pattern: &str, text: &str) -> bool {
    let pattern: Vec<char> = pattern.chars().collect();
    let text: Vec<char> = text.chars().collect();
    // The classic greedy match with one backtrack point: linear enough
    // for names, and no recursion.
    let (mut p, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        if p < pattern.len() && (pattern[p] == '?' || pattern[p] == text[t]) {
            p += 1;
            t += 1;
        } else if p < pattern.len() && pattern[p] == '*' {
            star = Some((p, t));
            p += 1;
        } else if let Some((star_p, star_t)) = star {
            p = star_p + 1;
            t = star_t + 1;
            star = Some((star_p, star_t + 1));
        } else {
            return false;
        }
    }
    pattern[p..].iter().all(|&c| c == '*')
}

/// A variable ral reads, checked where it is written.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Var {
    Address(String),
    Port(u16),
    User(String),
    KeyFile(PathBuf),
    Sudo(bool),
    Root(PathBuf),
    /// A known variable set to null: as if it were not set.
    Unset,
    Other(String),
}

#[derive(Debug, Default)]
struct Group {
    name: String,
    vars: BTreeMap<String, Var>,
    parents: BTreeSet<usize>,
    hosts: BTreeSet<usize>,
    line: usize,
}

#[derive(Debug)]
struct HostEntry {
    name: String,
    vars: BTreeMap<String, Var>,
    groups: BTreeSet<usize>,
    line: usize,
}

struct Reader<'a> {
    file: &'a Path,
    groups: Vec<Group>,
    group_index: HashMap<String, usize>,
    hosts: Vec<HostEntry>,
    host_index: HashMap<String, usize>,
}

impl Reader<'_> {
    fn fail(&self, line: usize, message: String) -> Error {
        problem(self.file, line, message)
    }

    fn group_id(&mut self, name: &str, line: usize) -> usize {
        if let Some(&id) = self.group_index.get(name) {
            return id;
        }
        self.groups.push(Group {
            name: name.to_owned(),
            line,
            ..Group::default()
        });
        self.group_index
            .insert(name.to_owned(), self.groups.len() - 1);
        self.groups.len() - 1
    }

    /// Reads one group body; `parent` is `None` at the top level.
    fn group(
        &mut self,
        key: &MarkedScalarNode,
        body: &Node,
        parent: Option<usize>,
        depth: usize,
    ) -> Result<()> {
        let line = line_of(key);
        let name = key.as_str();
        check_name(name)
            .map_err(|why| self.fail(line, format!("group '{}': {why}", escape(name))))?;
        if depth > MAX_GROUP_DEPTH {
            return Err(self.fail(
                line,
                format!(
                    "group '{}' nests deeper than {MAX_GROUP_DEPTH} groups",
                    escape(name)
                ),
            ));
        }
        let id = self.group_id(name, line);
        if name == "all" && parent.is_some() {
            return Err(self.fail(
                line,
                "'all' cannot be the child of another group".to_owned(),
            ));
        }
        if let Some(parent) = parent {
            self.groups[id].parents.insert(parent);
        } else if name != "all" {
            self.groups[id].parents.insert(0);
        }
        let Some(body) = mapping_or_empty(body) else {
            return Err(self.fail(
                line,
                format!(
                    "group '{}' must be a mapping with hosts:, children: or vars:",
                    escape(name)
                ),
            ));
        };
        for (section, value) in body.iter() {
            let section_line = line_of(section);
            let shape = |what: &str| {
                format!(
                    "group '{}': {} must be a mapping of {what}",
                    escape(name),
                    section.as_str()
                )
            };
            match section.as_str() {
                "hosts" => {
                    let hosts = mapping_or_empty(value).ok_or_else(|| {
                        self.fail(section_line, shape("host names to their variables"))
                    })?;
                    for (host, vars) in hosts.iter() {
                        self.host(host, vars, id)?;
                    }
                }
                "children" => {
                    let children = mapping_or_empty(value).ok_or_else(|| {
                        self.fail(section_line, shape("group names to their bodies"))
                    })?;
                    for (child, child_body) in children.iter() {
                        self.group(child, child_body, Some(id), depth + 1)?;
                    }
                }
                "vars" => {
                    let vars = mapping_or_empty(value).ok_or_else(|| {
                        self.fail(section_line, shape("variable names to values"))
                    })?;
                    for (var, value) in vars.iter() {
                        let (var_name, var) = self.var(var, value)?;
                        self.groups[id].vars.insert(var_name, var);
                    }
                }
                other => return Err(self.fail(
                    section_line,
                    format!(
                        "group '{}': unknown key '{}'; a group holds hosts:, children: and vars:",
                        escape(name),
                        escape(other)
                    ),
                )),
            }
        }
        Ok(())
    }

    /// Reads a `hosts:` entry, which may stand for a range of hosts.
    fn host(&mut self, key: &MarkedScalarNode, vars: &Node, group: usize) -> Result<()> {
        let line = line_of(key);
        let names = expand(key.as_str()).map_err(|why| self.fail(line, why))?;
        let Some(vars) = mapping_or_empty(vars) else {
            return Err(self.fail(
                line,
                format!(
                    "host '{}': its variables must be a mapping NAME: VALUE",
                    escape(key.as_str())
                ),
            ));
        };
        let mut read = Vec::new();
        for (var, value) in vars.iter() {
            read.push(self.var(var, value)?);
        }
        for name in names {
            check_name(&name)
                .map_err(|why| self.fail(line, format!("host '{}': {why}", escape(&name))))?;
            let index = match self.host_index.get(&name) {
                Some(&index) => index,
                None => {
                    self.hosts.push(HostEntry {
                        name: name.clone(),
                        vars: BTreeMap::new(),
                        groups: BTreeSet::new(),
                        line,
                    });
                    self.host_index.insert(name, self.hosts.len() - 1);
                    self.hosts.len() - 1
                }
            };
            self.hosts[index].groups.insert(group);
            self.groups[group].hosts.insert(index);
            self.hosts[index].vars.extend(read.iter().cloned());
        }
        Ok(())
    }

    /// Reads one variable, checking the ones ral uses.
    fn var(&self, key: &MarkedScalarNode, value: &Node) -> Result<(String, Var)> {
        let name = key.as_str();
        let line = match value {
            Node::Scalar(scalar) => line_of(scalar),
            _ => line_of(key),
        };
        let wrong = |what: &str| {
            self.fail(
                line,
                format!("{}: {what}, not {}", escape(name), shown(value)),
            )
        };
        let text = match value {
            Node::Scalar(scalar) if is_null(scalar) => None,
            Node::Scalar(scalar) => Some(scalar.as_str()),
            _ => {
                if KNOWN.contains(&name) {
                    return Err(wrong("expected a single value"));
                }
                return Ok((name.to_owned(), Var::Other(json(value).to_string())));
            }
        };
        let Some(text) = text else {
            let var = if KNOWN.contains(&name) {
                Var::Unset
            } else {
                Var::Other(String::new())
            };
            return Ok((name.to_owned(), var));
        };
        let var = match name {
            "ansible_host" | "ansible_user" | "ansible_ssh_private_key_file" if text.is_empty() => {
                return Err(wrong("expected a non-empty text"))
            }
            "ansible_host" => Var::Address(text.to_owned()),
            "ansible_user" => Var::User(text.to_owned()),
            "ansible_ssh_private_key_file" => Var::KeyFile(PathBuf::from(text)),
            "ansible_port" => match text.parse::<u16>() {
                Ok(port) if port > 0 && text.bytes().all(|b| b.is_ascii_digit()) => Var::Port(port),
                _ => return Err(wrong("expected a port, an integer from 1 to 65535")),
            },
            "ansible_become" => match text.to_ascii_lowercase().as_str() {
                "true" | "yes" | "on" | "1" => Var::Sudo(true),
                "false" | "no" | "off" | "0" => Var::Sudo(false),
                _ => return Err(wrong("expected a boolean (true, false, yes or no)")),
            },
            "ral_root" if !text.starts_with('/') => return Err(wrong("expected an absolute path")),
            "ral_root" => Var::Root(PathBuf::from(text)),
            _ => Var::Other(text.to_owned()),
        };
        Ok((name.to_owned(), var))
    }

    /// Checks the groups for cycles, then resolves every host.
    fn finish(mut self) -> Result<Inventory> {
        let depths = self.depths()?;
        // Hosts in no group but `all` are in `ungrouped`, as in Ansible.
        let lonely: Vec<usize> = (0..self.hosts.len())
            .filter(|&index| self.hosts[index].groups.iter().all(|&g| g == 0))
            .collect();
        if !lonely.is_empty() || self.group_index.contains_key("ungrouped") {
            let ungrouped = self.group_id("ungrouped", 0);
            self.groups[ungrouped].parents.insert(0);
            for index in lonely {
                self.hosts[index].groups.insert(ungrouped);
                self.groups[ungrouped].hosts.insert(index);
            }
        }
        let depth_of = |g: usize| depths.get(g).copied().unwrap_or(1);
        let mut members: BTreeMap<String, BTreeSet<usize>> = BTreeMap::new();
        for group in &self.groups {
            members.entry(group.name.clone()).or_default();
        }
        let mut hosts = Vec::with_capacity(self.hosts.len());
        for (index, entry) in self.hosts.iter().enumerate() {
            let mut groups = BTreeSet::new();
            let mut todo: Vec<usize> = entry.groups.iter().copied().collect();
            while let Some(g) = todo.pop() {
                if groups.insert(g) {
                    todo.extend(self.groups[g].parents.iter().copied());
                }
            }
            groups.insert(0);
            let mut order: Vec<usize> = groups.iter().copied().collect();
            order.sort_by(|&a, &b| {
                (depth_of(a), &self.groups[a].name).cmp(&(depth_of(b), &self.groups[b].name))
            });
            let mut vars: BTreeMap<&str, &Var> = BTreeMap::new();
            for &g in &order {
                vars.extend(self.groups[g].vars.iter().map(|(k, v)| (k.as_str(), v)));
            }
            vars.extend(entry.vars.iter().map(|(k, v)| (k.as_str(), v)));
            let mut host = Host {
                name: entry.name.clone(),
                address: entry.name.clone(),
                port: None,
                user: None,
                private_key_file: None,
                sudo: None,
                root: None,
                groups: BTreeSet::new(),
                vars: BTreeMap::new(),
                line: entry.line,
            };
            for (name, var) in vars {
                match var {
                    Var::Address(address) => host.address = address.clone(),
                    Var::Port(port) => host.port = Some(*port),
                    Var::User(user) => host.user = Some(user.clone()),
                    Var::KeyFile(file) => host.private_key_file = Some(file.clone()),
                    Var::Sudo(sudo) => host.sudo = Some(*sudo),
                    Var::Root(root) => host.root = Some(root.clone()),
                    Var::Unset => {}
                    Var::Other(text) => {
                        host.vars.insert(name.to_owned(), text.clone());
                    }
                }
            }
            for &g in &groups {
                let name = &self.groups[g].name;
                members.entry(name.clone()).or_default().insert(index);
                host.groups.insert(name.clone());
            }
            hosts.push(host);
        }
        Ok(Inventory {
            file: self.file.to_owned(),
            hosts,
            members,
        })
    }

    /// Each group's depth below `all` (the longest chain of parents), or
    /// the error of a group that is its own ancestor.
    fn depths(&self) -> Result<Vec<usize>> {
        #[derive(Clone, Copy, PartialEq)]
        enum State {
            New,
            Open,
            Done,
        }
        let mut state = vec![State::New; self.groups.len()];
        let mut depth = vec![0; self.groups.len()];
        for start in 0..self.groups.len() {
            if state[start] != State::New {
                continue;
            }
            // Depth-first over parents, without recursion: (group, next
            // parent to look at).
            let mut stack = vec![(start, 0usize)];
            state[start] = State::Open;
            while let Some(&mut (g, ref mut next)) = stack.last_mut() {
                let parents: Vec<usize> = self.groups[g].parents.iter().copied().collect();
                if let Some(&p) = parents.get(*next) {
                    *next += 1;
                    match state[p] {
                        State::Open => {
                            let group = &self.groups[p];
                            return Err(self.fail(
                                group.line,
                                format!(
                                    "group '{}' is its own ancestor through children:",
                                    escape(&group.name)
                                ),
                            ));
                        }
                        State::New => {
                            state[p] = State::Open;
                            stack.push((p, 0));
                        }
                        State::Done => {}
                    }
                } else {
                    depth[g] = parents.iter().map(|&p| depth[p] + 1).max().unwrap_or(0);
                    if depth[g] > MAX_GROUP_DEPTH {
                        let group = &self.groups[g];
                        return Err(self.fail(
                            group.line,
                            format!(
                                "group '{}' nests deeper than {MAX_GROUP_DEPTH} groups",
                                escape(&group.name)
                            ),
                        ));
                    }
                    state[g] = State::Done;
                    stack.pop();
                }
            }
        }
        Ok(depth)
    }
}

/// The variables ral reads; the others are kept as text.
const KNOWN: &[&str] = &[
    "ansible_host",
    "ansible_port",
    "ansible_user",
    "ansible_ssh_private_key_file",
    "ansible_become",
    "ral_root",
];

/// Refuses names a pattern could never select, or an ssh command line
/// could misread.
fn check_name(name: &str) -> std::result::Result<(), String> {
    if name.is_empty() {
        return Err("a name cannot be empty".to_owned());
    }
    if let Some(c) = name.chars().find(|&c| {
        c.is_whitespace() || c.is_control() || matches!(c, ',' | ':' | '!' | '&' | '*' | '?')
    }) {
        return Err(format!("a name cannot hold '{}'", escape(&c.to_string())));
    }
    if name.starts_with('-') {
        return Err("a name cannot start with '-'".to_owned());
    }
    Ok(())
}

/// The host names a ranged name stands for: `web[01:03].example` gives
/// `web01.example` to `web03.example`; `[a:c]` runs over letters, and an
/// optional third number is the step (`[1:9:2]`). Several ranges multiply.
fn expand(name: &str) -> std::result::Result<Vec<String>, String> {
    let malformed = |why: &str| {
        format!(
            "host '{}': {why}; a range is [START:END] or [START:END:STEP], with numbers or single letters",
            escape(name)
        )
    };
    let Some(open) = name.find(['[', ']']) else {
        return Ok(vec![name.to_owned()]);
    };
    if name.as_bytes()[open] == b']' {
        return Err(malformed("a ']' closes no range"));
    }
    let close = name[open..]
        .find(']')
        .map(|at| open + at)
        .ok_or_else(|| malformed("a '[' is not closed"))?;
    let (head, inner, tail) = (&name[..open], &name[open + 1..close], &name[close + 1..]);
    if inner.contains('[') {
        return Err(malformed("ranges cannot nest"));
    }
    let parts: Vec<&str> = inner.split(':').collect();
    let (start, end, step) = match parts[..] {
        [start, end] => (start, end, 1),
        [start, end, step] => {
            let step = step
                .parse::<usize>()
                .ok()
                .filter(|&s| s > 0 && step.bytes().all(|b| b.is_ascii_digit()))
                .ok_or_else(|| malformed("the step must be a positive integer"))?;
            (start, end, step)
        }
        _ => return Err(malformed(&format!("'[{}]' is not a range", escape(inner)))),
    };
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let letter = |s: &str| s.len() == 1 && s.as_bytes()[0].is_ascii_alphabetic();
    let values: Vec<String> = if digits(start) && digits(end) {
        let padded =
            (start.len() > 1 && start.starts_with('0')) || (end.len() > 1 && end.starts_with('0'));
        if padded && start.len() != end.len() {
            return Err(malformed(
                "a zero-padded range needs START and END of one width",
            ));
        }
        let (from, to) = match (start.parse::<u64>(), end.parse::<u64>()) {
            (Ok(from), Ok(to)) => (from, to),
            _ => return Err(malformed("a bound is too large")),
        };
        if from > to {
            return Err(malformed("START is after END"));
        }
        if (to - from) / step as u64 >= MAX_RANGE_HOSTS as u64 {
            return Err(malformed(&format!(
                "it stands for more than {MAX_RANGE_HOSTS} hosts"
            )));
        }
        let width = if padded { start.len() } else { 0 };
        (from..=to)
            .step_by(step)
            .map(|n| format!("{n:0width$}"))
            .collect()
    } else if letter(start) && letter(end) {
        let (from, to) = (start.as_bytes()[0], end.as_bytes()[0]);
        if from.is_ascii_lowercase() != to.is_ascii_lowercase() {
            return Err(malformed("START and END must be letters of one case"));
        }
        if from > to {
            return Err(malformed("START is after END"));
        }
        (from..=to)
            .step_by(step)
            .map(|c| (c as char).to_string())
            .collect()
    } else {
        return Err(malformed(&format!("'[{}]' is not a range", escape(inner))));
    };
    let tails = expand(tail).map_err(|_| malformed("the part after a range is wrong"))?;
    if values.len() * tails.len() > MAX_RANGE_HOSTS {
        return Err(malformed(&format!(
            "it stands for more than {MAX_RANGE_HOSTS} hosts"
        )));
    }
    let mut names = Vec::with_capacity(values.len() * tails.len());
    for value in &values {
        for tail in &tails {
            names.push(format!("{head}{value}{tail}"));
        }
    }
    Ok(names)
}

fn problem(file: &Path, line: usize, message: String) -> Error {
    Error::Inventory {
        problem: Problem {
            file: file.to_owned(),
            line,
            message,
        },
    }
}

fn line_of(scalar: &MarkedScalarNode) -> usize {
    scalar.span().start().map_or(0, |mark| mark.line())
}

fn is_null(scalar: &MarkedScalarNode) -> bool {
    scalar.may_coerce() && matches!(scalar.as_str(), "" | "~" | "null" | "Null" | "NULL")
}

/// A mapping, or an empty one for no value (`web1:` with nothing after it).
fn mapping_or_empty(node: &Node) -> Option<MarkedMappingNode> {
    match node {
        Node::Mapping(map) => Some(map.clone()),
        Node::Scalar(scalar) if is_null(scalar) => {
            Some(MarkedMappingNode::new_empty(*scalar.span()))
        }
        _ => None,
    }
}

/// A value as a message shows it.
fn shown(node: &Node) -> String {
    match node {
        Node::Scalar(scalar) => format!("'{}'", escape(scalar.as_str())),
        Node::Sequence(_) => "a list".to_owned(),
        Node::Mapping(_) => "a mapping".to_owned(),
    }
}

/// A list or mapping variable, kept as JSON text (its scalars as text).
fn json(node: &Node) -> serde_json::Value {
    match node {
        Node::Scalar(scalar) if is_null(scalar) => serde_json::Value::Null,
        Node::Scalar(scalar) => serde_json::Value::String(scalar.as_str().to_owned()),
        Node::Sequence(items) => items.iter().map(json).collect(),
        Node::Mapping(map) => serde_json::Value::Object(
            map.iter()
                .map(|(key, value)| (key.as_str().to_owned(), json(value)))
                .collect(),
        ),
    }
}

fn top_level_shape() -> String {
    "the top level must map group names to groups: all: {hosts: ..., children: ..., vars: ...}"
        .to_owned()
}

fn load_problem(file: &Path, error: marked_yaml::LoadError) -> Error {
    use marked_yaml::LoadError;
    let (line, message) = match error {
        LoadError::TopLevelMustBeMapping(mark) | LoadError::TopLevelMustBeSequence(mark) => {
            (mark.line(), top_level_shape())
        }
        LoadError::UnexpectedAnchor(mark) => (
            mark.line(),
            "anchors and aliases are not allowed: write each value out".to_owned(),
        ),
        LoadError::MappingKeyMustBeScalar(mark) => {
            (mark.line(), "a key must be a plain text".to_owned())
        }
        LoadError::UnexpectedTag(mark) => {
            (mark.line(), "YAML tags (!name) are not allowed".to_owned())
        }
        LoadError::ScanError(mark, e) => (mark.line(), format!("invalid YAML: {}", e.info())),
        LoadError::DuplicateKey(keys) => {
            let first = keys.prev_key.span().start().map_or(0, |m| m.line());
            let again = keys.key.span().start().map_or(0, |m| m.line());
            (
                again,
                format!(
                    "'{}' is given twice (first on line {first})",
                    escape(keys.key.as_str())
                ),
            )
        }
    };
    problem(file, line, message)
}

/// Refuses, before the YAML reader sees it, a second document (which it
/// would ignore) or nesting deeper than [`MAX_DEPTH`] (which could
/// exhaust the stack). Block nesting is counted from the indentation of
/// lines and their `- ` entries, flow nesting from brackets and braces
/// where a value starts or inside a flow collection; quoted text is
/// skipped. Overcounting can only refuse more.
fn nesting_problem(text: &str) -> Option<(usize, String)> {
    let mut content = false;
    let mut indents: Vec<usize> = Vec::new();
    let mut flow = 0usize;
    for (index, line) in text.lines().enumerate() {
        let number = index + 1;
        let marker = |m: &str| line == m || line.starts_with(&format!("{m} "));
        if marker("---") || marker("...") {
            if content {
                return Some((number, "an inventory is one YAML document".to_owned()));
            }
            continue;
        }
        let trimmed = line.trim_start();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        content = true;
        let mut indent = line.len() - trimmed.len();
        if flow == 0 {
            while indents.last().is_some_and(|&top| top > indent) {
                indents.pop();
            }
            if indents.last() != Some(&indent) {
                indents.push(indent);
            }
            // Each `- ` opens one more level, at its own column.
            let mut rest = trimmed;
            while let Some(after) = rest.strip_prefix("- ") {
                let skipped = after.len() - after.trim_start().len();
                indent += 2 + skipped;
                rest = after.trim_start();
                indents.push(indent);
            }
        }
        flow = flow_depth(trimmed, flow);
        if indents.len() + flow > MAX_DEPTH {
            return Some((
                number,
                format!("the inventory nests deeper than {MAX_DEPTH} levels here"),
            ));
        }
    }
    None
}

/// The flow nesting after `line`, starting at `depth` (see
/// [`nesting_problem`]).
fn flow_depth(line: &str, mut depth: usize) -> usize {
    let mut quote: Option<char> = None;
    let mut last = ':';
    let mut blank_before = true;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        let after_blank = std::mem::replace(&mut blank_before, matches!(c, ' ' | '\t'));
        if let Some(q) = quote {
            if q == '"' && c == '\\' {
                chars.next();
            } else if c == q {
                if q == '\'' && chars.peek() == Some(&'\'') {
                    chars.next();
                } else {
                    quote = None;
                    last = c;
                }
            }
            continue;
        }
        let starts_value = matches!(last, ':' | '-' | '[' | '{' | ',');
        match c {
            ' ' | '\t' => continue,
            '\'' | '"' if starts_value => quote = Some(c),
            '[' | '{' if depth > 0 || starts_value => depth += 1,
            ']' | '}' if depth > 0 => depth -= 1,
            '#' if after_blank => break,
            _ => {}
        }
        last = c;
        if depth > MAX_DEPTH {
            break;
        }
    }
    depth
}
