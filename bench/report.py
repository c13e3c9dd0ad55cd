#!/usr/bin/env python3
"""Turns bench/run.sh's hyperfine and /usr/bin/time results into its two
sections of BENCHMARKS.md (through bench/section.py):

- run: ralsh against the providers' own calls and the system tools (each
  comparison's medians, the ratio against its baseline, the target and
  whether it was met), the start-up floor, the cold metadata cache, and
  ralsh's peak memory;
- run_puppet: ralsh against `puppet resource`, time and peak memory;
  written only when Puppet was measured, so a run on a machine without
  Puppet leaves the last Puppet section as it was.

    report.py RESULTS-DIR HEADER    (HEADER: `section.py header`'s line,
                                     taken when run.sh started)
"""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import section  # noqa: E402

results = sys.argv[1]
HEAD = sys.argv[2]
SCRIPT = "bench/run.sh"


def medians(name):
    path = os.path.join(results, name + ".json")
    if not os.path.exists(path):
        return None
    with open(path) as handle:
        runs = json.load(handle)["results"]
    return [(r["command"], r["median"], len(r["times"])) for r in runs]


def peak(name):
    """Peak resident memory of one run, in MiB (/usr/bin/time's KiB)."""
    path = os.path.join(results, name + ".mem")
    try:
        with open(path) as handle:
            return int(handle.read().split()[-1]) / 1024
    except (OSError, ValueError, IndexError):
        return None


def ms(seconds):
    return "%.1f ms" % (seconds * 1000) if seconds < 10 else "%.1f s" % seconds


def cell(value):
    """A table cell: no home directory, and `|` escaped for Markdown."""
    if not isinstance(value, str):
        return value
    return value.replace(os.environ.get("HOME", "~"), "~").replace("|", "\\|")


TABLE_HEAD = ["Times are medians of hyperfine runs (count in the last column); each "
              "ratio compares two commands timed in the same run.", "",
              "| command | median | baseline | median | ratio | target | met | runs |",
              "| --- | --- | --- | --- | --- | --- | --- | --- |"]


def compare(rows, name, target, limit, higher_is_worse=True):
    """One table row: the second command against the first (the baseline).
    Returns the ratio, or None when the comparison was not run."""
    found = medians(name)
    if not found or len(found) < 2:
        return None
    (base_cmd, base, runs), (cmd, value, _) = found[0], found[1]
    ratio = value / base
    met = ratio <= limit if higher_is_worse else ratio >= limit
    # A ratio far below 1 reads better as a speed-up ("0.0048x" is 208x faster).
    shown = "%.2fx" % ratio if ratio >= 0.1 else "%.4fx (%.0fx faster)" % (ratio, 1 / ratio)
    rows.append("| `%s` | %s | `%s` | %s | %s | %s | %s | %d |" % tuple(
        cell(c) for c in (cmd, ms(value), base_cmd, ms(base), shown, target,
                          "yes" if met else "**no**", runs)))
    return ratio


def compare_floor(rows):
    """The row of `ralsh kv a` against its floor: the provider's find plus
    one process start (`/bin/true`), the three timed in the same run.
    Returns (floor, ralsh's median), or None when they were not."""
    found = medians("find")
    if not found or len(found) < 3:
        return None
    (_, find, runs), (cmd, value, _), (_, start, _) = found[:3]
    floor = find + start
    ratio = value / floor
    rows.append("| `%s` | %s | floor: the provider's find (%s) plus one process start, "
                "`/bin/true` (%s) | %s | %.2fx | ≤ 1.2x its floor | %s | %d |" % (
                    cell(cmd), ms(value), ms(find), ms(start), ms(floor), ratio,
                    "yes" if ratio <= 1.2 else "**no**", runs))
    return floor, value


