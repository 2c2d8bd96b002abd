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
Secrets (``ssl.password``, ``sasl.password``) are ``SecretStr`` and
never appear in messages, logs or ``/status``.
"""

from __future__ import annotations

import difflib
import ipaddress
import logging
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, Literal

import yaml
from pydantic import Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, EnvSettingsSource, PydanticBaseSettingsSource, SettingsConfigDict

from sidecar.core import TaskConfig, parse_extractor
from sidecar.core.readiness import IDLE_AUTO, IDLE_FOREVER

log = logging.getLogger(__name__)

ENV_PREFIX = "TIMESYNC_"
#: A timeout that never ends (Kafka's Long.MAX_VALUE).
FOREVER_MS = IDLE_FOREVER  # Kafka's Long.MAX_VALUE: "max"
#: Variables of the Spark job (``TIMESYNC_SPARK_JARS_DIR``...); the sidecar leaves them alone.
SPARK_ENV_PREFIX = "TIMESYNC_SPARK_"


class ConfigError(ValueError):
    """A configuration problem, as one line for the user."""


def key_of(field: str) -> str:
    return field.replace("_", ".")


class SidecarConfig(BaseSettings):
    """Every config key of the sidecar; field ``max_task_idle_ms`` is key ``max.task.idle.ms``."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, extra="forbid", frozen=True, case_sensitive=False
    )

    bootstrap_servers: str = Field(min_length=1)
    input_topics: str
    output_topic: str = Field(min_length=1)
    group_id: str = ""
    auto_offset_reset: Literal["earliest", "latest"] = "earliest"
    task_grouping: Literal["single", "partition"] = "single"
    # With task.grouping=single: refuse to start while another host runs the group (claim.py).
    task_grouping_single_guard: bool = True
    max_task_idle_ms: int = 0  # "auto" is IDLE_AUTO: learnt per partition, within the budget below
    max_task_idle_budget_ms: int = 1000
    buffered_records_per_partition: int = Field(1000, ge=1)
    timestamp_extractor: str = "record"
    timestamp_invalid: Literal["fail", "skip", "partition-time"] = "fail"
    late_records: str = "forward"
    processing_guarantee: Literal["at_least_once", "exactly_once_v2"] = "at_least_once"
    compression_type: Literal["none", "gzip", "snappy", "lz4", "zstd"] = "lz4"
    # Kafka's producer keys and defaults (KIP-390); see docs/sidecar.md for what they mean here.
    compression_gzip_level: int = -1
    compression_lz4_level: int = Field(9, ge=1, le=17)
    compression_zstd_level: int = Field(3, ge=-131072, le=22)
    linger_ms: int = Field(5, ge=0)
    # Kafka's producer key: how long an output batch may wait for the cluster before the sidecar
    # gives up (and how long restarts may go on without progress). "max" waits for ever.
    delivery_timeout_ms: int = 120_000
    # Replicas of the topics the sidecar creates (output, DLQ, late); -1: the broker's default.
    replication_factor: int = -1
    errors_tolerance: Literal["none", "all"] = "none"
    errors_deadletterqueue_topic_name: str = ""
    errors_deadletterqueue_max_ratio: float = Field(0.5, gt=0, le=1)
    watermark_policy: Literal["auto", "log-append-time", "bounded-delay", "min-window"] = "auto"
    watermark_max_delay_ms: int = Field(5000, ge=0)
    watermark_window_ms: int = Field(60000, ge=1)
    watermark_idle_epsilon_ms: int = Field(2000, ge=0)
    watermark_heartbeat_ms: int = Field(1000, ge=0)
    http_host: str = "127.0.0.1"
    http_port: int = Field(8080, ge=0, le=65535)
    # A bearer token for the mutating endpoints (PUT /pause, PUT /resume, POST /restart); without
    # it they answer only on loopback. Secret: from TIMESYNC_HTTP_AUTH_TOKEN, never shown.
    http_auth_token: SecretStr = SecretStr("")
    security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = "PLAINTEXT"
    ssl_cafile: str = ""
    ssl_certfile: str = ""
    ssl_keyfile: str = ""
    ssl_password: SecretStr = SecretStr("")
    ssl_check_hostname: bool = True
    sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] = "PLAIN"
    sasl_username: str = ""
    sasl_password: SecretStr = SecretStr("")

    #: Set by load_config() for the duration of one load: the file, --set and env layers.
    _layers: ClassVar[tuple[dict[str, Any], dict[str, Any], Mapping[str, str]]] = ({}, {}, {})

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        file_layer, set_layer, environ = cls._layers
        return (
            _Layer(settings_cls, set_layer),
            _Env(settings_cls, environ),
            _Layer(settings_cls, file_layer),
        )

    @field_validator("max_task_idle_ms", mode="before")
    @classmethod
    def _idle(cls, value: Any) -> int:
        if str(value).strip().lower() == "auto":
            return IDLE_AUTO
        return _millis_or_max(value, -1, "expected -1, 0, a number of milliseconds, max, or auto")

    @field_validator("max_task_idle_budget_ms", mode="before")
    @classmethod
    def _idle_budget(cls, value: Any) -> int:
        try:
            millis = int(str(value).strip())
        except ValueError:
            millis = 0
        if millis < 1:
            raise ValueError(
                "expected a positive number of milliseconds: the most auto waits for a partition"
            )
        return millis

    @field_validator("delivery_timeout_ms", mode="before")
    @classmethod
    def _delivery_timeout(cls, value: Any) -> int:
        return _millis_or_max(value, 1000, "expected a number of milliseconds (at least 1000), or max")

    @field_validator("replication_factor")
    @classmethod
    def _replication(cls, value: int) -> int:
        if value == -1 or value >= 1:
            return value
        raise ValueError("expected -1 (the broker's default.replication.factor) or at least 1")

    @field_validator("compression_gzip_level")
    @classmethod
    def _gzip_level(cls, value: int) -> int:
        if value == -1 or 1 <= value <= 9:
            return value
        raise ValueError("expected 1 to 9, or -1 for zlib's default")

    @field_validator("timestamp_extractor")
    @classmethod
    def _extractor(cls, value: str) -> str:
        parse_extractor(value)  # raises ValueError with what is allowed
        return value

    @field_validator("late_records")
    @classmethod
    def _late(cls, value: str) -> str:
        if value in {"forward", "drop"} or (value.startswith("topic:") and len(value) > len("topic:")):
            return value
        raise ValueError("expected forward, drop or topic:<name>")

    @field_validator("input_topics")
    @classmethod
    def _inputs(cls, value: str) -> str:
        topics = [t.strip() for t in value.split(",")]
        if not all(topics):
            raise ValueError("expected a comma-separated list of topic names, with no empty entries")
        if len(set(topics)) != len(topics):
            raise ValueError("a topic is listed twice")
        return ",".join(topics)

    @model_validator(mode="after")
    def _coherent(self) -> SidecarConfig:
        if self.output_topic in self.topics:
            raise ValueError(f"output.topic {self.output_topic!r} is also an input topic")
        if self.errors_tolerance == "all" and not self.errors_deadletterqueue_topic_name:
            raise ValueError(
                "errors.tolerance=all needs errors.deadletterqueue.topic.name: failing records must go "
                "somewhere"
            )
        if self.security_protocol.startswith("SASL") and not self.sasl_username:
            raise ValueError(
                f"security.protocol={self.security_protocol} needs sasl.username and sasl.password"
            )
        return self

    # -- derived views ----------------------------------------------------------------------------

    @property
    def topics(self) -> list[str]:
        return self.input_topics.split(",")

    @property
    def effective_group_id(self) -> str:
        return self.group_id or f"timesync-{self.output_topic}"

    @property
    def late_topic(self) -> str | None:
        return self.late_records.removeprefix("topic:") if self.late_records.startswith("topic:") else None

    def task_config(self) -> TaskConfig:
        """The merge core's view of this config."""
        return TaskConfig(
            max_task_idle_ms=self.max_task_idle_ms,
            max_task_idle_budget_ms=self.max_task_idle_budget_ms,
            buffered_records_per_partition=self.buffered_records_per_partition,
            extractor=parse_extractor(self.timestamp_extractor),
            timestamp_invalid=self.timestamp_invalid,
            errors_tolerance=self.errors_tolerance,
            dlq_max_ratio=self.errors_deadletterqueue_max_ratio,
            late_records="topic" if self.late_topic else self.late_records,  # type: ignore[arg-type]
            watermark_policy=self.watermark_policy,
            watermark_max_delay_ms=self.watermark_max_delay_ms,
            watermark_window_ms=self.watermark_window_ms,
            watermark_idle_epsilon_ms=self.watermark_idle_epsilon_ms,
            watermark_heartbeat_ms=self.watermark_heartbeat_ms,
        )

    @property
    def compression_level(self) -> int | None:
        """The level key of the chosen ``compression.type`` (``None`` for none and snappy)."""
        levels = {
            "gzip": self.compression_gzip_level,
            "lz4": self.compression_lz4_level,
            "zstd": self.compression_zstd_level,
        }
        return levels.get(self.compression_type)

    def redacted(self) -> dict[str, Any]:
        """Every key and value as a user would write them, secrets masked (for logs and /status)."""
        out: dict[str, Any] = {}
        for name in type(self).model_fields:
            value = getattr(self, name)
            if isinstance(value, SecretStr):
                value = "********" if value.get_secret_value() else ""
            elif name == "max_task_idle_ms" and value == IDLE_AUTO:
                value = "auto"
            out[key_of(name)] = value
        return out


