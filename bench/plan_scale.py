#!/usr/bin/env python3
"""Benchmark: `ral plan` of N resources, to show that planning time grows
linearly with the number of resources.

For each N, a manifest of N resources `nop[tNNNNNN]: {value: new}` for the
bench's json provider (bench/providers/nop: one get answers every name
with value 'old', so every resource plans a change) is planned on a fresh
fake root (a temporary directory, never the real system) with
`target/release/ral plan`. That exercises the whole plan path: reading and
checking the manifest, building the catalog, one get of N names and
matching its answer to them, planning and printing N tasks.

Run from the repository root after `cargo build --release`:

    python3 bench/plan_scale.py [--sizes 5000,50000,100000] [--repeat 3]

Prints, per N, the best wall time, the time per resource and ral's peak
RSS (ru_maxrss of the ral process, reaped with os.wait4; the provider is
its child, counted only if larger), and writes them as the plan_scale
section of BENCHMARKS.md (bench/section.py). Linear planning shows as a
time per resource that stays flat while N grows.
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import section  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RAL = os.path.join(ROOT, "target", "release", "ral")


def manifest(path, size):
    with open(path, "w") as out:
        out.write("nop:\n")
        for i in range(size):
            out.write("  t%06d: {value: new}\n" % i)


def measure(size, manifest_path, cache):
    """Wall time and ral's own peak RSS (the process reaped with wait4) of
    one plan; its output goes to a file, checked afterwards."""
    env = {"PATH": os.environ["PATH"], "XDG_CACHE_HOME": cache, "HOME": cache}
    with tempfile.TemporaryDirectory() as root, \
            tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(
            [RAL, "plan", "-I", os.path.join(ROOT, "bench"), "--root", root,
             manifest_path],
            stdout=out, stderr=err, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        elapsed = time.perf_counter() - start
        out.seek(0)
        err.seek(0)
        if os.waitstatus_to_exitcode(status) != 0:
            sys.exit("ral plan failed: " + err.read().decode())
        summary = out.read().decode().rstrip().rsplit("\n", 1)[-1]
    wanted = "Plan: 0 to create, %d to change, 0 to remove" % size
    if not summary.startswith(wanted):
        sys.exit("unexpected plan: %r, wanted %r" % (summary, wanted))
    return elapsed, usage.ru_maxrss / 1024.0


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="5000,50000,100000")
    parser.add_argument("--repeat", type=int, default=3)
    opts = parser.parse_args()
    if not os.path.exists(RAL):
        sys.exit("build first: cargo build --release")
    sizes = [int(s) for s in opts.sizes.split(",")]
    sec = section.Section("plan_scale", "Planning time against the number of resources",
                          "bench/plan_scale.py")
    rows = []
    with tempfile.TemporaryDirectory() as work:
        cache = os.path.join(work, "cache")
        os.mkdir(cache)
        print("%10s %9s %14s %9s" % ("resources", "best s", "us/resource", "peak MiB"))
        for size in sizes:
            path = os.path.join(work, "m%d.yaml" % size)
            manifest(path, size)
            runs = [measure(size, path, cache) for _ in range(opts.repeat)]
            best = min(t for t, _ in runs)
            peak = max(m for _, m in runs)
            print("%10d %9.3f %14.1f %9.1f" % (size, best, best / size * 1e6, peak),
                  flush=True)
            rows.append((size, best, peak))
    out = ["`ral plan` (release build) of one manifest of N resources of the bench's "
           "json provider, each planned as a change: reading and checking the "
           "manifest, one get of N names, matching the answer, planning and "
           "printing N tasks. Best wall time of %d runs per size; peak RSS is the "
           "largest of ral's own." % opts.repeat, "",
           "| resources | best wall | per resource | peak RSS |",
           "| --- | --- | --- | --- |"]
    for size, best, peak in rows:
        out.append("| {:,} | {:.3f} s | {:.1f} µs | {:.1f} MiB |".format(
            size, best, best / size * 1e6, peak))
    if len(rows) >= 2:
        (small, small_best, _), (large, large_best, _) = rows[0], rows[-1]
        out += ["", "From {:,} to {:,} resources ({:.0f} times as many), the time per "
                "resource goes from {:.1f} µs to {:.1f} µs ({:.2f} times).".format(
                    small, large, large / small, small_best / small * 1e6,
                    large_best / large * 1e6, (large_best / large) / (small_best / small))]
    sec.write("\n".join(out))


if __name__ == "__main__":
    main()
