package io.timesync.join;

import java.io.Serializable;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;

/**
 * The rule's parameters (the bound, which sides are outer) and where the operator finds its
 * input columns. Mirrors {@code JoinRule} in {@code spark_consumer/join_rule.py}.
 */
final class JoinSpec implements Serializable {
  private static final long serialVersionUID = 1L;

  final long withinMs;
  final boolean leftOuter;
  final boolean rightOuter;
  // Input column positions (by name, so the Python side may add columns).
  final int key;
  final int ts;
  final int isLeft;
  final int partition;
  final int offset;
  final int leftValue;
  final int rightValue;
  final DataType leftType;
  final DataType rightType;

  JoinSpec(StructType input, long withinMs, String how) {
    if (withinMs < 0) {
      throw new IllegalArgumentException("join: within must be >= 0 ms, not " + withinMs);
    }
    this.withinMs = withinMs;
    switch (how) {
      case "inner" -> {
        leftOuter = false;
        rightOuter = false;
      }
      case "left" -> {
        leftOuter = true;
        rightOuter = false;
      }
      case "outer" -> {
        leftOuter = true;
        rightOuter = true;
      }
      default -> throw new IllegalArgumentException("join: how must be inner, left or outer, not " + how);
    }
    key = input.fieldIndex("key");
    ts = input.fieldIndex("ts");
    isLeft = input.fieldIndex("is_left");
    partition = input.fieldIndex("source_partition");
    offset = input.fieldIndex("source_offset");
    leftValue = input.fieldIndex("left");
    rightValue = input.fieldIndex("right");
    leftType = input.fields()[leftValue].dataType();
    rightType = input.fields()[rightValue].dataType();
  }

  /** Whether an unmatched record of this side comes out. */
  boolean outer(boolean left) {
    return left ? leftOuter : rightOuter;
  }

  StructType stateSchema() {
    return KeyBuffers.schema(leftType, rightType);
  }

  /** key, ts = max(left_ts, right_ts) (or the unmatched record's own), left_ts, right_ts, left, right. */
  StructType outputSchema() {
    return new StructType()
        .add("key", DataTypes.StringType, true)
        .add("ts", DataTypes.LongType, false)
        .add("left_ts", DataTypes.LongType, true)
        .add("right_ts", DataTypes.LongType, true)
        .add("left", leftType, true)
        .add("right", rightType, true);
  }
}
