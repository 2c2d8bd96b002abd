#!/usr/bin/env python3
"""Run a real single-node Apache Kafka (KRaft, combined broker + controller) from Maven jars.

The demo, the tests and the benchmark all need a broker that behaves exactly like production
Kafka (LogAppendTime, idempotent and transactional producers, consumer groups), on a machine
without a Docker engine. This launcher starts one from the jars that
``mvn -f deploy/local/pom.xml dependency:copy-dependencies`` puts in ``.cache/jars/broker``.

Standard library only, so it runs before any virtualenv exists.

    python deploy/local/kafka.py start [--port N] [--data-dir DIR] [--override k=v ...]
                                       [--scram-user NAME=PASSWORD ...]
                                       [--ssl-cafile CA --ssl-certfile CERT --ssl-keyfile KEY]
    python deploy/local/kafka.py status
    python deploy/local/kafka.py stop

    python deploy/local/kafka.py start --nodes 3 [--data-dir DIR] [--override k=v ...]
    python deploy/local/kafka.py stop --node ID | start --node ID | kill --node ID

``start --nodes 3`` starts a cluster of three combined (broker + controller) KRaft nodes, each
with its own ports and ``node-<id>`` data folder, topics replicated 3 times with
``min.insync.replicas=2``; it prints every node's address on one line (the bootstrap), then
``node ID ADDRESS up|down`` per node. One node at a time can then be stopped cleanly, killed
(SIGKILL) and started again; ``stop`` without ``--node`` ends the cluster.

``start`` prints the bootstrap address (``127.0.0.1:PORT``) once the broker answers a metadata
request. Without ``--data-dir`` the data lives in a temporary folder that ``stop`` removes; with
it, the data and the ports survive a stop, so a restart brings back the same broker (the
reliability tests restart a broker under a running sidecar this way).

Secure listeners are opt-in, each on its own free 127.0.0.1 port, next to the PLAINTEXT one
(which stays, as do the PLAINTEXT inter-broker and controller listeners):

- ``--scram-user`` (repeatable) adds a ``SASL_PLAINTEXT`` listener with SCRAM-SHA-512 and
  SCRAM-SHA-256; the users are written into the metadata log when storage is first formatted.
- ``--ssl-*`` adds an ``SSL`` listener (client certificates optional, verified when sent) and an
  ``MTLS`` listener (also protocol SSL, client certificate required), from PEM files.

``start`` then prints one more line per listener, ``NAME 127.0.0.1:PORT``, after the bootstrap.

Importable: ``start_broker(BrokerSettings(...))`` returns a :class:`Broker` whose ``stop()``
ends it; ``start_cluster(3, ...)`` a :class:`Cluster` with ``stop_node``/``kill_node``/
``start_node``. This file is the command line and the names callers import; the launcher itself
is the package beside it, ``kafka_launcher/`` (its ``__init__`` lists the modules).
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType


def _load_package() -> ModuleType:
    """The package beside this file, loaded by its path as ``timesync_kafka_launcher``.

    This file runs as a script (``python deploy/local/kafka.py``) and is imported by path
    (``testkit.local_broker``), so the package is on no import path; putting ``deploy/local`` on
    ``sys.path`` instead would make this file shadow any module named ``kafka``.
    """
    name = "timesync_kafka_launcher"
    if name in sys.modules:
        return sys.modules[name]
    folder = Path(__file__).resolve().parent / "kafka_launcher"
    spec = importlib.util.spec_from_file_location(
        name, folder / "__init__.py", submodule_search_locations=[str(folder)]
    )
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {folder}")
    package = importlib.util.module_from_spec(spec)
    sys.modules[name] = package
    spec.loader.exec_module(package)
    return package


_load_package()

# The names callers import from this file (the tests, testkit, the benchmark).
from timesync_kafka_launcher import install  # noqa: E402
from timesync_kafka_launcher.arguments import build_parser, overrides_arg, scram_users_arg, ssl_arg  # noqa: E402
from timesync_kafka_launcher.broker import PORT_FILE_NAME, Broker, BrokerSettings, start_broker  # noqa: E402
from timesync_kafka_launcher.cluster import CLUSTER_FILE_NAME, Cluster, Node, start_cluster  # noqa: E402
from timesync_kafka_launcher.configuration import (  # noqa: E402
    CLUSTER_HEAP,
    CLUSTER_MIN_ISR,
    CLUSTER_REPLICATION,
    HEAP,
    cluster_id,
    server_properties,
)
from timesync_kafka_launcher.install import (  # noqa: E402
    JARS,
    POM,
    REPO,
    RUN_DIR,
    START_TIMEOUT_S,
    STATE_FILE,
    STOP_TIMEOUT_S,
    LauncherError,
    ensure_jars,
)
from timesync_kafka_launcher.network import broker_answers, free_port  # noqa: E402
from timesync_kafka_launcher.processes import log_tail, pid_alive, zombie  # noqa: E402
from timesync_kafka_launcher.security import SCRAM_FILE_NAME, SCRAM_MECHANISMS, SslFiles  # noqa: E402

__all__ = [
    "CLUSTER_FILE_NAME",
    "CLUSTER_HEAP",
    "CLUSTER_MIN_ISR",
    "CLUSTER_REPLICATION",
    "HEAP",
    "JARS",
    "POM",
    "PORT_FILE_NAME",
    "REPO",
    "RUN_DIR",
    "SCRAM_FILE_NAME",
    "SCRAM_MECHANISMS",
    "START_TIMEOUT_S",
    "STATE_FILE",
    "STOP_TIMEOUT_S",
    "Broker",
    "BrokerSettings",
    "Cluster",
    "LauncherError",
    "Node",
    "SslFiles",
    "broker_answers",
    "cluster_id",
    "ensure_jars",
    "free_port",
    "install",
    "log_tail",
    "main",
    "pid_alive",
    "server_properties",
    "start_broker",
    "start_cluster",
    "zombie",
]


# -- the state file: what `start` recorded for `stop`, `status` and the node commands -----------


def _load_state(state_file: Path) -> Broker | None:
    try:
        return Broker(**json.loads(state_file.read_text()))
    except (OSError, ValueError, TypeError):
        return None


def _load_cluster(state_file: Path) -> Cluster | None:
    """The cluster ``start --nodes N`` recorded (``None`` if the state is a single broker's)."""
    try:
        recorded = json.loads(state_file.read_text())["cluster"]
        nodes = [Node(**node) for node in recorded.pop("nodes")]
        return Cluster(nodes, **recorded)
    except (OSError, ValueError, TypeError, KeyError):
        return None


def _save_cluster(state_file: Path, cluster: Cluster) -> None:
    state_file.parent.mkdir(parents=True, exist_ok=True)
    state_file.write_text(json.dumps({"cluster": dataclasses.asdict(cluster)}))


def _print_cluster(cluster: Cluster) -> None:
    """The bootstrap (every node) alone on the first line, then ``node ID ADDRESS up|down``."""
    print(cluster.bootstrap)
    for node in cluster.nodes:
        print(f"node {node.node_id} {node.bootstrap} {'up' if node.alive() else 'down'}")


def _cluster_command(args: argparse.Namespace) -> int:
    """``stop``/``start``/``kill --node ID`` on the recorded cluster; ``stop`` without a node."""
    cluster = _load_cluster(args.state)
    if cluster is None:
        if args.command == "stop" and args.node is None:
            return -1  # not a cluster: the single broker's stop
        raise LauncherError(f"no cluster recorded in {args.state}: run 'kafka.py start --nodes 3' first")
    if args.node is None:  # stop the whole cluster
        cluster.stop()
        args.state.unlink(missing_ok=True)
        print(f"kafka: stopped the cluster ({len(cluster.nodes)} nodes)", file=sys.stderr)
        return 0
    node = cluster.node(args.node)
    if args.command == "start":
        cluster.start_node(args.node, args.timeout)
        print(f"kafka: node {args.node} up on {node.bootstrap} (pid {node.pid})", file=sys.stderr)
    elif args.command == "stop":
        cluster.stop_node(args.node)
        print(f"kafka: node {args.node} stopped", file=sys.stderr)
    else:
        cluster.kill_node(args.node)
        print(f"kafka: node {args.node} killed (SIGKILL)", file=sys.stderr)
    _save_cluster(args.state, cluster)
    return 0


def _print_listeners(broker: Broker) -> None:
    """The bootstrap alone on the first line (scripts read it), then ``NAME ADDRESS`` per extra listener."""
    print(broker.bootstrap)
    for name, address in broker.listeners().items():
        if name != "PLAINTEXT":
            print(f"{name} {address}")


# -- the command line ----------------------------------------------------------------------------


def _start_cluster_command(args: argparse.Namespace) -> int:
    """``start --nodes N``: a new cluster, recorded; its addresses on stdout."""
    running_cluster = _load_cluster(args.state)
    if _load_state(args.state) or (running_cluster and running_cluster.alive()):
        raise LauncherError("a broker or cluster started from here is running; run 'kafka.py stop' first")
    if args.port or args.scram_user or ssl_arg(args):
        raise LauncherError("--nodes takes no --port, --scram-user or --ssl-* (the cluster is PLAINTEXT)")
    t0 = time.monotonic()
    cluster = start_cluster(args.nodes, args.data_dir, overrides_arg(args.override), args.timeout)
    _save_cluster(args.state, cluster)
    _print_cluster(cluster)
    print(f"kafka: {args.nodes} nodes up in {time.monotonic() - t0:.1f} s", file=sys.stderr)
    return 0


def _start_command(args: argparse.Namespace) -> int:
    """``start``: one broker, recorded; its addresses on stdout."""
    if (recorded := _load_cluster(args.state)) and recorded.alive():
        raise LauncherError("a cluster started from here is running; run 'kafka.py stop' first")
    running = _load_state(args.state)
    if running and running.alive():
        raise LauncherError(
            f"a broker started from here is already running on {running.bootstrap} "
            f"(pid {running.pid}); run 'kafka.py stop' first"
        )
    settings = BrokerSettings(
        port=args.port,
        data_dir=args.data_dir,
        log_file=args.log_file or RUN_DIR / "broker.log",
        overrides=overrides_arg(args.override),
        scram_users=scram_users_arg(args.scram_user),
        ssl=ssl_arg(args),
    )
    t0 = time.monotonic()
    broker = start_broker(settings, timeout_s=args.timeout)
    args.state.parent.mkdir(parents=True, exist_ok=True)
    args.state.write_text(json.dumps(dataclasses.asdict(broker)))
    _print_listeners(broker)
    print(
        f"kafka: up in {time.monotonic() - t0:.1f} s (pid {broker.pid}, log {broker.log_file})",
        file=sys.stderr,
    )
    return 0


def _stop_command(args: argparse.Namespace) -> int:
    """``stop``: the recorded broker (a cluster's stop is :func:`_cluster_command`'s)."""
    broker = _load_state(args.state)
    if broker is None:
        print("kafka: no broker recorded; nothing to stop", file=sys.stderr)
        return 0
    broker.stop()
    args.state.unlink(missing_ok=True)
    print(f"kafka: stopped pid {broker.pid}", file=sys.stderr)
    return 0


def _status_command(args: argparse.Namespace) -> int:
    """``status``: the addresses as ``start`` printed them, exit 1 if nothing serves."""
    cluster = _load_cluster(args.state)
    if cluster is not None:
        _print_cluster(cluster)
        return 0 if any(broker_answers(n.port) for n in cluster.nodes if n.alive()) else 1
    broker = _load_state(args.state)
    if broker is None or not broker.alive() or not broker_answers(broker.port):
        print("kafka: not running", file=sys.stderr)
        return 1
    _print_listeners(broker)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser(__doc__.split("\n\n")[0]).parse_args(argv)
    try:
        if args.command in {"stop", "kill"} or (args.command == "start" and args.node is not None):
            done = _cluster_command(args)
            if done >= 0:
                return done
        if args.command == "start":
            return _start_cluster_command(args) if args.nodes is not None else _start_command(args)
        if args.command == "stop":
            return _stop_command(args)
        return _status_command(args)
    except LauncherError as e:
        print(f"kafka: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
