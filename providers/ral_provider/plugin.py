"""The plugin side of ral's model-plugin protocol (docs/plugins.md), so
that a plugin author writes functions and nothing of the protocol:

    import ral_provider as ral

    def create_configuration(api):
        return [ral.ConfigTask(item, "file", "/etc/x.conf", {...})
                for item in api.query("x") if not item.is_applied()]

    sys.exit(ral.plugin.run(create_configuration=create_configuration))

run() reads `ral_action=ACTION` from the command line and one JSON
document (of bounded size) from stdin, hands the author's function an
Api (the model as read-only Items, and the `ral` section: root, target,
noop), turns what it returns into the answer document, and writes
exactly one document on stdout. Mistakes are caught where they are made
(a task requiring a task that is not in the answer, two tasks with one
id, a callback that is not registered) rather than by the host at apply
time. The names follow LITP's (QueryItem, ConfigTask, CallbackTask,
RemoteExecutionTask, OrderedTaskList, ValidationError), so that a LITP
plugin reads almost the same."""

import contextlib
import json
import os
import re
import sys
import traceback

from .commands import shown_command
from .errors import CallError
from .log import log
from .protocol import DOCUMENT_MAX, _begin, describe, write_out
from .text import clean_lines, quoted, type_name

# The largest input document read. The host sends the whole model on every
# call, so it is allowed to be as large as the largest answer the host
# reads back; what is longer is refused rather than read without end.
INPUT_MAX = DOCUMENT_MAX

STATES = ("Initial", "Applied", "Updated", "ForRemoval")
ACTIONS = ("validate_model", "update_model", "create_configuration",
           "create_lock_tasks", "create_snapshot_plan", "callback")
# "type[title]" as the protocol names a resource in `requires`.
RESOURCE_REF = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\[.+\]\Z", re.S)


class PluginError(CallError):
    """Fails the call with this message, shown as it is. Raise it for a
    failure the plugin means (a callback's check that did not pass);
    any other exception is reported as an internal error of the plugin."""


# ------------------------------------------------------------------ model


class Item:
    """One model item as a plugin sees it (LITP's QueryItem): read-only.

    PROPERTIES are the item's properties as they stand in the manifests
    ({} when the host sends none: a ForRemoval item has left the
    manifests, so read what it made from APPLIED_PROPERTIES);
    APPLIED_PROPERTIES are those last applied, None for an Initial item.
    A property can also be read as an attribute (item.port), as LITP
    allows, when no attribute of the item has its name."""

    __slots__ = ("vpath", "type", "name", "state", "properties",
                 "applied_properties")

    def __init__(self, vpath, type, name, state, properties,
                 applied_properties):
        object.__setattr__(self, "vpath", vpath)
        object.__setattr__(self, "type", type)
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "state", state)
        object.__setattr__(self, "properties", _Frozen(properties))
        object.__setattr__(self, "applied_properties",
                           None if applied_properties is None
                           else _Frozen(applied_properties))

    def __setattr__(self, key, value):
        raise AttributeError("model items are read-only; update_model "
                             "returns the properties to set")

    def __getattr__(self, key):
        properties = object.__getattribute__(self, "properties")
        if key in properties:
            return properties[key]
        raise AttributeError("%s has no property %s"
                             % (object.__getattribute__(self, "vpath"),
                                quoted(key)))

    def __repr__(self):
        return "<Item %s %s>" % (self.vpath, self.state)

    # LITP's names.
    @property
    def item_id(self):
        return self.name

    @property
    def item_type_id(self):
        return self.type

    def get_vpath(self):
        return self.vpath

    def get_state(self):
        return self.state

    def is_initial(self):
        return self.state == "Initial"

    def is_applied(self):
        return self.state == "Applied"

    def is_updated(self):
        return self.state == "Updated"

    def is_for_removal(self):
        return self.state == "ForRemoval"

    def needs_work(self):
        """True when create_configuration owes this item tasks: it is
        Initial or Updated (tasks that bring the system to it) or
        ForRemoval (tasks that remove what it made)."""
        return self.state != "Applied"


