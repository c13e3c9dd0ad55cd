#!/usr/bin/env python3
"""Benchmark: peak memory of `ral plan` of N hosts entries, ral's own and
its provider's apart.

For each N, a manifest of N `host` resources
`hNNNNNN: {ip: ..., host_aliases: [...], comment: ...}` is planned on a
fresh fake root (a temporary directory, never the real system) whose
etc/hosts already holds half of them with other values, so that half the
resources plan a change and half a creation. That exercises the whole plan
path of a real provider: reading and checking the manifest, building the
catalog, one listing of the hosts file picked through for the N names,
planning and printing N tasks. With `--apply-sizes`, `ral apply` of such a
manifest is measured too (each update is one call of the provider, which
edits and syncs the file: keep those sizes small).

Run from the repository root after `cargo build --release`:

    python3 bench/plan_memory.py [--sizes 20000,100000] [--apply-sizes 200]

Prints, per N, the wall time and three peaks:

- ral's own peak RSS: VmHWM of the ral process, read from /proc while it
  runs (the high-water mark only grows, so the last read is at most a few
  milliseconds short of the end);
- the peak of ral and its children as reaped with os.wait4 (the largest of
  ral's own and of any provider process it ran);
- the provider's own peak: its listing of the same hosts file run alone
  (the call ral makes), reaped with os.wait4.

and writes them as the plan_memory section of BENCHMARKS.md
(bench/section.py).
"""
import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import section  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RAL = os.path.join(ROOT, "target", "release", "ral")
PROVIDER = os.path.join(ROOT, "providers", "etc_hosts.prov")


def address(prefix, i):
    return "%s.%d.%d.%d" % (prefix, i >> 16, (i >> 8) & 255, i & 255)


def write_hosts(root, size):
    """etc/hosts below ROOT: the usual header, then the first half of the
    bench's names with an old address, alias and comment."""
    os.mkdir(os.path.join(root, "etc"))
    with open(os.path.join(root, "etc", "hosts"), "w") as out:
        out.write("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost\n")
        for i in range(size // 2):
            out.write("%s\th%06d h%06d-old\t# old %d\n" % (address("10", i), i, i, i))


def write_manifest(path, size):
    with open(path, "w") as out:
        out.write("host:\n")
        for i in range(size):
            out.write("  h%06d: {ip: %s, host_aliases: [h%06d-a, h%06d-b], "
                      "comment: \"bench host %d\"}\n" % (i, address("11", i), i, i, i))


class HighWater:
    """Polls a process's VmHWM (its own peak RSS, children not counted)
    until it is gone; `peak` is the last value read, in MiB."""

    def __init__(self, pid):
        self.path = "/proc/%d/status" % pid
        self.peak = 0.0
        self.done = threading.Event()
        self.thread = threading.Thread(target=self.poll, daemon=True)
        self.thread.start()

    def poll(self):
        while not self.done.is_set():
            try:
                with open(self.path) as status:
                    for line in status:
                        if line.startswith("VmHWM:"):
                            self.peak = max(self.peak, int(line.split()[1]) / 1024.0)
                            break
            except OSError:
                return
            time.sleep(0.002)

    def stop(self):
        self.done.set()
        self.thread.join()


def run_ral(args, cache):
    """Runs ral with ARGS; returns its stdout, wall time, own peak (VmHWM)
    and the peak of it and its reaped children (wait4), in MiB."""
    env = {"PATH": os.environ["PATH"], "XDG_CACHE_HOME": cache, "HOME": cache}
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen([RAL] + args, stdout=out, stderr=err, env=env)
        watch = HighWater(proc.pid)
        # The zombie keeps /proc/PID until it is reaped: stop polling first.
        os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)
        watch.stop()
        _, status, usage = os.wait4(proc.pid, 0)
        elapsed = time.perf_counter() - start
        out.seek(0)
        err.seek(0)
        code = os.waitstatus_to_exitcode(status)
        text = out.read().decode()
        if code != 0:
            sys.exit("ral %s failed (%d): %s" % (args[0], code, err.read().decode()))
    return text, elapsed, watch.peak, usage.ru_maxrss / 1024.0


def summary(text):
    return text.rstrip().rsplit("\n", 1)[-1]


def measure_plan(size, manifest, cache):
    with tempfile.TemporaryDirectory() as root:
        write_hosts(root, size)
        text, elapsed, own, total = run_ral(["plan", "--root", root, manifest], cache)
    half = size // 2
    wanted = "Plan: %d to create, %d to change, 0 to remove" % (size - half, half)
    if not summary(text).startswith(wanted):
        sys.exit("unexpected plan: %r, wanted %r" % (summary(text), wanted))
    return elapsed, own, total


