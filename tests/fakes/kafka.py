"""An in-memory Kafka cluster with aiokafka's consumer, producer and admin surface, for testing
the pipeline without a broker.

It models what the pipeline depends on, and nothing more:

* **Logs** per topic-partition, offsets from 0. The high watermark is the log's end; the last
  stable offset (what a ``read_committed`` consumer may read up to) stops at the first record of
  a transaction still open. Records of aborted transactions stay in the log and are skipped by
  ``read_committed`` readers, as Kafka's are.
* **Consumers** (``assign`` or ``subscribe`` with a rebalance listener): ``getmany`` returns
  records from each assigned, unpaused partition's position, at most :attr:`FakeCluster.fetch_cap`
  per partition per call (random splits when ``fetch_cap`` is a range), and updates each
  partition's fetch facts (``highwater``, ``last_stable_offset``, ``last_poll_timestamp``) as a
  fetch response would. A group rebalance (members joining or leaving) runs the listeners'
  callbacks inside the members' next ``getmany``, revoking everything and assigning whole tasks
  with the sidecar's own task dealing.
* **Producers**: ``send_batch`` decodes the batch (native or aiokafka's builder) and queues it;
  a delivery loop appends queued batches to their logs and resolves their futures in FIFO or
  random order (per partition, a producer's batches always land in order — idempotence), or
  fails the next ones with errors the test injects. Transactional producers get an epoch per
  ``transactional.id``: a newer ``start`` fences the older producer (``ProducerFenced``) and aborts
  its open transaction; ``commit_transaction`` waits for the transaction's batches, then makes
  them and its offsets visible at once.
* **Commits** are checked as they happen: committing offset ``o`` of an input partition while
  some record below ``o`` has no acknowledged output is recorded in :attr:`FakeCluster.violations`
  (the at-least-once promise). Outputs are matched to inputs by the ``timesync.source.*``
  headers (and the DLQ's ``__connect.errors.*``).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from aiokafka.errors import IllegalStateError, KafkaConnectionError, ProducerFenced
from aiokafka.record.default_records import DefaultRecordBatch
from aiokafka.structs import ConsumerRecord, OffsetAndMetadata, TopicPartition

from sidecar.config import SidecarConfig
from sidecar.core.stamping import (
    ERRORS_LAST_OFFSET,
    ERRORS_OFFSET,
    ERRORS_PARTITION,
    ERRORS_TOPIC,
    SOURCE_OFFSET,
    SOURCE_PARTITION,
    SOURCE_TOPIC,
)
from sidecar.kafka.assignor import deal_tasks
from sidecar.kafka.unreadable import UnreadableRecords

OPEN, COMMITTED, ABORTED = "open", "committed", "aborted"


@dataclass
class Stored:
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes]]
    timestamp_type: int = 0
    #: Transactional state: ``None`` (not transactional), open, committed or aborted.
    txn: str | None = None
    producer: FakeProducer | None = None

    def source(self) -> tuple[str, int, int] | None:
        """The input record this output came from (``None`` for heartbeats)."""
        h = dict(self.headers)
        if SOURCE_TOPIC in h:
            return (h[SOURCE_TOPIC].decode(), int(h[SOURCE_PARTITION]), int(h[SOURCE_OFFSET]))
        if ERRORS_TOPIC in h:
            return (h[ERRORS_TOPIC].decode(), int(h[ERRORS_PARTITION]), int(h[ERRORS_OFFSET]))
        return None


@dataclass
class Log:
    records: list[Stored] = field(default_factory=list)

    @property
    def high_watermark(self) -> int:
        return len(self.records)

    @property
    def last_stable_offset(self) -> int:
        for r in self.records:
            if r.txn == OPEN:
                return r.offset
        return len(self.records)


@dataclass
class Member:
    consumer: FakeConsumer
    topics: list[str]
    listener: Any
    assigned: set[TopicPartition] = field(default_factory=set)
    #: A rebalance this member has not gone through yet (run in its next getmany).
    pending: set[TopicPartition] | None = None


class FakeCluster:
    def __init__(self, seed: int = 0) -> None:
        self.rng = random.Random(seed)
        self.logs: dict[TopicPartition, Log] = {}
        self.partitions: dict[str, int] = {}
        self.configs: dict[str, dict[str, str]] = {}
        #: How many next topic-config descriptions answer UNKNOWN_TOPIC_OR_PARTITION (metadata
        #: not yet on the answering broker).
        self.configs_unknown_for = 0
        #: Seconds each next consumer commit takes to land (then commits are instant again).
        self.commit_delays: list[float] = []
        self.offsets: dict[str, dict[TopicPartition, int]] = {}
        self.metadata: dict[str, dict[TopicPartition, str]] = {}
        self.members: dict[str, list[Member]] = {}
        self.epochs: dict[str, int] = {}
        self.producers: dict[str, FakeProducer] = {}
        #: Records per partition a fetch returns: a number, or (low, high) for random splits.
        self.fetch_cap: int | tuple[int, int] = 1000
        #: "fifo" or "random": the order in which queued batches are acknowledged.
        self.ack_order = "fifo"
        #: Errors the next deliveries fail with (each fails one batch, which is then lost).
        self.failures: list[BaseException] = []
        #: While False, nothing connects and nothing is delivered (a broker outage).
        self.up = True
        #: Offsets no consumer can read, by partition, as (first, next): the hooked reader's
        #: verdict ends a fetch that reaches them (``sidecar.kafka.unreadable``).
        self.unreadable: dict[TopicPartition, list[tuple[int, int]]] = {}
        #: What the next ``getmany`` raises instead of returning (a reader's failure, an ACL).
        self.fetch_errors: list[BaseException] = []
        self.violations: list[str] = []
        self.data = asyncio.Event()
        self._queue: list[_Queued] = []
        self._delivery: asyncio.Task[None] | None = None

    # -- topics and data ---------------------------------------------------------------------------

    def create_topic(self, name: str, partitions: int = 1, configs: Mapping[str, str] | None = None) -> None:
        if name in self.partitions:
            return
        self.partitions[name] = partitions
        self.configs[name] = dict(configs or {})
        for p in range(partitions):
            self.logs[TopicPartition(name, p)] = Log()

    def produce(
        self,
        topic: str,
        partition: int,
        timestamps: Iterable[int],
        key: Callable[[int], bytes | None] = lambda i: None,
    ) -> None:
        """Input records with these timestamps (values ``b"<topic>-<partition>-<offset>"``)."""
        log = self.logs[TopicPartition(topic, partition)]
        for ts in timestamps:
            offset = len(log.records)
            log.records.append(Stored(offset, ts, key(offset), f"{topic}-{partition}-{offset}".encode(), []))
        self.data.set()

    def read(self, topic: str, committed: bool = False) -> list[Stored]:
        """Every record of a topic (all partitions, each in offset order); only what a
        ``read_committed`` reader sees with ``committed``."""
        out = []
        for p in range(self.partitions.get(topic, 0)):
            for r in self.logs[TopicPartition(topic, p)].records:
                if committed and r.txn in (OPEN, ABORTED):
                    continue
                out.append(r)
        return out

    def logs_of(self, topic: str, partition: int) -> list[Stored]:
        return list(self.logs[TopicPartition(topic, partition)].records)

    def committed(self, group: str) -> dict[TopicPartition, int]:
        return dict(self.offsets.get(group, {}))

    # -- commits and their check --------------------------------------------------------------------

    def commit(self, group: str, offsets: Mapping[TopicPartition, Any]) -> None:
        """Offsets as ints or (offset, metadata) pairs, as aiokafka takes them."""
        durable = self._durable_sources()
        for given, value in offsets.items():
            offset, metadata = value if isinstance(value, tuple) else (value, "")
            tp = TopicPartition(given.topic, given.partition)
            self.metadata.setdefault(group, {})[tp] = metadata
            missing = [o for o in range(offset) if (tp.topic, tp.partition, o) not in durable]
            if missing:
                self.violations.append(
                    f"{group} committed {tp.topic}[{tp.partition}]@{offset} while offsets {missing[:5]} "
                    "have no acknowledged output"
                )
            self.offsets.setdefault(group, {})[tp] = offset

    def _durable_sources(self) -> set[tuple[str, int, int]]:
        out = set()
        for log in self.logs.values():
            for r in log.records:
                if r.txn in (OPEN, ABORTED):
                    continue
                source = r.source()
                if source is not None:
                    out.add(source)
                    last = dict(r.headers).get(ERRORS_LAST_OFFSET)  # the trace of unreadable offsets
                    if last is not None:
                        out.update((source[0], source[1], o) for o in range(source[2], int(last) + 1))
        return out

    # -- groups ----------------------------------------------------------------------------------------

    def join(self, group: str, member: Member) -> None:
        self.members.setdefault(group, []).append(member)
        self.rebalance(group)

    def leave(self, group: str, consumer: FakeConsumer) -> None:
        members = self.members.get(group, [])
        self.members[group] = [m for m in members if m.consumer is not consumer]
        self.rebalance(group)

    def rebalance(self, group: str) -> None:
        """Deal the tasks of the group's topics over its members; each goes through it at its next
        getmany (eager protocol: everything revoked, then the new assignment)."""
        members = self.members.get(group, [])
        if not members:
            return
        topics = sorted({t for m in members for t in m.topics})
        tasks = {p for t in topics for p in range(self.partitions.get(t, 0))}
        ids = {str(i): m for i, m in enumerate(members)}
        for member_id, dealt in deal_tasks(tasks, ids).items():
            member = ids[member_id]
            member.pending = {
                TopicPartition(t, p) for t in member.topics for p in dealt if p < self.partitions[t]
            }

    # -- transactions ----------------------------------------------------------------------------------

    def init_producer(self, producer: FakeProducer) -> int:
        txn_id = producer.transactional_id
        assert txn_id is not None
        epoch = self.epochs.get(txn_id, -1) + 1
        self.epochs[txn_id] = epoch
        previous = self.producers.get(txn_id)
        if previous is not None and previous is not producer:
            previous.fence()
        self.producers[txn_id] = producer
        return epoch

    # -- delivery ----------------------------------------------------------------------------------------

    def enqueue(self, queued: _Queued) -> None:
        self._queue.append(queued)
        if self._delivery is None or self._delivery.done():
            self._delivery = asyncio.get_running_loop().create_task(self._deliver())

    async def _deliver(self) -> None:
        while self._queue:
            await asyncio.sleep(0)
            if not self.up:
                await asyncio.sleep(0.005)
                continue
            # Per (producer, partition) FIFO; across them, the configured order.
            heads: dict[tuple[int, TopicPartition], _Queued] = {}
            for q in self._queue:
                heads.setdefault((id(q.producer), q.tp), q)
            choices = list(heads.values())
            item = choices[0] if self.ack_order == "fifo" else self.rng.choice(choices)
            self._queue.remove(item)
            if item.future.done():
                continue
            if item.producer.fenced:
                item.future.set_exception(ProducerFenced())
                continue
            broken = item.producer.broken.get(item.tp)
            if broken is None and self.failures:
                broken = item.producer.broken[item.tp] = self.failures.pop(0)
            if broken is not None:
                # An idempotent producer keeps order: once a batch of a partition failed, the
                # broker refuses the later ones (out of sequence) — they fail too.
                item.future.set_exception(broken)
                continue
            log = self.logs[item.tp]
            state = OPEN if item.producer.in_transaction else None
            for r in item.records:
                r.offset = len(log.records)
                r.txn = state
                r.producer = item.producer
                log.records.append(r)
                if state == OPEN:
                    item.producer.written.append(r)
            self.data.set()
            item.future.set_result(SimpleNamespace(topic=item.tp.topic, partition=item.tp.partition))

    def pending_for(self, producer: FakeProducer) -> list[asyncio.Future[Any]]:
        return [q.future for q in self._queue if q.producer is producer]


@dataclass
class _Queued:
    producer: FakeProducer
    tp: TopicPartition
    records: list[Stored]
    future: asyncio.Future[Any]


def _decode(batch: Any) -> list[Stored]:
    raw = bytes(batch._build())
    return [
        Stored(0, r.timestamp, r.key, r.value, list(r.headers)) for r in DefaultRecordBatch(bytearray(raw))
    ]


class FakeConsumer:
    def __init__(
        self, cluster: FakeCluster, group_id: str, isolation_level: str, auto_offset_reset: str
    ) -> None:
        self.cluster = cluster
        self.group_id = group_id
        self.read_committed = isolation_level == "read_committed"
        self.reset = auto_offset_reset
        self._assigned: set[TopicPartition] = set()
        self._positions: dict[TopicPartition, int] = {}
        self._paused: set[TopicPartition] = set()
        self._facts: dict[TopicPartition, tuple[int, int, int]] = {}  # hw, lso, response time
        self._member: Member | None = None
        self.closed = False
        self.metadata_requests = 0

    async def start(self) -> None:
        if not self.cluster.up:
            raise KafkaConnectionError("Unable to bootstrap from fake cluster")

    async def stop(self) -> None:
        if self._member is not None:
            self.cluster.leave(self.group_id, self)
            self._member = None
        self.closed = True

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        self._assigned = {TopicPartition(tp.topic, tp.partition) for tp in partitions}

    def subscribe(self, topics: Sequence[str], listener: Any) -> None:
        self._member = Member(self, list(topics), listener)
        self.cluster.join(self.group_id, self._member)

    def assignment(self) -> set[TopicPartition]:
        return set(self._assigned)

    async def topics(self) -> set[str]:
        """A metadata round trip."""
        if not self.cluster.up:
            raise KafkaConnectionError("fake cluster is down")
        self.metadata_requests += 1
        return set(self.cluster.partitions)

    def _position(self, tp: TopicPartition) -> int:
        if tp not in self._positions:
            committed = self.cluster.offsets.get(self.group_id, {}).get(tp)
            if committed is not None:
                self._positions[tp] = committed
            else:
                log = self.cluster.logs[tp]
                self._positions[tp] = 0 if self.reset == "earliest" else log.high_watermark
        return self._positions[tp]

    async def _rebalance(self) -> None:
        member = self._member
        if member is None or member.pending is None:
            return
        new, member.pending = member.pending, None
        if member.assigned:
            await member.listener.on_partitions_revoked(set(member.assigned))
        for tp in member.assigned:
            self._positions.pop(tp, None)
            self._facts.pop(tp, None)
        member.assigned = set(new)
        self._assigned = set(new)
        self._paused &= self._assigned
        await member.listener.on_partitions_assigned(set(new))

    async def getmany(
        self, timeout_ms: int = 0, max_records: int | None = None
    ) -> dict[TopicPartition, list[Any]]:
        if self.cluster.fetch_errors:
            raise self.cluster.fetch_errors.pop(0)
        await self._rebalance()
        out = self._take(max_records)
        if not out and timeout_ms > 0:
            self.cluster.data.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.cluster.data.wait(), timeout=min(timeout_ms, 20) / 1000)
            await self._rebalance()
            out = self._take(max_records)
        return out

    def _take(self, max_records: int | None) -> dict[TopicPartition, list[Any]]:
        cluster = self.cluster
        if not cluster.up:
            return {}
        now = int(time.time() * 1000)
        budget = max_records if max_records is not None else 10**9
        out: dict[TopicPartition, list[Any]] = {}
        for tp in sorted(self._assigned - self._paused):
            log = cluster.logs[tp]
            position = self._position(tp)
            end = log.last_stable_offset if self.read_committed else log.high_watermark
            cap = cluster.fetch_cap
            limit = cap if isinstance(cap, int) else cluster.rng.randint(*cap)
            records: list[Any] = []
            offset = position
            gone = dict(cluster.unreadable.get(tp, ()))
            while offset < end and len(records) < min(limit, budget):
                if offset in gone:  # as the hook hands it over: the partition's last item
                    reason = "Invalid CRC (injected)"
                    records.append(UnreadableRecords(tp.topic, tp.partition, offset, gone[offset], reason))
                    offset = gone[offset]
                    break
                r = log.records[offset]
                offset += 1
                if self.read_committed and r.txn == ABORTED:
                    continue
                records.append(
                    ConsumerRecord(
                        tp.topic,
                        tp.partition,
                        r.offset,
                        r.timestamp,
                        r.timestamp_type,
                        r.key,
                        r.value,
                        None,
                        len(r.key or b""),
                        len(r.value or b""),
                        list(r.headers),
                    )
                )
            self._positions[tp] = offset
            budget -= len(records)
            self._facts[tp] = (log.high_watermark, log.last_stable_offset, now)
            if records:
                out[tp] = records
        return out

    def last_poll_timestamp(self, tp: TopicPartition) -> int | None:
        facts = self._facts.get(TopicPartition(tp.topic, tp.partition))
        return facts[2] if facts else None

    def highwater(self, tp: TopicPartition) -> int | None:
        facts = self._facts.get(TopicPartition(tp.topic, tp.partition))
        return facts[0] if facts else None

    def last_stable_offset(self, tp: TopicPartition) -> int | None:
        facts = self._facts.get(TopicPartition(tp.topic, tp.partition))
        return facts[1] if facts else None

    async def position(self, tp: TopicPartition) -> int:
        return self._position(TopicPartition(tp.topic, tp.partition))

    def pause(self, *tps: TopicPartition) -> None:
        self._paused.update(TopicPartition(tp.topic, tp.partition) for tp in tps)

    def resume(self, *tps: TopicPartition) -> None:
        self._paused.difference_update(TopicPartition(tp.topic, tp.partition) for tp in tps)

    async def commit(self, offsets: Mapping[TopicPartition, int]) -> None:
        if not self.cluster.up:
            raise KafkaConnectionError("fake cluster is down")
        if self.cluster.commit_delays:
            # A slow coordinator: the request is on the wire and lands later, even if the caller
            # stops waiting for it (as a real commit does once sent).
            loop = asyncio.get_running_loop()
            landed = loop.create_future()

            def land() -> None:
                self.cluster.commit(self.group_id, offsets)
                if not landed.done():
                    landed.set_result(None)

            loop.call_later(self.cluster.commit_delays.pop(0), land)
            await landed
            return
        self.cluster.commit(self.group_id, offsets)

    async def committed(self, tp: TopicPartition) -> int | None:
        return self.cluster.offsets.get(self.group_id, {}).get(TopicPartition(tp.topic, tp.partition))

    async def beginning_offsets(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return dict.fromkeys(tps, 0)

    async def end_offsets(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return {tp: self.cluster.logs[TopicPartition(tp.topic, tp.partition)].high_watermark for tp in tps}

    def seek(self, tp: TopicPartition, offset: int) -> None:
        key = TopicPartition(tp.topic, tp.partition)
        if key not in self._assigned:
            raise IllegalStateError(f"{key} is not assigned")
        self._positions[key] = offset


class _TxnManager:
    """What ``TaskTransaction`` reads of aiokafka's transaction manager."""

    def __init__(self, producer: FakeProducer) -> None:
        self.producer = producer
        self.transactional_id = producer.transactional_id

    def is_fatal_error(self) -> bool:
        return self.producer.fenced

    def wait_for_transaction_end(self) -> asyncio.Future[None]:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if self.producer.fenced:
            future.set_exception(ProducerFenced())
        else:
            future.set_result(None)
        return future


