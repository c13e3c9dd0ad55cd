#!/usr/bin/env python3
"""`ral agent` on a fake root: how soon it repairs a change, what it costs
while idle, whether its memory stays flat over many runs, and one run
against `puppet apply`; writes the agent section of BENCHMARKS.md
(bench/section.py).

The manifest keeps a file (`/etc/motd`, its content) and a host entry
(`db`, in `/etc/hosts`), both below a fake root in a temporary directory;
the agent runs the release build, `-q`, with a root, HOME and cache of its
own. Each part starts an agent of its own on a fresh root:

1. Write -> repair latency (`--interval 1h`, so every run is a repair):
   ROUNDS times, `/etc/motd` is overwritten in place with other content,
   then (a second series) `/etc/hosts` is replaced by a rename with a copy
   lacking the managed entry; the time from the end of that write until
   the file is restored, seen by reading it every millisecond (the
   script's polling is the measuring harness, not the agent's). Each
   round waits for the run's line on the agent's stdout, then for longer
   than the agent's gap between runs (500 ms), before the next write.
2. Idle (`--interval 30m`): from a second after the first run's line,
   over IDLE seconds, the agent's RSS (VmRSS), CPU time (utime + stime
   of /proc/PID/stat), threads, and wake-ups (the voluntary and
   involuntary context switches of all its threads, from
   /proc/PID/task/*/status).
3. Memory over RUNS runs (`--interval 100ms`, the shortest): VmRSS as the
   run lines come (after runs 10, 100, 250, 500, 750 and the last), the
   size of the store after, the agent's CPU per run.
4. Against Puppet: `puppet apply` of the same manifest written for Puppet
   (with private --confdir, --vardir, --codedir and the rest in the
   temporary directory) and `ral apply --root ROOT`, each converged
   already (a first run not counted), medians of REPEAT runs; beside the
   agent's own times for a repair and for a converged run, from its run
   lines. Without Puppet, the section keeps that part from its last run.

Usage: cargo build --release --bin ral &&
       python3 bench/agent.py [--ral PATH] [--rounds 100] [--idle 60]
                              [--runs 1000] [--repeat 5] [--no-section]
Changes nothing outside its temporary directory.
"""

import argparse
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import section  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET_DIR = os.environ.get("CARGO_TARGET_DIR") or os.path.join(REPO, "target")
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
TICK = os.sysconf("SC_CLK_TCK")

MOTD = "Managed by ral: do not edit.\n"
OTHER_MOTD = "Edited by hand.\n"
HOSTS = "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost\n"
DB_IP = "10.0.0.5"
MANIFEST = """\
file:
  /etc/motd: {ensure: file, content: "Managed by ral: do not edit.\\n"}
host:
  db: {ip: %s}
""" % DB_IP
PUPPET_MANIFEST = """\
file { '%(root)s/etc/motd': ensure => file, content => "Managed by ral: do not edit.\\n" }
host { 'db': ip => '%(ip)s', target => '%(root)s/etc/hosts' }
"""

# The agent's gap between runs with these intervals (min(500 ms, interval)):
# a round waits longer than that after a run before its write.
GAP = 0.5
SPACING = GAP + 0.3
POLL = 0.001
# The longest a round waits for a repair before it counts as not repaired.
REPAIR_TIMEOUT = 10.0
CHECKPOINTS = (10, 100, 250, 500, 750, 1000)
# Growth of RSS from run 100 to the last that still counts as flat, KiB.
FLAT = 256
RUN_LINE = re.compile(r"^ral agent: run \((?P<why>.*)\): (?P<outcome>.*) in "
                      r"(?P<secs>[0-9.]+) s")


class BenchError(Exception):
    pass


def proc_status(pid):
    """VmRSS, VmHWM, RssAnon, RssFile (KiB) and Threads of PID."""
    found = {}
    with open("/proc/%d/status" % pid) as handle:
        for line in handle:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM", "RssAnon", "RssFile", "Threads"):
                found[key] = int(value.split()[0])
    return found


def huge_pages(pid):
    """AnonHugePages of PID (KiB): anonymous memory in transparent huge
    pages."""
    with open("/proc/%d/smaps_rollup" % pid) as handle:
        for line in handle:
            if line.startswith("AnonHugePages:"):
                return int(line.split()[1])
    return 0