class _Layer(PydanticBaseSettingsSource):
    """A dict of already-translated field values (from the file or from --set)."""

    def __init__(self, settings_cls: type[BaseSettings], values: dict[str, Any]) -> None:
        super().__init__(settings_cls)
        self.values = values

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return self.values.get(field_name), field_name, False

    def __call__(self) -> dict[str, Any]:
        return dict(self.values)


class _Env(EnvSettingsSource):
    """``TIMESYNC_*`` variables from the mapping given to load_config() (os.environ by default)."""

    def __init__(self, settings_cls: type[BaseSettings], environ: Mapping[str, str]) -> None:
        self._environ = environ
        super().__init__(settings_cls)

    def _load_env_vars(self) -> Mapping[str, str | None]:
        # Names are matched case-insensitively (the model is not case sensitive), as pydantic does.
        return {name.lower(): value for name, value in self._environ.items()}


# -- Kubernetes service links ----------------------------------------------------------------------
# For every Service of the namespace (unless the pod sets enableServiceLinks: false) the kubelet
# sets, with SVC = the Service's name upper-cased and '-' turned into '_':
#   SVC_SERVICE_HOST=10.0.0.1             SVC_PORT=tcp://10.0.0.1:8080
#   SVC_SERVICE_PORT=8080                 SVC_PORT_8080_TCP=tcp://10.0.0.1:8080
#   SVC_SERVICE_PORT_HTTP_METRICS=8080    SVC_PORT_8080_TCP_PROTO=tcp
#                                         SVC_PORT_8080_TCP_PORT=8080
#                                         SVC_PORT_8080_TCP_ADDR=10.0.0.1
# SVC_PORT and SVC_SERVICE_PORT describe the Service's first port; every port gets the rest.
_SVC = r"(?P<svc>[A-Z][A-Z0-9_]*?)"
_LINK_NAMES = (
    ("host", re.compile(_SVC + r"_SERVICE_HOST")),
    ("port", re.compile(_SVC + r"_SERVICE_PORT(?:_[A-Z0-9_]+)?")),
    ("url", re.compile(_SVC + r"_PORT")),
    ("url", re.compile(_SVC + r"_PORT_(?P<port>\d+)_(?P<proto>TCP|UDP|SCTP)")),
    ("proto", re.compile(_SVC + r"_PORT_(?P<port>\d+)_(?P<proto>TCP|UDP|SCTP)_PROTO")),
    ("port", re.compile(_SVC + r"_PORT_(?P<port>\d+)_(?P<proto>TCP|UDP|SCTP)_PORT")),
    ("host", re.compile(_SVC + r"_PORT_(?P<port>\d+)_(?P<proto>TCP|UDP|SCTP)_ADDR")),
)
_LINK_URL = re.compile(
    r"(?P<proto>tcp|udp|sctp)://(?:\[(?P<ip6>[0-9A-Fa-f:.]+)\]|(?P<ip4>[0-9.]+)):(?P<port>\d+)"
)


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def _is_port(text: str) -> bool:
    return text.isascii() and text.isdigit() and 0 < int(text) < 65536


