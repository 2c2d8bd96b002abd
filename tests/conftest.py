"""Shared fixtures: one Kafka broker per test session, and unique topic names per test.

The broker is chosen in this order:

1. ``KAFKA_BOOTSTRAP_SERVERS`` if set (an existing cluster; nothing is started or stopped);
2. testcontainers' Kafka, if a Docker engine answers;
3. otherwise the local Kafka from ``deploy/local/kafka.py`` (real Apache Kafka from Maven jars).

Unit tests never ask for ``bootstrap``, so they run without any broker. Under ``pytest -n N``
the controller starts one broker and one registry for all its workers and hands them over as an
existing cluster is, ``KAFKA_BOOTSTRAP_SERVERS`` and ``SCHEMA_REGISTRY_URL`` (``tests/shared_servers.py``).

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
from tests import shared_servers

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


#: How the tests are shared out under ``make test`` (``-n 4 --dist loadgroup --no-loadscope-reorder``).
#: xdist hands out units of work — a group, or a pure test alone — in collection order as the
#: workers free up, so :func:`pytest_collection_modifyitems` puts the long units first and the
#: pure tests last, to fill in. The session's broker and registry are one for every worker
#: (``tests/shared_servers.py``), so a test on them needs no worker of its own; only fixtures
#: that start something costly decide a group:
#:
#: * ``spark`` and ``spark-joins`` — the tests on a worker's SparkSession (the ``spark`` fixture:
#:   one JVM per worker), as two units (:data:`_SECOND_SPARK`);
#: * ``cluster3`` — the fault tests on the three-node cluster (a package fixture, started once);
#: * ``secure`` — the tests on the SASL/TLS broker (a session fixture);
#: * every other test on a server: its module (its module fixtures start once), as one unit.
#:
#: Measured on fresh clones (two cores): 19.5 min in all with three workers and three fixed groups
#: (the spark worker's 17 min was the whole run); 16.0 and 16.3 min like this, the four workers'
#: sums within 1 % of each other (~800 s), so the run is bound by the total work now; 17.2 with
#: five workers (the two cores shared more ways); 13.9 min (sums ~665 s) once Spark's JVMs ran
#: C1 only with the serial collector and the Spark tests were two units.
_FIXTURE_GROUPS = (("spark", "spark"), ("cluster3", "cluster3"), ("secure_broker", "secure"))

#: The Spark tests are two units, each on a SparkSession of its own worker: as one (~710 s of a
#: loaded fresh-clone run) they outlasted every other worker once the rest of the suite got
#: shorter. A second session costs one more JVM start (~45 s loaded); these modules (~370 s) go
#: to it, the others (~340 s) stay in ``spark``.
_SECOND_SPARK = frozenset(
    {
        "tests/spark/test_join_operator.py",
        "tests/spark/test_join.py",
        "tests/spark/test_suppress.py",
        "tests/spark/test_suppress_operator.py",
    }
)

#: The units that take longest (seconds of a fresh-clone run with three workers, loaded): handed
#: out first, longest first, so that no long one starts last. Any other server unit follows them,
#: then the pure tests.
_LONG_FIRST = (
    "spark-joins",  # 415 (the two Spark units: ~710 s as one)
    "spark",  # 340
    "cluster3",  # 305
    "tests/deploy/test_image_smoke.py",  # 295
    "tests/bench/test_bench_quick.py",  # 265
    "tests/faults/test_spark_restart.py",  # 160
    "tests/spark/test_cluster.py",  # 110
    "tests/integration/test_offsets_reset.py",  # 70
    "secure",  # 60
    "tests/faults/test_broker_restart.py",  # 55
    "tests/integration/test_sidecar_idle.py",  # 55
    "tests/faults/test_crash.py",  # 50
)


def _group(item: pytest.Item) -> str | None:
    """The xdist group of ``item`` (see :data:`_FIXTURE_GROUPS`); ``None`` for a pure test."""
    fixtures = set(getattr(item, "fixturenames", ()))
    for fixture, group in _FIXTURE_GROUPS:
        if fixture in fixtures:
            if group == "spark" and item.nodeid.split("::")[0] in _SECOND_SPARK:
                return "spark-joins"
            return group
    if item.get_closest_marker("spark") or item.get_closest_marker("broker") or _SERVER_FIXTURES & fixtures:
        return item.nodeid.split("::")[0]
    return None


def _rank(group: str | None) -> int:
    """Where a unit goes in the collection order: the long ones first (:data:`_LONG_FIRST`)."""
    if group is None:
        return len(_LONG_FIRST) + 1
    return _LONG_FIRST.index(group) if group in _LONG_FIRST else len(_LONG_FIRST)


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
    # The brokers the tests start live minutes under light load: C1 alone compiles what they run
    # (a start and 20 s idle cost 4.5 s of CPU instead of 7.9 here), and CPU is what the
    # workers share (deploy/local/kafka_launcher/processes.py reads this).
    os.environ.setdefault("LOCAL_KAFKA_JVM_OPTS", "-XX:TieredStopAtLevel=1")
    # The same for Spark's drivers (spark-submit's JVM, local executors inside it) and a
    # standalone cluster's master and worker: a test's job reads hundreds of records, never long
    # enough for C2's code to repay its compiling, and the serial collector spares two cores
    # G1's concurrent threads (test_aggregate.py alone: 89 s of CPU; 59 s with C1 only; 51 s
    # with the serial collector too). A user's own values are kept.
    for spark_jvm in ("SPARK_SUBMIT_OPTS", "SPARK_DAEMON_JAVA_OPTS"):
        os.environ.setdefault(spark_jvm, "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
    shared_servers.start(config, _docker_engine_answers)


def pytest_unconfigure(config: pytest.Config) -> None:
    shared_servers.stop()


@pytest.hookimpl(tryfirst=True)  # before xdist's worker reads the groups into the node ids
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under pytest-xdist: every test that needs a broker, a registry or Spark gets its group
    (:func:`_group`), so its costly fixtures start once, and the long units come first
    (:func:`_rank`; a stable sort, so a module keeps its own order). Without xdist the markers
    change nothing and the order is pytest's."""
    if not getattr(config.option, "loadgroup", False):
        return
    groups = {item: _group(item) for item in items}
    # A module shared out by module keeps its pure tests too: they read its module fixtures (the
    # image test's builds), which another worker would build again.
    by_module = {g for g in groups.values() if g is not None and g.endswith(".py")}
    for item in items:
        module = item.nodeid.split("::")[0]
        if groups[item] is None and module in by_module:
            groups[item] = module
    items.sort(key=lambda item: _rank(groups[item]))
    for item in items:
        group = groups[item]
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
