#!/usr/bin/env python3
"""Fleets of 100 and 1,000 targets on one machine: what a fleet costs the
controller (docs/remote.md, `--forks`); writes the fleet section of
BENCHMARKS.md (bench/section.py).

No sshd can take 1,000 logins on this machine, so `ssh` is a stand-in
(examples/ssh_standin.rs, first on PATH): each target is a directory with
its own HOME and fake root, the stand-in runs the target's side here, and
its kept masters serve OpenSSH's multiplexing protocol on their sockets,
which ral speaks directly. What is measured is ral's own cost; a real
sshd at 50 targets is bench/remote.py's.

For each size (100 and 1,000 targets by default), with the release build,
every run under `ulimit -n 1024`:

- `ralsh -i INV user root` and `ral plan -i INV` of a 20-resource
  manifest (a group, a user, a directory and 8 files, 9 host entries,
  all below each target's fake root), each `--no-persist` (every target
  a master of the run's own), cold (no kept master: the run starts them)
  and warm (through the masters the cold run left);
- wall time; ral's own CPU (its user and system time, read from
  /proc/PID/stat before it is reaped, so that its children are not
  counted) per target; the target side's CPU per target (the children
  ral reaped, and the kept masters' own and their children's); ral's
  peak RSS (VmHWM, polled: its children not counted), its most threads
  and open descriptors (polled); any descriptor error on its stderr.

Usage: cargo build --release --bins --example ssh_standin &&
       python3 bench/fleet.py [--sizes 100,1000] [--runs N]
Changes nothing outside its temporary directory.
"""

import argparse
import os
import resource
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
RALSH = os.path.join(TARGET_DIR, "release/ralsh")
RAL = os.path.join(TARGET_DIR, "release/ral")
STANDIN = os.path.join(TARGET_DIR, "release/examples/ssh_standin")
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
NOFILE = 1024
TICK = os.sysconf("SC_CLK_TCK")

MANIFEST = """\
group:
  devs: {gid: 2000}
user:
  carol: {uid: 1500, gid: 2000, shell: /bin/sh, home: /home/carol, groups: [devs]}
file:
  /srv/app: {ensure: directory}
%s
host:
%s
""" % (
    "\n".join('  /srv/app/f%d.conf: {content: "setting = %d\\n", mode: "0640"}' % (i, i)
              for i in range(8)),
    "\n".join("  db%d.internal: {ip: 10.0.0.%d}" % (i, i + 1) for i in range(9)),
)


def make_fleet(work, size):
    """SIZE targets below WORK/targets, each with its HOME and fake root;
    the inventory naming them."""
    base = os.path.join(work, "targets")
    os.makedirs(base)
    inventory = os.path.join(work, "inventory-%d.yaml" % size)
    with open(inventory, "w") as out:
        out.write("all:\n  hosts:\n")
        for i in range(size):
            name = "t%04d" % i
            target = os.path.join(base, name)
            os.makedirs(os.path.join(target, "home"), mode=0o700)
            root = os.path.join(target, "root")
            for d in ("etc", "srv", "home"):
                os.makedirs(os.path.join(root, d))
            files = {
                "passwd": "root:x:0:0:root:/root:/bin/bash\n",
                "shadow": "root:*:19700:0:99999:7:::\n",
                "group": "root:x:0:\nusers:x:100:\n",
                "gshadow": "root:*::\nusers:!::\n",
                "hosts": "127.0.0.1\tlocalhost\n10.0.0.1\tdb0.internal\n",
            }
            for file, text in files.items():
                with open(os.path.join(root, "etc", file), "w") as f:
                    f.write(text)
            out.write("    %s:\n      ral_root: %s\n" % (name, root))
    return base, inventory


