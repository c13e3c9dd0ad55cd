//! `ral apply`'s progress on a terminal: a spinner line for each running
//! task (a few, then "and N more") with its resource and how long it has
//! run, and, for a plan of more than a handful of tasks, a bar of the
//! tasks ended. It is drawn on stderr only, and only when stderr is a
//! terminal (not TERM=dumb); it is cleared at the end. The task lines on
//! stdout, and the messages on stderr, are written while it is
//! suspended, so that no line is torn.

mod log_output;

pub use log_output::LogOutput;

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressState, ProgressStyle};
use ral::converge::apply::{Calling, Events};
use ral::converge::catalog::Catalog;
use ral::converge::plan::Plan;
use ral::converge::state::StoredItem;

use crate::converge_args::ConvergeArgs;

/// How many running tasks get a line of their own.
const SHOWN: usize = 4;
/// A plan of more tasks than this gets a bar.
const HANDFUL: usize = 5;
/// How often the spinners turn and their times change.
const TICK: Duration = Duration::from_millis(100);
/// Room for a resource's name on its line: the name is cut beyond it.
const NAME_WIDTH: usize = 60;

/// The progress of one apply's `plan`, or `None` where it is not drawn:
/// with --json or -q, over targets (whose runs go on side by side, their
/// output gathered), or where stderr is not a terminal, or TERM is dumb
/// or unset.
pub fn for_run(args: &ConvergeArgs, plan: &Plan) -> Option<Progress> {
    if args.json || args.quiet || args.remote.is_remote() {
        return None;
    }
    let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stderr());
    // indicatif hides its output from a pipe, a file and a dumb terminal.
    if multi.is_hidden() {
        return None;
    }
    Some(Progress::new(multi, plan.tasks.len()))
}

/// The progress lines, kept up to date by [`Shown`].
pub struct Progress {
    multi: MultiProgress,
    /// The log records, written around the progress while it is drawn.
    logs: log_output::Routed,
    /// The tasks ended of all, for a larger plan.
    bar: Option<ProgressBar>,
    /// The running tasks with a line: their index in the plan.
    shown: Vec<(usize, ProgressBar)>,
    /// The running tasks beyond those, with when they started, in order.
    waiting: VecDeque<(usize, String, Instant)>,
    /// "and N more", while tasks wait for a line.
    more: Option<ProgressBar>,
    /// The tasks counted as ended: a task failed by its reading back ends
    /// twice, and counts once.
    counted: std::collections::HashSet<usize>,
}

impl Progress {
    /// The progress of `tasks` tasks, drawn by `multi`.
    fn new(multi: MultiProgress, tasks: usize) -> Progress {
        let bar = (tasks > HANDFUL).then(|| {
            let bar = multi.add(ProgressBar::new(tasks as u64).with_style(bar_style()));
            bar.tick();
            bar
        });
        Progress {
            logs: log_output::around(&multi),
            multi,
            bar,
            shown: Vec::new(),
            waiting: VecDeque::new(),
            more: None,
            counted: std::collections::HashSet::new(),
        }
    }

    fn started(&mut self, task: usize, name: String) {
        if self.shown.len() < SHOWN {
            self.show(task, name, Duration::ZERO);
        } else {
            self.waiting.push_back((task, name, Instant::now()));
            self.count_more();
        }
    }

    fn ended(&mut self, task: usize) {
        if !self.counted.insert(task) {
            return;
        }
        if let Some(bar) = &self.bar {
            bar.inc(1);
        }
        if let Some(at) = self.shown.iter().position(|(shown, _)| *shown == task) {
            let (_, line) = self.shown.remove(at);
            line.finish_and_clear();
            self.multi.remove(&line);
            // The task waiting longest takes the line, with its own time.
            if let Some((next, name, started)) = self.waiting.pop_front() {
                self.show(next, name, started.elapsed());
            }
        } else {
            // A task that never got a line, or that ended without starting
            // (skipped or stopped).
            self.waiting.retain(|(waiting, ..)| *waiting != task);
        }
        self.count_more();
    }

    /// A spinner line for `task`, above "and N more" and the bar.
    fn show(&mut self, task: usize, name: String, elapsed: Duration) {
        let line = ProgressBar::new_spinner()
            .with_style(spinner_style())
            .with_message(name)
            .with_elapsed(elapsed);
        let line = match self.more.as_ref().or(self.bar.as_ref()) {
            Some(below) => self.multi.insert_before(below, line),
            None => self.multi.add(line),
        };
        line.enable_steady_tick(TICK);
        self.shown.push((task, line));
    }

    /// Shows how many running tasks have no line, or nothing when none.
    fn count_more(&mut self) {
        match (self.waiting.len(), &self.more) {
            (0, None) => {}
            (0, Some(more)) => {
                more.finish_and_clear();
                self.multi.remove(more);
                self.more = None;
            }
            (n, Some(more)) => more.set_message(format!("and {n} more")),
            (n, None) => {
                let more = ProgressBar::new_spinner()
                    .with_style(
                        ProgressStyle::with_template("  {msg}")
                            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
                    )
                    .with_message(format!("and {n} more"));
                let more = match &self.bar {
                    Some(bar) => self.multi.insert_before(bar, more),
                    None => self.multi.add(more),
                };
                more.tick();
                self.more = Some(more);
            }
        }
    }

    /// Runs `print` with the progress taken off the terminal, then draws
    /// it again: what `print` writes is never torn by it.
    fn suspend<R>(&self, print: impl FnOnce() -> R) -> R {
        self.multi.suspend(print)
    }
}

