#!/usr/bin/env python3
"""Benchmark: what the engine costs per task of a model plugin (issue 27).

Uses bench/plugins/plugins/bulk.plugin, a plugin whose item `bulk` expands
into CONFIG config tasks of the bench's nop provider (bench/providers/nop:
one get answers every name with value 'old', its set changes nothing) and
CALLBACKS callbacks of the plugin itself, answered by sh at once. Nothing
in a task does work, so what an apply costs beyond the plugin's and the
provider's own calls is the engine's. Every run is below a fresh fake
root (a temporary directory), so every item is Initial and every task
runs; the real system is never touched.

1. `ral apply --jobs 1` of T tasks (200 and 1,000 by default), each T in
   four shapes, side by side in one run:
   - T resources of nop written directly in a manifest (no plugin);
   - T/5 bulk items of 5 config tasks each;
   - T/5 bulk items of 4 config tasks and 1 callback each;
   - T/5 bulk items of 5 callbacks each.
   Each shape is applied once with its calls recorded (the plugin and the
   provider save each call's stdin below ROOT/calls), then timed; the
   recorded calls are then replayed by hand, the plugin's
   (create_configuration and the callbacks) and the provider's apart, one
   bash loop each, as plan.sh replays nop's. (apply - plugin - provider)
   / T is what the engine adds per task.
2. `ral plan` of 1,000 bulk items expanding into 5,000 tasks (and of a
   smaller and a larger model, to see whether the time per task stays
   flat), in two plugin shapes (5 config tasks per item; 4 config tasks and
   1 callback), against `ral plan` of the same number of nop resources in
   a manifest: median wall time and peak RSS, and create_configuration
   alone on the model document ral sent it.

3. Dense answers (issue 38): `ral plan` of one bulk item of N config
   tasks each requiring every one before it, N (N - 1) / 2 requirements
   (N = 500 to 2,000 by default, 2,000 holding just under the 2,000,000
   an answer may hold), and of one of N = 3,900 (about 7.6 million, some
   57 MB of answer), which ral refuses: median wall time, peak RSS, the
   answer's size and the plugin alone on the model ral sent it. With
   --before RAL (another build, e.g. of the commit before a change), the
   same plans by that binary beside them (3,900 once each: it took
   half a minute and 2 GB before answers were bounded). Each size is also
   planned with every other task unchanged (the plugin asks for the value
   nop reads already), so that the others wait through unchanged items.

4. Requirements that fan out (issue 38): `ral plan` of two bulk items of
   N config tasks each, every task of the second requiring the first by
   its vpath (/bulk/b00000): N requirements written, N x N waits, as
   each waits for every task of the item (N = 500 to 1,400 by default,
   under the 2,000,000 waits a plan may gain; 2,000 and 5,000 beyond it,
   refused, timed once): median wall time, peak RSS, the size of the
   plan's text and of its JSON (`--json`, once), beside --before's. Part
   4 alone (--fanout-only) writes its own section, plugins_fanout.

Peak RSS is what /usr/bin/time reports for the ral process: the largest
of ral and the children it waited for (the plugin, the provider), so the
plugin's own peak is shown beside it. Wall time is taken around
/usr/bin/time (a millisecond or so more than ral alone, the same for
every shape); CPU time is that of ral and its children.

Run from the repository root after `cargo build --release`:

    python3 bench/plugins.py [--tasks 200,1000] [--repeat 7]
                             [--plan-items 200,1000,2000,4000]
                             [--dense 500,1000,1500,2000] [--refused 3900]
                             [--fanout 500,1000,1400] [--fanout-refused 2000,5000]
                             [--before PATH_TO_ANOTHER_RAL] [--fanout-only]

Writes the plugins section of BENCHMARKS.md (parts 1 to 3) and the
plugins_fanout section (part 4) (bench/section.py).
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import section  # noqa: E402

BENCH = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(BENCH)
RAL = os.path.join(ROOT, "target", "release", "ral")
PLUGIN = os.path.join(BENCH, "plugins", "plugins", "bulk.plugin")
PROVIDER = os.path.join(BENCH, "providers", "nop.prov")
TIME = "/usr/bin/time"
# The PATH ral's children and the replays get: the system's, so that a
# Python version manager's shim ahead of /usr/bin/python3 adds its own
# start-up to no call.
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# The most requirements an answer may hold (src/plugin/task.rs).
MAX_REQUIREMENTS = 2000000
# The tasks of one bulk item, in each plugin shape: (config, callbacks).
PER_ITEM = 5
SHAPES = [
    ("manifest", None, "nop resources in a manifest, no plugin"),
    ("config", (5, 0), "bulk items of 5 config tasks"),
    ("mixed", (4, 1), "bulk items of 4 config tasks and 1 callback"),
    ("callbacks", (0, 5), "bulk items of 5 callbacks"),
]
# Part 2's: the first three, and items that expand into no task at all, to
# tell what the planning time grows with (the items or their tasks).
PLAN_SHAPES = SHAPES[:3] + [("empty", (0, 0), "bulk items of no task")]


# ------------------------------------------------------------ the models


def item_name(i):
    return "b%05d" % i


def title(i, task):
    """The nop resource bulk.plugin makes for task TASK of item I (the
    item name's digits, then the task's number), so that a manifest of
    the same resources names the same ones."""
    return "t%05d%03d" % (i, task)


def write_model(path, shape, tasks):
    """A manifest of TASKS tasks in SHAPE: nop resources, or bulk items."""
    items = tasks // PER_ITEM
    with open(path, "w") as out:
        if shape is None:
            out.write("nop:\n")
            for i in range(items):
                for task in range(PER_ITEM):
                    out.write("  %s: {value: new}\n" % title(i, task))
        else:
            config, callbacks = shape
            out.write("bulk:\n")
            for i in range(items):
                out.write("  %s: {config: %d, callbacks: %d}\n"
                          % (item_name(i), config, callbacks))


# ------------------------------------------------------------ measuring


def env_of(work):
    return {"PATH": PATH, "XDG_CACHE_HOME": os.path.join(work, "cache"),
            "HOME": os.path.join(work, "home"), "LC_ALL": "C"}


def timed(argv, env, expect=0):
    """One run: (wall s, CPU s of the process and its waited-for children,
    peak RSS MiB, stdout). Another exit status ends the bench.

    The peak RSS is what /usr/bin/time reports (its wait4 of the command):
    a process this Python starts itself inherits, through fork and exec,
    the high-water mark of the Python process, which would hide a small
    figure; /usr/bin/time is small."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, \
            tempfile.NamedTemporaryFile("r") as rss:
        start = time.perf_counter()
        proc = subprocess.Popen([TIME, "-f", "%M", "-o", rss.name] + argv,
                                stdout=out, stderr=err, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        out.seek(0)
        err.seek(0)
        code = os.waitstatus_to_exitcode(status)
        if code != expect:
            sys.exit("bench: %s exited %d, expected %d: %s"
                     % (" ".join(argv[:2]), code, expect, err.read().decode()[-2000:]))
        # With a non-zero status, time writes "Command exited ..." first.
        peak = int(rss.read().split()[-1]) / 1024.0
        return (wall, usage.ru_utime + usage.ru_stime, peak, out.read().decode(),
                err.read().decode())


def ral(command, root, manifest, binary=RAL, detailed=True):
    argv = [binary, command] + (["--detailed-exitcodes"] if detailed else []) + [
        "-I", BENCH, "-I", os.path.join(BENCH, "plugins"), "--root", root]
    if command == "apply":
        argv += ["--jobs", "1"]
    return argv + [manifest]


def fresh(path):
    """An empty fake root: no store, so every item is Initial."""
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)


