//! The account files (passwd, shadow, group, gshadow) for the native user
//! and group providers, as the Python `ral_accounts` kept them.
//!
//! Each file is a table of `:`-separated records kept as raw lines, so
//! that every line not changed is written back byte for byte. All four are
//! guarded by lckpwdf's lock (`etc/.pwd.lock`, which useradd and its
//! friends take too); a change to several of them is one edit, committed
//! in an order that leaves an entry complete before the file that makes it
//! exist (passwd for a user, group for a group) is replaced.

use std::collections::{BTreeMap, HashSet};

use serde_json::Value as Json;

use crate::files::{Attrs, Edit, Lock, Owner, Root, Target};
use crate::text::escaped;
use crate::text::{is_control, quoted};
use crate::{Call, CallError, CallResult, Change, Outcome, Update};

/// The largest user or group id.
pub const ID_MAX: u64 = 4_294_967_294;
/// The longest new user or group name.
pub const NAME_MAX: usize = 32;
/// shadow-utils' default rule for new names (useradd(8), groupadd(8)), so
/// that ral never makes an account those tools refuse.
pub const NAME_RULE: &str = "lowercase letters, digits, '_' and '-', starting with a letter or \
                             '_', optionally ending in '$', at most 32 characters";

/// `'NAME' is not a valid WHAT` when `name` breaks the rule for new
/// names.
pub fn name_problem(name: &str, what: &str) -> Option<String> {
    let body = name.strip_suffix('$').unwrap_or(name);
    let mut chars = body.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c == '_');
    let rest_ok =
        chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-');
    match first_ok && rest_ok && name.chars().count() <= NAME_MAX {
        true => None,
        false => Some(format!("{} is not a valid {what}", quoted(name))),
    }
}

/// A value as messages show it: quoted, with control and invisible
/// characters escaped (`'svc\u{0}'`) as the Python toolkit writes them,
/// so that the message shows what was refused.
pub fn shown(value: &str) -> String {
    escaped(value)
}

/// Why `text` cannot be one field of an account file, or `None`: the
/// field separator ':' ends the field early for every reader, and a
/// control character (Unicode's Cc: C0, DEL and C1, and the line and
/// paragraph separators) either ends the line (a line break), ends the
/// string for C readers (NUL: glibc reads `svc\0` as `svc`, and an empty
/// shell as /bin/sh) or is read back by ral as '?', so the value would
/// never converge.
pub fn field_problem(text: &str) -> Option<String> {
    if text.contains(':') {
        return Some("contains ':', the field separator".to_owned());
    }
    let c = text.chars().find(|&c| is_control(c))?;
    Some(format!(
        "contains the control character U+{:04X}, which no account file can hold",
        u32::from(c)
    ))
}

/// A text attribute's value checked to be one field of an account file
/// (see [`field_problem`]); a secret one is not shown in the message.
pub fn check_field(attr: &str, value: &Json, secret: bool) -> CallResult<String> {
    let Some(text) = value.as_str() else {
        let what = match secret {
            true => "the value".to_owned(),
            false => value.to_string(),
        };
        return Err(CallError::new(format!("{attr}: {what} is not a string")));
    };
    match field_problem(text) {
        None => Ok(text.to_owned()),
        Some(problem) => {
            let what = match secret {
                true => "the value".to_owned(),
                false => shown(text),
            };
            Err(CallError::new(format!("{attr}: {what} {problem}")))
        }
    }
}

/// Why `name` cannot stand in a group's member list (in group and
/// gshadow), or `None`: glibc and shadow-utils split the list at ',' and
/// skip white space before a name, so such a name would be read as
/// another one, or as several; a leading '+', '-' or '#' is read as NIS
/// or a comment by some tools, and control or invisible characters hide
/// what the name is. `what` names it in the message ("member name").
pub fn member_problem(name: &str, what: &str) -> Option<String> {
    if name.is_empty() {
        return Some(format!("{what} must not be empty"));
    }
    for c in name.chars() {
        if c == ':' || c == ',' {
            return Some(format!(
                "{what} {} contains {}",
                shown(name),
                quoted(&c.to_string())
            ));
        }
        if c.is_whitespace() || ('\x1c'..='\x1f').contains(&c) {
            return Some(format!("{what} {} contains whitespace", shown(name)));
        }
        if is_control(c) || is_format(c) {
            return Some(format!(
                "{what} {} contains a control character",
                shown(name)
            ));
        }
    }
    if name.starts_with(['-', '+', '#']) {
        let first = &name[..1];
        return Some(format!(
            "{what} {} starts with {}",
            shown(name),
            quoted(first)
        ));
    }
    if name.len() > NAME_MAX {
        return Some(format!(
            "{what} {} is longer than {NAME_MAX} bytes",
            shown(name)
        ));
    }
    None
}

