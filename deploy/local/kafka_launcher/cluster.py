"""A local cluster of combined KRaft nodes (``start --nodes 3``), for the fault tests.

Three combined (broker + controller) nodes rather than one controller and three brokers: the
controller quorum then has three voters too, so any one node may stop or crash and the cluster
still elects leaders and fences the missing broker — as in production, where the controllers
are never a single point of failure. It is also one JVM fewer on a small machine.

Each node has its own client and controller port and its own folder ``node-<id>`` under the
cluster's data dir, where ``CLUSTER_FILE_NAME`` records the cluster id and the ports: a kept data
dir brings the same cluster back.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .configuration import (
    CLUSTER_HEAP,
    CLUSTER_REPLICATION,
    cluster_id,
    format_command,
    log4j2,
    server_properties,
)
from .install import START_TIMEOUT_S, STOP_TIMEOUT_S, LauncherError, ensure_jars, java
from .network import assign_ports, broker_answers, check_port_free
from .processes import jvm, log_tail, pid_alive, spawn, terminate

CLUSTER_FILE_NAME = "timesync-cluster.json"  # inside a cluster's data dir: its id and ports


@dataclasses.dataclass
class Node:
    """One node of a local cluster; ``pid`` is ``None`` while it is stopped."""

    node_id: int
    port: int
    controller_port: int
    data_dir: str
    log_file: str
    pid: int | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def alive(self) -> bool:
        return self.pid is not None and pid_alive(self.pid)


@dataclasses.dataclass
class Cluster:
    """A running local cluster of combined KRaft nodes (``start_cluster``).

    Any node may be stopped (``stop_node``: SIGTERM, Kafka's controlled shutdown moves its
    leaders away first), killed (``kill_node``: SIGKILL, a crash) and started again
    (``start_node``) on its own data dir and ports. ``stop()`` ends them all and, if the data was
    temporary, removes it.
    """

    nodes: list[Node]
    data_dir: str
    temporary: bool
    die_with_parent: bool = False

    @property
    def bootstrap(self) -> str:
        """Every node's address, comma-separated: clients find the cluster through any live one."""
        return ",".join(node.bootstrap for node in self.nodes)

    def node(self, node_id: int) -> Node:
        for node in self.nodes:
            if node.node_id == node_id:
                return node
        ids = ", ".join(str(n.node_id) for n in self.nodes)
        raise LauncherError(f"the cluster has no node {node_id} (its nodes: {ids})")

    def alive(self) -> bool:
        return any(node.alive() for node in self.nodes)

    def stop_node(self, node_id: int, timeout_s: float = STOP_TIMEOUT_S) -> None:
        """A clean stop (SIGTERM; SIGKILL after ``timeout_s``); the node's data stays."""
        self.stop_nodes([node_id], timeout_s)

    def kill_node(self, node_id: int) -> None:
        """``kill -9``: the node crashes; its data stays."""
        self.stop_nodes([node_id], 0.0)

    def stop_nodes(self, node_ids: Sequence[int], timeout_s: float = STOP_TIMEOUT_S) -> None:
        """Signal the nodes together, then wait for each (SIGKILL past ``timeout_s``; 0: at once).

        Together, because the last node of a cluster stopped one at a time has no controller
        quorum left to acknowledge its controlled shutdown, and would wait out ``timeout_s``.
        """
        nodes = [self.node(i) for i in node_ids]
        for node in nodes:
            if node.alive():
                assert node.pid is not None
                with contextlib.suppress(ProcessLookupError):
                    os.kill(node.pid, signal.SIGTERM if timeout_s > 0 else signal.SIGKILL)
        for node in nodes:
            if node.pid is not None:
                terminate(node.pid, timeout_s)
            node.pid = None

    def start_node(self, node_id: int, timeout_s: float = START_TIMEOUT_S) -> None:
        """Start a stopped node again; return once it serves and the cluster counts it live."""
        self.start_nodes([node_id], timeout_s)

    def start_nodes(self, node_ids: Sequence[int], timeout_s: float = START_TIMEOUT_S) -> None:
        for node_id in node_ids:
            self.spawn_node(node_id)
        self.wait_ready(node_ids, timeout_s)

    def spawn_node(self, node_id: int) -> None:
        """Start a stopped node's process and return at once (``wait_ready`` waits for it).

        Split from the wait so that an asyncio test spawns from its own thread and waits in
        another: with ``die_with_parent`` the kernel signals the broker when the *thread* that
        spawned it ends, and asyncio's worker threads end with the event loop.
        """
        node = self.node(node_id)
        if node.alive():
            raise LauncherError(f"node {node_id} is already running (pid {node.pid})")
        for port in (node.port, node.controller_port):
            check_port_free(port)
        node.pid = spawn(Path(node.data_dir), Path(node.log_file), CLUSTER_HEAP, self.die_with_parent)

    def wait_ready(self, node_ids: Sequence[int], timeout_s: float = START_TIMEOUT_S) -> None:
        """Until each node serves and its metadata lists every running node (it has registered
        and is not fenced); fails with the node's log if it exits or ``timeout_s`` passes."""
        deadline = time.monotonic() + timeout_s
        nodes = [self.node(i) for i in node_ids]
        while True:
            running = sum(1 for n in self.nodes if n.alive())
            pending = [n for n in nodes if not broker_answers(n.port, brokers=running)]
            if not pending:
                return
            for node in pending:
                if not node.alive():
                    raise LauncherError(
                        f"Kafka node {node.node_id} exited while starting; log {node.log_file}:\n"
                        f"{log_tail(node.log_file)}"
                    )
            if time.monotonic() > deadline:
                node = pending[0]
                raise LauncherError(
                    f"Kafka node {node.node_id} did not serve on {node.bootstrap} with {running} "
                    f"nodes registered within {timeout_s:g} s; log {node.log_file}:\n"
                    f"{log_tail(node.log_file)}"
                )
            time.sleep(0.2)

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> None:
        """Stop every node, then remove the data if it was temporary."""
        self.stop_nodes([n.node_id for n in self.nodes], timeout_s)
        if self.temporary:
            shutil.rmtree(self.data_dir, ignore_errors=True)