def run_section():
    out = list(TABLE_HEAD)
    out[0] += " Lower ratios are better."
    compare(out, "find", "≤ 1.5x the provider's find", 1.5)
    floored = compare_floor(out)
    compare(out, "providers_warm", "≤ 1.2x 200 .yaml providers", 1.2)
    compare(out, "million", "≤ 2x provider | cat", 2.0)
    compare(out, "users", "≤ 3x getent passwd", 3.0)
    compare(out, "packages", "≤ 3x dpkg-query -W", 3.0)
    out.append("")
    floor, find = medians("floor"), medians("find")
    if floor and find and len(floor) >= 2 and len(find) >= 2:
        (_, true_time, _), (_, version_time, _) = floor[:2]
        provider_time = find[0][1]
        out += ["Start-up floor, timed like the first row: `/bin/true` takes %s and "
                "`ralsh --version` %s. Against a provider find of %s, the 1.5x target "
                "leaves ralsh %s for everything it does, including starting itself "
                "(%.0f%% of that budget alone)." % (
                    ms(true_time), ms(version_time), ms(provider_time),
                    ms(provider_time * 0.5), 100 * version_time / (provider_time * 0.5)), ""]
        if floored:
            floor, _ = floored
            budget = floor * 0.2
            extra = version_time - true_time
            out += ["Against its floor of %s, the 1.2x target leaves ralsh %s beyond the "
                    "provider's find and one process start; starting ralsh to do nothing "
                    "takes %s more than starting `/bin/true` (%.0f%% of that budget)." % (
                        ms(floor), ms(budget), ms(extra), 100 * extra / budget), ""]
            if len(medians("floor")) >= 3:
                hello = medians("floor")[2][1] - true_time
                out[-2] += (" A Rust program that only prints a line, built with the same "
                            "release profile, takes %s more than `/bin/true` (%.0f%% of that "
                            "budget)%s." % (
                                ms(hello), 100 * hello / budget,
                                ": the target is below what a dynamically linked Rust program "
                                "costs to start here" if hello >= budget else ""))
    cold = medians("providers_cold")
    if cold:
        out += ["Cold metadata cache, 200 describe-only providers (each described, "
                "eight at a time): median %s over %d runs." % (ms(cold[0][1]), cold[0][2]),
                ""]
    out += ["### Peak memory (maximum resident set size of one run)", "",
            "| command | peak | target |", "| --- | --- | --- |"]
    for name, label, target in [
            ("million_ralsh", "ralsh -j many (1,000,000 resources)", 32),
            ("users_ralsh", "ralsh user", None), ("packages_ralsh", "ralsh package", None)]:
        value = peak(name)
        if value is not None:
            shown = ""
            if target:
                shown = "≤ %d MB — %s" % (target, "met" if value * 1.048576 <= target
                                           else "**not met**")
            out.append("| `%s` | %.1f MiB | %s |" % (label, value, shown))
    return "\n".join(out)


def puppet_section():
    out = list(TABLE_HEAD)
    out[0] += " The ratio is ralsh's time over Puppet's; lower is better."
    users = compare(out, "puppet_users", "≥ 100x faster than Puppet", 0.01)
    packages = compare(out, "puppet_packages", "≥ 100x faster than Puppet", 0.01)
    if users is None and packages is None:
        return None
    out.append("")
    if packages is not None:
        out += ["`puppet resource package` is timed with `--ignore-failure`: on some "
                "machines Puppet 7 lists every package and then fails "
                "(`Could not run: [nil, ...]` after its pip provider), so its time "
                "is if anything too low.", ""]
    out += ["### Peak memory (maximum resident set size of one run)", "",
            "| command | peak |", "| --- | --- |"]
    for name, label in [("users_ralsh", "ralsh user"), ("users_puppet", "puppet resource user"),
                        ("packages_ralsh", "ralsh package"),
                        ("packages_puppet", "puppet resource package")]:
        value = peak(name)
        if value is not None:
            out.append("| `%s` | %.1f MiB |" % (label, value))
    out.append("")
    for name, label in [("users", "user"), ("packages", "package")]:
        ours, theirs = peak(name + "_ralsh"), peak(name + "_puppet")
        if ours and theirs:
            share = 100 * ours / theirs
            out.append("`ralsh %s` uses %.0f%% of Puppet's peak memory (target: at most "
                       "10%%; %s)." % (label, share, "met" if share <= 10 else "**not met**"))
    return "\n".join(out)


section.write("run", "ralsh against the providers and the system tools", SCRIPT, HEAD,
              run_section())
puppet = puppet_section()
if puppet is not None:
    section.write("run_puppet", "ralsh against `puppet resource`", SCRIPT, HEAD, puppet)
else:
    print("bench: Puppet not measured; its section (bench/sections/run_puppet.md) "
          "is left as it was", file=sys.stderr)
