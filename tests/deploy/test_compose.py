"""deploy/compose.yaml: valid per the Compose Specification, started in health-gated order.

Compose itself is not run (no Docker engine); the demo producer it starts is run for real
against the test broker.
"""

from __future__ import annotations

import copy
import json
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from sidecar.kafka.admin import TopicSpec
from testkit.kafka_io import create_topics, read_topics
from tests.deploy.conftest import DEPLOY, parse_properties, run
from tests.deploy.contract import env_name, is_config_key

COMPOSE = DEPLOY / "compose.yaml"


@cache
def schema_validator() -> jsonschema.Draft7Validator:
    schema = json.loads((DEPLOY / "schema" / "compose-spec.json").read_text())
    jsonschema.Draft7Validator.check_schema(schema)
    return jsonschema.Draft7Validator(schema)


def compose() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE.read_text())


def errors(doc: dict[str, Any]) -> list[str]:
    return [f"{e.json_path}: {e.message}" for e in schema_validator().iter_errors(doc)]


def test_compose_file_follows_the_compose_specification() -> None:
    assert errors(compose()) == []


def test_schema_check_rejects_a_broken_file() -> None:
    broken = copy.deepcopy(compose())
    broken["services"]["spark"]["depends_on"]["timesync"]["condition"] = "service_started_ok"
    broken["services"]["kafka"]["healthcheck"]["interval"] = 5
    assert len(errors(broken)) >= 2


def test_has_kafka_the_sidecar_the_spark_job_and_a_demo_producer() -> None:
    services = compose()["services"]
    assert {"kafka", "timesync", "spark", "demo-producer"} <= set(services)
    assert services["kafka"]["image"].startswith("apache/kafka:")
    env = services["kafka"]["environment"]
    assert env["KAFKA_PROCESS_ROLES"] == "broker,controller"  # KRaft, no ZooKeeper
    assert services["timesync"]["build"]["target"] == "sidecar"
    assert services["spark"]["build"]["target"] == "spark"
    assert services["spark"]["command"][0] in {"join", "aggregate", "suppress"}


def test_start_order_is_gated_on_health() -> None:
    """Every dependency waits on a condition, and a health condition has a health check."""
    services = compose()["services"]
    for name, service in services.items():
        for dep, spec in service.get("depends_on", {}).items():
            assert dep in services, f"{name} depends on unknown service {dep}"
            condition = spec["condition"]
            assert condition in {"service_healthy", "service_completed_successfully"}, (name, dep)
            if condition == "service_healthy":
                target = services[dep]
                image_has_healthcheck = target.get("build", {}).get("target") == "sidecar"
                assert "healthcheck" in target or image_has_healthcheck, f"{dep} has no health check"
    chain = {name: set(s.get("depends_on", {})) for name, s in services.items()}
    assert chain["init-topics"] == {"kafka"}
    assert chain["timesync"] == {"init-topics"}
    assert chain["demo-producer"] == {"init-topics"}
    assert chain["spark"] == {"timesync"}
    assert services["spark"]["depends_on"]["timesync"]["condition"] == "service_healthy"


def test_sidecar_health_check_uses_healthz_and_the_config_is_mounted() -> None:
    timesync = compose()["services"]["timesync"]
    assert timesync["healthcheck"]["test"] == ["CMD", "python", "/opt/timesync/healthcheck.py"]
    assert "disable" not in timesync["healthcheck"]
    mounts = {m.split(":")[1]: m.split(":")[0] for m in timesync["volumes"]}
    assert timesync["command"] == ["--config", "/etc/timesync/timesync.properties"]
    source = DEPLOY / mounts["/etc/timesync/timesync.properties"]
    config = parse_properties(source.read_text())
    unknown = [k for k in config if not is_config_key(k)]
    assert unknown == []
    for var in timesync["environment"]:
        assert var in {env_name(k) for k in config} | {"TIMESYNC_BOOTSTRAP_SERVERS"}, var
    topics = " ".join(compose()["services"]["init-topics"]["command"])
    for topic in config["input.topics"].split(","):
        assert topic in topics, f"input topic {topic} is not created by init-topics"
    spark = compose()["services"]["spark"]["command"]
    assert spark[spark.index("--topic") + 1] == config["output.topic"], "Spark must read the ordered topic"


def test_every_mounted_file_exists() -> None:
    for name, service in compose()["services"].items():
        for mount in service.get("volumes", []):
            source = mount.split(":")[0]
            if source.startswith("."):
                assert (DEPLOY / source).exists(), f"{name} mounts missing {source}"


