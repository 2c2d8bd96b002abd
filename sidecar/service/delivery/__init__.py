"""Delivery: how output becomes durable and input offsets get committed — one contract, two guarantees.

The pipeline hands every task's output to a :class:`Delivery` and never asks which guarantee is
in force; this package is the only place that names one (:data:`GUARANTEES`). A delivery says
what the consumer reads (:attr:`Delivery.isolation_level`), gives each task its output
(:meth:`Delivery.attach`: a writer, an encoder, under exactly-once a transaction), readies new
tasks (:meth:`~Delivery.open`), writes what the merge emits (:meth:`~Delivery.send`,
:meth:`~Delivery.heartbeat`), makes progress durable (:meth:`~Delivery.tick`), judges a task's
client errors with what it knows of the task (:meth:`~Delivery.failed`), hands tasks back in a
rebalance (:meth:`~Delivery.hand_back`), finishes a clean stop (:meth:`~Delivery.drain`), cleans
up after a failure (:meth:`~Delivery.abort`) and closes (:meth:`~Delivery.close`).

The contract a caller may rely on, under both guarantees:

* an input offset is committed only once every output taken from it and from the earlier offsets
  of its partition is acknowledged by the broker (main output, late topic, dead letters);
* :meth:`~Delivery.drain` commits every input offset whose output was acknowledged, so a restart
  after a clean stop repeats nothing;
* errors are judged by :mod:`sidecar.service.failures` (phase ``WRITE``, ``COMMIT``, ``ASSIGN``,
  ``REVOKE``, ``STOP``, ``ABORT``, ``CLOSE``); nothing here decides what is fatal.

:class:`AtLeastOnce` (``processing.guarantee=at_least_once``): one idempotent producer shared by
every task, a patient writer (it waits out a silent broker), acknowledgements counted per emitted
batch, and the offsets they release committed by a background committer every
``COMMIT_INTERVAL_S``.

:class:`ExactlyOnce` (``exactly_once_v2``): a transactional producer per task
(:mod:`sidecar.kafka.transactions`); a task's outputs, heartbeats, side records and input offsets
commit in its own transaction, about every ``COMMIT_INTERVAL_S``. A task handed back commits its
open transaction and closes its producer first; a task taken on starts its producer first, which
fences the previous owner's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sidecar.kafka.clients import IsolationLevel
from sidecar.service.delivery.at_least_once import AtLeastOnce
from sidecar.service.delivery.base import COMMIT_INTERVAL_S, DRAIN_TIMEOUT_S, Delivery
from sidecar.service.delivery.exactly_once import ExactlyOnce

if TYPE_CHECKING:
    from sidecar.config import SidecarConfig
    from sidecar.service.context import StartContext
    from sidecar.service.tasks import TaskRegistry

__all__ = [
    "COMMIT_INTERVAL_S",
    "DRAIN_TIMEOUT_S",
    "GUARANTEES",
    "AtLeastOnce",
    "Delivery",
    "ExactlyOnce",
    "isolation_level",
    "make_delivery",
]

#: The delivery of each ``processing.guarantee`` (the values ``sidecar.config`` accepts).
GUARANTEES: dict[str, type[Delivery]] = {
    "at_least_once": AtLeastOnce,
    "exactly_once_v2": ExactlyOnce,
}


def make_delivery(ctx: StartContext, tasks: TaskRegistry) -> Delivery:
    """The delivery of ``processing.guarantee``."""
    return GUARANTEES[ctx.config.processing_guarantee](ctx, tasks)


def isolation_level(config: SidecarConfig) -> IsolationLevel:
    """What a consumer reads under ``processing.guarantee``, for a client outside a pipeline (a
    reset reads end offsets as the sidecar would)."""
    return GUARANTEES[config.processing_guarantee].isolation_level
