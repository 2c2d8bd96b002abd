"""The machine and the versions a run measured, for ``results.json``'s ``machine`` and ``versions``."""

from __future__ import annotations

import contextlib
import os
import platform
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench import ceiling as bench_ceiling


def _version(cmd: Sequence[str]) -> str | None:
    try:
        proc = subprocess.run(list(cmd), capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = (proc.stdout + proc.stderr).strip().splitlines()
    return text[0].strip() if text else None


def environment() -> tuple[dict[str, Any], dict[str, Any]]:
    """(machine, versions) for results.json."""
    from importlib import metadata

    def pkg(name: str) -> str | None:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return None

    cpu = platform.processor() or None
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = None
    with contextlib.suppress(OSError, ValueError, IndexError):
        mem = int(Path("/proc/meminfo").read_text().split()[1]) * 1024
    machine = {
        "hostname": platform.node(),
        "os": platform.platform(),
        "cpu": cpu,
        "cpus": os.cpu_count(),
        "memory_bytes": mem,
        "load_average_at_start": list(os.getloadavg()),
    }
    from bench.peers.kafka_streams import POM
    from testkit.local_broker import load_launcher

    launcher = load_launcher()
    versions = {
        "python": platform.python_version(),
        "timesync": pkg("timesync"),
        "aiokafka": pkg("aiokafka"),
        "pyspark": pkg("pyspark"),
        "java": _version(["java", "-version"]),
        "kafka_broker": getattr(launcher, "KAFKA_VERSION", None) or _pom_version(launcher),
        "kafka_streams": _pom_property(POM, "kafka.version"),
        "kafka_tools": _pom_property(bench_ceiling.TOOLS_DIR / "pom.xml", "kafka.version"),
        "confluent_kafka": pkg("confluent-kafka"),
        "librdkafka": _librdkafka(),
        "git_commit": _version(["git", "-C", str(Path(__file__).parent), "rev-parse", "HEAD"]),
    }
    return machine, versions


def _librdkafka() -> str | None:
    try:
        import confluent_kafka
    except ImportError:
        return None
    return str(confluent_kafka.libversion()[0])


def _pom_property(pom: Path, name: str) -> str | None:
    import re

    match = re.search(rf"<{re.escape(name)}>([^<]+)</", pom.read_text())
    return match.group(1) if match else None


def _pom_version(launcher: Any) -> str | None:
    repo = Path(launcher.__file__).parent
    for pom in (repo / "broker" / "pom.xml", repo / "pom.xml"):
        if pom.is_file():
            found = _pom_property(pom, "kafka.version")
            if found:
                return found
    return None


class RunClock:
    """When a measurement started and the machine's load then; :meth:`stamp` adds how long it took
    and the load at its end, so every command's figures come with the load they were measured under."""

    def __init__(self) -> None:
        self.started = time.time()
        self.load_start = list(os.getloadavg())

    def stamp(self) -> dict[str, Any]:
        return {
            "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.started)),
            "duration_s": round(time.time() - self.started, 1),
            "load_average_at_start": self.load_start,
            "load_average_at_end": list(os.getloadavg()),
        }