def run_seconds(root, count, timeout):
    """The COUNTth run's duration from the status file the agent writes
    beside its store after each run (STORE.agent, replaced whole by a
    rename; its times are to the microsecond, where the run line says
    hundredths), once it records that run; None when it has gone past
    it or TIMEOUT s passed."""
    path = os.path.join(root, "var", "lib", "ral", "state.db.agent")
    deadline = time.perf_counter() + timeout
    while time.perf_counter() < deadline:
        try:
            with open(path) as handle:
                status = json.load(handle)
        except (OSError, ValueError):
            status = {}
        runs = status.get("runs", 0)
        if runs == count:
            last = status["last_run"]
            return last["ended"] - last["started"]
        if runs > count:
            return None
        time.sleep(POLL)
    return None


def cpu_seconds(pid):
    """utime + stime of PID (all its threads), in seconds."""
    with open("/proc/%d/stat" % pid) as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def switches(pid):
    """Each thread's context switches, voluntary and involuntary: {tid:
    (name, count)}."""
    found = {}
    base = "/proc/%d/task" % pid
    for tid in os.listdir(base):
        try:
            with open(os.path.join(base, tid, "comm")) as handle:
                name = handle.read().strip()
            count = 0
            with open(os.path.join(base, tid, "status")) as handle:
                for line in handle:
                    if line.startswith(("voluntary_ctxt_switches:",
                                        "nonvoluntary_ctxt_switches:")):
                        count += int(line.split()[1])
            found[int(tid)] = (name, count)
        except OSError:
            pass  # a thread that ended between the listing and the read
    return found


class Run:
    def __init__(self, at, why, outcome, secs):
        self.at, self.why, self.outcome, self.secs = at, why, outcome, secs


