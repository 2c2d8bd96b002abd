"""exactly_once_v2: one transactional producer per task, as in Kafka Streams' first EOS ("alpha").

aiokafka 0.14 cannot send the consumer's group metadata with the offsets (KIP-447), so the broker
cannot fence a stale writer by its group generation. Fencing must come from the
``transactional.id`` alone, and that only works if the id names what is being processed: the task.
Each task therefore writes through its own producer, with the ``transactional.id`` its task
grouping gives it (:meth:`TaskGrouping.transactional_id
<sidecar.service.grouping.TaskGrouping.transactional_id>`), and commits its outputs and its own
input offsets in its own transactions. When a task moves to another replica, the new owner's
producer starts with the same id; its InitProducerId bumps the id's epoch, so the old owner's
producer is *fenced* (every later write, offset commit or commit of it fails with
``ProducerFenced``) and the broker aborts its open transaction. InitProducerId also waits until an
earlier transaction of the id is complete, so offsets read after it are final: the new owner
starts exactly where the last committed transaction left off.

A :class:`TaskTransaction` holds one task's producer, its writer and its open transaction (the
batches written in it, their acknowledgement futures). It decides nothing: the runner says when
to begin, commit, abort and close, and what a failure means.

aiokafka reports a dead transactional producer poorly: once its sender stopped (fenced, or a
failure it does not retry), the next ``send_batch`` raises ``IllegalOperation("Can't send
messages while not in transaction")`` and the next ``begin_transaction`` or
``abort_transaction`` fails an internal assertion. :meth:`TaskTransaction.cause` and the checks
here recover the error that stopped it, so the runner can tell "fenced: the task moved" from
"the broker went away".
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from aiokafka import AIOKafkaProducer
from aiokafka import TopicPartition as KafkaTopicPartition
from aiokafka.errors import KafkaError

from sidecar.core import TopicPartition
from sidecar.kafka.clients import close_quietly, start_client
from sidecar.output.writer import OutputWriter, wall_ms


class TaskTransaction:
    """One task's transactional producer and its open transaction."""

    __slots__ = (
        "batch_ids",
        "clock",
        "committed",
        "committing_since",
        "futures",
        "group_id",
        "last_commit",
        "last_offsets",
        "open",
        "opened_at",
        "opened_wall",
        "producer",
        "transactional_id",
        "writer",
    )

    def __init__(
        self,
        producer: AIOKafkaProducer,
        writer: OutputWriter,
        transactional_id: str,
        group_id: str,
        clock: Callable[[], int] = wall_ms,
    ) -> None:
        self.producer = producer
        self.writer = writer
        self.transactional_id = transactional_id
        self.group_id = group_id
        self.clock = clock
        self.open = False
        self.opened_at = 0.0  # monotonic, for the commit interval
        self.opened_wall: int | None = None  # wall clock, for /status
        self.committing_since: int | None = None
        self.batch_ids: list[int] = []
        self.futures: list[asyncio.Future[Any]] = []
        self.committed = 0
        #: Input offsets committed so far, and when (monotonic) the last commit was.
        self.last_offsets: dict[TopicPartition, int] = {}
        self.last_commit = time.monotonic()

    async def start(self) -> None:
        """Connect and get the producer id: fences the id's previous owner, waits out its last
        transaction (the broker aborts it if it was still open)."""
        await start_client(self.producer.start())

    def _stopped(self) -> BaseException | None:
        """The error that stopped the producer's sender, or ``None`` while it runs."""
        manager = getattr(self.producer, "_txn_manager", None)  # aiokafka 0.14 internals
        if manager is None or not manager.is_fatal_error():
            return None
        waiter: asyncio.Future[None] = manager.wait_for_transaction_end()
        if waiter.done() and not waiter.cancelled():
            error = waiter.exception()
            if error is not None:
                return error
        unknown: BaseException = KafkaError(f"the producer of {self.transactional_id} has stopped")
        return unknown

    def cause(self, error: BaseException) -> BaseException:
        """The error that stopped the producer, if it stopped; else ``error`` itself."""
        return self._stopped() or error

    def _check(self) -> None:
        """Raise the error that stopped the producer, before a call that would hide it."""
        stopped = self._stopped()
        if stopped is not None:
            raise stopped

    async def begin(self) -> None:
        if not self.open:
            self._check()
            await self.producer.begin_transaction()
            self.open = True
            self.opened_at = time.monotonic()
            self.opened_wall = self.clock()

    def add(self, batch_id: int | None, futures: Iterable[asyncio.Future[Any]]) -> None:
        """Writes of the open transaction: an emitted batch (its id, to commit its offsets) or a
        heartbeat (``None``), and the futures of its producer batches."""
        if batch_id is not None:
            self.batch_ids.append(batch_id)
        self.futures.extend(futures)

    def due(self, now_monotonic: float, interval_s: float) -> bool:
        return self.open and now_monotonic - self.opened_at >= interval_s

    async def commit(
        self,
        acked: Callable[[list[int]], Mapping[TopicPartition, int]],
        metadata: str | None = None,
        again: Mapping[TopicPartition, int] | None = None,
    ) -> bool:
        """Wait for every write of the transaction, then commit it with the input offsets that
        ``acked`` (the task's) gives for its batches — and ``again``, offsets committed before,
        committed once more to renew their ``metadata`` (see :mod:`sidecar.service.claim`).
        Returns whether new input offsets were committed."""
        self.committing_since = self.clock()
        try:
            self._check()
            await asyncio.gather(*self.futures)
            new = acked(self.batch_ids)
            offsets = {**(again or {}), **new}
            if offsets:
                await self.producer.send_offsets_to_transaction(
                    {KafkaTopicPartition(*tp): (o, metadata) if metadata else o for tp, o in offsets.items()},
                    self.group_id,
                )
            await self.producer.commit_transaction()
        finally:
            self.committing_since = None
        self.committed += 1
        self.last_offsets.update(offsets)
        self.last_commit = time.monotonic()
        self.forget()
        return bool(new)

    async def abort(self, timeout_s: float) -> None:
        """Abort the open transaction, bounded in time; raises what the producer raised."""
        try:
            self._check()
            await asyncio.wait_for(self.producer.abort_transaction(), timeout=timeout_s)
        finally:
            self.forget()

    async def close(
        self, timeout_s: float, on_error: Callable[[BaseException], object] = lambda _: None
    ) -> None:
        """Stop the producer (an open transaction is left to the next owner or the broker's
        timeout to abort); never raises: what stopping raised goes to ``on_error``."""
        await close_quietly(self.producer.stop(), on_error, timeout_s)

    def forget(self) -> None:
        """Drop the open transaction's state without ending it (the next owner of the id aborts it)."""
        self.open = False
        self.opened_wall = None
        self.batch_ids.clear()
        self.futures.clear()

    def snapshot(self, now_ms: int) -> dict[str, Any]:
        return {
            "transactional_id": self.transactional_id,
            "open_since": self.opened_wall,
            "batches": len(self.batch_ids),
            "committing_since": self.committing_since,
            "committing_ms": None if self.committing_since is None else now_ms - self.committing_since,
            "committed": self.committed,
        }
