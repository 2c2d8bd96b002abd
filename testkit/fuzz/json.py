"""Fuzz campaign for the JSON path scanner: ``python -m testkit.fuzz.json --inputs N``.

It feeds :func:`draw_input`: JSON documents with objects and arrays on the way to the path, duplicate
keys, keys and strings written with every escape (surrogate pairs too, and lone ones), numbers at
each edge orjson has (the int range, the float overflow boundary, leading zeros), odd whitespace
— then mutated byte by byte, cut short, nested around orjson's depth limit, or plain random
bytes. Each input, with a path and unit drawn, is judged three ways that must agree: today's
extractor (:func:`today`: orjson and the walk, then the time rules), the specification
(``timesync_wire.formats.json_scan``) and its C twin (verdict and location).

Inputs are drawn by plain functions of a seeded ``random.Random`` (hypothesis's per-draw cost
would make a long run slow): input n of a run is seed ``--seed + n``, so any input is redrawn
from its seed. The suite runs the same checks small, hypothesis choosing the seeds
(``tests/unit/wire/``); this runs them long. Progress is a line per 10 % of the inputs
(rewritten in place on a terminal); a summary ends the run, and a disagreement, or an input
whose checks take over :data:`MAX_CALL_S`, stops it, naming the seed and the input.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import orjson

from sidecar.core.records import Record
from sidecar.core.timestamps import JsonTimestamp
from sidecar.formats import timevalues
from timesync_wire.formats.json_scan import INVALID, JsonSyntaxError, JsonTimeScan, Unit, locate

KEYS = ("meta", "ts", "a", "", "méta", "😀", "t\x00s")
PATHS: tuple[tuple[str, ...], ...] = (
    ("meta", "ts"),
    ("ts",),
    ("meta",),
    ("a", "meta", "ts"),
    ("😀", "t\x00s"),
)
UNITS: tuple[Unit, ...] = ("ms", "s", "us", "iso")
#: One input's checks taking longer than this is a finding: bounded work means milliseconds.
MAX_CALL_S = 2.0
#: 2^1024 - 2^970: the least magnitude a double rounds to infinity (and orjson refuses).
OVERFLOW = str(2**1024 - 2**970)
EDGE_NUMBERS = (
    "0", "-0", "-0.0", "0e0", "1", "-1", "999", "1000", "1700000000000", "1.5", "1e3", "1E+3", "2.5e-3",
    str(2**63 - 1), str(2**63), str(2**64 - 1), str(2**64), str(-(2**63)), str(-(2**63) - 1), "1" + "0" * 25,
    "1e308", "1.7976931348623157e308", "1.7976931348623158e308", "1.7976931348623159e308", "1e309", "-1e400",
    OVERFLOW, OVERFLOW[:-1] + "1", OVERFLOW + "0", "0." + OVERFLOW + "e309", "0.0001e313", "1e-400",
    "0.0e999", "9223372036854775.807e3", "9223372036854776e3",
)  # fmt: skip
TIME_STRINGS = (
    "2024-05-01T12:00:00Z", "2024-05-01T12:00:00+02:00", "2024-05-01T12:00:00", "0001-01-01T00:00:00+01:00",
    "9999-12-31T23:59:59.999999-12:00", " 12 ", "1_000", "1e3", "nan", "inf", "-5", "", "x",
)  # fmt: skip
WHITESPACE = ("", "", " ", "\n", "\t", "\r\n ")
ESCAPES = {
    '"': '\\"',
    "\\": "\\\\",
    "/": "\\/",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
}

Node = tuple[str, Any]


def leaf(rng: random.Random, timely: bool = False) -> Node:
    """A string, number or literal; ``timely``: mostly one that may well be a time."""
    roll = rng.random()
    if timely and roll < 0.4:
        return ("raw", str(rng.choice((rng.randrange(2**41), rng.randrange(2**64), 1_700_000_000_000))))
    if timely and roll < 0.6:
        return ("str", rng.choice((*TIME_STRINGS[:2], str(rng.randrange(2**41)))))
    if roll < 0.3:
        return ("raw", rng.choice(EDGE_NUMBERS))
    if roll < 0.5:
        whole, exp = rng.randrange(10**20), rng.choice(("", f"e{rng.randrange(-330, 330)}"))
        return (
            "raw",
            f"{'-' if rng.random() < 0.2 else ''}{whole}{rng.choice(('', '.0', '.5', '.0001'))}{exp}",
        )
    if roll < 0.75:
        return (
            "str",
            rng.choice(TIME_STRINGS + KEYS + ("".join(chr(rng.randrange(0x30000)) for _ in range(3)),)),
        )
    return ("raw", rng.choice(("true", "false", "null")))


def tree(rng: random.Random, depth: int) -> Node:
    """A leaf, or an array or object (keys from :data:`KEYS`, so duplicates come) of trees."""
    if depth == 0 or rng.random() < 0.4:
        return leaf(rng)
    items = [tree(rng, depth - 1) for _ in range(rng.randrange(4))]
    if rng.random() < 0.3:
        return ("arr", items)
    return ("obj", [(rng.choice(KEYS), item) for item in items])


def planted(rng: random.Random, path: Sequence[str]) -> Node:
    """An object tree holding ``path`` (its parts may come again: the last one wins), with other
    members around it."""
    node = leaf(rng, timely=True) if rng.random() < 0.8 else tree(rng, 2)
    for part in reversed(path):
        pairs = [(rng.choice(KEYS), tree(rng, 2)) for _ in range(rng.randrange(3))]
        pairs.insert(rng.randrange(len(pairs) + 1), (part, node))
        node = ("obj", pairs)
    return node


def written(rng: random.Random, node: Node) -> bytes:
    """``node`` as JSON text, whitespace and escapes drawn."""
    space = rng.choice(WHITESPACE).encode()
    kind, body = node
    if kind == "raw":
        return space + str(body).encode() + space
    if kind == "str":
        return space + string(rng, body)
    if kind == "arr":
        items = [written(rng, item) for item in body]
    else:
        items = [string(rng, key) + space + b":" + written(rng, value) for key, value in body]
    opening, closing = (b"[", b"]") if kind == "arr" else (b"{", b"}")
    return opening + space + b",".join(items) + space + closing


def string(rng: random.Random, text: str) -> bytes:
    """``text`` as a JSON string, each character plain or escaped (astral ones as a surrogate
    pair), at random."""
    out = []
    for char in text:
        escape = rng.random() < 0.3
        if char in ESCAPES or ord(char) < 0x20:
            out.append(ESCAPES.get(char, f"\\u{ord(char):04x}") if not escape else f"\\u{ord(char):04x}")
        elif escape and ord(char) > 0xFFFF:
            high, low = divmod(ord(char) - 0x10000, 0x400)
            out.append(f"\\u{0xD800 + high:04x}\\u{0xDC00 + low:04X}")
        else:
            out.append(f"\\u{ord(char):04X}" if escape else char)
    return ('"' + "".join(out) + '"').encode("utf-8", "surrogatepass")


MUTATION_BYTES = b'{}[],:"\\u0123456789abcdefABCDEF.-+eE \x00\x1f\x7f\x80\xbf\xc3\xed\xf0\xf4\xff'


def mutated(rng: random.Random, doc: bytes) -> bytes:
    """``doc`` with a few bytes replaced, inserted or removed, or cut short."""
    data = bytearray(doc)
    for _ in range(rng.randrange(1, 5)):
        at, what = rng.randrange(len(data) + 1), rng.randrange(4)
        if what == 0 and at < len(data):
            data[at] = rng.choice(MUTATION_BYTES)
        elif what == 1:
            data.insert(at, rng.choice(MUTATION_BYTES))
        elif what == 2 and at < len(data):
            del data[at]
        elif what == 3 and rng.random() < 0.3:
            del data[at:]
    return bytes(data)


def deep(rng: random.Random) -> bytes:
    """Containers nested around orjson's limit (1024), on the path or off it."""
    depth = rng.randrange(1015, 1031)
    kind = rng.randrange(3)
    if kind == 0:
        return b"[" * depth + b"1" + b"]" * depth
    if kind == 1:
        return b'{"a":' * depth + b"1" + b"}" * depth
    return b'{"meta":{"ts":' + b"[" * (depth - 2) + b"]" * (depth - 2) + b"}}"


