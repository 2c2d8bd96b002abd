"""The user documentation keeps up with the code: every config key and metric is documented.

The key table of docs/sidecar.md is generated from the config model; the tests below also read
it as a reader would (every key a row, every default as the model has it)."""

from __future__ import annotations

import re
from pathlib import Path

from sidecar.config import KEYS, SidecarConfig, key_of
from sidecar.config.listing import markdown, with_table
from sidecar.config.surface import key_docs
from sidecar.service.metrics import Metrics

DOCS = Path(__file__).resolve().parents[2] / "docs" / "sidecar.md"


def configuration_section() -> str:
    text = DOCS.read_text()
    start = text.index("## Configuration")
    return text[start : text.index("\n## ", start + 1)]


def documented_keys() -> set[str]:
    keys: set[str] = set()
    for row in re.findall(r"^\| (`[^|]+`) \|", configuration_section(), flags=re.M):
        keys.update(re.findall(r"`([a-z0-9.]+)`", row))
    return keys


def test_the_configuration_table_is_the_one_generated_from_the_model() -> None:
    """The key table is written by ``timesync-sidecar config --format markdown --update
    docs/sidecar.md`` (``make config-surface``), from the model alone."""
    assert with_table(DOCS.read_text(), markdown(key_docs())) == DOCS.read_text(), (
        "stale: run make config-surface"
    )


def test_every_config_key_is_in_the_configuration_table() -> None:
    assert set(KEYS) - documented_keys() == set()


def test_the_configuration_table_names_no_key_the_sidecar_does_not_know() -> None:
    assert documented_keys() - set(KEYS) == set()


def test_documented_defaults_match_the_model() -> None:
    text = configuration_section()
    for name, field in SidecarConfig.model_fields.items():
        if field.is_required():
            required = rf"^\| `{re.escape(key_of(name))}` \| required \|"
            assert re.search(required, text, flags=re.M), key_of(name)
            continue
        default = field.default
        if isinstance(default, bool):
            default = str(default).lower()
        if default in ("", None) or hasattr(default, "get_secret_value"):
            continue
        row = re.search(rf"^\| `{re.escape(key_of(name))}`[^|]*\| ([^|]+) \|", text, flags=re.M)
        assert row is not None, key_of(name)
        documented = row.group(1)
        assert f"`{default}`" in documented, f"{key_of(name)}: documented {documented!r}, model {default!r}"


def test_every_metric_is_documented() -> None:
    text = DOCS.read_text()
    registry = Metrics().registry
    names = {m.name for m in registry.collect()}
    for name in names:
        exposed = name + "_total" if f"{name}_total" in Metrics().exposition().decode() else name
        assert exposed in text, exposed
