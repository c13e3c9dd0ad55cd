//! Password aging and account expiry: the user type's
//! `password_min_age`, `password_max_age`, `password_warn_days` and
//! `expiry`, kept in shadow's fields 4, 5, 6 and 8 as chage(1) keeps them.
//!
//! Each field is a number of days, empty for none. An attribute reads
//! like Puppet's useradd provider (through getspnam) reads it: an empty
//! age is -1, an empty expiry `absent`, and an expiry is the date that
//! many days after 1970-01-01. Written values are the ones `chage -m`,
//! `-M`, `-W` and `-E` write: -1 and `absent` empty the field.

use serde_json::{json, Value as Json};

use super::super::accounts::{shown, Record};
use crate::{CallError, CallResult, Change, Resource};

/// The attributes and their shadow fields (0-based), in field order.
pub const FIELDS: [(&str, usize); 4] = [
    ("password_min_age", 3),
    ("password_max_age", 4),
    ("password_warn_days", 5),
    ("expiry", 7),
];

/// The largest number of days: shadow-utils reads a larger one back
/// wrong (its parser wraps at 32 bits: after `chage -M 2147483648`, chage
/// reads -2147483648).
pub const DAYS_MAX: i64 = 2_147_483_647;

/// The last day a `YYYY-MM-DD` expiry can name: 9999-12-31.
const EXPIRY_MAX: i64 = 2_932_896;

/// A checked value to give one field: `days` is -1 for none (an empty
/// field).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wanted {
    attr: &'static str,
    index: usize,
    days: i64,
}

impl Wanted {
    pub fn attr(&self) -> &'static str {
        self.attr
    }
}

/// The aging attributes `should` sets, checked; the first bad one fails
/// the update, naming the attribute and the value.
pub fn check(should: &Resource) -> CallResult<Vec<Wanted>> {
    let mut wanted = Vec::new();
    for (attr, index) in FIELDS {
        let Some(value) = should.get(attr) else {
            continue;
        };
        let days = match attr {
            "expiry" => expiry_days(value)?,
            _ => age_days(attr, value)?,
        };
        wanted.push(Wanted { attr, index, days });
    }
    Ok(wanted)
}

fn age_days(attr: &str, value: &Json) -> CallResult<i64> {
    match value.as_i64().filter(|d| (-1..=DAYS_MAX).contains(d)) {
        Some(days) => Ok(days),
        None => Err(CallError::new(format!(
            "{attr}: {value} is not a number of days from 0 to {DAYS_MAX}, or -1 for none"
        ))),
    }
}

fn expiry_days(value: &Json) -> CallResult<i64> {
    let Some(text) = value.as_str() else {
        return Err(CallError::new(format!(
            "expiry: {value} is not a date YYYY-MM-DD or 'absent'"
        )));
    };
    if text == "absent" {
        return Ok(-1);
    }
    date_days(text).map_err(|problem| CallError::new(format!("expiry: {} {problem}", shown(text))))
}

/// The days from 1970-01-01 to a `YYYY-MM-DD` date, or why it is none
/// shadow can hold.
fn date_days(text: &str) -> Result<i64, String> {
    let form = "is not a date YYYY-MM-DD or 'absent'";
    let bytes = text.as_bytes();
    let digits = |range: std::ops::Range<usize>| -> Option<i64> {
        let part = bytes.get(range)?;
        part.iter()
            .all(u8::is_ascii_digit)
            .then(|| part.iter().fold(0, |n, b| n * 10 + i64::from(b - b'0')))
    };
    let (year, month, day) = match (bytes.len(), bytes.get(4), bytes.get(7)) {
        (10, Some(b'-'), Some(b'-')) => (digits(0..4), digits(5..7), digits(8..10)),
        _ => return Err(form.to_owned()),
    };
    let (Some(year), Some(month), Some(day)) = (year, month, day) else {
        return Err(form.to_owned());
    };
    if !(1..=12).contains(&month) || day < 1 || day > month_length(year, month) {
        return Err("is no day of the calendar".to_owned());
    }
    if year < 1970 {
        return Err("is before 1970-01-01, the first day shadow can hold".to_owned());
    }
    Ok(days_from_civil(year, month, day))
}

