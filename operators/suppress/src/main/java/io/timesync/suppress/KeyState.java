package io.timesync.suppress;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.types.StructType;
import scala.jdk.javaapi.CollectionConverters;

/**
 * What one key remembers, in memory, and its stored form: ONE state row per key (a read and a
 * write per key a batch touches, none for the others), whose layout is {@link #SCHEMA}.
 *
 * <p>The state variable's name carries the layout's version ({@link #VARIABLE}); a checkpoint
 * written by another layout has other variables and is refused before the query starts
 * ({@code spark_consumer/suppress_checkpoint.py}).
 */
final class KeyState {
  /** The state variable: one row per key. */
  static final String VARIABLE = "key_state_v2";

  static final StructType SCHEMA =
      StructType.fromDDL(
          "stream_time BIGINT, timer BIGINT, evicted BOOLEAN, "
              + "windows ARRAY<STRUCT<start: BIGINT, end: BIGINT, ts: BIGINT, "
              + "counts: ARRAY<BIGINT>, values: ARRAY<DOUBLE>>>, "
              + "seen ARRAY<STRUCT<topic: STRING, part: INT, off: BIGINT, ts: BIGINT>>");

  /** A record's replay identity: (source topic, partition, offset). */
  record Ident(String topic, int partition, long offset) {}

  /** An open window: its end, the largest timestamp in it, the accumulators. */
  static final class Window {
    final long end;
    long ts = Long.MIN_VALUE;
    final long[] counts;
    final Double[] values;

    Window(long end, int aggs) {
      this.end = end;
      this.counts = new long[aggs];
      this.values = new Double[aggs];
    }
  }

  long streamTime;
  long timer;
  boolean evicted;
  final TreeMap<Long, Window> windows = new TreeMap<>();
  final Map<Ident, Long> seen = new HashMap<>();

  KeyState(long streamTime) {
    this.streamTime = streamTime;
  }

  static KeyState read(Row row, int aggs) {
    KeyState s = new KeyState(row.getLong(0));
    s.timer = row.getLong(1);
    s.evicted = row.getBoolean(2);
    for (Row w : row.<Row>getList(3)) {
      Window window = new Window(w.getLong(1), aggs);
      window.ts = w.getLong(2);
      List<Long> counts = w.getList(3);
      List<Double> values = w.getList(4);
      for (int i = 0; i < aggs; i++) {
        window.counts[i] = counts.get(i);
        window.values[i] = values.get(i);
      }
      s.windows.put(w.getLong(0), window);
    }
    for (Row r : row.<Row>getList(4)) {
      s.seen.put(new Ident(r.getString(0), r.getInt(1), r.getLong(2)), r.getLong(3));
    }
    return s;
  }

  Row toRow() {
    List<Row> ws = new ArrayList<>(windows.size());
    for (Map.Entry<Long, Window> e : windows.entrySet()) {
      Window w = e.getValue();
      List<Long> counts = new ArrayList<>(w.counts.length);
      for (long c : w.counts) {
        counts.add(c);
      }
      ws.add(
          RowFactory.create(
              e.getKey(), w.end, w.ts, seq(counts), seq(java.util.Arrays.asList(w.values))));
    }
    List<Row> ids = new ArrayList<>(seen.size());
    for (Map.Entry<Ident, Long> e : seen.entrySet()) {
      Ident id = e.getKey();
      ids.add(RowFactory.create(id.topic(), id.partition(), id.offset(), e.getValue()));
    }
    return RowFactory.create(streamTime, timer, evicted, seq(ws), seq(ids));
  }

  private static <T> scala.collection.Seq<T> seq(List<T> list) {
    return CollectionConverters.asScala(list).toSeq();
  }
}
