"""Files below the root (`RALSH_ROOT_DIR`): paths opened one directory at
a time without ever following a symbolic link out of it, the lock the
system's own tools take, and locked, crash-safe edits of shared files (a
re-read under the lock, a temporary file in the same directory that is
synced and renamed over the original, and a journal that finishes an edit
of several files that a crash interrupted). Under noop an edit reads as it
would and writes nothing."""

import errno
import fcntl
import json
import os
import signal
import stat
import time

from .errors import CallError, Missing, os_error
from .log import log
from .text import quoted

# How long an edit waits for a lock, as lckpwdf(3) does; RALSH_LOCK_TIMEOUT
# (set by `ralsh --lock-timeout`) overrides it.
LOCK_WAIT = 15.0
# Symbolic links followed while resolving one path, as the kernel allows.
MAX_LINKS = 40
# Times a path's walk opens again a directory that was a link or a file when
# first opened: another process is swapping it, and each try may lose again.
MAX_CHANGES = 8
# Names of our files beside the ones we edit.
TEMP_TAG = ".ral-tmp-"
LOCK_TAG = ".ral-lock"
JOURNAL_TAG = ".ral-journal"
JOURNAL_MAX = 1 << 20       # bytes; a larger journal is not one ral wrote

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def _identity(info):
    """What tells one version of a file from another, or None when absent."""
    if info is None:
        return None
    return [info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns]


class Root:
    """The root directory (RALSH_ROOT_DIR, "/" when unset or empty) and the
    paths below it.

    Paths below the root are resolved one directory at a time, each opened
    relative to the one before with O_NOFOLLOW, so that nothing swapped in
    meanwhile can redirect us. A symbolic link met on the way is either
    refused (follow=False) or resolved the way it would be if the root were
    "/" (chroot semantics): an absolute target starts again at the root, and
    '..' never climbs above it. Whatever links say, a path never leaves the
    root."""

    def __init__(self):
        self.path = os.environ.get("RALSH_ROOT_DIR") or "/"
        try:
            self.fd = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY
                              | os.O_CLOEXEC)
        except OSError as err:
            raise CallError("the root directory %s does not exist or is not a "
                            "directory (%s)" % (quoted(self.path),
                                                err.strerror or err),
                            "forbidden" if isinstance(err, PermissionError)
                            else "failed")
        self.is_real = os.path.samestat(os.fstat(self.fd), os.stat("/"))

    def show(self, rel):
        """The path of REL below the root, for messages."""
        return os.path.join(self.path, rel) if rel else self.path

    def directory(self, rel, follow=True, create=None):
        """The directory REL (relative to the root) as a Dir. CREATE, a
        (mode, uid, gid) triple, makes it when it is missing (uid and gid
        None: left as made), and missing directories above it with mode
        0755."""
        return self._walk(rel, follow, False, create)

    def file(self, rel, follow=True, follow_last=None):
        """The file REL as a Target: its directory, opened, and its name.
        FOLLOW applies to the directories on the way, FOLLOW_LAST (default:
        FOLLOW) to a link in the last component."""
        return self._walk(rel, follow, True, None,
                          follow if follow_last is None else follow_last)

    def read(self, rel, follow=True):
        """(bytes, stat) of the regular file REL, or (None, None) when it,
        or a directory on the way to it, does not exist."""
        try:
            target = self.file(rel, follow)
        except Missing:
            return None, None
        return target.read()

    def _walk(self, rel, follow, entry, create, follow_last=False,
              start=None):
        """Resolves REL from the root, or from the open Dir START: then
        the walk begins in that very directory, and only a '..' above it
        or an absolute link goes back by the root."""
        pending = [p for p in rel.split("/") if p not in ("", ".")]
        if start is None:
            fds = [os.dup(self.fd)]
            names = []
        else:
            fds = [os.dup(start.fd)]
            names = [p for p in start.rel.split("/") if p]
        links = 0
        changed = 0     # entries that changed between open and readlink
        via = ""        # the last link followed, for messages
        try:
            while pending:
                part = pending.pop(0)
                if part == "..":
                    if len(fds) > 1:
                        os.close(fds.pop())
                        names.pop()
                    elif names:
                        # Above the directory the walk started in: its
                        # parent, opened again from the root by its
                        # resolved path, on which no link is followed.
                        parent = self._walk("/".join(names[:-1]), False,
                                            False, None)
                        os.close(fds.pop())
                        fds.append(parent.fd)
                        names.pop()
                    continue
                where = "/".join(names + [part])
                if entry and not pending:
                    target = _readlink(fds[-1], part) if follow_last else None
                    if target is None:
                        return Target(Dir(self, fds.pop(), names), part)
                else:
                    try:
                        fds.append(os.open(part, _DIR_FLAGS, dir_fd=fds[-1]))
                        names.append(part)
                        continue
                    except FileNotFoundError:
                        if create is None:
                            raise Missing("the directory %s does not exist%s"
                                          % (quoted(self.show(where)), via))
                        fds.append(_make_dir(
                            fds[-1], part,
                            create if not pending else (0o755, None, None),
                            self.show(where)))
                        names.append(part)
                        continue
                    except (NotADirectoryError, OSError) as err:
                        if err.errno not in (errno.ENOTDIR, errno.ELOOP):
                            raise os_error(err, "open %s"
                                           % quoted(self.show(where)))
                    target = _readlink(fds[-1], part)
                    if target is None:
                        if changed < MAX_CHANGES:
                            # Not a directory when opened, not a link now:
                            # either a file or swapped meanwhile; open it
                            # again to tell.
                            changed += 1
                            pending.insert(0, part)
                            continue
                        raise CallError("%s is not a directory"
                                        % quoted(self.show(where)))
                    if not follow:
                        raise CallError(
                            "%s is a symbolic link, which ral does not follow "
                            "here; refusing to use it" % quoted(self.show(where)))
                links += 1
                via = (" (reached through the symbolic link %s -> %s, which "
                       "is resolved inside the root)"
                       % (quoted(self.show(where)), quoted(target)))
                if links > MAX_LINKS:
                    raise CallError("too many levels of symbolic links in %s"
                                    % quoted(self.show(rel)))
                if target.startswith("/"):
                    while fds:
                        os.close(fds.pop())
                    fds.append(os.dup(self.fd))
                    names = []
                pending[0:0] = [p for p in target.split("/")
                                if p not in ("", ".")]
            return Dir(self, fds.pop(), names)
        finally:
            for fd in fds:
                os.close(fd)


