"""One load: the file, ``TIMESYNC_*`` env and ``--set`` (later wins) into one model, or one line why not."""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from sidecar.config.environment import config_environ
from sidecar.config.files import field_for, read_file
from sidecar.config.model import ENV_NAMES, ENV_PREFIX, ConfigError, SidecarConfig, key_of
from sidecar.config.secrets import shown_value, without_secret


def load_config(
    path: str | Path | None = None,
    sets: Sequence[str] = (),
    environ: Mapping[str, str] | None = None,
) -> SidecarConfig:
    """Build the config from a file, ``TIMESYNC_*`` env and ``--set k=v`` (later wins)."""
    environ = os.environ if environ is None else environ
    origin: dict[str, str] = {}
    file_layer: dict[str, Any] = {}
    if path is not None:
        for key, value in read_file(Path(path)).items():
            field = field_for(key, str(path))
            file_layer[field] = value
            origin[field] = str(path)
    env_only = config_environ(environ)
    for name in env_only:
        env_field = ENV_NAMES.get(name.upper())
        if env_field is None:
            hint = difflib.get_close_matches(name.upper(), ENV_NAMES, n=1)
            suffix = f"; did you mean {hint[0]}?" if hint else ""
            raise ConfigError(f"config error: unknown environment variable {name!r} (no such key){suffix}")
        origin[env_field] = f"env {name}"
    set_layer: dict[str, Any] = {}
    for item in sets:
        key, sep, value = item.partition("=")
        if not sep:
            raise ConfigError(f"config error: --set expects key=value, got {without_secret(item)}")
        field = field_for(key, "--set")
        set_layer[field] = value.strip()
        origin[field] = "--set"
    SidecarConfig._layers = (file_layer, set_layer, env_only)
    try:
        return SidecarConfig()  # type: ignore[call-arg]  # required keys come from the sources
    except ValidationError as e:
        raise ConfigError(_one_line(e, origin, file_layer, set_layer, env_only)) from None
    finally:
        SidecarConfig._layers = ({}, {}, {})


def _one_line(
    error: ValidationError,
    origin: Mapping[str, str],
    file_layer: Mapping[str, Any],
    set_layer: Mapping[str, Any],
    env: Mapping[str, str],
) -> str:
    first = error.errors()[0]
    loc = first.get("loc") or ()
    message = first["msg"].removeprefix("Value error, ")
    if not loc:  # a rule spanning several keys
        return f"config error: {message}"
    field = str(loc[0])
    key = key_of(field)
    if first["type"] == "missing":
        variable = f"{ENV_PREFIX}{field.upper()}"
        return f"config error: {key} is required (set it in the file, as {variable}, or --set {key}=...)"
    source = origin.get(field, "default")
    if field in set_layer and source == "--set":
        raw = set_layer[field]
    elif source.startswith("env "):
        raw = env.get(source[4:], "")
    else:
        raw = file_layer.get(field, first.get("input"))
    return f"config error: {key} = {shown_value(key, raw)} (from {source}): {message}"
