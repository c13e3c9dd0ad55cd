#!/usr/bin/env python3
"""Hostile-input bench: what misbehaving providers and metadata cost ralsh.

Each case runs target/release/ralsh on a throwaway data directory, cache
and root, and prints its wall time (and, where it matters, peak memory or
stderr size):

- metadata nested 80,000 and 200,000 brackets deep, from a .yaml (one
  line) and from a describe (lines of 10,000), first run and second run;
- a describe that hangs, under --timeout 5, first and second run;
- a provider writing 2 million stderr lines: time and bytes of ralsh's
  own stderr;
- a metadata cache entry replaced by a link to /dev/zero, and by a FIFO:
  time and peak memory of the next run;
- a provider whose child leaves the process group holding stdout, and one
  that starts a detached daemon: time, and whether the child survived.

Run from the repository root after `cargo build --release` (RALSH=PATH
measures another binary):

    python3 bench/hostile.py
"""

import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RALSH = os.environ.get("RALSH") or os.path.join(ROOT, "target", "release", "ralsh")


class Case:
    def __init__(self):
        self.tmp = tempfile.mkdtemp(prefix="ral-hostile-")
        self.data = os.path.join(self.tmp, "data")
        self.cache = os.path.join(self.tmp, "cache")
        self.root = os.path.join(self.tmp, "root")
        for d in (os.path.join(self.data, "providers"), self.cache, self.root):
            os.makedirs(d)

    def provider(self, name, script, yaml=None):
        path = os.path.join(self.data, "providers", name + ".prov")
        with open(path, "w") as fh:
            fh.write(script)
        os.chmod(path, 0o755)
        if yaml is not None:
            with open(os.path.join(self.data, "providers", name + ".yaml"), "w") as fh:
                fh.write(yaml)

    def run(self, *args, limit=900):
        """(seconds, exit status, stderr bytes, peak RSS of ralsh in MiB);
        a run still going after LIMIT seconds is killed (exit status None).
        Peak memory is the largest of any run so far: cases that measure it
        run first in a case of their own."""
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"),
               "HOME": self.cache, "XDG_CACHE_HOME": self.cache}
        start = time.monotonic()
        try:
            done = subprocess.run([RALSH, "--root", self.root, "-I", self.data] + list(args),
                                  env=env, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE, timeout=limit)
            status, stderr = done.returncode, len(done.stderr)
        except subprocess.TimeoutExpired:
            status, stderr = None, 0
        seconds = time.monotonic() - start
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        return seconds, status, stderr, peak / 1024

    def close(self):
        shutil.rmtree(self.tmp, ignore_errors=True)


def report(label, result, extra=""):
    seconds, status, stderr, _ = result
    ended = "exit %d" % status if status is not None else "killed (hung)"
    print("%-58s %8.3f s  %s  stderr %s bytes%s"
          % (label, seconds, ended, format(stderr, ","), extra), flush=True)


LIST = "#!/bin/sh\necho '# simple'\necho 'name: one'\n"


def deep_metadata():
    for depth in (80000, 200000):
        case = Case()
        yaml = "provider:\n  type: deep\n  desc: %s\n" % ("[" * depth)
        case.provider("deep", LIST, yaml)
        for n in (1, 2):
            report("deep .yaml, %d brackets, run %d" % (depth, n), case.run("host"))
        case.close()
        case = Case()
        lines = depth // 10000
        case.provider("deep", "#!/bin/sh\nprintf 'provider:\\n  type: deep\\n  desc:\\n'\n"
                      "awk 'BEGIN { for (l = 0; l < %d; l++) { s = \"   \"; "
                      "for (i = 0; i < 10000; i++) s = s \"[\"; print s } }'\n" % lines)
        for n in (1, 2):
            report("deep describe, %d brackets, --timeout 5, run %d" % (depth, n),
                   case.run("--timeout", "5", "host"))
        case.close()


def hanging_describe():
    case = Case()
    case.provider("hangs", "#!/bin/sh\nexec sleep 600\n")
    for n in (1, 2):
        report("describe that hangs, --timeout 5, run %d" % n,
               case.run("--timeout", "5", "host"))
    case.close()


def stderr_flood():
    case = Case()
    case.provider("noisy", LIST + "awk 'BEGIN { for (i = 0; i < 2000000; i++) "
                  "print \"warn: line \" i > \"/dev/stderr\" }'\n",
                  "provider:\n  type: noisy\n  invoke: simple\n  actions: [list]\n"
                  "  suitable: true\n  attributes:\n    name: {}\n")
    report("2,000,000 stderr lines", case.run("noisy"))
    case.close()


def cache_entries():
    for kind in ("link to /dev/zero", "FIFO"):
        case = Case()
        case.provider("described", "#!/bin/sh\ncase \"$1\" in\n*describe) printf '"
                      "provider:\\n  type: described\\n  invoke: simple\\n  actions: [list]\\n"
                      "  suitable: true\\n  attributes:\\n    name: {}\\n' ;;\n"
                      "*) echo '# simple'; echo 'name: one' ;;\nesac\n")
        case.run("described")
        entries = os.path.join(case.cache, "ral", "metadata")
        for entry in os.listdir(entries):
            path = os.path.join(entries, entry)
            os.unlink(path)
            if kind == "FIFO":
                os.mkfifo(path)
            else:
                os.symlink("/dev/zero", path)
        result = case.run("described", limit=60)
        report("cache entries replaced by a %s" % kind, result,
               "  peak RSS %.1f MiB" % result[3])
        case.close()


def escapees():
    for kind, redirect in (("holding stdout", ""),
                           ("detached daemon", " </dev/null >/dev/null 2>&1")):
        case = Case()
        case.provider("escaping", LIST + "(exec setsid sleep 6543%s) &\necho $! > \"$RALSH_ROOT_DIR/pid\"\n"
                      % redirect,
                      "provider:\n  type: escaping\n  invoke: simple\n  actions: [list]\n"
                      "  suitable: true\n  attributes:\n    name: {}\n")
        result = case.run("escaping")
        with open(os.path.join(case.root, "pid")) as fh:
            pid = int(fh.read())
        try:
            with open("/proc/%d/cmdline" % pid, "rb") as fh:
                alive = b"6543" in fh.read()
        except OSError:
            alive = False
        if alive:
            os.kill(pid, 9)
        report("child left the process group, %s" % kind, result,
               "  child %s" % ("survived" if alive else "ended"))
        case.close()


def main():
    if not os.access(RALSH, os.X_OK):
        sys.exit("build first: cargo build --release")
    # The memory case first: peak memory is per process, the largest yet.
    cache_entries()
    deep_metadata()
    hanging_describe()
    stderr_flood()
    escapees()


if __name__ == "__main__":
    main()
