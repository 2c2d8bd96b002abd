package io.timesync.suppress;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
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
 * The per-key suppression rule of {@code spark_consumer/suppress_rule.py}, as a Spark
 * {@code StatefulProcessor} in event-time mode. That module is the specification (its docstring
 * states the rule); this class must give the same finals and counts, record for record, which
 * {@code tests/spark/test_suppress_operator.py} checks.
 *
 * <p>Grouped by a one-field row holding the key (a NULL key is a key like any other, and Spark's
 * grouping key itself must not be null). Input rows (see {@link Columns}): key, ts, replay
 * identity, Kafka position, one DOUBLE per aggregation. Output rows: the layout of {@code output_schema} in {@code jobs/suppress.py}
 * ({@code kind} = {@code final}, {@code late} with a count, or {@code forgotten}).
 */
final class PerKeySuppress extends StatefulProcessor<Row, Row, Row> {
  private static final long serialVersionUID = 1L;
  static final String STREAM_TIME = "stream-time";
  static final String TTL = "ttl";

  /** Positions of the input columns. */
  static final class Columns {
    static final int TS = 1;
    static final int SOURCE_TOPIC = 2;
    static final int SOURCE_PARTITION = 3;
    static final int SOURCE_OFFSET = 4;
    static final int KAFKA_PARTITION = 5;
    static final int KAFKA_OFFSET = 6;
    static final int FIRST_VALUE = 7;

    private Columns() {}
  }

  private final SuppressSpec spec;
  private transient ValueState<Row> state;
  /** Keys that had records in this task (one partition of one micro-batch). */
  private transient Set<String> handled;

  PerKeySuppress(SuppressSpec spec) {
    this.spec = spec;
  }

  @Override
  public void init(OutputMode outputMode, TimeMode timeMode) {
    state = getHandle().getValueState(KeyState.VARIABLE, Encoders.row(KeyState.SCHEMA), TTLConfig.NONE());
    handled = new HashSet<>();
  }

  @Override
  public scala.collection.Iterator<Row> handleInputRows(
      Row grouping, scala.collection.Iterator<Row> rows, TimerValues timerValues) {
    String key = grouping.getString(0);
    List<Row> batch = inKafkaOrder(rows);
    long watermark = timerValues.getCurrentWatermarkInMs();
    KeyState saved = state.exists() ? KeyState.read(state.get(), spec.aggs.length) : null;
    KeyState s = saved != null ? saved : new KeyState(Long.MIN_VALUE);
    boolean known = saved != null;
    long late = 0;
    for (Row r : batch) {
      KeyState.Ident id =
          new KeyState.Ident(
              r.getString(Columns.SOURCE_TOPIC),
              r.getInt(Columns.SOURCE_PARTITION),
              r.getLong(Columns.SOURCE_OFFSET));
      long ts = r.getLong(Columns.TS);
      if (s.seen.putIfAbsent(id, ts) != null) {
        continue; // a replayed copy: already counted
      }
      s.streamTime = known ? Math.max(s.streamTime, ts) : ts;
      known = true;
      boolean accepted = false;
      for (long start : spec.starts(ts)) {
        if (start + spec.sizeMs + spec.graceMs <= s.streamTime) {
          continue; // this window has closed for the key
        }
        KeyState.Window w =
            s.windows.computeIfAbsent(start, k -> new KeyState.Window(k + spec.sizeMs, spec.aggs.length));
        fold(w, r, ts);
        accepted = true;
      }
      if (!accepted) {
        late++;
      }
    }

    List<Row> out = new ArrayList<>();
    var it = s.windows.entrySet().iterator();
    while (it.hasNext()) {
      Map.Entry<Long, KeyState.Window> e = it.next();
      if (e.getValue().end + spec.graceMs <= s.streamTime) {
        out.add(finalRow(key, e.getKey(), e.getValue(), STREAM_TIME));
        it.remove();
      }
    }
    if (late > 0) {
      out.add(countRow(key, "late", late));
    }
    long horizon = s.streamTime - spec.graceMs - spec.sizeMs;
    s.seen.values().removeIf(ts -> ts <= horizon);
    if (saved == null || saved.evicted) {
      // New (or forgotten, or back from eviction): a TTL timer replaces any other.
      if (saved != null) {
        getHandle().deleteTimer(saved.timer);
      }
      s.evicted = false;
      s.timer = arm(s.streamTime + spec.ttlMs, watermark);
    }
    // Otherwise the TTL timer stays at or before what the new stream time asks for; when it
    // fires early, handleExpiredTimer moves it on.
    state.update(s.toRow());
    handled.add(key);
    return CollectionConverters.asScala(out.iterator());
  }

