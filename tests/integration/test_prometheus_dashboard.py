"""The Grafana dashboard against a real Prometheus that scraped a real sidecar: every panel query
and every variable query returns series, with the labels the panel groups by and names in its
legend. (tests/deploy/test_grafana.py checks the same queries for syntax and known names only.)

Prometheus is Debian's ``prometheus`` package, which ``make test`` installs (``make prometheus``)
where it can; elsewhere this test skips saying so.
"""

from __future__ import annotations

import asyncio
import re
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import orjson
import promql_parser
import pytest

from sidecar.kafka.admin import TopicSpec
from testkit import kafka_io
from testkit.prometheus import Prometheus
from testkit.workloads import Event
from tests.deploy.test_grafana import dashboard, panels, parse

from .conftest import StartSidecar

pytestmark = [pytest.mark.broker, pytest.mark.slow]

JOB = "timesync"
#: Grafana's $__rate_interval for a 1 s scrape interval: max($__interval + scrape, 4 x scrape).
RATE_INTERVAL = "4s"


def workload(topic: str, now_ms: int) -> list[Event]:
    """Two partitions of JSON records in time order, each with one malformed record (dead letter)
    and one far older than its neighbours (late, dropped): every series and label the dashboard
    shows gets a value."""
    events = []
    for p in (0, 1):
        for i in range(200):
            ts = now_ms - 60_000 + i * 10
            value = orjson.dumps({"ts": ts})
            if i == 100:
                value = b"not json"
            if i == 150:
                value = orjson.dumps({"ts": now_ms - 50_000 - 5_000})
            events.append(Event(topic, p, ts, b"k", value, 0))
    return events


def grafana_escape(value: str) -> str:
    """A variable's value as Grafana puts it into a ``=~`` matcher: regex-escaped, then escaped
    for a PromQL string."""
    return re.escape(value).replace("\\", "\\\\")


async def test_every_dashboard_query_returns_the_series_its_panel_shows(
    bootstrap: str, topic_name: Callable[[str], str], sidecar: StartSidecar, tmp_path: Path
) -> None:
    if shutil.which("prometheus") is None:
        pytest.skip(
            "prometheus not installed: `make prometheus` installs Debian's prometheus package (apt-get, root)"
        )
    a, out, dlq = topic_name("a"), topic_name("out"), topic_name("dlq")
    await kafka_io.create_topics(bootstrap, [TopicSpec(a, 2)])
    events = workload(a, int(time.time() * 1000))
    await kafka_io.produce(bootstrap, events)
    process = await sidecar(
        [a],
        out,
        timestamp_extractor="json:ts",
        errors_tolerance="all",
        errors_deadletterqueue_topic_name=dlq,
        errors_deadletterqueue_max_ratio=1.0,
        late_records="drop",
        # auto: the learnt-idle gauge is exported only then, and its panel is checked like any other.
        max_task_idle_ms="auto",
        max_task_idle_budget_ms=200,
    )
    instance = f"127.0.0.1:{process.http_port}"

    async with Prometheus(tmp_path, {JOB: [instance]}) as prom:
        await until_scraped(prom, len(events))

        assert JOB in await prom.label_values("job", "timesync_records_in_total")
        assert instance in await prom.label_values("instance", f'timesync_records_in_total{{job=~"{JOB}"}}')

        checked = 0
        for panel in panels(dashboard()):
            for target in panel.get("targets", []):
                where = f"panel {panel['title']!r} {target['refId']}"
                expr = (
                    target["expr"]
                    .replace("$__rate_interval", RATE_INTERVAL)
                    .replace("$job", grafana_escape(JOB))
                    .replace("$instance", grafana_escape(instance))
                )
                shown = outer_grouping(target["expr"]) | set(
                    re.findall(r"\{\{\s*(\w+)\s*\}\}", target.get("legendFormat") or "")
                )
                result = await prom.query(expr)
                assert result, f"{where}: no series for {expr}"
                for series in result:
                    assert shown <= set(series["metric"]), f"{where}: {series['metric']} lacks {shown}"
                checked += 1
        assert checked >= 20


def outer_grouping(expr: str) -> set[str]:
    """The labels the result is grouped by: the ``by (...)`` of the outermost aggregation (an
    inner one, such as the ``by (le)`` that histogram_quantile consumes, is not in the result)."""
    node = parse(expr)
    if isinstance(node, promql_parser.AggregateExpr) and node.modifier is not None:
        return set(node.modifier.labels)
    return set()


async def until_scraped(prom: Prometheus, records: int, timeout_s: float = 30.0) -> None:
    """Until Prometheus holds at least three scrapes taken after the sidecar read every record,
    and the gauges that appear only once known (watermark, lag, drops by reason)."""
    ready = [
        f'min_over_time(timesync_records_in_total{{job="{JOB}"}}[{RATE_INTERVAL}]) >= {records}',
        f'count_over_time(timesync_records_in_total{{job="{JOB}"}}[{RATE_INTERVAL}]) >= 3',
        f'timesync_watermark_seconds{{job="{JOB}"}}',
        f'timesync_consumer_lag{{job="{JOB}"}}',
        f'timesync_partition_idle_seconds{{job="{JOB}"}}',
        f'count(timesync_dropped_records_total{{job="{JOB}"}}) >= 2',
    ]
    deadline = time.monotonic() + timeout_s
    missing = ready
    while time.monotonic() < deadline:
        missing = [q for q in ready if not await prom.query(q)]
        if not missing:
            return
        await asyncio.sleep(0.5)
    raise AssertionError(f"not in Prometheus within {timeout_s} s: {missing}\n{prom.log_tail()}")
