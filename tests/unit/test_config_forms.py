"""What a key accepts is said once, and the JSON Schema of every key agrees with the sidecar.

The schema (:func:`sidecar.config.surface.json_schema`; the Helm chart's values schema is
generated from it) types a value as YAML reads it, the sidecar reads text: a value is judged
here as the chart renders it into the properties file (``500``, ``true``, ``0.5``). The rules:

* the schema never accepts a value the sidecar refuses (but for :data:`GAPS`, what no schema of
  one string can say);
* every form the listing names (every ``Literal`` value, every extractor form, ``max``,
  ``auto``...) is accepted by both;
* for whole numbers and for extractor specs the two agree exactly.

Only refusals of the value itself count: a rule spanning keys (``ssl.*`` without TLS,
``http.host`` off loopback without a token) is not a property of one value, and no per-key
schema can say it.
"""

from __future__ import annotations

import typing
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sidecar.config import KEYS, ConfigError, SidecarConfig, load_config
from sidecar.config.surface import json_schema, key_docs

BASE = (
    "bootstrap.servers=kafka:9092",
    "input.topics=orders",
    "output.topic=ordered-output",
    "schema.registry.url=http://registry:8081",
)
SCHEMAS = json_schema()["properties"]
BOUNDED = settings(max_examples=200, deadline=2000)


