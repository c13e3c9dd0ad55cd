#!/usr/bin/env python3
"""Crash bench for `ral apply` and its state store: SIGKILL the apply at a
random moment, and check what every crash leaves behind.

Each run works on its own fake root with the plan fixture providers
(tests/fixtures/plans: json alpha and beta, simple gamma, and svc, a
service refreshed when alpha[a1] or alpha[a4] changes), which answer late
(each update waits up to --slow seconds before and after its change, each
refresh before it), and the demo model plugin (tests/fixtures/plugins): a
site item whose page, command and callback run whenever its content
changes, the callback taking up to --slow-callback seconds.
Two resources exist before ral ever runs (beta[p0], beta[p1]): the
manifests manage them, never create them. A run:

1. (every other run) applies the first manifest, so that the killed apply
   changes and removes as well as creates;
2. starts `ral apply` of the run's manifest in its own process group and
   SIGKILLs the group after a random delay (uniform up to a whole apply,
   the median of the last nine first applies, as the shared machine runs
   now). Its providers have groups of their own, which ral's keeper ends
   once ral is gone (SIGTERM, SIGKILL 2 s later): a provider still running
   3 s after the kill is counted as left running, and killed;
3. reruns the apply (it must exit 0), then `ral plan --detailed-exitcodes`
   must exit 0 (converged), with every item of the manifest Applied;
4. applies a manifest that drops every resource but one, and looks at what
   is left.

Per kill point (what the kill hit, from the killed plan's tasks and intents
in the store and the providers' own call log, read right after the kill) it
counts:

- leaked: after the drop, a resource ral created (not one that existed
  before) that no manifest lists still exists;
- wrongly removed: a resource that existed before ral is gone;
- not converged: the rerun failed, or the plan after it has changes, or an
  item is not Applied, or a task reported Success on stdout is not Success
  in the store;
- store integrity: `PRAGMA integrity_check` is not `ok` (after the kill and
  at the end);
- refresh lost: in a run that changes alpha[a1] (the second variant), the
  service was never refreshed by the end of the rerun, or the store still
  owes it a refresh then;

and, apart, the providers and callbacks left running 3 s after the kill
(ral's keeper should have ended them all).

Run from the repository root after `cargo build --release`:

    python3 bench/crash_apply.py [--runs 200] [--slow 0.02] [--seed N] [--ral PATH]

Prints a markdown table and exits 1 if any count is not 0.
"""
import argparse
import collections
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
PLUGINS = os.path.join(REPO, "tests/fixtures/plugins")
STEMS = ("alpha", "beta", "gamma")
# Resources that exist before ral: (stem, name) -> their record.
BEFORE = {
    ("beta", "p0"): {"ensure": "present", "value": "theirs"},
    ("beta", "p1"): {"ensure": "present", "value": "theirs"},
}


def manifest(variant):
    """24 resources and the two that existed before; the second variant
    changes some, drops some (p1 among them), adds some."""
    lines = ["beta:", "  p0: {value: ours}"]
    if variant == 0:
        lines.append("  p1: {value: ours}")
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
    if variant == 1:
        lines.append("  a9: {value: new}")
    lines.append("gamma:")
    for i in range(8):
        if variant == 1 and i == 7:
            continue
        name = "/g" if i == 0 else f"/g/x{i}"
        lines.append(f"  {name}: {{value: g{i}-v{variant if i % 2 else 0}, needs: a{i % 8}}}")
    # Refreshed when a1 (changed by the second variant) or a4 changes.
    lines.append("svc:")
    lines.append("  web: {value: w, subscribe: ['alpha[a1]', 'alpha[a4]']}")
    lines.append("site:")
    lines.append(f"  shop: {{dir: /www, content: page-v{variant}}}")
    return "\n".join(lines) + "\n"


# What is left once everything else is dropped.
DROP = "alpha:\n  keep: {value: k}\n"


