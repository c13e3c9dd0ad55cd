//! When `ral agent` runs, decided from the clock alone (the loop gives the
//! times, so the rules are tested without waiting): at start; every
//! interval after the last run, plus a random splay drawn for each; when a
//! watched file changes, once the burst of writes has settled; at once
//! when asked (SIGUSR1) or when the manifests change (SIGHUP, or an edit).
//!
//! Two limits keep a run from following another too closely: a gap after
//! every run (a file something rewrites all the time costs at most one
//! run per gap), and after failed runs a backoff that doubles with each
//! failure in a row, up to a ceiling. Backoff holds back the interval and
//! drift runs only: a run asked for, or one on changed manifests, waits
//! for the gap alone (a new catalog is a new chance).

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// The schedule's settings.
#[derive(Debug, Clone)]
pub struct Timing {
    pub interval: Duration,
    /// The most a run on the interval is put off by (a random share of
    /// it each time), so that machines started together do not all run
    /// together.
    pub splay: Duration,
    /// The quiet after a watched file's last change before its run.
    pub settle: Duration,
    /// The longest a change waits for the quiet.
    pub gather: Duration,
    /// The least time from the end of one run to the start of the next.
    pub gap: Duration,
    /// How long after a failed run the next one waits; doubled for each
    /// failed run in a row, up to `backoff_max`.
    pub backoff: Duration,
    pub backoff_max: Duration,
}

impl Timing {
    /// The settle, gather and gap the agent uses, with `interval`,
    /// `splay` and `backoff` as given. The gap is half a second, or the
    /// interval when shorter (who asks for runs that often gets them);
    /// the backoff's ceiling five minutes, or the interval when shorter,
    /// never below the backoff itself.
    pub fn new(interval: Duration, splay: Duration, backoff: Duration) -> Timing {
        Timing {
            interval,
            splay,
            settle: Duration::from_millis(100),
            gather: Duration::from_millis(500),
            gap: Duration::from_millis(500).min(interval),
            backoff,
            backoff_max: Duration::from_secs(300).min(interval).max(backoff),
        }
    }

    /// The wait after `failures` failed runs in a row.
    pub fn backoff_after(&self, failures: u32) -> Duration {
        if failures == 0 {
            return Duration::ZERO;
        }
        let doubled = self
            .backoff
            .checked_mul(1u32.checked_shl(failures - 1).unwrap_or(u32::MAX))
            .unwrap_or(self.backoff_max);
        doubled.min(self.backoff_max)
    }
}

/// Why a run happens: everything that asked for it since the last one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Why {
    pub start: bool,
    pub interval: bool,
    /// SIGUSR1.
    pub asked: bool,
    /// The manifests changed.
    pub reload: bool,
    /// SIGHUP: the providers and the manifests are read again.
    pub hup: bool,
    /// Watched files that changed (in the root's terms).
    pub drift: BTreeSet<PathBuf>,
}

impl Why {
    pub fn start() -> Why {
        Why {
            start: true,
            ..Why::default()
        }
    }

    pub fn asked() -> Why {
        Why {
            asked: true,
            ..Why::default()
        }
    }

    pub fn reload() -> Why {
        Why {
            reload: true,
            ..Why::default()
        }
    }

    pub fn hup() -> Why {
        Why {
            hup: true,
            ..Why::default()
        }
    }

    /// Whether the manifests are read again first.
    pub fn reads_manifests(&self) -> bool {
        self.reload || self.hup
    }

    pub fn drift(paths: impl IntoIterator<Item = PathBuf>) -> Why {
        Why {
            drift: paths.into_iter().collect(),
            ..Why::default()
        }
    }

    fn merge(&mut self, other: Why) {
        self.start |= other.start;
        self.interval |= other.interval;
        self.asked |= other.asked;
        self.reload |= other.reload;
        self.hup |= other.hup;
        self.drift.extend(other.drift);
    }

    /// Not held back by a backoff.
    fn exempt(&self) -> bool {
        self.start || self.asked || self.reads_manifests()
    }

    /// Waits for writes to settle (a run asked for does not).
    fn settles(&self) -> bool {
        !(self.start || self.asked)
    }

