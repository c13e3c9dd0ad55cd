#!/usr/bin/env -S python3 -I -S
"""ralsh provider: user accounts (type user, json calling convention).

Run by the wrapper etc_passwd.prov as `python3 -I -S etc_passwd.py
ral_action=ACTION`, with one JSON document on stdin (get, set) and one JSON
document on stdout. Every file lives below $RALSH_ROOT_DIR ("/" when unset or
empty): etc/passwd, etc/shadow, and for group membership etc/group and, when
it exists, etc/gshadow.

The wrapper answers the plain listing of all users (get `{"names":[]}`)
itself with awk and hands every other call to this script: a change to what
a listing reports here must be made there too (the tests compare the two).

Files are edited line by line: lines that are not changed stay byte for byte,
and each changed file is written to a temporary file in the same directory,
fsynced, and then moved over the original. useradd(8) is never run.

This script is written out with the other bundled providers into a cache
directory, so it must not import anything but the standard library.
"""

import json
import os
import re
import shutil
import stat
import sys
import tempfile
import time
import unicodedata

METADATA = """\
---
provider:
  type: user
  name: etc_passwd
  invoke: json
  actions: [get, set]
  suitable: true
  features: [supports_noop]
  desc: |
    Manages user accounts in /etc/passwd and /etc/shadow, with supplementary
    group membership in /etc/group (and /etc/gshadow when it exists), below
    RALSH_ROOT_DIR when it is set; no file outside that root is read or
    written, and useradd(8) and friends are never run. New users are
    appended as 'NAME:x:UID:GID:COMMENT:HOME:SHELL' with a shadow line
    'NAME:PASSWORD:DAYS:0:99999:7:::' (password '!' unless given). A new
    user without a uid gets the smallest free uid from 1000 to 59999;
    without a gid it gets the group with its own name, which is created
    (gid = uid when free, else the smallest free gid from 1000) when
    missing. Removing a user removes its passwd and shadow lines and its
    membership in every group, but not its primary group. Changed files
    are written to a temporary file in the same directory, which then
    atomically replaces the original, keeping its mode and owner (a new
    shadow file is 0640, root:shadow when run as root); a file changed by
    someone else meanwhile is not replaced. All other lines stay byte for
    byte. Blank lines, lines starting with '#' and NIS lines ('+', '-') are
    skipped when reading; malformed lines are skipped with a warning. When a
    name appears more than once, the first line wins, as for getpwnam(3).
    Control characters in values are shown as '?'.
  attributes:
    name:
      desc: "the login name"
    ensure:
      desc: "whether the account exists"
      type: "enum[present, absent]"
    uid:
      desc: "the numeric user id (picked when not given at creation)"
      type: "integer[0, 4294967294]"
      kind: init
    gid:
      desc: "the numeric id of the primary group (default: the group named like the user, created when missing)"
      type: "integer[0, 4294967294]"
    comment:
      desc: "the GECOS field, usually the user's full name"
    home:
      desc: "the home directory (default /home/NAME)"
    shell:
      desc: "the login shell (default /bin/sh)"
    groups:
      desc: "the supplementary groups: those whose member list holds the user"
      type: "array[string]"
    password:
      desc: "the password hash from /etc/shadow ('!' or '*' when locked); reported only when the shadow file is readable"
      sensitive: true
    managehome:
      desc: "create the home directory (0755, owned by the user when run as root) on creation, and remove it on deletion"
      type: boolean
      kind: w
"""

PASSWD = "etc/passwd"
SHADOW = "etc/shadow"
GROUP = "etc/group"
GSHADOW = "etc/gshadow"
ID_MAX = 4294967294
AUTO_FIRST = 1000
AUTO_END = 60000           # exclusive
NAME_RE = re.compile(r"[a-z_][a-z0-9_-]*[$]?\Z")
NAME_MAX = 32
DIGITS = re.compile(r"[0-9]+\Z")
ATTRIBUTES = ("name", "ensure", "uid", "gid", "comment", "home", "shell",
              "groups", "password", "managehome")


class CallError(Exception):
    """Fails the whole call."""

    def __init__(self, message, kind="failed"):
        Exception.__init__(self, message)
        self.kind = kind


class UpdateError(Exception):
    """Fails one update of a set call."""


# ---------------------------------------------------------------- output


