//! Owner and group names as the root's `/etc/passwd` and `/etc/group`
//! give them: a name for each id reported, an id for each name asked for.

use std::collections::HashMap;

use serde_json::Value as Json;

use crate::files::Root;
use crate::text::{clean, python_dumps, quoted};
use crate::{CallError, CallResult};

/// Names and ids from a passwd-style file below the root.
#[derive(Debug, Default)]
pub struct IdMap {
    by_id: HashMap<u64, String>,
    by_name: HashMap<String, u64>,
}

/// Which file an [`IdMap`] was read from, and what it words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ids {
    Users,
    Groups,
}

impl Ids {
    fn file(self) -> &'static str {
        match self {
            Ids::Users => "etc/passwd",
            Ids::Groups => "etc/group",
        }
    }

    /// The attribute it serves.
    fn attribute(self) -> &'static str {
        match self {
            Ids::Users => "owner",
            Ids::Groups => "group",
        }
    }
}

impl IdMap {
    /// The file of `ids` below `root`; empty when it cannot be read.
    pub fn read(root: &Root, ids: Ids) -> IdMap {
        let data = match root.read(ids.file(), true) {
            Ok(Some((data, _))) => data,
            _ => Vec::new(),
        };
        IdMap::parse(&data)
    }

    /// The first entry of each name and of each id counts; comments and
    /// NIS lines (`+`, `-`) do not.
    pub fn parse(data: &[u8]) -> IdMap {
        let mut map = IdMap::default();
        for raw in data.split(|&b| b == b'\n') {
            let line = String::from_utf8_lossy(raw);
            let line = line.trim_end_matches('\r');
            let fields: Vec<&str> = line.split(':').collect();
            if fields.len() < 3 || fields[0].is_empty() || fields[0].starts_with(['#', '+', '-']) {
                continue;
            }
            let Some(number) = digits(fields[2]) else {
                continue;
            };
            map.by_name.entry(fields[0].to_owned()).or_insert(number);
            map.by_id
                .entry(number)
                .or_insert_with(|| fields[0].to_owned());
        }
        map
    }

    /// The name of `id`, or the number when it has none.
    pub fn show(&self, id: u32) -> String {
        match self.by_id.get(&u64::from(id)) {
            Some(name) => clean(name),
            None => id.to_string(),
        }
    }

    /// The id a value of `owner` or `group` names: a name in the file, or
    /// else a number.
    pub fn lookup(&self, value: &Json, ids: Ids) -> CallResult<u32> {
        let what = ids.attribute();
        let text = match value {
            Json::String(text) if !text.is_empty() => text,
            _ => {
                return Err(CallError::new(format!(
                    "{what}: {} is not a name or number",
                    python_dumps(value, true)
                )))
            }
        };
        let number = match self.by_name.get(text.as_str()) {
            Some(&number) => Some(number),
            None => digits(text),
        };
        match number {
            Some(number) => u32::try_from(number).map_err(|_| {
                CallError::new(format!(
                    "{what}: {} is out of range",
                    python_dumps(value, true)
                ))
            }),
            None => Err(CallError::new(format!(
                "{what}: no {} named {} in {}",
                match ids {
                    Ids::Users => "user",
                    Ids::Groups => "group",
                },
                quoted(text),
                match ids {
                    Ids::Users => "/etc/passwd",
                    Ids::Groups => "/etc/group",
                }
            ))),
        }
    }
}

/// The number `text` is when it is ASCII digits alone (saturated when it
/// does not fit: no id is that large).
fn digits(text: &str) -> Option<u64> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(text.parse().unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_entry_of_a_name_or_id_counts_and_others_are_skipped() {
        let map = IdMap::parse(
            b"root:x:0:0::/:/bin/sh\r\n#c:x:5:5\n+nis:x:6:6\nshort:x\nadmin:x:0:0\nweb:x:33\nbad:x:x1:1\nweb:x:34:\n",
        );
        assert_eq!(map.show(0), "root");
        assert_eq!(map.show(33), "web");
        assert_eq!(map.show(5), "5");
        assert_eq!(map.lookup(&Json::from("admin"), Ids::Users), Ok(0));
        assert_eq!(map.lookup(&Json::from("web"), Ids::Users), Ok(33));
        assert_eq!(map.lookup(&Json::from("1234"), Ids::Groups), Ok(1234));
        assert_eq!(
            map.lookup(&Json::from("nobody"), Ids::Users)
                .unwrap_err()
                .message,
            "owner: no user named 'nobody' in /etc/passwd"
        );
        assert_eq!(
            map.lookup(&Json::from(""), Ids::Groups)
                .unwrap_err()
                .message,
            "group: \"\" is not a name or number"
        );
        assert_eq!(
            map.lookup(&Json::from(7), Ids::Groups).unwrap_err().message,
            "group: 7 is not a name or number"
        );
    }
}
