"""The calling conventions: reading a call (simple: `KEY=VALUE`
arguments; json: one document on stdin), whether it is noop, writing the
answer within the sizes ral reads back, and mapping errors to the
convention's (`ral_error`, json error kinds, `internal error` for a bug).

A json provider writes get(names) and set(updates) and hands them to
run(); the older main(json_actions=..., simple_actions=...) still works."""

import json
import os
import shlex
import sys

from .errors import CallError, UpdateError, os_error
from .log import log
from .text import clean, clean_lines, quoted, type_name

# What the host reads (keep in step with ral's process.rs): one line of
# output, and one resource of an answer.
LINE_MAX = 64 * 1024
RESOURCE_MAX = 1024 * 1024
# The longest json answer the host reads (invoke/json.rs).
DOCUMENT_MAX = 64 * 1024 * 1024


def write_out(text):
    """Writes TEXT to stdout; a reader that went away is not an error."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass


def emit(document):
    """Writes one json-convention document."""
    write_out(json.dumps(document, ensure_ascii=False) + "\n")


def error_entry(name, err):
    """The json entry reporting that resource NAME failed with ERR (its
    message may span lines, quoting a command's output)."""
    return {"name": name,
            "error": {"kind": getattr(err, "kind", "failed"),
                      "message": clean_lines(str(err))}}


def _unreadable(entry, said):
    """Why ral could not read ENTRY back (SAID words what it is), or None:
    its json form is longer than RESOURCE_MAX bytes, or holds a text that
    is no Unicode (a lone surrogate: the bytes of a name or link target
    that were not UTF-8), which no UTF-8 answer can carry."""
    try:
        size = len(json.dumps(entry, ensure_ascii=False).encode("utf-8"))
    except UnicodeEncodeError:
        return ("%s holds bytes that are not UTF-8 (in a name, a link "
                "target...), which ral cannot read" % said)
    if size > RESOURCE_MAX:
        return ("%s is %d bytes long as ral reads it back, more than the %d "
                "it accepts" % (said, size, RESOURCE_MAX))
    return None


def check_resource_fits(resource):
    """Refuses, before anything is written, a resource that ral could not
    read back: its json form must fit in RESOURCE_MAX bytes, and be
    UTF-8."""
    problem = _unreadable(resource, "%s as ral reads it back"
                          % quoted(resource.get("name")))
    if problem is not None:
        raise UpdateError(problem + "; nothing was changed")


def simple_line(key, value):
    return "%s: %s" % (key, clean(value))


def check_line_fits(name, key, value):
    """Refuses, before anything is written, a value whose `KEY: VALUE` line
    would be longer than ral reads (LINE_MAX bytes)."""
    size = len(simple_line(key, value).encode("utf-8", "replace")) + 1
    if size > LINE_MAX:
        raise UpdateError("%s of %s would make a line of %d bytes, longer "
                          "than the %d ral reads, so it could not be read "
                          "back; nothing was changed"
                          % (key, quoted(name), size, LINE_MAX))


def emit_simple(pairs, log=None):
    """Writes a `# simple` answer from (key, value) pairs, where each
    ("name", N) starts a resource. Data already on the system that ral could
    not read back (a line over LINE_MAX) is left out with a warning: an
    attribute's line alone, or a whole resource when its name is too long.
    An old value (`ral_was`) that long is cut, so that a change that was
    made is still reported."""
    lines = ["# simple"]
    skipping = False
    name = None
    for key, value in pairs:
        line = simple_line(key, value)
        if key == "name":
            name = value
            skipping = len(line.encode("utf-8", "replace")) + 1 > LINE_MAX
            if skipping and log is not None:
                log.warning("a name of %d characters is too long for ral to "
                            "read; that resource is left out" % len(value))
        if skipping:
            continue
        encoded = line.encode("utf-8", "replace")
        if len(encoded) + 1 > LINE_MAX:
            if key == "ral_was":
                keep = LINE_MAX - 100
                line = encoded[:keep].decode("utf-8", "ignore") \
                    + " [cut at %d bytes]" % keep
            else:
                if log is not None:
                    log.resource("warn", name, message=(
                        "%s is %d bytes long, more than ral reads in one "
                        "line; it is not reported" % (key, len(encoded))))
                continue
        lines.append(line)
    write_out("\n".join(lines) + "\n")


def emit_simple_error(message):
    write_out("# simple\nral_error: %s\nral_eom\n" % clean(message))


def join_words(words):
    """An array value for a `# simple` line: shell-quoted words."""
    return " ".join(shlex.quote(clean(word)) for word in words)


SENSITIVE_VAR = "RALSH_SENSITIVE"


def simple_args(argv, environ=None):
    """The arguments of a simple-convention call: KEY=WORD for one value,
    KEY=(WORD WORD ...) for an array, each WORD shell-quoted; and, for a
    provider whose metadata says sensitive_in: env, the sensitive values
    ral passed in the environment: each variable RALSH_SENSITIVE names
    (space-separated) holds one value as it is. No other variable is
    taken for an attribute."""
    args = {}
    environ = os.environ if environ is None else environ
    for key in environ.get(SENSITIVE_VAR, "").split():
        if key not in environ:
            raise CallError("%s names %s, which is not in the environment"
                            % (SENSITIVE_VAR, quoted(key)))
        args[key] = environ[key]
    for arg in argv:
        if "=" not in arg:
            raise CallError("malformed argument %s: expected KEY=VALUE"
                            % quoted(arg))
        key, raw = arg.split("=", 1)
        if key in args:
            raise CallError("argument %s is given twice" % quoted(key))
        is_list = raw.startswith("(") and raw.endswith(")")
        try:
            words = shlex.split(raw[1:-1] if is_list else raw)
        except ValueError as err:
            raise CallError("cannot parse argument %s: %s" % (quoted(key), err))
        if is_list:
            args[key] = words
        elif len(words) == 1:
            args[key] = words[0]
        else:
            raise CallError("malformed argument %s: expected one value"
                            % quoted(arg))
    return args


def read_request():
    """The json document on stdin, which must be an object."""
    try:
        data = sys.stdin.buffer.read()
    except OSError as err:
        raise os_error(err, "read stdin")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise CallError("stdin is not UTF-8: %s" % err)
    try:
        document = json.loads(text)
    except ValueError as err:
        raise CallError("stdin is not a JSON document: %s" % err)
    if not isinstance(document, dict):
        raise CallError("stdin must be a JSON object, not %s"
                        % type_name(document))
    return document


def get_names(document):
    """The names of a get request, each once, in order ([]: all)."""
    if "names" not in document:
        raise CallError("missing key 'names' in the get request")
    names = document["names"]
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise CallError("'names' must be an array of strings")
    return list(dict.fromkeys(names))


def set_request(document):
    """(noop, updates) of a set request; every update is an object with a
    string name."""
    ral = document.get("ral", {})
    if not isinstance(ral, dict):
        raise CallError("'ral' must be a JSON object")
    noop = ral.get("noop", False)
    if not isinstance(noop, bool):
        raise CallError("'ral.noop' must be a boolean")
    if "updates" not in document:
        raise CallError("missing key 'updates' in the set request")
    updates = document["updates"]
    if not isinstance(updates, list):
        raise CallError("'updates' must be an array")
    for update in updates:
        if not isinstance(update, dict) or not isinstance(update.get("name"), str):
            raise CallError("every update must be an object with a string "
                            "'name'")
    return noop, updates


def refresh_request(document):
    """The refreshes of a refresh request: each an object with a string
    name and an object of attributes (the manifest's, none sensitive)."""
    if "refresh" not in document:
        raise CallError("missing key 'refresh' in the refresh request")
    entries = document["refresh"]
    if not isinstance(entries, list):
        raise CallError("'refresh' must be an array")
    for entry in entries:
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str) \
                or not isinstance(entry.get("attributes", {}), dict):
            raise CallError("every refresh must be an object with a string "
                            "'name' and an object 'attributes'")
    return entries


