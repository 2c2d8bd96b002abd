"""Where ``suppress`` and ``join`` find timesync's JVM operators, and the one line each says when
it cannot."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pyspark
import pytest

from spark_consumer import session
from spark_consumer.jobs import join_operator, suppress_operator
from spark_consumer.session import SessionError, SessionOptions, session_conf

JAR = f"timesync-suppress-operator-{pyspark.__version__}.jar"
JOIN_JAR = f"timesync-join-operator-{pyspark.__version__}.jar"
ROOT = Path(__file__).resolve().parents[2]
CONNECTOR = f"spark-sql-kafka-0-10_2.13-{pyspark.__version__}.jar"


@pytest.fixture(autouse=True)
def checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A checkout after ``make jars``: the connector's and the operator's folders side by side."""
    jars = tmp_path / ".cache" / "jars"
    (jars / "spark").mkdir(parents=True)
    (jars / "spark" / CONNECTOR).write_bytes(b"")
    monkeypatch.setattr(session, "DEFAULT_JARS_DIR", jars / "spark")
    monkeypatch.setattr(session, "DEFAULT_OPERATOR_DIR", jars / "operator")
    monkeypatch.setattr(session, "classpath_connector", lambda options: None)
    for name in (session.JARS_DIR_ENV, session.PACKAGES_ENV):
        monkeypatch.delenv(name, raising=False)
    return jars


def test_make_jars_puts_the_operator_on_spark_jars_beside_the_connector(checkout: Path) -> None:
    (checkout / "operator").mkdir()
    (checkout / "operator" / JAR).write_bytes(b"")
    jars = session_conf(SessionOptions())["spark.jars"].split(",")
    assert jars == [str(checkout / "spark" / CONNECTOR), str(checkout / "operator" / JAR)]


def test_make_jars_puts_both_operators_on_spark_jars(checkout: Path) -> None:
    (checkout / "operator").mkdir()
    for name in (JAR, JOIN_JAR):
        (checkout / "operator" / name).write_bytes(b"")
    jars = session_conf(SessionOptions())["spark.jars"].split(",")
    assert jars == [
        str(checkout / "spark" / CONNECTOR),
        *(str(checkout / "operator" / n) for n in (JAR, JOIN_JAR)),
    ]


def test_the_operators_are_built_against_the_same_spark_with_the_same_build() -> None:
    """The Makefile names both jars after the suppress pom's Spark version."""

    def build(pom: str) -> str:
        text = (ROOT / "operators" / pom / "pom.xml").read_text(encoding="utf-8")
        text = re.sub(r"<!--.*?-->", "", text, flags=re.DOTALL)
        return text.replace(f"timesync-{pom}-operator", "NAME")

    assert build("join") == build("suppress")


def test_a_jars_dir_holding_the_operator_puts_it_on_spark_jars_once(tmp_path: Path) -> None:
    given = tmp_path / "mine"
    given.mkdir()
    for name in (CONNECTOR, JAR):
        (given / name).write_bytes(b"")
    jars = session_conf(SessionOptions(jars_dir=given))["spark.jars"].split(",")
    assert sorted(jars) == sorted(str(given / n) for n in (CONNECTOR, JAR))


def test_without_the_operator_the_other_jobs_still_start(checkout: Path) -> None:
    assert session_conf(SessionOptions())["spark.jars"] == str(checkout / "spark" / CONNECTOR)


class _NoOperatorJvm:
    """A py4j gateway whose class loader does not know the operator."""

    class java:
        class lang:
            class Class:
                @staticmethod
                def forName(name: str, initialize: bool, loader: Any) -> Any:
                    raise RuntimeError(f"java.lang.ClassNotFoundException: {name}")

    class Thread:
        @staticmethod
        def currentThread() -> Any:
            return _NoOperatorJvm.Thread

        @staticmethod
        def getContextClassLoader() -> None:
            return None


class _Frame:
    class sparkSession:
        _jvm = _NoOperatorJvm


def test_suppress_without_its_jar_says_in_one_line_what_is_missing_and_how_to_build_it() -> None:
    with pytest.raises(SessionError) as error:
        suppress_operator.operator_class(_Frame)  # type: ignore[arg-type]
    message = str(error.value)
    assert "\n" not in message
    assert f"timesync's suppress operator ({JAR}) is not on Spark's classpath" in message
    assert "run `make jars`" in message
    assert "operators/suppress" in message


def test_join_without_its_jar_says_in_one_line_what_is_missing_and_how_to_build_it() -> None:
    with pytest.raises(SessionError) as error:
        join_operator.state_variable(_Frame)  # type: ignore[arg-type]
    message = str(error.value)
    assert "\n" not in message
    assert f"timesync's join operator ({JOIN_JAR}) is not on Spark's classpath" in message
    assert "operators/join" in message
