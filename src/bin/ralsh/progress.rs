//! A progress line for long listings: when stderr is a terminal and stdout
//! is a file (or `/dev/null`), a listing that takes longer than a second
//! shows how many resources it has listed so far, redrawn at most five
//! times a second and erased at the end. Not for a pipe: the program
//! reading it (`less`, `grep`) may be writing to the same terminal.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

/// How long a listing runs before progress is shown.
const QUIET_FOR: Duration = Duration::from_secs(1);
/// The shortest time between two redraws.
const REDRAW_EVERY: Duration = Duration::from_millis(200);

pub struct Progress {
    label: String,
    enabled: bool,
    started: Instant,
    drawn_at: Option<Instant>,
}

impl Progress {
    /// Progress for listing `label`, shown only when it helps (see the
    /// module documentation).
    pub fn new(label: String, quiet: bool) -> Progress {
        let enabled = !quiet && std::io::stderr().is_terminal() && stdout_is_a_file();
        Progress::with(label, enabled)
    }

    fn with(label: String, enabled: bool) -> Progress {
        Progress {
            label,
            enabled,
            started: Instant::now(),
            drawn_at: None,
        }
    }

    /// The line to draw for `count` resources now, if one is due.
    fn due(&mut self, count: usize, now: Instant) -> Option<String> {
        if !self.enabled || now.duration_since(self.started) < QUIET_FOR {
            return None;
        }
        if self
            .drawn_at
            .is_some_and(|at| now.duration_since(at) < REDRAW_EVERY)
        {
            return None;
        }
        self.drawn_at = Some(now);
        Some(format!("\r\x1b[K{}: {count} resources listed", self.label))
    }

    /// Called as resources arrive (and while waiting for more).
    pub fn tick(&mut self, count: usize) {
        // Most listings show no progress; they should not read the clock
        // once per resource either.
        if !self.enabled {
            return;
        }
        if let Some(line) = self.due(count, Instant::now()) {
            let mut err = std::io::stderr().lock();
            let _ = err.write_all(line.as_bytes()).and_then(|()| err.flush());
        }
    }

    /// Erases the progress line, if one was drawn.
    pub fn finish(&mut self) {
        if self.drawn_at.take().is_some() {
            let _ = std::io::stderr().write_all(b"\r\x1b[K");
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.finish();
    }
}

/// Whether stdout is a regular file or `/dev/null`.
fn stdout_is_a_file() -> bool {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let Ok(meta) = std::fs::metadata("/proc/self/fd/1") else {
        return false;
    };
    let null = std::fs::metadata("/dev/null").ok();
    meta.file_type().is_file()
        || (meta.file_type().is_char_device() && null.is_some_and(|n| n.rdev() == meta.rdev()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_waits_a_second_then_redraws_at_most_five_times_a_second() {
        let mut progress = Progress::with("user::etc_passwd".into(), true);
        let start = progress.started;
        assert_eq!(progress.due(10, start + Duration::from_millis(900)), None);
        assert_eq!(
            progress
                .due(20, start + Duration::from_millis(1100))
                .as_deref(),
            Some("\r\x1b[Kuser::etc_passwd: 20 resources listed")
        );
        assert_eq!(progress.due(30, start + Duration::from_millis(1200)), None);
        assert!(progress
            .due(40, start + Duration::from_millis(1300))
            .is_some());
        progress.drawn_at = None;
        let mut off = Progress::with("x".into(), false);
        assert_eq!(off.due(1, off.started + Duration::from_secs(5)), None);
    }
}
