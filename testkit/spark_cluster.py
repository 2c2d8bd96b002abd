"""A Spark standalone cluster on loopback — one master, one worker — from the pip pyspark's own
``bin/spark-class`` (the wheel has no ``sbin/start-master.sh``): executors run in JVMs of their own,
started by the worker, as on a real cluster.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
import urllib.request
from pathlib import Path

from testkit.processes import spawn_logged, terminate
from testkit.sidecar_process import free_port

MASTER = "org.apache.spark.deploy.master.Master"
WORKER = "org.apache.spark.deploy.worker.Worker"


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


class SparkCluster:
    """``async with SparkCluster(folder) as cluster: ... cluster.master_url ...``; both daemons are
    stopped (killed if they linger) on exit. ``work_dir`` holds each executor's folder
    (``app-*/<executor id>/``: its stderr and the jars it fetched from the driver)."""

    def __init__(self, folder: Path, cores: int = 2, memory: str = "1g") -> None:
        self.folder = folder
        self.port, self.webui_port = free_port(), free_port()
        self.cores, self.memory = cores, memory
        self.work_dir = folder / "work"
        self.env = {**os.environ, "SPARK_HOME": str(spark_home()), "SPARK_LOCAL_IP": "127.0.0.1"}
        self.env.pop("MASTER", None)
        self.procs: list[asyncio.subprocess.Process] = []

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    async def __aenter__(self) -> SparkCluster:
        spark_class = str(spark_home() / "bin" / "spark-class")
        self.work_dir.mkdir(parents=True, exist_ok=True)
        try:
            self.procs.append(
                await spawn_logged(
                    [spark_class, MASTER, "--host", "127.0.0.1", "--port", str(self.port),
                     "--webui-port", str(self.webui_port)],
                    self.folder / "master.log", env=self.env,
                )
            )  # fmt: skip
            self.procs.append(
                await spawn_logged(
                    [spark_class, WORKER, "--host", "127.0.0.1", "--cores", str(self.cores),
                     "--memory", self.memory, "--webui-port", str(free_port()),
                     "--work-dir", str(self.work_dir), self.master_url],
                    self.folder / "worker.log", env=self.env,
                )
            )  # fmt: skip
            await self._until_a_worker_is_alive()
        except BaseException:
            await self.__aexit__()
            raise
        return self

    async def _until_a_worker_is_alive(self, timeout_s: float = 60.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for proc, name in zip(self.procs, ("master", "worker"), strict=False):
                if proc.returncode is not None:
                    raise RuntimeError(f"spark {name} exited with {proc.returncode}: {self.log_tail(name)}")
            with contextlib.suppress(OSError, ValueError):
                if int(str(self.state().get("aliveworkers", 0))) >= 1:
                    return
            await asyncio.sleep(0.5)
        raise RuntimeError(f"no worker registered within {timeout_s} s: {self.log_tail('worker')}")

    def state(self) -> dict[str, object]:
        """The master's JSON status (workers, running and completed applications)."""
        url = f"http://127.0.0.1:{self.webui_port}/json/"
        with urllib.request.urlopen(url, timeout=2) as r:
            state: dict[str, object] = json.load(r)
        return state

    async def __aexit__(self, *exc: object) -> None:
        for proc in reversed(self.procs):
            await terminate(proc, 15)
        self.procs.clear()

    def log_tail(self, name: str, lines: int = 20) -> str:
        try:
            text = (self.folder / f"{name}.log").read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])