# One home for every run: the providers' metadata cache stays warm.
HOME = tempfile.mkdtemp(prefix="ral-crash-home-")


def env_for(root):
    return {"PATH": os.environ["PATH"], "HOME": HOME, "XDG_CACHE_HOME": HOME}


def ral(args, root):
    return subprocess.run(
        [RAL, args[0], "--root", root, "-I", FIXTURES, "-I", PLUGINS, *args[1:]],
        env=env_for(root), capture_output=True, text=True,
    )


def db_path(root):
    return os.path.join(root, "var/lib/ral/state.db")


def query(root, sql, *params):
    db = sqlite3.connect(db_path(root))
    try:
        return db.execute(sql, params).fetchall()
    finally:
        db.close()


def refreshes_logged(root):
    """How many refreshes of svc[web] the fixture logged."""
    try:
        with open(os.path.join(root, "refreshed.log")) as f:
            return sum(1 for line in f if line.startswith("svc web "))
    except FileNotFoundError:
        return 0


def resources(root):
    """Every resource the fixture stores hold: {(stem, name): record}."""
    found = {}
    for stem in STEMS:
        try:
            with open(os.path.join(root, stem + ".json")) as f:
                for name, record in json.load(f).items():
                    found[(stem, name)] = record
        except FileNotFoundError:
            pass
    return found


def orphans(root):
    """Providers a killed ral left running for this root."""
    marker = ("RALSH_ROOT_DIR=" + root).encode()
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                if marker in f.read().split(b"\0"):
                    pids.append(int(entry))
        except OSError:
            pass
    return pids


def end_orphans(root):
    """Gives the providers a killed ral left 3 s to be ended by its keeper,
    then kills those still running; returns how many there were."""
    deadline = time.monotonic() + 3
    while orphans(root) and time.monotonic() < deadline:
        time.sleep(0.02)
    left = orphans(root)
    while True:
        for pid in orphans(root):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if not orphans(root):
            return len(left)
        time.sleep(0.02)


def open_calls(calls):
    """Per stem, the call begun and not ended: (action, names) or None."""
    state = {}
    for line in calls:
        words = line.split()
        if len(words) >= 3 and words[1] == "begin":
            state[words[0]] = (words[2], words[3].split(",") if len(words) > 3 else [])
        elif len(words) >= 3 and words[1] == "end":
            state[words[0]] = None
    return state


def last_update(calls, stem):
    """The names of the last update call of a stem that ended."""
    names, ended = None, False
    for line in calls:
        words = line.split()
        if words[0] != stem or len(words) < 3:
            continue
        if words[1] == "begin" and words[2] in ("set", "update"):
            names, ended = words[3].split(",") if len(words) > 3 else [], False
        elif words[1] == "end" and words[2] in ("set", "update"):
            ended = True
    return set(names or []) if ended else set()