def measure_provider(size):
    """The provider's listing of the same file, alone: wall time and peak."""
    with tempfile.TemporaryDirectory() as root:
        write_hosts(root, size)
        # The bundled host provider is native: its script runs the
        # release build's ral-provider, as ral names it.
        env = {"PATH": os.environ["PATH"], "RALSH_ROOT_DIR": root,
               "RALSH_NATIVE_PROGRAM": os.path.join(ROOT, "target", "release",
                                                    "ral-provider")}
        start = time.perf_counter()
        proc = subprocess.Popen([PROVIDER, "ral_action=list"], stdout=subprocess.DEVNULL,
                                env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        elapsed = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit("the provider's listing failed")
    return elapsed, usage.ru_maxrss / 1024.0


def measure_apply(size, manifest, cache):
    with tempfile.TemporaryDirectory() as root:
        write_hosts(root, size)
        text, elapsed, own, total = run_ral(["apply", "--root", root, manifest], cache)
        with open(os.path.join(root, "etc", "hosts")) as hosts:
            entries = sum(1 for line in hosts if line.startswith("11."))
    if entries != size:
        sys.exit("apply left %d of %d entries: %r" % (entries, size, summary(text)))
    return elapsed, own, total


def best(runs):
    """The best wall time, and the largest of each peak."""
    return (min(r[0] for r in runs),) + tuple(max(r[i] for r in runs)
                                             for i in range(1, len(runs[0])))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="20000,100000")
    parser.add_argument("--apply-sizes", default="200")
    parser.add_argument("--repeat", type=int, default=3)
    opts = parser.parse_args()
    if not os.path.exists(RAL):
        sys.exit("build first: cargo build --release")
    sizes = [int(s) for s in opts.sizes.split(",") if s]
    apply_sizes = [int(s) for s in opts.apply_sizes.split(",") if s]
    sec = section.Section("plan_memory", "Memory of a plan of many hosts entries",
                          "bench/plan_memory.py")
    plans, lists, applies = [], [], []
    with tempfile.TemporaryDirectory() as work:
        cache = os.path.join(work, "cache")
        os.mkdir(cache)
        print("%6s %10s %8s %9s %9s %9s" % ("run", "resources", "best s", "ral MiB",
                                           "all MiB", "prov MiB"))
        for size in sizes:
            path = os.path.join(work, "m%d.yaml" % size)
            write_manifest(path, size)
            row = best([measure_plan(size, path, cache) for _ in range(opts.repeat)])
            provider = best([measure_provider(size) for _ in range(opts.repeat)])
            print("%6s %10d %8.3f %9.1f %9.1f %9.1f" % (("plan", size) + row + provider[1:]),
                  flush=True)
            plans.append((size,) + row)
            lists.append((size,) + provider)
        for size in apply_sizes:
            path = os.path.join(work, "m%d.yaml" % size)
            write_manifest(path, size)
            row = best([measure_apply(size, path, cache) for _ in range(opts.repeat)])
            print("%6s %10d %8.3f %9.1f %9.1f" % (("apply", size) + row), flush=True)
            applies.append((size,) + row)
    out = ["`ral plan` (release build) of one manifest of N `host` resources (an "
           "address, two aliases and a comment each) against a hosts file that holds "
           "half of them with other values: half plan a creation, half a change. "
           "The provider is the bundled `host::etc_hosts`, native code that ral "
           "runs in its own process (so *ral* includes it); *provider alone* is "
           "its listing run as a program (`ral-provider`). Best wall time of %d runs per size; each peak is the "
           "largest of the runs. *ral* is ral's own peak RSS (its VmHWM, read while "
           "it runs), *with provider* the peak of ral and the processes it ran "
           "(os.wait4), *provider alone* the peak of the provider's listing of "
           "the same file run by itself." % opts.repeat, "",
           "| resources | best wall | per resource | ral | with provider | "
           "provider alone | provider's wall |",
           "| --- | --- | --- | --- | --- | --- | --- |"]
    for (size, wall, own, total), (_, list_wall, list_peak) in zip(plans, lists):
        out.append("| {:,} | {:.3f} s | {:.1f} µs | {:.1f} MiB | {:.1f} MiB | {:.1f} MiB "
                   "| {:.3f} s |".format(size, wall, wall / size * 1e6, own, total,
                                        list_peak, list_wall))
    if plans:
        size, _, own, _ = plans[-1]
        out += ["", "At {:,} resources ral holds {:.0f} bytes per resource at its "
                "peak.".format(size, own * 1024 * 1024 / size)]
    if applies:
        out += ["", "`ral apply` of such a manifest, with a fresh state store:", "",
                "| resources | best wall | per resource | ral | with provider |",
                "| --- | --- | --- | --- | --- |"]
        for size, wall, own, total in applies:
            out.append("| {:,} | {:.3f} s | {:.1f} ms | {:.1f} MiB | {:.1f} MiB |".format(
                size, wall, wall / size * 1e3, own, total))
    sec.write("\n".join(out))


if __name__ == "__main__":
    main()
