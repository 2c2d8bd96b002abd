"""Where the Spark jobs find the Kafka connector, and what they say when they cannot.

An installed package has no checkout beside it: the timesync-spark image puts the connector in
pyspark's own ``jars/`` (``SPARK_HOME=/opt/spark`` links there), and a user may have it in their
Spark's ``jars/`` or in ``spark.jars``. Only the file names matter here; the image smoke test
(``tests/deploy/test_image_smoke.py``) runs Spark with real jars.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pyspark
import pytest

from spark_consumer import session
from spark_consumer.session import SessionError, SessionOptions, connector_conf

VERSION = pyspark.__version__
CONNECTOR_JARS = (
    f"spark-sql-kafka-0-10_2.13-{VERSION}.jar",
    f"spark-token-provider-kafka-0-10_2.13-{VERSION}.jar",
    "kafka-clients-3.9.2.jar",
    "commons-pool2-2.13.1.jar",
)


def jars_dir(path: Path, names: tuple[str, ...] = CONNECTOR_JARS) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    for name in names:
        (path / name).write_bytes(b"")
    return path


@pytest.fixture(autouse=True)
def installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """As after ``pip install timesync[spark]``: no checkout jars, a pyspark of our own (with the
    jars the wheel has), no Spark variables."""
    monkeypatch.setattr(session, "DEFAULT_JARS_DIR", tmp_path / "site-packages" / ".cache" / "jars" / "spark")
    fake_pyspark = tmp_path / "site-packages" / "pyspark"
    jars_dir(fake_pyspark / "jars", ("spark-core_2.13-4.2.0.jar",))
    monkeypatch.setattr(pyspark, "__file__", str(fake_pyspark / "__init__.py"))
    for name in ("SPARK_HOME", "SPARK_CONF_DIR", session.JARS_DIR_ENV, session.PACKAGES_ENV):
        monkeypatch.delenv(name, raising=False)
    return fake_pyspark


def test_the_image_layout_connector_in_pyspark_jars_needs_no_spark_jars(installed: Path) -> None:
    jars_dir(installed / "jars")
    assert connector_conf(SessionOptions()) == {}
    assert session.classpath_connector(SessionOptions()) == str(installed / "jars")


def test_the_image_layout_through_spark_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "opt" / "spark"
    jars_dir(home / "jars")
    monkeypatch.setenv("SPARK_HOME", str(home))
    assert connector_conf(SessionOptions()) == {}


def test_a_spark_home_elsewhere_is_where_spark_looks(
    installed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # pyspark launches the JVM from $SPARK_HOME: jars beside the pip package are not on that classpath.
    jars_dir(installed / "jars")
    other = tmp_path / "spark-4.2.0"
    jars_dir(other / "jars", ("spark-core_2.13-4.2.0.jar",))
    monkeypatch.setenv("SPARK_HOME", str(other))
    with pytest.raises(SessionError, match="is not on Spark's classpath"):
        connector_conf(SessionOptions())


def test_spark_jars_given_as_conf_is_enough() -> None:
    conf = {"spark.jars": f"/jars/spark-sql-kafka-0-10_2.13-{VERSION}.jar,/jars/kafka-clients-3.9.2.jar"}
    assert connector_conf(SessionOptions(conf=conf)) == {}
    assert session.session_conf(SessionOptions(conf=conf))["spark.jars"] == conf["spark.jars"]


def test_spark_defaults_conf_is_read_as_spark_reads_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    conf_dir = tmp_path / "conf"
    conf_dir.mkdir()
    coords = f"org.apache.spark:spark-sql-kafka-0-10_2.13:{VERSION}"
    (conf_dir / "spark-defaults.conf").write_text(f"# ours\nspark.jars.packages   {coords}\n")
    monkeypatch.setenv("SPARK_CONF_DIR", str(conf_dir))
    assert connector_conf(SessionOptions()) == {}


def test_the_checkout_jars_are_the_fallback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    checkout = jars_dir(tmp_path / "checkout" / ".cache" / "jars" / "spark")
    monkeypatch.setattr(session, "DEFAULT_JARS_DIR", checkout)
    jars = connector_conf(SessionOptions())["spark.jars"].split(",")
    assert sorted(Path(j).name for j in jars) == sorted(CONNECTOR_JARS)


def test_an_explicit_jars_dir_wins_and_must_hold_the_connector(installed: Path, tmp_path: Path) -> None:
    jars_dir(installed / "jars")
    mine = jars_dir(tmp_path / "mine")
    assert connector_conf(SessionOptions(jars_dir=mine))["spark.jars"].startswith(str(mine))
    with pytest.raises(SessionError, match=f"is not in {tmp_path / 'empty'}"):
        connector_conf(SessionOptions(jars_dir=tmp_path / "empty"))


def test_packages_win_over_everything(installed: Path) -> None:
    jars_dir(installed / "jars")
    conf = connector_conf(SessionOptions(packages="auto"))
    assert conf == {
        "spark.jars.packages": f"org.apache.spark:spark-sql-kafka-0-10_2.13:{VERSION},"
        f"org.apache.spark:spark-avro_2.13:{VERSION}"
    }


def test_a_connector_of_another_spark_version_is_refused(installed: Path) -> None:
    jars_dir(installed / "jars", ("spark-sql-kafka-0-10_2.13-4.1.1.jar",))
    with pytest.raises(
        SessionError, match=f"holds spark-sql-kafka-0-10_2.13-4.1.1.jar but pyspark is {VERSION}"
    ):
        connector_conf(SessionOptions())


def test_without_a_connector_the_error_says_exactly_what_to_do(installed: Path) -> None:
    with pytest.raises(SessionError) as error:
        connector_conf(SessionOptions())
    message = str(error.value)
    assert "\n" not in message
    assert f"spark-sql-kafka-0-10_2.13-{VERSION}.jar) is not on Spark's classpath" in message
    assert f"not in {installed / 'jars'}" in message
    for what_to_do in (
        "pass --jars-dir DIR (or set TIMESYNC_SPARK_JARS_DIR=DIR)",
        f"spark-token-provider-kafka-0-10_2.13-{VERSION}.jar, kafka-clients and commons-pool2",
        f"or copy those jars into {installed / 'jars'}",
        "or pass --packages (or set TIMESYNC_SPARK_PACKAGES=auto)",
        f"org.apache.spark:spark-sql-kafka-0-10_2.13:{VERSION} from Maven Central",
        "`make jars`",
    ):
        assert what_to_do in message


def test_the_cli_prints_it_as_one_line_and_exits_2(tmp_path: Path) -> None:
    # A real process: SPARK_HOME without the connector, and a package installed away from the
    # checkout is simulated by pointing DEFAULT_JARS_DIR nowhere before the CLI runs.
    code = (
        "import sys; from pathlib import Path; from spark_consumer import session, cli; "
        f"session.DEFAULT_JARS_DIR = Path({str(tmp_path / 'none')!r}); sys.exit(cli.main(sys.argv[1:]))"
    )
    home = tmp_path / "spark"
    jars_dir(home / "jars", ())
    args = ["aggregate", "--bootstrap-servers", "127.0.0.1:1", "--topic", "t", "--size", "1m"]
    args += ["--checkpoint", str(tmp_path / "cp"), "--sink", "console"]
    result = subprocess.run(
        [sys.executable, "-c", code, *args],
        env={"PATH": "/usr/bin:/bin", "SPARK_HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2, result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("timesync-spark: error: Spark's Kafka connector")
    assert "--jars-dir" in line
    assert "--packages" in line