def kill_point(root, plan_id, calls):
    """What the kill hit, from the store and the providers' log."""
    if plan_id is None:
        return "reading and planning (no plan recorded)"
    (state,) = query(root, "SELECT state FROM plans WHERE id = ?", plan_id)[0]
    if state not in ("Running", "Stopping"):
        return "after the plan's end was recorded"
    tasks = query(root, "SELECT resource, state FROM tasks WHERE plan_id = ?", plan_id)
    running = [r for r, s in tasks if s == "Running"]
    intents = {r for (r,) in query(root, "SELECT resource FROM intents WHERE plan_id = ?", plan_id)}
    opened = open_calls(calls)
    if any(c and c[0] in ("set", "update") for c in opened.values()):
        return "during a provider's call"
    if any(c and c[0] == "refresh" for c in opened.values()):
        return "during a refresh"
    if any(r.split("[", 1)[0] not in STEMS + ("svc",) for r in running):
        return "during a plugin's task (page, command, callback)"
    if running:
        stems = {r.split("[", 1)[0] for r in running}
        if any(opened.get(s) for s in stems):
            return "task started, reading again before the call"
        recorded = [r for r in running if r in intents]
        answered = [
            r for r in recorded
            if r.split("[", 1)[1][:-1] in last_update(calls, r.split("[", 1)[0])
        ]
        if answered:
            return "after the change, before its record"
        if recorded:
            return "intent recorded, before the call"
        return "task started, no intent yet"
    if any(s == "Initial" for _, s in tasks):
        return "between tasks"
    return "verification"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--slow", type=float, default=0.02)
    parser.add_argument("--slow-callback", type=float, default=0.2)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--ral", default=None, help="the ral binary (default: the release build)")
    args = parser.parse_args()
    global RAL
    RAL = args.ral or RAL
    rng = random.Random(args.seed)
    work = tempfile.mkdtemp(prefix="ral-crash-apply-")
    manifests = []
    for variant in (0, 1):
        path = os.path.join(work, f"m{variant}.yaml")
        with open(path, "w") as f:
            f.write(manifest(variant))
        manifests.append(path)
    drop = os.path.join(work, "drop.yaml")
    with open(drop, "w") as f:
        f.write(DROP)

    def seed(root):
        os.makedirs(root)
        stores = collections.defaultdict(dict)
        for (stem, name), record in BEFORE.items():
            stores[stem][name] = record
        for stem, records in stores.items():
            with open(os.path.join(root, stem + ".json"), "w") as f:
                json.dump(records, f)
        with open(os.path.join(root, "slow"), "w") as f:
            f.write(str(args.slow))
        with open(os.path.join(root, "slow-callback"), "w") as f:
            f.write(str(args.slow_callback))
        os.makedirs(os.path.join(root, "www"))
        os.makedirs(os.path.join(root, "marks"))

    # How long one whole apply takes, from what existed before (the first
    # probe fills the metadata cache).
    whole = 0
    for probe in ("probe0", "probe1"):
        probe = os.path.join(work, probe)
        seed(probe)
        started = time.monotonic()
        ral(["apply", manifests[0]], probe).check_returncode()
        whole = time.monotonic() - started
    recent = [whole]
    counts = collections.defaultdict(collections.Counter)
    problems = []
    bench_started = time.monotonic()
    for run in range(args.runs):
        root = os.path.join(work, f"r{run}")
        seed(root)
        variant = run % 2
        if variant == 1:
            started = time.monotonic()
            first = ral(["apply", manifests[0]], root)
            # A whole apply as the machine runs now (it is shared).
            recent = (recent + [time.monotonic() - started])[-9:]
            whole = sorted(recent)[len(recent) // 2]
            if first.returncode != 0:
                problems.append(f"run {run}: the first apply exited {first.returncode}: {first.stderr[-300:]}")
                continue
        try:
            os.remove(os.path.join(root, "calls.log"))
        except FileNotFoundError:
            pass
        refreshed_before = refreshes_logged(root)
        child = subprocess.Popen(
            [RAL, "apply", "--root", root, "-I", FIXTURES, "-I", PLUGINS, manifests[variant]],
            env=env_for(root), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
            start_new_session=True,
        )
        time.sleep(rng.uniform(0, whole))
        try:
            os.killpg(child.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        out, _ = child.communicate()
        # The providers' log as it was when ral died.
        try:
            with open(os.path.join(root, "calls.log")) as f:
                calls = f.read().splitlines()
        except FileNotFoundError:
            calls = []
        plan_id = None
        if os.path.exists(db_path(root)):
            rows = query(root, "SELECT id, state FROM plans ORDER BY created DESC LIMIT 1")
            if rows and (variant == 0 or len(query(root, "SELECT id FROM plans")) > 1):
                plan_id = rows[0][0]
        point = kill_point(root, plan_id, calls) if os.path.exists(db_path(root)) else \
            "reading and planning (no plan recorded)"
        tally = counts[point]
        tally["kills"] += 1
        tally["providers left running"] += end_orphans(root)

        def fail(kind, message):
            tally[kind] += 1
            problems.append(f"run {run} ({point}): {kind}: {message}")

        if os.path.exists(db_path(root)):
            (integrity,) = query(root, "PRAGMA integrity_check")[0]
            if integrity != "ok":
                fail("store integrity", integrity)
        done = [line.split()[2] for line in out.splitlines() if line.startswith("Success ")]
        if done and plan_id:
            recorded = dict(query(root, "SELECT resource, state FROM tasks WHERE plan_id = ?", plan_id))
            for resource in done:
                if recorded.get(resource) != "Success":
                    fail("not converged", f"{resource} reported Success, store says {recorded.get(resource)}")
        rerun = ral(["apply", manifests[variant]], root)
        if rerun.returncode != 0:
            fail("not converged", f"the rerun exited {rerun.returncode}: {rerun.stderr[-300:]}")
        else:
            check = ral(["plan", "--detailed-exitcodes", manifests[variant]], root)
            if check.returncode != 0:
                fail("not converged", f"plan exited {check.returncode}: {check.stdout[-300:]}")
            items = query(root, "SELECT type, name, state FROM items")
            if any(state != "Applied" for _, _, state in items):
                fail("not converged", f"items not Applied after the rerun: {items}")
            owed = query(root, "SELECT resource FROM refreshes")
            if owed:
                fail("refresh lost", f"still owed after the rerun: {owed}")
            if variant == 1 and refreshes_logged(root) == refreshed_before:
                fail("refresh lost", "alpha[a1] changed and svc[web] was never refreshed")
        for key in BEFORE:
            if key not in resources(root):
                fail("wrongly removed", f"{key[0]}[{key[1]}] after the rerun")
        dropped = ral(["apply", "--destroy", drop], root)
        if dropped.returncode != 0:
            fail("not converged", f"the drop exited {dropped.returncode}: {dropped.stderr[-300:]}")
        left = resources(root)
        for key in left:
            if key not in BEFORE and key != ("alpha", "keep"):
                fail("leaked", f"{key[0]}[{key[1]}] still exists after the drop")
        for key in BEFORE:
            if key not in left:
                fail("wrongly removed", f"{key[0]}[{key[1]}] after the drop")
        (integrity,) = query(root, "PRAGMA integrity_check")[0]
        if integrity != "ok":
            fail("store integrity", integrity)
        subprocess.run(["rm", "-rf", root])
        if (run + 1) % 10 == 0:
            print(f"{run + 1} runs, {len(problems)} problems, {time.monotonic() - bench_started:.0f} s",
                  file=sys.stderr, flush=True)
    elapsed = time.monotonic() - bench_started
    kinds = ["leaked", "wrongly removed", "not converged", "store integrity", "refresh lost"]
    print(f"runs: {args.runs}; one whole apply at the end: {whole:.2f} s; bench: {elapsed:.0f} s; "
          f"provider delay up to {args.slow} s before and after each change")
    print()
    print("| kill point | kills | providers and callbacks left running | " + " | ".join(kinds) + " |")
    print("|---|---|---|" + "---|" * len(kinds))
    total = collections.Counter()
    for point in sorted(counts, key=lambda p: -counts[p]["kills"]):
        tally = counts[point]
        total.update(tally)
        print(f"| {point} | {tally['kills']} | {tally['providers left running']} | "
              + " | ".join(str(tally[k]) for k in kinds) + " |")
    print(f"| **all** | {total['kills']} | {total['providers left running']} | "
          + " | ".join(str(total[k]) for k in kinds) + " |")
    if problems:
        print()
        print(f"{len(problems)} problems; the first 20:")
        for problem in problems[:20]:
            print("  " + problem)
    subprocess.run(["rm", "-rf", work, HOME])
    sys.exit(1 if problems else 0)


main()
