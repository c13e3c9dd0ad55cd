#!/usr/bin/env python3
"""Figures for remote targets (docs/remote.md): writes the remote section
of BENCHMARKS.md (bench/section.py).

Starts its own sshd on 127.0.0.1 at a free port (keys made in a temporary
directory, the logins' HOME there too, sshd's default MaxStartups), then
measures, with the release build:

1. `ralsh user root` here against `ralsh -t T user root` on one target:
   the time one target adds, and what it is made of (connections accepted,
   ssh runs, CPU on both ends against a bare `ssh T true`), with a
   connection of its own (`--no-persist`) and through the one a run before
   left open (warm).
2. 50 inventory entries on that one sshd, side by side in rounds: `ralsh -i
   INV user root` cold (no master left: `ral connections close` first) and
   warm (reusing the masters the cold run left), against Ansible's ad-hoc
   `ansible all -i INV -m getent -a 'database=passwd key=root'`
   (ansible-core from PyPI in a virtualenv, default settings: 5 forks, no
   pipelining) first (its ControlPersist masters removed) and later (reusing
   them, its default). `ralsh --no-persist` is shown too.

Usage: cargo build --release && python3 bench/remote.py [--runs N]
       [--fleet-runs N] [--ansible VENV] (VENV made with ansible-core if
       missing; default /tmp/ral-bench-ansible).
Needs root (logins as root to the bench's own sshd), /usr/sbin/sshd.
Reads the real /etc/passwd of this machine through the target; changes
nothing.
"""

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import section  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET_DIR = os.environ.get("CARGO_TARGET_DIR") or os.path.join(REPO, "target")
RALSH = os.path.join(TARGET_DIR, "release/ralsh")
RAL = os.path.join(TARGET_DIR, "release/ral")
TARGETS = 50
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_sshd(work):
    for name in ("host_key", "user_key"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f",
                        os.path.join(work, name)], check=True)
    shutil.copy(os.path.join(work, "user_key.pub"), os.path.join(work, "authorized_keys"))
    os.makedirs(os.path.join(work, "home"), exist_ok=True)
    os.makedirs("/run/sshd", exist_ok=True)
    port = free_port()
    with open(os.path.join(work, "sshd_config"), "w") as f:
        f.write(f"""Port {port}
ListenAddress 127.0.0.1
HostKey {work}/host_key
PidFile none
AuthorizedKeysFile {work}/authorized_keys
StrictModes no
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
PermitRootLogin prohibit-password
SetEnv HOME={work}/home
LogLevel INFO
""")
    with open(os.path.join(work, "ssh_config"), "w") as f:
        f.write(f"""Host *
  HostName 127.0.0.1
  Port {port}
  User root
  IdentityFile {work}/user_key
  IdentitiesOnly yes
  StrictHostKeyChecking accept-new
  UserKnownHostsFile {work}/known_hosts
""")
    log = open(os.path.join(work, "sshd.log"), "w")
    sshd = subprocess.Popen(["/usr/sbin/sshd", "-D", "-e", "-f",
                             os.path.join(work, "sshd_config")],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    for line in sshd.stderr:
        log.write(line)
        if "Server listening on 127.0.0.1" in line:
            break
    else:
        sys.exit("sshd did not start; see " + log.name)
    # Keep draining its log so it never blocks.
    import threading

    def drain():
        for line in sshd.stderr:
            log.write(line)
            log.flush()
    threading.Thread(target=drain, daemon=True).start()
    return sshd, port, log.name


def sshd_cpu(sshd):
    """CPU seconds of the sshd's connections so far: the user and system
    time of the children it has reaped (/proc/PID/stat's cutime and
    cstime)."""
    with open("/proc/%d/stat" % sshd.pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[13]) + int(fields[14])) / os.sysconf("SC_CLK_TCK")


