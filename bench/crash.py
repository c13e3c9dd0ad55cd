#!/usr/bin/env python3
"""Crash bench: SIGKILL ralsh and its provider at random moments of a change,
and check what every crash leaves behind.

For each writable bundled provider, on a fake root seeded with large files
(5,000 accounts, 5,000 hosts and fstab entries, 2,000 cron jobs and keys),
each run starts a change of a new resource, kills ralsh and the provider's
process group with SIGKILL after a random delay (half of them anywhere up
to 1.2 times a whole change, half in its second half, where the files are
written), and then checks:

- straight after the kill: the files still parse (a listing succeeds
  without warnings; readers see an interrupted edit as finished), and, for
  the account files, whether pwck -r -q and grpck -r accept them and
  whether ral's own check does (no account is incomplete);
- after the same change is run again to its end, the resource is there
  and complete (also when the rerun finds nothing to change, because the
  killed run had gone far enough: readers see an interrupted edit finished);
- after the next edit (a change of another new resource, which is sure to
  write): no temporary file or journal of ral's is left anywhere below the
  root, pwck/grpck accept the files, and every change that had reported
  success before is still there.

Run from the repository root after `cargo build --release`, as root (for
pwck and grpck, which chroot):

    python3 bench/crash.py [--runs 200] [--providers host,user,...]

Prints one line per provider and exits 1 if any check that must always
hold failed.
"""

import argparse
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RALSH = os.path.join(ROOT, "target", "release", "ralsh")
ED25519 = "AAAAC3NzaC1lZDI1NTE5AAAAIB50a3nIQpXr2jxsUTP0b4hg2hNb+WrkStPakYJWDCCl"


def seed_accounts(root, users):
    etc = os.path.join(root, "etc")
    os.makedirs(etc, exist_ok=True)
    passwd = ["root:x:0:0:root:/root:/bin/bash"]
    shadow = ["root:*:19700:0:99999:7:::"]
    group = ["root:x:0:", "users:x:100:"]
    gshadow = ["root:*::", "users:!::"]
    for n in range(users):
        name = "seed%d" % n
        passwd.append("%s:x:%d:%d::/home/%s:/bin/sh" % (name, 2000 + n, 2000 + n, name))
        shadow.append("%s:!:19700:0:99999:7:::" % name)
        group.append("%s:x:%d:" % (name, 2000 + n))
        gshadow.append("%s:!::" % name)
    for name, lines, mode in (("passwd", passwd, 0o644), ("shadow", shadow, 0o640),
                              ("group", group, 0o644), ("gshadow", gshadow, 0o640)):
        path = os.path.join(etc, name)
        with open(path, "w") as fh:
            fh.write("\n".join(lines) + "\n")
        os.chmod(path, mode)


