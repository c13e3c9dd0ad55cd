#!/usr/bin/env python3
"""Where `ralsh TYPE NAME` spends its time beyond the provider's own find.

    python3 bench/startup.py [--runs N] [--no-profile]

bench/run.sh compares `ralsh kv a` with its floor (the provider's find plus
one process start). This script takes the difference apart and writes
bench/sections/startup.md:

1. Start-up alone, timed alike: `/bin/true`, a Rust program that only
   prints a line (built with ralsh's release profile), and `ralsh
   --version`, each linked as we ship it (dynamically, PIE) and as a
   static PIE (`-C target-feature=+crt-static`, glibc linked in).
2. The whole command: the provider's find alone, and `ralsh kv a` from
   both ralsh builds.
3. Where ralsh's own processor time goes, by phase: `perf record` of
   `ralsh kv a` (cpu-clock samples with DWARF call stacks, over 200 runs,
   of a copy of the shipped build that keeps its symbols), each sample put
   in the first phase whose functions are on its stack. The build has no
   debug information: a function that LTO inlined counts as its caller.
   Skipped without perf, where perf may not record, or with --no-profile.

Times are medians over hyperfine's runs (no shell, as bench/run.sh times
its rows), --runs of each command (300 by default) taken in rounds of
ten of each, one command after the other, so that the machine's changing
load falls on every row alike. Builds ralsh in release mode: the static
copy and the copy with symbols with `cargo rustc`, which writes them to
target/release/ralsh, and then that again as shipped (`cargo build
--release --bin ralsh`, also when a build before it failed); and the two
small programs in a scratch directory. Writes nothing else outside it
(perf without its build-id cache). Needs hyperfine (bench/run.sh
installs it).
"""

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

BENCH = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(BENCH)
sys.path.insert(0, BENCH)
import section  # noqa: E402

# Runs of each command in one round of hyperfine (see `medians`).
BATCH = 10
PROFILE = '[profile.release]\nlto = "fat"\ncodegen-units = 1\nstrip = true\n'
STATIC = ["-C", "target-feature=+crt-static"]
SYMBOLS = ["-C", "strip=none"]
PROVIDER = """#!/bin/bash
case "$1" in
ral_action=list) printf '# simple\\nname: a\\nvalue: 1\\n' ;;
ral_action=find) printf '# simple\\nname: %s\\nvalue: 1\\n' "${2#name=}" ;;
esac
"""
METADATA = ("---\nprovider:\n  type: kv\n  invoke: simple\n  actions: [list, find]\n"
            "  suitable: true\n  desc: bench\n  attributes:\n    name: {}\n    value: {}\n")

# The phases of a run of `ralsh kv a`, each named by functions on the
# stack of every sample taken in it. A sample goes to the first phase it
# matches: ral's own first (their functions sit below `main`, which every
# stack from `main` on shares), then the loader's and glibc's start-up,
# whose stacks hold nothing of ral.
PHASES = [
    ("parsing the arguments (clap)", ["clap_builder", "augment_args", "from_arg_matches"]),
    ("finding the provider: discovery, its metadata (cached), the Python "
     "toolkit's check", ["cli::load", "discovery::", "metadata::", "bundled::"]),
    ("the keeper (forked at the first call)", ["keeper::"]),
    ("starting the provider (posix_spawn, its pipes; the keeper's fork where it "
     "is inlined)", ["Group::spawn", "__spawni", "clone3"]),
    ("finding what a call left behind (`/proc`)", ["orphans::"]),
    ("reading and checking the provider's answer", ["Running::drive", "runner::run"]),
    ("writing the resource", ["render::", "command::show"]),
    ("loading and relocating the program and its libraries, glibc's start-up "
     "(CPU features and cache sizes, by `cpuid`)",
     ["_dl_", "__libc_early_init", "call_init", "init_cpu_features", "__cpu_indicator",
      "intel_check_word", "handle_intel", "handle_amd", "get_common_", "update_active",
      "do_lookup_x", "check_match"]),
    ("the kernel's `execve` of ralsh", ["load_elf_binary", "bprm_", "execve"]),
    ("the rest of ral's code from `main` on", ["ralsh::", "ral::"]),
    ("leaving (freeing, unmapping)", ["exit_mmap", "do_exit", "__run_exit_handlers",
                                      "do_group_exit"]),
]


def run(*args, **kwargs):
    return subprocess.run(args, check=True, **kwargs)


def cargo_rustc(flags, keep_as):
    """ralsh built with extra rustc flags for its final link, copied to
    KEEP_AS (cargo rustc writes it where the shipped one is)."""
    run("cargo", "rustc", "--quiet", "--release", "--bin", "ralsh", "--", *flags, cwd=ROOT)
    shutil.copy2(os.path.join(ROOT, "target/release/ralsh"), keep_as)


