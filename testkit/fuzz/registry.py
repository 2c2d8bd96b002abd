"""Fuzz the schema registry's answers: ``python -m testkit.fuzz.registry --inputs N [--seed S]``.

Each input is one HTTP answer as the sidecar's client reads it — a status (the API's, and any
other), a body, whether the body was cut at the size bound, a ``Retry-After`` and a ``Location``
header — built by mutating real answers (a schema with references, Protobuf's, a 404's and a
429's error bodies, an HTML page, JSON nested deep): bytes flipped, inserted, deleted, chunks
duplicated or cut, JSON values swapped for others of another type. Each goes through
:func:`sidecar.registry.answers.interpret`, then :func:`schema_text` and :func:`reference_list`,
as the client does. The verdict must be a schema (text, type, references of the right types) or
one :class:`RegistryError` of one line, within :data:`MAX_CALL_S` of CPU time; anything else stops the
campaign, which is the finding. The suite runs the same checks a few hundred times
(``tests/unit/registry/test_answers.py``).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time

from sidecar.registry.answers import (
    MAX_RETRY_AFTER_S,
    Answer,
    RegistryError,
    RegistryUnavailableError,
    interpret,
    reference_list,
    schema_text,
)

MAX_CALL_S = 1.0
WHERE = "https://registry.example:8081/apis/ccompat/v7"

SEEDS: list[bytes] = [
    json.dumps(
        {
            "schema": json.dumps({"type": "record", "name": "R", "fields": [{"name": "ts", "type": "long"}]}),
            "references": [{"name": "common/money.proto", "subject": "money", "version": 2}],
        }
    ).encode(),
    json.dumps(
        {"schema": 'syntax = "proto3"; message M { int64 at = 1; }', "schemaType": "PROTOBUF"}
    ).encode(),
    b'{"error_code":40403,"message":"Schema 7 not found"}',
    b'{"error_code":42901,"message":"Too many requests"}',
    b"<html><body><h1>502 Bad Gateway</h1></body></html>",
    b"[" * 3000 + b"]" * 3000,
    b'{"schema": "\\ud800", "schemaType": null, "references": null}',
    b"",
]
STATUSES = [200] * 6 + [301, 302, 307, 400, 401, 403, 404, 410, 422, 429, 500, 502, 503]
JSON_SWAPS = [b"null", b"1", b"-1", b"true", b'""', b"[]", b"{}", b'"x"', b"1e999", b'"\\u2028"']


def mutate(data: bytes, rng: random.Random) -> bytes:
    """``data`` changed by one to four edits of the kinds listed in the module."""
    out = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        kind = rng.randrange(6)
        at = rng.randrange(len(out) + 1)
        if kind == 0 and out:
            out[min(at, len(out) - 1)] ^= 1 << rng.randrange(8)
        elif kind == 1:
            out[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
        elif kind == 2:
            del out[at : at + rng.randint(1, 16)]
        elif kind == 3 and out:
            start = rng.randrange(len(out))
            out[at:at] = out[start : start + rng.randint(1, 64)] * rng.randint(1, 8)
        elif kind == 4:
            del out[at:]
        else:
            text = bytes(out)
            colon = text.find(b":", at)
            if colon >= 0:
                end = colon + 1 + max(0, text[colon + 1 :].find(b","))
                out[colon + 1 : end] = rng.choice(JSON_SWAPS)
    return bytes(out)


def header(rng: random.Random) -> str | None:
    return rng.choice(
        [
            None,
            str(rng.randrange(-5, 10**12)),
            "Wed, 21 Oct 2015 07:28:00 GMT",
            "soon",
            "\x00",
            "9" * 80,
            "https://user:pw@other.example/x?t=1",
            "/relative",
            "javascript:alert(1)\r\nX: y",
        ]
    )


def check(answer: Answer) -> None:
    """One input: raises AssertionError (or whatever escaped) on a finding."""
    started = time.thread_time()  # CPU time: a loaded machine's scheduling is no finding
    try:
        decoded = interpret(answer, "schema id 7", WHERE, 1.7e9, ("tok-secret",))
        text, kind = schema_text(decoded, "schema id 7")
        refs = reference_list(decoded, "schema id 7")
    except RegistryError as e:
        error: RegistryError | None = e
    else:
        error = None
    if error is not None:
        message = str(error)
        assert len(message.splitlines()) == 1, message
        assert "tok-secret" not in message
        wait = error.retry_after_s if isinstance(error, RegistryUnavailableError) else None
        assert wait is None or 0 <= wait <= MAX_RETRY_AFTER_S
    else:
        assert answer.status == 200
        assert isinstance(text, str)
        assert isinstance(kind, str)
        assert len(kind.splitlines()) == 1
        assert all(isinstance(n, str) and isinstance(s, str) and type(v) is int for n, s, v in refs)
    elapsed = time.thread_time() - started
    assert elapsed < MAX_CALL_S, f"{elapsed:.2f} s"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m testkit.fuzz.registry", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--inputs", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    started = time.monotonic()
    for i in range(args.inputs):
        body = rng.choice(SEEDS)
        if rng.random() < 0.9:
            body = mutate(body, rng)
        answer = Answer(rng.choice(STATUSES), body, rng.random() < 0.95, header(rng), header(rng))
        try:
            check(answer)
        except BaseException as e:
            print(
                f"finding at input {i} (seed {args.seed}): {type(e).__name__}: {e}\n{answer!r}",
                file=sys.stderr,
            )
            return 1
        if i and i % 1_000_000 == 0:
            print(f"{i:,} inputs, {time.monotonic() - started:.0f} s", file=sys.stderr)
    print(f"{args.inputs:,} inputs, no finding, {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
