"""Event time at a dotted path of a JSON document, found without building the document.

``json:meta.ts`` today (``sidecar.core.timestamps.JsonTimestamp``) decodes the whole value with
orjson and walks the dicts. :func:`locate` here is the specification of a scanner that reaches
the same verdict in one pass over the bytes, building nothing but the leaf; ``_json_scan.pyx``
runs the same pass in C. A differential test holds the C to this module, and a test against
orjson and today's extractor holds this module to them (``tests/unit/wire/``).

**The document must be JSON as orjson reads it**, because today's extractor rejects whatever
orjson rejects. Measured on orjson 3.13, each rule kept by a test:

- whitespace is space, tab, line feed and carriage return; only whitespace may follow the
  document; an empty document, or one opening with a byte-order mark, is not JSON;
- strings are strict UTF-8 (no overlong form, no surrogate, nothing above U+10FFFF) with no
  unescaped byte below 0x20, and the escapes ``\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX``; a
  ``\\u`` high surrogate must be followed by a ``\\u`` low one, and a low one alone is an error;
- numbers follow JSON's grammar (no leading zero, no ``+``, ``.5``, ``1.``, NaN or Infinity); an
  integer in [-2^63, 2^64) is an int, any other number a float, and a float that rounds to
  infinity (magnitude at least 2^1024 - 2^970) makes the document an error;
- at most :data:`MAX_DEPTH` containers are open at once;
- of duplicate keys the last wins, whole: ``{"a": {"ts": 1}, "a": {}}`` has no ``a.ts``.

**The walk** is today's: each part of the path names a key of an object, and the verdict is
about the last occurrence of each key on the way (:class:`Located`). A value that is null or not
JSON, a part missing or under something that is not an object, and a leaf the time rules refuse
are each an invalid time with a one-line reason.

**Where the verdicts differ from today's**: nowhere a verdict exists. Today's extractor fails
instead of judging one case: for a leaf nested about 1000 deep its reason calls ``repr`` on the
leaf, and the ``RecursionError`` escapes ``extract_all``; here such a leaf is an invalid time.
Reasons are this module's own where they say more (which byte is not JSON; an object leaf shown
as its JSON text, not as a Python dict).

**The time rules are not copied here.** The leaf goes to ``rules.to_millis(value, "plain", unit,
field)`` (:class:`TimeRules`: ``sidecar.formats.timevalues`` today, ``timesync_wire.timevalues``
once it moves there) as the Python value orjson would have built. The C twin computes one common
case itself — an integer leaf in ``ms``, ``s`` or ``us``, with the same rule — and hands every
other leaf to :meth:`JsonTimeScan.convert`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal, Protocol

try:
    from timesync_wire.formats._json_scan import JsonScanner
except ImportError:  # no C compiler at install: the specification runs, slower
    JsonScanner = None  # type: ignore[assignment,misc]

#: The units of ``json:<path>:<unit>`` (``timevalues.Unit`` once that moves below).
Unit = Literal["ms", "s", "us", "iso"]
UNITS: Final[tuple[Unit, ...]] = ("ms", "s", "us", "iso")
INVALID: Final = -1
#: orjson reads 1024 nested containers and refuses the 1025th ("depth limit exceeded").
MAX_DEPTH: Final = 1024
#: What :func:`locate` found: the leaf, a part missing (``level``: how many parts, with it), or a
#: value on the way that is not an object (``level``: how many parts lead to it; 0 is the value).
FOUND, MISSING, NOT_OBJECT = 0, 1, 2
#: What the leaf is: an INTEGER has neither fraction nor exponent (it may still be too large
#: for an int, then it is a float, as in orjson); a NUMBER has one of them.
STRING, INTEGER, NUMBER, TRUE, FALSE, NULL, OBJECT, ARRAY = range(8)


class TimeRules(Protocol):
    """What this module needs of the time rules: the module ``timevalues`` fits."""

    def to_millis(self, value: object, kind: Literal["plain"], unit: Unit, field: str) -> int: ...


class JsonSyntaxError(ValueError):
    """The document is not JSON as orjson reads it; the message says why and at which byte."""

    def __init__(self, why: str, pos: int) -> None:
        super().__init__(f"{why} at byte {pos}")
        self.pos = pos


@dataclass(frozen=True, slots=True)
class Located:
    """The verdict of the walk: ``kind`` (FOUND, MISSING, NOT_OBJECT) at ``level`` and, when
    FOUND, the leaf's ``token`` kind and its bytes ``doc[start:end]``."""

    kind: int
    level: int
    token: int = -1
    start: int = -1
    end: int = -1


