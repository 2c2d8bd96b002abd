"""``/status``: one JSON document that answers "why is my join stalled?".

Per task: readiness, watermark, stream time, counts and ``blocked_by`` — each partition holding
the task back and why — and per partition since when it has been quiet (``quiet_since``) and
when it stops holding the task back (``passes_at``), all from the core's snapshot. Beside the
tasks, the output side: batches in flight, the write or commit the pipeline waits in and, when
the delivery writes in transactions, each task's transaction — because a pipeline waiting on its
output fetches nothing, and its merge buffers then look healthy. ``output.blocked`` says so in
one line once a wait passes ``BLOCKED_AFTER_MS``.

It reads one start through :class:`Observed`, the few things ``/status`` shows, not the pipeline.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from sidecar.core import IDLE_AUTO

if TYPE_CHECKING:
    from sidecar.service.context import StartContext
    from sidecar.service.delivery import Delivery
    from sidecar.service.tasks import TaskRegistry

#: /status calls the output blocked once a write or a commit has waited this long.
BLOCKED_AFTER_MS = 1000


class Observed(Protocol):
    """What ``/status`` reads of one start of the pipeline."""

    @property
    def ctx(self) -> StartContext: ...

    @property
    def tasks(self) -> TaskRegistry: ...

    @property
    def delivery(self) -> Delivery: ...

    @property
    def encoder_name(self) -> str: ...

    @property
    def reader_name(self) -> str: ...

    @property
    def spare(self) -> bool: ...


def pipeline_status(pipeline: Observed) -> dict[str, Any]:
    cfg = pipeline.ctx.config
    now = pipeline.ctx.clock()
    state, message = pipeline.ctx.health.status()
    return {
        "health": state,
        "message": message,
        "output_topic": cfg.output_topic,
        "task_grouping": cfg.task_grouping,
        "max_task_idle_ms": "auto" if cfg.max_task_idle_ms == IDLE_AUTO else cfg.max_task_idle_ms,
        "processing_guarantee": cfg.processing_guarantee,
        "output_encoder": pipeline.encoder_name,
        "input_reader": pipeline.reader_name,
        "output": output_status(pipeline, now),
        "role": role(pipeline),
        "paused_since": pipeline.ctx.control.pause.since,
        "tasks": {run.name: run.task.snapshot(now) for run in pipeline.tasks.sorted()},
        "config": cfg.redacted(),
    }


def role(pipeline: Observed) -> str:
    """What this replica does in its group, in one line."""
    if pipeline.ctx.control.pause.paused:
        return (
            "paused by an operator (PUT /resume to go on): nothing is fetched or written, no "
            "heartbeat moves the watermark; the replica keeps its tasks and its group membership"
        )
    if pipeline.spare:
        return (
            f"spare: no task assigned (group {pipeline.ctx.config.effective_group_id} has more replicas "
            "than tasks); healthy, and takes tasks over when another replica leaves"
        )
    names = ", ".join(run.name for run in pipeline.tasks.sorted())
    return f"active: tasks {names}" if names else "starting"


def output_status(pipeline: Observed, now: int) -> dict[str, Any]:
    delivery = pipeline.delivery
    activity = delivery.activity.snapshot(now)
    out: dict[str, Any] = {"topic": pipeline.ctx.config.output_topic, **activity}
    txns = delivery.transactions(now)
    if txns is not None:
        out["transactions"] = txns
    out["blocked"] = blocked(activity, txns or {}, now)
    return out


def blocked(activity: dict[str, Any], txns: dict[str, dict[str, Any]], now: int) -> str | None:
    """One line saying what the output holds the pipeline in, once it has waited
    ``BLOCKED_AFTER_MS``; ``None`` when nothing waits that long."""
    writing = activity["writing"]
    if writing is not None and writing["waiting_ms"] >= BLOCKED_AFTER_MS:
        ack = activity["last_ack"]
        last = "none acknowledged yet" if ack is None else f"last acknowledged {(now - ack) / 1000:.1f} s ago"
        waited = writing["waiting_ms"] / 1000
        return (
            f"writing to {writing['topic']}[{writing['partition']}] for {waited:.1f} s: "
            f"the producer takes a batch only when the previous one for that partition has gone out "
            f"({activity['batches_in_flight']} in flight, {last}); nothing is fetched meanwhile"
        )
    for name, txn in txns.items():
        if txn["committing_ms"] is not None and txn["committing_ms"] >= BLOCKED_AFTER_MS:
            return (
                f"committing the transaction of task {name} for {txn['committing_ms'] / 1000:.1f} s "
                f"(waiting for its writes to be acknowledged and for the commit)"
            )
    return None