def clean(value):
    """Control characters become '?'."""
    return "".join("?" if unicodedata.category(ch) in ("Cc", "Cs", "Zl", "Zp")
                   else ch for ch in value)


def quoted(value):
    return "'" + clean(str(value)) + "'"


def write_out(text):
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass


def emit(document):
    write_out(json.dumps(document, ensure_ascii=False) + "\n")


def warn(message):
    try:
        sys.stderr.write("warn: " + clean(message) + "\n")
        sys.stderr.flush()
    except OSError:
        pass


def os_message(err):
    return err.strerror or str(err)


def os_kind(err):
    return "forbidden" if isinstance(err, PermissionError) else "failed"


# ------------------------------------------------------------------ files


def root_dir():
    return os.environ.get("RALSH_ROOT_DIR") or "/"


def inside_root(path):
    real_root = os.path.realpath(root_dir())
    real = os.path.realpath(path)
    return os.path.commonpath([real_root, real]) == real_root, real


def below_root(rel):
    """The real path of ROOT/rel, refusing paths that lead out of the root."""
    root = root_dir()
    if not os.path.isdir(root):
        raise CallError("the root directory %s does not exist or is not a "
                        "directory" % quoted(root))
    path = os.path.join(root, rel)
    inside, real = inside_root(path)
    if not inside:
        raise CallError("%s resolves to %s, which is outside the root "
                        "directory %s" % (quoted(path), quoted(real),
                                          quoted(root)))
    return real


