#!/usr/bin/env python3
"""Instructions executed by ral's binaries at two revisions, under callgrind.

    python3 bench/instructions.py [OLD [NEW]]     # default: 774eb3a HEAD

Counts, with `valgrind --tool=callgrind`, the instructions (Ir) executed by
the `ralsh` or `ral` process itself on the usual hot paths, at the two
revisions, and writes the comparison as a markdown section to
bench/sections/instructions.md. An instruction count does not depend on
what else the machine is doing, so two revisions can be compared on a
shared machine where wall-clock times cannot.

Each revision is checked out with `git worktree add --detach` under
target/instructions/<12 hex digits>/ and built there in release mode
(`cargo build --release -j1 --bins`, one cargo target directory shared by
the revisions, so the dependencies are built once). The binaries are kept in
target/instructions/bin/<commit>/ and the worktrees stay in place: the next
run reuses both and builds nothing. `--clean` removes the worktrees and that
directory, then exits. The symbols are kept in the binaries
(CARGO_PROFILE_RELEASE_STRIP=false: the code is the same, and a stripped copy
counts a few hundred instructions fewer at start-up, alike at both
revisions) so that `callgrind_annotate` can name the functions of the
profiles kept in target/instructions/out/<commit>/<case>.callgrind (the run
of the median); `--annotate CASE` prints the functions whose inclusive
count changed most between the two revisions' profiles of CASE.

The cases, each in its own temporary directory, with the providers of the
revision measured:

- find, `ralsh kv a`: one resource, found by the bash provider of bench/run.sh
  (with its .yaml, so no describe call);
- many, `ralsh -j many`: a JSON listing of bench/providers/many.prov's resources
  (100,000 by default, --many);
- plan, `ral plan` with nothing to change: the manifest of bench/plan.sh (1,000 files
  with content and mode and their directory, --files) below a fake root
  (--root), with the bundled file provider, after a first apply;
- apply, the second `ral apply`: the same, with nothing to change.

At 774eb3a and at 9855251 the four command lines are the same (`ral plan
--help` and `ral apply --help` show the same options).

The state store is the fake root's own (ROOT/var/lib/ral/state.db). Before
each measured plan or apply the fake root, store included, is put back as
the first apply left it, so every run starts from the same store.

Only the process started under valgrind is counted: valgrind does not
follow the providers it executes (no --trace-children), and the profile is
read from the file named with that process's own pid, so neither a
provider nor a child between its fork and its exec adds to the count.
Counts still vary a little between runs (hash seeds, the order the kernel
delivers the children's output in), so each case runs --runs times (default
5) and the median is reported.
"""

import argparse
import datetime
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CACHE = REPO / "target" / "instructions"
SECTION = REPO / "bench" / "sections" / "instructions.md"
TITLE = "## Instructions executed at two revisions (`bench/instructions.py`)"

# The one-resource provider of bench/run.sh, with its metadata.
KV_PROV = """#!/bin/bash
case "$1" in
ral_action=list) printf '# simple\\nname: a\\nvalue: 1\\n' ;;
ral_action=find) printf '# simple\\nname: %s\\nvalue: 1\\n' "${2#name=}" ;;
esac
"""
KV_YAML = """---
provider:
  type: kv
  invoke: simple
  actions: [list, find]
  suitable: true
  desc: bench
  attributes:
    name: {}
    value: {}
"""


def log(msg):
    print(f"instructions: {msg}", file=sys.stderr, flush=True)


def git(*args, cwd=REPO):
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def resolve(rev):
    return git("rev-parse", "--verify", f"{rev}^{{commit}}")


