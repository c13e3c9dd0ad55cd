#!/usr/bin/env python3
"""What `ralsh` reports against what `puppet resource` reports, for the
types user, group, host, mount, service and package, on the same fake
files: per type, how many resources and attribute values were compared,
and every value that differs, with both values (docs/puppet-parity.md
explains each difference left).

How both tools read the same files without anything real being touched:

- The script writes a fake root in a temporary directory: etc/passwd,
  shadow, group, gshadow, hosts and fstab with values that exercise the
  attributes (password aging, an expiry date, empty fields, members,
  aliases and comments, mounted and unmounted entries, swap), an
  etc/init.d with rc?.d links (copies of some of this machine's own
  scripts, and fixture scripts of its own that only answer `status`), and
  a dpkg database (var/lib/dpkg/status) of a few packages.
- Puppet cannot be pointed at another root, so it runs in a private mount
  namespace (`unshare -m --propagation private`) where those files are
  bind-mounted over /etc/passwd, /etc/shadow, /etc/group, /etc/gshadow,
  /etc/hosts, /etc/fstab, /etc/init.d, /etc/rc?.d and
  /var/lib/dpkg/status. The shell run there first checks that its mount
  namespace is not this process's and that no mount in it propagates
  (no `shared:` in /proc/self/mountinfo), and binds nothing otherwise.
  Puppet's vardir, rundir and logdir are moved to the temporary
  directory.
- ralsh reads the fake root with `--root DIR`, outside the namespace,
  except for mount: whether an entry is mounted is a fact of the mount
  namespace, so `ralsh -j mount` runs in the same namespace as Puppet,
  with the root / (where /etc/fstab is the fake one), and both see the
  same mount table.

Both only list (`puppet resource TYPE`, `ralsh -j TYPE`): nothing is
changed, no service is started or stopped (the fixture scripts do nothing
but exit with a status code or print a usage line; the copied procps,
hwclock.sh and x11-common answer `status` without changing anything).

Values are compared after the normalisations named in NORMALISATIONS
(printed with --json, and listed in docs/puppet-parity.md).

Usage: python3 bench/puppet_parity.py [--json] [--keep] [--section]
  --json     print the figures and differences as JSON instead of tables
  --section  also write the tables as BENCHMARKS.md's section
  --keep     keep the temporary directory (fake root, both tools' output)
Needs root (unshare, mount --bind), puppet (7.x, with the host_core and
mount_core modules), unshare and mount from util-linux, dpkg-query, and a
built ralsh (RALSH, else target/debug/ralsh or, when missing,
target/release/ralsh). Takes 13 to 20 seconds on 2 CPUs, nearly all of it
Puppet starting once per type. Exit status 0 when both tools ran (the
differences are the result, not a failure); 1 when a tool could not be run
or its output not read.
"""

import argparse
import contextlib
import datetime
import io
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import section  # noqa: E402  (bench/section.py)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET_DIR = os.environ.get("CARGO_TARGET_DIR") or os.path.join(REPO, "target")
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
TYPES = ["user", "group", "host", "mount", "service", "package"]
# The files bound over the real ones inside the namespace (ROOT/PATH over /PATH).
BOUND_FILES = ["etc/passwd", "etc/shadow", "etc/group", "etc/gshadow",
               "etc/hosts", "etc/fstab", "var/lib/dpkg/status"]
RC_DIRS = ["etc/rc%s.d" % level for level in "0123456S"]
BOUND_DIRS = ["etc/init.d"] + RC_DIRS
# Real init scripts copied into the fake root, with their rc?.d links
# (their `status` only reads).
COPIED_SCRIPTS = ["procps", "hwclock.sh", "x11-common"]

# Attributes left out on each side: Puppet's provider and target say
# which of its own providers and files answered; ral's `ral` says which
# provider did.
IGNORED = {"provider", "target", "ral", "name"}

