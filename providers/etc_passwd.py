#!/usr/bin/env -S python3 -I -S
"""ralsh provider: user accounts (type user, json calling convention).

Run by the wrapper etc_passwd.prov as `python3 -I -S etc_passwd.py
ral_action=ACTION`, with one JSON document on stdin (get, set) and one JSON
document on stdout; the metadata is etc_passwd.yaml beside it. Every file
lives below $RALSH_ROOT_DIR ("/" when unset or empty): etc/passwd,
etc/shadow, and for group membership etc/group and, when it exists,
etc/gshadow.

The wrapper answers the plain listing of all users (get `{"names":[]}`)
itself with awk and hands every other call to this script: a change to what
a listing reports here must be made there too (the tests compare the two).

Edits take lckpwdf's lock (etc/.pwd.lock, as useradd does), re-read the
files under it, and replace every changed file atomically as one edit
(ral_accounts): passwd last, so an account appears only once its shadow
line and primary group are in place, and a journal finishes the edit if a
crash interrupts it. useradd(8) is never run. An account that is
nevertheless half made (no shadow line, or no group with its gid) is
reported as incomplete, and ensure=present completes it.
"""

import json
import os
import re
import shutil
import stat
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ral_provider as ral  # noqa: E402
from ral_accounts import (ID_MAX, NAME_RULE, Accounts, change_each,  # noqa: E402
                          members_of, name_problem)
from ral_provider import CallError, UpdateError, quoted  # noqa: E402

AUTO_FIRST = 1000
AUTO_END = 60000           # exclusive
ATTRIBUTES = ("name", "ensure", "uid", "gid", "comment", "home", "shell",
              "groups", "password", "managehome")
ENSURES = ("present", "absent")


class Databases:
    """The four account files, read under the lock when EDIT is given."""

    def __init__(self, root, edit=None):
        self.root = root
        names = ("passwd", "group", "gshadow", "shadow")
        # A reader need not be able to read shadow and gshadow (they are not
        # readable for everyone); then passwords and a missing shadow line
        # are not reported.
        db = Accounts(root, names, edit,
                      optional=() if edit else ("shadow", "gshadow"))
        self.db = db
        self.passwd, self.group, self.shadow = db["passwd"], db["group"], db["shadow"]
        gshadow = db["gshadow"]
        self.gshadow = gshadow if gshadow is not None and gshadow.exists else None
        self.shadow_readable = self.shadow is not None

    _group_ids = None

    def snapshot(self):
        return self.db.snapshot()

    def restore(self, saved):
        self.db.restore(saved)

    def save(self):
        shadow_group = self.group.find("shadow")
        gid = int(shadow_group.fields[2]) if shadow_group else 0
        self.db.save({"shadow": (0, gid), "gshadow": (0, gid)})

    def groups_of(self, name):
        return [line.name for line in self.group.records()
                if name in members_of(line.fields)]

    def missing(self, line):
        """What a half-made account lacks: its shadow line (while shadow is
        in use), its primary group; [] when it is complete."""
        lacks = []
        if self.shadow_readable and self.shadow.exists \
                and self.shadow.find(line.name) is None:
            lacks.append("shadow")
        if self.group.exists and int(line.fields[3]) not in self.group_ids():
            lacks.append("group")
        return lacks

    def group_ids(self):
        """The gids of etc/group (remembered while the table is unchanged:
        a listing asks once per user)."""
        if self._group_ids is None or self._group_ids[0] != self.group.version:
            self._group_ids = (self.group.version, self.group.ids(2))
        return self._group_ids[1]

    def resource(self, line):
        f = line.fields
        res = {"name": ral.clean(f[0]),
               "ensure": "incomplete" if self.missing(line) else "present",
               "uid": int(f[2]), "gid": int(f[3]), "comment": ral.clean(f[4]),
               "home": ral.clean(f[5]), "shell": ral.clean(f[6]),
               "groups": [ral.clean(g) for g in self.groups_of(f[0])]}
        if self.shadow_readable:
            entry = self.shadow.find(f[0])
            if entry is not None:
                res["password"] = ral.clean(entry.fields[1])
        return res


# -------------------------------------------------------------------- get


def do_get(names):
    db = Databases(ral.Root())
    found = dict((line.name, line) for line in db.passwd.records())
    resources = []
    if not names:
        resources = [db.resource(line) for line in db.passwd.records()]
    for name in names:
        if name in found:
            resources.append(db.resource(found[name]))
        elif name_problem(name, "user name"):
            resources.append({"name": name, "error": {
                "kind": "unknown",
                "message": name_problem(name, "user name")
                + "; no such user can be created"}})
    return resources


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
    problem = name_problem(name, "user name")
    if problem:
        raise UpdateError("name: %s (%s)" % (problem, NAME_RULE))


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


def add_shadow(db, name, password):
    """A shadow line for NAME, replacing any stale one left for it."""
    db.shadow.remove(name)
    db.shadow.append([name, password, days_now(), "0", "99999", "7", "", "",
                      ""])


def add_group(db, name, gid):
    """The group NAME with GID, as a new user's primary group."""
    db.group.append([name, "x", str(gid), ""])
    if db.gshadow is not None:
        db.gshadow.remove(name)
        db.gshadow.append([name, "!", "", ""])


def complete(db, line, should):
    """Adds what a half-made account lacks: a shadow line (locked, unless a
    password is given) and a group with its gid (named like the user)."""
    name, gid = line.name, int(line.fields[3])
    lacks = db.missing(line)
    if "shadow" in lacks:
        add_shadow(db, name, should.get("password", "!"))
    if "group" in lacks:
        same_name = db.group.find(name)
        if same_name is not None:
            raise UpdateError(
                "gid: the primary group %d of %s does not exist, and the "
                "group %s that would be made for it has gid %s already; "
                "set gid=%s or create a group with gid %d"
                % (gid, quoted(name), quoted(name), same_name.fields[2],
                   same_name.fields[2], gid))
        add_group(db, name, gid)