class Revision:
    """One revision: its worktree, its binaries, built once and then reused."""

    def __init__(self, name, commit):
        self.name = name
        self.commit = commit
        self.tree = CACHE / commit[:12]
        self.bin = CACHE / "bin" / commit
        self.ral = self.bin / "ral"
        self.ralsh = self.bin / "ralsh"

    def prepare(self):
        if not (self.tree / ".git").exists():
            log(f"{self.name}: worktree {self.tree}")
            # A worktree deleted by hand is still registered: forget it.
            git("worktree", "prune")
            git("worktree", "add", "--detach", str(self.tree), self.commit)
        if self.ral.exists() and self.ralsh.exists():
            log(f"{self.name}: reusing the binaries in {self.bin}")
            return
        log(f"{self.name}: cargo build --release -j1 --bins (this takes minutes)")
        target = CACHE / "cargo-target"
        env = dict(os.environ, CARGO_TARGET_DIR=str(target), CARGO_PROFILE_RELEASE_STRIP="false")
        t0 = time.monotonic()
        subprocess.run(["cargo", "build", "--release", "-j1", "--bins", "--quiet"], cwd=self.tree, env=env, check=True)
        log(f"{self.name}: built in {time.monotonic() - t0:.0f} s")
        # The shared target directory holds one revision's binaries at a
        # time: keep this one's apart.
        self.bin.mkdir(parents=True, exist_ok=True)
        for b in ("ral", "ralsh"):
            shutil.copy2(target / "release" / b, self.bin / b)


def callgrind(cmd, out_dir, env, cwd, expect=(0,)):
    """Runs cmd under callgrind; returns (Ir of that process, its profile)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    for f in out_dir.glob("callgrind.*"):
        f.unlink()
    proc = subprocess.Popen(
        ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out_dir}/callgrind.%p", *map(str, cmd)],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    _, err = proc.communicate()
    if proc.returncode not in expect:
        sys.exit(f"instructions: {' '.join(map(str, cmd))} exited {proc.returncode}:\n{err[-3000:]}")
    # valgrind runs the program in its own process: the profile named with
    # that pid is the program's; any other is a child's before its exec.
    profile = out_dir / f"callgrind.{proc.pid}"
    text = profile.read_text(errors="replace")
    m = re.search(r"^(?:summary|totals):\s*(\d+)", text, re.M)
    if not m:
        sys.exit(f"instructions: no total in {profile}")
    return int(m.group(1)), profile


def files_manifest(n):
    lines = ["file:", "  /srv:", "    ensure: directory"]
    for i in range(1, n + 1):
        lines.append(f'  /srv/f{i:04d}:\n    content: "file f{i:04d}\\n"\n    mode: "0640"')
    return "\n".join(lines) + "\n"


def run_native(cmd, env, cwd, expect=(0,)):
    r = subprocess.run(list(map(str, cmd)), cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if r.returncode not in expect:
        sys.exit(f"instructions: {' '.join(map(str, cmd))} exited {r.returncode}:\n{r.stderr[-3000:]}")


def restore(snapshot, root):
    shutil.rmtree(root)
    shutil.copytree(snapshot, root, symlinks=True)


def measure(rev, args):
    """The median Ir of each case at one revision, and the median's profile."""
    results = {}
    out = CACHE / "out" / rev.commit
    out.mkdir(parents=True, exist_ok=True)
    # The same directory name length for every revision, so no path makes
    # one revision's strings longer than the other's.
    with tempfile.TemporaryDirectory(prefix="ral-insn-") as tmp:
        w = Path(tmp)
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(w / "home"),
            "XDG_CACHE_HOME": str(w / "cache"),
            "LC_ALL": "C",
        }
        (w / "home").mkdir()
        (w / "cache").mkdir()

        def case(key, label, cmd, before=None, expect=(0,)):
            counts, profiles = [], []
            t0 = time.monotonic()
            for i in range(args.runs):
                if before:
                    before()
                ir, prof = callgrind(cmd, w / "cg", env, w, expect)
                kept = out / f"{key}.{i}.callgrind"
                shutil.move(prof, kept)
                counts.append(ir)
                profiles.append(kept)
            med = statistics.median_low(counts)
            shutil.copy2(profiles[counts.index(med)], out / f"{key}.callgrind")
            for p in profiles:
                p.unlink()
            results[key] = {"label": label, "median": med, "min": min(counts), "max": max(counts), "runs": counts}
            each = (time.monotonic() - t0) / args.runs
            log(f"{rev.name}: {label}: median {med:,} Ir (runs {', '.join(f'{c:,}' for c in counts)}; {each:.1f} s a run)")

        # 1. One resource.
        find = w / "find"
        (find / "providers").mkdir(parents=True)
        (find / "providers" / "kv.prov").write_text(KV_PROV)
        (find / "providers" / "kv.prov").chmod(0o755)
        (find / "providers" / "kv.yaml").write_text(KV_YAML)
        kv = [rev.ralsh, "-I", find, "kv", "a"]
        run_native(kv, env, w)
        case("find", "`ralsh kv a`", kv)

        # 2. A listing of many resources.
        many = w / "many"
        many.mkdir()
        (many / "count").write_text(f"{args.many}\n")
        listing = [rev.ralsh, "-I", rev.tree / "bench", "--root", many, "-j", "many"]
        run_native(listing, env, w)
        case("many", f"`ralsh -j many`, {args.many:,} resources", listing)

        # 3 and 4. Plan and second apply of the files below a fake root.
        root, snap = w / "root", w / "snapshot"
        root.mkdir()
        manifest = w / "files.yaml"
        manifest.write_text(files_manifest(args.files))
        apply = [rev.ral, "apply", "--root", root, manifest]
        plan = [rev.ral, "plan", "--root", root, manifest]
        run_native(apply, env, w)
        last = root / "srv" / f"f{args.files:04d}"
        if last.read_text() != f"file f{args.files:04d}\n" or (last.stat().st_mode & 0o777) != 0o640:
            sys.exit(f"instructions: {last} is not as the manifest asks")
        shutil.copytree(root, snap, symlinks=True)
        case("plan", f"`ral plan`, {args.files:,} files, nothing to change", plan, lambda: restore(snap, root))
        case("apply", f"`ral apply`, {args.files:,} files, second run", apply, lambda: restore(snap, root))
    return results


