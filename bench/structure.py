#!/usr/bin/env python3
"""Figures about the shape of the code, for before/after comparisons of a
restructuring: lines per module, the longest functions, and how many
library signatures still carry errors as bare strings.

Usage: bench/structure.py [--top N] [SRC_DIR]

A function's length is counted from its `fn` line to the line of its
closing brace, found by counting braces outside strings, chars and
comments: good enough for rustfmt-formatted code, which is all we have.
"""

import argparse
import os
import re
import sys

FN = re.compile(r"^\s*(?:pub(?:\([^)]*\))?\s+)?(?:const\s+)?(?:async\s+)?(?:unsafe\s+)?fn\s+(\w+)")
STRING_RESULT = re.compile(r"Result<[^;{]*?,\s*String>")


def rust_files(root):
    for dirpath, _, names in os.walk(root):
        for name in sorted(names):
            if name.endswith(".rs"):
                yield os.path.join(dirpath, name)


def code_only(line, state):
    """The line without comments, strings and chars; `state` carries a
    block comment or a multi-line string over to the next line."""
    out = []
    i = 0
    while i < len(line):
        c = line[i]
        if state["block"]:
            if line.startswith("*/", i):
                state["block"] = False
                i += 2
            else:
                i += 1
            continue
        if state["string"]:
            if c == "\\":
                i += 2
            elif c == '"':
                state["string"] = False
                i += 1
            else:
                i += 1
            continue
        if line.startswith("//", i):
            break
        if line.startswith("/*", i):
            state["block"] = True
            i += 2
            continue
        if c == '"':
            state["string"] = True
            i += 1
            continue
        if c == "'":
            # A char literal ('x', '\n', '{') or a lifetime ('a).
            m = re.match(r"'(\\.[^']*|[^\\'])'", line[i:])
            if m:
                i += len(m.group(0))
                continue
        out.append(c)
        i += 1
    return "".join(out)


def functions(path):
    """(name, first line, length) of every function body in the file."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    state = {"block": False, "string": False}
    found = []
    open_fns = []  # (name, start, depth at which its body opened)
    depth = 0
    pending = None  # a fn whose body has not opened yet
    nesting = 0  # open ( and [ of its signature
    for number, raw in enumerate(lines, 1):
        code = code_only(raw, state)
        m = FN.match(code)
        if m and pending is None:
            pending = (m.group(1), number)
            nesting = 0
        for c in code:
            if c == "{":
                if pending is not None and nesting == 0:
                    open_fns.append((pending[0], pending[1], depth))
                    pending = None
                depth += 1
            elif c == "}":
                depth -= 1
                if open_fns and open_fns[-1][2] == depth:
                    name, start, _ = open_fns.pop()
                    found.append((name, start, number - start + 1))
            elif c in "([" and pending is not None:
                nesting += 1
            elif c in ")]" and pending is not None:
                nesting -= 1
            elif c == ";" and pending is not None and nesting == 0:
                # A declaration without a body (in a trait).
                pending = None
    return found


def module_of(root, path):
    rel = os.path.relpath(path, root)
    parts = rel.split(os.sep)
    if parts[0] == "bin":
        return "/".join(parts[:2]) if len(parts) > 2 else rel
    return parts[0][:-3] if parts[0].endswith(".rs") else parts[0]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("src", nargs="?", default="src")
    args = parser.parse_args()

    modules = {}
    all_fns = []
    strings = {"library": 0, "binaries": 0}
    for path in rust_files(args.src):
        with open(path, encoding="utf-8") as f:
            text = f.read()
        module = module_of(args.src, path)
        modules[module] = modules.get(module, 0) + text.count("\n")
        side = "binaries" if module.startswith("bin") else "library"
        strings[side] += len(STRING_RESULT.findall(text))
        for name, start, length in functions(path):
            all_fns.append((length, os.path.relpath(path), start, name))

    print("## Lines per module")
    for module, count in sorted(modules.items(), key=lambda kv: -kv[1]):
        print(f"{count:7}  {module}")
    print(f"{sum(modules.values()):7}  total")
    print()
    print(f"## The {args.top} longest functions")
    for length, path, start, name in sorted(all_fns, reverse=True)[: args.top]:
        print(f"{length:5}  {path}:{start}  {name}")
    over = [f for f in all_fns if f[0] > 60 and not f[1].startswith(os.path.join(args.src, "bin"))]
    over_bin = [f for f in all_fns if f[0] > 60 and f[1].startswith(os.path.join(args.src, "bin"))]
    print()
    print(f"functions over 60 lines: {len(over)} in the library, {len(over_bin)} in the binaries")
    print()
    print("## `Result<_, String>` (errors as bare text)")
    print(f"library: {strings['library']}, binaries: {strings['binaries']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
