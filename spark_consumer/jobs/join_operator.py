"""Drive timesync's JVM join operator from PySpark.

The interval join (``spark_consumer/join_rule.py``) runs inside Spark as a Java
``StatefulProcessor`` (``operators/join``, ``transformWithState`` in event-time mode). The call
crosses py4j once, at query build time: a DataFrame goes in, the joined DataFrame comes back; no
row ever passes through Python.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame

from spark_consumer.session import operator_class

OPERATOR_CLASS = "io.timesync.join.JoinOperator"
#: The operator's input columns (it finds them by name).
INPUT_COLUMNS = ("key", "event_time", "ts", "is_left", "source_partition", "source_offset", "left", "right")


def _operator(inputs: DataFrame) -> Any:
    return operator_class(inputs, OPERATOR_CLASS, "join")


def state_variable(inputs: DataFrame) -> str:
    """The state variable (layout version) the operator writes."""
    return str(_operator(inputs).stateVariable())


def run_operator(inputs: DataFrame, within_ms: int, how: str) -> DataFrame:
    """The operator's output over ``inputs`` (:data:`INPUT_COLUMNS`): key, ts, left_ts,
    right_ts, left, right."""
    jdf = _operator(inputs).apply(inputs.select(*INPUT_COLUMNS)._jdf, within_ms, how)
    return DataFrame(jdf, inputs.sparkSession)
