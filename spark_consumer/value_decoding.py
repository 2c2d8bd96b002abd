"""Avro and Protobuf values of the ordered topic decoded into Spark structs, each with its verdict.

:func:`decoded_value` turns the BINARY Kafka value into the struct of the subject's latest
schema followed by one more field, :data:`DECODED`: TRUE when the value decoded, NULL (and every
other field NULL) when it did not — wrong framing, an id that is not one of the subject's
versions, a body that does not parse, or one that breaks a bound of
:mod:`spark_consumer.value_limits`. A NULL value (a tombstone) stays NULL. The verdict is what
:func:`spark_consumer.values.with_data` turns into ``data`` (NULL when it did not decode) and
counts; :func:`value_struct` is the type of ``data``, known before the query starts so the field
options can be checked against it.

Avro goes through Spark's own ``from_avro`` (``spark-avro_2.13``), once per schema id of the
subject: ``CASE id WHEN 1 THEN from_avro(body, <version with id 1>, avroSchema=<latest>) …``.
Each branch decodes with the record's own writer schema and resolves it to the latest (the
reader), so every branch has the latest version's type; only the branch of a record's id runs.
The verdict costs nothing more: the reader schema gets one more field, :data:`DECODED`, a
boolean that no writer has and whose default is ``true``, so Avro's schema resolution sets it on
every body that decodes, and ``from_avro``'s PERMISSIVE mode leaves it NULL on every body that
does not. A value above ``spark.timesync.values.maxBytes`` is not handed to ``from_avro`` at all.
Protobuf is decoded in the Python workers (:mod:`spark_consumer.protobuf_rows` says why).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from pyspark.sql import Column, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType, StructField, StructType

from spark_consumer.framing import HEADER_SIZE, MAGIC
from spark_consumer.options import UsageError
from spark_consumer.value_formats import AvroValues, BinaryValues, ProtobufValues
from spark_consumer.value_limits import MAX_BYTES_KEY, MAX_ITEMS_KEY, ValueLimits

#: The verdict field a decoded struct ends with: TRUE when the value decoded, else NULL.
DECODED = "__timesync_decoded"

#: from_avro's options: a body that does not decode gives a struct of NULL fields, not a failed query.
_PERMISSIVE = {"mode": "PERMISSIVE"}


def schema_id(value: Column) -> Column:
    """The 4-byte big-endian schema id of a framed value (bytes 2–5) as BIGINT."""
    return F.conv(F.hex(F.substring(value, 2, 4)), 16, 10).cast("long")


def is_framed(value: Column) -> Column:
    """At least the 5 header bytes, the first one the magic byte 0."""
    return (F.length(value) >= HEADER_SIZE) & (F.hex(F.substring(value, 1, 1)) == F.lit(f"{MAGIC:02X}"))


def avro_body(value: Column) -> Column:
    """The bytes after the header (Avro has no message indexes)."""
    return value.substr(F.lit(HEADER_SIZE + 1), F.length(value) - HEADER_SIZE)


def session_limits(spark: SparkSession) -> ValueLimits:
    """The bounds on one value this session's settings give (:mod:`spark_consumer.value_limits`)."""
    keys = (MAX_BYTES_KEY, MAX_ITEMS_KEY)
    return ValueLimits.from_conf({k: v for k in keys if (v := spark.conf.get(k, None)) is not None})


def with_verdict_field(reader_schema: str, subject: str) -> str:
    """The Avro reader schema with :data:`DECODED` added: a boolean, default ``true``."""
    schema = json.loads(reader_schema)
    if not isinstance(schema, dict) or schema.get("type") != "record":
        raise UsageError(
            f"--value-format avro: subject {subject!r} holds no record; the jobs read fields of a record"
        )
    fields = list(schema.get("fields") or [])
    if any(isinstance(f, dict) and f.get("name") == DECODED for f in fields):
        raise UsageError(
            f"--value-format avro: subject {subject!r} has a field {DECODED}, a name timesync keeps"
        )
    return json.dumps({**schema, "fields": [*fields, {"name": DECODED, "type": "boolean", "default": True}]})


