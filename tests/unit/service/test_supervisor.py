"""The run state and the supervisor: one value, first outcome wins except a failure, restarts bounded."""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar

import pytest

from sidecar.config import load_config
from sidecar.service.run_state import (
    MAX_RESTARTS,
    Failed,
    FatalError,
    Restarting,
    RunControl,
    Running,
    Stopping,
)
from sidecar.service.supervisor import Supervisor


def control() -> RunControl:
    return RunControl(asyncio.Event())


def test_a_run_starts_running() -> None:
    assert control().state == Running()


def test_a_stop_from_running_stops_and_sets_the_process_wide_request() -> None:
    c = control()
    c.stop()
    assert c.state == Stopping()
    assert c.stop_requested.is_set()
    assert c.changed.is_set()


def test_a_restart_while_stopping_wins_because_the_clients_died_while_draining() -> None:
    c = control()
    c.stop()
    c.restart("producer gone")
    assert c.state == Restarting("producer gone")


def test_a_stop_while_restarting_keeps_the_restart_but_is_remembered() -> None:
    c = control()
    c.restart("producer gone")
    c.stop()
    assert c.state == Restarting("producer gone")
    assert c.stop_requested.is_set()


def test_a_failure_wins_over_anything_and_the_first_one_is_told() -> None:
    c = control()
    c.restart("producer gone")
    first = c.fail("first")
    c.fail("second")
    c.stop()
    c.restart("again")
    assert c.state == Failed(first)
    assert str(first) == "first"


def test_a_new_run_after_a_stop_request_starts_stopping() -> None:
    requested = asyncio.Event()
    requested.set()
    assert RunControl(requested).state == Stopping()


class ScriptedPipeline:
    """A pipeline whose runs end as scripted: each entry is ("restart", committed?) or "stop"."""

    script: ClassVar[list[Any]] = []
    starts: ClassVar[list[bool]] = []

    def __init__(self, config: Any, *, control: RunControl, restarting: bool, **_: Any) -> None:
        self.control = control
        self.committed_any = False
        ScriptedPipeline.starts.append(restarting)

    async def run(self) -> None:
        step = ScriptedPipeline.script.pop(0)
        if step == "stop":
            self.control.stop()
        elif step == "fail":
            self.control.fail("boom")
        else:
            _, self.committed_any = step
            self.control.restart("producer gone")

    def status(self) -> dict[str, Any]:
        return {}


class Ticks:
    """A monotonic clock that moves ``step_s`` each time it is read."""

    def __init__(self, step_s: float) -> None:
        self.now = 0.0
        self.step_s = step_s

    def __call__(self) -> float:
        self.now += self.step_s
        return self.now


def supervisor(script: list[Any], step_s: float = 1.0, bound: str = "120000") -> Supervisor:
    ScriptedPipeline.script = list(script)
    ScriptedPipeline.starts = []
    keys = ["bootstrap.servers=b:9092", "input.topics=a", "output.topic=o", f"delivery.timeout.ms={bound}"]
    cfg = load_config(None, keys, environ={})
    return Supervisor(cfg, pipeline_factory=ScriptedPipeline, backoff_s=0, clock=Ticks(step_s))  # type: ignore[arg-type]


async def test_restarts_go_on_while_something_commits_in_between() -> None:
    s = supervisor([("restart", True)] * (MAX_RESTARTS + 3) + ["stop"])
    await s.run()
    assert s.restarts == MAX_RESTARTS + 3
    assert ScriptedPipeline.starts == [False] + [True] * (MAX_RESTARTS + 3)


async def test_restarts_that_keep_failing_with_nothing_committed_give_up_past_the_users_bound() -> None:
    # One restart every 30 s: the 120 s bound is passed at the fifth, the count at the sixth.
    s = supervisor([("restart", False)] * (MAX_RESTARTS + 1), step_s=30)
    with pytest.raises(FatalError, match=r"gave up after 5 restarts in \d+ s with nothing committed"):
        await s.run()
    assert s.health.status()[0] == "unhealthy"


async def test_restarts_within_the_users_bound_go_on_however_many() -> None:
    # An outage ridden out by restarts every second: 60 of them are still within 120 s.
    s = supervisor([("restart", False)] * 60 + ["stop"], step_s=1)
    await s.run()
    assert s.restarts == 60


async def test_with_delivery_timeout_max_restarts_never_give_up() -> None:
    s = supervisor([("restart", False)] * 30 + ["stop"], step_s=3600, bound="max")
    await s.run()
    assert s.restarts == 30


async def test_a_failed_run_raises_its_error() -> None:
    with pytest.raises(FatalError, match="boom"):
        await supervisor(["fail"]).run()


async def test_a_stop_requested_during_a_restart_ends_the_process_cleanly() -> None:
    s = supervisor([("restart", True), "stop"])
    s.stop_requested.set()
    await s.run()
    assert s.restarts == 0
