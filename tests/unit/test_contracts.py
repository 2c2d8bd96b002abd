"""docs/contracts.md names only what the code has: headers, heartbeat, ids, assignor, metrics, /status.

A contract that names a header or a metric the code does not write would send a consumer or an
alert after nothing; one the code writes but the page leaves out is not promised to anyone.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

from sidecar.core import stamping
from sidecar.kafka.assignor import TaskAssignor
from sidecar.service import claim
from sidecar.service.grouping import GROUPINGS
from sidecar.service.metrics import Metrics
from tests.fakes.kafka import FakeCluster
from tests.unit.service.harness import OUT, config, sidecar, sources

CONTRACTS = Path(__file__).resolve().parents[2] / "docs" / "contracts.md"


def section(title: str) -> str:
    text = CONTRACTS.read_text()
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end > 0 else len(text)]


def table_names(text: str, prefix: str) -> list[str]:
    """First-column names of a Markdown table, e.g. ``timesync.source.topic``."""
    return re.findall(rf"^\| `({re.escape(prefix)}[^`]*)` \|", text, flags=re.M)


def test_the_header_table_is_the_stamping_module() -> None:
    written = {v for k, v in vars(stamping).items() if k.isupper() and isinstance(v, str)}
    timesync_headers = {h for h in written if h.startswith("timesync.")}
    assert sorted(table_names(section("The ordered topic"), "timesync.")) == sorted(timesync_headers)
    connect = set(re.findall(r"`(__connect\.errors\.[a-z.]+)`", section("The ordered topic")))
    assert connect == {h for h in written if h.startswith("__connect.errors.")}


def test_the_heartbeat_format_is_what_the_sidecar_writes() -> None:
    key, value, timestamp, headers = stamping.heartbeat(1234)
    assert (key, value, timestamp) == (None, b"", 1234)
    assert dict(headers) == {"timesync.control": b"watermark", "timesync.watermark": b"1234"}
    text = section("The ordered topic")
    assert "null key, empty value, Kafka timestamp = the watermark" in text
    assert "`timesync.control=watermark` and `timesync.watermark`" in text


def test_transactional_ids_and_assignor_name() -> None:
    text = section("Names in the cluster")
    assert GROUPINGS["single"].transactional_id("g", "0") == "g-txn"
    assert GROUPINGS["partition"].transactional_id("g", "3") == "g-txn-3"
    assert "`<group.id>-txn` with `task.grouping=single`; `<group.id>-txn-<task>` with `partition`" in text
    assert f"`{TaskAssignor.name}`" in text
    default = config(["a"]).effective_group_id
    assert default == "timesync-" + OUT
    assert "`timesync-<output.topic>` (`group.id` sets it)" in text


def test_the_claim_format() -> None:
    encoded = claim.encode(claim.Claim("pod-1", 5, "running"))
    assert set(json.loads(encoded)) == {"timesync", "owner", "at", "state"}
    assert json.loads(encoded)["timesync"] == 1
    assert '`{"timesync": 1, "owner", "at", "state"}`' in section("Names in the cluster")


def test_the_metrics_table_is_the_registry() -> None:
    metrics = Metrics()
    exposed = set()
    for family in metrics.registry.collect():
        exposed.add(family.name + "_total" if family.type == "counter" else family.name)
    assert sorted(table_names(section("Metrics"), "timesync_")) == sorted(exposed)


def live_status() -> dict[str, Any]:
    """``/status`` of a sidecar running on the in-memory cluster, once its output is written."""
    cluster = FakeCluster()
    cluster.create_topic("a", 1)
    cluster.produce("a", 0, range(1_000, 1_010))

    async def run() -> dict[str, Any]:
        s = sidecar(cluster, config(["a"]))
        running = asyncio.create_task(s.run())
        try:
            async with asyncio.timeout(10):
                while len(sources(cluster.read(OUT))) < 10:
                    await asyncio.sleep(0.01)
            return s.status()
        finally:
            s.request_stop()
            await running

    return asyncio.run(run())


def test_every_status_field_the_contract_names_is_there() -> None:
    text = section("HTTP")
    status_part = text[text.index("`GET /status`") : text.index("`GET /offsets`")]
    top, per_task = status_part.split("`tasks`:", 1)
    per_task, per_partition = per_task.split("`partitions`:", 1)
    per_partition = per_partition.split("The wording")[0]
    status = live_status()
    (task,) = status["tasks"].values()
    (partition,) = task["partitions"]
    names = re.compile(r"`([a-z_]+)`")
    top_fields = [n for n in names.findall(top) if n not in {"state"}] + ["state", "tasks"]
    assert set(top_fields) <= set(status), sorted(set(top_fields) - set(status))
    assert set(names.findall(per_task.split("blocked_by")[0])) <= set(task)
    assert "blocked_by" in task
    assert set(names.findall(per_partition)) <= set(partition)
    assert status["state"] in re.findall(r"`([A-Z]+)`", top)
