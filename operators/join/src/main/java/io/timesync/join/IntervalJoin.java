package io.timesync.join;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.streaming.ExpiredTimerInfo;
import org.apache.spark.sql.streaming.OutputMode;
import org.apache.spark.sql.streaming.StatefulProcessor;
import org.apache.spark.sql.streaming.TTLConfig;
import org.apache.spark.sql.streaming.TimeMode;
import org.apache.spark.sql.streaming.TimerValues;
import org.apache.spark.sql.streaming.ValueState;
import scala.jdk.javaapi.CollectionConverters;

/**
 * The interval join of {@code spark_consumer/join_rule.py}, as a Spark {@code StatefulProcessor}
 * in event-time mode. That module is the specification (its docstring states the rule); this
 * class must give the same rows, batch for batch, which {@code tests/spark/test_join_operator.py}
 * checks.
 *
 * <p>Spark drops the late records before they reach it (the input carries the watermarked
 * {@code event_time}). Per key: the records of a batch pair with what the other side holds, are
 * held themselves, and then everything the batch's watermark has passed by the bound is evicted
 * (an outer side's unmatched records come out). Keys without records in a batch are reached by
 * their one event-time timer, armed at (earliest held time + bound + 1): Spark fires it once the
 * watermark is at or above it, that is once the watermark passes that record's time + bound.
 */
final class IntervalJoin extends StatefulProcessor<Row, Row, Row> {
  private static final long serialVersionUID = 1L;

  private final JoinSpec spec;
  private transient ValueState<Row> state;

  IntervalJoin(JoinSpec spec) {
    this.spec = spec;
  }

  @Override
  public void init(OutputMode outputMode, TimeMode timeMode) {
    state =
        getHandle()
            .getValueState(KeyBuffers.VARIABLE, Encoders.row(spec.stateSchema()), TTLConfig.NONE());
  }

  @Override
  public scala.collection.Iterator<Row> handleInputRows(
      Row grouping, scala.collection.Iterator<Row> rows, TimerValues timerValues) {
    String key = grouping.getString(0);
    Row saved = state.get();
    KeyBuffers b = saved == null ? new KeyBuffers(1, 1) : KeyBuffers.read(saved);
    List<Row> out = new ArrayList<>(2);
    boolean changed = false;
    long within = spec.withinMs;
    while (rows.hasNext()) {
      Row r = rows.next();
      boolean left = r.getBoolean(spec.isLeft);
      long ts = r.getLong(spec.ts);
      int partition = r.getInt(spec.partition);
      long offset = r.getLong(spec.offset);
      SideBuffer mine = b.side(left);
      if (mine.holds(ts, partition, offset)) {
        continue; // a replayed copy
      }
      Object value = r.get(left ? spec.leftValue : spec.rightValue);
      boolean matched = false;
      if (key != null) {
        SideBuffer other = b.side(!left);
        for (int i = other.lowerBound(ts - within); i < other.size(); i++) {
          Held o = other.get(i);
          if (o.ts > ts + within) {
            break;
          }
          out.add(left ? pair(key, ts, value, o.ts, o.value) : pair(key, o.ts, o.value, ts, value));
          o.matched = true;
          matched = true;
        }
      }
      if (key != null || spec.outer(left)) {
        mine.add(new Held(ts, partition, offset, matched, value));
        changed = true;
      }
      changed |= matched;
    }
    changed |= evict(key, b, timerValues.getCurrentWatermarkInMs(), out);
    save(saved != null, b, changed);
    return CollectionConverters.asScala(out.iterator());
  }

  @Override
  public scala.collection.Iterator<Row> handleExpiredTimer(
      Row grouping, TimerValues timerValues, ExpiredTimerInfo expiredTimerInfo) {
    Row saved = state.get();
    if (saved == null) {
      return CollectionConverters.asScala(Collections.<Row>emptyIterator());
    }
    KeyBuffers b = KeyBuffers.read(saved);
    b.timer = KeyBuffers.NO_TIMER; // Spark deletes the timer that fired
    List<Row> out = new ArrayList<>(2);
    evict(grouping.getString(0), b, timerValues.getCurrentWatermarkInMs(), out);
    save(true, b, true);
    return CollectionConverters.asScala(out.iterator());
  }

  /** Evicts what the watermark has passed by the bound, unmatched outer records to {@code out}. */
  private boolean evict(String key, KeyBuffers b, long watermark, List<Row> out) {
    int n =
        b.left.evict(
            watermark,
            spec.withinMs,
            spec.leftOuter ? h -> out.add(pair(key, h.ts, h.value, null, null)) : null);
    n +=
        b.right.evict(
            watermark,
            spec.withinMs,
            spec.rightOuter ? h -> out.add(pair(key, null, null, h.ts, h.value)) : null);
    return n > 0;
  }

  /**
   * Writes the key's state (cleared when it holds nothing) and keeps its one timer at the
   * earliest held time + bound + 1. The state row is written only when it changed.
   */
  private void save(boolean existed, KeyBuffers b, boolean changed) {
    long first = Math.min(b.left.first(), b.right.first());
    long want = first == Long.MAX_VALUE ? KeyBuffers.NO_TIMER : first + spec.withinMs + 1;
    if (want != b.timer) {
      if (b.timer != KeyBuffers.NO_TIMER) {
        getHandle().deleteTimer(b.timer);
      }
      if (want != KeyBuffers.NO_TIMER) {
        getHandle().registerTimer(want);
      }
      b.timer = want;
      changed = true;
    }
    if (b.isEmpty()) {
      if (existed) {
        state.clear();
      }
    } else if (changed) {
      state.update(b.toRow());
    }
  }

  private static Row pair(String key, Long leftTs, Object left, Long rightTs, Object right) {
    long ts = leftTs == null ? rightTs : rightTs == null ? leftTs : Math.max(leftTs, rightTs);
    return RowFactory.create(key, ts, leftTs, rightTs, left, right);
  }
}
