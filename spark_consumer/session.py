"""The SparkSession timesync's jobs run in: Kafka connector, Python workers, state store, logging.

Three things must be right *before* the first SparkSession of the process starts, because the
driver JVM reads them once:

- **The Kafka connector.** Spark's Kafka source is not inside the pyspark wheel. On machines
  without Ivy access to Maven Central the jars come from ``make jars`` (``deploy/local/pom.xml``
  copies ``spark-sql-kafka-0-10_2.13`` and its dependencies into ``.cache/jars/spark``) and go on
  ``spark.jars``; machines that do reach Maven Central can use ``spark.jars.packages`` instead.
- **The Python workers.** ``transformWithStateInPandas`` runs in worker processes that must use
  the driver's interpreter (the one with pandas, pyarrow and protobuf), so ``PYSPARK_PYTHON`` and
  ``PYSPARK_DRIVER_PYTHON`` are set to :data:`sys.executable`.
- **Logging.** The driver JVM gets ``log4j2.properties`` from this package (warnings only).

The session also uses the RocksDB state store (large state off the JVM heap, and what
``transformWithStateInPandas`` is built for), few shuffle partitions (each stateful micro-batch
runs one task per partition; Spark's default of 200 is slow on small machines) and UTC.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

REPO = Path(__file__).resolve().parents[1]
DEFAULT_JARS_DIR = REPO / ".cache" / "jars" / "spark"
LOG4J2 = Path(__file__).resolve().with_name("log4j2.properties")

JARS_DIR_ENV = "TIMESYNC_SPARK_JARS_DIR"
PACKAGES_ENV = "TIMESYNC_SPARK_PACKAGES"

CONNECTOR = "spark-sql-kafka-0-10_2.13"
ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"


class SessionError(RuntimeError):
    """The session cannot be set up as asked; the message says what to do."""


@dataclass(frozen=True, slots=True)
class SessionOptions:
    """How to build the session. Every field has a default that works in a checkout.

    ``jars_dir`` and ``packages`` choose where the Kafka connector comes from (see
    :func:`connector_conf`); ``conf`` is applied last, so it can override anything here.
    """

    master: str | None = None
    app_name: str = "timesync-spark"
    jars_dir: Path | None = None
    packages: str | None = None
    shuffle_partitions: int = 2
    log_level: str = "WARN"
    ui: bool = False
    conf: Mapping[str, str] = field(default_factory=dict)


def pyspark_version() -> str:
    import pyspark

    return str(pyspark.__version__)


def connector_coordinates(version: str | None = None) -> str:
    """Maven coordinates of the Kafka connector matching the installed pyspark."""
    return f"org.apache.spark:{CONNECTOR}:{version or pyspark_version()}"


def find_connector_jars(jars_dir: Path) -> list[Path]:
    """The jars in ``jars_dir``, checked to hold the connector at exactly pyspark's version.

    Raises :class:`SessionError` saying what to run when the jars are missing or mismatched.
    """
    version = pyspark_version()
    jars = sorted(jars_dir.glob("*.jar")) if jars_dir.is_dir() else []
    connectors = [j for j in jars if j.name.startswith(CONNECTOR + "-")]
    if not connectors:
        raise SessionError(
            f"Spark's Kafka connector ({CONNECTOR}-{version}.jar) is not in {jars_dir}: run `make jars` "
            f"in the timesync checkout, or point {JARS_DIR_ENV} / --jars-dir at a directory holding the "
            f"connector and its dependencies, or use --packages on a machine that reaches Maven Central"
        )
    wanted = f"{CONNECTOR}-{version}.jar"
    if not any(j.name == wanted for j in connectors):
        found = ", ".join(j.name for j in connectors)
        raise SessionError(
            f"{jars_dir} holds {found} but pyspark is {version}: the connector must match pyspark "
            f"exactly; pin the same version in deploy/local/pom.xml and rerun `make jars`"
        )
    return jars


def connector_conf(options: SessionOptions) -> dict[str, str]:
    """``spark.jars`` or ``spark.jars.packages`` for the Kafka connector.

    Order: ``options.packages`` or ``$TIMESYNC_SPARK_PACKAGES`` (Maven coordinates, or ``auto``
    for the connector at pyspark's version, resolved by Ivy); else ``options.jars_dir``,
    ``$TIMESYNC_SPARK_JARS_DIR``, or the checkout's ``.cache/jars/spark``.
    """
    packages = options.packages or os.environ.get(PACKAGES_ENV)
    if packages:
        coords = connector_coordinates() if packages == "auto" else packages
        return {"spark.jars.packages": coords}
    env_dir = os.environ.get(JARS_DIR_ENV)
    jars_dir = options.jars_dir or (Path(env_dir) if env_dir else DEFAULT_JARS_DIR)
    return {"spark.jars": ",".join(str(j) for j in find_connector_jars(jars_dir))}


def session_conf(options: SessionOptions) -> dict[str, str]:
    """The full Spark configuration :func:`get_session` applies (without the master)."""
    conf = {
        **connector_conf(options),
        "spark.app.name": options.app_name,
        "spark.sql.streaming.stateStore.providerClass": ROCKSDB_PROVIDER,
        # Changelog checkpointing commits only what changed in a micro-batch, not a full snapshot.
        "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
        "spark.sql.shuffle.partitions": str(options.shuffle_partitions),
        "spark.sql.session.timeZone": "UTC",
        "spark.ui.enabled": str(options.ui).lower(),
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{LOG4J2}",
    }
    conf.update(options.conf)
    return conf


def _is_local(master: str) -> bool:
    return master == "local" or master.startswith("local[")


def get_session(options: SessionOptions | None = None) -> SparkSession:
    """Start (or return the running) SparkSession set up for timesync's jobs.

    If a session already runs in this process it is returned as it is, after checking that it
    has the Kafka connector: ``spark.jars`` cannot be added once the driver JVM is up.
    """
    options = options or SessionOptions()
    # The Python workers must import what the driver imports (pandas, pyarrow, this package).
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable

    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        _check_connector(active)
        return active

    conf = session_conf(options)
    master = options.master or os.environ.get("MASTER") or conf.get("spark.master") or "local[*]"
    if _is_local(master):
        # Stay on the loopback interface (and skip Spark's warning about the hostname).
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        conf.setdefault("spark.driver.host", "127.0.0.1")
        conf.setdefault("spark.driver.bindAddress", "127.0.0.1")
    builder = SparkSession.builder.master(master)
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(options.log_level)
    return spark


def _check_connector(spark: SparkSession) -> None:
    conf = spark.sparkContext.getConf()
    jars = conf.get("spark.jars", "") or ""
    packages = conf.get("spark.jars.packages", "") or ""
    if re.search(re.escape(CONNECTOR), jars + "," + packages):
        return
    raise SessionError(
        "a SparkSession is already running without Spark's Kafka connector; spark.jars must be set "
        "before the first session of the process: call spark_consumer.session.get_session() first"
    )