NORMALISATIONS = [
    "integers and texts of digits compare as the same value (Puppet prints "
    "some numbers as texts: mount dump and pass; ral gives integers)",
    "arrays and comma-separated texts compare as the same list (Puppet's "
    "mount options is one text, ral's an array; a one-element array is "
    "the same as its element)",
    "booleans compare with the texts true and false (Puppet prints service "
    "enable as a text)",
    "user groups compare as sets (Puppet sorts them, ral gives the group "
    "file's order)",
    "package: Puppet's ensure holds the installed version; it is compared "
    "with ral's version, and ral's ensure present with any version word",
    "package: ral's NAME:ARCH of this machine's architecture (dpkg "
    "--print-architecture; ral names Multi-Arch: same packages so) compares "
    "with Puppet's NAME; one of another architecture keeps its NAME:ARCH",
    "package: only Puppet's packages of its dpkg-based provider (apt) are "
    "compared; it also lists gems and pip packages",
    "an empty text, an empty list or the word absent (not for ensure) on "
    "one side and no value on the other compare as the same (`puppet "
    "resource` leaves out every such value), except an empty password",
    "user password: ral shows a non-empty hash as [redacted], so it is "
    "compared as set or empty only; the hash itself is not compared",
]

# The properties `puppet resource` can report for each type (Puppet 7.23:
# `puppet describe TYPE`, those its Linux providers implement): an
# attribute ral reports that is not here is ral's own, not compared.
PUPPET_PROPERTIES = {
    "user": {"ensure", "uid", "gid", "comment", "home", "shell", "groups",
             "password", "password_min_age", "password_max_age",
             "password_warn_days", "expiry"},
    "group": {"ensure", "gid", "members"},
    "host": {"ensure", "ip", "host_aliases", "comment"},
    "mount": {"ensure", "device", "fstype", "options", "dump", "pass"},
    "service": {"ensure", "enable"},
    "package": {"ensure", "version", "mark"},
}


def machine():
    """CPU model, CPUs and kernel, for the record."""
    model = "unknown CPU"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return "%s (%d CPUs), Linux %s" % (model, os.cpu_count(), os.uname().release)


def find_ralsh():
    """The ralsh to run: RALSH, else the debug build, else the release one."""
    if os.environ.get("RALSH"):
        return os.environ["RALSH"]
    for profile in ("debug", "release"):
        path = os.path.join(TARGET_DIR, profile, "ralsh")
        if os.path.exists(path):
            return path
    return None


# ---------------------------------------------------------------- fake root

PASSWD = """\
root:x:0:0:root:/root:/bin/bash
daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin
bin:x:2:2:bin:/bin:/usr/sbin/nologin
alice:x:1000:1000:Alice Liddell,Room 12,555-0101,,:/home/alice:/bin/bash
bob:x:1001:1001::/home/bob:/bin/sh
carol:x:1002:1002:Carol:/srv/carol:/usr/bin/zsh
dave:x:1003:100:Dave (no shadow line):/home/dave:/bin/bash
svc-web:x:998:998:web service:/var/www:/usr/sbin/nologin
"""

# alice: every aging field and an expiry date (2026-01-01); bob: an empty
# password and empty aging fields; carol: a locked hash and an expiry in
# the past; dave has no line; svc-web only a minimum age.
SHADOW = """\
root:*:19000:0:99999:7:::
daemon:*:19000:0:99999:7:::
bin:*:19000:0:99999:7:::
alice:$6$parity$0123456789abcdefABCDEF/.0123456789abcdefABCDEF/.01234:19500:1:90:14:30:20454:
bob::19500::::::
carol:!$6$parity$lockedhashlockedhash:19500:0:99999:7::19000:
svc-web:!:19500:2:::::
"""

GROUP = """\
root:x:0:
daemon:x:1:
bin:x:2:
adm:x:4:alice
users:x:100:
sudo:x:27:alice,carol
staff:x:50:
alice:x:1000:
bob:x:1001:
carol:x:1002:
svc-web:x:998:alice,bob
"""

