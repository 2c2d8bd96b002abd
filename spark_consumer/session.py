"""The SparkSession timesync's jobs run in: Kafka connector, Python workers, state store, logging.

Three things must be right *before* the first SparkSession of the process starts, because the
driver JVM reads them once:

- **The Kafka connector.** Spark's Kafka source is not inside the pyspark wheel. It may already
  be on Spark's classpath (the timesync-spark image copies it into pyspark's own ``jars/``);
  otherwise the jars come from a directory (``--jars-dir``; in a checkout ``make jars`` fills
  ``.cache/jars/spark`` from ``deploy/local/pom.xml``) and go on ``spark.jars``, or, on machines
  that reach Maven Central, from Ivy (``spark.jars.packages``). :func:`connector_conf` has the order.
- **timesync's operators.** ``suppress`` and ``join`` each run a JVM ``StatefulProcessor`` built
  from ``operators/<job>`` (``timesync-<job>-operator-<pyspark version>.jar``). Each goes on
  ``spark.jars`` from wherever it is found (:func:`find_operator_jar`); when one is nowhere,
  only its job fails, with one line that says how to build it.
- **The Python workers.** No job runs Python code in Spark's workers today, but any Python UDF
  would, and workers must use the driver's interpreter (the one with this package), so
  ``PYSPARK_PYTHON`` and ``PYSPARK_DRIVER_PYTHON`` are set to :data:`sys.executable`.
- **Logging.** The driver JVM gets ``log4j2.properties`` from this package (warnings only).
- **Bounds on one value.** Java Avro reads its limits from system properties once: the driver's
  and the executors' JVM options carry them (:mod:`spark_consumer.value_limits`).

The session also uses the RocksDB state store (large state off the JVM heap, and what
``transformWithState`` is built for), few shuffle partitions (each stateful micro-batch
runs one task per partition; Spark's default of 200 is slow on small machines) and UTC.
"""

from __future__ import annotations

import functools
import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from spark_consumer.value_limits import ValueLimits

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

REPO = Path(__file__).resolve().parents[1]
DEFAULT_JARS_DIR = REPO / ".cache" / "jars" / "spark"
LOG4J2 = Path(__file__).resolve().with_name("log4j2.properties")

JARS_DIR_ENV = "TIMESYNC_SPARK_JARS_DIR"
PACKAGES_ENV = "TIMESYNC_SPARK_PACKAGES"

