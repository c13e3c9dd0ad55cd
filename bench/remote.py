#!/usr/bin/env python3
"""Figures for remote targets (docs/remote.md): writes the remote section
of BENCHMARKS.md (bench/section.py).

Starts its own sshd on 127.0.0.1 at a free port (keys made in a temporary
directory, the logins' HOME there too, sshd's default MaxStartups), then
measures, with the release build:

1. `ralsh user root` here against `ralsh -t T user root` on one target:
   the time one target adds, and what it is made of (connections accepted,
   ssh runs, CPU on both ends against a bare `ssh T true`).
2. 50 inventory entries on that one sshd: `ralsh -i INV user root` against
   Ansible's ad-hoc `ansible all -i INV -m getent -a 'database=passwd
   key=root'` (ansible-core from PyPI in a virtualenv, default settings:
   5 forks, no pipelining; its ControlPersist makes a second run within 60 s
   reuse the connections, so first and later runs are reported apart).

Usage: cargo build --release && python3 bench/remote.py [--runs N]
       [--ansible VENV] (VENV made with ansible-core if missing; default
       /tmp/ral-bench-ansible).
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
RALSH = os.path.join(REPO, "target/release/ralsh")
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
    if not os.path.exists(RALSH):
        sys.exit("build first: cargo build --release")
    sec = section.Section("remote", "Remote targets against a local run and Ansible",
                          "bench/remote.py")
    work = tempfile.mkdtemp(prefix="ral-bench-remote-")
    sshd, port, log = start_sshd(work)
    try:
        controller = os.path.join(work, "controller")
        os.makedirs(os.path.join(controller, "tmp"))
        # The system's PATH, not the caller's: a Python version manager's
        # shim ahead of /usr/bin/python3 would add its own start-up to every
        # provider call that runs Python, here but not on the targets (sshd
        # gives sessions its own PATH).
        env = {"PATH": SYSTEM_PATH, "HOME": controller,
               "XDG_CACHE_HOME": controller, "TMPDIR": os.path.join(controller, "tmp")}
        ssh_config = os.path.join(work, "ssh_config")
        local = [RALSH, "user", "root"]
        bare = ["ssh", "-F", ssh_config, "t1", "true"]
        remote = [RALSH, "--ssh-config", ssh_config, "-t", "t1", "user", "root"]
        # Warm up: the metadata cache here, the copy of the providers there.
        timed(local, env, 2)
        timed(bare, env, 2)
        timed(remote, env, 2)
        local_times = timed(local, env, args.runs)
        bare_cpu, remote_cpu = [], []
        bare_times = timed(bare, env, args.runs, sshd, bare_cpu)
        before = accepted(log)
        remote_times = timed(remote, env, args.runs, sshd, remote_cpu)
        connections = (accepted(log) - before) / args.runs
        # What one remote run is made of: ssh runs, from a traced run.
        trace = os.path.join(work, "trace")
        subprocess.run(["strace", "-f", "-qq", "-e", "trace=execve", "-o", trace] + remote,
                       env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        ssh_runs = None
        if os.path.exists(trace):
            with open(trace) as f:
                ssh_runs = sum('execve("/usr/bin/ssh"' in line and "= 0" in line for line in f)

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
                for i in range(1, TARGETS + 1):
                    f.write(f"    h{i:02}:\n      ansible_host: 127.0.0.1\n"
                            f"      ansible_port: {port}\n      ansible_user: root\n")
        fleet = [RALSH, "--ssh-config", ssh_config, "-i", inventory, "user", "root"]
        timed(fleet, env, 1)
        before = accepted(log)
        fleet_cpu = []
        fleet_times = timed(fleet, env, args.fleet_runs, sshd, fleet_cpu)
        fleet_connections = (accepted(log) - before) / args.fleet_runs
        ansible, version = ensure_ansible(args.ansible)
        ans_env = dict(env)
        ans_env["ANSIBLE_LOCAL_TEMP"] = os.path.join(controller, "ansible-tmp")
        adhoc = [ansible, "all", "-i", ans_inventory, "-m", "getent",
                 "-a", "database=passwd key=root"]
        first, later, first_cpu = [], [], []
        for _ in range(max(1, args.fleet_runs // 2)):
            # A first run: no ssh master of Ansible's left from before.
            shutil.rmtree(os.path.join(controller, ".ansible"), ignore_errors=True)
            subprocess.run(["pkill", "-f", os.path.join(controller, ".ansible/cp")])
            first += timed(adhoc, ans_env, 1, sshd, first_cpu)
            later += timed(adhoc, ans_env, 1)
    finally:
        sshd.terminate()
        sshd.wait()
        subprocess.run(["pkill", "-f", work])
        shutil.rmtree(work, ignore_errors=True)

    def msec(times):
        return f"{statistics.median(times) * 1000:.1f} ms"

    def sec_(times):
        return f"{statistics.median(times):.2f} s"

    med_fleet = statistics.median(fleet_times)
    med_first, med_later = statistics.median(first), statistics.median(later)
    openssh = subprocess.run(["ssh", "-V"], capture_output=True, text=True).stderr.strip()
    ratio_first, ratio_later = med_first / med_fleet, med_later / med_fleet
    runs_shown = "" if ssh_runs is None else f"; {ssh_runs} ssh runs (traced)"
    out = [
        f"The script starts its own sshd ({openssh}, its default limits) on 127.0.0.1; "
        f"every target is an inventory entry on that one server, so this machine "
        f"plays the controller and all the targets, with the system's PATH. {version} from PyPI in a "
        f"virtualenv, with its default settings (5 forks, no pipelining). CPU is "
        f"user and system time: the client's (the command and the children it "
        f"waited for) and sshd's (the connections it reaped). Ansible's "
        f"ControlPersist masters outlive its run, so neither their CPU nor sshd's "
        f"side of their connections can be counted: its row has the CPU of the "
        f"ansible processes alone.",
        "",
        "| case | median | runs | CPU per run | what it is made of |",
        "| --- | --- | --- | --- | --- |",
        f"| `ralsh user root`, here | {msec(local_times)} | {args.runs} | | |",
        f"| `ssh t1 true` | {msec(bare_times)} | {args.runs} | {cpu_ms(bare_cpu)} | "
        f"one login, nothing run |",
        f"| `ralsh -t t1 user root` | {msec(remote_times)} | {args.runs} | "
        f"{cpu_ms(remote_cpu)} | {connections:.1f} connections{runs_shown} |",
        f"| added by one target | "
        f"{(statistics.median(remote_times) - statistics.median(local_times)) * 1000:.1f} ms"
        f" | | | |",
        f"| {TARGETS} targets, `ralsh -i INV user root` | {sec_(fleet_times)} | "
        f"{args.fleet_runs} | {cpu_ms(fleet_cpu, TARGETS)} per target | "
        f"{fleet_connections:.0f} connections |",
        f"| {TARGETS} targets, `ansible all -i INV -m getent -a 'database=passwd key=root'`, "
        f"first run | {sec_(first)} | {len(first)} | "
        f"{cpu_ms(first_cpu, TARGETS, client_only=True)} per target, ansible alone"
        f" | |",
        f"| the same, a later run (reusing Ansible's ControlPersist masters) | "
        f"{sec_(later)} | {len(later)} | | |",
        "",
        f"Against {TARGETS} targets ralsh is **{ratio_first:.1f}x** faster than a first "
        f"Ansible run and {ratio_later:.1f}x faster than a later one (target ≥ 10x: "
        f"{'met' if ratio_first >= 10 else '**not met**'}). A 10x ratio would need ralsh "
        f"to take at most {med_first / 10 * 1000 / TARGETS:.0f} ms per target; one bare "
        f"`ssh true` here costs {cpu_ms(bare_cpu)} of CPU, on a machine with "
        f"{os.cpu_count()} CPUs.",
    ]
    print("\n".join(out))
    sec.write("\n".join(out))


if __name__ == "__main__":
    main()