    /// For the history and the log: `start`, `every 30m`, `SIGUSR1`,
    /// `manifests changed`, `SIGHUP`, `drift: /etc/hosts, /etc/passwd`,
    /// joined by `; `.
    pub fn text(&self, interval: Duration) -> String {
        let mut parts = Vec::new();
        if self.start {
            parts.push("start".to_owned());
        }
        if self.reload {
            parts.push("manifests changed".to_owned());
        }
        if self.hup {
            parts.push("SIGHUP".to_owned());
        }
        if self.asked {
            parts.push("SIGUSR1".to_owned());
        }
        if self.interval {
            parts.push(format!("every {}", super::duration::show(interval)));
        }
        if !self.drift.is_empty() {
            let paths: Vec<String> = self
                .drift
                .iter()
                .map(|p| crate::text::escape(&p.to_string_lossy()))
                .collect();
            parts.push(format!("drift: {}", paths.join(", ")));
        }
        parts.join("; ")
    }
}

/// A run wanted by events, and when they came.
#[derive(Debug)]
struct Wanted {
    why: Why,
    first: Instant,
    last: Instant,
}

/// The agent's clock: what is due, and when to look again.
#[derive(Debug)]
pub struct Schedule {
    timing: Timing,
    next_interval: Instant,
    wanted: Option<Wanted>,
    /// No run starts before this (the gap after the last run, or a retry).
    gap_until: Option<Instant>,
    /// No interval or drift run starts before this.
    backoff_until: Option<Instant>,
    failures: u32,
}

impl Schedule {
    /// A schedule whose first run, the start's, is due at `now`.
    pub fn new(timing: Timing, now: Instant) -> Schedule {
        Schedule {
            next_interval: now + timing.interval,
            timing,
            wanted: Some(Wanted {
                why: Why::start(),
                first: now,
                last: now,
            }),
            gap_until: None,
            backoff_until: None,
            failures: 0,
        }
    }

    pub fn timing(&self) -> &Timing {
        &self.timing
    }

    /// Failed runs in a row.
    pub fn failures(&self) -> u32 {
        self.failures
    }

    /// When the next run on the interval is due.
    pub fn next_interval(&self) -> Instant {
        self.hold(self.next_interval, false)
    }

    /// Asks for a run for `why`, which came at `now`.
    pub fn want(&mut self, now: Instant, why: Why) {
        match &mut self.wanted {
            Some(wanted) => {
                wanted.why.merge(why);
                wanted.last = now;
            }
            None => {
                self.wanted = Some(Wanted {
                    why,
                    first: now,
                    last: now,
                })
            }
        }
    }

    /// `at`, put off by the gap, and (unless `exempt`) by the backoff.
    fn hold(&self, at: Instant, exempt: bool) -> Instant {
        let mut at = at;
        if let Some(gap) = self.gap_until {
            at = at.max(gap);
        }
        if let (Some(backoff), false) = (self.backoff_until, exempt) {
            at = at.max(backoff);
        }
        at
    }

    /// When the wanted run is due, if one is wanted.
    fn wanted_at(&self) -> Option<Instant> {
        let wanted = self.wanted.as_ref()?;
        let settled = match wanted.why.settles() {
            true => (wanted.last + self.timing.settle).min(wanted.first + self.timing.gather),
            false => wanted.first,
        };
        Some(self.hold(settled, wanted.why.exempt()))
    }

    /// When the wanted run is held back by the backoff, the time it waits
    /// for (later than it would run without).
    pub fn held_until(&self) -> Option<Instant> {
        let wanted = self.wanted.as_ref()?;
        let backoff = self.backoff_until?;
        let free = self.hold(wanted.first, true);
        (!wanted.why.exempt() && backoff > free).then_some(backoff)
    }

    /// When the loop must look again: the wanted run's time, or the
    /// interval's, whichever comes first.
    pub fn wake_at(&self) -> Instant {
        let interval = self.next_interval();
        self.wanted_at().map_or(interval, |at| at.min(interval))
    }

    /// The run due at `now`, taken off the schedule (with the interval's
    /// reason too when that is due as well).
    pub fn due(&mut self, now: Instant) -> Option<Why> {
        let interval_due = self.next_interval() <= now;
        if self.wanted_at().is_some_and(|at| at <= now) {
            let mut why = self.wanted.take().map(|w| w.why).unwrap_or_default();
            why.interval |= interval_due;
            return Some(why);
        }
        interval_due.then(|| Why {
            interval: true,
            ..Why::default()
        })
    }

