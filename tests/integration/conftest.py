"""Fixtures for tests that run the sidecar against the real broker."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from testkit.sidecar_process import SidecarProcess

StartSidecar = Callable[..., Awaitable[SidecarProcess]]


@pytest.fixture
async def sidecar(bootstrap: str, tmp_path: Path) -> AsyncIterator[StartSidecar]:
    """Start sidecar processes; every one still running is stopped (and its log shown) at the end."""
    started: list[SidecarProcess] = []

    async def start(
        inputs: list[str], output: str, wait: str | None = "healthy", **settings: object
    ) -> SidecarProcess:
        process = SidecarProcess(
            bootstrap, inputs, output, {k.replace("_", "."): v for k, v in settings.items()}, log_dir=tmp_path
        )
        started.append(process)
        return await process.start(wait=wait)

    yield start
    await stop_and_show(started)


async def stop_and_show(started: list[SidecarProcess]) -> None:
    """Stop every sidecar still running and print the tail of each log, for the failure report."""
    for process in started:
        if process.proc is not None and process.proc.returncode is None:
            await process.stop()
        print(f"--- sidecar log {process.log_path} ---\n{process.log_tail(15)}")
