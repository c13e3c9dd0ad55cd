//! `mount::fstab`: entries of `/etc/fstab` below the root (json calling
//! convention), and whether they are mounted. The file is edited line by
//! line and field by field: every line not changed stays byte for byte as
//! it was, and a changed line keeps the whitespace between its fields.
//! Changes take the lock beside the file, re-read it under the lock and
//! replace it atomically. What is mounted is read from the kernel's list
//! for this process's namespace (`mountinfo`); mount(8) and umount(8)
//! change it, with the real root `/`, or below another root when ral runs
//! in a mount namespace of its own (elsewhere they would mount on the
//! machine, and are refused before anything runs).

mod command;
mod mountinfo;

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value as Json;

use crate::files::{Attrs, Edit, Lock, Reused, Root};
use crate::text::{self, escaped, python_dumps, python_str};
use crate::{error_entry, Call, CallError, CallResult, Change, Convention, Kind};
use crate::{Outcome, Provider, Resource, Update};

/// The file, relative to the root.
const FSTAB: &str = "etc/fstab";
/// The attributes an update may name.
const ATTRIBUTES: [&str; 7] = [
    "name", "ensure", "device", "fstype", "options", "dump", "pass",
];
/// What an update may ask `ensure` to be (`defined` is `present`, as in
/// Puppet; `ghost`, a mount without an entry, is only ever read).
const ENSURES: [&str; 5] = ["present", "defined", "absent", "mounted", "unmounted"];
/// The fields of a line, in order.
const FIELDS: [&str; 6] = ["device", "name", "fstype", "options", "dump", "pass"];
/// The attributes of an entry besides its name, in the order reported.
const VALUES: [&str; 5] = ["device", "fstype", "options", "dump", "pass"];
/// The mount points of swap entries.
const SWAP_NAMES: [&str; 2] = ["none", "swap"];
/// How long mount or umount may take.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(120);
const FSTYPE_SHAPE: &str =
    "a file system type (letters, digits, '_', '.', '+' and '-'; several separated by ',')";

/// The provider.
pub struct Fstab;

impl Provider for Fstab {
    fn metadata(&self) -> &'static str {
        include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../providers/fstab.yaml"
        ))
    }

    fn convention(&self) -> Convention {
        Convention::Json
    }

    fn get(&self, call: &Call, names: &[String]) -> CallResult<Vec<Resource>> {
        let file = read_fstab(call)?;
        let mounts = mountinfo::read(&root_prefix(&call.root)?)?;
        let entries = file.entries();
        let state = |name: &str| mounts.state(name);
        if names.is_empty() {
            let mut found: Vec<Resource> = entries
                .iter()
                .map(|(&name, &at)| resource(file.entry(at), state(name)))
                .collect();
            // Mounted without an entry: listed, as Puppet lists them.
            for point in mounts
                .keys()
                .filter(|point| !entries.contains_key(point.as_str()))
            {
                found.push(ghost(point));
            }
            return Ok(found);
        }
        let mut found = Vec::new();
        for name in names {
            match entries.get(name.as_str()) {
                Some(&at) => found.push(resource(file.entry(at), state(name))),
                None if mounts.contains_key(name) => found.push(ghost(name)),
                None => {
                    if let Some(problem) = mount_point_problem(name, "swap") {
                        let message = format!("the mount point {} {problem}", escaped(name));
                        found.push(error_entry(
                            name,
                            &CallError::of_kind(Kind::Unknown, message),
                        ));
                    }
                }
            }
        }
        Ok(found)
    }

    fn set(&self, call: &Call, updates: &[Update]) -> CallResult<Vec<Outcome>> {
        let root = Root::open(&call.root)?;
        let place = Place::new(call, &root)?;
        let target = root.file(FSTAB, true, None)?;
        let mut outcomes = Vec::with_capacity(updates.len());
        let mut edit = Edit::begin(Lock::beside(&target), call)?;
        let mut file = File::parse(edit.read(&target)?.as_deref());
        // The commands that ran, to undo should fstab not be written.
        let mut ran = Vec::new();
        for update in updates {
            // Each update starts from the lines the ones before it left;
            // a failed one leaves them, and what is mounted, as they were.
            let saved = file.clone();
            let outcome =
                apply_update(call, &place, update, &mut file).and_then(|(changes, actions)| {
                    ran.extend(run_actions(call, &actions)?);
                    Ok(changes)
                });
            if outcome.is_err() {
                file = saved;
            }
            outcomes.push(outcome);
        }
        if file.changed {
            let written = edit
                .write(&target, file.content(), Attrs::default())
                .and_then(|()| edit.commit());
            if let Err(err) = written {
                undo(call, &ran);
                return Err(err);
            }
        }
        Ok(outcomes)
    }
}

/// The file as last read, reused while it is unchanged: a plan asks for
/// each of many mount points in a call of its own.
static LAST: Reused<File> = Reused::new();

/// The file for a get (no lines when it or `etc` is missing).
fn read_fstab(call: &Call) -> CallResult<Arc<File>> {
    LAST.get(call, FSTAB, File::parse)
}

// ------------------------------------------------------- fields and values

/// Text from the bytes of a system file: UTF-8 if possible, else
/// Latin-1, which decodes any byte (as the Python toolkit's `decode`).
fn decode(raw: &[u8]) -> String {
    match std::str::from_utf8(raw) {
        Ok(text) => text.to_owned(),
        Err(_) => raw.iter().map(|&b| char::from(b)).collect(),
    }
}