def _readlink(dir_fd, name):
    """The target of the symbolic link NAME, or None when it is not one."""
    try:
        return os.readlink(name, dir_fd=dir_fd)
    except OSError:
        return None


def _make_dir(parent_fd, name, create, shown_path):
    mode, uid, gid = create
    try:
        os.mkdir(name, 0o700, dir_fd=parent_fd)
    except FileExistsError:
        pass
    except OSError as err:
        raise os_error(err, "create the directory %s" % quoted(shown_path))
    try:
        fd = os.open(name, _DIR_FLAGS, dir_fd=parent_fd)
    except OSError as err:
        raise os_error(err, "open %s" % quoted(shown_path))
    try:
        if (uid is not None or gid is not None) and os.geteuid() == 0:
            os.fchown(fd, -1 if uid is None else uid, -1 if gid is None else gid)
        os.fchmod(fd, mode)
        os.fsync(parent_fd)
    except OSError as err:
        os.close(fd)
        raise os_error(err, "set up the directory %s" % quoted(shown_path))
    return fd


class Dir:
    """An open directory below the root. REL is its path relative to the
    root with every link resolved."""

    def __init__(self, root, fd, names):
        self.root = root
        self.fd = fd
        self.rel = "/".join(names)
        self.path = root.show(self.rel)

    def show(self, name):
        return os.path.join(self.path, name)

    def lstat(self, name):
        """The entry NAME's stat (links not followed), or None."""
        try:
            return os.stat(name, dir_fd=self.fd, follow_symlinks=False)
        except (FileNotFoundError, NotADirectoryError):
            return None

    def read(self, name, limit=-1):
        """(bytes, stat) of the regular file NAME, or (None, None) when it
        does not exist. A link, a FIFO or a device is an error. At most
        LIMIT bytes are read when it is given."""
        try:
            fd = os.open(name, _READ_FLAGS, dir_fd=self.fd)
        except FileNotFoundError:
            return None, None
        except OSError as err:
            if err.errno == errno.ELOOP:
                raise CallError("%s is a symbolic link, not a regular file"
                                % quoted(self.show(name)))
            raise os_error(err, "read %s" % quoted(self.show(name)))
        try:
            with os.fdopen(fd, "rb") as fh:
                info = os.fstat(fh.fileno())
                if not stat.S_ISREG(info.st_mode):
                    raise CallError("%s is not a regular file"
                                    % quoted(self.show(name)))
                return fh.read(limit), info
        except OSError as err:
            raise os_error(err, "read %s" % quoted(self.show(name)))

    def names(self):
        try:
            return os.listdir(self.fd)
        except OSError as err:
            raise os_error(err, "list %s" % quoted(self.path))

    def subdir(self, name, create=None):
        """The directory NAME in this one, never through a symbolic link;
        CREATE (mode, uid, gid) makes it when missing."""
        for tries in range(MAX_CHANGES + 1):
            try:
                fd = os.open(name, _DIR_FLAGS, dir_fd=self.fd)
                break
            except FileNotFoundError:
                if create is None:
                    raise Missing("the directory %s does not exist"
                                  % quoted(self.show(name)))
                fd = _make_dir(self.fd, name, create, self.show(name))
                break
            except OSError as err:
                if _readlink(self.fd, name) is not None:
                    raise CallError("%s is a symbolic link, which ral does "
                                    "not follow here; refusing to use it"
                                    % quoted(self.show(name)))
                if err.errno not in (errno.ENOTDIR, errno.ELOOP):
                    raise os_error(err, "open %s" % quoted(self.show(name)))
                if tries == MAX_CHANGES:
                    raise CallError("%s is not a directory"
                                    % quoted(self.show(name)))
                # A file, or swapped since the open: try again to tell.
        return Dir(self.root, fd, [p for p in (self.rel, name) if p])

    def file(self, name):
        """The file NAME in this directory as a Target (never followed)."""
        return Target(self, name)

    def entry(self, name):
        """The file NAME in this directory as a Target, a symbolic link
        resolved inside the root (as Root.file does). Unlike a new walk
        from the root, NAME is found in this directory, the very one
        opened, even if its path leads elsewhere by now; so is a link's
        relative target, up to a '..' above this directory."""
        if _readlink(self.fd, name) is None:
            return Target(self, name)
        # Rare: the link is resolved from this directory (not from its
        # path, which may lead to another one by now), and named in
        # messages.
        return self.root._walk(name, True, True, None, True, start=self)

    def close(self):
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


