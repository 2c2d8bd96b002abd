"""The config model: every key, its default, its meaning, and the rules that span keys.

A pydantic-settings ``BaseSettings`` whose sources are exactly the file, ``TIMESYNC_*`` env and
``--set`` layers (:mod:`sidecar.config.sources`); field ``max_task_idle_ms`` is key
``max.task.idle.ms``. Validation errors become one line in :mod:`sidecar.config.loading`.

The model is the one source of the config surface: each field's docstring is its one line of
meaning (`code` in single backticks, as Markdown writes it; the terminal listing shows it plain),
its type (a ``Literal``, bounds, or a form of :mod:`sidecar.config.forms`) what it accepts.
``timesync-sidecar config``, the key table of docs/sidecar.md and the Helm chart's values schema
are derived from it (:mod:`sidecar.config.surface`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from sidecar.config.exposure import http_exposure
from sidecar.config.forms import (
    BudgetMillis,
    Extractor,
    GzipLevel,
    IdleMillis,
    LateRecords,
    RegistryUrl,
    ReplicationFactor,
    SecondOrMoreOrMax,
    Servers,
    TopicList,
    UserInfo,
)
from sidecar.config.registry_url import credentials_problem, shown_url, url_problem
from sidecar.config.sources import FileLayer, TimesyncEnv
from sidecar.core import TaskConfig, parse_extractor
from sidecar.core.readiness import IDLE_AUTO, IDLE_FOREVER

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
        env_prefix=ENV_PREFIX,
        extra="forbid",
        frozen=True,
        case_sensitive=False,
        use_attribute_docstrings=True,  # each field's docstring is its meaning (sidecar.config.surface)
    )

    bootstrap_servers: Servers = Field(min_length=1)
    """Kafka brokers to connect to first: `host:port`, comma-separated"""
    input_topics: TopicList
    """The topics to merge, comma-separated; their order breaks timestamp ties"""
    output_topic: str = Field(min_length=1)
    """The ordered topic the sidecar writes; created when missing"""
    group_id: str = ""
    """Consumer group of the committed offsets; empty: `timesync-<output.topic>`"""
    auto_offset_reset: Literal["earliest", "latest"] = "earliest"
    """Where to start in a partition that has no committed offset"""
    task_grouping: Literal["single", "partition"] = "single"
    """`single`: one task, one ordered output partition; `partition`: task i is partition i of each input"""
    task_grouping_single_guard: bool = True
    """With `task.grouping=single`, refuse to start while another host runs the same group"""
    max_task_idle_ms: IdleMillis = 0
    """How long an empty, caught-up partition may hold the merge back; `auto`: learnt per partition"""
    max_task_idle_budget_ms: BudgetMillis = 1000
    """The most `max.task.idle.ms=auto` waits for one partition"""
    buffered_records_per_partition: int = Field(1000, ge=1)
    """Pause fetching a partition holding this many records (resume below half)"""
    timestamp_extractor: Extractor = "record"
    """Where the event time comes from: the record's Kafka timestamp, or a field of its value"""
    timestamp_invalid: Literal["fail", "skip", "partition-time"] = "fail"
    """An unreadable event time: `fail` (then `errors.tolerance` decides), `skip` it, or `partition-time`"""
    late_records: LateRecords = "forward"
    """Records behind stream time: `forward` (marked `timesync.late=1`), `drop`, or write to a topic"""
    processing_guarantee: Literal["at_least_once", "exactly_once_v2"] = "at_least_once"
    """`exactly_once_v2`: transactional writes, the input offsets committed in the transaction"""
    compression_type: Literal["none", "gzip", "snappy", "lz4", "zstd"] = "lz4"
    """Compression of the output batches"""
    compression_gzip_level: GzipLevel = -1
    """gzip level; `-1`: zlib's default (6)"""
    compression_lz4_level: int = Field(9, ge=1, le=17)
    """lz4 level, as in Kafka's producer: `9` is LZ4's fast compressor, any other LZ4 HC at that level"""
    compression_zstd_level: int = Field(3, ge=-131072, le=22)
    """zstd level"""
    linger_ms: int = Field(5, ge=0)
    """How long the producer waits to fill an output batch"""
    delivery_timeout_ms: SecondOrMoreOrMax = 120_000
    """How long output may wait for the cluster (and restarts go on without progress) before exit 1"""
    replication_factor: ReplicationFactor = -1
    """Replicas of the topics the sidecar creates (output, DLQ, late); `-1`: the broker's default"""
    errors_tolerance: Literal["none", "all"] = "none"
    """A bad record: `none` stops the sidecar (exit 1); `all` sends it to the dead letter queue"""
    errors_deadletterqueue_topic_name: str = ""
    """The dead letter queue's topic; required with `errors.tolerance=all`"""
    errors_deadletterqueue_max_ratio: float = Field(0.5, gt=0, le=1)
    """Stop (exit 1) when more than this share of the last 1,000 records failed"""
    watermark_policy: Literal["auto", "log-append-time", "bounded-delay", "min-window"] = "auto"
    """How watermarks move; `auto`: `log-append-time` on LogAppendTime topics, else `bounded-delay`"""
    watermark_max_delay_ms: int = Field(5000, ge=0)
    """`bounded-delay`: how late CreateTime records may be"""
    watermark_window_ms: int = Field(60000, ge=1)
    """`min-window`: the span of processing time whose smallest event time is the watermark"""
    watermark_idle_epsilon_ms: int = Field(2000, ge=0)
    """`log-append-time`: the clock skew allowed when a caught-up partition follows the fetch time"""
    watermark_heartbeat_ms: int = Field(1000, ge=0)
    """Write a heartbeat record after this long without output; `0`: no heartbeats"""
    http_host: str = Field("127.0.0.1", json_schema_extra={"minLength": 1})  # "": see http_exposure
    """Address of the HTTP server (`0.0.0.0` in the image); any but loopback needs `http.auth.token`"""
    http_port: int = Field(8080, ge=0, le=65535)
    """Port of the HTTP server (`/healthz`, `/metrics`, `/status`, the control endpoints); `0`: none"""
    http_auth_token: SecretStr = SecretStr("")
    """Bearer token of `PUT /pause`, `PUT /resume`, `POST /restart`; without it, loopback callers only"""
    security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = "PLAINTEXT"
    """How the Kafka clients connect"""
    ssl_cafile: str = ""
    """PEM file of the CA to trust for the brokers (default: the system's)"""
    ssl_certfile: str = ""
    """PEM client certificate, for mutual TLS"""
    ssl_keyfile: str = ""
    """PEM key of `ssl.certfile`"""
    ssl_password: SecretStr = SecretStr("")
    """Password of an encrypted `ssl.keyfile`"""
    ssl_check_hostname: bool = True
    """Check the broker's certificate against its host name"""
    sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] = "PLAIN"
    """SASL mechanism"""
    sasl_username: str = ""
    """SASL user name"""
    sasl_password: SecretStr = SecretStr("")
    """SASL password"""

    # --- Schema Registry (the avro: and protobuf: extractors), keys as Confluent's clients name them.
    schema_registry_url: RegistryUrl = ""
    """The Schema Registry's Confluent-compatible API; required by the `avro:` and `protobuf:` extractors"""
    schema_registry_basic_auth_user_info: UserInfo = SecretStr("")
    """Credentials for the registry's HTTP basic auth (or a bearer token, not both)"""
    schema_registry_bearer_auth_token: SecretStr = SecretStr("")
    """Bearer token for the registry (or basic auth, not both)"""
    schema_registry_ssl_cafile: str = ""
    """PEM file of the CA to trust for an `https://` registry (default: the system's)"""
    # An id read before it was registered must not stay unknown until a restart.
    schema_registry_missing_id_ttl_ms: int = Field(10_000, ge=0)
    """How long a schema id the registry does not know (404) is believed unknown before asking again"""
    schema_registry_max_new_ids_per_fetch: int = Field(500, ge=1)
    """Schema ids (and Protobuf message paths) new to the sidecar one fetch may look up; past it: invalid"""
    schema_registry_unhealthy_after_ms: SecondOrMoreOrMax = 300_000
    """A registry unusable this long turns `/healthz` unhealthy (500), records waiting; `max`: never"""

    @field_validator("schema_registry_url")
    @classmethod
    def _registry_url(cls, value: str) -> str:
        problem = url_problem(value) if value else None
        if problem:
            raise ValueError(problem)
        return value

    @field_validator("schema_registry_basic_auth_user_info")
    @classmethod
    def _registry_user_info(cls, value: SecretStr) -> SecretStr:
        if value.get_secret_value() and ":" not in value.get_secret_value():
            raise ValueError("expected user:password (HTTP basic auth)")
        return value

    @model_validator(mode="after")
    def _schema_registry(self) -> SidecarConfig:
        reads_registry = self.timestamp_extractor.startswith(("avro:", "protobuf:"))
        if reads_registry and not self.schema_registry_url:
            kind = self.timestamp_extractor.partition(":")[0]
            raise ValueError(
                f"timestamp.extractor={kind}:... needs schema.registry.url (its schemas come from there)"
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
                self.schema_registry_url, credentials, bool(self.schema_registry_ssl_cafile)
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

    @field_validator("timestamp_extractor")
    @classmethod
    def _extractor(cls, value: str) -> str:
        parse_extractor(value)  # raises ValueError with what is allowed
        return value

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
