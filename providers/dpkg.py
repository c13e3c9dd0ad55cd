#!/usr/bin/env -S python3 -I -S
"""ralsh provider: Debian packages through dpkg and apt (type package, json
calling convention).

Run by dpkg.prov (a POSIX sh script beside this file) as `python3 -I -S
/path/dpkg.py ral_action=ACTION`, with one JSON document on stdin (get,
set) and one JSON document on stdout; the metadata is dpkg.yaml beside it.
dpkg.prov answers the listing of all
packages (get with no names) itself when dpkg-query's output is plain, and
hands every other call to this script unchanged. Everything happens below
$RALSH_ROOT_DIR ("/" when unset or empty).

get reads dpkg's database with one dpkg-query call, whatever was asked; a
name dpkg does not know is looked up with one apt-cache policy call for all
such names. mark (hold or none) is dpkg's selection, the first word of
the same call's ${Status}. set runs apt-get once per package (install,
remove or purge), non-interactively, and reports what dpkg's database says
changed; under noop it runs apt-get's simulation (-s) instead and reports
what it says would change. Read-only apt calls never write apt's binary
caches, so get and noop change no file.

A mark is written with dpkg --set-selections (NAME hold, or install /
deinstall for none) under dpkg's frontend lock. A hold stops apt-get, so a
change to a held package is made only when the request also releases it
(mark none): the hold is released (selection install), then apt-get runs;
a failing apt-get gets its hold back. Without mark none such a change is
refused before anything runs (the host sends only attributes that change,
so a request that keeps the hold cannot be told from one that ignores it). Only an installed
package can be held: mark hold with ensure absent or purged, or on a
package that stays uninstalled, is refused; with ensure present or a
version it installs, then holds.

With a root other than "/", every tool is pointed below it: dpkg-query gets
--admindir; apt is configured by an APT_CONFIG document kept in memory that
sets Dir to ROOT and reads no apt.conf or apt.conf.d at all (their hooks
would run on the host), so its sources, preferences, state, lists, caches,
logs and locks are those below ROOT; dpkg gets --root (which also chroots
maintainer scripts into ROOT) and --log.

dpkg and apt take their own locks (apt waits for dpkg's, up to
LOCK_TIMEOUT), so no lock of ral's is needed here. Every tool runs through
ral_provider.Commands: argv only, the scrubbed environment, no shell.
"""

import json
import os
import contextlib
import fcntl
import re
import signal
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ral_provider as ral  # noqa: E402
from ral_provider import CallError, UpdateError, clean, quoted, type_name  # noqa: E402


ENSURE_WORDS = ("present", "installed", "absent", "purged", "latest")
# dpkg states in which the package is installed and usable.
INSTALLED = ("installed", "triggers-awaited", "triggers-pending")
# dpkg states in which none of the package's files but config files remain.
GONE = ("config-files", "not-installed")
STATES = INSTALLED + GONE + ("half-installed", "unpacked", "half-configured")
REPORTED = ("ensure", "version", "arch", "status", "mark")
MARKS = ("hold", "none")
NAME = re.compile(r"[a-z0-9][a-z0-9+.-]+\Z")
ARCH = re.compile(r"[a-z0-9][a-z0-9-]*\Z")
FORMAT = "${binary:Package}\\t${Package}\\t${Version}\\t${Status}\\t${Architecture}\\n"
STDERR_TAIL = 6          # lines of a failing tool's stderr quoted
LOCK_TIMEOUT = 60        # seconds apt-get waits for dpkg's lock
TOOL_TIMEOUT = 24 * 3600  # the host's --timeout ends a call long before


# ------------------------------------------------------ names and versions


def name_problem(name):
    """Why NAME cannot name a Debian package, or None when it can."""
    if not isinstance(name, str):
        return "a package name must be a string, not %s" % type_name(name)
    package, _, arch = name.partition(":")
    if not NAME.match(package) or (":" in name and not ARCH.match(arch)):
        return ("invalid package name %s: a package name has at least two "
                "characters, lower-case letters, digits, '+', '-' and '.', "
                "and starts with a letter or digit (optionally followed by "
                "':ARCH')" % quoted(name))
    return None


