#!/usr/bin/env python3
"""Figures about the shape of the code, for before/after comparisons of a
restructuring: lines per module, the longest functions, and how many
signatures still carry errors as bare strings (and which public library
functions do).

Usage: bench/structure.py [--top N] [SRC_DIR]

A function's length is counted from its `fn` line to the line of its
closing brace, found by counting braces outside strings, chars and
comments: good enough for rustfmt-formatted code, which is all we have.

A public function returning `Result<_, String>` is a `pub fn` (not
`pub(crate)` or `pub(super)`), or a method declared in a `pub trait`,
whose return type holds a `Result` whose error is `String` (also nested,
as in `Option<Result<_, String>>`); its signature may span lines. Test
code (`#[cfg(test)]` modules, `tests.rs` and `tests/` files) is left out.
"""

import argparse
import os
import re
import sys

FN = re.compile(r"^\s*(?:pub(?:\([^)]*\))?\s+)?(?:const\s+)?(?:async\s+)?(?:unsafe\s+)?fn\s+(\w+)")
STRING_RESULT = re.compile(r"Result<[^;{]*?,\s*String>")
# What decides, in code without comments and strings, whether a function
# is public and whether it is test code.
ITEM = re.compile(
    r"#\[cfg\(test\)\]"
    r"|(?P<vis>\bpub\b(?:\s*\([^)]*\))?\s+)?(?:(?:const|async|unsafe)\s+)*\b(?P<kw>fn)\s+(?P<fn>\w+)"
    r"|(?P<tvis>\bpub\b(?:\s*\([^)]*\))?\s+)?(?:unsafe\s+)?\btrait\s+\w+"
    r"|[{};]"
)
RESULT_OPEN = re.compile(r"\bResult\s*<")


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


def code_text(path):
    """The file's code without comments, strings and chars, lines kept."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    state = {"block": False, "string": False}
    return "\n".join(code_only(line, state) for line in lines)


def signature_end(code, start):
    """Where a signature starting at `start` ends: its body's `{` or the
    `;` of a declaration, outside parentheses and brackets."""
    nesting = 0
    for i in range(start, len(code)):
        c = code[i]
        if c in "([":
            nesting += 1
        elif c in ")]":
            nesting -= 1
        elif c in "{;" and nesting == 0:
            return i
    return len(code)


def closing(text, start, opener, closer):
    """The index just past the `closer` matching the `opener` at `start`."""
    depth = 0
    for i in range(start, len(text)):
        if text[i] == opener:
            depth += 1
        elif text[i] == closer:
            depth -= 1
            if depth == 0:
                return i + 1
    return len(text)


def top_level_args(text):
    """The comma-separated arguments of a generic's `<...>` contents."""
    args, depth, current = [], 0, []
    for c in text:
        if c in "<([":
            depth += 1
        elif c in ">)]":
            depth -= 1
        if c == "," and depth == 0:
            args.append("".join(current))
            current = []
        else:
            current.append(c)
    args.append("".join(current))
    return [a.strip() for a in args if a.strip()]


def return_type(signature):
    """The return type of `fn name<...>(...) -> T where ...`, or ""."""
    # `->` would count as a closing angle bracket.
    sig = signature.replace("->", "\x00")
    name_end = re.match(r"\s*fn\s+\w+\s*", sig).end()
    i = closing(sig, name_end, "<", ">") if sig.startswith("<", name_end) else name_end
    params = sig.find("(", i)
    if params < 0:
        return ""
    rest = sig[closing(sig, params, "(", ")") :].lstrip()
    if not rest.startswith("\x00"):
        return ""
    ret = re.split(r"\bwhere\b", rest[1:])[0]
    return ret.replace("\x00", "->").strip()


def errs_as_string(ret):
    """True when a `Result` in the return type has `String` as its error."""
    text = ret.replace("->", "\x00")
    for m in RESULT_OPEN.finditer(text):
        inner = text[m.end() : closing(text, m.end() - 1, "<", ">") - 1]
        args = top_level_args(inner)
        if len(args) == 2 and args[1] in ("String", "std::string::String"):
            return True
    return False


def is_test_file(path):
    parts = path.split(os.sep)
    return parts[-1] == "tests.rs" or "tests" in parts[:-1]


def public_string_results(path):
    """(line, name, return type) of each public function whose return type
    carries its error as a `String`."""
    if is_test_file(path):
        return []
    code = code_text(path)
    found = []
    blocks = []  # "test", "pub trait" or "" for each open brace
    next_block = ""
    test_item = False  # a `#[cfg(test)]` waits for its item
    pos = 0
    while True:
        m = ITEM.search(code, pos)
        if not m:
            return found
        pos = m.end()
        token = m.group(0)
        if token == "#[cfg(test)]":
            test_item = True
        elif m.group("fn"):
            end = signature_end(code, m.start("kw"))
            sig = code[m.start("kw") : end]
            vis = (m.group("vis") or "").strip()
            public = vis == "pub" or (not vis and blocks and blocks[-1] == "pub trait")
            in_test = test_item or "test" in blocks
            ret = return_type(sig)
            if public and not in_test and errs_as_string(ret):
                line = code.count("\n", 0, m.start("fn")) + 1
                found.append((line, m.group("fn"), " ".join(ret.split())))
            # Resume at the body's brace, which opens the function's block.
            pos = end
            next_block = "test" if in_test else ""
            test_item = False
        elif "trait" in token:
            tvis = (m.group("tvis") or "").strip()
            next_block = "pub trait" if tvis == "pub" else ""
        elif token == "{":
            blocks.append("test" if test_item or next_block == "test" or "test" in blocks else next_block)
            next_block = ""
            test_item = False
        elif token == "}":
            if blocks:
                blocks.pop()
        elif token == ";":
            next_block = ""
            test_item = False


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
    public = []
    for path in rust_files(args.src):
        with open(path, encoding="utf-8") as f:
            text = f.read()
        module = module_of(args.src, path)
        modules[module] = modules.get(module, 0) + text.count("\n")
        side = "binaries" if module.startswith("bin") else "library"
        strings[side] += len(STRING_RESULT.findall(text))
        if side == "library":
            for line, name, ret in public_string_results(path):
                public.append((os.path.relpath(path), line, name, ret))
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
    print(f"anywhere (private helpers and tests too): library: {strings['library']}, binaries: {strings['binaries']}")
    print(f"public library functions returning it: {len(public)}")
    for path, line, name, ret in public:
        print(f"  {path}:{line}  {name} -> {ret}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