def draw_input(rng: random.Random) -> tuple[bytes, tuple[str, ...], Unit]:
    """A document, the path to look for and the unit (see the module docstring)."""
    path = rng.choice(PATHS)
    doc = written(rng, planted(rng, path) if rng.random() < 0.7 else tree(rng, 4))
    roll = rng.random()
    if roll < 0.3:
        doc = mutated(rng, doc)
    elif roll < 0.33:
        doc = deep(rng)
    elif roll < 0.36:
        doc = rng.randbytes(rng.randrange(40))
    return doc, path, rng.choice(UNITS)


def today(doc: bytes, path: Sequence[str], unit: Unit) -> int:
    """Today's verdict: ``JsonTimestamp`` for ms, s and iso; for us (which it lacks) its walk
    with the time rules' ``us``. Where today's extractor raises ``RecursionError`` — its reason
    for a leaf nested about 1000 deep calls ``repr`` on it, and that escapes ``extract_all`` —
    the verdict is INVALID: the only one a record can have, and the scanner's."""
    try:
        if unit != "us":
            return JsonTimestamp(path, unit).extract_all([Record("t", 0, 0, timestamp=0, value=doc)])[0]
        node = orjson.loads(doc)
        for part in path:
            if not isinstance(node, dict):
                return INVALID
            node = node[part]
        return timevalues.to_millis(node, "plain", "us", ".".join(path))
    except (ValueError, KeyError, OverflowError, RecursionError):
        return INVALID