def hello(scratch, flags, name):
    """A Rust program that only prints a line, with ralsh's release
    profile and FLAGS."""
    project = os.path.join(scratch, "hello")
    os.makedirs(os.path.join(project, "src"), exist_ok=True)
    with open(os.path.join(project, "Cargo.toml"), "w") as out:
        out.write('[package]\nname = "hello"\nversion = "0.1.0"\nedition = "2021"\n' + PROFILE)
    with open(os.path.join(project, "src/main.rs"), "w") as out:
        out.write('fn main() { println!("hello 0.1.0"); }\n')
    env = dict(os.environ, CARGO_TARGET_DIR=os.path.join(project, "target"),
               RUSTFLAGS=" ".join(flags))
    run("cargo", "build", "--quiet", "--release", "--manifest-path",
        os.path.join(project, "Cargo.toml"), env=env)
    path = os.path.join(scratch, name)
    shutil.copy2(os.path.join(project, "target/release/hello"), path)
    return path


def medians(commands, runs, env, scratch):
    """The median wall time of each command, in ms, timed as bench/run.sh
    times its rows (hyperfine, no shell), but in short rounds: each round
    runs every command BATCH times, so that a change in the machine's load
    falls on all of them alike rather than on whichever ran then."""
    export = os.path.join(scratch, "times.json")
    times = [[] for _ in commands]
    for _ in range(max(1, runs // BATCH)):
        argv = ["hyperfine", "-N", "--style", "none", "--warmup", "2", "--runs", str(BATCH),
                "--export-json", export]
        run(*argv, *(" ".join(command) for command in commands), env=env,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        with open(export) as handle:
            for taken, result in zip(times, json.load(handle)["results"]):
                taken.extend(result["times"])
    return [statistics.median(taken) * 1000 for taken in times]


def profile(binary, argv_tail, env, scratch):
    """The share of ralsh's samples in each phase, and of those in none."""
    data = os.path.join(scratch, "perf.data")
    loop = os.path.join(scratch, "loop.sh")
    with open(loop, "w") as out:
        out.write('#!/bin/sh\ni=0\nwhile [ $i -lt 200 ]; do "$@" >/dev/null; i=$((i+1)); done\n')
    os.chmod(loop, 0o755)
    try:
        run("perf", "record", "--quiet", "--no-buildid-cache", "-F", "20000", "-e",
            "cpu-clock", "--call-graph", "dwarf,16384", "-o", data, "--", loop, binary,
            *argv_tail, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        script = subprocess.run(["perf", "script", "-i", data, "-F", "comm,ip,sym",
                                 "--comm", os.path.basename(binary)],
                                capture_output=True, text=True, check=True).stdout
    except subprocess.CalledProcessError as error:
        # perf may be there and still not allowed (perf_event_paranoid).
        print("startup: no profile: %s" % error, file=sys.stderr)
        return {}, 0, 0
    counts = {name: 0 for name, _ in PHASES}
    total = other = 0
    for sample in script.split("\n\n"):
        frames = [function_path(frame) for frame in sample.strip().splitlines()[1:]]
        if not frames:
            continue
        total += 1
        phase = next((name for name, keys in PHASES
                      if any(matches(key, frame) for frame in frames for key in keys)), None)
        if phase is None:
            other += 1
        else:
            counts[phase] += 1
    return counts, other, total


def function_path(frame):
    """A frame's function without its generic arguments
    (`drop_in_place<ral::model::metadata::Attribute>` is `drop_in_place`),
    so that a type named in them does not place the sample. A qualified
    path (`<ral::host::Host as ral::invoke::Runner>::run`) is kept."""
    out, depth = [], 0
    for at, char in enumerate(frame):
        if char == "<" and (depth or (at and (frame[at - 1].isalnum() or frame[at - 1] == "_"))):
            depth += 1
        elif char == ">" and depth:
            depth -= 1
        elif not depth:
            out.append(char)
    return "".join(out)


def matches(key, frame):
    """Whether KEY names FRAME's function: a path ending in `::` starts a
    path segment (`ral::` is not `general::`), anything else is a part of
    a name."""
    if not key.endswith("::"):
        return key in frame
    return re.search(r"(^|[\s<(&*:])%s" % re.escape(key), frame) is not None


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--no-profile", action="store_true")
    args = parser.parse_args()
    head = section.Section("startup", "Where one resource's time goes", "bench/startup.py")
    scratch = tempfile.mkdtemp(prefix="ral-startup-")
    try:
        body = measure(args, scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    head.write(body)


def measure(args, scratch):
    shipped = os.path.join(scratch, "ralsh")
    static = os.path.join(scratch, "ralsh-static")
    symbols = os.path.join(scratch, "ralsh-symbols")
    profiling = not args.no_profile and shutil.which("perf") is not None
    try:
        cargo_rustc(STATIC, static)
        if profiling:
            cargo_rustc(SYMBOLS, symbols)
    finally:
        # cargo rustc wrote its copies where the shipped ralsh goes: it is
        # built again as shipped, also when a build above failed.
        run("cargo", "build", "--quiet", "--release", "--bin", "ralsh", cwd=ROOT)
    shutil.copy2(os.path.join(ROOT, "target/release/ralsh"), shipped)
    hello_dynamic = hello(scratch, [], "hello-dynamic")
    hello_static = hello(scratch, STATIC, "hello-static")

    providers = os.path.join(scratch, "find/providers")
    os.makedirs(providers)
    find = os.path.join(providers, "kv.prov")
    with open(find, "w") as out:
        out.write(PROVIDER)
    os.chmod(find, 0o755)
    with open(os.path.join(providers, "kv.yaml"), "w") as out:
        out.write(METADATA)
    env = dict(os.environ, XDG_CACHE_HOME=os.path.join(scratch, "cache"))
    tail = ["-I", os.path.dirname(providers), "kv", "a"]
    subprocess.run([shipped] + tail, env=env, check=True, capture_output=True)

    rows = [
        ("`/bin/true`", ["/bin/true"]),
        ("a Rust hello world, dynamic", [hello_dynamic]),
        ("a Rust hello world, static", [hello_static]),
        ("`ralsh --version`, dynamic (shipped)", [shipped, "--version"]),
        ("`ralsh --version`, static", [static, "--version"]),
        ("the provider's find", [find, "ral_action=find", "name=a"]),
        ("`ralsh kv a`, dynamic (shipped)", [shipped] + tail),
        ("`ralsh kv a`, static", [static] + tail),
    ]
    times = dict(zip((name for name, _ in rows),
                     medians([argv for _, argv in rows], args.runs, env, scratch)))
    out = ["| command | median |", "| --- | --- |"]
    out += ["| %s | %.3f ms |" % (name, times[name]) for name, _ in rows]

    true, find_time = times["`/bin/true`"], times["the provider's find"]
    floor = find_time + true
    out += [""]
    for build in ("dynamic (shipped)", "static"):
        whole = times["`ralsh kv a`, %s" % build]
        start = times["`ralsh --version`, %s" % build] - true
        out.append(
            "`ralsh kv a`, %s: %.3f ms, %.2fx its floor of %.3f ms (the find plus "
            "`/bin/true`); of the %.3f ms beyond the floor, starting (`--version` "
            "against `/bin/true`, which includes building clap's command) takes "
            "%.3f ms and the rest, %.3f ms, is the work of the command. The 1.2x "
            "target leaves %.3f ms." % (
                build, whole, whole / floor, floor, whole - floor, start,
                whole - floor - start, 0.2 * floor))
        out.append("")
    shipped_work = (times["`ralsh kv a`, dynamic (shipped)"] - floor
                    - (times["`ralsh --version`, dynamic (shipped)"] - true))
    static_start = times["`ralsh --version`, static"] - true
    estimate = floor + static_start + shipped_work
    out += ["The static build's std starts the provider by `fork` (see the notes); a "
            "static build that kept `posix_spawn`, starting as the static one and "
            "working as the shipped one, would take about %.3f ms, %.2fx its floor "
            "(an estimate from the rows above, not a measurement)." % (
                estimate, estimate / floor), ""]
    out.append("Runs: %d of each command, in rounds of %d of each (after 2 not "
               "counted)." % (max(1, args.runs // BATCH) * BATCH, BATCH))

    if profiling:
        counts, other, total = profile(symbols, tail, env, scratch)
        if total:
            out += ["", "ralsh's own processor time in `ralsh kv a` (the shipped build "
                    "with its symbols; %d samples):" % total, "",
                    "| phase | share of samples |", "| --- | --- |"]
            out += ["| %s | %.1f%% |" % (name, 100 * count / total)
                    for name, count in sorted(counts.items(), key=lambda item: -item[1])]
            out.append("| elsewhere: stacks that name none of the phases above "
                       "(unwound no further than an allocation, a copy or a page "
                       "fault) | %.1f%% |" % (100 * other / total))
    return "\n".join(out)


if __name__ == "__main__":
    main()
