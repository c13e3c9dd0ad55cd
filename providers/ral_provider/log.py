"""The Log: messages on stderr, one line each, with the resource and the
action under way where there is one, which ralsh renders (and redacts
where an attribute is sensitive). `log` is the one every provider and the
rest of the toolkit write to."""

import contextlib
import json
import sys

from .errors import CallError
from .text import clean


class Log:
    """Messages on stderr, one line each, prefixed with their level.

    Messages about one resource carry it, and the action under way, as a
    `ral_log` JSON object, which ralsh shows as 'NAME: ACTION: message' and
    redacts where the attribute is sensitive:

        info: ral_log {"resource": "web1", "context": "updating",
                       "attribute": "ip", "old": "10.0.0.1", "new": "10.0.0.2"}
    """

    def __init__(self):
        # Set by the protocol when a call starts, as noop() says, so that
        # 'would be created' lines agree with what the provider does.
        self.noop = False

    def noop_or(self, noop):
        """NOOP as given, or when None the call's noop() (as the protocol
        told this log when the call started): what Edit, Batch and
        Commands use when a provider does not pass noop on."""
        return self.noop if noop is None else bool(noop)

    def line(self, level, message):
        try:
            sys.stderr.write("%s: %s\n" % (level, clean(message)))
            sys.stderr.flush()
        except (OSError, ValueError):
            pass

    def debug(self, message):
        self.line("debug", message)

    def info(self, message):
        self.line("info", message)

    def warning(self, message):
        self.line("warn", message)

    def error(self, message):
        self.line("error", message)

    def resource(self, level, name, context=None, message=None, **change):
        """A message about resource NAME; CHANGE may name an `attribute`
        with its `old` and `new` values."""
        record = {"resource": name}
        if context is not None:
            record["context"] = context
        record.update(change)
        if message is not None:
            record["message"] = message
        self.line(level, "ral_log " + json.dumps(record, ensure_ascii=False))

    def attribute_changed(self, name, attribute, old, new, context=None):
        self.resource("info", name, context, attribute=attribute, old=old,
                      new=new)

    @contextlib.contextmanager
    def _context(self, name, doing, done):
        word = "would be " + done if self.noop else done
        self.resource("debug", name, doing, "started")
        try:
            yield
        except CallError as err:
            self.resource("debug", name, doing, "failed: %s" % err)
            raise
        self.resource("info", name, doing, word)

    def creating(self, name):
        return self._context(name, "creating", "created")

    def updating(self, name):
        return self._context(name, "updating", "updated")

    def deleting(self, name):
        return self._context(name, "deleting", "deleted")


log = Log()
