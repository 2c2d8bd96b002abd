"""Shared fixtures: one Kafka broker per test session, and unique topic names per test.

The broker is chosen in this order:

1. ``KAFKA_BOOTSTRAP_SERVERS`` if set (an existing cluster; nothing is started or stopped);
2. testcontainers' Kafka, if a Docker engine answers;
3. otherwise the local Kafka from ``deploy/local/kafka.py`` (real Apache Kafka from Maven jars).

Unit tests never ask for ``bootstrap``, so they run without any broker.

``schema_registry`` is the session's Schema Registry (its Confluent-compatible base URL):
``SCHEMA_REGISTRY_URL`` if set, else Apicurio Registry from ``deploy/local/registry.py``, started
only when a test asks for it.

``secure_broker`` is a second, local broker with SASL/SCRAM and TLS listeners (see
``tests/secure_broker.py``); it is started only if a test asks for it, always from the local
launcher (an external cluster would not know the test's users and certificates).
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import pytest

from testkit.local_broker import load_launcher, load_registry_launcher

if TYPE_CHECKING:
    from tests.secure_broker import SecureBroker


def _docker_engine_answers() -> bool:
    try:
        import docker  # comes with testcontainers
    except ImportError:
        return False
    try:
        client = docker.from_env(timeout=3)
        return bool(client.ping())
    except Exception:
        return False


@pytest.fixture(scope="session")
def bootstrap() -> Iterator[str]:
    """The bootstrap address of the session's broker."""
    from_env = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if from_env:
        yield from_env
        return
    if _docker_engine_answers():
        from testcontainers.kafka import KafkaContainer

        with KafkaContainer().with_kraft() as container:
            yield container.get_bootstrap_server()
        return
    local = load_launcher()
    broker = local.start_broker(die_with_parent=True)
    try:
        yield broker.bootstrap
    finally:
        broker.stop()


@pytest.fixture(scope="session")
def schema_registry() -> Iterator[str]:
    """The Confluent-compatible URL of the session's Schema Registry (see the module docstring)."""
    from_env = os.environ.get("SCHEMA_REGISTRY_URL")
    if from_env:
        yield from_env.rstrip("/")
        return
    registry = load_registry_launcher().start_registry(die_with_parent=True)
    try:
        yield registry.url
    finally:
        registry.stop()


@pytest.fixture(scope="session")
def secure_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureBroker]:
    """A local broker with SASL_PLAINTEXT (SCRAM-SHA-512/256), SSL and MTLS listeners."""
    from tests.secure_broker import start_secure_broker  # cryptography only when needed

    secure = start_secure_broker(tmp_path_factory.mktemp("tls"))
    try:
        yield secure
    finally:
        secure.broker.stop()


@pytest.fixture
def topic_name(request: pytest.FixtureRequest) -> Callable[[str], str]:
    """Give each test its own topic names: ``topic_name("left")`` → ``test_x-left-1a2b3c4d``."""
    test = re.sub(r"[^A-Za-z0-9._-]", "-", request.node.name)[:80]
    run = uuid.uuid4().hex[:8]

    def make(suffix: str = "t") -> str:
        return f"{test}-{suffix}-{run}"

    return make


#: Fixtures that start a broker, a registry, a cluster or a SparkSession of the worker's own.
_SERVER_FIXTURES = {
    "bootstrap",
    "schema_registry",
    "secure_broker",
    "cluster3",
    "single_node",
    "own_broker",
    "spark",
}


#: Three groups, one per worker (``make test`` runs three with ``--dist loadgroup``; xdist hands
#: the groups, largest first, one to each worker before any pure test), so the suite's long paths
#: overlap instead of adding up:
#:
#: * ``servers`` — the tests on the worker's session broker and registry (tests/integration and
#:   the fault tests on the session broker);
#: * ``spark`` — the tests that start Spark (their own session broker and registry on that worker),
#:   with the image smoke tests and the Spark job's kill -9 and restart (:data:`_SPARK_GROUP`);
#: * ``apart`` — the quick bench run and the fault tests on brokers of their own (the three-node
#:   cluster, the single node, the broker a test restarts), so that each such fixture starts once.
#:
#: Most of these tests wait (on brokers, timers, JVMs) more than they compute: a fresh-clone run
#: with three workers kept 1.1 of the 2 cores busy on average. It is not yet shown to be faster
#: than two: 16.4 min on CI with two workers before the wire layer, the join operator and the C
#: take were merged, 20.1 min here with three after (the per-group times are not measured yet).
_SPARK_GROUP = (
    "tests/deploy/test_image_smoke.py",
    "tests/faults/test_spark_restart.py",
)
_APART = ("tests/bench/test_bench_quick.py",)
_APART_FIXTURES = {"cluster3", "single_node", "own_broker"}


def _group(item: pytest.Item) -> str | None:
    """The xdist group of ``item`` (see :data:`_SPARK_GROUP`); ``None`` for a pure test."""
    fixtures = set(getattr(item, "fixturenames", ()))
    if item.nodeid.startswith(_APART) or _APART_FIXTURES & fixtures:
        return "apart"
    if item.nodeid.startswith(_SPARK_GROUP) or item.get_closest_marker("spark") or "spark" in fixtures:
        return "spark"
    if item.get_closest_marker("broker") or _SERVER_FIXTURES & fixtures:
        return "servers"
    return None


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--merge",
        choices=("native", "python"),
        default=None,
        help="run the merge tasks on this path (default: sidecar.core.kernel.DEFAULT); the suite "
        "passes on both",
    )


def pytest_configure(config: pytest.Config) -> None:
    """``--merge``: every merge task of the test process takes in C or in Python, as a process
    without the extension would (the sidecar processes the tests start choose for themselves)."""
    chosen = config.getoption("--merge", default=None)
    if chosen is not None:
        from sidecar.core import kernel

        kernel.FORCED = chosen


@pytest.hookimpl(tryfirst=True)  # before xdist's worker reads the groups into the node ids
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under pytest-xdist: every test that needs a broker, a registry or Spark gets its group
    (:func:`_group`), so a worker's session keeps one broker and its package and module fixtures
    stay shared; the pure tests fill in wherever a worker is free. Without xdist the markers
    change nothing."""
    for item in items:
        group = _group(item)
        if group is None:
            continue
        item.add_marker(pytest.mark.xdist_group(group))
        _suffix_group(item, group)


def _suffix_group(item: pytest.Item, group: str) -> None:
    """What pytest-xdist 3.8's worker does for ``xdist_group`` (``<nodeid>@<group>``, which its
    loadgroup scheduler reads), done here: it sets ``item._nodeid``, which pytest 9.2's nodes no
    longer read (their id is ``item._id``), so every test would otherwise be scheduled alone.
    Only under ``--dist loadgroup``, and only once."""
    # xdist's workers set option.loadgroup; without xdist (one process) there is no such option.
    if not getattr(item.config.option, "loadgroup", False) or "@" in item.nodeid.rpartition("]")[2]:
        return
    node_id = getattr(item, "_id", None)
    if node_id is None:  # an older pytest: xdist's own suffix works
        return
    from _pytest.nodeid import NodeId

    item._id = NodeId.parse(f"{item.nodeid}@{group}")  # type: ignore[attr-defined]
