#!/usr/bin/env python3
"""Benchmark: the native core types against the system's own tools, each
pair timed side by side in one hyperfine run (issue 29).

- `ralsh user root` against `getent passwd root`, then both again with a
  slow `python3` shim first on PATH (as a version manager's is: a script
  that starts before the real Python);
- `ralsh host` against `cat /etc/hosts`;
- `ralsh host localhost` against its floor: the provider's own find
  (`ral-provider etc_hosts ral_action=find name=localhost`, one process
  start) plus one more process start (`/bin/true`), the two timed in the
  same run and their medians added.

Everything reads the machine's own files (`/etc/passwd`, `/etc/hosts`):
nothing is written outside a scratch directory (ral's cache). Run from the
repository root after `cargo build --release`:

    python3 bench/native.py [--runs 30]

Writes the native section of BENCHMARKS.md (bench/section.py).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import section  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RELEASE = os.path.join(ROOT, "target", "release")
RALSH = os.path.join(RELEASE, "ralsh")
PROVIDER = os.path.join(RELEASE, "ral-provider")
# What the shim costs before it hands over: about what pyenv's does.
SHIM = "#!/bin/sh\nsleep 0.05\nexec %s \"$@\"\n"


def hyperfine(commands, runs, env, scratch):
    """Median seconds of each command (argv lists), timed in one run."""
    out = os.path.join(scratch, "hyperfine.json")
    argv = ["hyperfine", "--style", "none", "-N", "--warmup", "5", "--runs",
            str(runs), "--export-json", out]
    argv += [" ".join(command) for command in commands]
    subprocess.run(argv, check=True, env=env, stdout=subprocess.DEVNULL)
    with open(out) as handle:
        results = json.load(handle)["results"]
    return [result["median"] for result in results]


def checked(command, env):
    """Runs `command` once and fails unless it succeeds and prints."""
    done = subprocess.run(command, env=env, capture_output=True)
    if done.returncode != 0 or not done.stdout:
        sys.exit("bench: %s failed: %s" % (" ".join(command),
                                           done.stderr.decode()))


def ms(seconds):
    return "%.1f ms" % (seconds * 1000)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    for program in (RALSH, PROVIDER):
        if not os.access(program, os.X_OK):
            sys.exit("bench: %s is missing: run cargo build --release" % program)
    sect = section.Section("native", "Native core types against the system's tools",
                           "bench/native.py")
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        env = {"PATH": os.environ["PATH"], "HOME": scratch,
               "XDG_CACHE_HOME": os.path.join(scratch, "cache")}
        shims = os.path.join(scratch, "shims")
        os.mkdir(shims)
        python = subprocess.run(["sh", "-c", "command -v python3"], env=env,
                                capture_output=True, text=True).stdout.strip()
        with open(os.path.join(shims, "python3"), "w") as handle:
            handle.write(SHIM % python)
        os.chmod(os.path.join(shims, "python3"), 0o755)
        shimmed = dict(env, PATH=shims + ":" + env["PATH"])

        pairs = [
            ("`ralsh user root`", [RALSH, "user", "root"],
             "`getent passwd root`", ["getent", "passwd", "root"], env, 3.0),
            ("`ralsh user root`, slow python3 shim first on PATH",
             [RALSH, "user", "root"], "`getent passwd root`, same PATH",
             ["getent", "passwd", "root"], shimmed, 3.0),
            ("`ralsh host`", [RALSH, "host"], "`cat /etc/hosts`",
             ["cat", "/etc/hosts"], env, 3.0),
        ]
        for label, ours, base_label, base, run_env, target in pairs:
            checked(ours, run_env)
            mine, theirs = hyperfine([ours, base], args.runs, run_env, scratch)
            rows.append((label, mine, base_label, theirs, target))

        find = [PROVIDER, "etc_hosts", "ral_action=find", "name=localhost"]
        ours = [RALSH, "host", "localhost"]
        checked(ours, env)
        checked(find, dict(env, RALSH_ROOT_DIR="/"))
        mine, own_find, start = hyperfine(
            [ours, find, ["/bin/true"]], args.runs, env, scratch)
        rows.append(("`ralsh host localhost`", mine,
                     "floor: the provider's own find (%s) plus one process "
                     "start (%s)" % (ms(own_find), ms(start)),
                     own_find + start, 1.2))

    lines = [
        "Release build; times are medians of hyperfine runs (%d each, "
        "five warm-up runs, no shell), each ratio from two commands timed "
        "in the same run. Lower ratios are better." % args.runs,
        "",
        "| command | median | baseline | median | ratio | target | met |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for label, mine, base_label, theirs, target in rows:
        ratio = mine / theirs
        met = "yes" if ratio <= target else "**no**"
        lines.append("| %s | %s | %s | %s | %.2fx | <= %gx | %s |" % (
            label, ms(mine), base_label, ms(theirs), ratio, target, met))
    sect.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
