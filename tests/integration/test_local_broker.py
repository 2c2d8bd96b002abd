"""The local launcher: a restart with --data-dir keeps the data and the port; a slow start is reported."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from sidecar.kafka.admin import TopicSpec
from testkit.kafka_io import create_topics, produce, read_topics
from testkit.workloads import Event
from tests.unit.test_local_kafka_launcher import run_launcher

pytestmark = [pytest.mark.broker, pytest.mark.slow]


async def test_restart_with_data_dir_keeps_data_and_port(tmp_path: Path) -> None:
    state, data = str(tmp_path / "state.json"), str(tmp_path / "data")
    started = run_launcher("--state", state, "start", "--data-dir", data)
    assert started.returncode == 0, started.stderr
    bootstrap = started.stdout.strip()
    try:
        await create_topics(bootstrap, [TopicSpec("kept")])
        await produce(bootstrap, [Event("kept", 0, 5, b"k", b"v", 0)])
        assert run_launcher("--state", state, "stop").returncode == 0
        assert run_launcher("--state", state, "status").returncode == 1

        t0 = time.monotonic()
        again = run_launcher("--state", state, "start", "--data-dir", data)
        print(f"restart took {time.monotonic() - t0:.1f} s")
        assert again.returncode == 0, again.stderr
        assert again.stdout.strip() == bootstrap, "a kept data dir keeps its port"
        records = await read_topics(bootstrap, ["kept"], expected=1, timeout_s=30)
        assert [(r.timestamp, r.value) for r in records] == [(5, b"v")]
    finally:
        run_launcher("--state", state, "stop")
    assert Path(data).exists(), "a given data dir is never removed"


def test_broker_that_does_not_come_up_in_time_fails_with_its_log(tmp_path: Path) -> None:
    done = run_launcher(
        "--state",
        str(tmp_path / "s.json"),
        "start",
        "--timeout",
        "0.5",
        "--log-file",
        str(tmp_path / "b.log"),
    )
    assert done.returncode == 1
    first = done.stderr.splitlines()[0]
    assert "did not answer" in first
    assert "within 0.5 s" in first
    assert not (tmp_path / "s.json").exists()