def version_problem(version):
    """Why VERSION is not a Debian version string, or None when it is."""
    if version == "":
        return "the version is empty"
    if any(ch.isspace() for ch in version):
        return "a version contains no whitespace"
    rest = version
    if ":" in version:
        epoch, rest = version.split(":", 1)
        if not epoch.isdigit() or not epoch.isascii():
            return "the epoch %s (before ':') is not a number" % quoted(epoch)
    upstream, revision = rest, None
    if "-" in rest:
        upstream, revision = rest.rsplit("-", 1)
        if not re.match(r"[A-Za-z0-9.+~]+\Z", revision):
            return ("the revision %s (after the last '-') must be letters, "
                    "digits, '.', '+' or '~'" % quoted(revision))
    if upstream == "" or not upstream[0].isdigit() or not upstream.isascii():
        return ("the upstream version %s must start with a digit"
                % quoted(upstream))
    allowed = "A-Za-z0-9.+~" + ("-" if revision is not None else "") \
        + (":" if ":" in version else "")
    if not re.match(r"[%s]+\Z" % allowed, upstream):
        return ("the upstream version %s may hold only letters, digits and "
                "'.', '+', '~'%s%s" % (quoted(upstream),
                                       ", '-'" if revision is not None else "",
                                       ", ':'" if ":" in version else ""))
    return None


def _order(ch):
    if ch == "~":
        return -1
    if ch.isalpha():
        return ord(ch)
    return ord(ch) + 256


def _compare_part(a, b):
    """dpkg's verrevcmp: compares an upstream version or a revision."""
    i = j = 0
    while i < len(a) or j < len(b):
        while (i < len(a) and not a[i].isdigit()) or \
                (j < len(b) and not b[j].isdigit()):
            ac = _order(a[i]) if i < len(a) and not a[i].isdigit() else 0
            bc = _order(b[j]) if j < len(b) and not b[j].isdigit() else 0
            if ac != bc:
                return ac - bc
            i += 1
            j += 1
        while i < len(a) and a[i] == "0":
            i += 1
        while j < len(b) and b[j] == "0":
            j += 1
        first = 0
        while i < len(a) and a[i].isdigit() and j < len(b) and b[j].isdigit():
            if not first:
                first = ord(a[i]) - ord(b[j])
            i += 1
            j += 1
        if i < len(a) and a[i].isdigit():
            return 1
        if j < len(b) and b[j].isdigit():
            return -1
        if first:
            return first
    return 0


def _split_version(version):
    epoch, rest = 0, version
    if ":" in version:
        head, rest = version.split(":", 1)
        epoch = int(head) if head.isdigit() else 0
    upstream, revision = rest, ""
    if "-" in rest:
        upstream, revision = rest.rsplit("-", 1)
    return epoch, upstream, revision


def compare_versions(a, b):
    """<0, 0 or >0 as version A sorts before, with or after B (dpkg's order)."""
    ea, ua, ra = _split_version(a)
    eb, ub, rb = _split_version(b)
    if ea != eb:
        return ea - eb
    return _compare_part(ua, ub) or _compare_part(ra, rb)


def listing(versions, limit=8):
    shown = ", ".join(versions[:limit])
    if len(versions) > limit:
        shown += ", ... (%d more)" % (len(versions) - limit)
    return shown


# ------------------------------------------------------------------- tools


def fake_root():
    """The root directory (symbolic links resolved, as the tools take a
    path) when it is not "/", else None."""
    root = ral.Root()
    return None if root.is_real else os.path.realpath(root.path)


def tail(text, lines=STDERR_TAIL):
    kept = [clean(line.rstrip()) for line in text.splitlines() if line.strip()]
    return "\n".join(kept[-lines:])


def run_tool(argv, extra_env=None, pass_fds=(), changes=False):
    """Runs a tool (the scrubbed environment plus EXTRA_ENV); returns (exit
    status, stdout, stderr) as text, all of the output kept. A tool that
    CHANGES the system runs as a change (never under noop, where the
    callers simulate instead)."""
    commands = ral.Commands()
    options = dict(env=extra_env, pass_fds=pass_fds, timeout=TOOL_TIMEOUT,
                   output_limit=None, quiet=True)
    result = (commands.change(argv, check=False, **options) if changes
              else commands.query(argv, **options))
    if result is None:
        return 0, "", ""
    if result.status is None:
        raise CallError("%s %s" % (argv[0], result.problem))
    return result.status, result.stdout, result.stderr


