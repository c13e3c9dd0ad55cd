#!/usr/bin/env python3
"""One section of BENCHMARKS.md, as a bench script writes it.

Every bench script that reports figures writes its own section file,
bench/sections/NAME.md, and then has bench/assemble.py rebuild
BENCHMARKS.md from all of them; so one script refreshes only its own
section and the file stays whole. The section says where its figures come
from: the script, the date (UTC), the commit, the machine and how busy it
was when the script started.

From Python (the header is taken when the Section is made, so make it
before measuring):

    section = Section("plan_scale", "Planning time", "bench/plan_scale.py")
    ...
    section.write(body)           # the tables and computed sentences

From a shell script:

    HEADER=$(python3 bench/section.py header bench/run.sh)   # at the start
    ...
    python3 bench/section.py write run "Title" bench/run.sh "$HEADER" < body

`write` puts the section in bench/sections/NAME.md and runs the assembler.
"""

import os
import platform
import subprocess
import sys
from datetime import datetime, timezone

BENCH = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(BENCH)
SECTIONS = os.path.join(BENCH, "sections")


def _commit():
    """The short hash of HEAD, and a warning when the sources differ from
    it (figures from uncommitted code cannot be traced to a commit). The
    sections and BENCHMARKS.md themselves do not count: they are what a
    run writes."""
    def git(*args):
        return subprocess.run(["git", "-C", ROOT] + list(args), capture_output=True,
                              text=True).stdout.strip()
    rev = git("rev-parse", "--short", "HEAD") or "unknown"
    dirty = git("status", "--porcelain", "--untracked-files=no", "--", ".",
                ":!bench/sections", ":!BENCHMARKS.md")
    return rev + (" with uncommitted changes" if dirty else "")


def _cpu():
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def _load():
    try:
        with open("/proc/loadavg") as handle:
            return handle.read().split()[0]
    except (OSError, IndexError):
        return "unknown"


def header(script):
    """The line saying which script wrote the figures, when, from which
    commit, on which machine, and the 1-minute load average now."""
    return ("Written by `%s` on %s, commit %s, on %s (%d CPUs), %s %s; "
            "load average %s at the start." % (
                script, datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                _commit(), _cpu(), os.cpu_count() or 0, platform.system(),
                platform.release(), _load()))


def write(name, title, script, head, body):
    """Writes bench/sections/NAME.md (heading, header line, body) and
    rebuilds BENCHMARKS.md."""
    text = "## %s (`%s`)\n\n%s\n\n%s\n" % (title, script, head, body.strip("\n"))
    os.makedirs(SECTIONS, exist_ok=True)
    path = os.path.join(SECTIONS, name + ".md")
    with open(path + ".tmp", "w") as handle:
        handle.write(text)
    os.replace(path + ".tmp", path)
    sys.path.insert(0, BENCH)
    import assemble
    try:
        assemble.write()
    except assemble.Broken as error:
        sys.exit("assemble: %s" % error)
    print("bench: wrote %s and BENCHMARKS.md" % os.path.relpath(path, ROOT),
          file=sys.stderr)


class Section:
    """A section whose header is taken now, before the measurements."""

    def __init__(self, name, title, script):
        self.name, self.title, self.script = name, title, script
        self.head = header(script)

    def write(self, body):
        write(self.name, self.title, self.script, self.head, body)


def main(argv):
    if len(argv) == 2 and argv[0] == "header":
        print(header(argv[1]))
    elif len(argv) == 5 and argv[0] == "write":
        write(argv[1], argv[2], argv[3], argv[4], sys.stdin.read())
    else:
        sys.exit("usage: section.py header SCRIPT\n"
                 "       section.py write NAME TITLE SCRIPT HEADER < BODY")


if __name__ == "__main__":
    main(sys.argv[1:])
