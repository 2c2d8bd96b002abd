"""deploy/prometheus/alerts.yaml: valid rules (``promtool check rules``), each alert firing when it
should and not for its look-alike (``promtool test rules``), on series the sidecar really exposes,
and the same rules in the Helm chart.

promtool comes from Debian's ``prometheus`` package, which ``make test`` installs (``make
prometheus``) where it can; elsewhere these tests skip saying so.
"""

from __future__ import annotations

import re
import shutil

import pytest
import yaml

from sidecar.service.metrics import Metrics
from tests.deploy.conftest import CHART, DEPLOY, run

RULES = DEPLOY / "prometheus" / "alerts.yaml"
RULE_TESTS = DEPLOY / "prometheus" / "alerts.test.yaml"

NO_PROMTOOL = "promtool not installed: `make prometheus` installs Debian's prometheus package (apt-get, root)"


def promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        pytest.skip(NO_PROMTOOL)
    return found


def test_promtool_accepts_the_rules() -> None:
    result = run([promtool(), "check", "rules", str(RULES)])
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 8 rules found" in result.stdout


def test_each_alert_fires_when_it_should_and_not_for_its_look_alike() -> None:
    result = run([promtool(), "test", "rules", str(RULE_TESTS)])
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_alert_has_a_rule_test() -> None:
    alerts = {r["alert"] for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]}
    tested = {
        case["alertname"]
        for t in yaml.safe_load(RULE_TESTS.read_text())["tests"]
        for case in t["alert_rule_test"]
    }
    assert alerts == tested
    assert alerts >= {
        "TimesyncDown",
        "TimesyncWatermarkStalled",
        "TimesyncLagGrowing",
        "TimesyncEnforcedProcessingHigh",
        "TimesyncDeadLetterRatioNearCap",
        "TimesyncSchemaRegistryUnavailable",
    }


def exposed_series() -> set[str]:
    """The series names the sidecar's registry exposes (counters as ``..._total``, histograms as
    ``_bucket``/``_sum``/``_count``), from the real Metrics object."""
    registry = Metrics().registry
    names = set()
    for family in registry.collect():
        suffixes = {"counter": ["_total"], "histogram": ["_bucket", "_sum", "_count"]}.get(family.type, [""])
        names.update(family.name + s for s in suffixes)
    return names


def test_the_rules_ask_only_for_series_the_sidecar_exposes() -> None:
    used = set(re.findall(r"\btimesync_\w+", RULES.read_text()))
    assert used, "no timesync series in the rules"
    assert sorted(used - exposed_series()) == []


def test_the_chart_ships_the_same_rules() -> None:
    assert (CHART / "files" / "alerts.yaml").read_bytes() == RULES.read_bytes(), (
        "deploy/helm/timesync/files/alerts.yaml must be a copy of deploy/prometheus/alerts.yaml"
    )
