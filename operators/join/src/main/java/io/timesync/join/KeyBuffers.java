package io.timesync.join;

import java.util.ArrayList;
import java.util.List;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import scala.jdk.javaapi.CollectionConverters;

/**
 * What one key remembers, in memory, and its stored form: ONE state row per key (a read and at
 * most a write per key a batch touches, none for the others), whose layout is {@link #schema}.
 *
 * <p>The state variable's name carries the layout's version ({@link #VARIABLE}); a checkpoint
 * written by another plan is refused before the query starts
 * ({@code spark_consumer/jobs/join_checkpoint.py}).
 */
final class KeyBuffers {
  /** The state variable: one row per key. */
  static final String VARIABLE = "join_buffers_v1";

  /** No timer registered. */
  static final long NO_TIMER = Long.MIN_VALUE;

  final SideBuffer left;
  final SideBuffer right;
  /** The key's one event-time timer, or {@link #NO_TIMER}. */
  long timer = NO_TIMER;

  KeyBuffers(int leftCapacity, int rightCapacity) {
    left = new SideBuffer(leftCapacity);
    right = new SideBuffer(rightCapacity);
  }

  SideBuffer side(boolean isLeft) {
    return isLeft ? left : right;
  }

  boolean isEmpty() {
    return left.size() == 0 && right.size() == 0;
  }

  /**
   * The state row's layout: each side's held records (time, identity, matched, value of that
   * side's type), then the timer.
   */
  static StructType schema(DataType leftValue, DataType rightValue) {
    return new StructType()
        .add("left", DataTypes.createArrayType(held(leftValue), false), false)
        .add("right", DataTypes.createArrayType(held(rightValue), false), false)
        .add("timer", DataTypes.LongType, false);
  }

  private static StructType held(DataType value) {
    return new StructType()
        .add("ts", DataTypes.LongType, false)
        .add("part", DataTypes.IntegerType, false)
        .add("off", DataTypes.LongType, false)
        .add("matched", DataTypes.BooleanType, false)
        .add("value", value, true);
  }

  static KeyBuffers read(Row row) {
    List<Row> l = row.getList(0);
    List<Row> r = row.getList(1);
    KeyBuffers b = new KeyBuffers(l.size() + 1, r.size() + 1);
    for (Row h : l) {
      b.left.all().add(heldFrom(h));
    }
    for (Row h : r) {
      b.right.all().add(heldFrom(h));
    }
    b.timer = row.getLong(2);
    return b;
  }

  private static Held heldFrom(Row h) {
    return new Held(h.getLong(0), h.getInt(1), h.getLong(2), h.getBoolean(3), h.get(4));
  }

  Row toRow() {
    return RowFactory.create(rows(left), rows(right), timer);
  }

  private static scala.collection.Seq<Row> rows(SideBuffer side) {
    List<Row> out = new ArrayList<>(side.size());
    for (Held h : side.all()) {
      out.add(RowFactory.create(h.ts, h.partition, h.offset, h.matched, h.value));
    }
    return CollectionConverters.asScala(out).toSeq();
  }
}
