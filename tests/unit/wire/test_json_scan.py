"""The JSON path scanner gives today's ``json:`` verdicts without building the document.

Three layers, each held to the next: orjson's rules (measured here, so a new orjson that changes
one fails this file first), the specification (``json_scan.locate`` and ``JsonTimeScan``), and
its C twin (``_json_scan.JsonScanner``), on documents ordinary and hostile. The long campaign is
``python -m testkit.fuzz.json --inputs N``.
"""

from __future__ import annotations

import random

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sidecar.formats import timevalues
from testkit.fuzz.json import OVERFLOW, check, draw_input
from timesync_wire.formats import json_scan
from timesync_wire.formats.json_scan import (
    INVALID,
    MAX_DEPTH,
    JsonSyntaxError,
    JsonTimeScan,
    Located,
    leaf_value,
    locate,
)

#: (document, whether orjson reads it): each rule of the module docstring, at its edge.
ORJSON_RULES = [
    (b"", False), (b" \n", False), (b"\xef\xbb\xbf{}", False), (b"{} \t\r\n", True), (b"{}x", False),
    (b"{}\x00", False), (b"1 2", False), (b"\x0c1", False), (b"\x0b1", False), (b"\t\n\r 1", True),
    (b"01", False), (b"-01", False), (b"-0", True), (b"1.", False), (b".5", False), (b"1e", False),
    (b"1e+", False), (b"1E+5", True), (b"+1", False), (b"-", False), (b"0x10", False), (b"NaN", False),
    (b"Infinity", False), (b"-Infinity", False), (b"nan", False), (b"1.5e-400", True), (b"1e400", False),
    (b"-1e400", False), (b"1.7976931348623158e308", True), (b"1.7976931348623159e308", False),
    (OVERFLOW[:-1].encode() + b"1", True), (OVERFLOW.encode(), False),
    (b"0." + OVERFLOW.encode() + b"e309", False), (b"0.0e99999999999", True), (b"1" + b"0" * 400, False),
    (b"1" + b"0" * 300, True), (b'"\\u00e9"', True), (b'"\\ud83d\\ude00"', True), (b'"\\uD83D\\uDE00"', True),
    (b'"\\ud83d"', False), (b'"\\ude00"', False), (b'"\\ud83dx"', False), (b'"\\ud83d\\u0041"', False),
    (b'"\\ud800\\ud800"', False), (b'"\\u0000"', True), (b'"\\x"', False), (b"\"\\'\"", False),
    (b'"\\/"', True), (b'"\\u12"', False), (b'"\\u12G4"', False), (b'"\\U0041"', False),
    (b'"a\x01"', False), (b'"a\x1f"', False), (b'"a\x7f"', True), (b'"\xed\xa0\x80"', False),
    (b'"\xc0\x80"', False), (b'"\xe0\x80\x80"', False), (b'"\xf4\x90\x80\x80"', False), (b'"\xff"', False),
    (b'"\xef\xbf\xbe"', True), (b'"\xf4\x8f\xbf\xbf"', True), (b'"abc', False), (b'{"a":1,}', False),
    (b"[1,]", False), (b'{"a" 1}', False), (b"{1:2}", False), (b"[1,,2]", False), (b'{"a":}', False),
    (b"truex", False), (b"nul", False), (b"[ ]", True), (b'{ "a" : [ ] }', True),
    (b"[" * MAX_DEPTH + b"]" * MAX_DEPTH, True), (b"[" * (MAX_DEPTH + 1) + b"]" * (MAX_DEPTH + 1), False),
    (b'{"a":' * MAX_DEPTH + b"1" + b"}" * MAX_DEPTH, True),
    (b"[" * MAX_DEPTH + b"{}" + b"]" * MAX_DEPTH, False),
]  # fmt: skip


def orjson_reads(doc: bytes) -> bool:
    try:
        orjson.loads(doc)
    except orjson.JSONDecodeError:
        return False
    return True


def spec_reads(doc: bytes) -> bool:
    try:
        locate(doc, ("ts",))
    except JsonSyntaxError:
        return False
    return True