def machine():
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    valgrind = subprocess.run(["valgrind", "--version"], capture_output=True, text=True).stdout.strip()
    return cpu, os.cpu_count(), platform.release(), valgrind.removeprefix("valgrind-")


def section(old, new, res_old, res_new, args):
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    cpu, ncpu, kernel, vg = machine()
    head = git("rev-parse", "--short", "HEAD")
    lines = [
        TITLE,
        "",
        f"Written by `bench/instructions.py` on {now}, commit {head}, on {cpu} ({ncpu} CPUs), {kernel}; valgrind {vg}.",
        "",
        f"Instructions executed (callgrind's Ir) by the `ralsh` or `ral` process itself, not by the providers it runs, "
        f"median of {args.runs} runs; {old.name} is {old.commit[:12]}, {new.name} {new.commit[:12]}. "
        "Each revision is built in release mode and runs with its own providers.",
        "",
        f"| case | {old.name} | {new.name} | change |",
        "| --- | ---: | ---: | ---: |",
    ]
    for key in res_old:
        a, b = res_old[key]["median"], res_new[key]["median"]
        lines.append(f"| {res_old[key]['label']} | {a:,} | {b:,} | {100 * (b - a) / a:+.1f}% |")
    lines.append("")
    # How far apart the runs of one case fell, so a change can be read
    # against the noise.
    spread = max((r["max"] - r["min"]) / r["median"] for res in (res_old, res_new) for r in res.values())
    lines.append(
        f"The runs of one case are at most {100 * spread:.2f}% apart (largest minus smallest, over the median). "
        f"`python3 bench/instructions.py --annotate CASE` ({', '.join(res_old)}) shows which functions changed."
    )
    return "\n".join(lines) + "\n"


