"""Text for answers and messages: control characters made visible,
quoting, JSON type names, and the bytes of system files as text. A leaf:
every other module of the toolkit uses it, and it uses none of them."""

import unicodedata


def clean(value):
    """VALUE made safe for one line of an answer or message: control
    characters and line breaks become '?', and lone surrogates (bytes that
    were not UTF-8) become U+FFFD."""
    value = str(value)
    if value.isprintable():
        return value
    out = []
    for ch in value:
        category = unicodedata.category(ch)
        if category in ("Cc", "Zl", "Zp"):
            out.append("?")
        elif category == "Cs":
            out.append("\ufffd")
        else:
            out.append(ch)
    return "".join(out)


def clean_lines(text):
    """Like clean, but keeps the line breaks (for quoted command output)."""
    return "\n".join(clean(line) for line in str(text).split("\n"))


def quoted(value):
    """VALUE in single quotes, for messages."""
    return "'" + clean(value) + "'"


def shown(value):
    """A reported value for messages: quoted, or 'no value'."""
    return "no value" if value is None else quoted(value)


def type_name(value):
    """What kind of JSON value VALUE is, for messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def has_control(value):
    """True when VALUE holds a control character or line break."""
    return not value.isprintable() and any(
        unicodedata.category(ch) in ("Cc", "Zl", "Zp") for ch in value)


def decode(raw):
    """Text from the bytes of a system file: UTF-8 if possible, else
    Latin-1, which decodes any byte and encodes back to the same bytes."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("latin-1")


def split_lines(data):
    """The lines of DATA (bytes), each with its terminator; a last line
    without one is kept as it is."""
    pieces = data.split(b"\n")
    lines = [piece + b"\n" for piece in pieces[:-1]]
    if pieces[-1]:
        lines.append(pieces[-1])
    return lines