/// A field's value: octal escapes (`\040`) decoded, then the bytes as
/// text.
fn unescape(field: &[u8]) -> String {
    let mut out = Vec::with_capacity(field.len());
    let mut at = 0;
    while at < field.len() {
        if let [b'\\', a @ b'0'..=b'3', b @ b'0'..=b'7', c @ b'0'..=b'7', ..] = field[at..] {
            out.push((a - b'0') * 64 + (b - b'0') * 8 + (c - b'0'));
            at += 4;
        } else {
            out.push(field[at]);
            at += 1;
        }
    }
    decode(&out)
}

/// A value as the bytes of a field: what would split or end a field, and
/// the escape character itself, as the octal escapes that both glibc's
/// getmntent and libmount decode (`\040`, `\011`, `\012`, `\134`).
fn escape(value: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(value.len());
    for &byte in value.as_bytes() {
        match byte {
            b' ' => out.extend_from_slice(b"\\040"),
            b'\t' => out.extend_from_slice(b"\\011"),
            b'\n' => out.extend_from_slice(b"\\012"),
            b'\\' => out.extend_from_slice(b"\\134"),
            _ => out.push(byte),
        }
    }
    out
}

/// The options of a field, split as libmount splits them: at commas
/// outside double quotes (`context="a,b"` is one option), empty ones
/// skipped; an option whose quote is never closed is not read, as
/// libmount reads nothing from it on.
fn split_options(text: &str) -> Vec<String> {
    let mut options = Vec::new();
    let mut option = String::new();
    let mut quoted = false;
    for c in text.chars() {
        if c == '"' {
            quoted = !quoted;
        }
        if c == ',' && !quoted {
            if !option.is_empty() {
                options.push(std::mem::take(&mut option));
            }
        } else {
            option.push(c);
        }
    }
    if !quoted && !option.is_empty() {
        options.push(option);
    }
    options
}

/// Control and format characters (Unicode's Cc, Cf, Zl and Zp), which no
/// field may hold.
fn is_control(c: char) -> bool {
    text::is_control(c) || text::is_format(c)
}

fn has_control(value: &str) -> bool {
    value.chars().any(is_control)
}

/// Python's `str.isspace`: Unicode white space and the information
/// separators.
fn is_space(c: char) -> bool {
    c.is_whitespace() || ('\x1c'..='\x1f').contains(&c)
}

/// Whether `value` starts or ends with white space (Python's
/// `value != value.strip()`).
fn padded(value: &str) -> bool {
    value.trim_matches(is_space) != value
}

/// Whether the mount point `child` is below the mount point `parent`.
fn is_below(child: &str, parent: &str) -> bool {
    let Some(rest) = child.strip_prefix(parent) else {
        return false;
    };
    parent.starts_with('/') && !rest.is_empty() && (parent.ends_with('/') || rest.starts_with('/'))
}

/// Why `name` cannot be the mount point of a new entry, or `None`.
fn mount_point_problem(name: &str, fstype: &str) -> Option<&'static str> {
    if name.is_empty() {
        return Some("must not be empty");
    }
    if has_control(name) {
        return Some("must not contain control characters");
    }
    if padded(name) {
        return Some("must not start or end with whitespace");
    }
    if SWAP_NAMES.contains(&name) {
        return match fstype {
            "swap" => None,
            _ => Some("is only a mount point for swap entries (fstype 'swap')"),
        };
    }
    let Some(rest) = name.strip_prefix('/') else {
        return Some("must be an absolute path (or 'none' for swap)");
    };
    if !rest.is_empty() {
        let parts: Vec<&str> = rest.split('/').collect();
        if parts.contains(&"") {
            return Some("must not contain '//' or end with '/'");
        }
        if parts.contains(&".") || parts.contains(&"..") {
            return Some("must not contain '.' or '..' components");
        }
    }
    None
}

fn check_name(name: &str, fstype: &str) -> CallResult<()> {
    match mount_point_problem(name, fstype) {
        Some(problem) => Err(CallError::new(format!(
            "name: the mount point {} {problem}",
            escaped(name)
        ))),
        None => Ok(()),
    }
}

/// A checked value of one attribute.
#[derive(Debug, Clone, PartialEq)]
enum Value {
    Text(String),
    Options(Vec<String>),
    Number(u8),
}

impl Value {
    fn json(&self) -> Json {
        match self {
            Value::Text(text) => Json::from(text.as_str()),
            Value::Options(options) => Json::from(options.clone()),
            Value::Number(number) => Json::from(*number),
        }
    }
}

/// The tags libmount reads as a device (`UUID=...`), by their names.
const TAGS: [&str; 5] = ["LABEL", "UUID", "PARTLABEL", "PARTUUID", "ID"];

/// The name of a tag libmount does not know that `device` reads as
/// (`uuid=...`, `FOO=bar`): a word before a `=`. Other sources with a `=`
/// (Ceph's `user@fsid.fs=/path`) are paths to libmount, and taken.
fn unknown_tag(device: &str) -> Option<&str> {
    let (name, _) = device.split_once('=')?;
    let word = !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    (word && !TAGS.contains(&name)).then_some(name)
}