def check_summary(stdout, wanted):
    summary = stdout.rstrip().rsplit("\n", 1)[-1]
    if wanted not in summary:
        sys.exit("bench: unexpected summary %r, wanted %r" % (summary, wanted))


def check_applied(stdout, tasks):
    """`Apply complete: 800 changed, 200 run; 0 unchanged (...)`: every
    one of TASKS tasks done, none failed."""
    summary = stdout.rstrip().rsplit("\n", 1)[-1]
    done = summary.partition("Apply complete: ")[2].partition(";")[0]
    counts = [int(part.split()[0]) for part in done.split(", ") if part[:1].isdigit()]
    if sum(counts) != tasks or "failed" in done:
        sys.exit("bench: unexpected summary %r, wanted %d tasks done" % (summary, tasks))


class Runs:
    """Several timed runs of one thing: median wall and CPU, largest RSS."""

    def __init__(self, samples):
        self.wall = statistics.median(s[0] for s in samples)
        self.cpu = statistics.median(s[1] for s in samples)
        self.peak = max(s[2] for s in samples)
        self.count = len(samples)


def replay_script(work):
    """A bash loop running recorded calls one after another, as ral does
    (one fork and exec each), so that it is timed as one process."""
    path = os.path.join(work, "replay.sh")
    with open(path, "w") as out:
        out.write('for f in "$@"; do a=${f##*/}; "$PROGRAM" "ral_action=${a%%.*}" '
                  '< "$f" > /dev/null || exit 1; done\n')
    return path


def replay(work, program, files, repeat):
    """The recorded calls FILES of PROGRAM run by hand, REPEAT times, in an
    environment as scrubbed as ral's."""
    if not files:
        return None
    root = os.path.join(work, "replay-root")
    samples = []
    for _ in range(repeat):
        fresh(root)
        env = {"PATH": PATH, "RALSH_ROOT_DIR": root, "PROGRAM": program}
        samples.append(timed(["bash", replay_script(work)] + files, env)[:3])
    return Runs(samples)