def check_should(update, attributes, ensures=("present", "absent"),
                 read_only=()):
    """(name, should, ensure) of one update, checked: SHOULD is an object
    of known ATTRIBUTES that sets none of READ_ONLY, the name does not
    change, and ensure (None when not given) is one of ENSURES (any value
    when ENSURES is None: the provider checks it)."""
    name = update["name"]
    should = update.get("should")
    if not isinstance(should, dict):
        raise UpdateError("'should' must be a JSON object")
    for key in should:
        if key in read_only:
            raise UpdateError("%s is read-only" % key)
        if key not in attributes:
            raise UpdateError("unknown attribute %s" % quoted(key))
    if "name" in should and should["name"] != name:
        raise UpdateError("name: cannot rename %s to %s"
                          % (quoted(name), quoted(should["name"])))
    ensure = should.get("ensure")
    if ensure is not None and ensures is not None and ensure not in ensures:
        raise UpdateError("ensure: %s is not one of %s"
                          % (json.dumps(ensure), ", ".join(ensures)))
    return name, should, ensure


def each_update(updates, apply):
    """Runs APPLY(update) for every update; returns the change entries it
    returned (None: no change), with an error entry for each update that
    failed with an UpdateError."""
    changes = []
    for update in updates:
        try:
            change = apply(update)
        except UpdateError as err:
            change = error_entry(update["name"], err)
        if change is not None:
            changes.append(change)
    return changes


