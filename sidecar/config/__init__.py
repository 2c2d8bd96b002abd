"""The sidecar's configuration: Kafka-style dotted keys from a file, ``TIMESYNC_*`` env and ``--set``.

Sources, later wins: a ``.properties`` or YAML file, environment variables (``TIMESYNC_`` + the
key in upper snake case: ``max.task.idle.ms`` → ``TIMESYNC_MAX_TASK_IDLE_MS``), then
``--set key=value`` on the command line. The model is a pydantic-settings ``BaseSettings``
whose sources are exactly those three.

Every mistake a user can make here becomes :class:`ConfigError` with one line naming the key,
the value, where it came from and what is allowed; the CLI prints that line and exits 2. An
unknown key is an error too (with the closest known key as a hint): a typo must not silently
fall back to a default. The one exception is Kubernetes' service-link variables
(:func:`service_link`): a Service named ``timesync-…`` puts ``TIMESYNC_…_PORT=tcp://…`` and the
like into every pod of its namespace, so those are recognised by name *and* value and ignored.
Secrets (``ssl.password``, ``sasl.password``, ``http.auth.token``, the registry's credentials)
are ``SecretStr`` and never appear in messages, logs or ``/status``, nor does anything that could
be one (a word in a key's place, a mistyped ``--set``: :mod:`sidecar.config.secrets`); a YAML
file's scalars are read as the text written (``0x1F`` stays ``0x1F``, YAML 1.1 would make it
``31``), so a token or a topic name is never silently turned into another value.

Start-up refuses what would quietly weaken the sidecar: acting endpoints reachable off loopback
without a token (:func:`http_exposure`), SSL or SASL settings that the chosen
``security.protocol`` would ignore, and a schema registry URL that would show or leak its
credentials (:mod:`sidecar.config.registry_url`).

The package, by what each part holds: ``model`` (the keys, their defaults, meanings and
validation), ``forms`` (what a key accepts beyond its type: validator, words and JSON Schema),
``surface`` (every key's row and the JSON Schema, derived from the model), ``listing``
(``timesync-sidecar config``), ``exposure`` (who may reach the acting endpoints),
``registry_url`` (where the schema registry's credentials may go), ``files`` (``.properties`` and
YAML), ``environment`` (``TIMESYNC_*`` variables and Kubernetes' service links), ``secrets``
(keeping secrets out of messages) and ``loading`` (the three sources into one model, one-line
errors).
"""

from __future__ import annotations

from sidecar.config.environment import service_link
from sidecar.config.exposure import LOOPBACK_NAMES, http_exposure, is_loopback_host
from sidecar.config.files import read_file
from sidecar.config.loading import load_config
from sidecar.config.model import (
    ENV_NAMES,
    ENV_PREFIX,
    FIELDS,
    FOREVER_MS,
    KEYS,
    SECRET_KEYS,
    SPARK_ENV_PREFIX,
    ConfigError,
    SidecarConfig,
    key_of,
)
from sidecar.config.secrets import looks_secret, without_values

__all__ = [
    "ENV_NAMES",
    "ENV_PREFIX",
    "FIELDS",
    "FOREVER_MS",
    "KEYS",
    "LOOPBACK_NAMES",
    "SECRET_KEYS",
    "SPARK_ENV_PREFIX",
    "ConfigError",
    "SidecarConfig",
    "http_exposure",
    "is_loopback_host",
    "key_of",
    "load_config",
    "looks_secret",
    "read_file",
    "service_link",
    "without_values",
]