# staff has no gshadow line.
GSHADOW = """\
root:*::
daemon:*::
bin:*::
adm:*::alice
users:*::
sudo:*::alice,carol
alice:!::
bob:!::
carol:!::
svc-web:!::alice,bob
"""

HOSTS = """\
127.0.0.1\tlocalhost
127.0.1.1\tparity.example.org parity
192.0.2.10  web1.example.org web1 www   # front end
192.0.2.11  db1.example.org\t\t# primary database
2001:db8::5 mail.example.org mail
198.51.100.7 backup.example.org bk bk2 bk3 #no space before the text

# The following lines are desirable for IPv6 capable hosts
::1     localhost ip6-localhost ip6-loopback
ff02::1 ip6-allnodes
ff02::2 ip6-allrouters
"""

# Entries that are not mounted here (the mounted ones come from
# /proc/self/mounts, see fstab_text).
FSTAB_UNMOUNTED = """\
UUID=1234-ABCD\t/boot/efi\tvfat\tumask=0077\t0\t1
server:/export /mnt/nfs nfs rw,hard,timeo=600 0 0
/dev/sdb1 /srv/data ext4 noatime,nofail
LABEL=backup /mnt/backup\\040disk ext4 defaults 0 2
/swapfile none swap sw 0 0
"""

# The really mounted file systems an fstab entry is written for, when
# mounted here.
MOUNTED_CANDIDATES = ["/", "/proc", "/sys", "/dev/shm"]

FIXTURE_SCRIPT = """\
#!/bin/sh
### BEGIN INIT INFO
# Provides:          {name}
# Required-Start:
# Required-Stop:
# Default-Start:     {start}
# Default-Stop:      {stop}
# Short-Description: fixture of bench/puppet_parity.py
### END INIT INFO
# Starts and stops nothing: it only answers {what}.
case "$1" in
{body}
esac
"""

# name: (Default-Start, Default-Stop, rc links, the script's case body).
# Links: S or K plus the runlevels. The status answers: 0 running, 3
# stopped, 4 unknown; ralpar-nostatus has no status action (and no word
# for one in its text).
FIXTURES = {
    "ralpar-running": ("2 3 4 5", "0 1 6", {"S": "2345", "K": "016"},
                       "  status) exit 0 ;;\n  *) echo \"Usage: $0 {status}\" >&2; exit 1 ;;"),
    "ralpar-stopped": ("2 3 4 5", "0 1 6", {"K": "0123456"},
                       "  status) exit 3 ;;\n  *) echo \"Usage: $0 {status}\" >&2; exit 1 ;;"),
    "ralpar-partial": ("2 3 4 5", "0 1 6", {"S": "23", "K": "01456"},
                       "  status) exit 3 ;;\n  *) echo \"Usage: $0 {status}\" >&2; exit 1 ;;"),
    "ralpar-unknown": ("2 3 4 5", "0 1 6", {"S": "2345", "K": "016"},
                       "  status) exit 4 ;;\n  *) echo \"Usage: $0 {status}\" >&2; exit 1 ;;"),
    "ralpar-nostatus": ("2 3 4 5", "0 1 6", {"S": "2345", "K": "016"},
                        "  *) echo \"Usage: $0 {start|stop}\" >&2; exit 1 ;;"),
}

DPKG_STATUS = [
    # (package, status, architecture, multi-arch, version)
    ("base-files", "install ok installed", "amd64", None, "12.4+deb12u5"),
    ("libc6", "install ok installed", "amd64", "same", "2.36-9+deb12u4"),
    ("libc6", "install ok installed", "i386", "same", "2.36-9+deb12u4"),
    ("tzdata", "install ok installed", "all", "foreign", "2024a-0+deb12u1"),
    ("vim", "install ok installed", "amd64", None, "2:9.0.1378-2"),
    ("nano", "hold ok installed", "amd64", None, "7.2-1"),
    ("oldpkg", "deinstall ok config-files", "amd64", None, "1.0-1"),
    ("brokenpkg", "install reinstreq half-installed", "amd64", None, "0.9-1"),
    ("zlib1g", "install ok installed", "amd64", "same", "1:1.2.13.dfsg-1"),
    ("gone", "purge ok not-installed", None, None, None),
]