def failure(what, status, stdout, stderr):
    """The message for a tool that failed: its stderr's tail (or stdout's),
    after apt's list of unmet dependencies when it printed one."""
    lines = []
    keep = False
    for line in stdout.splitlines():
        if "unmet dependencies" in line:
            keep = True
        elif keep and not line.startswith(" "):
            keep = False
        if keep and len(lines) < STDERR_TAIL:
            lines.append(clean(line.rstrip()))
    quoted_tail = "\n".join(lines + [t for t in [tail(stderr) or tail(stdout)] if t])
    return "%s failed (exit status %d)%s" % (
        what, status, ":\n" + quoted_tail if quoted_tail else "")


class Apt:
    """apt-get and apt-cache, pointed at the root."""

    def __init__(self, root):
        self.root = root

    def options(self, writes):
        opts = ["-o", "APT::Color=0"]
        if not writes:
            # Without these, apt (as root) would write its binary caches and,
            # even when simulating, its planner log (eipp.log.xz).
            opts += ["-o", "Dir::Cache::pkgcache=",
                     "-o", "Dir::Cache::srcpkgcache=",
                     "-o", "Dir::Log::Planner="]
        if self.root is not None:
            opts += ["-o", "Dir=%s/" % self.root,
                     "-o", "Dir::State::status=%s/var/lib/dpkg/status" % self.root,
                     "-o", "APT::Sandbox::User=root"]
        return opts

    def run(self, argv, extra_env=None, changes=False):
        """Runs an apt tool pointed at the root; CHANGES: it changes the
        system (skipped under noop)."""
        env = dict(extra_env or {})
        if self.root is None:
            return run_tool(argv, env, changes=changes)
        # apt reads /etc/apt/apt.conf.d before it sees any -o option, so the
        # root is set by an APT_CONFIG document, which also turns off
        # apt.conf and apt.conf.d, the host's and the root's: the commands
        # of their hooks (DPkg::Post-Invoke, ...) would run on the host.
        # Sources, preferences and keys are still read from ROOT/etc/apt.
        # The document lives in memory, so nothing is written outside ROOT.
        if any(ch in self.root for ch in '"\\{};\n'):
            raise CallError("the root directory %s holds a character apt's "
                            "configuration cannot hold (one of \" \\ { } ; "
                            "or a line break)" % quoted(self.root))
        text = ('Dir "%s/";\nDir::Etc::parts "/dev/null";\n'
                'Dir::Etc::main "/dev/null";\n' % self.root).encode("utf-8")
        fd = None
        path = None
        try:
            try:
                if not os.path.isdir("/proc/self/fd"):
                    raise OSError("no /proc/self/fd")
                fd = os.memfd_create("ral-apt.conf")
                os.write(fd, text)
                env["APT_CONFIG"] = "/proc/self/fd/%d" % fd
                pass_fds = (fd,)
            except (AttributeError, OSError):
                handle, path = tempfile.mkstemp(prefix="ral-apt-", suffix=".conf")
                with os.fdopen(handle, "wb") as fh:
                    fh.write(text)
                env["APT_CONFIG"] = path
                pass_fds = ()
            return run_tool(argv, env, pass_fds, changes=changes)
        finally:
            if fd is not None:
                os.close(fd)
            if path is not None:
                try:
                    os.unlink(path)
                except OSError:
                    pass

    def policy(self, names):
        """{name: Policy} for the names apt knows (one apt-cache call)."""
        if not names:
            return {}
        argv = ["apt-cache"] + self.options(False) + ["policy", "--"] + list(names)
        status, out, err = self.run(argv)
        if status != 0:
            raise CallError(failure("apt-cache policy", status, out, err))
        return parse_policy(out)

    def get(self, command, target, simulate, downgrade=False, held=False):
        """Runs apt-get COMMAND TARGET (-s when SIMULATE). HELD: the package
        is held and the real run releases it first, so the simulation
        lets apt-get change held packages (which it refuses under -y)."""
        argv = ["apt-get", "-q", "-y"] + self.options(not simulate) + [
            "-o", "Dpkg::Use-Pty=0",
            "-o", "DPkg::Lock::Timeout=%d" % LOCK_TIMEOUT,
            "-o", "Dpkg::Options::=--force-confdef",
            "-o", "Dpkg::Options::=--force-confold"]
        if self.root is not None:
            argv += ["-o", "Dpkg::Options::=--root=%s" % self.root,
                     "-o", "Dpkg::Options::=--log=%s/var/log/dpkg.log" % self.root]
        if simulate:
            argv.append("-s")
        if downgrade:
            argv.append("--allow-downgrades")
        if held and simulate:
            argv.append("--allow-change-held-packages")
        argv += [command, target]
        if self.root is not None and not simulate:
            for rel in ("var/log/apt", "var/cache/apt/archives/partial",
                        "var/lib/apt/lists/partial"):
                try:
                    os.makedirs(os.path.join(self.root, rel), exist_ok=True)
                except OSError:
                    pass    # apt-get says what it misses
        status, out, err = self.run(argv, {
            "DEBIAN_FRONTEND": "noninteractive",
            "APT_LISTCHANGES_FRONTEND": "none",
            "UCF_FORCE_CONFFOLD": "1",
        }, changes=not simulate)
        if status != 0:
            raise UpdateError(failure("apt-get %s%s %s" % (
                "-s " if simulate else "", command, target), status, out, err))
        return out


