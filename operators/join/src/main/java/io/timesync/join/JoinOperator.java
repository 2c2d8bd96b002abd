package io.timesync.join;

import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.streaming.OutputMode;
import org.apache.spark.sql.streaming.TimeMode;
import org.apache.spark.sql.types.StructType;

/**
 * The entry point PySpark calls through py4j ({@code spark_consumer/jobs/join_operator.py}): a
 * Dataset in, the joined Dataset out.
 */
public final class JoinOperator {
  /** The state layout's version, which the Python side checks checkpoints against. */
  public static final String STATE_VARIABLE = KeyBuffers.VARIABLE;

  /** The grouping key: a row, so that a NULL key groups like any other key. */
  private static final StructType KEY = StructType.fromDDL("key STRING");

  private JoinOperator() {}

  /**
   * The interval join of the two sides in {@code inputs}, grouped by {@code key}.
   *
   * @param inputs columns {@code key} (STRING, NULL allowed), {@code event_time} (the watermarked
   *     column: Spark drops the late records on it), {@code ts} (BIGINT ms), {@code is_left},
   *     {@code source_partition} (INT), {@code source_offset} (BIGINT), {@code left} and
   *     {@code right} (the values, of any type; the other side's is NULL)
   * @param withinMs the bound, inclusive
   * @param how {@code inner}, {@code left} or {@code outer}
   * @return columns key, ts, left_ts, right_ts, left, right
   */
  public static Dataset<Row> apply(Dataset<Row> inputs, long withinMs, String how) {
    StructType schema = inputs.schema();
    JoinSpec spec = new JoinSpec(schema, withinMs, how);
    // groupBy(column).as(...) groups on the column itself: no function deserializes each row for
    // its key (groupByKey's MapFunction would).
    return inputs
        .groupBy(inputs.col("key"))
        .as(Encoders.row(KEY), Encoders.row(schema))
        .transformWithState(
            new IntervalJoin(spec),
            TimeMode.EventTime(),
            OutputMode.Append(),
            Encoders.row(spec.outputSchema()));
  }

  /** The state variable this build writes (for the refusal of other checkpoint layouts). */
  public static String stateVariable() {
    return STATE_VARIABLE;
  }
}