def timed(argv, env, runs, sshd=None, cpu=None):
    """Wall times of RUNS runs. With CPU (a list), appends the CPU seconds
    of each run: the command's and the children it waited for (wait4),
    plus sshd's side when SSHD is given."""
    times = []
    for _ in range(runs):
        server = sshd_cpu(sshd) if sshd else 0.0
        start = time.perf_counter()
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True)
        stderr = proc.stderr.read()
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        times.append(time.perf_counter() - start)
        if os.waitstatus_to_exitcode(status) != 0:
            sys.exit(f"{' '.join(argv)} failed ({status}):\n{stderr}")
        if cpu is not None:
            # sshd reaps a connection's process just after the client ends.
            time.sleep(0.05)
            client = usage.ru_utime + usage.ru_stime
            cpu.append((client, (sshd_cpu(sshd) - server) if sshd else 0.0))
    return times


def cpu_ms(cpu, per=1, client_only=False):
    """"C ms (client A, sshd B)": medians of CPU runs, divided by PER; or
    the client's alone."""
    client = statistics.median(c for c, _ in cpu) / per * 1000
    server = statistics.median(s for _, s in cpu) / per * 1000
    if client_only:
        return f"{client:.0f} ms"
    return f"{client + server:.0f} ms (client {client:.0f}, sshd {server:.0f})"


def accepted(log):
    with open(log) as f:
        return sum("Accepted publickey" in line for line in f)