fn check_text(attr: &str, value: &Json) -> CallResult<Value> {
    let Json::String(text) = value else {
        return Err(CallError::new(format!(
            "{attr}: {} is not a string",
            python_dumps(value, true)
        )));
    };
    let problem = if text.is_empty() {
        return Err(CallError::new(format!("{attr}: must not be empty")));
    } else if has_control(text) {
        "contains a control character".to_owned()
    } else if padded(text) {
        "starts or ends with whitespace".to_owned()
    } else if attr == "device" && text.starts_with('#') {
        // libmount decodes \043, glibc's getmntent does not: no escape
        // keeps the line from reading as a comment for every reader.
        "starts with '#', which would make its line a comment".to_owned()
    } else if matches!(attr, "device" | "fstype") && text.starts_with('-') {
        // fsck -A and mount pass the device and type on to programs,
        // which take them for an option ('-y': answer yes to every
        // repair).
        "starts with '-', which the programs fstab is given to read as an option".to_owned()
    } else if attr == "device" && text.starts_with('=') {
        // blkid reads a tag with no name, which findmnt --verify calls
        // an unsupported tag.
        "starts with '=', which reads as a tag with no name".to_owned()
    } else if let Some(tag) = unknown_tag(text).filter(|_| attr == "device") {
        format!(
            "reads as a tag {}, which libmount does not know (it knows {}); it would take \
             it for a file name",
            escaped(tag),
            TAGS.join(", ")
        )
    } else if attr == "fstype" && !is_fstype(text) {
        format!("is not {FSTYPE_SHAPE}")
    } else {
        return Ok(Value::Text(text.clone()));
    };
    Err(CallError::new(format!(
        "{attr}: {} {problem}",
        escaped(text)
    )))
}

/// A type, or a comma-separated list of types as fstab(5) allows.
fn is_fstype(text: &str) -> bool {
    text.split(',').all(|part| {
        !part.is_empty()
            && part
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "_.+-".contains(c))
    })
}

fn check_options(value: &Json) -> CallResult<Value> {
    let Json::Array(items) = value else {
        return Err(CallError::new(format!(
            "options: {} is not an array of strings",
            python_dumps(value, true)
        )));
    };
    if items.is_empty() {
        return Err(CallError::new(
            "options: must not be empty (use ['defaults'])",
        ));
    }
    let mut options = Vec::with_capacity(items.len());
    for item in items {
        let Json::String(option) = item else {
            return Err(CallError::new(format!(
                "options: {} is not a string",
                python_dumps(item, true)
            )));
        };
        if option.is_empty() {
            return Err(CallError::new("options: an option must not be empty"));
        }
        if option.chars().any(|c| is_space(c) || is_control(c)) {
            return Err(CallError::new(format!(
                "options: {} contains whitespace or a control character",
                escaped(option)
            )));
        }
        if option.matches('"').count() % 2 == 1 {
            return Err(CallError::new(format!(
                "options: {} has a '\"' that is not closed, which would hide it and every \
                 option after it from libmount",
                escaped(option)
            )));
        }
        if split_options(option) != [option.as_str()] {
            return Err(CallError::new(format!(
                "options: {} contains ',' outside double quotes; give each option as its own \
                 element",
                escaped(option)
            )));
        }
        options.push(option.clone());
    }
    Ok(Value::Options(options))
}

fn check_number(attr: &str, value: &Json) -> CallResult<Value> {
    match value.as_u64() {
        Some(number @ 0..=9) => Ok(Value::Number(number as u8)),
        _ => Err(CallError::new(format!(
            "{attr}: {} is not an integer from 0 to 9",
            python_dumps(value, true)
        ))),
    }
}

fn check_value(attr: &str, value: &Json) -> CallResult<Value> {
    match attr {
        "device" | "fstype" => check_text(attr, value),
        "options" => check_options(value),
        _ => check_number(attr, value),
    }
}

fn field_bytes(value: &Value) -> Vec<u8> {
    match value {
        Value::Options(options) => escape(&options.join(",")),
        Value::Number(number) => number.to_string().into_bytes(),
        Value::Text(text) => escape(text),
    }
}

// ------------------------------------------------------------------ file

/// One line of fstab, kept as its raw bytes (with its line ending), and
/// its decoded fields when it is an entry.
#[derive(Debug, Clone, PartialEq)]
struct Line {
    raw: Vec<u8>,
    entry: Option<Entry>,
}

#[derive(Debug, Clone, PartialEq)]
struct Entry {
    name: String,
    device: String,
    fstype: String,
    options: Vec<String>,
    dump: u8,
    pass: u8,
}

impl Entry {
    fn get(&self, attr: &str) -> Value {
        match attr {
            "device" => Value::Text(self.device.clone()),
            "fstype" => Value::Text(self.fstype.clone()),
            "options" => Value::Options(self.options.clone()),
            "dump" => Value::Number(self.dump),
            _ => Value::Number(self.pass),
        }
    }
}

/// The raw bytes without the line ending, and the ending (`\n`, `\r\n`,
/// `\r` or nothing).
fn body(raw: &[u8]) -> (&[u8], &[u8]) {
    let mut end = raw.len();
    if raw[..end].ends_with(b"\n") {
        end -= 1;
    }
    if raw[..end].ends_with(b"\r") {
        end -= 1;
    }
    raw.split_at(end)
}