  @Override
  public scala.collection.Iterator<Row> handleExpiredTimer(
      Row grouping, TimerValues timerValues, ExpiredTimerInfo expiredTimerInfo) {
    String key = grouping.getString(0);
    List<Row> out = new ArrayList<>();
    long watermark = timerValues.getCurrentWatermarkInMs();
    KeyState s = KeyState.read(state.get(), spec.aggs.length);
    if (s.evicted) { // the retention after eviction is over: forget the key
      state.clear();
      out.add(countRow(key, "forgotten", 0));
    } else if (handled.contains(key) || s.streamTime + spec.ttlMs > watermark) {
      // Armed for an earlier stream time, or the key is active: move it on (Spark deletes the
      // fired timer).
      s.timer = arm(s.streamTime + spec.ttlMs, watermark);
      state.update(s.toRow());
    } else {
      long closed = s.streamTime;
      for (Map.Entry<Long, KeyState.Window> e : s.windows.entrySet()) {
        out.add(finalRow(key, e.getKey(), e.getValue(), TTL));
        closed = Math.max(closed, e.getValue().end + spec.graceMs);
      }
      KeyState after = new KeyState(closed);
      after.evicted = true;
      after.timer = arm(closed + spec.ttlMs + spec.retentionMs, watermark);
      state.update(after.toRow());
    }
    return CollectionConverters.asScala(out.iterator());
  }

  /** A timer at or below the watermark would fire at once: arm it just above instead. */
  private long arm(long expiry, long watermark) {
    long at = Math.max(expiry, watermark + 1);
    getHandle().registerTimer(at);
    return at;
  }

  private void fold(KeyState.Window w, Row r, long ts) {
    w.ts = Math.max(w.ts, ts);
    for (int i = 0; i < spec.aggs.length; i++) {
      int col = Columns.FIRST_VALUE + i;
      boolean present = !r.isNullAt(col) && !Double.isNaN(r.getDouble(col));
      SuppressSpec.Agg agg = spec.aggs[i];
      if (agg == SuppressSpec.Agg.COUNT_ALL || (agg == SuppressSpec.Agg.COUNT_PRESENT && present)) {
        w.counts[i]++;
      } else if (present && !agg.isCount()) {
        double v = r.getDouble(col);
        Double current = w.values[i];
        w.values[i] =
            current == null
                ? v
                : switch (agg) {
                  case SUM -> current + v;
                  case MIN -> Math.min(current, v);
                  default -> Math.max(current, v);
                };
      }
    }
  }

  private Row finalRow(String key, long start, KeyState.Window w, String closedBy) {
    Object[] row = new Object[spec.aggs.length + 7];
    row[0] = key;
    row[1] = "final";
    row[2] = start;
    row[3] = w.end;
    for (int i = 0; i < spec.aggs.length; i++) {
      row[4 + i] = spec.aggs[i].isCount() ? (Object) w.counts[i] : w.values[i];
    }
    row[4 + spec.aggs.length] = w.ts;
    row[5 + spec.aggs.length] = closedBy;
    row[6 + spec.aggs.length] = null;
    return RowFactory.create(row);
  }

  private Row countRow(String key, String kind, long count) {
    Object[] row = new Object[spec.aggs.length + 7];
    row[0] = key;
    row[1] = kind;
    row[6 + spec.aggs.length] = count;
    return RowFactory.create(row);
  }

  /**
   * The key's rows in Kafka order (partition, offset) of the ordered topic: the order the sidecar
   * decided, which a replay repeats. Sorted only when they are not in that order already.
   */
  private static List<Row> inKafkaOrder(scala.collection.Iterator<Row> rows) {
    List<Row> batch = new ArrayList<>();
    boolean sorted = true;
    Row previous = null;
    while (rows.hasNext()) {
      Row r = rows.next();
      if (previous != null && KAFKA_ORDER.compare(previous, r) > 0) {
        sorted = false;
      }
      batch.add(r);
      previous = r;
    }
    if (!sorted) {
      batch.sort(KAFKA_ORDER); // stable
    }
    return batch;
  }

  private static final java.util.Comparator<Row> KAFKA_ORDER =
      java.util.Comparator.<Row>comparingInt(r -> r.getInt(Columns.KAFKA_PARTITION))
          .thenComparingLong(r -> r.getLong(Columns.KAFKA_OFFSET));
}
