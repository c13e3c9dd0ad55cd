//! `timezone` (the local zone's abbreviation now, `UTC`, `CET`, as
//! localtime_r(3) names it from `TZ` or `/etc/localtime`), and
//! `uptime_seconds` and `system_uptime: {seconds, hours, days, uptime}`
//! from `/proc/uptime`.

use std::path::Path;

use serde_json::{Map, Value as Json};

use super::sources::{machine_file, Facts};

/// The whole seconds of a `/proc/uptime` (its first number).
pub fn parse_uptime(text: &str) -> Option<u64> {
    let first = text.split_whitespace().next()?;
    let whole = first.split('.').next()?;
    whole.parse().ok()
}

/// Facter's `system_uptime`: seconds, whole hours and days, and the text
/// (`3:07 hours`, `1 day`, `12 days`).
pub fn system_uptime(seconds: u64) -> Json {
    let hours = seconds / 3600;
    let days = hours / 24;
    let minutes = (seconds / 60) % 60;
    let text = match days {
        0 => format!("{hours}:{minutes:02} hours"),
        1 => "1 day".to_owned(),
        days => format!("{days} days"),
    };
    let mut uptime = Map::new();
    uptime.insert("days".into(), Json::from(days));
    uptime.insert("hours".into(), Json::from(hours));
    uptime.insert("seconds".into(), Json::from(seconds));
    uptime.insert("uptime".into(), Json::from(text));
    Json::Object(uptime)
}

/// Adds `timezone`, `uptime_seconds` and `system_uptime`.
pub(super) fn insert(facts: &mut Facts, machine: &Path) {
    match crate::local_time::zone_now() {
        Some(zone) => {
            facts.insert("timezone".into(), Json::from(zone));
        }
        None => log::debug!("facts: the local time zone has no name"),
    }
    if let Some(seconds) = machine_file(machine, "proc/uptime").and_then(|t| parse_uptime(&t)) {
        facts.insert("uptime_seconds".into(), Json::from(seconds));
        facts.insert("system_uptime".into(), system_uptime(seconds));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn uptime_as_facter_tells_it() {
        assert_eq!(parse_uptime("350735.47 234388.90\n"), Some(350735));
        assert_eq!(parse_uptime("12 3"), Some(12));
        assert_eq!(parse_uptime(""), None);
        assert_eq!(parse_uptime("x.5 1"), None);
        assert_eq!(
            system_uptime(11_220),
            json!({"days": 0, "hours": 3, "seconds": 11220, "uptime": "3:07 hours"})
        );
        assert_eq!(system_uptime(90_000)["uptime"], "1 day");
        assert_eq!(system_uptime(350_735)["uptime"], "4 days");
        assert_eq!(system_uptime(59)["uptime"], "0:00 hours");
    }
}