class Target:
    """A file to read or edit: its open directory and its name there."""

    def __init__(self, directory, name):
        self.dir = directory
        self.name = name
        self.path = directory.show(name)

    def key(self):
        return (self.dir.rel, self.name)

    def read(self, limit=-1):
        """(bytes, stat), or (None, None) when the file does not exist; at
        most LIMIT bytes when it is given."""
        return self.dir.read(self.name, limit)


def read_journal(target):
    """The JSON document of the journal TARGET, or None when there is none.
    Raises ValueError for one that is not a journal ral wrote: larger than
    JOURNAL_MAX, not JSON, or nested too deeply to parse."""
    data, _ = target.read(JOURNAL_MAX + 1)
    if data is None:
        return None
    if len(data) > JOURNAL_MAX:
        raise ValueError("larger than %d bytes" % JOURNAL_MAX)
    try:
        return json.loads(data.decode("utf-8"))
    except RecursionError:
        raise ValueError("nested too deeply")


def _lock_wait():
    try:
        value = float(os.environ.get("RALSH_LOCK_TIMEOUT", ""))
        if value >= 0:
            return value
    except ValueError:
        pass
    return LOCK_WAIT


class _TimedOut(Exception):
    pass


def _holder(info):
    """Who holds the lock on the file with stat INFO, from /proc/locks:
    'process PID (COMMAND)', or None when that cannot be told."""
    wanted = ":%d" % info.st_ino
    device = "%02x:%02x" % (os.major(info.st_dev), os.minor(info.st_dev))
    try:
        with open("/proc/locks") as fh:
            for line in fh:
                fields = line.split()
                if len(fields) < 6 or fields[1] == "->":
                    continue
                if fields[5] == device + wanted:
                    pid = fields[4]
                    if pid.startswith("-"):
                        # An open file description lock (the Rust
                        # toolkit's lckpwdf lock) names no process.
                        continue
                    try:
                        with open("/proc/%s/comm" % pid) as comm:
                            return "process %s (%s)" % (pid, comm.read().strip())
                    except OSError:
                        return "process %s" % pid
    except OSError:
        pass
    return None