/// `body` split as Python's `re.split(rb"([ \t]+)", body)`: fields at
/// even indexes (possibly an empty one before leading or after trailing
/// whitespace), the separators between them at odd ones.
fn split_fields(body: &[u8]) -> Vec<Vec<u8>> {
    let is_sep = |b: &u8| *b == b' ' || *b == b'\t';
    let mut parts = Vec::new();
    let mut start = 0;
    while start <= body.len() {
        let field_end = body[start..]
            .iter()
            .position(is_sep)
            .map_or(body.len(), |n| start + n);
        parts.push(body[start..field_end].to_vec());
        if field_end == body.len() {
            break;
        }
        let sep_end = body[field_end..]
            .iter()
            .position(|b| !is_sep(b))
            .map_or(body.len(), |n| field_end + n);
        parts.push(body[field_end..sep_end].to_vec());
        start = sep_end;
    }
    parts
}

/// A digit field's number, when it is one from 0 to 9.
fn small_number(field: &[u8]) -> Option<u8> {
    if field.is_empty() || !field.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let significant: Vec<u8> = field.iter().copied().skip_while(|&b| b == b'0').collect();
    match significant.as_slice() {
        [] => Some(0),
        [digit] => Some(digit - b'0'),
        _ => None,
    }
}

/// The decoded fields of an entry line, or `None` for anything else.
fn parse_entry(body: &[u8]) -> Option<Entry> {
    let is_sep = |b: &u8| *b == b' ' || *b == b'\t';
    let start = body.iter().position(|b| !is_sep(b))?;
    let end = body.iter().rposition(|b| !is_sep(b))?;
    let stripped = &body[start..=end];
    if stripped.starts_with(b"#") {
        return None;
    }
    // As libmount reads a line: the options, dump and pass may be
    // missing, and what follows the pass (a comment, say) is not read.
    let fields: Vec<Vec<u8>> = split_fields(stripped).into_iter().step_by(2).collect();
    if fields.len() < 3 {
        return None;
    }
    let mut numbers = [0u8; 2];
    for (slot, field) in numbers.iter_mut().zip(fields.iter().skip(4)) {
        *slot = small_number(field)?;
    }
    let name = unescape(&fields[1]);
    if has_control(&name) || padded(&name) {
        return None;
    }
    Some(Entry {
        name,
        device: unescape(&fields[0]),
        fstype: unescape(&fields[2]),
        options: fields
            .get(3)
            .map(|field| split_options(&unescape(field)))
            .unwrap_or_default(),
        dump: numbers[0],
        pass: numbers[1],
    })
}

impl Line {
    fn new(raw: Vec<u8>) -> Line {
        let entry = parse_entry(body(&raw).0);
        Line { raw, entry }
    }

    fn name(&self) -> Option<&str> {
        self.entry.as_ref().map(|entry| entry.name.as_str())
    }

    /// Replaces one field, keeping the whitespace around the others; a
    /// missing options field is added (as `defaults`) before a dump field,
    /// a missing dump field (as 0) before a pass field.
    fn set_field(&mut self, attr: &str, value: Value) {
        let (text, end) = body(&self.raw);
        let end = end.to_vec();
        let mut parts = split_fields(text);
        let mut fields: Vec<usize> = (0..parts.len())
            .step_by(2)
            .filter(|&at| !parts[at].is_empty())
            .collect();
        let index = FIELDS.iter().position(|&known| known == attr).unwrap_or(0);
        while fields.len() <= index {
            let Some(&last) = fields.last() else {
                return;
            };
            let separator = parts[last.saturating_sub(1)].clone();
            let filler = match fields.len() {
                3 => b"defaults".to_vec(),
                _ => b"0".to_vec(),
            };
            // Right after the last field: at the end, or before trailing
            // whitespace.
            parts.splice(last + 1..last + 1, [separator, filler]);
            fields.push(last + 2);
        }
        parts[fields[index]] = field_bytes(&value);
        let mut raw = parts.concat();
        raw.extend_from_slice(&end);
        *self = Line::new(raw);
    }
}

/// The lines of `etc/fstab` as read (none when it does not exist), and
/// whether they were changed. Lines are shared, so that the copy taken
/// before each update of a set (to undo a failed one) costs a pointer a
/// line; a line changed is copied then.
#[derive(Debug, Clone)]
struct File {
    lines: Vec<Arc<Line>>,
    changed: bool,
}

impl File {
    fn parse(data: Option<&[u8]>) -> File {
        let mut lines = Vec::new();
        if let Some(data) = data {
            let mut pieces: Vec<&[u8]> = data.split(|&b| b == b'\n').collect();
            let last = pieces.pop().unwrap_or_default();
            for piece in pieces {
                let mut raw = piece.to_vec();
                raw.push(b'\n');
                lines.push(Arc::new(Line::new(raw)));
            }
            if !last.is_empty() {
                lines.push(Arc::new(Line::new(last.to_vec())));
            }
        }
        File {
            lines,
            changed: false,
        }
    }

    /// The managed lines: the first one of each mount point, by name, in
    /// the file's order.
    fn entries(&self) -> indexmap::IndexMap<&str, usize> {
        let mut seen = indexmap::IndexMap::new();
        for (at, line) in self.lines.iter().enumerate() {
            if let Some(name) = line.name() {
                seen.entry(name).or_insert(at);
            }
        }
        seen
    }

    fn find(&self, name: &str) -> Option<usize> {
        self.lines.iter().position(|line| line.name() == Some(name))
    }

    fn entry(&self, at: usize) -> &Entry {
        self.lines[at].entry.as_ref().expect("an entry line")
    }

    /// Removes every line of the mount point `name`.
    fn remove(&mut self, name: &str) {
        self.lines.retain(|line| line.name() != Some(name));
        self.changed = true;
    }