def recorded(calls, *actions):
    return sorted(os.path.join(calls, f) for f in os.listdir(calls)
                  if f.split(".", 1)[0] in actions)


def apply_shape(work, name, shape, tasks, repeat):
    """Part 1 for one shape and size: the apply, then its calls by hand."""
    manifest = os.path.join(work, "%s-%d.yaml" % (name, tasks))
    write_model(manifest, shape, tasks)
    env = env_of(work)
    root = os.path.join(work, "root")
    callbacks = 0 if shape is None else shape[1] * (tasks // PER_ITEM)
    # --detailed-exitcodes: 2 when resources changed; callbacks change none.
    expect = 0 if shape is not None and shape[0] == 0 else 2
    # Once with the calls recorded (and the metadata cache warm), untimed.
    fresh(root)
    os.mkdir(os.path.join(root, "calls"))
    check_applied(timed(ral("apply", root, manifest), env, expect)[3], tasks)
    calls = os.path.join(work, "calls-%s-%d" % (name, tasks))
    shutil.rmtree(calls, ignore_errors=True)
    os.rename(os.path.join(root, "calls"), calls)
    samples = []
    for _ in range(repeat):
        fresh(root)
        run = timed(ral("apply", root, manifest), env, expect)
        check_applied(run[3], tasks)
        samples.append(run[:3])
    configure = recorded(calls, "create_configuration")
    called = recorded(calls, "callback")
    if len(called) != callbacks:
        sys.exit("bench: %d callbacks recorded, %d expected" % (len(called), callbacks))
    provider = recorded(calls, "get", "set")
    result = {
        "apply": Runs(samples),
        "configure": replay(work, PLUGIN, configure, repeat),
        "callbacks": replay(work, PLUGIN, called, repeat),
        "provider": replay(work, PROVIDER, provider, repeat),
        "provider_calls": len(provider),
        "callback_calls": len(called),
        "callback_bytes": os.path.getsize(called[0]) if called else 0,
    }
    return result


def plan_shape(work, name, shape, items, repeat):
    """Part 2 for one shape and size: `ral plan`, and create_configuration
    by hand on the model document ral sent it."""
    manifest = os.path.join(work, "plan-%s-%d.yaml" % (name, items))
    write_model(manifest, shape, items * PER_ITEM)
    env = env_of(work)
    root = os.path.join(work, "root")
    config = items * PER_ITEM if shape is None else shape[0] * items
    runs = 0 if shape is None else shape[1] * items
    wanted = "Plan: 0 to create, %d to change, 0 to remove" % config
    # --detailed-exitcodes: 2 when changes are pending.
    expect = 2 if config else 0
    fresh(root)
    os.mkdir(os.path.join(root, "calls"))
    check_summary(timed(ral("plan", root, manifest), env, expect)[3], wanted)
    calls = os.path.join(work, "plan-calls")
    shutil.rmtree(calls, ignore_errors=True)
    os.rename(os.path.join(root, "calls"), calls)
    samples = []
    for _ in range(repeat):
        fresh(root)
        run = timed(ral("plan", root, manifest), env, expect)
        check_summary(run[3], wanted)
        if runs and "%d to run" % runs not in run[3].rstrip().rsplit("\n", 1)[-1]:
            sys.exit("bench: the plan does not run %d callbacks" % runs)
        samples.append(run[:3])
    return {"plan": Runs(samples),
            "configure": replay(work, PLUGIN, recorded(calls, "create_configuration"),
                                repeat)}


def write_dense(path, tasks, steady=False):
    """A manifest of one bulk item of TASKS config tasks, each requiring
    every one before it; with STEADY, every other one plans no change."""
    with open(path, "w") as out:
        out.write("bulk:\n  %s: {config: %d, callbacks: 0, dense: true, steady: %s}\n"
                  % (item_name(0), tasks, "true" if steady else "false"))


def requirements(tasks):
    return tasks * (tasks - 1) // 2


def dense_shape(work, tasks, repeat, binary, refused, steady=False):
    """Part 3 for one size, shape and binary: `ral plan`, refused or
    planning its changes (TASKS, or half with STEADY)."""
    manifest = os.path.join(work, "dense-%d.yaml" % tasks)
    write_dense(manifest, tasks, steady)
    env = env_of(work)
    root = os.path.join(work, "root")

    def once():
        fresh(root)
        if refused:
            run = timed(ral("plan", root, manifest, binary, detailed=False), env, 2)
            if "requirements (entries of requires" not in run[4]:
                sys.exit("bench: %d dense tasks not refused as expected: %s"
                         % (tasks, run[4][-500:]))
        else:
            run = timed(ral("plan", root, manifest, binary), env, 2)
            changed = (tasks + 1) // 2 if steady else tasks
            check_summary(run[3], "Plan: 0 to create, %d to change" % changed)
        return run[:3]

    samples = [once() for _ in range(repeat)]
    return Runs(samples)


def dense_answer(work, tasks, repeat):
    """The answer's size in bytes, and create_configuration alone on the
    model document ral sent (recorded by a plan of this build)."""
    manifest = os.path.join(work, "dense-%d.yaml" % tasks)
    write_dense(manifest, tasks)
    env = env_of(work)
    root = os.path.join(work, "root")
    fresh(root)
    os.mkdir(os.path.join(root, "calls"))
    timed(ral("plan", root, manifest, detailed=False), env,
          2 if requirements(tasks) > MAX_REQUIREMENTS else 0)
    calls = os.path.join(work, "dense-calls")
    shutil.rmtree(calls, ignore_errors=True)
    os.rename(os.path.join(root, "calls"), calls)
    recorded_input = recorded(calls, "create_configuration")
    with open(recorded_input[0], "rb") as given:
        size = len(subprocess.run([PLUGIN, "ral_action=create_configuration"], stdin=given,
                                  capture_output=True, check=True,
                                  env={"PATH": PATH, "RALSH_ROOT_DIR": root}).stdout)
    return size, replay(work, PLUGIN, recorded_input, repeat)


def write_fanout(path, tasks):
    """A manifest of two bulk items of TASKS config tasks, every task of
    the second requiring the first."""
    with open(path, "w") as out:
        out.write("bulk:\n  %s: {config: %d, callbacks: 0}\n" % (item_name(0), tasks))
        out.write("  %s: {config: %d, callbacks: 0, after: /bulk/%s}\n"
                  % (item_name(1), tasks, item_name(0)))


def fanout_waits(tasks):
    """The waits gained beyond the TASKS requirements written."""
    return tasks * tasks - tasks


def fanout_shape(work, tasks, repeat, binary, refused, json=False):
    """Part 4 for one size and binary: `ral plan` (with JSON, `--json`),
    refused or planning 2 x TASKS creations; also the size of its output."""
    manifest = os.path.join(work, "fanout-%d.yaml" % tasks)
    write_fanout(manifest, tasks)
    env = env_of(work)
    root = os.path.join(work, "root")

    def once():
        fresh(root)
        argv = ral("plan", root, manifest, binary, detailed=False)
        if json:
            argv.insert(2, "--json")
        run = timed(argv, env, 2 if refused else 0)
        if refused and "beyond the requirements written" not in run[4]:
            sys.exit("bench: %d fanned-out tasks not refused as expected: %s"
                     % (tasks, run[4][-500:]))
        if not refused and not json:
            check_summary(run[3], "Plan: 0 to create, %d to change" % (2 * tasks))
        return run[:3] + (len(run[3].encode()),)

    samples = [once() for _ in range(repeat)]
    runs = Runs(samples)
    runs.output = samples[0][3]
    return runs


def fanout_part(work, sizes, refused, repeat, before):
    """Part 4: each size by this build (text and JSON) and by BEFORE."""
    fanout = {}
    for tasks in sizes + refused:
        is_refused = tasks in refused
        count = 1 if is_refused else repeat
        f = {"after": fanout_shape(work, tasks, count, RAL, is_refused),
             "after_json": fanout_shape(work, tasks, 1, RAL, is_refused, json=True)}
        if before:
            f["before"] = fanout_shape(work, tasks, count, before, False)
            f["before_json"] = fanout_shape(work, tasks, 1, before, False, json=True)
        fanout[tasks] = f
        print("fanout %5d tasks %10d waits %8.3f s %7.1f MiB%s"
              % (tasks, fanout_waits(tasks), f["after"].wall, f["after"].peak,
                 "  before %8.3f s %7.1f MiB" % (f["before"].wall, f["before"].peak)
                 if before else ""), flush=True)
    return fanout


# ------------------------------------------------------------ the section


def ms(seconds):
    return "%.1f ms" % (seconds * 1000) if seconds < 1 else "%.2f s" % seconds


def us(seconds):
    return "%.0f µs" % (seconds * 1e6)


def by_hand(r):
    """The plugin's and the provider's calls by hand, as (wall, CPU)."""
    parts = [x for x in (r["configure"], r["callbacks"], r["provider"]) if x]
    return sum(x.wall for x in parts), sum(x.cpu for x in parts)


def engine_per_task(r, tasks, cpu=False):
    """(apply - the calls by hand) / TASKS, in wall or CPU time."""
    wall, used = by_hand(r)
    if cpu:
        return (r["apply"].cpu - used) / tasks
    return (r["apply"].wall - wall) / tasks


def signed(seconds):
    return ("+" if seconds >= 0 else "-") + us(abs(seconds))


def apply_table(results, sizes, repeat):
    out = ["`ral apply --jobs 1` (release build) of T tasks on a fresh fake root, "
           "in four shapes of the same T tasks; medians of %d runs. *By hand* is "
           "the same calls the apply made, recorded once and replayed one after "
           "another by a bash loop (median of %d runs each): the plugin's (one "
           "create_configuration, and one start of the plugin per callback) and "
           "the nop provider's (get, set, and the get that verifies). *Engine per "
           "task* is (apply - plugin by hand - provider by hand) / T, in wall "
           "time and in CPU time (user and system, of ral or the bash loop and "
           "the processes they waited for: steadier than wall time on a shared "
           "machine, but blind to waits such as fsync); ral's start-up and its "
           "plan are in it, spread over the T tasks." % (repeat, repeat), "",
           "| T | shape | apply (wall) | apply per task | plugin by hand "
           "| provider by hand | engine per task (wall) | engine per task (CPU) |",
           "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for tasks in sizes:
        for name, shape, label in SHAPES:
            r = results[(name, tasks)]
            items = tasks // PER_ITEM
            what = "{:,} {}".format(tasks if shape is None else items, label)
            parts = []
            if r["configure"]:
                parts.append("create_configuration %s" % ms(r["configure"].wall))
            if r["callbacks"]:
                parts.append("{:,} callbacks {}".format(r["callback_calls"],
                                                         ms(r["callbacks"].wall)))
            provider = ("%d calls %s" % (r["provider_calls"], ms(r["provider"].wall))
                        if r["provider"] else "-")
            out.append("| {:,} | {} | {} | {} | {} | {} | {} | {} |".format(
                tasks, what, ms(r["apply"].wall), us(r["apply"].wall / tasks),
                ", ".join(parts) or "-", provider, us(engine_per_task(r, tasks)),
                us(engine_per_task(r, tasks, cpu=True))))
    return out


def apply_sentences(results, sizes):
    out = []
    for tasks in sizes:
        base = engine_per_task(results[("manifest", tasks)], tasks)
        config = engine_per_task(results[("config", tasks)], tasks)
        calls = results[("callbacks", tasks)]
        callback = engine_per_task(calls, tasks)
        base_cpu = engine_per_task(results[("manifest", tasks)], tasks, cpu=True)
        config_cpu = engine_per_task(results[("config", tasks)], tasks, cpu=True)
        callback_cpu = engine_per_task(calls, tasks, cpu=True)
        per_call = calls["callbacks"].wall / calls["callback_calls"]
        out.append(
            "At {:,} tasks the engine costs, in wall time (CPU time), {} ({}) per "
            "resource of a manifest, {} ({}) per config task of a plugin ({} ({}) "
            "against the resource) and {} ({}) per callback ({} ({})), on top of "
            "the {} a start of the plugin takes per callback by hand; each "
            "callback's input document holds the whole model, {:,} bytes here.".format(
                tasks, us(base), us(base_cpu), us(config), us(config_cpu),
                signed(config - base), signed(config_cpu - base_cpu),
                us(callback), us(callback_cpu), signed(callback - base),
                signed(callback_cpu - base_cpu), us(per_call),
                calls["callback_bytes"]))
    return out


def plan_table(plans, items_list, repeat):
    out = ["`ral plan` (release build) of bulk items of 5 tasks each (and of items "
           "of no task), on a fresh fake root, against `ral plan` of as many nop "
           "resources written in a manifest; median wall time of %d runs, peak "
           "RSS the largest of the runs (ral's, or a child's when larger). "
           "create_configuration alone is the plugin run by hand on the model "
           "document ral sent it (median of %d runs, and its own peak RSS)."
           % (repeat, repeat), "",
           "| items | model | tasks | `ral plan` | per task | peak RSS "
           "| create_configuration alone |",
           "| --- | --- | --- | --- | --- | --- | --- |"]
    for items in items_list:
        for name, shape, label in PLAN_SHAPES:
            p = plans[(name, items)]
            tasks = items * PER_ITEM if shape is None else items * sum(shape)
            conf = p["configure"]
            out.append("| {:,} | {:,} {} | {:,} | {} | {} | {:.1f} MiB | {} |".format(
                items, tasks if shape is None else items, label, tasks,
                ms(p["plan"].wall), us(p["plan"].wall / tasks) if tasks else "-",
                p["plan"].peak,
                "%s, %.1f MiB" % (ms(conf.wall), conf.peak) if conf else "-"))
    return out


def plan_sentences(plans, items_list):
    out = []
    if 1000 in items_list:
        m, c, x = (plans[(n, 1000)] for n in ("manifest", "config", "mixed"))
        top = max(c["configure"].peak, x["configure"].peak)
        out.append(
            "A model of 1,000 plugin items expanding into 5,000 tasks plans in {} "
            "(5,000 config tasks; {} with 4,000 config tasks and 1,000 callbacks), "
            "against {} for the same 5,000 resources written in a manifest ({:.1f} "
            "times); peak RSS {:.1f} MiB ({:.1f} MiB) against {:.1f} MiB, {}.".format(
                ms(c["plan"].wall), ms(x["plan"].wall), ms(m["plan"].wall),
                c["plan"].wall / m["plan"].wall, c["plan"].peak, x["plan"].peak,
                m["plan"].peak,
                "ral's own: the plugin alone peaks at {:.1f} MiB".format(top)
                if top < min(c["plan"].peak, x["plan"].peak)
                else "where the plugin alone peaks at {:.1f} MiB".format(top)))
    if len(items_list) >= 2:
        for name, shape, label in PLAN_SHAPES:
            per_task = shape is None or sum(shape) > 0
            count = [i * PER_ITEM if shape is None else i * (sum(shape) or 1)
                     for i in items_list]
            per = [plans[(name, i)]["plan"].wall / n for i, n in zip(items_list, count)]
            unit = "task" if per_task else "item"
            # Each step against the one before: at the smallest size the
            # start-up still weighs on the time per task.
            steps = ["{:.2f} times from {:,} to {:,} items".format(
                b / a, i, j) for a, b, i, j in zip(per, per[1:], items_list,
                                                  items_list[1:])]
            out.append("Planning time per {}, {}: {} ({}{}).".format(
                unit, label,
                ", ".join("{} at {:,} {}s".format(us(t), n, unit)
                          for t, n in zip(per, count)),
                ", ".join(steps),
                ": it grows with the size of the model"
                if per[-1] > 1.3 * per[-2] else ""))
    return out


def mib(value):
    return "%.0f MiB" % value if value >= 100 else "%.1f MiB" % value


def dense_table(dense, sizes, refused, repeat, before):
    heads = "| N | requirements | answer | plugin alone | `ral plan` | peak RSS |"
    rule = "| --- | --- | --- | --- | --- | --- |"
    if before:
        heads += " before: `ral plan` | before: peak RSS |"
        rule += " --- | --- |"
    out = ["`ral plan` (release build) of one bulk item of N config tasks each "
           "requiring every one before it, on a fresh fake root: N (N - 1) / 2 "
           "requirements, at most %s in an answer; median wall time of %d runs, "
           "peak RSS the largest (ral's, or the plugin's when larger). *Plugin "
           "alone* is create_configuration run by hand on the model ral sent it "
           "(median of %d runs, and its own peak RSS); *answer* is what it writes. "
           "*Every other unchanged*: the same answer but for every other task "
           "asking for the value nop reads already, so that half the tasks plan no "
           "change and the others wait for the tasks behind them through them. "
           "N = %s is more than an answer may hold: the plan is refused (exit 2), "
           "timed once.%s"
           % ("{:,}".format(MAX_REQUIREMENTS), repeat, repeat,
              ", ".join("{:,}".format(n) for n in refused),
              " *Before* is the same plan by %s." % before if before else ""), "",
           heads, rule]
    for tasks in sizes + refused:
        d = dense[tasks]
        shapes = [("after", "before", "")]
        if "steady" in d:
            shapes.append(("steady", "steady_before", ", every other unchanged"))
        for mine, theirs, label in shapes:
            row = "| {:,}{} | {:,} | {:.1f} MB | {}, {} | {}{} | {} |".format(
                tasks, label, requirements(tasks), d["bytes"] / 1e6, ms(d["plugin"].wall),
                mib(d["plugin"].peak), ms(d[mine].wall),
                " (refused)" if tasks in refused else "", mib(d[mine].peak))
            if before:
                row += " {} | {} |".format(ms(d[theirs].wall), mib(d[theirs].peak))
            out.append(row)
    return out


def dense_sentences(dense, sizes, refused, before):
    out = []
    # ral's own: the plan less the plugin alone, per requirement.
    own = [(n, (dense[n]["after"].wall - dense[n]["plugin"].wall) / requirements(n))
           for n in sizes]
    out.append("Planning time of ral's own (the plan less the plugin alone) per "
               "requirement: {}; peak RSS per requirement: {}.".format(
                   ", ".join("{} at N = {:,}".format("%.2f µs" % (t * 1e6), n)
                             for n, t in own),
                   ", ".join("{:.0f} bytes at N = {:,}".format(
                       dense[n]["after"].peak * 1048576 / requirements(n), n)
                             for n in sizes)))
    steady = ["{} at N = {:,}".format(ms(dense[n]["steady"].wall), n) for n in sizes]
    out.append("With every other task unchanged, `ral plan` took " + ", ".join(steady)
               + " (all changing: " + ", ".join(ms(dense[n]["after"].wall) for n in sizes)
               + ").")
    if before:
        ratios = ["{:.1f} times the time and {:.1f} times the memory at N = {:,}".format(
            dense[n]["before"].wall / dense[n]["after"].wall,
            dense[n]["before"].peak / dense[n]["after"].peak, n) for n in sizes + refused]
        out.append("The binary before took " + "; ".join(ratios) + "; with every other "
                   "task unchanged, " + ", ".join("{:.1f} times the time at N = {:,}".format(
                       dense[n]["steady_before"].wall / dense[n]["steady"].wall, n)
                       for n in sizes) + ".")
    return out


def nbytes(count):
    return "%.1f MB" % (count / 1e6) if count >= 100000 else "%.1f kB" % (count / 1e3)


def fanout_table(fanout, sizes, refused, repeat, before):
    heads = "| N | waits gained | `ral plan` | peak RSS | plan text | `--json` | peak RSS |"
    rule = "| --- | --- | --- | --- | --- | --- | --- |"
    if before:
        heads += (" before: `ral plan` | before: peak RSS | before: plan text |"
                  " before: `--json` | before: peak RSS |")
        rule += " --- | --- | --- | --- | --- |"
    out = ["`ral plan` (release build) of two bulk items of N config tasks each, every "
           "task of the second requiring the first by its vpath, on a fresh fake root: "
           "N requirements written, each a wait for every task of the first item, "
           "N x N - N waits gained beyond them, at most %s in a plan; median wall time "
           "of %d runs, peak RSS the largest (ral's, or a child's when larger); *plan "
           "text* is what `ral plan` prints; `--json` is the same plan as JSON, timed "
           "once: its size, its wall time and its peak RSS. N = %s is more than a plan "
           "may gain: refused (exit 2), timed once.%s"
           % ("{:,}".format(MAX_REQUIREMENTS), repeat,
              ", ".join("{:,}".format(n) for n in refused),
              " *Before* is the same plan by %s." % before if before else ""), "",
           heads, rule]
    for tasks in sizes + refused:
        f = fanout[tasks]
        refused_mark = " (refused)" if tasks in refused else ""
        row = "| {:,} | {:,} | {}{} | {} | {} | {}, {} | {} |".format(
            tasks, fanout_waits(tasks), ms(f["after"].wall), refused_mark,
            mib(f["after"].peak), nbytes(f["after"].output), nbytes(f["after_json"].output),
            ms(f["after_json"].wall), mib(f["after_json"].peak))
        if before:
            row += " {} | {} | {} | {}, {} | {} |".format(
                ms(f["before"].wall), mib(f["before"].peak), nbytes(f["before"].output),
                nbytes(f["before_json"].output), ms(f["before_json"].wall),
                mib(f["before_json"].peak))
        out.append(row)
    return out


def fanout_sentences(fanout, sizes, refused, before):
    out = []
    largest = max(sizes)
    f = fanout[largest]
    out.append("At N = {:,} ({:,} waits gained), `ral plan` took {} and {} and printed "
               "{} of text ({} of JSON); beyond the bound it refuses in {} at N = {}."
               .format(largest, fanout_waits(largest), ms(f["after"].wall),
                       mib(f["after"].peak), nbytes(f["after"].output),
                       nbytes(f["after_json"].output),
                       " and ".join(ms(fanout[n]["after"].wall) for n in refused),
                       " and ".join("{:,}".format(n) for n in refused)))
    if before:
        out.append("The binary before planned N = {}: {}.".format(
            " and ".join("{:,}".format(n) for n in refused),
            "; ".join("{} in {} and {} ({} as JSON, {} and {})".format(
                nbytes(fanout[n]["before"].output), ms(fanout[n]["before"].wall),
                mib(fanout[n]["before"].peak), nbytes(fanout[n]["before_json"].output),
                ms(fanout[n]["before_json"].wall), mib(fanout[n]["before_json"].peak))
                for n in refused)))
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tasks", default="200,1000",
                        help="part 1: tasks per apply (multiples of 5)")
    parser.add_argument("--plan-items", default="200,1000,2000,4000",
                        help="part 2: bulk items per plan (5 tasks each)")
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--dense", default="500,1000,1500,2000",
                        help="part 3: config tasks of the one dense item")
    parser.add_argument("--refused", default="3900",
                        help="part 3: dense sizes beyond the limit (timed once)")
    parser.add_argument("--fanout", default="500,1000,1400",
                        help="part 4: config tasks of each of the two items")
    parser.add_argument("--fanout-refused", default="2000,5000",
                        help="part 4: sizes beyond the limit (timed once)")
    parser.add_argument("--fanout-only", action="store_true",
                        help="run part 4 alone, writing its section only")
    parser.add_argument("--before", default=None,
                        help="parts 3 and 4: another ral binary, measured beside this one")
    parser.add_argument("--before-label", default=None,
                        help="what --before is, as the section says it (default: its path)")
    opts = parser.parse_args()
    if not os.path.exists(RAL):
        sys.exit("build first: cargo build --release")
    if not os.access(TIME, os.X_OK):
        sys.exit("bench: missing /usr/bin/time (apt-get install time)")
    sizes = [int(s) for s in opts.tasks.split(",")]
    items_list = [int(s) for s in opts.plan_items.split(",")]
    dense_sizes = [int(s) for s in opts.dense.split(",") if s]
    refused = [int(s) for s in opts.refused.split(",") if s]
    if any(requirements(n) > MAX_REQUIREMENTS for n in dense_sizes) or any(
            requirements(n) <= MAX_REQUIREMENTS for n in refused):
        sys.exit("--dense: at most %d requirements; --refused: more" % MAX_REQUIREMENTS)
    if any(t % PER_ITEM for t in sizes):
        sys.exit("--tasks: multiples of %d" % PER_ITEM)
    fanout_sizes = [int(s) for s in opts.fanout.split(",") if s]
    fanout_refused = [int(s) for s in opts.fanout_refused.split(",") if s]
    if any(fanout_waits(n) > MAX_REQUIREMENTS for n in fanout_sizes) or any(
            fanout_waits(n) <= MAX_REQUIREMENTS for n in fanout_refused):
        sys.exit("--fanout: at most %d waits gained; --fanout-refused: more"
                 % MAX_REQUIREMENTS)
    if opts.fanout_only and not fanout_sizes:
        sys.exit("--fanout-only: give --fanout sizes")
    label = opts.before and (opts.before_label or "`%s`" % opts.before)
    fanout_sec = fanout_sizes and section.Section(
        "plugins_fanout", "Model plugins: requirements on an item", "bench/plugins.py")
    if opts.fanout_only:
        with tempfile.TemporaryDirectory() as work:
            for sub in ("cache", "home"):
                os.mkdir(os.path.join(work, sub))
            fanout = fanout_part(work, fanout_sizes, fanout_refused, opts.repeat,
                                 opts.before)
        write_fanout_section(fanout_sec, fanout, fanout_sizes, fanout_refused,
                             opts.repeat, label, opts.before)
        return
    sec = section.Section("plugins", "Model plugins: the engine's cost per plugin task",
                          "bench/plugins.py")
    results, plans, dense, fanout = {}, {}, {}, {}
    with tempfile.TemporaryDirectory() as work:
        for sub in ("cache", "home"):
            os.mkdir(os.path.join(work, sub))
        for tasks in sizes:
            for name, shape, _ in SHAPES:
                r = apply_shape(work, name, shape, tasks, opts.repeat)
                results[(name, tasks)] = r
                print("apply %5d %-9s %8.3f s  engine %6.0f us/task"
                      % (tasks, name, r["apply"].wall, engine_per_task(r, tasks) * 1e6),
                      flush=True)
        for items in items_list:
            for name, shape, _ in PLAN_SHAPES:
                p = plan_shape(work, name, shape, items, opts.repeat)
                plans[(name, items)] = p
                print("plan  %5d items %-9s %8.3f s  %6.1f MiB"
                      % (items, name, p["plan"].wall, p["plan"].peak),
                      flush=True)
        for tasks in dense_sizes + refused:
            is_refused = tasks in refused
            count = 1 if is_refused else opts.repeat
            size, plugin = dense_answer(work, tasks, count)
            d = {"bytes": size, "plugin": plugin,
                 "after": dense_shape(work, tasks, count, RAL, is_refused)}
            if opts.before:
                d["before"] = dense_shape(work, tasks, count, opts.before, False)
            if not is_refused:
                d["steady"] = dense_shape(work, tasks, count, RAL, False, steady=True)
                if opts.before:
                    d["steady_before"] = dense_shape(work, tasks, count, opts.before,
                                                     False, steady=True)
            dense[tasks] = d
            print("dense %5d tasks %9d requirements %8.3f s %7.1f MiB%s"
                  % (tasks, requirements(tasks), d["after"].wall, d["after"].peak,
                     "  before %8.3f s %7.1f MiB" % (d["before"].wall, d["before"].peak)
                     if opts.before else ""), flush=True)
        if fanout_sizes:
            fanout = fanout_part(work, fanout_sizes, fanout_refused, opts.repeat,
                                 opts.before)
    body = (apply_table(results, sizes, opts.repeat) + [""]
            + bullets(apply_sentences(results, sizes)) + [""]
            + plan_table(plans, items_list, opts.repeat) + [""]
            + bullets(plan_sentences(plans, items_list)))
    if dense:
        body += ([""] + dense_table(dense, dense_sizes, refused, opts.repeat, label)
                 + [""] + bullets(dense_sentences(dense, dense_sizes, refused,
                                                   opts.before)))
    sec.write("\n".join(body))
    if fanout:
        write_fanout_section(fanout_sec, fanout, fanout_sizes, fanout_refused,
                             opts.repeat, label, opts.before)


def bullets(lines):
    return ["- " + line for line in lines]


def write_fanout_section(sec, fanout, sizes, refused, repeat, label, before):
    sec.write("\n".join(fanout_table(fanout, sizes, refused, repeat, label) + [""]
                        + bullets(fanout_sentences(fanout, sizes, refused, before))))


if __name__ == "__main__":
    main()
