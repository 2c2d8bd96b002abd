"""Run ``timesync-sidecar offsets reset`` as a process, as an operator would, and read a group's
committed offsets back."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from dataclasses import dataclass

from aiokafka.admin import AIOKafkaAdminClient

from sidecar.service import claim


@dataclass(frozen=True, slots=True)
class Result:
    returncode: int
    stdout: str
    stderr: str


async def reset(bootstrap: str, inputs: list[str], output: str, *args: str, **settings: object) -> Result:
    """``python -m sidecar offsets reset --set ... ARGS`` for a sidecar of ``inputs`` into
    ``output`` (its group is ``timesync-<output>`` unless ``group_id`` is among ``settings``);
    not a terminal and ``CI=true``, so the plan is plain lines."""
    keys = {"bootstrap.servers": bootstrap, "input.topics": ",".join(inputs), "output.topic": output}
    keys.update({k.replace("_", "."): str(v) for k, v in settings.items()})
    argv = [sys.executable, "-m", "sidecar", "offsets", "reset", *args]
    for key, value in keys.items():
        argv += ["--set", f"{key}={value}"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIMESYNC_")}
    env["CI"] = "true"
    proc = await asyncio.create_subprocess_exec(
        *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return Result(proc.returncode, out.decode(), err.decode())


async def committed(bootstrap: str, group: str) -> dict[tuple[str, int], int]:
    """The group's committed offset per (topic, partition)."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        offsets = await admin.list_consumer_group_offsets(group)
    finally:
        await admin.close()
    return {(tp.topic, tp.partition): int(o.offset) for tp, o in offsets.items() if o.offset >= 0}


async def committed_metadata(bootstrap: str, group: str) -> list[str]:
    """The metadata of the group's committed offsets (where a single-task sidecar's claim is)."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        offsets = await admin.list_consumer_group_offsets(group)
    finally:
        await admin.close()
    return [str(o.metadata or "") for o in offsets.values()]


async def until_released(bootstrap: str, group: str) -> None:
    """Check that a clean stop left no fresh ``running`` claim of a single-task sidecar on
    ``group``: the stopped claim is committed before the process exits, so a reset (or another
    host) may go at once. (Once, about one short run in eight still showed ``running`` after exit
    0 — a periodic commit landing after the stopped one; fixed, and this checks it stays so.)"""
    now = int(time.time() * 1000)
    claims = [claim.decode(m) for m in await committed_metadata(bootstrap, group)]
    held = claim.conflict(claims, "", now)
    assert held is None, f"group {group} still has a running claim after a clean stop: {held}"