def write(path, text, mode=0o644):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, mode)


def mounted_here():
    """(device, mount point, type) of the MOUNTED_CANDIDATES mounted in this
    mount namespace, as /proc/self/mounts lists them (the first line of
    each)."""
    found = {}
    with open("/proc/self/mounts") as f:
        for line in f:
            device, point, fstype = line.split()[:3]
            if point in MOUNTED_CANDIDATES and point not in found:
                found[point] = (device, point, fstype)
    return [found[p] for p in MOUNTED_CANDIDATES if p in found]


def fstab_text():
    lines = ["# fake fstab of bench/puppet_parity.py", ""]
    for device, point, fstype in mounted_here():
        passno = 1 if point == "/" else 0
        lines.append("%s %s %s defaults %d %d" % (device, point, fstype, 0, passno))
    return "\n".join(lines) + "\n" + FSTAB_UNMOUNTED


def dpkg_status_text():
    stanzas = []
    for name, status, arch, multi_arch, version in DPKG_STATUS:
        fields = [("Package", name), ("Status", status)]
        if arch:
            fields += [("Priority", "optional"), ("Section", "misc"),
                       ("Installed-Size", "100"),
                       ("Maintainer", "Parity Fixture <parity@example.org>"),
                       ("Architecture", arch)]
        if multi_arch:
            fields.append(("Multi-Arch", multi_arch))
        if version:
            fields += [("Version", version),
                       ("Description", "fixture package of bench/puppet_parity.py")]
        stanzas.append("".join("%s: %s\n" % kv for kv in fields))
    return "\n".join(stanzas)


def copy_init_script(root, name):
    """Copies /etc/init.d/NAME and its rc?.d links, when present."""
    source = os.path.join("/etc/init.d", name)
    if not os.path.isfile(source):
        return False
    shutil.copy2(source, os.path.join(root, "etc/init.d", name))
    for rc in RC_DIRS:
        real = os.path.join("/", rc)
        for link in sorted(os.listdir(real)) if os.path.isdir(real) else []:
            if link[:1] in "SK" and link[3:] == name:
                os.symlink(os.readlink(os.path.join(real, link)),
                           os.path.join(root, rc, link))
    return True


def build_root(root):
    """Writes the fake files below ROOT; returns what was copied."""
    write(os.path.join(root, "etc/passwd"), PASSWD)
    write(os.path.join(root, "etc/shadow"), SHADOW, 0o640)
    write(os.path.join(root, "etc/group"), GROUP)
    write(os.path.join(root, "etc/gshadow"), GSHADOW, 0o640)
    write(os.path.join(root, "etc/hosts"), HOSTS)
    write(os.path.join(root, "etc/fstab"), fstab_text())
    for rc in RC_DIRS:
        os.makedirs(os.path.join(root, rc), exist_ok=True)
    os.makedirs(os.path.join(root, "etc/init.d"), exist_ok=True)
    copied = [name for name in COPIED_SCRIPTS if copy_init_script(root, name)]
    for name, (start, stop, links, body) in FIXTURES.items():
        what = "status" if "status)" in body else "its usage"
        write(os.path.join(root, "etc/init.d", name),
              FIXTURE_SCRIPT.format(name=name, start=start, stop=stop,
                                    body=body, what=what), 0o755)
        for kind, levels in links.items():
            for level in levels:
                os.symlink("../init.d/" + name,
                           os.path.join(root, "etc/rc%s.d" % level,
                                        "%s01%s" % (kind, name)))
    write(os.path.join(root, "etc/init.d/README"), "not a service\n")
    write(os.path.join(root, "var/lib/dpkg/status"), dpkg_status_text())
    for sub in ("updates", "info"):
        os.makedirs(os.path.join(root, "var/lib/dpkg", sub), exist_ok=True)
    return copied