CONNECTOR = "spark-sql-kafka-0-10_2.13"
#: The jobs that run one of timesync's JVM operators, and its artifact (``operators/<job>``).
OPERATORS = {"suppress": "timesync-suppress-operator", "join": "timesync-join-operator"}
OPERATOR = OPERATORS["suppress"]
DEFAULT_OPERATOR_DIR = REPO / ".cache" / "jars" / "operator"
AVRO = "spark-avro_2.13"  # from_avro, for --value-format avro
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

    Raises :class:`SessionError` saying what to do when the jars are missing or mismatched.
    """
    jars = sorted(jars_dir.glob("*.jar")) if jars_dir.is_dir() else []
    if not _connectors(jars):
        raise SessionError(
            f"Spark's Kafka connector ({CONNECTOR}-{pyspark_version()}.jar) is not in {jars_dir}; "
            + _what_to_do()
        )
    _check_version(jars, str(jars_dir))
    return jars


def spark_home() -> Path:
    """The Spark installation the driver JVM starts from: ``$SPARK_HOME``, else pyspark's own
    directory (what pyspark's launcher uses). Every jar in its ``jars/`` is on the classpath of
    the driver and of executors started from the same image."""
    env = os.environ.get("SPARK_HOME")
    if env:
        return Path(env)
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def classpath_connector(options: SessionOptions) -> str | None:
    """Where Spark already gets the connector from without our help, or ``None``.

    Looks at ``spark.jars`` / ``spark.jars.packages`` given as ``--conf`` (``options.conf``) or in
    ``spark-defaults.conf`` (``$SPARK_CONF_DIR``, else ``$SPARK_HOME/conf``), and at the jars in
    :func:`spark_home`'s ``jars/`` (checked to match pyspark's version).
    """
    defaults = _spark_defaults()
    for key in ("spark.jars", "spark.jars.packages"):
        for source, conf in (("--conf", options.conf), ("spark-defaults.conf", defaults)):
            if CONNECTOR in conf.get(key, ""):
                return f"{key} ({source})"
    jars_dir = spark_home() / "jars"
    jars = sorted(jars_dir.glob("*.jar")) if jars_dir.is_dir() else []
    if _connectors(jars):
        _check_version(jars, str(jars_dir))
        return str(jars_dir)
    return None


def connector_conf(options: SessionOptions) -> dict[str, str]:
    """``spark.jars`` or ``spark.jars.packages`` for the Kafka connector (empty if none is needed).

    Order: ``options.packages`` or ``$TIMESYNC_SPARK_PACKAGES`` (Maven coordinates, or ``auto``
    for the connector and ``spark-avro`` at pyspark's version, resolved by Ivy); else ``options.jars_dir`` or
    ``$TIMESYNC_SPARK_JARS_DIR`` (must hold the connector); else nothing when the connector is
    already on Spark's classpath (:func:`classpath_connector`); else the checkout's
    ``.cache/jars/spark``. When none of these has it, :class:`SessionError` says what to do.
    """
    packages = options.packages or os.environ.get(PACKAGES_ENV)
    if packages:
        auto = f"{connector_coordinates()},org.apache.spark:{AVRO}:{pyspark_version()}"
        coords = auto if packages == "auto" else packages
        return {"spark.jars.packages": coords}
    env_dir = os.environ.get(JARS_DIR_ENV)
    jars_dir = options.jars_dir or (Path(env_dir) if env_dir else None)
    if jars_dir is not None:
        return {"spark.jars": ",".join(str(j) for j in find_connector_jars(jars_dir))}
    if classpath_connector(options) is not None:
        return {}
    jars = sorted(DEFAULT_JARS_DIR.glob("*.jar")) if DEFAULT_JARS_DIR.is_dir() else []
    if _connectors(jars):
        _check_version(jars, str(DEFAULT_JARS_DIR))
        return {"spark.jars": ",".join(str(j) for j in jars)}
    raise SessionError(
        f"Spark's Kafka connector ({CONNECTOR}-{pyspark_version()}.jar) is not on Spark's classpath "
        f"(not in {spark_home() / 'jars'}, spark.jars or spark.jars.packages) and no --jars-dir was "
        "given; " + _what_to_do()
    )


def operator_jar_name(job: str = "suppress") -> str:
    return f"{OPERATORS[job]}-{pyspark_version()}.jar"


def find_operator_jar(options: SessionOptions, job: str = "suppress") -> Path | None:
    """timesync's operator jar of ``job`` for this pyspark, or ``None`` when it is nowhere.

    Looked for in the jars directory (``options.jars_dir`` or ``$TIMESYNC_SPARK_JARS_DIR``),
    then in the checkout's ``.cache/jars/operator`` (``make jars``). A jar already in
    :func:`spark_home`'s ``jars/`` (the image) needs no ``spark.jars`` and is not returned.
    """
    env_dir = os.environ.get(JARS_DIR_ENV)
    jars_dir = options.jars_dir or (Path(env_dir) if env_dir else None)
    name = operator_jar_name(job)
    for folder in (jars_dir, DEFAULT_OPERATOR_DIR):
        if folder is not None and (folder / name).is_file():
            return folder / name
    return None


def operator_missing(job: str = "suppress") -> str:
    """The one line a user reads when ``job`` cannot find its operator."""
    return (
        f"timesync's {job} operator ({operator_jar_name(job)}) is not on Spark's classpath: in a "
        f"timesync checkout run `make jars` (Maven builds it from operators/{job} into "
        f"{DEFAULT_OPERATOR_DIR}), or put that jar in --jars-dir DIR or {spark_home() / 'jars'}"
    )


def operator_class(frame: DataFrame, class_name: str, job: str) -> Any:
    """The Java class ``class_name`` of ``job``'s operator, through ``frame``'s py4j gateway.

    Raises :class:`SessionError` (:func:`operator_missing`: what is missing, how to build it)
    when the jar is not on Spark's classpath.
    """
    jvm: Any = frame.sparkSession._jvm
    try:
        loader = jvm.Thread.currentThread().getContextClassLoader()
        jvm.java.lang.Class.forName(class_name, True, loader)
    except Exception as e:  # py4j wraps ClassNotFoundException
        raise SessionError(operator_missing(job)) from e
    return functools.reduce(getattr, class_name.split("."), jvm)


def _with_operator(conf: dict[str, str], options: SessionOptions) -> dict[str, str]:
    """``conf`` with every operator jar that is found added to ``spark.jars`` (once)."""
    jars = [j for j in conf.get("spark.jars", "").split(",") if j]
    found = [str(jar) for job in OPERATORS if (jar := find_operator_jar(options, job)) is not None]
    added = [jar for jar in found if jar not in jars]
    return {**conf, "spark.jars": ",".join([*jars, *added])} if added else conf


def _what_to_do() -> str:
    version = pyspark_version()
    return (
        f"either pass --jars-dir DIR (or set {JARS_DIR_ENV}=DIR) naming a directory that holds "
        f"{CONNECTOR}-{version}.jar, spark-token-provider-kafka-0-10_2.13-{version}.jar, kafka-clients "
        f"and commons-pool2 (in a timesync checkout, run `make jars` to put them in {DEFAULT_JARS_DIR}); "
        f"or copy those jars into {spark_home() / 'jars'}; or pass --packages (or set {PACKAGES_ENV}=auto) "
        f"to fetch {connector_coordinates(version)} from Maven Central"
    )


def _connectors(jars: list[Path]) -> list[Path]:
    return [j for j in jars if j.name.startswith(CONNECTOR + "-")]


def _check_version(jars: list[Path], where: str) -> None:
    version = pyspark_version()
    connectors = _connectors(jars)
    if not any(j.name == f"{CONNECTOR}-{version}.jar" for j in connectors):
        found = ", ".join(j.name for j in connectors)
        raise SessionError(
            f"{where} holds {found} but pyspark is {version}: the connector must match pyspark "
            f"exactly; use {CONNECTOR}-{version}.jar and its dependencies at the same version "
            f"(in a checkout: pin it in deploy/local/pom.xml and rerun `make jars`)"
        )


def _spark_defaults() -> dict[str, str]:
    """``spark-defaults.conf`` as the launcher reads it: ``key value`` (or ``key=value``) lines."""
    conf_dir = os.environ.get("SPARK_CONF_DIR")
    path = Path(conf_dir) if conf_dir else spark_home() / "conf"
    try:
        text = (path / "spark-defaults.conf").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return {}
    out = {}
    for raw in text.splitlines():
        line = raw.strip()
        if line and not line.startswith("#"):
            key, _, value = line.replace("=", " ", 1).partition(" ")
            out[key.strip()] = value.strip()
    return out


def session_conf(options: SessionOptions) -> dict[str, str]:
    """The full Spark configuration :func:`get_session` applies (without the master)."""
    conf = {
        **_with_operator(connector_conf(options), options),
        "spark.app.name": options.app_name,
        "spark.sql.streaming.stateStore.providerClass": ROCKSDB_PROVIDER,
        # Changelog checkpointing commits only what changed in a micro-batch, not a full snapshot.
        "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
        "spark.sql.shuffle.partitions": str(options.shuffle_partitions),
        "spark.sql.session.timeZone": "UTC",
        "spark.ui.enabled": str(options.ui).lower(),
        "spark.ui.showConsoleProgress": "false",
    }
    # Java Avro's bounds on one value are JVM options of the driver and every executor
    # (spark_consumer/value_limits.py). A user's own options for a JVM come after ours: for a
    # property set twice, the JVM keeps the later.
    limits = ValueLimits.from_conf(options.conf).java_options()
    java = {
        "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{LOG4J2} {limits}",
        "spark.executor.extraJavaOptions": limits,
    }
    conf.update(options.conf)
    for key, ours in java.items():
        conf[key] = f"{ours} {options.conf[key]}" if key in options.conf else ours
    return conf


def _is_local(master: str) -> bool:
    return master == "local" or master.startswith("local[")


def get_session(options: SessionOptions | None = None) -> SparkSession:
    """Start (or return the running) SparkSession set up for timesync's jobs.

    If a session already runs in this process it is returned as it is, after checking that it
    has the Kafka connector: ``spark.jars`` cannot be added once the driver JVM is up.
    """
    options = options or SessionOptions()
    # The Python workers must import what the driver imports (this package, protobuf's runtime).
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
    if classpath_connector(SessionOptions()) is not None:
        return
    raise SessionError(
        "a SparkSession is already running without Spark's Kafka connector; spark.jars must be set "
        "before the first session of the process: call spark_consumer.session.get_session() first"
    )