    /// Adds an entry as one line of tab-separated fields: at the end, or
    /// before the first entry mounted below it, since `mount -a` mounts
    /// in the file's order (and a parent mounted later hides its child).
    fn append(&mut self, name: &str, values: &[Value]) {
        if let Some(last) = self.lines.last_mut() {
            if !last.raw.ends_with(b"\n") {
                Arc::make_mut(last).raw.push(b'\n');
            }
        }
        let mut fields = Vec::with_capacity(FIELDS.len());
        for attr in FIELDS {
            fields.push(match VALUES.iter().position(|&known| known == attr) {
                Some(at) => field_bytes(&values[at]),
                None => escape(name),
            });
        }
        let mut raw = fields.join(&b'\t');
        raw.push(b'\n');
        let at = self
            .lines
            .iter()
            .position(|line| line.name().is_some_and(|child| is_below(child, name)))
            .unwrap_or(self.lines.len());
        self.lines.insert(at, Arc::new(Line::new(raw)));
        self.changed = true;
    }

    fn content(&self) -> Vec<u8> {
        self.lines
            .iter()
            .flat_map(|line| line.raw.clone())
            .collect()
    }
}

// ------------------------------------------------------------ resources

/// An entry of fstab, its `ensure` what is mounted says (`mounted` or
/// `unmounted`).
fn resource(entry: &Entry, ensure: &str) -> Resource {
    let mut resource = Resource::new();
    resource.insert("name".into(), Json::from(entry.name.as_str()));
    resource.insert("ensure".into(), Json::from(ensure));
    for attr in VALUES {
        resource.insert(attr.into(), entry.get(attr).json());
    }
    resource
}

/// A mount point mounted without an entry in fstab: only its name and
/// `ensure` (`ghost`), as Puppet reports it; what is mounted there is not
/// an entry's values.
fn ghost(name: &str) -> Resource {
    let mut resource = Resource::new();
    resource.insert("name".into(), Json::from(name));
    resource.insert("ensure".into(), Json::from("ghost"));
    resource
}

/// The longest line glibc's getmntent reads whole, its line ending
/// included (it reads into 4096 bytes, the last one a NUL, and drops the
/// rest of a longer line).
const GETMNTENT_LINE_MAX: usize = 4095;

/// Refuses, before anything is written, a line that a reader would cut:
/// it must fit in [`GETMNTENT_LINE_MAX`] bytes (so that its JSON also fits
/// in the [`RESOURCE_MAX`](crate::serve::RESOURCE_MAX) bytes ral
/// reads back).
fn check_fits(line: &Line) -> CallResult<()> {
    let size = line.raw.len();
    if size > GETMNTENT_LINE_MAX {
        return Err(CallError::new(format!(
            "the line of {} would be {size} bytes long, more than the {GETMNTENT_LINE_MAX} \
             glibc's getmntent reads (it would cut the rest); nothing was changed",
            escaped(line.name().unwrap_or_default())
        )));
    }
    Ok(())
}

// ------------------------------------------------------------- changes

/// The update's `ensure`, checked with the rest of `should`: known
/// attributes only, no rename, and one of [`ENSURES`] (`None` when not
/// given).
fn check_should(update: &Update) -> CallResult<Option<&str>> {
    let should = &update.should;
    for key in should.keys() {
        if !ATTRIBUTES.contains(&key.as_str()) {
            return Err(CallError::new(format!(
                "unknown attribute {}",
                escaped(key)
            )));
        }
    }
    if let Some(name) = should.get("name") {
        if name.as_str() != Some(update.name.as_str()) {
            return Err(CallError::new(format!(
                "name: cannot rename {} to {}",
                escaped(&update.name),
                escaped(&python_str(name))
            )));
        }
    }
    match should.get("ensure") {
        None | Some(Json::Null) => Ok(None),
        Some(Json::String(ensure)) if ENSURES.contains(&ensure.as_str()) => Ok(Some(ensure)),
        Some(Json::String(ghost)) if ghost == "ghost" => Err(CallError::new(
            "ensure: 'ghost' is only read (something mounted without an entry in fstab), \
             never set",
        )),
        Some(other) => Err(CallError::new(format!(
            "ensure: {} is not one of {}",
            python_dumps(other, true),
            ENSURES.join(", ")
        ))),
    }
}

/// What one update changes in `file`, and the commands it needs.
type Applied = (Vec<Change>, Vec<Action>);

/// Applies one update to the lines in memory, and works out the mount
/// commands it needs (run by [`run_actions`] before fstab is written).
fn apply_update(
    call: &Call,
    place: &Place,
    update: &Update,
    file: &mut File,
) -> CallResult<Applied> {
    let ensure = match check_should(update)?.unwrap_or("present") {
        "defined" => "present",
        ensure => ensure,
    };
    let name = update.name.as_str();
    let mounted = place.mounted()?.contains_key(name);
    let line = file.find(name);
    refuse_commands(place, name, ensure, mounted)?;
    let was = match (line.is_some(), mounted) {
        (true, true) => "mounted",
        (true, false) => "unmounted",
        (false, true) => "ghost",
        (false, false) => "absent",
    };
    if ensure == "absent" {
        return remove_entry(call, place, name, mounted, was, file);
    }
    let before = line.map(|at| file.entry(at).clone());
    let mut changes = match line {
        None => create_entry(call, update, ensure, was, file)?,
        Some(at) => change_entry(call, update, at, file)?,
    };
    let entry = file
        .find(name)
        .map(|at| file.entry(at).clone())
        .ok_or_else(|| {
            CallError::new(format!("internal: the entry of {} is gone", escaped(name)))
        })?;
    let mounting = ensure == "mounted" || ensure == "unmounted";
    if mounting && (entry.fstype == "swap" || SWAP_NAMES.contains(&name)) {
        return Err(CallError::new(format!(
            "ensure: {ensure} does not apply to the swap entry {}",
            escaped(name)
        )));
    }
    let actions = mount_actions(call, place, ensure, mounted, before.as_ref(), &entry)?;
    if line.is_some() && mounting && was != ensure {
        changes.insert(0, Change::new("ensure", was, ensure));
    }
    Ok((changes, actions))
}

