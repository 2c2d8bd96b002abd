"""The value forms a key accepts beyond its Python type: each one checks, and says what it accepts.

A key whose values a ``Literal``, a number's bounds or ``bool`` describe needs nothing here:
pydantic validates it and derives its JSON Schema. The keys below accept more than their type
says (``max.task.idle.ms`` takes ``max`` and ``auto`` besides numbers) or less (a gzip level is
``-1`` or ``1``–``9``). Each is an ``Annotated`` type that carries, in one place, its validator
and a :class:`Form`: the accepted alternatives in words (``timesync-sidecar config``, the docs'
key table) and as JSON Schema (``SidecarConfig.model_json_schema()``, and so the Helm chart's
values schema). ``tests/unit/test_config_forms.py`` holds each schema to its validator, value by
value.

The messages are the one-line errors a user reads after ``key = value (from …):``.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, GetJsonSchemaHandler, SecretStr
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

from sidecar.core.readiness import IDLE_AUTO, IDLE_FOREVER


@dataclass(frozen=True, slots=True)
class Form:
    """What a key accepts: ``accepts`` in words, one alternative each (``N`` stands for a whole
    number, ``<name>`` for a part the user fills in), and ``schema`` as JSON Schema (``None``:
    the one pydantic derives from the type). Pydantic calls :meth:`__get_pydantic_json_schema__`
    for metadata of an ``Annotated`` type, as it does for its own ``WithJsonSchema``."""

    accepts: tuple[str, ...]
    schema: JsonSchemaValue | None = None

    def __get_pydantic_json_schema__(
        self, core_schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return handler(core_schema) if self.schema is None else copy.deepcopy(self.schema)


def _millis_or_max(value: Any, minimum: int, expected: str) -> int:
    """A duration in ms of at least ``minimum``, or ``max`` (Kafka's Long.MAX_VALUE: forever)."""
    text = str(value).strip().lower()
    if text in {"max", "long.max_value"}:
        return IDLE_FOREVER
    try:
        millis = int(text)
    except ValueError:
        raise ValueError(expected) from None
    if millis < minimum:
        raise ValueError(expected)
    return min(millis, IDLE_FOREVER)


def _idle(value: Any) -> int:
    if str(value).strip().lower() == "auto":
        return IDLE_AUTO
    return _millis_or_max(value, -1, "expected -1, 0, a number of milliseconds, max, or auto")


def _budget(value: Any) -> int:
    try:
        millis = int(str(value).strip())
    except ValueError:
        millis = 0
    if millis < 1:
        raise ValueError("expected a positive number of milliseconds: the most auto waits for a partition")
    return millis


def _at_least_a_second_or_max(value: Any) -> int:
    return _millis_or_max(value, 1000, "expected a number of milliseconds (at least 1000), or max")


def _replication(value: int) -> int:
    if value == -1 or value >= 1:
        return value
    raise ValueError("expected -1 (the broker's default.replication.factor) or at least 1")


def _gzip_level(value: int) -> int:
    if value == -1 or 1 <= value <= 9:
        return value
    raise ValueError("expected 1 to 9, or -1 for zlib's default")


def _late(value: str) -> str:
    if value in {"forward", "drop"} or (value.startswith("topic:") and len(value) > len("topic:")):
        return value
    raise ValueError("expected forward, drop or topic:<name>")


def _topics(value: str) -> str:
    topics = [t.strip() for t in value.split(",")]
    if not all(topics):
        raise ValueError("expected a comma-separated list of topic names, with no empty entries")
    if len(set(topics)) != len(topics):
        raise ValueError("a topic is listed twice")
    return ",".join(topics)


_MAX = {"const": "max"}

#: ``max.task.idle.ms``: ``-1`` never waits, a number waits that long, ``max`` for ever, ``auto``
#: learns per partition (``IDLE_AUTO``).
IdleMillis = Annotated[
    int,
    BeforeValidator(_idle),
    Form(
        ("-1", "0", "N", "max", "auto"),
        {"anyOf": [{"type": "integer", "minimum": -1}, {"enum": ["max", "auto"]}]},
    ),
]
#: ``max.task.idle.budget.ms``: a positive number of ms.
BudgetMillis = Annotated[int, BeforeValidator(_budget), Form(("N ≥ 1",), {"type": "integer", "minimum": 1})]
#: A timeout of at least a second, or ``max`` (Kafka's Long.MAX_VALUE): never.
SecondOrMoreOrMax = Annotated[
    int,
    BeforeValidator(_at_least_a_second_or_max),
    Form(("N ≥ 1000", "max"), {"anyOf": [{"type": "integer", "minimum": 1000}, _MAX]}),
]
#: ``replication.factor``: ``-1`` (the broker's default) or a count of replicas.
ReplicationFactor = Annotated[
    int,
    AfterValidator(_replication),
    Form(("-1", "N ≥ 1"), {"anyOf": [{"const": -1}, {"type": "integer", "minimum": 1}]}),
]
#: ``compression.gzip.level``: zlib's levels, or ``-1`` for zlib's default.
GzipLevel = Annotated[
    int,
    AfterValidator(_gzip_level),
    Form(("-1", "1..9"), {"anyOf": [{"const": -1}, {"type": "integer", "minimum": 1, "maximum": 9}]}),
]
#: ``late.records``.
LateRecords = Annotated[
    str,
    AfterValidator(_late),
    Form(("forward", "drop", "topic:<name>"), {"type": "string", "pattern": "^(forward|drop|topic:.+)$"}),
]
#: ``input.topics``: names, each once (a string's schema cannot say "no duplicates"; the sidecar
#: refuses them at start).
TopicList = Annotated[
    str,
    AfterValidator(_topics),
    Form(
        ("<topic>[,<topic>...]",),
        {"type": "string", "pattern": r"^[^,]*[^,\s][^,]*(,[^,]*[^,\s][^,]*)*$"},
    ),
]

# -- forms whose validators are pydantic's or the model's (the registry's and the extractor's rules) ---

#: ``bootstrap.servers``.
Servers = Annotated[str, Form(("host:port[,host:port...]",))]
#: ``schema.registry.url``: what a regular expression can say of ``registry_url.url_problem``'s
#: rules (http or https, no ``user:password@``, no query or fragment).
RegistryUrl = Annotated[
    str,
    Form(("http(s)://host[:port][/path]",), {"type": "string", "pattern": "^(|https?://[^@?#]+)$"}),
]
#: ``schema.registry.basic.auth.user.info``: a secret, ``user:password``.
UserInfo = Annotated[
    SecretStr,
    Form(("user:password",), {"type": "string", "pattern": "^$|:", "format": "password", "writeOnly": True}),
]

# -- timestamp.extractor ---------------------------------------------------------------------------
# The grammar of sidecar.core.parse_extractor (which validates it; the model calls it):
# ``record``, or a format, ``:``, a dotted path of non-empty names, and optionally ``:`` and a unit
# (an empty unit is ms). Written here once for people and tools; tests/unit/test_config_forms.py
# holds it to the parser, so a new format or unit fails there until it is added here.
_UNITS = {"json": ("ms", "s", "iso"), "avro": ("ms", "s", "us", "iso"), "protobuf": ("ms", "s", "us", "iso")}
_PATH = r"[^:.]+(\.[^:.]+)*"


def _extractor_pattern() -> str:
    by_units: dict[tuple[str, ...], list[str]] = {}
    for name, units in _UNITS.items():
        by_units.setdefault(units, []).append(name)
    forms = [f"({'|'.join(names)}):{_PATH}(:({'|'.join(units)})?)?" for units, names in by_units.items()]
    return f"^(record|{'|'.join(forms)})$"


#: ``timestamp.extractor`` (its validator is the model's, through ``parse_extractor``).
Extractor = Annotated[
    str,
    Form(
        ("record", *(f"{name}:<dotted.path>[:{'|'.join(units)}]" for name, units in _UNITS.items())),
        {"type": "string", "pattern": _extractor_pattern()},
    ),
]
