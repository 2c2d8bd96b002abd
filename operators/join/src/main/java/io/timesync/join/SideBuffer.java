package io.timesync.join;

import java.util.ArrayList;
import java.util.List;
import java.util.function.Consumer;

/**
 * The records a key holds on one side, in event-time order (ties in arrival order).
 *
 * <p>What the ordered topic buys: its records come in event-time order, so {@link #add} appends,
 * the partners of a new record are a range found by binary search (at the end, for a record in
 * order), and {@link #evict} removes a prefix. A record out of order costs one insertion.
 */
final class SideBuffer {
  private final ArrayList<Held> held;

  SideBuffer(int capacity) {
    held = new ArrayList<>(capacity);
  }

  int size() {
    return held.size();
  }

  Held get(int i) {
    return held.get(i);
  }

  List<Held> all() {
    return held;
  }

  /** The index of the first held record with {@code ts >= t} (size when none). */
  int lowerBound(long t) {
    int lo = 0;
    int hi = held.size();
    while (lo < hi) {
      int mid = (lo + hi) >>> 1;
      if (held.get(mid).ts < t) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    return lo;
  }

  /** Whether a record with this identity is held (a replay has the same time, so only ties are looked at). */
  boolean holds(long ts, int partition, long offset) {
    for (int i = lowerBound(ts); i < held.size() && held.get(i).ts == ts; i++) {
      Held h = held.get(i);
      if (h.partition == partition && h.offset == offset) {
        return true;
      }
    }
    return false;
  }

  /** Holds {@code h} after every record at or before its time. */
  void add(Held h) {
    int n = held.size();
    if (n == 0 || held.get(n - 1).ts <= h.ts) {
      held.add(h); // in order: the ordered topic's case
    } else {
      held.add(lowerBound(h.ts + 1), h);
    }
  }

  /**
   * Removes the records with {@code ts + within < watermark} (a prefix), handing each unmatched
   * one to {@code unmatched} when it is not null; returns how many left.
   */
  int evict(long watermark, long within, Consumer<Held> unmatched) {
    int n = 0;
    while (n < held.size() && held.get(n).ts + within < watermark) {
      Held h = held.get(n++);
      if (unmatched != null && !h.matched) {
        unmatched.accept(h);
      }
    }
    if (n > 0) {
      held.subList(0, n).clear();
    }
    return n;
  }

  /** The earliest held time, or {@link Long#MAX_VALUE} when empty. */
  long first() {
    return held.isEmpty() ? Long.MAX_VALUE : held.get(0).ts;
  }
}