class Lock:
    """A lock that every writer of some files takes: an fcntl lock on
    `etc/.pwd.lock` for the account files (what lckpwdf(3), and so useradd
    and friends, take), an flock on `.NAME.ral-lock` beside any other file,
    or an flock on a directory (for files that are resources themselves).

    While it is held, an edit is the only one in progress, so temporary
    files of ours found beside the guarded files were left by a writer that
    died, and a journal found is an edit a crash interrupted."""

    def __init__(self, directory, name, posix=False):
        self.dir = directory
        self.name = name          # None: the directory itself
        self.posix = posix
        self.fd = None
        self._pending = None

    @classmethod
    def beside(cls, target):
        return cls(target.dir, "." + target.name + LOCK_TAG)

    @classmethod
    def accounts(cls, root):
        """lckpwdf's lock, which guards passwd, shadow, group and gshadow."""
        return cls(root.directory("etc"), ".pwd.lock", posix=True)

    @classmethod
    def of_directory(cls, directory):
        return cls(directory, None)

    def show(self):
        return self.dir.show(self.name) if self.name else self.dir.path

    def journal(self):
        """The journal's name, beside the lock file; None for a lock on a
        directory, whose edits are of one file each and need none."""
        return None if self.name is None else self.name + JOURNAL_TAG

    def _take(self, fd, wait):
        if self.posix:
            fcntl.lockf(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        else:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))

    def acquire(self, before_wait=None):
        """Takes the lock, waiting for it as long as RALSH_LOCK_TIMEOUT
        says; BEFORE_WAIT is called first when it must be waited for."""
        if self.name is None:
            fd = os.dup(self.dir.fd)
        else:
            try:
                fd = os.open(self.name, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW
                             | os.O_NONBLOCK | os.O_CLOEXEC, 0o600,
                             dir_fd=self.dir.fd)
            except OSError as err:
                raise os_error(err, "open the lock file %s" % quoted(self.show()))
        try:
            info = os.fstat(fd)
            if self.name is not None and not stat.S_ISREG(info.st_mode):
                raise CallError("the lock file %s is not a regular file"
                                % quoted(self.show()))
            try:
                self._take(fd, False)
            except OSError as err:
                if err.errno not in (errno.EAGAIN, errno.EACCES):
                    raise os_error(err, "lock %s" % quoted(self.show()))
                if before_wait is not None:
                    before_wait()
                self._wait(fd, info)
        except BaseException:
            os.close(fd)
            raise
        self.fd = fd

    def _wait(self, fd, info):
        limit = _lock_wait()
        holder = _holder(info)
        log.info("waiting up to %gs for the lock %s, held by %s"
                 % (limit, quoted(self.show()), holder or "another process"))
        started = time.monotonic()

        def alarm(signum, frame):
            raise _TimedOut()

        previous = signal.signal(signal.SIGALRM, alarm)
        try:
            if limit > 0:
                signal.setitimer(signal.ITIMER_REAL, limit)
                self._take(fd, True)
            else:
                raise _TimedOut()
        except _TimedOut:
            raise CallError(
                "timed out after %gs waiting for the lock %s, held by %s; "
                "nothing was changed" % (limit, quoted(self.show()),
                                         _holder(info) or holder
                                         or "another process"))
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
        log.debug("got the lock %s after %.3fs"
                  % (quoted(self.show()), time.monotonic() - started))

    def release(self):
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    # The journal of an edit of several files: which temporary file replaces
    # which file, and the version of that file it was made from.

    def _journal_entries(self):
        """The entries of a journal left by an interrupted edit (a list of
        dicts), or []; a journal that does not parse is ignored."""
        if self.journal() is None:
            return []
        try:
            document = read_journal(self.dir.file(self.journal()))
            if document is None:
                return []
            entries = document["files"]
            for entry in entries:
                if not (isinstance(entry["dir"], str)
                        and isinstance(entry["name"], str)
                        and entry["temp"].startswith("." + entry["name"]
                                                     + TEMP_TAG)
                        and "/" not in entry["temp"] + entry["name"]):
                    raise ValueError("bad entry")
            return entries
        except (ValueError, KeyError, TypeError, AttributeError,
                RecursionError):
            log.warning("ignoring the unreadable journal %s"
                        % quoted(self.dir.show(self.journal())))
            return []

    def pending(self):
        """{(dir, name): (Dir, temp)} of an interrupted edit that is still
        to be finished (read without taking the lock)."""
        if self._pending is None:
            self._pending = {}
            for entry in self._journal_entries():
                try:
                    directory = self.dir.root.directory(entry["dir"],
                                                        follow=False)
                except CallError:
                    continue
                temp = directory.lstat(entry["temp"])
                now = _identity(directory.lstat(entry["name"]))
                if temp is not None and now == entry["was"]:
                    self._pending[(entry["dir"], entry["name"])] = (
                        directory, entry["temp"])
        return self._pending

    def read(self, target, limit=-1):
        """(bytes, stat) of TARGET as it is once an interrupted edit is
        finished: what a reader without the lock should see; at most LIMIT
        bytes when it is given."""
        pending = self.pending().get(target.key())
        if pending is not None:
            directory, temp = pending
            data, info = directory.read(temp, limit)
            if data is not None:
                return data, info
        return target.read(limit)

    def recover(self):
        """Finishes an edit of several files that a crash interrupted: each
        staged file that is still there replaces its target, unless the
        target changed since (another program wrote it), in which case that
        part is dropped with a warning. Needs the lock."""
        entries = self._journal_entries()
        self._pending = None
        synced = []
        for entry in entries:
            try:
                directory = self.dir.root.directory(entry["dir"], follow=False)
            except CallError as err:
                log.warning("cannot finish an interrupted edit: %s" % err)
                continue
            temp, name = entry["temp"], entry["name"]
            if directory.lstat(temp) is None:
                continue
            now = _identity(directory.lstat(name))
            try:
                if now == entry["was"]:
                    os.rename(temp, name, src_dir_fd=directory.fd,
                              dst_dir_fd=directory.fd)
                    log.info("finished an interrupted edit: replaced %s"
                             % quoted(directory.show(name)))
                else:
                    os.unlink(temp, dir_fd=directory.fd)
                    log.warning(
                        "%s was changed by another program after an edit of "
                        "ral's was interrupted; that edit's change to it was "
                        "dropped" % quoted(directory.show(name)))
            except OSError as err:
                raise os_error(err, "finish the interrupted edit of %s"
                               % quoted(directory.show(name)))
            synced.append(directory.fd)
        for fd in synced:
            fsync_dir(fd)
        if self.journal() is None:
            return
        if entries or self.dir.lstat(self.journal()) is not None:
            try:
                os.unlink(self.journal(), dir_fd=self.dir.fd)
            except FileNotFoundError:
                pass
            except OSError as err:
                raise os_error(err, "remove the journal %s"
                               % quoted(self.dir.show(self.journal())))
            fsync_dir(self.dir.fd)
        _remove_temps(self.dir, self.journal())


def fsync_dir(fd):
    """Makes the names in the directory FD durable, where the file system
    allows it (some refuse fsync on a directory)."""
    try:
        os.fsync(fd)
    except OSError:
        pass


def temp_name(name):
    """A new name for a temporary file that will replace NAME: hidden, and
    recognisable as ours by _remove_temps."""
    return "." + name + TEMP_TAG + os.urandom(6).hex()


