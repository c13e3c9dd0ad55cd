//! `host::etc_hosts`: entries of `/etc/hosts` below the root (simple
//! calling convention), as the script it replaces kept them. The file is
//! edited line by line so that everything not managed stays byte for byte
//! as it was; a changed file replaces the old one atomically, under the
//! lock beside it. The canonical name (the first name of a line) is the
//! resource's name; when it is on several lines only the first is
//! managed.

use std::net::{Ipv4Addr, Ipv6Addr};

use serde_json::{Map, Value as Json};

use crate::files::{Attrs, Edit, Lock, Reused, Root};
use crate::serve::{simple_text, LINE_MAX};
use crate::text::{clean, escaped, has_control, join_words};
use crate::{error_entry, Call, CallError, CallResult, Change, Convention, Kind};
use crate::{Outcome, Provider, Resource, Update};

/// The file, relative to the root.
const HOSTS: &str = "etc/hosts";
/// What the C library's parser takes for field separators (isspace in the
/// C locale).
const ASCII_WS: &[u8] = b" \t\n\x0b\x0c\r";
/// The attributes an update may set.
const ATTRIBUTES: [&str; 4] = ["ensure", "ip", "host_aliases", "comment"];

/// The provider.
pub struct EtcHosts;

impl Provider for EtcHosts {
    fn metadata(&self) -> &'static str {
        include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../providers/etc_hosts.yaml"
        ))
    }

    fn convention(&self) -> Convention {
        Convention::Simple
    }

    fn get(&self, call: &Call, names: &[String]) -> CallResult<Vec<Resource>> {
        for name in names {
            check_hostname(name, "name", name)?;
        }
        let file = read_hosts(call)?;
        let lines = &file.lines;
        if names.is_empty() {
            return Ok(file
                .entries
                .values()
                .map(|&at| resource(&lines[at]))
                .collect());
        }
        let mut found = Vec::new();
        for name in names {
            match file.entries.get(name.as_bytes()) {
                Some(&at) => found.push(resource(&lines[at])),
                // Not in the file, and never could be: the name is
                // impossible.
                None => {
                    if let Some(problem) = name_syntax_problem(name) {
                        let err = CallError::of_kind(Kind::Unknown, problem);
                        found.push(error_entry(name, &err));
                    }
                }
            }
        }
        Ok(found)
    }

    fn set(&self, call: &Call, updates: &[Update]) -> CallResult<Vec<Outcome>> {
        updates
            .iter()
            .map(|update| update_one(call, update))
            .collect()
    }
}

/// One update, under the lock; a failure fails the call (the simple
/// convention has one update per call).
fn update_one(call: &Call, update: &Update) -> CallResult<Outcome> {
    let name = update.name.as_str();
    check_hostname(name, "name", name)?;
    let want = desired_state(&update.should, name)?;
    let root = Root::open(&call.root)?;
    let target = root.file(HOSTS, true, None)?;
    let mut edit = Edit::begin(Lock::beside(&target), call)?;
    let mut lines = parse(edit.read(&target)?.as_deref());
    let changes = apply(call, &mut lines, name, &want)?;
    if !changes.is_empty() {
        check_fits(name, &lines)?;
        edit.write(&target, content(&lines), Attrs::default())?;
        edit.commit()?;
    }
    Ok(Ok(changes))
}

/// The hosts file as read: its lines and its managed entries.
struct Parsed {
    lines: Vec<Line>,
    /// Canonical name → its first line.
    entries: indexmap::IndexMap<Vec<u8>, usize>,
}

/// The hosts file as last read, reused while it is unchanged: a plan
/// finds each of thousands of names in a call of its own.
static LAST: Reused<Parsed> = Reused::new();

/// The hosts file (no lines when it or `etc` is missing).
fn read_hosts(call: &Call) -> CallResult<std::sync::Arc<Parsed>> {
    LAST.get(call, HOSTS, |data| index(parse(data)))
}

fn index(lines: Vec<Line>) -> Parsed {
    let entries = entries(&lines)
        .into_iter()
        .map(|(name, at)| (name.to_vec(), at))
        .collect();
    Parsed { lines, entries }
}

// ---------------------------------------------------------------- checks

/// What an update asks for, checked.
#[derive(Debug, Default, PartialEq)]
struct Want {
    ensure: Option<String>,
    ip: Option<String>,
    aliases: Option<Vec<String>>,
    comment: Option<String>,
}

impl Want {
    fn is_empty(&self) -> bool {
        *self == Want::default()
    }
}

fn desired_state(should: &Map<String, Json>, name: &str) -> CallResult<Want> {
    refuse_unknown(should, name)?;
    let get = |attr: &str| should.get(attr);
    Ok(Want {
        ensure: get("ensure").map(|v| ensure_of(v, name)).transpose()?,
        ip: get("ip").map(|v| ip_of(v, name)).transpose()?,
        aliases: get("host_aliases")
            .map(|v| aliases_of(v, name))
            .transpose()?,
        comment: get("comment").map(|v| comment_of(v, name)).transpose()?,
    })
}

