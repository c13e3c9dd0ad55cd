//! Which tasks may start, worked out from the plan's graph as tasks end
//! instead of by scanning the plan: each task counts the tasks it still
//! waits for, each task knows the tasks that wait for it, and each
//! provider keeps its ready tasks in plan order. A task ending touches
//! only its own edges, so a whole run is linear in the tasks and edges
//! (with a logarithm for the plan order of the ready queues).
//!
//! A provider never runs two batches at once: the next batch is the ready
//! task earliest in plan order among the providers not busy, with, for a
//! provider that takes batches (json), every other ready task of it.

use std::collections::{BTreeSet, HashMap};

/// The state of a run's schedule.
pub struct Schedule {
    /// Each task's provider, by index.
    provider: Vec<usize>,
    /// Per provider: whether its ready tasks go to it as one batch.
    batched: Vec<bool>,
    /// Per task: how many of the tasks it waits for have not succeeded.
    waiting: Vec<usize>,
    /// Per task: the tasks that wait for it.
    dependents: Vec<Vec<usize>>,
    /// Per provider: its ready tasks, in plan order.
    ready: Vec<BTreeSet<usize>>,
    /// Per provider: whether it runs a batch.
    busy: Vec<bool>,
    /// How many providers run a batch.
    running: usize,
    /// Per task: whether it will never run (it, or a task it waits for,
    /// did not succeed).
    written_off: Vec<bool>,
    /// Per task: whether it runs in a batch of its own even for a
    /// provider that takes batches (a refresh among changes).
    alone: Vec<bool>,
}

/// One task as the schedule sees it.
pub struct Node<'a> {
    /// Its provider's index.
    pub provider: usize,
    /// The tasks it waits for, by index (each before it).
    pub requires: &'a [usize],
    /// Whether it is still to run (not failed at planning).
    pub pending: bool,
    /// Whether it runs in a batch of its own.
    pub alone: bool,
}