/// Unicode's format characters (Cf) that can hide in a name: the
/// invisible and bidirectional controls.
fn is_format(c: char) -> bool {
    matches!(c,
        '\u{ad}' | '\u{600}'..='\u{605}' | '\u{61c}' | '\u{6dd}' | '\u{70f}' | '\u{180e}'
        | '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2060}'..='\u{2064}'
        | '\u{2066}'..='\u{206f}' | '\u{feff}' | '\u{fff9}'..='\u{fffb}'
        | '\u{e0001}' | '\u{e0020}'..='\u{e007f}')
}

/// The names in a group record's member list.
pub fn members_of(fields: &[String]) -> Vec<String> {
    fields[3]
        .split(',')
        .map(str::trim)
        .filter(|m| !m.is_empty())
        .map(str::to_owned)
        .collect()
}

/// The files, in the order a commit replaces them: the file that makes an
/// entry exist last, and what it refers to before it.
const COMMIT_ORDER: [&str; 4] = ["gshadow", "group", "shadow", "passwd"];

/// Fields per record, the indexes of numeric ids, and the mode of a new
/// file.
fn layout(name: &str) -> (usize, &'static [usize], u32) {
    match name {
        "passwd" => (7, &[2, 3], 0o644),
        "shadow" => (9, &[], 0o640),
        "group" => (4, &[2], 0o644),
        _ => (4, &[], 0o640),
    }
}

/// Text from the bytes of a system file: UTF-8 if possible, else
/// Latin-1, which decodes any byte (and encodes back to the same bytes).
/// Fields are decoded one by one: a field ral wrote (UTF-8) reads back
/// as written even on a line whose other fields are Latin-1.
fn decode(raw: &[u8]) -> String {
    match std::str::from_utf8(raw) {
        Ok(text) => text.to_owned(),
        Err(_) => raw.iter().map(|&b| char::from(b)).collect(),
    }
}

/// One line of a table as raw bytes (its terminator included), and the
/// decoded record, or `None` for a line that is not one.
#[derive(Debug, Clone)]
pub struct Record {
    pub raw: Vec<u8>,
    pub fields: Option<Vec<String>>,
}

impl Record {
    pub fn name(&self) -> Option<&str> {
        self.fields.as_ref().map(|f| f[0].as_str())
    }

    /// The record's fields (of a line that is one).
    pub fn f(&self) -> &[String] {
        self.fields.as_deref().unwrap_or_default()
    }

    /// Field `index` as a number (ids were checked when read).
    pub fn id(&self, index: usize) -> u64 {
        self.f()[index].parse().unwrap_or_default()
    }

    /// Replaces one field, keeping the others' bytes. The line then ends
    /// in a bare line feed: glibc reads a carriage return before it as part
    /// of the last field, which ral reads without it.
    pub fn set_field(&mut self, index: usize, value: &str) {
        let mut text = self.raw.as_slice();
        while let Some(rest) = text
            .strip_suffix(b"\n")
            .or_else(|| text.strip_suffix(b"\r"))
        {
            text = rest;
        }
        let end = match self.raw[text.len()..].contains(&b'\n') {
            true => b"\n".to_vec(),
            false => Vec::new(),
        };
        let mut parts: Vec<Vec<u8>> = text.split(|&b| b == b':').map(<[u8]>::to_vec).collect();
        if index < parts.len() {
            parts[index] = value.as_bytes().to_vec();
        }
        let mut raw = parts.join(&b':');
        raw.extend_from_slice(&end);
        self.raw = raw;
        if let Some(fields) = self.fields.as_mut() {
            fields[index] = value.to_owned();
        }
    }
}

/// One account file; `exists` is false when there is no such file.
#[derive(Debug, Clone)]
pub struct Table {
    pub target: Target,
    new_mode: u32,
    pub exists: bool,
    pub lines: Vec<Record>,
    pub changed: bool,
}