/// Refuses the first attribute (in sorted order) that a host has not.
fn refuse_unknown(should: &Map<String, Json>, name: &str) -> CallResult<()> {
    let mut unknown: Vec<&String> = should
        .keys()
        .filter(|key| !ATTRIBUTES.contains(&key.as_str()))
        .collect();
    unknown.sort();
    match unknown.first() {
        Some(key) => Err(CallError::new(format!(
            "unknown attribute {} for host {}",
            escaped(key),
            escaped(name)
        ))),
        None => Ok(()),
    }
}

/// The `ensure` of host `name`: `present` or `absent`.
fn ensure_of(value: &Json, name: &str) -> CallResult<String> {
    let ensure = simple_text(value);
    if ensure != "present" && ensure != "absent" {
        return Err(CallError::new(format!(
            "invalid ensure {} for host {}: must be 'present' or 'absent'",
            escaped(&ensure),
            escaped(name)
        )));
    }
    Ok(ensure)
}

/// The `ip` of host `name` (see [`ip_problem`]).
fn ip_of(value: &Json, name: &str) -> CallResult<String> {
    let ip = simple_text(value);
    if let Some(problem) = ip_problem(&ip) {
        return Err(CallError::new(format!(
            "invalid ip {} for host {}: {problem}",
            escaped(&ip),
            escaped(name)
        )));
    }
    Ok(ip)
}

/// The `host_aliases` of host `name`, each a valid host name.
fn aliases_of(value: &Json, name: &str) -> CallResult<Vec<String>> {
    let aliases: Vec<String> = match value {
        Json::Array(items) => items.iter().map(simple_text).collect(),
        other => alias_words(&simple_text(other), name)?,
    };
    for alias in &aliases {
        check_hostname(alias, "host_aliases entry", name)?;
        if let Some(problem) = name_syntax_problem(alias) {
            return Err(CallError::new(format!(
                "invalid host_aliases entry {} for host {}: {problem}",
                escaped(alias),
                escaped(name)
            )));
        }
    }
    Ok(aliases)
}

/// Aliases given as one text: words separated by spaces (a tab or a line
/// break would be one too, but no control character is taken).
fn alias_words(text: &str, name: &str) -> CallResult<Vec<String>> {
    if has_control(text) {
        return Err(CallError::new(format!(
            "invalid host_aliases {} for host {}: must not contain control characters",
            escaped(text),
            escaped(name)
        )));
    }
    shell_words::split(text).map_err(|err| {
        CallError::new(format!(
            "invalid host_aliases {} for host {}: {err}",
            escaped(text),
            escaped(name)
        ))
    })
}

/// The `comment` of host `name`: without control characters, and
/// trimmed, as it is read back (a padded comment would never converge).
fn comment_of(value: &Json, name: &str) -> CallResult<String> {
    let comment = simple_text(value);
    if has_control(&comment) {
        return Err(CallError::new(format!(
            "invalid comment {} for host {}: must not contain control characters",
            escaped(&comment),
            escaped(name)
        )));
    }
    if comment.trim() != comment {
        return Err(CallError::new(format!(
            "invalid comment {} for host {}: starts or ends with white space, which the file \
             does not keep",
            escaped(&comment),
            escaped(name)
        )));
    }
    Ok(comment)
}

/// Why `text` cannot be the address of an entry, or `None`: it must be
/// an IPv4 address (dotted, without leading zeros) or an IPv6 one, as the
/// C library's `inet_pton` reads them. An IPv6 address with a zone
/// (`fe80::1%eth0`), which Python's `ipaddress` takes, is refused: the C
/// library's resolver skips a line whose address it cannot read, so the
/// entry would be written and never found.
fn ip_problem(text: &str) -> Option<String> {
    if text.parse::<Ipv4Addr>().is_ok() || text.parse::<Ipv6Addr>().is_ok() {
        return None;
    }
    if let Some((address, zone)) = text.split_once('%') {
        if !zone.is_empty() && address.parse::<Ipv6Addr>().is_ok() {
            return Some(format!(
                "the zone {} is not read from /etc/hosts: the C library's resolver skips a \
                 line whose address has one",
                escaped(&format!("%{zone}"))
            ));
        }
    }
    Some("not an IPv4 or IPv6 address".to_owned())
}

/// Checks a canonical name or an alias; `what` names the attribute.
fn check_hostname(value: &str, what: &str, host: &str) -> CallResult<()> {
    let problem = if value.is_empty() {
        "must not be empty"
    } else if value.chars().any(is_space) {
        "must not contain whitespace"
    } else if value.contains('#') {
        "must not contain '#'"
    } else if has_control(value) {
        "must not contain control characters"
    } else {
        return Ok(());
    };
    Err(CallError::new(match what {
        "name" => format!("invalid name {}: {problem}", escaped(value)),
        _ => format!(
            "invalid {what} {} for host {}: {problem}",
            escaped(value),
            escaped(host)
        ),
    }))
}

/// Python's `str.isspace`: Unicode white space and the information
/// separators.
fn is_space(c: char) -> bool {
    c.is_whitespace() || ('\x1c'..='\x1f').contains(&c)
}