def rendered(value: Any) -> str:
    """``value`` as the chart's template writes it into the properties file."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def sidecar_refuses(key: str, value: Any) -> str | None:
    """Why the sidecar refuses ``key`` = ``value`` itself (``None``: the value is accepted)."""
    try:
        load_config(None, [*BASE, f"{key}={rendered(value)}"], environ={})
    except ConfigError as e:
        return str(e) if str(e).startswith(f"config error: {key} = ") else None
    return None


def schema_accepts(key: str, value: Any) -> bool:
    return jsonschema.Draft7Validator(SCHEMAS[key]).is_valid(value)


def literal_keys() -> list[tuple[str, tuple[str, ...]]]:
    return [
        (key, typing.get_args(SidecarConfig.model_fields[field].annotation))
        for key, field in KEYS.items()
        if typing.get_origin(SidecarConfig.model_fields[field].annotation) is typing.Literal
    ]


def test_every_key_has_one_line_of_meaning() -> None:
    for doc in key_docs():
        assert doc.meaning, doc.key
        assert "\n" not in doc.meaning, doc.key
        assert doc.accepts, doc.key
    assert [d.key for d in key_docs()] == list(KEYS)


@pytest.mark.parametrize(("key", "values"), literal_keys())
def test_every_literal_value_is_accepted_and_nothing_near_it(key: str, values: tuple[str, ...]) -> None:
    assert next(d for d in key_docs() if d.key == key).accepts == values
    for value in values:
        assert schema_accepts(key, value), value
        assert sidecar_refuses(key, value) is None, value
    for near in {v + "x" for v in values} | {v.swapcase() for v in values} | {"", "none-of-these"}:
        if near not in values:
            assert not schema_accepts(key, near), near
            assert sidecar_refuses(key, near), near


#: The forms beyond a type: what the listing says each key accepts, and values just outside.
FORMS = [
    ("max.task.idle.ms", [-1, 0, 500, 2**63 - 1, 2**70, "max", "auto"], [-2, "forever", 1.5, ""]),
    ("max.task.idle.budget.ms", [1, 1000], [0, -1, "max", "auto"]),
    ("delivery.timeout.ms", [1000, 120_000, "max"], [999, 0, "auto", -1]),
    ("schema.registry.unhealthy.after.ms", [1000, 300_000, "max"], [999, "auto"]),
    ("replication.factor", [-1, 1, 3], [0, -2, "max"]),
    ("compression.gzip.level", [-1, 1, 9], [0, 10, -2]),
    ("late.records", ["forward", "drop", "topic:late", "topic:a.b"], ["topic:", "Forward", "late"]),
    ("input.topics", ["a", "a,b", "a, b"], ["", "a,,b", ",", "a,"]),
    (
        "timestamp.extractor",
        ["record", "json:ts", "json:meta.ts:iso", "avro:meta.ts", "avro:ts:us", "protobuf:event.at:s"],
        ["json", "avro:", "xml:ts", "json:a..b", "json:.a", "json:ts:min", "json:ts:us", "Record"],
    ),
    (
        "schema.registry.url",
        ["", "https://registry:8081", "http://localhost:8081/apis/ccompat/v7"],
        ["https://user:pw@registry", "https://registry?token=x", "https://registry#x", "ftp://registry"],
    ),
    ("errors.deadletterqueue.max.ratio", [0.5, 1, 0.001], [0, 1.5, -0.1]),
    ("http.port", [0, 8080, 65535], [-1, 65536]),
]


@pytest.mark.parametrize(("key", "accepted", "refused"), FORMS, ids=[f[0] for f in FORMS])
def test_each_form_is_accepted_by_both_and_its_near_misses_by_neither(
    key: str, accepted: list[Any], refused: list[Any]
) -> None:
    for value in accepted:
        assert schema_accepts(key, value), value
        assert sidecar_refuses(key, value) is None, value
    for value in refused:
        assert not schema_accepts(key, value), value
        assert sidecar_refuses(key, value), value


WORDS = sorted({a for d in key_docs() for a in d.accepts} | {"", "max", "auto", "forever", "0x1F", "1e3"})
VALUES = st.one_of(
    st.integers(min_value=-(2**64), max_value=2**64),
    st.sampled_from([-131073, -131072, -2, -1, 0, 1, 9, 10, 17, 18, 22, 23, 999, 1000, 65535, 65536]),
    st.floats(allow_nan=False, allow_infinity=False, min_value=-2, max_value=2),
    st.booleans(),
    st.sampled_from(WORDS),
    st.text(max_size=12),
)


#: What a JSON Schema cannot say of a key, each with a value the schema lets through and the
#: sidecar refuses at start: the only exceptions to the rule below.
GAPS = {
    "input.topics": "orders,orders",  # a topic listed twice
    "schema.registry.url": "https://registry:99999",  # a port out of range (url_problem parses it)
}


@pytest.mark.parametrize(("key", "value"), GAPS.items())
def test_the_gaps_are_only_what_a_schema_cannot_say(key: str, value: str) -> None:
    assert schema_accepts(key, value)
    assert sidecar_refuses(key, value)


@BOUNDED
@given(key=st.sampled_from(sorted(set(SCHEMAS) - set(GAPS))), value=VALUES)
def test_the_schema_never_accepts_a_value_the_sidecar_refuses(key: str, value: Any) -> None:
    if schema_accepts(key, value):
        assert sidecar_refuses(key, value) is None


NUMERIC_KEYS = sorted(k for k in SCHEMAS if schema_accepts(k, 1000) or schema_accepts(k, -1))


@BOUNDED
@given(key=st.sampled_from(NUMERIC_KEYS), value=st.integers(min_value=-(2**64), max_value=2**64))
def test_for_whole_numbers_the_schema_and_the_sidecar_agree(key: str, value: int) -> None:
    assert schema_accepts(key, value) == (sidecar_refuses(key, value) is None)


#: Pieces of extractor specs: every format and unit word, near misses, and the separators.
SPEC_PIECES = ["record", "json", "avro", "protobuf", "xml", ":", ":", ".", "ts", "meta", "a b", "é"]
SPEC_PIECES += ["ms", "s", "us", "iso", "min", "Record", "JSON", "-"]


@BOUNDED
@given(spec=st.lists(st.sampled_from(SPEC_PIECES), max_size=7).map("".join))
def test_the_schema_accepts_exactly_the_extractors_the_sidecar_accepts(spec: str) -> None:
    assert schema_accepts("timestamp.extractor", spec) == (
        sidecar_refuses("timestamp.extractor", spec) is None
    )
