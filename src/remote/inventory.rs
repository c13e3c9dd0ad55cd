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
//! `ansible_ssh_common_args`, `ansible_ssh_extra_args`, `ansible_become`,
//! `ral_root`) are checked where they are written, so an
//! error names the line that holds the bad value; every other variable is
//! kept as text.
//!
//! [`Inventory::select`] takes a host pattern as `ansible --limit` does,
//! but stricter: a term that matches nothing is an error, not a warning.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use marked_yaml::types::{MarkedScalarNode, Node};

use crate::error::{Error, Problem, Result};
use crate::text::escape;
use crate::yaml_doc::{self, is_null, line_of, mapping_or_empty};

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
    /// `ansible_ssh_common_args`, as words: more options for ssh.
    pub ssh_common_args: Vec<String>,
    /// `ansible_ssh_extra_args`, as words: more options for ssh.
    pub ssh_extra_args: Vec<String>,
    /// `ansible_become`: run the providers with elevated rights.
    pub sudo: Option<bool>,
    /// `ral_root`: the target's root, as `--root`; always absolute.
    pub root: Option<PathBuf>,
    /// Every group the host is in, with their ancestors (so `all` too).
    pub groups: BTreeSet<String>,
    /// The other variables, as text (a list or mapping as JSON, null as
    /// the empty text).
    pub vars: BTreeMap<String, String>,
    /// Every variable the inventory gives the host (the connection ones
    /// too), typed as YAML types them, by where it is written, lowest
    /// precedence first: each group's `vars:` (`all` first, a parent
    /// before its children, groups of one depth by name), then the
    /// host's own. What manifests are rendered with (see
    /// the templating module).
    pub var_layers: Vec<VarLayer>,
    /// [`Host::groups`] in that order of precedence.
    pub group_order: Vec<String>,
    /// The line that first names the host.
    pub line: usize,
}

/// The variables one place of an inventory gives a host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VarLayer {
    /// The group whose `vars:` they are, or `None` for the host's own.
    pub group: Option<String>,
    /// Name, value and line, by name.
    pub vars: Vec<(String, serde_json::Value, usize)>,
}

/// A read inventory: its hosts in the order the file first names them.
#[derive(Debug, Clone)]
pub struct Inventory {
    file: PathBuf,
    hosts: Vec<Host>,
    /// Group name → the indexes of its hosts (members of descendants too).
    members: BTreeMap<String, BTreeSet<usize>>,
}