class FakeProducer:
    def __init__(self, cluster: FakeCluster, transactional_id: str | None) -> None:
        self.cluster = cluster
        self.transactional_id = transactional_id
        self._txn_manager = _TxnManager(self) if transactional_id is not None else None
        self.fenced = False
        self.broken: dict[TopicPartition, BaseException] = {}
        self.in_transaction = False
        self.written: list[Stored] = []
        self._offsets: dict[str, dict[TopicPartition, Any]] = {}
        self.started = False

    async def start(self) -> None:
        if not self.cluster.up:
            raise KafkaConnectionError("Unable to bootstrap from fake cluster")
        if self.transactional_id is not None:
            self.cluster.init_producer(self)
        self.started = True

    def fence(self) -> None:
        self.fenced = True
        self._abort()

    async def stop(self) -> None:
        await self.flush()

    async def flush(self) -> None:
        pending = self.cluster.pending_for(self)
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)

    async def send_batch(self, batch: Any, topic: str, partition: int) -> asyncio.Future[Any]:
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        if self.fenced:
            raise ProducerFenced()
        self.cluster.enqueue(_Queued(self, TopicPartition(topic, partition), _decode(batch), future))
        return future

    async def begin_transaction(self) -> None:
        if self.fenced:
            raise ProducerFenced()
        self.in_transaction = True

    async def send_offsets_to_transaction(self, offsets: Mapping[TopicPartition, Any], group_id: str) -> None:
        if self.fenced:
            raise ProducerFenced()
        self._offsets.setdefault(group_id, {}).update(offsets)

    async def commit_transaction(self) -> None:
        await self.flush()
        if self.fenced:
            raise ProducerFenced()
        for r in self.written:
            r.txn = COMMITTED
        self.written = []
        for group, offsets in self._offsets.items():
            self.cluster.commit(group, offsets)
        self._offsets = {}
        self.in_transaction = False
        self.cluster.data.set()

    async def abort_transaction(self) -> None:
        if self.fenced:
            raise ProducerFenced()
        self._abort()

    def _abort(self) -> None:
        for r in self.written:
            r.txn = ABORTED
        self.written = []
        self._offsets = {}
        self.in_transaction = False
        self.cluster.data.set()


