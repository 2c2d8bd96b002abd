"""The options every job takes, in one place: their command line and what they become.

Source, security, values, sink and Spark options are the same for every job, so they are
written once here: :func:`common_parser` is the argparse parent every job's subcommand starts
from, :class:`CommonOptions` checks them before Spark starts (the source, sink, security and
session settings), and :func:`job_input` finishes what needs a running session (parsing
``--value-schema``) into the :class:`JobInput` every job's ``build`` receives. ``--value-format``
and the registry options are resolved in :meth:`CommonOptions.from_args` (the schemas fetched
before Spark starts) and travel on :class:`SourceOptions`. An option that
every job should take is added here only: an argument in :func:`common_parser`, its check in
:meth:`CommonOptions.from_args` or :func:`job_input`, and a field of :class:`JobInput` when the
jobs need it.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from spark_consumer.options import PROG, UsageError, check_field, key_value, parse_duration
from spark_consumer.registry_credentials import add_credential_options, registry_credentials
from spark_consumer.schema_registry import (
    BASIC_AUTH_ENV,
    BEARER_TOKEN_ENV,
    RegistryClient,
    RegistrySettings,
    value_subject,
)
from spark_consumer.security import MECHANISMS, PROTOCOLS, KafkaSecurity
from spark_consumer.session import SessionOptions
from spark_consumer.value_formats import VALUE_FORMATS, BinaryValues, ProtobufValues, plan_values

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

    from spark_consumer.sinks import SinkOptions
    from spark_consumer.source import SourceOptions


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line on stderr and exit 2 (no usage dump)."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(without_values(message))


def without_values(message: str) -> str:
    """An ``argparse`` error without the values it quotes: ``unrecognized arguments: alice:pw``
    and an ambiguous ``--schema-registry-basic-auth-user=alice:pw`` name only the options, and an
    invalid choice is repeated only when it is a plain word (the sidecar's CLI does the same:
    ``sidecar/config/secrets.py``)."""
    head, sep, rest = message.partition("unrecognized arguments: ")
    if sep:
        words = rest.split()
        options = [w.split("=", 1)[0] for w in words if w.startswith("-")]
        hidden = len(words) - len(options)
        shown = " ".join(options)
        if hidden:
            shown += f"{' and ' if shown else ''}{hidden} more word{'s' if hidden > 1 else ''} (not shown)"
        message = head + sep + shown
    # An invalid choice is shown when it is a plain word (a mistyped enum, 'TLS'), else cut.
    message = re.sub(
        r"invalid choice: (?!'[\w.-]{1,32}' \()(.*) \(choose from", "invalid choice (choose from", message
    )
    return re.sub(r"(--?[\w.-]+)=\S*", r"\1=...", message)


def _pair(text: str) -> tuple[str, str]:
    try:
        return key_value(text)  # never echoes a value: it may be a password
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def common_parser() -> Parser:
    """The parent parser of every job: the source, security, values, sink and spark groups."""
    common = Parser(add_help=False)
    _source_arguments(common.add_argument_group("source (the ordered topic)"))
    _security_arguments(
        common.add_argument_group(
            "security (passwords from $TIMESYNC_SPARK_SASL_PASSWORD and $TIMESYNC_SPARK_SSL_PASSWORD)"
        )
    )
    _value_arguments(
        common.add_argument_group(
            f"values (registry secrets also from ${BASIC_AUTH_ENV} and ${BEARER_TOKEN_ENV})"
        )
    )
    _sink_arguments(common.add_argument_group("sink"))
    _spark_arguments(common.add_argument_group("spark"))
    return common


def _source_arguments(src: argparse._ArgumentGroup) -> None:
    src.add_argument("--bootstrap-servers", required=True, metavar="HOST:PORT[,...]")
    src.add_argument("--topic", required=True, help="the ordered topic the sidecar writes")
    src.add_argument(
        "--starting-offsets", default="earliest", help="earliest (default), latest, or Spark's JSON"
    )
    src.add_argument(
        "--watermark-delay",
        default="1s",
        metavar="DURATION",
        help="Spark's watermark delay (default 1s); the ordered input needs only a small one",
    )
    src.add_argument("--max-offsets-per-trigger", type=int, metavar="N")
    src.add_argument(
        "--kafka-option",
        action="append",
        type=_pair,
        default=[],
        metavar="KEY=VALUE",
        help="passed to the Kafka source and sink, e.g. kafka.security.protocol=SSL",
    )


def _security_arguments(sec: argparse._ArgumentGroup) -> None:
    sec.add_argument("--security-protocol", choices=PROTOCOLS, help="as the sidecar's security.protocol")
    sec.add_argument("--sasl-mechanism", choices=MECHANISMS, help="default PLAIN")
    sec.add_argument("--sasl-username", metavar="NAME")
    sec.add_argument("--ssl-cafile", metavar="PEM", help="CA certificates to trust (PEM)")
    sec.add_argument(
        "--no-ssl-check-hostname",
        dest="ssl_check_hostname",
        action="store_false",
        help="accept a broker certificate that does not name the host",
    )
    sec.add_argument(
        "--ssl-keystore",
        metavar="FILE",
        help="client certificate and key: .p12/.pfx (PKCS#12), .jks, or .pem (key and chain in one file)",
    )


def _value_arguments(val: argparse._ArgumentGroup) -> None:
    val.add_argument(
        "--value-format",
        choices=VALUE_FORMATS,
        default="json",
        help="json (default): text parsed with --value-schema; avro, protobuf: framed for a Schema "
        "Registry, schemas from --schema-registry-url",
    )
    val.add_argument(
        "--value-schema",
        metavar="DDL|FILE",
        help="DDL string, or a file: DDL, Spark schema JSON, JSON Schema (--value-format json)",
    )
    val.add_argument(
        "--key-field", metavar="FIELD", help="field of the value to key on (default: the Kafka key)"
    )
    val.add_argument(
        "--schema-registry-url", metavar="URL", help="as schema.registry.url (Confluent's API base)"
    )
    val.add_argument(
        "--value-subject", metavar="SUBJECT", help="the values' subject (default: <--topic>-value)"
    )
    val.add_argument(
        "--value-message",
        metavar="NAME",
        help="--value-format protobuf: the values' message type, e.g. shop.Payment (default: the "
        "schema's first message)",
    )
    add_credential_options(val)
    val.add_argument("--schema-registry-ssl-cafile", metavar="PEM", help="CA certificates to trust (PEM)")


def _sink_arguments(out: argparse._ArgumentGroup) -> None:
    out.add_argument("--sink", choices=("kafka", "console", "parquet"), default="kafka")
    out.add_argument("--output-topic", help="with the Kafka sink (created when missing)")
    out.add_argument("--path", help="output directory for --sink parquet")
    out.add_argument(
        "--checkpoint", required=True, metavar="DIR", help="checkpoint directory; a restart resumes from it"
    )
    out.add_argument("--trigger", default="1s", metavar="DURATION|available-now")


def _spark_arguments(spark: argparse._ArgumentGroup) -> None:
    spark.add_argument("--master", help="Spark master (default local[*])")
    spark.add_argument(
        "--jars-dir",
        type=Path,
        help="directory with the Kafka connector jars (default: none if the connector is on Spark's "
        "classpath already, else the checkout's .cache/jars/spark)",
    )
    spark.add_argument(
        "--packages",
        nargs="?",
        const="auto",
        metavar="COORDS",
        help="fetch the connector with Ivy instead (default coordinates: the one matching pyspark)",
    )
    spark.add_argument("--shuffle-partitions", type=int, default=2)
    spark.add_argument("--conf", action="append", type=_pair, default=[], metavar="KEY=VALUE")


def _trigger(text: str) -> str | int:
    return "available-now" if text == "available-now" else parse_duration(text, "--trigger")


@dataclass(frozen=True, slots=True)
class CommonOptions:
    """The shared options, parsed and checked without Spark."""

    security: KafkaSecurity
    source: SourceOptions
    sink: SinkOptions
    session: SessionOptions

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> CommonOptions:
        """Check the shared options (:class:`UsageError` names the option and the value)."""
        # Imported here: building the parser (--help) needs no pyspark; running a job does.
        from spark_consumer.sinks import SinkOptions
        from spark_consumer.source import SourceOptions

        security = KafkaSecurity.from_args(
            args.security_protocol,
            args.sasl_mechanism,
            args.sasl_username,
            args.ssl_cafile,
            args.ssl_check_hostname,
            args.ssl_keystore,
        )
        # The security settings first: an explicit --kafka-option wins.
        kafka_options = {**security.kafka_options(), **dict(args.kafka_option)}
        source = SourceOptions(
            bootstrap_servers=args.bootstrap_servers,
            topic=args.topic,
            watermark_delay_ms=parse_duration(args.watermark_delay, "--watermark-delay", allow_zero=True),
            starting_offsets=args.starting_offsets,
            max_offsets_per_trigger=args.max_offsets_per_trigger,
            kafka_options=kafka_options,
        )
        sink = SinkOptions(
            kind=args.sink,
            checkpoint=args.checkpoint,
            bootstrap_servers=args.bootstrap_servers,
            topic=args.output_topic,
            path=args.path,
            trigger=_trigger(args.trigger),
            query_name=f"timesync-{args.job}",
            kafka_options={k: v for k, v in kafka_options.items() if k.startswith("kafka.")},
        )
        if args.key_field is not None:
            check_field(args.key_field, "--key-field")
        source = dataclasses.replace(source, values=registry_values(args))
        if args.shuffle_partitions < 1:
            raise UsageError(f"--shuffle-partitions: {args.shuffle_partitions} must be at least 1")
        session = SessionOptions(
            master=args.master,
            jars_dir=args.jars_dir,
            packages=args.packages,
            shuffle_partitions=args.shuffle_partitions,
            conf=dict(args.conf),
        )
        return cls(security, source, sink, session)


def registry_settings(args: argparse.Namespace) -> RegistrySettings:
    """``--schema-registry-*``, the credentials from the environment or a file
    (:mod:`spark_consumer.registry_credentials`)."""
    if not args.schema_registry_url:
        raise UsageError(f"--schema-registry-url: required with --value-format {args.value_format}")
    basic, bearer = registry_credentials(args)
    return RegistrySettings(args.schema_registry_url, basic, bearer, args.schema_registry_ssl_cafile)


def registry_values(args: argparse.Namespace) -> BinaryValues | None:
    """The value subject's schemas fetched from the registry (``None`` for JSON values).

    Runs before Spark starts: an unreachable registry or an unknown subject is a one-line
    :class:`UsageError`.
    """
    if args.value_message is not None and args.value_format != "protobuf":
        raise UsageError("--value-message: only with --value-format protobuf")
    if args.value_format == "json":
        registry_only = [
            name for name in ("schema_registry_url", "value_subject") if getattr(args, name) is not None
        ]
        if registry_only:
            flag = "--" + registry_only[0].replace("_", "-")
            raise UsageError(f"{flag}: only with --value-format avro or protobuf")
        return None
    if args.value_schema:
        raise UsageError(
            f"--value-schema: not with --value-format {args.value_format}; the schema comes from the registry"
        )
    subject = value_subject(args.topic, args.value_subject)
    return subject_values(args, subject, args.value_message, "--value-message")


def subject_values(
    args: argparse.Namespace, subject: str, message: str | None, message_flag: str
) -> BinaryValues:
    """``subject``'s schemas from the registry of ``--schema-registry-*``, planned for
    ``--value-format`` (and Protobuf's ``message``); a warning on stderr when a Protobuf file of
    several messages is read as its first because ``message_flag`` named none."""
    values = plan_values(args.value_format, RegistryClient(registry_settings(args)), subject, message)
    if isinstance(values, ProtobufValues) and message is None:
        from spark_consumer.protobuf_schema import top_level_messages

        if top_level_messages(values.descriptor_set, values.file_name) > 1:
            print(
                f"{PROG}: warning: subject {subject!r} defines several messages; the values are read as "
                f"its first, {values.message_name} ({message_flag} names another)",
                file=sys.stderr,
            )
    return values


def require_value_schema(args: argparse.Namespace, reads_value_fields: bool) -> None:
    """A job that reads fields of the value (``--key-field``, ``--agg FUNCTION:FIELD``) needs
    ``--value-schema`` to find them, or a registry format (whose schema is the registry's)."""
    if reads_value_fields and not args.value_schema and args.value_format == "json":
        raise UsageError("--value-schema: required to read value fields (--key-field, --agg FUNCTION:FIELD)")


@dataclass(frozen=True, slots=True)
class JobInput:
    """What the shared options give every job's ``build``, once Spark runs.

    ``value_schema`` is ``--value-schema`` parsed, or the struct Avro or Protobuf values decode
    to (``None``: the value stays a JSON string), with
    ``key_field`` known to name one of its fields.
    """

    source: SourceOptions
    value_schema: StructType | None
    key_field: str | None


def job_input(args: argparse.Namespace, source: SourceOptions) -> JobInput:
    """Parse the value schema (Spark's DDL parser needs the session) and check the key field in it.

    For Avro and Protobuf values the schema is the type they decode to (from the registry's).
    """
    from spark_consumer.schema import field_type, load_schema

    if source.values is not None:
        from pyspark.sql import SparkSession

        from spark_consumer.value_decoding import value_struct

        schema: StructType | None = value_struct(SparkSession.active(), source.values)
    else:
        schema = load_schema(args.value_schema) if args.value_schema else None
    if schema is not None and args.key_field:
        field_type(schema, args.key_field, "--key-field")
    return JobInput(source, schema, args.key_field)
