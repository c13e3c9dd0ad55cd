#!/usr/bin/env python3
"""Crash bench for `ral apply` and its state store: SIGKILL the apply at a
random moment, and check what every crash leaves behind.

Each run works on its own fake root with the plan fixture providers
(tests/fixtures/plans: json alpha and beta, simple gamma), alternating two
manifests of 24 resources with dependencies, so that the killed apply is
creating, changing or removing. After a random delay (uniform up to 1.2
times a whole apply) the apply's process group gets SIGKILL, and then:

- every task the killed apply reported as Success on stdout (its store
  commit comes before that line) is Success in the store, and its item is
  Applied there (or gone, for a removal): nothing reported done is lost;
- the lock is free: the next `ral apply` starts at once (no --lock-timeout);
- that rerun exits 0, marks the killed plan Failed if it was left Running,
  and a `ral plan --detailed-exitcodes` afterwards exits 0 (converged), with
  every item of the manifest Applied in the store.

Run from the repository root after `cargo build --release`:

    python3 bench/crash_apply.py [--runs 200]

Prints the figures and exits 1 if any check failed.
"""
import argparse
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RAL = os.path.join(REPO, "target/release/ral")
FIXTURES = os.path.join(REPO, "tests/fixtures/plans")


def manifest(variant):
    """24 resources; the second variant changes some, drops some, adds some."""
    lines = ["beta:"]
    for i in range(8):
        if variant == 1 and i % 4 == 3:
            continue
        value = f"b{i}-v{variant if i % 2 else 0}"
        lines.append(f"  b{i}: {{value: {value}}}")
    lines.append("alpha:")
    for i in range(8):
        if variant == 1 and i % 4 == 2:
            continue
        value = f"a{i}-v{variant if i % 3 else 0}"
        lines.append(f"  a{i}: {{value: {value}, needs: b{i}}}")
    lines.append("gamma:")
    for i in range(8):
        if variant == 1 and i == 7:
            continue
        parent = "/g" if i else "/g"
        name = parent if i == 0 else f"/g/x{i}"
        lines.append(f"  {name}: {{value: g{i}-v{variant if i % 2 else 0}, needs: a{i % 8}}}")
    return "\n".join(lines) + "\n"


def ral(args, root, **kwargs):
    env = {"PATH": os.environ["PATH"], "HOME": root + ".home", "XDG_CACHE_HOME": root + ".home"}
    return subprocess.run(
        [RAL, args[0], "--root", root, "-I", FIXTURES, *args[1:]],
        env=env, capture_output=True, text=True, **kwargs
    )


def store_tasks(root, plan_id):
    db = sqlite3.connect(os.path.join(root, "var/lib/ral/state.db"))
    try:
        return dict(db.execute(
            "SELECT resource, state FROM tasks WHERE plan_id = ?", (plan_id,)).fetchall())
    finally:
        db.close()


def store_items(root):
    db = sqlite3.connect(os.path.join(root, "var/lib/ral/state.db"))
    try:
        return db.execute("SELECT type, name, state FROM items").fetchall()
    finally:
        db.close()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=200)
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="ral-crash-apply-")
    manifests = []
    for variant in (0, 1):
        path = os.path.join(work, f"m{variant}.yaml")
        with open(path, "w") as f:
            f.write(manifest(variant))
        manifests.append(path)
    # How long one whole apply takes, from empty.
    probe = os.path.join(work, "probe")
    os.makedirs(probe)
    started = time.monotonic()
    ral(["apply", manifests[0]], probe, check=True)
    whole = time.monotonic() - started
    failures = []
    killed_running = reported = 0
    for run in range(args.runs):
        root = os.path.join(work, f"r{run}")
        os.makedirs(root)
        variant = run % 2
        if variant == 1:
            # Start from the first manifest applied, so the kill hits
            # changes and removals.
            ral(["apply", manifests[0]], root, check=True)
        env = {"PATH": os.environ["PATH"], "HOME": root + ".home", "XDG_CACHE_HOME": root + ".home"}
        child = subprocess.Popen(
            [RAL, "apply", "--root", root, "-I", FIXTURES, manifests[variant]],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
            start_new_session=True,
        )
        time.sleep(random.uniform(0, 1.2 * whole))
        try:
            os.killpg(child.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        out, _ = child.communicate()
        done = [line.split()[2] for line in out.splitlines() if line.startswith("Success ")]
        reported += len(done)
        # The killed plan: the newest in the store, if it got that far.
        plan_id = None
        if os.path.exists(os.path.join(root, "var/lib/ral/state.db")):
            db = sqlite3.connect(os.path.join(root, "var/lib/ral/state.db"))
            row = db.execute("SELECT id, state FROM plans ORDER BY created DESC LIMIT 1").fetchone()
            db.close()
            if row:
                plan_id = row[0]
                killed_running += row[1] == "Running"
        if done:
            recorded = store_tasks(root, plan_id) if plan_id else {}
            for resource in done:
                if recorded.get(resource) != "Success":
                    failures.append(f"run {run}: {resource} reported Success, store says {recorded.get(resource)}")
        rerun = ral(["apply", manifests[variant]], root)
        if rerun.returncode != 0:
            failures.append(f"run {run}: the rerun exited {rerun.returncode}: {rerun.stderr[-300:]}")
            continue
        check = ral(["plan", "--detailed-exitcodes", manifests[variant]], root)
        if check.returncode != 0:
            failures.append(f"run {run}: not converged, plan exited {check.returncode}: {check.stdout[-300:]}")
        items = store_items(root)
        if any(state != "Applied" for _, _, state in items):
            failures.append(f"run {run}: items not Applied after the rerun: {items}")
        expected = sum(1 for line in manifest(variant).splitlines() if line.startswith("  "))
        if len(items) != expected:
            failures.append(f"run {run}: {len(items)} items in the store, the manifest has {expected}")
        if plan_id:
            db = sqlite3.connect(os.path.join(root, "var/lib/ral/state.db"))
            state = db.execute("SELECT state FROM plans WHERE id = ?", (plan_id,)).fetchone()[0]
            db.close()
            if state in ("Running", "Stopping"):
                failures.append(f"run {run}: the killed plan is still {state}")
    print(f"runs: {args.runs}; one whole apply: {whole:.2f} s")
    print(f"killed while the plan was Running: {killed_running}; tasks reported Success before a kill: {reported}")
    print(f"failed checks: {len(failures)}")
    for failure in failures[:20]:
        print("  " + failure)
    subprocess.run(["rm", "-rf", work])
    sys.exit(1 if failures else 0)


main()
