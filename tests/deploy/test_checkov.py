"""checkov finds nothing in the manifests, the rendered chart and the Dockerfile, and every check
it is told to skip says why in the manifest itself (needs `make deploy-check`)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy.conftest import CHART, DEPLOY, K8S, load_all, run

pytestmark = pytest.mark.deploy_tools

# Checks the chart's defaults fail on purpose (the chart carries no scanner annotations).
CHART_SKIPS = {
    "CKV_K8S_43": "images are published by version tag; set image.digest to pin a digest",
    "CKV_K8S_15": "pullPolicy IfNotPresent is right for immutable version tags; values can say Always",
    "CKV_K8S_35": "the sidecar reads its secrets from TIMESYNC_* variables only (the HTTP token, Kafka "
    "passwords); the pod spec names the Secret, never the value",
}


def scan(checkov: str, out_dir: Path, *target: str) -> dict[str, Any]:
    """Run checkov; its report per framework. The report goes to a file: with several targets
    checkov prints several JSON documents to stdout."""
    # --skip-download: no policy metadata from the vendor's platform (no internet here, none needed).
    cmd = [
        checkov,
        *target,
        "--output",
        "json",
        "--output-file-path",
        str(out_dir),
        "--quiet",
        "--skip-download",
    ]
    result = run(cmd, timeout=300)
    assert result.returncode in (0, 1), result.stderr[-2000:]
    reports = json.loads((out_dir / "results_json.json").read_text())
    return {r["check_type"]: r for r in (reports if isinstance(reports, list) else [reports])}


def failures(reports: dict[str, Any]) -> list[str]:
    return [
        f"{c['check_id']} {c['resource']} ({c['file_path']}): {c['check_name']}"
        for r in reports.values()
        for c in r["results"]["failed_checks"]
    ]


@pytest.fixture(scope="module")
def rendered_chart(helm: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("chart") / "timesync.yaml"
    sets = ["config.bootstrap\\.servers=kafka:9092", "config.input\\.topics=a", "config.output\\.topic=b"]
    result = run(
        [
            helm,
            "template",
            "ts",
            str(CHART),
            "--namespace",
            "streams",
            *[a for s in sets for a in ("--set", s)],
        ]
    )
    assert result.returncode == 0, result.stderr
    out.write_text(result.stdout)
    return out


def test_manifests_and_dockerfile_have_no_failed_checks(checkov: str, tmp_path: Path) -> None:
    reports = scan(
        checkov,
        tmp_path,
        "-d",
        str(K8S),
        "-d",
        str(DEPLOY / "docker"),
        "--framework",
        "kubernetes",
        "dockerfile",
    )
    assert set(reports) == {"kubernetes", "dockerfile"}
    assert failures(reports) == []
    assert all(r["summary"]["passed"] > 50 for r in reports.values()), "checkov scanned almost nothing"


def test_rendered_chart_has_no_failed_checks(checkov: str, rendered_chart: Path, tmp_path: Path) -> None:
    skip = ",".join(CHART_SKIPS)
    reports = scan(
        checkov, tmp_path, "-f", str(rendered_chart), "--framework", "kubernetes", "--skip-check", skip
    )
    assert failures(reports) == []
    assert reports["kubernetes"]["summary"]["passed"] > 50, "checkov scanned almost nothing"


def test_every_skipped_check_is_explained() -> None:
    for path in sorted(K8S.glob("*.yaml")):
        for doc in load_all(path):
            for key, value in (doc["metadata"].get("annotations") or {}).items():
                if key.startswith("checkov.io/skip"):
                    check, _, reason = value.partition("=")
                    assert re.fullmatch(r"CKV2?_K8S_\d+", check), f"{path.name}: {value}"
                    assert len(reason.split()) >= 4, f"{path.name}: skip {check} needs a reason"


def test_checkov_is_really_scanning(checkov: str, tmp_path: Path) -> None:
    """Guard against a scan that passes whatever it is given."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "bad", "namespace": "x"},
        "spec": {
            "containers": [{"name": "c", "image": "nginx:latest", "securityContext": {"privileged": True}}]
        },
    }
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(pod))
    failed = {
        f.split()[0]
        for f in failures(scan(checkov, tmp_path / "out", "-d", str(tmp_path), "--framework", "kubernetes"))
    }
    assert {"CKV_K8S_16", "CKV_K8S_14"} <= failed  # privileged; latest tag
