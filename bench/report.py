#!/usr/bin/env python3
"""Turns bench/run.sh's hyperfine and /usr/bin/time results into
BENCHMARKS.md: each comparison's medians, the ratio against its baseline,
the target, and whether it was met; then the machine and the date."""

import json
import os
import platform
import subprocess
import sys
from datetime import datetime, timezone

results = sys.argv[1]
criterion = sys.argv[2] if len(sys.argv) > 2 else None


def medians(name):
    path = os.path.join(results, name + ".json")
    if not os.path.exists(path):
        return None
    with open(path) as handle:
        runs = json.load(handle)["results"]
    return [(r["command"], r["median"], len(r["times"])) for r in runs]


def peak(name):
    path = os.path.join(results, name + ".mem")
    try:
        with open(path) as handle:
            return int(handle.read().split()[-1]) / 1024
    except (OSError, ValueError, IndexError):
        return None


def ms(seconds):
    return "%.1f ms" % (seconds * 1000) if seconds < 10 else "%.1f s" % seconds


ROWS = []
NOTES = []


def compare(name, target, limit, higher_is_worse=True, measured_first=False):
    """One table row: the second command against the first (the baseline),
    or the reverse with measured_first."""
    found = medians(name)
    if not found or len(found) < 2:
        return None
    (base_cmd, base, runs), (cmd, value, _) = found[0], found[1]
    if measured_first:
        (base_cmd, base), (cmd, value) = (cmd, value), (base_cmd, base)
    ratio = value / base
    met = ratio <= limit if higher_is_worse else ratio >= limit
    # A ratio far below 1 reads better as a speed-up ("0.0048x" is 208x faster).
    shown = "%.2fx" % ratio if ratio >= 0.1 else "%.4fx (%.0fx faster)" % (ratio, 1 / ratio)
    ROWS.append((cmd, ms(value), base_cmd, ms(base), shown, target,
                 "yes" if met else "**no**", runs))
    return ratio


compare("find", "≤ 1.5x the provider's find", 1.5)
compare("providers_warm", "≤ 1.2x 200 .yaml providers", 1.2)
compare("million", "≤ 2x provider | cat", 2.0)
compare("users", "≤ 3x getent passwd", 3.0)
compare("packages", "≤ 3x dpkg-query -W", 3.0)
puppet_users = compare("puppet_users", "≥ 100x faster than Puppet", 0.01)
puppet_packages = compare("puppet_packages", "≥ 100x faster than Puppet", 0.01)

if puppet_packages is not None:
    NOTES.append("`puppet resource package` is timed with `--ignore-failure`: on some "
                 "machines Puppet 7 lists every package and then fails "
                 "(`Could not run: [nil, ...]` after its pip provider), so its time "
                 "is if anything too low.")

cold = medians("providers_cold")
cpus = os.cpu_count()
try:
    model = next(line.split(":", 1)[1].strip()
                 for line in open("/proc/cpuinfo") if line.startswith("model name"))
except (OSError, StopIteration):
    model = platform.processor() or "unknown"
rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                     text=True).stdout.strip() or "unknown"

print("# Benchmarks\n")
print("Written by `bench/run.sh` on %s, commit %s, on %s (%d CPUs), %s." % (
    datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), rev, model, cpus,
    platform.platform()))
print("Times are medians of hyperfine runs (count in the last column); each ratio")
print("compares two commands timed in the same run. Lower ratios are better; for")
print("Puppet the ratio is ralsh's time over Puppet's.\n")
print("| command | median | baseline | median | ratio | target | met | runs |")
print("| --- | --- | --- | --- | --- | --- | --- | --- |")
def cell(value):
    """A table cell: no home directory, and `|` escaped for Markdown."""
    if not isinstance(value, str):
        return value
    return value.replace(os.environ.get("HOME", "~"), "~").replace("|", "\\|")


for row in ROWS:
    print("| `%s` | %s | `%s` | %s | %s | %s | %s | %d |" % tuple(cell(c) for c in row))
print()
for note in NOTES:
    print(note + "\n")
floor = medians("floor")
find = medians("find")
if floor and find and len(floor) == 2 and len(find) == 2:
    (_, true_time, _), (_, version_time, _) = floor
    provider_time = find[0][1]
    print("Start-up floor, timed like the first row: `/bin/true` takes %s and "
          "`ralsh --version` %s. Against a provider find of %s, the 1.5x target "
          "leaves ralsh %s for everything it does, including starting itself "
          "(%.0f%% of that budget alone).\n" % (
              ms(true_time), ms(version_time), ms(provider_time),
              ms(provider_time * 0.5), 100 * version_time / (provider_time * 0.5)))
if cold:
    print("Cold metadata cache, 200 describe-only providers (each described, eight at")
    print("a time): median %s over %d runs.\n" % (ms(cold[0][1]), cold[0][2]))

print("## Peak memory (maximum resident set size)\n")
print("| command | peak |")
print("| --- | --- |")
for name, label in [("million_ralsh", "ralsh -j many (1,000,000 resources)"),
                    ("users_ralsh", "ralsh user"), ("users_puppet", "puppet resource user"),
                    ("packages_ralsh", "ralsh package"),
                    ("packages_puppet", "puppet resource package")]:
    value = peak(name)
    if value is not None:
        print("| `%s` | %.1f MiB |" % (label, value))
print()
for name, label in [("users", "user"), ("packages", "package")]:
    ours, theirs = peak(name + "_ralsh"), peak(name + "_puppet")
    if ours and theirs:
        print("`ralsh %s` uses %.0f%% of Puppet's peak memory (target: at most 10%%)." % (
            label, 100 * ours / theirs))
print()


def criterion_estimate(bench_id):
    """(median seconds, its 95% interval, throughput bytes or elements and
    which) of one criterion benchmark, or None."""
    base = os.path.join(criterion or "", bench_id, "new")
    try:
        with open(os.path.join(base, "estimates.json")) as handle:
            median = json.load(handle)["median"]
        with open(os.path.join(base, "benchmark.json")) as handle:
            throughput = json.load(handle)["throughput"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    interval = median["confidence_interval"]
    (unit, amount), = throughput.items()
    return (median["point_estimate"] / 1e9, interval["lower_bound"] / 1e9,
            interval["upper_bound"] / 1e9, unit, amount)


print("## Parsers and writers alone (criterion, `cargo bench`)\n")
print("| benchmark | median | throughput | target |")
print("| --- | --- | --- | --- |")
for bench_id, target in [("simple_parser/list_10k_resources", "≥ 200 MB/s"),
                         ("writers/json_stream_10k_resources", ""),
                         ("writers/human_10k_resources", "")]:
    found = criterion_estimate(bench_id)
    if not found:
        continue
    median, low, high, unit, amount = found
    if unit == "Bytes":
        rate = "%.0f MB/s (%.0f to %.0f)" % (amount / median / 1e6, amount / high / 1e6,
                                             amount / low / 1e6)
        if target:
            target += " — %s" % ("met" if amount / median / 1e6 >= 200 else "**not met**")
    else:
        rate = "%.1f M resources/s" % (amount / median / 1e6)
    print("| `%s` | %s | %s | %s |" % (bench_id, ms(median), rate, target))
print()
