package io.timesync.suppress;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.List;

/**
 * The rule's parameters: window size and step, grace, TTL and closed retention (all event time,
 * ms), and one aggregation per output column. Mirrors {@code SuppressRule} in
 * {@code spark_consumer/suppress_rule.py}.
 */
final class SuppressSpec implements Serializable {
  private static final long serialVersionUID = 1L;

  /** What an aggregation does with its input (a DOUBLE column, NULL when absent). */
  enum Agg {
    /** {@code count} without a field: every record. */
    COUNT_ALL,
    /** {@code count:FIELD}: records whose field is present (not NULL, not NaN). */
    COUNT_PRESENT,
    SUM,
    MIN,
    MAX;

    boolean isCount() {
      return this == COUNT_ALL || this == COUNT_PRESENT;
    }
  }

  final long sizeMs;
  final long stepMs;
  final long graceMs;
  final long ttlMs;
  final long retentionMs;
  final Agg[] aggs;

  SuppressSpec(long sizeMs, long stepMs, long graceMs, long ttlMs, long retentionMs, Agg[] aggs) {
    if (sizeMs <= 0 || stepMs <= 0 || stepMs > sizeMs || graceMs < 0 || retentionMs < 0) {
      throw new IllegalArgumentException(
          "suppress: bad window (size " + sizeMs + ", step " + stepMs + "), grace " + graceMs
              + " or retention " + retentionMs);
    }
    this.sizeMs = sizeMs;
    this.stepMs = stepMs;
    this.graceMs = graceMs;
    this.ttlMs = ttlMs;
    this.retentionMs = retentionMs;
    this.aggs = aggs.clone();
  }

  /** {@code "count,count:present,sum,min,max"} → the aggregations, in column order. */
  static Agg[] parseAggs(String text) {
    List<Agg> out = new ArrayList<>();
    for (String name : text.split(",")) {
      switch (name) {
        case "count" -> out.add(Agg.COUNT_ALL);
        case "count:present" -> out.add(Agg.COUNT_PRESENT);
        case "sum" -> out.add(Agg.SUM);
        case "min" -> out.add(Agg.MIN);
        case "max" -> out.add(Agg.MAX);
        default -> throw new IllegalArgumentException("suppress: unknown aggregation " + name);
      }
    }
    return out.toArray(new Agg[0]);
  }

  /**
   * Starts of the windows holding {@code ts}, earliest first, aligned to the epoch as Spark's
   * {@code window()} aligns them.
   */
  long[] starts(long ts) {
    long last = ts - Math.floorMod(ts, stepMs);
    long first = last - ((sizeMs - 1) / stepMs) * stepMs;
    int n = 0;
    long[] out = new long[(int) ((last - first) / stepMs) + 1];
    for (long s = first; s <= last; s += stepMs) {
      if (s <= ts && ts < s + sizeMs) {
        out[n++] = s;
      }
    }
    return n == out.length ? out : java.util.Arrays.copyOf(out, n);
  }
}
