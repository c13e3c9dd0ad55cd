#!/usr/bin/env python3
"""Figures for machine facts (`ral facts`): writes the facts section of
BENCHMARKS.md (bench/section.py).

Measures, side by side, with the release build:

1. Here: `ral facts -j` (every core fact, the process's whole run: start,
   the facts provider served in process, the JSON printed) against
   Puppet's `facter -j` (every fact) and `facter -j os` (one fact, which
   Facter resolves alone). Goal: `ral facts` at least 50 times faster
   than `facter -j`.
2. On one target over ssh: `ral facts -t t1` (a connection of its own,
   `--no-persist`, and through the master a run before left open)
   against Ansible's fact gathering, `ansible t1 -m setup` (ansible-core
   in the virtualenv target/ansible-venv, made as .ci/run makes it when
   missing; default settings: no pipelining, ControlPersist), first
   (its masters closed) and later (reusing them). The target is an sshd
   the script starts on 127.0.0.1 at a free port, with keys made in a
   temporary directory, as the tests do; it logs in as root.

Usage: cargo build --release && python3 bench/facts.py [--runs N]
       [--remote-runs N]
Needs root (logins as root to the bench's own sshd), /usr/sbin/sshd and
facter (`apt-get install -y --no-install-recommends facter`). Changes
nothing on this machine; the ssh masters both tools keep are closed at
the end.
"""

import argparse
import glob
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import section  # noqa: E402
from remote import start_sshd  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET_DIR = os.environ.get("CARGO_TARGET_DIR") or os.path.join(REPO, "target")
RAL = os.path.join(TARGET_DIR, "release/ral")
VENV = os.environ.get("RAL_TEST_ANSIBLE_VENV") or os.path.join(TARGET_DIR, "ansible-venv")
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def timed(argv, env, runs, tolerated=(0,)):
    """Wall times of RUNS runs, each checked to end with a status of
    TOLERATED."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        proc = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True)
        times.append(time.perf_counter() - start)
        if proc.returncode not in tolerated:
            sys.exit(f"{' '.join(argv)} failed ({proc.returncode}):\n{proc.stderr}")
    return times


def facter_status(argv, env):
    """The exit status Facter ends with here, once its report is checked
    to be whole: it exits 1 when a fact fails to resolve (in some
    sandboxes, those that read /proc/1/environ), having printed the rest."""
    proc = subprocess.run(argv, env=env, capture_output=True, text=True)
    report = json.loads(proc.stdout)
    if "os" not in report or "networking" not in report:
        sys.exit(f"{' '.join(argv)} printed no os or networking:\n{proc.stderr}")
    return proc.returncode


def keys(value):
    """How many keys a JSON value holds, at every depth."""
    if isinstance(value, dict):
        return len(value) + sum(keys(v) for v in value.values())
    if isinstance(value, list):
        return sum(keys(v) for v in value)
    return 0


def ensure_ansible():
    """The virtualenv's ansible, made as .ci/run makes it when missing."""
    ansible = os.path.join(VENV, "bin/ansible")
    if not os.path.exists(ansible):
        subprocess.run([sys.executable, "-m", "venv", VENV], check=True)
        subprocess.run([os.path.join(VENV, "bin/pip"), "install", "--quiet",
                        "--disable-pip-version-check", "ansible-core"], check=True)
    version = subprocess.run([ansible, "--version"], capture_output=True, text=True)
    return ansible, version.stdout.splitlines()[0]