# ---------------------------------------------------------------- running

def namespace_script(root, work, ralsh, parent_ns):
    """The shell run in the private namespace: checks it is one, binds the
    fake files, runs Puppet for every type and ralsh for mount."""
    q = shlex.quote
    lines = [
        "set -u",
        # Bind nothing unless this namespace is not the caller's and no
        # mount in it propagates to another namespace.
        '[ "$(readlink /proc/self/ns/mnt)" != %s ] ||'
        ' { echo "not in a new mount namespace" >&2; exit 97; }' % q(parent_ns),
        "if grep -q ' shared:' /proc/self/mountinfo; then"
        " echo 'a mount propagates: not private' >&2; exit 98; fi",
    ]
    for rel in BOUND_FILES + BOUND_DIRS:
        lines.append("mount --bind %s %s || exit 99" % (q(os.path.join(root, rel)), q("/" + rel)))
    puppet_dirs = " ".join("--%s %s" % (opt, q(os.path.join(work, "puppet", opt)))
                           for opt in ("vardir", "rundir", "logdir"))
    for kind in TYPES:
        out = os.path.join(work, "puppet-%s" % kind)
        lines.append("puppet resource %s %s >%s.out 2>%s.err; echo $? >%s.rc"
                     % (puppet_dirs, kind, q(out), q(out), q(out)))
    out = os.path.join(work, "ral-mount")
    lines.append("%s --root / -j mount >%s.out 2>%s.err; echo $? >%s.rc"
                 % (q(ralsh), q(out), q(out), q(out)))
    return "\n".join(lines) + "\n"


def read_outcome(prefix):
    with open(prefix + ".rc") as f:
        rc = int(f.read().strip() or "-1")
    with open(prefix + ".out") as f:
        out = f.read()
    with open(prefix + ".err") as f:
        err = f.read()
    return rc, out, err


def run_namespace(root, work, ralsh):
    parent_ns = os.readlink("/proc/self/ns/mnt")
    script = namespace_script(root, work, ralsh, parent_ns)
    # The system's PATH: Puppet's pip providers fail on a pyenv shim of a
    # pip that is not installed.
    env = dict(os.environ, PATH=SYSTEM_PATH)
    proc = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", script],
                          capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise RuntimeError("the namespace run failed (%d): %s"
                           % (proc.returncode, proc.stderr.strip()))


def run_ralsh(ralsh, root, kind):
    proc = subprocess.run([ralsh, "--root", root, "-j", kind], capture_output=True, text=True)
    return proc.returncode, proc.stdout, proc.stderr


