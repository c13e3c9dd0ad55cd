#!/usr/bin/env python3
"""Figures for remote targets (docs/remote.md, BENCHMARKS.md).

Starts its own sshd on 127.0.0.1 at a free port (keys made in a temporary
directory, the logins' HOME there too, sshd's default MaxStartups), then
measures, with the release build:

1. `ralsh user root` here against `ralsh -t T user root` on one target:
   the time one target adds, and what it is made of (connections accepted,
   ssh runs).
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

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RALSH = os.path.join(REPO, "target/release/ralsh")
TARGETS = 50


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


def timed(argv, env, runs):
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        done = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True)
        times.append(time.perf_counter() - start)
        if done.returncode != 0:
            sys.exit(f"{' '.join(argv)} failed ({done.returncode}):\n{done.stderr}")
    return times


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
    parser.add_argument("--fleet-runs", type=int, default=5)
    parser.add_argument("--ansible", default="/tmp/ral-bench-ansible")
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("run as root: the bench logs in as root to its own sshd")
    if not os.path.exists(RALSH):
        sys.exit("build first: cargo build --release")
    work = tempfile.mkdtemp(prefix="ral-bench-remote-")
    sshd, port, log = start_sshd(work)
    try:
        controller = os.path.join(work, "controller")
        os.makedirs(os.path.join(controller, "tmp"))
        env = {"PATH": os.environ["PATH"], "HOME": controller,
               "XDG_CACHE_HOME": controller, "TMPDIR": os.path.join(controller, "tmp")}
        ssh_config = os.path.join(work, "ssh_config")
        local = [RALSH, "user", "root"]
        remote = [RALSH, "--ssh-config", ssh_config, "-t", "t1", "user", "root"]
        # Warm up: the metadata cache here, the copy of the providers there.
        timed(local, env, 2)
        timed(remote, env, 2)
        before = accepted(log)
        local_times = timed(local, env, args.runs)
        remote_times = timed(remote, env, args.runs)
        connections = (accepted(log) - before) / args.runs
        # What one remote run is made of: ssh runs, from a traced run.
        trace = os.path.join(work, "trace")
        subprocess.run(["strace", "-f", "-qq", "-e", "trace=execve", "-o", trace] + remote,
                       env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        ssh_runs = 0
        if os.path.exists(trace):
            with open(trace) as f:
                ssh_runs = sum('execve("/usr/bin/ssh"' in line and "= 0" in line for line in f)
        med_local = statistics.median(local_times)
        med_remote = statistics.median(remote_times)
        print(f"ralsh user root, here:            median {med_local * 1000:.1f} ms "
              f"(min {min(local_times) * 1000:.1f}) over {args.runs}")
        print(f"ralsh -t t1 user root, one target: median {med_remote * 1000:.1f} ms "
              f"(min {min(remote_times) * 1000:.1f}) over {args.runs}")
        print(f"  added by the target: {(med_remote - med_local) * 1000:.1f} ms; "
              f"connections per run: {connections:.1f}; ssh runs per run: {ssh_runs or 'n/a (no strace)'}")

        # 50 targets on the one sshd.
        inventory = os.path.join(work, "inventory.yaml")
        with open(inventory, "w") as f:
            f.write("all:\n  vars:\n")
            f.write(f"    ansible_ssh_common_args: -F {ssh_config}\n")
            f.write("    ansible_python_interpreter: /usr/bin/python3\n")
            f.write("  hosts:\n")
            for i in range(1, TARGETS + 1):
                f.write(f"    h{i:02}:\n      ansible_host: 127.0.0.1\n"
                        f"      ansible_port: {port}\n      ansible_user: root\n")
        fleet = [RALSH, "--ssh-config", ssh_config, "-i", inventory, "user", "root"]
        timed(fleet, env, 1)
        before = accepted(log)
        fleet_times = timed(fleet, env, args.fleet_runs)
        fleet_connections = (accepted(log) - before) / args.fleet_runs
        ansible, version = ensure_ansible(args.ansible)
        ans_env = dict(env)
        ans_env["ANSIBLE_LOCAL_TEMP"] = os.path.join(controller, "ansible-tmp")
        adhoc = [ansible, "all", "-i", inventory, "-m", "getent",
                 "-a", "database=passwd key=root"]
        first = []
        later = []
        for _ in range(max(1, args.fleet_runs // 2)):
            # A first run: no ssh master of Ansible's left from before.
            shutil.rmtree(os.path.join(controller, ".ansible"), ignore_errors=True)
            subprocess.run(["pkill", "-f", os.path.join(controller, ".ansible/cp")])
            first += timed(adhoc, ans_env, 1)
            later += timed(adhoc, ans_env, 1)
        med_fleet = statistics.median(fleet_times)
        print(f"{TARGETS} targets, ralsh -i INV user root: median {med_fleet:.2f} s "
              f"over {args.fleet_runs} ({fleet_connections:.0f} connections per run)")
        print(f"{TARGETS} targets, {version}, ansible all -m getent: "
              f"first run median {statistics.median(first):.2f} s, "
              f"runs reusing its ControlPersist masters median {statistics.median(later):.2f} s")
        print(f"  ralsh is {statistics.median(first) / med_fleet:.1f}x faster than a first "
              f"Ansible run, {statistics.median(later) / med_fleet:.1f}x than a later one")
    finally:
        sshd.terminate()
        sshd.wait()
        subprocess.run(["pkill", "-f", work])
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