def _remove_temps(directory, name, entries=None):
    """Removes the temporary files of ours for NAME in DIRECTORY: with the
    lock held, they were left by a writer that died. Older versions' names
    (.ralsh-*.NAME, .NAME.ralsh-*, .hosts.*.tmp) count too. ENTRIES, when
    given, are the names in DIRECTORY that may be such files (_temp_like),
    listed earlier under the same lock; those removed leave the list."""
    ours = "." + name + TEMP_TAG
    legacy = ("." + name + ".ralsh-",)
    for entry in list(directory.names() if entries is None else entries):
        if entry.startswith(ours) or entry.startswith(legacy) \
                or (entry.startswith(".ralsh-") and entry.endswith("." + name)) \
                or (name == "hosts" and entry.startswith(".hosts.")
                    and entry.endswith(".tmp")):
            try:
                os.unlink(entry, dir_fd=directory.fd)
                log.info("removed %s, left by an edit that was interrupted"
                         % quoted(directory.show(entry)))
            except OSError:
                pass
            if entries is not None:
                entries.remove(entry)


def _temp_like(entry):
    """True for the names _remove_temps may remove, whatever NAME."""
    return entry.startswith(".") and (TEMP_TAG in entry or ".ralsh-" in entry
                                      or entry.endswith(".tmp"))


