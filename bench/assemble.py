#!/usr/bin/env python3
"""Builds BENCHMARKS.md from the sections the bench scripts write.

BENCHMARKS.md is a short fixed introduction, then each section of
bench/sections/NAME.md in the order of ORDER, each followed by its
hand-written bench/notes/NAME.md if there is one. Every bench script runs
this at its end (through bench/section.py), so a script refreshes its own
section and the others stay as they were.

    python3 bench/assemble.py           # rewrite BENCHMARKS.md
    python3 bench/assemble.py --check   # exit 1 if BENCHMARKS.md is not
                                        # what the sections assemble to

Both refuse (exit 1) a section file that is not in ORDER (it would be left
out), a section without its "Written by" or "Carried
over" line, and notes that state figures: the figures come from scripts
only, so a digit in notes is allowed only inside a `code span`. The check
also refuses a missing section, which a rewrite leaves out with a warning.
"""

import os
import re
import sys

BENCH = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(BENCH)
SECTIONS = os.path.join(BENCH, "sections")
NOTES = os.path.join(BENCH, "notes")
OUTPUT = os.path.join(ROOT, "BENCHMARKS.md")

# The sections in the order BENCHMARKS.md shows them: name, and the script
# that writes it.
ORDER = [
    ("run", "bench/run.sh"),
    ("run_puppet", "bench/run.sh"),
    ("startup", "bench/startup.py"),
    ("native", "bench/native.py"),
    ("plan", "bench/plan.sh"),
    ("plan_engine", "bench/plan.sh"),
    ("plan_scale", "bench/plan_scale.py"),
    ("plan_memory", "bench/plan_memory.py"),
    ("templating", "bench/templating.py"),
    ("plugins", "bench/plugins.py"),
    ("plugins_fanout", "bench/plugins.py"),
    ("remote", "bench/remote.py"),
    ("fleet", "bench/fleet.py"),
    ("agent", "bench/agent.py"),
    ("facts", "bench/facts.py"),
    ("puppet_parity", "bench/puppet_parity.py"),
    ("parsers", "bench/criterion.py"),
    ("scheduler", "bench/criterion.py"),
    ("instructions", "bench/instructions.py"),
    ("build", "bench/build.py"),
]

INTRO = """\
# Benchmarks

Each section below is written by the bench script its heading names, and
only by it: the line under the heading says when (UTC), from which commit,
on which machine, and how busy the machine was (its load average when the
script started; the machine is shared with builds, so compare figures
within one section rather than across sections). A section whose line says
"Carried over" was not re-run at the last regeneration, for the reason it
gives. The paragraphs after a section's figures are hand-written
interpretation and state no figures of their own. `bench/README.md` says
how to run each script.
"""


class Broken(Exception):
    pass


def _read(path):
    with open(path) as handle:
        return handle.read()


def _check_notes(name, text):
    # Code spans may hold digits (an option, a key type); prose may not.
    prose = re.sub(r"`[^`]*`", "", text)
    found = re.search(r"[0-9]", prose)
    if found:
        line = prose[:found.start()].count("\n") + 1
        raise Broken("bench/notes/%s.md, line %d: notes state no figures "
                     "(a digit outside a `code span`)" % (name, line))


def _check_section(name, script, text):
    lines = text.split("\n")
    if not lines[0].startswith("## ") or not lines[0].endswith("(`%s`)" % script):
        raise Broken("bench/sections/%s.md: must begin with '## Title (`%s`)'"
                     % (name, script))
    if len(lines) < 3 or not (lines[2].startswith("Written by `%s` on " % script)
                              or lines[2].startswith("Carried over from the run of ")):
        raise Broken("bench/sections/%s.md: its third line must say 'Written by `%s` "
                     "on ...' or 'Carried over from the run of ...'" % (name, script))


def assemble(strict=True):
    """BENCHMARKS.md's text, from the sections and notes. Not STRICT, a
    missing section is left out with a warning (a first run of one script
    on a fresh tree); the check then fails until every script has run."""
    known = {name for name, _ in ORDER}
    for directory, what in ((SECTIONS, "section"), (NOTES, "notes")):
        if not os.path.isdir(directory):
            continue
        for entry in sorted(os.listdir(directory)):
            if entry.endswith(".md") and entry[:-3] not in known:
                raise Broken("bench/%s/%s: a %s not in bench/assemble.py's ORDER "
                             "would be left out" % (os.path.basename(directory), entry,
                                                    what))
    parts = [INTRO]
    for name, script in ORDER:
        path = os.path.join(SECTIONS, name + ".md")
        if not os.path.exists(path):
            if strict:
                raise Broken("bench/sections/%s.md is missing (run %s)" % (name, script))
            print("assemble: bench/sections/%s.md is missing (run %s); left out"
                  % (name, script), file=sys.stderr)
            continue
        text = _read(path).strip("\n")
        _check_section(name, script, text)
        parts.append(text + "\n")
        notes = os.path.join(NOTES, name + ".md")
        if os.path.exists(notes):
            text = _read(notes).strip("\n")
            _check_notes(name, text)
            parts.append("*Notes (hand-written, `bench/notes/%s.md`):*\n\n%s\n" % (name, text))
    return "\n".join(parts)


def write():
    text = assemble(strict=False)
    with open(OUTPUT + ".tmp", "w") as handle:
        handle.write(text)
    os.replace(OUTPUT + ".tmp", OUTPUT)


def main(argv):
    try:
        if argv == ["--check"]:
            current = _read(OUTPUT) if os.path.exists(OUTPUT) else ""
            if current != assemble():
                sys.exit("BENCHMARKS.md is not what bench/sections and bench/notes "
                         "assemble to: run python3 bench/assemble.py (and never "
                         "edit BENCHMARKS.md by hand)")
        elif argv == []:
            write()
        else:
            sys.exit("usage: assemble.py [--check]")
    except Broken as error:
        sys.exit("assemble: %s" % error)


if __name__ == "__main__":
    main(sys.argv[1:])
