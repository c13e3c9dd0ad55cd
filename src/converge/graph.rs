//! Ordering resources by their dependencies: a topological sort in which
//! the manifest's order breaks ties, and the cycles that prevent one.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Sorts nodes `0..requires.len()` so that every node comes after the
/// nodes it requires, the lowest index first among those ready together.
/// When cycles prevent a full order, returns them instead, each as its
/// nodes in order (each requires the next, the last the first).
pub fn order<R: AsRef<[usize]>>(requires: &[R]) -> Result<Vec<usize>, Vec<Vec<usize>>> {
    let count = requires.len();
    let mut waiting: Vec<usize> = requires.iter().map(|r| r.as_ref().len()).collect();
    let mut dependents: Vec<Vec<usize>> = vec![Vec::new(); count];
    for (node, prerequisites) in requires.iter().enumerate() {
        for &prerequisite in prerequisites.as_ref() {
            dependents[prerequisite].push(node);
        }
    }
    let mut ready: BinaryHeap<Reverse<usize>> = (0..count)
        .filter(|&node| waiting[node] == 0)
        .map(Reverse)
        .collect();
    let mut sorted = Vec::with_capacity(count);
    while let Some(Reverse(node)) = ready.pop() {
        sorted.push(node);
        for &dependent in &dependents[node] {
            waiting[dependent] -= 1;
            if waiting[dependent] == 0 {
                ready.push(Reverse(dependent));
            }
        }
    }
    if sorted.len() == count {
        return Ok(sorted);
    }
    Err(cycles(requires, &waiting))
}

/// The cycles among the nodes left unsorted (`waiting` > 0). Each of those
/// requires at least one other left unsorted, so following such edges from
/// any of them must come back to a node already on the path.
fn cycles<R: AsRef<[usize]>>(requires: &[R], waiting: &[usize]) -> Vec<Vec<usize>> {
    let left = |node: usize| waiting[node] > 0;
    // 0: not visited; 1: on the current path; 2: done.
    let mut mark = vec![0u8; requires.len()];
    let mut found = Vec::new();
    for start in (0..requires.len()).filter(|&node| left(node)) {
        if mark[start] != 0 {
            continue;
        }
        let mut path = vec![start];
        mark[start] = 1;
        loop {
            let node = *path.last().expect("the path is never empty");
            let next = requires[node]
                .as_ref()
                .iter()
                .copied()
                .find(|&p| left(p))
                .expect("a node left unsorted requires another");
            match mark[next] {
                0 => {
                    mark[next] = 1;
                    path.push(next);
                }
                1 => {
                    let at = path.iter().position(|&n| n == next).expect("on the path");
                    found.push(path[at..].to_vec());
                    break;
                }
                // Leads into a cycle already reported.
                _ => break,
            }
        }
        for node in path {
            mark[node] = 2;
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prerequisites_come_first_and_ties_keep_the_given_order() {
        // 0 requires 2; 1 is free; 3 requires 0 and 1.
        let requires = vec![vec![2], vec![], vec![], vec![0, 1]];
        assert_eq!(order(&requires).unwrap(), [1, 2, 0, 3]);
        assert_eq!(order(&[vec![], vec![], vec![]]).unwrap(), [0, 1, 2]);
    }

    #[test]
    fn every_cycle_is_named_with_its_nodes_in_order() {
        // 0 -> 1 -> 2 -> 0, 3 requires 0 (stuck, not a cycle), 4 <-> 5, 6 alone.
        let requires = vec![vec![1], vec![2], vec![0], vec![0], vec![5], vec![4], vec![]];
        let cycles = order(&requires).unwrap_err();
        assert_eq!(cycles, [vec![0, 1, 2], vec![4, 5]]);
        assert_eq!(order(&[vec![0]]).unwrap_err(), [vec![0]]);
    }
}