/// Why `value` cannot be a new host name or alias, or `None`. Names
/// already in the file are read whatever they look like; this stricter
/// rule is for names ral would write.
fn name_syntax_problem(value: &str) -> Option<String> {
    if value.chars().count() > 253 {
        return Some("longer than 253 characters".to_owned());
    }
    if value.len() > 1 && value.ends_with('.') {
        // A fully qualified name to DNS; to the C library's resolver, a
        // name like any other, which nobody asks for.
        return Some(
            "ends with '.': the C library's resolver reads /etc/hosts names as written, so \
             it would be found only when asked for with the '.'"
                .to_owned(),
        );
    }
    if value.starts_with(|c: char| c.is_ascii_digit())
        && value.chars().all(|c| c.is_ascii_digit() || c == '.')
    {
        // glibc takes a name of digits and dots for an IPv4 address
        // (`123` is 0.0.0.123) before any lookup, and one that is none
        // (`1.2.3.4.5`) for no host: it never looks in /etc/hosts.
        return Some(
            "is only digits and dots: the C library's resolver reads it as an IPv4 address \
             (or none), never looking it up in /etc/hosts"
                .to_owned(),
        );
    }
    if let Some(address) = inet_aton(value) {
        // getaddrinfo takes any name inet_aton reads (hex and octal
        // parts, fewer than four parts) for that address before any
        // lookup.
        return Some(format!(
            "is read by the C library's resolver as the IPv4 address {address} (inet_aton \
             takes hex parts, octal parts and fewer than four parts), never looked up in \
             /etc/hosts"
        ));
    }
    for label in value.split('.') {
        if label.is_empty() {
            return Some("has an empty label (two dots, or a leading dot)".to_owned());
        }
        let fits = label.chars().count() <= 63
            && label
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            && !label.starts_with('-')
            && !label.ends_with('-');
        if !fits {
            return Some(format!(
                "label {} must be 1 to 63 letters, digits, '_' or '-', not starting or ending \
                 with '-'",
                escaped(label)
            ));
        }
    }
    None
}

/// The address glibc's `inet_aton` reads `text` as, or `None`: one to
/// four parts separated by dots, each starting with a digit and read as
/// C's `strtoul` with base 0 reads it (`0x`/`0X` then hex digits, `0`
/// then octal digits, else decimal); every part but the last is a byte,
/// and the last fills the bytes left (`1.2` is 1.0.0.2). Parsed here
/// rather than asked of the C library so that the rule is the same
/// whichever C library ral was built with; the unit test holds it to
/// glibc's.
fn inet_aton(text: &str) -> Option<Ipv4Addr> {
    let parts: Vec<&str> = text.split('.').collect();
    if parts.len() > 4 {
        return None;
    }
    let values: Vec<u32> = parts
        .iter()
        .map(|part| aton_part(part))
        .collect::<Option<_>>()?;
    let (last, leading) = values.split_last()?;
    if leading.iter().any(|&byte| byte > 0xff) {
        return None;
    }
    let last_bits = 8 * (4 - leading.len() as u32);
    if last_bits < 32 && *last >> last_bits != 0 {
        return None;
    }
    let high = leading
        .iter()
        .enumerate()
        .fold(0u32, |acc, (at, &byte)| acc | byte << (24 - 8 * at));
    Some(Ipv4Addr::from(high | last))
}

/// One part of an `inet_aton` address: `strtoul(part, &end, 0)` that
/// must start with a digit, use the whole part and fit in 32 bits.
fn aton_part(part: &str) -> Option<u32> {
    if !part.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    let (digits, radix) =
        if let Some(hex) = part.strip_prefix("0x").or_else(|| part.strip_prefix("0X")) {
            (hex, 16)
        } else if part.len() > 1 && part.starts_with('0') {
            (&part[1..], 8)
        } else {
            (part, 10)
        };
    // from_str_radix would take a sign; strtoul does not after the
    // prefix, and a part "0x" alone is a 0 followed by junk.
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    u32::from_str_radix(digits, radix).ok()
}

// ------------------------------------------------------------ the file

/// One line: its bytes without the line ending, the ending (`\n`,
/// `\r\n`, or nothing for a last line without one) and, for an entry, its
/// fields.
#[derive(Debug, Clone, PartialEq)]
struct Line {
    text: Vec<u8>,
    ending: &'static [u8],
    entry: Option<Entry>,
}

#[derive(Debug, Clone, PartialEq)]
struct Entry {
    ip: Vec<u8>,
    name: Vec<u8>,
    aliases: Vec<Vec<u8>>,
    comment: Vec<u8>,
}

impl Line {
    fn new(text: &[u8], ending: &'static [u8]) -> Line {
        Line {
            text: text.to_vec(),
            ending,
            entry: parse_entry(text),
        }
    }
}

fn strip_ws(bytes: &[u8]) -> &[u8] {
    let start = bytes.iter().position(|b| !ASCII_WS.contains(b));
    let Some(start) = start else {
        return &[];
    };
    let end = bytes
        .iter()
        .rposition(|b| !ASCII_WS.contains(b))
        .unwrap_or(start);
    &bytes[start..=end]
}