def describe():
    """Prints the metadata: the .yaml beside the provider (sys.argv[0]).
    There is no other copy of it."""
    yaml = os.path.splitext(os.path.abspath(sys.argv[0]))[0] + ".yaml"
    try:
        with open(yaml, encoding="utf-8") as fh:
            text = fh.read()
    except OSError as err:
        raise os_error(err, "read the metadata %s" % quoted(yaml))
    write_out(text)


# ----------------------------------------------------------------- calls


class _Call:
    """The call under way: whether it is noop."""

    noop = False


_call = _Call()


def _begin(is_noop):
    """Starts a call. The Log learns noop from here too, so that its
    'would be created' lines agree with noop()."""
    _call.noop = is_noop
    log.noop = is_noop


def noop():
    """True when the call under way must change nothing and only report
    what it would change: `ral.noop` of a json set request, or `ral_noop`
    among a simple call's arguments. This is how a provider learns it;
    it passes it on to what changes things (Edit, Batch, Commands)."""
    return _call.noop


def _fitting(entries, said):
    """ENTRIES, each one ral could not read back replaced by an error entry
    for its name (made readable); SAID words what that entry would have
    been. One entry ral cannot read must not fail the whole answer."""
    kept = []
    for entry in entries:
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            # A bug in the provider, reported as one.
            raise TypeError("an answer entry must be an object with a "
                            "string 'name', not %s" % type_name(entry))
        problem = _unreadable(entry, said)
        if problem is not None:
            entry = error_entry(_readable(entry["name"]),
                                UpdateError(problem))
        kept.append(entry)
    return kept


def _readable(text):
    """TEXT with each lone surrogate (a byte that was not UTF-8) as U+FFFD;
    a name ral asked for has none, and stays as it is."""
    if text.isprintable():
        return text
    return "".join("\ufffd" if 0xD800 <= ord(ch) <= 0xDFFF else ch
                   for ch in text)


def _emit_checked(document):
    """Emits DOCUMENT, or a call error when it is longer than ral reads."""
    text = json.dumps(document, ensure_ascii=False)
    size = len(text.encode("utf-8")) + 1
    if size > DOCUMENT_MAX:
        raise CallError("the answer is %d bytes long, more than the %d ral "
                        "reads" % (size, DOCUMENT_MAX))
    write_out(text + "\n")


def _answer_get(get, names):
    """Answers a get with what GET(NAMES) returns, the named resources in
    the order asked: a name it says nothing about does not exist (ensure
    absent)."""
    resources = _fitting(list(get(names) or []), "this resource")
    if names:
        found = dict((resource["name"], resource) for resource in resources)
        asked = set(names)
        resources = [found.get(name, {"name": name, "ensure": "absent"})
                     for name in names] \
            + [resource for resource in resources
               if resource["name"] not in asked]
    _emit_checked({"resources": resources})