def create(db, name, should, work):
    check_name(name)
    used_uids = db.passwd.ids(2)
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
            gid = free_id(db.group.ids(2), "gid", preferred=uid)
            add_group(db, name, gid)
    comment = should.get("comment", "")
    home = should.get("home", "/home/" + name)
    shell = should.get("shell", "/bin/sh")
    password = should.get("password", "!")
    groups = should.get("groups") or []
    add_shadow(db, name, password)
    db.passwd.append([name, "x", str(uid), str(gid), comment, home, shell])
    set_membership(db, name, groups)
    if should.get("managehome"):
        work.append(("mkhome", home, uid, gid))
    return {"name": name, "ensure": {"is": "present", "was": "absent"},
            "uid": {"is": uid, "was": None}, "gid": {"is": gid, "was": None},
            "comment": {"is": comment, "was": None},
            "home": {"is": home, "was": None},
            "shell": {"is": shell, "was": None},
            "groups": {"is": groups, "was": None},
            "password": {"is": password, "was": None}}


def modify(db, line, should, ensure):
    name = line.name
    change = {"name": name}
    if ensure == "present" and db.missing(line):
        complete(db, line, should)
        change["ensure"] = {"is": "present", "was": "incomplete"}
    f = line.fields
    if "uid" in should and check_id("uid", should["uid"]) != int(f[2]):
        raise UpdateError("uid: %d can only be set when the user is created; "
                          "it is %s now" % (should["uid"], f[2]))
    if "gid" in should:
        gid = check_id("gid", should["gid"])
        if gid != int(f[3]):
            change["gid"] = {"is": gid, "was": int(f[3])}
            line.set_field(3, str(gid))
            db.passwd.changed = True
    for attr, index in (("comment", 4), ("home", 5), ("shell", 6)):
        if attr in should and should[attr] != f[index]:
            change[attr] = {"is": should[attr], "was": ral.clean(f[index])}
            line.set_field(index, should[attr])
            db.passwd.changed = True
    if "password" in should:
        entry = db.shadow.find(name)
        old = entry.fields[1] if entry is not None else None
        if should["password"] != old:
            if entry is None:
                add_shadow(db, name, should["password"])
            else:
                entry.set_field(1, should["password"])
                entry.set_field(2, days_now())
                db.shadow.changed = True
            change["password"] = {"is": should["password"], "was": old}
    if "groups" in should:
        groups = should["groups"]
        old_groups = db.groups_of(name)
        if sorted(groups) != sorted(old_groups):
            set_membership(db, name, groups)
            change["groups"] = {"is": groups, "was": old_groups}
    return change if len(change) > 1 else None


def apply_update(update, db, work):
    name, should, ensure = ral.check_should(update, ATTRIBUTES, ENSURES)
    managehome = should.get("managehome", False)
    if not isinstance(managehome, bool):
        raise UpdateError("managehome: %s is not a boolean"
                          % json.dumps(managehome))
    line = db.passwd.find(name)

    if ensure == "absent":
        if line is None:
            return None
        was = "incomplete" if db.missing(line) else "present"
        with ral.log.deleting(name):
            home = line.fields[5]
            db.passwd.remove(name)
            db.shadow.remove(name)
            set_membership(db, name, [])
            if managehome:
                work.append(("rmhome", home))
        return {"name": name, "ensure": {"is": "absent", "was": was}}

    for attr in ("comment", "password"):
        if attr in should:
            check_text(attr, should[attr], secret=(attr == "password"))
    for attr in ("home", "shell"):
        if attr in should:
            check_path(attr, should[attr])
    if "groups" in should:
        should = dict(should, groups=check_groups(db, should["groups"]))

    if line is None:
        with ral.log.creating(name):
            change = create(db, name, should, work)
            ral.check_resource_fits(db.resource(db.passwd.find(name)))
        return change
    with ral.log.updating(name):
        change = modify(db, line, should, ensure)
        if change is not None:
            ral.check_resource_fits(db.resource(line))
    return change


def do_work(root, work):
    """Creates and removes home directories, below the root."""
    for item in work:
        home = item[1]
        parent, base = os.path.split(home.rstrip("/"))
        if base in ("", ".", ".."):
            raise CallError("the home directory %s cannot be managed"
                            % quoted(home))
        try:
            if item[0] == "mkhome":
                _, uid, gid = item[1:]
                directory = root.directory(parent.lstrip("/"),
                                           create=(0o755, None, None))
                if directory.lstat(base) is None:
                    directory.subdir(base, create=(0o755, uid, gid))
            else:
                directory = root.directory(parent.lstrip("/"))
                info = directory.lstat(base)
                if info is not None and stat.S_ISDIR(info.st_mode):
                    remove_tree(directory, base)
        except ral.Missing:
            continue
        except OSError as err:
            raise ral.os_error(err, "%s the home directory %s" % (
                "create" if item[0] == "mkhome" else "remove",
                quoted(root.show(home.lstrip("/")))))


def remove_tree(directory, name):
    """Removes the directory NAME with everything in it, never following a
    link out of it (shutil.rmtree does it through descriptors)."""
    try:
        shutil.rmtree(name, dir_fd=directory.fd)
    except TypeError:       # Python before 3.11: by path
        shutil.rmtree(directory.show(name))


def do_set(updates):
    root = ral.Root()
    work = []
    return change_each(root, updates, Databases,
                       lambda update, db: apply_update(update, db, work),
                       after=lambda: do_work(root, work))


if __name__ == "__main__":
    sys.exit(ral.run(get=do_get, set=do_set))
