"""The core is sans-I/O: no event loop, no Kafka client, no clock of its own."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import sidecar.core

CORE = Path(sidecar.core.__file__).parent
FORBIDDEN = {
    "asyncio",
    "aiokafka",
    "time",
    "socket",
    "threading",
    "sidecar.kafka",
    "sidecar.output",
    "sidecar.service",
}


def imported_modules(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_core_source_imports_no_asyncio_aiokafka_or_time() -> None:
    offenders = {
        f"{path.name}: {name}"
        for path in CORE.glob("*.py")
        for name in imported_modules(path)
        if name in FORBIDDEN or name.split(".")[0] in {"asyncio", "aiokafka", "time"}
    }
    assert not offenders


def test_core_never_reads_the_wall_clock() -> None:
    for path in CORE.glob("*.py"):
        text = path.read_text()
        for call in (
            "datetime.now(",
            "datetime.utcnow(",
            "date.today(",
            ".now()",
            "perf_counter",
            "monotonic(",
        ):
            assert call not in text, f"{path.name} reads the clock via {call}"


def test_importing_the_core_loads_no_event_loop_or_kafka_client() -> None:
    probe = "import sys, sidecar.core; print(sorted(m for m in ('asyncio', 'aiokafka') if m in sys.modules))"
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert "asyncio" not in loaded
    assert "aiokafka" not in loaded
