"""Service links in what we ship: every pod spec turns them off, and the sidecar survives them.

``tests/unit/test_config_service_links.py`` runs in ``make test`` without helm and derives the
chart's Services from its files (``tests/deploy/service_links.py``). The helm tests here (marked
``deploy_tools``) check that derivation against the real renderer, and the config against the
variables of the really rendered Services.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from sidecar.config import load_config
from tests.deploy.conftest import CHART, K8S, load_all, run
from tests.deploy.service_links import RELEASES, chart_services, manifest_services, service_link_env

REQUIRED = {
    "bootstrap.servers": "kafka:9092",
    "input.topics": "orders,payments",
    "output.topic": "orders-payments.ordered",
}


def rendered_services(helm: str, tmp_path: Path, release: str) -> list[dict[str, Any]]:
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump({"config": REQUIRED}))
    command = [helm, "template", release, str(CHART), "--namespace", "streams", "-f", str(values)]
    result = run([*command, "--kube-version", "1.31.0"])
    assert result.returncode == 0, result.stderr
    docs = [d for d in yaml.safe_load_all(result.stdout) if d]
    return [d for d in docs if d["kind"] == "Service"]


def shape(services: list[dict[str, Any]]) -> list[tuple[str, list[tuple[Any, ...]]]]:
    return [
        (
            s["metadata"]["name"],
            [(p.get("name"), p["port"], p.get("protocol", "TCP")) for p in s["spec"]["ports"]],
        )
        for s in services
    ]


def pod_specs(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    specs = []
    for doc in docs:
        if doc.get("kind") == "Pod":
            specs.append(doc["spec"])
        elif doc.get("kind") in {"Deployment", "StatefulSet", "DaemonSet", "Job"}:
            specs.append(doc["spec"]["template"]["spec"])
    return specs


def test_every_pod_spec_in_the_manifests_turns_service_links_off() -> None:
    specs = [spec for path in sorted(K8S.glob("*.yaml")) for spec in pod_specs(load_all(path))]
    assert len(specs) == 3  # the Deployment, the Spark driver and executor pod templates
    assert all(spec.get("enableServiceLinks") is False for spec in specs)


@pytest.mark.deploy_tools
def test_the_charts_pod_spec_turns_service_links_off(helm: str, tmp_path: Path) -> None:
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump({"config": REQUIRED}))
    result = run([helm, "template", "ts", str(CHART), "-f", str(values), "--kube-version", "1.31.0"])
    assert result.returncode == 0, result.stderr
    (spec,) = pod_specs([d for d in yaml.safe_load_all(result.stdout) if d])
    assert spec["enableServiceLinks"] is False


@pytest.mark.deploy_tools
@pytest.mark.parametrize("release", RELEASES)
def test_the_derived_chart_services_are_what_helm_renders(helm: str, tmp_path: Path, release: str) -> None:
    assert shape(rendered_services(helm, tmp_path, release)) == shape(chart_services(release))


@pytest.mark.deploy_tools
@pytest.mark.parametrize("release", RELEASES)
def test_the_link_variables_of_the_rendered_services_are_ignored(
    helm: str, tmp_path: Path, release: str
) -> None:
    links = service_link_env([*manifest_services(), *rendered_services(helm, tmp_path, release)])
    environ = {"TIMESYNC_" + k.upper().replace(".", "_"): v for k, v in REQUIRED.items()}
    assert load_config(environ={**links, **environ}) == load_config(environ=environ)
