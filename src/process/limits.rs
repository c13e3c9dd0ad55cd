//! The time limits every run of the process module shares: the grace
//! a group gets between SIGTERM and SIGKILL, the linger of what holds an
//! exited program's output, the longest time limit, the interrupt poll.
//! Below the runner, the groups and the sweeps, which all read them.

use std::time::{Duration, Instant};

/// How long a provider has to exit after SIGTERM before it gets SIGKILL.
pub const KILL_GRACE: Duration = Duration::from_secs(2);
/// How long processes left behind by an exited provider may keep its
/// output open before they are killed.
pub const OUTPUT_LINGER: Duration = Duration::from_secs(2);
/// The longest time limit honoured; longer ones are cut to this.
pub(super) const MAX_TIMEOUT: Duration = Duration::from_secs(365 * 24 * 3600);
/// How often a waiting call checks for a forwarded interrupt.
pub(super) const INTERRUPT_POLL: Duration = Duration::from_millis(100);

/// The time left until `deadline`, none once it is past.
pub(super) fn remaining(deadline: Instant) -> Duration {
    deadline.saturating_duration_since(Instant::now())
}
