"""Drive timesync's JVM suppress operator from PySpark.

The per-key rule (``spark_consumer/suppress_rule.py``) runs inside Spark as a Java
``StatefulProcessor`` (``operators/suppress``, ``transformWithState`` in event-time mode): a
per-key trip into a Python worker costs ten times the rule itself, so the rule runs in the JVM
and Python only builds the query. The call crosses py4j once, at query build time: a DataFrame
goes in, the operator's output DataFrame comes back; no row ever passes through Python.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pyspark.sql import DataFrame

from spark_consumer import session
from spark_consumer.options import AggSpec, WindowSpec

OPERATOR_CLASS = "io.timesync.suppress.SuppressOperator"
#: Input columns, in the order the operator reads them (then one DOUBLE per aggregation).
INPUT_COLUMNS = (
    "key",
    "ts",
    "source_topic",
    "source_partition",
    "source_offset",
    "kafka_partition",
    "kafka_offset",
)


def agg_codes(aggs: Sequence[AggSpec]) -> str:
    """The operator's names for the aggregations: a ``count`` of a field counts it when present."""
    return ",".join("count:present" if a.function == "count" and a.field else a.function for a in aggs)


def operator_class(inputs: DataFrame) -> Any:
    """The operator's Java class, through the session's py4j gateway.

    Raises :class:`SessionError` (one line: what is missing, how to build it) when the jar is not
    on Spark's classpath.
    """
    return session.operator_class(inputs, OPERATOR_CLASS, "suppress")


def state_variable(inputs: DataFrame) -> str:
    """The state variable (layout version) the operator writes."""
    return str(operator_class(inputs).stateVariable())


def run_operator(
    inputs: DataFrame,
    window: WindowSpec,
    grace_ms: int,
    ttl_ms: int,
    retention_ms: int,
    aggs: Sequence[AggSpec],
    output_ddl: str,
) -> DataFrame:
    """The operator's output over ``inputs`` (:data:`INPUT_COLUMNS`, then the aggregation
    inputs), one row per final, per key's late count and per forgotten key (``kind``)."""
    jdf = operator_class(inputs).apply(
        inputs._jdf,
        window.size_ms,
        window.step_ms,
        grace_ms,
        ttl_ms,
        retention_ms,
        agg_codes(aggs),
        output_ddl,
    )
    return DataFrame(jdf, inputs.sparkSession)