def decode(raw):
    """UTF-8 if possible, else Latin-1, which decodes any byte."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("latin-1")


class Record:
    """One line of a colon-separated file as raw bytes (terminator
    included); `fields` is the decoded record, or None for other lines."""

    def __init__(self, raw, fields):
        self.raw = raw
        self.fields = fields

    @property
    def name(self):
        return self.fields[0] if self.fields else None

    def set_field(self, index, value):
        text = self.raw
        end = b""
        while text[-1:] in (b"\n", b"\r"):
            end = text[-1:] + end
            text = text[:-1]
        parts = text.split(b":")
        parts[index] = value.encode("utf-8")
        self.raw = b":".join(parts) + end
        self.fields = list(self.fields)
        self.fields[index] = value


class Table:
    """A colon-separated file of WIDTH fields; NUMERIC are the indexes of
    fields that must be ids."""

    def __init__(self, rel, width, numeric, default_mode, default_group=None):
        self.rel = rel
        self.width = width
        self.numeric = numeric
        self.default_mode = default_mode
        self.default_group = default_group
        self.path = below_root(rel)
        self.lines = []
        self.stat = None
        self.changed = False

    def load(self):
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return self
        except OSError as err:
            raise CallError("cannot read %s: %s"
                            % (quoted(self.path), os_message(err)), os_kind(err))
        try:
            with os.fdopen(fd, "rb") as fh:
                self.stat = os.fstat(fh.fileno())
                if not stat.S_ISREG(self.stat.st_mode):
                    raise CallError("%s is not a regular file" % quoted(self.path))
                data = fh.read()
        except OSError as err:
            raise CallError("cannot read %s: %s"
                            % (quoted(self.path), os_message(err)), os_kind(err))
        pieces = data.split(b"\n")
        for number, piece in enumerate(pieces, start=1):
            if number == len(pieces):
                if piece == b"":
                    break
                raw = piece
            else:
                raw = piece + b"\n"
            self.lines.append(Record(raw, self.parse(piece, number)))
        return self

    def parse(self, piece, number):
        line = decode(piece).rstrip("\r")
        stripped = line.strip()
        if stripped == "" or stripped[0] in "#+-":
            return None
        fields = line.split(":")
        if len(fields) != self.width:
            warn("%s line %d: expected %d ':'-separated fields, found %d; "
                 "line skipped" % (self.path, number, self.width, len(fields)))
            return None
        if fields[0] == "":
            warn("%s line %d: empty name; line skipped" % (self.path, number))
            return None
        for index in self.numeric:
            if not DIGITS.match(fields[index]) or int(fields[index]) > ID_MAX:
                warn("%s line %d: %s is not a number from 0 to %d; line "
                     "skipped" % (self.path, number, quoted(fields[index]),
                                  ID_MAX))
                return None
        return fields

    def records(self):
        """The first record of every name, in file order."""
        seen = set()
        result = []
        for line in self.lines:
            if line.fields and line.name not in seen:
                seen.add(line.name)
                result.append(line)
        return result

    def find(self, name):
        for line in self.lines:
            if line.name == name:
                return line
        return None

    def remove(self, name):
        before = len(self.lines)
        self.lines = [line for line in self.lines if line.name != name]
        if len(self.lines) != before:
            self.changed = True

    def append(self, fields):
        if self.lines and not self.lines[-1].raw.endswith(b"\n"):
            self.lines[-1].raw += b"\n"
        raw = ":".join(fields).encode("utf-8") + b"\n"
        self.lines.append(Record(raw, list(fields)))
        self.changed = True

    def content(self):
        return b"".join(line.raw for line in self.lines)

    def prepare(self):
        """Writes the new content to a temporary file beside the original."""
        directory = os.path.dirname(self.path)
        if not os.path.isdir(directory):
            raise CallError("the directory %s does not exist" % quoted(directory))
        if self.stat is not None and not os.access(self.path, os.W_OK):
            raise CallError("cannot write %s: Permission denied"
                            % quoted(self.path), "forbidden")
        mode = (stat.S_IMODE(self.stat.st_mode) if self.stat is not None
                else self.default_mode)
        try:
            fd, temp = tempfile.mkstemp(dir=directory, prefix=".ralsh-",
                                        suffix="." + os.path.basename(self.path))
        except OSError as err:
            raise CallError("cannot create a temporary file in %s: %s"
                            % (quoted(directory), os_message(err)), os_kind(err))
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(self.content())
                fh.flush()
                os.fchmod(fh.fileno(), mode)
                if os.geteuid() == 0:
                    if self.stat is not None:
                        os.fchown(fh.fileno(), self.stat.st_uid, self.stat.st_gid)
                    else:
                        os.fchown(fh.fileno(), 0, self.default_group or 0)
                os.fsync(fh.fileno())
        except BaseException as err:
            discard(temp)
            if isinstance(err, OSError):
                raise CallError("cannot write %s: %s"
                                % (quoted(temp), os_message(err)), os_kind(err))
            raise
        return temp

    def check_unchanged(self):
        try:
            now = os.stat(self.path)
        except FileNotFoundError:
            now = None
        except OSError as err:
            raise CallError("cannot check %s: %s"
                            % (quoted(self.path), os_message(err)), os_kind(err))
        old = self.stat
        same = (now is None and old is None) or (
            now is not None and old is not None
            and (now.st_dev, now.st_ino, now.st_size, now.st_mtime_ns)
            == (old.st_dev, old.st_ino, old.st_size, old.st_mtime_ns))
        if not same:
            raise CallError("%s was changed by someone else while it was being "
                            "edited; nothing was written" % quoted(self.path))

    def commit(self, temp):
        try:
            os.replace(temp, self.path)
        except OSError as err:
            raise CallError("cannot replace %s: %s"
                            % (quoted(self.path), os_message(err)), os_kind(err))
        try:
            dir_fd = os.open(os.path.dirname(self.path), os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)
        except OSError:
            pass


def discard(path):
    try:
        os.unlink(path)
    except OSError:
        pass


def save(tables):
    """Writes every changed table: all are checked and staged before any
    replaces its original; temporary files are removed on error."""
    tables = [t for t in tables if t is not None and t.changed]
    temps = []
    try:
        for t in tables:
            t.check_unchanged()
        for t in tables:
            temps.append(t.prepare())
        for t in tables:
            t.check_unchanged()
        done = []
        while temps:
            try:
                tables[0].commit(temps[0])
            except CallError as err:
                if done:
                    err.args = ("%s (%s already replaced, so the files are no "
                                "longer in step)"
                                % (err, ", ".join(quoted(p) for p in done)),)
                raise
            done.append(tables.pop(0).path)
            temps.pop(0)
    finally:
        for temp in temps:
            discard(temp)


# -------------------------------------------------------------- databases


class Databases:
    def __init__(self, need_shadow):
        etc = os.path.dirname(below_root(PASSWD))
        if not os.path.isdir(etc):
            raise CallError("the directory %s does not exist" % quoted(etc))
        self.passwd = Table(PASSWD, 7, (2, 3), 0o644).load()
        self.group = Table(GROUP, 4, (2,), 0o644).load()
        self.gshadow = None
        if os.path.lexists(below_root(GSHADOW)):
            self.gshadow = Table(GSHADOW, 4, (), 0o640).load()
            if self.gshadow.stat is None:
                raise CallError("%s cannot be read" % quoted(self.gshadow.path))
        shadow_group = self.group.find("shadow")
        self.shadow = Table(SHADOW, 9, (), 0o640,
                            int(shadow_group.fields[2]) if shadow_group else 0)
        self.shadow_readable = True
        try:
            self.shadow.load()
        except CallError:
            if need_shadow:
                raise
            self.shadow_readable = False

    def groups_of(self, name):
        return [line.name for line in self.group.records()
                if name in members_of(line.fields)]

    def resource(self, line):
        f = line.fields
        res = {"name": clean(f[0]), "ensure": "present", "uid": int(f[2]),
               "gid": int(f[3]), "comment": clean(f[4]), "home": clean(f[5]),
               "shell": clean(f[6]),
               "groups": [clean(g) for g in self.groups_of(f[0])]}
        if self.shadow_readable:
            entry = self.shadow.find(f[0])
            if entry is not None:
                res["password"] = clean(entry.fields[1])
        return res

    def tables(self):
        return [self.passwd, self.shadow, self.group, self.gshadow]


def members_of(fields):
    return [m.strip() for m in fields[3].split(",") if m.strip()]


# -------------------------------------------------------------------- get


def read_input():
    try:
        data = sys.stdin.buffer.read()
    except OSError as err:
        raise CallError("cannot read stdin: %s" % os_message(err))
    try:
        document = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as err:
        raise CallError("stdin is not a UTF-8 JSON document: %s" % err)
    if not isinstance(document, dict):
        raise CallError("stdin must be a JSON object")
    return document


def do_get():
    document = read_input()
    names = document.get("names")
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise CallError("'names' must be an array of strings")
    db = Databases(need_shadow=False)
    found = {line.name: line for line in db.passwd.records()}
    resources = []
    if not names:
        resources = [db.resource(line) for line in db.passwd.records()]
    for name in dict.fromkeys(names):
        if name in found:
            resources.append(db.resource(found[name]))
        elif not NAME_RE.match(name) or len(name) > NAME_MAX:
            resources.append({"name": name, "error": {
                "kind": "unknown",
                "message": "%s is not a valid user name; no such user can "
                           "be created" % quoted(name)}})
        else:
            resources.append({"name": name, "ensure": "absent"})
    emit({"resources": resources})


# -------------------------------------------------------------------- set


def check_id(attr, value):
    if isinstance(value, bool) or not isinstance(value, int) \
            or not 0 <= value <= ID_MAX:
        raise UpdateError("%s: %s is not an integer from 0 to %d"
                          % (attr, json.dumps(value), ID_MAX))
    return value


def check_text(attr, value, secret=False):
    shown = "the value" if secret else quoted(value)
    if not isinstance(value, str):
        raise UpdateError("%s: %s is not a string"
                          % (attr, "the value" if secret else json.dumps(value)))
    if ":" in value:
        raise UpdateError("%s: %s contains ':'" % (attr, shown))
    if "\n" in value or "\r" in value:
        raise UpdateError("%s: %s contains a line break" % (attr, shown))
    return value


def check_path(attr, value):
    check_text(attr, value)
    if not value.startswith("/"):
        raise UpdateError("%s: %s is not an absolute path" % (attr, quoted(value)))
    return value


def check_name(name):
    if not NAME_RE.match(name) or len(name) > NAME_MAX:
        raise UpdateError("name: %s is not a valid user name (lowercase "
                          "letters, digits, '_' and '-', starting with a "
                          "letter or '_', optionally ending in '$', at most "
                          "%d characters)" % (quoted(name), NAME_MAX))


def check_groups(db, value):
    if not isinstance(value, list) or not all(isinstance(g, str) for g in value):
        raise UpdateError("groups: %s is not an array of strings"
                          % json.dumps(value))
    known = set(line.name for line in db.group.records())
    for g in value:
        if g not in known:
            raise UpdateError("groups: unknown group %s" % quoted(g))
    return list(dict.fromkeys(value))


def free_id(used, attr, preferred=None):
    if preferred is not None and preferred not in used:
        return preferred
    for value in range(AUTO_FIRST, AUTO_END):
        if value not in used:
            return value
    raise UpdateError("%s: no free %s from %d to %d"
                      % (attr, attr, AUTO_FIRST, AUTO_END - 1))


def set_membership(db, name, wanted):
    """Makes NAME an explicit member of exactly the groups WANTED."""
    for table in (db.group, db.gshadow):
        if table is None:
            continue
        for line in table.lines:
            if not line.fields:
                continue
            members = members_of(line.fields)
            want = line.name in wanted
            if want and name not in members:
                members.append(name)
            elif not want and name in members:
                members = [m for m in members if m != name]
            else:
                continue
            line.set_field(3, ",".join(members))
            table.changed = True
        if table is db.gshadow:
            # Administrators of a removed user go too.
            for line in table.lines:
                if line.fields and not wanted and name in line.fields[2].split(","):
                    admins = [a for a in line.fields[2].split(",") if a and a != name]
                    line.set_field(2, ",".join(admins))
                    table.changed = True


def days_now():
    return str(int(time.time()) // 86400)


def apply_update(update, db, work):
    if not isinstance(update, dict) or not isinstance(update.get("name"), str):
        raise CallError("every update must be an object with a string 'name'")
    name = update["name"]
    should = update.get("should")
    if not isinstance(should, dict):
        raise UpdateError("'should' must be a JSON object")
    for key in should:
        if key not in ATTRIBUTES:
            raise UpdateError("unknown attribute %s" % quoted(key))
    if "name" in should and should["name"] != name:
        raise UpdateError("name: cannot rename %s" % quoted(name))
    ensure = should.get("ensure", "present")
    if ensure not in ("present", "absent"):
        raise UpdateError("ensure: %s is not 'present' or 'absent'"
                          % json.dumps(ensure))
    managehome = should.get("managehome", False)
    if not isinstance(managehome, bool):
        raise UpdateError("managehome: %s is not a boolean"
                          % json.dumps(managehome))
    line = db.passwd.find(name)

    if ensure == "absent":
        if line is None:
            return None
        home = line.fields[5]
        db.passwd.remove(name)
        db.shadow.remove(name)
        set_membership(db, name, [])
        if managehome:
            work.append(("rmhome", home))
        return {"name": name, "ensure": {"is": "absent", "was": "present"}}

    for attr in ("comment", "password"):
        if attr in should:
            check_text(attr, should[attr], secret=(attr == "password"))
    for attr in ("home", "shell"):
        if attr in should:
            check_path(attr, should[attr])
    groups = check_groups(db, should["groups"]) if "groups" in should else None

    if line is None:
        check_name(name)
        used_uids = set(int(r.fields[2]) for r in db.passwd.records())
        if "uid" in should:
            uid = check_id("uid", should["uid"])
            if uid in used_uids:
                owner = [r.name for r in db.passwd.records()
                         if int(r.fields[2]) == uid][0]
                raise UpdateError("uid: %d is already used by user %s"
                                  % (uid, quoted(owner)))
        else:
            uid = free_id(used_uids, "uid")
        if "gid" in should:
            gid = check_id("gid", should["gid"])
        else:
            own = db.group.find(name)
            if own is not None:
                gid = int(own.fields[2])
            else:
                used = set(int(r.fields[2]) for r in db.group.records())
                gid = free_id(used, "gid", preferred=uid)
                db.group.append([name, "x", str(gid), ""])
                if db.gshadow is not None:
                    db.gshadow.remove(name)
                    db.gshadow.append([name, "!", "", ""])
        comment = should.get("comment", "")
        home = should.get("home", "/home/" + name)
        shell = should.get("shell", "/bin/sh")
        password = should.get("password", "!")
        groups = groups or []
        db.passwd.append([name, "x", str(uid), str(gid), comment, home, shell])
        db.shadow.remove(name)
        db.shadow.append([name, password, days_now(), "0", "99999", "7", "",
                          "", ""])
        set_membership(db, name, groups)
        if managehome:
            work.append(("mkhome", home, uid, gid))
        return {"name": name, "ensure": {"is": "present", "was": "absent"},
                "uid": {"is": uid, "was": None}, "gid": {"is": gid, "was": None},
                "comment": {"is": comment, "was": None},
                "home": {"is": home, "was": None},
                "shell": {"is": shell, "was": None},
                "groups": {"is": groups, "was": None},
                "password": {"is": password, "was": None}}

    change = {"name": name}
    f = line.fields
    if "uid" in should and check_id("uid", should["uid"]) != int(f[2]):
        raise UpdateError("uid: %d can only be set when the user is created; "
                          "it is %s now" % (should["uid"], f[2]))
    if "gid" in should:
        gid = check_id("gid", should["gid"])
        if gid != int(f[3]):
            change["gid"] = {"is": gid, "was": int(f[3])}
            line.set_field(3, str(gid))
    for attr, index in (("comment", 4), ("home", 5), ("shell", 6)):
        if attr in should and should[attr] != f[index]:
            change[attr] = {"is": should[attr], "was": clean(f[index])}
            line.set_field(index, should[attr])
    if change.keys() - {"name"}:
        db.passwd.changed = True
    if "password" in should:
        entry = db.shadow.find(name)
        old = entry.fields[1] if entry is not None else None
        if should["password"] != old:
            if entry is None:
                db.shadow.append([name, should["password"], days_now(), "0",
                                  "99999", "7", "", "", ""])
            else:
                entry.set_field(1, should["password"])
                entry.set_field(2, days_now())
                db.shadow.changed = True
            change["password"] = {"is": should["password"], "was": old}
    if groups is not None:
        old_groups = db.groups_of(name)
        if sorted(groups) != sorted(old_groups):
            set_membership(db, name, groups)
            change["groups"] = {"is": groups, "was": old_groups}
    return change if len(change) > 1 else None


def home_path(home):
    path = os.path.join(root_dir(), home.lstrip("/"))
    inside, real = inside_root(path)
    if not inside:
        raise CallError("the home directory %s resolves to %s, outside the "
                        "root directory" % (quoted(path), quoted(real)))
    if real == os.path.realpath(root_dir()):
        raise CallError("the home directory %s is the root directory"
                        % quoted(path))
    return real


def do_work(work):
    for item in work:
        path = home_path(item[1])
        try:
            if item[0] == "mkhome":
                if os.path.lexists(path):
                    continue
                os.makedirs(os.path.dirname(path), exist_ok=True)
                os.mkdir(path, 0o755)
                os.chmod(path, 0o755)
                if os.geteuid() == 0:
                    os.chown(path, item[2], item[3])
            elif os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path)
        except OSError as err:
            raise CallError("cannot %s the home directory %s: %s"
                            % ("create" if item[0] == "mkhome" else "remove",
                               quoted(path), os_message(err)), os_kind(err))


def do_set():
    document = read_input()
    ral = document.get("ral", {})
    noop = ral.get("noop", False) if isinstance(ral, dict) else None
    if not isinstance(noop, bool):
        raise CallError("'ral.noop' must be a boolean")
    updates = document.get("updates")
    if not isinstance(updates, list):
        raise CallError("'updates' must be an array")
    db = Databases(need_shadow=True)
    changes = []
    work = []
    for update in updates:
        # An update that fails leaves no trace: its edits are made on a copy.
        snapshot = [(t, [Record(l.raw, l.fields) for l in t.lines], t.changed)
                    for t in db.tables() if t is not None]
        try:
            change = apply_update(update, db, work)
        except UpdateError as err:
            for table, lines, changed in snapshot:
                table.lines, table.changed = lines, changed
            change = {"name": update["name"],
                      "error": {"kind": "failed", "message": clean(str(err))}}
        if change is not None:
            changes.append(change)
    if not noop:
        save(db.tables())
        do_work(work)
    emit({"changes": changes, "derive": False})


# ------------------------------------------------------------------- main


ACTIONS = {"get": do_get, "set": do_set}


def main(argv):
    try:
        sys.stdout.reconfigure(encoding="utf-8", errors="replace")
        sys.stderr.reconfigure(encoding="utf-8", errors="replace")
    except AttributeError:
        pass
    try:
        if len(argv) != 1 or not argv[0].startswith("ral_action="):
            raise CallError("expected exactly one argument ral_action=ACTION")
        action = argv[0][len("ral_action="):]
        if action == "describe":
            write_out(METADATA)
            return 0
        if action not in ACTIONS:
            raise CallError("unknown action %s: expected describe, get or set"
                            % quoted(action))
        ACTIONS[action]()
    except CallError as err:
        emit({"error": {"kind": err.kind, "message": clean(str(err))}})
    except Exception as err:  # pylint: disable=broad-except
        emit({"error": {"kind": "failed",
                        "message": clean("internal error: %s: %s"
                                         % (type(err).__name__, err))}})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
