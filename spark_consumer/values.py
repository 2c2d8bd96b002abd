"""The value of ordered-topic records as ``data``, what did not decode, and the key jobs group and join on.

A JSON value is text until :func:`with_data` parses it with ``--value-schema``; an Avro or
Protobuf value arrives decoded already, with its verdict (:mod:`spark_consumer.value_decoding`).
Either way the field options read ``data.<path>``.

**A value that does not decode** — JSON that is not an object of the schema's types (a field of
another type included), a value larger than ``spark.timesync.values.maxBytes``, or an Avro or
Protobuf value the decoder refuses — keeps its row with a NULL ``data``: whole, never half a
value. It is counted, per query, in the observed metric :data:`UNDECODABLE` (one observation per
:func:`with_data`, named ``timesync_values_<n>``; :func:`spark_consumer.metrics.drops_in` sums
them). A NULL value (a tombstone) is no value to decode: NULL ``data``, not counted. Without a
schema, a JSON value stays text and nothing is decoded.
"""

from __future__ import annotations

import itertools

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType

DATA = "data"  # the parsed value: a struct, or the raw JSON string when no schema is given
#: Observed-metric names start with this; the metric in each is :data:`UNDECODABLE`.
OBSERVATION_PREFIX = "timesync_values_"
UNDECODABLE = "undecodable"
_observations = itertools.count()
_FLAG = "__timesync_undecodable"
_PARSED = "__timesync_parsed"


def with_data(records: DataFrame, schema: StructType | None) -> DataFrame:
    """Add ``data``: the value parsed with ``schema``, NULL when it does not decode (counted).

    A value the source decoded already (a struct: Avro, Protobuf) is taken as it is, without its
    verdict field; its ``schema`` is the decoded type.
    """
    from spark_consumer.value_decoding import DECODED

    value_type = records.schema["value"].dataType
    if isinstance(value_type, StructType):
        if DECODED not in value_type.fieldNames():
            return records.withColumn(DATA, F.col("value"))
        verdict = F.col("value")[DECODED]
        flagged = records.withColumns(
            {
                DATA: F.when(verdict, F.col("value").dropFields(DECODED)),
                _FLAG: F.col("value").isNotNull() & verdict.isNull(),
            }
        )
    elif schema is None:
        return records.withColumn(DATA, F.col("value"))
    else:
        flagged = _parsed_json(records, schema)
    name = f"{OBSERVATION_PREFIX}{next(_observations)}"
    return flagged.observe(name, F.count_if(F.col(_FLAG)).alias(UNDECODABLE)).drop(_FLAG)


def _parsed_json(records: DataFrame, schema: StructType) -> DataFrame:
    """``from_json`` with a corrupt-record field, in a projection of its own so that the flag
    and ``data`` read its result rather than parsing twice."""
    from spark_consumer.value_decoding import session_limits

    corrupt = "_corrupt_record"
    while corrupt in schema.fieldNames():
        corrupt = f"_{corrupt}"
    limits = session_limits(records.sparkSession)
    text = F.when(F.octet_length("value") <= F.lit(limits.max_bytes), F.col("value"))
    with_corrupt = StructType([*schema.fields, StructField(corrupt, StringType(), nullable=True)])
    parsed = records.withColumn(
        _PARSED, F.from_json(text, with_corrupt, {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": corrupt})
    )
    result = F.col(_PARSED)
    undecodable = F.col("value").isNotNull() & (result.isNull() | result[corrupt].isNotNull())
    return parsed.withColumns(
        {DATA: F.when(~undecodable, result.dropFields(corrupt)), _FLAG: undecodable}
    ).drop(_PARSED)


def key_column(key_field: str | None) -> Column:
    """The grouping/join key as a string: a field of the value, or the Kafka record key."""
    if key_field is None:
        return F.col("key")
    return F.col(f"{DATA}.{key_field}").cast("string")


def data_field(path: str) -> Column:
    return F.col(f"{DATA}.{path}")
