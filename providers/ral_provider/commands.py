"""Running commands the way a provider should: argv only, a scrubbed
environment, a time limit, output kept for the caller and logged, and
changes skipped under noop with a log line saying what would have run."""

import os
import shlex
import time

from .errors import UpdateError
from .log import log
from .text import clean

DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


class Result:
    """How a command ended: STATUS (None when it did not run or finish),
    PROBLEM (why not), and the tail of its STDOUT and STDERR as text."""

    TAIL_BYTES = 16384

    def __init__(self, argv):
        self.argv = argv
        self.status = None
        self.problem = None
        self.stdout = ""
        self.stderr = ""

    @property
    def ok(self):
        return self.status == 0

    def outcome(self):
        return self.problem or "exit status %d" % self.status

    def tail(self, lines=5):
        """': ' and the last LINES lines of stderr (or of stdout when stderr
        is empty), or ' (no output)'."""
        for text in (self.stderr, self.stdout):
            kept = [clean(line.strip()) for line in text.splitlines()
                    if line.strip()]
            if kept:
                return ":\n" + "\n".join(kept[-lines:])
        return " (no output)"

    def failure(self, what=None):
        return "%s failed (%s)%s" % (what or shown_command(self.argv),
                                     self.outcome(), self.tail())


def shown_command(argv):
    return " ".join(shlex.quote(clean(arg)) for arg in argv)


def _capture_file():
    """An anonymous file for a command's output: it needs no draining, and
    a daemon the command leaves holding it holds up nobody."""
    try:
        return os.fdopen(os.memfd_create("ral-command", os.MFD_CLOEXEC), "w+b")
    except (AttributeError, OSError):
        import tempfile
        return tempfile.TemporaryFile()


def _read_back(fh, keep):
    """The last KEEP bytes written to FH (all of them when KEEP is None)."""
    try:
        size = fh.seek(0, os.SEEK_END)
        fh.seek(0 if keep is None else max(0, size - keep))
        data = fh.read()
    except (OSError, ValueError):
        data = b""
    finally:
        fh.close()
    return data.decode("utf-8", "replace")


def command_env(extra=None):
    """The scrubbed environment of commands: PATH and HOME as ralsh gave
    them, the C locale, and EXTRA."""
    env = {"PATH": os.environ.get("PATH") or DEFAULT_PATH,
           "HOME": os.environ.get("HOME") or "/",
           "LANG": "C", "LC_ALL": "C"}
    env.update(extra or {})
    return env


class Running:
    """A command started by Commands.start; finish() waits for it."""

    def __init__(self, argv, env, timeout, pass_fds, stderr_level,
                 output_limit, quiet):
        import subprocess
        self.subprocess = subprocess
        self.result = Result(argv)
        self.timeout = timeout
        self.stderr_level = stderr_level
        self.output_limit = output_limit
        self.quiet = quiet
        self.out = _capture_file()
        self.err = _capture_file()
        try:
            self.proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=self.out, stderr=self.err,
                cwd="/", env=command_env(env), close_fds=True,
                pass_fds=pass_fds)
        except OSError as err:
            self.proc = None
            self.result.problem = "could not be run: %s" % (err.strerror or err)
        self.deadline = time.monotonic() + timeout

    def finish(self):
        result = self.result
        if self.proc is not None:
            try:
                result.status = self.proc.wait(
                    max(0.0, self.deadline - time.monotonic()))
            except self.subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                result.problem = "did not finish within %gs" % self.timeout
            else:
                if result.status < 0:
                    result.problem = "was killed by signal %d" % -result.status
                    result.status = None
        result.stdout = _read_back(self.out, self.output_limit)
        result.stderr = _read_back(self.err, self.output_limit)
        command = os.path.basename(result.argv[0])
        for line in [] if self.quiet else result.stdout.splitlines()[-20:]:
            log.debug("%s: %s" % (command, line))
        if self.stderr_level:
            for line in result.stderr.splitlines()[-20:]:
                log.line(self.stderr_level, "%s: %s" % (command, line))
        return result


class Commands:
    """Runs commands the way a provider should: argv only (never a shell),
    stdin from /dev/null, '/' as the working directory, the scrubbed
    environment of command_env, and a time limit. Output is kept (its
    last 16 KiB) for the caller; stdout is logged at debug and stderr at
    warn (STDERR_LEVEL None: not logged), as the Resource API does; a
    command whose output is data keeps all of it (OUTPUT_LIMIT None).

    Under noop, change() does not run the command; it logs what would have
    run and returns None. query() always runs: use it for commands that
    only read. NOOP left out (None) is the call's noop()."""

    def __init__(self, noop=None):
        self.noop = log.noop_or(noop)

    def start(self, argv, env=None, timeout=120, pass_fds=(),
              stderr_level="warn", output_limit=Result.TAIL_BYTES,
              quiet=False):
        """Starts ARGV; ENV is added to the scrubbed environment. Of the
        output, the last OUTPUT_LIMIT bytes are kept (None: all of it, for
        a command whose output is data). QUIET logs nothing of it (for a
        query whose output the caller parses, and quotes if it fails)."""
        if not quiet:
            log.debug("running %s" % shown_command(argv))
        return Running(list(argv), env, timeout, pass_fds,
                       None if quiet else stderr_level, output_limit, quiet)

    def query(self, argv, check=False, error=UpdateError, **options):
        """Runs ARGV and returns its Result; with CHECK, a failure raises
        ERROR quoting the command's output."""
        result = self.start(argv, **options).finish()
        if check and not result.ok:
            raise error(result.failure())
        return result

    def change(self, argv, check=True, error=UpdateError, **options):
        """Runs ARGV unless noop is in effect (then logs it and returns
        None); with CHECK, a failure raises ERROR."""
        if self.noop:
            log.info("noop: would run %s" % shown_command(argv))
            return None
        return self.query(argv, check=check, error=error, **options)
