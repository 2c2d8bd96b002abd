"""The ceiling: what this broker accepts and serves at all, measured with Kafka's own perf tools.

Every system in the throughput phase consumes a backlog and produces it again, so none can be
faster than the broker takes records in, nor than it hands them out. Kafka's own tools measure
both sides with the Java client, alone on the same broker, on the same records:

* ``ProducerPerformance`` writes ``records`` records of the shape's size (``--record-size``, or
  ``--payload-file`` with the shape's own values) into a fresh 1-partition topic — one output
  partition, as the passthrough and ``task.grouping=single`` write — with the producer settings
  a throughput-minded user gives it (acks=all, idempotence, lz4, linger 5 ms, 256 KiB batches);
  the first tenth are its ``--warmup-records`` (left out of its steady figure);
* ``ConsumerPerformance`` reads the shape's backlog (both input topics) from the start.

The ceiling of a consume → produce copy is the lower of the two rates; every system is reported
as a ratio to it. The tools come from Maven Central (``org.apache.kafka:kafka-tools``, see
``bench/peers/kafka-tools/pom.xml``) and are fetched on first use.
"""

from __future__ import annotations

import asyncio
import re
import resource
import shutil
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.peers.kafka_streams import PeerError, java_executable

TOOLS_DIR = Path(__file__).resolve().parent / "peers" / "kafka-tools"
LIB = TOOLS_DIR / "target" / "lib"
PRODUCER = "org.apache.kafka.tools.ProducerPerformance"
CONSUMER = "org.apache.kafka.tools.ConsumerPerformance"
JVM_OPTIONS = ("-Xmx512m",)
PRODUCER_PROPS = {
    "acks": "all",
    "enable.idempotence": "true",
    "compression.type": "lz4",
    "linger.ms": "5",
    "batch.size": "262144",
}


def fetch_tools() -> Path:
    """The kafka-tools jars (``mvn dependency:copy-dependencies`` on first use); returns their folder."""
    if LIB.is_dir() and any(LIB.glob("kafka-tools-*.jar")):
        return LIB
    mvn = shutil.which("mvn")
    if mvn is None:
        raise PeerError("mvn not found on PATH: install Apache Maven to fetch Kafka's perf tools")
    cmd = [mvn, "-q", "-B", "-f", str(TOOLS_DIR / "pom.xml"), "dependency:copy-dependencies"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0 or not any(LIB.glob("kafka-tools-*.jar")):
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-20:])
        raise PeerError(f"fetching kafka-tools failed ({' '.join(cmd)}, exit {proc.returncode}):\n{tail}")
    return LIB


async def _run_tool(cls: str, args: Sequence[str], timeout_s: float) -> tuple[str, float, float]:
    """Run one tool to the end; (stdout, wall s, CPU s of the JVM, start-up included).

    The CPU comes from ``RUSAGE_CHILDREN``: the harness runs nothing else meanwhile, so the
    children reaped during the call are this JVM alone.
    """
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    proc = await asyncio.create_subprocess_exec(
        java_executable(),
        *JVM_OPTIONS,
        "-cp",
        f"{fetch_tools()}/*",
        cls,
        *args,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout_s)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise PeerError(f"{cls} did not finish within {timeout_s:g} s") from None
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise PeerError(f"{cls} failed (exit {proc.returncode}): {err.decode(errors='replace')[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return out.decode(errors="replace"), time.monotonic() - started, cpu


_SENT = re.compile(r"(\d+) (?:steady state )?records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\)")


def parse_producer(stdout: str) -> dict[str, float]:
    """The summary of ``ProducerPerformance``: the last ``N records sent, R records/sec (M MB/sec)``
    line (with ``--warmup-records`` it is the steady-state one, after the warm-up)."""
    found = _SENT.findall(stdout)
    if not found:
        raise ValueError(f"no summary line in ProducerPerformance's output: {stdout[-500:]!r}")
    records, rate, mb = found[-1]
    return {"records": int(records), "records_per_s": float(rate), "mb_per_s": float(mb)}


def parse_consumer(stdout: str) -> dict[str, float]:
    """``ConsumerPerformance``'s CSV summary (header line, then values), by column name.

    ``fetch.nMsg.sec`` is the rate while fetching (group join excluded), ``nMsg.sec`` overall."""
    lines = [line for line in stdout.splitlines() if "," in line]
    header = next((i for i, line in enumerate(lines) if "nMsg.sec" in line), None)
    if header is None or header + 1 >= len(lines):
        raise ValueError(f"no summary in ConsumerPerformance's output: {stdout[-500:]!r}")
    row = dict(
        zip(
            (c.strip() for c in lines[header].split(",")),
            (v.strip() for v in lines[header + 1].split(",")),
            strict=False,
        )
    )
    return {
        "records": int(float(row["data.consumed.in.nMsg"])),
        "records_per_s": float(row["fetch.nMsg.sec"]),
        "records_per_s_overall": float(row["nMsg.sec"]),
        "mb_per_s": float(row["fetch.MB.sec"]),
    }


async def producer_performance(
    bootstrap: str, topic: str, records: int, record_bytes: int, payload_file: Path | None
) -> dict[str, Any]:
    args = ["--bootstrap-server", bootstrap, "--topic", topic, "--num-records", str(records)]
    args += ["--throughput", "-1", "--warmup-records", str(records // 10)]
    args += ["--payload-file", str(payload_file)] if payload_file else ["--record-size", str(record_bytes)]
    args += ["--producer-props", *(f"{k}={v}" for k, v in PRODUCER_PROPS.items())]
    out, wall, cpu = await _run_tool(PRODUCER, args, timeout_s=max(120, records / 5_000))
    parsed = parse_producer(out)
    return {
        "tool": "ProducerPerformance",
        "records": records,
        "warmup_records": records // 10,
        "record_bytes": record_bytes,
        "payload": "payload file (the shape's values)" if payload_file else "random bytes",
        "producer_props": PRODUCER_PROPS,
        "records_per_s": round(parsed["records_per_s"]),
        "mb_per_s": parsed["mb_per_s"],
        "wall_s": round(wall, 2),
        "cpu_s_with_start": round(cpu, 2),
    }


async def consumer_performance(
    bootstrap: str, topics: Sequence[str], records: int, group: str
) -> dict[str, Any]:
    include = "|".join(re.escape(t) for t in topics)
    args = ["--bootstrap-server", bootstrap, "--include", f"^({include})$", "--num-records", str(records)]
    args += ["--group", group, "--timeout", "30000"]
    out, wall, cpu = await _run_tool(CONSUMER, args, timeout_s=max(120, records / 10_000))
    parsed = parse_consumer(out)
    return {
        "tool": "ConsumerPerformance",
        "records": parsed["records"],
        "records_per_s": round(parsed["records_per_s"]),
        "records_per_s_overall": round(parsed["records_per_s_overall"]),
        "mb_per_s": parsed["mb_per_s"],
        "wall_s": round(wall, 2),
        "cpu_s_with_start": round(cpu, 2),
    }