def _fits(kind: str, value: str, port: str | None, proto: str | None) -> bool:
    """Whether ``value`` has the shape the kubelet gives a variable of this ``kind``."""
    if kind == "host":
        return _is_ip(value)
    if kind == "port":
        return _is_port(value) and (port is None or value == port)
    if kind == "proto":
        return proto is not None and value == proto.lower()
    url = _LINK_URL.fullmatch(value)
    if url is None or not _is_ip(url["ip6"] or url["ip4"]) or not _is_port(url["port"]):
        return False
    return (port is None or url["port"] == port) and (proto is None or url["proto"] == proto.lower())


def service_link(name: str, value: str) -> str | None:
    """The Service a Kubernetes service-link variable describes (its name as the kubelet wrote it,
    e.g. ``TIMESYNC_METRICS``), or ``None`` when ``name=value`` is not one.

    Both must fit: the name one of the kubelet's shapes (exact, upper case) and the value what the
    kubelet puts there (an IP address, a port, ``tcp://ip:port`` with the name's port and
    protocol). So ``TIMESYNC_METRICS_PORT=tcp://10.0.0.1:8080`` is a link, while a typo such as
    ``TIMESYNC_HTTP_PROT=8080`` or ``TIMESYNC_METRICS_PORT=8080`` is not and stays an error.
    """
    for kind, pattern in _LINK_NAMES:
        match = pattern.fullmatch(name)
        if match is None:
            continue
        groups = match.groupdict()
        if _fits(kind, value.strip(), groups.get("port"), groups.get("proto")):
            return match["svc"]
    return None


