//! Times shown to people: a moment (seconds since the epoch) as a date and
//! time in the local time zone (`TZ`, else `/etc/localtime`), with the
//! zone's name, so that "since" and "created" read as a clock on the wall
//! does. Programs get the seconds themselves (`-j`).

/// `seconds` as `YYYY-MM-DD HH:MM:SS ZONE` in the local time zone.
pub fn local_date(seconds: i64) -> String {
    let time: libc::time_t = seconds;
    // SAFETY: localtime_r (which reads TZ or the zone file once) writes
    // only the tm it is given; strftime writes at most the buffer's
    // length, and returns how much it wrote (0 on failure).
    unsafe {
        let mut tm: libc::tm = std::mem::zeroed();
        if libc::localtime_r(&time, &mut tm).is_null() {
            return format!("{seconds} (unix time)");
        }
        let mut buffer = [0u8; 64];
        let mut format = |format: &std::ffi::CStr| {
            let written = libc::strftime(
                buffer.as_mut_ptr().cast(),
                buffer.len(),
                format.as_ptr(),
                &tm,
            );
            String::from_utf8_lossy(&buffer[..written]).into_owned()
        };
        let date = format(c"%Y-%m-%d %H:%M:%S");
        // The zone's name comes from TZ or a zone file, which a hostile
        // one may fill with escapes; a zone without a name (a TZ that
        // names no zone) is shown by its offset.
        let zone = match format(c"%Z") {
            name if name.trim().is_empty() => format(c"%z"),
            name => crate::text::escape(&name),
        };
        if date.is_empty() {
            return format!("{seconds} (unix time)");
        }
        format!("{date} {zone}")
    }
}

/// The local time zone's abbreviation now (`UTC`, `CET`, `CEST`), as
/// localtime_r(3) names it from `TZ` or `/etc/localtime`; `None` for a
/// zone without a name.
pub fn zone_now() -> Option<String> {
    // SAFETY: time(NULL) only returns; localtime_r writes only the tm it
    // is given; tm_zone, when set, points to a NUL-terminated name the
    // C library keeps for the life of the process (tzname's storage).
    unsafe {
        let now = libc::time(std::ptr::null_mut());
        let mut tm: libc::tm = std::mem::zeroed();
        if libc::localtime_r(&now, &mut tm).is_null() || tm.tm_zone.is_null() {
            return None;
        }
        let name = std::ffi::CStr::from_ptr(tm.tm_zone).to_string_lossy();
        let name = name.trim();
        (!name.is_empty()).then(|| crate::text::escape(name))
    }
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
    fn the_zone_now_is_the_one_a_date_names() {
        let zone = zone_now().expect("this machine's zone has a name");
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64;
        assert!(local_date(now).ends_with(&format!(" {zone}")), "{zone}");
    }
}
