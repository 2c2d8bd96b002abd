"""exactly_once_v2 per task: what one task's transaction commits (each task's transactional.id is
its grouping's: tests/unit/service/test_grouping.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

import pytest
from aiokafka import TopicPartition as KafkaTopicPartition
from aiokafka.errors import ProducerFenced
from aiokafka.producer.transaction_manager import TransactionManager

from sidecar.core import TopicPartition
from sidecar.kafka.transactions import TaskTransaction
from sidecar.output.writer import OutputWriter


class TransactionalProducer:
    """Records the transactional calls, in order; its state lives in aiokafka's own manager."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self._txn_manager = TransactionManager("g-txn-1", 60_000)
        self._txn_manager.set_pid_and_epoch(7, 0)

    async def begin_transaction(self) -> None:
        self._txn_manager.begin_transaction()
        self.calls.append(("begin",))

    async def send_offsets_to_transaction(self, offsets: dict[Any, int], group_id: str) -> None:
        self.calls.append(("offsets", offsets, group_id))

    async def commit_transaction(self) -> None:
        self.calls.append(("commit",))


class Acked:
    """The task's side: which input offsets its acknowledged batches make safe."""

    def __init__(self, offsets: dict[TopicPartition, int]) -> None:
        self.offsets = offsets
        self.asked: list[list[int]] = []

    def __call__(self, batch_ids: Iterable[int]) -> dict[TopicPartition, int]:
        self.asked.append(list(batch_ids))
        return self.offsets


def transaction(producer: TransactionalProducer) -> TaskTransaction:
    writer = OutputWriter(producer)  # type: ignore[arg-type]
    return TaskTransaction(producer, writer, "g-txn-1", "g", clock=lambda: 5_000)  # type: ignore[arg-type]


async def test_a_commit_waits_for_its_writes_then_commits_the_tasks_offsets_in_the_transaction() -> None:
    producer = TransactionalProducer()
    txn = transaction(producer)
    await txn.begin()
    write: asyncio.Future[object] = asyncio.get_running_loop().create_future()
    txn.add(3, [write])
    txn.add(None, [])  # a heartbeat: no offsets of its own
    txn.add(4, [])
    acked = Acked({TopicPartition("a", 1): 120})

    committing = asyncio.create_task(txn.commit(acked))
    await asyncio.sleep(0.01)
    assert producer.calls == [("begin",)], "nothing is committed before the writes are acknowledged"
    assert txn.snapshot(6_000)["committing_ms"] == 1_000
    write.set_result(None)
    await committing

    assert acked.asked == [[3, 4]]
    assert producer.calls == [("begin",), ("offsets", {KafkaTopicPartition("a", 1): 120}, "g"), ("commit",)]
    assert not txn.open
    assert txn.snapshot(6_000) == {
        "transactional_id": "g-txn-1",
        "open_since": None,
        "batches": 0,
        "committing_since": None,
        "committing_ms": None,
        "committed": 1,
    }


async def test_a_commit_with_no_offsets_to_move_commits_the_writes_alone() -> None:
    producer = TransactionalProducer()
    txn = transaction(producer)
    await txn.begin()
    txn.add(None, [])
    await txn.commit(Acked({}))
    assert producer.calls == [("begin",), ("commit",)]


async def test_a_fenced_producer_is_reported_as_fenced_not_as_aiokafkas_follow_up_error() -> None:
    producer = TransactionalProducer()
    txn = transaction(producer)
    await txn.begin()
    # What aiokafka's sender does when the broker answers that a newer producer owns the id.
    producer._txn_manager.fatal_error(ProducerFenced())
    follow_up = RuntimeError("Can't send messages while not in transaction")
    assert isinstance(txn.cause(follow_up), ProducerFenced)
    with pytest.raises(ProducerFenced):
        await txn.commit(Acked({}))
    with pytest.raises(ProducerFenced):
        await txn.abort(1.0)


async def test_a_running_producer_reports_the_error_it_was_given() -> None:
    txn = transaction(TransactionalProducer())
    error = RuntimeError("x")
    assert txn.cause(error) is error
