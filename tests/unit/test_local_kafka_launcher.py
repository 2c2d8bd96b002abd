"""The local broker launcher fails with one clear line when it cannot do its job."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from testkit.local_broker import REPO, load_launcher

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
    monkeypatch.setattr(launcher.install, "JARS", tmp_path / "no-jars")
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
        cluster_id = load_launcher().cluster_id()
        assert len(cluster_id) == 22
        assert set(cluster_id) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
        assert not cluster_id.startswith("-"), "the storage tool would read it as an option"


def test_scram_user_without_a_password_separator_is_one_clear_line(tmp_path: Path) -> None:
    done = run_launcher("--state", str(tmp_path / "s.json"), "start", "--scram-user", "alice")
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        "kafka: --scram-user expects NAME=PASSWORD, got an item without '=' or name"
    ]


def test_scram_password_with_a_comma_is_refused_before_the_broker_starts(tmp_path: Path) -> None:
    done = run_launcher("--state", str(tmp_path / "s.json"), "start", "--scram-user", "alice=a,b")
    assert done.returncode == 1
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("kafka: SCRAM user 'alice': ")
    assert "may contain ','" in line
    assert "a,b" not in line, "the password is never printed"


def test_ssl_flags_are_all_or_nothing(tmp_path: Path) -> None:
    done = run_launcher("--state", str(tmp_path / "s.json"), "start", "--ssl-cafile", "ca.pem")
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        "kafka: SSL listeners need --ssl-cafile, --ssl-certfile and --ssl-keyfile; "
        "missing --ssl-certfile, --ssl-keyfile"
    ]


def test_pkcs1_server_key_is_refused_with_the_conversion_to_use(tmp_path: Path) -> None:
    for name in ("ca.pem", "server.pem"):
        (tmp_path / name).write_text("-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n")
    key = tmp_path / "server.key"
    key.write_text("-----BEGIN RSA PRIVATE KEY-----\n-----END RSA PRIVATE KEY-----\n")
    done = run_launcher(
        "--state",
        str(tmp_path / "s.json"),
        "start",
        *("--ssl-cafile", str(tmp_path / "ca.pem"), "--ssl-certfile", str(tmp_path / "server.pem")),
        *("--ssl-keyfile", str(key)),
    )
    assert done.returncode == 1
    (line,) = done.stderr.strip().splitlines()
    assert f"SSL keyfile {key} is a 'RSA PRIVATE KEY' (PKCS#1/SEC1) key" in line
    assert "openssl pkcs8 -topk8 -nocrypt" in line


def test_a_listener_the_broker_was_not_started_with_names_the_option_that_adds_it() -> None:
    launcher = load_launcher()
    broker = launcher.Broker(1, 9092, 9093, "/nowhere", True, "/nowhere/server.log")
    assert broker.listeners() == {"PLAINTEXT": "127.0.0.1:9092"}
    with pytest.raises(
        launcher.LauncherError, match=r"no SASL_PLAINTEXT listener: start it with scram_users"
    ):
        _ = broker.sasl_bootstrap
    with pytest.raises(launcher.LauncherError, match=r"no MTLS listener: start it with ssl=SslFiles"):
        _ = broker.mtls_bootstrap


def test_kept_data_dir_refuses_a_scram_user_it_was_not_formatted_with(tmp_path: Path) -> None:
    launcher = load_launcher()
    (tmp_path / "log").mkdir()
    (tmp_path / "log" / "meta.properties").write_text("")  # formatted before
    (tmp_path / launcher.SCRAM_FILE_NAME).write_text('["alice"]')
    with pytest.raises(
        launcher.LauncherError, match=r"formatted without SCRAM user\(s\) bob \(it has: alice\)"
    ):
        launcher.start_broker(
            launcher.BrokerSettings(data_dir=tmp_path, scram_users={"alice": "a", "bob": "b"})
        )


def test_a_cluster_node_replicates_3_with_min_insync_2_and_knows_every_voter(tmp_path: Path) -> None:
    props = load_launcher().server_properties(
        9001, 9101, tmp_path, {}, node_id=2, voters="1@127.0.0.1:9100,2@127.0.0.1:9101", replicated=True
    )
    settings = dict(line.split("=", 1) for line in props.splitlines())
    assert settings["node.id"] == "2"
    assert settings["controller.quorum.voters"] == "1@127.0.0.1:9100,2@127.0.0.1:9101"
    for key in (
        "default.replication.factor",
        "offsets.topic.replication.factor",
        "transaction.state.log.replication.factor",
    ):
        assert settings[key] == "3", key
    assert settings["min.insync.replicas"] == "2"
    assert settings["transaction.state.log.min.isr"] == "2"


def test_a_single_node_keeps_replication_1(tmp_path: Path) -> None:
    settings = dict(
        line.split("=", 1)
        for line in load_launcher().server_properties(9001, 9101, tmp_path, {}).splitlines()
    )
    assert settings["node.id"] == "1"
    assert settings["controller.quorum.voters"] == "1@127.0.0.1:9101"
    assert settings["offsets.topic.replication.factor"] == "1"
    assert "min.insync.replicas" not in settings
    assert "default.replication.factor" not in settings


def test_node_commands_without_a_cluster_say_how_to_start_one(tmp_path: Path) -> None:
    for command in ("kill", "stop", "start"):
        done = run_launcher("--state", str(tmp_path / "none.json"), command, "--node", "2")
        assert done.returncode == 1, command
        assert done.stderr.strip().splitlines() == [
            f"kafka: no cluster recorded in {tmp_path / 'none.json'}: run 'kafka.py start --nodes 3' first"
        ]


def test_a_cluster_node_id_it_does_not_have_is_named_with_the_ones_it_has() -> None:
    launcher = load_launcher()
    nodes = [launcher.Node(i, 9000 + i, 9100 + i, f"/nowhere/node-{i}", "/nowhere/log") for i in (1, 2, 3)]
    cluster = launcher.Cluster(nodes, "/nowhere", True)
    assert cluster.bootstrap == "127.0.0.1:9001,127.0.0.1:9002,127.0.0.1:9003"
    with pytest.raises(launcher.LauncherError, match=r"no node 4 \(its nodes: 1, 2, 3\)"):
        cluster.kill_node(4)


def test_start_nodes_records_the_cluster_prints_its_addresses_and_refuses_a_second_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``start --nodes 3``: the bootstrap of every node alone on the first line, then one line
    per node; the state records the cluster for the node commands; a second start is refused.
    (The cluster itself starts for real in tests/faults, whose fault tests and command-line test
    share it.)"""
    launcher = load_launcher()
    state = tmp_path / "state.json"
    asked: list[int] = []

    def start_cluster(nodes: int, data_dir: object, overrides: object, timeout_s: float) -> object:
        asked.append(nodes)
        members = [
            launcher.Node(i, 9000 + i, 9100 + i, f"{tmp_path}/node-{i}", f"{tmp_path}/log", os.getpid())
            for i in range(1, nodes + 1)
        ]
        return launcher.Cluster(members, str(tmp_path), True)

    monkeypatch.setattr(launcher, "start_cluster", start_cluster)
    assert launcher.main(["--state", str(state), "start", "--nodes", "3"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert asked == [3]
    assert out == [
        "127.0.0.1:9001,127.0.0.1:9002,127.0.0.1:9003",
        "node 1 127.0.0.1:9001 up",
        "node 2 127.0.0.1:9002 up",
        "node 3 127.0.0.1:9003 up",
    ]
    recorded = launcher._load_cluster(state)
    assert recorded is not None
    assert [n.port for n in recorded.nodes] == [9001, 9002, 9003]
    assert launcher.main(["--state", str(state), "start", "--nodes", "3"]) == 1
    assert "a broker or cluster started from here is running" in capsys.readouterr().err
    assert asked == [3]


def test_a_zombie_node_counts_as_ended_for_a_command_that_is_not_its_parent() -> None:
    """A node this command stops may have been started by another process that has not reaped it
    yet; its zombie still answers kill(0), and must not be waited for."""
    launcher = load_launcher()
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        # Ended but not reaped: a zombie. Through /proc, as a process that is not its parent sees it.
        for _ in range(200):
            if launcher.zombie(child.pid):
                break
            time.sleep(0.01)
        assert launcher.zombie(child.pid)
        assert not launcher.zombie(os.getpid())
    finally:
        child.wait()
    assert not launcher.zombie(child.pid), "a reaped process is no zombie: it is gone"
