package io.timesync.suppress;

import org.apache.spark.api.java.function.MapFunction;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.streaming.OutputMode;
import org.apache.spark.sql.streaming.TimeMode;
import org.apache.spark.sql.types.StructType;

/**
 * The entry point PySpark calls through py4j ({@code spark_consumer/jobs/suppress_operator.py}):
 * a Dataset in, the operator's output Dataset out.
 */
public final class SuppressOperator {
  /** The state layout's version, which the Python side checks checkpoints against. */
  public static final String STATE_VARIABLE = KeyState.VARIABLE;

  /** The grouping key: a row, so that a NULL key groups like any other key. */
  private static final StructType KEY = StructType.fromDDL("key STRING");

  private SuppressOperator() {}

  /**
   * Per-key suppression of {@code inputs}, grouped by its first column (the key, STRING, NULL
   * included).
   *
   * @param inputs columns key, ts, source_topic, source_partition, source_offset, kafka_partition,
   *     kafka_offset, then one DOUBLE per aggregation, in that order
   * @param aggs the aggregations, comma-separated: {@code count}, {@code count:present},
   *     {@code sum}, {@code min}, {@code max}
   * @param outputDdl the output schema (kind, window, one column per aggregation, ts, closed_by,
   *     late)
   */
  public static Dataset<Row> apply(
      Dataset<Row> inputs,
      long sizeMs,
      long stepMs,
      long graceMs,
      long ttlMs,
      long retentionMs,
      String aggs,
      String outputDdl) {
    SuppressSpec spec =
        new SuppressSpec(sizeMs, stepMs, graceMs, ttlMs, retentionMs, SuppressSpec.parseAggs(aggs));
    StructType output = StructType.fromDDL(outputDdl);
    return inputs
        .groupByKey((MapFunction<Row, Row>) r -> RowFactory.create(r.getString(0)), Encoders.row(KEY))
        .transformWithState(
            new PerKeySuppress(spec), TimeMode.EventTime(), OutputMode.Append(), Encoders.row(output));
  }

  /** The state variable this build writes (for the refusal of other checkpoint layouts). */
  public static String stateVariable() {
    return STATE_VARIABLE;
  }
}