class Edit:
    """A locked, crash-safe edit of one or more files guarded by LOCK:

        with ral.Edit(lock) as edit:
            data = edit.read(target)        # re-read under the lock
            edit.write(target, new_data)    # staged
            edit.commit()                   # all files, or none

    Taking the lock finishes an interrupted edit and removes temporary files
    of ours that a crash left. commit() writes each staged file to a
    temporary file in the same directory (keeping the original's mode,
    owner and SELinux context), syncs it, and renames it over the original
    through the directory's descriptor, in the order staged; with several
    files, a journal written first lets the next edit (or reader) finish
    what a crash interrupted. Staged files whose original changed since it
    was read (a writer that does not take the lock) make commit refuse.

    With NOOP, the same code previews a change: no lock is taken (nothing,
    not even a lock file, is created), files are read as a reader sees
    them, and commit() writes nothing. NOOP left out (None) is the call's
    noop(): a provider that forgets to pass it still writes nothing under
    --noop.

    An edit of a Batch (Batch.edit) queues its commit instead, to be
    finished with the batch's others."""

    def __init__(self, lock, noop=None, batch=None, key=None):
        self.lock = lock
        self.noop = log.noop_or(noop)
        self.batch = batch
        self.key = key
        self.read_as = {}         # target key -> identity when read
        self.staged = []          # [target, data, mode, owner]
        self.temps = []           # [(Dir, temp name)] not yet renamed
        self.cleaned = set()

    def __enter__(self):
        if self.noop:
            return self
        self.lock.acquire()
        try:
            self.lock.recover()
        except BaseException:
            self.lock.release()
            raise
        return self

    def __exit__(self, *exc):
        for directory, temp in self.temps:
            try:
                os.unlink(temp, dir_fd=directory.fd)
            except OSError:
                pass
        self.lock.release()
        return False

    def note(self, target, info):
        """Records INFO (TARGET's lstat, or None when absent) as what the
        caller decided its change on, instead of reading the file: for files
        that are resources themselves, which may be large, links or
        directories."""
        key = target.key()
        if not self.noop and key not in self.cleaned:
            self._remove_temps(target)
            self.cleaned.add(key)
        self.read_as[key] = info

    def read(self, target, limit=-1):
        """The bytes of TARGET (None when it does not exist), read under the
        lock; remembers its version for commit. At most LIMIT bytes are
        read when it is given: for a file someone else may make huge, which
        the caller then refuses to edit."""
        key = target.key()
        if self.noop:
            data, info = self.lock.read(target, limit)
        else:
            if key not in self.cleaned:
                self._remove_temps(target)
                self.cleaned.add(key)
            data, info = target.read(limit)
        self.read_as[key] = info
        return data

    def read_stat(self, target):
        """The stat of TARGET as read (None when it did not exist)."""
        return self.read_as.get(target.key())

    def write(self, target, data, mode=None, owner=None, new_mode=0o644,
              new_owner=None):
        """Stages DATA as the new content of TARGET. The file keeps its mode
        and owner (uid, gid), or gets NEW_MODE and NEW_OWNER when it does
        not exist yet; MODE and OWNER, when given, apply either way.
        Owners are set only when running as root."""
        if target.key() not in self.read_as:
            self.read(target)
        old = self.read_as[target.key()]
        if old is not None and old.st_nlink > 1 and not self.noop:
            log.warning("%s has %d names (hard links): the new file replaces "
                        "this one only, and the others keep the old content"
                        % (quoted(target.path), old.st_nlink))
        if mode is None:
            mode = stat.S_IMODE(old.st_mode) if old is not None else new_mode
        if owner is None:
            owner = (old.st_uid, old.st_gid) if old is not None else new_owner
        self.staged.append([target, data, mode, owner])

    def _remove_temps(self, target):
        if self.batch is None:
            _remove_temps(target.dir, target.name)
        else:
            self.batch.remove_temps(target.dir, target.name)

    def sync_dir(self, fd):
        """Makes the names in the directory FD durable (after a change made
        there directly, not through write): now, or in a batch with its
        other syncs, before it answers."""
        if self.batch is None:
            fsync_dir(fd)
        else:
            self.batch.sync_later(fd)

    def commit(self, now=False):
        """Replaces the staged files (see the class). In a batch, an edit
        of one file is queued, unless NOW: when other paths may lead
        through this one (it replaces a link), it must be finished before
        they are looked up."""
        if self.noop:
            self.staged = []
        if not self.staged:
            return
        if self.batch is not None and not now and len(self.staged) == 1:
            target, data, mode, owner = self.staged[0]
            temp, fd = self._write_temp(target, data, mode, owner, sync=False)
            self.batch.queue(self, target, temp, fd)
            self.temps.remove((target.dir, temp))
            self.staged = []
            if len(self.batch.queued) >= self.batch.LIMIT:
                self.batch.flush()
            return
        entries = []
        for target, data, mode, owner in self.staged:
            temp = self._write_temp(target, data, mode, owner)
            entries.append({"dir": target.dir.rel, "temp": temp,
                            "name": target.name,
                            "was": _identity(self.read_as[target.key()])})
        for target, _, _, _ in self.staged:
            now = target.dir.lstat(target.name)
            if _identity(now) != _identity(self.read_as[target.key()]):
                raise CallError("%s was changed meanwhile by a program that "
                                "does not take the lock %s; nothing was written"
                                % (quoted(target.path), quoted(self.lock.show())))
        locked = self.lock.dir
        if locked.fd is not None \
                and not _in_place(locked.root, locked.rel, locked.fd):
            # Written there, the change would be made where nobody looks,
            # and reported as made.
            raise CallError("%s was moved or replaced while it was being "
                            "edited, so the lock %s no longer guards that "
                            "path; nothing was written"
                            % (quoted(self.lock.dir.path),
                               quoted(self.lock.show())))
        journal = len(self.staged) > 1
        if journal and self.lock.journal() is None:
            raise CallError("an edit of several files needs a lock file for "
                            "its journal, not a lock on a directory")
        if journal:
            self._write_journal(entries)
        dirs = {}
        for index, (target, _, _, _) in enumerate(self.staged):
            temp = entries[index]["temp"]
            try:
                os.rename(temp, target.name, src_dir_fd=target.dir.fd,
                          dst_dir_fd=target.dir.fd)
            except OSError as err:
                if index == 0:
                    # Nothing replaced yet: no trace of this edit may stay.
                    self._drop_journal()
                    raise os_error(err, "replace %s" % quoted(target.path))
                # The journal lets the next edit finish the rest.
                self.temps = []
                raise os_error(err, "replace %s (the files already replaced "
                               "stay; the next edit finishes the others)"
                               % quoted(target.path))
            self.temps.remove((target.dir, temp))
            dirs[target.dir.rel] = target.dir.fd
        for fd in dirs.values():
            fsync_dir(fd)
        if journal:
            self._drop_journal()
        self.staged = []

    def _drop_journal(self):
        try:
            os.unlink(self.lock.journal(), dir_fd=self.lock.dir.fd)
        except OSError:
            pass

    def _write_temp(self, target, data, mode, owner, sync=True):
        """Writes the temporary file that will replace TARGET; returns its
        name, synced, or without SYNC its name and a descriptor of it (for
        the batch to sync)."""
        old = self.read_as[target.key()]
        directory = target.dir
        for _ in range(100):
            temp = temp_name(target.name)
            try:
                fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL
                             | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600,
                             dir_fd=directory.fd)
                break
            except FileExistsError:
                continue
            except OSError as err:
                raise os_error(err, "create a temporary file in %s"
                               % quoted(directory.path))
        else:
            raise CallError("cannot create a temporary file in %s"
                            % quoted(directory.path))
        self.temps.append((directory, temp))
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                if old is not None:
                    _copy_attributes(directory, target.name, fh.fileno())
                if owner is not None and os.geteuid() == 0:
                    uid, gid = owner
                    os.fchown(fh.fileno(), -1 if uid is None else uid,
                              -1 if gid is None else gid)
                os.fchmod(fh.fileno(), mode)
                if not sync:
                    return temp, os.dup(fh.fileno())
                os.fsync(fh.fileno())
        except OSError as err:
            raise os_error(err, "write %s" % quoted(directory.show(temp)))
        return temp

    def _write_journal(self, entries):
        directory = self.lock.dir
        text = json.dumps({"ral_journal": 1, "files": entries}).encode()
        temp = temp_name(self.lock.journal())
        try:
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL
                         | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600,
                         dir_fd=directory.fd)
            self.temps.append((directory, temp))
            with os.fdopen(fd, "wb") as fh:
                fh.write(text)
                fh.flush()
                os.fsync(fh.fileno())
            os.rename(temp, self.lock.journal(), src_dir_fd=directory.fd,
                      dst_dir_fd=directory.fd)
            self.temps.remove((directory, temp))
            os.fsync(directory.fd)
        except OSError as err:
            raise os_error(err, "write the journal %s"
                           % quoted(directory.show(self.lock.journal())))