class Policy:
    def __init__(self):
        self.installed = None
        self.candidate = None
        self.versions = []      # available from a source, in apt's order


def policy_for(policies, name):
    """What apt said about NAME: apt names a package of the native
    architecture (or 'all') without its ':ARCH'."""
    if name in policies:
        return policies[name]
    package, _, arch = name.partition(":")
    return policies.get(package) if arch else None


def parse_policy(text):
    policies = {}
    current = None
    version = None
    for line in text.splitlines():
        if line and not line[0].isspace():
            if line.endswith(":"):
                current = Policy()
                policies[line[:-1]] = current
            else:
                current = None
            version = None
            continue
        if current is None:
            continue
        stripped = line.strip()
        if stripped.startswith("Installed:"):
            value = stripped[len("Installed:"):].strip()
            current.installed = None if value == "(none)" else value
        elif stripped.startswith("Candidate:"):
            value = stripped[len("Candidate:"):].strip()
            current.candidate = None if value == "(none)" else value
        else:
            match = re.match(r"(?: \*\*\*|    ) (\S+) (-?\d+)$", line)
            if match:
                version = match.group(1)
                continue
            match = re.match(r" {6,}-?\d+ (.*)$", line)
            if match and version is not None:
                if match.group(1).strip() != "/var/lib/dpkg/status" \
                        and version not in current.versions:
                    current.versions.append(version)
    return policies


# --------------------------------------------------------------- database


class Entry:
    """One package in dpkg's database."""

    def __init__(self, name, package, version, status, arch, want):
        self.name = name
        self.package = package
        self.version = version
        self.status = status
        self.arch = arch
        # dpkg's selection: install, hold, deinstall, purge or unknown.
        self.want = want


class Database:
    """dpkg's database, read with one dpkg-query call. dpkg.prov makes the
    same call (tool_env, fake_root) and parsing, with state_of, for a
    listing: keep them in step."""

    def __init__(self, root):
        self.root = root
        self.entries = {}
        self.by_package = {}
        self._native = None
        admin = os.path.join(root or "/", "var/lib/dpkg")
        self.exists = os.path.isfile(os.path.join(admin, "status"))
        argv = ["dpkg-query"]
        if root is not None:
            argv.append("--admindir=%s/var/lib/dpkg" % root)
        argv += ["-W", "-f", FORMAT]
        status, out, err = run_tool(argv)
        if status != 0:
            raise CallError(failure("dpkg-query", status, out, err))
        for line in out.splitlines():
            fields = line.split("\t")
            if len(fields) != 5 or not fields[0]:
                continue
            name, package, version, state, arch = fields
            # ${Status} is "WANT FLAG STATE": the selection comes first.
            words = state.split()
            want = words[0] if words else ""
            state = words[-1] if words else ""
            if state not in STATES or state == "not-installed":
                continue
            entry = Entry(name, package, version, state, arch, want)
            self.entries[name] = entry
            self.by_package.setdefault(package, []).append(entry)

    def native_arch(self):
        if self._native is None:
            status, out, _ = run_tool(["dpkg", "--print-architecture"])
            self._native = out.strip() if status == 0 else ""
        return self._native

    def lookup(self, name):
        """The entry NAME means, or None."""
        if name in self.entries:
            return self.entries[name]
        package, _, arch = name.partition(":")
        candidates = self.by_package.get(package, [])
        if arch:
            matching = [e for e in candidates if e.arch == arch]
        elif len(candidates) == 1:
            matching = candidates
        else:
            native = self.native_arch()
            matching = [e for e in candidates if e.arch in (native, "all")]
        return matching[0] if len(matching) == 1 else None

    def conffiles(self, entry):
        """Whether ENTRY has config files that removing it would keep."""
        argv = ["dpkg-query"]
        if self.root is not None:
            argv.append("--admindir=%s/var/lib/dpkg" % self.root)
        argv += ["-W", "-f", "${Conffiles}", "--", entry.name]
        status, out, _ = run_tool(argv)
        return status == 0 and out.strip() != ""


