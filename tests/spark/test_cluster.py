"""``timesync-spark suppress`` on a Spark standalone cluster (a master and a worker on loopback;
executors in JVMs of their own), end to end from an ordered topic the sidecar wrote: the Kafka
connector jars and suppress's operator jar reach the executors (their work folders hold them;
suppress's rule runs there, in the JVM), and the results are the windows of the input.

``aggregate`` is not run here as well: it reaches the executors by the same path (the connector
jars of the same session builder), and a second driver and executor on two cores cost this test
more than half its time; tests/spark/test_aggregate.py holds its results in ``local[2]``.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import pytest

from sidecar.kafka.admin import TopicSpec
from testkit import kafka_io
from testkit.processes import terminate
from testkit.sidecar_process import SidecarProcess
from testkit.spark_cluster import SparkCluster
from testkit.workloads import Event

pytestmark = [pytest.mark.spark, pytest.mark.broker, pytest.mark.slow, pytest.mark.timeout(420)]

N, DEVICES, STEP_MS, WINDOW_MS = 400, 4, 50, 1000
#: Two jobs at once took 175 s here on 2 cores shared by other work (load average ~19).
JOB_TIMEOUT_S = 240


def readings(topic: str, base: int) -> list[Event]:
    """Four devices, one reading every 50 ms in turn, over two partitions (even and odd)."""
    return [
        Event(topic, i % 2, base + i * STEP_MS, f"d{i % DEVICES}".encode(),
              json.dumps({"device": f"d{i % DEVICES}", "temp": float(i)}).encode(), 0)
        for i in range(N)
    ]  # fmt: skip


def windows(events: list[Event]) -> dict[tuple[str, int], tuple[int, float]]:
    """(device, window start) -> (count, max temp) of the input."""
    out: dict[tuple[str, int], list[float]] = defaultdict(list)
    for e in events:
        value = json.loads(e.value)
        out[(value["device"], e.ts // WINDOW_MS * WINDOW_MS)].append(value["temp"])
    return {k: (len(v), max(v)) for k, v in out.items()}


async def spark_job(cluster: SparkCluster, job: str, *args: str, log: Path) -> int:
    """``python -m spark_consumer JOB --master spark://... ARGS`` (one core, small executor)."""
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    argv = [
        sys.executable, "-m", "spark_consumer", job, "--master", cluster.master_url,
        "--trigger", "available-now", "--conf", "spark.executor.memory=512m",
        "--conf", "spark.cores.max=1",
        "--value-schema", "device STRING, temp DOUBLE",
        "--key-field", "device", "--size", f"{WINDOW_MS}ms", "--agg", "count", "--agg", "max:temp", *args,
    ]  # fmt: skip
    if os.environ.get("SPARK_SUBMIT_OPTS"):
        # The executor's JVM takes the suite's options for Spark's JVMs too (tests/conftest.py).
        argv += ["--conf", f"spark.executor.extraJavaOptions={os.environ['SPARK_SUBMIT_OPTS']}"]
    with log.open("wb") as out:
        proc = await asyncio.create_subprocess_exec(*argv, stdout=out, stderr=out, env=env)
    try:
        return await asyncio.wait_for(proc.wait(), JOB_TIMEOUT_S)
    finally:
        await terminate(proc, 30)  # a job cut short (timeout, cancelled) must not outlive the test


async def test_suppress_runs_on_a_standalone_cluster_with_its_jars_on_the_executors(
    bootstrap: str, topic_name: Callable[[str], str], tmp_path: Path
) -> None:
    source, ordered = topic_name("in"), topic_name("ordered")
    cluster_starting = asyncio.ensure_future(SparkCluster(tmp_path / "cluster", memory="1g").__aenter__())
    cluster: SparkCluster | None = None
    try:
        events = readings(source, int(time.time() * 1000) - 10 * 60_000)
        await kafka_io.create_topics(bootstrap, [TopicSpec(source, 2)])
        await kafka_io.produce(bootstrap, events)
        async with SidecarProcess(bootstrap, [source], ordered, log_dir=tmp_path) as sidecar:
            while int((await sidecar.status())["tasks"]["0"]["records_out"]) < N:
                await asyncio.sleep(0.2)
        cluster = await cluster_starting

        # The driver and its executor in JVMs of their own, the executor on the worker.
        jobs = {"suppress": ["--ttl", "5s"]}
        outs = {job: topic_name(job) for job in jobs}
        codes = await asyncio.gather(
            *(
                spark_job(
                    cluster, job, "--bootstrap-servers", bootstrap, "--topic", ordered,
                    "--output-topic", outs[job], "--checkpoint", str(tmp_path / f"ck-{job}"), *extra,
                    log=tmp_path / f"{job}.log",
                )
                for job, extra in jobs.items()
            )
        )  # fmt: skip
        results: dict[str, list[dict[str, object]]] = {}
        for job, code in zip(jobs, codes, strict=True):
            log = (tmp_path / f"{job}.log").read_text(errors="replace")
            assert code == 0, f"{job} exited {code}:\n{log[-3000:]}"
            records = await kafka_io.read_topics(bootstrap, [outs[job]], idle_s=1.0, timeout_s=30)
            results[job] = [json.loads(r.value) for r in records]

        expected = windows(events)
        last_start: dict[str, int] = defaultdict(int)
        for key, start in expected:
            last_start[key] = max(last_start[key], start)
        for job, rows in results.items():
            got = {(r["key"], r["window_start"]): (r["count"], r["max_temp"]) for r in rows}
            assert len(got) == len(rows), f"{job}: a window twice"
            assert {k: expected[k] for k in got} == got, f"{job}: windows as the input has them"  # type: ignore[index]
            # A key's windows before its last are final: the key's stream time passed their ends.
            closed = {k for k in expected if k[1] < last_start[k[0]]}
            assert closed <= set(got), (
                f"{job}: every window before the last is final: {sorted(closed - set(got))}"
            )

        apps = cluster.state()["completedapps"]
        assert isinstance(apps, list)
        assert len(apps) == len(jobs)
        for app in apps:
            folders = list((cluster.work_dir / app["id"]).iterdir())
            assert folders, f"no executor ran for {app['name']}"
            fetched = [p.name for f in folders for p in f.glob("spark-sql-kafka-0-10_*.jar")]
            assert fetched, f"the executors of {app['name']} did not fetch the Kafka connector"
        operator = [
            p.name
            for a in apps
            for p in (cluster.work_dir / a["id"]).glob("*/timesync-suppress-operator-*.jar")
        ]
        assert operator, "the executors did not fetch the suppress operator"
    finally:
        if cluster is None:
            cluster = await cluster_starting
        await cluster.__aexit__()