def test_kafka_healthcheck_and_topic_script_use_the_internal_listener() -> None:
    services = compose()["services"]
    advertised = services["kafka"]["environment"]["KAFKA_ADVERTISED_LISTENERS"]
    internal = re.search(r"INTERNAL://([^,]+)", advertised)
    assert internal, advertised
    assert internal.group(1) == "kafka:9092"
    assert "--bootstrap-server kafka:9092" in services["kafka"]["healthcheck"]["test"][1]
    assert "--bootstrap-server kafka:9092" in services["init-topics"]["command"][0]
    assert "kafka:9092" in services["timesync"]["environment"]["TIMESYNC_BOOTSTRAP_SERVERS"]


@pytest.mark.broker
async def test_demo_producer_writes_a_fast_and_a_slow_topic(
    bootstrap: str, topic_name: Callable[[str], str], tmp_path: Path
) -> None:
    fast, slow = topic_name("fast"), topic_name("slow")
    await create_topics(bootstrap, [TopicSpec(fast), TopicSpec(slow)])
    args = ["--bootstrap-servers", bootstrap, "--fast-topic", fast, "--slow-topic", slow]
    args += ["--rounds", "1", "--round-seconds", "2", "--fast-rate", "50", "--speed", "8"]
    # Laid out as compose mounts it: the script and what compose mounts beside it, nothing more
    # of the checkout (the image has sidecar installed, not testkit).
    opt = tmp_path / "opt"
    for mount in compose()["services"]["demo-producer"]["volumes"]:
        source, target = mount.split(":")[:2]
        place = shutil.copytree if (DEPLOY / source).is_dir() else shutil.copy
        (opt / target.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
        place(DEPLOY / source, opt / target.lstrip("/"))
    (script,) = compose()["services"]["demo-producer"]["entrypoint"][1:]
    result = run([sys.executable, str(opt / script.lstrip("/")), *args], timeout=120, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "round 1: 140 records" in result.stdout  # 2 s x 50/s fast + 2 s x 2/s x 10 slow

    records = await read_topics(bootstrap, [fast, slow], expected=140)
    by_topic = {t: [r.timestamp for r in records if r.topic == t] for t in (fast, slow)}
    assert (len(by_topic[fast]), len(by_topic[slow])) == (100, 40)
    assert by_topic[fast] == sorted(by_topic[fast])


# -- hardening -------------------------------------------------------------------------------------


def test_every_published_port_is_bound_to_this_host_only() -> None:
    published = [(name, port) for name, svc in compose()["services"].items() for port in svc.get("ports", [])]
    assert {name for name, _ in published} == {"kafka", "timesync", "spark", "schema-registry"}
    for name, port in published:
        assert str(port).startswith("127.0.0.1:"), f"{name} publishes {port} on every interface"


def test_the_sidecar_gets_a_generated_token_unless_one_is_given(tmp_path: Path) -> None:
    """The service's entrypoint script, run by a shell as the container would, with a stub
    ``timesync-sidecar`` that prints what it was given, and the token file in ``tmp_path``."""
    timesync = compose()["services"]["timesync"]
    shell, flag, script, argv0 = timesync["entrypoint"]
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    stub = bin_dir / "timesync-sidecar"
    stub.write_text('#!/bin/sh\necho "token=$TIMESYNC_HTTP_AUTH_TOKEN args=$*"\n')
    stub.chmod(0o755)
    (bin_dir / "python").symlink_to(sys.executable)
    # "$$" is compose's escape for "$"; the token file goes to tmp_path instead of /tmp.
    body = script.replace("$$", "$").replace("/tmp/", f"{tmp_path}/")
    cmd = [shell, flag, body, argv0, *timesync["command"]]
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin"}

    def run_once(extra: dict[str, str]) -> str:
        return subprocess.run(cmd, env=env | extra, capture_output=True, text=True, check=True).stdout

    first, second, given = run_once({}), run_once({}), run_once({"TIMESYNC_HTTP_AUTH_TOKEN": "mine"})

    assert len(first.split()[0].removeprefix("token=")) >= 32
    assert first == second, "a restarted container keeps its token"
    assert first.strip().endswith("args=--config /etc/timesync/timesync.properties")
    assert given.startswith("token=mine ")
    assert (tmp_path / "http-auth-token").stat().st_mode & 0o077 == 0, "readable by its owner only"