class Agent:
    """A `ral agent` process and the run lines it printed, each with the
    time it was read. `on_run(count)` is called (in the reader thread) as
    each run line comes."""

    def __init__(self, ral, root, manifest, env, interval, log, on_run=None):
        self.log = log
        self.stderr = open(log, "wb")
        self.proc = subprocess.Popen(
            [ral, "agent", "--root", root, "--interval", interval, "-q", manifest],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=self.stderr, env=env)
        self.pid = self.proc.pid
        self.on_run = on_run
        self.runs = []
        self.lines = []
        self.ended = False
        self.cond = threading.Condition()
        self.reader = threading.Thread(target=self.read, daemon=True)
        self.reader.start()

    def read(self):
        for raw in self.proc.stdout:
            at = time.perf_counter()
            line = raw.decode(errors="replace").rstrip("\n")
            found = RUN_LINE.match(line)
            if found and self.on_run:
                self.on_run(len(self.runs) + 1)
            with self.cond:
                self.lines.append(line)
                if found:
                    self.runs.append(Run(at, found["why"], found["outcome"],
                                         float(found["secs"])))
                self.cond.notify_all()
        with self.cond:
            self.ended = True
            self.cond.notify_all()

    def count(self):
        with self.cond:
            return len(self.runs)

    def wait_runs(self, count, timeout):
        """The COUNTth run once its line came; fails after TIMEOUT s."""
        deadline = time.perf_counter() + timeout
        with self.cond:
            while len(self.runs) < count:
                left = deadline - time.perf_counter()
                if self.ended or left <= 0:
                    raise BenchError("the agent printed %d run lines, waited for %d%s\n%s" % (
                        len(self.runs), count, " (it ended)" if self.ended else "",
                        self.tail()))
                self.cond.wait(left)
            return self.runs[count - 1]

    def tail(self):
        with open(self.log, errors="replace") as handle:
            said = handle.read()[-2000:]
        return "stdout: %s\nstderr: %s" % ("\n".join(self.lines[-10:]), said)

    def stop(self):
        """SIGTERM; fails unless it stops with status 0 and says so."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise BenchError("the agent did not stop within 30 s of SIGTERM")
        self.reader.join()
        self.stderr.close()
        if code != 0 or not self.lines or self.lines[-1] != "ral agent: stopped":
            raise BenchError("the agent ended with status %d\n%s" % (code, self.tail()))

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def warnings(self):
        """What it logged on stderr."""
        with open(self.log, errors="replace") as handle:
            return [line for line in handle.read().splitlines() if line.strip()]


def make_root(work, name):
    """A fake root with /etc/hosts lacking the managed entry."""
    root = os.path.join(work, name)
    os.makedirs(os.path.join(root, "etc"))
    with open(os.path.join(root, "etc", "hosts"), "w") as handle:
        handle.write(HOSTS)
    return root


def motd_restored(root):
    try:
        with open(os.path.join(root, "etc", "motd")) as handle:
            return handle.read() == MOTD
    except OSError:
        return False


def hosts_restored(root):
    try:
        with open(os.path.join(root, "etc", "hosts")) as handle:
            lines = handle.read().splitlines()
    except OSError:
        return False
    return any(fields[:1] == [DB_IP] and "db" in fields[1:]
               for fields in (line.split("#", 1)[0].split() for line in lines))


def drift_motd(root):
    """Other content, written in place (as `echo ... > /etc/motd`)."""
    with open(os.path.join(root, "etc", "motd"), "w") as handle:
        handle.write(OTHER_MOTD)


def drift_hosts(root):
    """A copy without the managed entry, put in place by a rename (as
    editors write)."""
    new = os.path.join(root, "etc", ".hosts.bench")
    with open(new, "w") as handle:
        handle.write(HOSTS)
    os.replace(new, os.path.join(root, "etc", "hosts"))


def latency_series(agent, root, drift, restored, wanted, rounds):
    """ROUNDS drifts and their repairs: a dict of the series' figures."""
    latencies, run_secs, slow_runs, problems = [], [], [], []
    extra = 0
    for _ in range(rounds):
        before = agent.count()
        time.sleep(SPACING)
        # Runs during the spacing: none was asked for.
        extra += agent.count() - before
        before = agent.count()
        if not restored(root):
            raise BenchError("the file is not as managed before the round")
        drift(root)
        written = time.perf_counter()
        while not restored(root):
            if time.perf_counter() - written > REPAIR_TIMEOUT:
                break
            time.sleep(POLL)
        seen = time.perf_counter()
        run = agent.wait_runs(before + 1, REPAIR_TIMEOUT + 30)
        secs = run_seconds(root, before + 1, 5)
        if secs is None:
            raise BenchError("the status file did not record run %d" % (before + 1))
        if seen - written > REPAIR_TIMEOUT:
            problems.append("not repaired within %.0f s" % REPAIR_TIMEOUT)
            continue
        latencies.append(seen - written)
        run_secs.append(secs)
        if run.outcome != "repaired" or ("drift: %s" % wanted) not in run.why:
            problems.append("run (%s): %s" % (run.why, run.outcome))
        slow_runs.append((seen - written, run.why, run.outcome, secs))
    time.sleep(SPACING)
    extra += agent.count() - before - 1
    return {"latencies": latencies, "run_secs": run_secs, "problems": problems,
            "extra": extra, "rounds": rounds,
            "slowest": sorted(slow_runs, reverse=True)[:3]}


def percentile(values, share):
    """The nearest-rank percentile."""
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * share // 100))
    return ordered[int(rank) - 1]


def part_latency(ral, work, env, manifest, rounds):
    root = make_root(work, "latency")
    agent = Agent(ral, root, manifest, env, "1h", os.path.join(work, "latency.log"))
    try:
        first = agent.wait_runs(1, 60)
        if first.outcome != "repaired" or not (motd_restored(root) and hosts_restored(root)):
            raise BenchError("the first run did not converge: %s\n%s" % (
                first.outcome, agent.tail()))
        print("bench: latency, %d rounds of each series" % rounds, file=sys.stderr)
        motd = latency_series(agent, root, drift_motd, motd_restored, "/etc/motd", rounds)
        hosts = latency_series(agent, root, drift_hosts, hosts_restored, "/etc/hosts", rounds)
        agent.stop()
    finally:
        agent.kill()
    return {"motd": motd, "hosts": hosts, "warnings": agent.warnings()}


