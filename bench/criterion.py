#!/usr/bin/env python3
"""Runs the criterion benches and writes their sections of BENCHMARKS.md
(through bench/section.py):

- parsers (benches/parsers.rs): the `# simple` parser's throughput against
  its target, and the JSON and human writers';
- scheduler (benches/scheduler.rs): the scheduler's own time for a whole
  run of N tasks, the graph walk against the plan scan it replaced where
  the bench runs both.

    python3 bench/criterion.py [--bench parsers,scheduler] [--sample-size N]

Each bench is run with `cargo bench --bench NAME` and its figures read from
target/criterion/**/new/estimates.json (medians, with criterion's 95%
interval) and benchmark.json (the throughput each bench declares). Only
estimates written by this run are used: one older than the run means the
bench did not run and the script stops.
"""

import argparse
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import section  # noqa: E402

ROOT = section.ROOT
CRITERION = os.path.join(ROOT, "target", "criterion")
SCRIPT = "bench/criterion.py"


def ms(seconds):
    return "%.2f ms" % (seconds * 1e3) if seconds < 1 else "%.2f s" % seconds


class Estimate:
    """One criterion benchmark's median (seconds), its interval, the
    number of samples and the throughput it declares."""

    def __init__(self, bench_id, since):
        base = os.path.join(CRITERION, bench_id, "new")
        path = os.path.join(base, "estimates.json")
        if not os.path.exists(path) or os.path.getmtime(path) < since:
            sys.exit("bench: %s was not written by this run" % os.path.relpath(path, ROOT))
        with open(path) as handle:
            median = json.load(handle)["median"]
        with open(os.path.join(base, "benchmark.json")) as handle:
            self.throughput = json.load(handle).get("throughput")
        with open(os.path.join(base, "sample.json")) as handle:
            self.samples = len(json.load(handle)["times"])
        self.median = median["point_estimate"] / 1e9
        self.low = median["confidence_interval"]["lower_bound"] / 1e9
        self.high = median["confidence_interval"]["upper_bound"] / 1e9


def run_bench(name, sample_size):
    """Runs one bench; returns the time it started (estimates older than it
    are stale)."""
    started = time.time()
    argv = ["cargo", "bench", "--quiet", "--bench", name]
    if sample_size:
        argv += ["--", "--sample-size", str(sample_size)]
    print("bench: %s" % " ".join(argv), file=sys.stderr)
    subprocess.run(argv, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    return started


def build(name):
    """Builds one bench first, so that the section's header (its date and
    load average) is taken when the measuring starts, not the compiling."""
    subprocess.run(["cargo", "bench", "--quiet", "--no-run", "--bench", name], cwd=ROOT,
                   check=True, stdout=subprocess.DEVNULL)


def parsers(sample_size):
    build("parsers")
    sec = section.Section("parsers", "Parsers and writers alone", SCRIPT)
    since = run_bench("parsers", sample_size)
    out = ["`cargo bench --bench parsers` (benches/parsers.rs): ral's own code "
           "on every listing's path, without a provider. Medians, with "
           "criterion's 95% interval of the throughput.", "",
           "| benchmark | median | throughput | target | samples |",
           "| --- | --- | --- | --- | --- |"]
    for bench_id, target in [("simple_parser/list_10k_resources", 200),
                             ("writers/json_stream_10k_resources", None),
                             ("writers/human_10k_resources", None)]:
        found = Estimate(bench_id, since)
        (unit, amount), = found.throughput.items()
        shown = ""
        if unit == "Bytes":
            rate = amount / found.median / 1e6
            shown_rate = "%.0f MB/s (%.0f to %.0f)" % (rate, amount / found.high / 1e6,
                                                        amount / found.low / 1e6)
            if target:
                shown = "≥ %d MB/s — %s" % (target, "met" if rate >= target else "**not met**")
        else:
            shown_rate = "%.2f M resources/s (%.2f to %.2f)" % (
                amount / found.median / 1e6, amount / found.high / 1e6,
                amount / found.low / 1e6)
        out.append("| `%s` | %s | %s | %s | %d |" % (bench_id, ms(found.median), shown_rate,
                                                     shown, found.samples))
    sec.write("\n".join(out))


def scheduler(sample_size):
    build("scheduler")
    sec = section.Section("scheduler", "The scheduler alone", SCRIPT)
    since = run_bench("scheduler", sample_size)
    group = os.path.join(CRITERION, "scheduler")
    # The sizes are the bench's; the old scan is run only for the small ones.
    sizes = sorted(int(entry) for entry in os.listdir(os.path.join(group, "graph walk"))
                   if entry.isdigit())
    out = ["`cargo bench --bench scheduler` (benches/scheduler.rs): a whole run of "
           "N tasks over 8 providers (half of them taking batches), each task "
           "waiting for the tasks 3 and 7 places before it, every task succeeding "
           "at once, four batches at a time: the scheduler's own work, no "
           "provider runs. Medians.", "",
           "| tasks | graph walk (now) | per task | plan scan (before) | samples |",
           "| --- | --- | --- | --- | --- |"]
    walks = {}
    for size in sizes:
        walk = Estimate("scheduler/graph walk/%d" % size, since)
        walks[size] = walk.median
        scan_path = os.path.join(group, "plan scan", str(size))
        if os.path.isdir(scan_path):
            scan = Estimate("scheduler/plan scan/%d" % size, since)
            scanned = "%s (%.0fx the graph walk)" % (ms(scan.median), scan.median / walk.median)
        else:
            scanned = "not run (it grows with the square of the tasks)"
        out.append("| %s | %s | %.0f ns | %s | %d |" % (
            "{:,}".format(size), ms(walk.median), walk.median / size * 1e9, scanned,
            walk.samples))
    if len(sizes) >= 2:
        small, large = sizes[0], sizes[-1]
        out += ["", "%.0f times the tasks take %.1f times as long (linear would be %.0f)." % (
            large / small, walks[large] / walks[small], large / small)]
    sec.write("\n".join(out))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bench", default="parsers,scheduler")
    parser.add_argument("--sample-size", type=int)
    args = parser.parse_args()
    writers = {"parsers": parsers, "scheduler": scheduler}
    for name in args.bench.split(","):
        if name not in writers:
            sys.exit("bench: no bench %r (known: %s)" % (name, ", ".join(writers)))
        writers[name](args.sample_size)


if __name__ == "__main__":
    main()