def state_of(entry):
    """The reported attributes of a database entry (None: not known)."""
    if entry is None or entry.status == "not-installed":
        return {"ensure": "absent", "status": "not-installed", "mark": "none"}
    state = {"ensure": "present" if entry.status in INSTALLED else "absent",
             "status": entry.status}
    if entry.status not in GONE:
        state["version"] = entry.version
        state["arch"] = entry.arch
    state["mark"] = mark_of(entry)
    return state


def mark_of(entry):
    """hold when dpkg's selection of ENTRY is hold, else none."""
    return "hold" if entry is not None and entry.want == "hold" else "none"


def resource(name, state):
    out = {"name": name}
    out.update(state)
    return out


def differences(before, after):
    change = {}
    for key in REPORTED:
        if before.get(key) != after.get(key):
            change[key] = {"is": after.get(key), "was": before.get(key)}
    return change


def unknown_message(name, entry=None):
    if entry is not None:
        return ("package %s cannot be installed: only its config files are "
                "left, and no configured apt source offers it (run apt-get "
                "update if the package lists are stale)" % quoted(name))
    return ("package %s not found: it is not installed and no configured apt "
            "source offers it (check the name, or run apt-get update if the "
            "package lists are stale)" % quoted(name))


# -------------------------------------------------------------- selections


class _LockTimeout(Exception):
    pass


@contextlib.contextmanager
def frontend_lock(root):
    """Holds dpkg's frontend lock (ROOT/var/lib/dpkg/lock-frontend, the one
    apt-get and dpkg take first), waiting up to LOCK_TIMEOUT seconds for it
    as apt-get is told to. dpkg run inside is told it is held
    (DPKG_FRONTEND_LOCKED), as apt-get tells it."""
    path = os.path.join(root or "/", "var/lib/dpkg/lock-frontend")
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o640)
    except OSError as err:
        raise UpdateError("cannot open dpkg's lock %s: %s"
                          % (quoted(path), err.strerror or err))

    def expired(signum, frame):
        raise _LockTimeout()

    try:
        previous = signal.signal(signal.SIGALRM, expired)
        signal.alarm(LOCK_TIMEOUT)
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX)
        except _LockTimeout:
            raise UpdateError("dpkg's lock %s is still held by another "
                              "process after %d seconds"
                              % (quoted(path), LOCK_TIMEOUT)) from None
        finally:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, previous)
        yield
    finally:
        os.close(fd)


def set_selection(root, name, want):
    """Sets dpkg's selection of package NAME to WANT (hold, install or
    deinstall) with dpkg --set-selections, below the root. dpkg reads the
    selection on stdin, which ral_provider.Commands does not give a
    command, hence subprocess here with the same environment, working
    directory and time limit."""
    argv = ["dpkg"]
    if root is not None:
        argv += ["--root=%s" % root, "--admindir=%s/var/lib/dpkg" % root]
    argv.append("--set-selections")
    what = "dpkg --set-selections (%s %s)" % (name, want)
    with frontend_lock(root):
        try:
            done = subprocess.run(
                argv, input=("%s %s\n" % (name, want)).encode("utf-8"),
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd="/",
                env=ral.command_env({"DPKG_FRONTEND_LOCKED": "1"}),
                timeout=TOOL_TIMEOUT, check=False)
        except (OSError, subprocess.TimeoutExpired) as err:
            raise UpdateError("%s could not run: %s" % (what, err)) from None
    out = done.stdout.decode("utf-8", "replace")
    err = done.stderr.decode("utf-8", "replace")
    if done.returncode != 0:
        raise UpdateError(failure(what, done.returncode, out, err))
    return err


