"""A node's configuration: its ``server.properties``, its log configuration, its cluster id, and
the command that formats its KRaft storage.

A single broker is one combined (broker + controller) node with every internal topic at one
replica; a node of a cluster of three or more replicates 3 times with ``min.insync.replicas=2``.
"""

from __future__ import annotations

import base64
import os
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path

HEAP = os.environ.get("KAFKA_HEAP_OPTS", "-Xms256m -Xmx768m")
#: A node of the three-node cluster: three of these and a sidecar fit 2 cores and 24 GiB with
#: room to spare (the fault tests' 200,000 records need far less than the maximum).
CLUSTER_HEAP = os.environ.get("KAFKA_CLUSTER_HEAP_OPTS", "-Xms128m -Xmx512m")
CLUSTER_REPLICATION = 3
CLUSTER_MIN_ISR = 2

LOG4J2 = """\
Configuration:
  status: warn
  Appenders:
    File:
      name: file
      fileName: "{log}"
      append: true
      PatternLayout:
        pattern: "[%d] %p %m (%c)%n"
  Loggers:
    Root:
      level: INFO
      AppenderRef:
        - ref: file
    Logger:
      - name: kafka.request.logger
        level: WARN
      - name: org.apache.kafka.controller
        level: INFO
"""


def log4j2(log: Path) -> str:
    """The log configuration: INFO and up into ``log``."""
    return LOG4J2.format(log=str(log).replace("\\", "/"))


def cluster_id() -> str:
    """Kafka's cluster id format: a UUID as 22 characters of URL-safe base64.

    One in 64 such ids starts with '-', which the storage tool's argument parser takes for an
    option; draw again in that case.
    """
    while True:
        drawn = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not drawn.startswith("-"):
            return drawn


def format_command(jvm: Sequence[str], cluster: str, config: Path, extra: Sequence[str] = ()) -> list[str]:
    """The storage tool's command that formats a node's log dirs for cluster ``cluster``."""
    return [*jvm, "kafka.tools.StorageTool", "format", "-t", cluster, "-c", str(config), "-g", *extra]


SINGLE_NODE = {
    "num.partitions": "1",
    "auto.create.topics.enable": "false",
    # Single node: every internal topic has one replica, and few partitions so that the
    # first consumer group or transaction does not wait for 50 partitions to be created.
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "4",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "transaction.state.log.num.partitions": "4",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "group.initial.rebalance.delay.ms": "0",
    # Tests and benchmarks replay fixed, old event times as CreateTime; keep them.
    "log.retention.ms": "-1",
}

#: What a production cluster runs with: every partition on three brokers, and a write
#: acknowledged (acks=all) only once two of them have it, so one broker may be away.
REPLICATED = {
    "default.replication.factor": str(CLUSTER_REPLICATION),
    "min.insync.replicas": str(CLUSTER_MIN_ISR),
    "offsets.topic.replication.factor": str(CLUSTER_REPLICATION),
    "transaction.state.log.replication.factor": str(CLUSTER_REPLICATION),
    "transaction.state.log.min.isr": str(CLUSTER_MIN_ISR),
    "share.coordinator.state.topic.replication.factor": str(CLUSTER_REPLICATION),
    "share.coordinator.state.topic.min.isr": str(CLUSTER_MIN_ISR),
}


def server_properties(
    port: int,
    controller_port: int,
    data_dir: Path,
    overrides: Mapping[str, str],
    listeners: Sequence[tuple[str, str, int]] = (),
    security: Mapping[str, str] | None = None,
    node_id: int = 1,
    voters: str | None = None,
    replicated: bool = False,
) -> str:
    """``listeners`` are extra client listeners (name, security protocol, port) next to PLAINTEXT;
    ``security`` their settings. ``overrides`` win over everything.

    One node of a cluster gives its ``node_id``, the cluster's ``voters``
    (``id@127.0.0.1:port,...``) and ``replicated=True``: replication 3 and ``min.insync.replicas=2``
    for the cluster's topics and its internal ones, where a single node has 1 and 1."""
    client = [("PLAINTEXT", "PLAINTEXT", port), *listeners]
    advertised = ",".join(f"{name}://127.0.0.1:{p}" for name, _, p in client)
    props = {
        "process.roles": "broker,controller",
        "node.id": str(node_id),
        "controller.quorum.voters": voters or f"{node_id}@127.0.0.1:{controller_port}",
        "listeners": f"{advertised},CONTROLLER://127.0.0.1:{controller_port}",
        "advertised.listeners": advertised,
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": ",".join(
            [*(f"{name}:{protocol}" for name, protocol, _ in client), "CONTROLLER:PLAINTEXT"]
        ),
        "log.dirs": str(data_dir / "log"),
        **SINGLE_NODE,
    }
    if replicated:
        props |= REPLICATED
    props.update(security or {})
    props.update(overrides)
    return "".join(f"{k}={v}\n" for k, v in props.items())