class Batch:
    """Edits of many files, each guarded by the lock of its directory, made
    together: for a provider whose resources are files themselves, so that
    a set of a thousand is not two thousand waits for the disk.

        batch = ral.Batch(noop)
        for index, update in enumerate(updates):
            with batch.edit(directory, index) as edit:
                ...                         # decide under the lock
                edit.write(target, data)
                edit.commit()               # queued
        failed = batch.finish()             # {index: CallError}

    Each edit still takes its lock, decides under it and writes a temporary
    file that replaces its target only once synced. But the batch queues up
    to LIMIT of them, and keeps every lock it took until it flushes them:
    it syncs the temporary files all at once (from several threads, which
    the file system serves with a few commits of its journal instead of
    one per file), renames them in order, syncs each directory once and
    lets go of the locks. It flushes before it waits for a lock another
    process holds, so two batches never wait for each other, and before it
    answers (finish). Syncs of directories changed directly
    (Edit.sync_dir) wait for the same moment. A queued edit that fails
    there changes nothing and is reported by finish. While a lock is held,
    its directory is listed once for temporary files a crash left, not once
    per edit.

    Looking a path up while an edit of it, or of a path above or below it,
    is queued would see it as it was: the caller flushes first (touches
    tells when)."""

    # At most this many queued edits, locks held and directories to sync,
    # each one open descriptor.
    LIMIT = 128
    THREADS = 32

    def __init__(self, noop=None):
        self.noop = log.noop_or(noop)
        self.locks = {}         # directory identity -> _Held
        self.queued = []        # _Queued, in order
        self.paths = set()      # their paths (relative to the root)
        self.above = set()      # the directories above those paths
        self.dirs = {}          # directory identity -> descriptor to sync,
                                # or None: the lock's
        self.failed = {}        # key -> CallError

    def edit(self, directory, key):
        """An Edit guarded by the lock of DIRECTORY, whose commit is queued
        (under noop, a plain preview); KEY names it in finish's answer."""
        if self.noop:
            return Edit(Lock.of_directory(directory), noop=True)
        return Edit(_BatchLock(self, directory), batch=self, key=key)

    def touches(self, rel):
        """True when a queued edit replaces the path REL (relative to the
        root, links resolved), a path above it or one below it."""
        if not self.queued:
            return False
        if rel in self.paths or rel in self.above:
            return True
        while rel:
            rel = rel.rpartition("/")[0]
            if rel in self.paths:
                return True
        return False

    def hold(self, directory):
        """Takes the lock of DIRECTORY, unless the batch holds it already;
        returns the directory's identity."""
        ident = _dir_identity(directory.fd)
        held = self.locks.get(ident)
        if held is None:
            if len(self.locks) >= self.LIMIT:
                self.flush()
            lock = Lock.of_directory(directory)
            lock.acquire(before_wait=self.flush)
            held = self.locks[ident] = _Held(lock)
        held.users += 1
        return ident

    def let_go(self, ident):
        self.locks[ident].users -= 1

    def remove_temps(self, directory, name):
        """_remove_temps, with the directory listed once while its lock is
        held."""
        held = self.locks.get(_dir_identity(directory.fd))
        if held is None:
            _remove_temps(directory, name)
            return
        if held.temps is None:
            held.temps = [e for e in directory.names() if _temp_like(e)]
        _remove_temps(directory, name, held.temps)

    def queue(self, edit, target, temp, fd):
        """Takes over the temporary file TEMP (open as FD) of EDIT, to
        replace TARGET at the flush. TARGET must be in the directory EDIT
        locks, which keeps others from its temporary files."""
        try:
            queued = _Queued(edit, target, temp, fd)
            if queued.dir_ident != edit.lock.ident:
                raise CallError("%s is not in the directory of the lock %s"
                                % (quoted(target.path),
                                   quoted(edit.lock.show())))
        except BaseException:
            os.close(fd)
            raise
        self.queued.append(queued)
        self.locks[queued.dir_ident].users += 1
        self.paths.add(queued.rel)
        rel = queued.rel
        while rel:
            rel = rel.rpartition("/")[0]
            self.above.add(rel)

    def sync_later(self, fd):
        ident = _dir_identity(fd)
        if ident not in self.dirs:
            self.dirs[ident] = None if ident in self.locks else os.dup(fd)
        if len(self.dirs) >= self.LIMIT:
            self.flush()

    def flush(self):
        """Finishes every queued edit, and lets go of the locks no open
        edit uses."""
        queued, self.queued = self.queued, []
        dirs, self.dirs = self.dirs, {}
        self.paths, self.above = set(), set()
        try:
            errors = _sync_all([q.fd for q in queued], self.THREADS)
            moved = {}          # directory identity -> moved since locked
            for q, err in zip(queued, errors):
                # The lock's descriptor is one of the directory.
                dir_fd = self.locks[q.dir_ident].lock.fd
                if q.dir_ident not in moved:
                    moved[q.dir_ident] = not _in_place(q.root, q.dir_rel,
                                                       dir_fd)
                problem = None
                if err is not None:
                    problem = os_error(err, "write %s" % quoted(q.show_temp))
                elif _identity(_lstat_at(dir_fd, q.name)) != q.was:
                    problem = CallError(
                        "%s was changed meanwhile by a program that does not "
                        "take the lock %s; nothing was written"
                        % (quoted(q.path), quoted(q.lock)))
                elif moved[q.dir_ident]:
                    problem = CallError(
                        "the directory of %s was moved or replaced while it "
                        "was being edited, so the lock %s no longer guards "
                        "that path; nothing was written"
                        % (quoted(q.path), quoted(q.lock)))
                else:
                    try:
                        os.rename(q.temp, q.name, src_dir_fd=dir_fd,
                                  dst_dir_fd=dir_fd)
                    except OSError as err:
                        problem = os_error(err, "replace %s" % quoted(q.path))
                if problem is not None:
                    self.failed[q.key] = problem
                    try:
                        os.unlink(q.temp, dir_fd=dir_fd)
                    except OSError:
                        pass
                else:
                    dirs.setdefault(q.dir_ident, None)
            # As fsync_dir: a file system may refuse to sync a directory.
            _sync_all([self.locks[ident].lock.fd if fd is None else fd
                       for ident, fd in dirs.items()], self.THREADS)
        finally:
            for q in queued:
                os.close(q.fd)
                self.locks[q.dir_ident].users -= 1
            for fd in dirs.values():
                if fd is not None:
                    os.close(fd)
            for ident, held in list(self.locks.items()):
                if held.users == 0:
                    del self.locks[ident]
                    held.lock.release()

    def finish(self):
        """Flushes; returns {key: CallError} of the queued edits that failed
        since the batch began (they changed nothing; the others are done)."""
        self.flush()
        failed, self.failed = self.failed, {}
        return failed


