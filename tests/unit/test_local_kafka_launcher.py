"""The local broker launcher fails with one clear line when it cannot do its job."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from bench.local_broker import REPO, load_launcher

LAUNCHER = REPO / "deploy" / "local" / "kafka.py"


def run_launcher(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(LAUNCHER), *args], capture_output=True, text=True, env=env, timeout=120
    )


def test_missing_java_is_one_clear_line_and_exit_1(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
    env["PATH"] = str(tmp_path)  # nothing on it
    done = run_launcher("--state", str(tmp_path / "s.json"), "start", env=env)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        "kafka: java not found on PATH: install a Java 17+ runtime or set JAVA_HOME"
    ]


def test_busy_port_is_one_clear_line_and_exit_1(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        done = run_launcher("--state", str(tmp_path / "s.json"), "start", "--port", str(port))
    assert done.returncode == 1
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(f"kafka: port 127.0.0.1:{port} is busy")


def test_missing_mvn_is_named_when_jars_are_not_cached(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    launcher = load_launcher()
    monkeypatch.setattr(launcher, "JARS", tmp_path / "no-jars")
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(launcher.LauncherError, match="mvn not found on PATH"):
        launcher.ensure_jars()


def test_stop_without_a_started_broker_is_harmless(tmp_path: Path) -> None:
    done = run_launcher("--state", str(tmp_path / "none.json"), "stop")
    assert done.returncode == 0
    assert "nothing to stop" in done.stderr


def test_status_without_a_broker_exits_1(tmp_path: Path) -> None:
    done = run_launcher("--state", str(tmp_path / "none.json"), "status")
    assert done.returncode == 1
    assert done.stderr.strip() == "kafka: not running"


def test_kafka_cluster_id_has_kafkas_uuid_format_and_never_looks_like_an_option() -> None:
    for _ in range(500):
        cluster_id = load_launcher()._cluster_id()
        assert len(cluster_id) == 22
        assert set(cluster_id) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
        assert not cluster_id.startswith("-"), "the storage tool would read it as an option"