class _Frozen(dict):
    """A dict no plugin code can change by mistake: the model is the
    host's, and a change here would silently not reach it."""

    def _refuse(self, *args, **kwargs):
        raise TypeError("model properties are read-only")

    __setitem__ = __delitem__ = __ior__ = clear = pop = popitem = \
        setdefault = update = _refuse


class Model:
    """The model of the run: every item, of every type (resources too, so
    that a plugin can validate across items), ForRemoval ones included."""

    def __init__(self, items):
        self.items = tuple(items)
        self._by_vpath = dict((item.vpath, item) for item in self.items)

    @classmethod
    def from_json(cls, document, where="model"):
        """The Model of the protocol's `model` object; a CallError names
        what is wrong with it."""
        if not isinstance(document, dict):
            raise CallError("'%s' must be a JSON object, not %s"
                            % (where, type_name(document)))
        items = document.get("items")
        if not isinstance(items, list):
            raise CallError("'%s.items' must be an array" % where)
        seen = set()
        parsed = []
        for index, raw in enumerate(items):
            item = _item(raw, "%s.items[%d]" % (where, index))
            if item.vpath in seen:
                raise CallError("%s: vpath %s is given twice"
                                % (where, quoted(item.vpath)))
            seen.add(item.vpath)
            parsed.append(item)
        return cls(parsed)

    def query(self, item_type, **properties):
        """The items of type ITEM_TYPE whose properties equal those given,
        in the model's order (LITP leaves the order undefined; do not
        rely on it across runs)."""
        return [item for item in self.items
                if item.type == item_type
                and all(key in item.properties and item.properties[key] == value
                        for key, value in properties.items())]

    def query_by_vpath(self, vpath):
        """The item at VPATH, or None."""
        return self._by_vpath.get(vpath)

    def __iter__(self):
        return iter(self.items)

    def __len__(self):
        return len(self.items)


def _item(raw, where):
    """One Item from its JSON object, checked."""
    if not isinstance(raw, dict):
        raise CallError("%s must be a JSON object, not %s"
                        % (where, type_name(raw)))
    for key in ("vpath", "type", "name", "state"):
        if not isinstance(raw.get(key), str):
            raise CallError("%s: '%s' must be a string" % (where, key))
    if raw["state"] not in STATES:
        raise CallError("%s: state %s is not one of %s"
                        % (where, quoted(raw["state"]), ", ".join(STATES)))
    properties = raw.get("properties")
    if properties is None:
        properties = {}
    applied = raw.get("applied_properties")
    for key, value in (("properties", properties),
                       ("applied_properties", applied)):
        if value is not None and not isinstance(value, dict):
            raise CallError("%s: '%s' must be a JSON object or null, not %s"
                            % (where, key, type_name(value)))
    return Item(raw["vpath"], raw["type"], raw["name"], raw["state"],
                properties, applied)


class Api:
    """What every call's function gets (LITP's PluginApiContext): the
    model, the `ral` section of the input, and what the action adds.

    ROOT is the root the run works below ("/" unless --root); TARGET the
    target's name (None: this machine); NOOP whether the run changes
    nothing. NODE is create_lock_tasks' target ({"name": ...} and its
    inventory variables); SNAPSHOT_ACTION and SNAPSHOT_NAME those of
    create_snapshot_plan, and SNAPSHOT_MODEL the model recorded with the
    snapshot being restored (a Model, or None)."""

    def __init__(self, model, root="/", target=None, noop=False, node=None,
                 snapshot_action=None, snapshot_name=None,
                 snapshot_model=None):
        self.model = model
        self.root = root
        self.target = target
        self.noop = noop
        self.node = node
        self.snapshot_action = snapshot_action
        self.snapshot_name = snapshot_name
        self.snapshot_model = snapshot_model

    def query(self, item_type, **properties):
        return self.model.query(item_type, **properties)

    def query_by_vpath(self, vpath):
        return self.model.query_by_vpath(vpath)

    def path(self, absolute):
        """ABSOLUTE (a path as seen inside the root, "/etc/x") as a path
        on this machine: below ROOT. For what a plugin opens or runs
        itself; a config task names paths inside the root, as its
        provider does."""
        return os.path.join(self.root, absolute.lstrip("/"))


# ------------------------------------------------------------------ tasks


