"""Config files: ``.properties`` (as ``java.util.Properties`` reads them) and YAML mappings."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from sidecar.config.model import KEYS, ConfigError
from sidecar.config.secrets import close_key, shown_key


def field_for(key: str, source: str) -> str:
    """The model's field for ``key``. An unknown key is quoted by its first word only, and only
    when that is like a key (:func:`~sidecar.config.secrets.shown_key`): anything else in a
    key's place may be a misplaced value."""
    field = KEYS.get(key.strip())
    if field is None:
        first, *rest = re.split(r"[\s:=]", key.strip(), maxsplit=1)
        quoted = shown_key(first)
        if quoted is None:
            raise ConfigError(
                f"config error: unknown key (from {source}), not shown: a single word like no key of "
                "the sidecar may be a misplaced value; `timesync-sidecar config` lists the keys"
            )
        hint = close_key(first)
        suffix = f"; did you mean {hint}?" if hint else ""
        hidden = " followed by a hidden value" if rest else ""
        raise ConfigError(f"config error: unknown key {quoted}{hidden} (from {source}){suffix}")
    return field


def read_file(path: Path) -> dict[str, str]:
    """Key → raw value from a ``.properties`` file or a YAML mapping (nested maps join with dots)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError(f"config error: cannot read config file {str(path)!r}: {e.strerror}") from None
    except UnicodeDecodeError as e:
        raise ConfigError(
            f"config error: config file {str(path)!r} is not UTF-8 text (byte {e.start})"
        ) from None
    if path.suffix in {".yaml", ".yml"}:
        try:
            data = yaml.load(text, Loader=_TextLoader)
        except yaml.YAMLError as e:
            raise ConfigError(
                f"config error: {str(path)!r} is not valid YAML: {str(e).splitlines()[0]}"
            ) from None
        if data is None:
            return {}
        if not isinstance(data, dict):
            raise ConfigError(f"config error: {str(path)!r} must hold a mapping of keys to values")
        return _flatten(data, source=str(path))
    out = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        # As java.util.Properties: the key ends at the first '=', ':' or whitespace. The line is
        # never echoed in an error: it may hold a password.
        match = _PROPERTY.fullmatch(line)
        if match is None:
            raise ConfigError(f"config error: {str(path)!r} line {number}: expected key=value, found no key")
        field_for(match[1], f"{path}, line {number}")  # an unknown key, named by its line
        out[match[1]] = match[2].strip()
    return out


_PROPERTY = re.compile(r"([^=:\s]+)\s*[=:]?(.*)", re.DOTALL)


class _TextLoader(yaml.SafeLoader):
    """YAML's safe loader, with every plain scalar but ``null`` kept as the text written.

    YAML 1.1 turns ``0x1F`` into 31, ``012`` into 10, ``1_000`` into 1000 and ``no`` into false:
    a token or a topic name would silently become another value. The config model converts the
    text itself, for the keys that take numbers or booleans."""


_TextLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag == "tag:yaml.org,2002:null"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def _flatten(data: Mapping[Any, Any], prefix: str = "", source: str = "") -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in data.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, Mapping):
            if not any(k.startswith(dotted + ".") for k in KEYS):
                # No key lives under this prefix: stop here (YAML aliases can nest without end). A
                # name that holds a mapping is a section, never a misplaced value: it is quoted.
                hint = close_key(dotted)
                suffix = f"; did you mean {hint}?" if hint else ""
                raise ConfigError(f"config error: unknown key {dotted!r} (from {source}){suffix}")
            out.update(_flatten(value, dotted + ".", source))
        elif isinstance(value, list):
            # Only plain values: a nested list would be stringified (and YAML aliases can make
            # that exponential), and no key takes one.
            if any(isinstance(v, list | Mapping) for v in value):
                raise ConfigError(
                    f"config error: {dotted!r} (from {source}) is a list holding lists or mappings; "
                    "a list may hold plain values only"
                )
            out[dotted] = ",".join(_scalar(v) for v in value)
        else:
            out[dotted] = _scalar(value)
    return out


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)
