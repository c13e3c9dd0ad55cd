"""Unit tests of providers/ral_provider/, the toolkit of the Python
providers: the path walk below the root, locked and journaled edits, lock
waits, the output limits, and the command runner. Run by the Rust test
`toolkit::python_unit_tests_pass` (python3 -I -S this file)."""

import contextlib
import errno
import fcntl
import io
import json
import os
import struct
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "providers"))
import ral_provider as ral  # noqa: E402


def write(path, data, mode=0o644):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as fh:
        fh.write(data)
    os.chmod(path, mode)


def read(path):
    with open(path, "rb") as fh:
        return fh.read()


class Sandbox(unittest.TestCase):
    """Each test gets a fake root in RALSH_ROOT_DIR and captured stderr."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.root = os.path.join(self.tmp.name, "root")
        os.mkdir(self.root)
        self.saved_env = dict(os.environ)
        os.environ["RALSH_ROOT_DIR"] = self.root
        os.environ.pop("RALSH_LOCK_TIMEOUT", None)
        self.stderr = io.StringIO()
        self.redirect = contextlib.redirect_stderr(self.stderr)
        self.redirect.__enter__()

    def tearDown(self):
        self.redirect.__exit__(None, None, None)
        os.environ.clear()
        os.environ.update(self.saved_env)
        self.tmp.cleanup()

    def path(self, rel):
        return os.path.join(self.root, rel)

    def names(self, rel):
        return sorted(os.listdir(self.path(rel)))


class Walk(Sandbox):
    def test_links_resolve_inside_the_root(self):
        write(self.path("real/etc/hosts"), b"inside\n")
        os.symlink("/real/etc", self.path("etc"))            # absolute
        os.symlink("../../../../real", self.path("up"))      # climbs above
        root = ral.Root()
        self.assertEqual(root.file("etc/hosts").read()[0], b"inside\n")
        target = root.file("up/etc/hosts")
        self.assertEqual(target.dir.rel, "real/etc")
        self.assertEqual(target.read()[0], b"inside\n")
        # An outside file a link seems to name is never what is read.
        outside = os.path.join(self.tmp.name, "outside")
        write(os.path.join(outside, "hosts"), b"outside\n")
        os.symlink(outside, self.path("out"))
        with self.assertRaises(ral.Missing) as caught:
            root.file("out/hosts")
        self.assertIn("which is resolved inside the root", str(caught.exception))
        self.assertEqual(root.read("out/hosts"), (None, None))

    def test_follow_false_refuses_links(self):
        os.makedirs(self.path("home/alice"))
        os.symlink("/etc", self.path("home/alice/.ssh"))
        home = ral.Root().directory("home/alice", follow=False)
        with self.assertRaises(ral.CallError) as caught:
            home.subdir(".ssh")
        self.assertIn("is a symbolic link", str(caught.exception))
        with self.assertRaises(ral.CallError):
            ral.Root().directory("home/alice/.ssh", follow=False)

    def test_a_last_link_is_followed_only_when_asked(self):
        write(self.path("etc/real-group"), b"g\n")
        os.symlink("real-group", self.path("etc/group"))
        root = ral.Root()
        self.assertEqual(root.file("etc/group").name, "real-group")
        self.assertEqual(root.file("etc/group", follow_last=False).name, "group")
        with self.assertRaises(ral.CallError) as caught:
            root.file("etc/group", follow_last=False).read()
        self.assertIn("is a symbolic link", str(caught.exception))

    def test_link_loops_end(self):
        os.symlink("b", self.path("a"))
        os.symlink("a", self.path("b"))
        with self.assertRaises(ral.CallError) as caught:
            ral.Root().directory("a")
        self.assertIn("too many levels of symbolic links", str(caught.exception))

    def test_missing_directories_are_made_with_the_last_one_as_asked(self):
        directory = ral.Root().directory("var/spool/cron", create=(0o1730, None, None))
        self.assertEqual(directory.rel, "var/spool/cron")
        self.assertEqual(os.stat(self.path("var/spool/cron")).st_mode & 0o7777, 0o1730)
        self.assertEqual(os.stat(self.path("var/spool")).st_mode & 0o7777, 0o755)

    def test_a_fifo_is_not_read(self):
        os.makedirs(self.path("etc"))
        os.mkfifo(self.path("etc/hosts"))
        with self.assertRaises(ral.CallError) as caught:
            ral.Root().read("etc/hosts")
        self.assertIn("is not a regular file", str(caught.exception))


    def test_a_directory_swapped_back_between_open_and_readlink_is_opened(self):
        # The race a swapper wins: the open meets a link (refused with
        # O_NOFOLLOW), and by the readlink the directory is back. The walk
        # opens it again rather than calling it "not a directory".
        write(self.path("etc.real/hosts"), b"inside\n")
        os.symlink("/nowhere", self.path("etc"))
        real_readlink = ral.files._readlink
        swaps = []

        def swapping_readlink(dir_fd, name):
            if name == "etc" and not swaps:
                swaps.append(name)
                os.rename(self.path("etc"), self.path("etc.link"))
                os.rename(self.path("etc.real"), self.path("etc"))
            return real_readlink(dir_fd, name)

        ral.files._readlink = swapping_readlink
        try:
            target = ral.Root().file("etc/hosts")
        finally:
            ral.files._readlink = real_readlink
        self.assertEqual(swaps, ["etc"])
        self.assertEqual(target.read()[0], b"inside\n")

    def test_a_file_on_the_way_is_not_a_directory(self):
        write(self.path("etc"), b"a file\n")
        with self.assertRaises(ral.CallError) as caught:
            ral.Root().file("etc/hosts")
        self.assertIn("/etc' is not a directory", str(caught.exception))
        with self.assertRaises(ral.CallError) as caught:
            ral.Root().directory("").subdir("etc")
        self.assertIn("/etc' is not a directory", str(caught.exception))

    def test_an_entry_is_found_in_the_directory_opened(self):
        write(self.path("etc/passwd"), b"opened\n")
        write(self.path("etc/real-group"), b"group\n")
        os.symlink("real-group", self.path("etc/group"))
        etc = ral.Root().directory("etc")
        # The path now leads to another directory; the one opened is used.
        os.rename(self.path("etc"), self.path("etc.old"))
        write(self.path("etc/passwd"), b"swapped in\n")
        self.assertEqual(etc.entry("passwd").read()[0], b"opened\n")
        # A link is resolved inside the root, from the directory's path.
        os.rename(self.path("etc"), self.path("etc.new"))
        os.rename(self.path("etc.old"), self.path("etc"))
        self.assertEqual(etc.entry("group").name, "real-group")
        self.assertEqual(etc.entry("group").read()[0], b"group\n")

    def test_an_entrys_link_resolves_up_and_absolute_inside_the_root(self):
        write(self.path("etc/a"), b"up\n")
        write(self.path("srv/b"), b"absolute\n")
        os.mkdir(self.path("etc/sub"))
        os.symlink("../../etc/a", self.path("etc/sub/up"))
        os.symlink("/srv/b", self.path("etc/sub/abs"))
        os.symlink("../../../../../../etc/a", self.path("etc/sub/far"))
        sub = ral.Root().directory("etc/sub")
        self.assertEqual(sub.entry("up").read()[0], b"up\n")
        self.assertEqual(sub.entry("up").dir.rel, "etc")
        self.assertEqual(sub.entry("abs").read()[0], b"absolute\n")
        self.assertEqual(sub.entry("abs").dir.rel, "srv")
        # '..' never climbs above the root.
        self.assertEqual(sub.entry("far").read()[0], b"up\n")


class Edits(Sandbox):
    def test_a_file_is_replaced_keeping_its_mode_and_nothing_is_left(self):
        write(self.path("etc/hosts"), b"old\n", 0o640)
        before = os.stat(self.path("etc/hosts"))
        target = ral.Root().file("etc/hosts")
        with ral.Edit(ral.Lock.beside(target)) as edit:
            self.assertEqual(edit.read(target), b"old\n")
            edit.write(target, b"new\n")
            edit.commit()
        after = os.stat(self.path("etc/hosts"))
        self.assertEqual(read(self.path("etc/hosts")), b"new\n")
        self.assertNotEqual(before.st_ino, after.st_ino)
        self.assertEqual(after.st_mode & 0o7777, 0o640)
        self.assertEqual(self.names("etc"), [".hosts.ral-lock", "hosts"])

    @unittest.skipUnless(os.geteuid() == 0, "giving a file to another owner "
                         "(chown to 65534:65534) needs root; CI runs as root")
    def test_a_file_is_replaced_keeping_its_owner(self):
        write(self.path("etc/shadow"), b"old\n", 0o640)
        os.chown(self.path("etc/shadow"), 65534, 65534)
        target = ral.Root().file("etc/shadow")
        with ral.Edit(ral.Lock.beside(target)) as edit:
            edit.read(target)
            edit.write(target, b"new\n")
            edit.commit()
        after = os.stat(self.path("etc/shadow"))
        self.assertEqual(read(self.path("etc/shadow")), b"new\n")
        # The new file is made by root; the old one's owner is given to it.
        self.assertEqual((after.st_uid, after.st_gid), (65534, 65534))
        self.assertEqual(after.st_mode & 0o7777, 0o640)

    def test_a_file_is_replaced_keeping_its_acl(self):
        # user::rw-, user:65534:r--, group::r--, mask::r--, other::---:
        # a service setfacl let read the file must still read it.
        def entry(tag, perm, uid):
            return struct.pack("<HHI", tag, perm, uid)
        acl = struct.pack("<I", 2) + b"".join([
            entry(0x01, 6, 0xFFFFFFFF), entry(0x02, 4, 65534),
            entry(0x04, 4, 0xFFFFFFFF), entry(0x10, 4, 0xFFFFFFFF),
            entry(0x20, 0, 0xFFFFFFFF)])
        write(self.path("etc/shadow"), b"old\n", 0o640)
        os.setxattr(self.path("etc/shadow"), "system.posix_acl_access", acl)
        target = ral.Root().file("etc/shadow")
        with ral.Edit(ral.Lock.beside(target)) as edit:
            edit.read(target)
            edit.write(target, b"new\n")
            edit.commit()
        self.assertEqual(read(self.path("etc/shadow")), b"new\n")
        self.assertEqual(
            os.getxattr(self.path("etc/shadow"), "system.posix_acl_access"), acl)
        self.assertEqual(os.stat(self.path("etc/shadow")).st_mode & 0o7777, 0o640)

    def test_a_new_file_gets_the_mode_asked_for(self):
        os.makedirs(self.path("etc"))
        target = ral.Root().file("etc/fstab")
        with ral.Edit(ral.Lock.beside(target)) as edit:
            self.assertIsNone(edit.read(target))
            edit.write(target, b"x\n", new_mode=0o600)
            edit.commit()
        self.assertEqual(os.stat(self.path("etc/fstab")).st_mode & 0o7777, 0o600)

    def test_temporary_files_a_crash_left_go_with_the_next_edit(self):
        write(self.path("etc/hosts"), b"old\n")
        for stale in (".hosts.ral-tmp-0123456789ab", ".hosts.abc123.tmp",
                      ".ralsh-abc.hosts"):
            write(self.path("etc/" + stale), b"half")
        write(self.path("etc/.other.ral-tmp-1"), b"not ours to judge")
        target = ral.Root().file("etc/hosts")
        with ral.Edit(ral.Lock.beside(target)) as edit:
            edit.read(target)
        self.assertEqual(self.names("etc"),
                         [".hosts.ral-lock", ".other.ral-tmp-1", "hosts"])

    def test_a_noop_edit_reads_like_one_and_creates_nothing(self):
        write(self.path("etc/hosts"), b"old\n")
        target = ral.Root().file("etc/hosts")
        with ral.Edit(ral.Lock.beside(target), noop=True) as edit:
            self.assertEqual(edit.read(target), b"old\n")
            edit.write(target, b"new\n")
            edit.commit()
        self.assertEqual(read(self.path("etc/hosts")), b"old\n")
        self.assertEqual(self.names("etc"), ["hosts"])

    def test_an_edit_of_a_directory_moved_meanwhile_writes_nothing(self):
        # The lock guards etc as opened; once etc is moved away and another
        # takes its path, a commit there would make the change where nobody
        # looks, and report it made.
        write(self.path("etc/hosts"), b"old\n")
        target = ral.Root().file("etc/hosts")
        with self.assertRaises(ral.CallError) as caught:
            with ral.Edit(ral.Lock.beside(target)) as edit:
                edit.read(target)
                os.rename(self.path("etc"), self.path("etc.moved"))
                write(self.path("etc/hosts"), b"the new etc\n")
                edit.write(target, b"changed\n")
                edit.commit()
        self.assertIn("was moved or replaced while it was being edited",
                      str(caught.exception))
        self.assertEqual(read(self.path("etc.moved/hosts")), b"old\n")
        self.assertEqual(read(self.path("etc/hosts")), b"the new etc\n")
        self.assertEqual(self.names("etc.moved"), [".hosts.ral-lock", "hosts"])

    def test_a_writer_that_does_not_lock_makes_commit_refuse(self):
        write(self.path("etc/hosts"), b"old\n")
        target = ral.Root().file("etc/hosts")
        with self.assertRaises(ral.CallError) as caught:
            with ral.Edit(ral.Lock.beside(target)) as edit:
                edit.read(target)
                write(self.path("etc/hosts.new"), b"theirs\n")
                os.rename(self.path("etc/hosts.new"), self.path("etc/hosts"))
                edit.write(target, b"ours\n")
                edit.commit()
        self.assertIn("does not take the lock", str(caught.exception))
        self.assertEqual(read(self.path("etc/hosts")), b"theirs\n")
        self.assertEqual(self.names("etc"), [".hosts.ral-lock", "hosts"])


class Journal(Sandbox):
    """An edit of two files interrupted between its two renames."""

    def interrupted_edit(self):
        write(self.path("etc/passwd"), b"root\n")
        write(self.path("etc/shadow"), b"root-shadow\n", 0o640)
        root = ral.Root()
        passwd, shadow = root.file("etc/passwd"), root.file("etc/shadow")
        real_rename = os.rename
        calls = []

        def failing_rename(src, dst, **kwargs):
            calls.append(dst)
            if dst == "passwd":       # the second file: the crash
                raise OSError(errno.EIO, "simulated crash")
            return real_rename(src, dst, **kwargs)

        ral.files.os.rename = failing_rename
        try:
            with self.assertRaises(ral.CallError):
                with ral.Edit(ral.Lock.accounts(root)) as edit:
                    edit.read(shadow)
                    edit.read(passwd)
                    edit.write(shadow, b"root-shadow\nbob-shadow\n")
                    edit.write(passwd, b"root\nbob\n")
                    edit.commit()
        finally:
            ral.files.os.rename = real_rename
        self.assertEqual(calls, [".pwd.lock.ral-journal", "shadow", "passwd"])
        # The state a crash leaves: shadow replaced, passwd not yet.
        self.assertEqual(read(self.path("etc/shadow")), b"root-shadow\nbob-shadow\n")
        self.assertEqual(read(self.path("etc/passwd")), b"root\n")
        self.assertIn(".pwd.lock.ral-journal", self.names("etc"))
        return root, passwd

    def test_readers_see_it_finished_and_the_next_edit_finishes_it(self):
        root, passwd = self.interrupted_edit()
        # A journal of another edit, killed while it was being written.
        stale = ral.temp_name(".pwd.lock.ral-journal")
        write(self.path("etc/" + stale), b'{"ral_journal": 1, "fi')
        self.assertEqual(ral.Lock.accounts(root).read(passwd)[0], b"root\nbob\n")
        with ral.Edit(ral.Lock.accounts(root)) as edit:
            self.assertEqual(edit.read(passwd), b"root\nbob\n")
        self.assertEqual(read(self.path("etc/passwd")), b"root\nbob\n")
        self.assertEqual(self.names("etc"), [".pwd.lock", "passwd", "shadow"])
        self.assertIn("finished an interrupted edit", self.stderr.getvalue())

    def test_a_file_another_program_changed_since_is_left_to_it(self):
        root, passwd = self.interrupted_edit()
        write(self.path("etc/passwd.new"), b"root\nuseradd-made\n")
        os.rename(self.path("etc/passwd.new"), self.path("etc/passwd"))
        self.assertEqual(ral.Lock.accounts(root).read(passwd)[0],
                         b"root\nuseradd-made\n")
        with ral.Edit(ral.Lock.accounts(root)) as edit:
            edit.read(passwd)
        self.assertEqual(read(self.path("etc/passwd")), b"root\nuseradd-made\n")
        self.assertEqual(self.names("etc"), [".pwd.lock", "passwd", "shadow"])
        self.assertIn("was changed by another program", self.stderr.getvalue())


    def test_a_journal_too_deep_or_too_large_to_parse_is_ignored(self):
        write(self.path("etc/passwd"), b"root\n")
        root = ral.Root()
        passwd = root.file("etc/passwd")
        temp = ral.temp_name("passwd")
        was = ral.files._identity(os.lstat(self.path("etc/passwd")))
        # A journal that would replace passwd, were it read.
        valid = json.dumps({"ral_journal": 1, "files": [
            {"dir": "etc", "temp": temp, "name": "passwd", "was": was}]})
        for journal in (b"[" * 100000 + b"]" * 100000,
                        valid.encode() + b" " * (1 << 20)):
            write(self.path("etc/" + temp), b"root\nbob\n")
            write(self.path("etc/.pwd.lock.ral-journal"), journal)
            lock = ral.Lock.accounts(root)
            self.assertEqual(lock.read(passwd)[0], b"root\n")
            with ral.Edit(ral.Lock.accounts(root)) as edit:
                self.assertEqual(edit.read(passwd), b"root\n")
            self.assertNotIn(".pwd.lock.ral-journal", self.names("etc"))
            self.assertIn("ignoring the unreadable journal",
                          self.stderr.getvalue())
        self.assertEqual(read(self.path("etc/passwd")), b"root\n")


class Batches(Sandbox):
    """Edits of files that are resources themselves, made together."""

    def edit(self, batch, rel, data, key):
        target = ral.Root().file(rel)
        with batch.edit(target.dir, key) as edit:
            edit.note(target, target.dir.lstat(target.name))
            edit.write(target, data)
            edit.commit()
        target.dir.close()

    def is_locked(self, rel):
        fd = os.open(self.path(rel), os.O_RDONLY | os.O_DIRECTORY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return False
        except BlockingIOError:
            return True
        finally:
            os.close(fd)

    def test_queued_edits_are_made_together_and_leave_nothing(self):
        os.makedirs(self.path("a"))
        os.makedirs(self.path("b"))
        write(self.path("a/old"), b"old\n", 0o640)
        batch = ral.Batch()
        self.edit(batch, "a/new", b"new\n", 1)
        self.edit(batch, "a/old", b"changed\n", 2)
        self.edit(batch, "b/new", b"b\n", 3)
        # Nothing replaced yet, and the locks kept for the flush.
        self.assertEqual(read(self.path("a/old")), b"old\n")
        self.assertFalse(os.path.exists(self.path("a/new")))
        self.assertTrue(self.is_locked("a") and self.is_locked("b"))
        self.assertTrue(batch.touches("a/old") and batch.touches("a"))
        self.assertTrue(batch.touches("a/new/below") and batch.touches(""))
        self.assertFalse(batch.touches("a/other") or batch.touches("c"))
        self.assertEqual(batch.finish(), {})
        self.assertEqual(read(self.path("a/new")), b"new\n")
        self.assertEqual(read(self.path("a/old")), b"changed\n")
        self.assertEqual(os.stat(self.path("a/old")).st_mode & 0o7777, 0o640)
        self.assertEqual(read(self.path("b/new")), b"b\n")
        self.assertEqual(self.names("a"), ["new", "old"])
        self.assertEqual(self.names("b"), ["new"])
        self.assertFalse(self.is_locked("a") or self.is_locked("b"))
        self.assertFalse(batch.touches("a/old"))

    def test_a_file_changed_meanwhile_fails_alone(self):
        os.makedirs(self.path("a"))
        write(self.path("a/x"), b"x\n")
        batch = ral.Batch()
        self.edit(batch, "a/x", b"ours\n", "x")
        self.edit(batch, "a/y", b"y\n", "y")
        # A writer that takes no lock replaces x before the flush.
        write(self.path("a/x.new"), b"theirs\n")
        os.rename(self.path("a/x.new"), self.path("a/x"))
        failed = batch.finish()
        self.assertEqual(list(failed), ["x"])
        self.assertIn("does not take the lock", str(failed["x"]))
        self.assertEqual(read(self.path("a/x")), b"theirs\n")
        self.assertEqual(read(self.path("a/y")), b"y\n")
        self.assertEqual(self.names("a"), ["x", "y"])

    def test_a_queued_edit_of_a_directory_moved_meanwhile_fails_alone(self):
        os.makedirs(self.path("a"))
        os.makedirs(self.path("b"))
        batch = ral.Batch()
        self.edit(batch, "a/new", b"new\n", 1)
        self.edit(batch, "b/new", b"b\n", 2)
        os.rename(self.path("a"), self.path("a.moved"))
        os.makedirs(self.path("a"))
        failed = batch.finish()
        self.assertEqual(list(failed), [1])
        self.assertIn("was moved or replaced while it was being edited",
                      str(failed[1]))
        self.assertEqual(self.names("a.moved"), [])
        self.assertEqual(read(self.path("b/new")), b"b\n")

    def test_queued_edits_are_made_before_waiting_for_a_lock(self):
        os.makedirs(self.path("a"))
        os.makedirs(self.path("b"))
        held = os.open(self.path("b"), os.O_RDONLY | os.O_DIRECTORY)
        self.addCleanup(os.close, held)
        fcntl.flock(held, fcntl.LOCK_EX)
        os.environ["RALSH_LOCK_TIMEOUT"] = "0.1"
        batch = ral.Batch()
        self.edit(batch, "a/x", b"x\n", 1)
        with self.assertRaises(ral.CallError) as caught:
            self.edit(batch, "b/y", b"y\n", 2)
        self.assertIn("timed out", str(caught.exception))
        # a/x was finished, and a's lock let go, before the wait.
        self.assertEqual(read(self.path("a/x")), b"x\n")
        self.assertFalse(self.is_locked("a"))
        self.assertEqual(batch.finish(), {})
        self.assertEqual(self.names("b"), [])

    def test_temporary_files_a_crash_left_go_but_queued_ones_stay(self):
        os.makedirs(self.path("a"))
        for stale in (".x.ral-tmp-0123456789ab", ".y.ral-tmp-0123456789ab"):
            write(self.path("a/" + stale), b"half")
        batch = ral.Batch()
        self.edit(batch, "a/x", b"x\n", 1)
        queued = [n for n in self.names("a") if n.startswith(".x.ral-tmp-")]
        self.assertEqual(len(queued), 1)
        self.assertNotEqual(queued, [".x.ral-tmp-0123456789ab"])
        self.edit(batch, "a/y", b"y\n", 2)
        self.assertNotIn(".y.ral-tmp-0123456789ab", self.names("a"))
        self.assertIn(queued[0], self.names("a"))
        self.assertEqual(batch.finish(), {})
        self.assertEqual(self.names("a"), ["x", "y"])

    def test_a_noop_batch_previews_and_creates_nothing(self):
        os.makedirs(self.path("a"))
        batch = ral.Batch(noop=True)
        self.edit(batch, "a/x", b"x\n", 1)
        self.assertEqual(batch.finish(), {})
        self.assertEqual(self.names("a"), [])


HOLDER = os.path.join(HERE, "..", "fixtures", "hold_lock.py")


class Locks(Sandbox):
    def hold(self, mode):
        os.makedirs(self.path("etc"), exist_ok=True)
        holder = subprocess.Popen(
            [sys.executable, "-I", "-S", HOLDER, self.path("etc/.pwd.lock"),
             "posix", mode],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.assertEqual(holder.stdout.readline(), "locked\n")
        self.addCleanup(lambda: (holder.stdin.close(), holder.wait(),
                                 holder.stdout.close()))
        return holder

    def test_a_held_lock_is_waited_for(self):
        holder = self.hold("until-waited-for")
        lock = ral.Lock.accounts(ral.Root())
        lock.acquire()
        lock.release()
        self.assertEqual(holder.stdout.readline(), "released\n")
        self.assertIn("waiting up to 15s for the lock", self.stderr.getvalue())
        self.assertIn("held by process %d" % holder.pid, self.stderr.getvalue())

    def test_the_wait_is_bounded_and_says_who_holds_it(self):
        holder = self.hold("forever")
        os.environ["RALSH_LOCK_TIMEOUT"] = "0.3"
        with self.assertRaises(ral.CallError) as caught:
            ral.Lock.accounts(ral.Root()).acquire()
        message = str(caught.exception)
        self.assertIn("timed out after 0.3s waiting for the lock", message)
        self.assertIn("etc/.pwd.lock', held by process %d" % holder.pid, message)
        self.assertIn("nothing was changed", message)

    def test_a_lock_file_that_is_a_link_is_refused(self):
        os.makedirs(self.path("etc"))
        write(self.path("victim"), b"keep\n")
        os.symlink(self.path("victim"), self.path("etc/.hosts.ral-lock"))
        target = ral.Root().file("etc/hosts")
        with self.assertRaises(ral.CallError):
            ral.Lock.beside(target).acquire()
        self.assertEqual(read(self.path("victim")), b"keep\n")


class Output(Sandbox):
    def capture(self, run):
        out = io.StringIO()
        saved = sys.stdout
        sys.stdout = out
        try:
            run()
        finally:
            sys.stdout = saved
        return out.getvalue()

    def test_lines_ral_could_not_read_are_left_out_of_a_listing(self):
        long_value = "x" * ral.LINE_MAX
        text = self.capture(lambda: ral.emit_simple(
            [("name", "a"), ("comment", long_value), ("ip", "10.0.0.1"),
             ("name", long_value), ("ip", "10.0.0.2"),
             ("name", "c"), ("ral_was", long_value)], ral.log))
        lines = text.splitlines()
        self.assertEqual(lines[:4], ["# simple", "name: a", "ip: 10.0.0.1", "name: c"])
        self.assertTrue(lines[4].startswith("ral_was: xxx") and lines[4].endswith("bytes]"))
        self.assertLess(len(lines[4]), ral.LINE_MAX)
        self.assertEqual(len(lines), 5)
        self.assertIn("comment is %d bytes long" % (ral.LINE_MAX + 9),
                      self.stderr.getvalue())

    def test_values_that_could_not_be_read_back_are_refused(self):
        ral.check_line_fits("h", "comment", "x" * 1000)
        with self.assertRaises(ral.UpdateError) as caught:
            ral.check_line_fits("h", "comment", "x" * 70000)
        self.assertIn("longer than the 65536 ral reads", str(caught.exception))
        with self.assertRaises(ral.UpdateError):
            ral.check_resource_fits({"name": "u", "comment": "x" * ral.RESOURCE_MAX})

    def test_a_structured_line_names_the_resource(self):
        ral.log.attribute_changed("web1", "ip", "10.0.0.1", "10.0.0.2", "updating")
        self.assertEqual(
            self.stderr.getvalue(),
            'info: ral_log {"resource": "web1", "context": "updating", '
            '"attribute": "ip", "old": "10.0.0.1", "new": "10.0.0.2"}\n')


class SimpleArgs(unittest.TestCase):
    def test_sensitive_values_come_from_the_variables_ral_names_only(self):
        environ = {"RALSH_SENSITIVE": "password token", "password": "s3 'x' $(id)",
                   "token": "", "comment": "stray", "PATH": "/bin"}
        args = ral.simple_args(["ral_action=update", "name='a b'", "shell=/bin/sh"],
                               environ)
        self.assertEqual(args, {"ral_action": "update", "name": "a b", "shell": "/bin/sh",
                                "password": "s3 'x' $(id)", "token": ""})
        # Without RALSH_SENSITIVE, no variable is an attribute.
        self.assertEqual(ral.simple_args(["ral_action=list"], {"password": "x"}),
                         {"ral_action": "list"})
        for argv, environ, message in [
                (["password=x"], {"RALSH_SENSITIVE": "password", "password": "y"},
                 "argument 'password' is given twice"),
                (["ral_action=update"], {"RALSH_SENSITIVE": "password"},
                 "RALSH_SENSITIVE names 'password', which is not in the environment")]:
            with self.assertRaises(ral.CallError) as caught:
                ral.simple_args(argv, environ)
            self.assertEqual(str(caught.exception), message)


class Requests(unittest.TestCase):
    def check(self, should, **options):
        return ral.check_should({"name": "a", "should": should},
                                ("name", "ensure", "size"), **options)

    def test_a_request_is_checked_before_anything_is_done(self):
        self.assertEqual(self.check({"ensure": "absent"}),
                         ("a", {"ensure": "absent"}, "absent"))
        for should, message in [
                ([], "'should' must be a JSON object"),
                ({"colour": 1}, "unknown attribute 'colour'"),
                ({"name": "b"}, "name: cannot rename 'a' to 'b'"),
                ({"ensure": "latest"}, 'ensure: "latest" is not one of present, absent')]:
            with self.assertRaises(ral.UpdateError) as caught:
                self.check(should)
            self.assertEqual(str(caught.exception), message)

    def test_read_only_attributes_and_free_ensure_values(self):
        with self.assertRaises(ral.UpdateError) as caught:
            self.check({"size": 3}, read_only=("size",))
        self.assertEqual(str(caught.exception), "size is read-only")
        self.assertEqual(self.check({"ensure": "1.2-3"}, ensures=None)[2], "1.2-3")


class Commands(Sandbox):
    def test_noop_skips_changes_but_runs_queries(self):
        marker = self.path("ran")
        commands = ral.Commands(noop=True)
        self.assertIsNone(commands.change(["touch", marker]))
        self.assertFalse(os.path.exists(marker))
        self.assertIn("noop: would run touch", self.stderr.getvalue())
        self.assertEqual(commands.query(["echo", "hi"]).stdout, "hi\n")

    def test_failures_quote_the_output_and_the_environment_is_scrubbed(self):
        os.environ["SECRET_TOKEN"] = "hunter2"
        result = ral.Commands().query(["sh", "-c", "env; echo oops >&2; exit 3"],
                                      stderr_level=None)
        self.assertEqual(result.status, 3)
        self.assertNotIn("hunter2", result.stdout)
        self.assertIn("LC_ALL=C", result.stdout)
        with self.assertRaises(ral.UpdateError) as caught:
            ral.Commands().change(["sh", "-c", "echo oops >&2; exit 3"],
                                  stderr_level=None)
        self.assertIn("failed (exit status 3):\noops", str(caught.exception))

    def test_a_hung_command_is_ended(self):
        result = ral.Commands().query(["sleep", "30"], timeout=0.2)
        self.assertIsNone(result.status)
        self.assertIn("did not finish within 0.2s", result.outcome())


class Package(unittest.TestCase):
    """The toolkit was one file, ral_provider.py; providers written on it
    keep working with the package."""

    # Every public name of the one-file toolkit.
    NAMES = """LINE_MAX RESOURCE_MAX LOCK_WAIT MAX_LINKS DEFAULT_PATH TEMP_TAG
        LOCK_TAG JOURNAL_TAG JOURNAL_MAX clean clean_lines quoted shown
        type_name has_control decode split_lines CallError UpdateError
        Missing os_error write_out emit error_entry check_resource_fits
        simple_line check_line_fits emit_simple emit_simple_error join_words
        Log log SENSITIVE_VAR simple_args read_request get_names set_request
        check_should each_update Root Dir Target read_journal Lock fsync_dir
        temp_name Edit Batch Result shown_command command_env Running
        Commands describe main""".split()

    def test_every_name_of_the_one_file_toolkit_is_at_the_top(self):
        missing = [name for name in self.NAMES if not hasattr(ral, name)]
        self.assertEqual(missing, [])
        self.assertLessEqual(set(self.NAMES), set(ral.__all__))

    def test_log_is_the_log_every_module_writes_to(self):
        # Not the submodule of the same name.
        self.assertIsInstance(ral.log, ral.Log)
        self.assertIs(ral.log, ral.files.log)
        self.assertIs(ral.log, ral.commands.log)
        self.assertIs(ral.log, ral.protocol.log)
        namespace = {}
        exec("from ral_provider import *", namespace)
        self.assertIs(namespace["log"], ral.log)


class Calls(Sandbox):
    """A whole call through run() (and the older main()): request on stdin,
    answer on stdout, as ral makes it."""

    def call(self, action, request, entry=None, argv=None, **actions):
        saved = sys.argv, sys.stdin, sys.stdout
        sys.argv = ["provider"] + (argv or ["ral_action=" + action])
        sys.stdin = io.TextIOWrapper(io.BytesIO(json.dumps(request).encode()))
        sys.stdout = io.StringIO()
        try:
            status = (entry or ral.run)(**actions)
            text = sys.stdout.getvalue()
        finally:
            sys.argv, sys.stdin, sys.stdout = saved
        self.assertEqual(status, 0)
        return text if argv else json.loads(text)

    def test_a_get_answers_what_it_returns_and_absent_for_the_rest(self):
        def get(names):
            self.assertEqual(names, ["a", "b", "c"])
            return [{"name": "c", "ensure": "present"},
                    {"name": "x", "ensure": "present"},
                    {"name": "a", "ensure": "present"}]
        # In the order asked, with what get added after.
        self.assertEqual(
            self.call("get", {"names": ["a", "b", "a", "c"]}, get=get),
            {"resources": [{"name": "a", "ensure": "present"},
                           {"name": "b", "ensure": "absent"},
                           {"name": "c", "ensure": "present"},
                           {"name": "x", "ensure": "present"}]})
        # All of them: as get gives them.
        self.assertEqual(self.call("get", {"names": []},
                                   get=lambda names: iter([{"name": "z"}])),
                         {"resources": [{"name": "z"}]})

    def test_a_refresh_answers_each_name_or_its_error(self):
        seen = []

        def refresh(name, attributes):
            seen.append((name, attributes, ral.noop()))
            if name == "bad":
                raise ral.UpdateError("cannot restart bad")
        request = {"ral": {"noop": False}, "refresh": [
            {"name": "web", "attributes": {"refresh_with": "reload"}},
            {"name": "bad", "attributes": {}}]}
        self.assertEqual(
            self.call("refresh", request, get=list, refresh=refresh),
            {"refreshed": [{"name": "web"}, {"name": "bad", "error": {
                "kind": "failed", "message": "cannot restart bad"}}]})
        self.assertEqual(seen, [("web", {"refresh_with": "reload"}, False),
                                ("bad", {}, False)])
        # A provider without refresh says so; a bad request is refused.
        answer = self.call("refresh", request, get=list)
        self.assertIn("unknown action 'refresh'", answer["error"]["message"])
        answer = self.call("refresh", {"refresh": [{"name": 5}]}, get=list,
                           refresh=refresh)
        self.assertIn("string 'name'", answer["error"]["message"])

    def test_noop_reaches_set_one_way_and_noop_changes_nothing(self):
        write(self.path("etc/hosts"), b"old\n")
        seen = []

        def set(updates):
            seen.append((updates, ral.noop(), ral.log.noop))
            target = ral.Root().file("etc/hosts")
            with ral.Edit(ral.Lock.beside(target), ral.noop()) as edit:
                edit.read(target)
                edit.write(target, b"new\n")
                edit.commit()
            return [{"name": "h", "content": {"is": "new", "was": "old"}}]
        updates = [{"name": "h", "is": {}, "should": {"content": "new"}}]
        answer = self.call("set", {"ral": {"noop": True}, "updates": updates},
                           get=list, set=set)
        self.assertEqual(seen, [(updates, True, True)])
        self.assertEqual(answer, {"changes": [
            {"name": "h", "content": {"is": "new", "was": "old"}}],
            "derive": False})
        self.assertEqual(read(self.path("etc/hosts")), b"old\n")
        self.assertEqual(self.names("etc"), ["hosts"])
        # Without noop the same set changes the file.
        seen.clear()
        self.call("set", {"updates": updates}, get=list, set=set)
        self.assertEqual(seen, [(updates, False, False)])
        self.assertEqual(read(self.path("etc/hosts")), b"new\n")

    def test_what_changes_things_learns_noop_from_the_call_when_not_told(self):
        write(self.path("etc/hosts"), b"old\n")
        made = []

        def set(updates):
            target = ral.Root().file("etc/hosts")
            # A provider that forgets to pass noop on.
            with ral.Edit(ral.Lock.beside(target)) as edit:
                edit.write(target, b"new\n")
                edit.commit()
            made.append((ral.Batch().noop, ral.Commands().noop,
                         ral.Edit(None, noop=False).noop))
            return []
        updates = [{"name": "h", "is": {}, "should": {"content": "new"}}]
        self.call("set", {"ral": {"noop": True}, "updates": updates},
                  get=list, set=set)
        self.assertEqual(read(self.path("etc/hosts")), b"old\n")
        self.assertEqual(self.names("etc"), ["hosts"])
        self.assertEqual(made, [(True, True, False)])
        self.call("set", {"updates": updates}, get=list, set=set)
        self.assertEqual(read(self.path("etc/hosts")), b"new\n")
        self.assertEqual(made[1], (False, False, False))

    def test_an_answer_ral_could_not_read_back_is_refused(self):
        big = {"name": "big", "comment": "x" * ral.RESOURCE_MAX}
        answer = self.call("get", {"names": []},
                           get=lambda names: [{"name": "a"}, big])
        self.assertEqual(answer["resources"][0], {"name": "a"})
        error = answer["resources"][1]["error"]
        self.assertEqual(answer["resources"][1]["name"], "big")
        self.assertIn("more than the %d it accepts" % ral.RESOURCE_MAX,
                      error["message"])
        answer = self.call("set", {"updates": []}, get=list,
                           set=lambda updates: [big])
        self.assertEqual(answer["derive"], False)
        self.assertIn("the report of this change (which was made)",
                      answer["changes"][0]["error"]["message"])

    def test_an_entry_with_bytes_that_are_not_utf8_fails_alone(self):
        # A link target or file name that is not UTF-8 reaches Python as
        # lone surrogates, which no UTF-8 answer can carry: that resource
        # fails, not the whole answer (as an internal error did).
        answer = self.call("get", {"names": ["a", "b"]}, get=lambda names: [
            {"name": "a", "target": "x\udcffy"}, {"name": "b"}])
        self.assertEqual(answer["resources"][1], {"name": "b"})
        self.assertEqual(answer["resources"][0]["name"], "a")
        self.assertIn("holds bytes that are not UTF-8",
                      answer["resources"][0]["error"]["message"])
        # In a listing, the name itself may be such: shown with U+FFFD.
        answer = self.call("get", {"names": []}, get=lambda names: [
            {"name": "n\udcff"}, {"name": "ok"}])
        self.assertEqual([r["name"] for r in answer["resources"]],
                         ["n\ufffd", "ok"])
        with self.assertRaises(ral.UpdateError) as caught:
            ral.check_resource_fits({"name": "a", "target": "x\udcffy"})
        self.assertIn("nothing was changed", str(caught.exception))

    def test_exceptions_become_the_conventions_errors(self):
        def refused(updates):
            raise ral.CallError("no such database", "forbidden")

        def buggy(names):
            return {}["oops"]
        self.assertEqual(
            self.call("set", {"updates": []}, get=list, set=refused),
            {"error": {"kind": "forbidden", "message": "no such database"}})
        self.assertEqual(
            self.call("get", {"names": []}, get=buggy),
            {"error": {"kind": "failed",
                       "message": "internal error: KeyError: 'oops'"}})
        # An answer that is not a list of named objects is a bug too.
        self.assertEqual(
            self.call("get", {"names": []}, get=lambda names: ["a"])["error"]
            ["message"], "internal error: TypeError: an answer entry must be "
            "an object with a string 'name', not a string")
        # A provider without set says so.
        self.assertIn("unknown action 'set': expected one of describe, get",
                      self.call("set", {"updates": []}, get=list)
                      ["error"]["message"])

    def test_the_older_main_still_works(self):
        seen = []

        def do_get(names):
            ral.emit({"resources": [{"name": n, "ensure": "absent"}
                                    for n in names]})

        def do_set(updates, noop):
            seen.append((noop, ral.noop()))
            ral.emit({"changes": [], "derive": False})
        actions = {"get": do_get, "set": do_set}
        self.assertEqual(
            self.call("get", {"names": ["x"]}, ral.main, json_actions=actions),
            {"resources": [{"name": "x", "ensure": "absent"}]})
        self.call("set", {"ral": {"noop": True}, "updates": []}, ral.main,
                  json_actions=actions)
        self.assertEqual(seen, [(True, True)])

        def update(args):
            seen.append(ral.noop())
            ral.emit_simple([("name", args["name"])])
        text = self.call(None, None, ral.main,
                         argv=["ral_action=update", "name=h", "ral_noop=true"],
                         simple_actions={"update": update})
        self.assertEqual(text, "# simple\nname: h\n")
        self.assertEqual(seen[-1], True)


if __name__ == "__main__":
    unittest.main(verbosity=2)
