#!/usr/bin/env python3
"""Benchmark: what rendering costs a plan. `ral plan` of N resources
written out plainly, against the same N resources whose values (and, in
a loop, titles) are Jinja2 templates rendered per resource.

Three manifests of N resources of the bench's json provider
(bench/providers/nop: one get answers every name with value 'old', so
every resource plans a change), planned on a fresh fake root each:

- plain: `nop: {tNNN: {value: "new host tNNN on 8080"}}`, N lines;
- templated: the same N declarations, each value
  `"{{ greeting }} host tNNN on {{ port }}"` with `vars: {greeting: new,
  port: 8080}` (N templates rendered, facts gathered once);
- loop: one declaration `"t{{ item }}"` with `loop: "{{ range(N) }}"`
  stamping the N resources.

All three plan the same N changes (checked from the summary line). Run
from the repository root after `cargo build --release`:

    python3 bench/templating.py [--size 10000] [--repeat 5]

Writes the templating section of BENCHMARKS.md (bench/section.py): the
median wall time of each and its ratio to the plain one (goal: within 2x).
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import section  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RAL = os.path.join(ROOT, "target", "release", "ral")


def write_plain(path, size):
    with open(path, "w") as out:
        out.write("nop:\n")
        for i in range(size):
            out.write('  t%d: {value: "new host t%d on 8080"}\n' % (i, i))


def write_templated(path, size):
    with open(path, "w") as out:
        out.write("vars:\n  greeting: new\n  port: 8080\nnop:\n")
        for i in range(size):
            out.write('  t%d: {value: "{{ greeting }} host t%d on {{ port }}"}\n' % (i, i))


def write_loop(path, size):
    with open(path, "w") as out:
        out.write("vars:\n  greeting: new\n  port: 8080\nnop:\n")
        out.write('  "t{{ item }}":\n    loop: "{{ range(%d) }}"\n' % size)
        out.write('    value: "{{ greeting }} host t{{ item }} on {{ port }}"\n')


def measure(size, manifest, cache):
    env = {"PATH": os.environ["PATH"], "XDG_CACHE_HOME": cache, "HOME": cache}
    with tempfile.TemporaryDirectory() as root:
        start = time.perf_counter()
        done = subprocess.run(
            [RAL, "plan", "-I", os.path.join(ROOT, "bench"), "--root", root, manifest],
            capture_output=True, env=env)
        elapsed = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit("ral plan failed: " + done.stderr.decode())
    summary = done.stdout.decode().rstrip().rsplit("\n", 1)[-1]
    wanted = "Plan: 0 to create, %d to change, 0 to remove" % size
    if not summary.startswith(wanted):
        sys.exit("unexpected plan: %r, wanted %r" % (summary, wanted))
    return elapsed


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", type=int, default=10000)
    parser.add_argument("--repeat", type=int, default=5)
    opts = parser.parse_args()
    if not os.path.exists(RAL):
        sys.exit("build first: cargo build --release")
    sec = section.Section("templating", "Rendering: templated plans against plain ones",
                          "bench/templating.py")
    kinds = [("plain", write_plain), ("templated", write_templated), ("loop", write_loop)]
    medians = {}
    with tempfile.TemporaryDirectory() as work:
        cache = os.path.join(work, "cache")
        os.mkdir(cache)
        paths = {}
        for name, writer in kinds:
            paths[name] = os.path.join(work, name + ".yaml")
            writer(paths[name], opts.size)
        times = {name: [] for name, _ in kinds}
        # Interleaved, so that load on the shared machine falls on all three.
        for _ in range(opts.repeat):
            for name, _ in kinds:
                times[name].append(measure(opts.size, paths[name], cache))
        for name, _ in kinds:
            medians[name] = statistics.median(times[name])
            print("%-10s median %.3f s (runs: %s)" % (
                name, medians[name], ", ".join("%.3f" % t for t in times[name])))
    plain = medians["plain"]
    out = ["`ral plan` (release build) of {:,} resources of the bench's json provider, "
           "each planned as a change, on a fresh fake root: written out plainly, the same "
           "declarations with their values templated (`vars:` and facts gathered once), "
           "and one declaration looping over `range({:,})`. Median wall time of {} runs "
           "each, the three interleaved.".format(opts.size, opts.size, opts.repeat), "",
           "| manifest | median wall | against plain |", "| --- | --- | --- |"]
    for name, _ in kinds:
        out.append("| {} | {:.3f} s | {:.2f}x |".format(name, medians[name], medians[name] / plain))
    worst = max(medians["templated"], medians["loop"]) / plain
    out += ["", "The slower templated plan takes {:.2f} times the plain one's time "
            "(goal: within 2 times): {}.".format(worst, "met" if worst <= 2 else "not met")]
    sec.write("\n".join(out))


if __name__ == "__main__":
    main()