impl Table {
    fn new(call: &Call, name: &str, target: Target, data: Option<Vec<u8>>) -> Table {
        let (width, numeric, new_mode) = layout(name);
        let exists = data.is_some();
        let data = data.unwrap_or_default();
        let mut lines = Vec::new();
        let mut rest = data.as_slice();
        let mut number = 0;
        while !rest.is_empty() {
            number += 1;
            let (raw, piece) = match rest.iter().position(|&b| b == b'\n') {
                Some(at) => {
                    let raw = &rest[..=at];
                    rest = &rest[at + 1..];
                    (raw, &raw[..at])
                }
                None => {
                    let raw = rest;
                    rest = &[];
                    (raw, raw)
                }
            };
            let fields = parse(call, &target, width, numeric, piece, number);
            lines.push(Record {
                raw: raw.to_vec(),
                fields,
            });
        }
        Table {
            target,
            new_mode,
            exists,
            lines,
            changed: false,
        }
    }

    /// The first record of every name, in file order.
    pub fn records(&self) -> Vec<&Record> {
        let mut seen = HashSet::new();
        self.lines
            .iter()
            .filter(|line| line.name().is_some_and(|name| seen.insert(name)))
            .collect()
    }

    /// Every id in field `index`, of every record (duplicates too).
    pub fn ids(&self, index: usize) -> HashSet<u64> {
        self.lines
            .iter()
            .filter(|line| line.fields.is_some())
            .map(|line| line.id(index))
            .collect()
    }

    pub fn find(&self, name: &str) -> Option<usize> {
        self.lines.iter().position(|line| line.name() == Some(name))
    }

    /// Removes every record of `name`.
    pub fn remove(&mut self, name: &str) {
        let before = self.lines.len();
        self.lines.retain(|line| line.name() != Some(name));
        if self.lines.len() != before {
            self.changed = true;
        }
    }

    pub fn append(&mut self, fields: &[&str]) {
        if let Some(last) = self.lines.last_mut() {
            if !last.raw.ends_with(b"\n") {
                last.raw.push(b'\n');
            }
        }
        let mut raw = fields.join(":").into_bytes();
        raw.push(b'\n');
        self.lines.push(Record {
            raw,
            fields: Some(fields.iter().map(|f| (*f).to_owned()).collect()),
        });
        self.changed = true;
    }

    fn content(&self) -> Vec<u8> {
        self.lines
            .iter()
            .flat_map(|line| line.raw.iter().copied())
            .collect()
    }
}

/// The fields of one line, or `None` (with a warning for a malformed one).
fn parse(
    call: &Call,
    target: &Target,
    width: usize,
    numeric: &[usize],
    piece: &[u8],
    number: usize,
) -> Option<Vec<String>> {
    let mut bytes = piece;
    while let Some(rest) = bytes.strip_suffix(b"\r") {
        bytes = rest;
    }
    let line = decode(bytes);
    // Python's strip(): Unicode white space and the information
    // separators \x1c-\x1f.
    let stripped = line.trim_matches(|c: char| c.is_whitespace() || ('\x1c'..='\x1f').contains(&c));
    if stripped.is_empty() || stripped.starts_with(['#', '+', '-']) {
        return None;
    }
    let fields: Vec<String> = bytes.split(|&b| b == b':').map(decode).collect();
    let warn = |what: String| {
        call.log.warning(&format!(
            "{} line {number}: {what}; line skipped",
            target.path()
        ));
    };
    if fields.len() != width {
        warn(format!(
            "expected {width} ':'-separated fields, found {}",
            fields.len()
        ));
        return None;
    }
    if fields[0].is_empty() {
        warn("empty name".to_owned());
        return None;
    }
    for &index in numeric {
        let value = &fields[index];
        let number_ok = !value.is_empty()
            && value.bytes().all(|b| b.is_ascii_digit())
            && value.parse::<u128>().is_ok_and(|n| n <= u128::from(ID_MAX));
        if !number_ok {
            warn(format!(
                "{} is not a number from 0 to {ID_MAX}",
                quoted(value)
            ));
            return None;
        }
    }
    Some(fields)
}