def stat(pid):
    """utime+stime and cutime+cstime of PID, in seconds."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    own = (int(fields[11]) + int(fields[12])) / TICK
    children = (int(fields[13]) + int(fields[14])) / TICK
    return own, children


def masters_cpu(base):
    """The kept masters' CPU so far: their own and their children's."""
    total = 0.0
    for name in os.listdir(base):
        try:
            with open(os.path.join(base, name, "master.pid")) as f:
                own, children = stat(int(f.read()))
            total += own + children
        except (OSError, ValueError):
            pass
    return total


class Watch:
    """Polls a process's VmHWM, threads and open descriptors until it
    ends; the most of each."""

    def __init__(self, pid):
        self.pid = pid
        self.peak_mib = 0.0
        self.threads = 0
        self.fds = 0
        self.done = threading.Event()
        self.thread = threading.Thread(target=self.poll, daemon=True)
        self.thread.start()

    def poll(self):
        while not self.done.is_set():
            try:
                with open("/proc/%d/status" % self.pid) as status:
                    for line in status:
                        if line.startswith("VmHWM:"):
                            self.peak_mib = max(self.peak_mib, int(line.split()[1]) / 1024)
                        elif line.startswith("Threads:"):
                            self.threads = max(self.threads, int(line.split()[1]))
                self.fds = max(self.fds, len(os.listdir("/proc/%d/fd" % self.pid)))
            except (OSError, ValueError):
                pass
            time.sleep(0.02)

    def stop(self):
        self.done.set()
        self.thread.join()


def limit_files():
    resource.setrlimit(resource.RLIMIT_NOFILE, (NOFILE, NOFILE))


def measure(argv, env, base, size):
    """One run of ARGV: a dict of its figures; exits when it fails."""
    before = masters_cpu(base)
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(argv, env=env, stdout=out, stderr=err,
                                preexec_fn=limit_files)
        watch = Watch(proc.pid)
        # The zombie keeps /proc/PID until it is reaped: its own CPU is read
        # there, apart from its children's.
        os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)
        wall = time.perf_counter() - start
        watch.stop()
        own, children = stat(proc.pid)
        _, status, _ = os.wait4(proc.pid, 0)
        out.seek(0)
        err.seek(0)
        text = out.read().decode(errors="replace")
        said = err.read().decode(errors="replace")
    code = os.waitstatus_to_exitcode(status)
    reported = text.count("\n== t")+ text.startswith("== t")
    if code not in (0, 2) or reported != size:
        sys.exit("%s failed (%d, %d of %d targets reported):\n%s\n%s" % (
            " ".join(argv), code, reported, size, said[-3000:], text[-1000:]))
    return {
        "wall": wall,
        "own": own,
        "side": children + masters_cpu(base) - before,
        "rss": watch.peak_mib,
        "threads": watch.threads,
        "fds": watch.fds,
        "emfile": said.count("Too many open files"),
    }


def close_masters(env, base):
    """`ral connections close`, then any master it left."""
    subprocess.run([RAL, "connections", "close"], env=env, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    for name in os.listdir(base):
        path = os.path.join(base, name, "master.pid")
        try:
            with open(path) as f:
                os.kill(int(f.read()), signal.SIGTERM)
        except (OSError, ValueError):
            pass
        try:
            os.remove(path)
        except OSError:
            pass


def run_size(work, size, runs):
    fleet_dir = os.path.join(work, "fleet-%d" % size)
    os.makedirs(fleet_dir)
    base, inventory = make_fleet(fleet_dir, size)
    manifest = os.path.join(fleet_dir, "manifest.yaml")
    with open(manifest, "w") as f:
        f.write(MANIFEST)
    controller = os.path.join(fleet_dir, "controller")
    os.makedirs(os.path.join(controller, "tmp"))
    runtime = os.path.join(fleet_dir, "run")
    os.makedirs(runtime, mode=0o700)
    env = {"PATH": os.path.join(work, "bin") + ":" + SYSTEM_PATH, "HOME": controller,
           "XDG_CACHE_HOME": controller, "TMPDIR": os.path.join(controller, "tmp"),
           "XDG_RUNTIME_DIR": runtime, "RAL_STANDIN_DIR": base}
    commands = {
        "ralsh": [RALSH, "-i", inventory, "user", "root"],
        "plan": [RAL, "plan", "-i", inventory, manifest],
    }
    results = {}
    # The hub that runs the targets' commands, outside ral's tree (see the
    # stand-in's doc).
    hub = subprocess.Popen([STANDIN, "--hub"], env=env, stdin=subprocess.DEVNULL,
                           start_new_session=True)
    while not os.path.exists(os.path.join(base, ".hub")):
        if hub.poll() is not None:
            sys.exit("the stand-in's hub did not start")
        time.sleep(0.01)
    try:
        # The providers copied to every target (each command has its own
        # set, so its own copy), and the metadata cache here.
        measure([RALSH, "--no-persist", "-i", inventory, "user", "root"], env, base, size)
        measure([RAL, "plan", "--no-persist", "-i", inventory, manifest], env, base, size)
        for name, argv in commands.items():
            no_persist = argv[:1] + (["plan", "--no-persist"] + argv[2:]
                                     if name == "plan" else ["--no-persist"] + argv[1:])
            for _ in range(runs):
                results.setdefault((name, "--no-persist"), []).append(
                    measure(no_persist, env, base, size))
                close_masters(env, base)
                results.setdefault((name, "cold"), []).append(measure(argv, env, base, size))
                results.setdefault((name, "warm"), []).append(measure(argv, env, base, size))
                print(size, name, {k[1]: "%.2f s" % v[-1]["wall"]
                                   for k, v in results.items() if k[0] == name},
                      file=sys.stderr)
    finally:
        close_masters(env, base)
        hub.terminate()
        hub.wait()
    return results


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="100,1000")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--no-section", action="store_true",
                        help="print the figures without writing the section")
    args = parser.parse_args()
    for program in (RALSH, RAL, STANDIN):
        if not os.path.exists(program):
            sys.exit("build first: cargo build --release --bins --example ssh_standin")
    sec = section.Section("fleet", "Fleets of 100 and 1,000 targets (a stand-in for ssh)",
                          "bench/fleet.py")
    work = tempfile.mkdtemp(prefix="ral-fleet-", dir="/tmp")
    os.makedirs(os.path.join(work, "bin"))
    os.symlink(STANDIN, os.path.join(work, "bin", "ssh"))
    sizes = [int(s) for s in args.sizes.split(",")]
    table = {}
    try:
        for size in sizes:
            table[size] = run_size(work, size, args.runs)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    med = statistics.median
    rows = [
        "| targets | command | connections | wall (median) | ral's CPU per target | "
        "target side's CPU per target | ral's peak RSS | most threads | most descriptors "
        "| descriptor errors |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    label = {"ralsh": "`ralsh -i INV user root`",
             "plan": "`ral plan -i INV` (20 resources)"}
    for size in sizes:
        for (name, mode), runs in table[size].items():
            rows.append(
                "| %d | %s | %s | %.2f s | %.1f ms | %.1f ms | %.0f MiB | %d | %d | %d |" % (
                    size, label[name], mode, med(r["wall"] for r in runs),
                    med(r["own"] for r in runs) / size * 1000,
                    med(r["side"] for r in runs) / size * 1000,
                    max(r["rss"] for r in runs), max(r["threads"] for r in runs),
                    max(r["fds"] for r in runs), sum(r["emfile"] for r in runs)))
    big = max(sizes)
    warm = [r for (name, mode), runs in table[big].items() if mode == "warm" for r in runs]
    worst_wall = max(med(r["wall"] for r in runs)
                     for (name, mode), runs in table[big].items() if mode == "warm")
    worst_rss = max(r["rss"] for runs in table[big].values() for r in runs)
    errors = sum(r["emfile"] for runs in table[big].values() for r in runs)
    out = [
        "Every target is a directory with its own HOME and fake root on this machine; "
        "`ssh` is a stand-in (`examples/ssh_standin.rs`) that runs the target's side "
        "here, its kept masters serving OpenSSH's multiplexing protocol on their "
        "sockets, so this measures ral's own cost, not a network's or sshd's. Default "
        "`--forks` (20), every run under `ulimit -n %d`, %d runs of each case, in "
        "rounds of `--no-persist`, cold (no kept master: `ral connections close` "
        "first) and warm (the masters the cold run left). ral's CPU is its own user and "
        "system time (read before it is reaped, its children not counted); the target "
        "side's is the children ral reaped (the stand-ins and what they ran) and the "
        "kept masters' own and their children's. Peak RSS is ral's own (VmHWM, "
        "polled every 20 ms, its children not counted); threads and descriptors are "
        "the most seen by the same polling." % (NOFILE, len(warm) and len(
            table[big][("ralsh", "warm")])),
        "",
    ] + rows + [
        "",
        "At %d targets, warm: the slowest median is %.1f s (goal ≤ 20 s: %s); ral's peak "
        "RSS in any case is %.0f MiB (goal ≤ 300 MB: %s); %d descriptor errors under "
        "`ulimit -n %d` (goal none: %s)." % (
            big, worst_wall, "met" if worst_wall <= 20 else "**not met**", worst_rss,
            "met" if worst_rss * 1.048576 <= 300 else "**not met**", errors, NOFILE,
            "met" if errors == 0 else "**not met**"),
    ]
    print("\n".join(out))
    if not args.no_section:
        sec.write("\n".join(out))


if __name__ == "__main__":
    main()
