"""The container image: Dockerfile lint and structure, and the scripts baked into it.

No Docker engine here, so the image itself is not built; what runs inside it (health check,
Spark entrypoint) is run directly.
"""

from __future__ import annotations

import http.server
import os
import re
import socket
import stat
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.deploy.conftest import DEPLOY, REPO, run, venv_tool

DOCKER = DEPLOY / "docker"
DOCKERFILE = DOCKER / "Dockerfile"


def stages() -> dict[str, list[str]]:
    """Stage name → its instruction lines (continuations joined, comments dropped)."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    out: dict[str, list[str]] = {}
    current = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        m = re.match(r"FROM\s+\S+\s+AS\s+(\S+)", line, re.IGNORECASE)
        if m:
            current = m.group(1)
            out[current] = []
        elif current:
            out[current].append(line)
    return out


def instruction(stage: list[str], name: str) -> list[str]:
    return [line.split(None, 1)[1] for line in stage if line.split(None, 1)[0].upper() == name]


def test_hadolint_finds_nothing() -> None:
    result = run([venv_tool("hadolint"), "--no-color", str(DOCKERFILE)])
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == ""


def test_hadolint_is_really_linting(tmp_path: Path) -> None:
    """Guard against a lint step that passes whatever it is given."""
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python:latest\nRUN apt-get install curl\n")
    result = run([venv_tool("hadolint"), "--no-color", str(bad)])
    assert result.returncode != 0
    assert "DL3007" in result.stdout  # latest tag


def test_both_targets_run_as_the_unprivileged_user() -> None:
    all_stages = stages()
    for target in ("sidecar", "spark"):
        assert instruction(all_stages[target], "USER") == ["10001:10001"], target


def test_sidecar_is_the_default_target_with_entrypoint_config_and_healthcheck() -> None:
    all_stages = stages()
    assert list(all_stages)[-1] == "sidecar", "a plain `docker build` must give the sidecar"
    sidecar = all_stages["sidecar"]
    assert instruction(sidecar, "ENTRYPOINT") == ['["timesync-sidecar"]']
    assert instruction(sidecar, "CMD") == ['["--config", "/etc/timesync/timesync.properties"]']
    env = " ".join(instruction(sidecar, "ENV"))
    assert "TIMESYNC_HTTP_HOST=0.0.0.0" in env
    assert "TIMESYNC_HTTP_PORT=8080" in env
    (health,) = instruction(sidecar, "HEALTHCHECK")
    assert 'CMD ["python", "/opt/timesync/healthcheck.py"]' in health
    assert instruction(sidecar, "EXPOSE") == ["8080"]


def test_spark_target_has_java_17_the_connector_jars_and_the_job_entrypoint() -> None:
    all_stages = stages()
    from_lines = re.findall(
        r"^FROM\s+(\S+)\s+AS\s+(\S+)", DOCKERFILE.read_text(), re.MULTILINE | re.IGNORECASE
    )
    images = {name: image for image, name in from_lines}
    assert images["jre"].startswith("eclipse-temurin:17-")
    assert images["jars"].startswith("maven:")
    assert "temurin-17" in images["jars"]
    jars = " ".join(all_stages["jars"])
    assert "-f spark/pom.xml dependency:copy-dependencies" in jars
    assert 'pip install --no-cache-dir "$(ls /dist/timesync-*.whl)[spark]"' in " ".join(
        all_stages["build-spark"]
    )
    spark = all_stages["spark"]
    assert "COPY --from=jre /opt/java/openjdk /opt/java/openjdk" in spark
    assert any(line.startswith("COPY --from=jars /jars/spark/") for line in spark)
    env = " ".join(instruction(spark, "ENV"))
    for var in (
        "JAVA_HOME=/opt/java/openjdk",
        "SPARK_HOME=/opt/spark",
        "PYSPARK_PYTHON=/opt/venv/bin/python",
    ):
        assert var in env
    assert instruction(spark, "ENTRYPOINT") == [
        '["/usr/bin/tini", "--", "/opt/timesync/spark-entrypoint.sh"]'
    ]


def test_every_copied_path_exists_and_is_in_the_build_context() -> None:
    """COPY sources exist, and the Dockerfile-specific .dockerignore lets each one through."""
    allowed = [
        line[1:].rstrip("/")
        for line in (DOCKER / "Dockerfile.dockerignore").read_text().splitlines()
        if line.startswith("!")
    ]
    sources = []
    for lines in stages().values():
        for args in instruction(lines, "COPY"):
            parts = [p for p in args.split() if not p.startswith("--")]
            if args.startswith("--from"):
                continue
            sources.extend(parts[:-1])
    assert sources, "no COPY found: the parser is broken"
    for src in sources:
        assert (REPO / src).exists(), f"COPY source {src} does not exist"
        assert any(src == a or src.startswith(a + "/") for a in allowed), (
            f"{src} is excluded by the dockerignore"
        )


def test_spark_entrypoint_passes_shellcheck_and_is_executable() -> None:
    script = DOCKER / "spark-entrypoint.sh"
    assert script.stat().st_mode & stat.S_IXUSR
    result = run([venv_tool("shellcheck"), str(script)])
    assert result.returncode == 0, result.stdout + result.stderr


# --- the Spark entrypoint, run with stand-ins for java, spark-submit and timesync-spark --------


@pytest.fixture
def stub_env(tmp_path: Path) -> dict[str, str]:
    """A PATH, JAVA_HOME and SPARK_HOME whose programs print their argv, one per line."""
    printer = '#!/bin/sh\necho "$(basename "$0")"\nfor a in "$@"; do echo "$a"; done\n'
    for path in (
        tmp_path / "bin/timesync-spark",
        tmp_path / "java/bin/java",
        tmp_path / "spark/bin/spark-submit",
    ):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(printer)
        path.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPARK_")}
    env.update(PATH=f"{tmp_path / 'bin'}:{env['PATH']}", JAVA_HOME=str(tmp_path / "java"))
    env["SPARK_HOME"] = str(tmp_path / "spark")
    return env


def entrypoint(args: list[str], env: dict[str, str]) -> list[str]:
    result = run(["bash", str(DOCKER / "spark-entrypoint.sh"), *args], env=env, timeout=30)
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


def test_entrypoint_runs_the_job_cli_for_anything_but_driver_or_executor(stub_env: dict[str, str]) -> None:
    argv = ["join", "--bootstrap-servers", "kafka:9092", "--topic", "a b"]
    assert entrypoint(argv, stub_env) == ["timesync-spark", *argv]


def test_entrypoint_driver_runs_spark_submit_in_client_mode_inside_the_pod(stub_env: dict[str, str]) -> None:
    stub_env["SPARK_DRIVER_BIND_ADDRESS"] = "10.0.0.7"
    argv = [
        "--properties-file",
        "/opt/spark/conf/spark.properties",
        "local:///opt/timesync/spark_main.py",
        "join",
    ]
    assert entrypoint(["driver", *argv], stub_env) == [
        "spark-submit",
        "--conf",
        "spark.driver.bindAddress=10.0.0.7",
        "--deploy-mode",
        "client",
        *argv,
    ]


def test_entrypoint_executor_starts_the_kubernetes_executor_backend(stub_env: dict[str, str]) -> None:
    stub_env.update(
        SPARK_JAVA_OPT_1="-Dsecond=2",
        SPARK_JAVA_OPT_0="-Dfirst=1",
        SPARK_JAVA_OPT_10="-Dtenth=10",
        SPARK_EXECUTOR_MEMORY="2g",
        SPARK_DRIVER_URL="spark://CoarseGrainedScheduler@driver:7078",
        SPARK_EXECUTOR_ID="3",
        SPARK_EXECUTOR_CORES="2",
        SPARK_APPLICATION_ID="spark-abc",
        SPARK_EXECUTOR_POD_IP="10.0.0.9",
        SPARK_RESOURCE_PROFILE_ID="0",
        SPARK_EXECUTOR_POD_NAME="job-exec-3",
    )
    out = entrypoint(["executor"], stub_env)
    assert out[:6] == ["java", "-Dfirst=1", "-Dsecond=2", "-Dtenth=10", "-Xms2g", "-Xmx2g"]
    assert out[6:8] == ["-cp", f"{stub_env['SPARK_HOME']}/jars/*"]
    assert out[8] == "org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend"
    flags = dict(zip(out[9::2], out[10::2], strict=True))
    assert flags == {
        "--driver-url": "spark://CoarseGrainedScheduler@driver:7078",
        "--executor-id": "3",
        "--cores": "2",
        "--app-id": "spark-abc",
        "--hostname": "10.0.0.9",
        "--resourceProfileId": "0",
        "--podName": "job-exec-3",
    }


# --- the HEALTHCHECK script against a stand-in /healthz ---------------------------------------


@pytest.fixture(scope="module")
def healthz() -> Iterator[tuple[int, dict[str, int]]]:
    """A local HTTP server whose /healthz answers the status in ``state["status"]``."""
    state = {"status": 200}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            code = state["status"] if self.path == "/healthz" else 404
            body = b'{"status": "x", "message": "from the test"}'
            self.send_response(code)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], state
    finally:
        server.shutdown()
        server.server_close()


def healthcheck(port: int | str) -> tuple[int, str]:
    env = {**os.environ, "TIMESYNC_HTTP_PORT": str(port)}
    result = run(["python3", str(DOCKER / "healthcheck.py")], env=env, timeout=30)
    return result.returncode, result.stdout.strip()


@pytest.mark.parametrize(("status", "exit_code"), [(200, 0), (503, 1), (500, 1)])
def test_healthcheck_is_healthy_only_on_200(
    healthz: tuple[int, dict[str, int]], status: int, exit_code: int
) -> None:
    port, state = healthz
    state["status"] = status
    code, out = healthcheck(port)
    assert code == exit_code
    assert out.startswith(str(status))
    assert "from the test" in out


def test_healthcheck_fails_when_nothing_listens() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        free_port = s.getsockname()[1]
    code, out = healthcheck(free_port)
    assert code == 1
    assert "no answer" in out


def test_healthcheck_passes_when_http_is_turned_off() -> None:
    code, out = healthcheck(0)
    assert code == 0
    assert "http.port=0" in out
