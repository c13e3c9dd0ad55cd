"""ral_provider: the toolkit of ral's Python providers.

One package for what every provider needs and none should write again:

- protocol: the calling conventions: reading the request (simple:
  `KEY=VALUE` arguments; json: one document on stdin), whether the call
  is noop (noop()), writing the answer within the sizes ral reads back,
  errors (`ral_error`, json error kinds), describe (the `.yaml` beside the
  script), and run(get=..., set=...), which does all of that around a json
  provider's two functions;
- text and errors: text for messages and answers (control characters made
  visible, quoting), and CallError / UpdateError;
- log: logging on stderr with resource context (`creating`, `updating`,
  `deleting`, `attribute_changed`) that ralsh renders;
- commands: a command runner: argv only, a scrubbed environment, a time
  limit, skipped under noop with a log line saying what would have run;
- files: paths below the root (`RALSH_ROOT_DIR`), opened one directory at
  a time without ever following a symbolic link out of it; locked,
  crash-safe edits of shared files: the lock the system's own tools take,
  a re-read under it, a temporary file in the same directory that is
  synced and renamed over the original, and a journal that finishes an
  edit of several files that a crash interrupted;
- plugin: the plugin side of the model-plugin protocol: the model as
  read-only items (query, query_by_vpath), the task builders (ConfigTask,
  CallbackTask, RemoteTask, OrderedTasks), ValidationError, and
  plugin.run(create_configuration=..., callbacks=...), which does the
  protocol around a plugin's functions (docs/plugins.md).

It uses the standard library only. Every public name is here at the top,
as it was when the toolkit was one file. A bundled provider imports it
from its own directory; any other provider from the directory ralsh names
in `RALSH_PROVIDER_LIB`:

    import os, sys
    sys.path.insert(0, os.environ["RALSH_PROVIDER_LIB"])
    import ral_provider as ral

    def get(names): ...             # -> resources
    def set(updates): ...           # -> change entries; ral.noop()

    sys.exit(ral.run(get=get, set=set))
"""

from .text import (
    clean, clean_lines, decode, has_control, quoted, shown, split_lines,
    type_name)
from .errors import CallError, Missing, UpdateError, os_error
from .commands import (
    DEFAULT_PATH, Commands, Result, Running, command_env, shown_command)
from .files import (
    JOURNAL_MAX, JOURNAL_TAG, LOCK_TAG, LOCK_WAIT, MAX_LINKS, TEMP_TAG, Batch,
    Dir, Edit, Lock, Root, Target, fsync_dir, read_journal, temp_name)
from .protocol import (
    DOCUMENT_MAX, LINE_MAX, RESOURCE_MAX, SENSITIVE_VAR, check_line_fits,
    check_resource_fits, check_should, describe, each_update, emit,
    emit_simple, emit_simple_error, error_entry, get_names, join_words, main,
    noop, read_request, run, set_request, simple_args, simple_line, write_out)
# The plugin side. Its run() is plugin.run (run is the providers' one).
from . import plugin
from .plugin import (
    Api, CallbackTask, ConfigTask, Item, Model, OrderedTaskList, OrderedTasks,
    PluginError, RemoteExecutionTask, RemoteTask, Task, Update,
    ValidationError)
# Last, after every submodule is loaded: importing the submodule `log`
# made `ral_provider.log` that module, and the name has always meant the
# Log every provider writes to.
from .log import Log, log

__all__ = [
    "LINE_MAX", "RESOURCE_MAX", "DOCUMENT_MAX", "LOCK_WAIT", "MAX_LINKS",
    "DEFAULT_PATH", "TEMP_TAG", "LOCK_TAG", "JOURNAL_TAG", "JOURNAL_MAX",
    "clean", "clean_lines", "quoted", "shown", "type_name", "has_control",
    "decode", "split_lines", "CallError", "UpdateError", "Missing", "os_error",
    "write_out", "emit", "error_entry", "check_resource_fits", "simple_line",
    "check_line_fits", "emit_simple", "emit_simple_error", "join_words", "Log",
    "log", "SENSITIVE_VAR", "simple_args", "read_request", "get_names",
    "set_request", "check_should", "each_update", "Root", "Dir", "Target",
    "read_journal", "Lock", "fsync_dir", "temp_name", "Edit", "Batch",
    "Result", "shown_command", "command_env", "Running", "Commands",
    "describe", "main", "noop", "run",
    "plugin", "Api", "Item", "Model", "Task", "ConfigTask", "CallbackTask",
    "RemoteTask", "RemoteExecutionTask", "OrderedTasks", "OrderedTaskList",
    "ValidationError", "Update", "PluginError",
]
