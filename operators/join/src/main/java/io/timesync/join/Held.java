package io.timesync.join;

/**
 * One record a key holds on one side: its event time, its replay identity (source partition and
 * offset within its side's topic), whether it has paired yet, and its value (any Spark type).
 */
final class Held {
  final long ts;
  final int partition;
  final long offset;
  boolean matched;
  final Object value;

  Held(long ts, int partition, long offset, boolean matched, Object value) {
    this.ts = ts;
    this.partition = partition;
    this.offset = offset;
    this.matched = matched;
    this.value = value;
  }
}
