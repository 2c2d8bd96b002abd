"""Measure the Kafka Streams peer on its own: jar build time, start-to-READY, merge throughput.

    .venv/bin/python bench/peers/kafka-streams/measure.py [--records 200000] [--cold-build]

Throughput: ``--records`` records of ``--value-bytes`` bytes are written first to two
co-partitioned topics (2 partitions each, 4 in all, timestamps interleaved), then the peer merges
them. The output topic uses LogAppendTime, so the broker's append times of the first and last
output record give the merge's records/s without the reading client's speed in the figure. CPU
seconds (in all, and after READY: the merge without JVM start-up) and peak RSS (VmHWM) of the
peer's JVM come from /proc/<pid>. The machine's other load counts: note ``uptime`` with the figures.
Uses ``KAFKA_BOOTSTRAP_SERVERS`` if set, else starts (and stops) a local broker.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO))

from aiokafka import AIOKafkaConsumer, TopicPartition  # noqa: E402

from bench.peers import kafka_streams as ks  # noqa: E402
from sidecar.kafka.admin import TopicSpec  # noqa: E402
from testkit.kafka_io import create_topics, produce, read_topics  # noqa: E402
from testkit.local_broker import kafka  # noqa: E402
from testkit.workloads import Event  # noqa: E402


def _timed_build(clean: bool, maven_repo: str | None = None) -> float:
    if clean:
        shutil.rmtree(ks.PEER_DIR / "target", ignore_errors=True)
    started = time.monotonic()
    if maven_repo is None:
        ks.build()
    else:  # a first build on a machine whose Maven cache is empty: every jar is downloaded
        subprocess.run(
            ["mvn", "-q", "-B", f"-Dmaven.repo.local={maven_repo}", "-f", str(ks.POM), "package"], check=True
        )
    return time.monotonic() - started


def _proc_usage(pid: int) -> tuple[float, int]:
    """(CPU seconds user+system, peak RSS bytes) of a running process."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    cpu = (int(fields[11]) + int(fields[12])) / ticks
    status = Path(f"/proc/{pid}/status").read_text()
    hwm_kb = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM:"))
    return cpu, hwm_kb * 1024


async def _wait_for_end_offsets(
    bootstrap: str, topic: str, partitions: int, records: int, timeout_s: float
) -> None:
    """Wait until ``topic`` holds ``records`` records, asking only for end offsets: a consumer
    reading along would compete with the peer for this machine's two cores."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap)
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        deadline = time.monotonic() + timeout_s
        while sum((await consumer.end_offsets(tps)).values()) < records:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{topic} did not reach {records} records within {timeout_s:g} s")
            await asyncio.sleep(0.1)
    finally:
        await consumer.stop()


def _events(a: str, b: str, records: int, value_bytes: int) -> list[Event]:
    tps = [(a, 0), (a, 1), (b, 0), (b, 1)]
    pad = b"x" * value_bytes
    return [
        Event(tps[i % 4][0], tps[i % 4][1], 1_700_000_000_000 + i, b"k%d" % (i % 100), pad, 0)
        for i in range(records)
    ]


async def _throughput(
    bootstrap: str, records: int, value_bytes: int, idle: ks.IdleMs, config: dict[str, str] | None = None
) -> dict[str, object]:
    run = uuid.uuid4().hex[:8]
    a, b, out = f"ks-measure-a-{run}", f"ks-measure-b-{run}", f"ks-measure-out-{run}"
    await create_topics(
        bootstrap,
        [
            TopicSpec(a, partitions=2),
            TopicSpec(b, partitions=2),
            TopicSpec(out, partitions=2, configs={"message.timestamp.type": "LogAppendTime"}),
        ],
    )
    started = time.monotonic()
    await produce(bootstrap, _events(a, b, records, value_bytes))
    produce_s = time.monotonic() - started
    settings = ks.PeerSettings(bootstrap, [a, b], out, idle, f"ks-measure-{run}", config=config)
    async with ks.KafkaStreamsPeer(settings) as peer:
        cpu_ready_s, _ = _proc_usage(peer.pid)
        await _wait_for_end_offsets(bootstrap, out, 2, records, timeout_s=300)
        cpu_s, peak_rss = _proc_usage(peer.pid)
        code = await peer.stop()
    got = await read_topics(bootstrap, [out], expected=records)
    append_ms = [r.timestamp for r in got]
    span_s = (max(append_ms) - min(append_ms)) / 1000
    return {
        "records": records,
        "value_bytes": value_bytes,
        "max_task_idle_ms": idle,
        "produce_s": round(produce_s, 2),
        "ready_after_s": round(peer.ready_after_s or 0.0, 2),
        "output_records": len(got),
        "first_to_last_output_s": round(span_s, 3),
        "records_per_s": round(len(got) / span_s) if span_s > 0 else None,
        "peer_cpu_s_total": round(cpu_s, 2),
        "peer_cpu_s_after_ready": round(cpu_s - cpu_ready_s, 2),
        "peer_peak_rss_mib": round(peak_rss / 2**20, 1),
        "peer_exit_code": code,
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--value-bytes", type=int, default=100)
    # Not "max": on pre-produced data the partition that runs dry first holds its task forever.
    parser.add_argument("--max-task-idle-ms", type=int, default=0, help="-1, 0 or N ms")
    parser.add_argument("--ready-runs", type=int, default=3, help="extra start/stop runs for start-to-READY")
    parser.add_argument(
        "--cold-build", action="store_true", help="also time a build with an empty Maven cache"
    )
    parser.add_argument("--no-build-timing", action="store_true", help="reuse the jar (build only if stale)")
    args = parser.parse_args()
    idle: ks.IdleMs = args.max_task_idle_ms

    result: dict[str, object] = {}
    if args.no_build_timing:
        ks.build()
    elif args.cold_build:
        with tempfile.TemporaryDirectory(prefix="ks-peer-m2-") as repo:
            result["build_empty_maven_cache_s"] = round(_timed_build(clean=True, maven_repo=repo), 1)
    if not args.no_build_timing:
        result["build_clean_target_s"] = round(_timed_build(clean=True), 1)
        result["build_cached_s"] = round(_timed_build(clean=False), 3)
        print(json.dumps(result), file=sys.stderr, flush=True)

    with kafka() as bootstrap:
        result["throughput"] = asyncio.run(_throughput(bootstrap, args.records, args.value_bytes, idle))
        ready = []
        for _ in range(args.ready_runs):
            result_one = asyncio.run(_throughput(bootstrap, 1_000, args.value_bytes, idle))
            ready.append(result_one["ready_after_s"])
        result["ready_after_s_runs"] = ready
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
