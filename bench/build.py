#!/usr/bin/env python3
"""How long ral takes to build: from nothing, and after a one-line change.

    python3 bench/build.py [--skip-release]

Checks out HEAD with `git worktree add --detach` in a scratch directory,
with a cargo target directory of its own there, so that every build starts
from nothing and the checkout and its target/ are left alone. Times, one
after the other:

1. `cargo build` (debug, every binary), from nothing;
2. `cargo test --no-run` after it (the test binaries);
3. a one-line change in the engine (a line of code, a small public
   function, appended to src/converge/plan.rs), then `cargo build`,
   then `cargo test --no-run`;
4. the SDK's crate alone, `cargo build -p ral-sdk`, in a target directory
   of its own, debug and then release, each from nothing;
5. `cargo build --release --bin ralsh` from nothing (what the README's
   `cargo run --release --bin ralsh` builds first), unless --skip-release.

Dependencies are compiled in each build from nothing; they are not
downloaded (cargo fetch runs first, and is not timed). Writes
bench/sections/build.md: the crates of the workspace with their files
and lines, and the times. The machine's other work shows in the load
average of the header: a build uses every core.
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

BENCH = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(BENCH)
sys.path.insert(0, BENCH)
import section  # noqa: E402

# The engine's file the one-line change goes to, and the line: code (a
# function the library exports), not a comment, which incremental
# compilation could pass over.
CHANGED = "src/converge/plan.rs"
LINE = "#[doc(hidden)] pub fn changed_by_bench_build() -> u32 { 7 }\n"


def run(argv, cwd, env=None):
    subprocess.run(argv, cwd=cwd, env=env, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def timed(argv, cwd, target):
    """Seconds that ARGV took in CWD with cargo target directory TARGET."""
    env = dict(os.environ, CARGO_TARGET_DIR=target, CARGO_TERM_COLOR="never")
    start = time.monotonic()
    result = subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    elapsed = time.monotonic() - start
    if result.returncode != 0:
        sys.exit("build: %s failed:\n%s" % (" ".join(argv), result.stderr[-2000:]))
    return elapsed


def crates(tree):
    """(name, path, files, lines) of each crate's sources (their unit
    tests included) and of the integration tests."""
    found = []
    for name, path in (("ral (the host, its binaries)", "src"),
                       ("ral-sdk", "crates/ral-sdk/src"),
                       ("ral's integration tests", "tests")):
        files = lines = 0
        for directory, _, names in os.walk(os.path.join(tree, path)):
            for file in names:
                if file.endswith(".rs"):
                    files += 1
                    with open(os.path.join(directory, file), encoding="utf-8") as handle:
                        lines += sum(1 for _ in handle)
        found.append((name, path, files, lines))
    return found


def seconds(value):
    if value >= 59.5:
        minutes, rest = divmod(round(value), 60)
        return "%d min %02d s" % (minutes, rest)
    return "%.1f s" % value


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-release", action="store_true")
    args = parser.parse_args()
    head = section.Section("build", "Build times", "bench/build.py")
    scratch = tempfile.mkdtemp(prefix="ral-build-")
    tree = os.path.join(scratch, "tree")
    try:
        run(["git", "worktree", "add", "--detach", tree, "HEAD"], ROOT)
        try:
            body = measure(args, scratch, tree)
        finally:
            run(["git", "worktree", "remove", "--force", tree], ROOT)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    head.write(body)


def measure(args, scratch, tree):
    run(["cargo", "fetch", "--quiet"], tree)
    target = os.path.join(scratch, "target")
    rows = [("`cargo build` (debug, every binary), from nothing",
             timed(["cargo", "build"], tree, target)),
            ("`cargo test --no-run` after it", timed(["cargo", "test", "--no-run"], tree, target))]
    with open(os.path.join(tree, CHANGED), "a") as out:
        out.write(LINE)
    rows += [("a line of code added to `%s`, then `cargo build` (debug)" % CHANGED,
              timed(["cargo", "build"], tree, target)),
             ("then `cargo test --no-run`", timed(["cargo", "test", "--no-run"], tree, target))]
    sdk = os.path.join(scratch, "target-sdk")
    rows += [("`cargo build -p ral-sdk` (the SDK alone, debug), from nothing",
              timed(["cargo", "build", "-p", "ral-sdk"], tree, sdk)),
             ("`cargo build -p ral-sdk --release`, from nothing",
              timed(["cargo", "build", "-p", "ral-sdk", "--release"], tree,
                    os.path.join(scratch, "target-sdk-release")))]
    if not args.skip_release:
        rows.append(("`cargo build --release --bin ralsh`, from nothing",
                     timed(["cargo", "build", "--release", "--bin", "ralsh"], tree,
                           os.path.join(scratch, "target-release"))))
    out = ["| code | directory | files | lines |", "| --- | --- | --- | --- |"]
    out += ["| %s | `%s` | %d | %d |" % crate for crate in crates(tree)]
    out += ["", "| build | time |", "| --- | --- |"]
    out += ["| %s | %s |" % (name, seconds(value)) for name, value in rows]
    return "\n".join(out)


if __name__ == "__main__":
    main()
