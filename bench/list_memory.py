#!/usr/bin/env python3
"""Benchmark: time and peak memory of `ralsh many` listing N resources.

Shows that a listing is streamed: ralsh's peak RSS stays flat while the
number of resources grows a thousandfold. Run from the repository root after
`cargo build --release`:

    python3 bench/list_memory.py [--sizes 1000,100000,1000000]

Peak RSS is ralsh's own (os.wait4 on the ralsh process; the provider is a
separate, reaped grandchild counted only if larger, and awk stays small).
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RALSH = os.path.join(ROOT, "target", "release", "ralsh")


def measure(args, root, cache):
    env = {"PATH": os.environ["PATH"], "XDG_CACHE_HOME": cache, "HOME": cache}
    start = time.perf_counter()
    proc = subprocess.Popen([RALSH, "-I", os.path.join(ROOT, "bench"), "--root", root] + args,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit("ralsh failed: " + proc.stderr.read().decode())
    return elapsed, usage.ru_maxrss / 1024.0


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="1000,10000,100000,1000000")
    parser.add_argument("--repeat", type=int, default=3)
    opts = parser.parse_args()
    if not os.path.exists(RALSH):
        sys.exit("build first: cargo build --release")
    with tempfile.TemporaryDirectory() as root, tempfile.TemporaryDirectory() as cache:
        print(f"{'resources':>10} {'mode':>5} {'best s':>8} {'res/s':>10} {'peak MiB':>9}")
        for size in [int(s) for s in opts.sizes.split(",")]:
            with open(os.path.join(root, "count"), "w") as out:
                out.write(str(size))
            for mode, extra in (("text", []), ("json", ["-j"])):
                runs = [measure(extra + ["many"], root, cache) for _ in range(opts.repeat)]
                best = min(t for t, _ in runs)
                peak = max(m for _, m in runs)
                print(f"{size:>10} {mode:>5} {best:>8.3f} {size / best:>10.0f} {peak:>9.1f}")


if __name__ == "__main__":
    main()