/// The account files below the root, read through an edit (under the
/// lock, or as a reader for a noop one) when given, else as a reader sees
/// them (an edit a crash interrupted counts as finished). Optional files
/// that cannot be read are `None` instead of an error. A missing `etc`
/// is an error whose `missing` is set.
pub struct Accounts {
    pub tables: BTreeMap<&'static str, Option<Table>>,
}

impl Accounts {
    pub fn read(
        call: &Call,
        root: &Root,
        names: &[&'static str],
        mut edit: Option<&mut Edit>,
        optional: &[&str],
    ) -> CallResult<Accounts> {
        let mut reader = match edit {
            Some(_) => None,
            None => Some(Lock::accounts(root)?),
        };
        let mut tables = BTreeMap::new();
        for &name in names {
            let loaded = (|| -> CallResult<Table> {
                let dir = match (&edit, &reader) {
                    (Some(edit), _) => edit.dir().clone(),
                    (None, Some(lock)) => lock.dir().clone(),
                    (None, None) => unreachable!("a reader or an edit"),
                };
                let target = dir.entry(name)?;
                let data = match (edit.as_deref_mut(), reader.as_mut()) {
                    (Some(edit), _) => edit.read(&target)?,
                    (None, Some(lock)) => lock.read(call, &target, None)?.map(|(data, _)| data),
                    (None, None) => None,
                };
                Ok(Table::new(call, name, target, data))
            })();
            match loaded {
                Ok(table) => tables.insert(name, Some(table)),
                Err(_) if optional.contains(&name) => tables.insert(name, None),
                Err(err) => return Err(err),
            };
        }
        Ok(Accounts { tables })
    }

    pub fn get(&self, name: &str) -> Option<&Table> {
        self.tables.get(name).and_then(Option::as_ref)
    }

    pub fn get_mut(&mut self, name: &str) -> Option<&mut Table> {
        self.tables.get_mut(name).and_then(Option::as_mut)
    }

    fn snapshot(&self) -> BTreeMap<&'static str, Option<Table>> {
        self.tables.clone()
    }

    /// Stages every changed file and commits them as one edit;
    /// `new_owners` gives the owner a new file of a name gets.
    fn save(&self, edit: &mut Edit, new_owners: &[(&str, Owner)]) -> CallResult<()> {
        for name in COMMIT_ORDER {
            let Some(table) = self.get(name).filter(|t| t.changed) else {
                continue;
            };
            let attrs = Attrs {
                new_mode: table.new_mode,
                new_owner: new_owners
                    .iter()
                    .find(|(file, _)| *file == name)
                    .map(|(_, owner)| *owner),
                ..Attrs::default()
            };
            edit.write(&table.target, table.content(), attrs)?;
        }
        edit.commit()
    }
}

/// What an update of the account files needs besides them.
pub trait Apply {
    /// The tables to read.
    fn tables(&self) -> &'static [&'static str];

    /// Tables that may be missing as a table (gshadow): dropped when the
    /// file does not exist.
    fn drop_missing(&self) -> &'static [&'static str] {
        &[]
    }

    /// One update on the tables in memory; its changes, or why it
    /// failed (then its edits are undone).
    fn apply(&mut self, call: &Call, update: &Update, db: &mut Accounts)
        -> CallResult<Vec<Change>>;

    /// The owners new files get.
    fn new_owners(&self, _db: &Accounts) -> Vec<(&'static str, Owner)> {
        Vec::new()
    }

    /// Runs once the files are saved (or, under noop, would be), while
    /// the lock is held, with the tables as saved.
    fn after(&mut self, _call: &Call, _root: &Root, _db: &Accounts) -> CallResult<()> {
        Ok(())
    }
}

/// Runs every update on the account files read under lckpwdf's lock (as
/// a reader, under noop); the edits of an update that fails are undone.
/// The changed files are then saved as one edit, and `after` runs while
/// the lock is still held (under noop too, to say what it would do).
pub fn change_each(
    call: &Call,
    updates: &[Update],
    job: &mut dyn Apply,
) -> CallResult<Vec<Outcome>> {
    let root = Root::open(&call.root)?;
    let mut edit = Edit::begin(Lock::accounts(&root)?, call)?;
    let mut db = Accounts::read(call, &root, job.tables(), Some(&mut edit), &[])?;
    for name in job.drop_missing() {
        if db.get(name).is_some_and(|t| !t.exists) {
            db.tables.insert(name, None);
        }
    }
    let mut outcomes = Vec::with_capacity(updates.len());
    for update in updates {
        let saved = db.snapshot();
        let outcome = job.apply(call, update, &mut db);
        if outcome.is_err() {
            db.tables = saved;
        }
        outcomes.push(outcome);
    }
    let owners = job.new_owners(&db);
    db.save(&mut edit, &owners)?;
    job.after(call, &root, &db)?;
    drop(edit);
    Ok(outcomes)
}