def start_cluster(
    nodes: int = 3,
    data_dir: str | Path | None = None,
    overrides: Mapping[str, str] | None = None,
    timeout_s: float = START_TIMEOUT_S,
    die_with_parent: bool = False,
) -> Cluster:
    """Start ``nodes`` combined KRaft nodes on 127.0.0.1; return once each serves and the
    cluster lists them all.

    Each node has its own client and controller port and its own folder ``node-<id>`` under
    ``data_dir`` (a temporary folder if not given, removed by ``Cluster.stop``). A kept
    ``data_dir`` keeps the cluster id and the ports, so starting it again brings the same cluster
    back. With three nodes or more, topics get replication 3 and ``min.insync.replicas=2`` by
    default (below three, 1 and 1).
    """
    if nodes < 1:
        raise LauncherError(f"--nodes must be at least 1, got {nodes}")
    java_bin = java()
    temporary = data_dir is None
    root = Path(tempfile.mkdtemp(prefix="timesync-kafka-")) if data_dir is None else Path(data_dir).resolve()
    root.mkdir(parents=True, exist_ok=True)
    cluster: Cluster | None = None
    try:
        layout = _layout(root, nodes)
        jars = ensure_jars()
        members = _prepare_nodes(root, layout, overrides or {}, replicated=nodes >= CLUSTER_REPLICATION)
        _format_nodes(java_bin, jars, root, layout)
        (root / CLUSTER_FILE_NAME).write_text(json.dumps(layout))
        cluster = Cluster(members, str(root), temporary, die_with_parent)
        cluster.start_nodes([n.node_id for n in members], timeout_s)
        return cluster
    except BaseException:
        if cluster is not None:
            cluster.stop_nodes([n.node_id for n in cluster.nodes], 5.0)
        if temporary:
            shutil.rmtree(root, ignore_errors=True)
        raise


def _layout(root: Path, nodes: int) -> dict[str, Any]:
    """The cluster id and each node's ports: the ones a kept data dir recorded, else new ones."""
    layout_file = root / CLUSTER_FILE_NAME
    if layout_file.exists():
        layout: dict[str, Any] = json.loads(layout_file.read_text())
        if len(layout["nodes"]) != nodes:
            raise LauncherError(
                f"data dir {root} holds a cluster of {len(layout['nodes'])} nodes, not {nodes}"
            )
        return layout
    ports = assign_ports({f"{kind}{i}": None for i in range(1, nodes + 1) for kind in ("c", "p")}, {})
    return {
        "cluster_id": cluster_id(),
        "nodes": [
            {"node_id": i, "port": ports[f"p{i}"], "controller_port": ports[f"c{i}"]}
            for i in range(1, nodes + 1)
        ],
    }


def _prepare_nodes(
    root: Path, layout: Mapping[str, Any], overrides: Mapping[str, str], replicated: bool
) -> list[Node]:
    """Each node's folder, ``server.properties`` and log configuration."""
    voters = ",".join(f"{n['node_id']}@127.0.0.1:{n['controller_port']}" for n in layout["nodes"])
    members = []
    for spec in layout["nodes"]:
        node_dir = root / f"node-{spec['node_id']}"
        node_dir.mkdir(exist_ok=True)
        log = node_dir / "server.log"
        (node_dir / "server.properties").write_text(
            server_properties(
                spec["port"],
                spec["controller_port"],
                node_dir,
                overrides,
                node_id=spec["node_id"],
                voters=voters,
                replicated=replicated,
            )
        )
        (node_dir / "log4j2.yaml").write_text(log4j2(log))
        members.append(Node(spec["node_id"], spec["port"], spec["controller_port"], str(node_dir), str(log)))
    return members


def _format_nodes(java_bin: str, jars: Path, root: Path, layout: Mapping[str, Any]) -> None:
    """Format the storage of every node not formatted yet, side by side (each is a JVM start)."""
    formats = []
    for spec in layout["nodes"]:
        node_dir = root / f"node-{spec['node_id']}"
        if (node_dir / "log" / "meta.properties").exists():
            continue
        command = jvm(java_bin, jars, node_dir / "log4j2.yaml", CLUSTER_HEAP)
        cmd = format_command(command, layout["cluster_id"], node_dir / "server.properties")
        formats.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    for fmt in formats:
        output, _ = fmt.communicate()
        if fmt.returncode != 0:
            raise LauncherError(f"formatting KRaft storage failed (exit {fmt.returncode}): {output[-2000:]}")
