"""What an error means for the sidecar: one table, read top to bottom, first match wins.

Theory of operation
-------------------
Every error the pipeline meets is judged here and nowhere else, by what was raised, in which
*phase* of the work, under which ``processing.guarantee`` and ``task.grouping``. The answer is an
:class:`Action`:

* ``FATAL`` — the sidecar cannot go on: it stops with one line on stderr (exit 1). Errors that
  another start would meet again (authorization, an unsupported broker, another process with
  our ``transactional.id``) and bad data under ``errors.tolerance=none`` are fatal.
* ``RESTART`` — the clients cannot be used any more (aiokafka's transactional sender stops for
  good once it fails), but a fresh start from the committed offsets can go on: the supervisor
  starts over in the same process, as Kafka Streams does.
* ``TASK_LOST`` — a task this replica was handing over had already been taken over by another
  replica (its producer was fenced): nothing is wrong, the new owner redoes the open work.
* ``LOG`` — worth a line in the log, nothing more: a commit that a later one repeats, a client
  that fails while it is being closed. Cleanup never ends the process.

Rows are written like h11's state tables: data, each with the reason it exists (``why``), each
with a test in ``tests/unit/service/test_failures.py``. To change what an error does, change a
row here — not an ``except`` clause in the pipeline.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from aiokafka.errors import (
    ClusterAuthorizationFailedError,
    GroupAuthorizationFailedError,
    IllegalOperation,
    IncompatibleBrokerVersion,
    KafkaError,
    KafkaTimeoutError,
    ProducerFenced,
    RequestTimedOutError,
    TopicAuthorizationFailedError,
    TransactionalIdAuthorizationFailed,
    UnsupportedVersionError,
)

from sidecar.core.deadletters import DeadLetterRatioExceeded
from sidecar.core.timestamps import InvalidTimestampError, RefusedTimestampError
from sidecar.kafka.admin import AdminError
from sidecar.kafka.clients import ClientStartError
from sidecar.kafka.unreadable import ReaderFailed, UnreadableRecords
from sidecar.registry.client import RegistryRefusedError

Guarantee = Literal["at_least_once", "exactly_once_v2"]
Grouping = Literal["single", "partition"]


class Phase(enum.Enum):
    """Where in the work an error was met."""

    #: Connecting the clients, preparing the topics, the first assignment (first start).
    START = "start"
    #: The same, when starting again after a restart: the cluster may still be away.
    RESTART = "restart"
    #: Fetching and feeding the merge tasks, and merging (the core's own errors).
    MERGE = "merge"
    #: Writing output (batches, heartbeats, side records) and its acknowledgements.
    WRITE = "write"
    #: Committing input offsets (at least once) or a task's transaction (exactly once).
    COMMIT = "commit"
    #: Taking tasks on in a rebalance: starting their producers, reading committed offsets.
    ASSIGN = "assign"
    #: Handing tasks back in a rebalance: finishing their writes and commits.
    REVOKE = "revoke"
    #: A clean stop's drain: the last emits, acknowledgements and commits.
    STOP = "stop"
    #: Aborting open transactions after a failure.
    ABORT = "abort"
    #: Closing clients (on stop, restart or revoke).
    CLOSE = "close"


class Action(enum.Enum):
    FATAL = "fatal"
    RESTART = "restart"
    TASK_LOST = "task lost"
    LOG = "log"


#: Errors another start would meet again: fatal whatever the guarantee.
NOT_RESTARTABLE: tuple[type[BaseException], ...] = (
    TransactionalIdAuthorizationFailed,
    GroupAuthorizationFailedError,
    TopicAuthorizationFailedError,
    ClusterAuthorizationFailedError,
    UnsupportedVersionError,
    IncompatibleBrokerVersion,
)
#: What a Kafka client raises: its own errors, and aiokafka's ``IllegalOperation`` from a
#: transactional producer whose sender has stopped.
CLIENT_ERRORS: tuple[type[BaseException], ...] = (KafkaError, IllegalOperation)
#: Timeouts aiokafka does not flag retriable but Kafka's Java client does (TimeoutException).
RETRIABLE_TIMEOUTS: tuple[type[BaseException], ...] = (KafkaTimeoutError, RequestTimedOutError)
#: Errors met while setting up (connecting, preparing topics) whose message is a whole sentence.
SETUP_ERRORS: tuple[type[BaseException], ...] = (ClientStartError, AdminError)

_ALL = frozenset(Phase)
_RUNNING = frozenset({Phase.MERGE, Phase.WRITE, Phase.COMMIT, Phase.ASSIGN})


def is_retriable(error: BaseException) -> bool:
    """What Kafka marks retriable (leader moves, coordinator moves, not enough replicas, network
    and connection errors), and timeouts: the cluster may answer if asked again."""
    return bool(getattr(error, "retriable", False)) or isinstance(error, RETRIABLE_TIMEOUTS)


@dataclass(frozen=True, slots=True)
class Rule:
    """One row: errors of these types, met in these phases (under this guarantee and grouping,
    when given, and for which ``when`` holds), lead to ``action``; ``message`` is the line the
    user sees (a template over ``{error}``, ``{task}``, ``{txn_id}``, ``{group}``, ``{topic}``,
    ``{bound}`` and ``{past}``, the command that moves the group past unreadable offsets)."""

    errors: tuple[type[BaseException], ...]
    phases: frozenset[Phase]
    action: Action
    message: str
    why: str
    guarantee: Guarantee | None = None
    grouping: Grouping | None = None
    when: Callable[[BaseException], bool] | None = None

    def matches(self, error: BaseException, phase: Phase, guarantee: Guarantee, grouping: Grouping) -> bool:
        return (
            isinstance(error, self.errors)
            and phase in self.phases
            and self.guarantee in (None, guarantee)
            and self.grouping in (None, grouping)
            and (self.when is None or self.when(error))
        )


RULES: tuple[Rule, ...] = (
    Rule(
        (BaseException,),
        frozenset({Phase.CLOSE}),
        Action.LOG,
        "closing a Kafka client failed (ignored): {error}",
        "Cleanup never ends the process: a client closed during a restart, a revoke or a stop "
        "may raise anything, a CancelledError from a fetch task in its retry backoff included.",
    ),
    Rule(
        (ProducerFenced,),
        frozenset({Phase.ABORT}),
        Action.LOG,
        "",
        "Aborting after a failure: a fenced producer's transaction was aborted by its fencer.",
    ),
    Rule(
        (BaseException,),
        frozenset({Phase.ABORT}),
        Action.LOG,
        "could not abort the open transaction of task {task} (the broker times it out): {error}",
        "An abort is a courtesy to read_committed readers; the broker aborts on timeout anyway.",
    ),
    Rule(
        (RefusedTimestampError,),
        _ALL,
        Action.FATAL,
        "{error}; stopping (errors.tolerance=none; errors.tolerance=all sends such records to the "
        "dead letter queue, timestamp.invalid=skip drops them)",
        "The output topic's broker would refuse the record and fail its whole batch; the user chose "
        "to stop at a record that cannot be written.",
    ),
    Rule(
        (InvalidTimestampError,),
        _ALL,
        Action.FATAL,
        "{error}; stopping (timestamp.invalid=fail, errors.tolerance=none)",
        "The user chose to stop at a record whose event time cannot be read.",
    ),
    Rule(
        (DeadLetterRatioExceeded,),
        _ALL,
        Action.FATAL,
        "{error}",
        "A bad deploy must not route the whole stream to the dead letter queue.",
    ),
    Rule(
        (RegistryRefusedError,),
        _ALL,
        Action.FATAL,
        "{error}",
        "The schema registry refuses the credentials: every retry would be refused again.",
    ),
    Rule(
        (UnreadableRecords,),
        _ALL,
        Action.FATAL,
        "{error}; stopping (errors.tolerance=none; errors.tolerance=all sends such offsets to the dead "
        "letter queue; or, with every replica stopped: {past})",
        "The user chose to stop at bad data, and a batch that cannot be read is read again at "
        "every start: say which offsets and how to move past them. Nothing past them was "
        "committed (the task never heard of them).",
    ),
    Rule(
        (ReaderFailed,),
        _ALL,
        Action.FATAL,
        "{error}",
        "Without the hook the failing batch's offsets are unknown: nothing can be skipped, and "
        "fetching again meets the same batch.",
    ),
    Rule(
        NOT_RESTARTABLE,
        _ALL,
        Action.FATAL,
        "Kafka refused the sidecar: {error}",
        "Authorization and version errors come back on every start: say so and stop.",
    ),
    Rule(
        (ProducerFenced,),
        frozenset({Phase.REVOKE, Phase.STOP}),
        Action.TASK_LOST,
        "task {task} had already been taken over; its open transaction is aborted",
        "The task moved to another replica while this one handed it over or stopped; the new "
        "owner's producer fenced ours and redoes the open transaction.",
        guarantee="exactly_once_v2",
        grouping="partition",
    ),
    Rule(
        (ProducerFenced,),
        _RUNNING,
        Action.RESTART,
        "the producer of task {task} ({txn_id}) was fenced: another replica took the task over",
        "This replica missed a rebalance and another took the task over (Kafka Streams' "
        "TaskMigratedException): drop everything and join the group again.",
        guarantee="exactly_once_v2",
        grouping="partition",
    ),
    Rule(
        (ProducerFenced,),
        _ALL,
        Action.FATAL,
        "the producer of task {task} was fenced: another process started with transactional.id "
        "{txn_id} (a second sidecar with group.id {group}?)",
        "With task.grouping=single only one process may run per group: the other one won.",
        guarantee="exactly_once_v2",
        grouping="single",
    ),
    Rule(
        SETUP_ERRORS,
        frozenset({Phase.START}),
        Action.FATAL,
        "{error}",
        "The first start: a cluster that cannot be reached or topics that cannot be prepared are "
        "a setup error the user must see at once.",
    ),
    Rule(
        (*CLIENT_ERRORS, *SETUP_ERRORS),
        frozenset({Phase.RESTART}),
        Action.RESTART,
        "the cluster is not reachable again yet: {error}",
        "Starting again after a restart: the cluster may still be away; keep trying.",
    ),
    Rule(
        CLIENT_ERRORS,
        frozenset({Phase.REVOKE}),
        Action.LOG,
        "task {task}: could not commit its transaction before handing it over ({error}); its next "
        "owner's producer aborts it",
        "A rebalance callback must not fail the group: the next owner fences and aborts.",
        guarantee="exactly_once_v2",
    ),
    Rule(
        CLIENT_ERRORS,
        _RUNNING,
        Action.RESTART,
        "a Kafka client failed: {error}",
        "A transactional producer that failed cannot be used again (aiokafka's sender stops): "
        "start over from the committed offsets; new producers fence the old ones, so "
        "read_committed readers see nothing twice.",
        guarantee="exactly_once_v2",
    ),
    Rule(
        CLIENT_ERRORS,
        frozenset({Phase.COMMIT, Phase.REVOKE}),
        Action.LOG,
        "commit failed, will be retried with later offsets: {error}",
        "A commit lost (in a rebalance, to a broker restart) is repeated by a later commit or by "
        "the partition's next owner: records are reprocessed, never skipped.",
        guarantee="at_least_once",
    ),
    Rule(
        CLIENT_ERRORS,
        frozenset({Phase.ASSIGN}),
        Action.LOG,
        "cannot read the committed offsets of new tasks: {error}",
        "At least once: the consumer's own start position (the committed offset) is safe.",
        guarantee="at_least_once",
    ),
    Rule(
        CLIENT_ERRORS,
        frozenset({Phase.STOP}),
        Action.FATAL,
        "Kafka error while stopping: {error}",
        "The drain could not make the last output durable: say so (exit 1) rather than claim a clean stop.",
    ),
    Rule(
        CLIENT_ERRORS,
        frozenset({Phase.WRITE}),
        Action.FATAL,
        "writing to {topic} failed: not delivered within delivery.timeout.ms={bound}: {error}",
        "At least once: the idempotent producer retries a retriable error by itself, in order; a "
        "batch fails with one only past the user's bound, and cannot be committed past.",
        guarantee="at_least_once",
        when=is_retriable,
    ),
    Rule(
        CLIENT_ERRORS,
        frozenset({Phase.WRITE}),
        Action.FATAL,
        "writing to {topic} failed: {error}",
        "At least once: an output batch the broker refused cannot be committed past.",
        guarantee="at_least_once",
    ),
    Rule(
        CLIENT_ERRORS,
        frozenset({Phase.MERGE, Phase.ASSIGN}),
        Action.RESTART,
        "a Kafka client failed: {error}",
        "At least once: a retriable error of the consumer is ridden out by starting again from "
        "the committed offsets (what was written and not committed is written again).",
        guarantee="at_least_once",
        when=is_retriable,
    ),
    Rule(
        CLIENT_ERRORS,
        frozenset({Phase.START}),
        Action.FATAL,
        "{error}",
        "The first start: a cluster that cannot be reached or prepared is a setup error.",
    ),
    Rule(
        CLIENT_ERRORS,
        _ALL,
        Action.FATAL,
        "Kafka error: {error}",
        "Any other client error.",
    ),
)


@dataclass(frozen=True, slots=True)
class Decision:
    action: Action
    message: str
    rule: Rule


def describe(error: BaseException) -> str:
    """An error as one line, with its type's name (aiokafka's messages often lack it)."""
    if isinstance(error, asyncio.CancelledError):
        return "CancelledError"
    if isinstance(
        error,
        (
            *SETUP_ERRORS,
            InvalidTimestampError,
            DeadLetterRatioExceeded,
            RegistryRefusedError,
            UnreadableRecords,
            ReaderFailed,
        ),
    ):
        return str(error)  # our own errors: their message is the sentence
    text = str(error) or type(error).__name__
    return text if type(error).__name__ in text else f"{type(error).__name__}: {text}"


def decide(
    error: BaseException, phase: Phase, guarantee: Guarantee, grouping: Grouping, **context: str
) -> Decision:
    """The first row that matches; an error no row matches is not the sidecar's to handle
    (a bug, a ``KeyboardInterrupt``): it is re-raised."""
    for rule in RULES:
        if rule.matches(error, phase, guarantee, grouping):
            fields = {"task": "?", "txn_id": "?", "group": "?", "topic": "?", "bound": "?", "past": "?"}
            fields.update(context)
            if isinstance(error, UnreadableRecords):
                fields["past"] = (
                    f"timesync-sidecar offsets reset --partition {error.topic}:{error.partition} "
                    f"--to-offset {error.next_offset}"
                )
            return Decision(rule.action, rule.message.format(error=describe(error), **fields), rule)
    raise error
