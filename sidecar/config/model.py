"""The config model: every key, its default, and the rules that span keys.

A pydantic-settings ``BaseSettings`` whose sources are exactly the file, ``TIMESYNC_*`` env and
``--set`` layers (:mod:`sidecar.config.sources`); field ``max_task_idle_ms`` is key
``max.task.idle.ms``. Validation errors become one line in :mod:`sidecar.config.loading`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from sidecar.config.exposure import http_exposure
from sidecar.config.extractor import extractor_format, parse_extractor
from sidecar.config.sources import FileLayer, TimesyncEnv
from sidecar.core import TaskConfig
from sidecar.core.readiness import IDLE_AUTO, IDLE_FOREVER
from timesync_wire.formats import ValueFormat
from timesync_wire.registry.urls import SettingNames, credentials_problem, shown_url, url_problem

ENV_PREFIX = "TIMESYNC_"
#: A timeout that never ends (Kafka's Long.MAX_VALUE).
FOREVER_MS = IDLE_FOREVER  # Kafka's Long.MAX_VALUE: "max"
#: Variables of the Spark job (``TIMESYNC_SPARK_JARS_DIR``...); the sidecar leaves them alone.
SPARK_ENV_PREFIX = "TIMESYNC_SPARK_"
#: How the registry URL rules (:mod:`timesync_wire.registry.urls`) name the sidecar's keys.
REGISTRY_NAMES = SettingNames(
    url="schema.registry.url",
    cafile="schema.registry.ssl.cafile",
    credentials_instead="schema.registry.basic.auth.user.info (from a secret, as "
    "TIMESYNC_SCHEMA_REGISTRY_BASIC_AUTH_USER_INFO)",
    credentials="schema.registry.basic.auth.user.info or schema.registry.bearer.auth.token",
    shown_in="/status, logs and errors",
)


class ConfigError(ValueError):
    """A configuration problem, as one line for the user."""


def key_of(field: str) -> str:
    return field.replace("_", ".")


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

    # --- Schema Registry (the avro: and protobuf: extractors), keys as Confluent's clients name them.
    schema_registry_url: str = ""
    # "user:password" for HTTP basic auth; or a bearer token. Secrets: never logged or shown.
    schema_registry_basic_auth_user_info: SecretStr = SecretStr("")
    schema_registry_bearer_auth_token: SecretStr = SecretStr("")
    schema_registry_ssl_cafile: str = ""
    # How long a schema id the registry does not know (404) is believed unknown before it is asked
    # again: an id read before it was registered must not stay unknown until a restart.
    schema_registry_missing_id_ttl_ms: int = Field(10_000, ge=0)
    # Schema ids (and Protobuf message paths) not seen before that one fetch may look up; the
    # records of the ids past it take the invalid path, with a reason saying so.
    schema_registry_max_new_ids_per_fetch: int = Field(500, ge=1)
    # A registry unusable (unreachable, 5xx, 429, garbled answers) for longer than this turns
    # /healthz unhealthy (500); "max" keeps it degraded for ever. Records wait either way.
    schema_registry_unhealthy_after_ms: int = 300_000

    @field_validator("schema_registry_url")
    @classmethod
    def _registry_url(cls, value: str) -> str:
        problem = url_problem(value, REGISTRY_NAMES) if value else None
        if problem:
            raise ValueError(problem)
        return value

    @field_validator("schema_registry_basic_auth_user_info")
    @classmethod
    def _registry_user_info(cls, value: SecretStr) -> SecretStr:
        if value.get_secret_value() and ":" not in value.get_secret_value():
            raise ValueError("expected user:password (HTTP basic auth)")
        return value

    @field_validator("schema_registry_unhealthy_after_ms", mode="before")
    @classmethod
    def _registry_unhealthy_after(cls, value: Any) -> int:
        return _millis_or_max(value, 1000, "expected a number of milliseconds (at least 1000), or max")

    @model_validator(mode="after")
    def _schema_registry(self) -> SidecarConfig:
        fmt = self.value_format
        if fmt is not None and fmt.schema_type is not None and not self.schema_registry_url:
            raise ValueError(
                f"timestamp.extractor={fmt.name}:... needs schema.registry.url (its schemas come from there)"
            )
        basic = bool(self.schema_registry_basic_auth_user_info.get_secret_value())
        bearer = bool(self.schema_registry_bearer_auth_token.get_secret_value())
        if basic and bearer:
            raise ValueError(
                "schema.registry.basic.auth.user.info and schema.registry.bearer.auth.token are both "
                "set; give one"
            )
        if self.schema_registry_url:
            credentials = (
                "schema.registry.basic.auth.user.info"
                if basic
                else "schema.registry.bearer.auth.token"
                if bearer
                else None
            )
            problem = credentials_problem(
                self.schema_registry_url, credentials, bool(self.schema_registry_ssl_cafile), REGISTRY_NAMES
            )
            if problem:
                raise ValueError(problem)
        elif basic or bearer or self.schema_registry_ssl_cafile:
            given = [
                k
                for k, v in (
                    ("basic.auth.user.info", basic),
                    ("bearer.auth.token", bearer),
                    ("ssl.cafile", self.schema_registry_ssl_cafile),
                )
                if v
            ]
            raise ValueError(
                f"schema.registry.{given[0]} is set but schema.registry.url is empty: set the URL or "
                "remove the key"
            )
        return self

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
            FileLayer(settings_cls, set_layer),
            TimesyncEnv(settings_cls, environ),
            FileLayer(settings_cls, file_layer),
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
        ignored = self._ignored_security_keys()
        if ignored:
            raise ValueError(
                f"{', '.join(ignored)} set, but security.protocol={self.security_protocol} ignores "
                f"{'it' if len(ignored) == 1 else 'them'}: the connection would not use what you "
                "configured; set security.protocol (SSL, SASL_PLAINTEXT or SASL_SSL) or remove the keys"
            )
        exposure = http_exposure(
            self.http_host, self.http_port, bool(self.http_auth_token.get_secret_value())
        )
        if exposure:
            raise ValueError(exposure)
        return self

    def _ignored_security_keys(self) -> list[str]:
        """``ssl.*`` keys set (away from their defaults) without TLS, ``sasl.*`` keys without SASL:
        the Kafka clients would silently connect without them."""
        defaults = type(self).model_fields
        uses = {"ssl_": "SSL" in self.security_protocol, "sasl_": "SASL" in self.security_protocol}
        return [
            key_of(name)
            for name in defaults
            for prefix, used in uses.items()
            if name.startswith(prefix)
            and not used
            and name in self.model_fields_set
            and getattr(self, name) != defaults[name].default
        ]

    # -- derived views ----------------------------------------------------------------------------

    @property
    def topics(self) -> list[str]:
        return self.input_topics.split(",")

    @property
    def effective_group_id(self) -> str:
        return self.group_id or f"timesync-{self.output_topic}"

    @property
    def value_format(self) -> ValueFormat | None:
        """The value format ``timestamp.extractor`` reads (``None``: the record's timestamp)."""
        return extractor_format(self.timestamp_extractor)

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
            elif name == "schema_registry_url":
                value = shown_url(value)  # refused with credentials in it; shown without them anyway
            elif name == "max_task_idle_ms" and value == IDLE_AUTO:
                value = "auto"
            out[key_of(name)] = value
        return out


FIELDS = tuple(SidecarConfig.model_fields)
KEYS = {key_of(f): f for f in FIELDS}
ENV_NAMES = {ENV_PREFIX + f.upper(): f for f in FIELDS}
SECRET_KEYS = tuple(
    key_of(f) for f, info in SidecarConfig.model_fields.items() if info.annotation is SecretStr
)