fn month_length(year: i64, month: i64) -> i64 {
    let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    match month {
        2 if leap => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a date of the proleptic Gregorian calendar
/// (H. Hinnant's `days_from_civil`), for years from 1970.
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y / 400;
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date `days` (0 or more) after 1970-01-01, as `YYYY-MM-DD`.
fn civil_from_days(days: i64) -> String {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

/// A field's days as getspnam reads them (-1 when empty), when it holds
/// a value the attribute can show.
fn field_days(attr: &str, text: &str) -> Option<i64> {
    let days = match text {
        "" => -1,
        _ => text.parse::<i64>().ok()?,
    };
    let max = match attr {
        "expiry" => EXPIRY_MAX,
        _ => DAYS_MAX,
    };
    (-1..=max).contains(&days).then_some(days)
}

fn value_of(attr: &str, days: i64) -> Json {
    match (attr, days) {
        ("expiry", -1) => json!("absent"),
        ("expiry", _) => json!(civil_from_days(days)),
        _ => json!(days),
    }
}

/// Puts the attributes a shadow record holds into `res`; a field no
/// attribute value can stand for (not a number, or out of range) is left
/// out.
pub fn report(shadow: &[String], res: &mut Resource) {
    for (attr, index) in FIELDS {
        if let Some(days) = field_days(attr, &shadow[index]) {
            res.insert(attr.into(), value_of(attr, days));
        }
    }
}

/// Gives `record` (a shadow line) the `wanted` values, changing only the
/// fields whose value differs (an empty field and `-1` are the same);
/// every other byte of the line stays.
pub fn apply(record: &mut Record, wanted: &[Wanted]) -> Vec<Change> {
    let mut changes = Vec::new();
    for want in wanted {
        let old = field_days(want.attr, &record.f()[want.index]);
        if old == Some(want.days) {
            continue;
        }
        let text = match want.days {
            -1 => String::new(),
            days => days.to_string(),
        };
        record.set_field(want.index, &text);
        let was = old.map_or(Json::Null, |days| value_of(want.attr, days));
        changes.push(Change::new(want.attr, was, value_of(want.attr, want.days)));
    }
    changes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn should(pairs: Json) -> Resource {
        pairs.as_object().cloned().unwrap()
    }

    fn refusal(pairs: Json) -> String {
        check(&should(pairs)).unwrap_err().message
    }

    /// The day numbers chage(1) writes for `-E` (checked against it with
    /// `chage -R` on a fake root), both ways.
    #[test]
    fn dates_are_days_since_1970_as_chage_writes_them() {
        for (date, days) in [
            ("1970-01-01", 0),
            ("1970-03-01", 59),
            ("2000-02-29", 11_016),
            ("2024-12-31", 20_088),
            ("2025-01-01", 20_089),
            ("2100-03-01", 47_541),
            ("9999-12-31", EXPIRY_MAX),
        ] {
            assert_eq!(date_days(date), Ok(days), "{date}");
            assert_eq!(civil_from_days(days), date, "{days}");
        }
        // Every day round-trips, to the last one a date can name.
        for days in (0..=EXPIRY_MAX).step_by(97) {
            assert_eq!(date_days(&civil_from_days(days)), Ok(days));
        }
    }

    #[test]
    fn impossible_and_malformed_dates_are_refused_naming_them() {
        for (date, problem) in [
            ("2025-02-30", "is no day of the calendar"),
            ("2023-02-29", "is no day of the calendar"),
            ("1900-02-29", "is no day of the calendar"),
            ("2025-13-01", "is no day of the calendar"),
            ("2025-04-31", "is no day of the calendar"),
            ("2025-01-00", "is no day of the calendar"),
            ("1969-12-31", "is before 1970-01-01"),
            ("2025-1-05", "is not a date YYYY-MM-DD or 'absent'"),
            ("20250105", "is not a date YYYY-MM-DD or 'absent'"),
            ("2025-01-05 ", "is not a date YYYY-MM-DD or 'absent'"),
            ("+025-01-05", "is not a date YYYY-MM-DD or 'absent'"),
            ("２025-01-05", "is not a date YYYY-MM-DD or 'absent'"),
            ("never", "is not a date YYYY-MM-DD or 'absent'"),
            ("", "is not a date YYYY-MM-DD or 'absent'"),
        ] {
            let message = refusal(json!({ "expiry": date }));
            assert!(
                message.starts_with(&format!("expiry: '{date}' {problem}")),
                "{date}: {message}"
            );
        }
        assert_eq!(
            refusal(json!({"expiry": 20089})),
            "expiry: 20089 is not a date YYYY-MM-DD or 'absent'"
        );
        assert_eq!(date_days("2024-02-29"), Ok(19_782));
    }

    #[test]
    fn ages_are_days_or_minus_one_for_none() {
        let wanted = check(&should(json!({
            "password_max_age": -1, "password_min_age": 0, "password_warn_days": DAYS_MAX,
            "expiry": "absent"
        })))
        .unwrap();
        let days: Vec<(&str, i64)> = wanted.iter().map(|w| (w.attr, w.days)).collect();
        assert_eq!(
            days,
            [
                ("password_min_age", 0),
                ("password_max_age", -1),
                ("password_warn_days", DAYS_MAX),
                ("expiry", -1)
            ]
        );
        for (attr, value) in [
            ("password_max_age", json!(-2)),
            ("password_min_age", json!(2_147_483_648u64)),
            ("password_warn_days", json!("7")),
            ("password_warn_days", json!(1.5)),
            ("password_max_age", json!(true)),
            ("password_max_age", json!(null)),
        ] {
            assert_eq!(
                refusal(json!({ attr: value })),
                format!(
                    "{attr}: {value} is not a number of days from 0 to 2147483647, or -1 for none"
                )
            );
        }
    }

    /// As getspnam reads the fields: empty is -1 (no expiry: absent), a
    /// field no value can stand for is not shown.
    #[test]
    fn fields_read_as_puppet_reads_them() {
        let read = |line: &str| {
            let fields: Vec<String> = line.split(':').map(str::to_owned).collect();
            let mut res = Resource::new();
            report(&fields, &mut res);
            Json::Object(res)
        };
        assert_eq!(
            read("root:*:20228:0:99999:7:::"),
            json!({"password_min_age": 0, "password_max_age": 99999,
                "password_warn_days": 7, "expiry": "absent"})
        );
        assert_eq!(
            read("pg:!:20593::::::"),
            json!({"password_min_age": -1, "password_max_age": -1,
                "password_warn_days": -1, "expiry": "absent"})
        );
        assert_eq!(
            read("u:!:1:-1:007:x::-1:"),
            json!({"password_min_age": -1, "password_max_age": 7, "expiry": "absent"})
        );
        assert_eq!(
            read("u:!:1:-2:2147483648:1::20089:"),
            json!({"password_warn_days": 1, "expiry": "2025-01-01"})
        );
        assert_eq!(
            read("u:!:1:::::2932897:"),
            json!({"password_min_age": -1,
            "password_max_age": -1, "password_warn_days": -1})
        );
    }

    #[test]
    fn only_fields_whose_value_differs_are_written() {
        let line = "u:$6$h:19000::30:7::-1:x\n";
        let mut record = Record {
            raw: line.as_bytes().to_vec(),
            fields: Some(line.trim_end().split(':').map(str::to_owned).collect()),
        };
        let same = check(&should(
            json!({"password_min_age": -1, "password_max_age": 30,
            "expiry": "absent"}),
        ))
        .unwrap();
        assert!(apply(&mut record, &same).is_empty());
        assert_eq!(record.raw, line.as_bytes());
        let other = check(&should(
            json!({"password_max_age": -1, "expiry": "2025-01-01",
            "password_warn_days": 5}),
        ))
        .unwrap();
        let changes = apply(&mut record, &other);
        assert_eq!(record.raw, b"u:$6$h:19000:::5::20089:x\n".to_vec());
        let said: Vec<(String, Json, Json)> = changes
            .into_iter()
            .map(|c| (c.attribute, c.was, c.is))
            .collect();
        assert_eq!(
            said,
            [
                ("password_max_age".to_owned(), json!(30), json!(-1)),
                ("password_warn_days".to_owned(), json!(7), json!(5)),
                ("expiry".to_owned(), json!("absent"), json!("2025-01-01")),
            ]
        );
    }
}