/// Refuses, before anything changes, an update of `name` that needs a
/// mount command where ral may not run one.
fn refuse_commands(place: &Place, name: &str, ensure: &str, mounted: bool) -> CallResult<()> {
    let commands = match ensure {
        "mounted" => !mounted,
        "unmounted" | "absent" => mounted,
        _ => false,
    };
    match place.refused(name).filter(|_| commands) {
        Some(err) => Err(err),
        None => Ok(()),
    }
}

/// Removes the entry of `name` (`was` says what it was), as Puppet does:
/// what is mounted is unmounted, then the entry goes.
fn remove_entry(
    call: &Call,
    place: &Place,
    name: &str,
    mounted: bool,
    was: &str,
    file: &mut File,
) -> CallResult<Applied> {
    let line = file.find(name);
    let mut actions = Vec::new();
    if mounted {
        let old = line.map(|at| file.entry(at).clone());
        actions.push(place.unmount(name, old.as_ref())?);
    }
    if was == "absent" {
        return Ok((Vec::new(), actions));
    }
    call.log.deleting(name, || {
        if line.is_some() {
            file.remove(name);
        }
        Ok(())
    })?;
    Ok((vec![Change::new("ensure", was, "absent")], actions))
}

/// The mount commands that bring what is mounted on `entry`'s mount
/// point (`mounted` or not) to `ensure`: a mount, an unmount, or a
/// remount when the options changed from `before`'s.
fn mount_actions(
    call: &Call,
    place: &Place,
    ensure: &str,
    mounted: bool,
    before: Option<&Entry>,
    entry: &Entry,
) -> CallResult<Vec<Action>> {
    let name = entry.name.as_str();
    let options_changed = before.is_some_and(|old| old.options != entry.options);
    let action = match ensure {
        "mounted" if !mounted => place.mount(entry)?,
        "unmounted" if mounted => place.unmount(name, before.or(Some(entry)))?,
        "mounted" | "present" if mounted && options_changed => {
            let old = before.unwrap_or(entry);
            match place.refused(name) {
                // Asked only to edit fstab, where mounting is not ral's:
                // fstab changes, the mount stays, and the log says so.
                Some(err) if ensure == "present" => {
                    call.log.warning(&format!(
                        "{}: the options changed in fstab, but the mount was not remounted: {}",
                        escaped(name),
                        err.message
                    ));
                    return Ok(Vec::new());
                }
                _ => place.remount(entry, old)?,
            }
        }
        _ => return Ok(Vec::new()),
    };
    Ok(vec![action])
}

/// Adds the entry of an update that has none (its `ensure` was `absent`
/// or `ghost`).
fn create_entry(
    call: &Call,
    update: &Update,
    ensure: &str,
    was: &str,
    file: &mut File,
) -> CallResult<Vec<Change>> {
    let name = update.name.as_str();
    let should = &update.should;
    let missing: Vec<&str> = ["device", "fstype"]
        .into_iter()
        .filter(|attr| !should.contains_key(*attr))
        .collect();
    if !missing.is_empty() {
        return Err(CallError::new(format!(
            "creating {} needs {}",
            escaped(name),
            missing.join(" and ")
        )));
    }
    let values = call.log.creating(name, || {
        let mut values = Vec::with_capacity(VALUES.len());
        for attr in VALUES {
            values.push(match (should.get(attr), attr) {
                (Some(value), _) => check_value(attr, value)?,
                (None, "options") => Value::Options(vec!["defaults".to_owned()]),
                (None, _) => Value::Number(0),
            });
        }
        let Value::Text(fstype) = &values[1] else {
            return Err(CallError::new("internal: fstype is not text"));
        };
        check_name(name, fstype)?;
        file.append(name, &values);
        match file.find(name) {
            Some(at) => check_fits(&file.lines[at])?,
            None => {
                return Err(CallError::new(format!(
                    "the new line of {} does not read back as an entry",
                    escaped(name)
                )))
            }
        }
        Ok(values)
    })?;
    let mut changes = vec![Change::new("ensure", was, ensure)];
    for (attr, value) in VALUES.into_iter().zip(&values) {
        changes.push(Change::new(attr, Json::Null, value.json()));
    }
    Ok(changes)
}