_WS = re.compile(rb"[ \t\n\r]*")
_NUMBER = re.compile(rb"-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?")
_PLAIN = re.compile(rb'[^"\\\x00-\x1f]*')  # string bytes with nothing to interpret
_HEX4 = re.compile(rb"[0-9a-fA-F]{4}")
_ESCAPES = {ord(k): v for k, v in {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n"}.items()}
_ESCAPES.update({ord("r"): "\r", ord("t"): "\t"})
_LITERALS = {ord("t"): (b"true", TRUE), ord("f"): (b"false", FALSE), ord("n"): (b"null", NULL)}


def string_at(doc: bytes, pos: int) -> tuple[str, int]:
    """The string whose opening quote is at ``pos``, decoded, and the position after it."""
    parts: list[str] = []
    pos += 1
    while True:
        run = _PLAIN.match(doc, pos)
        assert run is not None  # the pattern matches the empty run
        try:
            parts.append(run.group().decode())
        except UnicodeDecodeError as e:
            raise JsonSyntaxError("invalid UTF-8 in a string", pos + e.start) from None
        pos = run.end()
        if pos >= len(doc):
            raise JsonSyntaxError("the document ends inside a string", pos)
        byte = doc[pos]
        if byte == 0x22:
            return "".join(parts), pos + 1
        if byte != 0x5C:
            raise JsonSyntaxError("a control character in a string", pos)
        code, pos = _escape(doc, pos)
        parts.append(code)


def _escape(doc: bytes, pos: int) -> tuple[str, int]:
    """The escape at ``pos`` (a backslash): its text and the position after it."""
    kind = doc[pos + 1] if pos + 1 < len(doc) else -1
    if kind in _ESCAPES:
        return _ESCAPES[kind], pos + 2
    unit = _hex4(doc, pos) if kind == ord("u") else None
    if unit is None:
        raise JsonSyntaxError("an invalid escape in a string", pos)
    if 0xDC00 <= unit <= 0xDFFF:
        raise JsonSyntaxError("a low surrogate with no high one before it", pos)
    if not 0xD800 <= unit <= 0xDBFF:
        return chr(unit), pos + 6
    low = _hex4(doc, pos + 6) if doc[pos + 6 : pos + 8] == b"\\u" else None
    if low is None or not 0xDC00 <= low <= 0xDFFF:
        raise JsonSyntaxError("a high surrogate with no low one after it", pos)
    return chr(0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00)), pos + 12


def _hex4(doc: bytes, pos: int) -> int | None:
    """The four hex digits after the ``\\u`` at ``pos``, or None."""
    found = _HEX4.match(doc, pos + 2)
    return int(found.group(), 16) if found else None


def _number(doc: bytes, pos: int) -> tuple[int, int]:
    """The kind (INTEGER or NUMBER) of the number at ``pos`` and the position after it."""
    found = _NUMBER.match(doc, pos)
    if found is None:
        raise JsonSyntaxError("a number without digits", pos)
    integer = found.group(1) is None and found.group(2) is None
    if not (integer and _int_range(found.group())) and math.isinf(float(found.group())):
        raise JsonSyntaxError("a number beyond a double's range", pos)
    return (INTEGER if integer else NUMBER), found.end()


def _int_range(token: bytes) -> bool:
    """An integer token orjson keeps as an int, [-2^63, 2^64) (else it becomes a float)."""
    return len(token) <= 21 and -(2**63) <= int(token) < 2**64


def locate(doc: bytes, path: Sequence[str]) -> Located:
    """Where the value at ``path`` is in ``doc``, after checking that the whole document is JSON
    (:class:`JsonSyntaxError` if not).

    One pass, no recursion: ``stack`` holds whether each open container is an object, and
    ``matched`` counts the parts of the path the open objects match — the object at depth
    ``matched + 1`` is the one whose keys are compared (-1: the value is not an object).
    ``pending`` says what the next value is for the path: nothing, the leaf, or a step.
    """
    found = Located(NOT_OBJECT, 0)
    stack: list[bool] = []
    matched, pending, leaf_depth = -1, _NOTHING, -1
    pos = _ws(doc, 0)
    while True:  # a value starts at pos
        start, byte = pos, _byte(doc, pos)
        if byte in (0x7B, 0x5B):  # { or [
            is_object = byte == 0x7B
            if len(stack) == MAX_DEPTH:
                raise JsonSyntaxError(f"more than {MAX_DEPTH} nested containers", pos)
            found, matched, leaf_depth = _opened(
                is_object, start, len(stack), pending, len(path), (found, matched, leaf_depth)
            )
            pending = _NOTHING
            stack.append(is_object)
            pos = _ws(doc, pos + 1)
            if _byte(doc, pos) != (0x7D if is_object else 0x5D):
                if is_object:
                    pos, pending = _key(doc, pos, path, matched if len(stack) == matched + 1 else -1)
                continue  # the first member's value
        else:
            token, pos = _scalar(doc, pos)
            if pending == _LEAF:
                found = Located(FOUND, len(path), token, start, pos)
            elif pending == _STEP:
                found = Located(NOT_OBJECT, matched + 1)
            pending = _NOTHING
            pos = _ws(doc, pos)
        while True:  # after a value, or at an empty container's bracket: close, separate or end
            if not stack:
                if pos != len(doc):
                    raise JsonSyntaxError("content after the document", pos)
                return found
            byte = _byte(doc, pos)
            if byte == (0x7D if stack[-1] else 0x5D):
                if len(stack) == leaf_depth:
                    found, leaf_depth = Located(FOUND, found.level, found.token, found.start, pos + 1), -1
                if stack[-1] and len(stack) == matched + 1 and matched > 0:
                    matched -= 1
                stack.pop()
                pos = _ws(doc, pos + 1)
                continue
            if byte != 0x2C:
                raise JsonSyntaxError("no ',' or closing bracket after a value", pos)
            pos = _ws(doc, pos + 1)
            if stack[-1]:
                pos, pending = _key(doc, pos, path, matched if len(stack) == matched + 1 else -1)
            break


_NOTHING, _LEAF, _STEP = 0, 1, 2


def _opened(
    is_object: bool, start: int, depth: int, pending: int, parts: int, state: tuple[Located, int, int]
) -> tuple[Located, int, int]:
    """What opening a container at ``start`` means for a path of ``parts`` parts: the new
    (verdict, parts matched, depth at which the leaf's container closes) from those before
    (``state``) and what the container is to the path (``pending``); ``depth`` 0 is the value."""
    found, matched, leaf_depth = state
    if depth == 0 and is_object:
        return Located(MISSING, 1), 0, leaf_depth
    if pending == _LEAF:
        return Located(FOUND, parts, OBJECT if is_object else ARRAY, start), matched, depth + 1
    if pending == _STEP and is_object:
        return Located(MISSING, matched + 2), matched + 1, leaf_depth
    if pending == _STEP:
        return Located(NOT_OBJECT, matched + 1), matched, leaf_depth
    return found, matched, leaf_depth


def _ws(doc: bytes, pos: int) -> int:
    return _WS.match(doc, pos).end()  # type: ignore[union-attr]  # matches the empty run


def _byte(doc: bytes, pos: int) -> int:
    return doc[pos] if pos < len(doc) else -1


def _scalar(doc: bytes, pos: int) -> tuple[int, int]:
    """The kind of the string, number or literal at ``pos`` and the position after it."""
    byte = _byte(doc, pos)
    if byte == 0x22:
        return STRING, string_at(doc, pos)[1]
    if byte == 0x2D or 0x30 <= byte <= 0x39:
        return _number(doc, pos)
    if byte in _LITERALS and doc.startswith(_LITERALS[byte][0], pos):
        return _LITERALS[byte][1], pos + len(_LITERALS[byte][0])
    raise JsonSyntaxError("no JSON value where one was expected", pos)


def _key(doc: bytes, pos: int, path: Sequence[str], level: int) -> tuple[int, int]:
    """Read a key and its colon at ``pos``: the position of its value, and what that value is
    for the path when ``level`` (the parts matched by the object) is not -1."""
    if _byte(doc, pos) != 0x22:
        raise JsonSyntaxError("no string key where one was expected", pos)
    key, pos = string_at(doc, pos)
    pos = _ws(doc, pos)
    if _byte(doc, pos) != 0x3A:
        raise JsonSyntaxError("no ':' after a key", pos)
    pos = _ws(doc, pos + 1)
    if level < 0 or key != path[level]:
        return pos, _NOTHING
    return pos, _LEAF if level == len(path) - 1 else _STEP


class _Container:
    """An object or array leaf, for the time rules' reason: its JSON text, shortened."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


def leaf_value(doc: bytes, found: Located) -> object:
    """The Python value orjson builds for the FOUND leaf (objects and arrays stand in as their
    text: no time rule accepts either, and the reason shows them)."""
    token = doc[found.start : found.end]
    if found.token == STRING:
        return string_at(doc, found.start)[0]
    if found.token == INTEGER:
        return int(token) if _int_range(token) else float(token)
    if found.token == NUMBER:
        return float(token)
    if found.token in (OBJECT, ARRAY):
        return _Container(token.decode(errors="replace"))
    return {TRUE: True, FALSE: False, NULL: None}[found.token]


def dotted(path: Sequence[str]) -> str:
    """A path for a reason: as written, or quoted when a name holds a line break or the like."""
    text = ".".join(path)
    return text if text.isprintable() else repr(text)


class JsonTimeScan:
    """Event time at ``path`` of JSON values, in ``unit``: the specification's verdicts, run in C
    when the extension is built (:attr:`native`)."""

    def __init__(self, path: Sequence[str], unit: Unit, rules: TimeRules) -> None:
        if not path or any(not part for part in path):
            raise ValueError(f"empty field name in JSON path {'.'.join(path)!r}")
        if unit not in UNITS:
            raise ValueError(f"unknown unit {unit!r}; allowed: {', '.join(UNITS)}")
        self.path = tuple(path)
        self.unit: Unit = unit
        self.field = dotted(path)
        self._rules = rules
        parts = tuple(part.encode("utf-8", "surrogatepass") for part in self.path)
        self.native = JsonScanner(parts, UNITS.index(unit), self.convert) if JsonScanner is not None else None

    def __repr__(self) -> str:
        return f"json:{'.'.join(self.path)}:{self.unit}"

    def millis(self, doc: bytes | None) -> int:
        """Event time in ms of one value; ``ValueError`` (one line: why) when it has none."""
        if doc is None:
            raise ValueError("value is null")
        if type(doc) is not bytes:  # a bytearray or memoryview is read as its bytes, as orjson does
            try:
                doc = memoryview(doc).tobytes()  # not bytes(doc): bytes(8) is eight NULs
            except TypeError:
                raise ValueError(f"value is {type(doc).__name__}, not bytes") from None
        try:
            found = locate(doc, self.path)
        except JsonSyntaxError as e:
            raise ValueError(f"value is not JSON: {e}") from None
        if found.kind == MISSING:
            raise ValueError(f"field {dotted(self.path[: found.level])} is missing")
        if found.kind == NOT_OBJECT:
            raise ValueError(f"{dotted(self.path[: found.level]) or 'value'} is not a JSON object")
        return self._rules.to_millis(leaf_value(doc, found), "plain", self.unit, self.field)

    def convert(self, doc: bytes, token: int, start: int, end: int) -> int:
        """The leaf ``doc[start:end]`` of kind ``token`` in ms, or INVALID: what the C twin calls
        for every leaf it does not convert itself."""
        try:
            value = leaf_value(doc, Located(FOUND, len(self.path), token, start, end))
            return self._rules.to_millis(value, "plain", self.unit, self.field)
        except (ValueError, OverflowError):  # OverflowError: an ISO date the offset moves past year 1
            return INVALID

    def explain(self, doc: bytes | None) -> str:
        """Why ``doc`` has no event time (one line), or ``"valid"``."""
        try:
            self.millis(doc)
        except (ValueError, OverflowError) as e:
            return str(e) if isinstance(e, ValueError) else f"{type(e).__name__}: {e}"
        return "valid"

    def millis_all(self, docs: Sequence[bytes | None]) -> list[int]:
        """Event times of ``docs``, INVALID where a value has none (:meth:`explain` says why)."""
        if self.native is not None:
            return self.native.millis_all(docs)
        return [self.verdict(doc) for doc in docs]

    def verdict(self, doc: bytes | None) -> int:
        """The specification's verdict on one value: its event time in ms, or INVALID."""
        try:
            return self.millis(doc)
        except (ValueError, OverflowError):
            return INVALID
