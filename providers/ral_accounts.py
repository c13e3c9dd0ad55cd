"""ral_accounts: the account files (passwd, shadow, group, gshadow) for the
user and group providers.

Each file is a table of ':'-separated records kept as raw lines, so that
every line that is not changed is written back byte for byte. All four are
guarded by lckpwdf's lock (`etc/.pwd.lock`, which useradd and its friends
take too); a change to several of them is one ral_provider.Edit, committed
in an order that leaves an entry complete before the file that makes it
exist (passwd for a user, group for a group) is replaced.
"""

import re

import ral_provider as ral
from ral_provider import CallError, quoted

ID_MAX = 4294967294
DIGITS = re.compile(r"[0-9]+\Z")
# New user and group names follow shadow-utils' default rule (useradd(8),
# groupadd(8)), so that ral never makes an account those tools refuse.
NAME_RE = re.compile(r"[a-z_][a-z0-9_-]*[$]?\Z")
NAME_MAX = 32
NAME_RULE = ("lowercase letters, digits, '_' and '-', starting with a "
             "letter or '_', optionally ending in '$', at most %d "
             "characters" % NAME_MAX)


def name_problem(name, what):
    """'NAME is not a valid WHAT' when NAME breaks the rule for new user
    and group names, else None."""
    if NAME_RE.match(name) and len(name) <= NAME_MAX:
        return None
    return "%s is not a valid %s" % (quoted(name), what)

# name: (fields per record, indexes of numeric ids, mode of a new file)
LAYOUT = {
    "passwd": (7, (2, 3), 0o644),
    "shadow": (9, (), 0o640),
    "group": (4, (2,), 0o644),
    "gshadow": (4, (), 0o640),
}
# The order a commit replaces files in: the file that makes an entry exist
# last, and what it refers to before it.
COMMIT_ORDER = ("gshadow", "group", "shadow", "passwd")


def members_of(fields):
    """The names in a group record's member list."""
    return [m.strip() for m in fields[3].split(",") if m.strip()]


class Record:
    """One line of a table as raw bytes (terminator included); `fields` is
    the decoded record, or None for a line that is not one."""

    def __init__(self, raw, fields):
        self.raw = raw
        self.fields = fields

    @property
    def name(self):
        return self.fields[0] if self.fields else None

    def set_field(self, index, value):
        """Replaces one field, keeping the others' bytes."""
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
    """One account file. `exists` is False when there is no such file."""

    def __init__(self, name, target, data):
        self.name = name
        self.target = target
        self.width, self.numeric, self.new_mode = LAYOUT[name]
        self.exists = data is not None
        self.lines = []
        self.changed = False
        self.version = 0          # counts appends, removals and restores
        for number, raw in enumerate(ral.split_lines(data or b""), start=1):
            piece = raw[:-1] if raw.endswith(b"\n") else raw
            self.lines.append(Record(raw, self.parse(piece, number)))

    def parse(self, piece, number):
        line = ral.decode(piece).rstrip("\r")
        stripped = line.strip()
        if stripped == "" or stripped[0] in "#+-":
            return None
        fields = line.split(":")
        if len(fields) != self.width:
            ral.log.warning("%s line %d: expected %d ':'-separated fields, "
                            "found %d; line skipped"
                            % (self.target.path, number, self.width,
                               len(fields)))
            return None
        if fields[0] == "":
            ral.log.warning("%s line %d: empty name; line skipped"
                            % (self.target.path, number))
            return None
        for index in self.numeric:
            if not DIGITS.match(fields[index]) or int(fields[index]) > ID_MAX:
                ral.log.warning("%s line %d: %s is not a number from 0 to %d; "
                                "line skipped" % (self.target.path, number,
                                                  quoted(fields[index]),
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

    def ids(self, index):
        """Every id in field INDEX, of every record (duplicates too)."""
        return set(int(line.fields[index]) for line in self.lines
                   if line.fields)

    def find(self, name):
        for line in self.lines:
            if line.name == name:
                return line
        return None

    def remove(self, name):
        """Removes every record of NAME."""
        before = len(self.lines)
        self.lines = [line for line in self.lines if line.name != name]
        if len(self.lines) != before:
            self.changed = True
            self.version += 1

    def append(self, fields):
        if self.lines and not self.lines[-1].raw.endswith(b"\n"):
            self.lines[-1].raw += b"\n"
        raw = ":".join(fields).encode("utf-8") + b"\n"
        self.lines.append(Record(raw, list(fields)))
        self.changed = True
        self.version += 1

    def content(self):
        return b"".join(line.raw for line in self.lines)

    def snapshot(self):
        return ([Record(line.raw, line.fields) for line in self.lines],
                self.changed)

    def restore(self, snapshot):
        self.lines, self.changed = snapshot
        self.version += 1


class Accounts:
    """The account files below the root, read through EDIT (a ral.Edit of
    the lock: under it, or as a reader for a noop one) when given, else as
    a reader sees them (an edit a crash interrupted counts as finished).
    OPTIONAL files that cannot be read are None instead of an error. A
    missing etc directory raises ral.Missing."""

    def __init__(self, root, names, edit=None, optional=()):
        # Every file is read in the directory the lock was taken in.
        self.lock = edit.lock if edit is not None else ral.Lock.accounts(root)
        self.edit = edit
        self.tables = {}
        for name in names:
            try:
                self.tables[name] = self.load(name)
            except CallError:
                if name not in optional:
                    raise
                self.tables[name] = None

    def load(self, name):
        target = self.lock.dir.entry(name)
        if self.edit is not None:
            data = self.edit.read(target)
        else:
            data, _ = self.lock.read(target)
        return Table(name, target, data)

    def __getitem__(self, name):
        return self.tables.get(name)

    def changed(self):
        return [t for t in self.tables.values() if t is not None and t.changed]

    def snapshot(self):
        return [(t, t.snapshot()) for t in self.tables.values() if t is not None]

    def restore(self, snapshot):
        for table, saved in snapshot:
            table.restore(saved)

    def save(self, new_owners=None):
        """Stages every changed file and commits them as one edit. NEW_OWNERS
        maps a file name to the (uid, gid) a new file of that name gets."""
        for name in COMMIT_ORDER:
            table = self.tables.get(name)
            if table is not None and table.changed:
                self.edit.write(table.target, table.content(),
                                new_mode=table.new_mode,
                                new_owner=(new_owners or {}).get(name))
        self.edit.commit()


def change_each(root, updates, load, apply, after=None):
    """Runs APPLY(update, db) for every update on the account files that
    LOAD(root, edit) reads under lckpwdf's lock (none for a preview, under
    noop); the edits of an update that fails are undone. The changed files
    are then saved as one edit, and AFTER(), if given, runs while the lock
    is still held (not under noop). Returns the change entries."""
    noop = ral.noop()
    with ral.Edit(ral.Lock.accounts(root), noop) as edit:
        db = load(root, edit)

        def one(update):
            saved = db.snapshot()
            try:
                return apply(update, db)
            except ral.UpdateError:
                db.restore(saved)
                raise

        changes = ral.each_update(updates, one)
        db.save()
        if after is not None and not noop:
            after()
    return changes