def _answer_set(set_, updates):
    """Answers a set with the change entries SET_(UPDATES) returns."""
    changes = _fitting(list(set_(updates) or []),
                       "the report of this change (which was made)")
    _emit_checked({"changes": changes, "derive": False})


def _answer_refresh(refresh_, entries):
    """Answers a refresh: each entry refreshed by REFRESH_(NAME,
    ATTRIBUTES), or an error entry for the UpdateError it raised."""
    refreshed = []
    for entry in entries:
        try:
            refresh_(entry["name"], entry.get("attributes", {}))
            refreshed.append({"name": entry["name"]})
        except UpdateError as err:
            refreshed.append(error_entry(entry["name"], err))
    emit({"refreshed": refreshed})


def run(get, set=None, refresh=None):
    """Runs a json provider from two functions and returns its exit
    status (0), for sys.exit:

        get(names) -> resources: the resources named (all of them when
            NAMES is empty), each a dict with a "name"; a name left out
            is answered as not existing ({"ensure": "absent"}), and one
            that could never exist may be an error_entry;
        set(updates) -> change entries (or error_entry ones), the
            updates being those of the request; noop() says whether to
            change anything;
        refresh(name, attributes) -> None: refreshes one resource (a
            service restarted) because something it subscribes to
            changed; an UpdateError fails that resource only.

    The toolkit reads the request, writes the answer, refuses entries
    longer than ral reads back (each becomes an error for its name) and
    reports a CallError as the call's error and any other exception as an
    internal error. UpdateErrors are each_update's to catch, one update at
    a time; check_resource_fits refuses a change before it is written."""
    actions = {"get": lambda names: _answer_get(get, names)}
    if set is not None:
        actions["set"] = lambda updates, is_noop: _answer_set(set, updates)
    if refresh is not None:
        actions["refresh"] = lambda entries, is_noop: _answer_refresh(refresh,
                                                                      entries)
    return main(json_actions=actions)


def main(json_actions=None, simple_actions=None):
    """Runs the provider: parses the call, dispatches to an action, and
    reports errors in the provider's convention. The json actions are
    get(names) and set(updates, noop), each writing its own answer (run()
    writes it for them); the simple ones list(args), find(args) and
    update(args), each args a dict from simple_args. Under both, noop()
    says whether the call is noop. The answer is always written with exit
    status 0, as both conventions want; only a crash of Python itself
    exits otherwise."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.reconfigure(encoding="utf-8", errors="replace")
        except AttributeError:
            pass
    argv = sys.argv[1:]
    simple = simple_actions is not None
    _begin(False)
    try:
        if simple:
            args = simple_args(argv)
            action = args.get("ral_action")
            if action is None:
                raise CallError("missing required argument 'ral_action'")
            actions = simple_actions
        else:
            if len(argv) != 1 or not argv[0].startswith("ral_action="):
                raise CallError("expected exactly one argument "
                                "ral_action=ACTION, got %s"
                                % (" ".join(quoted(a) for a in argv) or "none"))
            action = argv[0][len("ral_action="):]
            actions = json_actions
        if action == "describe":
            describe()
            return 0
        if action not in actions:
            raise CallError("unknown action %s: expected one of %s"
                            % (quoted(action),
                               ", ".join(sorted(list(actions) + ["describe"]))))
        if simple:
            # ral_noop's value does not matter: its presence means noop.
            _begin("ral_noop" in args)
            actions[action](args)
        elif action == "get":
            names = get_names(read_request())
            _begin(False)
            actions[action](names)
        elif action == "refresh":
            entries = refresh_request(read_request())
            _begin(False)
            actions[action](entries, False)
        else:
            is_noop, updates = set_request(read_request())
            _begin(is_noop)
            actions[action](updates, is_noop)
    except CallError as err:
        if simple:
            emit_simple_error(str(err))
        else:
            emit({"error": {"kind": err.kind,
                            "message": clean_lines(str(err))}})
    except Exception as err:  # a bug: report it, do not print a traceback
        message = "internal error: %s: %s" % (type(err).__name__, err)
        if simple:
            emit_simple_error(message)
        else:
            emit({"error": {"kind": "failed", "message": clean(message)}})
    return 0