def seed_hosts(root):
    os.makedirs(os.path.join(root, "etc"), exist_ok=True)
    with open(os.path.join(root, "etc/hosts"), "w") as fh:
        fh.write("127.0.0.1\tlocalhost\n")
        for n in range(5000):
            fh.write("10.%d.%d.%d\tseed%d.example\n" % (n // 65536, n // 256 % 256, n % 256, n))


def seed_fstab(root):
    os.makedirs(os.path.join(root, "etc"), exist_ok=True)
    with open(os.path.join(root, "etc/fstab"), "w") as fh:
        for n in range(5000):
            fh.write("/dev/seed%d\t/srv/seed%d\text4\tdefaults\t0\t2\n" % (n, n))


def seed_cron(root):
    seed_accounts(root, 10)
    spool = os.path.join(root, "var/spool/cron/crontabs")
    os.makedirs(spool)
    with open(os.path.join(spool, "seed0"), "w") as fh:
        for n in range(2000):
            fh.write("# ral: seed-job%d\n%d * * * * true\n" % (n, n % 60))
    os.chmod(os.path.join(spool, "seed0"), 0o600)


def seed_keys(root):
    seed_accounts(root, 10)
    ssh = os.path.join(root, "home/seed0/.ssh")
    os.makedirs(ssh)
    with open(os.path.join(ssh, "authorized_keys"), "w") as fh:
        for n in range(2000):
            fh.write("ssh-ed25519 %s seed-key%d\n" % (ED25519, n))


def seed_files(root):
    os.makedirs(os.path.join(root, "srv"))


# kind: (seed, attributes of the Nth new resource: (name, [ATTR=VALUE]))
PROVIDERS = {
    "user": (lambda root: seed_accounts(root, 5000),
             lambda n: ("crash%d" % n, ["ensure=present", "groups=users"])),
    "group": (lambda root: seed_accounts(root, 5000),
              lambda n: ("crashg%d" % n, ["ensure=present"])),
    "host": (seed_hosts,
             lambda n: ("crash%d.example" % n, ["ip=10.200.%d.%d" % (n // 250 % 250, n % 250)])),
    "mount": (seed_fstab,
              lambda n: ("/mnt/crash%d" % n, ["device=/dev/crash%d" % n, "fstype=ext4"])),
    "cron": (seed_cron,
             lambda n: ("crash-job%d" % n, ["user=seed0", "command=true %d" % n])),
    "ssh_authorized_key": (seed_keys,
                           lambda n: ("crash-key%d" % n, ["user=seed0", "type=ssh-ed25519",
                                                          "key=" + ED25519])),
    "file": (seed_files,
             lambda n: ("/srv/crash%d" % n, ["content=%s\n" % ("x" * 100000)])),
}


class Bench:
    def __init__(self, kind, runs, scratch):
        self.kind = kind
        self.runs = runs
        self.root = os.path.join(scratch, kind, "root")
        os.makedirs(self.root)
        self.env = {"PATH": os.environ["PATH"], "HOME": os.path.join(scratch, kind),
                    "XDG_CACHE_HOME": os.path.join(scratch, kind, "cache")}
        self.seed, self.new = PROVIDERS[kind]
        self.seed(self.root)
        self.done = []            # names whose change reported success
        self.counts = dict.fromkeys((
            "kills in the provider", "listing failed", "incomplete after kill",
            "pwck refused after kill", "temp files after kill",
            "temp files after next edit", "journal after next edit",
            "missing after rerun", "lost after success",
            "pwck refused after next edit", "torn files after kill"), 0)

    def ralsh(self, *args, check=True):
        done = subprocess.run([RALSH, "--root", self.root] + list(args), env=self.env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if check and done.returncode != 0:
            raise SystemExit("%s: ralsh %s failed:\n%s" % (self.kind, " ".join(args),
                                                           done.stderr))
        return done

    def change(self, n):
        name, attrs = self.new(n)
        return name, [self.kind, name] + attrs

    def typical_duration(self):
        times = []
        for n in range(5):
            _, args = self.change(10**6 + n)
            started = time.monotonic()
            self.ralsh(*args)
            times.append(time.monotonic() - started)
        return statistics.median(times)

    def kill_during(self, args, delay):
        """Runs ralsh ARGS and SIGKILLs it and its provider DELAY seconds in;
        returns whether the provider was running then."""
        proc = subprocess.Popen([RALSH, "--root", self.root] + args, env=self.env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(delay)
        children = self.descendants(proc.pid)
        # The provider runs in a process group of its own (ralsh's doing).
        for child in children:
            try:
                os.killpg(child, signal.SIGKILL)
            except OSError:
                pass
        try:
            os.kill(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        proc.wait()
        return bool(children)

    @staticmethod
    def descendants(pid):
        try:
            with open("/proc/%d/task/%d/children" % (pid, pid)) as fh:
                return [int(p) for p in fh.read().split()]
        except OSError:
            return []

    def our_files(self):
        found = []
        for dirpath, dirnames, filenames in os.walk(self.root):
            for name in filenames:
                if ".ral-tmp-" in name or name.endswith(".ral-journal"):
                    found.append(os.path.join(dirpath, name))
        return found

    def shadow_tools(self):
        """True/False: whether pwck and grpck accept the account files;
        None when there are none or the tools cannot run."""
        if not os.path.exists(os.path.join(self.root, "etc/passwd")) or os.geteuid() != 0:
            return None
        for tool, args in (("pwck", ["-r", "-q"]), ("grpck", ["-r"])):
            path = "/usr/sbin/" + tool
            if not os.path.exists(path):
                return None
            if subprocess.run([path] + args + ["-R", self.root], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL).returncode != 0:
                return False
        return True

    def torn(self, name):
        """A file of the file provider that is neither absent nor whole."""
        try:
            with open(os.path.join(self.root, name.lstrip("/")), "rb") as fh:
                data = fh.read()
        except FileNotFoundError:
            return False
        return data != b"x" * 100000 + b"\n"

    def listing(self):
        done = self.ralsh("-j", self.kind, check=False)
        if done.returncode != 0 or "warn" in done.stderr:
            return None
        return json.loads(done.stdout)["resources"]

    def run(self):
        self.ralsh("-j", self.kind)
        duration = self.typical_duration()
        for n in range(self.runs):
            name, args = self.change(n)
            # Half the kills anywhere in a change, half in its second half,
            # where the files are written (Python's start-up comes first).
            if random.random() < 0.5:
                delay = random.uniform(0, 1.2 * duration)
            else:
                delay = random.uniform(0.6 * duration, 1.05 * duration)
            if self.kill_during(args, delay):
                self.counts["kills in the provider"] += 1
            resources = self.listing()
            if resources is None:
                self.counts["listing failed"] += 1
            elif any(r.get("ensure") == "incomplete" for r in resources):
                self.counts["incomplete after kill"] += 1
            if self.shadow_tools() is False:
                self.counts["pwck refused after kill"] += 1
            if self.our_files():
                self.counts["temp files after kill"] += 1
            if self.kind == "file" and self.torn(name):
                self.counts["torn files after kill"] += 1
            # The same change again, to its end (no change at all when the
            # killed one had gone far enough), then the next edit: a change
            # of another new resource, which is sure to edit.
            self.ralsh(*args)
            self.done.append(name)
            found = self.ralsh("-j", self.kind, name).stdout
            state = json.loads(found).get("resource", {})
            if state.get("ensure") in (None, "absent", "incomplete"):
                self.counts["missing after rerun"] += 1
            probe, probe_args = self.change(2 * 10**6 + n)
            self.ralsh(*probe_args)
            self.done.append(probe)
            leftovers = self.our_files()
            self.counts["temp files after next edit"] += any(".ral-tmp-" in p for p in leftovers)
            self.counts["journal after next edit"] += any(p.endswith(".ral-journal")
                                                          for p in leftovers)
            if self.shadow_tools() is False:
                self.counts["pwck refused after next edit"] += 1
        resources = self.listing() or []
        listed = set(r["name"] for r in resources)
        self.counts["lost after success"] = sum(1 for name in self.done if name not in listed
                                                and self.kind != "file")
        return duration


# Counts that must stay zero; the others say how often a state was seen.
MUST_BE_ZERO = ("listing failed", "incomplete after kill", "torn files after kill",
                "temp files after next edit",
                "journal after next edit", "missing after rerun", "lost after success",
                "pwck refused after next edit")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--providers", default=",".join(PROVIDERS))
    opts = parser.parse_args()
    if not os.path.exists(RALSH):
        sys.exit("build first: cargo build --release")
    scratch = tempfile.mkdtemp(prefix="ral-crash-")
    failed = False
    try:
        print("%d runs per provider; a kill lands at a random moment of a change" % opts.runs)
        for kind in opts.providers.split(","):
            bench = Bench(kind, opts.runs, scratch)
            started = time.monotonic()
            duration = bench.run()
            bad = [k for k in MUST_BE_ZERO if bench.counts[k]]
            failed = failed or bool(bad)
            print("%-20s change %.0f ms, %4.0f s: %s%s" % (
                kind, duration * 1000, time.monotonic() - started,
                ", ".join("%s %d" % (k, v) for k, v in bench.counts.items()),
                "  FAILED: " + ", ".join(bad) if bad else ""))
            sys.stdout.flush()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
