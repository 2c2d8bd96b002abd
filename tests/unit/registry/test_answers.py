"""The registry's answers are bytes we do not control: every one becomes a schema, "not found",
"unreadable", "refused" or "unavailable" — never another exception, never more than one line."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sidecar.registry.answers import (
    MAX_DETAIL,
    MAX_REFERENCES,
    MAX_RETRY_AFTER_S,
    Answer,
    RegistryError,
    RegistryRefusedError,
    RegistryUnavailableError,
    SchemaNotFoundError,
    SchemaUnreadableError,
    interpret,
    reference_list,
    retry_after,
    schema_text,
)

FUZZ = settings(max_examples=200, deadline=1000, suppress_health_check=[HealthCheck.too_slow])
WHERE = "http://registry:8081/apis/ccompat/v7"

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=20,
)
#: Shapes close to the API's, each field possibly of the wrong type.
api_like = st.fixed_dictionaries(
    {},
    optional={
        "schema": st.text(max_size=40) | json_values,
        "schemaType": st.sampled_from(["AVRO", "PROTOBUF", "JSON", "avro", ""]) | json_values,
        "references": st.lists(
            st.fixed_dictionaries(
                {}, optional={"name": json_values, "subject": json_values, "version": json_values}
            )
            | json_values,
            max_size=4,
        )
        | json_values,
        "message": json_values,
    },
)
bodies = st.one_of(
    st.binary(max_size=200),
    api_like.map(lambda d: json.dumps(d).encode()),
    json_values.map(lambda v: json.dumps(v).encode()),
    api_like.map(lambda d: json.dumps(d).encode()).flatmap(
        lambda b: st.integers(0, max(0, len(b) - 1)).map(lambda cut: b[:cut])  # truncated
    ),
    st.integers(1, 20_000).map(lambda depth: b"[" * depth + b"]" * depth),  # nested without end
    st.sampled_from([b'{"schema": "\xff\xfe"}', b"\x00" * 50, b'{"message": "line\\nbreak\\u2028x"}']),
)
statuses = st.one_of(
    st.sampled_from([200, 301, 302, 307, 400, 401, 403, 404, 410, 422, 429, 500, 503]), st.integers(0, 999)
)
headers = st.none() | st.text(max_size=40) | st.integers(-10, 10**15).map(str)


def outcome(answer: Answer) -> tuple[str, str, tuple[tuple[str, str, int], ...]] | RegistryError:
    """What the client makes of ``answer``: the schema's text, type and references, or the error."""
    try:
        decoded = interpret(answer, "schema id 7", WHERE, 1e9)
        text, kind = schema_text(decoded, "schema id 7")
        return text, kind, reference_list(decoded, "schema id 7")
    except RegistryError as e:
        return e


@FUZZ
@given(status=statuses, body=bodies, complete=st.booleans(), wait=headers, location=headers)
def test_any_answer_is_a_schema_or_one_registry_error_of_one_line(
    status: int, body: bytes, complete: bool, wait: str | None, location: str | None
) -> None:
    result = outcome(Answer(status, body, complete, wait, location))
    if isinstance(result, RegistryError):
        assert len(str(result).splitlines()) == 1
        assert len(str(result)) < 1000
        waits = result.retry_after_s if isinstance(result, RegistryUnavailableError) else None
        assert waits is None or 0 <= waits <= MAX_RETRY_AFTER_S
        return
    assert status == 200
    text, kind, refs = result
    assert isinstance(text, str)
    assert len(kind.splitlines()) == 1
    assert all(isinstance(n, str) and isinstance(s, str) and type(v) is int for n, s, v in refs)


@pytest.mark.parametrize(
    ("answer", "kind", "message"),
    [
        (
            Answer(404, b'{"error_code":40403}'),
            SchemaNotFoundError,
            "the registry does not know schema id 7 (404)",
        ),
        (Answer(410, b""), SchemaNotFoundError, "(410)"),
        (
            Answer(401, b'{"message": "bad token tok-99999"}'),
            RegistryRefusedError,
            "refused the credentials (401): bad token ***",
        ),
        (
            Answer(422, b'{"message": "Invalid id"}'),
            SchemaUnreadableError,
            "refused the request for schema id 7 (422): Invalid id",
        ),
        (Answer(200, b'{"schema": "x"}', complete=False), SchemaUnreadableError, "larger than"),
        (
            Answer(200, b"[" * 100_000),
            RegistryUnavailableError,
            "answered 200 for schema id 7 with no JSON object",
        ),
        (Answer(200, b"<html>proxy</html>"), RegistryUnavailableError, "with no JSON object"),
        (
            Answer(429, b"slow down", retry_after="5"),
            RegistryUnavailableError,
            "rate-limiting requests (429): slow down",
        ),
        (
            Answer(502, b"<h1>Bad\nGateway</h1>" * 100),
            RegistryUnavailableError,
            "answered 502 for schema id 7: <h1>Bad Gateway</h1>",
        ),
        (
            Answer(307, b"", location="https://user:pw@other/x?t=1"),
            RegistryUnavailableError,
            "redirected the request for schema id 7 to https://***@other/x?*** (307)",
        ),
    ],
)
def test_each_kind_of_answer_means_what_the_table_says(
    answer: Answer, kind: type[RegistryError], message: str
) -> None:
    with pytest.raises(kind) as caught:
        interpret(answer, "schema id 7", WHERE, 1e9, secrets=("tok-99999",))
    assert message in str(caught.value)
    assert len(str(caught.value)) < len(message) + 400 + MAX_DETAIL


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"schema": "s"}, ("s", "AVRO", ())),
        ({"schema": "s", "schemaType": None, "references": None}, ("s", "AVRO", ())),
        (
            {
                "schema": "s",
                "schemaType": "PROTOBUF",
                "references": [{"name": "a.proto", "subject": "a", "version": 1}],
            },
            ("s", "PROTOBUF", (("a.proto", "a", 1),)),
        ),
        ({"schema": 1}, RegistryUnavailableError),
        ({"schema": "s", "schemaType": 5}, RegistryUnavailableError),
        ({"schema": "s", "references": {"a": 1}}, RegistryUnavailableError),
        (
            {"schema": "s", "references": [{"name": "a", "subject": "a", "version": True}]},
            RegistryUnavailableError,
        ),
        (
            {
                "schema": "s",
                "references": [{"name": "a", "subject": "a", "version": 1}] * (MAX_REFERENCES + 1),
            },
            SchemaUnreadableError,
        ),
    ],
)
def test_the_shape_of_a_schema_answer_is_checked(body: dict[str, Any], expected: object) -> None:
    result = outcome(Answer(200, json.dumps(body).encode()))
    if isinstance(expected, tuple):
        assert result == expected
        return
    assert isinstance(expected, type)
    assert isinstance(result, expected)


@pytest.mark.parametrize(
    ("header", "seconds"),
    [
        ("0", 0.0),
        ("12", 12.0),
        (" 7 ", 7.0),
        ("9" * 40, MAX_RETRY_AFTER_S),
        ("-3", None),
        ("1.5", None),
        ("", None),
        ("Wed, 21 Oct 2015 07:28:00 GMT", 0.0),
    ],
)
def test_retry_after_is_seconds_or_a_date_within_its_bound(header: str, seconds: float | None) -> None:
    assert retry_after(header, now=2e9) == seconds
