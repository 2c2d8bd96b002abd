"""Sizes of the fault runs, and a broker of the test's own that it may stop and restart.

``make test`` runs the fault tests small, to stay inside the suite's time budget;
``make test-chaos`` (``FAULTS_SIZE=full``) runs them at the size the issue asks for: 200,000
records, 10 or more kills, nodes away for seconds and outages of 5-60 s. Each test prints its
figures and a row of the report's table (``fault | runs | records | lost | duplicates``).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
    #: Records of each run on the three-node cluster and of the outage runs, written over
    #: ``cluster_write_s`` so that input is still arriving while the faults play.
    cluster_records: int
    cluster_write_s: float
    #: Seconds a node stays away in a rolling restart or after its kill.
    node_down_s: float
    #: Full outages per outage run, each of a length drawn from ``outage_range_s`` (and at least
    #: until every sidecar says degraded).
    outages: int
    outage_range_s: tuple[float, float]
    #: Nodes the kill -9 rolling restart kills, one after the other (none: the run is left out;
    #: the leader and coordinator kills are single kill -9s already).
    rolling_kill_nodes: tuple[int, ...]
    #: Leader and coordinator kills: 2 kills the broker serving each sidecar in turn, 1 only the
    #: first sidecar's (both sidecars ride through it either way).
    role_kills: int
    #: Whether the single-broker outage run plays (at small size ``test_broker_restart`` already
    #: plays one single-broker outage).
    single_broker_outages: bool


SIZES = {
    "small": Size(
        "small",
        crash_records=40_000,
        kills=5,
        records=30_000,
        spark_records=3_000,
        outage_s=0,
        cluster_records=20_000,
        cluster_write_s=15.0,
        node_down_s=0.0,
        outages=1,
        outage_range_s=(0.0, 0.0),
        rolling_kill_nodes=(),
        role_kills=1,
        single_broker_outages=False,
    ),
    "full": Size(
        "full",
        crash_records=200_000,
        kills=12,
        records=200_000,
        spark_records=20_000,
        outage_s=50,
        cluster_records=200_000,
        cluster_write_s=60.0,
        node_down_s=5.0,
        outages=3,
        outage_range_s=(5.0, 60.0),
        rolling_kill_nodes=(1, 2, 3),
        role_kills=2,
        single_broker_outages=True,
    ),
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


@pytest.fixture(scope="package")
def cluster3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A local cluster of three combined KRaft nodes (replication 3, ``min.insync.replicas=2``)
    whose nodes a test may stop, kill and start; one for the fault tests (a start costs 15-20 s),
    stopped after the last of them, so that its three JVMs do not idle through the rest of the
    suite. A test leaves every node running."""
    cluster = load_launcher().start_cluster(3, tmp_path_factory.mktemp("cluster"), die_with_parent=True)
    try:
        yield cluster
    finally:
        # Killed, not stopped: nothing reads its data after the last test, and three controlled
        # shutdowns cost ~6 s of the suite.
        cluster.stop(timeout_s=0.0)


@pytest.fixture(scope="module")
def single_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One combined KRaft node, the single-broker setup (replication 1), as a ``Cluster`` of one
    so that the same fault steps play against it."""
    cluster = load_launcher().start_cluster(1, tmp_path_factory.mktemp("single"), die_with_parent=True)
    try:
        yield cluster
    finally:
        cluster.stop(timeout_s=0.0)  # killed: nothing reads its data after the module


@pytest.fixture(scope="module")
def own_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RestartableBroker]:
    """A local broker with a kept data dir, so a test can stop it and start it again in place.

    One per test module (a start costs 10-15 s); it is stopped at the end whatever happened.
    """
    handle = RestartableBroker(tmp_path_factory.mktemp("kafka"))
    try:
        yield handle
    finally:
        handle.broker.kill()  # at once: nothing reads its data after the module


class RestartableBroker:
    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.launcher = load_launcher()
        self.broker = self.launcher.start_broker(
            self.launcher.BrokerSettings(data_dir=data_dir), die_with_parent=True
        )
        self.bootstrap: str = self.broker.bootstrap

    def stop(self) -> None:
        self.broker.stop()

    def start(self) -> None:
        """Start again on the same data dir: same ports, same topics, same committed offsets."""
        self.broker = self.launcher.start_broker(
            self.launcher.BrokerSettings(data_dir=self.data_dir), die_with_parent=True
        )
        assert self.broker.bootstrap == self.bootstrap