def avro_value(value: Column, values: AvroValues, limits: ValueLimits) -> Column:
    """The decoded struct of the latest version and its verdict, each record read with its own
    id's schema (see the module docstring)."""
    from pyspark.sql.avro.functions import from_avro

    options = {**_PERMISSIVE, "avroSchema": with_verdict_field(values.reader_schema, values.subject)}
    framed = is_framed(value) & (F.length(value) <= F.lit(limits.max_bytes))
    sid, body = schema_id(value), avro_body(value)
    decoded: Column | None = None
    for writer_id, writer in sorted(values.writer_schemas.items()):
        branch = from_avro(body, writer, options)
        matches = framed & (sid == F.lit(writer_id))
        decoded = F.when(matches, branch) if decoded is None else decoded.when(matches, branch)
    assert decoded is not None  # plan_values refuses a subject without versions
    probe = (
        SparkSession.active()
        .range(0)
        .select(from_avro(F.lit(None).cast("binary"), values.reader_schema, options))
    )
    return decoded.when(value.isNotNull(), _undecoded(probe.schema[0].dataType))


def _undecoded(struct: Any) -> Column:
    """A struct of ``struct``'s type whose fields are all NULL: the verdict of a value no branch decodes."""
    return F.struct(*(F.lit(None).cast(f.dataType).alias(f.name) for f in struct.fields))


def protobuf_value(value: Column, values: ProtobufValues, limits: ValueLimits) -> Column:
    from spark_consumer.protobuf_rows import FramedDecoder

    decoder = FramedDecoder(
        values.descriptor_set, values.file_name, values.schema_ids, values.message_indexes, limits
    )
    # Row at a time (not Arrow-batched): the decoder returns nested dicts, maps and datetimes.
    decode = F.udf(WithVerdict(decoder), with_verdict_type(protobuf_struct(values)), useArrow=False)
    return decode(value)


def with_verdict_type(struct: StructType) -> StructType:
    return StructType([*struct.fields, StructField(DECODED, BooleanType(), nullable=True)])


class WithVerdict:
    """A row decoder (a value → its row, or ``None`` when it does not decode) as the UDF that
    gives the verdict: the row with :data:`DECODED` TRUE, or only NULLs; a NULL value stays NULL.
    Picklable when the decoder is."""

    def __init__(self, decode: Callable[[bytes], dict[str, Any] | None]) -> None:
        self.decode = decode

    def __call__(self, value: bytes | None) -> dict[str, Any] | None:
        if value is None:
            return None
        row = self.decode(value)
        return {DECODED: None} if row is None else {**row, DECODED: True}


def protobuf_struct(values: ProtobufValues) -> StructType:
    from spark_consumer.protobuf_rows import file_descriptor, message_descriptor, struct_type

    message = message_descriptor(
        file_descriptor(values.descriptor_set, values.file_name), values.message_indexes
    )
    if message is None:
        raise UsageError(f"--value-format protobuf: subject {values.subject!r} defines no message")
    return struct_type(message)


def decoded_value(value: Column, values: BinaryValues) -> Column:
    """``value`` (BINARY) decoded as ``values`` says, with its verdict (see the module
    docstring), within the active session's bounds."""
    limits = session_limits(SparkSession.active())
    if isinstance(values, AvroValues):
        return avro_value(value, values, limits)
    return protobuf_value(value, values, limits)


def require_spark_avro(spark: SparkSession) -> None:
    """:class:`~spark_consumer.session.SessionError` (one line, what to do) when ``spark-avro`` is
    not on the driver's classpath; pyspark would print a banner and fail with a py4j TypeError."""
    from py4j.java_gateway import JavaPackage

    from spark_consumer.session import AVRO, DEFAULT_JARS_DIR, SessionError, pyspark_version

    if isinstance(getattr(spark.sparkContext._jvm, "org.apache.spark.sql.avro.functions"), JavaPackage):
        raise SessionError(
            f"Spark's Avro functions ({AVRO}-{pyspark_version()}.jar) are not on Spark's classpath: "
            f"put it beside the Kafka connector (in a checkout `make jars` fills {DEFAULT_JARS_DIR}), "
            "or pass --packages auto"
        )


def value_struct(spark: SparkSession, values: BinaryValues) -> StructType:
    """The Spark type :func:`decoded_value` gives; :class:`UsageError` if it is not a record."""
    if isinstance(values, ProtobufValues):
        return protobuf_struct(values)
    from pyspark.sql.avro.functions import from_avro

    require_spark_avro(spark)

    probe = spark.range(0).select(from_avro(F.lit(None).cast("binary"), values.reader_schema).alias("v"))
    decoded = probe.schema["v"].dataType
    if not isinstance(decoded, StructType):
        raise UsageError(
            f"--value-format avro: subject {values.subject!r} holds a {decoded.simpleString()}, "
            "not a record; the jobs read fields of a record"
        )
    return decoded
