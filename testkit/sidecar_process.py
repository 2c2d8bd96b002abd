"""Run ``timesync-sidecar`` as a real process: for the demo, the benchmark and the tests.

A separate process is what users run, and the only honest way to see exit codes, signal
handling, memory and CPU of the merging process.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import aiohttp

from testkit.processes import spawn_logged, terminate


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class SidecarError(RuntimeError):
    pass


class SidecarProcess:
    """``async with SidecarProcess(bootstrap, inputs, output, {"max.task.idle.ms": "0"}) as s: ...``"""

    def __init__(
        self,
        bootstrap: str,
        inputs: list[str],
        output: str,
        settings: Mapping[str, object] | None = None,
        log_dir: str | Path | None = None,
        env: Mapping[str, str] | None = None,
        checkout: Path | None = None,
    ) -> None:
        """``checkout``: run the sidecar of another checkout of the repository, by the Python of its
        ``.venv`` and from its folder (``-m`` puts the working folder first on the path), as the
        bench's before/after comparison does (``python -m bench ab``); default this one's."""
        self.http_port = free_port()
        self.settings: dict[str, object] = {
            "bootstrap.servers": bootstrap,
            "input.topics": ",".join(inputs),
            "output.topic": output,
            "http.port": self.http_port,
            "watermark.heartbeat.ms": 1000,
            **(settings or {}),
        }
        self.env = env
        self.checkout = checkout
        folder = Path(log_dir) if log_dir else Path(tempfile.mkdtemp(prefix="timesync-sidecar-"))
        self.log_path = folder / f"sidecar-{self.http_port}.log"
        self.proc: asyncio.subprocess.Process | None = None
        self.returncode: int | None = None

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def args(self) -> list[str]:
        python = str(self.checkout / ".venv" / "bin" / "python") if self.checkout else sys.executable
        out = [python, "-m", "sidecar"]
        for key, value in self.settings.items():
            out += ["--set", f"{key}={value}"]
        return out

    async def start(self, wait: str | None = "healthy", timeout_s: float = 60.0) -> SidecarProcess:
        """Start; with ``wait="healthy"`` return once ``/healthz`` says 200 (or fail with the log)."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("TIMESYNC_")}
        env.update(self.env or {})
        self.proc = await spawn_logged(self.args(), self.log_path, env=env, cwd=self.checkout)
        if wait == "healthy":
            await self.wait_healthy(timeout_s)
        return self

    async def wait_healthy(self, timeout_s: float = 60.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.returncode is not None:
                raise SidecarError(f"sidecar exited with {self.proc.returncode}:\n{self.log_tail()}")
            with contextlib.suppress(aiohttp.ClientError, OSError):
                code, _ = await self.get("/healthz")
                if code == 200:
                    return
            await asyncio.sleep(0.1)
        raise SidecarError(f"sidecar not healthy within {timeout_s} s:\n{self.log_tail()}")

    async def get(self, path: str) -> tuple[int, Any]:
        return await self.request("GET", path)

    async def request(
        self, method: str, path: str, headers: Mapping[str, str] | None = None
    ) -> tuple[int, Any]:
        """An HTTP call to the sidecar: (status, JSON body or text)."""
        url = f"http://127.0.0.1:{self.http_port}{path}"
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as session,
            session.request(method, url, headers=headers) as r,
        ):
            body = await r.json() if r.content_type == "application/json" else await r.text()
            return r.status, body

    async def status(self) -> dict[str, Any]:
        _, body = await self.get("/status")
        return body  # type: ignore[no-any-return]

    async def metrics(self) -> str:
        _, body = await self.get("/metrics")
        return str(body)

    async def stop(self, sig: int = signal.SIGTERM, timeout_s: float = 60.0) -> int:
        """Signal the process and wait for it; returns its exit code."""
        proc = self.proc
        if proc is None:
            return 0
        if not await terminate(proc, timeout_s, sig):
            raise SidecarError(f"sidecar ignored signal {sig} for {timeout_s} s:\n{self.log_tail()}")
        assert proc.returncode is not None  # terminate waited for it
        self.returncode = proc.returncode
        return proc.returncode

    async def kill(self) -> int:
        return await self.stop(signal.SIGKILL)

    async def wait(self, timeout_s: float = 60.0) -> int:
        assert self.proc is not None
        return await asyncio.wait_for(self.proc.wait(), timeout_s)

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    async def __aenter__(self) -> SidecarProcess:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()