impl Host {
    /// Takes one variable: a connection variable sets its field, any
    /// other is kept as text.
    fn set(&mut self, name: &str, var: &Var) {
        match var {
            Var::Address(address) => self.address = address.clone(),
            Var::Port(port) => self.port = Some(*port),
            Var::User(user) => self.user = Some(user.clone()),
            Var::KeyFile(file) => self.private_key_file = Some(file.clone()),
            Var::SshCommonArgs(args) => self.ssh_common_args = args.clone(),
            Var::SshExtraArgs(args) => self.ssh_extra_args = args.clone(),
            Var::Sudo(sudo) => self.sudo = Some(*sudo),
            Var::Root(root) => self.root = Some(root.clone()),
            Var::Unset => {}
            Var::Other(text) => {
                self.vars.insert(name.to_owned(), text.clone());
            }
        }
    }
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
        if let Some((line, message)) = yaml_doc::shape_problem(text, "an inventory", MAX_DEPTH) {
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
    SshCommonArgs(Vec<String>),
    SshExtraArgs(Vec<String>),
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
    typed: BTreeMap<String, (serde_json::Value, usize)>,
    parents: BTreeSet<usize>,
    hosts: BTreeSet<usize>,
    line: usize,
}

#[derive(Debug)]
struct HostEntry {
    name: String,
    vars: BTreeMap<String, Var>,
    typed: BTreeMap<String, (serde_json::Value, usize)>,
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
            self.section(name, id, depth, section, value)?;
        }
        Ok(())
    }

    /// Reads one section of the body of the group `name` (`id`): its
    /// hosts, its children or its variables.
    fn section(
        &mut self,
        name: &str,
        id: usize,
        depth: usize,
        section: &MarkedScalarNode,
        value: &Node,
    ) -> Result<()> {
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
                let children = mapping_or_empty(value)
                    .ok_or_else(|| self.fail(section_line, shape("group names to their bodies")))?;
                for (child, child_body) in children.iter() {
                    self.group(child, child_body, Some(id), depth + 1)?;
                }
            }
            "vars" => {
                let vars = mapping_or_empty(value)
                    .ok_or_else(|| self.fail(section_line, shape("variable names to values")))?;
                for (key, value) in vars.iter() {
                    let (var_name, var) = self.var(key, value)?;
                    let typed = (yaml_doc::typed_json(value), line_of(key));
                    self.groups[id].typed.insert(var_name.clone(), typed);
                    self.groups[id].vars.insert(var_name, var);
                }
            }
            other => {
                return Err(self.fail(
                    section_line,
                    format!(
                        "group '{}': unknown key '{}'; a group holds hosts:, children: and vars:",
                        escape(name),
                        escape(other)
                    ),
                ))
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
        let mut typed = Vec::new();
        for (var, value) in vars.iter() {
            let (name, checked) = self.var(var, value)?;
            typed.push((name.clone(), (yaml_doc::typed_json(value), line_of(var))));
            read.push((name, checked));
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
                        typed: BTreeMap::new(),
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
            self.hosts[index].typed.extend(typed.iter().cloned());
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
            "ansible_ssh_common_args" => Var::SshCommonArgs(ssh_args(text).map_err(|e| wrong(&e))?),
            "ansible_ssh_extra_args" => Var::SshExtraArgs(ssh_args(text).map_err(|e| wrong(&e))?),
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
        self.add_ungrouped();
        let depth_of = |g: usize| depths.get(g).copied().unwrap_or(1);
        let mut members: BTreeMap<String, BTreeSet<usize>> = BTreeMap::new();
        for group in &self.groups {
            members.entry(group.name.clone()).or_default();
        }
        let mut hosts = Vec::with_capacity(self.hosts.len());
        for (index, entry) in self.hosts.iter().enumerate() {
            let groups = self.groups_of(entry);
            let mut order: Vec<usize> = groups.iter().copied().collect();
            order.sort_by(|&a, &b| {
                (depth_of(a), &self.groups[a].name).cmp(&(depth_of(b), &self.groups[b].name))
            });
            let mut host = self.resolved(entry, &order);
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

    /// Hosts in no group but `all` are in `ungrouped`, as in Ansible.
    fn add_ungrouped(&mut self) {
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
    }

    /// The groups `entry` is in: its own, their ancestors, and `all`.
    fn groups_of(&self, entry: &HostEntry) -> BTreeSet<usize> {
        let mut groups = BTreeSet::new();
        let mut todo: Vec<usize> = entry.groups.iter().copied().collect();
        while let Some(g) = todo.pop() {
            if groups.insert(g) {
                todo.extend(self.groups[g].parents.iter().copied());
            }
        }
        groups.insert(0);
        groups
    }

    /// The host of `entry`, its variables those of its groups in `order`
    /// (shallowest first) and then its own, each over the ones before.
    fn resolved(&self, entry: &HostEntry, order: &[usize]) -> Host {
        let mut vars: BTreeMap<&str, &Var> = BTreeMap::new();
        for &g in order {
            vars.extend(self.groups[g].vars.iter().map(|(k, v)| (k.as_str(), v)));
        }
        vars.extend(entry.vars.iter().map(|(k, v)| (k.as_str(), v)));
        let mut host = Host {
            name: entry.name.clone(),
            address: entry.name.clone(),
            port: None,
            user: None,
            private_key_file: None,
            ssh_common_args: Vec::new(),
            ssh_extra_args: Vec::new(),
            sudo: None,
            root: None,
            groups: BTreeSet::new(),
            vars: BTreeMap::new(),
            var_layers: Vec::new(),
            group_order: order.iter().map(|&g| self.groups[g].name.clone()).collect(),
            line: entry.line,
        };
        let layer = |group: Option<String>,
                     typed: &BTreeMap<String, (serde_json::Value, usize)>| {
            VarLayer {
                group,
                vars: typed
                    .iter()
                    .map(|(name, (value, line))| (name.clone(), value.clone(), *line))
                    .collect(),
            }
        };
        for &g in order {
            let group = &self.groups[g];
            if !group.typed.is_empty() {
                host.var_layers
                    .push(layer(Some(group.name.clone()), &group.typed));
            }
        }
        if !entry.typed.is_empty() {
            host.var_layers.push(layer(None, &entry.typed));
        }
        for (name, var) in vars {
            host.set(name, var);
        }
        host
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
    "ansible_ssh_common_args",
    "ansible_ssh_extra_args",
    "ansible_become",
    "ral_root",
];

/// `ansible_ssh_common_args` or `ansible_ssh_extra_args` as the words ssh
/// gets, after ral's own options (which therefore win: ssh keeps the
/// first value of an option). Options that would change what ssh does
/// rather than how it connects (run no command, go to the background,
/// drive or replace ral's connection sharing, ask for a terminal) are
/// refused, as is `--`, which would end the options early.
fn ssh_args(text: &str) -> std::result::Result<Vec<String>, String> {
    // ssh's flags that take a value (the rest of the word, or the next).
    const VALUED: &str = "BbcDEeFIiJLlmOoPpQRSWw";
    // What ral's sessions cannot work with: no command, the background, a
    // terminal, connection sharing of another's, no stdin, queries,
    // another configuration file (--ssh-config names it), debug output
    // that would drown the providers' own.
    const REFUSED: &str = "FfGMNnOQSsTtVvW";
    // The same as -o options, and the options ral sets itself per call.
    const REFUSED_OPTIONS: [&str; 10] = [
        "controlmaster",
        "controlpath",
        "controlpersist",
        "sessiontype",
        "requesttty",
        "forkafterauthentication",
        "remotecommand",
        "stdinnull",
        "loglevel",
        "batchmode",
    ];
    let refuse_option = |option: &str| {
        let name = option
            .split(|c: char| c == '=' || c.is_whitespace())
            .next()
            .unwrap_or_default();
        if REFUSED_OPTIONS.contains(&name.to_ascii_lowercase().as_str()) {
            return Err(format!(
                "-o {name} would change what ral's ssh sessions do (ral sets it); give only \
                 options of how to connect (such as -o StrictHostKeyChecking=yes)"
            ));
        }
        Ok(())
    };
    let words = shell_words::split(text).map_err(|e| format!("expected ssh options ({e})"))?;
    let mut value_next = false;
    let mut option_next = false;
    for word in &words {
        if std::mem::take(&mut option_next) {
            refuse_option(word)?;
        }
        if std::mem::take(&mut value_next) {
            continue;
        }
        let Some(flags) = word.strip_prefix('-').filter(|flags| !flags.is_empty()) else {
            return Err(format!("expected ssh options, and {word:?} is not one"));
        };
        for (at, flag) in flags.char_indices() {
            if REFUSED.contains(flag) {
                return Err(format!(
                    "-{flag} would change what ral's ssh sessions do; give only options of how \
                     to connect (such as -o StrictHostKeyChecking=yes)"
                ));
            }
            if !flag.is_ascii_alphanumeric() {
                return Err(format!("expected ssh options, and {word:?} is not one"));
            }
            if VALUED.contains(flag) {
                let rest = &flags[at + flag.len_utf8()..];
                value_next = rest.is_empty();
                if flag == 'o' {
                    if value_next {
                        option_next = true;
                    } else {
                        refuse_option(rest)?;
                    }
                }
                break;
            }
        }
    }
    if value_next {
        return Err(format!(
            "{:?} expects a value after it",
            words.last().map_or("", String::as_str)
        ));
    }
    Ok(words)
}

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
    let values = range_values(inner, &malformed)?;
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

/// The values one range `[START:END]` or `[START:END:STEP]` (`inner`,
/// without its brackets) runs over.
fn range_values(
    inner: &str,
    malformed: &dyn Fn(&str) -> String,
) -> std::result::Result<Vec<String>, String> {
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
    if digits(start) && digits(end) {
        number_range(start, end, step, malformed)
    } else if letter(start) && letter(end) {
        let (from, to) = (start.as_bytes()[0], end.as_bytes()[0]);
        if from.is_ascii_lowercase() != to.is_ascii_lowercase() {
            return Err(malformed("START and END must be letters of one case"));
        }
        if from > to {
            return Err(malformed("START is after END"));
        }
        Ok((from..=to)
            .step_by(step)
            .map(|c| (c as char).to_string())
            .collect())
    } else {
        Err(malformed(&format!("'[{}]' is not a range", escape(inner))))
    }
}

/// The numbers from `start` to `end` by `step`, zero-padded as written.
fn number_range(
    start: &str,
    end: &str,
    step: usize,
    malformed: &dyn Fn(&str) -> String,
) -> std::result::Result<Vec<String>, String> {
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
    Ok((from..=to)
        .step_by(step)
        .map(|n| format!("{n:0width$}"))
        .collect())
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

fn load_problem(file: &Path, error: marked_yaml::LoadError) -> Error {
    let (line, message) = yaml_doc::load_problem(error, &top_level_shape());
    problem(file, line, message)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> Inventory {
        Inventory::parse(text, Path::new("inv.yaml")).unwrap_or_else(|e| panic!("{e}"))
    }

    /// The problem a text gives, as `line: message`.
    fn refused(text: &str) -> (usize, String) {
        match Inventory::parse(text, Path::new("inv.yaml")) {
            Err(Error::Inventory { problem }) => {
                assert_eq!(problem.file, Path::new("inv.yaml"));
                (problem.line, problem.message)
            }
            Err(other) => panic!("another error: {other}"),
            Ok(inventory) => panic!("accepted: {:?}", inventory.hosts()),
        }
    }

    fn names(hosts: &[&Host]) -> Vec<String> {
        hosts.iter().map(|host| host.name.clone()).collect()
    }

    fn selected(inventory: &Inventory, pattern: &str) -> Vec<String> {
        names(&inventory.select(pattern).unwrap_or_else(|e| panic!("{e}")))
    }

    /// In the style of Ansible's inventory guide.
    const EXAMPLE: &str = "\
all:
  vars:
    ansible_user: deploy
    ansible_become: yes
    ntp_server: ntp.example.com
  hosts:
    mail.example.com:
  children:
    webservers:
      hosts:
        foo.example.com:
        bar.example.com:
          ansible_port: 2222
      vars:
        http_port: 80
    dbservers:
      hosts:
        one.example.com:
          ansible_host: 192.0.2.50
        two.example.com:
        three.example.com:
          ral_root: /srv/fake-root
    east:
      hosts:
        foo.example.com:
        one.example.com:
        two.example.com:
    west:
      hosts:
        bar.example.com:
        three.example.com:
      vars:
        ansible_become: no
    prod:
      children:
        east:
        west:
      vars:
        ansible_ssh_private_key_file: ~/.ssh/prod
    test:
      hosts:
        bar.example.com:
";

    #[test]
    fn a_realistic_inventory_resolves_every_host() {
        let inventory = read(EXAMPLE);
        let all: Vec<&Host> = inventory.hosts().iter().collect();
        assert_eq!(
            names(&all),
            [
                "mail.example.com",
                "foo.example.com",
                "bar.example.com",
                "one.example.com",
                "two.example.com",
                "three.example.com"
            ]
        );
        let mail = inventory.host("mail.example.com").unwrap();
        assert_eq!(mail.address, "mail.example.com");
        assert_eq!(mail.user.as_deref(), Some("deploy"));
        assert_eq!(mail.sudo, Some(true));
        assert_eq!(mail.port, None);
        assert_eq!(mail.private_key_file, None);
        assert_eq!(mail.groups.iter().collect::<Vec<_>>(), ["all", "ungrouped"]);
        assert_eq!(mail.vars["ntp_server"], "ntp.example.com");
        assert_eq!(mail.line, 7);

        let bar = inventory.host("bar.example.com").unwrap();
        assert_eq!(bar.port, Some(2222));
        // west (a child of prod) overrides all.
        assert_eq!(bar.sudo, Some(false));
        assert_eq!(
            bar.private_key_file.as_deref(),
            Some(Path::new("~/.ssh/prod"))
        );
        assert_eq!(
            bar.groups.iter().collect::<Vec<_>>(),
            ["all", "prod", "test", "webservers", "west"]
        );
        assert_eq!(bar.vars["http_port"], "80");

        let one = inventory.host("one.example.com").unwrap();
        assert_eq!(one.address, "192.0.2.50");
        assert_eq!(one.sudo, Some(true));
        assert!(!one.vars.contains_key("http_port"));
        let three = inventory.host("three.example.com").unwrap();
        assert_eq!(three.root.as_deref(), Some(Path::new("/srv/fake-root")));
        assert_eq!(
            inventory.groups().collect::<Vec<_>>(),
            [
                "all",
                "dbservers",
                "east",
                "prod",
                "test",
                "ungrouped",
                "webservers",
                "west"
            ]
        );
    }

    #[test]
    fn host_vars_beat_child_groups_which_beat_parents_which_beat_all() {
        let inventory = read(
            "\
all:
  vars: {level: all, a: all, b: all, c: all}
  children:
    parent:
      vars: {level: parent, a: parent, b: parent}
      children:
        child:
          vars: {level: child, a: child}
          hosts:
            h1: {level: host}
            h2:
",
        );
        let h1 = inventory.host("h1").unwrap();
        assert_eq!(h1.vars["level"], "host");
        assert_eq!(h1.vars["a"], "child");
        assert_eq!(h1.vars["b"], "parent");
        assert_eq!(h1.vars["c"], "all");
        assert_eq!(inventory.host("h2").unwrap().vars["level"], "child");
        assert_eq!(
            h1.groups.iter().collect::<Vec<_>>(),
            ["all", "child", "parent"]
        );
    }

    #[test]
    fn depth_decides_not_file_order_and_siblings_go_by_name() {
        // The child is written before its parent's vars, and a top-level
        // group's vars come after all's: depth still decides.
        let inventory = read(
            "\
web:
  children:
    web_eu:
      hosts: {h: }
      vars: {x: child}
  vars: {x: parent, y: web}
zeta:
  hosts: {h: }
  vars: {y: zeta}
all:
  vars: {x: all, y: all}
",
        );
        let h = inventory.host("h").unwrap();
        assert_eq!(h.vars["x"], "child");
        // web and zeta are both at depth one: the later name wins.
        assert_eq!(h.vars["y"], "zeta");
    }

    #[test]
    fn a_host_named_twice_merges_its_variables_and_groups() {
        let inventory = read(
            "\
all:
  hosts:
    h: {ansible_port: 22, a: first}
  children:
    g:
      hosts:
        h: {ansible_port: 2200}
",
        );
        assert_eq!(inventory.hosts().len(), 1);
        let h = &inventory.hosts()[0];
        assert_eq!(h.port, Some(2200));
        assert_eq!(h.vars["a"], "first");
        assert!(!h.groups.contains("ungrouped"));
    }

    #[test]
    fn a_null_known_variable_unsets_an_inherited_one() {
        let inventory =
            read("all:\n  vars: {ansible_user: deploy}\n  hosts:\n    h: {ansible_user: ~}\n");
        assert_eq!(inventory.host("h").unwrap().user, None);
    }

    #[test]
    fn booleans_are_read_as_ansible_reads_them() {
        for (text, sudo) in [
            ("true", true),
            ("True", true),
            ("yes", true),
            ("'yes'", true),
            ("on", true),
            ("false", false),
            ("no", false),
            ("NO", false),
            ("off", false),
        ] {
            let inventory = read(&format!(
                "all:\n  hosts:\n    h: {{ansible_become: {text}}}\n"
            ));
            assert_eq!(inventory.hosts()[0].sudo, Some(sudo), "{text}");
        }
    }

    #[test]
    fn lists_and_mappings_are_kept_as_json() {
        let inventory = read("all:\n  hosts:\n    h:\n      dns: [a, b]\n      empty:\n");
        let h = &inventory.hosts()[0];
        assert_eq!(h.vars["dns"], r#"["a","b"]"#);
        assert_eq!(h.vars["empty"], "");
    }

    #[test]
    fn ranges_expand_with_padding_letters_and_steps() {
        let inventory = read(
            "\
all:
  hosts:
    web[01:03].example:
      ansible_port: 2222
    db-[a:c]:
    odd[1:7:3]:
    r[1:2]-[x:y]:
    n[8:10]:
",
        );
        let all: Vec<&Host> = inventory.hosts().iter().collect();
        assert_eq!(
            names(&all),
            [
                "web01.example",
                "web02.example",
                "web03.example",
                "db-a",
                "db-b",
                "db-c",
                "odd1",
                "odd4",
                "odd7",
                "r1-x",
                "r1-y",
                "r2-x",
                "r2-y",
                "n8",
                "n9",
                "n10"
            ]
        );
        assert!(inventory.hosts()[..3].iter().all(|h| h.port == Some(2222)));
        assert_eq!(inventory.hosts()[1].line, 3);
    }

    #[test]
    fn malformed_ranges_are_refused_on_their_line() {
        for (range, why) in [
            ("web[01:3]", "one width"),
            ("web[3:1]", "START is after END"),
            ("web[1:]", "is not a range"),
            ("web[1]", "is not a range"),
            ("web[a:3]", "is not a range"),
            ("web[a:C]", "one case"),
            ("web[aa:b]", "is not a range"),
            ("web[1:3", "not closed"),
            ("web]1", "closes no range"),
            ("web[1:3:0]", "positive integer"),
            ("web[1:3:x]", "positive integer"),
            ("web[1:2:3:4]", "is not a range"),
            ("web[0:99999]", "more than 10000 hosts"),
            ("w[1:200][1:200]", "more than 10000 hosts"),
            ("web[1:2][3", "after a range"),
        ] {
            let (line, message) = refused(&format!("all:\n  hosts:\n    {range}:\n"));
            assert_eq!(line, 3, "{range}");
            assert!(message.contains(why), "{range}: {message}");
            assert!(message.contains("[START:END]"), "{range}: {message}");
        }
    }

    #[test]
    fn patterns_select_in_inventory_order_without_duplicates() {
        let inventory = read(EXAMPLE);
        let every = [
            "mail.example.com",
            "foo.example.com",
            "bar.example.com",
            "one.example.com",
            "two.example.com",
            "three.example.com",
        ];
        assert_eq!(selected(&inventory, "all"), every);
        assert_eq!(selected(&inventory, "*"), every);
        // A union, given in the other order.
        assert_eq!(
            selected(&inventory, "dbservers,webservers"),
            [
                "foo.example.com",
                "bar.example.com",
                "one.example.com",
                "two.example.com",
                "three.example.com"
            ]
        );
        assert_eq!(
            selected(&inventory, "webservers:dbservers:bar.example.com"),
            selected(&inventory, "dbservers,webservers")
        );
        // Exclusion and intersection, wherever they stand.
        assert_eq!(
            selected(&inventory, "!west,dbservers"),
            ["one.example.com", "two.example.com"]
        );
        assert_eq!(
            selected(&inventory, "webservers:&east"),
            ["foo.example.com"]
        );
        assert_eq!(
            selected(&inventory, "prod:&dbservers:!three.example.com"),
            ["one.example.com", "two.example.com"]
        );
        // Only exclusions start from every host.
        assert_eq!(selected(&inventory, "!prod"), ["mail.example.com"]);
        // Groups of groups.
        assert_eq!(
            selected(&inventory, "prod"),
            [
                "foo.example.com",
                "bar.example.com",
                "one.example.com",
                "two.example.com",
                "three.example.com"
            ]
        );
        assert_eq!(selected(&inventory, "ungrouped"), ["mail.example.com"]);
        // Wildcards over hosts and groups.
        assert_eq!(
            selected(&inventory, "t*.example.com"),
            ["two.example.com", "three.example.com"]
        );
        assert_eq!(
            selected(&inventory, "*servers:!w*"),
            ["one.example.com", "two.example.com"]
        );
        assert_eq!(selected(&inventory, "?ne.example.com"), ["one.example.com"]);
        assert_eq!(
            selected(&inventory, " east , mail.example.com "),
            [
                "mail.example.com",
                "foo.example.com",
                "one.example.com",
                "two.example.com"
            ]
        );
    }

    #[test]
    fn a_pattern_term_matching_nothing_or_an_empty_selection_is_an_error() {
        let inventory = read(EXAMPLE);
        for (pattern, needle) in [
            (
                "webservers,nosuch",
                "'nosuch' in the host pattern matches no host or group",
            ),
            ("webservers:!nosuch", "'!nosuch'"),
            ("webservers:&no*", "'&no*'"),
            (
                "webservers:&dbservers",
                "'webservers:&dbservers' selects no host",
            ),
            ("all:!all", "selects no host"),
            ("", "an empty term"),
            ("webservers,,dbservers", "an empty term"),
            ("webservers:!", "an empty term"),
        ] {
            match inventory.select(pattern) {
                Err(Error::Inventory { problem }) => {
                    assert_eq!(problem.line, 0);
                    assert!(
                        problem.message.contains(needle),
                        "{pattern}: {}",
                        problem.message
                    );
                    assert!(problem.to_string().starts_with("inv.yaml: "));
                }
                other => panic!("{pattern}: {other:?}"),
            }
        }
    }

    #[test]
    fn ssh_arguments_are_words_of_options_and_the_host_overrides_each() {
        let inventory = read(
            "all:\n  vars:\n    ansible_ssh_common_args: >-\n      -o StrictHostKeyChecking=no \
             -o 'UserKnownHostsFile=/tmp/known hosts'\n    ansible_ssh_extra_args: -4\n  \
             hosts:\n    a:\n    b: {ansible_ssh_extra_args: -oServerAliveInterval=5 -4C}\n",
        );
        let a = inventory.host("a").unwrap();
        assert_eq!(
            a.ssh_common_args,
            [
                "-o",
                "StrictHostKeyChecking=no",
                "-o",
                "UserKnownHostsFile=/tmp/known hosts"
            ]
        );
        assert_eq!(a.ssh_extra_args, ["-4"]);
        let b = inventory.host("b").unwrap();
        assert_eq!(b.ssh_common_args, a.ssh_common_args);
        assert_eq!(b.ssh_extra_args, ["-oServerAliveInterval=5", "-4C"]);
        for (args, needle) in [
            ("-N", "-N would change what ral's ssh sessions do"),
            ("-4tt", "-t would change"),
            ("-o ServerAliveInterval=5 -f", "-f would change"),
            ("-- host", "\"--\" is not one"),
            ("host", "\"host\" is not one"),
            ("-o", "\"-o\" expects a value after it"),
            ("-o 'unclosed", "expected ssh options ("),
            ("-oControlMaster=no", "-o ControlMaster would change"),
            ("-o controlpath=/tmp/x", "-o controlpath would change"),
            ("-o 'SessionType none'", "-o SessionType would change"),
            ("-4 -oRequestTTY=force", "-o RequestTTY would change"),
            ("-F /tmp/other_config", "-F would change"),
            ("-v", "-v would change"),
        ] {
            let (line, message) = refused(&format!(
                "all:\n  hosts:\n    h:\n      ansible_ssh_common_args: \"{}\"\n",
                args.replace('"', "\\\"")
            ));
            assert_eq!(line, 4, "{args}");
            assert!(message.contains(needle), "{args}: {message}");
        }
    }

    #[test]
    fn wrong_shapes_and_values_are_refused_on_their_line() {
        for (text, line, needle) in [
            ("all:\n  hosts: [a, b]\n", 2, "hosts must be a mapping"),
            ("all:\n  hosts: web1\n", 2, "hosts must be a mapping"),
            ("all:\n  children: [g]\n", 2, "children must be a mapping"),
            ("all:\n  vars: x\n", 2, "vars must be a mapping"),
            ("all: [a]\n", 1, "group 'all' must be a mapping"),
            ("all:\n  hostz: {}\n", 2, "unknown key 'hostz'"),
            (
                "all:\n  hosts:\n    h: x\n",
                3,
                "must be a mapping NAME: VALUE",
            ),
            (
                "all:\n  hosts:\n    h:\n      ansible_port: ssh\n",
                4,
                "ansible_port: expected a port",
            ),
            (
                "all:\n  hosts:\n    h:\n      ansible_port: 0\n",
                4,
                "expected a port",
            ),
            (
                "all:\n  hosts:\n    h:\n      ansible_port: 65536\n",
                4,
                "not '65536'",
            ),
            (
                "all:\n  hosts:\n    h:\n      ansible_port: -22\n",
                4,
                "expected a port",
            ),
            (
                "all:\n  hosts:\n    h:\n      ansible_port: 22.0\n",
                4,
                "expected a port",
            ),
            (
                "all:\n  hosts:\n    h:\n      ansible_port: [22]\n",
                4,
                "not a list",
            ),
            (
                "all:\n  vars:\n    ral_root: srv/root\n",
                3,
                "ral_root: expected an absolute path",
            ),
            (
                "all:\n  vars:\n    ansible_become: maybe\n",
                3,
                "expected a boolean",
            ),
            (
                "all:\n  vars:\n    ansible_user: ''\n",
                3,
                "expected a non-empty text",
            ),
            (
                "all:\n  vars:\n    ansible_host: {a: b}\n",
                3,
                "not a mapping",
            ),
            ("- all\n", 1, "the top level must map group names"),
            (
                "all:\n  hosts:\n    h:\n    h:\n",
                4,
                "'h' is given twice (first on line 3)",
            ),
            (
                "all:\n  vars: &v {a: b}\n",
                2,
                "anchors and aliases are not allowed",
            ),
            ("all:\n  hosts:\n    'bad host':\n", 3, "cannot hold ' '"),
            ("all:\n  hosts:\n    -h:\n", 3, "cannot start with '-'"),
            ("all:\n  children:\n    'a,b':\n", 3, "cannot hold ','"),
            (
                "all:\n  children:\n    g:\n      children:\n        all:\n",
                5,
                "'all' cannot be the child",
            ),
            ("all:\n  hosts: {a: }\n---\nall:\n", 3, "one YAML document"),
            ("all:\n  hosts: {a: [}\n", 2, "invalid YAML"),
            ("all:\n  vars: !!str x\n", 2, "tags"),
        ] {
            let (got_line, message) = refused(text);
            assert!(message.contains(needle), "{text:?}: {message}");
            assert_eq!(got_line, line, "{text:?}: {message}");
        }
    }

    #[test]
    fn a_cycle_in_children_is_refused() {
        let (line, message) = refused(
            "\
a:
  children:
    b:
b:
  children:
    c:
c:
  children:
    a:
",
        );
        assert!(message.contains("is its own ancestor"), "{message}");
        assert!((1..=9).contains(&line), "{line}");
        let (_, message) = refused("g:\n  children:\n    g:\n");
        assert!(message.contains("'g' is its own ancestor"), "{message}");
    }

    #[test]
    fn deep_nesting_is_refused_before_it_is_read() {
        // Groups nested in children: deeper than allowed.
        let mut text = String::from("all:\n");
        for level in 0..40 {
            let pad = "  ".repeat(2 * level + 1);
            text.push_str(&format!("{pad}children:\n{pad}  g{level}:\n"));
        }
        let (line, message) = refused(&text);
        assert!(message.contains("nests deeper than"), "{message}");
        assert!(line > 1, "{line}");
        // Flow nesting too deep for the YAML reader.
        let text = format!(
            "all:\n  vars:\n    x: {}{}\n",
            "[".repeat(10_000),
            "]".repeat(10_000)
        );
        let (line, message) = refused(&text);
        assert_eq!(line, 3);
        assert!(message.contains("64 levels"), "{message}");
        // Group depth through top-level chains, not nesting.
        let mut text = String::new();
        for level in 0..30 {
            text.push_str(&format!("g{level}:\n  children:\n    g{}:\n", level + 1));
        }
        let (_, message) = refused(&text);
        assert!(message.contains("nests deeper than 24 groups"), "{message}");
    }

    #[test]
    fn an_empty_inventory_has_no_hosts_and_selects_nothing() {
        let inventory = read("# nothing yet\n");
        assert!(inventory.hosts().is_empty());
        assert!(inventory.select("all").is_err());
        let inventory = read("all:\n");
        assert!(inventory.hosts().is_empty());
    }

    #[test]
    fn glob_matches_stars_and_question_marks() {
        assert!(glob("web*", "web01"));
        assert!(glob("*", ""));
        assert!(glob("*.example.*", "a.example.com"));
        assert!(glob("a*b*c", "aXbYbZc"));
        assert!(!glob("a*b*c", "aXbYbZ"));
        assert!(glob("w?b", "web"));
        assert!(!glob("web", "web1"));
    }

    #[test]
    fn load_reads_a_file_and_names_it() {
        let dir = std::env::temp_dir().join(format!("ral-inventory-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("hosts.yaml");
        std::fs::write(&path, "all:\n  hosts:\n    h:\n      ansible_port: x\n").unwrap();
        let error = Inventory::load(&path).unwrap_err().to_string();
        assert_eq!(
            error,
            format!(
                "{}:4: ansible_port: expected a port, an integer from 1 to 65535, not 'x'",
                path.display()
            )
        );
        std::fs::write(&path, EXAMPLE).unwrap();
        assert_eq!(Inventory::load(&path).unwrap().file(), path);
        let missing = Inventory::load(&dir.join("none.yaml"))
            .unwrap_err()
            .to_string();
        assert!(
            missing.contains("could not read the inventory"),
            "{missing}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