def selection_for(entry, mark):
    """The dpkg selection that gives ENTRY the mark MARK: hold, or (for
    none) install when its files are there and deinstall when only its
    config files are."""
    if mark == "hold":
        return "hold"
    return "deinstall" if entry.status in GONE else "install"


def check_selection(db, name, mark, said):
    """Fails unless dpkg's database DB now gives NAME the mark MARK (dpkg
    only warns about a selection it cannot record); SAID is dpkg's
    stderr."""
    if mark_of(db.lookup(name)) != mark:
        raise UpdateError("mark: dpkg did not record %s as %s%s"
                          % (quoted(name), mark,
                             ":\n" + tail(said) if said.strip() else ""))


# -------------------------------------------------------------------- get


def do_get(names):
    root = fake_root()
    db = Database(root)
    if not names:
        return [resource(name, state_of(entry))
                for name, entry in db.entries.items()]
    resources = []
    ask_apt = []
    for name in names:
        entry = db.lookup(name)
        if entry is not None:
            resources.append(resource(name, state_of(entry)))
            continue
        problem = name_problem(name)
        if problem:
            resources.append({"name": name, "error": {
                "kind": "unknown", "message": problem}})
        else:
            ask_apt.append(name)
    # Without a dpkg database apt cannot work, and knows nothing.
    policies = Apt(root).policy(ask_apt) if db.exists else {}
    for name in ask_apt:
        policy = policy_for(policies, name)
        if policy is not None and policy.candidate is not None:
            resources.append(resource(name, state_of(None)))
        else:
            resources.append({"name": name, "error": {
                "kind": "unknown", "message": unknown_message(name)}})
    return resources


# -------------------------------------------------------------------- set


SIM_INST = re.compile(r"Inst (\S+)(?: \[(\S+)\])? \((\S+)(.*)\)")
SIM_REMOVE = re.compile(r"(Remv|Purg) (\S+)(?: \[(\S+)\])?")
SIM_ARCH = re.compile(r".*\[([^\]]+)\]\s*$")


def plan_action(name, ensure, entry, policies):
    """What apt-get must do: (command, target, downgrade), or None when the
    package is already as ENSURE asks."""
    state = entry.status if entry is not None else "not-installed"
    version = entry.version if entry is not None and state not in GONE else None

    def available():
        policy = policy_for(policies, name)
        if policy is None or policy.candidate is None:
            raise UpdateError(unknown_message(name, entry), "unknown")
        return policy

    if ensure in ("present", "installed"):
        if state in INSTALLED:
            return None
        available()
        return ("install", name, False)
    if ensure == "absent":
        return None if state in GONE else ("remove", name, False)
    if ensure == "purged":
        return None if state == "not-installed" else ("purge", name, False)
    if ensure == "latest":
        policy = available()
        if state in INSTALLED and version is not None and \
                compare_versions(version, policy.candidate) >= 0:
            return None
        return ("install", name, False)
    problem = version_problem(ensure)
    if problem:
        raise UpdateError("ensure: invalid version %s: %s"
                          % (quoted(ensure), problem))
    if state in INSTALLED and version is not None and \
            compare_versions(version, ensure) == 0:
        return None
    policy = policy_for(policies, name)
    if policy is None or (policy.candidate is None and not policy.versions):
        raise UpdateError(unknown_message(name, entry), "unknown")
    same = [v for v in policy.versions if compare_versions(v, ensure) == 0]
    if not same:
        ordered = sorted(policy.versions, key=_VersionKey, reverse=True)
        raise UpdateError("ensure: version %s of %s is not available; %s"
                          % (quoted(ensure), quoted(name),
                             "available: " + listing(ordered) if ordered
                             else "no version is available"))
    return ("install", "%s=%s" % (name, same[0]), True)


class _VersionKey:
    def __init__(self, version):
        self.version = version

    def __lt__(self, other):
        return compare_versions(self.version, other.version) < 0