fn parse_entry(text: &[u8]) -> Option<Entry> {
    let stripped = strip_ws(text);
    if stripped.is_empty() || stripped[0] == b'#' {
        return None;
    }
    let (data, comment) = match stripped.iter().position(|&b| b == b'#') {
        Some(at) => (&stripped[..at], strip_ws(&stripped[at + 1..])),
        None => (stripped, &[][..]),
    };
    let mut fields = data
        .split(|b| ASCII_WS.contains(b))
        .filter(|field| !field.is_empty())
        .map(<[u8]>::to_vec);
    let ip = fields.next()?;
    let name = fields.next()?;
    Some(Entry {
        ip,
        name,
        aliases: fields.collect(),
        comment: comment.to_vec(),
    })
}

impl Entry {
    /// The entry's line (without its ending) after a change.
    fn format(&self) -> Vec<u8> {
        let mut text = self.ip.clone();
        text.push(b'\t');
        text.extend_from_slice(&self.name);
        for alias in &self.aliases {
            text.push(b' ');
            text.extend_from_slice(alias);
        }
        if !self.comment.is_empty() {
            text.extend_from_slice(b"\t# ");
            text.extend_from_slice(&self.comment);
        }
        text
    }
}

/// The lines of the file (none for no file).
fn parse(data: Option<&[u8]>) -> Vec<Line> {
    let Some(data) = data else {
        return Vec::new();
    };
    let mut parts: Vec<&[u8]> = data.split(|&b| b == b'\n').collect();
    let last = parts.pop().unwrap_or_default();
    let mut lines: Vec<Line> = parts
        .into_iter()
        .map(|text| match text.strip_suffix(b"\r") {
            // A CRLF ending stays with its line, so a rewritten line
            // keeps it too.
            Some(text) => Line::new(text, b"\r\n"),
            None => Line::new(text, b"\n"),
        })
        .collect();
    if !last.is_empty() {
        lines.push(Line::new(last, b""));
    }
    lines
}

fn content(lines: &[Line]) -> Vec<u8> {
    let mut out = Vec::new();
    for line in lines {
        out.extend_from_slice(&line.text);
        out.extend_from_slice(line.ending);
    }
    out
}

