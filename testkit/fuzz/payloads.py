"""What the Avro and Protobuf fuzzers share: byte mutations of registry payloads, the verdicts a
parser may give, and the campaign loop (deterministic per input, progress, a summary).

The mutations take a ``random.Random``, so the suite's property tests (hypothesis hands them a
seeded one) and the long campaigns (``python -m testkit.fuzz.avro`` / ``.protobuf``) feed the
parsers the same kinds of input. Input *i* of a campaign with seed *s* always draws from
``random.Random(f"{s}:{i}")``: a failure is replayed with ``--seed s --start i --inputs 1``.
"""

from __future__ import annotations

import argparse
import faulthandler
import random
import sys
import time
from collections.abc import Callable, Sequence

#: A call that spends more CPU than this is a failure (a hang in the making): bounded work means
#: milliseconds. CPU time of the calling thread, not wall time: a campaign runs niced beside other
#: work, and a loaded machine must not turn a slow wall clock into a finding.
MAX_CALL_S = 2.0


class Finding(AssertionError):
    """A parser broke its contract on one input: crashed into an unexpected exception, disagreed
    with its specification, or took too long. The message says which input and how."""


def zigzag_varint(n: int) -> bytes:
    """``n`` as a zigzag varint (Avro's long, a Kafka varlong)."""
    z = ((n << 1) ^ (n >> 63)) & (2**64 - 1)
    out = bytearray()
    while z > 0x7F:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


#: Varints a hostile writer would pick: ends of ranges, counts of nothing-sized items, ten-byte
#: encodings whose tenth byte is 0, 1, over 1, or goes on.
SPECIAL_VARINTS = [
    *(zigzag_varint(n) for n in (0, -1, 1, 2**31, -(2**31), 2**62, -(2**62), 2**63 - 1, -(2**63))),
    *(low * 9 + bytes([tenth]) for low in (b"\x80", b"\xff") for tenth in (0, 1, 2, 0x7F, 0x80, 0x81)),
    b"\xff" * 11,
    b"\x80",
]


def mutate(data: bytes, rng: random.Random, edits: int | None = None) -> bytes:
    """``data`` with a few random edits: bytes flipped, set, inserted, deleted, a range copied
    (deeper nesting), the end cut, a hostile varint spliced in."""
    out = bytearray(data)
    for _ in range(edits if edits is not None else rng.choice((1, 1, 2, 3, 8))):
        at = rng.randrange(len(out) + 1)
        kind = rng.randrange(8)
        if kind == 0 and at < len(out):
            out[at] ^= 1 << rng.randrange(8)
        elif kind == 1 and at < len(out):
            out[at] = rng.choice((0, 1, 2, 0x7F, 0x80, 0xFF, rng.randrange(256)))
        elif kind == 2:
            out[at:at] = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 9)))
        elif kind == 3:
            del out[at : at + rng.randrange(1, 9)]
        elif kind == 4 and out:
            start = rng.randrange(len(out))
            piece = out[start : start + rng.randrange(1, 33)]
            out[at:at] = piece * rng.choice((1, 2, 16, 256))
        elif kind == 5:
            del out[at:]
        else:
            end = at + rng.randrange(0, 11)
            out[at:end] = rng.choice(SPECIAL_VARINTS)
    return bytes(out)


def timed(what: str, call: Callable[[], object]) -> object:
    """``call()``, a :class:`Finding` if it spent more CPU than :data:`MAX_CALL_S`."""
    started = time.thread_time()
    try:
        return call()
    finally:
        spent = time.thread_time() - started
        if spent > MAX_CALL_S:
            raise Finding(f"{what} took {spent:.2f} s of CPU (bound {MAX_CALL_S} s)")


Step = Callable[[random.Random], None]


def campaign(name: str, steps: Sequence[tuple[int, Step]], argv: Sequence[str] | None = None) -> int:
    """Run ``--inputs N`` inputs, each a step drawn by weight from ``steps``; print progress
    (a line every ``--every`` seconds; overwritten in place on a terminal) and a summary.
    Exit status 1 when anything was found."""
    parser = argparse.ArgumentParser(prog=f"python -m testkit.fuzz.{name}")
    parser.add_argument("--inputs", type=int, default=100_000, help="inputs to feed (default 100,000)")
    parser.add_argument("--seed", default="timesync", help="campaign seed: input i draws from f'{seed}:{i}'")
    parser.add_argument("--start", type=int, default=0, help="first input index (to replay one)")
    parser.add_argument("--every", type=float, default=10.0, help="seconds between progress lines")
    args = parser.parse_args(argv)
    faulthandler.enable()  # a crash still names the Python frames it happened under
    weights = [w for w, _ in steps]
    tty = sys.stdout.isatty()
    findings: list[str] = []
    started = last = time.monotonic()
    end = args.start + args.inputs
    for i in range(args.start, end):
        rng = random.Random(f"{args.seed}:{i}")
        step = rng.choices([s for _, s in steps], weights)[0]
        try:
            step(rng)
        except Finding as e:
            what = str(e) if len(str(e)) <= 600 else str(e)[:600] + "…"
            findings.append(f"input {i}: {what}")
            print(f"FOUND (replay: --seed {args.seed} --start {i} --inputs 1): {what}", flush=True)
        now = time.monotonic()
        if now - last >= args.every or i == end - 1:
            last = now
            done = i + 1 - args.start
            rate = done / max(now - started, 1e-9)
            line = f"{name}: {done:,}/{args.inputs:,} inputs, {rate:,.0f}/s, {len(findings)} found"
            print(("\r" + line) if tty else line, end="" if tty and i != end - 1 else "\n", flush=True)
    spent = time.monotonic() - started
    print(
        f"{name}: {args.inputs:,} inputs (seed {args.seed!r}, from {args.start}) in {spent:,.0f} s, "
        f"{len(findings)} found",
        flush=True,
    )
    for finding in findings[:50]:
        print(f"  {finding}", flush=True)
    return 1 if findings else 0
