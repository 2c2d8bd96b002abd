"""Two merge tasks given the same calls — the C kernel's and the Python one that specifies it —
with every answer compared (``sidecar/core/kernel.py``).

:class:`TwinTasks` stands in for a :class:`MergeTask`: each call goes to both, in the same
order, with the same arguments (the same record objects); what they return or raise must be the
same — outcomes, the batches' records (the very objects pushed), times, late and enforced
marks, routed and dead letters, the stamped output records, commits, pause hints, ``/status``
snapshots — and the C task's answer is returned. Reading an attribute reads the C task's.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import Any

from sidecar.core import Emit, MergeTask, TaskConfig, TopicPartition
from sidecar.core.kernel import native_merge_available
from sidecar.core.stamping import Stamper


def emit_view(emit: Emit) -> tuple[object, ...]:
    """Everything a batch says, records by identity (both tasks were pushed the same objects)."""
    return (
        emit.batch_id,
        [id(r) for r in emit.records],
        list(emit.timestamps),
        emit.watermark,
        emit.stream_time_before,
        emit.enforced_from,
        list(emit.late),
        list(emit.lateness),
        [(id(x.record), x.timestamp, x.lateness) for x in emit.late_routed],
        [(d.record, d.reason, d.exception_class, d.last_offset) for d in emit.dead_letters],
        emit.dropped_late,
    )


def same(fast: object, spec: object) -> None:
    """The two answers are the same; a batch also stamps into the same output records."""
    if isinstance(fast, Emit) and isinstance(spec, Emit):
        fast_view, spec_view = emit_view(fast), emit_view(spec)
        assert fast_view == spec_view, f"C take {fast_view} != Python take {spec_view}"
        assert Stamper().stamp(fast) == Stamper().stamp(spec)
        return
    assert fast == spec, f"C kernel answered {fast!r}, the Python core {spec!r}"


class TwinTasks:
    """A :class:`MergeTask` on the C kernel and one on the Python core, called alike."""

    def __init__(
        self,
        partitions: Sequence[TopicPartition],
        config: TaskConfig | None = None,
        topic_order: Sequence[str] | None = None,
        log_append_time_topics: Collection[str] = (),
    ) -> None:
        assert native_merge_available(), "the differential tests need the C kernel built"
        self.fast = MergeTask(partitions, config, topic_order, log_append_time_topics, native=True)
        self.spec = MergeTask(partitions, config, topic_order, log_append_time_topics, native=False)
        assert self.fast.native
        assert not self.spec.native
        #: The last call's answers, the C task's and the Python one's.
        self.answers: tuple[Any, Any] = (None, None)

    def _both(self, call: Callable[[MergeTask], Any]) -> Any:
        answers: list[tuple[BaseException | None, Any]] = []
        for task in (self.fast, self.spec):
            try:
                answers.append((None, call(task)))
            except Exception as e:  # compared below, then raised again
                answers.append((e, None))
        (fast_error, fast), (spec_error, spec) = answers
        assert (type(fast_error), str(fast_error)) == (type(spec_error), str(spec_error)), (
            f"C kernel raised {fast_error!r}, the Python core {spec_error!r}"
        )
        if fast_error is not None:
            raise fast_error
        same(fast, spec)
        self.answers = (fast, spec)
        return fast

    def push(self, tp: TopicPartition, records: Any) -> None:
        self._both(lambda t: t.push(tp, records))

    def observe_fetch(self, tp: TopicPartition, high_watermark: int, position: int, now_ms: int) -> None:
        self._both(lambda t: t.observe_fetch(tp, high_watermark, position, now_ms))

    def poll(self, now_ms: int, max_records: int | None = None) -> Any:
        return self._both(lambda t: t.poll(now_ms, max_records))

    def pause_hint(self, now_ms: int) -> Any:
        return self._both(lambda t: t.pause_hint(now_ms))

    def hold(self, now_ms: int) -> Any:
        return self._both(lambda t: t.hold(now_ms))

    def release(self, now_ms: int) -> Any:
        return self._both(lambda t: t.release(now_ms))

    def acked(self, batch_ids: Collection[int]) -> Any:
        return self._both(lambda t: t.acked(list(batch_ids)))

    def committable(self) -> Any:
        return self._both(lambda t: t.committable())

    def snapshot(self, now_ms: int) -> Any:
        return self._both(lambda t: t.snapshot(now_ms))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.fast, name)