    /// A run for `why` that could not start at `now` (the store was
    /// locked by another run): wanted again, tried after `retry`.
    pub fn put_back(&mut self, now: Instant, why: Why, retry: Duration) {
        let first = self.wanted.as_ref().map_or(now, |w| w.first.min(now));
        self.want(now, why);
        if let Some(wanted) = &mut self.wanted {
            wanted.first = first;
        }
        self.gap_until = Some(now + retry);
    }

    /// A run ended at `now`, `failed` or not; `splay` is this time's draw
    /// of the random delay (at most [`Timing::splay`]).
    pub fn ran(&mut self, now: Instant, failed: bool, splay: Duration) {
        self.failures = if failed { self.failures + 1 } else { 0 };
        self.gap_until = Some(now + self.timing.gap);
        self.backoff_until =
            (self.failures > 0).then(|| now + self.timing.backoff_after(self.failures));
        self.next_interval = now + self.timing.interval + splay.min(self.timing.splay);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn timing() -> Timing {
        Timing::new(
            Duration::from_secs(60),
            Duration::from_secs(10),
            Duration::from_secs(5),
        )
    }

    #[test]
    fn the_start_run_is_due_at_once_then_the_interval_with_its_splay() {
        let t0 = Instant::now();
        let mut schedule = Schedule::new(timing(), t0);
        assert_eq!(schedule.wake_at(), t0);
        assert_eq!(schedule.due(t0), Some(Why::start()));
        assert_eq!(schedule.due(t0), None);
        let end = t0 + ms(300);
        schedule.ran(end, false, Duration::from_secs(4));
        let next = end + Duration::from_secs(64);
        assert_eq!(schedule.wake_at(), next);
        assert_eq!(schedule.due(next - ms(1)), None);
        let why = schedule.due(next).unwrap();
        assert!(why.interval && !why.start, "{why:?}");
        // A splay drawn beyond the setting is cut to it.
        schedule.ran(next, false, Duration::from_secs(99));
        assert_eq!(schedule.next_interval(), next + Duration::from_secs(70));
    }

    #[test]
    fn a_burst_of_writes_is_one_run_once_they_settle_or_the_gather_ends() {
        let t0 = Instant::now();
        let mut schedule = Schedule::new(timing(), t0);
        schedule.due(t0);
        schedule.ran(t0, false, Duration::ZERO);
        let a = PathBuf::from("/etc/hosts");
        let b = PathBuf::from("/etc/passwd");
        let t1 = t0 + Duration::from_secs(2);
        schedule.want(t1, Why::drift([a.clone()]));
        schedule.want(t1 + ms(50), Why::drift([b.clone()]));
        // Settled 100 ms after the last write.
        assert_eq!(schedule.wake_at(), t1 + ms(150));
        assert_eq!(schedule.due(t1 + ms(149)), None);
        let why = schedule.due(t1 + ms(150)).unwrap();
        assert_eq!(why.drift, BTreeSet::from([a.clone(), b]));
        assert_eq!(schedule.due(t1 + ms(151)), None);
        // Writes that never stop still run at the gather's end.
        schedule.ran(t1 + ms(200), false, Duration::ZERO);
        let t2 = t1 + Duration::from_secs(3);
        for step in 0..10 {
            schedule.want(t2 + ms(step * 60), Why::drift([a.clone()]));
        }
        assert_eq!(schedule.wake_at(), t2 + ms(500));
    }

    #[test]
    fn no_run_starts_within_the_gap_after_another() {
        let t0 = Instant::now();
        let mut schedule = Schedule::new(timing(), t0);
        schedule.due(t0);
        schedule.ran(t0 + ms(10), false, Duration::ZERO);
        schedule.want(t0 + ms(20), Why::asked());
        assert_eq!(schedule.wake_at(), t0 + ms(510));
        assert_eq!(schedule.due(t0 + ms(509)), None);
        assert_eq!(schedule.due(t0 + ms(510)), Some(Why::asked()));
    }

    #[test]
    fn failures_back_off_doubling_to_the_ceiling_and_a_success_resets() {
        let t = timing();
        assert_eq!(t.backoff_after(0), Duration::ZERO);
        assert_eq!(t.backoff_after(1), Duration::from_secs(5));
        assert_eq!(t.backoff_after(2), Duration::from_secs(10));
        assert_eq!(t.backoff_after(4), Duration::from_secs(40));
        // The ceiling: the interval (a minute) here.
        assert_eq!(t.backoff_after(5), Duration::from_secs(60));
        assert_eq!(t.backoff_after(200), Duration::from_secs(60));

        let t0 = Instant::now();
        let mut schedule = Schedule::new(t, t0);
        schedule.due(t0);
        schedule.ran(t0, true, Duration::ZERO);
        schedule.ran(t0, true, Duration::ZERO);
        assert_eq!(schedule.failures(), 2);
        let drift = Why::drift([PathBuf::from("/etc/hosts")]);
        schedule.want(t0 + ms(100), drift.clone());
        assert_eq!(schedule.wake_at(), t0 + Duration::from_secs(10));
        assert_eq!(schedule.due(t0 + Duration::from_secs(9)), None);
        assert_eq!(schedule.held_until(), Some(t0 + Duration::from_secs(10)));
        assert_eq!(
            schedule.due(t0 + Duration::from_secs(10)),
            Some(drift.clone())
        );
        assert_eq!(schedule.held_until(), None);
        schedule.ran(t0 + Duration::from_secs(10), false, Duration::ZERO);
        assert_eq!(schedule.failures(), 0);
        schedule.want(t0 + Duration::from_secs(11), drift.clone());
        assert_eq!(schedule.wake_at(), t0 + Duration::from_secs(11) + ms(100));
    }

    #[test]
    fn a_reload_or_a_request_is_never_held_back_by_the_backoff() {
        let t0 = Instant::now();
        let mut schedule = Schedule::new(timing(), t0);
        schedule.due(t0);
        schedule.ran(t0, true, Duration::ZERO);
        schedule.want(t0 + Duration::from_secs(1), Why::reload());
        assert_eq!(schedule.wake_at(), t0 + Duration::from_secs(1) + ms(100));
        assert!(schedule.due(t0 + Duration::from_secs(2)).unwrap().reload);
        schedule.ran(t0 + Duration::from_secs(2), true, Duration::ZERO);
        schedule.want(t0 + Duration::from_secs(2), Why::hup());
        assert!(
            schedule
                .due(t0 + Duration::from_secs(2) + ms(500))
                .unwrap()
                .hup
        );
        schedule.ran(t0 + Duration::from_secs(2) + ms(500), true, Duration::ZERO);
        schedule.want(t0 + Duration::from_secs(3), Why::asked());
        assert_eq!(
            schedule.due(t0 + Duration::from_secs(3)),
            Some(Why::asked())
        );
        // The interval waits for the backoff.
        schedule.ran(t0 + Duration::from_secs(3), true, Duration::ZERO);
        assert_eq!(
            schedule.next_interval(),
            t0 + Duration::from_secs(3) + Duration::from_secs(60)
        );
    }

    #[test]
    fn a_run_put_back_is_tried_again_after_the_retry_with_its_reasons() {
        let t0 = Instant::now();
        let mut schedule = Schedule::new(timing(), t0);
        let why = schedule.due(t0).unwrap();
        schedule.put_back(t0, why, ms(250));
        schedule.want(t0 + ms(10), Why::drift([PathBuf::from("/etc/fstab")]));
        assert_eq!(schedule.due(t0 + ms(249)), None);
        let again = schedule.due(t0 + ms(250)).unwrap();
        assert!(again.start && again.drift.len() == 1, "{again:?}");
    }

    #[test]
    fn why_says_every_reason() {
        let mut why = Why::start();
        why.merge(Why::drift([
            PathBuf::from("/etc/hosts"),
            PathBuf::from("/a\nb"),
        ]));
        why.interval = true;
        assert_eq!(
            why.text(Duration::from_secs(1800)),
            "start; every 30m; drift: /a\\nb, /etc/hosts"
        );
        assert_eq!(Why::reload().text(Duration::ZERO), "manifests changed");
        assert_eq!(Why::asked().text(Duration::ZERO), "SIGUSR1");
        // SIGHUP reads the manifests again, changed or not, and says so.
        assert_eq!(Why::hup().text(Duration::ZERO), "SIGHUP");
        assert!(Why::hup().reads_manifests() && Why::reload().reads_manifests());
        assert!(!Why::asked().reads_manifests());
        let mut both = Why::reload();
        both.merge(Why::hup());
        assert_eq!(both.text(Duration::ZERO), "manifests changed; SIGHUP");
    }
}