def needs_apt(ensure, entry):
    """Whether deciding ENSURE needs what apt knows about the package."""
    state = entry.status if entry is not None else "not-installed"
    if ensure in ("absent", "purged"):
        return False
    if ensure in ("present", "installed"):
        return state not in INSTALLED
    if ensure == "latest":
        return True
    if version_problem(ensure) is not None:
        return False
    return not (state in INSTALLED
                and compare_versions(entry.version, ensure) == 0)


def same_package(line_name, name):
    if line_name == name:
        return True
    package, _, arch = name.partition(":")
    line_package, _, line_arch = line_name.partition(":")
    return line_package == package and (not arch or not line_arch
                                        or arch == line_arch)


def simulated_changes(db, name, entry, output):
    """Change entries from apt-get -s output: the requested package's (or
    None) and those of the other packages it touches."""
    mine = None
    others = []
    for line in output.splitlines():
        match = SIM_INST.match(line)
        if match:
            line_name, _, new_version, rest = match.groups()
            arch_match = SIM_ARCH.match(rest)
            after = {"ensure": "present", "status": "installed",
                     "version": new_version}
            if arch_match:
                after["arch"] = arch_match.group(1)
        else:
            match = SIM_REMOVE.match(line)
            if not match:
                continue
            verb, line_name, _ = match.groups()
            target = entry if same_package(line_name, name) else db.lookup(line_name)
            keeps = verb == "Remv" and target is not None and db.conffiles(target)
            after = {"ensure": "absent",
                     "status": "config-files" if keeps else "not-installed"}
        mine_now = same_package(line_name, name)
        before = state_of(entry if mine_now else db.lookup(line_name))
        if after["ensure"] == "present":
            if "arch" not in after and "arch" in before:
                after["arch"] = before["arch"]
            # An upgrade keeps dpkg's selection; a removal drops a hold.
            after["mark"] = before["mark"]
        else:
            after["mark"] = "none"
        if mine_now:
            mine = differences(before, after)
        else:
            change = differences(before, after)
            if change:
                others.append((line_name, change))
    return mine, others


def checked_update(update):
    """(name, ensure, mark) of one update, each None when not given."""
    name, should, ensure = ral.check_should(
        update, ("name", "ensure", "mark"), ensures=None,
        read_only=("version", "arch", "status"))
    if "ensure" in should and (not isinstance(ensure, str) or ensure == ""):
        raise UpdateError("ensure: %s is not one of %s or a version"
                          % (json.dumps(ensure), ", ".join(ENSURE_WORDS)))
    mark = should.get("mark")
    if "mark" in should and mark not in MARKS:
        raise UpdateError("mark: %s is not one of %s"
                          % (json.dumps(mark), ", ".join(MARKS)))
    if mark == "hold" and ensure in ("absent", "purged"):
        raise UpdateError("mark: hold cannot go with ensure: %s: only an "
                          "installed package can be held" % ensure)
    return name, ensure, mark


def check_hold(name, ensure, mark, entry, action):
    """Refuses what a hold forbids: a hold asked of a package that will not
    be installed, and a change to a held package by a request that does
    not say what becomes of the hold (apt-get would refuse it too)."""
    installed = action[0] == "install" if action is not None \
        else entry is not None and entry.status not in GONE
    if mark == "hold" and not installed:
        raise UpdateError(
            "mark: hold: package %s is not installed, and only an installed "
            "package can be held (add ensure: present, or a version, to "
            "install it and hold it)" % quoted(name))
    # The host sends only the attributes that must change, so a request
    # that keeps the hold looks like one that says nothing of it: only
    # mark none, which releases the hold, lets a held package change.
    if action is not None and mark != "none" and mark_of(entry) == "hold":
        raise UpdateError(
            "ensure: %s would %s package %s, which is held (mark: hold); "
            "add mark: none to release the hold (and hold it again later "
            "with mark: hold)" % (
                quoted(ensure),
                "change" if action[0] == "install" else "remove",
                quoted(name)))