def _config_environ(environ: Mapping[str, str]) -> dict[str, str]:
    """The ``TIMESYNC_*`` variables that are the sidecar's: not the Spark job's, not service links.

    A service link is logged at debug and dropped, even when its name is a key's variable (a
    Service named ``timesync-http`` gives ``TIMESYNC_HTTP_PORT=tcp://…``, which Kubernetes sets
    over the image's value): no key takes such a value, so it cannot be the user's setting.
    """
    out: dict[str, str] = {}
    for name, value in environ.items():
        upper = name.upper()
        if not upper.startswith(ENV_PREFIX) or upper.startswith(SPARK_ENV_PREFIX):
            continue
        service = service_link(name, value)
        if service is not None:
            if upper in ENV_NAMES:
                log.warning(
                    "ignoring %s=%s: a Kubernetes service link (Service %s), not %s; set "
                    "enableServiceLinks: false in the pod spec",
                    name,
                    value,
                    service.lower().replace("_", "-"),
                    key_of(ENV_NAMES[upper]),
                )
            else:
                log.debug("ignoring %s: a Kubernetes service-link variable (Service %s)", name, service)
            continue
        out[name] = value
    return out


FIELDS = tuple(SidecarConfig.model_fields)
KEYS = {key_of(f): f for f in FIELDS}
ENV_NAMES = {ENV_PREFIX + f.upper(): f for f in FIELDS}


def _millis_or_max(value: Any, minimum: int, expected: str) -> int:
    """A duration in ms of at least ``minimum``, or ``max`` (Kafka's Long.MAX_VALUE: forever)."""
    text = str(value).strip().lower()
    if text in {"max", "long.max_value"}:
        return FOREVER_MS
    try:
        millis = int(text)
    except ValueError:
        raise ValueError(expected) from None
    if millis < minimum:
        raise ValueError(expected)
    return min(millis, FOREVER_MS)


def _field_for(key: str, source: str) -> str:
    field = KEYS.get(key.strip())
    if field is None:
        hint = difflib.get_close_matches(key, KEYS, n=1)
        suffix = f"; did you mean {hint[0]}?" if hint else ""
        raise ConfigError(f"config error: unknown key {key!r} (from {source}){suffix}")
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
            data = yaml.safe_load(text)
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
        out[match[1]] = match[2].strip()
    return out


_PROPERTY = re.compile(r"([^=:\s]+)\s*[=:]?(.*)", re.DOTALL)


def _flatten(data: Mapping[Any, Any], prefix: str = "", source: str = "") -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in data.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, Mapping):
            if not any(k.startswith(dotted + ".") for k in KEYS):
                # No key lives under this prefix: stop here (YAML aliases can nest without end).
                _field_for(dotted, source)
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
            field = _field_for(key, str(path))
            file_layer[field] = value
            origin[field] = str(path)
    env_only = _config_environ(environ)
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
            raise ConfigError(f"config error: --set expects key=value, got {_without_secret(item)}")
        field = _field_for(key, "--set")
        set_layer[field] = value.strip()
        origin[field] = "--set"
    SidecarConfig._layers = (file_layer, set_layer, env_only)
    try:
        return SidecarConfig()  # type: ignore[call-arg]  # required keys come from the sources
    except ValidationError as e:
        raise ConfigError(_one_line(e, origin, file_layer, set_layer, env_only)) from None
    finally:
        SidecarConfig._layers = ({}, {}, {})


SECRET_KEYS = tuple(
    key_of(f) for f, info in SidecarConfig.model_fields.items() if info.annotation is SecretStr
)


def _without_secret(item: str) -> str:
    """``item`` quoted for an error message, unless it starts with a secret key (then only the key)."""
    for key in SECRET_KEYS:
        if item.strip().startswith(key):
            return f"{key!r} followed by a hidden value"
    return repr(item)


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
    shown = "********" if key_of(field) in SECRET_KEYS else repr(raw)
    return f"config error: {key} = {shown} (from {source}): {message}"
