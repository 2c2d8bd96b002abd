"""A real Prometheus (the ``prometheus`` binary on PATH) on loopback, scraping given targets every
second, and its HTTP query API: for tests that check queries against what a sidecar exposes."""

from __future__ import annotations

import asyncio
import shutil
import time
from pathlib import Path
from typing import Any

import aiohttp
import yaml

from testkit.processes import spawn_logged, terminate
from testkit.sidecar_process import free_port


class Prometheus:
    """``async with Prometheus(folder, {"timesync": ["127.0.0.1:8080"]}) as prom: await prom.query(...)``"""

    def __init__(self, folder: Path, jobs: dict[str, list[str]], scrape_interval: str = "1s") -> None:
        self.folder = folder
        self.port = free_port()
        self.config = {
            "global": {"scrape_interval": scrape_interval, "evaluation_interval": scrape_interval},
            "scrape_configs": [
                {"job_name": job, "static_configs": [{"targets": targets}]} for job, targets in jobs.items()
            ],
        }
        self.log_path = folder / "prometheus.log"
        self.proc: asyncio.subprocess.Process | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def __aenter__(self) -> Prometheus:
        binary = shutil.which("prometheus")
        if binary is None:
            raise FileNotFoundError("prometheus is not on PATH")
        (self.folder / "prometheus.yml").write_text(yaml.safe_dump(self.config))
        self.proc = await spawn_logged(
            [
                binary,
                f"--config.file={self.folder / 'prometheus.yml'}",
                f"--storage.tsdb.path={self.folder / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--storage.tsdb.retention.time=1h",
            ],
            self.log_path,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.returncode is not None:
                raise RuntimeError(f"prometheus exited with {self.proc.returncode}: {self.log_tail()}")
            try:
                async with aiohttp.ClientSession() as s, s.get(f"{self.url}/-/ready") as r:
                    if r.status == 200:
                        return self
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.1)
        raise RuntimeError(f"prometheus not ready within 30 s: {self.log_tail()}")

    async def __aexit__(self, *exc: object) -> None:
        if self.proc is not None:
            await terminate(self.proc, 10)

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    async def api(self, path: str, **params: str) -> Any:
        """``GET /api/v1/<path>``; the ``data`` of a successful answer (raises on an error)."""
        async with aiohttp.ClientSession() as s, s.get(f"{self.url}/api/v1/{path}", params=params) as r:
            body = await r.json()
        if body.get("status") != "success":
            raise AssertionError(f"{path} {params}: {body.get('errorType')}: {body.get('error')}")
        return body["data"]

    async def query(self, expr: str) -> list[dict[str, Any]]:
        """An instant query's result vector: ``[{"metric": {...}, "value": [t, "v"]}, ...]``."""
        data = await self.api("query", query=expr)
        assert data["resultType"] == "vector", data
        return list(data["result"])

    async def label_values(self, label: str, match: str) -> list[str]:
        """What Grafana's ``label_values(match, label)`` asks Prometheus."""
        return list(await self.api(f"label/{label}/values", **{"match[]": match}))