def check(doc: bytes, path: Sequence[str], unit: Unit) -> int:
    """Assert that today's extractor, the specification and the C scanner agree on ``doc``;
    the verdict."""
    scan = JsonTimeScan(path, unit, timevalues)
    expected = today(doc, path, unit)
    assert scan.verdict(doc) == expected, (doc, path, unit, scan.explain(doc))
    if scan.native is not None:
        try:
            found = locate(doc, path)
            spec = (found.kind, found.level, found.token, found.start, found.end)
        except JsonSyntaxError:
            spec = None
        assert scan.native.locate(doc) == spec, (doc, path)
        assert scan.native.millis(doc) == expected, (doc, path, unit)
    return expected


def campaign(count: int, seed: int, out: Callable[[str, bool], None]) -> int:
    """Run ``count`` inputs (drawn from seeds ``seed``, ``seed + 1``, …) through :func:`check`;
    0, or 1 at the first disagreement, named with its seed."""
    valid, started, step = 0, time.monotonic(), max(1, count // 10)
    for n in range(count):
        case = draw_input(random.Random(seed + n))
        checked = time.thread_time()  # CPU time: a loaded machine's scheduling is no finding
        try:
            valid += check(*case) != INVALID
            spent = time.thread_time() - checked
            assert spent < MAX_CALL_S, (
                f"the checks took {spent:.2f} s (bound {MAX_CALL_S} s): unbounded work?"
            )
        except AssertionError as e:
            out(f"DISAGREEMENT at seed {seed + n}: {case!r}: {e}", True)
            return 1
        if (n + 1) % step == 0:
            out(f"{n + 1}/{count} inputs, {time.monotonic() - started:.0f} s", False)
    took = time.monotonic() - started
    out(
        f"{count} inputs (seeds {seed}..{seed + count - 1}) in {took:.0f} s: all agree, {valid} with a time",
        True,
    )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m testkit.fuzz.json", description=__doc__.split("\n")[0])
    parser.add_argument("--inputs", type=int, default=100_000, help="how many inputs (default 100000)")
    parser.add_argument("--seed", type=int, default=0, help="the first input's seed (default 0)")
    args = parser.parse_args(argv)
    return campaign(args.inputs, args.seed, progress_printer(sys.stdout.isatty()))


def progress_printer(tty: bool) -> Callable[[str, bool], None]:
    """Progress lines: rewritten in place on a terminal, one a line otherwise; a final line ends
    with a line break either way."""

    def out(line: str, final: bool) -> None:
        if tty:
            print("\r\033[K" + line, end="\n" if final else "", flush=True)
        else:
            print(line, flush=True)

    return out


if __name__ == "__main__":
    sys.exit(main())