def status_json(ral, root, env):
    done = subprocess.run([ral, "agent", "status", "--root", root, "-j"], env=env,
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise BenchError("ral agent status: %d %s" % (done.returncode, done.stderr))
    return json.loads(done.stdout)


def part_idle(ral, work, env, manifest, idle):
    root = make_root(work, "idle")
    agent = Agent(ral, root, manifest, env, "30m", os.path.join(work, "idle.log"))
    try:
        agent.wait_runs(1, 60)
        time.sleep(1)
        print("bench: idle, %d s" % idle, file=sys.stderr)
        before = (proc_status(agent.pid), cpu_seconds(agent.pid), switches(agent.pid))
        huge_before = huge_pages(agent.pid)
        time.sleep(idle)
        after = (proc_status(agent.pid), cpu_seconds(agent.pid), switches(agent.pid))
        huge = huge_pages(agent.pid)
        status = status_json(ral, root, env)
        runs = agent.count()
        agent.stop()
    finally:
        agent.kill()
    woke = {}
    for tid, (name, count) in after[2].items():
        woke[(tid, name)] = count - before[2].get(tid, (name, 0))[1]
    gone = [tid for tid in before[2] if tid not in after[2]]
    return {
        "rss_before": before[0]["VmRSS"], "rss_after": after[0]["VmRSS"],
        "anon": after[0]["RssAnon"], "file": after[0]["RssFile"], "huge": huge,
        "start": dict(before[0], huge=huge_before),
        "hwm": after[0]["VmHWM"], "threads": after[0]["Threads"],
        "threads_before": before[0]["Threads"],
        "cpu": after[1] - before[1], "wakeups": sum(woke.values()),
        "by_thread": {"%s (%d)" % (name, tid): n for (tid, name), n in woke.items() if n},
        "threads_gone": len(gone), "runs": runs,
        "status_runs": status["status"]["runs"], "running": status["running"],
        "warnings": agent.warnings(),
    }


def part_rss(ral, work, env, manifest, name, extra):
    """An agent's RSS, split, a second after its first run, with EXTRA in
    its environment."""
    root = make_root(work, name)
    agent = Agent(ral, root, manifest, dict(env, **extra), "30m",
                  os.path.join(work, name + ".log"))
    try:
        agent.wait_runs(1, 60)
        time.sleep(1)
        found = proc_status(agent.pid)
        found["huge"] = huge_pages(agent.pid)
        agent.stop()
    finally:
        agent.kill()
    return found


def store_size(root):
    """The store and its write-ahead log and shared memory, if any, in
    bytes: {name: size}."""
    base = os.path.join(root, "var", "lib", "ral", "state.db")
    return {os.path.basename(path): os.path.getsize(path)
            for path in (base, base + "-wal", base + "-shm") if os.path.exists(path)}


def part_memory(ral, work, env, manifest, runs):
    root = make_root(work, "memory")
    checkpoints = sorted({c for c in CHECKPOINTS if c < runs} | {runs})
    samples = {}
    durations = []
    agent_box = []

    def on_run(count):
        if count in checkpoints:
            samples[count] = proc_status(agent_box[0].pid)["VmRSS"]
        if count > 1:
            secs = run_seconds(root, count, 1)
            if secs is not None:
                durations.append(secs)

    agent = Agent(ral, root, manifest, env, "100ms", os.path.join(work, "memory.log"),
                  on_run=on_run)
    agent_box.append(agent)
    try:
        print("bench: memory, %d runs" % runs, file=sys.stderr)
        agent.wait_runs(1, 60)
        start, cpu_start = time.perf_counter(), cpu_seconds(agent.pid)
        agent.wait_runs(runs, runs * 2.0 + 60)
        wall, cpu = time.perf_counter() - start, cpu_seconds(agent.pid) - cpu_start
        hwm = proc_status(agent.pid)["VmHWM"]
        status = status_json(ral, root, env)
        agent.stop()
    finally:
        agent.kill()
    later = agent.runs[1:runs]
    return {
        "samples": samples, "hwm": hwm, "store": store_size(root),
        "wall": wall, "cpu_per_run": cpu / max(1, len(later)),
        "run_secs": durations,
        "outcomes": sorted({r.outcome for r in later}),
        "status_runs": status["status"]["runs"], "runs": runs,
        "warnings": agent.warnings(),
    }


def timed(argv, env, expect):
    """One run of ARGV: wall and CPU seconds and peak RSS (KiB) of it and
    the children it waited for; fails unless it exits with EXPECT."""
    with tempfile.TemporaryFile() as out:
        start = time.perf_counter()
        proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        said = out.read().decode(errors="replace")
    if proc.returncode != expect:
        raise BenchError("%s: exit %d, wanted %d\n%s" % (
            " ".join(argv), proc.returncode, expect, said[-3000:]))
    return {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime, "rss": usage.ru_maxrss}


def part_puppet(puppet, work, env, repeat):
    """`puppet apply`, converged: the figures of REPEAT runs."""
    base = os.path.join(work, "puppet")
    dirs = {d: os.path.join(base, d) for d in
            ("var", "conf", "code", "ssl", "log", "run", "public", "home")}
    for path in dirs.values():
        os.makedirs(path)
    root = make_root(base, "root")
    manifest = os.path.join(base, "site.pp")
    with open(manifest, "w") as handle:
        handle.write(PUPPET_MANIFEST % {"root": root, "ip": DB_IP})
    argv = [puppet, "apply", "--color=false", "--detailed-exitcodes"]
    for d in ("var", "conf", "code", "ssl", "log", "run", "public"):
        argv += ["--%sdir" % d, dirs[d]]
    argv.append(manifest)
    penv = dict(env, HOME=dirs["home"])
    print("bench: puppet apply, %d runs" % repeat, file=sys.stderr)
    # --detailed-exitcodes: 2 when it changed something, 0 when not.
    timed(argv, penv, 2)
    if not (motd_restored(root) and hosts_restored(root)):
        raise BenchError("puppet apply did not converge the fake root")
    runs = [timed(argv, penv, 0) for _ in range(repeat)]
    version = subprocess.run([puppet, "--version"], env=penv, capture_output=True,
                             text=True).stdout.strip()
    return runs, version


def part_apply(ral, work, env, manifest, repeat):
    root = make_root(work, "apply")
    argv = [ral, "apply", "--root", root, manifest]
    print("bench: ral apply, %d runs" % repeat, file=sys.stderr)
    timed(argv, env, 0)
    if not (motd_restored(root) and hosts_restored(root)):
        raise BenchError("ral apply did not converge the fake root")
    return [timed(argv, env, 0) for _ in range(repeat)]


def ms(seconds):
    if seconds >= 1:
        return "%.2f s" % seconds
    return "%.0f ms" % (seconds * 1000) if seconds >= 0.1 else "%.1f ms" % (seconds * 1000)


def mib(kib):
    return "%.1f MiB" % (kib / 1024)


def met(ok):
    return "met" if ok else "**not met**"


PUPPET_ROW = "| `puppet apply site.pp`"


def carried_puppet(reason):
    """Puppet's row of the last section written, marked as carried over
    from its run, and its median wall in seconds; None when no run
    measured Puppet."""
    path = os.path.join(section.SECTIONS, "agent.md")
    try:
        with open(path) as handle:
            text = handle.read()
    except OSError:
        return None
    row = next((line for line in text.split("\n") if line.startswith(PUPPET_ROW)), None)
    if row is None:
        return None
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    number, unit = cells[1].split()
    wall = float(number) / (1000 if unit == "ms" else 1)
    if "carried over" not in cells[0]:
        found = re.search(r"Written by `[^`]*` on (.*?), commit (\S+?),", text)
        when = "%s, commit %s" % found.groups() if found else "an earlier run"
        cells[0] += " (carried over from the run of %s: %s at this run)" % (when, reason)
    return "| " + " | ".join(cells) + " |", wall


def end_load():
    try:
        with open("/proc/loadavg") as handle:
            return handle.read().split()[0]
    except (OSError, IndexError):
        return "unknown"


def report(args, latency, idle, memory, apply_runs, puppet):
    med = statistics.median
    out = [
        "`ral agent -q` on a fake root in a temporary directory (its own HOME and "
        "cache), with a manifest keeping one file (`/etc/motd`, its content) and one "
        "host entry (`db` in `/etc/hosts`); each part an agent of its own on a fresh "
        "root. The 1-minute load average was %s when the script ended." % end_load(),
        "",
        "### Write -> repair latency",
        "",
        "`--interval 1h`, so that every run is a repair. Each round overwrites the "
        "file (`/etc/motd` in place with other content; `/etc/hosts` replaced by a "
        "rename with a copy lacking the entry), then reads it every millisecond "
        "until it is as managed again: the latency runs from the end of that write "
        "to the read that finds it restored. A round waits for the run's line and "
        "then %.1f s (the agent's gap after a run is %.1f s) before its write. A "
        "run's own time is from its start to its end as the agent's status file "
        "records them (`STORE.agent`, to the microsecond; the run line says "
        "hundredths)." % (SPACING, GAP),
        "",
        "| file changed | rounds | median | p90 | worst | agent's run time (median) "
        "| runs not asked for | rounds with a problem |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    worst_all = 0.0
    problems = []
    for label, key in (("`/etc/motd`, in place", "motd"),
                       ("`/etc/hosts`, by a rename", "hosts")):
        series = latency[key]
        values = series["latencies"]
        worst_all = max([worst_all] + values)
        shown = ([ms(med(values)), ms(percentile(values, 90)), ms(max(values)),
                  ms(med(series["run_secs"]))] if values else ["none repaired"] * 4)
        out.append("| %s | %d | %s | %s | %s | %s | %d | %d |" % tuple(
            [label, series["rounds"]] + shown + [series["extra"], len(series["problems"])]))
        problems += ["%s: %s" % (key, p) for p in series["problems"]]
    all_values = latency["motd"]["latencies"] + latency["hosts"]["latencies"]
    not_repaired = sum("not repaired" in p for p in problems)
    out += [
        "",
        "Every repair within one second (goal): %s (worst %s, %d of %d rounds not "
        "repaired within %.0f s)." % (
            met(worst_all <= 1.0 and not not_repaired), ms(worst_all), not_repaired,
            len(all_values) + not_repaired, REPAIR_TIMEOUT),
    ]
    slowest = ["%s %s (its run took %s)" % (key, ms(latency[key]["slowest"][0][0]),
                                            ms(latency[key]["slowest"][0][3]))
               for key in ("motd", "hosts") if latency[key]["slowest"]]
    out.append("The slowest round of each series: %s." % ", ".join(slowest))
    if problems:
        out.append("Rounds whose run was not one repair of the file changed: %s." %
                   "; ".join(sorted(set(problems))[:5]))
    out += [
        "",
        "### Idle",
        "",
        "`--interval 30m`, over %d s from a second after the first run's line. "
        "Wake-ups are the voluntary and involuntary context switches of all the "
        "agent's threads (`/proc/PID/task/*/status`), their growth over the time; "
        "CPU is its utime and stime (`/proc/PID/stat`, in clock ticks of 1/%d s)."
        % (args.idle, TICK),
        "",
        "| RSS (VmRSS) at the start | RSS at the end | peak (VmHWM) | threads | CPU used "
        "| wake-ups |",
        "| --- | --- | --- | --- | --- | --- |",
        "| %s | %s | %s | %d | %.2f s | %d |" % (
            mib(idle["rss_before"]), mib(idle["rss_after"]), mib(idle["hwm"]),
            idle["threads"], idle["cpu"], idle["wakeups"]),
        "",
        "What the RSS is made of at the start and at the end of that time, and a "
        "second after the first run of an agent started with `MIMALLOC_ALLOW_THP=0` "
        "(its allocator then asks for no transparent huge pages; a diagnosis, not how "
        "ral runs):",
        "",
        "| agent | VmRSS | anonymous (RssAnon) | of it in huge pages (AnonHugePages) "
        "| file-backed (RssFile) |",
        "| --- | --- | --- | --- | --- |",
    ] + [
        "| %s | %s | %s | %s | %s |" % (label, mib(row[rss]), mib(row[anon]), mib(row["huge"]),
                                       mib(row[file]))
        for label, row, rss, anon, file in (
            ("as it runs, at the start", idle["start"], "VmRSS", "RssAnon", "RssFile"),
            ("as it runs, at the end", idle, "rss_after", "anon", "file"),
            ("`MIMALLOC_ALLOW_THP=0`", idle["no_thp"], "VmRSS", "RssAnon", "RssFile"))
    ] + [
        "",
        "RSS ≤ 15 MB (goal): %s. No wake-up beyond the timer, none in %d s with "
        "a 30-minute interval (goal): %s%s. Threads that ended in the time (their "
        "switches not counted): %d. Runs in the time: %d (the first only), "
        "`ral agent status` saying %d." % (
            met(idle["rss_after"] * 1024 <= 15e6), args.idle, met(idle["wakeups"] == 0),
            "" if not idle["by_thread"] else " (%s)" % ", ".join(
                "%s: %d" % kv for kv in sorted(idle["by_thread"].items())),
            idle["threads_gone"], idle["runs"], idle["status_runs"]),
        "",
        "### Memory over {:,} runs".format(memory["runs"]),
        "",
        "`--interval 100ms` (the shortest; the gap between runs is then 100 ms), "
        "nothing to repair after the first run. VmRSS read as each counted run "
        "line comes, while the agent waits for the next run.",
        "",
        "| after run | " + " | ".join(str(c) for c in sorted(memory["samples"])) + " |",
        "| --- | " + " | ".join("---" for _ in memory["samples"]) + " |",
        "| VmRSS | " + " | ".join(mib(memory["samples"][c])
                                   for c in sorted(memory["samples"])) + " |",
        "",
    ]
    samples = memory["samples"]
    low = 100 if 100 in samples else min(samples)
    growth = samples[max(samples)] - samples[low]
    store = memory["store"]
    out += [
        "From run %d to run %d RSS grew by %+d KiB (%s); the peak (VmHWM) was %s. "
        "Runs 2 to %d took %.1f s, %s of the agent's CPU per run, a run's own time "
        "%s (median of %d; of the first hundred of them %s, of the last hundred %s; "
        "outcomes: %s). The store after: %s (%s per run; each run "
        "records a plan); `ral agent status` counted %d runs." % (
            low, max(samples), growth,
            "flat: no growth beyond %d KiB" % FLAT if growth <= FLAT else "**growing**",
            mib(memory["hwm"]), memory["runs"], memory["wall"],
            ms(memory["cpu_per_run"]), ms(med(memory["run_secs"])), len(memory["run_secs"]),
            ms(med(memory["run_secs"][:100])), ms(med(memory["run_secs"][-100:])),
            ", ".join(memory["outcomes"]),
            ", ".join("`%s` %.1f KiB" % (name, size / 1024) for name, size in
                      sorted(store.items())),
            "%.1f KiB" % (sum(store.values()) / 1024 / (memory["runs"])),
            memory["status_runs"]),
        "",
    ]
    repairs = latency["motd"]["run_secs"] + latency["hosts"]["run_secs"]
    if not repairs:
        raise BenchError("no drift was repaired")
    repair = med(repairs)
    apply_wall = med(r["wall"] for r in apply_runs)
    if puppet is not None:
        puppet_runs, version = puppet
        puppet_wall = med(r["wall"] for r in puppet_runs)
        puppet_row = "%s (%s), converged | %s | %s | %s | %d |" % (
            PUPPET_ROW, version, ms(puppet_wall), ms(med(r["cpu"] for r in puppet_runs)),
            mib(max(r["rss"] for r in puppet_runs)), len(puppet_runs))
        whose = ""
    else:
        carried = carried_puppet(args.puppet_missing)
        puppet_row, puppet_wall = carried if carried else (None, None)
        whose = " (Puppet's figures from the earlier run its row names)"
    out += [
        "### One run, against Puppet",
        "",
        "The same manifest written for Puppet (`puppet apply` with private `--confdir`, "
        "`--vardir`, `--codedir` and the rest in the temporary directory; the file, "
        "and `host { 'db': target => ROOT/etc/hosts }`) and `ral apply --root ROOT` "
        "on a fake root of its own: each converged by a first run not counted, then "
        "run again; medians of wall and CPU time (user and system, with the children "
        "waited for), the largest peak RSS. The agent's runs are their own times as "
        "its status file records them, from the parts above.",
        "",
        "| run | median wall | median CPU | peak RSS | runs |",
        "| --- | --- | --- | --- | --- |",
    ]
    if puppet_row:
        out.append(puppet_row)
    out += [
        "| `ral apply --root ROOT site.yaml`, converged | %s | %s | %s | %d |" % (
            ms(apply_wall), ms(med(r["cpu"] for r in apply_runs)),
            mib(max(r["rss"] for r in apply_runs)), len(apply_runs)),
        "| the agent's run repairing a drift | %s | | | %d |" % (ms(repair), len(repairs)),
        "| the agent's run, converged (`--interval 100ms`) | %s | | | %d |" % (
            ms(med(memory["run_secs"])), len(memory["run_secs"])),
        "",
    ]
    if puppet_wall is None:
        out.append("Puppet was not measured: %s, and no earlier run measured it."
                   % args.puppet_missing)
    else:
        out.append("`puppet apply`, converged, takes %.0fx the time of `ral apply` "
                   "converged, and %.0fx that of the agent's repair run%s." % (
                       puppet_wall / apply_wall, puppet_wall / repair, whose))
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ral", default=os.path.join(TARGET_DIR, "release", "ral"))
    parser.add_argument("--puppet", default=shutil.which("puppet") or "/usr/bin/puppet")
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--idle", type=int, default=60)
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--no-section", action="store_true",
                        help="print the figures without writing the section")
    args = parser.parse_args()
    if not os.access(args.ral, os.X_OK):
        sys.exit("bench: %s is missing: cargo build --release --bin ral" % args.ral)
    if min(args.rounds, args.idle, args.runs, args.repeat) < 1 or args.runs < 2:
        sys.exit("bench: --rounds, --idle, --repeat at least 1, --runs at least 2")
    have_puppet = os.access(args.puppet, os.X_OK)
    args.puppet_missing = "Puppet was not found (%s)" % args.puppet
    sec = section.Section("agent", "The agent: repairs, idle cost, memory over runs",
                          "bench/agent.py")
    work = tempfile.mkdtemp(prefix="ral-agent-", dir="/tmp")
    env = {"PATH": SYSTEM_PATH, "HOME": os.path.join(work, "home"),
           "XDG_CACHE_HOME": os.path.join(work, "cache"),
           "TMPDIR": os.path.join(work, "tmp"), "LANG": "C.UTF-8"}
    for key in ("HOME", "XDG_CACHE_HOME", "TMPDIR"):
        os.makedirs(env[key])
    manifest = os.path.join(work, "site.yaml")
    with open(manifest, "w") as handle:
        handle.write(MANIFEST)
    try:
        latency = part_latency(args.ral, work, env, manifest, args.rounds)
        idle = part_idle(args.ral, work, env, manifest, args.idle)
        idle["no_thp"] = part_rss(args.ral, work, env, manifest, "no-thp",
                                  {"MIMALLOC_ALLOW_THP": "0"})
        memory = part_memory(args.ral, work, env, manifest, args.runs)
        apply_runs = part_apply(args.ral, work, env, manifest, args.repeat)
        puppet = part_puppet(args.puppet, work, env, args.repeat) if have_puppet else None
    except BenchError as error:
        sys.exit("bench: %s" % error)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    try:
        out = report(args, latency, idle, memory, apply_runs, puppet)
    except BenchError as error:
        sys.exit("bench: %s" % error)
    warnings = latency["warnings"] + idle["warnings"] + memory["warnings"]
    for key in ("motd", "hosts"):
        for slow in latency[key]["slowest"]:
            print("bench: slowest %s: %s after the write; run (%s): %s in %.3f s" % (
                key, ms(slow[0]), slow[1], slow[2], slow[3]), file=sys.stderr)
    if warnings:
        print("bench: the agents' stderr:\n  " + "\n  ".join(warnings[:20]), file=sys.stderr)
    print("\n".join(out))
    if not args.no_section:
        sec.write("\n".join(out))


if __name__ == "__main__":
    main()