/// The managed entries: the first line of each canonical name, by name,
/// in the file's order.
fn entries(lines: &[Line]) -> indexmap::IndexMap<&[u8], usize> {
    let mut seen = indexmap::IndexMap::new();
    for (at, line) in lines.iter().enumerate() {
        if let Some(entry) = &line.entry {
            seen.entry(entry.name.as_slice()).or_insert(at);
        }
    }
    seen
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn aliases_text(aliases: &[Vec<u8>]) -> String {
    let words: Vec<String> = aliases.iter().map(|a| text(a)).collect();
    join_words(&words)
}

/// An entry as a resource.
fn resource(line: &Line) -> Resource {
    let entry = line.entry.as_ref().expect("an entry line");
    let mut resource = Resource::new();
    resource.insert("name".into(), Json::from(text(&entry.name)));
    resource.insert("ensure".into(), Json::from("present"));
    resource.insert("ip".into(), Json::from(text(&entry.ip)));
    let aliases: Vec<Json> = entry.aliases.iter().map(|a| Json::from(text(a))).collect();
    resource.insert("host_aliases".into(), Json::Array(aliases));
    if !entry.comment.is_empty() {
        resource.insert("comment".into(), Json::from(text(&entry.comment)));
    }
    resource
}

// ------------------------------------------------------------- changes

/// Changes `lines` as `want` says; returns the changes.
fn apply(call: &Call, lines: &mut Vec<Line>, name: &str, want: &Want) -> CallResult<Vec<Change>> {
    let at = entries(lines).get(name.as_bytes()).copied();
    let removing = want.ensure.as_deref() == Some("absent");
    if at.is_none() && (removing || want.is_empty()) {
        return Ok(Vec::new());
    }
    let log = &call.log;
    match at {
        Some(at) if removing => log.deleting(name, || {
            lines.remove(at);
            Ok(vec![Change::new("ensure", "present", "absent")])
        }),
        None => {
            let changes = log.creating(name, || create(lines, name, want))?;
            warn_shared_names(call, lines, lines.len() - 1);
            Ok(changes)
        }
        Some(at) => {
            let changes = log.updating(name, || Ok(update(&mut lines[at], want)))?;
            if !changes.is_empty() {
                warn_shared_names(call, lines, at);
            }
            Ok(changes)
        }
    }
}

/// Warns of each name of the entry on line `at` that another entry of
/// the same address family also has: the C library's resolver compares
/// names without regard to case, and finds the first line of a name only.
/// (`localhost` on an IPv4 line and an IPv6 one is as it should be.)
fn warn_shared_names(call: &Call, lines: &[Line], at: usize) {
    let Some(entry) = &lines[at].entry else {
        return;
    };
    let family = |ip: &[u8]| std::str::from_utf8(ip).is_ok_and(|ip| ip.parse::<Ipv4Addr>().is_ok());
    let mine = family(&entry.ip);
    for name in std::iter::once(&entry.name).chain(&entry.aliases) {
        let shared = lines.iter().enumerate().find(|(other, line)| {
            line.entry.as_ref().is_some_and(|e| {
                *other != at
                    && family(&e.ip) == mine
                    && std::iter::once(&e.name)
                        .chain(&e.aliases)
                        .any(|n| n.eq_ignore_ascii_case(name))
            })
        });
        if let Some((other, line)) = shared {
            call.log.warning(&format!(
                "host {}: {} is also a name on line {} ({}), and the C library's resolver, \
                 which compares names without regard to case, finds the first line of a name \
                 only",
                escaped(&text(&entry.name)),
                escaped(&text(name)),
                other + 1,
                escaped(&text(&line.text))
            ));
        }
    }
}

fn create(lines: &mut Vec<Line>, name: &str, want: &Want) -> CallResult<Vec<Change>> {
    if let Some(problem) = name_syntax_problem(name) {
        return Err(CallError::new(format!(
            "cannot create host {}: the name {problem}",
            escaped(name)
        )));
    }
    let Some(ip) = &want.ip else {
        return Err(CallError::new(format!(
            "cannot create host {}: ip is required",
            escaped(name)
        )));
    };
    let entry = Entry {
        ip: ip.as_bytes().to_vec(),
        name: name.as_bytes().to_vec(),
        aliases: want
            .aliases
            .iter()
            .flatten()
            .map(|a| a.as_bytes().to_vec())
            .collect(),
        comment: want.comment.clone().unwrap_or_default().into_bytes(),
    };
    if let Some(last) = lines.last_mut() {
        if last.ending.is_empty() {
            last.ending = b"\n";
        }
    }
    // Everything asked for is reported, empty values too: the host checks
    // that each requested attribute was accounted for.
    let mut changes = vec![
        Change::new("ensure", "absent", "present"),
        Change::new("ip", "", ip.as_str()),
    ];
    if !entry.aliases.is_empty() || want.aliases.is_some() {
        changes.push(Change::new(
            "host_aliases",
            "",
            aliases_text(&entry.aliases),
        ));
    }
    if !entry.comment.is_empty() || want.comment.is_some() {
        changes.push(Change::new("comment", "", text(&entry.comment)));
    }
    lines.push(Line {
        text: entry.format(),
        ending: b"\n",
        entry: Some(entry),
    });
    Ok(changes)
}

fn update(line: &mut Line, want: &Want) -> Vec<Change> {
    let entry = line.entry.as_mut().expect("an entry line");
    let mut changes = Vec::new();
    if let Some(ip) = &want.ip {
        if ip.as_bytes() != entry.ip {
            changes.push(Change::new("ip", text(&entry.ip), ip.as_str()));
            entry.ip = ip.as_bytes().to_vec();
        }
    }
    if let Some(aliases) = &want.aliases {
        let new: Vec<Vec<u8>> = aliases.iter().map(|a| a.as_bytes().to_vec()).collect();
        if new != entry.aliases {
            changes.push(Change::new(
                "host_aliases",
                aliases_text(&entry.aliases),
                aliases_text(&new),
            ));
            entry.aliases = new;
        }
    }
    if let Some(comment) = &want.comment {
        if comment.as_bytes() != entry.comment {
            changes.push(Change::new(
                "comment",
                text(&entry.comment),
                comment.as_str(),
            ));
            entry.comment = comment.as_bytes().to_vec();
        }
    }
    if !changes.is_empty() {
        line.text = entry.format();
    }
    changes
}

/// Refuses an entry ral could not list again: each of its `key: value`
/// lines must fit the line limit.
fn check_fits(name: &str, lines: &[Line]) -> CallResult<()> {
    let Some(&at) = entries(lines).get(name.as_bytes()) else {
        return Ok(());
    };
    for (key, value) in resource(&lines[at]) {
        let size = format!("{key}: {}", clean(&simple_text(&value))).len() + 1;
        if size > LINE_MAX {
            return Err(CallError::new(format!(
                "{key} of {} would make a line of {size} bytes, longer than the {LINE_MAX} ral \
                 reads, so it could not be read back; nothing was changed",
                escaped(name)
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn lines_parse_as_the_c_library_reads_them_and_unmanaged_bytes_survive() {
        let data = b"127.0.0.1\tlocalhost\n::1 localhost ip6-localhost\r\n# c\n\n10.0.0.1 db db.lan  # main db \nbad\n\xff\xfe x y\nlast no-newline";
        let lines = parse(Some(data));
        assert_eq!(content(&lines), data.to_vec());
        let managed = entries(&lines);
        let names: Vec<&[u8]> = managed.keys().copied().collect();
        assert_eq!(
            names,
            vec![&b"localhost"[..], b"db", b"x", b"no-newline"],
            "the first localhost line wins"
        );
        let db = lines[managed[&b"db"[..]]].entry.clone().unwrap();
        assert_eq!(db.aliases, vec![b"db.lan".to_vec()]);
        assert_eq!(db.comment, b"main db".to_vec());
        assert_eq!(lines[1].ending, b"\r\n");
    }

    #[test]
    fn names_are_checked_as_the_c_library_reads_them() {
        assert_eq!(name_syntax_problem("db.example"), None);
        assert_eq!(
            name_syntax_problem("db.example.").as_deref(),
            Some(
                "ends with '.': the C library's resolver reads /etc/hosts names as written, \
                 so it would be found only when asked for with the '.'"
            )
        );
        assert_eq!(
            name_syntax_problem("a..b").as_deref(),
            Some("has an empty label (two dots, or a leading dot)")
        );
        assert!(name_syntax_problem("-x").unwrap().starts_with("label '-x'"));
        assert!(name_syntax_problem(&"a".repeat(64)).is_some());
        assert!(name_syntax_problem(&"a.".repeat(127)).is_some());
        // 253 characters is the longest name; labels may hold '_' and '-'.
        let label = "a".repeat(63);
        let longest = format!("{label}.{label}.{label}.{}", "b_-c".repeat(15) + "d");
        assert_eq!(longest.len(), 253);
        assert_eq!(name_syntax_problem(&longest), None);
        assert_eq!(
            name_syntax_problem(&format!("{longest}e")).as_deref(),
            Some("longer than 253 characters")
        );
        assert_eq!(name_syntax_problem("web_1-a"), None);
        // A lone dot is an empty label, not a name ending in a dot.
        assert_eq!(
            name_syntax_problem(".").as_deref(),
            Some("has an empty label (two dots, or a leading dot)")
        );
        // The C library's resolver reads these as addresses (123 as
        // 0.0.0.123), or as no host at all, without looking in the file.
        for numeric in ["123", "1.2.3.4", "10.0.0.1", "1.2.3.4.5", "0"] {
            assert_eq!(
                name_syntax_problem(numeric).as_deref(),
                Some(
                    "is only digits and dots: the C library's resolver reads it as an IPv4 \
                     address (or none), never looking it up in /etc/hosts"
                ),
                "{numeric}"
            );
        }
        // getaddrinfo reads these as addresses too (inet_aton's hex
        // forms), and looks nothing up.
        for (numeric, address) in [
            ("0x10", "0.0.0.16"),
            ("0X7f.1", "127.0.0.1"),
            ("1.0x2", "1.0.0.2"),
            ("0xa.0xb", "10.0.0.11"),
            ("0x0a000001", "10.0.0.1"),
            ("0XDEADBEEF", "222.173.190.239"),
        ] {
            assert_eq!(
                name_syntax_problem(numeric),
                Some(format!(
                    "is read by the C library's resolver as the IPv4 address {address} \
                     (inet_aton takes hex parts, octal parts and fewer than four parts), never \
                     looked up in /etc/hosts"
                )),
                "{numeric}"
            );
        }
        for name in [
            "1e3",
            "0xfoo",
            "0x",
            "0x.1",
            "08x",
            "1-2",
            "a.1",
            "1.2.3.4a",
            "4294967296x",
            "0x100000000",
            "web1",
            "0x100.1",
        ] {
            assert_eq!(name_syntax_problem(name), None, "{name}");
        }
        let err = check_hostname("a b", "name", "a b").unwrap_err();
        assert_eq!(
            err.message,
            "invalid name 'a b': must not contain whitespace"
        );
        let err = check_hostname("x#", "host_aliases entry", "db").unwrap_err();
        assert_eq!(
            err.message,
            "invalid host_aliases entry 'x#' for host 'db': must not contain '#'"
        );
    }

    /// The parser agrees with glibc's own `inet_aton` on the forms it
    /// reads and the near misses it does not.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[test]
    fn inet_aton_reads_names_as_glibc_does() {
        extern "C" {
            #[link_name = "inet_aton"]
            fn glibc_inet_aton(cp: *const libc::c_char, inp: *mut libc::in_addr) -> libc::c_int;
        }
        let glibc = |text: &str| {
            let text = std::ffi::CString::new(text).unwrap();
            let mut address = libc::in_addr { s_addr: 0 };
            // SAFETY: `text` is a NUL-terminated string that outlives the
            // call, and `address` is a valid in_addr to write to.
            let read = unsafe { glibc_inet_aton(text.as_ptr(), &mut address) };
            (read != 0).then(|| Ipv4Addr::from(u32::from_be(address.s_addr)))
        };
        let cases = [
            "0x10",
            "0X7f.1",
            "1.0x2",
            "0xa.0xb",
            "0x0a000001",
            "0XDEADBEEF",
            "0xfoo",
            "0x",
            "0x.1",
            "0x1.",
            ".1",
            "1..2",
            "010",
            "08",
            "0o7",
            "00",
            "0",
            "1.2.3.4",
            "1.2.3.4.5",
            "1.2.3.256",
            "1.2.65535",
            "1.2.65536",
            "1.16777215",
            "1.16777216",
            "4294967295",
            "4294967296",
            "0x100000000",
            "0xffffffff",
            "0x00000000ff",
            "0x100.1",
            "1.0x100.1",
            "255.255.255.255",
            "1e3",
            "0x1g",
            "-1",
            "+1",
            "1.-1",
            "1.+1",
            "0x-1",
            "0x+1",
            "0x 1",
            "web1",
            "a.1",
            "",
        ];
        for text in cases {
            assert_eq!(inet_aton(text), glibc(text), "{text:?}");
        }
    }

    #[test]
    fn addresses_are_those_the_c_library_reads() {
        for good in ["10.0.0.1", "::1", "fe80::1", "::ffff:1.2.3.4"] {
            assert_eq!(ip_problem(good), None, "{good}");
        }
        for bad in ["999.1.1.1", "01.2.3.4", "1.2.3", "fe80::1%", "x", ""] {
            assert_eq!(
                ip_problem(bad).as_deref(),
                Some("not an IPv4 or IPv6 address"),
                "{bad}"
            );
        }
        assert_eq!(
            ip_problem("fe80::1%eth0").as_deref(),
            Some(
                "the zone '%eth0' is not read from /etc/hosts: the C library's resolver skips \
                 a line whose address has one"
            )
        );
    }

    fn want(pairs: &[(&str, Json)]) -> Want {
        let should: Map<String, Json> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect();
        desired_state(&should, "db").unwrap()
    }

    fn call() -> Call {
        let log = crate::Log::new(Box::new(std::io::sink()), false);
        Call::new("/nonexistent", false, log)
    }

    #[test]
    fn an_update_rewrites_only_its_line_and_reports_old_values() {
        let mut lines = parse(Some(b"# top\n10.0.0.1 db old # c\n10.0.0.9 web"));
        let changes = apply(
            &call(),
            &mut lines,
            "db",
            &want(&[("ip", "10.0.0.2".into()), ("host_aliases", "a 'b'".into())]),
        )
        .unwrap();
        assert_eq!(
            changes,
            vec![
                Change::new("ip", "10.0.0.1", "10.0.0.2"),
                Change::new("host_aliases", "old", "a b"),
            ]
        );
        assert_eq!(
            content(&lines),
            b"# top\n10.0.0.2\tdb a b\t# c\n10.0.0.9 web".to_vec()
        );
    }

    #[test]
    fn a_new_entry_is_appended_after_a_last_line_without_newline() {
        let mut lines = parse(Some(b"10.0.0.9 web"));
        let changes = apply(
            &call(),
            &mut lines,
            "db",
            &want(&[("ip", "10.0.0.1".into())]),
        )
        .unwrap();
        assert_eq!(
            changes,
            vec![
                Change::new("ensure", "absent", "present"),
                Change::new("ip", "", "10.0.0.1")
            ]
        );
        assert_eq!(content(&lines), b"10.0.0.9 web\n10.0.0.1\tdb\n".to_vec());
        let err = apply(&call(), &mut lines, "new", &want(&[])).unwrap();
        assert!(err.is_empty(), "nothing asked, nothing done");
        let err = apply(
            &call(),
            &mut lines,
            "new",
            &want(&[("comment", "x".into())]),
        )
        .unwrap_err();
        assert_eq!(err.message, "cannot create host 'new': ip is required");
    }

    #[test]
    fn removing_takes_out_the_first_line_only() {
        let mut lines = parse(Some(b"1.1.1.1 a\n2.2.2.2 a\n"));
        let changes = apply(
            &call(),
            &mut lines,
            "a",
            &want(&[("ensure", "absent".into())]),
        )
        .unwrap();
        assert_eq!(changes, vec![Change::new("ensure", "present", "absent")]);
        assert_eq!(content(&lines), b"2.2.2.2 a\n".to_vec());
    }

    #[test]
    fn bad_values_are_refused_with_the_attribute_and_host_named() {
        let check = |key: &str, value: &str| {
            let should: Map<String, Json> =
                [(key.to_owned(), Json::from(value))].into_iter().collect();
            desired_state(&should, "db").unwrap_err().message
        };
        assert_eq!(
            check("ip", "999.1.1.1"),
            "invalid ip '999.1.1.1' for host 'db': not an IPv4 or IPv6 address"
        );
        assert_eq!(
            check("ensure", "maybe"),
            "invalid ensure 'maybe' for host 'db': must be 'present' or 'absent'"
        );
        assert_eq!(
            check("bogus", "1"),
            "unknown attribute 'bogus' for host 'db'"
        );
        assert_eq!(
            check("comment", "a\x07"),
            "invalid comment 'a\\u{7}' for host 'db': must not contain control characters"
        );
        assert_eq!(
            check("host_aliases", "web1 0x0a000001"),
            "invalid host_aliases entry '0x0a000001' for host 'db': is read by the C library's \
             resolver as the IPv4 address 10.0.0.1 (inet_aton takes hex parts, octal parts and \
             fewer than four parts), never looked up in /etc/hosts"
        );
        let ip = want(&[("ip", Json::from("10.9.9.9"))]);
        assert_eq!(
            create(&mut Vec::new(), "0x10", &ip).unwrap_err().message,
            "cannot create host '0x10': the name is read by the C library's resolver as the \
             IPv4 address 0.0.0.16 (inet_aton takes hex parts, octal parts and fewer than four \
             parts), never looked up in /etc/hosts"
        );
        assert_eq!(
            check("comment", " main db "),
            "invalid comment ' main db ' for host 'db': starts or ends with white space, which \
             the file does not keep"
        );
    }

    /// Unicode's control characters (Cc): C0, DEL and C1.
    pub(crate) fn controls() -> impl Iterator<Item = char> {
        (0u32..0x20)
            .chain([0x7f])
            .chain(0x80..0xa0)
            .filter_map(char::from_u32)
    }

    /// `a{c}b` as a message must show it: the control character escaped.
    pub(crate) fn shown(c: char) -> String {
        match c {
            '\n' => "'a\\nb'".to_owned(),
            '\t' => "'a\\tb'".to_owned(),
            '\r' => "'a\\rb'".to_owned(),
            c => format!("'a\\u{{{:x}}}b'", u32::from(c)),
        }
    }

    #[test]
    fn control_characters_are_refused_in_every_attribute_and_shown_escaped() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("etc")).unwrap();
        let log = crate::Log::new(Box::new(std::io::sink()), false);
        let call = Call::new(dir.path(), false, log);
        for c in controls() {
            let value = format!("a{c}b");
            let update = |name: &str, should: Json| Update {
                name: name.to_owned(),
                is: Resource::new(),
                should: should.as_object().cloned().unwrap(),
            };
            let cases = [
                (
                    "name",
                    update(&value, serde_json::json!({"ip": "10.0.0.1"})),
                ),
                ("ip", update("db", serde_json::json!({"ip": value}))),
                (
                    "host_aliases",
                    update(
                        "db",
                        serde_json::json!({"ip": "10.0.0.1", "host_aliases": [value]}),
                    ),
                ),
                (
                    "host_aliases",
                    update(
                        "db",
                        serde_json::json!({"ip": "10.0.0.1", "host_aliases": value}),
                    ),
                ),
                (
                    "comment",
                    update(
                        "db",
                        serde_json::json!({"ip": "10.0.0.1", "comment": value}),
                    ),
                ),
            ];
            for (attribute, update) in cases {
                let err = EtcHosts.set(&call, &[update]).unwrap_err();
                assert!(
                    err.message.contains(attribute) && err.message.contains(&shown(c)),
                    "{:?} in {attribute}: {}",
                    c,
                    err.message
                );
            }
            let err = EtcHosts
                .get(&call, std::slice::from_ref(&value))
                .unwrap_err();
            assert!(err.message.contains(&shown(c)), "{}", err.message);
        }
        assert!(
            !dir.path().join("etc/hosts").exists(),
            "nothing was written"
        );
    }

    #[test]
    fn a_name_another_entry_of_its_family_has_is_warned_of() {
        let said = crate::Buffer::default();
        let call = Call::new(
            "/nonexistent",
            false,
            crate::Log::new(Box::new(said.clone()), false),
        );
        let mut lines = parse(Some(
            b"127.0.0.1 localhost\n::1 localhost ip6-localhost\n10.0.0.2 Web www\n",
        ));
        let warnings = || -> Vec<String> {
            let said = said.text();
            said.lines()
                .filter(|line| line.starts_with("warn"))
                .map(str::to_owned)
                .collect()
        };
        // The same name for IPv4 and IPv6 is as it should be.
        let ip = |ip: &str| want(&[("ip", ip.into())]);
        apply(&call, &mut lines, "localhost", &ip("127.0.0.2")).unwrap();
        assert_eq!(warnings(), Vec::<String>::new());
        apply(&call, &mut lines, "web", &ip("10.0.0.3")).unwrap();
        let aliases = want(&[
            ("ip", "fe80::1".into()),
            ("host_aliases", "IP6-localhost".into()),
        ]);
        apply(&call, &mut lines, "six", &aliases).unwrap();
        assert_eq!(
            warnings(),
            [
                "warn: host 'web': 'web' is also a name on line 3 ('10.0.0.2 Web www'), and the C \
                 library's resolver, which compares names without regard to case, finds the \
                 first line of a name only",
                "warn: host 'six': 'IP6-localhost' is also a name on line 2 ('::1 localhost \
                 ip6-localhost'), and the C library's resolver, which compares names without \
                 regard to case, finds the first line of a name only",
            ]
        );
        // A change of an entry warns again; no change says nothing.
        let again = want(&[("ip", "fe80::2".into())]);
        apply(&call, &mut lines, "six", &again).unwrap();
        assert_eq!(warnings().len(), 3);
        apply(&call, &mut lines, "six", &again).unwrap();
        assert_eq!(warnings().len(), 3);
    }

    #[test]
    fn empty_aliases_or_comment_asked_of_a_new_entry_are_reported() {
        let mut lines = parse(None);
        let asked = want(&[
            ("ip", "10.0.0.1".into()),
            ("host_aliases", serde_json::json!([])),
            ("comment", "".into()),
        ]);
        let changes = apply(&call(), &mut lines, "db", &asked).unwrap();
        assert_eq!(
            changes,
            [
                Change::new("ensure", "absent", "present"),
                Change::new("ip", "", "10.0.0.1"),
                Change::new("host_aliases", "", ""),
                Change::new("comment", "", ""),
            ]
        );
    }

    /// Each attribute's `key: value` line must fit the line limit with its
    /// newline: at the limit it is written, one byte more refused.
    #[test]
    fn an_entry_fits_the_line_limit_exactly_or_is_refused() {
        let at_limit = "c".repeat(LINE_MAX - "comment: ".len() - 1);
        for (comment, fits) in [(at_limit.clone(), true), (at_limit + "c", false)] {
            let mut lines = parse(None);
            let asked = want(&[("ip", "10.0.0.1".into()), ("comment", comment.into())]);
            apply(&call(), &mut lines, "db", &asked).unwrap();
            assert_eq!(check_fits("db", &lines).is_ok(), fits);
        }
    }
}