def functions(profile):
    """Inclusive Ir of each function of a profile, by callgrind_annotate."""
    out = subprocess.run(
        ["callgrind_annotate", "--inclusive=yes", "--threshold=100", str(profile)],
        capture_output=True, text=True, check=True,
    ).stdout
    costs, table = {}, False
    for line in out.splitlines():
        if line.startswith("Ir"):
            table = True
            continue
        m = re.match(r"\s*([\d,]+)\s+(?:\([^)]*\)\s+)?(\S.*)", line) if table else None
        if m:
            # The binaries' paths name their commit: drop them, so the same
            # function has the same name at both revisions.
            name = re.sub(r"\s*\[[^\]]*/bin/[0-9a-f]{40}/([^\]]+)\]", r" [\1]", m.group(2))
            costs[name] = costs.get(name, 0) + int(m.group(1).replace(",", ""))
    return costs


def annotate(old, new, case, top=30):
    """Prints the functions whose inclusive Ir changed most in one case."""
    profiles = [CACHE / "out" / rev.commit / f"{case}.callgrind" for rev in (old, new)]
    for prof in profiles:
        if not prof.exists():
            sys.exit(f"instructions: no profile {prof}: run the comparison first")
    a, b = map(functions, profiles)
    print(f"{'change':>12} {old.name:>14} {new.name:>14}  function (inclusive Ir; a function moved or renamed shows as one gone, one new)")
    for name in sorted(a.keys() | b.keys(), key=lambda k: -abs(b.get(k, 0) - a.get(k, 0)))[:top]:
        print(f"{b.get(name, 0) - a.get(name, 0):>+12,} {a.get(name, 0):>14,} {b.get(name, 0):>14,}  {name[:160]}")


def clean():
    if not CACHE.exists():
        return
    for entry in CACHE.iterdir():
        if (entry / ".git").is_file():
            git("worktree", "remove", "--force", str(entry))
    shutil.rmtree(CACHE)
    git("worktree", "prune")
    log(f"removed {CACHE}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("old", nargs="?", default="774eb3a")
    p.add_argument("new", nargs="?", default="HEAD")
    p.add_argument("--runs", type=int, default=5, help="runs per case (median reported)")
    p.add_argument("--many", type=int, default=100_000, help="resources listed by ralsh -j many")
    p.add_argument("--files", type=int, default=1000, help="files in the plan and apply manifest")
    p.add_argument("--output", type=Path, default=SECTION, help="where the markdown section goes ('-': stdout)")
    p.add_argument("--annotate", metavar="CASE", help="print the functions that changed most in CASE between the kept profiles, then exit")
    p.add_argument("--clean", action="store_true", help="remove the worktrees and binaries made by earlier runs, then exit")
    args = p.parse_args()
    if args.clean:
        clean()
        return
    for tool in ("valgrind", "cargo", "git"):
        if not shutil.which(tool):
            sys.exit(f"instructions: {tool} is missing")
    t0 = time.monotonic()
    old, new = Revision(args.old, resolve(args.old)), Revision(args.new, resolve(args.new))
    if args.annotate:
        annotate(old, new, args.annotate)
        return
    for rev in (old, new):
        rev.prepare()
    t1 = time.monotonic()
    res_old = measure(old, args)
    res_new = measure(new, args)
    text = section(old, new, res_old, res_new, args)
    if str(args.output) == "-":
        sys.stdout.write(text)
    else:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(text)
        log(f"wrote {args.output}")
        if args.output == SECTION:
            # BENCHMARKS.md is assembled from the sections.
            subprocess.run([sys.executable, str(REPO / "bench" / "assemble.py")], check=True)
    log(f"built in {t1 - t0:.0f} s, measured in {time.monotonic() - t1:.0f} s; profiles in {CACHE / 'out'}")


if __name__ == "__main__":
    main()
