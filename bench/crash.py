#!/usr/bin/env python3
"""Crash bench: SIGKILL ralsh and its provider at random moments of a change,
and check what every crash leaves behind.

For each writable bundled provider, on a fake root seeded with large files
(5,000 accounts, 5,000 hosts and fstab entries, 2,000 cron jobs and keys),
the runs cycle through three kinds of change: the creation of a new
resource, an update of an existing one and its removal (the service
provider removes nothing: its changes are the first enable, which makes
the rc?.d links, and a disable, which renames them). The resource an
update or a removal changes is made first by a run that is not killed.
Each run starts its change and kills ralsh and the provider's process group
with SIGKILL after a random delay (half of them anywhere up to 1.2 times a
whole change of that kind, half in its second half, where the files are
written), and then checks:

- straight after the kill: the files still parse (a listing succeeds
  without warnings; readers see an interrupted edit as finished), whether
  any account is incomplete to ral's readers, whether pwck -r -q and
  grpck -r accept the account files (for the service provider, whether
  every service has a whole set of rc?.d links), and, for the file
  provider, that the file is whole: as it was before or as asked;
- after the same change is run again to its end, the resource is as asked
  (also when the rerun finds nothing to change, because the killed run had
  gone far enough: readers see an interrupted edit finished);
- after the next edit (the creation of another new resource, which is sure
  to write): no temporary file or journal of ral's is left anywhere below
  the root, and pwck/grpck (or the service check) accept the files;
- at the end: every change that reported success is still there (a created
  or updated resource as asked, a removed one absent).

Run from the repository root after `cargo build --release`, as root (for
pwck and grpck, which chroot):

    python3 bench/crash.py [--runs 200] [--providers host,user,...]

Prints one line per provider and kind of change, and exits 1 if any check
that must always hold failed.
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
CONTENT = b"x" * 100000 + b"\n"        # what the file provider creates
UPDATED = b"y" * 100000 + b"\n"        # and what an update writes instead
INIT_SCRIPT = ("#!/bin/sh\n### BEGIN INIT INFO\n# Default-Start: 2 3 4 5\n"
               "# Default-Stop: 0 1 6\n### END INIT INFO\n"
               "case $1 in status) exit 3 ;; esac\n")


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


def seed_services(root):
    """rc?.d directories and 20 enabled services, linked as update-rc.d
    links them (each change reads every directory)."""
    for level in "0123456S":
        os.makedirs(os.path.join(root, "etc/rc%s.d" % level))
    for n in range(20):
        name = "seed%d" % n
        install_script(root, name)
        for level in "0123456":
            os.symlink("../init.d/" + name, os.path.join(
                root, "etc/rc%s.d" % level, ("S01" if level in "2345" else "K01") + name))


def install_script(root, name):
    """ROOT/etc/init.d/NAME, an init script whose status says stopped."""
    path = os.path.join(root, "etc/init.d", name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as fh:
        fh.write(INIT_SCRIPT)
    os.chmod(path, 0o755)


def service_links(root):
    """{service: {level: link name}} of every link in ROOT/etc/rc?.d."""
    links = {}
    for level in "0123456S":
        directory = os.path.join(root, "etc/rc%s.d" % level)
        for entry in os.listdir(directory):
            if entry[:1] in "SK" and entry[1:3].isdigit():
                links.setdefault(entry[3:], {})[level] = entry
    return links


def services_whole(root):
    """Whether every service has a whole set of links: one in each of the
    levels 0 to 6, K in 0, 1 and 6, and the same letter in 2 to 5."""
    for levels in service_links(root).values():
        if sorted(levels) != list("0123456"):
            return False
        if any(levels[level][0] != "K" for level in "016"):
            return False
        if len(set(levels[level][0] for level in "2345")) != 1:
            return False
    return True


class Case:
    """One writable provider: SEED makes the fake root; NEW(n) names the
    Nth new resource and gives the attributes that create it; UPDATE(n)
    the attributes that then change it (None: no updates); REMOVE whether
    ensure=absent removes it; PREPARE(root, name), when given, readies the
    root for a new resource (outside the change that is killed)."""

    def __init__(self, seed, new, update, remove=True, prepare=None):
        self.seed, self.new, self.update = seed, new, update
        self.remove, self.prepare = remove, prepare

    def changes(self):
        return ["create"] + (["update"] if self.update else []) + \
            (["remove"] if self.remove else [])


CASES = {
    "user": Case(lambda root: seed_accounts(root, 5000),
                 lambda n: ("crash%d" % n, ["ensure=present", "groups=users"]),
                 # passwd, group and gshadow change together.
                 lambda n: ["comment=updated %d" % n, "shell=/bin/bash", "groups="]),
    "group": Case(lambda root: seed_accounts(root, 5000),
                  lambda n: ("crashg%d" % n, ["ensure=present"]),
                  lambda n: ["members=seed%d,seed%d" % (n % 5000, (n + 1) % 5000)]),
    "host": Case(seed_hosts,
                 lambda n: ("crash%d.example" % n,
                            ["ip=10.200.%d.%d" % (n // 250 % 250, n % 250)]),
                 lambda n: ["ip=10.201.%d.%d" % (n // 250 % 250, n % 250),
                            "comment=updated %d" % n]),
    "mount": Case(seed_fstab,
                  lambda n: ("/mnt/crash%d" % n, ["device=/dev/crash%d" % n, "fstype=ext4"]),
                  lambda n: ["device=/dev/updated%d" % n, "options=noatime,nodev"]),
    "cron": Case(seed_cron,
                 lambda n: ("crash-job%d" % n, ["user=seed0", "command=true %d" % n]),
                 lambda n: ["command=true updated %d" % n, "minute=%d" % (n % 60)]),
    "ssh_authorized_key": Case(seed_keys,
                               lambda n: ("crash-key%d" % n,
                                          ["user=seed0", "type=ssh-ed25519", "key=" + ED25519]),
                               lambda n: ["options=no-pty,no-port-forwarding"]),
    "file": Case(seed_files,
                 lambda n: ("/srv/crash%d" % n, ["content=" + CONTENT.decode()]),
                 lambda n: ["content=" + UPDATED.decode()]),
    "service": Case(seed_services,
                    lambda n: ("crash%d" % n, ["enable=true"]),
                    lambda n: ["enable=false"],
                    remove=False,
                    prepare=lambda root, name: install_script(root, name)),
}
PROVIDERS = CASES                       # the names --providers takes

# Counts that must stay zero; the others say how often a state was seen.
MUST_BE_ZERO = ("listing failed", "incomplete after kill", "torn files after kill",
                "temp files after next edit", "journal after next edit",
                "not as asked after rerun", "lost after success",
                "check refused after next edit")
COUNTS = ("runs", "kills in the provider", "listing failed", "incomplete after kill",
          "check refused after kill", "temp files after kill", "torn files after kill",
          "not as asked after rerun", "temp files after next edit",
          "journal after next edit", "check refused after next edit",
          "lost after success")


def agrees(resource, attrs):
    """Whether RESOURCE (a listing's entry, or None when not listed) is as
    the attributes ATTRS ask."""
    for item in attrs:
        key, _, value = item.partition("=")
        have = None if resource is None else resource.get(key)
        if key == "ensure":
            if (value == "absent") != (have in (None, "absent")) or have == "incomplete":
                return False
        elif resource is None:
            return False
        elif isinstance(have, bool):
            if str(have).lower() != value:
                return False
        elif isinstance(have, list):
            if have != ([] if value == "" else value.split(",")):
                return False
        elif ("" if have is None else str(have)) != value:
            return False
    return True


class Bench:
    def __init__(self, kind, runs, scratch):
        self.kind = kind
        self.runs = runs
        self.root = os.path.join(scratch, kind, "root")
        os.makedirs(self.root)
        self.env = {"PATH": os.environ["PATH"], "HOME": os.path.join(scratch, kind),
                    "XDG_CACHE_HOME": os.path.join(scratch, kind, "cache")}
        self.case = CASES[kind]
        self.case.seed(self.root)
        self.asked = {}           # name: (kind of change, attributes) of its last success
        self.counts = dict((change, dict.fromkeys(COUNTS, 0))
                           for change in self.case.changes())
        self.durations = {}

    def ralsh(self, *args, check=True):
        done = subprocess.run([RALSH, "--root", self.root] + list(args), env=self.env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if check and done.returncode != 0:
            raise SystemExit("%s: ralsh %s failed:\n%s" % (self.kind, " ".join(args)[:200],
                                                           done.stderr))
        return done

    def change(self, what, n):
        """(name, ralsh's arguments, what the change asks, the file's
        contents a crash may leave) of the change WHAT of the Nth resource;
        readies the root for it, and makes the resource first (in a run that
        is not killed) for an update or a removal."""
        name, attrs = self.case.new(n)
        if self.case.prepare:
            self.case.prepare(self.root, name)
        if what == "create":
            whole = (None, CONTENT)
        else:
            self.ralsh(self.kind, name, *attrs)
            self.asked[name] = ("create", attrs)
            if what == "update":
                attrs = self.case.update(n)
                whole = (CONTENT, UPDATED)
            else:
                attrs = ["ensure=absent"]
                whole = (CONTENT, None)
        return name, [self.kind, name] + attrs, attrs, whole

    def typical_duration(self, what, first):
        times = []
        for n in range(first, first + 5):
            name, args, attrs, _ = self.change(what, n)
            started = time.monotonic()
            self.ralsh(*args)
            times.append(time.monotonic() - started)
            self.asked[name] = (what, attrs)
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

    def consistent(self):
        """True/False: whether the provider's files are consistent: pwck
        and grpck accept the account files, every service has a whole set
        of links; None when there is nothing to check or the tools cannot
        run."""
        if self.kind == "service":
            return services_whole(self.root)
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

    def content(self, name):
        """The bytes of a file of the file provider, or None when absent."""
        try:
            with open(os.path.join(self.root, name.lstrip("/")), "rb") as fh:
                return fh.read()
        except FileNotFoundError:
            return None

    def listing(self):
        done = self.ralsh("-j", self.kind, check=False)
        if done.returncode != 0 or "warn" in done.stderr:
            return None
        return json.loads(done.stdout)["resources"]

    def as_asked(self, name, attrs, resource):
        """Whether NAME is as ATTRS ask; RESOURCE is its listing's entry
        (the file provider lists nothing: its file is read instead)."""
        if self.kind == "file":
            values = dict(item.partition("=")[::2] for item in attrs)
            want = values.get("content")
            return self.content(name) == (None if want is None else want.encode())
        return agrees(resource, attrs)

    def run(self):
        self.ralsh("-j", self.kind)
        changes = self.case.changes()
        for index, what in enumerate(changes):
            self.durations[what] = self.typical_duration(what, 10**6 + 10 * index)
        for n in range(self.runs):
            what = changes[n % len(changes)]
            counts = self.counts[what]
            counts["runs"] += 1
            name, args, attrs, whole = self.change(what, n)
            duration = self.durations[what]
            # Half the kills anywhere in a change, half in its second half,
            # where the files are written (Python's start-up comes first).
            if random.random() < 0.5:
                delay = random.uniform(0, 1.2 * duration)
            else:
                delay = random.uniform(0.6 * duration, 1.05 * duration)
            if self.kill_during(args, delay):
                counts["kills in the provider"] += 1
            resources = self.listing()
            if resources is None:
                counts["listing failed"] += 1
            elif any(r.get("ensure") == "incomplete" for r in resources):
                counts["incomplete after kill"] += 1
            if self.consistent() is False:
                counts["check refused after kill"] += 1
            if self.our_files():
                counts["temp files after kill"] += 1
            if self.kind == "file" and self.content(name) not in whole:
                counts["torn files after kill"] += 1
            # The same change again, to its end (no change at all when the
            # killed one had gone far enough), then the next edit: a change
            # of another new resource, which is sure to edit.
            self.ralsh(*args)
            self.asked[name] = (what, attrs)
            found = json.loads(self.ralsh("-j", self.kind, name).stdout).get("resource")
            if not self.as_asked(name, attrs, found):
                counts["not as asked after rerun"] += 1
            probe, probe_args, probe_attrs, _ = self.change("create", 2 * 10**6 + n)
            self.ralsh(*probe_args)
            self.asked[probe] = ("create", probe_attrs)
            leftovers = self.our_files()
            counts["temp files after next edit"] += any(".ral-tmp-" in p for p in leftovers)
            counts["journal after next edit"] += any(p.endswith(".ral-journal")
                                                     for p in leftovers)
            if self.consistent() is False:
                counts["check refused after next edit"] += 1
        # Every change that reported success is still there, counted
        # against the kind of the last change of each resource.
        listed = dict((r["name"], r) for r in self.listing() or [])
        for name, (what, attrs) in self.asked.items():
            if not self.as_asked(name, attrs, listed.get(name)):
                self.counts[what]["lost after success"] += 1


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--providers", default=",".join(CASES))
    opts = parser.parse_args()
    if not os.path.exists(RALSH):
        sys.exit("build first: cargo build --release")
    unknown = [kind for kind in opts.providers.split(",") if kind not in CASES]
    if unknown:
        sys.exit("no such provider here: %s (known: %s)" % (", ".join(unknown),
                                                             ", ".join(CASES)))
    scratch = tempfile.mkdtemp(prefix="ral-crash-")
    failed = False
    started_all = time.monotonic()
    try:
        print("%d runs per provider, cycling through its kinds of change; a kill "
              "lands at a random moment of a change" % opts.runs)
        for kind in opts.providers.split(","):
            bench = Bench(kind, opts.runs, scratch)
            started = time.monotonic()
            bench.run()
            spent = time.monotonic() - started
            for what, counts in bench.counts.items():
                bad = [k for k in MUST_BE_ZERO if counts[k]]
                failed = failed or bool(bad)
                print("%-20s %-6s change %4.0f ms, %4.0f s: %s%s" % (
                    kind, what, bench.durations[what] * 1000, spent,
                    ", ".join("%s %d" % (k, v) for k, v in counts.items()),
                    "  FAILED: " + ", ".join(bad) if bad else ""))
            sys.stdout.flush()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print("%.1f minutes in all" % ((time.monotonic() - started_all) / 60))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