def close_ansible_masters(controller, env):
    """Ends the ControlPersist masters Ansible left (one socket each)."""
    for socket_path in glob.glob(os.path.join(controller, ".ansible/cp/*")):
        subprocess.run(["ssh", "-o", "ControlPath=" + socket_path, "-O", "exit", "t1"],
                       env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--remote-runs", type=int, default=10)
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("run as root: the bench logs in as root to its own sshd")
    if not os.path.exists(RAL):
        sys.exit("build first: cargo build --release")
    facter = shutil.which("facter")
    if facter is None:
        sys.exit("no facter: apt-get install -y --no-install-recommends facter")
    sec = section.Section("facts", "Machine facts against Facter and Ansible's setup",
                          "bench/facts.py")
    work = tempfile.mkdtemp(prefix="ral-bench-facts-")
    sshd, port, _log = start_sshd(work)
    controller = os.path.join(work, "controller")
    os.makedirs(os.path.join(controller, "tmp"))
    runtime = os.path.join(work, "run")
    os.makedirs(runtime, mode=0o700)
    # The system's PATH and a HOME of the bench's: the same for every tool.
    env = {"PATH": SYSTEM_PATH, "HOME": controller, "XDG_CACHE_HOME": controller,
           "TMPDIR": os.path.join(controller, "tmp"), "XDG_RUNTIME_DIR": runtime,
           "LANG": "C.UTF-8"}
    ssh_config = os.path.join(work, "ssh_config")
    inventory = os.path.join(work, "inventory.yaml")
    with open(inventory, "w") as f:
        f.write(f"all:\n  vars:\n    ansible_ssh_common_args: -F {ssh_config}\n"
                f"    ansible_python_interpreter: /usr/bin/python3\n"
                f"  hosts:\n    t1:\n      ansible_port: {port}\n      ansible_user: root\n")
    ansible, version = ensure_ansible()
    ans_env = dict(env)
    ans_env["ANSIBLE_LOCAL_TEMP"] = os.path.join(controller, "ansible-tmp")
    ans_env["ANSIBLE_HOST_KEY_CHECKING"] = "False"
    close = [RAL, "connections", "close"]
    try:
        here = [RAL, "facts", "-j"]
        facter_all = [facter, "-j"]
        facter_os = [facter, "-j", "os"]
        remote = [RAL, "facts", "-j", "--ssh-config", ssh_config, "-t", "t1"]
        cold = remote[:2] + ["--no-persist"] + remote[2:]
        setup = [ansible, "t1", "-i", inventory, "-m", "setup"]
        # Warm up: the bundled providers here, the copy there, the caches.
        timed(here, env, 3)
        facter_ends = (facter_status(facter_all, env),)
        timed(facter_os, env, 1)
        timed(cold, env, 2)
        timed(setup, ans_env, 1)
        ral_here, all_facter, os_facter = [], [], []
        ral_cold, ral_warm, setup_first, setup_later = [], [], [], []
        # Side by side: each round runs every case once.
        for round_ in range(args.runs):
            ral_here += timed(here, env, 1)
            if round_ % 4 == 0:
                all_facter += timed(facter_all, env, 1, facter_ends)
                os_facter += timed(facter_os, env, 1)
        for _ in range(args.remote_runs):
            timed(close, env, 1)
            ral_cold += timed(cold, env, 1)
            timed(remote, env, 1)
            ral_warm += timed(remote, env, 1)
            close_ansible_masters(controller, env)
            setup_first += timed(setup, ans_env, 1)
            setup_later += timed(setup, ans_env, 1)
        facts_count = keys(json.loads(subprocess.run(here, env=env, capture_output=True,
                                                     text=True).stdout))
    finally:
        subprocess.run(close, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        close_ansible_masters(controller, env)
        sshd.terminate()
        sshd.wait()
        shutil.rmtree(work, ignore_errors=True)

    med = statistics.median

    def ms(times):
        return f"{med(times) * 1000:.1f} ms"

    facter_version = subprocess.run([facter, "--version"], capture_output=True,
                                    text=True).stdout.strip()
    ratio_all = med(all_facter) / med(ral_here)
    ratio_os = med(os_facter) / med(ral_here)
    ratio_cold = med(setup_first) / med(ral_cold)
    ratio_warm = med(setup_later) / med(ral_warm)
    out = [
        f"Facter {facter_version} (Debian's package) and {version} (from PyPI, in the "
        f"virtualenv `target/ansible-venv`, its default settings: no pipelining, "
        f"ControlPersist) against `ral facts` of the release build, with the system's PATH "
        f"and a HOME of the script's for every tool. Here the cases run side by side: "
        f"`ral facts` every round, Facter every fourth. The target is an sshd the script "
        f"starts on 127.0.0.1 (this machine plays both ends); each round closes both tools' "
        f"kept connections, then runs ral with a connection of its own (`--no-persist`), ral "
        f"through the master a run left open, Ansible's `setup` first (no master) and later "
        f"(reusing its master). `ral facts` reports the core facts ({facts_count} keys at "
        f"every depth, in JSON); Facter's and Ansible's reports hold more (disks, SSH keys, "
        f"mounts, environment)."
        + ("" if facter_ends == (0,) else
           f" Facter exits {facter_ends[0]} here, a fact failing to resolve in this sandbox "
           f"(it cannot read /proc/1/environ), having printed the others."),
        "",
        "| case | median | runs |",
        "| --- | --- | --- |",
        f"| `ral facts -j` | {ms(ral_here)} | {len(ral_here)} |",
        f"| `facter -j` (every fact) | {ms(all_facter)} | {len(all_facter)} |",
        f"| `facter -j os` (one fact) | {ms(os_facter)} | {len(os_facter)} |",
        f"| `ral facts -j --no-persist -t t1` | {ms(ral_cold)} | {len(ral_cold)} |",
        f"| `ral facts -j -t t1`, through a kept master | {ms(ral_warm)} | {len(ral_warm)} |",
        f"| `ansible t1 -m setup`, first (no master) | {ms(setup_first)} | "
        f"{len(setup_first)} |",
        f"| `ansible t1 -m setup`, later (reusing its master) | {ms(setup_later)} | "
        f"{len(setup_later)} |",
        "",
        f"Here `ral facts` is **{ratio_all:.0f}x** faster than `facter -j` (goal ≥ 50x: "
        f"{'met' if ratio_all >= 50 else '**not met**'}) and {ratio_os:.0f}x faster than "
        f"Facter asked for `os` alone. On the target it is {ratio_cold:.1f}x faster than "
        f"Ansible's `setup` on a first run and {ratio_warm:.1f}x faster reusing its "
        f"connection.",
    ]
    print("\n".join(out))
    sec.write("\n".join(out))


if __name__ == "__main__":
    main()
