"""Child processes of the benchmark: started with their output in a log file, stopped politely.

Every system the benchmark runs (the sidecar, the passthrough, the Kafka Streams JVM) is a child
process that must leave nothing behind: a run measures one system at a time on two cores, and a
straggler would be in the next system's figures.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Mapping
from pathlib import Path
from typing import Any


async def spawn_logged(
    argv: list[str],
    log_path: Path,
    *,
    stdout: Any = None,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> asyncio.subprocess.Process:
    """Start ``argv`` (in ``cwd``, default this process's) with stderr — and stdout, unless another
    target is given — appended to ``log_path``; stdin is closed so a child never waits on a
    terminal."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    log = open(log_path, "ab")  # noqa: SIM115 - the child holds its own copy of the descriptor
    try:
        return await asyncio.create_subprocess_exec(
            *argv,
            stdout=log if stdout is None else stdout,
            stderr=log,
            stdin=asyncio.subprocess.DEVNULL,
            env=dict(env) if env is not None else None,
            cwd=cwd,
        )
    finally:
        log.close()


async def terminate(proc: asyncio.subprocess.Process, timeout_s: float, sig: int = signal.SIGTERM) -> bool:
    """Send ``sig`` and wait up to ``timeout_s``; kill it if it is still there. True if it exited
    by itself (or had already exited), False if it had to be killed."""
    if proc.returncode is not None:
        return True
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(sig)
    try:
        await asyncio.wait_for(proc.wait(), timeout_s)
        return True
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()
        return False
