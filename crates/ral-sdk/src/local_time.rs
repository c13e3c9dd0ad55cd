//! Times shown to people: a moment (seconds since the epoch) as a date and
//! time in the local time zone (`TZ`, else `/etc/localtime`), with the
//! zone's name, so that "since" and "created" read as a clock on the wall
//! does. Programs get the seconds themselves (`-j`).

use jiff::tz::TimeZone;
use jiff::Timestamp;

/// `seconds` as `YYYY-MM-DD HH:MM:SS ZONE` in the local time zone; as
/// `SECONDS (unix time)` for a moment beyond the years 9999.
pub fn local_date(seconds: i64) -> String {
    let Ok(moment) = Timestamp::from_second(seconds) else {
        return format!("{seconds} (unix time)");
    };
    let zone = TimeZone::system();
    let zoned = moment.to_zoned(zone.clone());
    let date = zoned.strftime("%Y-%m-%d %H:%M:%S");
    // A zone without a name (a TZ that names no zone) is shown by its
    // offset.
    let name = name_at(&zone, moment).unwrap_or_else(|| zoned.strftime("%z").to_string());
    format!("{date} {name}")
}

/// The local time zone's abbreviation now (`UTC`, `CET`, `CEST`), from
/// `TZ` or `/etc/localtime`; `None` for a zone without a name.
pub fn zone_now() -> Option<String> {
    name_at(&TimeZone::system(), Timestamp::now())
}

/// `zone`'s abbreviation at `moment`. It comes from TZ or a zone file,
/// which a hostile one may fill with escapes: escaped.
fn name_at(zone: &TimeZone, moment: Timestamp) -> Option<String> {
    let info = zone.to_offset_info(moment);
    let name = info.abbreviation().trim();
    (!name.is_empty()).then(|| crate::text::escape(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_moment_is_a_local_date_with_its_zone() {
        // The zone is this machine's: the date is that of the moment
        // there, in the shape the history and the lock messages show.
        let shown = local_date(1_795_676_733);
        let shape = regex::Regex::new(r"^2026-11-2[5-7] \d\d:\d\d:33 \S+$").unwrap();
        assert!(shape.is_match(&shown), "{shown}");
        assert_eq!(local_date(i64::MAX), format!("{} (unix time)", i64::MAX));
    }

    #[test]
    fn a_zone_is_named_by_its_abbreviation_at_the_moment() {
        let paris = TimeZone::posix("CET-1CEST,M3.5.0,M10.5.0/3").unwrap();
        let winter = Timestamp::from_second(1_795_676_733).unwrap();
        let summer = Timestamp::from_second(1_780_000_000).unwrap();
        assert_eq!(name_at(&paris, winter).as_deref(), Some("CET"));
        assert_eq!(name_at(&paris, summer).as_deref(), Some("CEST"));
        assert_eq!(name_at(&TimeZone::UTC, winter).as_deref(), Some("UTC"));
    }

    #[test]
    fn the_zone_now_is_the_one_a_date_names() {
        let zone = zone_now().expect("this machine's zone has a name");
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64;
        assert!(local_date(now).ends_with(&format!(" {zone}")), "{zone}");
    }
}
