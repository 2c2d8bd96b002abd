"""Sizes of the fault runs, and a broker of the test's own that it may stop and restart.

``make test`` runs the fault tests small, to stay inside the suite's time budget;
``make test-chaos`` (``FAULTS_SIZE=full``) runs them at the size the issue asks for: 200,000
records and 10 or more kills. Each test prints its figures and a row of the report's table
(``fault | runs | records | lost | duplicates``).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from testkit.local_broker import load_launcher

SIZE_ENV = "FAULTS_SIZE"


@dataclass(frozen=True)
class Size:
    name: str
    #: Records and kill -9 restarts of the crash runs (at-least-once and exactly-once).
    crash_records: int
    kills: int
    #: Records of the broker-restart and slow-output runs.
    records: int
    #: Records on the Spark job's ordered topic.
    spark_records: int
    #: Seconds the broker stays away in the broker-restart run (at least until /healthz says degraded).
    outage_s: float


SIZES = {
    "small": Size("small", crash_records=40_000, kills=5, records=30_000, spark_records=3_000, outage_s=0),
    "full": Size("full", crash_records=200_000, kills=12, records=200_000, spark_records=20_000, outage_s=50),
}


@pytest.fixture(scope="session")
def size() -> Size:
    name = os.environ.get(SIZE_ENV, "small")
    if name not in SIZES:
        raise pytest.UsageError(f"{SIZE_ENV}={name!r}: use one of {', '.join(SIZES)}")
    return SIZES[name]


@pytest.fixture(autouse=True)
def quiet_aiokafka() -> Iterator[None]:
    """The tests' own clients retry through the faults; aiokafka logs every refused connection."""
    logger = logging.getLogger("aiokafka")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    yield
    logger.setLevel(level)


@pytest.fixture(scope="module")
def own_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RestartableBroker]:
    """A local broker with a kept data dir, so a test can stop it and start it again in place.

    One per test module (a start costs 10-15 s); it is stopped at the end whatever happened.
    """
    handle = RestartableBroker(tmp_path_factory.mktemp("kafka"))
    try:
        yield handle
    finally:
        handle.stop()


class RestartableBroker:
    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.launcher = load_launcher()
        self.broker = self.launcher.start_broker(data_dir=data_dir, die_with_parent=True)
        self.bootstrap: str = self.broker.bootstrap

    def stop(self) -> None:
        self.broker.stop()

    def start(self) -> None:
        """Start again on the same data dir: same ports, same topics, same committed offsets."""
        self.broker = self.launcher.start_broker(data_dir=self.data_dir, die_with_parent=True)
        assert self.broker.bootstrap == self.bootstrap
