//! The scheduler's own time for a whole run of 5,000 and 50,000 tasks
//! (every task succeeding at once), against the scan it replaced (which
//! looked through the whole plan for each batch it started). Linear means
//! ten times the tasks take about ten times as long.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use ral::converge::schedule::{Node, Schedule};

const PROVIDERS: usize = 8;

/// Tasks round-robin over the providers (the even ones batched); each
/// waits for the two tasks three and seven places before it.
fn graph(tasks: usize) -> (Vec<usize>, Vec<Vec<usize>>) {
    let provider = (0..tasks).map(|t| t % PROVIDERS).collect();
    let requires = (0..tasks)
        .map(|t| [3, 7].iter().filter_map(|d| t.checked_sub(*d)).collect())
        .collect();
    (provider, requires)
}

fn batched() -> Vec<bool> {
    (0..PROVIDERS).map(|p| p % 2 == 0).collect()
}

/// A whole run on the schedule, four batches at once; how many tasks ran.
fn run_schedule(provider: &[usize], requires: &[Vec<usize>]) -> usize {
    let nodes = provider
        .iter()
        .zip(requires)
        .map(|(&provider, requires)| Node {
            provider,
            requires,
            pending: true,
            alone: false,
        });
    let mut schedule = Schedule::new(batched(), nodes);
    let mut running: Vec<Vec<usize>> = Vec::new();
    let mut ran = 0;
    loop {
        while running.len() < 4 {
            match schedule.next_batch() {
                Some(batch) => running.push(batch),
                None => break,
            }
        }
        let Some(done) = running.pop() else {
            return ran;
        };
        ran += done.len();
        schedule.batch_ended(schedule.provider_of(done[0]));
        for task in done {
            schedule.succeeded(task);
        }
    }
}

/// The same run with the scan the scheduler replaced: for each batch
/// started, the first ready task of a provider not busy is looked for
/// from the start of the plan, and a batched provider's others after it.
fn run_scan(provider: &[usize], requires: &[Vec<usize>]) -> usize {
    #[derive(Clone, Copy, PartialEq)]
    enum State {
        Initial,
        Running,
        Success,
    }
    let batched = batched();
    let mut state = vec![State::Initial; provider.len()];
    let mut busy: Vec<usize> = Vec::new();
    let mut running: Vec<Vec<usize>> = Vec::new();
    let mut ran = 0;
    loop {
        while running.len() < 4 {
            let ready = |t: usize, state: &[State]| {
                state[t] == State::Initial
                    && requires[t].iter().all(|&r| state[r] == State::Success)
            };
            let Some(first) =
                (0..provider.len()).find(|&t| ready(t, &state) && !busy.contains(&provider[t]))
            else {
                break;
            };
            let mut batch = vec![first];
            if batched[provider[first]] {
                batch.extend(
                    (first + 1..provider.len())
                        .filter(|&t| ready(t, &state) && provider[t] == provider[first]),
                );
            }
            for &t in &batch {
                state[t] = State::Running;
            }
            busy.push(provider[first]);
            running.push(batch);
        }
        let Some(done) = running.pop() else {
            return ran;
        };
        ran += done.len();
        busy.retain(|&p| p != provider[done[0]]);
        for task in done {
            state[task] = State::Success;
        }
    }
}

fn scheduler(c: &mut Criterion) {
    let mut group = c.benchmark_group("scheduler");
    group.sample_size(10);
    for tasks in [5_000, 50_000] {
        let (provider, requires) = graph(tasks);
        // Both run every task.
        assert_eq!(run_schedule(&provider, &requires), tasks);
        assert_eq!(run_scan(&provider, &requires), tasks);
        group.bench_with_input(BenchmarkId::new("graph walk", tasks), &tasks, |b, _| {
            b.iter(|| black_box(run_schedule(&provider, &requires)))
        });
        if tasks <= 5_000 {
            group.bench_with_input(BenchmarkId::new("plan scan", tasks), &tasks, |b, _| {
                b.iter(|| black_box(run_scan(&provider, &requires)))
            });
        }
    }
    group.finish();
}

criterion_group!(benches, scheduler);
criterion_main!(benches);