def _vpath_of(item):
    """The vpath a task's ITEM names: an Item, a vpath string, or None
    (a task that settles no item: a lock or snapshot task)."""
    if item is None:
        return None
    if isinstance(item, Item):
        return item.vpath
    if isinstance(item, str) and item.startswith("/"):
        return item
    raise TypeError("a task's item must be a model Item or a vpath "
                    "string, not %r" % (item,))


def _is_pair(value):
    """True for a (type, title) pair, as LITP's requires takes them."""
    return isinstance(value, tuple) and len(value) == 2 \
        and all(isinstance(part, str) and part for part in value)


def _requires_list(requires):
    """REQUIRES as a list: one entry alone (a task, an item, a string or a
    (type, title) pair), or a list or other iterable of them."""
    if requires is None:
        return []
    if isinstance(requires, (str, Task, Item)) or _is_pair(requires):
        return [requires]
    return list(requires)


class Task:
    """What every task has: the item whose state it settles, an id (given,
    or assigned when the answer is written), what it requires, and a
    description shown in plans.

    A `requires` entry is another Task of the same answer, an Item (every
    task of that item), a vpath string, a "type[title]" string or a
    (type, title) pair (a resource: of the manifests or a config task),
    or the id of a task of the answer."""

    kind = None

    def __init__(self, item, description=None, requires=(), id=None):
        self.item = _vpath_of(item)
        self.description = description
        self.requires = _requires_list(requires)
        # An id that reads as a vpath or a resource would make a
        # `requires` entry naming it ambiguous.
        if id is not None and not (isinstance(id, str) and id
                                   and not id.startswith("/")
                                   and not RESOURCE_REF.match(id)):
            raise TypeError("a task id is a non-empty string that is no "
                            "vpath or type[title], not %r" % (id,))
        self.id = id

    def require(self, *others):
        """Adds OTHERS to what this task requires; returns the task."""
        self.requires.extend(others)
        return self

    def default_description(self):
        return ""

    def _fields(self):
        """The kind's own fields before `requires`, in the protocol's
        order (which the answer keeps, for people reading it)."""
        return {}

    def _after_requires(self, answer):
        """The kind's own fields between `requires` and `description`."""
        return {}

    def _json(self, answer):
        document = {"kind": self.kind, "item": self.item,
                    "id": answer.id_of(self)}
        document.update(self._fields())
        document["requires"] = answer.resolve(self, self.requires)
        document.update(self._after_requires(answer))
        description = self.description
        if description is None:
            description = self.default_description()
        document["description"] = description
        return document

    def __repr__(self):
        return "<%s %s %s>" % (type(self).__name__, self.id or "(no id)",
                               self.default_description())


class ConfigTask(Task):
    """A resource, converged by its provider like a manifest resource
    (LITP's ConfigTask: TYPE and TITLE are its call_type and call_id).
    REPLACES holds (type, title) pairs of resources applied earlier that
    this task takes over. NOTIFY lists what a change of this resource
    refreshes (a service restarted), SUBSCRIBE what refreshes it when it
    changes; both name as `requires` does, and ral orders them as it."""

    kind = "config"

    def __init__(self, item, type, title, attributes=None, description=None,
                 requires=(), replaces=(), id=None, notify=(), subscribe=()):
        Task.__init__(self, item, description, requires, id)
        self.notify = _requires_list(notify)
        self.subscribe = _requires_list(subscribe)
        if not isinstance(type, str) or not type:
            raise TypeError("a config task's type must be a non-empty "
                            "string, not %r" % (type,))
        if not isinstance(title, str) or not title:
            raise TypeError("a config task's title must be a non-empty "
                            "string, not %r" % (title,))
        self.type = type
        self.title = title
        self.attributes = dict(attributes or {})
        self.replaces = []
        for pair in replaces:
            if not (isinstance(pair, (tuple, list)) and len(pair) == 2
                    and all(isinstance(part, str) and part for part in pair)):
                raise TypeError("replaces holds (type, title) pairs, not %r"
                                % (pair,))
            self.replaces.append([pair[0], pair[1]])

    @property
    def ref(self):
        """"type[title]": how requires names this resource."""
        return "%s[%s]" % (self.type, self.title)

    def default_description(self):
        return self.ref

    def _fields(self):
        return {"type": self.type, "title": self.title,
                "attributes": self.attributes}

    def _after_requires(self, answer):
        fields = {"replaces": self.replaces}
        # Only when used: a host before refresh edges refuses the keys.
        for key in ("notify", "subscribe"):
            if getattr(self, key):
                fields[key] = answer.resolve(self, getattr(self, key))
        return fields


