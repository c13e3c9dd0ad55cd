#!/usr/bin/env python3
"""The shape of the code, for the before and after of a restructuring:
files per layer, circles of files that import each other, hand-written
`unsafe` blocks, and the functions over the length limits.

Usage: bench/shape.py [--json] [--list]

- A *circle* is a set of two or more files of one crate each reaching the
  others through the paths they use (`crate::a::b`, `super::x`, grouped
  `use` trees), a path to a module's name counting as a use of the file
  that defines it (or that a re-export points at). Test code is left out:
  `#[cfg(test)]` modules, inline or in their own files.
- A function's length counts its lines of code only (no blank or comment
  lines), from its `fn` line to its closing brace, test code left out.
  The limits are 80 lines in the libraries and 60 in the binaries.
- `unsafe` blocks are counted outside test code; `unsafe fn` and
  `unsafe impl` are not blocks.

Every crate of the workspace is read: `src/` (the `ral` library and its
binaries under `src/bin/`) and each `crates/*/src/`.
"""

import argparse
import json
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FN = re.compile(r"^\s*(?:pub(?:\([^)]*\))?\s+)?(?:const\s+)?(?:async\s+)?(?:unsafe\s+)?(?:extern\s+\"C\"\s+)?fn\s+(\w+)")
MOD_DECL = re.compile(r"^\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;")
MOD_INLINE = re.compile(r"^\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*\{")
PATH_ATTR = re.compile(r'#\[path\s*=\s*"([^"]+)"\]')
LIMITS = {"library": 80, "binary": 60}


