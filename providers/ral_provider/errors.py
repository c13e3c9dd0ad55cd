"""The errors a provider raises: CallError fails a whole call, UpdateError
one resource of it (their KIND is one of the json convention's error kinds).
A leaf of the toolkit, since paths, locks and commands raise them as much
as the protocol reports them."""


class CallError(Exception):
    """Fails the whole call: a json `error` document, or `ral_error`.
    KIND is one of the json convention's kinds: unknown, forbidden, failed."""

    def __init__(self, message, kind="failed"):
        Exception.__init__(self, message)
        self.kind = kind


class UpdateError(CallError):
    """Fails one resource of a call (one update of a set, one name of a get)
    while the others go on."""


class Missing(CallError):
    """A directory on the way to a path below the root does not exist."""


def os_error(err, what, error=CallError):
    """An ERROR for the OSError ERR, saying 'cannot WHAT: reason'; a denied
    permission is of kind forbidden."""
    kind = "forbidden" if isinstance(err, PermissionError) else "failed"
    return error("cannot %s: %s" % (what, err.strerror or err), kind)