class CallbackTask(Task):
    """A call of one of the plugin's callbacks at its turn in the apply
    (LITP's CallbackTask): CALLBACK is the function (registered with
    run(callbacks=...)) or its name; ARGS and KWARGS reach it after the
    Api. `description`, `requires` and `id` are the task's own keywords,
    so a callback cannot take keyword arguments of those names."""

    kind = "callback"

    def __init__(self, item, callback, *args, description=None, requires=(),
                 id=None, **kwargs):
        Task.__init__(self, item, description, requires, id)
        if callable(callback):
            callback = callback.__name__
        if not isinstance(callback, str) or not callback:
            raise TypeError("a callback is a function or its name, not %r"
                            % (callback,))
        self.callback = callback
        self.args = list(args)
        self.kwargs = dict(kwargs)

    def default_description(self):
        return "callback %s" % self.callback

    def _fields(self):
        return {"callback": self.callback, "args": self.args,
                "kwargs": self.kwargs}


class RemoteTask(Task):
    """A command run on the target (on this machine without one) by the
    host's runner: ARGV only, no shell (LITP's RemoteExecutionTask)."""

    kind = "remote"

    def __init__(self, item, argv, description=None, requires=(), id=None):
        Task.__init__(self, item, description, requires, id)
        argv = list(argv) if not isinstance(argv, str) else None
        if not argv or not all(isinstance(arg, str) for arg in argv):
            raise TypeError("a remote task's argv is a non-empty list of "
                            "strings (no shell runs it)")
        self.argv = argv

    def default_description(self):
        return "run %s" % shown_command(self.argv)

    def _fields(self):
        return {"command": self.argv}


RemoteExecutionTask = RemoteTask


class OrderedTasks(Task):
    """Tasks run in the order given, each requiring the one before it
    (LITP's OrderedTaskList). Requiring an OrderedTasks requires every
    task in it."""

    kind = "ordered"

    def __init__(self, item, tasks):
        Task.__init__(self, item)
        self.tasks = list(tasks)
        if not all(isinstance(task, Task) for task in self.tasks):
            raise TypeError("an ordered list holds tasks only")

    def leaves(self):
        """The tasks that get ids: those in it, nested lists opened."""
        for task in self.tasks:
            if isinstance(task, OrderedTasks):
                yield from task.leaves()
            else:
                yield task

    def default_description(self):
        return "%d tasks in order" % len(self.tasks)

    def _json(self, answer):
        return {"kind": self.kind, "item": self.item,
                "tasks": [task._json(answer) for task in self.tasks]}


OrderedTaskList = OrderedTasks


class ValidationError:
    """One problem validate_model found: the item's VPATH (or the Item),
    the PROPERTY at fault (None: the whole item) and what is wrong. The
    host shows it with the manifest file and line of the item."""

    def __init__(self, vpath, message, property=None):
        self.vpath = _vpath_of(vpath)
        if self.vpath is None:
            raise TypeError("a validation error names an item")
        self.message = str(message)
        self.property = property

    def to_json(self):
        error = {"vpath": self.vpath}
        if self.property is not None:
            error["property"] = self.property
        error["message"] = self.message
        return error

    def __repr__(self):
        return "<ValidationError %s %s: %s>" % (self.vpath, self.property,
                                               self.message)


class Update:
    """Properties update_model sets on an item before validation."""

    def __init__(self, item, properties):
        self.vpath = _vpath_of(item)
        if self.vpath is None or not isinstance(properties, dict):
            raise TypeError("an update names an item and a dict of "
                            "properties")
        self.properties = dict(properties)

    def to_json(self):
        return {"vpath": self.vpath, "properties": self.properties}


# ----------------------------------------------------------------- answer