def strip(text):
    """The text with comments, strings and chars blanked (newlines kept),
    so that braces and paths are only the code's."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            i = j
            continue
        if text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append("".join("\n" if ch == "\n" else " " for ch in text[i:j]))
            i = j
            continue
        m = re.match(r'(b?r)(#*)"', text[i:i + 20]) if c in "rb" and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")) else None
        if m:
            end = '"' + m.group(2)
            j = text.find(end, i + len(m.group(0)))
            j = n if j < 0 else j + len(end)
            out.append('""' + "".join("\n" for ch in text[i:j] if ch == "\n"))
            i = j
            continue
        if c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            seg = text[i:j + 1]
            out.append('""' + "\n" * seg.count("\n"))
            i = j + 1
            continue
        if c == "'":
            m = re.match(r"'(\\(?:u\{[0-9a-fA-F]+\}|x..|.)|[^\\'\n])'", text[i:i + 12])
            if m:
                out.append("' '")
                i += len(m.group(0))
                continue
        out.append(c)
        i += 1
    return "".join(out)


def block_end(code, start):
    """The index just after the brace block opening at or after `start`."""
    depth = 0
    i = code.index("{", start)
    while i < len(code):
        if code[i] == "{":
            depth += 1
        elif code[i] == "}":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return len(code)


def without_tests(code):
    """The code with every `#[cfg(test)]` item blanked, and the names of
    the test modules it declares in files of their own."""
    test_files = []
    out = code
    for m in reversed(list(re.finditer(r"#\[cfg\(test\)\]", code))):
        rest = code[m.end():]
        decl = re.match(r"\s*(?:#\[[^\]]*\]\s*)*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;", rest)
        if decl:
            test_files.append(decl.group(1))
            end = m.end() + decl.end()
        else:
            semi = rest.find(";")
            brace = rest.find("{")
            if brace < 0 or (0 <= semi < brace):
                end = m.end() + (semi + 1 if semi >= 0 else 0)
            else:
                end = block_end(code, m.end())
        out = out[:m.start()] + "".join("\n" if ch == "\n" else " " for ch in out[m.start():end]) + out[end:]
    return out, test_files


class Crate:
    def __init__(self, name, kind, root_file):
        self.name, self.kind, self.root_file = name, kind, root_file
        self.files = {}  # module path tuple -> file
        self.code = {}  # file -> code without comments, strings, tests
        self.tests = set()
        self.load(root_file, ())

    def load(self, path, module):
        with open(path, encoding="utf-8") as f:
            code, test_mods = without_tests(strip(f.read()))
        self.files[module] = path
        self.code[path] = code
        here = os.path.dirname(path)
        base = os.path.basename(path)
        own_dir = here if base in ("mod.rs", "lib.rs", "main.rs") else os.path.join(here, base[:-3])
        raw = open(path, encoding="utf-8").read()
        for m in re.finditer(r"^[ \t]*(?:#\[[^\n]*\]\s*)*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;", code, re.M):
            name = m.group(1)
            if name in test_mods:
                continue
            attr = PATH_ATTR.search(raw[max(0, m.start() - 200):m.end()])
            candidates = [os.path.join(here, attr.group(1))] if attr else [
                os.path.join(own_dir, name + ".rs"), os.path.join(own_dir, name, "mod.rs")]
            for c in candidates:
                if os.path.exists(c):
                    self.load(c, module + (name,))
                    break


def use_paths(code):
    """Every path the code names that starts at `crate`, `super` or
    `self`, with grouped `use` trees expanded."""
    paths = []
    for m in re.finditer(r"\buse\s+([^;]+);", code):
        paths += expand_tree(re.sub(r"\s+", "", m.group(1)))
    for m in re.finditer(r"\b((?:crate|super|self)(?:::\w+)+)", code):
        paths.append(m.group(1))
    return paths


def expand_tree(tree):
    depth = 0
    for i, c in enumerate(tree):
        if c == "{":
            if depth == 0:
                head, inner = tree[:i], tree[i + 1:tree.rindex("}")]
                parts, cur, d = [], "", 0
                for ch in inner:
                    if ch == "," and d == 0:
                        parts.append(cur)
                        cur = ""
                        continue
                    d += ch == "{"
                    d -= ch == "}"
                    cur += ch
                parts.append(cur)
                out = []
                for p in parts:
                    if p:
                        out += [head + q for q in expand_tree(p)]
                return out
            depth += 1
    return [re.sub(r"\bas\w+$", "", tree.split(" as ")[0])]


def absolute(module, path):
    parts = path.split("::")
    if parts[0] == "crate":
        return tuple(parts[1:])
    cur = list(module)
    while parts and parts[0] in ("super", "self"):
        if parts[0] == "super":
            cur = cur[:-1]
        parts = parts[1:]
    return tuple(cur + parts)


def reexports(crate):
    """(module, name) -> the absolute path a `pub use` there points at."""
    out = {}
    for module, path in crate.files.items():
        for m in re.finditer(r"\bpub(?:\([^)]*\))?\s+use\s+([^;]+);", crate.code[path]):
            for p in expand_tree(re.sub(r"\s+", "", m.group(1))):
                p = p.replace("::self", "")
                target = absolute(module, p) if p.split("::")[0] in ("crate", "super", "self") else module + tuple(p.split("::"))
                out[(module, target[-1])] = target
    return out


def resolve(crate, target, exports, seen=0):
    """The file a path lands in: the longest module prefix, following a
    re-export of the name after it."""
    for k in range(len(target), -1, -1):
        if target[:k] in crate.files:
            module = target[:k]
            if k < len(target) and (module, target[k]) in exports and seen < 8:
                again = exports[(module, target[k])] + target[k + 1:]
                if again != target:
                    return resolve(crate, again, exports, seen + 1)
            if k == 0 and target and (target[0],) not in crate.files and (module, target[0]) not in exports:
                # A path through the root to another crate (`crate::sdk`,
                # the SDK's crate re-exported): no file of this one.
                return None
            return crate.files[module]
    return None


def circles(crate):
    exports = reexports(crate)
    edges = {path: set() for path in crate.code}
    for module, path in crate.files.items():
        for p in use_paths(crate.code[path]):
            target = absolute(module, p)
            if target[:1] == ("crate",):
                continue
            found = resolve(crate, target, exports)
            # A module's use of its own children is how Rust declares
            # them; only a child's use of its parent can close a circle.
            if found and found != path:
                edges[path].add(found)
    # Tarjan's strongly connected components.
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out, edges


def functions(code):
    """(name, first line, lines of code) of every function body."""
    lines = code.split("\n")
    found, open_fns, depth, pending, nesting = [], [], 0, None, 0
    counted = [0]  # lines of code so far, by line number
    for line in lines:
        counted.append(counted[-1] + (1 if line.strip() else 0))
    for number, line in enumerate(lines, 1):
        m = FN.match(line)
        if m and pending is None:
            pending, nesting = (m.group(1), number), 0
        for c in line:
            if c == "{":
                if pending is not None and nesting == 0:
                    open_fns.append((pending[0], pending[1], depth))
                    pending = None
                depth += 1
            elif c == "}":
                depth -= 1
                if open_fns and open_fns[-1][2] == depth:
                    name, start, _ = open_fns.pop()
                    found.append((name, start, counted[number] - counted[start - 1]))
            elif c in "([" and pending is not None:
                nesting += 1
            elif c in ")]" and pending is not None:
                nesting -= 1
            elif c == ";" and pending is not None and nesting == 0:
                pending = None
    return found


def crates():
    out = [Crate("ral", "library", os.path.join(ROOT, "src", "lib.rs"))]
    bins = os.path.join(ROOT, "src", "bin")
    for name in sorted(os.listdir(bins)):
        main = os.path.join(bins, name, "main.rs")
        if os.path.exists(main):
            out.append(Crate(name, "binary", main))
    members = os.path.join(ROOT, "crates")
    if os.path.isdir(members):
        for name in sorted(os.listdir(members)):
            lib = os.path.join(members, name, "src", "lib.rs")
            if os.path.exists(lib):
                out.append(Crate(name, "library", lib))
            bin_dir = os.path.join(members, name, "src", "bin")
            if os.path.isdir(bin_dir):
                for b in sorted(os.listdir(bin_dir)):
                    main = os.path.join(bin_dir, b, "main.rs")
                    if os.path.exists(main):
                        out.append(Crate(b, "binary", main))
    return out


def rel(path):
    return os.path.relpath(path, ROOT)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--list", action="store_true", help="name every circle and long function")
    args = parser.parse_args()

    report = {"crates": {}, "circles": [], "long_functions": [], "unsafe_blocks": 0}
    for crate in crates():
        lines = sum(open(p, encoding="utf-8").read().count("\n") for p in crate.code)
        report["crates"]["%s (%s)" % (crate.name, crate.kind)] = {"kind": crate.kind, "files": len(crate.code), "lines": lines}
        comps, _ = circles(crate)
        report["circles"] += [[rel(p) for p in c] for c in comps]
        for path, code in crate.code.items():
            report["unsafe_blocks"] += len(re.findall(r"\bunsafe\s*\{", code))
            for name, start, length in functions(code):
                if length > LIMITS[crate.kind]:
                    report["long_functions"].append((length, "%s:%d" % (rel(path), start), name))
    report["long_functions"].sort(reverse=True)
    layers = {}
    for path in sorted(p for c in crates() if c.kind == "library" for p in c.code):
        r = rel(path).split(os.sep)
        key = "/".join(r[:3]) if r[0] == "crates" else (r[1] if len(r) > 2 else "(top of src/)")
        layers[key] = layers.get(key, 0) + 1
    report["files_per_folder"] = layers
    if args.json:
        json.dump(report, sys.stdout, indent=1)
        print()
        return 0
    for name, c in report["crates"].items():
        print("crate %-24s %4d files %7d lines" % (name, c["files"], c["lines"]))
    print("library files per folder:", ", ".join("%s %d" % kv for kv in report["files_per_folder"].items()))
    print("circles: %d" % len(report["circles"]))
    if args.list:
        for c in report["circles"]:
            print("  " + " <-> ".join(c))
    print("unsafe blocks outside tests: %d" % report["unsafe_blocks"])
    print("functions over the limits (80 library, 60 binaries): %d" % len(report["long_functions"]))
    if args.list:
        for length, where, name in report["long_functions"]:
            print("  %4d  %s  %s" % (length, where, name))
    return 0


if __name__ == "__main__":
    sys.exit(main())
