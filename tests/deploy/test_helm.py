"""The Helm chart renders, lints and gives valid Kubernetes objects (needs `make deploy-check`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from sidecar.config import load_config
from tests.deploy import command_lines
from tests.deploy.conftest import CHART, parse_properties, run
from tests.deploy.contract import CONFIG_DEFAULTS
from tests.deploy.test_command_lines import problem

pytestmark = pytest.mark.deploy_tools

REQUIRED = {
    "config": {
        "bootstrap.servers": "kafka-0.kafka:9092,kafka-1.kafka:9092",
        "input.topics": "orders,payments",
        "output.topic": "orders-payments.ordered",
    }
}


def write_values(tmp_path: Path, extra: dict[str, Any] | None = None) -> Path:
    merged: dict[str, Any] = {"config": dict(REQUIRED["config"])}
    for key, value in (extra or {}).items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key].update(value)
        else:
            merged[key] = value
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(merged))
    return path


def template(helm: str, values: Path, *extra: str) -> tuple[int, list[dict[str, Any]], str]:
    result = run([helm, "template", "ts", str(CHART), "--namespace", "streams", "-f", str(values), *extra])
    docs = [d for d in yaml.safe_load_all(result.stdout) if d] if result.returncode == 0 else []
    return result.returncode, docs, result.stderr


def kinds(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {d["kind"]: d for d in docs}


def test_chart_lints_clean(helm: str, tmp_path: Path) -> None:
    result = run([helm, "lint", "--strict", str(CHART), "-f", str(write_values(tmp_path))])
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 chart(s) failed" in result.stdout


@pytest.mark.parametrize("version", ["1.29.0", kubernetes_validate.utils.latest_version()])
def test_rendered_objects_are_valid_kubernetes(helm: str, tmp_path: Path, version: str) -> None:
    code, docs, err = template(helm, write_values(tmp_path), "--kube-version", version)
    assert code == 0, err
    assert set(kinds(docs)) == {
        "ConfigMap",
        "Deployment",
        "Service",
        "ServiceAccount",
        "PodDisruptionBudget",
        "NetworkPolicy",
        "Secret",  # the generated token of pause, resume and restart
    }
    for doc in docs:
        kubernetes_validate.validate(doc, version, strict=True)


def test_rendered_pods_turn_service_links_off(helm: str, tmp_path: Path) -> None:
    """A release named ``timesync`` creates Service ``timesync``: with service links on, every
    pod of the namespace would get ``TIMESYNC_PORT``, which the sidecar reads as config."""
    code, docs, err = template(helm, write_values(tmp_path, {"serviceMonitor": {"enabled": True}}))
    assert code == 0, err
    specs = [(d["kind"], spec) for d in docs for spec in command_lines.pod_specs(d)]
    assert [kind for kind, _ in specs] == ["Deployment"]
    for kind, spec in specs:
        assert spec["enableServiceLinks"] is False, kind


def test_rendered_command_lines_parse(helm: str, tmp_path: Path) -> None:
    code, docs, err = template(helm, write_values(tmp_path))
    assert code == 0, err
    commands = list(command_lines.manifest_commands(docs, "rendered chart"))
    assert [c.program for c in commands] == [command_lines.SIDECAR]
    for command in commands:
        assert problem(command) is None, f"{command}: {problem(command)}"


def test_configmap_holds_every_key_with_its_default(helm: str, tmp_path: Path) -> None:
    code, docs, err = template(helm, write_values(tmp_path))
    assert code == 0, err
    config = parse_properties(kinds(docs)["ConfigMap"]["data"]["timesync.properties"])
    expected = (
        {k: v for k, v in CONFIG_DEFAULTS.items() if v}
        | REQUIRED["config"]
        | {"security.protocol": "PLAINTEXT"}
    )
    assert config == expected
    deployment = kinds(docs)["Deployment"]["spec"]["template"]["spec"]
    (container,) = deployment["containers"]
    assert container["args"] == ["--config", "/etc/timesync/timesync.properties"]
    (volume,) = [v for v in deployment["volumes"] if v["name"] == "config"]
    assert volume["configMap"]["name"] == kinds(docs)["ConfigMap"]["metadata"]["name"]


def test_overrides_reach_the_file_as_written(helm: str, tmp_path: Path) -> None:
    extra = {
        "config": {
            "max.task.idle.ms": "max",
            "watermark.window.ms": 600000000,
            "sasl.mechanism": "PLAIN",
            "errors.deadletterqueue.topic.name": "orders.dlq",
            "group.id": "g1",
        }
    }
    code, docs, err = template(helm, write_values(tmp_path, extra))
    assert code == 0, err
    config = parse_properties(kinds(docs)["ConfigMap"]["data"]["timesync.properties"])
    assert config["max.task.idle.ms"] == "max"
    assert config["watermark.window.ms"] == "600000000"  # not 6e+08
    assert config["sasl.mechanism"] == "PLAIN"
    assert config["errors.deadletterqueue.topic.name"] == "orders.dlq"


@pytest.mark.parametrize("spec", ["avro:meta.ts", "protobuf:event.at:us", "json:meta.ts:iso"])
def test_every_extractor_form_lints_renders_and_the_sidecar_loads_it(
    helm: str, tmp_path: Path, spec: str
) -> None:
    extra = {
        "config": {"timestamp.extractor": spec},
        "schemaRegistry": {"url": "http://apicurio:8080/apis/ccompat/v7"},
    }
    values = write_values(tmp_path, extra)
    lint = run([helm, "lint", "--strict", str(CHART), "-f", str(values)])
    assert lint.returncode == 0, lint.stdout + lint.stderr
    code, docs, err = template(helm, values)
    assert code == 0, err
    properties = tmp_path / "timesync.properties"
    properties.write_text(kinds(docs)["ConfigMap"]["data"]["timesync.properties"])
    config = load_config(properties, [], {"TIMESYNC_HTTP_AUTH_TOKEN": "t"})
    assert config.timestamp_extractor == spec
    assert config.schema_registry_url == "http://apicurio:8080/apis/ccompat/v7"


@pytest.mark.parametrize("spec", ["xml:ts", "avro:", "json:ts:min"])
def test_an_extractor_the_sidecar_refuses_fails_at_render(helm: str, tmp_path: Path, spec: str) -> None:
    code, _, err = template(helm, write_values(tmp_path, {"config": {"timestamp.extractor": spec}}))
    assert code != 0
    assert "timestamp.extractor" in err


def test_config_change_rolls_the_pods(helm: str, tmp_path: Path) -> None:
    def checksum(extra: dict[str, Any]) -> str:
        (tmp_path / "v").mkdir(exist_ok=True)
        code, docs, err = template(helm, write_values(tmp_path / "v", extra))
        assert code == 0, err
        return kinds(docs)["Deployment"]["spec"]["template"]["metadata"]["annotations"]["checksum/config"]

    assert checksum({}) != checksum({"config": {"max.task.idle.ms": 100}})


def test_probes_follow_http_port_and_can_be_tuned(helm: str, tmp_path: Path) -> None:
    extra = {
        "config": {"http.port": 9100},
        "probes": {
            "readiness": {"enabled": False},
            "liveness": {"enabled": True, "periodSeconds": 20, "timeoutSeconds": 5, "failureThreshold": 6},
        },
    }
    code, docs, err = template(helm, write_values(tmp_path, extra))
    assert code == 0, err
    (container,) = kinds(docs)["Deployment"]["spec"]["template"]["spec"]["containers"]
    assert container["ports"] == [{"name": "http-metrics", "containerPort": 9100, "protocol": "TCP"}]
    assert "readinessProbe" not in container
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http-metrics"}
    assert container["livenessProbe"]["failureThreshold"] == 6
    assert container["startupProbe"]["httpGet"]["path"] == "/healthz"


def test_image_tag_defaults_to_app_version_and_digest_wins(helm: str, tmp_path: Path) -> None:
    code, docs, _ = template(helm, write_values(tmp_path))
    (container,) = kinds(docs)["Deployment"]["spec"]["template"]["spec"]["containers"]
    app_version = yaml.safe_load((CHART / "Chart.yaml").read_text())["appVersion"]
    assert container["image"].endswith(f"timesync-sidecar:{app_version}")
    digest = "sha256:" + "ab" * 32
    code, docs, err = template(
        helm, write_values(tmp_path, {"image": {"repository": "r/ts", "digest": digest}})
    )
    assert code == 0, err
    (container,) = kinds(docs)["Deployment"]["spec"]["template"]["spec"]["containers"]
    assert container["image"] == f"r/ts@{digest}"


def test_service_monitor_scrapes_the_metrics_port(helm: str, tmp_path: Path) -> None:
    extra = {
        "serviceMonitor": {
            "enabled": True,
            "labels": {"release": "prom"},
            "interval": "30s",
            "scrapeTimeout": "10s",
        }
    }
    code, docs, err = template(helm, write_values(tmp_path, extra))
    assert code == 0, err
    monitor, service = kinds(docs)["ServiceMonitor"], kinds(docs)["Service"]
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["metadata"]["labels"]["release"] == "prom"
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint == {"port": "http-metrics", "path": "/metrics", "interval": "30s", "scrapeTimeout": "10s"}
    assert endpoint["port"] in {p["name"] for p in service["spec"]["ports"]}
    assert monitor["spec"]["selector"]["matchLabels"] == service["spec"]["selector"]
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": ["streams"]}


def test_replicas_share_work_only_with_partition_grouping(helm: str, tmp_path: Path) -> None:
    code, _, err = template(helm, write_values(tmp_path, {"replicaCount": 3}))
    assert code != 0
    assert "replicaCount=3 needs config.task.grouping=partition" in err
    # The real harm, not "idle replicas": each replica would write everything again.
    assert "each replica merges every input partition" in err
    assert "once per replica" in err
    assert "sit idle" not in err
    code, docs, err = template(
        helm, write_values(tmp_path, {"replicaCount": 3, "config": {"task.grouping": "partition"}})
    )
    assert code == 0, err
    assert kinds(docs)["Deployment"]["spec"]["replicas"] == 3


@pytest.mark.parametrize("key", ["bootstrap.servers", "input.topics", "output.topic"])
def test_missing_required_key_fails_naming_it(helm: str, tmp_path: Path, key: str) -> None:
    code, _, err = template(helm, write_values(tmp_path, {"config": {key: ""}}))
    assert code != 0
    assert f"config.{key} is required" in err


def test_unknown_key_is_rejected_by_the_values_schema(helm: str, tmp_path: Path) -> None:
    code, _, err = template(helm, write_values(tmp_path, {"config": {"max.task.idle": 5}}))
    assert code != 0
    assert "max.task.idle" in err


def test_prometheus_rule_ships_the_alerts_when_enabled(helm: str, tmp_path: Path) -> None:
    code, docs, err = template(helm, write_values(tmp_path))
    assert code == 0, err
    assert "PrometheusRule" not in kinds(docs), "off by default: it needs the Prometheus Operator's CRDs"

    extra = {"prometheusRule": {"enabled": True, "labels": {"release": "prom"}}}
    code, docs, err = template(helm, write_values(tmp_path, extra))
    assert code == 0, err
    rule = kinds(docs)["PrometheusRule"]
    assert rule["apiVersion"] == "monitoring.coreos.com/v1"
    assert rule["metadata"]["namespace"] == "streams"
    assert rule["metadata"]["labels"]["release"] == "prom"
    alerts = yaml.safe_load((CHART.parents[1] / "prometheus" / "alerts.yaml").read_text())
    assert rule["spec"]["groups"] == alerts["groups"], (
        "the rules as written, {{ $labels }} left for Prometheus"
    )


def test_prometheus_rule_values_are_checked_by_the_schema(helm: str, tmp_path: Path) -> None:
    code, _, err = template(helm, write_values(tmp_path, {"prometheusRule": {"enabled": True, "rules": []}}))
    assert code != 0
    assert "rules" in err


# -- hardening -------------------------------------------------------------------------------------


def pod_env(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    (container,) = kinds(docs)["Deployment"]["spec"]["template"]["spec"]["containers"]
    return {v["name"]: v for v in container["env"]}


def test_the_chart_generates_the_http_token_into_a_secret_the_pod_reads(helm: str, tmp_path: Path) -> None:
    import base64

    code, docs, err = template(helm, write_values(tmp_path))
    assert code == 0, err
    secret = kinds(docs)["Secret"]
    token = base64.b64decode(secret["data"]["token"]).decode()
    assert len(token) == 48
    ref = pod_env(docs)["TIMESYNC_HTTP_AUTH_TOKEN"]["valueFrom"]["secretKeyRef"]
    assert ref == {"name": secret["metadata"]["name"], "key": "token"}
    properties = tmp_path / "timesync.properties"
    properties.write_text(kinds(docs)["ConfigMap"]["data"]["timesync.properties"])
    config = load_config(properties, [], {"TIMESYNC_HTTP_AUTH_TOKEN": token})
    assert (config.http_host, config.http_auth_token.get_secret_value()) == ("0.0.0.0", token)

    _, again, _ = template(helm, write_values(tmp_path))
    assert kinds(again)["Secret"]["data"]["token"] != secret["data"]["token"], "random per install"


def test_an_existing_token_secret_is_read_and_none_generated(helm: str, tmp_path: Path) -> None:
    extra = {"httpAuth": {"existingSecret": "ops-timesync", "secretKey": "bearer"}}
    code, docs, err = template(helm, write_values(tmp_path, extra))
    assert code == 0, err
    assert "Secret" not in kinds(docs)
    ref = pod_env(docs)["TIMESYNC_HTTP_AUTH_TOKEN"]["valueFrom"]["secretKeyRef"]
    assert ref == {"name": "ops-timesync", "key": "bearer"}


def test_the_network_policy_admits_only_the_listed_sources(helm: str, tmp_path: Path) -> None:
    code, docs, err = template(helm, write_values(tmp_path))
    assert code == 0, err
    (rule,) = kinds(docs)["NetworkPolicy"]["spec"]["ingress"]
    assert rule["from"] == [
        {"namespaceSelector": {}, "podSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}}}
    ]
    code, _, err = template(helm, write_values(tmp_path, {"networkPolicy": {"enabled": True, "from": []}}))
    assert code != 0, "an empty list would open the port to every source"
