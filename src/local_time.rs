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
}