/// A checked id: an integer from 0 to [`ID_MAX`].
pub fn check_id(attr: &str, value: &serde_json::Value) -> CallResult<u64> {
    match value.as_u64().filter(|id| *id <= ID_MAX) {
        Some(id) if !value.is_boolean() => Ok(id),
        _ => Err(CallError::new(format!(
            "{attr}: {value} is not an integer from 0 to {ID_MAX}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::native::tests::{call, logged_call};

    #[test]
    fn new_names_follow_shadow_utils_rule() {
        assert_eq!(name_problem("alice", "user name"), None);
        assert_eq!(name_problem("_svc-1$", "user name"), None);
        assert_eq!(
            name_problem("Bob", "user name").as_deref(),
            Some("'Bob' is not a valid user name")
        );
        assert!(name_problem("1x", "group name").is_some());
        assert!(name_problem(&"a".repeat(33), "user name").is_some());
        assert!(name_problem("", "user name").is_some());
    }

    #[test]
    fn a_field_is_replaced_keeping_the_other_bytes() {
        let mut record = Record {
            raw: b"g:x:10:a,\xff\n".to_vec(),
            fields: Some(vec!["g".into(), "x".into(), "10".into(), "a,\u{ff}".into()]),
        };
        record.set_field(2, "11");
        assert_eq!(record.raw, b"g:x:11:a,\xff\n".to_vec());
        assert_eq!(record.f()[2], "11");
    }

    /// glibc reads `/bin/sh\r` from a line ending in CR LF; ral reads
    /// `/bin/sh`. A line ral changes ends in LF, so both read what ral
    /// wrote; a last line without one stays without.
    #[test]
    fn a_changed_line_ends_in_a_bare_line_feed() {
        let line = |raw: &[u8]| Record {
            raw: raw.to_vec(),
            fields: Some(vec!["g".into(), "x".into(), "10".into(), "a".into()]),
        };
        let mut record = line(b"g:x:10:a\r\n");
        record.set_field(3, "b");
        assert_eq!(record.raw, b"g:x:10:b\n".to_vec());
        let mut record = line(b"g:x:10:a\r");
        record.set_field(3, "b");
        assert_eq!(record.raw, b"g:x:10:b".to_vec());
    }

    /// A field is decoded on its own: UTF-8 that ral wrote reads back as
    /// written beside a Latin-1 field.
    #[test]
    fn each_field_is_decoded_on_its_own() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("etc")).unwrap();
        let call = call(dir.path());
        let target = Root::open(dir.path())
            .unwrap()
            .directory("etc", true, None)
            .unwrap()
            .file("passwd")
            .unwrap();
        // The comment in Latin-1, the shell in UTF-8.
        let mut data = b"zoe:x:1:1:Zo\xeb:/home/zoe:/bin/b".to_vec();
        data.extend("\u{e4}sh\n".as_bytes());
        let table = Table::new(&call, "passwd", target, Some(data));
        assert_eq!(table.lines[0].f()[4], "Zo\u{eb}");
        assert_eq!(table.lines[0].f()[6], "/bin/b\u{e4}sh");
    }

    /// After the lock is taken, `etc` is swapped for another whose files
    /// are not the ones locked: the files are read where the lock is, a
    /// link among them resolved from there.
    #[test]
    fn the_account_files_are_read_where_the_lock_is() {
        let dir = tempfile::tempdir().unwrap();
        let etc = dir.path().join("etc");
        std::fs::create_dir(&etc).unwrap();
        std::fs::write(
            etc.join("passwd"),
            "alice:x:1000:1000::/home/alice:/bin/sh\n",
        )
        .unwrap();
        std::fs::write(etc.join("shadow.real"), "alice:!:1::::::\n").unwrap();
        std::os::unix::fs::symlink("shadow.real", etc.join("shadow")).unwrap();
        let call = call(dir.path());
        let root = Root::open(dir.path()).unwrap();
        let mut edit = Edit::begin(Lock::accounts(&root).unwrap(), &call).unwrap();
        std::fs::rename(&etc, dir.path().join("etc.locked")).unwrap();
        std::fs::create_dir(&etc).unwrap();
        std::fs::write(etc.join("passwd"), "mallory:x:0:0::/:/bin/sh\n").unwrap();
        std::fs::write(etc.join("shadow"), "mallory::1::::::\n").unwrap();
        let db = Accounts::read(&call, &root, &["passwd", "shadow"], Some(&mut edit), &[]).unwrap();
        let names = |table: &str| -> Vec<String> {
            db.get(table)
                .unwrap()
                .records()
                .iter()
                .filter_map(|r| r.name().map(str::to_owned))
                .collect()
        };
        assert_eq!(names("passwd"), ["alice"]);
        assert_eq!(names("shadow"), ["alice"]);
        assert_eq!(db.get("shadow").unwrap().target.name(), "shadow.real");
    }

    /// Python's strip() took the information separators for white
    /// space: such a line is blank, a comment or NIS, skipped silently.
    #[test]
    fn lines_blank_for_python_are_skipped_without_a_warning() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("etc")).unwrap();
        let (call, said) = logged_call(dir.path());
        let root = Root::open(dir.path()).unwrap();
        let target = root
            .directory("etc", true, None)
            .unwrap()
            .file("passwd")
            .unwrap();
        let table = Table::new(
            &call,
            "passwd",
            target,
            Some(b"\x1c+dave\n\x1f#x\n\x1d\nbad line\nok:x:1:1::/:/bin/sh\n".to_vec()),
        );
        let names: Vec<&str> = table.records().iter().filter_map(|r| r.name()).collect();
        assert_eq!(names, ["ok"]);
        let said = said.text();
        assert_eq!(
            said.lines().count(),
            1,
            "only 'bad line' is warned of: {said}"
        );
        assert!(said.contains("line 4: expected 7"), "{said}");
    }

    /// An id field is a number from 0 to [`ID_MAX`] in digits alone (no
    /// sign, not empty), the gid of a group line too: a line with any
    /// other is skipped with a warning.
    #[test]
    fn a_line_whose_id_is_no_number_in_range_is_skipped_with_a_warning() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("etc")).unwrap();
        let (call, said) = logged_call(dir.path());
        let etc = Root::open(dir.path())
            .unwrap()
            .directory("etc", true, None)
            .unwrap();
        let names = |name: &str, data: &str| -> Vec<String> {
            let target = etc.file(name).unwrap();
            let table = Table::new(&call, name, target, Some(data.as_bytes().to_vec()));
            let records = table.records();
            records
                .iter()
                .filter_map(|r| r.name().map(str::to_owned))
                .collect()
        };
        let passwd = "plus:x:+5:1::/:/bin/sh\n\
                      big:x:4294967295:1::/:/bin/sh\n\
                      word:x:1:x1::/:/bin/sh\n\
                      none:x::1::/:/bin/sh\n\
                      max:x:4294967294:0::/:/bin/sh\n";
        assert_eq!(names("passwd", passwd), ["max"]);
        assert_eq!(names("group", "words:x:abc:\nstaff:x:50:\n"), ["staff"]);
        let said = said.text();
        for bad in ["'+5'", "'4294967295'", "'x1'", "''", "'abc'"] {
            assert!(
                said.contains(&format!(
                    "{bad} is not a number from 0 to 4294967294; line skipped"
                )),
                "{bad}: {said}"
            );
        }
    }

    #[test]
    fn ids_are_checked_integers() {
        assert_eq!(check_id("uid", &serde_json::json!(5)), Ok(5));
        let err = check_id("uid", &serde_json::json!(true)).unwrap_err();
        assert_eq!(
            err.message,
            "uid: true is not an integer from 0 to 4294967294"
        );
        assert!(check_id("gid", &serde_json::json!(4_294_967_295u64)).is_err());
        assert!(check_id("gid", &serde_json::json!(-1)).is_err());
        assert!(check_id("gid", &serde_json::json!("5")).is_err());
    }
}
