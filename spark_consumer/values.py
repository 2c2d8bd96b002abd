"""The value of ordered-topic records as ``data``, and the key jobs group and join on.

A JSON value is text until :func:`with_data` parses it with ``--value-schema``; an Avro or
Protobuf value arrives decoded already (the source decodes it, :mod:`spark_consumer.source`),
and ``data`` is that struct. Either way the field options read ``data.<path>``.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

DATA = "data"  # the parsed value: a struct, or the raw JSON string when no schema is given


def with_data(records: DataFrame, schema: StructType | None) -> DataFrame:
    """Add ``data``: the value parsed with ``schema`` (malformed JSON gives NULL fields).

    A value the source decoded already (a struct: Avro, Protobuf) is taken as it is; its
    ``schema`` is the decoded type.
    """
    if isinstance(records.schema["value"].dataType, StructType):
        return records.withColumn(DATA, F.col("value"))
    parsed = F.from_json("value", schema) if schema is not None else F.col("value")
    return records.withColumn(DATA, parsed)


def key_column(key_field: str | None) -> Column:
    """The grouping/join key as a string: a field of the value, or the Kafka record key."""
    if key_field is None:
        return F.col("key")
    return F.col(f"{DATA}.{key_field}").cast("string")


def data_field(path: str) -> Column:
    return F.col(f"{DATA}.{path}")