@pytest.mark.parametrize(("doc", "json"), ORJSON_RULES, ids=[repr(d[:24]) for d, _ in ORJSON_RULES])
def test_a_document_is_json_exactly_when_orjson_reads_it(doc: bytes, json: bool) -> None:
    assert orjson_reads(doc) is json, "orjson changed: measure again and update json_scan's rules"
    assert spec_reads(doc) is json
    scan = JsonTimeScan(["ts"], "ms", timevalues)
    if scan.native is not None:
        assert (scan.native.locate(doc) is not None) is json


@pytest.mark.parametrize(
    "token", [b"0", b"-0", b"-0.0", b"1e2", str(2**64 - 1).encode(), str(2**64).encode()]
)
@pytest.mark.parametrize("sign", [b"", b"-"])
def test_an_integer_is_an_int_in_64_bits_and_a_float_beyond_as_in_orjson(token: bytes, sign: bytes) -> None:
    doc = b'{"ts":' + (sign + token).replace(b"--", b"-") + b"}"
    expected = orjson.loads(doc)["ts"]
    value = leaf_value(doc, locate(doc, ("ts",)))
    assert (value, type(value)) == (expected, type(expected))


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        (b'{"meta":{"ts":1},"meta":{"ts":2}}', 2),
        (b'{"meta":{"ts":1},"meta":{}}', "field meta.ts is missing"),
        (b'{"meta":{"ts":1},"meta":7}', "meta is not a JSON object"),
        (b'{"meta":7,"meta":{"ts":3}}', 3),
        (b'{"meta":{"ts":1,"ts":4}}', 4),
        (b'{"m\\u0065ta":{"\\u0074s":5}}', 5),
        (b'{"meta":[{"ts":1}]}', "meta is not a JSON object"),
        (b'[{"meta":{"ts":1}}]', "value is not a JSON object"),
        (b'{"x":{"meta":{"ts":1}}}', "field meta is missing"),
    ],
)
def test_the_walk_takes_the_last_of_duplicate_keys_as_orjson_builds_them(
    doc: bytes, expected: int | str
) -> None:
    scan = JsonTimeScan(["meta", "ts"], "ms", timevalues)
    assert scan.millis_all([doc]) == [expected if isinstance(expected, int) else INVALID]
    assert scan.explain(doc) == ("valid" if isinstance(expected, int) else expected)
    if isinstance(expected, int):
        assert orjson.loads(doc)["meta"]["ts"] == expected


@pytest.mark.parametrize(
    ("leaf", "unit", "expected"),
    [
        (b"1700000000000123", "us", 1_700_000_000_000),
        (b"-999", "us", INVALID),  # -999 // 1000 is -1: negative, as in the time rules
        (b"-0", "ms", 0),
        (b"9223372036854775", "s", 9_223_372_036_854_775_000),
        (b"9223372036854776", "s", INVALID),
        (b"18446744073709551615", "us", 18_446_744_073_709_551),
        (b"18446744073709551616", "us", int(float(2**64) / 1000)),  # a float past 64 bits, as orjson reads it
        (b"9223372036854775808", "ms", INVALID),
        (b'"1700000000000"', "ms", 1_700_000_000_000),
        (b'"2024-05-01T12:00:00Z"', "iso", 1_714_564_800_000),
        (b"1.5", "s", 1500),
    ],
)
def test_a_leaf_converts_as_the_shared_time_rules_say(
    leaf: bytes, unit: json_scan.Unit, expected: int
) -> None:
    doc = b'{"ts":' + leaf + b"}"
    rules = (
        timevalues.to_millis(orjson.loads(doc)["ts"], "plain", unit, "ts") if expected != INVALID else INVALID
    )
    assert expected == rules
    scan = JsonTimeScan(["ts"], unit, timevalues)
    assert scan.verdict(doc) == expected
    assert scan.millis_all([doc]) == [expected]


