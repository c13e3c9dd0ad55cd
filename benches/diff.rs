//! The time to diff a file's content for the plan: a pair small enough
//! for the quadratic table the diff once used (2,000 lines, 20 changed),
//! a large pair with scattered changes (50,000 lines, 50 changed), and
//! a large pair with no line in common (50,000 lines each).

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use ral::render::diff::unified;

/// `lines` numbered lines, every `every`th one changed when `changed`.
fn text(lines: usize, every: usize, changed: bool) -> String {
    (0..lines)
        .map(|n| match changed && n % every == every / 2 {
            true => format!("line {n}: changed\n"),
            false => format!("line {n}: some text of a configuration file\n"),
        })
        .collect()
}

fn diff(c: &mut Criterion) {
    let mut group = c.benchmark_group("diff");
    group.sample_size(10);
    let rewritten: String = (0..50_000).map(|n| format!("new {n}\n")).collect();
    let pairs = [
        (
            "2000 lines, 20 changed",
            text(2_000, 100, false),
            text(2_000, 100, true),
        ),
        (
            "50000 lines, 50 changed",
            text(50_000, 1_000, false),
            text(50_000, 1_000, true),
        ),
        ("50000 lines, none kept", text(50_000, 1, false), rewritten),
    ];
    for (name, was, is) in &pairs {
        eprintln!("{name}: {}", unified(was, is).phrase());
        group.bench_with_input(BenchmarkId::new("unified", name), name, |b, _| {
            b.iter(|| black_box(unified(was, is)))
        });
    }
    group.finish();
}

criterion_group!(benches, diff);
criterion_main!(benches);