impl Schedule {
    /// The schedule of `tasks` (in plan order) for providers that take
    /// batches as `batched` says. A task that is not pending counts as
    /// not succeeded: see [`Schedule::did_not_succeed`] for its dependents.
    pub fn new<'a>(batched: Vec<bool>, tasks: impl IntoIterator<Item = Node<'a>>) -> Schedule {
        let mut schedule = Schedule {
            ready: vec![BTreeSet::new(); batched.len()],
            busy: vec![false; batched.len()],
            batched,
            provider: Vec::new(),
            waiting: Vec::new(),
            dependents: Vec::new(),
            running: 0,
            written_off: Vec::new(),
            alone: Vec::new(),
        };
        for (at, node) in tasks.into_iter().enumerate() {
            schedule.provider.push(node.provider);
            schedule.waiting.push(node.requires.len());
            schedule.dependents.push(Vec::new());
            schedule.written_off.push(!node.pending);
            schedule.alone.push(node.alone);
            for &before in node.requires {
                assert!(
                    before < at,
                    "task {at} waits for task {before}, not before it"
                );
                schedule.dependents[before].push(at);
            }
            if node.pending && node.requires.is_empty() {
                schedule.ready[node.provider].insert(at);
            }
        }
        schedule
    }

    /// Providers by a dense index, from any key that tells them apart
    /// (their qualified names): the index of each task's provider, and
    /// how many there are.
    pub fn index_providers<K: std::hash::Hash + Eq>(
        keys: impl IntoIterator<Item = K>,
    ) -> (Vec<usize>, usize) {
        let mut index: HashMap<K, usize> = HashMap::new();
        let of_task = keys
            .into_iter()
            .map(|key| {
                let next = index.len();
                *index.entry(key).or_insert(next)
            })
            .collect();
        (of_task, index.len())
    }

    /// Whether `task` may still run: not failed at planning, and no
    /// task it waits for is known not to have succeeded.
    pub fn is_pending(&self, task: usize) -> bool {
        !self.written_off[task]
    }

    /// Whether `provider` runs a batch now.
    pub fn is_busy(&self, provider: usize) -> bool {
        self.busy[provider]
    }

    /// How many providers run a batch now.
    pub fn running(&self) -> usize {
        self.running
    }

    /// The provider of task `task`.
    pub fn provider_of(&self, task: usize) -> usize {
        self.provider[task]
    }

    /// The next batch to start, its provider then busy; `None` when no
    /// provider that is not busy has a ready task.
    pub fn next_batch(&mut self) -> Option<Vec<usize>> {
        let (provider, first) = (0..self.ready.len())
            .filter(|&p| !self.busy[p])
            .filter_map(|p| self.ready[p].first().map(|&first| (p, first)))
            .min_by_key(|&(_, first)| first)?;
        let batch: Vec<usize> = if self.batched[provider] && !self.alone[first] {
            let (alone, batch): (BTreeSet<usize>, BTreeSet<usize>) =
                std::mem::take(&mut self.ready[provider])
                    .into_iter()
                    .partition(|&at| self.alone[at]);
            self.ready[provider] = alone;
            batch.into_iter().collect()
        } else {
            self.ready[provider].remove(&first);
            vec![first]
        };
        self.busy[provider] = true;
        self.running += 1;
        Some(batch)
    }

    /// The batch `provider` ran has ended: it may start another.
    pub fn batch_ended(&mut self, provider: usize) {
        if std::mem::take(&mut self.busy[provider]) {
            self.running -= 1;
        }
    }

    /// `task` succeeded: the tasks that waited only for it (and others
    /// that succeeded) are ready.
    pub fn succeeded(&mut self, task: usize) {
        for at in 0..self.dependents[task].len() {
            let dependent = self.dependents[task][at];
            self.waiting[dependent] -= 1;
            if self.waiting[dependent] == 0 && !self.written_off[dependent] {
                self.ready[self.provider[dependent]].insert(dependent);
            }
        }
    }

    /// `task` did not succeed (failed, was skipped or stopped): the tasks
    /// that wait for it, directly or through others, will never run. They
    /// are returned in plan order, each once over the whole run.
    pub fn did_not_succeed(&mut self, task: usize) -> Vec<usize> {
        self.written_off[task] = true;
        let mut off = Vec::new();
        let mut next = vec![task];
        while let Some(at) = next.pop() {
            for &dependent in &self.dependents[at] {
                if !self.written_off[dependent] {
                    self.written_off[dependent] = true;
                    off.push(dependent);
                    next.push(dependent);
                }
            }
        }
        off.sort_unstable();
        off
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Tasks as (provider, requires); all pending.
    fn schedule(batched: &[bool], tasks: &[(usize, &[usize])]) -> Schedule {
        Schedule::new(
            batched.to_vec(),
            tasks.iter().map(|&(provider, requires)| Node {
                provider,
                requires,
                pending: true,
                alone: false,
            }),
        )
    }

    #[test]
    fn a_task_that_runs_alone_is_never_batched_with_the_others() {
        let mut s = Schedule::new(
            vec![true],
            [false, true, false].iter().map(|&alone| Node {
                provider: 0,
                requires: &[],
                pending: true,
                alone,
            }),
        );
        assert_eq!(s.next_batch(), Some(vec![0, 2]));
        s.batch_ended(0);
        assert_eq!(s.next_batch(), Some(vec![1]));
        s.batch_ended(0);
        assert_eq!(s.next_batch(), None);
    }

    #[test]
    fn a_task_starts_once_all_it_waits_for_succeeded_and_a_provider_runs_one_batch_at_once() {
        // 0 and 1 of provider 0 (simple), 2 of provider 1 waits for both.
        let mut s = schedule(&[false, false], &[(0, &[]), (0, &[]), (1, &[0, 1])]);
        let providers: Vec<usize> = (0..3).map(|t| s.provider_of(t)).collect();
        assert_eq!(providers, [0, 0, 1]);
        assert_eq!(s.next_batch(), Some(vec![0]));
        // Provider 0 is busy; 2 waits.
        assert_eq!(s.next_batch(), None);
        assert_eq!(s.running(), 1);
        s.succeeded(0);
        s.batch_ended(0);
        assert_eq!(s.next_batch(), Some(vec![1]));
        assert_eq!(s.next_batch(), None);
        s.succeeded(1);
        s.batch_ended(0);
        assert_eq!(s.running(), 0);
        assert_eq!(s.next_batch(), Some(vec![2]));
    }

    #[test]
    fn a_batched_provider_takes_all_its_ready_tasks_and_the_earliest_task_goes_first() {
        let mut s = schedule(
            &[true, false],
            &[(1, &[]), (0, &[]), (0, &[]), (0, &[0]), (1, &[])],
        );
        assert_eq!(s.next_batch(), Some(vec![0]));
        assert_eq!(s.next_batch(), Some(vec![1, 2]));
        assert_eq!(s.next_batch(), None);
        s.succeeded(0);
        s.batch_ended(1);
        // 3 is ready, but its provider is busy; provider 1 has 4.
        assert_eq!(s.next_batch(), Some(vec![4]));
        s.batch_ended(1);
        s.succeeded(1);
        s.succeeded(2);
        s.batch_ended(0);
        assert_eq!(s.next_batch(), Some(vec![3]));
    }

    #[test]
    fn what_waits_for_a_task_that_did_not_succeed_is_written_off_once_in_plan_order() {
        // 0 <- 1 <- 3, 0 <- 2 <- 3, 4 alone, 5 waits for 4 and 3.
        let mut s = schedule(
            &[false],
            &[
                (0, &[]),
                (0, &[0]),
                (0, &[0]),
                (0, &[1, 2]),
                (0, &[]),
                (0, &[3, 4]),
            ],
        );
        assert_eq!(s.next_batch(), Some(vec![0]));
        s.batch_ended(0);
        assert_eq!(s.did_not_succeed(0), [1, 2, 3, 5]);
        assert_eq!(s.did_not_succeed(2), Vec::<usize>::new());
        assert_eq!(s.next_batch(), Some(vec![4]));
        s.succeeded(4);
        s.batch_ended(0);
        // 5 also waited for 4, which succeeded: still written off.
        assert_eq!(s.next_batch(), None);
    }

    #[test]
    fn a_task_failed_at_planning_never_starts() {
        let requires: &[usize] = &[];
        let mut s = Schedule::new(
            vec![false],
            [
                Node {
                    provider: 0,
                    requires,
                    pending: false,
                    alone: false,
                },
                Node {
                    provider: 0,
                    requires: &[0],
                    pending: true,
                    alone: false,
                },
            ],
        );
        assert_eq!(s.next_batch(), None);
        assert_eq!(s.did_not_succeed(0), [1]);
    }

    #[test]
    fn providers_are_indexed_densely_by_key() {
        let (of_task, count) = Schedule::index_providers(["b", "a", "b", "c", "a"]);
        assert_eq!(of_task, [0, 1, 0, 2, 1]);
        assert_eq!(count, 3);
    }
}