/// Changes the fields of the entry at `at` that the update sets to other
/// values.
fn change_entry(
    call: &Call,
    update: &Update,
    at: usize,
    file: &mut File,
) -> CallResult<Vec<Change>> {
    let name = update.name.as_str();
    let entry = file.entry(at).clone();
    let mut new = Vec::new();
    for attr in VALUES {
        if let Some(value) = update.should.get(attr) {
            if *value != entry.get(attr).json() {
                new.push((attr, check_value(attr, value)?));
            }
        }
    }
    if let Some((_, Value::Text(fstype))) = new.iter().find(|(attr, _)| *attr == "fstype") {
        check_name(name, fstype)?;
    }
    let mut changes = Vec::new();
    if !new.is_empty() {
        let options_set = new.iter().any(|(attr, _)| *attr == "options");
        call.log.updating(name, || {
            for (attr, value) in new {
                changes.push(Change::new(attr, entry.get(attr).json(), value.json()));
                Arc::make_mut(&mut file.lines[at]).set_field(attr, value);
            }
            if !options_set {
                changes.extend(filled_options(update, &entry, file.entry(at))?);
            }
            file.changed = true;
            check_fits(&file.lines[at])
        })?;
    }
    Ok(changes)
}

/// The change to the options of an entry that had no options field and
/// now has `defaults` there, written before a dump or pass field (the
/// update set no options itself): told like any other, so that what is
/// reported is what the file says. An update that asked for no options
/// at all is refused, as setting them empty is: the file cannot hold
/// that. (ral sends only the values that differ, so through ral such an
/// update reaches here without its options, and its check afterwards
/// finds `defaults` where it asked for none.)
fn filled_options(update: &Update, before: &Entry, after: &Entry) -> CallResult<Option<Change>> {
    let (was, now) = (before.get("options").json(), after.get("options").json());
    if was == now {
        return Ok(None);
    }
    if update
        .should
        .get("options")
        .is_some_and(|asked| *asked != now)
    {
        return Err(CallError::new(
            "options: must not be empty (use ['defaults']): an fstab entry with a dump or pass \
             field has an options field before it",
        ));
    }
    Ok(Some(Change::new("options", was, now)))
}

// ------------------------------------------------------------ mounting

/// A command that changes what is mounted, and the one that puts it back.
#[derive(Debug, Clone, PartialEq)]
struct Action {
    argv: Vec<String>,
    undo: Option<Vec<String>>,
}

/// The root's path with links resolved, as mountinfo shows paths (`/`
/// for the real root).
fn root_prefix(root: &std::path::Path) -> CallResult<String> {
    let root = if root.as_os_str().is_empty() {
        std::path::Path::new("/")
    } else {
        root
    };
    let resolved = std::fs::canonicalize(root).map_err(|err| {
        CallError::io(
            &err,
            &format!("resolve the root {}", escaped(&root.to_string_lossy())),
        )
    })?;
    Ok(resolved.to_string_lossy().into_owned())
}

/// What is mounted, by mount point as the root sees it.
type Mounts = indexmap::IndexMap<String, mountinfo::Mount>;

trait MountState {
    /// `mounted` or `unmounted`, for the entry of `name`.
    fn state(&self, name: &str) -> &'static str;
}

impl MountState for Mounts {
    fn state(&self, name: &str) -> &'static str {
        match self.contains_key(name) {
            true => "mounted",
            false => "unmounted",
        }
    }
}

/// Why a root other than `/` needs a namespace of ral's own, and what
/// works without one.
const OWN_NAMESPACE: &str = "below a root other than '/' ral mounts only in a mount namespace of \
                             its own (as under 'unshare -m'); present and absent edit fstab alone";

/// Where an update mounts: the root, its resolved path, and why mounting
/// there is refused (`None` when it is not).
struct Place {
    root: Root,
    prefix: String,
    refusal: Option<String>,
}

impl Place {
    fn new(call: &Call, root: &Root) -> CallResult<Place> {
        let prefix = root_prefix(&call.root)?;
        let refusal = match root.is_real() {
            true => None,
            false => match mountinfo::own_namespace() {
                Ok(true) => match mountinfo::propagates(&[&prefix]) {
                    Ok(None) => None,
                    Ok(Some((_, group))) => Some(format!(
                        "the mount holding the root is shared with other mount namespaces \
                         ({group} in /proc/self/mountinfo), so a mount below it would show in \
                         them, the machine's among them; make it private first ('mount \
                         --make-rprivate {}', or run under 'unshare -m --propagation private')",
                        escaped(&prefix)
                    )),
                    Err(why) => Some(format!(
                        "ral cannot tell whether a mount below the root would reach other \
                         namespaces ({why})"
                    )),
                },
                Ok(false) => Some(format!(
                    "ral runs in the machine's mount namespace (that of PID 1), where this \
                     would change the machine's mounts; {OWN_NAMESPACE}"
                )),
                Err(why) => Some(format!(
                    "ral cannot tell whether it runs in a mount namespace of its own ({why}); \
                     {OWN_NAMESPACE}"
                )),
            },
        };
        Ok(Place {
            root: root.clone(),
            prefix,
            refusal,
        })
    }

    /// What is mounted below the root now.
    fn mounted(&self) -> CallResult<Mounts> {
        mountinfo::read(&self.prefix).map_err(CallError::from)
    }

    /// Why mounting or unmounting `name` is refused, if it is.
    fn refused(&self, name: &str) -> Option<CallError> {
        self.refusal.as_ref().map(|why| {
            CallError::of_kind(
                Kind::Forbidden,
                format!(
                    "ensure: refusing to mount or unmount {} below the root {}: {why}",
                    escaped(name),
                    escaped(&self.prefix)
                ),
            )
        })
    }

