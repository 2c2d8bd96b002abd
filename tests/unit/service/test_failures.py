"""The failure table, row by row: what each error means in each phase, and that each row is tested."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

import pytest
from aiokafka.errors import (
    GroupAuthorizationFailedError,
    IllegalOperation,
    KafkaConnectionError,
    KafkaTimeoutError,
    LeaderNotAvailableError,
    NotCoordinatorForGroupError,
    NotLeaderForPartitionError,
    ProducerFenced,
    RecordTooLargeError,
    TopicAuthorizationFailedError,
    UnknownError,
)

from sidecar.config import load_config
from sidecar.core import TopicPartition
from sidecar.core.deadletters import DeadLetterRatioExceeded
from sidecar.core.timestamps import InvalidTimestampError, RefusedTimestampError
from sidecar.kafka.admin import AdminError
from sidecar.kafka.clients import ClientStartError
from sidecar.kafka.unreadable import ReaderFailed, UnreadableRecords
from sidecar.registry.client import RegistryRefusedError
from sidecar.service.error_handler import ErrorHandler
from sidecar.service.failures import RULES, Action, Phase, decide, describe, is_retriable
from sidecar.service.health import Health
from sidecar.service.run_state import Failed, Restarting, RunControl

ALO, EOS = "at_least_once", "exactly_once_v2"
SINGLE, PARTITION = "single", "partition"


@dataclass(frozen=True)
class Case:
    error: BaseException
    phase: Phase
    guarantee: str
    grouping: str
    action: Action
    #: A phrase of the row's ``why`` that must match: the row this case exercises.
    row: str


CASES = {
    "a client that raises anything while closing is only logged": Case(
        asyncio.CancelledError(), Phase.CLOSE, EOS, SINGLE, Action.LOG, "Cleanup never ends the process"
    ),
    "a fenced producer's transaction needs no abort": Case(
        ProducerFenced(), Phase.ABORT, EOS, PARTITION, Action.LOG, "aborted by its fencer"
    ),
    "an abort that fails is left to the broker's timeout": Case(
        KafkaTimeoutError(), Phase.ABORT, EOS, SINGLE, Action.LOG, "courtesy"
    ),
    "an unreadable event time under tolerance none stops": Case(
        InvalidTimestampError(TopicPartition("in", 0), 7, "not JSON"),
        Phase.MERGE,
        ALO,
        SINGLE,
        Action.FATAL,
        "chose to stop",
    ),
    "a time the output topic's broker would refuse, under tolerance none, stops": Case(
        RefusedTimestampError(TopicPartition("in", 0), 7, "message.timestamp.after.max.ms=3600000"),
        Phase.MERGE,
        EOS,
        PARTITION,
        Action.FATAL,
        "cannot be written",
    ),
    "the dead letter ratio cap stops": Case(
        DeadLetterRatioExceeded(600, 1000, 0.5), Phase.MERGE, EOS, PARTITION, Action.FATAL, "whole stream"
    ),
    "schema registry credentials refused stop": Case(
        RegistryRefusedError("the schema registry at http://r refused the credentials (401)"),
        Phase.MERGE,
        ALO,
        SINGLE,
        Action.FATAL,
        "refused again",
    ),
    "offsets that cannot be read under tolerance none stop, naming them": Case(
        UnreadableRecords("in", 2, 40, 45, "Invalid CRC"),
        Phase.MERGE,
        EOS,
        PARTITION,
        Action.FATAL,
        "chose to stop at bad data",
    ),
    "a batch an unhooked reader cannot read stops": Case(
        ReaderFailed(UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte")),
        Phase.MERGE,
        ALO,
        SINGLE,
        Action.FATAL,
        "offsets are unknown",
    ),
    "an authorization error stops even under exactly once": Case(
        GroupAuthorizationFailedError(), Phase.COMMIT, EOS, PARTITION, Action.FATAL, "every start"
    ),
    "a task fenced while being handed over was taken over": Case(
        ProducerFenced(), Phase.REVOKE, EOS, PARTITION, Action.TASK_LOST, "handed it over or stopped"
    ),
    "a task fenced while running means this replica missed a rebalance": Case(
        ProducerFenced(), Phase.WRITE, EOS, PARTITION, Action.RESTART, "TaskMigratedException"
    ),
    "a fenced producer with one task means a second process": Case(
        ProducerFenced(), Phase.WRITE, EOS, SINGLE, Action.FATAL, "only one process may run"
    ),
    "a cluster that cannot be reached at the first start stops": Case(
        ClientStartError("cannot connect the consumer to x:9092: refused"),
        Phase.START,
        ALO,
        SINGLE,
        Action.FATAL,
        "setup error",
    ),
    "a topic the broker refuses at the first start stops": Case(
        AdminError("cannot describe topic 'in': TopicAuthorizationFailedError"),
        Phase.START,
        EOS,
        SINGLE,
        Action.FATAL,
        "setup error",
    ),
    "a cluster still away while starting again keeps the restart going": Case(
        KafkaConnectionError(), Phase.RESTART, EOS, SINGLE, Action.RESTART, "may still be away"
    ),
    "a transaction that cannot commit while handing a task over is left to the next owner": Case(
        KafkaTimeoutError(), Phase.REVOKE, EOS, PARTITION, Action.LOG, "must not fail the group"
    ),
    "a failed transactional producer restarts the pipeline": Case(
        NotLeaderForPartitionError(), Phase.WRITE, EOS, SINGLE, Action.RESTART, "cannot be used again"
    ),
    "aiokafka's follow-up error of a stopped transactional producer restarts too": Case(
        IllegalOperation("Can't send messages while not in transaction"),
        Phase.WRITE,
        EOS,
        PARTITION,
        Action.RESTART,
        "cannot be used again",
    ),
    "an offset commit that fails is repeated later": Case(
        KafkaTimeoutError(), Phase.COMMIT, ALO, PARTITION, Action.LOG, "never skipped"
    ),
    "committed offsets that cannot be read at assignment fall back to the consumer's": Case(
        KafkaTimeoutError(), Phase.ASSIGN, ALO, PARTITION, Action.LOG, "start position"
    ),
    "a drain that cannot make the last output durable stops with exit 1": Case(
        KafkaTimeoutError(), Phase.STOP, ALO, SINGLE, Action.FATAL, "rather than claim a clean stop"
    ),
    "an output batch not delivered within the user's bound stops at least once": Case(
        LeaderNotAvailableError(), Phase.WRITE, ALO, SINGLE, Action.FATAL, "past the user's bound"
    ),
    "an output batch the broker refused stops at least once": Case(
        RecordTooLargeError(), Phase.WRITE, ALO, SINGLE, Action.FATAL, "the broker refused"
    ),
    "a retriable consumer error at least once starts again from the committed offsets": Case(
        NotCoordinatorForGroupError(), Phase.MERGE, ALO, PARTITION, Action.RESTART, "ridden out"
    ),
    "any other client error at the first start stops": Case(
        KafkaTimeoutError(), Phase.START, ALO, SINGLE, Action.FATAL, "The first start"
    ),
    "any other client error stops": Case(
        UnknownError(), Phase.MERGE, ALO, SINGLE, Action.FATAL, "Any other client error"
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_each_row_says_what_its_error_means(name: str) -> None:
    case = CASES[name]
    decision = decide(case.error, case.phase, case.guarantee, case.grouping)  # type: ignore[arg-type]
    assert decision.action is case.action
    assert case.row in decision.rule.why, decision.rule.why


def test_every_row_has_a_case() -> None:
    tested = {
        decide(c.error, c.phase, c.guarantee, c.grouping).rule  # type: ignore[arg-type]
        for c in CASES.values()
    }
    untested = [rule.why for rule in RULES if rule not in tested]
    assert untested == []


def test_every_row_states_its_reason() -> None:
    assert all(rule.why.strip() for rule in RULES)


def test_an_error_no_row_matches_is_not_swallowed() -> None:
    with pytest.raises(ZeroDivisionError):
        decide(ZeroDivisionError(), Phase.WRITE, ALO, SINGLE)


def test_messages_name_the_task_the_transactional_id_and_the_group() -> None:
    decision = decide(ProducerFenced(), Phase.WRITE, EOS, SINGLE, task="0", txn_id="g-txn", group="g")
    assert decision.message == (
        "the producer of task 0 was fenced: another process started with transactional.id g-txn "
        "(a second sidecar with group.id g?)"
    )


def test_our_own_errors_read_as_their_sentence_and_aiokafkas_carry_their_name() -> None:
    assert describe(ClientStartError("cannot connect the consumer to x:9092: refused")) == (
        "cannot connect the consumer to x:9092: refused"
    )
    assert "TopicAuthorizationFailedError" in describe(TopicAuthorizationFailedError())
    assert describe(asyncio.CancelledError()) == "CancelledError"


def handler(guarantee: str, grouping: str = SINGLE) -> ErrorHandler:
    cfg = load_config(
        None,
        [
            "bootstrap.servers=b:9092",
            "input.topics=a",
            "output.topic=o",
            f"processing.guarantee={guarantee}",
            f"task.grouping={grouping}",
        ],
        environ={},
    )
    return ErrorHandler(RunControl(asyncio.Event(), Health()), cfg)


def test_the_handler_fails_the_run_with_the_rows_message() -> None:
    errors = handler(ALO)
    assert errors.handle(KafkaTimeoutError(), Phase.WRITE, topic="o") is Action.FATAL
    state = errors.control.state
    assert isinstance(state, Failed)
    assert str(state.error) == (
        "writing to o failed: not delivered within delivery.timeout.ms=120000: KafkaTimeoutError"
    )


def test_the_handler_restarts_the_run_and_the_first_outcome_stands(caplog: pytest.LogCaptureFixture) -> None:
    errors = handler(EOS)
    assert errors.handle(NotLeaderForPartitionError(), Phase.WRITE) is Action.RESTART
    assert isinstance(errors.control.state, Restarting)
    with caplog.at_level(logging.WARNING, "timesync"):
        assert errors.handle(KafkaTimeoutError(), Phase.CLOSE) is Action.LOG
    assert "closing a Kafka client failed" in caplog.text
    assert isinstance(errors.control.state, Restarting)


def test_what_kafka_marks_retriable_and_timeouts_are_retriable() -> None:
    assert is_retriable(LeaderNotAvailableError())
    assert is_retriable(KafkaConnectionError())
    assert is_retriable(KafkaTimeoutError())
    assert not is_retriable(RecordTooLargeError())
    assert not is_retriable(TopicAuthorizationFailedError())


def test_a_restart_or_a_failed_commit_shows_as_degraded_health_until_the_cluster_answers() -> None:
    errors = handler(ALO, PARTITION)
    health = errors.control.health
    assert health is not None
    health.started()
    errors.handle(NotLeaderForPartitionError(), Phase.COMMIT)
    state, message = health.status()
    assert state == "degraded"
    assert message.startswith("commit failed, will be retried with later offsets: ")
    health.contact()
    assert health.status()[0] == "healthy"
    errors.handle(NotCoordinatorForGroupError(), Phase.MERGE)
    assert health.status()[0] == "degraded"
    assert "restarting from the committed offsets" in health.status()[1]


def test_offsets_that_cannot_be_read_stop_with_one_line_naming_them_and_the_way_past() -> None:
    decision = decide(UnreadableRecords("clicks", 3, 1200, 1250, "Invalid CRC"), Phase.MERGE, ALO, SINGLE)
    assert "\n" not in decision.message
    assert decision.message == (
        "cannot read clicks[3] at offsets 1200-1249: Invalid CRC; stopping (errors.tolerance=none; "
        "errors.tolerance=all sends such offsets to the dead letter queue; or, with every replica "
        "stopped: timesync-sidecar offsets reset --partition clicks:3 --to-offset 1250)"
    )
