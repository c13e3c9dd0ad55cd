//! Many targets at once: a fixed number of worker threads (`--forks`)
//! take the targets in order, each running the whole work of one target;
//! the results come back in the targets' order. Nothing a target does
//! stops the others. After an interrupt no target is started.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use crate::process;

/// Runs `work` on every item with at most `forks` at a time; `None` for
/// the items an interrupt kept from starting.
pub fn fan_out<T: Sync, R: Send>(
    items: &[T],
    forks: usize,
    work: impl Fn(&T) -> R + Sync,
) -> Vec<Option<R>> {
    let results: Mutex<Vec<Option<R>>> = Mutex::new((0..items.len()).map(|_| None).collect());
    let next = AtomicUsize::new(0);
    let workers = forks.clamp(1, items.len().max(1));
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| loop {
                if process::is_interrupted() {
                    return;
                }
                let index = next.fetch_add(1, Ordering::SeqCst);
                let Some(item) = items.get(index) else {
                    return;
                };
                let result = work(item);
                results.lock().unwrap_or_else(|e| e.into_inner())[index] = Some(result);
            });
        }
    });
    results.into_inner().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_keep_the_order_and_no_more_than_forks_run_at_once() {
        let items: Vec<usize> = (0..40).collect();
        let running = AtomicUsize::new(0);
        let most = AtomicUsize::new(0);
        let results = fan_out(&items, 3, |item| {
            let now = running.fetch_add(1, Ordering::SeqCst) + 1;
            most.fetch_max(now, Ordering::SeqCst);
            std::thread::yield_now();
            running.fetch_sub(1, Ordering::SeqCst);
            item * 2
        });
        let doubled: Vec<usize> = results.into_iter().map(Option::unwrap).collect();
        assert_eq!(doubled, items.iter().map(|i| i * 2).collect::<Vec<_>>());
        assert!(most.load(Ordering::SeqCst) <= 3);
        assert!(fan_out(&[] as &[u8], 20, |_| ()).is_empty());
    }
}
