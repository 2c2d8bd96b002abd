"""deploy/grafana/timesync.json: a dashboard whose every query parses as PromQL and asks only
for series the sidecar exposes, with their real labels."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import promql_parser
import pytest

from tests.deploy.conftest import DEPLOY
from tests.deploy.contract import METRICS, TARGET_LABELS, base_metric

DASHBOARD = DEPLOY / "grafana" / "timesync.json"
# Grafana's variables, replaced by something PromQL accepts before parsing.
VARIABLES = {"$__rate_interval": "1m", "$__interval": "1m", "$__range": "1h"}


def dashboard() -> dict[str, Any]:
    return json.loads(DASHBOARD.read_text())


def panels(d: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for panel in d["panels"]:
        yield panel
        yield from panel.get("panels", [])


def queries(d: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(where, PromQL) for every panel target and every query variable."""
    for panel in panels(d):
        for target in panel.get("targets", []):
            yield f"panel {panel['title']!r} {target['refId']}", target["expr"]
    for var in d["templating"]["list"]:
        if var["type"] == "query":
            # label_values(<selector>, <label>) is Grafana's, not PromQL: check the selector.
            m = re.fullmatch(r"label_values\((.+),\s*(\w+)\)", var["query"]["query"])
            assert m, f"variable {var['name']}: unexpected query {var['query']['query']!r}"
            yield f"variable {var['name']}", m.group(1)


def parse(expr: str) -> promql_parser.Expr:
    for name, value in VARIABLES.items():
        expr = expr.replace(name, value)
    expr = re.sub(r"\$\{?\w+\}?", ".*", expr)  # $job, ${instance}: only ever inside =~ matchers
    return promql_parser.parse(expr)


def selectors(expr: promql_parser.Expr) -> tuple[list[tuple[str, set[str]]], set[str]]:
    """The series selected (name, matcher labels) and the labels grouped by."""
    found: list[tuple[str, set[str]]] = []
    grouped: set[str] = set()

    def visit(node: promql_parser.Expr) -> bool:
        if isinstance(node, promql_parser.VectorSelector):
            found.append((node.name, {m.name for m in node.matchers.matchers}))
        if isinstance(node, promql_parser.AggregateExpr) and node.modifier is not None:
            grouped.update(node.modifier.labels)
        return True

    promql_parser.walk(expr, visit)
    return found, grouped


def all_queries() -> list[tuple[str, str]]:
    return list(queries(dashboard()))


def test_dashboard_is_a_grafana_dashboard() -> None:
    d = dashboard()
    assert d["uid"] == "timesync"
    assert d["title"]
    assert isinstance(d["schemaVersion"], int)
    ids = [p["id"] for p in panels(d)]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    for panel in panels(d):
        grid = panel["gridPos"]
        assert grid["x"] >= 0, panel["title"]
        assert grid["x"] + grid["w"] <= 24, panel["title"]
        if panel["type"] != "row":
            assert panel["targets"], f"panel {panel['title']!r} has no query"
            assert panel["datasource"]["uid"] == "${datasource}"
    names = {v["name"] for v in d["templating"]["list"]}
    assert {"datasource", "job", "instance"} <= names


@pytest.mark.parametrize(("where", "expr"), all_queries(), ids=[w for w, _ in all_queries()])
def test_query_uses_only_timesync_series_and_their_labels(where: str, expr: str) -> None:
    found, grouped = selectors(parse(expr))
    assert found, f"{where}: selects no series"
    for name, matched in found:
        metric = base_metric(name)
        assert metric is not None, f"{where}: {name} is not a timesync metric"
        allowed = METRICS[metric] | TARGET_LABELS
        assert matched <= allowed, f"{where}: {name} has no label {sorted(matched - allowed)}"
        assert grouped <= allowed, f"{where}: groups by {sorted(grouped - allowed)}, not a label of {name}"


def test_every_timesync_metric_is_on_the_dashboard() -> None:
    used = {base_metric(name) for _, expr in all_queries() for name, _ in selectors(parse(expr))[0]}
    assert sorted(set(METRICS) - used) == []


def test_lateness_is_shown_as_a_histogram() -> None:
    heatmaps = [p for p in panels(dashboard()) if p["type"] == "heatmap"]
    (heatmap,) = heatmaps
    (target,) = heatmap["targets"]
    assert target["format"] == "heatmap"
    assert "timesync_record_lateness_seconds_bucket" in target["expr"]


def test_the_checks_catch_an_unknown_metric_and_a_bad_query() -> None:
    found, _ = selectors(parse('sum(rate(timesync_records_total{job=~"$job"}[$__rate_interval]))'))
    assert [base_metric(name) for name, _ in found] == [None]
    with pytest.raises(ValueError, match="parenthesis"):
        parse("sum(rate(timesync_records_in_total[1m])")


def test_every_metric_is_in_the_deploy_docs_with_its_labels() -> None:
    """deploy/README.md's metrics table lists each series of the registry, with its labels."""
    text = (DEPLOY / "README.md").read_text()
    rows = dict(re.findall(r"^\| `(timesync_\w+)` \|([^|]*)\|", text, flags=re.M))
    assert sorted(rows) == sorted(METRICS)
    for name, labels in rows.items():
        documented = set(re.findall(r"`(\w+)`", labels)) | ({"le"} if "histogram" in labels else set())
        assert documented == METRICS[name], name