def apply_update(update, db, apt, policies, noop):
    """Runs one update; returns (change entries, the database after).

    A held package that must change (the request says mark: none) is
    released first (dpkg selection install), then changed with apt-get;
    when apt-get fails, the hold is put back."""
    name, ensure, mark = checked_update(update)
    entry = db.lookup(name)
    if entry is None:
        problem = name_problem(name)
        if problem:
            raise UpdateError(problem, "unknown")
    action = plan_action(name, ensure, entry, policies) \
        if ensure is not None else None
    check_hold(name, ensure, mark, entry, action)
    held = mark_of(entry) == "hold"
    marking = mark is not None and mark != mark_of(entry)
    if action is None and not marking:
        return [], db
    if noop:
        return simulated_update(db, apt, name, entry, action, mark, held), db
    if action is not None:
        command, target, downgrade = action
        if held:
            set_selection(db.root, entry.name, "install")
        try:
            apt.get(command, target, False, downgrade)
        except UpdateError:
            if held:
                set_selection(db.root, entry.name, "hold")
            raise
    after = Database(db.root)
    after_entry = after.lookup(name)
    if mark is not None and after_entry is not None \
            and mark_of(after_entry) != mark:
        said = set_selection(db.root, after_entry.name,
                             selection_for(after_entry, mark))
        after = Database(db.root)
        after_entry = after.lookup(name)
        check_selection(after, name, mark, said)
    return changed(db, after, name, entry, after_entry), after


def simulated_update(db, apt, name, entry, action, mark, held):
    """The change entries of one update under noop: apt-get's simulation
    of the action (if any) and the mark the request sets."""
    mine, others = None, []
    if action is not None:
        command, target, downgrade = action
        output = apt.get(command, target, True, downgrade, held)
        mine, others = simulated_changes(db, name, entry, output)
    mine = dict(mine or {})
    if mark is not None and mark != mark_of(entry):
        mine["mark"] = {"is": mark, "was": mark_of(entry)}
    entries = [dict({"name": name}, **mine)] if mine else []
    entries += [dict({"name": other}, **change) for other, change in others]
    return entries


def changed(db, after, name, entry, after_entry):
    """The change entries between databases DB and AFTER: the requested
    package's first, then every other package apt-get touched."""
    entries = []
    change = differences(state_of(entry), state_of(after_entry))
    if change:
        entries.append(dict({"name": name}, **change))
    skip = set(e.name for e in (entry, after_entry) if e is not None)
    for other in sorted(set(db.entries) | set(after.entries)):
        if other in skip:
            continue
        change = differences(state_of(db.entries.get(other)),
                             state_of(after.entries.get(other)))
        if change:
            entries.append(dict({"name": other}, **change))
    return entries


def merged(entries):
    """One change entry per package: a batch may touch a package more than
    once (a dependency of one update is the subject of another). The first
    'was' and the last 'is' of each attribute are kept; an attribute that
    ends as it began is dropped. Error entries stay as they are."""
    result = []
    by_name = {}
    for entry in entries:
        if "error" in entry:
            result.append(entry)
            continue
        name = entry["name"]
        if name not in by_name:
            by_name[name] = {"name": name}
            result.append(by_name[name])
        target = by_name[name]
        for key, change in entry.items():
            if key == "name":
                continue
            was = target[key]["was"] if key in target else change["was"]
            target[key] = {"is": change["is"], "was": was}
    final = []
    for entry in result:
        if "error" not in entry:
            for key in [k for k in entry if k != "name"]:
                if entry[key]["is"] == entry[key]["was"]:
                    del entry[key]
            if len(entry) == 1:
                continue
        final.append(entry)
    return final


def do_set(updates):
    noop = ral.noop()
    root = fake_root()
    db = Database(root)
    if not db.exists:
        raise CallError("there is no dpkg database: %s does not exist"
                        % quoted(os.path.join(root or "/", "var/lib/dpkg/status")))
    apt = Apt(root)
    # What apt knows, for every package that needs it, in one call.
    wanted = []
    for update in updates:
        should = update.get("should")
        ensure = should.get("ensure") if isinstance(should, dict) else None
        name = update["name"]
        if isinstance(ensure, str) and name_problem(name) is None \
                and needs_apt(ensure, db.lookup(name)) and name not in wanted:
            wanted.append(name)
    policies = apt.policy(wanted)
    changes = []
    for update in updates:
        try:
            entries, db = apply_update(update, db, apt, policies, noop)
        except UpdateError as err:
            entries = [ral.error_entry(update["name"], err)]
        changes.extend(entries)
    return merged(changes)


if __name__ == "__main__":
    sys.exit(ral.run(get=do_get, set=do_set))


