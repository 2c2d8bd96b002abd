"""deploy/compose.yaml: valid per the Compose Specification, started in health-gated order.

Compose itself is not run (no Docker engine); the demo producer it starts is run for real
against the test broker.
"""

from __future__ import annotations

import copy
import json
import re
import shutil
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


def lay_out_mounts(service: str, root: Path) -> None:
    """Copy ``service``'s bind mounts to where the container sees them, under ``root``."""
    for mount in compose()["services"][service].get("volumes", []):
        source, target = mount.split(":")[:2]
        src, dest = DEPLOY / source, root / target.lstrip("/")
        if src.is_dir():
            shutil.copytree(src, dest, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest)


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
    # As compose starts it: its mounts (the script, and testkit beside it, which the image does
    # not ship) laid out under tmp_path, run from outside the checkout.
    lay_out_mounts("demo-producer", tmp_path)
    python, script = compose()["services"]["demo-producer"]["entrypoint"]
    assert python == "python"
    command = [sys.executable, str(tmp_path / script.lstrip("/")), *args]
    result = run(command, timeout=120, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "round 1: 140 records" in result.stdout  # 2 s x 50/s fast + 2 s x 2/s x 10 slow

    records = await read_topics(bootstrap, [fast, slow], expected=140)
    by_topic = {t: [r.timestamp for r in records if r.topic == t] for t in (fast, slow)}
    assert (len(by_topic[fast]), len(by_topic[slow])) == (100, 40)
    assert by_topic[fast] == sorted(by_topic[fast])