    /// The path mount(8) is given for `name`: the name itself with the
    /// real root; below another, the mount point resolved inside the
    /// root (a link in it never leads out), under the root's path.
    fn path(&self, name: &str) -> CallResult<String> {
        if let Some(err) = self.refused(name) {
            return Err(err);
        }
        if self.root.is_real() {
            return Ok(name.to_owned());
        }
        if name.trim_matches('/').is_empty() {
            return Err(CallError::of_kind(
                Kind::Forbidden,
                format!(
                    "ensure: refusing to mount or unmount '/' below the root {}: it would cover \
                     or uncover the root itself (its fstab and ral's state among it)",
                    escaped(&self.prefix)
                ),
            ));
        }
        let rel = name.trim_start_matches('/');
        let dir = self.root.directory(rel, true, None).map_err(|err| {
            CallError::new(format!(
                "the mount point {}: {}",
                escaped(name),
                err.message
            ))
        })?;
        // A mount point reached through a link would be mounted where the
        // link leads, and read back under another name: never mounted
        // by its own, each run would mount it again.
        if dir.rel() != rel.trim_end_matches('/') {
            return Err(CallError::new(format!(
                "the mount point {} leads through a symbolic link to '/{}' below the root: \
                 name the mount point by its own path",
                escaped(name),
                dir.rel()
            )));
        }
        let path = match dir.rel() {
            "" => self.prefix.clone(),
            rel => format!("{}/{rel}", self.prefix.trim_end_matches('/')),
        };
        // A mount below the root may itself be shared (a bind of a path
        // of the machine's): what is mounted on it, or unmounted from it,
        // would reach its peers.
        let parent = std::path::Path::new(&path)
            .parent()
            .map(|p| p.to_string_lossy().into_owned());
        let places: Vec<&str> = std::iter::once(path.as_str())
            .chain(parent.as_deref())
            .collect();
        match mountinfo::propagates(&places) {
            Ok(None) => Ok(path),
            Ok(Some((place, group))) => Err(CallError::of_kind(
                Kind::Forbidden,
                format!(
                    "ensure: refusing to mount or unmount {} below the root {}: the mount \
                     holding {} is shared with other mount namespaces ({group}), which would \
                     see it too; make it private first (mount --make-private)",
                    escaped(name),
                    escaped(&self.prefix),
                    escaped(place)
                ),
            )),
            Err(why) => Err(why.into()),
        }
    }

    /// `mount -t TYPE -o OPTIONS -- DEVICE PATH`: the entry's values
    /// given whole, since mount(8) reads the machine's fstab, not the
    /// root's.
    fn mount_argv(entry: &Entry, path: &str) -> Vec<String> {
        let options = match entry.options.is_empty() {
            true => "defaults".to_owned(),
            false => entry.options.join(","),
        };
        [
            "mount",
            "-t",
            &entry.fstype,
            "-o",
            &options,
            "--",
            &entry.device,
            path,
        ]
        .map(str::to_owned)
        .to_vec()
    }

    fn umount_argv(path: &str) -> Vec<String> {
        ["umount", "--", path].map(str::to_owned).to_vec()
    }

    fn remount_argv(entry: &Entry, path: &str) -> Vec<String> {
        let mut options = vec!["remount".to_owned()];
        options.extend(entry.options.iter().cloned());
        ["mount", "-o", &options.join(","), "--", path]
            .map(str::to_owned)
            .to_vec()
    }

    fn mount(&self, entry: &Entry) -> CallResult<Action> {
        let path = self.path(&entry.name)?;
        Ok(Action {
            argv: Place::mount_argv(entry, &path),
            undo: Some(Place::umount_argv(&path)),
        })
    }

    /// Unmounts `name`, mounted again with `old` (its entry before) to
    /// undo.
    fn unmount(&self, name: &str, old: Option<&Entry>) -> CallResult<Action> {
        let path = self.path(name)?;
        Ok(Action {
            argv: Place::umount_argv(&path),
            undo: old.map(|old| Place::mount_argv(old, &path)),
        })
    }

    /// `mount -o remount,OPTIONS`, as Puppet's `remounts` does: the
    /// options of the mount change in place, its users keep it.
    fn remount(&self, entry: &Entry, old: &Entry) -> CallResult<Action> {
        let path = self.path(&entry.name)?;
        Ok(Action {
            argv: Place::remount_argv(entry, &path),
            undo: Some(Place::remount_argv(old, &path)),
        })
    }
}

/// Runs an update's commands in order; when one fails, undoes those that
/// ran before it and says what failed. Returns the ones that ran (to be
/// undone should fstab then not be written).
fn run_actions(call: &Call, actions: &[Action]) -> CallResult<Vec<Action>> {
    let mut done = Vec::new();
    for action in actions {
        let Some(ran) = command::change(call, &action.argv, COMMAND_TIMEOUT) else {
            continue;
        };
        if !ran.ok() {
            undo(call, &done);
            return Err(CallError::new(format!(
                "{}; fstab was left as it was",
                ran.failure()
            )));
        }
        done.push(action.clone());
    }
    Ok(done)
}

/// Undoes commands that ran, the last first; what cannot be undone is
/// logged.
fn undo(call: &Call, done: &[Action]) {
    for action in done.iter().rev() {
        let Some(argv) = &action.undo else {
            continue;
        };
        if let Some(ran) = command::change(call, argv, COMMAND_TIMEOUT) {
            if !ran.ok() {
                call.log
                    .warning(&format!("could not undo: {}", ran.failure()));
            }
        }
    }
}

#[cfg(test)]
mod tests;
