"""``timesync-spark --help`` needs no pyspark: the sidecar's image installs the wheel without the
``[spark]`` extra, and its users still read the Spark job's usage there. The jobs' command lines
are found in their registry without importing their queries (pyspark comes when a job runs)."""

from __future__ import annotations

import subprocess
import sys

BLOCK_PYSPARK = """
import importlib.abc, sys
class Blocked(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in {"pyspark", "pandas", "pyarrow", "py4j"}:
            raise ImportError(f"no {name} here")
sys.meta_path.insert(0, Blocked())
sys.argv = ["timesync-spark", *sys.argv[1:]]
from spark_consumer.cli import main
main()
"""


def _usage(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", BLOCK_PYSPARK, *args], capture_output=True, text=True, timeout=60, check=False
    )


def test_the_usage_of_every_job_shows_without_pyspark() -> None:
    top = _usage("--help")
    assert top.returncode == 0, top.stderr
    for job in ("join", "aggregate", "suppress"):
        assert job in top.stdout
        own = _usage(job, "--help")
        assert own.returncode == 0, own.stderr
        assert "--bootstrap-servers" in own.stdout