class _Answer:
    """The tasks of one answer: ids assigned, requires resolved to ids,
    vpaths and "type[title]" strings, every reference checked."""

    def __init__(self, tasks, callbacks):
        self.tasks = list(tasks)
        self.callbacks = callbacks
        leaves = []
        for task in self.tasks:
            if not isinstance(task, Task):
                raise TypeError("create_configuration and the like return "
                                "tasks, not %r" % (task,))
            leaves.extend(task.leaves() if isinstance(task, OrderedTasks)
                          else [task])
        self.leaves = leaves
        seen = set()
        for task in leaves:
            if id(task) in seen:
                raise ValueError("%r is in the answer twice" % (task,))
            seen.add(id(task))
        given = [task.id for task in leaves if task.id is not None]
        duplicate = sorted(set(i for i in given if given.count(i) > 1))
        if duplicate:
            raise ValueError("task id %s is given to more than one task"
                             % quoted(duplicate[0]))
        # Ids are fixed here, before any requires is resolved, so that a
        # task may require one that comes later in the answer.
        self.ids = {}
        used = set(given)
        counter = 0
        for task in leaves:
            if task.id is None:
                counter += 1
                while "t%d" % counter in used:
                    counter += 1
                self.ids[id(task)] = "t%d" % counter
            else:
                self.ids[id(task)] = task.id
        self.id_set = set(self.ids.values())
        for task in leaves:
            if isinstance(task, CallbackTask) and callbacks is not None \
                    and task.callback not in callbacks:
                raise ValueError(
                    "the callback task %s names %s, which is not among the "
                    "callbacks given to run() (%s)"
                    % (self.ids[id(task)], quoted(task.callback),
                       ", ".join(sorted(callbacks)) or "none"))

    def id_of(self, task):
        return self.ids[id(task)]

    def resolve(self, task, requires):
        """TASK's REQUIRES as the protocol's strings, each once."""
        out = []
        for entry in requires:
            for ref in self._refs(task, entry):
                if ref not in out:
                    out.append(ref)
        return out

    def _refs(self, task, entry):
        if isinstance(entry, OrderedTasks):
            return [self._task_ref(task, leaf) for leaf in entry.leaves()]
        if isinstance(entry, Task):
            return [self._task_ref(task, entry)]
        if isinstance(entry, Item):
            return [entry.vpath]
        if _is_pair(entry):
            return ["%s[%s]" % entry]
        if isinstance(entry, str):
            if entry.startswith("/") or RESOURCE_REF.match(entry) \
                    or entry in self.id_set:
                if entry == self.ids[id(task)]:
                    raise ValueError("task %s requires itself" % entry)
                return [entry]
            raise ValueError(
                "task %s requires %s, which is no task id of the answer, "
                "vpath (/TYPE/NAME) or resource (type[title])"
                % (self.ids[id(task)], quoted(entry)))
        raise TypeError("task %s requires %r: expected a task, an item, a "
                        "vpath, \"type[title]\" or (type, title)"
                        % (self.ids[id(task)], entry))

    def _task_ref(self, task, other):
        if id(other) not in self.ids:
            raise ValueError("task %s requires %r, which is not in the "
                             "answer" % (self.ids[id(task)], other))
        if other is task:
            raise ValueError("task %s requires itself" % self.ids[id(task)])
        return self.ids[id(other)]

    def to_json(self):
        return [task._json(self) for task in self.tasks]


def tasks_json(tasks, callbacks=None):
    """The protocol's JSON of TASKS (a list of Task objects): ids
    assigned where none was given, requires resolved. CALLBACKS (names),
    when given, are those a callback task may name."""
    return _Answer(tasks, callbacks).to_json()


# ------------------------------------------------------------------ input


def read_input(stream=None, limit=None):
    """The input document: at most LIMIT (INPUT_MAX) bytes of UTF-8 JSON,
    an object. A CallError says what is wrong."""
    stream = sys.stdin.buffer if stream is None else stream
    limit = INPUT_MAX if limit is None else limit
    try:
        data = stream.read(limit + 1)
    except OSError as err:
        raise CallError("cannot read stdin: %s" % (err.strerror or err))
    if len(data) > limit:
        raise CallError("the input is longer than the %d bytes a plugin "
                        "reads" % limit)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise CallError("stdin is not UTF-8: %s" % err)
    try:
        document = json.loads(text)
    # The parser raises RecursionError, not a crash, on nesting too deep.
    except (ValueError, RecursionError) as err:
        raise CallError("stdin is not a JSON document: %s" % err)
    if not isinstance(document, dict):
        raise CallError("stdin must be a JSON object, not %s"
                        % type_name(document))
    return document