def test_a_leaf_nested_a_thousand_deep_is_an_invalid_time_not_a_recursion_error() -> None:
    doc = b'{"ts":' + b"[" * 1000 + b"]" * 1000 + b"}"
    scan = JsonTimeScan(["ts"], "ms", timevalues)
    assert scan.millis_all([doc]) == [INVALID] == [scan.verdict(doc)]
    assert scan.explain(doc).startswith("field ts is not a number: [[[")
    assert "\n" not in scan.explain(doc)


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 2**32))
def test_the_specification_and_the_c_scanner_give_todays_verdict(seed: int) -> None:
    """Documents drawn as the campaign draws them (testkit.fuzz.json), mutated, deep or random."""
    check(*draw_input(random.Random(seed)))


@settings(max_examples=150, deadline=None)
@given(inside=st.binary(max_size=12))
def test_any_bytes_in_a_string_are_json_exactly_when_orjson_says(inside: bytes) -> None:
    check(b'{"ts":"' + inside + b'"}', ("ts",), "ms")


@settings(max_examples=100, deadline=None)
@given(
    token=st.from_regex(rb"\A-?(0|[1-9][0-9]{0,24})(\.[0-9]{1,20})?([eE][+-]?[0-9]{1,4})?\Z"),
    unit=st.sampled_from(("ms", "s", "us", "iso")),
)
def test_any_number_is_read_as_orjson_reads_it_and_converted_alike(
    token: bytes, unit: json_scan.Unit
) -> None:
    doc = b'{"ts":' + token + b"}"
    if orjson_reads(doc):
        value = leaf_value(doc, locate(doc, ("ts",)))
        assert (value, type(value)) == (orjson.loads(doc)["ts"], type(orjson.loads(doc)["ts"]))
    check(doc, ("ts",), unit)


@pytest.mark.parametrize("native", [True, False], ids=["C", "specification"])
def test_values_that_are_not_bytes_are_read_as_their_bytes_or_are_invalid(native: bool) -> None:
    scan = JsonTimeScan(["ts"], "ms", timevalues)
    if not native:
        scan.native = None
    values: list[object] = [None, b'{"ts":5}', bytearray(b'{"ts":6}'), memoryview(b'{"ts":7}'), "text", 8]
    assert scan.millis_all(values) == [INVALID, 5, 6, 7, INVALID, INVALID]  # type: ignore[arg-type]
    assert scan.explain(None) == "value is null"
    assert scan.explain(8) == "value is int, not bytes"  # type: ignore[arg-type]


def test_without_the_c_extension_the_specification_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(json_scan, "JsonScanner", None)
    scan = JsonTimeScan(["meta", "ts"], "s", timevalues)
    assert scan.native is None
    assert scan.millis_all([b'{"meta":{"ts":2}}', b"{", None]) == [2000, INVALID, INVALID]


def test_every_reason_is_one_line_naming_what_was_wrong() -> None:
    scan = JsonTimeScan(["meta", "ts"], "iso", timevalues)
    reasons = {
        b"{": "value is not JSON: no string key where one was expected at byte 1",
        b'{"meta":{"ts":"\\ud800"}}': (
            "value is not JSON: a high surrogate with no low one after it at byte 15"
        ),
        b'{"meta":{"ts":"2024-05-01T12:00:00"}}': "field meta.ts has no time zone: '2024-05-01T12:00:00'",
        b'{"meta":{"ts":17}}': "field meta.ts is not an ISO-8601 string: 17",
    }
    assert {doc: scan.explain(doc) for doc in reasons} == reasons


def test_a_path_or_unit_the_scan_cannot_read_is_refused_when_it_is_built() -> None:
    with pytest.raises(ValueError, match="empty field name"):
        JsonTimeScan(["meta", ""], "ms", timevalues)
    with pytest.raises(ValueError, match="unknown unit 'ns'"):
        JsonTimeScan(["ts"], "ns", timevalues)  # type: ignore[arg-type]
    assert locate(b"[]", ("ts",)) == Located(json_scan.NOT_OBJECT, 0)