class _Held:
    """A lock a Batch holds: how many open edits and queued commits use it,
    and the names in its directory that may be temporary files a crash
    left (None until listed)."""

    def __init__(self, lock):
        self.lock = lock
        self.users = 0
        self.temps = None


class _BatchLock:
    """The lock of a directory as the edits of a Batch share it. A lock on
    a directory has no journal, so there is nothing to recover."""

    def __init__(self, batch, directory):
        self.batch = batch
        self.dir = directory
        self.name = None
        self.ident = None

    def show(self):
        return self.dir.path

    def journal(self):
        return None

    def acquire(self):
        self.ident = self.batch.hold(self.dir)

    def recover(self):
        pass

    def release(self):
        if self.ident is not None:
            self.batch.let_go(self.ident)
            self.ident = None


class _Queued:
    """A commit a Batch has queued: the temporary file TEMP (open as FD)
    that replaces NAME in the directory the lock is on, if NAME is still
    WAS."""

    def __init__(self, edit, target, temp, fd):
        self.fd = fd
        self.key = edit.key
        self.lock = edit.lock.show()
        self.was = _identity(edit.read_as[target.key()])
        self.temp = temp
        self.name = target.name
        self.path = target.path
        self.show_temp = target.dir.show(temp)
        self.rel = "/".join(p for p in (target.dir.rel, target.name) if p)
        self.root = target.dir.root
        self.dir_rel = target.dir.rel
        self.dir_ident = _dir_identity(target.dir.fd)


def _in_place(root, rel, fd):
    """True when the path REL below ROOT (every link on it resolved when it
    was opened) still leads to the directory open as FD."""
    try:
        now = root.directory(rel, follow=False)
    except CallError:
        return False
    try:
        return _dir_identity(now.fd) == _dir_identity(fd)
    finally:
        now.close()


def _dir_identity(fd):
    info = os.fstat(fd)
    return (info.st_dev, info.st_ino)


def _lstat_at(dir_fd, name):
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except (FileNotFoundError, NotADirectoryError):
        return None


def _sync_all(fds, threads):
    """fsync(2)s every descriptor of FDS, several at a time: the file system
    then commits its journal once for many of them instead of once for
    each. Returns the OSError of each (None when it succeeded), in order."""
    errors = [None] * len(fds)
    jobs = list(range(len(fds)))

    def work():
        while True:
            try:
                index = jobs.pop()      # atomic in CPython
            except IndexError:
                return
            try:
                os.fsync(fds[index])
            except OSError as err:
                errors[index] = err

    workers = []
    if len(fds) > 1:
        import threading
        for _ in range(min(threads, len(fds)) - 1):
            worker = threading.Thread(target=work, daemon=True)
            try:
                worker.start()
            except RuntimeError:        # no more threads: fewer will do
                break
            workers.append(worker)
    work()
    for worker in workers:
        worker.join()
    return errors


# The extended attributes a replaced file keeps: its SELinux context and its
# access control list (which fchmod then adjusts as it would the old file's);
# not the others: an IMA or EVM signature, for one, would not match.
_KEPT_XATTRS = ("security.selinux", "system.posix_acl_access")


def _copy_attributes(directory, name, fd):
    """Gives the file FD the attributes of NAME it keeps, where it has them."""
    if not hasattr(os, "getxattr"):
        return
    try:
        src = os.open(name, _READ_FLAGS, dir_fd=directory.fd)
    except OSError:
        return
    try:
        for attribute in _KEPT_XATTRS:
            try:
                os.setxattr(fd, attribute, os.getxattr(src, attribute))
            except OSError:
                pass
    finally:
        os.close(src)