impl Drop for Progress {
    /// The progress leaves the terminal as it found it, also when the run
    /// ends early.
    fn drop(&mut self) {
        self.logs.end();
        let lines = self.shown.drain(..).map(|(_, line)| line);
        for line in lines.chain(self.more.take()).chain(self.bar.take()) {
            line.finish_and_clear();
        }
        let _ = self.multi.clear();
    }
}

fn spinner_style() -> ProgressStyle {
    ProgressStyle::with_template("{spinner} {msg} {seconds}")
        .unwrap_or_else(|_| ProgressStyle::default_spinner())
        .with_key(
            "seconds",
            |state: &ProgressState, out: &mut dyn std::fmt::Write| {
                let _ = write!(out, "{:.1}s", state.elapsed().as_secs_f64());
            },
        )
}

fn bar_style() -> ProgressStyle {
    ProgressStyle::with_template("[{bar:30}] {pos}/{len} tasks")
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ")
}

/// A resource's name as its line shows it: cut to [`NAME_WIDTH`]
/// characters, so that a line never wraps on a usual terminal.
fn short_name(name: String) -> String {
    match name.char_indices().nth(NAME_WIDTH) {
        Some((cut, _)) => format!("{}…", &name[..cut]),
        None => name,
    }
}

/// Events that update the progress, then go to `inner` (which prints the
/// task lines) with the progress suspended.
pub struct Shown<'a> {
    pub progress: Progress,
    pub inner: &'a mut dyn Events,
}

impl Events for Shown<'_> {
    fn plan_state(&mut self, catalog: &Catalog, plan: &Plan) {
        self.progress
            .suspend(|| self.inner.plan_state(catalog, plan));
    }

    fn task_started(&mut self, catalog: &Catalog, plan: &Plan, task: usize) {
        self.tasks_started(catalog, plan, &[task]);
    }

    fn task_ended(&mut self, catalog: &Catalog, plan: &Plan, task: usize) {
        self.tasks_ended(catalog, plan, &[task]);
    }

    fn tasks_started(&mut self, catalog: &Catalog, plan: &Plan, tasks: &[usize]) {
        self.progress
            .suspend(|| self.inner.tasks_started(catalog, plan, tasks));
        for &task in tasks {
            let name = catalog.items[plan.tasks[task].item].reference();
            self.progress.started(task, short_name(name));
        }
    }

    fn tasks_ended(&mut self, catalog: &Catalog, plan: &Plan, tasks: &[usize]) {
        for &task in tasks {
            self.progress.ended(task);
        }
        self.progress
            .suspend(|| self.inner.tasks_ended(catalog, plan, tasks));
    }

    fn tasks_calling(&mut self, catalog: &Catalog, plan: &Plan, calls: &[Calling]) -> bool {
        self.progress
            .suspend(|| self.inner.tasks_calling(catalog, plan, calls))
    }

    fn forgotten(&mut self, items: &[StoredItem]) {
        self.progress.suspend(|| self.inner.forgotten(items));
    }

    fn tasks_verified(&mut self, catalog: &Catalog, plan: &Plan, tasks: &[usize]) {
        self.progress
            .suspend(|| self.inner.tasks_verified(catalog, plan, tasks));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the lines say: the tasks shown, the "and N more" and the bar.
    fn lines(progress: &Progress) -> (Vec<usize>, Option<String>, Option<u64>) {
        let shown = progress.shown.iter().map(|(task, _)| *task).collect();
        let more = progress.more.as_ref().map(|more| more.message());
        (
            shown,
            more,
            progress.bar.as_ref().map(ProgressBar::position),
        )
    }

    #[test]
    fn a_few_tasks_have_lines_and_the_others_wait_for_one() {
        let mut progress = Progress::new(
            MultiProgress::with_draw_target(ProgressDrawTarget::hidden()),
            8,
        );
        for task in 0..7 {
            progress.started(task, format!("t[{task}]"));
        }
        assert_eq!(
            lines(&progress),
            (vec![0, 1, 2, 3], Some("and 3 more".into()), Some(0))
        );
        // A task with a line ends: the one waiting longest takes it.
        progress.ended(1);
        assert_eq!(
            lines(&progress),
            (vec![0, 2, 3, 4], Some("and 2 more".into()), Some(1))
        );
        // A task without a line ends: it waits no more.
        progress.ended(6);
        assert_eq!(
            lines(&progress),
            (vec![0, 2, 3, 4], Some("and 1 more".into()), Some(2))
        );
        progress.ended(0);
        assert_eq!(lines(&progress), (vec![2, 3, 4, 5], None, Some(3)));
        // Ended again (failed by its reading back): counted once.
        progress.ended(0);
        assert_eq!(lines(&progress), (vec![2, 3, 4, 5], None, Some(3)));
    }

    #[test]
    fn a_handful_of_tasks_has_no_bar() {
        let progress = Progress::new(
            MultiProgress::with_draw_target(ProgressDrawTarget::hidden()),
            HANDFUL,
        );
        assert_eq!(lines(&progress), (vec![], None, None));
    }

    #[test]
    fn long_names_are_cut() {
        assert_eq!(short_name("file[/etc]".into()), "file[/etc]");
        let long = format!("file[/{}]", "é".repeat(100));
        let cut = short_name(long.clone());
        assert_eq!(cut.chars().count(), NAME_WIDTH + 1);
        assert!(cut.ends_with('…') && long.starts_with(cut.trim_end_matches('…')));
    }
}
