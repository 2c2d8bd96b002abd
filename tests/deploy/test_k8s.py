"""deploy/k8s: schema-valid for the Kubernetes versions we support, and consistent with itself.

Native sidecars (an init container with ``restartPolicy: Always``) need Kubernetes 1.29+ (beta,
on by default; GA in 1.33), so the manifests are validated against 1.29 and the newest schema
kubernetes-validate ships.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest

from sidecar.config import ConfigError, load_config
from tests.deploy import command_lines
from tests.deploy.conftest import K8S, load_all, parse_properties
from tests.deploy.contract import CONFIG_KEYS, SECRET_KEYS, env_name, is_config_key

VERSIONS = ["1.29.0", kubernetes_validate.utils.latest_version()]
MANIFESTS = sorted(K8S.glob("*.yaml"))


def validate(doc: dict[str, Any], version: str) -> None:
    kubernetes_validate.validate(doc, version, strict=True)


def by_kind() -> dict[tuple[str, str], dict[str, Any]]:
    docs = [doc for path in MANIFESTS for doc in load_all(path)]
    return {(d["kind"], d["metadata"]["name"]): d for d in docs}


def driver_template() -> dict[str, Any]:
    (doc,) = load_all(K8S / "spark-driver-pod-template.yaml")
    return doc


def pod_spec(doc: dict[str, Any]) -> dict[str, Any]:
    return doc["spec"]["template"]["spec"] if doc["kind"] == "Deployment" else doc["spec"]


def pod_labels(doc: dict[str, Any]) -> dict[str, str]:
    meta = doc["spec"]["template"]["metadata"] if doc["kind"] == "Deployment" else doc["metadata"]
    return meta["labels"]


def matches(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    ok = all(labels.get(k) == v for k, v in selector.get("matchLabels", {}).items())
    for expr in selector.get("matchExpressions", []):
        assert expr["operator"] == "In", "extend matches() for other operators"
        ok = ok and labels.get(expr["key"]) in expr["values"]
    return ok


def timesync_containers() -> list[tuple[str, dict[str, Any]]]:
    deployment = by_kind()[("Deployment", "timesync")]
    (sidecar,) = [c for c in driver_template()["spec"]["initContainers"] if c["name"] == "timesync"]
    (standalone,) = pod_spec(deployment)["containers"]
    return [("driver sidecar", sidecar), ("standalone", standalone)]


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: Path(p).name)
def test_manifest_is_valid_for_kubernetes(path: Path, version: str) -> None:
    docs = load_all(path)
    assert docs, f"{path.name} has no resources"
    for doc in docs:
        validate(doc, version)


def test_strict_validation_rejects_unknown_and_mistyped_fields() -> None:
    doc = driver_template()
    typo = copy.deepcopy(doc)
    typo["spec"]["initContainers"][0]["restartPolicyy"] = "Always"
    with pytest.raises(kubernetes_validate.ValidationError):
        validate(typo, VERSIONS[0])
    wrong_type = copy.deepcopy(doc)
    wrong_type["spec"]["initContainers"][0]["startupProbe"]["periodSeconds"] = "two"
    with pytest.raises(kubernetes_validate.ValidationError):
        validate(wrong_type, VERSIONS[0])


def test_sidecar_is_a_native_sidecar_that_starts_before_the_spark_driver() -> None:
    spec = driver_template()["spec"]
    (sidecar,) = [c for c in spec["initContainers"] if c["name"] == "timesync"]
    assert sidecar["restartPolicy"] == "Always"
    assert [c["name"] for c in spec["containers"]] == ["spark-kubernetes-driver"]
    assert "startupProbe" in sidecar, "without it the driver would start before the sidecar is healthy"


@pytest.mark.parametrize("which", ["driver sidecar", "standalone"])
def test_probes_hit_healthz_on_the_declared_http_port(which: str) -> None:
    container = dict(timesync_containers())[which]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        get = container[probe]["httpGet"]
        assert get["path"] == "/healthz"
        assert get["port"] in ports, f"{probe} port {get['port']} is not declared"
    assert ports[container["livenessProbe"]["httpGet"]["port"]] == 8080
    # A liveness probe must give the sidecar time: at least 3 misses before a restart.
    assert container["livenessProbe"]["failureThreshold"] >= 3


@pytest.mark.parametrize("which", ["driver sidecar", "standalone"])
def test_config_comes_from_the_configmap_mounted_for_config(which: str) -> None:
    docs = by_kind()
    container = dict(timesync_containers())[which]
    spec = (
        driver_template()["spec"] if which == "driver sidecar" else pod_spec(docs[("Deployment", "timesync")])
    )
    assert container["args"] == ["--config", "/etc/timesync/timesync.properties"]
    (mount,) = [m for m in container["volumeMounts"] if m["mountPath"] == "/etc/timesync"]
    (volume,) = [v for v in spec["volumes"] if v["name"] == mount["name"]]
    configmap = docs[("ConfigMap", volume["configMap"]["name"])]
    config = parse_properties(configmap["data"]["timesync.properties"])
    assert [k for k in config if not is_config_key(k)] == []
    assert {"bootstrap.servers", "input.topics", "output.topic"} <= set(config)
    known_env = {env_name(k) for k in CONFIG_KEYS | SECRET_KEYS}
    for var in container.get("env", []):
        assert var["name"] in known_env, f"{var['name']} is not a timesync setting"


def test_standalone_replicas_group_tasks_by_partition() -> None:
    deployment = by_kind()[("Deployment", "timesync")]
    assert deployment["spec"]["replicas"] > 1
    (container,) = pod_spec(deployment)["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["TIMESYNC_TASK_GROUPING"] == "partition"


def test_service_pdb_and_network_policies_select_the_right_pods() -> None:
    docs = by_kind()
    deployment = pod_labels(docs[("Deployment", "timesync")])
    driver = pod_labels(driver_template())
    service = docs[("Service", "timesync-metrics")]["spec"]
    assert matches({"matchLabels": service["selector"]}, deployment)
    assert matches({"matchLabels": service["selector"]}, driver)
    assert service["ports"][0]["targetPort"] == "http-metrics"

    pdb = docs[("PodDisruptionBudget", "timesync")]["spec"]
    assert matches(pdb["selector"], deployment)
    assert not matches(pdb["selector"], driver), "a PDB must not block Spark driver pods"

    for (kind, _), doc in docs.items():
        if kind == "NetworkPolicy":
            assert matches(doc["spec"]["podSelector"], deployment) or matches(
                doc["spec"]["podSelector"], driver
            )
    allowed = [
        p["port"]
        for (k, _), d in docs.items()
        if k == "NetworkPolicy"
        for r in d["spec"]["ingress"]
        for p in r.get("ports", [])
    ]
    assert 8080 in allowed


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: Path(p).name)
def test_pods_run_unprivileged_with_a_read_only_root(path: Path) -> None:
    for doc in load_all(path):
        if doc["kind"] not in {"Pod", "Deployment"}:
            continue
        spec = pod_spec(doc)
        assert spec["securityContext"]["runAsNonRoot"] is True
        assert spec["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
        for container in spec.get("initContainers", []) + spec["containers"]:
            ctx = container["securityContext"]
            assert ctx["allowPrivilegeEscalation"] is False
            assert ctx["capabilities"]["drop"] == ["ALL"]
            if container["name"] == "timesync":
                assert ctx["readOnlyRootFilesystem"] is True
                assert container["resources"]["limits"]["memory"]


def test_every_pod_spec_turns_service_links_off() -> None:
    """Kubernetes injects ``<SERVICE>_SERVICE_HOST``/``_PORT``/… for every Service of the
    namespace into every pod that does not opt out; our own ``timesync-metrics`` Service alone
    gives each pod ``TIMESYNC_METRICS_PORT``, which the sidecar would read as config."""
    specs = [
        (f"{path.name}: {doc['kind']} {doc['metadata']['name']}", spec)
        for path in MANIFESTS
        for doc in load_all(path)
        for spec in command_lines.pod_specs(doc)
    ]
    assert len(specs) == 3  # the standalone Deployment and the two Spark pod templates
    for where, spec in specs:
        assert spec.get("enableServiceLinks") is False, where


# -- hardening -------------------------------------------------------------------------------------


def effective_env(container: dict[str, Any]) -> dict[str, str]:
    """The container's TIMESYNC_* variables, a Secret's value standing in as ``<from secret>``."""
    env = {}
    for var in container.get("env", []):
        if "value" in var:
            env[var["name"]] = str(var["value"])
        elif "secretKeyRef" in var.get("valueFrom", {}):
            env[var["name"]] = "<from secret>"
    return env


@pytest.mark.parametrize("which", ["driver sidecar", "standalone"])
def test_a_sidecar_bound_off_loopback_starts_only_with_its_token_from_a_secret(
    which: str, tmp_path: Path
) -> None:
    container = dict(timesync_containers())[which]
    (token,) = [v for v in container["env"] if v["name"] == "TIMESYNC_HTTP_AUTH_TOKEN"]
    assert token["valueFrom"]["secretKeyRef"] == {"name": "timesync-http-auth", "key": "token"}
    properties = tmp_path / "timesync.properties"
    properties.write_text(by_kind()[("ConfigMap", "timesync-config")]["data"]["timesync.properties"])
    env = effective_env(container)

    config = load_config(properties, [], env)

    assert config.http_host == "0.0.0.0"
    assert config.http_auth_token.get_secret_value() == "<from secret>"
    without = {k: v for k, v in env.items() if k != "TIMESYNC_HTTP_AUTH_TOKEN"}
    with pytest.raises(ConfigError, match=r"http\.auth\.token is not set"):
        load_config(properties, [], without)


def test_no_network_policy_opens_a_port_to_every_source() -> None:
    for (kind, name), doc in by_kind().items():
        if kind != "NetworkPolicy":
            continue
        for rule in doc["spec"]["ingress"]:
            assert rule.get("from"), f"{name}: an ingress rule without 'from' admits every source"
            assert 4040 not in [p["port"] for p in rule.get("ports", [])], f"{name}: the Spark UI"


def test_the_sidecar_in_the_driver_pod_gets_no_service_account_token() -> None:
    spec = driver_template()["spec"]
    (sidecar,) = [c for c in spec["initContainers"] if c["name"] == "timesync"]
    (mount,) = [
        m
        for m in sidecar["volumeMounts"]
        if m["mountPath"] == "/var/run/secrets/kubernetes.io/serviceaccount"
    ]
    (volume,) = [v for v in spec["volumes"] if v["name"] == mount["name"]]
    assert "emptyDir" in volume, "an empty directory over the token the driver's service account gets"


def test_the_spark_submit_example_authenticates_encrypts_and_cannot_kill_from_the_ui() -> None:
    text = (K8S / "spark-driver-pod-template.yaml").read_text()
    for conf in (
        "spark.authenticate=true",
        "spark.network.crypto.enabled=true",
        "spark.io.encryption.enabled=true",
        "spark.ui.killEnabled=false",
    ):
        assert f"--conf {conf}" in text, conf
