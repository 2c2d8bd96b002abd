"""The config surface as data: every key with its default, what it accepts and what it means.

Everything here is read from the model (:class:`~sidecar.config.model.SidecarConfig`) and nothing
is written twice: a key's meaning is its field's docstring, what it accepts comes from its
:class:`~sidecar.config.forms.Form` or else from pydantic's JSON Schema of its type (a
``Literal``'s values, a number's bounds, ``true``/``false``), and its schema is pydantic's. So
``timesync-sidecar config`` (:mod:`sidecar.config.listing`), the key table of docs/sidecar.md and
the Helm chart's values schema (``deploy/helm/values_schema.py``) cannot disagree with the
sidecar, and a test fails when a committed copy is stale.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from pydantic import SecretStr
from pydantic.fields import FieldInfo
from pydantic.json_schema import JsonSchemaValue

from sidecar.config.forms import Form
from sidecar.config.model import ENV_PREFIX, SECRET_KEYS, SidecarConfig, key_of
from sidecar.core.readiness import IDLE_AUTO, IDLE_FOREVER

#: What a key of free text accepts, in words.
TEXT = "text"
#: JSON Schema annotations that are not part of what a value may be.
_ANNOTATIONS = frozenset({"title", "default", "description", "examples"})


@dataclass(frozen=True, slots=True)
class KeyDoc:
    """One key as a user meets it.

    ``default`` is written as a user would write it (``max``, ``auto``, ``true``), ``""`` when
    there is none and ``None`` when the key is required; ``accepts`` lists the alternatives
    (``N`` a whole number, ``<name>`` a part to fill in); ``schema`` is the JSON Schema of one
    value, typed as YAML reads it (numbers as numbers), without annotations."""

    key: str
    env: str
    default: str | None
    accepts: tuple[str, ...]
    meaning: str
    secret: bool
    schema: JsonSchemaValue

    @property
    def required(self) -> bool:
        return self.default is None


@functools.cache
def key_docs() -> tuple[KeyDoc, ...]:
    """Every key of the sidecar, in the model's order (which groups them by subject)."""
    properties = SidecarConfig.model_json_schema()["properties"]
    return tuple(
        _key_doc(name, field, properties[name]) for name, field in SidecarConfig.model_fields.items()
    )


def _key_doc(name: str, field: FieldInfo, schema: JsonSchemaValue) -> KeyDoc:
    key = key_of(name)
    if not field.description:
        raise TypeError(f"field {name} of SidecarConfig has no docstring: give it its one line of meaning")
    value_schema = {k: v for k, v in schema.items() if k not in _ANNOTATIONS}
    form = next((m for m in field.metadata if isinstance(m, Form)), None)
    return KeyDoc(
        key=key,
        env=ENV_PREFIX + name.upper(),
        default=None if field.is_required() else shown_default(field.default),
        accepts=form.accepts if form is not None else accepts_of(value_schema),
        meaning=field.description,
        secret=key in SECRET_KEYS,
        schema=value_schema,
    )


def shown_default(default: Any) -> str:
    """A default as a user writes it: ``true``, ``max``, ``auto``; ``""`` for none."""
    if isinstance(default, SecretStr):
        return "" if not default.get_secret_value() else "********"
    if isinstance(default, bool):
        return "true" if default else "false"
    if isinstance(default, int) and default in (IDLE_FOREVER, IDLE_AUTO):
        return "max" if default == IDLE_FOREVER else "auto"
    return str(default)


def accepts_of(schema: JsonSchemaValue) -> tuple[str, ...]:
    """The alternatives a JSON Schema of pydantic's admits, in words: ``("earliest", "latest")``,
    ``("0..65535",)``, ``("N ≥ 1",)``, ``("0 < x ≤ 1",)``, ``("true", "false")``, ``("text",)``."""
    if "enum" in schema:
        return tuple(str(v) for v in schema["enum"])
    if "const" in schema:
        return (str(schema["const"]),)
    if "anyOf" in schema:
        return tuple(a for alternative in schema["anyOf"] for a in accepts_of(alternative))
    kind = schema.get("type")
    if kind == "boolean":
        return ("true", "false")
    if kind in ("integer", "number"):
        return (_range(schema, "N" if kind == "integer" else "x"),)
    return (TEXT,)


def _range(schema: JsonSchemaValue, name: str) -> str:
    low, low_open = schema.get("minimum", schema.get("exclusiveMinimum")), "exclusiveMinimum" in schema
    high, high_open = schema.get("maximum", schema.get("exclusiveMaximum")), "exclusiveMaximum" in schema
    if low is not None and high is not None and not (low_open or high_open):
        return f"{low}..{high}"
    left = f"{low} {'<' if low_open else '≤'} " if low is not None else ""
    right = f" {'<' if high_open else '≤'} {high}" if high is not None else ""
    if left and not right:
        return f"{name} {'>' if low_open else '≥'} {low}"
    return f"{left}{name}{right}"


def json_schema() -> dict[str, Any]:
    """A JSON Schema (draft 7) of a YAML config file's mapping of dotted keys: the keys, what
    each accepts, its meaning, the required ones. The Helm chart's values schema is built from it."""
    docs = key_docs()
    return {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "title": "timesync-sidecar config",
        "type": "object",
        "additionalProperties": False,
        "required": [d.key for d in docs if d.required],
        "properties": {d.key: {"description": d.meaning, **d.schema} for d in docs},
    }
