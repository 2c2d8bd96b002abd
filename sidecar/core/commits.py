"""Which input offsets are safe to commit, given which output batches the broker acknowledged.

Committing offset ``o`` for a partition tells a restarted sidecar to resume at ``o``: every
record below ``o`` must therefore already be durable downstream (or deliberately dropped). A
record below ``o`` is one of:

* taken into an output batch that is acknowledged (main output, late topic or DLQ),
* skipped by policy (invalid timestamp with ``skip``, late record with ``drop``) — these travel
  with the batch that took them, or need nothing when nothing before them is pending.

So the safe offset of a partition is the smallest of: the first offset it has in any batch that
is not acknowledged yet, the offset of its buffered head (if any), the offset of a dead letter
not yet in any batch (found at push, it goes out with the next one), and the offset after the
last record pushed. Acknowledgements are tracked per batch; a batch counts once it and every earlier
batch are acknowledged, which keeps the rule simple when acks arrive out of order.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping

from sidecar.core.merge import PartitionState


class CommitTracker:
    __slots__ = ("_acked_ahead", "_acked_through", "_committed", "_pending")

    def __init__(self, partitions: int) -> None:
        #: Per partition: (batch id, first offset of that partition in the batch), batch order.
        self._pending: list[deque[tuple[int, int]]] = [deque() for _ in range(partitions)]
        self._acked_through = -1
        self._acked_ahead: set[int] = set()
        #: Last safe offset reported per partition (reports only ever move forward).
        self._committed: list[int | None] = [None] * partitions

    def taken(self, index: int, batch_id: int, first_offset: int) -> None:
        """Records of partition ``index`` from ``first_offset`` on went into batch ``batch_id``."""
        pending = self._pending[index]
        if pending and pending[-1][0] == batch_id:
            if first_offset < pending[-1][1]:
                pending[-1] = (batch_id, first_offset)
        else:
            pending.append((batch_id, first_offset))

    def acked(self, batch_ids: Iterable[int]) -> None:
        ahead = self._acked_ahead
        ahead.update(batch_ids)
        through = self._acked_through
        while through + 1 in ahead:
            through += 1
            ahead.discard(through)
        self._acked_through = through

    def _pending_unacked(self, pending: deque[tuple[int, int]]) -> bool:
        through = self._acked_through
        while pending and pending[0][0] <= through:
            pending.popleft()
        return bool(pending)

    def safe_offset(self, p: PartitionState, waiting: int | None = None) -> int | None:
        """Offset the partition may commit now, or ``None`` if nothing was ever pushed;
        ``waiting`` is its first dead letter not yet in a batch."""
        if p.next_offset is None:
            return None
        safe = p.next_offset
        if waiting is not None and waiting < safe:
            safe = waiting
        head = p.head_offset()
        if head is not None and head < safe:
            safe = head
        pending = self._pending[p.index]
        if self._pending_unacked(pending):
            first = min(offset for _, offset in pending)
            if first < safe:
                safe = first
        return safe

    def advanced(
        self, partitions: Iterable[PartitionState], waiting: Mapping[int, int] = {}
    ) -> dict[int, int]:
        """Partitions (by index) whose safe offset moved forward since the last report;
        ``waiting`` maps a partition to its first dead letter not yet in a batch."""
        out = {}
        committed = self._committed
        for p in partitions:
            safe = self.safe_offset(p, waiting.get(p.index))
            if safe is None:
                continue
            last = committed[p.index]
            if last is None:
                last = p.start_offset  # where consumption began counts as committed already
            if last is None or safe > last:
                committed[p.index] = safe
                out[p.index] = safe
        return out
