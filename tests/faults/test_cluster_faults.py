"""What a three-broker cluster does every week, under running sidecars: leaders move, brokers
restart one at a time or crash, the whole cluster goes away and comes back; and the local
launcher's command line does the same to a node of it.

Each test runs two sidecars side by side, one per ``processing.guarantee``, each on its own
topics (replication 3, ``min.insync.replicas=2``) with a live writer, and plays its faults
while input arrives. Each asserts what the issue asks: no input lost; under ``exactly_once_v2``
a ``read_committed`` reader sees each input once; the sidecar never exits (it is watched every
0.25 s, and must exit 0 on the final SIGTERM); after every fault ``/healthz`` is healthy again
and the output moves. It prints, per fault and sidecar, whether health went degraded, the time
from the cluster being whole again to the sidecar being healthy with its output moving, and the
longest the output stood still.

Health goes degraded when the sidecar hears nothing from Kafka for 10 s or restarts its clients
(``sidecar/service/health.py``). One broker of three away is not silence — the other two answer
and take over its leaders within Kafka's broker session timeout — so those tests assert that the
sidecar stays served (healthy at the end of each fault, never unhealthy) and print whether it
went degraded; the full outages assert degraded during every outage.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sidecar.kafka.admin import TopicSpec
from testkit.kafka_io import create_topics, produce, read_topics
from testkit.local_broker import load_launcher
from testkit.workloads import Event
from tests.unit.test_local_kafka_launcher import run_launcher

from .conftest import Size
from .scenario import failures, play
from .steps import full_outages, kill_group_coordinator, kill_output_leader, rolling_restart

pytestmark = [pytest.mark.broker, pytest.mark.slow, pytest.mark.timeout(1500)]

REPLICATION = 3


async def survives(
    cluster3: Any,
    name: str,
    steps: Any,
    topic_name: Callable[[str], str],
    tmp_path: Path,
    size: Size,
    degraded_each: bool = False,
) -> list[str]:
    """Play ``steps`` on the three-node cluster under both guarantees; what went wrong (none)."""
    outcome = await play(
        cluster3, name, steps, topic_name, tmp_path, size.cluster_records, size.cluster_write_s, REPLICATION
    )
    return failures(outcome, degraded_each=degraded_each)


async def test_rolling_restart_of_all_three_brokers_clean_stop(
    cluster3: Any, topic_name: Callable[[str], str], tmp_path: Path, size: Size
) -> None:
    steps = rolling_restart([1, 2, 3], size.node_down_s, kill=False)
    assert await survives(cluster3, "rolling restart (stop)", steps, topic_name, tmp_path, size) == []


async def test_rolling_restart_of_all_three_brokers_kill_9(
    cluster3: Any, topic_name: Callable[[str], str], tmp_path: Path, size: Size
) -> None:
    if not size.rolling_kill_nodes:
        pytest.skip("FAULTS_SIZE=full only: at small size the leader and coordinator runs kill -9 a broker")
    steps = rolling_restart(list(size.rolling_kill_nodes), size.node_down_s, kill=True)
    assert await survives(cluster3, "rolling restart (kill -9)", steps, topic_name, tmp_path, size) == []


async def test_output_partition_leader_killed_mid_write(
    cluster3: Any, topic_name: Callable[[str], str], tmp_path: Path, size: Size
) -> None:
    assert (
        await survives(
            cluster3,
            "output leader kill -9",
            kill_output_leader(size.node_down_s, size.role_kills),
            topic_name,
            tmp_path,
            size,
        )
        == []
    )


async def test_group_coordinator_broker_killed(
    cluster3: Any, topic_name: Callable[[str], str], tmp_path: Path, size: Size
) -> None:
    assert (
        await survives(
            cluster3,
            "group coordinator kill -9",
            kill_group_coordinator(size.node_down_s, size.role_kills),
            topic_name,
            tmp_path,
            size,
        )
        == []
    )


async def test_full_outages_of_the_three_broker_cluster(
    cluster3: Any, topic_name: Callable[[str], str], tmp_path: Path, size: Size
) -> None:
    steps, seed = full_outages(size.outages, size.outage_range_s, replicated=True)
    print(f"\noutage lengths drawn with FAULTS_SEED={seed}")
    assert (
        await survives(
            cluster3, "full outages (3 brokers)", steps, topic_name, tmp_path, size, degraded_each=True
        )
        == []
    )


async def test_the_launchers_command_line_stops_kills_and_starts_nodes_of_a_running_cluster(
    cluster3: Any, topic_name: Callable[[str], str], tmp_path: Path
) -> None:
    """``kafka.py stop|kill|start --node ID`` and ``status`` on the cluster ``start --nodes 3``
    recorded: a record written with acks=all while node 2 is stopped and node 3 is killed in turn
    is readable, and every node comes back on its own port. (The package's cluster, recorded as
    ``start --nodes`` records it; the nodes the command line restarts are handed back to it.)"""
    launcher = load_launcher()
    state = tmp_path / "state.json"
    # Nodes the command line starts must outlive it: not tied to the process that spawned them.
    launcher._save_cluster(state, dataclasses.replace(cluster3, die_with_parent=False))
    topic = topic_name("replicated")
    try:
        await create_topics(cluster3.bootstrap, [TopicSpec(topic, replication=REPLICATION)])
        assert run_launcher("--state", str(state), "stop", "--node", "2").returncode == 0
        await produce(cluster3.bootstrap, [Event(topic, 0, 1, b"k", b"one", 0)])
        started = run_launcher("--state", str(state), "start", "--node", "2")
        assert started.returncode == 0, started.stderr
        assert run_launcher("--state", str(state), "kill", "--node", "3").returncode == 0
        status = run_launcher("--state", str(state), "status")
        assert status.returncode == 0
        assert status.stdout.splitlines()[0] == cluster3.bootstrap
        assert [line.split()[-1] for line in status.stdout.splitlines()[1:]] == ["up", "up", "down"]
        await produce(cluster3.bootstrap, [Event(topic, 0, 2, b"k", b"two", 0)])
        started = run_launcher("--state", str(state), "start", "--node", "3")
        assert started.returncode == 0, started.stderr
        records = await read_topics(cluster3.bootstrap, [topic], expected=2, timeout_s=30)
        assert [r.value for r in records] == [b"one", b"two"]
    finally:
        recorded = launcher._load_cluster(state)
        for node in cluster3.nodes:
            node.pid = recorded.node(node.node_id).pid if recorded else node.pid
            if not node.alive():  # spawned from this thread: the nodes die with their spawner's
                cluster3.spawn_node(node.node_id)
                await asyncio.to_thread(cluster3.wait_ready, [node.node_id])