def api_from_input(document, action):
    """The Api of an input DOCUMENT for ACTION, checked."""
    ral = document.get("ral", {})
    if not isinstance(ral, dict):
        raise CallError("'ral' must be a JSON object, not %s"
                        % type_name(ral))
    root = ral.get("root", "/")
    target = ral.get("target")
    noop = ral.get("noop", False)
    if not isinstance(root, str) or not root.startswith("/"):
        raise CallError("'ral.root' must be an absolute path")
    if target is not None and not isinstance(target, str):
        raise CallError("'ral.target' must be a string or null")
    if not isinstance(noop, bool):
        raise CallError("'ral.noop' must be a boolean")
    if "model" not in document:
        raise CallError("missing key 'model' in the input")
    api = Api(Model.from_json(document["model"]), root, target, noop)
    if action == "create_lock_tasks":
        node = document.get("node")
        if not isinstance(node, dict) or not isinstance(node.get("name"), str):
            raise CallError("create_lock_tasks needs 'node', an object with "
                            "a string 'name'")
        api.node = node
    if action == "create_snapshot_plan":
        snapshot = document.get("snapshot")
        if not isinstance(snapshot, dict) \
                or not isinstance(snapshot.get("action"), str) \
                or not isinstance(snapshot.get("name"), str):
            raise CallError("create_snapshot_plan needs 'snapshot', an "
                            "object with string 'action' and 'name'")
        api.snapshot_action = snapshot["action"]
        api.snapshot_name = snapshot["name"]
        if document.get("snapshot_model") is not None:
            api.snapshot_model = Model.from_json(document["snapshot_model"],
                                                 "snapshot_model")
    return api


def _callback_call(document):
    """(name, args, kwargs) of a callback call's input."""
    name = document.get("callback")
    args = document.get("args", [])
    kwargs = document.get("kwargs", {})
    if not isinstance(name, str):
        raise CallError("a callback call needs 'callback', a string")
    if not isinstance(args, list):
        raise CallError("'args' must be an array")
    if not isinstance(kwargs, dict):
        raise CallError("'kwargs' must be an object")
    return name, args, kwargs


# -------------------------------------------------------------------- run


def _listed(result, what):
    """RESULT (what the author returned: None or an iterable) as a list."""
    if result is None:
        return []
    if isinstance(result, (str, bytes, dict)):
        raise TypeError("%s must return a list, not %s"
                        % (what, type(result).__name__))
    return list(result)


def answer(action, document, functions, callbacks):
    """The answer document to ACTION with the input DOCUMENT: what the
    author's function (FUNCTIONS[action], or CALLBACKS for `callback`)
    returns, in the protocol's form. Exceptions propagate: run() makes
    them the error document."""
    api = api_from_input(document, action)
    # A callback task this plugin could not answer is refused now.
    names = set(callbacks or {})
    if action == "callback":
        name, args, kwargs = _callback_call(document)
        if name not in (callbacks or {}):
            raise CallError("unknown callback %s: this plugin has %s"
                            % (quoted(name),
                               ", ".join(sorted(callbacks or {})) or "none"))
        callbacks[name](api, *args, **kwargs)
        return {}
    function = functions[action]
    if action == "validate_model":
        errors = []
        for error in _listed(function(api), "validate_model"):
            if not isinstance(error, ValidationError):
                raise TypeError("validate_model returns ValidationErrors, "
                                "not %r" % (error,))
            errors.append(error.to_json())
        return {"errors": errors}
    if action == "update_model":
        result = function(api)
        if isinstance(result, dict):
            result = [Update(vpath, props) for vpath, props in result.items()]
        updates = []
        for update in _listed(result, "update_model"):
            if not isinstance(update, Update):
                raise TypeError("update_model returns Updates (or a dict "
                                "of vpath: properties), not %r" % (update,))
            updates.append(update.to_json())
        return {"updates": updates}
    if action == "create_lock_tasks":
        pair = function(api)
        if not (isinstance(pair, (tuple, list)) and len(pair) == 2
                and all(isinstance(t, Task) and not isinstance(t, OrderedTasks)
                        for t in pair)):
            raise TypeError("create_lock_tasks returns (lock task, unlock "
                            "task), not %r" % (pair,))
        lock, unlock = _Answer(pair, names).to_json()
        return {"lock": lock, "unlock": unlock}
    # create_configuration, create_snapshot_plan
    tasks = _listed(function(api), action)
    return {"tasks": tasks_json(tasks, names)}


