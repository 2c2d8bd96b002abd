"""Avro and Protobuf values of the ordered topic decoded into Spark structs.

:func:`decoded_value` turns the BINARY Kafka value into the struct of the subject's latest
schema (NULL for a value that does not decode: a heartbeat's empty value, wrong framing, an id
that is not one of the subject's versions); :func:`value_struct` is that struct's type, known
before the query starts so the field options can be checked against it.

Avro goes through Spark's own ``from_avro`` (``spark-avro_2.13``), once per schema id of the
subject: ``CASE id WHEN 1 THEN from_avro(body, <version with id 1>, avroSchema=<latest>) …``.
Each branch decodes with the record's own writer schema and resolves it to the latest (the
reader), so every branch has the latest version's type; only the branch of a record's id runs.
Protobuf is decoded in the Python workers (:mod:`spark_consumer.protobuf_rows` says why).
"""

from __future__ import annotations

from pyspark.sql import Column, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from spark_consumer.framing import HEADER_SIZE, MAGIC
from spark_consumer.options import UsageError
from spark_consumer.value_formats import AvroValues, BinaryValues, ProtobufValues

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


def avro_value(value: Column, values: AvroValues) -> Column:
    """The decoded struct of the latest version, each record read with its own id's schema."""
    from pyspark.sql.avro.functions import from_avro

    options = {**_PERMISSIVE, "avroSchema": values.reader_schema}
    framed, sid, body = is_framed(value), schema_id(value), avro_body(value)
    decoded: Column | None = None
    for writer_id, writer in sorted(values.writer_schemas.items()):
        branch = from_avro(body, writer, options)
        matches = framed & (sid == F.lit(writer_id))
        decoded = F.when(matches, branch) if decoded is None else decoded.when(matches, branch)
    assert decoded is not None  # plan_values refuses a subject without versions
    return decoded


def protobuf_value(value: Column, values: ProtobufValues) -> Column:
    from spark_consumer.protobuf_rows import FramedDecoder

    decoder = FramedDecoder(
        values.descriptor_set, values.file_name, values.schema_ids, values.message_indexes
    )
    # Row at a time (not Arrow-batched): the decoder returns nested dicts, maps and datetimes.
    decode = F.udf(decoder, protobuf_struct(values), useArrow=False)
    return decode(value)


def protobuf_struct(values: ProtobufValues) -> StructType:
    from spark_consumer.protobuf_rows import file_descriptor, message_descriptor, struct_type

    message = message_descriptor(
        file_descriptor(values.descriptor_set, values.file_name), values.message_indexes
    )
    if message is None:
        raise UsageError(f"--value-format protobuf: subject {values.subject!r} defines no message")
    return struct_type(message)


def decoded_value(value: Column, values: BinaryValues) -> Column:
    """``value`` (BINARY) decoded as ``values`` says (NULL when it does not decode)."""
    if isinstance(values, AvroValues):
        return avro_value(value, values)
    return protobuf_value(value, values)


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