class FakeAdmin:
    def __init__(self, cluster: FakeCluster) -> None:
        self.cluster = cluster

    async def start(self) -> None:
        if not self.cluster.up:
            raise KafkaConnectionError("Unable to bootstrap from fake cluster")

    async def close(self) -> None:
        pass

    async def list_topics(self) -> list[str]:
        return list(self.cluster.partitions)

    async def create_topics(self, new_topics: Sequence[Any]) -> Any:
        errors = []
        for t in new_topics:
            self.cluster.create_topic(t.name, t.num_partitions, t.topic_configs)
            errors.append((t.name, 0, None))
        return SimpleNamespace(topic_errors=errors)

    async def describe_topics(self, topics: Sequence[str]) -> list[dict[str, Any]]:
        out = []
        for t in topics:
            n = self.cluster.partitions.get(t)
            if n is None:
                out.append({"topic": t, "partitions": [], "error_code": 3})
            else:
                out.append({"topic": t, "partitions": [{"partition": p} for p in range(n)], "error_code": 0})
        return out

    async def list_consumer_group_offsets(self, group_id: str) -> dict[TopicPartition, Any]:
        meta = self.cluster.metadata.get(group_id, {})
        return {
            tp: OffsetAndMetadata(offset, meta.get(tp, ""))
            for tp, offset in self.cluster.offsets.get(group_id, {}).items()
        }

    async def describe_cluster(self) -> dict[str, Any]:
        return {"brokers": [{"node_id": 0, "host": "fake", "port": 9092}], "controller_id": 0}

    async def describe_configs(self, resources: Sequence[Any]) -> list[Any]:
        described = []
        for res in resources:
            if res.resource_type == 4:  # a broker
                described.append((0, None, 4, res.name, [("default.replication.factor", "1")]))
                continue
            if self.cluster.configs_unknown_for > 0:  # a broker that has not learnt of the topic yet
                self.cluster.configs_unknown_for -= 1
                described.append((3, None, 2, res.name, []))
                continue
            configs = self.cluster.configs.get(res.name, {})
            defaults = {"message.timestamp.type": "CreateTime"}
            entries = [(k, configs.get(k, defaults.get(k))) for k in (res.configs or {})]
            described.append((0, None, 2, res.name, entries))
        return [SimpleNamespace(resources=described)]


class FakeClients:
    """The pipeline's client factory over a :class:`FakeCluster`."""

    def __init__(self, cluster: FakeCluster, config: SidecarConfig) -> None:
        self.cluster = cluster
        self.config = config
        self.consumers: list[FakeConsumer] = []
        self.producers: list[FakeProducer] = []

    def consumer(self, isolation_level: str) -> FakeConsumer:
        cfg = self.config
        consumer = FakeConsumer(self.cluster, cfg.effective_group_id, isolation_level, cfg.auto_offset_reset)
        self.consumers.append(consumer)
        return consumer

    def producer(self, transactional_id: str | None) -> FakeProducer:
        producer = FakeProducer(self.cluster, transactional_id)
        self.producers.append(producer)
        return producer

    def admin(self) -> FakeAdmin:
        return FakeAdmin(self.cluster)