def _error(message):
    """Writes the error document; the exit status run() returns."""
    write_out(json.dumps({"error": {"message": clean_lines(message)}},
                         ensure_ascii=False) + "\n")
    return 1


def run(validate_model=None, update_model=None, create_configuration=None,
        create_lock_tasks=None, create_snapshot_plan=None, callbacks=None,
        argv=None):
    """Runs a plugin from its functions and returns the exit status, for
    sys.exit. Each function takes the Api and returns:

        validate_model(api) -> [ValidationError]
        update_model(api) -> [Update] or {vpath: properties}
        create_configuration(api) -> [Task]
        create_lock_tasks(api) -> (lock Task, unlock Task); api.node
        create_snapshot_plan(api) -> [Task]; api.snapshot_action, ...

    CALLBACKS maps each name a CallbackTask may use to its function,
    called as fn(api, *args, **kwargs); a list of functions is taken by
    their names. A callback succeeds by returning and fails by raising
    (PluginError for a message shown as it is).

    The call is `PLUGIN ral_action=ACTION` (ARGV, default sys.argv[1:])
    with the input on stdin. The answer is one JSON document on stdout
    with exit status 0; a failure is `{"error": {"message": ...}}` with
    exit status 1: a CallError (PluginError) with its own message, any
    other exception as an internal error, its traceback logged at debug.
    While the author's code runs, what it prints goes to stderr, so that
    stdout stays one document."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.reconfigure(encoding="utf-8", errors="replace")
        except AttributeError:
            pass
    if isinstance(callbacks, (list, tuple)):
        callbacks = dict((fn.__name__, fn) for fn in callbacks)
    functions = {"validate_model": validate_model,
                 "update_model": update_model,
                 "create_configuration": create_configuration,
                 "create_lock_tasks": create_lock_tasks,
                 "create_snapshot_plan": create_snapshot_plan}
    offered = [name for name in ACTIONS if functions.get(name) is not None]
    if callbacks:
        offered.append("callback")
    argv = sys.argv[1:] if argv is None else list(argv)
    if len(argv) != 1 or not argv[0].startswith("ral_action="):
        return _error("expected exactly one argument ral_action=ACTION, got "
                      "%s" % (" ".join(quoted(a) for a in argv) or "none"))
    action = argv[0][len("ral_action="):]
    if action == "describe":
        try:
            describe()
        except CallError as err:
            return _error(str(err))
        return 0
    if action not in offered:
        return _error("unknown action %s: this plugin offers %s"
                      % (quoted(action), ", ".join(offered) or "none"))
    _begin(False)
    try:
        document = read_input()
        ral = document.get("ral")
        # noop() and what the toolkit's Commands, Edit and Batch take as
        # the call's noop when a callback does not pass it on.
        _begin(isinstance(ral, dict) and ral.get("noop") is True)
        with contextlib.redirect_stdout(sys.stderr):
            result = answer(action, document, functions, callbacks)
        text = json.dumps(result, ensure_ascii=False)
    except CallError as err:
        return _error(str(err))
    except Exception as err:  # the author's bug: report it, log the trace
        for line in traceback.format_exc().splitlines():
            log.debug(line)
        return _error("internal error in %s: %s: %s"
                      % (action, type(err).__name__, err))
    if len(text.encode("utf-8")) + 1 > DOCUMENT_MAX:
        return _error("the answer is longer than the %d bytes ral reads"
                      % DOCUMENT_MAX)
    write_out(text + "\n")
    return 0


__all__ = ["INPUT_MAX", "PluginError", "Item", "Model", "Api", "Task",
           "ConfigTask", "CallbackTask", "RemoteTask", "RemoteExecutionTask",
           "OrderedTasks", "OrderedTaskList", "ValidationError", "Update",
           "tasks_json", "read_input", "api_from_input", "answer", "run"]
