#!/usr/bin/env python3
"""Batch bench: one json get and one set of many resources, as a plan makes
them, timed on the bundled providers themselves.

On a fresh fake root each round (a temporary directory, never the real
system), for each case: a get of every name (none exists yet), a set
creating them all, a get of them again, and the same set again, which finds
nothing to change. Each is one call of the provider, run with the
environment ralsh gives it, and its answer is checked.

    file1000      1,000 files with content and mode in 10 directories
    file1000-dir  the same in one directory
    user200       200 accounts, each with a supplementary group
    mount200      200 fstab entries

Run from the repository root:

    python3 bench/batch.py [--runs 7] [--cases file1000,user200] [DIR...]

Each DIR is a providers directory (default: providers); with two or more,
their rounds alternate, so that a machine whose disk is busier at one
moment than another (fsync times vary tenfold with other writers) weighs
on all of them alike. Prints the median and range of each step.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def files_in(dirs):
    def setup(root, n):
        os.makedirs(root + "/etc")
        write(root + "/etc/passwd", "root:x:0:0:root:/root:/bin/bash\n")
        write(root + "/etc/group", "root:x:0:\n")
        names = []
        for d in range(dirs):
            os.makedirs(root + "/srv/d%d" % d)
            names += ["/srv/d%d/f%04d" % (d, i) for i in range(n // dirs)]
        return names, lambda name: {"ensure": "file", "mode": "0640",
                                    "content": "content of %s\n" % name * 3}
    return setup


def accounts(root, n):
    os.makedirs(root + "/etc")
    write(root + "/etc/passwd", "root:x:0:0:root:/root:/bin/bash\n")
    write(root + "/etc/shadow", "root:*:19000:0:99999:7:::\n")
    write(root + "/etc/group", "root:x:0:\nstaff:x:50:\n")
    write(root + "/etc/gshadow", "root:*::\nstaff:*::\n")
    return (["user%03d" % i for i in range(n)],
            lambda name: {"ensure": "present", "comment": "User " + name,
                          "shell": "/bin/bash", "groups": ["staff"]})


def mounts(root, n):
    os.makedirs(root + "/etc")
    write(root + "/etc/fstab", "/dev/vda1 / ext4 defaults 0 1\n")
    return (["/srv/m%03d" % i for i in range(n)],
            lambda name: {"ensure": "present", "device": "/dev/x" + name[-3:],
                          "fstype": "ext4", "options": ["defaults"],
                          "dump": 0, "pass": 2})


CASES = {
    "file1000": ("file.prov", 1000, files_in(10)),
    "file1000-dir": ("file.prov", 1000, files_in(1)),
    "user200": ("etc_passwd.prov", 200, accounts),
    "mount200": ("fstab.prov", 200, mounts),
}


def write(path, text):
    with open(path, "w") as fh:
        fh.write(text)


def call(prov, root, action, doc):
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"),
           "RALSH_ROOT_DIR": root}
    started = time.perf_counter()
    run = subprocess.run([prov, "ral_action=" + action], env=env,
                         input=json.dumps(doc).encode(), capture_output=True)
    elapsed = time.perf_counter() - started
    problems = [line for line in run.stderr.decode().splitlines()
                if not line.startswith(("debug:", "info:"))]
    if run.returncode != 0 or problems:
        sys.exit("%s %s failed: %s" % (prov, action, problems[:3]))
    return elapsed, json.loads(run.stdout)


def one_round(prov, n, setup):
    """The four steps on a fresh root: [(label, seconds)]."""
    root = tempfile.mkdtemp(prefix="ral-batch-")
    try:
        names, should = setup(root, n)
        steps = []
        took, answer = call(prov, root, "get", {"names": names})
        found = {r["name"]: r for r in answer["resources"]}
        assert all(found.get(name, {}).get("ensure", "absent") == "absent"
                   for name in names)
        steps.append(("get, none there", took))
        updates = [{"name": name, "is": found.get(name, {}),
                    "should": should(name)} for name in names]
        took, answer = call(prov, root, "set",
                            {"ral": {"noop": False}, "updates": updates})
        assert len(answer["changes"]) >= n
        assert not any("error" in change for change in answer["changes"])
        steps.append(("set, creating", took))
        took, answer = call(prov, root, "get", {"names": names})
        found = {r["name"]: r for r in answer["resources"]}
        assert all(found[name]["ensure"] != "absent" for name in names)
        steps.append(("get, all there", took))
        updates = [{"name": name, "is": found[name], "should": should(name)}
                   for name in names]
        took, answer = call(prov, root, "set",
                            {"ral": {"noop": False}, "updates": updates})
        assert answer["changes"] == [], answer["changes"][:2]
        steps.append(("set, nothing to change", took))
        return steps
    finally:
        shutil.rmtree(root)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("dirs", nargs="*", default=["providers"])
    args = parser.parse_args()
    for case in args.cases.split(","):
        prov, n, setup = CASES[case]
        times = {}
        for _ in range(args.runs):
            for where in args.dirs:
                steps = one_round(os.path.join(where, prov), n, setup)
                for label, took in steps:
                    times.setdefault((label, where), []).append(took)
        for (label, where), took in times.items():
            print("%-13s %-24s %-24s median %6.3f s  (%.3f to %.3f)"
                  % (case, label, where if len(args.dirs) > 1 else "",
                     statistics.median(took), min(took), max(took)))


if __name__ == "__main__":
    main()
