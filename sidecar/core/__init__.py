"""The sans-I/O merge core: pure, deterministic, no asyncio, no Kafka client, no clock of its own.

Adapters feed a :class:`MergeTask` facts (records, fetch responses, acks, the current time) and
act on what it returns. See ``task.py`` for the API; each rule has a module of its own (the
layout is in ``task.py``'s docstring).
"""

from sidecar.core.config import TaskConfig
from sidecar.core.outcomes import Heartbeat, Idle, NeedFetch, Outcome, PauseHint, WaitUntil
from sidecar.core.readiness import IDLE_AUTO, IDLE_DISABLED, IDLE_FOREVER, Verdict
from sidecar.core.records import (
    CREATE_TIME,
    LOG_APPEND_TIME,
    UNKNOWN,
    DeadLetter,
    Emit,
    InputRecord,
    Late,
    Record,
    TopicPartition,
    Unreadable,
)
from sidecar.core.task import MergeTask
from sidecar.core.timestamps import (
    BrokerTimestampLimits,
    InvalidTimestampError,
    JsonTimestamp,
    RecordTimestamp,
    RefusedTimestampError,
    parse_extractor,
)

__all__ = [
    "CREATE_TIME",
    "IDLE_AUTO",
    "IDLE_DISABLED",
    "IDLE_FOREVER",
    "LOG_APPEND_TIME",
    "UNKNOWN",
    "BrokerTimestampLimits",
    "DeadLetter",
    "Emit",
    "Heartbeat",
    "Idle",
    "InputRecord",
    "InvalidTimestampError",
    "JsonTimestamp",
    "Late",
    "MergeTask",
    "NeedFetch",
    "Outcome",
    "PauseHint",
    "Record",
    "RecordTimestamp",
    "RefusedTimestampError",
    "TaskConfig",
    "TopicPartition",
    "Unreadable",
    "Verdict",
    "WaitUntil",
    "parse_extractor",
]