def ensure_ansible(venv):
    ansible = os.path.join(venv, "bin/ansible")
    if not os.path.exists(ansible):
        subprocess.run([sys.executable, "-m", "venv", venv], check=True)
        subprocess.run([os.path.join(venv, "bin/pip"), "install", "-q", "ansible-core"],
                       check=True)
    version = subprocess.run([ansible, "--version"], capture_output=True, text=True)
    return ansible, version.stdout.splitlines()[0]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--fleet-runs", type=int, default=4)
    parser.add_argument("--ansible", default="/tmp/ral-bench-ansible")
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("run as root: the bench logs in as root to its own sshd")
    if not (os.path.exists(RALSH) and os.path.exists(RAL)):
        sys.exit("build first: cargo build --release")
    sec = section.Section("remote", "Remote targets against a local run and Ansible",
                          "bench/remote.py")
    work = tempfile.mkdtemp(prefix="ral-bench-remote-")
    sshd, port, log = start_sshd(work)
    try:
        controller = os.path.join(work, "controller")
        os.makedirs(os.path.join(controller, "tmp"))
        runtime = os.path.join(work, "run")
        os.makedirs(runtime, mode=0o700)
        # The system's PATH, not the caller's: a Python version manager's
        # shim ahead of /usr/bin/python3 would add its own start-up to every
        # provider call that runs Python, here but not on the targets (sshd
        # gives sessions its own PATH). ral keeps its connections in
        # XDG_RUNTIME_DIR.
        env = {"PATH": SYSTEM_PATH, "HOME": controller, "XDG_CACHE_HOME": controller,
               "TMPDIR": os.path.join(controller, "tmp"), "XDG_RUNTIME_DIR": runtime}
        ssh_config = os.path.join(work, "ssh_config")
        close = [RAL, "connections", "close"]
        local = [RALSH, "user", "root"]
        bare = ["ssh", "-F", ssh_config, "t1", "true"]
        remote = [RALSH, "--ssh-config", ssh_config, "-t", "t1", "user", "root"]
        cold_one = remote[:1] + ["--no-persist"] + remote[1:]
        # Warm up: the metadata cache here, the copy of the providers there.
        timed(local, env, 2)
        timed(bare, env, 2)
        timed(cold_one, env, 2)
        local_times = timed(local, env, args.runs)
        bare_cpu, cold_one_cpu, warm_one_cpu = [], [], []
        bare_times = timed(bare, env, args.runs, sshd, bare_cpu)
        before = accepted(log)
        cold_one_times = timed(cold_one, env, args.runs, sshd, cold_one_cpu)
        cold_one_logins = (accepted(log) - before) / args.runs
        timed(remote, env, 1)
        before = accepted(log)
        warm_one_times = timed(remote, env, args.runs, None, warm_one_cpu)
        warm_one_logins = (accepted(log) - before) / args.runs
        # What one remote run is made of: ssh runs, from traced runs.
        def ssh_runs(argv):
            trace = os.path.join(work, "trace")
            subprocess.run(["strace", "-f", "-qq", "-e", "trace=execve", "-o", trace] + argv,
                           env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            if not os.path.exists(trace):
                return None
            with open(trace) as f:
                runs = sum('execve("/usr/bin/ssh"' in line and "= 0" in line for line in f)
            os.remove(trace)
            return runs
        cold_one_ssh = ssh_runs(cold_one)
        warm_one_ssh = ssh_runs(remote)
        timed(close, env, 1)

        # 50 targets on the one sshd.
        # The same hosts for both; Ansible is given the ssh config through
        # its inventory, ralsh through --ssh-config (it refuses an -F in
        # ansible_ssh_common_args, which would change what its sessions do).
        inventory = os.path.join(work, "inventory.yaml")
        ans_inventory = os.path.join(work, "ansible-inventory.yaml")
        for path, extra in ((inventory, ""),
                            (ans_inventory, f"    ansible_ssh_common_args: -F {ssh_config}\n")):
            with open(path, "w") as f:
                f.write("all:\n  vars:\n" + extra)
                f.write("    ansible_python_interpreter: /usr/bin/python3\n")
                f.write("  hosts:\n")
                # No ansible_host: each target connects to its own name (the
                # ssh config sends them all to 127.0.0.1), so that each is a
                # connection of its own for both tools, as on a fleet (with
                # one address, Ansible's ControlPath would give all 50 one
                # master).
                for i in range(1, TARGETS + 1):
                    f.write(f"    h{i:02}:\n"
                            f"      ansible_port: {port}\n      ansible_user: root\n")
        fleet = [RALSH, "--ssh-config", ssh_config, "-i", inventory, "user", "root"]
        no_persist = fleet[:1] + ["--no-persist"] + fleet[1:]
        ansible, version = ensure_ansible(args.ansible)
        ans_env = dict(env)
        ans_env["ANSIBLE_LOCAL_TEMP"] = os.path.join(controller, "ansible-tmp")
        adhoc = [ansible, "all", "-i", ans_inventory, "-m", "getent",
                 "-a", "database=passwd key=root"]
        timed(no_persist, env, 1)
        cold, warm, bare_fleet, first, later = [], [], [], [], []
        cold_cpu, warm_cpu, bare_fleet_cpu, first_cpu, later_cpu = [], [], [], [], []
        logins = {"cold": 0, "warm": 0, "no-persist": 0}
        for _ in range(args.fleet_runs):
            # ral, cold: none of its masters left from before; then warm.
            timed(close, env, 1)
            before = accepted(log)
            cold += timed(fleet, env, 1, None, cold_cpu)
            logins["cold"] += accepted(log) - before
            before = accepted(log)
            warm += timed(fleet, env, 1, None, warm_cpu)
            logins["warm"] += accepted(log) - before
            timed(close, env, 1)
            before = accepted(log)
            bare_fleet += timed(no_persist, env, 1, sshd, bare_fleet_cpu)
            logins["no-persist"] += accepted(log) - before
            # Ansible, a first run: no ssh master of its own left from
            # before; then a later one, reusing them.
            shutil.rmtree(os.path.join(controller, ".ansible"), ignore_errors=True)
            subprocess.run(["pkill", "-f", os.path.join(controller, ".ansible/cp")])
            first += timed(adhoc, ans_env, 1, None, first_cpu)
            later += timed(adhoc, ans_env, 1, None, later_cpu)
        timed(close, env, 1)
    finally:
        sshd.terminate()
        sshd.wait()
        subprocess.run(["pkill", "-f", work])
        shutil.rmtree(work, ignore_errors=True)

    def msec(times):
        return f"{statistics.median(times) * 1000:.1f} ms"

    def sec_(times):
        return f"{statistics.median(times):.2f} s"

    med = statistics.median
    ratio_cold, ratio_warm = med(first) / med(cold), med(later) / med(warm)
    openssh = subprocess.run(["ssh", "-V"], capture_output=True, text=True).stderr.strip()

    def traced(runs):
        return "" if runs is None else f"; {runs} ssh runs (traced)"

    def per_target(cpu):
        return f"{cpu_ms(cpu, TARGETS, client_only=True)} per target, client alone"

    rounds = args.fleet_runs
    out = [
        f"The script starts its own sshd ({openssh}, its default limits) on 127.0.0.1; "
        f"every target is an inventory entry on that one server, under a name of its own "
        f"(the ssh config sends every name there), so that each is a connection of its "
        f"own for both tools, as on a fleet, and this machine plays the controller and "
        f"all the targets, with the system's PATH. {version} from "
        f"PyPI in a virtualenv, with its default settings (5 forks, no pipelining, "
        f"ControlPersist 60 s). CPU is user and system time: the client's (the command and "
        f"the children it waited for) and, where it can be counted, sshd's (the connections "
        f"it reaped). Both tools' kept masters outlive their runs, so neither their CPU nor "
        f"sshd's side of their connections can be counted: those rows have the client's CPU "
        f"alone. The {TARGETS}-target cases run side by side, in {rounds} rounds of: ralsh "
        f"cold (`ral connections close` first), ralsh warm (the masters the cold run left), "
        f"ralsh `--no-persist`, Ansible first (its masters removed), Ansible later.",
        "",
        "| case | median | runs | CPU per run | what it is made of |",
        "| --- | --- | --- | --- | --- |",
        f"| `ralsh user root`, here | {msec(local_times)} | {args.runs} | | |",
        f"| `ssh t1 true` | {msec(bare_times)} | {args.runs} | {cpu_ms(bare_cpu)} | "
        f"one login, nothing run |",
        f"| `ralsh --no-persist -t t1 user root` | {msec(cold_one_times)} | {args.runs} | "
        f"{cpu_ms(cold_one_cpu)} | {cold_one_logins:.1f} logins{traced(cold_one_ssh)} |",
        f"| `ralsh -t t1 user root`, warm | {msec(warm_one_times)} | {args.runs} | "
        f"{cpu_ms(warm_one_cpu, client_only=True)}, client alone | "
        f"{warm_one_logins:.1f} logins{traced(warm_one_ssh)} |",
        f"| added by one target, warm | "
        f"{(med(warm_one_times) - med(local_times)) * 1000:.1f} ms | | | |",
        f"| {TARGETS} targets, `ralsh -i INV user root`, cold | {sec_(cold)} | {len(cold)} | "
        f"{per_target(cold_cpu)} | {logins['cold'] / rounds:.0f} logins |",
        f"| the same, warm | {sec_(warm)} | {len(warm)} | {per_target(warm_cpu)} | "
        f"{logins['warm'] / rounds:.0f} logins |",
        f"| the same, `--no-persist` | {sec_(bare_fleet)} | {len(bare_fleet)} | "
        f"{cpu_ms(bare_fleet_cpu, TARGETS)} per target | "
        f"{logins['no-persist'] / rounds:.0f} logins |",
        f"| {TARGETS} targets, `ansible all -i INV -m getent -a 'database=passwd key=root'`, "
        f"first run | {sec_(first)} | {len(first)} | {per_target(first_cpu)} | |",
        f"| the same, a later run (reusing its ControlPersist masters) | "
        f"{sec_(later)} | {len(later)} | {per_target(later_cpu)} | |",
        "",
        f"Against {TARGETS} targets ralsh is **{ratio_cold:.1f}x** faster than Ansible cold "
        f"(both first runs; target ≥ 3x: {'met' if ratio_cold >= 3 else '**not met**'}) and "
        f"**{ratio_warm:.1f}x** faster warm (both reusing their masters; target ≥ 10x: "
        f"{'met' if ratio_warm >= 10 else '**not met**'}); `--no-persist` is "
        f"{med(first) / med(bare_fleet):.1f}x faster than Ansible's first run. One bare "
        f"`ssh true` here costs {cpu_ms(bare_cpu)} of CPU, on a machine with "
        f"{os.cpu_count()} CPUs.",
    ]
    print("\n".join(out))
    sec.write("\n".join(out))


if __name__ == "__main__":
    main()