def ral_attributes(ralsh, kind):
    """The attribute names of ral's provider for KIND (ralsh -e -j)."""
    proc = subprocess.run([ralsh, "-e", "-j", kind], capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError("ralsh -e -j %s failed: %s" % (kind, proc.stderr.strip()))
    names = set()
    for provider in json.loads(proc.stdout)["providers"]:
        names.update(a["name"] for a in provider.get("attributes", []))
    return names


# ---------------------------------------------------------------- parsing

class ManifestError(ValueError):
    pass


def parse_manifest(text):
    """The resources of `puppet resource` output: [(type, title, {attr:
    value})]. Values are texts ('...' or "..."), numbers, true/false,
    undef, or arrays of those."""
    pos = 0
    resources = []

    def skip():
        nonlocal pos
        while pos < len(text):
            if text[pos].isspace():
                pos += 1
            elif text[pos] == "#":
                while pos < len(text) and text[pos] != "\n":
                    pos += 1
            else:
                break

    def word():
        nonlocal pos
        start = pos
        while pos < len(text) and (text[pos].isalnum() or text[pos] in "_:.-"):
            pos += 1
        if start == pos:
            raise ManifestError("expected a word at %d: %r" % (pos, text[pos:pos + 40]))
        return text[start:pos]

    def expect(token):
        nonlocal pos
        skip()
        if not text.startswith(token, pos):
            raise ManifestError("expected %r at %d: %r" % (token, pos, text[pos:pos + 40]))
        pos += len(token)

    def quoted():
        nonlocal pos
        quote = text[pos]
        pos += 1
        out = []
        escapes = {"n": "\n", "t": "\t", "r": "\r", "s": " ", "$": "$", '"': '"',
                   "'": "'", "\\": "\\"}
        while pos < len(text) and text[pos] != quote:
            ch = text[pos]
            if ch == "\\" and pos + 1 < len(text):
                nxt = text[pos + 1]
                if quote == "'" and nxt in "'\\":
                    out.append(nxt)
                    pos += 2
                    continue
                if quote == '"' and nxt == "u" and text[pos + 2:pos + 3] == "{":
                    end = text.index("}", pos)
                    out.append(chr(int(text[pos + 3:end], 16)))
                    pos = end + 1
                    continue
                if quote == '"' and nxt in escapes:
                    out.append(escapes[nxt])
                    pos += 2
                    continue
            out.append(ch)
            pos += 1
        pos += 1
        return "".join(out)

    def value():
        nonlocal pos
        skip()
        ch = text[pos]
        if ch in "'\"":
            return quoted()
        if ch == "[":
            pos += 1
            items = []
            skip()
            while text[pos] != "]":
                items.append(value())
                skip()
                if text[pos] == ",":
                    pos += 1
                    skip()
            pos += 1
            return items
        token = word()
        if token in ("true", "false"):
            return token == "true"
        if token == "undef":
            return None
        try:
            return int(token)
        except ValueError:
            return token

    while True:
        skip()
        if pos >= len(text):
            return resources
        kind = word()
        expect("{")
        skip()
        title = value()
        expect(":")
        attrs = {}
        while True:
            skip()
            if text[pos] == "}":
                pos += 1
                break
            name = word()
            expect("=>")
            attrs[name] = value()
            skip()
            if text[pos] == ",":
                pos += 1
        resources.append((kind.lower(), title, attrs))


# ---------------------------------------------------------------- comparing

def as_list(value):
    if isinstance(value, list):
        return [str(v) for v in value]
    if isinstance(value, str):
        return [v for v in value.split(",")] if value else []
    return [str(value)]


def normalise(kind, attr, value):
    """One side's value in the form both are compared in; None: no value."""
    if value is None or value == "absent" and attr != "ensure":
        return None
    if kind == "user" and attr == "password":
        return "(empty)" if value == "" else "(set)"
    if value == "" or value == []:
        return None
    if kind == "user" and attr == "groups":
        return sorted(as_list(value))
    if isinstance(value, list) or attr in ("options", "host_aliases", "members", "groups"):
        return as_list(value)
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def puppet_package(attrs):
    """Puppet's package ensure (the version, or a state word) as ral's
    ensure and version."""
    ensure = attrs.get("ensure")
    out = {k: v for k, v in attrs.items() if k != "ensure"}
    if ensure in ("absent", "purged"):
        out["ensure"] = "absent"
    elif ensure == "held":
        out["ensure"] = "present"
        out["mark"] = "hold"
    elif ensure is not None:
        out["ensure"] = "present"
        out["version"] = ensure
    return out


def native_arch():
    proc = subprocess.run(["dpkg", "--print-architecture"], capture_output=True, text=True)
    return proc.stdout.strip()


def ral_package_name(name, arch):
    """NAME for ral's NAME:ARCH of this machine's architecture ARCH."""
    base, _, its_arch = name.partition(":")
    return base if its_arch == arch else name


def compare(kind, puppet, ral, ral_attrs):
    """Figures and differences of one type. PUPPET, RAL: {name: attrs}."""
    differences = []
    only_puppet = sorted(set(puppet) - set(ral))
    only_ral = sorted(set(ral) - set(puppet))
    for name in only_puppet:
        differences.append({"resource": name, "attribute": None,
                            "puppet": "listed", "ral": "not listed"})
    for name in only_ral:
        differences.append({"resource": name, "attribute": None,
                            "puppet": "not listed", "ral": "listed"})
    compared = 0
    ral_only_attrs = set()
    for name in sorted(set(puppet) & set(ral)):
        p_attrs, r_attrs = puppet[name], ral[name]
        for attr in sorted((set(p_attrs) | set(r_attrs)) - IGNORED):
            if attr not in PUPPET_PROPERTIES[kind] and attr not in p_attrs:
                ral_only_attrs.add(attr)
                continue
            p_value = normalise(kind, attr, p_attrs.get(attr))
            r_value = normalise(kind, attr, r_attrs.get(attr))
            if p_value is None and r_value is None:
                continue
            compared += 1
            if p_value != r_value:
                diff = {"resource": name, "attribute": attr,
                        "puppet": p_attrs.get(attr, "(no value)"),
                        "ral": r_attrs.get(attr, "(no value)")}
                if attr not in ral_attrs:
                    diff["ral"] = "(ral's type has no such attribute)"
                    diff["ral_lacks_attribute"] = True
                differences.append(diff)
    return {"type": kind,
            "resources": {"puppet": len(puppet), "ral": len(ral),
                          "compared": len(set(puppet) & set(ral))},
            "values_compared": compared,
            "values_differing": sum(1 for d in differences if d["attribute"]),
            "values_ral_lacks": sum(1 for d in differences if d.get("ral_lacks_attribute")),
            "resources_differing": len(only_puppet) + len(only_ral),
            "ral_only_attributes": sorted(ral_only_attrs),
            "differences": differences}


def index_puppet(kind, resources, notes):
    """Puppet's resources of KIND by title; for package, only those of
    its dpkg-based providers (apt, dpkg: others list gems and the like).
    A title listed twice is kept once and noted."""
    out = {}
    for rkind, title, attrs in resources:
        if rkind != kind:
            continue
        if kind == "package":
            if attrs.get("provider") not in ("apt", "dpkg", "aptitude"):
                continue
            attrs = puppet_package(attrs)
        if title in out:
            notes.append("%s: Puppet lists %r more than once; the first is compared"
                         % (kind, title))
            continue
        out[title] = attrs
    return out


def index_ral(kind, resources, notes, arch):
    out = {}
    for res in resources:
        name = res["name"]
        attrs = dict(res)
        if kind == "package":
            name = ral_package_name(name, arch)
        if name in out:
            notes.append("%s: ral's %r is compared as %r, which ral also lists "
                         "(the first is compared)" % (kind, res["name"], name))
            continue
        out[name] = attrs
    return out


# ---------------------------------------------------------------- output

# The words a difference gives in place of a value.
MARKERS = {"(no value)", "(ral's type has no such attribute)", "listed", "not listed"}


def show(value):
    if isinstance(value, str) and value in MARKERS:
        return value
    return json.dumps(value)


def print_tables(report):
    print("puppet resource (Puppet %s) against %s, on fake files"
          % (report["puppet_version"], report["ralsh"]))
    print("%s, on %s" % (report["date"], report["machine"]))
    print()
    header = ("type", "Puppet lists", "ral lists", "resources compared",
              "values compared", "values differing", "(ral lacks the attribute)",
              "resources in one only")
    rows = [header]
    for t in report["types"]:
        rows.append((t["type"], str(t["resources"]["puppet"]), str(t["resources"]["ral"]),
                     str(t["resources"]["compared"]), str(t["values_compared"]),
                     str(t["values_differing"]), str(t["values_ral_lacks"]),
                     str(t["resources_differing"])))
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    for i, row in enumerate(rows):
        print("  ".join(cell.ljust(w) if j == 0 else cell.rjust(w)
                        for j, (cell, w) in enumerate(zip(row, widths))))
        if i == 0:
            print("  ".join("-" * w for w in widths))
    for t in report["types"]:
        if not t["differences"] and not t["ral_only_attributes"]:
            continue
        print()
        print("%s:" % t["type"])
        for d in t["differences"]:
            what = d["attribute"] or "(resource)"
            print("  %-22s %-20s Puppet %s; ral %s"
                  % (d["resource"], what, show(d["puppet"]), show(d["ral"])))
        if t["ral_only_attributes"]:
            print("  ral's own attributes, not compared: %s" % ", ".join(t["ral_only_attributes"]))
    if report["notes"]:
        print()
        for note in report["notes"]:
            print("note: %s" % note)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    parser.add_argument("--section", action="store_true",
                        help="also write the tables as BENCHMARKS.md's section")
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("run as root: the bench binds files in a mount namespace of its own",
              file=sys.stderr)
        return 1
    ralsh = find_ralsh()
    missing = [tool for tool in ("puppet", "unshare", "mount", "dpkg-query")
               if shutil.which(tool) is None]
    if ralsh is None or not os.access(ralsh, os.X_OK):
        missing.append("ralsh (cargo build, or RALSH)")
    if missing:
        print("missing: %s" % ", ".join(missing), file=sys.stderr)
        return 1
    # Made before anything runs: its header says how busy the machine was.
    sec = (section.Section("puppet_parity", "Puppet parity of the core types",
                           "bench/puppet_parity.py") if args.section else None)
    work = tempfile.mkdtemp(prefix="ral-puppet-parity-")
    root = os.path.join(work, "root")
    notes = []
    try:
        copied = build_root(root)
        for name in COPIED_SCRIPTS:
            if name not in copied:
                notes.append("service: /etc/init.d/%s is missing here, not copied" % name)
        os.makedirs(os.path.join(work, "puppet"))
        run_namespace(root, work, ralsh)
        version = subprocess.run(["puppet", "--version"], capture_output=True,
                                 text=True).stdout.strip()
        report = {"date": datetime.datetime.now(datetime.timezone.utc)
                  .strftime("%Y-%m-%d %H:%M UTC"),
                  "puppet_version": version, "ralsh": ralsh, "machine": machine(),
                  "normalisations": NORMALISATIONS, "types": [], "notes": notes}
        arch = native_arch()
        for kind in TYPES:
            rc, out, err = read_outcome(os.path.join(work, "puppet-%s" % kind))
            if rc != 0:
                raise RuntimeError("puppet resource %s failed (%d): %s" % (kind, rc, err.strip()))
            puppet = index_puppet(kind, parse_manifest(out), notes)
            if kind == "mount":
                rc, out, err = read_outcome(os.path.join(work, "ral-mount"))
            else:
                rc, out, err = run_ralsh(ralsh, root, kind)
            if rc != 0:
                raise RuntimeError("ralsh -j %s failed (%d): %s" % (kind, rc, err.strip()))
            ral = index_ral(kind, json.loads(out)["resources"], notes, arch)
            report["types"].append(compare(kind, puppet, ral, ral_attributes(ralsh, kind)))
    except (RuntimeError, OSError, ManifestError, ValueError) as err:
        print("puppet_parity: %s (files kept in %s)" % (err, work), file=sys.stderr)
        return 1
    if args.keep:
        notes.append("files kept in %s" % work)
    else:
        shutil.rmtree(work)
    if args.json:
        json.dump(report, sys.stdout, indent=2)
        print()
    else:
        print_tables(report)
    if sec is not None:
        tables = io.StringIO()
        with contextlib.redirect_stdout(tables):
            print_tables(report)
        sec.write("`puppet resource TYPE` and `ralsh -j TYPE` listing the same fake "
                  "files; every difference is explained in "
                  "[docs/puppet-parity.md](docs/puppet-parity.md).\n\n```text\n"
                  + tables.getvalue() + "```\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
